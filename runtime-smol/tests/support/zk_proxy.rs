//! A TCP proxy on loopback in front of a ZooKeeper server that can cut a
//! connection right after forwarding a create request (or a multi, the
//! shape of every fenced store write), before its reply: the AURORA-1061
//! situation (the request is applied, the client sees `ConnectionLoss`,
//! then reconnects with the same session). It can also sever every
//! connection it carries at once (a cut link; the client reconnects).
//! In latency mode ([`ZkProxy::set_latency`]) every byte reaches the other
//! side a fixed time after the proxy read it, in both directions: a
//! ZooKeeper ensemble in another region. Mid-burst cuts
//! ([`ZkProxy::sever_after_multis`]) sever every connection right after the
//! n-th multi (a fenced store write) passed, counting how many multis were
//! still unanswered at that moment, and [`ZkProxy::refuse`] keeps ZooKeeper
//! out of reach for as long as a test wants (a cut longer than a session).
#![allow(dead_code)]

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// ZooKeeper op codes of create requests (create, create2).
const CREATE_OPS: [i32; 2] = [1, 15];

/// ZooKeeper's op code of a multi request.
const MULTI_OP: i32 = 14;

#[derive(Default)]
struct Shared {
    trap: Mutex<Option<String>>,
    multi_trap: Mutex<Option<Vec<u8>>>,
    /// The multi trap holds instead of cutting (see [`ZkProxy::arm_multi_hold`]).
    hold: AtomicBool,
    /// A held trap fired: nothing passes any more, no connection is taken.
    held: AtomicBool,
    fired: AtomicUsize,
    stop: AtomicBool,
    /// One-way latency added to every byte, in microseconds (0: none), so a
    /// sub-millisecond round trip (0.2 ms) can be set.
    latency_us: AtomicU64,
    conns: Mutex<Vec<TcpStream>>,
    /// Sever every connection once this many more multis passed (0: off)
    /// and [`Shared::sever_in_flight`] of them are unanswered.
    sever_after: AtomicUsize,
    /// See [`ZkProxy::sever_after_multis`].
    sever_in_flight: AtomicUsize,
    /// Multis passed since [`ZkProxy::sever_after_multis`] was armed.
    multis_seen: AtomicUsize,
    /// Multis of the severing connection still unanswered when it fired.
    in_flight_at_cut: AtomicUsize,
    /// New connections are closed at once (see [`ZkProxy::refuse`]).
    refusing: AtomicBool,
}

/// The xids of one connection's multis forwarded towards the server whose
/// reply has not been written to the client yet: what the client has in
/// flight.
type Pending = Arc<Mutex<HashSet<i32>>>;

/// The proxy; stops accepting and cuts every connection on drop.
pub struct ZkProxy {
    port: u16,
    shared: Arc<Shared>,
}

impl ZkProxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub fn start(upstream: String) -> ZkProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = conn else { continue };
                if s.held.load(Ordering::SeqCst) || s.refusing.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else { continue };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut conns = s.conns.lock().unwrap();
                    conns.push(client.try_clone().unwrap());
                    conns.push(server.try_clone().unwrap());
                }
                let cut = Arc::new(AtomicBool::new(false));
                let pending = Pending::default();
                let (c2, s2, cut2, sh2, p2) = (
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    cut.clone(),
                    s.clone(),
                    pending.clone(),
                );
                std::thread::spawn(move || server_to_client(s2, c2, cut2, sh2, p2));
                let s3 = s.clone();
                std::thread::spawn(move || client_to_server(client, server, cut, s3, pending));
            }
        });
        ZkProxy { port, shared }
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The next create request whose path contains `pattern` is forwarded,
    /// then both sides of its connection are closed before the reply can
    /// pass. Fires once.
    pub fn arm_create_trap(&self, pattern: &str) {
        *self.shared.trap.lock().unwrap() = Some(pattern.to_owned());
    }

    /// The next multi request whose bytes contain `pattern` (a store
    /// write's node path, e.g. `/state/w-w2`) is forwarded, then both sides
    /// of its connection are closed before the reply can pass. Fires once.
    pub fn arm_multi_trap(&self, pattern: &str) {
        *self.shared.multi_trap.lock().unwrap() = Some(pattern.as_bytes().to_vec());
    }

    /// Like [`ZkProxy::arm_multi_trap`], but once the multi is forwarded
    /// the proxy goes silent instead of cutting: nothing more passes either
    /// way on any connection and new connections are closed at once, so
    /// the server has applied exactly what came before and with the
    /// trapped multi, and the client learns nothing (until its own timeouts
    /// say the connection is lost). Fires once.
    pub fn arm_multi_hold(&self, pattern: &str) {
        self.shared.hold.store(true, Ordering::SeqCst);
        self.arm_multi_trap(pattern);
    }

    /// Cuts every connection carried now (the proxy keeps accepting, so the
    /// client reconnects, within its session if quick enough).
    pub fn sever(&self) {
        for c in self.shared.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Once at least `n` more multi requests (fenced store writes) have
    /// passed and `in_flight` of its connection's multis (the one passing
    /// included) have no reply written back to the client, severs every
    /// connection at once, as [`ZkProxy::sever`] (the client reconnects at
    /// once unless [`ZkProxy::refuse`] is on). What was still on its way to
    /// the server through a delayed link is lost with the connection, so
    /// the server applied a prefix of what the client sent, and no reply
    /// after the cut reaches the client. Fires once; [`ZkProxy::fired`]
    /// counts it, [`ZkProxy::in_flight_at_cut`] says how many multis were
    /// unanswered then.
    pub fn sever_after_multis(&self, n: usize, in_flight: usize) {
        self.shared.multis_seen.store(0, Ordering::SeqCst);
        self.shared.sever_in_flight.store(in_flight, Ordering::SeqCst);
        self.shared.sever_after.store(n.max(1), Ordering::SeqCst);
    }

    /// How many multis of the severed connection had been forwarded with no
    /// reply written back to the client when [`ZkProxy::sever_after_multis`]
    /// fired, the last one included (0 before).
    pub fn in_flight_at_cut(&self) -> usize {
        self.shared.in_flight_at_cut.load(Ordering::SeqCst)
    }

    /// While `on`, every new connection is closed at once (ZooKeeper out of
    /// reach); connections carried now are left alone (sever them too for a
    /// full cut).
    pub fn refuse(&self, on: bool) {
        self.shared.refusing.store(on, Ordering::SeqCst);
    }

    /// From now on every byte read from either side is written to the
    /// other `one_way` later (order kept; bytes read before keep their
    /// delay). Applies to the connections carried now and later ones.
    pub fn set_latency(&self, one_way: Duration) {
        self.shared.latency_us.store(one_way.as_micros() as u64, Ordering::SeqCst);
    }

    /// How many times the trap fired.
    pub fn fired(&self) -> usize {
        self.shared.fired.load(Ordering::SeqCst)
    }
}

impl Drop for ZkProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        for c in self.shared.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

/// Writes to a stream at once, or — once a latency was set — through a
/// writer thread that writes each chunk when its delay has passed, in the
/// order the chunks came.
/// A chunk to write, when, and the xids whose replies it completes.
type Chunk = (Instant, Vec<u8>, Vec<i32>);

struct Delayed {
    stream: TcpStream,
    queue: Option<Sender<Chunk>>,
    shared: Arc<Shared>,
    /// The xids a chunk completes the replies of leave this set once the
    /// chunk is written (the client-bound direction).
    answered: Option<Pending>,
}

impl Delayed {
    fn new(stream: TcpStream, shared: Arc<Shared>) -> Delayed {
        Delayed { stream, queue: None, shared, answered: None }
    }

    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.write_answering(data, Vec::new())
    }

    /// Writes `data`, then takes `xids` (the replies it completes) out of
    /// the unanswered set.
    fn write_answering(&mut self, data: &[u8], xids: Vec<i32>) -> std::io::Result<()> {
        let latency = self.shared.latency_us.load(Ordering::SeqCst);
        if latency == 0 && self.queue.is_none() {
            self.stream.write_all(data)?;
            if let Some(a) = &self.answered {
                let mut a = a.lock().unwrap();
                for x in &xids {
                    a.remove(x);
                }
            }
            return Ok(());
        }
        let answered = self.answered.clone();
        let queue = self.queue.get_or_insert_with(|| {
            let (tx, rx) = channel::<Chunk>();
            let mut out = self.stream.try_clone().expect("clone a proxied stream");
            std::thread::spawn(move || {
                for (due, chunk, xids) in rx {
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                    if out.write_all(&chunk).is_err() {
                        let _ = out.shutdown(Shutdown::Both);
                        return;
                    }
                    if let Some(a) = &answered {
                        let mut a = a.lock().unwrap();
                        for x in &xids {
                            a.remove(x);
                        }
                    }
                }
            });
            tx
        });
        let due = Instant::now() + Duration::from_micros(latency);
        queue
            .send((due, data.to_vec(), xids))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "writer gone"))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stream.flush()
    }
}

fn server_to_client(
    mut server: TcpStream,
    client: TcpStream,
    cut: Arc<AtomicBool>,
    s: Arc<Shared>,
    pending: Pending,
) {
    let mut client_out = Delayed::new(client.try_clone().unwrap(), s.clone());
    client_out.answered = Some(pending);
    let mut buf = [0u8; 16 * 1024];
    // Replies are parsed as whole frames (4-byte length, then xid first;
    // the first frame is the connect response): a multi is answered once
    // the chunk completing its reply was written to the client.
    let mut frames: Vec<u8> = Vec::new();
    let mut first = true;
    loop {
        let n = match server.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        frames.extend_from_slice(&buf[..n]);
        let mut xids = Vec::new();
        while frames.len() >= 4 {
            let len = i32::from_be_bytes(frames[..4].try_into().unwrap()) as usize;
            if frames.len() < 4 + len {
                break;
            }
            let frame: Vec<u8> = frames.drain(..4 + len).collect();
            if !first && frame.len() >= 8 {
                xids.push(i32::from_be_bytes(frame[4..8].try_into().unwrap()));
            }
            first = false;
        }
        // A held trap: the server's replies are read and dropped, and the
        // connection stays open (closing it could make the server drop the
        // trapped request before applying it).
        if s.held.load(Ordering::SeqCst) {
            continue;
        }
        // Once the trap fired, nothing more reaches the client: the create's
        // reply is lost.
        if cut.load(Ordering::SeqCst) || client_out.write_answering(&buf[..n], xids).is_err() {
            break;
        }
    }
    let latency = s.latency_us.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_micros(latency));
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}

/// Forwards whole frames (4-byte length, then the body); the first frame of
/// a connection is the connect request, every later one starts with xid and
/// op code.
fn client_to_server(
    mut client: TcpStream,
    server: TcpStream,
    cut: Arc<AtomicBool>,
    s: Arc<Shared>,
    unanswered: Pending,
) {
    let mut server = Delayed::new(server, s.clone());
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let mut first = true;
    loop {
        let n = match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        while pending.len() >= 4 {
            let len = i32::from_be_bytes(pending[..4].try_into().unwrap()) as usize;
            if pending.len() < 4 + len {
                break;
            }
            let frame: Vec<u8> = pending.drain(..4 + len).collect();
            let first_frame = first;
            let trapped = !first && is_trapped_create(&frame, &s);
            first = false;
            if trapped && s.hold.load(Ordering::SeqCst) {
                cut.store(true, Ordering::SeqCst);
                s.held.store(true, Ordering::SeqCst);
                let _ = server.write_all(&frame);
                let _ = server.flush();
                s.fired.fetch_add(1, Ordering::SeqCst);
                // Silent from now on: read and drop what the client sends.
                while !s.stop.load(Ordering::SeqCst) {
                    match client.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                return;
            }
            if s.held.load(Ordering::SeqCst) {
                continue;
            }
            if trapped {
                cut.store(true, Ordering::SeqCst);
                s.fired.fetch_add(1, Ordering::SeqCst);
                let _ = server.write_all(&frame);
                let _ = server.flush();
                // Let the server apply it, then close both sides.
                std::thread::sleep(Duration::from_millis(300));
                let _ = client.shutdown(Shutdown::Both);
                let _ = server.stream.shutdown(Shutdown::Both);
                return;
            }
            let multi = !first_frame && op_of(&frame) == Some(MULTI_OP);
            if multi {
                let xid = i32::from_be_bytes(frame[4..8].try_into().unwrap());
                unanswered.lock().unwrap().insert(xid);
            }
            if server.write_all(&frame).is_err() {
                return;
            }
            if multi && s.sever_after.load(Ordering::SeqCst) > 0 {
                let seen = s.multis_seen.fetch_add(1, Ordering::SeqCst) + 1;
                let n = unanswered.lock().unwrap().len();
                if seen >= s.sever_after.load(Ordering::SeqCst)
                    && n >= s.sever_in_flight.load(Ordering::SeqCst)
                {
                    s.sever_after.store(0, Ordering::SeqCst);
                    s.in_flight_at_cut.store(n, Ordering::SeqCst);
                    s.fired.fetch_add(1, Ordering::SeqCst);
                    for c in s.conns.lock().unwrap().drain(..) {
                        let _ = c.shutdown(Shutdown::Both);
                    }
                    return;
                }
            }
        }
    }
    // Let what is on its way arrive before the server sees the end.
    let latency = s.latency_us.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_micros(latency));
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.stream.shutdown(Shutdown::Both);
}

/// The op code of a request frame (length, xid, op code...).
fn op_of(frame: &[u8]) -> Option<i32> {
    Some(i32::from_be_bytes(frame.get(8..12)?.try_into().ok()?))
}

fn is_trapped_create(frame: &[u8], s: &Shared) -> bool {
    // len(4) xid(4) op(4) path: len(4) bytes
    if frame.len() < 16 {
        return false;
    }
    let op = i32::from_be_bytes(frame[8..12].try_into().unwrap());
    if op == MULTI_OP {
        let mut trap = s.multi_trap.lock().unwrap();
        let hit = trap
            .as_deref()
            .is_some_and(|p| !p.is_empty() && frame.windows(p.len()).any(|w| w == p));
        if hit {
            *trap = None;
        }
        return hit;
    }
    if !CREATE_OPS.contains(&op) {
        return false;
    }
    let plen = i32::from_be_bytes(frame[12..16].try_into().unwrap());
    if plen < 0 || frame.len() < 16 + plen as usize {
        return false;
    }
    let path = String::from_utf8_lossy(&frame[16..16 + plen as usize]).into_owned();
    let mut trap = s.trap.lock().unwrap();
    match trap.as_deref() {
        Some(p) if path.contains(p) => {
            *trap = None;
            true
        }
        _ => false,
    }
}

//! Connections on blocking sockets: TCP, the optional cluster-secret
//! handshake, and framing. The blocking twin of `regent_smol::net`.
//!
//! Every connection runs as two threads: a reader (handshake, then frames
//! into [`NetEvent`]s delivered to the daemon's sink) and a writer (queued
//! [`Outbound`] messages sealed and written in order). Nothing here decides
//! protocol: the handshake and the frame MACs are `regent_core::auth`, the
//! frames are `regent_core::codec`, and what a message means is up to the
//! machine the daemon drives.
//!
//! Every connection is bounded: a maximum frame size (checked before the body
//! is buffered, by [`FrameReader`]), a handshake deadline (the read timeout
//! is the time left of it), an idle deadline (the read timeout after the
//! handshake) and a write timeout of the same length (a peer that stops
//! reading cannot hold a writer forever). Garbage, an oversized frame, a
//! wrong cluster or a wrong secret close that one connection, with a log
//! line naming the peer and the reason.
//!
//! Ending: the daemon's [`ConnHandle::close`] makes the writer flush what was queued and shut the socket down, which
//! ends the reader; a reader that fails shuts the socket down and stops the
//! writer. Either way the sink hears one [`NetEvent::Closed`], whose reason
//! is `"closed"` when the daemon closed it.

use regent_core::auth::{self, FrameReader, Handshake, Secret, Session, Side, Step};
use regent_core::codec::DecoderConfig;
use regent_core::protocol::Message;
use regent_core::ConnId;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Stack size of connection threads: they hold little on the stack (the
/// read buffer is on the heap), and a master may run thousands of them.
pub const CONN_STACK: usize = 128 * 1024;

/// How connections behave.
#[derive(Debug)]
pub struct NetConfig {
    /// This node's cluster; a `Hello` naming another is refused.
    pub cluster: String,
    /// The cluster secret: when set, every connection authenticates and
    /// every frame carries a MAC.
    pub secret: Option<Secret>,
    /// The largest frame body accepted.
    pub max_frame: usize,
    /// How long the handshake (with a secret) may take.
    pub handshake_timeout: Duration,
    /// A connection silent this long is closed.
    pub idle_timeout: Duration,
    /// Allow dialling a non-loopback address without a secret (operator
    /// tools check this; daemons also take it in their own options).
    pub insecure: bool,
}

impl NetConfig {
    /// Defaults: 1 MiB frames, 5 s handshake, 60 s idle (the same as the
    /// smol runtime's).
    pub fn new(cluster: impl Into<String>, secret: Option<Secret>) -> Self {
        NetConfig {
            cluster: cluster.into(),
            secret,
            max_frame: regent_core::codec::DEFAULT_MAX_FRAME,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
            insecure: false,
        }
    }
}

/// What connections report to the daemon.
#[derive(Debug)]
pub enum NetEvent {
    /// A whole message arrived.
    Message {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// The connection is gone (closed by either side, or refused). Always
    /// the last event of a connection.
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why, for the log (`"closed"` when the daemon closed it).
        reason: String,
    },
}

/// What the daemon asks a connection to do.
#[derive(Debug)]
pub enum Outbound {
    /// Send a message.
    Message(Message),
    /// Flush what was sent before, then close.
    Close,
}

/// The daemon's end of one connection. Close it with [`ConnHandle::close`]:
/// dropping it alone leaves the connection open until the peer closes it or
/// it falls idle.
#[derive(Clone, Debug)]
pub struct ConnHandle {
    /// The connection's number.
    pub conn: ConnId,
    /// The peer's address, for logs.
    pub peer: String,
    tx: Sender<Outbound>,
}

impl ConnHandle {
    /// Queues `msg` (dropped if the connection is gone). Never blocks.
    pub fn send(&self, msg: Message) {
        let _ = self.tx.send(Outbound::Message(msg));
    }

    /// Flushes and closes. Never blocks.
    pub fn close(&self) {
        let _ = self.tx.send(Outbound::Close);
    }
}

/// 32 bytes from OS entropy.
pub fn nonce() -> [u8; 32] {
    let mut n = [0u8; 32];
    getrandom::fill(&mut n).expect("the OS entropy source is available");
    n
}

/// A u64 from OS entropy (incarnations, instance ids, GUIDs).
pub fn random_u64() -> u64 {
    u64::from_le_bytes(nonce()[..8].try_into().expect("8 bytes"))
}

/// An id that grows with the process's start time: wall-clock milliseconds
/// in the high bits, 16 bits of OS entropy below. Worker incarnations and
/// subscriber instances are such ids, so the master can tell a newer process
/// from an older one whose message arrives late.
pub fn time_ordered_id() -> u64 {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    (ms << 16) | (random_u64() & 0xffff)
}

/// Refuses a non-loopback address without a secret unless `insecure`.
pub fn check_exposure(addr: &SocketAddr, has_secret: bool, insecure: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || has_secret || insecure {
        Ok(())
    } else {
        Err(format!(
            "refusing {addr}: it is not a loopback address and no --secret-file is given \
             (anyone who can reach it could join the cluster); pass --secret-file, or \
             --insecure to accept the risk"
        ))
    }
}

/// The exposure rule for a ZooKeeper connect string (`host:port,...`,
/// optionally followed by a `/chroot`): without a secret and unless
/// `insecure`, every host must resolve to loopback addresses only. Checked
/// before anything is dialled; the error names the host (and the address it
/// resolves to). A host without a port means port 2181. With a secret or
/// `insecure` nothing is resolved.
pub fn check_zk_exposure(connect: &str, has_secret: bool, insecure: bool) -> Result<(), String> {
    use std::net::{IpAddr, ToSocketAddrs};
    if has_secret || insecure {
        return Ok(());
    }
    let hosts = connect.split('/').next().unwrap_or("");
    for host in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let with_port = if host.parse::<IpAddr>().is_ok() {
            // A bare address (an IPv6 one has colons but no port).
            SocketAddr::new(host.parse().expect("just parsed"), 2181).to_string()
        } else if host.ends_with(']') || !host.contains(':') {
            format!("{host}:2181")
        } else {
            host.to_string()
        };
        let resolved: Vec<SocketAddr> = with_port
            .to_socket_addrs()
            .map_err(|e| {
                format!(
                    "cannot resolve ZooKeeper host {host} to check that it is loopback: {e} \
                     (without --secret-file only loopback ZooKeeper hosts are allowed, unless \
                     --insecure)"
                )
            })?
            .collect();
        if let Some(exposed) = resolved.iter().find(|a| !a.ip().is_loopback()) {
            return Err(format!(
                "refusing ZooKeeper host {host} ({}): it is not a loopback address and no \
                 --secret-file is given (anyone who can reach it could plant records the next \
                 leader trusts); pass --secret-file, or --insecure to accept the risk",
                exposed.ip()
            ));
        }
        if resolved.is_empty() {
            return Err(format!("ZooKeeper host {host} resolves to no address"));
        }
    }
    Ok(())
}

/// The start of a close reason when the handshake refused the peer (wrong
/// cluster, wrong secret, unsupported version): both runtimes' connections
/// write it, and a client takes it as a configuration error not worth
/// retrying ([`is_handshake_refusal`]).
pub const HANDSHAKE_REFUSED: &str = "handshake refused";

/// Whether a close reason (possibly wrapped, e.g. "connection closed: ...")
/// says the handshake refused the peer.
pub fn is_handshake_refusal(reason: &str) -> bool {
    reason.contains(HANDSHAKE_REFUSED)
}

/// A close reason that is a refusal of the peer (rather than a plain close).
pub fn is_refusal(reason: &str) -> bool {
    !(reason == "closed" || reason.starts_with("peer closed") || reason.starts_with("read failed"))
}

/// Starts the threads of a connection over `stream`; `side` says who
/// dialled. `sink` receives the connection's events on its reader thread;
/// it must not block for long (send on a channel).
///
/// Fails only when the OS refuses a thread or a socket clone; the stream is
/// then dropped (closed).
pub fn spawn_connection(
    stream: TcpStream,
    side: Side,
    conn: ConnId,
    cfg: Arc<NetConfig>,
    sink: impl Fn(NetEvent) + Send + 'static,
) -> std::io::Result<ConnHandle> {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    let (tx, rx) = mpsc::channel();
    let handle = ConnHandle { conn, peer: peer.clone(), tx: tx.clone() };
    let wstream = stream.try_clone()?;
    std::thread::Builder::new()
        .name(format!("regent-conn-{}", conn.0))
        .stack_size(CONN_STACK)
        .spawn(move || {
            let closing = Arc::new(AtomicBool::new(false));
            let result = run(stream, wstream, side, conn, &cfg, &sink, rx, tx, &closing);
            let reason = match result {
                Ok(()) => "closed".to_string(),
                Err(reason) => reason,
            };
            tracing::debug!(%peer, %conn, %reason, "connection ended");
            sink(NetEvent::Closed { conn, reason });
        })?;
    Ok(handle)
}

fn read_some(
    stream: &mut TcpStream,
    buf: &mut [u8],
    what: &str,
    d: Duration,
) -> Result<usize, String> {
    loop {
        return match stream.read(buf) {
            Ok(0) => Err("peer closed the connection".into()),
            Ok(n) => Ok(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Err(format!("{what} timed out after {d:?}"))
            }
            Err(e) => Err(format!("read failed: {e}")),
        };
    }
}

fn write_frame(stream: &mut TcpStream, frame: &[u8]) -> Result<(), String> {
    stream.write_all(frame).map_err(|e| format!("write failed: {e}"))
}

fn handshake(
    stream: &mut TcpStream,
    reader: &mut FrameReader,
    side: Side,
    secret: &Secret,
    timeout: Duration,
) -> Result<Session, String> {
    let deadline = Instant::now() + timeout;
    let mut hs = match side {
        Side::Client => {
            let (hs, frame) = Handshake::client(secret, nonce());
            write_frame(stream, &frame)?;
            hs
        }
        Side::Server => Handshake::server(secret, nonce()),
    };
    let mut buf = vec![0u8; 4096];
    loop {
        while let Some(body) = reader.next_body().map_err(|e| e.to_string())? {
            match hs.receive(body) {
                Step::Send(frame) => write_frame(stream, &frame)?,
                Step::Established { frame, session } => {
                    if let Some(frame) = frame {
                        write_frame(stream, &frame)?;
                    }
                    return Ok(session);
                }
                Step::Failed { error, frame } => {
                    if let Some(frame) = frame {
                        let _ = stream.write_all(&frame);
                    }
                    return Err(format!("{HANDSHAKE_REFUSED}: {error}"));
                }
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("handshake timed out after {timeout:?}"));
        }
        stream.set_read_timeout(Some(left)).map_err(|e| format!("read failed: {e}"))?;
        let n = read_some(stream, &mut buf, "handshake", timeout)?;
        reader.feed(&buf[..n]).map_err(|e| e.to_string())?;
    }
}

/// The writer thread: seals in the order frames go on the wire, batching
/// whatever is queued into one write.
fn write_loop(
    mut stream: TcpStream,
    mut sealer: auth::FrameSealer,
    rx: Receiver<Outbound>,
    closing: Arc<AtomicBool>,
) {
    let mut out = Vec::with_capacity(4096);
    'outer: while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        let mut close = false;
        while let Some(o) = next.take() {
            match o {
                Outbound::Message(msg) => sealer.seal_into(&msg, &mut out),
                Outbound::Close => {
                    close = true;
                    break;
                }
            }
            if out.len() >= 64 * 1024 {
                break;
            }
            next = rx.try_recv().ok();
        }
        if !out.is_empty() {
            if stream.write_all(&out).is_err() {
                break 'outer;
            }
            out.clear();
        }
        if close {
            break;
        }
    }
    // Whoever stops first ends the connection; the reader then reports it.
    closing.store(true, Ordering::SeqCst);
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Both);
}

#[allow(clippy::too_many_arguments)]
fn run(
    mut rstream: TcpStream,
    wstream: TcpStream,
    side: Side,
    conn: ConnId,
    cfg: &NetConfig,
    sink: &impl Fn(NetEvent),
    rx: Receiver<Outbound>,
    stop_writer: Sender<Outbound>,
    closing: &Arc<AtomicBool>,
) -> Result<(), String> {
    let mut reader = FrameReader::new(match cfg.secret {
        Some(_) => auth::HANDSHAKE_MAX_BODY,
        None => cfg.max_frame,
    });
    let session = match &cfg.secret {
        None => Session::plain(),
        Some(secret) => {
            match handshake(&mut rstream, &mut reader, side, secret, cfg.handshake_timeout) {
                Ok(s) => s,
                Err(e) => {
                    let _ = rstream.shutdown(Shutdown::Both);
                    return Err(e);
                }
            }
        }
    };
    reader.set_max_body(session.opener.max_body(cfg.max_frame));
    let Session { sealer, mut opener } = session;
    let _ = wstream.set_write_timeout(Some(cfg.idle_timeout));
    let writer_closing = closing.clone();
    let writer = std::thread::Builder::new()
        .name(format!("regent-conn-{}-w", conn.0))
        .stack_size(CONN_STACK)
        .spawn(move || write_loop(wstream, sealer, rx, writer_closing));
    if let Err(e) = writer {
        let _ = rstream.shutdown(Shutdown::Both);
        return Err(format!("cannot start the writer thread: {e}"));
    }
    let _ = rstream.set_read_timeout(Some(cfg.idle_timeout));
    let decoder = DecoderConfig { max_frame: cfg.max_frame, cluster: Some(cfg.cluster.clone()) };
    let mut buf = vec![0u8; 64 * 1024];
    let result = (|| loop {
        while let Some(body) = reader.next_body().map_err(|e| e.to_string())? {
            let msg = opener.open(body, &decoder).map_err(|e| e.to_string())?;
            sink(NetEvent::Message { conn, msg });
        }
        let n = read_some(&mut rstream, &mut buf, "idle connection", cfg.idle_timeout)?;
        reader.feed(&buf[..n]).map_err(|e| e.to_string())?;
    })();
    // Did the writer end the connection first (the daemon closed it, or a
    // write failed)? Then the read failed because of that: a plain close.
    // Decided before the reader stops the writer itself, so the reader's own
    // refusal (wrong cluster, bad frame) is never reported as "closed".
    let ended_by_writer = closing.load(Ordering::SeqCst);
    // Stop the writer (it may be blocked on its queue) and the socket (it
    // may be blocked writing).
    let _ = rstream.shutdown(Shutdown::Both);
    let _ = stop_writer.send(Outbound::Close);
    if ended_by_writer {
        return Ok(());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::protocol::{Hello, Role, PROTOCOL_VERSION};
    use std::net::TcpListener;

    fn hello(cluster: &str) -> Message {
        Message::Hello(Hello {
            version: PROTOCOL_VERSION,
            cluster: cluster.into(),
            role: Role::Worker,
            node: "w".into(),
        })
    }

    fn pair(
        server: NetConfig,
        client: NetConfig,
    ) -> (ConnHandle, Receiver<NetEvent>, ConnHandle, Receiver<NetEvent>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        let (stx, srx) = mpsc::channel();
        let (ctx, crx) = mpsc::channel();
        let sh = spawn_connection(s, Side::Server, ConnId(1), Arc::new(server), move |e| {
            let _ = stx.send(e);
        })
        .unwrap();
        let ch = spawn_connection(c, Side::Client, ConnId(2), Arc::new(client), move |e| {
            let _ = ctx.send(e);
        })
        .unwrap();
        (sh, srx, ch, crx)
    }

    fn next(rx: &Receiver<NetEvent>) -> NetEvent {
        rx.recv_timeout(Duration::from_secs(10)).expect("an event within 10 s")
    }

    #[test]
    fn zookeeper_hosts_follow_the_exposure_rule_and_are_named() {
        assert!(check_zk_exposure("127.0.0.1:2181,[::1]:2182/regent", false, false).is_ok());
        assert!(check_zk_exposure("localhost", false, false).is_ok());
        let err = check_zk_exposure("127.0.0.1:2181,192.0.2.1:2181", false, false).unwrap_err();
        assert!(err.contains("192.0.2.1:2181"), "{err}");
        assert!(err.contains("--insecure"), "{err}");
        let err = check_zk_exposure("192.0.2.7", false, false).unwrap_err();
        assert!(err.contains("192.0.2.7"), "{err}");
        assert!(check_zk_exposure("192.0.2.1:2181", true, false).is_ok());
        assert!(check_zk_exposure("192.0.2.1:2181", false, true).is_ok());
    }

    #[test]
    fn plain_messages_flow_both_ways_and_close_is_reported() {
        let (sh, srx, ch, crx) = pair(NetConfig::new("c", None), NetConfig::new("c", None));
        ch.send(hello("c"));
        assert!(matches!(next(&srx), NetEvent::Message { msg: Message::Hello(_), .. }));
        sh.send(Message::StateRequest);
        assert!(matches!(next(&crx), NetEvent::Message { msg: Message::StateRequest, .. }));
        ch.close();
        assert!(matches!(next(&crx), NetEvent::Closed { ref reason, .. } if reason == "closed"));
        assert!(matches!(next(&srx), NetEvent::Closed { ref reason, .. } if !is_refusal(reason)));
    }

    #[test]
    fn sealed_messages_flow_with_the_same_secret() {
        let s = || Some(Secret::new(b"0123456789abcdef-secret".to_vec()).unwrap());
        let (_sh, srx, ch, _crx) = pair(NetConfig::new("c", s()), NetConfig::new("c", s()));
        ch.send(hello("c"));
        assert!(matches!(next(&srx), NetEvent::Message { msg: Message::Hello(_), .. }));
    }

    #[test]
    fn a_wrong_secret_is_refused_naming_the_handshake() {
        let s = |b: &[u8]| Some(Secret::new(b.to_vec()).unwrap());
        let (_sh, srx, ch, _crx) = pair(
            NetConfig::new("c", s(b"0123456789abcdef-one")),
            NetConfig::new("c", s(b"0123456789abcdef-two")),
        );
        ch.send(hello("c"));
        match next(&srx) {
            NetEvent::Closed { reason, .. } => {
                assert!(reason.contains("handshake"), "{reason}");
                assert!(is_refusal(&reason));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wrong_cluster_closes_the_connection() {
        let (_sh, srx, ch, _crx) = pair(NetConfig::new("c", None), NetConfig::new("other", None));
        ch.send(hello("other"));
        match next(&srx) {
            NetEvent::Closed { reason, .. } => assert!(reason.contains("cluster"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_oversized_frame_is_refused_before_its_body() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let (tx, rx) = mpsc::channel();
        let mut cfg = NetConfig::new("c", None);
        cfg.max_frame = 1024;
        let _h = spawn_connection(s, Side::Server, ConnId(1), Arc::new(cfg), move |e| {
            let _ = tx.send(e);
        })
        .unwrap();
        c.write_all(&(1u32 << 30).to_be_bytes()).unwrap();
        match next(&rx) {
            NetEvent::Closed { reason, .. } => assert!(reason.contains("exceeds"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_silent_peer_times_out() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let (tx, rx) = mpsc::channel();
        let mut cfg = NetConfig::new("c", Some(Secret::new(b"0123456789abcdef".to_vec()).unwrap()));
        cfg.handshake_timeout = Duration::from_millis(200);
        let _h = spawn_connection(s, Side::Server, ConnId(1), Arc::new(cfg), move |e| {
            let _ = tx.send(e);
        })
        .unwrap();
        match next(&rx) {
            NetEvent::Closed { reason, .. } => assert!(reason.contains("timed out"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }
}

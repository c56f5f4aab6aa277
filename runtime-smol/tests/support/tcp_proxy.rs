//! A plain TCP proxy on loopback in front of one address (a master's
//! listen port), forwarding bytes both ways without looking at them. The
//! fast-takeover tests advertise a master through it, so that the
//! master's *advertised* address can die (or blink) while its process
//! lives on:
//!
//! * [`TcpProxy::sever`] cuts every connection it carries (each client sees
//!   EOF) and keeps listening: connects are still accepted.
//! * [`TcpProxy::stop`] closes its listening socket first — when it
//!   returns, a `connect()` to the port is refused — then cuts every
//!   connection.
//! * [`TcpProxy::restart`] stops, then listens again on the same port at
//!   once (a blink: the port refuses for microseconds).
//! * [`TcpProxy::hold`] turns it into a black hole: every connection, carried
//!   or new, stays open and every byte either way is dropped silently (a
//!   switch that loses packets: no EOF, no reset, writes succeed), until
//!   [`TcpProxy::release`].
//!
//! Dropping it stops it. Self-contained (no `super::`).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the (non-blocking) acceptor looks for connections and for a
/// stop.
const ACCEPT_POLL: Duration = Duration::from_millis(5);

#[derive(Default)]
struct Shared {
    /// Both sockets of every connection carried (cut by `sever`/`stop`).
    conns: Mutex<Vec<TcpStream>>,
    /// Connections accepted since the proxy first started.
    accepted: AtomicUsize,
    /// Bytes are dropped instead of forwarded ([`TcpProxy::hold`]).
    held: AtomicBool,
}

/// The proxy (see the module docs).
pub struct TcpProxy {
    port: u16,
    upstream: String,
    shared: Arc<Shared>,
    /// The running acceptor: its stop flag and thread (it owns the
    /// listening socket, closed when the thread ends).
    acceptor: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl TcpProxy {
    /// Listens on `127.0.0.1:port` and forwards every connection to
    /// `upstream`.
    pub fn start(port: u16, upstream: &str) -> TcpProxy {
        let mut p = TcpProxy {
            port,
            upstream: upstream.to_owned(),
            shared: Arc::new(Shared::default()),
            acceptor: None,
        };
        p.listen();
        p
    }

    fn listen(&mut self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port))
            .unwrap_or_else(|e| panic!("the proxy cannot listen on port {}: {e}", self.port));
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let (s, upstream, stop2) = (self.shared.clone(), self.upstream.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        s.accepted.fetch_add(1, Ordering::SeqCst);
                        let _ = client.set_nonblocking(false);
                        forward(client, &upstream, &s);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(ACCEPT_POLL)
                    }
                    Err(_) => std::thread::sleep(ACCEPT_POLL),
                }
            }
            // `listener` drops here: the port refuses from now on.
        });
        self.acceptor = Some((stop, thread));
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The listening port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connections accepted so far (over every restart).
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Drops every byte of every connection, carried or new, either way,
    /// silently: nothing is closed (see the module docs).
    pub fn hold(&self) {
        self.shared.held.store(true, Ordering::SeqCst);
    }

    /// Forwards bytes again after [`TcpProxy::hold`] (what was dropped
    /// stays lost).
    pub fn release(&self) {
        self.shared.held.store(false, Ordering::SeqCst);
    }

    /// Cuts every connection carried now; keeps accepting new ones.
    pub fn sever(&self) {
        for c in self.shared.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Closes the listening socket (a `connect()` to the port is refused
    /// once this returns), then cuts every connection carried.
    pub fn stop(&mut self) {
        if let Some((stop, thread)) = self.acceptor.take() {
            stop.store(true, Ordering::SeqCst);
            let _ = thread.join();
        }
        self.sever();
    }

    /// [`TcpProxy::stop`], then listens on the same port again at once.
    pub fn restart(&mut self) {
        self.stop();
        self.listen();
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Dials `upstream` for `client` and copies bytes both ways (a thread per
/// direction); a client whose upstream cannot be reached is closed.
fn forward(client: TcpStream, upstream: &str, s: &Arc<Shared>) {
    let Ok(server) = TcpStream::connect(upstream) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else { return };
    {
        let mut conns = s.conns.lock().unwrap();
        if let (Ok(c3), Ok(s3)) = (client.try_clone(), server.try_clone()) {
            conns.push(c3);
            conns.push(s3);
        }
    }
    let (s1, s2_) = (s.clone(), s.clone());
    std::thread::spawn(move || copy(client, server, &s1));
    std::thread::spawn(move || copy(s2, c2, &s2_));
}

/// Copies `from` to `to` until either side ends, then closes both; while
/// the proxy is held, what is read is dropped.
fn copy(mut from: TcpStream, mut to: TcpStream, s: &Shared) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            // A close is dropped too: the other side never learns of it.
            Ok(0) | Err(_) if s.held.load(Ordering::SeqCst) => return,
            Ok(0) | Err(_) => break,
            Ok(_) if s.held.load(Ordering::SeqCst) => {}
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

//! HTTPS for a master's HTTP face (`--http` with `--tls-cert`): a TLS front
//! on the public address, relaying each connection's plaintext to the
//! HTTP server ([`super::serve_on_with`]) bound on an ephemeral loopback
//! port.
//!
//! The HTTP server is tiny_http, whose own TLS is an old rustls; the front
//! runs this crate's rustls instead, with the node's certificate and no
//! client certificate asked for (a browser has none: the bearer token
//! authorizes, required as on the public address even on the inner one).
//! One thread per connection, at most [`MAX_CONNECTIONS`] at once; a
//! connection idle for [`IDLE`] is closed. The material in force is read
//! per connection, so a reload (SIGHUP) applies to the next one.

use super::{HttpError, HttpQuery};
use crate::tls::TlsContext;
use rustix::event::{poll, PollFd, PollFlags};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// HTTPS connections relayed at once at most; past it a connection is
/// closed at once (logged).
pub const MAX_CONNECTIONS: usize = 64;

/// A connection with nothing moving either way for this long is closed.
pub const IDLE: Duration = Duration::from_secs(300);

/// Serves HTTPS on `addr`: the front's accept thread and the HTTP server's
/// thread (see the module docs). `token` as for [`super::serve_with`].
pub fn serve_tls(
    addr: SocketAddr,
    token: Option<super::Tokens>,
    queries: async_channel::Sender<HttpQuery>,
    tls: Arc<TlsContext>,
) -> Result<std::thread::JoinHandle<()>, HttpError> {
    let public =
        TcpListener::bind(addr).map_err(|e| HttpError::Bind { addr, source: Box::new(e) })?;
    let inner = super::bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let inner_addr = inner.server_addr().to_ip().ok_or_else(|| HttpError::Bind {
        addr,
        source: "the inner server has no address".into(),
    })?;
    let server = super::serve_on_with(inner, token, queries.clone());
    tracing::info!(%addr, "HTTPS listening (TLS in front of the HTTP server)");
    let live = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("regent-https".into())
        .spawn(move || {
            for stream in public.incoming() {
                if queries.is_closed() {
                    break;
                }
                let stream = match stream {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!("HTTPS: accept failed: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                };
                if live.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    live.fetch_sub(1, Ordering::SeqCst);
                    tracing::warn!("HTTPS: {MAX_CONNECTIONS} connections open; one more closed");
                    continue;
                }
                let (live, config) = (live.clone(), tls.https());
                let spawned =
                    std::thread::Builder::new().name("regent-https-conn".into()).spawn(move || {
                        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                        if let Err(e) = relay(stream, inner_addr, config) {
                            tracing::debug!(%peer, "HTTPS connection ended: {e}");
                        }
                        live.fetch_sub(1, Ordering::SeqCst);
                    });
                if let Err(e) = spawned {
                    tracing::warn!("HTTPS: no thread for a connection: {e}");
                }
            }
        })
        .map_err(|e| HttpError::Bind { addr, source: Box::new(e) })?;
    Ok(server)
}

/// Relays one connection: TLS records from and to `tcp`, plaintext to and
/// from the HTTP server at `inner`, until either end closes.
fn relay(
    mut tcp: TcpStream,
    inner: SocketAddr,
    config: Arc<rustls::ServerConfig>,
) -> std::io::Result<()> {
    let mut tls = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut up = TcpStream::connect(inner)?;
    tcp.set_nonblocking(true)?;
    let mut buf = vec![0u8; 16 * 1024];
    let idle = rustix::time::Timespec { tv_sec: IDLE.as_secs() as i64, tv_nsec: 0 };
    loop {
        while tls.wants_write() {
            match tls.write_tls(&mut tcp) {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        // The server's answer is read only once what came before it is
        // written: a slow client holds the server back, not memory.
        let pending = tls.wants_write();
        let tcp_flags = if pending { PollFlags::IN | PollFlags::OUT } else { PollFlags::IN };
        let up_flags =
            if pending || tls.is_handshaking() { PollFlags::empty() } else { PollFlags::IN };
        let mut fds = [PollFd::new(&tcp, tcp_flags), PollFd::new(&up, up_flags)];
        if poll(&mut fds, Some(&idle))? == 0 {
            return Err(std::io::Error::other(format!("idle for {IDLE:?}")));
        }
        let (client, server) = (fds[0].revents(), fds[1].revents());
        if client.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
            match tls.read_tls(&mut tcp) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if let Err(e) = tls.process_new_packets() {
                let _ = tls.write_tls(&mut tcp);
                return Err(std::io::Error::other(crate::tls::describe(&e)));
            }
            loop {
                match tls.reader().read(&mut buf) {
                    Ok(0) => return Ok(()),
                    Ok(n) => up.write_all(&buf[..n])?,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
        }
        if server.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
            let n = up.read(&mut buf)?;
            if n == 0 {
                tls.send_close_notify();
                tcp.set_nonblocking(false)?;
                while tls.wants_write() {
                    tls.write_tls(&mut tcp)?;
                }
                return Ok(());
            }
            tls.writer().write_all(&buf[..n])?;
        }
    }
}

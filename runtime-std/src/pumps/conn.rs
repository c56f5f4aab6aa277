//! Connections on blocking sockets, for the blocking pumps: TCP, the
//! optional cluster-secret handshake, and framing. The blocking twin of
//! `regent_smol::net`; what both share is [`crate::net`].
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
//! is the time left of it), a read timeout and a write timeout scaled with
//! the heartbeat interval ([`NetConfig::read_timeout`],
//! [`NetConfig::write_timeout`]), and a bounded send queue ([`SendQueue`]):
//! a peer that stops reading is disconnected once its queue passes
//! `regent_core::limits::MAX_SEND_QUEUE_BYTES` or a write to it makes no
//! progress for the write timeout. [`ConnHandle::send`] never blocks.
//! Garbage, an oversized frame, a wrong cluster, a wrong secret or a peer
//! that does not read close that one connection, with a log line naming the
//! peer and the reason; nothing queued is ever dropped while the connection
//! stays open.
//!
//! Ending: the daemon's [`ConnHandle::close`] makes the writer flush what was queued and shut the socket down, which
//! ends the reader; a reader that fails shuts the socket down and stops the
//! writer. Either way the sink hears one [`NetEvent::Closed`], whose
//! [`CloseCause`] is [`CloseCause::Local`] when the daemon closed it.

use crate::net::{
    fill_batch, nonce, probe_error, probe_target, Admit, Batch, CloseCause, NetConfig, NetEvent,
    Outbound, SendQueue,
};
use regent_core::auth::{self, FrameReader, Handshake, Session, Side, Step};
use regent_core::codec::{self, DecoderConfig};
use regent_core::protocol::Message;
#[cfg(test)]
use regent_core::secret::Secret;
use regent_core::token::Claims;
use regent_core::ConnId;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Stack size of connection threads: they hold little on the stack (the
/// read buffer is on the heap), and a master may run thousands of them.
pub const CONN_STACK: usize = 128 * 1024;

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
    queue: Arc<SendQueue>,
    /// The socket (shared with the reader and the writer), shut down when
    /// the send queue overflows (the writer may be blocked writing, the
    /// reader reading).
    socket: Arc<TcpStream>,
}

impl ConnHandle {
    /// Queues `msg`. Never blocks. Past the send queue's bound the
    /// connection is closed instead (its reader then reports `Closed` with
    /// the reason); on a connection already closing, `msg` goes nowhere.
    pub fn send(&self, msg: Message) {
        let frame = codec::encode(&msg);
        match self.queue.admit(frame.len()) {
            Admit::Queue { cost } => {
                let _ = self.tx.send(Outbound::Frame { frame, cost });
            }
            Admit::Overflow { cause } => {
                tracing::debug!(peer = %self.peer, conn = %self.conn, reason = %cause, "closing");
                let _ = self.socket.shutdown(Shutdown::Both);
            }
            Admit::Closed => {}
        }
    }

    /// Flushes and closes. Never blocks.
    pub fn close(&self) {
        let _ = self.tx.send(Outbound::Close);
    }

    /// Bytes queued for this peer and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.queue.bytes()
    }
}

impl crate::conns::Named for ConnHandle {
    fn peer(&self) -> &str {
        &self.peer
    }
}

impl crate::conns::Peer for ConnHandle {
    fn send(&self, msg: Message) {
        ConnHandle::send(self, msg)
    }
    fn close(&self) {
        ConnHandle::close(self)
    }
}

/// The fast takeover's probe: a bare `connect()` to `addr` (an `ip:port`,
/// never resolved) within `timeout`, closed at once. `ECONNREFUSED` is
/// [`ProbeResult::Refused`](regent_core::node::ProbeResult::Refused).
pub fn probe(addr: &str, timeout: std::time::Duration) -> regent_core::node::ProbeResult {
    use regent_core::node::ProbeResult;
    let sa = match probe_target(addr) {
        Ok(sa) => sa,
        Err(failed) => return failed,
    };
    match TcpStream::connect_timeout(&sa, timeout) {
        Ok(_) => ProbeResult::Accepted,
        Err(e) => probe_error(&e),
    }
}

/// Starts the threads of a connection over `stream`; `side` says who
/// dialled. `sink` receives the connection's events on its reader thread;
/// it must not block for long (send on a channel).
///
/// Fails only when the OS refuses a thread; the stream is then dropped
/// (closed). The reader, the writer and the handle share one socket.
pub fn spawn_connection(
    stream: TcpStream,
    side: Side,
    conn: ConnId,
    cfg: Arc<NetConfig>,
    sink: impl Fn(NetEvent) + Send + 'static,
) -> std::io::Result<ConnHandle> {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    let (tx, rx) = mpsc::channel();
    let queue = Arc::new(SendQueue::new(cfg.clone()));
    let socket = Arc::new(stream);
    let handle = ConnHandle {
        conn,
        peer: peer.clone(),
        tx: tx.clone(),
        queue: queue.clone(),
        socket: socket.clone(),
    };
    std::thread::Builder::new()
        .name(format!("regent-conn-{}", conn.0))
        .stack_size(CONN_STACK)
        .spawn(move || {
            let closing = Arc::new(AtomicBool::new(false));
            let ends = Ends { rx, stop_writer: tx, closing: &closing, queue: &queue };
            let result = run(socket, side, conn, &cfg, &sink, ends);
            // Whatever is still queued will never be written.
            queue.close();
            let cause = result.err().unwrap_or(CloseCause::Local);
            tracing::debug!(%peer, %conn, reason = %cause, "connection ended");
            sink(NetEvent::Closed { conn, cause });
        })?;
    Ok(handle)
}

fn read_some(
    mut stream: &TcpStream,
    buf: &mut [u8],
    what: &'static str,
    d: Duration,
) -> Result<usize, CloseCause> {
    loop {
        return match stream.read(buf) {
            Ok(0) => Err(CloseCause::PeerClosed),
            Ok(n) => Ok(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Err(CloseCause::TimedOut { what, after: d })
            }
            Err(e) => Err(CloseCause::read(&e)),
        };
    }
}

fn write_frame(mut stream: &TcpStream, frame: &[u8]) -> Result<(), CloseCause> {
    stream.write_all(frame).map_err(|e| CloseCause::write(&e))
}

fn handshake(
    mut stream: &TcpStream,
    reader: &mut FrameReader,
    started: (Handshake, Option<Vec<u8>>),
    timeout: Duration,
) -> Result<(Session, Option<Claims>), CloseCause> {
    let deadline = Instant::now() + timeout;
    let (mut hs, first) = started;
    if let Some(frame) = first {
        write_frame(stream, &frame)?;
    }
    let mut buf = vec![0u8; 4096];
    loop {
        while let Some(body) = reader.next_body().map_err(CloseCause::frame)? {
            match hs.receive(body) {
                Step::Send(frame) => write_frame(stream, &frame)?,
                Step::Established { frame, session } => {
                    if let Some(frame) = frame {
                        write_frame(stream, &frame)?;
                    }
                    let claims = match hs.side() {
                        Side::Server => hs.token_claims().cloned(),
                        Side::Client => None,
                    };
                    return Ok((session, claims));
                }
                Step::Failed { error, frame } => {
                    if let Some(frame) = frame {
                        let _ = stream.write_all(&frame);
                    }
                    return Err(CloseCause::HandshakeRefused(error));
                }
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CloseCause::TimedOut { what: "handshake", after: timeout });
        }
        stream.set_read_timeout(Some(left)).map_err(|e| CloseCause::read(&e))?;
        let n = read_some(stream, &mut buf, "handshake", timeout)?;
        reader.feed(&buf[..n]).map_err(CloseCause::frame)?;
    }
}

/// The writer thread: seals in the order frames go on the wire, batching
/// whatever is queued into one write. A write that makes no progress for
/// the write timeout (the socket's `SO_SNDTIMEO`, set again when the
/// heartbeat interval changes it) ends the connection, and says so through
/// the queue.
fn write_loop(
    socket: Arc<TcpStream>,
    mut sealer: auth::FrameSealer,
    rx: Receiver<Outbound>,
    closing: Arc<AtomicBool>,
    queue: Arc<SendQueue>,
    cfg: Arc<NetConfig>,
) {
    let mut stream: &TcpStream = &socket;
    let mut out = Vec::with_capacity(4096);
    let mut timeout = None;
    'outer: while let Ok(first) = rx.recv() {
        let Batch { cost, close } = fill_batch(first, || rx.try_recv().ok(), &mut sealer, &mut out);
        if !out.is_empty() {
            let d = cfg.write_timeout();
            if timeout != Some(d) {
                let _ = stream.set_write_timeout(Some(d));
                timeout = Some(d);
            }
            if let Err(e) = stream.write_all(&out) {
                if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
                    queue.fail(CloseCause::WriteStalled { after: d });
                }
                break 'outer;
            }
            out.clear();
            queue.written(cost);
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

/// The writer's side of a connection, as the reader thread holds it.
struct Ends<'a> {
    rx: Receiver<Outbound>,
    stop_writer: Sender<Outbound>,
    closing: &'a Arc<AtomicBool>,
    queue: &'a Arc<SendQueue>,
}

fn run(
    socket: Arc<TcpStream>,
    side: Side,
    conn: ConnId,
    cfg: &Arc<NetConfig>,
    sink: &impl Fn(NetEvent),
    ends: Ends<'_>,
) -> Result<(), CloseCause> {
    let Ends { rx, stop_writer, closing, queue } = ends;
    let rstream: &TcpStream = &socket;
    let mut reader = FrameReader::new(match cfg.authenticates(side) {
        true => auth::HANDSHAKE_MAX_BODY,
        false => cfg.max_frame,
    });
    let (session, claims) = match cfg.start_handshake(side, nonce()) {
        None => (Session::plain(), None),
        Some(started) => {
            match started.and_then(|s| handshake(rstream, &mut reader, s, cfg.handshake_timeout)) {
                Ok(s) => s,
                Err(e) => {
                    let _ = rstream.shutdown(Shutdown::Both);
                    return Err(e);
                }
            }
        }
    };
    if let Some(claims) = claims {
        sink(NetEvent::Authenticated { conn, claims: Box::new(claims) });
    }
    reader.set_max_body(session.opener.max_body(cfg.max_frame));
    let Session { sealer, mut opener } = session;
    let writer_closing = closing.clone();
    let (wqueue, wcfg, wsocket) = (queue.clone(), cfg.clone(), socket.clone());
    let writer = std::thread::Builder::new()
        .name(format!("regent-conn-{}-w", conn.0))
        .stack_size(CONN_STACK)
        .spawn(move || write_loop(wsocket, sealer, rx, writer_closing, wqueue, wcfg));
    if let Err(e) = writer {
        let _ = rstream.shutdown(Shutdown::Both);
        return Err(CloseCause::NoWriter(e.to_string()));
    }
    let decoder = DecoderConfig { max_frame: cfg.max_frame, cluster: Some(cfg.cluster.clone()) };
    let mut buf = vec![0u8; 64 * 1024];
    let mut timeout = None;
    let result = (|| loop {
        while let Some(body) = reader.next_body().map_err(CloseCause::frame)? {
            let msg = opener.open(body, &decoder).map_err(CloseCause::Refused)?;
            sink(NetEvent::Message { conn, msg });
        }
        // The heartbeat interval may have changed: the timeout follows.
        let d = cfg.read_timeout();
        if timeout != Some(d) {
            let _ = rstream.set_read_timeout(Some(d));
            timeout = Some(d);
        }
        let n = read_some(rstream, &mut buf, "idle connection", d)?;
        reader.feed(&buf[..n]).map_err(CloseCause::frame)?;
    })();
    // Did the send side end the connection (its queue overflowed, a write
    // made no progress)? That is the reason, whatever the read saw.
    if let Some(failure) = queue.failure() {
        let _ = rstream.shutdown(Shutdown::Both);
        let _ = stop_writer.send(Outbound::Close);
        return Err(failure);
    }
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
    use regent_core::limits;
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
    fn plain_messages_flow_both_ways_and_close_is_reported() {
        let (sh, srx, ch, crx) = pair(NetConfig::new("c", None), NetConfig::new("c", None));
        ch.send(hello("c"));
        assert!(matches!(next(&srx), NetEvent::Message { msg: Message::Hello(_), .. }));
        sh.send(Message::StateRequest);
        assert!(matches!(next(&crx), NetEvent::Message { msg: Message::StateRequest, .. }));
        ch.close();
        assert!(matches!(next(&crx), NetEvent::Closed { cause: CloseCause::Local, .. }));
        match next(&srx) {
            NetEvent::Closed { cause, .. } => {
                assert!(!cause.is_refusal(), "{cause}");
                assert_eq!(cause.ended(), regent_core::node::Ended::ByPeer, "{cause}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sealed_messages_flow_with_the_same_secret() {
        let s = || Some(Secret::new(b"0123456789abcdef-secret".to_vec()).unwrap());
        let (_sh, srx, ch, _crx) = pair(NetConfig::new("c", s()), NetConfig::new("c", s()));
        ch.send(hello("c"));
        assert!(matches!(next(&srx), NetEvent::Message { msg: Message::Hello(_), .. }));
    }

    #[test]
    fn a_token_holder_dials_and_the_server_hears_its_claims_first() {
        use regent_core::token::{Capability, Claims, Token, TokenId};
        let secret = Secret::new(b"0123456789abcdef-secret".to_vec()).unwrap();
        let claims = Claims {
            id: TokenId([1; 16]),
            name: "rack1".into(),
            key_id: 1,
            capabilities: [Capability::Worker].into_iter().collect(),
            tenant: None,
            frameworks: None,
            workers: Some("rack1-".into()),
            issued_ms: 0,
            expires_ms: None,
        };
        let mut client = NetConfig::new("c", None);
        client.token = Some(Token::issue(&secret, &claims).unwrap());
        let (_sh, srx, ch, _crx) = pair(NetConfig::new("c", Some(secret.clone())), client);
        ch.send(hello("c"));
        match next(&srx) {
            NetEvent::Authenticated { claims: seen, .. } => assert_eq!(*seen, claims),
            other => panic!("{other:?}"),
        }
        assert!(matches!(next(&srx), NetEvent::Message { msg: Message::Hello(_), .. }));
        // A token of another cluster is refused, naming the token.
        let other = Secret::new(b"another cluster's secret!".to_vec()).unwrap();
        let mut client = NetConfig::new("c", None);
        client.token = Some(Token::issue(&other, &claims).unwrap());
        let (_sh, srx, ch, crx) = pair(NetConfig::new("c", Some(secret)), client);
        ch.send(hello("c"));
        for rx in [&srx, &crx] {
            match next(rx) {
                NetEvent::Closed { cause, .. } => {
                    assert!(cause.to_string().contains("token not accepted"), "{cause}");
                }
                other => panic!("{other:?}"),
            }
        }
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
            NetEvent::Closed { cause, .. } => {
                assert!(cause.to_string().contains("handshake"), "{cause}");
                assert!(cause.is_refusal() && cause.is_handshake_refusal(), "{cause}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_wrong_cluster_closes_the_connection() {
        let (_sh, srx, ch, _crx) = pair(NetConfig::new("c", None), NetConfig::new("other", None));
        ch.send(hello("other"));
        match next(&srx) {
            NetEvent::Closed { cause, .. } => {
                assert!(cause.to_string().contains("cluster"), "{cause}")
            }
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
            NetEvent::Closed { cause, .. } => {
                assert!(cause.to_string().contains("exceeds"), "{cause}")
            }
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
            NetEvent::Closed { cause, .. } => {
                assert!(cause.to_string().contains("timed out"), "{cause}");
                assert_eq!(cause.ended(), regent_core::node::Ended::TimedOut, "{cause}");
            }
            other => panic!("{other:?}"),
        }
    }

    fn big(n: usize) -> Message {
        Message::Hello(Hello {
            version: PROTOCOL_VERSION,
            cluster: "c".into(),
            role: Role::Worker,
            node: "x".repeat(n),
        })
    }

    /// A server connection to a raw client socket that never reads; sends
    /// `msg` every `pause` until the connection reports `Closed` (bounded);
    /// returns the reason.
    fn flood_until_closed(
        cfg: NetConfig,
        msg: Message,
        pause: Duration,
    ) -> (CloseCause, Arc<NetConfig>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let (tx, rx) = mpsc::channel();
        let cfg = Arc::new(cfg);
        let h = spawn_connection(s, Side::Server, ConnId(1), cfg.clone(), move |e| {
            let _ = tx.send(e);
        })
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "the non-reading peer was never disconnected");
            h.send(msg.clone());
            match rx.try_recv() {
                Ok(NetEvent::Closed { cause, .. }) => return (cause, cfg),
                Ok(other) => panic!("{other:?}"),
                Err(_) => std::thread::sleep(pause),
            }
        }
    }

    #[test]
    fn a_peer_that_does_not_read_is_disconnected_past_the_queue_bound() {
        let mut cfg = NetConfig::new("c", None);
        cfg.max_send_queue = 256 * 1024;
        let (cause, cfg) = flood_until_closed(cfg, big(16 * 1024), Duration::ZERO);
        let reason = cause.to_string();
        assert!(reason.contains("send queue over 262144 bytes"), "{reason}");
        assert!(reason.contains("not reading") && cause.is_refusal(), "{reason}");
        assert_eq!(cfg.queued_bytes(), 0, "nothing stays counted once closed");
    }

    #[test]
    fn a_write_without_progress_times_out() {
        let cfg = NetConfig::write_timeout_only("c", Duration::from_millis(300));
        let (cause, cfg) = flood_until_closed(cfg, big(256 * 1024), Duration::from_millis(2));
        assert!(cause.to_string().contains("write timed out after 300ms"), "{cause}");
        assert_eq!(cause.ended(), regent_core::node::Ended::TimedOut, "{cause}");
        assert_eq!(cfg.queued_bytes(), 0);
    }

    #[test]
    fn under_budget_pressure_only_the_connection_holding_more_than_its_share_closes() {
        let mut cfg = NetConfig::new("c", None);
        cfg.send_queue_budget = 2 * limits::SEND_QUEUE_SHARE_UNDER_PRESSURE;
        let cfg = Arc::new(cfg);
        let (a, b) = (SendQueue::new(cfg.clone()), SendQueue::new(cfg.clone()));
        let small = SendQueue::new(cfg.clone());
        assert!(matches!(small.admit(100), Admit::Queue { .. }));
        let frame = 64 * 1024;
        // `a` fills past its share while the budget holds: fine.
        let mut a_bytes = 0;
        while a_bytes < 2 * limits::SEND_QUEUE_SHARE_UNDER_PRESSURE - 200_000 {
            let Admit::Queue { cost } = a.admit(frame) else { panic!("under budget") };
            a_bytes += cost;
        }
        // `b` (under its share) takes the process past the budget: `b` and
        // `small` keep sending, `a` (over its share) closes at its next frame.
        while cfg.queued_bytes() <= cfg.send_queue_budget {
            assert!(matches!(b.admit(frame), Admit::Queue { .. }));
        }
        assert!(matches!(b.admit(frame), Admit::Queue { .. }));
        match a.admit(frame) {
            Admit::Overflow { cause } => {
                assert!(cause.to_string().contains("not reading"), "{cause}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(small.admit(100), Admit::Queue { .. }));
        assert_eq!(a.admit(1), Admit::Closed);
        small.close();
        b.close();
        assert_eq!(cfg.queued_bytes(), 0);
    }
}

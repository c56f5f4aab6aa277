//! Connections: TCP, the optional cluster-secret handshake, and framing.
//!
//! This is the connection layer of the daemons with a handful of
//! connections (the worker, the subscriber, the operator tools, the load
//! generator's simulated peers); the master runs its thousands on one epoll
//! instance instead ([`crate::poller`], the same limits and the same
//! [`NetEvent`]s). Every connection here runs as two small tasks (reader and writer) that turn
//! bytes into [`NetEvent`]s and [`Outbound`] frames into bytes. Nothing
//! here decides protocol: the handshake and the frame MACs are
//! `regent_core::auth`, the frames are `regent_core::codec`, and what a
//! message means is up to the machine the daemon drives.
//!
//! Every connection is bounded: a maximum frame size (checked before the
//! body is buffered), a handshake deadline, a read timeout and a write
//! timeout scaled with the heartbeat interval ([`NetConfig::read_timeout`],
//! [`NetConfig::write_timeout`]: a write that makes no progress for the
//! write timeout closes the connection), and a bounded send queue
//! ([`SendQueue`]: a peer whose queue passes
//! `regent_core::limits::MAX_SEND_QUEUE_BYTES` does not read and is
//! disconnected). [`ConnHandle::send`] never blocks and never waits for the
//! peer. Garbage, an oversized frame, a wrong cluster, a wrong secret or a
//! peer that does not read close that one connection, with a log line
//! naming the peer and the reason; the daemon hears `Closed` as for any
//! other disconnect.
//!
//! Inbound, a reader hands each message to the daemon through `events` and
//! waits for room there before it reads on: with a bounded `events` channel
//! (the master's) a peer that sends faster than the daemon handles is held
//! back by TCP, not buffered in memory.

use async_channel::{Receiver, Sender};
// The runtime-independent parts are shared with the blocking runtime.
use regent_core::auth::{self, FrameReader, Handshake, Session, Side, Step};
use regent_core::codec::{self, DecoderConfig};
use regent_core::protocol::Message;
#[cfg(test)]
use regent_core::secret::Secret;
use regent_core::token::Claims;
use regent_core::ConnId;
pub use regent_std::net::{
    check_exposure, nonce, random_u64, Admit, CloseCause, NetConfig, NetEvent, Outbound, SendQueue,
};
use regent_std::net::{fill_batch, Batch};
use regent_std::tls::TlsContext;
use smol::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use smol::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// The daemon's end of one connection.
#[derive(Clone, Debug)]
pub struct ConnHandle {
    /// The connection's number.
    pub conn: ConnId,
    /// The peer's address, for logs.
    pub peer: String,
    tx: Sender<Outbound>,
    queue: Arc<SendQueue>,
    /// Ends the connection at once (the send queue overflowed).
    kill: Sender<()>,
}

impl ConnHandle {
    /// Queues `msg`. Never blocks. Past the send queue's bound the
    /// connection is closed instead (its reader then reports `Closed` with
    /// the reason); on a connection already closing, `msg` goes nowhere.
    pub fn send(&self, msg: Message) {
        let frame = codec::encode(&msg);
        match self.queue.admit(frame.len()) {
            Admit::Queue { cost } => {
                let _ = self.tx.try_send(Outbound::Frame { frame, cost });
            }
            Admit::Overflow { cause } => {
                tracing::debug!(peer = %self.peer, conn = %self.conn, reason = %cause, "closing");
                let _ = self.kill.try_send(());
            }
            Admit::Closed => {}
        }
    }

    /// Flushes and closes.
    pub fn close(&self) {
        let _ = self.tx.try_send(Outbound::Close);
    }

    /// Bytes queued for this peer and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.queue.bytes()
    }
}

impl regent_std::conns::Named for ConnHandle {
    fn peer(&self) -> &str {
        &self.peer
    }
}

impl regent_std::conns::Peer for ConnHandle {
    fn send(&self, msg: Message) {
        ConnHandle::send(self, msg)
    }
    fn close(&self) {
        ConnHandle::close(self)
    }
}

/// Starts the tasks of a connection over `stream`; `side` says who dialled.
/// With TLS, a dialled peer's certificate must name its IP address (a peer
/// dialled by name: [`spawn_dialled`]).
pub fn spawn_connection(
    stream: TcpStream,
    side: Side,
    conn: ConnId,
    cfg: Arc<NetConfig>,
    events: Sender<NetEvent>,
) -> ConnHandle {
    spawn_with(stream, side, None, conn, cfg, events)
}

/// Starts the tasks of a connection [`dial`] made: with TLS, the peer's
/// certificate must name the host it was dialled at.
pub fn spawn_dialled(
    dialled: Dialled,
    conn: ConnId,
    cfg: Arc<NetConfig>,
    events: Sender<NetEvent>,
) -> ConnHandle {
    let Dialled { stream, addr } = dialled;
    spawn_with(stream, Side::Client, Some(addr.0), conn, cfg, events)
}

fn spawn_with(
    stream: TcpStream,
    side: Side,
    name: Option<String>,
    conn: ConnId,
    cfg: Arc<NetConfig>,
    events: Sender<NetEvent>,
) -> ConnHandle {
    let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
    // Unbounded in frames, bounded in bytes by the queue's accounting.
    let (tx, rx) = async_channel::unbounded();
    let (kill, killed) = async_channel::bounded(1);
    let queue = Arc::new(SendQueue::new(cfg.clone()));
    let handle = ConnHandle { conn, peer: peer.clone(), tx, queue: queue.clone(), kill };
    smol::spawn(async move {
        let io = run(stream, side, name, conn, &cfg, &events, rx, queue.clone());
        let result = smol::future::or(io, async {
            // A kill ends the connection at once, for the cause the queue
            // recorded before the kill (reported below). The handle merely
            // dropped (closed after a last message) is no kill: what it
            // queued is still written.
            match killed.recv().await {
                Ok(()) => Err(CloseCause::Local),
                Err(_) => smol::future::pending().await,
            }
        })
        .await;
        // Whatever is still queued will never be written; the send side's
        // cause (overflow, write timeout) wins over what the read saw.
        let failure = queue.failure();
        queue.close();
        let cause = match (failure, result) {
            (Some(failure), _) => failure,
            (None, Ok(())) => CloseCause::Local,
            (None, Err(cause)) => cause,
        };
        tracing::debug!(%peer, %conn, reason = %cause, "connection ended");
        let _ = events.send(NetEvent::Closed { conn, cause }).await;
    })
    .detach();
    handle
}

async fn with_deadline<T>(
    d: Duration,
    what: &'static str,
    f: impl std::future::Future<Output = Result<T, CloseCause>>,
) -> Result<T, CloseCause> {
    smol::future::or(f, async {
        async_io::Timer::after(d).await;
        Err(CloseCause::TimedOut { what, after: d })
    })
    .await
}

thread_local! {
    /// Every connection's reads land here first: a connection keeps no read
    /// buffer of its own while idle (only the bytes of a partial frame, in
    /// its [`FrameReader`]), so an idle connection costs a few hundred
    /// bytes instead of a 64 KiB buffer.
    static READ_SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; 64 * 1024]);
}

/// Reads what the socket has into `reader`, through the thread's scratch
/// buffer (borrowed only inside one poll, never across an await).
async fn read_into<R: AsyncRead + Unpin>(
    stream: &mut R,
    reader: &mut FrameReader,
) -> Result<(), CloseCause> {
    use std::task::Poll;
    smol::future::poll_fn(|cx| {
        READ_SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            match std::pin::Pin::new(&mut *stream).poll_read(cx, &mut scratch[..]) {
                Poll::Ready(Ok(0)) => Poll::Ready(Err(CloseCause::PeerClosed)),
                Poll::Ready(Ok(n)) => {
                    Poll::Ready(reader.feed(&scratch[..n]).map_err(CloseCause::frame))
                }
                // TLS: the peer's end closed without a close_notify (a
                // killed process): for the fast takeover, the peer's close.
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    Poll::Ready(Err(CloseCause::PeerClosed))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(match rustls_error(&e) {
                    // A TLS alert after the handshake (TLS 1.3: a refused
                    // client certificate), named.
                    Some(tls) => CloseCause::Tls(regent_std::tls::describe(tls)),
                    None => CloseCause::read(&e),
                })),
                Poll::Pending => Poll::Pending,
            }
        })
    })
    .await
}

async fn read_some<R: AsyncRead + Unpin>(
    stream: &mut R,
    buf: &mut [u8],
) -> Result<usize, CloseCause> {
    match stream.read(buf).await {
        Ok(0) => Err(CloseCause::PeerClosed),
        Ok(n) => Ok(n),
        Err(e) => Err(CloseCause::read(&e)),
    }
}

async fn handshake<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    rstream: &mut R,
    stream: &mut W,
    reader: &mut FrameReader,
    started: (Handshake, Option<Vec<u8>>),
) -> Result<(Session, Option<Claims>), CloseCause> {
    let (mut hs, first) = started;
    if let Some(frame) = first {
        stream.write_all(&frame).await.map_err(|e| CloseCause::write(&e))?;
    }
    let mut buf = vec![0u8; 4096];
    loop {
        while let Some(body) = reader.next_body().map_err(CloseCause::frame)? {
            match hs.receive(body) {
                Step::Send(frame) => {
                    stream.write_all(&frame).await.map_err(|e| CloseCause::write(&e))?
                }
                Step::Established { frame, session } => {
                    if let Some(frame) = frame {
                        stream.write_all(&frame).await.map_err(|e| CloseCause::write(&e))?;
                    }
                    stream.flush().await.map_err(|e| CloseCause::write(&e))?;
                    let claims = match hs.side() {
                        Side::Server => hs.token_claims().cloned(),
                        Side::Client => None,
                    };
                    return Ok((session, claims));
                }
                Step::Failed { error, frame } => {
                    if let Some(frame) = frame {
                        let _ = stream.write_all(&frame).await;
                        let _ = stream.flush().await;
                    }
                    return Err(CloseCause::HandshakeRefused(error));
                }
            }
        }
        stream.flush().await.map_err(|e| CloseCause::write(&e))?;
        let n = read_some(rstream, &mut buf).await?;
        reader.feed(&buf[..n]).map_err(CloseCause::frame)?;
    }
}

/// Writes `buf` whole; a write that makes no progress for the write
/// timeout (read again for every write: the heartbeat interval may change
/// it) ends the connection, saying so through the queue.
async fn write_timed<W: AsyncWrite + Unpin>(
    stream: &mut W,
    buf: &[u8],
    cfg: &NetConfig,
    queue: &SendQueue,
) -> Result<(), ()> {
    let mut at = 0;
    // Past the bytes, a flush: TLS holds records until flushed.
    while at <= buf.len() {
        let d = cfg.write_timeout();
        let step = async {
            Some(if at < buf.len() {
                stream.write(&buf[at..]).await
            } else {
                stream.flush().await.map(|()| 1)
            })
        };
        let wrote = smol::future::or(step, async {
            async_io::Timer::after(d).await;
            None
        })
        .await;
        match wrote {
            Some(Ok(n)) if n > 0 => at += n,
            // Closed or failed: the reader reports the peer's side of it.
            Some(_) => return Err(()),
            None => {
                queue.fail(CloseCause::WriteStalled { after: d });
                return Err(());
            }
        }
    }
    Ok(())
}

/// The writer: seals in the order frames go on the wire, batching whatever
/// is queued into one write.
async fn write_loop<W: AsyncWrite + Unpin>(
    mut stream: W,
    mut sealer: auth::FrameSealer,
    rx: Receiver<Outbound>,
    cfg: Arc<NetConfig>,
    queue: Arc<SendQueue>,
) {
    // Grown by what is sent; given back after a large batch, so an idle
    // connection keeps no large buffer.
    let mut out = Vec::new();
    'outer: while let Ok(first) = rx.recv().await {
        let Batch { cost, close } = fill_batch(first, || rx.try_recv().ok(), &mut sealer, &mut out);
        if !out.is_empty() {
            if write_timed(&mut stream, &out, &cfg, &queue).await.is_err() {
                break 'outer;
            }
            out.clear();
            if out.capacity() > 64 * 1024 {
                out = Vec::new();
            }
            queue.written(cost);
        }
        if close {
            break;
        }
    }
    let _ = stream.flush().await;
    let _ = stream.close().await;
}

/// A connection's bytes: plain TCP, or TLS over it.
enum Wire {
    Plain(TcpStream),
    Tls(Box<futures_rustls::TlsStream<TcpStream>>),
}

/// Sets up TLS (or not) on `stream` for a node with TLS material: a
/// dialling side always speaks TLS; an accepting side reads the peer's
/// first byte ([`TlsContext::sniff`]) and refuses a peer that speaks the
/// other. (Without material no TLS is set up: a TLS peer's first bytes are
/// no frame's and are refused as such, `CloseCause::frame`.)
async fn secure(
    stream: TcpStream,
    side: Side,
    name: Option<String>,
    tls: &TlsContext,
) -> Result<Wire, CloseCause> {
    if side == Side::Client {
        let addr = match name {
            Some(addr) => addr,
            None => stream.peer_addr().map_err(|e| CloseCause::read(&e))?.ip().to_string(),
        };
        let name =
            regent_std::tls::server_name(&addr).map_err(|e| CloseCause::Tls(e.to_string()))?;
        let connector = futures_rustls::TlsConnector::from(tls.client());
        let tls = connector.connect(name, stream).await.map_err(tls_failure)?;
        return Ok(Wire::Tls(Box::new(futures_rustls::TlsStream::Client(tls))));
    }
    let mut first = [0u8; 1];
    match stream.peek(&mut first).await {
        Ok(0) => return Err(CloseCause::PeerClosed),
        Ok(_) => {}
        Err(e) => return Err(CloseCause::read(&e)),
    }
    match TlsContext::sniff(Some(tls), first[0]) {
        Err(reason) => {
            // What it sent is read first, so the close is a FIN: the alert
            // tells it it met TLS.
            let mut stream = stream;
            let mut sink = [0u8; 4096];
            let _ = stream.read(&mut sink).await;
            let _ = stream.write_all(&regent_std::tls::PLAIN_PEER_ALERT).await;
            Err(CloseCause::Tls(reason.to_string()))
        }
        Ok(false) => Ok(Wire::Plain(stream)),
        Ok(true) => {
            let acceptor = futures_rustls::TlsAcceptor::from(tls.server());
            let tls = acceptor.accept(stream).await.map_err(tls_failure)?;
            Ok(Wire::Tls(Box::new(futures_rustls::TlsStream::Server(tls))))
        }
    }
}

/// A failed TLS handshake. A rustls error (a certificate refused either
/// way, an alert) is a refusal, named as [`regent_std::tls::describe`] puts
/// it; anything else is the connection's failure and may be retried — the
/// peer's close in the middle says what it may mean (a node without TLS
/// closes on our first record, but so does a master killed mid-handshake).
fn tls_failure(e: std::io::Error) -> CloseCause {
    if let Some(tls) = rustls_error(&e) {
        return CloseCause::Tls(regent_std::tls::describe(tls));
    }
    match e.kind() {
        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => {
            CloseCause::ReadFailed {
                kind: e.kind(),
                message: format!(
                    "the peer closed the connection during the TLS handshake ({e}): it has no \
                     TLS material, or refused this node's"
                ),
            }
        }
        _ => CloseCause::read(&e),
    }
}

/// The rustls error an I/O error of futures-rustls carries, if any.
fn rustls_error(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())
}

#[allow(clippy::too_many_arguments)]
async fn run(
    stream: TcpStream,
    side: Side,
    name: Option<String>,
    conn: ConnId,
    cfg: &Arc<NetConfig>,
    events: &Sender<NetEvent>,
    rx: Receiver<Outbound>,
    queue: Arc<SendQueue>,
) -> Result<(), CloseCause> {
    let raw = stream.clone();
    let secured = match &cfg.tls {
        None => Ok(Wire::Plain(stream)),
        // Boxed: the TLS handshake's state lives only while it runs.
        Some(tls) => {
            let secure = Box::pin(secure(stream, side, name, tls));
            with_deadline(cfg.handshake_timeout, "TLS handshake", secure).await
        }
    };
    let result = match secured {
        Err(cause) => Err(cause),
        Ok(Wire::Plain(s)) => run_on(s.clone(), s, side, conn, cfg, events, rx, queue).await,
        Ok(Wire::Tls(tls)) => {
            let (r, w) = smol::io::split(*tls);
            run_on(r, w, side, conn, cfg, events, rx, queue).await
        }
    };
    let _ = raw.shutdown(std::net::Shutdown::Both);
    result
}

#[allow(clippy::too_many_arguments)]
async fn run_on<R: AsyncRead + Unpin, W: AsyncWrite + Unpin + Send + 'static>(
    mut rstream: R,
    mut wstream: W,
    side: Side,
    conn: ConnId,
    cfg: &Arc<NetConfig>,
    events: &Sender<NetEvent>,
    rx: Receiver<Outbound>,
    queue: Arc<SendQueue>,
) -> Result<(), CloseCause> {
    let mut reader = FrameReader::new(match cfg.authenticates(side) {
        true => auth::HANDSHAKE_MAX_BODY,
        false => cfg.max_frame,
    });
    let (session, claims) = match cfg.start_handshake(side, nonce()) {
        None => (Session::plain(), None),
        Some(started) => {
            // Boxed: the handshake's state lives only while it runs, not
            // in every connection's task for its whole life.
            Box::pin(with_deadline(
                cfg.handshake_timeout,
                "handshake",
                handshake(&mut rstream, &mut wstream, &mut reader, started?),
            ))
            .await?
        }
    };
    if let Some(claims) = claims {
        let _ = events.send(NetEvent::Authenticated { conn, claims: Box::new(claims) }).await;
    }
    reader.set_max_body(session.opener.max_body(cfg.max_frame));
    let Session { sealer, mut opener } = session;
    let writer = smol::spawn(write_loop(wstream, sealer, rx, cfg.clone(), queue));
    let decoder = DecoderConfig { max_frame: cfg.max_frame, cluster: Some(cfg.cluster.clone()) };
    let result = async {
        loop {
            while let Some(body) = reader.next_body().map_err(CloseCause::frame)? {
                let msg = opener.open(body, &decoder).map_err(CloseCause::Refused)?;
                if events.send(NetEvent::Message { conn, msg }).await.is_err() {
                    return Ok(());
                }
            }
            // Read again each time: the heartbeat interval may change it.
            let d = cfg.read_timeout();
            with_deadline(d, "idle connection", read_into(&mut rstream, &mut reader)).await?;
        }
    };
    smol::future::or(result, async {
        writer.await;
        Ok(())
    })
    .await
}

/// The callback listener ([`callback_listener`]) could not listen.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {listen} (the callback listener): {source}")]
pub struct CallbackError {
    /// The address asked for.
    pub listen: std::net::SocketAddr,
    /// The operating system's error.
    pub source: std::io::Error,
}

/// Binds a callback listener on `listen` (docs/design.md#seed-002: a new leader dials it
/// to say it leads) and accepts on a task of its own; the accepted streams
/// come out of the returned channel. Returns the bound address and the
/// task: dropping it closes the listener.
pub async fn callback_listener(
    listen: std::net::SocketAddr,
) -> Result<(std::net::SocketAddr, Receiver<TcpStream>, smol::Task<()>), CallbackError> {
    let listener = smol::net::TcpListener::bind(listen)
        .await
        .map_err(|source| CallbackError { listen, source })?;
    let bound = listener.local_addr().map_err(|source| CallbackError { listen, source })?;
    let (tx, rx) = async_channel::unbounded();
    let task = smol::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    if tx.send(stream).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!("callback listener: accept failed: {e}");
                    async_io::Timer::after(Duration::from_millis(50)).await;
                }
            }
        }
    });
    Ok((bound, rx, task))
}

/// The fast takeover's probe (the async twin of regent-std's): a bare
/// `connect()` to `addr` (an `ip:port`, never resolved) within `timeout`,
/// closed at once. `ECONNREFUSED` is [`ProbeResult::Refused`].
///
/// [`ProbeResult::Refused`]: regent_core::node::ProbeResult::Refused
pub async fn probe(addr: &str, timeout: Duration) -> regent_core::node::ProbeResult {
    use regent_core::node::ProbeResult;
    let sa = match regent_std::net::probe_target(addr) {
        Ok(sa) => sa,
        Err(failed) => return failed,
    };
    let attempt = async {
        match TcpStream::connect(sa).await {
            Ok(_) => ProbeResult::Accepted,
            Err(e) => regent_std::net::probe_error(&e),
        }
    };
    smol::future::or(attempt, async {
        async_io::Timer::after(timeout).await;
        ProbeResult::Failed { reason: format!("connecting to {addr} timed out after {timeout:?}") }
    })
    .await
}

/// A connection [`dial`] made, and the address it was dialled at (the name
/// a TLS peer's certificate must carry).
#[derive(Debug)]
pub struct Dialled {
    /// The connected socket (`TCP_NODELAY`).
    pub stream: TcpStream,
    /// What was dialled, as given.
    pub addr: regent_core::Addr,
}

/// Why dialling a master failed.
#[derive(Debug)]
pub struct DialError {
    /// What went wrong, naming the address.
    pub reason: String,
    /// Every address it resolves to was refused by [`check_exposure`] (a
    /// configuration problem, not a transient one).
    pub refused: bool,
}

/// The runtime's one dialer (the async twin of regent-std's): resolves
/// `master` and connects to its addresses in turn within `timeout`. With
/// `strict`, one resolved address refused by [`check_exposure`] refuses the
/// master before a byte goes out (a subscriber's or an operator's rule);
/// otherwise refused addresses are skipped (a worker's rule).
pub async fn dial(
    master: &regent_core::Addr,
    has_secret: bool,
    insecure: bool,
    strict: bool,
    timeout: Duration,
) -> Result<Dialled, DialError> {
    let attempt = async {
        let addrs = smol::net::resolve(master.as_str()).await.map_err(|e| DialError {
            reason: format!("cannot resolve {master}: {e}"),
            refused: false,
        })?;
        if strict {
            for a in &addrs {
                check_exposure(a, has_secret, insecure).map_err(|e| DialError {
                    reason: format!("master {master}: {e}"),
                    refused: true,
                })?;
            }
        }
        let mut err =
            DialError { reason: format!("{master} resolves to no address"), refused: false };
        let mut all_refused = !addrs.is_empty();
        for addr in addrs {
            if let Err(reason) = check_exposure(&addr, has_secret, insecure) {
                err.reason = reason.to_string();
                continue;
            }
            all_refused = false;
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(Dialled { stream, addr: master.clone() });
                }
                Err(e) => err.reason = format!("cannot connect to {addr}: {e}"),
            }
        }
        err.refused = all_refused;
        Err(err)
    };
    smol::future::or(attempt, async {
        async_io::Timer::after(timeout).await;
        Err(DialError {
            reason: format!("connecting to {master} timed out after {timeout:?}"),
            refused: false,
        })
    })
    .await
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use regent_core::protocol::{Hello, Role, PROTOCOL_VERSION};
    use regent_core::Incarnation;
    use std::time::Instant;

    /// A `Hello` of about `n` bytes (the poller's twin tests use it too).
    pub(crate) fn big(n: usize) -> Message {
        Message::Hello(Hello {
            version: PROTOCOL_VERSION,
            cluster: "c".into(),
            role: Role::Worker,
            node: "x".repeat(n),
        })
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let l = smol::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        (s, c)
    }

    /// A server connection to a raw client socket that never reads: sends
    /// `msg` every `pause` until `Closed` (bounded); returns the reason.
    fn flood_until_closed(
        cfg: NetConfig,
        msg: Message,
        pause: Duration,
    ) -> (CloseCause, Arc<NetConfig>) {
        smol::block_on(async {
            let (s, _c) = pair().await;
            let (tx, rx) = async_channel::unbounded();
            let cfg = Arc::new(cfg);
            let h = spawn_connection(s, Side::Server, ConnId(1), cfg.clone(), tx);
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                assert!(Instant::now() < deadline, "the non-reading peer was never disconnected");
                h.send(msg.clone());
                match rx.try_recv() {
                    Ok(NetEvent::Closed { cause, .. }) => return (cause, cfg),
                    Ok(other) => panic!("{other:?}"),
                    Err(_) => async_io::Timer::after(pause).await,
                };
            }
        })
    }

    #[test]
    fn a_peer_that_does_not_read_is_disconnected_past_the_queue_bound() {
        let mut cfg = NetConfig::new("c", None);
        cfg.max_send_queue = 256 * 1024;
        let (cause, cfg) = flood_until_closed(cfg, big(16 * 1024), Duration::from_micros(100));
        let reason = cause.to_string();
        assert!(reason.contains("send queue over 262144 bytes"), "{reason}");
        assert!(reason.contains("not reading") && cause.is_refusal(), "{reason}");
        assert_eq!(cfg.queued_bytes(), 0, "nothing stays counted once closed");
    }

    /// Regression (seed-002 e2e): a handle dropped right after its last
    /// `send` and `close` — a master telling a peer something and hanging
    /// up — must not cut the connection before those frames are written.
    #[test]
    fn frames_sent_before_close_reach_the_peer_when_the_handle_is_dropped() {
        smol::block_on(async {
            let (s, c) = pair().await;
            let cfg = Arc::new(NetConfig::new("c", None));
            let (stx, _srx) = async_channel::unbounded();
            let (ctx, crx) = async_channel::unbounded();
            let h = spawn_connection(s, Side::Server, ConnId(1), cfg.clone(), stx);
            let _client = spawn_connection(c, Side::Client, ConnId(2), cfg, ctx);
            h.send(big(10));
            h.send(Message::HeartbeatAck { epoch: regent_core::Epoch(3) });
            h.close();
            drop(h);
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                match smol::future::or(async { crx.recv().await.ok() }, async {
                    async_io::Timer::after(Duration::from_secs(1)).await;
                    None
                })
                .await
                {
                    Some(NetEvent::Message { msg, .. }) => got.push(msg),
                    Some(NetEvent::Closed { .. }) => break,
                    Some(NetEvent::Authenticated { .. }) | None => {}
                }
            }
            assert_eq!(got, vec![big(10), Message::HeartbeatAck { epoch: regent_core::Epoch(3) }]);
        })
    }

    #[test]
    fn a_write_without_progress_times_out() {
        let cfg = NetConfig::write_timeout_only("c", Duration::from_millis(300));
        let (cause, cfg) = flood_until_closed(cfg, big(256 * 1024), Duration::from_millis(2));
        assert!(cause.to_string().contains("write timed out after 300ms"), "{cause}");
        assert_eq!(cfg.queued_bytes(), 0);
    }

    #[test]
    fn sealed_frames_arrive_in_order_both_ways() {
        smol::block_on(async {
            let secret = || Some(Secret::new(b"0123456789abcdef-secret".to_vec()).unwrap());
            let (s, c) = pair().await;
            let (stx, srx) = async_channel::unbounded();
            let (ctx, crx) = async_channel::unbounded();
            let sh = spawn_connection(
                s,
                Side::Server,
                ConnId(1),
                Arc::new(NetConfig::new("c", secret())),
                stx,
            );
            let ch = spawn_connection(
                c,
                Side::Client,
                ConnId(2),
                Arc::new(NetConfig::new("c", secret())),
                ctx,
            );
            let hb = |i| Message::WorkerHeartbeat { incarnation: Incarnation(i) };
            for i in 0..500 {
                ch.send(hb(i));
                sh.send(hb(1_000 + i));
            }
            for (rx, base) in [(&srx, 0), (&crx, 1_000)] {
                for i in 0..500 {
                    match rx.recv().await.unwrap() {
                        NetEvent::Message { msg, .. } => assert_eq!(msg, hb(base + i)),
                        other => panic!("{other:?}"),
                    }
                }
            }
            // Counted out once written (just after the peer may have read).
            let deadline = Instant::now() + Duration::from_secs(10);
            while sh.queued_bytes() + ch.queued_bytes() > 0 {
                assert!(Instant::now() < deadline, "everything delivered is counted out");
                async_io::Timer::after(Duration::from_millis(10)).await;
            }
        })
    }
}

//! The connection layer's runtime-independent parts, shared by both
//! runtimes: how connections behave ([`NetConfig`]: timeouts scaled with the
//! heartbeat interval), the bounded send queue ([`SendQueue`]) and the write
//! batches ([`fill_batch`]), what the daemon hears of a connection
//! ([`NetEvent`], with a typed [`CloseCause`]), the exposure rule
//! ([`check_exposure`], [`check_zk_exposure`]), the fast takeover's probe
//! classification, and the ids and nonces from OS entropy. The connections
//! themselves are the runtime's: `regent_smol::net` on smol's reactor, and
//! [`crate::pumps::conn`] on blocking threads. Nothing here decides
//! protocol: the handshake and the frame MACs are `regent_core::auth`, the
//! frames are `regent_core::codec`.
use regent_core::auth;
use regent_core::codec;
use regent_core::limits;
use regent_core::protocol::Message;
use regent_core::secret::Secret;
use regent_core::{ConnId, Millis};
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A handshake just started, and the frame to send first, if any.
pub type StartedHandshake = (auth::Handshake, Option<Vec<u8>>);

/// How connections behave.
///
/// **Timeouts.** Every connection has a read timeout (nothing arrives for
/// that long: closed) and a write timeout (a write makes no progress for that
/// long: the peer is not reading, closed), both scaled with the heartbeat
/// interval in force ([`NetConfig::set_heartbeat_interval`]):
///
/// * read: `max(idle_timeout, 10 × heartbeat)` (60 s floor by default);
/// * write: `max(write_timeout_floor, 5 × heartbeat)` (15 s floor by default).
///
/// The rule and its constants are `regent_core::limits::{read_timeout,
/// write_timeout}`. A master sets the interval it tells its workers and
/// subscribers; a worker or submitter, the interval its master told it
/// (until then the default of 1 s). The floors keep idle links (a worker's
/// link to a standby master, an operator's command) from churning; the
/// multiples keep a long heartbeat interval from timing out live links.
///
/// **Send queues.** What the daemon sends to one peer and is not yet written
/// is bounded by `max_send_queue` bytes, and all peers of the process
/// together by `send_queue_budget` (see [`SendQueue`]).
#[derive(Debug)]
pub struct NetConfig {
    /// This node's cluster; a `Hello` naming another is refused.
    pub cluster: String,
    /// The cluster secret: when set, every connection authenticates and
    /// every frame carries a MAC.
    pub secret: Option<Secret>,
    /// A token (its text, `rgt1.…`) this node dials with instead of the
    /// secret (`--token-file`, docs/security.md): the handshake proves it
    /// and the master acts on its claims. Connections this node accepts
    /// still follow `secret`.
    pub token: Option<String>,
    /// The largest frame body accepted.
    pub max_frame: usize,
    /// How long the handshake (with a secret) may take.
    pub handshake_timeout: Duration,
    /// The floor of the read timeout: a connection on which nothing arrives
    /// for [`NetConfig::read_timeout`] is closed. Default
    /// `limits::READ_TIMEOUT_FLOOR` (60 s).
    pub idle_timeout: Duration,
    /// The floor of the write timeout: a write that makes no progress for
    /// [`NetConfig::write_timeout`] closes the connection. Default
    /// `limits::WRITE_TIMEOUT_FLOOR` (15 s).
    pub write_timeout_floor: Duration,
    /// The most bytes queued for one peer (`limits::MAX_SEND_QUEUE_BYTES`).
    pub max_send_queue: usize,
    /// The most bytes queued for all peers of this process together
    /// (`limits::SEND_QUEUE_BUDGET_BYTES`).
    pub send_queue_budget: usize,
    /// Allow dialling a non-loopback address without a secret (operator
    /// tools check this; daemons also take it in their own options).
    pub insecure: bool,
    /// TLS under every connection (`--tls-cert`, `--tls-key`, `--tls-ca`):
    /// the smol runtime's connection layers use it; the std runtime refuses
    /// to start with it.
    pub tls: Option<Arc<crate::tls::TlsContext>>,
    /// The heartbeat interval the timeouts scale with, ms.
    heartbeat_ms: AtomicU64,
    /// Bytes queued for all peers of this process.
    queued_total: AtomicUsize,
}

impl NetConfig {
    /// Defaults: 1 MiB frames, 5 s handshake, the timeout floors, queue
    /// bounds and a 1 s heartbeat interval of `regent_core::limits` (the
    /// same as the smol runtime's).
    pub fn new(cluster: impl Into<String>, secret: Option<Secret>) -> Self {
        let ms = |m: Millis| Duration::from_millis(m.0);
        NetConfig {
            cluster: cluster.into(),
            secret,
            token: None,
            max_frame: regent_core::codec::DEFAULT_MAX_FRAME,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: ms(limits::READ_TIMEOUT_FLOOR),
            write_timeout_floor: ms(limits::WRITE_TIMEOUT_FLOOR),
            max_send_queue: limits::MAX_SEND_QUEUE_BYTES,
            send_queue_budget: limits::SEND_QUEUE_BUDGET_BYTES,
            insecure: false,
            tls: None,
            heartbeat_ms: AtomicU64::new(1_000),
            queued_total: AtomicUsize::new(0),
        }
    }

    /// Whether a connection on `side` starts with the handshake: with a
    /// secret, or (dialling) with a token.
    pub fn authenticates(&self, side: auth::Side) -> bool {
        self.secret.is_some() || (side == auth::Side::Client && self.token.is_some())
    }

    /// The handshake of a new connection on `side` and the frame to send
    /// first, if any (`None`: plain frames). A dialling node with a token
    /// dials with it; otherwise the secret is used. A token that is not
    /// well-formed fails the connection naming it.
    pub fn start_handshake(
        &self,
        side: auth::Side,
        nonce: auth::Nonce,
    ) -> Option<Result<StartedHandshake, CloseCause>> {
        match (side, &self.token, &self.secret) {
            (auth::Side::Client, Some(token), _) => {
                Some(match auth::Handshake::client_with_token(token, nonce) {
                    Ok((hs, frame)) => Ok((hs, Some(frame))),
                    Err(e) => {
                        Err(CloseCause::HandshakeRefused(auth::AuthError::TokenNotAccepted {
                            reported_by_peer: false,
                            detail: Some(e.to_string()),
                        }))
                    }
                })
            }
            (auth::Side::Client, None, Some(secret)) => {
                let (hs, frame) = auth::Handshake::client(secret, nonce);
                Some(Ok((hs, Some(frame))))
            }
            (auth::Side::Server, _, Some(secret)) => {
                Some(Ok((auth::Handshake::server(secret, nonce), None)))
            }
            (_, _, None) => None,
        }
    }

    /// Sets the heartbeat interval the timeouts scale with; connections
    /// apply it from their next read or write on.
    pub fn set_heartbeat_interval(&self, interval: Duration) {
        let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
        self.heartbeat_ms.store(ms, Ordering::Relaxed);
    }

    /// Follows the heartbeat interval a worker's or a subscriber's master
    /// told it, once known (`None`: keep the one in force).
    pub fn follow_heartbeat(&self, interval: Option<Millis>) {
        if let Some(ms) = interval {
            self.heartbeat_ms.store(ms.0, Ordering::Relaxed);
        }
    }

    /// The heartbeat interval the timeouts scale with.
    pub fn heartbeat_interval(&self) -> Duration {
        Duration::from_millis(self.heartbeat_ms.load(Ordering::Relaxed))
    }

    /// The read timeout in force: `max(idle_timeout, 10 × heartbeat)`.
    pub fn read_timeout(&self) -> Duration {
        let floor = Millis(u64::try_from(self.idle_timeout.as_millis()).unwrap_or(u64::MAX));
        let hb = Millis(self.heartbeat_ms.load(Ordering::Relaxed));
        Duration::from_millis(limits::read_timeout(floor, hb).0)
    }

    /// The write timeout in force: `max(write_timeout_floor, 5 × heartbeat)`.
    pub fn write_timeout(&self) -> Duration {
        let floor = Millis(u64::try_from(self.write_timeout_floor.as_millis()).unwrap_or(u64::MAX));
        let hb = Millis(self.heartbeat_ms.load(Ordering::Relaxed));
        Duration::from_millis(limits::write_timeout(floor, hb).0)
    }

    /// Bytes queued for all peers of this process right now.
    pub fn queued_bytes(&self) -> usize {
        self.queued_total.load(Ordering::Relaxed)
    }

    /// A configuration in which only the write timeout (`floor`) can end a
    /// connection whose peer does not read: no send-queue bound in the
    /// way, a 1 ms heartbeat so the floor is the timeout. The connection
    /// layers' write-timeout tests run on it.
    pub fn write_timeout_only(cluster: &str, floor: Duration) -> NetConfig {
        let mut cfg = NetConfig::new(cluster, None);
        cfg.write_timeout_floor = floor;
        cfg.set_heartbeat_interval(Duration::from_millis(1));
        cfg.max_send_queue = usize::MAX / 4;
        cfg.send_queue_budget = usize::MAX / 2;
        cfg
    }

    /// Why a connection holding `own` bytes must close when the process's
    /// queues hold `total` (both counting the frame being admitted), if it
    /// must: the rule of [`SendQueue`], shared with connection layers that
    /// count their queues themselves.
    pub fn queue_overflow(&self, own: usize, total: usize) -> Option<CloseCause> {
        if own > self.max_send_queue {
            Some(CloseCause::QueueFull { limit: self.max_send_queue, queued: own })
        } else if total > self.send_queue_budget && own > limits::SEND_QUEUE_SHARE_UNDER_PRESSURE {
            Some(CloseCause::OverBudget { queued: own, budget: self.send_queue_budget })
        } else {
            None
        }
    }
}

/// What a frame of `len` encoded bytes counts in a send queue: its bytes,
/// the MAC tag and `limits::SEND_QUEUE_ENTRY_OVERHEAD`.
pub fn frame_cost(len: usize) -> usize {
    len + auth::TAG_LEN + limits::SEND_QUEUE_ENTRY_OVERHEAD
}

/// What [`SendQueue::admit`] decides about one frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Queue it; it was counted as `cost` bytes (pass them to
    /// [`SendQueue::written`] once it is on the wire).
    Queue {
        /// The bytes counted.
        cost: usize,
    },
    /// The queue passed its bound: the connection must close now, for
    /// `cause` (returned once; later frames get [`Admit::Closed`]).
    Overflow {
        /// Why, naming the bound.
        cause: CloseCause,
    },
    /// The connection is closing or closed: the frame goes nowhere (the
    /// daemon hears, or has heard, `Closed`).
    Closed,
}

/// The accounting of one connection's send queue, shared by both runtimes'
/// connection layers: the daemon's side counts each frame in
/// ([`SendQueue::admit`]) and the writer counts it out
/// ([`SendQueue::written`]).
///
/// The bound (`regent_core::limits`): a connection whose queue would pass
/// `max_send_queue` bytes, or that holds more than
/// `SEND_QUEUE_SHARE_UNDER_PRESSURE` while the process's queues together
/// pass `send_queue_budget`, is closed — its peer is not reading. Nothing is
/// dropped while the connection stays open. Each frame counts its encoded
/// size plus the MAC tag and `SEND_QUEUE_ENTRY_OVERHEAD`.
#[derive(Debug)]
pub struct SendQueue {
    cfg: Arc<NetConfig>,
    state: Mutex<QueueState>,
}

#[derive(Debug, Default)]
struct QueueState {
    bytes: usize,
    closed: bool,
    /// Why the send side ended the connection (overflow, write timeout).
    failure: Option<CloseCause>,
}

impl SendQueue {
    /// An empty queue counted against `cfg`'s bounds.
    pub fn new(cfg: Arc<NetConfig>) -> SendQueue {
        SendQueue { cfg, state: Mutex::new(QueueState::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        // The state stays consistent across a panic (plain counters).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts in a frame of `len` encoded bytes (see [`Admit`]).
    pub fn admit(&self, len: usize) -> Admit {
        let cost = frame_cost(len);
        let mut st = self.lock();
        if st.closed {
            return Admit::Closed;
        }
        let own = st.bytes + cost;
        let total = self.cfg.queued_total.load(Ordering::Relaxed) + cost;
        match self.cfg.queue_overflow(own, total) {
            Some(cause) => {
                Self::end(&self.cfg, &mut st, cause.clone());
                Admit::Overflow { cause }
            }
            None => {
                st.bytes = own;
                self.cfg.queued_total.fetch_add(cost, Ordering::Relaxed);
                Admit::Queue { cost }
            }
        }
    }

    /// A frame counted as `cost` is on the wire (or will never be).
    pub fn written(&self, cost: usize) {
        let mut st = self.lock();
        if !st.closed {
            st.bytes = st.bytes.saturating_sub(cost);
            self.cfg.queued_total.fetch_sub(cost, Ordering::Relaxed);
        }
    }

    /// The send side ends the connection for `cause` (a write that made no
    /// progress for the write timeout): counts out what is left, and is the
    /// cause the connection reports. The first cause wins.
    pub fn fail(&self, cause: CloseCause) {
        let mut st = self.lock();
        if st.failure.is_none() && !st.closed {
            Self::end(&self.cfg, &mut st, cause);
        }
    }

    /// The connection has ended: counts out what is left; later frames get
    /// [`Admit::Closed`].
    pub fn close(&self) {
        let mut st = self.lock();
        if !st.closed {
            st.closed = true;
            self.cfg.queued_total.fetch_sub(st.bytes, Ordering::Relaxed);
            st.bytes = 0;
        }
    }

    fn end(cfg: &NetConfig, st: &mut QueueState, cause: CloseCause) {
        st.closed = true;
        st.failure = Some(cause);
        cfg.queued_total.fetch_sub(st.bytes, Ordering::Relaxed);
        st.bytes = 0;
    }

    /// Why the send side ended the connection, if it did.
    pub fn failure(&self) -> Option<CloseCause> {
        self.lock().failure.clone()
    }

    /// Bytes queued now.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

/// What connections report to the daemon.
#[derive(Debug)]
pub enum NetEvent {
    /// The peer of an accepted connection proved a token in the handshake
    /// (docs/security.md): it acts as these claims (expiry and revocation
    /// are the master's to check). Comes before any message of the
    /// connection; a connection without it proved the secret or is plain.
    Authenticated {
        /// The connection.
        conn: ConnId,
        /// What the token it proved says.
        claims: Box<regent_core::token::Claims>,
    },
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
        /// Why ([`CloseCause::Local`] when the daemon closed it); its
        /// `Display` is the log text.
        cause: CloseCause,
    },
}

/// What the daemon asks a connection to do.
#[derive(Debug)]
pub enum Outbound {
    /// Send a plain codec frame (the writer seals it), counted in the
    /// connection's [`SendQueue`] as `cost` bytes.
    Frame {
        /// The frame, as `regent_core::codec::encode` made it.
        frame: Vec<u8>,
        /// What [`SendQueue::admit`] counted it as.
        cost: usize,
    },
    /// Flush what was sent before, then close.
    Close,
}

/// How many bytes a writer gathers into one write at most (beyond it the
/// batch ends; one frame may take it past).
pub const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// What [`fill_batch`] gathered.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// The [`SendQueue`] cost of the frames appended (for
    /// [`SendQueue::written`] once they are on the wire).
    pub cost: usize,
    /// A [`Outbound::Close`] was reached: write the batch, then close.
    pub close: bool,
}

/// A writer's batching, shared by both runtimes: seals `first` and whatever
/// `next` yields without waiting, in order, into `out`, until a close, an
/// empty queue or [`WRITE_BATCH_BYTES`].
pub fn fill_batch(
    first: Outbound,
    mut next: impl FnMut() -> Option<Outbound>,
    sealer: &mut regent_core::auth::FrameSealer,
    out: &mut Vec<u8>,
) -> Batch {
    let mut batch = Batch::default();
    let mut item = Some(first);
    while let Some(o) = item.take() {
        match o {
            Outbound::Frame { mut frame, cost } => {
                sealer.seal_frame(&mut frame);
                out.extend_from_slice(&frame);
                batch.cost += cost;
            }
            Outbound::Close => {
                batch.close = true;
                break;
            }
        }
        if out.len() >= WRITE_BATCH_BYTES {
            break;
        }
        item = next();
    }
    batch
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
/// subscriber instances are drawn from it, so the master can tell a newer
/// process from an older one whose message arrives late — through
/// [`crate::host::next_ordered_id`], which keeps them ordered when the wall
/// clock steps back (alone, this id is ordered only while it does not).
pub fn time_ordered_id() -> u64 {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    (ms << 16) | (random_u64() & 0xffff)
}

/// Why an address may not be used: the exposure rule ([`check_exposure`],
/// [`check_zk_exposure`]).
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A non-loopback address without a cluster secret (and not
    /// `--insecure`).
    #[error(
        "refusing {addr}: it is not a loopback address and no --secret-file is given \
         (anyone who can reach it could join the cluster); pass --secret-file, or \
         --insecure to accept the risk"
    )]
    Exposed {
        /// The address refused.
        addr: SocketAddr,
    },
    /// A ZooKeeper host that could not be resolved to check it.
    #[error(
        "cannot resolve ZooKeeper host {host} to check that it is loopback: {source} \
         (without --secret-file only loopback ZooKeeper hosts are allowed, unless \
         --insecure)"
    )]
    ZkUnresolved {
        /// The host, as in the connect string.
        host: String,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
    /// A ZooKeeper host that resolves to a non-loopback address without a
    /// cluster secret (and not `--insecure`).
    #[error(
        "refusing ZooKeeper host {host} ({ip}): it is not a loopback address and no \
         --secret-file is given (anyone who can reach it could plant records the next \
         leader trusts); pass --secret-file, or --insecure to accept the risk"
    )]
    ZkExposed {
        /// The host, as in the connect string.
        host: String,
        /// The non-loopback address it resolves to.
        ip: std::net::IpAddr,
    },
    /// A ZooKeeper host that resolves to no address.
    #[error("ZooKeeper host {host} resolves to no address")]
    ZkNoAddress {
        /// The host, as in the connect string.
        host: String,
    },
}

crate::error::into_report!(NetError);

/// Refuses a non-loopback address without a secret unless `insecure`.
pub fn check_exposure(addr: &SocketAddr, has_secret: bool, insecure: bool) -> Result<(), NetError> {
    if addr.ip().is_loopback() || has_secret || insecure {
        Ok(())
    } else {
        Err(NetError::Exposed { addr: *addr })
    }
}

/// The exposure rule for a ZooKeeper connect string (`host:port,...`,
/// optionally followed by a `/chroot`): without a secret and unless
/// `insecure`, every host must resolve to loopback addresses only. Checked
/// before anything is dialled; the error names the host (and the address it
/// resolves to). A host without a port means port 2181. With a secret or
/// `insecure` nothing is resolved.
pub fn check_zk_exposure(connect: &str, has_secret: bool, insecure: bool) -> Result<(), NetError> {
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
            .map_err(|source| NetError::ZkUnresolved { host: host.to_string(), source })?
            .collect();
        if let Some(exposed) = resolved.iter().find(|a| !a.ip().is_loopback()) {
            return Err(NetError::ZkExposed { host: host.to_string(), ip: exposed.ip() });
        }
        if resolved.is_empty() {
            return Err(NetError::ZkNoAddress { host: host.to_string() });
        }
    }
    Ok(())
}

/// How the log names a handshake's refusal of the peer (wrong cluster,
/// wrong secret, unsupported version): the start of
/// [`CloseCause::HandshakeRefused`]'s text.
pub const HANDSHAKE_REFUSED: &str = "handshake refused";

/// The accept backlog a master's listener asks for (the kernel caps it at
/// `net.core.somaxconn`, 4096 by default). The standard library listens with
/// 128: a cold start of thousands of workers overflowed it, and a dropped
/// SYN is retried only after a second.
pub const LISTEN_BACKLOG: i32 = 4096;

/// Listens again on a bound listener with [`LISTEN_BACKLOG`] (Linux lets a
/// listening socket change its backlog this way).
pub fn widen_backlog(listener: &impl std::os::fd::AsFd) -> std::io::Result<()> {
    rustix::net::listen(listener, LISTEN_BACKLOG).map_err(std::io::Error::from)
}

/// Starts a nonblocking connect to `dst` from a socket bound to `src`
/// (port 0): the caller waits for it to become writable, then checks
/// `take_error`. A load generator spreads its thousands of connections to
/// one master over many loopback source addresses this way: from one
/// source address the kernel's search for a free ephemeral port grows with
/// every connection already open to the same destination (a third of a
/// generator's CPU at 18,000 connections).
pub fn connect_from(src: std::net::IpAddr, dst: SocketAddr) -> std::io::Result<TcpStream> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    let family = if dst.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let fd = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::bind(&fd, &SocketAddr::new(src, 0))?;
    match rustix::net::connect(&fd, &dst) {
        Ok(()) | Err(rustix::io::Errno::INPROGRESS) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(TcpStream::from(fd))
}

/// Why a connection ended, typed where it was observed (the socket's EOF or
/// error, a timeout, the handshake, the decoder, the send queue).
/// [`NetEvent::Closed`] carries it; its `Display` is the log text, and what
/// a daemon decides from it ([`CloseCause::ended`],
/// [`CloseCause::is_refusal`]) is read off the variant, never the words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CloseCause {
    /// The daemon closed it (its `ConnHandle::close`), or the writer ended it
    /// first (the read then failed because of that).
    #[error("closed")]
    Local,
    /// The peer closed its end (EOF).
    #[error("peer closed the connection")]
    PeerClosed,
    /// The peer reset the connection (RST).
    #[error("peer reset the connection: {0}")]
    PeerReset(String),
    /// Reading (or setting up a read) failed otherwise.
    #[error("read failed: {message}")]
    ReadFailed {
        /// The OS error's kind.
        kind: ErrorKind,
        /// The OS error, for the log.
        message: String,
    },
    /// A write of the handshake failed.
    #[error("write failed: {message}")]
    WriteFailed {
        /// The OS error's kind.
        kind: ErrorKind,
        /// The OS error, for the log.
        message: String,
    },
    /// Nothing arrived in time: `what` is `"handshake"` or `"idle
    /// connection"`.
    #[error("{what} timed out after {after:?}")]
    TimedOut {
        /// What was waited for.
        what: &'static str,
        /// How long.
        after: Duration,
    },
    /// A write made no progress for the write timeout.
    #[error("write timed out after {after:?} without progress: the peer is not reading")]
    WriteStalled {
        /// The write timeout in force.
        after: Duration,
    },
    /// The peer's send queue passed `max_send_queue`.
    #[error("send queue over {limit} bytes ({queued} queued): the peer is not reading")]
    QueueFull {
        /// The bound.
        limit: usize,
        /// What would have been queued.
        queued: usize,
    },
    /// The peer held more than its share while the process's queues passed
    /// `send_queue_budget`.
    #[error(
        "send queue of {queued} bytes while this process's queues hold over {budget} bytes: \
         the peer is not reading"
    )]
    OverBudget {
        /// What would have been queued for this peer.
        queued: usize,
        /// The process's budget.
        budget: usize,
    },
    /// The handshake refused the peer (wrong cluster secret, bad MAC,
    /// unsupported version): a configuration error, not worth retrying.
    #[error("{HANDSHAKE_REFUSED}: {0}")]
    HandshakeRefused(auth::AuthError),
    /// The peer's bytes are not frames (garbage, an oversized frame).
    #[error("{0}")]
    Frame(codec::DecodeError),
    /// A frame was refused (bad MAC, undecodable message, another cluster).
    #[error("{0}")]
    Refused(auth::FrameError),
    /// TLS refused the peer or failed (`regent_std::tls::describe`'s
    /// line), or the peer's first byte says it speaks the other of TLS and
    /// plain TCP: a configuration error, not worth retrying.
    #[error("TLS: {0}")]
    Tls(String),
    /// This process could not run the connection (no thread for its
    /// writer).
    #[error("cannot start the writer thread: {0}")]
    NoWriter(String),
}

impl CloseCause {
    /// A failed read: a reset is the peer's doing.
    pub fn read(e: &std::io::Error) -> CloseCause {
        if e.kind() == ErrorKind::ConnectionReset {
            CloseCause::PeerReset(e.to_string())
        } else {
            CloseCause::ReadFailed { kind: e.kind(), message: e.to_string() }
        }
    }

    /// Bytes that are not frames. A TLS record where a frame's length
    /// prefix should be (a prefix of `0x15 0x03 ..` or `0x16 0x03 ..`,
    /// hundreds of megabytes) is a TLS peer: said so, with the flags.
    pub fn frame(e: codec::DecodeError) -> CloseCause {
        if let codec::DecodeError::FrameTooLarge { len, .. } = &e {
            let (kind, major) = ((len >> 24) as u8, (len >> 16) as u8);
            if matches!(kind, 0x15 | crate::tls::TLS_HANDSHAKE_RECORD) && major == 3 {
                return CloseCause::Tls(crate::tls::TLS_PEER_REFUSED.to_string());
            }
        }
        CloseCause::Frame(e)
    }

    /// A failed write of the handshake.
    pub fn write(e: &std::io::Error) -> CloseCause {
        CloseCause::WriteFailed { kind: e.kind(), message: e.to_string() }
    }

    /// A refusal of the peer (counted and logged as such) rather than a
    /// plain close: not a local close, an EOF, a reset or a failed read.
    pub fn is_refusal(&self) -> bool {
        !matches!(
            self,
            CloseCause::Local
                | CloseCause::PeerClosed
                | CloseCause::PeerReset(_)
                | CloseCause::ReadFailed { .. }
        )
    }

    /// Whether the handshake (the cluster secret's or TLS) refused the
    /// peer.
    pub fn is_handshake_refusal(&self) -> bool {
        matches!(self, CloseCause::HandshakeRefused(_) | CloseCause::Tls(_))
    }

    /// How the connection ended, as the node's fast takeover sees it: by the
    /// peer (EOF or reset), by a timeout (of a read, of a write, or an OS
    /// error that is one), or otherwise. The takeover acts only on the
    /// first.
    pub fn ended(&self) -> regent_core::node::Ended {
        use regent_core::node::Ended;
        match self {
            CloseCause::PeerClosed | CloseCause::PeerReset(_) => Ended::ByPeer,
            CloseCause::TimedOut { .. } | CloseCause::WriteStalled { .. } => Ended::TimedOut,
            CloseCause::ReadFailed { kind: ErrorKind::TimedOut, .. }
            | CloseCause::WriteFailed { kind: ErrorKind::TimedOut, .. } => Ended::TimedOut,
            _ => Ended::Failed,
        }
    }
}

/// The socket address a probe connects to: `addr` must be an `ip:port` (a
/// probe never resolves a name), else the probe fails saying so.
pub fn probe_target(addr: &str) -> Result<SocketAddr, regent_core::node::ProbeResult> {
    addr.parse().map_err(|_| regent_core::node::ProbeResult::Failed {
        reason: format!("{addr} is not an ip:port"),
    })
}

/// A probe's failed `connect()`, classified.
pub fn probe_error(e: &std::io::Error) -> regent_core::node::ProbeResult {
    use regent_core::node::ProbeResult;
    if e.kind() == ErrorKind::ConnectionRefused {
        ProbeResult::Refused
    } else {
        ProbeResult::Failed { reason: e.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::auth::Session;

    #[test]
    fn a_batch_ends_at_a_close_or_past_the_batch_size_and_sums_the_costs() {
        let mut sealer = Session::plain().sealer;
        let frame = |n: usize| Outbound::Frame { frame: vec![7; n], cost: n + 80 };
        let mut more = vec![frame(10), Outbound::Close, frame(20)].into_iter();
        let mut out = Vec::new();
        let b = fill_batch(frame(5), || more.next(), &mut sealer, &mut out);
        assert_eq!(b, Batch { cost: 5 + 80 + 10 + 80, close: true });
        assert_eq!(out.len(), 15, "plain frames are written as they are");
        assert!(matches!(more.next(), Some(Outbound::Frame { .. })), "nothing past the close");

        let mut more = (0..10).map(|_| frame(WRITE_BATCH_BYTES / 4));
        let mut out = Vec::new();
        let b = fill_batch(frame(1), || more.next(), &mut sealer, &mut out);
        assert!(!b.close);
        assert_eq!(out.len(), 1 + 4 * (WRITE_BATCH_BYTES / 4), "stops once past the size");
        assert_eq!(more.count(), 6);
    }
    #[test]
    fn zookeeper_hosts_follow_the_exposure_rule_and_are_named() {
        assert!(check_zk_exposure("127.0.0.1:2181,[::1]:2182/regent", false, false).is_ok());
        assert!(check_zk_exposure("localhost", false, false).is_ok());
        let err = check_zk_exposure("127.0.0.1:2181,192.0.2.1:2181", false, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("192.0.2.1:2181"), "{err}");
        assert!(err.contains("--insecure"), "{err}");
        let err = check_zk_exposure("192.0.2.7", false, false).unwrap_err().to_string();
        assert!(err.contains("192.0.2.7"), "{err}");
        assert!(check_zk_exposure("192.0.2.1:2181", true, false).is_ok());
        assert!(check_zk_exposure("192.0.2.1:2181", false, true).is_ok());
    }

    #[test]
    fn timeouts_follow_the_heartbeat_interval() {
        let cfg = NetConfig::new("c", None);
        assert_eq!(cfg.read_timeout(), Duration::from_secs(60));
        assert_eq!(cfg.write_timeout(), Duration::from_secs(15));
        cfg.follow_heartbeat(Some(Millis(30_000)));
        assert_eq!(cfg.read_timeout(), Duration::from_secs(300));
        assert_eq!(cfg.write_timeout(), Duration::from_secs(150));
        cfg.follow_heartbeat(None);
        assert_eq!(cfg.heartbeat_interval(), Duration::from_secs(30));
    }
}

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

use regent_core::auth::{self, FrameReader, Handshake, Session, Side, Step};
use regent_core::codec::{self, DecoderConfig};
use regent_core::limits;
use regent_core::protocol::Message;
use regent_core::secret::Secret;
use regent_core::{ConnId, Millis};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Stack size of connection threads: they hold little on the stack (the
/// read buffer is on the heap), and a master may run thousands of them.
pub const CONN_STACK: usize = 128 * 1024;

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
            max_frame: regent_core::codec::DEFAULT_MAX_FRAME,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: ms(limits::READ_TIMEOUT_FLOOR),
            write_timeout_floor: ms(limits::WRITE_TIMEOUT_FLOOR),
            max_send_queue: limits::MAX_SEND_QUEUE_BYTES,
            send_queue_budget: limits::SEND_QUEUE_BUDGET_BYTES,
            insecure: false,
            heartbeat_ms: AtomicU64::new(1_000),
            queued_total: AtomicUsize::new(0),
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
        let cost = len + auth::TAG_LEN + limits::SEND_QUEUE_ENTRY_OVERHEAD;
        let mut st = self.lock();
        if st.closed {
            return Admit::Closed;
        }
        let own = st.bytes + cost;
        let total = self.cfg.queued_total.load(Ordering::Relaxed) + cost;
        let cause = if own > self.cfg.max_send_queue {
            Some(CloseCause::QueueFull { limit: self.cfg.max_send_queue, queued: own })
        } else if total > self.cfg.send_queue_budget
            && own > limits::SEND_QUEUE_SHARE_UNDER_PRESSURE
        {
            Some(CloseCause::OverBudget { queued: own, budget: self.cfg.send_queue_budget })
        } else {
            None
        };
        match cause {
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
    /// The daemon closed it ([`ConnHandle::close`]), or the writer ended it
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

    /// Whether the handshake refused the peer.
    pub fn is_handshake_refusal(&self) -> bool {
        matches!(self, CloseCause::HandshakeRefused(_))
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
    side: Side,
    secret: &Secret,
    timeout: Duration,
) -> Result<Session, CloseCause> {
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
        while let Some(body) = reader.next_body().map_err(CloseCause::Frame)? {
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
        reader.feed(&buf[..n]).map_err(CloseCause::Frame)?;
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
    let mut reader = FrameReader::new(match cfg.secret {
        Some(_) => auth::HANDSHAKE_MAX_BODY,
        None => cfg.max_frame,
    });
    let session = match &cfg.secret {
        None => Session::plain(),
        Some(secret) => {
            match handshake(rstream, &mut reader, side, secret, cfg.handshake_timeout) {
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
        while let Some(body) = reader.next_body().map_err(CloseCause::Frame)? {
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
        reader.feed(&buf[..n]).map_err(CloseCause::Frame)?;
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
        let mut cfg = NetConfig::new("c", None);
        cfg.write_timeout_floor = Duration::from_millis(300);
        cfg.set_heartbeat_interval(Duration::from_millis(1));
        // No queue bound in the way: only the write timeout can fire.
        cfg.max_send_queue = usize::MAX / 4;
        cfg.send_queue_budget = usize::MAX / 2;
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

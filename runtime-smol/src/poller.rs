//! The master's connections on one level-triggered epoll instance (issue
//! 24): no task, channel or timer per connection.
//!
//! [`Poller`] owns the listening socket and every peer connection, in a
//! slab. The master's loop runs on its own thread and blocks in
//! `epoll_wait` on the one epoll descriptor ([`Poller::wait`], with the
//! node's deadline or the sweep as its timeout; docs/design.md#issue-46);
//! its other inputs wake it through an eventfd in the same instance
//! ([`Poller::waker`], [`Waker`]). [`Poller::wait`] (and [`Poller::poll`],
//! which does not block) takes every ready socket in turn: a listener accepts, a connection is read **once** into a buffer
//! shared by all connections, its whole frames are opened and handed back as
//! [`NetEvent`]s for the loop to feed the node inline. What the node sends
//! is sealed straight into the connection's output buffer
//! ([`Poller::send`]), and [`Poller::flush`] writes every buffer that has
//! bytes once per batch: a heartbeat costs one `read` and one `write`.
//! Writable interest is asked for only while a buffer cannot be written
//! whole (level-triggered: nothing to re-arm after a read).
//!
//! The limits are the old connection layer's ([`crate::net`], still used by
//! the worker, the subscriber and the operator tools, and the std runtime's
//! twin): the frame size checked before a body is buffered, the
//! cluster-secret handshake (`regent_core::auth`, sans-IO) within the
//! handshake timeout, the read and write timeouts of [`NetConfig`] scaled
//! with the heartbeat interval, and the send-queue bounds
//! (`max_send_queue` per peer, `send_queue_budget` for all). Timeouts are
//! activity timestamps swept every [`SWEEP_EVERY`] ([`Poller::sweep`]), not
//! timers. A connection closed after its last frames is shut for writing
//! and drained for up to [`DRAIN_FOR`], so the peer reads those frames
//! instead of a reset.
//!
//! epoll through rustix's safe calls rather than the `polling` crate: its
//! `add` is `unsafe` (a source must be deleted before it is closed) and the
//! workspace forbids unsafe code; here a connection's socket is deleted
//! from the instance before it is dropped, in one place
//! ([`Poller::remove`]).

use crate::net::{nonce, CloseCause, NetConfig, NetEvent};
use regent_core::auth::{self, FrameOpener, FrameReader, FrameSealer, Handshake, Side, Step};
use regent_core::codec::DecoderConfig;
use regent_core::protocol::Message;
use regent_core::ConnId;
use regent_std::net::frame_cost;
use rustix::event::epoll;
use slab::Slab;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often [`Poller::sweep`] looks for timed-out connections: a timeout
/// fires at most this late.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// How long a connection closed after its last frames keeps reading (and
/// discarding) before it is dropped: long enough for the peer to read what
/// was written and close its end, so unread bytes of its own do not turn
/// the close into a reset that discards ours.
pub const DRAIN_FOR: Duration = Duration::from_secs(2);

/// The shared read buffer: what one `read` of one socket takes at most.
const READ_CHUNK: usize = 64 * 1024;

/// Ready sockets taken from one `epoll_wait` at most (the rest come on the
/// next turn, after the loop's timers and other inputs had theirs). Replies
/// are written once per turn, so this bounds how long the first reply of a
/// turn waits for the others' handling (128 heartbeats: about 1 ms).
const EVENTS_PER_TURN: usize = 128;

/// Frames opened from one connection per turn at most: the rest stay in its
/// frame reader (the connection waits in the backlog, its socket unread)
/// until the next turn. A peer that floods small requests gets its share of
/// the loop, not all of it, and what one turn holds decoded is bounded
/// (`EVENTS_PER_TURN × MAX_FRAMES_PER_TURN` messages).
const MAX_FRAMES_PER_TURN: usize = 64;

/// Connections accepted per listener readiness at most.
const ACCEPTS_PER_TURN: usize = 256;

/// The output buffer an idle connection keeps at most: past it, a drained
/// buffer is given back.
const KEEP_OUT: usize = 4 * 1024;

/// The listener's key in the epoll instance (connections use slab keys).
const LISTENER: u64 = u64::MAX;

/// The [`Waker`]'s eventfd's key in the epoll instance.
const WAKER: u64 = u64::MAX - 1;

/// Wakes a [`Poller`] blocked in [`Poller::wait`] from any thread: the
/// master's other inputs (ZooKeeper events, store results, HTTP queries,
/// dial results, shutdown) are put in a channel, then [`Waker::wake`]
/// (docs/design.md#issue-46). Only the first wake after the poller last
/// took one writes the eventfd: a burst of inputs costs one system call on
/// each side, and a loop busy with its sockets none.
#[derive(Clone, Debug)]
pub struct Waker {
    shared: Arc<WakerShared>,
}

#[derive(Debug)]
struct WakerShared {
    /// An eventfd (nonblocking), readable in the poller's epoll instance.
    fd: OwnedFd,
    /// A wake was written and the poller has not taken it yet.
    pending: AtomicBool,
}

impl Waker {
    /// Makes the poller's current or next [`Poller::wait`] return (what
    /// was sent before this call is visible to the poller's thread then).
    pub fn wake(&self) {
        if !self.shared.pending.swap(true, Ordering::SeqCst) {
            if let Err(e) = rustix::io::write(&self.shared.fd, &1u64.to_ne_bytes()) {
                // Only a counter at its maximum refuses a write: the
                // poller is woken anyway.
                tracing::warn!("cannot wake the master's loop: {e}");
            }
        }
    }
}

/// What [`Poller::poll`] and [`Poller::sweep`] report.
// A message is most of what comes out, kept inline: boxing it would cost an
// allocation per frame on the hot path.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Ready {
    /// A connection arrived on the listener (nonblocking, `TCP_NODELAY`);
    /// the daemon decides whether to [`Poller::add`] it.
    Accepted(TcpStream),
    /// A message or a close.
    Net(NetEvent),
    /// `accept` failed (e.g. out of descriptors); the listener is retried
    /// on the next turn.
    AcceptFailed(std::io::Error),
}

/// Where a connection's session stands.
enum Link {
    /// The cluster-secret handshake is under way. Frames the daemon sends
    /// meanwhile wait in `held`, sealed once the session exists.
    Handshake { hs: Box<Handshake>, held: Vec<Message> },
    /// Frames flow, sealed and opened.
    Open { sealer: FrameSealer, opener: FrameOpener },
}

/// What carries a connection's bytes.
enum Wire {
    /// Accepted, its first byte not read yet: that byte says TLS or plain
    /// ([`TlsContext::sniff`]). Nothing is written meanwhile.
    ///
    /// [`TlsContext::sniff`]: regent_std::tls::TlsContext::sniff
    Unsniffed,
    /// Plain TCP.
    Plain,
    /// TLS (rustls' sans-IO connection): reads go through it into the
    /// frame reader, the output buffer's bytes into it as it takes them.
    Tls(Box<rustls::Connection>),
}

impl Wire {
    /// Still before the point where frames can flow.
    fn handshaking(&self) -> bool {
        match self {
            Wire::Unsniffed => true,
            Wire::Plain => false,
            Wire::Tls(tls) => tls.is_handshaking(),
        }
    }
}

/// Plaintext moved into a TLS connection at once at most: about four
/// records, so rustls' own buffer stays small and the rest waits (counted)
/// in the output buffer.
const TLS_CHUNK: usize = 64 * 1024;

/// One peer connection.
struct Conn {
    id: ConnId,
    stream: TcpStream,
    peer: SocketAddr,
    wire: Wire,
    link: Link,
    reader: FrameReader,
    /// Sealed bytes; those before `out_at` are written.
    out: Vec<u8>,
    out_at: usize,
    /// Bytes counted against the send-queue bounds (written ones out).
    queued: usize,
    opened: Instant,
    last_read: Instant,
    /// Since when the output has waited without a write making progress.
    stalled_since: Option<Instant>,
    /// Writable interest is registered.
    want_write: bool,
    /// Already in the poller's flush list.
    dirty: bool,
    /// Holds whole frames not opened yet; in the poller's backlog.
    backlogged: bool,
    /// What closing has reached.
    closing: Closing,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Closing {
    No,
    /// Write what is queued, then shut.
    AfterFlush,
    /// Shut for writing since then; reads are discarded until EOF.
    Draining(Instant),
}

/// Every connection of one master, on one epoll instance.
pub struct Poller {
    epoll: OwnedFd,
    /// The eventfd of [`Poller::waker`], once made.
    waker: Option<Arc<WakerShared>>,
    listener: Option<TcpListener>,
    conns: Slab<Conn>,
    next_id: u64,
    cfg: Arc<NetConfig>,
    decoder: DecoderConfig,
    scratch: Vec<u8>,
    /// Where a TLS connection's plaintext lands before its frame reader.
    plain: Vec<u8>,
    /// Connections whose output buffer may hold bytes.
    to_flush: Vec<usize>,
    /// Connections holding whole frames past [`MAX_FRAMES_PER_TURN`].
    backlog: Vec<usize>,
    /// Bytes counted for all connections (`send_queue_budget`).
    queued_total: usize,
    next_sweep: Instant,
}

impl std::fmt::Debug for Poller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poller")
            .field("connections", &self.conns.len())
            .field("queued_total", &self.queued_total)
            .finish_non_exhaustive()
    }
}

impl Poller {
    /// A poller around `listener` (made nonblocking here; `None`: a poller
    /// of dialled connections only, such as the load generator's without a
    /// callback listener).
    pub fn new(listener: Option<TcpListener>, cfg: Arc<NetConfig>) -> std::io::Result<Poller> {
        let fd = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        if let Some(listener) = &listener {
            listener.set_nonblocking(true)?;
            let key = epoll::EventData::new_u64(LISTENER);
            epoll::add(&fd, listener, key, epoll::EventFlags::IN)?;
        }
        let decoder =
            DecoderConfig { max_frame: cfg.max_frame, cluster: Some(cfg.cluster.clone()) };
        Ok(Poller {
            epoll: fd,
            waker: None,
            listener,
            conns: Slab::new(),
            next_id: 1,
            cfg,
            decoder,
            scratch: vec![0; READ_CHUNK],
            plain: Vec::new(),
            to_flush: Vec::new(),
            backlog: Vec::new(),
            queued_total: 0,
            next_sweep: Instant::now() + SWEEP_EVERY,
        })
    }

    /// The listener's address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match &self.listener {
            Some(l) => l.local_addr(),
            None => Err(std::io::Error::other("this poller has no listener")),
        }
    }

    /// How many connections are open (draining ones included).
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// Bytes queued for all peers and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.queued_total
    }

    /// Bytes in `conn`'s output buffer not yet written (tests).
    #[cfg(test)]
    fn pending(&self, conn: ConnId) -> usize {
        self.key_of(conn).map_or(0, |k| self.conns[k].out.len() - self.conns[k].out_at)
    }

    /// When [`Poller::sweep`] is due.
    pub fn next_sweep(&self) -> Instant {
        self.next_sweep
    }

    /// Whether connections hold frames not yet opened: the next
    /// [`Poller::poll`] has work without waiting for a socket.
    pub fn has_backlog(&self) -> bool {
        !self.backlog.is_empty()
    }

    /// The [`Waker`] of this poller (made on the first call: an eventfd
    /// in its epoll instance). [`Poller::wait`] returns `true` once it was
    /// woken.
    pub fn waker(&mut self) -> std::io::Result<Waker> {
        if let Some(shared) = &self.waker {
            return Ok(Waker { shared: shared.clone() });
        }
        let fd = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )?;
        epoll::add(&self.epoll, &fd, epoll::EventData::new_u64(WAKER), epoll::EventFlags::IN)?;
        let shared = Arc::new(WakerShared { fd, pending: AtomicBool::new(false) });
        self.waker = Some(shared.clone());
        Ok(Waker { shared })
    }

    /// Blocks in `epoll_wait` for up to `timeout` (not at all while frames
    /// wait in the backlog), then takes every ready socket as
    /// [`Poller::poll`] does. `true` if the [`Waker`] was woken (taken
    /// here: the next wake writes again). A failed wait is logged, then
    /// waited out (at most 50 ms) rather than spun on.
    pub fn wait(&mut self, timeout: Duration, out: &mut Vec<Ready>) -> bool {
        let timeout = if self.has_backlog() { Duration::ZERO } else { timeout };
        self.turn(timeout, out)
    }

    /// Runs `stream` as a connection; `side` says who dialled. With a
    /// cluster secret the handshake starts (a client sends its first frame
    /// on the next [`Poller::flush`]). Returns its number and the peer's
    /// address.
    pub fn add(&mut self, stream: TcpStream, side: Side) -> std::io::Result<(ConnId, SocketAddr)> {
        let wire = match side {
            // With TLS the peer's first byte says which
            // (`TlsContext::sniff`); without, a TLS peer's first bytes are
            // no frame's and are refused as such (`CloseCause::frame`).
            Side::Server if self.cfg.tls.is_some() => Wire::Unsniffed,
            Side::Server => Wire::Plain,
            Side::Client => match &self.cfg.tls {
                None => Wire::Plain,
                Some(_) => {
                    let ip = stream.peer_addr()?.ip().to_string();
                    return self.add_tls_client(stream, &ip);
                }
            },
        };
        self.add_on(stream, side, wire)
    }

    /// Runs `stream`, dialled to `addr`, as a connection: with TLS, the
    /// peer's certificate must name `addr`'s host.
    pub fn add_dialled(
        &mut self,
        stream: TcpStream,
        addr: &regent_core::Addr,
    ) -> std::io::Result<(ConnId, SocketAddr)> {
        match &self.cfg.tls {
            None => self.add_on(stream, Side::Client, Wire::Plain),
            Some(_) => self.add_tls_client(stream, addr.as_str()),
        }
    }

    fn add_tls_client(
        &mut self,
        stream: TcpStream,
        name: &str,
    ) -> std::io::Result<(ConnId, SocketAddr)> {
        let tls = self.cfg.tls.as_ref().expect("called with TLS");
        let name = regent_std::tls::server_name(name).map_err(std::io::Error::other)?;
        let conn = rustls::ClientConnection::new(tls.client(), name)
            .map_err(|e| std::io::Error::other(format!("TLS: {e}")))?;
        self.add_on(stream, Side::Client, Wire::Tls(Box::new(conn.into())))
    }

    fn add_on(
        &mut self,
        stream: TcpStream,
        side: Side,
        wire: Wire,
    ) -> std::io::Result<(ConnId, SocketAddr)> {
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        let peer = stream.peer_addr()?;
        let now = Instant::now();
        let key = self.conns.vacant_key();
        let id = self.number(key);
        epoll::add(
            &self.epoll,
            &stream,
            epoll::EventData::new_u64(key as u64),
            epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
        )?;
        let (link, first, max_body) = match self.cfg.start_handshake(side, nonce()) {
            None => (
                Link::Open { sealer: auth::Session::plain().sealer, opener: FrameOpener::plain() },
                None,
                self.cfg.max_frame,
            ),
            Some(started) => {
                let (hs, first) = started.map_err(std::io::Error::other)?;
                (
                    Link::Handshake { hs: Box::new(hs), held: Vec::new() },
                    first,
                    auth::HANDSHAKE_MAX_BODY,
                )
            }
        };
        self.conns.insert(Conn {
            id,
            stream,
            peer,
            wire,
            link,
            reader: FrameReader::new(max_body),
            out: first.unwrap_or_default(),
            out_at: 0,
            queued: 0,
            opened: now,
            last_read: now,
            stalled_since: None,
            want_write: false,
            dirty: false,
            backlogged: false,
            closing: Closing::No,
        });
        self.mark(key);
        Ok((id, peer))
    }

    /// A connection's number carries its slab key in the low 32 bits and a
    /// sequence number above them: keys are reused, numbers never are.
    fn number(&mut self, key: usize) -> ConnId {
        let id = ConnId((self.next_id << 32) | key as u64);
        self.next_id += 1;
        id
    }

    /// The slab key of `conn`, if it is still open.
    fn key_of(&self, conn: ConnId) -> Option<usize> {
        let key = (conn.0 & 0xFFFF_FFFF) as usize;
        self.conns.get(key).filter(|c| c.id == conn).map(|_| key)
    }

    fn mark(&mut self, key: usize) {
        if let Some(c) = self.conns.get_mut(key) {
            if !c.dirty {
                c.dirty = true;
                self.to_flush.push(key);
            }
        }
    }

    /// Seals `msg` into `conn`'s output buffer (written on the next
    /// [`Poller::flush`]); never blocks. Past a send-queue bound the
    /// connection closes at once and its `Closed` comes out of the next
    /// [`Poller::poll`] or [`Poller::sweep`] (`out`). On a connection that
    /// is gone or closing, `msg` goes nowhere.
    pub fn send(&mut self, conn: ConnId, msg: &Message, out: &mut Vec<Ready>) {
        let Some(key) = self.key_of(conn) else { return };
        let c = &mut self.conns[key];
        if c.closing != Closing::No {
            return;
        }
        let cost = frame_cost(regent_core::codec::frame_len(msg));
        let own = c.queued + cost;
        let total = self.queued_total + cost;
        if let Some(cause) = self.cfg.queue_overflow(own, total) {
            tracing::debug!(peer = %c.peer, %conn, reason = %cause, "closing");
            self.remove(key, cause, out);
            return;
        }
        c.queued = own;
        self.queued_total = total;
        match &mut c.link {
            Link::Handshake { held, .. } => held.push(msg.clone()),
            Link::Open { sealer, .. } => sealer.seal_into(msg, &mut c.out),
        }
        self.mark(key);
    }

    /// Writes what `conn` has queued, then closes it; never blocks. Its
    /// `Closed` (cause [`CloseCause::Local`]) comes out once it is gone.
    pub fn close(&mut self, conn: ConnId) {
        if let Some(key) = self.key_of(conn) {
            let c = &mut self.conns[key];
            if c.closing == Closing::No {
                c.closing = Closing::AfterFlush;
                self.mark(key);
            }
        }
    }

    /// Closes every connection after what it has queued (shutdown).
    pub fn close_all(&mut self) {
        let conns: Vec<ConnId> = self.conns.iter().map(|(_, c)| c.id).collect();
        for conn in conns {
            self.close(conn);
        }
    }

    /// Takes every ready socket once (see the module docs), without
    /// blocking; what happened lands in `out`, in order.
    pub fn poll(&mut self, out: &mut Vec<Ready>) {
        self.turn(Duration::ZERO, out);
    }

    /// [`Poller::poll`] after `epoll_wait` with `timeout`; whether the
    /// waker was woken.
    fn turn(&mut self, timeout: Duration, out: &mut Vec<Ready>) -> bool {
        for key in std::mem::take(&mut self.backlog) {
            if let Some(c) = self.conns.get_mut(key).filter(|c| c.backlogged) {
                c.backlogged = false;
                self.open_frames(key, out);
            }
        }
        // On the stack: the events hold pointers (not `Send`), and a turn
        // allocates nothing.
        let mut events = [std::mem::MaybeUninit::<epoll::Event>::uninit(); EVENTS_PER_TURN];
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs().min(3600) as i64,
            tv_nsec: timeout.subsec_nanos().into(),
        };
        let events = match epoll::wait(&self.epoll, &mut events, Some(&ts)) {
            Ok((events, _)) => events,
            Err(e) => {
                if e != rustix::io::Errno::INTR {
                    tracing::warn!("epoll_wait failed: {e}");
                    std::thread::sleep(timeout.min(Duration::from_millis(50)));
                }
                return false;
            }
        };
        let now = Instant::now();
        let mut woken = false;
        for ev in events.iter().copied() {
            let key = ev.data.u64();
            if key == LISTENER {
                self.accept(out);
                continue;
            }
            if key == WAKER {
                woken = true;
                if let Some(w) = &self.waker {
                    // Reset the counter, then take the flag: a wake after
                    // this writes again (see `Waker::wake`).
                    let mut count = [0u8; 8];
                    let _ = rustix::io::read(&w.fd, &mut count);
                    w.pending.swap(false, Ordering::SeqCst);
                }
                continue;
            }
            let key = key as usize;
            let flags = ev.flags;
            use epoll::EventFlags as F;
            if flags.intersects(F::IN | F::RDHUP | F::HUP | F::ERR) {
                self.read(key, now, out);
            }
            if flags.contains(F::OUT) {
                self.write(key, now, out);
            }
        }
        woken
    }

    fn accept(&mut self, out: &mut Vec<Ready>) {
        for _ in 0..ACCEPTS_PER_TURN {
            let Some(listener) = &self.listener else { return };
            match listener.accept() {
                Ok((stream, _)) => out.push(Ready::Accepted(stream)),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    out.push(Ready::AcceptFailed(e));
                    return;
                }
            }
        }
    }

    /// One read of connection `key` into the shared buffer, and every whole
    /// frame in it.
    fn read(&mut self, key: usize, now: Instant, out: &mut Vec<Ready>) {
        let Some(c) = self.conns.get_mut(key) else { return };
        if c.backlogged {
            // Its socket waits until what it already sent is opened.
            return;
        }
        let n = match c.stream.read(&mut self.scratch) {
            Ok(0) => {
                let cause = match c.closing {
                    Closing::Draining(_) => CloseCause::Local,
                    _ => CloseCause::PeerClosed,
                };
                self.remove(key, cause, out);
                return;
            }
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => return,
            Err(e) => {
                self.remove(key, CloseCause::read(&e), out);
                return;
            }
        };
        if matches!(c.closing, Closing::Draining(_)) {
            return;
        }
        c.last_read = now;
        let was_handshaking = c.wire.handshaking();
        let bytes = &self.scratch[..n];
        let taken = take_in(c, bytes, &mut self.plain, self.cfg.tls.as_deref());
        let (wants_write, opened) = match &c.wire {
            Wire::Tls(tls) => (tls.wants_write(), was_handshaking && !tls.is_handshaking()),
            _ => (false, false),
        };
        if let Err(cause) = taken {
            self.remove(key, cause, out);
            return;
        }
        if wants_write || opened {
            // TLS handshake records to answer, or what waited for the
            // handshake to end.
            self.mark(key);
        }
        self.open_frames(key, out);
    }

    /// Opens up to [`MAX_FRAMES_PER_TURN`] whole frames of connection `key`
    /// (the handshake's, then messages into `out`); more wait in the
    /// backlog.
    fn open_frames(&mut self, key: usize, out: &mut Vec<Ready>) {
        let Some(c) = self.conns.get_mut(key) else { return };
        let conn = c.id;
        let mut failed = None;
        let mut wrote = false;
        let mut opened = 0;
        let Conn { reader, link, out: buf, .. } = c;
        loop {
            if opened == MAX_FRAMES_PER_TURN {
                c.backlogged = true;
                self.backlog.push(key);
                break;
            }
            opened += 1;
            let body = match reader.next_body() {
                Ok(Some(body)) => body,
                Ok(None) => break,
                Err(e) => {
                    failed = Some(CloseCause::frame(e));
                    break;
                }
            };
            match link {
                Link::Open { opener, .. } => match opener.open(body, &self.decoder) {
                    Ok(msg) => out.push(Ready::Net(NetEvent::Message { conn, msg })),
                    Err(e) => {
                        failed = Some(CloseCause::Refused(e));
                        break;
                    }
                },
                Link::Handshake { hs, held } => match hs.receive(body) {
                    Step::Send(frame) => {
                        buf.extend_from_slice(&frame);
                        wrote = true;
                    }
                    Step::Established { frame, session } => {
                        if let Some(frame) = frame {
                            buf.extend_from_slice(&frame);
                        }
                        let auth::Session { mut sealer, opener } = session;
                        for msg in held.drain(..) {
                            sealer.seal_into(&msg, buf);
                        }
                        reader.set_max_body(opener.max_body(self.cfg.max_frame));
                        if let (Side::Server, Some(claims)) = (hs.side(), hs.token_claims()) {
                            let claims = Box::new(claims.clone());
                            out.push(Ready::Net(NetEvent::Authenticated { conn, claims }));
                        }
                        *link = Link::Open { sealer, opener };
                        wrote = true;
                    }
                    Step::Failed { error, frame } => {
                        if let Some(frame) = frame {
                            // Best effort: the refusal names the reason.
                            write_now(&mut c.wire, &mut c.stream, &frame);
                        }
                        failed = Some(CloseCause::HandshakeRefused(error));
                        break;
                    }
                },
            }
        }
        if let Some(cause) = failed {
            self.remove(key, cause, out);
        } else if wrote {
            self.mark(key);
        }
    }

    /// Writes what connection `key` has, as far as the socket takes it.
    fn write(&mut self, key: usize, now: Instant, out: &mut Vec<Ready>) {
        let Some(c) = self.conns.get_mut(key) else { return };
        let mut progressed = false;
        // The socket refused more (writable interest is then asked for);
        // otherwise what is left waits for a handshake to end.
        let mut blocked = false;
        loop {
            let wrote = match &mut c.wire {
                Wire::Unsniffed => break,
                Wire::Plain => {
                    if c.out_at == c.out.len() {
                        break;
                    }
                    c.stream.write(&c.out[c.out_at..])
                }
                Wire::Tls(tls) => {
                    if !tls.wants_write() {
                        if tls.is_handshaking() || c.out_at == c.out.len() {
                            break;
                        }
                        let end = c.out.len().min(c.out_at + TLS_CHUNK);
                        let n = tls.writer().write(&c.out[c.out_at..end]).unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        c.out_at += n;
                        let taken = n.min(c.queued);
                        c.queued -= taken;
                        self.queued_total -= taken;
                    }
                    // TLS records: the plaintext left the count as rustls
                    // took it (at most TLS_CHUNK of it waits in there).
                    match tls.write_tls(&mut c.stream) {
                        Ok(n) => {
                            if n == 0 {
                                blocked = true;
                                break;
                            }
                            progressed = true;
                            continue;
                        }
                        Err(e) => Err(e),
                    }
                }
            };
            match wrote {
                Ok(0) => {
                    blocked = true;
                    break;
                }
                Ok(n) => {
                    c.out_at += n;
                    // Written bytes leave the queue's count at once: a
                    // peer that reads steadily while more is queued never
                    // drains the buffer whole, and must not be counted as
                    // not reading (the frames' overheads leave when it does).
                    let written = n.min(c.queued);
                    c.queued -= written;
                    self.queued_total -= written;
                    progressed = true;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    blocked = true;
                    break;
                }
                Err(e) => {
                    let cause = match e.kind() {
                        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset => {
                            CloseCause::PeerReset(e.to_string())
                        }
                        _ => CloseCause::write(&e),
                    };
                    self.remove(key, cause, out);
                    return;
                }
            }
        }
        let tls_pending = matches!(&c.wire, Wire::Tls(tls) if tls.wants_write());
        if c.out_at == c.out.len() && !tls_pending {
            c.out.clear();
            c.out_at = 0;
            if c.out.capacity() > KEEP_OUT {
                c.out = Vec::new();
            }
            self.queued_total -= c.queued;
            c.queued = 0;
            c.stalled_since = None;
            if c.closing == Closing::AfterFlush
                && matches!(c.link, Link::Open { .. })
                && !c.wire.handshaking()
            {
                if let Wire::Tls(tls) = &mut c.wire {
                    tls.send_close_notify();
                    let _ = tls.write_tls(&mut c.stream);
                }
                let _ = c.stream.shutdown(Shutdown::Write);
                c.closing = Closing::Draining(now);
            }
            if c.want_write {
                c.want_write = false;
                let _ = epoll::modify(
                    &self.epoll,
                    &c.stream,
                    epoll::EventData::new_u64(key as u64),
                    epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
                );
            }
        } else if !blocked {
            // Waiting for a TLS handshake (or the first byte): the
            // handshake timeout covers it, the read's turn writes it.
        } else {
            if progressed || c.stalled_since.is_none() {
                c.stalled_since = Some(now);
            }
            // The written prefix is given back once it is most of the
            // buffer, so a buffer that never drains whole stays bounded.
            if c.out_at > KEEP_OUT && c.out_at * 2 > c.out.len() {
                c.out.drain(..c.out_at);
                c.out_at = 0;
            }
            if !c.want_write {
                c.want_write = true;
                let _ = epoll::modify(
                    &self.epoll,
                    &c.stream,
                    epoll::EventData::new_u64(key as u64),
                    epoll::EventFlags::IN | epoll::EventFlags::OUT | epoll::EventFlags::RDHUP,
                );
            }
        }
        if c.closing == Closing::AfterFlush
            && (matches!(c.link, Link::Handshake { .. }) || c.wire.handshaking())
        {
            // Closed before its session existed: nothing sealed to write.
            self.remove(key, CloseCause::Local, out);
        }
    }

    /// Writes every output buffer that has bytes, once (see the module
    /// docs); connections that end doing so report in `out`.
    pub fn flush(&mut self, out: &mut Vec<Ready>) {
        if self.to_flush.is_empty() {
            return;
        }
        let now = Instant::now();
        let keys = std::mem::take(&mut self.to_flush);
        for &key in &keys {
            if let Some(c) = self.conns.get_mut(key) {
                c.dirty = false;
                if !c.want_write {
                    self.write(key, now, out);
                }
            }
        }
        let mut keys = keys;
        keys.clear();
        if self.to_flush.is_empty() {
            self.to_flush = keys;
        }
    }

    /// Closes the connections past a timeout (handshake, read, write,
    /// drain), if the sweep is due; they report in `out`.
    pub fn sweep(&mut self, now: Instant, out: &mut Vec<Ready>) {
        if now < self.next_sweep {
            return;
        }
        self.next_sweep = now + SWEEP_EVERY;
        let (read, write, handshake) =
            (self.cfg.read_timeout(), self.cfg.write_timeout(), self.cfg.handshake_timeout);
        let mut ended = Vec::new();
        for (key, c) in &self.conns {
            let cause = match c.closing {
                Closing::Draining(since) if now.duration_since(since) >= DRAIN_FOR => {
                    Some(CloseCause::Local)
                }
                Closing::Draining(_) => None,
                _ if (matches!(c.link, Link::Handshake { .. }) || c.wire.handshaking())
                    && now.duration_since(c.opened) >= handshake =>
                {
                    Some(CloseCause::TimedOut { what: "handshake", after: handshake })
                }
                _ if c.stalled_since.is_some_and(|s| now.duration_since(s) >= write) => {
                    Some(CloseCause::WriteStalled { after: write })
                }
                // A peer whose frames wait in the backlog is not silent:
                // its socket is unread because the loop has not opened
                // what it sent yet (docs/design.md#issue-46).
                _ if !c.backlogged && now.duration_since(c.last_read) >= read => {
                    Some(CloseCause::TimedOut { what: "idle connection", after: read })
                }
                _ => None,
            };
            if let Some(cause) = cause {
                ended.push((key, cause));
            }
        }
        for (key, cause) in ended {
            self.remove(key, cause, out);
        }
    }

    /// Drops connection `key` at once (nothing more is written): deleted
    /// from the epoll instance first, then closed; its `Closed` goes to
    /// `out`.
    fn remove(&mut self, key: usize, cause: CloseCause, out: &mut Vec<Ready>) {
        if !self.conns.contains(key) {
            return;
        }
        let c = self.conns.remove(key);
        let _ = epoll::delete(&self.epoll, &c.stream);
        self.queued_total -= c.queued;
        tracing::debug!(peer = %c.peer, conn = %c.id, reason = %cause, "connection ended");
        out.push(Ready::Net(NetEvent::Closed { conn: c.id, cause }));
    }
}

/// Takes `bytes` read from `c`'s socket: decides its wire on the first
/// byte of an accepted connection, opens TLS records, and feeds the
/// plaintext to the frame reader. A refusal or a TLS failure is the
/// connection's close cause (a TLS alert naming it is written first, best
/// effort).
fn take_in(
    c: &mut Conn,
    bytes: &[u8],
    plain: &mut Vec<u8>,
    tls: Option<&regent_std::tls::TlsContext>,
) -> Result<(), CloseCause> {
    if let (Wire::Unsniffed, Some(&first)) = (&c.wire, bytes.first()) {
        use regent_std::tls::TlsContext;
        let sniffed = TlsContext::sniff(tls, first).map_err(|reason| {
            if tls.is_some() {
                // It tells the peer it met TLS (its bytes were all read:
                // the close is a FIN, not a reset that would discard this).
                let _ = c.stream.write(&regent_std::tls::PLAIN_PEER_ALERT);
            }
            CloseCause::Tls(reason.to_string())
        })?;
        c.wire = match sniffed {
            false => {
                if tls.is_some() {
                    tracing::info!(peer = %c.peer, "a plain-TCP peer accepted (--tls-optional)");
                }
                Wire::Plain
            }
            true => {
                let tls = tls.expect("sniff speaks TLS only with a context");
                let conn = rustls::ServerConnection::new(tls.server())
                    .map_err(|e| CloseCause::Tls(regent_std::tls::describe(&e)))?;
                Wire::Tls(Box::new(conn.into()))
            }
        };
    }
    let Wire::Tls(tls) = &mut c.wire else {
        return c.reader.feed(bytes).map_err(CloseCause::frame);
    };
    if plain.is_empty() {
        // Only a poller with TLS connections keeps this buffer.
        plain.resize(READ_CHUNK, 0);
    }
    let mut rest = bytes;
    while !rest.is_empty() {
        tls.read_tls(&mut rest)
            .map_err(|e| CloseCause::Tls(format!("reading TLS records: {e}")))?;
        if let Err(e) = tls.process_new_packets() {
            // The alert rustls queued tells the peer why.
            let _ = tls.write_tls(&mut c.stream);
            return Err(CloseCause::Tls(regent_std::tls::describe(&e)));
        }
        loop {
            match tls.reader().read(plain) {
                // The peer's close_notify.
                Ok(0) => return Err(CloseCause::PeerClosed),
                Ok(n) => c.reader.feed(&plain[..n]).map_err(CloseCause::frame)?,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(CloseCause::Tls(format!("reading TLS: {e}"))),
            }
        }
    }
    Ok(())
}

/// Writes `bytes` at once, best effort (a refusal's last frame).
fn write_now(wire: &mut Wire, stream: &mut TcpStream, bytes: &[u8]) {
    match wire {
        Wire::Tls(tls) => {
            let _ = tls.writer().write_all(bytes);
            let _ = tls.write_tls(stream);
        }
        _ => {
            let _ = stream.write(bytes);
        }
    }
}

/// The std stream under a smol one (a dialled connection handed to the
/// poller): taken out of async-io's reactor, still nonblocking.
pub fn into_std(stream: smol::net::TcpStream) -> std::io::Result<TcpStream> {
    let shared: Arc<async_io::Async<TcpStream>> = stream.into();
    Arc::try_unwrap(shared)
        .map_err(|_| std::io::Error::other("the stream is still shared"))?
        .into_inner()
}

#[cfg(test)]
mod tests {
    //! The twins of `crate::net`'s tests, on the poller: a peer that does
    //! not read, a write without progress, frames sent before a close, a
    //! half-open connection, and the sealed handshake with the old layer
    //! on the other end.
    use super::*;
    use crate::net::spawn_connection;
    use crate::net::tests::big;
    use async_channel::Receiver;
    use regent_core::secret::Secret;
    use regent_core::{Epoch, Incarnation};
    use regent_std::tls::{DevCa, TlsContext, TlsMaterial, Validity};

    fn secret() -> Option<Secret> {
        Some(Secret::new(b"0123456789abcdef-secret".to_vec()).unwrap())
    }

    fn poller(cfg: NetConfig) -> Poller {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        Poller::new(Some(l), Arc::new(cfg)).unwrap()
    }

    /// One turn of a master's loop: wait up to 50 ms for a ready socket,
    /// take them, sweep, flush; what happened.
    fn turn(p: &mut Poller) -> Vec<Ready> {
        let mut out = Vec::new();
        p.wait(Duration::from_millis(50), &mut out);
        p.sweep(Instant::now(), &mut out);
        p.flush(&mut out);
        out
    }

    /// Turns until `f` picks something out of a report (60 s bound).
    fn until<T>(
        p: &mut Poller,
        what: &str,
        mut f: impl FnMut(&mut Poller, Ready) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "never saw {what}");
            for r in turn(p) {
                if let Some(t) = f(p, r) {
                    return t;
                }
            }
        }
    }

    /// Accepts one connection: its number.
    /// Writes heartbeats 0..`n` to `c` in one write; the heartbeat of
    /// each number, to compare what arrives.
    fn heartbeats(c: &mut std::net::TcpStream, n: u64) -> fn(u64) -> Message {
        let hb = |i| Message::WorkerHeartbeat { incarnation: Incarnation(i) };
        let mut bytes = Vec::new();
        for i in 0..n {
            bytes.extend(regent_core::codec::encode(&hb(i)));
        }
        c.write_all(&bytes).unwrap();
        hb
    }

    fn accept(p: &mut Poller) -> ConnId {
        until(p, "the connection", |p, r| match r {
            Ready::Accepted(s) => Some(p.add(s, Side::Server).unwrap().0),
            _ => None,
        })
    }

    fn closed(p: &mut Poller, conn: ConnId) -> CloseCause {
        until(p, "the close", |_, r| match r {
            Ready::Net(NetEvent::Closed { conn: c, cause }) if c == conn => Some(cause),
            _ => None,
        })
    }

    /// Sends `msg` every `pause` to a raw client that never reads, until the
    /// connection closes: why.
    fn flood(cfg: NetConfig, msg: Message, pause: Duration) -> (CloseCause, Poller) {
        let mut p = poller(cfg);
        let _c = std::net::TcpStream::connect(p.local_addr().unwrap()).unwrap();
        let conn = accept(&mut p);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "the non-reading peer was never disconnected");
            let mut out = Vec::new();
            p.send(conn, &msg, &mut out);
            p.flush(&mut out);
            p.sweep(Instant::now(), &mut out);
            for r in out {
                if let Ready::Net(NetEvent::Closed { cause, .. }) = r {
                    return (cause, p);
                }
            }
            std::thread::sleep(pause);
        }
    }

    #[test]
    fn a_peer_that_does_not_read_is_disconnected_past_the_queue_bound() {
        let mut cfg = NetConfig::new("c", None);
        cfg.max_send_queue = 256 * 1024;
        let (cause, p) = flood(cfg, big(16 * 1024), Duration::from_micros(100));
        let reason = cause.to_string();
        assert!(reason.contains("send queue over 262144 bytes"), "{reason}");
        assert!(reason.contains("not reading") && cause.is_refusal(), "{reason}");
        assert_eq!(p.queued_bytes(), 0, "nothing stays counted once closed");
        assert!(p.is_empty());
    }

    #[test]
    fn a_write_without_progress_times_out() {
        let cfg = NetConfig::write_timeout_only("c", Duration::from_millis(300));
        let (cause, p) = flood(cfg, big(256 * 1024), Duration::from_millis(2));
        assert!(cause.to_string().contains("write timed out after 300ms"), "{cause}");
        assert_eq!(p.queued_bytes(), 0);
    }

    /// A peer that reads steadily while the master keeps its buffer from
    /// ever draining whole is served, not taken for one that does not read:
    /// written bytes leave the send queue's count as they are written.
    #[test]
    fn a_peer_reading_steadily_is_sent_past_the_queue_bound_without_a_close() {
        let mut cfg = NetConfig::new("c", None);
        cfg.max_send_queue = 1 << 20;
        let mut p = poller(cfg);
        let mut c = std::net::TcpStream::connect(p.local_addr().unwrap()).unwrap();
        // Small kernel buffers both ends, so the reader's pace is felt.
        rustix::net::sockopt::set_socket_recv_buffer_size(&c, 64 * 1024).unwrap();
        let conn = until(&mut p, "the connection", |p, r| match r {
            Ready::Accepted(s) => {
                rustix::net::sockopt::set_socket_send_buffer_size(&s, 64 * 1024).unwrap();
                Some(p.add(s, Side::Server).unwrap().0)
            }
            _ => None,
        });
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            let mut total = 0usize;
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 {
                    break;
                }
                total += n;
                std::thread::sleep(Duration::from_millis(2));
            }
            total
        });
        // 8 MiB in all, eight times the bound, as fast as the buffer holds
        // under half the bound: it never drains whole.
        let frame = big(32 * 1024);
        let len = regent_core::codec::frame_len(&frame);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut sent = 0usize;
        while sent < 8 << 20 {
            assert!(Instant::now() < deadline, "only {sent} bytes sent");
            let mut out = Vec::new();
            if p.pending(conn) < 512 * 1024 {
                p.send(conn, &frame, &mut out);
                sent += len;
            }
            p.poll(&mut out);
            p.flush(&mut out);
            assert!(out.is_empty(), "closed while the peer reads: {out:?}");
            std::thread::sleep(Duration::from_micros(100));
        }
        p.close(conn);
        closed(&mut p, conn);
        assert_eq!(reader.join().unwrap(), sent, "every byte arrived");
    }

    /// Regression twin of seed-002's: a master that tells a peer something
    /// and hangs up at once must not cut those frames off — even while the
    /// peer keeps sending (unread bytes at close would turn it into a reset).
    #[test]
    fn frames_sent_before_close_reach_the_peer_even_while_it_sends() {
        let mut p = poller(NetConfig::new("c", None));
        let mut c = std::net::TcpStream::connect(p.local_addr().unwrap()).unwrap();
        let conn = accept(&mut p);
        let hb = Message::WorkerHeartbeat { incarnation: Incarnation(7) };
        for _ in 0..50 {
            c.write_all(&regent_core::codec::encode(&hb)).unwrap();
        }
        // Not read by the master before it closes: still in its socket.
        let mut out = Vec::new();
        p.send(conn, &big(100_000), &mut out);
        p.send(conn, &Message::HeartbeatAck { epoch: Epoch(3) }, &mut out);
        p.close(conn);
        p.flush(&mut out);
        let reader = std::thread::spawn(move || {
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut all = Vec::new();
            c.read_to_end(&mut all).map(|_| all)
        });
        closed(&mut p, conn);
        let all = reader.join().unwrap().expect("EOF, not a reset");
        let mut d =
            regent_core::codec::Decoder::new(DecoderConfig { max_frame: 1 << 20, cluster: None });
        d.feed(&all).unwrap();
        assert_eq!(d.next_message().unwrap(), Some(big(100_000)));
        assert_eq!(d.next_message().unwrap(), Some(Message::HeartbeatAck { epoch: Epoch(3) }));
        assert_eq!(d.next_message().unwrap(), None);
    }

    /// A peer that sends a thousand frames at once gets 64 opened a turn,
    /// the rest in later turns, in order: a flood cannot hold the loop or
    /// fill memory with decoded messages.
    #[test]
    fn a_flood_of_frames_is_opened_a_share_per_turn_in_order() {
        let mut p = poller(NetConfig::new("c", None));
        let mut c = std::net::TcpStream::connect(p.local_addr().unwrap()).unwrap();
        let conn = accept(&mut p);
        let hb = heartbeats(&mut c, 1_000);
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while got.len() < 1_000 {
            assert!(Instant::now() < deadline, "only {} of 1000 frames arrived", got.len());
            let turn = turn(&mut p);
            assert!(turn.len() <= MAX_FRAMES_PER_TURN, "{} messages in one turn", turn.len());
            for r in turn {
                match r {
                    Ready::Net(NetEvent::Message { conn: c, msg }) if c == conn => got.push(msg),
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(got, (0..1_000).map(hb).collect::<Vec<_>>());
        assert!(!p.has_backlog());
    }

    /// The waker interrupts a `wait` blocked with a far timeout and no
    /// socket activity, from another thread, promptly; the wake is taken
    /// (the next wait blocks again), and a wake before the wait is not lost
    /// (docs/design.md#issue-46).
    #[test]
    fn the_waker_ends_a_blocked_wait_and_is_taken_once() {
        let mut p = poller(NetConfig::new("c", None));
        let waker = p.waker().unwrap();
        let far = Duration::from_secs(600);
        let mut out = Vec::new();
        let woke = std::thread::spawn({
            let waker = waker.clone();
            move || {
                std::thread::sleep(Duration::from_millis(200));
                waker.wake();
                waker.wake();
            }
        });
        let started = Instant::now();
        assert!(p.wait(far, &mut out), "the wait ended without the waker");
        let took = started.elapsed();
        assert!(took < Duration::from_secs(60), "woken after {took:?}");
        woke.join().unwrap();
        assert!(out.is_empty(), "{out:?}");
        // Taken: a short wait now times out unwoken.
        assert!(!p.wait(Duration::from_millis(50), &mut out));
        // A wake before the wait ends it at once.
        waker.wake();
        let started = Instant::now();
        assert!(p.wait(far, &mut out));
        assert!(started.elapsed() < Duration::from_secs(60));
        assert!(!p.wait(Duration::ZERO, &mut out));
    }

    /// A peer that vanished without a FIN (half-open) is found by the read
    /// timeout, reported as one.
    #[test]
    fn a_silent_connection_is_closed_by_the_read_timeout() {
        let mut cfg = NetConfig::new("c", None);
        cfg.idle_timeout = Duration::from_millis(400);
        cfg.set_heartbeat_interval(Duration::from_millis(1));
        let mut p = poller(cfg);
        let _c = std::net::TcpStream::connect(p.local_addr().unwrap()).unwrap();
        let conn = accept(&mut p);
        let cause = closed(&mut p, conn);
        assert!(cause.to_string().contains("idle connection timed out after 400ms"), "{cause}");
        assert_eq!(cause.ended(), regent_core::node::Ended::TimedOut);
    }

    /// A connection whose frames wait in the backlog is not idle, however
    /// long since its socket was last read (e2e_hostile_load's floods were
    /// cut as idle; docs/design.md#issue-46); once they are all opened, the
    /// read timeout applies again.
    #[test]
    fn a_backlogged_connection_is_not_timed_out_as_idle() {
        let mut cfg = NetConfig::new("c", None);
        cfg.idle_timeout = Duration::from_millis(400);
        cfg.set_heartbeat_interval(Duration::from_millis(1));
        let mut p = poller(cfg);
        let mut c = std::net::TcpStream::connect(p.local_addr().unwrap()).unwrap();
        let conn = accept(&mut p);
        heartbeats(&mut c, 1_000);
        let mut got = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !p.has_backlog() {
            assert!(Instant::now() < deadline, "no backlog");
            got += turn(&mut p).len();
        }
        let mut out = Vec::new();
        p.sweep(Instant::now() + Duration::from_secs(5), &mut out);
        assert!(out.is_empty(), "a backlogged connection timed out: {out:?}");
        while got < 1_000 {
            assert!(Instant::now() < deadline, "only {got} of 1000 frames");
            got += turn(&mut p).len();
        }
        p.sweep(Instant::now() + Duration::from_secs(10), &mut out);
        match out.as_slice() {
            [Ready::Net(NetEvent::Closed { conn: c, cause })] if *c == conn => {
                assert!(cause.to_string().contains("idle connection timed out"), "{cause}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_oversized_frame_is_refused_before_its_body_arrives() {
        let mut p = poller(NetConfig::new("c", None));
        let mut c = std::net::TcpStream::connect(p.local_addr().unwrap()).unwrap();
        let conn = accept(&mut p);
        c.write_all(&u32::MAX.to_be_bytes()).unwrap();
        let cause = closed(&mut p, conn);
        assert!(
            cause.is_refusal() && cause.to_string().contains("exceeds the maximum of 1048576"),
            "{cause}"
        );
    }

    #[test]
    fn a_peer_without_the_secret_is_refused_and_a_silent_one_times_out() {
        let mut cfg = NetConfig::new("c", secret());
        cfg.handshake_timeout = Duration::from_millis(300);
        let mut p = poller(cfg);
        let mut plain = std::net::TcpStream::connect(p.local_addr().unwrap()).unwrap();
        let conn = accept(&mut p);
        plain.write_all(&regent_core::codec::encode(&big(3))).unwrap();
        let cause = closed(&mut p, conn);
        assert!(cause.is_handshake_refusal(), "{cause}");

        let _silent = std::net::TcpStream::connect(p.local_addr().unwrap()).unwrap();
        let conn = accept(&mut p);
        let cause = closed(&mut p, conn);
        assert!(cause.to_string().contains("handshake timed out after 300ms"), "{cause}");
    }

    /// The poller's server end and the old layer's client end agree on the
    /// handshake and the sealed frames, in order both ways; what the
    /// master sends before the handshake is done waits for it.
    #[test]
    fn sealed_frames_arrive_in_order_both_ways() {
        let mut p = poller(NetConfig::new("c", secret()));
        let (client, crx) = client_of(&p, NetConfig::new("c", secret()));
        let conn = accept(&mut p);
        exchange_in_order(&mut p, &client, &crx, conn);
        assert_eq!(p.queued_bytes(), 0, "everything written is counted out");
    }

    /// 500 heartbeats each way between `p`'s `conn` and `client` (the
    /// master's sent at once, before any handshake is done): each side
    /// receives the other's in order.
    fn exchange_in_order(
        p: &mut Poller,
        client: &crate::net::ConnHandle,
        crx: &Receiver<NetEvent>,
        conn: ConnId,
    ) {
        let hb = |i| Message::WorkerHeartbeat { incarnation: Incarnation(i) };
        let mut out = Vec::new();
        for i in 0..500 {
            client.send(hb(i));
            p.send(conn, &hb(1_000 + i), &mut out);
        }
        assert!(out.is_empty());
        let mut got = 0;
        until(p, "500 frames", |_, r| match r {
            Ready::Net(NetEvent::Message { msg, .. }) => {
                assert_eq!(msg, hb(got));
                got += 1;
                (got == 500).then_some(())
            }
            other => panic!("{other:?}"),
        });
        for i in 0..500 {
            match recv(crx) {
                NetEvent::Message { msg, .. } => assert_eq!(msg, hb(1_000 + i)),
                other => panic!("{other:?}"),
            }
        }
    }

    /// TLS material of one development CA: a master's (naming 127.0.0.1)
    /// and a worker's.
    fn tls_pair(optional: bool) -> (Arc<TlsContext>, Arc<TlsContext>) {
        let ca = DevCa::new("c").unwrap();
        let ctx = |name: &str| {
            let issued = ca.issue(&[name.to_string()], Validity::Open).unwrap();
            let m = TlsMaterial::from_pem(&issued.cert_pem, &issued.key_pem, &ca.cert_pem());
            Arc::new(TlsContext::new(&m.unwrap(), optional).unwrap())
        };
        (ctx("127.0.0.1"), ctx("w1"))
    }

    fn with_tls(mut cfg: NetConfig, tls: &Arc<TlsContext>) -> NetConfig {
        cfg.tls = Some(tls.clone());
        cfg
    }

    /// A task-layer client of `p` with `cfg`: its handle and events.
    fn client_of(p: &Poller, cfg: NetConfig) -> (crate::net::ConnHandle, Receiver<NetEvent>) {
        let addr = p.local_addr().unwrap();
        let (ctx, crx) = async_channel::unbounded();
        let h = smol::block_on(async {
            let s = smol::net::TcpStream::connect(addr).await.unwrap();
            spawn_connection(s, Side::Client, ConnId(2), Arc::new(cfg), ctx)
        });
        (h, crx)
    }

    fn recv(rx: &Receiver<NetEvent>) -> NetEvent {
        smol::block_on(async {
            smol::future::or(async { rx.recv().await.unwrap() }, async {
                async_io::Timer::after(Duration::from_secs(60)).await;
                panic!("nothing arrived within 60 s")
            })
            .await
        })
    }

    /// Turns `p` until the client hears something (60 s bound).
    fn turn_until_heard(p: &mut Poller, rx: &Receiver<NetEvent>) -> NetEvent {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "the client heard nothing");
            turn(p);
            if let Ok(e) = rx.try_recv() {
                return e;
            }
        }
    }

    /// The poller's TLS server end and the task layer's TLS client end,
    /// with the cluster secret under TLS: the handshakes complete, frames
    /// arrive in order both ways, and what the master sent before them
    /// waited for them.
    #[test]
    fn tls_frames_arrive_in_order_both_ways_over_the_secret_handshake() {
        let (server, worker) = tls_pair(false);
        let mut p = poller(with_tls(NetConfig::new("c", secret()), &server));
        let (client, crx) = client_of(&p, with_tls(NetConfig::new("c", secret()), &worker));
        let conn = accept(&mut p);
        exchange_in_order(&mut p, &client, &crx, conn);
        // And one frame larger than a TLS record and the chunk moved at once.
        let mut out = Vec::new();
        p.send(conn, &big(200_000), &mut out);
        let last = turn_until_heard(&mut p, &crx);
        assert!(matches!(last, NetEvent::Message { msg, .. } if msg == big(200_000)));
        assert_eq!(p.queued_bytes(), 0, "everything written is counted out");
        // A close after the last frame reaches the client as the peer's.
        p.close(conn);
        closed(&mut p, conn);
        match recv(&crx) {
            NetEvent::Closed { cause, .. } => assert_eq!(cause, CloseCause::PeerClosed),
            other => panic!("{other:?}"),
        }
    }

    /// A plain-TCP client of a master that requires TLS is refused with the
    /// reason, and is itself told it met TLS (not "peer closed").
    #[test]
    fn a_plain_peer_is_refused_by_a_tls_master_and_told_it_met_tls() {
        let (server, _) = tls_pair(false);
        let mut p = poller(with_tls(NetConfig::new("c", None), &server));
        let (client, crx) = client_of(&p, NetConfig::new("c", None));
        client.send(big(3));
        let conn = accept(&mut p);
        let cause = closed(&mut p, conn);
        assert_eq!(cause, CloseCause::Tls(regent_std::tls::PLAIN_PEER_REFUSED.into()));
        match recv(&crx) {
            NetEvent::Closed { cause, .. } => {
                assert!(cause.is_handshake_refusal(), "{cause}");
                assert_eq!(
                    cause.to_string(),
                    format!("TLS: {}", regent_std::tls::TLS_PEER_REFUSED)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    /// With `--tls-optional` the same plain client is served, and a TLS
    /// client beside it too.
    #[test]
    fn tls_optional_serves_a_plain_and_a_tls_peer_at_once() {
        let (server, worker) = tls_pair(true);
        let mut p = poller(with_tls(NetConfig::new("c", None), &server));
        for cfg in [NetConfig::new("c", None), with_tls(NetConfig::new("c", None), &worker)] {
            let (client, crx) = client_of(&p, cfg);
            client.send(big(3));
            let conn = accept(&mut p);
            let msg = until(&mut p, "the frame", |_, r| match r {
                Ready::Net(NetEvent::Message { msg, .. }) => Some(msg),
                other => panic!("{other:?}"),
            });
            assert_eq!(msg, big(3));
            let mut out = Vec::new();
            p.send(conn, &big(4), &mut out);
            let answer = turn_until_heard(&mut p, &crx);
            assert!(matches!(answer, NetEvent::Message { msg, .. } if msg == big(4)));
        }
    }

    /// A TLS peer that completes its handshake and then stops reading is
    /// disconnected past the queue bound, as a plain one is: what waits in
    /// rustls is bounded by the chunk moved at once.
    #[test]
    fn a_tls_peer_that_does_not_read_is_disconnected_past_the_queue_bound() {
        let (server, worker) = tls_pair(false);
        let mut cfg = with_tls(NetConfig::new("c", None), &server);
        cfg.max_send_queue = 256 * 1024;
        let mut p = poller(cfg);
        let mut raw = std::net::TcpStream::connect(p.local_addr().unwrap()).unwrap();
        let conn = accept(&mut p);
        let name = regent_std::tls::server_name("127.0.0.1").unwrap();
        let mut tls = rustls::ClientConnection::new(worker.client(), name).unwrap();
        // The handshake, driven by hand on the client's side.
        let deadline = Instant::now() + Duration::from_secs(60);
        raw.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        while tls.is_handshaking() {
            assert!(Instant::now() < deadline, "the TLS handshake never completed");
            while tls.wants_write() {
                tls.write_tls(&mut raw).unwrap();
            }
            turn(&mut p);
            match tls.read_tls(&mut raw) {
                Ok(_) => {
                    tls.process_new_packets().unwrap();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        while tls.wants_write() {
            tls.write_tls(&mut raw).unwrap();
        }
        let msg = big(16 * 1024);
        loop {
            assert!(Instant::now() < deadline, "the non-reading peer was never disconnected");
            let mut out = Vec::new();
            p.send(conn, &msg, &mut out);
            p.poll(&mut out);
            p.flush(&mut out);
            if let Some(Ready::Net(NetEvent::Closed { cause, .. })) = out.pop() {
                assert!(cause.to_string().contains("send queue over 262144 bytes"), "{cause}");
                break;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        assert_eq!(p.queued_bytes(), 0);
    }
}

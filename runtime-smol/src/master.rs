//! The master daemon: an I/O pump for `regent_core::node::MasterNode`.
//!
//! One loop owns the node, on its own thread (docs/design.md#issue-46). It
//! waits for a connection, a frame, a ZooKeeper
//! event, a store completion, an HTTP query, the node's next deadline or
//! shutdown; makes one `handle` call; executes every output in order. It
//! makes no protocol decision: leadership, the lease, the fenced ZooKeeper
//! store (on the elector's one session) and stepping down all live in the
//! node. The pump's I/O: TCP connections (the listener and every peer on
//! one epoll instance, [`crate::poller`]: frames are handled inline, on the
//! loop, as their socket becomes readable), the ZooKeeper
//! client ([`ZkBackend`]: sessions and requests), the filesystem store's
//! writer thread (group commit, fsync off the loop) or nothing (`none`:
//! acknowledged at once), HTTP, the clock.
//!
//! The loop blocks in `epoll_wait` on the poller's epoll instance
//! ([`Poller::wait`]), the node's deadline or the poller's sweep as its
//! timeout. Everything that is not a socket runs on smol's executor (the
//! ZooKeeper client, HTTP, dials, probes) or its own thread (the store's
//! writer), and reaches the loop through a channel and the poller's
//! [`Waker`] (an eventfd in the same epoll instance): a turn under load
//! costs `epoll_wait` and the sockets' own reads and writes, no more.

use crate::error::{MasterError, HTTP_EXPOSED};
use crate::http::{self, HttpQuery};
use crate::net::{self, NetConfig, NetEvent};
use crate::poller::{Poller, Ready, Waker};
use crate::zk::{ZkBackend, ZkConfig};
use async_channel::{Receiver, Sender};
use regent_core::auth::Side;
use regent_core::master::Status;
use regent_core::node::master::{Config, Input as NodeInput, Leadership, Note, Output};
use regent_core::node::{DialId, DialResult, MasterNode, ProbeResult};
use regent_core::store::StoreEvent;
use regent_core::zk::{ZkCommand, ZkEvent};
use regent_core::{Addr, ConnId, MasterId, Millis};
use regent_std::conns::Conns;
use regent_std::host::{proc_limit, ConnectionCeiling};
use regent_std::store::{master_sealing, LocalStore};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use regent_std::config::{MasterConfig, Recovery};

/// File descriptors a master keeps for itself (store files, the ZooKeeper
/// client, HTTP requests, dials): peer connections stop this far below the
/// process's limit, so none of those ever fails for want of a descriptor
/// (at the limit, the HTTP server's accept thread used to panic).
const FD_RESERVE: usize = 256;

enum Input {
    Dialled { dial: DialId, result: Result<net::Dialled, net::DialError> },
    Probed { probe: u64, result: ProbeResult },
    Store(Vec<StoreEvent>),
    Http(HttpQuery),
    Shutdown,
}

/// The loop's inputs from other threads: a channel, then the poller's
/// [`Waker`] (docs/design.md#issue-46).
#[derive(Clone)]
struct LoopTx {
    tx: Sender<Input>,
    waker: Waker,
}

impl LoopTx {
    /// Hands the loop `input`; `false` once the loop is gone.
    fn send(&self, input: Input) -> bool {
        let sent = self.tx.try_send(input).is_ok();
        if sent {
            self.waker.wake();
        }
        sent
    }
}

/// Sends the loop [`Input::Shutdown`] when dropped: a `run_master` future
/// dropped before the loop ended stops it (a thread is not cancelled with
/// the future that started it).
struct StopOnDrop(LoopTx);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.send(Input::Shutdown);
    }
}

enum Wake {
    Input(Input),
    Zk(ZkEvent),
    /// A socket is ready ([`Poller::poll`]).
    Net,
    /// The node's deadline.
    Deadline,
    /// The connections' timeout sweep is due ([`Poller::sweep`]).
    Sweep,
}

/// Runs a master until `shutdown` fires (Ok), or, in the single-master
/// modes, until the store fails (Err naming why). A ZooKeeper-mode master
/// never stops on its own: losing leadership returns it to standby.
///
/// Exposure (before anything is bound or dialled): `listen`, `http` and
/// every ZooKeeper host must be loopback unless there is a cluster secret or
/// `insecure`; with a secret, the HTTP server requires a token on every
/// address ([`http::required_token`]). A
/// `max_connections` (the std runtime's ceiling) is refused.
pub async fn run_master(opts: MasterConfig, shutdown: Receiver<()>) -> Result<(), MasterError> {
    if opts.max_connections.is_some() {
        return Err(MasterError::MaxConnections);
    }
    let has_secret = opts.net.secret.is_some();
    net::check_exposure(&opts.listen, has_secret, opts.insecure)
        .map_err(|source| MasterError::Exposure { flag: "--listen", why: "", source })?;
    if let Some(addr) = opts.http {
        net::check_exposure(&addr, has_secret, opts.insecure).map_err(|source| {
            MasterError::Exposure { flag: "--http", why: HTTP_EXPOSED, source }
        })?;
    }
    if let Recovery::Zookeeper { hosts, .. } = &opts.recovery {
        // Resolving may block: on the blocking pool.
        let (hosts, insecure) = (hosts.clone(), opts.insecure);
        smol::unblock(move || regent_std::net::check_zk_exposure(&hosts, has_secret, insecure))
            .await
            .map_err(|source| MasterError::Exposure { flag: "--zk", why: "", source })?;
    }
    // The listener is the poller's: when this function returns it closes at
    // once, so a master restarted in the same process can bind the same
    // port.
    let listen_failed = |source| MasterError::Listen { addr: opts.listen, source };
    let listener = std::net::TcpListener::bind(opts.listen).map_err(listen_failed)?;
    regent_std::net::widen_backlog(&listener).map_err(listen_failed)?;
    let mut poller = Poller::new(Some(listener), opts.net.clone()).map_err(listen_failed)?;
    let bound = poller.local_addr().map_err(listen_failed)?;
    let advertise = opts.advertise.clone().unwrap_or_else(|| Addr(bound.to_string()));
    let waker = poller.waker().map_err(MasterError::Loop)?;
    let (tx, rx) = async_channel::unbounded::<Input>();
    let tx = LoopTx { tx, waker: waker.clone() };
    // The connections' read and write timeouts scale with the heartbeat
    // interval this master tells its peers.
    opts.net.set_heartbeat_interval(opts.heartbeat_interval);

    // Inputs from the outside world, each forwarded into the loop's channel.
    {
        let tx = tx.clone();
        smol::spawn(async move {
            let _ = shutdown.recv().await;
            tx.send(Input::Shutdown);
        })
        .detach();
    }
    if let Some(addr) = opts.http {
        let (qtx, qrx) = async_channel::unbounded::<HttpQuery>();
        let token = http::required_token(opts.net.secret.as_ref());
        match &opts.net.tls {
            // HTTPS with the node's certificate (no client certificate).
            Some(tls) => http::https::serve_tls(addr, token, qtx, tls.clone())?,
            None => http::serve_with(addr, token, qtx)?,
        };
        let tx = tx.clone();
        smol::spawn(async move {
            while let Ok(q) = qrx.recv().await {
                if !tx.send(Input::Http(q)) {
                    break;
                }
            }
        })
        .detach();
    }

    let mcfg = opts.machine(advertise.clone());

    let sealing = master_sealing(opts.net.secret.as_ref(), &opts.previous_secrets)?;
    let mut load_started = None;
    let mut store_window = regent_core::zk::DEFAULT_WRITE_WINDOW;
    let (leadership, local, backend) = match &opts.recovery {
        Recovery::None => (Leadership::Single, Some(LocalStore::Memory), None),
        Recovery::Filesystem { dir } => {
            // The store is read here, at open: its recovery time starts now.
            load_started = Some(Instant::now());
            let sink = tx.clone();
            let store = LocalStore::open_files(dir, &opts.id, sealing.clone(), move |results| {
                sink.send(Input::Store(results));
            })?;
            (Leadership::Single, Some(store), None)
        }
        Recovery::Zookeeper { hosts, root, session_timeout, write_window } => {
            let mut zkc = ZkConfig::new(hosts.clone());
            if let Some(secret) = &opts.net.secret {
                zkc = zkc.with_secret(secret.expose().to_vec());
            }
            for previous in &opts.previous_secrets {
                zkc = zkc.with_previous_secret(previous.expose().to_vec());
            }
            let mut ecfg = regent_core::elector::Config::new(
                root.clone(),
                net::random_u64(),
                MasterId::new(opts.id.clone()),
                advertise.clone(),
            );
            ecfg.session_timeout = Millis(session_timeout.as_millis() as u64);
            store_window = *write_window;
            (Leadership::Zookeeper(ecfg), None, Some(ZkBackend::new(zkc)))
        }
    };
    tracing::info!(id = %opts.id, listen = %bound, advertise = %advertise, "master listening");

    // The epoch's clock term is wall-clock ms: `clock_base + now`.
    let clock = crate::RuntimeClock::start();
    let clock_base = crate::wall_clock_ms();
    let cluster = opts.net.cluster.clone();
    let node = MasterNode::new(Config { master: mcfg, leadership, clock_base, cluster })
        .with_sealing(sealing)
        .with_store_window(store_window);
    // The ZooKeeper client stays on smol's executor: its commands go to it
    // through a channel, its events come back through another and the
    // waker (docs/design.md#issue-46).
    let (zk, zk_events, zk_bridge) = match backend {
        None => (None, None, None),
        Some(backend) => {
            let (cmd_tx, cmd_rx) = async_channel::unbounded();
            let (ev_tx, ev_rx) = async_channel::unbounded();
            let bridge = smol::spawn(zk_bridge(backend, cmd_rx, ev_tx, waker));
            (Some(cmd_tx), Some(ev_rx), Some(bridge))
        }
    };
    let pump = Pump {
        clock,
        node,
        net: opts.net.clone(),
        tx: tx.clone(),
        conns: Conns::new(),
        poller,
        ready: Vec::new(),
        local,
        zk,
        inputs: rx,
        zk_events,
        insecure: opts.insecure,
        ceiling: ConnectionCeiling::new(
            proc_limit("Max open files").map_or(usize::MAX, |f| f.saturating_sub(FD_RESERVE)),
            "the most this master takes with its file-descriptor limit (256 kept for the \
             store, ZooKeeper, HTTP and dials; raise `ulimit -n` for more)",
        ),
        pending: VecDeque::new(),
        load_started,
        local_loaded: 0,
        queries: http::queries::Waiting::new(),
        audit: opts.open_audit_log().map_err(MasterError::Audit)?,
    };
    // The loop on its own thread; this future awaits its end.
    let (done_tx, done_rx) = async_channel::bounded(1);
    let stop = StopOnDrop(tx);
    let thread = std::thread::Builder::new()
        .name("regent-master".into())
        .spawn(move || {
            let result = pump.run();
            let _ = done_tx.send_blocking(result);
        })
        .map_err(MasterError::Loop)?;
    let result = done_rx.recv().await;
    drop(stop);
    // The loop is gone (its command channel with it): the bridge ends once
    // it has executed what the loop asked last (closing the session).
    if let Some(bridge) = zk_bridge {
        bridge.await;
    }
    match result {
        Ok(result) => result,
        // The loop panicked: so does its caller.
        Err(_) => match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the loop's thread ended without a result"),
        },
    }
}

/// Runs `backend` on smol's executor for the loop on its thread
/// (docs/design.md#issue-46): executes the loop's commands in order, hands
/// it every event (then wakes it), and ends (dropping the client) once the
/// loop is gone.
async fn zk_bridge(
    mut backend: ZkBackend,
    commands: Receiver<ZkCommand>,
    events: Sender<ZkEvent>,
    waker: Waker,
) {
    enum Next {
        Command(Option<ZkCommand>),
        Event(ZkEvent),
    }
    loop {
        // Commands first; `next_event` is cancel-safe.
        let next = smol::future::or(async { Next::Command(commands.recv().await.ok()) }, async {
            Next::Event(backend.next_event().await)
        })
        .await;
        match next {
            Next::Command(Some(command)) => backend.execute(command),
            Next::Command(None) => return,
            Next::Event(event) => {
                if events.try_send(event).is_err() {
                    return;
                }
                waker.wake();
            }
        }
    }
}

impl Pump {
    /// The loop: runs until shutdown (Ok) or until the node gives up (Err).
    fn run(mut self) -> Result<(), MasterError> {
        self.feed(NodeInput::Start)?;
        loop {
            // What the last turn sent is written, and what that ended
            // reported, before the loop waits again.
            self.settle()?;
            let wake = self.next_wake();
            if !self.on_wake(wake)? {
                return Ok(());
            }
        }
    }

    /// One wake of the loop; `false` once it is to end (shutdown).
    fn on_wake(&mut self, wake: Wake) -> Result<bool, MasterError> {
        let pump = self;
        match wake {
            Wake::Deadline => pump.feed(NodeInput::Tick)?,
            Wake::Sweep => pump.poller.sweep(Instant::now(), &mut pump.ready),
            // What the poller took is in `ready`, fed by `settle`.
            Wake::Net => {}
            Wake::Zk(event) => pump.feed(NodeInput::Zk(event))?,
            Wake::Input(Input::Shutdown) => {
                tracing::info!("shutting down");
                // Closing the session lets a standby take over at once.
                let _ = pump.feed(NodeInput::Stop);
                pump.poller.close_all();
                // Let the session close and the last frames reach the wire.
                pump.linger(Duration::from_millis(100));
                return Ok(false);
            }
            Wake::Input(Input::Dialled { dial, result }) => {
                let result = match result.and_then(|d| {
                    let stream = crate::poller::into_std(d.stream).map_err(|e| net::DialError {
                        reason: format!("cannot run the dialled connection: {e}"),
                        refused: false,
                    })?;
                    Ok((stream, d.addr))
                }) {
                    Ok((stream, addr)) => match pump.run_connection(stream, Some(addr)) {
                        Ok((conn, peer)) => {
                            DialResult::Connected { conn, peer: Some(Addr::new(peer.to_string())) }
                        }
                        Err(e) => DialResult::Failed {
                            reason: format!("cannot run the dialled connection: {e}"),
                            refused: false,
                        },
                    },
                    Err(e) => DialResult::Failed { reason: e.reason, refused: e.refused },
                };
                pump.feed(NodeInput::Dialled { dial, result })?;
            }
            Wake::Input(Input::Probed { probe, result }) => {
                pump.feed(NodeInput::Probed { probe, result })?;
            }
            Wake::Input(Input::Store(results)) => {
                for r in results {
                    pump.feed(NodeInput::Store(r))?;
                }
            }
            Wake::Input(Input::Http(query)) => {
                // The node answers it (`Output::Answer`, see `Pump::step`).
                let input = pump.queries.input(query);
                pump.feed(input)?;
            }
        }
        Ok(true)
    }
}

/// The I/O pump around one `MasterNode`, following the pump contract of
/// `regent_core::node` (one `handle` per input, outputs executed in order,
/// `poll_timeout` for the next deadline).
struct Pump {
    clock: crate::RuntimeClock,
    node: MasterNode,
    net: Arc<NetConfig>,
    /// The daemon's own inputs (dial results come back here).
    tx: LoopTx,
    /// Which connections the node knows, by number, with the peer's address.
    conns: Conns<String>,
    /// The connections themselves.
    poller: Poller,
    /// What the poller reported and the node has not been fed yet.
    ready: Vec<Ready>,
    /// The single-master modes' store.
    local: Option<LocalStore>,
    /// ZooKeeper mode's client (on smol's executor, [`zk_bridge`]): its
    /// commands.
    zk: Option<Sender<ZkCommand>>,
    /// The daemon's own inputs.
    inputs: Receiver<Input>,
    /// ZooKeeper mode's client: its events.
    zk_events: Option<Receiver<ZkEvent>>,
    /// Dial non-loopback masters without a secret (`--insecure`).
    insecure: bool,
    /// Peer connections stop [`FD_RESERVE`] descriptors below the limit.
    ceiling: ConnectionCeiling,
    /// Store answers available at once (memory store, a stopped writer),
    /// fed after the outputs that caused them.
    pending: VecDeque<StoreEvent>,
    /// When the current leadership began to read its records (ZooKeeper:
    /// the election; filesystem: the store's open), until it is
    /// RECOVERING: for the "records loaded" log line.
    load_started: Option<Instant>,
    /// Records the local store's last load handed the node.
    local_loaded: usize,
    /// HTTP queries the node has not answered yet.
    queries: http::queries::Waiting,
    /// The audit log (docs/design.md#issue-44): a step's records, one
    /// fsync.
    audit: regent_std::audit::AuditLog,
}

impl Pump {
    fn now(&self) -> Millis {
        self.clock.now()
    }

    /// Runs a new connection over `stream`: accepted, or dialled to
    /// `dialled` (the name a TLS peer's certificate must carry). Its number
    /// and the peer's address.
    fn run_connection(
        &mut self,
        stream: std::net::TcpStream,
        dialled: Option<Addr>,
    ) -> std::io::Result<(ConnId, std::net::SocketAddr)> {
        let (conn, peer) = match dialled {
            None => self.poller.add(stream, Side::Server)?,
            Some(addr) => self.poller.add_dialled(stream, &addr)?,
        };
        self.conns.insert(conn, peer.to_string());
        Ok((conn, peer))
    }

    /// Feeds the node what the poller reported (and what feeding it ended,
    /// e.g. a send queue past its bound), writes what that sent, until
    /// nothing is left.
    fn settle(&mut self) -> Result<(), MasterError> {
        let mut batch = Vec::new();
        loop {
            self.poller.flush(&mut self.ready);
            if self.ready.is_empty() {
                // A flood's batch is not kept for the quiet turns after it.
                if self.ready.capacity() > 4096 {
                    self.ready = Vec::new();
                }
                return Ok(());
            }
            // Fed from `batch`: feeding may report more into `self.ready`
            // (a send past a queue bound), taken on the next round.
            std::mem::swap(&mut batch, &mut self.ready);
            for r in batch.drain(..) {
                self.on_ready(r)?;
            }
        }
    }

    fn on_ready(&mut self, r: Ready) -> Result<(), MasterError> {
        match r {
            // File descriptors are kept for the store, ZooKeeper, HTTP and
            // dials: a connection past the ceiling is closed at once.
            Ready::Accepted(stream)
                if self.ceiling.refuses(self.conns.len(), stream.peer_addr().ok()) =>
            {
                self.conns.count_refused();
            }
            Ready::Accepted(stream) => match self.run_connection(stream, None) {
                Ok((conn, _)) => self.feed(NodeInput::Accepted { conn })?,
                Err(e) => tracing::warn!("cannot run an accepted connection: {e}"),
            },
            Ready::AcceptFailed(e) => {
                tracing::warn!("accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
            Ready::Net(NetEvent::Message { conn, msg }) => {
                if self.conns.contains(conn) {
                    self.feed(NodeInput::Message { conn, msg })?;
                }
            }
            // A token's holder: the master authorizes what it sends.
            Ready::Net(NetEvent::Authenticated { conn, claims }) => {
                if self.conns.contains(conn) {
                    let principal = regent_core::token::Principal::Token(*claims);
                    self.feed(NodeInput::Authenticated { conn, principal })?;
                }
            }
            Ready::Net(NetEvent::Closed { conn, cause }) => {
                if let Some(how) = self.conns.ended(conn, &cause) {
                    self.feed(NodeInput::Closed { conn, how, reason: cause.to_string() })?;
                }
            }
        }
        Ok(())
    }

    /// Writes what is queued for up to `d` (shutdown).
    fn linger(&mut self, d: Duration) {
        let until = Instant::now() + d;
        let mut ready = Vec::new();
        loop {
            self.poller.flush(&mut ready);
            let now = Instant::now();
            if now >= until || self.poller.queued_bytes() == 0 {
                return;
            }
            self.poller.wait(until - now, &mut ready);
            ready.clear();
        }
    }

    /// Waits for the next input, ZooKeeper event, ready socket or the
    /// node's deadline. A deadline that has passed comes first, then the
    /// daemon's own inputs (store answers, HTTP, dials, shutdown), then
    /// ZooKeeper, then the sockets: a flood of frames cannot hold back the
    /// node's timers or its coordination session. Blocks in `epoll_wait`
    /// (docs/design.md#issue-46) until a socket is ready, the
    /// [`Waker`] is woken, or the deadline or the sweep is due; what the
    /// poller took lands in `ready` ([`Wake::Net`]).
    fn next_wake(&mut self) -> Wake {
        loop {
            let deadline = self.clock.wake_at(self.node.poll_timeout());
            let now = Instant::now();
            if deadline.is_some_and(|when| when <= now) {
                return Wake::Deadline;
            }
            let sweep = self.poller.next_sweep();
            if sweep <= now {
                return Wake::Sweep;
            }
            if let Ok(input) = self.inputs.try_recv() {
                return Wake::Input(input);
            }
            if let Some(event) = self.zk_events.as_ref().and_then(|rx| rx.try_recv().ok()) {
                return Wake::Zk(event);
            }
            let at = deadline.map_or(sweep, |when| when.min(sweep));
            self.poller.wait(at - now, &mut self.ready);
            if !self.ready.is_empty() {
                return Wake::Net;
            }
        }
    }

    /// One `handle` call and its outputs, then any store answer that was
    /// available at once (each its own `handle` call).
    fn feed(&mut self, input: NodeInput) -> Result<(), MasterError> {
        self.step(input)?;
        while let Some(r) = self.pending.pop_front() {
            self.step(NodeInput::Store(r))?;
        }
        Ok(())
    }

    fn step(&mut self, input: NodeInput) -> Result<(), MasterError> {
        let now = self.now();
        for output in self.node.handle(now, input) {
            match output {
                Output::Answer { query, answer } => {
                    self.queries.answer(query, answer, self.conns.rejected())
                }
                Output::Send { conn, msg } => {
                    if self.conns.route(conn, &msg).is_some() {
                        self.poller.send(conn, &msg, &mut self.ready);
                    }
                }
                Output::Close { conn, reason } => {
                    if self.conns.forget(conn, &reason).is_some() {
                        self.poller.close(conn);
                    }
                }
                Output::Store(command) => {
                    if let Some(local) = &mut self.local {
                        let result = local.execute(command);
                        if let Some(StoreEvent::Loaded { records }) = &result {
                            self.local_loaded = records.len();
                        }
                        self.pending.extend(result);
                    }
                }
                Output::Zk(command) => {
                    if let Some(zk) = &self.zk {
                        let _ = zk.try_send(command);
                    }
                }
                Output::Dial { dial, addr, timeout } => self.dial(dial, addr, timeout),
                Output::Exit { reason } => return Err(MasterError::Exit { reason }),
                // The connections' timeouts scale with the longest heartbeat
                // interval the leader has told a worker (heartbeat load control).
                Output::ConnTimeouts { heartbeat } => self.net.follow_heartbeat(Some(heartbeat)),
                Output::Probe { probe, addr, timeout } => {
                    let tx = self.tx.clone();
                    smol::spawn(async move {
                        let timeout = Duration::from_millis(timeout.0);
                        let result = net::probe(addr.as_str(), timeout).await;
                        tx.send(Input::Probed { probe, result });
                    })
                    .detach();
                }
                Output::Note(note) => {
                    if matches!(note, Note::Elected { .. })
                        && (self.zk.is_some() || self.load_started.is_none())
                    {
                        self.load_started = Some(Instant::now());
                    }
                    regent_std::notes::log_note(&note)
                }
                Output::Audit(record) => self.audit.append(&record),
            }
        }
        self.audit.sync();
        if let Some(started) = self.load_started {
            self.log_loaded(started);
        }
        Ok(())
    }

    /// Once the leadership is RECOVERING (or ALIVE) every record is loaded
    /// and its epoch durable: one line with the count and the time since
    /// the load began (the benchmark `recovery` reads it).
    fn log_loaded(&mut self, started: Instant) {
        if !matches!(self.node.master().status(), Status::Recovering | Status::Alive) {
            return;
        }
        self.load_started = None;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let (records, since) = match &self.zk {
            Some(_) => (self.node.metrics().store_records_loaded as usize, "the election"),
            None => (self.local_loaded, "the store's open"),
        };
        tracing::info!("recovering: loaded {records} records in {ms:.1} ms since {since}");
    }

    /// Dials `addr` in the background; the result comes back as
    /// [`Input::Dialled`].
    fn dial(&self, dial: DialId, addr: Addr, timeout: Millis) {
        let (tx, has_secret, insecure) =
            (self.tx.clone(), self.net.secret.is_some(), self.insecure);
        smol::spawn(async move {
            let timeout = Duration::from_millis(timeout.0);
            let result = net::dial(&addr, has_secret, insecure, false, timeout).await;
            tx.send(Input::Dialled { dial, result });
        })
        .detach();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream};

    fn free_addr() -> SocketAddr {
        TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
    }

    fn config(listen: SocketAddr, http: SocketAddr) -> MasterConfig {
        let mut cfg = MasterConfig::new("m1", listen, Arc::new(NetConfig::new("c", None)));
        cfg.http = Some(http);
        cfg
    }

    /// `GET path` on `http` (HTTP/1.0), retried until the server answers
    /// (60 s bound): the status line and the body.
    fn get(http: SocketAddr, path: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            assert!(Instant::now() < deadline, "{http} never answered {path}");
            let Ok(mut s) = TcpStream::connect(http) else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            write!(s, "GET {path} HTTP/1.0\r\nHost: {http}\r\n\r\n").unwrap();
            let mut answer = String::new();
            if s.read_to_string(&mut answer).is_ok() && !answer.is_empty() {
                return answer;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The loop on its own thread (docs/design.md#issue-46): HTTP queries,
    /// which reach it through the waker while it blocks in `epoll_wait`
    /// with no socket activity, are answered, one after another; shutdown
    /// while idle ends `run_master` with Ok.
    #[test]
    fn an_idle_loop_answers_queries_and_shuts_down() {
        let (listen, http) = (free_addr(), free_addr());
        let (stop, shutdown) = async_channel::bounded::<()>(1);
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done_tx.send(smol::block_on(run_master(config(listen, http), shutdown)));
        });
        for _ in 0..5 {
            let answer = get(http, "/api/state");
            assert!(
                answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.0 200"),
                "{answer}"
            );
            assert!(answer.contains("m1"), "{answer}");
            std::thread::sleep(Duration::from_millis(300));
        }
        stop.close();
        let result = done.recv_timeout(Duration::from_secs(60)).expect("run_master returned");
        assert!(result.is_ok(), "{result:?}");
    }

    /// A `run_master` future dropped before shutdown stops its loop's
    /// thread, which releases the listener: the port can be bound again.
    #[test]
    fn dropping_run_master_stops_its_loop() {
        let (listen, http) = (free_addr(), free_addr());
        let (_stop, shutdown) = async_channel::bounded::<()>(1);
        smol::block_on(async {
            let master = run_master(config(listen, http), shutdown);
            let up = smol::unblock(move || get(http, "/api/state"));
            match smol::future::or(async { Err(master.await) }, async { Ok(up.await) }).await {
                Ok(answer) => assert!(answer.contains("m1"), "{answer}"),
                Err(ended) => panic!("the master ended: {ended:?}"),
            }
            // `master` is dropped here, its loop still running.
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Err(e) = TcpListener::bind(listen) {
            assert!(Instant::now() < deadline, "{listen} is still held: {e}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

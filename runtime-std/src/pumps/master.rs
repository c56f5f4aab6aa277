//! The master daemon on std threads: an I/O pump for
//! `regent_core::node::MasterNode` in its single-master modes.
//!
//! One thread owns the node. It waits (`recv_timeout` until the node's next
//! deadline) for an accepted connection, a frame, a store completion, a
//! state query or shutdown; makes one `handle` call per input; executes
//! every output in order. The node elects itself at start (its clock term
//! still moves the epoch forward, docs/design.md#epochs-fence-everything). Store writes go to the filesystem
//! store's writer thread ([`crate::store::spawn_writer`]: group commit, fsync
//! off the machine's thread) or, in `none`, nowhere (acknowledged at once).
//!
//! HTTP (`http`, optional): the same server and pages as the smol master
//! ([`crate::http`]: `/`, `/api/state`, `/api/events`, `/metrics`, the
//! same exposure rule and bearer token); its queries reach this thread
//! through a forwarding thread.
//!
//! Not here: ZooKeeper recovery (it needs the async ZooKeeper client); it
//! stays with the smol runtime (`regent master`), and [`spawn_master`]
//! refuses it. The configuration ([`MasterConfig`]) is the one both
//! runtimes read, in [`crate::config`].

use super::{wall_clock_ms, PumpError, PumpThread, RuntimeClock, Stopper};
use crate::config::{MasterConfig, Recovery};
use crate::conns::Conns;
use crate::host::{proc_limit, ConnectionCeiling};
use crate::http::{self, HttpQuery};
use crate::net::{self, NetConfig, NetEvent};
use crate::pumps::conn::{self, spawn_connection, ConnHandle};
use crate::store::{master_sealing, LocalStore};
use regent_core::auth::Side;
use regent_core::node::master::{Config, Input as NodeInput, Leadership, Output};
use regent_core::node::{DialId, DialResult, MasterNode, ProbeResult};
use regent_core::protocol::ClusterState;
use regent_core::store::StoreEvent;
use regent_core::token::Principal;
use regent_core::{Addr, ConnId, Millis};
use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long connections get to flush their last messages when the master
/// stops.
const FLUSH_GRACE: Duration = Duration::from_millis(100);

/// How long [`MasterHandle::state`] waits for the machine's thread.
const STATE_TIMEOUT: Duration = Duration::from_secs(5);

/// How many frames from all connections wait for the master's thread at
/// most (see [`Gate`]).
const NET_EVENT_QUEUE: usize = 128;

/// Bounds the frames waiting for the master's thread: a connection's reader
/// enters before it hands a frame over and waits while the gate is full, so
/// a peer that sends faster than the master handles is held back by TCP
/// instead of buffered; the master's thread leaves once per frame it takes.
/// Closing the gate (the master stopped) lets every waiting reader through.
#[derive(Debug)]
struct Gate {
    /// Frames handed over and not yet taken; closed.
    state: Mutex<(usize, bool)>,
    room: Condvar,
}

impl Gate {
    fn new() -> Gate {
        Gate { state: Mutex::new((0, false)), room: Condvar::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, bool)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn enter(&self) {
        let mut st = self.lock();
        while st.0 >= NET_EVENT_QUEUE && !st.1 {
            st = self.room.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.0 += 1;
    }

    fn leave(&self) {
        let mut st = self.lock();
        st.0 = st.0.saturating_sub(1);
        self.room.notify_one();
    }

    fn close(&self) {
        self.lock().1 = true;
        self.room.notify_all();
    }
}

/// The std master's default connection ceiling. A thread per direction per
/// connection suits embedders with hundreds of peers; thousands work; past
/// this, `--runtime smol` is the runtime to use.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4_096;

/// Descriptors and threads the master needs besides its connections (the
/// store, the acceptor, dials, the log).
const RESERVE: usize = 64;

/// Checks `max` connections fit the process's limits: a descriptor each,
/// two threads each.
pub fn check_connection_ceiling(max: usize) -> Result<(), PumpError> {
    if let Some(files) = proc_limit("Max open files") {
        if max + RESERVE > files {
            return Err(PumpError::TooFewFiles { max, needed: max + RESERVE, limit: files });
        }
    }
    let threads = [
        proc_limit("Max processes"),
        std::fs::read_to_string("/proc/sys/kernel/threads-max")
            .ok()
            .and_then(|s| s.trim().parse().ok()),
        std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse().ok()),
    ];
    if let Some(limit) = threads.into_iter().flatten().min() {
        if 2 * max + RESERVE > limit {
            return Err(PumpError::TooFewThreads { max, needed: 2 * max + RESERVE, limit });
        }
    }
    Ok(())
}

enum Input {
    Accepted(std::io::Result<TcpStream>),
    Dialled { dial: DialId, result: Result<TcpStream, super::DialError> },
    Probed { probe: u64, result: ProbeResult },
    Net(NetEvent),
    Store(Vec<StoreEvent>),
    Http(HttpQuery),
    Shutdown,
}

/// A running master. Dropping it stops the master (as [`shutdown`]).
///
/// [`shutdown`]: MasterHandle::shutdown
#[derive(Debug)]
pub struct MasterHandle {
    addr: SocketAddr,
    http_addr: Option<SocketAddr>,
    tx: Sender<Input>,
    pump: PumpThread<()>,
}

impl MasterHandle {
    /// The address the master listens on (the bound one: with port 0 in
    /// the configuration, the port picked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address HTTP is served on (the bound one), if it is.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The master's view of the cluster, as `regent status` shows it;
    /// `None` once the master has stopped.
    pub fn state(&self) -> Option<ClusterState> {
        let (reply, rx) = mpsc::sync_channel(1);
        self.tx.send(Input::Http(HttpQuery::State { reply, cached: false })).ok()?;
        let snap = rx.recv_timeout(STATE_TIMEOUT).ok()?;
        Some(Arc::unwrap_or_clone(snap.state))
    }

    /// A handle that asks the master to stop, usable from another thread.
    pub fn stopper(&self) -> Stopper {
        self.pump.stop.clone()
    }

    /// `true` once the master's thread has ended (shut down or gave up).
    pub fn is_finished(&self) -> bool {
        self.pump.is_finished()
    }

    /// Stops the master: closes every connection and the store (releasing
    /// its lock), then returns how the master ended.
    pub fn shutdown(mut self) -> Result<(), PumpError> {
        self.pump.stop.stop();
        self.pump.join().unwrap_or(Ok(()))
    }

    /// Waits until the master stops by itself or through a [`Stopper`]:
    /// `Ok` after a shutdown, `Err` naming why it gave up leadership
    /// (docs/design.md#leadership-that-cannot-act-is-given-up).
    pub fn wait(mut self) -> Result<(), PumpError> {
        self.pump.join().unwrap_or(Ok(()))
    }
}

/// Starts a master on a thread of its own. Fails at once, naming why, when
/// the listen address is exposed without a secret (and not `insecure`),
/// cannot be bound, or the store cannot be opened (locked by another master,
/// damaged), and for [`Recovery::Zookeeper`] ([`PumpError::ZookeeperNeedsSmol`]).
pub fn spawn_master(cfg: MasterConfig) -> Result<MasterHandle, PumpError> {
    net::check_exposure(&cfg.listen, cfg.net.secret.is_some(), cfg.insecure)
        .map_err(PumpError::ListenExposed)?;
    if let Some(addr) = cfg.http {
        net::check_exposure(&addr, cfg.net.secret.is_some(), cfg.insecure)
            .map_err(PumpError::HttpExposed)?;
    }
    let max_connections = cfg.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS);
    check_connection_ceiling(max_connections)?;
    let listen_error = |source| PumpError::Listen { addr: cfg.listen, source };
    let listener = TcpListener::bind(cfg.listen).map_err(listen_error)?;
    net::widen_backlog(&listener).map_err(listen_error)?;
    let bound = listener.local_addr().map_err(listen_error)?;
    let advertise = cfg.advertise.clone().unwrap_or_else(|| Addr(bound.to_string()));
    let (tx, rx) = mpsc::channel::<Input>();
    // The connections' read and write timeouts scale with the heartbeat
    // interval this master tells its peers.
    cfg.net.set_heartbeat_interval(cfg.heartbeat_interval);

    let store = match &cfg.recovery {
        Recovery::None => LocalStore::Memory,
        Recovery::Filesystem { dir } => {
            let sink = tx.clone();
            let sealing = master_sealing(cfg.net.secret.as_ref(), &cfg.previous_secrets)?;
            LocalStore::open_files(dir, &cfg.id, sealing, move |events| {
                let _ = sink.send(Input::Store(events));
            })?
        }
        Recovery::Zookeeper { .. } => return Err(PumpError::ZookeeperNeedsSmol),
    };
    // HTTP: bound before the master starts (a taken port fails the start);
    // its queries are forwarded into the master's channel.
    let (http_addr, http_queries) = match cfg.http {
        None => (None, None),
        Some(addr) => {
            let server = http::bind(addr)?;
            let http_bound = server.server_addr().to_ip().unwrap_or(addr);
            let (qtx, qrx) = async_channel::unbounded::<HttpQuery>();
            let token = http::required_token(cfg.net.secret.as_ref());
            http::serve_on_with(server, token, qtx);
            let forward = tx.clone();
            let from = qrx.clone();
            std::thread::Builder::new()
                .name("regent-http-queries".into())
                .spawn(move || {
                    while let Ok(q) = from.recv_blocking() {
                        if forward.send(Input::Http(q)).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|source| PumpError::Thread { what: "HTTP query", source })?;
            (Some(http_bound), Some(qrx))
        }
    };
    let acceptor = Acceptor::spawn(listener, bound, tx.clone())?;

    let mcfg = cfg.machine(advertise.clone());
    tracing::info!(id = %cfg.id, listen = %bound, advertise = %advertise, "master listening");

    let clock = RuntimeClock::start();
    let clock_base = wall_clock_ms();
    let d = Pump {
        clock,
        node: MasterNode::new(Config {
            master: mcfg,
            leadership: Leadership::Single,
            clock_base,
            cluster: cfg.net.cluster.clone(),
        }),
        net: cfg.net.clone(),
        insecure: cfg.insecure,
        tx: tx.clone(),
        conns: Conns::new(),
        next_conn: 1,
        store,
        gate: Arc::new(Gate::new()),
        _acceptor: acceptor,
        http_queries,
        ceiling: ConnectionCeiling::new(
            max_connections,
            "the most this std-runtime master takes (--max-connections; a thread per \
             direction each); --runtime smol takes more",
        ),
        queries: http::queries::Waiting::new(),
        audit: cfg.open_audit_log().map_err(PumpError::Audit)?,
    };
    let thread = std::thread::Builder::new()
        .name("regent-master".into())
        .spawn(move || d.run(rx).map_err(|reason| PumpError::Ended { pump: "master", reason }))
        .map_err(|source| PumpError::Thread { what: "master", source })?;
    let stop_tx = tx.clone();
    let stop = Stopper::new(move || {
        let _ = stop_tx.send(Input::Shutdown);
    });
    Ok(MasterHandle { addr: bound, http_addr, tx, pump: PumpThread::new("master", stop, thread) })
}

/// The accept thread; dropping it stops the thread and closes the listener.
struct Acceptor {
    stop: Arc<AtomicBool>,
    wake: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl Acceptor {
    fn spawn(
        listener: TcpListener,
        bound: SocketAddr,
        tx: Sender<Input>,
    ) -> Result<Self, PumpError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("regent-accept".into())
            .spawn(move || loop {
                let accepted = listener.accept().map(|(s, _)| s);
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let failed = accepted.is_err();
                if tx.send(Input::Accepted(accepted)).is_err() {
                    break;
                }
                if failed {
                    // E.g. out of file descriptors: do not spin.
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
            .map_err(|source| PumpError::Thread { what: "accept", source })?;
        // A wildcard address is woken through loopback.
        let mut wake = bound;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        Ok(Acceptor { stop, wake, thread: Some(thread) })
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocked accept; if that fails the thread stays parked in
        // accept, and is not joined (it holds nothing but the listener).
        if TcpStream::connect_timeout(&self.wake, Duration::from_secs(1)).is_ok() {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// The I/O pump around one `MasterNode`, following the pump contract of
/// `regent_core::node` (one `handle` per input, outputs executed in order,
/// `poll_timeout` for the next deadline).
struct Pump {
    clock: RuntimeClock,
    node: MasterNode,
    net: Arc<NetConfig>,
    /// Dial non-loopback peers without a secret (`--insecure`).
    insecure: bool,
    tx: Sender<Input>,
    conns: Conns<ConnHandle>,
    next_conn: u64,
    store: LocalStore,
    /// Bounds the frames waiting for this thread.
    gate: Arc<Gate>,
    _acceptor: Acceptor,
    /// The HTTP server's queries; closed when the master stops, which ends
    /// the server's thread and the forwarding one.
    http_queries: Option<async_channel::Receiver<HttpQuery>>,
    /// Past it, a connection is closed at once.
    ceiling: ConnectionCeiling,
    /// Queries (HTTP, [`MasterHandle::state`]) the node has not answered
    /// yet.
    queries: http::queries::Waiting,
    /// The audit log (docs/design.md#issue-44): a step's records, one
    /// fsync.
    audit: crate::audit::AuditLog,
}

impl Pump {
    fn now(&self) -> Millis {
        self.clock.now()
    }

    /// Runs a new connection over `stream` (`side` says who dialled); its
    /// frames pass the gate.
    fn run_connection(&mut self, stream: TcpStream, side: Side) -> std::io::Result<ConnId> {
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        let _ = stream.set_nodelay(true);
        let (tx, gate) = (self.tx.clone(), self.gate.clone());
        let handle = spawn_connection(stream, side, conn, self.net.clone(), move |e| {
            if matches!(e, NetEvent::Message { .. }) {
                gate.enter();
            }
            let _ = tx.send(Input::Net(e));
        })?;
        self.conns.insert(conn, handle);
        Ok(conn)
    }

    fn run(mut self, rx: Receiver<Input>) -> Result<(), String> {
        let mut pending: VecDeque<NodeInput> = VecDeque::new();
        pending.push_back(NodeInput::Start);
        let result = self.run_loop(&rx, &mut pending);
        // Readers waiting for room hand their frames to nobody now.
        self.gate.close();
        if let Some(q) = &self.http_queries {
            q.close();
        }
        match &result {
            Ok(()) => tracing::info!("master stopped"),
            Err(e) => tracing::error!("master stops: {e}"),
        }
        self.conns.close_all();
        std::thread::sleep(FLUSH_GRACE);
        result
    }

    fn run_loop(
        &mut self,
        rx: &Receiver<Input>,
        pending: &mut VecDeque<NodeInput>,
    ) -> Result<(), String> {
        loop {
            while let Some(event) = pending.pop_front() {
                self.step(event, pending)?;
            }
            let input = match self.clock.wait_for(self.node.poll_timeout()) {
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(left) => rx.recv_timeout(left),
            };
            let input = match input {
                Ok(input) => input,
                Err(RecvTimeoutError::Timeout) => {
                    pending.push_back(NodeInput::Tick);
                    continue;
                }
                // The daemon holds a sender: cannot happen; stop if it did.
                Err(RecvTimeoutError::Disconnected) => Input::Shutdown,
            };
            match input {
                Input::Shutdown => {
                    tracing::info!("shutting down");
                    return Ok(());
                }
                // The ceiling: closed at once (the peer retries, or follows
                // another master).
                Input::Accepted(Ok(stream))
                    if self.ceiling.refuses(self.conns.len(), stream.peer_addr().ok()) =>
                {
                    self.conns.count_refused();
                }
                Input::Accepted(Ok(stream)) => match self.run_connection(stream, Side::Server) {
                    Ok(conn) => pending.push_back(NodeInput::Accepted { conn }),
                    Err(e) => tracing::warn!("cannot start a connection: {e}"),
                },
                Input::Dialled { dial, result } => {
                    let result = match result.map_err(|e| (e.reason, e.refused)) {
                        Ok(stream) => {
                            let peer = stream.peer_addr().ok().map(|a| Addr::new(a.to_string()));
                            match self.run_connection(stream, Side::Client) {
                                Ok(conn) => DialResult::Connected { conn, peer },
                                Err(e) => DialResult::Failed {
                                    reason: format!("cannot start a connection: {e}"),
                                    refused: false,
                                },
                            }
                        }
                        Err((reason, refused)) => DialResult::Failed { reason, refused },
                    };
                    pending.push_back(NodeInput::Dialled { dial, result });
                }
                Input::Probed { probe, result } => {
                    pending.push_back(NodeInput::Probed { probe, result })
                }
                Input::Accepted(Err(e)) => tracing::warn!("accept failed: {e}"),
                Input::Net(NetEvent::Message { conn, msg }) => {
                    self.gate.leave();
                    if self.conns.contains(conn) {
                        pending.push_back(NodeInput::Message { conn, msg });
                    }
                }
                // A token's holder: the master authorizes what it sends.
                Input::Net(NetEvent::Authenticated { conn, claims }) => {
                    if self.conns.contains(conn) {
                        let principal = Principal::Token(*claims);
                        pending.push_back(NodeInput::Authenticated { conn, principal });
                    }
                }
                Input::Net(NetEvent::Closed { conn, cause }) => {
                    if let Some(how) = self.conns.ended(conn, &cause) {
                        pending.push_back(NodeInput::Closed {
                            conn,
                            how,
                            reason: cause.to_string(),
                        });
                    }
                }
                Input::Store(results) => pending.extend(results.into_iter().map(NodeInput::Store)),
                // The node answers it (`Output::Answer`, in `step`).
                Input::Http(query) => pending.push_back(self.queries.input(query)),
            }
        }
    }

    /// One `handle` call, then every output in order.
    fn step(&mut self, input: NodeInput, pending: &mut VecDeque<NodeInput>) -> Result<(), String> {
        let now = self.now();
        for output in self.node.handle(now, input) {
            match output {
                Output::Answer { query, answer } => {
                    self.queries.answer(query, answer, self.conns.rejected())
                }
                Output::Send { conn, msg } => self.conns.send(conn, msg),
                Output::Close { conn, reason } => self.conns.close(conn, &reason),
                Output::Store(command) => {
                    pending.extend(self.store.execute(command).map(NodeInput::Store))
                }
                // Single-master modes only: no coordination client here.
                Output::Zk(_) => {}
                // A new leader contacting its recorded workers (docs/design.md#seed-002):
                // dialled on a thread of its own, the result comes back as
                // `Input::Dialled`.
                Output::Dial { dial, addr, timeout } => {
                    let (tx, has_secret, insecure) =
                        (self.tx.clone(), self.net.secret.is_some(), self.insecure);
                    let timeout = Duration::from_millis(timeout.0);
                    let spawned =
                        std::thread::Builder::new().name("regent-dial".into()).spawn(move || {
                            let result = super::dial(&addr, has_secret, insecure, false, timeout);
                            let _ = tx.send(Input::Dialled { dial, result });
                        });
                    if let Err(e) = spawned {
                        let reason = format!("cannot start a dialling thread: {e}");
                        let result = DialResult::Failed { reason, refused: false };
                        pending.push_back(NodeInput::Dialled { dial, result });
                    }
                }
                Output::Probe { probe, addr, timeout } => {
                    let tx = self.tx.clone();
                    let timeout = Duration::from_millis(timeout.0);
                    let spawned =
                        std::thread::Builder::new().name("regent-probe".into()).spawn(move || {
                            let result = conn::probe(addr.as_str(), timeout);
                            let _ = tx.send(Input::Probed { probe, result });
                        });
                    if let Err(e) = spawned {
                        let reason = format!("cannot start a probing thread: {e}");
                        let result = ProbeResult::Failed { reason };
                        pending.push_back(NodeInput::Probed { probe, result });
                    }
                }
                Output::Note(note) => crate::notes::log_note(&note),
                // The connections' timeouts scale with the longest heartbeat
                // interval the leader has told a worker (heartbeat load control).
                Output::ConnTimeouts { heartbeat } => self.net.follow_heartbeat(Some(heartbeat)),
                // docs/design.md#leadership-that-cannot-act-is-given-up, single-master modes: a store that cannot be
                // written (or read) stops the process, saying why.
                Output::Exit { reason } => return Err(format!("giving up leadership: {reason}")),
                Output::Audit(record) => self.audit.append(&record),
            }
        }
        self.audit.sync();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_holds_readers_back_until_the_master_takes_a_frame() {
        let gate = Arc::new(Gate::new());
        for _ in 0..NET_EVENT_QUEUE {
            gate.enter();
        }
        let (tx, rx) = mpsc::channel();
        let g = gate.clone();
        let reader = std::thread::spawn(move || {
            g.enter();
            tx.send(()).unwrap();
        });
        // Full: the reader waits (a wait that ends would be a bug).
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "the reader waits for room");
        gate.leave();
        rx.recv_timeout(Duration::from_secs(10)).expect("room lets the reader through");
        reader.join().unwrap();
        // Closed: nobody waits any more.
        gate.close();
        gate.enter();
    }
}

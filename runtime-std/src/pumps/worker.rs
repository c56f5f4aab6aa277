//! The worker daemon on std threads: an I/O pump for
//! `regent_core::node::WorkerNode`, the blocking twin of `regent_smol::worker`.
//!
//! One thread owns the node. It waits (`recv_timeout` until the node's next
//! deadline) for a frame, a dial result, an executor change or shutdown;
//! makes one `handle` call; executes every output in order: dials on a
//! thread of their own ([`CONNECT_TIMEOUT`], the exposure check on every
//! resolved address), connections, executor processes through a
//! [`Supervisor`] over the work directory, log lines. Which master to
//! follow, when to register, heartbeat, retry or give up, which connection
//! is current and what a shutdown allows are the node's business.
//!
//! Executors keep running while the worker has no master (failover): only
//! the node's `ExecutorCommand::Kill`, `Exit` and shutdown stop them. The work
//! directory's layout is the smol worker's: `<work_dir>/worker-id` keeps a
//! generated id across restarts; the supervisor keeps its lock, records and
//! executor logs beside it (see [`crate::exec`]).

use super::{spawn_dial, DialError, PumpError, PumpThread, RuntimeClock, Stopper};
use crate::exec::{ExecEvent, LeftBehind, Supervisor};
use crate::host::{execute_executor_command, prepare_worker, read_executor_log, PreparedWorker};
use crate::net::{NetConfig, NetEvent};
use crate::pumps::conn::{spawn_connection, ConnHandle};
use regent_core::auth::Side;
use regent_core::node::worker::{DialId, DialResult, Input as NodeInput, Output};
use regent_core::node::WorkerNode;
use regent_core::worker::WorkerStatus;
use regent_core::{ConnId, ExecutorId};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::TcpStream;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use crate::host::{WorkerConfig, CONNECT_TIMEOUT, FLUSH_GRACE, ID_FILE};

enum Input {
    Net(NetEvent),
    Exec(ExecEvent),
    Dialled {
        dial: DialId,
        result: Result<TcpStream, DialError>,
    },
    Shutdown,
    /// `kill_all` of a shutdown finished; these were not confirmed dead.
    Killed(Vec<ExecutorId>),
    /// The usage sampler's newest sample.
    Usage(regent_core::protocol::WorkerUsage),
}

/// A running worker. Dropping it shuts the worker down (as [`shutdown`]).
///
/// [`shutdown`]: WorkerHandle::shutdown
#[derive(Debug)]
pub struct WorkerHandle {
    id: String,
    status: Arc<Mutex<WorkerStatus>>,
    pump: PumpThread<()>,
}

impl WorkerHandle {
    /// The worker's id (given, or generated and kept in the work directory).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What the machine shows an observer: the master followed, whether it
    /// is registered, the highest epoch seen, whether it exited.
    pub fn status(&self) -> WorkerStatus {
        self.status.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A handle that asks the worker to shut down, usable from another
    /// thread.
    pub fn stopper(&self) -> Stopper {
        self.pump.stop.clone()
    }

    /// `true` once the worker's thread has ended.
    pub fn is_finished(&self) -> bool {
        self.pump.is_finished()
    }

    /// Shuts the worker down: kills every executor, reports their ends to
    /// the master it follows, gives the connections [`FLUSH_GRACE`] to flush;
    /// then returns how the worker ended.
    pub fn shutdown(mut self) -> Result<(), PumpError> {
        self.pump.stop.stop();
        self.pump.join().unwrap_or(Ok(()))
    }

    /// Waits until the worker ends: `Ok` after a shutdown, `Err` with the
    /// machine's reason when it exited (e.g. the master told it to stop).
    pub fn wait(mut self) -> Result<(), PumpError> {
        self.pump.join().unwrap_or(Ok(()))
    }
}

/// Starts a worker on a thread of its own.
///
/// Fails at once, naming the problem, when a configured master address is
/// malformed or is not on loopback while there is no cluster secret and
/// `insecure` is not set, when the work directory cannot be used (or another
/// worker holds it), or when the worker id cannot be read or stored. A
/// configured master whose name does not resolve yet is only warned about.
pub fn spawn_worker(cfg: WorkerConfig) -> Result<WorkerHandle, PumpError> {
    let (tx, rx) = mpsc::channel::<Input>();
    let sink = Mutex::new(tx.clone());
    let PreparedWorker { supervisor, left_behind, id, config } = prepare_worker(&cfg, move |ev| {
        // Fails only once the daemon is gone, when nobody needs the event.
        let _ = sink.lock().unwrap_or_else(|e| e.into_inner()).send(Input::Exec(ev));
    })?;
    let usage_tx = Mutex::new(tx.clone());
    crate::host::spawn_usage_sampler(&supervisor, crate::host::USAGE_SAMPLE_EVERY, move |usage| {
        usage_tx.lock().unwrap_or_else(|e| e.into_inner()).send(Input::Usage(usage)).is_ok()
    });
    let node = WorkerNode::new(config);
    let status = Arc::new(Mutex::new(node.status()));
    let d = Pump {
        clock: RuntimeClock::start(),
        node,
        status: status.clone(),
        supervisor,
        net: cfg.net.clone(),
        insecure: cfg.insecure,
        conns: HashMap::new(),
        next_conn: 0,
        tx: tx.clone(),
        exit: None,
        stopping: false,
        queue: VecDeque::new(),
    };
    let thread = std::thread::Builder::new()
        .name("regent-worker".into())
        .spawn(move || {
            d.run(rx, left_behind).map_err(|reason| PumpError::Ended { pump: "worker", reason })
        })
        .map_err(|source| PumpError::Thread { what: "worker", source })?;
    let stop_tx = tx;
    let stop = Stopper::new(move || {
        let _ = stop_tx.send(Input::Shutdown);
    });
    Ok(WorkerHandle { id, status, pump: PumpThread::new("worker", stop, thread) })
}

/// The I/O pump around one `WorkerNode`, following the pump contract of
/// `regent_core::node` (one `handle` per input, outputs executed in order,
/// `poll_timeout` for the next deadline).
struct Pump {
    clock: RuntimeClock,
    node: WorkerNode,
    status: Arc<Mutex<WorkerStatus>>,
    supervisor: Arc<Supervisor>,
    net: Arc<NetConfig>,
    insecure: bool,
    /// Every running connection.
    conns: HashMap<ConnId, ConnHandle>,
    next_conn: u64,
    tx: Sender<Input>,
    /// Set by `Output::Exit`.
    exit: Option<String>,
    /// Shutting down: executors are being killed.
    stopping: bool,
    /// Inputs produced while executing outputs, fed after them.
    queue: VecDeque<NodeInput>,
}

impl Pump {
    fn run(mut self, rx: Receiver<Input>, left_behind: Vec<LeftBehind>) -> Result<(), String> {
        self.feed(NodeInput::Start);
        for lb in left_behind {
            let (report, readopted) = crate::host::left_behind_inputs(lb);
            self.feed(NodeInput::LeftBehind(report));
            if let Some(input) = readopted {
                self.feed(input);
            }
        }
        loop {
            if let Some(reason) = self.exit.take() {
                tracing::error!(%reason, "worker exits");
                self.kill_all_and_report(&rx);
                self.flush(&rx);
                return Err(reason);
            }
            let input = match self.clock.wait_for(self.node.poll_timeout()) {
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(left) => rx.recv_timeout(left),
            };
            match input {
                Err(RecvTimeoutError::Timeout) => self.feed(NodeInput::Tick),
                // The daemon holds a sender: cannot happen.
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
                Ok(Input::Net(ev)) => self.on_net(ev),
                Ok(Input::Exec(ev)) => self.on_exec(ev),
                Ok(Input::Usage(usage)) => self.feed(NodeInput::Usage(usage)),
                Ok(Input::Dialled { dial, result }) => self.on_dialled(dial, result),
                Ok(Input::Shutdown) => {
                    if self.stopping {
                        continue;
                    }
                    // Kill on a thread of its own while the loop goes on, so
                    // the reports of executors that die go out as they die
                    // and heartbeats keep the registration alive meanwhile.
                    tracing::info!("shutting down: killing every executor");
                    self.stopping = true;
                    self.feed(NodeInput::Stop);
                    let sup = self.supervisor.clone();
                    let tx = self.tx.clone();
                    let spawned = std::thread::Builder::new().name("regent-kill-all".into()).spawn(
                        move || {
                            let _ = tx.send(Input::Killed(sup.kill_all()));
                        },
                    );
                    if spawned.is_err() {
                        let unreported = self.supervisor.kill_all();
                        let _ = self.tx.send(Input::Killed(unreported));
                    }
                }
                Ok(Input::Killed(unreported)) => {
                    if !unreported.is_empty() {
                        tracing::warn!(executors = ?unreported, "executors not confirmed dead on shutdown");
                    }
                    // Every event of the killed executors was queued before
                    // this one (the sink runs before kill_all sees them
                    // finished), so each was fed already.
                    self.flush(&rx);
                    tracing::info!("worker stopped");
                    return Ok(());
                }
            }
        }
    }

    /// One `handle` call, then every output in order; then the same for
    /// each input an output queued (one call each).
    fn feed(&mut self, input: NodeInput) {
        self.queue.push_back(input);
        while let Some(input) = self.queue.pop_front() {
            let now = self.clock.now();
            let outputs = self.node.handle(now, input);
            // The word first: a launch among the outputs runs under it
            // (docs/design.md#issue-45).
            crate::host::persist_word(&self.supervisor, &self.clock, &self.node);
            for output in outputs {
                self.execute(output);
            }
        }
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = self.node.status();
    }

    fn execute(&mut self, output: Output) {
        match output {
            Output::Dial { dial, master } => {
                tracing::debug!(%master, "dialling master");
                let tx = self.tx.clone();
                let has_secret = self.net.secret.is_some();
                let started = spawn_dial(
                    master,
                    has_secret,
                    self.insecure,
                    false,
                    CONNECT_TIMEOUT,
                    move |_, result| {
                        let _ = tx.send(Input::Dialled { dial, result });
                    },
                );
                if !started {
                    let result = DialResult::Failed {
                        reason: "cannot start a dialling thread".into(),
                        refused: false,
                    };
                    self.queue.push_back(NodeInput::Dialled { dial, result });
                }
            }
            Output::Send { conn, msg } => {
                if let Some(h) = self.conns.get(&conn) {
                    tracing::debug!(%conn, kind = msg.kind(), "send");
                    h.send(msg);
                }
            }
            Output::Close { conn, .. } => {
                if let Some(h) = self.conns.remove(&conn) {
                    h.close();
                }
            }
            // Blocking (a launch forks and fsyncs a record), as the smol
            // worker awaits it; what happens comes back through the sink.
            Output::Executor(cmd) => execute_executor_command(&self.supervisor, cmd),
            Output::Exit { reason } => {
                if self.exit.is_none() {
                    self.exit = Some(reason);
                }
            }
            Output::ReadLog(req) => {
                self.queue.push_back(read_executor_log(&self.supervisor, req));
            }
            Output::Note(note) => crate::notes::log_worker_note(&note),
            // The connections' timeouts scale with the master's heartbeat.
            Output::ConnTimeouts { heartbeat } => self.net.follow_heartbeat(Some(heartbeat)),
        }
    }

    fn on_net(&mut self, ev: NetEvent) {
        match ev {
            NetEvent::Message { conn, msg } => {
                tracing::debug!(%conn, kind = msg.kind(), "received");
                self.feed(NodeInput::Message { conn, msg });
            }
            // Only masters act on tokens: a token's holder that connected
            // here is closed.
            NetEvent::Authenticated { conn, .. } => {
                if let Some(c) = self.conns.get(&conn) {
                    tracing::warn!(%conn, "closing a token's connection: only masters take tokens");
                    c.close();
                }
            }
            NetEvent::Closed { conn, cause } => {
                self.conns.remove(&conn);
                self.feed(NodeInput::Closed {
                    conn,
                    how: cause.ended(),
                    reason: cause.to_string(),
                });
            }
        }
    }

    fn on_exec(&mut self, ev: ExecEvent) {
        self.feed(crate::host::exec_input(ev));
    }

    fn on_dialled(&mut self, dial: DialId, result: Result<TcpStream, DialError>) {
        let result = match result {
            Ok(stream) => {
                self.next_conn += 1;
                let conn = ConnId(self.next_conn);
                let tx = self.tx.clone();
                match spawn_connection(stream, Side::Client, conn, self.net.clone(), move |e| {
                    let _ = tx.send(Input::Net(e));
                }) {
                    Ok(h) => {
                        tracing::debug!(peer = %h.peer, %conn, "connection started");
                        self.conns.insert(conn, h);
                        DialResult::Connected { conn, peer: None }
                    }
                    Err(e) => DialResult::Failed {
                        reason: format!("cannot start a connection: {e}"),
                        refused: false,
                    },
                }
            }
            Err(DialError { reason, refused }) => DialResult::Failed { reason, refused },
        };
        self.feed(NodeInput::Dialled { dial, result });
    }

    /// Kills every executor (on this thread: the node has exited) and feeds
    /// their last states, so the node reports them where it still can.
    fn kill_all_and_report(&mut self, rx: &Receiver<Input>) {
        let unreported = self.supervisor.kill_all();
        if !unreported.is_empty() {
            tracing::warn!(executors = ?unreported, "executors not confirmed dead");
        }
        while let Ok(input) = rx.try_recv() {
            match input {
                Input::Exec(ev) => self.on_exec(ev),
                Input::Net(ev @ NetEvent::Closed { .. }) => self.on_net(ev),
                _ => {}
            }
        }
    }

    /// Closes every connection after what was queued on it, and waits (at
    /// most [`FLUSH_GRACE`]) until they are closed.
    fn flush(&mut self, rx: &Receiver<Input>) {
        let mut open: HashSet<ConnId> = HashSet::new();
        for (conn, h) in self.conns.drain() {
            h.close();
            open.insert(conn);
        }
        let deadline = Instant::now() + FLUSH_GRACE;
        while !open.is_empty() {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Input::Net(NetEvent::Closed { conn, .. })) => {
                    open.remove(&conn);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
}

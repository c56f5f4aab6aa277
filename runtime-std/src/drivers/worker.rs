//! The worker daemon on std threads: one [`regent_core::worker::Worker`]
//! machine, its connections to the masters, its timers and its executor
//! processes. The blocking twin of `regent_smol::worker`, same behaviour:
//!
//! * `Connect` dials on a thread of its own (resolution, the exposure check
//!   on every resolved address, [`CONNECT_TIMEOUT`]); the result comes back
//!   as an input and becomes `Connected` or `ConnectFailed`.
//! * `Send` queues on the master's connection (dropped if there is none);
//!   `Close` flushes and closes it, and nothing more of it is fed.
//! * `SetTimer` / `CancelTimer` edit a table of deadlines; each due timer is
//!   fed back as `Event::Timer`, one `handle` call each.
//! * `StartExecutor` / `KillExecutor` go to a [`Supervisor`] over the work
//!   directory; its [`ExecEvent`]s come back as `ExecutorChanged`.
//! * `Exit` kills every executor and ends the worker with the reason as its
//!   error ([`WorkerHandle::wait`]).
//!
//! Executors keep running while the worker has no master (failover): only
//! the machine's `KillExecutor`, `Exit` and shutdown stop them. The work
//! directory's layout is the smol worker's: `<work_dir>/worker-id` keeps a
//! generated id across restarts; the supervisor keeps its lock, records and
//! executor logs beside it (see [`crate::exec`]).

use super::{millis_since, spawn_dial, DialError, DriverThread, Stopper};
use crate::exec::{ExecEvent, ExecutorSpec, Launched, LeftBehind, LeftBehindOutcome, Supervisor};
use crate::net::{check_exposure, random_u64, spawn_connection, ConnHandle, NetConfig, NetEvent};
use regent_core::auth::Side;
use regent_core::protocol::{ExecutorReport, ExecutorState};
use regent_core::worker::{Action, Config, Event, Timer, Worker, WorkerStatus};
use regent_core::{Addr, ConnId, ExecutorId, Incarnation, WorkerId};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fs;
use std::io::Write as _;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The file in the work directory that keeps a generated worker id.
pub const ID_FILE: &str = "worker-id";

/// How long dialling one master may take (resolution and TCP connect).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long connections get to flush their last messages (executor reports)
/// when the worker stops.
pub const FLUSH_GRACE: Duration = Duration::from_millis(500);

/// How to run a worker (the flags of `regent worker`).
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The cluster name (sent in `Hello`; must be the one in `net`).
    pub cluster: String,
    /// The configured masters, as `host:port`. More are learned from the
    /// masters themselves.
    pub masters: Vec<Addr>,
    /// Cores offered to the cluster.
    pub cores: u32,
    /// Memory offered to the cluster, in MiB.
    pub memory_mb: u64,
    /// The work directory (created if missing).
    pub work_dir: PathBuf,
    /// The worker id; without one, an id is generated once and kept in
    /// `<work_dir>/worker-id`.
    pub id: Option<String>,
    /// How connections behave (cluster, secret, limits).
    pub net: Arc<NetConfig>,
    /// Allow masters on non-loopback addresses without a cluster secret.
    pub insecure: bool,
}

enum Input {
    Net(NetEvent),
    Exec(ExecEvent),
    Dialed {
        master: Addr,
        result: Result<TcpStream, DialError>,
    },
    Shutdown,
    /// `kill_all` of a shutdown finished; these were not confirmed dead.
    Killed(Vec<ExecutorId>),
}

/// A running worker. Dropping it shuts the worker down (as [`shutdown`]).
///
/// [`shutdown`]: WorkerHandle::shutdown
#[derive(Debug)]
pub struct WorkerHandle {
    id: String,
    status: Arc<Mutex<WorkerStatus>>,
    driver: DriverThread<()>,
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
        self.driver.stop.clone()
    }

    /// `true` once the worker's thread has ended.
    pub fn is_finished(&self) -> bool {
        self.driver.is_finished()
    }

    /// Shuts the worker down: kills every executor, reports their ends to
    /// the master it follows, gives the connections [`FLUSH_GRACE`] to flush;
    /// then returns how the worker ended.
    pub fn shutdown(mut self) -> Result<(), String> {
        self.driver.stop.stop();
        self.driver.join().unwrap_or(Ok(()))
    }

    /// Waits until the worker ends: `Ok` after a shutdown, `Err` with the
    /// machine's reason when it exited (e.g. the master told it to stop).
    pub fn wait(mut self) -> Result<(), String> {
        self.driver.join().unwrap_or(Ok(()))
    }
}

/// Starts a worker on a thread of its own.
///
/// Fails at once, naming the problem, when a configured master address is
/// malformed or is not on loopback while there is no cluster secret and
/// `insecure` is not set, when the work directory cannot be used (or another
/// worker holds it), or when the worker id cannot be read or stored. A
/// configured master whose name does not resolve yet is only warned about.
pub fn spawn_worker(cfg: WorkerConfig) -> Result<WorkerHandle, String> {
    if cfg.cluster != cfg.net.cluster {
        return Err(format!(
            "the worker's cluster {:?} differs from its network configuration's {:?}",
            cfg.cluster, cfg.net.cluster
        ));
    }
    check_masters(&cfg.masters, cfg.net.secret.is_some(), cfg.insecure)?;
    if cfg.id.as_ref().is_some_and(|id| id.trim().is_empty()) {
        return Err("the worker id is empty".to_owned());
    }
    let (tx, rx) = mpsc::channel::<Input>();
    let sink = tx.clone();
    let (supervisor, left_behind) = Supervisor::new(cfg.work_dir.clone(), move |ev| {
        // Fails only once the daemon is gone, when nobody needs the event.
        let _ = sink.send(Input::Exec(ev));
    })
    .map_err(|e| format!("cannot supervise executors in {}: {e}", cfg.work_dir.display()))?;
    // Under the supervisor's lock: no other worker races for the id file.
    let id = match &cfg.id {
        Some(id) => id.clone(),
        None => load_or_create_id(&cfg.work_dir)?,
    };
    let incarnation = Incarnation(crate::net::time_ordered_id());
    let config = Config::new(
        cfg.cluster.clone(),
        WorkerId::new(id.clone()),
        incarnation,
        cfg.masters.clone(),
        cfg.cores,
        cfg.memory_mb,
    );
    tracing::info!(
        worker = %id,
        %incarnation,
        masters = ?cfg.masters,
        cores = cfg.cores,
        memory_mb = cfg.memory_mb,
        work_dir = %cfg.work_dir.display(),
        "worker starting"
    );
    let worker = Worker::new(config);
    let status = Arc::new(Mutex::new(worker.status()));
    let d = Daemon {
        start: Instant::now(),
        worker,
        status: status.clone(),
        supervisor: Arc::new(supervisor),
        net: cfg.net.clone(),
        insecure: cfg.insecure,
        timers: BTreeMap::new(),
        conns: HashMap::new(),
        links: HashMap::new(),
        next_conn: 0,
        tx: tx.clone(),
        exit: None,
        stopping: false,
        dial_log: DialLog::default(),
        shown: (None, false),
        queue: VecDeque::new(),
    };
    let thread = std::thread::Builder::new()
        .name("regent-worker".into())
        .spawn(move || d.run(rx, left_behind))
        .map_err(|e| format!("cannot start the worker thread: {e}"))?;
    let stop_tx = tx;
    let stop = Stopper::new(move || {
        let _ = stop_tx.send(Input::Shutdown);
    });
    Ok(WorkerHandle { id, status, driver: DriverThread::new("worker", stop, thread) })
}

struct Daemon {
    start: Instant,
    worker: Worker,
    status: Arc<Mutex<WorkerStatus>>,
    supervisor: Arc<Supervisor>,
    net: Arc<NetConfig>,
    insecure: bool,
    /// Deadlines of the machine's timers.
    timers: BTreeMap<Timer, Instant>,
    /// The master of every current connection.
    conns: HashMap<ConnId, Addr>,
    /// The current connection to each master.
    links: HashMap<Addr, ConnHandle>,
    next_conn: u64,
    tx: Sender<Input>,
    /// Set by `Action::Exit`.
    exit: Option<String>,
    /// Shutting down: executors are being killed, none may start.
    stopping: bool,
    /// Dial failures, logged once per master.
    dial_log: DialLog,
    /// The followed master and registration last logged.
    shown: (Option<Addr>, bool),
    /// Inputs produced while executing actions, fed after them.
    queue: VecDeque<Event>,
}

impl Daemon {
    fn run(mut self, rx: Receiver<Input>, left_behind: Vec<LeftBehind>) -> Result<(), String> {
        self.feed(Event::Start);
        for lb in left_behind {
            self.feed(left_behind_event(lb));
        }
        loop {
            if let Some(reason) = self.exit.take() {
                tracing::error!(%reason, "worker exits");
                self.kill_all_and_report(&rx);
                self.flush(&rx);
                return Err(reason);
            }
            let deadline = self.timers.values().min().copied();
            let input = match deadline {
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
            };
            match input {
                Err(RecvTimeoutError::Timeout) => self.fire_due(),
                // The daemon holds a sender: cannot happen.
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
                Ok(Input::Net(ev)) => self.on_net(ev),
                Ok(Input::Exec(ev)) => self.on_exec(ev),
                Ok(Input::Dialed { master, result }) => self.on_dialed(master, result),
                Ok(Input::Shutdown) => {
                    if self.stopping {
                        continue;
                    }
                    // Kill on a thread of its own while the loop goes on, so
                    // the reports of executors that die go out as they die
                    // and heartbeats keep the registration alive meanwhile.
                    tracing::info!("shutting down: killing every executor");
                    self.stopping = true;
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

    /// One `handle` call, then every action in order; then the same for
    /// each input an action queued (one call each).
    fn feed(&mut self, event: Event) {
        self.queue.push_back(event);
        while let Some(event) = self.queue.pop_front() {
            tracing::trace!(?event, "worker event");
            let now = millis_since(self.start);
            let actions = self.worker.handle(now, event);
            for action in actions {
                self.execute(action);
            }
            self.log_status();
        }
    }

    fn execute(&mut self, action: Action) {
        match action {
            Action::Connect { master } => {
                tracing::debug!(%master, "dialling master");
                let tx = self.tx.clone();
                let has_secret = self.net.secret.is_some();
                let started = spawn_dial(
                    master.clone(),
                    has_secret,
                    self.insecure,
                    false,
                    CONNECT_TIMEOUT,
                    move |master, result| {
                        let _ = tx.send(Input::Dialed { master, result });
                    },
                );
                if !started {
                    self.queue.push_back(Event::ConnectFailed { master });
                }
            }
            Action::Send { to, msg } => match self.links.get(&to) {
                Some(h) => {
                    tracing::debug!(master = %to, kind = msg.kind(), "send");
                    h.send(msg);
                }
                None => tracing::debug!(master = %to, kind = msg.kind(), "no connection; dropped"),
            },
            Action::Close { master, reason } => {
                tracing::info!(%master, %reason, "closing the connection to master");
                if let Some(h) = self.links.remove(&master) {
                    self.conns.remove(&h.conn);
                    h.close();
                }
            }
            Action::SetTimer { timer, at } => {
                self.timers.insert(timer, self.start + Duration::from_millis(at.0));
            }
            Action::CancelTimer { timer } => {
                self.timers.remove(&timer);
            }
            Action::StartExecutor { executor, framework, command, env, cores, memory_mb } => {
                if self.stopping {
                    // kill_all does not cover launches made while it runs.
                    tracing::warn!(%executor, "not starting an executor: the worker is shutting down");
                    let state = ExecutorState::Killed;
                    self.queue.push_back(Event::ExecutorChanged { executor, state });
                    return;
                }
                tracing::debug!(%executor, %framework, ?command, "starting executor");
                let spec = ExecutorSpec { executor, framework, command, env, cores, memory_mb };
                let id = spec.executor.clone();
                // Blocking (fork, fsync of the record), as the smol worker
                // awaits it; `Running` or `Failed` comes back via the sink.
                log_launched(&id, self.supervisor.launch(spec));
            }
            Action::KillExecutor { executor } => {
                tracing::debug!(%executor, "killing executor");
                if !self.supervisor.kill(&executor) {
                    tracing::debug!(%executor, "executor to kill is not running");
                }
            }
            Action::Exit { reason } => {
                if self.exit.is_none() {
                    self.exit = Some(reason);
                }
            }
        }
    }

    fn on_net(&mut self, ev: NetEvent) {
        match ev {
            NetEvent::Message { conn, msg } => {
                // Messages of a connection the machine closed are ignored.
                let Some(from) = self.conns.get(&conn).cloned() else { return };
                tracing::debug!(master = %from, kind = msg.kind(), "received");
                self.feed(Event::Message { from, msg });
            }
            NetEvent::Closed { conn, reason } => {
                let Some(master) = self.conns.remove(&conn) else { return };
                self.links.remove(&master);
                tracing::info!(%master, %reason, "disconnected from master");
                self.feed(Event::Disconnected { master });
            }
        }
    }

    fn on_exec(&mut self, ev: ExecEvent) {
        tracing::debug!(executor = %ev.executor, state = ?ev.state, "executor changed");
        self.feed(Event::ExecutorChanged { executor: ev.executor, state: ev.state });
    }

    fn on_dialed(&mut self, master: Addr, result: Result<TcpStream, DialError>) {
        match result {
            Ok(stream) => {
                if let Some(old) = self.links.remove(&master) {
                    // One connection per master: a lingering one is replaced.
                    self.conns.remove(&old.conn);
                    old.close();
                }
                self.next_conn += 1;
                let conn = ConnId(self.next_conn);
                let tx = self.tx.clone();
                let handle =
                    match spawn_connection(stream, Side::Client, conn, self.net.clone(), move |e| {
                        let _ = tx.send(Input::Net(e));
                    }) {
                        Ok(h) => h,
                        Err(e) => {
                            tracing::warn!(%master, "cannot start a connection: {e}");
                            self.feed(Event::ConnectFailed { master });
                            return;
                        }
                    };
                tracing::info!(%master, peer = %handle.peer, %conn, "connected to master");
                self.dial_log.connected(&master);
                self.conns.insert(conn, master.clone());
                self.links.insert(master.clone(), handle);
                self.feed(Event::Connected { master });
            }
            Err(DialError { reason, refused }) => {
                self.dial_log.failed(&master, &reason, refused);
                self.feed(Event::ConnectFailed { master });
            }
        }
    }

    /// Feeds every due timer, one `handle` call each.
    fn fire_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Timer> =
            self.timers.iter().filter(|(_, at)| **at <= now).map(|(t, _)| *t).collect();
        for timer in due {
            // An earlier timer's actions may have moved or cancelled it.
            if self.timers.get(&timer).is_some_and(|at| *at <= now) {
                self.timers.remove(&timer);
                self.feed(Event::Timer(timer));
                if self.exit.is_some() {
                    return;
                }
            }
        }
    }

    /// Kills every executor (on this thread: the machine has exited) and
    /// feeds their last states, so the machine reports them where it still
    /// can.
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
        for (_, h) in self.links.drain() {
            h.close();
            open.insert(h.conn);
        }
        self.conns.clear();
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

    /// Publishes the machine's status and logs changes of the followed
    /// master and of the registration.
    fn log_status(&mut self) {
        let st = self.worker.status();
        log_status_change(&st, &mut self.shown);
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = st;
    }
}

/// The event that reports an executor a previous worker process left
/// behind (logged as a warning): `Killed`, not `Failed`, also for one that
/// had ended by itself, since its end is the worker's doing or unknown, not
/// the executor's fault, so it must not use the group's retry budget.
pub fn left_behind_event(lb: LeftBehind) -> Event {
    let what = match lb.outcome {
        LeftBehindOutcome::Killed => "killed an executor a previous worker process left running",
        LeftBehindOutcome::AlreadyGone => {
            "an executor of a previous worker process had ended; its exit status is unknown"
        }
    };
    tracing::warn!(executor = %lb.executor, pgid = lb.pgid, "{what}");
    Event::LeftBehind(ExecutorReport {
        id: lb.executor,
        framework: lb.framework,
        cores: 0,
        memory_mb: 0,
        state: ExecutorState::Killed,
    })
}

/// Logs how a launch went (`Running` or `Failed` itself comes back through
/// the supervisor's sink).
pub fn log_launched(executor: &ExecutorId, launched: Launched) {
    match launched {
        Launched::Started { pid } => tracing::debug!(%executor, pid, "executor started"),
        Launched::Failed { reason } => {
            tracing::warn!(%executor, %reason, "executor launch failed")
        }
        Launched::AlreadyRunning => {
            tracing::warn!(%executor, "executor already runs; launch ignored")
        }
    }
}

/// Logs a change of the followed master or of the registration; `shown` is
/// what was logged last (updated).
pub fn log_status_change(st: &WorkerStatus, shown: &mut (Option<Addr>, bool)) {
    let now = (st.active.clone(), st.registered);
    if now == *shown {
        return;
    }
    match (&st.active, st.registered) {
        (Some(m), true) => {
            tracing::info!(master = %m, epoch = st.max_epoch.0, "registered with master")
        }
        (Some(m), false) => {
            tracing::info!(master = %m, epoch = st.max_epoch.0, "following master; registering")
        }
        (None, _) => tracing::info!("no master followed"),
    }
    *shown = now;
}

/// Logs failed dials to masters without flooding: the first failure of a
/// master in a row at info (later ones at debug), a refusal by the exposure
/// check once per master as a warning.
#[derive(Debug, Default)]
pub struct DialLog {
    /// Masters refused by the exposure check (warned about once).
    refused: HashSet<Addr>,
    /// Masters whose last dial failed.
    failing: HashSet<Addr>,
}

impl DialLog {
    /// A dial to `master` failed; `refused`: every address it resolves to
    /// was refused by the exposure check.
    pub fn failed(&mut self, master: &Addr, reason: &str, refused: bool) {
        if self.failing.insert(master.clone()) {
            tracing::info!(%master, %reason, "cannot connect to master");
        } else {
            tracing::debug!(%master, %reason, "cannot connect to master");
        }
        if refused && self.refused.insert(master.clone()) {
            tracing::warn!(%master, %reason, "master refused by the exposure check");
        }
    }

    /// A dial to `master` succeeded: its next failure is news again.
    pub fn connected(&mut self, master: &Addr) {
        self.failing.remove(master);
    }
}

/// Checks the configured masters before anything starts: each must be
/// `host:port`, and none may resolve to a non-loopback address without a
/// secret unless `insecure`. A name that does not resolve yet is warned
/// about only.
pub fn check_masters(masters: &[Addr], has_secret: bool, insecure: bool) -> Result<(), String> {
    if masters.is_empty() {
        return Err("no master address given".to_owned());
    }
    for m in masters {
        let ok = m
            .as_str()
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !ok {
            return Err(format!("master address {m:?} is not host:port"));
        }
        match m.as_str().to_socket_addrs() {
            Ok(addrs) => {
                for a in addrs {
                    check_exposure(&a, has_secret, insecure)
                        .map_err(|e| format!("master {m}: {e}"))?;
                }
            }
            Err(e) => {
                tracing::warn!(master = %m, error = %e, "cannot resolve master yet; will keep trying")
            }
        }
    }
    Ok(())
}

/// The id kept in `<work_dir>/worker-id`, or a new one (`worker-<host>-<hex>`)
/// written there durably (temp file, fsync, rename, directory fsync).
pub fn load_or_create_id(work_dir: &Path) -> Result<String, String> {
    let path = work_dir.join(ID_FILE);
    match fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => return Ok(s.trim().to_owned()),
        Ok(_) => {
            tracing::warn!(path = %path.display(), "empty worker id file; generating a new id")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot read the worker id from {}: {e}", path.display())),
    }
    let id = generate_id();
    let tmp = work_dir.join(format!("{ID_FILE}.tmp"));
    (|| {
        let mut f = fs::File::create(&tmp)?;
        writeln!(f, "{id}")?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        fs::File::open(work_dir)?.sync_all()
    })()
    .map_err(|e| format!("cannot store the worker id in {}: {e}", path.display()))?;
    tracing::info!(worker = %id, path = %path.display(), "generated the worker id");
    Ok(id)
}

/// `worker-<hostname>-<random hex>`: readable, and unique even for two
/// workers on one host.
fn generate_id() -> String {
    let host: String = fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| fs::read_to_string("/etc/hostname"))
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
        .collect();
    let suffix = format!("{:08x}", random_u64() as u32);
    if host.is_empty() {
        format!("worker-{suffix}")
    } else {
        format!("worker-{host}-{suffix}")
    }
}

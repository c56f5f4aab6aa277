//! The worker daemon: one [`regent_core::worker::Worker`] machine, its
//! connections to the masters, its timers and its executor processes.
//!
//! [`run_worker`] is a thin loop in the shape of every regent runtime: wait
//! for a network event, an executor state change, a dial result, the
//! earliest timer deadline or the shutdown signal; make one `handle` call
//! for that input; execute every action in order; recompute the next
//! deadline. Which master to follow, when to register, heartbeat, retry or
//! give up is the machine's business; this module only carries it out.
//!
//! What the loop does with each action:
//!
//! * `Connect` dials in a task of its own (resolution, the exposure check of
//!   [`check_exposure`] on every resolved address, a [`CONNECT_TIMEOUT`]);
//!   the result comes back as an input and becomes `Connected` (with a
//!   connection started by [`spawn_connection`]) or `ConnectFailed`.
//! * `Send` queues the message on the master's connection (dropped if there
//!   is none); `Close` flushes and closes it, and later events of that
//!   connection are ignored (no `Disconnected` is fed for it).
//! * `SetTimer` / `CancelTimer` edit a table of deadlines; each due timer is
//!   fed back as `Event::Timer`, one `handle` call each.
//! * `StartExecutor` / `KillExecutor` go to a [`Supervisor`] over the work
//!   directory; its [`ExecEvent`]s come back as `ExecutorChanged`.
//! * `Exit` kills every executor and makes [`run_worker`] return the reason
//!   as its error.
//!
//! Executors keep running while the worker has no master (failover): only
//! the machine's `KillExecutor`, `Exit` and the shutdown signal stop them.
//!
//! # Work directory
//!
//! ```text
//! <work_dir>/worker-id     the generated worker id, kept across restarts
//! <work_dir>/...           the supervisor's lock, records and executor logs
//!                          (see regent_std::exec)
//! ```
//!
//! The supervisor's lock keeps a second worker out of the same work
//! directory. Process groups a previous worker process left running (it was
//! killed with `kill -9`, or crashed) are killed at start and reported to
//! the master as `Killed`.

use crate::net::{check_exposure, spawn_connection, ConnHandle, NetConfig, NetEvent};
use async_channel::{Receiver, Sender};
use regent_core::auth::Side;
use regent_core::protocol::ExecutorState;
use regent_core::worker::{Action, Config, Event, Timer, Worker};
use regent_core::{Addr, ConnId, ExecutorId, Incarnation, WorkerId};
use regent_std::drivers::worker::{
    check_masters, left_behind_event, load_or_create_id, log_launched, log_status_change, DialLog,
};
use regent_std::exec::{ExecEvent, ExecutorSpec, Supervisor};
use smol::future;
use smol::net::TcpStream;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The work directory's file that keeps a generated worker id, how long a
/// dial may take and how long connections get to flush when the worker
/// stops: the blocking worker's.
pub use regent_std::drivers::worker::{CONNECT_TIMEOUT, FLUSH_GRACE, ID_FILE};

/// What `regent worker` runs with.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The cluster name (sent in `Hello`; must be the one in `net`).
    pub cluster: String,
    /// The configured masters, as `host:port`. More are learned from the
    /// masters themselves.
    pub masters: Vec<Addr>,
    /// Cores offered to the cluster.
    pub cores: u32,
    /// Memory offered to the cluster, in MiB.
    pub memory_mb: u64,
    /// The work directory: the generated id, the supervisor's lock and
    /// records, the executors' working directories and logs. Created if
    /// missing.
    pub work_dir: PathBuf,
    /// The worker id; without one, an id is generated once and kept in
    /// `<work_dir>/worker-id`, so a restarted worker keeps it.
    pub id: Option<String>,
    /// How connections behave (cluster, secret, limits).
    pub net: Arc<NetConfig>,
    /// Allow masters on non-loopback addresses without a cluster secret.
    pub insecure: bool,
}

/// Runs a worker until `shutdown` delivers a message (then it kills every
/// executor, reports their ends to the master it follows, gives the
/// connections [`FLUSH_GRACE`] to flush and returns `Ok(())`) or until the
/// machine exits (then it kills every executor and returns the machine's
/// reason as the error).
///
/// Fails at once, with an error naming the problem, when a configured master
/// address is malformed or is not on loopback while there is no cluster
/// secret and `insecure` is not set, when the work directory cannot be used
/// (or another worker holds it), or when the worker id cannot be read or
/// stored. A configured master whose name does not resolve yet is only
/// warned about: the worker keeps dialling it.
///
/// A message on `shutdown` and the channel's closing (`Sender::close`, or
/// every sender dropped) both request the shutdown: `regent worker` closes
/// it from its signal handler, and one closed channel stops every worker
/// that shares it.
pub async fn run_worker(opts: WorkerOptions, shutdown: Receiver<()>) -> Result<(), String> {
    if opts.cluster != opts.net.cluster {
        return Err(format!(
            "the worker's cluster {:?} differs from its network configuration's {:?}",
            opts.cluster, opts.net.cluster
        ));
    }
    {
        // Resolving blocks: on the blocking pool.
        let (masters, has_secret) = (opts.masters.clone(), opts.net.secret.is_some());
        let insecure = opts.insecure;
        smol::unblock(move || check_masters(&masters, has_secret, insecure)).await?;
    }
    if opts.id.as_ref().is_some_and(|id| id.trim().is_empty()) {
        return Err("the worker id is empty".to_owned());
    }

    let (exec_tx, exec_rx) = async_channel::unbounded::<ExecEvent>();
    let work_dir = opts.work_dir.clone();
    let (supervisor, left_behind) = smol::unblock(move || {
        Supervisor::new(work_dir, move |ev| {
            // Unbounded: never blocks the supervisor's threads. Fails only
            // once the daemon is gone, when nobody needs the event.
            let _ = exec_tx.try_send(ev);
        })
    })
    .await
    .map_err(|e| format!("cannot supervise executors in {}: {e}", opts.work_dir.display()))?;
    // Under the supervisor's lock: no other worker races for the id file.
    let id = match &opts.id {
        Some(id) => id.clone(),
        None => load_or_create_id(&opts.work_dir)?,
    };

    let incarnation = Incarnation(regent_std::net::time_ordered_id());
    let config = Config::new(
        opts.cluster.clone(),
        WorkerId::new(id.clone()),
        incarnation,
        opts.masters.clone(),
        opts.cores,
        opts.memory_mb,
    );
    tracing::info!(
        worker = %id,
        %incarnation,
        masters = ?opts.masters,
        cores = opts.cores,
        memory_mb = opts.memory_mb,
        work_dir = %opts.work_dir.display(),
        "worker starting"
    );

    let (net_tx, net_rx) = async_channel::unbounded();
    let (dial_tx, dial_rx) = async_channel::unbounded();
    let mut d = Daemon {
        start: Instant::now(),
        worker: Worker::new(config),
        supervisor: Arc::new(supervisor),
        net: opts.net.clone(),
        insecure: opts.insecure,
        timers: BTreeMap::new(),
        conns: HashMap::new(),
        links: HashMap::new(),
        next_conn: 0,
        net_tx,
        dial_tx,
        exit: None,
        stopping: false,
        dial_log: DialLog::default(),
        shown: (None, false),
        queue: VecDeque::new(),
    };

    d.feed(Event::Start).await;
    for lb in left_behind {
        d.feed(left_behind_event(lb)).await;
    }

    let mut killing: Option<smol::Task<Vec<ExecutorId>>> = None;
    loop {
        if let Some(reason) = d.exit.take() {
            tracing::error!(%reason, "worker exits");
            d.kill_all_and_report(&exec_rx).await;
            d.flush(&net_rx).await;
            return Err(reason);
        }
        let deadline = d.timers.values().min().copied();
        let listen_shutdown = killing.is_none();
        let wake = future::or(
            future::or(
                async {
                    match killing.as_mut() {
                        Some(task) => Wake::Killed(task.await),
                        None => future::pending().await,
                    }
                },
                async {
                    if listen_shutdown {
                        // A message or the channel's closing.
                        let _ = shutdown.recv().await;
                        Wake::Shutdown
                    } else {
                        future::pending().await
                    }
                },
            ),
            future::or(
                future::or(
                    async {
                        Wake::Exec(
                            exec_rx.recv().await.expect("the supervisor's sink holds a sender"),
                        )
                    },
                    async {
                        Wake::Dialed(dial_rx.recv().await.expect("the daemon holds a sender"))
                    },
                ),
                future::or(
                    async { Wake::Net(net_rx.recv().await.expect("the daemon holds a sender")) },
                    async {
                        match deadline {
                            Some(at) => {
                                async_io::Timer::at(at).await;
                                Wake::Deadline
                            }
                            None => future::pending().await,
                        }
                    },
                ),
            ),
        )
        .await;
        match wake {
            Wake::Net(ev) => d.on_net(ev).await,
            Wake::Exec(ev) => d.on_exec(ev).await,
            Wake::Dialed(dialed) => d.on_dialed(dialed).await,
            Wake::Deadline => d.fire_due().await,
            Wake::Shutdown => {
                // Kill on a blocking thread while the loop goes on, so the
                // reports of executors that die go out as they die and
                // heartbeats keep the registration alive meanwhile.
                tracing::info!("shutting down: killing every executor");
                d.stopping = true;
                let sup = d.supervisor.clone();
                killing = Some(smol::unblock(move || sup.kill_all()));
            }
            Wake::Killed(unreported) => {
                if !unreported.is_empty() {
                    tracing::warn!(executors = ?unreported, "executors not confirmed dead on shutdown");
                }
                // Every event of the killed executors is in the channel by
                // now: the sink runs before kill_all sees them finished.
                while let Ok(ev) = exec_rx.try_recv() {
                    d.on_exec(ev).await;
                }
                d.flush(&net_rx).await;
                tracing::info!("worker stopped");
                return Ok(());
            }
        }
    }
}

enum Wake {
    Net(NetEvent),
    Exec(ExecEvent),
    Dialed(Dialed),
    Deadline,
    Shutdown,
    Killed(Vec<ExecutorId>),
}

/// The outcome of dialling one master.
struct Dialed {
    master: Addr,
    result: Result<TcpStream, DialError>,
}

struct Daemon {
    start: Instant,
    worker: Worker,
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
    net_tx: Sender<NetEvent>,
    dial_tx: Sender<Dialed>,
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
    /// One `handle` call, then every action in order; then the same for
    /// each input an action queued (one call each).
    async fn feed(&mut self, event: Event) {
        self.queue.push_back(event);
        while let Some(event) = self.queue.pop_front() {
            tracing::trace!(?event, "worker event");
            let now = crate::millis_since(self.start);
            let actions = self.worker.handle(now, event);
            for action in actions {
                self.execute(action).await;
            }
            self.log_status();
        }
    }

    async fn execute(&mut self, action: Action) {
        match action {
            Action::Connect { master } => {
                tracing::debug!(%master, "dialling master");
                let tx = self.dial_tx.clone();
                let has_secret = self.net.secret.is_some();
                let insecure = self.insecure;
                smol::spawn(async move {
                    let result = future::or(dial(&master, has_secret, insecure), async {
                        async_io::Timer::after(CONNECT_TIMEOUT).await;
                        Err(DialError {
                            reason: format!("timed out after {CONNECT_TIMEOUT:?}"),
                            refused: false,
                        })
                    })
                    .await;
                    let _ = tx.send(Dialed { master, result }).await;
                })
                .detach();
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
                tracing::trace!(?timer, %at, "set timer");
                self.timers.insert(timer, self.start + Duration::from_millis(at.0));
            }
            Action::CancelTimer { timer } => {
                tracing::trace!(?timer, "cancel timer");
                self.timers.remove(&timer);
            }
            Action::StartExecutor { executor, framework, command, env, cores, memory_mb } => {
                if self.stopping {
                    // kill_all does not cover launches made while it runs.
                    tracing::warn!(%executor, "not starting an executor: the worker is shutting down");
                    // Killed, as if it had been started and stopped with the
                    // others: the worker's doing, not the executor's fault.
                    let state = ExecutorState::Killed;
                    self.queue.push_back(Event::ExecutorChanged { executor, state });
                    return;
                }
                tracing::debug!(%executor, %framework, ?command, "starting executor");
                let spec = ExecutorSpec { executor, framework, command, env, cores, memory_mb };
                let sup = self.supervisor.clone();
                let id = spec.executor.clone();
                // Blocking (fork, fsync of the record); `Running` or `Failed`
                // comes back through the sink.
                log_launched(&id, smol::unblock(move || sup.launch(spec)).await);
            }
            Action::KillExecutor { executor } => {
                tracing::debug!(%executor, "killing executor");
                if !self.supervisor.kill(&executor) {
                    // It ended already; its terminal event is on its way.
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

    async fn on_net(&mut self, ev: NetEvent) {
        match ev {
            NetEvent::Message { conn, msg } => {
                // Messages of a connection the machine closed are ignored.
                let Some(from) = self.conns.get(&conn).cloned() else { return };
                tracing::debug!(master = %from, kind = msg.kind(), "received");
                self.feed(Event::Message { from, msg }).await;
            }
            NetEvent::Closed { conn, reason } => {
                let Some(master) = self.conns.remove(&conn) else { return };
                self.links.remove(&master);
                tracing::info!(%master, %reason, "disconnected from master");
                self.feed(Event::Disconnected { master }).await;
            }
        }
    }

    async fn on_exec(&mut self, ev: ExecEvent) {
        tracing::debug!(executor = %ev.executor, state = ?ev.state, "executor changed");
        self.feed(Event::ExecutorChanged { executor: ev.executor, state: ev.state }).await;
    }

    async fn on_dialed(&mut self, dialed: Dialed) {
        let Dialed { master, result } = dialed;
        match result {
            Ok(stream) => {
                if let Some(old) = self.links.remove(&master) {
                    // The machine keeps one connection per master; should an
                    // old one linger, the new one replaces it silently.
                    self.conns.remove(&old.conn);
                    old.close();
                }
                let _ = stream.set_nodelay(true);
                self.next_conn += 1;
                let conn = ConnId(self.next_conn);
                let handle = spawn_connection(
                    stream,
                    Side::Client,
                    conn,
                    self.net.clone(),
                    self.net_tx.clone(),
                );
                tracing::info!(%master, peer = %handle.peer, %conn, "connected to master");
                self.dial_log.connected(&master);
                self.conns.insert(conn, master.clone());
                self.links.insert(master.clone(), handle);
                self.feed(Event::Connected { master }).await;
            }
            Err(DialError { reason, refused }) => {
                self.dial_log.failed(&master, &reason, refused);
                self.feed(Event::ConnectFailed { master }).await;
            }
        }
    }

    /// Feeds every due timer, one `handle` call each.
    async fn fire_due(&mut self) {
        let now = Instant::now();
        let due: Vec<Timer> =
            self.timers.iter().filter(|(_, at)| **at <= now).map(|(t, _)| *t).collect();
        for timer in due {
            // An earlier timer's actions may have moved or cancelled it.
            if self.timers.get(&timer).is_some_and(|at| *at <= now) {
                self.timers.remove(&timer);
                self.feed(Event::Timer(timer)).await;
                if self.exit.is_some() {
                    return;
                }
            }
        }
    }

    /// Kills every executor (blocking, on a thread) and feeds their last
    /// states, so the machine reports them where it still can.
    async fn kill_all_and_report(&mut self, exec_rx: &Receiver<ExecEvent>) {
        let sup = self.supervisor.clone();
        let unreported = smol::unblock(move || sup.kill_all()).await;
        if !unreported.is_empty() {
            tracing::warn!(executors = ?unreported, "executors not confirmed dead");
        }
        while let Ok(ev) = exec_rx.try_recv() {
            self.on_exec(ev).await;
        }
    }

    /// Closes every connection after what was queued on it, and waits (at
    /// most [`FLUSH_GRACE`]) until they are closed.
    async fn flush(&mut self, net_rx: &Receiver<NetEvent>) {
        let mut open: HashSet<ConnId> = HashSet::new();
        for (_, h) in self.links.drain() {
            h.close();
            open.insert(h.conn);
        }
        self.conns.clear();
        let deadline = Instant::now() + FLUSH_GRACE;
        while !open.is_empty() {
            let ev = future::or(async { net_rx.recv().await.ok() }, async {
                async_io::Timer::at(deadline).await;
                None
            })
            .await;
            match ev {
                Some(NetEvent::Closed { conn, .. }) => {
                    open.remove(&conn);
                }
                Some(NetEvent::Message { .. }) => {}
                None => break,
            }
        }
    }

    /// Logs changes of the followed master and of the registration.
    fn log_status(&mut self) {
        log_status_change(&self.worker.status(), &mut self.shown);
    }
}

/// Why dialling a master failed.
struct DialError {
    reason: String,
    /// Every address it resolves to was refused by [`check_exposure`].
    refused: bool,
}

/// Dials `master`: every resolved address that passes the exposure check,
/// in order, until one connects.
async fn dial(master: &Addr, has_secret: bool, insecure: bool) -> Result<TcpStream, DialError> {
    let addrs = smol::net::resolve(master.as_str()).await.map_err(|e| DialError {
        reason: format!("cannot resolve {master}: {e}"),
        refused: false,
    })?;
    let mut err = DialError { reason: format!("{master} resolves to no address"), refused: false };
    let mut all_refused = !addrs.is_empty();
    for addr in addrs {
        if let Err(reason) = check_exposure(&addr, has_secret, insecure) {
            err.reason = reason;
            continue;
        }
        all_refused = false;
        match TcpStream::connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(e) => err.reason = format!("cannot connect to {addr}: {e}"),
        }
    }
    err.refused = all_refused;
    Err(err)
}

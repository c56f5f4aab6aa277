//! The worker daemon: an I/O pump for `regent_core::node::WorkerNode`.
//!
//! [`run_worker`] is a thin loop in the shape of every regent runtime: wait
//! for a network event, an executor state change, a dial result, the node's
//! next deadline or the shutdown signal; make one `handle` call for that
//! input; execute every output in order. Which master to follow, when to
//! register, heartbeat, retry or give up, which connection is current and
//! what a shutdown still allows is the node's business; this module only
//! carries it out:
//!
//! * `Dial` dials ([`crate::net::dial`]) in a task of its own (resolution, the exposure check of
//!   `check_exposure` on every resolved address, a [`CONNECT_TIMEOUT`]);
//!   the result comes back as `Dialled`, with a connection started by
//!   [`spawn_connection`] or the failure.
//! * `Send` / `Close` act on a running connection.
//! * `Executor` commands (start, stop, kill) go to a [`Supervisor`] over
//!   the work directory through `execute_executor_command`, the one place
//!   both runtimes carry them out; its [`ExecEvent`]s come back as
//!   `ExecutorChanged`.
//! * `ReadLog` reads a chunk of an executor's output file
//!   (`read_executor_log`, also shared) and feeds it back as `LogRead`.
//! * `Exit` kills every executor and makes [`run_worker`] return the reason
//!   as its error; `Note`s become log lines.
//!
//! Executors keep running while the worker has no master (failover): only
//! the machine's `ExecutorCommand::Kill`, `Exit` and the shutdown signal stop them,
//! and, for a singleton group, its shim once the worker's last word from
//! its master (written to `<work_dir>/last-word` after every `handle`,
//! `persist_word`) is `stop_after` old (docs/design.md#issue-45).
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
//! upgraded, killed with `kill -9`, or crashed) are re-adopted at start when
//! they are proven this worker's (same boot, same start time, still leading
//! their group) and reported `Running` in the registration — the master
//! keeps those whose slot still names them and has the others killed — or,
//! with `--kill-left-behind`, killed and reported `Killed`. What cannot be
//! proven is left alone and logged (see `regent_std::exec`).

use crate::net::{spawn_connection, ConnHandle, DialError, NetConfig, NetEvent};
use async_channel::{Receiver, Sender};
use regent_core::auth::Side;
use regent_core::node::worker::{DialId, DialResult, Input as NodeInput, Output};
use regent_core::node::WorkerNode;
use regent_core::{Addr, ConnId, ExecutorId};
use regent_std::exec::{ExecEvent, Supervisor};
use regent_std::host::{
    callback_listen, execute_executor_command, prepare_worker, read_executor_log, PreparedWorker,
};
use smol::future;
use smol::net::TcpStream;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

/// The work directory's file that keeps a generated worker id, how long a
/// dial may take and how long connections get to flush when the worker
/// stops: shared with the blocking worker.
pub use regent_std::host::{CONNECT_TIMEOUT, FLUSH_GRACE, ID_FILE};

/// What `regent worker` runs with: the host's worker configuration, shared
/// with the blocking runtime.
pub type WorkerOptions = regent_std::host::WorkerConfig;

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
pub async fn run_worker(
    opts: WorkerOptions,
    shutdown: Receiver<()>,
) -> Result<(), crate::error::WorkerError> {
    let (exec_tx, exec_rx) = async_channel::unbounded::<ExecEvent>();
    // Blocking (resolution, the work directory's lock, the id file): on the
    // blocking pool.
    let prepared = {
        let opts = opts.clone();
        smol::unblock(move || {
            prepare_worker(&opts, move |ev| {
                // Unbounded: never blocks the supervisor's threads. Fails
                // only once the daemon is gone, when nobody needs the event.
                let _ = exec_tx.try_send(ev);
            })
        })
        .await?
    };
    let PreparedWorker { supervisor, left_behind, mut config, .. } = prepared;
    let (usage_tx, usage_rx) = async_channel::bounded::<regent_core::protocol::WorkerUsage>(1);
    regent_std::host::spawn_usage_sampler(
        &supervisor,
        regent_std::host::USAGE_SAMPLE_EVERY,
        move |usage| {
            // A sample the loop has not taken yet is simply replaced later.
            !matches!(usage_tx.try_send(usage), Err(async_channel::TrySendError::Closed(_)))
        },
    );

    // The callback listener (docs/design.md#seed-002): a new leader dials it.
    let (accept_rx, _listener) = match callback_listen(&opts)? {
        Some(listen) => {
            let (bound, rx, task) = crate::net::callback_listener(listen).await?;
            let advertise = opts.advertise.clone().unwrap_or_else(|| bound.to_string());
            tracing::info!(listen = %bound, %advertise, "callback listener");
            config.callback = Some(Addr::new(advertise));
            (rx, Some(task))
        }
        None => (async_channel::unbounded().1, None),
    };

    let (net_tx, net_rx) = async_channel::unbounded();
    let (dial_tx, dial_rx) = async_channel::unbounded();
    let mut d = Pump {
        clock: crate::RuntimeClock::start(),
        node: WorkerNode::new(config),
        supervisor,
        net: opts.net.clone(),
        insecure: opts.insecure,
        conns: HashMap::new(),
        next_conn: 0,
        net_tx,
        dial_tx,
        exit: None,
        queue: VecDeque::new(),
    };

    d.feed(NodeInput::Start).await;
    for lb in left_behind {
        let (report, readopted) = regent_std::host::left_behind_inputs(lb);
        d.feed(NodeInput::LeftBehind(report)).await;
        if let Some(input) = readopted {
            d.feed(input).await;
        }
    }

    let mut killing: Option<smol::Task<Vec<ExecutorId>>> = None;
    loop {
        if let Some(reason) = d.exit.take() {
            tracing::error!(%reason, "worker exits");
            d.kill_all_and_report(&exec_rx).await;
            d.flush(&net_rx).await;
            return Err(crate::error::WorkerError::Exit { reason });
        }
        let deadline = d.clock.wake_at(d.node.poll_timeout());
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
                    future::or(
                        async {
                            Wake::Dialled(dial_rx.recv().await.expect("the daemon holds a sender"))
                        },
                        async {
                            match usage_rx.recv().await {
                                Ok(usage) => Wake::Usage(usage),
                                Err(_) => future::pending().await,
                            }
                        },
                    ),
                ),
                future::or(
                    future::or(
                        async {
                            Wake::Net(net_rx.recv().await.expect("the daemon holds a sender"))
                        },
                        async {
                            match accept_rx.recv().await {
                                Ok(stream) => Wake::Accepted(stream),
                                Err(_) => future::pending().await,
                            }
                        },
                    ),
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
            Wake::Accepted(stream) => d.on_accepted(stream).await,
            Wake::Exec(ev) => d.on_exec(ev).await,
            Wake::Dialled(dialed) => d.on_dialled(dialed).await,
            Wake::Deadline => d.feed(NodeInput::Tick).await,
            Wake::Usage(usage) => d.feed(NodeInput::Usage(usage)).await,
            Wake::Shutdown => {
                // Kill on a blocking thread while the loop goes on, so the
                // reports of executors that die go out as they die and
                // heartbeats keep the registration alive meanwhile.
                tracing::info!("shutting down: killing every executor");
                d.feed(NodeInput::Stop).await;
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
    Accepted(TcpStream),
    Exec(ExecEvent),
    Dialled(Dialled),
    Deadline,
    Shutdown,
    Killed(Vec<ExecutorId>),
    Usage(regent_core::protocol::WorkerUsage),
}

/// The outcome of one dial.
struct Dialled {
    dial: DialId,
    result: Result<crate::net::Dialled, DialError>,
}

/// The I/O pump around one `WorkerNode`, following the pump contract of
/// `regent_core::node` (one `handle` per input, outputs executed in order,
/// `poll_timeout` for the next deadline).
struct Pump {
    clock: crate::RuntimeClock,
    node: WorkerNode,
    supervisor: Arc<Supervisor>,
    net: Arc<NetConfig>,
    insecure: bool,
    /// Every running connection.
    conns: HashMap<ConnId, ConnHandle>,
    next_conn: u64,
    net_tx: Sender<NetEvent>,
    dial_tx: Sender<Dialled>,
    /// Set by `Output::Exit`.
    exit: Option<String>,
    /// Inputs produced while executing outputs, fed after them.
    queue: VecDeque<NodeInput>,
}

impl Pump {
    /// One `handle` call, then every output in order; then the same for
    /// each input an output queued (one call each).
    async fn feed(&mut self, input: NodeInput) {
        self.queue.push_back(input);
        while let Some(input) = self.queue.pop_front() {
            let now = self.clock.now();
            let outputs = self.node.handle(now, input);
            // The word first: a launch among the outputs runs under it
            // (docs/design.md#issue-45). A small write and a rename, not
            // fsynced, and only when the word changed.
            regent_std::host::persist_word(&self.supervisor, &self.clock, &self.node);
            for output in outputs {
                self.execute(output).await;
            }
        }
    }

    async fn execute(&mut self, output: Output) {
        match output {
            Output::Dial { dial, master } => {
                tracing::debug!(%master, "dialling master");
                let tx = self.dial_tx.clone();
                let has_secret = self.net.authenticates(regent_core::auth::Side::Client);
                let insecure = self.insecure;
                smol::spawn(async move {
                    let result =
                        crate::net::dial(&master, has_secret, insecure, false, CONNECT_TIMEOUT)
                            .await;
                    let _ = tx.send(Dialled { dial, result }).await;
                })
                .detach();
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
            // On the blocking pool (a launch forks and fsyncs a record);
            // what happens comes back through the supervisor's sink.
            Output::Executor(cmd) => {
                let sup = self.supervisor.clone();
                smol::unblock(move || execute_executor_command(&sup, cmd)).await;
            }
            Output::Exit { reason } => {
                if self.exit.is_none() {
                    self.exit = Some(reason);
                }
            }
            Output::ReadLog(req) => {
                // A bounded pread of a local file, on the blocking pool like
                // a launch; fed right after.
                let sup = self.supervisor.clone();
                let input = smol::unblock(move || read_executor_log(&sup, req)).await;
                self.queue.push_back(input);
            }
            Output::Note(note) => regent_std::notes::log_worker_note(&note),
            // The connections' timeouts scale with the master's heartbeat.
            Output::ConnTimeouts { heartbeat } => self.net.follow_heartbeat(Some(heartbeat)),
        }
    }

    async fn on_net(&mut self, ev: NetEvent) {
        match ev {
            NetEvent::Message { conn, msg } => {
                tracing::debug!(%conn, kind = msg.kind(), "received");
                self.feed(NodeInput::Message { conn, msg }).await;
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
                let (how, reason) = (cause.ended(), cause.to_string());
                self.feed(NodeInput::Closed { conn, how, reason }).await;
            }
        }
    }

    async fn on_exec(&mut self, ev: ExecEvent) {
        self.feed(regent_std::host::exec_input(ev)).await;
    }

    /// A master dialled the callback listener.
    async fn on_accepted(&mut self, stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        self.next_conn += 1;
        let conn = ConnId(self.next_conn);
        let handle =
            spawn_connection(stream, Side::Server, conn, self.net.clone(), self.net_tx.clone());
        tracing::debug!(peer = %handle.peer, %conn, "a master dialled the callback listener");
        self.conns.insert(conn, handle);
        self.feed(NodeInput::Accepted { conn }).await;
    }

    async fn on_dialled(&mut self, dialed: Dialled) {
        let Dialled { dial, result } = dialed;
        let result = match result {
            Ok(dialled) => {
                self.next_conn += 1;
                let conn = ConnId(self.next_conn);
                let handle =
                    crate::net::spawn_dialled(dialled, conn, self.net.clone(), self.net_tx.clone());
                tracing::debug!(peer = %handle.peer, %conn, "connection started");
                self.conns.insert(conn, handle);
                DialResult::Connected { conn, peer: None }
            }
            Err(DialError { reason, refused }) => DialResult::Failed { reason, refused },
        };
        self.feed(NodeInput::Dialled { dial, result }).await;
    }

    /// Kills every executor (blocking, on a thread) and feeds their last
    /// states, so the node reports them where it still can.
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
        for (conn, h) in self.conns.drain() {
            h.close();
            open.insert(conn);
        }
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
                Some(NetEvent::Message { .. } | NetEvent::Authenticated { .. }) => {}
                None => break,
            }
        }
    }
}

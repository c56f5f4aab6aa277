//! The submit daemon: `regent submit` runs one framework with one executor
//! group and follows it to the end.
//!
//! The daemon is an I/O pump for the pure [`SubmitNode`] of `regent-core`
//! and decides nothing itself (docs/design.md#runtimes-only-pump): it waits for a frame, a
//! finished dial, the node's next deadline or the shutdown signal; makes one
//! `handle` call per input; executes every output in order (dial, send,
//! close, show, exit). Finding the leader, closing before resubscribing,
//! backoff, the heartbeat watchdog, re-declaring after a resubscription,
//! stopping when another instance takes the framework over, dial
//! generations, which connection events count, the slots' progress, every
//! line shown and how the submission ends are the node's
//! (`regent_core::node::submit`).
//!
//! What the daemon adds is I/O:
//!
//! * **start**: a fresh instance id per process (OS entropy), `Start`, then
//!   `Declare` of the group `main` (`--executors` slots of the command, with
//!   `--env`), or of every group of a job ([`run_job_with_progress`],
//!   `regent run JOB.toml`);
//! * **output**: every line the node shows (the instance, the framework id
//!   once known, `subscribed to <master>`,
//!   `<executor> slot <n> on <worker>: RUNNING`, `disconnected: <reason>`,
//!   refused requests, failed slots, master errors, the closing summary),
//!   written by the shared [`regent_std::pumps::subscriber::Screen`].
//!   With [`run_submit_with_progress`] and `progress = true` (the caller
//!   passes whether `out` is a terminal) a live one-line summary
//!   (`[3/4 running, 1 done, 0 failed]`, redrawn with `\r`) follows the
//!   lines; [`run_submit`] never writes it, so a pipe or a file gets plain
//!   lines only;
//! * **outcome**: [`SubmitOutcome::Succeeded`] once every slot has an
//!   executor that exited 0; [`SubmitOutcome::SlotsFailed`] once at least
//!   one slot failed and no slot can change any more;
//!   [`SubmitOutcome::FailedOver`] when another instance took the framework
//!   over; [`SubmitOutcome::Interrupted`] on the shutdown signal. The
//!   framework is never torn down: after an interruption its executors keep
//!   running within the failover timeout, and a second `regent submit` with
//!   the same `--framework-id` and spec subscribes, re-declares, and the
//!   master adopts them. Before returning, the node closes its connections
//!   (flushed) and waits briefly for them to end.
//!
//! Slot rules: see [`regent_core::progress`]. Limitation (from there): a
//! `SlotFailed` sent while this daemon was not subscribed is not repeated
//! by the master, and a snapshot cannot tell an exhausted slot from one
//! awaiting a retry; the daemon then keeps waiting (interrupt it; the
//! framework stays adoptable).
//!
//! Security: a master address that is not loopback is refused without a
//! cluster secret unless `insecure` ([`check_exposure`]) — the configured
//! masters before anything is dialled (an error naming the address), and
//! every master learned later at dial time (that dial fails, naming it).
//!
//! [`check_exposure`]: crate::net::check_exposure

use crate::net::{spawn_connection, ConnHandle, DialError, NetConfig, NetEvent};
use async_channel::{Receiver, Sender};
use regent_core::auth::Side;
use regent_core::ids::InstanceId;
use regent_core::job::JobSpec;
use regent_core::node::submit::{DialId, DialResult, Input, Output, SubmitExit};
use regent_core::node::SubmitNode;
use regent_core::protocol::GroupSpec;
use regent_core::{Addr, ConnId, Millis};
use regent_std::pumps::subscriber::{
    check_configured_masters, check_masters_given, check_options, main_group, submit_node_config,
    Screen,
};
use smol::future;
use smol::net::TcpStream;
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

pub use regent_std::pumps::subscriber::{DIAL_TIMEOUT, GROUP};

/// Everything `regent submit` was asked to do: the options of the blocking
/// subscriber pump, the same fields (the cluster, the masters, `--name`,
/// `--framework-id`, `--failover-timeout`, `--executors`, `--cores`,
/// `--memory`, the command after `--`, the connection settings and
/// `--insecure`).
pub use regent_std::pumps::SubscriberConfig as SubmitOptions;

/// How a submission ended (shared with the blocking pump).
pub use regent_core::progress::SubmitOutcome;

/// Runs a submission until it ends (see the module documentation), writing
/// its progress to `out` as plain lines only (no live progress line); the
/// same as [`run_submit_with_progress`] with `progress = false`.
///
/// `shutdown`: a message on it, or its closing (`Sender::close`, or every
/// sender dropped), interrupts the submission
/// ([`SubmitOutcome::Interrupted`]), as `regent`'s Ctrl-C handler closes it.
/// Keep a sender alive for as long as the submission should run.
///
/// Errors: invalid options, a configured master refused by
/// [`check_exposure`] (naming the address), a declaration the master
/// refused, or the machine stopping for another reason than a failover
/// (e.g. the framework was torn down by an operator). Write errors on `out`
/// are ignored (a closed pipe does not stop the framework).
///
/// [`check_exposure`]: crate::net::check_exposure
pub async fn run_submit(
    opts: SubmitOptions,
    out: impl Write + Send,
    shutdown: Receiver<()>,
) -> Result<SubmitOutcome, RunError> {
    run_submit_with_progress(opts, out, shutdown, false).await
}

/// Why a submission ([`run_submit`], [`run_job_with_progress`]) failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Invalid options (no master given, a bad group size...).
    #[error(transparent)]
    Options(#[from] regent_std::pumps::PumpError),
    /// The job is not valid (names the group and the key).
    #[error(transparent)]
    Job(#[from] regent_core::job::JobError),
    /// A configured master was refused by the exposure rule or could not
    /// be resolved, or the instance id could not be made durable.
    #[error(transparent)]
    Host(#[from] regent_std::host::HostError),
    /// `--callback` would listen beyond loopback without a cluster secret
    /// or `--insecure`.
    #[error("--callback {listen}: {source}")]
    CallbackExposed {
        /// The address asked for.
        listen: std::net::SocketAddr,
        /// The exposure rule's refusal.
        source: regent_std::net::NetError,
    },
    /// The callback listener could not listen.
    #[error(transparent)]
    Callback(#[from] crate::net::CallbackError),
    /// The submission ended without success (a declaration refused, the
    /// framework torn down...): the subscriber's reason.
    #[error(transparent)]
    Ended(#[from] regent_core::progress::SubmitError),
}

crate::error::into_report!(RunError);

/// [`run_submit`], and with `progress` also a live one-line summary
/// (`[3/4 running, 1 done, 0 failed]`) redrawn with `\r` under the plain
/// lines. Pass `progress = true` only when `out` is a terminal, e.g.
/// `run_submit_with_progress(opts, std::io::stdout(), shutdown,
/// std::io::IsTerminal::is_terminal(&std::io::stdout()))`; a pipe or a file
/// must get plain lines only.
pub async fn run_submit_with_progress(
    opts: SubmitOptions,
    out: impl Write + Send,
    shutdown: Receiver<()>,
    progress: bool,
) -> Result<SubmitOutcome, RunError> {
    check_options(&opts)?;
    let group = main_group(&opts);
    follow(opts, vec![group], out, shutdown, progress).await
}

/// `regent run JOB.toml`: [`run_submit_with_progress`] of a job's groups
/// instead of the one group `main`. The framework is named after the job;
/// `opts`' `name`, `executors`, `cores`, `memory_mb`, `command` and `env`
/// are not used. The job is validated first ([`JobSpec::validate`], its
/// error returned as it is); then every group is declared, in order, and
/// followed to the end like a submission's (it succeeds once every slot of
/// every group exited 0).
pub async fn run_job_with_progress(
    mut opts: SubmitOptions,
    job: &JobSpec,
    out: impl Write + Send,
    shutdown: Receiver<()>,
    progress: bool,
) -> Result<SubmitOutcome, RunError> {
    job.validate()?;
    check_masters_given(&opts)?;
    opts.name = job.name.clone();
    opts.tenant = job.tenant.clone();
    follow(opts, job.groups_to_declare(), out, shutdown, progress).await
}

/// Subscribes, declares `groups` and follows them (the module
/// documentation); `opts` were checked.
async fn follow(
    opts: SubmitOptions,
    groups: Vec<GroupSpec>,
    out: impl Write + Send,
    shutdown: Receiver<()>,
    progress: bool,
) -> Result<SubmitOutcome, RunError> {
    // Resolving blocks: on the blocking pool.
    let checked = opts.clone();
    smol::unblock(move || check_configured_masters(&checked)).await?;

    // Durable (an fsync) before it is used: on the blocking pool.
    let state_dir = opts.state_dir.clone();
    let instance = InstanceId(
        smol::unblock(move || regent_std::host::next_instance_id(state_dir.as_deref())).await?,
    );
    let mut config = submit_node_config(&opts, instance);
    // The callback listener (docs/design.md#seed-002): a new leader dials it.
    let (accept_rx, _listener) = match opts.callback {
        Some(listen) => {
            crate::net::check_exposure(&listen, opts.net.secret.is_some(), opts.insecure)
                .map_err(|source| RunError::CallbackExposed { listen, source })?;
            let (bound, rx, task) = crate::net::callback_listener(listen).await?;
            tracing::info!(listen = %bound, "callback listener");
            config.subscriber.callback = Some(Addr::new(bound.to_string()));
            (rx, Some(task))
        }
        None => (async_channel::unbounded().1, None),
    };
    let (net_tx, net_rx) = async_channel::unbounded();
    let (dial_tx, dial_rx) = async_channel::unbounded();
    let mut pump = Pump {
        node: SubmitNode::new(config),
        clock: crate::RuntimeClock::start(),
        net: opts.net.clone(),
        insecure: opts.insecure,
        net_tx,
        dial_tx,
        conns: HashMap::new(),
        next_conn: 1,
        screen: Screen::new(out, progress),
        exit: None,
    };
    pump.feed(Input::Start);
    for group in groups {
        pump.feed(Input::Declare(group));
    }

    // Once interrupted, the shutdown channel is not listened to again (a
    // closed channel would wake the loop at once, forever).
    let mut interrupted = false;
    loop {
        if let Some(exit) = pump.exit.take() {
            return Ok(exit.outcome?);
        }
        let deadline = pump.clock.wake_at(pump.node.poll_timeout());
        let wake = future::or(
            future::or(
                future::or(async { net_rx.recv().await.map_or(Wake::Idle, Wake::Net) }, async {
                    dial_rx.recv().await.map_or(Wake::Idle, Wake::Dialled)
                }),
                async {
                    match accept_rx.recv().await {
                        Ok(stream) => Wake::Accepted(stream),
                        Err(_) => future::pending().await,
                    }
                },
            ),
            future::or(
                async {
                    if interrupted {
                        future::pending::<()>().await;
                    }
                    // A message or a closed channel: both mean stop.
                    let _ = shutdown.recv().await;
                    Wake::Shutdown
                },
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
        )
        .await;
        match wake {
            Wake::Net(NetEvent::Message { conn, msg }) => pump.feed(Input::Message { conn, msg }),
            // Only masters act on tokens: a token's holder that connected
            // here is closed.
            Wake::Net(NetEvent::Authenticated { conn, .. }) => {
                if let Some(c) = pump.conns.get(&conn) {
                    tracing::warn!(%conn, "closing a token's connection: only masters take tokens");
                    c.close();
                }
            }
            Wake::Net(NetEvent::Closed { conn, cause }) => {
                if pump.conns.remove(&conn).is_some() {
                    tracing::info!(%conn, reason = %cause, "connection closed");
                }
                pump.feed(Input::Closed { conn, how: cause.ended(), reason: cause.to_string() });
            }
            Wake::Dialled(d) => pump.on_dialled(d),
            Wake::Accepted(stream) => {
                let conn = ConnId(pump.next_conn);
                pump.next_conn += 1;
                let h = spawn_connection(
                    stream,
                    Side::Server,
                    conn,
                    pump.net.clone(),
                    pump.net_tx.clone(),
                );
                tracing::debug!(%conn, peer = %h.peer, "a master dialled the callback listener");
                pump.conns.insert(conn, h);
                pump.feed(Input::Accepted { conn });
            }
            Wake::Deadline => pump.feed(Input::Tick),
            Wake::Shutdown => {
                interrupted = true;
                pump.feed(Input::Interrupt);
            }
            // Both senders live in `pump`: cannot happen; harmless if it did.
            Wake::Idle => {}
        }
    }
}

enum Wake {
    Net(NetEvent),
    Dialled(Dialled),
    Accepted(TcpStream),
    Deadline,
    Shutdown,
    Idle,
}

/// A finished dial.
struct Dialled {
    dial: DialId,
    result: Result<crate::net::Dialled, DialError>,
}

/// The I/O pump around one `SubmitNode`, following the pump contract of
/// `regent_core::node` (one `handle` per input, outputs executed in order,
/// `poll_timeout` for the next deadline).
struct Pump<W: Write> {
    node: SubmitNode,
    clock: crate::RuntimeClock,
    net: Arc<NetConfig>,
    insecure: bool,
    net_tx: Sender<NetEvent>,
    dial_tx: Sender<Dialled>,
    /// Connections by the number given to the node.
    conns: HashMap<ConnId, ConnHandle>,
    next_conn: u64,
    screen: Screen<W>,
    exit: Option<SubmitExit>,
}

impl<W: Write> Pump<W> {
    /// One `handle` call and its outputs, in order.
    fn feed(&mut self, input: Input) {
        let now = self.clock.now();
        for output in self.node.handle(now, input) {
            match output {
                Output::Dial { dial, master, timeout } => self.dial(dial, master, timeout),
                Output::Send { conn, msg } => {
                    if let Some(h) = self.conns.get(&conn) {
                        h.send(msg);
                    }
                }
                Output::Close { conn, reason } => {
                    if let Some(h) = self.conns.remove(&conn) {
                        tracing::debug!(%conn, peer = %h.peer, %reason, "closing");
                        h.close();
                    }
                }
                Output::Show(show) => self.screen.show(&show),
                Output::Observed(action) => tracing::trace!(?action, "subscriber"),
                Output::Exit(exit) => self.exit = Some(exit),
                // The connections' timeouts scale with the master's heartbeat.
                Output::ConnTimeouts { heartbeat } => self.net.follow_heartbeat(Some(heartbeat)),
            }
        }
    }

    /// Starts a dial task; its result comes back as a [`Dialled`].
    fn dial(&mut self, dial: DialId, master: Addr, timeout: Millis) {
        let tx = self.dial_tx.clone();
        let has_secret = self.net.authenticates(regent_core::auth::Side::Client);
        let insecure = self.insecure;
        let timeout = Duration::from_millis(timeout.0);
        smol::spawn(async move {
            let result = crate::net::dial(&master, has_secret, insecure, true, timeout).await;
            let _ = tx.send(Dialled { dial, result }).await;
        })
        .detach();
    }

    fn on_dialled(&mut self, d: Dialled) {
        let result = match d.result {
            Ok(dialled) => {
                let conn = ConnId(self.next_conn);
                self.next_conn += 1;
                let peer = dialled.stream.peer_addr().ok().map(|a| Addr(a.to_string()));
                let h =
                    crate::net::spawn_dialled(dialled, conn, self.net.clone(), self.net_tx.clone());
                tracing::debug!(dial = %d.dial, %conn, peer = %h.peer, "connected");
                self.conns.insert(conn, h);
                DialResult::Connected { conn, peer }
            }
            Err(DialError { reason, refused }) => DialResult::Failed { reason, refused },
        };
        self.feed(Input::Dialled { dial: d.dial, result });
    }
}

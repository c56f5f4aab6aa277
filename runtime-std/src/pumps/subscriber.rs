//! The subscriber daemon on std threads: an I/O pump for
//! `regent_core::node::SubmitNode`, one framework with one executor group
//! followed to the end. The blocking twin of `regent_smol::submit`.
//!
//! One thread owns the node. It waits (`recv_timeout` until the node's next
//! deadline) for a frame, a finished dial or an interruption; makes one
//! `handle` call per input; executes every output in order: dial (a thread
//! per dial), send, close, show, exit. Finding the leader, closing before
//! resubscribing, backoff, the heartbeat watchdog, re-declaring, dial
//! generations, which connection events count, the progress of the slots,
//! what the user is shown and how the submission ends are the node's.
//!
//! What the pump adds:
//!
//! * **start**: a fresh instance id (OS entropy), `Start`, then `Declare` of
//!   the group [`GROUP`] (`executors` slots of `command`);
//! * **events**: every app-facing action of the subscriber machine
//!   (`Subscribed`, `ExecutorUpdate`, `SlotFailed`, `RequestAccepted`,
//!   `RequestRefused`, `Error`, `Disconnected`, `Exit`) is delivered, in
//!   order, on [`SubscriberHandle::events`]; [`describe`] renders one as a
//!   plain line;
//! * **output**: what the node shows, written by a [`Screen`] to the writer
//!   given to [`spawn_subscriber_with_output`] (the same lines as
//!   `regent_smol::submit`), and logged at debug level;
//! * **outcome** ([`SubscriberHandle::wait`]), as the node decides it
//!   (`regent_core::node::submit`): [`SubmitOutcome::Succeeded`] once every
//!   slot has an executor that exited 0; [`SubmitOutcome::SlotsFailed`] once
//!   a slot failed and no slot can change any more;
//!   [`SubmitOutcome::FailedOver`] when another instance took the framework
//!   over; [`SubmitOutcome::Interrupted`] after
//!   [`SubscriberHandle::interrupt`]. The framework is never torn down:
//!   after an interruption its executors keep running within the failover
//!   timeout and a new subscriber with the same framework id adopts them.

use super::{spawn_dial, DialError, PumpError, PumpThread, RuntimeClock, Stopper};
use crate::host::HostError;
use crate::net::{check_exposure, NetConfig, NetEvent};
use crate::pumps::conn::{spawn_connection, ConnHandle};
use regent_core::auth::Side;
use regent_core::ids::InstanceId;
use regent_core::node::submit::{
    Config, DialId, DialResult, Input as NodeInput, Output, Show, SubmitExit,
};
use regent_core::node::SubmitNode;
use regent_core::protocol::GroupSpec;
use regent_core::subscriber::{self, Action, SubscriberStatus};
use regent_core::{Addr, ConnId, FrameworkId, Millis};
use std::collections::HashMap;
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use regent_core::node::submit::{describe, describe_request, executor_line, state_text};

/// The name of the one executor group the pump declares.
pub const GROUP: &str = "main";

/// How long one dial (resolve and TCP connect) may take.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// What to submit (the flags of `regent submit`).
#[derive(Clone, Debug)]
pub struct SubscriberConfig {
    /// The cluster name sent in `Hello` (must match the masters').
    pub cluster: String,
    /// The configured masters, tried in order (more are learned from them).
    pub masters: Vec<Addr>,
    /// The framework's human-readable name.
    pub name: String,
    /// The framework id to resume or take over; `None` lets the master
    /// assign one.
    pub framework_id: Option<String>,
    /// How long the master keeps the framework's executors while no
    /// subscriber is connected.
    pub failover_timeout: Duration,
    /// Slots of the group [`GROUP`]; at least 1.
    pub executors: u32,
    /// Cores per executor.
    pub cores: u32,
    /// Memory per executor in MiB.
    pub memory_mb: u64,
    /// Program and arguments of every executor; not empty.
    pub command: Vec<String>,
    /// Environment variables of every executor, in order (`regent submit
    /// --env K=V`).
    pub env: Vec<(String, String)>,
    /// The group's policy (`regent submit --restart`, `--placement`,
    /// `--constraint`...).
    pub policy: regent_core::policy::GroupPolicy,
    /// What the worker does around each executor's process (`regent
    /// submit --cwd`, `--kill-grace`).
    pub launch: regent_core::launch::LaunchSpec,
    /// Connection settings (cluster secret, frame size, timeouts).
    pub net: Arc<NetConfig>,
    /// Accept non-loopback masters without a cluster secret.
    pub insecure: bool,
    /// How long to try for a first subscription before giving up with an
    /// error naming every master tried (`regent submit --connect-timeout`,
    /// default [`CONNECT_TIMEOUT`]); `None` tries for ever. Once
    /// subscribed, failovers are waited out whatever their length.
    pub connect_timeout: Option<Duration>,
    /// Where a callback listener binds (`regent submit --callback`): a new
    /// leader — even one at an address this submitter never knew — dials it
    /// to say it leads (docs/design.md#seed-002). The smol runtime runs it; `None`: none.
    pub callback: Option<std::net::SocketAddr>,
    /// Where the last instance id drawn is kept (`regent submit
    /// --state-dir`, default [`crate::host::default_state_dir`]), so the
    /// next submitter with that directory is newer even after the wall
    /// clock stepped back ([`crate::host::next_instance_id`]). `None`: the
    /// instance id is the clock's alone.
    pub state_dir: Option<std::path::PathBuf>,
    /// Declare the groups as updates with this `max_parallel` (`regent
    /// run --update`; [`regent_core::subscriber::Config::update`]): a group
    /// declared before with another spec is replaced slot by slot.
    pub update: Option<u32>,
    /// Leave a done submission's framework to its failover timeout
    /// (`regent submit --keep`) instead of ending it at once
    /// ([`regent_core::node::submit::Config::keep`]).
    pub keep: bool,
    /// The tenant a new framework belongs to (a job file's `tenant`;
    /// docs/tenants.md). `None`: the credential's, else `default`.
    pub tenant: Option<String>,
}

/// The default of `--connect-timeout`: how long a client tries to reach a
/// first master.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

pub use regent_core::progress::{SubmitError, SubmitOutcome};

enum Input {
    Net(NetEvent),
    Dialled { dial: DialId, result: Result<TcpStream, DialError> },
    Interrupt,
}

/// A running submission. Dropping it interrupts the submission and waits
/// for the pump to end.
#[derive(Debug)]
pub struct SubscriberHandle {
    instance: InstanceId,
    events: Receiver<Action>,
    status: Arc<Mutex<SubscriberStatus>>,
    pump: PumpThread<SubmitOutcome, SubmitError>,
}

impl SubscriberHandle {
    /// This process's instance id (fresh per submission).
    pub fn instance(&self) -> InstanceId {
        self.instance
    }

    /// The machine's app-facing actions, in order. The channel ends
    /// (disconnects) when the pump has ended.
    pub fn events(&self) -> &Receiver<Action> {
        &self.events
    }

    /// What the machine shows an observer (subscribed, the master, the
    /// framework id once known...).
    pub fn status(&self) -> SubscriberStatus {
        self.status.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Interrupts the submission ([`SubmitOutcome::Interrupted`]); returns
    /// at once.
    pub fn interrupt(&self) {
        self.pump.stop.stop();
    }

    /// A handle that interrupts the submission, usable from another thread.
    pub fn stopper(&self) -> Stopper {
        self.pump.stop.clone()
    }

    /// `true` once the pump has ended.
    pub fn is_finished(&self) -> bool {
        self.pump.is_finished()
    }

    /// Waits for the outcome. Errors: a declaration the master refused, or
    /// the machine stopping for another reason than a takeover (e.g. an
    /// operator tore the framework down).
    pub fn wait(mut self) -> Result<SubmitOutcome, SubmitError> {
        self.pump.join().unwrap_or_else(|| Err(SubmitError::Runtime("already waited for".into())))
    }
}

/// Starts a submission on a thread of its own, showing nothing (its lines
/// go to the debug log; follow it through [`SubscriberHandle::events`]).
/// Fails at once on invalid options or a configured master refused by
/// [`check_exposure`].
pub fn spawn_subscriber(cfg: SubscriberConfig) -> Result<SubscriberHandle, PumpError> {
    spawn_subscriber_with_output(cfg, std::io::sink(), false)
}

/// [`spawn_subscriber`], writing what the submission shows to `out` as
/// plain lines, and with `progress` also a live one-line summary redrawn
/// with `\r` (pass `true` only when `out` is a terminal). Write errors are
/// ignored (a closed pipe does not stop the framework).
pub fn spawn_subscriber_with_output(
    cfg: SubscriberConfig,
    out: impl Write + Send + 'static,
    progress: bool,
) -> Result<SubscriberHandle, PumpError> {
    check_options(&cfg)?;
    check_configured_masters(&cfg)?;
    let instance = InstanceId(crate::host::next_instance_id(cfg.state_dir.as_deref())?);
    let (config, spec) = node_config(&cfg, instance);
    let (tx, rx) = mpsc::channel();
    let (etx, erx) = mpsc::channel();
    let node = SubmitNode::new(config);
    let status = Arc::new(Mutex::new(node.status()));
    let pump = Pump {
        node,
        clock: RuntimeClock::start(),
        status: status.clone(),
        net: cfg.net.clone(),
        insecure: cfg.insecure,
        tx: tx.clone(),
        events: etx,
        conns: HashMap::new(),
        next_conn: 1,
        screen: Screen::new(out, progress),
        exit: None,
    };
    tracing::info!(
        %instance,
        executors = cfg.executors,
        command = ?cfg.command,
        "submitting"
    );
    let thread = std::thread::Builder::new()
        .name("regent-subscriber".into())
        .spawn(move || pump.run(rx, spec))
        .map_err(|source| PumpError::Thread { what: "subscriber", source })?;
    let stop_tx = tx;
    let stop = Stopper::new(move || {
        let _ = stop_tx.send(Input::Interrupt);
    });
    let pump = PumpThread::new("subscriber", stop, thread);
    Ok(SubscriberHandle { instance, events: erx, status, pump })
}

/// Checks the options of a submission, before anything is resolved or
/// dialled (shared with `regent_smol::submit`).
pub fn check_options(cfg: &SubscriberConfig) -> Result<(), PumpError> {
    check_masters_given(cfg)?;
    if cfg.executors == 0 {
        return Err(PumpError::Options("--executors must be at least 1"));
    }
    if cfg.command.is_empty() {
        return Err(PumpError::Options("no command given (after --)"));
    }
    Ok(())
}

/// Refuses options without a master (`regent run` checks only this: its
/// groups come from the job file, checked by the job's validation).
pub fn check_masters_given(cfg: &SubscriberConfig) -> Result<(), PumpError> {
    if cfg.masters.is_empty() {
        return Err(PumpError::Options("no master given (--masters)"));
    }
    Ok(())
}

/// Refuses a configured master that resolves to an address refused by
/// [`check_exposure`], naming it (blocking: it resolves the names). An
/// address that does not resolve now is checked again at dial time.
pub fn check_configured_masters(cfg: &SubscriberConfig) -> Result<(), HostError> {
    let has_secret = cfg.net.secret.is_some();
    for m in &cfg.masters {
        if let Ok(addrs) = m.as_str().to_socket_addrs() {
            for a in addrs {
                check_exposure(&a, has_secret, cfg.insecure)
                    .map_err(|source| HostError::MasterExposed { master: m.clone(), source })?;
            }
        }
    }
    Ok(())
}

/// The submit node's configuration for instance `instance`, and the
/// declaration of [`GROUP`] to feed it after `Start` (shared with
/// `regent_smol::submit`).
pub fn node_config(cfg: &SubscriberConfig, instance: InstanceId) -> (Config, GroupSpec) {
    (submit_node_config(cfg, instance), main_group(cfg))
}

/// The submit node's configuration for instance `instance`: the cluster,
/// the masters, the framework's name and id, the timeouts (the groups are
/// declared apart, [`main_group`] or a job's).
pub fn submit_node_config(cfg: &SubscriberConfig, instance: InstanceId) -> Config {
    let mut sub = subscriber::Config::new(
        cfg.cluster.clone(),
        cfg.name.clone(),
        instance,
        cfg.masters.clone(),
    );
    sub.framework = cfg.framework_id.clone().map(FrameworkId::new);
    sub.failover_timeout = Millis(cfg.failover_timeout.as_millis() as u64);
    sub.update = cfg.update;
    sub.tenant = cfg.tenant.clone();
    let mut config = Config::new(sub);
    config.dial_timeout = Millis(DIAL_TIMEOUT.as_millis() as u64);
    config.connect_timeout = cfg.connect_timeout.map(|d| Millis(d.as_millis() as u64));
    config.keep = cfg.keep;
    config
}

/// The one group `regent submit` declares: [`GROUP`], `executors` slots of
/// `command` with `env`, `cores`, `memory_mb`, `policy` and `launch`.
pub fn main_group(cfg: &SubscriberConfig) -> GroupSpec {
    GroupSpec {
        group: GROUP.to_owned(),
        slots: cfg.executors,
        command: cfg.command.clone(),
        env: cfg.env.clone(),
        cores: cfg.cores,
        memory_mb: cfg.memory_mb,
        policy: cfg.policy.clone(),
        launch: Box::new(cfg.launch.clone()),
    }
}

/// Writes what a submit node shows ([`Show`]): plain lines, and on a
/// terminal the live progress summary redrawn in place. Shared with
/// `regent_smol::submit`. Write errors are ignored.
pub struct Screen<W: Write> {
    out: W,
    progress: bool,
    /// The progress text currently drawn (progress mode only).
    drawn: Option<String>,
}

impl<W: Write> std::fmt::Debug for Screen<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Screen")
            .field("progress", &self.progress)
            .field("drawn", &self.drawn)
            .finish_non_exhaustive()
    }
}

impl<W: Write> Screen<W> {
    /// Writes to `out`; with `progress` (a terminal) also the live summary.
    pub fn new(out: W, progress: bool) -> Self {
        Screen { out, progress, drawn: None }
    }

    /// Shows one thing: a line (clearing the summary first, if drawn), or
    /// the summary (progress mode only, when it changed on screen).
    pub fn show(&mut self, show: &Show) {
        match show {
            Show::Line(text) => {
                if self.drawn.take().is_some() {
                    let _ = write!(self.out, "\r\x1b[K");
                }
                let _ = writeln!(self.out, "{text}");
            }
            Show::Progress(text) => {
                if !self.progress || self.drawn.as_ref() == Some(text) {
                    return;
                }
                let _ = write!(self.out, "\r\x1b[K{text}");
                self.drawn = Some(text.clone());
            }
        }
        let _ = self.out.flush();
    }

    /// The writer.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// The I/O pump around one `SubmitNode`, following the pump contract of
/// `regent_core::node` (one `handle` per input, outputs executed in order,
/// `poll_timeout` for the next deadline).
struct Pump<W: Write> {
    node: SubmitNode,
    clock: RuntimeClock,
    status: Arc<Mutex<SubscriberStatus>>,
    net: Arc<NetConfig>,
    insecure: bool,
    tx: Sender<Input>,
    events: Sender<Action>,
    /// Connections by the number given to the node.
    conns: HashMap<ConnId, ConnHandle>,
    next_conn: u64,
    screen: Screen<W>,
    exit: Option<SubmitExit>,
}

impl<W: Write> Pump<W> {
    fn run(mut self, rx: Receiver<Input>, spec: GroupSpec) -> Result<SubmitOutcome, SubmitError> {
        self.feed(NodeInput::Start);
        self.feed(NodeInput::Declare(spec));
        let exit = loop {
            if let Some(exit) = self.exit.take() {
                break exit;
            }
            let input = match self.clock.wait_for(self.node.poll_timeout()) {
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(left) => rx.recv_timeout(left),
            };
            match input {
                Ok(Input::Net(NetEvent::Message { conn, msg })) => {
                    self.feed(NodeInput::Message { conn, msg })
                }
                // Only masters act on tokens: a token's holder that
                // connected here is closed.
                Ok(Input::Net(NetEvent::Authenticated { conn, .. })) => {
                    if let Some(c) = self.conns.get(&conn) {
                        tracing::warn!(%conn, "closing a token's connection: only masters take tokens");
                        c.close();
                    }
                }
                Ok(Input::Net(NetEvent::Closed { conn, cause })) => {
                    if self.conns.remove(&conn).is_some() {
                        tracing::info!(%conn, reason = %cause, "connection closed");
                    }
                    self.feed(NodeInput::Closed {
                        conn,
                        how: cause.ended(),
                        reason: cause.to_string(),
                    })
                }
                Ok(Input::Dialled { dial, result }) => self.on_dialled(dial, result),
                Ok(Input::Interrupt) => self.feed(NodeInput::Interrupt),
                Err(RecvTimeoutError::Timeout) => self.feed(NodeInput::Tick),
                // The pump holds a sender: cannot happen.
                Err(RecvTimeoutError::Disconnected) => self.feed(NodeInput::Interrupt),
            }
        };
        match &exit.outcome {
            Ok(o) => tracing::info!(outcome = ?o, "submission ended"),
            Err(e) => tracing::warn!("submission ended: {e}"),
        }
        exit.outcome
    }

    /// One `handle` call and its outputs, in order.
    fn feed(&mut self, input: NodeInput) {
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
                Output::Show(show) => {
                    if let Show::Line(line) = &show {
                        tracing::debug!("{line}");
                    }
                    self.screen.show(&show);
                }
                Output::Observed(action) => {
                    let _ = self.events.send(action);
                }
                Output::Exit(exit) => self.exit = Some(exit),
                // The connections' timeouts scale with the master's heartbeat.
                Output::ConnTimeouts { heartbeat } => self.net.follow_heartbeat(Some(heartbeat)),
            }
        }
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = self.node.status();
    }

    /// Starts a dial thread; its result comes back as [`Input::Dialled`].
    fn dial(&mut self, dial: DialId, master: Addr, timeout: Millis) {
        let tx = self.tx.clone();
        let started = spawn_dial(
            master,
            self.net.secret.is_some(),
            self.insecure,
            true,
            Duration::from_millis(timeout.0),
            move |_, result| {
                let _ = tx.send(Input::Dialled { dial, result });
            },
        );
        if !started {
            let err = DialError { reason: "cannot start a dial thread".into(), refused: false };
            let _ = self.tx.send(Input::Dialled { dial, result: Err(err) });
        }
    }

    fn on_dialled(&mut self, dial: DialId, result: Result<TcpStream, DialError>) {
        let stream = match result {
            Ok(s) => s,
            Err(DialError { reason, refused }) => {
                let result = DialResult::Failed { reason, refused };
                return self.feed(NodeInput::Dialled { dial, result });
            }
        };
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        let tx = self.tx.clone();
        let peer = stream.peer_addr().ok().map(|a| Addr(a.to_string()));
        let result =
            match spawn_connection(stream, Side::Client, conn, self.net.clone(), move |e| {
                let _ = tx.send(Input::Net(e));
            }) {
                Ok(h) => {
                    tracing::debug!(%dial, %conn, peer = %h.peer, "connected");
                    self.conns.insert(conn, h);
                    DialResult::Connected { conn, peer }
                }
                Err(e) => DialResult::Failed {
                    reason: format!("cannot start a connection: {e}"),
                    refused: false,
                },
            };
        self.feed(NodeInput::Dialled { dial, result });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_drawn_only_on_a_terminal_and_cleared_before_lines() {
        let progress = |t: &str| Show::Progress(t.into());
        let line = |t: &str| Show::Line(t.into());
        let mut plain = Screen::new(Vec::new(), false);
        plain.show(&line("a"));
        plain.show(&progress("[0/1 running, 0 done, 0 failed]"));
        plain.show(&line("b"));
        assert_eq!(plain.into_inner(), b"a\nb\n");
        let mut tty = Screen::new(Vec::new(), true);
        tty.show(&progress("[0/1 running, 0 done, 0 failed]"));
        tty.show(&progress("[0/1 running, 0 done, 0 failed]"));
        tty.show(&line("a"));
        tty.show(&progress("[1/1 running, 0 done, 0 failed]"));
        let text = String::from_utf8(tty.into_inner()).unwrap();
        assert_eq!(
            text,
            "\r\x1b[K[0/1 running, 0 done, 0 failed]\r\x1b[Ka\n\r\x1b[K[1/1 running, 0 done, 0 failed]"
        );
    }
}

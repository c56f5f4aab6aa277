//! The subscriber daemon on std threads: one framework with one executor
//! group, followed to the end. The blocking twin of `regent_smol::submit`.
//!
//! One thread drives the pure [`Subscriber`] machine: it waits for a frame,
//! a finished dial, a timer deadline or an interruption; makes one `handle`
//! call per input; executes every action in order. Finding the leader,
//! closing before resubscribing, backoff, the heartbeat watchdog,
//! re-declaring and stopping on a takeover are the machine's.
//!
//! What the driver adds is the embedding program's side:
//!
//! * **start**: a fresh instance id (OS entropy), `Start`, then `Declare` of
//!   the group [`GROUP`] (`executors` slots of `command`);
//! * **events**: every app-facing action of the machine (`Subscribed`,
//!   `ExecutorUpdate`, `SlotFailed`, `RequestAccepted`, `RequestRefused`,
//!   `Error`, `Disconnected`, `Exit`) is delivered, in order, on
//!   [`SubscriberHandle::events`]; [`describe`] renders one as a plain line;
//! * **outcome** ([`SubscriberHandle::wait`]), by the slot rules of
//!   [`regent_core::progress`] (shared with `regent submit`):
//!   [`SubmitOutcome::Succeeded`] once every slot has an
//!   executor that exited 0; [`SubmitOutcome::SlotsFailed`] once a slot
//!   failed and no slot can change any more; [`SubmitOutcome::FailedOver`]
//!   when another instance took the framework over;
//!   [`SubmitOutcome::Interrupted`] after [`SubscriberHandle::interrupt`].
//!   The framework is never torn down: after an interruption its executors
//!   keep running within the failover timeout and a new subscriber with the
//!   same framework id adopts them.

use super::{millis_since, spawn_dial, DialError, DriverThread, Stopper};
use crate::net::{check_exposure, spawn_connection, ConnHandle, NetConfig, NetEvent};
use regent_core::auth::Side;
use regent_core::ids::InstanceId;
use regent_core::progress::GroupProgress;
use regent_core::protocol::{ExecutorInfo, ExecutorState, GroupSpec};
use regent_core::subscriber::{
    Action, Config, Event, Request, Subscriber, SubscriberStatus, Timer,
};
use regent_core::{Addr, ConnId, FrameworkId, Millis};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The name of the one executor group the driver declares.
pub const GROUP: &str = "main";

/// How long one dial (resolve and TCP connect) may take.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the driver waits for its connection to close before it ends.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

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
    /// Connection settings (cluster secret, frame size, timeouts).
    pub net: Arc<NetConfig>,
    /// Accept non-loopback masters without a cluster secret.
    pub insecure: bool,
}

pub use regent_core::progress::SubmitOutcome;

enum Input {
    Net(NetEvent),
    Dialled { master: Addr, dial: u64, result: Result<TcpStream, DialError> },
    Interrupt,
}

/// A running submission. Dropping it interrupts the submission and waits
/// for the driver to end.
#[derive(Debug)]
pub struct SubscriberHandle {
    instance: InstanceId,
    events: Receiver<Action>,
    status: Arc<Mutex<SubscriberStatus>>,
    driver: DriverThread<SubmitOutcome>,
}

impl SubscriberHandle {
    /// This process's instance id (fresh per submission).
    pub fn instance(&self) -> InstanceId {
        self.instance
    }

    /// The machine's app-facing actions, in order. The channel ends
    /// (disconnects) when the driver has ended.
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
        self.driver.stop.stop();
    }

    /// A handle that interrupts the submission, usable from another thread.
    pub fn stopper(&self) -> Stopper {
        self.driver.stop.clone()
    }

    /// `true` once the driver has ended.
    pub fn is_finished(&self) -> bool {
        self.driver.is_finished()
    }

    /// Waits for the outcome. Errors: a declaration the master refused, or
    /// the machine stopping for another reason than a takeover (e.g. an
    /// operator tore the framework down).
    pub fn wait(mut self) -> Result<SubmitOutcome, String> {
        self.driver.join().unwrap_or_else(|| Err("already waited for".into()))
    }
}

/// Starts a submission on a thread of its own. Fails at once on invalid
/// options or a configured master refused by [`check_exposure`].
pub fn spawn_subscriber(cfg: SubscriberConfig) -> Result<SubscriberHandle, String> {
    check_options(&cfg)?;
    check_configured_masters(&cfg)?;
    let instance = InstanceId(crate::net::time_ordered_id());
    let (config, spec) = machine_config(&cfg, instance);
    let (tx, rx) = mpsc::channel();
    let (etx, erx) = mpsc::channel();
    let machine = Subscriber::new(config);
    let status = Arc::new(Mutex::new(machine.status()));
    let d = Daemon {
        machine,
        start: Instant::now(),
        status: status.clone(),
        net: cfg.net.clone(),
        insecure: cfg.insecure,
        tx: tx.clone(),
        events: etx,
        next_conn: 1,
        next_dial: 1,
        dialling: HashMap::new(),
        live: HashMap::new(),
        conn_master: HashMap::new(),
        closing: BTreeSet::new(),
        timers: BTreeMap::new(),
        progress: GroupProgress::new(GROUP, cfg.executors),
        outcome: None,
    };
    tracing::info!(
        %instance,
        executors = cfg.executors,
        command = ?cfg.command,
        "submitting"
    );
    let thread = std::thread::Builder::new()
        .name("regent-subscriber".into())
        .spawn(move || d.run(rx, spec))
        .map_err(|e| format!("cannot start the subscriber thread: {e}"))?;
    let stop_tx = tx;
    let stop = Stopper::new(move || {
        let _ = stop_tx.send(Input::Interrupt);
    });
    let driver = DriverThread::new("subscriber", stop, thread);
    Ok(SubscriberHandle { instance, events: erx, status, driver })
}

/// Checks the options of a submission, before anything is resolved or
/// dialled (shared with `regent_smol::submit`).
pub fn check_options(cfg: &SubscriberConfig) -> Result<(), String> {
    if cfg.masters.is_empty() {
        return Err("no master given (--masters)".into());
    }
    if cfg.executors == 0 {
        return Err("--executors must be at least 1".into());
    }
    if cfg.command.is_empty() {
        return Err("no command given (after --)".into());
    }
    Ok(())
}

/// Refuses a configured master that resolves to an address refused by
/// [`check_exposure`], naming it (blocking: it resolves the names). An
/// address that does not resolve now is checked again at dial time.
pub fn check_configured_masters(cfg: &SubscriberConfig) -> Result<(), String> {
    let has_secret = cfg.net.secret.is_some();
    for m in &cfg.masters {
        if let Ok(addrs) = m.as_str().to_socket_addrs() {
            for a in addrs {
                check_exposure(&a, has_secret, cfg.insecure)
                    .map_err(|e| format!("master {m}: {e}"))?;
            }
        }
    }
    Ok(())
}

/// The subscriber machine's configuration for instance `instance`, and the
/// declaration of [`GROUP`] to feed it after `Start`.
pub fn machine_config(cfg: &SubscriberConfig, instance: InstanceId) -> (Config, GroupSpec) {
    let mut config =
        Config::new(cfg.cluster.clone(), cfg.name.clone(), instance, cfg.masters.clone());
    config.framework = cfg.framework_id.clone().map(FrameworkId::new);
    config.failover_timeout = Millis(cfg.failover_timeout.as_millis() as u64);
    let spec = GroupSpec {
        group: GROUP.to_owned(),
        slots: cfg.executors,
        command: cfg.command.clone(),
        env: vec![],
        cores: cfg.cores,
        memory_mb: cfg.memory_mb,
    };
    (config, spec)
}

struct Daemon {
    machine: Subscriber,
    start: Instant,
    status: Arc<Mutex<SubscriberStatus>>,
    net: Arc<NetConfig>,
    insecure: bool,
    tx: Sender<Input>,
    events: Sender<Action>,
    next_conn: u64,
    next_dial: u64,
    /// Dials in progress, by master: the dial's number (a result with
    /// another number was abandoned by a `Close`).
    dialling: HashMap<Addr, u64>,
    /// Open connections the machine knows, by master.
    live: HashMap<Addr, ConnHandle>,
    conn_master: HashMap<ConnId, Addr>,
    /// Connections we closed whose end we have not seen yet.
    closing: BTreeSet<ConnId>,
    timers: BTreeMap<Timer, Millis>,
    /// The slots of [`GROUP`] and how the submission ends.
    progress: GroupProgress,
    outcome: Option<Result<SubmitOutcome, String>>,
}

impl Daemon {
    fn run(mut self, rx: Receiver<Input>, spec: GroupSpec) -> Result<SubmitOutcome, String> {
        self.feed(Event::Start);
        self.feed(Event::Declare(spec));
        let outcome = loop {
            if let Some(outcome) = self.outcome.take() {
                break outcome;
            }
            let input = match super::wait_for(self.start, self.timers.values().min().copied()) {
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(left) => rx.recv_timeout(left),
            };
            match input {
                Ok(Input::Net(ev)) => self.on_net(ev),
                Ok(Input::Dialled { master, dial, result }) => {
                    self.on_dialled(master, dial, result)
                }
                Ok(Input::Interrupt) => self.outcome = Some(Ok(SubmitOutcome::Interrupted)),
                Err(RecvTimeoutError::Timeout) => self.fire_due(),
                // The daemon holds a sender: cannot happen.
                Err(RecvTimeoutError::Disconnected) => {
                    self.outcome = Some(Ok(SubmitOutcome::Interrupted))
                }
            }
        };
        self.close_all(&rx);
        match &outcome {
            Ok(o) => tracing::info!(outcome = ?o, "submission ended"),
            Err(e) => tracing::warn!("submission ended: {e}"),
        }
        outcome
    }

    /// One `handle` call and its actions.
    fn feed(&mut self, event: Event) {
        if self.outcome.is_some() {
            return;
        }
        tracing::trace!(?event, "subscriber event");
        let actions = self.machine.handle(millis_since(self.start), event);
        for action in actions {
            self.execute(action);
        }
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = self.machine.status();
        if self.outcome.is_none() {
            self.outcome = self.progress.outcome();
        }
    }

    fn execute(&mut self, action: Action) {
        tracing::trace!(?action, "subscriber action");
        match action {
            Action::Connect { master } => self.dial(master),
            Action::Send { to, msg } => {
                if let Some(h) = self.live.get(&to) {
                    h.send(msg);
                }
            }
            Action::Close { master, reason } => {
                tracing::debug!(%master, %reason, "closing");
                self.dialling.remove(&master);
                if let Some(h) = self.live.remove(&master) {
                    self.conn_master.remove(&h.conn);
                    self.closing.insert(h.conn);
                    h.close();
                }
            }
            Action::SetTimer { timer, at } => {
                self.timers.insert(timer, at);
            }
            Action::CancelTimer { timer } => {
                self.timers.remove(&timer);
            }
            app => {
                self.progress.observe(&app);
                if let Some(line) = describe(&app) {
                    tracing::debug!("{line}");
                }
                let _ = self.events.send(app);
            }
        }
    }

    /// Starts a dial thread; its result comes back as [`Input::Dialled`].
    fn dial(&mut self, master: Addr) {
        let dial = self.next_dial;
        self.next_dial += 1;
        self.dialling.insert(master.clone(), dial);
        let tx = self.tx.clone();
        let has_secret = self.net.secret.is_some();
        let started = spawn_dial(
            master.clone(),
            has_secret,
            self.insecure,
            true,
            DIAL_TIMEOUT,
            move |master, result| {
                let _ = tx.send(Input::Dialled { master, dial, result });
            },
        );
        if !started {
            self.dialling.remove(&master);
            self.feed(Event::ConnectFailed { master });
        }
    }

    fn on_dialled(&mut self, master: Addr, dial: u64, result: Result<TcpStream, DialError>) {
        if self.dialling.get(&master) != Some(&dial) {
            return; // abandoned by a Close: the stream (if any) drops here
        }
        self.dialling.remove(&master);
        let stream = match result {
            Ok(s) => s,
            Err(e) => {
                tracing::info!(%master, reason = %e.reason, "cannot reach master");
                self.feed(Event::ConnectFailed { master });
                return;
            }
        };
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        let tx = self.tx.clone();
        match spawn_connection(stream, Side::Client, conn, self.net.clone(), move |e| {
            let _ = tx.send(Input::Net(e));
        }) {
            Ok(h) => {
                tracing::debug!(%master, %conn, peer = %h.peer, "connected");
                self.conn_master.insert(conn, master.clone());
                self.live.insert(master.clone(), h);
                self.feed(Event::Connected { master });
            }
            Err(e) => {
                tracing::warn!(%master, "cannot start a connection: {e}");
                self.feed(Event::ConnectFailed { master });
            }
        }
    }

    fn on_net(&mut self, ev: NetEvent) {
        match ev {
            NetEvent::Message { conn, msg } => {
                let Some(from) = self.conn_master.get(&conn).cloned() else {
                    return; // a connection we closed: fed nothing more
                };
                self.feed(Event::Message { from, msg });
            }
            NetEvent::Closed { conn, reason } => {
                self.closing.remove(&conn);
                let Some(master) = self.conn_master.remove(&conn) else {
                    return; // closed by us: the machine knows
                };
                tracing::info!(%master, %reason, "connection closed");
                self.live.remove(&master);
                self.feed(Event::Disconnected { master });
            }
        }
    }

    /// Feeds every timer whose deadline passed, earliest first.
    fn fire_due(&mut self) {
        let now = millis_since(self.start);
        let mut due: Vec<(Millis, Timer)> =
            self.timers.iter().filter(|(_, at)| **at <= now).map(|(t, at)| (*at, *t)).collect();
        due.sort();
        for (_, timer) in due {
            self.timers.remove(&timer);
            self.feed(Event::Timer(timer));
        }
    }

    /// Closes every connection (flushing what was queued) and abandons the
    /// dials, then waits (bounded) until the connections have ended.
    fn close_all(&mut self, rx: &Receiver<Input>) {
        self.dialling.clear();
        for (_, h) in self.live.drain() {
            self.conn_master.remove(&h.conn);
            self.closing.insert(h.conn);
            h.close();
        }
        let deadline = Instant::now() + CLOSE_WAIT;
        while !self.closing.is_empty() {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Input::Net(NetEvent::Closed { conn, .. })) => {
                    self.closing.remove(&conn);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
}

/// One app-facing action as a plain line (`None` for protocol actions).
pub fn describe(action: &Action) -> Option<String> {
    let request = describe_request;
    Some(match action {
        Action::Subscribed { framework, master, executors } => {
            format!(
                "framework {framework} subscribed to {master} ({} executors known)",
                executors.len()
            )
        }
        Action::ExecutorUpdate(info) => executor_line(info),
        Action::SlotFailed { group, slot, reason } => {
            format!("group {group} slot {slot} failed: {reason}")
        }
        Action::RequestAccepted { request: id, command } => {
            format!("request {id} ({}) accepted", request(command))
        }
        Action::RequestRefused { request: id, command, reason } => {
            format!("request {id} ({}) refused: {reason}", request(command))
        }
        Action::Error { message } => format!("master error: {message}"),
        Action::Disconnected { reason } => format!("disconnected: {reason}"),
        Action::Exit { reason, .. } => reason.clone(),
        Action::Connect { .. }
        | Action::Send { .. }
        | Action::Close { .. }
        | Action::SetTimer { .. }
        | Action::CancelTimer { .. } => return None,
    })
}

/// A request as named in a plain line (`declare group main`, `kill <id>`,
/// `teardown`).
pub fn describe_request(command: &Request) -> String {
    match command {
        Request::Declare { group } => format!("declare group {group}"),
        Request::Kill { executor } => format!("kill {executor}"),
        Request::Teardown => "teardown".into(),
    }
}

/// An executor's state as a plain line (`<executor> slot <n> on <worker>:
/// RUNNING`).
pub fn executor_line(info: &ExecutorInfo) -> String {
    let on = info.worker.as_ref().map(|w| format!(" on {w}")).unwrap_or_default();
    format!("{} slot {}{on}: {}", info.id, info.slot, state_text(&info.state))
}

/// How an executor state is printed (`RUNNING`, `EXITED 1`, `FAILED: <why>`...).
pub fn state_text(state: &ExecutorState) -> String {
    match state {
        ExecutorState::Launching => "LAUNCHING".into(),
        ExecutorState::Running => "RUNNING".into(),
        ExecutorState::Exited { code } => format!("EXITED {code}"),
        ExecutorState::Failed { reason } => format!("FAILED: {reason}"),
        ExecutorState::Killed => "KILLED".into(),
        ExecutorState::Lost => "LOST".into(),
    }
}

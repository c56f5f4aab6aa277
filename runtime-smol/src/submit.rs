//! The submit daemon: `regent submit` runs one framework with one executor
//! group and follows it to the end.
//!
//! The daemon drives the pure [`Subscriber`] machine of `regent-core` and
//! decides no protocol itself (DESIGN "Runtimes"): it waits for a frame, a
//! finished dial, a timer deadline or the shutdown signal; makes one
//! [`Subscriber::handle`] call per input; executes every action in order;
//! recomputes the next deadline. Finding the leader, closing before
//! resubscribing, backoff, the heartbeat watchdog, re-declaring after a
//! resubscription and stopping when another instance takes the framework over
//! are all the machine's.
//!
//! What the daemon adds is the embedding program's side:
//!
//! * **start**: a fresh instance id per process (OS entropy), `Start`, then
//!   `Declare` of the group `main` (`--executors` slots of the command);
//! * **output**: every state change as one plain line (the instance, the
//!   framework id once known, `subscribed to <master>`,
//!   `<executor> slot <n> on <worker>: RUNNING`, `disconnected: <reason>`,
//!   refused requests, failed slots, master errors). With
//!   [`run_submit_with_progress`] and `progress = true` (the caller passes
//!   whether `out` is a terminal) a live one-line summary
//!   (`[3/4 running, 1 done, 0 failed]`, redrawn with `\r`) follows the
//!   lines; [`run_submit`] never writes it, so a pipe or a file gets plain
//!   lines only;
//! * **completion**, from the latest state of every slot of `main`
//!   (snapshots in `Subscribed`, then `ExecutorUpdate`s, `SlotFailed`):
//!   [`SubmitOutcome::Succeeded`] once every slot has an executor that exited
//!   0; [`SubmitOutcome::SlotsFailed`] once at least one slot failed and no
//!   slot can change any more; [`SubmitOutcome::FailedOver`] when the
//!   machine exits because another instance took the framework over;
//!   [`SubmitOutcome::Interrupted`] on the shutdown signal. The framework is
//!   never torn down: after an interruption its executors keep running
//!   within the failover timeout, and a second `regent submit` with the same
//!   `--framework-id` and spec subscribes, re-declares, and the master
//!   adopts them. Before returning, the daemon closes its connection (flushed)
//!   and waits briefly for it to end.
//!
//! Slot rules (the master's, as seen from here): a slot is *done* when any of
//! its executors exited 0 (the master completes a slot on a late success
//! too); it *failed* after a `SlotFailed` (final: the master never reopens a
//! failed slot, so the failure is remembered across resubscriptions), or
//! when a snapshot carries the slot's recorded outcome (an entry with no
//! worker) as failed or killed. Any other ended executor means the master
//! is retrying the slot. Limitation: a `SlotFailed` sent while this daemon
//! was not subscribed is not repeated by the master, and a snapshot cannot
//! tell an exhausted slot from one awaiting a retry while the failed
//! executor is still in the leader's memory; the daemon then keeps waiting
//! (interrupt it; the framework stays adoptable).
//!
//! Security: a master address that is not loopback is refused without a
//! cluster secret unless `insecure` ([`check_exposure`]) — the configured
//! masters before anything is dialled (an error naming the address), and
//! every master learned later at dial time (that dial fails, naming it).

use crate::net::{check_exposure, random_u64, spawn_connection, ConnHandle, NetConfig, NetEvent};
use async_channel::{Receiver, Sender};
use regent_core::auth::Side;
use regent_core::ids::InstanceId;
use regent_core::protocol::{ExecutorInfo, ExecutorState, GroupSpec};
use regent_core::subscriber::{Action, Config, Event, Request, Subscriber, Timer};
use regent_core::{Addr, ConnId, ExecutorId, FrameworkId, Millis};
use smol::future;
use smol::net::TcpStream;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The name of the one executor group `regent submit` declares.
pub const GROUP: &str = "main";

/// How long one dial (resolve and TCP connect) may take.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the daemon waits for its connection to close before returning.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Everything `regent submit` was asked to do.
#[derive(Clone, Debug)]
pub struct SubmitOptions {
    /// The cluster name sent in `Hello` (must match the masters').
    pub cluster: String,
    /// The configured masters, tried in order (more are learned from them).
    pub masters: Vec<Addr>,
    /// The framework's human-readable name (`--name`).
    pub name: String,
    /// The framework id to resume or take over (`--framework-id`); `None`
    /// lets the master assign one on the first subscription.
    pub framework_id: Option<String>,
    /// How long the master keeps the framework's executors while no
    /// subscriber is connected (`--failover-timeout`).
    pub failover_timeout: Duration,
    /// Slots of the group `main` (`--executors`); at least 1.
    pub executors: u32,
    /// Cores per executor (`--cores`).
    pub cores: u32,
    /// Memory per executor in MiB (`--memory`).
    pub memory_mb: u64,
    /// Program and arguments of every executor (after `--`); not empty.
    pub command: Vec<String>,
    /// Connection settings (cluster secret, frame size, timeouts).
    pub net: Arc<NetConfig>,
    /// Accept non-loopback masters without a cluster secret (`--insecure`).
    pub insecure: bool,
}

/// How a submission ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// Every slot's executor exited 0.
    Succeeded,
    /// At least one slot failed for good and no slot can change any more;
    /// one reason per failed slot (`slot <n>: <why>`).
    SlotsFailed(Vec<String>),
    /// Another instance took the framework over; this one stopped.
    FailedOver {
        /// The instance the framework now belongs to (as the master named
        /// it, e.g. `inst-1f2e...`).
        to: String,
    },
    /// The shutdown signal arrived. The framework was left in place: its
    /// executors keep running within the failover timeout.
    Interrupted,
}

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
pub async fn run_submit(
    opts: SubmitOptions,
    out: impl Write + Send,
    shutdown: Receiver<()>,
) -> Result<SubmitOutcome, String> {
    run_submit_with_progress(opts, out, shutdown, false).await
}

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
) -> Result<SubmitOutcome, String> {
    if opts.masters.is_empty() {
        return Err("no master given (--masters)".into());
    }
    if opts.executors == 0 {
        return Err("--executors must be at least 1".into());
    }
    if opts.command.is_empty() {
        return Err("no command given (after --)".into());
    }
    let has_secret = opts.net.secret.is_some();
    for m in &opts.masters {
        // An address that does not resolve now is checked again at dial time.
        if let Ok(addrs) = smol::net::resolve(m.as_str()).await {
            for a in addrs {
                check_exposure(&a, has_secret, opts.insecure)
                    .map_err(|e| format!("master {m}: {e}"))?;
            }
        }
    }

    let start = Instant::now();
    let instance = InstanceId(random_u64());
    let mut config =
        Config::new(opts.cluster.clone(), opts.name.clone(), instance, opts.masters.clone());
    config.framework = opts.framework_id.clone().map(FrameworkId::new);
    config.failover_timeout = Millis(opts.failover_timeout.as_millis() as u64);
    let spec = GroupSpec {
        group: GROUP.to_owned(),
        slots: opts.executors,
        command: opts.command.clone(),
        env: vec![],
        cores: opts.cores,
        memory_mb: opts.memory_mb,
    };
    let (net_tx, net_rx) = async_channel::unbounded();
    let (dial_tx, dial_rx) = async_channel::unbounded();
    let mut d = Daemon {
        machine: Subscriber::new(config),
        start,
        net: opts.net.clone(),
        insecure: opts.insecure,
        net_tx,
        dial_tx,
        next_conn: 1,
        next_dial: 1,
        dialling: HashMap::new(),
        live: HashMap::new(),
        conn_master: HashMap::new(),
        closing: BTreeSet::new(),
        timers: BTreeMap::new(),
        report: Report::new(out, progress, opts.executors),
        failed_over_to: None,
        outcome: None,
    };
    d.report.line(&format!(
        "submitting {} x {:?} ({} cores, {} MiB each) as instance {instance}",
        opts.executors, opts.command, opts.cores, opts.memory_mb
    ));
    d.feed(Event::Start, None);
    d.feed(Event::Declare(spec), None);

    let outcome = loop {
        if let Some(outcome) = d.outcome.take() {
            break outcome;
        }
        let deadline = d.timers.values().min().copied();
        let wake = future::or(
            future::or(async { net_rx.recv().await.map_or(Wake::Idle, Wake::Net) }, async {
                dial_rx.recv().await.map_or(Wake::Idle, Wake::Dialled)
            }),
            future::or(
                async {
                    // A message or a closed channel: both mean stop.
                    let _ = shutdown.recv().await;
                    Wake::Shutdown
                },
                async {
                    match deadline {
                        Some(at) => {
                            async_io::Timer::at(start + Duration::from_millis(at.0)).await;
                            Wake::Deadline
                        }
                        None => future::pending().await,
                    }
                },
            ),
        )
        .await;
        match wake {
            Wake::Net(ev) => d.on_net(ev),
            Wake::Dialled(dialled) => d.on_dialled(dialled),
            Wake::Deadline => d.fire_due(),
            Wake::Shutdown => d.outcome = Some(Ok(SubmitOutcome::Interrupted)),
            // Both senders live in `d`: cannot happen; harmless if it did.
            Wake::Idle => {}
        }
    };
    d.close_all(&net_rx).await;
    d.report.finish(&outcome, opts.failover_timeout);
    outcome
}

enum Wake {
    Net(NetEvent),
    Dialled(Dialled),
    Deadline,
    Shutdown,
    Idle,
}

/// A finished dial.
struct Dialled {
    master: Addr,
    dial: u64,
    result: Result<TcpStream, String>,
}

/// The daemon's state around the machine: connections, dials, timers, the
/// report.
struct Daemon<W: Write> {
    machine: Subscriber,
    start: Instant,
    net: Arc<NetConfig>,
    insecure: bool,
    net_tx: Sender<NetEvent>,
    dial_tx: Sender<Dialled>,
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
    report: Report<W>,
    /// The instance named by a `FrameworkError` on a live connection, in
    /// case the machine's exit reason does not name it.
    failed_over_to: Option<String>,
    outcome: Option<Result<SubmitOutcome, String>>,
}

impl<W: Write> Daemon<W> {
    fn now(&self) -> Millis {
        crate::millis_since(self.start)
    }

    /// One `handle` call and its actions. `context` is what the runtime knows
    /// about the input (a network close reason), shown with a `Disconnected`.
    fn feed(&mut self, event: Event, context: Option<&str>) {
        if self.outcome.is_some() {
            return;
        }
        tracing::trace!(?event, "subscriber event");
        let actions = self.machine.handle(self.now(), event);
        for action in actions {
            self.execute(action, context);
        }
        if self.outcome.is_none() {
            self.outcome = self.report.completion().map(Ok);
        }
        self.report.draw_progress();
    }

    fn execute(&mut self, action: Action, context: Option<&str>) {
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
            Action::Subscribed { framework, master, executors } => {
                self.report.subscribed(&framework, &master, executors)
            }
            Action::ExecutorUpdate(info) => self.report.update(info),
            Action::SlotFailed { group, slot, reason } => {
                self.report.slot_failed(&group, slot, &reason)
            }
            Action::RequestAccepted { request, command } => self.report.accepted(request, &command),
            Action::RequestRefused { request, command, reason } => {
                self.report
                    .line(&format!("request {request} ({}) refused: {reason}", describe(&command)));
                if matches!(&command, Request::Declare { group } if group == GROUP) {
                    // The machine forgot the declaration: nothing more will
                    // happen for this submission.
                    self.outcome = Some(Err(format!("the master refused group {GROUP}: {reason}")));
                }
            }
            Action::Error { message } => self.report.line(&format!("master error: {message}")),
            Action::Disconnected { reason } => match context {
                Some(c) => self.report.line(&format!("disconnected: {reason} ({c})")),
                None => self.report.line(&format!("disconnected: {reason}")),
            },
            Action::Exit { reason } => {
                self.report.line(&reason);
                let to = failed_over_instance(&reason).or_else(|| self.failed_over_to.clone());
                self.outcome = Some(match to {
                    Some(to) => Ok(SubmitOutcome::FailedOver { to }),
                    None => Err(reason),
                });
            }
        }
    }

    /// Starts a dial task; its result comes back as a [`Dialled`].
    fn dial(&mut self, master: Addr) {
        let dial = self.next_dial;
        self.next_dial += 1;
        self.dialling.insert(master.clone(), dial);
        let tx = self.dial_tx.clone();
        let has_secret = self.net.secret.is_some();
        let insecure = self.insecure;
        smol::spawn(async move {
            let result = future::or(connect(&master, has_secret, insecure), async {
                async_io::Timer::after(DIAL_TIMEOUT).await;
                Err(format!("connecting to {master} timed out after {DIAL_TIMEOUT:?}"))
            })
            .await;
            let _ = tx.send(Dialled { master, dial, result }).await;
        })
        .detach();
    }

    fn on_dialled(&mut self, d: Dialled) {
        if self.dialling.get(&d.master) != Some(&d.dial) {
            return; // abandoned by a Close: the stream (if any) drops here
        }
        self.dialling.remove(&d.master);
        match d.result {
            Ok(stream) => {
                let conn = ConnId(self.next_conn);
                self.next_conn += 1;
                let h = spawn_connection(
                    stream,
                    Side::Client,
                    conn,
                    self.net.clone(),
                    self.net_tx.clone(),
                );
                tracing::debug!(master = %d.master, %conn, peer = %h.peer, "connected");
                self.conn_master.insert(conn, d.master.clone());
                self.live.insert(d.master.clone(), h);
                self.feed(Event::Connected { master: d.master }, None);
            }
            Err(e) => {
                self.report.line(&format!("cannot reach master {}: {e}", d.master));
                self.feed(Event::ConnectFailed { master: d.master }, None);
            }
        }
    }

    fn on_net(&mut self, ev: NetEvent) {
        match ev {
            NetEvent::Message { conn, msg } => {
                let Some(from) = self.conn_master.get(&conn).cloned() else {
                    return; // a connection we closed: fed nothing more
                };
                if let regent_core::protocol::Message::FrameworkError {
                    failed_over_to: Some(i),
                    ..
                } = &msg
                {
                    self.failed_over_to = Some(i.to_string());
                }
                self.feed(Event::Message { from, msg }, None);
            }
            NetEvent::Closed { conn, reason } => {
                self.closing.remove(&conn);
                let Some(master) = self.conn_master.remove(&conn) else {
                    return; // closed by us: the machine knows
                };
                tracing::info!(%master, %reason, "connection closed");
                self.live.remove(&master);
                self.feed(Event::Disconnected { master }, Some(&reason));
            }
        }
    }

    /// Feeds every timer whose deadline passed, earliest first.
    fn fire_due(&mut self) {
        let now = self.now();
        let mut due: Vec<(Millis, Timer)> =
            self.timers.iter().filter(|(_, at)| **at <= now).map(|(t, at)| (*at, *t)).collect();
        due.sort();
        for (_, timer) in due {
            self.timers.remove(&timer);
            self.feed(Event::Timer(timer), None);
        }
    }

    /// Closes every connection (flushing what was queued) and abandons the
    /// dials, then waits (bounded) until the connections have ended.
    async fn close_all(&mut self, net_rx: &Receiver<NetEvent>) {
        self.dialling.clear();
        for (_, h) in self.live.drain() {
            self.conn_master.remove(&h.conn);
            self.closing.insert(h.conn);
            h.close();
        }
        let deadline = Instant::now() + CLOSE_WAIT;
        while !self.closing.is_empty() {
            let ev = future::or(async { net_rx.recv().await.ok() }, async {
                async_io::Timer::at(deadline).await;
                None
            })
            .await;
            match ev {
                Some(NetEvent::Closed { conn, .. }) => {
                    self.closing.remove(&conn);
                }
                Some(NetEvent::Message { .. }) => {}
                None => break,
            }
        }
    }
}

/// Resolves `master`, refuses exposed addresses, and connects to the first
/// address that answers.
async fn connect(master: &Addr, has_secret: bool, insecure: bool) -> Result<TcpStream, String> {
    let addrs = smol::net::resolve(master.as_str())
        .await
        .map_err(|e| format!("cannot resolve {master}: {e}"))?;
    for a in &addrs {
        check_exposure(a, has_secret, insecure).map_err(|e| format!("master {master}: {e}"))?;
    }
    let mut last = format!("{master} resolves to no address");
    for a in addrs {
        match TcpStream::connect(a).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    Err(last)
}

/// The instance named in the subscriber's failover exit reason
/// (`... failed over to instance <id>; ...`).
fn failed_over_instance(reason: &str) -> Option<String> {
    const MARK: &str = "failed over to instance ";
    let rest = &reason[reason.find(MARK)? + MARK.len()..];
    let id: String = rest.chars().take_while(|c| !c.is_whitespace() && *c != ';').collect();
    (!id.is_empty()).then_some(id)
}

fn describe(command: &Request) -> String {
    match command {
        Request::Declare { group } => format!("declare group {group}"),
        Request::Kill { executor } => format!("kill {executor}"),
        Request::Teardown => "teardown".into(),
    }
}

/// How an executor state is printed.
fn state_text(state: &ExecutorState) -> String {
    match state {
        ExecutorState::Launching => "LAUNCHING".into(),
        ExecutorState::Running => "RUNNING".into(),
        ExecutorState::Exited { code } => format!("EXITED {code}"),
        ExecutorState::Failed { reason } => format!("FAILED: {reason}"),
        ExecutorState::Killed => "KILLED".into(),
        ExecutorState::Lost => "LOST".into(),
    }
}

/// What is known about one slot of the group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Slot {
    /// The latest state of each of the slot's executors.
    executors: BTreeMap<ExecutorId, ExecutorState>,
    /// The slot failed for good (a `SlotFailed`, or a recorded failure).
    failed: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotStatus {
    Done,
    Failed,
    Running,
    /// Not placed yet, or being retried.
    Waiting,
}

impl Slot {
    fn status(&self) -> SlotStatus {
        if self.executors.values().any(|s| *s == ExecutorState::Exited { code: 0 }) {
            SlotStatus::Done
        } else if self.failed.is_some() {
            SlotStatus::Failed
        } else if self.executors.values().any(|s| !s.is_terminal()) {
            SlotStatus::Running
        } else {
            SlotStatus::Waiting
        }
    }
}

/// Slot tracking and output.
struct Report<W: Write> {
    out: W,
    progress: bool,
    /// The progress text currently on screen (progress mode only).
    shown: Option<String>,
    slots: Vec<Slot>,
    /// The state last printed for each executor, so a snapshot prints only
    /// what changed.
    printed: HashMap<ExecutorId, ExecutorState>,
    framework: Option<FrameworkId>,
    declared: bool,
}

impl<W: Write> Report<W> {
    fn new(out: W, progress: bool, slots: u32) -> Self {
        Report {
            out,
            progress,
            shown: None,
            slots: vec![Slot::default(); slots as usize],
            printed: HashMap::new(),
            framework: None,
            declared: false,
        }
    }

    /// Prints one plain line (clearing the progress line first, if shown).
    fn line(&mut self, text: &str) {
        if self.shown.take().is_some() {
            let _ = write!(self.out, "\r\x1b[K");
        }
        let _ = writeln!(self.out, "{text}");
        let _ = self.out.flush();
    }

    /// Redraws the progress line when it changed (progress mode only).
    fn draw_progress(&mut self) {
        if !self.progress {
            return;
        }
        let (mut running, mut done, mut failed) = (0, 0, 0);
        for s in &self.slots {
            match s.status() {
                SlotStatus::Running => running += 1,
                SlotStatus::Done => done += 1,
                SlotStatus::Failed => failed += 1,
                SlotStatus::Waiting => {}
            }
        }
        let text =
            format!("[{running}/{} running, {done} done, {failed} failed]", self.slots.len());
        if self.shown.as_deref() == Some(text.as_str()) {
            return;
        }
        let _ = write!(self.out, "\r\x1b[K{text}");
        let _ = self.out.flush();
        self.shown = Some(text);
    }

    fn subscribed(&mut self, framework: &FrameworkId, master: &Addr, executors: Vec<ExecutorInfo>) {
        if self.framework.as_ref() != Some(framework) {
            self.line(&format!("framework {framework}"));
            self.framework = Some(framework.clone());
        }
        self.line(&format!("subscribed to {master}"));
        // The snapshot replaces what was known; failures are final.
        for s in &mut self.slots {
            s.executors.clear();
        }
        for info in executors {
            if info.worker.is_none() && info.group == GROUP {
                // The slot's recorded outcome.
                let reason = match &info.state {
                    ExecutorState::Failed { reason } => Some(reason.clone()),
                    ExecutorState::Killed => Some(format!("executor {} was killed", info.id)),
                    _ => None,
                };
                if let (Some(reason), Some(slot)) = (reason, self.slots.get_mut(info.slot as usize))
                {
                    slot.failed.get_or_insert(reason);
                }
            }
            self.update(info);
        }
    }

    fn update(&mut self, info: ExecutorInfo) {
        if self.printed.get(&info.id) != Some(&info.state) {
            let on = info.worker.as_ref().map(|w| format!(" on {w}")).unwrap_or_default();
            self.line(&format!("{} slot {}{on}: {}", info.id, info.slot, state_text(&info.state)));
            self.printed.insert(info.id.clone(), info.state.clone());
        }
        if info.group == GROUP {
            if let Some(slot) = self.slots.get_mut(info.slot as usize) {
                slot.executors.insert(info.id, info.state);
            }
        }
    }

    fn slot_failed(&mut self, group: &str, slot: u32, reason: &str) {
        self.line(&format!("group {group} slot {slot} failed: {reason}"));
        if group == GROUP {
            if let Some(s) = self.slots.get_mut(slot as usize) {
                s.failed = Some(reason.to_owned());
            }
        }
    }

    fn accepted(&mut self, request: u64, command: &Request) {
        match command {
            Request::Declare { group } if group == GROUP => {
                if !self.declared {
                    self.declared = true;
                    self.line(&format!("group {group} accepted ({} slots)", self.slots.len()));
                }
            }
            other => self.line(&format!("request {request} ({}) accepted", describe(other))),
        }
    }

    /// The outcome the slots show, if they show one.
    fn completion(&self) -> Option<SubmitOutcome> {
        let statuses: Vec<SlotStatus> = self.slots.iter().map(Slot::status).collect();
        if statuses.iter().all(|s| *s == SlotStatus::Done) {
            return Some(SubmitOutcome::Succeeded);
        }
        let settled = statuses.iter().all(|s| matches!(s, SlotStatus::Done | SlotStatus::Failed));
        if !settled {
            return None;
        }
        let reasons = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.status() == SlotStatus::Failed)
            .map(|(i, s)| format!("slot {i}: {}", s.failed.as_deref().unwrap_or("failed")))
            .collect();
        Some(SubmitOutcome::SlotsFailed(reasons))
    }

    /// Clears the progress line and prints the summary of `outcome`.
    fn finish(&mut self, outcome: &Result<SubmitOutcome, String>, failover: Duration) {
        let fw = self.framework.as_ref().map(|f| f.to_string());
        let text = match outcome {
            Ok(SubmitOutcome::Succeeded) => format!(
                "done: all {} executors of framework {} exited 0",
                self.slots.len(),
                fw.unwrap_or_default()
            ),
            Ok(SubmitOutcome::SlotsFailed(reasons)) => {
                format!("failed: {} of {} slots failed", reasons.len(), self.slots.len())
            }
            Ok(SubmitOutcome::FailedOver { to }) => {
                format!("stopped: the framework now belongs to instance {to}")
            }
            Ok(SubmitOutcome::Interrupted) => match fw {
                Some(fw) => format!(
                    "interrupted: framework {fw} is left running (its executors are kept for \
                     {failover:?} without a subscriber); take it over with \
                     `regent submit --framework-id {fw}` and the same spec"
                ),
                None => "interrupted before subscribing".into(),
            },
            Err(e) => format!("error: {e}"),
        };
        self.line(&text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::WorkerId;

    fn info(id: &str, slot: u32, worker: Option<&str>, state: ExecutorState) -> ExecutorInfo {
        ExecutorInfo {
            id: ExecutorId::new(id),
            group: GROUP.into(),
            slot,
            worker: worker.map(WorkerId::new),
            state,
        }
    }

    #[test]
    fn parses_the_failover_instance_from_the_exit_reason() {
        let r = "framework fw failed over to instance inst-2a; this instance inst-1 stops: x";
        assert_eq!(failed_over_instance(r).as_deref(), Some("inst-2a"));
        assert_eq!(failed_over_instance("framework fw torn down"), None);
    }

    #[test]
    fn a_slot_is_done_when_any_executor_exited_zero() {
        let mut r = Report::new(Vec::new(), false, 2);
        r.update(info("fw/main#0#1", 0, Some("w1"), ExecutorState::Exited { code: 1 }));
        r.update(info("fw/main#0#2", 0, Some("w1"), ExecutorState::Exited { code: 0 }));
        assert_eq!(r.completion(), None);
        r.update(info("fw/main#1#1", 1, Some("w2"), ExecutorState::Running));
        assert_eq!(r.completion(), None);
        r.update(info("fw/main#1#1", 1, Some("w2"), ExecutorState::Exited { code: 0 }));
        assert_eq!(r.completion(), Some(SubmitOutcome::Succeeded));
    }

    #[test]
    fn a_failed_slot_ends_the_run_only_when_nothing_can_change() {
        let mut r = Report::new(Vec::new(), false, 2);
        r.update(info("fw/main#1#1", 1, Some("w2"), ExecutorState::Running));
        r.slot_failed(GROUP, 0, "retries used up");
        assert_eq!(r.completion(), None);
        r.update(info("fw/main#1#1", 1, Some("w2"), ExecutorState::Exited { code: 0 }));
        assert_eq!(
            r.completion(),
            Some(SubmitOutcome::SlotsFailed(vec!["slot 0: retries used up".into()]))
        );
    }

    #[test]
    fn a_snapshot_replaces_executors_and_prints_only_changes() {
        let mut r = Report::new(Vec::new(), false, 2);
        let fw = FrameworkId::new("fw");
        let m = Addr::new("m:1");
        r.subscribed(&fw, &m, vec![info("fw/main#0#1", 0, Some("w1"), ExecutorState::Running)]);
        r.subscribed(
            &fw,
            &m,
            vec![
                info("fw/main#0#1", 0, Some("w1"), ExecutorState::Running),
                // A recorded failure (no worker) is final.
                info("fw/main#1#3", 1, None, ExecutorState::Failed { reason: "boom".into() }),
            ],
        );
        let text = String::from_utf8(r.out.clone()).unwrap();
        assert_eq!(text.matches("fw/main#0#1 slot 0 on w1: RUNNING").count(), 1, "{text}");
        assert_eq!(text.matches("framework fw").count(), 1, "{text}");
        assert_eq!(r.slots[1].status(), SlotStatus::Failed);
        assert_eq!(r.slots[0].status(), SlotStatus::Running);
    }

    #[test]
    fn progress_is_drawn_only_when_enabled() {
        let mut plain = Report::new(Vec::new(), false, 1);
        plain.line("a");
        plain.draw_progress();
        plain.line("b");
        assert_eq!(plain.out, b"a\nb\n");
        let mut tty = Report::new(Vec::new(), true, 1);
        tty.draw_progress();
        tty.line("a");
        let text = String::from_utf8(tty.out).unwrap();
        assert!(text.starts_with("\r\x1b[K[0/1 running, 0 done, 0 failed]\r\x1b[Ka\n"), "{text:?}");
    }
}

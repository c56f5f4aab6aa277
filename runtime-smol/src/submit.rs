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
//!   (snapshots in `Subscribed`, then `ExecutorUpdate`s, `SlotFailed`),
//!   tracked by [`regent_core::progress::GroupProgress`] (the rules the
//!   blocking `regent_std::drivers::subscriber` shares):
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

use crate::net::{check_exposure, spawn_connection, ConnHandle, NetConfig, NetEvent};
use async_channel::{Receiver, Sender};
use regent_core::auth::Side;
use regent_core::ids::InstanceId;
use regent_core::progress::GroupProgress;
use regent_core::protocol::{ExecutorInfo, ExecutorState};
use regent_core::subscriber::{Action, Event, Request, Subscriber, Timer};
use regent_core::{Addr, ConnId, ExecutorId, FrameworkId, Millis};
use regent_std::drivers::subscriber::{
    check_configured_masters, check_options, describe, executor_line, machine_config,
};
use smol::future;
use smol::net::TcpStream;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use regent_std::drivers::subscriber::{DIAL_TIMEOUT, GROUP};

/// How long the daemon waits for its connection to close before returning.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// Everything `regent submit` was asked to do: the options of the blocking
/// subscriber driver, the same fields (the cluster, the masters, `--name`,
/// `--framework-id`, `--failover-timeout`, `--executors`, `--cores`,
/// `--memory`, the command after `--`, the connection settings and
/// `--insecure`).
pub use regent_std::drivers::SubscriberConfig as SubmitOptions;

/// How a submission ended (shared with the blocking driver).
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
    check_options(&opts)?;
    // Resolving blocks: on the blocking pool.
    let checked = opts.clone();
    smol::unblock(move || check_configured_masters(&checked)).await?;

    let start = Instant::now();
    let instance = InstanceId(regent_std::net::time_ordered_id());
    let (config, spec) = machine_config(&opts, instance);
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
            self.outcome = self.report.outcome();
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
            app => self.report.observe(&app, context),
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

/// Slot tracking (a [`GroupProgress`]) and output.
struct Report<W: Write> {
    out: W,
    progress: bool,
    /// The progress text currently on screen (progress mode only).
    shown: Option<String>,
    /// The slots of [`GROUP`] and how the submission ends.
    slots: GroupProgress,
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
            slots: GroupProgress::new(GROUP, slots),
            printed: HashMap::new(),
            framework: None,
            declared: false,
        }
    }

    /// How the submission ends, if the machine or the slots say so.
    fn outcome(&self) -> Option<Result<SubmitOutcome, String>> {
        self.slots.outcome()
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
        let c = self.slots.counts();
        let text =
            format!("[{}/{} running, {} done, {} failed]", c.running, c.slots, c.done, c.failed);
        if self.shown.as_deref() == Some(text.as_str()) {
            return;
        }
        let _ = write!(self.out, "\r\x1b[K{text}");
        let _ = self.out.flush();
        self.shown = Some(text);
    }

    /// Takes in one app-facing action of the machine: tracks the slots and
    /// prints it. `context` is what the runtime knows about the input (a
    /// network close reason), shown with a `Disconnected`.
    fn observe(&mut self, action: &Action, context: Option<&str>) {
        self.slots.observe(action);
        match action {
            Action::Subscribed { framework, master, executors } => {
                if self.framework.as_ref() != Some(framework) {
                    self.line(&format!("framework {framework}"));
                    self.framework = Some(framework.clone());
                }
                self.line(&format!("subscribed to {master}"));
                for info in executors {
                    self.executor(info);
                }
            }
            Action::ExecutorUpdate(info) => self.executor(info),
            Action::RequestAccepted { command: Request::Declare { group }, .. }
                if group == GROUP =>
            {
                if !self.declared {
                    self.declared = true;
                    let slots = self.slots.counts().slots;
                    self.line(&format!("group {group} accepted ({slots} slots)"));
                }
            }
            Action::Disconnected { reason } => match context {
                Some(c) => self.line(&format!("disconnected: {reason} ({c})")),
                None => self.line(&format!("disconnected: {reason}")),
            },
            other => {
                if let Some(line) = describe(other) {
                    self.line(&line);
                }
            }
        }
    }

    /// Prints an executor's state when it changed since last printed.
    fn executor(&mut self, info: &ExecutorInfo) {
        if self.printed.get(&info.id) != Some(&info.state) {
            self.line(&executor_line(info));
            self.printed.insert(info.id.clone(), info.state.clone());
        }
    }

    /// Clears the progress line and prints the summary of `outcome`.
    fn finish(&mut self, outcome: &Result<SubmitOutcome, String>, failover: Duration) {
        let fw = self.framework.as_ref().map(|f| f.to_string());
        let slots = self.slots.counts().slots;
        let text = match outcome {
            Ok(SubmitOutcome::Succeeded) => format!(
                "done: all {} executors of framework {} exited 0",
                slots,
                fw.unwrap_or_default()
            ),
            Ok(SubmitOutcome::SlotsFailed(reasons)) => {
                format!("failed: {} of {} slots failed", reasons.len(), slots)
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
    use regent_core::progress::SlotStatus;
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

    fn subscribed(r: &mut Report<Vec<u8>>, executors: Vec<ExecutorInfo>) {
        let framework = FrameworkId::new("fw");
        let master = Addr::new("m:1");
        r.observe(&Action::Subscribed { framework, master, executors }, None);
    }

    #[test]
    fn a_snapshot_replaces_executors_and_prints_only_changes() {
        let mut r = Report::new(Vec::new(), false, 2);
        subscribed(&mut r, vec![info("fw/main#0#1", 0, Some("w1"), ExecutorState::Running)]);
        subscribed(
            &mut r,
            vec![
                info("fw/main#0#1", 0, Some("w1"), ExecutorState::Running),
                // A recorded failure (no worker) is final.
                info("fw/main#1#3", 1, None, ExecutorState::Failed { reason: "boom".into() }),
            ],
        );
        let text = String::from_utf8(r.out.clone()).unwrap();
        assert_eq!(text.matches("fw/main#0#1 slot 0 on w1: RUNNING").count(), 1, "{text}");
        assert_eq!(text.matches("framework fw").count(), 1, "{text}");
        assert_eq!(r.slots.slot_status(1), Some(SlotStatus::Failed));
        assert_eq!(r.slots.slot_status(0), Some(SlotStatus::Running));
    }

    #[test]
    fn the_group_is_accepted_once_and_the_outcome_follows_the_slots() {
        let mut r = Report::new(Vec::new(), false, 1);
        let accepted = Action::RequestAccepted {
            request: 1,
            command: Request::Declare { group: GROUP.into() },
        };
        r.observe(&accepted, None);
        r.observe(&accepted, None);
        r.observe(&Action::Disconnected { reason: "eof".into() }, Some("reset"));
        let done = info("fw/main#0#1", 0, Some("w1"), ExecutorState::Exited { code: 0 });
        r.observe(&Action::ExecutorUpdate(done), None);
        assert_eq!(r.outcome(), Some(Ok(SubmitOutcome::Succeeded)));
        let text = String::from_utf8(r.out).unwrap();
        assert_eq!(
            text,
            "group main accepted (1 slots)\ndisconnected: eof (reset)\n\
             fw/main#0#1 slot 0 on w1: EXITED 0\n"
        );
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

//! [`SubmitNode`]: the submitter's composition, pure.
//!
//! `regent submit` is not one machine but a composition: the
//! [`Subscriber`] machine (finding the leader, one subscription, close before
//! resubscribe, watchdog, backoff, takeover) and the submission's progress
//! ([`GroupProgress`] for every declared group), plus the bookkeeping that
//! joins them to real connections. All of it lives here, once
//! (docs/design.md#child-machines-are-composed-in-core); a runtime dials, reads, writes, keeps the clock, catches
//! signals and prints, and decides nothing:
//!
//! * **Connections by the runtime's [`ConnId`].** The subscriber names its
//!   connections by the master's address; the node maps them to the
//!   runtime's connection numbers, both ways.
//! * **Dials with generations.** Every [`Output::Dial`] carries a fresh
//!   [`DialId`]. A result for a dial the subscriber has since abandoned (it
//!   closed the attempt, or dialled the same master again) is superseded: a
//!   connection it opened is closed at once ([`Output::Close`]) and nothing
//!   reaches the subscriber.
//! * **Connections the node closed stay closed.** After an
//!   [`Output::Close`], every later event of that connection (a frame
//!   already in flight, its close) is ignored, so a reply to an abandoned
//!   attempt never reaches the subscriber.
//! * **Each owns its deadlines.** The subscriber keeps its own
//!   ([`Subscriber::poll_timeout`]); the node's table ([`Deadlines`]) holds
//!   only the node's timers. The runtime asks [`SubmitNode::poll_timeout`]
//!   (the earlier of both) and feeds [`Input::Tick`].
//! * **What the user sees** ([`Output::Show`]): one plain line per state
//!   change (the framework id once known, `subscribed to <master>`, each
//!   executor's state when it changed, `disconnected: ...`, refused
//!   requests, failed slots, master errors, unreachable masters, the
//!   takeover notice), a live progress summary, and one closing line naming
//!   the outcome.
//! * **How it ends.** Every slot of every declared group done:
//!   [`SubmitOutcome::Succeeded`]. A slot failed and nothing can change any
//!   more: [`SubmitOutcome::SlotsFailed`]. Either way the submission is
//!   *done*, and unless [`Config::keep`] it then **completes its framework**:
//!   it asks the master to end it (a `Teardown`; the master records a
//!   framework whose every slot exited 0 as COMPLETED in its history, one
//!   with a failed slot as FAILED) and ends only once the master accepted
//!   that (after the history record and the framework record's delete are
//!   durable), or after [`Config::complete_timeout`] without an answer,
//!   saying so (the framework then ends at its failover timeout, as one
//!   kept). A subscription the leader refuses meanwhile because the
//!   framework has finished means an earlier leader recorded the end
//!   already. With [`Config::keep`] the framework is left to its failover
//!   timeout. Another instance took the
//!   framework over: [`SubmitOutcome::FailedOver`]. [`Input::Interrupt`]:
//!   [`SubmitOutcome::Interrupted`] (the framework is never torn down: its
//!   executors keep running within the failover timeout, and a submitter
//!   with the same framework id adopts them). A declaration the master
//!   refused, or the framework torn down by an operator: an error. The node
//!   then closes every connection, waits for them to end (at most
//!   [`Config::linger`]) and emits [`Output::Exit`] with the process's exit
//!   code ([`SubmitExit`]).
//!
//! Exit codes (and the message for stderr, [`SubmitExit::message`]):
//!
//! | outcome | code | message |
//! | --- | --- | --- |
//! | every slot exited 0 | [`EXIT_SUCCEEDED`] (0) | none |
//! | an error (refused declaration, teardown, bad options) | [`EXIT_ERROR`] (1) | `error: <why>` |
//! | slots failed | [`EXIT_SLOTS_FAILED`] (2) | `application failed: slot <n>: <why>; ...` |
//! | taken over by another instance | [`EXIT_FAILED_OVER`] (3) | `the framework failed over to another instance (<instance>); this submit stops` |
//! | interrupted | [`EXIT_INTERRUPTED`] (130) | `interrupted; the executors keep running until the failover timeout` |

use super::Ended;
use crate::deadlines::Deadlines;
use crate::ids::{Addr, ConnId, ExecutorId, FrameworkId};
use crate::progress::{GroupProgress, ProgressCounts, SubmitError, SubmitOutcome};
use crate::protocol::{ExecutorInfo, ExecutorState, GroupSpec, Message};
use crate::subscriber::{self, Action, Event, Request, Subscriber, SubscriberStatus};
use crate::time::Millis;
use std::collections::{BTreeMap, BTreeSet};

/// Exit code: every slot of every declared group exited 0.
pub const EXIT_SUCCEEDED: u8 = 0;
/// Exit code: the submission could not go on (a refused declaration, the
/// framework torn down, invalid options).
pub const EXIT_ERROR: u8 = 1;
/// Exit code: at least one slot failed for good.
pub const EXIT_SLOTS_FAILED: u8 = 2;
/// Exit code: another instance took the framework over.
pub const EXIT_FAILED_OVER: u8 = 3;
/// Exit code: interrupted (128 + SIGINT); the framework is left running.
pub const EXIT_INTERRUPTED: u8 = 130;

/// Submit node configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The subscriber machine's settings (masters, framework id, instance,
    /// failover timeout...).
    pub subscriber: subscriber::Config,
    /// How long one dial (resolution and TCP connect) may take; passed to
    /// the runtime in every [`Output::Dial`]. Default 2 s.
    pub dial_timeout: Millis,
    /// Once the submission is over, how long the node waits for the
    /// connections it closed to end (their last frames flushed) before
    /// [`Output::Exit`]. Default 1 s.
    pub linger: Millis,
    /// How long to try to reach the leader: if no master has subscribed
    /// the framework this long after [`Input::Start`], *and none answered
    /// as the leader*, the submission ends with an error naming every
    /// master tried and why. A leader that answered (a leading
    /// `HelloReply`) but has not subscribed the framework yet is slow, not
    /// unreachable (its store may take seconds per write, docs/design.md#progress-when-dependencies-are-slow):
    /// the node says so once and keeps trying, with the subscriber's
    /// growing attempt timeouts. Once subscribed, failovers are waited out
    /// whatever their length. `None` (the default): try for ever. `regent
    /// submit` sets it from `--connect-timeout` (30 s).
    pub connect_timeout: Option<Millis>,
    /// Until the first subscription, at most one `cannot reach master`
    /// line is shown per this interval (later failures are still
    /// recorded for the final error). Default 5 s.
    pub unreachable_line_interval: Millis,
    /// Leave a done framework to its failover timeout instead of ending it
    /// at once (`--keep`). Default `false`: a done submission completes its
    /// framework (see the module docs).
    pub keep: bool,
    /// How long a done submission waits for the master to accept the end
    /// of its framework before it exits anyway, saying so. Default 30 s
    /// (a leader failover is waited out within it).
    pub complete_timeout: Millis,
}

impl Config {
    /// A configuration with the documented defaults.
    pub fn new(subscriber: subscriber::Config) -> Self {
        Config {
            subscriber,
            dial_timeout: Millis::from_secs(2),
            linger: Millis::from_secs(1),
            connect_timeout: None,
            unreachable_line_interval: Millis::from_secs(5),
            keep: false,
            complete_timeout: Millis::from_secs(30),
        }
    }
}

pub use super::{DialId, DialResult};

/// What happens to a submit node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The process starts: find the leader and subscribe.
    Start,
    /// Declare (or redeclare) an executor group and follow its slots: the
    /// submission succeeds once every slot of every declared group is done.
    /// Remembered and re-sent after every (re)subscription.
    Declare(GroupSpec),
    /// A dial from [`Output::Dial`] finished.
    Dialled {
        /// The dial, as in [`Output::Dial`].
        dial: DialId,
        /// The connection the runtime opened for it (its number, fresh and
        /// never reused), or why it failed (the one dial result of every
        /// node).
        result: DialResult,
    },
    /// A master dialled the callback listener (docs/design.md#seed-002): `conn` runs; its
    /// frames come as [`Input::Message`], its end as [`Input::Closed`].
    Accepted {
        /// The runtime's number for the connection.
        conn: ConnId,
    },
    /// A frame arrived on `conn`.
    Message {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// `conn` ended (the peer closed it, it failed, or it finished closing
    /// after an [`Output::Close`]). Feed every end, closed by us or not.
    Closed {
        /// The connection.
        conn: ConnId,
        /// How it ended.
        how: Ended,
        /// Why, as the runtime knows it (shown with a lost subscription).
        reason: String,
    },
    /// The deadline from [`SubmitNode::poll_timeout`] passed.
    Tick,
    /// The user interrupts the submission (Ctrl-C, SIGTERM, a stop
    /// request): it ends with [`SubmitOutcome::Interrupted`]; the framework
    /// is left in place.
    Interrupt,
}

/// What the runtime must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Dial `master` within `timeout`: resolve it, refuse it if any address
    /// it resolves to is exposed without a cluster secret (unless
    /// `--insecure`), connect (client side of the handshake), give the
    /// connection a fresh [`ConnId`], then feed [`Input::Dialled`] with
    /// `Ok(conn)` (and afterwards its frames and its end), or with
    /// `Err(why)` if any step failed.
    Dial {
        /// Echo it in [`Input::Dialled`].
        dial: DialId,
        /// Where to dial.
        master: Addr,
        /// How long the whole dial may take.
        timeout: Millis,
    },
    /// Send `msg` on `conn` (drop it if the connection is gone).
    Send {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// Close `conn` after flushing what was sent on it before. Keep feeding
    /// its events (the node ignores them, and waits for its end before
    /// [`Output::Exit`]).
    Close {
        /// The connection.
        conn: ConnId,
        /// Why, for the log.
        reason: String,
    },
    /// Show the user something (see [`Show`]).
    Show(Show),
    /// Purely observational: an app-facing action of the subscriber
    /// machine (`Subscribed`, `ExecutorUpdate`, `SlotFailed`,
    /// `RequestAccepted`, `RequestRefused`, `Error`, `Disconnected`, `Exit`),
    /// for a program that follows the framework itself. Hand it on or
    /// ignore it; everything the user sees comes as [`Output::Show`].
    Observed(Action),
    /// The submission is over and every connection has ended (or
    /// [`Config::linger`] passed): stop. A process prints
    /// [`SubmitExit::message`] on stderr (if any) and exits with
    /// [`SubmitExit::code`]; a library returns [`SubmitExit::outcome`].
    /// Nothing follows; the node ignores every later input.
    Exit(SubmitExit),
    /// The connections' read and write timeouts scale with `heartbeat`
    /// from now on: the interval the master of the subscription told. Said once it is known and
    /// whenever it changes.
    ConnTimeouts {
        /// The interval the timeouts scale with.
        heartbeat: Millis,
    },
}

/// What the program shows its user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Show {
    /// One plain line: print it whole, on a line of its own (on a terminal,
    /// clear the progress summary first).
    Line(String),
    /// The live summary `[<running>/<slots> running, <done> done, <failed>
    /// failed]` (with several groups, one such part per group: `[driver
    /// 1/1 running, 0 done, 0 failed | mappers ...]`), emitted at the end of every input that showed a line or
    /// changed it. Draw it in place (`\r`) only when the output is a
    /// terminal; a pipe or a file gets plain lines only.
    Progress(String),
}

/// How a submission ends: its outcome, the process's exit code and what to
/// say on stderr (see the module docs for the table).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubmitExit {
    /// How the submission ended; `Err` naming why it could not go on.
    pub outcome: Result<SubmitOutcome, SubmitError>,
    /// The process's exit code.
    pub code: u8,
    /// The line for stderr (to be prefixed with the program's name), when
    /// the submission did not succeed.
    pub message: Option<String>,
}

impl SubmitExit {
    /// The exit code and message of `outcome` (the table of the module
    /// docs). Runtimes use it for errors found before a node runs.
    pub fn new(outcome: Result<SubmitOutcome, impl Into<SubmitError>>) -> Self {
        let outcome = outcome.map_err(Into::into);
        let (code, message) = match &outcome {
            Ok(SubmitOutcome::Succeeded) => (EXIT_SUCCEEDED, None),
            Ok(SubmitOutcome::SlotsFailed(reasons)) => {
                (EXIT_SLOTS_FAILED, Some(format!("application failed: {}", reasons.join("; "))))
            }
            Ok(SubmitOutcome::FailedOver { to }) => (
                EXIT_FAILED_OVER,
                Some(format!(
                    "the framework failed over to another instance ({to}); this submit stops"
                )),
            ),
            Ok(SubmitOutcome::Interrupted) => (
                EXIT_INTERRUPTED,
                Some("interrupted; the executors keep running until the failover timeout".into()),
            ),
            Err(e) => (EXIT_ERROR, Some(format!("error: {e}"))),
        };
        SubmitExit { outcome, code, message }
    }
}

/// `30 s`, `1500 ms`: a duration for a line.
fn human(t: Millis) -> String {
    if t.0.is_multiple_of(1000) {
        format!("{} s", t.0 / 1000)
    } else {
        format!("{} ms", t.0)
    }
}

/// The node's own named deadlines (the subscriber keeps its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Timer {
    /// The submission is over: stop waiting for connections to end.
    Linger,
    /// [`Config::connect_timeout`] after the start: give up unless a
    /// master subscribed the framework by then.
    FirstMaster,
    /// [`Config::complete_timeout`] after a done submission asked the
    /// master to end its framework: stop waiting for the acceptance.
    Complete,
}

/// Where the end of a done submission's framework stands (see the module
/// docs).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Completion {
    /// The master was asked to end the framework; the submission's outcome
    /// (what the slots showed) waits for its answer.
    Asked(SubmitOutcome),
    /// The master accepted: the framework's end is durable.
    Accepted(SubmitOutcome),
    /// No acceptance, and no more waiting for one (the complete timeout
    /// passed, or the user interrupted): why, for a line.
    Unconfirmed(SubmitOutcome, String),
}

/// The submit node (see the module docs).
#[derive(Debug)]
pub struct SubmitNode {
    subscriber: Subscriber,
    dial_timeout: Millis,
    linger: Millis,
    deadlines: Deadlines<Timer>,
    next_dial: u64,
    /// The dial in progress to each master (a result for another dial of
    /// the same master, or of a master no longer dialled, is superseded).
    dialling: BTreeMap<Addr, DialId>,
    /// Open connections the subscriber knows, both ways.
    conns: BTreeMap<ConnId, Addr>,
    /// Connections masters dialled to the callback listener.
    callbacks: BTreeSet<ConnId>,
    by_master: BTreeMap<Addr, ConnId>,
    /// Connections the node closed whose end has not been fed yet.
    closing: BTreeSet<ConnId>,
    /// Every declared group, in declaration order.
    groups: Vec<GroupProgress>,
    /// Groups whose acceptance was shown.
    accepted: BTreeSet<String>,
    /// Groups whose end (every slot done or failed) was shown, when there
    /// are several.
    settled: BTreeSet<String>,
    /// The state last shown for each executor.
    shown_executors: BTreeMap<ExecutorId, ExecutorState>,
    /// The framework id last shown.
    framework: Option<FrameworkId>,
    /// Set when the subscriber machine stopped.
    stopped: Option<Result<SubmitOutcome, SubmitError>>,
    /// The progress summary last emitted.
    progress: Option<String>,
    /// A line was shown during the current `handle`.
    showed_line: bool,
    /// The submission is over; waiting for connections to end.
    ending: Option<SubmitExit>,
    exited: bool,
    connect_timeout: Option<Millis>,
    unreachable_line_interval: Millis,
    /// A master subscribed the framework at least once.
    ever_subscribed: bool,
    /// The last master that answered `Hello` as the leader (before the
    /// first subscription, it keeps the connect timeout from ending the
    /// submission).
    leader_answered: Option<Addr>,
    /// Before the first subscription: every master tried, with why the
    /// last attempt on it failed.
    unreached: BTreeMap<Addr, String>,
    /// When the last `cannot reach master` line was shown (before the
    /// first subscription).
    last_unreachable_line: Option<Millis>,
    /// The heartbeat interval last said in [`Output::ConnTimeouts`].
    told_heartbeat: Option<Millis>,
    /// [`Config::keep`].
    keep: bool,
    /// [`Config::complete_timeout`].
    complete_timeout: Millis,
    /// Once the submission is done (and not kept): the end of its framework.
    completion: Option<Completion>,
}

impl SubmitNode {
    /// A node that has not started; feed [`Input::Start`] and
    /// [`Input::Declare`].
    pub fn new(config: Config) -> Self {
        SubmitNode {
            subscriber: Subscriber::new(config.subscriber),
            dial_timeout: config.dial_timeout,
            linger: config.linger,
            deadlines: Deadlines::new(),
            next_dial: 1,
            dialling: BTreeMap::new(),
            conns: BTreeMap::new(),
            callbacks: BTreeSet::new(),
            by_master: BTreeMap::new(),
            closing: BTreeSet::new(),
            groups: Vec::new(),
            accepted: BTreeSet::new(),
            settled: BTreeSet::new(),
            shown_executors: BTreeMap::new(),
            framework: None,
            stopped: None,
            progress: None,
            showed_line: false,
            ending: None,
            exited: false,
            connect_timeout: config.connect_timeout,
            unreachable_line_interval: config.unreachable_line_interval,
            ever_subscribed: false,
            leader_answered: None,
            unreached: BTreeMap::new(),
            last_unreachable_line: None,
            told_heartbeat: None,
            keep: config.keep,
            complete_timeout: config.complete_timeout,
            completion: None,
        }
    }

    /// What the subscriber machine shows an observer.
    pub fn status(&self) -> SubscriberStatus {
        self.subscriber.status()
    }

    /// The subscriber machine (read-only).
    pub fn subscriber(&self) -> &Subscriber {
        &self.subscriber
    }

    /// The declared groups' progress, in declaration order.
    pub fn groups(&self) -> &[GroupProgress] {
        &self.groups
    }

    /// Slot counts summed over every declared group.
    pub fn counts(&self) -> ProgressCounts {
        let mut c = ProgressCounts::default();
        for g in &self.groups {
            let gc = g.counts();
            c.slots += gc.slots;
            c.running += gc.running;
            c.done += gc.done;
            c.failed += gc.failed;
            c.waiting += gc.waiting;
        }
        c
    }

    /// How the submission ends, once decided (before [`Output::Exit`] while
    /// connections are still closing).
    pub fn ending(&self) -> Option<&SubmitExit> {
        self.ending.as_ref()
    }

    /// `true` once [`Output::Exit`] was emitted.
    pub fn is_exited(&self) -> bool {
        self.exited
    }

    /// The earliest deadline, the subscriber's or the node's own; feed
    /// [`Input::Tick`] once it has passed.
    pub fn poll_timeout(&self) -> Option<Millis> {
        if self.exited {
            return None;
        }
        if self.ending.is_some() {
            // The subscriber is done with: only the linger counts.
            return self.deadlines.next();
        }
        [self.subscriber.poll_timeout(), self.deadlines.next()].into_iter().flatten().min()
    }

    /// The node's own deadlines (the subscriber's are
    /// [`Subscriber::deadline`]).
    pub fn deadlines(&self) -> &Deadlines<Timer> {
        &self.deadlines
    }

    /// Handles one input at time `now`.
    #[must_use]
    pub fn handle(&mut self, now: Millis, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        if self.exited {
            return out;
        }
        if self.ending.is_some() {
            self.linger_input(now, input, &mut out);
            return out;
        }
        self.showed_line = false;
        match input {
            Input::Start => {
                if let Some(t) = self.connect_timeout {
                    if !self.ever_subscribed && self.deadlines.get(Timer::FirstMaster).is_none() {
                        self.deadlines.set(Timer::FirstMaster, now + t);
                    }
                }
                self.feed(now, Event::Start, None, &mut out)
            }
            Input::Declare(spec) => {
                self.line(
                    format!(
                        "submitting {} x {:?} ({} cores, {} MiB each) as instance {}",
                        spec.slots,
                        spec.command,
                        spec.cores,
                        spec.memory_mb,
                        self.subscriber.config().instance
                    ),
                    &mut out,
                );
                let service = spec.policy.restart.mode == crate::policy::RestartMode::Service;
                let progress = GroupProgress::new(spec.group.clone(), spec.slots).service(service);
                match self.groups.iter_mut().find(|g| g.group() == spec.group) {
                    Some(g) => *g = progress,
                    None => self.groups.push(progress),
                }
                self.feed(now, Event::Declare(spec), None, &mut out);
            }
            Input::Dialled { dial, result } => self.on_dialled(now, dial, result, &mut out),
            Input::Accepted { conn } => {
                if self.ending.is_some() {
                    self.close(conn, "the submission is over".into(), &mut out);
                } else {
                    self.callbacks.insert(conn);
                }
            }
            Input::Message { conn, msg } if self.callbacks.contains(&conn) => {
                // Seed 002 (docs/design.md#seed-002): a new leader says where it is. A hint: the
                // subscriber moves only to a higher epoch, and there
                // subscribes as always.
                if let Message::MasterChanged { leader, .. } = &msg {
                    self.callbacks.remove(&conn);
                    self.close(conn, "the leader's news is taken".into(), &mut out);
                    let from = leader.addr.clone();
                    self.feed(now, Event::Message { from, msg }, None, &mut out);
                }
            }
            Input::Message { conn, msg } => {
                if let Some(from) = self.conns.get(&conn).cloned() {
                    if matches!(&msg, Message::HelloReply(r) if r.leading) {
                        self.leader_answered = Some(from.clone());
                    }
                    self.feed(now, Event::Message { from, msg }, None, &mut out);
                }
            }
            Input::Closed { conn, reason, .. } => {
                self.closing.remove(&conn);
                self.callbacks.remove(&conn);
                if let Some(master) = self.conns.remove(&conn) {
                    self.by_master.remove(&master);
                    if !self.ever_subscribed {
                        self.unreached
                            .insert(master.clone(), format!("connection closed: {reason}"));
                    }
                    self.feed(now, Event::Disconnected { master }, Some(&reason), &mut out);
                }
            }
            Input::Tick => {
                if self.subscriber.poll_timeout().is_some_and(|at| at <= now) {
                    self.feed(now, Event::Tick, None, &mut out);
                }
                for timer in self.deadlines.take_due(now) {
                    match timer {
                        Timer::Linger => {} // only set while ending
                        Timer::Complete => {
                            if let Some(Completion::Asked(o)) = self.completion.take() {
                                let why = format!(
                                    "the master did not confirm the end of the framework within {}",
                                    human(self.complete_timeout)
                                );
                                self.completion = Some(Completion::Unconfirmed(o, why));
                            }
                        }
                        Timer::FirstMaster => match &self.leader_answered {
                            _ if self.ever_subscribed => {}
                            Some(leader) => {
                                let t = self.connect_timeout.map(human).unwrap_or_default();
                                let line = format!(
                                    "the leader {leader} answers but has not subscribed the \
                                     framework within {t} (a slow store?); still trying"
                                );
                                self.line(line, &mut out);
                            }
                            None => {
                                let why = self.never_reached(self.connect_timeout);
                                self.stopped = Some(Err(SubmitError::Unreachable(why)));
                            }
                        },
                    }
                }
            }
            Input::Interrupt => {
                if let Some(Completion::Asked(o)) = self.completion.take() {
                    // The slots are done: the submission keeps its outcome,
                    // only the framework's end is unconfirmed.
                    let why = "interrupted before the master confirmed the end of the framework";
                    self.completion = Some(Completion::Unconfirmed(o, why.into()));
                } else {
                    self.end(now, Ok(SubmitOutcome::Interrupted), &mut out);
                    return out;
                }
            }
        }
        self.show_settled_groups(&mut out);
        match self.outcome() {
            Some(Ok(done @ (SubmitOutcome::Succeeded | SubmitOutcome::SlotsFailed(_))))
                if !self.keep && self.completion.is_none() =>
            {
                self.complete(now, done, &mut out);
                self.show_progress(&mut out);
            }
            Some(outcome) => self.end(now, outcome, &mut out),
            None => self.show_progress(&mut out),
        }
        if let Some(heartbeat) = self.subscriber.heartbeat_interval() {
            if self.told_heartbeat.replace(heartbeat) != Some(heartbeat) {
                out.push(Output::ConnTimeouts { heartbeat });
            }
        }
        out
    }

    /// With several groups, one line per group once all its slots are done
    /// or failed (`group mappers: all 4 slots done`, `group mappers: 3 done,
    /// 1 failed`): the progress of a job group by group. One group's end is
    /// the closing line.
    fn show_settled_groups(&mut self, out: &mut Vec<Output>) {
        if self.groups.len() < 2 {
            return;
        }
        let mut lines = Vec::new();
        for g in &self.groups {
            if self.settled.contains(g.group()) {
                continue;
            }
            let text = match g.outcome() {
                Some(Ok(SubmitOutcome::Succeeded)) => match g.counts().slots {
                    1 => format!("group {}: its slot is done", g.group()),
                    n => format!("group {}: all {n} slots done", g.group()),
                },
                Some(Ok(SubmitOutcome::SlotsFailed(_))) => {
                    let c = g.counts();
                    format!("group {}: {} done, {} failed", g.group(), c.done, c.failed)
                }
                _ => continue,
            };
            lines.push((g.group().to_owned(), text));
        }
        for (group, text) in lines {
            self.settled.insert(group);
            self.line(text, out);
        }
    }

    /// One subscriber `handle` call and its actions. `context` is what the
    /// runtime said about the input (a close reason), shown with a lost
    /// subscription.
    fn feed(&mut self, now: Millis, event: Event, context: Option<&str>, out: &mut Vec<Output>) {
        for action in self.subscriber.handle(now, event) {
            self.execute(action, context, out);
        }
    }

    fn execute(&mut self, action: Action, context: Option<&str>, out: &mut Vec<Output>) {
        match action {
            Action::Connect { master } => {
                let dial = DialId(self.next_dial);
                self.next_dial += 1;
                self.dialling.insert(master.clone(), dial);
                out.push(Output::Dial { dial, master, timeout: self.dial_timeout });
            }
            Action::Send { to, msg } => {
                if let Some(conn) = self.by_master.get(&to) {
                    out.push(Output::Send { conn: *conn, msg });
                }
            }
            Action::Close { master, reason } => {
                // A dial in progress is abandoned: its result is superseded.
                self.dialling.remove(&master);
                if let Some(conn) = self.by_master.remove(&master) {
                    self.conns.remove(&conn);
                    self.close(conn, reason, out);
                }
            }
            app => self.observe(app, context, out),
        }
    }

    fn close(&mut self, conn: ConnId, reason: String, out: &mut Vec<Output>) {
        self.closing.insert(conn);
        out.push(Output::Close { conn, reason });
    }

    fn on_dialled(&mut self, now: Millis, dial: DialId, result: DialResult, out: &mut Vec<Output>) {
        let master = self.dialling.iter().find(|(_, d)| **d == dial).map(|(m, _)| m.clone());
        let Some(master) = master else {
            // Superseded: the subscriber no longer waits for this dial.
            if let DialResult::Connected { conn, .. } = result {
                self.close(conn, format!("{dial} was abandoned"), out);
            }
            return;
        };
        self.dialling.remove(&master);
        match result {
            DialResult::Connected { conn, .. } => {
                // The subscriber closes before it dials again, so no other
                // connection to this master is open; if one were, it goes.
                if let Some(old) = self.by_master.insert(master.clone(), conn) {
                    self.conns.remove(&old);
                    self.close(old, format!("replaced by a new connection to {master}"), out);
                }
                self.conns.insert(conn, master.clone());
                self.feed(now, Event::Connected { master }, None, out);
            }
            DialResult::Failed { reason, .. } => {
                if self.ever_subscribed {
                    self.line(format!("cannot reach master {master}: {reason}"), out);
                } else {
                    self.unreached.insert(master.clone(), reason.to_string());
                    let due = match self.last_unreachable_line {
                        None => true,
                        Some(at) => now >= at + self.unreachable_line_interval,
                    };
                    if due {
                        self.last_unreachable_line = Some(now);
                        let next = match self.connect_timeout {
                            Some(t) => format!(
                                "; retrying {} (giving up {} after the start)",
                                self.masters_list(),
                                human(t)
                            ),
                            None => format!("; retrying {}", self.masters_list()),
                        };
                        self.line(format!("cannot reach master {master}: {reason}{next}"), out);
                    }
                }
                self.feed(now, Event::ConnectFailed { master }, None, out);
            }
        }
    }

    /// Takes in one app-facing action: progress, lines, then the action
    /// itself for observers.
    fn observe(&mut self, action: Action, context: Option<&str>, out: &mut Vec<Output>) {
        for g in &mut self.groups {
            g.observe(&action);
        }
        match &action {
            Action::Subscribed { framework, master, executors } => {
                if !self.ever_subscribed {
                    self.ever_subscribed = true;
                    self.unreached.clear();
                    self.deadlines.cancel(Timer::FirstMaster);
                }
                if self.framework.as_ref() != Some(framework) {
                    self.line(format!("framework {framework}"), out);
                    self.framework = Some(framework.clone());
                }
                self.line(format!("subscribed to {master}"), out);
                for info in executors {
                    self.executor(info, out);
                }
            }
            Action::ExecutorUpdate(info) => self.executor(info, out),
            Action::RequestAccepted { command: Request::Declare { group }, .. }
                if self.groups.iter().any(|g| g.group() == group) =>
            {
                if self.accepted.insert(group.clone()) {
                    let slots = self
                        .groups
                        .iter()
                        .find(|g| g.group() == group)
                        .map_or(0, |g| g.counts().slots);
                    self.line(format!("group {group} accepted ({slots} slots)"), out);
                }
            }
            Action::RequestAccepted { command: Request::Teardown, .. } => {
                if let Some(Completion::Asked(o)) = self.completion.take() {
                    self.completion = Some(Completion::Accepted(o));
                }
            }
            Action::RequestRefused { command: Request::Teardown, reason, .. } => {
                if let Some(Completion::Asked(o)) = self.completion.take() {
                    let why = format!("the master refused to end the framework ({reason})");
                    self.completion = Some(Completion::Unconfirmed(o, why));
                }
                if let Some(line) = describe(&action) {
                    self.line(line, out);
                }
            }
            Action::Disconnected { reason } => {
                let line = match context {
                    Some(c) => format!("disconnected: {reason} ({c})"),
                    None => format!("disconnected: {reason}"),
                };
                self.line(line, out);
            }
            Action::Exit { reason, failed_over_to } => {
                self.line(reason.clone(), out);
                self.stopped = Some(match failed_over_to {
                    Some(to) => Ok(SubmitOutcome::FailedOver { to: to.to_string() }),
                    None => Err(SubmitError::Stopped { reason: reason.clone() }),
                });
            }
            other => {
                if let Some(line) = describe(other) {
                    self.line(line, out);
                }
            }
        }
        out.push(Output::Observed(action));
    }

    /// The masters this node knows of (configured and learned), for lines.
    fn masters_list(&self) -> String {
        let mut all: Vec<String> =
            self.subscriber.config().masters.iter().map(|m| m.to_string()).collect();
        for m in self.unreached.keys() {
            let m = m.to_string();
            if !all.contains(&m) {
                all.push(m);
            }
        }
        all.join(", ")
    }

    /// The error of a submission that never reached a master: every master
    /// tried, with why its last attempt failed.
    fn never_reached(&self, after: Option<Millis>) -> String {
        let mut tried: Vec<String> =
            self.unreached.iter().map(|(m, why)| format!("{m}: {why}")).collect();
        for m in &self.subscriber.config().masters {
            if !self.unreached.contains_key(m) {
                tried.push(format!("{m}: no answer"));
            }
        }
        let after = after.map(|t| format!(" within {}", human(t))).unwrap_or_default();
        format!(
            "no master subscribed the framework{after} (tried {}): {}",
            tried.len(),
            tried.join("; ")
        )
    }

    /// Shows an executor's state when it changed since last shown.
    fn executor(&mut self, info: &ExecutorInfo, out: &mut Vec<Output>) {
        if self.shown_executors.get(&info.id) != Some(&info.state) {
            self.shown_executors.insert(info.id.clone(), info.state.clone());
            self.line(executor_line(info), out);
        }
    }

    fn line(&mut self, text: String, out: &mut Vec<Output>) {
        self.showed_line = true;
        out.push(Output::Show(Show::Line(text)));
    }

    fn show_progress(&mut self, out: &mut Vec<Output>) {
        if self.groups.is_empty() {
            return;
        }
        let counts = |c: ProgressCounts| {
            format!("{}/{} running, {} done, {} failed", c.running, c.slots, c.done, c.failed)
        };
        // Group by group when there are several: `[driver 1/1 running, 0
        // done, 0 failed | mappers 2/4 running, 1 done, 0 failed]`.
        let text = if self.groups.len() > 1 {
            let parts: Vec<String> = self
                .groups
                .iter()
                .map(|g| format!("{} {}", g.group(), counts(g.counts())))
                .collect();
            format!("[{}]", parts.join(" | "))
        } else {
            format!("[{}]", counts(self.counts()))
        };
        if self.showed_line || self.progress.as_deref() != Some(text.as_str()) {
            self.progress = Some(text.clone());
            out.push(Output::Show(Show::Progress(text)));
        }
    }

    /// How the submission ends, if the subscriber or the slots say so: the
    /// machine's stop or a group's stop first, then completion once every
    /// group shows one.
    fn outcome(&self) -> Option<Result<SubmitOutcome, SubmitError>> {
        match &self.completion {
            Some(Completion::Asked(o)) => {
                // The machine stops once the master accepted the end (seen
                // first, as `Accepted`), or when the leader refuses the
                // subscription of a framework that has finished: its end
                // was recorded already. Taken over meanwhile: that stands.
                return match &self.stopped {
                    Some(Ok(over @ SubmitOutcome::FailedOver { .. })) => Some(Ok(over.clone())),
                    Some(_) => Some(Ok(o.clone())),
                    None => None,
                };
            }
            Some(Completion::Accepted(o) | Completion::Unconfirmed(o, _)) => {
                return Some(Ok(o.clone()))
            }
            None => {}
        }
        if let Some(stopped) = &self.stopped {
            return Some(stopped.clone());
        }
        if self.groups.is_empty() {
            return None;
        }
        let outcomes: Vec<_> = self.groups.iter().map(GroupProgress::outcome).collect();
        let settled = |o: &Result<SubmitOutcome, SubmitError>| {
            matches!(o, Ok(SubmitOutcome::Succeeded | SubmitOutcome::SlotsFailed(_)))
        };
        if let Some(stop) = outcomes.iter().flatten().find(|o| !settled(o)) {
            return Some(stop.clone());
        }
        let many = self.groups.len() > 1;
        let mut failed = Vec::new();
        for (g, o) in self.groups.iter().zip(outcomes) {
            if let Ok(SubmitOutcome::SlotsFailed(reasons)) = o? {
                for r in reasons {
                    failed.push(if many { format!("group {}: {r}", g.group()) } else { r });
                }
            }
        }
        Some(Ok(if failed.is_empty() {
            SubmitOutcome::Succeeded
        } else {
            SubmitOutcome::SlotsFailed(failed)
        }))
    }

    /// The submission is done (`outcome`, from the slots): ask the master to
    /// end the framework and wait (at most the complete timeout) for its
    /// acceptance.
    fn complete(&mut self, now: Millis, outcome: SubmitOutcome, out: &mut Vec<Output>) {
        let fw = self.framework.as_ref().map(|f| f.to_string()).unwrap_or_default();
        let recorded = match outcome {
            SubmitOutcome::Succeeded => "COMPLETED",
            _ => "FAILED",
        };
        self.line(format!("ending framework {fw} (to be recorded as {recorded})"), out);
        self.completion = Some(Completion::Asked(outcome));
        self.deadlines.set(Timer::Complete, now + self.complete_timeout);
        self.feed(now, Event::Teardown, None, out);
    }

    /// What became of the framework of a done submission, for the closing
    /// line (`None` for any other outcome).
    fn framework_end(&self, outcome: &Result<SubmitOutcome, SubmitError>) -> Option<String> {
        if !matches!(outcome, Ok(SubmitOutcome::Succeeded | SubmitOutcome::SlotsFailed(_))) {
            return None;
        }
        let timeout = duration_text(self.subscriber.config().failover_timeout);
        Some(match &self.completion {
            Some(Completion::Accepted(_)) => "the framework has ended".into(),
            Some(Completion::Asked(_)) => {
                "the framework had finished already (the leader refused its subscription)".into()
            }
            Some(Completion::Unconfirmed(_, why)) => {
                format!("{why}: it may end only at its failover timeout ({timeout})")
            }
            None => {
                format!("the framework is kept (--keep) until its failover timeout ({timeout})")
            }
        })
    }

    /// The submission is over: close everything, show the outcome, and
    /// exit once the connections have ended (or the linger time passed).
    fn end(
        &mut self,
        now: Millis,
        outcome: Result<SubmitOutcome, SubmitError>,
        out: &mut Vec<Output>,
    ) {
        self.dialling.clear();
        self.by_master.clear();
        for conn in std::mem::take(&mut self.conns).into_keys() {
            self.close(conn, "the submission is over".into(), out);
        }
        for conn in std::mem::take(&mut self.callbacks) {
            self.close(conn, "the submission is over".into(), out);
        }
        let mut summary = self.summary(&outcome);
        if let Some(end) = self.framework_end(&outcome) {
            summary = format!("{summary}; {end}");
        }
        self.line(summary, out);
        self.deadlines = Deadlines::new();
        self.deadlines.set(Timer::Linger, now + self.linger);
        self.ending = Some(SubmitExit::new(outcome));
        self.exit_if_closed(out);
    }

    /// While ending: dials still finishing are closed, ends are counted,
    /// nothing else matters.
    fn linger_input(&mut self, now: Millis, input: Input, out: &mut Vec<Output>) {
        match input {
            Input::Dialled { dial, result: DialResult::Connected { conn, .. } } => {
                self.close(conn, format!("{dial} was abandoned: the submission is over"), out)
            }
            Input::Closed { conn, .. } => {
                self.closing.remove(&conn);
            }
            // Waited long enough.
            Input::Tick if self.deadlines.take_due(now).contains(&Timer::Linger) => {
                self.closing.clear()
            }
            _ => {}
        }
        self.exit_if_closed(out);
    }

    fn exit_if_closed(&mut self, out: &mut Vec<Output>) {
        if !self.closing.is_empty() {
            return;
        }
        if let Some(exit) = self.ending.clone() {
            self.exited = true;
            self.deadlines = Deadlines::new();
            out.push(Output::Exit(exit));
        }
    }

    /// The closing line naming the outcome.
    fn summary(&self, outcome: &Result<SubmitOutcome, SubmitError>) -> String {
        let slots = self.counts().slots;
        let fw = self.framework.as_ref().map(|f| f.to_string());
        match outcome {
            Ok(SubmitOutcome::Succeeded) => format!(
                "done: all {slots} executors of framework {} exited 0",
                fw.unwrap_or_default()
            ),
            Ok(SubmitOutcome::SlotsFailed(reasons)) => {
                format!("failed: {} of {slots} slots failed", reasons.len())
            }
            Ok(SubmitOutcome::FailedOver { to }) => {
                format!("stopped: the framework now belongs to instance {to}")
            }
            Ok(SubmitOutcome::Interrupted) => match fw {
                Some(fw) => format!(
                    "interrupted: framework {fw} is left running (its executors are kept for \
                     {} without a subscriber); take it over with \
                     `regent submit --framework-id {fw}` and the same spec",
                    duration_text(self.subscriber.config().failover_timeout)
                ),
                None => "interrupted before subscribing".into(),
            },
            Err(e) => format!("error: {e}"),
        }
    }
}

/// `30s`, `1500ms`.
fn duration_text(d: Millis) -> String {
    if d.0.is_multiple_of(1000) {
        format!("{}s", d.0 / 1000)
    } else {
        format!("{}ms", d.0)
    }
}

/// One app-facing action of the subscriber machine as a plain line (`None`
/// for protocol actions).
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
        Action::GroupScaled { group, slots } => {
            format!("group {group} was scaled to {slots} slots by an operator")
        }
        Action::RequestAccepted { request: id, command } => {
            format!("request {id} ({}) accepted", request(command))
        }
        Action::RequestRefused { request: id, command, reason } => {
            format!("request {id} ({}) refused: {reason}", request(command))
        }
        Action::Error { message } => format!("master error: {message}"),
        Action::Rejected { from, reason } => {
            format!("ignored a message from master {from}: {reason}")
        }
        Action::Disconnected { reason } => format!("disconnected: {reason}"),
        Action::Exit { reason, .. } => reason.clone(),
        Action::Connect { .. } | Action::Send { .. } | Action::Close { .. } => return None,
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
    let line = format!("{} slot {}{on}: {}", info.id, info.slot, state_text(&info.state));
    let line = match listening(info) {
        Some(at) if !info.state.is_terminal() => format!("{line} {at}"),
        _ => line,
    };
    if info.resources.is_empty() || info.state.is_terminal() {
        return line;
    }
    format!("{line} {}", crate::resources::describe(&info.resources))
}

/// Where an executor's named ports are reached, `http=HOST:PORT
/// admin=HOST:PORT` (the port alone when its worker named no host); `None`
/// when it holds none.
pub fn listening(info: &ExecutorInfo) -> Option<String> {
    if info.ports.is_empty() {
        return None;
    }
    let at = |port: u16| match &info.host {
        Some(h) if h.contains(':') => format!("[{h}]:{port}"),
        Some(h) => format!("{h}:{port}"),
        None => port.to_string(),
    };
    Some(info.ports.iter().map(|(n, p)| format!("{n}={}", at(*p))).collect::<Vec<_>>().join(" "))
}

/// How an executor state is shown (`RUNNING`, `EXITED 1`, `FAILED: <why>`...).
pub fn state_text(state: &ExecutorState) -> String {
    let name = state.name();
    match state {
        ExecutorState::Exited { code } => format!("{name} {code}"),
        ExecutorState::Failed { reason } => format!("{name}: {reason}"),
        _ => name.into(),
    }
}

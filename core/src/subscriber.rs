//! The subscriber machine: the framework side of SUBSCRIBE (docs/design.md#seed-001).
//!
//! A subscriber holds **at most one** subscription, on one connection to the
//! master it believes leads:
//!
//! * it finds the leader from its list of masters: it dials one, sends
//!   `Hello` (role [`Role::Subscriber`]) then `Subscribe`; a standby answers
//!   `NotLeader` (or a non-leading `HelloReply`) and the subscriber follows
//!   the leader hint when the hint's epoch is not older than the highest it
//!   has seen (and, at an equal epoch, names a master not yet tried this
//!   round), otherwise it tries the next master. A *round* tries every known
//!   master once; then it backs off (capped exponential, seeded jitter). The
//!   backoff resets after a `Subscribed`. Masters advertised in `HelloReply`
//!   and `MasterChanged` are added to the list;
//! * it closes its old connection *before* it sends a new SUBSCRIBE: the
//!   `Close` action always precedes the next `Connect`, and a `Subscribe` is
//!   only sent on a connection opened after every older one was closed. This
//!   is the scheduler's half of the seed's contract (the master closes the
//!   older connection of the same framework after sending it an ERROR);
//! * every SUBSCRIBE carries the framework id once one is known, this
//!   process's instance id and an attempt number that grows with each try;
//! * a heartbeat watchdog: no message from the subscribed master for
//!   `heartbeat_timeout_factor` heartbeat intervals means the connection is
//!   dead (seed scenario 2: the master closed it, we did not notice): close
//!   it and resubscribe after a backoff;
//! * a subscription attempt unanswered for `subscribe_timeout` is abandoned
//!   (seed scenario 5): its connection is closed before the next attempt.
//!   Each attempt abandoned that way doubles the next one's timeout, up to
//!   `subscribe_timeout_max` (30 s), with seeded jitter; a `Subscribed`
//!   resets it (docs/design.md#progress-when-dependencies-are-slow). A leader whose store takes 10 s to make
//!   the subscription durable is slow, not a livelock: every retry makes
//!   the master write again, so a fixed timeout shorter than the write
//!   would abandon every attempt just before its answer. A
//!   `FrameworkHeartbeat` on the attempt's connection (the leader accepted
//!   the SUBSCRIBE and is making it durable) pushes the attempt's deadline
//!   to one attempt timeout from then: the attempt waits for as long as the
//!   leader says it is alive, and never queues a second write behind the
//!   first;
//! * the masters a peer advertises (`HelloReply`, `MasterChanged`, a
//!   callback hint) are checked against
//!   [`MAX_ADVERTISED_MASTERS`](crate::limits::MAX_ADVERTISED_MASTERS) and
//!   [`MAX_ADDR_BYTES`](crate::limits::MAX_ADDR_BYTES) before anything is
//!   learned: a message past them is ignored as a whole, and reported
//!   ([`Action::Rejected`], counted in [`Subscriber::rejected`]);
//! * a master message with an epoch lower than the highest seen is ignored
//!   (docs/design.md#epochs-fence-everything); a `MasterChanged` with a higher epoch moves the
//!   subscription to the new leader (close, then subscribe there);
//! * a `FrameworkError` saying the framework failed over to *another*
//!   instance stops the machine for good ([`Action::Exit`] naming that
//!   instance, seed scenario 4); any other error is reported and retried;
//! * the embedding program's commands ([`Event::Declare`], [`Event::Kill`],
//!   [`Event::Teardown`]) become requests with increasing ids. Declarations
//!   are remembered and re-sent after every (re)subscription, so the master's
//!   idempotent handling adopts executors that are already running; kills and
//!   a teardown not yet answered are re-sent too.
//!
//! Connections are named by the master's address, as in the worker machine.
//! The runtime keeps at most one connection per address and, once it executed
//! a `Close`, feeds nothing more from that connection, so a reply to an
//! abandoned attempt (a `Subscribed` sent on connection A after we closed A)
//! never reaches the machine; replies from a master that is not the one of
//! the current attempt, or arriving while the new connection is still being
//! dialled, are ignored as well.

use crate::deadlines::Deadlines;
use crate::ids::{Addr, Epoch, ExecutorId, FrameworkId, InstanceId};
use crate::limits::{advertised_in_message_problem, MAX_ADVERTISED_MASTERS};
use crate::protocol::{
    ExecutorInfo, GroupSpec, Hello, LeaderHint, Message, Role, Subscribe, PROTOCOL_VERSION,
};
use crate::rng::Jitter;
use crate::time::Millis;
use std::collections::{BTreeMap, BTreeSet};

/// Subscriber configuration. Defaults are documented on each field.
#[derive(Clone, Debug)]
pub struct Config {
    /// The cluster name sent in `Hello`.
    pub cluster: String,
    /// The framework's name (sent in `Hello` and `Subscribe`).
    pub name: String,
    /// This process's instance id, fresh per process start (drawn by the
    /// runtime from OS entropy).
    pub instance: InstanceId,
    /// The framework id to resume, when the submitter chose one or a previous
    /// instance was assigned one. Default `None`: the master assigns it on
    /// the first `Subscribed`.
    pub framework: Option<FrameworkId>,
    /// The configured masters, tried in this order.
    pub masters: Vec<Addr>,
    /// Sent in `Subscribe`: how long the master keeps the framework's
    /// executors while no subscriber is connected. Default 60 s, so a
    /// subscriber restart or a master failover does not kill them.
    pub failover_timeout: Millis,
    /// Seed of the jitter generator. Default: the instance id.
    pub seed: u64,
    /// An attempt (dial, `Hello`, `Subscribe`) not answered by `Subscribed`,
    /// `NotLeader` or an error within this time is abandoned: its connection
    /// is closed and the next master is tried. Default 5 s. This is the
    /// first attempt's timeout; see `subscribe_timeout_max`.
    pub subscribe_timeout: Millis,
    /// After an attempt is abandoned for want of an answer, the next
    /// attempt's timeout is twice the last one's nominal value, up to this
    /// cap, and drawn from 100%..=125% of it (seeded jitter, none when
    /// `jitter_min_pct` is 100); a `Subscribed` resets it to
    /// `subscribe_timeout`. The master makes every SUBSCRIBE durable
    /// before it answers, so the cap must exceed the slowest store write
    /// the cluster should survive (docs/design.md#progress-when-dependencies-are-slow: 10 s, behind one batch
    /// already in flight). Default 30 s.
    pub subscribe_timeout_max: Millis,
    /// The subscribed connection is dead after this many heartbeat intervals
    /// (the interval comes in `Subscribed`) without any message from the
    /// master. Default 5.
    pub heartbeat_timeout_factor: u64,
    /// A lost subscription is retried first after a delay drawn uniformly
    /// from `0..=reconnect_first_max` (a restarted master is found at once,
    /// and many subscribers do not retry in one instant); later rounds back
    /// off. Default 10 ms.
    pub reconnect_first_max: Millis,
    /// Where this subscriber's callback listener takes masters' connections
    /// (sent after `Hello`, kept in the framework's record: a new leader
    /// dials it, seed 002 (docs/design.md#seed-002)). `None`: no listener.
    pub callback: Option<Addr>,
    /// First (and post-success) backoff delay. Default 200 ms.
    pub backoff_min: Millis,
    /// The cap of the exponential backoff. Default 10 s.
    pub backoff_max: Millis,
    /// A backoff delay is drawn uniformly from `jitter_min_pct`%..=100% of
    /// the nominal delay. Default 50; 100 disables jitter.
    pub jitter_min_pct: u64,
    /// Declare the groups as updates (`regent run --update`):
    /// `UpdateGroup` with this `max_parallel`, so a group declared before
    /// with another spec is replaced slot by slot instead of refused.
    /// Default `None`: `DeclareGroup`.
    pub update: Option<u32>,
    /// Sent in `Subscribe`: the tenant a new framework belongs to
    /// (docs/tenants.md). Default `None`: the credential's, else `default`.
    pub tenant: Option<String>,
}

impl Config {
    /// A configuration with the documented defaults.
    pub fn new(
        cluster: impl Into<String>,
        name: impl Into<String>,
        instance: InstanceId,
        masters: Vec<Addr>,
    ) -> Self {
        Config {
            cluster: cluster.into(),
            name: name.into(),
            instance,
            framework: None,
            masters,
            failover_timeout: Millis::from_secs(60),
            seed: instance.0,
            subscribe_timeout: Millis::from_secs(5),
            subscribe_timeout_max: Millis::from_secs(30),
            heartbeat_timeout_factor: 5,
            reconnect_first_max: Millis(10),
            callback: None,
            backoff_min: Millis(200),
            backoff_max: Millis::from_secs(10),
            jitter_min_pct: 50,
            update: None,
            tenant: None,
        }
    }
}

/// What happens to a subscriber: connection events from the runtime, and
/// commands from the embedding program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The process started: subscribe.
    Start,
    /// The connection to `master` is open (nothing sent yet).
    Connected {
        /// The master dialled.
        master: Addr,
    },
    /// Dialling `master` failed.
    ConnectFailed {
        /// The master dialled.
        master: Addr,
    },
    /// The connection to `master` closed (not after our own `Close`).
    Disconnected {
        /// The master whose connection closed.
        master: Addr,
    },
    /// A message arrived from `from`.
    Message {
        /// The master that sent it.
        from: Addr,
        /// The message.
        msg: Message,
    },
    /// [`Subscriber::poll_timeout`] has passed: every deadline due at `now`
    /// fires.
    Tick,
    /// Command: declare (or redeclare) an executor group. Remembered and
    /// re-sent after every (re)subscription; a later declaration of the same
    /// group replaces it.
    Declare(GroupSpec),
    /// Command: kill one executor of the framework.
    Kill(ExecutorId),
    /// Command: remove the framework and all its executors. The remembered
    /// declarations are forgotten at once; when the master accepts, the
    /// subscriber closes its connection and emits [`Action::Exit`].
    Teardown,
}

/// What a request was about, in [`Action::RequestAccepted`] and
/// [`Action::RequestRefused`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// A group declaration.
    Declare {
        /// The group.
        group: String,
    },
    /// A kill.
    Kill {
        /// The executor.
        executor: ExecutorId,
    },
    /// The framework's teardown.
    Teardown,
}

/// What the runtime (protocol actions) and the embedding program
/// (app-facing outcomes) must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open a connection to `master`, then feed `Connected` or
    /// `ConnectFailed`. Emitted only when the subscriber holds no other
    /// connection (any older one was closed by an earlier `Close`).
    Connect {
        /// Where to dial.
        master: Addr,
    },
    /// Send `msg` on the connection to `to` (drop it if that connection is
    /// gone).
    Send {
        /// The master.
        to: Addr,
        /// The message.
        msg: Message,
    },
    /// Close the connection to `master` (or abandon the dial in progress)
    /// without feeding `Disconnected` back, and feed nothing more that
    /// arrives on it. Must be executed before the actions that follow it.
    Close {
        /// The master.
        master: Addr,
        /// Why, for the log.
        reason: String,
    },
    /// App-facing: the framework is subscribed with `master`; `executors` is
    /// the master's snapshot of the framework's executors (replaces whatever
    /// the program knew).
    Subscribed {
        /// The framework's id.
        framework: FrameworkId,
        /// The leader subscribed with.
        master: Addr,
        /// Every executor the master knows of.
        executors: Vec<ExecutorInfo>,
    },
    /// App-facing: an executor changed.
    ExecutorUpdate(ExecutorInfo),
    /// App-facing: a slot of a group cannot be filled.
    SlotFailed {
        /// The group.
        group: String,
        /// The slot.
        slot: u32,
        /// Why.
        reason: String,
    },
    /// App-facing: an operator scaled a group to `slots` slots (`regent
    /// scale`); slots from `slots` on no longer exist.
    GroupScaled {
        /// The group.
        group: String,
        /// Its slot count now.
        slots: u32,
    },
    /// App-facing: a request is in effect.
    RequestAccepted {
        /// Its id (as sent in the request message).
        request: u64,
        /// What it was.
        command: Request,
    },
    /// App-facing: a request was refused (a refused declaration is forgotten
    /// and not re-sent).
    RequestRefused {
        /// Its id.
        request: u64,
        /// What it was.
        command: Request,
        /// Why.
        reason: String,
    },
    /// App-facing: the master reported an error (Mesos ERROR); the
    /// subscriber retries by itself.
    Error {
        /// The master's message.
        message: String,
    },
    /// Purely observational: a message from `from` broke a limit on peer
    /// input (docs/design.md#peer-input-never-panics) and was ignored as a whole. Log it (a warning:
    /// a broken or hostile master); [`Subscriber::rejected`] counts them.
    Rejected {
        /// The master (the connection's, or the one a callback hint named).
        from: Addr,
        /// Which limit, and by how much.
        reason: String,
    },
    /// App-facing: the subscription is lost; the subscriber resubscribes by
    /// itself (executor updates may have been missed: the next `Subscribed`
    /// carries a fresh snapshot).
    Disconnected {
        /// Why.
        reason: String,
    },
    /// Stop the process with an error naming `reason`: the framework failed
    /// over to another instance, or was torn down. The machine ignores every
    /// later event.
    Exit {
        /// Why.
        reason: String,
        /// The instance the framework failed over to, when that is why the
        /// machine stops (`None` after a teardown).
        failed_over_to: Option<InstanceId>,
    },
}

/// The subscriber's named deadlines: the machine keeps them in its own
/// table and answers [`Subscriber::poll_timeout`]; [`Subscriber::deadline`]
/// names each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Timer {
    /// The current attempt (dial + SUBSCRIBE) is overdue.
    Attempt,
    /// Check the subscribed master's liveness.
    Watchdog,
    /// Backoff over: start a new round of attempts.
    Retry,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ConnState {
    /// `Connect` emitted, no `Connected` yet.
    Dialling,
    /// `Hello` and `Subscribe` sent, no answer yet.
    Subscribing,
    /// `Subscribed` received on this connection.
    Subscribed,
}

#[derive(Clone, Debug)]
struct Conn {
    master: Addr,
    state: ConnState,
}

/// What a subscriber shows an observer (tests, status pages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriberStatus {
    /// Subscribed right now.
    pub subscribed: bool,
    /// The master of the current connection or attempt, if any.
    pub master: Option<Addr>,
    /// The framework id, once known.
    pub framework: Option<FrameworkId>,
    /// The attempt number of the last `Subscribe` sent (0 before the first).
    pub attempt: u64,
    /// The highest epoch seen.
    pub max_epoch: Epoch,
    /// Exited (the machine ignores further events).
    pub exited: bool,
}

/// The subscriber machine.
#[derive(Debug)]
pub struct Subscriber {
    config: Config,
    jitter: Jitter,
    /// Every known master, configured first, then learned ones.
    masters: Vec<Addr>,
    /// The master to try first in a round: the last proven leader or the
    /// last hint followed.
    preferred: Option<Addr>,
    /// The same masters as `masters`, for membership tests (a list of up to
    /// [`MAX_ADVERTISED_MASTERS`] is merged in one pass, not in its square).
    known: BTreeSet<Addr>,
    /// Masters tried in the current round.
    tried: BTreeSet<Addr>,
    conn: Option<Conn>,
    started: bool,
    exited: bool,
    framework: Option<FrameworkId>,
    attempt: u64,
    max_epoch: Epoch,
    backoff: Millis,
    /// The nominal timeout of the next attempt (grows while attempts go
    /// unanswered, see [`Config::subscribe_timeout_max`]).
    attempt_timeout: Millis,
    /// Messages ignored for breaking a limit.
    rejected: u64,
    /// The pending deadlines.
    timers: Deadlines<Timer>,
    heartbeat_interval: Millis,
    last_seen: Millis,
    next_request: u64,
    /// Remembered declarations, by group: the spec and the id of the request
    /// that last sent it (0 when not sent on the current subscription).
    groups: BTreeMap<String, (GroupSpec, u64)>,
    /// Kills and a teardown not yet answered, in order, with the id of the
    /// request that last sent them (0 when not sent yet).
    unanswered: Vec<(Request, u64)>,
}

impl Subscriber {
    /// A subscriber that has not started yet; feed [`Event::Start`].
    pub fn new(config: Config) -> Self {
        let mut masters: Vec<Addr> = Vec::new();
        for m in &config.masters {
            if !masters.contains(m) {
                masters.push(m.clone());
            }
        }
        Subscriber {
            jitter: Jitter::new(config.seed),
            known: masters.iter().cloned().collect(),
            masters,
            preferred: None,
            tried: BTreeSet::new(),
            conn: None,
            started: false,
            exited: false,
            framework: config.framework.clone(),
            attempt: 0,
            max_epoch: Epoch::ZERO,
            backoff: config.backoff_min,
            attempt_timeout: config.subscribe_timeout,
            rejected: 0,
            timers: Deadlines::new(),
            heartbeat_interval: Millis::ZERO,
            last_seen: Millis::ZERO,
            next_request: 1,
            groups: BTreeMap::new(),
            unanswered: Vec::new(),
            config,
        }
    }

    /// How often the master heartbeats the subscription (known once
    /// subscribed). The runtime scales its connections' timeouts with it.
    pub fn heartbeat_interval(&self) -> Option<Millis> {
        Some(self.heartbeat_interval).filter(|h| *h > Millis::ZERO)
    }

    /// What the subscriber shows an observer.
    pub fn status(&self) -> SubscriberStatus {
        SubscriberStatus {
            subscribed: self.subscribed(),
            master: self.conn.as_ref().map(|c| c.master.clone()),
            framework: self.framework.clone(),
            attempt: self.attempt,
            max_epoch: self.max_epoch,
            exited: self.exited,
        }
    }

    /// The subscriber's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Every master the subscriber knows of, in the order it tries them.
    pub fn known_masters(&self) -> &[Addr] {
        &self.masters
    }

    /// How many messages were ignored for breaking a limit on peer input
    /// (each one also came out as [`Action::Rejected`]).
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// The nominal timeout the next subscription attempt gets (the first
    /// attempt's `subscribe_timeout`, doubled after each unanswered one up
    /// to `subscribe_timeout_max`).
    pub fn attempt_timeout(&self) -> Millis {
        self.attempt_timeout
    }

    /// The declarations remembered (re-sent after every subscription).
    pub fn declarations(&self) -> impl Iterator<Item = &GroupSpec> {
        self.groups.values().map(|(spec, _)| spec)
    }

    /// The earliest deadline of this machine; feed [`Event::Tick`] at or
    /// after it. `None` once exited: an exited subscriber handles nothing.
    pub fn poll_timeout(&self) -> Option<Millis> {
        if self.exited {
            return None;
        }
        self.timers.next()
    }

    /// The deadline of `timer`, if it is pending.
    pub fn deadline(&self, timer: Timer) -> Option<Millis> {
        self.timers.get(timer)
    }

    /// Handles one event at time `now`.
    #[must_use]
    pub fn handle(&mut self, now: Millis, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        if self.exited {
            return out;
        }
        match event {
            Event::Start => self.on_start(now, &mut out),
            Event::Connected { master } => self.on_connected(master, &mut out),
            Event::ConnectFailed { master } => {
                self.on_link_down(now, &master, "connect failed", &mut out)
            }
            Event::Disconnected { master } => {
                self.on_link_down(now, &master, "connection closed", &mut out)
            }
            Event::Message { from, msg } => self.on_message(now, from, msg, &mut out),
            Event::Tick => {
                for timer in self.timers.take_due(now) {
                    if self.exited {
                        break;
                    }
                    match timer {
                        Timer::Attempt => self.on_attempt_timer(now, &mut out),
                        Timer::Watchdog => self.on_watchdog(now, &mut out),
                        Timer::Retry => self.on_retry_timer(now, &mut out),
                    }
                }
            }
            Event::Declare(spec) => self.on_declare(spec, &mut out),
            Event::Kill(executor) => self.on_command(Request::Kill { executor }, &mut out),
            Event::Teardown => {
                self.groups.clear();
                if !self.unanswered.iter().any(|(r, _)| matches!(r, Request::Teardown)) {
                    self.on_command(Request::Teardown, &mut out);
                }
            }
        }
        out
    }

    fn subscribed(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| c.state == ConnState::Subscribed)
    }

    /// `true` when `from` is the master of the current connection and the
    /// connection is in `state`.
    fn is_current(&self, from: &Addr, state: ConnState) -> bool {
        self.conn.as_ref().is_some_and(|c| &c.master == from && c.state == state)
    }

    fn on_start(&mut self, now: Millis, out: &mut Vec<Action>) {
        if self.started {
            return;
        }
        self.started = true;
        self.new_round(now, out);
    }

    // ----- finding the leader ------------------------------------------------

    /// Learns the masters not known yet, up to the configured ones plus
    /// [`MAX_ADVERTISED_MASTERS`] learned ones in all, however many
    /// messages bring new ones (the leader's listing drops learned ones it
    /// no longer names); past that a new master is not learned, which is
    /// reported once per message (as from `from`).
    fn learn_masters(&mut self, from: &Addr, masters: &[Addr], out: &mut Vec<Action>) {
        let room = self.config.masters.len() + MAX_ADVERTISED_MASTERS;
        let mut refused = 0;
        for m in masters {
            if self.known.contains(m) {
                continue;
            }
            if self.known.len() >= room {
                refused += 1;
            } else {
                self.known.insert(m.clone());
                self.masters.push(m.clone());
            }
        }
        if refused > 0 {
            self.rejected += 1;
            let reason = format!(
                "{refused} more masters not learned: this subscriber knows {} already, the most \
                 it keeps (its configured ones plus MAX_ADVERTISED_MASTERS)",
                self.known.len()
            );
            out.push(Action::Rejected { from: crate::limits::addr_for_log(from), reason });
        }
    }

    /// The leader (at the highest epoch seen) lists `masters`: learned
    /// masters it does not list are gone from the election and are dropped.
    /// Configured masters, and the one this subscriber is connected to, are
    /// kept.
    fn forget_unlisted(&mut self, masters: &[Addr]) {
        let current = self.conn.as_ref().map(|c| c.master.clone());
        let configured: BTreeSet<&Addr> = self.config.masters.iter().collect();
        let listed: BTreeSet<&Addr> = masters.iter().collect();
        let known = &mut self.known;
        self.masters.retain(|m| {
            let keep = configured.contains(m) || listed.contains(m) || current.as_ref() == Some(m);
            if !keep {
                known.remove(m);
            }
            keep
        });
    }

    /// The next master of this round: the preferred one first, then the
    /// others in list order.
    fn next_candidate(&self) -> Option<Addr> {
        if let Some(p) = &self.preferred {
            if !self.tried.contains(p) {
                return Some(p.clone());
            }
        }
        self.masters.iter().find(|m| !self.tried.contains(*m)).cloned()
    }

    fn new_round(&mut self, now: Millis, out: &mut Vec<Action>) {
        self.tried.clear();
        self.timers.cancel(Timer::Retry);
        self.try_next_master(now, out);
    }

    /// Dials `master` for a new attempt. The caller has closed any current
    /// connection.
    fn dial(&mut self, now: Millis, master: Addr, out: &mut Vec<Action>) {
        debug_assert!(self.conn.is_none(), "dial with a connection still open");
        self.tried.insert(master.clone());
        self.conn = Some(Conn { master: master.clone(), state: ConnState::Dialling });
        let timeout = if self.attempt_timeout > self.config.subscribe_timeout {
            // A grown timeout is jittered upwards, so subscribers that timed
            // out together against one slow master drift apart.
            let spread = (100 - self.config.jitter_min_pct.min(100)) / 2;
            self.jitter.scale(self.attempt_timeout, 100, 100 + spread)
        } else {
            self.attempt_timeout
        };
        self.timers.set(Timer::Attempt, now + timeout);
        out.push(Action::Connect { master });
    }

    /// Tries the next untried master of this round, or backs off when every
    /// known master was tried. The caller has closed any current connection.
    fn try_next_master(&mut self, now: Millis, out: &mut Vec<Action>) {
        match self.next_candidate() {
            Some(m) => self.dial(now, m, out),
            None => self.back_off(now),
        }
    }

    fn back_off(&mut self, now: Millis) {
        let delay = self.jitter.scale(self.backoff, self.config.jitter_min_pct.min(100), 100);
        self.backoff = self.backoff.times(2).min(self.config.backoff_max);
        self.retry_after(now + delay);
    }

    /// Starts a new round at `at`.
    fn retry_after(&mut self, at: Millis) {
        self.timers.cancel(Timer::Attempt);
        self.timers.set(Timer::Retry, at);
    }

    fn on_retry_timer(&mut self, now: Millis, out: &mut Vec<Action>) {
        if self.conn.is_none() {
            self.new_round(now, out);
        }
    }

    /// Closes the current connection (if any), emitting `Close` first, and
    /// reports a lost subscription to the program.
    fn drop_conn(&mut self, reason: &str, emit_close: bool, out: &mut Vec<Action>) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if emit_close {
            out.push(Action::Close { master: conn.master.clone(), reason: reason.to_owned() });
        }
        if conn.state == ConnState::Subscribed {
            self.timers.cancel(Timer::Watchdog);
            out.push(Action::Disconnected {
                reason: format!("subscription with {} lost: {reason}", conn.master),
            });
        }
    }

    /// The current attempt failed in a way that says nothing about the
    /// leader (dial failed, connection lost, no answer): close it, try the
    /// next master; a lost subscription restarts after a backoff instead.
    fn attempt_failed(
        &mut self,
        now: Millis,
        reason: &str,
        emit_close: bool,
        out: &mut Vec<Action>,
    ) {
        let was_subscribed = self.subscribed();
        self.drop_conn(reason, emit_close, out);
        if was_subscribed {
            self.tried.clear();
            let delay = Millis(self.jitter.below(self.config.reconnect_first_max.0 + 1));
            self.retry_after(now + delay);
        } else {
            self.try_next_master(now, out);
        }
    }

    /// Close the current connection and retry after a backoff, starting the
    /// next round with the same master (it leads, but cannot serve us now).
    fn retry_later(&mut self, now: Millis, reason: &str, out: &mut Vec<Action>) {
        if let Some(c) = &self.conn {
            self.preferred = Some(c.master.clone());
        }
        self.drop_conn(reason, true, out);
        self.tried.clear();
        self.back_off(now);
    }

    /// Abandons the current connection (closing it first) and subscribes
    /// with `leader` at once.
    fn switch_to(&mut self, now: Millis, leader: Addr, reason: &str, out: &mut Vec<Action>) {
        self.learn_masters(&leader.clone(), std::slice::from_ref(&leader), out);
        self.preferred = Some(leader.clone());
        self.drop_conn(reason, true, out);
        self.timers.cancel(Timer::Retry);
        self.dial(now, leader, out);
    }

    fn on_connected(&mut self, master: Addr, out: &mut Vec<Action>) {
        if !self.is_current(&master, ConnState::Dialling) {
            return; // not a dial of ours (or an abandoned one): ignore
        }
        self.attempt += 1;
        if let Some(c) = self.conn.as_mut() {
            c.state = ConnState::Subscribing;
        }
        out.push(Action::Send {
            to: master.clone(),
            msg: Message::Hello(Hello {
                version: PROTOCOL_VERSION,
                cluster: self.config.cluster.clone(),
                role: Role::Subscriber,
                node: self.config.name.clone(),
            }),
        });
        if let Some(addr) = &self.config.callback {
            let msg = Message::Callback { addr: addr.clone() };
            out.push(Action::Send { to: master.clone(), msg });
        }
        out.push(Action::Send {
            to: master,
            msg: Message::Subscribe(Subscribe {
                framework: self.framework.clone(),
                name: self.config.name.clone(),
                instance: self.config.instance,
                attempt: self.attempt,
                failover_timeout: self.config.failover_timeout,
                tenant: self.config.tenant.clone(),
            }),
        });
    }

    fn on_link_down(&mut self, now: Millis, master: &Addr, reason: &str, out: &mut Vec<Action>) {
        if self.conn.as_ref().is_some_and(|c| &c.master == master) {
            self.attempt_failed(now, &format!("{master}: {reason}"), false, out);
        }
    }

    fn on_attempt_timer(&mut self, now: Millis, out: &mut Vec<Action>) {
        let pending = self.conn.as_ref().is_some_and(|c| c.state != ConnState::Subscribed);
        if !pending {
            return;
        }
        let master = self.conn.as_ref().map(|c| c.master.clone());
        let reason = format!(
            "no answer to SUBSCRIBE attempt {} from {} within {}",
            self.attempt,
            master.map(|m| m.to_string()).unwrap_or_default(),
            self.attempt_timeout
        );
        // The master may only be slow (a store write takes longer than the
        // attempt had): give the next attempt twice as long (docs/design.md#progress-when-dependencies-are-slow).
        self.attempt_timeout = self.attempt_timeout.times(2).min(self.config.subscribe_timeout_max);
        self.attempt_failed(now, &reason, true, out);
    }

    fn on_watchdog(&mut self, now: Millis, out: &mut Vec<Action>) {
        // A zero interval means the master sends no heartbeats: no watchdog.
        if !self.subscribed() || self.heartbeat_interval == Millis::ZERO {
            return;
        }
        let limit = self.heartbeat_interval.times(self.config.heartbeat_timeout_factor);
        let deadline = self.last_seen + limit;
        if now < deadline {
            self.timers.set(Timer::Watchdog, deadline);
            return;
        }
        let reason = format!("no heartbeat for {}", now.since(self.last_seen));
        self.attempt_failed(now, &reason, true, out);
    }

    // ----- master messages -----------------------------------------------------

    fn on_message(&mut self, now: Millis, from: Addr, msg: Message, out: &mut Vec<Action>) {
        if !self.started {
            return; // no connection yet: nothing can be for us
        }
        if let Some(reason) = advertised_in_message_problem(&msg) {
            // Checked before anything of it is learned or dialled
            // (docs/design.md#peer-input-never-panics): a real leader never advertises past the limits.
            self.rejected += 1;
            out.push(Action::Rejected { from: crate::limits::addr_for_log(&from), reason });
            return;
        }
        let on_conn = self.conn.as_ref().is_some_and(|c| c.master == from);
        let epoch = msg.master_epoch();
        let stale = epoch.is_some_and(|e| e < self.max_epoch);
        match msg {
            // A new leader: follow it, wherever the news came from.
            Message::MasterChanged { epoch, leader, masters } => {
                if epoch < self.max_epoch {
                    return;
                }
                self.learn_masters(&from, &masters, out);
                if epoch > self.max_epoch {
                    self.max_epoch = epoch;
                    let reason = format!("{} leads at {epoch}", leader.addr);
                    self.switch_to(now, leader.addr, &reason, out);
                } else if on_conn {
                    self.seen(now);
                }
                self.forget_unlisted(&masters);
            }
            // A refusal grants nothing, so even a stale one (a lagging
            // standby) makes us move on; only its hint is weighed.
            Message::NotLeader { epoch, leader } => {
                let subscribed_here = self.is_current(&from, ConnState::Subscribed) && !stale;
                if self.is_current(&from, ConnState::Subscribing) || subscribed_here {
                    self.refused(now, &from, epoch, leader, out);
                }
            }
            Message::HelloReply(reply) => {
                if !on_conn || stale {
                    return;
                }
                self.learn_masters(&from, &reply.masters, out);
                self.max_epoch = self.max_epoch.max(reply.epoch);
                self.seen(now);
                if reply.leading {
                    self.forget_unlisted(&reply.masters);
                }
                if !reply.leading && self.is_current(&from, ConnState::Subscribing) {
                    self.refused(now, &from, reply.epoch, reply.leader, out);
                }
            }
            _ if !on_conn || stale => {} // not our connection, or fenced
            Message::Subscribed { epoch, framework, heartbeat_interval, executors } => {
                if self.is_current(&from, ConnState::Subscribing) {
                    self.on_subscribed(
                        now,
                        from,
                        epoch,
                        framework,
                        heartbeat_interval,
                        executors,
                        out,
                    );
                }
            }
            Message::FrameworkError { epoch, message, failed_over_to } => {
                self.max_epoch = epoch;
                match failed_over_to {
                    Some(other) if other != self.config.instance => {
                        let fw = self
                            .framework
                            .as_ref()
                            .map(|f| f.to_string())
                            .unwrap_or_else(|| self.config.name.clone());
                        let reason = format!(
                            "framework {fw} failed over to instance {other}; this instance {} stops: {message}",
                            self.config.instance
                        );
                        self.exit(reason, Some(other), out);
                    }
                    _ => {
                        out.push(Action::Error { message: message.clone() });
                        self.retry_later(now, &format!("master error: {message}"), out);
                    }
                }
            }
            // The leader's limits refuse this SUBSCRIBE: the same SUBSCRIBE
            // cannot succeed anywhere, so stop rather than retry forever.
            Message::SubscribeRefused { epoch, reason } => {
                self.max_epoch = epoch;
                if self.is_current(&from, ConnState::Subscribing) {
                    out.push(Action::Error { message: reason.clone() });
                    self.exit(format!("the leader refused the subscription: {reason}"), None, out);
                }
            }
            Message::LeaderSuspended { epoch } => {
                self.max_epoch = epoch;
                self.seen(now);
                if self.is_current(&from, ConnState::Subscribing) {
                    // Retryable: the leader's session is in doubt.
                    self.retry_later(now, "leader suspended", out);
                }
                // Subscribed: keep the connection; if leadership is lost the
                // master closes it, and the watchdog covers the rest.
            }
            Message::FrameworkHeartbeat { epoch }
                if self.is_current(&from, ConnState::Subscribing) =>
            {
                // The leader heartbeats only a subscription it has accepted
                // and is making durable: it is alive and slow, not gone.
                // Abandoning the attempt now would only queue another write
                // behind this one (docs/design.md#progress-when-dependencies-are-slow), so the attempt waits as
                // long as the leader keeps saying so.
                self.max_epoch = epoch;
                self.seen(now);
                out.push(Action::Send { to: from, msg: Message::FrameworkHeartbeatAck { epoch } });
                let deadline = now + self.attempt_timeout;
                if self.timers.get(Timer::Attempt).is_some_and(|at| deadline > at) {
                    self.timers.set(Timer::Attempt, deadline);
                }
            }
            other => {
                if !self.subscribed() {
                    return; // nothing but the answers above before Subscribed
                }
                if let Some(e) = epoch {
                    self.max_epoch = e;
                }
                self.seen(now);
                self.on_subscribed_message(other, out);
            }
        }
    }

    /// Stops for good: closes the connection, then `Exit`.
    fn exit(&mut self, reason: String, failed_over_to: Option<InstanceId>, out: &mut Vec<Action>) {
        if let Some(conn) = self.conn.take() {
            out.push(Action::Close { master: conn.master, reason: reason.clone() });
        }
        self.exited = true;
        out.push(Action::Exit { reason, failed_over_to });
    }

    fn seen(&mut self, now: Millis) {
        self.last_seen = now;
    }

    /// The current attempt's master does not lead: follow its hint or try the
    /// next master.
    fn refused(
        &mut self,
        now: Millis,
        from: &Addr,
        epoch: Epoch,
        hint: Option<LeaderHint>,
        out: &mut Vec<Action>,
    ) {
        let known = self.max_epoch;
        self.max_epoch = self.max_epoch.max(epoch);
        let follow = hint.filter(|h| {
            &h.addr != from
                && h.epoch >= known
                && (h.epoch > known || !self.tried.contains(&h.addr))
        });
        match follow {
            Some(h) => {
                let reason =
                    format!("{from} is not the leader; it names {} at {}", h.addr, h.epoch);
                self.switch_to(now, h.addr, &reason, out);
            }
            None => {
                let reason = format!("{from} is not the leader");
                self.drop_conn(&reason, true, out);
                self.try_next_master(now, out);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_subscribed(
        &mut self,
        now: Millis,
        from: Addr,
        epoch: Epoch,
        framework: FrameworkId,
        heartbeat_interval: Millis,
        executors: Vec<ExecutorInfo>,
        out: &mut Vec<Action>,
    ) {
        if let Some(known) = &self.framework {
            if *known != framework {
                let message = format!(
                    "master {from} subscribed framework {framework}, but this subscriber is {known}"
                );
                out.push(Action::Error { message: message.clone() });
                self.retry_later(now, &message, out);
                return;
            }
        }
        self.max_epoch = epoch;
        self.framework = Some(framework.clone());
        self.preferred = Some(from.clone());
        self.tried.clear();
        self.backoff = self.config.backoff_min;
        self.attempt_timeout = self.config.subscribe_timeout;
        self.heartbeat_interval = heartbeat_interval;
        self.last_seen = now;
        if let Some(c) = self.conn.as_mut() {
            c.state = ConnState::Subscribed;
        }
        self.timers.cancel(Timer::Attempt);
        if heartbeat_interval > Millis::ZERO {
            let at = now + heartbeat_interval.times(self.config.heartbeat_timeout_factor);
            self.timers.set(Timer::Watchdog, at);
        }
        out.push(Action::Subscribed { framework, master: from, executors });
        // Re-declare everything, so the master adopts what already runs, and
        // repeat the commands it has not answered.
        let groups: Vec<String> = self.groups.keys().cloned().collect();
        for g in groups {
            self.send_declaration(&g, out);
        }
        for i in 0..self.unanswered.len() {
            self.send_unanswered(i, out);
        }
    }

    fn on_subscribed_message(&mut self, msg: Message, out: &mut Vec<Action>) {
        match msg {
            Message::FrameworkHeartbeat { epoch } => {
                // Answer, so the master's side of the connection never looks idle.
                if let Some(master) = self.conn.as_ref().map(|c| c.master.clone()) {
                    out.push(Action::Send {
                        to: master,
                        msg: Message::FrameworkHeartbeatAck { epoch },
                    });
                }
            }
            Message::ExecutorUpdate { info, .. } => out.push(Action::ExecutorUpdate(info)),
            Message::SlotFailed { group, slot, reason, .. } => {
                out.push(Action::SlotFailed { group, slot, reason })
            }
            Message::GroupScaled { group, slots, .. } => {
                out.push(Action::GroupScaled { group, slots })
            }
            Message::RequestAccepted { request, .. } => {
                let Some(command) = self.answered(request, false) else {
                    return;
                };
                let teardown = command == Request::Teardown;
                out.push(Action::RequestAccepted { request, command });
                if teardown {
                    let fw = self.framework.as_ref().map(|f| f.to_string()).unwrap_or_default();
                    self.exit(format!("framework {fw} torn down"), None, out);
                }
            }
            Message::RequestRefused { request, reason, .. } => {
                if let Some(command) = self.answered(request, true) {
                    out.push(Action::RequestRefused { request, command, reason });
                }
            }
            // Anything else is not for a subscriber: ignored.
            _ => {}
        }
    }

    // ----- commands ------------------------------------------------------------

    fn take_request_id(&mut self) -> u64 {
        let id = self.next_request;
        self.next_request += 1;
        id
    }

    fn on_declare(&mut self, spec: GroupSpec, out: &mut Vec<Action>) {
        let group = spec.group.clone();
        self.groups.insert(group.clone(), (spec, 0));
        if self.subscribed() {
            self.send_declaration(&group, out);
        }
    }

    fn on_command(&mut self, command: Request, out: &mut Vec<Action>) {
        self.unanswered.push((command, 0));
        if self.subscribed() {
            self.send_unanswered(self.unanswered.len() - 1, out);
        }
    }

    fn send_declaration(&mut self, group: &str, out: &mut Vec<Action>) {
        let request = self.take_request_id();
        let Some(master) = self.conn.as_ref().map(|c| c.master.clone()) else {
            return;
        };
        let Some((spec, sent)) = self.groups.get_mut(group) else {
            return;
        };
        *sent = request;
        let msg = match self.config.update {
            Some(max_parallel) => {
                Message::UpdateGroup { request, spec: spec.clone(), max_parallel }
            }
            None => Message::DeclareGroup { request, spec: spec.clone() },
        };
        out.push(Action::Send { to: master, msg });
    }

    fn send_unanswered(&mut self, i: usize, out: &mut Vec<Action>) {
        let request = self.take_request_id();
        let Some(master) = self.conn.as_ref().map(|c| c.master.clone()) else {
            return;
        };
        let (command, sent) = &mut self.unanswered[i];
        *sent = request;
        let msg = match command {
            Request::Kill { executor } => {
                Message::KillExecutor { request, executor: executor.clone() }
            }
            Request::Teardown => Message::Teardown { request },
            // Declarations live in `groups`, never here.
            Request::Declare { .. } => return,
        };
        out.push(Action::Send { to: master, msg });
    }

    /// Forgets the request `id` answered by the master and says what it was;
    /// `None` for an id not sent on this subscription (a late or bogus answer).
    fn answered(&mut self, id: u64, refused: bool) -> Option<Request> {
        if id == 0 {
            return None;
        }
        if let Some(group) =
            self.groups.iter().find(|(_, (_, sent))| *sent == id).map(|(g, _)| g.clone())
        {
            if refused {
                self.groups.remove(&group);
            } else if let Some((_, sent)) = self.groups.get_mut(&group) {
                *sent = 0; // answered: a repeated answer is not reported twice
            }
            return Some(Request::Declare { group });
        }
        let i = self.unanswered.iter().position(|(_, sent)| *sent == id)?;
        Some(self.unanswered.remove(i).0)
    }
}

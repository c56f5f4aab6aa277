//! The worker machine: registration, failover, heartbeats.
//!
//! A worker keeps a connection to every master it knows (configured, plus any
//! a master advertises) and *follows* the master that proves leadership at the
//! highest epoch, by a leading [`HelloReply`](crate::protocol::HelloReply), a
//! `MasterChanged` or a `Registered`. It then talks registration and
//! heartbeats with that master only:
//!
//! * before its first registration succeeds it retries at a jittered interval,
//!   then at a prolonged one, and finally gives up with [`Action::Exit`]
//!   naming every master it tried; a retry goes to the followed master once
//!   one is known (SPARK-16190), to every connected master otherwise;
//! * once registered it re-registers only with the master it follows
//!   (SPARK-4592), never blindly with every master, and never exits for lack
//!   of a master: a dropped connection is redialled within
//!   [`Config::reconnect_first_max`] (jittered, 10 ms by default), then with
//!   capped exponential backoff;
//! * a slow store never livelocks registration (docs/design.md#progress-when-dependencies-are-slow): a retry
//!   restarts no work at the master (a repeated registration of an
//!   incarnation whose record is still being written is not written again;
//!   the master answers `Registered` on the latest connection once the
//!   first write is durable), and the retries back off (1 s then 10 s,
//!   jittered, before the first registration, over about two minutes;
//!   doubling from 50 ms to 5 s for a re-registration), so a 10 s write
//!   costs a few retries and never a give-up;
//! * a master message with an epoch lower than the highest seen is ignored,
//!   which fences a recovered old leader (the caveat the SPARK-4592 fix left
//!   open);
//! * a missing heartbeat acknowledgement for `heartbeat_timeout_factor`
//!   heartbeat intervals marks the connection dead (half-open connections are
//!   detected here, not by a runtime timer);
//! * the masters a peer advertises (`HelloReply`, `MasterChanged`,
//!   `Registered`, `NotLeader`'s hint, a callback hint) are checked against
//!   [`MAX_ADVERTISED_MASTERS`](crate::limits::MAX_ADVERTISED_MASTERS) and
//!   [`MAX_ADDR_BYTES`](crate::limits::MAX_ADDR_BYTES) before any is
//!   learned (the worker dials every master it learns): a message past them
//!   is ignored as a whole and reported ([`Action::Rejected`], counted in
//!   [`Worker::rejected`]).
//!
//! Tests: `core/tests/registration.rs`, `handshake_backoff.rs`,
//! `heartbeat_load.rs`, `worker_executors.rs`, `worker_upgrade.rs`, `limits.rs`,
//! `named_resources.rs`, `ports.rs`, `usage.rs` (all under `core/tests/`), and
//! the simulator's invariants on workers.

use crate::deadlines::Deadlines;
use crate::ids::{Addr, Epoch, ExecutorId, FrameworkId, Incarnation, WorkerId};
use crate::limits::{
    advertised_in_message_problem, advertised_masters_problem, MAX_ADVERTISED_MASTERS,
    MAX_LOG_CHUNK,
};
use crate::protocol::{
    ExecutorReport, ExecutorSpec, ExecutorState, Hello, LeaderHint, LogRead, LogStream, Message,
    RegisterWorker, Role, PROTOCOL_VERSION,
};
use crate::rng::Jitter;
use crate::time::Millis;
use std::collections::BTreeMap;

/// Worker configuration. Defaults are documented on each field.
#[derive(Clone, Debug)]
pub struct Config {
    /// The cluster name sent in `Hello`.
    pub cluster: String,
    /// This worker's stable id.
    pub id: WorkerId,
    /// This process's incarnation, fresh per process (from OS entropy).
    pub incarnation: Incarnation,
    /// The configured masters.
    pub masters: Vec<Addr>,
    /// Cores offered.
    pub cores: u32,
    /// Memory offered, in MiB.
    pub memory_mb: u64,
    /// Seed of the jitter generator.
    pub seed: u64,
    /// Base interval between first-registration attempts, jittered to
    /// 50%–150%. Default 1 s.
    pub initial_retry_interval: Millis,
    /// Attempts made at the initial interval. Default 6.
    pub initial_retries: u32,
    /// Base interval after the initial attempts, jittered to 50%–150%.
    /// Default 10 s.
    pub prolonged_retry_interval: Millis,
    /// Attempts before giving up on a first registration. Default 16
    /// (about 6 s + 10 × 10 s ≈ 2 minutes).
    pub total_retries: u32,
    /// The first reconnect after an open connection drops is drawn
    /// uniformly from `0..=reconnect_first_max` (a restarted master is
    /// redialled at once, and thousands of workers do not redial in one
    /// instant). Default 10 ms.
    pub reconnect_first_max: Millis,
    /// Smallest reconnect delay after a failed reconnect (the base of the
    /// exponential backoff, jittered to 50%–100%). Default 50 ms.
    pub reconnect_min: Millis,
    /// Largest reconnect delay (the cap of the exponential backoff).
    /// Default 1 s (a restarted master is found within about a second).
    pub reconnect_max: Millis,
    /// The followed master's connection is dead after this many heartbeat
    /// intervals without an acknowledgement. Default 4.
    pub heartbeat_timeout_factor: u64,
    /// Where this worker's callback listener takes masters' connections
    /// (sent to every master after `Hello`, kept in the worker's record: a
    /// new leader dials it, seed 002 (docs/design.md#seed-002)). `None`: no listener.
    pub callback: Option<Addr>,
    /// The attributes announced in every registration (`rack=r1`), sorted
    /// by name, names unique (the master refuses a registration otherwise:
    /// [`crate::limits::attributes_problem`]). Default none.
    pub attributes: Vec<(String, String)>,
    /// The port ranges executors' named ports are numbered from, sorted,
    /// not overlapping ([`crate::ports`]). Default none: a launch that
    /// names ports fails here (the leader places none here).
    pub ports: Vec<crate::ports::PortRange>,
    /// The host executors' ports are reached at, announced in every
    /// registration and told to subscribers. Default `None`.
    pub host: Option<String>,
    /// The named resources executors are given addresses of (`gpu` with
    /// `0,1,2,3`; [`crate::resources`]), announced in every registration.
    /// Default none: a launch that asks for some fails here (the leader
    /// places none here).
    pub resources: Vec<crate::resources::Resource>,
    /// The users executors may be started as here, announced in every
    /// registration ([`crate::protocol::RegisterWorker::users`]): the
    /// leader places a group naming a user only on workers listing it.
    /// Default none.
    pub users: Vec<String>,
    /// Test-only: accept master messages of any epoch. Exists so the
    /// simulator can prove it detects the races epoch fencing closes.
    #[doc(hidden)]
    pub unsafe_no_epoch_fencing: bool,
    /// Test-only: a health check's run is started while one is in flight
    /// (the simulator's `check_inflight` invariant must catch it).
    #[doc(hidden)]
    pub unsafe_overlapping_checks: bool,
    /// Test-only: a health check's run the backstop skipped counts as a
    /// failure (the simulator's `health_restarts` invariant must catch it).
    #[doc(hidden)]
    pub unsafe_skipped_checks_fail: bool,
    /// Test-only: a framework's report of a manual check does not put off
    /// its TTL, so it lapses as if unreported (the simulator's
    /// `health_restarts` invariant must catch it).
    #[doc(hidden)]
    pub unsafe_manual_ttl_kept: bool,
}

impl Config {
    /// A configuration with the documented defaults.
    pub fn new(
        cluster: impl Into<String>,
        id: WorkerId,
        incarnation: Incarnation,
        masters: Vec<Addr>,
        cores: u32,
        memory_mb: u64,
    ) -> Self {
        Config {
            cluster: cluster.into(),
            id,
            incarnation,
            masters,
            cores,
            memory_mb,
            seed: incarnation.0,
            initial_retry_interval: Millis(1_000),
            initial_retries: 6,
            prolonged_retry_interval: Millis(10_000),
            total_retries: 16,
            reconnect_first_max: Millis(10),
            reconnect_min: Millis(50),
            reconnect_max: Millis(1_000),
            heartbeat_timeout_factor: 4,
            callback: None,
            attributes: Vec::new(),
            ports: Vec::new(),
            host: None,
            resources: Vec::new(),
            users: Vec::new(),
            unsafe_no_epoch_fencing: false,
            unsafe_overlapping_checks: false,
            unsafe_skipped_checks_fail: false,
            unsafe_manual_ttl_kept: false,
        }
    }
}

/// What happens to a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The process started: connect to every configured master.
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
    /// The connection to `master` closed.
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
    /// [`Worker::poll_timeout`] has passed: every deadline due at `now`
    /// fires.
    Tick,
    /// An executor this worker runs changed state (the runtime started it,
    /// it exited, it was killed, or it could not be started).
    ExecutorChanged {
        /// The executor.
        executor: ExecutorId,
        /// Its new state.
        state: ExecutorState,
    },
    /// The runtime's latest sample of its executors' usage and its work
    /// directory's space (sampled every [`USAGE_INTERVAL`] or so): the
    /// newest is sent with a heartbeat, at most once per
    /// [`USAGE_INTERVAL`], and only for executors the machine knows to
    /// run.
    Usage(crate::protocol::WorkerUsage),
    /// At start-up the runtime found an executor its previous incarnation
    /// (the same work directory) left: re-adopted (`Running`: it is
    /// supervised again, reported at registration, and killed if the master
    /// says so), or killed, ended or left alone (a terminal state). The
    /// master hears of it.
    LeftBehind(ExecutorReport),
    /// A master dialled the callback listener and said `MasterChanged`
    /// (docs/design.md#seed-002): a hint, never an order. The masters it names are learned
    /// and the leader is probed; it is followed only once its own
    /// `HelloReply` proves the epoch.
    Hint {
        /// The leader it names.
        leader: LeaderHint,
        /// The masters it lists.
        masters: Vec<Addr>,
    },
    /// The runtime's answer to [`ExecutorCommand::RunCheck`]: what run
    /// `run` of `executor`'s check `check` found (appended;
    /// [`crate::health`]). A stale or unknown run is ignored.
    CheckResult {
        /// The executor checked.
        executor: ExecutorId,
        /// Which of its group's checks.
        check: u8,
        /// The run's number, echoed.
        run: u64,
        /// What it found.
        outcome: crate::health::CheckOutcome,
    },
    /// An executor re-adopted at start-up ([`Event::LeftBehind`]
    /// `Running`) keeps its group's disconnect rule and health checks, as
    /// its record kept them (appended; docs/design.md#issue-45): it is
    /// watched by the cut-off and checked from now, as at its launch.
    Readopted {
        /// The executor.
        executor: ExecutorId,
        /// Its group's disconnect rule, if a singleton.
        disconnect: Option<crate::launch::Disconnect>,
        /// Its group's health checks.
        checks: Vec<crate::launch::CheckSpec>,
    },
}

/// What the runtime must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open a connection to `master`, then feed `Connected` or `ConnectFailed`.
    /// At most one connection per master: the runtime keeps none open for it
    /// when this is emitted.
    Connect {
        /// Where to dial.
        master: Addr,
    },
    /// Send `msg` on the connection to `to` (drop it if that connection is gone).
    Send {
        /// The master.
        to: Addr,
        /// The message.
        msg: Message,
    },
    /// Close the connection to `master` without feeding `Disconnected` back.
    Close {
        /// The master.
        master: Addr,
        /// Why, for the log.
        reason: String,
    },
    /// Act on an executor process this worker supervises (the runtime's
    /// supervisor carries it out; the node passes it through).
    Executor(ExecutorCommand),
    /// Stop the process (after stopping its executors) with an error naming
    /// `reason`. The machine ignores every later event.
    Exit {
        /// Why.
        reason: String,
    },
    /// Purely observational: a message from `from` (or a callback hint
    /// naming `from`) broke a limit on peer input (docs/design.md#peer-input-never-panics) and was
    /// ignored as a whole. Log it as a warning; [`Worker::rejected`] counts
    /// them.
    Rejected {
        /// The master.
        from: Addr,
        /// Which limit, and by how much.
        reason: String,
    },
    /// The followed master asks for a chunk of an executor's output file:
    /// read it and answer `master` with [`Message::LogData`] for `relay`
    /// (the worker node does both; see `node::worker`).
    ReadLog {
        /// The master that asked.
        master: Addr,
        /// The master's number for the read.
        relay: u64,
        /// The executor.
        executor: ExecutorId,
        /// Which file.
        stream: LogStream,
        /// Where to start; `None`: the last `max` bytes.
        offset: Option<u64>,
        /// The most bytes to read (at most [`MAX_LOG_CHUNK`]).
        max: u32,
        /// This worker runs the executor now (its process has not ended).
        live: bool,
    },
}

/// What the worker asks of the executor processes it supervises: one type
/// from the machine through [`crate::node::worker::Output::Executor`] to the
/// runtime's supervisor, which carries each out in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecutorCommand {
    /// Start an executor process, then feed `ExecutorChanged` with
    /// `Running` (or `Failed`), and later its exit.
    Start {
        /// The executor.
        executor: ExecutorId,
        /// Its framework.
        framework: FrameworkId,
        /// What to run, as the master sent it.
        spec: ExecutorSpec,
    },
    /// Kill the executor's whole process group, then feed `ExecutorChanged`
    /// with `Killed`.
    Kill {
        /// The executor.
        executor: ExecutorId,
    },
    /// Stop the executor (a drain, a rollout, a named scale): `signal` to
    /// its process group now, SIGKILL if it still runs after `grace`; then
    /// feed `ExecutorChanged` with `Killed`.
    Stop {
        /// The executor.
        executor: ExecutorId,
        /// How long it may take to exit after `signal`.
        grace: Millis,
        /// The signal sent first.
        signal: crate::api::StopSignal,
    },
    /// Run one health check of a running executor (appended;
    /// [`crate::health`]): carry out its probe without blocking the pump,
    /// and feed `Event::CheckResult` with its outcome within its timeout
    /// (`Failed` with the timeout past it; `Skipped` if the runtime cannot
    /// run it now, say its queue is full).
    RunCheck(crate::health::CheckRun),
}

/// The worker's named deadlines: the machine keeps them in its own table
/// and answers [`Worker::poll_timeout`]; [`Worker::deadline`] names each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Timer {
    /// Registration retry (first registration, or re-registration).
    Registration,
    /// Send a heartbeat and check for a missing acknowledgement.
    Heartbeat,
    /// Redial masters whose connection is down.
    Reconnect,
    /// Stop the singleton executors whose `stop_after` passed without word
    /// from the master followed (appended; [`crate::cut_off`]).
    CutOff,
    /// Run the health checks due, count the backstops and manual TTLs
    /// passed (appended; [`crate::health`]): one sweep timer for every
    /// check.
    Checks,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LinkState {
    Down,
    Connecting,
    Open,
}

#[derive(Clone, Debug)]
struct Link {
    state: LinkState,
    backoff: Millis,
    retry_at: Millis,
    /// A frame arrived from the master since the link last went down: its
    /// next drop is redialled within `reconnect_first_max`, not after a
    /// backoff (a link refused in its handshake never gets here).
    was_open: bool,
}

/// What a worker shows an observer (tests, status pages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerStatus {
    /// The master followed, if any.
    pub active: Option<Addr>,
    /// The highest epoch seen.
    pub max_epoch: Epoch,
    /// Registered with the followed master right now.
    pub registered: bool,
    /// Registered at least once in this process's life.
    pub ever_registered: bool,
    /// Exited (the machine ignores further events).
    pub exited: bool,
}

/// The worker machine.
#[derive(Debug)]
pub struct Worker {
    config: Config,
    jitter: Jitter,
    links: BTreeMap<Addr, Link>,
    active: Option<Addr>,
    max_epoch: Epoch,
    registered: bool,
    ever_registered: bool,
    attempts: u32,
    retry_backoff: Millis,
    heartbeat_interval: Option<Millis>,
    last_ack: Millis,
    exited: bool,
    executors: BTreeMap<ExecutorId, ExecutorReport>,
    /// The highest hinted epoch each master was probed for.
    probed: BTreeMap<Addr, Epoch>,
    /// Messages ignored for breaking a limit on peer input.
    rejected: u64,
    /// The highest launch number processed, and the epoch it is of
    /// (reported as `launch_seen` while that epoch is the highest seen).
    launch_seen: (Epoch, u64),
    /// The newest usage sample not sent yet.
    usage: Option<crate::protocol::WorkerUsage>,
    /// The registration retry, the heartbeat and the redial.
    timers: Deadlines<Timer>,
    /// When a usage sample was last sent.
    usage_sent: Option<Millis>,
    /// When each live executor was first seen RUNNING, by this process's
    /// clock: reports carry how long it ran (`ExecutorReport::ran_ms`).
    running_since: BTreeMap<ExecutorId, Millis>,
    /// The watch over singleton executors: stopped once no master was
    /// heard for their group's `stop_after` (docs/design.md#issue-45).
    cut_off: crate::cut_off::CutOff,
    /// When the requests a master's answer dates were sent (the cut-off
    /// clock counts from there, docs/design.md#issue-45).
    asked: crate::cut_off::Asked,
    /// The health checks of live executors, counted here only
    /// (docs/design.md#issue-45).
    health: crate::health::Health,
}

/// The most often a worker sends its usage ([`Event::Usage`]): 10 s, so
/// 18,000 workers cost the leader 1,800 small messages a second at most.
pub const USAGE_INTERVAL: Millis = Millis(10_000);

impl Worker {
    /// A worker that has not started yet; feed [`Event::Start`].
    pub fn new(config: Config) -> Self {
        let jitter = Jitter::new(config.seed);
        let mut links = BTreeMap::new();
        for m in &config.masters {
            links.insert(
                m.clone(),
                Link {
                    state: LinkState::Down,
                    backoff: config.reconnect_min,
                    retry_at: Millis::ZERO,
                    was_open: false,
                },
            );
        }
        let health = if config.unsafe_overlapping_checks
            || config.unsafe_skipped_checks_fail
            || config.unsafe_manual_ttl_kept
        {
            crate::health::Health::unsafe_broken(
                config.unsafe_overlapping_checks,
                config.unsafe_skipped_checks_fail,
                config.unsafe_manual_ttl_kept,
            )
        } else {
            crate::health::Health::new()
        };
        Worker {
            retry_backoff: config.reconnect_min,
            config,
            jitter,
            links,
            active: None,
            max_epoch: Epoch::ZERO,
            registered: false,
            ever_registered: false,
            attempts: 0,
            heartbeat_interval: None,
            last_ack: Millis::ZERO,
            exited: false,
            executors: BTreeMap::new(),
            running_since: BTreeMap::new(),
            probed: BTreeMap::new(),
            rejected: 0,
            launch_seen: (Epoch::ZERO, 0),
            usage: None,
            timers: Deadlines::new(),
            usage_sent: None,
            cut_off: crate::cut_off::CutOff::new(Millis::ZERO),
            asked: crate::cut_off::Asked::default(),
            health,
        }
    }

    /// How many messages (and callback hints) were ignored for breaking a
    /// limit on peer input; each also came out as [`Action::Rejected`].
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    fn reject(&mut self, from: Addr, reason: String, out: &mut Vec<Action>) {
        self.rejected += 1;
        out.push(Action::Rejected { from: crate::limits::addr_for_log(&from), reason });
    }

    /// What the worker shows an observer.
    pub fn status(&self) -> WorkerStatus {
        WorkerStatus {
            active: self.active.clone(),
            max_epoch: self.max_epoch,
            registered: self.registered,
            ever_registered: self.ever_registered,
            exited: self.exited,
        }
    }

    /// How often the followed master asked this worker to heartbeat (known
    /// once registered). The runtime scales its connections' timeouts with
    /// it.
    pub fn heartbeat_interval(&self) -> Option<Millis> {
        self.heartbeat_interval
    }

    /// When this worker last heard from the master it follows: an answer
    /// to its own request, dated at the request's sending; `None` before
    /// the first since this process started (its start is no word).
    /// Never goes back. A runtime persists it for the hosts of its
    /// singleton executors (the executor shim), which stop them at
    /// `word + stop_after` even while this process is down or paused
    /// (docs/design.md#issue-45): the leader re-places them only
    /// [`crate::cut_off::replace_after`] after it last heard from this
    /// worker, which is after this.
    pub fn last_word(&self) -> Option<Millis> {
        self.cut_off.word()
    }

    /// The worker's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Every master the worker knows of.
    pub fn known_masters(&self) -> impl Iterator<Item = &Addr> {
        self.links.keys()
    }

    /// The earliest deadline of this machine; feed [`Event::Tick`] at or
    /// after it.
    /// `None` once exited: an exited worker handles nothing.
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
            Event::ConnectFailed { master } | Event::Disconnected { master } => {
                self.on_link_down(now, &master)
            }
            Event::Message { from, msg } => self.on_message(now, from, msg, &mut out),
            Event::Tick => {
                for timer in self.timers.take_due(now) {
                    match timer {
                        Timer::Registration => self.on_registration_timer(now, &mut out),
                        Timer::Heartbeat => self.on_heartbeat_timer(now, &mut out),
                        Timer::Reconnect => self.on_reconnect_timer(now, &mut out),
                        Timer::CutOff => self.on_cut_off_timer(now, &mut out),
                        Timer::Checks => self.on_checks_timer(now, &mut out),
                    }
                }
            }
            Event::ExecutorChanged { executor, state } => {
                self.on_executor_changed(now, executor, state, &mut out)
            }
            Event::Usage(usage) => self.usage = Some(usage),
            Event::Readopted { executor, disconnect, checks } => {
                let ports = self
                    .executors
                    .get(&executor)
                    .filter(|e| e.state == ExecutorState::Running)
                    .map(|e| e.ports.clone());
                if let Some(ports) = ports {
                    if let Some(rule) = disconnect {
                        self.cut_off.guard(executor.clone(), rule);
                        self.arm_cut_off();
                    }
                    let host = self.config.host.as_deref().unwrap_or("127.0.0.1");
                    self.health.launched(executor.clone(), &checks, &ports, host);
                    self.health.running(now, &executor, &mut self.jitter);
                    self.arm_checks();
                }
            }
            Event::CheckResult { executor, check, run, outcome } => {
                let verdict = self.health.result(now, &executor, check, run, outcome);
                self.on_verdict(now, executor, verdict, &mut out);
                self.arm_checks();
            }
            Event::LeftBehind(report) => {
                let id = report.id.clone();
                if report.state == ExecutorState::Running {
                    // Re-adopted: how long it ran before is not known; it
                    // counts from now.
                    self.running_since.insert(id.clone(), now);
                }
                self.executors.insert(id.clone(), report);
                self.report_executor(now, &id, &mut out);
            }
            Event::Hint { leader, masters } => {
                let problem = crate::limits::advertised_addr_problem(&leader.addr)
                    .or_else(|| advertised_masters_problem(&masters));
                if let Some(reason) = problem {
                    self.reject(leader.addr, reason, &mut out);
                } else if leader.epoch >= self.max_epoch || self.config.unsafe_no_epoch_fencing {
                    let mut named = masters;
                    if !named.contains(&leader.addr) {
                        named.push(leader.addr.clone());
                    }
                    self.learn_masters(&leader.addr.clone(), &named, &mut out);
                    self.chase_hint(leader, &mut out);
                }
            }
        }
        out
    }

    fn on_start(&mut self, now: Millis, out: &mut Vec<Action>) {
        // The cut-off clock starts with the process (docs/design.md#issue-45),
        // but a start is no word to hand on (`Worker::last_word`).
        self.cut_off.started(now);
        for (addr, link) in self.links.iter_mut() {
            if link.state == LinkState::Down {
                link.state = LinkState::Connecting;
                out.push(Action::Connect { master: addr.clone() });
            }
        }
        let at = now + self.jitter.scale(self.config.initial_retry_interval, 50, 150);
        self.timers.set(Timer::Registration, at);
    }

    fn on_connected(&mut self, master: Addr, out: &mut Vec<Action>) {
        let Some(link) = self.links.get_mut(&master) else {
            return;
        };
        // Open for sending; the backoff is reset (and a drop redialled at
        // once) only by the master's first frame (`on_message`): a link the
        // master refuses in its handshake (a wrong secret, a refused TLS
        // certificate) closes before any frame and backs off.
        link.state = LinkState::Open;
        out.push(self.hello(master.clone()));
        if let Some(addr) = &self.config.callback {
            out.push(Action::Send { to: master, msg: Message::Callback { addr: addr.clone() } });
        }
    }

    /// A `Hello` to `to`: the first frame on a connection, and also the
    /// leadership probe (the reply says whether `to` leads, at which epoch).
    fn hello(&self, to: Addr) -> Action {
        Action::Send {
            to,
            msg: Message::Hello(Hello {
                version: PROTOCOL_VERSION,
                cluster: self.config.cluster.clone(),
                role: Role::Worker,
                node: self.config.id.0.clone(),
            }),
        }
    }

    /// Follows up a leader hint: a hint newer than anything seen is only a
    /// rumour, so ask the hinted master itself (a `Hello` reply proves it).
    fn chase_hint(&mut self, hint: LeaderHint, out: &mut Vec<Action>) {
        if hint.epoch <= self.max_epoch && self.active.is_some() {
            return;
        }
        // One probe per master and hinted epoch: two masters pointing at
        // each other must not make the worker ping-pong.
        if self.probed.get(&hint.addr).is_some_and(|e| *e >= hint.epoch) {
            return;
        }
        self.probed.insert(hint.addr.clone(), hint.epoch);
        if self.link_open(&hint.addr) {
            out.push(self.hello(hint.addr));
        } else {
            self.learn_masters(&hint.addr.clone(), &[hint.addr], out);
        }
    }

    fn on_link_down(&mut self, now: Millis, master: &Addr) {
        let Some(link) = self.links.get_mut(master) else {
            return;
        };
        if link.state == LinkState::Down {
            return;
        }
        link.state = LinkState::Down;
        self.asked.link_down(master);
        if std::mem::take(&mut link.was_open) {
            link.retry_at = now + Millis(self.jitter.below(self.config.reconnect_first_max.0 + 1));
        } else {
            link.retry_at = now + self.jitter.scale(link.backoff, 50, 100);
            link.backoff = (link.backoff.times(2)).min(self.config.reconnect_max);
        }
        if self.active.as_ref() == Some(master) && self.registered {
            // Lost the followed master: re-register with it (and only it)
            // once it is back, unless another master proves a newer epoch.
            self.registered = false;
            self.timers.cancel(Timer::Heartbeat);
            self.arm_reregistration(now);
        }
        self.arm_reconnect();
    }

    fn arm_reconnect(&mut self) {
        let next =
            self.links.values().filter(|l| l.state == LinkState::Down).map(|l| l.retry_at).min();
        if let Some(at) = next {
            self.timers.set(Timer::Reconnect, at);
        }
    }

    fn on_reconnect_timer(&mut self, now: Millis, out: &mut Vec<Action>) {
        for (addr, link) in self.links.iter_mut() {
            if link.state == LinkState::Down && link.retry_at <= now {
                link.state = LinkState::Connecting;
                out.push(Action::Connect { master: addr.clone() });
            }
        }
        self.arm_reconnect();
    }

    /// Learns (and dials) the masters not known yet. However many messages
    /// bring new ones, the worker holds at most its configured masters plus
    /// [`MAX_ADVERTISED_MASTERS`] learned ones (a leader's listing drops
    /// the learned ones it no longer names); past that, a new master is
    /// not learned, and that is reported once per message (as from `from`,
    /// the master that sent the list or the hint).
    fn learn_masters(&mut self, from: &Addr, masters: &[Addr], out: &mut Vec<Action>) {
        let room = self.config.masters.len() + MAX_ADVERTISED_MASTERS;
        let mut refused = 0;
        for m in masters {
            if !self.links.contains_key(m) && self.links.len() >= room {
                refused += 1;
            } else if !self.links.contains_key(m) {
                self.links.insert(
                    m.clone(),
                    Link {
                        state: LinkState::Connecting,
                        backoff: self.config.reconnect_min,
                        retry_at: Millis::ZERO,
                        was_open: false,
                    },
                );
                out.push(Action::Connect { master: m.clone() });
            }
        }
        if refused > 0 {
            let reason = format!(
                "{refused} more masters not learned: this worker knows {} already, the most it \
                 keeps (its configured ones plus MAX_ADVERTISED_MASTERS)",
                self.links.len()
            );
            self.reject(from.clone(), reason, out);
        }
    }

    /// The leader at `from` (the highest epoch seen) lists `masters`: a
    /// learned master it does not list is gone from the election and is
    /// dropped, its connection closed. Configured masters are kept forever.
    /// (A link whose dial is in flight is left for the next list.)
    fn forget_unlisted(&mut self, from: &Addr, masters: &[Addr], out: &mut Vec<Action>) {
        let listed: std::collections::BTreeSet<&Addr> = masters.iter().collect();
        let gone: Vec<Addr> = self
            .links
            .iter()
            .filter(|(a, l)| {
                *a != from
                    && l.state != LinkState::Connecting
                    && !listed.contains(a)
                    && !self.config.masters.contains(a)
            })
            .map(|(a, _)| a.clone())
            .collect();
        for a in gone {
            let link = self.links.remove(&a).expect("listed above");
            self.probed.remove(&a);
            if link.state == LinkState::Open {
                let reason = format!("the leader at {from} no longer lists {a}");
                out.push(Action::Close { master: a, reason });
            }
        }
    }

    fn register_msg(&self, now: Millis) -> Message {
        Message::RegisterWorker(RegisterWorker {
            worker: self.config.id.clone(),
            incarnation: self.config.incarnation,
            cores: self.config.cores,
            memory_mb: self.config.memory_mb,
            executors: self.executors.keys().filter_map(|id| self.report(now, id)).collect(),
            epoch_seen: self.max_epoch,
            launch_seen: if self.launch_seen.0 == self.max_epoch { self.launch_seen.1 } else { 0 },
            attributes: self.config.attributes.clone(),
            ports: self.config.ports.clone(),
            host: self.config.host.clone(),
            resources: self.config.resources.clone(),
            users: self.config.users.clone(),
        })
    }

    /// Follows `master`, which proved leadership at `epoch` (>= max_epoch),
    /// and reports the full state to it unless already registered there.
    fn follow(&mut self, now: Millis, master: Addr, epoch: Epoch, out: &mut Vec<Action>) {
        let switching = self.active.as_ref() != Some(&master) || epoch > self.max_epoch;
        self.max_epoch = epoch;
        if !switching && self.registered {
            return;
        }
        if switching {
            self.registered = false;
            self.timers.cancel(Timer::Heartbeat);
        }
        self.active = Some(master.clone());
        self.asked.registration(&master, now);
        out.push(Action::Send { to: master, msg: self.register_msg(now) });
        // Pending retries aimed at the old master are void: restart the clock.
        if self.ever_registered {
            self.retry_backoff = self.config.reconnect_min;
            self.arm_reregistration(now);
        } else {
            let at = now + self.jitter.scale(self.retry_interval(), 50, 150);
            self.timers.set(Timer::Registration, at);
        }
    }

    fn retry_interval(&self) -> Millis {
        if self.attempts < self.config.initial_retries {
            self.config.initial_retry_interval
        } else {
            self.config.prolonged_retry_interval
        }
    }

    fn arm_reregistration(&mut self, now: Millis) {
        let at = now + self.jitter.scale(self.retry_backoff, 50, 150);
        self.retry_backoff = self.retry_backoff.times(2).min(self.config.reconnect_max.times(5));
        self.timers.set(Timer::Registration, at);
    }

    fn on_message(&mut self, now: Millis, from: Addr, msg: Message, out: &mut Vec<Action>) {
        let Some(link) = self.links.get_mut(&from) else {
            return;
        };
        if !link.was_open {
            // The master's first frame: the link works end to end.
            link.was_open = true;
            link.backoff = self.config.reconnect_min;
        }
        if let Some(reason) = advertised_in_message_problem(&msg) {
            // Checked before any of it is learned or dialled (docs/design.md#peer-input-never-panics): a real leader never advertises past the limits.
            self.reject(from, reason, out);
            return;
        }
        if let Some(epoch) = msg.master_epoch() {
            if epoch < self.max_epoch && !self.config.unsafe_no_epoch_fencing {
                // Fenced: a deposed or recovered-old leader (docs/design.md#epochs-fence-everything).
                return;
            }
        }
        // An answer of a leader to this worker's own request, dated at the
        // request's sending: if it is the master followed once handled,
        // the worker has heard from its master (a singleton runs on). Word
        // sent unasked proves nothing about what the leader heard
        // (docs/design.md#issue-45, [`crate::cut_off`]).
        let sent = match &msg {
            Message::Registered { .. } => self.asked.registered(&from),
            Message::HeartbeatAck { .. } => self.asked.heartbeat_answered(&from),
            Message::ReconnectWorker { .. } => {
                // Answers a heartbeat with a refusal: it dates nothing, but
                // keeps the pairing in step.
                let _ = self.asked.heartbeat_answered(&from);
                None
            }
            _ => None,
        };
        let from_for_word = from.clone();
        self.on_master_message(now, from, msg, out);
        if let Some(sent) = sent {
            if self.active.as_ref() == Some(&from_for_word) {
                self.cut_off.heard(sent);
                self.arm_cut_off();
            }
        }
    }

    /// Handles a message from master `from` that passed the checks of
    /// [`Worker::on_message`].
    fn on_master_message(&mut self, now: Millis, from: Addr, msg: Message, out: &mut Vec<Action>) {
        match msg {
            Message::HelloReply(reply) => {
                self.learn_masters(&from, &reply.masters, out);
                if reply.leading {
                    if reply.epoch > self.max_epoch
                        || self.active.is_none()
                        || self.active.as_ref() == Some(&from)
                    {
                        self.follow(now, from.clone(), reply.epoch, out);
                        self.forget_unlisted(&from, &reply.masters, out);
                    }
                } else {
                    self.followed_master_stepped_down(now, &from);
                    if let Some(hint) = reply.leader {
                        self.chase_hint(hint, out);
                    }
                }
            }
            Message::MasterChanged { epoch, masters, .. } => {
                self.learn_masters(&from, &masters, out);
                self.follow(now, from.clone(), epoch, out);
                self.forget_unlisted(&from, &masters, out);
            }
            Message::Registered { epoch, heartbeat_interval, masters, .. } => {
                if epoch == self.max_epoch && self.active.as_ref() != Some(&from) {
                    return; // not the master we follow, and proves nothing newer
                }
                self.learn_masters(&from, &masters, out);
                self.forget_unlisted(&from, &masters, out);
                self.max_epoch = epoch;
                self.active = Some(from);
                let first_ack_here = !self.registered;
                self.registered = true;
                self.ever_registered = true;
                self.attempts = 0;
                self.retry_backoff = self.config.reconnect_min;
                self.heartbeat_interval = Some(heartbeat_interval);
                self.last_ack = now;
                if first_ack_here {
                    self.timers.cancel(Timer::Registration);
                    self.timers.set(Timer::Heartbeat, now + heartbeat_interval);
                }
            }
            Message::HeartbeatAck { .. } if self.active.as_ref() == Some(&from) => {
                self.last_ack = now;
            }
            Message::ReconnectWorker { epoch }
                if self.active.as_ref() == Some(&from) || epoch > self.max_epoch =>
            {
                self.registered = false;
                self.active = None;
                self.follow(now, from, epoch, out);
            }
            // Only the followed master, at the current epoch (lower epochs
            // were fenced above), may start or stop executors here.
            Message::LaunchExecutor { epoch, executor, framework, spec, launch } => {
                let report = ExecutorReport {
                    health: None,
                    ran_ms: None,
                    id: executor,
                    framework,
                    cores: spec.cores,
                    memory_mb: spec.memory_mb,
                    state: ExecutorState::Launching,
                    ports: Vec::new(),
                    resources: Vec::new(),
                };
                self.on_launch(now, from, epoch, launch, report, spec, out);
            }
            Message::KillExecutorOnWorker { executor, .. }
                if self.active.as_ref() == Some(&from)
                    && self.executors.get(&executor).is_some_and(|e| !e.state.is_terminal()) =>
            {
                out.push(Action::Executor(ExecutorCommand::Kill { executor }));
            }
            Message::StopExecutorOnWorker { executor, grace, signal, .. }
                if self.active.as_ref() == Some(&from)
                    && self.executors.get(&executor).is_some_and(|e| !e.state.is_terminal()) =>
            {
                out.push(Action::Executor(ExecutorCommand::Stop { executor, grace, signal }));
            }
            // A framework's report of a manual check, relayed by the
            // followed master: counted like a run of the check.
            Message::HealthOnWorker { executor, check, passing, detail, .. }
                if self.active.as_ref() == Some(&from) =>
            {
                let verdict = self.health.report(now, &executor, check, passing, &detail);
                self.on_verdict(now, executor, verdict, out);
                self.arm_checks();
            }
            // The master recorded the terminal state: it may be forgotten.
            Message::ExecutorStatusAck { executor, .. }
                if self.active.as_ref() == Some(&from)
                    && self.executors.get(&executor).is_some_and(|e| e.state.is_terminal()) =>
            {
                self.executors.remove(&executor);
            }
            // Reading is harmless, but only the followed master (at the
            // current epoch: lower ones were fenced above) gets an answer
            // with bytes; another is told why not, so it does not wait.
            Message::ReadLog { relay, executor, stream, offset, max, .. } => {
                if self.active.as_ref() == Some(&from) {
                    let live =
                        self.executors.get(&executor).is_some_and(|e| !e.state.is_terminal());
                    out.push(Action::ReadLog {
                        master: from,
                        relay,
                        executor,
                        stream,
                        offset,
                        max: max.min(MAX_LOG_CHUNK),
                        live,
                    });
                } else {
                    let reason = format!(
                        "worker {} follows {}, not the master that asked",
                        self.config.id,
                        self.active.as_ref().map_or("no master yet", |a| a.as_str())
                    );
                    let read = LogRead::Failed { reason };
                    let msg = Message::LogData { relay, live: false, read };
                    out.push(Action::Send { to: from, msg });
                }
            }
            Message::Shutdown { reason, .. } => {
                self.exited = true;
                out.push(Action::Exit {
                    reason: format!("master {from} told this worker to shut down: {reason}"),
                });
            }
            Message::NotLeader { leader, .. } => {
                self.followed_master_stepped_down(now, &from);
                if let Some(hint) = leader {
                    self.chase_hint(hint, out);
                }
            }
            // Retryable: the registration timer tries again.
            Message::LeaderSuspended { .. } => {}
            // Refused (a limit such as `max_workers`; the node logs the
            // reason): nothing was recorded, and the registration timer
            // tries again. A first registration goes on at the prolonged
            // interval and is not given up while it is refused: each
            // refusal sets the attempts back to where that interval
            // starts (below the total), so a worker waits for room
            // instead of exiting.
            Message::RegisterRefused { .. } if !self.ever_registered => {
                let prolonged = self.config.initial_retries;
                self.attempts = prolonged.min(self.config.total_retries.saturating_sub(1));
            }
            // Not for a worker: ignored.
            _ => {}
        }
    }

    /// A `LaunchExecutor` from `from` at `epoch` (not lower than the highest
    /// seen: fenced before). Counted in `launch_seen` when it is of the
    /// epoch followed. Started when `from` is the master followed, this
    /// worker is registered with it and no live executor of the same slot
    /// runs here; a duplicate of a known executor is
    /// ignored (its state is reported anyway); any other launch is
    /// answered `Killed` (the worker's doing, not the executor's: the
    /// master refills the slot without charging a retry) instead of being
    /// dropped, so no slot waits for an executor that never starts. Issue
    /// 20, docs/design.md#one-executor-per-slot. A singleton whose lease
    /// lapsed already (no word from the master followed for its group's
    /// `stop_after`: the order waited while this process was paused, say)
    /// is not started either, but reported as its cut-off stop, docs/design.md#issue-45.
    #[allow(clippy::too_many_arguments)]
    fn on_launch(
        &mut self,
        now: Millis,
        from: Addr,
        epoch: Epoch,
        launch: u64,
        mut report: ExecutorReport,
        spec: ExecutorSpec,
        out: &mut Vec<Action>,
    ) {
        if epoch == self.max_epoch {
            let seen = if self.launch_seen.0 == epoch { self.launch_seen.1 } else { 0 };
            self.launch_seen = (epoch, seen.max(launch));
        }
        if self.executors.contains_key(&report.id) {
            return;
        }
        let followed = self.active.as_ref() == Some(&from);
        // A live executor of the same slot already runs here: launched by an
        // earlier leadership, it is one the leader has not heard of yet (its
        // report is on the way behind a registration taken before it, say,
        // held by a partition). Starting this one would run two executors
        // of one slot; the leader kills the other once its report arrives
        // and fills the slot again.
        let slot = report.id.group_slot(&report.framework);
        let slot_taken = slot.is_some()
            && self.executors.values().any(|e| {
                !e.state.is_terminal()
                    && e.framework == report.framework
                    && e.id.group_slot(&e.framework) == slot
            });
        if followed && self.registered && !slot_taken {
            if let Some(rule) = spec.launch.disconnect.filter(|r| self.cut_off.lapsed(*r, now)) {
                // Its lease lapsed before it started: the leader may have
                // placed the slot again already (`cut_off::replace_after`
                // after it last heard from this worker), so starting it
                // would run the slot twice until the watch stopped it. It
                // ends as that stop would have ended it (no retry charged),
                // kept until acknowledged, docs/design.md#issue-45.
                report.state =
                    ExecutorState::Failed { reason: crate::launch::cut_off_reason(rule) };
                self.executors.insert(report.id.clone(), report.clone());
                let msg = Message::ExecutorStatus { incarnation: self.config.incarnation, report };
                out.push(Action::Send { to: from, msg });
                return;
            }
            let mut spec = spec;
            let given = self
                .number_ports(&mut report, &mut spec)
                .and_then(|()| self.give_resources(&mut report, &mut spec));
            if let Err(reason) = given {
                // The leader counted a free port that is not (a stray, say,
                // still holds it): the launch fails with the reason, the
                // slot is retried.
                let reason = crate::launch::refused_launch(&reason);
                report.state = ExecutorState::Failed { reason };
                self.executors.insert(report.id.clone(), report.clone());
                let msg = Message::ExecutorStatus { incarnation: self.config.incarnation, report };
                out.push(Action::Send { to: from, msg });
                return;
            }
            let ExecutorReport { id, framework, .. } = report.clone();
            // Checked once it runs, at the ports just numbered
            // (docs/design.md#issue-45).
            let host = self.config.host.as_deref().unwrap_or("127.0.0.1");
            self.health.launched(id.clone(), &spec.launch.checks, &report.ports, host);
            if let Some(rule) = spec.launch.disconnect {
                // A singleton (docs/design.md#issue-45): watched while it lives.
                self.cut_off.guard(id.clone(), rule);
                self.arm_cut_off();
            }
            self.executors.insert(id.clone(), report);
            out.push(Action::Executor(ExecutorCommand::Start { executor: id, framework, spec }));
            return;
        }
        report.state = ExecutorState::Killed;
        if followed {
            // Kept, like any terminal state, until the master acknowledges
            // it (and reported in the next registration).
            self.executors.insert(report.id.clone(), report.clone());
        }
        let msg = Message::ExecutorStatus { incarnation: self.config.incarnation, report };
        out.push(Action::Send { to: from, msg });
    }

    /// Numbers the ports `spec` names from this worker's ranges, none held
    /// by a live executor here ([`crate::ports::allocate`]), into the
    /// report and the executor's environment (`REGENT_PORT_<NAME>`, set
    /// after the group's own variables, so it wins); the reason if too few
    /// are free.
    fn number_ports(
        &self,
        report: &mut ExecutorReport,
        spec: &mut ExecutorSpec,
    ) -> Result<(), String> {
        let names = &spec.launch.ports;
        if names.is_empty() {
            return Ok(());
        }
        let taken: std::collections::BTreeSet<u16> = self
            .executors
            .values()
            .filter(|e| !e.state.is_terminal())
            .flat_map(|e| e.ports.iter().map(|(_, p)| *p))
            .collect();
        let Some(ports) = crate::ports::allocate(&self.config.ports, &taken, names) else {
            return Err(format!(
                "worker {} has too few free ports for {} ({}): {} of {} offered ({}) are held",
                self.config.id,
                names.len(),
                names.join(", "),
                taken.len(),
                crate::ports::count(&self.config.ports),
                crate::ports::describe_ranges(&self.config.ports),
            ));
        };
        for (name, port) in &ports {
            spec.env.push((crate::ports::env_name(name), port.to_string()));
        }
        report.ports = ports;
        Ok(())
    }

    /// Gives the executor the addresses of the named resources `spec` asks
    /// for, the first free ones of this worker's offer, none held by a
    /// live executor here ([`crate::resources::allocate`]), into the report
    /// and the executor's environment (`REGENT_RESOURCE_<NAME>`, and
    /// `CUDA_VISIBLE_DEVICES` for `gpu`, set after the group's own
    /// variables, so they win); the reason if too few are free.
    fn give_resources(
        &self,
        report: &mut ExecutorReport,
        spec: &mut ExecutorSpec,
    ) -> Result<(), String> {
        let amounts = &spec.launch.resources;
        if amounts.is_empty() {
            return Ok(());
        }
        let live = self.executors.values().filter(|e| !e.state.is_terminal());
        let taken = crate::resources::held(live.map(|e| &e.resources));
        let assigned = crate::resources::allocate(&self.config.resources, &taken, amounts)
            .map_err(|short| format!("worker {} has {short}", self.config.id))?;
        spec.env.extend(crate::resources::env(&assigned));
        report.resources = assigned;
        Ok(())
    }

    /// `from` says it does not lead. If it is the master followed, stop
    /// counting on it: a registered worker re-registers (with it, or with a
    /// master that proves a newer epoch); a worker still bootstrapping knows
    /// no leader any more, so its retries go to every master again.
    fn followed_master_stepped_down(&mut self, now: Millis, from: &Addr) {
        if self.active.as_ref() != Some(from) {
            return;
        }
        if self.registered {
            self.registered = false;
            self.timers.cancel(Timer::Heartbeat);
            self.arm_reregistration(now);
        } else if !self.ever_registered {
            self.active = None;
        }
    }

    fn open_links(&self) -> impl Iterator<Item = &Addr> {
        self.links.iter().filter(|(_, l)| l.state == LinkState::Open).map(|(a, _)| a)
    }

    fn link_open(&self, addr: &Addr) -> bool {
        self.links.get(addr).is_some_and(|l| l.state == LinkState::Open)
    }

    fn on_registration_timer(&mut self, now: Millis, out: &mut Vec<Action>) {
        if self.registered {
            return;
        }
        // Each retry may chase every hint once more.
        self.probed.clear();
        if self.ever_registered {
            // Re-registration: only ever with the followed master (SPARK-4592).
            // While it is unreachable, probe the others with `Hello` (never a
            // registration): a new leader's reply proves its epoch.
            match self.active.clone() {
                Some(active) if self.link_open(&active) => {
                    self.asked.registration(&active, now);
                    out.push(Action::Send { to: active, msg: self.register_msg(now) });
                }
                _ => {
                    let probes: Vec<Addr> = self.open_links().cloned().collect();
                    for addr in probes {
                        out.push(self.hello(addr));
                    }
                }
            }
            self.arm_reregistration(now);
            return;
        }
        self.attempts += 1;
        if self.attempts > self.config.total_retries {
            let tried: Vec<&str> = self.links.keys().map(|a| a.as_str()).collect();
            self.exited = true;
            out.push(Action::Exit {
                reason: format!(
                    "could not register with any master after {} attempts; tried: {}",
                    self.config.total_retries,
                    tried.join(", ")
                ),
            });
            return;
        }
        match self.active.clone() {
            // A master proved leadership: retry with it only (SPARK-16190).
            Some(active) => {
                if self.link_open(&active) {
                    self.asked.registration(&active, now);
                    out.push(Action::Send { to: active, msg: self.register_msg(now) });
                }
            }
            // Still bootstrapping: every connected master (standbys answer
            // NotLeader with a hint); down ones are redialled by Reconnect.
            None => {
                let msg = self.register_msg(now);
                let open: Vec<Addr> = self.open_links().cloned().collect();
                for addr in open {
                    self.asked.registration(&addr, now);
                    out.push(Action::Send { to: addr, msg: msg.clone() });
                }
            }
        }
        let at = now + self.jitter.scale(self.retry_interval(), 50, 150);
        self.timers.set(Timer::Registration, at);
    }

    /// Sends the newest usage sample to `active` if one waits and the last
    /// was sent at least [`USAGE_INTERVAL`] ago: only running executors
    /// this machine knows of, at most
    /// [`crate::limits::MAX_EXECUTORS_PER_WORKER`].
    fn send_usage(&mut self, now: Millis, active: &Addr, out: &mut Vec<Action>) {
        if self.usage_sent.is_some_and(|at| now.since(at) < USAGE_INTERVAL) {
            return;
        }
        let Some(mut usage) = self.usage.take() else { return };
        usage.executors.retain(|e| {
            self.executors.get(&e.executor).is_some_and(|r| r.state == ExecutorState::Running)
        });
        usage.executors.truncate(crate::limits::MAX_EXECUTORS_PER_WORKER);
        self.usage_sent = Some(now);
        out.push(Action::Send {
            to: active.clone(),
            msg: Message::WorkerUsage { incarnation: self.config.incarnation, usage },
        });
    }

    fn on_heartbeat_timer(&mut self, now: Millis, out: &mut Vec<Action>) {
        let (Some(active), Some(interval)) = (self.active.clone(), self.heartbeat_interval) else {
            return;
        };
        if !self.registered || !self.link_open(&active) {
            return;
        }
        let limit = interval.times(self.config.heartbeat_timeout_factor);
        if now.since(self.last_ack) > limit {
            out.push(Action::Close {
                master: active.clone(),
                reason: format!("no heartbeat acknowledgement for {}", now.since(self.last_ack)),
            });
            self.on_link_down(now, &active);
            return;
        }
        self.asked.heartbeat(&active, now);
        out.push(Action::Send {
            to: active.clone(),
            msg: Message::WorkerHeartbeat { incarnation: self.config.incarnation },
        });
        self.send_usage(now, &active, out);
        // Terminal states stay until the master acknowledges them: resend
        // any it has not (it may have been unable to record them).
        let unacked: Vec<ExecutorId> = self
            .executors
            .values()
            .filter(|e| e.state.is_terminal())
            .map(|e| e.id.clone())
            .collect();
        for id in unacked {
            self.report_executor(now, &id, out);
        }
        self.timers.set(Timer::Heartbeat, now + interval);
    }

    fn on_executor_changed(
        &mut self,
        now: Millis,
        executor: ExecutorId,
        state: ExecutorState,
        out: &mut Vec<Action>,
    ) {
        let Some(e) = self.executors.get_mut(&executor) else { return };
        if e.state.is_terminal() || e.state == state {
            return; // a terminal state is final
        }
        let mut state = state;
        if state == ExecutorState::Running {
            self.running_since.insert(executor.clone(), now);
            self.health.running(now, &executor, &mut self.jitter);
        } else if state.is_terminal() {
            // How long it ran is fixed at its end.
            e.ran_ms = self.running_since.remove(&executor).map(|t| now.since(t).0);
            let unhealthy = self.health.forget(&executor);
            if let Some(reason) = self.cut_off.forget(&executor) {
                // Stopped for want of a master: said so, and refilled
                // without a retry charged (docs/design.md#issue-45).
                state = ExecutorState::Failed { reason };
            } else if let Some(reason) = unhealthy {
                // Stopped by its failing checks: said so, and refilled
                // under the group's restart policy, as a crash is
                // (docs/design.md#issue-45).
                state = ExecutorState::Failed { reason };
            }
        }
        let ended = state.is_terminal();
        e.state = state;
        if ended {
            self.arm_cut_off();
        }
        self.arm_checks();
        self.report_executor(now, &executor, out);
    }

    /// Sets (or cancels) the cut-off timer to the next singleton's deadline.
    fn arm_cut_off(&mut self) {
        match self.cut_off.next_deadline() {
            Some(at) => self.timers.set(Timer::CutOff, at),
            None => self.timers.cancel(Timer::CutOff),
        }
    }

    /// No word from the master followed for a singleton's `stop_after`:
    /// its executor is killed (with its group's kill grace), its end
    /// reported once a master is reachable again (docs/design.md#issue-45).
    fn on_cut_off_timer(&mut self, now: Millis, out: &mut Vec<Action>) {
        for executor in self.cut_off.due(now) {
            if self.executors.get(&executor).is_some_and(|e| !e.state.is_terminal()) {
                out.push(Action::Executor(ExecutorCommand::Kill { executor }));
            }
        }
        self.arm_cut_off();
    }

    /// Sets (or cancels) the checks' sweep timer to the next run, backstop
    /// or manual TTL.
    fn arm_checks(&mut self) {
        match self.health.next_deadline() {
            Some(at) => self.timers.set(Timer::Checks, at),
            None => self.timers.cancel(Timer::Checks),
        }
    }

    /// Whether the leader followed was heard within the heartbeat timeout
    /// (a manual check's lapsed TTL counts only then).
    fn leader_heard(&self, now: Millis) -> bool {
        let Some(interval) = self.heartbeat_interval else { return false };
        self.registered
            && now.since(self.cut_off.heard_at())
                <= interval.times(self.config.heartbeat_timeout_factor)
    }

    /// The checks due: runs handed to the runtime, status changes reported,
    /// executors whose checks failed enough stopped.
    fn on_checks_timer(&mut self, now: Millis, out: &mut Vec<Action>) {
        let heard = self.leader_heard(now);
        let sweep = self.health.sweep(now, heard);
        for run in sweep.runs {
            out.push(Action::Executor(ExecutorCommand::RunCheck(run)));
        }
        for id in sweep.changed {
            self.report_executor(now, &id, out);
        }
        for executor in sweep.stop {
            self.stop_unhealthy(executor, out);
        }
        self.arm_checks();
    }

    /// What a check result did: a status change is reported to the
    /// leader (an unchanged one sends nothing), a check that failed
    /// enough stops its executor.
    fn on_verdict(
        &mut self,
        now: Millis,
        executor: ExecutorId,
        verdict: crate::health::Verdict,
        out: &mut Vec<Action>,
    ) {
        if verdict.changed {
            self.report_executor(now, &executor, out);
        }
        if verdict.stop {
            self.stop_unhealthy(executor, out);
        }
    }

    /// Kills an executor whose checks failed (with its group's kill grace,
    /// as the cut-off does): its end is reported `unhealthy: …` and the
    /// leader refills the slot under the restart policy. The worker never
    /// restarts anything in place.
    fn stop_unhealthy(&mut self, executor: ExecutorId, out: &mut Vec<Action>) {
        if self.executors.get(&executor).is_some_and(|e| !e.state.is_terminal()) {
            out.push(Action::Executor(ExecutorCommand::Kill { executor }));
        }
    }

    /// Tells the followed master about one executor, if registered with it.
    fn report_executor(&self, now: Millis, id: &ExecutorId, out: &mut Vec<Action>) {
        let (Some(active), Some(report)) = (self.active.clone(), self.report(now, id)) else {
            return;
        };
        if self.registered && self.link_open(&active) {
            out.push(Action::Send {
                to: active,
                msg: Message::ExecutorStatus { incarnation: self.config.incarnation, report },
            });
        }
    }

    /// The report of executor `id` as of now: a live one's `ran_ms` is how
    /// long it has run so far.
    fn report(&self, now: Millis, id: &ExecutorId) -> Option<ExecutorReport> {
        let mut report = self.executors.get(id)?.clone();
        if let Some(since) = self.running_since.get(id) {
            report.ran_ms = Some(now.since(*since).0);
        }
        report.health = self.health.of(now, id);
        Some(report)
    }

    /// The executors this worker knows of: running ones and terminal ones
    /// the master has not acknowledged yet.
    pub fn executors(&self) -> impl Iterator<Item = &ExecutorReport> {
        self.executors.values()
    }
}

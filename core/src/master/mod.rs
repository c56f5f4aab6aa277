//! The master machine: leadership lifecycle and worker registry.
//!
//! Leadership arrives as events ([`Event::Elected`], [`Event::Revoked`]) fed
//! in by the daemon from the elector (docs/design.md#child-machines-are-composed-in-core), so this machine is
//! testable without one.
//!
//! * **Standby**: answers registrations with `NotLeader { leader hint }` and
//!   keeps every `Hello` connection, so that it can push `MasterChanged` the
//!   moment it is elected.
//! * **Alive**: registrations are persisted before they are acknowledged
//!   (docs/design.md#durable-before-acknowledged); duplicates are acknowledged idempotently; a new
//!   incarnation of a worker id replaces the old one, which is told to shut
//!   down; a sweep timer marks silent workers DEAD and un-persists them.
//! * **Executor output** (`logs`): an operator's `LogRequest` is relayed to
//!   the executor's worker and its answer checked and passed back; every
//!   relay ends with an answer (bytes, a refusal, the worker gone, a
//!   timeout).
//!
//! This file holds the machine's types, `handle` and its dispatch of
//! events, and the small accessors; each message is answered in
//! `messages`, and the work it asks for is done in `workers`, `executors`
//! (whose `Executors` keeps the executors and their index), `frameworks`,
//! `operator` and `logs`.
//!
//! Tests: core/tests/ (one suite per subject; the table in
//! docs/testing.md), the properties and the simulator in tests/tests/.

mod authorize;
mod authorize_query;
mod by_attribute;
mod deployment;
mod deployment_view;
mod executors;
mod fairness;
mod frameworks;
mod gauges;
mod history;
mod job_status;
mod jobs;
mod kills;
mod leadership;
mod logs;
mod manual_checks;
mod messages;
mod operator;
mod plan;
mod plan_victims;
mod preempt;
mod restarts;
mod scoped_reads;
mod silence;
mod snapshot;
mod tenants;
mod timers;
mod workers;

use crate::deadlines::Deadlines;
use crate::ids::{Addr, ConnId, Epoch, ExecutorId, FrameworkId, MasterId, QueryId, WorkerId};
use crate::policy::Placement;
use crate::protocol::{
    ClusterState, ExecutorState, ExecutorView, FrameworkView, GroupView, LeaderHint, LogStream,
    Message, Role, Usage, WorkerUsageView, WorkerView,
};
use crate::states::DrainState;
use crate::store::Maintenance;
use crate::store::{Record, WriteId};
use crate::store::{StoreCommand, StoreEvent};
use crate::time::Millis;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

pub use authorize_query::{framework_of, FORBIDDEN};
pub use deployment::{instance_health, Instance};
pub use executors::ExecutorEntry;
pub use frameworks::{FrameworkEntry, GroupState, ProgressDue};
pub use gauges::Gauges;
pub use kills::{DyingHold, Owed};
pub use workers::{WorkerEntry, WorkerState};

/// Master configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// This master's id.
    pub id: MasterId,
    /// The address workers and subscribers dial.
    pub addr: Addr,
    /// How often workers heartbeat, at least (see
    /// `max_heartbeats_per_second`). Default 1 s.
    pub heartbeat_interval: Millis,
    /// A worker silent this long is DEAD. Default 10 s. A worker told a
    /// longer heartbeat interval than `heartbeat_interval` gets a timeout
    /// longer in the same proportion ([`Config::scaled`]).
    pub worker_timeout: Millis,
    /// How long a new leader waits for recovered workers to report.
    /// Default: the worker timeout. Scaled like the worker timeout by the
    /// heartbeat interval the recorded workers are due
    /// ([`Config::heartbeat_interval_for`]).
    pub recovery_timeout: Millis,
    /// Heartbeat load control (Nomad's `max_heartbeats_per_second`): the
    /// most heartbeats per second the leader lets all its workers send
    /// together. With `n` workers, each is told to heartbeat every
    /// `max(heartbeat_interval, n / max_heartbeats_per_second)`, plus a
    /// jitter of up to a quarter of that when the ceiling binds, so the
    /// heartbeats spread out; a worker whose interval no longer suits the
    /// cluster's size is told its new one with its next heartbeat
    /// acknowledgement. 0: no ceiling. Default
    /// [`DEFAULT_MAX_HEARTBEATS_PER_SECOND`].
    pub max_heartbeats_per_second: u32,
    /// When recovery times out and more than this share (percent) of the
    /// recovered workers have not reported, none of them is removed: they
    /// stay UNKNOWN (Mesos' `recovery_agent_removal_limit`). Default 50.
    pub recovery_removal_limit_pct: u8,
    /// How executors are placed on workers. Default [`Placement::Spread`].
    pub placement: Placement,
    /// Whether a waiting slot may preempt executors of a richer tenant
    /// (docs/tenants.md; only once a tenant is set). Default on;
    /// `--preemption off`.
    pub preemption: bool,
    /// Failed executors (non-zero exit, failed launch) a group may replace
    /// before the slot fails (Spark's `spark.deploy.maxExecutorRetries`).
    /// Default 10.
    pub max_executor_retries: u32,
    /// How many frameworks (framework records) may exist at once; a
    /// SUBSCRIBE that would create one more is refused. The store backend
    /// decides the real bound. Default [`crate::limits::DEFAULT_MAX_FRAMEWORKS`].
    pub max_frameworks: usize,
    /// How many finished frameworks the leader keeps in its history (see
    /// [`crate::protocol::FinishedFramework`]); older ones are deleted. Default
    /// [`crate::limits::DEFAULT_RETAINED_FRAMEWORKS`] (200, like Spark's
    /// `spark.deploy.retainedApplications`), at most
    /// [`crate::limits::MAX_RETAINED_FRAMEWORKS`].
    pub retained_frameworks: usize,
    /// How many workers the leader's registry may hold at once (every
    /// worker id it knows: registered, recovered, DEAD); a registration of
    /// a new worker id past it is refused with `RegisterRefused` naming the
    /// limit (the worker retries slowly). Default
    /// [`crate::limits::DEFAULT_MAX_WORKERS`], at most
    /// [`crate::limits::MAX_WORKERS_LIMIT`]. Independently, a new worker id
    /// whose record would overfill its store shard's listing is refused
    /// ([`crate::limits::MAX_WORKER_SHARD_LISTING`]).
    pub max_workers: usize,
    /// Test-only, never set outside tests: an executor stopped to have its
    /// slot refilled (a preemption's victim, an operator's kill with refill,
    /// a drain) settles its slot as killed when it ends, so the slot is never
    /// refilled. The simulator's `preempted_slots` invariant must catch it
    /// (tests/tests/sim_can_fail.rs). Default off.
    pub unsafe_no_refill_after_stop: bool,
    /// Test-only, never set outside tests: a deployment does not charge a
    /// baking slot (running, not yet healthy) to its `max_parallel`, so it
    /// stops the next old executor as soon as a new one runs. The
    /// simulator's `deploy_down` invariant must catch it. Default off.
    pub unsafe_deploy_uncharged_baking: bool,
    /// Test-only, never set outside tests: a failed deployment never
    /// reverts, whatever its `auto_revert`. The simulator's
    /// `deploy_reverts` invariant must catch it. Default off.
    pub unsafe_no_auto_revert: bool,
    /// Test-only, never set outside tests: a new leader starts the count of
    /// every loaded deployment afresh (its `ends` and `healthy` slots
    /// forgotten). The simulator's `deploy_durable` invariant must catch
    /// it. Default off.
    pub unsafe_deployment_afresh_on_takeover: bool,
}

impl Config {
    /// A configuration with the documented defaults.
    pub fn new(id: MasterId, addr: Addr) -> Self {
        Config {
            id,
            addr,
            heartbeat_interval: Millis(1_000),
            worker_timeout: Millis(10_000),
            recovery_timeout: Millis(10_000),
            max_heartbeats_per_second: DEFAULT_MAX_HEARTBEATS_PER_SECOND,
            recovery_removal_limit_pct: 50,
            placement: Placement::Spread,
            preemption: true,
            max_executor_retries: 10,
            max_frameworks: crate::limits::DEFAULT_MAX_FRAMEWORKS,
            retained_frameworks: crate::limits::DEFAULT_RETAINED_FRAMEWORKS,
            max_workers: crate::limits::DEFAULT_MAX_WORKERS,
            unsafe_no_refill_after_stop: false,
            unsafe_deploy_uncharged_baking: false,
            unsafe_no_auto_revert: false,
            unsafe_deployment_afresh_on_takeover: false,
        }
    }

    fn sweep_interval(&self) -> Millis {
        Millis((self.worker_timeout.0 / 4).max(1))
    }

    /// The shortest heartbeat interval the leader tells any of `workers`
    /// workers: `heartbeat_interval`, or longer when `workers` heartbeats
    /// at that interval would pass `max_heartbeats_per_second` — then
    /// `workers / max_heartbeats_per_second` seconds, rounded up to the
    /// millisecond, so the workers' heartbeats together stay under the
    /// ceiling.
    pub fn heartbeat_interval_for(&self, workers: usize) -> Millis {
        let ceiling = u64::from(self.max_heartbeats_per_second);
        if ceiling == 0 {
            return self.heartbeat_interval;
        }
        let spread = (workers as u64).saturating_mul(1_000).div_ceil(ceiling);
        self.heartbeat_interval.max(Millis(spread))
    }

    /// `d` (a timeout) scaled for a worker told to heartbeat every
    /// `interval`: `d × interval / heartbeat_interval`, never below `d` — a
    /// worker heartbeating twice as rarely gets twice as long.
    pub fn scaled(&self, d: Millis, interval: Millis) -> Millis {
        let base = self.heartbeat_interval.0;
        if base == 0 || interval.0 <= base {
            return d;
        }
        let scaled = match d.0.checked_mul(interval.0) {
            Some(p) => p / base,
            None => {
                let wide = u128::from(d.0) * u128::from(interval.0) / u128::from(base);
                u64::try_from(wide).unwrap_or(u64::MAX)
            }
        };
        Millis(scaled).max(d)
    }
}

/// The default of [`Config::max_heartbeats_per_second`]: 10,000. Clusters up
/// to 10,000 workers keep the configured interval (1 s by default); past
/// that, intervals and worker timeouts grow with the cluster (100,000
/// workers: every 10 s, DEAD after 100 s of silence). 10,000 heartbeats a
/// second is about a fifth of what one master handled at 15,000 connected
/// workers on a 2-core machine (46,000 a second, the whole process busy),
/// which leaves the rest for what comes in bursts: every worker
/// re-registering after a failover, placement, the store.
pub const DEFAULT_MAX_HEARTBEATS_PER_SECOND: u32 = 10_000;

/// What happens to a master.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A peer connected (nothing received yet).
    Connected {
        /// The runtime's number for the connection.
        conn: ConnId,
    },
    /// The peer of `conn` proved a token (the wire handshake with a token,
    /// docs/security.md): it acts as `principal` from now on. Comes right
    /// after [`Event::Connected`], before any message.
    Authenticated {
        /// The connection.
        conn: ConnId,
        /// Who it acts as.
        principal: crate::token::Principal,
    },
    /// A connection closed.
    Disconnected {
        /// The connection.
        conn: ConnId,
    },
    /// A message arrived on `conn`.
    Message {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// [`Master::poll_timeout`] has passed: every deadline due at `now`
    /// fires.
    Tick,
    /// The elector made this master leader. The master loads its records,
    /// picks its epoch as `max(last durable epoch + 1, floor, clock)` and
    /// makes it durable before it acts (docs/design.md#epochs-fence-everything).
    Elected {
        /// The epoch floor from the elector.
        floor: Epoch,
        /// Wall-clock milliseconds (the runtime's clock term; 0 to omit).
        clock: u64,
    },
    /// The store answers a [`Action::Store`] command.
    Store(StoreEvent),
    /// The coordination session is in doubt: stop acting, keep leadership.
    Suspended,
    /// The coordination session is back within its lease.
    Resumed,
    /// Leadership is lost.
    Revoked,
    /// Operator command: forget a worker left UNKNOWN (or DEAD).
    RemoveWorker {
        /// The worker.
        worker: WorkerId,
    },
    /// The elector sees `hint` as the leader (possibly this master).
    LeaderIs(LeaderHint),
    /// The election names master `id` at `addr` as leader, its epoch not
    /// proven yet (the elector knows a sequence floor, not the epoch): the
    /// address joins the known masters, and an older hint naming another
    /// master is forgotten, so no hint names a master that no longer leads.
    /// A [`Event::LeaderIs`] with the proven epoch follows.
    LeaderNamed {
        /// The named master.
        id: MasterId,
        /// Its advertised address.
        addr: Addr,
    },
    /// A local asker (an HTTP read, numbered by the runtime) wants a chunk
    /// of `executor`'s output, as an operator's [`Message::LogRequest`]
    /// would: exactly one [`Action::Answer`] for `query` follows (a
    /// `LogChunk`, `RequestRefused`, `NotLeader` or `LeaderSuspended`).
    LogQuery {
        /// The asker's number, echoed in the answer.
        query: QueryId,
        /// The executor.
        executor: ExecutorId,
        /// Which file.
        stream: LogStream,
        /// Where to start; `None`: the last `max` bytes.
        offset: Option<u64>,
        /// The most bytes wanted.
        max: u32,
    },
    /// A client's command from a local asker the runtime authenticated
    /// (the HTTP API, [`crate::node::master::Query::Command`]): handled
    /// as on an operator's connection, answered by one
    /// [`Action::Answer`] for `query`.
    Command {
        /// The asker's number, echoed in the answer.
        query: QueryId,
        /// The command.
        msg: Message,
        /// Who sends it: checked before the master acts
        /// ([`Master::authorize_query`]). Boxed: claims are large.
        principal: Box<crate::token::Principal>,
    },
    /// The masters of the election (every candidate's advertised address).
    /// They replace the masters this master advertises (its own address is
    /// always among them); the leader tells its workers and subscribers with
    /// a `MasterChanged` when the set changed.
    Masters {
        /// The addresses.
        addrs: Vec<Addr>,
    },
}

/// Who asked for something the master answers: a peer on a connection, or
/// a local asker (an HTTP read) by its query number. An answer goes back
/// the way the question came ([`Origin::reply`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Origin {
    /// A peer's connection.
    Conn(ConnId),
    /// A local query.
    Query(QueryId),
}

impl From<ConnId> for Origin {
    fn from(conn: ConnId) -> Self {
        Origin::Conn(conn)
    }
}

impl Origin {
    /// The action that answers `msg` to this asker.
    pub fn reply(self, msg: Message) -> Action {
        match self {
            Origin::Conn(conn) => Action::Send { conn, msg },
            Origin::Query(query) => Action::Answer { query, msg },
        }
    }
}

/// What the runtime must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send `msg` on `conn` (drop it if the connection is gone).
    Send {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// The one answer to the local query `query` ([`Event::LogQuery`]).
    Answer {
        /// The query.
        query: QueryId,
        /// The answer, as a peer asking on a connection would get it.
        msg: Message,
    },
    /// Close `conn` after flushing what was sent before; do not feed
    /// `Disconnected` back.
    Close {
        /// The connection.
        conn: ConnId,
        /// Why, for the log.
        reason: String,
    },
    /// Execute `command` on the store and feed its [`StoreEvent`] back
    /// ([`Event::Store`]). Writes to one key are applied in order.
    Store(StoreCommand),
    /// Give up leadership: close the coordination session so a standby can
    /// take over. The machine is back in standby.
    Abdicate {
        /// Why.
        reason: String,
    },
    /// Seed 002 (docs/design.md#seed-002): a new leader contacts its recorded peers, who need not
    /// know its address. Dial each callback address (paced), and on each
    /// connection send `Hello` and [`Master::announcement`], then close it.
    /// Ends with the leadership.
    Contact {
        /// The recovered workers' callback addresses.
        addrs: Vec<Addr>,
    },
    /// Append `record` to the audit log: a client's change was answered,
    /// accepted or refused (docs/design.md#issue-44, [`crate::audit`]).
    Audit(crate::audit::AuditRecord),
}

/// The master's named deadlines (see `timers`): the machine keeps them and
/// answers [`Master::poll_timeout`]; [`Master::deadline`] names each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Timer {
    /// Mark workers silent for `worker_timeout` DEAD.
    Sweep,
    /// End of the recovery window.
    Recovery,
    /// HEARTBEAT to subscribers; framework failover timeouts.
    FrameworkHeartbeat,
    /// Log reads relayed to workers that are past their deadline are
    /// answered (see `logs`).
    LogRelays,
    /// A drain's deadline passed: kill what still runs on the worker.
    Drain,
    /// A slot's restart backoff ended: it gets a new executor (see
    /// `restarts`).
    Restart,
    /// A deployment looks again: a new executor may have become healthy,
    /// or a deadline passed (see `deployment`; appended).
    Deployment,
}

/// What to do once a write is durable.
#[derive(Clone, Debug, PartialEq, Eq)]
enum AfterWrite {
    /// Send `Subscribed` on `conn`, if it is still the live subscription.
    Subscribed { framework: FrameworkId, conn: ConnId },
    /// Send `RequestAccepted`.
    Accept { conn: ConnId, request: u64 },
    /// Answer `RequestAccepted` to `to` (a connection or a local asker).
    AcceptTo { to: Origin, request: u64 },
    /// `executor` in `state` is durable; acknowledge the report of `ack`.
    Recorded { executor: ExecutorId, state: ExecutorState, ack: Option<WorkerId> },
    /// Acknowledge a worker's report (nothing of it needed recording).
    Ack { worker: WorkerId, executor: ExecutorId },
    /// A write of a declared or scaled group is durable: the slots every
    /// record that is or may become durable holds may be placed.
    GroupDurable { framework: FrameworkId, group: String },
    /// Run placement.
    Place,
    /// A kill requested by the framework is durable in its record: send it
    /// to the executor's worker.
    KillDurable { executor: ExecutorId },
    /// A finished framework's history record is durable: delete its
    /// framework record, then run `then`.
    HistoryDurable { framework: FrameworkId, seq: u64, then: Vec<AfterWrite> },
    /// A drain is durable in the worker's record: stop its executors.
    DrainDurable { worker: WorkerId },
    /// An ended framework's record is deleted durably: kill what still ran
    /// of it (on its worker's current connection).
    EndKills { kills: Vec<(WorkerId, ExecutorId)> },
    /// A scale is durable in the framework's record: tell the subscriber,
    /// kill the surplus executors, stop the named ones with `stop`.
    Scaled {
        framework: FrameworkId,
        group: String,
        slots: u32,
        surplus: Vec<ExecutorId>,
        named: Vec<ExecutorId>,
        stop: Option<crate::api::Stop>,
    },
    /// An update's new spec and rollout are durable: its old executors may
    /// be stopped.
    Rolling { framework: FrameworkId, group: String },
    /// A job's submission is durable: answer `JobAccepted` (see `jobs`).
    JobAccepted { asker: Origin, answer: jobs::Accepted },
    /// The write `write` of a job's change is durable: answers about the
    /// job need wait for it no more.
    JobDurable { framework: FrameworkId, write: WriteId },
}

impl AfterWrite {
    /// The local askers (queries) that `then` would answer, in order, each
    /// once.
    fn waiting_queries<'a>(then: impl Iterator<Item = &'a AfterWrite>) -> Vec<QueryId> {
        let mut queries = Vec::new();
        for t in then {
            match t {
                AfterWrite::AcceptTo { to: Origin::Query(q), .. }
                | AfterWrite::JobAccepted { asker: Origin::Query(q), .. } => queries.push(*q),
                AfterWrite::HistoryDurable { then, .. } => {
                    queries.extend(AfterWrite::waiting_queries(then.iter()))
                }
                _ => {}
            }
        }
        queries.sort();
        queries.dedup();
        queries
    }
}

/// The leadership lifecycle, as views show it (its names are in
/// [`crate::states`]).
pub use crate::states::MasterStatus as Status;

/// This master's leadership: the one state every question about leading
/// is answered from ([`Master::status`] is its projection for views).
///
/// Suspension belongs to an election, so a master that was never elected
/// (or stepped down) cannot be suspended; an elected one is suspended at
/// any stage, but shows SUSPENDED only once its epoch is durable (before
/// that it does not lead yet).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Leadership {
    /// Not elected.
    Standby,
    /// Elected (the elector said so and has not taken it back).
    Elected {
        /// How far the leadership has come.
        stage: Stage,
        /// The coordination session is in doubt (the elector reported
        /// `Suspended` and not yet `Resumed`): nothing that needs the
        /// leadership to be sure is done.
        suspended: bool,
    },
}

/// How far an elected master's leadership has come.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Stage {
    /// Records requested.
    Loading { floor: Epoch, clock: u64 },
    /// Epoch chosen; its write is in flight.
    PersistingEpoch { write: WriteId, epoch: Epoch, records: Vec<Record> },
    /// Leading at a durable epoch; waiting for recovered workers to report.
    Recovering,
    /// Leading at a durable epoch, recovery over.
    Alive,
}

/// Counters for metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Messages handled.
    pub messages: u64,
    /// Messages refused as unexpected for their sender or state.
    pub rejected: u64,
    /// Workers left UNKNOWN by the recovery removal limit.
    pub unknown_workers: u64,
    /// `StateReply` snapshots built afresh.
    pub state_snapshots_built: u64,
    /// `StateRequest`s answered with the cached snapshot.
    pub state_replies_cached: u64,
    /// Log reads relayed to a worker.
    pub log_relays: u64,
    /// Log requests answered `RequestRefused` (unknown executor, worker not
    /// connected, limits, read failures, timeouts...).
    pub log_requests_refused: u64,
    /// Log reads a worker did not answer within `LOG_RELAY_TIMEOUT`.
    pub log_relays_timed_out: u64,
    /// `LogData` answers refused: for a relay never asked of that
    /// connection, or not fitting what was asked (hostile or confused
    /// workers). Also counted in `rejected`.
    pub log_answers_refused: u64,
    /// Executors their worker reported killed by the kernel at their
    /// memory limit (`Failed` with an [`crate::launch::OUT_OF_MEMORY`]
    /// reason), while this master led.
    pub out_of_memory_kills: u64,
}

#[derive(Clone, Debug)]
struct Conn {
    role: Option<Role>,
    worker: Option<WorkerId>,
    framework: Option<FrameworkId>,
    /// The peer's callback listener (`Message::Callback`).
    callback: Option<Addr>,
    /// When this connection last got a freshly built `StateReply`.
    last_fresh_state: Option<Millis>,
    /// Who the peer acts as ([`Event::Authenticated`]); the root until
    /// told otherwise (a peer that proved the cluster secret, or any peer
    /// of a cluster without one).
    principal: crate::token::Principal,
    /// Its place in the order this master accepted connections (1 for the
    /// first): a lower incarnation on a connection opened before its worker's
    /// incarnation registered is a dead process's late message
    /// (docs/design.md#duplicates-are-harmless, `WorkerEntry::registered_after`).
    opened: u64,
}

impl Master {
    /// Who connection `conn`'s peer acts as (the root for a connection
    /// never authenticated with a token, or one already closed).
    pub(crate) fn principal(&self, conn: ConnId) -> &crate::token::Principal {
        static ROOT: crate::token::Principal = crate::token::Principal::Root;
        self.conns.get(&conn).map_or(&ROOT, |c| &c.principal)
    }
}

impl Default for Conn {
    fn default() -> Conn {
        Conn {
            role: None,
            worker: None,
            framework: None,
            callback: None,
            last_fresh_state: None,
            principal: crate::token::Principal::Root,
            opened: 0,
        }
    }
}

/// The master machine.
#[derive(Debug)]
pub struct Master {
    config: Config,
    leadership: Leadership,
    epoch: Epoch,
    leader: Option<LeaderHint>,
    masters: BTreeSet<Addr>,
    conns: FxHashMap<ConnId, Conn>,
    /// How many connections this master has accepted ([`Conn::opened`]).
    conns_opened: u64,
    workers: workers::Registry,
    frameworks: BTreeMap<FrameworkId, FrameworkEntry>,
    executors: executors::Executors,
    /// The slots waiting for an executor (durable group, pending outcome,
    /// nothing filling it), in placement order.
    open_slots: BTreeSet<(FrameworkId, usize, u32)>,
    after_write: FxHashMap<WriteId, Vec<AfterWrite>>,
    /// Where in this step's actions each framework's record is written, if
    /// it is, and whether a later change joined that write (see
    /// [`Master::persist_framework`]); cleared every step.
    step_writes: FxHashMap<FrameworkId, (usize, bool)>,
    /// Debug builds: the record each joined write would have had when the
    /// change joined it, to check the record built at the end of the step.
    #[cfg(debug_assertions)]
    step_records: FxHashMap<FrameworkId, Record>,
    next_launch: u64,
    /// The longest heartbeat interval told to a worker in this leadership.
    longest_heartbeat: Millis,
    /// [`Config::heartbeat_interval_for`] the number of workers last asked
    /// about: (workers, interval).
    floor_for: (usize, Millis),
    /// `spread` placement goes on after this candidate (its key).
    spread_after: Option<workers::PlaceKey>,
    next_write: u64,
    /// Write ids up to this one belong to earlier leaderships.
    leadership_writes_after: u64,
    /// The sweep, the framework heartbeat, the recovery window and the
    /// drain deadline (see `timers`; the log relays' and the restarts' are
    /// derived from their state).
    timers: Deadlines<Timer>,
    metrics: Metrics,
    snapshot: snapshot::SnapshotCache,
    /// Finished frameworks (empty while not leading).
    history: history::History,
    /// Wall-clock ms at `now = 0`, from the clock passed at the election.
    wall_base: Option<u64>,
    /// The revoked tokens and retired key ids (docs/security.md): a
    /// token's holder on the wire is refused by them (`authorize`).
    revocations: crate::token::Revocations,
    /// Log reads relayed to workers, not yet answered.
    logs: logs::Relays,
    /// Executors this leadership kills that are not live in its registry
    /// (see `kills`): strays (not adoptable when reported again, since the
    /// kill may still be on its way, held by the acting lease or in flight
    /// — sim seed 209760 (docs/design.md#simulator-seeds)), a removed framework's (whose kill waits for the
    /// end to be durable), written-off ones reported running; each holds
    /// what it uses on its worker until its end is reported.
    dying: kills::Dying,
    /// Slots of groups with a restart policy that wait out a backoff.
    restart_waits: restarts::Waits,
    /// Singleton groups of removed frameworks whose executors may still
    /// run cut off: a framework created again under the id waits
    /// (docs/design.md#issue-45).
    singleton_holds: crate::cut_off::Holds,
    /// When the deployments under way look again, if one waits for
    /// anything (see `deployment`).
    deployment_wake: Option<Millis>,
    /// Changes asked and not answered yet, for the audit log: who asked
    /// what, by asker and request number (at most [`MAX_PENDING_AUDITS`]).
    audits: authorize_query::PendingAudits,
    /// The tenants an operator set (docs/tenants.md).
    tenants: tenants::Tenants,
    /// What the live executors of each tenant and framework hold.
    usage: fairness::Usage,
    /// Preemptions under way and each tenant's recent ones.
    preemptions: preempt::Preemptions,
}

impl Master {
    /// A master in standby.
    pub fn new(config: Config) -> Self {
        let mut masters = BTreeSet::new();
        masters.insert(config.addr.clone());
        Master {
            config,
            leadership: Leadership::Standby,
            epoch: Epoch::ZERO,
            leader: None,
            masters,
            conns: FxHashMap::default(),
            conns_opened: 0,
            workers: workers::Registry::default(),
            frameworks: BTreeMap::new(),
            executors: executors::Executors::default(),
            open_slots: BTreeSet::new(),
            after_write: FxHashMap::default(),
            step_writes: FxHashMap::default(),
            #[cfg(debug_assertions)]
            step_records: FxHashMap::default(),
            next_launch: 0,
            spread_after: None,
            longest_heartbeat: Millis::ZERO,
            floor_for: (0, Millis::ZERO),
            next_write: 0,
            leadership_writes_after: 0,
            timers: Deadlines::new(),
            metrics: Metrics::default(),
            snapshot: snapshot::SnapshotCache::default(),
            history: history::History::default(),
            wall_base: None,
            revocations: crate::token::Revocations::default(),
            logs: logs::Relays::default(),
            dying: kills::Dying::default(),
            restart_waits: restarts::Waits::default(),
            singleton_holds: Default::default(),
            deployment_wake: None,
            audits: Default::default(),
            tenants: tenants::Tenants::default(),
            usage: fairness::Usage::default(),
            preemptions: preempt::Preemptions::default(),
        }
    }

    /// Whether this master leads at a durable epoch (RECOVERING or ALIVE,
    /// suspended or not): the leadership whose deadlines (the sweep, the
    /// framework heartbeat, restart backoffs) run.
    pub fn leads(&self) -> bool {
        matches!(self.stage(), Some(Stage::Recovering | Stage::Alive))
    }

    /// Whether the recovery window is open: leading at a durable epoch and
    /// waiting for recovered workers to report (suspended or not).
    pub fn recovering(&self) -> bool {
        self.stage() == Some(&Stage::Recovering)
    }

    /// Where the master is in its lifecycle: its leadership as views show
    /// it.
    pub fn status(&self) -> Status {
        match &self.leadership {
            // Still loading is not leading yet, whatever its session does.
            Leadership::Standby
            | Leadership::Elected {
                stage: Stage::Loading { .. } | Stage::PersistingEpoch { .. },
                ..
            } => Status::Standby,
            Leadership::Elected { suspended: true, .. } => Status::Suspended,
            Leadership::Elected { stage: Stage::Recovering, .. } => Status::Recovering,
            Leadership::Elected { stage: Stage::Alive, .. } => Status::Alive,
        }
    }

    /// How far an elected master's leadership has come; `None` in standby.
    fn stage(&self) -> Option<&Stage> {
        match &self.leadership {
            Leadership::Standby => None,
            Leadership::Elected { stage, .. } => Some(stage),
        }
    }

    /// Whether this master is elected, at any stage, suspended or not: a
    /// repeated `Elected` changes nothing, a failed store load or write of
    /// this leadership ends it, and a leader named by the elector is not
    /// this master's business to adopt the epoch of.
    fn elected(&self) -> bool {
        self.leadership != Leadership::Standby
    }

    /// Whether this master is elected but its session is in doubt (the
    /// elector reported `Suspended`): requests are refused with
    /// `LeaderSuspended`, not `NotLeader`, since it may yet resume.
    fn suspended(&self) -> bool {
        matches!(self.leadership, Leadership::Elected { suspended: true, .. })
    }

    /// Whether this master may act as the leader: its epoch is durable and
    /// its session not in doubt (RECOVERING or ALIVE). Only then does it
    /// take registrations, subscriptions, reports, framework requests and
    /// operator commands, sweep silent workers, call itself the leader in
    /// `Hello` replies and hints, and announce itself.
    fn may_act(&self) -> bool {
        self.leads() && !self.suspended()
    }

    /// Whether a worker's heartbeat is taken: by a leader that may act, and
    /// by a suspended one too, so its workers do not think it gone while it
    /// may yet resume.
    fn accepts_heartbeats(&self) -> bool {
        self.may_act() || self.suspended()
    }

    /// Whether recovery is over (ALIVE, suspended or not): frameworks'
    /// failover clocks run from then on.
    fn recovered(&self) -> bool {
        self.stage() == Some(&Stage::Alive)
    }

    /// Whether executors may be placed and rollouts go on: recovery is over
    /// (executors the workers have not reported yet would look like empty
    /// slots) and the session is not in doubt (ALIVE).
    fn may_place(&self) -> bool {
        self.recovered() && !self.suspended()
    }

    /// The current (or last known) epoch.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The master's id.
    pub fn id(&self) -> &MasterId {
        &self.config.id
    }

    /// Counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The worker registry, ordered by id.
    pub fn workers(&self) -> Vec<&WorkerEntry> {
        self.workers.sorted()
    }

    /// The frameworks, ordered by id.
    pub fn frameworks(&self) -> impl Iterator<Item = &FrameworkEntry> {
        self.frameworks.values()
    }

    /// The executors this leader knows of, ordered by id (terminal ones stay
    /// until their framework is removed).
    pub fn executors(&self) -> impl Iterator<Item = &ExecutorEntry> {
        self.executors.iter()
    }

    /// The cluster as this master sees it, for operators.
    pub fn state(&self) -> ClusterState {
        let status = self.status();
        let mut attribute_budget = crate::limits::MAX_ATTRIBUTES_STATE_BYTES;
        let waiting = self.restart_waits.counts();
        let workers = self
            .workers
            .sorted()
            .into_iter()
            .map(|w| WorkerView {
                id: w.id.clone(),
                state: w.state,
                cores: w.cores,
                cores_used: w.cores_used,
                memory_mb: w.memory_mb,
                memory_used_mb: w.memory_used_mb,
                cordoned: w.maintenance.is_some(),
                drain: match w.maintenance {
                    Some(Maintenance::Draining { .. }) => Some(DrainState::Draining),
                    Some(Maintenance::Drained) => Some(DrainState::Drained),
                    Some(Maintenance::Cordoned) | None => None,
                },
                drain_deadline_ms: match w.maintenance {
                    Some(Maintenance::Draining { deadline_ms }) => Some(deadline_ms),
                    _ => None,
                },
                executors: u32::try_from(self.executors.live_on(&w.id)).unwrap_or(u32::MAX),
                attributes: {
                    let len: usize = w.attributes.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
                    if len <= attribute_budget {
                        attribute_budget -= len;
                        w.attributes.clone()
                    } else {
                        attribute_budget = 0;
                        Vec::new()
                    }
                },
                ports: w.ports,
                ports_used: w.ports_used,
                host: w.host.clone(),
                resources: self.resource_views(w),
                users: w.users.to_vec(),
                usage: w.usage.as_deref().map(|(u, at)| WorkerUsageView {
                    memory_bytes: u.executors.iter().filter_map(|e| e.usage.memory_bytes).sum(),
                    cpu_usec: u.executors.iter().filter_map(|e| e.usage.cpu_usec).sum(),
                    work_dir_free_bytes: u.work_dir_free_bytes,
                    work_dir_total_bytes: u.work_dir_total_bytes,
                    received_at: *at,
                }),
            })
            .collect();
        let usage: FxHashMap<&ExecutorId, &Usage> = self
            .workers
            .entries
            .values()
            .filter_map(|w| w.usage.as_deref())
            .flat_map(|(u, _)| u.executors.iter().map(|e| (&e.executor, &e.usage)))
            .collect();
        // Reasons for the first waiting groups only: each is a pass over
        // the workers, and the passes together stay within a budget in
        // proportion to the snapshot (MAX_STATE_REASON_GROUPS,
        // STATE_REASON_VISITS_FLOOR).
        let mut reason_groups = crate::limits::MAX_STATE_REASON_GROUPS;
        let per_group = self.workers.entries.len().max(1);
        let mut visits = crate::limits::STATE_REASON_VISITS_FLOOR
            .max(2 * (self.workers.entries.len() + self.frameworks.len()));
        let frameworks = self
            .frameworks
            .values()
            .map(|f| {
                let state = f.state();
                FrameworkView {
                    tenant: f.tenant.clone(),
                    id: f.id.clone(),
                    name: f.name.clone(),
                    state,
                    connected: f.conn.is_some(),
                    groups: f
                        .groups
                        .iter()
                        .enumerate()
                        .map(|(gi, g)| GroupView {
                            name: g.record.spec.group.clone(),
                            slots: g.count(),
                            declared: g.record.spec.slots,
                            running: u32::try_from(
                                g.current
                                    .iter()
                                    .flatten()
                                    .filter(|x| {
                                        self.executors
                                            .get(x)
                                            .is_some_and(|e| !e.state.is_terminal())
                                    })
                                    .count(),
                            )
                            .unwrap_or(u32::MAX),
                            waiting: waiting.get(&(&f.id, gi)).copied().unwrap_or(0),
                            last_end: g
                                .last_end
                                .as_ref()
                                .map(|(slot, end)| format!("slot {slot}: {end}")),
                            unplaced: self.unplaced_slots(f, gi),
                            reasons: Vec::new(),
                            deployment: self.deployment_view(&f.id, g),
                        })
                        .zip(&f.groups)
                        .map(|(mut view, g)| {
                            if view.unplaced > 0 && reason_groups > 0 && visits >= per_group {
                                reason_groups -= 1;
                                visits -= per_group;
                                view.reasons = self.waiting_reasons_quick(&f.id, g);
                            }
                            view
                        })
                        .collect(),
                }
            })
            .collect();
        let executors = self
            .executors
            .iter()
            .map(|e| ExecutorView {
                id: e.id.clone(),
                framework: e.framework.clone(),
                worker: Some(e.worker.clone()),
                state: e.state.clone(),
                ports: e.ports.clone(),
                resources: e.resources.clone(),
                usage: (!e.state.is_terminal()).then(|| usage.get(&e.id).map(|u| **u)).flatten(),
                preempted_by: self.preempted_by(e),
                // As reported: a view has no clock (`for_ms` at the report).
                health: (!e.state.is_terminal())
                    .then(|| e.health.as_ref().map(|h| h.report(h.at)))
                    .flatten(),
            })
            .collect();
        let (history, history_omitted) = self.history_view();
        ClusterState {
            master: self.config.id.clone(),
            status,
            epoch: self.epoch,
            leader: self.leader_hint(),
            workers,
            frameworks,
            executors,
            messages: self.metrics.messages,
            rejected: self.metrics.rejected,
            history,
            history_omitted,
        }
    }

    /// Handles one event at time `now`.
    #[must_use]
    pub fn handle(&mut self, now: Millis, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        // Anything but a `StateRequest`, a heartbeat or a log read may
        // change what a snapshot shows. Heartbeats move its counters only (messages
        // handled), which a cached snapshot may show late by up to its
        // maximum age: so a cluster of 100,000 heartbeating workers does not
        // make every `StateRequest` build anew. Usage samples are shown as
        // late, for the same reason (one per worker every 10 s).
        if !matches!(
            &event,
            Event::Message {
                msg: Message::StateRequest
                    | Message::WorkerHeartbeat { .. }
                    | Message::WorkerUsage { .. }
                    | Message::FrameworkHeartbeatAck { .. }
                    | Message::LogRequest { .. }
                    | Message::LogData { .. }
                    | Message::PlanRequest { .. },
                ..
            } | Event::LogQuery { .. }
        ) {
            self.snapshot.invalidate();
        }
        let may_roll = !matches!(
            &event,
            Event::Message {
                msg: Message::WorkerHeartbeat { .. }
                    | Message::WorkerUsage { .. }
                    | Message::FrameworkHeartbeatAck { .. }
                    | Message::StateRequest
                    | Message::PlanRequest { .. },
                ..
            }
        );
        let quiet = self.quiet_for_preemption(&event);
        let seen = quiet.then(|| self.preemption_fingerprint());
        self.dispatch(now, event, &mut out);
        if seen.is_none_or(|s| s != self.preemption_fingerprint()) {
            self.preemption_may_change();
        }
        // Preemption first: a rollout then counts the slots its victims
        // take down against its allowance (`--api-jobs --preemption`:
        // sim seed 1158 (docs/design.md#simulator-seeds)).
        self.preempt(now, &mut out);
        if may_roll {
            self.deploy(now, &mut out);
        }
        self.finish_framework_writes(&mut out);
        #[cfg(debug_assertions)]
        self.check_indexes();
        out
    }

    /// Debug builds: every index agrees with what it indexes, after every
    /// step (skipped for large states, where it would cost the state's size
    /// per step).
    #[cfg(debug_assertions)]
    fn check_indexes(&self) {
        if self.workers.entries.len() > 512 || self.executors.len() > 4_096 {
            return;
        }
        self.executors.check();
        let live = self.executors.iter().filter(|e| !e.state.is_terminal());
        self.usage.check(live.map(|e| (&e.framework, e.held())), |fid| {
            self.frameworks.get(fid).map(|_| self.framework_tenant(fid).to_owned())
        });
        assert_eq!(self.gauges(), Gauges::of_state(&self.state()), "the gauges from the counters");
        let live = |w: &WorkerId| self.executors.live_on(w);
        self.workers.check(self.config.placement, self.config.worker_timeout, live);
        let mut open = BTreeSet::new();
        for fw in self.frameworks.values() {
            for (gi, g) in fw.groups.iter().enumerate() {
                let placeable = g.placeable_slots() as usize;
                for (slot, outcome) in g.record.slots.iter().enumerate().take(placeable) {
                    let key = (fw.id.clone(), gi, slot as u32);
                    if *outcome == crate::store::SlotOutcome::Pending
                        && g.current[slot].is_none()
                        && !self.restart_waits.contains(&key)
                    {
                        open.insert(key);
                    }
                }
            }
        }
        assert_eq!(self.open_slots, open, "open slots");
    }

    fn dispatch(&mut self, now: Millis, event: Event, out: &mut Vec<Action>) {
        match event {
            Event::Connected { conn } => {
                self.conns_opened += 1;
                self.conns.insert(conn, Conn { opened: self.conns_opened, ..Conn::default() });
            }
            Event::Authenticated { conn, principal } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.principal = principal;
                }
            }
            Event::Disconnected { conn } => {
                self.log_conn_closed(conn, out);
                if let Some(c) = self.conns.remove(&conn) {
                    if let Some(w) = c.worker {
                        self.unbind_worker(&w, conn);
                    }
                    if let Some(f) = c.framework {
                        self.framework_disconnected(now, &f, conn);
                    }
                }
            }
            Event::Message { conn, msg } => {
                self.metrics.messages += 1;
                self.on_message(now, conn, msg, out);
            }
            Event::Tick => self.on_tick(now, out),
            Event::Elected { floor, clock } => self.on_elected(now, floor, clock, out),
            Event::Store(StoreEvent::Loaded { records }) => self.on_loaded(records, out),
            Event::Store(StoreEvent::LoadFailed { reason }) => {
                if self.elected() {
                    self.abdicate(format!("cannot load the recovery store: {reason}"), out);
                }
            }
            Event::Suspended => self.on_suspended(),
            Event::Resumed => self.on_resumed(now, out),
            Event::Revoked => self.step_down(out),
            Event::RemoveWorker { worker } => {
                let _ = self.remove_worker(&worker, None, out);
            }
            Event::Masters { addrs } => self.set_masters(addrs, out),
            Event::LogQuery { query, executor, stream, offset, max } => {
                let asker = Origin::Query(query);
                if self.may_act() {
                    self.log_request(now, asker, 0, executor, stream, offset, max, out)
                } else {
                    out.push(asker.reply(self.refusal_message()));
                }
            }
            Event::Command { query, msg, principal } => {
                self.on_command(now, query, msg, &principal, out)
            }
            Event::LeaderNamed { id, addr } => {
                self.advertise_leader(&addr);
                if self.leader.as_ref().is_some_and(|l| l.id != id) {
                    self.leader = None;
                }
            }
            Event::LeaderIs(hint) => {
                self.advertise_leader(&hint.addr);
                if hint.epoch > self.epoch && !self.elected() {
                    self.epoch = hint.epoch;
                }
                self.leader = Some(hint);
            }
            Event::Store(StoreEvent::Persisted { write }) => {
                if !self.on_epoch_persisted(now, write, out) && !self.on_persisted(now, write, out)
                {
                    for then in self.after_write.remove(&write).unwrap_or_default() {
                        self.after_write_done(now, then, out);
                    }
                }
            }
            Event::Store(StoreEvent::PersistFailed { write, reason }) => {
                // A write of an earlier leadership failing is old news.
                if self.elected() && write.0 > self.leadership_writes_after {
                    self.abdicate(format!("store write {} failed: {reason}", write.0), out);
                }
            }
        }
    }

    /// Answers `to` with `msg` once what it waited for is durable, with the
    /// audit record of the change it answers (if it answers one).
    fn answer_durable(&mut self, now: Millis, to: Origin, msg: Message, out: &mut Vec<Action>) {
        let audit = self.audit_answer(now, to, &msg);
        out.push(to.reply(msg));
        out.extend(audit);
    }

    /// Runs what waited for a write to be durable.
    fn after_write_done(&mut self, now: Millis, then: AfterWrite, out: &mut Vec<Action>) {
        match then {
            AfterWrite::Subscribed { framework, conn } => {
                self.on_subscription_durable(&framework, conn, out)
            }
            AfterWrite::Accept { conn, request } => self.answer_durable(
                now,
                conn.into(),
                Message::RequestAccepted { epoch: self.epoch, request },
                out,
            ),
            AfterWrite::AcceptTo { to, request } => self.answer_durable(
                now,
                to,
                Message::RequestAccepted { epoch: self.epoch, request },
                out,
            ),
            AfterWrite::Recorded { executor, state, ack } => {
                self.on_recorded(&executor, &state, ack.as_ref(), out)
            }
            AfterWrite::Ack { worker, executor } => self.ack_report(&worker, &executor, out),
            AfterWrite::GroupDurable { framework, group } => {
                if let Some(g) =
                    self.frameworks.get_mut(&framework).and_then(|f| f.group_mut(&group))
                {
                    g.write_durable();
                    self.refresh_slots_of(&framework);
                }
            }
            AfterWrite::Place => self.place(out),
            AfterWrite::KillDurable { executor } => self.owe_kill(&executor, out),
            AfterWrite::HistoryDurable { framework, seq, then } => {
                self.on_history_durable(now, framework, seq, then, out)
            }
            AfterWrite::DrainDurable { worker } => self.stop_draining_executors(now, &worker, out),
            AfterWrite::EndKills { kills } => {
                for (worker, executor) in kills {
                    self.kill_dying(&worker, &executor, out);
                }
            }
            AfterWrite::Scaled { framework, group, slots, surplus, named, stop } => {
                self.on_scaled(&framework, group, slots, surplus, named, stop, out)
            }
            AfterWrite::Rolling { framework, group } => {
                if let Some(g) =
                    self.frameworks.get_mut(&framework).and_then(|f| f.group_mut(&group))
                {
                    g.rolling = g.record.active_deployment().is_some();
                }
            }
            AfterWrite::JobAccepted { asker, answer } => {
                self.answer_durable(now, asker, answer.message(self.epoch), out)
            }
            AfterWrite::JobDurable { framework, write } => self.job_durable(&framework, write),
        }
    }

    fn self_hint(&self) -> LeaderHint {
        LeaderHint { id: self.config.id.clone(), addr: self.config.addr.clone(), epoch: self.epoch }
    }

    fn leader_hint(&self) -> Option<LeaderHint> {
        if self.may_act() {
            Some(self.self_hint())
        } else {
            self.leader.clone().filter(|l| l.id != self.config.id)
        }
    }

    fn known_masters(&self) -> Vec<Addr> {
        self.masters.iter().cloned().collect()
    }

    /// The leader is advertised too, within the same limits as
    /// [`Master::set_masters`] (peers ignore a list past them).
    fn advertise_leader(&mut self, addr: &Addr) {
        let room = self.masters.len() < crate::limits::MAX_ADVERTISED_MASTERS;
        if room && crate::limits::advertised_addr_problem(addr).is_none() {
            self.masters.insert(addr.clone());
        } else if !self.masters.contains(addr) {
            self.metrics.rejected += 1;
        }
    }

    /// The election's masters replace the advertised set; the leader's
    /// workers and subscribers hear of a change at once (`MasterChanged` at
    /// the current epoch: a hint, fenced like any other).
    ///
    /// The set it advertises stays within the limits its peers check
    /// (`limits::advertised_masters_problem`): an address that is empty or
    /// longer than `MAX_ADDR_BYTES` is left out, and past
    /// `MAX_ADVERTISED_MASTERS` (its own address first) the later
    /// candidates are; either counts in `Metrics::rejected`.
    fn set_masters(&mut self, addrs: Vec<Addr>, out: &mut Vec<Action>) {
        let mut masters: BTreeSet<Addr> = BTreeSet::from([self.config.addr.clone()]);
        let mut left_out = 0;
        for a in addrs {
            let full = masters.len() >= crate::limits::MAX_ADVERTISED_MASTERS;
            if crate::limits::advertised_addr_problem(&a).is_some()
                || (full && !masters.contains(&a))
            {
                left_out += 1;
            } else {
                masters.insert(a);
            }
        }
        if left_out > 0 {
            self.metrics.rejected += 1;
        }
        if masters == self.masters {
            return;
        }
        self.masters = masters;
        if self.may_act() {
            self.announce(&[Role::Worker, Role::Subscriber], out);
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The longest heartbeat interval this leader has told a worker (at
    /// least the configured one): a runtime's connection timeouts scale
    /// with it, so no worker heartbeating as told is taken for a dead
    /// connection.
    pub fn longest_heartbeat_interval(&self) -> Millis {
        self.config.heartbeat_interval.max(self.longest_heartbeat)
    }

    /// What a leader tells a peer that may not know it: `MasterChanged`
    /// (this leader, its epoch, the masters it knows); `None` unless it is
    /// acting.
    pub fn announcement(&self) -> Option<Message> {
        self.may_act().then(|| Message::MasterChanged {
            epoch: self.epoch,
            leader: self.self_hint(),
            masters: self.known_masters(),
        })
    }

    /// Sends `MasterChanged` (this leader, its epoch, the masters it knows)
    /// on every connection of the given roles, in connection order.
    pub(super) fn announce(&self, roles: &[Role], out: &mut Vec<Action>) {
        let Some(changed) = self.announcement() else { return };
        let mut peers: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.role.is_some_and(|r| roles.contains(&r)))
            .map(|(id, _)| *id)
            .collect();
        peers.sort();
        for conn in peers {
            out.push(Action::Send { conn, msg: changed.clone() });
        }
    }

    fn next_write(&mut self) -> WriteId {
        self.next_write += 1;
        WriteId(self.next_write)
    }

    /// The cluster as [`Master::state`] shows it, for the HTTP side, which
    /// may see it a moment late (`/api/state`, the event stream's poller):
    /// the snapshot cached for `StateReply`s while nothing but heartbeats,
    /// state requests and log reads happened since it was built and it is
    /// younger than [`crate::limits::STATE_SNAPSHOT_MAX_AGE`] (its message
    /// counters may lag that long); else a fresh one, kept for the next
    /// asker. Every HTTP asker together counts as one: after a change, a
    /// fresh one is built for them only once the last is
    /// [`crate::limits::HTTP_SNAPSHOT_GAP_PER_ENTRY_US`] per entry old (a
    /// change shows up to that late: under a millisecond on a small
    /// cluster, about half a second at 18,000 workers and 18,000
    /// executors), so dashboards polling a busy cluster spend at most about
    /// a tenth of the loop on its views — except a change of leadership
    /// (the status, the epoch or the leader named): that is shown at once,
    /// never a leadership this master no longer holds.
    pub fn cached_state(&mut self, now: Millis) -> std::sync::Arc<ClusterState> {
        let leadership_moved = self.snapshot.reply().is_some_and(|s| {
            s.status != self.status() || s.epoch != self.epoch || s.leader != self.leader_hint()
        });
        if !leadership_moved && !self.snapshot.http_may_build(now) {
            if let Some(state) = self.snapshot.reply() {
                self.metrics.state_replies_cached += 1;
                return state;
            }
        }
        let (state, fresh) = self.snapshot_for(now, None);
        if fresh {
            let entries = state.workers.len() + state.executors.len() + state.frameworks.len();
            self.snapshot.http_built(now, entries);
        }
        state
    }

    /// The snapshot for an asker at `now` that last got a freshly built one
    /// at `last_fresh` (`None`: never, or it does not count): the cached
    /// one, by the rule of [`snapshot`], or a fresh one, kept for the next
    /// asker; `true` when it is fresh.
    fn snapshot_for(
        &mut self,
        now: Millis,
        last_fresh: Option<Millis>,
    ) -> (std::sync::Arc<ClusterState>, bool) {
        if !self.snapshot.needs_build(now, last_fresh) {
            if let Some(state) = self.snapshot.reply() {
                self.metrics.state_replies_cached += 1;
                return (state, false);
            }
        }
        self.metrics.state_snapshots_built += 1;
        let state = self.state();
        self.snapshot.store(now, state);
        (self.snapshot.reply().expect("just stored"), true)
    }

    fn abdicate(&mut self, reason: String, out: &mut Vec<Action>) {
        out.push(Action::Abdicate { reason });
        self.step_down(out);
    }

    fn step_down(&mut self, out: &mut Vec<Action>) {
        if !self.elected() {
            return;
        }
        self.leadership = Leadership::Standby;
        // A standby has no deadlines.
        self.timers = Deadlines::new();
        self.workers = workers::Registry::default();
        self.longest_heartbeat = Millis::ZERO;
        self.frameworks.clear();
        self.executors.clear();
        self.usage.clear();
        self.preemptions = preempt::Preemptions::default();
        self.open_slots.clear();
        self.restart_waits = restarts::Waits::default();
        self.singleton_holds = Default::default();
        self.tenants = tenants::Tenants::default();
        // Local askers waiting for a write are answered now, as standby
        // (exactly one answer per query): whether it landed is for a new
        // leader to say, and a retry is safe.
        let waiting = AfterWrite::waiting_queries(self.after_write.values().flatten());
        self.after_write.clear();
        self.history = history::History::default();
        let queries = self.logs.clear();
        self.log_queries_end(queries, out);
        for query in waiting {
            out.push(Action::Answer { query, msg: self.refusal_message() });
        }
        self.dying.clear();
        let mut conns: Vec<ConnId> = self.conns.keys().copied().collect();
        conns.sort();
        for conn in conns {
            out.push(Action::Close { conn, reason: "leadership revoked".into() });
        }
        self.conns.clear();
    }
}

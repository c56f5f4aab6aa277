//! Every message that crosses the wire.
//!
//! A connection starts with [`Hello`] from the side that dialled and a
//! [`HelloReply`] from the master; after that either side sends any
//! [`Message`]. Every message a master sends carries its [`Epoch`]; receivers
//! ignore messages whose epoch is lower than the highest they have seen.
//!
//! The encoding is postcard (see [`crate::codec`]). Variants are only ever
//! appended: the golden frames in `fixtures/wire/` pin the encoding of every
//! existing variant, and changing one is a [`PROTOCOL_VERSION`] bump.

use crate::ids::{
    Addr, Epoch, ExecutorId, FrameworkId, Incarnation, InstanceId, MasterId, WorkerId,
};
use crate::launch::LaunchSpec;
use crate::policy::GroupPolicy;
use crate::states::{DrainState, FrameworkState, MasterStatus, ShownWorkerState, WorkerState};
use crate::time::Millis;
use serde::{Deserialize, Serialize};

pub mod api;
pub mod tenants;

/// The protocol version this build speaks. A `Hello` with another version is
/// refused with [`crate::codec::DecodeError::UnsupportedVersion`].
///
/// Version 2: the finished frameworks (`history`) of `ClusterState`, the
/// operator commands of issue 14 (docs/design.md#issue-14) (cordon, drain, scale, kill-executor) and
/// the worker and group fields they added to [`ClusterState`].
///
/// Version 3 (docs/design.md#issue-20, one executor per slot): `LaunchExecutor` carries
/// the leader's launch number and `RegisterWorker` the highest one the
/// worker processed (`launch_seen`), so a registration only writes off
/// what was launched before it was taken; `RegisterRefused`.
///
/// Version 4 (docs/design.md#issue-22, jobs): `GroupSpec` carries its
/// [`crate::policy::GroupPolicy`] and `RegisterWorker` the worker's
/// attributes.
///
/// Version 5 (docs/design.md#issue-22, restart policies): `GroupView` shows the slots
/// waiting out a restart backoff and the group's latest failure;
/// `WorkerView` the worker's attributes.
///
/// Version 6 (docs/design.md#issue-22, launch options and plans): `GroupSpec` and
/// `ExecutorSpec` carry a [`crate::launch::LaunchSpec`] (working directory,
/// kill grace, artifacts); `PlanRequest` / `PlanReply` (`regent job plan`).
///
/// Version 7 (docs/design.md#issue-22, ports): `LaunchSpec` names ports; `RegisterWorker`
/// carries the worker's port ranges and host; `ExecutorReport` and
/// `ExecutorInfo` the executor's numbered ports (and `ExecutorInfo` its
/// host); `WorkerView` the port counts. See [`crate::ports`].
///
/// Version 8 (docs/design.md#issue-22, rolling updates): `UpdateGroup`.
///
/// Version 9 (docs/design.md#issue-23, the sandbox): `WorkerUsage` (executors' memory
/// and CPU from their cgroups, the work directory's free space), shown in
/// `WorkerView::usage` and `ExecutorView::usage`.
///
/// Version 10 (docs/design.md#issue-23, named resources): `LaunchSpec` asks for amounts of
/// named resources; `RegisterWorker` carries the worker's offered
/// addresses; `ExecutorReport`, `ExecutorInfo` and `ExecutorView` the
/// addresses an executor was given; `WorkerView` each kind's offered and
/// used addresses. See [`crate::resources`]. `RegisterWorker` and
/// `WorkerView` also carry the users the worker starts executors as, so a
/// group naming a user is placed only where it may run.
///
/// Version 11 (docs/design.md#issue-41, the job layer's promises): `ExecutorReport`
/// carries how long the executor ran by its worker's clock (`ran_ms`).
///
/// Version 12 (docs/design.md#issue-42, typed states): `ClusterState`'s status,
/// `WorkerView`'s state and drain and `FrameworkView`'s state are the enums
/// of [`crate::states`] (an index on the wire) instead of names.
///
/// Version 13 (docs/design.md#issue-43, the HTTP API): jobs the leader owns
/// (`SubmitJob`, `JobAccepted`, `DeleteJob`), job status (`JobsRequest`,
/// `JobsReply`), and a scale that names the executors it removes
/// (`ScaleGroup`'s `remove` and `stop`); see [`crate::api`].
///
/// Version 14 (docs/design.md#issue-44, many teams on one cluster): `SlotStatus`,
/// `GroupPlan` and `GroupView` carry the ranked [`api::WaitReason`]s (and
/// `GroupView` its unplaced slots); `Subscribe` and
/// [`crate::api::JobSubmission`] name the framework's tenant; appended:
/// `RevokeToken`, `RetireKeys`, `SetTenant`, `TenantsRequest`, `TenantsReply`.
///
/// Version 15 (docs/design.md#issue-44, priorities): a group's
/// [`GroupPolicy::priority`].
///
/// Version 16 (docs/design.md#issue-45, singletons): a group's
/// [`crate::launch::LaunchSpec::disconnect`]; `GroupStatus::stop_after_ms`.
///
/// Version 17 (docs/design.md#issue-45, services): a group's health checks
/// ([`crate::launch::LaunchSpec::checks`]); an executor's health in
/// [`ExecutorReport::health`] and a slot's in `SlotStatus::health`.
///
/// Version 18 (docs/design.md#issue-45, deployments): a group's
/// [`GroupPolicy::update`]; `Message::PromoteDeployment`.
///
/// Version 19 (this round, one bump for every change of it):
/// docs/design.md#issue-45, manual checks: a framework's health report,
/// `Message::ReportHealth`, relayed to the executor's worker as
/// `Message::HealthOnWorker`; docs/design.md#issue-45, deployments and
/// health seen: [`api::DeploymentView`]'s digests, counts, canaries and
/// deadlines, [`GroupView::deployment`] and [`ExecutorView::health`];
/// docs/design.md#issue-44, "preempted by" across a failover:
/// [`FinishedSlot::preempted_by`] and `SlotStatus::preempted_by`.
pub const PROTOCOL_VERSION: u16 = 19;

/// What kind of node is speaking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    /// A master (leader or standby).
    Master,
    /// A worker offering cores and memory.
    Worker,
    /// A framework's subscriber.
    Subscriber,
    /// An operator tool (status, kill, remove-worker).
    Client,
}

/// The first frame on every connection, sent by the side that dialled.
///
/// `version` must stay the first field: the decoder reads it before the rest,
/// so a peer speaking another version gets a precise error, not "malformed".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The sender's [`PROTOCOL_VERSION`].
    pub version: u16,
    /// The cluster this peer belongs to; a peer of another cluster is refused.
    pub cluster: String,
    /// What the sender is.
    pub role: Role,
    /// The sender's node identity (worker id, master id, framework name...).
    pub node: String,
}

/// Where the leader is, as far as the sender knows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderHint {
    /// The leader's master id.
    pub id: MasterId,
    /// The address workers and subscribers dial.
    pub addr: Addr,
    /// The epoch the hint is about (at least the leader's election floor).
    pub epoch: Epoch,
}

/// The master's answer to [`Hello`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloReply {
    /// Always [`Role::Master`] today; kept so the format can grow.
    pub role: Role,
    /// The answering master's id.
    pub master: MasterId,
    /// `true` when the answering master is the acting leader: this reply then
    /// proves leadership at `epoch`.
    pub leading: bool,
    /// The answering master's epoch (its own when leading, else the highest it
    /// knows of).
    pub epoch: Epoch,
    /// The leader, as far as this master knows.
    pub leader: Option<LeaderHint>,
    /// Every master address this master knows of (discovery, seed 002 (docs/design.md#seed-002)).
    pub masters: Vec<Addr>,
}

/// What a worker knows about one executor it runs or ran.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorReport {
    /// The executor.
    pub id: ExecutorId,
    /// The framework it belongs to.
    pub framework: FrameworkId,
    /// Cores it holds.
    pub cores: u32,
    /// Memory it holds, in MiB.
    pub memory_mb: u64,
    /// Where it is in its life.
    pub state: ExecutorState,
    /// The ports its worker numbered for it, by name, in the group's order
    /// (empty until it is started, and for a group that names none).
    pub ports: Vec<(String, u16)>,
    /// The named resources' addresses its worker gave it, by name, in the
    /// group's order (empty until it is started, and for a group that asks
    /// for none; see [`crate::resources`]).
    pub resources: crate::resources::Assigned,
    /// How long it has run (from RUNNING), by its worker's clock: until
    /// the report for a live executor, until its end for an ended one;
    /// `None` if it never ran or its worker does not know (re-adopted by a
    /// new worker process, counted from then). A leader judges a run
    /// healthy by it (`healthy_after`), so a failover forgets no run.
    pub ran_ms: Option<u64>,
    /// What its health checks say, by its worker (docs/design.md#issue-45):
    /// `None` for a group without checks and an executor not running.
    /// Rides in `ExecutorStatus` (sent when the status changes) and in
    /// `RegisterWorker`, so a new leader has it at re-registration.
    pub health: Option<HealthReport>,
}

/// An executor's health as its worker's checks see it
/// ([`ExecutorReport::health`]; docs/jobs.md#health-checks-groupcheck); in
/// `/v1/` a slot's `health`, with `for_ms` as of the answer.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReport {
    /// Passing, failing or pending.
    pub status: HealthStatus,
    /// How long the status has held, by the worker's clock (a duration,
    /// like `ran_ms`, so it survives a failover of the leader).
    pub for_ms: u64,
    /// The first failing check's name and what it saw (`http: GET /health
    /// answered 500`), at most [`MAX_HEALTH_DETAIL`] bytes; checked on
    /// receipt.
    pub detail: String,
}

/// The longest [`HealthReport::detail`], in bytes.
pub const MAX_HEALTH_DETAIL: usize = crate::launch::check::MAX_CHECK_DETAIL_BYTES;

/// What an executor's health checks add up to.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    /// No result yet for some check (or a manual check held while its
    /// worker hears no leader), none failing.
    Pending,
    /// Every check's last result passed.
    Passing,
    /// Some check's last result failed.
    Failing,
}

impl HealthStatus {
    /// `pending`, `passing` or `failing`.
    pub fn name(self) -> &'static str {
        match self {
            HealthStatus::Pending => "pending",
            HealthStatus::Passing => "passing",
            HealthStatus::Failing => "failing",
        }
    }
}

/// The life of an executor process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExecutorState {
    /// Asked to start, not yet confirmed running.
    Launching,
    /// The process runs.
    Running,
    /// The process exited by itself with this code.
    Exited {
        /// Exit status (a signal number is reported as `128 + signal`).
        code: i32,
    },
    /// The process could not be started or died abnormally.
    Failed {
        /// What went wrong.
        reason: String,
    },
    /// Killed on request.
    Killed,
    /// Its worker was lost; the executor's fate is unknown.
    Lost,
}

impl ExecutorState {
    /// Every state's name, in [`ExecutorState::kind`] order.
    pub const NAMES: [&'static str; 6] =
        ["LAUNCHING", "RUNNING", "EXITED", "FAILED", "KILLED", "LOST"];

    /// The state's name, the one table every view uses (the HTTP API and
    /// cluster events, finished frameworks, `regent submit`'s lines):
    /// `LAUNCHING`, `RUNNING`, `EXITED`, `FAILED`, `KILLED` or `LOST`.
    pub fn name(&self) -> &'static str {
        Self::NAMES[self.kind()]
    }

    /// The state's place in [`ExecutorState::NAMES`] (its kind, without
    /// the exit code or reason).
    pub fn kind(&self) -> usize {
        match self {
            ExecutorState::Launching => 0,
            ExecutorState::Running => 1,
            ExecutorState::Exited { .. } => 2,
            ExecutorState::Failed { .. } => 3,
            ExecutorState::Killed => 4,
            ExecutorState::Lost => 5,
        }
    }
}

impl ExecutorState {
    /// `true` for states an executor never leaves.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, ExecutorState::Launching | ExecutorState::Running)
    }
}

/// A worker's registration, and also its full state report after a failover
/// (resources and every executor in one message).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterWorker {
    /// The worker's stable id.
    pub worker: WorkerId,
    /// This process's incarnation.
    pub incarnation: Incarnation,
    /// Cores offered.
    pub cores: u32,
    /// Memory offered, in MiB.
    pub memory_mb: u64,
    /// Executors running, and terminal ones the master has not acknowledged.
    pub executors: Vec<ExecutorReport>,
    /// The highest epoch the worker has seen.
    pub epoch_seen: Epoch,
    /// The highest [`Message::LaunchExecutor::launch`] number the worker
    /// processed (started, or answered as not taken) from the leader of
    /// `epoch_seen`; 0 if none. The leader writes off, as never started,
    /// only executors it launched at or before this number (or on another
    /// connection): a launch sent after this report was taken is still on
    /// its way, not lost (docs/design.md#one-executor-per-slot).
    pub launch_seen: u64,
    /// The worker's attributes (`rack=r1`, `disk=ssd`), names unique, in
    /// name order: what group constraints and `spread` name (see
    /// [`crate::policy`]).
    pub attributes: Vec<(String, String)>,
    /// The port ranges it numbers executors' ports from, sorted, not
    /// overlapping ([`crate::ports::ranges_problem`]); empty: none offered.
    pub ports: Vec<crate::ports::PortRange>,
    /// The host name or address its executors' ports are reached at (what
    /// subscribers are told, [`ExecutorInfo::host`]); `None`: not said.
    pub host: Option<String>,
    /// The named resources it offers, each kind's addresses in the order
    /// they are handed out ([`crate::resources::offers_problem`]); empty:
    /// none.
    pub resources: Vec<crate::resources::Resource>,
    /// The users it starts executors as: its executor user (or its own),
    /// then, when it runs as root, its `--allowed-users`. A group naming a
    /// user ([`crate::launch::LaunchSpec::user`]) is placed only on a worker
    /// listing it. Empty: not said (no group naming a user is placed there).
    pub users: Vec<String>,
}

/// A framework's SUBSCRIBE (Mesos semantics, seed 001 (docs/design.md#seed-001)): the master always
/// accepts it and closes any older connection of the same framework after
/// sending it [`Message::FrameworkError`]. A subscriber closes its own old
/// connection before it sends a new SUBSCRIBE.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscribe {
    /// The framework id, once a `Subscribed` assigned it (or chosen by the
    /// submitter); `None` on a framework's very first subscription.
    pub framework: Option<FrameworkId>,
    /// The framework's human-readable name.
    pub name: String,
    /// This subscriber process (fresh per process start): a SUBSCRIBE from
    /// another instance of the same framework is a failover to that instance.
    pub instance: InstanceId,
    /// Grows with every SUBSCRIBE this instance sends (from 1), so a master
    /// (and a log reader) can tell attempts apart.
    pub attempt: u64,
    /// How long the master keeps the framework's executors after its
    /// subscriber disconnected, waiting for it to resubscribe.
    pub failover_timeout: Millis,
    /// The tenant a new framework belongs to (docs/tenants.md): `None`,
    /// its credential's tenant, else `default`. A credential with a tenant
    /// overrides it; a framework's tenant never changes, so a SUBSCRIBE of
    /// an existing framework naming another tenant is refused naming both.
    pub tenant: Option<String>,
}

/// A declarative executor group: "group `group` = `slots` slots of
/// (`command`, `env`, `cores`, `memory_mb`)". Declaring the same group again
/// is idempotent: the master adopts executors already running for its slots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSpec {
    /// The group's name, unique within the framework.
    pub group: String,
    /// How many executors (slots `0..slots`) the group wants running.
    pub slots: u32,
    /// Program and arguments of every executor of the group.
    pub command: Vec<String>,
    /// Environment variables of every executor, in order.
    pub env: Vec<(String, String)>,
    /// Cores each executor holds.
    pub cores: u32,
    /// Memory each executor holds, in MiB.
    pub memory_mb: u64,
    /// Where its executors may run and what happens when one ends.
    pub policy: GroupPolicy,
    /// What the worker does around each executor's process (working
    /// directory, kill grace, artifacts); boxed, as most groups have the
    /// default (postcard writes a box as what it holds).
    pub launch: Box<LaunchSpec>,
}

impl GroupSpec {
    /// What one executor of this group runs, as the master sends it.
    pub fn executor(&self) -> ExecutorSpec {
        ExecutorSpec {
            command: self.command.clone(),
            env: self.env.clone(),
            cores: self.cores,
            memory_mb: self.memory_mb,
            launch: self.launch.clone(),
        }
    }
}

/// What differs between two declarations of one group, in words, key by
/// key as a job file names them (`count 2 -> 4`, `command`, `env`,
/// `restart`...): what a refusal of a changed group names. Empty when they
/// are equal.
pub fn spec_changes(old: &GroupSpec, new: &GroupSpec) -> Vec<String> {
    let mut changes = Vec::new();
    if old.slots != new.slots {
        changes.push(format!("count {} -> {}", old.slots, new.slots));
    }
    if old.command != new.command {
        changes.push(format!("command {:?} -> {:?}", old.command, new.command));
    }
    if old.env != new.env {
        let names = |env: &[(String, String)]| -> Vec<String> {
            env.iter().map(|(k, _)| k.clone()).collect()
        };
        let changed: Vec<String> = names(&old.env)
            .into_iter()
            .chain(names(&new.env))
            .filter(|k| {
                old.env.iter().find(|(o, _)| o == k) != new.env.iter().find(|(n, _)| n == k)
            })
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        // Values are not shown: an environment may hold credentials.
        changes.push(format!("env ({})", changed.join(", ")));
    }
    if old.cores != new.cores {
        changes.push(format!("cores {} -> {}", old.cores, new.cores));
    }
    if old.memory_mb != new.memory_mb {
        changes.push(format!("memory_mb {} -> {}", old.memory_mb, new.memory_mb));
    }
    let (o, n) = (&old.policy, &new.policy);
    if o.restart != n.restart {
        changes.push("restart".into());
    }
    if o.placement != n.placement {
        let name = |p: Option<crate::policy::Placement>| {
            p.map_or("the master's", crate::policy::Placement::name)
        };
        changes.push(format!("placement {} -> {}", name(o.placement), name(n.placement)));
    }
    if o.constraints != n.constraints {
        let list = |c: &[crate::policy::Constraint]| -> String {
            c.iter().map(crate::policy::Constraint::to_string).collect::<Vec<_>>().join(", ")
        };
        changes.push(format!(
            "constraints [{}] -> [{}]",
            list(&o.constraints),
            list(&n.constraints)
        ));
    }
    if o.spread != n.spread {
        changes.push(format!(
            "spread {} -> {}",
            o.spread.as_deref().unwrap_or("none"),
            n.spread.as_deref().unwrap_or("none")
        ));
    }
    if o.priority != n.priority {
        changes.push(format!("priority {} -> {}", o.priority, n.priority));
    }
    if o.update != n.update {
        changes.push("update".into());
    }
    let (o, n) = (&old.launch, &new.launch);
    if o.cwd != n.cwd {
        changes.push(format!(
            "cwd {} -> {}",
            o.cwd.as_deref().unwrap_or("none"),
            n.cwd.as_deref().unwrap_or("none")
        ));
    }
    if o.kill_grace_ms != n.kill_grace_ms {
        let ms = |g: Option<u64>| g.map_or("the worker's".to_string(), |g| format!("{g} ms"));
        changes.push(format!("kill_grace {} -> {}", ms(o.kill_grace_ms), ms(n.kill_grace_ms)));
    }
    if o.artifacts != n.artifacts {
        changes.push("artifacts".into());
    }
    if o.ports != n.ports {
        changes.push(format!("ports [{}] -> [{}]", o.ports.join(", "), n.ports.join(", ")));
    }
    if o.user != n.user {
        let who = |u: &Option<String>| u.clone().unwrap_or_else(|| "the worker's".into());
        changes.push(format!("user {} -> {}", who(&o.user), who(&n.user)));
    }
    if o.resources != n.resources {
        let list = |r: &[(String, u32)]| match crate::resources::describe_amounts(r) {
            d if d.is_empty() => "none".to_string(),
            d => d,
        };
        changes.push(format!("resources {} -> {}", list(&o.resources), list(&n.resources)));
    }
    if o.logs != n.logs {
        changes.push("logs".into());
    }
    if o.disconnect != n.disconnect {
        let d =
            |d: Option<crate::launch::Disconnect>| d.map_or("none".to_string(), |d| d.to_string());
        changes.push(format!("disconnect {} -> {}", d(o.disconnect), d(n.disconnect)));
    }
    if o.checks != n.checks {
        let names = |c: &[crate::launch::CheckSpec]| match c {
            [] => "none".to_string(),
            c => c.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(","),
        };
        changes.push(format!("checks {} -> {}", names(&o.checks), names(&n.checks)));
    }
    changes
}

/// What one executor runs and with what resources: the master fills it from
/// the executor's [`GroupSpec`] and sends it in [`Message::LaunchExecutor`],
/// the worker machine hands it to its runtime in
/// [`crate::worker::ExecutorCommand::Start`], and the
/// supervisor starts it. The executor's id, its framework and the launch
/// number travel beside it, not in it.
///
/// Postcard writes a struct's fields in order with no framing, so a message
/// holding an `ExecutorSpec` encodes as if it held these fields itself
/// (`fixtures/wire/launch_executor.bin` is the frame of the four fields
/// written out). Adding a field changes that frame: a [`PROTOCOL_VERSION`]
/// bump.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorSpec {
    /// Program and arguments; the worker looks the program up in `PATH`.
    pub command: Vec<String>,
    /// Environment variables, in order, on top of the worker's own (and
    /// overridden by the `REGENT_*` variables the worker sets).
    pub env: Vec<(String, String)>,
    /// Cores it holds (accounted, not enforced).
    pub cores: u32,
    /// Memory it holds, in MiB (accounted, not enforced).
    pub memory_mb: u64,
    /// What the worker does around the process (working directory, kill
    /// grace, artifacts fetched before it starts); boxed like
    /// [`GroupSpec::launch`].
    pub launch: Box<LaunchSpec>,
}

/// What a master tells a subscriber about one executor of its framework.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorInfo {
    /// The executor.
    pub id: ExecutorId,
    /// The group it belongs to.
    pub group: String,
    /// Its slot within the group.
    pub slot: u32,
    /// The worker it was placed on, if placed.
    pub worker: Option<WorkerId>,
    /// Where it is in its life.
    pub state: ExecutorState,
    /// The host its worker said its ports are reached at, if it said.
    pub host: Option<String>,
    /// Its ports, by name, as its worker numbered them (empty until its
    /// worker reports it started, and for a group that names none).
    pub ports: Vec<(String, u16)>,
    /// The named resources' addresses its worker gave it (empty until its
    /// worker reports it started, and for a group that asks for none).
    pub resources: crate::resources::Assigned,
}

/// Every message of the protocol. Append new variants at the end only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// First frame on a connection (must stay variant 0).
    Hello(Hello),
    /// The master's answer to `Hello`.
    HelloReply(HelloReply),
    /// Worker → master: register, or report full state after a failover.
    RegisterWorker(RegisterWorker),
    /// Worker → master: liveness. The connection identifies the worker.
    WorkerHeartbeat {
        /// The sending process's incarnation.
        incarnation: Incarnation,
    },
    /// Master → worker: the registration is durable.
    Registered {
        /// The leader's epoch.
        epoch: Epoch,
        /// How often the worker must heartbeat.
        heartbeat_interval: Millis,
        /// `true` when this repeats an earlier acknowledgement of the same
        /// incarnation (harmless, never a reason to exit).
        duplicate: bool,
        /// Every master address the leader knows of.
        masters: Vec<Addr>,
    },
    /// Master → worker: this master is not the leader.
    NotLeader {
        /// The highest epoch this master knows of.
        epoch: Epoch,
        /// Where the leader is, if known.
        leader: Option<LeaderHint>,
    },
    /// Master → worker: heartbeat received.
    HeartbeatAck {
        /// The leader's epoch.
        epoch: Epoch,
    },
    /// Master → worker: you are not (or no longer) in my registry; register again.
    ReconnectWorker {
        /// The leader's epoch.
        epoch: Epoch,
    },
    /// Master → worker: this process must stop (another incarnation owns its id).
    Shutdown {
        /// The leader's epoch.
        epoch: Epoch,
        /// Why, naming the conflict.
        reason: String,
    },
    /// Master → worker/subscriber: a new leader at `epoch`; follow it and
    /// report your full state.
    MasterChanged {
        /// The new leader's epoch.
        epoch: Epoch,
        /// The new leader.
        leader: LeaderHint,
        /// Every master address the new leader knows of.
        masters: Vec<Addr>,
    },
    /// Master → anyone: the leader's coordination session is in doubt; retry.
    LeaderSuspended {
        /// The suspended leader's epoch.
        epoch: Epoch,
    },
    /// Subscriber → master: subscribe the framework (first frame after `Hello`).
    Subscribe(Subscribe),
    /// Subscriber → master: declare (or re-declare, idempotently) an executor
    /// group. Answered by `RequestAccepted` or `RequestRefused`.
    DeclareGroup {
        /// The subscriber's request id (increasing per subscriber process).
        request: u64,
        /// The group wanted.
        spec: GroupSpec,
    },
    /// Subscriber → master: kill one executor of the framework.
    KillExecutor {
        /// The subscriber's request id.
        request: u64,
        /// The executor to kill.
        executor: ExecutorId,
    },
    /// Subscriber → master: remove the framework and kill all its executors.
    Teardown {
        /// The subscriber's request id.
        request: u64,
    },
    /// Master → subscriber: the subscription is durable and live.
    Subscribed {
        /// The leader's epoch.
        epoch: Epoch,
        /// The framework's id (assigned now on a first subscription).
        framework: FrameworkId,
        /// How often the master sends `FrameworkHeartbeat`.
        heartbeat_interval: Millis,
        /// Snapshot of the framework's executors: the live ones, and each
        /// finished slot's outcome (ended attempts whose slot moved on are
        /// left out).
        executors: Vec<ExecutorInfo>,
    },
    /// Master → subscriber: liveness of the subscription's connection.
    FrameworkHeartbeat {
        /// The leader's epoch.
        epoch: Epoch,
    },
    /// Master → subscriber: Mesos' ERROR event; the master closes the
    /// connection after it.
    FrameworkError {
        /// The leader's epoch.
        epoch: Epoch,
        /// What went wrong.
        message: String,
        /// Set when the framework failed over to another subscriber instance:
        /// the receiving instance must stop for good.
        failed_over_to: Option<InstanceId>,
    },
    /// Master → subscriber: the request is durable and in effect.
    RequestAccepted {
        /// The leader's epoch.
        epoch: Epoch,
        /// The subscriber's request id.
        request: u64,
    },
    /// Master → subscriber: the request was refused.
    RequestRefused {
        /// The leader's epoch.
        epoch: Epoch,
        /// The subscriber's request id.
        request: u64,
        /// Why.
        reason: String,
    },
    /// Master → subscriber: an executor of the framework changed.
    ExecutorUpdate {
        /// The leader's epoch.
        epoch: Epoch,
        /// The executor as it is now.
        info: ExecutorInfo,
    },
    /// Master → subscriber: a slot of a group cannot be filled (no worker
    /// fits, or its executors keep failing).
    SlotFailed {
        /// The leader's epoch.
        epoch: Epoch,
        /// The group.
        group: String,
        /// The slot.
        slot: u32,
        /// Why.
        reason: String,
    },
    /// Master → worker: start an executor process.
    LaunchExecutor {
        /// The leader's epoch.
        epoch: Epoch,
        /// The executor to start.
        executor: ExecutorId,
        /// The framework it belongs to.
        framework: FrameworkId,
        /// What to run and with what resources.
        spec: ExecutorSpec,
        /// The leader's launch number: strictly increasing within its
        /// leadership. The worker echoes the highest it processed in
        /// [`RegisterWorker::launch_seen`]. A launch the worker does not
        /// take (not registered with the sender, or the sender is not the
        /// master it follows) is answered with an `ExecutorStatus` of
        /// `Killed`, never dropped; only a stale epoch is ignored, and a
        /// repeat of a launch of an executor the worker knows (whose state
        /// it reports anyway).
        launch: u64,
    },
    /// Master → worker: kill an executor process.
    KillExecutorOnWorker {
        /// The leader's epoch.
        epoch: Epoch,
        /// The executor to kill.
        executor: ExecutorId,
    },
    /// Worker → master: an executor's state changed. A terminal state is
    /// repeated (also in `RegisterWorker`) until `ExecutorStatusAck`.
    ExecutorStatus {
        /// The sending process's incarnation.
        incarnation: Incarnation,
        /// The executor's state.
        report: ExecutorReport,
    },
    /// Master → worker: the executor's terminal state is recorded; forget it.
    ExecutorStatusAck {
        /// The leader's epoch.
        epoch: Epoch,
        /// The executor.
        executor: ExecutorId,
    },
    /// Operator → any master: describe the cluster as you see it.
    StateRequest,
    /// Master → operator: the answer to `StateRequest`.
    StateReply(Box<ClusterState>),
    /// Operator → leader: forget a worker left UNKNOWN (or DEAD).
    RemoveWorker {
        /// Echoed in the answer.
        request: u64,
        /// The worker.
        worker: WorkerId,
    },
    /// Operator → leader: tear a framework down (kill its executors).
    KillFramework {
        /// Echoed in the answer.
        request: u64,
        /// The framework.
        framework: FrameworkId,
    },
    /// Subscriber → master: answers `FrameworkHeartbeat`, so a live
    /// subscription is never closed as idle (subscribers send nothing else
    /// while all is well).
    FrameworkHeartbeatAck {
        /// The epoch of the heartbeat answered.
        epoch: Epoch,
    },
    /// Operator → leader: give leadership up on purpose (an operator's
    /// handoff). In ZooKeeper mode the leader answers `RequestAccepted`,
    /// closes its coordination session (so a standby leads at once), returns
    /// to standby and joins the election again as a new candidate. In the
    /// single-master modes it is refused: there is nobody to hand over to.
    StepDown {
        /// Echoed in the answer.
        request: u64,
    },
    /// Leader → subscriber: the SUBSCRIBE breaks one of the cluster's limits
    /// (a name or failover timeout over its limit, or a new framework past
    /// the cluster's framework limit); the master closes the connection
    /// after it. Retrying the same SUBSCRIBE cannot succeed, so the
    /// subscriber stops with `reason` instead of retrying.
    SubscribeRefused {
        /// The leader's epoch.
        epoch: Epoch,
        /// Which limit, with the offending value and the limit.
        reason: String,
    },
    /// Worker → master, after `Hello`: where the worker's callback listener
    /// takes connections from masters (docs/design.md#seed-002). It becomes part of the
    /// worker's durable record, so a new leader — even one at an address
    /// the worker never knew — dials it when it recovers and tells the
    /// worker with `MasterChanged` (a hint: the worker follows only a master
    /// whose own `HelloReply` proves the epoch).
    Callback {
        /// The address masters should dial.
        addr: Addr,
    },
    /// Operator → leader: read a chunk of an executor's output (`regent
    /// logs`, `GET /api/logs/...`). The leader relays it to the executor's
    /// worker ([`Message::ReadLog`]) and answers [`Message::LogChunk`], or
    /// `RequestRefused` naming why (an unknown executor, its worker not
    /// connected, no such file, a limit of [`crate::limits`] passed, the
    /// worker gone or silent). A standby answers `NotLeader`.
    LogRequest {
        /// Echoed in the answer.
        request: u64,
        /// The executor.
        executor: ExecutorId,
        /// Which of its output files.
        stream: LogStream,
        /// Where to start reading; `None`: the last `max` bytes (a tail).
        offset: Option<u64>,
        /// The most bytes wanted (at most [`crate::limits::MAX_LOG_CHUNK`]).
        max: u32,
    },
    /// Leader → worker: read a chunk of an executor's output file and
    /// answer [`Message::LogData`] with `relay`.
    ReadLog {
        /// The leader's epoch.
        epoch: Epoch,
        /// The leader's number for this read, echoed back.
        relay: u64,
        /// The executor.
        executor: ExecutorId,
        /// Which of its output files.
        stream: LogStream,
        /// Where to start; `None`: the last `max` bytes.
        offset: Option<u64>,
        /// The most bytes wanted.
        max: u32,
    },
    /// Worker → leader: the answer to [`Message::ReadLog`].
    LogData {
        /// The leader's number for the read.
        relay: u64,
        /// The worker still runs the executor (its process has not ended),
        /// as the worker knew when it read.
        live: bool,
        /// What was read, or why nothing could be.
        read: LogRead,
    },
    /// Leader → operator: the answer to [`Message::LogRequest`].
    LogChunk {
        /// The leader's epoch.
        epoch: Epoch,
        /// The operator's request id.
        request: u64,
        /// Where `data` starts in the file.
        offset: u64,
        /// The bytes read (at most the `max` asked for).
        data: Vec<u8>,
        /// The file's size when it was read.
        size: u64,
        /// The executor has ended: the file grows no more, so once
        /// `offset + data.len() == size` everything has been read.
        finished: bool,
    },
    /// Operator → leader: place nothing more on `worker` (what runs on it
    /// keeps running). Durable (in the worker's record) before
    /// `RequestAccepted`; a cordoned worker that registers again stays
    /// cordoned.
    CordonWorker {
        /// Echoed in the answer.
        request: u64,
        /// The worker.
        worker: WorkerId,
    },
    /// Operator → leader: clear a cordon or drain of `worker`, so executors
    /// are placed on it again (a drain under way stops: what it already
    /// asked to stop is not started again).
    UncordonWorker {
        /// Echoed in the answer.
        request: u64,
        /// The worker.
        worker: WorkerId,
    },
    /// Operator → leader: drain `worker`: cordon it, ask every executor on
    /// it to stop (SIGTERM, SIGKILL once `deadline` has passed), place their
    /// slots elsewhere without charging any retry budget, and mark the
    /// worker DRAINED once nothing runs on it. `RequestAccepted` follows the
    /// durable record (which keeps the deadline as wall-clock time, so a new
    /// leader honours it).
    DrainWorker {
        /// Echoed in the answer.
        request: u64,
        /// The worker.
        worker: WorkerId,
        /// How long the executors get between SIGTERM and SIGKILL (at most
        /// [`crate::limits::MAX_DRAIN_DEADLINE`]).
        deadline: Millis,
    },
    /// Operator → leader: give a running group `slots` slots (up or down,
    /// at least 1, at most [`crate::limits::MAX_SLOTS_PER_GROUP`]). Surplus
    /// executors (the highest slots) are killed and their slots dropped;
    /// new slots are placed. Durable in the framework's record before
    /// `RequestAccepted`.
    ScaleGroup {
        /// Echoed in the answer.
        request: u64,
        /// The framework.
        framework: FrameworkId,
        /// The group.
        group: String,
        /// The slot count wanted.
        slots: u32,
        /// The executors the scale removes (docs/design.md#issue-43): with
        /// `slots` lower than the count, these go instead of the highest
        /// slots, and the rest keep running; with the count kept, their
        /// slots are refilled. Each must be a live executor of the group;
        /// at most as many as the count is lowered by, unless refilled.
        remove: Vec<ExecutorId>,
        /// How the removed executors stop: `None` kills them (SIGKILL
        /// after the group's kill grace, as a framework's kill).
        stop: Option<crate::api::Stop>,
    },
    /// Operator → leader: kill one executor. With `refill` its slot gets a
    /// replacement (an operator's kill is not a failure: no retry budget is
    /// charged); without, the slot is recorded as killed and left empty.
    OperatorKillExecutor {
        /// Echoed in the answer.
        request: u64,
        /// The executor.
        executor: ExecutorId,
        /// Place a replacement in its slot.
        refill: bool,
    },
    /// Master → worker: stop an executor: `signal` to its process group
    /// now, SIGKILL if it still runs after `grace` (a drain's deadline, a
    /// rollout's kill grace, a named scale's `Stop`). Its terminal state is
    /// then `Killed`.
    StopExecutorOnWorker {
        /// The leader's epoch.
        epoch: Epoch,
        /// The executor to stop.
        executor: ExecutorId,
        /// How long it may take to exit after `signal`.
        grace: Millis,
        /// The signal sent first (SIGTERM for drains and rollouts).
        signal: crate::api::StopSignal,
    },
    /// Master → subscriber: an operator scaled `group` to `slots` slots
    /// (also repeated after `Subscribed` while the count differs from the
    /// declared one). Slots from `slots` on no longer exist.
    GroupScaled {
        /// The leader's epoch.
        epoch: Epoch,
        /// The group.
        group: String,
        /// Its slot count now.
        slots: u32,
    },
    /// Master → worker: this registration is refused (the cluster has
    /// `max_workers` workers, the worker id's store shard is full, or the
    /// connection already carries another worker or a framework). The
    /// worker logs `reason` and keeps retrying, slowly; nothing was
    /// recorded.
    RegisterRefused {
        /// The leader's epoch.
        epoch: Epoch,
        /// Why, naming the limit or the conflict.
        reason: String,
    },
    /// Operator → leader: where these groups' slots would be placed now
    /// (`regent job plan`); nothing is declared, placed or written.
    /// Answered with `PlanReply`, or refused like any request that needs
    /// an acting leader.
    PlanRequest {
        /// Echoed in the answer.
        request: u64,
        /// The groups, as a subscriber would declare them.
        groups: Vec<GroupSpec>,
        /// The tenant the job names (`tenant = "team-a"` in a job file),
        /// if any: a token's tenant wins, else this, else `default`. The
        /// plan's preemption victims depend on it (docs/tenants.md).
        tenant: Option<String>,
    },
    /// Leader → operator: the answer to `PlanRequest`, one entry per group
    /// in the request's order.
    PlanReply {
        /// The leader's epoch.
        epoch: Epoch,
        /// The request's number.
        request: u64,
        /// Where each group's slots would go.
        groups: Vec<GroupPlan>,
    },
    /// Subscriber → master: replace a declared group's spec (`regent run
    /// --update`) and its live executors slot by slot, at most
    /// `max_parallel` slots down at once (a group not declared yet is
    /// declared). Answered by `RequestAccepted` once the new spec is
    /// durable, or `RequestRefused`.
    UpdateGroup {
        /// The subscriber's request id.
        request: u64,
        /// The group as it should now be.
        spec: GroupSpec,
        /// The most slots replaced at once (at least 1).
        max_parallel: u32,
    },
    /// Worker → master: what its executors use and what its work directory
    /// has left, sampled by its runtime, sent with a heartbeat at most
    /// once per [`crate::worker::USAGE_INTERVAL`]. Observational: shown,
    /// never acted on.
    WorkerUsage {
        /// The sending process's incarnation.
        incarnation: Incarnation,
        /// The sample.
        usage: WorkerUsage,
    },
    /// Client → leader: create or update a job the leader owns
    /// (`POST /v1/jobs`; docs/design.md#issue-43, [`crate::api`]).
    /// Answered by `JobAccepted` once durable, or `RequestRefused` naming
    /// why (an invalid group, a version that does not match, a group the
    /// job no longer names).
    SubmitJob {
        /// Echoed in the answer.
        request: u64,
        /// The job.
        job: crate::api::JobSubmission,
    },
    /// Leader → client: a `SubmitJob` is durable.
    JobAccepted {
        /// The leader's epoch.
        epoch: Epoch,
        /// The request's number.
        request: u64,
        /// The job.
        job: FrameworkId,
        /// Its version now.
        version: u64,
        /// What the submission did.
        change: crate::api::JobChange,
    },
    /// Client → leader: tear a job down (`DELETE /v1/jobs/{id}`): its
    /// executors are killed and it ends TORN_DOWN in the history.
    /// Answered by `RequestAccepted` once durable.
    DeleteJob {
        /// Echoed in the answer.
        request: u64,
        /// The job (any framework's id).
        job: FrameworkId,
    },
    /// Client → leader: the status of one job, or of every job
    /// (`GET /v1/jobs[/{id}]`). Answered by `JobsReply`.
    JobsRequest {
        /// Echoed in the answer.
        request: u64,
        /// One job; `None`: every job.
        job: Option<FrameworkId>,
    },
    /// Leader → client: the answer to `JobsRequest`.
    JobsReply {
        /// The leader's epoch.
        epoch: Epoch,
        /// The request's number.
        request: u64,
        /// The jobs asked for, by id.
        jobs: Vec<crate::api::JobStatus>,
    },
    /// Operator → leader: revoke token `id` (`regent token revoke`,
    /// docs/security.md): the durable revocation list refuses it from now
    /// on, and its open connections are closed. `expires_ms` is the expiry
    /// it carries (the entry is kept until then; `None`: for good).
    /// Answered by `RequestAccepted` once durable, or `RequestRefused`.
    RevokeToken {
        /// Echoed in the answer.
        request: u64,
        /// The token's id.
        id: crate::ids::TokenId,
        /// Its expiry, wall-clock ms since the Unix epoch.
        expires_ms: Option<u64>,
    },
    /// Operator → leader: refuse every token signed with a key id at or
    /// below `through` (`regent token revoke --retire-keys N`, a key
    /// rotation); their open connections are closed. Answered by
    /// `RequestAccepted` once durable, or `RequestRefused`.
    RetireKeys {
        /// Echoed in the answer.
        request: u64,
        /// The highest key id retired.
        through: u32,
    },
    /// Operator → leader: create or replace a tenant's guarantee, limit
    /// and weight (`regent tenant set`, `PUT /v1/tenants/{name}`;
    /// docs/tenants.md). Answered by `RequestAccepted` once durable, or
    /// `RequestRefused` naming why.
    SetTenant {
        /// Echoed in the answer.
        request: u64,
        /// The tenant as it should now be.
        tenant: tenants::Tenant,
    },
    /// Client → leader: every tenant with what it holds (`regent tenant
    /// list`, `GET /v1/tenants`). Answered by `TenantsReply`.
    TenantsRequest {
        /// Echoed in the answer.
        request: u64,
    },
    /// Leader → client: the answer to `TenantsRequest`.
    TenantsReply {
        /// The leader's epoch.
        epoch: Epoch,
        /// The request's number.
        request: u64,
        /// Every tenant set or named by a framework, by name.
        tenants: Vec<tenants::TenantView>,
    },
    /// Client → leader: promote the deployments of `job` awaiting promotion
    /// (its canaries are healthy), of `group` only if named (`regent job
    /// promote`, `POST /v1/jobs/{id}/deployment/promote`; appended,
    /// protocol 18). Answered `RequestAccepted` once the promotion is
    /// durable, refused naming the job and group when none awaits one.
    PromoteDeployment {
        /// Echoed in the answer.
        request: u64,
        /// The job (its framework id).
        job: FrameworkId,
        /// Only this group's deployment; `None`: every group's.
        group: Option<String>,
    },
    /// Client → leader: one result of a `manual` health check of a running
    /// executor, from its framework (`regent executor health`, `POST
    /// /v1/executors/{id}/health`; appended, protocol 19). The leader relays
    /// it to the executor's worker (`HealthOnWorker`), which counts it as
    /// a run of that check, holding for the check's TTL; answered
    /// `RequestAccepted` once relayed, refused naming the executor or the
    /// check when it does not run or has no manual check of that name.
    /// Nothing is stored: a framework reports again within each TTL.
    ReportHealth {
        /// Echoed in the answer.
        request: u64,
        /// The executor reported on.
        executor: ExecutorId,
        /// The name of one of its group's `manual` checks.
        check: String,
        /// Whether the check passed.
        passing: bool,
        /// What the framework says about it (cut to the check detail's
        /// length).
        detail: String,
    },
    /// Leader → worker: a framework's report of a `manual` check of
    /// `executor` (appended, protocol 19): the check's index among its
    /// group's checks, and the result.
    HealthOnWorker {
        /// The leader's epoch.
        epoch: Epoch,
        /// The executor reported on.
        executor: ExecutorId,
        /// The check's index in the group's checks
        /// ([`crate::launch::LaunchSpec::checks`]).
        check: u8,
        /// Whether the check passed.
        passing: bool,
        /// The framework's detail.
        detail: String,
    },
}

/// An executor's use of its worker's resources, from its cgroup (each
/// figure `None` where the host does not report it, or the worker does not
/// enforce limits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// The memory it uses now, in bytes.
    pub memory_bytes: Option<u64>,
    /// The most memory it used, in bytes.
    pub memory_peak_bytes: Option<u64>,
    /// The CPU time it used, in microseconds.
    pub cpu_usec: Option<u64>,
}

/// One executor's [`Usage`] in a [`WorkerUsage`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorUsage {
    /// The executor.
    pub executor: ExecutorId,
    /// What it uses.
    pub usage: Usage,
}

/// A worker's sample of its executors' usage and its work directory's
/// space ([`Message::WorkerUsage`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerUsage {
    /// Its running executors' usage (at most
    /// [`crate::limits::MAX_EXECUTORS_PER_WORKER`]).
    pub executors: Vec<ExecutorUsage>,
    /// Bytes free for it in its work directory's file system.
    pub work_dir_free_bytes: Option<u64>,
    /// The size of that file system, in bytes.
    pub work_dir_total_bytes: Option<u64>,
}

/// Where one group's slots would be placed now, and why those that would
/// not be placed would not (the answer to [`Message::PlanRequest`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupPlan {
    /// The group.
    pub group: String,
    /// Its slot count.
    pub slots: u32,
    /// `(slot, worker)` for the slots that would be placed, in slot order;
    /// at most [`crate::limits::MAX_PLAN_PLACEMENTS`] in one reply, the
    /// rest counted in `placed_omitted`.
    pub placed: Vec<(u32, WorkerId)>,
    /// Placed slots left out of `placed`.
    pub placed_omitted: u32,
    /// Slots that would not be placed now.
    pub unplaced: u32,
    /// Why not, in words: the first of `reasons` (for the first slot that
    /// found no worker; the group's later slots ask the same), e.g. `no
    /// ALIVE worker matches rack=r9`.
    pub reason: Option<String>,
    /// Every reason, ranked (docs/jobs.md, "Why a slot waits"); empty when
    /// every slot would be placed.
    pub reasons: Vec<api::WaitReason>,
    /// The running executors preemption would stop for the slots that
    /// would not be placed, in the order it would stop them: the first
    /// preemption's are exactly the ones the leader's next preemption for
    /// this group stops (one pure choice serves both: see
    /// [`crate::preemption`]); later ones assume nothing else changes
    /// meanwhile. Empty when preemption would not serve the group.
    #[serde(default)]
    pub victims: Vec<PlannedVictim>,
    /// What bounds preemption for this group now, in words, when something
    /// does: `preemption is off on this cluster`, or the preemption budget
    /// left to the group's tenant (`preemption budget: 58 of 60 victims left
    /// this minute for tenant b`).
    #[serde(default)]
    pub preemption: Option<String>,
}

/// A running executor a plan would preempt ([`GroupPlan::victims`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedVictim {
    /// The executor.
    pub executor: ExecutorId,
    /// Its framework.
    pub framework: FrameworkId,
    /// Its group.
    pub group: String,
    /// Its worker.
    pub worker: WorkerId,
    /// Its framework's tenant.
    pub tenant: String,
    /// Why it may be taken: `lower priority`, `tenant above its fair
    /// share` or `tenant above its guarantee`.
    pub why: String,
    /// The slot of the planned group it makes room for.
    pub for_slot: u32,
}

/// Which output file of an executor (`<work_dir>/executors/<id>/stdout` or
/// `stderr` on its worker).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LogStream {
    /// Its standard output.
    Stdout,
    /// Its standard error.
    Stderr,
}

impl LogStream {
    /// The file's name: `stdout` or `stderr`.
    pub fn file_name(self) -> &'static str {
        match self {
            LogStream::Stdout => "stdout",
            LogStream::Stderr => "stderr",
        }
    }
}

/// What a worker read for a [`Message::ReadLog`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LogRead {
    /// Bytes of the file.
    Chunk {
        /// Where `data` starts in the file.
        offset: u64,
        /// The bytes (at most the `max` asked for; `offset + data.len()`
        /// is at most `size`).
        data: Vec<u8>,
        /// The file's size when it was read.
        size: u64,
    },
    /// Nothing could be read.
    Failed {
        /// Why, naming the file (no such file, a symbolic link, an OS error).
        reason: String,
    },
}

/// A master's view of the cluster, for operators (`regent status`, the HTTP
/// API). A standby reports its status and the leader it knows of, and no
/// registry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// The answering master.
    pub master: MasterId,
    /// Its status.
    pub status: MasterStatus,
    /// Its epoch (its own when leading, else the highest it knows of).
    pub epoch: Epoch,
    /// The leader, as far as it knows.
    pub leader: Option<LeaderHint>,
    /// Workers, ordered by id.
    pub workers: Vec<WorkerView>,
    /// Frameworks, ordered by id.
    pub frameworks: Vec<FrameworkView>,
    /// Executors, ordered by id.
    pub executors: Vec<ExecutorView>,
    /// Messages handled since start.
    pub messages: u64,
    /// Messages refused since start.
    pub rejected: u64,
    /// Finished frameworks the leader keeps, newest first (at most
    /// [`limits::MAX_HISTORY_STATE_BYTES`](crate::limits::MAX_HISTORY_STATE_BYTES)
    /// of them; empty from a standby). Added in protocol version 2.
    pub history: Vec<FinishedFramework>,
    /// Older finished frameworks the leader keeps but left out of `history`
    /// to keep the reply within its size.
    pub history_omitted: u32,
}

/// One worker in [`ClusterState`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerView {
    /// Its id.
    pub id: WorkerId,
    /// Its registry state.
    pub state: WorkerState,
    /// Cores offered.
    pub cores: u32,
    /// Cores held by executors.
    pub cores_used: u32,
    /// Memory offered, in MiB.
    pub memory_mb: u64,
    /// Memory held by executors, in MiB.
    pub memory_used_mb: u64,
    /// Nothing new is placed on it (cordoned, draining or drained).
    pub cordoned: bool,
    /// DRAINING or DRAINED while a drain is under way or done.
    pub drain: Option<DrainState>,
    /// While DRAINING: when its executors get SIGKILL, in wall-clock
    /// milliseconds since the Unix epoch (as the leader's clock counts).
    pub drain_deadline_ms: Option<u64>,
    /// Its live (launching or running) executors.
    pub executors: u32,
    /// Its attributes (`regent worker --attribute`), sorted by name.
    pub attributes: Vec<(String, String)>,
    /// Ports offered (`regent worker --ports`).
    pub ports: u32,
    /// Ports held by executors.
    pub ports_used: u32,
    /// The host it said its executors' ports are reached at.
    pub host: Option<String>,
    /// The named resources it offers, with the addresses its executors
    /// hold (`regent worker --resource`).
    pub resources: Vec<ResourceView>,
    /// The users it starts executors as ([`RegisterWorker::users`]).
    pub users: Vec<String>,
    /// Its latest [`WorkerUsage`] sample, summed over its executors
    /// (`None` before the first).
    pub usage: Option<WorkerUsageView>,
}

/// One kind of named resource a worker offers, in [`WorkerView`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceView {
    /// Its name (`gpu`).
    pub name: String,
    /// Every address offered, in the order they are handed out.
    pub addresses: Vec<String>,
    /// The addresses its live executors hold (as reported), in offer
    /// order; counted, not yet known, for an executor still launching
    /// ([`ResourceView::held`]).
    pub used: Vec<String>,
    /// How many addresses its live executors hold, reported or not.
    pub held: u32,
}

/// A worker's latest usage sample in [`WorkerView`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerUsageView {
    /// The memory its executors use now, in bytes (those that report it).
    pub memory_bytes: u64,
    /// The CPU time its running executors used, in microseconds.
    pub cpu_usec: u64,
    /// Bytes free in its work directory's file system.
    pub work_dir_free_bytes: Option<u64>,
    /// The size of that file system, in bytes.
    pub work_dir_total_bytes: Option<u64>,
    /// When the leader received it (its clock, milliseconds).
    pub received_at: Millis,
}

impl WorkerView {
    /// The state operators see: DRAINING or DRAINED while a drain is under
    /// way or done (unless the worker is DEAD), else the registry state
    /// (`GET /api/state`, the event stream, the web page).
    pub fn shown_state(&self) -> ShownWorkerState {
        ShownWorkerState::of(self.state, self.drain)
    }
}

/// One framework in [`ClusterState`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameworkView {
    /// Its id.
    pub id: FrameworkId,
    /// Its name.
    pub name: String,
    /// ACTIVE (all slots pending or running), FINISHED (every slot done),
    /// FAILED (a slot failed) or DISCONNECTED.
    pub state: FrameworkState,
    /// It has a live subscription.
    pub connected: bool,
    /// Its groups, in declaration order, with their slot counts now.
    pub groups: Vec<GroupView>,
    /// Its tenant (docs/tenants.md); `None`: `default`.
    pub tenant: Option<String>,
}

/// One executor group in [`FrameworkView`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupView {
    /// The group's name.
    pub name: String,
    /// Its slot count now (after any `regent scale`).
    pub slots: u32,
    /// The slot count it was declared with.
    pub declared: u32,
    /// Slots with a live executor.
    pub running: u32,
    /// Slots waiting out their restart policy's backoff before their next
    /// executor.
    pub waiting: u32,
    /// The group's latest end that counted as a failure (in service mode,
    /// any end), as this leader saw it: `slot 2: exited 3`.
    pub last_end: Option<String>,
    /// Slots waiting to be placed (no executor, not in a restart backoff).
    pub unplaced: u32,
    /// Why they wait, ranked (docs/jobs.md, "Why a slot waits"); empty when
    /// none waits, or past the first
    /// [`crate::limits::MAX_STATE_REASON_GROUPS`] waiting groups.
    pub reasons: Vec<api::WaitReason>,
    /// The group's current or last deployment (protocol 19), as
    /// `/v1/jobs/{id}/deployment` shows it; `None`: never deployed. The
    /// event stream tells its changes ([`crate::events::ClusterEvent::Deployment`]).
    pub deployment: Option<api::DeploymentView>,
}

/// One executor in [`ClusterState`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorView {
    /// Its id.
    pub id: ExecutorId,
    /// Its framework.
    pub framework: FrameworkId,
    /// Its worker, if known.
    pub worker: Option<WorkerId>,
    /// Its state.
    pub state: ExecutorState,
    /// Its ports as its worker numbered them (reached at its worker's
    /// [`WorkerView::host`]).
    pub ports: Vec<(String, u16)>,
    /// The named resources' addresses its worker gave it.
    pub resources: crate::resources::Assigned,
    /// What it uses, from its worker's latest sample (`None`: not
    /// reported, or not running).
    pub usage: Option<Usage>,
    /// `<framework>/<group>` when the leader preempted it for a slot of
    /// that group (docs/tenants.md): it is being stopped, or was, for
    /// that.
    pub preempted_by: Option<String>,
    /// Its health as its worker's checks last reported it, `for_ms` as of
    /// that report (protocol 19; docs/jobs.md#health-checks-groupcheck);
    /// `None` for an executor without checks, before their first report,
    /// or once it ended.
    pub health: Option<HealthReport>,
}

impl Message {
    /// Whether this is a *command*: a master message that starts, kills or
    /// shuts something down on a worker. A ZooKeeper-mode leader sends
    /// commands only under its acting lease
    /// ([`Elector::may_command`](crate::elector::Elector::may_command)).
    pub fn is_command(&self) -> bool {
        matches!(
            self,
            Message::LaunchExecutor { .. }
                | Message::KillExecutorOnWorker { .. }
                | Message::StopExecutorOnWorker { .. }
                | Message::HealthOnWorker { .. }
                | Message::Shutdown { .. }
        )
    }

    /// Whether this is a client's command or request that a connection
    /// and a local asker (the HTTP API) send alike, and the master serves
    /// alike while it may act: the operator commands, plans, named scales
    /// and the jobs the leader owns.
    pub fn is_client_command(&self) -> bool {
        matches!(
            self,
            Message::RemoveWorker { .. }
                | Message::KillFramework { .. }
                | Message::CordonWorker { .. }
                | Message::UncordonWorker { .. }
                | Message::DrainWorker { .. }
                | Message::ScaleGroup { .. }
                | Message::OperatorKillExecutor { .. }
                | Message::PlanRequest { .. }
                | Message::SubmitJob { .. }
                | Message::DeleteJob { .. }
                | Message::JobsRequest { .. }
                | Message::RevokeToken { .. }
                | Message::RetireKeys { .. }
                | Message::SetTenant { .. }
                | Message::TenantsRequest { .. }
                | Message::PromoteDeployment { .. }
                | Message::ReportHealth { .. }
        )
    }

    /// The epoch a master stamped on this message, if it is a master message.
    pub fn master_epoch(&self) -> Option<Epoch> {
        match self {
            Message::HelloReply(r) => Some(r.epoch),
            Message::Registered { epoch, .. }
            | Message::NotLeader { epoch, .. }
            | Message::HeartbeatAck { epoch }
            | Message::ReconnectWorker { epoch }
            | Message::Shutdown { epoch, .. }
            | Message::MasterChanged { epoch, .. }
            | Message::LeaderSuspended { epoch }
            | Message::Subscribed { epoch, .. }
            | Message::FrameworkHeartbeat { epoch }
            | Message::FrameworkError { epoch, .. }
            | Message::RequestAccepted { epoch, .. }
            | Message::RequestRefused { epoch, .. }
            | Message::ExecutorUpdate { epoch, .. }
            | Message::SlotFailed { epoch, .. }
            | Message::LaunchExecutor { epoch, .. }
            | Message::KillExecutorOnWorker { epoch, .. }
            | Message::ExecutorStatusAck { epoch, .. }
            | Message::ReadLog { epoch, .. }
            | Message::LogChunk { epoch, .. } => Some(*epoch),
            Message::StateReply(s) => Some(s.epoch),
            Message::SubscribeRefused { epoch, .. }
            | Message::StopExecutorOnWorker { epoch, .. }
            | Message::HealthOnWorker { epoch, .. }
            | Message::GroupScaled { epoch, .. }
            | Message::RegisterRefused { epoch, .. }
            | Message::PlanReply { epoch, .. }
            | Message::JobAccepted { epoch, .. }
            | Message::JobsReply { epoch, .. }
            | Message::TenantsReply { epoch, .. } => Some(*epoch),
            Message::SetTenant { .. }
            | Message::TenantsRequest { .. }
            | Message::PromoteDeployment { .. }
            | Message::ReportHealth { .. } => None,
            Message::Hello(_)
            | Message::RegisterWorker(_)
            | Message::WorkerHeartbeat { .. }
            | Message::WorkerUsage { .. }
            | Message::Subscribe(_)
            | Message::DeclareGroup { .. }
            | Message::UpdateGroup { .. }
            | Message::KillExecutor { .. }
            | Message::Teardown { .. }
            | Message::ExecutorStatus { .. }
            | Message::StateRequest
            | Message::RemoveWorker { .. }
            | Message::KillFramework { .. }
            | Message::FrameworkHeartbeatAck { .. }
            | Message::StepDown { .. }
            | Message::Callback { .. }
            | Message::LogRequest { .. }
            | Message::LogData { .. }
            | Message::CordonWorker { .. }
            | Message::UncordonWorker { .. }
            | Message::DrainWorker { .. }
            | Message::ScaleGroup { .. }
            | Message::OperatorKillExecutor { .. }
            | Message::PlanRequest { .. }
            | Message::SubmitJob { .. }
            | Message::DeleteJob { .. }
            | Message::JobsRequest { .. }
            | Message::RevokeToken { .. }
            | Message::RetireKeys { .. } => None,
        }
    }

    /// A short name for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Hello(_) => "Hello",
            Message::HelloReply(_) => "HelloReply",
            Message::RegisterWorker(_) => "RegisterWorker",
            Message::WorkerHeartbeat { .. } => "WorkerHeartbeat",
            Message::Registered { .. } => "Registered",
            Message::NotLeader { .. } => "NotLeader",
            Message::HeartbeatAck { .. } => "HeartbeatAck",
            Message::ReconnectWorker { .. } => "ReconnectWorker",
            Message::Shutdown { .. } => "Shutdown",
            Message::MasterChanged { .. } => "MasterChanged",
            Message::LeaderSuspended { .. } => "LeaderSuspended",
            Message::Subscribe(_) => "Subscribe",
            Message::DeclareGroup { .. } => "DeclareGroup",
            Message::KillExecutor { .. } => "KillExecutor",
            Message::Teardown { .. } => "Teardown",
            Message::Subscribed { .. } => "Subscribed",
            Message::FrameworkHeartbeat { .. } => "FrameworkHeartbeat",
            Message::FrameworkError { .. } => "FrameworkError",
            Message::RequestAccepted { .. } => "RequestAccepted",
            Message::RequestRefused { .. } => "RequestRefused",
            Message::ExecutorUpdate { .. } => "ExecutorUpdate",
            Message::SlotFailed { .. } => "SlotFailed",
            Message::LaunchExecutor { .. } => "LaunchExecutor",
            Message::KillExecutorOnWorker { .. } => "KillExecutorOnWorker",
            Message::ExecutorStatus { .. } => "ExecutorStatus",
            Message::ExecutorStatusAck { .. } => "ExecutorStatusAck",
            Message::StateRequest => "StateRequest",
            Message::StateReply(_) => "StateReply",
            Message::RemoveWorker { .. } => "RemoveWorker",
            Message::SubmitJob { .. } => "SubmitJob",
            Message::JobAccepted { .. } => "JobAccepted",
            Message::DeleteJob { .. } => "DeleteJob",
            Message::JobsRequest { .. } => "JobsRequest",
            Message::JobsReply { .. } => "JobsReply",
            Message::KillFramework { .. } => "KillFramework",
            Message::FrameworkHeartbeatAck { .. } => "FrameworkHeartbeatAck",
            Message::StepDown { .. } => "StepDown",
            Message::SubscribeRefused { .. } => "SubscribeRefused",
            Message::Callback { .. } => "Callback",
            Message::LogRequest { .. } => "LogRequest",
            Message::ReadLog { .. } => "ReadLog",
            Message::LogData { .. } => "LogData",
            Message::LogChunk { .. } => "LogChunk",
            Message::CordonWorker { .. } => "CordonWorker",
            Message::UncordonWorker { .. } => "UncordonWorker",
            Message::DrainWorker { .. } => "DrainWorker",
            Message::ScaleGroup { .. } => "ScaleGroup",
            Message::OperatorKillExecutor { .. } => "OperatorKillExecutor",
            Message::StopExecutorOnWorker { .. } => "StopExecutorOnWorker",
            Message::GroupScaled { .. } => "GroupScaled",
            Message::RegisterRefused { .. } => "RegisterRefused",
            Message::PlanRequest { .. } => "PlanRequest",
            Message::PlanReply { .. } => "PlanReply",
            Message::UpdateGroup { .. } => "UpdateGroup",
            Message::WorkerUsage { .. } => "WorkerUsage",
            Message::RevokeToken { .. } => "RevokeToken",
            Message::RetireKeys { .. } => "RetireKeys",
            Message::SetTenant { .. } => "SetTenant",
            Message::TenantsRequest { .. } => "TenantsRequest",
            Message::TenantsReply { .. } => "TenantsReply",
            Message::PromoteDeployment { .. } => "PromoteDeployment",
            Message::ReportHealth { .. } => "ReportHealth",
            Message::HealthOnWorker { .. } => "HealthOnWorker",
        }
    }
}

// ---- Finished frameworks ----
// Finished frameworks: what the leader keeps of a framework once it has
// ended (Spark's `spark.deploy.retainedApplications`, Mesos' completed
// frameworks).
//
// When a framework ends the leader writes a [`FinishedFramework`] — how it
// ended ([`FrameworkOutcome`]), the wall-clock time, and the outcome of every
// slot — as a history record in the store, keeps the newest
// [`master::Config::retained_frameworks`](crate::master::Config::retained_frameworks)
// of them and deletes older ones. Operators see them in
// [`ClusterState::history`](crate::protocol::ClusterState::history).
//
// Sizes: a history record holds every slot unless that would pass
// [`limits::MAX_RECORD_PAYLOAD`]; a `StateReply` shows at most
// [`limits::MAX_HISTORY_SLOTS_SHOWN`] slots per framework and at most
// [`limits::MAX_HISTORY_STATE_BYTES`] of history in all (newest first). What
// is left out is counted ([`FinishedFramework::slots_omitted`],
// [`ClusterState::history_omitted`](crate::protocol::ClusterState::history_omitted)),
// never silently dropped.
//
// How a history entry is made to fit a record or a reply is the master's
// (`master/history.rs`).

/// How a framework ended. Variants are only ever appended (history records
/// and `StateReply` frames carry them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FrameworkOutcome {
    /// It ended by itself (torn down by its subscriber, or past its
    /// failover timeout) after every slot of its declared groups exited 0
    /// (at least one slot declared).
    Completed,
    /// It ended by itself with at least one slot failed (its group's retry
    /// budget ran out on it).
    Failed,
    /// Its subscriber tore it down (`Teardown`) before every slot was done
    /// (slots pending or running, or killed on its request, or none
    /// declared).
    TornDown,
    /// An operator killed it (`regent kill`, `KillFramework`), whatever its
    /// slots had done.
    Killed,
    /// It stayed disconnected longer than its failover timeout before every
    /// slot was done.
    TimedOut,
}

impl FrameworkOutcome {
    /// The operator's name: COMPLETED, FAILED, TORN_DOWN, KILLED, TIMED_OUT.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameworkOutcome::Completed => "COMPLETED",
            FrameworkOutcome::Failed => "FAILED",
            FrameworkOutcome::TornDown => "TORN_DOWN",
            FrameworkOutcome::Killed => "KILLED",
            FrameworkOutcome::TimedOut => "TIMED_OUT",
        }
    }
}

impl std::fmt::Display for FrameworkOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What became of one slot of a finished framework.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishedSlot {
    /// The slot's group.
    pub group: String,
    /// The slot's index in its group.
    pub slot: u32,
    /// The executor the slot ended with; `None` if it never had one.
    pub executor: Option<ExecutorId>,
    /// That executor's final state (`Killed` for one still running when the
    /// framework ended: the leader killed it); `None` if it never had one.
    pub state: Option<ExecutorState>,
    /// Executors launched for this slot that the leader knew of when the
    /// framework ended (a leader that took over knows those its workers
    /// reported, not the failed attempts of earlier leaderships).
    pub attempts: u32,
    /// `<framework>/<group>` a preemption stopped the slot's last executor
    /// for, when that was the slot's last end (the executor shown, still
    /// dying, or the slot waiting for its refill): read from the group
    /// record, so it survives a failover (docs/design.md#issue-44).
    pub preempted_by: Option<String>,
}

impl FinishedSlot {
    /// The final executor's exit code, if it exited by itself.
    pub fn exit_code(&self) -> Option<i32> {
        match self.state {
            Some(ExecutorState::Exited { code }) => Some(code),
            _ => None,
        }
    }

    /// The final state as an operator reads it: EXITED, FAILED, KILLED,
    /// LOST, LAUNCHING, RUNNING, or NONE for a slot that never ran.
    pub fn state_name(&self) -> &'static str {
        self.state.as_ref().map_or("NONE", ExecutorState::name)
    }
}

/// A framework that has ended, as the leader keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishedFramework {
    /// Its id.
    pub id: FrameworkId,
    /// Its display name.
    pub name: String,
    /// How it ended.
    pub outcome: FrameworkOutcome,
    /// Wall-clock time it ended, in ms since the Unix epoch (the runtime's
    /// clock, as passed to the master at its election, plus the monotonic
    /// time since); 0 if the runtime gave no wall clock.
    pub finished_at_ms: u64,
    /// Wall-clock time of its first SUBSCRIBE, if the leader that accepted
    /// it knew the wall clock (kept in the framework record since protocol
    /// version 2; `None` for a framework recorded by an earlier build).
    pub registered_at_ms: Option<u64>,
    /// Every slot, in declaration order of groups, then by index (fewer if
    /// `slots_omitted` is not 0).
    pub slots: Vec<FinishedSlot>,
    /// Slots left out of `slots` to keep a record or a reply within its
    /// size limit.
    pub slots_omitted: u32,
}

//! What a client in any language asks of the leader through `/v1/`
//! (docs/api.md), as data: jobs the leader owns, scaling that names the
//! executors it removes, and the status of every group, slot and executor.
//!
//! These types travel in [`Message`](crate::protocol::Message)s
//! (`SubmitJob`, `JobAccepted`, `DeleteJob`, `JobsRequest`, `JobsReply`,
//! and `ScaleGroup`'s `remove`/`stop`), so the CLI over the wire protocol
//! and the HTTP API over JSON ask the same master the same thing and get
//! the same answers: the HTTP face hands the node a wire message as a query
//! ([`crate::node::master::Query::Command`]) and renders the reply.
//!
//! **API jobs** (docs/design.md#issue-43). A job created with `SubmitJob`
//! is a framework the leader owns: it has no subscriber, is never torn
//! down for being disconnected, and lives until `DeleteJob` (or an
//! operator's kill-framework). Its id is the client's (`SubmitJob::job`),
//! so a retried create finds the job it created. Each accepted submission
//! that changes the job raises its `version` (from 1); the last
//! [`MAX_IDEMPOTENCY_KEYS`] idempotency keys are kept durably with the
//! version they produced, so a retried request (same key) is answered with
//! that version and changes nothing, even after a leader failover. A
//! submission with `expect_version` is refused unless the job is at that
//! version (check-and-set; `Some(0)`: only if the job does not exist).

use super::GroupSpec;
use crate::ids::{ExecutorId, FrameworkId, WorkerId};
use crate::states::FrameworkState;
use crate::time::Millis;
use serde::{Deserialize, Serialize};

mod wait_reason;
pub use wait_reason::{WaitReason, CORES, MEMORY, PORTS};

/// How many idempotency keys a job remembers (the newest).
pub const MAX_IDEMPOTENCY_KEYS: usize = 32;

/// The longest idempotency key accepted, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 128;

/// A job as a client submits it (`POST /v1/jobs`, `Message::SubmitJob`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSubmission {
    /// The job's id, which is its framework's id (chosen by the client:
    /// by default the job's name).
    pub job: FrameworkId,
    /// Its display name.
    pub name: String,
    /// Its groups as they should be, in order. A group of a live job whose
    /// spec differs is updated through a rollout (`regent run --update`'s
    /// path, at most `max_parallel` slots down at once); a group that is
    /// new is declared; a group of the live job not named here is refused,
    /// naming it (a job's groups are only ever added: delete the job to
    /// drop one). An update does not change a group's count (scale it).
    /// Each group passes the checks of a `DeclareGroup`, refused naming
    /// the group and the job file's key.
    pub groups: Vec<GroupSpec>,
    /// The client's idempotency key (at most
    /// [`MAX_IDEMPOTENCY_KEY_BYTES`] bytes): a request with a key the job
    /// already saw is answered as it was then and changes nothing.
    pub key: Option<String>,
    /// Check-and-set: apply only if the job is at this version now
    /// (`Some(0)`: only if there is no such job).
    pub expect_version: Option<u64>,
    /// The most slots of one group replaced at once by an update (at
    /// least 1).
    pub max_parallel: u32,
    /// The tenant a new job belongs to (docs/tenants.md; `None`: its
    /// credential's tenant, else `default`). A job's tenant never changes:
    /// a submission naming another tenant is refused naming both.
    #[serde(default)]
    pub tenant: Option<String>,
}

/// What an accepted submission did (`Message::JobAccepted`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobChange {
    /// The job did not exist and now does.
    Created,
    /// The job existed and its groups changed (an update's rollout, a new
    /// group).
    Updated,
    /// The job was already as submitted: nothing changed.
    Unchanged,
    /// The request's idempotency key was seen before: this is what that
    /// request produced, and nothing changed now.
    Replayed,
}

/// How named executors are stopped by a scale
/// (`ScaleGroup { stop: Some(..) }`): `signal` now, SIGKILL once
/// `deadline` has passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    /// The signal sent first.
    pub signal: StopSignal,
    /// How long an executor may take to exit after it.
    pub deadline: Millis,
}

/// The signals an executor may be asked to stop with first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StopSignal {
    /// SIGTERM (the default).
    Term,
    /// SIGINT.
    Int,
    /// SIGHUP.
    Hup,
    /// SIGQUIT.
    Quit,
    /// SIGUSR1.
    Usr1,
    /// SIGUSR2.
    Usr2,
}

impl StopSignal {
    /// Every signal, in declaration order.
    pub const ALL: [StopSignal; 6] = [
        StopSignal::Term,
        StopSignal::Int,
        StopSignal::Hup,
        StopSignal::Quit,
        StopSignal::Usr1,
        StopSignal::Usr2,
    ];

    /// Its name without `SIG` (`TERM`), as the API and the CLI spell it.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Term => "TERM",
            StopSignal::Int => "INT",
            StopSignal::Hup => "HUP",
            StopSignal::Quit => "QUIT",
            StopSignal::Usr1 => "USR1",
            StopSignal::Usr2 => "USR2",
        }
    }

    /// The signal named `name` (`TERM` or `SIGTERM`, any case).
    pub fn parse(name: &str) -> Option<StopSignal> {
        let upper = name.trim().to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        StopSignal::ALL.into_iter().find(|s| s.name() == bare)
    }
}

/// A job as the leader sees it now (`GET /v1/jobs/{id}`,
/// `Message::JobsReply`): every framework is listed, those a subscriber
/// drives as well as API jobs.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobStatus {
    /// The job's (framework's) id.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub job: FrameworkId,
    /// Its name.
    pub name: String,
    /// Its version, for an API job; `None` for a framework a subscriber
    /// drives.
    pub version: Option<u64>,
    /// Its state as `/api/state` shows it.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub state: FrameworkState,
    /// Its groups, in declaration order.
    pub groups: Vec<GroupStatus>,
    /// Its tenant (docs/tenants.md); `None`: `default`.
    pub tenant: Option<String>,
}

/// One group of a job: how many slots are wanted, placed and running, and
/// every slot.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStatus {
    /// The group's name.
    pub group: String,
    /// Slots wanted (the declared or scaled count).
    pub desired: u32,
    /// Slots with an executor placed (launching, running or stopping).
    pub placed: u32,
    /// Slots whose executor runs.
    pub running: u32,
    /// Slots done for good (completed, failed, killed).
    pub done: u32,
    /// Whether an update's rollout is under way.
    pub rolling: bool,
    /// Every slot, in order.
    pub slots: Vec<SlotStatus>,
    /// The group's priority, 0 to 100 (docs/tenants.md; 50 unless its
    /// declaration says).
    pub priority: u8,
    /// The group's `disconnect.stop_after`, in ms: its executors are
    /// stopped by a worker that heard from no master for that long, and
    /// replaced only after it (docs/jobs.md, docs/design.md#issue-45).
    /// `None`: they run on through a partition.
    #[serde(default)]
    pub stop_after_ms: Option<u64>,
    /// The group's current or last deployment (docs/jobs.md, deployments;
    /// protocol 18, its fields from `target_digest` on protocol 19);
    /// `None`: never deployed.
    #[serde(default)]
    pub deployment: Option<DeploymentView>,
}

/// A group's deployment as `regent job status` and `/v1/jobs` show it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeploymentView {
    /// Its number in the group.
    pub seq: u64,
    /// `canary`, `awaiting_promotion`, `rolling`, `succeeded` or `failed`.
    pub state: String,
    /// Why it failed, if it did.
    pub reason: Option<String>,
    /// The deployment it reverts, if it is a revert.
    pub revert_of: Option<u64>,
    /// Open slots whose executor of the deployed spec is healthy.
    pub healthy: u32,
    /// Open slots of the group.
    pub open: u32,
    /// Slots replaced first, as canaries.
    pub canary: u32,
    /// The most slots below healthy at once.
    pub max_parallel: u32,
    /// How long a new executor runs before it counts as healthy, ms.
    pub min_healthy_time_ms: u64,
    /// The digest of the spec it deploys (`store::spec_digest`; protocol
    /// 19 adds this field and those below): an executor runs the new
    /// version when its era's digest is this.
    #[serde(default)]
    pub target_digest: u32,
    /// The digest of the last healthy spec, deployed again if this one
    /// fails with `auto_revert`; `None` for a revert, or when nothing is
    /// to be reverted to.
    #[serde(default)]
    pub revert_to_digest: Option<u32>,
    /// Open slots whose live executor (launching or running) runs the
    /// deployed spec.
    #[serde(default)]
    pub placed: u32,
    /// Live executors of another spec (the old version) still to replace.
    #[serde(default)]
    pub old: u32,
    /// The slots replaced first, as canaries, while a canary phase lasts
    /// (`canary` or `awaiting_promotion`); empty otherwise.
    #[serde(default)]
    pub canaries: Vec<u32>,
    /// A failure starts the revert to the last healthy spec.
    #[serde(default)]
    pub auto_revert: bool,
    /// Healthy canaries promote it without `regent job promote`.
    #[serde(default)]
    pub auto_promote: bool,
    /// How long a new executor may run without becoming healthy before
    /// the deployment fails, ms.
    #[serde(default)]
    pub healthy_deadline_ms: u64,
    /// How long the deployment may go without a slot becoming healthy
    /// before it fails, ms (0: no deadline).
    #[serde(default)]
    pub progress_deadline_ms: u64,
    /// When it started, wall-clock ms since the Unix epoch.
    #[serde(default)]
    pub started_ms: u64,
    /// When it last made progress (its start, a slot becoming healthy, a
    /// promotion), wall-clock ms.
    #[serde(default)]
    pub progress_ms: u64,
    /// While it is under way and not awaiting promotion: the wall-clock
    /// instant (ms) it fails unless a slot becomes healthy first.
    #[serde(default)]
    pub progress_due_ms: Option<u64>,
    /// For a revert: why the deployment it reverts failed, as the leader
    /// that started the revert saw it (not durable: `None` after a
    /// failover).
    #[serde(default)]
    pub reverts_because: Option<String>,
}

/// What one slot is doing.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotPhase {
    /// No executor: it waits to be placed (`reasons` say why it is not).
    Waiting,
    /// Waiting out a restart backoff (`reason` says until when).
    Backoff,
    /// Its executor was placed and is starting.
    Launching,
    /// Its executor runs.
    Running,
    /// Its executor was asked to stop (a scale, a drain, a rollout).
    Stopping,
    /// Done: an executor exited 0.
    Completed,
    /// Done: it failed past its retries or restart policy.
    Failed,
    /// Done: killed on request.
    Killed,
}

/// One slot of a group.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotStatus {
    /// Its number.
    pub slot: u32,
    /// What it is doing.
    pub phase: SlotPhase,
    /// Its current executor, if one is placed.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub executor: Option<ExecutorId>,
    /// Where that executor runs.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub worker: Option<WorkerId>,
    /// Why it waits (phase `waiting` or `backoff`): the words of the first
    /// of `reasons`; or how it ended (a failed slot's last reason).
    pub reason: Option<String>,
    /// Every reason it waits, ranked (docs/jobs.md, "Why a slot waits");
    /// empty for a slot that does not wait.
    pub reasons: Vec<WaitReason>,
    /// Its running executor's health, as its worker last reported it
    /// (`for_ms` as of this answer; docs/design.md#issue-45); `None` for a
    /// group without checks or a slot not running.
    #[serde(default)]
    pub health: Option<crate::protocol::HealthReport>,
    /// `<framework>/<group>` a preemption stopped the slot's executor for:
    /// the executor shown (stopping), or, for a slot that waits, the last
    /// one it had; durable, so a new leader says it too (docs/tenants.md,
    /// docs/design.md#issue-44). `None` otherwise.
    #[serde(default)]
    pub preempted_by: Option<String>,
}

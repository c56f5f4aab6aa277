//! The records a master makes durable, and their on-disk format.
//!
//! A leader persists a [`Record`] per worker, per framework (with its executor
//! requests), per finished framework it keeps in its history, and one for
//! its epoch. The runtime executes
//! `Persist`/`Unpersist` actions against a store (filesystem or ZooKeeper) and
//! feeds back `Persisted` (or a failure, which costs the leadership:
//! docs/design.md#leadership-that-cannot-act-is-given-up). Writes to one key are applied in order; a delete of a worker
//! record is conditional on the incarnation it names. With a cluster secret
//! every record is sealed (a key id and an HMAC-SHA256, see [`seal`]), so a
//! planted or altered record is refused by name on load.

pub mod format;
pub mod names;
pub mod seal;

use crate::ids::{Addr, Epoch, ExecutorId, FrameworkId, Incarnation, WorkerId};
use crate::protocol::FinishedFramework;
use crate::protocol::{ExecutorState, GroupSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Identifies one write the machine asked for; echoed back in `Persisted`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct WriteId(pub u64);

/// A store operation the master asks for. The node passes it through
/// untouched: to the runtime in the single-master modes
/// ([`crate::node::master::Output::Store`]), to its ZooKeeper store otherwise.
/// Every command is answered by a [`StoreEvent`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreCommand {
    /// Write `record` durably, then answer [`StoreEvent::Persisted`] (or
    /// [`StoreEvent::PersistFailed`]). Writes to one key are applied in
    /// order; the runtime may batch them.
    Persist {
        /// Echoed back.
        write: WriteId,
        /// The record.
        record: Record,
    },
    /// Delete the record at `key`, only if it still names `incarnation`
    /// (worker keys), then answer [`StoreEvent::Persisted`].
    Unpersist {
        /// Echoed back.
        write: WriteId,
        /// The key.
        key: RecordKey,
        /// The incarnation the delete is conditional on.
        incarnation: Option<Incarnation>,
    },
    /// Read every record of the store, then answer [`StoreEvent::Loaded`]
    /// (or [`StoreEvent::LoadFailed`]).
    LoadRecords,
}

/// What the store answers to a [`StoreCommand`], fed to the master as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreEvent {
    /// The write is durable.
    Persisted {
        /// The write.
        write: WriteId,
    },
    /// The write failed (an fsync failed, a fenced write was refused): the
    /// leader cannot act (docs/design.md#leadership-that-cannot-act-is-given-up).
    PersistFailed {
        /// The write.
        write: WriteId,
        /// What the store said.
        reason: String,
    },
    /// Every record in the store, answering [`StoreCommand::LoadRecords`].
    Loaded {
        /// The records.
        records: Vec<Record>,
    },
    /// [`StoreCommand::LoadRecords`] failed (a damaged store): leadership is
    /// given up.
    LoadFailed {
        /// What the store said, naming the damaged record.
        reason: String,
    },
}

/// The key a record is stored under.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RecordKey {
    /// The current epoch (one per store).
    Epoch,
    /// A registered worker.
    Worker(WorkerId),
    /// A framework and its executor requests.
    Framework(FrameworkId),
    /// A finished framework in the history, by its sequence number (see
    /// [`HistoryRecord::seq`]).
    History(u64),
    /// The revoked tokens and retired key ids (one per store,
    /// docs/security.md).
    Revocations,
    /// A tenant an operator set, by name (appended; docs/tenants.md).
    Tenant(String),
}

impl fmt::Display for RecordKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordKey::Epoch => f.write_str("epoch"),
            RecordKey::Worker(w) => write!(f, "worker/{w}"),
            RecordKey::Framework(fw) => write!(f, "framework/{fw}"),
            RecordKey::History(seq) => write!(f, "history/{seq}"),
            RecordKey::Revocations => f.write_str("revocations"),
            RecordKey::Tenant(t) => write!(f, "tenant/{t}"),
        }
    }
}

/// A registered worker, as much as a new leader needs to recover it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRecord {
    /// The worker's id.
    pub id: WorkerId,
    /// The incarnation that registered.
    pub incarnation: Incarnation,
    /// Cores offered.
    pub cores: u32,
    /// Memory offered, in MiB.
    pub memory_mb: u64,
    /// Where its callback listener takes masters' connections (docs/design.md#seed-002:
    /// a new leader dials it when it recovers), if it has one.
    pub callback: Option<Addr>,
    /// An operator's cordon or drain of the worker, if any.
    pub maintenance: Option<Maintenance>,
    /// The worker was declared DEAD. A DEAD worker's record is deleted,
    /// unless it is under an operator's cordon or drain: that record is
    /// kept, so the maintenance outlives the worker's absence and a new
    /// leader; a new leader recovers it DEAD (it waits for no report of
    /// it), and it keeps its maintenance when it registers again.
    pub dead: bool,
}

/// An operator's hold on a worker (`regent cordon`, `regent drain`): no new
/// executor is placed on it while it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Maintenance {
    /// Nothing new is placed on it; what runs keeps running.
    Cordoned,
    /// Its executors were asked to stop; they get SIGKILL once
    /// `deadline_ms` has passed.
    Draining {
        /// Wall-clock milliseconds since the Unix epoch (the leader's clock
        /// term), so a new leader honours the same deadline.
        deadline_ms: u64,
    },
    /// Drained: nothing runs on it any more.
    Drained,
}

/// A framework and what it asked for: every executor group it declared and
/// what became of each slot, so that a new leader neither loses a request
/// nor runs a finished slot again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameworkRecord {
    /// The framework's id.
    pub id: FrameworkId,
    /// Its display name.
    pub name: String,
    /// How long it may stay disconnected before it is torn down, in ms.
    pub failover_timeout_ms: u64,
    /// Its executor groups, in declaration order.
    pub groups: Vec<GroupRecord>,
    /// Where its subscriber's callback listener takes masters' connections
    /// (docs/design.md#seed-002), if the subscriber has one.
    pub callback: Option<Addr>,
    /// Wall-clock ms of its first SUBSCRIBE (of its creation, for a job the
    /// leader owns), if the leader that accepted it knew the wall clock
    /// (shown in the history when it finishes).
    pub registered_at_ms: Option<u64>,
    /// For a job the leader owns (created by `SubmitJob`, [`crate::api`]):
    /// its version and idempotency keys. `None` for a framework a
    /// subscriber drives.
    pub job: Option<JobRecord>,
    /// The tenant it belongs to (docs/tenants.md); `None`: `default`.
    /// Set when it is created, never changed.
    pub tenant: Option<String>,
}

/// What the leader keeps of a job it owns ([`crate::api`]): its version
/// and the idempotency keys of the newest submissions, so a retried
/// request is answered as it was even after a leader failover.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Its version: 1 at creation, one more for each accepted submission
    /// that changed it.
    pub version: u64,
    /// The newest idempotency keys (at most
    /// [`crate::api::MAX_IDEMPOTENCY_KEYS`]), oldest first.
    pub keys: Vec<JobKey>,
}

/// One idempotency key a job saw, and what its request produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobKey {
    /// The client's key.
    pub key: String,
    /// The job's version after that request.
    pub version: u64,
    /// What that request did.
    pub change: crate::api::JobChange,
}

/// One declared executor group and the outcome of each of its slots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// What was declared.
    pub spec: GroupSpec,
    /// One entry per slot (`spec.slots` of them).
    pub slots: Vec<SlotOutcome>,
    /// Retries used by failed executors of this group.
    pub retries_used: u32,
    /// The restart state of the slots that have one (a group with a restart
    /// policy of its own, [`crate::policy::RestartPolicy`]): failures in a
    /// row and the backoff's end, by slot. Empty for every group with the
    /// default restart policy.
    pub restarts: BTreeMap<u32, SlotRestart>,
    /// Its current deployment, or the last one that finished (shown until
    /// the next): a changed spec replacing its executors, gated on their
    /// health (docs/jobs.md, docs/design.md#issue-45).
    pub deployment: Option<Deployment>,
    /// By slot, the executor whose end was counted last against the slot's
    /// restart policy or the group's retry budget: a report of that end
    /// again (its worker gives a new leader a report the old one recorded
    /// but died before acknowledging) is not counted twice. Cleared when
    /// the slot is done.
    pub counted: BTreeMap<u32, crate::ids::ExecutorId>,
    /// By slot, the executor an operator last asked to stop with its slot
    /// refilled (`regent kill-executor` without `--no-refill`), or a
    /// preemption stopped, until the slot settles or another executor of it
    /// is stopped so: a new leader kills it instead of adopting it, and
    /// refills its slot, so an accepted kill outlives a failover, and a
    /// report of its end heard again is never counted against the slot.
    pub replacing: BTreeMap<u32, crate::ids::ExecutorId>,
    /// Which spec each executor of the group runs, by the launch number it
    /// was launched at: a spec digest from each boundary on, oldest first,
    /// at most [`MAX_ERAS`] ([`GroupRecord::digest_of`]). Empty for a group
    /// never deployed: every executor runs the current spec.
    pub eras: Vec<Era>,
    /// By slot, the executor a preemption stopped and the group it was
    /// stopped for: written in the same write that names it in
    /// [`GroupRecord::replacing`], dropped whenever that entry is dropped
    /// or names another executor, so a new leader still says who
    /// preempted it (docs/tenants.md, docs/design.md#issue-44).
    pub preempted: BTreeMap<u32, Preemptor>,
}

/// Who preempted a slot's executor ([`GroupRecord::preempted`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preemptor {
    /// The executor stopped (the victim).
    pub executor: ExecutorId,
    /// The group it was stopped for, `<framework>/<group>`.
    pub by: String,
}

impl GroupRecord {
    /// Who preempted slot `slot`'s executor `executor`, if a preemption
    /// stopped it (and the record still names it in
    /// [`GroupRecord::replacing`]).
    pub fn preempted_by(&self, slot: u32, executor: &ExecutorId) -> Option<&str> {
        let p = self.preempted.get(&slot).filter(|p| p.executor == *executor)?;
        (self.replacing.get(&slot) == Some(executor)).then_some(p.by.as_str())
    }

    /// Names `executor` as slot `slot`'s executor being replaced
    /// ([`GroupRecord::replacing`]), forgetting a preemption of another
    /// executor of the slot.
    pub fn replace(&mut self, slot: u32, executor: ExecutorId) {
        if self.preempted.get(&slot).is_some_and(|p| p.executor != executor) {
            self.preempted.remove(&slot);
        }
        self.replacing.insert(slot, executor);
    }

    /// Drops a [`GroupRecord::preempted`] entry whose slot
    /// [`GroupRecord::replacing`] no longer names for the same executor
    /// (the two are written and cleared together).
    pub fn prune_preempted(&mut self) {
        let replacing = &self.replacing;
        self.preempted.retain(|slot, p| replacing.get(slot) == Some(&p.executor));
    }
}

/// The most eras a group keeps ([`GroupRecord::eras`]); the oldest is
/// dropped past it (its executors then count as of no known spec, and a
/// deployment replaces them).
pub const MAX_ERAS: usize = 8;

/// The digest of no known spec (executors launched before every era a
/// group keeps).
pub const UNKNOWN_DIGEST: u32 = 0;

/// From one launch on, a group's executors run the spec of `digest`
/// ([`spec_digest`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Era {
    /// The epoch of the boundary.
    pub from_epoch: u64,
    /// The first launch number at `from_epoch` of the era.
    pub from_launch: u64,
    /// The digest of the spec its executors run.
    pub digest: u32,
}

/// A group's spec replacing its executors, slot by slot, gated on their
/// health (docs/jobs.md, docs/design.md#issue-45). Durable, so a new
/// leader goes on with the same counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    /// The group's deployment number: 1 for its first, one more for each
    /// next (a revert too).
    pub seq: u64,
    /// The digest of the spec deployed ([`spec_digest`]).
    pub target: u32,
    /// The update policy it follows, as it was when it started.
    pub policy: crate::policy::UpdatePolicy,
    /// Where it stands.
    pub state: DeploymentState,
    /// The last healthy spec, deployed again if this one fails with
    /// `auto_revert`; `None`: a failure stops, nothing is reverted.
    pub revert_to: Option<Box<GroupSpec>>,
    /// This deployment reverts deployment `seq` (no canary phase, nothing
    /// to revert to).
    pub revert_of: Option<u64>,
    /// Wall-clock ms it started at (the leader's clock term).
    pub started_ms: u64,
    /// Wall-clock ms of its last progress: its start, or a slot becoming
    /// healthy.
    pub progress_ms: u64,
    /// The slots whose executor of the deployed spec has been healthy for
    /// `min_healthy_time` (and stayed so since).
    pub healthy: std::collections::BTreeSet<u32>,
    /// By slot, how many executors of the deployed spec ended (not stopped
    /// by an operator or lost with their worker).
    pub ends: BTreeMap<u32, u32>,
}

/// Where a [`Deployment`] stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeploymentState {
    /// Its canary slots are being replaced.
    Canary,
    /// Its canaries are healthy; it waits to be promoted.
    AwaitingPromotion,
    /// Its slots are being replaced, `max_parallel` at a time.
    Rolling,
    /// Every open slot runs the deployed spec, healthy.
    Succeeded,
    /// It failed and stopped, for `reason`.
    Failed {
        /// Why (`healthy_deadline 5m passed on slot 0`).
        reason: String,
    },
}

impl DeploymentState {
    /// Whether the deployment is under way (neither succeeded nor failed).
    pub fn is_active(&self) -> bool {
        matches!(
            self,
            DeploymentState::Canary | DeploymentState::AwaitingPromotion | DeploymentState::Rolling
        )
    }

    /// Its name as `regent job status` and `/v1/` show it.
    pub fn name(&self) -> &'static str {
        match self {
            DeploymentState::Canary => "canary",
            DeploymentState::AwaitingPromotion => "awaiting_promotion",
            DeploymentState::Rolling => "rolling",
            DeploymentState::Succeeded => "succeeded",
            DeploymentState::Failed { .. } => "failed",
        }
    }
}

/// What tells one version of a group from another: CRC32C of the spec's
/// encoding without its count and its update policy (scaling a group or
/// changing how it is deployed is no new version), never
/// [`UNKNOWN_DIGEST`].
pub fn spec_digest(spec: &GroupSpec) -> u32 {
    let mut bare = spec.clone();
    bare.slots = 0;
    bare.policy.update = None;
    // Encoding a spec in memory cannot fail.
    let bytes = postcard::to_allocvec(&bare).unwrap_or_default();
    match crc32c::crc32c(&bytes) {
        UNKNOWN_DIGEST => 1,
        d => d,
    }
}

/// A rolling update as group layouts 6 to 11 stored it (variants 12 to
/// 22), before deployments: its live executors launched before the update
/// run the previous spec. Read as a [`Deployment`] (rolling, no revert,
/// gated on nothing: `min_healthy_time` 0) whose eras tell old from new.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollout {
    /// The most slots of the group down for the replacement at once (at
    /// least 1).
    pub max_parallel: u32,
    /// The epoch of the update: executors launched at an earlier epoch, or
    /// at this one below `before_launch`, run the previous spec.
    pub before_epoch: u64,
    /// The first launch number at `before_epoch` that runs the new spec.
    pub before_launch: u64,
}

impl Rollout {
    /// Whether `executor` (an id the leader made, `…#<slot>#<epoch>.<launch>`)
    /// was launched before the update, so runs the previous spec. An id of
    /// another shape is taken as old (it can only predate this layout).
    pub fn predates(&self, executor: &crate::ids::ExecutorId) -> bool {
        match executor.launched() {
            Some(at) => at < (self.before_epoch, self.before_launch),
            None => true,
        }
    }
}

/// Where one slot of a group with a restart policy stands: how often its
/// executors ended in a row without running healthily, and until when the
/// next one waits. Durable, so a new leader keeps the wait instead of
/// relaunching at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRestart {
    /// Ends in a row that count against the policy (reset once an executor
    /// ran for its `healthy_after`).
    pub failures: u32,
    /// Wall-clock ms since the Unix epoch (the leader's clock term, like a
    /// drain's deadline) before which the slot gets no new executor; 0:
    /// none.
    pub not_before_ms: u64,
}

impl GroupRecord {
    /// Whether the record holds nothing the first group layout lacks (so a
    /// framework record of such groups is written as earlier builds wrote
    /// it, byte for byte): the default policy and no restart state.
    pub fn fits_v1(&self) -> bool {
        self.spec.policy.is_default() && self.fits_v2()
    }

    /// Whether the record holds nothing the second group layout (variant 8,
    /// a policy) lacks: no restart state, the default launch options.
    pub fn fits_v2(&self) -> bool {
        self.restarts.is_empty() && self.fits_v3()
    }

    /// Whether the record holds nothing the third group layout (variant 9,
    /// restart state) lacks: the default [`crate::launch::LaunchSpec`].
    pub fn fits_v3(&self) -> bool {
        self.spec.launch.is_default() && self.fits_v4()
    }

    /// Whether the record holds nothing the fourth group layout (variant
    /// 10, launch options) lacks: no named ports.
    pub fn fits_v4(&self) -> bool {
        self.spec.launch.ports.is_empty() && self.fits_v5()
    }

    /// Whether the record holds nothing the fifth group layout (variant
    /// 11, named ports) lacks: no rollout under way
    /// ([`GroupRecord::as_rollout`]).
    pub fn fits_v5(&self) -> bool {
        self.as_rollout() == Some(None) && self.fits_v6()
    }

    /// Whether the record holds nothing the sixth group layout (variant
    /// 12, a rollout) lacks: no user to run as.
    pub fn fits_v6(&self) -> bool {
        self.spec.launch.user.is_none() && self.fits_v7()
    }

    /// Whether the record holds nothing the seventh group layout (variant
    /// 13, a user) lacks: no named resources, no output rotation of its
    /// own.
    pub fn fits_v7(&self) -> bool {
        self.spec.launch.resources.is_empty() && self.spec.launch.logs.is_none() && self.fits_v8()
    }

    /// Whether the record holds nothing the eighth group layout (variant
    /// 14, named resources) lacks: no counted ends.
    pub fn fits_v8(&self) -> bool {
        self.counted.is_empty() && self.replacing.is_empty() && self.fits_v9()
    }

    /// Whether the record holds nothing the ninth group layout (counted
    /// ends and refills; variants 17, 18 and 20) lacks: the default
    /// priority ([`crate::policy::DEFAULT_PRIORITY`]); a framework with a
    /// group of another priority is variant 21.
    pub fn fits_v9(&self) -> bool {
        self.spec.policy.priority == crate::policy::DEFAULT_PRIORITY && self.fits_v10()
    }

    /// Whether the record holds nothing the tenth group layout (a priority;
    /// variant 21) lacks: no disconnect rule
    /// ([`crate::launch::LaunchSpec::disconnect`]); a framework with a
    /// singleton group is variant 22 (docs/design.md#issue-45).
    pub fn fits_v10(&self) -> bool {
        self.spec.launch.disconnect.is_none() && self.fits_v11()
    }

    /// Whether the record holds nothing the eleventh group layout (a
    /// disconnect rule; variant 22) lacks: no health checks
    /// ([`crate::launch::LaunchSpec::checks`]); a framework with a checked
    /// group is variant 23 (docs/design.md#issue-45).
    pub fn fits_v11(&self) -> bool {
        self.spec.launch.checks.is_empty() && self.fits_v12()
    }

    /// Whether the record holds nothing the twelfth group layout (health
    /// checks; variant 23) lacks: no update policy, and no deployment but
    /// one read from a rollout of an earlier layout
    /// ([`GroupRecord::as_rollout`]); a framework with a deployed group is
    /// variant 24 (docs/design.md#issue-45).
    pub fn fits_v12(&self) -> bool {
        self.spec.policy.update.is_none() && self.as_rollout().is_some() && self.fits_v13()
    }

    /// Whether the record holds nothing the thirteenth group layout (a
    /// deployment and eras; variant 24) lacks: no preempted slot
    /// ([`GroupRecord::preempted`]); a framework with one is variant 25
    /// (docs/design.md#issue-44).
    pub fn fits_v13(&self) -> bool {
        self.preempted.is_empty()
    }

    /// Takes on `rollout`, as a group record of an earlier layout stored it:
    /// a rolling [`Deployment`] gated on nothing (`min_healthy_time` 0) with
    /// nothing to revert to, whose eras tell the executors launched before
    /// it (of no known spec) from those after (of the current spec).
    pub fn adopt_rollout(&mut self, rollout: Rollout) {
        let target = spec_digest(&self.spec);
        let policy = crate::policy::UpdatePolicy {
            max_parallel: rollout.max_parallel.max(1),
            min_healthy_time_ms: 0,
            ..Default::default()
        };
        self.eras = vec![
            Era { from_epoch: 0, from_launch: 0, digest: UNKNOWN_DIGEST },
            Era {
                from_epoch: rollout.before_epoch,
                from_launch: rollout.before_launch,
                digest: target,
            },
        ];
        self.deployment = Some(Deployment {
            seq: 1,
            target,
            policy,
            state: DeploymentState::Rolling,
            revert_to: None,
            revert_of: None,
            started_ms: 0,
            progress_ms: 0,
            healthy: Default::default(),
            ends: Default::default(),
        });
    }

    /// What layouts 6 to 11 store of the group's deployment: `Some(None)`
    /// for none, `Some(Some(rollout))` for exactly what
    /// [`GroupRecord::adopt_rollout`] makes of one (so it is written as
    /// those layouts wrote it, byte for byte), `None` for anything more.
    pub fn as_rollout(&self) -> Option<Option<Rollout>> {
        let Some(d) = &self.deployment else {
            return self.eras.is_empty().then_some(None);
        };
        let [first, era] = self.eras.as_slice() else { return None };
        let rollout = Rollout {
            max_parallel: d.policy.max_parallel,
            before_epoch: era.from_epoch,
            before_launch: era.from_launch,
        };
        let mut adopted = self.clone();
        adopted.adopt_rollout(rollout);
        let same = *first == Era { from_epoch: 0, from_launch: 0, digest: UNKNOWN_DIGEST }
            && adopted.deployment.as_ref() == Some(d)
            && adopted.eras == self.eras;
        same.then_some(Some(rollout))
    }

    /// The digest of the spec `executor` of this group runs: that of the
    /// newest era it was launched in, [`UNKNOWN_DIGEST`] before every era
    /// (or for an id of another shape while the group keeps eras), the
    /// current spec's when the group keeps none.
    pub fn digest_of(&self, executor: &ExecutorId) -> u32 {
        if self.eras.is_empty() {
            return spec_digest(&self.spec);
        }
        let Some(at) = executor.launched() else { return UNKNOWN_DIGEST };
        self.eras
            .iter()
            .rev()
            .find(|e| (e.from_epoch, e.from_launch) <= at)
            .map_or(UNKNOWN_DIGEST, |e| e.digest)
    }

    /// The deployment under way, if one is.
    pub fn active_deployment(&self) -> Option<&Deployment> {
        self.deployment.as_ref().filter(|d| d.state.is_active())
    }
}

/// What became of a slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SlotOutcome {
    /// Still wants (or has) a running executor.
    Pending,
    /// Its latest executor exited 0.
    Done {
        /// That executor.
        executor: ExecutorId,
    },
    /// Its executor was killed on the framework's request; not refilled.
    Killed {
        /// That executor.
        executor: ExecutorId,
    },
    /// The group's retry budget ran out on this slot.
    Failed {
        /// The executor whose failure used up the budget.
        executor: ExecutorId,
        /// Its failure.
        reason: String,
    },
    /// An operator's scale removed this slot's executor by name
    /// (`ScaleGroup { remove }`, `regent scale --remove`): the slot is not
    /// refilled and does not count toward the group's count (a hole: the
    /// executors of the other slots keep their slots and ids); a later
    /// scale up refills it first. Appended: records without one keep their
    /// bytes.
    Removed {
        /// That executor.
        executor: ExecutorId,
    },
}

impl SlotOutcome {
    /// The executor a finished slot ended with, and how, as a subscriber
    /// sees it; `None` while the slot is pending.
    pub fn finished(&self) -> Option<(ExecutorId, ExecutorState)> {
        match self {
            SlotOutcome::Pending => None,
            SlotOutcome::Done { executor } => {
                Some((executor.clone(), ExecutorState::Exited { code: 0 }))
            }
            SlotOutcome::Killed { executor } | SlotOutcome::Removed { executor } => {
                Some((executor.clone(), ExecutorState::Killed))
            }
            SlotOutcome::Failed { executor, reason } => {
                Some((executor.clone(), ExecutorState::Failed { reason: reason.clone() }))
            }
        }
    }
}

/// A finished framework kept in the history (see [`crate::protocol::FinishedFramework`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryRecord {
    /// Its place in the history: each leader numbers the frameworks it
    /// finishes after the highest number in the store, so a larger number
    /// is a newer entry, and the oldest are deleted first.
    pub seq: u64,
    /// The CRC32C of the postcard encoding of the framework record this
    /// entry replaced: a framework record still in the store with this
    /// digest is a leftover of a crash before its delete (see
    /// `master::history`).
    pub framework_digest: u32,
    /// The framework as it ended.
    pub framework: FinishedFramework,
}

/// One durable record.
///
/// Encoded through [`wire::Record`]: a worker record without a callback
/// address keeps the layout of the first format (so those images are
/// byte-for-byte what earlier builds wrote and read), one with a callback
/// address uses a variant appended after it; likewise a framework record
/// without a registration time keeps the layout of the format before it,
/// and one whose groups all [`GroupRecord::fits_v1`] the group layout
/// before policies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "wire::Record", into = "wire::Record")]
pub enum Record {
    /// The epoch of the latest leadership.
    Epoch(Epoch),
    /// A worker.
    Worker(WorkerRecord),
    /// A framework.
    Framework(FrameworkRecord),
    /// A finished framework (appended: older images are unchanged).
    History(HistoryRecord),
    /// The revoked tokens and retired key ids (docs/security.md; appended:
    /// older images are unchanged).
    Revocations(crate::token::Revocations),
    /// A tenant an operator set (appended: older images are unchanged;
    /// docs/tenants.md).
    Tenant(crate::protocol::tenants::Tenant),
}

impl Record {
    /// The key this record is stored under.
    pub fn key(&self) -> RecordKey {
        match self {
            Record::Epoch(_) => RecordKey::Epoch,
            Record::Worker(w) => RecordKey::Worker(w.id.clone()),
            Record::Framework(f) => RecordKey::Framework(f.id.clone()),
            Record::History(h) => RecordKey::History(h.seq),
            Record::Revocations(_) => RecordKey::Revocations,
            Record::Tenant(t) => RecordKey::Tenant(t.name.clone()),
        }
    }
}

/// The encoded shape of [`Record`] (see there): variants are only ever
/// appended.
mod wire {
    use super::{FrameworkRecord, GroupRecord, HistoryRecord, SlotOutcome, WorkerRecord};
    use crate::ids::{Addr, Epoch, FrameworkId, Incarnation, WorkerId};
    use crate::protocol::GroupSpec;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize)]
    pub enum Record {
        Epoch(Epoch),
        Worker(WorkerV1),
        Framework(FrameworkV1),
        WorkerWithCallback(WorkerV2),
        FrameworkWithCallback(FrameworkV2),
        History(HistoryV1),
        FrameworkWithRegistration(FrameworkV3),
        /// A worker under an operator's cordon or drain (appended: workers
        /// without one keep the earlier layouts byte for byte).
        WorkerWithMaintenance(WorkerV3),
        /// A framework with a group whose record holds more than the first
        /// group layout ([`GroupRecord::fits_v1`]): a policy (appended:
        /// frameworks without one keep the earlier layouts byte for byte).
        FrameworkWithPolicies(FrameworkV4),
        /// A framework with a group whose slots have restart state
        /// ([`GroupRecord::fits_v2`]; appended: frameworks without one keep
        /// the earlier layouts byte for byte).
        FrameworkWithRestarts(FrameworkV5),
        /// A framework with a group that has launch options
        /// ([`GroupRecord::fits_v3`]: a working directory, a kill grace,
        /// artifacts; appended: frameworks without one keep the earlier
        /// layouts byte for byte).
        FrameworkWithLaunch(FrameworkV6),
        /// A framework with a group that names ports
        /// ([`GroupRecord::fits_v4`]; appended: frameworks without one keep
        /// the earlier layouts byte for byte).
        FrameworkWithPorts(FrameworkV7),
        /// A framework with a group whose executors are being replaced
        /// after an update ([`GroupRecord::fits_v5`]; appended: frameworks
        /// without one keep the earlier layouts byte for byte).
        FrameworkWithRollout(FrameworkV8),
        /// A framework with a group that names a user to run as
        /// ([`GroupRecord::fits_v6`]; appended: frameworks without one
        /// keep the earlier layouts byte for byte).
        FrameworkWithUser(FrameworkV9),
        /// A framework with a group that asks for named resources or
        /// rotates its output its own way ([`GroupRecord::fits_v7`];
        /// appended: frameworks without one keep the earlier layouts byte
        /// for byte).
        FrameworkWithResources(FrameworkV10),
        /// A worker declared DEAD whose record is kept for its maintenance
        /// ([`WorkerRecord::dead`]; appended: live workers keep the
        /// earlier layouts byte for byte).
        WorkerDead(WorkerRecord),
        /// A framework with a group whose slots have counted ends
        /// ([`GroupRecord::fits_v8`]; appended: frameworks without one
        /// keep the earlier layouts byte for byte).
        FrameworkWithCountedEnds(FrameworkV11),
        /// A job the leader owns ([`FrameworkRecord::job`]; appended:
        /// frameworks a subscriber drives keep the earlier layouts byte
        /// for byte).
        FrameworkWithJob(FrameworkV12),
        /// The revoked tokens and retired key ids (appended: a store
        /// without revocations has no such record).
        Revocations(crate::token::Revocations),
        /// A tenant an operator set (appended: docs/tenants.md).
        Tenant(crate::protocol::tenants::Tenant),
        /// A framework of a named tenant ([`FrameworkRecord::tenant`];
        /// appended: frameworks of `default` keep the earlier layouts byte
        /// for byte).
        FrameworkWithTenant(FrameworkV13),
        /// A framework with a group of a priority other than the default
        /// ([`GroupRecord::fits_v9`]; appended: frameworks without one keep
        /// the earlier layouts byte for byte; docs/design.md#issue-44).
        FrameworkWithPriority(FrameworkV14),
        /// A framework with a singleton group, one with a disconnect rule
        /// ([`GroupRecord::fits_v10`]; appended: frameworks without one
        /// keep the earlier layouts byte for byte; docs/design.md#issue-45).
        FrameworkWithDisconnect(FrameworkV15),
        /// A framework with a group that has health checks
        /// ([`GroupRecord::fits_v11`]; appended: frameworks without one
        /// keep the earlier layouts byte for byte; docs/design.md#issue-45).
        FrameworkWithChecks(FrameworkV16),
        /// A framework with a group that has an update policy, a deployment
        /// or eras ([`GroupRecord::fits_v12`]; appended: frameworks without
        /// one keep the earlier layouts byte for byte;
        /// docs/design.md#issue-45).
        FrameworkWithDeployment(FrameworkV17),
        /// A framework with a group whose slot's executor a preemption
        /// stopped ([`GroupRecord::fits_v13`]; appended: frameworks without
        /// one keep the earlier layouts byte for byte;
        /// docs/design.md#issue-44).
        FrameworkWithPreemption(FrameworkRecord),
        /// A finished framework with a slot whose last end was a
        /// preemption ([`crate::protocol::FinishedSlot::preempted_by`];
        /// appended: history records without one keep variant 5's layout
        /// byte for byte; docs/design.md#issue-44).
        HistoryWithPreemption(HistoryRecord),
    }

    /// A group record of the thirteenth layout: a deployment and eras, no
    /// preempted slots.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV13 {
        spec: GroupSpec,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
        deployment: Option<super::Deployment>,
        counted: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
        replacing: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
        eras: Vec<super::Era>,
    }

    impl From<GroupV13> for GroupRecord {
        fn from(g: GroupV13) -> Self {
            let GroupV13 {
                spec,
                slots,
                retries_used,
                restarts,
                deployment,
                counted,
                replacing,
                eras,
            } = g;
            GroupRecord {
                spec,
                slots,
                retries_used,
                restarts,
                deployment,
                counted,
                replacing,
                eras,
                preempted: Default::default(),
            }
        }
    }

    impl From<GroupRecord> for GroupV13 {
        /// Drops the preempted slots: only called for records that
        /// [`GroupRecord::fits_v13`].
        fn from(g: GroupRecord) -> Self {
            let GroupRecord {
                spec,
                slots,
                retries_used,
                restarts,
                deployment,
                counted,
                replacing,
                eras,
                ..
            } = g;
            GroupV13 { spec, slots, retries_used, restarts, deployment, counted, replacing, eras }
        }
    }

    /// A framework record of the seventeenth format: groups of the
    /// thirteenth layout (a deployment, no preempted slots).
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FrameworkV17 {
        id: FrameworkId,
        name: String,
        failover_timeout_ms: u64,
        groups: Vec<GroupV13>,
        callback: Option<Addr>,
        registered_at_ms: Option<u64>,
        job: Option<super::JobRecord>,
        tenant: Option<String>,
    }

    impl From<FrameworkV17> for FrameworkRecord {
        fn from(f: FrameworkV17) -> Self {
            FrameworkRecord {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(GroupRecord::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
                job: f.job,
                tenant: f.tenant,
            }
        }
    }

    impl From<FrameworkRecord> for FrameworkV17 {
        /// Only called for records whose groups all
        /// [`GroupRecord::fits_v13`].
        fn from(f: FrameworkRecord) -> Self {
            FrameworkV17 {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(GroupV13::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
                job: f.job,
                tenant: f.tenant,
            }
        }
    }

    /// A finished slot of the first history layout: no preemptor.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FinishedSlotV1 {
        group: String,
        slot: u32,
        executor: Option<crate::ids::ExecutorId>,
        state: Option<crate::protocol::ExecutorState>,
        attempts: u32,
    }

    /// A finished framework of the first history layout.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FinishedFrameworkV1 {
        id: FrameworkId,
        name: String,
        outcome: crate::protocol::FrameworkOutcome,
        finished_at_ms: u64,
        registered_at_ms: Option<u64>,
        slots: Vec<FinishedSlotV1>,
        slots_omitted: u32,
    }

    /// A history record of the first layout (variant 5): no slot says it
    /// was preempted.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct HistoryV1 {
        seq: u64,
        framework_digest: u32,
        framework: FinishedFrameworkV1,
    }

    impl From<HistoryV1> for HistoryRecord {
        fn from(h: HistoryV1) -> Self {
            let HistoryV1 { seq, framework_digest, framework: f } = h;
            let slots = f
                .slots
                .into_iter()
                .map(|s| crate::protocol::FinishedSlot {
                    group: s.group,
                    slot: s.slot,
                    executor: s.executor,
                    state: s.state,
                    attempts: s.attempts,
                    preempted_by: None,
                })
                .collect();
            let framework = crate::protocol::FinishedFramework {
                id: f.id,
                name: f.name,
                outcome: f.outcome,
                finished_at_ms: f.finished_at_ms,
                registered_at_ms: f.registered_at_ms,
                slots,
                slots_omitted: f.slots_omitted,
            };
            HistoryRecord { seq, framework_digest, framework }
        }
    }

    impl From<HistoryRecord> for HistoryV1 {
        /// Drops the preemptors: only called for records without one.
        fn from(h: HistoryRecord) -> Self {
            let HistoryRecord { seq, framework_digest, framework: f } = h;
            let slots = f
                .slots
                .into_iter()
                .map(|s| FinishedSlotV1 {
                    group: s.group,
                    slot: s.slot,
                    executor: s.executor,
                    state: s.state,
                    attempts: s.attempts,
                })
                .collect();
            let framework = FinishedFrameworkV1 {
                id: f.id,
                name: f.name,
                outcome: f.outcome,
                finished_at_ms: f.finished_at_ms,
                registered_at_ms: f.registered_at_ms,
                slots,
                slots_omitted: f.slots_omitted,
            };
            HistoryV1 { seq, framework_digest, framework }
        }
    }

    /// A group's launch options of the fifth layout: a disconnect rule, no
    /// health checks.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct LaunchSpecV5 {
        v4: LaunchSpecV4,
        disconnect: Option<crate::launch::Disconnect>,
    }

    impl From<LaunchSpecV5> for crate::launch::LaunchSpec {
        fn from(l: LaunchSpecV5) -> Self {
            crate::launch::LaunchSpec { disconnect: l.disconnect, ..l.v4.into() }
        }
    }

    impl From<crate::launch::LaunchSpec> for LaunchSpecV5 {
        /// Drops the checks: only called for groups that
        /// [`GroupRecord::fits_v11`].
        fn from(l: crate::launch::LaunchSpec) -> Self {
            let disconnect = l.disconnect;
            LaunchSpecV5 { v4: l.into(), disconnect }
        }
    }

    /// A live group record from the fields of an earlier layout: a rollout
    /// it was under becomes a rolling [`super::Deployment`] gated on nothing
    /// (`min_healthy_time` 0) with nothing to revert to, whose eras tell the
    /// executors launched before it (of no known spec) from those after.
    fn group_of(
        spec: GroupSpec,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
        rollout: Option<super::Rollout>,
        counted: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
        replacing: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
    ) -> GroupRecord {
        let mut g = GroupRecord {
            spec,
            slots,
            retries_used,
            restarts,
            deployment: None,
            counted,
            replacing,
            eras: Vec::new(),
            preempted: Default::default(),
        };
        if let Some(r) = rollout {
            g.adopt_rollout(r);
        }
        g
    }

    /// A group policy of the second layout: a priority, no update policy
    /// (every group of an earlier layout has the defaults).
    #[derive(Debug, Serialize, Deserialize)]
    pub struct PolicyV2 {
        restart: crate::policy::RestartPolicy,
        placement: Option<crate::policy::Placement>,
        constraints: Vec<crate::policy::Constraint>,
        spread: Option<String>,
        priority: u8,
    }

    impl From<PolicyV2> for crate::policy::GroupPolicy {
        fn from(p: PolicyV2) -> Self {
            let PolicyV2 { restart, placement, constraints, spread, priority } = p;
            let update = None;
            crate::policy::GroupPolicy { restart, placement, constraints, spread, priority, update }
        }
    }

    impl From<crate::policy::GroupPolicy> for PolicyV2 {
        /// Drops the update policy: only called for groups that
        /// [`GroupRecord::fits_v11`].
        fn from(p: crate::policy::GroupPolicy) -> Self {
            let crate::policy::GroupPolicy {
                restart,
                placement,
                constraints,
                spread,
                priority,
                ..
            } = p;
            PolicyV2 { restart, placement, constraints, spread, priority }
        }
    }

    /// A group's declaration in the eighth layout: a disconnect rule, no
    /// health checks, a policy without an update policy.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupSpecV8 {
        group: String,
        slots: u32,
        command: Vec<String>,
        env: Vec<(String, String)>,
        cores: u32,
        memory_mb: u64,
        policy: PolicyV2,
        launch: Box<LaunchSpecV5>,
    }

    impl From<GroupSpecV8> for GroupSpec {
        fn from(s: GroupSpecV8) -> Self {
            let GroupSpecV8 { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let launch = Box::new((*launch).into());
            let policy = policy.into();
            GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch }
        }
    }

    impl From<GroupSpec> for GroupSpecV8 {
        /// Drops the checks and the update policy: only called for specs
        /// without either.
        fn from(s: GroupSpec) -> Self {
            let GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let launch = Box::new((*launch).into());
            let policy = policy.into();
            GroupSpecV8 { group, slots, command, env, cores, memory_mb, policy, launch }
        }
    }

    /// A group record of the eleventh layout: a disconnect rule and a
    /// rollout, no health checks, update policy, deployment or eras.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV11 {
        spec: GroupSpecV8,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
        rollout: Option<super::Rollout>,
        counted: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
        replacing: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
    }

    impl From<GroupV11> for GroupRecord {
        fn from(g: GroupV11) -> Self {
            let GroupV11 { spec, slots, retries_used, restarts, rollout, counted, replacing } = g;
            group_of(spec.into(), slots, retries_used, restarts, rollout, counted, replacing)
        }
    }

    impl From<GroupRecord> for GroupV11 {
        /// Drops the checks and the update policy: only called for records that
        /// [`GroupRecord::fits_v11`] (so with no deployment).
        fn from(g: GroupRecord) -> Self {
            let g_rollout = g.as_rollout().flatten();
            let GroupRecord { spec, slots, retries_used, restarts, counted, replacing, .. } = g;
            let spec = spec.into();
            GroupV11 { spec, slots, retries_used, restarts, rollout: g_rollout, counted, replacing }
        }
    }

    /// A framework record of the fifteenth format: groups of the eleventh
    /// layout (a disconnect rule, no health checks, no deployment).
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FrameworkV15 {
        id: FrameworkId,
        name: String,
        failover_timeout_ms: u64,
        groups: Vec<GroupV11>,
        callback: Option<Addr>,
        registered_at_ms: Option<u64>,
        job: Option<super::JobRecord>,
        tenant: Option<String>,
    }

    impl From<FrameworkV15> for FrameworkRecord {
        fn from(f: FrameworkV15) -> Self {
            FrameworkRecord {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(GroupRecord::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
                job: f.job,
                tenant: f.tenant,
            }
        }
    }

    impl From<FrameworkRecord> for FrameworkV15 {
        /// Only called for records whose groups all
        /// [`GroupRecord::fits_v11`].
        fn from(f: FrameworkRecord) -> Self {
            FrameworkV15 {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(GroupV11::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
                job: f.job,
                tenant: f.tenant,
            }
        }
    }

    /// A group's declaration in the ninth layout: health checks, a policy
    /// without an update policy.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupSpecV9 {
        group: String,
        slots: u32,
        command: Vec<String>,
        env: Vec<(String, String)>,
        cores: u32,
        memory_mb: u64,
        policy: PolicyV2,
        launch: Box<crate::launch::LaunchSpec>,
    }

    impl From<GroupSpecV9> for GroupSpec {
        fn from(s: GroupSpecV9) -> Self {
            let GroupSpecV9 { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let policy = policy.into();
            GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch }
        }
    }

    impl From<GroupSpec> for GroupSpecV9 {
        /// Drops the update policy: only called for specs without one.
        fn from(s: GroupSpec) -> Self {
            let GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let policy = policy.into();
            GroupSpecV9 { group, slots, command, env, cores, memory_mb, policy, launch }
        }
    }

    /// A group record of the twelfth layout: health checks and a rollout,
    /// no update policy, deployment or eras.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV12 {
        spec: GroupSpecV9,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
        rollout: Option<super::Rollout>,
        counted: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
        replacing: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
    }

    impl From<GroupV12> for GroupRecord {
        fn from(g: GroupV12) -> Self {
            let GroupV12 { spec, slots, retries_used, restarts, rollout, counted, replacing } = g;
            group_of(spec.into(), slots, retries_used, restarts, rollout, counted, replacing)
        }
    }

    impl From<GroupRecord> for GroupV12 {
        /// Drops the update policy: only called for records that
        /// [`GroupRecord::fits_v12`] (so with no deployment but a rollout's).
        fn from(g: GroupRecord) -> Self {
            let rollout = g.as_rollout().flatten();
            let GroupRecord { spec, slots, retries_used, restarts, counted, replacing, .. } = g;
            let spec = spec.into();
            GroupV12 { spec, slots, retries_used, restarts, rollout, counted, replacing }
        }
    }

    /// A framework record of the sixteenth format: groups of the twelfth
    /// layout (health checks, no deployment).
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FrameworkV16 {
        id: FrameworkId,
        name: String,
        failover_timeout_ms: u64,
        groups: Vec<GroupV12>,
        callback: Option<Addr>,
        registered_at_ms: Option<u64>,
        job: Option<super::JobRecord>,
        tenant: Option<String>,
    }

    impl From<FrameworkV16> for FrameworkRecord {
        fn from(f: FrameworkV16) -> Self {
            FrameworkRecord {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(GroupRecord::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
                job: f.job,
                tenant: f.tenant,
            }
        }
    }

    impl From<FrameworkRecord> for FrameworkV16 {
        /// Only called for records whose groups all
        /// [`GroupRecord::fits_v12`].
        fn from(f: FrameworkRecord) -> Self {
            FrameworkV16 {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(GroupV12::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
                job: f.job,
                tenant: f.tenant,
            }
        }
    }

    /// A group's launch options of the fourth layout: no disconnect rule
    /// (every group of an earlier layout runs on through a partition).
    #[derive(Debug, Serialize, Deserialize)]
    pub struct LaunchSpecV4 {
        cwd: Option<String>,
        kill_grace_ms: Option<u64>,
        artifacts: Vec<crate::launch::Artifact>,
        ports: Vec<String>,
        user: Option<String>,
        resources: Vec<(String, u32)>,
        logs: Option<crate::launch::LogRotation>,
    }

    impl From<LaunchSpecV4> for crate::launch::LaunchSpec {
        fn from(l: LaunchSpecV4) -> Self {
            let LaunchSpecV4 { cwd, kill_grace_ms, artifacts, ports, user, resources, logs } = l;
            crate::launch::LaunchSpec {
                cwd,
                kill_grace_ms,
                artifacts,
                ports,
                user,
                resources,
                logs,
                disconnect: None,
                checks: Vec::new(),
            }
        }
    }

    impl From<crate::launch::LaunchSpec> for LaunchSpecV4 {
        /// Drops the disconnect rule: only called for groups that
        /// [`GroupRecord::fits_v10`].
        fn from(l: crate::launch::LaunchSpec) -> Self {
            let crate::launch::LaunchSpec {
                cwd,
                kill_grace_ms,
                artifacts,
                ports,
                user,
                resources,
                logs,
                ..
            } = l;
            LaunchSpecV4 { cwd, kill_grace_ms, artifacts, ports, user, resources, logs }
        }
    }

    /// A group's declaration in the seventh layout: a priority, launch
    /// options without a disconnect rule.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupSpecV7 {
        group: String,
        slots: u32,
        command: Vec<String>,
        env: Vec<(String, String)>,
        cores: u32,
        memory_mb: u64,
        policy: PolicyV2,
        launch: Box<LaunchSpecV4>,
    }

    impl From<GroupSpecV7> for GroupSpec {
        fn from(s: GroupSpecV7) -> Self {
            let GroupSpecV7 { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let policy = policy.into();
            let launch = Box::new((*launch).into());
            GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch }
        }
    }

    impl From<GroupSpec> for GroupSpecV7 {
        /// Drops the disconnect rule: only called for specs without one.
        fn from(s: GroupSpec) -> Self {
            let GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let policy = policy.into();
            let launch = Box::new((*launch).into());
            GroupSpecV7 { group, slots, command, env, cores, memory_mb, policy, launch }
        }
    }

    /// A group record of the tenth layout: a priority, no disconnect rule.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV10 {
        spec: GroupSpecV7,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
        rollout: Option<super::Rollout>,
        counted: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
        replacing: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
    }

    impl From<GroupV10> for GroupRecord {
        fn from(g: GroupV10) -> Self {
            let GroupV10 { spec, slots, retries_used, restarts, rollout, counted, replacing } = g;
            group_of(spec.into(), slots, retries_used, restarts, rollout, counted, replacing)
        }
    }

    impl From<GroupRecord> for GroupV10 {
        /// Drops the disconnect rule: only called for records that
        /// [`GroupRecord::fits_v10`].
        fn from(g: GroupRecord) -> Self {
            let g_rollout = g.as_rollout().flatten();
            let GroupRecord { spec, slots, retries_used, restarts, counted, replacing, .. } = g;
            let spec = spec.into();
            GroupV10 { spec, slots, retries_used, restarts, rollout: g_rollout, counted, replacing }
        }
    }

    /// A framework record of the fourteenth format: groups of the tenth
    /// layout (a priority, no disconnect rule).
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FrameworkV14 {
        id: FrameworkId,
        name: String,
        failover_timeout_ms: u64,
        groups: Vec<GroupV10>,
        callback: Option<Addr>,
        registered_at_ms: Option<u64>,
        job: Option<super::JobRecord>,
        tenant: Option<String>,
    }

    impl From<FrameworkV14> for FrameworkRecord {
        fn from(f: FrameworkV14) -> Self {
            FrameworkRecord {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(GroupRecord::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
                job: f.job,
                tenant: f.tenant,
            }
        }
    }

    impl From<FrameworkRecord> for FrameworkV14 {
        /// Only called for records whose groups all
        /// [`GroupRecord::fits_v10`].
        fn from(f: FrameworkRecord) -> Self {
            FrameworkV14 {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(GroupV10::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
                job: f.job,
                tenant: f.tenant,
            }
        }
    }

    /// A group policy of the first layout: no priority (every group of an
    /// earlier layout has [`crate::policy::DEFAULT_PRIORITY`]).
    #[derive(Debug, Serialize, Deserialize)]
    pub struct PolicyV1 {
        restart: crate::policy::RestartPolicy,
        placement: Option<crate::policy::Placement>,
        constraints: Vec<crate::policy::Constraint>,
        spread: Option<String>,
    }

    impl From<PolicyV1> for crate::policy::GroupPolicy {
        fn from(PolicyV1 { restart, placement, constraints, spread }: PolicyV1) -> Self {
            crate::policy::GroupPolicy {
                restart,
                placement,
                constraints,
                spread,
                priority: crate::policy::DEFAULT_PRIORITY,
                update: None,
            }
        }
    }

    impl From<crate::policy::GroupPolicy> for PolicyV1 {
        /// Drops the priority: only called for groups that
        /// [`GroupRecord::fits_v9`].
        fn from(p: crate::policy::GroupPolicy) -> Self {
            let crate::policy::GroupPolicy { restart, placement, constraints, spread, .. } = p;
            PolicyV1 { restart, placement, constraints, spread }
        }
    }

    /// A group's declaration in the sixth layout: named resources and
    /// output rotation, a policy without a priority.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupSpecV6 {
        group: String,
        slots: u32,
        command: Vec<String>,
        env: Vec<(String, String)>,
        cores: u32,
        memory_mb: u64,
        policy: PolicyV1,
        launch: Box<LaunchSpecV4>,
    }

    impl From<GroupSpecV6> for GroupSpec {
        fn from(s: GroupSpecV6) -> Self {
            let GroupSpecV6 { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let policy = policy.into();
            let launch = Box::new((*launch).into());
            GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch }
        }
    }

    impl From<GroupSpec> for GroupSpecV6 {
        /// Drops the priority and the disconnect rule: only called for
        /// specs of the default priority without one.
        fn from(s: GroupSpec) -> Self {
            let GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let policy = policy.into();
            let launch = Box::new((*launch).into());
            GroupSpecV6 { group, slots, command, env, cores, memory_mb, policy, launch }
        }
    }

    /// A group record of the ninth layout: counted ends and operator
    /// refills, a policy without a priority.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV9 {
        spec: GroupSpecV6,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
        rollout: Option<super::Rollout>,
        counted: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
        replacing: std::collections::BTreeMap<u32, crate::ids::ExecutorId>,
    }

    impl From<GroupV9> for GroupRecord {
        fn from(g: GroupV9) -> Self {
            let GroupV9 { spec, slots, retries_used, restarts, rollout, counted, replacing } = g;
            group_of(spec.into(), slots, retries_used, restarts, rollout, counted, replacing)
        }
    }

    impl From<GroupRecord> for GroupV9 {
        /// Drops the priority: only called for records that
        /// [`GroupRecord::fits_v9`].
        fn from(g: GroupRecord) -> Self {
            let g_rollout = g.as_rollout().flatten();
            let GroupRecord { spec, slots, retries_used, restarts, counted, replacing, .. } = g;
            let spec = spec.into();
            GroupV9 { spec, slots, retries_used, restarts, rollout: g_rollout, counted, replacing }
        }
    }

    /// A framework record of the thirteenth format: a tenant, groups of
    /// the ninth layout (no priority).
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FrameworkV13 {
        id: FrameworkId,
        name: String,
        failover_timeout_ms: u64,
        groups: Vec<GroupV9>,
        callback: Option<Addr>,
        registered_at_ms: Option<u64>,
        job: Option<super::JobRecord>,
        tenant: Option<String>,
    }

    impl From<FrameworkV13> for FrameworkRecord {
        fn from(f: FrameworkV13) -> Self {
            FrameworkRecord {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(GroupRecord::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
                job: f.job,
                tenant: f.tenant,
            }
        }
    }

    impl From<FrameworkRecord> for FrameworkV13 {
        /// Only called for records whose groups all
        /// [`GroupRecord::fits_v9`].
        fn from(f: FrameworkRecord) -> Self {
            FrameworkV13 {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(GroupV9::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
                job: f.job,
                tenant: f.tenant,
            }
        }
    }

    /// A framework record of the twelfth format: a job, no tenant.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FrameworkV12 {
        id: FrameworkId,
        name: String,
        failover_timeout_ms: u64,
        groups: Vec<GroupV9>,
        callback: Option<Addr>,
        registered_at_ms: Option<u64>,
        job: Option<super::JobRecord>,
    }

    impl From<FrameworkV12> for FrameworkRecord {
        fn from(f: FrameworkV12) -> Self {
            let FrameworkV12 {
                id,
                name,
                failover_timeout_ms,
                groups,
                callback,
                registered_at_ms,
                job,
            } = f;
            FrameworkRecord {
                id,
                name,
                failover_timeout_ms,
                groups: groups.into_iter().map(GroupRecord::from).collect(),
                callback,
                registered_at_ms,
                job,
                tenant: None,
            }
        }
    }

    impl From<FrameworkRecord> for FrameworkV12 {
        fn from(f: FrameworkRecord) -> Self {
            let FrameworkRecord {
                id,
                name,
                failover_timeout_ms,
                groups,
                callback,
                registered_at_ms,
                job,
                ..
            } = f;
            let groups = groups.into_iter().map(GroupV9::from).collect();
            FrameworkV12 { id, name, failover_timeout_ms, groups, callback, registered_at_ms, job }
        }
    }

    /// A framework record of the eleventh format: groups of the current
    /// layout, no job.
    pub type FrameworkV11 = FrameworkOf<GroupV9>;

    /// A worker record of the third layout: a cordon or drain, not DEAD.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct WorkerV3 {
        id: WorkerId,
        incarnation: Incarnation,
        cores: u32,
        memory_mb: u64,
        callback: Option<Addr>,
        maintenance: Option<super::Maintenance>,
    }

    impl From<WorkerV3> for WorkerRecord {
        fn from(w: WorkerV3) -> Self {
            let WorkerV3 { id, incarnation, cores, memory_mb, callback, maintenance } = w;
            WorkerRecord { id, incarnation, cores, memory_mb, callback, maintenance, dead: false }
        }
    }

    impl From<WorkerRecord> for WorkerV3 {
        /// Drops `dead`: only called for workers that are not.
        fn from(w: WorkerRecord) -> Self {
            let WorkerRecord { id, incarnation, cores, memory_mb, callback, maintenance, .. } = w;
            WorkerV3 { id, incarnation, cores, memory_mb, callback, maintenance }
        }
    }

    /// A framework record of the tenth format: groups of the eighth layout
    /// (named resources, no counted ends).
    pub type FrameworkV10 = FrameworkOf<GroupV8>;

    /// A group record of the eighth layout: named resources, no counted
    /// ends.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV8 {
        spec: GroupSpecV6,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
        rollout: Option<super::Rollout>,
    }

    impl From<GroupV8> for GroupRecord {
        fn from(GroupV8 { spec, slots, retries_used, restarts, rollout }: GroupV8) -> Self {
            let none = Default::default;
            group_of(spec.into(), slots, retries_used, restarts, rollout, none(), none())
        }
    }

    impl From<GroupRecord> for GroupV8 {
        /// Drops the counted ends: only called for records that
        /// [`GroupRecord::fits_v8`].
        fn from(g: GroupRecord) -> Self {
            let rollout = g.as_rollout().flatten();
            let GroupRecord { spec, slots, retries_used, restarts, .. } = g;
            GroupV8 { spec: spec.into(), slots, retries_used, restarts, rollout }
        }
    }

    /// A framework record of the ninth format: groups of the seventh
    /// layout (a user, no named resources).
    pub type FrameworkV9 = FrameworkOf<GroupV7>;

    /// A group record of the seventh layout: a user, no named resources.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV7 {
        spec: GroupSpecV5,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
        rollout: Option<super::Rollout>,
    }

    /// A group's declaration in the fifth layout: launch options with a
    /// user, no named resources.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupSpecV5 {
        group: String,
        slots: u32,
        command: Vec<String>,
        env: Vec<(String, String)>,
        cores: u32,
        memory_mb: u64,
        policy: PolicyV1,
        launch: LaunchSpecV3,
    }

    /// Launch options of the third layout: a user, no named resources.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct LaunchSpecV3 {
        cwd: Option<String>,
        kill_grace_ms: Option<u64>,
        artifacts: Vec<crate::launch::Artifact>,
        ports: Vec<String>,
        user: Option<String>,
    }

    impl From<GroupSpecV5> for GroupSpec {
        fn from(s: GroupSpecV5) -> Self {
            let GroupSpecV5 { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let LaunchSpecV3 { cwd, kill_grace_ms, artifacts, ports, user } = launch;
            let launch = crate::launch::LaunchSpec {
                cwd,
                kill_grace_ms,
                artifacts,
                ports,
                user,
                resources: Vec::new(),
                logs: None,
                disconnect: None,
                checks: Vec::new(),
            };
            GroupSpec {
                group,
                slots,
                command,
                env,
                cores,
                memory_mb,
                policy: policy.into(),
                launch: Box::new(launch),
            }
        }
    }

    impl From<GroupSpec> for GroupSpecV5 {
        /// Drops the named resources and the rotation: only called for
        /// specs without them.
        fn from(s: GroupSpec) -> Self {
            let GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let crate::launch::LaunchSpec { cwd, kill_grace_ms, artifacts, ports, user, .. } =
                *launch;
            let launch = LaunchSpecV3 { cwd, kill_grace_ms, artifacts, ports, user };
            GroupSpecV5 {
                group,
                slots,
                command,
                env,
                cores,
                memory_mb,
                policy: policy.into(),
                launch,
            }
        }
    }

    impl From<GroupV7> for GroupRecord {
        fn from(GroupV7 { spec, slots, retries_used, restarts, rollout }: GroupV7) -> Self {
            let none = Default::default;
            group_of(spec.into(), slots, retries_used, restarts, rollout, none(), none())
        }
    }

    impl From<GroupRecord> for GroupV7 {
        /// Drops the named resources: only called for records that
        /// [`GroupRecord::fits_v7`].
        fn from(g: GroupRecord) -> Self {
            GroupV7 {
                rollout: g.as_rollout().flatten(),
                spec: g.spec.into(),
                slots: g.slots,
                retries_used: g.retries_used,
                restarts: g.restarts,
            }
        }
    }

    /// A framework record of the eighth format: groups of the sixth layout
    /// (a rollout, no user).
    pub type FrameworkV8 = FrameworkOf<GroupV6>;

    /// A group record of the sixth layout: named ports and a rollout, no
    /// user.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV6 {
        spec: GroupSpecV4,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
        rollout: Option<super::Rollout>,
    }

    /// A group's declaration in the fourth layout: launch options with
    /// ports, no user.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupSpecV4 {
        group: String,
        slots: u32,
        command: Vec<String>,
        env: Vec<(String, String)>,
        cores: u32,
        memory_mb: u64,
        policy: PolicyV1,
        launch: LaunchSpecV2,
    }

    /// Launch options of the second layout: ports, no user.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct LaunchSpecV2 {
        cwd: Option<String>,
        kill_grace_ms: Option<u64>,
        artifacts: Vec<crate::launch::Artifact>,
        ports: Vec<String>,
    }

    impl From<GroupSpecV4> for GroupSpec {
        fn from(s: GroupSpecV4) -> Self {
            let GroupSpecV4 { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let LaunchSpecV2 { cwd, kill_grace_ms, artifacts, ports } = launch;
            let launch = crate::launch::LaunchSpec {
                logs: Default::default(),
                cwd,
                kill_grace_ms,
                artifacts,
                ports,
                user: None,
                resources: Vec::new(),
                disconnect: None,
                checks: Vec::new(),
            };
            GroupSpec {
                group,
                slots,
                command,
                env,
                cores,
                memory_mb,
                policy: policy.into(),
                launch: Box::new(launch),
            }
        }
    }

    impl From<GroupSpec> for GroupSpecV4 {
        /// Drops the user: only called for specs without one.
        fn from(s: GroupSpec) -> Self {
            let GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch } = s;
            let crate::launch::LaunchSpec { cwd, kill_grace_ms, artifacts, ports, .. } = *launch;
            let launch = LaunchSpecV2 { cwd, kill_grace_ms, artifacts, ports };
            GroupSpecV4 {
                group,
                slots,
                command,
                env,
                cores,
                memory_mb,
                policy: policy.into(),
                launch,
            }
        }
    }

    impl From<GroupV6> for GroupRecord {
        fn from(GroupV6 { spec, slots, retries_used, restarts, rollout }: GroupV6) -> Self {
            let none = Default::default;
            group_of(spec.into(), slots, retries_used, restarts, rollout, none(), none())
        }
    }

    impl From<GroupRecord> for GroupV6 {
        /// Drops the user: only called for records that
        /// [`GroupRecord::fits_v6`].
        fn from(g: GroupRecord) -> Self {
            GroupV6 {
                rollout: g.as_rollout().flatten(),
                spec: g.spec.into(),
                slots: g.slots,
                retries_used: g.retries_used,
                restarts: g.restarts,
            }
        }
    }

    /// A framework record of the seventh format: groups of the fifth
    /// layout (named ports, no rollout).
    pub type FrameworkV7 = FrameworkOf<GroupV5>;

    /// A group record of the fifth layout: named ports, no rollout.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV5 {
        spec: GroupSpecV4,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
    }

    impl From<GroupV5> for GroupRecord {
        fn from(GroupV5 { spec, slots, retries_used, restarts }: GroupV5) -> Self {
            GroupRecord {
                replacing: Default::default(),
                preempted: Default::default(),
                spec: spec.into(),
                slots,
                retries_used,
                restarts,
                deployment: None,
                counted: Default::default(),
                eras: Vec::new(),
            }
        }
    }

    impl From<GroupRecord> for GroupV5 {
        /// Drops the rollout: only called for records that
        /// [`GroupRecord::fits_v5`].
        fn from(g: GroupRecord) -> Self {
            GroupV5 {
                spec: g.spec.into(),
                slots: g.slots,
                retries_used: g.retries_used,
                restarts: g.restarts,
            }
        }
    }

    /// A framework record of the sixth format: groups of the fourth layout
    /// (launch options without ports).
    pub type FrameworkV6 = FrameworkOf<GroupV4>;

    /// A group record of the fourth layout: launch options without ports.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV4 {
        spec: GroupSpecV3,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
    }

    /// A group's declaration in the third layout: launch options without
    /// ports.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupSpecV3 {
        group: String,
        slots: u32,
        command: Vec<String>,
        env: Vec<(String, String)>,
        cores: u32,
        memory_mb: u64,
        policy: PolicyV1,
        launch: LaunchSpecV1,
    }

    /// Launch options of the first layout: no ports.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct LaunchSpecV1 {
        cwd: Option<String>,
        kill_grace_ms: Option<u64>,
        artifacts: Vec<crate::launch::Artifact>,
    }

    impl From<GroupV4> for GroupRecord {
        fn from(GroupV4 { spec, slots, retries_used, restarts }: GroupV4) -> Self {
            let GroupSpecV3 { group, slots: n, command, env, cores, memory_mb, policy, launch } =
                spec;
            let LaunchSpecV1 { cwd, kill_grace_ms, artifacts } = launch;
            let launch = crate::launch::LaunchSpec {
                logs: Default::default(),
                cwd,
                kill_grace_ms,
                artifacts,
                ports: vec![],
                user: None,
                resources: vec![],
                disconnect: None,
                checks: Vec::new(),
            };
            let spec = GroupSpec {
                group,
                slots: n,
                command,
                env,
                cores,
                memory_mb,
                policy: policy.into(),
                launch: Box::new(launch),
            };
            GroupRecord {
                replacing: Default::default(),
                preempted: Default::default(),
                spec,
                slots,
                retries_used,
                restarts,
                deployment: None,
                counted: Default::default(),
                eras: Vec::new(),
            }
        }
    }

    impl From<GroupRecord> for GroupV4 {
        /// Drops the ports: only called for records that
        /// [`GroupRecord::fits_v4`].
        fn from(g: GroupRecord) -> Self {
            let GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch } = g.spec;
            let crate::launch::LaunchSpec { cwd, kill_grace_ms, artifacts, .. } = *launch;
            GroupV4 {
                spec: GroupSpecV3 {
                    group,
                    slots,
                    command,
                    env,
                    cores,
                    memory_mb,
                    policy: policy.into(),
                    launch: LaunchSpecV1 { cwd, kill_grace_ms, artifacts },
                },
                slots: g.slots,
                retries_used: g.retries_used,
                restarts: g.restarts,
            }
        }
    }

    /// A framework record of the fifth format: groups of the third layout
    /// (a policy and restart state, no launch options).
    pub type FrameworkV5 = FrameworkOf<GroupV3>;

    /// A framework record of the fourth format on: the current record's
    /// fields, with groups of the layout `G` (postcard writes a generic
    /// struct as its fields, so each alias keeps its format's bytes).
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FrameworkOf<G> {
        id: FrameworkId,
        name: String,
        failover_timeout_ms: u64,
        groups: Vec<G>,
        callback: Option<Addr>,
        registered_at_ms: Option<u64>,
    }

    impl<G> From<FrameworkOf<G>> for FrameworkRecord
    where
        GroupRecord: From<G>,
    {
        fn from(f: FrameworkOf<G>) -> Self {
            FrameworkRecord {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(GroupRecord::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
                job: None,
                tenant: None,
            }
        }
    }

    impl<G: From<GroupRecord>> From<FrameworkRecord> for FrameworkOf<G> {
        fn from(f: FrameworkRecord) -> Self {
            FrameworkOf {
                id: f.id,
                name: f.name,
                failover_timeout_ms: f.failover_timeout_ms,
                groups: f.groups.into_iter().map(G::from).collect(),
                callback: f.callback,
                registered_at_ms: f.registered_at_ms,
            }
        }
    }

    /// A group record of the third layout: a policy and restart state, no
    /// launch options.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV3 {
        spec: GroupSpecV2,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
        restarts: std::collections::BTreeMap<u32, super::SlotRestart>,
    }

    /// A group's declaration in the second layout: a policy, no launch
    /// options.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupSpecV2 {
        group: String,
        slots: u32,
        command: Vec<String>,
        env: Vec<(String, String)>,
        cores: u32,
        memory_mb: u64,
        policy: PolicyV1,
    }

    impl From<GroupSpecV2> for GroupSpec {
        fn from(s: GroupSpecV2) -> Self {
            let GroupSpecV2 { group, slots, command, env, cores, memory_mb, policy } = s;
            GroupSpec {
                group,
                slots,
                command,
                env,
                cores,
                memory_mb,
                policy: policy.into(),
                launch: Default::default(),
            }
        }
    }

    impl From<GroupSpec> for GroupSpecV2 {
        /// Drops the launch options: only called for records that
        /// [`GroupRecord::fits_v3`].
        fn from(s: GroupSpec) -> Self {
            let GroupSpec { group, slots, command, env, cores, memory_mb, policy, launch: _ } = s;
            GroupSpecV2 { group, slots, command, env, cores, memory_mb, policy: policy.into() }
        }
    }

    impl From<GroupV3> for GroupRecord {
        fn from(GroupV3 { spec, slots, retries_used, restarts }: GroupV3) -> Self {
            GroupRecord {
                replacing: Default::default(),
                preempted: Default::default(),
                spec: spec.into(),
                slots,
                retries_used,
                restarts,
                deployment: None,
                counted: Default::default(),
                eras: Vec::new(),
            }
        }
    }

    impl From<GroupRecord> for GroupV3 {
        /// Only called for records that [`GroupRecord::fits_v3`].
        fn from(g: GroupRecord) -> Self {
            GroupV3 {
                spec: g.spec.into(),
                slots: g.slots,
                retries_used: g.retries_used,
                restarts: g.restarts,
            }
        }
    }

    /// A framework record of the fourth format: groups of the second
    /// layout (a policy, no restart state).
    pub type FrameworkV4 = FrameworkOf<GroupV2>;

    /// A group record of the second layout: a policy, no restart state.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV2 {
        spec: GroupSpecV2,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
    }

    impl From<GroupV2> for GroupRecord {
        fn from(GroupV2 { spec, slots, retries_used }: GroupV2) -> Self {
            GroupRecord {
                replacing: Default::default(),
                preempted: Default::default(),
                spec: spec.into(),
                slots,
                retries_used,
                restarts: Default::default(),
                deployment: None,
                counted: Default::default(),
                eras: Vec::new(),
            }
        }
    }

    impl From<GroupRecord> for GroupV2 {
        /// Only called for records that [`GroupRecord::fits_v2`].
        fn from(g: GroupRecord) -> Self {
            GroupV2 { spec: g.spec.into(), slots: g.slots, retries_used: g.retries_used }
        }
    }

    /// A worker record of the second format: a callback address, no
    /// maintenance.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct WorkerV2 {
        id: WorkerId,
        incarnation: Incarnation,
        cores: u32,
        memory_mb: u64,
        callback: Option<Addr>,
    }

    /// A framework record of the third format: a registration time, groups
    /// of the first layout.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FrameworkV3 {
        id: FrameworkId,
        name: String,
        failover_timeout_ms: u64,
        groups: Vec<GroupV1>,
        callback: Option<Addr>,
        registered_at_ms: Option<u64>,
    }

    /// A framework record of the second format: a callback address, no
    /// registration time.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FrameworkV2 {
        id: FrameworkId,
        name: String,
        failover_timeout_ms: u64,
        groups: Vec<GroupV1>,
        callback: Option<Addr>,
    }

    /// A framework record of the first format: no callback address.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct FrameworkV1 {
        id: FrameworkId,
        name: String,
        failover_timeout_ms: u64,
        groups: Vec<GroupV1>,
    }

    /// A group record of the first layout: no policy.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupV1 {
        spec: GroupSpecV1,
        slots: Vec<SlotOutcome>,
        retries_used: u32,
    }

    /// A group's declaration in the first layout: no policy.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct GroupSpecV1 {
        group: String,
        slots: u32,
        command: Vec<String>,
        env: Vec<(String, String)>,
        cores: u32,
        memory_mb: u64,
    }

    impl From<GroupV1> for GroupRecord {
        fn from(g: GroupV1) -> Self {
            let GroupSpecV1 { group, slots, command, env, cores, memory_mb } = g.spec;
            GroupRecord {
                replacing: Default::default(),
                preempted: Default::default(),
                deployment: None,
                eras: Vec::new(),
                spec: GroupSpec {
                    group,
                    slots,
                    command,
                    env,
                    cores,
                    memory_mb,
                    policy: Default::default(),
                    launch: Default::default(),
                },
                slots: g.slots,
                retries_used: g.retries_used,
                restarts: Default::default(),
                counted: Default::default(),
            }
        }
    }

    impl From<GroupRecord> for GroupV1 {
        /// Drops what the first layout has no room for: only called for
        /// records that [`GroupRecord::fits_v1`].
        fn from(g: GroupRecord) -> Self {
            let GroupSpec { group, slots, command, env, cores, memory_mb, .. } = g.spec;
            GroupV1 {
                spec: GroupSpecV1 { group, slots, command, env, cores, memory_mb },
                slots: g.slots,
                retries_used: g.retries_used,
            }
        }
    }

    fn groups_up(groups: Vec<GroupV1>) -> Vec<GroupRecord> {
        groups.into_iter().map(GroupRecord::from).collect()
    }

    fn groups_down(groups: Vec<GroupRecord>) -> Vec<GroupV1> {
        groups.into_iter().map(GroupV1::from).collect()
    }

    /// A worker record of the first format: no callback address.
    #[derive(Debug, Serialize, Deserialize)]
    pub struct WorkerV1 {
        id: WorkerId,
        incarnation: Incarnation,
        cores: u32,
        memory_mb: u64,
    }

    impl From<Record> for super::Record {
        fn from(r: Record) -> Self {
            match r {
                Record::Epoch(e) => super::Record::Epoch(e),
                Record::Worker(WorkerV1 { id, incarnation, cores, memory_mb }) => {
                    super::Record::Worker(WorkerRecord {
                        id,
                        incarnation,
                        cores,
                        memory_mb,
                        callback: None,
                        maintenance: None,
                        dead: false,
                    })
                }
                Record::Framework(FrameworkV1 { id, name, failover_timeout_ms, groups }) => {
                    super::Record::Framework(FrameworkRecord {
                        id,
                        name,
                        failover_timeout_ms,
                        groups: groups_up(groups),
                        callback: None,
                        registered_at_ms: None,
                        job: None,
                        tenant: None,
                    })
                }
                Record::WorkerWithCallback(WorkerV2 {
                    id,
                    incarnation,
                    cores,
                    memory_mb,
                    callback,
                }) => super::Record::Worker(WorkerRecord {
                    id,
                    incarnation,
                    cores,
                    memory_mb,
                    callback,
                    maintenance: None,
                    dead: false,
                }),
                Record::FrameworkWithCallback(FrameworkV2 {
                    id,
                    name,
                    failover_timeout_ms,
                    groups,
                    callback,
                }) => super::Record::Framework(FrameworkRecord {
                    id,
                    name,
                    failover_timeout_ms,
                    groups: groups_up(groups),
                    callback,
                    registered_at_ms: None,
                    job: None,
                    tenant: None,
                }),
                Record::History(h) => super::Record::History(h.into()),
                Record::HistoryWithPreemption(h) => super::Record::History(h),
                Record::Revocations(r) => super::Record::Revocations(r),
                Record::FrameworkWithRegistration(FrameworkV3 {
                    id,
                    name,
                    failover_timeout_ms,
                    groups,
                    callback,
                    registered_at_ms,
                }) => super::Record::Framework(FrameworkRecord {
                    id,
                    name,
                    failover_timeout_ms,
                    groups: groups_up(groups),
                    callback,
                    registered_at_ms,
                    job: None,
                    tenant: None,
                }),
                Record::WorkerWithMaintenance(w) => super::Record::Worker(w.into()),
                Record::WorkerDead(w) => super::Record::Worker(w),
                Record::FrameworkWithCountedEnds(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithJob(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithTenant(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithPriority(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithDisconnect(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithChecks(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithDeployment(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithPreemption(f) => super::Record::Framework(f),
                Record::Tenant(t) => super::Record::Tenant(t),
                Record::FrameworkWithPolicies(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithRestarts(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithLaunch(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithPorts(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithRollout(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithUser(f) => super::Record::Framework(f.into()),
                Record::FrameworkWithResources(f) => super::Record::Framework(f.into()),
            }
        }
    }

    impl From<super::Record> for Record {
        fn from(r: super::Record) -> Self {
            match r {
                super::Record::Epoch(e) => Record::Epoch(e),
                super::Record::Tenant(t) => Record::Tenant(t),
                super::Record::Worker(w) if w.dead => Record::WorkerDead(w),
                super::Record::Worker(w) if w.maintenance.is_some() => {
                    Record::WorkerWithMaintenance(w.into())
                }
                super::Record::Worker(WorkerRecord {
                    id,
                    incarnation,
                    cores,
                    memory_mb,
                    callback: Some(callback),
                    ..
                }) => Record::WorkerWithCallback(WorkerV2 {
                    id,
                    incarnation,
                    cores,
                    memory_mb,
                    callback: Some(callback),
                }),
                super::Record::Worker(WorkerRecord {
                    id, incarnation, cores, memory_mb, ..
                }) => Record::Worker(WorkerV1 { id, incarnation, cores, memory_mb }),
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v13) => {
                    Record::FrameworkWithPreemption(f)
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v12) => {
                    Record::FrameworkWithDeployment(f.into())
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v11) => {
                    Record::FrameworkWithChecks(f.into())
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v10) => {
                    Record::FrameworkWithDisconnect(f.into())
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v9) => {
                    Record::FrameworkWithPriority(f.into())
                }
                super::Record::Framework(f) if f.tenant.is_some() => {
                    Record::FrameworkWithTenant(f.into())
                }
                super::Record::Framework(f) if f.job.is_some() => {
                    Record::FrameworkWithJob(f.into())
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v8) => {
                    Record::FrameworkWithCountedEnds(f.into())
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v7) => {
                    Record::FrameworkWithResources(f.into())
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v6) => {
                    Record::FrameworkWithUser(f.into())
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v5) => {
                    Record::FrameworkWithRollout(f.into())
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v4) => {
                    Record::FrameworkWithPorts(f.into())
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v3) => {
                    Record::FrameworkWithLaunch(f.into())
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v2) => {
                    Record::FrameworkWithRestarts(f.into())
                }
                super::Record::Framework(f) if !f.groups.iter().all(GroupRecord::fits_v1) => {
                    Record::FrameworkWithPolicies(f.into())
                }
                super::Record::Framework(FrameworkRecord {
                    id,
                    name,
                    failover_timeout_ms,
                    groups,
                    callback,
                    registered_at_ms: registered_at_ms @ Some(_),
                    ..
                }) => Record::FrameworkWithRegistration(FrameworkV3 {
                    id,
                    name,
                    failover_timeout_ms,
                    groups: groups_down(groups),
                    callback,
                    registered_at_ms,
                }),
                super::Record::Framework(FrameworkRecord {
                    id,
                    name,
                    failover_timeout_ms,
                    groups,
                    callback: callback @ Some(_),
                    ..
                }) => Record::FrameworkWithCallback(FrameworkV2 {
                    id,
                    name,
                    failover_timeout_ms,
                    groups: groups_down(groups),
                    callback,
                }),
                super::Record::Framework(FrameworkRecord {
                    id,
                    name,
                    failover_timeout_ms,
                    groups,
                    ..
                }) => Record::Framework(FrameworkV1 {
                    id,
                    name,
                    failover_timeout_ms,
                    groups: groups_down(groups),
                }),
                super::Record::History(h)
                    if h.framework.slots.iter().any(|s| s.preempted_by.is_some()) =>
                {
                    Record::HistoryWithPreemption(h)
                }
                super::Record::History(h) => Record::History(h.into()),
                super::Record::Revocations(r) => Record::Revocations(r),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(callback: Option<&str>) -> Record {
        Record::Worker(WorkerRecord {
            id: WorkerId::new("w1"),
            incarnation: Incarnation(7),
            cores: 4,
            memory_mb: 1024,
            callback: callback.map(Addr::new),
            maintenance: None,
            dead: false,
        })
    }

    #[test]
    fn a_worker_without_a_callback_keeps_the_first_layout_and_one_with_it_round_trips() {
        let old = postcard::to_allocvec(&worker(None)).unwrap();
        assert_eq!(old[0], 1, "variant 1, as every earlier build wrote it");
        assert_eq!(postcard::from_bytes::<Record>(&old).unwrap(), worker(None));
        let new = postcard::to_allocvec(&worker(Some("10.0.0.7:7078"))).unwrap();
        assert_eq!(new[0], 3, "an appended variant");
        assert_eq!(postcard::from_bytes::<Record>(&new).unwrap(), worker(Some("10.0.0.7:7078")));
    }

    #[test]
    fn a_framework_keeps_its_earlier_layouts_until_it_has_a_registration_time() {
        let fw = |callback: Option<&str>, registered_at_ms: Option<u64>| {
            Record::Framework(FrameworkRecord {
                id: FrameworkId::new("fw-1"),
                name: "etl".into(),
                failover_timeout_ms: 60_000,
                groups: vec![],
                callback: callback.map(Addr::new),
                registered_at_ms,
                job: None,
                tenant: None,
            })
        };
        for (r, variant) in [
            (fw(None, None), 2),
            (fw(Some("10.0.0.7:7078"), None), 4),
            (fw(None, Some(1_764_603_000_000)), 6),
            (fw(Some("10.0.0.7:7078"), Some(1_764_603_000_000)), 6),
        ] {
            let bytes = postcard::to_allocvec(&r).unwrap();
            assert_eq!(bytes[0], variant, "{r:?}");
            assert_eq!(postcard::from_bytes::<Record>(&bytes).unwrap(), r);
        }
    }

    #[test]
    fn a_job_the_leader_owns_uses_an_appended_variant_and_others_keep_theirs() {
        let fw = |job: Option<JobRecord>| {
            Record::Framework(FrameworkRecord {
                id: FrameworkId::new("web"),
                name: "web".into(),
                failover_timeout_ms: 0,
                groups: vec![],
                callback: None,
                registered_at_ms: None,
                job,
                tenant: None,
            })
        };
        let key = JobKey { key: "k-1".into(), version: 2, change: crate::api::JobChange::Updated };
        let job = JobRecord { version: 2, keys: vec![key] };
        for (r, variant) in [(fw(None), 2), (fw(Some(job)), 17)] {
            let bytes = postcard::to_allocvec(&r).unwrap();
            assert_eq!(bytes[0], variant, "{r:?}");
            assert_eq!(postcard::from_bytes::<Record>(&bytes).unwrap(), r);
        }
    }

    #[test]
    fn a_framework_with_a_group_policy_uses_an_appended_variant_and_round_trips() {
        use crate::policy::{Constraint, RestartMode};
        let group = |policy: crate::policy::GroupPolicy| GroupRecord {
            replacing: Default::default(),
            preempted: Default::default(),
            deployment: None,
            eras: Vec::new(),
            spec: GroupSpec {
                group: "web".into(),
                slots: 2,
                command: vec!["srv".into()],
                env: vec![("A".into(), "1".into())],
                cores: 1,
                memory_mb: 64,
                policy,
                launch: Default::default(),
            },
            slots: vec![SlotOutcome::Pending; 2],
            retries_used: 1,
            restarts: Default::default(),
            counted: Default::default(),
        };
        let fw = |groups| {
            Record::Framework(FrameworkRecord {
                id: FrameworkId::new("fw-1"),
                name: "etl".into(),
                failover_timeout_ms: 60_000,
                groups,
                callback: None,
                registered_at_ms: Some(1_764_603_000_000),
                job: None,
                tenant: None,
            })
        };
        let mut policy = crate::policy::GroupPolicy::default();
        policy.restart.mode = RestartMode::Service;
        policy.constraints.push(Constraint::parse("disk=ssd").unwrap());
        let plain = fw(vec![group(Default::default())]);
        let with = fw(vec![group(Default::default()), group(policy)]);
        let bytes = postcard::to_allocvec(&plain).unwrap();
        assert_eq!(bytes[0], 6, "default policies keep the registration layout");
        assert_eq!(postcard::from_bytes::<Record>(&bytes).unwrap(), plain);
        let bytes = postcard::to_allocvec(&with).unwrap();
        assert_eq!(bytes[0], 8);
        assert_eq!(postcard::from_bytes::<Record>(&bytes).unwrap(), with);
        // Restart state takes the next variant; without it, variant 8 stays.
        let Record::Framework(mut restarting) = with else { unreachable!() };
        restarting.groups[1]
            .restarts
            .insert(1, SlotRestart { failures: 3, not_before_ms: 1_764_603_060_000 });
        let restarting = Record::Framework(restarting);
        let bytes = postcard::to_allocvec(&restarting).unwrap();
        assert_eq!(bytes[0], 9);
        assert_eq!(postcard::from_bytes::<Record>(&bytes).unwrap(), restarting);
        // Launch options take the next one, with or without restart state.
        let Record::Framework(mut launching) = restarting else { unreachable!() };
        launching.groups[0].spec.launch.cwd = Some("work".into());
        launching.groups[0].spec.launch.kill_grace_ms = Some(10_000);
        launching.groups[0].spec.launch.artifacts.push(crate::launch::Artifact {
            source: "http://files/tool.tar.gz".into(),
            sha256: "ab".repeat(32),
            dest: "bin".into(),
            unpack: true,
        });
        for restarts in [true, false] {
            if !restarts {
                launching.groups[1].restarts.clear();
            }
            let r = Record::Framework(launching.clone());
            let bytes = postcard::to_allocvec(&r).unwrap();
            assert_eq!(bytes[0], 10);
            assert_eq!(postcard::from_bytes::<Record>(&bytes).unwrap(), r);
        }
    }

    #[test]
    fn a_history_record_is_an_appended_variant_and_round_trips() {
        use crate::protocol::{FinishedSlot, FrameworkOutcome};
        let h = Record::History(HistoryRecord {
            seq: 12,
            framework_digest: 0xdead_beef,
            framework: FinishedFramework {
                id: FrameworkId::new("fw-1"),
                name: "etl".into(),
                outcome: FrameworkOutcome::TimedOut,
                finished_at_ms: 1_764_603_000_000,
                registered_at_ms: None,
                slots: vec![FinishedSlot {
                    group: "main".into(),
                    slot: 0,
                    executor: Some(ExecutorId::new("fw-1/main#0#1.1")),
                    state: Some(ExecutorState::Failed { reason: "exit 3".into() }),
                    attempts: 4,
                    preempted_by: None,
                }],
                slots_omitted: 2,
            },
        });
        let bytes = postcard::to_allocvec(&h).unwrap();
        assert_eq!(bytes[0], 5, "appended after the five earlier variants");
        assert_eq!(postcard::from_bytes::<Record>(&bytes).unwrap(), h);
        assert_eq!(h.key(), RecordKey::History(12));
        assert_eq!(h.key().to_string(), "history/12");
        assert_eq!(names::key_stem(&h.key()), "h-00000000000000000012");
        let img = format::encode(&h).unwrap();
        assert_eq!(format::decode(&img).unwrap(), h);
    }

    /// "Preempted by" across a failover (docs/design.md#issue-44): a
    /// framework with a preempted slot takes variant 25 and a history
    /// record with a preempted slot variant 26; without one, variants 24
    /// and 5 keep their bytes. A preemption outlives neither its
    /// `replacing` entry nor a stop of another executor of the slot.
    #[test]
    fn a_preempted_slot_uses_appended_variants_and_round_trips() {
        use crate::protocol::{FinishedSlot, FrameworkOutcome};
        let victim = ExecutorId::new("fw-1/web#1#7.3");
        let mut group = GroupRecord {
            replacing: Default::default(),
            preempted: Default::default(),
            deployment: None,
            eras: Vec::new(),
            spec: GroupSpec {
                group: "web".into(),
                slots: 2,
                command: vec!["srv".into()],
                env: vec![],
                cores: 1,
                memory_mb: 64,
                policy: Default::default(),
                launch: Default::default(),
            },
            slots: vec![SlotOutcome::Pending; 2],
            retries_used: 0,
            restarts: Default::default(),
            counted: Default::default(),
        };
        group.spec.policy.update = Some(Default::default());
        let fw = |groups| {
            Record::Framework(FrameworkRecord {
                id: FrameworkId::new("fw-1"),
                name: "web".into(),
                failover_timeout_ms: 0,
                groups,
                callback: None,
                registered_at_ms: None,
                job: None,
                tenant: None,
            })
        };
        let deployed = fw(vec![group.clone()]);
        let bytes = postcard::to_allocvec(&deployed).unwrap();
        assert_eq!(bytes[0], 24, "no preempted slot: the deployment's variant");
        assert_eq!(postcard::from_bytes::<Record>(&bytes).unwrap(), deployed);
        group.replace(1, victim.clone());
        group.preempted.insert(1, Preemptor { executor: victim.clone(), by: "b/g".into() });
        assert_eq!(group.preempted_by(1, &victim), Some("b/g"));
        let preempted = fw(vec![group.clone()]);
        let bytes = postcard::to_allocvec(&preempted).unwrap();
        assert_eq!(bytes[0], 25, "the appended variant");
        assert_eq!(postcard::from_bytes::<Record>(&bytes).unwrap(), preempted);
        // An operator's kill with refill of the slot's next executor
        // forgets the preemption; a kill of the victim again keeps it.
        let mut again = group.clone();
        again.replace(1, victim.clone());
        assert_eq!(again.preempted_by(1, &victim), Some("b/g"));
        again.replace(1, ExecutorId::new("fw-1/web#1#7.4"));
        assert!(again.preempted.is_empty());
        let mut settled = group.clone();
        settled.replacing.clear();
        assert_eq!(settled.preempted_by(1, &victim), None, "never outlives `replacing`");

        let h = |preempted_by: Option<&str>| {
            Record::History(HistoryRecord {
                seq: 3,
                framework_digest: 7,
                framework: FinishedFramework {
                    id: FrameworkId::new("fw-1"),
                    name: "web".into(),
                    outcome: FrameworkOutcome::Killed,
                    finished_at_ms: 1_764_603_000_000,
                    registered_at_ms: None,
                    slots: vec![FinishedSlot {
                        group: "web".into(),
                        slot: 1,
                        executor: Some(victim.clone()),
                        state: Some(ExecutorState::Killed),
                        attempts: 1,
                        preempted_by: preempted_by.map(str::to_owned),
                    }],
                    slots_omitted: 0,
                },
            })
        };
        for (r, variant) in [(h(None), 5), (h(Some("b/g")), 26)] {
            let bytes = postcard::to_allocvec(&r).unwrap();
            assert_eq!(bytes[0], variant, "{r:?}");
            assert_eq!(postcard::from_bytes::<Record>(&bytes).unwrap(), r);
        }
    }

    #[test]
    fn a_worker_under_maintenance_uses_an_appended_variant_and_round_trips() {
        for m in [
            Maintenance::Cordoned,
            Maintenance::Draining { deadline_ms: 1_764_600_000_000 },
            Maintenance::Drained,
        ] {
            for callback in [None, Some("10.0.0.7:7078")] {
                let Record::Worker(mut w) = worker(callback) else { unreachable!() };
                w.maintenance = Some(m);
                let r = Record::Worker(w);
                let bytes = postcard::to_allocvec(&r).unwrap();
                assert_eq!(bytes[0], 7, "the appended variant");
                assert_eq!(postcard::from_bytes::<Record>(&bytes).unwrap(), r);
            }
        }
        // Without maintenance, the earlier layouts stay byte for byte.
        assert_eq!(postcard::to_allocvec(&worker(None)).unwrap()[0], 1);
        assert_eq!(postcard::to_allocvec(&worker(Some("a:1"))).unwrap()[0], 3);
    }
}

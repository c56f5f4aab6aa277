//! Cluster events: what changed between two views of the cluster.
//!
//! [`diff`] compares two [`ClusterState`]s (what a master's `state()` shows,
//! what `StateRequest` answers) and lists the changes as [`ClusterEvent`]s:
//! workers, frameworks and executors added, changed state, changed
//! otherwise (resources in use, a connection, any field added later) or
//! removed; the leader changed (another master, or the same one at a new
//! epoch, or none known); the answering master's own status changed; a
//! framework finished (it entered the history, with its outcome). It is
//! a pure function: the HTTP event stream (`GET /api/events`) and
//! `regent events` both poll snapshots and diff them with it, so what they
//! report is exactly what two snapshots differ by.
//!
//! Coalescing: a diff sees two snapshots, not the steps between them. An
//! executor that went LAUNCHING → RUNNING → EXITED between two polls is one
//! `state` event from LAUNCHING to EXITED; a worker that joined and died in
//! between is one `added` event with state DEAD; something added and
//! removed in between is not seen at all. The last state is always right.
//!
//! Events come in a fixed order: leader, status, then workers, frameworks
//! (then their groups' waiting slots: [`ClusterEvent::Waiting`], when they
//! start waiting or their reasons change; then their deployments:
//! [`ClusterEvent::Deployment`]) and executors (then their health:
//! [`ClusterEvent::ExecutorHealth`]), each by id, then finished
//! frameworks. Events are serialized (serde, internally
//! tagged by `kind`) as JSON objects such as
//! `{"kind":"worker","change":"state","worker":"w1","state":"DEAD","previous":"ALIVE",...}`.

use crate::api::{DeploymentView, WaitReason};
use crate::protocol::{
    ClusterState, ExecutorState, ExecutorView, FrameworkView, GroupView, WorkerView,
};
use crate::states::{FrameworkState, MasterStatus, ShownWorkerState};
use crate::{Addr, ExecutorId, FrameworkId, MasterId, WorkerId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What happened to an entity between two snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// It is new.
    Added,
    /// Its state changed (`previous` says from what).
    State,
    /// Something else about it changed (resources in use, connection,
    /// cordoned...), not its state.
    Updated,
    /// It is gone (the event carries its last known state).
    Removed,
}

/// One change between two snapshots (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClusterEvent {
    /// The leader the answering master knows of changed: another master,
    /// the same master at another epoch, or none known any more. Also
    /// reported when the snapshots come from different masters (a client
    /// that followed the leader across a failover).
    Leader {
        /// The leader's id, `None` when no leader is known.
        leader: Option<MasterId>,
        /// The address workers dial to reach it.
        addr: Option<Addr>,
        /// The leader's epoch.
        epoch: Option<u64>,
        /// The leader before, if one was known.
        previous: Option<MasterId>,
        /// Its epoch.
        previous_epoch: Option<u64>,
    },
    /// The answering master's own status changed (STANDBY, RECOVERING,
    /// ALIVE, SUSPENDED).
    Status {
        /// The master.
        master: MasterId,
        /// Its status now.
        state: MasterStatus,
        /// Its status before.
        previous: MasterStatus,
        /// Its epoch now.
        epoch: u64,
    },
    /// A worker was added, changed or removed.
    Worker {
        /// What happened.
        change: Change,
        /// The worker.
        worker: WorkerId,
        /// Its state now (the last known one when removed).
        state: ShownWorkerState,
        /// Its state before, for [`Change::State`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous: Option<ShownWorkerState>,
        /// Cores offered.
        cores: u32,
        /// Cores held by executors.
        cores_used: u32,
        /// Memory offered, MiB.
        memory_mb: u64,
        /// Memory held by executors, MiB.
        memory_used_mb: u64,
    },
    /// A framework was added, changed or removed.
    Framework {
        /// What happened.
        change: Change,
        /// The framework.
        framework: FrameworkId,
        /// Its name.
        name: String,
        /// Its state now (the last known one when removed).
        state: FrameworkState,
        /// Its state before, for [`Change::State`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous: Option<FrameworkState>,
        /// It has a live subscription.
        connected: bool,
    },
    /// An executor was added, changed or removed.
    Executor {
        /// What happened.
        change: Change,
        /// The executor.
        executor: ExecutorId,
        /// Its framework.
        framework: FrameworkId,
        /// Its worker, if known.
        worker: Option<WorkerId>,
        /// Its state now ([`executor_state_name`]; the last known one when
        /// removed).
        state: String,
        /// Its state before, for [`Change::State`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous: Option<String>,
        /// Exit code, when EXITED.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// Why, when FAILED; `preempted by <framework>/<group>` for an
        /// executor the leader preempted, from its choice to its end.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A framework finished: it entered the leader's history (it is
    /// `removed` from the frameworks in the same difference).
    Finished {
        /// The framework.
        framework: FrameworkId,
        /// Its name.
        name: String,
        /// How it ended (COMPLETED, FAILED, TORN_DOWN, KILLED, TIMED_OUT).
        outcome: String,
        /// When it finished, wall-clock ms since the Unix epoch.
        finished_at_ms: u64,
    },
    /// Not produced by [`diff`]: a client following the leader lost it and
    /// looks for the next one (`regent events`).
    LeaderLost {
        /// The leader it followed.
        leader: MasterId,
        /// Its epoch.
        epoch: u64,
        /// Why it is considered lost.
        reason: String,
    },
    /// A group's deployment started, reached its promotion point, was
    /// promoted, succeeded, failed (with why) or started reverting
    /// (docs/jobs.md, deployments). A failure that starts a revert at once
    /// is two events: `failed` of the deployment (with its reason, while
    /// the leader that saw it leads) and `reverting` of the revert.
    Deployment {
        /// The framework.
        framework: FrameworkId,
        /// The group.
        group: String,
        /// What happened.
        change: DeploymentChange,
        /// The deployment's number in the group.
        seq: u64,
        /// Its state now (`canary`, `awaiting_promotion`, `rolling`,
        /// `succeeded`, `failed`; for a `failed` event of a reverted
        /// deployment, `failed`).
        state: String,
        /// The deployment a revert reverts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        revert_of: Option<u64>,
        /// Why it failed (`failed`), or why the deployment it reverts did
        /// (`reverting`), when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Open slots healthy on the deployed spec.
        healthy: u32,
        /// Open slots of the group.
        open: u32,
    },
    /// A running executor's health, as its worker's checks see it, changed:
    /// its status (`pending`, `passing`, `failing`) or what the failing
    /// check saw (docs/jobs.md#health-checks-groupcheck). Not for how long
    /// it has held.
    ExecutorHealth {
        /// The executor.
        executor: ExecutorId,
        /// Its framework.
        framework: FrameworkId,
        /// Its worker, if known.
        worker: Option<WorkerId>,
        /// `pending`, `passing` or `failing`.
        status: String,
        /// Its status before, when it had one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        previous: Option<String>,
        /// The first failing check's name and what it saw (empty when
        /// none fails).
        detail: String,
    },
    /// Slots of a group started waiting to be placed, or the reasons they
    /// wait changed (docs/jobs.md, "Why a slot waits"). Not for a change of
    /// how many wait alone: a group placed slot by slot with the same
    /// reasons is one event, not one per placement, and a snapshot diff
    /// sees at most one per group.
    Waiting {
        /// The framework.
        framework: FrameworkId,
        /// The group.
        group: String,
        /// How many of its slots wait to be placed.
        unplaced: u32,
        /// Every reason, ranked.
        reasons: Vec<WaitReason>,
    },
}

/// What happened to a group's deployment ([`ClusterEvent::Deployment`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentChange {
    /// A deployment of a new spec started (with a canary phase or rolling).
    Started,
    /// Its canaries are healthy; it waits for `regent job promote`.
    AwaitingPromotion,
    /// It was promoted (by an operator, or by `auto_promote`): it rolls.
    Promoted,
    /// Every open slot runs the deployed spec, healthy.
    Succeeded,
    /// It failed, for `reason`.
    Failed,
    /// A revert to the last healthy spec started, after a failure.
    Reverting,
}

impl DeploymentChange {
    /// As serialized: `started`, `awaiting_promotion`, `promoted`,
    /// `succeeded`, `failed`, `reverting`.
    pub fn name(self) -> &'static str {
        match self {
            DeploymentChange::Started => "started",
            DeploymentChange::AwaitingPromotion => "awaiting_promotion",
            DeploymentChange::Promoted => "promoted",
            DeploymentChange::Succeeded => "succeeded",
            DeploymentChange::Failed => "failed",
            DeploymentChange::Reverting => "reverting",
        }
    }
}

/// The executor state's name as the API shows it: `LAUNCHING`, `RUNNING`,
/// `EXITED`, `FAILED`, `KILLED` or `LOST` ([`ExecutorState::name`]).
pub fn executor_state_name(state: &ExecutorState) -> &'static str {
    state.name()
}

/// The changes from `before` to `after`, in the order of the module docs.
/// Equal snapshots give no event; counters (`messages`, `rejected`) are not
/// events.
pub fn diff(before: &ClusterState, after: &ClusterState) -> Vec<ClusterEvent> {
    let mut out = Vec::new();
    let hint = |s: &ClusterState| s.leader.as_ref().map(|h| (h.id.clone(), h.epoch));
    if hint(before) != hint(after) {
        out.push(ClusterEvent::Leader {
            leader: after.leader.as_ref().map(|h| h.id.clone()),
            addr: after.leader.as_ref().map(|h| h.addr.clone()),
            epoch: after.leader.as_ref().map(|h| h.epoch.0),
            previous: before.leader.as_ref().map(|h| h.id.clone()),
            previous_epoch: before.leader.as_ref().map(|h| h.epoch.0),
        });
    }
    if before.master == after.master && before.status != after.status {
        out.push(ClusterEvent::Status {
            master: after.master.clone(),
            state: after.status,
            previous: before.status,
            epoch: after.epoch.0,
        });
    }
    entities(
        &before.workers,
        &after.workers,
        |w| &w.id,
        |w| w.shown_state(),
        same_worker,
        worker_event,
        &mut out,
    );
    entities(
        &before.frameworks,
        &after.frameworks,
        |f| &f.id,
        |f| f.state,
        same_framework,
        framework_event,
        &mut out,
    );
    waiting(before, after, &mut out);
    deployments(before, after, &mut out);
    entities(
        &before.executors,
        &after.executors,
        |e| &e.id,
        |e| executor_state_name(&e.state).to_string(),
        same_executor,
        executor_event,
        &mut out,
    );
    health(before, after, &mut out);
    // Entries new to the history; an entry leaving it (evicted past the
    // retained number) is not news.
    let known: std::collections::BTreeSet<&FrameworkId> =
        before.history.iter().map(|h| &h.id).collect();
    for h in after.history.iter().filter(|h| !known.contains(&h.id)) {
        out.push(ClusterEvent::Finished {
            framework: h.id.clone(),
            name: h.name.clone(),
            outcome: h.outcome.as_str().to_string(),
            finished_at_ms: h.finished_at_ms,
        });
    }
    out
}

/// A worker's view unchanged but for its usage sample (which changes
/// every few seconds and is no event).
fn same_worker(a: &WorkerView, b: &WorkerView) -> bool {
    let WorkerView {
        id,
        state,
        cores,
        cores_used,
        memory_mb,
        memory_used_mb,
        cordoned,
        drain,
        drain_deadline_ms,
        executors,
        attributes,
        ports,
        ports_used,
        host,
        resources,
        users,
        usage: _,
    } = a;
    (id, state, cores, cores_used, memory_mb, memory_used_mb, cordoned, drain)
        == (
            &b.id,
            &b.state,
            &b.cores,
            &b.cores_used,
            &b.memory_mb,
            &b.memory_used_mb,
            &b.cordoned,
            &b.drain,
        )
        && (drain_deadline_ms, executors, attributes, ports, ports_used, host)
            == (&b.drain_deadline_ms, &b.executors, &b.attributes, &b.ports, &b.ports_used, &b.host)
        && (resources, users) == (&b.resources, &b.users)
}

/// A framework's view unchanged but for its groups' waiting slots and
/// their reasons ([`ClusterEvent::Waiting`] tells those).
fn same_framework(a: &FrameworkView, b: &FrameworkView) -> bool {
    let shown = |g: &GroupView| {
        (g.name.clone(), g.slots, g.declared, g.running, g.waiting, g.last_end.clone())
    };
    (&a.id, &a.name, a.state, a.connected) == (&b.id, &b.name, b.state, b.connected)
        && a.groups.iter().map(shown).eq(b.groups.iter().map(shown))
}

/// A [`ClusterEvent::Waiting`] for each group of `after` whose slots wait
/// with other reasons than in `before` (or did not wait there), by
/// framework id then group order. A group whose reasons `after` does not
/// carry (past [`crate::limits::MAX_STATE_REASON_GROUPS`]) gives none.
fn waiting(before: &ClusterState, after: &ClusterState, out: &mut Vec<ClusterEvent>) {
    let old: BTreeMap<(&FrameworkId, &str), &[WaitReason]> = before
        .frameworks
        .iter()
        .flat_map(|f| {
            f.groups.iter().map(move |g| ((&f.id, g.name.as_str()), g.reasons.as_slice()))
        })
        .filter(|(_, reasons)| !reasons.is_empty())
        .collect();
    let mut frameworks: Vec<&FrameworkView> = after.frameworks.iter().collect();
    frameworks.sort_by(|a, b| a.id.cmp(&b.id));
    for f in frameworks {
        for g in &f.groups {
            if g.unplaced == 0 || g.reasons.is_empty() {
                continue;
            }
            if old.get(&(&f.id, g.name.as_str())).is_some_and(|r| *r == g.reasons.as_slice()) {
                continue;
            }
            out.push(ClusterEvent::Waiting {
                framework: f.id.clone(),
                group: g.name.clone(),
                unplaced: g.unplaced,
                reasons: g.reasons.clone(),
            });
        }
    }
}

/// The [`ClusterEvent::Deployment`]s from `before` to `after`, by
/// framework id then group order: a deployment new to a group (`started`,
/// or `reverting` after a `failed` of the one it reverts, unless `before`
/// showed that failure already), then each change of its state (a
/// deployment that started and ended between two snapshots gives both).
fn deployments(before: &ClusterState, after: &ClusterState, out: &mut Vec<ClusterEvent>) {
    let old: BTreeMap<(&FrameworkId, &str), &DeploymentView> = before
        .frameworks
        .iter()
        .flat_map(|f| {
            f.groups
                .iter()
                .filter_map(move |g| Some(((&f.id, g.name.as_str()), g.deployment.as_ref()?)))
        })
        .collect();
    let mut frameworks: Vec<&FrameworkView> = after.frameworks.iter().collect();
    frameworks.sort_by(|a, b| a.id.cmp(&b.id));
    for f in frameworks {
        for g in &f.groups {
            let Some(d) = &g.deployment else { continue };
            let was = old.get(&(&f.id, g.name.as_str())).copied();
            let event = |change: DeploymentChange, d: &DeploymentView, reason: Option<String>| {
                ClusterEvent::Deployment {
                    framework: f.id.clone(),
                    group: g.name.clone(),
                    change,
                    seq: d.seq,
                    state: d.state.clone(),
                    revert_of: d.revert_of,
                    reason,
                    healthy: d.healthy,
                    open: d.open,
                }
            };
            let state_before = match was {
                Some(w) if w.seq == d.seq => Some(w.state.as_str()),
                _ => {
                    // New to the group.
                    match d.revert_of {
                        Some(of) => {
                            let shown_failed =
                                was.is_some_and(|w| w.seq == of && w.state == "failed");
                            if !shown_failed {
                                out.push(ClusterEvent::Deployment {
                                    framework: f.id.clone(),
                                    group: g.name.clone(),
                                    change: DeploymentChange::Failed,
                                    seq: of,
                                    state: "failed".into(),
                                    revert_of: None,
                                    reason: d.reverts_because.clone(),
                                    healthy: was.filter(|w| w.seq == of).map_or(0, |w| w.healthy),
                                    open: d.open,
                                });
                            }
                            out.push(event(
                                DeploymentChange::Reverting,
                                d,
                                d.reverts_because.clone(),
                            ));
                        }
                        None => out.push(event(DeploymentChange::Started, d, None)),
                    }
                    // What it went through since, as if seen from its start.
                    Some(if d.revert_of.is_some() || d.canary == 0 { "rolling" } else { "canary" })
                }
            };
            let Some(from) = state_before else { continue };
            let to = d.state.as_str();
            if from == to {
                continue;
            }
            match to {
                "awaiting_promotion" => {
                    out.push(event(DeploymentChange::AwaitingPromotion, d, None))
                }
                "rolling" => out.push(event(DeploymentChange::Promoted, d, None)),
                "succeeded" => {
                    if from == "canary" || from == "awaiting_promotion" {
                        out.push(event(DeploymentChange::Promoted, d, None));
                    }
                    out.push(event(DeploymentChange::Succeeded, d, None));
                }
                "failed" => out.push(event(DeploymentChange::Failed, d, d.reason.clone())),
                _ => {}
            }
        }
    }
}

/// The [`ClusterEvent::ExecutorHealth`]s from `before` to `after`, by
/// executor id: an executor of `after` with a health report whose status
/// or detail differs from `before`'s (or that had none there). An executor
/// that loses its report (it ended) gives none: its end is its own event.
fn health(before: &ClusterState, after: &ClusterState, out: &mut Vec<ClusterEvent>) {
    let old: BTreeMap<&ExecutorId, &ExecutorView> =
        before.executors.iter().map(|e| (&e.id, e)).collect();
    let mut executors: Vec<&ExecutorView> = after.executors.iter().collect();
    executors.sort_by(|a, b| a.id.cmp(&b.id));
    for e in executors {
        let Some(h) = &e.health else { continue };
        let previous = old.get(&e.id).and_then(|o| o.health.as_ref());
        if previous.is_some_and(|p| p.status == h.status && p.detail == h.detail) {
            continue;
        }
        out.push(ClusterEvent::ExecutorHealth {
            executor: e.id.clone(),
            framework: e.framework.clone(),
            worker: e.worker.clone(),
            status: h.status.name().to_string(),
            previous: previous.map(|p| p.status.name().to_string()),
            detail: h.detail.clone(),
        });
    }
}

/// An executor's view unchanged but for its usage and its health (which
/// [`ClusterEvent::ExecutorHealth`] tells).
fn same_executor(a: &ExecutorView, b: &ExecutorView) -> bool {
    let ExecutorView {
        id,
        framework,
        worker,
        state,
        ports,
        resources,
        usage: _,
        preempted_by,
        health: _,
    } = a;
    (id, framework, worker, state, ports, resources, preempted_by)
        == (&b.id, &b.framework, &b.worker, &b.state, &b.ports, &b.resources, &b.preempted_by)
}

/// Compares two lists of views by id (not trusting their order); `same`
/// tells views that show no change.
fn entities<V, K: Ord, S: PartialEq>(
    before: &[V],
    after: &[V],
    id: impl Fn(&V) -> &K,
    state: impl Fn(&V) -> S,
    same: impl Fn(&V, &V) -> bool,
    event: impl Fn(Change, &V, Option<S>) -> ClusterEvent,
    out: &mut Vec<ClusterEvent>,
) {
    let old: BTreeMap<&K, &V> = before.iter().map(|v| (id(v), v)).collect();
    let new: BTreeMap<&K, &V> = after.iter().map(|v| (id(v), v)).collect();
    let mut ids: Vec<&K> = old.keys().chain(new.keys()).copied().collect();
    ids.sort();
    ids.dedup();
    for k in ids {
        match (old.get(k), new.get(k)) {
            (None, Some(v)) => out.push(event(Change::Added, v, None)),
            (Some(v), None) => out.push(event(Change::Removed, v, None)),
            (Some(a), Some(b)) if !same(a, b) => {
                let (was, now) = (state(a), state(b));
                if was != now {
                    out.push(event(Change::State, b, Some(was)));
                } else {
                    out.push(event(Change::Updated, b, None));
                }
            }
            _ => {}
        }
    }
}

fn worker_event(
    change: Change,
    w: &WorkerView,
    previous: Option<ShownWorkerState>,
) -> ClusterEvent {
    ClusterEvent::Worker {
        change,
        worker: w.id.clone(),
        state: w.shown_state(),
        previous,
        cores: w.cores,
        cores_used: w.cores_used,
        memory_mb: w.memory_mb,
        memory_used_mb: w.memory_used_mb,
    }
}

fn framework_event(
    change: Change,
    f: &FrameworkView,
    previous: Option<FrameworkState>,
) -> ClusterEvent {
    ClusterEvent::Framework {
        change,
        framework: f.id.clone(),
        name: f.name.clone(),
        state: f.state,
        previous,
        connected: f.connected,
    }
}

fn executor_event(change: Change, e: &ExecutorView, previous: Option<String>) -> ClusterEvent {
    let (exit_code, reason) = match &e.state {
        ExecutorState::Exited { code } => (Some(*code), None),
        ExecutorState::Failed { reason } => (None, Some(reason.clone())),
        _ => (None, None),
    };
    // A victim of preemption says so and for whom, from the moment it is
    // chosen to its end.
    let reason = match &e.preempted_by {
        Some(by) => Some(format!("preempted by {by}")),
        None => reason,
    };
    ClusterEvent::Executor {
        change,
        executor: e.id.clone(),
        framework: e.framework.clone(),
        worker: e.worker.clone(),
        state: executor_state_name(&e.state).to_string(),
        previous,
        exit_code,
        reason,
    }
}

impl ClusterEvent {
    /// The event's kind, as serialized (`leader`, `status`, `worker`,
    /// `framework`, `executor`, `finished`, `leader_lost`, `waiting`,
    /// `deployment`, `executor_health`): the SSE event name.
    pub fn kind(&self) -> &'static str {
        match self {
            ClusterEvent::Leader { .. } => "leader",
            ClusterEvent::Status { .. } => "status",
            ClusterEvent::Worker { .. } => "worker",
            ClusterEvent::Framework { .. } => "framework",
            ClusterEvent::Executor { .. } => "executor",
            ClusterEvent::Finished { .. } => "finished",
            ClusterEvent::LeaderLost { .. } => "leader_lost",
            ClusterEvent::Waiting { .. } => "waiting",
            ClusterEvent::Deployment { .. } => "deployment",
            ClusterEvent::ExecutorHealth { .. } => "executor_health",
        }
    }

    /// One line for a person, e.g. `worker w1 ALIVE -> DEAD` or
    /// `leader m2 at 127.0.0.1:5051, epoch 9 (was m1, epoch 7)`. Control
    /// characters (a newline in a failure reason) are shown as spaces.
    pub fn describe(&self) -> String {
        let line = match self {
            ClusterEvent::Leader { leader, addr, epoch, previous, previous_epoch } => {
                let now = match (leader, addr, epoch) {
                    (Some(l), Some(a), Some(e)) => format!("leader {l} at {a}, epoch {e}"),
                    _ => "leader unknown".to_string(),
                };
                match (previous, previous_epoch) {
                    (Some(p), Some(e)) => format!("{now} (was {p}, epoch {e})"),
                    _ => format!("{now} (was unknown)"),
                }
            }
            ClusterEvent::Status { master, state, previous, epoch } => {
                format!("master {master} {previous} -> {state} (epoch {epoch})")
            }
            ClusterEvent::Worker {
                change,
                worker,
                state,
                previous,
                cores,
                cores_used,
                memory_mb,
                memory_used_mb,
            } => {
                let what = transition(*change, state.name(), previous.map(|p| p.name()));
                format!(
                    "worker {worker} {what} (cores {cores_used}/{cores}, memory \
                     {memory_used_mb}/{memory_mb} MiB)"
                )
            }
            ClusterEvent::Framework { change, framework, name, state, previous, connected } => {
                let what = transition(*change, state.name(), previous.map(|p| p.name()));
                let conn = if *connected { "connected" } else { "not connected" };
                format!("framework {framework} ({name}) {what}, {conn}")
            }
            ClusterEvent::Executor {
                change,
                executor,
                worker,
                state,
                previous,
                exit_code,
                reason,
                ..
            } => {
                let mut what = transition(*change, state, previous.as_deref());
                if let Some(code) = exit_code {
                    what.push_str(&format!(" (code {code})"));
                }
                if let Some(r) = reason {
                    what.push_str(&format!(" ({r})"));
                }
                let on = worker.as_ref().map(|w| format!(" on {w}")).unwrap_or_default();
                format!("executor {executor}{on} {what}")
            }
            ClusterEvent::Finished { framework, name, outcome, .. } => {
                format!("framework {framework} ({name}) finished: {outcome}")
            }
            ClusterEvent::LeaderLost { leader, epoch, reason } => {
                format!("leader {leader} (epoch {epoch}) lost: {reason}; looking for the leader")
            }
            ClusterEvent::Deployment {
                framework,
                group,
                change,
                seq,
                state,
                revert_of,
                reason,
                healthy,
                open,
            } => {
                let revert = revert_of.map_or(String::new(), |of| format!(" (revert of {of})"));
                let why = reason.as_ref().map_or(String::new(), |r| format!(": {r}"));
                // The state only where it says more than the change.
                let now = if state == change.name() { String::new() } else { format!(", {state}") };
                format!(
                    "deployment {seq}{revert} of group {framework}/{group} {}{now}, \
                     {healthy}/{open} healthy{why}",
                    change.name()
                )
            }
            ClusterEvent::ExecutorHealth { executor, worker, status, previous, detail, .. } => {
                let on = worker.as_ref().map(|w| format!(" on {w}")).unwrap_or_default();
                let was = previous.as_ref().map_or(String::new(), |p| format!(" (was {p})"));
                let what = if detail.is_empty() { String::new() } else { format!(": {detail}") };
                format!("executor {executor}{on} health {status}{was}{what}")
            }
            ClusterEvent::Waiting { framework, group, unplaced, reasons } => {
                let why: Vec<String> = reasons.iter().map(ToString::to_string).collect();
                format!("group {framework}/{group}: {unplaced} slot(s) waiting: {}", why.join("; "))
            }
        };
        line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
    }
}

fn transition(change: Change, state: &str, previous: Option<&str>) -> String {
    match change {
        Change::Added => format!("added, {state}"),
        Change::State => format!("{} -> {state}", previous.unwrap_or("?")),
        Change::Updated => format!("updated, {state}"),
        Change::Removed => format!("removed (was {state})"),
    }
}

/// One line summing a snapshot up for a person: who answers and leads, and
/// the workers, frameworks and executors by state, e.g. `master m1 ALIVE,
/// epoch 7, leader m1 at 127.0.0.1:5050; workers 2 (ALIVE 2); frameworks 1
/// (ACTIVE 1); executors 2 (RUNNING 2)`.
pub fn summary(s: &ClusterState) -> String {
    let leader = match &s.leader {
        Some(h) => format!("leader {} at {}", h.id, h.addr),
        None => "leader unknown".to_string(),
    };
    let count = |states: Vec<String>| -> String {
        let mut by: BTreeMap<String, usize> = BTreeMap::new();
        for st in &states {
            *by.entry(st.clone()).or_default() += 1;
        }
        let parts: Vec<String> = by.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if parts.is_empty() {
            "0".to_string()
        } else {
            format!("{} ({})", states.len(), parts.join(", "))
        }
    };
    let line = format!(
        "master {} {}, epoch {}, {leader}; workers {}; frameworks {}; executors {}",
        s.master,
        s.status,
        s.epoch.0,
        count(s.workers.iter().map(|w| w.state.to_string()).collect()),
        count(s.frameworks.iter().map(|f| f.state.to_string()).collect()),
        count(s.executors.iter().map(|e| executor_state_name(&e.state).to_string()).collect()),
    );
    line.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

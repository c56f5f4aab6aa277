//! Job status (`JobsRequest` → `JobsReply`; `GET /v1/jobs[/{id}]`): every
//! framework, jobs the leader owns and subscribers' alike, with each group's
//! desired / placed / running / done counts and every slot's phase, its
//! executor and worker, and why a slot that waits waits.
//!
//! A slot's phase comes from its durable outcome (done: completed, failed,
//! killed) and otherwise from the executor that fills it (launching,
//! running, stopping once a kill, a drain, a scale or a rollout asked it
//! to stop; with the group it was preempted for, if a preemption stopped
//! it, durable so a new leader says it too). A slot with none waits: in its restart backoff (`backoff`,
//! until the wall-clock instant the record keeps), or to be placed, with
//! the reason the plan gives for its group now ([`super::plan`]: no
//! worker, no room, a constraint, a port, a resource...), or, before a
//! group's declaration is durable or while the leader recovers, for that.
//!
//! Read-only and answered at once, on a connection as to a local asker.
//!
//! Tests: core/tests/api_jobs.rs.

use super::frameworks::{FrameworkEntry, GroupState};
use super::Master;
use crate::api::{GroupStatus, JobStatus, SlotPhase, SlotStatus, WaitReason};
use crate::ids::FrameworkId;
use crate::protocol::{ExecutorState, Message};
use crate::store::SlotOutcome;
use crate::time::Millis;

impl Master {
    /// The answer to `JobsRequest { request, job }` at `now`: the status of
    /// `job`, or of every framework in id order; `RequestRefused` ("no job
    /// X") for an id no framework has.
    pub(super) fn jobs_reply(
        &self,
        now: Millis,
        request: u64,
        job: Option<&FrameworkId>,
    ) -> Message {
        let jobs = match job {
            Some(id) => match self.frameworks.get(id) {
                Some(fw) => vec![self.job_status(now, fw)],
                None => {
                    let reason = format!("no job {id}");
                    return Message::RequestRefused { epoch: self.epoch, request, reason };
                }
            },
            None => self.job_statuses(now),
        };
        Message::JobsReply { epoch: self.epoch, request, jobs }
    }

    /// Every framework's status at `now`, in id order: what `JobsRequest`
    /// without a job answers (read-only; the simulator checks that every
    /// waiting slot has a reason with it).
    pub fn job_statuses(&self, now: Millis) -> Vec<JobStatus> {
        let mut all: Vec<&FrameworkEntry> = self.frameworks.values().collect();
        all.sort_by(|a, b| a.id.cmp(&b.id));
        all.into_iter().map(|fw| self.job_status(now, fw)).collect()
    }

    /// One framework's status at `now`.
    fn job_status(&self, now: Millis, fw: &FrameworkEntry) -> JobStatus {
        JobStatus {
            tenant: fw.tenant.clone(),
            job: fw.id.clone(),
            name: fw.name.clone(),
            version: fw.job.as_ref().map(|j| j.version),
            state: fw.state(),
            groups: (0..fw.groups.len()).map(|gi| self.group_status(now, fw, gi)).collect(),
        }
    }

    /// Group `gi` of `fw`: its status at `now`.
    fn group_status(&self, now: Millis, fw: &FrameworkEntry, gi: usize) -> GroupStatus {
        let g = &fw.groups[gi];
        let mut slots = Vec::with_capacity(g.record.slots.len());
        let mut unplaced = Vec::new();
        for (i, outcome) in g.record.slots.iter().enumerate() {
            let slot = u32::try_from(i).unwrap_or(u32::MAX);
            let current = g.current.get(i).cloned().flatten();
            let live = current.as_ref().and_then(|x| self.executors.get(x));
            let (phase, reasons, reason) = match outcome {
                SlotOutcome::Pending => match live.filter(|e| !e.state.is_terminal()) {
                    Some(e) if e.operator_stop || e.kill_requested => {
                        (SlotPhase::Stopping, Vec::new(), None)
                    }
                    Some(e) if e.state == ExecutorState::Running => {
                        (SlotPhase::Running, Vec::new(), None)
                    }
                    Some(_) => (SlotPhase::Launching, Vec::new(), None),
                    None => match self.restart_waits.until(&(fw.id.clone(), gi, slot)) {
                        Some(at) => {
                            let (until_ms, in_ms) = (self.wall(at), at.since(now).0);
                            let why = if self.restart_waits.held(&(fw.id.clone(), gi, slot)) {
                                WaitReason::SingletonHold { until_ms, in_ms }
                            } else {
                                WaitReason::Backoff { until_ms, in_ms }
                            };
                            (SlotPhase::Backoff, vec![why], None)
                        }
                        None => {
                            unplaced.push(slots.len());
                            (SlotPhase::Waiting, Vec::new(), None)
                        }
                    },
                },
                SlotOutcome::Done { .. } => (SlotPhase::Completed, Vec::new(), None),
                SlotOutcome::Killed { .. } => (SlotPhase::Killed, Vec::new(), None),
                SlotOutcome::Failed { reason, .. } => {
                    (SlotPhase::Failed, Vec::new(), Some(reason.clone()))
                }
                // A hole a scale that named executors left: no slot to show.
                SlotOutcome::Removed { .. } => continue,
            };
            let placed =
                matches!(phase, SlotPhase::Launching | SlotPhase::Running | SlotPhase::Stopping);
            // Who preempted the slot's executor (durable in the record, so
            // a new leader says it too): the executor shown, or, for a slot
            // without one, the last it had (docs/design.md#issue-44).
            let preempted_by = match (outcome, live.filter(|e| !e.state.is_terminal())) {
                (SlotOutcome::Pending, Some(e)) => g.record.preempted_by(slot, &e.id),
                (SlotOutcome::Pending, None) => g
                    .record
                    .preempted
                    .get(&slot)
                    .and_then(|p| g.record.preempted_by(slot, &p.executor)),
                _ => None,
            }
            .map(str::to_owned);
            slots.push(SlotStatus {
                preempted_by,
                slot,
                phase,
                executor: if placed { current } else { None },
                worker: if placed { live.map(|e| e.worker.clone()) } else { None },
                reason: reason.or_else(|| reasons.first().map(ToString::to_string)),
                reasons,
                health: live
                    .filter(|_| phase == SlotPhase::Running)
                    .and_then(|e| e.health.as_ref())
                    .map(|h| h.report(now)),
            });
        }
        if !unplaced.is_empty() {
            // The plan is asked once per group, for as many slots as wait
            // (a plan scans the workers: once per slot would cost a large
            // group's reply its slots times the cluster).
            let waiting = u32::try_from(unplaced.len()).unwrap_or(u32::MAX);
            let group_reasons = self.waiting_reasons(&fw.id, g, waiting);
            let placeable = g.placeable_slots();
            for i in unplaced {
                let reasons = if slots[i].slot >= placeable {
                    vec![WaitReason::NotDurable {}]
                } else {
                    group_reasons.clone()
                };
                slots[i].reason = reasons.first().map(ToString::to_string);
                slots[i].reasons = reasons;
            }
        }
        let count = |f: fn(SlotPhase) -> bool| {
            u32::try_from(slots.iter().filter(|s| f(s.phase)).count()).unwrap_or(u32::MAX)
        };
        GroupStatus {
            group: g.record.spec.group.clone(),
            // The slots shown: as declared or scaled, less any hole.
            desired: u32::try_from(slots.len()).unwrap_or(u32::MAX),
            placed: count(|p| {
                matches!(p, SlotPhase::Launching | SlotPhase::Running | SlotPhase::Stopping)
            }),
            running: count(|p| p == SlotPhase::Running),
            done: count(|p| {
                matches!(p, SlotPhase::Completed | SlotPhase::Failed | SlotPhase::Killed)
            }),
            rolling: g.record.active_deployment().is_some(),
            slots,
            priority: g.record.spec.policy.priority,
            stop_after_ms: g.record.spec.launch.disconnect.map(|d| d.stop_after_ms),
            deployment: self.deployment_view(&fw.id, g),
        }
    }

    /// Why the `waiting` slots of group `g` without an executor are not
    /// placed now, ranked, never empty (a slot whose declaration is not
    /// durable yet says so instead: see `group_status`).
    pub(super) fn waiting_reasons(
        &self,
        fid: &FrameworkId,
        g: &GroupState,
        waiting: u32,
    ) -> Vec<WaitReason> {
        if !self.may_place() {
            return vec![WaitReason::Recovering {}];
        }
        let mut spec = g.record.spec.clone();
        spec.slots = waiting;
        let plan = self.candidates().plan(std::slice::from_ref(&spec));
        let reasons = plan.into_iter().next().map(|p| p.reasons).unwrap_or_default();
        self.with_tenant_limit(fid, g, reasons)
    }

    /// `reasons` with the tenant's limit first when the group's next slot
    /// would pass it (it waits for that before anything a worker lacks:
    /// the placement skips it however much room the workers have), then
    /// the slots of higher priority it waits behind ([`Master::with_priority`]);
    /// never empty.
    fn with_tenant_limit(
        &self,
        fid: &FrameworkId,
        g: &GroupState,
        mut reasons: Vec<WaitReason>,
    ) -> Vec<WaitReason> {
        let need = super::executors::Need::of(&g.record.spec);
        if let Some((dimension, in_use, limit)) = self.tenant_limit_shortfall(fid, &need) {
            let tenant = self.framework_tenant(fid).to_owned();
            reasons.retain(|r| !matches!(r, WaitReason::PlacedNext {}));
            reasons.insert(0, WaitReason::TenantLimit { tenant, dimension, in_use, limit });
        }
        self.with_priority(g.record.spec.policy.priority, &mut reasons);
        if reasons.is_empty() {
            reasons.push(WaitReason::PlacedNext {});
        }
        let preempted = self.preempted_for(fid, &g.record.spec.group);
        if preempted > 0 {
            reasons.insert(0, WaitReason::WaitingForPreempted { executors: preempted });
        }
        reasons
    }

    /// Why group `g`'s slots wait, by one pass over the workers (no plan
    /// of its slots first, as `waiting_reasons` makes): for the cluster
    /// state, built for every event poll. Never empty.
    pub(super) fn waiting_reasons_quick(
        &self,
        fid: &FrameworkId,
        g: &GroupState,
    ) -> Vec<WaitReason> {
        if !self.may_place() {
            return vec![WaitReason::Recovering {}];
        }
        let reasons = self.candidates().wait_reasons(&g.record.spec, &Default::default());
        self.with_tenant_limit(fid, g, reasons)
    }

    /// Adds to the `reasons` a slot of `priority` waits for capacity
    /// ([`WaitReason::BehindPriority`], docs/design.md#issue-44): when
    /// open slots of higher priorities wait, they are offered what frees
    /// first, so the slot waits behind them as well as for the capacity.
    /// Ranked after a tenant limit (the slot's own bound), before what the
    /// workers lack. Not added when the slot waits for something no
    /// capacity freed would give it (no worker matches, too large, refused,
    /// recovering, not durable), nor when a worker has room for it now.
    pub(super) fn with_priority(&self, priority: u8, reasons: &mut Vec<WaitReason>) {
        let capacity_only = !reasons.is_empty()
            && reasons.iter().all(|r| {
                !matches!(
                    r,
                    WaitReason::NoMatchingWorker { .. }
                        | WaitReason::UserNotOffered { .. }
                        | WaitReason::TooLarge { .. }
                        | WaitReason::Refused { .. }
                        | WaitReason::Recovering {}
                        | WaitReason::NotDurable {}
                        | WaitReason::PlacedNext {}
                        | WaitReason::NoWorkers { registered: 0 }
                )
            });
        if !capacity_only || priority >= crate::policy::MAX_PRIORITY {
            return;
        }
        let slots = self.open_slots_above(priority);
        if slots > 0 {
            let at = usize::from(matches!(reasons.first(), Some(WaitReason::TenantLimit { .. })));
            reasons.insert(at, WaitReason::BehindPriority { slots });
        }
    }

    /// How many slots of group `gi` of `fw` wait to be placed: open, with
    /// no live executor, not in a restart backoff.
    pub(super) fn unplaced_slots(&self, fw: &FrameworkEntry, gi: usize) -> u32 {
        let g = &fw.groups[gi];
        let live = |i: usize| {
            g.current
                .get(i)
                .and_then(Option::as_ref)
                .and_then(|x| self.executors.get(x))
                .is_some_and(|e| !e.state.is_terminal())
        };
        let n = g
            .record
            .slots
            .iter()
            .enumerate()
            .filter(|(i, outcome)| {
                let slot = u32::try_from(*i).unwrap_or(u32::MAX);
                matches!(outcome, SlotOutcome::Pending)
                    && !live(*i)
                    && !self.restart_waits.contains(&(fw.id.clone(), gi, slot))
            })
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}

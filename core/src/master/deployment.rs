//! Deployments: a changed spec of a declared group replacing its
//! executors, gated on their health (`Message::UpdateGroup`, `regent run
//! --update`, `SubmitJob`; docs/jobs.md, docs/design.md#issue-45).
//!
//! * **Durable first.** The new spec, an era (from the next launch on, the
//!   group's executors run the new spec's digest) and the
//!   [`crate::store::Deployment`] are written into the framework record;
//!   the request is accepted, and anything stopped, only once that write
//!   is durable (docs/design.md#durable-before-acknowledged). A change of
//!   the update policy alone (the digest leaves it out) is no deployment.
//! * **Old from new by spec.** Every leader, a new one after a failover
//!   too, tells an executor of the deployed spec from one of another by the
//!   era it was launched in ([`crate::store::GroupRecord::digest_of`]):
//!   a revert keeps the executors that already run the stable spec.
//! * **Health** is judged by one function, [`instance_health`]: an
//!   executor of the deployed spec is below healthy until it is RUNNING,
//!   *baking* while it has run for less than `min_healthy_time`, healthy
//!   after. A slot whose executor became healthy is added to the durable
//!   `healthy` set; one that stops being healthy before the deployment
//!   ends (it ended, or stopped running) leaves it again: the bake window.
//! * **At most `max_parallel` slots below healthy.** Below healthy: FAILED,
//!   open without a live executor, not RUNNING, being stopped, or baking.
//!   While fewer than `max_parallel` are, the next RUNNING executor of
//!   another spec (lowest slot first; during the canary phase, canary slots
//!   only) is asked to stop (SIGTERM, SIGKILL after the group's kill
//!   grace); its slot is refilled with the deployed spec without charging a
//!   retry. An executor of another spec that is not RUNNING yet is below
//!   healthy already: it is stopped whenever the group is within its
//!   budget (stopping it lowers nothing).
//! * **Canary** N replaces the first N open slots, then waits in
//!   `AwaitingPromotion` (stopping nothing, no progress deadline) until
//!   promoted (or at once with `auto_promote`).
//! * **Succeeded** once no live executor of another spec is left and every
//!   open slot is healthy; the eras no live executor needs are dropped.
//! * **Unrecoverable failures** — an executor of the deployed spec failing
//!   before it ever ran (a start failure), a slot failing for good with
//!   one, three ends of them in one slot (a crash loop), one running for
//!   `healthy_deadline` without becoming healthy, no slot becoming healthy
//!   for `progress_deadline` — fail the deployment. With `auto_revert` and
//!   a spec to revert to, the same write starts the revert: the next
//!   deployment, of the last healthy spec, without a canary phase. A revert
//!   that fails stops ("revert failed too"): no ping-pong.
//! * Nothing is stopped while a new leader recovers (its workers'
//!   executors are not all known yet).
//!
//! Tests: core/tests/deployments.rs, core/tests/rollout.rs,
//! core/tests/job_promises.rs, the simulator's `deploy_down`,
//! `deploy_durable` and `deploy_reverts` invariants (tests/tests/sim_seeds.rs).

use super::{Action, AfterWrite, ExecutorEntry, Master};
use crate::api::StopSignal;
use crate::ids::{ConnId, ExecutorId, FrameworkId, WorkerId};
use crate::limits;
use crate::policy::UpdatePolicy;
use crate::protocol::{ExecutorState, GroupSpec, Message};
use crate::store::{spec_digest, Deployment, DeploymentState, Era, SlotOutcome};
use crate::time::Millis;

/// How long a stopped old executor may take to exit after SIGTERM when its
/// group names no kill grace (the worker's own default).
const DEFAULT_GRACE: Millis = Millis(3_000);

/// Ends of executors of the deployed spec in one slot that make a crash
/// loop (an unrecoverable failure).
pub const CRASH_LOOP_ENDS: u32 = 3;

/// How healthy one executor of the deployed spec is ([`instance_health`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instance {
    /// Not running (yet), or being stopped.
    Below,
    /// Running, for `ran_ms` so far, and not yet healthy: less than
    /// `min_healthy_time` (passing, for a group with checks), or its
    /// checks not passing.
    Baking {
        /// How long it has run.
        ran_ms: u64,
        /// In how long it is healthy if nothing changes; `None` while its
        /// checks do not pass (a report of theirs will tell).
        healthy_in: Option<u64>,
    },
    /// Running (passing) for at least `min_healthy_time`.
    Healthy,
}

/// How long `e` has run by this leader's view: the longer of what it saw
/// since RUNNING and what the worker reported (a run that began under an
/// earlier leader).
pub fn ran_ms(e: &ExecutorEntry, now: Millis) -> u64 {
    let seen = e.running_since.map_or(0, |t| now.0.saturating_sub(t.0));
    seen.max(e.ran_ms.unwrap_or(0))
}

/// The one health judgement of deployments: `e` is healthy once RUNNING
/// for `min_healthy_time_ms`; for a group with health checks (`checked`),
/// once its checks, run by its worker, have passed for that long (the
/// worker's count of how long, carried across a failover; docs/jobs.md,
/// "Deployments"). No health report yet, or one pending or failing: not
/// healthy.
pub fn instance_health(
    e: &ExecutorEntry,
    now: Millis,
    min_healthy_time_ms: u64,
    checked: bool,
) -> Instance {
    if e.state != ExecutorState::Running || e.operator_stop {
        return Instance::Below;
    }
    let ran_ms = ran_ms(e, now);
    let held_ms = if checked {
        match &e.health {
            Some(h) if h.status == crate::protocol::HealthStatus::Passing => {
                Some(h.for_ms.saturating_add(now.since(h.at).0))
            }
            _ => None,
        }
    } else {
        Some(ran_ms)
    };
    match held_ms {
        Some(held) if held >= min_healthy_time_ms => Instance::Healthy,
        Some(held) => Instance::Baking { ran_ms, healthy_in: Some(min_healthy_time_ms - held) },
        None => Instance::Baking { ran_ms, healthy_in: None },
    }
}

/// What one pass over a deploying group found.
#[derive(Default)]
struct Pass {
    /// Slots below healthy or baking (the budget's charge).
    charged: u32,
    /// Running executors of another spec, by slot, lowest first.
    old_running: Vec<(u32, ExecutorId, WorkerId)>,
    /// Executors of another spec not RUNNING (yet), by slot.
    old_down: Vec<(u32, ExecutorId, WorkerId)>,
    /// Slots whose executor of the deployed spec just became healthy.
    became_healthy: Vec<u32>,
    /// Slots in `healthy` whose executor no longer is.
    left_healthy: Vec<u32>,
    /// Open slots (Pending), lowest first.
    open: Vec<u32>,
    /// An unrecoverable failure seen.
    failure: Option<String>,
    /// The nearest instant a baking executor becomes healthy.
    wake: Option<Millis>,
}

impl Master {
    /// `UpdateGroup` from a subscriber.
    pub(super) fn update_group(
        &mut self,
        now: Millis,
        conn: ConnId,
        request: u64,
        spec: GroupSpec,
        max_parallel: u32,
        out: &mut Vec<Action>,
    ) {
        let Some(id) = self.subscription_of(conn, request, out) else { return };
        let refuse = |m: &Self, reason: String| m.refuse_request(conn, request, reason);
        if max_parallel == 0 {
            out.push(refuse(
                self,
                format!("update of group {:?}: max_parallel must be at least 1", spec.group),
            ));
            return;
        }
        let fw = self.frameworks.get(&id).expect("subscribed_framework checked");
        let Some(gi) = fw.groups.iter().position(|g| g.record.spec.group == spec.group) else {
            // Not declared yet: an update declares it.
            return self.declare_group(conn, request, spec, out);
        };
        let g = &fw.groups[gi];
        if g.record.spec == spec {
            return self.declare_group(conn, request, spec, out);
        }
        if let Some(problem) = limits::group_spec_problem(&spec, limits::GroupKey::wire_name) {
            out.push(refuse(self, problem.message(&spec.group)));
            return;
        }
        if !g.declared_durably() {
            let reason = format!(
                "group {:?} is still being declared; update it once that is done (nothing was changed)",
                spec.group
            );
            out.push(refuse(self, reason));
            return;
        }
        if spec.slots != g.record.spec.slots {
            let reason = format!(
                "an update does not change a group's count (group {:?}: {} -> {}); scale it with `regent scale {id} {} {}` (nothing was changed)",
                spec.group, g.record.spec.slots, spec.slots, spec.group, spec.slots
            );
            out.push(refuse(self, reason));
            return;
        }
        // Conservative: the new spec counted as one more group.
        if let Some(reason) = self.record_limit(&id, &spec) {
            out.push(refuse(self, reason));
            return;
        }
        let group = spec.group.clone();
        self.begin_deployment(now, &id, gi, spec, max_parallel);
        let then = vec![
            AfterWrite::Rolling { framework: id.clone(), group },
            AfterWrite::Accept { conn, request },
            AfterWrite::Place,
        ];
        self.persist_framework(&id, then, out);
    }

    /// Gives group `gi` of framework `id` the new `spec` and, unless only
    /// its update policy changed, starts deploying it (the group's update
    /// policy; without one, the defaults with the submission's
    /// `max_parallel`). Stops nothing: the caller writes the record with
    /// [`AfterWrite::Rolling`] after it.
    pub(super) fn begin_deployment(
        &mut self,
        now: Millis,
        id: &FrameworkId,
        gi: usize,
        spec: GroupSpec,
        max_parallel: u32,
    ) {
        let wall = self.wall(now);
        let from = (self.epoch.0, self.next_launch + 1);
        let Some(g) = self.frameworks.get_mut(id).and_then(|f| f.groups.get_mut(gi)) else {
            return;
        };
        let target = spec_digest(&spec);
        let prior = std::mem::replace(&mut g.record.spec, spec);
        if target == spec_digest(&prior) && g.record.active_deployment().is_none() {
            // The update policy alone changed: no new version.
            return;
        }
        let policy = match g.record.spec.policy.update.as_deref() {
            Some(u) => *u,
            None => UpdatePolicy { max_parallel, ..UpdatePolicy::default() },
        };
        // The last healthy spec: the prior one, unless a deployment failed
        // into it without a revert (then what that one would have reverted
        // to), or a deployment is under way (then its own target to revert
        // to; a revert's is the stable spec it deploys).
        let revert_to = match &g.record.deployment {
            None => Some(Box::new(prior)),
            Some(d) => match &d.state {
                DeploymentState::Succeeded => Some(Box::new(prior)),
                _ if d.revert_of.is_some() && d.state.is_active() => Some(Box::new(prior)),
                _ => d.revert_to.clone(),
            },
        };
        let seq = g.record.deployment.as_ref().map_or(1, |d| d.seq + 1);
        let deployment = Deployment {
            seq,
            target,
            state: if policy.canary > 0 {
                DeploymentState::Canary
            } else {
                DeploymentState::Rolling
            },
            policy,
            revert_to,
            revert_of: None,
            started_ms: wall,
            progress_ms: wall,
            healthy: Default::default(),
            ends: Default::default(),
        };
        self.start_deployment(id, gi, deployment, from);
    }

    /// Makes `deployment` the group's (its spec already in the record):
    /// appends its era from launch `from`, reopens the slots that failed.
    fn start_deployment(
        &mut self,
        id: &FrameworkId,
        gi: usize,
        deployment: Deployment,
        from: (u64, u64),
    ) {
        let Some(g) = self.frameworks.get_mut(id).and_then(|f| f.groups.get_mut(gi)) else {
            return;
        };
        if g.record.eras.is_empty() {
            // Every executor so far runs the spec before this one.
            let digest = deployment.revert_to.as_deref().map_or(0, spec_digest);
            g.record.eras.push(Era { from_epoch: 0, from_launch: 0, digest });
        }
        let era = Era { from_epoch: from.0, from_launch: from.1, digest: deployment.target };
        match g.record.eras.last_mut() {
            // Two deployments before a launch: the later one's spec.
            Some(last) if (last.from_epoch, last.from_launch) == from => *last = era,
            _ => g.record.eras.push(era),
        }
        if g.record.eras.len() > crate::store::MAX_ERAS {
            g.record.eras.remove(0);
        }
        g.record.deployment = Some(deployment);
        // A new version gets its own chance: slots that failed (under the
        // previous spec, or a broken update that stopped) are open again,
        // with the group's retry budget and their restart state afresh.
        let failed: Vec<u32> = (0..g.record.slots.len() as u32)
            .filter(|s| matches!(g.record.slots[*s as usize], SlotOutcome::Failed { .. }))
            .collect();
        for slot in &failed {
            g.record.slots[*slot as usize] = SlotOutcome::Pending;
            super::restarts::clear(&mut g.record, *slot);
        }
        if !failed.is_empty() {
            g.record.retries_used = 0;
        }
        // Stops nothing until the write is durable.
        g.rolling = false;
        // The reopened slots are open in the index placement reads
        // (sim seed 10148, docs/design.md#simulator-seeds, found it behind).
        for slot in failed {
            self.refresh_slot(id, gi, slot);
        }
    }

    /// Goes on with every durable deployment under way (see the module
    /// docs), and sets when to look again. Called after every event but
    /// heartbeats.
    pub(super) fn deploy(&mut self, now: Millis, out: &mut Vec<Action>) {
        self.deployment_wake = None;
        // Not while recovering: executors the workers have not reported yet
        // would look like slots without one.
        if !self.may_place() {
            return;
        }
        let deploying: Vec<(FrameworkId, usize)> = self
            .frameworks
            .iter()
            .flat_map(|(id, f)| {
                f.groups
                    .iter()
                    .enumerate()
                    .filter(|(_, g)| g.rolling && g.record.active_deployment().is_some())
                    .map(move |(gi, _)| (id.clone(), gi))
            })
            .collect();
        for (id, gi) in deploying {
            self.deploy_group(now, &id, gi, out);
        }
    }

    /// When [`Master::deploy`] should look again (a baking executor
    /// becoming healthy, a deadline), if ever.
    pub(super) fn deployment_deadline(&self) -> Option<Millis> {
        self.leads().then_some(self.deployment_wake).flatten()
    }

    fn wake_at(&mut self, at: Millis) {
        self.deployment_wake = Some(self.deployment_wake.map_or(at, |w| w.min(at)));
    }

    /// One group's look: what is below healthy, what became or stopped
    /// being healthy, what failed.
    fn survey(&self, now: Millis, id: &FrameworkId, gi: usize) -> Option<Pass> {
        let g = &self.frameworks.get(id)?.groups[gi];
        let d = g.record.active_deployment()?;
        let policy = d.policy;
        let mut pass = Pass::default();
        for (slot, outcome) in g.record.slots.iter().enumerate() {
            let slot = slot as u32;
            match outcome {
                SlotOutcome::Pending => pass.open.push(slot),
                // A failed slot runs nothing: below healthy.
                SlotOutcome::Failed { .. } => {
                    pass.charged += 1;
                    continue;
                }
                // Finished (a batch slot's exit 0, a kill) or removed by
                // name: left alone.
                SlotOutcome::Done { .. }
                | SlotOutcome::Killed { .. }
                | SlotOutcome::Removed { .. } => continue,
            }
            let live = g.current.get(slot as usize).cloned().flatten();
            let e = live.and_then(|x| self.executors.get(&x)).filter(|e| !e.state.is_terminal());
            let Some(e) = e else {
                pass.charged += 1;
                if d.healthy.contains(&slot) {
                    pass.left_healthy.push(slot);
                }
                continue;
            };
            let target = g.record.digest_of(&e.id) == d.target;
            if !target {
                if d.healthy.contains(&slot) {
                    pass.left_healthy.push(slot);
                }
                // Being stopped (by us, an operator or a preemption):
                // below healthy (`--api-jobs --preemption`:
                // sim seed 1158, docs/design.md#simulator-seeds).
                if e.operator_stop {
                    pass.charged += 1;
                } else if e.state == ExecutorState::Running {
                    pass.old_running.push((slot, e.id.clone(), e.worker.clone()));
                } else {
                    pass.charged += 1;
                    pass.old_down.push((slot, e.id.clone(), e.worker.clone()));
                }
                continue;
            }
            let checked = !g.record.spec.launch.checks.is_empty();
            match instance_health(e, now, policy.min_healthy_time_ms, checked) {
                Instance::Below => {
                    pass.charged += 1;
                    if d.healthy.contains(&slot) {
                        pass.left_healthy.push(slot);
                    }
                }
                Instance::Baking { ran_ms, healthy_in } => {
                    pass.charged += u32::from(!self.config.unsafe_deploy_uncharged_baking);
                    if d.healthy.contains(&slot) {
                        pass.left_healthy.push(slot);
                    }
                    if ran_ms >= policy.healthy_deadline_ms {
                        pass.failure.get_or_insert(format!(
                            "healthy_deadline {} passed on slot {slot}",
                            human(policy.healthy_deadline_ms)
                        ));
                    }
                    // Healthy by then if nothing changes; else look again at
                    // its healthy_deadline (a health report wakes us sooner).
                    let left = healthy_in
                        .unwrap_or_else(|| policy.healthy_deadline_ms.saturating_sub(ran_ms))
                        .max(1);
                    pass.wake =
                        Some(pass.wake.map_or(now + Millis(left), |w| w.min(now + Millis(left))));
                }
                Instance::Healthy => {
                    if !d.healthy.contains(&slot) {
                        pass.became_healthy.push(slot);
                    }
                }
            }
        }
        Some(pass)
    }

    fn deploy_group(&mut self, now: Millis, id: &FrameworkId, gi: usize, out: &mut Vec<Action>) {
        let Some(pass) = self.survey(now, id, gi) else { return };
        let wall = self.wall(now);
        if let Some(at) = pass.wake {
            self.wake_at(at);
        }
        let g = &self.frameworks[id].groups[gi];
        let Some(d) = g.record.active_deployment().cloned() else { return };
        let grace = g.record.spec.launch.kill_grace_ms.map_or(DEFAULT_GRACE, Millis);
        if let Some(reason) = pass.failure {
            return self.fail_deployment(now, id, gi, reason, out);
        }
        let progress = d.policy.progress_deadline_ms;
        if progress > 0 && d.state != DeploymentState::AwaitingPromotion {
            // By the wall clock the progress was stored with, but never
            // later than the policy's deadline from when this leader first
            // judged that progress (its wall clock may be behind the one
            // that wrote it: a failover must not stretch the deadline).
            let key = (d.seq, d.progress_ms, d.state == DeploymentState::Canary);
            let fw = self.frameworks.get_mut(id).expect("deploying groups are of live frameworks");
            let g = &mut fw.groups[gi];
            let at = match g.progress_due {
                Some(p) if (p.seq, p.progress_ms, p.canary) == key => p.at,
                _ => {
                    let left = d.progress_ms.saturating_add(progress).saturating_sub(wall);
                    let at = now + Millis(left.min(progress));
                    let (seq, progress_ms, canary) = key;
                    g.progress_due =
                        Some(super::frameworks::ProgressDue { seq, progress_ms, canary, at });
                    at
                }
            };
            if now >= at || wall >= d.progress_ms.saturating_add(progress) {
                let reason = format!(
                    "progress_deadline {} passed without a slot becoming healthy",
                    human(progress)
                );
                return self.fail_deployment(now, id, gi, reason, out);
            }
            self.wake_at(at);
        }
        // The bake window and progress: one write for every change.
        let mut changed = false;
        let mut d = d;
        for slot in &pass.left_healthy {
            changed |= d.healthy.remove(slot);
        }
        if !pass.became_healthy.is_empty() {
            d.healthy.extend(pass.became_healthy.iter().copied());
            d.progress_ms = wall;
            changed = true;
        }
        let canaries: Vec<u32> = pass.open.iter().copied().take(d.policy.canary as usize).collect();
        if d.state == DeploymentState::Canary && canaries.iter().all(|s| d.healthy.contains(s)) {
            d.state = if d.policy.auto_promote {
                DeploymentState::Rolling
            } else {
                DeploymentState::AwaitingPromotion
            };
            d.progress_ms = wall;
            changed = true;
        }
        let old_live = {
            let g = &self.frameworks[id].groups[gi];
            self.executors
                .of_framework(id)
                .filter(|e| e.group == g.record.spec.group && !e.state.is_terminal())
                .any(|e| g.record.digest_of(&e.id) != d.target)
        };
        let done = d.state == DeploymentState::Rolling
            && !old_live
            && pass.charged == 0
            && pass.open.iter().all(|s| d.healthy.contains(s));
        if done {
            d.state = DeploymentState::Succeeded;
            changed = true;
        }
        let fw = self.frameworks.get_mut(id).expect("deploying groups are of live frameworks");
        let g = &mut fw.groups[gi];
        if changed {
            g.record.deployment = Some(d.clone());
            if done {
                g.rolling = false;
                prune_eras(&mut g.record, self.executors.of_framework(id));
            }
            self.persist_framework(id, Vec::new(), out);
        }
        if done {
            return;
        }
        let budget = d.policy.max_parallel.saturating_sub(pass.charged) as usize;
        let eligible = |slot: &u32| match d.state {
            DeploymentState::Canary => canaries.contains(slot),
            DeploymentState::Rolling => true,
            _ => false,
        };
        // One not running yet is below healthy already: stopping it lowers
        // nothing, so it goes while the group is within its budget (a
        // version stuck starting is replaced by the revert).
        let within = pass.charged <= d.policy.max_parallel;
        let to_stop: Vec<(ExecutorId, WorkerId)> = pass
            .old_down
            .into_iter()
            .filter(|(slot, ..)| within && eligible(slot))
            .chain(pass.old_running.into_iter().filter(|(slot, ..)| eligible(slot)).take(budget))
            .map(|(_, e, w)| (e, w))
            .collect();
        for (executor, worker) in to_stop {
            let Some(conn) = self.workers.entries.get(&worker).and_then(|w| w.conn) else {
                // Stopped once its worker is connected again.
                continue;
            };
            if let Some(mut x) = self.executors.get_mut(&executor) {
                x.stop_by_operator();
                x.owe(super::Owed::Stop { grace, signal: StopSignal::Term });
            }
            let signal = StopSignal::Term;
            let msg = Message::StopExecutorOnWorker { epoch: self.epoch, executor, grace, signal };
            out.push(Action::Send { conn, msg });
        }
    }

    /// The group's deployment under way failed for `reason`: it stops; with
    /// `auto_revert` and a spec to revert to, the same write starts the
    /// revert (see the module docs).
    fn fail_deployment(
        &mut self,
        now: Millis,
        id: &FrameworkId,
        gi: usize,
        reason: String,
        out: &mut Vec<Action>,
    ) {
        self.mark_failed(now, id, gi, reason);
        self.persist_framework(id, Vec::new(), out);
    }

    /// Marks the group's deployment failed for `reason` in memory (the
    /// caller writes the record), starting the revert if there is one.
    fn mark_failed(&mut self, now: Millis, id: &FrameworkId, gi: usize, reason: String) {
        let wall = self.wall(now);
        let no_revert = self.config.unsafe_no_auto_revert;
        let from = (self.epoch.0, self.next_launch + 1);
        let Some(g) = self.frameworks.get_mut(id).and_then(|f| f.groups.get_mut(gi)) else {
            return;
        };
        let Some(d) = g.record.deployment.as_mut().filter(|d| d.state.is_active()) else {
            return;
        };
        let seq = d.seq;
        let why = match d.revert_of {
            Some(of) => format!("revert failed too ({reason}); deployment {of} is not reverted"),
            None => reason,
        };
        d.state = DeploymentState::Failed { reason: why.clone() };
        let revert = d
            .revert_to
            .take()
            .filter(|_| d.policy.auto_revert && d.revert_of.is_none() && !no_revert);
        let policy = UpdatePolicy { canary: 0, ..d.policy };
        let slot = g.last_end.as_ref().map_or(0, |(s, _)| *s);
        let end = g.last_end.as_ref().map_or(String::new(), |(_, w)| format!("{w}; "));
        let Some(stable) = revert else {
            g.rolling = false;
            g.last_end = Some((slot, format!("{end}deployment {seq} failed: {why}")));
            return;
        };
        g.last_end =
            Some((slot, format!("{end}deployment {seq} failed: {why}; reverted by {}", seq + 1)));
        g.reverted = Some((seq, why));
        let target = spec_digest(&stable);
        g.record.spec = *stable;
        let revert = Deployment {
            seq: seq + 1,
            target,
            policy,
            state: DeploymentState::Rolling,
            revert_to: None,
            revert_of: Some(seq),
            started_ms: wall,
            progress_ms: wall,
            healthy: Default::default(),
            ends: Default::default(),
        };
        self.start_deployment(id, gi, revert, from);
        // The failing write itself makes the revert durable: it may act at
        // once after it.
        if let Some(g) = self.frameworks.get_mut(id).and_then(|f| f.groups.get_mut(gi)) {
            g.rolling = true;
        }
    }

    /// Executor `e` of a group ended in `state` after running `ran_ms`
    /// (its end is being recorded, `slot_failed` when its slot failed for
    /// good): an end of the deployed spec is counted, and a start failure,
    /// a crash loop or a failed slot fails the deployment, in the write
    /// that records the end.
    pub(super) fn deployment_saw_end(
        &mut self,
        now: Millis,
        e: &ExecutorEntry,
        state: &ExecutorState,
        ran_ms: u64,
        slot_failed: bool,
    ) {
        let Some(fw) = self.frameworks.get_mut(&e.framework) else { return };
        let Some(gi) = fw.groups.iter().position(|g| g.record.spec.group == e.group) else {
            return;
        };
        let g = &mut fw.groups[gi];
        let digest = g.record.digest_of(&e.id);
        let Some(d) = g.record.deployment.as_mut().filter(|d| d.state.is_active()) else {
            return;
        };
        if digest != d.target {
            return;
        }
        // Its own end, not one an operator, a lost worker, a refused
        // launch or a cut-off singleton made.
        let own = match state {
            ExecutorState::Exited { .. } => true,
            ExecutorState::Failed { reason } => {
                !crate::launch::is_refused_launch(reason) && !crate::launch::is_cut_off(reason)
            }
            _ => false,
        } && !e.operator_stop
            && !e.kill_requested;
        if !own {
            return;
        }
        let ends = d.ends.entry(e.slot).or_insert(0);
        *ends = ends.saturating_add(1);
        let ends = *ends;
        d.healthy.remove(&e.slot);
        let never_ran = e.running_since.is_none() && ran_ms == 0;
        let reason = if slot_failed {
            Some(format!("slot {} failed with {}", e.slot, e.id))
        } else if never_ran && matches!(state, ExecutorState::Failed { .. }) {
            let why = match state {
                ExecutorState::Failed { reason } => reason.chars().take(200).collect(),
                _ => String::new(),
            };
            Some(format!("{} failed to start on slot {} ({why})", e.id, e.slot))
        } else if ends >= CRASH_LOOP_ENDS {
            Some(format!("crash loop: {ends} ends on slot {}", e.slot))
        } else {
            None
        };
        if let Some(reason) = reason {
            self.mark_failed(now, &e.framework.clone(), gi, reason);
        }
    }
}

impl Master {
    /// `PromoteDeployment` from `asker`: every deployment of `job` (of
    /// `group` only, if named) awaiting promotion goes on rolling, in one
    /// write; accepted once it is durable. Refused, naming the job and
    /// group, when none awaits promotion.
    pub(super) fn promote_deployment(
        &mut self,
        now: Millis,
        asker: super::Origin,
        request: u64,
        job: FrameworkId,
        group: Option<String>,
        out: &mut Vec<Action>,
    ) {
        let wall = self.wall(now);
        let Some(fw) = self.frameworks.get_mut(&job) else {
            out.push(self.refuse_request(asker, request, format!("no job {job}")));
            return;
        };
        let mut promoted = 0;
        let mut states = Vec::new();
        for g in fw.groups.iter_mut() {
            if group.as_ref().is_some_and(|name| *name != g.record.spec.group) {
                continue;
            }
            let state = g.record.deployment.as_ref().map_or("none", |d| d.state.name());
            states.push(format!("{}: {state}", g.record.spec.group));
            let Some(d) = g.record.deployment.as_mut() else { continue };
            if d.state == DeploymentState::AwaitingPromotion {
                d.state = DeploymentState::Rolling;
                d.progress_ms = wall;
                promoted += 1;
            }
        }
        if promoted == 0 {
            let what = match &group {
                Some(g) if states.is_empty() => format!("job {job} has no group {g:?}"),
                _ => format!(
                    "job {job} has no deployment awaiting promotion ({})",
                    states.join(", ")
                ),
            };
            out.push(self.refuse_request(asker, request, format!("{what}; nothing was changed")));
            return;
        }
        let then = vec![AfterWrite::AcceptTo { to: asker, request }];
        self.persist_framework(&job, then, out);
    }
}

/// Drops the eras no live executor of the group was launched in (the last
/// one always stays).
fn prune_eras<'a>(
    record: &mut crate::store::GroupRecord,
    executors: impl Iterator<Item = &'a ExecutorEntry>,
) {
    let oldest = executors
        .filter(|e| e.group == record.spec.group && !e.state.is_terminal())
        .filter_map(|e| e.id.launched())
        .min();
    let Some(oldest) = oldest else {
        let last = record.eras.last().copied();
        record.eras = last.into_iter().collect();
        return;
    };
    // The newest era starting at or before the oldest live launch is the
    // first one still needed.
    let keep_from =
        record.eras.iter().rposition(|e| (e.from_epoch, e.from_launch) <= oldest).unwrap_or(0);
    record.eras.drain(..keep_from);
}

/// A duration as the job file writes it: `5m`, `10s`, `1500ms`.
fn human(ms: u64) -> String {
    match ms {
        ms if ms >= 60_000 && ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms >= 1_000 && ms % 1_000 == 0 => format!("{}s", ms / 1_000),
        ms => format!("{ms}ms"),
    }
}

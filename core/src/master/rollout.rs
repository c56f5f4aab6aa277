//! Rolling updates of a declared group (`Message::UpdateGroup`, `regent run
//! --update`).
//!
//! * **Durable first.** The new spec and the rollout
//!   ([`crate::store::Rollout`]: `max_parallel`, and the epoch and launch
//!   number of the update) are written into the framework record; the
//!   request is accepted, and old executors are stopped, only once that
//!   write is durable (docs/design.md#durable-before-acknowledged). Every slot placed from then on runs
//!   the new spec.
//! * **Old from new by id.** An executor id ends in the epoch and launch
//!   number it was launched at, so every leader (a new one after a failover
//!   too) tells the executors launched before the update from those after
//!   ([`crate::store::Rollout::predates`]).
//! * **At most `max_parallel` slots down.** A slot of the group is down
//!   while it waits for an executor, its executor is not RUNNING yet, or its
//!   old executor is being stopped. While fewer than `max_parallel` are
//!   down, the next old RUNNING executor (lowest slot first) is asked to
//!   stop (SIGTERM, SIGKILL after the group's kill grace); its slot is
//!   refilled with the new spec without charging a retry (as a drain's).
//!   Slots that finished (a batch slot's exit 0, a kill) are left alone.
//! * **Done** when no live executor of the group predates the update and
//!   every open slot runs a new one: the rollout is cleared from the record.
//!   Nothing is stopped while a new leader recovers (its workers' executors
//!   are not all known yet).
//! * A group's count is not changed by an update (`regent scale` does that):
//!   an update changing it is refused, naming both counts. A spec equal to
//!   the declared one is a declaration (accepted again, idempotently).
//!
//! Tests: core/tests/rollout.rs, core/tests/job_promises.rs, the
//! simulator's `rollout_down` invariant (tests/tests/sim_seeds.rs).

use super::{Action, AfterWrite, Master};
use crate::api::StopSignal;
use crate::ids::{ConnId, ExecutorId, FrameworkId, WorkerId};
use crate::limits;
use crate::protocol::{ExecutorState, GroupSpec, Message};
use crate::store::{Deployment, DeploymentState, Era, SlotOutcome};
use crate::time::Millis;

/// How long a stopped old executor may take to exit after SIGTERM when its
/// group names no kill grace (the worker's own default).
const DEFAULT_GRACE: Millis = Millis(3_000);

impl Master {
    /// `UpdateGroup` from a subscriber.
    pub(super) fn update_group(
        &mut self,
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
        self.begin_rollout(&id, gi, spec, max_parallel);
        let then = vec![
            AfterWrite::Rolling { framework: id.clone(), group },
            AfterWrite::Accept { conn, request },
            AfterWrite::Place,
        ];
        self.persist_framework(&id, then, out);
    }

    /// Gives group `gi` of framework `id` the new `spec` and starts its
    /// rollout (at most `max_parallel` slots down at once). Stops nothing:
    /// the caller writes the record with [`AfterWrite::Rolling`] after it.
    pub(super) fn begin_rollout(
        &mut self,
        id: &FrameworkId,
        gi: usize,
        spec: GroupSpec,
        max_parallel: u32,
    ) {
        let Some(fw) = self.frameworks.get_mut(id) else { return };
        let Some(g) = fw.groups.get_mut(gi) else { return };
        let from = (self.epoch.0, self.next_launch + 1);
        let seq = g.record.deployment.as_ref().map_or(1, |d| d.seq + 1);
        if g.record.eras.is_empty() {
            let digest = crate::store::spec_digest(&g.record.spec);
            g.record.eras.push(Era { from_epoch: 0, from_launch: 0, digest });
        }
        let target = crate::store::spec_digest(&spec);
        g.record.eras.push(Era { from_epoch: from.0, from_launch: from.1, digest: target });
        if g.record.eras.len() > crate::store::MAX_ERAS {
            g.record.eras.remove(0);
        }
        let policy =
            crate::policy::UpdatePolicy { max_parallel, ..spec.policy.update_or_default() };
        g.record.spec = spec;
        g.record.deployment = Some(Deployment {
            seq,
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

    /// Goes on with every durable rollout: stops the next old executors of
    /// each rolling group while fewer than its `max_parallel` slots are down,
    /// and clears the rollouts that are done. Called after every event but
    /// heartbeats (it looks at the rolling groups only).
    pub(super) fn roll(&mut self, out: &mut Vec<Action>) {
        // Not while recovering: executors the workers have not reported yet
        // would look like slots without one.
        if !self.may_place() {
            return;
        }
        let rolling: Vec<(FrameworkId, usize)> = self
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
        for (id, gi) in rolling {
            self.roll_group(&id, gi, out);
        }
    }

    fn roll_group(&mut self, id: &FrameworkId, gi: usize, out: &mut Vec<Action>) {
        let g = &self.frameworks[id].groups[gi];
        let Some(d) = g.record.active_deployment() else { return };
        let (target, max_parallel) = (d.target, d.policy.max_parallel);
        let mut down = 0u32;
        let mut to_stop: Vec<(ExecutorId, WorkerId)> = Vec::new();
        // Every slot the record holds counts, those of a scale still being
        // written too: a slot down is down whichever write made it.
        for (slot, outcome) in g.record.slots.iter().enumerate() {
            match outcome {
                SlotOutcome::Pending => {}
                // A failed slot is down too: it runs nothing.
                SlotOutcome::Failed { .. } => {
                    down += 1;
                    continue;
                }
                // Finished (a batch slot's exit 0, a kill) or removed by
                // name: left alone.
                SlotOutcome::Done { .. }
                | SlotOutcome::Killed { .. }
                | SlotOutcome::Removed { .. } => continue,
            }
            let e = g.current.get(slot).cloned().flatten().and_then(|x| self.executors.get(&x));
            let Some(e) = e.filter(|e| !e.state.is_terminal()) else {
                down += 1;
                continue;
            };
            let old = g.record.digest_of(&e.id) != target;
            // Being stopped, old or new (a new one a preemption or an
            // operator's kill with refill stops): down (`--api-jobs
            // --preemption`: sim seed 1158 (docs/design.md#simulator-seeds)).
            if e.operator_stop {
                down += 1;
            } else if old && e.state == ExecutorState::Running {
                to_stop.push((e.id.clone(), e.worker.clone()));
            } else if e.state != ExecutorState::Running {
                down += 1;
            }
        }
        // Every live old executor of the group, in a current slot or not (a
        // slot refilled while an earlier executor of it still ran).
        let old_live = self
            .executors
            .of_framework(id)
            .filter(|e| e.group == g.record.spec.group && !e.state.is_terminal())
            .any(|e| g.record.digest_of(&e.id) != target);
        let grace = g.record.spec.launch.kill_grace_ms.map_or(DEFAULT_GRACE, Millis);
        // Done once nothing old runs and every open slot runs a new
        // executor (an old one on a worker that has not reported yet would
        // show up as a slot without one).
        if !old_live && down == 0 {
            let fw = self.frameworks.get_mut(id).expect("rolling groups are of live frameworks");
            let g = &mut fw.groups[gi];
            if let Some(d) = &mut g.record.deployment {
                d.state = DeploymentState::Succeeded;
            }
            g.rolling = false;
            self.persist_framework(id, Vec::new(), out);
            return;
        }
        let budget = max_parallel.saturating_sub(down) as usize;
        for (executor, worker) in to_stop.into_iter().take(budget) {
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

    /// A slot of a rolling group failed for good with executor `e`: if `e`
    /// runs the new spec, the new version fails and the rollout stops here
    /// (cleared from the record in the write that records the failure):
    /// no more old executors are stopped, and those still running keep
    /// running (docs/jobs.md: at most `max_parallel` slots down, failed ones
    /// included). A later update, a fixed spec, reopens the failed slot.
    pub(super) fn halt_rollout_on_failure(&mut self, e: &super::ExecutorEntry) {
        let Some(g) = self.frameworks.get_mut(&e.framework).and_then(|f| f.group_mut(&e.group))
        else {
            return;
        };
        let Some(target) = g.record.active_deployment().map(|d| d.target) else { return };
        if g.record.digest_of(&e.id) != target {
            return;
        }
        if let Some(d) = &mut g.record.deployment {
            d.state = DeploymentState::Failed { reason: "the new version fails".into() };
        }
        g.rolling = false;
        let why = g.last_end.as_ref().map_or(String::new(), |(_, why)| why.clone());
        g.last_end = Some((e.slot, format!("{why}; the rollout stopped: the new version fails")));
    }
}

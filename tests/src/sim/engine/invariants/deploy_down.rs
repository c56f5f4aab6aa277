//! A deployment never has more than `max_parallel` slots below healthy,
//! failed ones included (docs/design.md#issue-45 item 5, docs/jobs.md,
//! "Deployments"; it replaces the rollout's `rollout_down`): whenever a
//! leader asks a worker to stop an old executor of a deploying group
//! (`StopExecutorOnWorker`), the group's slots below healthy at that
//! leader, counting the one being stopped, are at most the deployment's
//! `max_parallel`. A slot is below healthy when it FAILED, or is open
//! without a live executor, or its executor is not RUNNING, or is being
//! stopped, or runs the deployed spec and is still baking (not yet healthy
//! by `deployment::instance_health`: RUNNING, and for a group with checks
//! passing them, for `min_healthy_time`).
//! Issue 41 (docs/design.md#issue-41)'s fourth scenario: a new command that cannot start failed slot
//! 0, and the rollout went on to stop the healthy slot 1, and so on, until
//! nothing ran (failed slots did not count as down). A drain's stops
//! (an operator's, on the drained worker), a scale's stops of the
//! executors it names and a stop sent again are not the deployment's
//! decisions.

use crate::sim::engine::{parse_executor, World};
use regent_core::master::{instance_health, Instance};
use regent_core::protocol::ExecutorState;
use regent_core::store::SlotOutcome;
use regent_core::ExecutorId;

pub(crate) fn on_stop(w: &World, m: usize, x: &ExecutorId) -> Result<(), String> {
    let Some((fw, group, _)) = parse_executor(x) else { return Ok(()) };
    let master = w.masters[m].master();
    let Some(f) = master.frameworks().find(|f| f.id == fw) else { return Ok(()) };
    let Some(g) = f.groups.iter().find(|g| g.record.spec.group == group) else { return Ok(()) };
    let Some(d) = g.record.active_deployment() else { return Ok(()) };
    let (target, max_parallel) = (d.target, d.policy.max_parallel);
    let min_healthy = d.policy.min_healthy_time_ms;
    let checked = !g.record.spec.launch.checks.is_empty();
    let now = w.node_now(crate::sim::engine::Node::Master(m));
    // Only executors of another spec than the deployed one are its to stop.
    if g.record.digest_of(x) == target {
        return Ok(());
    }
    // An operator's drain stops what runs on its worker whatever a
    // rollout's `max_parallel`: not the rollout's decision.
    // An operator's scale that names the executor stops it whatever a
    // rollout's `max_parallel`: not the rollout's decision either.
    if w.obs.named_sent.contains(x) {
        return Ok(());
    }
    let on_drained =
        master.executors().find(|e| &e.id == x).is_some_and(|e| w.obs.drained.contains(&e.worker));
    if on_drained {
        return Ok(());
    }
    let mut down = 0u32;
    let mut why = Vec::new();
    for (slot, outcome) in g.record.slots.iter().enumerate() {
        let is_down = match outcome {
            SlotOutcome::Failed { .. } => true,
            SlotOutcome::Pending => {
                let e =
                    g.current.get(slot).cloned().flatten().and_then(|c| {
                        master.executors().find(|e| e.id == c && !e.state.is_terminal())
                    });
                match e {
                    None => true,
                    Some(e) => {
                        let baking = g.record.digest_of(&e.id) == target
                            && instance_health(e, now, min_healthy, checked) != Instance::Healthy;
                        e.state != ExecutorState::Running
                            || (e.operator_stop && g.record.digest_of(&e.id) != target)
                            || &e.id == x
                            || baking
                    }
                }
            }
            SlotOutcome::Done { .. } | SlotOutcome::Killed { .. } | SlotOutcome::Removed { .. } => {
                false
            }
        };
        down += u32::from(is_down);
        if is_down {
            let e = g.current.get(slot).cloned().flatten();
            let state = e.as_ref().and_then(|c| master.executors().find(|x| &x.id == c));
            why.push(format!(
                "slot {slot}: {:?}",
                state.map(|x| (&x.id, &x.state, x.operator_stop, &x.health)).or(None)
            ));
        }
    }
    if down > max_parallel {
        return Err(format!(
            "m{m} stops {x} of deploying group {group} of {fw} with {down} slots below healthy, more than max_parallel {} (slots: {:?}; down: {})",
            max_parallel, g.record.slots, why.join(", ")
        ));
    }
    Ok(())
}

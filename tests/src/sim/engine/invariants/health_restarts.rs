//! An executor is stopped `unhealthy:` only when its own check results
//! earned it (docs/design.md#issue-45, `core/src/health.rs`): whenever a
//! worker reports an executor ended `unhealthy: …`, one of its checks (with
//! `failures` > 0) was answered `Failed` at least `failures` times by the
//! check runner, each delivered after the check's grace and before the
//! run's backstop. So a partition from the leader, a lost leader, a run the
//! backstop skipped (a slow runner) or another executor's results never
//! stop a healthy executor. (The worker's damping needs more failures than
//! that for a flapping check; this is the bound every stop must meet.)
//! Checked at every report a worker sends.

use crate::sim::engine::World;
use regent_core::protocol::ExecutorState;
use regent_core::ExecutorId;

pub(crate) fn on_report(w: &mut World, i: usize, x: &ExecutorId, state: &ExecutorState) {
    let ExecutorState::Failed { reason } = state else { return };
    if !regent_core::launch::is_unhealthy(reason) {
        return;
    }
    let Some((plan, specs)) = w.checks.plans.get(x) else {
        let detail = format!("w{i} reports {x} stopped ({reason}) but its group has no checks");
        return super::fail(w, "health_restarts", detail);
    };
    let earned = specs.iter().enumerate().any(|(c, spec)| {
        let failed = w.checks.failures.get(&(x.clone(), c as u8)).copied().unwrap_or(0);
        spec.failures > 0 && failed >= spec.failures
    });
    if !earned {
        let failed: Vec<u32> = (0..specs.len())
            .map(|c| w.checks.failures.get(&(x.clone(), c as u8)).copied().unwrap_or(0))
            .collect();
        let detail = format!(
            "w{i} reports {x} ({plan:?}) stopped ({reason}) with {failed:?} failures counted of checks wanting {:?}",
            specs.iter().map(|s| s.failures).collect::<Vec<_>>()
        );
        super::fail(w, "health_restarts", detail);
    }
}

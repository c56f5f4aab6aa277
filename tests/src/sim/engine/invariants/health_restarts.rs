//! An executor is stopped `unhealthy:` only when its own check results
//! earned it (docs/design.md#issue-45, `core/src/health.rs`): whenever a
//! worker reports an executor ended `unhealthy: …`, one of its checks (with
//! `failures` > 0) was answered `Failed` at least `failures` times by the
//! check runner, each delivered after the check's grace and before the
//! run's backstop. So a partition from the leader, a lost leader, a run the
//! backstop skipped (a slow runner) or another executor's results never
//! stop a healthy executor. (The worker's damping needs more failures than
//! that for a flapping check; this is the bound every stop must meet.)
//!
//! A `manual` check (docs/design.md#issue-45 item 5) has no runs: its
//! failures are the failing reports its framework made that the worker
//! took in (relayed by the master it follows, after grace), plus the TTLs
//! that lapsed with no report taken in. A report lost on its way (the
//! master asked was not the leader, a partition cut the relay, the leader
//! died) is not a failure the framework made, but the TTL it left
//! uncovered may lapse: the worker counts a lapse only while it hears a
//! leader, which the simulator does not see from outside, so the bound
//! allows every whole TTL between two reports taken in (and since the
//! last one, or since grace ended), never more. A healthy reporter whose
//! reports do get through is never stopped.
//! Checked at every report a worker sends.

use crate::sim::engine::World;
use regent_core::launch::CheckKind;
use regent_core::protocol::ExecutorState;
use regent_core::ExecutorId;

pub(crate) fn on_report(w: &mut World, i: usize, x: &ExecutorId, state: &ExecutorState) {
    let ExecutorState::Failed { reason } = state else { return };
    if !regent_core::launch::is_unhealthy(reason) {
        return;
    }
    let Some((plan, specs)) = w.checks.plans.get(x).cloned() else {
        let detail = format!("w{i} reports {x} stopped ({reason}) but its group has no checks");
        return super::fail(w, "health_restarts", detail);
    };
    // What each check may have failed: counted failures, and a manual
    // check's lapsed TTLs.
    let failed = |c: usize, spec: &regent_core::launch::CheckSpec| {
        let key = (x.clone(), c as u8);
        let counted = w.checks.failures.get(&key).copied().unwrap_or(0);
        let lapsed = match spec.kind {
            CheckKind::Manual { ttl_ms } => {
                let m = &w.checks.manual;
                let since = m.last.get(&key).map_or(0, |last| w.now.0.saturating_sub(last.0));
                m.lapses.get(&key).copied().unwrap_or(0) + (since / ttl_ms.max(1)) as u32
            }
            _ => 0,
        };
        counted + lapsed
    };
    let earned = specs
        .iter()
        .enumerate()
        .any(|(c, spec)| spec.failures > 0 && failed(c, spec) >= spec.failures);
    let by_manual = specs.iter().any(|s| {
        matches!(s.kind, CheckKind::Manual { .. })
            && reason.contains(&format!("check {:?}", s.name))
    });
    if !earned {
        let failed: Vec<u32> = specs.iter().enumerate().map(|(c, s)| failed(c, s)).collect();
        let detail = format!(
            "w{i} reports {x} ({plan:?}) stopped ({reason}) with {failed:?} failures counted of checks wanting {:?}",
            specs.iter().map(|s| s.failures).collect::<Vec<_>>()
        );
        super::fail(w, "health_restarts", detail);
    }
    if by_manual {
        w.checks.manual.stopped.insert(x.clone());
    }
}

//! At most one run in flight per check (docs/design.md#issue-45,
//! `core/src/health.rs`, "Schedule"): a worker never asks for a run of an
//! executor's check while an earlier run of that check is in flight — asked
//! for, not yet answered, and not yet past its backstop (`timeout` + 1 s,
//! after which the worker counts it skipped). A check slower than its
//! interval runs less often, never twice at once (`--services`' SLOWCHECK
//! executors answer after their interval, some after the backstop).
//! Checked at every run a worker asks for; the runs in flight are the
//! simulator's check runner's (`tests/src/sim/engine/services.rs`).

use crate::sim::engine::World;
use regent_core::health::CheckRun;

pub(crate) fn on_run(w: &mut World, i: usize, gen: u64, run: &CheckRun) {
    let key = (i, gen, run.executor.clone(), run.check);
    if let Some((earlier, backstop)) = w.checks.in_flight.get(&key).copied() {
        if w.now < backstop {
            let detail = format!(
                "w{i} starts run {} of check {} of {} while run {earlier} is in flight (its backstop at {backstop})",
                run.run, run.check, run.executor
            );
            super::fail(w, "check_inflight", detail);
        }
    }
}

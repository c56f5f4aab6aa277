//! A healthy run is remembered: when a framework record the store applies
//! holds two or more failures in a row for a slot of a group whose restart
//! policy forgets failures after `healthy_after_ms`, the executor whose end
//! it counted last for that slot (`GroupRecord::counted`) did not run that
//! long (from when its worker's process took in that it was RUNNING to its
//! end, on the worker). An executor that ran
//! healthily clears its slot's failures before its own end counts, so its
//! end makes the count 1, whichever leader counts it. Issue 41 (docs/design.md#issue-41)'s second
//! scenario: a retry that ran healthily for an hour crashed five seconds
//! after a failover and its slot failed with "2 ends in a row": the new
//! leader measured the run from when it first saw it.

use crate::sim::engine::World;
use regent_core::protocol::ExecutorState;
use regent_core::store::Record;
use regent_core::{ExecutorId, Millis};

/// Executor `x`'s worker's process takes in now that `x` is RUNNING. Not
/// when the executor's process became RUNNING: a worker's process paused
/// then (`Fault::PauseWorker`) takes it in when it resumes and can count
/// the run only from then (`ran_ms`, the worker's own clock), as a real
/// worker whose launching thread ran but whose event loop was stopped
/// would. Sim seed 28947 of the services soak (docs/design.md#simulator-seeds):
/// RUNNING while the worker's process was paused for 1.4 s, measured here
/// from then, so a run the worker rightly reported as 5.3 s (under the
/// 6.5 s of `healthy_after_ms`) was taken for 6.7 s and its failure for a
/// leader's mistake.
pub(crate) fn on_running(w: &mut World, x: &ExecutorId) {
    let now = w.now;
    w.obs.ran.entry(x.clone()).or_insert((now, None));
}

/// Executor `x`'s process ended now, as `state`.
pub(crate) fn on_end(w: &mut World, x: &ExecutorId, state: &ExecutorState) {
    if matches!(state, ExecutorState::Exited { .. } | ExecutorState::Failed { .. }) {
        // One that never ran ends having run 0 ms.
        let now = w.now;
        w.obs.ran.entry(x.clone()).or_insert((now, None)).1.get_or_insert(now);
    }
}

pub(crate) fn on_store_write(w: &World, m: usize, record: &Record) -> Result<(), String> {
    let Record::Framework(f) = record else { return Ok(()) };
    for g in &f.groups {
        let healthy = g.spec.policy.restart.healthy_after_ms;
        if healthy == 0 {
            continue;
        }
        for (slot, r) in &g.restarts {
            if r.failures < 2 {
                continue;
            }
            // The executor whose end this record counted last for the slot
            // (`GroupRecord::counted`): a record written while a later end
            // is still on its way keeps the failures counted before it.
            let Some(x) = g.counted.get(slot) else { continue };
            let Some((from, Some(to))) = w.obs.ran.get(x) else { continue };
            let ran = to.since(*from);
            if ran >= Millis(healthy) {
                return Err(format!(
                    "m{m} wrote {} failures in a row for slot {}#{slot} of {}, but the executor whose end it counted, {x}, ran {ran} (healthy after {healthy} ms)",
                    r.failures, g.spec.group, f.id
                ));
            }
        }
    }
    Ok(())
}

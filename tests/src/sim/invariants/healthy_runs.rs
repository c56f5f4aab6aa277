//! A healthy run is remembered: when a framework record the store applies
//! holds two or more failures in a row for a slot of a group whose restart
//! policy forgets failures after `healthy_after_ms`, the slot's latest
//! executor to end (by the worker's account: exited or failed) did not run
//! that long (from RUNNING to its end, on the worker). An executor that ran
//! healthily clears its slot's failures before its own end counts, so its
//! end makes the count 1, whichever leader counts it. Issue 41's second
//! scenario: a retry that ran healthily for an hour crashed five seconds
//! after a failover and its slot failed with "2 ends in a row": the new
//! leader measured the run from when it first saw it.

use crate::sim::engine::{parse_executor, World};
use regent_core::protocol::ExecutorState;
use regent_core::store::Record;
use regent_core::{ExecutorId, Millis};

/// Executor `x`'s process on a worker is RUNNING now.
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
            // The slot's latest executor to end, by the worker's clock.
            let latest = w
                .obs
                .ran
                .iter()
                .filter_map(|(x, (from, to))| to.map(|to| (to, *from, x)))
                .filter(|(_, _, x)| {
                    parse_executor(x).is_some_and(|(fw, group, s)| {
                        fw == f.id && group == g.spec.group && s == *slot as usize
                    })
                })
                .max();
            if let Some((to, from, x)) = latest {
                let ran = to.since(from);
                if ran >= Millis(healthy) {
                    return Err(format!(
                        "m{m} wrote {} failures in a row for slot {}#{slot} of {}, but its latest executor to end, {x}, ran {ran} (healthy after {healthy} ms)",
                        r.failures, g.spec.group, f.id
                    ));
                }
            }
        }
    }
    Ok(())
}

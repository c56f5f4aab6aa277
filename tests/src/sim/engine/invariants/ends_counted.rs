//! An executor's end is counted at most once: in every framework record
//! the store applies, a group's shared retry count (`retries_used`) is at
//! most the number of distinct executors of the group that ended, and each
//! slot's failures in a row (`restarts[slot].failures`) at most the number
//! of distinct executors of that slot that ended. An executor ended when a
//! worker reported it terminal, or a leader wrote it off (LOST or KILLED).
//! Issue 41 (docs/design.md#issue-41)'s sixth scenario: a new leader counted again an end the old
//! one had recorded before its acknowledgement reached the worker.

use crate::sim::engine::{parse_executor, World};
use regent_core::protocol::ExecutorState;
use regent_core::store::Record;
use regent_core::ExecutorId;

/// Worker `i` reported `x` in `state`.
pub(crate) fn on_report(w: &mut World, x: &ExecutorId, state: &ExecutorState) {
    if state.is_terminal() {
        w.obs.ended.insert(x.clone());
    }
}

pub(crate) fn on_store_write(w: &World, m: usize, record: &Record) -> Result<(), String> {
    let Record::Framework(f) = record else { return Ok(()) };
    // `ended` and `lost` may both name an executor: count distinct ids.
    let distinct = |group: &str, slot: Option<usize>| {
        let mut ids: Vec<&ExecutorId> = w
            .obs
            .ended
            .iter()
            .chain(w.obs.lost.iter())
            .filter(|x| {
                parse_executor(x).is_some_and(|(fw, g, s)| {
                    fw == f.id && g == group && slot.is_none_or(|slot| slot == s)
                })
            })
            .collect();
        ids.sort();
        ids.dedup();
        ids.len() as u32
    };
    for g in &f.groups {
        let group = &g.spec.group;
        let n = distinct(group, None);
        if g.retries_used > n {
            return Err(format!(
                "m{m} wrote {} retries used for group {group} of {}, but only {n} distinct executors of it ended",
                g.retries_used, f.id
            ));
        }
        for (slot, r) in &g.restarts {
            let n = distinct(group, Some(*slot as usize));
            if r.failures > n {
                return Err(format!(
                    "m{m} wrote {} failures in a row for slot {group}#{slot} of {}, but only {n} distinct executors of it ended",
                    r.failures, f.id
                ));
            }
        }
    }
    Ok(())
}

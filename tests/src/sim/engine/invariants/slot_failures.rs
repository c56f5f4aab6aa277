//! A slot fails only through its own executors' failures: in every
//! framework record the store applies, a FAILED slot names an executor of
//! that slot that a worker started (and that then failed), or that a leader
//! wrote off (LOST). A launch a worker refused because a resource the
//! leader believed free was held (an executor being killed still holding
//! its GPU or port) is not the slot's failure. Issue 41 (docs/design.md#issue-41)'s seventh scenario:
//! a slot placed on the GPU of an executor being killed burnt its retries
//! on refusals and failed.

use crate::sim::engine::{parse_executor, World};
use regent_core::store::{Record, SlotOutcome};

pub(crate) fn on_store_write(w: &World, m: usize, record: &Record) -> Result<(), String> {
    let Record::Framework(f) = record else { return Ok(()) };
    for g in &f.groups {
        for (slot, outcome) in g.slots.iter().enumerate() {
            let SlotOutcome::Failed { executor, reason } = outcome else { continue };
            let own = parse_executor(executor)
                .is_some_and(|(fw, group, s)| fw == f.id && group == g.spec.group && s == slot);
            let failed = w.obs.started.contains(executor) || w.obs.lost.contains(executor);
            if !own || !failed {
                return Err(format!(
                    "m{m} wrote slot {}#{slot} of {} FAILED by {executor} ({reason}), which {}",
                    g.spec.group,
                    f.id,
                    if own { "no worker ever started" } else { "is not an executor of that slot" }
                ));
            }
        }
    }
    Ok(())
}

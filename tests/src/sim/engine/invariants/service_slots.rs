//! A service's slot never ends while its framework lives: a slot of a group
//! in service mode (restarted whenever its executor ends, exit 0 included)
//! is never written DONE, nor FAILED unless its policy has a budget of
//! attempts to run out of. A kill without refill (KILLED) is asked for and
//! allowed. Checked on every write of a framework record the store applies
//! (docs/design.md#issue-41's first scenario: a written-off executor's late exit 0 made
//! its slot DONE).

use crate::sim::engine::World;
use regent_core::policy::RestartMode;
use regent_core::store::{Record, SlotOutcome};

pub(crate) fn on_store_write(_w: &World, m: usize, record: &Record) -> Result<(), String> {
    let Record::Framework(f) = record else { return Ok(()) };
    for g in &f.groups {
        let restart = &g.spec.policy.restart;
        if restart.mode != RestartMode::Service {
            continue;
        }
        for (slot, outcome) in g.slots.iter().enumerate() {
            let ended = match outcome {
                SlotOutcome::Done { .. } => true,
                SlotOutcome::Failed { .. } => restart.attempts.is_none(),
                SlotOutcome::Pending | SlotOutcome::Killed { .. } | SlotOutcome::Removed { .. } => {
                    false
                }
            };
            if ended {
                return Err(format!(
                    "m{m} wrote slot {}#{slot} of service group {} of live framework {} as {outcome:?}",
                    g.spec.group, g.spec.group, f.id
                ));
            }
        }
    }
    Ok(())
}

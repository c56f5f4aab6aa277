//! A waiting slot always has a reason (docs/jobs.md, "Why a slot waits";
//! docs/design.md#issue-44): after every step, every open slot of every
//! framework that the acting leader shows waiting (to be placed, or in its
//! restart backoff) has at least one reason in its job status, and its
//! `reason` is the words of the first; a slot that does not wait has none.

use crate::sim::engine::World;
use regent_core::api::SlotPhase;

pub(crate) fn check(w: &World) -> Result<(), String> {
    let Some(l) = w.acting_leader() else { return Ok(()) };
    let master = w.masters[l].master();
    for job in master.job_statuses(w.now) {
        for g in &job.groups {
            for s in &g.slots {
                let waits = matches!(s.phase, SlotPhase::Waiting | SlotPhase::Backoff);
                let where_ = || format!("m{l}: job {} group {} slot {}", job.job, g.group, s.slot);
                if waits && s.reasons.is_empty() {
                    return Err(format!("{} waits ({:?}) without a reason", where_(), s.phase));
                }
                if !waits && !s.reasons.is_empty() {
                    return Err(format!(
                        "{} is {:?} with reasons {:?}",
                        where_(),
                        s.phase,
                        s.reasons
                    ));
                }
                if waits && s.reason != s.reasons.first().map(ToString::to_string) {
                    return Err(format!(
                        "{}: reason {:?} is not the first of {:?}",
                        where_(),
                        s.reason,
                        s.reasons
                    ));
                }
            }
        }
    }
    Ok(())
}

//! A preempted executor's slot is never lost (docs/tenants.md,
//! docs/design.md#issue-44; `regent-soak --api-jobs --preemption`): after
//! every step, at every ALIVE master (the one that chose the preemption,
//! and every later leader, across failovers), the slot of each executor
//! preempted so far ([`super::preemption_guarantee`] finds them) is
//!
//! * still wanted: its outcome is pending (it waits, or runs its
//!   replacement), or settled by another executor (the replacement's own
//!   end), or by the victim's own exit 0 (the work was done before the stop
//!   reached it); never failed, or killed, by the victim's end unless its
//!   framework asked for that kill;
//! * charged nothing: the victim's end is never the one counted against the
//!   slot's restart policy or the group's retry budget (`counted`).
//!
//! Judged once a stop of the victim was sent (the preemption's write is
//! durable before it is: every later leader knows the victim is being
//! replaced). A slot its framework no longer has (torn down, its group gone, scaled
//! away) is not judged. That a preempted slot never runs twice is
//! [`super::one_executor`]'s rule, checked for every slot in this mode too.
//! A leader that settles a stopped executor's slot instead of refilling it
//! (`Knobs::no_refill_after_stop`) is caught (tests/tests/sim_can_fail.rs).

use crate::sim::engine::World;
use regent_core::master::Status;
use regent_core::store::SlotOutcome;

pub(crate) fn check(w: &World) -> Result<(), String> {
    if w.obs.preempted.is_empty() {
        return Ok(());
    }
    for (i, mp) in w.masters.iter().enumerate() {
        let master = mp.master();
        if !mp.p.up || master.status() != Status::Alive {
            continue;
        }
        for (x, v) in &w.obs.preempted {
            // Judged once its stop went out (durable before it is sent: a
            // preemption whose write a failover lost never happened, and
            // its executor runs on as any other).
            if !w.obs.kills_sent.contains(x) || w.obs.removed_frameworks.contains(&v.framework) {
                continue;
            }
            let Some(f) = master.frameworks().find(|f| f.id == v.framework) else { continue };
            let Some(g) = f.groups.iter().find(|g| g.record.spec.group == v.group) else {
                continue;
            };
            let Some(outcome) = g.record.slots.get(v.slot) else { continue };
            let where_ = || {
                format!(
                    "m{i} ({}): slot {}#{} of {} (its executor {x} preempted by m{})",
                    master.epoch(),
                    v.group,
                    v.slot,
                    v.framework,
                    v.by
                )
            };
            let asked = w.obs.kill_requested.contains(x);
            let lost = match outcome {
                SlotOutcome::Failed { executor, .. } => executor == x,
                SlotOutcome::Killed { executor } => executor == x && !asked,
                _ => false,
            };
            if lost {
                return Err(format!(
                    "{} is settled by the preempted executor: {outcome:?}",
                    where_()
                ));
            }
            let slot = u32::try_from(v.slot).unwrap_or(u32::MAX);
            if g.record.counted.get(&slot) == Some(x) {
                return Err(format!(
                    "{}: the preempted executor's end was charged (retries used {})",
                    where_(),
                    g.record.retries_used
                ));
            }
        }
    }
    Ok(())
}

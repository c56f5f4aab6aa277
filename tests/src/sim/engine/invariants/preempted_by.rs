//! "Preempted by" names a real preemptor and outlives nothing
//! (docs/tenants.md, docs/design.md#issue-44; `regent-soak --api-jobs
//! --preemption`). A preemption's write names, by slot, the victim and
//! the group it was stopped for (`GroupRecord::preempted`), so a new
//! leader says who preempted it. Checked:
//!
//! * when decided ([`decided`], in the step where a leader's count of
//!   preemptions grows): every entry the step added names a group
//!   `<framework>/<group>` the leader has, with a slot waiting (pending,
//!   no live executor), and a victim of another slot's group; the group
//!   is remembered as a preemptor;
//! * after every step ([`check`]), at every ALIVE master (the one that
//!   decided, and every later leader that loaded the record): every entry
//!   names a group remembered as a preemptor (one that existed and had a
//!   waiting slot when a preemption was decided for it), and never
//!   outlives the slot's `replacing` entry for the same executor (the two
//!   are written and cleared together).

use crate::sim::engine::World;
use regent_core::master::{Master, Status};
use regent_core::store::SlotOutcome;
use regent_core::{ExecutorId, FrameworkId};
use std::collections::BTreeSet;

/// One entry of a group record's `preempted`: (framework, group, slot,
/// victim).
pub(crate) type Entry = (FrameworkId, String, u32, ExecutorId);

/// Every `preempted` entry master `master`'s records hold.
pub(crate) fn entries(master: &Master) -> BTreeSet<Entry> {
    let mut all = BTreeSet::new();
    for f in master.frameworks() {
        for g in &f.groups {
            for (slot, p) in &g.record.preempted {
                all.insert((f.id.clone(), g.record.spec.group.clone(), *slot, p.executor.clone()));
            }
        }
    }
    all
}

/// After master `m` chose preemptions in a step: the entries it added
/// (not in `before`) name a group it has with a waiting slot.
pub(crate) fn decided(w: &mut World, m: usize, before: &BTreeSet<Entry>) -> Result<(), String> {
    let master = w.masters[m].master();
    let mut named = Vec::new();
    for (fid, group, slot, victim) in entries(master).difference(before) {
        let f = master.frameworks().find(|f| f.id == *fid).expect("entries come from them");
        let g = f.groups.iter().find(|g| g.record.spec.group == *group).expect("as above");
        let by = &g.record.preempted[slot].by;
        let waiting = by.rsplit_once('/').and_then(|(pf, pg)| {
            let pf = master.frameworks().find(|f| f.id.as_str() == pf)?;
            let pg = pf.groups.iter().find(|g| g.record.spec.group == pg)?;
            let open = pg.record.slots.iter().enumerate().any(|(i, o)| {
                *o == SlotOutcome::Pending
                    && pg.current.get(i).cloned().flatten().is_none_or(|x| {
                        master.executors().find(|e| e.id == x).is_none_or(|e| e.state.is_terminal())
                    })
            });
            Some(open)
        });
        match waiting {
            Some(true) => named.push(by.clone()),
            Some(false) => {
                return Err(format!(
                    "m{m} ({}): {victim} (slot {group}#{slot} of {fid}) preempted by {by}, \
                     which has no waiting slot",
                    master.epoch()
                ))
            }
            None => {
                return Err(format!(
                    "m{m} ({}): {victim} (slot {group}#{slot} of {fid}) preempted by {by}, \
                     which is no group of the leader's",
                    master.epoch()
                ))
            }
        }
    }
    w.obs.preemptors.extend(named);
    Ok(())
}

/// After every step: at every ALIVE master, every `preempted` entry names
/// a group a preemption was decided for and is named in `replacing` too.
pub(crate) fn check(w: &World) -> Result<(), String> {
    for (i, mp) in w.masters.iter().enumerate() {
        let master = mp.master();
        if !mp.p.up || master.status() != Status::Alive {
            continue;
        }
        for f in master.frameworks() {
            for g in &f.groups {
                for (slot, p) in &g.record.preempted {
                    let at = || {
                        format!(
                            "m{i} ({}): slot {}#{slot} of {} (executor {} preempted by {})",
                            master.epoch(),
                            g.record.spec.group,
                            f.id,
                            p.executor,
                            p.by
                        )
                    };
                    if g.record.replacing.get(slot) != Some(&p.executor) {
                        return Err(format!(
                            "{}: outlives its replacing entry ({:?})",
                            at(),
                            g.record.replacing.get(slot)
                        ));
                    }
                    if !w.obs.preemptors.contains(&p.by) {
                        return Err(format!("{}: no preemption was decided for {}", at(), p.by));
                    }
                }
            }
        }
    }
    Ok(())
}

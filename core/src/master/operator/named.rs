//! Which slots a scale changes when it names the executors it removes
//! (`ScaleGroup { slots, remove }`, `regent scale --remove`,
//! `POST /v1/jobs/{id}/groups/{group}/scale`).
//!
//! An executor's id embeds its slot, so no running executor moves: the
//! named executors' slots become holes ([`SlotOutcome::Removed`]) and every
//! other executor keeps its slot. The group's count is its slots less its
//! holes. Then the count is made the one asked for:
//!
//! * **lower**: the highest slots that are not holes go as well, as a scale
//!   without names does (the slot list is then cut after the last slot
//!   kept, so holes above it go with it); holes are otherwise kept, at the
//!   top too, so a slot that comes back is refilled as a hole;
//! * **kept or higher**: holes are refilled first, lowest first (a named
//!   executor whose slot is refilled at once is replaced, as `regent
//!   kill-executor` does with refill), then new slots are added at the top.
//!
//! A hole is durable in the framework record, so a new leader neither
//! refills it nor adopts its executor (a reported executor whose slot is
//! not pending is killed).

use crate::ids::ExecutorId;
use crate::store::SlotOutcome;

/// What a scale does to a group's slot list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    /// The slot list's new length (holes included).
    pub(super) len: usize,
    /// Holes refilled, by slot, with the executor each was removed from
    /// (the named one, or one removed by an earlier scale).
    pub(super) refilled: Vec<(u32, ExecutorId)>,
}

/// The plan for slot outcomes `slots` when the executors `named` (each
/// with the slot it holds) are removed and the group's count is made
/// `count`.
pub(super) fn plan(slots: &[SlotOutcome], named: &[(u32, ExecutorId)], count: u32) -> Plan {
    // Each hole with the executor removed from it.
    let hole = |i: usize| -> Option<&ExecutorId> {
        named.iter().find(|(s, _)| *s as usize == i).map(|(_, x)| x).or(match &slots[i] {
            SlotOutcome::Removed { executor } => Some(executor),
            _ => None,
        })
    };
    let kept: Vec<usize> = (0..slots.len()).filter(|i| hole(*i).is_none()).collect();
    let count = count as usize;
    if count < kept.len() {
        // Cut after the last slot kept (none kept: nothing is left).
        let len = count.checked_sub(1).map_or(0, |last| kept[last] + 1);
        return Plan { len, refilled: Vec::new() };
    }
    let mut need = count - kept.len();
    let mut refilled = Vec::new();
    for i in 0..slots.len() {
        if need == 0 {
            break;
        }
        if let Some(executor) = hole(i) {
            refilled.push((i as u32, executor.clone()));
            need -= 1;
        }
    }
    Plan { len: slots.len() + need, refilled }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(slot: u32) -> ExecutorId {
        ExecutorId::new(format!("f/g#{slot}#1.{slot}"))
    }

    fn pending(n: usize) -> Vec<SlotOutcome> {
        vec![SlotOutcome::Pending; n]
    }

    #[test]
    fn named_slots_become_holes_and_survivors_keep_theirs() {
        // Four slots, slots 1 and 3 named, count 2: 0 and 2 stay, 1 and 3
        // are holes.
        let p = plan(&pending(4), &[(1, x(1)), (3, x(3))], 2);
        assert_eq!(p, Plan { len: 4, refilled: vec![] });
        // Count 1: cut after slot 0 (the holes above go with it).
        let p = plan(&pending(4), &[(1, x(1)), (3, x(3))], 1);
        assert_eq!(p, Plan { len: 1, refilled: vec![] });
    }

    #[test]
    fn fewer_named_than_the_reduction_takes_the_highest_other_slots() {
        // Slot 0 named, count 2 of 4: slots 1 and 2 stay, 3 goes too.
        let p = plan(&pending(4), &[(0, x(0))], 2);
        assert_eq!(p, Plan { len: 3, refilled: vec![] });
        // No names: as a plain scale down.
        assert_eq!(plan(&pending(4), &[], 1), Plan { len: 1, refilled: vec![] });
    }

    #[test]
    fn a_kept_count_refills_the_named_slots() {
        let p = plan(&pending(4), &[(1, x(1)), (2, x(2))], 4);
        assert_eq!(p, Plan { len: 4, refilled: vec![(1, x(1)), (2, x(2))] });
        // More named than the reduction: the lowest holes are refilled.
        let p = plan(&pending(4), &[(1, x(1)), (2, x(2))], 3);
        assert_eq!(p, Plan { len: 4, refilled: vec![(1, x(1))] });
    }

    /// Applies `plan` as the master does: the named slots become holes,
    /// the refilled ones pending, the list cut or grown to `len`.
    fn apply(slots: &[SlotOutcome], named: &[(u32, ExecutorId)], p: &Plan) -> Vec<SlotOutcome> {
        let mut out = slots.to_vec();
        for (s, x) in named {
            out[*s as usize] = SlotOutcome::Removed { executor: x.clone() };
        }
        for (s, _) in &p.refilled {
            out[*s as usize] = SlotOutcome::Pending;
        }
        out.resize(p.len, SlotOutcome::Pending);
        out
    }

    #[test]
    fn the_count_is_met_and_every_unnamed_slot_below_the_cut_is_untouched() {
        fn prop(kinds: Vec<u8>, picks: Vec<u8>, count: u8) -> quickcheck::TestResult {
            let slots: Vec<SlotOutcome> = kinds
                .iter()
                .take(40)
                .enumerate()
                .map(|(i, k)| match k % 3 {
                    0 => SlotOutcome::Removed { executor: x(i as u32) },
                    1 => SlotOutcome::Done { executor: x(i as u32) },
                    _ => SlotOutcome::Pending,
                })
                .collect();
            // Named: distinct pending slots, as the master checks.
            let mut named: Vec<(u32, ExecutorId)> = Vec::new();
            for p in picks {
                let s = usize::from(p) % slots.len().max(1);
                if slots.get(s) == Some(&SlotOutcome::Pending)
                    && !named.iter().any(|(n, _)| *n as usize == s)
                {
                    named.push((s as u32, x(s as u32)));
                }
            }
            let count = u32::from(count % 50);
            if count == 0 {
                return quickcheck::TestResult::discard();
            }
            let p = plan(&slots, &named, count);
            let after = apply(&slots, &named, &p);
            let kept = after.iter().filter(|o| !matches!(o, SlotOutcome::Removed { .. })).count();
            let is_named = |s: usize| named.iter().any(|(n, _)| *n as usize == s);
            // Every named slot below the cut is a hole unless refilled.
            let named_ok = named.iter().all(|(s, _)| {
                let s = *s as usize;
                s >= p.len
                    || p.refilled.iter().any(|(r, _)| *r as usize == s)
                    || matches!(after[s], SlotOutcome::Removed { .. })
            });
            // Every other slot below the cut keeps its outcome (a hole may
            // be refilled).
            let others_ok = (0..slots.len().min(p.len))
                .filter(|s| !is_named(*s))
                .all(|s| after[s] == slots[s] || p.refilled.iter().any(|(r, _)| *r as usize == s));
            // The count asked for is met.
            quickcheck::TestResult::from_bool(kept == count as usize && named_ok && others_ok)
        }
        quickcheck::quickcheck(prop as fn(Vec<u8>, Vec<u8>, u8) -> quickcheck::TestResult);
    }

    #[test]
    fn a_scale_up_refills_earlier_holes_first_then_grows() {
        let mut slots = pending(3);
        slots[1] = SlotOutcome::Removed { executor: x(1) };
        // Count 2 now; 4 wanted: the hole, then one new slot.
        let p = plan(&slots, &[], 4);
        assert_eq!(p, Plan { len: 4, refilled: vec![(1, x(1))] });
        // Count kept: the hole stays.
        assert_eq!(plan(&slots, &[], 2), Plan { len: 3, refilled: vec![] });
        // Lower: cut after the last slot kept.
        assert_eq!(plan(&slots, &[], 1), Plan { len: 1, refilled: vec![] });
    }
}

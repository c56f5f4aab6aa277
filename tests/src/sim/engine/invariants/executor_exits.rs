//! No executor exit reported by a worker is lost: when a master acknowledges
//! a worker's `Exited` report (`ExecutorStatusAck`, after which the worker
//! forgets it), the exit must be reflected in the durable framework record.
//! An exit 0 always settles its slot (DONE, or KILLED/FAILED already), even
//! when the executor had been written off or replaced (a late success). A
//! non-zero exit is recorded against the retry budget by the master, or is
//! moot because a leader had written the executor off (LOST/KILLED) or
//! replaced it in its slot. Exits of a removed framework, and of executors
//! in slots an operator scaled away (even if a later scale-up made new
//! slots at those indexes: seed 201496 with `--operator`), are exempt.
//! A service's slot is restarted whenever its executor ends, so its exit
//! 0 settles nothing: it is recorded as any end of a service is (the
//! master knows it ended, or it was written off or replaced).

use crate::sim::engine::{parse_executor, Node, World};
use regent_core::protocol::ExecutorState;
use regent_core::store::{Record, RecordKey, SlotOutcome};
use regent_core::ExecutorId;

pub(crate) fn on_ack(
    w: &mut World,
    m: usize,
    client: Node,
    x: &ExecutorId,
) -> Result<(), (&'static str, String)> {
    let Node::Worker(i) = client else { return Ok(()) };
    let Some(ExecutorState::Exited { code }) = w.obs.last_report.get(&(i, x.clone())).cloned()
    else {
        return Ok(());
    };
    let Some((fw, group, slot)) = parse_executor(x) else { return Ok(()) };
    if w.obs.removed_frameworks.contains(&fw) || w.obs.scaled_away.contains(x) {
        return Ok(());
    }
    let mut service = false;
    let outcome = match w.stored_at(&RecordKey::Framework(fw.clone())) {
        None => return Ok(()),
        Some(Record::Framework(r)) => {
            let g = r.groups.iter().find(|g| g.spec.group == group);
            if g.is_some_and(|g| slot >= g.slots.len()) {
                // An operator scaled the group below this slot: its exit
                // is moot.
                return Ok(());
            }
            service = g.is_some_and(|g| {
                g.spec.policy.restart.mode == regent_core::policy::RestartMode::Service
            });
            g.and_then(|g| g.slots.get(slot).cloned())
        }
        Some(_) => None,
    };
    // A service's exit 0 is an end like any other.
    let done_on_zero = !service;
    let settled = match (&outcome, code) {
        (Some(SlotOutcome::Done { .. }), 0) => true,
        (Some(SlotOutcome::Pending), 0) if done_on_zero => false,
        (None, _) => false,
        (Some(SlotOutcome::Pending), _) => {
            let master = w.masters[m].master();
            let replaced = master
                .frameworks()
                .find(|f| f.id == fw)
                .and_then(|f| f.groups.iter().find(|g| g.record.spec.group == group))
                .is_some_and(|g| g.current.get(slot).is_some_and(|c| c.as_ref() != Some(x)));
            replaced
                || w.obs.lost.contains(x)
                || master
                    .executors()
                    .any(|e| &e.id == x && e.state == ExecutorState::Exited { code })
        }
        (Some(_), _) => true,
    };
    if !settled {
        let known = w.masters[m].master().executors().find(|e| &e.id == x).cloned();
        let slot_at_master = w.masters[m].master().frameworks().find(|f| f.id == fw).map(|f| {
            f.groups
                .iter()
                .find(|g| g.record.spec.group == group)
                .map(|g| (g.record.slots.get(slot).cloned(), g.current.get(slot).cloned()))
        });
        return Err((
            "executor_exits",
            format!(
                "m{m} acknowledged w{i}'s report that {x} exited with {code}, but the durable slot {group}#{slot} of {fw} is {outcome:?} (the master knows the executor as {known:?}; its slot at the master, (outcome, current): {slot_at_master:?})"
            ),
        ));
    }
    Ok(())
}

//! Running executors are never killed by a failover alone. Every
//! `KillExecutorOnWorker` a master sends needs a reason the simulator can
//! see: the framework asked for that kill; the framework was torn down or
//! timed out (its record deleted); or the executor is a stray or was
//! replaced (a leader declared it LOST or KILLED, or its slot is settled or
//! held by another executor at the master); or an operator asked for it (a
//! kill, a scale below its slot, a drain of its worker). A kill because a new leader
//! simply does not know the executor's framework or group is a violation.

use crate::sim::engine::{parse_executor, Node, World};
use regent_core::store::SlotOutcome;
use regent_core::ExecutorId;

pub(crate) fn on_kill(
    w: &mut World,
    m: usize,
    client: Node,
    x: &ExecutorId,
) -> Result<(), (&'static str, String)> {
    let Node::Worker(i) = client else { return Ok(()) };
    // A kill sent again (kills are owed until the executor's end is
    // reported) of an executor whose slot an operator scaled away, even if
    // a later scale-up brought the slot back while it still ran.
    if w.obs.kill_requested.contains(x) || w.obs.lost.contains(x) || w.obs.scaled_away.contains(x) {
        return Ok(());
    }
    let Some((fw, group, slot)) = parse_executor(x) else { return Ok(()) };
    if w.obs.removed_frameworks.contains(&fw) {
        return Ok(());
    }
    let master = w.masters[m].master();
    let Some(f) = master.frameworks().find(|f| f.id == fw) else {
        return Err((
            "kills",
            format!(
                "m{m} (epoch {}) kills {x} on w{i}: it does not know framework {fw}, which nobody removed",
                master.epoch()
            ),
        ));
    };
    let Some(g) = f.groups.iter().find(|g| g.record.spec.group == group) else {
        return Err((
            "kills",
            format!(
                "m{m} (epoch {}) kills {x} on w{i}: framework {fw} has no group {group} at this leader",
                master.epoch()
            ),
        ));
    };
    let replaced = g.current.get(slot).is_some_and(|c| c.as_ref() != Some(x));
    let settled = g.record.slots.get(slot).is_some_and(|o| *o != SlotOutcome::Pending);
    // An operator scaled its group below its slot, or drains its worker.
    let scaled_away = slot >= g.record.slots.len();
    let drained =
        w.workers.get(i).is_some_and(|wp| w.obs.drained.contains(&wp.worker().config().id));
    // Stopped to be replaced (a kill with refill, or a preemption,
    // docs/tenants.md): durable in the group record before the kill.
    let refilled =
        u32::try_from(slot).ok().and_then(|s| g.record.replacing.get(&s)).is_some_and(|r| r == x);
    if replaced || settled || scaled_away || drained || refilled {
        return Ok(());
    }
    Err((
        "kills",
        format!(
            "m{m} kills {x} on w{i}, which holds its slot {group}#{slot} of {fw} at that master"
        ),
    ))
}

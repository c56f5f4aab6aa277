//! Singletons never run twice (docs/design.md#issue-45), checked after
//! every step: for the groups with a disconnect rule (`disconnect = {
//! stop_after }`, `--singletons`), at most one executor process of a slot
//! runs across *every* worker — DEAD, partitioned, paused or with its
//! process down included. The processes are the simulator's ground truth
//! (what each worker started and has not seen end), not any node's view.
//!
//! This is what the rule promises beyond [`super::one_executor`], whose
//! exception (a worker declared DEAD still running its executors while the
//! leader places their slots again) it closes for such groups: the worker
//! stops them once it has heard no master for `stop_after`, and the leader
//! places them again only `stop_after` + kill grace + margin after it last
//! heard from that worker, or after its own takeover
//! (docs/machines.md, "The wait across a failover").
//!
//! A worker *process* that is down (a crash, `kill -9`, an upgrade) or
//! paused stops nothing: the executor's shim does, at the worker's last
//! word + `stop_after`, SIGKILL after the grace (docs/machines.md, "A
//! worker process down or paused"), which the engine models
//! ([`crate::sim::engine::shim`]). So no executor is left out: those that
//! outlived their worker's process and those of a paused process are
//! checked like any other. No tolerance either: the shim's poll never
//! delays its lapse (it never sleeps past its deadline), and the model
//! ends the command at the latest the real shim does (the SIGTERM ignored).
//! `Knobs::no_shim` leaves the shims out: then this fails
//! (tests/tests/sim_can_fail.rs).

use super::one_executor::Slot;
use crate::sim::engine::{parse_executor, World};
use regent_core::ExecutorId;
use std::collections::BTreeMap;

pub(crate) fn check(w: &mut World) -> Result<(), String> {
    if w.singleton_groups.is_empty() {
        return Ok(());
    }
    let mut seen: BTreeMap<Slot, (usize, &ExecutorId)> = BTreeMap::new();
    for i in 0..w.workers.len() {
        for x in w.running_executors(i) {
            let Some(slot) = parse_executor(x) else { continue };
            if !w.singleton_groups.contains(&slot.1) {
                continue;
            }
            if let Some((j, other)) = seen.insert(slot.clone(), (i, x)) {
                return Err(format!(
                    "singleton slot {}#{} of {} runs twice: {other} on w{j} and {x} on w{i}",
                    slot.1, slot.2, slot.0
                ));
            }
        }
    }
    Ok(())
}

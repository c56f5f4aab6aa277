//! One executor per slot (docs/design.md#one-executor-per-slot), checked after every step:
//!
//! * **at every leader** (a master process that is up and not in STANDBY),
//!   no two live launches (LAUNCHING or RUNNING) name the same slot
//!   (framework, group, slot index);
//! * **at every worker registered with the current leader** (the highest
//!   epoch among the ALIVE masters, whose registry holds that worker's id
//!   with the live process's incarnation, ALIVE), no two executor processes
//!   that still run belong to the same slot;
//! * **across the workers registered with the current leader**, no two
//!   such processes of one slot run for longer than [`ACROSS_GRACE`],
//!   except one that a master has asked its worker to kill or stop (the kill
//!   is in flight: the window ends when it arrives, or, if its connection
//!   breaks, when the worker registers again and the leader kills it
//!   again). The grace covers a kill the leader decided but holds until its
//!   acting lease allows commands (a new leader's first 1.1·L + 10 ms, or
//!   a confirmation's round trip), which the simulator cannot see, and a
//!   late delivery under network chaos. Nor is one counted that the
//!   leader holds dying ([`regent_core::master::Master::dying_holds`]: of
//!   a framework it removed, its kill owed): when its worker's connection
//!   is already down as the leader decides the kill, nothing is sent until
//!   the worker registers again (which sends it) or is declared DEAD, and
//!   a worker with no connection stays ALIVE for its worker timeout from
//!   when it was last heard, or from a suspended leader's resumption
//!   (which gives every worker a fresh timeout) — longer than the grace.
//!   The job deleted and created again under the same id (so its new
//!   executor names the same slot) while the old one's worker was cut off
//!   is such a case: sim seed 77591, docs/design.md#simulator-seeds.
//!
//! The processes are the simulator's own record of what each worker
//! started and has not seen end, not the worker's view of them.
//!
//! **The exception, and its bound.** A worker the leader has declared DEAD
//! (silent for its worker timeout: a partition, a pause) may still run its
//! executors, and the leader has placed their slots again elsewhere: then
//! two processes of one slot run at once, on two workers. Such a worker is
//! not registered with the leader, so neither check counts it; and it runs
//! no second executor of a slot itself, since a leader places nothing on a
//! DEAD worker. The window is as long as the partition (a worker never
//! stops its executors for lack of a master): it ends when the worker's
//! registration reaches a leader, which kills the replaced executors in the
//! step that handles it (the `kills` invariant checks that such kills have
//! a reason), or when the worker's process ends. A worker whose process is
//! down (its executors outlive it until the next process re-adopts or kills
//! them) is not registered either: its incarnation is gone.

use crate::sim::engine::{parse_executor, World};
use regent_core::master::{Status, WorkerState};
use regent_core::{ExecutorId, FrameworkId, Millis};
use std::collections::{BTreeMap, BTreeSet};

/// A slot: (framework, group, slot index).
pub(crate) type Slot = (FrameworkId, String, usize);

/// How long two live registered workers may both run an executor of one
/// slot when no master asked to kill either (see the module's doc).
pub(crate) const ACROSS_GRACE: Millis = Millis(10_000);

pub(crate) fn check(w: &mut World) -> Result<(), String> {
    for (i, mp) in w.masters.iter().enumerate() {
        if !mp.p.up || mp.master().status() == Status::Standby {
            continue;
        }
        let mut seen: BTreeMap<Slot, &ExecutorId> = BTreeMap::new();
        for e in mp.master().executors().filter(|e| !e.state.is_terminal()) {
            let slot = (e.framework.clone(), e.group.clone(), e.slot as usize);
            if let Some(other) = seen.insert(slot, &e.id) {
                return Err(format!(
                    "m{i} (epoch {}) has two live launches for slot {}#{} of {}: {other} and {} ({:?} on {})",
                    mp.master().epoch(),
                    e.group,
                    e.slot,
                    e.framework,
                    e.id,
                    e.state,
                    e.worker
                ));
            }
        }
    }
    let Some(leader) = current_leader(w) else {
        w.obs.doubled_since.clear();
        return Ok(());
    };
    let doubled = registered_workers_side(w, leader)?;
    let now = w.now;
    let since = &mut w.obs.doubled_since;
    since.retain(|slot, _| doubled.contains_key(slot));
    for (slot, detail) in doubled {
        let first = *since.entry(slot).or_insert(now);
        if now.since(first) > ACROSS_GRACE {
            return Err(format!("{detail}, for {} already", now.since(first)));
        }
    }
    Ok(())
}

/// Checks each worker registered with `leader`; returns the slots two of
/// them both run (neither asked to kill), with a description.
fn registered_workers_side(w: &World, leader: usize) -> Result<BTreeMap<Slot, String>, String> {
    let master = w.masters[leader].master();
    // Executors whose kill the leader owes for a removed framework (see
    // the module's doc): asked to be killed as much as one sent.
    let dying: BTreeSet<ExecutorId> =
        master.dying_holds().into_iter().map(|h| h.executor).collect();
    let mut across: BTreeMap<Slot, (usize, &ExecutorId)> = BTreeMap::new();
    let mut doubled = BTreeMap::new();
    for (i, wp) in w.workers.iter().enumerate() {
        if !wp.p.up {
            continue;
        }
        let cfg = wp.worker().config();
        let registered = master.workers().iter().any(|e| {
            e.id == cfg.id && e.incarnation == cfg.incarnation && e.state == WorkerState::Alive
        });
        if !registered {
            continue; // DEAD (the exception above), unknown or replaced
        }
        let mut seen: BTreeMap<Slot, &ExecutorId> = BTreeMap::new();
        for x in w.running_executors(i) {
            let Some(slot) = parse_executor(x) else { continue };
            if !w.obs.kills_sent.contains(x) && !dying.contains(x) {
                if let Some((j, other)) = across.insert(slot.clone(), (i, x)) {
                    if j != i {
                        let detail = format!(
                            "w{j} and w{i}, both registered with the leader m{leader} (epoch {}), run executors of slot {}#{} of {}: {other} and {x}, and no master asked to kill either",
                            master.epoch(),
                            slot.1,
                            slot.2,
                            slot.0
                        );
                        doubled.insert(slot.clone(), detail);
                    }
                }
            }
            if let Some(other) = seen.insert(slot.clone(), x) {
                return Err(format!(
                    "w{i} ({}), registered with the leader m{leader} (epoch {}), runs two executors of slot {}#{} of {}: {other} and {x}",
                    cfg.incarnation,
                    master.epoch(),
                    slot.1,
                    slot.2,
                    slot.0
                ));
            }
        }
    }
    Ok(doubled)
}

/// The current leader: the ALIVE master (process up) at the highest epoch.
fn current_leader(w: &World) -> Option<usize> {
    (0..w.masters.len())
        .filter(|&m| w.masters[m].p.up && w.masters[m].master().status() == Status::Alive)
        .max_by_key(|&m| w.masters[m].master().epoch())
}

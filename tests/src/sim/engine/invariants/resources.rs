//! Resources are never over-allocated once a leader has settled: at every
//! ALIVE leader, each worker entry has `cores_used <= cores` and
//! `memory_used_mb <= memory_mb`, and the live executors it places on that
//! worker add up to exactly that usage.

use crate::sim::engine::World;
use regent_core::master::Status;

pub(crate) fn check(w: &World) -> Result<(), String> {
    for (i, mp) in w.masters.iter().enumerate() {
        if !mp.p.up || mp.master().status() != Status::Alive {
            continue;
        }
        let execs: Vec<_> = mp.master().executors().filter(|e| !e.state.is_terminal()).collect();
        let dying = mp.master().dying_holds();
        for e in mp.master().workers() {
            let (dc, dm) = dying
                .iter()
                .filter(|d| d.worker == e.id)
                .fold((0u32, 0u64), |(c, m), d| (c + d.cores, m + d.memory_mb));
            let placed = (e.cores_used.saturating_sub(dc), e.memory_used_mb.saturating_sub(dm));
            if placed.0 > e.cores || placed.1 > e.memory_mb {
                return Err(format!(
                    "m{i}: worker {} over-allocated: {}/{} cores, {}/{} MiB",
                    e.id, e.cores_used, e.cores, e.memory_used_mb, e.memory_mb
                ));
            }
            let (cores, mem) = execs
                .iter()
                .filter(|x| x.worker == e.id)
                .fold((dc, dm), |(c, m), x| (c + x.cores, m + x.memory_mb));
            if (cores, mem) != (e.cores_used, e.memory_used_mb) {
                return Err(format!(
                    "m{i}: worker {} counts {} cores / {} MiB used, its live and dying executors hold {cores} / {mem}",
                    e.id, e.cores_used, e.memory_used_mb
                ));
            }
        }
    }
    Ok(())
}

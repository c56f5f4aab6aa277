//! Named resources (GPUs) are never handed out twice: on every worker that
//! is up, the live executors it runs hold distinct addresses, each one it
//! offers, as many of each kind as their group asked for (the worker picks
//! them, re-adopted executors included); and at every ALIVE leader, each
//! worker entry counts no more of a kind held than offered, and exactly
//! what its live executors there were placed (or adopted) with.

use crate::sim::engine::World;
use regent_core::master::Status;
use std::collections::BTreeMap;

pub(crate) fn check(w: &World) -> Result<(), String> {
    for (i, wp) in w.workers.iter().enumerate() {
        if !wp.p.up {
            continue;
        }
        let worker = wp.worker();
        let offers = &worker.config().resources;
        let mut holder = BTreeMap::new();
        for e in worker.executors().filter(|e| !e.state.is_terminal()) {
            for (name, addresses) in &e.resources {
                let offered = offers.iter().find(|o| o.name == *name);
                for a in addresses {
                    if !offered.is_some_and(|o| o.addresses.contains(a)) {
                        return Err(format!(
                            "w{i}: executor {} holds {name} {a}, which this worker does not offer",
                            e.id
                        ));
                    }
                    if let Some(other) = holder.insert((name.clone(), a.clone()), &e.id) {
                        return Err(format!(
                            "w{i}: {name} {a} is held by two live executors, {other} and {}",
                            e.id
                        ));
                    }
                }
            }
        }
    }
    for (i, mp) in w.masters.iter().enumerate() {
        if !mp.p.up || mp.master().status() != Status::Alive {
            continue;
        }
        let execs: Vec<_> = mp.master().executors().filter(|e| !e.state.is_terminal()).collect();
        let dying = mp.master().dying_holds();
        for e in mp.master().workers() {
            let Some(r) = &e.resources else {
                if let Some(x) =
                    execs.iter().find(|x| x.worker == e.id && !x.resources_held.is_empty())
                {
                    return Err(format!(
                        "m{i}: executor {} holds named resources on {}, which offers none",
                        x.id, e.id
                    ));
                }
                continue;
            };
            for (offer, held) in r.offered.iter().zip(&r.held) {
                let placed: u32 = execs
                    .iter()
                    .filter(|x| x.worker == e.id)
                    .flat_map(|x| &x.resources_held)
                    .filter(|(n, _)| *n == offer.name)
                    .map(|(_, k)| *k)
                    .sum();
                // Killed executors whose end is not reported yet still
                // hold theirs (`Master::dying_holds`).
                let killed: u32 = dying
                    .iter()
                    .filter(|d| d.worker == e.id)
                    .flat_map(|d| &d.resources)
                    .filter(|(n, _)| *n == offer.name)
                    .map(|(_, k)| *k)
                    .sum();
                if placed as usize > offer.addresses.len() || *held != placed + killed {
                    return Err(format!(
                        "m{i}: worker {} counts {held}/{} {} held, its live executors hold {placed} and dying ones {killed}",
                        e.id,
                        offer.addresses.len(),
                        offer.name
                    ));
                }
            }
        }
    }
    Ok(())
}

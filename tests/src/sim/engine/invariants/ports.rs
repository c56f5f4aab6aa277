//! Named ports are never handed out twice: on every worker that is up, the
//! live executors it runs hold distinct port numbers, all inside the ranges
//! it offers (the worker numbers them, re-adopted executors included); and
//! at every ALIVE leader, each worker entry has `ports_used <= ports`, equal
//! to the ports its live executors there were placed with.

use crate::sim::engine::World;
use regent_core::master::Status;
use std::collections::BTreeMap;

pub(crate) fn check(w: &World) -> Result<(), String> {
    for (i, wp) in w.workers.iter().enumerate() {
        if !wp.p.up {
            continue;
        }
        let worker = wp.worker();
        let ranges = &worker.config().ports;
        let mut holder = BTreeMap::new();
        for e in worker.executors().filter(|e| !e.state.is_terminal()) {
            for (name, port) in &e.ports {
                if !ranges.iter().any(|r| r.first <= *port && *port <= r.last) {
                    return Err(format!(
                        "w{i}: executor {} holds port {name}={port}, outside the offered {}",
                        e.id,
                        regent_core::ports::describe_ranges(ranges)
                    ));
                }
                if let Some(other) = holder.insert(*port, &e.id) {
                    return Err(format!(
                        "w{i}: port {port} is held by two live executors, {other} and {}",
                        e.id
                    ));
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
            // Killed executors whose end is not reported yet still hold
            // theirs (`Master::dying_holds`).
            let killed: u32 = dying.iter().filter(|d| d.worker == e.id).map(|d| d.ports).sum();
            let placed: u32 = execs.iter().filter(|x| x.worker == e.id).map(|x| x.port_count).sum();
            let held = placed + killed;
            if placed > e.ports || held != e.ports_used {
                return Err(format!(
                    "m{i}: worker {} counts {}/{} ports used, its live and dying executors hold {held}",
                    e.id, e.ports_used, e.ports
                ));
            }
        }
    }
    Ok(())
}

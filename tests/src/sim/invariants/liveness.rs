//! Liveness, checked once the faults are over and everything is healed:
//! within a bounded simulated time exactly one master is ALIVE and acting,
//! every live worker is registered with it (and ALIVE in its registry with
//! its current incarnation), and every live subscriber is subscribed with it.

use crate::sim::engine::{master_addr, World};
use regent_core::master::{Status, WorkerState};

pub(crate) fn holds(w: &World) -> Result<(), String> {
    let leaders: Vec<usize> = (0..w.masters.len())
        .filter(|&i| {
            let mp = &w.masters[i];
            mp.p.up
                && !mp.p.paused(w.now)
                && mp.master().status() == Status::Alive
                && mp.elector().is_acting(w.now)
        })
        .collect();
    let [l] = leaders[..] else {
        let states: Vec<String> = w
            .masters
            .iter()
            .enumerate()
            .map(|(i, mp)| {
                format!(
                    "m{i}: up {} {:?} {} elector {:?}",
                    mp.p.up,
                    mp.master().status(),
                    mp.master().epoch(),
                    mp.elector().status(w.now)
                )
            })
            .collect();
        return Err(format!("{} acting ALIVE leaders; {}", leaders.len(), states.join("; ")));
    };
    let addr = master_addr(l);
    let registry = w.masters[l].master().workers();
    for (i, wp) in w.workers.iter().enumerate() {
        if !wp.p.up || wp.exited.is_some() {
            continue;
        }
        let st = wp.worker().status();
        if !st.registered || st.active.as_ref() != Some(&addr) {
            return Err(format!("w{i} is not registered with leader m{l}: {st:?}"));
        }
        let cfg = wp.worker().config();
        if !registry.iter().any(|e| {
            e.id == cfg.id && e.incarnation == cfg.incarnation && e.state == WorkerState::Alive
        }) {
            return Err(format!("leader m{l} does not hold w{i} ({}) ALIVE", cfg.incarnation));
        }
    }
    for (i, sp) in w.subs.iter().enumerate() {
        // A submission that is over (its node ending or exited) follows
        // nothing any more.
        if !sp.p.up || sp.exited.is_some() || sp.node.ending().is_some() {
            continue;
        }
        let st = sp.sub().status();
        if !st.subscribed || st.master.as_ref() != Some(&addr) {
            return Err(format!("f{i} is not subscribed with leader m{l}: {st:?}"));
        }
    }
    Ok(())
}

//! Liveness, checked once the faults are over and everything is healed:
//! within a bounded simulated time exactly one master is ALIVE and acting,
//! every live worker is registered with it (and ALIVE in its registry with
//! its current incarnation), every live subscriber is subscribed with it,
//! and no executor has been LAUNCHING at it for longer than
//! [`LAUNCH_BOUND`] (docs/design.md#issue-20 scenario 7: a leader that cannot confirm its
//! acting lease sends no launch, and its executors stay LAUNCHING).
//!
//! Slow dependencies that last to the end of the run (a store whose writes
//! take 10–15 s, a ZooKeeper round trip of up to 1 s: `Fault::SlowStore`
//! and `Fault::ZkLatency` with `ms: 0`) are not healed: the cluster must
//! settle with them (docs/design.md#progress-when-dependencies-are-slow: slower, never livelocked).

use crate::sim::engine::{master_addr, World};
use regent_core::master::{Status, WorkerState};
use regent_core::protocol::ExecutorState;
use regent_core::Millis;

/// How long a settled leader may hold an executor LAUNCHING: time for its
/// launch to reach the worker, the process to start and its report to
/// come back, with a slow store (15 s writes) in the way.
pub(crate) const LAUNCH_BOUND: Millis = Millis(30_000);

pub(crate) fn holds(w: &World) -> Result<(), String> {
    let leaders: Vec<usize> = (0..w.masters.len())
        .filter(|&i| {
            let mp = &w.masters[i];
            mp.p.up
                && !mp.p.paused(w.now)
                && mp.master().status() == Status::Alive
                && mp.elector().is_acting(w.node_now(crate::sim::engine::Node::Master(i)))
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
    let gen = w.masters[l].p.gen;
    for e in w.masters[l].master().executors() {
        if e.state != ExecutorState::Launching {
            continue;
        }
        let since = w.obs.launching_since.get(&(l, gen, e.id.clone())).copied().unwrap_or(w.now);
        if w.now.since(since) > LAUNCH_BOUND {
            return Err(format!(
                "leader m{l} has held {} LAUNCHING on {} since {since} (launch {}, sent on {:?}; {} frames held for the acting lease)",
                e.id,
                e.worker,
                e.launch,
                e.sent_on,
                w.masters[l].node.held_frames()
            ));
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

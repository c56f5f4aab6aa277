//! At most one master acts as leader at any moment: process up and not
//! paused, master RECOVERING or ALIVE, and its elector acting (elected, not
//! suspended, lease valid: `Elector::is_acting(now)`). And never two ALIVE
//! masters with the same epoch.
//!
//! One exception, by design: a leader whose election node a standby
//! deleted while its session lived (a fast takeover,
//! docs/machines.md#fast-takeover-and-the-acting-lease-coresrcnodewatchrs-coresrcelector) acts until it learns of the deletion — at once from the
//! watch on its node, or when it resumes from a pause. Its store writes are
//! fenced by that node, so they fail; its commands are bounded by the acting
//! lease, which [`super::command_order`] checks. A leader whose *session*
//! expired is no exception: its lease (docs/design.md#time-is-an-input) must have ended first.

use crate::sim::engine::World;
use regent_core::master::Status;

pub(crate) fn check(w: &World) -> Result<(), String> {
    let mut acting = Vec::new();
    let mut alive = Vec::new();
    for (i, mp) in w.masters.iter().enumerate() {
        if !mp.p.up {
            continue;
        }
        let status = mp.master().status();
        if status == Status::Alive {
            alive.push((i, mp.master().epoch()));
        }
        let deposed = mp.elector().node_path().is_some_and(|p| w.obs.deposed_nodes.contains(&p));
        if !mp.p.paused(w.now)
            && matches!(status, Status::Alive | Status::Recovering)
            && mp.elector().is_acting(w.node_now(crate::sim::engine::Node::Master(i)))
            && !deposed
        {
            acting.push((i, mp.master().epoch()));
        }
    }
    if acting.len() > 1 {
        return Err(format!(
            "{} masters act as leader at once: {acting:?} (master, epoch)",
            acting.len()
        ));
    }
    for (k, (i, e)) in alive.iter().enumerate() {
        if let Some((j, _)) = alive[k + 1..].iter().find(|(_, e2)| e2 == e) {
            return Err(format!("m{i} and m{j} are both ALIVE at {e}"));
        }
    }
    Ok(())
}

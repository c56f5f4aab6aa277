//! No worker id is registered twice at a leader: the registry holds one
//! entry per id, and a worker is acknowledged as newly registered
//! (`Registered { duplicate: false }`) at most once while its entry stays
//! ALIVE (SPARK-4592: a duplicate registration is acknowledged idempotently).

use crate::sim::engine::{Node, World};
use regent_core::master::WorkerState;
use regent_core::protocol::Message;

pub(crate) fn check(w: &World) -> Result<(), String> {
    for (i, mp) in w.masters.iter().enumerate() {
        let ids: Vec<_> = mp.master().workers().iter().map(|e| e.id.clone()).collect();
        if ids.windows(2).any(|p| p[0] == p[1]) {
            return Err(format!("m{i} holds a worker id twice: {ids:?}"));
        }
    }
    Ok(())
}

/// Forgets first-time acknowledgements of workers that are no longer ALIVE
/// at master `m` (marked DEAD, replaced, or the leadership ended).
pub(crate) fn after_master_handle(w: &mut World, m: usize) {
    let mp = &w.masters[m];
    let gen = mp.p.gen;
    let workers = mp.master().workers();
    w.obs.acked_new.retain(|(mm, g, id, inc)| {
        *mm != m
            || (*g == gen
                && workers
                    .iter()
                    .any(|e| &e.id == id && e.incarnation == *inc && e.state == WorkerState::Alive))
    });
}

pub(crate) fn on_registered(
    w: &mut World,
    m: usize,
    client: Node,
    msg: &Message,
) -> Result<(), (&'static str, String)> {
    let (Node::Worker(i), Message::Registered { epoch, duplicate: false, .. }) = (client, msg)
    else {
        return Ok(());
    };
    let cfg = w.workers[i].worker().config();
    let key = (m, w.masters[m].p.gen, cfg.id.clone(), cfg.incarnation);
    if !w.obs.acked_new.insert(key) {
        return Err((
            "registry",
            format!(
                "m{m} at {epoch} acknowledged w{i} ({}) as newly registered twice while it stayed ALIVE",
                cfg.incarnation
            ),
        ));
    }
    Ok(())
}

//! Maintenance state survives failover and a worker going DEAD: once a
//! leader accepted an operator's cordon or drain of a worker (answered
//! `RequestAccepted`, so it is durable), every acting leader that has
//! recovered and knows that worker ALIVE keeps it under maintenance until
//! an uncordon is accepted (a worker whose registration is still being
//! made durable is checked once it is ALIVE). A worker with a maintenance request still
//! unanswered is not checked (its state is changing). Issue 41 (docs/design.md#issue-41)'s third
//! scenario: a cordoned worker swept DEAD lost its cordon with its record,
//! and a new leader placed work on the machine under repair.

use crate::sim::engine::World;
use regent_core::master::{Status, WorkerState};
use regent_core::protocol::Message;
use regent_core::WorkerId;

/// An operator's cordon, drain (`true`) or uncordon (`false`) of a worker
/// is sent as request `request`.
pub(crate) fn on_request(w: &mut World, msg: &Message) {
    let (request, worker, on) = match msg {
        Message::CordonWorker { request, worker }
        | Message::DrainWorker { request, worker, .. } => (*request, worker, true),
        Message::UncordonWorker { request, worker } => (*request, worker, false),
        _ => return,
    };
    w.obs.maintenance_requests.insert(request, (worker.clone(), on));
}

/// A leader answered `request` (`accepted` or refused).
pub(crate) fn on_answer(w: &mut World, m: usize, request: u64, accepted: bool) {
    if let Some((worker, on)) = w.obs.maintenance_requests.remove(&request) {
        if accepted {
            let epoch = w.masters[m].master().epoch();
            w.obs.maintained.insert(worker, (on, epoch));
        }
    }
}

pub(crate) fn check(w: &World) -> Result<(), String> {
    let Some(l) = w.acting_leader() else { return Ok(()) };
    let master = w.masters[l].master();
    if master.status() != Status::Alive || master.recovering() {
        return Ok(());
    }
    let unsettled: Vec<&WorkerId> = w.obs.maintenance_requests.values().map(|(id, _)| id).collect();
    for e in master.workers() {
        if e.state == WorkerState::Alive
            // A deposed leader still acting on its lease cannot know of
            // a cordon its successor accepted.
            && w.obs.maintained.get(&e.id).is_some_and(|(on, at)| *on && master.epoch() >= *at)
            && !unsettled.contains(&&e.id)
            && e.maintenance.is_none()
        {
            return Err(format!(
                "m{l} ({}) knows worker {} ({:?}) without maintenance, though its cordon or drain was accepted and never undone",
                master.epoch(),
                e.id,
                e.state
            ));
        }
    }
    Ok(())
}

//! Every acknowledged registration, subscription and executor request
//! survives failover. An acknowledgement (`Registered`, `Subscribed`,
//! `RequestAccepted` for a group declaration) may only be sent once the
//! store holds what it acknowledges (DESIGN rule 3); from then on the store
//! must keep it for the next leader until a leader legitimately removes it
//! (a DEAD worker's conditional delete, a new incarnation's record, a
//! framework's teardown or failover timeout). Checked at every
//! acknowledgement, at every store write and whenever a leader loads.

use crate::sim::engine::{Node, World};
use regent_core::protocol::Message;
use regent_core::store::{Record, RecordKey};

type R = Result<(), (&'static str, String)>;

pub(crate) fn on_registered(w: &mut World, client: Node, msg: &Message) -> R {
    let (Node::Worker(i), Message::Registered { duplicate: false, epoch, .. }) = (client, msg)
    else {
        return Ok(());
    };
    let cfg = w.workers[i].worker().config();
    let (id, inc) = (cfg.id.clone(), cfg.incarnation);
    match w.stored_at(&RecordKey::Worker(id.clone())) {
        Some(Record::Worker(r)) if r.incarnation == inc => {}
        other => {
            return Err((
                "durable_acks",
                format!(
                    "Registered at {epoch} sent to {id} ({inc}) while the store holds {other:?}"
                ),
            ))
        }
    }
    w.obs.acked_workers.insert(id, inc);
    Ok(())
}

pub(crate) fn on_sub_ack(w: &mut World, client: Node, msg: &Message) -> R {
    let Node::Sub(s) = client else { return Ok(()) };
    match msg {
        Message::Subscribed { framework, epoch, .. } => {
            if w.stored_at(&RecordKey::Framework(framework.clone())).is_none() {
                return Err((
                    "durable_acks",
                    format!(
                        "Subscribed at {epoch} sent for {framework} before its record is durable"
                    ),
                ));
            }
            w.obs.acked_frameworks.insert(framework.clone());
        }
        Message::RequestAccepted { request, epoch } => {
            let gen = w.subs[s].p.gen;
            let Some(group) = w.obs.sub_requests.get(&(s, gen, *request)).cloned() else {
                return Ok(()); // a kill or a teardown
            };
            let Some(fw) = w.subs[s].sub().status().framework else { return Ok(()) };
            let durable = match w.stored_at(&RecordKey::Framework(fw.clone())) {
                Some(Record::Framework(r)) => r.groups.iter().any(|g| g.spec.group == group),
                _ => false,
            };
            if !durable {
                return Err((
                    "durable_acks",
                    format!(
                        "declaration of group {group} of {fw} (request {request}) accepted at {epoch} before it is durable"
                    ),
                ));
            }
            w.obs.acked_groups.insert((fw, group));
        }
        _ => {}
    }
    Ok(())
}

pub(crate) fn on_store_write(w: &mut World, record: &Record) -> Result<(), String> {
    match record {
        Record::Worker(r) => {
            if w.obs.acked_workers.get(&r.id).is_some_and(|inc| *inc != r.incarnation) {
                w.obs.acked_workers.remove(&r.id); // replaced by a new incarnation
            }
        }
        Record::Framework(r) => {
            for (fw, group) in &w.obs.acked_groups {
                if *fw == r.id && !r.groups.iter().any(|g| &g.spec.group == group) {
                    return Err(format!(
                        "a write of framework {fw}'s record drops its acknowledged group {group}"
                    ));
                }
            }
        }
        Record::Epoch(_) | Record::History(_) => {}
    }
    Ok(())
}

pub(crate) fn on_store_delete(w: &mut World, key: &RecordKey) {
    match key {
        RecordKey::Worker(id) => {
            w.obs.acked_workers.remove(id);
        }
        RecordKey::Framework(fw) => {
            w.obs.acked_frameworks.remove(fw);
            w.obs.acked_groups.retain(|(f, _)| f != fw);
        }
        RecordKey::Epoch | RecordKey::History(_) => {}
    }
}

pub(crate) fn on_loaded(w: &World, records: &[Record]) -> Result<(), String> {
    for (id, inc) in &w.obs.acked_workers {
        let found = records
            .iter()
            .any(|r| matches!(r, Record::Worker(wr) if &wr.id == id && wr.incarnation == *inc));
        if !found {
            return Err(format!(
                "acknowledged worker {id} ({inc}) is missing from the records a new leader loads"
            ));
        }
    }
    for fw in &w.obs.acked_frameworks {
        if !records.iter().any(|r| matches!(r, Record::Framework(f) if &f.id == fw)) {
            return Err(format!(
                "acknowledged framework {fw} is missing from the records a new leader loads"
            ));
        }
    }
    for (fw, group) in &w.obs.acked_groups {
        let found = records.iter().any(|r| {
            matches!(r, Record::Framework(f) if &f.id == fw && f.groups.iter().any(|g| &g.spec.group == group))
        });
        if !found {
            return Err(format!(
                "acknowledged group {group} of {fw} is missing from the records a new leader loads"
            ));
        }
    }
    Ok(())
}

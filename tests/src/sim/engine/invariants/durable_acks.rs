//! Acknowledged means durable, for every acknowledgement kind. An
//! acknowledgement may only be sent once the store holds what it
//! acknowledges (docs/design.md#durable-before-acknowledged):
//!
//! * `Registered` (first or duplicate): the worker's record with that
//!   incarnation;
//! * `Subscribed`: the framework's record;
//! * `RequestAccepted` for a group declaration: the group in the
//!   framework's record; for a scale: a write of the group with that slot
//!   count landed since the request was sent (or the store holds that count
//!   now); for a cordon, a drain or an uncordon: a write of the worker's
//!   record with that hold (cordoned or any stronger hold; draining or
//!   drained; none) landed since, or the store holds it now; for a
//!   teardown: the framework's record was deleted since, or is gone;
//! * `ExecutorStatusAck` of an exit: checked by [`super::executor_exits`].
//!
//! Kills (`KillExecutor`, `OperatorKillExecutor`) are not checked here: an
//! accepted kill of an executor already replaced in its slot changes no
//! record; the `kills` invariant checks every kill sent has a reason.
//!
//! "Since the request was sent", not "now": a later write (another
//! operator's change, the DEAD sweep) may change the record again before
//! the acknowledgement of the first leaves, and that is no violation. And a
//! later request that changes the same thing (a scale of the same group,
//! a hold of the same worker) sent before the first was backed supersedes
//! it: the store may write only the newer image (a queued put takes the
//! newer record), which backs both. Found by seed 2330 (`--operator
//! --slow-store --zk-latency --clock-steps`): a scale to 4 and a scale to 3
//! of one group, 1.5 s apart behind a store 10 s slow, written once with 3
//! slots; the first acceptance was reported as not durable.
//!
//! From then on the store must keep registrations, subscriptions and
//! groups for the next leader until a leader legitimately removes them (a
//! DEAD worker's conditional delete, a new incarnation's record, a
//! framework's teardown or failover timeout). Checked at every
//! acknowledgement, at every store write and whenever a leader loads.

use crate::sim::engine::{Node, World};
use regent_core::protocol::Message;
use regent_core::store::{Maintenance, Record, RecordKey};
use regent_core::{FrameworkId, WorkerId};

/// What backs the acceptance of a subscriber's or an operator's request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Backing {
    /// A scale of a group to `slots`.
    Scale { framework: FrameworkId, group: String, slots: u32 },
    /// A cordon of a worker (`hold`: which holds satisfy it).
    Hold { worker: WorkerId, hold: Hold },
    /// A teardown of a framework.
    Teardown { framework: FrameworkId },
}

/// A request waiting for its backing: what backs it, whether a write of it
/// landed since it was sent, and the later requests that superseded it.
pub(crate) type Pending = (Backing, bool, Vec<Backing>);

/// The worker holds a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Any hold (a cordon of a draining worker keeps the drain).
    Cordon,
    /// Draining or drained.
    Drain,
    /// None.
    Uncordon,
}

impl Backing {
    fn written(&self, record: &Record) -> bool {
        match (self, record) {
            (Backing::Scale { framework, group, slots }, Record::Framework(r)) => {
                r.id == *framework
                    && r.groups
                        .iter()
                        .any(|g| g.spec.group == *group && count(&g.slots) == *slots as usize)
            }
            (Backing::Hold { worker, hold }, Record::Worker(r)) => {
                r.id == *worker
                    && match hold {
                        Hold::Cordon => r.maintenance.is_some(),
                        Hold::Drain => matches!(
                            r.maintenance,
                            Some(Maintenance::Draining { .. } | Maintenance::Drained)
                        ),
                        Hold::Uncordon => r.maintenance.is_none(),
                    }
            }
            _ => false,
        }
    }

    fn deleted(&self, key: &RecordKey) -> bool {
        matches!((self, key), (Backing::Teardown { framework }, RecordKey::Framework(f)) if f == framework)
    }

    /// Whether the store holds what backs it now.
    fn holds(&self, w: &World) -> bool {
        match self {
            Backing::Scale { framework, .. } | Backing::Teardown { framework } => {
                let r = w.stored_at(&RecordKey::Framework(framework.clone()));
                match self {
                    Backing::Teardown { .. } => r.is_none(),
                    _ => r.is_some_and(|r| self.written(&r)),
                }
            }
            Backing::Hold { worker, .. } => {
                w.stored_at(&RecordKey::Worker(worker.clone())).is_some_and(|r| self.written(&r))
            }
        }
    }
}

impl Backing {
    /// Whether `later` changes what this one changes (the same group, the
    /// same worker, the same framework), so that it may supersede it.
    fn same_target(&self, later: &Backing) -> bool {
        match (self, later) {
            (
                Backing::Scale { framework: a, group: g, .. },
                Backing::Scale { framework: b, group: h, .. },
            ) => a == b && g == h,
            (Backing::Hold { worker: a, .. }, Backing::Hold { worker: b, .. }) => a == b,
            (Backing::Teardown { framework: a }, Backing::Teardown { framework: b }) => a == b,
            _ => false,
        }
    }
}

/// Remembers a request whose acceptance `backing` must back: sent by
/// subscriber `s` (process generation `gen`) with id `request`. A request
/// not yet backed by a landed write is superseded by this one if it changes
/// the same thing: the leader's store may then write only the newer image
/// (a queued put of a key takes the newer record: the ZooKeeper store's
/// `put`), and a write backing this one backs it too — as when the two
/// were written one after the other, the older state is simply overwritten.
pub(crate) fn on_request(w: &mut World, s: usize, gen: u64, request: u64, backing: Backing) {
    for (earlier, landed, superseded_by) in w.obs.backed_requests.values_mut() {
        if !*landed && earlier.same_target(&backing) {
            superseded_by.push(backing.clone());
        }
    }
    w.obs.backed_requests.insert((s, gen, request), (backing, false, Vec::new()));
}

type R = Result<(), (&'static str, String)>;

pub(crate) fn on_registered(w: &mut World, client: Node, msg: &Message) -> R {
    let (Node::Worker(i), Message::Registered { duplicate, epoch, .. }) = (client, msg) else {
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
                    "Registered (duplicate: {duplicate}) at {epoch} sent to {id} ({inc}) while the store holds {other:?}"
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
            if let Some((backing, landed, superseded_by)) =
                w.obs.backed_requests.remove(&(s, gen, *request))
            {
                if !landed && !backing.holds(w) && !superseded_by.iter().any(|b| b.holds(w)) {
                    return Err((
                        "durable_acks",
                        format!(
                            "request {request} ({backing:?}) of f{s} accepted at {epoch} before a write backing it landed"
                        ),
                    ));
                }
                return Ok(());
            }
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
    for (backing, landed, superseded_by) in w.obs.backed_requests.values_mut() {
        *landed |= backing.written(record) || superseded_by.iter().any(|b| b.written(record));
    }
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
        Record::Epoch(_) | Record::History(_) | Record::Revocations(_) | Record::Tenant(_) => {}
    }
    Ok(())
}

pub(crate) fn on_store_delete(w: &mut World, key: &RecordKey) {
    for (backing, landed, superseded_by) in w.obs.backed_requests.values_mut() {
        *landed |= backing.deleted(key) || superseded_by.iter().any(|b| b.deleted(key));
    }
    match key {
        RecordKey::Worker(id) => {
            w.obs.acked_workers.remove(id);
        }
        RecordKey::Framework(fw) => {
            w.obs.acked_frameworks.remove(fw);
            w.obs.acked_groups.retain(|(f, _)| f != fw);
        }
        RecordKey::Epoch
        | RecordKey::History(_)
        | RecordKey::Revocations
        | RecordKey::Tenant(_) => {}
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

/// A group's count in its record: its slots less the holes a scale naming
/// executors left ([`SlotOutcome::Removed`]).
fn count(slots: &[regent_core::store::SlotOutcome]) -> usize {
    slots.iter().filter(|o| !matches!(o, regent_core::store::SlotOutcome::Removed { .. })).count()
}

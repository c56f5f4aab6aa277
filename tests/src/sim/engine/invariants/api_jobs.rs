//! Jobs the leader owns keep every promise their answers made
//! (docs/design.md#issue-43, core/src/master/jobs.rs), whatever leader
//! gave the answer, for the API client of `regent-soak --api-jobs`:
//!
//! * an idempotency key answered once is answered with the same job and
//!   version ever after (a retry after a timeout or a leader change);
//! * an acknowledged version is never lost: every master that leads at a
//!   later epoch than the acknowledgement's knows the job at that version
//!   or a later one, until a `DeleteJob` of it was sent (so the job is
//!   never removed but by a delete: no failover timeout applies to it);
//! * a job's version never decreases while one master leads at one epoch
//!   (a job removed and created again starts over);
//! * one job id is never two frameworks: no framework is both a job the
//!   leader owns and driven by a subscriber's connection, a subscriber's
//!   framework never turns into a job (or back) while one master leads at
//!   one epoch (the client submits under live subscribers' framework ids
//!   too), and a listing names each job once.
//!
//! Checked at every answer and after every step.

use crate::sim::engine::World;
use regent_core::master;
use regent_core::protocol::Message;
use regent_core::{Epoch, FrameworkId};
use std::collections::{BTreeMap, BTreeSet};

/// What the invariant remembers.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// Each request sent: its job, its key, and the job's life then.
    requests: BTreeMap<u64, (Option<FrameworkId>, Option<String>, u64)>,
    /// Each job's life: how many deletes of it were sent.
    life: BTreeMap<FrameworkId, u64>,
    /// Keys answered: key -> (job, version, life).
    keys: BTreeMap<String, (FrameworkId, u64, u64)>,
    /// The highest version acknowledged in each job's current life, at
    /// which epoch.
    acked: BTreeMap<FrameworkId, (u64, Epoch)>,
    /// What each master leading showed last: (master, framework) ->
    /// (process generation, epoch, its job's version or `None` for a
    /// subscriber's framework).
    shown: BTreeMap<(usize, FrameworkId), (u64, Epoch, Option<u64>)>,
}

/// Records a violation.
pub(crate) fn fail(w: &mut World, detail: String) {
    super::fail(w, "api_jobs", detail);
}

/// The API client sends `msg` (not a retry).
pub(crate) fn on_request(w: &mut World, msg: &Message) {
    let seen = &mut w.obs.api;
    match msg {
        Message::SubmitJob { request, job } => {
            let life = seen.life.get(&job.job).copied().unwrap_or(0);
            seen.requests.insert(*request, (Some(job.job.clone()), job.key.clone(), life));
        }
        Message::DeleteJob { request, job } => {
            let life = seen.life.entry(job.clone()).or_default();
            *life += 1;
            seen.requests.insert(*request, (Some(job.clone()), None, *life));
            seen.acked.remove(job);
        }
        Message::JobsRequest { request, .. } => {
            seen.requests.insert(*request, (None, None, 0));
        }
        _ => {}
    }
}

/// Master `m` answers the API client's request `request` with `reply`.
pub(crate) fn on_answer(w: &mut World, m: usize, request: u64, reply: &Message) {
    let Some((job, key, life)) = w.obs.api.requests.get(&request).cloned() else { return };
    match reply {
        Message::JobAccepted { epoch, job: answered, version, change, .. } => {
            if job.as_ref() != Some(answered) {
                return fail(w, format!("m{m} accepted request {request} as job {answered}"));
            }
            let seen = &mut w.obs.api;
            if seen.life.get(answered).copied().unwrap_or(0) != life {
                return; // a delete of it was sent since: its promises are void
            }
            if let Some(key) = key {
                match seen.keys.get(&key) {
                    Some((_, first, _)) if first != version => {
                        let first = *first;
                        return fail(
                            w,
                            format!(
                                "key {key} of job {answered} was answered version {first}, \
                                 then version {version} ({change:?}) by m{m} at {epoch}"
                            ),
                        );
                    }
                    Some(_) => {}
                    None => {
                        seen.keys.insert(key, (answered.clone(), *version, life));
                    }
                }
            }
            let acked = seen.acked.entry(answered.clone()).or_insert((*version, *epoch));
            if *version >= acked.0 {
                *acked = (*version, (*epoch).max(acked.1));
            }
        }
        Message::JobsReply { jobs, .. } => {
            let mut ids = BTreeSet::new();
            for j in jobs {
                if !ids.insert(&j.job) {
                    return fail(w, format!("m{m} listed job {} twice", j.job));
                }
            }
        }
        _ => {}
    }
}

/// After every step: what each leading master knows keeps the promises.
pub(crate) fn check(w: &mut World) -> Result<(), String> {
    for m in 0..w.masters.len() {
        let mp = &w.masters[m];
        if !mp.p.up {
            continue;
        }
        let master = mp.master();
        if master.status() == master::Status::Standby {
            continue;
        }
        let (gen, epoch) = (mp.p.gen, master.epoch());
        let mut present = BTreeSet::new();
        for f in master.frameworks() {
            let version = f.job.as_ref().map(|j| j.version);
            if version.is_some() && f.conn.is_some() {
                return Err(format!("m{m}: job {} is driven by a subscriber's connection", f.id));
            }
            present.insert(f.id.clone());
            let key = (m, f.id.clone());
            let shown = w.obs.api.shown.entry(key).or_insert((gen, epoch, version));
            if shown.0 == gen && shown.1 == epoch {
                match (shown.2, version) {
                    (Some(before), Some(now)) if before > now => {
                        return Err(format!(
                            "m{m} at {epoch}: job {} went from version {before} to {now}",
                            f.id
                        ))
                    }
                    (None, Some(_)) | (Some(_), None) => {
                        return Err(format!(
                            "m{m} at {epoch}: framework {} is a job and a subscriber's \
                             framework ({:?} then {version:?})",
                            f.id, shown.2
                        ))
                    }
                    _ => {}
                }
            }
            *shown = (gen, epoch, version);
        }
        w.obs.api.shown.retain(|(sm, job), _| *sm != m || present.contains(job));
        for (job, (version, at)) in &w.obs.api.acked {
            if epoch <= *at {
                continue;
            }
            let known = master.frameworks().find(|f| &f.id == job).and_then(|f| f.job.as_ref());
            match known {
                Some(k) if k.version >= *version => {}
                Some(k) => {
                    return Err(format!(
                        "m{m} leads at {epoch} with job {job} at version {}, but version \
                         {version} was acknowledged at {at}",
                        k.version
                    ))
                }
                None => {
                    return Err(format!(
                        "m{m} leads at {epoch} without job {job}, acknowledged at version \
                         {version} at {at} and never deleted"
                    ))
                }
            }
        }
    }
    Ok(())
}

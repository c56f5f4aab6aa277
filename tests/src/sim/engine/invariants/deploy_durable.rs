//! A deployment survives failover without doubling or losing a slot
//! (docs/design.md#issue-45 item 5): in every framework record the store
//! applies, for each group's deployment,
//!
//! * a deployment, once stored, is never dropped nor replaced by an older
//!   one: the group's deployment number never goes back (until the
//!   framework's record is deleted);
//! * one deployment number keeps its identity: the same target spec, update
//!   policy, start and revert-of, whichever leader writes it (a new leader
//!   goes on with it, never starts it afresh);
//! * its count of ends by slot never goes back (an end counted is not lost
//!   in a failover), and never exceeds the distinct executors of that slot
//!   running the deployed spec that a worker reported ended (an end is not
//!   counted twice, at a re-registration or by a new leader).
//!
//! The same records feed [`super::deploy_reverts`].

use crate::sim::engine::{parse_executor, World};
use regent_core::policy::UpdatePolicy;
use regent_core::store::{spec_digest, DeploymentState, Record, RecordKey};
use regent_core::FrameworkId;
use std::collections::BTreeMap;

/// What the store held of one deployment.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    target: u32,
    policy: UpdatePolicy,
    revert_of: Option<u64>,
    started_ms: u64,
    /// The digest of the spec it would revert to, as last stored while
    /// under way.
    pub(crate) revert_to: Option<u32>,
    ends: BTreeMap<u32, u32>,
    /// Its state was stored failed (counted once).
    failed: bool,
    /// It was stored succeeded (counted once).
    succeeded: bool,
}

/// The deployments the store held.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// (framework, group, deployment number) -> what was stored.
    pub(crate) deployments: BTreeMap<(FrameworkId, String, u64), Stored>,
    /// (framework, group) -> the newest deployment number stored.
    newest: BTreeMap<(FrameworkId, String), u64>,
    /// Deployments stored failed.
    pub(crate) failed: u64,
    /// Reverts stored succeeded.
    pub(crate) reverted: u64,
    /// Reverts stored (started).
    pub(crate) reverts: u64,
}

pub(crate) fn on_store_write(w: &mut World, m: usize, record: &Record) -> Result<(), String> {
    let Record::Framework(f) = record else { return Ok(()) };
    for g in &f.groups {
        let group = g.spec.group.clone();
        let key = (f.id.clone(), group.clone());
        let newest = w.obs.deploys.newest.get(&key).copied();
        let Some(d) = &g.deployment else {
            if let Some(seq) = newest {
                return Err(format!(
                    "m{m} wrote group {group} of {} without its deployment (number {seq} was stored)",
                    f.id
                ));
            }
            continue;
        };
        if let Some(seq) = newest.filter(|seq| d.seq < *seq) {
            return Err(format!(
                "m{m} wrote deployment {} of group {group} of {} after number {seq} was stored",
                d.seq, f.id
            ));
        }
        // No end counted twice: at most the distinct executors of the slot,
        // of the deployed spec, that a worker reported ended. Judged while
        // the deployment is under way or failed: a success drops the eras
        // no live executor needs, which an ended one's digest was read
        // from (ends are counted only while under way, and none in the
        // write that succeeds: an end leaves its slot below healthy).
        let judged = d.state != DeploymentState::Succeeded;
        for (slot, n) in &d.ends {
            let of_slot: Vec<_> = w
                .obs
                .ended
                .iter()
                .filter(|x| {
                    parse_executor(x)
                        .is_some_and(|(fw, gr, s)| fw == f.id && gr == group && s == *slot as usize)
                })
                .collect();
            let ended = of_slot.iter().filter(|x| g.digest_of(x) == d.target).count() as u32;
            if judged && *n > ended {
                let digests: Vec<String> =
                    of_slot.iter().map(|x| format!("{x} {:#x}", g.digest_of(x))).collect();
                return Err(format!(
                    "m{m} wrote {n} ends on slot {slot} for deployment {} (target {:#x}) of group {group} of {}, but only {ended} executors of its spec there ended (ended there: {digests:?}; eras {:?})",
                    d.seq, d.target, f.id, g.eras
                ));
            }
        }
        let dkey = (f.id.clone(), group.clone(), d.seq);
        let revert_to = d.revert_to.as_deref().map(spec_digest);
        match w.obs.deploys.deployments.get_mut(&dkey) {
            Some(s) => {
                if (s.target, s.policy, s.revert_of, s.started_ms)
                    != (d.target, d.policy, d.revert_of, d.started_ms)
                {
                    return Err(format!(
                        "m{m} wrote deployment {} of group {group} of {} as target {:#x} from {} ms (policy {:?}, revert of {:?}); it was stored as target {:#x} from {} ms (policy {:?}, revert of {:?})",
                        d.seq, f.id, d.target, d.started_ms, d.policy, d.revert_of,
                        s.target, s.started_ms, s.policy, s.revert_of
                    ));
                }
                for (slot, n) in &s.ends {
                    let now = d.ends.get(slot).copied().unwrap_or(0);
                    if now < *n {
                        return Err(format!(
                            "m{m} wrote {now} ends on slot {slot} for deployment {} of group {group} of {}; {n} were stored",
                            d.seq, f.id
                        ));
                    }
                }
                s.ends = d.ends.clone();
                if d.state.is_active() {
                    s.revert_to = revert_to;
                }
            }
            None => {
                w.obs.deploys.reverts += u64::from(d.revert_of.is_some());
                let s = Stored {
                    target: d.target,
                    policy: d.policy,
                    revert_of: d.revert_of,
                    started_ms: d.started_ms,
                    revert_to: if d.state.is_active() { revert_to } else { None },
                    ends: d.ends.clone(),
                    failed: false,
                    succeeded: false,
                };
                w.obs.deploys.deployments.insert(dkey.clone(), s);
            }
        }
        let s = w.obs.deploys.deployments.get_mut(&dkey).expect("inserted");
        let failed = matches!(d.state, DeploymentState::Failed { .. }) && !s.failed;
        let reverted =
            d.state == DeploymentState::Succeeded && d.revert_of.is_some() && !s.succeeded;
        s.failed |= failed;
        s.succeeded |= d.state == DeploymentState::Succeeded;
        w.obs.deploys.failed += u64::from(failed);
        w.obs.deploys.reverted += u64::from(reverted);
        w.obs.deploys.newest.insert(key, d.seq);
    }
    Ok(())
}

/// A record is deleted: a framework's deployments go with it (a job
/// created again under its id starts its numbers afresh).
pub(crate) fn on_store_delete(w: &mut World, key: &RecordKey) {
    let RecordKey::Framework(id) = key else { return };
    w.obs.deploys.deployments.retain(|(f, _, _), _| f != id);
    w.obs.deploys.newest.retain(|(f, _), _| f != id);
}

//! A failed deployment with `auto_revert` ends with every slot on the
//! stable version (docs/design.md#issue-45 item 5, docs/jobs.md,
//! "Deployments"): in every framework record the store applies,
//!
//! * a deployment stored failed (not itself a revert) whose policy has
//!   `auto_revert` was stored, while under way, with a spec to revert to
//!   only if the same write started the revert (so the store never shows
//!   it failed: the group's deployment is then the revert, one number on);
//! * a revert stored succeeded deploys the stable version: its target is
//!   the digest of the spec the failed deployment would revert to, the
//!   group's spec is that spec, and the leader that wrote it (if it still
//!   leads with that deployment) has no live executor of the group on
//!   another spec.
//!
//! What the store held of each deployment is [`super::deploy_durable`]'s.

use crate::sim::engine::World;
use regent_core::master;
use regent_core::store::{spec_digest, DeploymentState, Record};

/// Judged before [`super::deploy_durable::on_store_write`] records `record`.
pub(crate) fn on_store_write(w: &World, m: usize, record: &Record) -> Result<(), String> {
    let Record::Framework(f) = record else { return Ok(()) };
    for g in &f.groups {
        let group = &g.spec.group;
        let Some(d) = &g.deployment else { continue };
        let stored = |seq: u64| w.obs.deploys.deployments.get(&(f.id.clone(), group.clone(), seq));
        if let DeploymentState::Failed { reason } = &d.state {
            let stable = stored(d.seq).and_then(|s| s.revert_to);
            if d.revert_of.is_none() && d.policy.auto_revert {
                if let Some(stable) = stable {
                    return Err(format!(
                        "m{m} wrote deployment {} of group {group} of {} failed ({reason}) with auto_revert and the stable spec {stable:#x} to revert to, without reverting",
                        d.seq, f.id
                    ));
                }
            }
        }
        let (DeploymentState::Succeeded, Some(of)) = (&d.state, d.revert_of) else { continue };
        if let Some(stable) = stored(of).and_then(|s| s.revert_to) {
            if stable != d.target {
                return Err(format!(
                    "m{m} wrote revert {} of group {group} of {} succeeded at target {:#x}; deployment {of} was to revert to {stable:#x}",
                    d.seq, f.id, d.target
                ));
            }
        }
        if spec_digest(&g.spec) != d.target {
            return Err(format!(
                "m{m} wrote revert {} of group {group} of {} succeeded at target {:#x} with the group's spec at {:#x}",
                d.seq,
                f.id,
                d.target,
                spec_digest(&g.spec)
            ));
        }
        let mp = &w.masters[m];
        if !mp.p.up || mp.master().status() == master::Status::Standby {
            continue;
        }
        let Some(fw) = mp.master().frameworks().find(|x| x.id == f.id) else { continue };
        let Some(mg) = fw.groups.iter().find(|x| &x.record.spec.group == group) else { continue };
        if mg.record.deployment.as_ref().map(|x| (x.seq, &x.state)) != Some((d.seq, &d.state)) {
            continue;
        }
        let other = mp
            .master()
            .executors()
            .filter(|e| e.framework == f.id && &e.group == group && !e.state.is_terminal())
            .find(|e| mg.record.digest_of(&e.id) != d.target);
        if let Some(e) = other {
            return Err(format!(
                "m{m} wrote revert {} of group {group} of {} succeeded while {} (slot {}, {:?}) runs spec {:#x}, not the stable {:#x}",
                d.seq,
                f.id,
                e.id,
                e.slot,
                e.state,
                mg.record.digest_of(&e.id),
                d.target
            ));
        }
    }
    Ok(())
}

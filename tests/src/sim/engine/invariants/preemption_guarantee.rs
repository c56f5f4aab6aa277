//! Preemption never takes a tenant below its guarantee (docs/tenants.md,
//! docs/design.md#issue-44; `regent-soak --api-jobs --preemption`): when a
//! leader stops executors by preemption in a step (its count of
//! preemptions grew while it handled one input), every victim's tenant
//! still keeps at least its guarantee, in every dimension the guarantee
//! names, once all its victims are gone.
//!
//! What a tenant keeps is counted from the leader's executors, not from
//! its own use accounting: its live executors (LAUNCHING or RUNNING) but
//! those the leader already stops (this step's victims, earlier ones still
//! in their grace, kills, drains, a rollout's stops: it has no promise of
//! getting them back) and those its records name as being replaced. A
//! preemption an earlier leader chose but never made durable (lost in a
//! failover) stopped nothing: its executor counts at a later leader. Old
//! executors a deployment stops in the same step count as kept: the leader
//! deploys after it preempts, so they were the tenant's when it chose, and
//! their slots are refilled with the new version.
//! The guarantee is the one the operator set (the simulator's own table,
//! [`api_client::PREEMPTION_TENANTS`]), so a leader that lost or ignored it
//! is caught (`Knobs::hidden_guarantees` hides it from the leader:
//! tests/tests/sim_can_fail.rs).
//!
//! The victims found here are remembered for [`super::preempted_slots`]
//! and counted in the run's statistics (`RunStats::preemptions`).

use crate::sim::engine::api_client;
use crate::sim::engine::World;
use regent_core::master::Status;
use regent_core::{ExecutorId, FrameworkId};
use std::collections::{BTreeMap, BTreeSet};

/// A preempted executor: its slot (framework, group, index), and the
/// master and epoch that chose it.
#[derive(Clone, Debug)]
pub(crate) struct Victim {
    pub(crate) framework: FrameworkId,
    pub(crate) group: String,
    pub(crate) slot: usize,
    pub(crate) by: usize,
}

/// What a master held before it handled an input: its count of
/// preemptions and the executors it could have preempted.
pub(crate) struct Before {
    total: u64,
    live: BTreeSet<ExecutorId>,
    /// Every executor it knew, live or not.
    known: BTreeSet<ExecutorId>,
    /// The group records' `preempted` entries ([`super::preempted_by`]).
    preempted: BTreeSet<super::preempted_by::Entry>,
}

/// Before master `m` handles an input (only with tenants set: the API
/// client's modes), whatever its status.
pub(crate) fn before(w: &World, m: usize) -> Option<Before> {
    let mp = &w.masters[m];
    // Not only an ALIVE one: the step that ends a new leader's recovery
    // places and may preempt at once (docs/design.md#issue-44: found by
    // the `preempted_by` invariant, which missed such a step's choice).
    if !w.cfg.api_jobs || !mp.p.up {
        return None;
    }
    let master = mp.master();
    let live = master
        .executors()
        .filter(|e| !e.state.is_terminal() && !e.operator_stop && !e.kill_requested)
        .map(|e| e.id.clone())
        .collect();
    let known = master.executors().map(|e| e.id.clone()).collect();
    let preempted = super::preempted_by::entries(master);
    Some(Before { total: master.preemptions_started(), live, known, preempted })
}

/// After master `m` handled the input: the victims it chose, if any,
/// checked against their tenants' guarantees.
pub(crate) fn after(w: &mut World, m: usize, before: Option<Before>) -> Result<(), String> {
    let Some(before) = before else { return Ok(()) };
    let mp = &w.masters[m];
    let master = mp.master();
    if !mp.p.up || master.status() != Status::Alive || master.preemptions_started() <= before.total
    {
        return Ok(());
    }
    // What the step's preemptions name as their preemptor
    // ([`super::preempted_by`]).
    if let Err(detail) = super::preempted_by::decided(w, m, &before.preempted) {
        super::fail(w, "preempted_by", detail);
    }
    let mp = &w.masters[m];
    let master = mp.master();
    // This step's victims: executors it could preempt before, now stopped
    // to be refilled (named in their group's `replacing`), that no operator
    // or framework asked to stop.
    let new: Vec<(ExecutorId, Victim)> = master
        .executors()
        .filter(|e| before.live.contains(&e.id) && e.operator_stop && !e.state.is_terminal())
        .filter(|e| !w.obs.kill_requested.contains(&e.id) && !w.obs.named_sent.contains(&e.id))
        .filter(|e| !w.obs.drained.contains(&e.worker))
        // Stopped to be refilled (`replacing`), not by a rollout in the
        // same step.
        .filter(|e| {
            master.frameworks().find(|f| f.id == e.framework).is_some_and(|f| {
                f.groups.iter().any(|g| {
                    g.record.spec.group == e.group && g.record.replacing.get(&e.slot) == Some(&e.id)
                })
            })
        })
        .map(|e| {
            let v = Victim {
                framework: e.framework.clone(),
                group: e.group.clone(),
                slot: e.slot as usize,
                by: m,
            };
            (e.id.clone(), v)
        })
        .collect();
    for (id, v) in &new {
        w.log(|| format!("m{m} preempts {id}"));
        w.obs.preempted.insert(id.clone(), v.clone());
    }
    let master = w.masters[m].master();
    // Executors this master stops to refill their slots (this step's
    // victims, earlier ones still in their grace, a kill with refill).
    let replaced: BTreeSet<&ExecutorId> = master
        .frameworks()
        .flat_map(|f| f.groups.iter().flat_map(|g| g.record.replacing.values()))
        .collect();
    // Old executors a deployment stopped in this very step: the leader
    // runs its deployments after its preemption (so that a rollout counts
    // the victims against its allowance), so they were the tenant's when the
    // victims were chosen, and their slots are refilled with the new version
    // (a worker registering again brings back old executors, preemption
    // takes one, the deployment then stops the others to replace them:
    // sim seeds 2982, 9660, 11981, docs/design.md#simulator-seeds). They
    // count as kept.
    let deploy_stops = deployment_stops(w, master, &before, &replaced);
    // What each tenant keeps: (cores, memory in MiB).
    let mut keeps: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for e in master.executors() {
        let stopped = e.kill_requested || e.operator_stop || replaced.contains(&e.id);
        if e.state.is_terminal() || (stopped && !deploy_stops.contains(&e.id)) {
            continue;
        }
        let k = keeps.entry(master.framework_tenant(&e.framework)).or_default();
        k.0 += u64::from(e.cores);
        k.1 += e.memory_mb;
    }
    let victim_tenants: BTreeSet<&str> =
        new.iter().map(|(_, v)| master.framework_tenant(&v.framework)).collect();
    for tenant in victim_tenants {
        let Some(guarantee) = api_client::guarantee_of(&w.cfg, tenant) else { continue };
        let (cores, memory) = keeps.get(tenant).copied().unwrap_or_default();
        let below = |name: &str, kept: u64| guarantee.get(name).is_some_and(|g| kept < g);
        if below("cores", cores) || below("memory", memory) {
            let victims: Vec<String> = new
                .iter()
                .filter(|(_, v)| master.framework_tenant(&v.framework) == tenant)
                .map(|(id, _)| id.to_string())
                .collect();
            return Err(format!(
                "m{m} ({}) preempts {victims:?} of tenant {tenant}, which keeps {cores} cores \
                 and {memory} MiB: below its guarantee {}",
                master.epoch(),
                guarantee.describe()
            ));
        }
    }
    Ok(())
}

/// Executors live before the step (or adopted in it, from a worker's
/// registration) and stopped by it, that neither this
/// step's preemption (no `replacing` entry), nor an operator's kill, scale
/// or drain stopped: old executors of a group whose deployment is under way,
/// which the leader's deployment stops after its preemption in the same
/// step ([`regent_core::master::Master::handle`]).
/// `replaced`: the executors the master's records name as being replaced.
fn deployment_stops<'m>(
    w: &World,
    master: &'m regent_core::master::Master,
    before: &Before,
    replaced: &BTreeSet<&'m ExecutorId>,
) -> BTreeSet<&'m ExecutorId> {
    master
        .executors()
        .filter(|e| before.live.contains(&e.id) || !before.known.contains(&e.id))
        .filter(|e| e.operator_stop && !e.state.is_terminal())
        .filter(|e| !replaced.contains(&e.id) && !e.kill_requested)
        .filter(|e| {
            !w.obs.kill_requested.contains(&e.id)
                && !w.obs.named_sent.contains(&e.id)
                && !w.obs.scaled_away.contains(&e.id)
                && !w.obs.drained.contains(&e.worker)
        })
        .filter(|e| {
            master.frameworks().find(|f| f.id == e.framework).is_some_and(|f| {
                f.groups.iter().any(|g| {
                    g.record.spec.group == e.group
                        && g.record.deployment.as_ref().is_some_and(|d| {
                            d.state.is_active() && g.record.digest_of(&e.id) != d.target
                        })
                })
            })
        })
        .map(|e| &e.id)
        .collect()
}

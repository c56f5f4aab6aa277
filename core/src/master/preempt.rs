//! Preemption at the leader (docs/tenants.md, docs/design.md#issue-44): a
//! slot that waits for capacity may take it from running executors of
//! another tenant that is richer by weighted DRF, or above its guarantee
//! while the slot's tenant is below its own — never from a tenant at or
//! below its guarantee. Which executors go is [`crate::preemption::choose`]
//! (the fewest, youngest first); here the leader finds the candidates,
//! stops the victims and refills their slots.
//!
//! * Victims are stopped as a kill with refill is (`ExecutorEntry::
//!   operator_stop` and the group record's `replacing`, durable before the
//!   kill goes out): their slots are refilled without charging a retry,
//!   and a new leader kills rather than adopts them, so no slot is lost
//!   across a failover.
//! * At most one preemption is chosen per [`PREEMPT_EVERY`], and none for
//!   a group while executors preempted for it still run, so two
//!   preemptions never race for the same capacity; a tenant gets at most
//!   [`PREEMPTIONS_PER_MINUTE`] victims a minute (not durable: a new leader
//!   starts with the full budget).
//! * Only with a tenant set (`regent tenant set`): a cluster without
//!   tenants never preempts. Groups asking for named resources or ports
//!   are not served by preemption yet; priorities are not built yet (every
//!   group has the same).
//!
//! Tests: core/tests/preemption.rs.

use super::executors::Need;
use super::{AfterWrite, Master, WorkerState};
use crate::ids::{ExecutorId, FrameworkId};
use crate::preemption::{choose, Amounts, Candidate, Running, TenantView, Waiting};
use crate::protocol::ExecutorState;
use crate::time::Millis;
use std::collections::BTreeMap;

/// The least time between two preemption checks.
pub const PREEMPT_EVERY: Millis = Millis(500);

/// The most executors preempted for one tenant's slots in a minute.
pub const PREEMPTIONS_PER_MINUTE: usize = 60;

/// The leader's preemption state (not durable).
#[derive(Debug, Default)]
pub(super) struct Preemptions {
    /// When the last check ran.
    last_check: Option<Millis>,
    /// Victims still running, by the (framework, group) they were taken
    /// for.
    pending: BTreeMap<(FrameworkId, usize), Vec<ExecutorId>>,
    /// When each tenant's recent victims were chosen (the last minute).
    recent: BTreeMap<String, Vec<Millis>>,
    /// Executors preempted so far (a counter for tests and metrics).
    pub(super) total: u64,
}

fn amounts(cores: u64, memory_mb: u64) -> Amounts {
    Amounts { cores, memory_mb, named: BTreeMap::new() }
}

impl Master {
    /// Chooses and starts at most one preemption, if one is due: for the
    /// first waiting slot, in placement order, whose tenant may take
    /// capacity from another.
    pub(super) fn preempt(&mut self, now: Millis, out: &mut Vec<super::Action>) {
        if !self.config.preemption || self.tenants.iter().next().is_none() || !self.may_place() {
            return;
        }
        if self.preemptions.last_check.is_some_and(|t| now.since(t) < PREEMPT_EVERY) {
            return;
        }
        self.preemptions.last_check = Some(now);
        self.forget_ended_victims();
        let minute_ago = Millis(now.0.saturating_sub(60_000));
        for list in self.preemptions.recent.values_mut() {
            list.retain(|t| *t > minute_ago);
        }
        for fid in self.waiting_frameworks() {
            let groups: Vec<usize> = {
                let mut gis: Vec<usize> = self
                    .open_slots
                    .range((fid.clone(), 0, 0)..(fid.clone(), usize::MAX, u32::MAX))
                    .map(|(_, gi, _)| *gi)
                    .collect();
                gis.dedup();
                gis
            };
            for gi in groups {
                if self.preemptions.pending.contains_key(&(fid.clone(), gi)) {
                    continue;
                }
                if let Some(victims) = self.choose_victims(&fid, gi) {
                    self.stop_victims(now, &fid, gi, victims, out);
                    return;
                }
            }
        }
    }

    /// Drops the victims that have ended (or are gone).
    fn forget_ended_victims(&mut self) {
        let executors = &self.executors;
        self.preemptions.pending.retain(|_, victims| {
            victims.retain(|id| executors.get(id).is_some_and(|e| !e.state.is_terminal()));
            !victims.is_empty()
        });
    }

    /// The victims for group `gi` of `fid`'s next slot, if the rules allow
    /// any.
    fn choose_victims(&self, fid: &FrameworkId, gi: usize) -> Option<Vec<ExecutorId>> {
        let spec = &self.frameworks.get(fid)?.groups.get(gi)?.record.spec;
        let need = Need::of(spec);
        if !need.resources.is_empty() || need.ports > 0 {
            return None;
        }
        if self.tenant_limit_shortfall(fid, &need).is_some() {
            return None; // it waits for its own limit, not for capacity
        }
        let tenant = self.framework_tenant(fid).to_owned();
        if self.preemptions.recent.get(&tenant).is_some_and(|r| r.len() >= PREEMPTIONS_PER_MINUTE) {
            return None;
        }
        let mut candidates = Vec::new();
        for w in self.workers.entries.values() {
            if w.state != WorkerState::Alive
                || w.conn.is_none()
                || w.maintenance.is_some()
                || !spec.policy.constraints.iter().all(|c| c.allows(&w.attributes))
                || spec.launch.user.as_ref().is_some_and(|u| !w.users.iter().any(|x| x == u))
            {
                continue;
            }
            let mut running = Vec::new();
            for id in self.executors.live_ids_on(&w.id) {
                let Some(e) = self.executors.get(&id) else { continue };
                if e.state != ExecutorState::Running || e.operator_stop || e.kill_requested {
                    continue;
                }
                let held = Need::held_by(e);
                running.push((id, e.framework.clone(), e.running_since, held));
            }
            let free = amounts(
                u64::from(w.cores.saturating_sub(w.cores_used)),
                w.memory_mb.saturating_sub(w.memory_used_mb),
            );
            candidates.push((w.id.clone(), free, running));
        }
        let tenant_names: std::collections::BTreeSet<String> = candidates
            .iter()
            .flat_map(|(_, _, r)| r.iter().map(|(_, f, _, _)| self.framework_tenant(f).to_owned()))
            .chain(std::iter::once(tenant.clone()))
            .collect();
        let stopping = self.tenants_stopping();
        let views: BTreeMap<String, TenantView> = tenant_names
            .into_iter()
            .map(|name| {
                let held = self.tenant_held(&name);
                let (gone_cores, gone_memory) = stopping.get(&name).copied().unwrap_or_default();
                let set = self.tenants.get(&name);
                let guarantee = set.map_or_else(Amounts::default, |t| {
                    amounts(t.guarantee.cores.unwrap_or(0), t.guarantee.memory_mb.unwrap_or(0))
                });
                let weight = set.map_or(1, |t| t.weight).max(1);
                let view = TenantView {
                    in_use: amounts(
                        held.cores.saturating_sub(gone_cores),
                        held.memory_mb.saturating_sub(gone_memory),
                    ),
                    guarantee,
                    weight: f64::from(weight),
                };
                (name, view)
            })
            .collect();
        let capacity = {
            let c = self.capacity();
            amounts(c.cores, c.memory_mb)
        };
        let tenants_of: Vec<Vec<String>> = candidates
            .iter()
            .map(|(_, _, r)| {
                r.iter().map(|(_, f, _, _)| self.framework_tenant(f).to_owned()).collect()
            })
            .collect();
        let views_in: Vec<Candidate<'_>> = candidates
            .iter()
            .zip(&tenants_of)
            .map(|((worker, free, running), tenants)| Candidate {
                worker,
                free: free.clone(),
                running: running
                    .iter()
                    .zip(tenants)
                    .map(|((id, _, since, held), t)| Running {
                        id,
                        tenant: t,
                        priority: 50,
                        started: since.unwrap_or(Millis::ZERO),
                        holds: amounts(u64::from(held.cores), held.memory_mb),
                    })
                    .collect(),
            })
            .collect();
        let waiting = Waiting {
            tenant: &tenant,
            priority: 50,
            need: amounts(u64::from(need.cores), need.memory_mb),
        };
        choose(&waiting, &views_in, &views, &capacity).map(|c| c.victims)
    }

    /// Whether framework `fid`'s tenant holds more than its limit in some
    /// dimension (possible only by adopting what a worker that was cut off
    /// ran: the placement never passes a limit).
    pub(super) fn tenant_over_limit(&self, fid: &FrameworkId) -> bool {
        let Some(t) = self.tenants.get(self.framework_tenant(fid)) else { return false };
        if t.limit.is_empty() {
            return false;
        }
        let held = self.usage.tenant(&t.name);
        let names = ["cores", "memory"]
            .into_iter()
            .chain(t.limit.resources.iter().map(|(n, _)| n.as_str()));
        names.into_iter().any(|n| t.limit.get(n).is_some_and(|l| held.get(n) > l))
    }

    /// Stops executor `id` as a kill with refill: its slot waits again
    /// with no retry charged, durable before the kill goes out (a new
    /// leader kills it rather than adopting it).
    pub(super) fn stop_to_refill(&mut self, id: &ExecutorId, out: &mut Vec<super::Action>) {
        let Some(mut e) = self.executors.get_mut(id) else { return };
        e.stop_by_operator();
        let (vf, vg, slot) = (e.framework.clone(), e.group.clone(), e.slot);
        if let Some(g) = self.frameworks.get_mut(&vf).and_then(|f| f.group_mut(&vg)) {
            g.record.replacing.insert(slot, id.clone());
        }
        let then = vec![AfterWrite::KillDurable { executor: id.clone() }];
        self.persist_framework(&vf, then, out);
    }

    /// Stops `victims` for group `gi` of `fid`: each slot refilled without
    /// a retry charged, durable before the kill goes out.
    fn stop_victims(
        &mut self,
        now: Millis,
        fid: &FrameworkId,
        gi: usize,
        victims: Vec<ExecutorId>,
        out: &mut Vec<super::Action>,
    ) {
        let tenant = self.framework_tenant(fid).to_owned();
        for id in &victims {
            if self.executors.get(id).is_none() {
                continue;
            }
            self.stop_to_refill(id, out);
            self.preemptions.recent.entry(tenant.clone()).or_default().push(now);
            self.preemptions.total += 1;
        }
        self.preemptions.pending.insert((fid.clone(), gi), victims);
    }
}

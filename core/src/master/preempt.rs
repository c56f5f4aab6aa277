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
//!   across a failover. The same write names the preemptor by slot
//!   (`GroupRecord::preempted`, cleared with `replacing`), so a new leader
//!   shows who preempted each victim (job status, the executor's end, the
//!   history) and knows which group its victims serve.
//! * At most one preemption is chosen per [`PREEMPT_EVERY`], and none for
//!   a group while executors preempted for it still run, so two
//!   preemptions never race for the same capacity; a tenant gets at most
//!   [`PREEMPTIONS_PER_MINUTE`] victims a minute (not durable: a new leader
//!   starts with the full budget).
//! * By priority with or without tenants: a waiting slot may take running
//!   executors of a lower priority ([`crate::policy::GroupPolicy::priority`];
//!   docs/design.md#issue-44). By fair share only with a tenant set
//!   (`regent tenant set`): a cluster without tenants whose groups all have
//!   one priority never preempts (a cheap check: a tenant is set, or some
//!   waiting group's priority is above a running framework's group).
//! * Every dimension a slot needs on one worker counts: cores, memory,
//!   ports and named resources (gpu, ...). A victim frees all it holds, so
//!   a slot needing a GPU is served only by victims on one worker whose
//!   GPUs, with those free there, cover it; a slot naming ports likewise
//!   by the worker's free port count (the leader counts ports, the worker
//!   numbers them from its ranges: no slot asks for a fixed number, so no
//!   victim is chosen for a number).
//!
//! Tests: core/tests/tenants.rs, core/tests/priority.rs,
//! core/tests/drf_named.rs.

use super::executors::Need;
use super::{AfterWrite, Master, WorkerState};
use crate::ids::{ExecutorId, FrameworkId};
use crate::preemption::{
    choose_successive, Amounts, Candidate, Choice, Running, TenantView, Waiting,
};
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
    /// Nothing changed since the last check that could change its answer
    /// (a slot starting to wait, an executor starting or ending, a tenant
    /// changing, a worker joining or leaving would): no check is due.
    quiet: bool,
    /// When a check is due again although nothing changed: a tenant's
    /// budget, exhausted at the last check, refills then.
    refill_at: Option<Millis>,
    /// Victims still running, by the (framework, group) they were taken
    /// for.
    pending: BTreeMap<(FrameworkId, usize), Vec<ExecutorId>>,
    /// When each tenant's recent victims were chosen (the last minute).
    recent: BTreeMap<String, Vec<Millis>>,
    /// Executors preempted so far (a counter for tests and metrics).
    pub(super) total: u64,
    /// Checks made so far (a counter for tests and metrics).
    checks: u64,
    /// `<framework>/<group>` each victim was preempted for, while the
    /// leader knows the victim (the group record's
    /// [`crate::store::GroupRecord::preempted`] is what outlives a
    /// failover; this keeps the reason for an ended victim whose slot
    /// settled since).
    by: BTreeMap<ExecutorId, String>,
}

impl Master {
    /// `<framework>/<group>` executor `e` was preempted for, if it was:
    /// as its group's record names it (durable: a new leader knows it
    /// too), else as this leadership remembers it.
    pub(super) fn preempted_by(&self, e: &super::executors::ExecutorEntry) -> Option<String> {
        self.frameworks
            .get(&e.framework)
            .and_then(|f| f.groups.iter().find(|g| g.record.spec.group == e.group))
            .and_then(|g| g.record.preempted_by(e.slot, &e.id))
            .map(str::to_owned)
            .or_else(|| self.preemptions.by.get(&e.id).cloned())
    }

    /// A new leader's preemption state from the records it loaded: the
    /// victims each group's records name, by the group they were stopped
    /// for, so it neither preempts again for that group while they die nor
    /// drops the reason `waiting for N preempted executors to end`
    /// (docs/design.md#issue-44).
    pub(super) fn recover_preemptions(&mut self) {
        let mut pending: BTreeMap<(FrameworkId, usize), Vec<ExecutorId>> = BTreeMap::new();
        for f in self.frameworks.values() {
            for g in &f.groups {
                for (slot, p) in &g.record.preempted {
                    if g.record.replacing.get(slot) != Some(&p.executor) {
                        continue;
                    }
                    let Some((fid, group)) = p.by.rsplit_once('/') else { continue };
                    let fid = FrameworkId::new(fid);
                    let gi = self
                        .frameworks
                        .get(&fid)
                        .and_then(|t| t.groups.iter().position(|tg| tg.record.spec.group == group));
                    if let Some(gi) = gi {
                        pending.entry((fid, gi)).or_default().push(p.executor.clone());
                    }
                }
            }
        }
        self.preemptions.pending = pending;
    }

    /// Whether victim `id` still runs: live at this leader, or killed by
    /// it after a failover and not yet ended.
    fn victim_runs(&self, id: &ExecutorId) -> bool {
        match self.executors.get(id) {
            Some(e) => !e.state.is_terminal(),
            None => self.dying.contains(id),
        }
    }
}

/// What a plan's own slots hold, which a choice for it takes off the
/// workers' free capacity and adds to its tenant's use (nothing for the
/// leader's own preemption).
#[derive(Debug, Default)]
pub(super) struct Planned {
    /// What they hold by worker (cores, memory, ports, named resources).
    pub(super) by_worker: BTreeMap<crate::ids::WorkerId, Amounts>,
    /// What they hold over every worker.
    pub(super) total: Amounts,
}

impl Planned {
    /// Counts what the plan's slots hold on `worker`.
    pub(super) fn hold(&mut self, worker: crate::ids::WorkerId, held: Amounts) {
        self.total = self.total.plus(&held);
        let on = self.by_worker.entry(worker).or_default();
        *on = on.plus(&held);
    }
}

/// What an executor asking `need` holds, every dimension.
fn amounts_of_need(need: &Need) -> Amounts {
    let mut named = BTreeMap::new();
    for (name, n) in &need.resources {
        if *n > 0 {
            *named.entry(name.clone()).or_default() += u64::from(*n);
        }
    }
    Amounts {
        cores: u64::from(need.cores),
        memory_mb: need.memory_mb,
        ports: u64::from(need.ports),
        named,
    }
}

/// What worker `w` has free of what `need` asks (cores, memory, ports and
/// the named resources it names; other kinds do not matter to it).
fn free_on(w: &super::WorkerEntry, need: &Amounts) -> Amounts {
    let named =
        need.named.keys().map(|name| (name.clone(), u64::from(w.resources_free(name)))).collect();
    Amounts {
        cores: u64::from(w.cores.saturating_sub(w.cores_used)),
        memory_mb: w.memory_mb.saturating_sub(w.memory_used_mb),
        ports: u64::from(w.ports.saturating_sub(w.ports_used)),
        named,
    }
}

/// The dimensions tenant guarantee `dims` names (unnamed ones are zero:
/// they protect nothing).
fn guaranteed(dims: &crate::protocol::tenants::Dims) -> Amounts {
    let named = dims.resources.iter().filter(|(_, n)| *n > 0).cloned().collect();
    let (cores, memory_mb) = (dims.cores.unwrap_or(0), dims.memory_mb.unwrap_or(0));
    Amounts { cores, memory_mb, ports: 0, named }
}

impl Master {
    /// Chooses and starts at most one preemption, if one is due: for the
    /// first waiting slot, in placement order (higher priorities first),
    /// that may take capacity from running executors.
    pub(super) fn preempt(&mut self, now: Millis, out: &mut Vec<super::Action>) {
        if !self.config.preemption || !self.may_place() {
            return;
        }
        let refilled = self.preemptions.refill_at.is_some_and(|t| now >= t);
        if self.preemptions.quiet && !refilled {
            return;
        }
        if self.preemptions.last_check.is_some_and(|t| now.since(t) < PREEMPT_EVERY) {
            return; // still due: the first step past the floor checks
        }
        self.preemptions.last_check = Some(now);
        self.preemptions.quiet = true;
        self.preemptions.refill_at = None;
        if self.tenants.iter().next().is_none() {
            // Without tenants only a priority preempts (checked again only
            // once something changes: the check is quiet now).
            let Some(&top) = self.waiting_priorities().first() else { return };
            if !self.runs_below(top) {
                return;
            }
        }
        self.preemptions.checks += 1;
        self.forget_ended_victims();
        let minute_ago = Millis(now.0.saturating_sub(60_000));
        for list in self.preemptions.recent.values_mut() {
            list.retain(|t| *t > minute_ago);
        }
        let mut waiting: Vec<(std::cmp::Reverse<u8>, FrameworkId, usize)> = Vec::new();
        for fid in self.waiting_frameworks() {
            let mut gis: Vec<usize> = self
                .open_slots
                .range((fid.clone(), 0, 0)..(fid.clone(), usize::MAX, u32::MAX))
                .map(|(_, gi, _)| *gi)
                .collect();
            gis.dedup();
            for gi in gis {
                waiting.push((std::cmp::Reverse(self.group_priority(&fid, gi)), fid.clone(), gi));
            }
        }
        // Stable: within a priority, framework and group order.
        waiting.sort_by_key(|(p, _, _)| *p);
        for (_, fid, gi) in waiting {
            if self.preemptions.pending.contains_key(&(fid.clone(), gi)) {
                continue;
            }
            if let Some(choice) = self.next_victims(now, &fid, gi) {
                self.stop_victims(now, &fid, gi, choice.victims, out);
                // More may follow for other slots: check again once the
                // floor has passed.
                self.preemptions.quiet = false;
                return;
            }
            self.note_exhausted_budget(&fid);
        }
    }

    /// Whether a framework with live executors has a group of a priority
    /// below `priority` (a step per group of the frameworks that run
    /// something).
    fn runs_below(&self, priority: u8) -> bool {
        self.usage.live_frameworks().any(|fid| {
            self.frameworks
                .get(fid)
                .is_some_and(|f| f.groups.iter().any(|g| g.record.spec.policy.priority < priority))
        })
    }

    /// The priority of the group executor `e` runs for (the default when
    /// the group is gone).
    fn executor_priority(&self, e: &super::executors::ExecutorEntry) -> u8 {
        self.frameworks
            .get(&e.framework)
            .and_then(|f| f.groups.iter().find(|g| g.record.spec.group == e.group))
            .map_or(crate::policy::DEFAULT_PRIORITY, |g| g.record.spec.policy.priority)
    }

    /// How many preemption checks this leadership made: one only when
    /// something changed that could change the answer (or a budget
    /// refilled), at most one per [`PREEMPT_EVERY`].
    pub fn preemption_checks(&self) -> u64 {
        self.preemptions.checks
    }

    /// A check could answer otherwise now: the next step past the floor
    /// checks.
    pub(super) fn preemption_may_change(&mut self) {
        self.preemptions.quiet = false;
    }

    /// Whether `event` is one that changes nothing a check reads unless
    /// what [`Master::preemption_fingerprint`] counts changes (a tick: a
    /// worker found dead, a backoff over), or nothing at all (heartbeats,
    /// usage samples, reads). Every other event makes a check due.
    pub(super) fn quiet_for_preemption(&self, event: &super::Event) -> bool {
        use crate::protocol::Message as M;
        match event {
            super::Event::Tick | super::Event::LogQuery { .. } => true,
            super::Event::Message { msg, .. } => matches!(
                msg,
                M::WorkerHeartbeat { .. }
                    | M::WorkerUsage { .. }
                    | M::FrameworkHeartbeatAck { .. }
                    | M::StateRequest
                    | M::LogRequest { .. }
                    | M::LogData { .. }
                    | M::PlanRequest { .. }
                    | M::JobsRequest { .. }
                    | M::TenantsRequest { .. }
            ),
            _ => false,
        }
    }

    /// What a quiet event could change that a check reads, in O(1): the
    /// slots open, the executors per state and the ALIVE workers' capacity
    /// (tenants change only by a `SetTenant` and its write, never quiet).
    pub(super) fn preemption_fingerprint(&self) -> (usize, [usize; 6], (u64, u64)) {
        (self.open_slots.len(), self.executors.counts(), self.workers.alive_capacity())
    }

    /// When the check found nothing for `fid`'s tenant because its budget
    /// is used up: check again when its oldest victim leaves the minute.
    fn note_exhausted_budget(&mut self, fid: &FrameworkId) {
        let tenant = self.framework_tenant(fid);
        let Some(recent) = self.preemptions.recent.get(tenant) else { return };
        if recent.len() < PREEMPTIONS_PER_MINUTE {
            return;
        }
        if let Some(oldest) = recent.iter().min() {
            let at = Millis(oldest.0.saturating_add(60_001));
            self.preemptions.refill_at = Some(self.preemptions.refill_at.map_or(at, |t| t.min(at)));
        }
    }

    /// How many executors preempted for group `group` of `fid` still run
    /// (the reason `waiting for N preempted executors to end`, ranked
    /// first while it applies).
    pub(super) fn preempted_for(&self, fid: &FrameworkId, group: &str) -> u32 {
        let Some(gi) = self
            .frameworks
            .get(fid)
            .and_then(|f| f.groups.iter().position(|g| g.record.spec.group == group))
        else {
            return 0;
        };
        let Some(victims) = self.preemptions.pending.get(&(fid.clone(), gi)) else { return 0 };
        let running = victims.iter().filter(|id| self.victim_runs(id)).count();
        u32::try_from(running).unwrap_or(u32::MAX)
    }

    /// Drops the victims that have ended (or are gone).
    fn forget_ended_victims(&mut self) {
        let executors = &self.executors;
        self.preemptions.by.retain(|id, _| executors.get(id).is_some());
        let mut pending = std::mem::take(&mut self.preemptions.pending);
        pending.retain(|_, victims| {
            victims.retain(|id| self.victim_runs(id));
            !victims.is_empty()
        });
        self.preemptions.pending = pending;
    }

    /// The victims for group `gi` of `fid`'s next slot, if the rules allow
    /// any: [`Master::choose_victims`] for one slot, with the budget the
    /// tenant has left.
    fn next_victims(&self, now: Millis, fid: &FrameworkId, gi: usize) -> Option<Choice> {
        let spec = &self.frameworks.get(fid)?.groups.get(gi)?.record.spec;
        let need = Need::of(spec);
        if self.tenant_limit_shortfall(fid, &need).is_some() {
            return None; // it waits for its own limit, not for capacity
        }
        let tenant = self.framework_tenant(fid);
        let budget = self.preemption_budget_left(now, tenant);
        let planned = Planned::default();
        self.choose_victims(tenant, spec, &planned, 1, budget).into_iter().next().map(|(_, c)| c)
    }

    /// How many more victims tenant `tenant`'s slots may take in the
    /// minute up to `now` ([`PREEMPTIONS_PER_MINUTE`] less those taken in
    /// the minute before).
    pub(super) fn preemption_budget_left(&self, now: Millis, tenant: &str) -> usize {
        let minute_ago = Millis(now.0.saturating_sub(60_000));
        let recent = self.preemptions.recent.get(tenant);
        let used = recent.map_or(0, |r| r.iter().filter(|t| **t > minute_ago).count());
        PREEMPTIONS_PER_MINUTE.saturating_sub(used)
    }

    /// Whether a slot of priority `priority` could preempt at all:
    /// `--preemption` on, and a tenant set or something running of a lower
    /// priority (a cluster without tenants preempts only by priority).
    pub(super) fn may_preempt_for(&self, priority: u8) -> bool {
        self.config.preemption
            && (self.tenants.iter().next().is_some() || self.runs_below(priority))
    }

    /// The preemptions a slot of tenant `tenant` and group `spec` would
    /// make for up to `slots` of its slots, at most `budget` victims in
    /// all ([`choose_successive`]), with what `planned` holds (a plan's
    /// own slots) taken off the workers and added to the tenant. The one
    /// choice the leader's preemption (one slot, nothing planned) and
    /// `regent job plan` share: same inputs, same victims.
    pub(super) fn choose_victims(
        &self,
        tenant: &str,
        spec: &crate::protocol::GroupSpec,
        planned: &Planned,
        slots: usize,
        budget: usize,
    ) -> Vec<(usize, Choice)> {
        let need = amounts_of_need(&Need::of(spec));
        if slots == 0 {
            return Vec::new();
        }
        let tenant = tenant.to_owned();
        let mut candidates = Vec::new();
        // Only workers running executors can be freed: a worker with
        // nothing to take is no candidate (and one with room for the slot
        // is left to the placement).
        let mut workers: Vec<&crate::ids::WorkerId> = self.executors.workers_with_live().collect();
        workers.sort_unstable();
        for w in workers.into_iter().filter_map(|id| self.workers.entries.get(id)) {
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
                // Every dimension it holds: its ports and named resources
                // free with it.
                let held = amounts_of_need(&Need::held_by(e));
                let priority = self.executor_priority(e);
                running.push((id, e.framework.clone(), e.running_since, held, priority));
            }
            let mut free = free_on(w, &need);
            if let Some(held) = planned.by_worker.get(&w.id) {
                free = free.minus(held);
            }
            candidates.push((w.id.clone(), free, running));
        }
        let tenant_names: std::collections::BTreeSet<String> = candidates
            .iter()
            .flat_map(|(_, _, r)| r.iter().map(|(_, f, ..)| self.framework_tenant(f).to_owned()))
            .chain(std::iter::once(tenant.clone()))
            .collect();
        let stopping = self.tenants_stopping();
        let views: BTreeMap<String, TenantView> = tenant_names
            .into_iter()
            .map(|name| {
                // What the leader already stops is no longer the tenant's
                // (sim seed 611, docs/design.md#simulator-seeds).
                let gone = stopping.get(&name).cloned().unwrap_or_default();
                let mut in_use = Amounts::of_held(&self.tenant_held(&name)).minus(&gone);
                if name == tenant {
                    in_use = in_use.plus(&Amounts { ports: 0, ..planned.total.clone() });
                }
                let set = self.tenants.get(&name);
                let guarantee = set.map_or_else(Amounts::default, |t| guaranteed(&t.guarantee));
                let weight = set.map_or(1, |t| t.weight).max(1);
                (name, TenantView { in_use, guarantee, weight })
            })
            .collect();
        // Shares over every dimension the ALIVE workers offer, named
        // resources included: the same shares the placement orders by.
        let capacity = {
            let c = self.capacity();
            Amounts { cores: c.cores, memory_mb: c.memory_mb, ports: 0, named: c.resources }
        };
        let tenants_of: Vec<Vec<String>> = candidates
            .iter()
            .map(|(_, _, r)| {
                r.iter().map(|(_, f, ..)| self.framework_tenant(f).to_owned()).collect()
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
                    .map(|((id, _, since, held, priority), t)| Running {
                        id,
                        tenant: t,
                        priority: *priority,
                        started: since.unwrap_or(Millis::ZERO),
                        holds: held.clone(),
                    })
                    .collect(),
            })
            .collect();
        let waiting = Waiting { tenant: &tenant, priority: spec.policy.priority, need };
        choose_successive(&waiting, slots, budget, &views_in, &views, &capacity)
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
            g.record.replace(slot, id.clone());
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
        let group = self.frameworks.get(fid).and_then(|f| f.groups.get(gi));
        let by = format!("{fid}/{}", group.map_or("", |g| g.record.spec.group.as_str()));
        for id in &victims {
            if self.executors.get(id).is_none() {
                continue;
            }
            self.preemptions.by.insert(id.clone(), by.clone());
            // The victim's group shows why its slot waits again.
            let victim =
                self.executors.get(id).map(|e| (e.framework.clone(), e.group.clone(), e.slot));
            if let Some((vf, vg, slot)) = victim {
                if let Some(g) = self.frameworks.get_mut(&vf).and_then(|f| f.group_mut(&vg)) {
                    g.last_end = Some((slot, format!("executor {id} preempted by {by}")));
                    // Durable in the write that names it in `replacing`
                    // (`stop_to_refill`): a new leader still says who
                    // preempted it.
                    let p = crate::store::Preemptor { executor: id.clone(), by: by.clone() };
                    g.record.preempted.insert(slot, p);
                }
            }
            self.stop_to_refill(id, out);
            self.preemptions.recent.entry(tenant.clone()).or_default().push(now);
            self.preemptions.total += 1;
        }
        self.preemptions.pending.insert((fid.clone(), gi), victims);
    }
}

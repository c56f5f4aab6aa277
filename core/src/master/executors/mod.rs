//! Executors at the leader: placement, launch, reports from workers, slot
//! outcomes and the retry budget.
//!
//! * Placement runs only while ALIVE and not suspended, over ALIVE workers
//!   with free cores and memory, by policy `spread` (round robin, default) or
//!   `pack` (the fullest worker that fits); never beyond a worker's capacity.
//! * A slot is done when its latest executor exited 0. A lost executor's slot
//!   is refilled without using the retry budget; a non-zero exit or a failed
//!   launch uses one of the group's retries, and an exhausted budget fails the
//!   slot and tells the subscriber.
//! * Every terminal report changes the framework record; the worker's report
//!   is acknowledged (so it may forget it) only once that record is durable,
//!   so an exit is never lost across a failover.
//! * An executor the leader did not launch and cannot adopt (replaced,
//!   forgotten, of a removed framework) is killed.
//! * One executor per slot (docs/design.md#one-executor-per-slot): every launch carries the
//!   leadership's launch number, and a registration writes off only what
//!   was launched before it was taken (`reconcile`); a slot is placed only
//!   once every record that is or may become durable holds it
//!   ([`super::GroupState::placeable_slots`]); a removed framework's
//!   executors are killed once its end is durable.
//!
//! Tests: core/tests/subscribe.rs (placement, adoption),
//! core/tests/one_executor_per_slot.rs, core/tests/worker_upgrade.rs,
//! core/tests/constraints.rs, core/tests/ports.rs,
//! core/tests/named_resources.rs, core/tests/run_as_placement.rs, the
//! simulator's `one_executor` and `resources` invariants
//! (tests/tests/sim_seeds.rs).

use super::{Action, AfterWrite, Master, Placement};
use crate::ids::{ExecutorId, FrameworkId, WorkerId};
use crate::limits::MAX_EXECUTORS_PER_WORKER;
use crate::protocol::tenants::DEFAULT_TENANT;
use crate::protocol::{ExecutorInfo, ExecutorReport, ExecutorSpec, ExecutorState, Message};
use crate::store::SlotOutcome;
use crate::time::Millis;
use index::Crossed;
use std::collections::BTreeSet;
use std::ops::Bound;

mod index;

pub(super) use index::Executors;

/// How long a slot whose launch its worker refused (a port or named
/// resource held by something the leader has not heard of yet) waits
/// before it is placed again: a report on its way arrives within it, and a
/// refusal never turns into a launch loop.
pub(super) const REFUSED_LAUNCH_WAIT: crate::time::Millis = crate::time::Millis(1_000);

/// One executor at the leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutorEntry {
    /// Its id: `<framework>/<group>#<slot>#<launch>`.
    pub id: ExecutorId,
    /// Its framework.
    pub framework: FrameworkId,
    /// Its group.
    pub group: String,
    /// Its slot.
    pub slot: u32,
    /// The worker it runs on.
    pub worker: WorkerId,
    /// Where it is in its life.
    pub state: ExecutorState,
    /// Cores it holds.
    pub cores: u32,
    /// Memory it holds, in MiB.
    pub memory_mb: u64,
    /// The framework asked for it to be killed.
    pub kill_requested: bool,
    /// An operator asked it to stop and its slot to be refilled (a drain,
    /// or `regent kill-executor` without `--no-refill`): unless it exits 0
    /// (which completes its slot), its slot is refilled without charging
    /// the group's retry budget.
    pub operator_stop: bool,
    /// Its terminal state is durable in the framework record.
    pub recorded: bool,
    /// A kill or stop was sent to it: sent again on every registration of
    /// its worker until its end is reported (see `kills`).
    pub owed: Option<super::Owed>,
    /// The launch number this leadership gave it (`LaunchExecutor::launch`);
    /// 0 for an executor it did not launch (recovered or adopted from a
    /// report), which counts as launched before any report.
    pub launch: u64,
    /// The connection its `LaunchExecutor` was sent on (`None`: not
    /// launched by this leadership, or its worker had no connection).
    pub sent_on: Option<crate::ids::ConnId>,
    /// When this leadership first saw it RUNNING (how long it ran decides
    /// whether its end resets its slot's backoff: `healthy_after`).
    pub running_since: Option<crate::time::Millis>,
    /// How long its worker last said it had run
    /// ([`ExecutorReport::ran_ms`]): a run that began under an earlier
    /// leader counts whole.
    pub ran_ms: Option<u64>,
    /// How many ports it holds on its worker (its group's named ports, or
    /// what its worker reported for one adopted).
    pub port_count: u32,
    /// Its ports as its worker numbered them (empty until reported).
    pub ports: Vec<(String, u16)>,
    /// Its health as its worker last reported it (docs/design.md#issue-45):
    /// kept in memory only, sent again by the worker at every registration.
    pub health: Option<crate::health::HealthSeen>,
    /// How many addresses of each named resource it holds on its worker
    /// (its group's request, or what its worker reported for one adopted).
    pub resources_held: Vec<(String, u32)>,
    /// The named resources' addresses its worker gave it (empty until
    /// reported).
    pub resources: crate::resources::Assigned,
}

impl ExecutorEntry {
    /// What it holds while it lives, as tenants' use counts it (cores,
    /// memory, named resources by name; docs/tenants.md).
    pub fn held(&self) -> crate::protocol::tenants::Held {
        let mut resources: Vec<(String, u64)> = Vec::new();
        for (name, n) in &self.resources_held {
            match resources.binary_search_by(|(r, _)| r.as_str().cmp(name)) {
                Ok(i) => resources[i].1 += u64::from(*n),
                Err(i) if *n > 0 => resources.insert(i, (name.clone(), u64::from(*n))),
                Err(_) => {}
            }
        }
        crate::protocol::tenants::Held {
            cores: u64::from(self.cores),
            memory_mb: self.memory_mb,
            resources,
        }
    }
}

impl Master {
    /// What its framework's subscriber is told of `e`: with its worker's
    /// host, where its ports are reached.
    pub(super) fn info(&self, e: &ExecutorEntry) -> ExecutorInfo {
        ExecutorInfo {
            id: e.id.clone(),
            group: e.group.clone(),
            slot: e.slot,
            worker: Some(e.worker.clone()),
            state: e.state.clone(),
            host: self.workers.entries.get(&e.worker).and_then(|w| w.host.clone()),
            ports: e.ports.clone(),
            resources: e.resources.clone(),
        }
    }

    /// Each named resource `w` offers, with the addresses its live
    /// executors were reported to hold and how many they hold in all.
    pub(super) fn resource_views(
        &self,
        w: &super::WorkerEntry,
    ) -> Vec<crate::protocol::ResourceView> {
        let Some(r) = &w.resources else { return Vec::new() };
        let live = self.executors.live_ids_on(&w.id);
        let held = crate::resources::held(
            live.iter().filter_map(|id| self.executors.get(id)).map(|e| &e.resources),
        );
        r.offered
            .iter()
            .zip(&r.held)
            .map(|(o, count)| crate::protocol::ResourceView {
                name: o.name.clone(),
                addresses: o.addresses.clone(),
                used: o
                    .addresses
                    .iter()
                    .filter(|a| held.contains(&(o.name.as_str(), a.as_str())))
                    .cloned()
                    .collect(),
                held: *count,
            })
            .collect()
    }

    /// Sends `msg` to `worker`, if it has a connection; held until its
    /// `Registered` while it registers ([`super::workers::Registry::route`]).
    pub(super) fn tell_worker(&mut self, worker: &WorkerId, msg: Message, out: &mut Vec<Action>) {
        if let Some((conn, msg)) = self.workers.route(worker, msg) {
            out.push(Action::Send { conn, msg });
        }
    }

    pub(super) fn send_kill(
        &mut self,
        worker: &WorkerId,
        executor: &ExecutorId,
        out: &mut Vec<Action>,
    ) {
        let msg = Message::KillExecutorOnWorker { epoch: self.epoch, executor: executor.clone() };
        self.tell_worker(worker, msg, out);
    }

    /// Gives the executor's resources back to its worker.
    pub(super) fn release(&mut self, e: &ExecutorEntry) {
        self.release_need(&e.worker, &Need::held_by(e));
    }

    /// Gives `need` back to `worker`.
    pub(super) fn release_need(&mut self, worker: &WorkerId, need: &Need) {
        if let Some(w) = self.workers.entries.get_mut(worker) {
            w.cores_used = w.cores_used.saturating_sub(need.cores);
            w.memory_used_mb = w.memory_used_mb.saturating_sub(need.memory_mb);
            w.ports_used = w.ports_used.saturating_sub(need.ports);
            w.release_resources(&need.resources);
            // The candidates by attribute value are ordered by what they
            // have free (and `pack`'s index too).
            self.reindex_worker(worker);
        }
    }

    pub(super) fn hold(&mut self, worker: &WorkerId, need: &Need) {
        if let Some(w) = self.workers.entries.get_mut(worker) {
            // Only after `fits_on` (or for a terminal report, which holds
            // nothing for long): saturate rather than wrap on peer numbers.
            w.cores_used = w.cores_used.saturating_add(need.cores);
            w.memory_used_mb = w.memory_used_mb.saturating_add(need.memory_mb);
            w.ports_used = w.ports_used.saturating_add(need.ports);
            w.hold_resources(&need.resources);
            self.reindex_worker(worker);
        }
    }

    /// Adds an executor (replacing none: the caller checked).
    fn insert_executor(&mut self, e: ExecutorEntry) {
        if !e.state.is_terminal() {
            let tenant = self.framework_tenant(&e.framework).to_owned();
            self.usage.add(&e.framework, &tenant, &e.held());
        }
        let crossed = self.executors.insert(e);
        self.reindex_crossed(crossed);
    }

    /// Moves executor `id` to `state`; `false` if there is no such executor.
    fn set_executor_state(&mut self, id: &ExecutorId, state: ExecutorState) -> bool {
        let Some(e) = self.executors.get(id) else { return false };
        match (e.state.is_terminal(), state.is_terminal()) {
            (false, true) => self.usage.sub(&e.framework, &e.held()),
            (true, false) => {
                let tenant = self.framework_tenant(&e.framework).to_owned();
                self.usage.add(&e.framework, &tenant, &e.held());
            }
            _ => {}
        }
        let Some(crossed) = self.executors.set_state(id, state) else { return false };
        self.reindex_crossed(crossed);
        true
    }

    /// Removes executor `id`.
    pub(super) fn remove_executor(&mut self, id: &ExecutorId) -> Option<ExecutorEntry> {
        let (e, crossed) = self.executors.remove(id)?;
        if !e.state.is_terminal() {
            self.usage.sub(&e.framework, &e.held());
        }
        self.reindex_crossed(crossed);
        Some(e)
    }

    /// A worker whose live executors crossed the limit is a placement
    /// candidate no more, or again.
    fn reindex_crossed(&mut self, crossed: Crossed) {
        if let Some(worker) = crossed.worker() {
            self.reindex_worker(&worker);
        }
    }

    /// Whether slot `slot` of group `gi` of framework `fid` waits for an
    /// executor: a durable record holds it (and no write in flight drops
    /// it: [`super::GroupState::placeable_slots`]), its outcome is pending,
    /// and nothing fills it.
    fn slot_is_open(&self, fid: &FrameworkId, gi: usize, slot: u32) -> bool {
        self.frameworks.get(fid).and_then(|f| f.groups.get(gi)).is_some_and(|g| {
            slot < g.placeable_slots()
                && g.record.slots.get(slot as usize) == Some(&SlotOutcome::Pending)
                && g.current.get(slot as usize) == Some(&None)
        }) && !self.restart_waits.contains(&(fid.clone(), gi, slot))
    }

    /// Keeps `open_slots` in step with one slot after a change to it.
    pub(super) fn refresh_slot(&mut self, fid: &FrameworkId, gi: usize, slot: u32) {
        let key = (fid.clone(), gi, slot);
        if self.slot_is_open(fid, gi, slot) {
            self.open_slots.insert(key);
        } else {
            self.open_slots.remove(&key);
        }
    }

    /// Keeps `open_slots` in step with every slot of framework `fid` (new,
    /// recovered, removed, or a group made durable).
    pub(super) fn refresh_slots_of(&mut self, fid: &FrameworkId) {
        let start = (fid.clone(), 0usize, 0u32);
        let stale: Vec<_> =
            self.open_slots.range(start..).take_while(|(f, _, _)| f == fid).cloned().collect();
        for k in stale {
            self.open_slots.remove(&k);
        }
        let Some(fw) = self.frameworks.get(fid) else { return };
        let mut open = Vec::new();
        for (gi, g) in fw.groups.iter().enumerate() {
            let placeable = g.placeable_slots() as usize;
            for (slot, outcome) in g.record.slots.iter().enumerate().take(placeable) {
                let key = (fid.clone(), gi, slot as u32);
                if *outcome == SlotOutcome::Pending
                    && g.current[slot].is_none()
                    && !self.restart_waits.contains(&key)
                {
                    open.push(key);
                }
            }
        }
        self.open_slots.extend(open);
    }

    fn tell_framework(&self, framework: &FrameworkId, msg: Message, out: &mut Vec<Action>) {
        if let Some(conn) = self.frameworks.get(framework).and_then(|f| f.conn) {
            out.push(Action::Send { conn, msg });
        }
    }

    pub(super) fn ack_report(
        &mut self,
        worker: &WorkerId,
        executor: &ExecutorId,
        out: &mut Vec<Action>,
    ) {
        let msg = Message::ExecutorStatusAck { epoch: self.epoch, executor: executor.clone() };
        self.tell_worker(worker, msg, out);
    }

    /// Fills every pending slot that has no executor, as capacity and
    /// the tenants' limits allow: in framework, group and slot order while
    /// every waiting framework is in the implicit `default` tenant;
    /// otherwise tenants in weighted DRF order, and frameworks within a
    /// tenant in DRF order ([`super::fairness`], docs/tenants.md). Costs the
    /// open slots and the workers it tries, not the cluster's size: the
    /// open slots and the candidates are indexes kept up to date as they
    /// change.
    ///
    /// Priorities come first (docs/tenants.md, docs/design.md#issue-44):
    /// when the waiting groups have several, the order above runs once per
    /// priority present, highest first, over the groups of that priority
    /// only; a lower priority's slot takes what the higher ones left (a
    /// smaller slot may fit where a larger one of a higher priority did
    /// not). With one priority (every group at the default 50, say) it is
    /// exactly the order above.
    pub(super) fn place(&mut self, out: &mut Vec<Action>) {
        if !self.may_place() {
            return;
        }
        let waiting = self.waiting_frameworks();
        let first_come = self.tenants.get(DEFAULT_TENANT).is_none()
            && waiting.iter().all(|f| self.framework_tenant(f) == DEFAULT_TENANT);
        let bands = self.waiting_priorities();
        let bands: Vec<Option<u8>> =
            if bands.len() > 1 { bands.into_iter().map(Some).collect() } else { vec![None] };
        for band in bands {
            if first_come {
                self.place_first_come(band, out)
            } else {
                self.place_fairly(waiting.clone(), band, out)
            }
        }
    }

    /// The priority of group `gi` of `fid` (the default for a group that
    /// is gone).
    pub(super) fn group_priority(&self, fid: &FrameworkId, gi: usize) -> u8 {
        self.frameworks
            .get(fid)
            .and_then(|f| f.groups.get(gi))
            .map_or(crate::policy::DEFAULT_PRIORITY, |g| g.record.spec.policy.priority)
    }

    /// The priorities of the groups with open slots, highest first, each
    /// once (a step of the open slots' index per waiting group).
    pub(super) fn waiting_priorities(&self) -> Vec<u8> {
        let mut seen = [false; 256];
        let mut next = self.open_slots.iter().next().map(|k| (k.0.clone(), k.1));
        while let Some((fid, gi)) = next {
            seen[usize::from(self.group_priority(&fid, gi))] = true;
            let after = Bound::Included((fid, gi + 1, 0));
            next =
                self.open_slots.range((after, Bound::Unbounded)).next().map(|k| (k.0.clone(), k.1));
        }
        (0..=255u8).rev().filter(|p| seen[usize::from(*p)]).collect()
    }

    /// How many open slots belong to groups of a priority above
    /// `priority`: the slots offered capacity before one of `priority`
    /// (a step of the open slots' index per waiting group, and the
    /// higher groups' slots counted).
    pub(super) fn open_slots_above(&self, priority: u8) -> u32 {
        let mut n = 0usize;
        let mut next = self.open_slots.iter().next().map(|k| (k.0.clone(), k.1));
        while let Some((fid, gi)) = next {
            if self.group_priority(&fid, gi) > priority {
                n += self.open_slots.range((fid.clone(), gi, 0)..(fid.clone(), gi + 1, 0)).count();
            }
            let after = Bound::Included((fid, gi + 1, 0));
            next =
                self.open_slots.range((after, Bound::Unbounded)).next().map(|k| (k.0.clone(), k.1));
        }
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// The frameworks with open slots, in id order (a step of the open
    /// slots' index per framework).
    pub(super) fn waiting_frameworks(&self) -> Vec<FrameworkId> {
        let mut v = Vec::new();
        let mut next = self.open_slots.iter().next().map(|k| k.0.clone());
        while let Some(fid) = next {
            let after = Bound::Excluded((fid.clone(), usize::MAX, u32::MAX));
            next = self.open_slots.range((after, Bound::Unbounded)).next().map(|k| k.0.clone());
            v.push(fid);
        }
        v
    }

    /// Weighted DRF placement (docs/tenants.md): the tenant with the lowest
    /// dominant share over its weight is offered capacity first, one slot
    /// (or one batch of a group placed in a batch) at a time, and within it
    /// the framework with the lowest dominant share (framework id order in
    /// the implicit `default` tenant); both are keyed again after every
    /// placement, so each slot placed costs a logarithmic step of two
    /// heaps. A slot that would take its tenant over a limit waits.
    ///
    /// With `band`, only the groups of that priority are placed.
    fn place_fairly(&mut self, waiting: Vec<FrameworkId>, band: Option<u8>, out: &mut Vec<Action>) {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        if waiting.is_empty() {
            return;
        }
        let capacity = self.capacity();
        let mut queues: rustc_hash::FxHashMap<String, BinaryHeap<Reverse<(u64, FrameworkId)>>> =
            Default::default();
        for fid in waiting {
            let tenant = self.framework_tenant(&fid).to_owned();
            let key = self.framework_key(&fid, &tenant, &capacity);
            queues.entry(tenant).or_default().push(Reverse((key, fid)));
        }
        let mut tenants: BinaryHeap<Reverse<(u64, String)>> =
            queues.keys().map(|t| Reverse((self.tenant_key(t, &capacity), t.clone()))).collect();
        let mut cursors: rustc_hash::FxHashMap<FrameworkId, (usize, u32)> = Default::default();
        let mut fit_nowhere: Vec<Need> = Vec::new();
        while let Some(Reverse((_, tenant))) = tenants.pop() {
            let Some(queue) = queues.get_mut(&tenant) else { continue };
            let Some(Reverse((_, fid))) = queue.pop() else { continue };
            let cursor = cursors.entry(fid.clone()).or_insert((0, 0));
            let placed = self.place_next_of(&fid, cursor, band, &mut fit_nowhere, out);
            let queue = queues.get_mut(&tenant).expect("taken above");
            if placed {
                let key = self.framework_key(&fid, &tenant, &capacity);
                queue.push(Reverse((key, fid)));
            }
            if !queue.is_empty() {
                tenants.push(Reverse((self.tenant_key(&tenant, &capacity), tenant)));
            }
        }
    }

    /// Where framework `fid` of `tenant` stands among its tenant's
    /// frameworks: its dominant share; 0 for every framework of the
    /// implicit `default` tenant (framework id order).
    fn framework_key(
        &self,
        fid: &FrameworkId,
        tenant: &str,
        capacity: &super::fairness::Capacity,
    ) -> u64 {
        if tenant == DEFAULT_TENANT && self.tenants.get(DEFAULT_TENANT).is_none() {
            return 0;
        }
        super::fairness::weighted_share(&self.usage.framework(fid), capacity, 1)
    }

    /// Where `tenant` stands among the tenants: first every tenant below
    /// its guarantee (in any dimension it names: cores, memory, a named
    /// resource), then the others; within each, its dominant share over
    /// its weight (every dimension, named resources included). Guarantees
    /// come first so capacity a preemption frees for a tenant below its
    /// guarantee goes to it, not back to the victim's tenant when that one
    /// is poorer by weighted share (found by the `--preemption` soak in
    /// the trace of sim seed 611 (docs/design.md#simulator-seeds)).
    fn tenant_key(&self, tenant: &str, capacity: &super::fairness::Capacity) -> u64 {
        let set = self.tenants.get(tenant);
        let weight = set.map_or(1, |t| t.weight);
        let held = self.usage.tenant(tenant);
        let below = set.is_some_and(|t| {
            held.cores < t.guarantee.cores.unwrap_or(0)
                || held.memory_mb < t.guarantee.memory_mb.unwrap_or(0)
                || t.guarantee.resources.iter().any(|(name, g)| held.get(name) < *g)
        });
        // The guaranteed band sorts first (a share is capped below the
        // band: it passes 10^9 only when far more is held than offered).
        const BAND: u64 = 1 << 60;
        let share = super::fairness::weighted_share(&held, capacity, weight).min(BAND - 1);
        if below {
            share
        } else {
            BAND + share
        }
    }

    /// Places the next open slot of `fid` from `cursor` (group, slot) that
    /// can be placed now — or, for a group placed in a batch, its open
    /// slots — skipping groups that wait (their tenant's limit, no worker
    /// fits); `false` once nothing more of `fid` can be placed in this
    /// placement. With `band`, groups of another priority are skipped.
    fn place_next_of(
        &mut self,
        fid: &FrameworkId,
        cursor: &mut (usize, u32),
        band: Option<u8>,
        fit_nowhere: &mut Vec<Need>,
        out: &mut Vec<Action>,
    ) -> bool {
        loop {
            let from = (fid.clone(), cursor.0, cursor.1);
            let Some((_, gi, slot)) =
                self.open_slots.range(from..).next().filter(|k| k.0 == *fid).cloned()
            else {
                return false;
            };
            if band.is_some_and(|p| p != self.group_priority(fid, gi)) {
                *cursor = (gi + 1, 0);
                continue;
            }
            let (need, policy) = {
                let g = &self.frameworks[fid].groups[gi];
                let spec = &g.record.spec;
                let p = &spec.policy;
                let special = !p.constraints.is_empty()
                    || p.spread.is_some()
                    || p.placement.is_some_and(|pl| pl != self.config.placement);
                (Need::of(spec), special.then(|| p.clone()))
            };
            // The group's other slots ask the same: it waits whole.
            *cursor = (gi + 1, 0);
            let room = self.tenant_limit_room(fid, &need);
            if room == 0 || fit_nowhere.iter().any(|smaller| need.covers(smaller)) {
                continue;
            }
            let scans = policy.as_ref().is_some_and(|p| {
                p.spread.is_some() || p.placement.is_some_and(|pl| pl != self.config.placement)
            });
            if scans {
                let slots: Vec<u32> = self
                    .open_slots
                    .range((fid.clone(), gi, 0)..(fid.clone(), gi + 1, 0))
                    .map(|(_, _, s)| *s)
                    .take(room)
                    .collect();
                if slots.len() > 1 {
                    let assigned = self.assign_open_slots(fid, gi, &slots);
                    let placed = !assigned.is_empty();
                    for (slot, worker) in assigned {
                        self.launch(fid, gi, slot, &worker, out);
                    }
                    if placed {
                        return true;
                    }
                    continue;
                }
            }
            let chosen = match &policy {
                None => self.choose_worker(&need, &[]),
                Some(p) => self.choose_for_policy(fid, gi, &need, p),
            };
            match chosen {
                Some(worker) => {
                    self.launch(fid, gi, slot, &worker, out);
                    *cursor = (gi, slot + 1);
                    return true;
                }
                None => {
                    if policy.as_ref().is_none_or(|p| p.constraints.is_empty()) {
                        fit_nowhere.push(need);
                    }
                }
            }
        }
    }

    /// [`Master::place`] while every waiting framework is in the implicit
    /// `default` tenant: framework, group and slot order, as before
    /// tenants existed. With `band`, only the groups of that priority.
    fn place_first_come(&mut self, band: Option<u8>, out: &mut Vec<Action>) {
        // Requests that fitted on no worker during this placement: capacity
        // only shrinks while it runs, so a request at least as large fits
        // nowhere either, and the rest of its group is skipped.
        let mut fit_nowhere: Vec<Need> = Vec::new();
        let mut next = self.open_slots.iter().next().cloned();
        while let Some((fid, gi, slot)) = next {
            if band.is_some_and(|p| p != self.group_priority(&fid, gi)) {
                let after = Bound::Included((fid, gi + 1, 0));
                next = self.open_slots.range((after, Bound::Unbounded)).next().cloned();
                continue;
            }
            let (need, policy) = {
                let g = &self.frameworks[&fid].groups[gi];
                let spec = &g.record.spec;
                let p = &spec.policy;
                let special = !p.constraints.is_empty()
                    || p.spread.is_some()
                    || p.placement.is_some_and(|pl| pl != self.config.placement);
                (Need::of(spec), special.then(|| p.clone()))
            };
            let hopeless = fit_nowhere.iter().any(|smaller| need.covers(smaller));
            // A group that would scan every candidate per slot (a placement
            // of its own, or `spread` over an attribute) and has several
            // slots open is placed in one batch: one pass over the
            // candidates, a logarithmic step per slot (`plan::assign`).
            let scans = policy.as_ref().is_some_and(|p| {
                p.spread.is_some() || p.placement.is_some_and(|pl| pl != self.config.placement)
            });
            if scans && !hopeless {
                let slots: Vec<u32> = self
                    .open_slots
                    .range((fid.clone(), gi, 0)..(fid.clone(), gi + 1, 0))
                    .map(|(_, _, s)| *s)
                    .collect();
                if slots.len() > 1 {
                    for (slot, worker) in self.assign_open_slots(&fid, gi, &slots) {
                        self.launch(&fid, gi, slot, &worker, out);
                    }
                    let after = Bound::Included((fid, gi + 1, 0));
                    next = self.open_slots.range((after, Bound::Unbounded)).next().cloned();
                    continue;
                }
            }
            let chosen = if hopeless {
                None
            } else {
                match &policy {
                    None => self.choose_worker(&need, &[]),
                    Some(p) => self.choose_for_policy(&fid, gi, &need, p),
                }
            };
            // Only an unconstrained request that fits nowhere says so of
            // every larger one.
            let unconstrained = policy.as_ref().is_none_or(|p| p.constraints.is_empty());
            let after = match chosen {
                Some(worker) => {
                    self.launch(&fid, gi, slot, &worker, out);
                    Bound::Excluded((fid, gi, slot))
                }
                None => {
                    if !hopeless && unconstrained {
                        fit_nowhere.push(need);
                    }
                    // The group's other slots ask the same.
                    Bound::Included((fid, gi + 1, 0))
                }
            };
            next = self.open_slots.range((after, Bound::Unbounded)).next().cloned();
        }
    }

    /// Where `slots` of group `gi` of `fid` go, in one batch, counting the
    /// group's live executors per value of its `spread` attribute.
    fn assign_open_slots(
        &self,
        fid: &FrameworkId,
        gi: usize,
        slots: &[u32],
    ) -> Vec<(u32, WorkerId)> {
        let spec = &self.frameworks[fid].groups[gi].record.spec;
        let mut live: std::collections::BTreeMap<&str, u32> = Default::default();
        if let Some(attr) = &spec.policy.spread {
            for e in self.executors.of_framework(fid) {
                if e.group != spec.group || e.state.is_terminal() {
                    continue;
                }
                let Some(w) = self.workers.entries.get(&e.worker) else { continue };
                *live.entry(crate::policy::spread_value(&w.attributes, attr)).or_default() += 1;
            }
        }
        let mut overlay = Default::default();
        let mut out = Vec::with_capacity(slots.len());
        self.candidates().assign(spec, &live, &mut overlay, slots.iter().copied(), |slot, id| {
            out.push((slot, id.clone()))
        });
        out
    }

    /// A worker for a group placed the master's way: the candidates index
    /// walked in the master's order from its cursor, skipping the workers
    /// that do not fit or do not meet `constraints`. A group with a
    /// positive constraint (`=`, `in`, a bare name) walks only the
    /// candidates with the values it allows ([`super::by_attribute`]:
    /// a logarithmic step per value); one with only negative ones costs
    /// the candidates skipped before a match.
    fn choose_worker(
        &mut self,
        need: &Need,
        constraints: &[crate::policy::Constraint],
    ) -> Option<WorkerId> {
        if !constraints.is_empty() {
            if let Some(chosen) = self.choose_constrained(need, constraints) {
                #[cfg(debug_assertions)]
                if self.workers.entries.len() <= 512 {
                    assert_eq!(
                        chosen,
                        self.choose_worker_by_walk(need, constraints),
                        "the candidates by attribute value choose as the walk"
                    );
                }
                if let (Some(worker), Placement::Spread) = (&chosen, self.config.placement) {
                    self.spread_after = Some((0, 0, worker.clone()));
                }
                return chosen;
            }
        }
        let chosen = self.choose_worker_by_walk(need, constraints);
        if let (Some(worker), Placement::Spread) = (&chosen, self.config.placement) {
            self.spread_after = Some((0, 0, worker.clone()));
        }
        chosen
    }

    /// [`Master::choose_worker`] for a constrained group through the
    /// candidates by attribute value; `None` when that index does not
    /// narrow the walk (no positive constraint under the master's
    /// `spread`).
    fn choose_constrained(
        &self,
        need: &Need,
        constraints: &[crate::policy::Constraint],
    ) -> Option<Option<WorkerId>> {
        let ok = |name: &str| {
            self.workers.entries.get(name).is_some_and(|w| {
                fits_on(w, need) && constraints.iter().all(|c| c.allows(&w.attributes))
            })
        };
        let index = &self.workers.by_attribute;
        let chosen = match self.config.placement {
            Placement::Spread => {
                let after = self.spread_after.as_ref().map(|(_, _, id)| id.as_str());
                index.next_after(constraints, after, ok)?
            }
            Placement::Pack => index.best(
                Placement::Pack,
                None,
                constraints,
                (need.cores, need.memory_mb),
                |_| 0,
                |name, _| ok(name),
            ),
        };
        Some(chosen.map(|name| WorkerId(name.to_string())))
    }

    /// [`Master::choose_worker`] by a walk of every candidate in the
    /// master's order from its cursor (the cursor is not moved).
    fn choose_worker_by_walk(
        &self,
        need: &Need,
        constraints: &[crate::policy::Constraint],
    ) -> Option<WorkerId> {
        let fits = |id: &WorkerId| {
            self.workers.entries.get(id).is_some_and(|w| {
                fits_on(w, need) && constraints.iter().all(|c| c.allows(&w.attributes))
            })
        };
        let (cores, memory_mb) = (need.cores, need.memory_mb);
        let index = &self.workers.placeable;
        let chosen = match self.config.placement {
            // Round robin in id order, from the worker after the last one
            // chosen.
            Placement::Spread => match &self.spread_after {
                Some(last) => index
                    .range((Bound::Excluded(last), Bound::Unbounded))
                    .chain(index.range(..=last))
                    .find(|(_, _, id)| fits(id)),
                None => index.iter().find(|(_, _, id)| fits(id)),
            },
            // The fullest worker that fits: candidates in (free cores,
            // free memory, id) order, from those with enough free cores.
            Placement::Pack => index
                .range((cores, memory_mb, WorkerId(String::new()))..)
                .find(|(_, _, id)| fits(id)),
        };
        chosen.map(|(_, _, id)| id.clone())
    }

    /// A worker for a group whose policy departs from the master's
    /// (a placement of its own, or `spread` over an attribute), or that has
    /// constraints. Constrained groups placed the master's way walk the
    /// index ([`Master::choose_worker`]); for the rest, among the fitting
    /// workers that meet every constraint and whose `spread` value has the
    /// fewest live executors of the group, `pack` takes the fullest
    /// (fewest free cores, then memory, then id), `spread` the emptiest
    /// (most free cores, then memory, then lowest id), found through the
    /// candidates by attribute value ([`super::by_attribute`]: a
    /// logarithmic step per value looked at, plus the group's executors
    /// counted per value; docs/design.md#issue-46). Used for one open
    /// slot; several open slots of such a group are placed in one batch by
    /// the same rule ([`Master::assign_open_slots`]).
    fn choose_for_policy(
        &mut self,
        fid: &FrameworkId,
        gi: usize,
        need: &Need,
        policy: &crate::policy::GroupPolicy,
    ) -> Option<WorkerId> {
        let placement = policy.placement.unwrap_or(self.config.placement);
        if policy.spread.is_none() && placement == self.config.placement {
            return self.choose_worker(need, &policy.constraints);
        }
        let per_value = self.live_per_value(fid, gi, policy);
        let ok = |name: &str, lacking: Option<&str>| {
            self.workers.entries.get(name).is_some_and(|w| {
                fits_on(w, need)
                    && policy.constraints.iter().all(|c| c.allows(&w.attributes))
                    && lacking.is_none_or(|a| w.attributes.iter().all(|(k, _)| k != a))
            })
        };
        let count = |v: &str| per_value.get(v).copied().unwrap_or(0);
        let chosen = self
            .workers
            .by_attribute
            .best(
                placement,
                policy.spread.as_deref(),
                &policy.constraints,
                (need.cores, need.memory_mb),
                count,
                ok,
            )
            .map(|name| WorkerId(name.to_string()));
        #[cfg(debug_assertions)]
        if self.workers.entries.len() <= 512 {
            assert_eq!(
                chosen,
                self.choose_for_policy_by_scan(need, policy, &per_value),
                "the candidates by attribute value choose as the scan"
            );
        }
        chosen
    }

    /// How many live executors group `gi` of `fid` has per value of its
    /// `spread` attribute (none without one).
    fn live_per_value(
        &self,
        fid: &FrameworkId,
        gi: usize,
        policy: &crate::policy::GroupPolicy,
    ) -> rustc_hash::FxHashMap<&str, u32> {
        let group = &self.frameworks[fid].groups[gi].record.spec.group;
        let mut per_value: rustc_hash::FxHashMap<&str, u32> = Default::default();
        if let Some(attr) = &policy.spread {
            for e in self.executors.of_framework(fid) {
                if &e.group != group || e.state.is_terminal() {
                    continue;
                }
                let Some(w) = self.workers.entries.get(&e.worker) else { continue };
                *per_value.entry(crate::policy::spread_value(&w.attributes, attr)).or_default() +=
                    1;
            }
        }
        per_value
    }

    /// [`Master::choose_for_policy`] by a scan of every candidate (debug
    /// builds check the index's choice against it).
    #[cfg(debug_assertions)]
    fn choose_for_policy_by_scan(
        &self,
        need: &Need,
        policy: &crate::policy::GroupPolicy,
        per_value: &rustc_hash::FxHashMap<&str, u32>,
    ) -> Option<WorkerId> {
        let placement = policy.placement.unwrap_or(self.config.placement);
        let mut best: Option<((u32, u32, u64), &WorkerId)> = None;
        for (_, _, id) in &self.workers.placeable {
            let Some(w) = self.workers.entries.get(id) else { continue };
            if !fits_on(w, need) || !policy.constraints.iter().all(|c| c.allows(&w.attributes)) {
                continue;
            }
            let count = policy.spread.as_ref().map_or(0, |attr| {
                per_value
                    .get(crate::policy::spread_value(&w.attributes, attr))
                    .copied()
                    .unwrap_or(0)
            });
            let free_cores = w.cores.saturating_sub(w.cores_used);
            let free_mem = w.memory_mb.saturating_sub(w.memory_used_mb);
            let key = match placement {
                Placement::Pack => (count, free_cores, free_mem),
                Placement::Spread => (count, u32::MAX - free_cores, u64::MAX - free_mem),
            };
            // Candidates come in key order, not id order: ties go to the
            // lowest id.
            let better = match &best {
                None => true,
                Some((k, bid)) => key < *k || (key == *k && id < *bid),
            };
            if better {
                best = Some((key, id));
            }
        }
        best.map(|(_, id)| id.clone())
    }

    fn launch(
        &mut self,
        fid: &FrameworkId,
        gi: usize,
        slot: u32,
        worker: &WorkerId,
        out: &mut Vec<Action>,
    ) {
        self.next_launch += 1;
        let fw = self.frameworks.get_mut(fid).expect("placement reads live frameworks");
        let g = &mut fw.groups[gi];
        let spec = g.record.spec.clone();
        let need = Need::of(&spec);
        let id = ExecutorId(format!(
            "{fid}/{}#{slot}#{}.{}",
            spec.group, self.epoch.0, self.next_launch
        ));
        g.current[slot as usize] = Some(id.clone());
        self.open_slots.remove(&(fid.clone(), gi, slot));
        let entry = ExecutorEntry {
            health: None,
            id: id.clone(),
            framework: fid.clone(),
            group: spec.group.clone(),
            slot,
            worker: worker.clone(),
            state: ExecutorState::Launching,
            cores: spec.cores,
            memory_mb: spec.memory_mb,
            kill_requested: false,
            operator_stop: false,
            recorded: false,
            owed: None,
            launch: self.next_launch,
            sent_on: self.workers.entries.get(worker).and_then(|w| w.conn),
            running_since: None,
            ran_ms: None,
            port_count: need.ports,
            ports: Vec::new(),
            resources_held: spec.launch.resources.clone(),
            resources: Vec::new(),
        };
        self.hold(worker, &need);
        let info = self.info(&entry);
        self.insert_executor(entry);
        if let Some(conn) = self.workers.entries.get(worker).and_then(|w| w.conn) {
            out.push(Action::Send {
                conn,
                msg: Message::LaunchExecutor {
                    epoch: self.epoch,
                    executor: id,
                    framework: fid.clone(),
                    spec: ExecutorSpec {
                        command: spec.command,
                        env: spec.env,
                        cores: spec.cores,
                        memory_mb: spec.memory_mb,
                        launch: spec.launch,
                    },
                    launch: self.next_launch,
                },
            });
        }
        self.tell_framework(fid, Message::ExecutorUpdate { epoch: self.epoch, info }, out);
    }

    /// A report from `worker` (registration or status message).
    pub(super) fn apply_report(
        &mut self,
        worker: &WorkerId,
        report: ExecutorReport,
        now: Millis,
        out: &mut Vec<Action>,
    ) {
        let known =
            self.executors.get(&report.id).map(|e| (e.worker == *worker, e.state.is_terminal()));
        match known {
            // Already recorded; a process the leader wrote off (LOST) that
            // turns out to run is killed: its slot has moved on.
            // Already terminal here.
            Some((true, true)) => {
                if !report.state.is_terminal() {
                    // Written off (LOST) but it runs: its slot has moved on.
                    // It is killed, holding what it uses until its end is
                    // reported (`kills`).
                    if self.dying.contains(&report.id) {
                        self.still_dying(&report.id, out);
                    } else {
                        let need = Need::held_by(&self.executors[&report.id]);
                        self.start_dying(worker, &report.id, need, false, true, out);
                    }
                    return;
                }
                self.end_dying(&report.id, out);
                if self.late_success(worker, &report, out) {
                } else {
                    let e = &self.executors[&report.id];
                    match (e.state == report.state, e.recorded) {
                        (true, true) => self.ack_report(worker, &report.id, out),
                        // Its record is still being written: the
                        // acknowledgement follows that write, never precedes it.
                        (true, false) => {}
                        // It ended otherwise than recorded here (say, LOST);
                        // acknowledge once the framework's record is durable.
                        (false, _) => self.kill_stray(worker, &report, out),
                    }
                }
            }
            Some((true, false)) => {
                if let Some(h) = &report.health {
                    if let Some(mut e) = self.executors.get_mut(&report.id) {
                        e.set_health(crate::health::HealthSeen::received(now, h));
                    }
                }
                if report.ran_ms.is_some() {
                    if let Some(mut e) = self.executors.get_mut(&report.id) {
                        e.set_ran(report.ran_ms);
                    }
                }
                if !report.ports.is_empty() || !report.resources.is_empty() {
                    let resources = reported_resources(&report);
                    if let Some(mut e) = self.executors.get_mut(&report.id) {
                        if !report.ports.is_empty() {
                            e.set_ports(report.ports);
                        }
                        if !resources.is_empty() {
                            e.set_resources(resources);
                        }
                    }
                }
                if let ExecutorState::Failed { reason } = &report.state {
                    if crate::launch::is_out_of_memory(reason) {
                        self.metrics.out_of_memory_kills += 1;
                    }
                }
                self.update_executor(&report.id, report.state, true, now, out)
            }
            Some((false, _)) => self.kill_stray(worker, &report, out),
            None => self.adopt_or_kill(worker, report, now, out),
        }
    }

    fn kill_stray(&mut self, worker: &WorkerId, report: &ExecutorReport, out: &mut Vec<Action>) {
        if report.state.is_terminal() {
            // Nothing to record for it, but its slot may have an outcome
            // still being written: acknowledge after the framework's record
            // is durable as it stands (writes to one key keep their order).
            if self.frameworks.contains_key(&report.framework) {
                let then =
                    vec![AfterWrite::Ack { worker: worker.clone(), executor: report.id.clone() }];
                self.persist_framework(&report.framework.clone(), then, out);
            } else {
                self.ack_report(worker, &report.id, out);
            }
        } else if self.dying.contains(&report.id) {
            self.still_dying(&report.id, out);
        } else {
            self.start_dying(worker, &report.id, Need::of_report(report), false, true, out);
        }
    }

    /// An executor this leader did not launch: adopt it into its slot when
    /// the slot is pending and empty (a failover), else kill it. One this
    /// leadership already told its worker to kill stays killed: the kill
    /// may still be on its way (held by the acting lease or in flight), and
    /// adopting it now would leave its slot to an executor about to die.
    fn adopt_or_kill(
        &mut self,
        worker: &WorkerId,
        report: ExecutorReport,
        now: Millis,
        out: &mut Vec<Action>,
    ) {
        // One an operator asked to stop with its slot refilled, or a
        // preemption's victim (durable in `replacing`), is not adopted: the
        // kill it was promised is carried out, whichever leader accepted
        // it. Its end is never counted: it stays named after its end (until
        // the slot settles, or another executor of the slot is stopped to
        // be replaced), so a report of its end heard again (a worker
        // registers twice before it hears the acknowledgement; the second
        // registration writes off a launch made for the slot meanwhile) is
        // no adoptable end either (`--api-jobs --preemption`, docs/design.md#issue-44:
        // sim seeds 71 and 4534 (docs/design.md#simulator-seeds)). Nor is one launched before
        // the executor named: the slot's refill replaced it and was replaced
        // in turn, overwriting its name (`replacing` names one executor per
        // slot), so it is older than a later launch of its slot and its end
        // is no adoptable end either (sim seed 32170, docs/design.md#simulator-seeds).
        let replacing = report.id.group_slot(&report.framework).is_some_and(|(group, slot)| {
            self.frameworks
                .get(&report.framework)
                .and_then(|f| f.groups.iter().find(|g| g.record.spec.group == group))
                .and_then(|g| g.record.replacing.get(&slot))
                .is_some_and(|named| named == &report.id || replaced_by(&report.id, named))
        });
        // Nor is the end of one launched before the executor whose end its
        // slot counted last (`GroupRecord::counted`): the slot moved on past
        // it, so its end was counted already or was no failure of the
        // slot's (a worker reports an end again until it hears the
        // acknowledgement; a leader that recorded it died first, and the
        // slot's next executor ended and was counted since:
        // sim seed 36 with `--api-jobs --services`, docs/design.md#simulator-seeds).
        let superseded = report.state.is_terminal()
            && report.id.group_slot(&report.framework).is_some_and(|(group, slot)| {
                self.frameworks
                    .get(&report.framework)
                    .and_then(|f| f.groups.iter().find(|g| g.record.spec.group == group))
                    .and_then(|g| g.record.counted.get(&slot))
                    .is_some_and(|last| replaced_by(&report.id, last))
            });
        // Nor is a live one of another spec than a deployment that
        // succeeded deployed: that deployment judged the group without it
        // (its worker was cut off from the leader that wrote it off and
        // refilled its slot), and nothing would replace it again; it may even
        // predate every era kept, its spec unknown. Adopting it, first
        // reported, would keep it and kill its slot's executor of the
        // deployed spec (sim seed 46787 with `--api-jobs --services`, docs/design.md#simulator-seeds).
        let stale = !report.state.is_terminal()
            && report.id.group_slot(&report.framework).is_some_and(|(group, _)| {
                self.frameworks
                    .get(&report.framework)
                    .and_then(|f| f.groups.iter().find(|g| g.record.spec.group == group))
                    .is_some_and(|g| {
                        g.record.deployment.as_ref().is_some_and(|d| {
                            d.state == crate::store::DeploymentState::Succeeded
                                && g.record.digest_of(&report.id) != d.target
                        })
                    })
            });
        let replacing = replacing || superseded || stale;
        if self.dying.contains(&report.id) {
            if report.state.is_terminal() {
                self.end_dying(&report.id, out);
            }
            if !self.late_success(worker, &report, out) {
                self.kill_stray(worker, &report, out);
            }
            return;
        }
        let slot_free = report.id.group_slot(&report.framework).and_then(|(group, slot)| {
            let fw = self.frameworks.get(&report.framework)?;
            let g = fw.groups.iter().position(|g| g.record.spec.group == group)?;
            let gs = &fw.groups[g];
            let free = gs.record.slots.get(slot as usize) == Some(&SlotOutcome::Pending)
                && gs.current[slot as usize].is_none()
                && !replacing;
            free.then_some((group, slot, g))
        });
        let fits =
            self.workers.entries.get(worker).is_some_and(|w| fits_on(w, &Need::of_report(&report)))
                && (report.state.is_terminal()
                    || self.executors.live_on(worker) < MAX_EXECUTORS_PER_WORKER);
        let slot_free = slot_free.filter(|_| fits || report.state.is_terminal());
        let Some((group, slot, gi)) = slot_free else {
            // Not adoptable: no such pending slot, or adopting it would put
            // the worker over its capacity (its slot is refilled elsewhere).
            if !self.late_success(worker, &report, out) {
                self.kill_stray(worker, &report, out);
            }
            return;
        };
        let fid = report.framework.clone();
        let fw = self.frameworks.get_mut(&fid).expect("checked");
        fw.groups[gi].current[slot as usize] = Some(report.id.clone());
        self.refresh_slot(&fid, gi, slot);
        let entry = ExecutorEntry {
            // A new leader has its health from the worker's registration.
            health: report.health.as_ref().map(|h| crate::health::HealthSeen::received(now, h)),
            id: report.id.clone(),
            framework: fid,
            group,
            slot,
            worker: worker.clone(),
            state: ExecutorState::Launching,
            // A terminal report adopted without fitting holds nothing: its
            // peer-supplied numbers never reach the worker's accounting.
            cores: if fits { report.cores } else { 0 },
            memory_mb: if fits { report.memory_mb } else { 0 },
            kill_requested: false,
            operator_stop: false,
            recorded: false,
            owed: None,
            launch: 0,
            sent_on: None,
            running_since: None,
            ran_ms: report.ran_ms,
            port_count: if fits { Need::of_report(&report).ports } else { 0 },
            ports: report.ports.iter().take(crate::ports::MAX_PORTS_PER_GROUP).cloned().collect(),
            resources_held: if fits { Need::of_report(&report).resources } else { Vec::new() },
            resources: reported_resources(&report),
        };
        let framework = entry.framework.clone();
        self.hold(worker, &Need::held_by(&entry));
        self.insert_executor(entry);
        self.update_executor(&report.id, report.state, true, now, out);
        // A worker cut off while this leader placed under its tenant's
        // limit brings back more than the limit allows: the adopted one is
        // stopped and its slot waits (docs/tenants.md).
        let live = self.executors.get(&report.id).is_some_and(|e| !e.state.is_terminal());
        if live && self.tenant_over_limit(&framework) {
            self.stop_to_refill(&report.id, out);
        }
    }

    /// A success reported late — by an executor this leader wrote off or
    /// never knew, whose pending slot was refilled meanwhile — still
    /// completes the slot: the work is done, and an exit a worker reported is
    /// never lost. The redundant replacement is killed. `false` when the
    /// report is no such success.
    fn late_success(
        &mut self,
        worker: &WorkerId,
        report: &ExecutorReport,
        out: &mut Vec<Action>,
    ) -> bool {
        if report.state != (ExecutorState::Exited { code: 0 }) {
            return false;
        }
        let Some((group, slot)) = report.id.group_slot(&report.framework) else {
            return false;
        };
        let Some(g) = self.frameworks.get_mut(&report.framework).and_then(|f| f.group_mut(&group))
        else {
            return false;
        };
        if g.record.slots.get(slot as usize) != Some(&SlotOutcome::Pending) {
            return false;
        }
        // A service's exit 0 is an end like any other, never a completion
        // (docs/jobs.md, "What the job layer promises": a service's slot
        // never ends while its framework lives). The slot moved on to a
        // replacement when this executor was written off: nothing of this
        // late end is counted (docs/design.md#issue-41, scenario 1).
        if g.record.spec.policy.restart.mode == crate::policy::RestartMode::Service {
            return false;
        }
        g.record.slots[slot as usize] = SlotOutcome::Done { executor: report.id.clone() };
        super::restarts::clear(&mut g.record, slot);
        let replaced = g.current[slot as usize].take();
        if let Some(gi) = self
            .frameworks
            .get(&report.framework)
            .and_then(|f| f.groups.iter().position(|g| g.record.spec.group == group))
        {
            // A slot done while it waited to restart waits no more.
            self.restart_waits.remove(&(report.framework.clone(), gi, slot));
            self.refresh_slot(&report.framework, gi, slot);
        }
        if let Some(x) = replaced {
            if let Some(e) = self.executors.get(&x).cloned() {
                self.send_kill(&e.worker, &x, out);
            }
        }
        let info = ExecutorInfo {
            id: report.id.clone(),
            group,
            slot,
            worker: Some(worker.clone()),
            state: report.state.clone(),
            host: None,
            ports: Vec::new(),
            resources: Vec::new(),
        };
        self.tell_framework(
            &report.framework,
            Message::ExecutorUpdate { epoch: self.epoch, info: info.clone() },
            out,
        );
        // Remember it (terminal, not yet recorded), so a repeated report
        // waits for the write instead of being acknowledged before it.
        if !self.set_executor_state(&report.id, report.state.clone()) {
            self.insert_executor(ExecutorEntry {
                health: None,
                id: report.id.clone(),
                framework: report.framework.clone(),
                group: info.group.clone(),
                slot,
                worker: worker.clone(),
                state: report.state.clone(),
                cores: report.cores,
                memory_mb: report.memory_mb,
                kill_requested: false,
                operator_stop: false,
                recorded: false,
                owed: None,
                launch: 0,
                sent_on: None,
                running_since: None,
                ran_ms: None,
                port_count: 0,
                ports: Vec::new(),
                resources_held: Vec::new(),
                resources: Vec::new(),
            });
        }
        let then = vec![AfterWrite::Recorded {
            executor: report.id.clone(),
            state: report.state.clone(),
            ack: Some(worker.clone()),
        }];
        self.persist_framework(&report.framework.clone(), then, out);
        true
    }

    /// Moves a known, live executor to `state` and settles its slot when the
    /// state is terminal.
    /// `reported`: the worker reported this state (it is acknowledged once
    /// durable); otherwise the leader decided it (LOST) and nobody is owed an
    /// acknowledgement.
    pub(super) fn update_executor(
        &mut self,
        id: &ExecutorId,
        state: ExecutorState,
        reported: bool,
        now: Millis,
        out: &mut Vec<Action>,
    ) {
        match self.executors.get(id) {
            Some(e) if e.state != state => {}
            _ => return,
        }
        self.set_executor_state(id, state.clone());
        if state == ExecutorState::Running {
            if let Some(mut x) = self.executors.get_mut(id) {
                x.mark_running(now);
            }
        }
        let e = self.executors[id].clone();
        self.tell_framework(
            &e.framework,
            Message::ExecutorUpdate { epoch: self.epoch, info: self.info(&e) },
            out,
        );
        if !state.is_terminal() {
            return;
        }
        self.release(&e);
        let max_retries = self.config.max_executor_retries;
        let no_refill_after_stop = self.config.unsafe_no_refill_after_stop;
        // An end counted already (see the `counted` arm below) is not
        // counted again by the deployment either (`--api-jobs --services`:
        // sim seed 283, docs/design.md#simulator-seeds).
        let mut counted_before = false;
        let epoch = self.epoch;
        // The longer of what this leader saw and what the worker reports
        // (which covers a run that began under an earlier leader).
        let seen_ms = e.running_since.map_or(0, |t| now.0.saturating_sub(t.0));
        let ran_ms = seen_ms.max(e.ran_ms.unwrap_or(0));
        let wall_now = self.wall(now);
        let mut slot_failed = None;
        let mut settled = None;
        let mut wait = None;
        // The wait is a singleton's hold (its own wait reason).
        let mut held = false;
        // A singleton lost with its worker may still run there, cut off:
        // its slot waits until that worker has stopped it by its own rule
        // (docs/design.md#issue-45).
        let singleton_wait =
            if state == ExecutorState::Lost { self.singleton_wait(&e, now) } else { None };
        if let Some(fw) = self.frameworks.get_mut(&e.framework) {
            settled = fw.groups.iter().position(|g| g.record.spec.group == e.group);
            if let Some(g) = fw.group_mut(&e.group) {
                let slot = e.slot as usize;
                // One being replaced stays named in `replacing` after its
                // end (see `adopt_or_kill`): a report of its end heard
                // again, by this leader or a new one, is never adopted and
                // counted.
                let restart = &g.record.spec.policy.restart;
                let own_policy = *restart != crate::policy::RestartPolicy::default();
                let service = restart.mode == crate::policy::RestartMode::Service;
                if g.current.get(slot) == Some(&Some(e.id.clone())) {
                    g.current[slot] = None;
                    let outcome = match &state {
                        // An exit 0 completes a batch slot, whoever
                        // stopped it: the work is done (and a reported
                        // exit is never lost).
                        ExecutorState::Exited { code: 0 } if !service => {
                            super::restarts::clear(&mut g.record, e.slot);
                            SlotOutcome::Done { executor: e.id.clone() }
                        }
                        // The framework's kill is recorded (and may have
                        // been accepted): whatever the end, the slot stays
                        // killed and is not refilled.
                        _ if e.kill_requested || (e.operator_stop && no_refill_after_stop) => {
                            SlotOutcome::Killed { executor: e.id.clone() }
                        }
                        // An operator stopped it (a drain, or a kill with
                        // refill): whatever else it ended with is no
                        // failure of its own: refill, charging nothing.
                        _ if e.operator_stop => SlotOutcome::Pending,
                        // Lost, or killed by its worker's shutdown: refill
                        // without using the retry budget.
                        ExecutorState::Lost | ExecutorState::Killed => SlotOutcome::Pending,
                        // Its worker refused the launch: a port or named
                        // resource the leader counted free is held by
                        // something it has not heard of yet. Re-queued
                        // after a short wait, charging nothing (docs/design.md#issue-41,
                        // scenario 7).
                        ExecutorState::Failed { reason }
                            if crate::launch::is_refused_launch(reason) =>
                        {
                            wait = Some(REFUSED_LAUNCH_WAIT.0);
                            SlotOutcome::Pending
                        }
                        // A singleton its worker stopped, cut off from every
                        // master for the group's stop_after: the worker's
                        // doing, so refill, charging nothing (docs/design.md#issue-45).
                        ExecutorState::Failed { reason } if crate::launch::is_cut_off(reason) => {
                            SlotOutcome::Pending
                        }
                        // Counted already (by a leader that recorded it and
                        // died before its acknowledgement reached the
                        // worker, which reports it again): an end is
                        // counted once, keyed by its executor (docs/design.md#issue-41,
                        // scenario 6).
                        ExecutorState::Exited { .. } | ExecutorState::Failed { .. }
                            if g.record.counted.get(&e.slot) == Some(&e.id) =>
                        {
                            counted_before = true;
                            SlotOutcome::Pending
                        }
                        // A group with a restart policy of its own: the
                        // end counts against its slot (`restarts`).
                        ExecutorState::Exited { .. } | ExecutorState::Failed { .. }
                            if own_policy =>
                        {
                            g.record.counted.insert(e.slot, e.id.clone());
                            let counted = super::restarts::count_end(
                                &mut g.record,
                                e.slot,
                                &state,
                                ran_ms,
                                max_retries,
                                wall_now,
                            );
                            g.last_end = Some((e.slot, super::restarts::describe_end(&state)));
                            match counted {
                                super::restarts::Counted::Failed(why) => {
                                    // The worker's failure text is peer
                                    // input: the stored reason is capped.
                                    let reason = crate::limits::cap_reason(format!(
                                        "executor {} {why}",
                                        e.id
                                    ));
                                    slot_failed = Some(reason.clone());
                                    SlotOutcome::Failed { executor: e.id.clone(), reason }
                                }
                                super::restarts::Counted::Retry(ms) => {
                                    wait = Some(ms);
                                    SlotOutcome::Pending
                                }
                            }
                        }
                        ExecutorState::Exited { .. } | ExecutorState::Failed { .. } => {
                            g.record.counted.insert(e.slot, e.id.clone());
                            g.last_end = Some((e.slot, super::restarts::describe_end(&state)));
                            // Stored, so not necessarily written by us
                            // (a planted or damaged record): checked.
                            g.record.retries_used = g.record.retries_used.saturating_add(1);
                            if g.record.retries_used > max_retries {
                                // The worker's failure text is peer input:
                                // the stored reason is capped (limits.rs).
                                let reason = crate::limits::cap_reason(format!(
                                    "executor {} ended {:?}; the group's {} retries are used up",
                                    e.id, state, max_retries
                                ));
                                slot_failed = Some(reason.clone());
                                SlotOutcome::Failed { executor: e.id.clone(), reason }
                            } else {
                                SlotOutcome::Pending
                            }
                        }
                        ExecutorState::Launching | ExecutorState::Running => {
                            unreachable!("terminal")
                        }
                    };
                    // A singleton lost with its worker waits whatever else
                    // was under way (a stop sent for a rollout or an
                    // operator, cut off with the worker, never arrived).
                    if outcome == SlotOutcome::Pending {
                        if let Some(w) = singleton_wait {
                            held = wait.is_none_or(|x| w >= x);
                            wait = Some(wait.map_or(w, |x| x.max(w)));
                        }
                    }
                    g.record.slots[slot] = outcome;
                }
            }
        }
        if let (Some(gi), Some(ms)) = (settled, wait) {
            self.wait_to_restart(&e.framework.clone(), gi, e.slot, (ms, held), now);
        }
        if let Some(gi) = settled {
            self.refresh_slot(&e.framework, gi, e.slot);
        }
        // In the write that records the end (docs/design.md#issue-45).
        if !counted_before {
            self.deployment_saw_end(now, &e, &state, ran_ms, slot_failed.is_some());
        }
        if let Some(reason) = slot_failed {
            let msg = Message::SlotFailed { epoch, group: e.group.clone(), slot: e.slot, reason };
            self.tell_framework(&e.framework, msg, out);
        }
        self.maybe_drained(&e.worker, out);
        let ack = reported.then(|| e.worker.clone());
        let then = vec![
            AfterWrite::Recorded { executor: e.id.clone(), state: state.clone(), ack },
            AfterWrite::Place,
        ];
        if self.frameworks.contains_key(&e.framework) {
            self.persist_framework(&e.framework.clone(), then, out);
        } else {
            if let Some(mut x) = self.executors.get_mut(&e.id) {
                x.mark_recorded();
            }
            if reported {
                self.ack_report(&e.worker, &e.id, out);
            }
        }
    }

    /// The write recording `executor` in `state` is durable: if that is
    /// still its state, it counts as recorded, and the worker that reported
    /// it (if any) may forget it.
    pub(super) fn on_recorded(
        &mut self,
        executor: &ExecutorId,
        state: &ExecutorState,
        ack: Option<&WorkerId>,
        out: &mut Vec<Action>,
    ) {
        let current = match self.executors.get_mut(executor) {
            Some(mut e) if &e.state == state => {
                e.mark_recorded();
                true
            }
            _ => false,
        };
        if let (true, Some(worker)) = (current, ack) {
            self.ack_report(worker, executor, out);
        }
    }

    /// A worker's full report (its registration, taken by the worker when
    /// it had processed launches up to `seen`, and received on `conn`) is
    /// the truth about what it runs *as of then*: an executor the leader
    /// placed there that the worker does not report never started (its
    /// launch was lost with a connection, or the worker answered it) and is
    /// LOST; its slot is refilled. Only what was launched before the report
    /// was taken can be written off (docs/design.md#one-executor-per-slot): a launch numbered past
    /// `seen` and sent on `conn` was still on its way (a retried
    /// registration crossing the launches that followed the first one's
    /// `Registered`) and stays. One sent on another connection never
    /// reaches the worker (it dials a master's new connection only after
    /// the old one is gone) and is written off whatever its number.
    /// Executors this leadership did not launch (launch 0) count as
    /// launched before any report.
    pub(super) fn reconcile(
        &mut self,
        worker: &WorkerId,
        reports: &[ExecutorReport],
        seen: u64,
        conn: crate::ids::ConnId,
        now: Millis,
        out: &mut Vec<Action>,
    ) {
        let reported: std::collections::BTreeSet<&ExecutorId> =
            reports.iter().map(|r| &r.id).collect();
        let mut missing = self.executors.live_ids_on(worker);
        missing.retain(|id| {
            !reported.contains(id)
                && self
                    .executors
                    .get(id)
                    .is_some_and(|e| e.launch <= seen || e.sent_on != Some(conn))
        });
        for id in missing {
            self.update_executor(&id, ExecutorState::Lost, false, now, out);
        }
    }

    /// How long the slot of `e`, a LOST executor of a singleton group
    /// (docs/design.md#issue-45), waits before it is placed again: until
    /// [`crate::cut_off::replace_after`] has passed since this leader last
    /// heard from its worker (or, for a worker it never heard from, since
    /// now: it lost the executor the moment it learned of it). A slot
    /// whose executor this leader never heard of waits from its takeover
    /// ([`Master::hold_singletons_after_takeover`]). `None`: no wait (not
    /// a singleton, or that time has passed).
    fn singleton_wait(&self, e: &ExecutorEntry, now: Millis) -> Option<u64> {
        let launch = &self
            .frameworks
            .get(&e.framework)?
            .groups
            .iter()
            .find(|g| g.record.spec.group == e.group)?
            .record
            .spec
            .launch;
        let rule = launch.disconnect?;
        let heard = self.workers.entries.get(&e.worker).map_or(now, |w| w.last_seen);
        let until = heard + crate::cut_off::replace_after(rule, launch.kill_grace_ms);
        (until > now).then(|| until.since(now).0)
    }

    /// A leader that just took over (at `now`) holds every open slot of
    /// framework `fid`'s singleton groups (docs/design.md#issue-45) until
    /// [`crate::cut_off::replace_after`] has passed since then. The store
    /// names no executor, so any such slot may have one running on a
    /// worker this leader has not heard from, cut off; that worker can
    /// have heard from no master after this takeover without this leader
    /// knowing it, so it has stopped that executor by then (docs/machines.md,
    /// "The wait across a failover"). A stored restart wait that ends later
    /// is kept.
    pub(super) fn hold_singletons_after_takeover(&mut self, now: Millis, fid: &FrameworkId) {
        let Some(fw) = self.frameworks.get(fid) else { return };
        let mut holds = Vec::new();
        for (gi, g) in fw.groups.iter().enumerate() {
            let launch = &g.record.spec.launch;
            let Some(rule) = launch.disconnect else { continue };
            let until = now + crate::cut_off::replace_after(rule, launch.kill_grace_ms);
            for (slot, outcome) in g.record.slots.iter().enumerate() {
                if *outcome == SlotOutcome::Pending {
                    holds.push(((fid.clone(), gi, slot as u32), until));
                }
            }
        }
        for (key, until) in holds {
            match self.restart_waits.until(&key) {
                Some(stored) if stored > until => {}
                _ => self.restart_waits.insert_held(key, until),
            }
        }
    }

    /// Framework `fid` is being removed: each of its singleton groups
    /// (docs/design.md#issue-45) whose executor may run on, cut off, is
    /// held for a framework created again under the id, until its
    /// worker must have stopped it: the later of its slots' waits and, for
    /// each live executor, [`crate::cut_off::replace_after`] from when this
    /// leader last heard from its worker (the kill may never reach it).
    /// Call before its executors and waits are forgotten.
    pub(super) fn hold_singletons_of_removed(&mut self, now: Millis, fid: &FrameworkId) {
        let Some(fw) = self.frameworks.get(fid) else { return };
        let mut holds = Vec::new();
        for (gi, g) in fw.groups.iter().enumerate() {
            let launch = &g.record.spec.launch;
            let Some(rule) = launch.disconnect else { continue };
            let after = crate::cut_off::replace_after(rule, launch.kill_grace_ms);
            let waits = (0..g.record.slots.len() as u32)
                .filter_map(|slot| self.restart_waits.until(&(fid.clone(), gi, slot)));
            let live = self
                .executors
                .of_framework(fid)
                .filter(|e| e.group == g.record.spec.group && !e.state.is_terminal())
                .map(|e| self.workers.entries.get(&e.worker).map_or(now, |w| w.last_seen) + after);
            if let Some(until) = waits.chain(live).max().filter(|t| *t > now) {
                holds.push((g.record.spec.group.clone(), until));
            }
        }
        for (group, until) in holds {
            self.singleton_holds.hold(fid.clone(), group, until, now);
        }
    }

    /// Framework `fid` was created (again) at `now`: its singleton groups
    /// held since a framework of that id was removed
    /// ([`Master::hold_singletons_of_removed`]) wait out the hold, and
    /// within [`crate::cut_off::replace_after`] of this leader's takeover
    /// they wait until then (a predecessor may have removed one whose
    /// executor runs on, cut off: [`crate::cut_off::Holds`]).
    pub(super) fn apply_singleton_holds(&mut self, now: Millis, fid: &FrameworkId) {
        let Some(fw) = self.frameworks.get(fid) else { return };
        let groups: Vec<(usize, String, u32, Millis)> = fw
            .groups
            .iter()
            .enumerate()
            .filter_map(|(gi, g)| {
                let launch = &g.record.spec.launch;
                let after = crate::cut_off::replace_after(launch.disconnect?, launch.kill_grace_ms);
                Some((gi, g.record.spec.group.clone(), g.record.spec.slots, after))
            })
            .collect();
        for (gi, group, slots, after) in groups {
            let Some(until) = self.singleton_holds.take(fid, &group, now, after) else { continue };
            for slot in 0..slots {
                self.restart_waits.insert_held((fid.clone(), gi, slot), until);
            }
        }
    }

    /// Every live executor on `worker` is LOST (the worker is dead or was
    /// replaced by a new incarnation); their slots are refilled.
    pub(super) fn lose_executors_of(
        &mut self,
        worker: &WorkerId,
        now: Millis,
        out: &mut Vec<Action>,
    ) {
        self.lose_executors_except(worker, &BTreeSet::new(), now, out);
    }

    /// [`Master::lose_executors_of`], except the executors in `keep`.
    pub(super) fn lose_executors_except(
        &mut self,
        worker: &WorkerId,
        keep: &BTreeSet<ExecutorId>,
        now: Millis,
        out: &mut Vec<Action>,
    ) {
        for id in self.executors.live_ids_on(worker) {
            if !keep.contains(&id) {
                self.update_executor(&id, ExecutorState::Lost, false, now, out);
            }
        }
    }

    /// The executors a new incarnation of `worker` re-adopted (a restart or
    /// upgrade over the same work directory, docs/design.md#duplicates-are-harmless) that the leader
    /// keeps: reported live (`Launching` or `Running`), live here on that
    /// worker, not asked to be killed, of a framework that is still here,
    /// in a slot that still names them. Decided on the registration that
    /// carries the reports, in the same step that loses the rest: a kept
    /// executor's slot never opens, so no replacement is placed; one not
    /// kept is lost and, reported running, killed (`apply_report`).
    pub(super) fn kept_on_new_incarnation(
        &self,
        worker: &WorkerId,
        reports: &[ExecutorReport],
    ) -> BTreeSet<ExecutorId> {
        reports
            .iter()
            .filter(|r| !r.state.is_terminal())
            .filter(|r| {
                self.executors.get(&r.id).is_some_and(|e| {
                    e.worker == *worker
                        && !e.state.is_terminal()
                        && !e.kill_requested
                        && e.framework == r.framework
                        && self.slot_names(e)
                })
            })
            .map(|r| r.id.clone())
            .collect()
    }

    /// Whether `e`'s framework is still here and `e`'s slot names it.
    fn slot_names(&self, e: &ExecutorEntry) -> bool {
        self.frameworks
            .get(&e.framework)
            .and_then(|f| f.groups.iter().find(|g| g.record.spec.group == e.group))
            .and_then(|g| g.current.get(e.slot as usize))
            .is_some_and(|current| current.as_ref() == Some(&e.id))
    }

    /// The resources of executors kept across a new incarnation of
    /// `worker` are held on its new entry.
    pub(super) fn hold_kept(&mut self, worker: &WorkerId, kept: &BTreeSet<ExecutorId>) {
        let held: Vec<Need> =
            kept.iter().filter_map(|id| self.executors.get(id)).map(Need::held_by).collect();
        for need in held {
            self.hold(worker, &need);
        }
    }
}

/// What one executor holds on its worker while it lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Need {
    /// Cores.
    pub(super) cores: u32,
    /// Memory, in MiB.
    pub(super) memory_mb: u64,
    /// Ports (numbered by the worker; the leader counts them).
    pub(super) ports: u32,
    /// Named resources by name and amount (addresses picked by the worker;
    /// the leader counts them).
    pub(super) resources: Vec<(String, u32)>,
    /// The user it runs as, if its group names one: only a worker that
    /// starts executors as that user takes it (not held, a condition).
    pub(super) user: Option<String>,
}

impl Need {
    /// What executor `e` holds on its worker.
    pub(super) fn held_by(e: &ExecutorEntry) -> Need {
        Need {
            cores: e.cores,
            memory_mb: e.memory_mb,
            ports: e.port_count,
            resources: e.resources_held.clone(),
            user: None,
        }
    }

    /// What an executor of group `spec` holds.
    pub(super) fn of(spec: &crate::protocol::GroupSpec) -> Need {
        Need {
            cores: spec.cores,
            memory_mb: spec.memory_mb,
            ports: spec.launch.ports.len() as u32,
            resources: spec.launch.resources.clone(),
            user: spec.launch.user.clone(),
        }
    }

    /// Whether this asks at least as much as `smaller` of everything (so,
    /// if `smaller` fits nowhere, neither does this).
    pub(super) fn covers(&self, smaller: &Need) -> bool {
        self.cores >= smaller.cores
            && self.memory_mb >= smaller.memory_mb
            && self.ports >= smaller.ports
            && smaller
                .resources
                .iter()
                .all(|(name, n)| self.resources.iter().any(|(mine, m)| mine == name && m >= n))
            && (smaller.user.is_none() || smaller.user == self.user)
    }

    /// What a reported executor holds (its ports as its worker numbered
    /// them, at most [`crate::ports::MAX_PORTS_PER_GROUP`]).
    pub(super) fn of_report(r: &ExecutorReport) -> Need {
        Need {
            cores: r.cores,
            memory_mb: r.memory_mb,
            ports: r.ports.len().min(crate::ports::MAX_PORTS_PER_GROUP) as u32,
            resources: reported_resources(r)
                .iter()
                .map(|(name, addresses)| (name.clone(), addresses.len() as u32))
                .collect(),
            // An executor already running is adopted whoever it runs as.
            user: None,
        }
    }
}

/// Whether `need` more fits on `w`. Peer-supplied numbers meet here, so the
/// arithmetic is checked: a sum that overflows does not fit (docs/design.md#peer-input-never-panics).
fn fits_on(w: &super::WorkerEntry, need: &Need) -> bool {
    w.cores_used.checked_add(need.cores).is_some_and(|c| c <= w.cores)
        && w.memory_used_mb.checked_add(need.memory_mb).is_some_and(|m| m <= w.memory_mb)
        && w.ports_used.checked_add(need.ports).is_some_and(|p| p <= w.ports)
        && need.resources.iter().all(|(name, n)| w.resources_free(name) >= *n)
        && need.user.as_ref().is_none_or(|u| w.users.iter().any(|x| x == u))
}

/// The named resources' addresses `r` says its executor holds, within the
/// limits a worker's offer has ([`crate::resources::MAX_RESOURCE_KINDS`]
/// kinds of at most [`crate::resources::MAX_ADDRESSES`]): a peer's report
/// past them is cut, never trusted to grow the leader's accounting.
fn reported_resources(r: &ExecutorReport) -> crate::resources::Assigned {
    r.resources
        .iter()
        .take(crate::resources::MAX_RESOURCE_KINDS)
        .map(|(name, addresses)| {
            (
                name.clone(),
                addresses.iter().take(crate::resources::MAX_ADDRESSES).cloned().collect(),
            )
        })
        .collect()
}

/// Whether `older` was launched before `named`, a later executor of the
/// same slot (by the launch order of their ids; `false` when either id is
/// of another shape).
pub(super) fn replaced_by(older: &ExecutorId, named: &ExecutorId) -> bool {
    matches!((older.launched(), named.launched()), (Some(a), Some(b)) if a < b)
}

//! Plans: where a job's groups would be placed now, and why the slots that
//! would not be placed would not (`Message::PlanRequest`, `regent job
//! plan`, Nomad's `job plan`). Nothing is declared, placed or written: the
//! planner reads the registry and keeps what its own earlier slots would
//! take in an overlay.
//!
//! The rules are the placement's ([`super::executors`]): the candidates
//! are the placeable workers (ALIVE, connected, not cordoned or draining,
//! with room for one more executor), a group's constraints must all hold,
//! and its executors need their cores and memory free. Among the
//! candidates of the value of the `spread` attribute with the fewest of
//! the group's planned slots, `pack` takes the fullest worker and `spread`
//! the emptiest (ties to the lowest id). The master's own `spread` is a
//! round robin in id order, so on a cluster of equal workers a run may pick
//! other workers than the plan of equal standing; the counts and the
//! reasons are the same. A plan is of the cluster now: workers that come
//! or go, and other jobs placed, between the plan and the run change it.
//!
//! Cost: per group, one pass over the placeable workers and a logarithmic
//! step per slot (`O(W log W + S log W)`), on the master's loop; the reply
//! lists at most [`crate::limits::MAX_PLAN_PLACEMENTS`] placements.
//!
//! Tests: core/tests/constraints.rs, core/tests/run_as_placement.rs,
//! core/tests/named_resources.rs (each plan reason).

use super::executors::Executors;
use super::workers::Registry;
use super::Master;
use crate::api::{self, WaitReason};
use crate::ids::WorkerId;
use crate::limits::{group_spec_problem, GroupKey, MAX_EXECUTORS_PER_WORKER, MAX_PLAN_PLACEMENTS};
use crate::policy::{spread_value, Constraint, Placement};
use crate::protocol::{GroupPlan, GroupSpec};
use crate::states::WorkerState;
use crate::store::Maintenance;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

/// What the plan's own slots hold on each worker.
pub(super) type Overlay<'a> = FxHashMap<&'a WorkerId, Held>;

/// What the plan's own slots hold on one worker.
#[derive(Clone, Debug, Default)]
pub(super) struct Held {
    cores: u32,
    memory_mb: u64,
    executors: usize,
    ports: u32,
    /// Addresses by resource name.
    resources: Vec<(String, u32)>,
}

/// A candidate's order within its spread value: the placement key, then id.
type Key<'a> = (u32, u64, &'a WorkerId);

/// What `w` has free once the plan's own slots there are counted.
fn free(overlay: &Overlay<'_>, w: &super::WorkerEntry) -> (u32, u64) {
    let (c, m) = overlay.get(&w.id).map_or((0, 0), |h| (h.cores, h.memory_mb));
    let cores = w.cores.saturating_sub(w.cores_used).saturating_sub(c);
    let memory = w.memory_mb.saturating_sub(w.memory_used_mb).saturating_sub(m);
    (cores, memory)
}

/// How many addresses of resource `name` `w` has free once the plan's own
/// slots there are counted.
fn free_resource(overlay: &Overlay<'_>, w: &super::WorkerEntry, name: &str) -> u32 {
    let planned = overlay
        .get(&w.id)
        .and_then(|h| h.resources.iter().find(|(n, _)| n == name))
        .map_or(0, |(_, k)| *k);
    w.resources_free(name).saturating_sub(planned)
}

/// Whether `w` has every resource `g` asks for free, the plan counted.
fn resources_fit(overlay: &Overlay<'_>, w: &super::WorkerEntry, g: &GroupSpec) -> bool {
    g.launch.resources.iter().all(|(name, n)| free_resource(overlay, w, name) >= *n)
}

/// Whether `w` starts executors as the user `g` names (any, if it names
/// none).
fn runs_as(w: &super::WorkerEntry, g: &GroupSpec) -> bool {
    g.launch.user.as_ref().is_none_or(|u| w.users.iter().any(|x| x == u))
}

/// How many ports `w` has free once the plan's own slots there are counted.
fn free_ports(overlay: &Overlay<'_>, w: &super::WorkerEntry) -> u32 {
    let p = overlay.get(&w.id).map_or(0, |h| h.ports);
    w.ports.saturating_sub(w.ports_used).saturating_sub(p)
}

/// What a placement decision reads, and all it reads: the worker registry
/// (its placeable index and entries), the executors (how many live on each
/// worker) and the master's placement policy. The plan and the batch
/// placement borrow this, not the master.
#[derive(Clone, Copy)]
pub(super) struct Candidates<'a> {
    /// The worker registry.
    pub(super) workers: &'a Registry,
    /// The executors.
    pub(super) executors: &'a Executors,
    /// The master's placement policy (a group may name its own).
    pub(super) placement: Placement,
}

impl Master {
    /// The registries placement reads, borrowed.
    pub(super) fn candidates(&self) -> Candidates<'_> {
        Candidates {
            workers: &self.workers,
            executors: &self.executors,
            placement: self.config.placement,
        }
    }
}

impl<'a> Candidates<'a> {
    /// Where `groups` would be placed now, one [`GroupPlan`] per group in
    /// order (later groups see what earlier ones would take).
    pub(super) fn plan(&self, groups: &[GroupSpec]) -> Vec<GroupPlan> {
        self.plan_holding(groups).0
    }

    /// [`Candidates::plan`], and what the plan's own slots would hold on
    /// each worker: (worker, cores, memory in MiB).
    pub(super) fn plan_holding(
        &self,
        groups: &[GroupSpec],
    ) -> (Vec<GroupPlan>, Vec<(WorkerId, crate::preemption::Amounts)>) {
        let mut overlay = Overlay::default();
        let mut listed = 0usize;
        let plans = groups.iter().map(|g| self.plan_group(g, &mut overlay, &mut listed)).collect();
        let held = overlay
            .iter()
            .map(|(id, h)| {
                let named = h.resources.iter().map(|(n, k)| (n.clone(), u64::from(*k))).collect();
                let amounts = crate::preemption::Amounts {
                    cores: u64::from(h.cores),
                    memory_mb: h.memory_mb,
                    ports: u64::from(h.ports),
                    named,
                };
                ((*id).clone(), amounts)
            })
            .collect();
        (plans, held)
    }

    fn plan_group(
        &self,
        g: &GroupSpec,
        overlay: &mut Overlay<'a>,
        listed: &mut usize,
    ) -> GroupPlan {
        let mut plan = GroupPlan {
            group: g.group.clone(),
            slots: g.slots,
            placed: Vec::new(),
            placed_omitted: 0,
            unplaced: 0,
            reason: None,
            reasons: Vec::new(),
            victims: Vec::new(),
            preemption: None,
        };
        if let Some(p) = group_spec_problem(g, GroupKey::wire_name) {
            plan.unplaced = g.slots;
            plan.reasons = vec![WaitReason::Refused { problem: p.message(&g.group) }];
            plan.reason = plan.reasons.first().map(ToString::to_string);
            return plan;
        }
        let mut placed = 0u32;
        let unplaced = self.assign(g, &BTreeMap::new(), overlay, 0..g.slots, |slot, id| {
            placed += 1;
            if *listed < MAX_PLAN_PLACEMENTS {
                plan.placed.push((slot, id.clone()));
                *listed += 1;
            } else {
                plan.placed_omitted += 1;
            }
        });
        if let Some(first) = unplaced {
            plan.unplaced = g.slots - first;
            plan.reasons = self.wait_reasons(g, overlay);
            plan.reason = plan.reasons.first().map(ToString::to_string);
        }
        debug_assert_eq!(placed + plan.unplaced, g.slots);
        plan
    }

    /// Assigns `slots` of group `g` to workers, in order, by the group's
    /// policy (see the module documentation), holding each assignment in
    /// `overlay` and telling `chosen`; `live` counts the group's live
    /// executors per value of its `spread` attribute. The first slot that
    /// found no worker, if one did not (the rest ask the same and are not
    /// tried). One pass over the placeable workers, then a logarithmic
    /// step per slot.
    pub(super) fn assign(
        &self,
        g: &GroupSpec,
        live: &BTreeMap<&str, u32>,
        overlay: &mut Overlay<'a>,
        slots: impl IntoIterator<Item = u32>,
        mut chosen: impl FnMut(u32, &'a WorkerId),
    ) -> Option<u32> {
        let policy = &g.policy;
        let ports = g.launch.ports.len() as u32;
        let placement = policy.placement.unwrap_or(self.placement);
        let key = |(cores, memory): (u32, u64), id: &'a WorkerId| -> Key<'a> {
            match placement {
                Placement::Pack => (cores, memory, id),
                Placement::Spread => (u32::MAX - cores, u64::MAX - memory, id),
            }
        };
        // Candidates by spread value (one value, "", without `spread`).
        let mut by_value: BTreeMap<&'a str, BTreeSet<Key<'a>>> = BTreeMap::new();
        for (_, _, id) in &self.workers.placeable {
            let Some(w) = self.workers.entries.get(id) else { continue };
            if !policy.constraints.iter().all(|c| c.allows(&w.attributes)) || !runs_as(w, g) {
                continue;
            }
            let f = free(overlay, w);
            if f.0 < g.cores
                || f.1 < g.memory_mb
                || free_ports(overlay, w) < ports
                || !resources_fit(overlay, w, g)
            {
                continue;
            }
            let value = policy.spread.as_deref().map_or("", |a| spread_value(&w.attributes, a));
            by_value.entry(value).or_default().insert(key(f, &w.id));
        }
        // Values by how many of the group's executors they hold, then by
        // their best candidate: the first is the global best, as a scan of
        // every candidate would find it.
        let mut order: BTreeSet<(u32, Key<'a>, &'a str)> = by_value
            .iter()
            .filter_map(|(v, set)| set.first().map(|k| (live.get(v).copied().unwrap_or(0), *k, *v)))
            .collect();
        for slot in slots {
            let Some((count, _, value)) = order.pop_first() else { return Some(slot) };
            let set = by_value.get_mut(value).expect("every ordered value has candidates");
            let (_, _, id) = set.pop_first().expect("an ordered value has a candidate");
            let held = overlay.entry(id).or_default();
            held.cores = held.cores.saturating_add(g.cores);
            held.memory_mb = held.memory_mb.saturating_add(g.memory_mb);
            held.executors += 1;
            held.ports = held.ports.saturating_add(ports);
            for (name, n) in &g.launch.resources {
                match held.resources.iter_mut().find(|(h, _)| h == name) {
                    Some((_, k)) => *k = k.saturating_add(*n),
                    None => held.resources.push((name.clone(), *n)),
                }
            }
            let room = self.executors.live_on(id) + held.executors < MAX_EXECUTORS_PER_WORKER;
            chosen(slot, id);
            let w = &self.workers.entries[id];
            let f = free(overlay, w);
            if room
                && f.0 >= g.cores
                && f.1 >= g.memory_mb
                && free_ports(overlay, w) >= ports
                && resources_fit(overlay, w, g)
            {
                set.insert(key(f, id));
            }
            if let Some(best) = set.first() {
                order.insert((count + 1, *best, value));
            }
        }
        None
    }

    /// Every reason no candidate is left for `g`'s next slot, ranked (see
    /// [`rank`]): no worker at all, the constraints no worker meets, the
    /// user no matching worker runs as, and over the matching workers, per
    /// dimension (cores, memory, ports, each named resource) what one
    /// executor asks for against the most free, the matching workers full
    /// of executors, cordoned or draining; none when a matching worker
    /// takes one more slot now. One pass over the registered workers.
    pub(super) fn wait_reasons(&self, g: &GroupSpec, overlay: &Overlay<'_>) -> Vec<WaitReason> {
        let constraints = &g.policy.constraints;
        let mut tally = Tally::new(g);
        // (total, free) per dimension of one worker, reused.
        let mut dims: Vec<(u64, u64)> = Vec::with_capacity(3 + g.launch.resources.len());
        for w in self.workers.entries.values() {
            if w.state != WorkerState::Alive || w.conn.is_none() {
                continue;
            }
            let matches = constraints.iter().all(|c| c.allows(&w.attributes));
            match w.maintenance {
                Some(Maintenance::Draining { .. }) => {
                    tally.draining += u32::from(matches && runs_as(w, g));
                    continue;
                }
                Some(Maintenance::Cordoned | Maintenance::Drained) => {
                    tally.cordoned += u32::from(matches && runs_as(w, g));
                    continue;
                }
                None => {}
            }
            tally.alive += 1;
            for (met, c) in tally.met.iter_mut().zip(constraints) {
                *met |= c.allows(&w.attributes);
            }
            if !matches {
                continue;
            }
            tally.constraint_matching += 1;
            if !runs_as(w, g) {
                continue;
            }
            tally.runs_as += 1;
            let held = overlay.get(&w.id).map_or(0, |h| h.executors);
            if self.executors.live_on(&w.id) + held >= MAX_EXECUTORS_PER_WORKER {
                tally.full += 1;
                continue;
            }
            let (cores, memory) = free(overlay, w);
            dims.clear();
            dims.extend([
                (u64::from(w.cores), u64::from(cores)),
                (w.memory_mb, memory),
                (u64::from(w.ports), u64::from(free_ports(overlay, w))),
            ]);
            for (name, _) in &g.launch.resources {
                let offered =
                    w.resources.as_ref().map_or(0, |r| crate::resources::offered(&r.offered, name));
                dims.push((u64::from(offered), u64::from(free_resource(overlay, w, name))));
            }
            tally.add(&w.id, &dims);
        }
        if tally.fits > 0 {
            // A worker takes one more slot now: no reason to give.
            return Vec::new();
        }
        tally.reasons(self.workers.entries.len(), constraints)
    }
}

/// How far a reason is from fitting when it never will as the cluster
/// stands (no worker, a constraint, a user, an executor larger than any
/// worker): above any shortfall.
const NEVER: u32 = u32::MAX;

/// A reason with its rank: how many workers it excludes, and how far from
/// fitting it is (a shortfall's missing part per thousand of the ask).
type Ranked = (u32, u32, WaitReason);

/// The planner's rank: the reasons that exclude the most workers first;
/// among equals, the farthest from fitting first (a reason that never
/// fits as the cluster stands, then the largest shortfall relative to the
/// ask); among equals, the order found (no worker, constraints, user,
/// executors per worker, cores, memory, ports, named resources as the
/// group lists them, cordoned, draining).
fn rank(mut reasons: Vec<Ranked>) -> Vec<WaitReason> {
    reasons
        .sort_by_key(|(excludes, gap, _)| (std::cmp::Reverse(*excludes), std::cmp::Reverse(*gap)));
    reasons.into_iter().map(|(_, _, r)| r).collect()
}

/// What one pass over the workers found for a group (see
/// [`Candidates::wait_reasons`]).
struct Tally<'a> {
    /// Per dimension: its name and what one executor asks for.
    asks: Vec<(String, u64)>,
    /// The user the group runs as.
    user: Option<String>,
    /// ALIVE, connected workers neither cordoned nor draining.
    alive: u32,
    /// Per constraint: whether one of those meets it.
    met: Vec<bool>,
    /// Those meeting every constraint.
    constraint_matching: u32,
    /// Of those, the ones starting executors as the group's user.
    runs_as: u32,
    /// Of those, the ones running the most executors a worker takes.
    full: u32,
    /// The rest: the matching workers the dimensions are counted over.
    matching: u32,
    /// Workers meeting the constraints and user that are cordoned (or
    /// drained).
    cordoned: u32,
    /// Those that are draining.
    draining: u32,
    /// Per dimension: the most a matching worker has.
    largest: Vec<u64>,
    /// Per dimension: the most free on a matching worker, and where.
    most_free: Vec<Option<(u64, &'a WorkerId)>>,
    /// Per dimension: how many matching workers have less free than asked.
    short: Vec<u32>,
    /// Matching workers with every dimension free (none, when the plan's
    /// placement found no worker).
    fits: u32,
}

impl<'a> Tally<'a> {
    fn new(g: &GroupSpec) -> Self {
        let mut asks = vec![
            (api::CORES.to_owned(), u64::from(g.cores)),
            (api::MEMORY.to_owned(), g.memory_mb),
            (api::PORTS.to_owned(), g.launch.ports.len() as u64),
        ];
        asks.extend(g.launch.resources.iter().map(|(n, k)| (n.clone(), u64::from(*k))));
        let n = asks.len();
        Tally {
            asks,
            user: g.launch.user.clone(),
            alive: 0,
            met: vec![false; g.policy.constraints.len()],
            constraint_matching: 0,
            runs_as: 0,
            full: 0,
            matching: 0,
            cordoned: 0,
            draining: 0,
            largest: vec![0; n],
            most_free: vec![None; n],
            short: vec![0; n],
            fits: 0,
        }
    }

    /// Counts a matching worker with `dims` (total, free) per dimension.
    fn add(&mut self, id: &'a WorkerId, dims: &[(u64, u64)]) {
        self.matching += 1;
        let mut fits = true;
        for (d, &(total, free)) in dims.iter().enumerate() {
            self.largest[d] = self.largest[d].max(total);
            // The most free, the lowest id among equals.
            if self.most_free[d].is_none_or(|(f, at)| free > f || (free == f && id < at)) {
                self.most_free[d] = Some((free, id));
            }
            let short = free < self.asks[d].1;
            self.short[d] += u32::from(short);
            fits &= !short;
        }
        self.fits += u32::from(fits);
    }

    /// The reasons, ranked; `registered` counts every registered worker.
    fn reasons(&self, registered: usize, constraints: &[Constraint]) -> Vec<WaitReason> {
        let mut out: Vec<Ranked> = Vec::new();
        if self.alive == 0 {
            let registered = u32::try_from(registered).unwrap_or(u32::MAX);
            out.push((u32::MAX, NEVER, WaitReason::NoWorkers { registered }));
        } else if self.constraint_matching == 0 {
            let unmet: Vec<String> = constraints
                .iter()
                .zip(&self.met)
                .filter(|(_, met)| !**met)
                .map(|(c, _)| c.to_string())
                .collect();
            if unmet.is_empty() {
                // Each is met by some worker, all of them by none.
                let all: Vec<String> = constraints.iter().map(ToString::to_string).collect();
                let constraint = format!("{} at once", all.join(" and "));
                out.push((self.alive, NEVER, WaitReason::NoMatchingWorker { constraint }));
            }
            for constraint in unmet {
                out.push((self.alive, NEVER, WaitReason::NoMatchingWorker { constraint }));
            }
        } else if self.runs_as == 0 {
            let user = self.user.clone().unwrap_or_default();
            out.push((self.constraint_matching, NEVER, WaitReason::UserNotOffered { user }));
        } else {
            if self.full > 0 {
                let limit = u32::try_from(MAX_EXECUTORS_PER_WORKER).unwrap_or(u32::MAX);
                out.push((
                    self.full,
                    NEVER,
                    WaitReason::ExecutorsPerWorker { workers: self.full, limit },
                ));
            }
            self.dimension_reasons(&mut out);
        }
        if self.cordoned > 0 {
            out.push((self.cordoned, 0, WaitReason::Cordoned { workers: self.cordoned }));
        }
        if self.draining > 0 {
            out.push((self.draining, 0, WaitReason::Draining { workers: self.draining }));
        }
        rank(out)
    }

    /// Per dimension over the matching workers: an ask larger than any
    /// has, or more than any has free; else, if some lack one dimension
    /// and others another, that none has all at once.
    fn dimension_reasons(&self, out: &mut Vec<Ranked>) {
        if self.matching == 0 {
            return;
        }
        let mut each = false;
        for (d, (dimension, needed)) in self.asks.iter().enumerate() {
            let needed = *needed;
            let (most_free, worker) = self.most_free[d].map_or((0, None), |(f, w)| (f, Some(w)));
            if needed == 0 || most_free >= needed {
                continue;
            }
            each = true;
            let dimension = dimension.clone();
            if needed > self.largest[d] {
                let largest = self.largest[d];
                out.push((
                    self.matching,
                    NEVER,
                    WaitReason::TooLarge { dimension, needed, largest },
                ));
                continue;
            }
            let gap =
                u32::try_from((needed - most_free).saturating_mul(1000) / needed).unwrap_or(1000);
            let reason = if dimension == api::PORTS {
                WaitReason::PortsExhausted {
                    needed: u32::try_from(needed).unwrap_or(u32::MAX),
                    most_free: u32::try_from(most_free).unwrap_or(u32::MAX),
                }
            } else {
                WaitReason::Shortfall { dimension, needed, most_free, worker: worker.cloned() }
            };
            out.push((self.short[d], gap, reason));
        }
        if !each {
            let dimensions: Vec<String> = self
                .asks
                .iter()
                .zip(&self.short)
                .filter(|(_, short)| **short > 0)
                .map(|((d, _), _)| d.clone())
                .collect();
            if !dimensions.is_empty() {
                let workers = self.matching;
                out.push((workers, 0, WaitReason::NoWorkerFitsAll { dimensions, workers }));
            }
        }
    }
}

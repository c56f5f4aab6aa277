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
use crate::ids::WorkerId;
use crate::limits::{group_spec_problem, GroupKey, MAX_EXECUTORS_PER_WORKER, MAX_PLAN_PLACEMENTS};
use crate::policy::{spread_value, ConstraintOp, Placement};
use crate::protocol::{GroupPlan, GroupSpec};
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
        let mut overlay = Overlay::default();
        let mut listed = 0usize;
        groups.iter().map(|g| self.plan_group(g, &mut overlay, &mut listed)).collect()
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
        };
        if let Some(p) = group_spec_problem(g, GroupKey::wire_name) {
            plan.unplaced = g.slots;
            plan.reason = Some(format!("the master would refuse it: {}", p.message(&g.group)));
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
            plan.reason = Some(self.why_not_placed(g, overlay));
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

    /// Why no candidate is left for `g`'s next slot, in the words an
    /// operator acts on: no worker at all, a constraint no worker meets,
    /// an executor larger than every matching worker, or not enough free.
    fn why_not_placed(&self, g: &GroupSpec, overlay: &Overlay<'_>) -> String {
        let placeable: Vec<&super::WorkerEntry> = self
            .workers
            .placeable
            .iter()
            .filter_map(|(_, _, id)| self.workers.entries.get(id))
            .collect();
        if placeable.is_empty() {
            return match self.workers.entries.len() {
                0 => "no worker is registered".to_owned(),
                n => format!(
                    "no ALIVE worker takes executors ({n} registered: dead, unknown, cordoned, draining or full)"
                ),
            };
        }
        let constraints = &g.policy.constraints;
        for c in constraints {
            if !placeable.iter().any(|w| c.allows(&w.attributes)) {
                return match c.op {
                    ConstraintOp::NotEquals(_) | ConstraintOp::NotIn(_) => {
                        format!("no ALIVE worker meets {c}")
                    }
                    _ => format!("no ALIVE worker has attribute {c}"),
                };
            }
        }
        let matching: Vec<&super::WorkerEntry> = placeable
            .into_iter()
            .filter(|w| constraints.iter().all(|c| c.allows(&w.attributes)))
            .collect();
        if matching.is_empty() {
            let all: Vec<String> = constraints.iter().map(ToString::to_string).collect();
            return format!("no ALIVE worker meets all of {} at once", all.join(", "));
        }
        if let Some(user) = &g.launch.user {
            if !matching.iter().any(|w| runs_as(w, g)) {
                return format!(
                    "runs as user {user}; no ALIVE {}worker starts executors as {user} (regent worker --allowed-users {user}, as root)",
                    if constraints.is_empty() { "" } else { "matching " }
                );
            }
        }
        let matching: Vec<&super::WorkerEntry> =
            matching.into_iter().filter(|w| runs_as(w, g)).collect();
        let which = if constraints.is_empty() { "worker" } else { "matching worker" };
        let largest_cores = matching.iter().map(|w| w.cores).max().unwrap_or(0);
        if g.cores > largest_cores {
            return format!("needs {} cores, the largest {which} has {largest_cores}", g.cores);
        }
        let largest_memory = matching.iter().map(|w| w.memory_mb).max().unwrap_or(0);
        if g.memory_mb > largest_memory {
            return format!(
                "needs {} MiB, the largest {which} has {largest_memory} MiB",
                g.memory_mb
            );
        }
        // The matching workers with the cores and memory free.
        let fitting: Vec<&&super::WorkerEntry> = matching
            .iter()
            .filter(|w| {
                let (c, m) = free(overlay, w);
                c >= g.cores && m >= g.memory_mb
            })
            .collect();
        let ports = g.launch.ports.len() as u32;
        if ports > 0 {
            let most = matching.iter().map(|w| w.ports).max().unwrap_or(0);
            if ports > most {
                return format!("needs {ports} ports, the most a {which} offers is {most} (regent worker --ports)");
            }
            if !fitting.is_empty() && fitting.iter().all(|w| free_ports(overlay, w) < ports) {
                let (most_free, on) = fitting
                    .iter()
                    .map(|w| (free_ports(overlay, w), &w.id))
                    .max()
                    .expect("not empty");
                return format!("needs {ports} ports, the most free on a {which} with room is {most_free} (on {on})");
            }
        }
        for (name, n) in &g.launch.resources {
            let most = matching
                .iter()
                .map(|w| {
                    w.resources.as_ref().map_or(0, |r| crate::resources::offered(&r.offered, name))
                })
                .max()
                .unwrap_or(0);
            if most == 0 {
                return format!("needs {n} {name}, no ALIVE {which} offers {name} (regent worker --resource {name}=...)");
            }
            if *n > most {
                return format!("needs {n} {name}, the most a {which} offers is {most}");
            }
            if !fitting.is_empty() && fitting.iter().all(|w| free_resource(overlay, w, name) < *n) {
                let (most_free, on) = fitting
                    .iter()
                    .map(|w| (free_resource(overlay, w, name), &w.id))
                    .max()
                    .expect("not empty");
                return format!("needs {n} {name}, the most free on a {which} with room is {most_free} (on {on})");
            }
        }
        let free = |w: &super::WorkerEntry| free(overlay, w);
        let most_cores = matching.iter().map(|w| (free(w), &w.id)).max_by_key(|((c, _), _)| *c);
        let most_memory = matching.iter().map(|w| (free(w), &w.id)).max_by_key(|((_, m), _)| *m);
        match (most_cores, most_memory) {
            (Some(((c, cm), cid)), Some(((mc, m), mid))) if g.cores > c => format!(
                "needs {} cores, the largest free is {c} (on {cid}, with {cm} MiB; the most free memory is {m} MiB on {mid}, with {mc} cores)",
                g.cores
            ),
            (Some(((c, cm), cid)), Some(((mc, m), mid))) => format!(
                "needs {} cores and {} MiB on one worker; none has both free (most free cores: {c} on {cid}, with {cm} MiB; most free memory: {m} MiB on {mid}, with {mc} cores)",
                g.cores, g.memory_mb
            ),
            _ => "no matching worker has room".to_owned(),
        }
    }
}

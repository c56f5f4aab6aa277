//! Capacity that frees is offered to waiting slots: after every step, an
//! acting leader (ALIVE, not recovering, its process up and unpaused)
//! leaves no waiting slot unplaced that fits the free cores and memory of
//! one of its ALIVE, uncordoned workers with a durable record and a
//! connection for longer than `BOUND` (2 s). Whatever frees the capacity (an
//! executor's end, a teardown, a scale-down, a worker joining), what waits
//! is placed (docs/design.md#issue-41's eighth scenario: capacity a teardown freed was
//! never offered to the framework waiting for it).
//!
//! Not literally the same step: a leader rightly waits for a store write
//! before it places (a slot whose executor was written off is placed once
//! that end is durable, a worker once its record is), so the invariant
//! allows a slot to wait `BOUND` (2 s), a few store round trips, while the
//! same acting leader could place it all along. With slow store writes
//! (`--slow-store`, `--zk-latency`) it is not checked.
//!
//! Exempt, because their placement depends on more than cores and memory
//! or waits on purpose: groups with constraints, a spread, ports or named
//! resources; a group under a rollout; slots beyond what a durable record
//! holds ([`regent_core::master::GroupState::placeable_slots`]); slots
//! waiting out a restart backoff (a durable `not_before_ms`); frameworks
//! with no live subscription; singleton groups (a disconnect rule: their
//! slots wait out a lost worker's `stop_after` on purpose, after a loss or
//! a takeover, docs/design.md#issue-45).

use crate::sim::engine::{Node, World};
use regent_core::master::{Status, WorkerState};
use regent_core::store::SlotOutcome;
use regent_core::{FrameworkId, Millis};

/// How long a slot may wait while it fits a worker's free capacity.
pub(crate) const BOUND: Millis = Millis(2_000);

/// A waiting slot: (leader, its process generation, framework, group, slot).
pub(crate) type Waiting = (usize, u64, FrameworkId, String, usize);

pub(crate) fn check(w: &mut World) -> Result<(), String> {
    if w.slow_dependencies() {
        return Ok(());
    }
    let now = w.now;
    let fitting = fitting(w);
    let mut since = std::mem::take(&mut w.obs.fitting_since);
    since.retain(|k, _| fitting.iter().any(|(f, _)| f == k));
    for (key, detail) in fitting {
        let t = *since.entry(key).or_insert(now);
        if now.since(t) > BOUND {
            return Err(format!("{detail}, since {t}"));
        }
    }
    w.obs.fitting_since = since;
    Ok(())
}

/// The waiting slots that fit a free worker at the acting leader now.
fn fitting(w: &World) -> Vec<(Waiting, String)> {
    let mut out = Vec::new();
    let Some(l) = w.acting_leader() else { return out };
    let mp = &w.masters[l];
    let master = mp.master();
    if mp.p.paused(w.now) || master.status() != Status::Alive || master.recovering() {
        return out;
    }
    let free: Vec<_> = master
        .workers()
        .into_iter()
        .filter(|e| {
            e.state == WorkerState::Alive
                && e.maintenance.is_none()
                && e.durable
                && e.conn.is_some_and(|c| {
                    w.conns.get(&c).is_some_and(|c| {
                        matches!(c.client, Node::Worker(_)) && c.open && !c.broken && !c.mclosed
                    })
                })
        })
        .map(|e| {
            (
                e.id.clone(),
                e.cores - e.cores_used.min(e.cores),
                e.memory_mb.saturating_sub(e.memory_used_mb),
            )
        })
        .collect();
    if free.is_empty() {
        return out;
    }
    for f in master.frameworks() {
        if f.conn.is_none() {
            continue;
        }
        for g in &f.groups {
            let spec = &g.record.spec;
            let policy = &spec.policy;
            if !policy.constraints.is_empty()
                || policy.spread.is_some()
                || !spec.launch.ports.is_empty()
                || !spec.launch.resources.is_empty()
                || spec.launch.disconnect.is_some()
                || g.rolling
                || g.record.active_deployment().is_some()
                || !g.declared_durably()
            {
                continue;
            }
            for slot in 0..g.placeable_slots() as usize {
                let waiting = g.record.slots.get(slot) == Some(&SlotOutcome::Pending)
                    && g.current.get(slot).is_some_and(Option::is_none)
                    && g.record.restarts.get(&(slot as u32)).is_none_or(|r| r.not_before_ms == 0);
                if !waiting {
                    continue;
                }
                if let Some((id, cores, mem)) =
                    free.iter().find(|(_, c, m)| *c >= spec.cores && *m >= spec.memory_mb)
                {
                    let detail = format!(
                        "m{l} leaves slot {}#{slot} of {} waiting ({} cores, {} MiB) while ALIVE worker {id} has {cores} cores and {mem} MiB free",
                        spec.group, f.id, spec.cores, spec.memory_mb
                    );
                    out.push(((l, mp.p.gen, f.id.clone(), spec.group.clone(), slot), detail));
                }
            }
        }
    }
    out
}

//! The leader's executors and the index kept about them: which executors
//! are live (not terminal) on each worker.
//!
//! Every insert, state change and removal goes through [`Executors`], so
//! the index is exact by construction; the rest of the master reads the
//! entries and changes only their unindexed flags ([`ExecutorMut`]).
//! Debug builds check the index after every step ([`Executors::check`]).
//!
//! Tests: every step's debug check (`Executors::check`, so
//! every test of the machine), core/tests/one_executor_per_slot.rs.

use super::ExecutorEntry;
use crate::ids::{ExecutorId, FrameworkId, WorkerId};
use crate::limits::MAX_EXECUTORS_PER_WORKER;
use crate::protocol::ExecutorState;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::ops::{Deref, Index};

/// The executors this leader knows of, by id, and the live ones of each
/// worker.
#[derive(Debug, Default)]
pub(in crate::master) struct Executors {
    entries: BTreeMap<ExecutorId, ExecutorEntry>,
    /// The live (not terminal) executors of each worker, unordered; no
    /// empty list is kept.
    live_by_worker: FxHashMap<WorkerId, Vec<ExecutorId>>,
    /// How many entries are in each state, by [`ExecutorState::kind`]
    /// (the `/metrics` gauges read it, not the entries).
    by_state: [usize; 6],
}

/// What a change did to the placement candidates: the worker whose count
/// of live executors crossed [`MAX_EXECUTORS_PER_WORKER`], if one did. It
/// is a candidate no more, or again (the worker registry's index, which
/// the master re-decides: `Master::reindex_worker`).
#[must_use = "a worker whose live executors crossed the limit must be reindexed"]
#[derive(Debug)]
pub(in crate::master) struct Crossed(Option<WorkerId>);

impl Crossed {
    /// The worker to reindex, if any.
    pub(in crate::master) fn worker(self) -> Option<WorkerId> {
        self.0
    }
}

/// An executor whose unindexed flags may change. Its id, worker and state
/// are indexed and change only through [`Executors`]; the rest is read
/// through `Deref`.
#[derive(Debug)]
pub(in crate::master) struct ExecutorMut<'a>(&'a mut ExecutorEntry);

impl Deref for ExecutorMut<'_> {
    type Target = ExecutorEntry;

    fn deref(&self) -> &ExecutorEntry {
        self.0
    }
}

impl ExecutorMut<'_> {
    /// The framework asked for it to be killed
    /// ([`ExecutorEntry::kill_requested`]).
    pub(in crate::master) fn request_kill(&mut self) {
        self.0.kill_requested = true;
    }

    /// A kill or stop was sent to it, owed until its end is reported
    /// ([`ExecutorEntry::owed`]).
    pub(in crate::master) fn owe(&mut self, owed: crate::master::Owed) {
        self.0.owed = Some(owed);
    }

    /// An operator asked it to stop ([`ExecutorEntry::operator_stop`]).
    pub(in crate::master) fn stop_by_operator(&mut self) {
        self.0.operator_stop = true;
    }

    /// It was seen RUNNING at `now`, unless it was earlier
    /// ([`ExecutorEntry::running_since`]).
    pub(in crate::master) fn mark_running(&mut self, now: crate::time::Millis) {
        self.0.running_since.get_or_insert(now);
    }

    /// Its worker numbered its ports ([`ExecutorEntry::ports`]; a report
    /// carries at most [`crate::ports::MAX_PORTS_PER_GROUP`]).
    pub(in crate::master) fn set_ports(&mut self, mut ports: Vec<(String, u16)>) {
        ports.truncate(crate::ports::MAX_PORTS_PER_GROUP);
        self.0.ports = ports;
    }

    /// Its worker gave it named resources' addresses
    /// ([`ExecutorEntry::resources`]).
    pub(in crate::master) fn set_resources(&mut self, resources: crate::resources::Assigned) {
        self.0.resources = resources;
    }

    /// Its worker reported its health ([`ExecutorEntry::health`]).
    pub(in crate::master) fn set_health(&mut self, health: crate::health::HealthSeen) {
        self.0.health = Some(health);
    }

    /// Its worker reported how long it ran ([`ExecutorEntry::ran_ms`]).
    pub(in crate::master) fn set_ran(&mut self, ran_ms: Option<u64>) {
        self.0.ran_ms = ran_ms.or(self.0.ran_ms);
    }

    /// Its terminal state is durable ([`ExecutorEntry::recorded`]).
    pub(in crate::master) fn mark_recorded(&mut self) {
        self.0.recorded = true;
    }
}

impl Index<&ExecutorId> for Executors {
    type Output = ExecutorEntry;

    fn index(&self, id: &ExecutorId) -> &ExecutorEntry {
        &self.entries[id]
    }
}

impl Executors {
    /// Executor `id`.
    pub(in crate::master) fn get(&self, id: &ExecutorId) -> Option<&ExecutorEntry> {
        self.entries.get(id)
    }

    /// Executor `id`, to change its unindexed flags.
    pub(in crate::master) fn get_mut(&mut self, id: &ExecutorId) -> Option<ExecutorMut<'_>> {
        self.entries.get_mut(id).map(ExecutorMut)
    }

    /// Every executor, in id order.
    pub(in crate::master) fn iter(&self) -> impl Iterator<Item = &ExecutorEntry> {
        self.entries.values()
    }

    /// How many executors there are (only the debug index check asks).
    #[cfg(debug_assertions)]
    pub(in crate::master) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The executors of framework `id`, in id order. Every executor's id
    /// starts with its framework's id and a `/` (launched ones are named so,
    /// and a reported one is adopted only when its id parses so), so this
    /// is a range of the ordered map, not a walk over every executor.
    pub(in crate::master) fn of_framework<'a>(
        &'a self,
        framework: &'a FrameworkId,
    ) -> impl Iterator<Item = &'a ExecutorEntry> + 'a {
        let prefix = format!("{framework}/");
        self.entries
            .range(ExecutorId(prefix.clone())..)
            .take_while(move |(id, _)| id.0.starts_with(&prefix))
            .map(|(_, e)| e)
            .filter(move |e| &e.framework == framework)
    }

    /// How many executors are in each state, by [`ExecutorState::kind`].
    pub(in crate::master) fn counts(&self) -> [usize; 6] {
        self.by_state
    }

    /// How many live (not terminal) executors `worker` has.
    pub(in crate::master) fn live_on(&self, worker: &WorkerId) -> usize {
        self.live_by_worker.get(worker).map_or(0, Vec::len)
    }

    /// The workers with live executors, in no order.
    pub(in crate::master) fn workers_with_live(&self) -> impl Iterator<Item = &WorkerId> {
        self.live_by_worker.iter().filter(|(_, v)| !v.is_empty()).map(|(w, _)| w)
    }

    /// The live executors of `worker`, in id order.
    pub(in crate::master) fn live_ids_on(&self, worker: &WorkerId) -> Vec<ExecutorId> {
        let mut v = self.live_by_worker.get(worker).cloned().unwrap_or_default();
        v.sort();
        v
    }

    /// Adds an executor (replacing none: the caller checked).
    pub(in crate::master) fn insert(&mut self, e: ExecutorEntry) -> Crossed {
        debug_assert!(!self.entries.contains_key(&e.id), "executor {} inserted twice", e.id);
        let (worker, id, live) = (e.worker.clone(), e.id.clone(), !e.state.is_terminal());
        self.by_state[e.state.kind()] += 1;
        self.entries.insert(id.clone(), e);
        self.track_live(&worker, &id, false, live)
    }

    /// Moves executor `id` to `state`, not recorded yet; `None` if there is
    /// no such executor.
    pub(in crate::master) fn set_state(
        &mut self,
        id: &ExecutorId,
        state: ExecutorState,
    ) -> Option<Crossed> {
        let e = self.entries.get_mut(id)?;
        let was = !e.state.is_terminal();
        let is = !state.is_terminal();
        self.by_state[e.state.kind()] -= 1;
        self.by_state[state.kind()] += 1;
        e.state = state;
        e.recorded = false;
        let worker = e.worker.clone();
        Some(self.track_live(&worker, id, was, is))
    }

    /// Removes executor `id`.
    pub(in crate::master) fn remove(
        &mut self,
        id: &ExecutorId,
    ) -> Option<(ExecutorEntry, Crossed)> {
        let e = self.entries.remove(id)?;
        self.by_state[e.state.kind()] -= 1;
        let crossed = self.track_live(&e.worker, id, !e.state.is_terminal(), false);
        Some((e, crossed))
    }

    /// Forgets every executor (leadership ends).
    pub(in crate::master) fn clear(&mut self) {
        self.entries.clear();
        self.live_by_worker.clear();
        self.by_state = [0; 6];
    }

    /// Keeps `live_by_worker` in step with an executor that was live
    /// (`was`) and is live now (`is`, by its state).
    fn track_live(&mut self, worker: &WorkerId, id: &ExecutorId, was: bool, is: bool) -> Crossed {
        if was == is {
            return Crossed(None);
        }
        let before = self.live_on(worker);
        if is {
            let v = self.live_by_worker.entry(worker.clone()).or_default();
            if v.len() == v.capacity() {
                // Most workers run a few executors: grow 1, 2, 4... rather
                // than from 4.
                v.reserve_exact(v.len().max(1));
            }
            v.push(id.clone());
        } else if let Some(v) = self.live_by_worker.get_mut(worker) {
            if let Some(i) = v.iter().position(|x| x == id) {
                v.swap_remove(i);
            }
            if v.is_empty() {
                self.live_by_worker.remove(worker);
            }
        }
        // A candidate no more, or again, only across the limit.
        let after = self.live_on(worker);
        let crossed = (before < MAX_EXECUTORS_PER_WORKER) != (after < MAX_EXECUTORS_PER_WORKER);
        Crossed(crossed.then(|| worker.clone()))
    }

    /// Checks the index against the entries (debug builds): exactly the
    /// live executors, by their worker, and no empty lists.
    #[cfg(debug_assertions)]
    pub(in crate::master) fn check(&self) {
        let mut live: FxHashMap<&WorkerId, Vec<&ExecutorId>> = FxHashMap::default();
        for e in self.entries.values().filter(|e| !e.state.is_terminal()) {
            live.entry(&e.worker).or_default().push(&e.id);
        }
        let mut indexed: FxHashMap<&WorkerId, Vec<&ExecutorId>> = FxHashMap::default();
        for (w, ids) in &self.live_by_worker {
            assert!(!ids.is_empty(), "no empty live lists are kept");
            indexed.insert(w, ids.iter().collect());
        }
        for v in live.values_mut().chain(indexed.values_mut()) {
            v.sort();
        }
        assert_eq!(live, indexed, "live executors by worker");
        let mut by_state = [0; 6];
        for e in self.entries.values() {
            by_state[e.state.kind()] += 1;
        }
        assert_eq!(by_state, self.by_state, "executors by state");
    }
}

//! The cluster's counts and gauges (`GET /metrics`), read from what the
//! master keeps anyway instead of from a snapshot of the cluster.
//!
//! A snapshot ([`Master::state`]) copies every worker, framework and
//! executor: 27–56 ms of the master's loop at 18,000 workers and 18,000
//! executors. The gauges need none of that: the worker and executor counts
//! by state are the registries' own counters (`workers::Registry::count`,
//! `executors::Executors::counts`); the sums of cores, memory and usage
//! are one pass over the worker entries that allocates nothing (0.26–0.28
//! ms at that size, measured by `tests/benches/scale.rs`,
//! `REGENT_SCALE_ONLY=placement`). [`Gauges::of_state`] computes the same
//! figures from a snapshot, and debug builds check the two agree after
//! every step of the machine (so every simulator and property run does).
//!
//! Tests: the debug check of every step (`check_indexes` in
//! `mod.rs`, so every test of the machine), runtime-smol/tests/e2e_events.rs
//! (`/metrics`).

use super::{Master, WorkerState};
use crate::ids::Epoch;
use crate::protocol::ClusterState;
use crate::states::{MaintenanceState, MasterStatus};
use crate::store::Maintenance;

/// The counts and gauges `/metrics` exports: what the master's counters
/// hold now, without a snapshot of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// The master's status.
    pub status: MasterStatus,
    /// Its epoch (its own when leading, else the highest it knows of).
    pub epoch: Epoch,
    /// Workers in the registry by state, in [`WorkerState::ALL`] order.
    pub workers: [u64; 4],
    /// Workers by maintenance, in [`MaintenanceState::ALL`] order.
    pub maintenance: [u64; 3],
    /// Cores offered by the workers in the registry.
    pub cores_offered: u64,
    /// Cores their executors hold.
    pub cores_used: u64,
    /// Memory offered, in MiB.
    pub memory_offered_mb: u64,
    /// Memory their executors hold, in MiB.
    pub memory_used_mb: u64,
    /// Memory the running executors use, from the workers' latest usage
    /// samples, in bytes.
    pub executor_memory_bytes: u64,
    /// CPU time the running executors used, summed per worker sample, in
    /// microseconds.
    pub executor_cpu_usec: u64,
    /// The least free space of any sampled worker's work directory.
    pub work_dir_free_bytes_min: Option<u64>,
    /// Frameworks known.
    pub frameworks: u64,
    /// Frameworks with a live subscription.
    pub frameworks_connected: u64,
    /// Executors by state, in [`crate::protocol::ExecutorState::NAMES`] order.
    pub executors: [u64; 6],
    /// Messages handled.
    pub messages: u64,
    /// Messages refused.
    pub rejected: u64,
}

impl Gauges {
    /// The same figures computed from a snapshot: what `/metrics` showed
    /// when it rendered one, and what [`Master::gauges`] must equal.
    pub fn of_state(s: &ClusterState) -> Gauges {
        let mut g = Gauges {
            status: s.status,
            epoch: s.epoch,
            frameworks: s.frameworks.len() as u64,
            frameworks_connected: s.frameworks.iter().filter(|f| f.connected).count() as u64,
            messages: s.messages,
            rejected: s.rejected,
            ..Gauges::default()
        };
        for w in &s.workers {
            g.workers[w.state as usize] += 1;
            if w.cordoned {
                let m = w.drain.map_or(MaintenanceState::Cordoned, MaintenanceState::from);
                g.maintenance[m as usize] += 1;
            }
            g.add_worker(
                u64::from(w.cores),
                u64::from(w.cores_used),
                w.memory_mb,
                w.memory_used_mb,
            );
            if let Some(u) = &w.usage {
                g.add_usage(u.memory_bytes, u.cpu_usec, u.work_dir_free_bytes);
            }
        }
        for e in &s.executors {
            g.executors[e.state.kind()] += 1;
        }
        g
    }

    fn add_worker(&mut self, cores: u64, cores_used: u64, memory_mb: u64, memory_used_mb: u64) {
        self.cores_offered = self.cores_offered.saturating_add(cores);
        self.cores_used = self.cores_used.saturating_add(cores_used);
        self.memory_offered_mb = self.memory_offered_mb.saturating_add(memory_mb);
        self.memory_used_mb = self.memory_used_mb.saturating_add(memory_used_mb);
    }

    fn add_usage(&mut self, memory_bytes: u64, cpu_usec: u64, free: Option<u64>) {
        self.executor_memory_bytes = self.executor_memory_bytes.saturating_add(memory_bytes);
        self.executor_cpu_usec = self.executor_cpu_usec.saturating_add(cpu_usec);
        if let Some(f) = free {
            self.work_dir_free_bytes_min =
                Some(self.work_dir_free_bytes_min.map_or(f, |m| m.min(f)));
        }
    }
}

impl Master {
    /// The counts and gauges `/metrics` exports, from the registries'
    /// counters and one pass over the worker entries that allocates
    /// nothing: no snapshot is built, so a scrape costs the loop
    /// microseconds where [`Master::state`] costs milliseconds. Equal to
    /// `Gauges::of_state(&self.state())` at every step.
    pub fn gauges(&self) -> Gauges {
        let mut g = Gauges {
            status: self.status(),
            epoch: self.epoch,
            frameworks: self.frameworks.len() as u64,
            frameworks_connected: self.frameworks.values().filter(|f| f.conn.is_some()).count()
                as u64,
            messages: self.metrics.messages,
            rejected: self.metrics.rejected,
            ..Gauges::default()
        };
        for state in WorkerState::ALL {
            g.workers[state as usize] = self.workers.count(state) as u64;
        }
        for w in self.workers.entries.values() {
            if let Some(m) = &w.maintenance {
                let m = match m {
                    Maintenance::Cordoned => MaintenanceState::Cordoned,
                    Maintenance::Draining { .. } => MaintenanceState::Draining,
                    Maintenance::Drained => MaintenanceState::Drained,
                };
                g.maintenance[m as usize] += 1;
            }
            g.add_worker(
                u64::from(w.cores),
                u64::from(w.cores_used),
                w.memory_mb,
                w.memory_used_mb,
            );
            if let Some((u, _)) = w.usage.as_deref() {
                g.add_usage(
                    u.executors.iter().filter_map(|e| e.usage.memory_bytes).sum(),
                    u.executors.iter().filter_map(|e| e.usage.cpu_usec).sum(),
                    u.work_dir_free_bytes,
                );
            }
        }
        for (i, n) in self.executors.counts().into_iter().enumerate() {
            g.executors[i] = n as u64;
        }
        g
    }
}

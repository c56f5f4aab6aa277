//! Kills the leader owes, and what dying executors hold (docs/jobs.md,
//! "What the job layer promises").
//!
//! * **An accepted kill is carried out.** A kill or stop sent to a live
//!   executor (the framework's `KillExecutor`, an operator's
//!   `kill-executor`, a scale-down's surplus, a rollout's or a drain's stop)
//!   is owed until the executor's end is reported
//!   ([`super::ExecutorEntry::owed`]): sent again on every registration of
//!   its worker, so a kill sent while the worker's connection was down for
//!   a moment (it stays ALIVE and reconnects) reaches it when it does.
//! * **A dying executor keeps what it holds.** An executor the leader kills
//!   that is no longer live in its registry — of a framework that was
//!   removed (`regent kill`, a teardown, a failover timeout), written off
//!   (LOST) and then reported running, or a stray this leadership never
//!   launched — is kept in [`Dying`] with its cores, memory, ports and named
//!   resources held on its worker, so nothing is placed on what it still
//!   uses (a launch there would be refused: a GPU, a port). Its kill is sent
//!   again whenever its worker reports it live. Once its end is reported, or
//!   a registration of its worker no longer reports it, what it held is
//!   released and placement runs in the same step: freed capacity goes to
//!   the slots that wait.
//!
//! A removed framework's kills wait until its end is durable (docs/design.md#issue-20: a
//! leader that dies before leaves its executors to the next one); until
//! then its dying executors are not `due` and a report of one kills
//! nothing.
//!
//! Tests: core/tests/job_promises.rs (accepted kills sent again,
//! a killed executor's hold), core/tests/one_executor_per_slot.rs,
//! core/tests/durable_requests.rs, the simulator's `kills` and `kill_bound`
//! invariants (tests/tests/sim_seeds.rs).

use super::executors::Need;
use super::{Action, Master};
use crate::ids::{ExecutorId, Incarnation, WorkerId};
use crate::protocol::Message;
use crate::time::Millis;
use std::collections::BTreeMap;

/// How many dying executors a leadership remembers: past it, more are
/// killed but neither remembered nor held.
pub(super) const MAX_DYING_REMEMBERED: usize = 65_536;

/// What a live executor is owed until its end is reported
/// ([`super::ExecutorEntry::owed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owed {
    /// `KillExecutorOnWorker`.
    Kill,
    /// `StopExecutorOnWorker` with this signal and grace (a rollout's
    /// stop, a named scale's).
    Stop {
        /// `signal` to SIGKILL.
        grace: Millis,
        /// The signal sent first.
        signal: crate::api::StopSignal,
    },
}

/// One dying executor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct DyingExecutor {
    /// Its worker.
    pub(super) worker: WorkerId,
    /// What it holds there.
    pub(super) need: Need,
    /// The incarnation of its worker whose entry holds `need` (none: not
    /// held; a new incarnation's entry starts empty).
    pub(super) held_on: Option<Incarnation>,
    /// Its kill may be sent (a removed framework's wait for the end to be
    /// durable).
    pub(super) due: bool,
}

/// The dying executors of this leadership, by id.
#[derive(Clone, Debug, Default)]
pub(super) struct Dying {
    by_id: BTreeMap<ExecutorId, DyingExecutor>,
}

impl Dying {
    /// Whether `id` is dying.
    pub(super) fn contains(&self, id: &ExecutorId) -> bool {
        self.by_id.contains_key(id)
    }

    /// The dying executors on `worker`.
    pub(super) fn on(&self, worker: &WorkerId) -> Vec<ExecutorId> {
        self.by_id.iter().filter(|(_, d)| d.worker == *worker).map(|(id, _)| id.clone()).collect()
    }

    /// How many there are.
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Forgets them all (a leadership ends).
    pub(super) fn clear(&mut self) {
        self.by_id.clear();
    }
}

/// What one dying executor holds on its worker's current entry
/// ([`Master::dying_holds`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DyingHold {
    /// The executor.
    pub executor: ExecutorId,
    /// Its worker.
    pub worker: WorkerId,
    /// Cores it holds.
    pub cores: u32,
    /// Memory it holds, in MiB.
    pub memory_mb: u64,
    /// Ports it holds.
    pub ports: u32,
    /// Named resources it holds, by name and amount.
    pub resources: Vec<(String, u32)>,
}

impl Master {
    /// What the dying executors hold on their workers' current entries
    /// (see the module docs): with the live executors' holds, exactly what
    /// each worker entry counts used.
    pub fn dying_holds(&self) -> Vec<DyingHold> {
        self.dying
            .by_id
            .iter()
            .filter(|(_, d)| {
                d.held_on.is_some()
                    && d.held_on == self.workers.entries.get(&d.worker).map(|w| w.incarnation)
            })
            .map(|(id, d)| DyingHold {
                executor: id.clone(),
                worker: d.worker.clone(),
                cores: d.need.cores,
                memory_mb: d.need.memory_mb,
                ports: d.need.ports,
                resources: d.need.resources.clone(),
            })
            .collect()
    }

    /// `id` on `worker`, holding `need`, is dying: remembered (with `need`
    /// held on the worker unless `held` says its entry holds it already)
    /// and, when `due`, sent its kill.
    pub(super) fn start_dying(
        &mut self,
        worker: &WorkerId,
        id: &ExecutorId,
        need: Need,
        held: bool,
        due: bool,
        out: &mut Vec<Action>,
    ) {
        if !self.dying.contains(id) {
            if self.dying.len() < MAX_DYING_REMEMBERED {
                let held_on =
                    held.then(|| self.workers.entries.get(worker).map(|w| w.incarnation)).flatten();
                let d = DyingExecutor { worker: worker.clone(), need, held_on, due };
                self.dying.by_id.insert(id.clone(), d);
            } else if held {
                // Not remembered, so never released later: given back now
                // (what the leader did before it kept dying executors).
                self.release_need(worker, &need);
            }
        }
        self.hold_dying(id);
        if due {
            self.send_kill(worker, id, out);
        }
    }

    /// A dying executor was reported live by its worker: what it holds is
    /// held on the worker's current entry, and its kill, when due, is sent
    /// again.
    pub(super) fn still_dying(&mut self, id: &ExecutorId, out: &mut Vec<Action>) {
        self.hold_dying(id);
        if let Some(d) = self.dying.by_id.get(id) {
            if d.due {
                let worker = d.worker.clone();
                self.send_kill(&worker, id, out);
            }
        }
    }

    /// Holds what dying `id` holds on its worker's current entry, unless
    /// that entry holds it already.
    fn hold_dying(&mut self, id: &ExecutorId) {
        let Some(d) = self.dying.by_id.get(id) else { return };
        let Some(inc) = self.workers.entries.get(&d.worker).map(|w| w.incarnation) else { return };
        if d.held_on == Some(inc) {
            return;
        }
        let (worker, need) = (d.worker.clone(), d.need.clone());
        self.hold(&worker, &need);
        if let Some(d) = self.dying.by_id.get_mut(id) {
            d.held_on = Some(inc);
        }
    }

    /// The kill of dying `id` on `worker` may be sent now (a removed
    /// framework's end is durable): sent, whether or not the registry could
    /// remember it.
    pub(super) fn kill_dying(&mut self, worker: &WorkerId, id: &ExecutorId, out: &mut Vec<Action>) {
        if let Some(d) = self.dying.by_id.get_mut(id) {
            d.due = true;
        }
        self.send_kill(worker, id, out);
    }

    /// Dying `id` has ended: what it held is released and placement runs.
    /// `false` if it was not dying.
    pub(super) fn end_dying(&mut self, id: &ExecutorId, out: &mut Vec<Action>) -> bool {
        let Some(d) = self.dying.by_id.remove(id) else { return false };
        let current = self.workers.entries.get(&d.worker).map(|w| w.incarnation);
        if d.held_on.is_some() && d.held_on == current {
            self.release_need(&d.worker, &d.need);
            self.place(out);
        }
        true
    }

    /// A registration of `worker` reporting `reported` (every executor it
    /// has, live or ended): dying executors it no longer has have ended;
    /// live executors owed a kill or stop are sent it again.
    pub(super) fn settle_kills_on_registration(
        &mut self,
        worker: &WorkerId,
        reported: &[ExecutorId],
        out: &mut Vec<Action>,
    ) {
        for id in self.dying.on(worker) {
            if !reported.contains(&id) {
                self.end_dying(&id, out);
            }
        }
        for id in self.executors.live_ids_on(worker) {
            let Some(owed) = self.executors.get(&id).and_then(|e| e.owed) else { continue };
            let msg = match owed {
                Owed::Kill => Message::KillExecutorOnWorker { epoch: self.epoch, executor: id },
                Owed::Stop { grace, signal } => {
                    Message::StopExecutorOnWorker { epoch: self.epoch, executor: id, grace, signal }
                }
            };
            self.tell_worker(worker, msg, out);
        }
    }

    /// Sends live executor `id` a kill it is owed from now on.
    pub(super) fn owe_kill(&mut self, id: &ExecutorId, out: &mut Vec<Action>) {
        let Some(mut e) = self.executors.get_mut(id) else { return };
        if e.state.is_terminal() {
            return;
        }
        e.owe(Owed::Kill);
        let worker = e.worker.clone();
        self.send_kill(&worker, id, out);
    }
}

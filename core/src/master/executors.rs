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

use super::workers::WorkerState;
use super::{Action, AfterWrite, Master, Phase, Placement};
use crate::ids::{ExecutorId, FrameworkId, WorkerId};
use crate::limits::MAX_EXECUTORS_PER_WORKER;
use crate::protocol::{ExecutorInfo, ExecutorReport, ExecutorState, Message};
use crate::store::SlotOutcome;
use rustc_hash::FxHashMap;

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
    /// Its terminal state is durable in the framework record.
    pub recorded: bool,
}

impl ExecutorEntry {
    pub(super) fn info(&self) -> ExecutorInfo {
        ExecutorInfo {
            id: self.id.clone(),
            group: self.group.clone(),
            slot: self.slot,
            worker: Some(self.worker.clone()),
            state: self.state.clone(),
        }
    }
}

/// Splits an executor id into (group, slot) given its framework.
fn parse_executor_id(framework: &FrameworkId, id: &ExecutorId) -> Option<(String, u32)> {
    let rest = id.0.strip_prefix(framework.as_str())?.strip_prefix('/')?;
    let mut parts = rest.rsplitn(3, '#');
    let _launch = parts.next()?;
    let slot = parts.next()?.parse().ok()?;
    let group = parts.next()?;
    Some((group.to_owned(), slot))
}

impl Master {
    pub(super) fn send_kill(
        &self,
        worker: &WorkerId,
        executor: &ExecutorId,
        out: &mut Vec<Action>,
    ) {
        if let Some(conn) = self.workers.entries.get(worker).and_then(|w| w.conn) {
            out.push(Action::Send {
                conn,
                msg: Message::KillExecutorOnWorker {
                    epoch: self.epoch,
                    executor: executor.clone(),
                },
            });
        }
    }

    /// Gives the executor's resources back to its worker.
    pub(super) fn release(&mut self, e: &ExecutorEntry) {
        if let Some(w) = self.workers.entries.get_mut(&e.worker) {
            w.cores_used = w.cores_used.saturating_sub(e.cores);
            w.memory_used_mb = w.memory_used_mb.saturating_sub(e.memory_mb);
        }
    }

    fn hold(&mut self, worker: &WorkerId, cores: u32, memory_mb: u64) {
        if let Some(w) = self.workers.entries.get_mut(worker) {
            // Only after `fits_on` (or for a terminal report, which holds
            // nothing for long): saturate rather than wrap on peer numbers.
            w.cores_used = w.cores_used.saturating_add(cores);
            w.memory_used_mb = w.memory_used_mb.saturating_add(memory_mb);
        }
    }

    fn tell_framework(&self, framework: &FrameworkId, msg: Message, out: &mut Vec<Action>) {
        if let Some(conn) = self.frameworks.get(framework).and_then(|f| f.conn) {
            out.push(Action::Send { conn, msg });
        }
    }

    pub(super) fn ack_report(
        &self,
        worker: &WorkerId,
        executor: &ExecutorId,
        out: &mut Vec<Action>,
    ) {
        if let Some(conn) = self.workers.entries.get(worker).and_then(|w| w.conn) {
            out.push(Action::Send {
                conn,
                msg: Message::ExecutorStatusAck { epoch: self.epoch, executor: executor.clone() },
            });
        }
    }

    /// Fills every pending slot that has no executor, as capacity allows.
    pub(super) fn place(&mut self, out: &mut Vec<Action>) {
        if self.phase != Phase::Alive || self.suspended {
            return;
        }
        let mut needs: Vec<(FrameworkId, usize, u32)> = Vec::new();
        for fw in self.frameworks.values() {
            for (gi, g) in fw.groups.iter().enumerate().filter(|(_, g)| g.durable) {
                for (slot, outcome) in g.record.slots.iter().enumerate() {
                    if *outcome == SlotOutcome::Pending && g.current[slot].is_none() {
                        needs.push((fw.id.clone(), gi, slot as u32));
                    }
                }
            }
        }
        if needs.is_empty() {
            return;
        }
        let mut candidates: Vec<WorkerId> = self
            .workers
            .entries
            .values()
            .filter(|w| w.state == WorkerState::Alive && w.conn.is_some())
            .map(|w| w.id.clone())
            .collect();
        candidates.sort();
        // Live executors per worker, bounded by MAX_EXECUTORS_PER_WORKER (a
        // group of 0 cores and 0 MiB would otherwise pile up on one worker).
        let mut live: FxHashMap<WorkerId, usize> = FxHashMap::default();
        for e in self.executors.values().filter(|e| !e.state.is_terminal()) {
            *live.entry(e.worker.clone()).or_default() += 1;
        }
        candidates.retain(|w| live.get(w).copied().unwrap_or(0) < MAX_EXECUTORS_PER_WORKER);
        for (fid, gi, slot) in needs {
            let (cores, memory_mb) = {
                let spec = &self.frameworks[&fid].groups[gi].record.spec;
                (spec.cores, spec.memory_mb)
            };
            let Some(worker) = self.choose_worker(&candidates, cores, memory_mb) else { continue };
            self.launch(&fid, gi, slot, &worker, out);
            let n = live.entry(worker.clone()).or_default();
            *n += 1;
            if *n >= MAX_EXECUTORS_PER_WORKER {
                candidates.retain(|w| *w != worker);
            }
        }
    }

    fn choose_worker(
        &mut self,
        candidates: &[WorkerId],
        cores: u32,
        memory_mb: u64,
    ) -> Option<WorkerId> {
        let fits = |w: &super::WorkerEntry| fits_on(w, cores, memory_mb);
        match self.config.placement {
            Placement::Spread => {
                let n = candidates.len();
                for k in 0..n {
                    let i = (self.spread_cursor + k) % n;
                    if fits(&self.workers.entries[&candidates[i]]) {
                        self.spread_cursor = i + 1;
                        return Some(candidates[i].clone());
                    }
                }
                None
            }
            Placement::Pack => candidates
                .iter()
                .filter(|id| fits(&self.workers.entries[*id]))
                .min_by_key(|id| {
                    let w = &self.workers.entries[*id];
                    (w.cores - w.cores_used, w.memory_mb - w.memory_used_mb)
                })
                .cloned(),
        }
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
        let id = ExecutorId(format!(
            "{fid}/{}#{slot}#{}.{}",
            spec.group, self.epoch.0, self.next_launch
        ));
        g.current[slot as usize] = Some(id.clone());
        let entry = ExecutorEntry {
            id: id.clone(),
            framework: fid.clone(),
            group: spec.group.clone(),
            slot,
            worker: worker.clone(),
            state: ExecutorState::Launching,
            cores: spec.cores,
            memory_mb: spec.memory_mb,
            kill_requested: false,
            recorded: false,
        };
        self.hold(worker, spec.cores, spec.memory_mb);
        let info = entry.info();
        self.executors.insert(id.clone(), entry);
        if let Some(conn) = self.workers.entries.get(worker).and_then(|w| w.conn) {
            out.push(Action::Send {
                conn,
                msg: Message::LaunchExecutor {
                    epoch: self.epoch,
                    executor: id,
                    framework: fid.clone(),
                    command: spec.command,
                    env: spec.env,
                    cores: spec.cores,
                    memory_mb: spec.memory_mb,
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
                    self.send_kill(worker, &report.id, out);
                } else if self.late_success(worker, &report, out) {
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
            Some((true, false)) => self.update_executor(&report.id, report.state, true, out),
            Some((false, _)) => self.kill_stray(worker, &report, out),
            None => self.adopt_or_kill(worker, report, out),
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
        } else {
            self.send_kill(worker, &report.id, out);
        }
    }

    /// An executor this leader did not launch: adopt it into its slot when
    /// the slot is pending and empty (a failover), else kill it.
    fn adopt_or_kill(&mut self, worker: &WorkerId, report: ExecutorReport, out: &mut Vec<Action>) {
        let slot_free =
            parse_executor_id(&report.framework, &report.id).and_then(|(group, slot)| {
                let fw = self.frameworks.get(&report.framework)?;
                let g = fw.groups.iter().position(|g| g.record.spec.group == group)?;
                let gs = &fw.groups[g];
                let free = gs.record.slots.get(slot as usize) == Some(&SlotOutcome::Pending)
                    && gs.current[slot as usize].is_none();
                free.then_some((group, slot, g))
            });
        let live_here = || {
            self.executors
                .values()
                .filter(|e| &e.worker == worker && !e.state.is_terminal())
                .count()
        };
        let fits = self
            .workers
            .entries
            .get(worker)
            .is_some_and(|w| fits_on(w, report.cores, report.memory_mb))
            && (report.state.is_terminal() || live_here() < MAX_EXECUTORS_PER_WORKER);
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
        let entry = ExecutorEntry {
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
            recorded: false,
        };
        self.hold(worker, entry.cores, entry.memory_mb);
        self.executors.insert(report.id.clone(), entry);
        self.update_executor(&report.id, report.state, true, out);
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
        let Some((group, slot)) = parse_executor_id(&report.framework, &report.id) else {
            return false;
        };
        let Some(g) = self.frameworks.get_mut(&report.framework).and_then(|f| f.group_mut(&group))
        else {
            return false;
        };
        if g.record.slots.get(slot as usize) != Some(&SlotOutcome::Pending) {
            return false;
        }
        g.record.slots[slot as usize] = SlotOutcome::Done { executor: report.id.clone() };
        let replaced = g.current[slot as usize].take();
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
        };
        self.tell_framework(
            &report.framework,
            Message::ExecutorUpdate { epoch: self.epoch, info: info.clone() },
            out,
        );
        // Remember it (terminal, not yet recorded), so a repeated report
        // waits for the write instead of being acknowledged before it.
        let entry = self.executors.entry(report.id.clone()).or_insert_with(|| ExecutorEntry {
            id: report.id.clone(),
            framework: report.framework.clone(),
            group: info.group.clone(),
            slot,
            worker: worker.clone(),
            state: report.state.clone(),
            cores: report.cores,
            memory_mb: report.memory_mb,
            kill_requested: false,
            recorded: false,
        });
        entry.state = report.state.clone();
        entry.recorded = false;
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
        out: &mut Vec<Action>,
    ) {
        let Some(e) = self.executors.get_mut(id) else { return };
        if e.state == state {
            return;
        }
        e.state = state.clone();
        e.recorded = false;
        let e = e.clone();
        self.tell_framework(
            &e.framework,
            Message::ExecutorUpdate { epoch: self.epoch, info: e.info() },
            out,
        );
        if !state.is_terminal() {
            return;
        }
        self.release(&e);
        let max_retries = self.config.max_executor_retries;
        let epoch = self.epoch;
        let mut slot_failed = None;
        if let Some(fw) = self.frameworks.get_mut(&e.framework) {
            if let Some(g) = fw.group_mut(&e.group) {
                let slot = e.slot as usize;
                if g.current.get(slot) == Some(&Some(e.id.clone())) {
                    g.current[slot] = None;
                    let outcome = match &state {
                        ExecutorState::Exited { code: 0 } => {
                            SlotOutcome::Done { executor: e.id.clone() }
                        }
                        // The framework's kill is recorded (and may have
                        // been accepted): whatever the end, the slot stays
                        // killed and is not refilled.
                        _ if e.kill_requested => SlotOutcome::Killed { executor: e.id.clone() },
                        // Lost, or killed by its worker's shutdown: refill
                        // without using the retry budget.
                        ExecutorState::Lost | ExecutorState::Killed => SlotOutcome::Pending,
                        ExecutorState::Exited { .. } | ExecutorState::Failed { .. } => {
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
                    g.record.slots[slot] = outcome;
                }
            }
        }
        if let Some(reason) = slot_failed {
            let msg = Message::SlotFailed { epoch, group: e.group.clone(), slot: e.slot, reason };
            self.tell_framework(&e.framework, msg, out);
        }
        let ack = reported.then(|| e.worker.clone());
        let then = vec![
            AfterWrite::Recorded { executor: e.id.clone(), state: state.clone(), ack },
            AfterWrite::Place,
        ];
        if self.frameworks.contains_key(&e.framework) {
            self.persist_framework(&e.framework.clone(), then, out);
        } else {
            if let Some(x) = self.executors.get_mut(&e.id) {
                x.recorded = true;
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
            Some(e) if &e.state == state => {
                e.recorded = true;
                true
            }
            _ => false,
        };
        if let (true, Some(worker)) = (current, ack) {
            self.ack_report(worker, executor, out);
        }
    }

    /// A worker's full report (its registration) is the truth about what it
    /// runs: an executor the leader placed there that the worker does not
    /// report never started (its launch was lost with a connection) and is
    /// LOST; its slot is refilled.
    pub(super) fn reconcile(
        &mut self,
        worker: &WorkerId,
        reports: &[ExecutorReport],
        out: &mut Vec<Action>,
    ) {
        let missing: Vec<ExecutorId> = self
            .executors
            .values()
            .filter(|e| &e.worker == worker && !e.state.is_terminal())
            .filter(|e| !reports.iter().any(|r| r.id == e.id))
            .map(|e| e.id.clone())
            .collect();
        for id in missing {
            self.update_executor(&id, ExecutorState::Lost, false, out);
        }
    }

    /// Every live executor on `worker` is LOST (the worker is dead or was
    /// replaced by a new incarnation); their slots are refilled.
    pub(super) fn lose_executors_of(&mut self, worker: &WorkerId, out: &mut Vec<Action>) {
        let lost: Vec<ExecutorId> = self
            .executors
            .values()
            .filter(|e| &e.worker == worker && !e.state.is_terminal())
            .map(|e| e.id.clone())
            .collect();
        for id in lost {
            self.update_executor(&id, ExecutorState::Lost, false, out);
        }
    }
}

/// Whether `cores` and `memory_mb` more fit on `w`. Peer-supplied numbers
/// meet here, so the arithmetic is checked: a sum that overflows does not
/// fit (DESIGN rule 6).
fn fits_on(w: &super::WorkerEntry, cores: u32, memory_mb: u64) -> bool {
    w.cores_used.checked_add(cores).is_some_and(|c| c <= w.cores)
        && w.memory_used_mb.checked_add(memory_mb).is_some_and(|m| m <= w.memory_mb)
}

//! Operator commands that change the cluster (docs/design.md#issue-14): cordon, uncordon,
//! drain, scale and single-executor kills. Each is answered
//! `RequestAccepted` only once the record it changed is durable
//! (docs/design.md#durable-before-acknowledged), `RequestRefused` with the reason otherwise.
//!
//! * **Cordon** marks a worker in its record: nothing new is placed on it;
//!   what runs keeps running. A new incarnation of the worker id (a
//!   restarted worker) keeps the cordon, and so does a new leader.
//! * **Drain** cordons the worker and, once that is durable, asks each of
//!   its live executors to stop (`StopExecutorOnWorker`: SIGTERM now,
//!   SIGKILL at the deadline). Their slots are refilled elsewhere without
//!   charging the retry budget (`ExecutorEntry::operator_stop`; an exit 0
//!   still completes its slot). Once
//!   nothing runs on it the worker is DRAINED (written to its record). The
//!   deadline is kept as wall-clock time in the record, so a new leader asks
//!   the worker's executors to stop again when the worker reports, with
//!   what is left of it, and sends `KillExecutorOnWorker` to anything still
//!   running once it has passed.
//! * **Uncordon** clears either.
//! * **Scale** changes a group's slot count in the framework record (the
//!   declared spec stays as declared, so a subscriber re-declaring its group
//!   is still accepted idempotently): surplus slots (the highest) are
//!   dropped and their executors killed; new slots are placed once durable.
//!   A scale may name the executors that go (`remove`, [`named`]): their
//!   slots become holes and every other executor keeps its slot; with the
//!   count kept they are replaced. They are stopped with the scale's
//!   signal and deadline, or killed. The subscriber hears `GroupScaled`.
//! * **Kill-executor** kills one executor; with `refill` its slot gets a
//!   replacement (no retry charged), without it the slot is recorded as
//!   killed, as a framework's own kill.
//!
//! Tests: core/tests/operator_commands.rs,
//! core/tests/job_promises.rs, core/tests/durable_requests.rs and
//! core/tests/recovery.rs (`RemoveWorker`), the simulator's `maintenance`
//! invariant (tests/tests/sim_seeds.rs, `seeds_0_to_99_with_operator_commands`).

use super::{Action, AfterWrite, Master, Origin, Timer, WorkerState};
use crate::api::{Stop, StopSignal};
use crate::ids::{ExecutorId, FrameworkId, WorkerId};
use crate::limits;
use crate::protocol::Message;
use crate::store::{Maintenance, SlotOutcome};
use crate::time::Millis;

mod named;

/// How often a leader looks again at a drain whose deadline has passed
/// while executors still run on the worker (it re-sends the kill).
const OVERDUE_DRAIN_RECHECK: Millis = Millis(5_000);

/// An operator's change to a worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WorkerChange {
    Cordon,
    Uncordon,
    Drain { deadline: Millis },
}

/// What follows a worker change once its record is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Follow {
    /// Nothing more (a cordon, a drain of a worker that runs nothing).
    Nothing,
    /// Place what waits (an uncordon).
    Place,
    /// Ask the worker's executors to stop (a drain).
    StopExecutors,
}

impl WorkerChange {
    /// What this change makes of `worker`'s maintenance, and what follows
    /// once that is durable; or why it is refused. Reads only what it is
    /// given: the worker's state and maintenance (`None`: no such worker),
    /// how many executors live on it, and the drain's deadline in
    /// wall-clock milliseconds.
    fn decide(
        self,
        worker: &WorkerId,
        found: Option<(WorkerState, Option<Maintenance>)>,
        live: usize,
        wall_deadline: u64,
    ) -> Result<(Option<Maintenance>, Follow), String> {
        if let WorkerChange::Drain { deadline } = self {
            if deadline > limits::MAX_DRAIN_DEADLINE {
                return Err(format!(
                    "drain deadline of {} ms; the limit is {} ms (MAX_DRAIN_DEADLINE, 7 days)",
                    deadline.0,
                    limits::MAX_DRAIN_DEADLINE.0
                ));
            }
        }
        let Some((state, maintenance)) = found else {
            return Err(format!("no worker {worker}"));
        };
        if state == WorkerState::Dead {
            return Err(format!(
                "worker {worker} is DEAD: it can be cordoned or drained once it registers again (a cordon or drain it had is kept)"
            ));
        }
        Ok(match self {
            WorkerChange::Cordon => {
                (Some(maintenance.unwrap_or(Maintenance::Cordoned)), Follow::Nothing)
            }
            WorkerChange::Uncordon => (None, Follow::Place),
            // Only a worker that reported to this leader is known to run
            // nothing.
            WorkerChange::Drain { .. } if live == 0 && state == WorkerState::Alive => {
                (Some(Maintenance::Drained), Follow::Nothing)
            }
            WorkerChange::Drain { .. } => {
                (Some(Maintenance::Draining { deadline_ms: wall_deadline }), Follow::StopExecutors)
            }
        })
    }
}

impl Master {
    /// Wall-clock milliseconds at `now` for a drain deadline
    /// ([`crate::time::wall_ms`]); the local clock when the runtime gave
    /// none, which `local` reads back with the same base.
    pub(super) fn wall(&self, now: Millis) -> u64 {
        crate::time::wall_ms(self.wall_base, now).unwrap_or(now.0)
    }

    /// The local time of wall-clock instant `wall_ms` (the inverse of
    /// `wall`).
    pub(super) fn local(&self, wall_ms: u64) -> Millis {
        Millis(wall_ms.saturating_sub(self.wall_base.unwrap_or(0)))
    }

    /// `CordonWorker`, `UncordonWorker`, `DrainWorker` from an operator (on a
    /// connection or a local asker).
    pub(super) fn change_worker(
        &mut self,
        now: Millis,
        asker: super::Origin,
        request: u64,
        worker: WorkerId,
        change: WorkerChange,
        out: &mut Vec<Action>,
    ) {
        let live = self.executors.live_on(&worker);
        let wall_deadline = match change {
            WorkerChange::Drain { deadline } => self.wall(now).saturating_add(deadline.0),
            _ => 0,
        };
        let found = self.workers.entries.get(&worker).map(|e| (e.state, e.maintenance));
        let (maintenance, follow) = match change.decide(&worker, found, live, wall_deadline) {
            Ok(decided) => decided,
            Err(reason) => {
                out.push(self.refuse_request(asker, request, reason));
                return;
            }
        };
        let mut then = vec![AfterWrite::AcceptTo { to: asker, request }];
        match follow {
            Follow::Nothing => {}
            Follow::Place => then.push(AfterWrite::Place),
            Follow::StopExecutors => then.push(AfterWrite::DrainDurable { worker: worker.clone() }),
        }
        if let Some(e) = self.workers.entries.get_mut(&worker) {
            e.maintenance = maintenance;
        }
        // Uncordoning a draining worker ends the drain: nothing more is
        // stopped, and the executors already asked to stop keep their
        // `operator_stop` (unless they exit 0, their slots are refilled without
        // a retry charged: the operator stopped them).
        self.reindex_worker(&worker);
        let write = self.persist_worker_maintenance(&worker, out).expect("checked above");
        self.after_write.entry(write).or_default().extend(then);
    }

    /// The drain of `worker` is durable (or a draining worker reported to
    /// this leader): ask each of its live executors to stop, with what is
    /// left of the deadline, and arm the drain timer.
    pub(super) fn stop_draining_executors(
        &mut self,
        now: Millis,
        worker: &WorkerId,
        out: &mut Vec<Action>,
    ) {
        let Some(Maintenance::Draining { deadline_ms }) =
            self.workers.entries.get(worker).and_then(|w| w.maintenance)
        else {
            return;
        };
        let deadline = self.local(deadline_ms);
        let grace = deadline.since(now);
        for id in self.executors.live_ids_on(worker) {
            if let Some(mut x) = self.executors.get_mut(&id) {
                x.stop_by_operator();
            }
            let signal = StopSignal::Term;
            let msg =
                Message::StopExecutorOnWorker { epoch: self.epoch, executor: id, grace, signal };
            self.tell_worker(worker, msg, out);
        }
        self.arm_drain_timer(now);
        self.maybe_drained(worker, out);
    }

    /// Arms [`Timer::Drain`] for the earliest deadline of a draining worker
    /// that still runs executors (soon, if one has passed).
    fn arm_drain_timer(&mut self, now: Millis) {
        let next = self
            .workers
            .entries
            .values()
            .filter(|w| self.executors.live_on(&w.id) > 0)
            .filter_map(|w| match w.maintenance {
                Some(Maintenance::Draining { deadline_ms }) => Some(self.local(deadline_ms)),
                _ => None,
            })
            .map(|d| if d <= now { now + OVERDUE_DRAIN_RECHECK } else { d })
            .min();
        if let Some(at) = next {
            if self.timers.get(Timer::Drain).is_none_or(|t| t > at || t <= now) {
                self.timers.set(Timer::Drain, at);
            }
        }
    }

    /// [`Timer::Drain`]: every draining worker past its deadline that still
    /// runs executors gets `KillExecutorOnWorker` for each (the worker
    /// SIGKILLs at the deadline by itself; this covers a worker that
    /// reconnected, or a stop that was lost).
    pub(super) fn on_drain_timer(&mut self, now: Millis, out: &mut Vec<Action>) {
        if !self.may_act() {
            // Suspended: look again once it may act (a standby has no
            // drains to watch).
            if self.elected() {
                self.timers.set(Timer::Drain, now + OVERDUE_DRAIN_RECHECK);
            }
            return;
        }
        let mut overdue: Vec<WorkerId> = self
            .workers
            .entries
            .values()
            .filter(|w| {
                matches!(w.maintenance, Some(Maintenance::Draining { deadline_ms })
                    if self.local(deadline_ms) <= now)
            })
            .map(|w| w.id.clone())
            .collect();
        overdue.sort();
        for worker in overdue {
            for id in self.executors.live_ids_on(&worker) {
                if let Some(mut x) = self.executors.get_mut(&id) {
                    x.stop_by_operator();
                }
                self.owe_kill(&id, out);
            }
        }
        self.arm_drain_timer(now);
    }

    /// A draining worker that reported to this leader (ALIVE) with nothing
    /// live on it is DRAINED (durably).
    pub(super) fn maybe_drained(&mut self, worker: &WorkerId, out: &mut Vec<Action>) {
        let live = self.executors.live_on(worker);
        let Some(w) = self.workers.entries.get_mut(worker) else { return };
        if live == 0
            && w.state == WorkerState::Alive
            && matches!(w.maintenance, Some(Maintenance::Draining { .. }))
        {
            w.maintenance = Some(Maintenance::Drained);
            let _ = self.persist_worker_maintenance(worker, out);
        }
    }

    /// `ScaleGroup` from an operator (on a connection) or a local asker
    /// (the HTTP API), `asker`: `slots` is the count wanted; `remove` names
    /// executors that go (see [`named::plan`] for which slots change), each
    /// stopped by `stop` (`None`: killed as a framework's kill). Answered
    /// once the record is durable, or refused with nothing changed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn scale_group(
        &mut self,
        asker: Origin,
        request: u64,
        framework: FrameworkId,
        group: String,
        slots: u32,
        remove: Vec<ExecutorId>,
        stop: Option<Stop>,
        out: &mut Vec<Action>,
    ) {
        let refuse = |m: &Self, reason: String| {
            asker.reply(Message::RequestRefused { epoch: m.epoch, request, reason })
        };
        let Some(fw) = self.frameworks.get(&framework) else {
            out.push(refuse(self, format!("no framework {framework}")));
            return;
        };
        let Some(gi) = fw.groups.iter().position(|g| g.record.spec.group == group) else {
            out.push(refuse(self, format!("no group {group:?} in framework {framework}")));
            return;
        };
        if slots == 0 {
            let reason = format!(
                "group {group:?} needs at least one slot; to stop the framework use `regent kill {framework}`"
            );
            out.push(refuse(self, reason));
            return;
        }
        if slots > limits::MAX_SLOTS_PER_GROUP {
            let reason = format!(
                "group {group:?} asks for {slots} slots; the limit is {} per group (MAX_SLOTS_PER_GROUP)",
                limits::MAX_SLOTS_PER_GROUP
            );
            out.push(refuse(self, reason));
            return;
        }
        if let Some(reason) = self.refuse_named(&framework, gi, &remove, stop) {
            out.push(refuse(self, reason));
            return;
        }
        let g = &self.frameworks[&framework].groups[gi];
        // The named executors' slots (checked above: each holds its slot).
        let named_slots: Vec<u32> =
            remove.iter().filter_map(|id| self.executors.get(id).map(|e| e.slot)).collect();
        let holes: Vec<(u32, ExecutorId)> =
            named_slots.iter().copied().zip(remove.iter().cloned()).collect();
        let plan = named::plan(&g.record.slots, &holes, slots);
        let now_slots = g.record.slots.len();
        if plan.len > now_slots {
            if let Some(reason) = self.scale_limit(&framework, gi, plan.len as u32) {
                out.push(refuse(self, reason));
                return;
            }
        }
        // Executors of slots scaled away earlier that still run (their kill
        // is on its way, or waits for that scale to be durable): a slot
        // coming back names its old executor again, so it is refilled only
        // once that one has ended (one executor per slot, issue 20 (docs/design.md#issue-20)).
        let old_len = now_slots as u32;
        let bound = plan.len as u32;
        let mut still_live: Vec<(u32, ExecutorId, bool)> = self
            .executors
            .of_framework(&framework)
            .filter(|e| e.group == group && !e.state.is_terminal())
            .filter(|e| e.slot >= old_len && e.slot < bound)
            .map(|e| (e.slot, e.id.clone(), e.operator_stop))
            .collect();
        still_live.dedup_by_key(|(slot, _, _)| *slot);
        // The removed executors that still run, by slot: a hole refilled at
        // once (the count kept) keeps naming its executor until it ends.
        let live_holes: std::collections::BTreeMap<u32, ExecutorId> = plan
            .refilled
            .iter()
            .filter_map(|(slot, id)| {
                let e = self.executors.get(id).filter(|e| !e.state.is_terminal())?;
                Some((*slot, e.id.clone()))
            })
            .collect();
        for id in &remove {
            if let Some(mut x) = self.executors.get_mut(id) {
                // Its end is no failure of its own: nothing is charged, and
                // a refilled slot gets a replacement.
                x.stop_by_operator();
            }
        }
        let fw = self.frameworks.get_mut(&framework).expect("checked above");
        let g = &mut fw.groups[gi];
        for (slot, id) in &holes {
            let s = *slot as usize;
            g.record.slots[s] = SlotOutcome::Removed { executor: id.clone() };
            g.current[s] = None;
            super::restarts::clear(&mut g.record, *slot);
        }
        for (slot, _) in &plan.refilled {
            let s = *slot as usize;
            g.record.slots[s] = SlotOutcome::Pending;
            if let Some(id) = live_holes.get(slot) {
                // As a kill with refill: durable with the scale, so a new
                // leader kills it rather than adopting it, and refills.
                g.current[s] = Some(id.clone());
                g.record.replace(*slot, id.clone());
            }
        }
        let n = plan.len;
        let mut surplus: Vec<ExecutorId> = Vec::new();
        if n < g.record.slots.len() {
            surplus = g.current[n..].iter().rev().flatten().cloned().collect();
            g.record.slots.truncate(n);
            g.current.truncate(n);
            super::restarts::truncate(&mut g.record, bound);
        } else {
            g.record.slots.resize(n, SlotOutcome::Pending);
            g.current.resize(n, None);
            for (slot, id, stopping) in still_live {
                if stopping {
                    // Being stopped (named, or its kill sent): a new leader
                    // kills it rather than adopting it, and refills.
                    g.record.replace(slot, id.clone());
                }
                g.current[slot as usize] = Some(id);
            }
        }
        // New slots are placed once the record holding them is durable, as
        // for a declaration: a new leader must know every slot that runs.
        // Slots past `n` are placed no more from now (see
        // `GroupState::placeable_slots`).
        g.write_in_flight(bound);
        for id in &surplus {
            if let Some(mut x) = self.executors.get_mut(id) {
                // Its slot is gone: nothing of it is recorded or refilled.
                x.stop_by_operator();
            }
        }
        self.restart_waits.forget(&framework, Some((gi, bound)));
        for slot in &named_slots {
            self.restart_waits.remove(&(framework.clone(), gi, *slot));
        }
        self.refresh_slots_of(&framework);
        let then = vec![
            AfterWrite::GroupDurable { framework: framework.clone(), group: group.clone() },
            AfterWrite::Scaled {
                framework: framework.clone(),
                group,
                slots: bound,
                surplus,
                named: remove,
                stop,
            },
            AfterWrite::AcceptTo { to: asker, request },
            AfterWrite::Place,
        ];
        self.persist_framework(&framework, then, out);
    }

    /// Why the executors `remove` names cannot be removed from group `gi`
    /// of framework `fid` with `stop`, if they cannot: too many, one named
    /// twice, one that is no live executor holding a slot of that group
    /// (the first bad id is named), or a deadline over the limit.
    fn refuse_named(
        &self,
        fid: &FrameworkId,
        gi: usize,
        remove: &[ExecutorId],
        stop: Option<Stop>,
    ) -> Option<String> {
        if remove.len() > limits::MAX_SCALE_REMOVE {
            return Some(format!(
                "the scale names {} executors; the limit is {} (MAX_SCALE_REMOVE); nothing was changed",
                remove.len(),
                limits::MAX_SCALE_REMOVE
            ));
        }
        if let Some(stop) = stop {
            if stop.deadline > limits::MAX_DRAIN_DEADLINE {
                return Some(format!(
                    "stop deadline of {} ms; the limit is {} ms (MAX_DRAIN_DEADLINE, 7 days); nothing was changed",
                    stop.deadline.0,
                    limits::MAX_DRAIN_DEADLINE.0
                ));
            }
        }
        let g = &self.frameworks.get(fid)?.groups[gi];
        let group = &g.record.spec.group;
        let mut seen = std::collections::BTreeSet::new();
        for id in remove {
            if !seen.insert(id) {
                return Some(format!("executor {id} is named twice; nothing was changed"));
            }
            let holds = self.executors.get(id).is_some_and(|e| {
                !e.state.is_terminal()
                    && e.framework == *fid
                    && e.group == *group
                    && g.current.get(e.slot as usize).is_some_and(|c| c.as_ref() == Some(id))
            });
            if !holds {
                return Some(format!(
                    "executor {id} is not a live executor of group {group:?} of framework {fid}; nothing was changed"
                ));
            }
        }
        None
    }

    /// Why giving group `gi` of framework `id` `slots` slots would let the
    /// framework's record grow past the record limit, if it would (the
    /// worst case of [`Master::record_limit`]).
    fn scale_limit(&self, id: &FrameworkId, gi: usize, slots: u32) -> Option<String> {
        let fw = self.frameworks.get(id)?;
        let mut record = fw.record();
        if let crate::store::Record::Framework(f) = &mut record {
            f.groups[gi].slots.resize(slots as usize, SlotOutcome::Pending);
        }
        let current = crate::store::format::payload_len(&record);
        let reserve: usize = fw
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let n = if i == gi { slots } else { g.slot_count() };
                super::frameworks::slot_reserve(id, &g.record.spec, n)
            })
            .fold(0usize, usize::saturating_add);
        let worst = current
            .saturating_add(reserve)
            .saturating_add(limits::record_headroom(fw.groups.len()));
        let max = limits::MAX_RECORD_PAYLOAD;
        (worst > max).then(|| {
            format!(
                "{slots} slots would let framework {id}'s record reach {worst} bytes at worst (every slot's outcome recorded); the record limit is {max} bytes (MAX_RECORD_PAYLOAD); nothing was changed"
            )
        })
    }

    /// A scale is durable: the subscriber hears of it, surplus executors are
    /// killed, the named ones stopped with `stop` (or killed without one).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_scaled(
        &mut self,
        framework: &FrameworkId,
        group: String,
        slots: u32,
        surplus: Vec<ExecutorId>,
        named: Vec<ExecutorId>,
        stop: Option<Stop>,
        out: &mut Vec<Action>,
    ) {
        // The named ones go whatever slot they hold now (a refilled one is
        // replaced once it ended).
        for id in &named {
            self.stop_named(id, stop, out);
        }
        let group_state = self
            .frameworks
            .get(framework)
            .and_then(|f| f.groups.iter().find(|g| g.record.spec.group == group));
        let mut owed = Vec::new();
        for id in surplus {
            if let Some(e) = self.executors.get(&id) {
                // A later scale brought its slot back while this write was
                // in flight, and the slot names it again (`scale_group`'s
                // `still_live`): it keeps running there. Killing it would
                // stop the executor that holds a live slot (seed 2492:
                // scales to 1 and to 4 in one instant).
                let holds = group_state.is_some_and(|g| {
                    g.current.get(e.slot as usize).is_some_and(|c| c.as_ref() == Some(&id))
                });
                if !e.state.is_terminal() && !holds {
                    owed.push(id);
                }
            }
        }
        for id in owed {
            self.owe_kill(&id, out);
        }
        if let Some(conn) = self.frameworks.get(framework).and_then(|f| f.conn) {
            let msg = Message::GroupScaled { epoch: self.epoch, group, slots };
            out.push(Action::Send { conn, msg });
        }
    }

    /// Named executor `id` is removed: with `stop`, owed (and sent, if its
    /// worker is connected) `StopExecutorOnWorker` with its signal and
    /// deadline, which the worker follows with SIGKILL; without, a kill.
    fn stop_named(&mut self, id: &ExecutorId, stop: Option<Stop>, out: &mut Vec<Action>) {
        let Some(stop) = stop else {
            self.owe_kill(id, out);
            return;
        };
        let Some(mut e) = self.executors.get_mut(id) else { return };
        if e.state.is_terminal() {
            return;
        }
        let (grace, signal) = (stop.deadline, stop.signal);
        e.owe(super::Owed::Stop { grace, signal });
        let worker = e.worker.clone();
        let executor = id.clone();
        let msg = Message::StopExecutorOnWorker { epoch: self.epoch, executor, grace, signal };
        self.tell_worker(&worker, msg, out);
    }

    /// `OperatorKillExecutor` from an operator.
    pub(super) fn operator_kill(
        &mut self,
        asker: super::Origin,
        request: u64,
        executor: ExecutorId,
        refill: bool,
        out: &mut Vec<Action>,
    ) {
        let Some(mut e) = self.executors.get_mut(&executor) else {
            out.push(self.refuse_request(asker, request, format!("no executor {executor}")));
            return;
        };
        if e.state.is_terminal() {
            let reason = format!("executor {executor} has already ended ({:?})", e.state);
            out.push(self.refuse_request(asker, request, reason));
            return;
        }
        let framework = e.framework.clone();
        if refill {
            e.stop_by_operator();
            // Durable with the acceptance: a new leader kills it rather
            // than adopting it, and refills its slot.
            let group = e.group.clone();
            if let Some(g) = self.frameworks.get_mut(&framework).and_then(|f| f.group_mut(&group)) {
                g.record.replace(e.slot, executor.clone());
            }
        } else {
            e.request_kill();
            let (group, slot) = (e.group.clone(), e.slot as usize);
            if let Some(g) = self.frameworks.get_mut(&framework).and_then(|f| f.group_mut(&group)) {
                if g.current.get(slot) == Some(&Some(executor.clone()))
                    && g.record.slots.get(slot) == Some(&SlotOutcome::Pending)
                {
                    g.record.slots[slot] = SlotOutcome::Killed { executor: executor.clone() };
                }
            }
        }
        // Durable before accepted: without refill the slot's outcome records
        // the kill; with it the record is written as it stands, so the kill
        // follows every earlier change of the framework's record.
        let then =
            vec![AfterWrite::KillDurable { executor }, AfterWrite::AcceptTo { to: asker, request }];
        if self.frameworks.contains_key(&framework) {
            self.persist_framework(&framework, then, out);
        } else {
            let msg = Message::RequestRefused {
                epoch: self.epoch,
                request,
                reason: format!("framework {framework} is being removed"),
            };
            out.push(asker.reply(msg));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w() -> WorkerId {
        WorkerId::new("w1")
    }

    const DRAIN: WorkerChange = WorkerChange::Drain { deadline: Millis(60_000) };

    #[test]
    fn a_cordon_keeps_a_drain_and_an_uncordon_clears_either_and_places() {
        let draining = Some(Maintenance::Draining { deadline_ms: 7 });
        let found = Some((WorkerState::Alive, draining));
        assert_eq!(WorkerChange::Cordon.decide(&w(), found, 2, 0), Ok((draining, Follow::Nothing)));
        let found = Some((WorkerState::Unknown, None));
        let cordoned = Some(Maintenance::Cordoned);
        assert_eq!(WorkerChange::Cordon.decide(&w(), found, 0, 0), Ok((cordoned, Follow::Nothing)));
        let found = Some((WorkerState::Alive, draining));
        assert_eq!(WorkerChange::Uncordon.decide(&w(), found, 2, 0), Ok((None, Follow::Place)));
    }

    #[test]
    fn a_drain_is_drained_at_once_only_for_a_reported_worker_that_runs_nothing() {
        let idle = Some((WorkerState::Alive, None));
        let drained = Some(Maintenance::Drained);
        assert_eq!(DRAIN.decide(&w(), idle, 0, 99), Ok((drained, Follow::Nothing)));
        let draining = Some(Maintenance::Draining { deadline_ms: 99 });
        let busy = Some((WorkerState::Alive, None));
        assert_eq!(DRAIN.decide(&w(), busy, 1, 99), Ok((draining, Follow::StopExecutors)));
        // Not yet reported to this leader: what it runs is not known.
        let unknown = Some((WorkerState::Unknown, None));
        assert_eq!(DRAIN.decide(&w(), unknown, 0, 99), Ok((draining, Follow::StopExecutors)));
    }

    #[test]
    fn refusals_name_the_limit_the_missing_worker_or_its_death() {
        let long = WorkerChange::Drain { deadline: limits::MAX_DRAIN_DEADLINE + Millis(1) };
        let found = Some((WorkerState::Alive, None));
        assert!(long.decide(&w(), found, 0, 0).unwrap_err().contains("MAX_DRAIN_DEADLINE"));
        assert_eq!(WorkerChange::Cordon.decide(&w(), None, 0, 0), Err("no worker w1".into()));
        let dead = Some((WorkerState::Dead, None));
        assert!(DRAIN.decide(&w(), dead, 0, 0).unwrap_err().starts_with("worker w1 is DEAD"));
    }
}

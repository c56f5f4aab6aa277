//! The progress of one executor group as a submitter sees it, and how a
//! submission ends: the embedding program's side of the subscriber
//! machine, shared by every runtime's submit pump.
//!
//! A [`GroupProgress`] is fed the subscriber machine's actions
//! ([`GroupProgress::observe`]; protocol actions are ignored) and answers
//! the state of every slot of its group ([`GroupProgress::slot_status`],
//! [`GroupProgress::counts`]) and how the submission ends
//! ([`GroupProgress::outcome`]).
//!
//! Slot rules (the master's, as seen from a subscriber): a slot is *done*
//! when any of its executors exited 0 (the master completes a slot on a late
//! success too); it *failed* after a `SlotFailed` (final: the master never
//! reopens a failed slot, so the failure is remembered across
//! resubscriptions), or when a snapshot carries the slot's recorded outcome
//! (an entry with no worker) as failed or killed. Any other ended executor
//! means the master is retrying the slot. A `Subscribed` snapshot replaces
//! what was known of the executors (failures stay).
//!
//! Completion ([`GroupProgress::completion`]): [`SubmitOutcome::Succeeded`]
//! once every slot is done; [`SubmitOutcome::SlotsFailed`] once at least one
//! slot failed and every slot is done or failed. The machine stopping
//! ([`Action::Exit`]) ends the submission too: [`SubmitOutcome::FailedOver`]
//! when another instance took the framework over, an error otherwise (e.g.
//! the framework was torn down); so does the master refusing the group's
//! declaration (an error: the machine forgot it, nothing more will happen).
//!
//! A *service* group ([`GroupProgress::service`]: restart mode `service`)
//! is restarted whatever its executors' ends, so an exit 0 does not make
//! its slot done: its slots are running or waiting to restart until one
//! fails for good, and its submission does not complete by itself.
//!
//! An operator may scale the group (`regent scale`, seen as
//! [`Action::GroupScaled`]): the slots followed become the new count, so a
//! group scaled down completes once its remaining slots are done, and one
//! scaled up waits for the new slots too. (Slot numbers past the count are
//! ignored, as before; slots are capped at `MAX_SLOTS_PER_GROUP`.)
//!
//! Limitation: a `SlotFailed` sent while the subscriber was not subscribed is
//! not repeated by the master, and a snapshot cannot tell an exhausted slot
//! from one awaiting a retry while the failed executor is still in the
//! leader's memory; the submission then keeps waiting.

use crate::ids::ExecutorId;
use crate::protocol::{ExecutorInfo, ExecutorState};
use crate::subscriber::{Action, Request};
use std::collections::BTreeMap;

/// Why a submission could not go on (the `Err` of an outcome; exit code
/// [`EXIT_ERROR`](crate::node::submit::EXIT_ERROR)). Each variant's text is
/// the line the user reads after `error: `.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The master refused the declaration of a group: the subscriber
    /// machine forgot it, nothing more will happen for it.
    #[error("the master refused group {group}: {reason}")]
    GroupRefused {
        /// The group.
        group: String,
        /// The master's reason.
        reason: String,
    },
    /// The subscriber machine stopped for good (the framework was torn
    /// down, the leader refused the subscription...), saying why.
    #[error("{reason}")]
    Stopped {
        /// The machine's reason ([`Action::Exit`]).
        reason: String,
    },
    /// No master subscribed the framework within the connect timeout; the
    /// text names every master tried and why its last attempt failed.
    #[error("{0}")]
    Unreachable(String),
    /// The runtime could not start or run the submission (invalid options,
    /// a state directory it cannot use...): its error, with its causes.
    #[error("{0}")]
    Runtime(String),
}

impl From<String> for SubmitError {
    /// A runtime's error ([`SubmitError::Runtime`]).
    fn from(e: String) -> Self {
        SubmitError::Runtime(e)
    }
}

impl From<&str> for SubmitError {
    /// A runtime's error ([`SubmitError::Runtime`]).
    fn from(e: &str) -> Self {
        SubmitError::Runtime(e.to_owned())
    }
}

/// How a submission ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// Every slot's executor exited 0.
    Succeeded,
    /// At least one slot failed for good and no slot can change any more;
    /// one reason per failed slot (`slot <n>: <why>`).
    SlotsFailed(Vec<String>),
    /// Another instance took the framework over; this one stopped.
    FailedOver {
        /// The instance the framework now belongs to (as the master named
        /// it, e.g. `inst-1f2e...`).
        to: String,
    },
    /// The submitter was interrupted (decided by the runtime, never by a
    /// [`GroupProgress`]). The framework was left in place: its executors
    /// keep running within the failover timeout.
    Interrupted,
}

/// Where one slot of the group stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotStatus {
    /// An executor of the slot exited 0.
    Done,
    /// The slot failed for good.
    Failed,
    /// An executor of the slot is launching or running.
    Running,
    /// Not placed yet, or being retried.
    Waiting,
}

/// How many slots stand where, for a progress line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgressCounts {
    /// Every slot of the group.
    pub slots: usize,
    /// Slots with a launching or running executor.
    pub running: usize,
    /// Slots done.
    pub done: usize,
    /// Slots failed for good.
    pub failed: usize,
    /// Slots not placed yet or being retried.
    pub waiting: usize,
}

/// What is known about one slot of the group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Slot {
    /// The latest state of each of the slot's executors.
    executors: BTreeMap<ExecutorId, ExecutorState>,
    /// The slot failed for good (a `SlotFailed`, or a recorded failure).
    failed: Option<String>,
}

impl Slot {
    fn status(&self, service: bool) -> SlotStatus {
        if !service && self.executors.values().any(|s| *s == ExecutorState::Exited { code: 0 }) {
            SlotStatus::Done
        } else if self.failed.is_some() {
            SlotStatus::Failed
        } else if self.executors.values().any(|s| !s.is_terminal()) {
            SlotStatus::Running
        } else {
            SlotStatus::Waiting
        }
    }
}

/// The slots of one executor group and how the submission ends (see the
/// module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupProgress {
    group: String,
    slots: Vec<Slot>,
    /// Set when the machine stopped or refused the group's declaration.
    stopped: Option<Result<SubmitOutcome, SubmitError>>,
    /// A service group: an exit 0 does not end a slot.
    service: bool,
}

impl GroupProgress {
    /// Nothing known yet about the `slots` slots of `group`.
    pub fn new(group: impl Into<String>, slots: u32) -> Self {
        GroupProgress {
            group: group.into(),
            slots: vec![Slot::default(); slots as usize],
            stopped: None,
            service: false,
        }
    }

    /// The same for a service group (see the module docs), if `service`.
    pub fn service(mut self, service: bool) -> Self {
        self.service = service;
        self
    }

    /// The group followed.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// Takes in one action of the subscriber machine: `Subscribed` (the
    /// snapshot), `ExecutorUpdate`, `SlotFailed`, `RequestRefused` (of the
    /// group's declaration) and `Exit` matter; anything else is ignored.
    pub fn observe(&mut self, action: &Action) {
        match action {
            Action::Subscribed { executors, .. } => self.subscribed(executors),
            Action::ExecutorUpdate(info) => self.update(info),
            Action::SlotFailed { group, slot, reason } => self.slot_failed(group, *slot, reason),
            Action::GroupScaled { group, slots } if *group == self.group => {
                // Peer number: at most the per-group limit the master
                // enforces (docs/design.md#peer-input-never-panics).
                let n = (*slots).min(crate::limits::MAX_SLOTS_PER_GROUP) as usize;
                self.slots.resize(n, Slot::default());
            }
            Action::RequestRefused { command: Request::Declare { group }, reason, .. }
                if *group == self.group =>
            {
                // The machine forgot the declaration: nothing more will
                // happen for this submission.
                self.stopped = Some(Err(SubmitError::GroupRefused {
                    group: self.group.clone(),
                    reason: reason.clone(),
                }));
            }
            Action::Exit { reason, failed_over_to } => {
                self.stopped = Some(match failed_over_to {
                    Some(to) => Ok(SubmitOutcome::FailedOver { to: to.to_string() }),
                    None => Err(SubmitError::Stopped { reason: reason.clone() }),
                });
            }
            _ => {}
        }
    }

    fn subscribed(&mut self, executors: &[ExecutorInfo]) {
        // The snapshot replaces what was known; failures are final.
        for s in &mut self.slots {
            s.executors.clear();
        }
        for info in executors {
            if info.worker.is_none() && info.group == self.group {
                // The slot's recorded outcome.
                let reason = match &info.state {
                    ExecutorState::Failed { reason } => Some(reason.clone()),
                    ExecutorState::Killed => Some(format!("executor {} was killed", info.id)),
                    _ => None,
                };
                if let (Some(reason), Some(slot)) = (reason, self.slots.get_mut(info.slot as usize))
                {
                    slot.failed.get_or_insert(reason);
                }
            }
            self.update(info);
        }
    }

    fn update(&mut self, info: &ExecutorInfo) {
        if info.group == self.group {
            if let Some(slot) = self.slots.get_mut(info.slot as usize) {
                slot.executors.insert(info.id.clone(), info.state.clone());
            }
        }
    }

    fn slot_failed(&mut self, group: &str, slot: u32, reason: &str) {
        if group == self.group {
            if let Some(s) = self.slots.get_mut(slot as usize) {
                s.failed = Some(reason.to_owned());
            }
        }
    }

    /// Where slot `slot` stands (`None` past the group's slots).
    pub fn slot_status(&self, slot: u32) -> Option<SlotStatus> {
        self.slots.get(slot as usize).map(|s| s.status(self.service))
    }

    /// How many slots stand where.
    pub fn counts(&self) -> ProgressCounts {
        let mut c = ProgressCounts { slots: self.slots.len(), ..ProgressCounts::default() };
        for s in &self.slots {
            match s.status(self.service) {
                SlotStatus::Running => c.running += 1,
                SlotStatus::Done => c.done += 1,
                SlotStatus::Failed => c.failed += 1,
                SlotStatus::Waiting => c.waiting += 1,
            }
        }
        c
    }

    /// The outcome the slots show, if they show one.
    pub fn completion(&self) -> Option<SubmitOutcome> {
        let statuses: Vec<SlotStatus> = self.slots.iter().map(|s| s.status(self.service)).collect();
        if !self.service && statuses.iter().all(|s| *s == SlotStatus::Done) {
            return Some(SubmitOutcome::Succeeded);
        }
        if !statuses.iter().all(|s| matches!(s, SlotStatus::Done | SlotStatus::Failed)) {
            return None;
        }
        let reasons = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.status(self.service) == SlotStatus::Failed)
            .map(|(i, s)| format!("slot {i}: {}", s.failed.as_deref().unwrap_or("failed")))
            .collect();
        Some(SubmitOutcome::SlotsFailed(reasons))
    }

    /// How the submission ends, if it does: the machine's stop (the last
    /// `Exit` or refused declaration observed) wins over [`completion`].
    ///
    /// [`completion`]: GroupProgress::completion
    pub fn outcome(&self) -> Option<Result<SubmitOutcome, SubmitError>> {
        self.stopped.clone().or_else(|| self.completion().map(Ok))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Addr, FrameworkId, InstanceId, WorkerId};

    const GROUP: &str = "main";

    fn info(id: &str, slot: u32, worker: Option<&str>, state: ExecutorState) -> ExecutorInfo {
        ExecutorInfo {
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            id: ExecutorId::new(id),
            group: GROUP.into(),
            slot,
            worker: worker.map(WorkerId::new),
            state,
        }
    }

    fn update(p: &mut GroupProgress, info: ExecutorInfo) {
        p.observe(&Action::ExecutorUpdate(info));
    }

    fn subscribed(p: &mut GroupProgress, executors: Vec<ExecutorInfo>) {
        p.observe(&Action::Subscribed {
            framework: FrameworkId::new("fw"),
            master: Addr::new("m:1"),
            executors,
        });
    }

    fn slot_failed(p: &mut GroupProgress, group: &str, slot: u32, reason: &str) {
        p.observe(&Action::SlotFailed { group: group.into(), slot, reason: reason.into() });
    }

    #[test]
    fn a_service_slot_is_never_done_by_an_exit_0_and_fails_only_for_good() {
        let mut p = GroupProgress::new(GROUP, 1).service(true);
        update(&mut p, info("fw/main#0#1", 0, Some("w1"), ExecutorState::Exited { code: 0 }));
        assert_eq!(p.slot_status(0), Some(SlotStatus::Waiting), "restarting");
        assert_eq!(p.completion(), None);
        update(&mut p, info("fw/main#0#2", 0, Some("w1"), ExecutorState::Running));
        assert_eq!(p.counts().running, 1);
        slot_failed(&mut p, GROUP, 0, "crash loop");
        assert_eq!(
            p.completion(),
            Some(SubmitOutcome::SlotsFailed(vec!["slot 0: crash loop".into()]))
        );
    }

    #[test]
    fn a_slot_is_done_when_any_executor_exited_zero() {
        let mut p = GroupProgress::new(GROUP, 2);
        update(&mut p, info("fw/main#0#1", 0, Some("w1"), ExecutorState::Exited { code: 1 }));
        update(&mut p, info("fw/main#0#2", 0, Some("w1"), ExecutorState::Exited { code: 0 }));
        assert_eq!(p.completion(), None);
        update(&mut p, info("fw/main#1#1", 1, Some("w2"), ExecutorState::Running));
        assert_eq!(p.completion(), None);
        update(&mut p, info("fw/main#1#1", 1, Some("w2"), ExecutorState::Exited { code: 0 }));
        assert_eq!(p.completion(), Some(SubmitOutcome::Succeeded));
        assert_eq!(p.outcome(), Some(Ok(SubmitOutcome::Succeeded)));
    }

    #[test]
    fn a_failed_slot_ends_the_run_only_when_nothing_can_change() {
        let mut p = GroupProgress::new(GROUP, 2);
        update(&mut p, info("fw/main#1#1", 1, Some("w2"), ExecutorState::Running));
        slot_failed(&mut p, GROUP, 0, "retries used up");
        assert_eq!(p.completion(), None);
        update(&mut p, info("fw/main#1#1", 1, Some("w2"), ExecutorState::Exited { code: 0 }));
        assert_eq!(
            p.completion(),
            Some(SubmitOutcome::SlotsFailed(vec!["slot 0: retries used up".into()]))
        );
    }

    #[test]
    fn a_recorded_failure_in_a_snapshot_is_final() {
        let mut p = GroupProgress::new(GROUP, 1);
        subscribed(
            &mut p,
            vec![info("fw/main#0#3", 0, None, ExecutorState::Failed { reason: "boom".into() })],
        );
        assert_eq!(p.completion(), Some(SubmitOutcome::SlotsFailed(vec!["slot 0: boom".into()])));
    }

    #[test]
    fn a_snapshot_replaces_executors_and_keeps_failures() {
        let mut p = GroupProgress::new(GROUP, 3);
        subscribed(&mut p, vec![info("fw/main#0#1", 0, Some("w1"), ExecutorState::Running)]);
        slot_failed(&mut p, GROUP, 2, "retries used up");
        subscribed(
            &mut p,
            vec![
                info("fw/main#0#1", 0, Some("w1"), ExecutorState::Running),
                // A recorded failure (no worker) is final.
                info("fw/main#1#3", 1, None, ExecutorState::Failed { reason: "boom".into() }),
            ],
        );
        assert_eq!(p.slot_status(0), Some(SlotStatus::Running));
        assert_eq!(p.slot_status(1), Some(SlotStatus::Failed));
        assert_eq!(p.slot_status(2), Some(SlotStatus::Failed));
        assert_eq!(p.slot_status(3), None);
        // A killed recorded outcome fails the slot too; the snapshot drops
        // executors it does not list.
        let mut p = GroupProgress::new(GROUP, 2);
        update(&mut p, info("fw/main#1#1", 1, Some("w1"), ExecutorState::Running));
        subscribed(&mut p, vec![info("fw/main#0#1", 0, None, ExecutorState::Killed)]);
        assert_eq!(p.slot_status(0), Some(SlotStatus::Failed));
        assert_eq!(p.slot_status(1), Some(SlotStatus::Waiting));
        slot_failed(&mut p, GROUP, 1, "x");
        assert_eq!(
            p.completion(),
            Some(SubmitOutcome::SlotsFailed(vec![
                "slot 0: executor fw/main#0#1 was killed".into(),
                "slot 1: x".into()
            ]))
        );
    }

    #[test]
    fn other_groups_and_slots_out_of_range_are_ignored() {
        let mut p = GroupProgress::new(GROUP, 1);
        let mut other = info("fw/aux#0#1", 0, Some("w1"), ExecutorState::Exited { code: 0 });
        other.group = "aux".into();
        update(&mut p, other);
        update(&mut p, info("fw/main#5#1", 5, Some("w1"), ExecutorState::Exited { code: 0 }));
        slot_failed(&mut p, "aux", 0, "x");
        assert_eq!(p.slot_status(0), Some(SlotStatus::Waiting));
        assert_eq!(p.outcome(), None);
    }

    #[test]
    fn a_scaled_group_completes_with_its_new_slot_count() {
        let scaled = |slots| Action::GroupScaled { group: GROUP.into(), slots };
        // Scaled down: the two remaining slots decide.
        let mut p = GroupProgress::new(GROUP, 4);
        update(&mut p, info("fw/main#0#1", 0, Some("w1"), ExecutorState::Exited { code: 0 }));
        update(&mut p, info("fw/main#3#1", 3, Some("w1"), ExecutorState::Running));
        p.observe(&scaled(2));
        assert_eq!(
            p.counts(),
            ProgressCounts { slots: 2, done: 1, waiting: 1, ..Default::default() }
        );
        update(&mut p, info("fw/main#1#1", 1, Some("w1"), ExecutorState::Exited { code: 0 }));
        assert_eq!(p.outcome(), Some(Ok(SubmitOutcome::Succeeded)));
        // Scaled up: the new slots are waited for; another group's scale is
        // not ours; an absurd count is capped.
        let mut p = GroupProgress::new(GROUP, 1);
        update(&mut p, info("fw/main#0#1", 0, Some("w1"), ExecutorState::Exited { code: 0 }));
        p.observe(&Action::GroupScaled { group: "aux".into(), slots: 9 });
        assert_eq!(p.outcome(), Some(Ok(SubmitOutcome::Succeeded)));
        p.observe(&scaled(3));
        assert_eq!(p.outcome(), None);
        assert_eq!(p.slot_status(2), Some(SlotStatus::Waiting));
        update(&mut p, info("fw/main#1#2", 1, Some("w2"), ExecutorState::Exited { code: 0 }));
        update(&mut p, info("fw/main#2#3", 2, Some("w2"), ExecutorState::Exited { code: 0 }));
        assert_eq!(p.outcome(), Some(Ok(SubmitOutcome::Succeeded)));
        p.observe(&scaled(u32::MAX));
        assert_eq!(p.counts().slots, crate::limits::MAX_SLOTS_PER_GROUP as usize);
    }

    #[test]
    fn counts_for_a_progress_line() {
        let mut p = GroupProgress::new(GROUP, 4);
        assert_eq!(p.counts(), ProgressCounts { slots: 4, waiting: 4, ..Default::default() });
        update(&mut p, info("fw/main#0#1", 0, Some("w1"), ExecutorState::Running));
        update(&mut p, info("fw/main#1#1", 1, Some("w1"), ExecutorState::Launching));
        update(&mut p, info("fw/main#2#1", 2, Some("w1"), ExecutorState::Exited { code: 0 }));
        slot_failed(&mut p, GROUP, 3, "x");
        assert_eq!(
            p.counts(),
            ProgressCounts { slots: 4, running: 2, done: 1, failed: 1, waiting: 0 }
        );
    }

    #[test]
    fn a_failover_exit_names_the_instance_and_any_other_exit_is_an_error() {
        let mut p = GroupProgress::new(GROUP, 1);
        p.observe(&Action::Exit {
            reason: "framework fw failed over to instance inst-2a; ...".into(),
            failed_over_to: Some(InstanceId(0x2a)),
        });
        assert_eq!(p.outcome(), Some(Ok(SubmitOutcome::FailedOver { to: "inst-2a".into() })));
        let mut p = GroupProgress::new(GROUP, 1);
        // The machine's stop wins over what the slots show.
        update(&mut p, info("fw/main#0#1", 0, Some("w1"), ExecutorState::Exited { code: 0 }));
        p.observe(&Action::Exit { reason: "framework fw torn down".into(), failed_over_to: None });
        let stopped = SubmitError::Stopped { reason: "framework fw torn down".into() };
        assert_eq!(p.outcome(), Some(Err(stopped)));
    }

    #[test]
    fn a_refused_declaration_of_the_group_ends_the_submission() {
        let mut p = GroupProgress::new(GROUP, 1);
        let refused = |group: &str| Action::RequestRefused {
            request: 1,
            command: Request::Declare { group: group.into() },
            reason: "too big".into(),
        };
        p.observe(&refused("aux"));
        assert_eq!(p.outcome(), None);
        p.observe(&refused(GROUP));
        let outcome = p.outcome().expect("ended").map_err(|e| e.to_string());
        assert_eq!(outcome, Err("the master refused group main: too big".into()));
    }
}

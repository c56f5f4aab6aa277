//! Finished frameworks: what the leader keeps of a framework once it has
//! ended (Spark's `spark.deploy.retainedApplications`, Mesos' completed
//! frameworks).
//!
//! When a framework ends the leader writes a [`FinishedFramework`] — how it
//! ended ([`FrameworkOutcome`]), the wall-clock time, and the outcome of every
//! slot — as a history record in the store, keeps the newest
//! [`master::Config::retained_frameworks`](crate::master::Config::retained_frameworks)
//! of them and deletes older ones. Operators see them in
//! [`ClusterState::history`](crate::protocol::ClusterState::history).
//!
//! Sizes: a history record holds every slot unless that would pass
//! [`limits::MAX_RECORD_PAYLOAD`]; a `StateReply` shows at most
//! [`limits::MAX_HISTORY_SLOTS_SHOWN`] slots per framework and at most
//! [`limits::MAX_HISTORY_STATE_BYTES`] of history in all (newest first). What
//! is left out is counted ([`FinishedFramework::slots_omitted`],
//! [`ClusterState::history_omitted`](crate::protocol::ClusterState::history_omitted)),
//! never silently dropped.

use crate::ids::{ExecutorId, FrameworkId};
use crate::limits;
use crate::protocol::ExecutorState;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How a framework ended. Variants are only ever appended (history records
/// and `StateReply` frames carry them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FrameworkOutcome {
    /// It ended by itself (torn down by its subscriber, or past its
    /// failover timeout) after every slot of its declared groups exited 0
    /// (at least one slot declared).
    Completed,
    /// It ended by itself with at least one slot failed (its group's retry
    /// budget ran out on it).
    Failed,
    /// Its subscriber tore it down (`Teardown`) before every slot was done
    /// (slots pending or running, or killed on its request, or none
    /// declared).
    TornDown,
    /// An operator killed it (`regent kill`, `KillFramework`), whatever its
    /// slots had done.
    Killed,
    /// It stayed disconnected longer than its failover timeout before every
    /// slot was done.
    TimedOut,
}

impl FrameworkOutcome {
    /// The operator's name: COMPLETED, FAILED, TORN_DOWN, KILLED, TIMED_OUT.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameworkOutcome::Completed => "COMPLETED",
            FrameworkOutcome::Failed => "FAILED",
            FrameworkOutcome::TornDown => "TORN_DOWN",
            FrameworkOutcome::Killed => "KILLED",
            FrameworkOutcome::TimedOut => "TIMED_OUT",
        }
    }
}

impl fmt::Display for FrameworkOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What became of one slot of a finished framework.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishedSlot {
    /// The slot's group.
    pub group: String,
    /// The slot's index in its group.
    pub slot: u32,
    /// The executor the slot ended with; `None` if it never had one.
    pub executor: Option<ExecutorId>,
    /// That executor's final state (`Killed` for one still running when the
    /// framework ended: the leader killed it); `None` if it never had one.
    pub state: Option<ExecutorState>,
    /// Executors launched for this slot that the leader knew of when the
    /// framework ended (a leader that took over knows those its workers
    /// reported, not the failed attempts of earlier leaderships).
    pub attempts: u32,
}

impl FinishedSlot {
    /// The final executor's exit code, if it exited by itself.
    pub fn exit_code(&self) -> Option<i32> {
        match self.state {
            Some(ExecutorState::Exited { code }) => Some(code),
            _ => None,
        }
    }

    /// The final state as an operator reads it: EXITED, FAILED, KILLED,
    /// LOST, LAUNCHING, RUNNING, or NONE for a slot that never ran.
    pub fn state_name(&self) -> &'static str {
        self.state.as_ref().map_or("NONE", ExecutorState::name)
    }
}

/// A framework that has ended, as the leader keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishedFramework {
    /// Its id.
    pub id: FrameworkId,
    /// Its display name.
    pub name: String,
    /// How it ended.
    pub outcome: FrameworkOutcome,
    /// Wall-clock time it ended, in ms since the Unix epoch (the runtime's
    /// clock, as passed to the master at its election, plus the monotonic
    /// time since); 0 if the runtime gave no wall clock.
    pub finished_at_ms: u64,
    /// Wall-clock time of its first SUBSCRIBE, if the leader that accepted
    /// it knew the wall clock (kept in the framework record since protocol
    /// version 2; `None` for a framework recorded by an earlier build).
    pub registered_at_ms: Option<u64>,
    /// Every slot, in declaration order of groups, then by index (fewer if
    /// `slots_omitted` is not 0).
    pub slots: Vec<FinishedSlot>,
    /// Slots left out of `slots` to keep a record or a reply within its
    /// size limit.
    pub slots_omitted: u32,
}

impl FinishedFramework {
    /// The postcard length of this entry.
    pub fn encoded_len(&self) -> usize {
        crate::store::format::postcard_len(self)
    }

    /// Caps stored failure reasons at [`limits::MAX_FAILURE_REASON_BYTES`],
    /// then drops slots from the end (counting them in `slots_omitted`)
    /// until the entry encodes in at most `max` bytes.
    pub fn fit(&mut self, max: usize) {
        for s in &mut self.slots {
            if let Some(ExecutorState::Failed { reason }) = &mut s.state {
                if reason.len() > limits::MAX_FAILURE_REASON_BYTES {
                    *reason = limits::cap_reason(std::mem::take(reason));
                }
            }
        }
        while !self.slots.is_empty() && self.encoded_len() > max {
            let keep = self.slots.len() / 2;
            self.drop_slots_after(keep);
        }
    }

    /// Keeps the first `keep` slots, counting the rest as omitted.
    pub fn drop_slots_after(&mut self, keep: usize) {
        if keep < self.slots.len() {
            let dropped = self.slots.len() - keep;
            self.slots.truncate(keep);
            self.slots_omitted =
                self.slots_omitted.saturating_add(u32::try_from(dropped).unwrap_or(u32::MAX));
        }
    }
}

/// The outcome of a framework that ended by itself — torn down by its
/// subscriber (`otherwise` = [`FrameworkOutcome::TornDown`]) or gone past
/// its failover timeout ([`FrameworkOutcome::TimedOut`]) — from its slots
/// first: COMPLETED if it declared at least one slot and every slot exited
/// 0, FAILED if a slot failed (its retry budget ran out), else `otherwise`.
/// (`regent submit` does not tear its framework down when it is done, so a
/// finished application ends when its failover timeout expires, and is
/// COMPLETED or FAILED by its slots.)
pub fn ended_outcome<'a>(
    slots: impl Iterator<Item = &'a crate::store::SlotOutcome> + Clone,
    otherwise: FrameworkOutcome,
) -> FrameworkOutcome {
    use crate::store::SlotOutcome;
    if slots.clone().any(|o| matches!(o, SlotOutcome::Failed { .. })) {
        FrameworkOutcome::Failed
    } else if slots.clone().next().is_some()
        && slots.clone().all(|o| matches!(o, SlotOutcome::Done { .. }))
    {
        FrameworkOutcome::Completed
    } else {
        otherwise
    }
}

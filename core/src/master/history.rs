//! The history of finished frameworks (see [`crate::protocol::FinishedFramework`]).
//!
//! * **When a framework ends** (it tears itself down, an operator kills it,
//!   or its failover timeout expires) its live entry is removed and, in the
//!   same step, a history record is written: a [`HistoryRecord`] with the
//!   next sequence number, the outcome and every slot. The framework's own
//!   record is deleted only once the history record is durable, so a crash
//!   in between leaves the framework in the store as live, finished, or
//!   both — never neither. Both is resolved by the next leader (below).
//!   The entry is shown (`StateReply`, [`Master::history`]) only once its
//!   record is durable, so what a leader shows a successor shows too.
//! * **No return**: a SUBSCRIBE naming a finished framework that is still
//!   in the history is refused (`SubscribeRefused`: the subscriber stops),
//!   and the live subscription of a framework an operator kills is told so
//!   (`FrameworkError`) and closed: a killed application does not start
//!   over under the same id when its submitter reconnects.
//! * **Eviction**: past [`Config::retained_frameworks`](super::Config::retained_frameworks)
//!   entries the oldest are deleted from the store, in the step that adds
//!   the new one (and, after a restart with a smaller setting, when the
//!   leader loads).
//! * **Recovery**: a new leader loads every history record and numbers the
//!   frameworks it finishes after the highest. A framework record that a
//!   history record says was finished (the history record carries the
//!   CRC32C of the framework record it replaced, and they match) is the
//!   leftover of a crash between the two writes: it is dropped and deleted,
//!   not recovered as live. A framework that subscribed again under the same
//!   id after its entry was evicted has another record, and stays.
//! * **Wall clock**: the runtime passes wall-clock ms at the election
//!   (`Event::Elected { clock }`, docs/design.md#epochs-fence-everything); the leader adds the
//!   monotonic time since. A runtime that passes 0 gets 0 (unknown).
//!
//! Tests: core/tests/history.rs.

use super::{Action, AfterWrite, FrameworkEntry, Master};
use crate::ids::FrameworkId;
use crate::limits;
use crate::protocol::ExecutorState;
use crate::protocol::{FinishedFramework, FinishedSlot, FrameworkOutcome};
use crate::store::StoreCommand;
use crate::store::{FrameworkRecord, HistoryRecord, Record, RecordKey, SlotOutcome};
use crate::time::Millis;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

/// The finished frameworks a leader keeps, by sequence number.
#[derive(Clone, Debug, Default)]
pub(super) struct History {
    /// Oldest first.
    pub(super) entries: BTreeMap<u64, FinishedFramework>,
    /// The sequence number of the next entry.
    pub(super) next_seq: u64,
    /// Entries whose history record is not durable yet: kept (a SUBSCRIBE
    /// naming one is refused) but not shown, since a leader that crashed
    /// now would leave a successor that does not know them.
    pub(super) pending: BTreeSet<u64>,
}

impl History {
    /// The entries whose history record is durable, oldest first.
    fn durable(&self) -> impl DoubleEndedIterator<Item = (&u64, &FinishedFramework)> {
        self.entries.iter().filter(|(seq, _)| !self.pending.contains(seq))
    }
}

/// How a framework ends, as the master sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ending {
    /// `Teardown` from its subscriber.
    Teardown,
    /// `KillFramework` from an operator.
    Killed,
    /// Its failover timeout expired.
    TimedOut,
}

/// The CRC32C of a framework record's postcard encoding: names the record a
/// history record replaced.
pub(super) fn record_digest(record: &FrameworkRecord) -> u32 {
    let bytes =
        postcard::to_allocvec(record).expect("postcard into a Vec of plain data cannot fail");
    crc32c::crc32c(&bytes)
}

impl Master {
    /// Why a SUBSCRIBE naming `id` is refused, if `id` is not live and is a
    /// finished framework in the history (Mesos refuses a removed
    /// framework's re-registration too): a framework killed by an operator
    /// must not start over when its subscriber reconnects.
    pub(super) fn finished_refusal(&self, id: &FrameworkId) -> Option<String> {
        if self.frameworks.contains_key(id) {
            return None;
        }
        let f = self.history.entries.values().rev().find(|f| f.id == *id)?;
        Some(format!(
            "framework {id} has finished ({}); a finished framework cannot subscribe again \
             (submit without --framework-id to start a new one)",
            f.outcome
        ))
    }

    /// Whether a framework of id `id` ended and its history record is not
    /// durable yet (its own record's delete waits for it).
    pub(super) fn is_ending(&self, id: &FrameworkId) -> bool {
        self.history
            .pending
            .iter()
            .any(|seq| self.history.entries.get(seq).is_some_and(|f| f.id == *id))
    }

    /// The finished frameworks whose history record is durable, oldest
    /// first: what a successor would load if this leader crashed now.
    pub fn history(&self) -> impl Iterator<Item = &FinishedFramework> {
        self.history.durable().map(|(_, f)| f)
    }

    /// What `fw` (just removed from the live frameworks, its executors not
    /// yet) ended as.
    fn finished(&self, fw: &FrameworkEntry, ending: Ending, now: Millis) -> FinishedFramework {
        let mut attempts: FxHashMap<(&str, u32), u32> = FxHashMap::default();
        for e in self.executors.of_framework(&fw.id) {
            *attempts.entry((e.group.as_str(), e.slot)).or_default() += 1;
        }
        let mut slots = Vec::new();
        for g in &fw.groups {
            let group = &g.record.spec.group;
            for (i, outcome) in g.record.slots.iter().enumerate() {
                let slot = i as u32;
                let (executor, state) = match outcome.finished() {
                    Some((ex, state)) => (Some(ex), Some(state)),
                    None => match g.current.get(i).cloned().flatten() {
                        Some(ex) => {
                            let state = match self.executors.get(&ex).map(|e| &e.state) {
                                // Still running: the leader kills it now.
                                Some(s) if !s.is_terminal() => ExecutorState::Killed,
                                Some(s) => s.clone(),
                                None => ExecutorState::Lost,
                            };
                            (Some(ex), Some(state))
                        }
                        None => (None, None),
                    },
                };
                let attempts = attempts
                    .get(&(group.as_str(), slot))
                    .copied()
                    .unwrap_or(0)
                    .max(u32::from(executor.is_some()));
                // The slot's last end was a preemption: its executor, or
                // none for a slot that waited for its refill (durable in
                // the record; docs/design.md#issue-44).
                let preempted_by = match (outcome, &executor) {
                    (SlotOutcome::Pending, Some(ex)) => g.record.preempted_by(slot, ex),
                    (SlotOutcome::Pending, None) => g
                        .record
                        .preempted
                        .get(&slot)
                        .and_then(|p| g.record.preempted_by(slot, &p.executor)),
                    _ => None,
                }
                .map(str::to_owned);
                slots.push(FinishedSlot {
                    group: group.clone(),
                    slot,
                    executor,
                    state,
                    attempts,
                    preempted_by,
                });
            }
        }
        let slots_of = || fw.groups.iter().flat_map(|g| g.record.slots.iter());
        let outcome = match ending {
            Ending::Killed => FrameworkOutcome::Killed,
            Ending::TimedOut => ended_outcome(slots_of(), FrameworkOutcome::TimedOut),
            Ending::Teardown => ended_outcome(slots_of(), FrameworkOutcome::TornDown),
        };
        let mut finished = FinishedFramework {
            id: fw.id.clone(),
            name: fw.name.clone(),
            outcome,
            // 0: the runtime gave no wall clock (`FinishedFramework`'s docs).
            finished_at_ms: crate::time::wall_ms(self.wall_base, now).unwrap_or(0),
            registered_at_ms: fw.registered_at_ms,
            slots,
            slots_omitted: 0,
        };
        finished.fit(limits::MAX_HISTORY_RECORD_BYTES);
        finished
    }

    /// Writes the history record of `fw`, which just ended (removed from the
    /// live frameworks, its executors still known), evicts the oldest
    /// entries past the limit, and asks for the framework record's delete
    /// once the history record is durable; `then` runs after that delete.
    pub(super) fn record_finished(
        &mut self,
        fw: &FrameworkEntry,
        ending: Ending,
        now: Millis,
        then: Vec<AfterWrite>,
        out: &mut Vec<Action>,
    ) {
        let finished = self.finished(fw, ending, now);
        let digest = match fw.record() {
            Record::Framework(r) => record_digest(&r),
            _ => unreachable!("FrameworkEntry::record builds a framework record"),
        };
        let seq = self.history.next_seq;
        self.history.next_seq = seq.saturating_add(1);
        let write = self.next_write();
        self.after_write.insert(
            write,
            vec![AfterWrite::HistoryDurable { framework: fw.id.clone(), seq, then }],
        );
        out.push(Action::Store(StoreCommand::Persist {
            write,
            record: Record::History(HistoryRecord {
                seq,
                framework_digest: digest,
                framework: finished.clone(),
            }),
        }));
        self.history.entries.insert(seq, finished);
        self.history.pending.insert(seq);
        self.evict_history(out);
    }

    /// The history record of a finished framework is durable: delete the
    /// framework's own record, unless the framework subscribed again since
    /// (possible only once its entry was evicted: its new record took the
    /// key; writes to one key apply in order). A job cannot take the id
    /// while this record is pending ([`Master::is_ending`], `create_job`).
    pub(super) fn on_history_durable(
        &mut self,
        now: Millis,
        framework: FrameworkId,
        seq: u64,
        then: Vec<AfterWrite>,
        out: &mut Vec<Action>,
    ) {
        self.history.pending.remove(&seq);
        if self.frameworks.contains_key(&framework) {
            for t in then {
                self.after_write_done(now, t, out);
            }
            return;
        }
        let write = self.next_write();
        self.after_write.insert(write, then);
        out.push(Action::Store(StoreCommand::Unpersist {
            write,
            key: RecordKey::Framework(framework),
            incarnation: None,
        }));
    }

    /// Deletes the oldest entries past `retained_frameworks`.
    fn evict_history(&mut self, out: &mut Vec<Action>) {
        while self.history.entries.len() > self.config.retained_frameworks {
            let Some((seq, _)) = self.history.entries.pop_first() else { break };
            self.history.pending.remove(&seq);
            let write = self.next_write();
            out.push(Action::Store(StoreCommand::Unpersist {
                write,
                key: RecordKey::History(seq),
                incarnation: None,
            }));
        }
    }

    /// A new leader's history, from the loaded history records; returns the
    /// ids of the framework records among `frameworks` that a history record
    /// says were finished (to drop and delete), and deletes what is past
    /// the limit.
    pub(super) fn recover_history(
        &mut self,
        records: Vec<HistoryRecord>,
        frameworks: &[FrameworkRecord],
        out: &mut Vec<Action>,
    ) -> Vec<FrameworkId> {
        let mut finished: FxHashMap<&FrameworkId, Vec<u32>> = FxHashMap::default();
        for r in &records {
            finished.entry(&r.framework.id).or_default().push(r.framework_digest);
        }
        let leftovers: Vec<FrameworkId> = frameworks
            .iter()
            .filter(|f| finished.get(&f.id).is_some_and(|d| d.contains(&record_digest(f))))
            .map(|f| f.id.clone())
            .collect();
        drop(finished);
        self.history = History::default();
        for r in records {
            self.history.next_seq = self.history.next_seq.max(r.seq.saturating_add(1));
            self.history.entries.insert(r.seq, r.framework);
        }
        self.evict_history(out);
        for id in &leftovers {
            let write = self.next_write();
            out.push(Action::Store(StoreCommand::Unpersist {
                write,
                key: RecordKey::Framework(id.clone()),
                incarnation: None,
            }));
        }
        leftovers
    }

    /// The history as a `StateReply` shows it: newest first, at most
    /// [`limits::MAX_HISTORY_SLOTS_SHOWN`] slots each, at most
    /// [`limits::MAX_HISTORY_STATE_BYTES`] in all; and how many entries were
    /// left out.
    pub(super) fn history_view(&self) -> (Vec<FinishedFramework>, u32) {
        let mut shown = Vec::new();
        let mut bytes = 0usize;
        let total = self.history.durable().count();
        for (_, f) in self.history.durable().rev() {
            let mut f = f.clone();
            f.drop_slots_after(limits::MAX_HISTORY_SLOTS_SHOWN);
            let len = f.encoded_len();
            if bytes.saturating_add(len) > limits::MAX_HISTORY_STATE_BYTES {
                break;
            }
            bytes += len;
            shown.push(f);
        }
        let omitted = u32::try_from(total - shown.len()).unwrap_or(u32::MAX);
        (shown, omitted)
    }
}

impl FinishedFramework {
    /// The postcard length of this entry.
    pub fn encoded_len(&self) -> usize {
        crate::codec::postcard_len(self)
    }

    /// Caps stored failure reasons at [`crate::limits::MAX_FAILURE_REASON_BYTES`],
    /// then drops slots from the end (counting them in `slots_omitted`)
    /// until the entry encodes in at most `max` bytes.
    pub fn fit(&mut self, max: usize) {
        for s in &mut self.slots {
            if let Some(ExecutorState::Failed { reason }) = &mut s.state {
                if reason.len() > crate::limits::MAX_FAILURE_REASON_BYTES {
                    *reason = crate::limits::cap_reason(std::mem::take(reason));
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
/// (`regent submit` tears its framework down once it is done, so a finished
/// application is COMPLETED or FAILED by its slots at once; with `--keep`,
/// or when its submitter went away, it ends when its failover timeout
/// expires, and is COMPLETED or FAILED by its slots then.)
pub(crate) fn ended_outcome<'a>(
    slots: impl Iterator<Item = &'a SlotOutcome> + Clone,
    otherwise: FrameworkOutcome,
) -> FrameworkOutcome {
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

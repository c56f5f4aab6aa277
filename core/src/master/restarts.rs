//! Restart policies at the leader: what the end of an executor means for a
//! slot of a group with a restart policy of its own
//! ([`crate::policy::RestartPolicy`]), and the backoff waits between runs.
//!
//! * **Batch** (the default mode): an exit 0 ends the slot. A failure (a
//!   non-zero exit, a failed launch) counts against the slot: once its
//!   failures in a row pass `attempts`, the slot fails; with no `attempts`,
//!   the group's shared budget (the master's `--max-executor-retries`)
//!   decides, as for a group without a policy. Until then the slot waits
//!   [`backoff`] and gets a new executor.
//! * **Service**: every end counts, an exit 0 too (a service is meant to
//!   run), and the slot is restarted after the same backoff; with no
//!   `attempts` it is restarted forever, with `attempts` it fails once its
//!   ends in a row pass them (a crash loop).
//! * In both modes, an executor that ran for at least `healthy_after`
//!   (from RUNNING) clears its slot's failures before its own end counts:
//!   the backoff starts again from `delay`.
//! * Ends that are no failure of the executor's own (LOST with its worker,
//!   killed by a worker's shutdown, stopped by an operator) refill the slot
//!   at once and count nothing, in every mode; a framework's kill ends it.
//! * The wait is durable: its end is stored as wall-clock ms in the group
//!   record ([`crate::store::SlotRestart`]) in the same write as the end
//!   that caused it, so a new leader keeps waiting rather than relaunching
//!   at once. A leader waits by its own monotonic clock; one that loads a
//!   wait waits what remains of it, but never longer than the policy's
//!   longest wait from its own now, so a stepped clock or two masters'
//!   clocks apart cannot park a slot for longer than its policy allows.
//!
//! A waiting slot is not open (`Master::slot_is_open`): it is in
//! [`Waits`], which [`super::Timer::Restart`] drains as the waits end.
//!
//! Tests: core/tests/restarts.rs, core/tests/job_promises.rs, the
//! unit tests below.

use super::Master;
use crate::ids::FrameworkId;
use crate::policy::{RestartMode, RestartPolicy};
use crate::protocol::ExecutorState;
use crate::store::GroupRecord;
use crate::time::Millis;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// A slot of a framework: (framework, group index, slot).
type SlotKey = (FrameworkId, usize, u32);

/// The wait before the run after `failures` ends in a row: `delay_ms`,
/// doubled for every further one, at most `max_delay_ms` (when set) and
/// never more than [`crate::limits::MAX_RESTART_DELAY`]; 0 before any
/// failure.
pub fn backoff(policy: &RestartPolicy, failures: u32) -> u64 {
    if failures == 0 || policy.delay_ms == 0 {
        return 0;
    }
    let wait = policy.delay_ms.saturating_mul(1u64 << (failures - 1).min(63));
    let cap = if policy.max_delay_ms == 0 { u64::MAX } else { policy.max_delay_ms };
    wait.min(cap).min(crate::limits::MAX_RESTART_DELAY.0)
}

/// The longest wait `policy` can ever ask for: the cap a loaded wait is
/// held to.
pub fn longest_wait(policy: &RestartPolicy) -> u64 {
    backoff(policy, u32::MAX)
}

/// What an executor's end that counts against its slot
/// ([`Master::count_end`]) makes of the slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Counted {
    /// The slot has failed: the reason.
    Failed(String),
    /// The slot gets a new executor after this many ms (0: at once).
    Retry(u64),
}

/// Counts one end against slot `slot` of `group` under its restart policy:
/// `ran_ms` is how long the executor ran (from RUNNING; 0 if it never
/// ran), `budget` the master's shared retry budget, `wall_now` the leader's
/// wall clock (the stored wait's term). Updates the slot's restart state
/// (and the group's shared retries when the policy has no `attempts`).
pub fn count_end(
    group: &mut GroupRecord,
    slot: u32,
    end: &ExecutorState,
    ran_ms: u64,
    budget: u32,
    wall_now: u64,
) -> Counted {
    let policy = group.spec.policy.restart.clone();
    let state = group.restarts.entry(slot).or_default();
    if policy.healthy_after_ms > 0 && ran_ms >= policy.healthy_after_ms {
        state.failures = 0;
    }
    state.failures = state.failures.saturating_add(1);
    let failures = state.failures;
    // The shared budget below needs `group` itself: the entry is looked up
    // again afterwards.
    let exhausted = match (policy.attempts, policy.mode) {
        (Some(attempts), _) => (failures > attempts).then(|| {
            format!("{failures} ends in a row; the restart policy allows {attempts} retries")
        }),
        (None, RestartMode::Service) => None,
        (None, RestartMode::Batch) => {
            group.retries_used = group.retries_used.saturating_add(1);
            (group.retries_used > budget)
                .then(|| format!("the group's {budget} retries are used up"))
        }
    };
    let state = group.restarts.entry(slot).or_default();
    if let Some(why) = exhausted {
        state.not_before_ms = 0;
        return Counted::Failed(format!("ended {}; {why}", describe_end(end)));
    }
    let wait = backoff(&policy, failures);
    state.not_before_ms = if wait == 0 { 0 } else { wall_now.saturating_add(wait) };
    Counted::Retry(wait)
}

/// An executor's end in words: `exited 3`, `exited 0`, `failed: no such
/// file`.
pub fn describe_end(end: &ExecutorState) -> String {
    match end {
        ExecutorState::Exited { code } => format!("exited {code}"),
        ExecutorState::Failed { reason } => format!("failed: {reason}"),
        other => other.name().to_ascii_lowercase(),
    }
}

/// The slots waiting for their next executor, by when the wait ends (the
/// leader's monotonic clock).
#[derive(Clone, Debug, Default)]
pub struct Waits {
    by_time: BTreeSet<(Millis, SlotKey)>,
    by_slot: FxHashMap<SlotKey, Millis>,
    /// The slots whose wait is a singleton's hold, not a restart backoff
    /// (docs/design.md#issue-45): their executor may still run, cut off.
    held: rustc_hash::FxHashSet<SlotKey>,
}

impl Waits {
    /// Slot `key` waits until `at` (replacing any earlier wait of it).
    pub fn insert(&mut self, key: SlotKey, at: Millis) {
        self.remove(&key);
        self.by_time.insert((at, key.clone()));
        self.by_slot.insert(key, at);
    }

    /// Slot `key` of a singleton group waits until `at` for an executor
    /// that may still run, cut off (replacing any earlier wait of it):
    /// [`Waits::held`] says so.
    pub fn insert_held(&mut self, key: SlotKey, at: Millis) {
        self.insert(key.clone(), at);
        self.held.insert(key);
    }

    /// Whether slot `key` waits as a singleton's hold
    /// ([`Waits::insert_held`]) rather than a restart backoff.
    pub fn held(&self, key: &SlotKey) -> bool {
        self.held.contains(key)
    }

    /// Slot `key` waits no more.
    pub fn remove(&mut self, key: &SlotKey) {
        if let Some(at) = self.by_slot.remove(key) {
            self.by_time.remove(&(at, key.clone()));
            self.held.remove(key);
        }
    }

    /// Until when slot `key` waits, if it does.
    pub fn until(&self, key: &SlotKey) -> Option<Millis> {
        self.by_slot.get(key).copied()
    }

    /// Whether slot `key` waits.
    pub fn contains(&self, key: &SlotKey) -> bool {
        self.by_slot.contains_key(key)
    }

    /// The earliest end of a wait.
    pub fn earliest(&self) -> Option<Millis> {
        self.by_time.first().map(|(at, _)| *at)
    }

    /// Removes and returns every slot whose wait has ended by `now`.
    pub fn take_due(&mut self, now: Millis) -> Vec<SlotKey> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.by_time.first() {
            if *at > now {
                break;
            }
            let (_, key) = self.by_time.pop_first().expect("just seen");
            self.by_slot.remove(&key);
            self.held.remove(&key);
            due.push(key);
        }
        due
    }

    /// How many slots wait, by framework and group index (one pass, for
    /// a snapshot).
    pub fn counts(&self) -> FxHashMap<(&FrameworkId, usize), u32> {
        let mut counts: FxHashMap<(&FrameworkId, usize), u32> = FxHashMap::default();
        for (f, g, _) in self.by_slot.keys() {
            *counts.entry((f, *g)).or_default() += 1;
        }
        counts
    }

    /// Forgets every wait of framework `fid` (removed), or of its group
    /// `gi` from slot `from` on (scaled down).
    pub fn forget(&mut self, fid: &FrameworkId, group_from: Option<(usize, u32)>) {
        let gone: Vec<SlotKey> = self
            .by_slot
            .keys()
            .filter(|(f, g, s)| {
                f == fid && group_from.is_none_or(|(gi, from)| *g == gi && *s >= from)
            })
            .cloned()
            .collect();
        for k in gone {
            self.remove(&k);
        }
    }
}

impl Master {
    /// Slot `slot` of framework `fid`'s group `gi` waits `wait_ms` from now
    /// (its executor just ended; the durable end of the wait is in the
    /// record already); `held`: the wait is a singleton's hold.
    pub(super) fn wait_to_restart(
        &mut self,
        fid: &FrameworkId,
        gi: usize,
        slot: u32,
        wait: (u64, bool),
        now: Millis,
    ) {
        let key = (fid.clone(), gi, slot);
        // A singleton's hold (docs/design.md#issue-45) is never shortened:
        // an executor of the slot may still run, cut off, until then. The
        // end of another executor of the slot (one a new leader adopted,
        // ended, from a worker's registration while it held the slot after
        // its takeover) says nothing of it (`--api-jobs --services
        // --singletons`: sim seed 83929, docs/design.md#simulator-seeds).
        let hold = self.restart_waits.until(&key).filter(|_| self.restart_waits.held(&key));
        if hold.is_some_and(|until| until >= now + Millis(wait.0)) {
            return;
        }
        match wait {
            (0, _) => self.restart_waits.remove(&key),
            (ms, true) => self.restart_waits.insert_held(key, now + Millis(ms)),
            (ms, false) => self.restart_waits.insert(key, now + Millis(ms)),
        }
    }

    /// A framework loaded from the store: its slots' stored waits that have
    /// not ended by this leader's clock go on, each at most the policy's
    /// longest wait from now (see the module docs).
    pub(super) fn resume_waits_of(&mut self, now: Millis, fid: &FrameworkId) {
        let Some(fw) = self.frameworks.get(fid) else { return };
        let mut waits = Vec::new();
        for (gi, g) in fw.groups.iter().enumerate() {
            let longest = longest_wait(&g.record.spec.policy.restart);
            for (slot, r) in &g.record.restarts {
                if r.not_before_ms == 0 {
                    continue;
                }
                let at = self.local(r.not_before_ms).min(now + Millis(longest));
                if at > now {
                    waits.push(((fid.clone(), gi, *slot), at));
                }
            }
        }
        for (key, at) in waits {
            self.restart_waits.insert(key, at);
        }
    }

    /// [`super::Timer::Restart`]: the slots whose wait has ended are open
    /// again and placed.
    pub(super) fn on_restart_timer(&mut self, now: Millis, out: &mut Vec<super::Action>) {
        for (fid, gi, slot) in self.restart_waits.take_due(now) {
            self.refresh_slot(&fid, gi, slot);
        }
        self.place(out);
    }
}

/// Forgets the restart state of slots `from..` of `group` (scaled down).
pub fn truncate(group: &mut GroupRecord, from: u32) {
    group.restarts.retain(|slot, _| *slot < from);
    group.counted.retain(|slot, _| *slot < from);
    group.replacing.retain(|slot, _| *slot < from);
    group.preempted.retain(|slot, _| *slot < from);
}

/// The slot's restart state once its executor exited 0 in batch mode (the
/// slot is done): none.
pub fn clear(group: &mut GroupRecord, slot: u32) {
    group.restarts.remove(&slot);
    group.counted.remove(&slot);
    group.replacing.remove(&slot);
    group.preempted.remove(&slot);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(delay_ms: u64, max_delay_ms: u64) -> RestartPolicy {
        RestartPolicy { delay_ms, max_delay_ms, ..Default::default() }
    }

    #[test]
    fn backoff_doubles_from_the_delay_up_to_the_cap() {
        let p = policy(1_000, 10_000);
        let waits: Vec<u64> = (0..7).map(|f| backoff(&p, f)).collect();
        assert_eq!(waits, [0, 1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
        assert_eq!(backoff(&policy(0, 10_000), 5), 0, "no delay, no wait");
        let uncapped = policy(1_000, 0);
        assert_eq!(backoff(&uncapped, 200), crate::limits::MAX_RESTART_DELAY.0);
        assert_eq!(backoff(&policy(u64::MAX / 2, 0), 3), crate::limits::MAX_RESTART_DELAY.0);
        assert_eq!(longest_wait(&p), 10_000);
    }

    #[test]
    fn backoff_never_shrinks_as_failures_grow() {
        fn prop(delay: u32, cap: u32, f: u32) -> bool {
            let p = policy(u64::from(delay), u64::from(cap));
            let f = f % 100;
            backoff(&p, f) <= backoff(&p, f + 1) && backoff(&p, f + 1) <= longest_wait(&p)
        }
        quickcheck::quickcheck(prop as fn(u32, u32, u32) -> bool);
    }
}

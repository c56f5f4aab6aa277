//! What a worker does with its singleton executors when it is cut off from
//! every master (docs/design.md#issue-45): an executor of a group with a
//! disconnect rule ([`crate::launch::Disconnect`]) is stopped once the
//! worker has heard nothing from the master it follows for the group's
//! `stop_after`, and its end is reported, when a master is reachable again,
//! as `Failed` with a reason saying so ([`crate::launch::cut_off_reason`]),
//! which the leader refills without charging a retry.
//!
//! Pure: time is the worker's `now`. Only an answer of the master the
//! worker follows to the worker's own request (a `Registered` to its
//! `RegisterWorker`, a `HeartbeatAck` to its `WorkerHeartbeat`) counts as
//! hearing from it, and it counts from when the request was *sent*
//! ([`Asked`]): the leader heard the request after that, so the worker's
//! clock never runs ahead of the leader's "last heard from this worker",
//! from which the leader counts before it places a replacement
//! ([`replace_after`]). Word the leader sends unasked (a `MasterChanged`,
//! a launch, a kill) proves nothing about what the leader has heard: a
//! leader that declared the worker DEAD can still reach it one way (seed
//! 2188 of the singleton soak, docs/simulator.md#singletons). The clock
//! starts when the worker starts, before any master is heard.

use crate::ids::Addr;
use crate::ids::{ExecutorId, FrameworkId};
use crate::launch::Disconnect;
use crate::time::Millis;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The kill grace the leader assumes for a group that names none: the
/// daemons' default (`regent worker --kill-grace`, 3 s). A worker given a
/// longer one should be paired with groups that name theirs.
pub const ASSUMED_KILL_GRACE: Millis = Millis(3_000);

/// How long after it last heard from a worker the leader may re-place a
/// singleton executor it lost with that worker: the group's `stop_after`
/// (the worker kills it then, by its own clock), plus its kill grace (the
/// process may take that long to end), plus a margin for clock rates and
/// late timers: 10 % of `stop_after` (a worker whose clock runs up to 10 %
/// slower than the leader's, far beyond what NTP-disciplined or even free
/// running crystal clocks drift, still stops first) and 1 s (a worker's
/// timer firing late, a loaded host). With `stop_after = "30s"` and the
/// default grace: 30 + 3 + 3 + 1 = 37 s.
pub fn replace_after(rule: Disconnect, kill_grace_ms: Option<u64>) -> Millis {
    let stop_after = Millis(rule.stop_after_ms);
    let grace = kill_grace_ms.map_or(ASSUMED_KILL_GRACE, Millis);
    stop_after + grace + Millis(rule.stop_after_ms / 10) + Millis(1_000)
}

/// The leader's holds on the slots of singleton groups of frameworks it
/// removed (a deleted job, a teardown) while an executor of theirs may run
/// on, cut off: by (framework id, group), until when a group of that name
/// in a framework created again under that id waits before it is placed.
/// Expired holds are dropped whenever one is added.
///
/// In memory. A new leader knows of what its predecessors removed only
/// the history (the ids of the frameworks that ended, not their groups):
/// a framework created after the takeover under an id the history names
/// (a job removed by a predecessor while its singleton ran on, cut off,
/// and submitted again) waits [`replace_after`] from the takeover, as
/// every singleton slot the store names does (docs/machines.md, "The wait
/// across a failover"). That wait is counted with the new group's rule: a
/// group created again with a shorter `stop_after` than the removed one's
/// may start before the old executor's worker stops it, by the
/// difference; and an id whose history entry was evicted is not held.
#[derive(Clone, Debug, Default)]
pub struct Holds {
    until: BTreeMap<(FrameworkId, String), Millis>,
    /// When this leader took over, and the ids its recovered history
    /// names ([`Holds::took_over`]).
    took_over: Option<(Millis, BTreeSet<FrameworkId>)>,
}

impl Holds {
    /// This leader took over at `now`, its history naming the frameworks
    /// `ended`: a singleton group of a framework created under one of
    /// those ids waits its [`replace_after`] from `now`
    /// ([`Holds::take`]).
    pub fn took_over(&mut self, now: Millis, ended: BTreeSet<FrameworkId>) {
        self.took_over = Some((now, ended));
    }

    /// Group `group` of `framework` waits until `until` if created again
    /// (the later of two holds counts).
    pub fn hold(&mut self, framework: FrameworkId, group: String, until: Millis, now: Millis) {
        self.until.retain(|_, t| *t > now);
        let t = self.until.entry((framework, group)).or_insert(until);
        *t = (*t).max(until);
    }

    /// The hold on singleton `group` of `framework`, created at `now`,
    /// taken (a framework created again uses it once): the later of the
    /// hold this leader kept when it removed a framework of that id and,
    /// if its recovered history names the id, `replace_after` (the new
    /// group's [`replace_after`]) from its takeover; `None` once both have
    /// passed.
    pub fn take(
        &mut self,
        framework: &FrameworkId,
        group: &str,
        now: Millis,
        replace_after: Millis,
    ) -> Option<Millis> {
        let held = self.until.remove(&(framework.clone(), group.to_owned()));
        let takeover = self
            .took_over
            .as_ref()
            .filter(|(_, ended)| ended.contains(framework))
            .map(|(t, _)| *t + replace_after);
        let until = held.max(takeover)?;
        (until > now).then_some(until)
    }
}

/// The most heartbeats [`Asked`] dates at once; later ones go undated
/// while that many are unanswered (an answer is then dated at an older
/// sending: earlier, never later, than the truth).
pub const MAX_UNANSWERED: usize = 64;

/// The worker's requests that a master's answer dates: by master, when
/// the oldest registration not yet answered was sent, and when each
/// heartbeat not yet acknowledged was, oldest first. A master answers one
/// connection's heartbeats in order, so an acknowledgement answers the
/// oldest one pending (a lost heartbeat or acknowledgement only makes the
/// date older). A master's entries are dropped when its connection goes
/// down (nothing sent on it can be answered any more).
#[derive(Clone, Debug, Default)]
pub struct Asked {
    registrations: BTreeMap<Addr, Millis>,
    heartbeats: BTreeMap<Addr, VecDeque<Millis>>,
}

impl Asked {
    /// A `RegisterWorker` went to `master` at `now`.
    pub fn registration(&mut self, master: &Addr, now: Millis) {
        self.registrations.entry(master.clone()).or_insert(now);
    }

    /// `master` answered a registration: when the oldest one pending was
    /// sent, if any is. The heartbeats still pending to it are dropped: a
    /// worker heartbeats only while registered, so they were all sent
    /// before that registration, and a master answers a connection's
    /// messages in order, so what answers they got (an acknowledgement, or
    /// none while the worker was registering) came before this.
    pub fn registered(&mut self, master: &Addr) -> Option<Millis> {
        let sent = self.registrations.remove(master)?;
        self.heartbeats.remove(master);
        Some(sent)
    }

    /// A `WorkerHeartbeat` went to `master` at `now`.
    pub fn heartbeat(&mut self, master: &Addr, now: Millis) {
        let pending = self.heartbeats.entry(master.clone()).or_default();
        if pending.len() < MAX_UNANSWERED {
            pending.push_back(now);
        }
    }

    /// `master` answered a heartbeat (an acknowledgement, or
    /// `ReconnectWorker`, which answers nothing else): when the oldest one
    /// pending was sent. An answer that may answer something else
    /// (`NotLeader`) must not come here: an extra answer would date later
    /// ones at newer sendings than their own.
    pub fn heartbeat_answered(&mut self, master: &Addr) -> Option<Millis> {
        self.heartbeats.get_mut(master)?.pop_front()
    }

    /// The connection to `master` went down: nothing sent on it will be
    /// answered.
    pub fn link_down(&mut self, master: &Addr) {
        self.registrations.remove(master);
        self.heartbeats.remove(master);
    }
}

/// The worker's watch over its singleton executors (see the module
/// documentation).
#[derive(Clone, Debug, Default)]
pub struct CutOff {
    /// When the worker last heard from the master it follows (or started).
    heard_at: Millis,
    /// When the worker last heard from the master it follows, its start
    /// left out: the lease a runtime hands to the executors' own hosts
    /// ([`CutOff::word`], docs/design.md#issue-45).
    word: Option<Millis>,
    /// Each live singleton executor's rule, and whether it is being
    /// stopped for it.
    guarded: BTreeMap<ExecutorId, Guarded>,
}

#[derive(Clone, Copy, Debug)]
struct Guarded {
    rule: Disconnect,
    stopping: bool,
}

impl CutOff {
    /// A watch that counts from `now` (the worker's start).
    pub fn new(now: Millis) -> Self {
        CutOff { heard_at: now, word: None, guarded: BTreeMap::new() }
    }

    /// The worker (process) started at `now`: the watch counts from there,
    /// but that is no word from a master ([`CutOff::word`] stays as it is).
    pub fn started(&mut self, now: Millis) {
        self.heard_at = self.heard_at.max(now);
    }

    /// The worker heard from the master it follows: an answer to a
    /// request it sent at `sent` ([`Asked`]).
    pub fn heard(&mut self, sent: Millis) {
        self.heard_at = self.heard_at.max(sent);
        self.word = Some(self.word.map_or(sent, |w| w.max(sent)));
    }

    /// When the worker last heard from the master it follows (or started).
    pub fn heard_at(&self) -> Millis {
        self.heard_at
    }

    /// When the worker last heard from the master it follows, dated at
    /// its request's sending; `None` before its first word (a worker
    /// process that just started has none, whatever an earlier process
    /// heard). What a runtime persists for the hosts of its singleton
    /// executors, which stop them at `word + stop_after` even when this
    /// worker's process is down or paused (docs/design.md#issue-45): never
    /// later than this watch's own deadline, and never extended by a
    /// start.
    pub fn word(&self) -> Option<Millis> {
        self.word
    }

    /// Whether an executor with `rule` would be due to be stopped at `now`
    /// ([`CutOff::due`]): no word from a master for its `stop_after`. A
    /// singleton whose launch arrives then is not started.
    pub fn lapsed(&self, rule: Disconnect, now: Millis) -> bool {
        self.heard_at + Millis(rule.stop_after_ms) <= now
    }

    /// `executor` started with `rule`: watched until [`CutOff::forget`].
    pub fn guard(&mut self, executor: ExecutorId, rule: Disconnect) {
        self.guarded.insert(executor, Guarded { rule, stopping: false });
    }

    /// `executor` ended: no longer watched. Its reason, if the watch
    /// stopped it.
    pub fn forget(&mut self, executor: &ExecutorId) -> Option<String> {
        let g = self.guarded.remove(executor)?;
        g.stopping.then(|| crate::launch::cut_off_reason(g.rule))
    }

    /// When the next executor is due to be stopped, if none is being
    /// stopped for it yet.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.guarded
            .values()
            .filter(|g| !g.stopping)
            .map(|g| self.heard_at + Millis(g.rule.stop_after_ms))
            .min()
    }

    /// The executors whose `stop_after` has passed at `now` without word
    /// from a master, each marked as being stopped (returned once).
    #[must_use]
    pub fn due(&mut self, now: Millis) -> Vec<ExecutorId> {
        let heard_at = self.heard_at;
        self.guarded
            .iter_mut()
            .filter(|(_, g)| !g.stopping && heard_at + Millis(g.rule.stop_after_ms) <= now)
            .map(|(id, g)| {
                g.stopping = true;
                id.clone()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_each_singleton_once_after_its_stop_after_without_word() {
        let mut c = CutOff::new(Millis(1_000));
        let (a, b) = (ExecutorId("fw/a#0#1".into()), ExecutorId("fw/b#0#1".into()));
        c.guard(a.clone(), Disconnect::after_ms(30_000));
        c.guard(b.clone(), Disconnect::after_ms(60_000));
        assert_eq!(c.next_deadline(), Some(Millis(31_000)));
        // A (re)start counts, but is no word to hand on.
        c.started(Millis(2_000));
        assert_eq!(c.next_deadline(), Some(Millis(32_000)));
        assert_eq!(c.word(), None, "a start is no word from a master");
        // Word from the master moves every deadline.
        c.heard(Millis(10_000));
        assert_eq!(c.word(), Some(Millis(10_000)));
        c.heard(Millis(9_000));
        assert_eq!(c.word(), Some(Millis(10_000)), "an older answer moves nothing back");
        assert_eq!(c.next_deadline(), Some(Millis(40_000)));
        assert!(c.due(Millis(39_999)).is_empty());
        assert_eq!(c.due(Millis(40_000)), vec![a.clone()]);
        assert!(c.due(Millis(40_001)).is_empty(), "returned once");
        assert_eq!(c.next_deadline(), Some(Millis(70_000)));
        assert_eq!(c.forget(&a).as_deref(), Some("stopped: no master heard for 30s"));
        // An executor that ends by itself is forgotten without a reason.
        assert_eq!(c.forget(&b), None);
        assert_eq!(c.next_deadline(), None);
    }

    #[test]
    fn answers_are_dated_at_their_request_in_order_and_lost_with_the_link() {
        let (m1, m2) = (Addr("m1:7077".into()), Addr("m2:7077".into()));
        let mut a = Asked::default();
        a.heartbeat(&m1, Millis(1_000));
        a.heartbeat(&m1, Millis(2_000));
        a.heartbeat(&m2, Millis(2_500));
        assert_eq!(a.heartbeat_answered(&m1), Some(Millis(1_000)), "oldest first");
        assert_eq!(a.heartbeat_answered(&m1), Some(Millis(2_000)));
        assert_eq!(a.heartbeat_answered(&m1), None, "an answer to nothing dates nothing");
        a.registration(&m1, Millis(3_000));
        a.registration(&m1, Millis(4_000));
        a.heartbeat(&m1, Millis(3_500));
        assert_eq!(a.registered(&m1), Some(Millis(3_000)), "the oldest registration pending");
        assert_eq!(a.registered(&m1), None);
        assert_eq!(
            a.heartbeat_answered(&m1),
            None,
            "a registration's answer ends the heartbeats before it"
        );
        a.link_down(&m2);
        assert_eq!(a.heartbeat_answered(&m2), None, "sent on a connection that is gone");
        for t in 0..(MAX_UNANSWERED as u64 + 5) {
            a.heartbeat(&m1, Millis(t));
        }
        for t in 0..MAX_UNANSWERED as u64 {
            assert_eq!(a.heartbeat_answered(&m1), Some(Millis(t)));
        }
        assert_eq!(a.heartbeat_answered(&m1), None, "bounded: later ones went undated");
    }

    #[test]
    fn the_leader_waits_stop_after_grace_and_a_margin() {
        let rule = Disconnect::after_ms(30_000);
        assert_eq!(replace_after(rule, None), Millis(37_000));
        assert_eq!(replace_after(rule, Some(10_000)), Millis(44_000));
    }
}

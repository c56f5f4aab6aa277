//! The elector machine: the ZooKeeper leader-election recipe, pure.
//!
//! The elector asks the runtime for coordination operations ([`ZkOp`](crate::zk::ZkOp), each
//! with a [`RequestId`]) and for sessions, and is fed their results, watch
//! notifications and session events. It reports who leads
//! ([`Action::LeaderNamed`]) and whether this process does
//! ([`Action::Elected`], [`Action::Suspended`], [`Action::Resumed`],
//! [`Action::Revoked`]).
//!
//! The recipe:
//!
//! * the candidate node is an ephemeral-sequential child of
//!   `<root>/election/`, named in Curator's protected mode
//!   ([`CandidateName`]) and holding the master's id and address
//!   and the acting lease it chose from its measured round trip
//!   ([`CandidateData`]); the lowest sequence leads; every other candidate
//!   watches its predecessor (to know when to lead) and the leader (to report
//!   `LeaderNamed` when it changes);
//! * every (re)connection starts a *round*: `Sync`, `GetChildren`, then adopt
//!   the node carrying this session's protected token, or create one. A
//!   `ConnectionLoss` on create therefore never leads to a blind second
//!   create (AURORA-1061, CURATOR-45, CURATOR-202); if more than one node
//!   carries the token the lowest is kept and the rest deleted; nodes left by
//!   an *abandoned* session of this process are deleted; only session expiry
//!   (or abandoning the session) discards the node;
//! * on disconnect a leader is *suspended*: it stops acting but keeps its
//!   node; reconnecting within the session resumes leadership without a new
//!   election, once the round has confirmed that its node still leads;
//! * the leader holds a *lease*: [`Config::lease_len`] counted from the send
//!   time of its last acknowledged request (or from asking for the session).
//!   The server cannot have expired the session before the negotiated
//!   timeout has passed since it last heard from us, and it heard from us no
//!   earlier than we sent. The lease is checked on every `handle`; when it
//!   runs out the elector reports `Revoked`, closes the session and joins
//!   again with a new session and a new node. While connected and idle the
//!   elector sends a `Sync` followed by an `Exists` on its own node every
//!   third of the session timeout to keep the lease fresh. Only requests the
//!   ensemble's quorum must take part in (`Sync` and writes) extend the
//!   lease: a follower cut off from the quorum can still answer reads from
//!   its own copy, and a read it answered proves nothing about the session.
//!
//! The *acting lease* ([`Config::acting_lease`]) guards commands to peers:
//! a new leader waits 1.1 × the largest lease of a leader it may have
//! replaced + 10 ms ([`Elector::commands_from`]): the leases of candidates
//! that left its listings shortly before (read from their node data) and
//! the *deposition marker* ([`DeposeMarker`]), the data of the election
//! directory, which a standby deposing a leader writes in the same multi as
//! the delete and which every listing reads right after. A leader whose
//! wait is over empties the marker again.
//!
//! [`Event::Abandon`] gives leadership up on purpose (docs/design.md#leadership-that-cannot-act-is-given-up): the
//! session is closed in the same step and the elector joins again with a
//! fresh session and a new candidate node, at the end of the queue.
//!
//! Tests: core/src/elector/tests.rs (the recipe against the ZooKeeper
//! model, scenario by scenario), tests/tests/elector_props.rs (quickcheck
//! over connection loss, lost replies, expiry, pauses),
//! core/tests/master_node.rs and core/tests/fast_takeover_probe.rs (in the
//! master node).

mod depose;
mod lease;
mod members;
mod name;
mod round;
mod session;
#[cfg(all(test, feature = "testkit"))]
mod tests;

pub use name::{CandidateData, CandidateName, DeposeMarker, LEGACY_ACTING_LEASE, MAX_ACTING_LEASE};

use crate::ids::{Addr, Epoch, MasterId};
use crate::rng::Jitter;
use crate::time::Millis;
use crate::zk::{MultiOp, RequestId, SessionId, WatchKind, ZkCommand, ZkError, ZkEvent, ZkResult};

/// Elector configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The cluster's root path, e.g. `/regent/prod`; candidates live under
    /// `<root>/election/`. Missing parents are created (persistent, empty).
    pub root: String,
    /// Fresh for this process, from OS entropy (the protected-mode token).
    pub guid: u64,
    /// This master's id (candidate data).
    pub id: MasterId,
    /// This master's advertised address (candidate data).
    pub addr: Addr,
    /// Seed of the jitter generator (keep-alive spacing).
    pub seed: u64,
    /// The session timeout asked for; the server clamps it (by default into
    /// [2, 20] × tickTime) and the elector uses the negotiated one.
    /// Default 10 s.
    pub session_timeout: Millis,
    /// The smallest lease safety margin. Default 200 ms. See
    /// [`Config::lease_len`].
    pub lease_margin_min: Millis,
    /// Delay before retrying a round after an unexpected error (e.g. the
    /// election path was deleted under us). Default 1 s.
    pub retry_interval: Millis,
    /// The smallest *acting lease* L (default 100 ms): a leader sends
    /// commands that start, kill or shut anything down only while a `Sync`
    /// followed by an `Exists` on its own node, sent less than L ago, has
    /// confirmed the node ([`Elector::may_command`]); a new leader sends
    /// none until 1.1 × the L of every leader it may have replaced + 10 ms
    /// after its election ([`Elector::commands_from`]). Messages to workers
    /// are not store writes, so the store fence cannot stop a deposed
    /// leader's commands; this lease does (see README, "Fast takeover").
    ///
    /// Each candidate chooses its own L when it creates its node, from the
    /// ZooKeeper round trip it measured ([`Config::acting_lease_for`]), and
    /// writes it in the node's data ([`CandidateData::acting_lease`]), so
    /// a successor can read it.
    pub acting_lease: Millis,
    /// The largest acting lease a candidate chooses (default 3 s: round
    /// trips up to about 1.45 s let commands flow without a pause, up to
    /// 3 s in bursts). A new leader that cannot know which lease a deposed
    /// leader held (unreadable data) waits for this one.
    pub acting_lease_max: Millis,
    /// Test-only: treat a create that got `ConnectionLoss` like the old
    /// twitter-commons library did (forget it and create again after
    /// reconnecting, recognising only the node a create reply named). This
    /// re-introduces AURORA-1061; never set it outside tests.
    #[doc(hidden)]
    pub unsafe_no_adopt_after_connection_loss: bool,
    /// Test-only: never check the lease. A leader that was paused longer
    /// than its session keeps acting on the leadership it held before the
    /// pause until some later event tells it otherwise, and
    /// [`Elector::is_acting`] ignores the lease. Exists so the whole-cluster
    /// simulator can prove it detects that; never set it outside tests.
    #[doc(hidden)]
    pub unsafe_no_lease_check: bool,
    /// Test-only: send commands whenever acting. [`Elector::may_command`]
    /// ignores the acting lease and a new leader's
    /// [`Config::command_wait`], so a deposed leader that has not yet seen
    /// its node go may command beside its successor. This removes the
    /// safety of the fast takeover; it exists so the whole-cluster simulator
    /// can prove it detects that. Never set it outside tests.
    #[doc(hidden)]
    pub unsafe_no_acting_lease: bool,
}

impl Config {
    /// A configuration with the documented defaults; the seed is the GUID.
    pub fn new(root: impl Into<String>, guid: u64, id: MasterId, addr: Addr) -> Self {
        Config {
            root: root.into(),
            guid,
            id,
            addr,
            seed: guid,
            session_timeout: Millis(10_000),
            lease_margin_min: Millis(200),
            retry_interval: Millis(1_000),
            acting_lease: Millis(100),
            acting_lease_max: Millis(3_000),
            unsafe_no_adopt_after_connection_loss: false,
            unsafe_no_lease_check: false,
            unsafe_no_acting_lease: false,
        }
    }

    /// `<root>/election`.
    pub fn election_path(&self) -> String {
        format!("{}/election", self.root.trim_end_matches('/'))
    }

    /// The lease for a negotiated session timeout `t`:
    /// `t - max(t / 3, lease_margin_min)`.
    ///
    /// Why a margin at all: the lease starts at a send time we know, and
    /// the server's expiry clock starts at a receive time no earlier, so
    /// `t` alone would already be safe with perfect clocks. The margin
    /// absorbs clock-rate differences between us and the server, the time
    /// the runtime needs to act on `Revoked` (stop talking to workers)
    /// before a standby can see our node vanish, and a process paused right
    /// after a lease check. A third of the timeout matches the client's own
    /// ping cadence, so a leader that stops hearing the server is revoked
    /// after about two missed pings.
    pub fn lease_len(&self, t: Millis) -> Millis {
        t - Millis((t.0 / 3).max(self.lease_margin_min.0))
    }

    /// How long a new leader waits after its election before its first
    /// command when every leader it may have replaced used the smallest
    /// lease: [`Config::command_wait_for`] of [`Config::acting_lease`].
    pub fn command_wait(&self) -> Millis {
        Self::command_wait_for(self.acting_lease)
    }

    /// How long a new leader waits after its election before its first
    /// command, when the leader it replaced held the acting lease `l`:
    /// `1.1 × l + 10 ms`. A deposed leader's last command left before its
    /// last confirmation's send time + l, and that send time precedes the
    /// deletion that let this master lead; the 10 % and 10 ms absorb
    /// clock-rate differences between the two hosts.
    pub fn command_wait_for(l: Millis) -> Millis {
        Millis(l.0.saturating_add(l.0 / 10).saturating_add(10))
    }

    /// The acting lease a candidate chooses when it creates its node, for
    /// the ZooKeeper round trip `rtt` it measured on the way (the largest
    /// of its session's replies so far): `acting_lease + 2 × rtt`, at most
    /// [`Config::acting_lease_max`].
    ///
    /// Why twice the round trip: one confirmation is in flight at a time;
    /// sent at *c*, it comes back at *c* + rtt and covers commands until
    /// *c* + L, while the next one, sent then, comes back at *c* + 2 rtt. So
    /// with L ≥ 2 rtt a stream of commands never pauses, and the smallest
    /// lease on top absorbs jitter. A leader whose round trip outgrows its
    /// lease later gives its leadership up and joins with a larger one
    /// ([`Action::Outgrown`]).
    pub fn acting_lease_for(&self, rtt: Millis) -> Millis {
        let max = self.acting_lease_max.max(self.acting_lease);
        Millis(self.acting_lease.0.saturating_add(rtt.0.saturating_mul(2))).min(max)
    }

    fn path_prefixes(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut acc = String::new();
        for part in self.election_path().split('/').filter(|p| !p.is_empty()) {
            acc.push('/');
            acc.push_str(part);
            out.push(acc.clone());
        }
        out
    }
}

/// What happens to an elector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The process starts: the elector asks for a session.
    Start,
    /// The coordination client reports: a session connected, dropped or
    /// expired, a reply to an [`Action::Zk`] request, a watch that fired.
    /// Fed exactly as the client reported it.
    Zk(ZkEvent),
    /// A deadline set by [`Action::SetTimer`] passed.
    Timer(Timer),
    /// Give up for good (docs/design.md#leadership-that-cannot-act-is-given-up): close the session and ignore every
    /// later event.
    Shutdown,
    /// Give up the current candidacy (leading or not) and join again: the
    /// session is closed in this step (so a standby can lead at once), and a
    /// new session and a new candidate node are asked for. A leader that
    /// cannot act (a fenced write, a damaged store) or an operator's
    /// step-down uses this (docs/design.md#leadership-that-cannot-act-is-given-up).
    Abandon,
    /// As [`Event::Abandon`], but the new session (and candidate node) is
    /// asked for only after `rejoin_after`: a leader that gave up because
    /// the store is damaged would find it damaged again at once.
    AbandonFor {
        /// How long to stay out of the election.
        rejoin_after: Millis,
    },
    /// The leader wants to send a command: confirm the acting lease (a
    /// `Sync`, then an `Exists` with a watch on the own node), unless a
    /// confirmation is in flight already. Answered by
    /// [`Action::Confirmed`]. Ignored unless leading and not suspended.
    Confirm,
    /// Fast takeover: the leader's process is gone (its connection ended
    /// and its port refuses connections). Delete every election node whose
    /// ephemeral owner is the session of the node that leads, provided the
    /// elector still names `leader` as leader, this master is a settled
    /// standby, and it has not deposed anyone in the last session timeout.
    /// Reported by [`Action::Deposed`].
    Depose {
        /// The master the detector saw die.
        leader: MasterId,
    },
}

/// What the runtime must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Execute `command` on the coordination client (a new session, a
    /// close, a request; see [`ZkCommand`] for what each asks) and feed what
    /// it reports as [`Event::Zk`].
    Zk(ZkCommand),
    /// Feed `Event::Timer(timer)` at `at` (replaces an earlier deadline).
    SetTimer {
        /// Which timer.
        timer: Timer,
        /// When.
        at: Millis,
    },
    /// Forget the deadline of `timer`.
    CancelTimer {
        /// Which timer.
        timer: Timer,
    },
    /// The leader this elector sees changed (possibly to itself): named,
    /// not proven. `floor` is an epoch the leader's epoch is at least (its
    /// sequence + 1). It is a floor, never the epoch: sequences restart if
    /// the election path is deleted, so the master still takes the max with
    /// its durable epoch, and only the leader's own `HelloReply` proves its
    /// epoch.
    LeaderNamed {
        /// The leader's master id.
        id: MasterId,
        /// The leader's address.
        addr: Addr,
        /// The epoch floor.
        floor: Epoch,
    },
    /// This process leads. Feed the master `Elected`; it must make an epoch
    /// of at least `floor` durable before acting (docs/design.md#epochs-fence-everything).
    Elected {
        /// The epoch floor.
        floor: Epoch,
    },
    /// The session is in doubt: stop acting as leader, keep state.
    Suspended,
    /// The session is back and this process still leads: act again.
    Resumed,
    /// Leadership is lost: stop acting as leader (the elector joins again).
    Revoked,
    /// The masters of the election changed: every candidate's advertised
    /// address, in election order (the leader first). The leader keeps a
    /// watch on the candidates, so it reports every join and departure; a
    /// standby reports what it saw at its last listing.
    Masters {
        /// The addresses.
        addrs: Vec<Addr>,
    },
    /// A confirmation of the acting lease came back
    /// ([`Event::Confirm`], or the keep-alive): commands may go out until
    /// `until` (if it is already past, the round trip took longer than the
    /// lease: confirm again).
    Confirmed {
        /// The end of the acting lease.
        until: Millis,
    },
    /// The leader's ZooKeeper round trip outgrew the acting lease written
    /// in its node: [`OUTGROWN_AFTER`] confirmations in a row, over
    /// [`OUTGROWN_FOR`], came back after the lease they were to confirm had
    /// run out, so it can command
    /// nothing, and a new node would carry a larger lease. The composition
    /// gives the leadership up ([`Event::Abandon`], logging why): the
    /// elector joins again with a new session and a node whose lease fits
    /// the round trip (a standby closer to ZooKeeper may lead meanwhile).
    Outgrown {
        /// The last confirmation's round trip.
        round_trip: Millis,
        /// The acting lease of the leader's node.
        acting_lease: Millis,
    },
    /// What a [`Event::Depose`] came to, for the log and the counters.
    Deposed {
        /// The master deposed (or not).
        leader: MasterId,
        /// What happened.
        outcome: DeposeOutcome,
    },
}

/// How many confirmations in a row must come back after the lease they
/// were to confirm ran out, over at least [`OUTGROWN_FOR`], before the
/// leader reports [`Action::Outgrown`] (one slow answer, or a busy host for
/// a moment, is jitter, not a far ZooKeeper).
pub const OUTGROWN_AFTER: u32 = 3;

/// See [`OUTGROWN_AFTER`].
pub const OUTGROWN_FOR: Millis = Millis(2_000);

/// What one [`Event::Depose`] came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeposeOutcome {
    /// The election node `node` of the leader's session was deleted.
    Deleted {
        /// The node's name.
        node: String,
    },
    /// Nothing was deleted: `reason` says why (not settled, the leader
    /// changed meanwhile, deposed someone less than a session timeout ago,
    /// `NoAuth`, `NoNode`, ...). The session timeout applies as usual.
    Skipped {
        /// Why.
        reason: String,
    },
}

/// The elector's named deadlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Timer {
    /// Send the keep-alive (a `Sync`, then an `Exists` on the own node) if
    /// idle.
    Ping,
    /// The leader's lease may have run out: check it.
    Lease,
    /// Retry a round after an unexpected error.
    Retry,
    /// Join the election again after [`Event::AbandonFor`].
    Rejoin,
}

/// What an elector shows an observer (tests, status pages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectorStatus {
    /// Elected (possibly suspended).
    pub leader: bool,
    /// Elected but suspended.
    pub suspended: bool,
    /// Elected, not suspended, lease valid at the time asked.
    pub acting: bool,
    /// The current session, if connected or reconnecting.
    pub session: Option<SessionId>,
    /// The own candidate node's name, if known.
    pub node: Option<String>,
    /// The end of the lease (meaningful while leader).
    pub lease_until: Millis,
    /// Connected, nothing in flight for the current round, node known.
    pub settled: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Session {
    None,
    Opening { asked_at: Millis },
    Up { id: SessionId, timeout: Millis },
    Down { id: SessionId, timeout: Millis },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Waiting for a session, a reconnect or the retry timer.
    Waiting,
    EnsurePath(usize),
    Sync,
    List,
    Create,
    Settled,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Purpose {
    EnsurePath(usize),
    Sync,
    List,
    Create,
    Delete,
    Watch(String),
    /// The leader's `Exists` watch on its own node (never a wait: only a
    /// leader sets it).
    WatchSelf,
    /// The keep-alive's or a confirmation's `Sync`: answered only through
    /// the quorum.
    PingSync,
    /// The `Exists` (with a watch) on the own node that follows a
    /// `PingSync`: when it finds the node, the acting lease runs from the
    /// sync's send time. Carries the node's path.
    Confirm(String),
    /// Fast takeover: the delete of a node of the deposed leader's session.
    DeposeDelete {
        /// The master deposed.
        leader: MasterId,
        /// The node.
        node: String,
    },
    /// Fast takeover: the listing that looks for duplicates of the deposed
    /// leader's node (AURORA-1061).
    DeposeList {
        /// The master deposed.
        leader: MasterId,
        /// Its session.
        owner: SessionId,
    },
    /// Fast takeover: the owner of one candidate of that listing.
    DeposeRead {
        /// The master deposed.
        leader: MasterId,
        /// Its session.
        owner: SessionId,
        /// The node.
        node: String,
    },
    /// The election directory's data (a [`DeposeMarker`]), read right
    /// after each listing: the listing is acted on once it is back.
    Marker,
    /// A leader whose wait is over empties the marker (conditional on the
    /// version it read).
    MarkerClear,
    /// The leader's watching listing of the candidates (the master set).
    Members,
    /// Reading one candidate's data (its id and address) for the master
    /// set.
    Member(String),
}

impl Purpose {
    /// Whether a successful reply proves the quorum heard the request (so
    /// the session lived when it was sent): syncs and writes. Reads may be
    /// answered by a follower that lost the quorum.
    fn confirms_session(&self) -> bool {
        matches!(
            self,
            Purpose::EnsurePath(_)
                | Purpose::Sync
                | Purpose::Create
                | Purpose::Delete
                | Purpose::PingSync
                | Purpose::DeposeDelete { .. }
                | Purpose::MarkerClear
        )
    }
}

#[derive(Clone, Debug)]
struct Pending {
    purpose: Purpose,
    round: u64,
    session: SessionId,
    sent_at: Millis,
}

/// The elector machine.
///
/// Its state is grouped into the parts each handler works on: the
/// coordination session and the requests on it (`session`), the candidacy
/// and its election rounds (`candidacy`), this candidacy's leadership and
/// its acting lease (`leadership`), what it sees of the leader
/// (`leader_seen`), the master set (`members`) and the fast takeover
/// (`depose`).
#[derive(Debug)]
pub struct Elector {
    config: Config,
    jitter: Jitter,
    /// `<root>/election` ([`Config::election_path`]).
    election: String,
    /// After [`Event::Shutdown`]: every later event is ignored.
    stopped: bool,
    session: session::SessionPart,
    candidacy: round::Candidacy,
    leadership: lease::Leadership,
    leader_seen: round::LeaderSeen,
    members: members::Members,
    depose: depose::Depose,
}

impl Elector {
    /// An elector that has not started; feed [`Event::Start`].
    pub fn new(config: Config) -> Self {
        Elector {
            jitter: Jitter::new(config.seed),
            election: config.election_path(),
            config,
            stopped: false,
            session: session::SessionPart::default(),
            candidacy: round::Candidacy::default(),
            leadership: lease::Leadership::default(),
            leader_seen: round::LeaderSeen::default(),
            members: members::Members::default(),
            depose: depose::Depose::default(),
        }
    }

    /// The elector's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The current session (connected or reconnecting), if any.
    pub fn session(&self) -> Option<SessionId> {
        self.current_session()
    }

    /// The full path of the own candidate node, if known.
    pub fn node_path(&self) -> Option<String> {
        self.candidacy.node.as_ref().map(|(n, _)| format!("{}/{}", self.election, n))
    }

    /// A check that fences a leader's writes by its election node: put it
    /// first in a [`ZkOp::Multi`](crate::zk::ZkOp::Multi) so the write fails once the node is gone.
    pub fn fence(&self) -> Option<MultiOp> {
        if !self.leadership.leads() {
            return None;
        }
        self.node_path().map(|path| MultiOp::Check { path, version: 0 })
    }

    /// What the elector shows an observer at `now`.
    pub fn status(&self, now: Millis) -> ElectorStatus {
        let session = match self.session.state {
            Session::Up { id, .. } | Session::Down { id, .. } => Some(id),
            _ => None,
        };
        let in_flight = self.session.pending.values().any(|p| {
            p.round == self.candidacy.round
                && !matches!(
                    p.purpose,
                    Purpose::Confirm(_)
                        | Purpose::PingSync
                        | Purpose::Delete
                        | Purpose::MarkerClear
                        | Purpose::DeposeDelete { .. }
                        | Purpose::DeposeList { .. }
                        | Purpose::DeposeRead { .. }
                )
        });
        ElectorStatus {
            leader: self.leadership.leads(),
            suspended: self.leadership.suspended(),
            acting: self.is_acting(now),
            session,
            node: self.candidacy.node.as_ref().map(|(n, _)| n.clone()),
            lease_until: self.lease_end(),
            settled: matches!(self.session.state, Session::Up { .. })
                && self.candidacy.step == Step::Settled
                && !in_flight
                && self.candidacy.node.is_some(),
        }
    }

    /// Handles one event at time `now`.
    #[must_use]
    pub fn handle(&mut self, now: Millis, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        if self.stopped {
            return out;
        }
        // A paused process must not act on a lease it no longer holds
        // (docs/design.md#time-is-an-input): check before anything else.
        self.check_lease(now, &mut out);
        match event {
            Event::Start => {
                if self.session.state == Session::None {
                    self.ask_session(now, &mut out);
                }
            }
            Event::Zk(ZkEvent::SessionConnected { session, timeout }) => {
                self.on_connected(now, session, timeout, &mut out)
            }
            Event::Zk(ZkEvent::Disconnected { session }) => self.on_disconnected(session, &mut out),
            Event::Zk(ZkEvent::Expired { session }) => {
                if self.current_session() == Some(session) {
                    self.abandon(now, false, &mut out);
                }
            }
            Event::Zk(ZkEvent::Reply { req, result }) => {
                self.on_reply(now, req, result, &mut out);
                if self.session.ping_owed {
                    self.keep_session(now, &mut out);
                }
            }
            Event::Zk(ZkEvent::Watch { session, event }) => {
                let own = self
                    .candidacy
                    .node
                    .as_ref()
                    .is_some_and(|(n, _)| event.path.rsplit('/').next() == Some(n.as_str()));
                if own && self.current_session() == Some(session) {
                    // Our own node changed or vanished (a standby's fast
                    // takeover): no command goes out from here on.
                    self.leadership.acting_from = Millis::ZERO;
                    self.leadership.self_watch = false;
                }
                if matches!(self.session.state, Session::Up { id, .. } if id == session)
                    && self.candidacy.step == Step::Settled
                {
                    let name = event.path.rsplit('/').next().unwrap_or_default();
                    if event.path == self.election {
                        // The leader's watch on the candidates: a master
                        // joined or left.
                        if self.leadership.leads() && event.kind == WatchKind::NodeChildrenChanged {
                            self.watch_members(now, &mut out);
                        }
                    } else if self.candidacy.watching.contains(name) {
                        self.relist(now, &mut out);
                    }
                }
            }
            Event::Timer(Timer::Ping) => self.on_ping_timer(now, &mut out),
            Event::Timer(Timer::Lease) => {
                // (With the test-only knob the lease is never checked, so
                // there is nothing to re-arm.)
                if self.leadership.leads() && !self.config.unsafe_no_lease_check {
                    out.push(Action::SetTimer { timer: Timer::Lease, at: self.lease_end() });
                }
            }
            Event::Timer(Timer::Retry) => {
                if matches!(self.session.state, Session::Up { .. })
                    && self.candidacy.step == Step::Waiting
                {
                    self.start_round(now, &mut out);
                }
            }
            Event::Abandon => {
                if self.session.state != Session::None {
                    self.abandon(now, true, &mut out);
                }
            }
            Event::AbandonFor { rejoin_after } => {
                if self.session.state != Session::None {
                    self.abandon(now, true, &mut out);
                    // Out of the election until the timer: no session yet.
                    self.session.state = Session::None;
                    out.retain(|a| !matches!(a, Action::Zk(ZkCommand::NewSession { .. })));
                    out.push(Action::SetTimer { timer: Timer::Rejoin, at: now + rejoin_after });
                }
            }
            Event::Confirm => self.confirm(now, &mut out),
            Event::Depose { leader } => self.depose(now, leader, &mut out),
            Event::Timer(Timer::Rejoin) => {
                if self.session.state == Session::None && !self.stopped {
                    self.ask_session(now, &mut out);
                }
            }
            Event::Shutdown => {
                if self.leadership.step_down() {
                    out.push(Action::Revoked);
                }
                if let Some(id) = self.current_session() {
                    out.push(Action::Zk(ZkCommand::CloseSession { session: id }));
                }
                for timer in [Timer::Ping, Timer::Lease, Timer::Retry] {
                    out.push(Action::CancelTimer { timer });
                }
                self.session.state = Session::None;
                self.stopped = true;
            }
        }
        out
    }

    fn on_reply(&mut self, now: Millis, req: RequestId, result: ZkResult, out: &mut Vec<Action>) {
        let Some(p) = self.session.pending.remove(&req) else {
            return;
        };
        let current = self.current_session() == Some(p.session);
        if !current {
            return;
        }
        if result != Err(ZkError::ConnectionLoss) {
            self.session.rtt_max = self.session.rtt_max.max(now.since(p.sent_at));
        }
        match result {
            Err(ZkError::ConnectionLoss) => {
                if p.purpose == Purpose::Create {
                    self.candidacy.create_in_doubt = true;
                }
                if p.round == self.candidacy.round {
                    self.connection_lost(out);
                    // Normally `Disconnected` follows and the reconnect
                    // starts the next round; should the connection survive
                    // after all, retry the round.
                    out.push(Action::SetTimer {
                        timer: Timer::Retry,
                        at: now + self.config.retry_interval,
                    });
                }
                return;
            }
            Err(ZkError::SessionExpired) => {
                self.abandon(now, false, out);
                return;
            }
            Ok(_) | Err(ZkError::NodeExists | ZkError::NoNode | ZkError::BadVersion)
                if p.purpose.confirms_session() =>
            {
                // The quorum answered, so the server heard from us no
                // earlier than we sent: the session lives at least until
                // then + timeout.
                self.session.lease_from = self.session.lease_from.max(p.sent_at);
            }
            _ => {}
        }
        match p.purpose {
            // Answered whatever the round.
            Purpose::Confirm(_) => return self.on_confirm_reply(now, &p, &result, out),
            Purpose::DeposeDelete { .. }
            | Purpose::DeposeList { .. }
            | Purpose::DeposeRead { .. } => {
                return self.on_depose_reply(now, &p.purpose, &result, out)
            }
            _ => {}
        }
        if p.round != self.candidacy.round || !matches!(self.session.state, Session::Up { .. }) {
            return;
        }
        self.on_round_reply(now, p.purpose, result, out)
    }
}

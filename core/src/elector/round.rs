//! An election round: on every (re)connection the elector ensures the
//! election path, `Sync`s, lists the candidates (and reads the deposition
//! marker right after), then adopts the node carrying this session's
//! protected token or creates one, and either leads or watches the leader
//! and its predecessor. The replies of a round are handled here.
//!
//! Tests: core/src/elector/tests.rs (`aurora_1061_...`,
//! `curator_202_...`, `a_round_of_slow_reads_...`),
//! tests/tests/elector_props.rs.

use super::lease::Standing;
use super::{Action, CandidateData, CandidateName, DeposeMarker, Elector, Purpose, Step, Timer};
use crate::ids::{Addr, Epoch, MasterId};
use crate::time::Millis;
use crate::zk::{CreateMode, SessionId, ZkError, ZkOp, ZkReply, ZkResult};
use std::collections::BTreeSet;

/// The candidacy: this process's candidate node and the election rounds
/// that find, create or adopt it.
#[derive(Debug)]
pub(super) struct Candidacy {
    /// Bumped whenever the candidacy starts over (a new session, an
    /// abandoned one): part of the node's protected name.
    pub(super) generation: u64,
    /// Bumped by every round; replies of an older round are stale.
    pub(super) round: u64,
    /// Where the current round is.
    pub(super) step: Step,
    /// The election path exists (created or found).
    pub(super) paths_ensured: bool,
    /// Own node: (name, sequence).
    pub(super) node: Option<(String, u64)>,
    /// A create got `ConnectionLoss`: it may have landed (the next listing
    /// adopts the node carrying this session's token).
    pub(super) create_in_doubt: bool,
    /// The acting lease written in this generation's node(s), with the
    /// generation it was chosen for.
    pub(super) own_lease: Option<(u64, Millis)>,
    /// The nodes this round watches (the leader, the predecessor, or the
    /// own node when leading).
    pub(super) watching: BTreeSet<String>,
    /// A listing waiting for the marker read sent right after it.
    pub(super) listed: Option<Vec<String>>,
    /// The round whose marker read has come back (see `relist`).
    pub(super) marker_round: Option<u64>,
}

impl Default for Candidacy {
    fn default() -> Self {
        Candidacy {
            generation: 0,
            round: 0,
            step: Step::Waiting,
            paths_ensured: false,
            node: None,
            create_in_doubt: false,
            own_lease: None,
            watching: BTreeSet::new(),
            listed: None,
            marker_round: None,
        }
    }
}

/// What this elector sees of the leader.
#[derive(Debug, Default)]
pub(super) struct LeaderSeen {
    /// The leading candidate's node name, at the last settled listing.
    pub(super) node: Option<String>,
    /// The ephemeral owner of the leader's node, from its data read (a
    /// standby's watch): `(node, owner)`.
    pub(super) owner: Option<(String, SessionId)>,
    /// The leader last reported ([`Action::LeaderIs`]), so a repeat is not
    /// reported again.
    pub(super) reported: Option<(MasterId, Addr, Epoch)>,
}

impl Elector {
    pub(super) fn start_round(&mut self, now: Millis, out: &mut Vec<Action>) {
        self.candidacy.round += 1;
        self.candidacy.watching.clear();
        let interval = self.jitter.scale(Millis(self.timeout().0 / 3), 80, 100);
        out.push(Action::SetTimer { timer: Timer::Ping, at: now + interval });
        if self.candidacy.paths_ensured {
            self.candidacy.step = Step::Sync;
            let path = self.election.clone();
            self.send(now, Purpose::Sync, ZkOp::Sync { path }, out);
        } else {
            self.ensure_path(now, 0, out);
        }
    }

    pub(super) fn ensure_path(&mut self, now: Millis, i: usize, out: &mut Vec<Action>) {
        let prefixes = self.config.path_prefixes();
        let Some(path) = prefixes.get(i).cloned() else {
            self.candidacy.paths_ensured = true;
            self.candidacy.step = Step::Sync;
            let path = self.election.clone();
            self.send(now, Purpose::Sync, ZkOp::Sync { path }, out);
            return;
        };
        self.candidacy.step = Step::EnsurePath(i);
        let op = ZkOp::Create { path, data: Vec::new(), mode: CreateMode::Persistent };
        self.send(now, Purpose::EnsurePath(i), op, out);
    }

    /// Lists the candidates, then reads the election directory's marker:
    /// the marker is written in the same transaction as a deposition's
    /// delete, so read after the listing it is at least as new as the
    /// listing (a listing that misses a deposed leader's node comes with
    /// that deposition's marker). The listing is acted on once both are
    /// back.
    pub(super) fn relist(&mut self, now: Millis, out: &mut Vec<Action>) {
        self.candidacy.round += 1;
        self.candidacy.watching.clear();
        self.candidacy.step = Step::List;
        self.candidacy.listed = None;
        let path = self.election.clone();
        self.send(now, Purpose::List, ZkOp::GetChildren { path: path.clone(), watch: false }, out);
        self.send(now, Purpose::Marker, ZkOp::GetData { path, watch: false }, out);
    }

    pub(super) fn retry_later(&mut self, now: Millis, out: &mut Vec<Action>) {
        self.candidacy.round += 1;
        self.candidacy.step = Step::Waiting;
        self.candidacy.watching.clear();
        out.push(Action::SetTimer { timer: Timer::Retry, at: now + self.config.retry_interval });
    }

    /// A reply to a request of the current round (on the current session).
    pub(super) fn on_round_reply(
        &mut self,
        now: Millis,
        purpose: Purpose,
        result: ZkResult,
        out: &mut Vec<Action>,
    ) {
        match (purpose, result) {
            (Purpose::EnsurePath(i), Ok(_) | Err(ZkError::NodeExists)) => {
                self.ensure_path(now, i + 1, out)
            }
            (Purpose::EnsurePath(_), Err(_)) => self.retry_later(now, out),
            (Purpose::Sync, Ok(_)) => self.relist(now, out),
            (Purpose::List, Ok(ZkReply::Children(children))) => {
                // ZooKeeper ran the marker read after the listing (one
                // session's requests run in order), so the pair is complete
                // whichever reply a transport hands over first.
                if self.candidacy.marker_round == Some(self.candidacy.round) {
                    self.on_children(now, children, out)
                } else {
                    self.candidacy.listed = Some(children)
                }
            }
            (Purpose::Marker, Ok(ZkReply::Data { data, stat })) => {
                self.candidacy.marker_round = Some(self.candidacy.round);
                self.depose.marker = match DeposeMarker::decode(&data) {
                    Ok(Some(m)) => (m.acting_lease, Some(stat.version)),
                    Ok(None) => (Millis::ZERO, None),
                    // Not a marker: assume the largest lease (and empty
                    // it once the wait is over).
                    Err(()) => (self.config.acting_lease_max, Some(stat.version)),
                };
                if let Some(children) = self.candidacy.listed.take() {
                    self.on_children(now, children, out)
                }
            }
            (Purpose::Sync | Purpose::List | Purpose::Marker, _) => {
                // The election path vanished (or worse): rebuild it later.
                self.candidacy.paths_ensured = false;
                self.retry_later(now, out);
            }
            (Purpose::Create, Ok(ZkReply::Created { path })) => {
                let name = path.rsplit('/').next().unwrap_or_default().to_owned();
                if let Some(c) = CandidateName::parse(&name) {
                    self.candidacy.node = Some((name, c.seq));
                }
                self.candidacy.create_in_doubt = false;
                self.relist(now, out);
            }
            (Purpose::Create, _) => {
                self.candidacy.paths_ensured = false;
                self.retry_later(now, out);
            }
            (Purpose::Delete | Purpose::MarkerClear, _) => {}
            (Purpose::Watch(name), Ok(ZkReply::Data { data, stat })) => {
                let decoded = CandidateData::decode(&data);
                if let (Some(slot), Some(d)) = (self.members.candidates.get_mut(&name), &decoded) {
                    *slot = Some(d.clone());
                }
                if self.leader_seen.node.as_deref() == Some(name.as_str()) {
                    self.leader_seen.owner = stat.ephemeral_owner.map(|o| (name.clone(), o));
                    if let (Some(d), Some(c)) = (decoded, CandidateName::parse(&name)) {
                        self.report(d.id, d.addr, Epoch(c.seq + 1), out);
                    }
                }
            }
            (Purpose::Watch(_), _) => {
                // The watched node is gone already: look again.
                if self.candidacy.step == Step::Settled {
                    self.relist(now, out);
                }
            }
            (Purpose::WatchSelf, Ok(ZkReply::Stat(Some(_)))) => {}
            (Purpose::WatchSelf, Ok(ZkReply::Stat(None))) => {
                if self.candidacy.step == Step::Settled {
                    self.relist(now, out);
                }
            }
            (Purpose::PingSync | Purpose::WatchSelf, _) => {}
            // Answered in `on_reply`, whatever the round.
            (Purpose::Confirm(_) | Purpose::DeposeDelete { .. }, _) => {}
            (Purpose::DeposeList { .. } | Purpose::DeposeRead { .. }, _) => {}
            (Purpose::Members, Ok(ZkReply::Children(children))) => {
                self.update_members(now, children, out)
            }
            (Purpose::Members, _) => {}
            (Purpose::Member(name), Ok(ZkReply::Data { data, .. })) => {
                if let Some(slot) = self.members.candidates.get_mut(&name) {
                    *slot = CandidateData::decode(&data);
                    out.extend(self.members.report());
                }
            }
            // Gone meanwhile: the next listing drops it.
            (Purpose::Member(_), _) => {}
        }
    }

    pub(super) fn on_children(
        &mut self,
        now: Millis,
        children: Vec<String>,
        out: &mut Vec<Action>,
    ) {
        let knob = self.config.unsafe_no_adopt_after_connection_loss;
        let mut parsed: Vec<(CandidateName, String)> =
            children.into_iter().filter_map(|c| CandidateName::parse(&c).map(|n| (n, c))).collect();
        parsed.sort_by(|a, b| (a.0.seq, &a.1).cmp(&(b.0.seq, &b.1)));
        // One node per name: a listing that names a child twice (never a
        // real ZooKeeper's) must not make this master delete its own node as
        // a duplicate of itself.
        parsed.dedup_by(|a, b| a.1 == b.1);
        let mut deletes: BTreeSet<String> = BTreeSet::new();
        let mut mine: Option<(String, u64)> = None;
        for (c, name) in &parsed {
            let is_mine = if knob {
                self.candidacy.node.as_ref().is_some_and(|(n, _)| n == name)
            } else {
                c.guid == self.config.guid && c.generation == self.candidacy.generation
            };
            if is_mine {
                if mine.is_none() {
                    mine = Some((name.clone(), c.seq));
                } else {
                    // A duplicate of this session (a create retried by a
                    // lower layer): keep the lowest.
                    deletes.insert(name.clone());
                }
            } else if !knob && c.guid == self.config.guid {
                // Left by a session this process abandoned.
                deletes.insert(name.clone());
            }
        }
        for name in &deletes {
            let path = format!("{}/{}", self.election, name);
            self.send(now, Purpose::Delete, ZkOp::Delete { path, version: None }, out);
        }
        let Some((my_name, my_seq)) = mine else {
            if self.candidacy.node.is_some() && self.leadership.leads() {
                // Our node was deleted under us (a standby's fast takeover,
                // an operator): someone else may lead now. docs/design.md#leadership-that-cannot-act-is-given-up:
                // give the leadership up with this session and join again
                // with a fresh one.
                self.abandon(now, true, out);
                return;
            }
            self.candidacy.node = None;
            self.candidacy.create_in_doubt = false;
            self.candidacy.step = Step::Create;
            // Every node of one generation carries the same lease: chosen
            // once, from the round trips of this session so far.
            let acting_lease = match self.candidacy.own_lease {
                Some((generation, l)) if generation == self.candidacy.generation => l,
                _ => {
                    let l = self.config.acting_lease_for(self.session.rtt_max);
                    self.candidacy.own_lease = Some((self.candidacy.generation, l));
                    l
                }
            };
            let data = CandidateData {
                id: self.config.id.clone(),
                addr: self.config.addr.clone(),
                acting_lease,
            }
            .encode();
            let path = format!(
                "{}/{}",
                self.election,
                CandidateName::prefix(self.config.guid, self.candidacy.generation)
            );
            let op = ZkOp::Create { path, data, mode: CreateMode::EphemeralSequential };
            self.send(now, Purpose::Create, op, out);
            return;
        };
        self.candidacy.node = Some((my_name.clone(), my_seq));
        self.candidacy.create_in_doubt = false;
        let candidates: Vec<&String> =
            parsed.iter().map(|(_, n)| n).filter(|n| !deletes.contains(*n)).collect();
        let listed = candidates.iter().map(|n| (*n).clone()).collect();
        self.update_members(now, listed, out);
        // Found in the same list and never among the deletes (names are
        // unique above); were it missing, the round is ignored, not trusted
        // (docs/design.md#peer-input-never-panics).
        let Some(idx) = candidates.iter().position(|n| **n == my_name) else {
            return;
        };
        self.candidacy.step = Step::Settled;
        if idx == 0 {
            self.leader_seen.node = Some(my_name.clone());
            // Watch the own node: deleted from outside (a standby taking
            // over, an operator), the leader learns it at once instead of at
            // its next keep-alive.
            self.candidacy.watching.insert(my_name.clone());
            let path = format!("{}/{}", self.election, my_name);
            self.leadership.self_watch = true;
            self.send(now, Purpose::WatchSelf, ZkOp::Exists { path, watch: true }, out);
            self.watch_members(now, out);
            let floor = Epoch(my_seq + 1);
            self.report(self.config.id.clone(), self.config.addr.clone(), floor, out);
            if !self.leadership.leads() {
                self.leadership.standing = Standing::Leader { suspended: false };
                self.leadership.elected_at = now;
                self.leadership.acting_from = Millis::ZERO;
                self.leadership.late_confirmations = (0, Millis::ZERO);
                self.leadership.rtt_last = None;
                // The wait covers every leader this one may have replaced:
                // the candidates that left shortly before (their node data
                // as read), and a deposition's marker (a leader deposed
                // before this elector ever listed it).
                self.leadership.wait_lease = self
                    .members
                    .departed
                    .iter()
                    .map(|(l, _)| *l)
                    .chain([self.depose.marker.0, self.acting_lease()])
                    .max()
                    .unwrap_or(Millis::ZERO);
                self.leadership.marker_cleared = self.depose.marker.1.is_none();
                out.push(Action::Elected { floor });
                out.push(Action::SetTimer { timer: Timer::Lease, at: self.lease_end() });
            } else if self.leadership.suspended() {
                self.leadership.standing = Standing::Leader { suspended: false };
                out.push(Action::Resumed);
                out.push(Action::SetTimer { timer: Timer::Lease, at: self.lease_end() });
            }
            return;
        }
        // A lower candidate than our node cannot appear (sequences only
        // grow), unless our node was replaced; either way we no longer lead.
        if self.leadership.step_down() {
            out.push(Action::Revoked);
        }
        let leader = candidates[0].clone();
        let pred = candidates[idx - 1].clone();
        self.leader_seen.node = Some(leader.clone());
        let mut targets = vec![leader];
        if pred != targets[0] {
            targets.push(pred);
        }
        for t in targets {
            self.candidacy.watching.insert(t.clone());
            let path = format!("{}/{}", self.election, t);
            self.send(now, Purpose::Watch(t), ZkOp::GetData { path, watch: true }, out);
        }
    }

    pub(super) fn report(&mut self, id: MasterId, addr: Addr, floor: Epoch, out: &mut Vec<Action>) {
        let seen = (id, addr, floor);
        if self.leader_seen.reported.as_ref() != Some(&seen) {
            out.push(Action::LeaderNamed { id: seen.0.clone(), addr: seen.1.clone(), floor });
            self.leader_seen.reported = Some(seen);
        }
    }
}

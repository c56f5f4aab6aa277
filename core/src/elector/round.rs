//! An election round: on every (re)connection the elector ensures the
//! election path, `Sync`s, lists the candidates (and reads the deposition
//! marker right after), then adopts the node carrying this session's
//! protected token or creates one, and either leads or watches the leader
//! and its predecessor. The replies of a round are handled here.

use super::{Action, CandidateData, CandidateName, DeposeMarker, Elector, Purpose, Step, Timer};
use crate::ids::{Addr, Epoch, MasterId};
use crate::time::Millis;
use crate::zk::{CreateMode, ZkError, ZkOp, ZkReply, ZkResult};
use std::collections::BTreeSet;

impl Elector {
    pub(super) fn start_round(&mut self, now: Millis, out: &mut Vec<Action>) {
        self.round += 1;
        self.watching.clear();
        let interval = self.jitter.scale(Millis(self.timeout().0 / 3), 80, 100);
        out.push(Action::SetTimer { timer: Timer::Ping, at: now + interval });
        if self.paths_ensured {
            self.step = Step::Sync;
            let path = self.election.clone();
            self.send(now, Purpose::Sync, ZkOp::Sync { path }, out);
        } else {
            self.ensure_path(now, 0, out);
        }
    }

    pub(super) fn ensure_path(&mut self, now: Millis, i: usize, out: &mut Vec<Action>) {
        let prefixes = self.config.path_prefixes();
        let Some(path) = prefixes.get(i).cloned() else {
            self.paths_ensured = true;
            self.step = Step::Sync;
            let path = self.election.clone();
            self.send(now, Purpose::Sync, ZkOp::Sync { path }, out);
            return;
        };
        self.step = Step::EnsurePath(i);
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
        self.round += 1;
        self.watching.clear();
        self.step = Step::List;
        self.listed = None;
        let path = self.election.clone();
        self.send(now, Purpose::List, ZkOp::GetChildren { path: path.clone(), watch: false }, out);
        self.send(now, Purpose::Marker, ZkOp::GetData { path, watch: false }, out);
    }

    pub(super) fn retry_later(&mut self, now: Millis, out: &mut Vec<Action>) {
        self.round += 1;
        self.step = Step::Waiting;
        self.watching.clear();
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
                if self.marker_round == Some(self.round) {
                    self.on_children(now, children, out)
                } else {
                    self.listed = Some(children)
                }
            }
            (Purpose::Marker, Ok(ZkReply::Data { data, stat })) => {
                self.marker_round = Some(self.round);
                self.marker = match DeposeMarker::decode(&data) {
                    Ok(Some(m)) => (m.acting_lease, Some(stat.version)),
                    Ok(None) => (Millis::ZERO, None),
                    // Not a marker: assume the largest lease (and empty
                    // it once the wait is over).
                    Err(()) => (self.config.acting_lease_max, Some(stat.version)),
                };
                if let Some(children) = self.listed.take() {
                    self.on_children(now, children, out)
                }
            }
            (Purpose::Sync | Purpose::List | Purpose::Marker, _) => {
                // The election path vanished (or worse): rebuild it later.
                self.paths_ensured = false;
                self.retry_later(now, out);
            }
            (Purpose::Create, Ok(ZkReply::Created { path })) => {
                let name = path.rsplit('/').next().unwrap_or_default().to_owned();
                if let Some(c) = CandidateName::parse(&name) {
                    self.node = Some((name, c.seq));
                }
                self.create_in_doubt = false;
                self.relist(now, out);
            }
            (Purpose::Create, _) => {
                self.paths_ensured = false;
                self.retry_later(now, out);
            }
            (Purpose::Delete | Purpose::MarkerClear, _) => {}
            (Purpose::Watch(name), Ok(ZkReply::Data { data, stat })) => {
                let decoded = CandidateData::decode(&data);
                if let (Some(slot), Some(d)) = (self.members.get_mut(&name), &decoded) {
                    *slot = Some(d.clone());
                }
                if self.leader_node.as_deref() == Some(name.as_str()) {
                    self.leader_owner = stat.ephemeral_owner.map(|o| (name.clone(), o));
                    if let (Some(d), Some(c)) = (decoded, CandidateName::parse(&name)) {
                        self.report(d.id, d.addr, Epoch(c.seq + 1), out);
                    }
                }
            }
            (Purpose::Watch(_), _) => {
                // The watched node is gone already: look again.
                if self.step == Step::Settled {
                    self.relist(now, out);
                }
            }
            (Purpose::WatchSelf, Ok(ZkReply::Stat(Some(_)))) => {}
            (Purpose::WatchSelf, Ok(ZkReply::Stat(None))) => {
                if self.step == Step::Settled {
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
                if let Some(slot) = self.members.get_mut(&name) {
                    *slot = CandidateData::decode(&data);
                    self.report_members(out);
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
        let mut deletes: BTreeSet<String> = BTreeSet::new();
        let mut mine: Option<(String, u64)> = None;
        for (c, name) in &parsed {
            let is_mine = if knob {
                self.node.as_ref().is_some_and(|(n, _)| n == name)
            } else {
                c.guid == self.config.guid && c.generation == self.generation
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
            if self.node.is_some() && self.leader {
                // Our node was deleted under us (a standby's fast takeover,
                // an operator): someone else may lead now. docs/design.md#leadership-that-cannot-act-is-given-up:
                // give the leadership up with this session and join again
                // with a fresh one.
                self.abandon(now, true, out);
                return;
            }
            self.node = None;
            self.create_in_doubt = false;
            self.step = Step::Create;
            // Every node of one generation carries the same lease: chosen
            // once, from the round trips of this session so far.
            let acting_lease = match self.own_lease {
                Some((generation, l)) if generation == self.generation => l,
                _ => {
                    let l = self.config.acting_lease_for(self.rtt_max);
                    self.own_lease = Some((self.generation, l));
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
                CandidateName::prefix(self.config.guid, self.generation)
            );
            let op = ZkOp::Create { path, data, mode: CreateMode::EphemeralSequential };
            self.send(now, Purpose::Create, op, out);
            return;
        };
        self.node = Some((my_name.clone(), my_seq));
        self.create_in_doubt = false;
        let candidates: Vec<&String> =
            parsed.iter().map(|(_, n)| n).filter(|n| !deletes.contains(*n)).collect();
        let listed = candidates.iter().map(|n| (*n).clone()).collect();
        self.update_members(now, listed, out);
        let idx = candidates
            .iter()
            .position(|n| **n == my_name)
            .expect("own node is among the candidates: it was found in the same list");
        self.step = Step::Settled;
        if idx == 0 {
            self.leader_node = Some(my_name.clone());
            // Watch the own node: deleted from outside (a standby taking
            // over, an operator), the leader learns it at once instead of at
            // its next keep-alive.
            self.watching.insert(my_name.clone());
            let path = format!("{}/{}", self.election, my_name);
            self.self_watch = true;
            self.send(now, Purpose::WatchSelf, ZkOp::Exists { path, watch: true }, out);
            self.watch_members(now, out);
            let floor = Epoch(my_seq + 1);
            self.report(self.config.id.clone(), self.config.addr.clone(), floor, out);
            if !self.leader {
                self.leader = true;
                self.suspended = false;
                self.elected_at = now;
                self.acting_from = Millis::ZERO;
                self.late_confirmations = (0, Millis::ZERO);
                self.rtt_last = None;
                // The wait covers every leader this one may have replaced:
                // the candidates that left shortly before (their node data
                // as read), and a deposition's marker (a leader deposed
                // before this elector ever listed it).
                self.wait_lease = self
                    .departed
                    .iter()
                    .map(|(l, _)| *l)
                    .chain([self.marker.0, self.acting_lease()])
                    .max()
                    .unwrap_or(Millis::ZERO);
                self.marker_cleared = self.marker.1.is_none();
                out.push(Action::Elected { floor });
                out.push(Action::SetTimer { timer: Timer::Lease, at: self.lease_end() });
            } else if self.suspended {
                self.suspended = false;
                out.push(Action::Resumed);
                out.push(Action::SetTimer { timer: Timer::Lease, at: self.lease_end() });
            }
            return;
        }
        if self.leader {
            // A lower candidate than our node cannot appear (sequences only
            // grow), unless our node was replaced; either way we no longer
            // lead.
            self.leader = false;
            self.suspended = false;
            out.push(Action::Revoked);
        }
        let leader = candidates[0].clone();
        let pred = candidates[idx - 1].clone();
        self.leader_node = Some(leader.clone());
        let mut targets = vec![leader];
        if pred != targets[0] {
            targets.push(pred);
        }
        for t in targets {
            self.watching.insert(t.clone());
            let path = format!("{}/{}", self.election, t);
            self.send(now, Purpose::Watch(t), ZkOp::GetData { path, watch: true }, out);
        }
    }

    pub(super) fn report(&mut self, id: MasterId, addr: Addr, floor: Epoch, out: &mut Vec<Action>) {
        let seen = (id, addr, floor);
        if self.reported.as_ref() != Some(&seen) {
            out.push(Action::LeaderNamed { id: seen.0.clone(), addr: seen.1.clone(), floor });
            self.reported = Some(seen);
        }
    }
}

//! Fast takeover: a settled standby deletes the node(s) of a leader whose
//! process is gone, writing the deposition marker in the same multi, and a
//! leader whose wait is over empties the marker again.
//!
//! Tests: core/src/elector/tests.rs (`depose_...`, the successor's
//! waits), core/tests/fast_takeover_probe.rs.

use super::{Action, CandidateName, DeposeMarker, DeposeOutcome, Elector, Purpose, Session, Step};
use crate::ids::MasterId;
use crate::time::Millis;
use crate::zk::{MultiOp, ZkOp, ZkReply, ZkResult};

/// The fast takeover: when this elector last deposed a leader, and the
/// deposition marker.
#[derive(Debug, Default)]
pub(super) struct Depose {
    /// When this elector last deposed a leader.
    pub(super) last: Option<Millis>,
    /// The election directory's marker at the last listing: the largest
    /// lease a deposed leader may still command under, and the data
    /// version (to empty it conditionally).
    pub(super) marker: (Millis, Option<i32>),
}

impl Elector {
    pub(super) fn depose(&mut self, now: Millis, leader: MasterId, out: &mut Vec<Action>) {
        let skip = |reason: &str| Action::Deposed {
            leader: leader.clone(),
            outcome: DeposeOutcome::Skipped { reason: reason.to_owned() },
        };
        if !matches!(self.session.state, Session::Up { .. }) || self.candidacy.step != Step::Settled
        {
            out.push(skip("this master's own election round is not settled"));
            return;
        }
        if self.leadership.leads() {
            out.push(skip("this master leads"));
            return;
        }
        let named = self.leader_seen.reported.as_ref().is_some_and(|(id, _, _)| *id == leader);
        let owner = match (&self.leader_seen.owner, &self.leader_seen.node) {
            (Some((node, owner)), Some(leading)) if node == leading && named => {
                Some((node.clone(), *owner))
            }
            _ => None,
        };
        let Some((node, owner)) = owner else {
            out.push(skip("the election no longer names it leader (or its session is unknown)"));
            return;
        };
        if let Some(last) = self.depose.last {
            if now < last + self.timeout() {
                out.push(skip("this master deposed a leader less than a session timeout ago"));
                return;
            }
        }
        self.depose.last = Some(now);
        // The leading node first (every millisecond counts), then any
        // duplicate of the same session (AURORA-1061).
        self.delete_deposed(now, leader.clone(), node, out);
        let path = self.election.clone();
        let list = Purpose::DeposeList { leader, owner };
        self.send(now, list, ZkOp::GetChildren { path, watch: false }, out);
    }

    pub(super) fn delete_deposed(
        &mut self,
        now: Millis,
        leader: MasterId,
        node: String,
        out: &mut Vec<Action>,
    ) {
        let path = format!("{}/{}", self.election, node);
        // The deposed leader may command for up to its acting lease after
        // this delete; a master elected without having read its node learns
        // that lease from the marker written in the same transaction (with
        // any earlier deposition's marker still standing, the larger).
        let deposed_lease = self
            .members
            .candidates
            .get(&node)
            .and_then(|d| d.as_ref().map(|d| d.acting_lease))
            .unwrap_or(self.config.acting_lease_max);
        let marker = DeposeMarker { acting_lease: deposed_lease.max(self.depose.marker.0) };
        let op = ZkOp::Multi(vec![
            MultiOp::SetData { path: self.election.clone(), data: marker.encode(), version: None },
            MultiOp::Delete { path, version: None },
        ]);
        let purpose = Purpose::DeposeDelete { leader, node };
        self.send(now, purpose, op, out);
    }

    /// A leader whose wait is over empties the deposition marker it found
    /// (conditional on the version it read): from then on only its own
    /// lease matters to a successor, and a later deposition writes that.
    pub(super) fn clear_marker(&mut self, now: Millis, out: &mut Vec<Action>) {
        if self.leadership.marker_cleared
            || !self.leadership.leads_connected()
            || now < self.commands_from()
        {
            return;
        }
        self.leadership.marker_cleared = true;
        if let Some(version) = self.depose.marker.1 {
            let op = ZkOp::SetData {
                path: self.election.clone(),
                data: Vec::new(),
                version: Some(version),
            };
            self.send(now, Purpose::MarkerClear, op, out);
        }
    }

    /// A reply to a fast takeover's request (whatever the round).
    pub(super) fn on_depose_reply(
        &mut self,
        now: Millis,
        purpose: &Purpose,
        result: &ZkResult,
        out: &mut Vec<Action>,
    ) {
        match (purpose, result) {
            (Purpose::DeposeDelete { leader, node }, r) => {
                let outcome = match r {
                    Ok(_) => DeposeOutcome::Deleted { node: node.clone() },
                    Err(e) => DeposeOutcome::Skipped {
                        reason: format!("deleting its election node {node} failed: {e:?}"),
                    },
                };
                out.push(Action::Deposed { leader: leader.clone(), outcome });
            }
            (Purpose::DeposeList { leader, owner }, Ok(ZkReply::Children(children))) => {
                for node in children {
                    if CandidateName::parse(node).is_none()
                        || self.candidacy.node.as_ref().is_some_and(|(n, _)| n == node)
                        || self.leader_seen.owner.as_ref().is_some_and(|(n, _)| n == node)
                    {
                        continue;
                    }
                    let path = format!("{}/{}", self.election, node);
                    let purpose = Purpose::DeposeRead {
                        leader: leader.clone(),
                        owner: *owner,
                        node: node.clone(),
                    };
                    self.send(now, purpose, ZkOp::Exists { path, watch: false }, out);
                }
            }
            (Purpose::DeposeRead { leader, owner, node }, Ok(ZkReply::Stat(Some(stat))))
                if stat.ephemeral_owner == Some(*owner) =>
            {
                self.delete_deposed(now, leader.clone(), node.clone(), out);
            }
            // Failed, or a node of another session: nothing to do.
            _ => {}
        }
    }
}

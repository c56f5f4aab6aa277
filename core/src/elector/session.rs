//! The elector's session: asking for one, connecting and reconnecting,
//! a dropped connection (a leader is suspended), giving a session and its
//! node up, and the requests sent on it (each remembered with its purpose,
//! round, session and send time until its reply).
//!
//! Tests: core/src/elector/tests.rs (`curator_202_...`,
//! `lease_expiry_while_paused_...`), tests/tests/elector_props.rs.

use super::lease::Standing;
use super::{Action, Elector, Pending, Purpose, Session, Step, Timer};
use crate::time::Millis;
use crate::zk::{RequestId, SessionId, ZkCommand, ZkOp};
use std::collections::BTreeMap;

/// The coordination session and the requests sent on it.
#[derive(Debug)]
pub(super) struct SessionPart {
    /// Where the session is (none, asked for, connected, disconnected).
    pub(super) state: Session,
    /// The id of the next request.
    pub(super) next_req: u64,
    /// Requests sent and not yet answered, with what each was for.
    pub(super) pending: BTreeMap<RequestId, Pending>,
    /// The send time of the last request the quorum acknowledged (or the
    /// time the session was asked for): the session lease runs from it.
    pub(super) lease_from: Millis,
    /// The largest round trip of a reply on the current session.
    pub(super) rtt_max: Millis,
    /// The ping timer fired while a confirmation of the session was in
    /// flight: the next ping goes out as soon as nothing confirms it.
    pub(super) ping_owed: bool,
}

impl Default for SessionPart {
    fn default() -> Self {
        SessionPart {
            state: Session::None,
            next_req: 0,
            pending: BTreeMap::new(),
            lease_from: Millis::ZERO,
            rtt_max: Millis::ZERO,
            ping_owed: false,
        }
    }
}

impl Elector {
    pub(super) fn current_session(&self) -> Option<SessionId> {
        match self.session.state {
            Session::Up { id, .. } | Session::Down { id, .. } => Some(id),
            _ => None,
        }
    }

    pub(super) fn timeout(&self) -> Millis {
        match self.session.state {
            Session::Up { timeout, .. } | Session::Down { timeout, .. } => timeout,
            _ => self.config.session_timeout,
        }
    }

    pub(super) fn ask_session(&mut self, now: Millis, out: &mut Vec<Action>) {
        self.session.state = Session::Opening { asked_at: now };
        out.push(Action::Zk(ZkCommand::NewSession { timeout: self.config.session_timeout }));
    }

    /// Gives up the current session and its node and joins again with a new
    /// session (`close`: the session may still be alive, close it).
    pub(super) fn abandon(&mut self, now: Millis, close: bool, out: &mut Vec<Action>) {
        if self.leadership.step_down() {
            out.push(Action::Revoked);
        }
        if close {
            if let Some(id) = self.current_session() {
                out.push(Action::Zk(ZkCommand::CloseSession { session: id }));
            }
        }
        self.leadership.self_watch = false;
        self.candidacy.generation += 1;
        self.candidacy.round += 1;
        self.candidacy.step = Step::Waiting;
        self.candidacy.node = None;
        self.candidacy.create_in_doubt = false;
        self.session.pending.clear();
        self.candidacy.watching.clear();
        self.candidacy.listed = None;
        self.leadership.late_confirmations = (0, Millis::ZERO);
        self.leadership.rtt_last = None;
        out.push(Action::CancelTimer { timer: Timer::Ping });
        out.push(Action::CancelTimer { timer: Timer::Lease });
        self.ask_session(now, out);
    }

    pub(super) fn on_connected(
        &mut self,
        now: Millis,
        session: SessionId,
        timeout: Millis,
        out: &mut Vec<Action>,
    ) {
        match self.session.state {
            Session::None => return,
            Session::Opening { asked_at } => {
                // The server created the session after we asked for it.
                self.session.lease_from = asked_at;
                self.session.rtt_max = Millis::ZERO;
            }
            Session::Up { id, .. } | Session::Down { id, .. } if id == session => {}
            Session::Up { .. } | Session::Down { .. } => {
                // The runtime replaced the session: the old node is gone as
                // far as we can tell, and the new session earns its lease
                // only by acknowledged requests.
                if self.leadership.step_down() {
                    out.push(Action::Revoked);
                }
                self.candidacy.generation += 1;
                self.candidacy.node = None;
                self.candidacy.create_in_doubt = false;
                self.session.pending.clear();
                self.session.lease_from = Millis::ZERO;
                self.session.rtt_max = Millis::ZERO;
            }
        }
        // Requests of an earlier connection can no longer be answered (the
        // client failed them with ConnectionLoss, or will).
        self.session.pending.clear();
        self.leadership.self_watch = false;
        self.session.state = Session::Up { id: session, timeout };
        self.start_round(now, out);
    }

    pub(super) fn on_disconnected(&mut self, session: SessionId, out: &mut Vec<Action>) {
        let Session::Up { id, timeout } = self.session.state else {
            return;
        };
        if id != session {
            return;
        }
        self.session.state = Session::Down { id, timeout };
        self.connection_lost(out);
    }

    /// The connection is gone (or a request said so): every create in
    /// flight is in doubt, a leader is suspended, the round is over.
    pub(super) fn connection_lost(&mut self, out: &mut Vec<Action>) {
        self.leadership.self_watch = false;
        if self
            .session
            .pending
            .values()
            .any(|p| p.purpose == Purpose::Create && p.round == self.candidacy.round)
        {
            self.candidacy.create_in_doubt = true;
        }
        if self.leadership.leads_connected() {
            self.leadership.standing = Standing::Leader { suspended: true };
            self.leadership.acting_from = Millis::ZERO;
            out.push(Action::Suspended);
            out.push(Action::SetTimer { timer: Timer::Lease, at: self.lease_end() });
        }
        self.candidacy.round += 1;
        self.candidacy.step = Step::Waiting;
        self.candidacy.watching.clear();
    }

    pub(super) fn send(&mut self, now: Millis, purpose: Purpose, op: ZkOp, out: &mut Vec<Action>) {
        let Session::Up { id, .. } = self.session.state else {
            return;
        };
        let req = RequestId(self.session.next_req);
        self.session.next_req += 1;
        self.session.pending.insert(
            req,
            Pending { purpose, round: self.candidacy.round, session: id, sent_at: now },
        );
        out.push(Action::Zk(ZkCommand::Request { session: id, req, op }));
    }
}

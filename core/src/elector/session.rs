//! The elector's session: asking for one, connecting and reconnecting,
//! a dropped connection (a leader is suspended), giving a session and its
//! node up, and the requests sent on it (each remembered with its purpose,
//! round, session and send time until its reply).

use super::{Action, Elector, Pending, Purpose, Session, Step, Timer};
use crate::time::Millis;
use crate::zk::{RequestId, SessionId, ZkCommand, ZkOp};

impl Elector {
    pub(super) fn current_session(&self) -> Option<SessionId> {
        match self.session {
            Session::Up { id, .. } | Session::Down { id, .. } => Some(id),
            _ => None,
        }
    }

    pub(super) fn timeout(&self) -> Millis {
        match self.session {
            Session::Up { timeout, .. } | Session::Down { timeout, .. } => timeout,
            _ => self.config.session_timeout,
        }
    }

    pub(super) fn ask_session(&mut self, now: Millis, out: &mut Vec<Action>) {
        self.session = Session::Opening { asked_at: now };
        out.push(Action::Zk(ZkCommand::NewSession { timeout: self.config.session_timeout }));
    }

    /// Gives up the current session and its node and joins again with a new
    /// session (`close`: the session may still be alive, close it).
    pub(super) fn abandon(&mut self, now: Millis, close: bool, out: &mut Vec<Action>) {
        if self.leader {
            out.push(Action::Revoked);
        }
        if close {
            if let Some(id) = self.current_session() {
                out.push(Action::Zk(ZkCommand::CloseSession { session: id }));
            }
        }
        self.leader = false;
        self.suspended = false;
        self.self_watch = false;
        self.generation += 1;
        self.round += 1;
        self.step = Step::Waiting;
        self.node = None;
        self.create_in_doubt = false;
        self.pending.clear();
        self.watching.clear();
        self.listed = None;
        self.late_confirmations = (0, Millis::ZERO);
        self.rtt_last = None;
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
        match self.session {
            Session::None => return,
            Session::Opening { asked_at } => {
                // The server created the session after we asked for it.
                self.lease_from = asked_at;
                self.rtt_max = Millis::ZERO;
            }
            Session::Up { id, .. } | Session::Down { id, .. } if id == session => {}
            Session::Up { .. } | Session::Down { .. } => {
                // The runtime replaced the session: the old node is gone as
                // far as we can tell, and the new session earns its lease
                // only by acknowledged requests.
                if self.leader {
                    out.push(Action::Revoked);
                }
                self.leader = false;
                self.suspended = false;
                self.generation += 1;
                self.node = None;
                self.create_in_doubt = false;
                self.pending.clear();
                self.lease_from = Millis::ZERO;
                self.rtt_max = Millis::ZERO;
            }
        }
        // Requests of an earlier connection can no longer be answered (the
        // client failed them with ConnectionLoss, or will).
        self.pending.clear();
        self.self_watch = false;
        self.session = Session::Up { id: session, timeout };
        self.start_round(now, out);
    }

    pub(super) fn on_disconnected(&mut self, session: SessionId, out: &mut Vec<Action>) {
        let Session::Up { id, timeout } = self.session else {
            return;
        };
        if id != session {
            return;
        }
        self.session = Session::Down { id, timeout };
        self.connection_lost(out);
    }

    /// The connection is gone (or a request said so): every create in
    /// flight is in doubt, a leader is suspended, the round is over.
    pub(super) fn connection_lost(&mut self, out: &mut Vec<Action>) {
        self.self_watch = false;
        if self.pending.values().any(|p| p.purpose == Purpose::Create && p.round == self.round) {
            self.create_in_doubt = true;
        }
        if self.leader && !self.suspended {
            self.suspended = true;
            self.acting_from = Millis::ZERO;
            out.push(Action::Suspended);
            out.push(Action::SetTimer { timer: Timer::Lease, at: self.lease_end() });
        }
        self.round += 1;
        self.step = Step::Waiting;
        self.watching.clear();
    }

    pub(super) fn send(&mut self, now: Millis, purpose: Purpose, op: ZkOp, out: &mut Vec<Action>) {
        let Session::Up { id, .. } = self.session else {
            return;
        };
        let req = RequestId(self.next_req);
        self.next_req += 1;
        self.pending.insert(req, Pending { purpose, round: self.round, session: id, sent_at: now });
        out.push(Action::Zk(ZkCommand::Request { session: id, req, op }));
    }
}

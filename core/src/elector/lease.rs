//! The leader's leases: the session lease (counted from the send time of
//! the last request the quorum acknowledged, checked on every `handle`),
//! the keep-alive that refreshes it, and the acting lease that guards
//! commands (confirmed by a `Sync` and an `Exists` on the own node; a new
//! leader's wait; a round trip that outgrew the lease).
//!
//! Tests: core/src/elector/tests.rs (`lease_expiry_while_paused_...`,
//! `node_deleted_ends_the_acting_lease_at_once`, the successor's waits),
//! tests/tests/elector_props.rs, core/tests/master_node.rs.

use super::{
    Action, Config, Elector, Pending, Purpose, Session, Step, Timer, OUTGROWN_AFTER, OUTGROWN_FOR,
};
use crate::time::Millis;
use crate::zk::{ZkOp, ZkReply, ZkResult};

/// This candidacy's leadership and its acting lease.
#[derive(Debug)]
pub(super) struct Leadership {
    /// Whether this candidacy leads, and if so whether it is suspended.
    pub(super) standing: Standing,
    /// When this elector last saw itself elected.
    pub(super) elected_at: Millis,
    /// The send time of the last confirmation that found the own node
    /// (ZERO: none since the election, a suspension or a NodeDeleted).
    pub(super) acting_from: Millis,
    /// A watch on the own node is (believed) set on the current
    /// connection: confirmations then ask for none, so one-shot watchers
    /// do not pile up in the client over a long leadership.
    pub(super) self_watch: bool,
    /// Confirmations in a row that came back after their lease ran out,
    /// and when the first of them did.
    pub(super) late_confirmations: (u32, Millis),
    /// The round trip of the last confirmation that came back.
    pub(super) rtt_last: Option<Millis>,
    /// The acting lease the new leader's wait covers (its own, every
    /// candidate that left recently, the marker).
    pub(super) wait_lease: Millis,
    /// This leadership emptied the marker already (or found none).
    pub(super) marker_cleared: bool,
}

/// Whether a candidacy leads: a candidate that does not lead cannot be
/// suspended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Standing {
    /// A candidate that does not lead (or not yet).
    Candidate,
    /// Elected; `suspended` while the connection is lost, until a round
    /// confirms the node still leads.
    Leader {
        /// The session is in doubt: not acting.
        suspended: bool,
    },
}

impl Leadership {
    /// Elected (possibly suspended).
    pub(super) fn leads(&self) -> bool {
        matches!(self.standing, Standing::Leader { .. })
    }

    /// Elected, but the session is in doubt.
    pub(super) fn suspended(&self) -> bool {
        self.standing == Standing::Leader { suspended: true }
    }

    /// Elected and the session not in doubt (whether the lease still
    /// holds is the elector's question: [`Elector::is_acting`]).
    pub(super) fn leads_connected(&self) -> bool {
        self.standing == Standing::Leader { suspended: false }
    }

    /// No longer leads; `true` if it did (a `Revoked` is owed).
    pub(super) fn step_down(&mut self) -> bool {
        let led = self.leads();
        self.standing = Standing::Candidate;
        led
    }
}

impl Default for Leadership {
    fn default() -> Self {
        Leadership {
            standing: Standing::Candidate,
            elected_at: Millis::ZERO,
            acting_from: Millis::ZERO,
            self_watch: false,
            late_confirmations: (0, Millis::ZERO),
            rtt_last: None,
            wait_lease: Millis::ZERO,
            marker_cleared: true,
        }
    }
}

impl Elector {
    /// Elected, not suspended and the lease still valid at `now`.
    pub fn is_acting(&self, now: Millis) -> bool {
        self.leadership.leads_connected()
            && (self.config.unsafe_no_lease_check || now < self.lease_end())
    }

    /// Whether this elector leads but its lease ran out at `now`: the next
    /// `handle` call (any event) revokes it. A composition checks this
    /// before it lets anything act on the leadership (docs/design.md#time-is-an-input).
    pub fn lease_expired(&self, now: Millis) -> bool {
        self.leadership.leads() && !self.config.unsafe_no_lease_check && now >= self.lease_end()
    }

    /// Whether the leader may send a command that starts, kills or shuts
    /// anything down at `now`: acting ([`Elector::is_acting`]), the acting
    /// lease confirmed less than [`Config::acting_lease`] ago, and
    /// [`Config::command_wait`] passed since the election.
    pub fn may_command(&self, now: Millis) -> bool {
        if self.config.unsafe_no_acting_lease {
            return self.is_acting(now);
        }
        self.is_acting(now) && now < self.acting_until() && now >= self.commands_from()
    }

    /// The end of the acting lease (ZERO or past: confirm it again).
    pub fn acting_until(&self) -> Millis {
        if !self.leadership.leads_connected() || self.leadership.acting_from == Millis::ZERO {
            return Millis::ZERO;
        }
        self.leadership.acting_from + self.acting_lease()
    }

    /// The acting lease L of this candidacy: the one written in the own
    /// node's data ([`Config::acting_lease`] before a node is created).
    pub fn acting_lease(&self) -> Millis {
        match self.candidacy.own_lease {
            Some((generation, l)) if generation == self.candidacy.generation => l,
            _ => self.config.acting_lease,
        }
    }

    /// The round trip of the last confirmation that came back, if any.
    pub fn round_trip(&self) -> Option<Millis> {
        self.leadership.rtt_last
    }

    /// The acting lease this leader's wait covers: the largest of its own,
    /// of every candidate that left the election shortly before it was
    /// elected (as read from their nodes' data), and of the election
    /// directory's marker (written by a standby that deposed a leader).
    pub fn wait_lease(&self) -> Millis {
        self.leadership.wait_lease.max(self.acting_lease())
    }

    /// The earliest time this leader may send its first command: its
    /// election + [`Config::command_wait_for`] of [`Elector::wait_lease`].
    pub fn commands_from(&self) -> Millis {
        self.leadership.elected_at + Config::command_wait_for(self.wait_lease())
    }

    /// Why a leader may not command at `now` (for the log and `/metrics`;
    /// empty when it may).
    pub fn why_no_command(&self, now: Millis) -> String {
        let l = self.acting_lease();
        if !self.leadership.leads() {
            return "not the leader".into();
        }
        if self.leadership.suspended() || !matches!(self.session.state, Session::Up { .. }) {
            return "the ZooKeeper session is in doubt (suspended)".into();
        }
        if !self.is_acting(now) {
            return "the session lease ran out".into();
        }
        if now < self.commands_from() {
            return format!(
                "a new leader's wait: no command before {} ms after the election (1.1 x L {} ms + 10 ms)",
                self.commands_from().since(self.leadership.elected_at).0,
                self.wait_lease().0
            );
        }
        if self.may_command(now) {
            return String::new();
        }
        let oldest = self
            .session
            .pending
            .values()
            .filter(|p| matches!(p.purpose, Purpose::Confirm(_)))
            .map(|p| p.sent_at)
            .min();
        match (oldest, self.leadership.rtt_last) {
            (_, Some(rtt)) if rtt >= l => format!(
                "acting lease not confirmed: ZooKeeper round trip {} ms > L {} ms",
                rtt.0, l.0
            ),
            (Some(sent), _) if now.since(sent) >= l => format!(
                "acting lease not confirmed: ZooKeeper has not answered a confirmation sent {} ms ago (L {} ms)",
                now.since(sent).0,
                l.0
            ),
            _ => format!("acting lease not confirmed yet (L {} ms)", l.0),
        }
    }

    pub(super) fn lease_end(&self) -> Millis {
        self.session.lease_from + self.config.lease_len(self.timeout())
    }

    pub(super) fn check_lease(&mut self, now: Millis, out: &mut Vec<Action>) {
        if self.config.unsafe_no_lease_check {
            return;
        }
        if self.leadership.leads() && now >= self.lease_end() {
            self.abandon(now, true, out);
        }
    }

    /// Whether a confirmation is in flight on the current session.
    pub(super) fn confirming(&self) -> bool {
        let current = self.current_session();
        self.session.pending.values().any(|p| {
            matches!(p.purpose, Purpose::Confirm(_) | Purpose::PingSync)
                && Some(p.session) == current
        })
    }

    /// `Sync`, then `Exists` with a watch on the own node (the keep-alive
    /// and the acting lease's confirmation are the same pair).
    pub(super) fn send_confirmation(&mut self, now: Millis, out: &mut Vec<Action>) {
        if let Some(path) = self.node_path() {
            let sync = ZkOp::Sync { path: self.election.clone() };
            self.send(now, Purpose::PingSync, sync, out);
            let watch = !self.leadership.self_watch;
            self.leadership.self_watch = true;
            let exists = ZkOp::Exists { path: path.clone(), watch };
            self.send(now, Purpose::Confirm(path), exists, out);
        }
    }

    pub(super) fn confirm(&mut self, now: Millis, out: &mut Vec<Action>) {
        if !self.leadership.leads_connected() || !matches!(self.session.state, Session::Up { .. }) {
            return;
        }
        if !self.confirming() {
            self.send_confirmation(now, out);
        }
        self.clear_marker(now, out);
    }

    /// A confirmation's `Exists` came back (whatever the round): the acting
    /// lease runs from its sync's send time if it found the own node.
    pub(super) fn on_confirm_reply(
        &mut self,
        now: Millis,
        p: &Pending,
        result: &ZkResult,
        out: &mut Vec<Action>,
    ) {
        match (&p.purpose, result) {
            (Purpose::Confirm(path), Ok(ZkReply::Stat(Some(stat)))) => {
                let current = self.current_session();
                if self.leadership.leads_connected()
                    && self.node_path().as_ref() == Some(path)
                    && (stat.ephemeral_owner.is_none() || stat.ephemeral_owner == current)
                {
                    // The sync went out at `sent_at` (the same step); the
                    // node existed at a point the quorum reached after it.
                    self.leadership.acting_from = self.leadership.acting_from.max(p.sent_at);
                    out.push(Action::Confirmed { until: self.acting_until() });
                    self.confirmation_came_back(now, now.since(p.sent_at), out);
                }
            }
            (Purpose::Confirm(_), Ok(ZkReply::Stat(None))) => {
                self.leadership.acting_from = Millis::ZERO;
                if p.round == self.candidacy.round && self.candidacy.step == Step::Settled {
                    self.relist(now, out);
                }
            }
            // Lost or refused: report so a waiting leader asks again.
            (Purpose::Confirm(_), _) if self.leadership.leads_connected() => {
                out.push(Action::Confirmed { until: self.acting_until() });
            }
            _ => {}
        }
    }

    /// A confirmation came back after `rtt`: a leader whose confirmations
    /// keep coming back after the lease they confirm ran out reports
    /// [`Action::Outgrown`] (if a new node would carry a larger lease).
    pub(super) fn confirmation_came_back(
        &mut self,
        now: Millis,
        rtt: Millis,
        out: &mut Vec<Action>,
    ) {
        self.leadership.rtt_last = Some(rtt);
        let l = self.acting_lease();
        if rtt < l {
            self.leadership.late_confirmations = (0, Millis::ZERO);
            return;
        }
        let (n, first) = self.leadership.late_confirmations;
        let (n, first) = if n == 0 { (1, now) } else { (n + 1, first) };
        self.leadership.late_confirmations = (n, first);
        if n >= OUTGROWN_AFTER
            && now.since(first) >= OUTGROWN_FOR
            && self.config.acting_lease_for(rtt) > l
        {
            self.leadership.late_confirmations = (0, Millis::ZERO);
            out.push(Action::Outgrown { round_trip: rtt, acting_lease: l });
        }
    }

    /// Pays an owed ping unless something in flight confirms the session
    /// already. Only a write or a sync confirms it (a read is answered by
    /// one server, quorum or not), and with ZooKeeper far away a round's
    /// reads, a round trip each, outlast the session lease, as do two ping
    /// intervals when the timer fires during a confirmation: so the ping
    /// goes out whenever it is due and nothing else does its work, and a
    /// ping the timer could not send goes out when the confirmation in
    /// flight comes back.
    pub(super) fn keep_session(&mut self, now: Millis, out: &mut Vec<Action>) {
        if !matches!(self.session.state, Session::Up { .. }) {
            return;
        }
        let current = self.current_session();
        let keeping = self
            .session
            .pending
            .values()
            .any(|p| p.purpose.confirms_session() && Some(p.session) == current);
        if keeping || self.confirming() {
            return;
        }
        self.session.ping_owed = false;
        if self.node_path().is_some() {
            self.send_confirmation(now, out);
        } else {
            let sync = ZkOp::Sync { path: self.election.clone() };
            self.send(now, Purpose::PingSync, sync, out);
        }
    }

    pub(super) fn on_ping_timer(&mut self, now: Millis, out: &mut Vec<Action>) {
        if !matches!(self.session.state, Session::Up { .. }) {
            return;
        }
        self.session.ping_owed = true;
        self.keep_session(now, out);
        if self.leadership.leads_connected() {
            self.clear_marker(now, out);
        }
        let interval = self.jitter.scale(Millis(self.timeout().0 / 3), 80, 100);
        out.push(Action::SetTimer { timer: Timer::Ping, at: now + interval });
    }
}

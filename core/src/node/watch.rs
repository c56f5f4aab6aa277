//! A standby's watch on the leader, pure.
//!
//! The elector knows who leads (the lowest election node) but not at which
//! epoch: an election node carries a sequence number, and the leader's
//! epoch (DESIGN rule 4) lives in the master's state. A hint with the
//! sequence floor as its epoch is older than any epoch a worker or
//! subscriber has seen, so they would discard it. So a standby keeps one
//! connection to the leader's advertised address — authenticated and
//! framed like every other — and sends it `Hello` (role
//! [`Role::Master`]) every probe interval. A leading `HelloReply` from the
//! master the elector names proves its real epoch; only then does the
//! standby's hint name it ([`WatchOutput::Confirmed`]). Until then the
//! standby gives no hint (its master list still names the address).
//!
//! The connection also keeps the leader's end from closing it as idle, and
//! it is where a later fast takeover learns that the leader's process is
//! gone (its connection ends and its port refuses).

use super::{DialId, DialResult};
use crate::ids::{Addr, ConnId, MasterId};
use crate::protocol::{Hello, LeaderHint, Message, Role, PROTOCOL_VERSION};
use crate::time::Millis;

/// The smallest delay before dialling the leader again after a failed dial
/// or a closed watch connection.
pub const REDIAL_MIN: Millis = Millis(50);
/// The largest such delay (the cap of the doubling backoff).
pub const REDIAL_MAX: Millis = Millis(1_000);
/// How long one dial of the leader may take.
pub const DIAL_TIMEOUT: Millis = Millis(2_000);

/// What the watch asks of its node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum WatchOutput {
    /// Dial `addr`; answer with [`LeaderWatch::dialled`].
    Dial {
        /// Echoed back.
        dial: DialId,
        /// The leader's advertised address.
        addr: Addr,
    },
    /// Send on the watch connection.
    Send {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// Close a watch connection (superseded, or the leader changed).
    Close {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: String,
    },
    /// Call [`LeaderWatch::on_timer`] at `at`.
    SetTimer {
        /// When.
        at: Millis,
    },
    /// No timer is needed.
    CancelTimer,
    /// The leader proved its epoch (or a newer one): hints may name it.
    Confirmed(LeaderHint),
}

/// The watch (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct LeaderWatch {
    me: MasterId,
    cluster: String,
    interval: Millis,
    /// The master the elector names as leader, when it is not this one.
    target: Option<(MasterId, Addr)>,
    /// The dial in flight, if any.
    dial: Option<DialId>,
    /// The open watch connection, if any.
    conn: Option<ConnId>,
    next_dial: u64,
    backoff: Millis,
    confirmed: Option<LeaderHint>,
}

impl LeaderWatch {
    /// A watch for master `me` of `cluster`, probing every `interval`.
    pub(crate) fn new(me: MasterId, cluster: String, interval: Millis) -> Self {
        LeaderWatch {
            me,
            cluster,
            interval: interval.max(Millis(1)),
            target: None,
            dial: None,
            conn: None,
            next_dial: 0,
            backoff: REDIAL_MIN,
            confirmed: None,
        }
    }

    /// Whether `conn` is the watch connection (its frames are the watch's,
    /// not the master machine's).
    pub(crate) fn owns(&self, conn: ConnId) -> bool {
        self.conn == Some(conn)
    }

    /// The elector names a leader (`None`: nobody, or this master).
    pub(crate) fn set_leader(
        &mut self,
        leader: Option<(MasterId, Addr)>,
        out: &mut Vec<WatchOutput>,
    ) {
        let leader = leader.filter(|(id, _)| *id != self.me);
        if leader == self.target {
            return;
        }
        if let Some(conn) = self.conn.take() {
            out.push(WatchOutput::Close { conn, reason: "the leader changed".into() });
        }
        self.dial = None;
        self.confirmed = None;
        self.backoff = REDIAL_MIN;
        self.target = leader;
        match &self.target {
            Some(_) => self.start_dial(out),
            None => out.push(WatchOutput::CancelTimer),
        }
    }

    fn start_dial(&mut self, out: &mut Vec<WatchOutput>) {
        let Some((_, addr)) = &self.target else { return };
        self.next_dial += 1;
        let dial = DialId(self.next_dial);
        self.dial = Some(dial);
        out.push(WatchOutput::Dial { dial, addr: addr.clone() });
    }

    fn hello(&self) -> Message {
        Message::Hello(Hello {
            version: PROTOCOL_VERSION,
            cluster: self.cluster.clone(),
            role: Role::Master,
            node: self.me.as_str().to_owned(),
        })
    }

    /// Redial after the current backoff (doubling up to [`REDIAL_MAX`]).
    fn redial_later(&mut self, now: Millis, out: &mut Vec<WatchOutput>) {
        out.push(WatchOutput::SetTimer { at: now + self.backoff });
        self.backoff = self.backoff.times(2).min(REDIAL_MAX);
    }

    /// A dial of the watch ended. A connection of a superseded dial is
    /// closed.
    pub(crate) fn dialled(
        &mut self,
        now: Millis,
        dial: DialId,
        result: DialResult,
        out: &mut Vec<WatchOutput>,
    ) {
        if self.dial != Some(dial) {
            if let DialResult::Connected { conn } = result {
                out.push(WatchOutput::Close { conn, reason: "a superseded watch dial".into() });
            }
            return;
        }
        self.dial = None;
        match result {
            DialResult::Connected { conn } => {
                self.conn = Some(conn);
                out.push(WatchOutput::Send { conn, msg: self.hello() });
                out.push(WatchOutput::SetTimer { at: now + self.interval });
            }
            DialResult::Failed { .. } => self.redial_later(now, out),
        }
    }

    /// A frame on the watch connection.
    pub(crate) fn on_message(&mut self, msg: Message, out: &mut Vec<WatchOutput>) {
        let Message::HelloReply(reply) = msg else { return };
        let Some((id, addr)) = &self.target else { return };
        if !reply.leading || reply.master != *id {
            return; // not (yet, or any more) leading: no proof
        }
        self.backoff = REDIAL_MIN;
        let hint = LeaderHint { id: id.clone(), addr: addr.clone(), epoch: reply.epoch };
        if self.confirmed.as_ref() != Some(&hint) {
            self.confirmed = Some(hint.clone());
            out.push(WatchOutput::Confirmed(hint));
        }
    }

    /// The watch connection ended (the leader's end closed it, or it
    /// broke): dial again after the backoff.
    pub(crate) fn on_closed(&mut self, now: Millis, conn: ConnId, out: &mut Vec<WatchOutput>) {
        if self.conn != Some(conn) {
            return;
        }
        self.conn = None;
        self.redial_later(now, out);
    }

    /// The watch's timer: probe the leader again, or dial it again.
    pub(crate) fn on_timer(&mut self, now: Millis, out: &mut Vec<WatchOutput>) {
        if self.target.is_none() {
            return;
        }
        match self.conn {
            Some(conn) => {
                out.push(WatchOutput::Send { conn, msg: self.hello() });
                out.push(WatchOutput::SetTimer { at: now + self.interval });
            }
            None if self.dial.is_none() => self.start_dial(out),
            None => {} // a dial is in flight; its result re-arms
        }
    }
}

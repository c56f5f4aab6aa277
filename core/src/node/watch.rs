//! A standby's watch on the leader, pure.
//!
//! The elector knows who leads (the lowest election node) but not at which
//! epoch: an election node carries a sequence number, and the leader's
//! epoch (docs/design.md#epochs-fence-everything) lives in the master's state. A hint with the
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
//! it is where the fast takeover learns that the leader's process is gone:
//! when the connection ends by the peer (EOF or reset, never a timeout), the
//! watch probes the same socket address with bare `connect()`s (the first
//! one a probe spacing later: a killed process's listening socket outlives
//! its connections for a moment); refused with `ECONNREFUSED` [`PROBES`]
//! times over at least [`PROBE_SPAN`], it asks the node to depose the
//! leader ([`WatchOutput::Depose`]). A frozen leader (SIGSTOP, a GC pause, a
//! partition) keeps its port and its connections, so it is never taken over
//! this way; its session timeout applies.
//!
//! Tests: `core/tests/fast_takeover_probe.rs`, `core/tests/master_node.rs`,
//! the simulator's `--takeovers` runs and `runtime-smol/tests/e2e_fast_takeover.rs`.

use super::{DialId, DialResult, Ended, ProbeResult};
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
/// How many refused probes prove the leader's process gone.
pub const PROBES: u32 = 3;
/// The least time from the first refused probe to the last.
pub const PROBE_SPAN: Millis = Millis(50);
/// The spacing of the probes.
const PROBE_EVERY: Millis = Millis(PROBE_SPAN.0 / (PROBES as u64 - 1));
/// How long one probe may take.
pub const PROBE_TIMEOUT: Millis = Millis(1_000);

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
    /// `connect()` to `addr` and close at once; answer with
    /// [`LeaderWatch::probed`].
    Probe {
        /// Echoed back.
        probe: u64,
        /// The socket address the watch connection was connected to.
        addr: Addr,
    },
    /// The leader's process is gone (its connection ended by the peer and
    /// its port refused [`PROBES`] times over [`PROBE_SPAN`]): depose it.
    Depose {
        /// The leader.
        leader: MasterId,
        /// What the detector saw, for the log.
        evidence: String,
    },
}

/// A probe sequence after the watch connection ended by the peer.
#[derive(Clone, Debug)]
struct Probing {
    addr: Addr,
    probe: u64,
    /// A probe is out (its answer re-arms the timer).
    in_flight: bool,
    refused: u32,
    first_at: Millis,
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
    /// The socket address the open watch connection is connected to.
    peer: Option<Addr>,
    probing: Option<Probing>,
    next_probe: u64,
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
            peer: None,
            probing: None,
            next_probe: 0,
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
        self.probing = None;
        self.peer = None;
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
            if let DialResult::Connected { conn, .. } = result {
                out.push(WatchOutput::Close { conn, reason: "a superseded watch dial".into() });
            }
            return;
        }
        self.dial = None;
        match result {
            DialResult::Connected { conn, peer } => {
                self.conn = Some(conn);
                self.peer = peer;
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

    /// The watch connection ended: by the peer (EOF, reset), the leader's
    /// process may be gone — probe its port; otherwise dial again after the
    /// backoff.
    pub(crate) fn on_closed(
        &mut self,
        now: Millis,
        conn: ConnId,
        how: Ended,
        out: &mut Vec<WatchOutput>,
    ) {
        if self.conn != Some(conn) {
            return;
        }
        self.conn = None;
        let peer = self.peer.take();
        match (&self.target, how) {
            (Some((_, addr)), Ended::ByPeer) => {
                // The first probe waits one probe spacing: a process killed
                // with SIGKILL has its sockets released newest first, so its
                // connections end (EOF) while its listening socket still
                // accepts for a moment, and a probe sent at once is usually
                // accepted by a process that is already gone.
                let addr = peer.unwrap_or_else(|| addr.clone());
                self.probing =
                    Some(Probing { addr, probe: 0, in_flight: false, refused: 0, first_at: now });
                out.push(WatchOutput::SetTimer { at: now + PROBE_EVERY });
            }
            _ => self.redial_later(now, out),
        }
    }

    fn send_probe(&mut self, out: &mut Vec<WatchOutput>) {
        let Some(p) = &mut self.probing else { return };
        self.next_probe += 1;
        p.probe = self.next_probe;
        p.in_flight = true;
        out.push(WatchOutput::Probe { probe: p.probe, addr: p.addr.clone() });
    }

    /// A probe ended.
    pub(crate) fn probed(
        &mut self,
        now: Millis,
        probe: u64,
        result: ProbeResult,
        out: &mut Vec<WatchOutput>,
    ) {
        let Some(p) = &mut self.probing else { return };
        if p.probe != probe || !p.in_flight {
            return;
        }
        p.in_flight = false;
        if result != ProbeResult::Refused {
            // Something listens (a restarted leader, or the port never
            // refused), or the probe proves nothing: the usual path.
            self.probing = None;
            self.redial_later(now, out);
            return;
        }
        if p.refused == 0 {
            p.first_at = now;
        }
        p.refused += 1;
        if p.refused >= PROBES && now >= p.first_at + PROBE_SPAN {
            let evidence = format!(
                "its connection ended and {} refused {} connections over {}",
                p.addr,
                p.refused,
                now.since(p.first_at)
            );
            self.probing = None;
            if let Some((leader, _)) = &self.target {
                out.push(WatchOutput::Depose { leader: leader.clone(), evidence });
            }
            // Keep watching: the elector names the next leader soon, or
            // the process comes back.
            self.redial_later(now, out);
            return;
        }
        out.push(WatchOutput::SetTimer { at: now + PROBE_EVERY });
    }

    /// The watch's timer: probe the leader again, or dial it again.
    pub(crate) fn on_timer(&mut self, now: Millis, out: &mut Vec<WatchOutput>) {
        if self.target.is_none() {
            return;
        }
        if let Some(p) = &self.probing {
            if !p.in_flight {
                self.send_probe(out);
            }
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

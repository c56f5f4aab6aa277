//! A new leader contacts its recorded peers (docs/design.md#seed-002), pure.
//!
//! Spark's recovery documentation: *"the new leader will contact all
//! previously registered applications and Workers to inform them of the
//! change in leadership, so they need not even have known of the existence
//! of the new Master upon startup."* When a leadership reaches RECOVERING,
//! the master asks ([`crate::master::Action::Contact`]) to dial every
//! recovered worker's callback address. The dials are paced — at most
//! [`MAX_DIALS_IN_FLIGHT`] at once — so a large cluster is not dialled in
//! one instant; each connection carries `Hello` (as a master) and the
//! leader's `MasterChanged`, and is closed after it. `MasterChanged` is a
//! hint: the worker dials the leader's advertised address itself and
//! follows it only once that master's own `HelloReply` proves the epoch.
//! A dial that fails is not retried: a worker that is down will dial its
//! masters when it is back, and the master set it learns leads it here.
//!
//! Tests: `core/tests/advertised_masters.rs` and `core/tests/master_node.rs`
//! (a new leader contacts its recorded peers), `runtime-smol/tests/e2e_leadership.rs`.

use super::{DialId, DialResult};
use crate::ids::{Addr, ConnId};
use std::collections::{BTreeMap, VecDeque};

/// How many contact dials may be in flight at once.
pub const MAX_DIALS_IN_FLIGHT: usize = 16;

/// Contact dials are numbered from here, apart from the leader watch's.
const FIRST_DIAL: u64 = 1 << 63;

/// What the contacts ask of their node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ContactOutput {
    /// Dial `addr`; answer with [`Contacts::dialled`].
    Dial {
        /// Echoed back.
        dial: DialId,
        /// A peer's callback address.
        addr: Addr,
    },
    /// The dial of `addr` connected as `conn`: send the announcement on
    /// it, then close it.
    Announce {
        /// The connection.
        conn: ConnId,
        /// Whom it reaches.
        addr: Addr,
    },
    /// A connection of a leadership that ended: close it unsaid.
    Close {
        /// The connection.
        conn: ConnId,
    },
    /// The dial of `addr` failed.
    Unreached {
        /// Whom.
        addr: Addr,
        /// Why.
        reason: String,
    },
}

/// The contacts of one leadership (see the module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct Contacts {
    queue: VecDeque<Addr>,
    in_flight: BTreeMap<DialId, Addr>,
    next: u64,
}

impl Contacts {
    /// Whether `dial` is one of the contacts' (in flight or not).
    pub(crate) fn is_contact_dial(dial: DialId) -> bool {
        dial.0 >= FIRST_DIAL
    }

    /// A leadership asks to contact `addrs` (replacing any earlier list).
    pub(crate) fn start(&mut self, addrs: Vec<Addr>, out: &mut Vec<ContactOutput>) {
        self.queue = addrs.into();
        self.pump(out);
    }

    /// The leadership ended: nothing more is dialled; connections of dials
    /// still in flight are closed when they come back.
    pub(crate) fn stop(&mut self) {
        self.queue.clear();
    }

    fn pump(&mut self, out: &mut Vec<ContactOutput>) {
        while self.in_flight.len() < MAX_DIALS_IN_FLIGHT {
            let Some(addr) = self.queue.pop_front() else { return };
            let dial = DialId(FIRST_DIAL + self.next);
            self.next += 1;
            self.in_flight.insert(dial, addr.clone());
            out.push(ContactOutput::Dial { dial, addr });
        }
    }

    /// A contact dial ended; `leading` says whether the leadership that
    /// asked for it still holds (else a connection is closed unsaid).
    pub(crate) fn dialled(
        &mut self,
        dial: DialId,
        result: DialResult,
        leading: bool,
        out: &mut Vec<ContactOutput>,
    ) {
        let addr = self.in_flight.remove(&dial);
        match (result, addr) {
            (DialResult::Connected { conn, .. }, Some(addr)) if leading => {
                out.push(ContactOutput::Announce { conn, addr })
            }
            (DialResult::Connected { conn, .. }, _) => out.push(ContactOutput::Close { conn }),
            (DialResult::Failed { reason, .. }, Some(addr)) if leading => {
                out.push(ContactOutput::Unreached { addr, reason })
            }
            (DialResult::Failed { .. }, _) => {}
        }
        if leading {
            self.pump(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(n: usize) -> Vec<Addr> {
        (0..n).map(|i| Addr::new(format!("10.0.0.{i}:7078"))).collect()
    }

    fn dials(out: &[ContactOutput]) -> Vec<DialId> {
        out.iter()
            .filter_map(|o| match o {
                ContactOutput::Dial { dial, .. } => Some(*dial),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn dials_are_paced_and_each_end_makes_room_for_the_next() {
        let mut c = Contacts::default();
        let mut out = Vec::new();
        c.start(addrs(40), &mut out);
        let first = dials(&out);
        assert_eq!(first.len(), MAX_DIALS_IN_FLIGHT);
        assert!(first.iter().all(|d| Contacts::is_contact_dial(*d)));
        let mut out = Vec::new();
        c.dialled(first[0], DialResult::Connected { conn: ConnId(5), peer: None }, true, &mut out);
        assert_eq!(out[0], ContactOutput::Announce { conn: ConnId(5), addr: addrs(1)[0].clone() });
        assert_eq!(dials(&out).len(), 1, "one more dial once one ended");
        let failed = DialResult::Failed { reason: "refused".into(), refused: false };
        let mut out = Vec::new();
        c.dialled(first[1], failed, true, &mut out);
        assert!(matches!(&out[0], ContactOutput::Unreached { .. }));
        assert_eq!(dials(&out).len(), 1);
    }

    #[test]
    fn a_leadership_that_ended_dials_no_more_and_closes_what_comes_back() {
        let mut c = Contacts::default();
        let mut out = Vec::new();
        c.start(addrs(20), &mut out);
        let first = dials(&out);
        c.stop();
        let mut out = Vec::new();
        c.dialled(first[0], DialResult::Connected { conn: ConnId(9), peer: None }, false, &mut out);
        assert_eq!(out, vec![ContactOutput::Close { conn: ConnId(9) }]);
        assert!(dials(&out).is_empty(), "nothing more is dialled");
        assert!(c.queue.is_empty());
    }
}

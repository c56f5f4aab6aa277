//! The master set: the leader keeps a watching listing of the candidates,
//! reads each new candidate's data, remembers the acting leases of those
//! that left, and reports every candidate's address in election order.
//!
//! Tests: the unit tests below (the report), the simulator through the
//! master node (tests/tests/sim_seeds.rs), core/tests/advertised_masters.rs
//! (what the master does with the set).

use super::{Action, CandidateData, CandidateName, Config, Elector, Purpose};
use crate::ids::Addr;
use crate::time::Millis;
use crate::zk::ZkOp;
use std::collections::{BTreeMap, BTreeSet};

/// The master set, as the candidates' listings show it.
#[derive(Debug, Default)]
pub(super) struct Members {
    /// The candidates of the last listing, by node name, with their data
    /// once read.
    pub(super) candidates: BTreeMap<String, Option<CandidateData>>,
    /// The addresses last reported ([`Action::Masters`]).
    pub(super) reported: Option<Vec<Addr>>,
    /// Acting leases of candidates that left the listings recently, with
    /// when this elector saw them gone: a leader deposed at *d* commands
    /// until before *d* + its L, and *d* precedes the listing that missed it.
    pub(super) departed: Vec<(Millis, Millis)>,
}

impl Members {
    /// The master set, every candidate's address in election order
    /// ([`Action::Masters`]), once every candidate's data is known and if
    /// it changed since it was last reported.
    pub(super) fn report(&mut self) -> Option<Action> {
        if self.candidates.values().any(Option::is_none) {
            return None; // a read is still out
        }
        let mut by_seq: Vec<(u64, &Addr)> = self
            .candidates
            .iter()
            .filter_map(|(name, d)| Some((CandidateName::parse(name)?.seq, &d.as_ref()?.addr)))
            .collect();
        by_seq.sort();
        let mut addrs: Vec<Addr> = Vec::new();
        let mut seen: BTreeSet<&Addr> = BTreeSet::new();
        for (_, a) in by_seq {
            // A set, not the list: an election of many candidates is not
            // deduplicated in its square (docs/design.md#issue-20, scenario 5).
            if seen.insert(a) {
                addrs.push(a.clone());
            }
        }
        if self.reported.as_ref() == Some(&addrs) {
            return None;
        }
        self.reported = Some(addrs.clone());
        Some(Action::Masters { addrs })
    }
}

impl Elector {
    /// The leader lists the candidates with a watch, so it hears of every
    /// master that joins or leaves.
    pub(super) fn watch_members(&mut self, now: Millis, out: &mut Vec<Action>) {
        let path = self.election.clone();
        self.send(now, Purpose::Members, ZkOp::GetChildren { path, watch: true }, out);
    }

    /// A listing of the candidates: forget the departed, read the data of
    /// the new ones, report the set once every member's data is known.
    pub(super) fn update_members(
        &mut self,
        now: Millis,
        children: Vec<String>,
        out: &mut Vec<Action>,
    ) {
        let names: BTreeSet<String> =
            children.into_iter().filter(|c| CandidateName::parse(c).is_some()).collect();
        // Candidates that left: a leader among them may command for up to
        // its acting lease after its node went (before this listing), so
        // remember its lease for about that long. Only candidates below our
        // own node could have led before us; data never read (a read still
        // out) counts as the largest lease.
        let own_seq = self.candidacy.node.as_ref().map(|(_, seq)| *seq);
        let max = self.config.acting_lease_max;
        self.members.departed.retain(|(l, gone)| now < *gone + Config::command_wait_for(*l));
        for (name, data) in &self.members.candidates {
            let below = match (CandidateName::parse(name), own_seq) {
                (Some(c), Some(own)) => c.seq < own,
                _ => true,
            };
            if !names.contains(name) && below {
                let l = data.as_ref().map_or(max, |d| d.acting_lease);
                self.members.departed.push((l, now));
            }
        }
        self.members.candidates.retain(|name, _| names.contains(name));
        for name in names {
            if !self.members.candidates.contains_key(&name) {
                self.members.candidates.insert(name.clone(), None);
                let path = format!("{}/{}", self.election, name);
                self.send(now, Purpose::Member(name), ZkOp::GetData { path, watch: false }, out);
            }
        }
        out.extend(self.members.report());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::MasterId;

    fn name(seq: u64) -> String {
        CandidateName { guid: seq, generation: 0, seq }.to_name()
    }

    fn data(addr: &str) -> Option<CandidateData> {
        Some(CandidateData {
            id: MasterId::new(addr),
            addr: Addr::new(addr),
            acting_lease: Millis(100),
        })
    }

    fn masters(addrs: &[&str]) -> Option<Action> {
        Some(Action::Masters { addrs: addrs.iter().map(|a| Addr::new(*a)).collect() })
    }

    #[test]
    fn the_set_is_reported_in_election_order_once_known_and_once_per_change() {
        let mut m = Members::default();
        m.candidates.insert(name(7), data("b"));
        m.candidates.insert(name(3), None);
        assert_eq!(m.report(), None, "a read is still out");
        m.candidates.insert(name(3), data("a"));
        // A second node of one address (a restarted master not yet gone)
        // is listed once.
        m.candidates.insert(name(9), data("a"));
        assert_eq!(m.report(), masters(&["a", "b"]));
        assert_eq!(m.report(), None, "unchanged: not reported again");
        m.candidates.remove(&name(3));
        assert_eq!(m.report(), masters(&["b", "a"]));
    }
}

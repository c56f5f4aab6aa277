//! Candidate node names and data.
//!
//! A candidate node is `<root>/election/_c_<guid>.<generation>-n_<seq>`:
//!
//! * `_c_<token>-n_` is Curator's *protected mode* prefix: the token is
//!   unique to this process (the runtime's GUID, 16 hex digits) and to one
//!   session of it (`generation`, decimal, +1 whenever the elector abandons
//!   a session), so after a `ConnectionLoss` on create the elector can find
//!   the node it may have created by listing (AURORA-1061, CURATOR-45);
//! * `<seq>` is the 10-digit sequence the server appends; the lowest leads.
//!
//! The data is a [`CandidateData`] encoded with postcard.

use crate::ids::{Addr, MasterId};
use serde::{Deserialize, Serialize};

/// The parsed name of a candidate node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CandidateName {
    /// The process GUID of the candidate.
    pub guid: u64,
    /// Which session of that process created it.
    pub generation: u64,
    /// The server-assigned sequence number.
    pub seq: u64,
}

impl CandidateName {
    /// The name prefix passed to an ephemeral-sequential create.
    pub fn prefix(guid: u64, generation: u64) -> String {
        format!("_c_{guid:016x}.{generation}-n_")
    }

    /// Parses a child name; `None` for anything not in the format (such
    /// nodes are not candidates and are ignored).
    pub fn parse(name: &str) -> Option<CandidateName> {
        let rest = name.strip_prefix("_c_")?;
        let (token, seq) = rest.rsplit_once("-n_")?;
        if seq.len() != 10 || !seq.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (guid, generation) = token.split_once('.')?;
        if guid.len() != 16 {
            return None;
        }
        Some(CandidateName {
            guid: u64::from_str_radix(guid, 16).ok()?,
            generation: generation.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }

    /// The full child name.
    pub fn to_name(self) -> String {
        format!("{}{:010}", Self::prefix(self.guid, self.generation), self.seq)
    }
}

/// What a candidate node holds: who the candidate is and where to reach it.
/// Encoded with postcard (`MasterId` string, then `Addr` string).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateData {
    /// The master's id.
    pub id: MasterId,
    /// The address workers and subscribers dial.
    pub addr: Addr,
}

impl CandidateData {
    /// The node data.
    pub fn encode(&self) -> Vec<u8> {
        // Serializing two strings into a Vec cannot fail.
        postcard::to_allocvec(self).expect("postcard encodes strings")
    }

    /// Decodes node data; `None` if it is not a candidate's (peer input
    /// never panics).
    pub fn decode(bytes: &[u8]) -> Option<CandidateData> {
        postcard::from_bytes(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_reject_junk() {
        let n = CandidateName { guid: 0xdead_beef, generation: 3, seq: 42 };
        let s = n.to_name();
        assert_eq!(s, "_c_00000000deadbeef.3-n_0000000042");
        assert_eq!(CandidateName::parse(&s), Some(n));
        for junk in [
            "lock-0000000001",
            "_c_00000000deadbeef.3-n_42",
            "_c_deadbeef.3-n_0000000042",
            "_c_00000000deadbeef-n_0000000042",
        ] {
            assert_eq!(CandidateName::parse(junk), None, "{junk}");
        }
        let d = CandidateData { id: MasterId::new("m1"), addr: Addr::new("10.0.0.1:5050") };
        assert_eq!(CandidateData::decode(&d.encode()), Some(d));
        assert_eq!(CandidateData::decode(&[0xff]), None);
    }
}

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
//! The data is a [`CandidateData`] encoded with postcard; the data of the
//! election directory itself is a [`DeposeMarker`] (or empty).

use crate::ids::{Addr, MasterId};
use crate::time::Millis;
use serde::{Deserialize, Serialize};

/// The acting lease of a candidate whose node data names none (written by
/// a version before issue 20 (docs/design.md#issue-20), whose lease was always 100 ms).
pub const LEGACY_ACTING_LEASE: Millis = Millis(100);

/// The largest acting lease node data may name; data naming a larger one
/// is not a candidate's (peer input is checked before it is trusted, and a
/// successor would otherwise wait for it).
pub const MAX_ACTING_LEASE: Millis = Millis(60_000);

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

/// What a candidate node holds: who the candidate is, where to reach it,
/// and the acting lease L it uses for as long as that node leads (fixed
/// when the node is created: node data never changes).
///
/// Encoded with postcard: `MasterId` string, `Addr` string, then L in
/// milliseconds (a varint). Data of earlier versions ends after the address
/// and decodes with L = [`LEGACY_ACTING_LEASE`]; earlier versions decode
/// this data too (postcard ignores the trailing field).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateData {
    /// The master's id.
    pub id: MasterId,
    /// The address workers and subscribers dial.
    pub addr: Addr,
    /// The acting lease this candidate uses while it leads; a successor
    /// waits 1.1 × it + 10 ms before its first command.
    pub acting_lease: Millis,
}

#[derive(Serialize, Deserialize)]
struct Legacy {
    id: MasterId,
    addr: Addr,
}

#[derive(Serialize, Deserialize)]
struct WithLease {
    id: MasterId,
    addr: Addr,
    acting_lease_ms: u64,
}

impl CandidateData {
    /// The node data.
    pub fn encode(&self) -> Vec<u8> {
        let w = WithLease {
            id: self.id.clone(),
            addr: self.addr.clone(),
            acting_lease_ms: self.acting_lease.0,
        };
        // Serializing two strings and an integer into a Vec cannot fail.
        postcard::to_allocvec(&w).expect("postcard encodes strings and integers")
    }

    /// Decodes node data; `None` if it is not a candidate's (peer input
    /// never panics), including data naming an acting lease above
    /// [`MAX_ACTING_LEASE`].
    pub fn decode(bytes: &[u8]) -> Option<CandidateData> {
        if let Ok((w, rest)) = postcard::take_from_bytes::<WithLease>(bytes) {
            if !rest.is_empty() || w.acting_lease_ms > MAX_ACTING_LEASE.0 {
                return None;
            }
            return Some(CandidateData {
                id: w.id,
                addr: w.addr,
                acting_lease: Millis(w.acting_lease_ms),
            });
        }
        let (l, rest) = postcard::take_from_bytes::<Legacy>(bytes).ok()?;
        rest.is_empty().then_some(CandidateData {
            id: l.id,
            addr: l.addr,
            acting_lease: LEGACY_ACTING_LEASE,
        })
    }
}

/// The data a standby writes on the election directory in the same
/// transaction that deletes a deposed leader's node (fast takeover): the
/// acting lease that leader may still be commanding under. A master elected
/// without having read the deposed leader's node (it joined during the
/// takeover) reads it here; a leader whose wait is over empties it again.
/// Encoded with postcard (L in milliseconds, a varint); empty data means
/// none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeposeMarker {
    /// The largest acting lease a deposed leader may still command under.
    pub acting_lease: Millis,
}

impl DeposeMarker {
    /// The data.
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(&self.acting_lease.0).expect("postcard encodes integers")
    }

    /// Decodes the election directory's data: `Ok(None)` when empty,
    /// `Err(())` for anything else that is not a marker (a successor must
    /// then assume the largest lease).
    #[allow(clippy::result_unit_err)]
    pub fn decode(bytes: &[u8]) -> Result<Option<DeposeMarker>, ()> {
        if bytes.is_empty() {
            return Ok(None);
        }
        match postcard::take_from_bytes::<u64>(bytes) {
            Ok((ms, rest)) if rest.is_empty() && ms <= MAX_ACTING_LEASE.0 => {
                Ok(Some(DeposeMarker { acting_lease: Millis(ms) }))
            }
            _ => Err(()),
        }
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
        let d = CandidateData {
            id: MasterId::new("m1"),
            addr: Addr::new("10.0.0.1:5050"),
            acting_lease: Millis(700),
        };
        assert_eq!(CandidateData::decode(&d.encode()), Some(d));
        assert_eq!(CandidateData::decode(&[0xff]), None);
    }

    /// Node data of earlier versions (id and address only) means the
    /// legacy 100 ms lease; earlier versions read the new data's id and
    /// address (postcard's `from_bytes` ignores the trailing lease).
    #[test]
    fn node_data_is_compatible_both_ways() {
        let old = Legacy { id: MasterId::new("m1"), addr: Addr::new("10.0.0.1:5050") };
        let bytes = postcard::to_allocvec(&old).unwrap();
        let d = CandidateData::decode(&bytes).unwrap();
        assert_eq!(d.acting_lease, LEGACY_ACTING_LEASE);
        assert_eq!(d.addr, Addr::new("10.0.0.1:5050"));
        let new = CandidateData { acting_lease: Millis(2_100), ..d }.encode();
        let read_by_old: Legacy = postcard::from_bytes(&new).unwrap();
        assert_eq!(read_by_old.id, MasterId::new("m1"));
        // A lease past the limit is not a candidate's data.
        let huge = CandidateData { acting_lease: Millis(MAX_ACTING_LEASE.0 + 1), ..read(&new) };
        assert_eq!(CandidateData::decode(&huge.encode()), None);
        let m = DeposeMarker { acting_lease: Millis(700) };
        assert_eq!(DeposeMarker::decode(&m.encode()), Ok(Some(m)));
        assert_eq!(DeposeMarker::decode(&[]), Ok(None));
        assert_eq!(DeposeMarker::decode(&[0xff, 0xff]), Err(()));
    }

    fn read(bytes: &[u8]) -> CandidateData {
        CandidateData::decode(bytes).unwrap()
    }
}

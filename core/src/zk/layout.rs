//! Where the ZooKeeper store keeps its records: nodes under
//! `<root>/state/`, sharded by a hash prefix.
//!
//! ```text
//! <root>/state/epoch            the epoch record (one node, never sharded)
//! <root>/state/<xx>/<stem>      every worker, framework and history record, in the
//!                               shard <xx>: two lower-case hex digits, the
//!                               first byte of SHA-256(<stem>)
//! ```
//!
//! The node name is the key's stem ([`key_stem`]: `w-<id>`, `f-<id>`,
//! `h-<seq>`; history records hash like the others, so a history of
//! [`MAX_RETAINED_FRAMEWORKS`](crate::limits::MAX_RETAINED_FRAMEWORKS) adds
//! about 40 children to a shard). A
//! shard node is an empty persistent node, created the first time a record
//! goes into it and never deleted by regent; a store holds only the shards
//! its records needed.
//!
//! **Why [`SHARDS`] = 256.** ZooKeeper refuses a packet over `jute.maxbuffer`
//! ([`JUTE_MAXBUFFER`], 1 MiB - 1, by default), and a listing is one reply:
//! every child name costs 4 bytes of length plus the name, at most
//! [`MAX_STEM`] = 202 bytes (`w-` and an escaped id of [`MAX_ESCAPED`]
//! bytes; a longer id is shortened to 135). With [`REQUEST_OVERHEAD`] kept
//! free, one listing holds [`MAX_LISTED`] = 5,070 children of the longest
//! names. The flat layout of earlier versions (every record a child of
//! `<root>/state/`) therefore stopped fitting at about 5,000 records of long
//! names and at some tens of thousands of typical ones. Sixteen shards would
//! put 6,250 records in the average shard at 100,000 records: 1.29 MB of the
//! longest names, over the limit. 256 shards put 391 there (95% of shards
//! within ±40), 81 KB even of the longest names, a thirteenth of the limit:
//! a store holds about 1.3 million records of the longest names (and far
//! more of typical ones) before an average shard fills one listing. A load
//! lists every shard that exists, so a larger fan-out would cost a small
//! cluster more listings (4,096 shards: more listings than records up to a
//! few thousand records) for no gain at the sizes regent targets. The
//! top-level listing holds at most the 256 shard names, `epoch`, and the
//! records of the flat layout a store still has from an earlier version.
//!
//! The hash is not keyed (the layout must be readable without the cluster
//! secret, e.g. by `regent store seal`), so someone able to register
//! workers could pick ids that fill one shard; 5,070 registrations of the
//! longest ids, all accepted by the leader, would be needed to overflow it.
//!
//! **The flat layout** (`<root>/state/<stem>`, written by earlier versions)
//! is still read: a leader's load moves each such record into its shard
//! (see `zk::store`), so a store upgrades on its first load.

use super::{JUTE_MAXBUFFER, REQUEST_OVERHEAD};
use crate::store::names::{key_stem, MAX_ESCAPED};
use crate::store::RecordKey;
use sha2::{Digest, Sha256};

/// How many shards records are spread over (see the [module docs](self)).
pub const SHARDS: usize = 256;

/// The longest node name of a record ([`key_stem`]).
pub const MAX_STEM: usize = 2 + MAX_ESCAPED;

/// Reply header of a listing: the packet length, xid, zxid, error code and
/// the vector's length.
const LISTING_HEADER: usize = 4 + 4 + 8 + 4 + 4;

/// The most children of the longest names one listing can return within
/// [`JUTE_MAXBUFFER`] less [`REQUEST_OVERHEAD`].
pub const MAX_LISTED: usize = (JUTE_MAXBUFFER - REQUEST_OVERHEAD - LISTING_HEADER) / (4 + MAX_STEM);

/// The record count the fan-out is chosen for.
pub const DESIGN_RECORDS: usize = 100_000;

// Twice the average shard of the design size, of the longest names, fits
// one listing (with room to spare: see the module docs).
const _: () = assert!(2 * DESIGN_RECORDS / SHARDS <= MAX_LISTED / 4);

/// The name of the epoch record's node (directly under `<root>/state/`).
pub const EPOCH_NODE: &str = "epoch";

/// The shard (`00`..`ff`) the record node named `stem` lives in; `None` for
/// the epoch, which is never sharded.
pub fn shard_of(stem: &str) -> Option<u8> {
    (stem != EPOCH_NODE).then(|| Sha256::digest(stem.as_bytes())[0])
}

/// The name of shard `shard`: two lower-case hex digits.
pub fn shard_name(shard: u8) -> String {
    format!("{shard:02x}")
}

/// Parses a shard name (exactly two lower-case hex digits).
pub fn parse_shard(name: &str) -> Option<u8> {
    let b = name.as_bytes();
    let hex = |c: u8| matches!(c, b'0'..=b'9' | b'a'..=b'f');
    if b.len() == 2 && hex(b[0]) && hex(b[1]) {
        u8::from_str_radix(name, 16).ok()
    } else {
        None
    }
}

/// Whether `name` is the name of a record node (`epoch`, `w-...`, `f-...`,
/// `h-...`, `t-...`, `revocations`);
/// anything else under `<root>/state/` is not regent's and is left alone.
pub fn is_record_name(name: &str) -> bool {
    name == EPOCH_NODE
        || name == crate::store::names::REVOCATIONS_STEM
        || name.starts_with("w-")
        || name.starts_with("f-")
        || name.starts_with("h-")
        || name.starts_with("t-")
}

/// The path of shard `shard` under `state` (`<root>/state`).
pub fn shard_path(state: &str, shard: u8) -> String {
    format!("{state}/{}", shard_name(shard))
}

/// The path of the node named `stem` under `state` (`<root>/state`).
pub fn stem_path(state: &str, stem: &str) -> String {
    match shard_of(stem) {
        Some(s) => format!("{state}/{}/{stem}", shard_name(s)),
        None => format!("{state}/{stem}"),
    }
}

/// The path of the node holding `key` under `state` (`<root>/state`).
pub fn record_path(state: &str, key: &RecordKey) -> String {
    stem_path(state, &key_stem(key))
}

/// The path of the node of `stem` in the flat layout of earlier versions.
pub fn flat_path(state: &str, stem: &str) -> String {
    format!("{state}/{stem}")
}

/// Where a record node was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordNode {
    /// Its path.
    pub path: String,
    /// Its name (the key's stem, if the node is well placed).
    pub stem: String,
    /// Its shard, `None` when directly under `<root>/state/`.
    pub shard: Option<u8>,
}

impl RecordNode {
    /// A worker or framework record of the flat layout (to be moved into
    /// its shard).
    pub fn is_flat(&self) -> bool {
        self.shard.is_none() && self.stem != EPOCH_NODE
    }

    /// In a shard, but not the one its name hashes to (or the epoch in a
    /// shard): never written there by regent, and never found there by a
    /// write, so a load reports it as damaged.
    pub fn is_misplaced(&self) -> bool {
        self.shard.is_some() && shard_of(&self.stem) != self.shard
    }

    /// Where it is relative to `<root>/state/` (`ab/w-x`, `epoch`).
    pub fn relative(&self) -> String {
        match self.shard {
            Some(s) => format!("{}/{}", shard_name(s), self.stem),
            None => self.stem.clone(),
        }
    }
}

/// Every record node under `state`, in both layouts, given a function that
/// lists a node's children (a model, a synchronous client): the top-level
/// records (the epoch, and any record of the flat layout), then every
/// shard's. Names that are neither records nor shards are skipped.
pub fn record_nodes(state: &str, mut children: impl FnMut(&str) -> Vec<String>) -> Vec<RecordNode> {
    let mut out = Vec::new();
    let mut shards = Vec::new();
    for name in children(state) {
        if let Some(s) = parse_shard(&name) {
            shards.push(s);
        } else if is_record_name(&name) {
            out.push(RecordNode { path: format!("{state}/{name}"), stem: name, shard: None });
        }
    }
    shards.sort_unstable();
    for s in shards {
        let dir = shard_path(state, s);
        for name in children(&dir) {
            if is_record_name(&name) {
                out.push(RecordNode { path: format!("{dir}/{name}"), stem: name, shard: Some(s) });
            }
        }
    }
    out
}

/// Whether `path` is the path of a record node under `state`, in either
/// layout (a shard node is not).
pub fn is_record_path(state: &str, path: &str) -> bool {
    let Some(rest) = path.strip_prefix(state).and_then(|r| r.strip_prefix('/')) else {
        return false;
    };
    match rest.split_once('/') {
        None => is_record_name(rest),
        Some((shard, name)) => parse_shard(shard).is_some() && is_record_name(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::WorkerId;

    #[test]
    fn records_go_to_the_shard_of_their_name_and_the_epoch_stays_on_top() {
        let key = RecordKey::Worker(WorkerId::new("w1"));
        let stem = key_stem(&key);
        let shard = shard_of(&stem).unwrap();
        assert_eq!(record_path("/r/state", &key), format!("/r/state/{shard:02x}/w-w1"));
        assert_eq!(record_path("/r/state", &RecordKey::Epoch), "/r/state/epoch");
        assert!(is_record_path("/r/state", &record_path("/r/state", &key)));
        assert!(is_record_path("/r/state", "/r/state/w-w1"), "the flat layout");
        assert!(!is_record_path("/r/state", "/r/state/0a"), "a shard is not a record");
        assert!(!is_record_path("/r/state", "/r/state/0A/w-x"));
        assert!(!is_record_path("/r/stateX/w-a", "/r/state"));
        assert_eq!(parse_shard("0a"), Some(10));
        assert_eq!(parse_shard("ff"), Some(255));
        assert_eq!(parse_shard("0A"), None);
        assert_eq!(parse_shard("100"), None);
    }

    /// Every kind of record key names a record node, so a new leader loads
    /// it (a tenant's `t-` was once missing: its limit was lost across a
    /// failover, runtime-smol/tests/e2e_tenants.rs).
    #[test]
    fn every_record_key_names_a_record_node() {
        let keys = [
            RecordKey::Epoch,
            RecordKey::Worker(crate::ids::WorkerId::new("w1")),
            RecordKey::Framework(crate::ids::FrameworkId::new("f1")),
            RecordKey::History(7),
            RecordKey::Revocations,
            RecordKey::Tenant("team-a".into()),
        ];
        for key in keys {
            let stem = key_stem(&key);
            assert!(is_record_name(&stem), "{key:?} as {stem}");
            assert!(is_record_path("/r/state", &record_path("/r/state", &key)), "{key:?}");
        }
    }

    #[test]
    fn history_records_are_sharded_like_the_others() {
        let mut shards = std::collections::BTreeSet::new();
        for seq in 0..200 {
            let key = RecordKey::History(seq);
            let stem = key_stem(&key);
            assert!(is_record_name(&stem), "{stem}");
            let shard = shard_of(&stem).expect("sharded");
            shards.insert(shard);
            let path = record_path("/r/state", &key);
            assert_eq!(path, format!("/r/state/{shard:02x}/h-{seq:020}"));
            assert!(is_record_path("/r/state", &path));
        }
        assert!(shards.len() > 100, "200 entries spread over the shards: {}", shards.len());
    }

    #[test]
    fn the_fan_out_keeps_every_listing_of_100_000_records_far_under_the_limit() {
        let mut counts = [0usize; SHARDS];
        for i in 0..DESIGN_RECORDS {
            let stem = key_stem(&RecordKey::Worker(WorkerId::new(format!("worker-{i:06}"))));
            counts[usize::from(shard_of(&stem).unwrap())] += 1;
        }
        let max = *counts.iter().max().unwrap();
        let mean = DESIGN_RECORDS / SHARDS;
        assert!(max < mean + mean / 4, "the fullest shard holds {max} (mean {mean})");
        assert!(max * (4 + MAX_STEM) + LISTING_HEADER < JUTE_MAXBUFFER / 10);
        assert_eq!(MAX_LISTED, 5_070);
    }

    #[test]
    fn both_layouts_are_enumerated() {
        let tree: std::collections::BTreeMap<&str, Vec<&str>> = [
            ("/s", vec!["epoch", "w-old", "3f", "junk", "ab"]),
            ("/s/3f", vec!["w-a", "f-b", "other"]),
            ("/s/ab", vec!["epoch"]),
        ]
        .into_iter()
        .collect();
        let nodes = record_nodes("/s", |p| {
            tree.get(p).map(|c| c.iter().map(|s| s.to_string()).collect()).unwrap_or_default()
        });
        let rel: Vec<String> = nodes.iter().map(RecordNode::relative).collect();
        assert_eq!(rel, ["epoch", "w-old", "3f/w-a", "3f/f-b", "ab/epoch"]);
        assert!(nodes[1].is_flat() && !nodes[0].is_flat());
        assert!(nodes[4].is_misplaced(), "the epoch never lives in a shard");
    }
}

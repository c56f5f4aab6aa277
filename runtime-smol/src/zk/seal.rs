//! `regent store seal --zk`: seals a cluster's ZooKeeper store offline.
//!
//! With every master of the cluster stopped, [`seal_zookeeper`]:
//!
//! 1. opens a session with the credentials of the current and every previous
//!    secret ([`ZkConfig`]);
//! 2. refuses to go on while any candidate is under `<root>/election/` (a
//!    master is running and may write the store);
//! 3. reads and checks every record under `<root>/state/` ([`read_store`]:
//!    in its shard, or in the flat layout of earlier versions) with the given
//!    [`Sealing`] (current key, previous keys, and unsealed records only when
//!    the operator said `--accept-unsealed`); a single record it cannot
//!    verify stops it before anything is written, naming every such record;
//! 4. writes every record that is unsealed or under a previous key again,
//!    sealed under the current key, each conditional on the version it read
//!    (a record that changed meanwhile stops it: a master is running);
//! 5. sets the ACL of `<root>`, `<root>/election`, `<root>/state`, every
//!    shard node and every record to the current secret's digest identity
//!    only (no world access, no previous identity), so the previous secret
//!    can be dropped.
//!
//! Records of the flat layout are sealed where they are; the next leader's
//! load moves them into their shards. [`check_zookeeper`] (`regent store
//! check --zk`) reads and checks the same way and writes nothing.
//!
//! It is idempotent: running it again rewrites nothing.

use super::ZkConfig;
use regent_core::store::format::{self, Damage, RecordError};
use regent_core::store::names::key_stem;
use regent_core::store::seal::{Seal, Sealing};
use regent_core::store::{Record, RecordKey};
use regent_core::zk::layout::{self, RecordNode};
use regent_core::zk::MAX_LOAD_IN_FLIGHT;
use std::time::Duration;
use zookeeper_client as zkc;

/// What [`seal_zookeeper`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SealReport {
    /// How many records were checked.
    pub records: usize,
    /// The records written again under the current key (node path, how they
    /// were found).
    pub resealed: Vec<(String, Seal)>,
    /// The nodes whose ACL was set to the current identity.
    pub acls_set: Vec<String>,
}

/// Seals the store of the cluster at `root` (see the [module docs](self)).
/// `config` must carry the current secret (and any previous ones); `sealing`
/// the matching keys.
pub async fn seal_zookeeper(
    config: &ZkConfig,
    root: &str,
    sealing: &Sealing,
) -> Result<SealReport, SealError> {
    if config.secret.is_none() || !sealing.is_sealing() {
        return Err(SealError::NoSecret);
    }
    let root = root.trim_end_matches('/').to_owned();
    let election = format!("{root}/election");
    let state = format!("{root}/state");
    let zk = config
        .connect(Duration::from_secs(10))
        .await
        .map_err(|source| SealError::Session { hosts: config.hosts.clone(), source })?;
    let refused = zk_error;
    let no_master = || async {
        match zk.list_children(&election).await {
            Ok(c) if c.is_empty() => Ok(()),
            Ok(candidates) => Err(SealError::MasterRunning {
                election: election.clone(),
                candidates,
                midway: false,
            }),
            Err(zkc::Error::NoNode) => Ok(()),
            Err(e) => Err(refused("listing", &election, e)),
        }
    };
    no_master().await?;

    let store = read_store(&zk, &state, sealing).await?;
    if !store.damaged.is_empty() {
        return Err(SealError::Unverifiable { damaged: store.damaged });
    }
    let mut report = SealReport { records: store.records.len(), ..SealReport::default() };
    // Every node, a key's stale copy in the other layout too: the next
    // load reads (and checks) both.
    for Found { path, record, seal, version } in store.found {
        if !sealing.needs_reseal(seal) {
            continue;
        }
        let image = format::encode_with(&record, sealing)?;
        match zk.set_data(&path, &image, Some(version)).await {
            Ok(_) => report.resealed.push((path, seal)),
            Err(zkc::Error::BadVersion) => {
                return Err(SealError::Changed { path, resealed: report.resealed.len() })
            }
            Err(e) => return Err(refused("writing", &path, e)),
        }
    }
    let acls = config.acls();
    let mut nodes = vec![root.clone(), election.clone(), state.clone()];
    nodes.extend(store.shards.iter().cloned());
    nodes.extend(store.nodes.iter().map(|n| n.path.clone()));
    for path in nodes {
        match zk.set_acl(&path, &acls, None).await {
            Ok(_) => report.acls_set.push(path),
            Err(zkc::Error::NoNode) => {}
            Err(e) => return Err(refused("setting the ACL of", &path, e)),
        }
    }
    no_master().await.map_err(|e| match e {
        SealError::MasterRunning { election, candidates, .. } => {
            SealError::MasterRunning { election, candidates, midway: true }
        }
        other => other,
    })?;
    Ok(report)
}

/// One record read from ZooKeeper and verified.
#[derive(Clone, Debug)]
pub struct Found {
    /// The node it was read from.
    pub path: String,
    /// The record.
    pub record: Record,
    /// How it was sealed.
    pub seal: Seal,
    /// The node's version when read.
    pub version: i32,
}

/// What [`read_store`] found under `<root>/state/`.
#[derive(Clone, Debug, Default)]
pub struct StoreContents {
    /// Every record node that verified.
    pub found: Vec<Found>,
    /// The records, one per key (the node written last), ordered by key.
    pub records: Vec<Record>,
    /// Every record node found (both layouts).
    pub nodes: Vec<RecordNode>,
    /// The paths of the shard nodes.
    pub shards: Vec<String>,
    /// Each record that does not verify, named with what is wrong.
    pub damaged: Vec<String>,
    /// Record nodes of the flat layout (moved into their shards by the next
    /// leader's load).
    pub flat: usize,
}

fn zk_error(what: &'static str, path: &str, source: zkc::Error) -> SealError {
    SealError::Zk { what, path: path.to_string(), source }
}

/// `listing /x/state failed: ...`, or the hint that the node belongs to
/// another secret.
fn zk_error_text(what: &str, path: &str, source: &zkc::Error) -> String {
    match source {
        zkc::Error::NoAuth => format!(
            "{what} {path}: not authorized (the node belongs to another secret: give it with \
             --previous-secret-file)"
        ),
        e => format!("{what} {path} failed: {e}"),
    }
}

/// Why a ZooKeeper store could not be sealed ([`seal_zookeeper`]), read
/// ([`read_store`]) or checked ([`check_zookeeper`]).
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// Sealing was asked without the cluster secret.
    #[error("sealing a store needs the cluster secret (--secret-file F)")]
    NoSecret,
    /// No session could be opened with the ensemble.
    #[error("cannot open a ZooKeeper session to {hosts}: {source}")]
    Session {
        /// The connect string.
        hosts: String,
        /// ZooKeeper's error.
        source: zkc::Error,
    },
    /// A master is a candidate: the store may be written while it is
    /// sealed.
    #[error(
        "a master is running: {election} has candidate(s) {}; stop every master of the cluster \
         before sealing its store{}",
        .candidates.join(", "),
        if *.midway { " (it started while the store was being sealed)" } else { "" }
    )]
    MasterRunning {
        /// The election node.
        election: String,
        /// The candidates' node names.
        candidates: Vec<String>,
        /// Found after records were written (it started meanwhile).
        midway: bool,
    },
    /// A ZooKeeper request failed (`NoAuth`: the node belongs to a secret
    /// not given).
    #[error("{}", zk_error_text(.what, .path, .source))]
    Zk {
        /// What was done (`listing`, `reading`, `writing`, ...).
        what: &'static str,
        /// The node's path.
        path: String,
        /// ZooKeeper's error.
        source: zkc::Error,
    },
    /// Records that cannot be verified stopped sealing before any write.
    #[error(
        "{} record(s) cannot be verified, nothing was written: {}",
        .damaged.len(),
        .damaged.join("; ")
    )]
    Unverifiable {
        /// Each damaged record, named with its damage.
        damaged: Vec<String>,
    },
    /// A check found damaged records.
    #[error("{} damaged record(s): {}", .damaged.len(), .damaged.join("; "))]
    Damaged {
        /// Each damaged record, named with its damage.
        damaged: Vec<String>,
    },
    /// A record could not be sealed again.
    #[error(transparent)]
    Encode(#[from] format::EncodeError),
    /// A record changed between its read and its write: a master runs.
    #[error(
        "{path} changed while it was being sealed: is a master running? (records sealed so far: \
         {resealed})"
    )]
    Changed {
        /// The record's node.
        path: String,
        /// How many records had been sealed.
        resealed: usize,
    },
}

crate::error::into_report!(SealError);

/// Reads and verifies every record under `state` (`<root>/state`) as a
/// master's load would ([`layout`]: records in their shards, the epoch
/// on top, records of the flat layout of earlier versions too), with up to
/// [`MAX_LOAD_IN_FLIGHT`] reads pipelined on the session. A record that
/// does not decode, is not sealed as `sealing` requires, or sits under a
/// name or in a shard that is not its own is listed in
/// [`StoreContents::damaged`]; a key found in both layouts counts once
/// (the node written last, as a load keeps it).
pub async fn read_store(
    zk: &zkc::Client,
    state: &str,
    sealing: &Sealing,
) -> Result<StoreContents, SealError> {
    let top = match zk.list_children(state).await {
        Ok(names) => names,
        Err(zkc::Error::NoNode) => return Ok(StoreContents::default()),
        Err(e) => return Err(zk_error("listing", state, e)),
    };
    let mut out = StoreContents::default();
    let mut shards: Vec<u8> = top.iter().filter_map(|n| layout::parse_shard(n)).collect();
    shards.sort_unstable();
    let mut nodes: Vec<RecordNode> = top
        .into_iter()
        .filter(|n| layout::is_record_name(n))
        .map(|stem| RecordNode { path: layout::flat_path(state, &stem), stem, shard: None })
        .collect();
    // Listings are sent together (the client sends a request when it is
    // made), then awaited in order.
    let paths: Vec<String> = shards.iter().map(|&s| layout::shard_path(state, s)).collect();
    let listings: Vec<_> = paths.iter().map(|p| zk.list_children(p)).collect();
    for ((s, path), listing) in shards.iter().zip(&paths).zip(listings) {
        let names = match listing.await {
            Ok(names) => names,
            Err(zkc::Error::NoNode) => continue,
            Err(e) => return Err(zk_error("listing", path, e)),
        };
        out.shards.push(path.clone());
        for stem in names.into_iter().filter(|n| layout::is_record_name(n)) {
            nodes.push(RecordNode { path: format!("{path}/{stem}"), stem, shard: Some(*s) });
        }
    }
    let mut read: Vec<(Found, u64)> = Vec::with_capacity(nodes.len());
    for chunk in nodes.chunks(MAX_LOAD_IN_FLIGHT) {
        let replies: Vec<_> = chunk.iter().map(|n| zk.get_data(&n.path)).collect();
        for (node, reply) in chunk.iter().zip(replies) {
            let (data, stat) = match reply.await {
                Ok(d) => d,
                Err(zkc::Error::NoNode) => continue,
                Err(e) => return Err(zk_error("reading", &node.path, e)),
            };
            let damage = |damage| RecordError { record: node.path.clone(), damage }.to_string();
            let (record, seal) = match format::decode_named_with(&node.path, &data, sealing) {
                Ok(decoded) => decoded,
                Err(e) => {
                    out.damaged.push(e.to_string());
                    continue;
                }
            };
            if key_stem(&record.key()) != node.stem {
                let found = record.key().to_string();
                out.damaged.push(damage(Damage::WrongKey { stored_as: node.relative(), found }));
                continue;
            }
            if node.is_misplaced() {
                let belongs_at = layout::stem_path("", &node.stem).trim_start_matches('/').into();
                out.damaged
                    .push(damage(Damage::Misplaced { stored_as: node.relative(), belongs_at }));
                continue;
            }
            out.flat += usize::from(node.is_flat());
            let found = Found { path: node.path.clone(), record, seal, version: stat.version };
            read.push((found, stat.mzxid as u64));
        }
    }
    // One record per key: the node written last.
    read.sort_by(|(a, az), (b, bz)| a.record.key().cmp(&b.record.key()).then(bz.cmp(az)));
    let mut last: Option<RecordKey> = None;
    for (found, _) in read {
        let key = found.record.key();
        if last.as_ref() != Some(&key) {
            last = Some(key);
            out.records.push(found.record.clone());
        }
        out.found.push(found);
    }
    out.nodes = nodes;
    Ok(out)
}

/// What [`check_zookeeper`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// The records that verified (one per key).
    pub records: Vec<Record>,
    /// Record nodes still in the flat layout of earlier versions.
    pub flat: usize,
    /// Shard nodes.
    pub shards: usize,
}

/// `regent store check --zk`: reads and verifies every record of the
/// cluster at `root` as a master with `sealing` would (see [`read_store`]),
/// writing nothing; an error names every damaged record.
pub async fn check_zookeeper(
    config: &ZkConfig,
    root: &str,
    sealing: &Sealing,
) -> Result<CheckReport, SealError> {
    let state = format!("{}/state", root.trim_end_matches('/'));
    let zk = config
        .connect(Duration::from_secs(10))
        .await
        .map_err(|source| SealError::Session { hosts: config.hosts.clone(), source })?;
    let store = read_store(&zk, &state, sealing).await?;
    if !store.damaged.is_empty() {
        return Err(SealError::Damaged { damaged: store.damaged });
    }
    Ok(CheckReport { records: store.records, flat: store.flat, shards: store.shards.len() })
}

//! `regent store seal --zk`: seals a cluster's ZooKeeper store offline.
//!
//! With every master of the cluster stopped, [`seal_zookeeper`]:
//!
//! 1. opens a session with the credentials of the current and every previous
//!    secret ([`ZkConfig`]);
//! 2. refuses to go on while any candidate is under `<root>/election/` (a
//!    master is running and may write the store);
//! 3. reads and checks every record under `<root>/state/` with the given
//!    [`Sealing`] (current key, previous keys, and unsealed records only when
//!    the operator said `--accept-unsealed`); a single record it cannot
//!    verify stops it before anything is written, naming every such record;
//! 4. writes every record that is unsealed or under a previous key again,
//!    sealed under the current key, each conditional on the version it read
//!    (a record that changed meanwhile stops it: a master is running);
//! 5. sets the ACL of `<root>`, `<root>/election`, `<root>/state` and every
//!    record to the current secret's digest identity only (no world access,
//!    no previous identity), so the previous secret can be dropped.
//!
//! It is idempotent: running it again rewrites nothing.

use super::ZkConfig;
use regent_core::store::format;
use regent_core::store::seal::{Seal, Sealing};
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
) -> Result<SealReport, String> {
    if config.secret.is_none() || !sealing.is_sealing() {
        return Err("sealing a store needs the cluster secret (--secret-file F)".into());
    }
    let root = root.trim_end_matches('/').to_owned();
    let election = format!("{root}/election");
    let state = format!("{root}/state");
    let zk = config
        .connect(Duration::from_secs(10))
        .await
        .map_err(|e| format!("cannot open a ZooKeeper session to {}: {e}", config.hosts))?;
    let refused = |what: &str, path: &str, e: zkc::Error| match e {
        zkc::Error::NoAuth => format!(
            "{what} {path}: not authorized (the node belongs to another secret: give it with \
             --previous-secret-file)"
        ),
        e => format!("{what} {path} failed: {e}"),
    };
    let no_master = || async {
        match zk.list_children(&election).await {
            Ok(c) if c.is_empty() => Ok(()),
            Ok(c) => Err(format!(
                "a master is running: {election} has candidate(s) {}; stop every master of the \
                 cluster before sealing its store",
                c.join(", ")
            )),
            Err(zkc::Error::NoNode) => Ok(()),
            Err(e) => Err(refused("listing", &election, e)),
        }
    };
    no_master().await?;

    let mut names = match zk.list_children(&state).await {
        Ok(names) => names,
        Err(zkc::Error::NoNode) => Vec::new(),
        Err(e) => return Err(refused("listing", &state, e)),
    };
    names.retain(|n| n == "epoch" || n.starts_with("w-") || n.starts_with("f-"));
    names.sort();
    let mut found = Vec::with_capacity(names.len());
    let mut damaged = Vec::new();
    for name in &names {
        let path = format!("{state}/{name}");
        let (data, stat) = match zk.get_data(&path).await {
            Ok(d) => d,
            Err(zkc::Error::NoNode) => continue,
            Err(e) => return Err(refused("reading", &path, e)),
        };
        match format::decode_named_with(&path, &data, sealing) {
            Ok((record, seal)) => found.push((path, record, seal, stat.version)),
            Err(e) => damaged.push(e.to_string()),
        }
    }
    if !damaged.is_empty() {
        return Err(format!(
            "{} record(s) cannot be verified, nothing was written: {}",
            damaged.len(),
            damaged.join("; ")
        ));
    }
    let mut report = SealReport { records: found.len(), ..SealReport::default() };
    for (path, record, seal, version) in found {
        if !sealing.needs_reseal(seal) {
            continue;
        }
        let image = format::encode_with(&record, sealing).map_err(|e| e.to_string())?;
        match zk.set_data(&path, &image, Some(version)).await {
            Ok(_) => report.resealed.push((path, seal)),
            Err(zkc::Error::BadVersion) => {
                return Err(format!(
                    "{path} changed while it was being sealed: is a master running? (records \
                     sealed so far: {})",
                    report.resealed.len()
                ))
            }
            Err(e) => return Err(refused("writing", &path, e)),
        }
    }
    let acls = config.acls();
    let mut nodes = vec![root.clone(), election.clone(), state.clone()];
    nodes.extend(names.iter().map(|n| format!("{state}/{n}")));
    for path in nodes {
        match zk.set_acl(&path, &acls, None).await {
            Ok(_) => report.acls_set.push(path),
            Err(zkc::Error::NoNode) => {}
            Err(e) => return Err(refused("setting the ACL of", &path, e)),
        }
    }
    no_master().await.map_err(|e| format!("{e} (it started while the store was being sealed)"))?;
    Ok(report)
}

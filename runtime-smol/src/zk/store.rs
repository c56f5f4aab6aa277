//! [`ZkStore`]: the recovery store of ZooKeeper mode, fenced by the
//! leader's election node.

use super::exec;
use super::ZkConfig;
use regent_core::elector::MultiOp;
use regent_core::store::format::{self, Damage, RecordError};
use regent_core::store::{Record, RecordKey, WriteId};
use regent_core::Incarnation;
use regent_std::store::names::key_stem;
use regent_std::store::{Completion, Op, Outcome};
use std::fmt;
use std::time::Duration;
use zookeeper_client as zkc;

/// ZooKeeper's default `jute.maxbuffer`, 0xfffff bytes (1 MiB - 1): the
/// server refuses a request larger than this (a whole multi counts as one
/// request), and clients refuse a larger response. Ensembles can raise it
/// (on every server and client alike); regent assumes the default.
pub const JUTE_MAXBUFFER: usize = 0xfffff;

/// Room a write request needs besides the record image: request and multi
/// headers, the fence check and its path, the record's path, the ACL.
pub const REQUEST_OVERHEAD: usize = 4096;

/// The largest record image (header, payload, CRC) [`ZkStore`] writes:
/// [`JUTE_MAXBUFFER`] - [`REQUEST_OVERHEAD`], a little under 1 MiB. A larger
/// record is refused with [`ZkStoreError::TooLarge`] before anything is
/// sent. (regent's records are ids, names and numbers: a few hundred bytes.)
pub const MAX_RECORD_IMAGE: usize = JUTE_MAXBUFFER - REQUEST_OVERHEAD;

/// Why a store operation failed.
#[derive(Debug)]
pub enum ZkStoreError {
    /// The fence check failed: the writer's election node is gone (or was
    /// replaced), so it no longer leads. Nothing was written. Fatal to the
    /// leadership (DESIGN rule 8).
    Fenced {
        /// The node the fence checks.
        fence: String,
    },
    /// The record's image would not fit in one ZooKeeper request (see
    /// [`MAX_RECORD_IMAGE`]). Nothing was sent.
    TooLarge {
        /// The record's key.
        key: RecordKey,
        /// The image size.
        bytes: usize,
        /// The largest image this store writes.
        max: usize,
    },
    /// Stored records are damaged; each is named with what is wrong. Never
    /// dropped or trusted silently.
    Damaged {
        /// Every damaged record, by node path.
        errors: Vec<RecordError>,
    },
    /// The connection dropped before the answer: the write may or may not
    /// have been applied. Puts and deletes are idempotent under the same
    /// fence, so the batch may be committed again after the reconnect.
    ConnectionLoss {
        /// The node being written or read.
        path: String,
    },
    /// ZooKeeper refused an operation.
    Zk {
        /// What was being done.
        action: &'static str,
        /// The node.
        path: String,
        /// The client's error.
        error: zkc::Error,
    },
}

impl ZkStoreError {
    /// Whether the leadership must be given up (DESIGN rule 8): everything
    /// but a `ConnectionLoss`, after which the write's fate is unknown and
    /// the elector (which sees the same disconnect) decides.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, ZkStoreError::ConnectionLoss { .. })
    }

    fn zk(action: &'static str, path: &str, error: zkc::Error) -> ZkStoreError {
        if exec::map_error(&error) == regent_core::elector::ZkError::ConnectionLoss {
            ZkStoreError::ConnectionLoss { path: path.to_owned() }
        } else {
            ZkStoreError::Zk { action, path: path.to_owned(), error }
        }
    }
}

impl fmt::Display for ZkStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZkStoreError::Fenced { fence } => write!(
                f,
                "fenced write rejected: the election node {fence} is gone, this master no longer leads"
            ),
            ZkStoreError::TooLarge { key, bytes, max } => write!(
                f,
                "record {key} is {bytes} bytes, more than the {max} bytes one ZooKeeper request can carry (jute.maxbuffer)"
            ),
            ZkStoreError::Damaged { errors } => {
                write!(f, "{} damaged record(s) in ZooKeeper: ", errors.len())?;
                for (i, e) in errors.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            ZkStoreError::ConnectionLoss { path } => {
                write!(f, "connection to ZooKeeper lost while writing {path}: outcome unknown")
            }
            ZkStoreError::Zk { action, path, error } => {
                write!(f, "ZooKeeper {action} {path} failed: {error}")
            }
        }
    }
}

impl std::error::Error for ZkStoreError {}

/// The records of a cluster under `<root>/state/`, one persistent node per
/// key (named like the filesystem store's files, without the extension:
/// `epoch`, `w-<id>`, `f-<id>`, see [`key_stem`]), each holding the record's
/// image in the format of [`regent_core::store::format`].
///
/// **Fencing.** Every write is a multi that begins with the leader's fence,
/// the check on its own election node ([`Elector::fence`], handed out with
/// [`Outcome::Elected`](super::Outcome::Elected)). Once that node is gone
/// (session expired or closed, node deleted) every write fails as a whole
/// with [`ZkStoreError::Fenced`]; a deposed leader can never overwrite its
/// successor's state. A new leader's node can only lead after the old
/// node is gone, so by the time it loads, no write of the old leader can
/// still land.
///
/// **Limits (`jute.maxbuffer`).** One record image must stay under
/// [`MAX_RECORD_IMAGE`] (just under 1 MiB). Loading lists `<root>/state/`
/// in one `getChildren` reply, which must itself stay under
/// [`JUTE_MAXBUFFER`]: each child costs 4 bytes plus its name, so the
/// record count is limited to about `1 MiB / (4 + name length)`: about
/// 40,000 records with 20-byte names (`w-host-0001.example`), about 5,000
/// if every id were at the 200-byte escaping limit. [`ZkStore::load`] warns
/// when a listing passes 80 % of the limit. Clusters beyond that need the
/// filesystem store or a raised `jute.maxbuffer`.
///
/// [`Elector::fence`]: regent_core::elector::Elector::fence
#[derive(Debug)]
pub struct ZkStore {
    client: zkc::Client,
    state: String,
    acls: Vec<zkc::Acl>,
}

impl ZkStore {
    /// Opens a session of its own (asking for `session_timeout`) and makes
    /// sure `<root>/state` exists. The fence works across sessions: it is a
    /// check on a node, evaluated by the server atomically with the write.
    pub async fn open(
        zk: &ZkConfig,
        root: &str,
        session_timeout: Duration,
    ) -> Result<ZkStore, ZkStoreError> {
        let state = format!("{}/state", root.trim_end_matches('/'));
        let client = zk
            .connect(session_timeout)
            .await
            .map_err(|e| ZkStoreError::zk("connect for", &state, e))?;
        let store = ZkStore { client, state, acls: zk.acls() };
        let mut prefix = String::new();
        for part in store.state.split('/').filter(|p| !p.is_empty()) {
            prefix.push('/');
            prefix.push_str(part);
            let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::new(&store.acls));
            match store.client.create(&prefix, &[], &options).await {
                Ok(_) | Err(zkc::Error::NodeExists) => {}
                Err(e) => return Err(ZkStoreError::zk("create", &prefix, e)),
            }
        }
        Ok(store)
    }

    /// `<root>/state`.
    pub fn state_path(&self) -> &str {
        &self.state
    }

    /// The node a key is stored under.
    pub fn node_path(&self, key: &RecordKey) -> String {
        format!("{}/{}", self.state, key_stem(key))
    }

    /// Applies a batch in order, each op fenced by `fence`. Stops at the
    /// first error (later ops are not applied).
    pub async fn commit(
        &self,
        fence: &MultiOp,
        batch: Vec<(WriteId, Op)>,
    ) -> Result<Vec<Completion>, ZkStoreError> {
        let mut done = Vec::with_capacity(batch.len());
        for (id, op) in batch {
            let outcome = match op {
                Op::Put(record) => self.put(fence, &record).await?,
                Op::Delete { key, incarnation } => self.delete(fence, &key, incarnation).await?,
            };
            done.push(Completion { id, outcome });
        }
        Ok(done)
    }

    /// Stores `record` under its key, replacing what was there, in a multi
    /// that begins with `fence`.
    pub async fn put(&self, fence: &MultiOp, record: &Record) -> Result<Outcome, ZkStoreError> {
        let key = record.key();
        let path = self.node_path(&key);
        let image = format::encode(record);
        if image.len() + path.len() > MAX_RECORD_IMAGE {
            return Err(ZkStoreError::TooLarge { key, bytes: image.len(), max: MAX_RECORD_IMAGE });
        }
        loop {
            let set = MultiOp::SetData { path: path.clone(), data: image.clone(), version: None };
            match self.fenced(fence, set, "set").await? {
                Ok(()) => return Ok(Outcome::Stored),
                Err(zkc::Error::NoNode) => {}
                Err(e) => return Err(ZkStoreError::zk("set", &path, e)),
            }
            let create = MultiOp::Create {
                path: path.clone(),
                data: image.clone(),
                mode: regent_core::elector::CreateMode::Persistent,
            };
            match self.fenced(fence, create, "create").await? {
                Ok(()) => return Ok(Outcome::Stored),
                // Created between our set and create: set again.
                Err(zkc::Error::NodeExists) => continue,
                Err(e) => return Err(ZkStoreError::zk("create", &path, e)),
            }
        }
    }

    /// Removes the record under `key` in a multi that begins with `fence`.
    /// With `incarnation`, removes it only if the stored record is a worker
    /// record naming that incarnation (the delete is conditional on the
    /// node version read, so a record replaced in between is not removed).
    pub async fn delete(
        &self,
        fence: &MultiOp,
        key: &RecordKey,
        incarnation: Option<Incarnation>,
    ) -> Result<Outcome, ZkStoreError> {
        let path = self.node_path(key);
        loop {
            let (data, stat) = match self.client.get_data(&path).await {
                Ok(found) => found,
                Err(zkc::Error::NoNode) => return Ok(Outcome::AlreadyAbsent),
                Err(e) => return Err(ZkStoreError::zk("read", &path, e)),
            };
            if let Some(want) = incarnation {
                let record = self
                    .decode(&path, &data)
                    .map_err(|e| ZkStoreError::Damaged { errors: vec![e] })?;
                let stored = match &record {
                    Record::Worker(w) => Some(w.incarnation),
                    _ => None,
                };
                if stored != Some(want) {
                    return Ok(Outcome::IncarnationMismatch { stored });
                }
            }
            let delete = MultiOp::Delete { path: path.clone(), version: Some(stat.version) };
            match self.fenced(fence, delete, "delete").await? {
                Ok(()) => return Ok(Outcome::Deleted),
                Err(zkc::Error::NoNode) => return Ok(Outcome::AlreadyAbsent),
                // Replaced since we read it: look again.
                Err(zkc::Error::BadVersion) => continue,
                Err(e) => return Err(ZkStoreError::zk("delete", &path, e)),
            }
        }
    }

    /// Every stored record, ordered by key. A damaged record, or one stored
    /// under another key's node, fails the load naming every such node.
    /// Nodes that are not records (other names) are logged and left alone.
    pub async fn load(&self) -> Result<Vec<Record>, ZkStoreError> {
        let names = match self.client.list_children(&self.state).await {
            Ok(names) => names,
            Err(zkc::Error::NoNode) => return Ok(Vec::new()),
            Err(e) => return Err(ZkStoreError::zk("list", &self.state, e)),
        };
        let listing: usize = 64 + names.iter().map(|n| 4 + n.len()).sum::<usize>();
        if listing > JUTE_MAXBUFFER / 10 * 8 {
            tracing::warn!(
                records = names.len(),
                bytes = listing,
                limit = JUTE_MAXBUFFER,
                "the ZooKeeper store's listing nears jute.maxbuffer; loading will fail beyond it"
            );
        }
        let names: Vec<String> = names
            .into_iter()
            .filter(|n| {
                let known = n == "epoch" || n.starts_with("w-") || n.starts_with("f-");
                if !known {
                    tracing::warn!(node = %format!("{}/{n}", self.state), "ignored a node that is not a record");
                }
                known
            })
            .collect();
        // Every read is sent before the first answer is awaited.
        let paths: Vec<String> = names.iter().map(|n| format!("{}/{n}", self.state)).collect();
        let reads: Vec<_> = paths.iter().map(|p| self.client.get_data(p)).collect();
        let mut records = Vec::with_capacity(names.len());
        let mut errors = Vec::new();
        for ((name, path), read) in names.iter().zip(&paths).zip(reads) {
            let data = match read.await {
                Ok((data, _)) => data,
                // Deleted since the listing.
                Err(zkc::Error::NoNode) => continue,
                Err(e) => return Err(ZkStoreError::zk("read", path, e)),
            };
            match self.decode(path, &data) {
                Ok(record) if key_stem(&record.key()) == *name => records.push(record),
                Ok(record) => errors.push(RecordError {
                    record: path.clone(),
                    damage: Damage::WrongKey {
                        stored_as: name.clone(),
                        found: record.key().to_string(),
                    },
                }),
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(ZkStoreError::Damaged { errors });
        }
        records.sort_by_key(|r| r.key());
        Ok(records)
    }

    fn decode(&self, path: &str, data: &[u8]) -> Result<Record, RecordError> {
        format::decode_named(path, data)
    }

    /// Runs `[fence, op]` as one multi. The outer error is the store's
    /// (fenced, connection loss, refused request); the inner one is `op`'s
    /// own failure, for the caller to interpret.
    async fn fenced(
        &self,
        fence: &MultiOp,
        op: MultiOp,
        action: &'static str,
    ) -> Result<Result<(), zkc::Error>, ZkStoreError> {
        let fence_path = match fence {
            MultiOp::Check { path, .. }
            | MultiOp::Create { path, .. }
            | MultiOp::SetData { path, .. }
            | MultiOp::Delete { path, .. } => path.clone(),
        };
        let target = match &op {
            MultiOp::Check { path, .. }
            | MultiOp::Create { path, .. }
            | MultiOp::SetData { path, .. }
            | MultiOp::Delete { path, .. } => path.clone(),
        };
        let mut writer = self.client.new_multi_writer();
        exec::add_multi_ops(&mut writer, &[fence.clone(), op], &self.acls)
            .map_err(|e| ZkStoreError::zk(action, &target, e))?;
        match writer.commit().await {
            Ok(_) => Ok(Ok(())),
            Err(zkc::MultiWriteError::OperationFailed { index: 0, source }) => {
                tracing::warn!(fence = %fence_path, error = %source, "fenced ZooKeeper write rejected");
                Err(ZkStoreError::Fenced { fence: fence_path })
            }
            Err(zkc::MultiWriteError::OperationFailed { source, .. }) => Ok(Err(source)),
            Err(zkc::MultiWriteError::RequestFailed { source }) => {
                Err(ZkStoreError::zk(action, &target, source))
            }
        }
    }
}

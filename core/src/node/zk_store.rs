//! The recovery store of ZooKeeper mode as a pure machine: the master's
//! store writes and loads become coordination requests on the one session
//! that also carries the election and the lease.
//!
//! Records live under `<root>/state/`, one persistent node per key (named by
//! [`key_stem`]), each holding the record's image in the format of
//! [`crate::store::format`]. Jobs run strictly one after another, in the
//! order the master asked for them, so writes to one key are applied in
//! order and, after a `ConnectionLoss`, the unconfirmed write is resent
//! before any newer one (ZooKeeper applies one session's requests in order,
//! so what landed before the loss is a prefix).
//!
//! **Fencing.** Every write is a multi that begins with the leader's fence,
//! the check on its own election node; once that node is gone every write
//! fails as a whole, and a deposed leader can never overwrite its
//! successor's state.
//!
//! **Retry rules after a `ConnectionLoss`** (the job is started again from
//! its first step once the session is back and the elector has confirmed the
//! leadership):
//!
//! * *put* (`SetData` any version, or `Create` when absent): idempotent, the
//!   same bytes land again; a `NodeExists` on the create means the first
//!   attempt landed and the put goes back to `SetData`;
//! * *conditional delete* (read the node's version and incarnation, then a
//!   versioned `Delete`): a resent delete whose first attempt landed reads
//!   `NoNode`, which counts as success;
//! * *epoch* (a versioned `SetData`, or `Create` on a fresh store): a resend
//!   whose first attempt landed gets `BadVersion` (or `NodeExists`); the
//!   store then `Sync`s and reads the node back, and counts it as success
//!   only when it holds exactly our bytes. The fence is the multi's first
//!   op and passed (the error is the set's own), so our election node still
//!   led: no other leader can have written the epoch since we read it, and
//!   equal bytes are ours.
//! * *load*: `Sync` first, so a new leader never reads a lagging server and
//!   misses a record the old leader had acknowledged; then the listing and
//!   every read, all sent before the first answer arrives.

use crate::elector::{CreateMode, MultiOp, Stat, ZkError, ZkOp, ZkReply, ZkResult};
use crate::ids::Incarnation;
use crate::master;
use crate::store::format::{self, Damage, RecordError};
use crate::store::names::key_stem;
use crate::store::{Record, RecordKey, WriteId};
use std::collections::{BTreeMap, VecDeque};

/// ZooKeeper's default `jute.maxbuffer`, 0xfffff bytes (1 MiB - 1): the
/// server refuses a larger request (a whole multi counts as one request),
/// and clients refuse a larger response.
pub const JUTE_MAXBUFFER: usize = 0xfffff;

/// Room a write request needs besides the record image: request and multi
/// headers, the fence check and its path, the record's path, the ACL.
pub const REQUEST_OVERHEAD: usize = 4096;

/// The largest record image the ZooKeeper store writes, a little under
/// 1 MiB; a larger record is refused before anything is sent.
pub const MAX_RECORD_IMAGE: usize = JUTE_MAXBUFFER - REQUEST_OVERHEAD;

/// What the store asks of its node.
#[derive(Debug)]
pub(crate) enum StoreOutput {
    /// Send `op` on the session; route its reply back with `tag`.
    Request { tag: u64, op: ZkOp },
    /// Feed the master this event (a write done or failed, records loaded).
    Done(master::Event),
}

#[derive(Clone, Debug)]
enum Kind {
    Load,
    Put(Record),
    Delete { key: RecordKey, incarnation: Option<Incarnation> },
}

#[derive(Clone, Debug)]
struct Job {
    write: Option<WriteId>,
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Stage {
    Idle,
    EnsurePath(usize),
    LoadSync,
    LoadList,
    LoadRead { names: Vec<String>, results: Vec<Option<ZkResult>>, left: usize },
    Set,
    Create,
    EpochWrite,
    EpochSync,
    EpochRead,
    DelRead,
    Del,
    DelFence,
}

/// The store machine (see the module docs).
#[derive(Debug)]
pub(crate) struct ZkStore {
    state: String,
    jobs: VecDeque<Job>,
    stage: Stage,
    /// Tag of each request in flight → its index (for the load's reads).
    expect: BTreeMap<u64, usize>,
    next_tag: u64,
    fence: Option<MultiOp>,
    /// The epoch node's version as last read or written (`None`: absent).
    epoch_version: Option<i32>,
    paused: bool,
    paths_ensured: bool,
    /// Jobs started again after a `ConnectionLoss`.
    pub(crate) resends: u64,
    /// Nodes under `<root>/state/` that are not records (left alone).
    pub(crate) ignored_nodes: u64,
}

impl ZkStore {
    pub(crate) fn new(root: &str) -> Self {
        ZkStore {
            state: format!("{}/state", root.trim_end_matches('/')),
            jobs: VecDeque::new(),
            stage: Stage::Idle,
            expect: BTreeMap::new(),
            next_tag: 0,
            fence: None,
            epoch_version: None,
            paused: false,
            paths_ensured: false,
            resends: 0,
            ignored_nodes: 0,
        }
    }

    /// The node a key is stored under.
    pub(crate) fn node_path(&self, key: &RecordKey) -> String {
        format!("{}/{}", self.state, key_stem(key))
    }

    /// The leadership's fence (`None` when not leading).
    pub(crate) fn set_fence(&mut self, fence: Option<MultiOp>) {
        self.fence = fence;
    }

    /// Leadership ended: every job is dropped (the master dropped what
    /// waited on them).
    pub(crate) fn clear(&mut self) {
        self.jobs.clear();
        self.expect.clear();
        self.stage = Stage::Idle;
        self.fence = None;
        self.paused = false;
    }

    /// Jobs not yet confirmed (the one running included).
    pub(crate) fn backlog(&self) -> usize {
        self.jobs.len()
    }

    pub(crate) fn load(&mut self, out: &mut Vec<StoreOutput>) {
        self.push(Job { write: None, kind: Kind::Load }, out);
    }

    pub(crate) fn put(&mut self, write: WriteId, record: Record, out: &mut Vec<StoreOutput>) {
        self.push(Job { write: Some(write), kind: Kind::Put(record) }, out);
    }

    pub(crate) fn delete(
        &mut self,
        write: WriteId,
        key: RecordKey,
        incarnation: Option<Incarnation>,
        out: &mut Vec<StoreOutput>,
    ) {
        self.push(Job { write: Some(write), kind: Kind::Delete { key, incarnation } }, out);
    }

    fn push(&mut self, job: Job, out: &mut Vec<StoreOutput>) {
        self.jobs.push_back(job);
        self.start_head(out);
    }

    /// The session is back and the leadership confirmed: start the
    /// unconfirmed job again from its first step.
    pub(crate) fn resume(&mut self, out: &mut Vec<StoreOutput>) {
        if !self.paused {
            return;
        }
        self.paused = false;
        if !self.jobs.is_empty() {
            self.resends += 1;
        }
        self.start_head(out);
    }

    /// A reply for `tag`. Returns `true` when it reported a lost connection
    /// (the store is now paused until [`ZkStore::resume`]).
    pub(crate) fn on_reply(
        &mut self,
        tag: u64,
        result: ZkResult,
        out: &mut Vec<StoreOutput>,
    ) -> bool {
        let Some(idx) = self.expect.remove(&tag) else { return false };
        if matches!(result, Err(ZkError::ConnectionLoss | ZkError::SessionExpired)) {
            // Fate unknown: the whole job runs again once the session is
            // back (each step's retry rule makes that safe).
            self.expect.clear();
            self.stage = Stage::Idle;
            self.paused = true;
            return true;
        }
        let Some(job) = self.jobs.front().cloned() else { return false };
        let stage = std::mem::replace(&mut self.stage, Stage::Idle);
        match (stage, &job.kind) {
            (Stage::EnsurePath(i), Kind::Load) => match result {
                Ok(_) | Err(ZkError::NodeExists) => self.ensure_path(i + 1, out),
                Err(e) => self.fail(format!("cannot create {}: {e:?}", self.prefixes()[i]), out),
            },
            (Stage::LoadSync, Kind::Load) => match result {
                Ok(_) => {
                    self.stage = Stage::LoadList;
                    let path = self.state.clone();
                    self.send(0, ZkOp::GetChildren { path, watch: false }, out);
                }
                Err(e) => self.fail(format!("sync of {} failed: {e:?}", self.state), out),
            },
            (Stage::LoadList, Kind::Load) => match result {
                Ok(ZkReply::Children(names)) => self.read_all(names, out),
                Err(ZkError::NoNode) => {
                    self.paths_ensured = false;
                    self.finish(master::Event::Loaded { records: Vec::new() }, out)
                }
                other => self.fail(format!("listing {} failed: {other:?}", self.state), out),
            },
            (Stage::LoadRead { names, mut results, left }, Kind::Load) => {
                results[idx] = Some(result);
                if left > 1 {
                    self.stage = Stage::LoadRead { names, results, left: left - 1 };
                } else {
                    self.loaded(names, results, out);
                }
            }
            (Stage::Set, Kind::Put(record)) => match result {
                Ok(_) => self.done(out),
                Err(ZkError::NoNode) => self.create(record, out),
                Err(e) => self.fail(self.refused("set", &record.key(), e), out),
            },
            (Stage::Create, Kind::Put(record)) => match result {
                Ok(_) => self.done(out),
                // Created meanwhile (or our first attempt landed): set it.
                Err(ZkError::NodeExists) => self.set(record, out),
                Err(ZkError::NoNode) => self.fenced(out),
                Err(e) => self.fail(self.refused("create", &record.key(), e), out),
            },
            (Stage::EpochWrite, Kind::Put(_)) => match result {
                Ok(ZkReply::Multi(replies)) => {
                    self.epoch_version = match replies.get(1) {
                        Some(ZkReply::Stat(Some(st))) => Some(st.version),
                        _ => Some(0),
                    };
                    self.done(out)
                }
                Ok(_) => self.done(out),
                // The fence passed (else NoNode): perhaps our first attempt
                // landed. Read it back from an up-to-date server.
                Err(ZkError::BadVersion | ZkError::NodeExists) => {
                    self.stage = Stage::EpochSync;
                    let path = self.state.clone();
                    self.send(0, ZkOp::Sync { path }, out);
                }
                Err(ZkError::NoNode) => self.fenced(out),
                Err(e) => self.fail(self.refused("set", &RecordKey::Epoch, e), out),
            },
            (Stage::EpochSync, Kind::Put(_)) => {
                self.stage = Stage::EpochRead;
                let path = self.node_path(&RecordKey::Epoch);
                self.send(0, ZkOp::GetData { path, watch: false }, out);
            }
            (Stage::EpochRead, Kind::Put(record)) => match result {
                Ok(ZkReply::Data { data, stat })
                    if format::encode(record).is_ok_and(|image| image == data) =>
                {
                    self.epoch_version = Some(stat.version);
                    self.done(out)
                }
                other => self.fail(
                    format!(
                        "the epoch node {} was written by another leader ({other:?}): this master no longer leads",
                        self.node_path(&RecordKey::Epoch)
                    ),
                    out,
                ),
            },
            (Stage::DelRead, Kind::Delete { key, incarnation }) => match result {
                Err(ZkError::NoNode) => self.done(out),
                Ok(ZkReply::Data { data, stat }) => {
                    let path = self.node_path(key);
                    if let Some(want) = incarnation {
                        let stored = match format::decode_named(&path, &data) {
                            Ok(Record::Worker(w)) => Some(w.incarnation),
                            Ok(_) => None,
                            Err(e) => {
                                self.fail_damaged(vec![e], out);
                                return false;
                            }
                        };
                        if stored != Some(*want) {
                            // Replaced by a newer registration: not ours to delete.
                            self.done(out);
                            return false;
                        }
                    }
                    self.stage = Stage::Del;
                    let del = MultiOp::Delete { path, version: Some(stat.version) };
                    self.fenced_op(del, out);
                }
                Err(e) => self.fail(self.refused("read", key, e), out),
                Ok(other) => self.fail(format!("unexpected reply {other:?}"), out),
            },
            (Stage::Del, Kind::Delete { key, .. }) => match result {
                Ok(_) => self.done(out),
                // Replaced since we read it: look again.
                Err(ZkError::BadVersion) => self.start_delete(key.clone(), out),
                // Either the record is gone already or the fence failed.
                Err(ZkError::NoNode) => {
                    self.stage = Stage::DelFence;
                    let path = self.fence_path().unwrap_or_default();
                    self.send(0, ZkOp::Exists { path, watch: false }, out);
                }
                Err(e) => self.fail(self.refused("delete", key, e), out),
            },
            (Stage::DelFence, Kind::Delete { .. }) => match result {
                Ok(ZkReply::Stat(Some(_))) => self.done(out),
                _ => self.fenced(out),
            },
            (stage, kind) => {
                // A reply that fits no step: cannot happen (tags are only
                // expected for the running step); fail the job loudly.
                self.fail(format!("store reply in the wrong step ({stage:?}, {kind:?})"), out)
            }
        }
        false
    }

    fn prefixes(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut acc = String::new();
        for part in self.state.split('/').filter(|p| !p.is_empty()) {
            acc.push('/');
            acc.push_str(part);
            out.push(acc.clone());
        }
        out
    }

    fn fence_path(&self) -> Option<String> {
        match &self.fence {
            Some(MultiOp::Check { path, .. }) => Some(path.clone()),
            _ => None,
        }
    }

    fn send(&mut self, idx: usize, op: ZkOp, out: &mut Vec<StoreOutput>) {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.expect.insert(tag, idx);
        out.push(StoreOutput::Request { tag, op });
    }

    fn start_head(&mut self, out: &mut Vec<StoreOutput>) {
        if self.paused || !matches!(self.stage, Stage::Idle) {
            return;
        }
        let Some(job) = self.jobs.front().cloned() else { return };
        match job.kind {
            Kind::Load => {
                if self.paths_ensured {
                    self.load_sync(out)
                } else {
                    self.ensure_path(0, out)
                }
            }
            Kind::Put(record) => {
                let image = match format::encode(&record) {
                    Ok(image) => image,
                    Err(e) => return self.fail(e.to_string(), out),
                };
                let path = self.node_path(&record.key());
                if image.len() + path.len() > MAX_RECORD_IMAGE {
                    let reason = format!(
                        "record {} is {} bytes, more than the {MAX_RECORD_IMAGE} bytes one ZooKeeper request can carry (jute.maxbuffer)",
                        record.key(),
                        image.len()
                    );
                    return self.fail(reason, out);
                }
                if matches!(record, Record::Epoch(_)) {
                    self.stage = Stage::EpochWrite;
                    let op = match self.epoch_version {
                        Some(v) => MultiOp::SetData { path, data: image, version: Some(v) },
                        None => MultiOp::Create { path, data: image, mode: CreateMode::Persistent },
                    };
                    self.fenced_op(op, out);
                } else {
                    self.set(&record, out);
                }
            }
            Kind::Delete { key, .. } => self.start_delete(key, out),
        }
    }

    fn ensure_path(&mut self, i: usize, out: &mut Vec<StoreOutput>) {
        let prefixes = self.prefixes();
        match prefixes.get(i) {
            Some(path) => {
                self.stage = Stage::EnsurePath(i);
                let op = ZkOp::Create {
                    path: path.clone(),
                    data: Vec::new(),
                    mode: CreateMode::Persistent,
                };
                self.send(0, op, out);
            }
            None => {
                self.paths_ensured = true;
                self.load_sync(out);
            }
        }
    }

    fn load_sync(&mut self, out: &mut Vec<StoreOutput>) {
        self.stage = Stage::LoadSync;
        let path = self.state.clone();
        self.send(0, ZkOp::Sync { path }, out);
    }

    fn read_all(&mut self, names: Vec<String>, out: &mut Vec<StoreOutput>) {
        let mut names: Vec<String> = names
            .into_iter()
            .filter(|n| {
                let known = n == "epoch" || n.starts_with("w-") || n.starts_with("f-");
                if !known {
                    self.ignored_nodes += 1;
                }
                known
            })
            .collect();
        names.sort();
        if names.is_empty() {
            self.epoch_version = None;
            return self.finish(master::Event::Loaded { records: Vec::new() }, out);
        }
        let n = names.len();
        self.stage = Stage::LoadRead { names: names.clone(), results: vec![None; n], left: n };
        for (i, name) in names.iter().enumerate() {
            let path = format!("{}/{name}", self.state);
            self.send(i, ZkOp::GetData { path, watch: false }, out);
        }
    }

    fn loaded(
        &mut self,
        names: Vec<String>,
        results: Vec<Option<ZkResult>>,
        out: &mut Vec<StoreOutput>,
    ) {
        let mut records = Vec::with_capacity(names.len());
        let mut errors = Vec::new();
        self.epoch_version = None;
        for (name, result) in names.iter().zip(results) {
            let path = format!("{}/{name}", self.state);
            let (data, stat): (Vec<u8>, Stat) = match result {
                Some(Ok(ZkReply::Data { data, stat })) => (data, stat),
                // Deleted since the listing.
                Some(Err(ZkError::NoNode)) => continue,
                other => {
                    return self.fail(format!("reading {path} failed: {other:?}"), out);
                }
            };
            match format::decode_named(&path, &data) {
                Ok(record) if key_stem(&record.key()) == *name => {
                    if matches!(record, Record::Epoch(_)) {
                        self.epoch_version = Some(stat.version);
                    }
                    records.push(record)
                }
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
            return self.fail_damaged(errors, out);
        }
        records.sort_by_key(|r| r.key());
        self.finish(master::Event::Loaded { records }, out)
    }

    fn fenced_op(&mut self, op: MultiOp, out: &mut Vec<StoreOutput>) {
        let Some(fence) = self.fence.clone() else {
            return self.fail("not leading: no election node to fence the write".into(), out);
        };
        self.send(0, ZkOp::Multi(vec![fence, op]), out);
    }

    fn set(&mut self, record: &Record, out: &mut Vec<StoreOutput>) {
        self.stage = Stage::Set;
        let path = self.node_path(&record.key());
        let data = match format::encode(record) {
            Ok(data) => data,
            Err(e) => return self.fail(e.to_string(), out),
        };
        let op = MultiOp::SetData { path, data, version: None };
        self.fenced_op(op, out);
    }

    fn create(&mut self, record: &Record, out: &mut Vec<StoreOutput>) {
        self.stage = Stage::Create;
        let path = self.node_path(&record.key());
        let data = match format::encode(record) {
            Ok(data) => data,
            Err(e) => return self.fail(e.to_string(), out),
        };
        let op = MultiOp::Create { path, data, mode: CreateMode::Persistent };
        self.fenced_op(op, out);
    }

    fn start_delete(&mut self, key: RecordKey, out: &mut Vec<StoreOutput>) {
        self.stage = Stage::DelRead;
        let path = self.node_path(&key);
        self.send(0, ZkOp::GetData { path, watch: false }, out);
    }

    fn refused(&self, action: &str, key: &RecordKey, e: ZkError) -> String {
        format!("ZooKeeper {action} {} failed: {e:?}", self.node_path(key))
    }

    fn fenced(&mut self, out: &mut Vec<StoreOutput>) {
        let fence = self.fence_path().unwrap_or_else(|| "(none)".into());
        self.fail(
            format!(
                "fenced write rejected: the election node {fence} is gone, this master no longer leads"
            ),
            out,
        )
    }

    fn fail_damaged(&mut self, errors: Vec<RecordError>, out: &mut Vec<StoreOutput>) {
        let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        let reason =
            format!("{} damaged record(s) in ZooKeeper: {}", errors.len(), list.join("; "));
        self.fail(reason, out)
    }

    /// The running write is confirmed. (A load ends in `loaded`, never
    /// here; should one, it fails loudly rather than load nothing.)
    fn done(&mut self, out: &mut Vec<StoreOutput>) {
        match self.jobs.front().and_then(|j| j.write) {
            Some(write) => self.finish(master::Event::Persisted { write }, out),
            None => self.fail("a load ended without its records".into(), out),
        }
    }

    fn fail(&mut self, reason: String, out: &mut Vec<StoreOutput>) {
        let event = match self.jobs.front().and_then(|j| j.write) {
            Some(write) => master::Event::PersistFailed { write, reason },
            None => master::Event::LoadFailed { reason },
        };
        self.finish(event, out)
    }

    fn finish(&mut self, event: master::Event, out: &mut Vec<StoreOutput>) {
        self.jobs.pop_front();
        self.expect.clear();
        self.stage = Stage::Idle;
        out.push(StoreOutput::Done(event));
        self.start_head(out);
    }
}

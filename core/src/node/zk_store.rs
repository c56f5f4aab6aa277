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
//!
//! **Sealing.** Records are written and checked with the master's
//! [`Sealing`] (see [`crate::store::seal`]): with a cluster secret every
//! image is sealed under the current key, and a load refuses, by node, any
//! record that is unsealed, sealed under an unknown key or whose MAC fails.
//! Records a load found sealed under a previous key (a rotation) are written
//! again under the current one right after the load, as fenced puts queued
//! before any later write, so one leadership with both secrets re-seals the
//! whole store.

use crate::elector::{CreateMode, MultiOp, Stat, ZkError, ZkOp, ZkReply, ZkResult};
use crate::ids::Incarnation;
use crate::master;
use crate::store::format::{self, Damage, RecordError};
use crate::store::names::key_stem;
use crate::store::seal::Sealing;
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
    /// The master's write; `None` for a load, and for a re-seal (a put the
    /// store makes on its own after a load, reported to nobody).
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
    /// The keys records are sealed with and checked against.
    sealing: Sealing,
    /// Records re-sealed under the current key after a load.
    pub(crate) reseals: u64,
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
            sealing: Sealing::none(),
            reseals: 0,
        }
    }

    /// Seal and check records with `sealing` from now on.
    pub(crate) fn set_sealing(&mut self, sealing: Sealing) {
        self.sealing = sealing;
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
                    self.finish(Some(master::Event::Loaded { records: Vec::new() }), out)
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
                    if format::encode_with(record, &self.sealing).is_ok_and(|image| image == data) =>
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
                        let stored = match format::decode_named_with(&path, &data, &self.sealing) {
                            Ok((Record::Worker(w), _)) => Some(w.incarnation),
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
                let image = match format::encode_with(&record, &self.sealing) {
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
            return self.finish(Some(master::Event::Loaded { records: Vec::new() }), out);
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
        let mut reseal = Vec::new();
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
            match format::decode_named_with(&path, &data, &self.sealing) {
                Ok((record, seal)) if key_stem(&record.key()) == *name => {
                    if matches!(record, Record::Epoch(_)) {
                        self.epoch_version = Some(stat.version);
                    }
                    if self.sealing.needs_reseal(seal) {
                        reseal.push(record.clone());
                    }
                    records.push(record)
                }
                Ok((record, _)) => errors.push(RecordError {
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
        // Right behind the load, ahead of any write the master makes after
        // it: a re-seal writes what was loaded, never over something newer.
        reseal.sort_by_key(|r| r.key());
        for (i, record) in reseal.into_iter().enumerate() {
            self.jobs.insert(i + 1, Job { write: None, kind: Kind::Put(record) });
        }
        self.finish(Some(master::Event::Loaded { records }), out)
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
        let data = match format::encode_with(record, &self.sealing) {
            Ok(data) => data,
            Err(e) => return self.fail(e.to_string(), out),
        };
        let op = MultiOp::SetData { path, data, version: None };
        self.fenced_op(op, out);
    }

    fn create(&mut self, record: &Record, out: &mut Vec<StoreOutput>) {
        self.stage = Stage::Create;
        let path = self.node_path(&record.key());
        let data = match format::encode_with(record, &self.sealing) {
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
        match self.jobs.front() {
            Some(Job { write: Some(write), .. }) => {
                let write = *write;
                self.finish(Some(master::Event::Persisted { write }), out)
            }
            Some(Job { write: None, kind: Kind::Put(_) }) => {
                self.reseals += 1;
                self.finish(None, out)
            }
            _ => self.fail("a load ended without its records".into(), out),
        }
    }

    fn fail(&mut self, reason: String, out: &mut Vec<StoreOutput>) {
        let event = match self.jobs.front() {
            Some(Job { write: Some(write), .. }) => {
                Some(master::Event::PersistFailed { write: *write, reason })
            }
            // A re-seal that failed is reported to nobody: the record stays
            // as loaded (still accepted), and the cause (a fence, a lost
            // session) fails the master's next write.
            Some(Job { write: None, kind: Kind::Put(_) }) => None,
            _ => Some(master::Event::LoadFailed { reason }),
        };
        self.finish(event, out)
    }

    fn finish(&mut self, event: Option<master::Event>, out: &mut Vec<StoreOutput>) {
        self.jobs.pop_front();
        self.expect.clear();
        self.stage = Stage::Idle;
        if let Some(event) = event {
            out.push(StoreOutput::Done(event));
        }
        self.start_head(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Secret;
    use crate::elector::Stat;
    use crate::ids::Epoch;
    use crate::store::seal::SealKey;
    use crate::store::WorkerRecord;

    fn secret(s: &str) -> Secret {
        Secret::new(s.as_bytes().to_vec()).unwrap()
    }

    fn worker(id: &str) -> Record {
        Record::Worker(WorkerRecord {
            id: crate::ids::WorkerId::new(id),
            incarnation: Incarnation(1),
            cores: 1,
            memory_mb: 1,
            callback: None,
        })
    }

    fn stat() -> Stat {
        Stat { version: 0, cversion: 0, ephemeral_owner: None, czxid: 1, mzxid: 1 }
    }

    /// Runs a load over `images` (node name, bytes) and returns what the
    /// store reported and the requests it made after the reads.
    fn load(sealing: Sealing, images: &[(&str, Vec<u8>)]) -> (Vec<master::Event>, Vec<ZkOp>) {
        let mut store = ZkStore::new("/r");
        store.set_sealing(sealing);
        store.paths_ensured = true;
        store.set_fence(Some(MultiOp::Check { path: "/r/election/n".into(), version: 0 }));
        let mut out = Vec::new();
        store.load(&mut out);
        let tag = |out: &[StoreOutput]| match out.last() {
            Some(StoreOutput::Request { tag, .. }) => *tag,
            other => panic!("{other:?}"),
        };
        let t = tag(&out);
        let _ = store.on_reply(t, Ok(ZkReply::Synced), &mut out);
        let t = tag(&out);
        let names = images.iter().map(|(n, _)| n.to_string()).collect();
        out.clear();
        let _ = store.on_reply(t, Ok(ZkReply::Children(names)), &mut out);
        let reads: Vec<(u64, String)> = out
            .drain(..)
            .map(|o| match o {
                StoreOutput::Request { tag, op: ZkOp::GetData { path, .. } } => (tag, path),
                other => panic!("{other:?}"),
            })
            .collect();
        for (tag, path) in reads {
            let name = path.rsplit('/').next().unwrap();
            let data = images.iter().find(|(n, _)| *n == name).unwrap().1.clone();
            let _ = store.on_reply(tag, Ok(ZkReply::Data { data, stat: stat() }), &mut out);
        }
        let mut events = Vec::new();
        let mut ops = Vec::new();
        for o in out {
            match o {
                StoreOutput::Done(e) => events.push(e),
                StoreOutput::Request { op, .. } => ops.push(op),
            }
        }
        (events, ops)
    }

    fn failure(events: &[master::Event]) -> String {
        match events {
            [master::Event::LoadFailed { reason }] => reason.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_planted_unsealed_record_fails_the_load_naming_the_node() {
        let s = Sealing::with_secret(&secret("the current cluster secret"));
        let (events, ops) = load(
            s.clone(),
            &[
                ("epoch", format::encode_with(&Record::Epoch(Epoch(3)), &s).unwrap()),
                ("w-a", format::encode_with(&worker("a"), &s).unwrap()),
                ("w-planted", format::encode(&worker("planted")).unwrap()),
            ],
        );
        let reason = failure(&events);
        assert!(reason.starts_with("1 damaged record(s) in ZooKeeper: "), "{reason}");
        assert!(reason.contains("record /r/state/w-planted: not sealed"), "{reason}");
        assert!(ops.is_empty(), "nothing is written: {ops:?}");
    }

    #[test]
    fn an_altered_record_and_one_under_an_unknown_key_are_both_named() {
        let s = Sealing::with_secret(&secret("the current cluster secret"));
        let other = secret("some other cluster secret");
        let mut altered = format::encode_with(&worker("a"), &s).unwrap();
        altered[20] ^= 4;
        let (events, _) = load(
            s,
            &[
                ("w-a", altered),
                ("w-b", format::encode_with(&worker("b"), &Sealing::with_secret(&other)).unwrap()),
            ],
        );
        let reason = failure(&events);
        assert!(reason.contains("record /r/state/w-a: MAC does not verify"), "{reason}");
        let id = SealKey::derive(&other).id();
        assert!(reason.contains(&format!("record /r/state/w-b: sealed under record key {id}")));
    }

    #[test]
    fn without_a_secret_a_sealed_record_cannot_be_verified() {
        let s = Sealing::with_secret(&secret("the current cluster secret"));
        let (events, _) =
            load(Sealing::none(), &[("w-a", format::encode_with(&worker("a"), &s).unwrap())]);
        let reason = failure(&events);
        assert!(reason.contains("record /r/state/w-a: sealed under record key"), "{reason}");
        assert!(reason.contains("no cluster secret to verify it"), "{reason}");
    }

    #[test]
    fn records_under_a_previous_key_are_resealed_right_after_the_load() {
        let (cur, prev) = (secret("the current cluster secret"), secret("the previous secret!"));
        let rotating = Sealing::with_secret(&cur).and_previous(&prev);
        let old = Sealing::with_secret(&prev);
        let (events, ops) = load(
            rotating.clone(),
            &[
                ("w-a", format::encode_with(&worker("a"), &old).unwrap()),
                ("w-b", format::encode_with(&worker("b"), &rotating).unwrap()),
            ],
        );
        assert_eq!(events, vec![master::Event::Loaded { records: vec![worker("a"), worker("b")] }]);
        // The first re-seal is on its way, fenced, under the current key.
        let [ZkOp::Multi(multi)] = &ops[..] else { panic!("{ops:?}") };
        assert!(matches!(&multi[0], MultiOp::Check { .. }), "{multi:?}");
        let MultiOp::SetData { path, data, .. } = &multi[1] else { panic!("{multi:?}") };
        assert_eq!(path, "/r/state/w-a");
        assert_eq!(data, &format::encode_with(&worker("a"), &rotating).unwrap());
    }
}

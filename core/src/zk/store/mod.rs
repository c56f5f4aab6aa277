//! The recovery store of ZooKeeper mode as a pure machine: the master's
//! store writes and loads become coordination requests on the one session
//! that also carries the election and the lease.
//!
//! Records live under `<root>/state/` in the layout of
//! [`crate::zk::layout`]: the epoch at `<root>/state/epoch`, every
//! other record at `<root>/state/<shard>/<stem>` (its key's [`key_stem`]
//! under a shard named by a hash prefix of the stem), each holding the
//! record's image in the format of [`crate::store::format`]. Jobs run
//! strictly one after another, in the order the master asked for them, so
//! writes to one key are applied in order and, after a `ConnectionLoss`, the
//! unconfirmed write is resent before any newer one (ZooKeeper applies one
//! session's requests in order, so what landed before the loss is a
//! prefix).
//!
//! **Fencing.** Every write of a record is a multi that begins with the
//! leader's fence, the check on its own election node; once that node is
//! gone every write fails as a whole, and a deposed leader can never
//! overwrite its successor's state. Only the empty parents (the store's
//! path, and a shard node before the first record goes into it) are
//! created unfenced: a deposed leader creating one changes no record.
//!
//! **Retry rules after a `ConnectionLoss`** (the job is started again from
//! its first step once the session is back and the elector has confirmed the
//! leadership):
//!
//! * *shard node* (a plain `Create` of the empty shard, sent right before
//!   the fenced create of a record in a shard the last load did not list;
//!   ZooKeeper applies it first): `NodeExists` is success, so a resend is
//!   harmless, and its answer only records that the shard exists (the
//!   put's own answers decide the put);
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
//!   misses a record the old leader had acknowledged; then the listing of
//!   `<root>/state/`, the listing of every shard found there and the read of
//!   every record (worker records [`MULTI_READ_BATCH`] per `multiRead`,
//!   the others one per request), pipelined on the session with at most
//!   [`MAX_LOAD_IN_FLIGHT`] records in flight (each reply makes room for
//!   the next request). Records are decoded and checked as they arrive. A
//!   load only reads (until it moves flat records, below), so it is simply
//!   started again.
//!
//! **The flat layout of earlier versions** (every record directly under
//! `<root>/state/`) is read by the same load, and each such record is moved
//! into its shard before the load reports: by fenced multis (the fence,
//! then for each of up to [`MOVE_BATCH`] records a create in its shard and
//! a versioned delete of its flat node), so a record is in exactly one place
//! at every moment, and a deposed leader moves nothing. A move that lands but whose reply is lost is seen by the
//! load that runs again after the `ConnectionLoss` (the flat node is gone,
//! the sharded one there). Should a key exist in both places (a flat node
//! written by an earlier version that led after a newer one had moved the
//! store), the node written last (the higher `mzxid`) is the record, and the
//! move keeps that one. Until the load has moved them, the master writes
//! nothing (its writes queue behind the load), so no write ever goes to a
//! key that still has a flat node. An earlier version leading a moved store
//! sees only its epoch (it ignores the shard nodes), so a downgrade past
//! this layout is not supported.
//!
//! **Sealing.** Records are written and checked with the master's
//! [`Sealing`] (see [`crate::store::seal`]): with a cluster secret every
//! image is sealed under the current key, and a load refuses, by node, any
//! record that is unsealed, sealed under an unknown key or whose MAC fails.
//! Records a load found sealed under a previous key (a rotation) are written
//! again under the current one right after the load, as fenced puts queued
//! before any later write, so one leadership with both secrets re-seals the
//! whole store. A record in a shard its name does not hash to is refused as
//! [`Damage::Misplaced`].

use crate::ids::Incarnation;
use crate::store::format::{self, Damage, RecordError};
use crate::store::names::key_stem;
use crate::store::seal::{Seal, Sealing};
use crate::store::{Record, RecordKey, StoreCommand, StoreEvent, WriteId};
use crate::zk::layout::{self, RecordNode};
use crate::zk::{CreateMode, MultiOp, Stat, ZkError, ZkOp, ZkReply, ZkResult};
use crate::zk::{JUTE_MAXBUFFER, REQUEST_OVERHEAD};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The largest record image the ZooKeeper store writes, a little under
/// 1 MiB; a larger record is refused before anything is sent.
pub const MAX_RECORD_IMAGE: usize = JUTE_MAXBUFFER - REQUEST_OVERHEAD;

// A record of the limits' largest payload fits one request, with 32 KiB for
// the image header, checksum and the node's path.
const _: () = assert!(crate::limits::MAX_RECORD_PAYLOAD + 32 * 1024 <= MAX_RECORD_IMAGE);

/// The most a load keeps in flight on the session, counted in records (a
/// read of [`MULTI_READ_BATCH`] records counts that many; a listing, a
/// single read or a move of a flat record counts one). Enough to keep a
/// ZooKeeper server busy (four full batches, or a thousand single
/// requests), few enough that the replies queued in the client and the
/// server stay bounded: worker records are a few hundred bytes each, so
/// about a megabyte in flight. (The records read are held until the load
/// reports them, whatever the bound.)
pub const MAX_LOAD_IN_FLIGHT: usize = 1_000;

/// Worker records read in one request at most (a `multiRead`, see
/// [`ZkOp::MultiRead`]). A ZooKeeper server spends tens of microseconds on
/// every request however small, so reading 100,000 records one request
/// each takes seconds; a few hundred per request take milliseconds. A
/// worker record is small and bounded (an id and a callback address of at
/// most [`MAX_ID_BYTES`] and [`MAX_ADDR_BYTES`]: an image under 700 bytes
/// with its seal), and each result costs about 90 bytes more (header,
/// length, stat), so 256 of the largest reply in under 200 KB, a fifth of
/// [`JUTE_MAXBUFFER`]. Framework records (up to a megabyte each) and the
/// epoch are read one per request. A server without `multiRead` (before
/// 3.6) answers `BadArguments`, and the store reads one record per request
/// from then on.
///
/// [`MAX_ID_BYTES`]: crate::limits::MAX_ID_BYTES
/// [`MAX_ADDR_BYTES`]: crate::limits::MAX_ADDR_BYTES
pub const MULTI_READ_BATCH: usize = 256;

/// Records of the flat layout moved by one multi at most (see the module
/// docs): a multi of [`MOVE_BATCH`] creates and deletes applies in one
/// transaction, where one multi per record made the first load of a flat
/// store of 20,000 records take seconds.
pub const MOVE_BATCH: usize = 128;

/// The most record bytes one move multi carries (images and paths, twice
/// the path for the create and the delete): half the packet limit, so a
/// multi of framework records near the largest image holds one.
const MOVE_BATCH_BYTES: usize = JUTE_MAXBUFFER / 2;

/// A move's ops besides the image and the paths (op headers, versions, the
/// create's ACL).
const MOVE_OP_OVERHEAD: usize = 64;

/// What the store asks of its node.
#[derive(Debug)]
pub(crate) enum StoreOutput {
    /// Send `op` on the session; route its reply back with `tag`.
    Request { tag: u64, op: ZkOp },
    /// Feed the master this event (a write done or failed, records loaded).
    Done(StoreEvent),
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
    /// Later writes of the same key that joined this put while it waited
    /// (see [`ZkStore::put`]), reported with it, in order.
    joined: Vec<WriteId>,
    kind: Kind,
}

/// What a request in flight was for.
#[derive(Debug)]
enum Req {
    /// The one request of the running step.
    Step,
    /// A load's listing of a shard.
    List(u8),
    /// A load's read of a record node.
    Read(RecordNode),
    /// A load's read of several record nodes in one request.
    ReadMany(Vec<RecordNode>),
    /// A load's creation of a shard node (before moving flat records).
    Shard(u8),
    /// A load's move of these flat nodes into their shards (one multi).
    Move(Vec<String>),
    /// A put's creation of its shard node, sent right before the write
    /// (advisory: the write's own answer decides).
    ShardAhead(u8),
}

/// A record a load read, in its place or not.
#[derive(Debug)]
struct Found {
    record: Record,
    seal: Seal,
    version: i32,
    mzxid: u64,
}

/// A record a load read in the flat layout of earlier versions.
#[derive(Debug)]
struct Flat {
    node: RecordNode,
    found: Found,
    /// The image, to move it as it is.
    image: Vec<u8>,
}

/// A load after the top-level listing: its pipeline and what it found.
#[derive(Debug, Default)]
struct Loading {
    /// Requests not sent yet, in order.
    queue: VecDeque<(Req, ZkOp)>,
    /// Records (and listings) in flight (see [`MAX_LOAD_IN_FLIGHT`]).
    in_flight: usize,
    /// Shard listings not answered yet.
    listings: usize,
    /// Worker records listed and not yet queued: they go out by
    /// [`MULTI_READ_BATCH`].
    batch: Vec<RecordNode>,
    /// Records in their place (a shard; the epoch on top): one node per
    /// key, as a node's name is its key's and its shard its name's.
    placed: Vec<Found>,
    /// Records of the flat layout.
    flat: Vec<Flat>,
    errors: Vec<RecordError>,
    /// Once every read is in and the moves are under way: the records to
    /// report and those to re-seal.
    moving: Option<(Vec<Record>, Vec<Record>)>,
}

#[derive(Debug)]
enum Stage {
    Idle,
    EnsurePath(usize),
    LoadSync,
    LoadList,
    Load(Box<Loading>),
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
    /// Tag of each request in flight → what it is for.
    expect: BTreeMap<u64, Req>,
    next_tag: u64,
    fence: Option<MultiOp>,
    /// The epoch node's version as last read or written (`None`: absent).
    epoch_version: Option<i32>,
    paused: bool,
    paths_ensured: bool,
    /// Shard nodes known to exist (listed by the last load, or created).
    shards: BTreeSet<u8>,
    /// Jobs started again after a `ConnectionLoss`.
    pub(crate) resends: u64,
    /// Puts that joined a queued put of the same key ([`ZkStore::put`]).
    pub(crate) coalesced: u64,
    /// Nodes under `<root>/state/` that are not records (left alone).
    pub(crate) ignored_nodes: u64,
    /// The keys records are sealed with and checked against.
    sealing: Sealing,
    /// Records re-sealed under the current key after a load.
    pub(crate) reseals: u64,
    /// Records moved from the flat layout into their shards.
    pub(crate) moved: u64,
    /// Records the last load reported.
    pub(crate) records_loaded: u64,
    /// Whether the server answers `multiRead` (until it refuses one).
    multi_read: bool,
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
            shards: BTreeSet::new(),
            resends: 0,
            coalesced: 0,
            ignored_nodes: 0,
            sealing: Sealing::none(),
            reseals: 0,
            moved: 0,
            records_loaded: 0,
            multi_read: true,
        }
    }

    /// Seal and check records with `sealing` from now on.
    pub(crate) fn set_sealing(&mut self, sealing: Sealing) {
        self.sealing = sealing;
    }

    /// The node a key is stored under.
    pub(crate) fn node_path(&self, key: &RecordKey) -> String {
        layout::record_path(&self.state, key)
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

    /// Executes one of the master's store commands.
    pub(crate) fn execute(&mut self, command: StoreCommand, out: &mut Vec<StoreOutput>) {
        match command {
            StoreCommand::Persist { write, record } => self.put(write, record, out),
            StoreCommand::Unpersist { write, key, incarnation } => {
                self.delete(write, key, incarnation, out)
            }
            StoreCommand::LoadRecords => self.load(out),
        }
    }

    pub(crate) fn load(&mut self, out: &mut Vec<StoreOutput>) {
        self.push(Job { write: None, joined: Vec::new(), kind: Kind::Load }, out);
    }

    /// Writes `record`. A put of a key whose last queued job is a put of
    /// the master's that has not started yet takes that put's place
    /// instead of queueing behind it: the newer image holds everything the
    /// older one did, so both writes are reported when it lands. Without
    /// this, a store slower than the clients' retries (DESIGN rule 11)
    /// falls behind for good: every retried registration or SUBSCRIBE
    /// queues one more write of the same record, each one round trip, while
    /// the client gives up on the one before.
    pub(crate) fn put(&mut self, write: WriteId, record: Record, out: &mut Vec<StoreOutput>) {
        let key = record.key();
        // The head job may be in flight, or in doubt after a lost
        // connection: it is never changed.
        let last = self.jobs.iter_mut().enumerate().skip(1).rev().find(|(_, j)| match &j.kind {
            Kind::Put(r) => r.key() == key,
            Kind::Delete { key: k, .. } => *k == key,
            Kind::Load => true,
        });
        if let Some((_, job)) = last {
            if let (Kind::Put(queued), Some(_)) = (&mut job.kind, job.write) {
                *queued = record;
                job.joined.push(write);
                self.coalesced += 1;
                return;
            }
        }
        self.push(Job { write: Some(write), joined: Vec::new(), kind: Kind::Put(record) }, out);
    }

    pub(crate) fn delete(
        &mut self,
        write: WriteId,
        key: RecordKey,
        incarnation: Option<Incarnation>,
        out: &mut Vec<StoreOutput>,
    ) {
        self.push(
            Job { write: Some(write), joined: Vec::new(), kind: Kind::Delete { key, incarnation } },
            out,
        );
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
        let Some(req) = self.expect.remove(&tag) else { return false };
        if matches!(result, Err(ZkError::ConnectionLoss | ZkError::SessionExpired)) {
            // Fate unknown: the whole job runs again once the session is
            // back (each step's retry rule makes that safe).
            self.expect.clear();
            self.stage = Stage::Idle;
            self.paused = true;
            return true;
        }
        if let Req::ShardAhead(s) = req {
            if matches!(result, Ok(_) | Err(ZkError::NodeExists)) {
                self.shards.insert(s);
            }
            return false;
        }
        let Some(kind) = self.jobs.front().map(|j| j.kind.clone()) else { return false };
        let stage = std::mem::replace(&mut self.stage, Stage::Idle);
        match (stage, &kind) {
            (Stage::Load(loading), Kind::Load) => self.on_load_reply(loading, req, result, out),
            (Stage::EnsurePath(i), Kind::Load) => match result {
                Ok(_) | Err(ZkError::NodeExists) => self.ensure_path(i + 1, out),
                Err(e) => self.fail(format!("cannot create {}: {e:?}", self.prefixes()[i]), out),
            },
            (Stage::LoadSync, Kind::Load) => match result {
                Ok(_) => {
                    self.stage = Stage::LoadList;
                    let path = self.state.clone();
                    self.send(Req::Step, ZkOp::GetChildren { path, watch: false }, out);
                }
                Err(e) => self.fail(format!("sync of {} failed: {e:?}", self.state), out),
            },
            (Stage::LoadList, Kind::Load) => match result {
                Ok(ZkReply::Children(names)) => self.read_all(names, out),
                Err(ZkError::NoNode) => {
                    self.paths_ensured = false;
                    self.shards.clear();
                    self.epoch_version = None;
                    self.finish(Some(StoreEvent::Loaded { records: Vec::new() }), out)
                }
                other => self.fail(format!("listing {} failed: {other:?}", self.state), out),
            },
            (Stage::Set, Kind::Put(record)) => match result {
                Ok(_) => self.done(out),
                Err(ZkError::NoNode) => self.create(record, out),
                Err(e) => self.fail(self.refused("set", &record.key(), e), out),
            },
            (Stage::Create, Kind::Put(record)) => match result {
                Ok(_) => self.done(out),
                // Created meanwhile (or our first attempt landed): set it.
                Err(ZkError::NodeExists) => self.set(record, out),
                // The fence failed. (Or an operator deleted the empty shard
                // node: the next leadership's load does not list it and its
                // first put there creates it again.)
                Err(ZkError::NoNode) => {
                    if let Some(s) = self.shard_of(&record.key()) {
                        self.shards.remove(&s);
                    }
                    self.fenced(out)
                }
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
                    self.send(Req::Step, ZkOp::Sync { path }, out);
                }
                Err(ZkError::NoNode) => self.fenced(out),
                Err(e) => self.fail(self.refused("set", &RecordKey::Epoch, e), out),
            },
            (Stage::EpochSync, Kind::Put(_)) => {
                self.stage = Stage::EpochRead;
                let path = self.node_path(&RecordKey::Epoch);
                self.send(Req::Step, ZkOp::GetData { path, watch: false }, out);
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
                    self.send(Req::Step, ZkOp::Exists { path, watch: false }, out);
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

    fn shard_of(&self, key: &RecordKey) -> Option<u8> {
        layout::shard_of(&key_stem(key))
    }

    fn send(&mut self, req: Req, op: ZkOp, out: &mut Vec<StoreOutput>) {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.expect.insert(tag, req);
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
                self.send(Req::Step, op, out);
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
        self.send(Req::Step, ZkOp::Sync { path }, out);
    }

    /// The top-level listing is in: list every shard, read every record
    /// found on top (the epoch, and records of the flat layout).
    fn read_all(&mut self, names: Vec<String>, out: &mut Vec<StoreOutput>) {
        let mut loading = Box::<Loading>::default();
        let mut shards = Vec::new();
        let mut top = Vec::new();
        for name in names {
            if let Some(s) = layout::parse_shard(&name) {
                shards.push(s);
            } else if layout::is_record_name(&name) {
                top.push(name);
            } else {
                self.ignored_nodes += 1;
            }
        }
        shards.sort_unstable();
        top.sort();
        self.shards = shards.iter().copied().collect();
        loading.listings = shards.len();
        for s in shards {
            let path = layout::shard_path(&self.state, s);
            loading.queue.push_back((Req::List(s), ZkOp::GetChildren { path, watch: false }));
        }
        for stem in top {
            let path = layout::flat_path(&self.state, &stem);
            self.read(&mut loading, RecordNode { path, stem, shard: None });
        }
        if loading.listings == 0 {
            self.flush_batch(&mut loading);
        }
        self.pump_load(loading, out)
    }

    /// Queues the read of `node`: worker records by batches, others alone.
    fn read(&self, loading: &mut Loading, node: RecordNode) {
        if self.multi_read && node.stem.starts_with("w-") {
            loading.batch.push(node);
            if loading.batch.len() >= MULTI_READ_BATCH {
                self.flush_batch(loading);
            }
        } else {
            let op = ZkOp::GetData { path: node.path.clone(), watch: false };
            loading.queue.push_back((Req::Read(node), op));
        }
    }

    /// Queues the worker records listed so far as one read.
    fn flush_batch(&self, loading: &mut Loading) {
        let nodes = std::mem::take(&mut loading.batch);
        match nodes.len() {
            0 => {}
            1 => {
                let node = nodes.into_iter().next().expect("one node");
                let op = ZkOp::GetData { path: node.path.clone(), watch: false };
                loading.queue.push_back((Req::Read(node), op));
            }
            _ => {
                let op = ZkOp::MultiRead(nodes.iter().map(|n| n.path.clone()).collect());
                loading.queue.push_back((Req::ReadMany(nodes), op));
            }
        }
    }

    /// Sends what fits in flight; once nothing is left in flight, moves on
    /// (to the moves of flat records, or to the report).
    fn pump_load(&mut self, mut loading: Box<Loading>, out: &mut Vec<StoreOutput>) {
        while let Some((req, _)) = loading.queue.front() {
            let weight = weight(req);
            if loading.in_flight > 0 && loading.in_flight + weight > MAX_LOAD_IN_FLIGHT {
                break;
            }
            let (req, op) = loading.queue.pop_front().expect("a front");
            loading.in_flight += weight;
            self.send(req, op, out);
        }
        if loading.in_flight > 0 {
            self.stage = Stage::Load(loading);
            return;
        }
        match loading.moving.take() {
            Some((records, reseal)) => self.loaded(records, reseal, out),
            None => self.all_read(loading, out),
        }
    }

    fn on_load_reply(
        &mut self,
        mut loading: Box<Loading>,
        req: Req,
        result: ZkResult,
        out: &mut Vec<StoreOutput>,
    ) {
        loading.in_flight = loading.in_flight.saturating_sub(weight(&req));
        match req {
            Req::List(s) => match result {
                Ok(ZkReply::Children(names)) => {
                    let dir = layout::shard_path(&self.state, s);
                    let mut names: Vec<String> = names
                        .into_iter()
                        .filter(|n| {
                            let known = layout::is_record_name(n);
                            if !known {
                                self.ignored_nodes += 1;
                            }
                            known
                        })
                        .collect();
                    names.sort();
                    for stem in names {
                        let path = format!("{dir}/{stem}");
                        self.read(&mut loading, RecordNode { path, stem, shard: Some(s) });
                    }
                    self.listed(&mut loading);
                }
                // Deleted since the top-level listing (by an operator).
                Err(ZkError::NoNode) => {
                    self.shards.remove(&s);
                    self.listed(&mut loading);
                }
                other => {
                    let path = layout::shard_path(&self.state, s);
                    return self.fail(format!("listing {path} failed: {other:?}"), out);
                }
            },
            Req::ReadMany(nodes) => match result {
                Ok(ZkReply::MultiRead(results)) if results.len() == nodes.len() => {
                    for (node, result) in nodes.into_iter().zip(results) {
                        match result {
                            Ok(ZkReply::Data { data, stat }) => {
                                self.found(&mut loading, node, data, &stat)
                            }
                            Err(ZkError::NoNode) => {}
                            other => {
                                let path = &node.path;
                                return self.fail(format!("reading {path} failed: {other:?}"), out);
                            }
                        }
                    }
                }
                // A server before 3.6: one record per request from now on
                // (batches sent before the first refusal came back are
                // refused too).
                Err(ZkError::BadArguments) => {
                    self.multi_read = false;
                    for node in nodes {
                        self.read(&mut loading, node);
                    }
                }
                other => {
                    let first = nodes.first().map(|n| n.path.as_str()).unwrap_or_default();
                    let why = match other {
                        Err(e) => format!("{e:?}"),
                        Ok(_) => "a reply of the wrong shape".to_owned(),
                    };
                    let n = nodes.len();
                    return self
                        .fail(format!("reading {n} records from {first} on failed: {why}"), out);
                }
            },
            Req::Read(node) => match result {
                Ok(ZkReply::Data { data, stat }) => self.found(&mut loading, node, data, &stat),
                // Deleted since the listing.
                Err(ZkError::NoNode) => {}
                other => {
                    return self.fail(format!("reading {} failed: {other:?}", node.path), out);
                }
            },
            Req::Shard(s) => match result {
                Ok(_) | Err(ZkError::NodeExists) => {
                    self.shards.insert(s);
                }
                other => {
                    let path = layout::shard_path(&self.state, s);
                    return self
                        .fail(format!("cannot create the shard node {path}: {other:?}"), out);
                }
            },
            Req::Move(paths) => match result {
                Ok(_) => self.moved += paths.len() as u64,
                other => {
                    let first = paths.first().map(String::as_str).unwrap_or_default();
                    let what = match paths.len() {
                        1 => format!("{first} into its shard"),
                        n => format!("{first} and {} more into their shards", n - 1),
                    };
                    return self.fail(
                        format!(
                            "moving {what} failed: {other:?} (a fenced write: this master may \
                             no longer lead)"
                        ),
                        out,
                    );
                }
            },
            Req::Step | Req::ShardAhead(_) => {
                return self.fail("a load reply in the wrong step".into(), out);
            }
        }
        self.pump_load(loading, out)
    }

    /// One shard listing answered: once all are, the last worker records
    /// listed go out.
    fn listed(&self, loading: &mut Loading) {
        loading.listings = loading.listings.saturating_sub(1);
        if loading.listings == 0 {
            self.flush_batch(loading);
        }
    }

    /// Decodes and checks one record node's image.
    fn found(&mut self, loading: &mut Loading, node: RecordNode, data: Vec<u8>, stat: &Stat) {
        let (record, seal) = match format::decode_named_with(&node.path, &data, &self.sealing) {
            Ok(decoded) => decoded,
            Err(e) => return loading.errors.push(e),
        };
        if key_stem(&record.key()) != node.stem {
            return loading.errors.push(RecordError {
                record: node.path.clone(),
                damage: Damage::WrongKey {
                    stored_as: node.relative(),
                    found: record.key().to_string(),
                },
            });
        }
        if node.is_misplaced() {
            let belongs_at = match layout::shard_of(&node.stem) {
                Some(s) => format!("{}/{}", layout::shard_name(s), node.stem),
                None => node.stem.clone(),
            };
            return loading.errors.push(RecordError {
                record: node.path.clone(),
                damage: Damage::Misplaced { stored_as: node.relative(), belongs_at },
            });
        }
        let found = Found { record, seal, version: stat.version, mzxid: stat.mzxid };
        if node.is_flat() {
            loading.flat.push(Flat { node, found, image: data });
        } else {
            loading.placed.push(found);
        }
    }

    /// Every read is in: report damage, or move the flat records (then
    /// report), or report at once.
    fn all_read(&mut self, mut loading: Box<Loading>, out: &mut Vec<StoreOutput>) {
        if !loading.errors.is_empty() {
            let errors = std::mem::take(&mut loading.errors);
            return self.fail_damaged(errors, out);
        }
        let mut moves = Vec::new();
        let mut need = BTreeSet::new();
        let flat = std::mem::take(&mut loading.flat);
        // Keys found in both layouts (none, but in a store an earlier
        // version wrote to after a newer one had moved it).
        let mut both: BTreeMap<RecordKey, usize> = BTreeMap::new();
        if !flat.is_empty() {
            let keys: BTreeSet<RecordKey> = flat.iter().map(|f| f.found.record.key()).collect();
            for (i, p) in loading.placed.iter().enumerate() {
                let key = p.record.key();
                if keys.contains(&key) {
                    both.insert(key, i);
                }
            }
        }
        for old in flat {
            let path = layout::stem_path(&self.state, &old.node.stem);
            let placed = both.get(&old.found.record.key()).copied();
            let (write, wins) = match placed.map(|i| &loading.placed[i]) {
                None => (
                    Some(MultiOp::Create {
                        path,
                        data: old.image.clone(),
                        mode: CreateMode::Persistent,
                    }),
                    true,
                ),
                // Both: the node written last is the record.
                Some(p) if old.found.mzxid > p.mzxid => (
                    Some(MultiOp::SetData {
                        path,
                        data: old.image.clone(),
                        version: Some(p.version),
                    }),
                    true,
                ),
                Some(_) => (None, false),
            };
            if let Some(s) = layout::shard_of(&old.node.stem) {
                if write.is_some() && !self.shards.contains(&s) {
                    need.insert(s);
                }
            }
            let delete =
                MultiOp::Delete { path: old.node.path.clone(), version: Some(old.found.version) };
            let bytes = old.image.len() + 2 * old.node.path.len() + MOVE_OP_OVERHEAD;
            moves.push((old.node.path.clone(), bytes, write, delete));
            match (wins, placed) {
                (true, Some(i)) => loading.placed[i] = old.found,
                (true, None) => loading.placed.push(old.found),
                (false, _) => {}
            }
        }
        self.epoch_version =
            loading.placed.iter().find(|f| matches!(f.record, Record::Epoch(_))).map(|f| f.version);
        let mut records = Vec::with_capacity(loading.placed.len());
        let mut reseal = Vec::new();
        for found in std::mem::take(&mut loading.placed) {
            if self.sealing.needs_reseal(found.seal) {
                reseal.push(found.record.clone());
            }
            records.push(found.record);
        }
        records.sort_unstable_by(by_key);
        reseal.sort_unstable_by(by_key);
        if moves.is_empty() {
            return self.loaded(records, reseal, out);
        }
        let Some(fence) = self.fence.clone() else {
            return self.fail("not leading: no election node to fence the moves".into(), out);
        };
        for s in need {
            let path = layout::shard_path(&self.state, s);
            let op = ZkOp::Create { path, data: Vec::new(), mode: CreateMode::Persistent };
            loading.queue.push_back((Req::Shard(s), op));
        }
        // Several records per multi, each multi well under the packet
        // limit: all of a multi lands or none, as one record's move did.
        let mut paths = Vec::new();
        let mut ops = vec![fence.clone()];
        let mut size = 0;
        for (path, bytes, write, delete) in moves {
            if !paths.is_empty() && (size + bytes > MOVE_BATCH_BYTES || paths.len() >= MOVE_BATCH) {
                let multi = ZkOp::Multi(std::mem::replace(&mut ops, vec![fence.clone()]));
                loading.queue.push_back((Req::Move(std::mem::take(&mut paths)), multi));
                size = 0;
            }
            ops.extend(write);
            ops.push(delete);
            paths.push(path);
            size += bytes;
        }
        loading.queue.push_back((Req::Move(paths), ZkOp::Multi(ops)));
        loading.moving = Some((records, reseal));
        self.pump_load(loading, out)
    }

    fn loaded(&mut self, records: Vec<Record>, reseal: Vec<Record>, out: &mut Vec<StoreOutput>) {
        // Right behind the load, ahead of any write the master makes after
        // it: a re-seal writes what was loaded, never over something newer.
        for (i, record) in reseal.into_iter().enumerate() {
            self.jobs
                .insert(i + 1, Job { write: None, joined: Vec::new(), kind: Kind::Put(record) });
        }
        self.records_loaded = records.len() as u64;
        self.finish(Some(StoreEvent::Loaded { records }), out)
    }

    fn fenced_op(&mut self, op: MultiOp, out: &mut Vec<StoreOutput>) {
        let Some(fence) = self.fence.clone() else {
            return self.fail("not leading: no election node to fence the write".into(), out);
        };
        self.send(Req::Step, ZkOp::Multi(vec![fence, op]), out);
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
        if let Some(s) = self.shard_of(&record.key()) {
            if !self.shards.contains(&s) {
                // ZooKeeper applies the session's requests in order: the
                // shard is there when the create runs.
                let path = layout::shard_path(&self.state, s);
                let op = ZkOp::Create { path, data: Vec::new(), mode: CreateMode::Persistent };
                self.send(Req::ShardAhead(s), op, out);
            }
        }
        let op = MultiOp::Create { path, data, mode: CreateMode::Persistent };
        self.fenced_op(op, out);
    }

    fn start_delete(&mut self, key: RecordKey, out: &mut Vec<StoreOutput>) {
        self.stage = Stage::DelRead;
        let path = self.node_path(&key);
        self.send(Req::Step, ZkOp::GetData { path, watch: false }, out);
    }

    fn refused(&self, action: &str, key: &RecordKey, e: ZkError) -> String {
        format!("ZooKeeper {action} {} failed: {e:?}", self.node_path(key))
    }

    fn fenced(&mut self, out: &mut Vec<StoreOutput>) {
        let fence = self.fence_path().unwrap_or_else(|| "(none)".into());
        self.fail(
            format!(
                "fenced write rejected: the election node {fence} is gone, this master no longer \
                 leads (or the record's shard node was deleted by hand: the next leadership \
                 creates it again)"
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
            Some(Job { write: Some(write), joined, .. }) => {
                for write in std::iter::once(*write).chain(joined.iter().copied()) {
                    out.push(StoreOutput::Done(StoreEvent::Persisted { write }));
                }
                self.finish(None, out)
            }
            Some(Job { write: None, kind: Kind::Put(_), .. }) => {
                self.reseals += 1;
                self.finish(None, out)
            }
            _ => self.fail("a load ended without its records".into(), out),
        }
    }

    fn fail(&mut self, reason: String, out: &mut Vec<StoreOutput>) {
        let event = match self.jobs.front() {
            Some(Job { write: Some(write), joined, .. }) => {
                for write in std::iter::once(*write).chain(joined.iter().copied()) {
                    let reason = reason.clone();
                    out.push(StoreOutput::Done(StoreEvent::PersistFailed { write, reason }));
                }
                None
            }
            // A re-seal that failed is reported to nobody: the record stays
            // as loaded (still accepted), and the cause (a fence, a lost
            // session) fails the master's next write.
            Some(Job { write: None, kind: Kind::Put(_), .. }) => None,
            _ => Some(StoreEvent::LoadFailed { reason }),
        };
        self.finish(event, out)
    }

    fn finish(&mut self, event: Option<StoreEvent>, out: &mut Vec<StoreOutput>) {
        self.jobs.pop_front();
        self.expect.clear();
        self.stage = Stage::Idle;
        if let Some(event) = event {
            out.push(StoreOutput::Done(event));
        }
        self.start_head(out);
    }
}

/// Orders records as their keys order ([`RecordKey`]'s `Ord`: the epoch,
/// workers, frameworks, each by id, then history records by number),
/// without copying the keys.
fn by_key(a: &Record, b: &Record) -> std::cmp::Ordering {
    fn rank(r: &Record) -> (u8, &str, u64) {
        match r {
            Record::Epoch(_) => (0, "", 0),
            Record::Worker(w) => (1, w.id.as_str(), 0),
            Record::Framework(f) => (2, f.id.as_str(), 0),
            Record::History(h) => (3, "", h.seq),
        }
    }
    rank(a).cmp(&rank(b))
}

/// What a load request counts toward [`MAX_LOAD_IN_FLIGHT`].
fn weight(req: &Req) -> usize {
    match req {
        Req::ReadMany(nodes) => nodes.len(),
        Req::Move(paths) => paths.len(),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Epoch;
    use crate::secret::Secret;
    use crate::store::seal::SealKey;
    use crate::store::WorkerRecord;

    const STATE: &str = "/r/state";
    const FENCE: &str = "/r/election/n";

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
            maintenance: None,
        })
    }

    /// A ZooKeeper server just good enough for the store: nodes, versions,
    /// zxids, multis (all or nothing), parents checked on create.
    #[derive(Default)]
    struct Fake {
        nodes: BTreeMap<String, (Vec<u8>, Stat)>,
        zxid: u64,
        /// Every request the store sent, in order.
        log: Vec<ZkOp>,
        /// The most records (and listings) outstanding at once.
        max_outstanding: usize,
        /// Answer `MultiRead` as a server before 3.6 does.
        no_multi_read: bool,
    }

    impl Fake {
        fn new() -> Self {
            let mut f = Fake::default();
            for p in ["/r", "/r/election", FENCE, STATE] {
                f.put(p, Vec::new());
            }
            f
        }

        fn put(&mut self, path: &str, data: Vec<u8>) {
            self.zxid += 1;
            let version = self.nodes.get(path).map_or(0, |(_, s)| s.version + 1);
            let stat = Stat {
                version,
                cversion: 0,
                ephemeral_owner: None,
                czxid: self.zxid,
                mzxid: self.zxid,
            };
            self.nodes.insert(path.to_owned(), (data, stat));
        }

        /// Plants `records` in the layout of this version.
        fn plant(&mut self, records: &[Record], sealing: &Sealing) {
            for r in records {
                let path = layout::record_path(STATE, &r.key());
                let (parent, _) = path.rsplit_once('/').unwrap();
                if !self.nodes.contains_key(parent) {
                    self.put(parent, Vec::new());
                }
                self.put(&path, format::encode_with(r, sealing).unwrap());
            }
        }

        fn children(&self, path: &str) -> Vec<String> {
            let prefix = format!("{path}/");
            self.nodes
                .keys()
                .filter_map(|p| p.strip_prefix(&prefix))
                .filter(|rest| !rest.contains('/'))
                .map(str::to_owned)
                .collect()
        }

        fn parent_exists(&self, path: &str) -> bool {
            self.nodes.contains_key(path.rsplit_once('/').unwrap().0)
        }

        fn exec(&mut self, op: &ZkOp) -> ZkResult {
            match op {
                ZkOp::Sync { .. } => Ok(ZkReply::Synced),
                ZkOp::GetChildren { path, .. } if self.nodes.contains_key(path) => {
                    Ok(ZkReply::Children(self.children(path)))
                }
                ZkOp::GetData { path, .. } => match self.nodes.get(path) {
                    Some((data, stat)) => {
                        Ok(ZkReply::Data { data: data.clone(), stat: stat.clone() })
                    }
                    None => Err(ZkError::NoNode),
                },
                ZkOp::Exists { path, .. } => {
                    Ok(ZkReply::Stat(self.nodes.get(path).map(|(_, s)| s.clone())))
                }
                ZkOp::MultiRead(_) if self.no_multi_read => Err(ZkError::BadArguments),
                ZkOp::MultiRead(paths) => Ok(ZkReply::MultiRead(
                    paths
                        .iter()
                        .map(|p| self.exec(&ZkOp::GetData { path: p.clone(), watch: false }))
                        .collect(),
                )),
                ZkOp::Create { path, data, .. } => {
                    if self.nodes.contains_key(path) {
                        Err(ZkError::NodeExists)
                    } else if !self.parent_exists(path) {
                        Err(ZkError::NoNode)
                    } else {
                        self.put(path, data.clone());
                        Ok(ZkReply::Created { path: path.clone() })
                    }
                }
                ZkOp::Multi(ops) => {
                    let saved = (self.nodes.clone(), self.zxid);
                    let mut replies = Vec::new();
                    for op in ops {
                        let r = match op {
                            MultiOp::Check { path, version } => match self.nodes.get(path) {
                                Some((_, s)) if s.version == *version => Ok(ZkReply::Checked),
                                Some(_) => Err(ZkError::BadVersion),
                                None => Err(ZkError::NoNode),
                            },
                            MultiOp::Create { path, data, .. } => self.exec(&ZkOp::Create {
                                path: path.clone(),
                                data: data.clone(),
                                mode: CreateMode::Persistent,
                            }),
                            MultiOp::SetData { path, data, version } => {
                                match self.nodes.get(path) {
                                    None => Err(ZkError::NoNode),
                                    Some((_, s)) if version.is_some_and(|v| v != s.version) => {
                                        Err(ZkError::BadVersion)
                                    }
                                    Some(_) => {
                                        self.put(path, data.clone());
                                        Ok(ZkReply::Stat(
                                            self.nodes.get(path).map(|(_, s)| s.clone()),
                                        ))
                                    }
                                }
                            }
                            MultiOp::Delete { path, version } => match self.nodes.get(path) {
                                None => Err(ZkError::NoNode),
                                Some((_, s)) if version.is_some_and(|v| v != s.version) => {
                                    Err(ZkError::BadVersion)
                                }
                                Some(_) => {
                                    self.nodes.remove(path);
                                    Ok(ZkReply::Deleted)
                                }
                            },
                        };
                        match r {
                            Ok(r) => replies.push(r),
                            Err(e) => {
                                (self.nodes, self.zxid) = saved;
                                return Err(e);
                            }
                        }
                    }
                    Ok(ZkReply::Multi(replies))
                }
                _ => Err(ZkError::NoNode),
            }
        }

        /// Answers the store's requests one at a time, in the order sent
        /// (as one session's are), until it sends no more; returns what it
        /// reported.
        fn serve(&mut self, store: &mut ZkStore, mut out: Vec<StoreOutput>) -> Vec<StoreEvent> {
            let mut queue = VecDeque::new();
            let mut events = Vec::new();
            loop {
                for o in out.drain(..) {
                    match o {
                        StoreOutput::Request { tag, op } => queue.push_back((tag, op)),
                        StoreOutput::Done(e) => events.push(e),
                    }
                }
                let outstanding: usize = queue.iter().map(|(_, op)| reads(op).max(1)).sum();
                self.max_outstanding = self.max_outstanding.max(outstanding);
                let Some((tag, op)) = queue.pop_front() else { return events };
                let result = self.exec(&op);
                self.log.push(op);
                let _ = store.on_reply(tag, result, &mut out);
            }
        }
    }

    /// How many record nodes `op` reads.
    fn reads(op: &ZkOp) -> usize {
        match op {
            ZkOp::GetData { .. } => 1,
            ZkOp::MultiRead(paths) => paths.len(),
            _ => 0,
        }
    }

    fn leading_store(sealing: Sealing) -> ZkStore {
        let mut store = ZkStore::new("/r");
        store.set_sealing(sealing);
        store.set_fence(Some(MultiOp::Check { path: FENCE.into(), version: 0 }));
        store
    }

    fn load_from(fake: &mut Fake, store: &mut ZkStore) -> Vec<StoreEvent> {
        let mut out = Vec::new();
        store.load(&mut out);
        fake.serve(store, out)
    }

    /// Runs a load over `images` planted at `<root>/state/<relative path>`
    /// and returns what the store reported and the requests it made after
    /// the reads.
    fn load(sealing: Sealing, images: &[(&str, Vec<u8>)]) -> (Vec<StoreEvent>, Vec<ZkOp>) {
        let mut fake = Fake::new();
        for (rel, image) in images {
            let path = format!("{STATE}/{rel}");
            let (parent, _) = path.rsplit_once('/').unwrap();
            if !fake.nodes.contains_key(parent) {
                fake.put(parent, Vec::new());
            }
            fake.put(&path, image.clone());
        }
        let mut store = leading_store(sealing);
        let events = load_from(&mut fake, &mut store);
        let last_read = fake.log.iter().rposition(|op| reads(op) > 0);
        let after = fake.log[last_read.map_or(0, |i| i + 1)..].to_vec();
        (events, after)
    }

    /// `<shard>/<stem>` of a worker's node.
    fn placed(id: &str) -> String {
        layout::record_path("", &worker(id).key()).trim_start_matches('/').to_owned()
    }

    fn failure(events: &[StoreEvent]) -> String {
        match events {
            [StoreEvent::LoadFailed { reason }] => reason.clone(),
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
                (&placed("a"), format::encode_with(&worker("a"), &s).unwrap()),
                (&placed("planted"), format::encode(&worker("planted")).unwrap()),
            ],
        );
        let reason = failure(&events);
        assert!(reason.starts_with("1 damaged record(s) in ZooKeeper: "), "{reason}");
        let named = format!("record {STATE}/{}: not sealed", placed("planted"));
        assert!(reason.contains(&named), "{reason}");
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
                (&placed("a"), altered),
                (
                    &placed("b"),
                    format::encode_with(&worker("b"), &Sealing::with_secret(&other)).unwrap(),
                ),
            ],
        );
        let reason = failure(&events);
        let a = format!("record {STATE}/{}: MAC does not verify", placed("a"));
        assert!(reason.contains(&a), "{reason}");
        let id = SealKey::derive(&other).id();
        let b = format!("record {STATE}/{}: sealed under record key {id}", placed("b"));
        assert!(reason.contains(&b), "{reason}");
    }

    #[test]
    fn without_a_secret_a_sealed_record_cannot_be_verified() {
        let s = Sealing::with_secret(&secret("the current cluster secret"));
        let (events, _) = load(
            Sealing::none(),
            &[(&placed("a"), format::encode_with(&worker("a"), &s).unwrap())],
        );
        let reason = failure(&events);
        assert!(
            reason.contains(&format!("record {STATE}/{}: sealed under record key", placed("a")))
        );
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
                (&placed("a"), format::encode_with(&worker("a"), &old).unwrap()),
                (&placed("b"), format::encode_with(&worker("b"), &rotating).unwrap()),
            ],
        );
        assert_eq!(events, vec![StoreEvent::Loaded { records: vec![worker("a"), worker("b")] }]);
        // The re-seal is written, fenced, under the current key, and is all
        // that is written.
        let [ZkOp::Multi(multi)] = &ops[..] else { panic!("{ops:?}") };
        assert!(matches!(&multi[0], MultiOp::Check { .. }), "{multi:?}");
        let MultiOp::SetData { path, data, .. } = &multi[1] else { panic!("{multi:?}") };
        assert_eq!(path, &format!("{STATE}/{}", placed("a")));
        assert_eq!(data, &format::encode_with(&worker("a"), &rotating).unwrap());
    }

    #[test]
    fn a_record_in_a_shard_its_name_does_not_hash_to_is_damage() {
        let right = placed("a");
        let (shard, stem) = right.split_once('/').unwrap();
        let wrong = format!("{:02x}/{stem}", layout::parse_shard(shard).unwrap() ^ 1);
        let image = format::encode(&worker("a")).unwrap();
        let epoch = format::encode(&Record::Epoch(Epoch(2))).unwrap();
        let (events, ops) =
            load(Sealing::none(), &[(&wrong, image), (&format!("{shard}/epoch"), epoch)]);
        let reason = failure(&events);
        assert!(reason.starts_with("2 damaged record(s)"), "{reason}");
        assert!(reason.contains(&format!("belongs at \"{right}\"")), "{reason}");
        assert!(reason.contains("belongs at \"epoch\""), "{reason}");
        assert!(ops.is_empty(), "{ops:?}");
    }

    #[test]
    fn a_flat_store_is_moved_into_its_shards_by_fenced_multis() {
        let s = Sealing::none();
        let mut fake = Fake::new();
        let records = [Record::Epoch(Epoch(4)), worker("a"), worker("b"), worker("c")];
        for r in &records {
            fake.put(&layout::flat_path(STATE, &key_stem(&r.key())), format::encode(r).unwrap());
        }
        fake.put(&format!("{STATE}/junk"), b"not ours".to_vec());
        let mut store = leading_store(s);
        let events = load_from(&mut fake, &mut store);
        assert_eq!(events, vec![StoreEvent::Loaded { records: records.to_vec() }]);
        assert_eq!(store.moved, 3);
        assert_eq!(store.epoch_version, Some(0));
        for r in &records[1..] {
            let stem = key_stem(&r.key());
            assert!(!fake.nodes.contains_key(&layout::flat_path(STATE, &stem)), "{stem} moved");
            let (image, _) = &fake.nodes[&layout::stem_path(STATE, &stem)];
            assert_eq!(image, &format::encode(r).unwrap(), "{stem}: the same bytes");
        }
        assert!(fake.nodes.contains_key(&format!("{STATE}/epoch")), "the epoch stays on top");
        assert!(fake.nodes.contains_key(&format!("{STATE}/junk")), "not ours: left alone");
        for op in &fake.log {
            if let ZkOp::Multi(ops) = op {
                assert_eq!(ops[0], MultiOp::Check { path: FENCE.into(), version: 0 }, "{ops:?}");
                assert!(matches!(ops.last(), Some(MultiOp::Delete { version: Some(0), .. })));
            }
        }
        // The next load finds the sharded layout only, and moves nothing.
        fake.log.clear();
        let events = load_from(&mut fake, &mut store);
        assert_eq!(events, vec![StoreEvent::Loaded { records: records.to_vec() }]);
        assert!(!fake.log.iter().any(|op| matches!(op, ZkOp::Multi(_) | ZkOp::Create { .. })));
    }

    #[test]
    fn a_large_flat_store_is_moved_by_batches() {
        let mut fake = Fake::new();
        let n = 2 * MOVE_BATCH + 10;
        let records: Vec<Record> = (0..n).map(|i| worker(&format!("w{i:04}"))).collect();
        for r in &records {
            fake.put(&layout::flat_path(STATE, &key_stem(&r.key())), format::encode(r).unwrap());
        }
        let mut store = leading_store(Sealing::none());
        let events = load_from(&mut fake, &mut store);
        let [StoreEvent::Loaded { records: loaded }] = &events[..] else { panic!("{events:?}") };
        assert_eq!(loaded.len(), n);
        assert_eq!(store.moved, n as u64);
        let multis: Vec<usize> = fake
            .log
            .iter()
            .filter_map(|op| match op {
                ZkOp::Multi(ops) => Some((ops.len() - 1) / 2),
                _ => None,
            })
            .collect();
        assert_eq!(multis, [MOVE_BATCH, MOVE_BATCH, 10]);
        assert!(fake.max_outstanding <= MAX_LOAD_IN_FLIGHT);
        let nodes = layout::record_nodes(STATE, |p| fake.children(p));
        assert!(nodes.iter().all(|n| !n.is_flat()) && nodes.len() == n, "{nodes:?}");
    }

    #[test]
    fn a_deposed_leader_moves_nothing() {
        let mut fake = Fake::new();
        fake.put(&layout::flat_path(STATE, "w-a"), format::encode(&worker("a")).unwrap());
        fake.nodes.remove(FENCE);
        let mut store = leading_store(Sealing::none());
        let events = load_from(&mut fake, &mut store);
        let reason = failure(&events);
        assert!(reason.contains(&format!("moving {STATE}/w-a into its shard failed")), "{reason}");
        assert!(fake.nodes.contains_key(&layout::flat_path(STATE, "w-a")));
        assert!(!fake.nodes.contains_key(&layout::stem_path(STATE, "w-a")));
    }

    #[test]
    fn a_key_in_both_layouts_keeps_the_node_written_last() {
        for flat_is_newer in [false, true] {
            let mut fake = Fake::new();
            let (old, new) = (worker("a"), {
                let Record::Worker(mut w) = worker("a") else { unreachable!() };
                w.incarnation = Incarnation(2);
                Record::Worker(w)
            });
            let (first, second) = if flat_is_newer { (&old, &new) } else { (&new, &old) };
            // `first` in its shard, then `second` flat (written later).
            fake.plant(std::slice::from_ref(first), &Sealing::none());
            fake.put(&layout::flat_path(STATE, "w-a"), format::encode(second).unwrap());
            let mut store = leading_store(Sealing::none());
            let events = load_from(&mut fake, &mut store);
            assert_eq!(events, vec![StoreEvent::Loaded { records: vec![second.clone()] }]);
            assert!(!fake.nodes.contains_key(&layout::flat_path(STATE, "w-a")));
            let (image, _) = &fake.nodes[&layout::stem_path(STATE, "w-a")];
            assert_eq!(image, &format::encode(second).unwrap(), "flat newer: {flat_is_newer}");
        }
    }

    #[test]
    fn a_large_load_reads_worker_records_by_batches_within_the_bound_in_flight() {
        for no_multi_read in [false, true] {
            let mut fake = Fake { no_multi_read, ..Fake::new() };
            let mut records = vec![Record::Epoch(Epoch(9))];
            records.extend((0..2_500).map(|i| worker(&format!("worker-{i:05}"))));
            fake.plant(&records, &Sealing::none());
            let mut store = leading_store(Sealing::none());
            let events = load_from(&mut fake, &mut store);
            let [StoreEvent::Loaded { records: loaded }] = &events[..] else {
                panic!("{events:?}")
            };
            assert_eq!(loaded.len(), records.len());
            assert!(fake.max_outstanding <= MAX_LOAD_IN_FLIGHT, "{}", fake.max_outstanding);
            let listings =
                fake.log.iter().filter(|op| matches!(op, ZkOp::GetChildren { .. })).count();
            assert_eq!(listings, 1 + layout::SHARDS, "the top level and every shard");
            let batches: Vec<usize> = fake
                .log
                .iter()
                .filter_map(|op| match op {
                    ZkOp::MultiRead(paths) => Some(paths.len()),
                    _ => None,
                })
                .collect();
            let singles = fake.log.iter().filter(|op| matches!(op, ZkOp::GetData { .. })).count();
            if no_multi_read {
                // The batches sent before the first refusal came back, then
                // one read per record.
                assert!(!batches.is_empty() && batches.iter().all(|&b| b <= MULTI_READ_BATCH));
                assert_eq!(singles, records.len());
            } else {
                // The epoch alone, the workers by full batches but the last.
                assert_eq!(singles, 1);
                assert_eq!(batches.iter().sum::<usize>(), 2_500);
                assert!(batches[..batches.len() - 1].iter().all(|&b| b == MULTI_READ_BATCH));
            }
        }
    }

    #[test]
    fn records_are_reported_in_the_order_of_their_keys() {
        let framework = |id: &str| {
            Record::Framework(crate::store::FrameworkRecord {
                id: crate::ids::FrameworkId::new(id),
                name: id.into(),
                failover_timeout_ms: 1,
                groups: vec![],
                callback: None,
                registered_at_ms: None,
            })
        };
        let mut records = vec![
            framework("a"),
            worker("b%"),
            worker("b"),
            Record::Epoch(Epoch(1)),
            worker("a-z"),
            framework("0"),
            worker("é"),
        ];
        let mut want = records.clone();
        want.sort_by_key(|r| r.key());
        records.sort_unstable_by(by_key);
        assert_eq!(records, want);
    }

    #[test]
    fn the_largest_worker_records_fill_a_fifth_of_the_packet_limit_per_batch() {
        use crate::limits::{MAX_ADDR_BYTES, MAX_ID_BYTES};
        let largest = Record::Worker(WorkerRecord {
            id: crate::ids::WorkerId::new("\u{10ffff}".repeat(MAX_ID_BYTES / 4)),
            incarnation: Incarnation(u64::MAX),
            cores: u32::MAX,
            memory_mb: u64::MAX,
            callback: Some(crate::ids::Addr::new("x".repeat(MAX_ADDR_BYTES))),
            // The largest maintenance: a drain with its deadline.
            maintenance: Some(crate::store::Maintenance::Draining { deadline_ms: u64::MAX }),
        });
        let sealing = Sealing::with_secret(&secret("the longest worker record's secret"));
        let image = format::encode_with(&largest, &sealing).unwrap().len();
        assert!(image < 700, "{image}");
        // Per result: op header (type, done, error), data length, stat.
        let per_result = 4 + 1 + 4 + 4 + 68;
        assert!(MULTI_READ_BATCH * (image + per_result) < JUTE_MAXBUFFER / 5);
    }

    /// Issue 20 scenario 8 in ZooKeeper mode (sim seeds 8 and 9
    /// `--slow-store`): with writes slower than the clients' retries, every
    /// retried registration or SUBSCRIBE queued one more write of the same
    /// record behind the running one, and the queue never drained. A put
    /// of a key whose queued put has not started joins it: one write, and
    /// every write reported, in order.
    #[test]
    fn puts_of_one_record_waiting_behind_a_running_write_are_one_write() {
        let mut fake = Fake::new();
        let mut store = leading_store(Sealing::none());
        let _ = load_from(&mut fake, &mut store);
        let n = fake.log.len();
        let mut out = Vec::new();
        store.put(WriteId(1), worker("a"), &mut out); // running
        store.put(WriteId(2), worker("b"), &mut out); // queued
        let mut newer = worker("b");
        if let Record::Worker(w) = &mut newer {
            w.cores = 7;
        }
        store.put(WriteId(3), newer.clone(), &mut out); // joins 2
        store.put(WriteId(4), worker("a"), &mut out); // queued: 1 runs
        store.delete(WriteId(5), worker("b").key(), None, &mut out);
        store.put(WriteId(6), worker("b"), &mut out); // after a delete: queued
        assert_eq!(store.coalesced, 1);
        let events = fake.serve(&mut store, out);
        let writes: Vec<u64> = events
            .iter()
            .map(|e| match e {
                StoreEvent::Persisted { write } => write.0,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(writes, vec![1, 2, 3, 4, 5, 6]);
        let images: Vec<&ZkOp> = fake.log[n..]
            .iter()
            .filter(|op| matches!(op, ZkOp::Multi(ops) if ops.iter().any(|o| matches!(o, MultiOp::SetData { path, .. } | MultiOp::Create { path, .. } if path.ends_with("/w-b")))))
            .collect();
        let newest = format::encode(&newer).unwrap();
        assert!(
            images.iter().any(|op| matches!(op, ZkOp::Multi(ops) if ops.iter().any(|o| matches!(o, MultiOp::SetData { data, .. } | MultiOp::Create { data, .. } if *data == newest)))),
            "the joined put wrote the newer image: {images:?}"
        );
    }

    #[test]
    fn a_put_creates_its_shard_first_and_a_vanished_shard_costs_the_leadership_once() {
        let mut fake = Fake::new();
        let mut store = leading_store(Sealing::none());
        let _ = load_from(&mut fake, &mut store);
        let mut out = Vec::new();
        store.put(WriteId(1), worker("a"), &mut out);
        let events = fake.serve(&mut store, out);
        assert_eq!(events, vec![StoreEvent::Persisted { write: WriteId(1) }]);
        let shard = layout::shard_path(STATE, layout::shard_of("w-a").unwrap());
        let n = fake.log.len();
        // The set finds no record; the shard is created right before the
        // record.
        assert!(
            matches!(&fake.log[n - 3], ZkOp::Multi(ops) if matches!(&ops[1], MultiOp::SetData { .. }))
        );
        assert!(matches!(&fake.log[n - 2], ZkOp::Create { path, .. } if *path == shard));
        assert!(
            matches!(&fake.log[n - 1], ZkOp::Multi(ops) if matches!(&ops[0], MultiOp::Check { .. }))
        );
        // An operator deletes the (empty) shard behind the store's back: the
        // put fails as fenced (the master gives the leadership up) ...
        let mut out = Vec::new();
        store.delete(WriteId(2), worker("a").key(), None, &mut out);
        let _ = fake.serve(&mut store, out);
        fake.nodes.remove(&shard);
        let mut out = Vec::new();
        store.put(WriteId(3), worker("a"), &mut out);
        let events = fake.serve(&mut store, out);
        let [StoreEvent::PersistFailed { reason, .. }] = &events[..] else { panic!("{events:?}") };
        assert!(reason.contains("fenced write rejected"), "{reason}");
        // ... and the next leadership creates it again.
        store.clear();
        store.set_fence(Some(MultiOp::Check { path: FENCE.into(), version: 0 }));
        let _ = load_from(&mut fake, &mut store);
        let mut out = Vec::new();
        store.put(WriteId(4), worker("a"), &mut out);
        let events = fake.serve(&mut store, out);
        assert_eq!(events, vec![StoreEvent::Persisted { write: WriteId(4) }]);
        assert!(fake.nodes.contains_key(&layout::stem_path(STATE, "w-a")));
    }
}

//! The recovery store of ZooKeeper mode as a pure machine: the master's
//! store writes and loads become coordination requests on the one session
//! that also carries the election and the lease.
//!
//! Records live under `<root>/state/` in the layout of
//! [`crate::zk::layout`]: the epoch at `<root>/state/epoch`, every
//! other record at `<root>/state/<shard>/<stem>` (its key's [`key_stem`](crate::store::names::key_stem)
//! under a shard named by a hash prefix of the stem), each holding the
//! record's image in the format of [`crate::store::format`].
//!
//! **Pipelining** (docs/design.md#issue-46). Jobs are queued in the order the master
//! asked for them. Puts of distinct keys (registrations, declarations,
//! placements, acknowledgements: nearly every write) run together, up to
//! the window ([`DEFAULT_WRITE_WINDOW`], [`ZkStore::set_window`]; 1 runs
//! one write at a time): a put waits while an older job of its key is
//! queued or in flight, so writes to one key are sent, applied and
//! confirmed in order, the master's contract; nothing orders different
//! keys. ZooKeeper applies one session's requests in the order sent, so
//! with a store a round trip R away a write costs R / window instead of R.
//! A load, the epoch write and a conditional delete are *barriers*: one
//! starts once every older job has ended, runs alone, and nothing newer
//! starts before it ends. They are rare (a load per leadership, the epoch
//! once, a delete per worker removed), and alone they keep their multi-step
//! retry rules below as they were, with a load never reading around a write
//! in flight. After a `ConnectionLoss` every job in flight is in doubt
//! (ZooKeeper applied a prefix of what was sent, in order): once the
//! session is back they are started again from their first step, in their
//! original order, before any newer job (what kept a newer one waiting,
//! an older job of its key or the full window, still does). Puts of
//! different keys may be confirmed out of queue order (a put whose
//! `SetData` finds no node takes a second round trip for its `Create`).
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
//! then for each of up to [`MOVE_BATCH`](migrate::MOVE_BATCH) records a create in its shard and
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
//! [`Damage::Misplaced`](crate::store::format::Damage::Misplaced).

use crate::ids::Incarnation;
use crate::store::format::RecordError;
use crate::store::seal::{Seal, Sealing};
use crate::store::{Record, RecordKey, StoreCommand, StoreEvent, WriteId};
use crate::zk::layout::{self, RecordNode};
use crate::zk::{MultiOp, ZkError, ZkOp, ZkResult};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

mod jobs;
mod load;
mod migrate;
#[cfg(test)]
mod tests;
mod write;

pub use load::{MAX_LOAD_IN_FLIGHT, MULTI_READ_BATCH};
pub use write::MAX_RECORD_IMAGE;

/// The most puts the store keeps in flight at once by default (see the
/// module docs, "Pipelining"; docs/design.md#issue-46): enough that a
/// ZooKeeper 50 ms away takes over a thousand writes a second, few enough
/// that the requests in flight stay small (a put is one record image,
/// a few hundred bytes for a worker).
pub const DEFAULT_WRITE_WINDOW: usize = 64;

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
    /// The job's number, in the order jobs were queued (a pipelined put's
    /// requests name it, see [`Req::Put`]).
    seq: u64,
    /// The master's write; `None` for a load, and for a re-seal (a put the
    /// store makes on its own after a load, reported to nobody).
    write: Option<WriteId>,
    /// Later writes of the same key that joined this put while it waited
    /// (see [`ZkStore::put`]), reported with it, in order.
    joined: Vec<WriteId>,
    kind: Kind,
    /// Sent at least once: in flight, or in doubt after a lost connection;
    /// never joined from then on.
    started: bool,
    /// A pipelined put's step in flight (`None`: waiting, or a barrier,
    /// whose step is [`ZkStore::stage`]).
    step: Option<PutStep>,
}

/// The step of a pipelined put in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PutStep {
    /// The fenced `SetData` of any version.
    Set,
    /// The fenced `Create` (its shard node created right before when the
    /// last load did not list it).
    Create,
}

/// What a request in flight was for.
#[derive(Debug)]
enum Req {
    /// The one request of the running barrier's step.
    Step,
    /// The request of the step in flight of the pipelined put with this
    /// [`Job::seq`].
    Put(u64),
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
    /// The running barrier's step ([`Stage::Idle`]: none runs).
    stage: Stage,
    /// The most puts in flight at once (1: one write at a time).
    window: usize,
    /// The next job's [`Job::seq`].
    next_seq: u64,
    /// Jobs with a [`Job::step`] in flight.
    puts_in_flight: usize,
    /// Jobs in flight when the connection was lost, started again on
    /// [`ZkStore::resume`].
    in_doubt: u64,
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
            window: DEFAULT_WRITE_WINDOW,
            next_seq: 0,
            puts_in_flight: 0,
            in_doubt: 0,
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

    /// Keep at most `window` puts in flight at once (at least 1; 1 runs
    /// one write at a time, as before pipelining).
    pub(crate) fn set_window(&mut self, window: usize) {
        self.window = window.max(1);
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
        self.in_doubt = 0;
        self.puts_in_flight = 0;
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

    /// The session is back and the leadership confirmed: start the
    /// unconfirmed jobs again from their first step, in their order, before
    /// any newer one.
    pub(crate) fn resume(&mut self, out: &mut Vec<StoreOutput>) {
        if !self.paused {
            return;
        }
        self.paused = false;
        self.resends += std::mem::take(&mut self.in_doubt);
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
            // Fate unknown: every job in flight runs again once the session
            // is back (each step's retry rule makes that safe), in its
            // order; the replies of the others in flight are forgotten.
            self.expect.clear();
            let barrier = !matches!(self.stage, Stage::Idle);
            self.stage = Stage::Idle;
            let mut in_flight = u64::from(barrier);
            for job in &mut self.jobs {
                in_flight += u64::from(job.step.take().is_some());
            }
            self.puts_in_flight = 0;
            self.in_doubt += in_flight;
            self.paused = true;
            return true;
        }
        match req {
            Req::ShardAhead(s) => {
                if matches!(result, Ok(_) | Err(ZkError::NodeExists)) {
                    self.shards.insert(s);
                }
                return false;
            }
            Req::Put(seq) => {
                if let Some(i) = self.jobs.iter().position(|j| j.seq == seq) {
                    self.on_pipelined_reply(i, result, out);
                }
                return false;
            }
            _ => {}
        }
        let Some(kind) = self.jobs.front().map(|j| j.kind.clone()) else { return false };
        let stage = std::mem::replace(&mut self.stage, Stage::Idle);
        let wrong = match &kind {
            Kind::Load => self.on_load_step(stage, req, result, out),
            Kind::Put(record) => self.on_put_reply(stage, record, result, out),
            Kind::Delete { key, incarnation } => {
                self.on_delete_reply(stage, key, incarnation.as_ref(), result, out)
            }
        };
        if let Err(stage) = wrong {
            // A reply that fits no step: cannot happen (tags are only
            // expected for the running step); fail the job loudly.
            self.fail(format!("store reply in the wrong step ({stage:?}, {kind:?})"), out)
        }
        false
    }
}

//! The load: `Sync`, the listing of `<root>/state/` and of every shard,
//! then the read of every record, pipelined within [`MAX_LOAD_IN_FLIGHT`]
//! (worker records [`MULTI_READ_BATCH`] per `multiRead`), each decoded and
//! checked as it arrives; the records are reported in key order, and those
//! sealed under a previous key are queued to be re-sealed.

use super::{Flat, Found, Kind, Loading, Req, Stage, StoreOutput, ZkStore};
use crate::store::format::{self, Damage, RecordError};
use crate::store::names::key_stem;
use crate::store::{Record, StoreEvent};
use crate::zk::layout::{self, RecordNode};
use crate::zk::{CreateMode, Stat, ZkError, ZkOp, ZkReply, ZkResult};

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
/// [`JUTE_MAXBUFFER`](crate::zk::JUTE_MAXBUFFER). Framework records (up to a megabyte each) and the
/// epoch are read one per request. A server without `multiRead` (before
/// 3.6) answers `BadArguments`, and the store reads one record per request
/// from then on.
///
/// [`MAX_ID_BYTES`]: crate::limits::MAX_ID_BYTES
/// [`MAX_ADDR_BYTES`]: crate::limits::MAX_ADDR_BYTES
pub const MULTI_READ_BATCH: usize = 256;

impl ZkStore {
    pub(crate) fn load(&mut self, out: &mut Vec<StoreOutput>) {
        let job = self.job(None, Kind::Load);
        self.push(job, out);
    }

    /// Starts the load at the head of the queue: the store's path first,
    /// once per leadership, then the `Sync`.
    pub(super) fn start_load(&mut self, out: &mut Vec<StoreOutput>) {
        if self.paths_ensured {
            self.load_sync(out)
        } else {
            self.ensure_path(0, out)
        }
    }

    /// A reply to the running load's step; `Err` with the stage when the
    /// reply fits no step of a load.
    pub(super) fn on_load_step(
        &mut self,
        stage: Stage,
        req: Req,
        result: ZkResult,
        out: &mut Vec<StoreOutput>,
    ) -> Result<(), Stage> {
        match stage {
            Stage::Load(loading) => self.on_load_reply(loading, req, result, out),
            Stage::EnsurePath(i) => match result {
                Ok(_) | Err(ZkError::NodeExists) => self.ensure_path(i + 1, out),
                Err(e) => self.fail(format!("cannot create {}: {e:?}", self.prefixes()[i]), out),
            },
            Stage::LoadSync => match result {
                Ok(_) => {
                    self.stage = Stage::LoadList;
                    let path = self.state.clone();
                    self.send(Req::Step, ZkOp::GetChildren { path, watch: false }, out);
                }
                Err(e) => self.fail(format!("sync of {} failed: {e:?}", self.state), out),
            },
            Stage::LoadList => match result {
                Ok(ZkReply::Children(names)) => self.read_all(names, out),
                Err(ZkError::NoNode) => {
                    self.paths_ensured = false;
                    self.shards.clear();
                    self.epoch_version = None;
                    self.finish(Some(StoreEvent::Loaded { records: Vec::new() }), out)
                }
                other => self.fail(format!("listing {} failed: {other:?}", self.state), out),
            },
            other => return Err(other),
        }
        Ok(())
    }

    pub(super) fn ensure_path(&mut self, i: usize, out: &mut Vec<StoreOutput>) {
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

    pub(super) fn load_sync(&mut self, out: &mut Vec<StoreOutput>) {
        self.stage = Stage::LoadSync;
        let path = self.state.clone();
        self.send(Req::Step, ZkOp::Sync { path }, out);
    }

    pub(super) fn prefixes(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut acc = String::new();
        for part in self.state.split('/').filter(|p| !p.is_empty()) {
            acc.push('/');
            acc.push_str(part);
            out.push(acc.clone());
        }
        out
    }

    /// The top-level listing is in: list every shard, read every record
    /// found on top (the epoch, and records of the flat layout).
    pub(super) fn read_all(&mut self, names: Vec<String>, out: &mut Vec<StoreOutput>) {
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
    pub(super) fn read(&self, loading: &mut Loading, node: RecordNode) {
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
    pub(super) fn flush_batch(&self, loading: &mut Loading) {
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
    pub(super) fn pump_load(&mut self, mut loading: Box<Loading>, out: &mut Vec<StoreOutput>) {
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

    pub(super) fn on_load_reply(
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
            Req::Shard(s) => {
                if let Err(reason) = self.on_shard_created(s, result) {
                    return self.fail(reason, out);
                }
            }
            Req::Move(paths) => {
                if let Err(reason) = self.on_moved(paths, result) {
                    return self.fail(reason, out);
                }
            }
            Req::Step | Req::Put(_) | Req::ShardAhead(_) => {
                return self.fail("a load reply in the wrong step".into(), out);
            }
        }
        self.pump_load(loading, out)
    }

    /// One shard listing answered: once all are, the last worker records
    /// listed go out.
    pub(super) fn listed(&self, loading: &mut Loading) {
        loading.listings = loading.listings.saturating_sub(1);
        if loading.listings == 0 {
            self.flush_batch(loading);
        }
    }

    /// Decodes and checks one record node's image.
    pub(super) fn found(
        &mut self,
        loading: &mut Loading,
        node: RecordNode,
        data: Vec<u8>,
        stat: &Stat,
    ) {
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
    pub(super) fn all_read(&mut self, mut loading: Box<Loading>, out: &mut Vec<StoreOutput>) {
        if !loading.errors.is_empty() {
            let errors = std::mem::take(&mut loading.errors);
            return self.fail_damaged(errors, out);
        }
        let moves = self.plan_moves(&mut loading);
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
        if moves.moves.is_empty() {
            return self.loaded(records, reseal, out);
        }
        self.start_moves(loading, moves, records, reseal, out)
    }

    pub(super) fn loaded(
        &mut self,
        records: Vec<Record>,
        reseal: Vec<Record>,
        out: &mut Vec<StoreOutput>,
    ) {
        // Right behind the load, ahead of any write the master makes after
        // it: a re-seal writes what was loaded, never over something newer.
        for (i, record) in reseal.into_iter().enumerate() {
            let job = self.job(None, Kind::Put(record));
            self.jobs.insert(i + 1, job);
        }
        self.records_loaded = records.len() as u64;
        self.finish(Some(StoreEvent::Loaded { records }), out)
    }
}

/// Orders records as their keys order ([`RecordKey`]'s `Ord`: the epoch,
/// workers, frameworks, each by id, then history records by number, then
/// the revocations, then tenants by name),
/// without copying the keys.
pub(super) fn by_key(a: &Record, b: &Record) -> std::cmp::Ordering {
    fn rank(r: &Record) -> (u8, &str, u64) {
        match r {
            Record::Epoch(_) => (0, "", 0),
            Record::Worker(w) => (1, w.id.as_str(), 0),
            Record::Framework(f) => (2, f.id.as_str(), 0),
            Record::History(h) => (3, "", h.seq),
            Record::Revocations(_) => (4, "", 0),
            Record::Tenant(t) => (5, t.name.as_str(), 0),
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

//! The move of a store of the flat layout of earlier versions into its
//! shards, during the load that found it: fenced multis of up to
//! [`MOVE_BATCH`] records, each a create in its shard and a versioned
//! delete of its flat node, so a record is in exactly one place at every
//! moment.

use super::{Loading, Req, StoreOutput, ZkStore};
use crate::store::{Record, RecordKey};
use crate::zk::layout;
use crate::zk::{CreateMode, MultiOp, ZkError, ZkOp, ZkResult, JUTE_MAXBUFFER};
use std::collections::{BTreeMap, BTreeSet};

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

/// The moves a load's flat records need (see [`ZkStore::plan_moves`]).
#[derive(Debug)]
pub(super) struct Moves {
    /// Per flat record: its flat path, the bytes its ops carry, the write
    /// into its shard (none when the copy there is the record), and the
    /// delete of the flat node.
    pub(super) moves: Vec<(String, usize, Option<MultiOp>, MultiOp)>,
    /// The shard nodes to create first.
    need: BTreeSet<u8>,
}

impl ZkStore {
    /// Decides the move of every flat record the load read: a create in its
    /// shard (or, when its key is in a shard too and the flat node was
    /// written last, a versioned set there) and a versioned delete of the
    /// flat node. The winner of each key takes its place among the placed
    /// records.
    pub(super) fn plan_moves(&self, loading: &mut Loading) -> Moves {
        let mut moves = Moves { moves: Vec::new(), need: BTreeSet::new() };
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
                    moves.need.insert(s);
                }
            }
            let delete =
                MultiOp::Delete { path: old.node.path.clone(), version: Some(old.found.version) };
            let bytes = old.image.len() + 2 * old.node.path.len() + MOVE_OP_OVERHEAD;
            moves.moves.push((old.node.path.clone(), bytes, write, delete));
            match (wins, placed) {
                (true, Some(i)) => loading.placed[i] = old.found,
                (true, None) => loading.placed.push(old.found),
                (false, _) => {}
            }
        }
        moves
    }

    /// Queues the moves on the running load, fenced (the shard nodes they
    /// need first, then several records per multi), and pumps it; the load
    /// reports `records` once they are all in.
    pub(super) fn start_moves(
        &mut self,
        mut loading: Box<Loading>,
        moves: Moves,
        records: Vec<Record>,
        reseal: Vec<Record>,
        out: &mut Vec<StoreOutput>,
    ) {
        let Some(fence) = self.fence.clone() else {
            return self.fail("not leading: no election node to fence the moves".into(), out);
        };
        for s in moves.need {
            let path = layout::shard_path(&self.state, s);
            let op = ZkOp::Create { path, data: Vec::new(), mode: CreateMode::Persistent };
            loading.queue.push_back((Req::Shard(s), op));
        }
        // Several records per multi, each multi well under the packet
        // limit: all of a multi lands or none, as one record's move did.
        let mut paths = Vec::new();
        let mut ops = vec![fence.clone()];
        let mut size = 0;
        for (path, bytes, write, delete) in moves.moves {
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

    /// A load's creation of shard `s`, before the moves, came back.
    pub(super) fn on_shard_created(&mut self, s: u8, result: ZkResult) -> Result<(), String> {
        match result {
            Ok(_) | Err(ZkError::NodeExists) => {
                self.shards.insert(s);
                Ok(())
            }
            other => {
                let path = layout::shard_path(&self.state, s);
                Err(format!("cannot create the shard node {path}: {other:?}"))
            }
        }
    }

    /// A move multi of these flat nodes came back.
    pub(super) fn on_moved(&mut self, paths: Vec<String>, result: ZkResult) -> Result<(), String> {
        match result {
            Ok(_) => {
                self.moved += paths.len() as u64;
                Ok(())
            }
            other => {
                let first = paths.first().map(String::as_str).unwrap_or_default();
                let what = match paths.len() {
                    1 => format!("{first} into its shard"),
                    n => format!("{first} and {} more into their shards", n - 1),
                };
                Err(format!(
                    "moving {what} failed: {other:?} (a fenced write: this master may \
                     no longer lead)"
                ))
            }
        }
    }
}

//! The writes: a put (`SetData`, or `Create` when absent, its shard node
//! created first when the last load did not list it), the epoch (a
//! versioned write, read back after an ambiguous error), and the
//! conditional delete (read the node's version and incarnation, then a
//! versioned delete); every one fenced by the leader's election node.

use super::{Kind, PutStep, Req, Stage, StoreOutput, ZkStore};
use crate::ids::Incarnation;
use crate::store::format;
use crate::store::names::key_stem;
use crate::store::{Record, RecordKey, WriteId};
use crate::zk::layout;
use crate::zk::{
    CreateMode, MultiOp, ZkError, ZkOp, ZkReply, ZkResult, JUTE_MAXBUFFER, REQUEST_OVERHEAD,
};

/// The largest record image the ZooKeeper store writes, a little under
/// 1 MiB; a larger record is refused before anything is sent.
pub const MAX_RECORD_IMAGE: usize = JUTE_MAXBUFFER - REQUEST_OVERHEAD;

// A record of the limits' largest payload fits one request, with 32 KiB for
// the image header, checksum and the node's path.
const _: () = assert!(crate::limits::MAX_RECORD_PAYLOAD + 32 * 1024 <= MAX_RECORD_IMAGE);

impl ZkStore {
    /// Writes `record`. A put of a key whose last queued job is a put of
    /// the master's that has not been sent yet takes that put's place
    /// instead of queueing behind it: the newer image holds everything the
    /// older one did, so both writes are reported when it lands. Without
    /// this, a store slower than the clients' retries (docs/design.md#progress-when-dependencies-are-slow)
    /// falls behind for good: every retried registration or SUBSCRIBE
    /// queues one more write of the same record, each one round trip, while
    /// the client gives up on the one before.
    pub(crate) fn put(&mut self, write: WriteId, record: Record, out: &mut Vec<StoreOutput>) {
        let key = record.key();
        let last = self.jobs.iter_mut().rev().find(|j| match &j.kind {
            Kind::Put(r) => r.key() == key,
            Kind::Delete { key: k, .. } => *k == key,
            Kind::Load => true,
        });
        // A job in flight, or in doubt after a lost connection, is never
        // changed.
        if let Some(job) = last.filter(|j| !j.started) {
            if let (Kind::Put(queued), Some(_)) = (&mut job.kind, job.write) {
                *queued = record;
                job.joined.push(write);
                self.coalesced += 1;
                return;
            }
        }
        let job = self.job(Some(write), Kind::Put(record));
        self.push(job, out);
    }

    pub(crate) fn delete(
        &mut self,
        write: WriteId,
        key: RecordKey,
        incarnation: Option<Incarnation>,
        out: &mut Vec<StoreOutput>,
    ) {
        let job = self.job(Some(write), Kind::Delete { key, incarnation });
        self.push(job, out);
    }

    /// Starts the epoch write, a barrier at the head of the queue, by a
    /// versioned write (a `Create` on a fresh store).
    pub(super) fn start_put(&mut self, record: Record, out: &mut Vec<StoreOutput>) {
        let image = match format::encode_with(&record, &self.sealing) {
            Ok(image) => image,
            Err(e) => return self.fail(e.to_string(), out),
        };
        let path = self.node_path(&record.key());
        self.stage = Stage::EpochWrite;
        let op = match self.epoch_version {
            Some(v) => MultiOp::SetData { path, data: image, version: Some(v) },
            None => MultiOp::Create { path, data: image, mode: CreateMode::Persistent },
        };
        self.fenced_op(op, out);
    }

    /// Sends `step` of the pipelined put at `i`: a fenced `SetData` of any
    /// version, or a fenced `Create` (its shard node created right before
    /// when not known to exist). `Err` with the reason, nothing sent, when
    /// the put cannot be made.
    pub(super) fn send_put(
        &mut self,
        i: usize,
        step: PutStep,
        out: &mut Vec<StoreOutput>,
    ) -> Result<(), String> {
        let job = &self.jobs[i];
        let Kind::Put(record) = &job.kind else { return Err("not a put".into()) };
        let key = record.key();
        let data = format::encode_with(record, &self.sealing).map_err(|e| e.to_string())?;
        let path = self.node_path(&key);
        if data.len() + path.len() > MAX_RECORD_IMAGE {
            return Err(format!(
                "record {key} is {} bytes, more than the {MAX_RECORD_IMAGE} bytes one ZooKeeper request can carry (jute.maxbuffer)",
                data.len()
            ));
        }
        let Some(fence) = self.fence.clone() else {
            return Err("not leading: no election node to fence the write".into());
        };
        let seq = job.seq;
        let op = match step {
            PutStep::Set => MultiOp::SetData { path, data, version: None },
            PutStep::Create => {
                if let Some(s) = self.shard_of(&key) {
                    if !self.shards.contains(&s) {
                        // ZooKeeper applies the session's requests in
                        // order: the shard is there when the create runs.
                        // (Two puts in flight to one new shard both send
                        // it; the second gets `NodeExists`.)
                        let path = layout::shard_path(&self.state, s);
                        let op =
                            ZkOp::Create { path, data: Vec::new(), mode: CreateMode::Persistent };
                        self.send(Req::ShardAhead(s), op, out);
                    }
                }
                MultiOp::Create { path, data, mode: CreateMode::Persistent }
            }
        };
        let job = &mut self.jobs[i];
        job.started = true;
        if job.step.replace(step).is_none() {
            self.puts_in_flight += 1;
        }
        self.send(Req::Put(seq), ZkOp::Multi(vec![fence, op]), out);
        Ok(())
    }

    /// The reply to the step in flight of the pipelined put at `i`.
    pub(super) fn on_pipelined_reply(
        &mut self,
        i: usize,
        result: ZkResult,
        out: &mut Vec<StoreOutput>,
    ) {
        let Some(key) = self.jobs[i].put_key() else { return };
        let step = self.jobs[i].step.take();
        if step.is_some() {
            self.puts_in_flight = self.puts_in_flight.saturating_sub(1);
        }
        let next = match (step, result) {
            (Some(_), Ok(_)) => return self.done_at(i, out),
            // No record yet: create it.
            (Some(PutStep::Set), Err(ZkError::NoNode)) => PutStep::Create,
            // Created meanwhile (or our first attempt landed): set it.
            (Some(PutStep::Create), Err(ZkError::NodeExists)) => PutStep::Set,
            // The fence failed. (Or an operator deleted the empty shard
            // node: the next leadership's load does not list it and its
            // first put there creates it again.)
            (Some(PutStep::Create), Err(ZkError::NoNode)) => {
                if let Some(s) = self.shard_of(&key) {
                    self.shards.remove(&s);
                }
                return self.fail_at(i, self.fenced_reason(), out);
            }
            (Some(step), Err(e)) => {
                let action = if step == PutStep::Set { "set" } else { "create" };
                return self.fail_at(i, self.refused(action, &key, e), out);
            }
            (None, _) => {
                return self.fail_at(i, format!("store reply to {key} with no step in flight"), out)
            }
        };
        if let Err(reason) = self.send_put(i, next, out) {
            self.fail_at(i, reason, out)
        }
    }
    /// A reply to the running put's step; `Err` with the stage when the
    /// reply fits no step of a put.
    pub(super) fn on_put_reply(
        &mut self,
        stage: Stage,
        record: &Record,
        result: ZkResult,
        out: &mut Vec<StoreOutput>,
    ) -> Result<(), Stage> {
        match stage {
            Stage::EpochWrite => match result {
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
            Stage::EpochSync => {
                self.stage = Stage::EpochRead;
                let path = self.node_path(&RecordKey::Epoch);
                self.send(Req::Step, ZkOp::GetData { path, watch: false }, out);
            }
            Stage::EpochRead => match result {
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
            other => return Err(other),
        }
        Ok(())
    }

    pub(super) fn start_delete(&mut self, key: RecordKey, out: &mut Vec<StoreOutput>) {
        self.stage = Stage::DelRead;
        let path = self.node_path(&key);
        self.send(Req::Step, ZkOp::GetData { path, watch: false }, out);
    }

    /// A reply to the running delete's step; `Err` with the stage when the
    /// reply fits no step of a delete.
    pub(super) fn on_delete_reply(
        &mut self,
        stage: Stage,
        key: &RecordKey,
        incarnation: Option<&Incarnation>,
        result: ZkResult,
        out: &mut Vec<StoreOutput>,
    ) -> Result<(), Stage> {
        match stage {
            Stage::DelRead => match result {
                Err(ZkError::NoNode) => self.done(out),
                Ok(ZkReply::Data { data, stat }) => {
                    let path = self.node_path(key);
                    if let Some(want) = incarnation {
                        let stored = match format::decode_named_with(&path, &data, &self.sealing) {
                            Ok((Record::Worker(w), _)) => Some(w.incarnation),
                            Ok(_) => None,
                            Err(e) => {
                                self.fail_damaged(vec![e], out);
                                return Ok(());
                            }
                        };
                        if stored != Some(*want) {
                            // Replaced by a newer registration: not ours to delete.
                            self.done(out);
                            return Ok(());
                        }
                    }
                    self.stage = Stage::Del;
                    let del = MultiOp::Delete { path, version: Some(stat.version) };
                    self.fenced_op(del, out);
                }
                Err(e) => self.fail(self.refused("read", key, e), out),
                Ok(other) => self.fail(format!("unexpected reply {other:?}"), out),
            },
            Stage::Del => match result {
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
            Stage::DelFence => match result {
                Ok(ZkReply::Stat(Some(_))) => self.done(out),
                _ => self.fenced(out),
            },
            other => return Err(other),
        }
        Ok(())
    }

    pub(super) fn fenced_op(&mut self, op: MultiOp, out: &mut Vec<StoreOutput>) {
        let Some(fence) = self.fence.clone() else {
            return self.fail("not leading: no election node to fence the write".into(), out);
        };
        self.send(Req::Step, ZkOp::Multi(vec![fence, op]), out);
    }

    pub(super) fn fence_path(&self) -> Option<String> {
        match &self.fence {
            Some(MultiOp::Check { path, .. }) => Some(path.clone()),
            _ => None,
        }
    }

    pub(super) fn shard_of(&self, key: &RecordKey) -> Option<u8> {
        layout::shard_of(&key_stem(key))
    }

    pub(super) fn refused(&self, action: &str, key: &RecordKey, e: ZkError) -> String {
        format!("ZooKeeper {action} {} failed: {e:?}", self.node_path(key))
    }

    pub(super) fn fenced(&mut self, out: &mut Vec<StoreOutput>) {
        self.fail(self.fenced_reason(), out)
    }

    pub(super) fn fenced_reason(&self) -> String {
        let fence = self.fence_path().unwrap_or_else(|| "(none)".into());
        format!(
            "fenced write rejected: the election node {fence} is gone, this master no longer \
             leads (or the record's shard node was deleted by hand: the next leadership \
             creates it again)"
        )
    }
}

//! The job queue: the master's commands in the order asked for. Puts of
//! distinct keys run together, up to the window (see the module docs,
//! "Pipelining"); a load, the epoch and a conditional delete are barriers
//! that run alone. Each request is tagged; a job ends by reporting to the
//! master (or, for a re-seal, to nobody) and starting what may start next.

use super::{Job, Kind, Req, Stage, StoreOutput, ZkStore};
use crate::store::format::RecordError;
use crate::store::{Record, RecordKey, StoreEvent, WriteId};
use crate::zk::ZkOp;
use std::collections::BTreeSet;

impl Job {
    /// Whether the job runs alone (see the module docs, "Pipelining"): a
    /// load, the epoch write and a conditional delete.
    pub(super) fn is_barrier(&self) -> bool {
        match &self.kind {
            Kind::Load | Kind::Delete { .. } => true,
            Kind::Put(record) => matches!(record, Record::Epoch(_)),
        }
    }

    /// The key a put writes (`None` for a load or a delete).
    pub(super) fn put_key(&self) -> Option<RecordKey> {
        match &self.kind {
            Kind::Put(record) => Some(record.key()),
            _ => None,
        }
    }
}

impl ZkStore {
    /// A new job (not yet queued) with the next sequence number.
    pub(super) fn job(&mut self, write: Option<WriteId>, kind: Kind) -> Job {
        let seq = self.next_seq;
        self.next_seq += 1;
        Job { seq, write, joined: Vec::new(), kind, started: false, step: None }
    }

    pub(super) fn push(&mut self, job: Job, out: &mut Vec<StoreOutput>) {
        self.jobs.push_back(job);
        self.start_head(out);
    }

    pub(super) fn send(&mut self, req: Req, op: ZkOp, out: &mut Vec<StoreOutput>) {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.expect.insert(tag, req);
        out.push(StoreOutput::Request { tag, op });
    }

    /// Starts what may start, in queue order: a barrier once it is the
    /// oldest job (so nothing else is in flight), alone; a put unless the
    /// window is full or an older job (in flight or waiting) writes its
    /// key. Nothing behind a barrier starts before it ends. After a
    /// `ConnectionLoss` this starts the jobs that were in flight again, in
    /// their order, before any newer one: whatever kept a job waiting then
    /// (an older job of its key, the window) keeps it waiting now.
    pub(super) fn start_head(&mut self, out: &mut Vec<StoreOutput>) {
        if self.paused || !matches!(self.stage, Stage::Idle) {
            return;
        }
        let mut busy: BTreeSet<RecordKey> = BTreeSet::new();
        let mut i = 0;
        while i < self.jobs.len() {
            let job = &self.jobs[i];
            if job.is_barrier() {
                if i == 0 {
                    let job = job.clone();
                    self.jobs[0].started = true;
                    match job.kind {
                        Kind::Load => self.start_load(out),
                        Kind::Put(record) => self.start_put(record, out),
                        Kind::Delete { key, .. } => self.start_delete(key, out),
                    }
                }
                return;
            }
            let Some(key) = job.put_key() else { return };
            if job.step.is_some() {
                busy.insert(key);
                i += 1;
                continue;
            }
            // Counted over the whole queue: a put in flight may sit behind
            // one that waits on its key.
            if self.puts_in_flight >= self.window {
                return;
            }
            if !busy.insert(key.clone()) {
                i += 1;
                continue;
            }
            match self.send_put(i, super::PutStep::Set, out) {
                Ok(()) => i += 1,
                Err(reason) => {
                    // Refused before anything was sent: a later put of the
                    // key may go.
                    busy.remove(&key);
                    self.report_failure(i, reason, out);
                    self.jobs.remove(i);
                }
            }
        }
    }

    /// The running barrier is confirmed. (A load ends in `loaded`, never
    /// here; should one, it fails loudly rather than load nothing.)
    pub(super) fn done(&mut self, out: &mut Vec<StoreOutput>) {
        match self.jobs.front() {
            Some(Job { write: Some(_), .. })
            | Some(Job { write: None, kind: Kind::Put(_), .. }) => {
                self.report_done(0, out);
                self.finish(None, out)
            }
            _ => self.fail("a load ended without its records".into(), out),
        }
    }

    /// The job at `i` (a write) is confirmed: reports it and its joined
    /// writes, or counts a re-seal (the caller takes it off the queue).
    pub(super) fn report_done(&mut self, i: usize, out: &mut Vec<StoreOutput>) {
        let Some(job) = self.jobs.get(i) else { return };
        match job.write {
            Some(write) => {
                for write in std::iter::once(write).chain(job.joined.iter().copied()) {
                    out.push(StoreOutput::Done(StoreEvent::Persisted { write }));
                }
            }
            None => self.reseals += 1,
        }
    }

    /// The job at `i` (a write) failed: reports it and its joined writes
    /// (a re-seal to nobody; the caller takes it off the queue).
    fn report_failure(&mut self, i: usize, reason: String, out: &mut Vec<StoreOutput>) {
        let Some(job) = self.jobs.get(i) else { return };
        if let Some(write) = job.write {
            for write in std::iter::once(write).chain(job.joined.iter().copied()) {
                let reason = reason.clone();
                out.push(StoreOutput::Done(StoreEvent::PersistFailed { write, reason }));
            }
        }
    }

    /// The pipelined put at `i` is confirmed; starts what may start next.
    pub(super) fn done_at(&mut self, i: usize, out: &mut Vec<StoreOutput>) {
        self.report_done(i, out);
        self.jobs.remove(i);
        self.start_head(out);
    }

    /// The pipelined put at `i` failed; starts what may start next.
    pub(super) fn fail_at(&mut self, i: usize, reason: String, out: &mut Vec<StoreOutput>) {
        self.report_failure(i, reason, out);
        self.jobs.remove(i);
        self.start_head(out);
    }

    /// The running barrier failed.
    pub(super) fn fail(&mut self, reason: String, out: &mut Vec<StoreOutput>) {
        let event = match self.jobs.front() {
            // A re-seal that failed is reported to nobody: the record stays
            // as loaded (still accepted), and the cause (a fence, a lost
            // session) fails the master's next write.
            Some(Job { write: Some(_), .. })
            | Some(Job { write: None, kind: Kind::Put(_), .. }) => {
                self.report_failure(0, reason, out);
                None
            }
            _ => Some(StoreEvent::LoadFailed { reason }),
        };
        self.finish(event, out)
    }

    pub(super) fn fail_damaged(&mut self, errors: Vec<RecordError>, out: &mut Vec<StoreOutput>) {
        let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        let reason =
            format!("{} damaged record(s) in ZooKeeper: {}", errors.len(), list.join("; "));
        self.fail(reason, out)
    }

    /// The running barrier ended: off the queue, and what waited on it
    /// starts. (Nothing else was in flight: its leftover tags, a failed
    /// load's reads, are forgotten.)
    pub(super) fn finish(&mut self, event: Option<StoreEvent>, out: &mut Vec<StoreOutput>) {
        self.jobs.pop_front();
        self.expect.clear();
        self.stage = Stage::Idle;
        if let Some(event) = event {
            out.push(StoreOutput::Done(event));
        }
        self.start_head(out);
    }
}

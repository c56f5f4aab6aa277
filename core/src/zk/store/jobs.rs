//! The job queue: the master's commands run strictly one after another,
//! in the order asked for; each job's requests are tagged, and a job ends
//! by reporting to the master (or, for a re-seal, to nobody) and starting
//! the next.

use super::{Job, Kind, Req, Stage, StoreOutput, ZkStore};
use crate::store::format::RecordError;
use crate::store::StoreEvent;
use crate::zk::ZkOp;

impl ZkStore {
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

    pub(super) fn start_head(&mut self, out: &mut Vec<StoreOutput>) {
        if self.paused || !matches!(self.stage, Stage::Idle) {
            return;
        }
        let Some(job) = self.jobs.front().cloned() else { return };
        match job.kind {
            Kind::Load => self.start_load(out),
            Kind::Put(record) => self.start_put(record, out),
            Kind::Delete { key, .. } => self.start_delete(key, out),
        }
    }

    /// The running write is confirmed. (A load ends in `loaded`, never
    /// here; should one, it fails loudly rather than load nothing.)
    pub(super) fn done(&mut self, out: &mut Vec<StoreOutput>) {
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

    pub(super) fn fail(&mut self, reason: String, out: &mut Vec<StoreOutput>) {
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

    pub(super) fn fail_damaged(&mut self, errors: Vec<RecordError>, out: &mut Vec<StoreOutput>) {
        let list: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        let reason =
            format!("{} damaged record(s) in ZooKeeper: {}", errors.len(), list.join("; "));
        self.fail(reason, out)
    }

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

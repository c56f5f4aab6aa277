//! Jobs the leader owns (`SubmitJob`, `DeleteJob`; `POST /v1/jobs`,
//! `DELETE /v1/jobs/{id}`; the types and their meaning are in
//! [`crate::api`]).
//!
//! * A job is a framework with no subscriber: created by its first
//!   submission, it is never torn down for being disconnected (no failover
//!   timeout applies, `frameworks::framework_tick`) and lives until
//!   `DeleteJob` or an operator's kill-framework. No subscriber can
//!   SUBSCRIBE as it, and the API changes no framework a subscriber drives
//!   (refused: "job X is driven by a subscriber ...").
//! * A submission names every group of the job. A new group is declared,
//!   a group whose spec differs is updated through the rollout path of
//!   `regent run --update` (`rollout`, at most `max_parallel` slots down at
//!   once; its count is changed by a scale, not by an update), a group of
//!   the live job the submission does not name is refused, naming it. The
//!   whole submission is checked first and applied as one write of the
//!   framework record, or refused with nothing changed.
//! * Its version starts at 1 and grows by one with every accepted
//!   submission that changes the job; `expect_version` is a check-and-set
//!   (`Some(0)`: only if the job does not exist). The newest
//!   [`MAX_IDEMPOTENCY_KEYS`] idempotency keys are kept in the record with
//!   the version and change each produced: a request with a key seen before
//!   is answered `Replayed` with that version, and changes nothing (before
//!   any check-and-set, so a retry of an accepted request is never refused
//!   for the version it produced itself).
//! * Durable before acknowledged (docs/design.md#durable-before-acknowledged):
//!   `JobAccepted` follows the write of the record that holds the change
//!   and the key. An answer that writes nothing (`Unchanged` without a new
//!   key, `Replayed`) waits for the job's last write if it is still in
//!   flight, so no answer names a version a new leader might not know.
//! * `DeleteJob` removes the job as a teardown (TORN_DOWN in the history):
//!   `RequestAccepted` once its record's delete is durable.
//!
//! Tests: core/tests/api_jobs.rs.

use super::frameworks::{FrameworkEntry, GroupState};
use super::history::Ending;
use super::{Action, AfterWrite, Master, Origin};
use crate::api::{JobChange, JobSubmission, MAX_IDEMPOTENCY_KEYS, MAX_IDEMPOTENCY_KEY_BYTES};
use crate::ids::{Epoch, FrameworkId};
use crate::limits;
use crate::protocol::{GroupSpec, Message};
use crate::store::{JobKey, JobRecord, StoreCommand, WriteId};
use crate::time::Millis;

/// A submission's answer, sent once what it depends on is durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Accepted {
    request: u64,
    job: FrameworkId,
    version: u64,
    change: JobChange,
}

impl Accepted {
    /// The `JobAccepted` message at `epoch`.
    pub(super) fn message(self, epoch: Epoch) -> Message {
        let Accepted { request, job, version, change } = self;
        Message::JobAccepted { epoch, request, job, version, change }
    }
}

/// What an accepted submission does to a live job's groups.
enum GroupChange {
    /// A new group is declared.
    Declare(GroupSpec),
    /// Group `.0`'s spec is replaced through a rollout.
    Update(usize, GroupSpec),
}

/// Why `sub` is refused before the job is looked at, if it is: the limits
/// every submission keeps (docs/design.md#peer-input-never-panics) and the
/// checks a `DeclareGroup` of each group passes, naming the group and the
/// job file's key.
fn submission_problem(sub: &JobSubmission) -> Option<String> {
    let id = &sub.job;
    if id.as_str().is_empty() {
        return Some("the job id is empty".into());
    }
    if id.as_str().len() > limits::MAX_ID_BYTES {
        return Some(format!(
            "job id of {} bytes; the limit is {} bytes (MAX_ID_BYTES)",
            id.as_str().len(),
            limits::MAX_ID_BYTES
        ));
    }
    if sub.name.len() > limits::MAX_NAME_BYTES {
        return Some(format!(
            "job name of {} bytes; the limit is {} bytes (MAX_NAME_BYTES)",
            sub.name.len(),
            limits::MAX_NAME_BYTES
        ));
    }
    match &sub.key {
        Some(key) if key.is_empty() => return Some("the idempotency key is empty".into()),
        Some(key) if key.len() > MAX_IDEMPOTENCY_KEY_BYTES => {
            return Some(format!(
                "idempotency key of {} bytes; the limit is {MAX_IDEMPOTENCY_KEY_BYTES} bytes \
                 (MAX_IDEMPOTENCY_KEY_BYTES)",
                key.len()
            ))
        }
        _ => {}
    }
    if sub.max_parallel == 0 {
        return Some("max_parallel must be at least 1".into());
    }
    if sub.groups.is_empty() {
        return Some(format!("job {id} has no groups; a job needs at least one"));
    }
    if sub.groups.len() > limits::MAX_GROUPS_PER_FRAMEWORK {
        return Some(format!(
            "job {id} has {} groups; the limit is {} per framework (MAX_GROUPS_PER_FRAMEWORK)",
            sub.groups.len(),
            limits::MAX_GROUPS_PER_FRAMEWORK
        ));
    }
    for (i, spec) in sub.groups.iter().enumerate() {
        if let Some(problem) = limits::group_spec_problem(spec, crate::job::key_name) {
            return Some(problem.message(&spec.group));
        }
        if sub.groups[..i].iter().any(|g| g.group == spec.group) {
            return Some(format!("group {:?} is named twice in job {id}", spec.group));
        }
    }
    None
}

impl Master {
    /// `SubmitJob` from `asker`: creates or updates the job, answered
    /// `JobAccepted` once durable, or refused naming why with nothing
    /// changed (see the module docs).
    pub(super) fn submit_job(
        &mut self,
        now: Millis,
        asker: Origin,
        request: u64,
        mut sub: JobSubmission,
        out: &mut Vec<Action>,
    ) {
        let refuse = |m: &Self, reason: String| m.refuse_request(asker, request, reason);
        if let Some(reason) = submission_problem(&sub) {
            out.push(refuse(self, reason));
            return;
        }
        let id = sub.job.clone();
        sub.tenant = match self.tenant_for(asker, &id, sub.tenant.as_deref()) {
            Ok(tenant) => tenant,
            Err(reason) => return out.push(refuse(self, reason)),
        };
        let Some(fw) = self.frameworks.get(&id) else {
            return self.create_job(now, asker, request, sub, out);
        };
        let Some(job) = &fw.job else {
            let reason = format!(
                "job {id} is driven by a subscriber (regent run/submit); it cannot be changed \
                 through the API"
            );
            out.push(refuse(self, reason));
            return;
        };
        let seen = sub.key.as_ref().and_then(|k| job.keys.iter().find(|s| s.key == *k));
        if let Some(seen) = seen {
            let answer = Accepted {
                request,
                job: id.clone(),
                version: seen.version,
                change: JobChange::Replayed,
            };
            return self.answer_job(asker, answer, out);
        }
        if let Some(expected) = sub.expect_version.filter(|v| *v != job.version) {
            let reason = if expected == 0 {
                format!("job {id} exists (version {}); expected it not to", job.version)
            } else {
                format!(
                    "job {id} is at version {}, not {expected}; nothing was changed",
                    job.version
                )
            };
            out.push(refuse(self, reason));
            return;
        }
        if let Some(missing) =
            fw.groups.iter().find(|g| !sub.groups.iter().any(|s| s.group == g.record.spec.group))
        {
            let reason = format!(
                "job {id} has group {:?}, which the submission does not name; a job's groups \
                 are only added (scale the group to change it, or delete the job); nothing was \
                 changed",
                missing.record.spec.group
            );
            out.push(refuse(self, reason));
            return;
        }
        let mut changes = Vec::new();
        for spec in &sub.groups {
            let Some(gi) = fw.groups.iter().position(|g| g.record.spec.group == spec.group) else {
                changes.push(GroupChange::Declare(spec.clone()));
                continue;
            };
            let g = &fw.groups[gi];
            if g.record.spec == *spec {
                continue;
            }
            if !g.declared_durably() {
                let reason = format!(
                    "group {:?} of job {id} is still being declared; update it once that is \
                     done (nothing was changed)",
                    spec.group
                );
                out.push(refuse(self, reason));
                return;
            }
            if spec.slots != g.record.spec.slots {
                let reason = format!(
                    "an update does not change a group's count (group {:?}: {} -> {}); scale \
                     it instead (POST /v1/jobs/{id}/groups/{}/scale); nothing was changed",
                    spec.group, g.record.spec.slots, spec.slots, spec.group
                );
                out.push(refuse(self, reason));
                return;
            }
            changes.push(GroupChange::Update(gi, spec.clone()));
        }
        // Conservative, as an update alone is: every new or changed spec
        // counted as one more group.
        let specs: Vec<GroupSpec> = changes
            .iter()
            .map(|c| match c {
                GroupChange::Declare(s) | GroupChange::Update(_, s) => s.clone(),
            })
            .collect();
        let declared = fw.groups.len()
            + changes.iter().filter(|c| matches!(c, GroupChange::Declare(_))).count();
        if declared > limits::MAX_GROUPS_PER_FRAMEWORK {
            let reason = format!(
                "job {id} would have {declared} groups; the limit is {} per framework \
                 (MAX_GROUPS_PER_FRAMEWORK)",
                limits::MAX_GROUPS_PER_FRAMEWORK
            );
            out.push(refuse(self, reason));
            return;
        }
        if let Some(reason) = self.record_limit_of(&id, &specs) {
            out.push(refuse(self, reason));
            return;
        }
        let renamed = fw.name != sub.name;
        let version = job.version;
        if changes.is_empty() && !renamed {
            let answer =
                Accepted { request, job: id.clone(), version, change: JobChange::Unchanged };
            match sub.key {
                // The key is recorded, so its retry is answered `Replayed`.
                Some(key) => self.write_job(asker, answer, key, Vec::new(), out),
                None => self.answer_job(asker, answer, out),
            }
            return;
        }
        let mut then = Vec::new();
        for change in changes {
            match change {
                GroupChange::Declare(spec) => {
                    let group = spec.group.clone();
                    if let Some(fw) = self.frameworks.get_mut(&id) {
                        fw.groups.push(GroupState::declared(spec));
                    }
                    then.push(AfterWrite::GroupDurable { framework: id.clone(), group });
                }
                GroupChange::Update(gi, spec) => {
                    let group = spec.group.clone();
                    self.begin_deployment(now, &id, gi, spec, sub.max_parallel);
                    then.push(AfterWrite::Rolling { framework: id.clone(), group });
                }
            }
        }
        if let Some(fw) = self.frameworks.get_mut(&id) {
            fw.name = sub.name;
        }
        let answer =
            Accepted { request, job: id.clone(), version: version + 1, change: JobChange::Updated };
        then.push(AfterWrite::Place);
        self.write_job(asker, answer, sub.key.unwrap_or_default(), then, out);
    }

    /// A submission for an id no framework has: the job is created at
    /// version 1 (unless `expect_version` says it must exist).
    fn create_job(
        &mut self,
        now: Millis,
        asker: Origin,
        request: u64,
        sub: JobSubmission,
        out: &mut Vec<Action>,
    ) {
        let id = sub.job.clone();
        // A framework of this id that just ended (a `DeleteJob`, a
        // subscriber's `Teardown`, a kill, a timeout) has its history record
        // in flight and its own record not yet deleted: a new job taking the
        // id now would make the delete be skipped (`on_history_durable`: the
        // id is live again), and the end's acknowledgement would go out with
        // the ended framework's record still in the store. Found by the
        // preemption soak's seed 13253 (docs/design.md#simulator-seeds).
        if self.is_ending(&id) {
            let reason = format!(
                "job {id} is still ending (its end is not durable yet); submit it again once it \
                 has ended; nothing was changed"
            );
            out.push(self.refuse_request(asker, request, reason));
            return;
        }
        if let Some(expected) = sub.expect_version.filter(|v| *v != 0) {
            let reason = format!("no job {id} (expected version {expected}); nothing was changed");
            out.push(self.refuse_request(asker, request, reason));
            return;
        }
        if self.frameworks.len() >= self.config.max_frameworks {
            let reason = format!(
                "the cluster has {} frameworks; the limit is {} (max_frameworks)",
                self.frameworks.len(),
                self.config.max_frameworks
            );
            out.push(self.refuse_request(asker, request, reason));
            return;
        }
        // An entry without groups first, so the record limit is counted on
        // the record as it would be; taken back if refused.
        self.frameworks.insert(
            id.clone(),
            FrameworkEntry {
                id: id.clone(),
                name: sub.name.clone(),
                failover_timeout: Millis(0),
                instance: None,
                attempt: 0,
                conn: None,
                disconnected_since: None,
                groups: Vec::new(),
                callback: None,
                // Shown in the history when it ends, as a subscriber's
                // first SUBSCRIBE is.
                registered_at_ms: crate::time::wall_ms(self.wall_base, now).filter(|ms| *ms > 0),
                job: Some(JobRecord { version: 0, keys: Vec::new() }),
                job_write: None,
                tenant: sub.tenant.clone(),
            },
        );
        if let Some(reason) = self.record_limit_of(&id, &sub.groups) {
            self.frameworks.remove(&id);
            out.push(self.refuse_request(asker, request, reason));
            return;
        }
        let mut then = Vec::new();
        let fw = self.frameworks.get_mut(&id).expect("inserted above");
        for spec in sub.groups {
            then.push(AfterWrite::GroupDurable {
                framework: id.clone(),
                group: spec.group.clone(),
            });
            fw.groups.push(GroupState::declared(spec));
        }
        // A singleton of a removed job of this id may still run cut off.
        self.apply_singleton_holds(now, &id);
        then.push(AfterWrite::Place);
        let answer = Accepted { request, job: id, version: 1, change: JobChange::Created };
        self.write_job(asker, answer, sub.key.unwrap_or_default(), then, out);
    }

    /// Sets the job's version to `answer`'s, records `key` (unless empty)
    /// with it, and writes the record: `then`, and the answer, follow once
    /// it is durable.
    fn write_job(
        &mut self,
        asker: Origin,
        answer: Accepted,
        key: String,
        mut then: Vec<AfterWrite>,
        out: &mut Vec<Action>,
    ) {
        let id = answer.job.clone();
        let Some(job) = self.frameworks.get_mut(&id).and_then(|f| f.job.as_mut()) else { return };
        job.version = answer.version;
        if !key.is_empty() {
            job.keys.push(JobKey { key, version: answer.version, change: answer.change });
            let surplus = job.keys.len().saturating_sub(MAX_IDEMPOTENCY_KEYS);
            job.keys.drain(..surplus);
        }
        then.push(AfterWrite::JobAccepted { asker, answer });
        self.persist_framework(&id, then, out);
        // The write this step makes of the record (a new one, or one this
        // change joined).
        let write = self.step_writes.get(&id).and_then(|(i, _)| match out.get(*i) {
            Some(Action::Store(StoreCommand::Persist { write, .. })) => Some(*write),
            _ => None,
        });
        if let Some(write) = write {
            if let Some(fw) = self.frameworks.get_mut(&id) {
                fw.job_write = Some(write);
            }
            let durable = AfterWrite::JobDurable { framework: id, write };
            self.after_write.entry(write).or_default().push(durable);
        }
    }

    /// Answers a submission that writes nothing: now, or once the job's
    /// last write is durable if it is still in flight.
    fn answer_job(&mut self, asker: Origin, answer: Accepted, out: &mut Vec<Action>) {
        let pending = self.frameworks.get(&answer.job).and_then(|f| f.job_write);
        match pending {
            Some(write) => self
                .after_write
                .entry(write)
                .or_default()
                .push(AfterWrite::JobAccepted { asker, answer }),
            None => out.push(asker.reply(answer.message(self.epoch))),
        }
    }

    /// The job write `write` of framework `id` is durable.
    pub(super) fn job_durable(&mut self, id: &FrameworkId, write: WriteId) {
        if let Some(fw) = self.frameworks.get_mut(id) {
            if fw.job_write == Some(write) {
                fw.job_write = None;
            }
        }
    }

    /// `DeleteJob` from `asker`: the job is torn down (its executors
    /// killed, TORN_DOWN in the history), accepted once its record's delete
    /// is durable.
    pub(super) fn delete_job(
        &mut self,
        now: Millis,
        asker: Origin,
        request: u64,
        id: FrameworkId,
        out: &mut Vec<Action>,
    ) {
        let reason = match self.frameworks.get(&id) {
            None => format!("no job {id}"),
            Some(fw) if fw.job.is_none() => format!(
                "job {id} is driven by a subscriber (regent run/submit); it cannot be deleted \
                 through the API (an operator may kill it: regent kill {id})"
            ),
            Some(_) => {
                let then = Some(AfterWrite::AcceptTo { to: asker, request });
                self.remove_framework(now, &id, Ending::Teardown, then, out);
                return;
            }
        };
        out.push(self.refuse_request(asker, request, reason));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn submission(groups: Vec<GroupSpec>) -> JobSubmission {
        JobSubmission {
            job: FrameworkId("web".into()),
            name: "web".into(),
            groups,
            key: None,
            expect_version: None,
            max_parallel: 1,
            tenant: None,
        }
    }

    fn group(name: &str, slots: u32) -> GroupSpec {
        let mut g = crate::job::JobGroup::new(name, vec!["sleep".into(), "1000".into()]);
        g.count = slots;
        g.to_declare()
    }

    #[test]
    fn a_submission_is_refused_naming_the_group_and_the_key() {
        let bad = submission(vec![group("g", 0)]);
        let reason = submission_problem(&bad).expect("no slots is refused");
        assert!(reason.contains("\"g\"") && reason.contains("count"), "{reason}");
        let twice = submission(vec![group("g", 1), group("g", 2)]);
        assert_eq!(submission_problem(&twice).unwrap(), "group \"g\" is named twice in job web");
        assert!(submission_problem(&submission(vec![])).unwrap().contains("no groups"));
        let mut long_key = submission(vec![group("g", 1)]);
        long_key.key = Some("k".repeat(MAX_IDEMPOTENCY_KEY_BYTES + 1));
        assert!(submission_problem(&long_key).unwrap().contains("MAX_IDEMPOTENCY_KEY_BYTES"));
        long_key.key = Some("k".repeat(MAX_IDEMPOTENCY_KEY_BYTES));
        assert_eq!(submission_problem(&long_key), None);
    }
}

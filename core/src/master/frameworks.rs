//! Subscriptions (Mesos SUBSCRIBE semantics) and framework requests.
//!
//! * SUBSCRIBE is always accepted from a new instance; a live subscription of
//!   another instance gets `FrameworkError { failed_over_to }` and is closed.
//!   A newer attempt of the *same* instance replaces its older connection
//!   silently; an older attempt than the one accepted is refused without
//!   disturbing the newer one (the seed's scenario 5, without a spurious
//!   failover).
//! * A lower instance id than the accepted one is refused only while that
//!   instance is connected; with the framework disconnected it is a
//!   failover (a scheduler restarted after its host's clock stepped back).
//! * One binding per connection: a SUBSCRIBE for another framework on a
//!   connection that carries a subscription (or a worker) is refused
//!   (`SubscribeRefused`), the connection left open for what it carries.
//! * `Subscribed` follows the durable framework record (docs/design.md#durable-before-acknowledged).
//! * Requests are declarative: a group declared again with the same spec is
//!   accepted again (and adopts the running executors); a different spec for
//!   an existing group is refused and kills nothing.
//! * A framework disconnected longer than its `failover_timeout` is removed
//!   and its executors killed; within it, they keep running.
//!
//! Tests: core/tests/subscribe.rs (SUBSCRIBE, declarations,
//! failover), core/tests/durable_requests.rs, core/tests/history.rs (ends),
//! core/tests/job_promises.rs.

use super::executors::replaced_by;
use super::history::Ending;
use super::{Action, AfterWrite, Master};
use crate::ids::{Addr, ConnId, ExecutorId, FrameworkId, InstanceId, WorkerId};
use crate::limits;
use crate::protocol::{ExecutorInfo, ExecutorState, GroupSpec, Message, Subscribe};
use crate::states::FrameworkState;
use crate::store::StoreCommand;
use crate::store::{FrameworkRecord, GroupRecord, JobRecord, Record, SlotOutcome};
use crate::time::Millis;

/// One framework at the leader.
#[derive(Clone, Debug)]
pub struct FrameworkEntry {
    /// Its id.
    pub id: FrameworkId,
    /// Its display name.
    pub name: String,
    /// How long it may stay disconnected.
    pub failover_timeout: Millis,
    /// The instance whose subscription was accepted last.
    pub instance: Option<InstanceId>,
    /// The attempt of that instance accepted last.
    pub attempt: u64,
    /// The live subscription, if any.
    pub conn: Option<ConnId>,
    /// Since when it has had no live subscription (None while connected, or
    /// while a new leader still recovers).
    pub disconnected_since: Option<Millis>,
    /// Its groups, in declaration order.
    pub groups: Vec<GroupState>,
    /// Its subscriber's callback listener, if the latest subscription gave
    /// one (`Message::Callback`).
    pub callback: Option<Addr>,
    /// Wall-clock ms of its first SUBSCRIBE, if the leader that accepted it
    /// knew the wall clock (kept in the framework record).
    pub registered_at_ms: Option<u64>,
    /// For a job the leader owns (`SubmitJob`): its version and
    /// idempotency keys, as in its record (see [`super::jobs`]); `None` for
    /// a framework a subscriber drives.
    pub job: Option<JobRecord>,
    /// The write of the job's latest accepted change, while it is in
    /// flight: an answer that depends on it (a replayed or unchanged
    /// submission) waits for it.
    pub job_write: Option<crate::store::WriteId>,
    /// The tenant it belongs to (`None`: `default`; docs/tenants.md),
    /// set when it is created and never changed.
    pub tenant: Option<String>,
}

/// A declared group and its slots at the leader.
#[derive(Clone, Debug)]
pub struct GroupState {
    /// The durable part: spec, slot outcomes, retries used.
    pub record: GroupRecord,
    /// The executor currently filling each slot.
    pub current: Vec<Option<ExecutorId>>,
    /// The slot count of the last durable write of this group (its
    /// declaration or a scale); 0 until the declaration is durable.
    pub durable_count: u32,
    /// The slot counts of this group's writes still in flight (a
    /// declaration, scales), oldest first: writes to one key are confirmed
    /// in order, so each `Persisted` of one confirms the first.
    pub in_flight: std::collections::VecDeque<u32>,
    /// The latest end of an executor of this group that counted as a
    /// failure (or, in service mode, any end), and its slot: shown while
    /// this leadership knows it (a failed slot's reason is durable in its
    /// outcome).
    pub last_end: Option<(u32, String)>,
    /// Its deployment ([`GroupRecord::deployment`]) is durable and may stop
    /// executors: set once the update's write is confirmed, or when the
    /// record is loaded with one.
    pub rolling: bool,
    /// The failure of the deployment its revert under way reverts, as this
    /// leader saw it (`seq`, reason): shown with the revert
    /// (`DeploymentView::reverts_because`) and its events; not durable.
    pub reverted: Option<(u64, String)>,
    /// When, by this leader's own clock, its deployment's progress
    /// deadline passes, for the progress it was computed from
    /// ([`ProgressDue`]); not durable.
    pub progress_due: Option<ProgressDue>,
}

/// This leader's deadline for a deployment's progress: the stored progress
/// instant (`Deployment::progress_ms`) is a wall-clock reading, so a leader
/// whose wall clock is behind the writer's would wait longer than the
/// policy's `progress_deadline` after a failover. The deadline is taken
/// once per progress, on this leader's monotonic clock, and never later
/// than `progress_deadline` from then (docs/design.md#issue-45).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgressDue {
    /// The deployment's number.
    pub seq: u64,
    /// The progress instant it was taken for (wall-clock ms).
    pub progress_ms: u64,
    /// Whether it was taken in the canary phase (a promotion starts the
    /// clock again).
    pub canary: bool,
    /// The local instant it passes.
    pub at: Millis,
}

impl FrameworkEntry {
    pub(super) fn record(&self) -> Record {
        Record::Framework(FrameworkRecord {
            id: self.id.clone(),
            name: self.name.clone(),
            failover_timeout_ms: self.failover_timeout.0,
            groups: self.groups.iter().map(|g| g.record.clone()).collect(),
            callback: self.callback.clone(),
            registered_at_ms: self.registered_at_ms,
            job: self.job.clone(),
            tenant: self.tenant.clone(),
        })
    }

    pub(super) fn from_record(r: FrameworkRecord) -> Self {
        FrameworkEntry {
            id: r.id,
            name: r.name,
            failover_timeout: Millis(r.failover_timeout_ms),
            callback: r.callback,
            registered_at_ms: r.registered_at_ms,
            job: r.job,
            tenant: r.tenant,
            job_write: None,
            instance: None,
            attempt: 0,
            conn: None,
            disconnected_since: None,
            groups: r
                .groups
                .into_iter()
                .map(|g| GroupState {
                    current: vec![None; g.slots.len()],
                    durable_count: u32::try_from(g.slots.len()).unwrap_or(u32::MAX),
                    in_flight: Default::default(),
                    // A preemption the record names is its slot's last end
                    // (docs/design.md#issue-44): a new leader says so too.
                    last_end: g.preempted.iter().next_back().map(|(slot, p)| {
                        (*slot, format!("executor {} preempted by {}", p.executor, p.by))
                    }),
                    rolling: g.active_deployment().is_some(),
                    reverted: None,
                    progress_due: None,
                    record: g,
                })
                .collect(),
        }
    }

    /// Its state as views show it: DISCONNECTED without a live
    /// subscription (never, for a job the leader owns: it has no
    /// subscriber), FAILED with a failed slot, FINISHED once every slot is
    /// done, ACTIVE otherwise.
    pub(super) fn state(&self) -> FrameworkState {
        let slots = || self.groups.iter().flat_map(|g| g.record.slots.iter());
        if self.conn.is_none() && self.job.is_none() {
            FrameworkState::Disconnected
        } else if slots().any(|o| matches!(o, SlotOutcome::Failed { .. })) {
            FrameworkState::Failed
        } else if slots().any(|o| matches!(o, SlotOutcome::Done { .. }))
            && slots().all(|o| matches!(o, SlotOutcome::Done { .. } | SlotOutcome::Removed { .. }))
        {
            // A slot a named scale removed is a hole, not a wanted slot.
            FrameworkState::Finished
        } else {
            FrameworkState::Active
        }
    }

    pub(super) fn group_mut(&mut self, name: &str) -> Option<&mut GroupState> {
        self.groups.iter_mut().find(|g| g.record.spec.group == name)
    }
}

impl GroupState {
    /// A group just declared with `spec`: every slot pending, its
    /// declaration's write in flight (the caller writes the record with
    /// [`AfterWrite::GroupDurable`]).
    pub(super) fn declared(spec: GroupSpec) -> Self {
        let slots = spec.slots as usize;
        GroupState {
            record: GroupRecord {
                replacing: Default::default(),
                deployment: None,
                eras: Vec::new(),
                spec,
                slots: vec![SlotOutcome::Pending; slots],
                retries_used: 0,
                restarts: Default::default(),
                counted: Default::default(),
                preempted: Default::default(),
            },
            current: vec![None; slots],
            durable_count: 0,
            in_flight: std::iter::once(slots as u32).collect(),
            last_end: None,
            rolling: false,
            reverted: None,
            progress_due: None,
        }
    }

    /// How many of its slots (from 0) may be placed: those every record
    /// that is durable or may yet become durable holds — the last durable
    /// write's count and every count in flight. A slot is placed only
    /// once a durable record holds it, and never on the strength of a
    /// record a write in flight is about to shrink (docs/design.md#issue-20: two scale-ups
    /// in a row, 1 → 2 → 3, place slot 2 only once the second write is
    /// durable; 3 → 1 → 3 places slots 1 and 2 again only once the last
    /// write is).
    pub fn placeable_slots(&self) -> u32 {
        self.in_flight.iter().copied().fold(self.durable_count, u32::min)
    }

    /// Its declaration is durable (a later scale may still be in flight).
    pub fn declared_durably(&self) -> bool {
        self.durable_count > 0
    }

    /// A write holding `slots` slots of this group is on its way.
    pub(super) fn write_in_flight(&mut self, slots: u32) {
        self.in_flight.push_back(slots);
    }

    /// The oldest write of this group in flight is durable.
    pub(super) fn write_durable(&mut self) {
        if let Some(n) = self.in_flight.pop_front() {
            self.durable_count = n;
        }
    }

    /// How many slots the group wants now: its slots less those removed
    /// by name ([`SlotOutcome::Removed`], holes a later scale up refills).
    pub fn count(&self) -> u32 {
        let holes = self.record.slots.iter().filter(|o| matches!(o, SlotOutcome::Removed { .. }));
        self.slot_count().saturating_sub(u32::try_from(holes.count()).unwrap_or(u32::MAX))
    }

    /// How many slots the group has now, holes included (the bound of its
    /// slot numbers): as declared, or as an operator scaled it (`regent
    /// scale`); the record's slot list is the truth.
    pub fn slot_count(&self) -> u32 {
        // At most MAX_SLOTS_PER_GROUP when written by a leader; a planted
        // record saturates rather than wraps.
        u32::try_from(self.record.slots.len()).unwrap_or(u32::MAX)
    }
}

impl Master {
    fn framework_error(&self, message: String, failed_over_to: Option<InstanceId>) -> Message {
        Message::FrameworkError { epoch: self.epoch, message, failed_over_to }
    }

    /// Persists the framework's record; `then` runs once it is durable.
    ///
    /// Writes to one key are applied in order, so when this step already
    /// asked to write this framework's record (and nothing deleted it
    /// since), that write takes the newer record and `then` joins its
    /// continuations instead of a second write: a registration reporting
    /// thousands of executors of one framework makes one write of its
    /// record, not a copy of the record per report. The newer record is
    /// built once, when the step ends ([`Master::finish_framework_writes`]),
    /// not once per report: a record holds every slot of the framework.
    pub(super) fn persist_framework(
        &mut self,
        id: &FrameworkId,
        then: Vec<AfterWrite>,
        out: &mut Vec<Action>,
    ) {
        let Some(fw) = self.frameworks.get(id) else { return };
        // This step's write of the record, if any and not deleted since:
        // remembered by its place in `out` (actions are only ever pushed),
        // so finding it does not cost the step's length.
        let pending = self.step_writes.get_mut(id).filter(|(i, _)| {
            matches!(out.get(*i), Some(Action::Store(StoreCommand::Persist { record: Record::Framework(f), .. })) if f.id == *id)
        });
        if let Some((i, dirty)) = pending {
            *dirty = true;
            if let Some(Action::Store(StoreCommand::Persist { write, .. })) = out.get(*i) {
                self.after_write.entry(*write).or_default().extend(then);
            }
            #[cfg(debug_assertions)]
            self.step_records.insert(id.clone(), fw.record());
            return;
        }
        let record = fw.record();
        let write = self.next_write();
        self.after_write.insert(write, then);
        out.push(Action::Store(StoreCommand::Persist { write, record }));
        self.step_writes.insert(id.clone(), (out.len() - 1, false));
    }

    /// Brings this step's write of `id`'s record up to date, if another
    /// change joined it (see [`Master::persist_framework`]), and forgets it
    /// when `forget` (the record is about to be deleted).
    fn finish_framework_write(&mut self, id: &FrameworkId, forget: bool, out: &mut [Action]) {
        let entry =
            if forget { self.step_writes.remove(id) } else { self.step_writes.get(id).copied() };
        let Some((i, true)) = entry else { return };
        let Some(fw) = self.frameworks.get(id) else { return };
        if let Some(Action::Store(StoreCommand::Persist {
            record: record @ Record::Framework(_),
            ..
        })) = out.get_mut(i)
        {
            *record = fw.record();
            // The record as it was at the last change that joined the
            // write is the record as it is now: every change to a record
            // is followed by its write in the same step.
            #[cfg(debug_assertions)]
            if let Some(expected) = self.step_records.remove(id) {
                debug_assert_eq!(*record, expected, "framework {id} changed after its write");
            }
        }
        if !forget {
            self.step_writes.insert(id.clone(), (i, false));
        }
    }

    /// At the end of a step: every framework write of the step carries its
    /// record as it stands.
    pub(super) fn finish_framework_writes(&mut self, out: &mut [Action]) {
        let dirty: Vec<FrameworkId> =
            self.step_writes.iter().filter(|(_, (_, d))| *d).map(|(f, _)| f.clone()).collect();
        for id in dirty {
            self.finish_framework_write(&id, false, out);
        }
        self.step_writes.clear();
        #[cfg(debug_assertions)]
        self.step_records.clear();
    }

    /// Why `sub` is refused by a limit (docs/design.md#peer-input-never-panics), if it is; checked
    /// before anything is allocated or persisted.
    fn subscription_limit(&self, id: &FrameworkId, sub: &Subscribe) -> Option<String> {
        if id.as_str().len() > limits::MAX_ID_BYTES {
            return Some(format!(
                "framework id of {} bytes; the limit is {} bytes (MAX_ID_BYTES)",
                id.as_str().len(),
                limits::MAX_ID_BYTES
            ));
        }
        if sub.name.len() > limits::MAX_NAME_BYTES {
            return Some(format!(
                "framework name of {} bytes; the limit is {} bytes (MAX_NAME_BYTES)",
                sub.name.len(),
                limits::MAX_NAME_BYTES
            ));
        }
        if sub.failover_timeout > limits::MAX_FAILOVER_TIMEOUT {
            return Some(format!(
                "failover timeout of {} ms; the limit is {} ms (MAX_FAILOVER_TIMEOUT, 7 days)",
                sub.failover_timeout.0,
                limits::MAX_FAILOVER_TIMEOUT.0
            ));
        }
        if !self.frameworks.contains_key(id) && self.frameworks.len() >= self.config.max_frameworks
        {
            return Some(format!(
                "the cluster has {} frameworks; the limit is {} (max_frameworks)",
                self.frameworks.len(),
                self.config.max_frameworks
            ));
        }
        None
    }

    pub(super) fn subscribe(
        &mut self,
        now: Millis,
        conn: ConnId,
        sub: Subscribe,
        out: &mut Vec<Action>,
    ) {
        // A framework's first SUBSCRIBE has no id yet; its retries (and a
        // retry reaching another leader) must not create a second
        // framework, so the id derives from the instance.
        let id = super::authorize::subscribe_id(&sub);
        let callback = self.conns.get(&conn).and_then(|c| c.callback.clone());
        if let Some(reason) = self.binding_conflict(conn, None, Some(&id)) {
            // The connection stays open for what it carries: closing it
            // would disconnect a subscription that did nothing wrong.
            let msg = Message::SubscribeRefused { epoch: self.epoch, reason };
            out.push(Action::Send { conn, msg });
            return;
        }
        if let Some(reason) = self.subscription_limit(&id, &sub) {
            let msg = Message::SubscribeRefused { epoch: self.epoch, reason: reason.clone() };
            out.push(Action::Send { conn, msg });
            out.push(Action::Close { conn, reason: format!("SUBSCRIBE refused: {reason}") });
            self.conns.remove(&conn);
            self.metrics.rejected += 1;
            return;
        }
        let registered_at_ms = crate::time::wall_ms(self.wall_base, now).filter(|ms| *ms > 0);
        let owned = self.frameworks.get(&id).is_some_and(|f| f.job.is_some()).then(|| {
            format!(
                "framework {id} is a job the leader owns (created through the HTTP API); \
                 no subscriber can drive it"
            )
        });
        if let Some(reason) = owned.or_else(|| self.finished_refusal(&id)) {
            let msg = Message::SubscribeRefused { epoch: self.epoch, reason: reason.clone() };
            out.push(Action::Send { conn, msg });
            out.push(Action::Close { conn, reason: format!("SUBSCRIBE refused: {reason}") });
            self.conns.remove(&conn);
            self.metrics.rejected += 1;
            return;
        }
        let tenant = match self.tenant_for(super::Origin::Conn(conn), &id, sub.tenant.as_deref()) {
            Ok(tenant) => tenant,
            Err(reason) => {
                let msg = Message::SubscribeRefused { epoch: self.epoch, reason: reason.clone() };
                out.push(Action::Send { conn, msg });
                out.push(Action::Close { conn, reason: format!("SUBSCRIBE refused: {reason}") });
                self.conns.remove(&conn);
                self.metrics.rejected += 1;
                return;
            }
        };
        let fw = self.frameworks.entry(id.clone()).or_insert_with(|| FrameworkEntry {
            id: id.clone(),
            name: sub.name.clone(),
            failover_timeout: sub.failover_timeout,
            instance: None,
            attempt: 0,
            conn: None,
            disconnected_since: Some(now),
            groups: Vec::new(),
            callback: None,
            registered_at_ms,
            job: None,
            job_write: None,
            tenant,
        });
        let connected = fw.conn.is_some();
        if let Some(current) = fw.instance.filter(|cur| sub.instance < *cur && connected) {
            // Instance ids grow with their process's start time: an older
            // instance (a SUBSCRIBE sent before a crash and delivered late, or
            // a scheduler that was superseded) never takes the framework back
            // from a connected instance. While the framework is disconnected
            // a lower instance is a failover like any other (a scheduler
            // restarted on a host whose clock stepped back, docs/design.md#identity-and-time-do-not-trust-the-wall-clock):
            // never "failed over to" an instance that is gone.
            let msg = Message::FrameworkError {
                epoch: self.epoch,
                message: format!(
                    "framework {id} failed over to instance {current}; instance {} is older",
                    sub.instance
                ),
                failed_over_to: Some(current),
            };
            out.push(Action::Send { conn, msg });
            out.push(Action::Close { conn, reason: "SUBSCRIBE from a superseded instance".into() });
            self.conns.remove(&conn);
            return;
        }
        let same_instance = fw.instance == Some(sub.instance);
        if same_instance && sub.attempt < fw.attempt {
            // An older attempt of an instance whose newer attempt is already
            // accepted (seed scenario 5): refuse it, leave the newer alone.
            let msg = Message::FrameworkError {
                epoch: self.epoch,
                message: format!(
                    "stale SUBSCRIBE attempt {} of instance {}: attempt {} is already accepted",
                    sub.attempt, sub.instance, fw.attempt
                ),
                failed_over_to: None,
            };
            out.push(Action::Send { conn, msg });
            out.push(Action::Close { conn, reason: "stale SUBSCRIBE attempt".into() });
            self.conns.remove(&conn);
            return;
        }
        let old_conn = fw.conn.filter(|c| *c != conn);
        let old_instance = fw.instance;
        fw.instance = Some(sub.instance);
        fw.attempt = sub.attempt;
        fw.conn = Some(conn);
        fw.disconnected_since = None;
        fw.name = sub.name;
        fw.failover_timeout = sub.failover_timeout;
        fw.callback = callback;
        if let Some(old) = old_conn {
            if !same_instance {
                let msg = self.framework_error(
                    format!(
                        "framework {id} failed over to instance {} (this instance: {})",
                        sub.instance,
                        old_instance.map(|i| i.to_string()).unwrap_or_default()
                    ),
                    Some(sub.instance),
                );
                out.push(Action::Send { conn: old, msg });
            }
            out.push(Action::Close {
                conn: old,
                reason: format!("framework {id} resubscribed on another connection"),
            });
            if let Some(c) = self.conns.get_mut(&old) {
                c.framework = None;
            }
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.framework = Some(id.clone());
        }
        self.persist_framework(
            &id,
            vec![AfterWrite::Subscribed { framework: id.clone(), conn }],
            out,
        );
    }

    pub(super) fn on_subscription_durable(
        &mut self,
        framework: &FrameworkId,
        conn: ConnId,
        out: &mut Vec<Action>,
    ) {
        let Some(fw) = self.frameworks.get(framework) else { return };
        if fw.conn != Some(conn) {
            return; // superseded meanwhile
        }
        let executors = self.snapshot(framework);
        out.push(Action::Send {
            conn,
            msg: Message::Subscribed {
                epoch: self.epoch,
                framework: framework.clone(),
                heartbeat_interval: self.config.heartbeat_interval,
                executors,
            },
        });
        // Failed slots are final: say so again, so a subscriber that missed
        // the original `SlotFailed` does not wait for a retry that never comes.
        let mut failed = Vec::new();
        for g in &fw.groups {
            for (slot, outcome) in g.record.slots.iter().enumerate() {
                if let SlotOutcome::Failed { reason, .. } = outcome {
                    failed.push((g.record.spec.group.clone(), slot as u32, reason.clone()));
                }
            }
        }
        for (group, slot, reason) in failed {
            let msg = Message::SlotFailed { epoch: self.epoch, group, slot, reason };
            out.push(Action::Send { conn, msg });
        }
        // A group an operator scaled: its slot count is not the declared
        // one, which is all the subscriber knows by itself.
        let Some(fw) = self.frameworks.get(framework) else { return };
        for g in &fw.groups {
            if g.slot_count() != g.record.spec.slots {
                let msg = Message::GroupScaled {
                    epoch: self.epoch,
                    group: g.record.spec.group.clone(),
                    slots: g.slot_count(),
                };
                out.push(Action::Send { conn, msg });
            }
        }
    }

    /// The framework's executors, as its subscriber sees them: the live
    /// ones, and each finished slot's outcome. Ended executors whose slot
    /// moved on (failed attempts, lost ones refilled) are left out: they
    /// accumulate for as long as the framework lives (every retry, every
    /// lost worker adds some), and a snapshot carrying all of them outgrew
    /// the largest frame a subscriber accepts, so the framework could never
    /// subscribe again.
    pub(super) fn snapshot(&self, framework: &FrameworkId) -> Vec<ExecutorInfo> {
        let mut v: Vec<ExecutorInfo> = self
            .executors
            .of_framework(framework)
            .filter(|e| !e.state.is_terminal())
            .map(|e| self.info(e))
            .collect();
        // Finished slots, as the durable record has them: a subscriber that
        // missed an exit (it was disconnected, or the leader changed) learns
        // it here.
        let mut listed: std::collections::BTreeSet<ExecutorId> =
            v.iter().map(|e| e.id.clone()).collect();
        if let Some(fw) = self.frameworks.get(framework) {
            for g in &fw.groups {
                for (slot, outcome) in g.record.slots.iter().enumerate() {
                    if let Some((id, state)) = outcome.finished() {
                        if listed.insert(id.clone()) {
                            v.push(ExecutorInfo {
                                id,
                                group: g.record.spec.group.clone(),
                                slot: slot as u32,
                                worker: None,
                                state,
                                host: None,
                                ports: Vec::new(),
                                resources: Vec::new(),
                            });
                        }
                    }
                }
            }
        }
        v
    }

    /// The framework bound to `conn`, if `conn` is its live subscription.
    pub(super) fn subscribed_framework(&self, conn: ConnId) -> Option<FrameworkId> {
        let id = self.conns.get(&conn)?.framework.clone()?;
        (self.frameworks.get(&id)?.conn == Some(conn)).then_some(id)
    }

    /// The framework `conn` is the live subscription of; otherwise
    /// `request` is refused (`not subscribed on this connection`).
    pub(super) fn subscription_of(
        &self,
        conn: ConnId,
        request: u64,
        out: &mut Vec<Action>,
    ) -> Option<FrameworkId> {
        let id = self.subscribed_framework(conn);
        if id.is_none() {
            out.push(self.refuse_request(
                conn,
                request,
                "not subscribed on this connection".into(),
            ));
        }
        id
    }

    pub(super) fn declare_group(
        &mut self,
        conn: ConnId,
        request: u64,
        spec: GroupSpec,
        out: &mut Vec<Action>,
    ) {
        let Some(id) = self.subscription_of(conn, request, out) else { return };
        // Checked before anything is allocated or persisted (docs/design.md#peer-input-never-panics).
        if let Some(problem) = limits::group_spec_problem(&spec, limits::GroupKey::wire_name) {
            out.push(self.refuse_request(conn, request, problem.message(&spec.group)));
            return;
        }
        let declared = self.frameworks.get(&id).map_or(0, |f| f.groups.len());
        let is_new = self
            .frameworks
            .get(&id)
            .is_some_and(|f| !f.groups.iter().any(|g| g.record.spec.group == spec.group));
        if is_new && declared >= crate::limits::MAX_GROUPS_PER_FRAMEWORK {
            let reason = format!(
                "framework {id} has {declared} groups; the limit is {} per framework",
                crate::limits::MAX_GROUPS_PER_FRAMEWORK
            );
            out.push(self.refuse_request(conn, request, reason));
            return;
        }
        if is_new {
            if let Some(reason) = self.record_limit(&id, &spec) {
                out.push(self.refuse_request(conn, request, reason));
                return;
            }
        }
        let fw = self.frameworks.get_mut(&id).expect("subscribed_framework checked");
        if let Some(existing) = fw.groups.iter().find(|g| g.record.spec.group == spec.group) {
            if existing.record.spec == spec && existing.declared_durably() {
                // Declarative and idempotent: the same group again adopts
                // whatever already runs for it.
                out.push(Action::Send {
                    conn,
                    msg: Message::RequestAccepted { epoch: self.epoch, request },
                });
            } else if existing.record.spec == spec {
                // Its first write is still in flight: writes to one key are
                // applied in order, so the acceptance follows this one.
                self.persist_framework(&id, vec![AfterWrite::Accept { conn, request }], out);
            } else {
                let reason = format!(
                    "group {:?} is already declared with a different spec (changed: {}); nothing was changed or killed",
                    spec.group,
                    crate::protocol::spec_changes(&existing.record.spec, &spec).join("; ")
                );
                out.push(self.refuse_request(conn, request, reason));
            }
            return;
        }
        let group = spec.group.clone();
        fw.groups.push(GroupState::declared(spec));
        let then = vec![
            AfterWrite::GroupDurable { framework: id.clone(), group },
            AfterWrite::Accept { conn, request },
            AfterWrite::Place,
        ];
        self.persist_framework(&id, then, out);
    }

    /// Why declaring `spec` (a new group) would let framework `id`'s record
    /// grow past the record limit, if it would. The worst case counts every
    /// slot at its largest outcome and reserves the headroom documented in
    /// [`crate::limits`], so an accepted record never outgrows the store.
    pub(super) fn record_limit(&self, id: &FrameworkId, spec: &GroupSpec) -> Option<String> {
        self.record_limit_of(id, std::slice::from_ref(spec))
    }

    /// [`Master::record_limit`] for several new groups at once (a job's
    /// submission): the first of `specs` that would let the record grow
    /// past the limit, counted with those before it. A job the leader owns
    /// also reserves room for its idempotency keys ([`JOB_RESERVE`]).
    pub(super) fn record_limit_of(&self, id: &FrameworkId, specs: &[GroupSpec]) -> Option<String> {
        let fw = self.frameworks.get(id)?;
        let current = crate::store::format::payload_len(&fw.record());
        let job = if fw.job.is_some() { JOB_RESERVE } else { 0 };
        let mut added = 0usize;
        for (i, spec) in specs.iter().enumerate() {
            // The new group as it would be recorded: its spec, `slots`
            // Pending outcomes (one byte each, plus the length prefix) and
            // 0 retries.
            let spec_len = crate::codec::postcard_len(spec);
            added = added.saturating_add(spec_len.saturating_add(5 + spec.slots as usize + 1));
            let reserve: usize = fw
                .groups
                .iter()
                .map(|g| (&g.record.spec, g.slot_count()))
                .chain(specs[..=i].iter().map(|s| (s, s.slots)))
                .map(|(spec, slots)| slot_reserve(id, spec, slots))
                .fold(0usize, usize::saturating_add);
            let worst = current
                .saturating_add(added)
                .saturating_add(reserve)
                .saturating_add(job)
                .saturating_add(limits::record_headroom(fw.groups.len() + i + 1));
            let max = limits::MAX_RECORD_PAYLOAD;
            if worst > max {
                return Some(format!(
                    "group {:?} of {} slots would let framework {id}'s record reach {worst} bytes at worst (every slot's outcome recorded); the record limit is {max} bytes (MAX_RECORD_PAYLOAD); nothing was changed",
                    spec.group, spec.slots
                ));
            }
        }
        None
    }

    pub(super) fn kill_request(
        &mut self,
        conn: ConnId,
        request: u64,
        executor: ExecutorId,
        out: &mut Vec<Action>,
    ) {
        let Some(id) = self.subscription_of(conn, request, out) else { return };
        // Durable before accepted (docs/design.md#durable-before-acknowledged): the slot's outcome records
        // the kill, and both the kill and `RequestAccepted` follow the write,
        // so a new leader never relaunches a slot whose kill was accepted.
        match self.executors.get_mut(&executor) {
            Some(mut e) if e.framework == id => {
                let accept = AfterWrite::Accept { conn, request };
                // A LOST executor was written off, not seen to end: it may
                // still run on a worker cut off from this leader, and a new
                // leader that hears of it first would adopt it into its
                // slot. Its kill is made durable below (`--api-jobs --services
                // --singletons`: sim seed 64069, docs/design.md#simulator-seeds).
                let lost = e.state == ExecutorState::Lost;
                if e.state.is_terminal() && e.recorded && !lost {
                    // Nothing left to kill, and its end is durable already.
                    out.push(Action::Send {
                        conn,
                        msg: Message::RequestAccepted { epoch: self.epoch, request },
                    });
                    return;
                }
                let mut then = Vec::new();
                if !e.state.is_terminal() {
                    e.request_kill();
                    let (group, slot) = (e.group.clone(), e.slot as usize);
                    if let Some(g) = self.frameworks.get_mut(&id).and_then(|f| f.group_mut(&group))
                    {
                        if g.current.get(slot) == Some(&Some(executor.clone()))
                            && g.record.slots.get(slot) == Some(&SlotOutcome::Pending)
                        {
                            g.record.slots[slot] =
                                SlotOutcome::Killed { executor: executor.clone() };
                        }
                    }
                    // (The slot was filled, so it was not open and is not now.)
                    then.push(AfterWrite::KillDurable { executor });
                } else if lost {
                    // Named in `replacing` with the acceptance: a new leader
                    // kills it instead of adopting it (this leader kills it
                    // whenever it is reported live: it was written off).
                    // Unless the slot is settled (nothing adopts into it), or
                    // names it or a later executor already (older ones are
                    // never adopted either), or a preempted one whose reason
                    // must be kept.
                    let slot = e.slot;
                    let group = e.group.clone();
                    if let Some(g) = self.frameworks.get_mut(&id).and_then(|f| f.group_mut(&group))
                    {
                        let pending =
                            g.record.slots.get(slot as usize) == Some(&SlotOutcome::Pending);
                        let free = match g.record.replacing.get(&slot) {
                            None => true,
                            Some(named) => {
                                replaced_by(named, &executor)
                                    && g.record.preempted_by(slot, named).is_none()
                            }
                        };
                        if pending && free {
                            g.record.replace(slot, executor.clone());
                        }
                    }
                }
                // A terminal end still being written is durable once this
                // write is too (writes to one key apply in order).
                then.push(accept);
                self.persist_framework(&id, then, out);
            }
            _ => out.push(self.refuse_request(
                conn,
                request,
                format!("no executor {executor} in framework {id}"),
            )),
        }
    }

    pub(super) fn teardown(
        &mut self,
        now: Millis,
        conn: ConnId,
        request: u64,
        out: &mut Vec<Action>,
    ) {
        let Some(id) = self.subscription_of(conn, request, out) else { return };
        let then = Some(AfterWrite::Accept { conn, request });
        self.remove_framework(now, &id, Ending::Teardown, then, out);
    }

    /// Kills every executor of the framework, records it in the history
    /// and, once that is durable, deletes its record (see
    /// [`super::history`]); `then` runs after the delete.
    pub(super) fn remove_framework(
        &mut self,
        now: Millis,
        id: &FrameworkId,
        ending: Ending,
        then: Option<AfterWrite>,
        out: &mut Vec<Action>,
    ) {
        // A write of the record earlier in this step takes the record as it
        // stands before the delete; one after the delete is a new write.
        self.finish_framework_write(id, true, out);
        self.hold_singletons_of_removed(now, id);
        let Some(fw) = self.frameworks.remove(id) else {
            return;
        };
        // The kills wait until the framework's end is durable (its record's
        // delete, after the history record): a leader that crashes before
        // leaves the framework live in the store with its executors still
        // running for the next leader to adopt, instead of every slot of a
        // framework being removed relaunched (docs/design.md#issue-20). Meanwhile a report
        // of one of them does not kill it early (`ending_kills`).
        let kills: Vec<(WorkerId, ExecutorId)> = self
            .executors
            .of_framework(id)
            .filter(|e| !e.state.is_terminal())
            .map(|e| (e.worker.clone(), e.id.clone()))
            .collect();
        let mut after_end = vec![AfterWrite::EndKills { kills }];
        after_end.extend(then);
        // Written before anything else of the ending: the history record
        // first, the framework record's delete once it is durable.
        self.record_finished(&fw, ending, now, after_end, out);
        if let (Ending::Killed, Some(conn)) = (ending, fw.conn) {
            // Its subscriber hears why; its SUBSCRIBE again is refused (the
            // framework is finished), so it stops instead of starting over.
            let msg =
                self.framework_error(format!("framework {id} was killed by an operator"), None);
            out.push(Action::Send { conn, msg });
            out.push(Action::Close { conn, reason: format!("framework {id} killed") });
            self.conns.remove(&conn);
        }
        self.restart_waits.forget(id, None);
        self.refresh_slots_of(id);
        let mine: Vec<ExecutorId> = self.executors.of_framework(id).map(|e| e.id.clone()).collect();
        let mut touched = Vec::new();
        for ex in mine {
            if let Some(e) = self.remove_executor(&ex) {
                if !e.state.is_terminal() {
                    // Dying: what it holds stays held until its end is
                    // reported, then goes to the slots that wait (`kills`).
                    let need = super::executors::Need::held_by(&e);
                    self.start_dying(&e.worker, &e.id, need, true, false, out);
                    touched.push(e.worker);
                }
            }
        }
        // A draining worker this emptied is drained.
        touched.sort();
        touched.dedup();
        for w in touched {
            self.maybe_drained(&w, out);
        }
    }

    pub(super) fn framework_disconnected(&mut self, now: Millis, id: &FrameworkId, conn: ConnId) {
        if let Some(fw) = self.frameworks.get_mut(id) {
            if fw.conn == Some(conn) {
                fw.conn = None;
                fw.disconnected_since = Some(now);
            }
        }
    }

    /// HEARTBEAT on every live subscription; remove frameworks past their
    /// failover timeout.
    pub(super) fn framework_tick(&mut self, now: Millis, out: &mut Vec<Action>) {
        let epoch = self.epoch;
        for fw in self.frameworks.values() {
            if let Some(conn) = fw.conn {
                out.push(Action::Send { conn, msg: Message::FrameworkHeartbeat { epoch } });
            }
        }
        if !self.recovered() {
            return;
        }
        let expired: Vec<FrameworkId> = self
            .frameworks
            .values()
            .filter(|f| {
                // A job the leader owns has no subscriber to wait for: it
                // lives until it is deleted or killed.
                f.conn.is_none()
                    && f.job.is_none()
                    && f.disconnected_since.is_some_and(|t| now.since(t) > f.failover_timeout)
            })
            .map(|f| f.id.clone())
            .collect();
        for id in expired {
            self.remove_framework(now, &id, Ending::TimedOut, None, out);
        }
    }

    /// Frameworks that did not resubscribe during recovery count as
    /// disconnected from the moment the master becomes ALIVE.
    pub(super) fn start_failover_clocks(&mut self, now: Millis) {
        for fw in self.frameworks.values_mut() {
            if fw.conn.is_none() && fw.disconnected_since.is_none() {
                fw.disconnected_since = Some(now);
            }
        }
    }
}

/// What a job's record may hold beyond a subscriber's framework record at
/// worst: its version and [`crate::api::MAX_IDEMPOTENCY_KEYS`] keys of
/// the longest length, each with its version and change (varints and
/// length prefixes counted at their widest).
pub(super) const JOB_RESERVE: usize = 1
    + 10
    + 5
    + crate::api::MAX_IDEMPOTENCY_KEYS * (crate::api::MAX_IDEMPOTENCY_KEY_BYTES + 2 + 10 + 1);

/// What `slots` slots of a group of `spec` may add to framework `id`'s
/// record beyond a `Pending` outcome each, at worst: each slot's largest
/// outcome, and its restart state if the group has a restart policy of its
/// own (`restarts`).
pub(super) fn slot_reserve(id: &FrameworkId, spec: &GroupSpec, slots: u32) -> usize {
    let restarts = spec.policy.restart != crate::policy::RestartPolicy::default();
    let worst = limits::worst_slot_outcome_len(id.as_str(), &spec.group, slots)
        + 2 * limits::worst_slot_counted_len(id.as_str(), &spec.group, slots)
        + if restarts { limits::WORST_SLOT_RESTART_LEN } else { 0 };
    (slots as usize).saturating_mul(worst.saturating_sub(1))
}

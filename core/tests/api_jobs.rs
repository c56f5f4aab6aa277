//! Jobs the leader owns (docs/design.md#issue-43 items 2 and 5), as exact
//! protocol actions of the master machine: `SubmitJob` creates or updates a
//! job (a rollout for a changed group), with idempotency keys and
//! check-and-set on its version; `DeleteJob` tears it down; `JobsRequest`
//! tells every group's and slot's status with the reason a slot waits; the
//! operator commands answer a local asker (the HTTP API) as they answer a
//! connection. Every write is answered only once durable, and a job, its
//! version and its keys survive a leader failover.

mod common;

use common::*;
use regent_core::api::{JobChange, JobStatus, JobSubmission, SlotPhase, WaitReason};
use regent_core::ids::{InstanceId, QueryId};
use regent_core::launch::Disconnect;
use regent_core::master::{self, Master};
use regent_core::protocol::{
    ExecutorReport, ExecutorState, GroupSpec, Message, RegisterWorker, Role, Subscribe,
};
use regent_core::store::{Maintenance, Record, RecordKey, StoreCommand, StoreEvent};
use regent_core::token::Principal;
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis, WorkerId};

/// The wall clock of the first leader at its local time 0.
const WALL: u64 = 1_700_000_000_000;

/// What the tests read of the store ([`Store`], common to the scenario
/// tests).
trait JobRecords {
    fn job(&self, id: &str) -> Option<regent_core::store::FrameworkRecord>;
    fn history_outcomes(&self) -> Vec<String>;
}

impl JobRecords for Store {
    fn job(&self, id: &str) -> Option<regent_core::store::FrameworkRecord> {
        match self.records.get(&RecordKey::Framework(FrameworkId::new(id))) {
            Some(Record::Framework(f)) => Some(f.clone()),
            _ => None,
        }
    }

    fn history_outcomes(&self) -> Vec<String> {
        self.records
            .values()
            .filter_map(|r| match r {
                Record::History(h) => Some(format!("{} {:?}", h.framework.id, h.framework.outcome)),
                _ => None,
            })
            .collect()
    }
}

fn register(worker: &str, inc: u64, cores: u32) -> Message {
    Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: worker.into(),
        incarnation: Incarnation(inc),
        cores,
        memory_mb: 8192,
        executors: Vec::new(),
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    })
}

fn running(inc: u64, id: &ExecutorId) -> Message {
    let framework = FrameworkId(id.as_str().split('/').next().expect("prefix").into());
    Message::ExecutorStatus {
        incarnation: Incarnation(inc),
        report: ExecutorReport {
            health: None,
            ran_ms: None,
            resources: Default::default(),
            ports: Default::default(),
            id: id.clone(),
            framework,
            cores: 1,
            memory_mb: 1,
            state: ExecutorState::Running,
        },
    }
}

fn group(name: &str, slots: u32, command: &str) -> GroupSpec {
    GroupSpec {
        group: name.into(),
        slots,
        command: vec![command.into(), "1000".into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy: Default::default(),
        launch: Default::default(),
    }
}

fn submission(id: &str, groups: Vec<GroupSpec>) -> JobSubmission {
    JobSubmission {
        job: FrameworkId::new(id),
        name: id.into(),
        groups,
        key: None,
        expect_version: None,
        max_parallel: 1,
        tenant: None,
    }
}

fn keyed(mut s: JobSubmission, key: &str) -> JobSubmission {
    s.key = Some(key.into());
    s
}

fn expecting(mut s: JobSubmission, version: u64) -> JobSubmission {
    s.expect_version = Some(version);
    s
}

/// The answers to local queries among `actions`.
fn answers(actions: &[master::Action]) -> Vec<(QueryId, Message)> {
    actions
        .iter()
        .filter_map(|a| match a {
            master::Action::Answer { query, msg } => Some((*query, msg.clone())),
            _ => None,
        })
        .collect()
}

fn writes(actions: &[master::Action]) -> usize {
    actions.iter().filter(|a| matches!(a, master::Action::Store(_))).count()
}

fn launches(actions: &[master::Action]) -> Vec<(ConnId, ExecutorId)> {
    m_sends(actions)
        .into_iter()
        .filter_map(|(c, m)| match m {
            Message::LaunchExecutor { executor, .. } => Some((c, executor)),
            _ => None,
        })
        .collect()
}

/// The test cluster: leader "a" (wall clock [`WALL`] at local 0) with
/// workers w0 (conn 100) and w1 (conn 101) of 8 cores each.
struct Cluster {
    m: Master,
    store: Store,
    next_query: u64,
}

impl Cluster {
    fn new() -> Cluster {
        let mut store = Store::default();
        let mut m = master("a");
        let t = Millis(0);
        let out = m.handle(t, master::Event::Elected { floor: Epoch(1), clock: WALL });
        assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
        let out = m.handle(t, master::Event::Store(StoreEvent::Loaded { records: vec![] }));
        let _ = store.run(&mut m, t, out);
        let mut c = Cluster { m, store, next_query: 1 };
        c.add_worker(t, "w0", 100);
        c.add_worker(t, "w1", 101);
        c
    }

    fn add_worker(&mut self, t: Millis, name: &str, conn: u64) {
        let _ = connect_worker(&mut self.m, t, conn, name);
        let msg = register(name, conn, 8);
        let out = self.m.handle(t, master::Event::Message { conn: ConnId(conn), msg });
        let _ = self.store.run(&mut self.m, t, out);
    }

    /// Asks `msg` as a local asker: (the actions before any write is
    /// durable, every action once settled, the one answer).
    fn ask(
        &mut self,
        now: Millis,
        msg: Message,
    ) -> (Vec<master::Action>, Vec<master::Action>, Message) {
        let query = QueryId(self.next_query);
        self.next_query += 1;
        let out = self.m.handle(
            now,
            master::Event::Command { query, msg, principal: Box::new(Principal::Root) },
        );
        let before = out.clone();
        let all = self.store.run(&mut self.m, now, out);
        let mine: Vec<Message> =
            answers(&all).into_iter().filter(|(q, _)| *q == query).map(|(_, m)| m).collect();
        assert_eq!(mine.len(), 1, "exactly one answer to query {query:?}: {all:?}");
        (before, all, mine.into_iter().next().expect("one"))
    }

    fn submit(
        &mut self,
        now: Millis,
        job: JobSubmission,
    ) -> (Vec<master::Action>, Vec<master::Action>, Message) {
        self.ask(now, Message::SubmitJob { request: 7, job })
    }

    /// Reports every launch of `actions` running.
    fn run_all(&mut self, now: Millis, actions: &[master::Action]) {
        for (conn, x) in launches(actions) {
            let out = self.m.handle(now, master::Event::Message { conn, msg: running(conn.0, &x) });
            let _ = self.store.run(&mut self.m, now, out);
        }
    }

    fn status(&mut self, now: Millis, job: &str) -> JobStatus {
        let msg = Message::JobsRequest { request: 3, job: Some(FrameworkId::new(job)) };
        match self.ask(now, msg).2 {
            Message::JobsReply { request: 3, mut jobs, .. } if jobs.len() == 1 => jobs.remove(0),
            other => panic!("no status of {job}: {other:?}"),
        }
    }
}

fn accepted(msg: &Message) -> (u64, JobChange) {
    match msg {
        Message::JobAccepted { request: 7, version, change, .. } => (*version, *change),
        other => panic!("not accepted: {other:?}"),
    }
}

fn refused(msg: &Message) -> String {
    match msg {
        Message::RequestRefused { reason, .. } => reason.clone(),
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_job_is_created_once_durable_and_a_retry_with_its_key_changes_nothing() {
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let job = keyed(submission("web", vec![group("g", 2, "/bin/sleep")]), "create-1");
    let (before, all, answer) = c.submit(t, job.clone());
    assert!(answers(&before).is_empty(), "answered before the record was durable: {before:?}");
    assert_eq!(writes(&before), 1, "one write of the job's record: {before:?}");
    assert_eq!(accepted(&answer), (1, JobChange::Created));
    assert_eq!(launches(&all).len(), 2, "its slots are placed once durable: {all:?}");
    let record = c.store.job("web").expect("the job's record");
    let kept = record.job.expect("a job record");
    assert_eq!(kept.version, 1);
    assert_eq!(kept.keys.len(), 1);
    assert_eq!(kept.keys[0].key, "create-1");
    assert_eq!(record.failover_timeout_ms, 0);
    assert_eq!(record.registered_at_ms, Some(WALL + 1_000), "created at, for the history");
    // The same request again: answered as then, nothing written or placed.
    let (before, all, answer) = c.submit(t, job);
    assert_eq!(accepted(&answer), (1, JobChange::Replayed));
    assert_eq!(writes(&all), 0, "{all:?}");
    assert!(!before.is_empty() && launches(&all).is_empty());
    // The key wins over a check-and-set the first request passed.
    let retry =
        expecting(keyed(submission("web", vec![group("g", 2, "/bin/sleep")]), "create-1"), 0);
    assert_eq!(accepted(&c.submit(t, retry).2), (1, JobChange::Replayed));
}

#[test]
fn check_and_set_refuses_a_version_that_does_not_match_with_nothing_changed() {
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let spec = || vec![group("g", 1, "/bin/sleep")];
    let reason = refused(&c.submit(t, expecting(submission("web", spec()), 3)).2);
    assert_eq!(reason, "no job web (expected version 3); nothing was changed");
    assert!(c.store.job("web").is_none());
    assert_eq!(
        accepted(&c.submit(t, expecting(submission("web", spec()), 0)).2),
        (1, JobChange::Created)
    );
    let reason = refused(&c.submit(t, expecting(submission("web", spec()), 0)).2);
    assert_eq!(reason, "job web exists (version 1); expected it not to");
    let changed = vec![group("g", 1, "/bin/true")];
    let (_, all, answer) = c.submit(t, expecting(submission("web", changed.clone()), 5));
    assert_eq!(refused(&answer), "job web is at version 1, not 5; nothing was changed");
    assert_eq!(writes(&all), 0);
    assert_eq!(c.store.job("web").unwrap().groups[0].spec.command[0], "/bin/sleep");
    assert_eq!(
        accepted(&c.submit(t, expecting(submission("web", changed), 1)).2),
        (2, JobChange::Updated)
    );
}

#[test]
fn a_changed_group_is_rolled_out_a_new_one_declared_and_the_same_spec_is_unchanged() {
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let (_, all, _) = c.submit(t, submission("web", vec![group("g", 2, "/bin/sleep")]));
    c.run_all(t, &all);
    let old: Vec<ExecutorId> = launches(&all).into_iter().map(|(_, x)| x).collect();
    // The same spec again, without a key: nothing is written.
    let (_, all, answer) = c.submit(t, submission("web", vec![group("g", 2, "/bin/sleep")]));
    assert_eq!(accepted(&answer), (1, JobChange::Unchanged));
    assert_eq!(writes(&all), 0, "{all:?}");
    // A changed command and a new group: one write, a rollout of "g" (one
    // old executor stopped at a time) and "h" placed.
    let t = Millis(2_000);
    let job = submission("web", vec![group("g", 2, "/bin/sleepy"), group("h", 1, "/bin/sleep")]);
    let (before, all, answer) = c.submit(t, job);
    assert_eq!(accepted(&answer), (2, JobChange::Updated));
    assert_eq!(writes(&before), 1);
    let record = c.store.job("web").unwrap();
    assert_eq!(record.groups.len(), 2);
    let deployment = record.groups[0].active_deployment();
    assert!(deployment.is_some(), "the update's deployment is durable");
    assert_eq!(deployment.unwrap().policy.max_parallel, 1);
    let stopped: Vec<ExecutorId> = m_sends(&all)
        .into_iter()
        .filter_map(|(_, m)| match m {
            Message::StopExecutorOnWorker { executor, .. } => Some(executor),
            _ => None,
        })
        .collect();
    assert_eq!(stopped.len(), 1, "max_parallel 1: one old executor at a time: {all:?}");
    assert!(old.contains(&stopped[0]));
    let placed: Vec<ExecutorId> = launches(&all).into_iter().map(|(_, x)| x).collect();
    assert!(placed.iter().any(|x| x.as_str().starts_with("web/h#0")), "{placed:?}");
    let status = c.status(t, "web");
    assert_eq!(status.version, Some(2));
    assert!(status.groups[0].rolling);
    assert_eq!(status.groups[0].slots.iter().filter(|s| s.phase == SlotPhase::Stopping).count(), 1);
}

#[test]
fn refusals_name_the_group_the_key_or_the_subscriber_and_change_nothing() {
    let mut c = Cluster::new();
    let t = Millis(1_000);
    // A framework a subscriber drives.
    let _ = c.m.handle(t, master::Event::Connected { conn: ConnId(1) });
    let _ = c
        .m
        .handle(t, master::Event::Message { conn: ConnId(1), msg: hello(Role::Subscriber, "s") });
    let sub = Message::Subscribe(Subscribe {
        framework: Some(FrameworkId::new("etl")),
        name: "etl".into(),
        instance: InstanceId(1),
        attempt: 0,
        failover_timeout: Millis(60_000),
        tenant: None,
    });
    let out = c.m.handle(t, master::Event::Message { conn: ConnId(1), msg: sub });
    let _ = c.store.run(&mut c.m, t, out);
    let reason = refused(&c.submit(t, submission("etl", vec![group("g", 1, "/bin/sleep")])).2);
    assert_eq!(
        reason,
        "job etl is driven by a subscriber (regent run/submit); it cannot be changed through the API"
    );
    let reason =
        refused(&c.ask(t, Message::DeleteJob { request: 7, job: FrameworkId::new("etl") }).2);
    assert!(reason.starts_with("job etl is driven by a subscriber"), "{reason}");
    // An invalid group: named, with the job file's key.
    let reason = refused(&c.submit(t, submission("web", vec![group("g", 0, "/bin/sleep")])).2);
    assert!(reason.starts_with("group \"g\": ") && reason.contains("count"), "{reason}");
    assert!(c.store.job("web").is_none());
    // A group of the live job the submission leaves out.
    let two = vec![group("g", 1, "/bin/sleep"), group("h", 1, "/bin/sleep")];
    assert_eq!(accepted(&c.submit(t, submission("web", two)).2), (1, JobChange::Created));
    let (_, all, answer) = c.submit(t, submission("web", vec![group("g", 1, "/bin/sleep")]));
    assert!(
        refused(&answer).starts_with("job web has group \"h\", which the submission does not name")
    );
    assert_eq!(writes(&all), 0);
    // A count changed by an update.
    let more = vec![group("g", 3, "/bin/sleep"), group("h", 1, "/bin/sleep")];
    let reason = refused(&c.submit(t, submission("web", more)).2);
    assert!(
        reason.starts_with("an update does not change a group's count (group \"g\": 1 -> 3)"),
        "{reason}"
    );
    // A key past its limit.
    let long = keyed(submission("web", vec![group("g", 1, "/bin/sleep")]), &"k".repeat(129));
    assert!(refused(&c.submit(t, long).2).contains("MAX_IDEMPOTENCY_KEY_BYTES"));
    // An unknown job.
    let reason =
        refused(&c.ask(t, Message::DeleteJob { request: 7, job: FrameworkId::new("nope") }).2);
    assert_eq!(reason, "no job nope");
    let reason = refused(
        &c.ask(t, Message::JobsRequest { request: 7, job: Some(FrameworkId::new("nope")) }).2,
    );
    assert_eq!(reason, "no job nope");
    // A subscriber cannot take a job over.
    let _ = c.m.handle(t, master::Event::Connected { conn: ConnId(2) });
    let _ = c
        .m
        .handle(t, master::Event::Message { conn: ConnId(2), msg: hello(Role::Subscriber, "s2") });
    let sub = Message::Subscribe(Subscribe {
        framework: Some(FrameworkId::new("web")),
        name: "web".into(),
        instance: InstanceId(2),
        attempt: 0,
        failover_timeout: Millis(60_000),
        tenant: None,
    });
    let out = c.m.handle(t, master::Event::Message { conn: ConnId(2), msg: sub });
    let refusal = m_sends(&out).into_iter().find_map(|(_, m)| match m {
        Message::SubscribeRefused { reason, .. } => Some(reason),
        _ => None,
    });
    assert!(refusal.expect("refused").contains("a job the leader owns"));
}

#[test]
fn a_deleted_job_is_torn_down_once_durable_and_its_executors_killed() {
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let (_, all, _) = c.submit(t, submission("web", vec![group("g", 2, "/bin/sleep")]));
    c.run_all(t, &all);
    let (before, all, answer) =
        c.ask(t, Message::DeleteJob { request: 9, job: FrameworkId::new("web") });
    assert!(answers(&before).is_empty(), "accepted before durable: {before:?}");
    assert!(matches!(answer, Message::RequestAccepted { request: 9, .. }), "{answer:?}");
    assert!(c.store.job("web").is_none());
    assert_eq!(c.store.history_outcomes(), vec!["web TornDown".to_string()]);
    let killed = m_sends(&all)
        .into_iter()
        .filter(|(_, m)| matches!(m, Message::KillExecutorOnWorker { .. }))
        .count();
    assert_eq!(killed, 2, "{all:?}");
    let all_jobs = c.ask(t, Message::JobsRequest { request: 1, job: None }).2;
    assert!(
        matches!(all_jobs, Message::JobsReply { ref jobs, .. } if jobs.is_empty()),
        "{all_jobs:?}"
    );
}

/// A job's id cannot be taken again while the end of the framework that
/// had it is being written: the delete of its record waits for its history
/// record, and a new job of that id in between made the delete be skipped,
/// so the end was acknowledged with the ended framework's record still in
/// the store. The preemption soak's seed 13253 (docs/design.md#simulator-seeds): a subscriber's
/// `Teardown`, then the API client's submission under its id.
#[test]
fn an_id_whose_end_is_being_written_is_refused_to_a_new_job_until_its_record_is_deleted() {
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let (_, all, _) = c.submit(t, submission("web", vec![group("g", 1, "/bin/sleep")]));
    c.run_all(t, &all);
    let query = QueryId(900);
    let delete = Message::DeleteJob { request: 9, job: FrameworkId::new("web") };
    let ending = c.m.handle(
        t,
        master::Event::Command { query, msg: delete, principal: Box::new(Principal::Root) },
    );
    assert!(answers(&ending).is_empty(), "accepted before durable: {ending:?}");
    // Its history record is not durable yet: a submission of the id is
    // refused, with nothing written.
    let (before, _, answer) = c.submit(t, submission("web", vec![group("h", 1, "/bin/true")]));
    let reason = refused(&answer);
    assert!(reason.starts_with("job web is still ending"), "{reason}");
    assert_eq!(writes(&before), 0, "{before:?}");
    // The end lands: the history record, then the record's delete, then
    // the acknowledgement.
    let all = c.store.run(&mut c.m, t, ending);
    let acked: Vec<_> = answers(&all).into_iter().filter(|(q, _)| *q == query).collect();
    assert!(
        matches!(acked.as_slice(), [(_, Message::RequestAccepted { request: 9, .. })]),
        "{acked:?}"
    );
    assert!(c.store.job("web").is_none());
    assert_eq!(c.store.history_outcomes(), vec!["web TornDown".to_string()]);
    // Once ended, the id is free: a new job starts over at version 1.
    let answer = c.submit(t, submission("web", vec![group("h", 1, "/bin/true")])).2;
    assert_eq!(accepted(&answer), (1, JobChange::Created));
    assert!(c.store.job("web").is_some());
}

#[test]
fn a_job_its_version_and_keys_survive_a_failover_and_it_never_times_out() {
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let job = keyed(submission("web", vec![group("g", 1, "/bin/sleep")]), "k1");
    assert_eq!(accepted(&c.submit(t, job.clone()).2), (1, JobChange::Created));
    let changed = keyed(submission("web", vec![group("g", 1, "/bin/true")]), "k2");
    assert_eq!(accepted(&c.submit(t, changed).2), (2, JobChange::Updated));
    // A new leader recovers it from its record.
    let m = c.store.elect("b", Millis(0), Epoch(1), WALL + 3_600_000);
    c.m = m;
    for (conn, w) in [(100, "w0"), (101, "w1")] {
        c.add_worker(Millis(0), w, conn);
    }
    // Far past any failover timeout (the recovery over, its clock
    // started): the job has no subscriber to wait for.
    let mut now = Millis(0);
    for _ in 0..100 {
        now = now + Millis(24 * 3_600_000);
        let out = c.m.handle(now, master::Event::Tick);
        let _ = c.store.run(&mut c.m, now, out);
    }
    assert!(c.store.job("web").is_some(), "the job was removed while it had no subscriber");
    assert!(c.store.history_outcomes().is_empty());
    let now = now + Millis(10);
    let status = c.status(now, "web");
    assert_eq!(status.version, Some(2));
    assert_eq!(status.state, regent_core::states::FrameworkState::Active);
    assert_eq!(accepted(&c.submit(now, job).2), (1, JobChange::Replayed));
    let reason = refused(
        &c.submit(now, expecting(submission("web", vec![group("g", 1, "/bin/true")]), 1)).2,
    );
    assert_eq!(reason, "job web is at version 2, not 1; nothing was changed");
}

#[test]
fn job_status_tells_every_slot_and_why_a_waiting_one_waits() {
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let mut big = group("big", 1, "/bin/sleep");
    big.cores = 64;
    let (_, all, _) = c.submit(t, submission("web", vec![group("g", 2, "/bin/sleep"), big]));
    c.run_all(t, &all);
    let status = c.status(t, "web");
    assert_eq!(status.job, FrameworkId::new("web"));
    assert_eq!(status.version, Some(1));
    let g = &status.groups[0];
    assert_eq!((g.desired, g.placed, g.running, g.done), (2, 2, 2, 0));
    assert!(g.slots.iter().all(|s| s.phase == SlotPhase::Running && s.executor.is_some()));
    assert!(g.slots.iter().all(|s| s.worker.is_some() && s.reason.is_none()));
    let big = &status.groups[1];
    assert_eq!((big.desired, big.placed, big.running), (1, 0, 0));
    assert_eq!(big.slots[0].phase, SlotPhase::Waiting);
    assert_eq!(big.slots[0].executor, None);
    let reason = big.slots[0].reason.clone().expect("a waiting slot says why");
    assert!(reason.contains("needs 64 cores"), "{reason}");
    // The same on a connection (the CLI's way).
    let op = ConnId(9);
    let _ = c.m.handle(t, master::Event::Connected { conn: op });
    let _ = c.m.handle(t, master::Event::Message { conn: op, msg: hello(Role::Client, "op") });
    let msg = Message::JobsRequest { request: 12, job: None };
    let out = c.m.handle(t, master::Event::Message { conn: op, msg });
    match &m_sends(&out)[..] {
        [(conn, Message::JobsReply { request: 12, jobs, .. })] => {
            assert_eq!(*conn, op);
            assert_eq!(jobs, &vec![status]);
        }
        other => panic!("one JobsReply on the connection: {other:?}"),
    }
}

#[test]
fn operator_commands_answer_a_local_asker_once_durable() {
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let (_, all, _) = c.submit(t, submission("web", vec![group("g", 2, "/bin/sleep")]));
    c.run_all(t, &all);
    // Cordon: written, then answered.
    let (before, _, answer) =
        c.ask(t, Message::CordonWorker { request: 4, worker: WorkerId::new("w1") });
    assert!(answers(&before).is_empty(), "{before:?}");
    assert!(matches!(answer, Message::RequestAccepted { request: 4, .. }), "{answer:?}");
    let w1 = c.store.records.get(&RecordKey::Worker(WorkerId::new("w1")));
    assert!(matches!(w1, Some(Record::Worker(w)) if w.maintenance == Some(Maintenance::Cordoned)));
    let (_, _, answer) =
        c.ask(t, Message::UncordonWorker { request: 5, worker: WorkerId::new("w1") });
    assert!(matches!(answer, Message::RequestAccepted { request: 5, .. }));
    let answer = c
        .ask(
            t,
            Message::DrainWorker { request: 6, worker: WorkerId::new("w9"), deadline: Millis(1) },
        )
        .2;
    assert_eq!(refused(&answer), "no worker w9");
    // Kill one executor with its slot refilled.
    let status = c.status(t, "web");
    let x = status.groups[0].slots[0].executor.clone().expect("placed");
    let (before, all, answer) =
        c.ask(t, Message::OperatorKillExecutor { request: 8, executor: x.clone(), refill: true });
    assert!(answers(&before).is_empty());
    assert!(matches!(answer, Message::RequestAccepted { request: 8, .. }));
    assert!(m_sends(&all).iter().any(
        |(_, m)| matches!(m, Message::KillExecutorOnWorker { executor, .. } if *executor == x)
    ));
    // A plan, at once.
    let answer = c
        .ask(
            t,
            Message::PlanRequest {
                request: 2,
                groups: vec![group("p", 1, "/bin/sleep")],
                tenant: None,
            },
        )
        .2;
    assert!(
        matches!(answer, Message::PlanReply { request: 2, ref groups, .. } if groups[0].unplaced == 0),
        "{answer:?}"
    );
    // Remove a live worker: refused as on a connection.
    let answer = c.ask(t, Message::RemoveWorker { request: 3, worker: WorkerId::new("w0") }).2;
    assert!(refused(&answer).contains("only UNKNOWN or DEAD workers can be removed"));
    // Kill the framework as an operator: accepted once durable, KILLED.
    let (before, _, answer) =
        c.ask(t, Message::KillFramework { request: 10, framework: FrameworkId::new("web") });
    assert!(answers(&before).is_empty());
    assert!(matches!(answer, Message::RequestAccepted { request: 10, .. }));
    assert_eq!(c.store.history_outcomes(), vec!["web Killed".to_string()]);
    // Not a command: refused, never unanswered.
    let answer = c.ask(t, Message::StateRequest).2;
    assert!(refused(&answer).contains("not a command"));
}

#[test]
fn a_local_asker_waiting_for_a_write_is_answered_when_the_leadership_ends() {
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let job = keyed(submission("web", vec![group("g", 1, "/bin/sleep")]), "k1");
    let out = c.m.handle(
        t,
        master::Event::Command {
            query: QueryId(50),
            msg: Message::SubmitJob { request: 7, job: job.clone() },
            principal: Box::new(Principal::Root),
        },
    );
    assert!(answers(&out).is_empty(), "{out:?}");
    let cordon = Message::CordonWorker { request: 8, worker: WorkerId::new("w0") };
    let out = c.m.handle(
        t,
        master::Event::Command {
            query: QueryId(51),
            msg: cordon,
            principal: Box::new(Principal::Root),
        },
    );
    assert!(answers(&out).is_empty(), "{out:?}");
    // The writes never confirmed: the leadership ends.
    let out = c.m.handle(t, master::Event::Revoked);
    let got = answers(&out);
    assert_eq!(got.len(), 2, "each waiting asker answered once: {out:?}");
    for (q, msg) in got {
        assert!([QueryId(50), QueryId(51)].contains(&q));
        assert!(matches!(msg, Message::NotLeader { .. }), "{msg:?}");
    }
}

#[test]
fn a_slot_in_restart_backoff_says_until_when_and_a_failed_one_why() {
    use regent_core::policy::{RestartMode, RestartPolicy};
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let mut g = group("svc", 1, "/bin/false");
    g.policy.restart = RestartPolicy {
        mode: RestartMode::Batch,
        attempts: Some(1),
        delay_ms: 30_000,
        max_delay_ms: 0,
        healthy_after_ms: 0,
    };
    let (_, all, _) = c.submit(t, submission("web", vec![g]));
    let (conn, x) = launches(&all).pop().expect("launched");
    let failed = |conn: ConnId, x: &ExecutorId| Message::ExecutorStatus {
        incarnation: Incarnation(conn.0),
        report: ExecutorReport {
            health: None,
            ran_ms: Some(5),
            resources: Default::default(),
            ports: Default::default(),
            id: x.clone(),
            framework: FrameworkId::new("web"),
            cores: 1,
            memory_mb: 1,
            state: ExecutorState::Exited { code: 3 },
        },
    };
    let out = c.m.handle(t, master::Event::Message { conn, msg: failed(conn, &x) });
    let _ = c.store.run(&mut c.m, t, out);
    let slot = c.status(t, "web").groups[0].slots[0].clone();
    assert_eq!(slot.phase, SlotPhase::Backoff, "{slot:?}");
    let reason = slot.reason.expect("a backoff says until when");
    assert!(reason.starts_with("restart backoff: a new executor in 30000 ms"), "{reason}");
    // Its second failure passes the attempts: the slot fails, and says why.
    // (The workers keep beating meanwhile.)
    let mut all = Vec::new();
    for s in 1..=31 {
        let t = Millis(1_000 * s);
        for w in [100, 101] {
            let msg = Message::WorkerHeartbeat { incarnation: Incarnation(w) };
            let out = c.m.handle(t, master::Event::Message { conn: ConnId(w), msg });
            all.extend(c.store.run(&mut c.m, t, out));
        }
        let out = c.m.handle(t, master::Event::Tick);
        all.extend(c.store.run(&mut c.m, t, out));
    }
    let t = Millis(31_000);
    let (conn, x2) = launches(&all).pop().expect("relaunched after the backoff");
    let out = c.m.handle(t, master::Event::Message { conn, msg: failed(conn, &x2) });
    let _ = c.store.run(&mut c.m, t, out);
    let status = c.status(t, "web");
    let slot = &status.groups[0].slots[0];
    assert_eq!(slot.phase, SlotPhase::Failed, "{slot:?}");
    assert!(slot.reason.as_deref().is_some_and(|r| r.contains('3')), "{slot:?}");
    assert_eq!(status.groups[0].done, 1);
    assert_eq!(status.state, regent_core::states::FrameworkState::Failed);
}

#[test]
fn a_running_slot_shows_the_health_its_worker_last_reported_as_of_the_answer() {
    use regent_core::protocol::{HealthReport, HealthStatus};
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let (_, all, _) = c.submit(t, submission("web", vec![group("g", 1, "/bin/sleep")]));
    c.run_all(t, &all);
    assert_eq!(c.status(t, "web").groups[0].slots[0].health, None, "nothing reported yet");
    // Its worker says it has been failing for 4 s; the detail is cut to
    // 256 bytes on receipt (peer input).
    let (conn, x) = launches(&all)[0].clone();
    let Message::ExecutorStatus { incarnation, mut report } = running(conn.0, &x) else {
        unreachable!()
    };
    report.health = Some(HealthReport {
        status: HealthStatus::Failing,
        for_ms: 4_000,
        detail: format!("http: {}", "x".repeat(1_000)),
    });
    let msg = Message::ExecutorStatus { incarnation, report };
    let out = c.m.handle(Millis(10_000), master::Event::Message { conn, msg });
    let _ = c.store.run(&mut c.m, Millis(10_000), out);
    // Shown as of the answer: 2 s later it has been failing for 6 s.
    let health = c.status(Millis(12_000), "web").groups[0].slots[0].health.clone().unwrap();
    assert_eq!((health.status, health.for_ms), (HealthStatus::Failing, 6_000));
    assert_eq!(health.detail.len(), regent_core::protocol::MAX_HEALTH_DETAIL);
    // A new leader has it as soon as the worker registers with it: the
    // registration carries it, passing for 9 s by the worker's clock.
    c.m = c.store.elect("b", Millis(0), Epoch(1), WALL + 60_000);
    let worker = if conn.0 == 100 { "w0" } else { "w1" };
    let Message::ExecutorStatus { mut report, .. } = running(conn.0, &x) else { unreachable!() };
    report.health =
        Some(HealthReport { status: HealthStatus::Passing, for_ms: 9_000, detail: String::new() });
    let Message::RegisterWorker(mut reg) = register(worker, conn.0, 8) else { unreachable!() };
    reg.executors = vec![report];
    let _ = connect_worker(&mut c.m, Millis(0), conn.0, worker);
    let out =
        c.m.handle(Millis(0), master::Event::Message { conn, msg: Message::RegisterWorker(reg) });
    let _ = c.store.run(&mut c.m, Millis(0), out);
    let health = c.status(Millis(1_000), "web").groups[0].slots[0].health.clone();
    assert_eq!(health.map(|h| (h.status, h.for_ms)), Some((HealthStatus::Passing, 10_000)));
}

/// A singleton job deleted while its executor runs on a worker cut off
/// from every master, then submitted again right after a failover: the
/// old leader's hold on the id was in its memory only, and the new leader
/// never heard of the old executor (its record is gone). Placed at once,
/// the slot would run twice until that worker stops the old one; the new
/// leader holds it `stop_after` + kill grace + margin (37 s for 30 s) from
/// its takeover, as it holds every singleton slot its store names
/// (docs/design.md#issue-45, `cut_off::Holds`).
#[test]
fn a_singleton_job_submitted_again_after_a_failover_waits_from_the_takeover() {
    let placed_at = |rule: Option<Disconnect>| -> u64 {
        let mut c = Cluster::new();
        let t = Millis(1_000);
        let mut g = group("single", 1, "/bin/sleep");
        g.launch.disconnect = rule;
        let job = submission("lead", vec![g]);
        let (_, all, answer) = c.submit(t, job.clone());
        assert_eq!(accepted(&answer), (1, JobChange::Created));
        let first = launches(&all);
        assert_eq!(first.len(), 1, "{all:?}");
        c.run_all(t, &all);
        // Its worker is cut off from here on: the kill never reaches it.
        let cut_off = first[0].0;
        let delete = Message::DeleteJob { request: 9, job: FrameworkId::new("lead") };
        assert!(matches!(c.ask(Millis(2_000), delete).2, Message::RequestAccepted { .. }));
        assert!(c.store.job("lead").is_none());
        // The leader crashes; "b" takes over at 3 s (its own clock) and
        // hears only from the other worker.
        let took_over = Millis(3_000);
        c.m = c.store.elect("b", took_over, Epoch(2), WALL + 3_000);
        for (conn, w) in [(100, "w0"), (101, "w1")] {
            if ConnId(conn) != cut_off {
                c.add_worker(took_over, w, conn);
            }
        }
        let t = took_over + Millis(500);
        let (_, all, answer) = c.submit(t, job);
        assert_eq!(accepted(&answer), (1, JobChange::Created));
        if !launches(&all).is_empty() {
            return t.0;
        }
        if rule.is_some() {
            let slot = &c.status(t, "lead").groups[0].slots[0];
            assert!(
                matches!(slot.reasons[..], [WaitReason::SingletonHold { in_ms: 36_500, .. }]),
                "held until 37 s after the takeover: {slot:?}"
            );
        }
        let mut now = t;
        while now < Millis(120_000) {
            now = now + Millis(500);
            let other = if cut_off == ConnId(100) { 101 } else { 100 };
            let hb = Message::WorkerHeartbeat { incarnation: Incarnation(other) };
            let out = c.m.handle(now, master::Event::Message { conn: ConnId(other), msg: hb });
            let mut all = c.store.run(&mut c.m, now, out);
            let out = c.m.handle(now, master::Event::Tick);
            all.extend(c.store.run(&mut c.m, now, out));
            if !launches(&all).is_empty() {
                return now.0;
            }
        }
        panic!("never placed again");
    };
    // Without the rule, placed once the new leader's recovery is over.
    let plain = placed_at(None);
    assert!(plain <= 15_000, "{plain}");
    // With stop_after 30 s: not before 30 + 3 + 3 + 1 = 37 s after the
    // takeover at 3 s.
    let single = placed_at(Some(Disconnect::after_ms(30_000)));
    assert!((40_000..=41_000).contains(&single), "{single}");
}

/// A singleton slot a new leader holds after its takeover (its executor
/// may run on, cut off, on a worker it never hears from) stays held
/// `stop_after` + kill grace + margin from the takeover when a worker
/// registers with the end of an older executor of that slot: the leader
/// adopts that end and counts it under the group's restart policy, but
/// its short backoff must not replace the hold. It did: the slot was
/// placed once the leader's recovery was over (10 s after the takeover)
/// and ran twice until the cut-off worker stopped its executor
/// (`--api-jobs --services --singletons`:
/// sim seed 83929, docs/design.md#simulator-seeds).
#[test]
fn a_singleton_held_after_a_failover_is_not_placed_early_for_an_older_executors_end() {
    let mut c = Cluster::new();
    let t = Millis(1_000);
    let mut g = group("single", 1, "/bin/sleep");
    g.launch.disconnect = Some(Disconnect::after_ms(30_000));
    g.policy.restart = regent_core::policy::RestartPolicy {
        attempts: Some(5),
        delay_ms: 2_000,
        max_delay_ms: 4_000,
        ..Default::default()
    };
    let (_, all, answer) = c.submit(t, submission("lead", vec![g]));
    assert_eq!(accepted(&answer), (1, JobChange::Created));
    let first = launches(&all);
    assert_eq!(first.len(), 1, "{all:?}");
    c.run_all(t, &all);
    let (silent, x1) = first[0].clone();
    let other = ConnId(if silent == ConnId(100) { 101 } else { 100 });
    // Its worker falls silent: the leader writes it off, and places the
    // slot again, on the other worker, once the first one must have
    // stopped it.
    let mut now = t;
    loop {
        now = now + Millis(500);
        assert!(now < Millis(120_000), "never placed again");
        let hb = Message::WorkerHeartbeat { incarnation: Incarnation(other.0) };
        let out = c.m.handle(now, master::Event::Message { conn: other, msg: hb });
        let mut all = c.store.run(&mut c.m, now, out);
        let out = c.m.handle(now, master::Event::Tick);
        all.extend(c.store.run(&mut c.m, now, out));
        if let Some((conn, _)) = launches(&all).first() {
            assert_eq!(*conn, other, "{all:?}");
            c.run_all(now, &all);
            break;
        }
    }
    // The leader crashes. "b" takes over and never hears from the worker
    // that runs the slot's executor now (cut off from every master, it
    // stops it 30 s after its last word); the first worker registers
    // again, with the failed end of the slot's first executor.
    let took_over = now + Millis(1_000);
    c.m = c.store.elect("b", took_over, Epoch(2), WALL + took_over.0);
    let worker = if silent == ConnId(100) { "w0" } else { "w1" };
    let _ = connect_worker(&mut c.m, took_over, silent.0, worker);
    let Message::ExecutorStatus { mut report, .. } = running(silent.0, &x1) else { unreachable!() };
    report.state = ExecutorState::Failed { reason: "crashed".into() };
    let Message::RegisterWorker(mut reg) = register(worker, silent.0, 8) else { unreachable!() };
    reg.executors = vec![report];
    let msg = Message::RegisterWorker(reg);
    let out = c.m.handle(took_over, master::Event::Message { conn: silent, msg });
    let _ = c.store.run(&mut c.m, took_over, out);
    let mut now = took_over;
    let placed = loop {
        now = now + Millis(500);
        assert!(now < took_over + Millis(60_000), "never placed again");
        let hb = Message::WorkerHeartbeat { incarnation: Incarnation(silent.0) };
        let out = c.m.handle(now, master::Event::Message { conn: silent, msg: hb });
        let mut all = c.store.run(&mut c.m, now, out);
        let out = c.m.handle(now, master::Event::Tick);
        all.extend(c.store.run(&mut c.m, now, out));
        if !launches(&all).is_empty() {
            break now;
        }
    };
    // Not before 30 + 3 + 3 + 1 = 37 s after the takeover.
    let after = placed.since(took_over).0;
    assert!((37_000..=37_500).contains(&after), "placed {after} ms after the takeover");
}

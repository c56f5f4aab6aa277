//! Group priorities (docs/tenants.md, docs/design.md#issue-44) as exact
//! protocol actions of the master machine: waiting slots of a higher
//! priority are placed first, and may preempt running executors of a lower
//! priority (with or without tenants, never a tenant at or below its
//! guarantee); a slot that waits behind higher ones says how many; the
//! priority is durable.

mod common;

use common::*;
use regent_core::master::{self, Master};
use regent_core::protocol::tenants::{Dims, Tenant};
use regent_core::protocol::{ExecutorState, Message, Role};
use regent_core::store::{Record, RecordKey};
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Millis};
use std::collections::BTreeMap;

/// The operator's connection.
const OP: ConnId = ConnId(9);

/// The one worker's connection (and incarnation).
const W: ConnId = ConnId(100);

/// A leader elected over `store`'s records, with an operator on [`OP`].
fn leader(store: &mut Store, name: &str) -> Master {
    let mut m = store.elect(name, Millis(0), Epoch(1), 1);
    let _ = m.handle(Millis(0), master::Event::Connected { conn: OP });
    let _ =
        m.handle(Millis(0), master::Event::Message { conn: OP, msg: hello(Role::Client, "op") });
    m
}

/// A job `id` of `tenant` with one group `g` of `count` one-core slots of
/// `priority`, as submitted.
fn job(
    id: &str,
    tenant: Option<&str>,
    count: u32,
    priority: u8,
) -> regent_core::api::JobSubmission {
    let mut g = regent_core::job::JobGroup::new("g", vec!["sleep".into(), "9".into()]);
    g.count = count;
    g.cores = 1;
    g.memory_mb = 64;
    g.policy.priority = priority;
    regent_core::api::JobSubmission {
        job: FrameworkId::new(id),
        name: id.into(),
        groups: vec![g.to_declare()],
        key: None,
        expect_version: None,
        max_parallel: 1,
        tenant: tenant.map(str::to_owned),
    }
}

/// Submits `job` at `now` on the operator's connection; what was sent.
fn submit(
    store: &mut Store,
    m: &mut Master,
    now: u64,
    job: regent_core::api::JobSubmission,
) -> Vec<(ConnId, Message)> {
    let msg = Message::SubmitJob { request: 1, job };
    let out = m.handle(Millis(now), master::Event::Message { conn: OP, msg });
    let sends = store.settle(m, Millis(now), out);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::JobAccepted { .. })), "{sends:?}");
    sends
}

/// Registers the worker `w1` of `cores` cores on [`W`].
fn register(store: &mut Store, m: &mut Master, cores: u32) -> Vec<(ConnId, Message)> {
    let _ = m.handle(Millis(1), master::Event::Connected { conn: W });
    let _ = m.handle(Millis(1), master::Event::Message { conn: W, msg: hello(Role::Worker, "w1") });
    let msg = Message::RegisterWorker(regent_core::protocol::RegisterWorker {
        worker: "w1".into(),
        incarnation: regent_core::Incarnation(W.0),
        cores,
        memory_mb: 64 * 1024,
        executors: vec![],
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
        ports: Default::default(),
        host: None,
        resources: vec![],
        users: vec![],
    });
    let out = m.handle(Millis(1), master::Event::Message { conn: W, msg });
    store.settle(m, Millis(1), out)
}

fn set_tenant(store: &mut Store, m: &mut Master, tenant: Tenant) {
    let msg = Message::SetTenant { request: 3, tenant };
    let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
    let sends = store.settle(m, Millis(1), out);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::RequestAccepted { .. })), "{sends:?}");
}

/// How many executors of each framework were launched among `sends`.
fn launched(sends: &[(ConnId, Message)]) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for (_, m) in sends {
        if let Message::LaunchExecutor { framework, .. } = m {
            *n.entry(framework.as_str().to_owned()).or_default() += 1;
        }
    }
    n
}

#[test]
fn a_full_cluster_places_the_higher_priority_first_whatever_came_first() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    // Submitted first (and first in framework id order), but lower.
    let _ = submit(&mut store, &mut m, 1, job("a-low", None, 4, 20));
    let _ = submit(&mut store, &mut m, 1, job("b-high", None, 4, 80));
    let _ = submit(&mut store, &mut m, 1, job("c-mid", None, 4, 50));
    let sends = register(&mut store, &mut m, 6);
    assert_eq!(
        launched(&sends),
        BTreeMap::from([("b-high".to_string(), 4), ("c-mid".to_string(), 2)]),
        "priority 80 first, then 50; 20 waits"
    );
}

#[test]
fn priority_comes_before_weighted_drf_between_tenants() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    set_tenant(&mut store, &mut m, Tenant { weight: 10, ..Tenant::new("rich") });
    set_tenant(&mut store, &mut m, Tenant::new("poor"));
    let _ = submit(&mut store, &mut m, 1, job("a-rich", Some("rich"), 8, 50));
    let _ = submit(&mut store, &mut m, 1, job("b-poor", Some("poor"), 3, 90));
    let sends = register(&mut store, &mut m, 4);
    assert_eq!(
        launched(&sends),
        BTreeMap::from([("a-rich".to_string(), 1), ("b-poor".to_string(), 3)]),
        "the priority-90 slots first, whatever the weights"
    );
}

#[test]
fn a_priority_is_durable_and_a_new_leader_places_by_it() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let _ = submit(&mut store, &mut m, 1, job("a-low", None, 2, 10));
    let _ = submit(&mut store, &mut m, 1, job("b-high", None, 2, 100));
    match store.records.get(&RecordKey::Framework(FrameworkId::new("b-high"))) {
        Some(Record::Framework(f)) => assert_eq!(f.groups[0].spec.policy.priority, 100),
        other => panic!("the framework's record: {other:?}"),
    }
    // The record's bytes round trip through the store format.
    for record in store.records.values() {
        let bytes = regent_core::store::format::encode(record).unwrap();
        assert_eq!(&regent_core::store::format::decode(&bytes).unwrap(), record);
    }
    let mut b = leader(&mut store, "b");
    let statuses = b.job_statuses(Millis(1));
    let priorities: Vec<(String, u8)> =
        statuses.iter().map(|j| (j.job.as_str().to_owned(), j.groups[0].priority)).collect();
    assert_eq!(priorities, vec![("a-low".to_string(), 10), ("b-high".to_string(), 100)]);
    let sends = register(&mut store, &mut b, 2);
    assert_eq!(launched(&sends), BTreeMap::from([("b-high".to_string(), 2)]));
}

#[test]
fn a_priority_out_of_range_is_refused_naming_the_group_and_the_value() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let msg = Message::SubmitJob { request: 1, job: job("web", None, 1, 101) };
    let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
    let sends = store.settle(&mut m, Millis(1), out);
    let reason = sends
        .iter()
        .find_map(|(_, m)| match m {
            Message::RequestRefused { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a refusal: {sends:?}"));
    assert!(reason.contains("group \"g\"") && reason.contains("priority is 101"), "{reason}");
    assert!(store.records.keys().all(|k| !matches!(k, RecordKey::Framework(_))), "nothing written");
}

#[test]
fn changing_a_groups_priority_is_a_change_of_the_group() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let _ = submit(&mut store, &mut m, 1, job("web", None, 1, 50));
    let sends = submit(&mut store, &mut m, 1, job("web", None, 1, 70));
    let change = sends.iter().find_map(|(_, m)| match m {
        Message::JobAccepted { change, .. } => Some(*change),
        _ => None,
    });
    assert_eq!(change, Some(regent_core::api::JobChange::Updated));
    assert_eq!(m.job_statuses(Millis(1))[0].groups[0].priority, 70);
}

/// A master, its store and the one worker `w1` that does what it is told:
/// starts what is launched (each a millisecond after the one before, so
/// ages differ), ends what is killed.
struct Cluster {
    store: Store,
    m: Master,
    /// Live executors and their frameworks.
    live: BTreeMap<ExecutorId, FrameworkId>,
    /// Every executor the worker was told to stop, in order.
    stopped: Vec<ExecutorId>,
    /// Messages not answered yet.
    pending: Vec<(ConnId, Message)>,
    now: u64,
}

impl Cluster {
    fn new(cores: u32) -> Cluster {
        let mut store = Store::default();
        let mut m = leader(&mut store, "a");
        let pending = register(&mut store, &mut m, cores);
        Cluster { store, m, live: BTreeMap::new(), stopped: Vec::new(), pending, now: 1_000 }
    }

    fn submit(&mut self, job: regent_core::api::JobSubmission) {
        let sends = submit(&mut self.store, &mut self.m, self.now, job);
        self.pending.extend(sends);
    }

    fn set_tenant(&mut self, tenant: Tenant) {
        set_tenant(&mut self.store, &mut self.m, tenant);
    }

    fn report(&mut self, id: &ExecutorId, framework: &FrameworkId, state: ExecutorState) {
        let msg = Message::ExecutorStatus {
            incarnation: regent_core::Incarnation(W.0),
            report: regent_core::protocol::ExecutorReport {
                health: None,
                id: id.clone(),
                framework: framework.clone(),
                cores: 1,
                memory_mb: 64,
                state,
                ports: vec![],
                resources: Default::default(),
                ran_ms: None,
            },
        };
        self.now += 1;
        let out = self.m.handle(Millis(self.now), master::Event::Message { conn: W, msg });
        let sends = self.store.settle(&mut self.m, Millis(self.now), out);
        self.pending.extend(sends);
    }

    /// `steps` rounds of 600 ms: the worker answers, heartbeats, a tick.
    fn run(&mut self, steps: u32) {
        for _ in 0..steps {
            for (_, msg) in std::mem::take(&mut self.pending) {
                match msg {
                    Message::LaunchExecutor { executor, framework, .. } => {
                        self.live.insert(executor.clone(), framework.clone());
                        self.report(&executor, &framework, ExecutorState::Running);
                    }
                    Message::KillExecutorOnWorker { executor, .. }
                    | Message::StopExecutorOnWorker { executor, .. } => {
                        self.stopped.push(executor.clone());
                        let Some(framework) = self.live.remove(&executor) else { continue };
                        self.report(&executor, &framework, ExecutorState::Killed);
                    }
                    _ => {}
                }
            }
            self.now += 600;
            let beat = Message::WorkerHeartbeat { incarnation: regent_core::Incarnation(W.0) };
            let now = Millis(self.now);
            let out = self.m.handle(now, master::Event::Message { conn: W, msg: beat });
            let mut sends = self.store.settle(&mut self.m, now, out);
            let out = self.m.handle(Millis(self.now + 1), master::Event::Tick);
            sends.extend(self.store.settle(&mut self.m, Millis(self.now + 1), out));
            self.pending.extend(sends);
        }
    }

    /// Live executors by framework.
    fn running(&self) -> BTreeMap<String, usize> {
        self.live.values().fold(BTreeMap::new(), |mut n, f| {
            *n.entry(f.as_str().to_owned()).or_default() += 1;
            n
        })
    }

    /// The executors of `framework` that run, in the order they started.
    fn of(&self, framework: &str) -> Vec<ExecutorId> {
        let mut v: Vec<ExecutorId> = self
            .live
            .iter()
            .filter(|(_, f)| f.as_str() == framework)
            .map(|(e, _)| e.clone())
            .collect();
        // Ids end `.<launch number>`: launch order is start order here.
        v.sort_by_key(|e| e.as_str().rsplit('.').next().and_then(|n| n.parse::<u64>().ok()));
        v
    }

    /// The worker reports every executor of `framework` exited 0.
    fn finish(&mut self, framework: &str) {
        for id in self.of(framework) {
            let fid = self.live.remove(&id).expect("live");
            self.report(&id, &fid, ExecutorState::Exited { code: 0 });
        }
    }

    fn group_record(&self, framework: &str) -> regent_core::store::GroupRecord {
        match self.store.records.get(&RecordKey::Framework(FrameworkId::new(framework))) {
            Some(Record::Framework(f)) => f.groups[0].clone(),
            other => panic!("the record of {framework}: {other:?}"),
        }
    }

    fn reasons(&self, framework: &str) -> Vec<regent_core::api::WaitReason> {
        let statuses = self.m.job_statuses(Millis(self.now));
        let j = statuses.iter().find(|j| j.job.as_str() == framework).expect("the job");
        j.groups[0]
            .slots
            .iter()
            .find(|s| s.phase == regent_core::api::SlotPhase::Waiting)
            .map(|s| s.reasons.clone())
            .unwrap_or_default()
    }
}

#[test]
fn a_higher_priority_preempts_the_fewest_youngest_lower_executors_without_tenants() {
    let mut c = Cluster::new(4);
    c.submit(job("a-low", None, 4, 20));
    c.run(2);
    assert_eq!(c.running(), BTreeMap::from([("a-low".to_string(), 4)]));
    let low = c.of("a-low");
    c.submit(job("b-high", None, 2, 80));
    c.run(10);
    assert_eq!(
        c.running(),
        BTreeMap::from([("a-low".to_string(), 2), ("b-high".to_string(), 2)]),
        "two one-core executors freed the two cores asked for, no more"
    );
    let mut youngest = low[2..].to_vec();
    youngest.reverse();
    assert_eq!(c.stopped, youngest, "the youngest first, one per slot");
    // Their slots wait again, no retry charged; nothing failed.
    let g = c.group_record("a-low");
    assert_eq!(g.retries_used, 0);
    assert!(g.slots.iter().all(|s| *s == regent_core::store::SlotOutcome::Pending), "{g:?}");
    // When the high job ends, its cores go back to the preempted slots.
    c.finish("b-high");
    c.run(3);
    assert_eq!(c.running(), BTreeMap::from([("a-low".to_string(), 4)]));
    assert_eq!(c.stopped.len(), 2, "nothing more was preempted");
    assert_eq!(c.group_record("a-low").retries_used, 0);
}

#[test]
fn equal_priorities_never_preempt() {
    for priority in [50, 70] {
        let mut c = Cluster::new(4);
        c.submit(job("a-first", None, 4, priority));
        c.run(2);
        c.submit(job("b-second", None, 4, priority));
        c.run(10);
        assert_eq!(c.running(), BTreeMap::from([("a-first".to_string(), 4)]));
        assert!(c.stopped.is_empty(), "priority {priority}: {:?}", c.stopped);
    }
    // A lower priority never preempts a higher one either.
    let mut c = Cluster::new(4);
    c.submit(job("a-high", None, 4, 90));
    c.run(2);
    c.submit(job("b-low", None, 4, 10));
    c.run(10);
    assert!(c.stopped.is_empty(), "{:?}", c.stopped);
}

#[test]
fn a_tenant_at_its_guarantee_is_never_preempted_even_by_priority_100() {
    let mut c = Cluster::new(4);
    c.set_tenant(Tenant {
        guarantee: Dims { cores: Some(4), ..Dims::default() },
        ..Tenant::new("owner")
    });
    c.set_tenant(Tenant::new("other"));
    c.submit(job("a-owner", Some("owner"), 4, 0));
    c.run(2);
    c.submit(job("b-other", Some("other"), 2, 100));
    c.run(10);
    assert_eq!(c.running(), BTreeMap::from([("a-owner".to_string(), 4)]));
    assert!(c.stopped.is_empty(), "{:?}", c.stopped);
    // Above its guarantee, what is above it may go: a guarantee of 3 of
    // its 4 cores leaves one executor to a higher priority, no more.
    c.set_tenant(Tenant {
        guarantee: Dims { cores: Some(3), ..Dims::default() },
        ..Tenant::new("owner")
    });
    c.run(10);
    assert_eq!(
        c.running(),
        BTreeMap::from([("a-owner".to_string(), 3), ("b-other".to_string(), 1)])
    );
    assert_eq!(c.stopped.len(), 1);
}

#[test]
fn a_slot_behind_higher_priorities_says_how_many_slots_are_ahead() {
    use regent_core::api::WaitReason;
    let mut c = Cluster::new(4);
    c.submit(job("a-low", None, 4, 20));
    c.run(2);
    c.submit(job("b-high", None, 6, 80));
    c.run(12);
    assert_eq!(c.running(), BTreeMap::from([("b-high".to_string(), 4)]));
    let low = c.reasons("a-low");
    assert_eq!(low.first(), Some(&WaitReason::BehindPriority { slots: 2 }), "{low:?}");
    assert_eq!(low[0].to_string(), "behind 2 slots of higher priority");
    assert!(low.len() > 1, "and what the workers lack: {low:?}");
    // The higher group waits behind nothing.
    let high = c.reasons("b-high");
    assert!(!high.iter().any(|r| matches!(r, WaitReason::BehindPriority { .. })), "{high:?}");
    // A plan of a group says the same; one of the top priority does not.
    let plan = |m: &mut Master, priority: u8| {
        let spec = job("plan", None, 1, priority).groups.remove(0);
        let msg = Message::PlanRequest { request: 5, groups: vec![spec], tenant: None };
        let out = m.handle(Millis(100_000), master::Event::Message { conn: OP, msg });
        match m_sends(&out).as_slice() {
            [(OP, Message::PlanReply { groups, .. })] => groups[0].reasons.clone(),
            other => panic!("one PlanReply: {other:?}"),
        }
    };
    assert_eq!(plan(&mut c.m, 20).first(), Some(&WaitReason::BehindPriority { slots: 2 }));
    assert_eq!(plan(&mut c.m, 79).first(), Some(&WaitReason::BehindPriority { slots: 2 }));
    assert!(!plan(&mut c.m, 80).iter().any(|r| matches!(r, WaitReason::BehindPriority { .. })));
    // With the high job done, the low slots run again.
    c.finish("b-high");
    c.run(3);
    assert_eq!(c.running(), BTreeMap::from([("a-low".to_string(), 2), ("b-high".to_string(), 2)]));
    c.finish("b-high");
    c.run(3);
    assert_eq!(c.running(), BTreeMap::from([("a-low".to_string(), 4)]));
    assert!(c.reasons("a-low").is_empty());
}

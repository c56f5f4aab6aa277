//! Durable before accepted (docs/design.md#durable-before-acknowledged, issue 11 (docs/design.md#issue-11) item 4): a framework's
//! `KillExecutor` and an operator's `RemoveWorker` are answered
//! `RequestAccepted` only once the write behind them is durable, and what
//! was accepted survives a failover to a leader that loads the records.

mod common;

use common::*;
use regent_core::ids::InstanceId;
use regent_core::master::{self, Master, Status};
use regent_core::protocol::{
    ExecutorReport, ExecutorState, GroupSpec, Message, RegisterWorker, Role, Subscribe,
};
use regent_core::store::{Record, RecordKey, SlotOutcome, WorkerRecord};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::{ConnId, Epoch, ExecutorId, Incarnation, Millis, WorkerId};

const T: Millis = Millis(0);

fn deliver(m: &mut Master, store: &mut Store, conn: u64, msg: Message) -> Vec<(ConnId, Message)> {
    let out = m.handle(T, master::Event::Message { conn: ConnId(conn), msg });
    store.settle(m, T, out)
}

fn register(worker: &str, inc: u64, executors: Vec<ExecutorReport>) -> Message {
    Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: worker.into(),
        incarnation: Incarnation(inc),
        cores: 4,
        memory_mb: 4096,
        executors,
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    })
}

/// Leader "a" with worker w0 (conn 100) running the two executors of group
/// "g" of a framework subscribed on conn 1. Returns the executors by slot.
fn cluster(store: &mut Store) -> (Master, Vec<ExecutorId>) {
    let mut m = master("a");
    let out = m.handle(T, master::Event::Elected { floor: Epoch(1), clock: 0 });
    assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
    let out = m.handle(T, master::Event::Store(StoreEvent::Loaded { records: vec![] }));
    let _ = store.settle(&mut m, T, out);
    let _ = connect_worker(&mut m, T, 100, "w0");
    let _ = deliver(&mut m, store, 100, register("w0", 100, vec![]));
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(1) });
    let _ =
        m.handle(T, master::Event::Message { conn: ConnId(1), msg: hello(Role::Subscriber, "s") });
    let sub = Message::Subscribe(Subscribe {
        framework: None,
        name: "app".into(),
        instance: InstanceId(1),
        attempt: 0,
        failover_timeout: Millis(30_000),
        tenant: None,
    });
    let sends = deliver(&mut m, store, 1, sub);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Subscribed { .. })));
    let spec = GroupSpec {
        group: "g".into(),
        slots: 2,
        command: vec!["/bin/sleep".into(), "100".into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy: Default::default(),
        launch: Default::default(),
    };
    let sends = deliver(&mut m, store, 1, Message::DeclareGroup { request: 1, spec });
    let mut launched: Vec<ExecutorId> = sends
        .iter()
        .filter_map(|(_, m)| match m {
            Message::LaunchExecutor { executor, .. } => Some(executor.clone()),
            _ => None,
        })
        .collect();
    launched.sort();
    assert_eq!(launched.len(), 2, "{sends:?}");
    (m, launched)
}

fn report(id: &ExecutorId, state: ExecutorState) -> ExecutorReport {
    let framework = m_framework(id);
    ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id: id.clone(),
        framework,
        cores: 1,
        memory_mb: 1,
        state,
    }
}

fn m_framework(id: &ExecutorId) -> regent_core::FrameworkId {
    regent_core::FrameworkId(id.as_str().split('/').next().expect("framework prefix").into())
}

fn accepted(sends: &[(ConnId, Message)], request: u64) -> bool {
    sends
        .iter()
        .any(|(_, m)| matches!(m, Message::RequestAccepted { request: r, .. } if *r == request))
}

#[test]
fn a_kill_is_accepted_only_after_the_slot_outcome_recording_it_is_persisted() {
    let mut store = Store::default();
    let (mut m, ex) = cluster(&mut store);
    let kill = Message::KillExecutor { request: 5, executor: ex[0].clone() };
    let out = m.handle(T, master::Event::Message { conn: ConnId(1), msg: kill });
    let sends = m_sends(&out);
    assert!(!accepted(&sends, 5), "accepted before anything was written: {sends:?}");
    assert!(
        !sends.iter().any(|(_, m)| matches!(m, Message::KillExecutorOnWorker { .. })),
        "the kill follows its record: {sends:?}"
    );
    // The write records the kill in the slot's outcome.
    let recorded = out.iter().any(|a| match a {
        master::Action::Store(StoreCommand::Persist { record: Record::Framework(f), .. }) => {
            f.groups[0].slots[0] == SlotOutcome::Killed { executor: ex[0].clone() }
        }
        _ => false,
    });
    assert!(recorded, "{out:?}");
    let sends = store.settle(&mut m, T, out);
    assert!(accepted(&sends, 5), "{sends:?}");
    assert!(sends.contains(&(
        ConnId(100),
        Message::KillExecutorOnWorker { epoch: Epoch(1), executor: ex[0].clone() }
    )));
    // The worker reports the kill: the slot stays killed, nothing relaunched.
    let status = Message::ExecutorStatus {
        incarnation: Incarnation(100),
        report: report(&ex[0], ExecutorState::Killed),
    };
    let sends = deliver(&mut m, &mut store, 100, status);
    assert!(!sends.iter().any(|(_, m)| matches!(m, Message::LaunchExecutor { .. })), "{sends:?}");
}

#[test]
fn after_a_failover_the_slot_whose_kill_was_accepted_is_not_relaunched() {
    let mut store = Store::default();
    let (mut a, ex) = cluster(&mut store);
    let kill = Message::KillExecutor { request: 5, executor: ex[0].clone() };
    let sends = deliver(&mut a, &mut store, 1, kill);
    assert!(accepted(&sends, 5));
    // Leader "a" dies before its kill reached the worker; "b" takes over the
    // records "a" made durable. The worker still runs both executors.
    let mut b = store.elect("b", T, Epoch(2), 0);
    assert_eq!(b.status(), Status::Recovering);
    let _ = connect_worker(&mut b, T, 200, "w0");
    let reports =
        vec![report(&ex[0], ExecutorState::Running), report(&ex[1], ExecutorState::Running)];
    let sends = deliver(&mut b, &mut store, 200, register("w0", 100, reports));
    assert_eq!(b.status(), Status::Alive);
    assert!(
        !sends.iter().any(|(_, m)| matches!(m, Message::LaunchExecutor { .. })),
        "nothing relaunched: {sends:?}"
    );
    assert!(
        sends.contains(&(
            ConnId(200),
            Message::KillExecutorOnWorker { epoch: Epoch(2), executor: ex[0].clone() }
        )),
        "the killed executor is killed again, not adopted: {sends:?}"
    );
    let running: Vec<&ExecutorId> = b.executors().map(|e| &e.id).collect();
    assert_eq!(running, vec![&ex[1]], "the other slot's executor is adopted");
    // Even once the worker is gone and the killed executor with it, the slot
    // stays killed.
    let status = Message::ExecutorStatus {
        incarnation: Incarnation(100),
        report: report(&ex[0], ExecutorState::Killed),
    };
    let sends = deliver(&mut b, &mut store, 200, status);
    assert!(!sends.iter().any(|(_, m)| matches!(m, Message::LaunchExecutor { .. })), "{sends:?}");
    let fw = b.frameworks().next().expect("framework");
    assert_eq!(fw.groups[0].record.slots[0], SlotOutcome::Killed { executor: ex[0].clone() });
}

#[test]
fn a_kill_that_was_not_yet_durable_was_not_accepted() {
    // The other half of the rule: a leader that dies between the kill and
    // its write never told the framework the kill was accepted, so a new
    // leader that relaunches the slot breaks no promise.
    let mut store = Store::default();
    let (mut a, ex) = cluster(&mut store);
    let kill = Message::KillExecutor { request: 5, executor: ex[0].clone() };
    let out = a.handle(T, master::Event::Message { conn: ConnId(1), msg: kill });
    assert!(!accepted(&m_sends(&out), 5));
    drop(a); // crashed before Persisted
    let b = store.elect("b", T, Epoch(2), 0);
    let fw = b.frameworks().next().expect("framework");
    assert_eq!(fw.groups[0].record.slots[0], SlotOutcome::Pending);
}

fn worker_record(i: u64) -> Record {
    Record::Worker(WorkerRecord {
        dead: false,
        id: WorkerId(format!("w{i}")),
        incarnation: Incarnation(100 + i),
        cores: 4,
        memory_mb: 1024,
        callback: None,
        maintenance: None,
    })
}

#[test]
fn remove_worker_is_accepted_only_after_its_delete_is_durable_and_survives_a_failover() {
    let mut store = Store::default();
    for i in 1..=4 {
        let r = worker_record(i);
        store.records.insert(r.key(), r);
    }
    let mut a = store.elect("a", T, Epoch(1), 0);
    let _ = connect_worker(&mut a, T, 1, "w1");
    let _ = deliver(&mut a, &mut store, 1, register("w1", 101, vec![]));
    // Three of four silent: too many to remove, they stay UNKNOWN.
    let out = a.handle(Millis(10_000), master::Event::Tick);
    let _ = store.settle(&mut a, T, out);
    assert_eq!(a.status(), Status::Alive);
    let _ = a.handle(T, master::Event::Connected { conn: ConnId(9) });
    let msg = Message::RemoveWorker { request: 3, worker: WorkerId::new("w3") };
    let out = a.handle(T, master::Event::Message { conn: ConnId(9), msg });
    assert!(!accepted(&m_sends(&out), 3), "accepted before the delete was durable: {out:?}");
    assert!(store.records.contains_key(&RecordKey::Worker(WorkerId::new("w3"))));
    let sends = store.settle(&mut a, T, out);
    assert!(accepted(&sends, 3), "{sends:?}");
    assert!(!store.records.contains_key(&RecordKey::Worker(WorkerId::new("w3"))));
    // A new leader over the durable records does not bring w3 back.
    let b = store.elect("b", T, Epoch(2), 0);
    let ids: Vec<String> = b.workers().iter().map(|w| w.id.0.clone()).collect();
    assert_eq!(ids, vec!["w1", "w2", "w4"]);
}

#[test]
fn removing_a_dead_worker_is_accepted_once_a_delete_is_durable() {
    // A DEAD worker's delete is already in flight (from the sweep); the
    // removal's acceptance waits for a delete of its own, applied after it.
    let mut store = Store::default();
    let (mut a, _) = cluster(&mut store);
    let out = a.handle(Millis(60_000), master::Event::Tick);
    assert!(out.iter().any(|x| matches!(x, master::Action::Store(StoreCommand::Unpersist { .. }))));
    let _ = a.handle(T, master::Event::Connected { conn: ConnId(9) });
    let msg = Message::RemoveWorker { request: 4, worker: WorkerId::new("w0") };
    let out2 = a.handle(Millis(60_000), master::Event::Message { conn: ConnId(9), msg });
    assert!(!accepted(&m_sends(&out2), 4));
    assert!(out2
        .iter()
        .any(|x| matches!(x, master::Action::Store(StoreCommand::Unpersist { .. }))));
    let _ = store.settle(&mut a, T, out);
    let sends = store.settle(&mut a, T, out2);
    assert!(accepted(&sends, 4), "{sends:?}");
}

//! A worker restarted over the same work directory (an upgrade, a crash, a
//! `kill -9`) re-adopts the executors it proved its own and reports them in
//! its registration (docs/design.md#duplicates-are-harmless): the leader keeps an adopted executor
//! only if its slot still names it — and then places no replacement — and
//! otherwise tells the worker to kill it. Exact protocol actions.

mod common;

use common::*;
use regent_core::ids::InstanceId;
use regent_core::master::{self, Master, Status, WorkerState};
use regent_core::policy::Placement;
use regent_core::protocol::{
    ExecutorReport, ExecutorState, GroupSpec, Message, RegisterWorker, Role, Subscribe,
};
use regent_core::store::{FrameworkRecord, GroupRecord, Record, SlotOutcome, WorkerRecord};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis, WorkerId};

const T: Millis = Millis(0);

fn spec(slots: u32) -> GroupSpec {
    GroupSpec {
        group: "main".into(),
        slots,
        command: vec!["/bin/sleep".into(), "1000".into()],
        env: vec![],
        cores: 1,
        memory_mb: 512,
        policy: Default::default(),
        launch: Default::default(),
    }
}

/// A leader with workers `w0..wn` (4 cores, 4 GiB) registered on conns
/// 100+ as incarnations 100+, and a framework subscribed on conn 1 that
/// declared `slots` executors of one core, each running.
fn cluster(n: u64, slots: u32) -> (Master, FrameworkId, Vec<(ConnId, ExecutorId)>) {
    let mut cfg = master::Config::new("a".into(), addr("a"));
    cfg.placement = Placement::Spread;
    let mut m = Master::new(cfg);
    let _ = elect(&mut m, T, 1);
    for i in 0..n {
        let conn = 100 + i;
        let _ = connect_worker(&mut m, T, conn, &format!("w{i}"));
        let _ = deliver_to_master(&mut m, T, conn, register(i, conn, vec![]));
    }
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(1) });
    let _ =
        m.handle(T, master::Event::Message { conn: ConnId(1), msg: hello(Role::Subscriber, "s") });
    let sub = Message::Subscribe(Subscribe {
        framework: None,
        name: "app".into(),
        instance: InstanceId(7),
        attempt: 1,
        failover_timeout: Millis(30_000),
        tenant: None,
    });
    let sends = deliver_to_master(&mut m, T, 1, sub);
    let fw = sends
        .iter()
        .find_map(|(_, m)| match m {
            Message::Subscribed { framework, .. } => Some(framework.clone()),
            _ => None,
        })
        .expect("Subscribed");
    let l = launches(&deliver_to_master(
        &mut m,
        T,
        1,
        Message::DeclareGroup { request: 1, spec: spec(slots) },
    ));
    assert_eq!(l.len(), slots as usize);
    for (wc, e) in &l {
        let _ = status(&mut m, wc.0, e, &fw, ExecutorState::Running);
    }
    (m, fw, l)
}

fn register(i: u64, incarnation: u64, executors: Vec<ExecutorReport>) -> Message {
    Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: WorkerId(format!("w{i}")),
        incarnation: Incarnation(incarnation),
        cores: 4,
        memory_mb: 4096,
        executors,
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    })
}

fn report(id: &ExecutorId, fw: &FrameworkId, state: ExecutorState) -> ExecutorReport {
    ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id: id.clone(),
        framework: fw.clone(),
        cores: 1,
        memory_mb: 512,
        state,
    }
}

fn status(
    m: &mut Master,
    worker_conn: u64,
    id: &ExecutorId,
    fw: &FrameworkId,
    state: ExecutorState,
) -> Vec<(ConnId, Message)> {
    let msg = Message::ExecutorStatus {
        incarnation: Incarnation(worker_conn),
        report: report(id, fw, state),
    };
    deliver_to_master(m, T, worker_conn, msg)
}

fn launches(sends: &[(ConnId, Message)]) -> Vec<(ConnId, ExecutorId)> {
    sends
        .iter()
        .filter_map(|(c, m)| match m {
            Message::LaunchExecutor { executor, .. } => Some((*c, executor.clone())),
            _ => None,
        })
        .collect()
}

fn kills(sends: &[(ConnId, Message)]) -> Vec<(ConnId, ExecutorId)> {
    sends
        .iter()
        .filter_map(|(c, m)| match m {
            Message::KillExecutorOnWorker { executor, .. } => Some((*c, executor.clone())),
            _ => None,
        })
        .collect()
}

/// The new process of worker `w{i}` connects on `conn` and registers as
/// incarnation `conn`, reporting `executors`; every send, persisted.
fn restart(
    m: &mut Master,
    i: u64,
    conn: u64,
    executors: Vec<ExecutorReport>,
) -> Vec<(ConnId, Message)> {
    let _ = connect_worker(m, T, conn, &format!("w{i}"));
    deliver_to_master(m, T, conn, register(i, conn, executors))
}

fn state_of(m: &Master, id: &ExecutorId) -> (ExecutorState, WorkerId) {
    let e = m.executors().find(|e| &e.id == id).expect("known executor");
    (e.state.clone(), e.worker.clone())
}

#[test]
fn an_adopted_executor_whose_slot_still_names_it_is_kept_and_not_replaced() {
    let (mut m, fw, l) = cluster(2, 2);
    let (wc, e) = l.iter().find(|(c, _)| c.0 == 100).cloned().expect("one on w0");
    assert_eq!(wc, ConnId(100));
    let sends = restart(&mut m, 0, 200, vec![report(&e, &fw, ExecutorState::Running)]);
    assert!(launches(&sends).is_empty(), "no replacement is placed: {sends:?}");
    assert!(kills(&sends).is_empty(), "the adopted executor is kept: {sends:?}");
    assert!(
        sends.iter().any(|(c, msg)| *c == ConnId(200) && matches!(msg, Message::Registered { .. })),
        "{sends:?}"
    );
    // The old process, if it still talks, is told of the id conflict.
    assert!(sends
        .iter()
        .any(|(c, msg)| *c == ConnId(100) && matches!(msg, Message::Shutdown { .. })));
    // The framework hears nothing of a loss.
    assert!(!sends.iter().any(|(_, msg)| matches!(
        msg,
        Message::ExecutorUpdate { info, .. } if info.state == ExecutorState::Lost
    )));
    assert_eq!(state_of(&m, &e), (ExecutorState::Running, WorkerId::new("w0")));
    let w0 = m.workers().into_iter().find(|w| w.id.as_str() == "w0").expect("w0");
    assert_eq!(w0.state, WorkerState::Alive);
    assert_eq!(w0.incarnation, Incarnation(200));
    assert_eq!((w0.cores_used, w0.memory_used_mb), (1, 512), "the kept executor holds its share");
    // Its end is reported by the new process and settles the slot.
    let sends = status(&mut m, 200, &e, &fw, ExecutorState::Exited { code: 0 });
    assert!(sends.contains(&(
        ConnId(200),
        Message::ExecutorStatusAck { epoch: Epoch(1), executor: e.clone() }
    )));
    let g = &m.frameworks().next().expect("framework").groups[0];
    assert!(g.record.slots.contains(&SlotOutcome::Done { executor: e }));
    assert!(launches(&sends).is_empty());
}

#[test]
fn an_adopted_executor_that_was_launching_is_kept_and_becomes_running() {
    let (mut m, fw, _) = cluster(1, 0);
    // A second group whose launch the worker never confirmed.
    let l = launches(&deliver_to_master(
        &mut m,
        T,
        1,
        Message::DeclareGroup { request: 2, spec: GroupSpec { group: "g2".into(), ..spec(1) } },
    ));
    let (_, e) = l[0].clone();
    assert_eq!(state_of(&m, &e).0, ExecutorState::Launching);
    let sends = restart(&mut m, 0, 200, vec![report(&e, &fw, ExecutorState::Running)]);
    assert!(launches(&sends).is_empty() && kills(&sends).is_empty(), "{sends:?}");
    assert_eq!(state_of(&m, &e).0, ExecutorState::Running);
}

#[test]
fn executors_the_new_process_does_not_report_are_lost_and_replaced() {
    let (mut m, fw, l) = cluster(1, 2);
    let (kept, gone) = (l[0].1.clone(), l[1].1.clone());
    let sends = restart(&mut m, 0, 200, vec![report(&kept, &fw, ExecutorState::Running)]);
    assert_eq!(state_of(&m, &kept).0, ExecutorState::Running);
    assert_eq!(state_of(&m, &gone).0, ExecutorState::Lost);
    let l = launches(&sends);
    assert_eq!(l.len(), 1, "only the unreported one's slot is refilled: {sends:?}");
    assert_eq!(l[0].0, ConnId(200));
    assert!(kills(&sends).is_empty());
}

/// The kills sent with a registration: each once, and none before the
/// `Registered` (a worker follows its leader only from then, so a kill
/// sent before would be dropped):
/// sim seed 99443, docs/design.md#simulator-seeds.
fn killed_once_registered(sends: &[(ConnId, Message)]) -> Vec<(ConnId, ExecutorId)> {
    let registered = sends
        .iter()
        .position(|(_, m)| matches!(m, Message::Registered { .. }))
        .expect("Registered sent");
    assert!(kills(&sends[..registered]).is_empty(), "no kill before Registered: {sends:?}");
    kills(sends)
}

#[test]
fn an_adopted_executor_whose_slot_was_reassigned_is_killed() {
    let (mut m, fw, l) = cluster(2, 1);
    let (wc, e) = l[0].clone();
    let (dead, other) = (wc.0 - 100, if wc.0 == 100 { 101 } else { 100 });
    // Its worker falls silent: LOST, refilled on the other worker.
    let hb = Message::WorkerHeartbeat { incarnation: Incarnation(other) };
    let _ = deliver_to_master(&mut m, Millis(95_000), other, hb);
    let out = m.handle(Millis(100_000), master::Event::Tick);
    let mut sends = m_sends(&out);
    sends.extend(m_sends(&persist_all(&mut m, Millis(100_000), &out)));
    let refill = launches(&sends);
    assert_eq!(refill.len(), 1);
    assert_eq!(refill[0].0, ConnId(other));
    // The upgraded worker comes back and reports the old executor running.
    let sends = restart(&mut m, dead, 300, vec![report(&e, &fw, ExecutorState::Running)]);
    assert_eq!(
        killed_once_registered(&sends),
        vec![(ConnId(300), e.clone())],
        "its slot names another executor: killed"
    );
    assert!(launches(&sends).is_empty(), "{sends:?}");
    let g = &m.frameworks().next().expect("framework").groups[0];
    assert_eq!(g.current[0].as_ref(), Some(&refill[0].1), "the replacement keeps the slot");
}

#[test]
fn an_adopted_executor_of_a_framework_that_is_gone_is_killed() {
    let (mut m, fw, l) = cluster(1, 1);
    let (_, e) = l[0].clone();
    // The framework's failover timeout passes while its worker restarts.
    let _ = m.handle(Millis(1_000), master::Event::Disconnected { conn: ConnId(1) });
    let out = m.handle(Millis(31_001), master::Event::Tick);
    // The history record, then the framework record's delete: its end is
    // durable (the kill it sends then goes to the old connection).
    let out = persist_all(&mut m, Millis(31_001), &out);
    let _ = persist_all(&mut m, Millis(31_001), &out);
    assert_eq!(m.frameworks().count(), 0);
    let sends = restart(&mut m, 0, 200, vec![report(&e, &fw, ExecutorState::Running)]);
    assert_eq!(killed_once_registered(&sends), vec![(ConnId(200), e)]);
    assert!(launches(&sends).is_empty());
}

#[test]
fn an_adopted_executor_the_leader_never_knew_is_killed() {
    let (mut m, fw, l) = cluster(1, 1);
    let (_, e) = l[0].clone();
    // Of the same slot, which still names `e` (also reported, so kept).
    let stray = ExecutorId(format!("{fw}/main#0#0.99"));
    let reports =
        vec![report(&e, &fw, ExecutorState::Running), report(&stray, &fw, ExecutorState::Running)];
    let sends = restart(&mut m, 0, 200, reports);
    assert_eq!(killed_once_registered(&sends), vec![(ConnId(200), stray)], "{sends:?}");
    assert!(launches(&sends).is_empty());
    assert_eq!(state_of(&m, &e).0, ExecutorState::Running);
}

#[test]
fn a_leader_recovering_from_its_store_adopts_what_the_new_process_reports() {
    // The master restarted too: it knows the worker (old incarnation 100)
    // and the framework's pending slot from its store, no executor.
    let fw = FrameworkId::new("fw-1");
    let e = ExecutorId(format!("{fw}/main#0#1.1"));
    let records = vec![
        Record::Epoch(Epoch(1)),
        Record::Worker(WorkerRecord {
            dead: false,
            id: WorkerId::new("w0"),
            incarnation: Incarnation(100),
            cores: 4,
            memory_mb: 4096,
            callback: None,
            maintenance: None,
        }),
        Record::Framework(FrameworkRecord {
            id: fw.clone(),
            name: "app".into(),
            failover_timeout_ms: 30_000,
            groups: vec![GroupRecord {
                replacing: Default::default(),
                preempted: Default::default(),
                counted: Default::default(),
                deployment: None,
                eras: Vec::new(),
                spec: spec(1),
                slots: vec![SlotOutcome::Pending],
                retries_used: 0,
                restarts: Default::default(),
            }],
            callback: None,
            registered_at_ms: None,
            job: None,
            tenant: None,
        }),
    ];
    let mut m = master("a");
    let out = m.handle(T, master::Event::Elected { floor: Epoch(2), clock: 0 });
    assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
    let out = m.handle(T, master::Event::Store(StoreEvent::Loaded { records }));
    let _ = persist_all(&mut m, T, &out);
    assert_eq!(m.status(), Status::Recovering);
    let sends = restart(&mut m, 0, 200, vec![report(&e, &fw, ExecutorState::Running)]);
    assert!(kills(&sends).is_empty(), "{sends:?}");
    assert!(launches(&sends).is_empty(), "the adopted one fills its slot: {sends:?}");
    assert_eq!(m.status(), Status::Alive, "the only recovered worker reported");
    assert_eq!(state_of(&m, &e), (ExecutorState::Running, WorkerId::new("w0")));
    let g = &m.frameworks().next().expect("framework").groups[0];
    assert_eq!(g.current[0].as_ref(), Some(&e));
    let w0 = m.workers().into_iter().find(|w| w.id.as_str() == "w0").expect("w0");
    assert_eq!((w0.incarnation, w0.cores_used), (Incarnation(200), 1));
}

/// Executors that ended while their worker was down (its new process found
/// them ended, as their shims recorded): the new process reports them
/// terminal in its registration. A success completes its slot although the
/// registration writes the old incarnation's executors off — nothing runs
/// it again; a failure's slot is refilled (as LOST, in that same step).
#[test]
fn executors_that_ended_while_the_worker_was_down_are_settled_as_reported() {
    let (mut m, fw, l) = cluster(1, 2);
    let (ok, three) = (l[0].1.clone(), l[1].1.clone());
    let sends = restart(
        &mut m,
        0,
        200,
        vec![
            report(&ok, &fw, ExecutorState::Exited { code: 0 }),
            report(&three, &fw, ExecutorState::Exited { code: 3 }),
        ],
    );
    let g = &m.frameworks().next().expect("framework").groups[0];
    assert!(g.record.slots.contains(&SlotOutcome::Done { executor: ok.clone() }), "{g:?}");
    let l = launches(&sends);
    assert_eq!(l.len(), 1, "only the failed slot is refilled: {sends:?}");
    assert!(l[0].1 != ok && l[0].1 != three);
    assert_eq!(l[0].0, ConnId(200));
    assert!(kills(&sends).is_empty(), "no replacement of the success to kill: {sends:?}");
    // The framework hears of the success.
    assert!(sends.iter().any(|(c, msg)| *c == ConnId(1)
        && matches!(msg, Message::ExecutorUpdate { info, .. }
            if info.id == ok && info.state == ExecutorState::Exited { code: 0 })));
    // Both reports are acknowledged once durable.
    for e in [&ok, &three] {
        assert!(
            sends.contains(&(
                ConnId(200),
                Message::ExecutorStatusAck { epoch: Epoch(1), executor: e.clone() }
            )),
            "{e} acknowledged: {sends:?}"
        );
    }
}

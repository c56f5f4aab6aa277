//! Executors' usage (docs/design.md#issue-23): the worker machine sends its runtime's
//! newest sample with a heartbeat at most once per `USAGE_INTERVAL`, only
//! for executors it runs; the leader keeps it per worker, only for that
//! worker's live executors, and shows it per executor and summed per worker.

mod common;

use common::*;
use regent_core::ids::ExecutorId;
use regent_core::master::{self, Master};
use regent_core::protocol::{
    ExecutorReport, ExecutorState, ExecutorUsage, GroupSpec, Message, RegisterWorker, Usage,
    WorkerUsage,
};
use regent_core::worker::{self, USAGE_INTERVAL};
use regent_core::{ConnId, Incarnation, Millis};

fn sample(ids: &[&str], memory: u64) -> WorkerUsage {
    WorkerUsage {
        executors: ids
            .iter()
            .map(|id| ExecutorUsage {
                executor: ExecutorId::new(*id),
                usage: Usage {
                    memory_bytes: Some(memory),
                    memory_peak_bytes: Some(2 * memory),
                    cpu_usec: Some(1_000),
                },
            })
            .collect(),
        work_dir_free_bytes: Some(40 << 30),
        work_dir_total_bytes: Some(100 << 30),
    }
}

fn usage_sent(actions: &[worker::Action]) -> Option<WorkerUsage> {
    w_sends(actions).into_iter().find_map(|(_, m)| match m {
        Message::WorkerUsage { usage, .. } => Some(usage),
        _ => None,
    })
}

#[test]
fn a_worker_sends_its_newest_sample_with_a_heartbeat_at_most_once_per_interval() {
    let mut w = worker("w1", 1, &["m1"]);
    let _ = w.handle(Millis(0), worker::Event::Start);
    let _ = w.handle(Millis(0), worker::Event::Connected { master: addr("m1") });
    let registered = Message::Registered {
        epoch: regent_core::Epoch(1),
        heartbeat_interval: Millis(1_000),
        duplicate: false,
        masters: vec![addr("m1")],
    };
    let _ = from(&mut w, Millis(10), "m1", registered);
    let launch = Message::LaunchExecutor {
        epoch: regent_core::Epoch(1),
        executor: ExecutorId::new("e1"),
        framework: regent_core::FrameworkId::new("f1"),
        spec: regent_core::protocol::ExecutorSpec {
            command: vec!["true".into()],
            env: vec![],
            cores: 1,
            memory_mb: 1,
            launch: Default::default(),
        },
        launch: 1,
    };
    let _ = from(&mut w, Millis(15), "m1", launch);
    let running = |w: &mut regent_core::worker::Worker, id: &str| {
        let _ = w.handle(
            Millis(20),
            worker::Event::ExecutorChanged {
                executor: ExecutorId::new(id),
                state: ExecutorState::Running,
            },
        );
    };
    running(&mut w, "e1");
    // A heartbeat, the master having acknowledged the one before.
    let beat = |w: &mut regent_core::worker::Worker, at: u64| {
        let ack = Message::HeartbeatAck { epoch: regent_core::Epoch(1) };
        let _ = from(w, Millis(at - 1), "m1", ack);
        w.handle(Millis(at), worker::Event::Tick)
    };
    assert_eq!(usage_sent(&beat(&mut w, 1_000)), None, "no sample yet: nothing sent");
    let _ = w.handle(Millis(1_100), worker::Event::Usage(sample(&["e1", "ghost"], 1 << 20)));
    let sent = usage_sent(&beat(&mut w, 2_000)).expect("the sample goes with the heartbeat");
    let ids: Vec<&str> = sent.executors.iter().map(|e| e.executor.as_str()).collect();
    assert_eq!(ids, vec!["e1"], "an executor the machine does not run is dropped");
    assert_eq!(sent.work_dir_free_bytes, Some(40 << 30));
    // A newer sample waits out the interval, and the newest is what goes.
    let _ = w.handle(Millis(2_100), worker::Event::Usage(sample(&[], 1)));
    let _ = w.handle(Millis(2_200), worker::Event::Usage(sample(&[], 2)));
    assert_eq!(usage_sent(&beat(&mut w, 3_000)), None, "within the interval: held");
    let later = 2_000 + USAGE_INTERVAL.0;
    let sent = usage_sent(&beat(&mut w, later)).expect("the interval passed");
    assert_eq!(sent, sample(&[], 2), "the newest sample");
    assert_eq!(usage_sent(&beat(&mut w, later + 1_000)), None, "sent once");
}

/// A leader with worker `w0` (conn 100) running one executor of a
/// framework; returns it and the executor.
fn leader_with_a_running_executor() -> (Master, ExecutorId) {
    let mut m = Master::new(master::Config::new("a".into(), addr("a")));
    let _ = elect(&mut m, Millis(0), 1);
    let _ = connect_worker(&mut m, Millis(0), 100, "w0");
    let reg = Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: "w0".into(),
        incarnation: Incarnation(1),
        cores: 8,
        memory_mb: 64 * 1024,
        executors: vec![],
        epoch_seen: regent_core::Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    });
    let _ = deliver_to_master(&mut m, Millis(0), 100, reg);
    subscribe(&mut m, 1);
    let spec = GroupSpec {
        group: "g".into(),
        slots: 1,
        command: vec!["sleep".into(), "60".into()],
        env: vec![],
        cores: 1,
        memory_mb: 64,
        policy: Default::default(),
        launch: Default::default(),
    };
    let sends = deliver_to_master(&mut m, Millis(0), 1, Message::DeclareGroup { request: 1, spec });
    let executor = sends
        .iter()
        .find_map(|(_, msg)| match msg {
            Message::LaunchExecutor { executor, .. } => Some(executor.clone()),
            _ => None,
        })
        .expect("a launch");
    let framework = m.frameworks().next().expect("a framework").id.clone();
    let report = ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id: executor.clone(),
        framework,
        cores: 1,
        memory_mb: 64,
        state: ExecutorState::Running,
    };
    let msg = Message::ExecutorStatus { incarnation: Incarnation(1), report };
    let _ = deliver_to_master(&mut m, Millis(10), 100, msg);
    (m, executor)
}

#[test]
fn the_leader_shows_a_workers_sample_per_executor_and_summed_per_worker() {
    let (mut m, x) = leader_with_a_running_executor();
    assert_eq!(m.state().workers[0].usage, None, "no sample yet");
    let mut usage = sample(&[x.as_str(), "not-this-workers"], 3 << 20);
    usage.executors[1].usage.cpu_usec = Some(99_999_999);
    let msg = Message::WorkerUsage { incarnation: Incarnation(1), usage };
    let sends = deliver_to_master(&mut m, Millis(20), 100, msg);
    assert!(sends.is_empty(), "observational: no answer {sends:?}");
    let state = m.state();
    let w = state.workers[0].usage.as_ref().expect("the worker's sample");
    assert_eq!((w.memory_bytes, w.cpu_usec), (3 << 20, 1_000), "summed over its own executors");
    assert_eq!((w.work_dir_free_bytes, w.received_at), (Some(40 << 30), Millis(20)));
    let e = state.executors.iter().find(|e| e.id == x).unwrap();
    assert_eq!(e.usage.and_then(|u| u.memory_peak_bytes), Some(6 << 20));
    // Another incarnation's sample, or one on a connection that is not the
    // worker's, is ignored.
    let stale = Message::WorkerUsage { incarnation: Incarnation(0), usage: sample(&[], 1) };
    let _ = deliver_to_master(&mut m, Millis(30), 100, stale);
    let _ = m.handle(Millis(30), master::Event::Connected { conn: ConnId(5) });
    let stray = Message::WorkerUsage { incarnation: Incarnation(1), usage: sample(&[], 1) };
    let _ = m.handle(Millis(30), master::Event::Message { conn: ConnId(5), msg: stray });
    assert_eq!(m.state().workers[0].usage.as_ref().unwrap().received_at, Millis(20));
    // An executor that ended shows no usage.
    let framework = m.frameworks().next().unwrap().id.clone();
    let report = ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id: x.clone(),
        framework,
        cores: 1,
        memory_mb: 64,
        state: ExecutorState::Exited { code: 0 },
    };
    let msg = Message::ExecutorStatus { incarnation: Incarnation(1), report };
    let _ = deliver_to_master(&mut m, Millis(40), 100, msg);
    let state = m.state();
    let e = state.executors.iter().find(|e| e.id == x);
    assert!(e.is_none_or(|e| e.usage.is_none()), "{e:?}");
}

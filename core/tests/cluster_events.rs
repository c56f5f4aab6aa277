//! Cluster events (`regent_core::events`): the pure difference of two
//! snapshots that `GET /api/events` and `regent events` report.

use regent_core::events::{diff, summary, Change, ClusterEvent};
use regent_core::protocol::{
    ClusterState, ExecutorState, ExecutorView, FrameworkView, LeaderHint, Usage, WorkerUsageView,
    WorkerView,
};
use regent_core::states::{
    DrainState, FrameworkState, MasterStatus, ShownWorkerState, WorkerState,
};
use regent_core::{Addr, Epoch, ExecutorId, FrameworkId, MasterId, Millis, WorkerId};

fn hint(id: &str, epoch: u64) -> Option<LeaderHint> {
    Some(LeaderHint {
        id: MasterId::new(id),
        addr: Addr::new(format!("127.0.0.1:50{epoch:02}")),
        epoch: Epoch(epoch),
    })
}

fn worker(id: &str, state: &str, used: u32) -> WorkerView {
    WorkerView {
        users: Default::default(),
        resources: Default::default(),
        usage: None,
        host: Default::default(),
        ports: Default::default(),
        ports_used: Default::default(),
        id: WorkerId::new(id),
        state: WorkerState::from_name(state).expect("a worker state"),
        cores: 4,
        cores_used: used,
        memory_mb: 1024,
        memory_used_mb: 0,
        cordoned: false,
        drain: None,
        drain_deadline_ms: None,
        executors: used,
        attributes: Vec::new(),
    }
}

fn executor(id: &str, state: ExecutorState) -> ExecutorView {
    ExecutorView {
        resources: Default::default(),
        usage: None,
        preempted_by: None,
        health: None,
        ports: Default::default(),
        id: ExecutorId::new(id),
        framework: FrameworkId::new("fw-1"),
        worker: Some(WorkerId::new("w1")),
        state,
    }
}

fn framework(state: &str, connected: bool) -> FrameworkView {
    FrameworkView {
        tenant: None,
        id: FrameworkId::new("fw-1"),
        name: "etl".into(),
        state: FrameworkState::from_name(state).expect("a framework state"),
        connected,
        groups: vec![],
    }
}

fn state(master: &str, status: &str, epoch: u64) -> ClusterState {
    ClusterState {
        master: MasterId::new(master),
        status: MasterStatus::from_name(status).expect("a master status"),
        epoch: Epoch(epoch),
        leader: hint(master, epoch),
        workers: vec![],
        frameworks: vec![],
        executors: vec![],
        messages: 0,
        rejected: 0,
        history: vec![],
        history_omitted: 0,
    }
}

#[test]
fn equal_snapshots_and_counters_alone_give_no_event() {
    let mut a = state("m1", "ALIVE", 7);
    a.workers = vec![worker("w1", "ALIVE", 0)];
    let mut b = a.clone();
    b.messages = 1_000;
    b.rejected = 3;
    assert_eq!(diff(&a, &b), vec![]);
}

#[test]
fn a_new_usage_sample_alone_gives_no_event() {
    let mut a = state("m1", "ALIVE", 7);
    a.workers = vec![worker("w1", "ALIVE", 1)];
    a.executors = vec![executor("e1", ExecutorState::Running)];
    let mut b = a.clone();
    b.workers[0].usage = Some(WorkerUsageView {
        memory_bytes: 1 << 20,
        cpu_usec: 1_000,
        work_dir_free_bytes: Some(1 << 30),
        work_dir_total_bytes: Some(1 << 31),
        received_at: Millis(5),
    });
    b.executors[0].usage =
        Some(Usage { memory_bytes: Some(1 << 20), memory_peak_bytes: None, cpu_usec: Some(1_000) });
    assert_eq!(diff(&a, &b), vec![], "usage changes every few seconds: no event");
    // A change beside it still is one.
    b.executors[0].state = ExecutorState::Exited { code: 0 };
    assert_eq!(diff(&a, &b).len(), 1);
}

#[test]
fn a_worker_joins_changes_state_and_is_removed() {
    let a = state("m1", "ALIVE", 7);
    let mut b = a.clone();
    b.workers = vec![worker("w1", "ALIVE", 0), worker("w2", "ALIVE", 0)];
    let added = diff(&a, &b);
    assert_eq!(added.len(), 2, "{added:?}");
    assert!(matches!(&added[0], ClusterEvent::Worker { change: Change::Added, worker, state, .. }
        if worker.as_str() == "w1" && *state == ShownWorkerState::Alive));
    let mut c = b.clone();
    c.workers[1].state = WorkerState::Dead;
    c.workers[0].cores_used = 2;
    let changed = diff(&b, &c);
    assert_eq!(changed.len(), 2, "{changed:?}");
    assert!(
        matches!(&changed[0], ClusterEvent::Worker { change: Change::Updated, worker, cores_used: 2, .. }
        if worker.as_str() == "w1")
    );
    assert_eq!(changed[1].describe(), "worker w2 ALIVE -> DEAD (cores 0/4, memory 0/1024 MiB)");
    let mut d = c.clone();
    d.workers.remove(1);
    let removed = diff(&c, &d);
    assert!(
        matches!(&removed[..], [ClusterEvent::Worker { change: Change::Removed, worker, state, .. }]
        if worker.as_str() == "w2" && *state == ShownWorkerState::Dead),
        "{removed:?}"
    );
}

#[test]
fn executor_and_framework_states_with_exit_code_and_reason() {
    let mut a = state("m1", "ALIVE", 7);
    a.frameworks = vec![framework("ACTIVE", true)];
    a.executors =
        vec![executor("e1", ExecutorState::Running), executor("e2", ExecutorState::Running)];
    let mut b = a.clone();
    b.frameworks = vec![framework("FAILED", false)];
    b.executors = vec![
        executor("e1", ExecutorState::Exited { code: 0 }),
        executor("e2", ExecutorState::Failed { reason: "no such\nfile".into() }),
    ];
    let ev = diff(&a, &b);
    assert_eq!(ev.len(), 3, "{ev:?}");
    assert!(
        matches!(&ev[0], ClusterEvent::Framework { change: Change::State, state, previous: Some(p), connected: false, .. }
        if *state == FrameworkState::Failed && *p == FrameworkState::Active)
    );
    assert!(
        matches!(&ev[1], ClusterEvent::Executor { change: Change::State, state, exit_code: Some(0), .. }
        if state == "EXITED")
    );
    assert_eq!(ev[2].describe(), "executor e2 on w1 RUNNING -> FAILED (no such file)");
    // Coalescing: LAUNCHING then RUNNING then EXITED between two snapshots
    // is one change from the first to the last.
    let mut c = a.clone();
    c.executors = vec![executor("e1", ExecutorState::Launching)];
    let mut d = c.clone();
    d.executors = vec![executor("e1", ExecutorState::Exited { code: 3 })];
    assert!(
        matches!(&diff(&c, &d)[..], [ClusterEvent::Executor { previous: Some(p), state, exit_code: Some(3), .. }]
        if p == "LAUNCHING" && state == "EXITED")
    );
}

#[test]
fn a_new_leader_and_status_changes_are_events_with_epochs() {
    let a = state("m1", "ALIVE", 7);
    // Another master answers after a failover: a leader event.
    let b = state("m2", "RECOVERING", 9);
    let ev = diff(&a, &b);
    assert_eq!(
        ev,
        vec![ClusterEvent::Leader {
            leader: Some(MasterId::new("m2")),
            addr: Some(Addr::new("127.0.0.1:5009")),
            epoch: Some(9),
            previous: Some(MasterId::new("m1")),
            previous_epoch: Some(7),
        }],
        "status is compared for the same master only"
    );
    assert_eq!(ev[0].describe(), "leader m2 at 127.0.0.1:5009, epoch 9 (was m1, epoch 7)");
    // The same master: its own status.
    let mut c = b.clone();
    c.status = MasterStatus::Alive;
    assert!(matches!(&diff(&b, &c)[..], [ClusterEvent::Status { state, previous, epoch: 9, .. }]
        if *state == MasterStatus::Alive && *previous == MasterStatus::Recovering));
    // A standby that loses sight of the leader.
    let mut d = state("m3", "STANDBY", 9);
    d.leader = hint("m2", 9);
    let mut e = d.clone();
    e.leader = None;
    assert_eq!(diff(&d, &e)[0].describe(), "leader unknown (was m2, epoch 9)");
}

#[test]
fn events_serialize_tagged_by_kind_and_round_trip() {
    let ev = ClusterEvent::Worker {
        change: Change::State,
        worker: WorkerId::new("w1"),
        state: ShownWorkerState::Dead,
        previous: Some(ShownWorkerState::Alive),
        cores: 4,
        cores_used: 0,
        memory_mb: 1024,
        memory_used_mb: 0,
    };
    let json = serde_json::to_value(&ev).unwrap();
    assert_eq!(json["kind"], "worker");
    assert_eq!(json["change"], "state");
    assert_eq!(json["worker"], "w1");
    assert_eq!(json["previous"], "ALIVE");
    assert_eq!(ev.kind(), "worker");
    let back: ClusterEvent = serde_json::from_value(json).unwrap();
    assert_eq!(back, ev);
}

#[test]
fn the_summary_counts_by_state() {
    let mut s = state("m1", "ALIVE", 7);
    s.workers = vec![worker("w1", "ALIVE", 1), worker("w2", "DEAD", 0)];
    s.frameworks = vec![framework("ACTIVE", true)];
    s.executors = vec![executor("e1", ExecutorState::Running)];
    assert_eq!(
        summary(&s),
        "master m1 ALIVE, epoch 7, leader m1 at 127.0.0.1:5007; workers 2 (ALIVE 1, DEAD 1); \
         frameworks 1 (ACTIVE 1); executors 1 (RUNNING 1)"
    );
}

#[test]
fn a_framework_entering_the_history_is_a_finished_event_and_leaving_it_is_none() {
    use regent_core::protocol::{FinishedFramework, FrameworkOutcome};
    let mut a = state("m1", "ALIVE", 7);
    a.frameworks = vec![framework("ACTIVE", true)];
    let mut b = state("m1", "ALIVE", 7);
    b.history = vec![FinishedFramework {
        id: FrameworkId::new("fw-1"),
        name: "etl".into(),
        outcome: FrameworkOutcome::Completed,
        finished_at_ms: 1_796_000_000_000,
        registered_at_ms: None,
        slots: vec![],
        slots_omitted: 0,
    }];
    let events = diff(&a, &b);
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(matches!(&events[0], ClusterEvent::Framework { change: Change::Removed, .. }));
    assert_eq!(
        events[1],
        ClusterEvent::Finished {
            framework: FrameworkId::new("fw-1"),
            name: "etl".into(),
            outcome: "COMPLETED".into(),
            finished_at_ms: 1_796_000_000_000,
        }
    );
    assert_eq!(events[1].kind(), "finished");
    assert_eq!(events[1].describe(), "framework fw-1 (etl) finished: COMPLETED");
    // Evicted from the history later: no event.
    let c = state("m1", "ALIVE", 7);
    assert_eq!(diff(&b, &c), vec![]);
}

#[test]
fn a_drain_shows_as_the_workers_state_unless_it_is_dead() {
    let mut a = state("m1", "ALIVE", 7);
    a.workers = vec![worker("w1", "ALIVE", 1)];
    let mut b = a.clone();
    b.workers[0].cordoned = true;
    b.workers[0].drain = Some(DrainState::Draining);
    let events = diff(&a, &b);
    assert!(
        matches!(&events[..], [ClusterEvent::Worker { change: Change::State, state, previous: Some(p), .. }]
            if *state == ShownWorkerState::Draining && *p == ShownWorkerState::Alive),
        "{events:?}"
    );
    let mut c = b.clone();
    c.workers[0].state = WorkerState::Dead;
    let events = diff(&b, &c);
    assert!(
        matches!(&events[..], [ClusterEvent::Worker { change: Change::State, state, previous: Some(p), .. }]
            if *state == ShownWorkerState::Dead && *p == ShownWorkerState::Draining),
        "{events:?}"
    );
}

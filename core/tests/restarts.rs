//! Restart policies at the leader: batch retries per slot with backoff,
//! service slots restarted whatever their end, `healthy_after` resetting
//! the backoff, and the wait kept by a new leader (durable in the framework
//! record) but never past the policy's longest wait.

mod common;

use common::*;
use regent_core::ids::{ExecutorId, InstanceId};
use regent_core::master::{self, Master};
use regent_core::policy::{GroupPolicy, RestartMode, RestartPolicy};
use regent_core::protocol::{
    ExecutorReport, ExecutorState, GroupSpec, Message, RegisterWorker, Role, Subscribe,
};
use regent_core::states::FrameworkState;
use regent_core::store::{Record, SlotOutcome, StoreCommand, StoreEvent};
use regent_core::{ConnId, Epoch, FrameworkId, Incarnation, Millis};

/// The leaders' wall clock at the election (ms since the Unix epoch).
const WALL: u64 = 1_764_600_000_000;

fn leader_at(now: Millis, records: Vec<Record>) -> Master {
    let mut m = Master::new(master::Config::new("a".into(), addr("a")));
    let out = m.handle(now, master::Event::Elected { floor: Epoch(1), clock: WALL + now.0 });
    assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
    let out = m.handle(now, master::Event::Store(StoreEvent::Loaded { records }));
    let _ = persist_all(&mut m, now, &out);
    m
}

fn register(m: &mut Master, now: Millis, executors: Vec<ExecutorReport>) -> Vec<(ConnId, Message)> {
    let _ = connect_worker(m, now, 100, "w0");
    let reg = Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: "w0".into(),
        incarnation: Incarnation(1),
        cores: 8,
        memory_mb: 64 * 1024,
        executors,
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    });
    deliver_to_master(m, now, 100, reg)
}

fn subscribe(m: &mut Master, now: Millis, framework: Option<FrameworkId>) {
    let _ = m.handle(now, master::Event::Connected { conn: ConnId(1) });
    let _ = m
        .handle(now, master::Event::Message { conn: ConnId(1), msg: hello(Role::Subscriber, "x") });
    let msg = Message::Subscribe(Subscribe {
        framework,
        name: "app".into(),
        instance: InstanceId(7),
        attempt: 1,
        failover_timeout: Millis(600_000),
        tenant: None,
    });
    let _ = deliver_to_master(m, now, 1, msg);
}

fn restart(mode: RestartMode, attempts: Option<u32>, delay_ms: u64) -> RestartPolicy {
    RestartPolicy { mode, attempts, delay_ms, max_delay_ms: 4_000, healthy_after_ms: 0 }
}

fn spec(restart: RestartPolicy) -> GroupSpec {
    GroupSpec {
        group: "g".into(),
        slots: 1,
        command: vec!["/bin/false".into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy: GroupPolicy { restart, ..Default::default() },
        launch: Default::default(),
    }
}

fn launches(sends: &[(ConnId, Message)]) -> Vec<ExecutorId> {
    sends
        .iter()
        .filter_map(|(_, m)| match m {
            Message::LaunchExecutor { executor, .. } => Some(executor.clone()),
            _ => None,
        })
        .collect()
}

/// The worker reports `id` in `state`; returns what the leader sent.
fn report(
    m: &mut Master,
    now: Millis,
    id: &ExecutorId,
    state: ExecutorState,
) -> Vec<(ConnId, Message)> {
    let framework = m.frameworks().next().expect("a framework").id.clone();
    let msg = Message::ExecutorStatus {
        incarnation: Incarnation(1),
        report: ExecutorReport {
            health: None,
            ran_ms: None,
            resources: Default::default(),
            ports: Default::default(),
            id: id.clone(),
            framework,
            cores: 1,
            memory_mb: 1,
            state,
        },
    };
    deliver_to_master(m, now, 100, msg)
}

/// A tick at `now`, when the restart deadline may be due: what it sends
/// (the same tick's framework heartbeats aside). Worker w0 heartbeats
/// first, so the tick's sweep finds it alive however far the clock ran.
fn restart_timer(m: &mut Master, now: Millis) -> Vec<(ConnId, Message)> {
    let beat = Message::WorkerHeartbeat { incarnation: Incarnation(1) };
    let _ = deliver_to_master(m, now, 100, beat);
    let out = m.handle(now, master::Event::Tick);
    let mut sends = m_sends(&out);
    sends.extend(m_sends(&persist_all(m, now, &out)));
    sends.retain(|(_, msg)| !matches!(msg, Message::FrameworkHeartbeat { .. }));
    sends
}

/// When the leader wants `Timer::Restart` to fire.
fn restart_due(m: &Master) -> Option<Millis> {
    m.deadline(master::Timer::Restart)
}

/// A leader with one worker and a framework whose one-slot group has
/// `policy`; returns it and the first executor.
fn cluster(policy: RestartPolicy) -> (Master, ExecutorId) {
    let mut m = leader_at(Millis(0), vec![]);
    let _ = register(&mut m, Millis(0), vec![]);
    subscribe(&mut m, Millis(0), None);
    let sends = deliver_to_master(
        &mut m,
        Millis(0),
        1,
        Message::DeclareGroup { request: 1, spec: spec(policy) },
    );
    let first = launches(&sends);
    assert_eq!(first.len(), 1, "{sends:?}");
    (m, first[0].clone())
}

fn slot_failed(sends: &[(ConnId, Message)]) -> Option<String> {
    sends.iter().find_map(|(_, m)| match m {
        Message::SlotFailed { reason, .. } => Some(reason.clone()),
        _ => None,
    })
}

#[test]
fn a_failing_batch_slot_waits_its_backoff_and_fails_after_its_attempts() {
    let (mut m, mut x) = cluster(restart(RestartMode::Batch, Some(2), 1_000));
    let mut now = Millis(10);
    for wait in [1_000, 2_000] {
        let sends = report(&mut m, now, &x, ExecutorState::Exited { code: 3 });
        assert!(launches(&sends).is_empty(), "no relaunch before the backoff: {sends:?}");
        assert_eq!(restart_due(&m), Some(now + Millis(wait)), "backoff doubles");
        let g = &m.state().frameworks[0].groups[0];
        assert_eq!((g.waiting, g.last_end.as_deref()), (1, Some("slot 0: exited 3")));
        assert!(restart_timer(&mut m, now + Millis(wait - 1)).is_empty(), "early: nothing");
        now = now + Millis(wait);
        let sends = restart_timer(&mut m, now);
        let again = launches(&sends);
        assert_eq!(again.len(), 1, "relaunched once the wait ended: {sends:?}");
        x = again[0].clone();
        now = now + Millis(10);
    }
    let sends = report(&mut m, now, &x, ExecutorState::Failed { reason: "no such file".into() });
    let reason = slot_failed(&sends).expect("the third failure fails the slot");
    assert!(
        reason
            .contains("failed: no such file; 3 ends in a row; the restart policy allows 2 retries"),
        "{reason}"
    );
    assert!(launches(&sends).is_empty());
    assert_eq!(restart_due(&m), None);
    let fw = m.frameworks().next().unwrap();
    assert!(matches!(fw.groups[0].record.slots[0], SlotOutcome::Failed { .. }));
    assert_eq!(m.state().frameworks[0].state, FrameworkState::Failed);
}

#[test]
fn a_batch_slot_that_exits_0_is_done_and_forgets_its_failures() {
    let (mut m, x) = cluster(restart(RestartMode::Batch, Some(5), 1_000));
    let _ = report(&mut m, Millis(10), &x, ExecutorState::Exited { code: 1 });
    let sends = restart_timer(&mut m, Millis(1_010));
    let y = launches(&sends)[0].clone();
    let sends = report(&mut m, Millis(1_020), &y, ExecutorState::Exited { code: 0 });
    assert!(launches(&sends).is_empty());
    let g = &m.frameworks().next().unwrap().groups[0];
    assert!(matches!(g.record.slots[0], SlotOutcome::Done { .. }));
    assert!(g.record.restarts.is_empty(), "{:?}", g.record.restarts);
    assert_eq!(m.state().frameworks[0].state, FrameworkState::Finished);
}

#[test]
fn a_service_slot_is_restarted_after_an_exit_0_and_its_worker_loss_counts_nothing() {
    let (mut m, x) = cluster(restart(RestartMode::Service, None, 500));
    let sends = report(&mut m, Millis(10), &x, ExecutorState::Exited { code: 0 });
    assert!(launches(&sends).is_empty(), "waits first");
    let y = launches(&restart_timer(&mut m, Millis(510)))[0].clone();
    // Many ends in a row never fail a service without attempts; the wait
    // stops at max_delay.
    let mut now = Millis(600);
    let mut cur = y;
    for _ in 0..6 {
        let _ = report(&mut m, now, &cur, ExecutorState::Exited { code: 0 });
        let due = restart_due(&m).expect("a wait");
        assert!(due <= now + Millis(4_000), "capped at max_delay");
        now = due;
        cur = launches(&restart_timer(&mut m, now))[0].clone();
        now = now + Millis(1);
    }
    assert_eq!(m.state().frameworks[0].state, FrameworkState::Active);
    let failures = m.frameworks().next().unwrap().groups[0].record.restarts[&0].failures;
    assert_eq!(failures, 7);
    // A LOST executor is refilled at once and counts nothing.
    let sends = report(&mut m, now, &cur, ExecutorState::Running);
    assert!(launches(&sends).is_empty());
    let out = m.handle(now, master::Event::Disconnected { conn: ConnId(100) });
    let _ = persist_all(&mut m, now, &out);
    let later = now + Millis(60_000);
    let out = m.handle(later, master::Event::Tick);
    let _ = persist_all(&mut m, later, &out);
    let sends = register(&mut m, later, vec![]);
    assert_eq!(launches(&sends).len(), 1, "refilled at once: {sends:?}");
    let failures = m.frameworks().next().unwrap().groups[0].record.restarts[&0].failures;
    assert_eq!(failures, 7, "a loss is no failure of the executor's own");
}

#[test]
fn an_executor_that_ran_healthily_resets_the_backoff() {
    let mut policy = restart(RestartMode::Service, None, 1_000);
    policy.max_delay_ms = 60_000;
    policy.healthy_after_ms = 30_000;
    let (mut m, x) = cluster(policy);
    let _ = report(&mut m, Millis(5), &x, ExecutorState::Running);
    let _ = report(&mut m, Millis(10), &x, ExecutorState::Exited { code: 1 });
    let y = launches(&restart_timer(&mut m, Millis(1_010)))[0].clone();
    let _ = report(&mut m, Millis(1_020), &y, ExecutorState::Running);
    let _ = report(&mut m, Millis(1_030), &y, ExecutorState::Exited { code: 1 });
    assert_eq!(restart_due(&m), Some(Millis(3_030)), "second end in a row: 2 s");
    let z = launches(&restart_timer(&mut m, Millis(3_030)))[0].clone();
    let _ = report(&mut m, Millis(3_040), &z, ExecutorState::Running);
    // It ran 40 s (≥ healthy_after): the backoff starts again at 1 s.
    let _ = report(&mut m, Millis(43_040), &z, ExecutorState::Exited { code: 1 });
    assert_eq!(restart_due(&m), Some(Millis(44_040)));
}

/// The record the leader last asked to persist for the framework.
fn framework_record(out: &[master::Action]) -> Option<Record> {
    out.iter().rev().find_map(|a| match a {
        master::Action::Store(StoreCommand::Persist {
            record: r @ Record::Framework(_), ..
        }) => Some(r.clone()),
        _ => None,
    })
}

#[test]
fn a_new_leader_keeps_a_stored_backoff_but_never_longer_than_the_policy_allows() {
    let mut policy = restart(RestartMode::Batch, Some(10), 3_000);
    policy.max_delay_ms = 3_000;
    let (mut m, x) = cluster(policy);
    // The failure's record carries the wait's end (wall clock).
    let framework = m.frameworks().next().unwrap().id.clone();
    let msg = Message::ExecutorStatus {
        incarnation: Incarnation(1),
        report: ExecutorReport {
            health: None,
            ran_ms: None,
            resources: Default::default(),
            ports: Default::default(),
            id: x.clone(),
            framework: framework.clone(),
            cores: 1,
            memory_mb: 1,
            state: ExecutorState::Exited { code: 2 },
        },
    };
    let out = m.handle(Millis(1_000), master::Event::Message { conn: ConnId(100), msg });
    let record = framework_record(&out).expect("the end is recorded");
    let Record::Framework(f) = &record else { unreachable!() };
    assert_eq!(f.groups[0].record_wait(), Some(WALL + 1_000 + 3_000));

    // A new leader elected 1 s later (its clock agrees) waits the 2 s left.
    let mut b = leader_at(Millis(2_000), vec![record.clone()]);
    let _ = register(&mut b, Millis(2_000), vec![]);
    subscribe(&mut b, Millis(2_000), Some(framework.clone()));
    let out = b.handle(Millis(2_000), master::Event::Tick);
    let sends = m_sends(&persist_all(&mut b, Millis(2_000), &out));
    assert!(launches(&sends).is_empty(), "still waiting: {sends:?}");
    assert_eq!(restart_due(&b), Some(Millis(4_000)));
    assert_eq!(b.state().frameworks[0].groups[0].waiting, 1);
    assert_eq!(launches(&restart_timer(&mut b, Millis(4_000))).len(), 1);

    // A stored end a day ahead of this leader's clock (a stepped clock):
    // held to the policy's longest wait, 3 s.
    let Record::Framework(mut skewed) = record else { unreachable!() };
    skewed.groups[0].restarts.get_mut(&0).unwrap().not_before_ms += 86_400_000;
    let c = leader_at(Millis(2_000), vec![Record::Framework(skewed)]);
    assert_eq!(restart_due(&c), Some(Millis(5_000)));
}

trait RecordWait {
    fn record_wait(&self) -> Option<u64>;
}

impl RecordWait for regent_core::store::GroupRecord {
    fn record_wait(&self) -> Option<u64> {
        self.restarts.get(&0).map(|r| r.not_before_ms)
    }
}

#[test]
fn a_group_without_a_policy_keeps_the_shared_budget_and_no_wait() {
    let mut cfg = master::Config::new("a".into(), addr("a"));
    cfg.max_executor_retries = 1;
    let mut m = Master::new(cfg);
    let _ = elect(&mut m, Millis(0), 1);
    let _ = register(&mut m, Millis(0), vec![]);
    subscribe(&mut m, Millis(0), None);
    let sends = deliver_to_master(
        &mut m,
        Millis(0),
        1,
        Message::DeclareGroup { request: 1, spec: spec(RestartPolicy::default()) },
    );
    let x = launches(&sends)[0].clone();
    let sends = report(&mut m, Millis(1), &x, ExecutorState::Exited { code: 1 });
    let y = launches(&sends);
    assert_eq!(y.len(), 1, "relaunched at once");
    let sends = report(&mut m, Millis(2), &y[0], ExecutorState::Exited { code: 1 });
    assert!(slot_failed(&sends).unwrap().contains("the group's 1 retries are used up"));
    assert!(m.frameworks().next().unwrap().groups[0].record.restarts.is_empty());
}

#[test]
fn an_out_of_memory_kill_is_counted_and_retried_like_any_failure() {
    let (mut m, x) = cluster(restart(RestartMode::Batch, Some(2), 1_000));
    let now = Millis(10);
    let reason = "out of memory: limit 32 MiB, peak 32 MiB".to_owned();
    let sends = report(&mut m, now, &x, ExecutorState::Failed { reason });
    assert!(slot_failed(&sends).is_none(), "one failure of two allowed retries: {sends:?}");
    assert_eq!(m.metrics().out_of_memory_kills, 1);
    let g = &m.state().frameworks[0].groups[0];
    assert_eq!(
        g.last_end.as_deref(),
        Some("slot 0: failed: out of memory: limit 32 MiB, peak 32 MiB"),
        "the reason is shown with the slot"
    );
    assert_eq!(restart_due(&m), Some(now + Millis(1_000)), "retried after its backoff");
    // A crash is not an out-of-memory kill.
    let sends = restart_timer(&mut m, now + Millis(1_000));
    let x = launches(&sends)[0].clone();
    let _ = report(&mut m, now + Millis(1_100), &x, ExecutorState::Exited { code: 137 });
    assert_eq!(m.metrics().out_of_memory_kills, 1);
}

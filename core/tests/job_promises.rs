//! The job layer's promises, each held against the scenario of issue 41 (docs/design.md#issue-41)
//! that broke it on main 87b59ae (see docs/jobs.md, "What the job layer
//! promises"): every test here failed before its fix.
//!
//! * `a_late_exit_0_of_a_written_off_service_executor_ends_nothing`
//! * `a_healthy_run_is_remembered_across_a_failover`
//! * `a_cordon_outlives_its_worker_going_dead_and_a_new_leader`
//! * `a_broken_update_stops_at_the_first_failed_slot_and_keeps_the_old_executors`
//! * `an_accepted_kill_is_sent_again_when_the_worker_registers_after_a_blip`
//!   (and its scale-down and kill-executor twins)
//! * `a_failure_recorded_by_a_leader_that_died_is_not_counted_again`
//! * `the_gpu_of_an_executor_being_killed_is_not_given_away`
//! * `capacity_freed_by_a_teardown_goes_to_the_framework_that_waits`

mod common;

use common::{connect_worker, hello, m_sends, master};
use regent_core::ids::InstanceId;
use regent_core::master::{self as m, Master};
use regent_core::policy::{GroupPolicy, RestartMode, RestartPolicy};
use regent_core::protocol::{
    ExecutorReport, ExecutorState, GroupSpec, Message, RegisterWorker, Role, Subscribe,
};
use regent_core::resources::Resource;
use regent_core::states::FrameworkState;
use regent_core::store::{Maintenance, Record, RecordKey, SlotOutcome, StoreCommand, StoreEvent};
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis, WorkerId};
use std::collections::BTreeMap;

/// Leaders' wall clock at their local time 0.
const WALL: u64 = 1_764_000_000_000;
/// The operator's connection.
const OP: ConnId = ConnId(9);

/// A leader, the store it writes to (exactly what was confirmed durable)
/// and the time.
struct Sim {
    m: Master,
    store: BTreeMap<RecordKey, Record>,
    now: Millis,
    /// Workers by connection: (worker, incarnation).
    workers: BTreeMap<u64, (String, u64)>,
}

impl Sim {
    fn new() -> Sim {
        let mut s = Sim {
            m: master("a"),
            store: BTreeMap::new(),
            now: Millis(0),
            workers: BTreeMap::new(),
        };
        s.elect("a", Vec::new());
        s
    }

    /// `name` is elected over the records in the store.
    fn elect(&mut self, name: &str, records: Vec<Record>) {
        self.m = master(name);
        let now = self.now;
        let out = self.m.handle(now, m::Event::Elected { floor: Epoch(1), clock: WALL + now.0 });
        assert_eq!(out, vec![m::Action::Store(StoreCommand::LoadRecords)]);
        let out = self.m.handle(now, m::Event::Store(StoreEvent::Loaded { records }));
        let _ = self.settle(out);
        let _ = self.m.handle(now, m::Event::Connected { conn: OP });
        let _ = self.m.handle(now, m::Event::Message { conn: OP, msg: hello(Role::Client, "op") });
    }

    /// The leader dies; `name` takes over from the store.
    fn failover(&mut self, name: &str) {
        let records = self.store.values().cloned().collect();
        self.elect(name, records);
    }

    fn settle(&mut self, actions: Vec<m::Action>) -> Vec<(ConnId, Message)> {
        let mut sends = m_sends(&actions);
        let mut pending = actions;
        while !pending.is_empty() {
            let mut next = Vec::new();
            for a in pending {
                let write = match a {
                    m::Action::Store(StoreCommand::Persist { write, record }) => {
                        self.store.insert(record.key(), record);
                        write
                    }
                    m::Action::Store(StoreCommand::Unpersist { write, key, .. }) => {
                        self.store.remove(&key);
                        write
                    }
                    _ => continue,
                };
                let out = self.m.handle(self.now, m::Event::Store(StoreEvent::Persisted { write }));
                sends.extend(m_sends(&out));
                next.extend(out);
            }
            pending = next;
        }
        sends
    }

    fn feed(&mut self, event: m::Event) -> Vec<(ConnId, Message)> {
        let out = self.m.handle(self.now, event);
        self.settle(out)
    }

    fn send(&mut self, conn: u64, msg: Message) -> Vec<(ConnId, Message)> {
        self.feed(m::Event::Message { conn: ConnId(conn), msg })
    }

    fn advance(&mut self, ms: u64) {
        self.now = self.now + Millis(ms);
    }

    /// Worker `name` (incarnation `inc`) connects on `conn` and registers
    /// with `cores`, offering `gpus` GPUs, reporting `executors`.
    fn register(
        &mut self,
        conn: u64,
        name: &str,
        inc: u64,
        cores: u32,
        gpus: u32,
        executors: Vec<ExecutorReport>,
    ) -> Vec<(ConnId, Message)> {
        let now = self.now;
        let _ = connect_worker(&mut self.m, now, conn, name);
        self.workers.insert(conn, (name.to_owned(), inc));
        let resources = if gpus == 0 {
            Vec::new()
        } else {
            vec![Resource {
                name: "gpu".into(),
                addresses: (0..gpus).map(|i| i.to_string()).collect(),
            }]
        };
        self.send(
            conn,
            Message::RegisterWorker(RegisterWorker {
                users: vec![],
                resources,
                host: None,
                ports: vec![],
                worker: name.into(),
                incarnation: Incarnation(inc),
                cores,
                memory_mb: 1024,
                executors,
                epoch_seen: Epoch(1),
                launch_seen: 0,
                attributes: vec![],
            }),
        )
    }

    /// The worker on `conn` reports `id` in `state`.
    fn status(
        &mut self,
        conn: u64,
        id: &ExecutorId,
        state: ExecutorState,
    ) -> Vec<(ConnId, Message)> {
        let inc = self.workers[&conn].1;
        let report = report_of(id, state);
        self.send(conn, Message::ExecutorStatus { incarnation: Incarnation(inc), report })
    }

    /// A subscriber on `conn` subscribes a new framework.
    fn subscribe(&mut self, conn: u64) -> FrameworkId {
        let now = self.now;
        let _ = self.m.handle(now, m::Event::Connected { conn: ConnId(conn) });
        let _ = self.m.handle(
            now,
            m::Event::Message { conn: ConnId(conn), msg: hello(Role::Subscriber, "s") },
        );
        let sends = self.send(
            conn,
            Message::Subscribe(Subscribe {
                framework: None,
                name: format!("app{conn}"),
                instance: InstanceId(conn),
                attempt: 0,
                failover_timeout: Millis(600_000),
                tenant: None,
            }),
        );
        sends
            .iter()
            .find_map(|(_, m)| match m {
                Message::Subscribed { framework, .. } => Some(framework.clone()),
                _ => None,
            })
            .expect("subscribed")
    }

    /// The subscriber on `conn` subscribes framework `fw` again (to a new
    /// leader).
    fn resubscribe(&mut self, conn: u64, fw: &FrameworkId) {
        let _ = self.send(
            conn,
            Message::Subscribe(Subscribe {
                framework: Some(fw.clone()),
                name: format!("app{conn}"),
                instance: InstanceId(conn),
                attempt: 1,
                failover_timeout: Millis(600_000),
                tenant: None,
            }),
        );
    }

    fn declare(&mut self, conn: u64, spec: GroupSpec) -> Vec<(ConnId, Message)> {
        self.send(conn, Message::DeclareGroup { request: 1, spec })
    }

    fn operate(&mut self, msg: Message) -> Vec<(ConnId, Message)> {
        self.feed(m::Event::Message { conn: OP, msg })
    }

    /// Worker connection `conn` drops (the worker stays ALIVE until its
    /// timeout).
    fn drop_conn(&mut self, conn: u64) {
        self.workers.remove(&conn);
        let _ = self.feed(m::Event::Disconnected { conn: ConnId(conn) });
    }

    /// Time passes past every worker's timeout, the connected workers
    /// heartbeating; the silent ones are DEAD.
    fn sweep_after(&mut self, ms: u64) -> Vec<(ConnId, Message)> {
        self.advance(ms);
        let connected: Vec<(u64, u64)> =
            self.workers.iter().map(|(conn, (_, inc))| (*conn, *inc)).collect();
        for (conn, inc) in connected {
            let _ = self.send(conn, Message::WorkerHeartbeat { incarnation: Incarnation(inc) });
        }
        self.feed(m::Event::Tick)
    }

    fn slots(&self, fw: &FrameworkId) -> Vec<SlotOutcome> {
        let f = self.m.frameworks().find(|f| &f.id == fw).expect("framework");
        f.groups[0].record.slots.clone()
    }

    fn framework_state(&self, fw: &FrameworkId) -> FrameworkState {
        self.m.state().frameworks.iter().find(|f| &f.id == fw).expect("framework").state
    }
}

/// A leader with worker w0 (1 core, connection 100) running the one
/// executor of a framework (subscribed on connection 1) whose group is
/// `spec`.
fn one_running(spec: GroupSpec) -> (Sim, FrameworkId, ExecutorId) {
    let mut s = Sim::new();
    let _ = s.register(100, "w0", 1, 1, 0, vec![]);
    let fw = s.subscribe(1);
    let sends = s.declare(1, spec);
    let [(100, x)] = &launches(&sends)[..] else { panic!("{sends:?}") };
    let x = x.clone();
    let _ = s.status(100, &x, ExecutorState::Running);
    (s, fw, x)
}

fn report_of(id: &ExecutorId, state: ExecutorState) -> ExecutorReport {
    let framework = FrameworkId::new(id.as_str().split('/').next().expect("framework part"));
    ExecutorReport {
        health: None,
        ran_ms: None,
        id: id.clone(),
        framework,
        cores: 1,
        memory_mb: 1,
        state,
        ports: vec![],
        resources: vec![],
    }
}

fn spec(group: &str, slots: u32, restart: RestartPolicy) -> GroupSpec {
    GroupSpec {
        group: group.into(),
        slots,
        command: vec!["/bin/sleep".into(), "1000".into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy: GroupPolicy { restart, ..Default::default() },
        launch: Default::default(),
    }
}

fn service() -> RestartPolicy {
    RestartPolicy { mode: RestartMode::Service, ..Default::default() }
}

/// (connection, executor) of every launch in `sends`.
fn launches(sends: &[(ConnId, Message)]) -> Vec<(u64, ExecutorId)> {
    sends
        .iter()
        .filter_map(|(c, m)| match m {
            Message::LaunchExecutor { executor, .. } => Some((c.0, executor.clone())),
            _ => None,
        })
        .collect()
}

/// (connection, executor) of every kill or stop in `sends`.
fn kills(sends: &[(ConnId, Message)]) -> Vec<(u64, ExecutorId)> {
    sends
        .iter()
        .filter_map(|(c, m)| match m {
            Message::KillExecutorOnWorker { executor, .. }
            | Message::StopExecutorOnWorker { executor, .. } => Some((c.0, executor.clone())),
            _ => None,
        })
        .collect()
}

fn accepted(sends: &[(ConnId, Message)]) -> bool {
    sends.iter().any(|(_, m)| matches!(m, Message::RequestAccepted { .. }))
}

#[test]
fn a_late_exit_0_of_a_written_off_service_executor_ends_nothing() {
    let (mut s, fw, x) = one_running(spec("svc", 1, service()));
    let x = &x;
    let _ = s.register(101, "w1", 1, 1, 0, vec![]);
    // w0 is partitioned away and declared DEAD; X is replaced by Y on w1.
    s.drop_conn(100);
    let sends = s.sweep_after(60_000);
    let [(101, y)] = &launches(&sends)[..] else { panic!("{sends:?}") };
    let _ = s.status(101, y, ExecutorState::Running);
    // X exited 0 during the partition; w0 comes back and says so.
    let sends =
        s.register(102, "w0", 1, 1, 0, vec![report_of(x, ExecutorState::Exited { code: 0 })]);
    assert!(kills(&sends).is_empty(), "the running replacement is left alone: {sends:?}");
    assert_eq!(s.slots(&fw), vec![SlotOutcome::Pending], "a service's slot never ends");
    assert_eq!(s.framework_state(&fw), FrameworkState::Active);
    let acked = sends.iter().any(|(c, m)| {
        c.0 == 102 && matches!(m, Message::ExecutorStatusAck { executor, .. } if executor == x)
    });
    assert!(acked, "the old report is acknowledged (nothing to record): {sends:?}");
}

#[test]
fn a_late_exit_0_of_a_batch_executor_still_completes_its_slot() {
    // The batch twin keeps its documented behaviour: the work is done.
    let (mut s, fw, x) = one_running(spec("b", 1, RestartPolicy::default()));
    let x = &x;
    let _ = s.register(101, "w1", 1, 1, 0, vec![]);
    s.drop_conn(100);
    let sends = s.sweep_after(60_000);
    let [(101, y)] = &launches(&sends)[..] else { panic!("{sends:?}") };
    let sends =
        s.register(102, "w0", 1, 1, 0, vec![report_of(x, ExecutorState::Exited { code: 0 })]);
    assert_eq!(kills(&sends), vec![(101, y.clone())], "the redundant replacement is killed");
    assert!(matches!(s.slots(&fw)[0], SlotOutcome::Done { .. }));
}

/// An accepted kill whose worker's connection is down when it is sent: the
/// kill is sent again when the worker registers again reporting the
/// executor running.
fn kill_survives_a_blip(request: impl FnOnce(&mut Sim, &FrameworkId, &ExecutorId) -> bool) {
    let mut s = Sim::new();
    let _ = s.register(100, "w0", 1, 2, 0, vec![]);
    let fw = s.subscribe(1);
    let sends = s.declare(1, spec("g", 2, RestartPolicy::default()));
    let launched = launches(&sends);
    assert_eq!(launched.len(), 2, "{sends:?}");
    for (_, x) in &launched {
        let _ = s.status(100, x, ExecutorState::Running);
    }
    let victim = launched.iter().map(|(_, x)| x.clone()).max().expect("two");
    let other = launched.iter().map(|(_, x)| x.clone()).min().expect("two");
    // A blip: the worker's connection is down for a moment.
    s.drop_conn(100);
    assert!(request(&mut s, &fw, &victim), "the kill is accepted");
    s.advance(500);
    let sends = s.register(
        101,
        "w0",
        1,
        2,
        0,
        vec![report_of(&other, ExecutorState::Running), report_of(&victim, ExecutorState::Running)],
    );
    assert!(
        kills(&sends).contains(&(101, victim.clone())),
        "the accepted kill is carried out on the new connection: {sends:?}"
    );
    assert!(!kills(&sends).iter().any(|(_, x)| *x == other), "{sends:?}");
    // Reported again (a second blip): sent again.
    let sends = s.register(
        102,
        "w0",
        1,
        2,
        0,
        vec![report_of(&victim, ExecutorState::Running), report_of(&other, ExecutorState::Running)],
    );
    assert!(kills(&sends).contains(&(102, victim.clone())), "{sends:?}");
    // Its end is reported: nothing more is sent for it.
    let _ = s.status(102, &victim, ExecutorState::Killed);
    let sends = s.register(103, "w0", 1, 2, 0, vec![report_of(&other, ExecutorState::Running)]);
    assert!(kills(&sends).is_empty(), "{sends:?}");
}

#[test]
fn an_accepted_kill_is_sent_again_when_the_worker_registers_after_a_blip() {
    kill_survives_a_blip(|s, _, x| {
        accepted(&s.send(1, Message::KillExecutor { request: 5, executor: x.clone() }))
    });
}

#[test]
fn a_scale_down_kill_is_sent_again_when_the_worker_registers_after_a_blip() {
    kill_survives_a_blip(|s, fw, _| {
        accepted(&s.operate(Message::ScaleGroup {
            request: 5,
            framework: fw.clone(),
            group: "g".into(),
            slots: 1,
            remove: Vec::new(),
            stop: None,
        }))
    });
}

#[test]
fn an_operator_kill_without_refill_is_sent_again_when_the_worker_registers_after_a_blip() {
    kill_survives_a_blip(|s, _, x| {
        accepted(&s.operate(Message::OperatorKillExecutor {
            request: 5,
            executor: x.clone(),
            refill: false,
        }))
    });
}

#[test]
fn a_failure_recorded_by_a_leader_that_died_is_not_counted_again() {
    let policy = RestartPolicy { attempts: Some(1), ..Default::default() };
    let (mut s, fw, x) = one_running(spec("g", 1, policy));
    let x = &x;
    // X exits 1; the leader records it durably and dies before its
    // acknowledgement reaches the worker (the write is durable: the store
    // holds it; what the leader sent after it is lost with it).
    let _ = s.status(100, x, ExecutorState::Exited { code: 1 });
    s.failover("b");
    s.resubscribe(1, &fw);
    // The worker still holds the terminal report and gives it to the new
    // leader, as the protocol wants.
    let sends =
        s.register(101, "w0", 1, 1, 0, vec![report_of(x, ExecutorState::Exited { code: 1 })]);
    assert!(
        !sends.iter().any(|(_, m)| matches!(m, Message::SlotFailed { .. })),
        "one crash under attempts = 1 is retried, not failed: {sends:?}"
    );
    assert_eq!(s.slots(&fw), vec![SlotOutcome::Pending]);
    let f = s.m.frameworks().find(|f| f.id == fw).expect("framework");
    assert_eq!(f.groups[0].record.restarts[&0].failures, 1, "counted once");
}

/// Sim seed 36 with `--api-jobs --services` (docs/design.md#simulator-seeds): an
/// end the worker still holds unacknowledged, of an executor older than
/// the one whose end its slot counted last, is not counted again by a new
/// leader (the slot moved on past it; `counted` names only the last).
#[test]
fn an_unacknowledged_end_older_than_the_slots_last_counted_one_is_not_counted_again() {
    let policy = RestartPolicy { attempts: Some(5), ..Default::default() };
    let (mut s, fw, x1) = one_running(spec("g", 1, policy));
    // X1 fails, is counted, and its retry X2 fails too; the worker never
    // hears either acknowledgement (the leader dies with them).
    let mut sends = s.status(100, &x1, ExecutorState::Exited { code: 1 });
    if launches(&sends).is_empty() {
        sends = s.sweep_after(60_000); // after its backoff
    }
    let [(100, x2)] = &launches(&sends)[..] else { panic!("X1 retried: {sends:?}") };
    let x2 = x2.clone();
    let _ = s.status(100, &x2, ExecutorState::Running);
    let _ = s.status(100, &x2, ExecutorState::Exited { code: 1 });
    let f = s.m.frameworks().find(|f| f.id == fw).expect("framework");
    assert_eq!(f.groups[0].record.restarts[&0].failures, 2);
    s.failover("b");
    s.resubscribe(1, &fw);
    // The worker gives the new leader both ends, oldest first.
    let _ = s.register(
        101,
        "w0",
        1,
        1,
        0,
        vec![
            report_of(&x1, ExecutorState::Exited { code: 1 }),
            report_of(&x2, ExecutorState::Exited { code: 1 }),
        ],
    );
    let f = s.m.frameworks().find(|f| f.id == fw).expect("framework");
    assert_eq!(f.groups[0].record.restarts[&0].failures, 2, "each end counted once");
    assert_eq!(s.slots(&fw), vec![SlotOutcome::Pending]);
}

#[test]
fn a_failure_recorded_by_a_leader_that_died_is_not_charged_twice_to_the_shared_budget() {
    let mut s = Sim::new();
    let _ = s.register(100, "w0", 1, 1, 0, vec![]);
    let fw = s.subscribe(1);
    let sends = s.declare(1, spec("g", 1, RestartPolicy::default()));
    let [(100, x)] = &launches(&sends)[..] else { panic!("{sends:?}") };
    let _ = s.status(100, x, ExecutorState::Exited { code: 1 });
    s.failover("b");
    let _ = s.register(101, "w0", 1, 1, 0, vec![report_of(x, ExecutorState::Exited { code: 1 })]);
    let f = s.m.frameworks().find(|f| f.id == fw).expect("framework");
    assert_eq!(f.groups[0].record.retries_used, 1, "counted once");
}

#[test]
fn the_gpu_of_an_executor_being_killed_is_not_given_away() {
    let mut s = Sim::new();
    let _ = s.register(100, "w0", 1, 4, 1, vec![]);
    let fa = s.subscribe(1);
    let mut gpu = spec("a", 1, RestartPolicy::default());
    gpu.launch.resources = vec![("gpu".into(), 1)];
    let sends = s.declare(1, gpu.clone());
    let [(100, x)] = &launches(&sends)[..] else { panic!("{sends:?}") };
    let mut held = report_of(x, ExecutorState::Running);
    held.resources = vec![("gpu".into(), vec!["0".into()])];
    let _ =
        s.send(100, Message::ExecutorStatus { incarnation: Incarnation(1), report: held.clone() });
    // w0 is declared DEAD; X is replaced on w1; group b waits for a GPU.
    let _ = s.register(101, "w1", 1, 4, 1, vec![]);
    s.drop_conn(100);
    let sends = s.sweep_after(60_000);
    assert_eq!(launches(&sends).len(), 1, "X replaced on w1: {sends:?}");
    let fb = s.subscribe(2);
    gpu.group = "b".into();
    let sends = s.declare(2, gpu);
    assert!(launches(&sends).is_empty(), "no GPU free: {sends:?}");
    // w0 returns still running X: X is killed, and its GPU stays counted
    // until its end is reported.
    let sends = s.register(102, "w0", 1, 4, 1, vec![held]);
    // Killed once, right after its `Registered` (a worker that registered
    // with every master at once follows this leader only from then, so a
    // command sent before would be dropped):
    // sim seed 99443, docs/design.md#simulator-seeds.
    assert_eq!(kills(&sends), vec![(102, x.clone())], "{sends:?}");
    let registered = sends.iter().position(|(_, m)| matches!(m, Message::Registered { .. }));
    let kill = sends.iter().position(|(_, m)| matches!(m, Message::KillExecutorOnWorker { .. }));
    assert!(registered.is_some() && registered < kill, "the kill follows Registered: {sends:?}");
    assert!(launches(&sends).is_empty(), "the GPU X still holds is not given away: {sends:?}");
    // X ends: b's slot gets the GPU at once.
    let sends = s.status(102, x, ExecutorState::Killed);
    let placed = launches(&sends);
    assert_eq!(placed.len(), 1, "{sends:?}");
    assert!(placed[0].1.as_str().starts_with(fb.as_str()), "{placed:?}");
    let _ = fa;
}

#[test]
fn a_launch_refused_for_a_busy_resource_is_requeued_not_charged() {
    let mut s = Sim::new();
    let _ = s.register(100, "w0", 1, 4, 1, vec![]);
    let fw = s.subscribe(1);
    let mut gpu = spec("a", 1, RestartPolicy { attempts: Some(0), ..Default::default() });
    gpu.launch.resources = vec![("gpu".into(), 1)];
    let sends = s.declare(1, gpu);
    let [(100, x)] = &launches(&sends)[..] else { panic!("{sends:?}") };
    // The worker had the GPU held by something the leader did not know of.
    let reason = regent_core::launch::refused_launch("gpu: 1 wanted, 0 free");
    let sends = s.status(100, x, ExecutorState::Failed { reason });
    assert!(
        !sends.iter().any(|(_, m)| matches!(m, Message::SlotFailed { .. })),
        "a refused launch is no failure of the executor's: {sends:?}"
    );
    assert_eq!(s.slots(&fw), vec![SlotOutcome::Pending]);
    assert!(launches(&sends).is_empty(), "not at once (no launch loop): {sends:?}");
    s.advance(1_000);
    let sends = s.feed(m::Event::Tick);
    assert_eq!(launches(&sends).len(), 1, "re-queued and placed again: {sends:?}");
}

#[test]
fn capacity_freed_by_a_teardown_goes_to_the_framework_that_waits() {
    let mut s = Sim::new();
    let _ = s.register(100, "w0", 1, 2, 0, vec![]);
    let _fa = s.subscribe(1);
    let sends = s.declare(1, spec("a", 2, RestartPolicy::default()));
    let a = launches(&sends);
    assert_eq!(a.len(), 2);
    for (_, x) in &a {
        let _ = s.status(100, x, ExecutorState::Running);
    }
    let fb = s.subscribe(2);
    let sends = s.declare(2, spec("b", 2, RestartPolicy::default()));
    assert!(launches(&sends).is_empty(), "B waits for both cores: {sends:?}");
    // A is torn down: its executors are killed...
    let sends = s.send(1, Message::Teardown { request: 3 });
    assert_eq!(kills(&sends).len(), 2, "{sends:?}");
    assert!(launches(&sends).is_empty(), "the cores are A's until its executors end: {sends:?}");
    // ... and each core goes to B as its executor's end is reported.
    let mut placed = Vec::new();
    for (_, x) in &a {
        placed.extend(launches(&s.status(100, x, ExecutorState::Killed)));
    }
    assert_eq!(placed.len(), 2, "B runs on the freed cores");
    assert!(placed.iter().all(|(_, x)| x.as_str().starts_with(fb.as_str())));
}

#[test]
fn capacity_freed_by_a_teardown_is_reused_when_the_worker_reports_nothing_left() {
    // The kills' ends come with a registration (the worker reconnected
    // after they ended): the cores go to B then.
    let mut s = Sim::new();
    let _ = s.register(100, "w0", 1, 2, 0, vec![]);
    let _fa = s.subscribe(1);
    let a = launches(&s.declare(1, spec("a", 2, RestartPolicy::default())));
    for (_, x) in &a {
        let _ = s.status(100, x, ExecutorState::Running);
    }
    let _fb = s.subscribe(2);
    let _ = s.declare(2, spec("b", 2, RestartPolicy::default()));
    let _ = s.operate(Message::KillFramework { request: 4, framework: _fa.clone() });
    s.drop_conn(100);
    let sends = s.register(101, "w0", 1, 2, 0, vec![]);
    assert_eq!(launches(&sends).len(), 2, "{sends:?}");
}

#[test]
fn a_broken_update_fails_at_its_first_start_failure_and_is_reverted_keeping_the_old_executors() {
    let policy = RestartPolicy { attempts: Some(1), ..Default::default() };
    let mut s = Sim::new();
    let _ = s.register(100, "w0", 1, 8, 0, vec![]);
    let fw = s.subscribe(1);
    let old = spec("web", 3, policy.clone());
    let sends = s.declare(1, old.clone());
    let first = launches(&sends);
    assert_eq!(first.len(), 3);
    for (_, x) in &first {
        let _ = s.status(100, x, ExecutorState::Running);
    }
    let mut new = old.clone();
    new.command = vec!["/no/such/binary".into()];
    let mut sends = s.send(1, Message::UpdateGroup { request: 2, spec: new, max_parallel: 1 });
    assert!(accepted(&sends));
    // Every executor of the new spec fails to start, every one of the old
    // spec runs; the old ones answer their stops.
    let mut stopped = Vec::new();
    let mut broken = 0;
    for _ in 0..20 {
        let mut next = Vec::new();
        for (_, x) in kills(&sends) {
            stopped.push(x.clone());
            next.extend(s.status(100, &x, ExecutorState::Killed));
        }
        for (command, x) in launched_commands(&sends) {
            if command == ["/no/such/binary"] {
                broken += 1;
                let reason = "no such file: /no/such/binary".to_owned();
                next.extend(s.status(100, &x, ExecutorState::Failed { reason }));
            } else {
                next.extend(s.status(100, &x, ExecutorState::Running));
            }
        }
        if next.is_empty() {
            break;
        }
        sends = next;
    }
    assert_eq!(stopped.len(), 1, "only the first old executor was stopped: {stopped:?}");
    assert_eq!(broken, 1, "one start failure fails the deployment: no retry of the broken spec");
    let slots = s.slots(&fw);
    assert!(slots.iter().all(|o| matches!(o, SlotOutcome::Pending)), "no slot failed: {slots:?}");
    let live: Vec<_> =
        s.m.state()
            .executors
            .iter()
            .filter(|e| e.state == ExecutorState::Running)
            .map(|e| e.id.clone())
            .collect();
    assert_eq!(live.len(), 3, "the two old executors and the reverted slot run: {live:?}");
    let g = &s.m.frameworks().find(|f| f.id == fw).expect("fw").groups[0];
    assert_eq!(g.record.spec, old, "the spec is the last healthy one again");
    let d = g.record.deployment.as_ref().expect("the revert");
    assert_eq!((d.seq, d.revert_of, d.policy.canary), (2, Some(1), 0));
    let view = &s.m.state().frameworks[0].groups[0];
    let last = view.last_end.as_deref().unwrap_or_default();
    assert!(
        last.contains("failed to start")
            && last.contains("no such file")
            && last.contains("reverted by 2"),
        "{last}"
    );
}

/// (command, executor) of every launch in `sends`.
fn launched_commands(sends: &[(ConnId, Message)]) -> Vec<(Vec<String>, ExecutorId)> {
    sends
        .iter()
        .filter_map(|(_, m)| match m {
            Message::LaunchExecutor { executor, spec, .. } => {
                Some((spec.command.clone(), executor.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_cordon_outlives_its_worker_going_dead_and_a_new_leader() {
    let mut s = Sim::new();
    let _ = s.register(100, "w0", 1, 2, 0, vec![]);
    let _ = s.register(101, "w1", 1, 2, 0, vec![]);
    let sends = s.operate(Message::CordonWorker { request: 1, worker: WorkerId::new("w0") });
    assert!(accepted(&sends));
    // Shut down for maintenance, swept DEAD; the leader fails over.
    s.drop_conn(100);
    let _ = s.sweep_after(60_000);
    s.failover("b");
    let _ = s.register(103, "w1", 1, 2, 0, vec![]);
    // The machine under repair comes back: still cordoned, nothing placed.
    let _ = s.register(102, "w0", 1, 2, 0, vec![]);
    let w0 = s.m.state().workers.into_iter().find(|w| w.id.as_str() == "w0").expect("w0");
    assert!(w0.cordoned, "{w0:?}");
    let _ = s.subscribe(1);
    let sends = s.declare(1, spec("g", 3, RestartPolicy::default()));
    assert!(launches(&sends).iter().all(|(c, _)| *c == 103), "{sends:?}");
    let _ = Maintenance::Cordoned;
}

#[test]
fn a_healthy_run_is_remembered_across_a_failover() {
    let policy =
        RestartPolicy { attempts: Some(1), healthy_after_ms: 60_000, ..Default::default() };
    let (mut s, fw, x) = one_running(spec("g", 1, policy));
    let x = &x;
    let sends = s.status(100, x, ExecutorState::Exited { code: 1 });
    let [(100, y)] = &launches(&sends)[..] else {
        panic!("one failure recorded, retried: {sends:?}")
    };
    let mut running = report_of(y, ExecutorState::Running);
    running.ran_ms = Some(0);
    let _ = s.send(100, Message::ExecutorStatus { incarnation: Incarnation(1), report: running });
    // Y runs healthily for an hour; the leader fails over.
    s.advance(3_600_000);
    s.failover("b");
    s.resubscribe(1, &fw);
    let mut still = report_of(y, ExecutorState::Running);
    still.ran_ms = Some(3_600_000);
    let _ = s.register(101, "w0", 1, 1, 0, vec![still]);
    // It crashes five seconds later: retried, its slot's failures reset.
    s.advance(5_000);
    let mut end = report_of(y, ExecutorState::Exited { code: 1 });
    end.ran_ms = Some(3_605_000);
    let sends = s.send(101, Message::ExecutorStatus { incarnation: Incarnation(1), report: end });
    assert!(
        !sends.iter().any(|(_, m)| matches!(m, Message::SlotFailed { .. })),
        "an hour's healthy run resets the slot's failures: {sends:?}"
    );
    assert_eq!(launches(&sends).len(), 1, "{sends:?}");
}

#[test]
fn a_slot_failed_during_a_rollout_counts_as_down() {
    let policy = RestartPolicy { attempts: Some(0), ..Default::default() };
    let mut s = Sim::new();
    let _ = s.register(100, "w0", 1, 8, 0, vec![]);
    let fw = s.subscribe(1);
    let old = spec("web", 3, policy);
    let first = launches(&s.declare(1, old.clone()));
    assert_eq!(first.len(), 3);
    for (_, x) in &first {
        let _ = s.status(100, x, ExecutorState::Running);
    }
    let mut new = old;
    new.command = vec!["/bin/sleep".into(), "2000".into()];
    let sends = s.send(1, Message::UpdateGroup { request: 2, spec: new, max_parallel: 1 });
    let stopped = kills(&sends);
    assert_eq!(stopped.len(), 1, "{sends:?}");
    // Meanwhile an old executor of another slot crashes for good.
    let crashed = first.iter().map(|(_, x)| x).find(|x| **x != stopped[0].1).expect("another");
    let _ = s.status(100, crashed, ExecutorState::Exited { code: 1 });
    assert!(s.slots(&fw).iter().any(|o| matches!(o, SlotOutcome::Failed { .. })));
    // The stopped one ends and its slot runs the new version: one slot is
    // still down (the failed one), so nothing more is stopped.
    let sends = s.status(100, &stopped[0].1, ExecutorState::Killed);
    let [(100, y)] = &launches(&sends)[..] else { panic!("{sends:?}") };
    let sends = s.status(100, y, ExecutorState::Running);
    assert!(kills(&sends).is_empty(), "a failed slot is down: max_parallel 1 reached: {sends:?}");
}

#[test]
fn a_kill_with_refill_accepted_before_a_failover_is_carried_out_by_the_new_leader() {
    // Found by the job-layer soak (`regent-soak --jobs --operator`, seeds
    // 910 and 1542): the operator's kill-executor with refill was accepted,
    // its kill lost with a blip, and the next leader adopted the executor.
    let (mut s, fw, x) = one_running(spec("g", 1, RestartPolicy::default()));
    let _ = s.register(101, "w1", 1, 1, 0, vec![]);
    s.drop_conn(100);
    let sends =
        s.operate(Message::OperatorKillExecutor { request: 7, executor: x.clone(), refill: true });
    assert!(accepted(&sends), "{sends:?}");
    s.failover("b");
    s.resubscribe(1, &fw);
    let mut placed = launches(&s.register(103, "w1", 1, 1, 0, vec![]));
    let sends = s.register(102, "w0", 1, 1, 0, vec![report_of(&x, ExecutorState::Running)]);
    assert!(kills(&sends).contains(&(102, x.clone())), "the new leader kills it: {sends:?}");
    placed.extend(launches(&sends));
    placed.extend(launches(&s.feed(m::Event::Tick)));
    placed.extend(launches(&s.status(102, &x, ExecutorState::Killed)));
    assert_eq!(placed.len(), 1, "its slot is refilled once: {placed:?}");
    assert_ne!(placed[0].1, x);
    assert_eq!(s.slots(&fw), vec![SlotOutcome::Pending]);
    let g = &s.m.frameworks().find(|f| f.id == fw).expect("fw").groups[0];
    // Its end charged nothing, and it stays named as replaced: a report of
    // its end heard again is never adopted and counted (`--api-jobs
    // --preemption`: sim seeds 71 and 4534 (docs/design.md#simulator-seeds)).
    assert!(g.record.counted.is_empty() && g.record.retries_used == 0, "{:?}", g.record);
    assert_eq!(g.record.replacing.get(&0), Some(&x), "{:?}", g.record.replacing);
}

#[test]
fn a_framework_kill_of_a_lost_executor_is_carried_out_by_the_new_leader() {
    // `--api-jobs --services --singletons`: sim seed 64069 (docs/design.md#simulator-seeds). x's
    // worker is cut off; the leader writes x off (LOST) and refills its
    // slot with y. The framework kills x: accepted. After a failover x's
    // worker registers first, with x still running, y's worker not yet: the
    // new leader adopted x into its empty slot, and the killed executor
    // ran on, shown RUNNING to the framework that killed it.
    let (mut s, fw, x) = one_running(spec("svc", 1, service()));
    let _ = s.register(101, "w1", 1, 1, 0, vec![]);
    s.drop_conn(100);
    let sends = s.sweep_after(60_000);
    let [(101, y)] = &launches(&sends)[..] else { panic!("the slot is refilled: {sends:?}") };
    let y = y.clone();
    let _ = s.status(101, &y, ExecutorState::Running);
    let sends = s.send(1, Message::KillExecutor { request: 5, executor: x.clone() });
    assert!(accepted(&sends), "{sends:?}");
    s.failover("b");
    s.resubscribe(1, &fw);
    let sends = s.register(102, "w0", 1, 1, 0, vec![report_of(&x, ExecutorState::Running)]);
    assert!(kills(&sends).contains(&(102, x.clone())), "the new leader kills x: {sends:?}");
    let shown_running = sends.iter().any(|(c, m)| {
        *c == ConnId(1)
            && matches!(m, Message::ExecutorUpdate { info, .. }
                if info.id == x && info.state == ExecutorState::Running)
    });
    assert!(!shown_running, "x is not shown running again: {sends:?}");
    let g = &s.m.frameworks().find(|f| f.id == fw).expect("fw").groups[0];
    assert_ne!(g.current[0], Some(x.clone()), "x holds no slot");
    // y's worker registers: y keeps the slot.
    let sends = s.register(103, "w1", 1, 1, 0, vec![report_of(&y, ExecutorState::Running)]);
    assert!(!kills(&sends).contains(&(103, y.clone())), "{sends:?}");
    let g = &s.m.frameworks().find(|f| f.id == fw).expect("fw").groups[0];
    assert_eq!(g.current[0], Some(y), "{:?}", g.current);
}

#[test]
fn a_replaced_executors_end_heard_twice_is_never_charged() {
    // `--api-jobs --preemption`: sim seeds 71 and 4534 (docs/design.md#simulator-seeds). An executor
    // stopped to be replaced (a kill with refill; a preemption's victim
    // alike) ends on its own (exit 1) while its worker is cut off; after a
    // failover its worker registers twice before it hears the
    // acknowledgement, the second time without the launch that refilled
    // the slot meanwhile (written off). Its end is never charged.
    let (mut s, fw, x) = one_running(spec("g", 1, RestartPolicy::default()));
    s.drop_conn(100);
    let sends =
        s.operate(Message::OperatorKillExecutor { request: 7, executor: x.clone(), refill: true });
    assert!(accepted(&sends), "{sends:?}");
    s.failover("b");
    s.resubscribe(1, &fw);
    let ended = || vec![report_of(&x, ExecutorState::Exited { code: 1 })];
    let _ = s.register(102, "w0", 1, 1, 0, ended());
    let _ = s.feed(m::Event::Tick);
    let _ = s.register(103, "w0", 1, 1, 0, ended());
    let _ = s.feed(m::Event::Tick);
    let g = &s.m.frameworks().find(|f| f.id == fw).expect("fw").groups[0];
    assert_eq!(g.record.retries_used, 0, "{:?}", g.record);
    assert!(g.record.counted.is_empty(), "{:?}", g.record);
    assert_eq!(s.slots(&fw), vec![SlotOutcome::Pending]);
}

#[test]
fn an_executor_older_than_the_slots_replaced_one_is_never_adopted_and_charged() {
    // `--api-jobs --preemption`: sim seed 32170 (docs/design.md#simulator-seeds). An executor x is
    // stopped to be replaced while its worker is cut off; its slot's refill
    // y is stopped to be replaced in turn, and the group record's
    // `replacing` (one name per slot) now names y, not x. After a failover
    // x's worker registers with x ended (exit 1), the slot pending and
    // empty at the new leader: x launched before y, so x was replaced and
    // its end is never adopted and charged.
    let (mut s, fw, x) = one_running(spec("g", 1, RestartPolicy::default()));
    s.drop_conn(100);
    let _ = s.register(101, "w1", 1, 1, 0, vec![]);
    let sends =
        s.operate(Message::OperatorKillExecutor { request: 7, executor: x.clone(), refill: true });
    assert!(accepted(&sends), "{sends:?}");
    let mut placed = launches(&sends);
    // x's worker stays silent and is declared DEAD: the slot is refilled.
    placed.extend(launches(&s.sweep_after(60_000)));
    let [(101, y)] = &placed[..] else { panic!("the slot is refilled on w1: {placed:?}") };
    let y = y.clone();
    let _ = s.status(101, &y, ExecutorState::Running);
    s.drop_conn(101);
    let sends =
        s.operate(Message::OperatorKillExecutor { request: 8, executor: y.clone(), refill: true });
    assert!(accepted(&sends), "{sends:?}");
    let g = &s.m.frameworks().find(|f| f.id == fw).expect("fw").groups[0];
    assert_eq!(g.record.replacing.get(&0), Some(&y), "x's name overwritten: {:?}", g.record);
    s.failover("b");
    s.resubscribe(1, &fw);
    let _ = s.register(102, "w0", 1, 1, 0, vec![report_of(&x, ExecutorState::Exited { code: 1 })]);
    let _ = s.feed(m::Event::Tick);
    let g = &s.m.frameworks().find(|f| f.id == fw).expect("fw").groups[0];
    assert_eq!(g.record.retries_used, 0, "{:?}", g.record);
    assert!(g.record.counted.is_empty(), "{:?}", g.record);
    assert_eq!(s.slots(&fw), vec![SlotOutcome::Pending]);
}

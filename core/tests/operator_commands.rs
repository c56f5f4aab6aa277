//! Operator commands that change the cluster (docs/design.md#issue-14 items 1 and 4):
//! cordon, uncordon, drain, scale and kill-executor, as exact protocol
//! actions of the master machine. Each is accepted only once the record it
//! changed is durable (docs/design.md#durable-before-acknowledged), refused with a reason naming the
//! problem otherwise, and survives a new leader recovering from the
//! records.

mod common;

use common::*;
use regent_core::api::{Stop, StopSignal};
use regent_core::ids::InstanceId;
use regent_core::limits::{MAX_DRAIN_DEADLINE, MAX_SLOTS_PER_GROUP};
use regent_core::master::{self, Master, Status};
use regent_core::protocol::{
    ExecutorReport, ExecutorState, GroupSpec, Message, RegisterWorker, Role, Subscribe, WorkerView,
};
use regent_core::states::DrainState;
use regent_core::store::{Maintenance, Record, RecordKey, SlotOutcome};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::token::Principal;
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis, WorkerId};
use std::collections::BTreeMap;

/// The wall clock of leader "a" at its local time 0.
const WALL_A: u64 = 1_700_000_000_000;
/// The operator's connection.
const OP: ConnId = ConnId(9);
/// The subscriber's connection.
const SUB: ConnId = ConnId(1);

/// What the tests read of the store ([`Store`], common to the scenario
/// tests).
trait OperatorRecords {
    fn maintenance(&self, worker: &str) -> Option<Maintenance>;
    fn group_slots(&self, framework: &FrameworkId) -> Vec<SlotOutcome>;
}

impl OperatorRecords for Store {
    fn maintenance(&self, worker: &str) -> Option<Maintenance> {
        match self.records.get(&RecordKey::Worker(WorkerId::new(worker))) {
            Some(Record::Worker(w)) => w.maintenance,
            other => panic!("no worker record of {worker}: {other:?}"),
        }
    }

    fn group_slots(&self, framework: &FrameworkId) -> Vec<SlotOutcome> {
        match self.records.get(&RecordKey::Framework(framework.clone())) {
            Some(Record::Framework(f)) => f.groups[0].slots.clone(),
            other => panic!("no framework record: {other:?}"),
        }
    }
}

fn register(worker: &str, inc: u64, executors: Vec<ExecutorReport>) -> Message {
    Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: worker.into(),
        incarnation: Incarnation(inc),
        cores: 8,
        memory_mb: 8192,
        executors,
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    })
}

fn report(id: &ExecutorId, state: ExecutorState) -> ExecutorReport {
    let framework = FrameworkId(id.as_str().split('/').next().expect("prefix").into());
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

fn status(inc: u64, id: &ExecutorId, state: ExecutorState) -> Message {
    Message::ExecutorStatus { incarnation: Incarnation(inc), report: report(id, state) }
}

/// Launches among `sends`: (worker conn, executor), in order.
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

fn accepted(sends: &[(ConnId, Message)], request: u64) -> bool {
    sends.iter().any(|(c, m)| {
        *c == OP && matches!(m, Message::RequestAccepted { request: r, .. } if *r == request)
    })
}

fn refusal(sends: &[(ConnId, Message)], request: u64) -> String {
    let v: Vec<&String> = sends
        .iter()
        .filter_map(|(_, m)| match m {
            Message::RequestRefused { request: r, reason, .. } if *r == request => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(v.len(), 1, "one refusal of request {request}: {sends:?}");
    v[0].clone()
}

fn view(m: &Master, worker: &str) -> WorkerView {
    m.state().workers.into_iter().find(|w| w.id.as_str() == worker).expect("worker in view")
}

fn slot_of(id: &ExecutorId) -> u32 {
    id.as_str().split('#').nth(1).expect("slot").parse().expect("slot number")
}

/// The test cluster: leader "a" (wall clock [`WALL_A`] at local 0), workers
/// w0 (conn 100, incarnation 100) and w1 (conn 101, incarnation 101), an
/// operator on conn 9 and a framework subscribed on conn 1 with group "g"
/// of `slots` slots, placed round robin. Returns the framework and its
/// executors by slot.
struct Cluster {
    m: Master,
    store: Store,
    fw: FrameworkId,
    executors: Vec<ExecutorId>,
    /// Which conn each executor was launched on.
    on: BTreeMap<ExecutorId, ConnId>,
}

impl Cluster {
    fn new(slots: u32) -> Cluster {
        let mut store = Store::default();
        let mut m = master("a");
        let t = Millis(0);
        let out = m.handle(t, master::Event::Elected { floor: Epoch(1), clock: WALL_A });
        assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
        let out = m.handle(t, master::Event::Store(StoreEvent::Loaded { records: vec![] }));
        let _ = store.settle(&mut m, t, out);
        for (conn, w) in [(100, "w0"), (101, "w1")] {
            let _ = connect_worker(&mut m, t, conn, w);
            let out = m.handle(
                t,
                master::Event::Message { conn: ConnId(conn), msg: register(w, conn, vec![]) },
            );
            let _ = store.settle(&mut m, t, out);
        }
        let _ = m.handle(t, master::Event::Connected { conn: OP });
        let _ = m.handle(t, master::Event::Message { conn: OP, msg: hello(Role::Client, "op") });
        let _ = m.handle(t, master::Event::Connected { conn: SUB });
        let _ =
            m.handle(t, master::Event::Message { conn: SUB, msg: hello(Role::Subscriber, "s") });
        let sub = Message::Subscribe(Subscribe {
            framework: None,
            name: "app".into(),
            instance: InstanceId(1),
            attempt: 0,
            failover_timeout: Millis(600_000),
            tenant: None,
        });
        let out = m.handle(t, master::Event::Message { conn: SUB, msg: sub });
        let sends = store.settle(&mut m, t, out);
        let fw = sends
            .iter()
            .find_map(|(_, m)| match m {
                Message::Subscribed { framework, .. } => Some(framework.clone()),
                _ => None,
            })
            .expect("subscribed");
        let spec = GroupSpec {
            group: "g".into(),
            slots,
            command: vec!["/bin/sleep".into(), "1000".into()],
            env: vec![],
            cores: 1,
            memory_mb: 1,
            policy: Default::default(),
            launch: Default::default(),
        };
        let out = m.handle(
            t,
            master::Event::Message { conn: SUB, msg: Message::DeclareGroup { request: 1, spec } },
        );
        let sends = store.settle(&mut m, t, out);
        let launched = launches(&sends);
        assert_eq!(launched.len(), slots as usize, "{sends:?}");
        let mut c = Cluster { m, store, fw, executors: Vec::new(), on: BTreeMap::new() };
        for (conn, x) in launched {
            c.on.insert(x.clone(), conn);
            c.executors.push(x.clone());
            let inc = conn.0;
            let _ = c.deliver(t, conn, status(inc, &x, ExecutorState::Running));
        }
        c.executors.sort_by_key(slot_of);
        c
    }

    fn deliver(&mut self, now: Millis, conn: ConnId, msg: Message) -> Vec<(ConnId, Message)> {
        let out = self.m.handle(now, master::Event::Message { conn, msg });
        self.store.settle(&mut self.m, now, out)
    }

    /// Sends `msg` as the operator and returns (actions before any write is
    /// durable, every message sent once settled).
    fn operate(
        &mut self,
        now: Millis,
        msg: Message,
    ) -> (Vec<master::Action>, Vec<(ConnId, Message)>) {
        let out = self.m.handle(now, master::Event::Message { conn: OP, msg });
        let before = out.clone();
        let sends = self.store.settle(&mut self.m, now, out);
        (before, sends)
    }
}

#[test]
fn cordon_is_durable_before_it_is_accepted_and_blocks_placement_without_killing() {
    let mut c = Cluster::new(2);
    let t = Millis(1_000);
    let on_w1: Vec<ExecutorId> =
        c.on.iter().filter(|(_, conn)| **conn == ConnId(101)).map(|(x, _)| x.clone()).collect();
    assert_eq!(on_w1.len(), 1, "spread placed one executor on each worker");
    let (before, sends) =
        c.operate(t, Message::CordonWorker { request: 5, worker: WorkerId::new("w1") });
    assert!(!accepted(&m_sends(&before), 5), "accepted before the record was written");
    let written = before.iter().any(|a| {
        matches!(a, master::Action::Store(StoreCommand::Persist { record: Record::Worker(w), .. })
            if w.id.as_str() == "w1" && w.maintenance == Some(Maintenance::Cordoned))
    });
    assert!(written, "the cordon is written to the worker's record: {before:?}");
    assert!(accepted(&sends, 5), "{sends:?}");
    assert!(kills(&sends).is_empty(), "a cordon kills nothing: {sends:?}");
    assert_eq!(c.store.maintenance("w1"), Some(Maintenance::Cordoned));
    let v = view(&c.m, "w1");
    assert!(v.cordoned);
    assert_eq!(v.drain, None);
    assert_eq!(v.executors, 1);
    // Scale up: every new executor lands on w0.
    let fw = c.fw.clone();
    let msg = Message::ScaleGroup {
        request: 6,
        framework: fw,
        group: "g".into(),
        slots: 5,
        remove: Vec::new(),
        stop: None,
    };
    let (_, sends) = c.operate(t, msg);
    assert!(accepted(&sends, 6));
    let placed = launches(&sends);
    assert_eq!(placed.len(), 3, "{sends:?}");
    assert!(placed.iter().all(|(conn, _)| *conn == ConnId(100)), "only on w0: {placed:?}");
    // Uncordon: placement uses w1 again (scale up once more).
    let (_, sends) =
        c.operate(t, Message::UncordonWorker { request: 7, worker: WorkerId::new("w1") });
    assert!(accepted(&sends, 7));
    assert_eq!(c.store.maintenance("w1"), None);
    assert!(!view(&c.m, "w1").cordoned);
    let fw = c.fw.clone();
    let msg = Message::ScaleGroup {
        request: 8,
        framework: fw,
        group: "g".into(),
        slots: 6,
        remove: Vec::new(),
        stop: None,
    };
    let (_, sends) = c.operate(t, msg);
    assert_eq!(launches(&sends).iter().map(|(c, _)| *c).collect::<Vec<_>>(), vec![ConnId(101)]);
}

#[test]
fn a_cordoned_worker_stays_cordoned_when_it_registers_again_and_under_a_new_leader() {
    let mut c = Cluster::new(1);
    let t = Millis(1_000);
    let (_, sends) =
        c.operate(t, Message::CordonWorker { request: 5, worker: WorkerId::new("w1") });
    assert!(accepted(&sends, 5));
    // w1 restarts: a new incarnation registers on a new connection.
    let _ = connect_worker(&mut c.m, t, 111, "w1");
    let _ = c.deliver(t, ConnId(111), register("w1", 111, vec![]));
    assert!(view(&c.m, "w1").cordoned);
    assert_eq!(c.store.maintenance("w1"), Some(Maintenance::Cordoned));
    // A new leader over the records.
    let mut b = c.store.elect("b", Millis(0), Epoch(1), WALL_A + 5_000);
    assert!(view(&b, "w1").cordoned, "recovered cordoned");
    for (conn, w, inc) in [(200, "w0", 100), (201, "w1", 111)] {
        let _ = connect_worker(&mut b, Millis(0), conn, w);
        let out = b.handle(
            Millis(0),
            master::Event::Message { conn: ConnId(conn), msg: register(w, inc, vec![]) },
        );
        let _ = c.store.settle(&mut b, Millis(0), out);
    }
    assert_eq!(b.status(), Status::Alive);
    // The slot, lost with the unreported executor, is refilled on w0 only.
    assert!(view(&b, "w1").cordoned);
    let live: Vec<&WorkerId> =
        b.executors().filter(|e| !e.state.is_terminal()).map(|e| &e.worker).collect();
    assert_eq!(live, vec![&WorkerId::new("w0")]);
}

#[test]
fn drain_stops_executors_replaces_them_elsewhere_without_charging_retries_then_drained() {
    let mut c = Cluster::new(4);
    let t = Millis(2_000);
    let on_w1: Vec<ExecutorId> =
        c.on.iter().filter(|(_, conn)| **conn == ConnId(101)).map(|(x, _)| x.clone()).collect();
    assert_eq!(on_w1.len(), 2);
    let msg =
        Message::DrainWorker { request: 5, worker: WorkerId::new("w1"), deadline: Millis(30_000) };
    let (before, sends) = c.operate(t, msg);
    let deadline_ms = WALL_A + 2_000 + 30_000;
    assert!(!accepted(&m_sends(&before), 5));
    assert!(
        !m_sends(&before).iter().any(|(_, m)| matches!(m, Message::StopExecutorOnWorker { .. })),
        "nothing is stopped before the drain is durable: {before:?}"
    );
    assert!(accepted(&sends, 5));
    assert_eq!(c.store.maintenance("w1"), Some(Maintenance::Draining { deadline_ms }));
    let mut stopped: Vec<(ConnId, ExecutorId, Millis)> = sends
        .iter()
        .filter_map(|(conn, m)| match m {
            Message::StopExecutorOnWorker { executor, grace, .. } => {
                Some((*conn, executor.clone(), *grace))
            }
            _ => None,
        })
        .collect();
    stopped.sort();
    let want: Vec<(ConnId, ExecutorId, Millis)> =
        on_w1.iter().map(|x| (ConnId(101), x.clone(), Millis(30_000))).collect();
    assert_eq!(stopped, want, "each executor on w1 gets SIGTERM with the whole deadline");
    let v = view(&c.m, "w1");
    assert_eq!((v.cordoned, v.drain, v.executors), (true, Some(DrainState::Draining), 2));
    assert_eq!(v.drain_deadline_ms, Some(deadline_ms));
    // The first ends on SIGTERM with a non-zero code: its slot is refilled
    // on w0, and no retry is charged.
    let sends =
        c.deliver(t, ConnId(101), status(101, &on_w1[0], ExecutorState::Exited { code: 143 }));
    let placed = launches(&sends);
    assert_eq!(placed.len(), 1, "{sends:?}");
    assert_eq!(placed[0].0, ConnId(100));
    assert_eq!(slot_of(&placed[0].1), slot_of(&on_w1[0]));
    assert_eq!(view(&c.m, "w1").drain, Some(DrainState::Draining));
    // The second exits 0 (its SIGTERM handler finished the work): an exit 0
    // completes its slot, drain or not; nothing replaces it.
    let sends =
        c.deliver(t, ConnId(101), status(101, &on_w1[1], ExecutorState::Exited { code: 0 }));
    assert!(launches(&sends).is_empty(), "{sends:?}");
    let fw = c.m.frameworks().next().expect("framework");
    assert_eq!(fw.groups[0].record.retries_used, 0, "no retry charged");
    let done = fw.groups[0].record.slots[slot_of(&on_w1[1]) as usize].clone();
    assert_eq!(done, SlotOutcome::Done { executor: on_w1[1].clone() });
    // Nothing runs on w1: DRAINED, durably.
    let v = view(&c.m, "w1");
    assert_eq!((v.cordoned, v.drain, v.executors), (true, Some(DrainState::Drained), 0));
    assert_eq!(c.store.maintenance("w1"), Some(Maintenance::Drained));
}

#[test]
fn a_drain_deadline_is_honoured_by_a_new_leader_and_passes_into_a_kill() {
    let mut c = Cluster::new(2);
    let t = Millis(2_000);
    let x1 = c.on.iter().find(|(_, conn)| **conn == ConnId(101)).map(|(x, _)| x.clone()).unwrap();
    let msg =
        Message::DrainWorker { request: 5, worker: WorkerId::new("w1"), deadline: Millis(60_000) };
    let (_, sends) = c.operate(t, msg);
    assert!(accepted(&sends, 5));
    let deadline_ms = WALL_A + 62_000;
    // Leader "a" dies. "b" is elected 20 s of wall-clock time later, at its
    // own local time 500: 40 s of the deadline are left.
    let mut b = c.store.elect("b", Millis(500), Epoch(1), WALL_A + 22_000);
    let v = view(&b, "w1");
    assert_eq!((v.drain, v.drain_deadline_ms), (Some(DrainState::Draining), Some(deadline_ms)));
    let _ = connect_worker(&mut b, Millis(500), 200, "w0");
    let x0 = c.on.iter().find(|(_, conn)| **conn == ConnId(100)).map(|(x, _)| x.clone()).unwrap();
    let out = b.handle(
        Millis(500),
        master::Event::Message {
            conn: ConnId(200),
            msg: register("w0", 100, vec![report(&x0, ExecutorState::Running)]),
        },
    );
    let _ = c.store.settle(&mut b, Millis(500), out);
    let _ = connect_worker(&mut b, Millis(500), 201, "w1");
    let out = b.handle(
        Millis(500),
        master::Event::Message {
            conn: ConnId(201),
            msg: register("w1", 101, vec![report(&x1, ExecutorState::Running)]),
        },
    );
    let drain_timer = b.deadline(master::Timer::Drain);
    let sends = c.store.settle(&mut b, Millis(500), out);
    assert_eq!(b.status(), Status::Alive);
    let stops: Vec<(ConnId, ExecutorId, Millis)> = sends
        .iter()
        .filter_map(|(conn, m)| match m {
            Message::StopExecutorOnWorker { executor, grace, .. } => {
                Some((*conn, executor.clone(), *grace))
            }
            _ => None,
        })
        .collect();
    assert_eq!(stops, vec![(ConnId(201), x1.clone(), Millis(40_000))], "{sends:?}");
    assert_eq!(drain_timer, Some(Millis(40_500)), "the deadline in b's local time");
    assert!(launches(&sends).is_empty(), "the adopted executor's slot is filled: {sends:?}");
    // The executor ignores SIGTERM; at the deadline the leader sends the kill
    // (both workers still heartbeat, so the same tick's sweep spares them).
    for (conn, incarnation) in [(200, 100), (201, 101)] {
        let msg = Message::WorkerHeartbeat { incarnation: Incarnation(incarnation) };
        let _ = b.handle(Millis(40_500), master::Event::Message { conn: ConnId(conn), msg });
    }
    let out = b.handle(Millis(40_500), master::Event::Tick);
    assert_eq!(kills(&m_sends(&out)), vec![(ConnId(201), x1.clone())]);
    let _ = c.store.settle(&mut b, Millis(40_500), out);
    let out = b.handle(
        Millis(40_600),
        master::Event::Message { conn: ConnId(201), msg: status(101, &x1, ExecutorState::Killed) },
    );
    let sends = c.store.settle(&mut b, Millis(40_600), out);
    assert_eq!(launches(&sends).iter().map(|(c, _)| *c).collect::<Vec<_>>(), vec![ConnId(200)]);
    assert_eq!(view(&b, "w1").drain, Some(DrainState::Drained));
    assert_eq!(c.store.maintenance("w1"), Some(Maintenance::Drained));
    assert_eq!(b.frameworks().next().unwrap().groups[0].record.retries_used, 0);
}

#[test]
fn draining_an_idle_worker_makes_it_drained_at_once() {
    let mut c = Cluster::new(1);
    let idle = if c.on.values().any(|conn| *conn == ConnId(100)) { "w1" } else { "w0" };
    let msg =
        Message::DrainWorker { request: 5, worker: WorkerId::new(idle), deadline: Millis(1_000) };
    let (_, sends) = c.operate(Millis(0), msg);
    assert!(accepted(&sends, 5));
    assert_eq!(c.store.maintenance(idle), Some(Maintenance::Drained));
    assert_eq!(view(&c.m, idle).drain, Some(DrainState::Drained));
}

#[test]
fn scale_down_kills_the_highest_slots_durably_and_tells_the_subscriber() {
    let mut c = Cluster::new(4);
    let t = Millis(1_000);
    let fw = c.fw.clone();
    let msg = Message::ScaleGroup {
        request: 5,
        framework: fw.clone(),
        group: "g".into(),
        slots: 2,
        remove: Vec::new(),
        stop: None,
    };
    let (before, sends) = c.operate(t, msg);
    assert!(!accepted(&m_sends(&before), 5));
    assert!(kills(&m_sends(&before)).is_empty(), "kills follow the durable record");
    assert!(accepted(&sends, 5));
    assert_eq!(c.store.group_slots(&fw), vec![SlotOutcome::Pending; 2]);
    let mut killed: Vec<ExecutorId> = kills(&sends).into_iter().map(|(_, x)| x).collect();
    killed.sort_by_key(slot_of);
    assert_eq!(killed, c.executors[2..].to_vec(), "slots 2 and 3 go");
    assert!(sends.contains(&(
        SUB,
        Message::GroupScaled { epoch: c.m.epoch(), group: "g".into(), slots: 2 }
    )));
    // Their ends are not refilled, charge nothing.
    let surplus: Vec<ExecutorId> = c.executors.iter().skip(2).cloned().collect();
    for x in surplus {
        let conn = c.on[&x];
        let sends = c.deliver(t, conn, status(conn.0, &x, ExecutorState::Killed));
        assert!(launches(&sends).is_empty(), "{sends:?}");
    }
    let state = c.m.state();
    let g = &state.frameworks[0].groups[0];
    assert_eq!((g.slots, g.declared, g.running), (2, 4, 2));
    // The subscriber re-declaring its group as declared is still accepted
    // and changes nothing; a new leader keeps two slots.
    let spec = GroupSpec {
        group: "g".into(),
        slots: 4,
        command: vec!["/bin/sleep".into(), "1000".into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy: Default::default(),
        launch: Default::default(),
    };
    let sends = c.deliver(t, SUB, Message::DeclareGroup { request: 2, spec });
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::RequestAccepted { request: 2, .. })));
    assert!(launches(&sends).is_empty());
    let b = c.store.elect("b", Millis(0), Epoch(1), WALL_A + 9_000);
    assert_eq!(b.frameworks().next().unwrap().groups[0].slot_count(), 2);
}

#[test]
fn scale_up_places_new_slots_only_once_durable() {
    let mut c = Cluster::new(1);
    let fw = c.fw.clone();
    let msg = Message::ScaleGroup {
        request: 5,
        framework: fw.clone(),
        group: "g".into(),
        slots: 3,
        remove: Vec::new(),
        stop: None,
    };
    let (before, sends) = c.operate(Millis(0), msg);
    assert!(launches(&m_sends(&before)).is_empty(), "placed before durable: {before:?}");
    assert!(accepted(&sends, 5));
    let mut slots: Vec<u32> = launches(&sends).iter().map(|(_, x)| slot_of(x)).collect();
    slots.sort();
    assert_eq!(slots, vec![1, 2]);
    assert_eq!(c.store.group_slots(&fw).len(), 3);
}

#[test]
fn kill_executor_refills_its_slot_without_a_retry_or_leaves_it_empty() {
    let mut c = Cluster::new(2);
    let t = Millis(1_000);
    let (x0, x1) = (c.executors[0].clone(), c.executors[1].clone());
    // With refill.
    let msg = Message::OperatorKillExecutor { request: 5, executor: x0.clone(), refill: true };
    let (before, sends) = c.operate(t, msg);
    assert!(!accepted(&m_sends(&before), 5));
    assert!(accepted(&sends, 5));
    assert_eq!(kills(&sends), vec![(c.on[&x0], x0.clone())]);
    let conn = c.on[&x0];
    let sends = c.deliver(t, conn, status(conn.0, &x0, ExecutorState::Exited { code: 137 }));
    let placed = launches(&sends);
    assert_eq!(placed.len(), 1, "{sends:?}");
    assert_eq!(slot_of(&placed[0].1), 0);
    assert_eq!(c.m.frameworks().next().unwrap().groups[0].record.retries_used, 0);
    // Without refill: the slot is recorded killed, before the acceptance.
    let msg = Message::OperatorKillExecutor { request: 6, executor: x1.clone(), refill: false };
    let (before, sends) = c.operate(t, msg);
    let recorded = before.iter().any(|a| {
        matches!(a, master::Action::Store(StoreCommand::Persist { record: Record::Framework(f), .. })
            if f.groups[0].slots[1] == SlotOutcome::Killed { executor: x1.clone() })
    });
    assert!(recorded, "{before:?}");
    assert!(accepted(&sends, 6));
    let conn = c.on[&x1];
    let sends = c.deliver(t, conn, status(conn.0, &x1, ExecutorState::Killed));
    assert!(launches(&sends).is_empty(), "{sends:?}");
    let fw = c.fw.clone();
    assert_eq!(c.store.group_slots(&fw)[1], SlotOutcome::Killed { executor: x1 });
}

#[test]
fn refusals_name_the_problem() {
    let mut c = Cluster::new(1);
    let t = Millis(0);
    let fw = c.fw.clone();
    let x0 = c.executors[0].clone();
    let cases: Vec<(Message, String)> = vec![
        (
            Message::CordonWorker { request: 1, worker: WorkerId::new("w9") },
            "no worker w9".into(),
        ),
        (
            Message::DrainWorker {
                request: 2,
                worker: WorkerId::new("w0"),
                deadline: Millis(MAX_DRAIN_DEADLINE.0 + 1),
            },
            format!(
                "drain deadline of {} ms; the limit is {} ms (MAX_DRAIN_DEADLINE, 7 days)",
                MAX_DRAIN_DEADLINE.0 + 1,
                MAX_DRAIN_DEADLINE.0
            ),
        ),
        (
            Message::ScaleGroup {
                request: 3,
                framework: FrameworkId::new("nope"),
                group: "g".into(),
                slots: 2, remove: Vec::new(), stop: None,
            },
            "no framework nope".into(),
        ),
        (
            Message::ScaleGroup { request: 4, framework: fw.clone(), group: "h".into(), slots: 2, remove: Vec::new(), stop: None },
            format!("no group \"h\" in framework {fw}"),
        ),
        (
            Message::ScaleGroup { request: 5, framework: fw.clone(), group: "g".into(), slots: 0, remove: Vec::new(), stop: None },
            format!(
                "group \"g\" needs at least one slot; to stop the framework use `regent kill {fw}`"
            ),
        ),
        (
            Message::ScaleGroup {
                request: 6,
                framework: fw.clone(),
                group: "g".into(),
                slots: MAX_SLOTS_PER_GROUP + 1, remove: Vec::new(), stop: None,
            },
            format!(
                "group \"g\" asks for {} slots; the limit is {MAX_SLOTS_PER_GROUP} per group (MAX_SLOTS_PER_GROUP)",
                MAX_SLOTS_PER_GROUP + 1
            ),
        ),
        (
            Message::OperatorKillExecutor {
                request: 7,
                executor: ExecutorId::new("x/y#0#1"),
                refill: true,
            },
            "no executor x/y#0#1".into(),
        ),
    ];
    for (msg, reason) in cases {
        let request = match &msg {
            Message::CordonWorker { request, .. }
            | Message::DrainWorker { request, .. }
            | Message::ScaleGroup { request, .. }
            | Message::OperatorKillExecutor { request, .. } => *request,
            _ => unreachable!(),
        };
        let (before, sends) = c.operate(t, msg);
        assert!(
            !before
                .iter()
                .any(|a| matches!(a, master::Action::Store(StoreCommand::Persist { .. }))),
            "a refusal writes nothing: {before:?}"
        );
        assert_eq!(refusal(&sends, request), reason);
    }
    // An ended executor.
    let conn = c.on[&x0];
    let _ = c.deliver(t, conn, status(conn.0, &x0, ExecutorState::Exited { code: 0 }));
    let msg = Message::OperatorKillExecutor { request: 8, executor: x0.clone(), refill: false };
    let (_, sends) = c.operate(t, msg);
    assert_eq!(
        refusal(&sends, 8),
        format!("executor {x0} has already ended (Exited {{ code: 0 }})")
    );
    // A DEAD worker.
    let out = c.m.handle(Millis(60_000), master::Event::Tick);
    let _ = c.store.settle(&mut c.m, Millis(60_000), out);
    let msg = Message::CordonWorker { request: 9, worker: WorkerId::new("w0") };
    let (_, sends) = c.operate(Millis(60_000), msg);
    assert_eq!(
        refusal(&sends, 9),
        "worker w0 is DEAD: it can be cordoned or drained once it registers again (a cordon or drain it had is kept)"
    );
}

#[test]
fn a_standby_answers_every_operator_change_with_not_leader() {
    let mut m = master("s");
    let _ = m.handle(Millis(0), master::Event::Connected { conn: OP });
    for msg in [
        Message::CordonWorker { request: 1, worker: WorkerId::new("w0") },
        Message::UncordonWorker { request: 2, worker: WorkerId::new("w0") },
        Message::DrainWorker { request: 3, worker: WorkerId::new("w0"), deadline: Millis(1) },
        Message::ScaleGroup {
            request: 4,
            framework: FrameworkId::new("f"),
            group: "g".into(),
            slots: 1,
            remove: Vec::new(),
            stop: None,
        },
        Message::OperatorKillExecutor { request: 5, executor: ExecutorId::new("e"), refill: true },
    ] {
        let out = m.handle(Millis(0), master::Event::Message { conn: OP, msg });
        assert_eq!(m_sends(&out), vec![(OP, Message::NotLeader { epoch: Epoch(0), leader: None })]);
    }
}

// A scale that names the executors it removes (docs/design.md#issue-43,
// item 3): exactly those go, in one durable write with the count.

fn named_scale(
    fw: &FrameworkId,
    slots: u32,
    remove: &[&ExecutorId],
    stop: Option<Stop>,
) -> Message {
    Message::ScaleGroup {
        request: 7,
        framework: fw.clone(),
        group: "g".into(),
        slots,
        remove: remove.iter().map(|x| (*x).clone()).collect(),
        stop,
    }
}

fn sorted(mut v: Vec<ExecutorId>) -> Vec<ExecutorId> {
    v.sort_by_key(slot_of);
    v
}

#[test]
fn a_named_scale_down_removes_exactly_the_named_and_the_others_keep_their_slots() {
    let mut c = Cluster::new(4);
    let t = Millis(1_000);
    let fw = c.fw.clone();
    let x = c.executors.clone();
    let (before, sends) = c.operate(t, named_scale(&fw, 2, &[&x[1], &x[3]], None));
    assert!(!accepted(&m_sends(&before), 7), "accepted only once durable");
    assert!(kills(&m_sends(&before)).is_empty(), "kills follow the durable record");
    assert!(accepted(&sends, 7), "{sends:?}");
    let killed = sorted(kills(&sends).into_iter().map(|(_, x)| x).collect());
    assert_eq!(killed, vec![x[1].clone(), x[3].clone()], "the named ones, and only those");
    // Slots 1 and 3 are holes; slots 0 and 2 keep their executors (and
    // their ids).
    let removed = |x: &ExecutorId| SlotOutcome::Removed { executor: x.clone() };
    let pending = SlotOutcome::Pending;
    assert_eq!(
        c.store.group_slots(&fw),
        vec![pending.clone(), removed(&x[1]), pending, removed(&x[3])]
    );
    let g = &c.m.frameworks().next().unwrap().groups[0];
    assert_eq!(g.current, vec![Some(x[0].clone()), None, Some(x[2].clone()), None]);
    assert_eq!(c.m.state().frameworks[0].groups[0].slots, 2, "the count");
    // The subscriber hears the bound of the slot numbers.
    assert!(sends.contains(&(
        SUB,
        Message::GroupScaled { epoch: c.m.epoch(), group: "g".into(), slots: 4 }
    )));
    // Their ends refill nothing and charge nothing.
    for x in [&x[1], &x[3]] {
        let conn = c.on[x];
        let sends = c.deliver(t, conn, status(conn.0, x, ExecutorState::Killed));
        assert!(launches(&sends).is_empty(), "{sends:?}");
    }
    assert_eq!(c.m.frameworks().next().unwrap().groups[0].record.retries_used, 0);
    assert_eq!(c.m.state().frameworks[0].groups[0].running, 2);
    // A later scale up refills the hole first, then grows.
    let (_, sends) = c.operate(t, named_scale(&fw, 4, &[], None));
    assert!(accepted(&sends, 7));
    let placed: Vec<u32> = launches(&sends).iter().map(|(_, x)| slot_of(x)).collect();
    assert_eq!(sorted_u32(placed), vec![1, 3]);
}

fn sorted_u32(mut v: Vec<u32>) -> Vec<u32> {
    v.sort();
    v
}

#[test]
fn fewer_named_than_the_reduction_take_the_highest_other_slots_with_them() {
    let mut c = Cluster::new(4);
    let fw = c.fw.clone();
    let x = c.executors.clone();
    let (_, sends) = c.operate(Millis(1_000), named_scale(&fw, 2, &[&x[0]], None));
    assert!(accepted(&sends, 7));
    let killed = sorted(kills(&sends).into_iter().map(|(_, x)| x).collect());
    assert_eq!(killed, vec![x[0].clone(), x[3].clone()]);
    let removed = SlotOutcome::Removed { executor: x[0].clone() };
    assert_eq!(c.store.group_slots(&fw), vec![removed, SlotOutcome::Pending, SlotOutcome::Pending]);
}

#[test]
fn named_executors_with_the_count_kept_are_replaced_without_a_retry() {
    let mut c = Cluster::new(3);
    let t = Millis(1_000);
    let fw = c.fw.clone();
    let x = c.executors.clone();
    let (_, sends) = c.operate(t, named_scale(&fw, 3, &[&x[1]], None));
    assert!(accepted(&sends, 7));
    assert_eq!(kills(&sends), vec![(c.on[&x[1]], x[1].clone())]);
    assert!(launches(&sends).is_empty(), "refilled once it ended: {sends:?}");
    // Durable as a kill with refill: a new leader kills it rather than
    // adopting it.
    assert_eq!(c.store.group_slots(&fw), vec![SlotOutcome::Pending; 3]);
    match c.store.records.get(&RecordKey::Framework(fw.clone())) {
        Some(Record::Framework(f)) => {
            assert_eq!(f.groups[0].replacing, BTreeMap::from([(1, x[1].clone())]))
        }
        other => panic!("{other:?}"),
    }
    let conn = c.on[&x[1]];
    let sends = c.deliver(t, conn, status(conn.0, &x[1], ExecutorState::Exited { code: 143 }));
    let placed = launches(&sends);
    assert_eq!(placed.len(), 1, "{sends:?}");
    assert_eq!(slot_of(&placed[0].1), 1);
    assert_ne!(placed[0].1, x[1]);
    assert_eq!(c.m.frameworks().next().unwrap().groups[0].record.retries_used, 0);
    assert_eq!(c.m.state().frameworks[0].groups[0].slots, 3);
}

#[test]
fn a_named_scale_with_a_bad_id_is_refused_whole_naming_it() {
    let mut c = Cluster::new(3);
    let t = Millis(1_000);
    let fw = c.fw.clone();
    let x = c.executors.clone();
    // An executor of another group of the same framework.
    let spec = GroupSpec {
        group: "h".into(),
        slots: 1,
        command: vec!["/bin/sleep".into(), "1000".into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy: Default::default(),
        launch: Default::default(),
    };
    let sends = c.deliver(t, SUB, Message::DeclareGroup { request: 2, spec });
    let foreign = launches(&sends).pop().expect("h placed").1;
    let unknown = ExecutorId::new(format!("{fw}/g#9#1.99"));
    let record = c.store.records.clone();
    let too_many: Vec<ExecutorId> =
        (0..=regent_core::limits::MAX_SCALE_REMOVE).map(|_| x[0].clone()).collect();
    let cases: Vec<(Vec<ExecutorId>, String)> = vec![
        (vec![x[0].clone(), unknown.clone()], format!("executor {unknown} is not a live")),
        (vec![x[0].clone(), foreign.clone()], format!("executor {foreign} is not a live")),
        (
            vec![x[1].clone(), x[0].clone(), x[1].clone()],
            format!("executor {} is named twice", x[1]),
        ),
        (too_many, "MAX_SCALE_REMOVE".into()),
    ];
    for (remove, why) in cases {
        let refs: Vec<&ExecutorId> = remove.iter().collect();
        let (before, sends) = c.operate(t, named_scale(&fw, 1, &refs, None));
        let reason = refusal(&sends, 7);
        assert!(reason.contains(&why), "{reason:?} names {why:?}");
        assert!(reason.contains("nothing was changed"), "{reason}");
        assert!(!before.iter().any(|a| matches!(a, master::Action::Store(_))), "{before:?}");
        assert!(kills(&sends).is_empty());
        assert_eq!(c.store.records, record, "nothing changed");
    }
    // A deadline over the limit.
    let stop = Stop { signal: StopSignal::Term, deadline: MAX_DRAIN_DEADLINE + Millis(1) };
    let (_, sends) = c.operate(t, named_scale(&fw, 2, &[&x[0]], Some(stop)));
    assert!(refusal(&sends, 7).contains("MAX_DRAIN_DEADLINE"));
    // An ended executor is no live one.
    let conn = c.on[&x[2]];
    let _ = c.deliver(t, conn, status(conn.0, &x[2], ExecutorState::Exited { code: 0 }));
    let (_, sends) = c.operate(t, named_scale(&fw, 2, &[&x[2]], None));
    assert!(refusal(&sends, 7).contains(&format!("executor {} is not a live", x[2])));
    assert_eq!(c.m.state().frameworks[0].groups[0].running, 2);
}

#[test]
fn a_named_stop_sends_its_signal_and_deadline_to_the_worker_again_after_a_reconnect() {
    let mut c = Cluster::new(2);
    let t = Millis(1_000);
    let fw = c.fw.clone();
    let x = c.executors.clone();
    let stop = Stop { signal: StopSignal::Usr1, deadline: Millis(30_000) };
    let (_, sends) = c.operate(t, named_scale(&fw, 1, &[&x[0]], Some(stop)));
    assert!(accepted(&sends, 7));
    assert!(kills(&sends).is_empty(), "a stop, not a kill: {sends:?}");
    let conn = c.on[&x[0]];
    let expected = Message::StopExecutorOnWorker {
        epoch: c.m.epoch(),
        executor: x[0].clone(),
        grace: Millis(30_000),
        signal: StopSignal::Usr1,
    };
    let stops: Vec<_> = sends
        .iter()
        .filter(|(_, m)| matches!(m, Message::StopExecutorOnWorker { .. }))
        .cloned()
        .collect();
    assert_eq!(stops, vec![(conn, expected.clone())]);
    // The worker's connection blips: the stop is owed, and sent again.
    let _ = c.m.handle(t, master::Event::Disconnected { conn });
    let w = if conn == ConnId(100) { "w0" } else { "w1" };
    let _ = connect_worker(&mut c.m, t, 300, w);
    let sends =
        c.deliver(t, ConnId(300), register(w, conn.0, vec![report(&x[0], ExecutorState::Running)]));
    assert!(sends.contains(&(ConnId(300), expected)), "{sends:?}");
}

#[test]
fn a_new_leader_finishes_a_named_removal_whose_kill_never_arrived() {
    let mut c = Cluster::new(4);
    let t = Millis(1_000);
    let fw = c.fw.clone();
    let x = c.executors.clone();
    let (_, sends) = c.operate(t, named_scale(&fw, 2, &[&x[0], &x[2]], None));
    assert!(accepted(&sends, 7));
    // Leader "a" dies; its kills never reached the workers, which report
    // all four running to "b".
    let mut b = c.store.elect("b", Millis(0), Epoch(1), WALL_A + 9_000);
    let mut sends = Vec::new();
    for (conn, w) in [(100u64, "w0"), (101, "w1")] {
        let _ = connect_worker(&mut b, Millis(0), 200 + conn, w);
        let reports: Vec<ExecutorReport> = x
            .iter()
            .filter(|e| c.on[*e] == ConnId(conn))
            .map(|e| report(e, ExecutorState::Running))
            .collect();
        let out = b.handle(
            Millis(0),
            master::Event::Message { conn: ConnId(200 + conn), msg: register(w, conn, reports) },
        );
        sends.extend(c.store.settle(&mut b, Millis(0), out));
    }
    assert_eq!(b.status(), Status::Alive);
    let killed = sorted(kills(&sends).into_iter().map(|(_, x)| x).collect());
    assert_eq!(killed, vec![x[0].clone(), x[2].clone()], "{sends:?}");
    assert!(launches(&sends).is_empty(), "nothing restarted: {sends:?}");
    let g = &b.frameworks().next().unwrap().groups[0];
    assert_eq!(g.current, vec![None, Some(x[1].clone()), None, Some(x[3].clone())]);
    assert_eq!(g.count(), 2);
}

#[test]
fn a_local_asker_is_answered_once_the_named_scale_is_durable() {
    let mut c = Cluster::new(2);
    let t = Millis(1_000);
    let fw = c.fw.clone();
    let x = c.executors.clone();
    let query = regent_core::ids::QueryId(3);
    let msg = named_scale(&fw, 1, &[&x[1]], None);
    let out =
        c.m.handle(t, master::Event::Command { query, msg, principal: Box::new(Principal::Root) });
    assert!(!out.iter().any(|a| matches!(a, master::Action::Answer { .. })), "{out:?}");
    let mut answers = Vec::new();
    let mut pending = out;
    while !pending.is_empty() {
        let mut next = Vec::new();
        for a in pending {
            match a {
                master::Action::Answer { query, msg } => answers.push((query, msg)),
                master::Action::Store(StoreCommand::Persist { write, record }) => {
                    c.store.records.insert(record.key(), record);
                    next.extend(
                        c.m.handle(t, master::Event::Store(StoreEvent::Persisted { write })),
                    );
                }
                _ => {}
            }
        }
        pending = next;
    }
    let epoch = c.m.epoch();
    assert_eq!(answers, vec![(query, Message::RequestAccepted { epoch, request: 7 })]);
    let removed = SlotOutcome::Removed { executor: x[1].clone() };
    assert_eq!(c.store.group_slots(&fw), vec![SlotOutcome::Pending, removed]);
    // A refusal is answered at once.
    let msg = named_scale(&fw, 1, &[&x[1]], None);
    let out =
        c.m.handle(t, master::Event::Command { query, msg, principal: Box::new(Principal::Root) });
    let refused = out.iter().any(|a| {
        matches!(a, master::Action::Answer { msg: Message::RequestRefused { request: 7, .. }, .. })
    });
    assert!(refused, "{out:?}");
}

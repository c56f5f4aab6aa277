//! One executor per slot, whatever the timing (docs/design.md#issue-20, docs/design.md#one-executor-per-slot):
//! the master never has two live launches for one slot, and a worker
//! registered with the leader never runs two executors of one slot.
//!
//! Every scenario here holds store writes back (a slow disk, a far
//! ZooKeeper) and releases them one at a time, in the order a real store
//! confirms writes to one key.

mod common;

use common::*;
use regent_core::ids::InstanceId;
use regent_core::master::{self, Master};
use regent_core::protocol::{
    ExecutorReport, ExecutorSpec, ExecutorState, GroupSpec, HelloReply, Message, RegisterWorker,
    Role, Subscribe,
};
use regent_core::states::FrameworkState;
use regent_core::store::WriteId;
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::worker::{self, ExecutorCommand, Worker};
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, MasterId, Millis};
use std::collections::BTreeMap;

const T: Millis = Millis(0);
const SUB: ConnId = ConnId(1);
const OP: ConnId = ConnId(9);
const W0: ConnId = ConnId(100);

/// A master whose store confirms writes only when the test says so.
struct Held {
    m: Master,
    /// Writes asked for and not yet confirmed, oldest first.
    pending: Vec<WriteId>,
}

impl Held {
    /// Leader "a" at epoch 1 with an empty store.
    fn leader() -> Held {
        let mut h = Held { m: master("a"), pending: Vec::new() };
        let out = h.m.handle(T, master::Event::Elected { floor: Epoch(1), clock: 0 });
        assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
        let _ = h.step(master::Event::Store(StoreEvent::Loaded { records: vec![] }));
        let _ = h.settle();
        assert!(h.m.leads());
        h
    }

    /// One event; the writes it asks for are held. Returns what it sent.
    fn step(&mut self, event: master::Event) -> Vec<(ConnId, Message)> {
        let out = self.m.handle(T, event);
        for a in &out {
            if let master::Action::Store(StoreCommand::Persist { write, .. })
            | master::Action::Store(StoreCommand::Unpersist { write, .. }) = a
            {
                self.pending.push(*write);
            }
        }
        m_sends(&out)
    }

    fn msg(&mut self, conn: ConnId, msg: Message) -> Vec<(ConnId, Message)> {
        self.step(master::Event::Message { conn, msg })
    }

    /// Confirms the oldest held write.
    fn confirm_next(&mut self) -> Vec<(ConnId, Message)> {
        assert!(!self.pending.is_empty(), "no write is held");
        let write = self.pending.remove(0);
        self.step(master::Event::Store(StoreEvent::Persisted { write }))
    }

    /// Confirms every held write (and those they lead to).
    fn settle(&mut self) -> Vec<(ConnId, Message)> {
        let mut sends = Vec::new();
        while !self.pending.is_empty() {
            sends.extend(self.confirm_next());
        }
        sends
    }

    fn connect(&mut self, conn: ConnId, role: Role, node: &str) {
        let _ = self.step(master::Event::Connected { conn });
        let _ = self.msg(conn, hello(role, node));
    }

    /// A framework subscribed (durably) on `conn` as instance `instance`.
    fn subscribe(&mut self, conn: ConnId, id: &str, instance: u64) -> Vec<(ConnId, Message)> {
        self.connect(conn, Role::Subscriber, "s");
        let sends = self.msg(conn, subscribe_msg(id, instance));
        let mut all = sends;
        all.extend(self.settle());
        all
    }

    /// The leader with worker w0 (conn [`W0`]) registered, framework "fw"
    /// subscribed on [`SUB`] with group "g" of `slots` slots placed, and an
    /// operator on [`OP`]; returns the executors launched.
    fn with_group(slots: u32) -> (Held, Vec<ExecutorId>) {
        let mut h = Held::leader();
        let _ = h.subscribe(SUB, "fw", 1);
        h.connect(W0, Role::Worker, "w0");
        let _ = h.msg(W0, register("w0", 7, vec![], 0));
        let _ = h.settle();
        let _ = h.msg(SUB, Message::DeclareGroup { request: 1, spec: spec(slots) });
        let placed = launches(&h.settle());
        assert_eq!(placed.len(), slots as usize);
        h.connect(OP, Role::Client, "op");
        (h, placed)
    }

    /// Live (launching or running) executors the master has, by slot.
    fn live_by_slot(&self) -> BTreeMap<(String, u32), Vec<ExecutorId>> {
        let mut v: BTreeMap<(String, u32), Vec<ExecutorId>> = BTreeMap::new();
        for e in self.m.executors().filter(|e| !e.state.is_terminal()) {
            v.entry((e.group.clone(), e.slot)).or_default().push(e.id.clone());
        }
        v
    }
}

fn subscribe_msg(id: &str, instance: u64) -> Message {
    Message::Subscribe(Subscribe {
        framework: Some(FrameworkId(id.into())),
        name: "app".into(),
        instance: InstanceId(instance),
        attempt: 1,
        failover_timeout: Millis(600_000),
        tenant: None,
    })
}

fn scale(slots: u32, request: u64) -> Message {
    Message::ScaleGroup {
        request,
        framework: FrameworkId("fw".into()),
        group: "g".into(),
        slots,
        remove: Vec::new(),
        stop: None,
    }
}

fn spec(slots: u32) -> GroupSpec {
    GroupSpec {
        group: "g".into(),
        slots,
        command: vec!["/bin/sleep".into(), "1000".into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy: Default::default(),
        launch: Default::default(),
    }
}

fn register(worker: &str, inc: u64, executors: Vec<ExecutorReport>, seen: u64) -> Message {
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
        launch_seen: seen,
        attributes: vec![],
    })
}

/// The executors named by the messages `pick` selects, in order.
fn named(
    sends: &[(ConnId, Message)],
    pick: impl Fn(&Message) -> Option<&ExecutorId>,
) -> Vec<ExecutorId> {
    sends.iter().filter_map(|(_, m)| pick(m).cloned()).collect()
}

fn launches(sends: &[(ConnId, Message)]) -> Vec<ExecutorId> {
    named(sends, |m| match m {
        Message::LaunchExecutor { executor, .. } => Some(executor),
        _ => None,
    })
}

fn kills(sends: &[(ConnId, Message)]) -> Vec<ExecutorId> {
    named(sends, |m| match m {
        Message::KillExecutorOnWorker { executor, .. } => Some(executor),
        _ => None,
    })
}

fn lost(sends: &[(ConnId, Message)]) -> Vec<ExecutorId> {
    named(sends, |m| match m {
        Message::ExecutorUpdate { info, .. } if info.state == ExecutorState::Lost => Some(&info.id),
        _ => None,
    })
}

/// A report of `id` (of framework "fw", one core, 1 MiB) in `state`.
fn report_of(id: ExecutorId, state: ExecutorState) -> ExecutorReport {
    ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id,
        framework: FrameworkId("fw".into()),
        cores: 1,
        memory_mb: 1,
        state,
    }
}

fn slot_of(id: &ExecutorId) -> u32 {
    id.as_str().rsplit('#').nth(1).unwrap().parse().unwrap()
}

fn assert_one_per_slot(h: &Held) {
    for (slot, live) in h.live_by_slot() {
        assert_eq!(live.len(), 1, "slot {slot:?} has {} live launches: {live:?}", live.len());
    }
}

// ---------------------------------------------------------------------------
// Scenario 1: a retried registration doubles a slot's executors.

/// The exact scenario: a worker's first `RegisterWorker` is slow
/// to be durable, its registration timer sends it again; the first becomes
/// durable (`Registered`, and two launches in the same step); then the
/// retry, taken before any launch reached the worker, arrives. It must not
/// write the two launches off as LOST, nor place replacements.
#[test]
fn a_retried_registration_taken_before_the_launches_writes_none_of_them_off() {
    let mut h = Held::leader();
    let _ = h.subscribe(SUB, "fw", 1);
    let _ = h.msg(SUB, Message::DeclareGroup { request: 1, spec: spec(2) });
    let _ = h.settle();
    h.connect(W0, Role::Worker, "w0");
    // The first registration: its write is slow.
    let first = h.msg(W0, register("w0", 7, vec![], 0));
    assert!(first.is_empty(), "nothing before the registration is durable: {first:?}");
    // The write lands: Registered, and both slots placed in that step.
    let sends = h.confirm_next();
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Registered { .. })), "{sends:?}");
    let placed = launches(&sends);
    assert_eq!(placed.len(), 2, "{sends:?}");
    // The retry, sent by the worker before either launch reached it.
    let mut sends = h.msg(W0, register("w0", 7, vec![], 0));
    sends.extend(h.settle());
    assert_eq!(lost(&sends), Vec::<ExecutorId>::new(), "no launch is written off: {sends:?}");
    assert_eq!(launches(&sends), Vec::<ExecutorId>::new(), "no replacement: {sends:?}");
    assert_one_per_slot(&h);
    assert_eq!(h.live_by_slot().len(), 2);
}

/// A later registration that has seen the launches and does not report
/// one still writes that one off (the worker lost it): the fix narrows what
/// a report may write off, it does not stop reports from writing off.
#[test]
fn a_registration_taken_after_a_launch_still_writes_off_what_it_does_not_report() {
    let mut h = Held::leader();
    let _ = h.subscribe(SUB, "fw", 1);
    let _ = h.msg(SUB, Message::DeclareGroup { request: 1, spec: spec(2) });
    let _ = h.settle();
    h.connect(W0, Role::Worker, "w0");
    let _ = h.msg(W0, register("w0", 7, vec![], 0));
    let sends = h.settle();
    let placed: Vec<(ExecutorId, u64)> = sends
        .iter()
        .filter_map(|(_, m)| match m {
            Message::LaunchExecutor { executor, launch, .. } => Some((executor.clone(), *launch)),
            _ => None,
        })
        .collect();
    assert_eq!(placed.len(), 2);
    let seen = placed.iter().map(|(_, l)| *l).max().unwrap();
    // The worker saw both launches but reports only the first.
    let (kept, gone) = (&placed[0].0, &placed[1].0);
    let report = report_of(kept.clone(), ExecutorState::Running);
    let mut sends = h.msg(W0, register("w0", 7, vec![report], seen));
    sends.extend(h.settle());
    assert_eq!(lost(&sends), vec![gone.clone()], "{sends:?}");
    assert_eq!(launches(&sends).len(), 1, "its slot is refilled: {sends:?}");
    assert_one_per_slot(&h);
}

/// The failover shape, with the worker machine itself: a `HelloReply` of
/// the followed master arriving mid-registration makes the worker register
/// again; the two registrations and the launches cross as in the issue.
/// The worker runs one executor per slot at the end.
#[test]
fn a_hello_reply_mid_registration_leaves_the_worker_one_executor_per_slot() {
    crossing_registrations(leading_reply(1));
}

/// The same with a `MasterChanged` of the followed master at its epoch
/// (its master set changed) arriving mid-registration.
#[test]
fn a_master_changed_mid_registration_leaves_the_worker_one_executor_per_slot() {
    crossing_registrations(Message::MasterChanged {
        epoch: Epoch(1),
        leader: regent_core::protocol::LeaderHint {
            id: MasterId::new("a"),
            addr: addr("a"),
            epoch: Epoch(1),
        },
        masters: vec![addr("a"), addr("b")],
    });
}

fn leading_reply(epoch: u64) -> Message {
    Message::HelloReply(HelloReply {
        role: Role::Master,
        master: MasterId::new("a"),
        leading: true,
        epoch: Epoch(epoch),
        leader: None,
        masters: vec![addr("a")],
    })
}

/// Worker w0 follows leader "a", registers, and `mid` arrives before the
/// registration is durable; the registrations and launches cross.
fn crossing_registrations(mid: Message) {
    let mut h = Held::leader();
    let _ = h.subscribe(SUB, "fw", 1);
    let _ = h.msg(SUB, Message::DeclareGroup { request: 1, spec: spec(2) });
    let _ = h.settle();
    let mut cfg = worker_cfg("w0", 7, &["a"]);
    cfg.cores = 8;
    cfg.memory_mb = 8192;
    let mut w = Worker::new(cfg);
    let _ = w.handle(T, worker::Event::Start);
    let _ = w.handle(T, worker::Event::Connected { master: addr("a") });
    let reply = leading_reply(1);
    let regs = |out: &[worker::Action]| -> Vec<Message> {
        w_sends(out)
            .into_iter()
            .map(|(_, m)| m)
            .filter(|m| matches!(m, Message::RegisterWorker(_)))
            .collect()
    };
    let first = regs(&from(&mut w, T, "a", reply.clone()));
    assert_eq!(first.len(), 1);
    // `mid` while the first registration's write is in flight: the worker
    // registers again.
    let second = regs(&from(&mut w, T, "a", mid));
    assert_eq!(second.len(), 1, "the worker registers again");
    h.connect(W0, Role::Worker, "w0");
    let _ = h.msg(W0, first[0].clone());
    let mut to_worker = h.confirm_next();
    let mut started = Vec::new();
    let mut deliver = |w: &mut Worker, sends: Vec<(ConnId, Message)>| -> Vec<Message> {
        let mut back = Vec::new();
        for (conn, msg) in sends {
            if conn != W0 {
                continue;
            }
            for a in from(w, T, "a", msg) {
                match a {
                    worker::Action::Executor(ExecutorCommand::Start { executor, .. }) => {
                        started.push(executor)
                    }
                    worker::Action::Send { msg, .. } => back.push(msg),
                    _ => {}
                }
            }
        }
        back
    };
    let _ = deliver(&mut w, std::mem::take(&mut to_worker));
    // The second registration, taken before the launches, arrives now.
    let mut sends = h.msg(W0, second[0].clone());
    sends.extend(h.settle());
    let _ = deliver(&mut w, sends);
    assert_eq!(started.len(), 2, "the worker starts one executor per slot: {started:?}");
    let mut slots: Vec<u32> = started.iter().map(slot_of).collect();
    slots.sort();
    assert_eq!(slots, vec![0, 1]);
    assert_one_per_slot(&h);
}

/// A launch the worker does not take (it follows the master but is not
/// registered with it) is answered, not dropped: the master refills the
/// slot instead of waiting forever for an executor that never starts.
#[test]
fn a_launch_the_worker_does_not_take_is_answered() {
    let mut w = worker("w0", 7, &["a"]);
    let _ = w.handle(T, worker::Event::Start);
    let _ = w.handle(T, worker::Event::Connected { master: addr("a") });
    let _ = from(&mut w, T, "a", leading_reply(1));
    let launch = Message::LaunchExecutor {
        epoch: Epoch(1),
        executor: ExecutorId("fw/g#0#1.1".into()),
        framework: FrameworkId("fw".into()),
        spec: ExecutorSpec {
            command: vec!["/bin/true".into()],
            env: vec![],
            cores: 1,
            memory_mb: 1,
            launch: Default::default(),
        },
        launch: 1,
    };
    let out = from(&mut w, T, "a", launch);
    assert!(
        !out.iter().any(|a| matches!(a, worker::Action::Executor(ExecutorCommand::Start { .. }))),
        "not registered: not started"
    );
    let answer = w_sends(&out).into_iter().find_map(|(_, m)| match m {
        Message::ExecutorStatus { report, .. } => Some(report),
        _ => None,
    });
    let answer = answer.expect("the launch is answered");
    assert_eq!(answer.id, ExecutorId("fw/g#0#1.1".into()));
    assert!(answer.state.is_terminal(), "{answer:?}");
    // And a stale epoch's launch is ignored without an answer.
    let mut w = worker("w0", 7, &["a"]);
    let _ = w.handle(T, worker::Event::Start);
    let _ = w.handle(T, worker::Event::Connected { master: addr("a") });
    let _ = from(&mut w, T, "a", leading_reply(5));
    let stale = Message::LaunchExecutor {
        epoch: Epoch(4),
        executor: ExecutorId("fw/g#0#4.1".into()),
        framework: FrameworkId("fw".into()),
        spec: ExecutorSpec {
            command: vec!["/bin/true".into()],
            env: vec![],
            cores: 1,
            memory_mb: 1,
            launch: Default::default(),
        },
        launch: 1,
    };
    assert!(from(&mut w, T, "a", stale).is_empty(), "a stale epoch is fenced silently");
}

// ---------------------------------------------------------------------------
// Scenario 2: one binding per connection.

/// Two frameworks subscribing on one connection: the second is refused
/// (the first keeps its subscription), and when the connection closes the
/// first is disconnected (its failover timeout starts).
#[test]
fn a_second_framework_on_a_bound_connection_is_refused_and_the_first_is_disconnected_on_close() {
    let mut h = Held::leader();
    let sends = h.subscribe(SUB, "f1", 1);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Subscribed { .. })));
    let mut sends = h.msg(SUB, subscribe_msg("f2", 2));
    sends.extend(h.settle());
    let refusal = sends.iter().find_map(|(_, m)| match m {
        Message::SubscribeRefused { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    let refusal = refusal.expect("the second SUBSCRIBE is refused");
    assert!(refusal.contains("f1") && refusal.contains("f2"), "{refusal}");
    assert!(!sends.iter().any(|(_, m)| matches!(m, Message::Subscribed { .. })), "{sends:?}");
    let state = h.m.state();
    assert!(state.frameworks.iter().all(|f| f.id.as_str() == "f1"), "{:?}", state.frameworks);
    assert!(state.frameworks[0].connected);
    let _ = h.step(master::Event::Disconnected { conn: SUB });
    let state = h.m.state();
    assert!(!state.frameworks[0].connected, "f1 is disconnected: {:?}", state.frameworks);
    assert_eq!(state.frameworks[0].state, FrameworkState::Disconnected);
}

/// A second worker id registering on a connection bound to another worker
/// is refused with a reason naming both; when the connection closes, the
/// first worker is no longer bound to it.
#[test]
fn a_second_worker_on_a_bound_connection_is_refused_and_the_first_is_unbound_on_close() {
    let mut h = Held::leader();
    h.connect(W0, Role::Worker, "w0");
    let _ = h.msg(W0, register("w0", 7, vec![], 0));
    let sends = h.settle();
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Registered { .. })));
    let mut sends = h.msg(W0, register("w1", 8, vec![], 0));
    sends.extend(h.settle());
    let refusal = sends.iter().find_map(|(_, m)| match m {
        Message::RegisterRefused { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    let refusal = refusal.expect("the second registration is refused");
    assert!(refusal.contains("w0") && refusal.contains("w1"), "{refusal}");
    assert!(h.m.workers().iter().all(|w| w.id.as_str() == "w0"), "w1 is not registered");
    let _ = h.step(master::Event::Disconnected { conn: W0 });
    let w0 = h.m.workers().into_iter().find(|w| w.id.as_str() == "w0").unwrap();
    assert_eq!(w0.conn, None, "w0 is unbound when its connection closes");
}

// ---------------------------------------------------------------------------
// Scenario 3: two scale-ups in a row.

/// 1 → 2, then 2 → 3, both writes in flight: once the first is durable only
/// slot 1 is placed; slot 2 exists only in the second write, and is placed
/// once that one is durable.
#[test]
fn two_scale_ups_in_a_row_place_each_slot_only_once_a_durable_record_holds_it() {
    let (mut h, _) = Held::with_group(1);
    let a = h.msg(OP, scale(2, 10));
    let b = h.msg(OP, scale(3, 11));
    assert!(launches(&a).is_empty() && launches(&b).is_empty());
    assert_eq!(h.pending.len(), 2, "two writes in flight");
    let first = h.confirm_next();
    let placed: Vec<u32> = launches(&first).iter().map(slot_of).collect();
    assert_eq!(placed, vec![1], "only slot 1 is durable: {first:?}");
    let second = h.confirm_next();
    let placed: Vec<u32> = launches(&second).iter().map(slot_of).collect();
    assert_eq!(placed, vec![2], "slot 2 once its write is durable: {second:?}");
    let _ = h.settle();
    assert_one_per_slot(&h);
}

/// Down then up again (3 → 1 → 3) with both writes in flight: the
/// executors the scale-down cut hold their slots again after the scale-up,
/// so they keep running — the scale-down's write landing kills none of
/// them (seed 2492 of the simulator: it used to, killing executors that
/// held live slots) — and nothing new is placed for those slots: each slot
/// has one live executor at the master at every step, and is refilled only
/// once its executor ends.
#[test]
fn a_scale_down_then_up_keeps_the_executors_whose_slots_came_back_and_places_none_beside_them() {
    let (mut h, old) = Held::with_group(3);
    let down = h.msg(OP, scale(1, 10));
    let up = h.msg(OP, scale(3, 11));
    assert!(launches(&down).is_empty() && launches(&up).is_empty(), "{up:?}");
    assert_one_per_slot(&h);
    let first = h.confirm_next();
    assert!(launches(&first).is_empty(), "the 1-slot record is durable: {first:?}");
    assert!(kills(&first).is_empty(), "their slots came back: nothing is killed {first:?}");
    let second = h.confirm_next();
    assert!(launches(&second).is_empty(), "the old executors still hold them: {second:?}");
    assert_one_per_slot(&h);
    let mut placed = Vec::new();
    for x in &old[1..] {
        let report = report_of(x.clone(), ExecutorState::Killed);
        let mut sends = h.msg(W0, Message::ExecutorStatus { incarnation: Incarnation(7), report });
        sends.extend(h.settle());
        placed.extend(launches(&sends).iter().map(slot_of));
        assert_one_per_slot(&h);
    }
    placed.sort();
    assert_eq!(placed, vec![1, 2], "refilled once the old ones ended");
}

/// Down, then up after the scale-down is durable (3 → 1, durable, → 3):
/// the scale-down's surplus is killed when it lands, as no scale gave its
/// slots back yet; the restored slots are placed once those have ended.
#[test]
fn a_scale_down_made_durable_kills_its_surplus_before_a_later_scale_up() {
    let (mut h, old) = Held::with_group(3);
    let _ = h.msg(OP, scale(1, 10));
    let first = h.confirm_next();
    let mut killed = kills(&first);
    killed.sort();
    assert_eq!(killed, old[1..].to_vec(), "the surplus is killed once the scale-down is durable");
    assert_one_per_slot(&h);
}

// ---------------------------------------------------------------------------
// Scenario 4: a teardown's kills wait for the framework's end to be durable.

#[test]
fn a_teardown_kills_nothing_before_the_frameworks_end_is_durable() {
    let (mut h, placed) = Held::with_group(2);
    let sends = h.msg(SUB, Message::Teardown { request: 2 });
    assert!(kills(&sends).is_empty(), "no kill before the end is durable: {sends:?}");
    // A report of one of them meanwhile does not kill it early either.
    let report = report_of(placed[0].clone(), ExecutorState::Running);
    let sends = h.msg(W0, Message::ExecutorStatus { incarnation: Incarnation(7), report });
    assert!(kills(&sends).is_empty(), "no kill before the end is durable: {sends:?}");
    let mut all = Vec::new();
    while !h.pending.is_empty() {
        let before_last = h.pending.len() == 1;
        let sends = h.confirm_next();
        if !before_last {
            assert!(kills(&sends).is_empty(), "no kill before the last write: {sends:?}");
        }
        all.extend(sends);
    }
    let mut killed = kills(&all);
    killed.sort();
    let mut want = placed.clone();
    want.sort();
    assert_eq!(killed, want, "both are killed once the end is durable: {all:?}");
    assert!(all.iter().any(|(_, m)| matches!(m, Message::RequestAccepted { request: 2, .. })));
}

// ---------------------------------------------------------------------------
// Scenario 6 (master side): a clock stepped back.

/// A worker restarted after its host's clock stepped back has a lower
/// incarnation than its dead predecessor: once the predecessor's
/// connection is gone, the new one replaces it instead of being shut down.
/// While the old one is connected, the lower one is still refused.
#[test]
fn a_lower_incarnation_replaces_a_predecessor_whose_connection_is_gone() {
    let mut h = Held::leader();
    h.connect(W0, Role::Worker, "w0");
    let _ = h.msg(W0, register("w0", 500, vec![], 0));
    let _ = h.settle();
    // While the old one is connected: refused, as before.
    h.connect(ConnId(101), Role::Worker, "w0");
    let sends = h.msg(ConnId(101), register("w0", 400, vec![], 0));
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Shutdown { .. })), "{sends:?}");
    let _ = h.settle();
    // The old process is gone.
    let _ = h.step(master::Event::Disconnected { conn: W0 });
    h.connect(ConnId(102), Role::Worker, "w0");
    let mut sends = h.msg(ConnId(102), register("w0", 300, vec![], 0));
    sends.extend(h.settle());
    assert!(!sends.iter().any(|(_, m)| matches!(m, Message::Shutdown { .. })), "{sends:?}");
    assert!(sends
        .iter()
        .any(|(c, m)| *c == ConnId(102) && matches!(m, Message::Registered { .. })));
    let w0 = h.m.workers().into_iter().find(|w| w.id.as_str() == "w0").unwrap();
    assert_eq!(w0.incarnation, Incarnation(300));
}

/// A dead process's registration can come late, on the connection it opened
/// before it crashed, after its successor (a higher incarnation) registered
/// and while that one is between connections. It was sent by a process
/// connected before the successor registered, so it is an older process,
/// not a restart after a clock step: it replaces nothing, its connection is
/// closed, and the successor, registering again, is acknowledged instead of
/// told to shut down (sim seed 99173 of the services soak, docs/design.md#simulator-seeds).
#[test]
fn a_dead_processes_late_registration_does_not_replace_its_successor() {
    let mut h = Held::leader();
    // The first process (incarnation 100) connected; its registration is
    // still on its way when it crashes.
    let old = ConnId(9);
    h.connect(old, Role::Worker, "w0");
    // Its successor (incarnation 300) registers, then loses its connection.
    h.connect(ConnId(23), Role::Worker, "w0");
    let _ = h.msg(ConnId(23), register("w0", 300, vec![], 0));
    let sends = h.settle();
    assert!(sends.iter().any(|(c, m)| *c == ConnId(23) && matches!(m, Message::Registered { .. })));
    let _ = h.step(master::Event::Disconnected { conn: ConnId(23) });
    // The dead process's registration arrives.
    let out =
        h.m.handle(T, master::Event::Message { conn: old, msg: register("w0", 100, vec![], 0) });
    assert!(
        out.iter().any(|a| matches!(a, master::Action::Close { conn, .. } if *conn == old)),
        "its connection is closed: {out:?}"
    );
    assert!(m_sends(&out).is_empty(), "nothing is sent to a dead process: {out:?}");
    assert!(
        !out.iter().any(|a| matches!(a, master::Action::Store(_))),
        "nothing recorded: {out:?}"
    );
    let w0 = h.m.workers().into_iter().find(|w| w.id.as_str() == "w0").unwrap();
    assert_eq!(w0.incarnation, Incarnation(300), "the successor stays registered");
    // The successor registers again on a new connection: acknowledged.
    h.connect(ConnId(25), Role::Worker, "w0");
    let mut sends = h.msg(ConnId(25), register("w0", 300, vec![], 0));
    sends.extend(h.settle());
    assert!(!sends.iter().any(|(_, m)| matches!(m, Message::Shutdown { .. })), "{sends:?}");
    assert!(sends.iter().any(|(c, m)| *c == ConnId(25) && matches!(m, Message::Registered { .. })));
}

/// A scheduler restarted after its host's clock stepped back has a lower
/// instance id: once the old instance is disconnected, its SUBSCRIBE is a
/// failover to it, not "failed over to" the dead instance. While the old
/// instance is connected, the lower one is still refused.
#[test]
fn a_lower_instance_takes_over_a_framework_whose_instance_is_disconnected() {
    let mut h = Held::leader();
    let _ = h.subscribe(SUB, "fw", 500);
    h.connect(ConnId(2), Role::Subscriber, "s");
    let sends = h.msg(ConnId(2), subscribe_msg("fw", 400));
    assert!(
        sends
            .iter()
            .any(|(_, m)| matches!(m, Message::FrameworkError { failed_over_to: Some(_), .. })),
        "{sends:?}"
    );
    let _ = h.step(master::Event::Disconnected { conn: SUB });
    h.connect(ConnId(3), Role::Subscriber, "s");
    let mut sends = h.msg(ConnId(3), subscribe_msg("fw", 300));
    sends.extend(h.settle());
    assert!(
        !sends.iter().any(|(_, m)| matches!(m, Message::FrameworkError { .. })),
        "no failover to the dead instance: {sends:?}"
    );
    assert!(sends.iter().any(|(c, m)| *c == ConnId(3) && matches!(m, Message::Subscribed { .. })));
    let fw = h.m.frameworks().next().unwrap();
    assert_eq!(fw.instance, Some(InstanceId(300)));
}

// ---------------------------------------------------------------------------
// A worker declared DEAD across a partition (found by the simulator once it
// modelled TCP across partitions: seed 80 `--operator`).

/// A partition holds a launch in the TCP connection; the worker, silent,
/// is declared DEAD and its executors LOST. Had the connection stayed open,
/// the worker's registration queued behind the same partition came back
/// on it, took the worker back (its report was taken before the launch)
/// and a replacement went out behind the first launch: two executors in one
/// slot once the partition healed. The leader now closes a DEAD worker's
/// connection, so nothing it wrote off can be followed by a registration
/// on the same connection, and it sends nothing more on it.
#[test]
fn a_worker_declared_dead_has_its_connection_closed() {
    let (mut h, placed) = Held::with_group(1);
    assert_eq!(placed.len(), 1);
    let out = h.m.handle(Millis(600_000), master::Event::Tick);
    assert!(
        out.iter().any(|a| matches!(a, master::Action::Close { conn, .. } if *conn == W0)),
        "the DEAD worker's connection is closed: {out:?}"
    );
    let sends = m_sends(&out);
    assert_eq!(lost(&sends), placed, "its launch is written off");
    assert!(
        launches(&sends).is_empty() && sends.iter().all(|(c, _)| *c != W0),
        "nothing more goes out on the closed connection: {sends:?}"
    );
}

/// A launch for a slot an executor of an earlier leadership still runs on
/// this worker (found by the simulator: seed 15080 with ZooKeeper far away
/// and clock steps). The new leader placed the slot on a registration the
/// worker had sent before that executor started, held back by a partition
/// and delivered in one burst with the later ones. The worker answers the
/// launch `Killed` instead of running two executors of one slot; the leader
/// kills the other once its report arrives and fills the slot again.
#[test]
fn a_launch_into_a_slot_that_already_runs_here_is_answered_not_started() {
    let mut w = worker("w0", 7, &["a"]);
    let _ = w.handle(T, worker::Event::Start);
    let _ = w.handle(T, worker::Event::Connected { master: addr("a") });
    let _ = from(&mut w, T, "a", leading_reply(1));
    let registered = Message::Registered {
        epoch: Epoch(1),
        heartbeat_interval: Millis(1_000),
        duplicate: false,
        masters: vec![addr("a")],
    };
    let _ = from(&mut w, T, "a", registered);
    let launch = |epoch: u64, n: u64| Message::LaunchExecutor {
        epoch: Epoch(epoch),
        executor: ExecutorId(format!("fw/g#0#{epoch}.{n}")),
        framework: FrameworkId("fw".into()),
        spec: ExecutorSpec {
            command: vec!["/bin/true".into()],
            env: vec![],
            cores: 1,
            memory_mb: 1,
            launch: Default::default(),
        },
        launch: n,
    };
    let out = from(&mut w, T, "a", launch(1, 1));
    assert!(
        out.iter().any(|a| matches!(a, worker::Action::Executor(ExecutorCommand::Start { .. }))),
        "{out:?}"
    );
    let _ = w.handle(
        T,
        worker::Event::ExecutorChanged {
            executor: ExecutorId("fw/g#0#1.1".into()),
            state: ExecutorState::Running,
        },
    );
    // A later leader's launch into the same slot.
    let out = from(&mut w, T, "a", launch(2, 1));
    assert!(
        !out.iter().any(|a| matches!(a, worker::Action::Executor(ExecutorCommand::Start { .. }))),
        "not started beside the running one: {out:?}"
    );
    let answer = w_sends(&out).into_iter().find_map(|(_, m)| match m {
        Message::ExecutorStatus { report, .. } => Some(report),
        _ => None,
    });
    assert_eq!(
        answer.map(|r| (r.id, r.state)),
        Some((ExecutorId("fw/g#0#2.1".into()), ExecutorState::Killed))
    );
    // Another slot starts as usual.
    let other = Message::LaunchExecutor {
        epoch: Epoch(2),
        executor: ExecutorId("fw/g#1#2.2".into()),
        framework: FrameworkId("fw".into()),
        spec: ExecutorSpec {
            command: vec!["/bin/true".into()],
            env: vec![],
            cores: 1,
            memory_mb: 1,
            launch: Default::default(),
        },
        launch: 2,
    };
    let out = from(&mut w, T, "a", other);
    assert!(
        out.iter().any(|a| matches!(a, worker::Action::Executor(ExecutorCommand::Start { .. }))),
        "{out:?}"
    );
}

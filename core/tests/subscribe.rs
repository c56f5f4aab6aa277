//! The master's side of SUBSCRIBE (the five scenarios of the Mesos seed) and
//! executor placement, asserting the exact protocol actions.

mod common;

use common::*;
use regent_core::ids::InstanceId;
use regent_core::master::{self, Master};
use regent_core::policy::Placement;
use regent_core::protocol::{ExecutorReport, ExecutorState, GroupSpec, Message, Role, Subscribe};
use regent_core::store::StoreCommand;
use regent_core::subscriber::{self, Subscriber};
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Millis};

const T: Millis = Millis(0);

fn sub_msg(fw: Option<&str>, instance: u64, attempt: u64) -> Message {
    Message::Subscribe(Subscribe {
        framework: fw.map(FrameworkId::new),
        name: "app".into(),
        instance: InstanceId(instance),
        attempt,
        failover_timeout: Millis(30_000),
        tenant: None,
    })
}

fn spec(slots: u32) -> GroupSpec {
    GroupSpec {
        group: "main".into(),
        slots,
        command: vec!["/bin/sleep".into(), "10".into()],
        env: vec![],
        cores: 1,
        memory_mb: 512,
        policy: Default::default(),
        launch: Default::default(),
    }
}

fn leader() -> Master {
    let mut m = master("a");
    let _ = elect(&mut m, T, 1);
    m
}

fn open(m: &mut Master, conn: u64, role: Role) {
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(conn) });
    let _ = m.handle(T, master::Event::Message { conn: ConnId(conn), msg: hello(role, "x") });
}

/// Subscribes on `conn`, persisting; returns every send.
fn subscribe(m: &mut Master, conn: u64, msg: Message) -> Vec<(ConnId, Message)> {
    open(m, conn, Role::Subscriber);
    deliver_to_master(m, T, conn, msg)
}

fn framework_of(sends: &[(ConnId, Message)]) -> FrameworkId {
    sends
        .iter()
        .find_map(|(_, m)| match m {
            Message::Subscribed { framework, .. } => Some(framework.clone()),
            _ => None,
        })
        .expect("Subscribed")
}

fn closes(actions: &[master::Action]) -> Vec<ConnId> {
    actions
        .iter()
        .filter_map(|a| match a {
            master::Action::Close { conn, .. } => Some(*conn),
            _ => None,
        })
        .collect()
}

fn sub(instance: u64) -> Subscriber {
    let mut c = subscriber::Config::new("test", "app", InstanceId(instance), vec![addr("a")]);
    c.jitter_min_pct = 100;
    Subscriber::new(c)
}

fn sub_sends(actions: &[subscriber::Action]) -> Vec<Message> {
    actions
        .iter()
        .filter_map(|a| match a {
            subscriber::Action::Send { msg, .. } => Some(msg.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn mesos_subscribe_disconnect_seen_by_scheduler_only() {
    let mut m = leader();
    let first = subscribe(&mut m, 1, sub_msg(None, 7, 1));
    let fw = framework_of(&first);
    // The scheduler saw its connection drop; the master did not. The new
    // SUBSCRIBE (same instance, next attempt) replaces the old connection:
    // closed, without an ERROR (nobody is listening there).
    open(&mut m, 2, Role::Subscriber);
    let acts = m.handle(
        T,
        master::Event::Message { conn: ConnId(2), msg: sub_msg(Some(fw.as_str()), 7, 2) },
    );
    assert_eq!(closes(&acts), vec![ConnId(1)]);
    assert!(!m_sends(&acts).iter().any(|(_, m)| matches!(m, Message::FrameworkError { .. })));
    assert!(m_sends(&acts).is_empty(), "SUBSCRIBED waits for the durable record");
    let sends = m_sends(&persist_all(&mut m, T, &acts));
    assert!(matches!(&sends[..], [(ConnId(2), Message::Subscribed { epoch: Epoch(1), .. })]));
    assert_eq!(m.frameworks().next().unwrap().conn, Some(ConnId(2)));
}

#[test]
fn mesos_subscribe_disconnect_seen_by_master_only() {
    let mut m = leader();
    let mut s = sub(7);
    // The subscriber subscribes for real through its machine.
    let _ = s.handle(T, subscriber::Event::Start);
    let out = s.handle(T, subscriber::Event::Connected { master: addr("a") });
    let msgs = sub_sends(&out);
    assert!(matches!(&msgs[..], [Message::Hello(_), Message::Subscribe(_)]));
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(1) });
    let mut replies = Vec::new();
    for msg in msgs {
        replies.extend(deliver_to_master(&mut m, T, 1, msg));
    }
    for (_, msg) in replies {
        let _ = s.handle(T, subscriber::Event::Message { from: addr("a"), msg });
    }
    assert!(s.status().subscribed);
    // The master sees the connection go; the scheduler does not.
    let _ = m.handle(Millis(100), master::Event::Disconnected { conn: ConnId(1) });
    assert_eq!(m.frameworks().next().unwrap().conn, None);
    // No HEARTBEAT for 5 intervals: the subscriber closes and resubscribes.
    let out = s.handle(Millis(5_001), subscriber::Event::Tick);
    assert!(
        matches!(out.first(), Some(subscriber::Action::Close { .. })),
        "closes before anything else: {out:?}"
    );
    let mut now = Millis(5_001);
    let mut out = out;
    while !out.iter().any(|a| matches!(a, subscriber::Action::Connect { .. })) {
        now = now + Millis(100);
        out = s.handle(now, subscriber::Event::Tick);
    }
    let msgs = sub_sends(&s.handle(now, subscriber::Event::Connected { master: addr("a") }));
    let _ = m.handle(now, master::Event::Connected { conn: ConnId(2) });
    let _ = m.handle(now, master::Event::Message { conn: ConnId(2), msg: msgs[0].clone() });
    let acts = m.handle(now, master::Event::Message { conn: ConnId(2), msg: msgs[1].clone() });
    assert!(closes(&acts).is_empty(), "there is no old connection left to close");
    let sends = m_sends(&persist_all(&mut m, now, &acts));
    assert!(matches!(&sends[..], [(ConnId(2), Message::Subscribed { .. })]));
    let out =
        s.handle(now, subscriber::Event::Message { from: addr("a"), msg: sends[0].1.clone() });
    assert!(out.iter().any(|a| matches!(a, subscriber::Action::Subscribed { .. })));
}

#[test]
fn mesos_subscribe_scheduler_failover_same_connection_alive() {
    let mut m = leader();
    let fw = framework_of(&subscribe(&mut m, 1, sub_msg(None, 7, 1)));
    // A new scheduler instance takes over while the old connection is alive.
    open(&mut m, 2, Role::Subscriber);
    let acts = m.handle(
        T,
        master::Event::Message { conn: ConnId(2), msg: sub_msg(Some(fw.as_str()), 8, 1) },
    );
    match &acts[..] {
        [master::Action::Send {
            conn: ConnId(1),
            msg: Message::FrameworkError { failed_over_to: Some(InstanceId(8)), message, .. },
        }, master::Action::Close { conn: ConnId(1), .. }, master::Action::Store(StoreCommand::Persist { .. })] =>
        {
            assert!(
                message.contains("failed over") && message.contains(&InstanceId(8).to_string()),
                "{message}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    let sends = m_sends(&persist_all(&mut m, T, &acts));
    assert!(matches!(&sends[..], [(ConnId(2), Message::Subscribed { .. })]));
}

#[test]
fn mesos_subscribe_partitioned_old_leader_gets_error() {
    let mut m = leader();
    let fw = framework_of(&subscribe(&mut m, 1, sub_msg(None, 7, 1)));
    // Scheduler A (instance 7) is partitioned from its own peers but still
    // connected to the master; scheduler B (instance 8) is elected and
    // subscribes. A receives the ERROR and stops for good.
    let mut a = sub(7);
    let _ = a.handle(T, subscriber::Event::Start);
    let _ = a.handle(T, subscriber::Event::Connected { master: addr("a") });
    let subscribed = Message::Subscribed {
        epoch: Epoch(1),
        framework: fw.clone(),
        heartbeat_interval: Millis(1_000),
        executors: vec![],
    };
    let _ = a.handle(T, subscriber::Event::Message { from: addr("a"), msg: subscribed });
    open(&mut m, 2, Role::Subscriber);
    let acts = m.handle(
        T,
        master::Event::Message { conn: ConnId(2), msg: sub_msg(Some(fw.as_str()), 8, 1) },
    );
    let error = m_sends(&acts)
        .into_iter()
        .find(|(c, _)| *c == ConnId(1))
        .expect("ERROR to the old connection")
        .1;
    let out = a.handle(T, subscriber::Event::Message { from: addr("a"), msg: error });
    let reason = out
        .iter()
        .find_map(|x| match x {
            subscriber::Action::Exit { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .expect("the old scheduler exits");
    assert!(reason.contains(&InstanceId(8).to_string()), "{reason}");
    assert!(a.handle(Millis(10_000), subscriber::Event::Tick).is_empty());
}

#[test]
fn mesos_subscribe_out_of_order_retry() {
    let mut m = leader();
    let mut s = sub(7);
    let _ = s.handle(T, subscriber::Event::Start);
    let attempt_a = sub_sends(&s.handle(T, subscriber::Event::Connected { master: addr("a") }));
    // SUBSCRIBE (A) times out at the scheduler: it closes A, then sends B.
    let mut now = Millis(5_000);
    let out = s.handle(now, subscriber::Event::Tick);
    assert!(matches!(out.first(), Some(subscriber::Action::Close { .. })));
    let mut out = out;
    while !out.iter().any(|a| matches!(a, subscriber::Action::Connect { .. })) {
        now = now + Millis(100);
        out = s.handle(now, subscriber::Event::Tick);
    }
    let attempt_b = sub_sends(&s.handle(now, subscriber::Event::Connected { master: addr("a") }));
    // The master gets B first, then A, without having seen A's connection close.
    let _ = m.handle(now, master::Event::Connected { conn: ConnId(1) });
    let _ = m.handle(now, master::Event::Connected { conn: ConnId(2) });
    let _ = m.handle(now, master::Event::Message { conn: ConnId(2), msg: attempt_b[0].clone() });
    let acts = m.handle(now, master::Event::Message { conn: ConnId(2), msg: attempt_b[1].clone() });
    let to_b = m_sends(&persist_all(&mut m, now, &acts));
    assert!(matches!(&to_b[..], [(ConnId(2), Message::Subscribed { .. })]));
    let _ = m.handle(now, master::Event::Message { conn: ConnId(1), msg: attempt_a[0].clone() });
    let acts = m.handle(now, master::Event::Message { conn: ConnId(1), msg: attempt_a[1].clone() });
    // The stale attempt is refused on its own connection; B is untouched.
    assert!(
        matches!(
            &acts[..],
            [
                master::Action::Send {
                    conn: ConnId(1),
                    msg: Message::FrameworkError { failed_over_to: None, .. }
                },
                master::Action::Close { conn: ConnId(1), .. }
            ]
        ),
        "{acts:?}"
    );
    assert_eq!(m.frameworks().next().unwrap().conn, Some(ConnId(2)));
    // The scheduler, whose connection A is closed, only ever sees B's answer.
    let out = s.handle(now, subscriber::Event::Message { from: addr("a"), msg: to_b[0].1.clone() });
    assert!(out.iter().any(|a| matches!(a, subscriber::Action::Subscribed { .. })));
    assert!(!out.iter().any(|a| matches!(a, subscriber::Action::Exit { .. })));
    assert!(s.status().subscribed);
    assert_eq!(m.frameworks().count(), 1);
}

/// A leader with `n` workers of 4 cores / 4 GiB registered on conns 100+.
fn leader_with_workers(n: u64, placement: Placement) -> Master {
    let mut cfg = master::Config::new("a".into(), addr("a"));
    cfg.placement = placement;
    cfg.max_executor_retries = 1;
    let mut m = Master::new(cfg);
    let _ = elect(&mut m, T, 1);
    for i in 0..n {
        let conn = 100 + i;
        let _ = connect_worker(&mut m, T, conn, &format!("w{i}"));
        let reg = Message::RegisterWorker(regent_core::protocol::RegisterWorker {
            users: Default::default(),
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            worker: format!("w{i}").as_str().into(),
            incarnation: regent_core::Incarnation(conn),
            cores: 4,
            memory_mb: 4096,
            executors: vec![],
            epoch_seen: Epoch(1),
            launch_seen: 0,
            attributes: vec![],
        });
        let _ = deliver_to_master(&mut m, T, conn, reg);
    }
    m
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

fn declare(m: &mut Master, conn: u64, request: u64, spec: GroupSpec) -> Vec<(ConnId, Message)> {
    deliver_to_master(m, T, conn, Message::DeclareGroup { request, spec })
}

fn status(
    m: &mut Master,
    worker_conn: u64,
    id: &ExecutorId,
    fw: &FrameworkId,
    state: ExecutorState,
) -> Vec<(ConnId, Message)> {
    let report = ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id: id.clone(),
        framework: fw.clone(),
        cores: 1,
        memory_mb: 512,
        state,
    };
    let msg =
        Message::ExecutorStatus { incarnation: regent_core::Incarnation(worker_conn), report };
    deliver_to_master(m, T, worker_conn, msg)
}

#[test]
fn declared_group_is_persisted_acknowledged_then_spread_over_workers() {
    let mut m = leader_with_workers(3, Placement::Spread);
    let fw = framework_of(&subscribe(&mut m, 1, sub_msg(None, 7, 1)));
    let acts = m.handle(
        T,
        master::Event::Message {
            conn: ConnId(1),
            msg: Message::DeclareGroup { request: 1, spec: spec(3) },
        },
    );
    assert!(
        matches!(&acts[..], [master::Action::Store(StoreCommand::Persist { .. })]),
        "persisted before it is acknowledged"
    );
    let sends = m_sends(&persist_all(&mut m, T, &acts));
    assert_eq!(sends[0], (ConnId(1), Message::RequestAccepted { epoch: Epoch(1), request: 1 }));
    let l = launches(&sends);
    assert_eq!(
        l.iter().map(|(c, _)| c.0).collect::<Vec<_>>(),
        vec![100, 101, 102],
        "spread: one per worker"
    );
    assert!(l.iter().all(|(_, e)| e.as_str().starts_with(&format!("{fw}/main#"))));
    let updates = sends
        .iter()
        .filter(|(c, m)| *c == ConnId(1) && matches!(m, Message::ExecutorUpdate { .. }))
        .count();
    assert_eq!(updates, 3, "the subscriber hears of every launch");
    // Declaring the same group again is idempotent: nothing new launches.
    let again = declare(&mut m, 1, 2, spec(3));
    assert_eq!(again, vec![(ConnId(1), Message::RequestAccepted { epoch: Epoch(1), request: 2 })]);
    // A different spec for the group is refused and kills nothing.
    let refused = declare(&mut m, 1, 3, spec(5));
    assert!(
        matches!(&refused[..], [(ConnId(1), Message::RequestRefused { request: 3, reason, .. })] if reason.contains("different spec (changed: count 3 -> 5)")),
        "{refused:?}"
    );
    assert_eq!(m.executors().count(), 3);
}

#[test]
fn pack_fills_one_worker_before_the_next_and_never_over_capacity() {
    let mut m = leader_with_workers(2, Placement::Pack);
    let _ = subscribe(&mut m, 1, sub_msg(None, 7, 1));
    let sends = declare(&mut m, 1, 1, spec(10));
    let l = launches(&sends);
    assert_eq!(l.len(), 8, "two workers of 4 cores hold 8 one-core executors, no more");
    assert_eq!(l.iter().filter(|(c, _)| c.0 == 100).count(), 4);
    for w in m.workers() {
        assert!(w.cores_used <= w.cores && w.memory_used_mb <= w.memory_mb);
    }
}

#[test]
fn exits_use_the_retry_budget_lost_workers_do_not() {
    let mut m = leader_with_workers(2, Placement::Spread);
    let fw = framework_of(&subscribe(&mut m, 1, sub_msg(None, 7, 1)));
    let l = launches(&declare(&mut m, 1, 1, spec(1)));
    let (wc, first) = l[0].clone();
    let _ = status(&mut m, wc.0, &first, &fw, ExecutorState::Running);
    // A non-zero exit: one retry used (budget 1), replaced, the report acked after the write.
    let sends = status(&mut m, wc.0, &first, &fw, ExecutorState::Exited { code: 3 });
    assert!(sends
        .contains(&(wc, Message::ExecutorStatusAck { epoch: Epoch(1), executor: first.clone() })));
    let l = launches(&sends);
    assert_eq!(l.len(), 1, "the slot is refilled");
    let (wc2, second) = l[0].clone();
    // Its worker dies (the other keeps heartbeating): LOST, and refilled on
    // the other worker without using the budget — with a budget of 1 already
    // used, charging it would fail the slot instead.
    let other = if wc2.0 == 100 { 101 } else { 100 };
    let hb = Message::WorkerHeartbeat { incarnation: regent_core::Incarnation(other) };
    let _ = deliver_to_master(&mut m, Millis(95_000), other, hb);
    let out = m.handle(Millis(100_000), master::Event::Tick);
    let mut sends = m_sends(&out);
    sends.extend(m_sends(&persist_all(&mut m, Millis(100_000), &out)));
    assert!(sends.iter().any(|(_, msg)| matches!(msg, Message::ExecutorUpdate { info, .. } if info.id == second && info.state == ExecutorState::Lost)));
    assert!(
        !sends.iter().any(|(_, msg)| matches!(msg, Message::SlotFailed { .. })),
        "LOST must not use the retry budget"
    );
    let refill = launches(&sends);
    assert_eq!(refill.len(), 1, "the slot is refilled");
    assert_eq!(refill[0].0, ConnId(other), "on the live worker");
    let g = &m.frameworks().next().unwrap().groups[0];
    assert_eq!(g.record.retries_used, 1);
}

#[test]
fn exhausted_retry_budget_fails_the_slot_and_tells_the_subscriber() {
    let mut m = leader_with_workers(1, Placement::Spread);
    let fw = framework_of(&subscribe(&mut m, 1, sub_msg(None, 7, 1)));
    let (wc, e1) = launches(&declare(&mut m, 1, 1, spec(1)))[0].clone();
    let sends =
        status(&mut m, wc.0, &e1, &fw, ExecutorState::Failed { reason: "no such file".into() });
    let (_, e2) = launches(&sends)[0].clone();
    let sends = status(&mut m, wc.0, &e2, &fw, ExecutorState::Exited { code: 1 });
    assert!(launches(&sends).is_empty(), "budget of 1 retry is used up");
    assert!(sends
        .iter()
        .any(|(c, msg)| *c == ConnId(1) && matches!(msg, Message::SlotFailed { slot: 0, .. })));
    assert!(sends.contains(&(wc, Message::ExecutorStatusAck { epoch: Epoch(1), executor: e2 })));
    // A subscriber that resubscribes hears of the failed slot again.
    let sends = subscribe(&mut m, 2, sub_msg(Some(fw.as_str()), 7, 2));
    assert!(
        matches!(
            &sends[..],
            [(_, Message::Subscribed { .. }), (ConnId(2), Message::SlotFailed { slot: 0, .. })]
        ),
        "{sends:?}"
    );
}

#[test]
fn a_worker_returning_with_a_replaced_executor_is_told_to_kill_it() {
    let mut m = leader_with_workers(1, Placement::Spread);
    let fw = framework_of(&subscribe(&mut m, 1, sub_msg(None, 7, 1)));
    let (wc, e1) = launches(&declare(&mut m, 1, 1, spec(1)))[0].clone();
    // An executor the master never launched (of a forgotten launch).
    let stray = ExecutorId(format!("{fw}/main#0#0.99"));
    let sends = status(&mut m, wc.0, &stray, &fw, ExecutorState::Running);
    assert_eq!(
        sends,
        vec![(wc, Message::KillExecutorOnWorker { epoch: Epoch(1), executor: stray })]
    );
    assert!(m.executors().any(|e| e.id == e1));
}

#[test]
fn failover_timeout_removes_the_framework_and_kills_its_executors() {
    let mut m = leader_with_workers(1, Placement::Spread);
    let _ = subscribe(&mut m, 1, sub_msg(None, 7, 1));
    let (wc, e1) = launches(&declare(&mut m, 1, 1, spec(1)))[0].clone();
    let _ = m.handle(Millis(1_000), master::Event::Disconnected { conn: ConnId(1) });
    // Within the timeout the executor is left alone. (Its worker heartbeats
    // before each tick, so the tick's sweep spares it.)
    let beat = || Message::WorkerHeartbeat { incarnation: regent_core::Incarnation(100) };
    let _ = deliver_to_master(&mut m, Millis(20_000), 100, beat());
    let out = m.handle(Millis(20_000), master::Event::Tick);
    assert!(!m_sends(&out)
        .iter()
        .any(|(_, msg)| matches!(msg, Message::KillExecutorOnWorker { .. })));
    let _ = deliver_to_master(&mut m, Millis(31_001), 100, beat());
    let out = m.handle(Millis(31_001), master::Event::Tick);
    let kill = (wc, Message::KillExecutorOnWorker { epoch: Epoch(1), executor: e1 });
    // The kill waits for the framework's end to be durable (docs/design.md#issue-20).
    assert!(!m_sends(&out).contains(&kill));
    // Its history record first; the framework record's delete once that is
    // durable (see `master::history`).
    assert!(out.iter().any(|a| matches!(
        a,
        master::Action::Store(StoreCommand::Persist { record: regent_core::store::Record::History(h), .. })
            if h.framework.outcome == regent_core::protocol::FrameworkOutcome::TimedOut
    )));
    assert!(!out
        .iter()
        .any(|a| matches!(a, master::Action::Store(StoreCommand::Unpersist { .. }))));
    let after = persist_all(&mut m, Millis(31_001), &out);
    assert!(after.iter().any(|a| matches!(
        a,
        master::Action::Store(StoreCommand::Unpersist {
            key: regent_core::store::RecordKey::Framework(_),
            ..
        })
    )));
    assert!(!m_sends(&after).contains(&kill), "not before the record's delete is durable");
    let last = persist_all(&mut m, Millis(31_001), &after);
    assert!(m_sends(&last).contains(&kill), "killed once the end is durable");
    assert_eq!(m.frameworks().count(), 0);
}

#[test]
fn a_takeover_that_declares_the_same_group_adopts_running_executors() {
    let mut m = leader_with_workers(2, Placement::Spread);
    let fw = framework_of(&subscribe(&mut m, 1, sub_msg(None, 7, 1)));
    let l = launches(&declare(&mut m, 1, 1, spec(2)));
    // Instance 8 takes over and declares the same group: nothing is killed or relaunched.
    let sends = subscribe(&mut m, 2, sub_msg(Some(fw.as_str()), 8, 1));
    let snapshot = sends.iter().find_map(|(_, msg)| match msg {
        Message::Subscribed { executors, .. } => Some(executors.clone()),
        _ => None,
    });
    assert_eq!(snapshot.unwrap().len(), 2, "SUBSCRIBED carries the framework's executors");
    let sends = declare(&mut m, 2, 1, spec(2));
    assert_eq!(sends, vec![(ConnId(2), Message::RequestAccepted { epoch: Epoch(1), request: 1 })]);
    assert_eq!(
        m.executors().map(|e| e.id.clone()).collect::<Vec<_>>(),
        l.iter().map(|(_, e)| e.clone()).collect::<Vec<_>>()
    );
}

//! Worker registration scenarios from SPARK-4592 and its follow-ups, asserting
//! the exact protocol actions of the worker and master machines.

mod common;

use common::*;
use regent_core::master::{self, WorkerState};
use regent_core::protocol::{LeaderHint, Message, Role};
use regent_core::store::StoreCommand;
use regent_core::worker::{self, Timer};
use regent_core::{ConnId, Epoch, Incarnation, MasterId, Millis};

const T0: Millis = Millis(0);

/// Brings a worker up against leader `a` (epoch 1) and standby `b`, registered
/// with `a` on conn 1 (`b` holds conn 2). Returns (a, b, worker).
fn registered_with_a(
) -> (regent_core::master::Master, regent_core::master::Master, regent_core::worker::Worker) {
    let mut a = master("a");
    let mut b = master("b");
    let _ = elect(&mut a, T0, 1);
    let mut w = worker("w1", 7, &["a", "b"]);
    let out = w.handle(T0, worker::Event::Start);
    assert!(out.contains(&worker::Action::Connect { master: addr("a") }));
    assert!(out.contains(&worker::Action::Connect { master: addr("b") }));
    let hello_a = only_send_to(&w.handle(T0, worker::Event::Connected { master: addr("a") }), "a");
    let hello_b = only_send_to(&w.handle(T0, worker::Event::Connected { master: addr("b") }), "b");
    assert!(matches!(hello_a, Message::Hello(_)) && matches!(hello_b, Message::Hello(_)));
    let reply_a = connect_worker(&mut a, T0, 1, "w1");
    let reply_b = connect_worker(&mut b, T0, 2, "w1");
    // The leader proves leadership; the worker follows it and registers there only.
    let out = from(&mut w, T0, "a", reply_a);
    assert_eq!(w_registrations(&out), vec![addr("a")]);
    let reg = only_send_to(&out, "a");
    let out_b = from(&mut w, T0, "b", reply_b);
    assert!(
        w_registrations(&out_b).is_empty(),
        "a standby's Hello reply must not draw a registration"
    );
    // Registered only after Persisted (docs/design.md#durable-before-acknowledged).
    let acts = a.handle(T0, master::Event::Message { conn: ConnId(1), msg: reg });
    assert!(m_sends(&acts).is_empty(), "no acknowledgement before the record is durable");
    assert!(matches!(acts[..], [master::Action::Store(StoreCommand::Persist { .. })]));
    let acked = m_sends(&persist_all(&mut a, T0, &acts));
    assert!(matches!(
        &acked[..],
        [(ConnId(1), Message::Registered { duplicate: false, epoch: Epoch(1), .. })]
    ));
    let out = from(&mut w, T0, "a", acked[0].1.clone());
    assert_eq!(w.deadline(Timer::Registration), None, "registered: no retry ({out:?})");
    assert!(w.status().registered);
    (a, b, w)
}

#[test]
fn spark_4592_failover_registers_once() {
    let (_a, mut b, mut w) = registered_with_a();
    let t = Millis(5_000);
    // Master A dies.
    let out = w.handle(t, worker::Event::Disconnected { master: addr("a") });
    assert!(
        w_sends(&out).is_empty(),
        "losing A must not make the worker register with every master"
    );
    // A retry fires before B's MasterChanged arrives: A's link is down, and
    // the worker must not fall back to registering with B (the SPARK-4592 race).
    let out = w.handle(t + Millis(300), worker::Event::Tick);
    assert!(
        w_registrations(&out).is_empty(),
        "re-registration goes to the followed master only: {out:?}"
    );
    // B takes over and tells the worker.
    let acts = elect(&mut b, t, 2);
    let changed = m_sends(&acts);
    assert_eq!(changed.len(), 1);
    assert!(matches!(&changed[0], (ConnId(2), Message::MasterChanged { epoch: Epoch(2), .. })));
    let out = from(&mut w, t, "b", changed[0].1.clone());
    assert_eq!(w_registrations(&out), vec![addr("b")], "exactly one registration, with B");
    let reg = only_send_to(&out, "b");
    match &reg {
        Message::RegisterWorker(r) => {
            assert_eq!(r.epoch_seen, Epoch(2));
            assert_eq!((r.cores, r.memory_mb), (4, 4096), "full state in one message");
        }
        other => panic!("unexpected {other:?}"),
    }
    let replies = deliver_to_master(&mut b, t, 2, reg);
    assert!(matches!(
        &replies[..],
        [(ConnId(2), Message::Registered { duplicate: false, epoch: Epoch(2), .. })]
    ));
    let out = from(&mut w, t, "b", replies[0].1.clone());
    assert!(w_exit(&out).is_none());
    // A stale retry timer afterwards does nothing.
    let out = w.handle(t + Millis(2_000), worker::Event::Tick);
    assert!(w_registrations(&out).is_empty());
    assert_eq!(b.workers().len(), 1);
    assert_eq!(b.workers()[0].state, WorkerState::Alive);
    assert_eq!(w.status().active, Some(addr("b")));
}

#[test]
fn spark_16190_first_retry_only_active_master() {
    let mut a = master("a");
    let _ = elect(&mut a, T0, 1);
    let mut w = worker("w1", 7, &["a", "b", "c"]);
    let _ = w.handle(T0, worker::Event::Start);
    for m in ["a", "b", "c"] {
        let _ = w.handle(T0, worker::Event::Connected { master: addr(m) });
    }
    // Nobody has proved leadership yet: the first retry goes to every master.
    let retry = |w: &worker::Worker| w.deadline(Timer::Registration).expect("a retry is armed");
    let at = retry(&w);
    let out = w.handle(at, worker::Event::Tick);
    assert_eq!(w_registrations(&out), vec![addr("a"), addr("b"), addr("c")]);
    // A proves leadership; the worker registers with A, and that is lost.
    let reply = connect_worker(&mut a, T0, 1, "w1");
    let out = from(&mut w, at + Millis(100), "a", reply);
    assert_eq!(w_registrations(&out), vec![addr("a")]);
    // Every retry from now on goes to A only, including the very first one.
    for i in 0..3 {
        let at = retry(&w);
        let out = w.handle(at, worker::Event::Tick);
        assert_eq!(w_registrations(&out), vec![addr("a")], "retry {i} went elsewhere: {out:?}");
    }
}

#[test]
fn spark_4592_caveat_b_fails_a_recovers_fenced_by_epoch() {
    let (mut a, mut b, mut w) = registered_with_a();
    let t = Millis(1_000);
    let _ = w.handle(t, worker::Event::Disconnected { master: addr("a") });
    let changed = m_sends(&elect(&mut b, t, 2));
    let out = from(&mut w, t, "b", changed[0].1.clone());
    let replies = deliver_to_master(&mut b, t, 2, only_send_to(&out, "b"));
    let _ = from(&mut w, t, "b", replies[0].1.clone());
    assert_eq!(w.status().active, Some(addr("b")));
    // B fails; A comes back still believing it leads at epoch 1 (it never
    // heard of its deposition). Everything it says is fenced.
    let _ = w.handle(t, worker::Event::Disconnected { master: addr("b") });
    let _ = w.handle(t, worker::Event::Connected { master: addr("a") });
    let stale_hello = connect_worker(&mut a, t, 3, "w1");
    assert!(matches!(&stale_hello, Message::HelloReply(r) if r.leading && r.epoch == Epoch(1)));
    let stale = [
        stale_hello,
        Message::Registered {
            epoch: Epoch(1),
            heartbeat_interval: Millis(1_000),
            duplicate: false,
            masters: vec![],
        },
        Message::HeartbeatAck { epoch: Epoch(1) },
        Message::ReconnectWorker { epoch: Epoch(1) },
        Message::Shutdown { epoch: Epoch(1), reason: "stale".into() },
        Message::MasterChanged {
            epoch: Epoch(1),
            leader: LeaderHint { id: MasterId::new("a"), addr: addr("a"), epoch: Epoch(1) },
            masters: vec![],
        },
    ];
    for msg in stale {
        let out = from(&mut w, t, "a", msg.clone());
        assert!(out.is_empty(), "{msg:?} from a deposed leader must be ignored, got {out:?}");
    }
    assert_eq!(w.status().max_epoch, Epoch(2));
    assert_eq!(w.status().active, Some(addr("b")));
    // A is properly re-elected at a higher epoch: the worker registers once.
    let _ = a.handle(t, master::Event::Revoked);
    let _ = connect_worker(&mut a, t, 4, "w1");
    let changed = m_sends(&elect(&mut a, t, 3));
    let out = from(&mut w, t, "a", changed[0].1.clone());
    assert_eq!(w_registrations(&out), vec![addr("a")]);
    let reg = only_send_to(&out, "a");
    let replies = deliver_to_master(&mut a, t, 4, reg.clone());
    assert!(matches!(
        &replies[..],
        [(_, Message::Registered { duplicate: false, epoch: Epoch(3), .. })]
    ));
    // Even a delayed duplicate of that registration is harmless.
    let replies = deliver_to_master(&mut a, t, 4, reg);
    assert!(matches!(&replies[..], [(_, Message::Registered { duplicate: true, .. })]));
    let out = from(&mut w, t, "a", replies[0].1.clone());
    assert!(w_exit(&out).is_none());
    assert_eq!(a.workers().len(), 1);
}

#[test]
fn spark_23191_blip_reregister_same_master_idempotent() {
    let (mut a, _b, mut w) = registered_with_a();
    let t = Millis(2_000);
    // A network blip: the worker loses its connection to A and comes back.
    let _ = w.handle(t, worker::Event::Disconnected { master: addr("a") });
    assert!(!w.status().registered);
    let t = t + w.config().reconnect_max;
    let out = w.handle(t, worker::Event::Tick);
    assert!(out.contains(&worker::Action::Connect { master: addr("a") }));
    let _ = w.handle(t, worker::Event::Connected { master: addr("a") });
    let _ = a.handle(t, master::Event::Disconnected { conn: ConnId(1) });
    let reply = connect_worker(&mut a, t, 9, "w1");
    let out = from(&mut w, t, "a", reply);
    let reg = only_send_to(&out, "a");
    // Same incarnation, same master: acknowledged at once, no new write.
    let acts = a.handle(t, master::Event::Message { conn: ConnId(9), msg: reg.clone() });
    assert!(!acts.iter().any(|a| matches!(a, master::Action::Store(StoreCommand::Persist { .. }))));
    let sends = m_sends(&acts);
    assert!(matches!(&sends[..], [(ConnId(9), Message::Registered { duplicate: true, .. })]));
    let out = from(&mut w, t, "a", sends[0].1.clone());
    assert!(w_exit(&out).is_none());
    assert!(w.status().registered);
    assert_eq!(a.workers().len(), 1);
    assert_eq!(a.workers()[0].conn, Some(ConnId(9)));
}

#[test]
fn unknown_worker_heartbeat_asks_to_register_again() {
    let mut a = master("a");
    let _ = elect(&mut a, T0, 4);
    let _ = connect_worker(&mut a, T0, 1, "w1");
    let out = a.handle(
        T0,
        master::Event::Message {
            conn: ConnId(1),
            msg: Message::WorkerHeartbeat { incarnation: Incarnation(7) },
        },
    );
    assert_eq!(m_sends(&out), vec![(ConnId(1), Message::ReconnectWorker { epoch: Epoch(4) })]);
    // The worker, following that master, registers again.
    let mut w = worker("w1", 7, &["a"]);
    let _ = w.handle(T0, worker::Event::Start);
    let _ = w.handle(T0, worker::Event::Connected { master: addr("a") });
    let out = from(&mut w, T0, "a", Message::ReconnectWorker { epoch: Epoch(4) });
    assert_eq!(w_registrations(&out), vec![addr("a")]);
}

#[test]
fn id_conflict_between_two_incarnations() {
    let mut a = master("a");
    let _ = elect(&mut a, T0, 1);
    let _ = connect_worker(&mut a, T0, 1, "w1");
    let _ = connect_worker(&mut a, T0, 2, "w1");
    let old = worker("w1", 100, &["a"]);
    let new = worker("w1", 200, &["a"]);
    let reg = |w: &regent_core::worker::Worker| {
        Message::RegisterWorker(regent_core::protocol::RegisterWorker {
            users: Default::default(),
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            worker: w.config().id.clone(),
            incarnation: w.config().incarnation,
            cores: 4,
            memory_mb: 4096,
            executors: vec![],
            epoch_seen: Epoch(1),
            launch_seen: 0,
            attributes: vec![],
        })
    };
    let _ = deliver_to_master(&mut a, T0, 1, reg(&old));
    let acts = a.handle(T0, master::Event::Message { conn: ConnId(2), msg: reg(&new) });
    // The old process is told why, and its connection closed; the new one persisted.
    match &acts[..] {
        [master::Action::Send { conn: ConnId(1), msg: Message::Shutdown { reason, .. } }, master::Action::Close { conn: ConnId(1), .. }, master::Action::Store(StoreCommand::Persist { .. })] =>
        {
            assert!(reason.contains("w1") && reason.contains("conflict"), "{reason}");
            assert!(
                reason.contains(&Incarnation(100).to_string())
                    && reason.contains(&Incarnation(200).to_string())
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    let _ = persist_all(&mut a, T0, &acts);
    // The old incarnation comes back: refused, never replacing its successor.
    let _ = connect_worker(&mut a, T0, 3, "w1");
    let acts = a.handle(T0, master::Event::Message { conn: ConnId(3), msg: reg(&old) });
    assert!(matches!(
        &acts[..],
        [
            master::Action::Send { conn: ConnId(3), msg: Message::Shutdown { .. } },
            master::Action::Close { conn: ConnId(3), .. }
        ]
    ));
    assert_eq!(a.workers().len(), 1);
    assert_eq!(a.workers()[0].incarnation, Incarnation(200));
    // A worker told to shut down exits, naming the reason.
    let mut w = old;
    let _ = w.handle(T0, worker::Event::Start);
    let _ = w.handle(T0, worker::Event::Connected { master: addr("a") });
    let out = from(
        &mut w,
        T0,
        "a",
        Message::Shutdown { epoch: Epoch(1), reason: "worker id w1 conflict".into() },
    );
    assert!(w_exit(&out).unwrap().contains("conflict"));
}

#[test]
fn gives_up_before_first_registration_naming_the_masters() {
    let mut w = worker("w1", 7, &["m1:7077", "m2:7077"]);
    let cfg = w.config().clone();
    let _ = w.handle(T0, worker::Event::Start);
    let mut now = T0;
    let mut next = w.deadline(Timer::Registration).expect("a registration timer");
    for m in ["m1:7077", "m2:7077"] {
        let _ = w.handle(T0, worker::Event::ConnectFailed { master: addr(m) });
    }
    for attempt in 1..=cfg.total_retries + 1 {
        let gap = next.since(now);
        let base = if attempt <= cfg.initial_retries {
            cfg.initial_retry_interval
        } else {
            cfg.prolonged_retry_interval
        };
        assert!(
            gap >= Millis(base.0 / 2) && gap <= Millis(base.0 * 3 / 2),
            "attempt {attempt}: gap {gap} vs base {base}"
        );
        now = next;
        let out = w.handle(now, worker::Event::Tick);
        if attempt == cfg.total_retries + 1 {
            let reason = w_exit(&out).expect("gives up after the last attempt");
            assert!(reason.contains("m1:7077") && reason.contains("m2:7077"), "{reason}");
            return;
        }
        assert!(w_exit(&out).is_none(), "exited early at attempt {attempt}");
        next = w
            .deadline(Timer::Registration)
            .unwrap_or_else(|| panic!("no next registration timer at attempt {attempt}"));
    }
}

#[test]
fn never_gives_up_after_first_registration() {
    let (_a, _b, mut w) = registered_with_a();
    let mut now = Millis(1_000);
    let _ = w.handle(now, worker::Event::Disconnected { master: addr("a") });
    let _ = w.handle(now, worker::Event::Disconnected { master: addr("b") });
    let max = w.config().reconnect_max;
    for _ in 0..500 {
        now = now + Millis(1_000);
        let mut out = w.handle(now, worker::Event::Tick);
        for m in ["a", "b"] {
            if out.contains(&worker::Action::Connect { master: addr(m) }) {
                out.extend(w.handle(now, worker::Event::ConnectFailed { master: addr(m) }));
            }
        }
        assert!(w_exit(&out).is_none(), "a registered worker never exits for lack of a master");
        if let Some(at) = w.deadline(Timer::Reconnect) {
            assert!(at.since(now) <= max, "reconnect backoff is capped");
        }
    }
}

#[test]
fn missing_heartbeat_ack_marks_connection_dead() {
    let (_a, _b, mut w) = registered_with_a();
    let interval = Millis(1_000);
    let mut now = T0;
    let mut closed = false;
    for _ in 0..10 {
        now = now + interval;
        let out = w.handle(now, worker::Event::Tick);
        if out
            .iter()
            .any(|a| matches!(a, worker::Action::Close { master, .. } if master.as_str() == "a"))
        {
            closed = true;
            assert!(!w.status().registered);
            assert!(w.deadline(Timer::Reconnect).is_some(), "a redial is armed");
            break;
        }
        assert!(matches!(
            only_send_to(&out, "a"),
            Message::WorkerHeartbeat { incarnation: Incarnation(7) }
        ));
    }
    assert!(closed, "a half-open connection is detected without a runtime timer");
    assert!(now.0 > 4 * interval.0, "not before the configured factor");
}

#[test]
fn sweep_marks_silent_worker_dead_and_unpersists_by_incarnation() {
    let (mut a, _b, _w) = registered_with_a();
    let timeout = Millis(10_000);
    let out = a.handle(Millis(5_000), master::Event::Tick);
    assert!(!out
        .iter()
        .any(|x| matches!(x, master::Action::Store(StoreCommand::Unpersist { .. }))));
    let out = a.handle(timeout + Millis(1), master::Event::Tick);
    assert!(out.iter().any(|x| matches!(
        x,
        master::Action::Store(StoreCommand::Unpersist { incarnation: Some(Incarnation(7)), .. })
    )));
    assert_eq!(a.workers()[0].state, WorkerState::Dead);
    // A repeated sweep does not delete twice.
    let out = a.handle(timeout + Millis(2), master::Event::Tick);
    assert!(!out
        .iter()
        .any(|x| matches!(x, master::Action::Store(StoreCommand::Unpersist { .. }))));
    // Its heartbeat now asks it to register again.
    let out = a.handle(
        timeout + Millis(3),
        master::Event::Message {
            conn: ConnId(1),
            msg: Message::WorkerHeartbeat { incarnation: Incarnation(7) },
        },
    );
    assert!(matches!(&m_sends(&out)[..], [(_, Message::ReconnectWorker { .. })]));
}

#[test]
fn standby_answers_not_leader_with_hint_and_pushes_master_changed_when_elected() {
    let mut b = master("b");
    let _ = b.handle(
        T0,
        master::Event::LeaderIs(LeaderHint {
            id: MasterId::new("a"),
            addr: addr("a"),
            epoch: Epoch(5),
        }),
    );
    let _ = connect_worker(&mut b, T0, 1, "w1");
    let _ = b.handle(T0, master::Event::Connected { conn: ConnId(2) });
    let _ =
        b.handle(T0, master::Event::Message { conn: ConnId(2), msg: hello(Role::Client, "ops") });
    let reg = Message::RegisterWorker(regent_core::protocol::RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: "w1".into(),
        incarnation: Incarnation(1),
        cores: 1,
        memory_mb: 1,
        executors: vec![],
        epoch_seen: Epoch(0),
        launch_seen: 0,
        attributes: vec![],
    });
    let out = b.handle(T0, master::Event::Message { conn: ConnId(1), msg: reg });
    match &m_sends(&out)[..] {
        [(ConnId(1), Message::NotLeader { epoch: Epoch(5), leader: Some(h) })] => {
            assert_eq!(h.addr, addr("a"))
        }
        other => panic!("unexpected {other:?}"),
    }
    let out = elect(&mut b, T0, 6);
    let sends = m_sends(&out);
    assert_eq!(sends.len(), 1, "MasterChanged goes to workers only: {sends:?}");
    assert!(matches!(&sends[0], (ConnId(1), Message::MasterChanged { epoch: Epoch(6), .. })));
    assert_eq!(b.status(), master::Status::Alive);
}

#[test]
fn a_dropped_master_connection_is_redialled_within_10_ms_then_with_backoff() {
    let (_a, _b, mut w) = registered_with_a();
    assert_eq!(w.config().reconnect_first_max, Millis(10));
    let t = Millis(2_000);
    let reconnect_at =
        |w: &worker::Worker| w.deadline(Timer::Reconnect).expect("a reconnect armed");
    // The open connection drops: redialled within 10 ms.
    let _ = w.handle(t, worker::Event::Disconnected { master: addr("a") });
    let at = reconnect_at(&w);
    assert!(at >= t && at <= t + Millis(10), "first redial at {at:?}");
    let out = w.handle(at, worker::Event::Tick);
    assert!(out.contains(&worker::Action::Connect { master: addr("a") }));
    // The master is still down: the next attempt backs off (25–50 ms).
    let _ = w.handle(at, worker::Event::Disconnected { master: addr("a") });
    let next = reconnect_at(&w);
    let delay = next.0 - at.0;
    assert!((25..=50).contains(&delay), "second redial after {delay} ms");
}

#[test]
fn learned_masters_the_leader_stops_listing_are_dropped_configured_ones_kept() {
    let (_a, _b, mut w) = registered_with_a();
    let t = Millis(1_000);
    let changed = |masters: &[&str]| Message::MasterChanged {
        epoch: Epoch(1),
        leader: LeaderHint { id: MasterId::new("a"), addr: addr("a"), epoch: Epoch(1) },
        masters: masters.iter().map(|m| addr(m)).collect(),
    };
    // The leader lists a new master c: the worker learns it and dials it.
    let out = from(&mut w, t, "a", changed(&["a", "b", "c"]));
    assert!(out.contains(&worker::Action::Connect { master: addr("c") }), "{out:?}");
    assert!(w_registrations(&out).is_empty(), "the same leader and epoch: no re-registration");
    let _ = w.handle(t, worker::Event::Connected { master: addr("c") });
    // c leaves the election, and so does b: the learned c is dropped (its
    // connection closed), the configured b is kept.
    let out = from(&mut w, t, "a", changed(&["a"]));
    assert!(
        out.iter()
            .any(|a| matches!(a, worker::Action::Close { master, .. } if *master == addr("c"))),
        "{out:?}"
    );
    assert!(
        !out.iter()
            .any(|a| matches!(a, worker::Action::Close { master, .. } if *master == addr("b"))),
        "a configured master is kept: {out:?}"
    );
    // A message from the dropped master is ignored now.
    let out = from(&mut w, t, "c", changed(&["c"]));
    assert!(out.is_empty(), "{out:?}");
    assert!(w.status().registered);
    assert_eq!(w.status().active, Some(addr("a")));
}

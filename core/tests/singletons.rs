//! Singletons (docs/design.md#issue-45), the worker's side: an executor of
//! a group with `disconnect = { stop_after = "30s" }` is killed by its
//! worker once it has heard from no master for 30 s, never while it hears
//! from one (a change of leader included), and its end is reported with a
//! reason saying so; other executors run on.

mod common;

use common::*;
use regent_core::launch::{Disconnect, LaunchSpec};
use regent_core::protocol::{ExecutorSpec, ExecutorState, LeaderHint, Message};
use regent_core::worker::{self, Worker};
use regent_core::{Epoch, ExecutorId, FrameworkId, MasterId, Millis};

fn launch(id: &str, slot_group: &str, disconnect: Option<Disconnect>) -> Message {
    Message::LaunchExecutor {
        epoch: Epoch(2),
        executor: ExecutorId::new(format!("f/{slot_group}#0#1")),
        framework: FrameworkId::new("f"),
        spec: ExecutorSpec {
            command: vec![id.into()],
            env: vec![],
            cores: 1,
            memory_mb: 64,
            launch: Box::new(LaunchSpec { disconnect, ..Default::default() }),
        },
        launch: 1,
    }
}

/// A worker registered with `a` at epoch 2 (also connected to `b`),
/// running singleton `f/leader#0#1` (stop_after 30 s) and plain `f/web#0#1`.
fn worker_with_a_singleton() -> Worker {
    let mut w = worker("w1", 7, &["a", "b"]);
    let _ = w.handle(Millis(0), worker::Event::Start);
    let _ = w.handle(Millis(0), worker::Event::Connected { master: addr("a") });
    let _ = w.handle(Millis(0), worker::Event::Connected { master: addr("b") });
    let _ = from(
        &mut w,
        Millis(0),
        "a",
        Message::Registered {
            epoch: Epoch(2),
            heartbeat_interval: Millis(1_000),
            duplicate: false,
            masters: vec![addr("a"), addr("b")],
        },
    );
    let _ =
        from(&mut w, Millis(0), "a", launch("lead", "leader", Some(Disconnect::after_ms(30_000))));
    let _ = from(&mut w, Millis(0), "a", launch("serve", "web", None));
    for id in ["f/leader#0#1", "f/web#0#1"] {
        let state = ExecutorState::Running;
        let _ = w.handle(
            Millis(0),
            worker::Event::ExecutorChanged { executor: ExecutorId::new(id), state },
        );
    }
    w
}

/// Ticks from `from` to `to` every 500 ms; the kills on the way, with when.
fn run(w: &mut Worker, from: u64, to: u64) -> Vec<(u64, ExecutorId)> {
    (from..=to)
        .step_by(500)
        .flat_map(|t| {
            w_kills(&w.handle(Millis(t), worker::Event::Tick)).into_iter().map(move |k| (t, k))
        })
        .collect()
}

/// Ticks from `from` to `to` every 500 ms while master `m` acknowledges
/// every heartbeat the moment it is sent; the kills on the way.
fn run_acked(w: &mut Worker, m: &str, from_t: u64, to: u64) -> Vec<(u64, ExecutorId)> {
    let mut killed = Vec::new();
    for t in (from_t..=to).step_by(500) {
        let out = w.handle(Millis(t), worker::Event::Tick);
        killed.extend(w_kills(&out).into_iter().map(|k| (t, k)));
        let beats = out
            .iter()
            .filter(|a| matches!(a, worker::Action::Send { msg: Message::WorkerHeartbeat { .. }, to } if to.as_str() == m))
            .count();
        for _ in 0..beats {
            let ack = Message::HeartbeatAck { epoch: Epoch(2) };
            killed.extend(w_kills(&from(w, Millis(t), m, ack)).into_iter().map(|k| (t, k)));
        }
    }
    killed
}

#[test]
fn a_singleton_is_killed_once_no_master_was_heard_for_its_stop_after() {
    let mut w = worker_with_a_singleton();
    // Acknowledged heartbeats until 10 s: the master is heard.
    assert!(run_acked(&mut w, "a", 500, 10_000).is_empty());
    assert!(run(&mut w, 10_500, 39_500).is_empty(), "heard 10 s ago: runs on until 40 s");
    let leader = ExecutorId::new("f/leader#0#1");
    assert_eq!(
        run(&mut w, 40_000, 60_000),
        vec![(40_000, leader.clone())],
        "only the singleton, once"
    );
    // Its end is reported with the reason once a master is reachable.
    let _ = w.handle(
        Millis(41_000),
        worker::Event::ExecutorChanged { executor: leader.clone(), state: ExecutorState::Killed },
    );
    let reported = w.executors().find(|e| e.id == leader).map(|e| e.state.clone());
    assert_eq!(
        reported,
        Some(ExecutorState::Failed { reason: "stopped: no master heard for 30s".into() })
    );
    assert!(regent_core::launch::is_cut_off("stopped: no master heard for 30s"));
    let web = w.executors().find(|e| e.id.as_str() == "f/web#0#1").map(|e| e.state.clone());
    assert_eq!(web, Some(ExecutorState::Running), "a group without the rule runs on");
}

#[test]
fn a_change_of_leader_while_masters_are_heard_stops_nothing() {
    let mut w = worker_with_a_singleton();
    assert!(run_acked(&mut w, "a", 500, 20_000).is_empty());
    // At 45 s b takes over at epoch 3 and says so: the worker registers
    // with it, and b's answer is word from the new leader, dated at the
    // registration's sending.
    let out = from(
        &mut w,
        Millis(45_000),
        "b",
        Message::MasterChanged {
            epoch: Epoch(3),
            leader: LeaderHint { id: MasterId::new("b"), addr: addr("b"), epoch: Epoch(3) },
            masters: vec![addr("a"), addr("b")],
        },
    );
    assert!(out
        .iter()
        .any(|a| matches!(a, worker::Action::Send { msg: Message::RegisterWorker(_), .. })));
    let registered = Message::Registered {
        epoch: Epoch(3),
        heartbeat_interval: Millis(1_000),
        duplicate: false,
        masters: vec![addr("a"), addr("b")],
    };
    let _ = from(&mut w, Millis(45_400), "b", registered);
    assert!(run(&mut w, 45_500, 74_500).is_empty(), "heard at 45 s: runs on until 75 s");
    // A master that says it does not lead is no word: 75 s still stops it.
    let _ = from(&mut w, Millis(74_600), "b", Message::NotLeader { epoch: Epoch(3), leader: None });
    assert_eq!(run(&mut w, 75_000, 76_000), vec![(75_000, ExecutorId::new("f/leader#0#1"))]);
}

/// Seed 2188 of the singleton soak (docs/simulator.md#singletons): word a
/// leader sends unasked — a `MasterChanged`, a launch, a heartbeat
/// acknowledgement answering nothing — proves nothing about what that
/// leader has heard from the worker (one that declared it DEAD can still
/// reach it one way), so it must not restart the worker's cut-off clock:
/// the leader places the replacement `stop_after` + grace + margin after
/// it last heard from the worker.
#[test]
fn word_the_leader_sent_unasked_does_not_restart_the_cut_off_clock() {
    let mut w = worker_with_a_singleton();
    assert!(run_acked(&mut w, "a", 500, 10_000).is_empty());
    // From 10 s on, the worker's traffic is lost; a's is not.
    for t in [15_000, 25_000, 35_000] {
        let _ = from(&mut w, Millis(t), "a", Message::HeartbeatAck { epoch: Epoch(2) });
        let _ = from(
            &mut w,
            Millis(t),
            "a",
            Message::MasterChanged {
                epoch: Epoch(2),
                leader: LeaderHint { id: MasterId::new("a"), addr: addr("a"), epoch: Epoch(2) },
                masters: vec![addr("a"), addr("b")],
            },
        );
        let _ = from(&mut w, Millis(t), "a", launch("other", "batch", None));
    }
    let killed = run(&mut w, 10_500, 41_000);
    assert_eq!(
        killed.first(),
        Some(&(40_000, ExecutorId::new("f/leader#0#1"))),
        "stopped 30 s after the last heartbeat a heard, whatever a sent since"
    );
}

mod leader {
    //! The leader's side: a singleton's executor lost with a worker
    //! declared DEAD is placed again only once `stop_after`, its kill grace
    //! and the margin for clock rates have passed since the leader last
    //! heard from that worker; other groups are placed again at once.

    use super::common::*;
    use regent_core::api::WaitReason;
    use regent_core::launch::{Disconnect, LaunchSpec};
    use regent_core::master::{self, Master};
    use regent_core::protocol::{ExecutorReport, ExecutorState, Message};
    use regent_core::{Incarnation, Millis};

    const W1: u64 = 101;
    const W2: u64 = 102;

    fn join(m: &mut Master, now: Millis, conn: u64, name: &str) {
        let _ = connect_worker(m, now, conn, name);
        let reg = Message::RegisterWorker(registration(name, conn));
        let _ = deliver_to_master(m, now, conn, reg);
    }

    /// When the slot of a one-slot group, placed on w1 at 0 and running,
    /// is placed again on w2 after w1 falls silent at 0 (w2 heartbeats
    /// every second); `None` if not by 120 s.
    fn replaced_at(disconnect: Option<Disconnect>) -> Option<u64> {
        let mut m = Master::new(master::Config::new("a".into(), addr("a")));
        let _ = elect(&mut m, Millis(0), 1);
        join(&mut m, Millis(0), W1, "w1");
        subscribe(&mut m, 1);
        let launch = LaunchSpec { disconnect, ..Default::default() };
        let spec = group_with("leader", 1, launch);
        let sends =
            deliver_to_master(&mut m, Millis(0), 1, Message::DeclareGroup { request: 1, spec });
        let placed = launches(&sends);
        assert_eq!(placed.len(), 1, "{sends:?}");
        let (conn, id, framework) = placed[0].clone();
        assert_eq!(conn, W1);
        let report = ExecutorReport {
            health: None,
            ran_ms: None,
            resources: Default::default(),
            id,
            framework,
            cores: 1,
            memory_mb: 1,
            state: ExecutorState::Running,
            ports: vec![],
        };
        let msg = Message::ExecutorStatus { incarnation: Incarnation(W1), report };
        let _ = deliver_to_master(&mut m, Millis(0), W1, msg);
        join(&mut m, Millis(0), W2, "w2");
        for t in (500..=120_000).step_by(500) {
            let now = Millis(t);
            let mut sends = Vec::new();
            if t % 1_000 == 0 {
                let hb = Message::WorkerHeartbeat { incarnation: Incarnation(W2) };
                sends.extend(deliver_to_master(&mut m, now, W2, hb));
            }
            let out = m.handle(now, master::Event::Tick);
            sends.extend(m_sends(&out));
            sends.extend(m_sends(&persist_all(&mut m, now, &out)));
            if launches(&sends).iter().any(|(c, ..)| *c == W2) {
                return Some(t);
            }
            if t == 20_000 && disconnect.is_some() {
                // w1 is DEAD; the slot says why it waits: a reason of its
                // own, not a restart backoff.
                let slot = &m.job_statuses(now)[0].groups[0].slots[0];
                let hold = WaitReason::SingletonHold { until_ms: 37_000, in_ms: 17_000 };
                assert_eq!(slot.reasons, vec![hold], "{slot:?}");
                let said = slot.reasons[0].to_string();
                assert!(said.starts_with("a singleton: its last executor may still run"), "{said}");
            }
        }
        None
    }

    #[test]
    fn a_singleton_lost_with_a_dead_worker_waits_stop_after_grace_and_margin() {
        // Without the rule: placed again once w1 is DEAD (a 10 s timeout).
        let plain = replaced_at(None).expect("replaced");
        assert!(plain <= 15_000, "{plain}");
        // With stop_after 30 s: not before 30 + 3 + 3 + 1 = 37 s after the
        // leader last heard from w1 (at 0).
        let single = replaced_at(Some(Disconnect::after_ms(30_000))).expect("replaced");
        assert!((37_000..=39_000).contains(&single), "{single}");
    }

    /// The wait across a failover (docs/machines.md, "The wait across a
    /// failover"): leader `a` places the one slot on w1 at 0, w1 falls
    /// silent then, and `a` crashes at `crash` (ms); `b` takes over from
    /// the store 1 s later, w2 joins `b` at once and heartbeats every
    /// second. When `b` first launches on w2; `None` if not by 150 s.
    fn replaced_after_failover(disconnect: Option<Disconnect>, crash: u64) -> Option<u64> {
        use regent_core::ids::InstanceId;
        use regent_core::protocol::{Role, Subscribe};
        use regent_core::{ConnId, Epoch};
        const WALL: u64 = 1_764_600_000_000;
        let mut store = Store::default();
        let mut a = store.elect("a", Millis(0), Epoch(1), WALL);
        let send = |m: &mut Master, store: &mut Store, now: Millis, conn: u64, msg: Message| {
            let out = m.handle(now, master::Event::Message { conn: ConnId(conn), msg });
            store.settle(m, now, out)
        };
        let _ = connect_worker(&mut a, Millis(0), W1, "w1");
        let _ = send(
            &mut a,
            &mut store,
            Millis(0),
            W1,
            Message::RegisterWorker(registration("w1", W1)),
        );
        let _ = a.handle(Millis(0), master::Event::Connected { conn: ConnId(1) });
        let _ = send(&mut a, &mut store, Millis(0), 1, hello(Role::Subscriber, "x"));
        let sub = Message::Subscribe(Subscribe {
            framework: None,
            name: "app".into(),
            instance: InstanceId(7),
            attempt: 1,
            failover_timeout: Millis(600_000),
            tenant: None,
        });
        let _ = send(&mut a, &mut store, Millis(0), 1, sub);
        let spec = group_with("leader", 1, LaunchSpec { disconnect, ..Default::default() });
        let sends =
            send(&mut a, &mut store, Millis(0), 1, Message::DeclareGroup { request: 1, spec });
        let placed = launches(&sends);
        assert_eq!(placed.len(), 1, "{sends:?}");
        let (conn, id, framework) = placed[0].clone();
        assert_eq!(conn, W1);
        let report = ExecutorReport {
            ran_ms: None,
            resources: Default::default(),
            id,
            framework,
            cores: 1,
            memory_mb: 1,
            state: ExecutorState::Running,
            ports: vec![],
            health: None,
        };
        let msg = Message::ExecutorStatus { incarnation: Incarnation(W1), report };
        let _ = send(&mut a, &mut store, Millis(0), W1, msg);
        // `a` leads on, hearing nothing from w1, until it crashes.
        for t in (500..=crash).step_by(500) {
            let out = a.handle(Millis(t), master::Event::Tick);
            let _ = store.run(&mut a, Millis(t), out);
        }
        drop(a);
        let took_over = crash + 1_000;
        let mut b = store.elect("b", Millis(took_over), Epoch(2), WALL + took_over);
        let _ = connect_worker(&mut b, Millis(took_over), W2, "w2");
        let reg = Message::RegisterWorker(registration("w2", W2));
        let _ = send(&mut b, &mut store, Millis(took_over), W2, reg);
        for t in (took_over + 500..=150_000).step_by(500) {
            let now = Millis(t);
            let mut sends = Vec::new();
            if t % 1_000 == 0 {
                let hb = Message::WorkerHeartbeat { incarnation: Incarnation(W2) };
                sends.extend(send(&mut b, &mut store, now, W2, hb));
            }
            let out = b.handle(now, master::Event::Tick);
            sends.extend(store.settle(&mut b, now, out));
            if launches(&sends).iter().any(|(c, ..)| *c == W2) {
                return Some(t);
            }
        }
        None
    }

    #[test]
    fn a_new_leader_that_never_heard_from_the_worker_waits_from_its_takeover() {
        // The old leader crashes at 5 s, w1 still ALIVE by its count: the
        // new leader (from 6 s) hears nothing of w1's executor and, without
        // the rule, places the slot once its recovery gives up on w1.
        let plain = replaced_after_failover(None, 5_000).expect("replaced");
        assert!(plain <= 25_000, "{plain}");
        // With stop_after 30 s: not before 37 s after the takeover at 6 s.
        let rule = Some(Disconnect::after_ms(30_000));
        let single = replaced_after_failover(rule, 5_000).expect("replaced");
        assert!((43_000..=45_000).contains(&single), "{single}");
        // The old leader declared w1 DEAD (10 s) and crashed during its wait
        // (at 20 s, the wait held in its memory only): again 37 s after the
        // takeover at 21 s.
        let single = replaced_after_failover(rule, 20_000).expect("replaced");
        assert!((58_000..=60_000).contains(&single), "{single}");
    }
}

/// The word a runtime persists for its singleton executors' shims
/// (docs/design.md#issue-45): none from a process that only started (it
/// must not extend the lease a previous process left), then each answer
/// of the followed master dated at its request's sending, never moving
/// back, and nothing from word sent unasked.
#[test]
fn the_last_word_is_an_answer_dated_at_its_request_never_the_start() {
    let mut w = worker("w1", 7, &["a"]);
    let _ = w.handle(Millis(5_000), worker::Event::Start);
    assert_eq!(w.last_word(), None, "a start is no word");
    let _ = w.handle(Millis(5_000), worker::Event::Connected { master: addr("a") });
    let out = w.handle(Millis(6_000), worker::Event::Tick);
    let out = [out, w.handle(Millis(7_000), worker::Event::Tick)].concat();
    let registers = out
        .iter()
        .filter(|a| matches!(a, worker::Action::Send { msg: Message::RegisterWorker(_), .. }))
        .count();
    assert!(registers >= 1, "the worker registers: {out:?}");
    assert_eq!(w.last_word(), None, "asked, not answered");
    let registered = Message::Registered {
        epoch: Epoch(2),
        heartbeat_interval: Millis(1_000),
        duplicate: false,
        masters: vec![addr("a")],
    };
    let _ = from(&mut w, Millis(9_000), "a", registered);
    let word = w.last_word().expect("answered");
    assert!(
        (6_000..=7_000).contains(&word.0),
        "dated at the registration's sending, not at the answer: {word:?}"
    );
    // Unasked word moves nothing.
    let _ = from(
        &mut w,
        Millis(9_500),
        "a",
        launch("lead", "leader", Some(Disconnect::after_ms(3_000))),
    );
    assert_eq!(w.last_word(), Some(word));
    // A heartbeat answered: dated at its sending.
    let mut sent = None;
    for t in (9_500..=12_000).step_by(250) {
        let out = w.handle(Millis(t), worker::Event::Tick);
        if out
            .iter()
            .any(|a| matches!(a, worker::Action::Send { msg: Message::WorkerHeartbeat { .. }, .. }))
        {
            sent = Some(t);
            break;
        }
    }
    let sent = sent.expect("a heartbeat within 2.5 s");
    let _ = from(&mut w, Millis(sent + 400), "a", Message::HeartbeatAck { epoch: Epoch(2) });
    assert_eq!(w.last_word(), Some(Millis(sent)));
}

/// A singleton's launch the worker handles only once its lease lapsed (the
/// order waited while the worker's process was paused, say: the leader
/// heard nothing meanwhile and may have placed the slot again) is not
/// started: it ends as the cut-off stop would have ended it, reported
/// `Failed` with its reason (no retry charged). Found by the simulator
/// (sim seed 1557, docs/design.md#simulator-seeds, `--singletons --api-jobs`):
/// the launch started on resuming and ran beside the slot's new executor
/// until the watch's next tick stopped it. Before the lapse it starts.
#[test]
fn a_singleton_launched_after_its_lease_lapsed_is_not_started() {
    let mut w = worker_with_a_singleton();
    let rule = Some(Disconnect::after_ms(30_000));
    // Heard at 0 (the registration): 29 s on, it starts.
    let out = from(&mut w, Millis(29_000), "a", launch("early", "early", rule));
    assert!(
        out.iter()
            .any(|a| matches!(a, worker::Action::Executor(worker::ExecutorCommand::Start { .. }))),
        "{out:?}"
    );
    // 30 s on, no word since: not started, reported cut off.
    let out = from(&mut w, Millis(30_000), "a", launch("late", "late", rule));
    assert!(
        !out.iter()
            .any(|a| matches!(a, worker::Action::Executor(worker::ExecutorCommand::Start { .. }))),
        "started after its lease lapsed: {out:?}"
    );
    let late = ExecutorId::new("f/late#0#1");
    let reason = "stopped: no master heard for 30s".to_owned();
    let sent = out.iter().any(|a| {
        matches!(a, worker::Action::Send { msg: Message::ExecutorStatus { report, .. }, .. }
            if report.id == late && report.state == ExecutorState::Failed { reason: reason.clone() })
    });
    assert!(sent, "its end is reported: {out:?}");
    let kept = w.executors().find(|e| e.id == late).map(|e| e.state.clone());
    assert_eq!(kept, Some(ExecutorState::Failed { reason }), "kept until acknowledged");
}

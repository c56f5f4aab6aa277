//! Singletons (docs/design.md#issue-45), the worker's side: an executor of
//! a group with `disconnect = { stop_after = "30s" }` is killed by its
//! worker once it has heard from no master for 30 s, never while it hears
//! from one (a change of leader included), and its end is reported with a
//! reason saying so; other executors run on.

mod common;

use common::*;
use regent_core::launch::{Disconnect, LaunchSpec};
use regent_core::protocol::{ExecutorSpec, ExecutorState, LeaderHint, Message};
use regent_core::worker::{self, ExecutorCommand, Worker};
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

fn kills(out: &[worker::Action]) -> Vec<ExecutorId> {
    out.iter()
        .filter_map(|a| match a {
            worker::Action::Executor(ExecutorCommand::Kill { executor }) => Some(executor.clone()),
            _ => None,
        })
        .collect()
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
            kills(&w.handle(Millis(t), worker::Event::Tick)).into_iter().map(move |k| (t, k))
        })
        .collect()
}

#[test]
fn a_singleton_is_killed_once_no_master_was_heard_for_its_stop_after() {
    let mut w = worker_with_a_singleton();
    // Acknowledged heartbeats until 10 s: the master is heard.
    let _ = from(&mut w, Millis(10_000), "a", Message::HeartbeatAck { epoch: Epoch(2) });
    assert!(run(&mut w, 500, 39_500).is_empty(), "heard 10 s ago: runs on until 40 s");
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
    let _ = from(&mut w, Millis(20_000), "a", Message::HeartbeatAck { epoch: Epoch(2) });
    // At 45 s b takes over at epoch 3 and says so: word from the new leader.
    let _ = from(
        &mut w,
        Millis(45_000),
        "b",
        Message::MasterChanged {
            epoch: Epoch(3),
            leader: LeaderHint { id: MasterId::new("b"), addr: addr("b"), epoch: Epoch(3) },
            masters: vec![addr("a"), addr("b")],
        },
    );
    assert!(run(&mut w, 500, 74_500).is_empty(), "heard at 45 s: runs on until 75 s");
    // A master that says it does not lead is no word: 75 s still stops it.
    let _ = from(&mut w, Millis(74_600), "b", Message::NotLeader { epoch: Epoch(3), leader: None });
    assert_eq!(run(&mut w, 75_000, 76_000), vec![(75_000, ExecutorId::new("f/leader#0#1"))]);
}

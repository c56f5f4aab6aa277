//! The worker's side of executors: it obeys only the master it follows at
//! the current epoch, reports every state change, and keeps terminal states
//! until the master acknowledges them, so no exit is lost across a failover.

mod common;

use common::*;
use regent_core::protocol::{ExecutorReport, ExecutorSpec, ExecutorState, LeaderHint, Message};
use regent_core::worker::{self, ExecutorCommand, Worker};
use regent_core::{Epoch, ExecutorId, FrameworkId, MasterId, Millis};

const T: Millis = Millis(0);

fn launch(epoch: u64, id: &str) -> Message {
    Message::LaunchExecutor {
        epoch: Epoch(epoch),
        executor: ExecutorId::new(id),
        framework: FrameworkId::new("f"),
        spec: ExecutorSpec {
            command: vec!["/bin/true".into()],
            env: vec![("A".into(), "1".into())],
            cores: 1,
            memory_mb: 64,
            launch: Default::default(),
        },
        launch: 1,
    }
}

fn registered(epoch: u64, masters: &[&str]) -> Message {
    Message::Registered {
        epoch: Epoch(epoch),
        heartbeat_interval: Millis(1_000),
        duplicate: false,
        masters: masters.iter().map(|m| addr(m)).collect(),
    }
}

/// A worker registered with `a` at epoch 2, also connected to `b`.
fn worker_on_a() -> Worker {
    let mut w = worker("w1", 7, &["a", "b"]);
    let _ = w.handle(T, worker::Event::Start);
    let _ = w.handle(T, worker::Event::Connected { master: addr("a") });
    let _ = w.handle(T, worker::Event::Connected { master: addr("b") });
    let _ = from(&mut w, T, "a", registered(2, &["a", "b"]));
    assert!(w.status().registered);
    w
}

fn starts(out: &[worker::Action]) -> Vec<ExecutorId> {
    out.iter()
        .filter_map(|a| match a {
            worker::Action::Executor(ExecutorCommand::Start { executor, .. }) => {
                Some(executor.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn launches_only_for_the_followed_master_at_the_current_epoch() {
    let mut w = worker_on_a();
    assert!(starts(&from(&mut w, T, "b", launch(2, "x"))).is_empty(), "b is not followed");
    assert!(starts(&from(&mut w, T, "a", launch(1, "y"))).is_empty(), "a lower epoch is fenced");
    let out = from(&mut w, T, "a", launch(2, "e1"));
    match &out[..] {
        [worker::Action::Executor(ExecutorCommand::Start { executor, framework, spec })] => {
            assert_eq!((executor.as_str(), framework.as_str()), ("e1", "f"));
            let expected = ExecutorSpec {
                command: vec!["/bin/true".to_string()],
                env: vec![("A".to_string(), "1".to_string())],
                cores: 1,
                memory_mb: 64,
                launch: Default::default(),
            };
            assert_eq!(spec, &expected, "the spec the master sent, untouched");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        starts(&from(&mut w, T, "a", launch(2, "e1"))).is_empty(),
        "a duplicate launch is ignored"
    );
}

#[test]
fn state_changes_are_reported_and_terminal_ones_kept_until_acknowledged() {
    let mut w = worker_on_a();
    let _ = from(&mut w, T, "a", launch(2, "e1"));
    let id = ExecutorId::new("e1");
    let out = w.handle(
        T,
        worker::Event::ExecutorChanged { executor: id.clone(), state: ExecutorState::Running },
    );
    assert!(
        matches!(only_send_to(&out, "a"), Message::ExecutorStatus { report, .. } if report.state == ExecutorState::Running)
    );
    let out = w.handle(
        T,
        worker::Event::ExecutorChanged {
            executor: id.clone(),
            state: ExecutorState::Exited { code: 0 },
        },
    );
    assert!(
        matches!(only_send_to(&out, "a"), Message::ExecutorStatus { report, .. } if report.state == ExecutorState::Exited { code: 0 })
    );
    // A terminal state is final.
    let out = w.handle(
        T,
        worker::Event::ExecutorChanged { executor: id.clone(), state: ExecutorState::Killed },
    );
    assert!(out.is_empty());
    // Unacknowledged: resent with the next heartbeat, and carried in the
    // full-state report to a new leader.
    let out = w.handle(Millis(1_000), worker::Event::Tick);
    assert!(w_sends(&out)
        .iter()
        .any(|(_, m)| matches!(m, Message::ExecutorStatus { report, .. } if report.id == id)));
    let changed = Message::MasterChanged {
        epoch: Epoch(3),
        leader: LeaderHint { id: MasterId::new("b"), addr: addr("b"), epoch: Epoch(3) },
        masters: vec![],
    };
    let out = from(&mut w, Millis(1_000), "b", changed);
    match only_send_to(&out, "b") {
        Message::RegisterWorker(r) => {
            assert_eq!(r.executors.len(), 1);
            assert_eq!(r.executors[0].state, ExecutorState::Exited { code: 0 });
        }
        other => panic!("unexpected {other:?}"),
    }
    // The new leader acknowledges: forgotten.
    let _ = from(&mut w, Millis(1_000), "b", registered(3, &[]));
    let _ = from(
        &mut w,
        Millis(1_000),
        "b",
        Message::ExecutorStatusAck { epoch: Epoch(3), executor: id },
    );
    assert_eq!(w.executors().count(), 0);
}

#[test]
fn kill_comes_only_from_the_followed_master_and_running_executors_survive_failover() {
    let mut w = worker_on_a();
    let _ = from(&mut w, T, "a", launch(2, "e1"));
    let id = ExecutorId::new("e1");
    let _ = w.handle(
        T,
        worker::Event::ExecutorChanged { executor: id.clone(), state: ExecutorState::Running },
    );
    let kill = |epoch| Message::KillExecutorOnWorker {
        epoch: Epoch(epoch),
        executor: ExecutorId::new("e1"),
    };
    assert!(from(&mut w, T, "b", kill(2)).is_empty());
    // Failover: the worker follows b, nothing is killed, the executor is reported running.
    let _ = w.handle(T, worker::Event::Disconnected { master: addr("a") });
    let changed = Message::MasterChanged {
        epoch: Epoch(3),
        leader: LeaderHint { id: MasterId::new("b"), addr: addr("b"), epoch: Epoch(3) },
        masters: vec![],
    };
    let out = from(&mut w, T, "b", changed);
    assert!(!out
        .iter()
        .any(|a| matches!(a, worker::Action::Executor(ExecutorCommand::Kill { .. }))));
    assert!(
        matches!(only_send_to(&out, "b"), Message::RegisterWorker(r) if r.executors[0].state == ExecutorState::Running)
    );
    // The old leader's late kill is fenced; the new leader's is obeyed.
    assert!(from(&mut w, T, "a", kill(2)).is_empty());
    let _ = from(&mut w, T, "b", registered(3, &[]));
    assert_eq!(
        from(&mut w, T, "b", kill(3)),
        vec![worker::Action::Executor(ExecutorCommand::Kill { executor: id })]
    );
}

#[test]
fn a_drain_stop_comes_only_from_the_followed_master_and_carries_its_grace() {
    let mut w = worker_on_a();
    let _ = from(&mut w, T, "a", launch(2, "e1"));
    let id = ExecutorId::new("e1");
    let _ = w.handle(
        T,
        worker::Event::ExecutorChanged { executor: id.clone(), state: ExecutorState::Running },
    );
    let stop = |executor: &str| Message::StopExecutorOnWorker {
        epoch: Epoch(2),
        executor: ExecutorId::new(executor),
        grace: regent_core::Millis(30_000),
        signal: regent_core::api::StopSignal::Usr1,
    };
    assert!(from(&mut w, T, "b", stop("e1")).is_empty(), "b is not followed");
    assert!(from(&mut w, T, "a", stop("nope")).is_empty(), "no such executor");
    assert_eq!(
        from(&mut w, T, "a", stop("e1")),
        vec![worker::Action::Executor(ExecutorCommand::Stop {
            executor: id,
            grace: regent_core::Millis(30_000),
            signal: regent_core::api::StopSignal::Usr1,
        })]
    );
}

#[test]
fn executors_left_behind_by_a_previous_incarnation_are_reported() {
    let mut w = worker_on_a();
    let report = regent_core::protocol::ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id: ExecutorId::new("old"),
        framework: FrameworkId::new("f"),
        cores: 1,
        memory_mb: 64,
        state: ExecutorState::Killed,
    };
    let out = w.handle(T, worker::Event::LeftBehind(report.clone()));
    assert!(
        matches!(only_send_to(&out, "a"), Message::ExecutorStatus { report: r, .. } if r == report)
    );
}

/// A restarted worker process (worker upgrade, docs/design.md#duplicates-are-harmless) re-adopted an
/// executor: fed right after `Start`, it goes into the first registration
/// as `Running`, a kill from the followed master reaches it, and its end is
/// reported.
#[test]
fn an_adopted_executor_is_registered_running_and_obeys_the_master() {
    let mut w = worker("w1", 8, &["a"]);
    let _ = w.handle(T, worker::Event::Start);
    let adopted = regent_core::protocol::ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id: ExecutorId::new("f/main#0#1.1"),
        framework: FrameworkId::new("f"),
        cores: 1,
        memory_mb: 64,
        state: ExecutorState::Running,
    };
    let out = w.handle(T, worker::Event::LeftBehind(adopted.clone()));
    assert!(w_sends(&out).is_empty(), "not registered yet: it waits for the registration");
    let out = w.handle(T, worker::Event::Connected { master: addr("a") });
    let hello = only_send_to(&out, "a");
    assert!(matches!(hello, Message::Hello(_)), "{hello:?}");
    let reply = Message::HelloReply(regent_core::protocol::HelloReply {
        role: regent_core::protocol::Role::Master,
        master: MasterId::new("a"),
        leading: true,
        epoch: Epoch(2),
        leader: None,
        masters: vec![addr("a")],
    });
    let out = from(&mut w, T, "a", reply);
    match only_send_to(&out, "a") {
        Message::RegisterWorker(reg) => {
            // Re-adopted: it has run 0 ms as far as this process knows.
            let reported = ExecutorReport { ran_ms: Some(0), ..adopted.clone() };
            assert_eq!(reg.executors, vec![reported])
        }
        other => panic!("expected a registration, got {other:?}"),
    }
    let _ = from(&mut w, T, "a", registered(2, &["a"]));
    // The master's slot no longer names it: it says kill.
    let kill = Message::KillExecutorOnWorker { epoch: Epoch(2), executor: adopted.id.clone() };
    let out = from(&mut w, T, "a", kill);
    assert_eq!(
        out,
        vec![worker::Action::Executor(ExecutorCommand::Kill { executor: adopted.id.clone() })]
    );
    let out = w.handle(
        T,
        worker::Event::ExecutorChanged {
            executor: adopted.id.clone(),
            state: ExecutorState::Killed,
        },
    );
    assert!(matches!(
        only_send_to(&out, "a"),
        Message::ExecutorStatus { report, .. } if report.state == ExecutorState::Killed
    ));
}

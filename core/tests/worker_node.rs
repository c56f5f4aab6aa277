//! The worker node: the bookkeeping both runtimes used to keep beside the
//! machine (dials, connections, shutdown), asserted on its outputs.

use regent_core::node::worker::{DialId, DialResult, ExecutorCommand, Input, Note, Output};
use regent_core::node::WorkerNode;
use regent_core::protocol::{ExecutorSpec, ExecutorState, HelloReply, Message, Role};
use regent_core::{worker, WorkerId};
use regent_core::{Addr, ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, MasterId, Millis};

fn node(masters: &[&str]) -> WorkerNode {
    let cfg = worker::Config::new(
        "test",
        WorkerId::new("w1"),
        Incarnation(7),
        masters.iter().map(|m| Addr::new(*m)).collect(),
        4,
        1024,
    );
    WorkerNode::new(cfg)
}

fn dials(out: &[Output]) -> Vec<(DialId, Addr)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Dial { dial, master } => Some((*dial, master.clone())),
            _ => None,
        })
        .collect()
}

fn sends(out: &[Output]) -> Vec<(ConnId, Message)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { conn, msg } => Some((*conn, msg.clone())),
            _ => None,
        })
        .collect()
}

fn leader_reply(epoch: u64) -> Message {
    Message::HelloReply(HelloReply {
        role: Role::Master,
        master: MasterId::new("m1"),
        leading: true,
        epoch: Epoch(epoch),
        leader: None,
        masters: vec![],
    })
}

/// Starts `n`, connects its one master as `conn` and makes it leader-known;
/// returns the outputs of the reply.
fn connected(n: &mut WorkerNode, conn: u64) -> Vec<Output> {
    let out = n.handle(Millis(0), Input::Start);
    let (dial, _) = dials(&out)[0].clone();
    let out = n.handle(
        Millis(1),
        Input::Dialled { dial, result: DialResult::Connected { conn: ConnId(conn), peer: None } },
    );
    assert!(matches!(sends(&out)[0].1, Message::Hello(_)), "Hello first: {out:?}");
    n.handle(Millis(2), Input::Message { conn: ConnId(conn), msg: leader_reply(5) })
}

#[test]
fn a_worker_dials_every_configured_master_and_says_hello_on_the_new_connection() {
    let mut n = node(&["m1:1", "m2:2"]);
    let out = n.handle(Millis(0), Input::Start);
    let d = dials(&out);
    assert_eq!(d.iter().map(|(_, m)| m.as_str()).collect::<Vec<_>>(), ["m1:1", "m2:2"]);
    let out = n.handle(
        Millis(1),
        Input::Dialled {
            dial: d[1].0,
            result: DialResult::Connected { conn: ConnId(9), peer: None },
        },
    );
    let s = sends(&out);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0, ConnId(9));
    assert!(matches!(s[0].1, Message::Hello(_)));
    assert_eq!(n.master_of(ConnId(9)), Some(&Addr::new("m2:2")));
}

#[test]
fn a_superseded_dial_is_closed_when_it_completes() {
    let mut n = node(&["m1:1"]);
    let out = n.handle(Millis(0), Input::Start);
    let (first, _) = dials(&out)[0].clone();
    // The first dial fails; the machine dials again after its backoff.
    let out = n.handle(
        Millis(1),
        Input::Dialled {
            dial: first,
            result: DialResult::Failed { reason: "refused".into(), refused: false },
        },
    );
    assert!(out.iter().any(|o| matches!(o, Output::Note(Note::DialFailed { first: true, .. }))));
    let mut later = Vec::new();
    for t in 2..5_000 {
        later = n.handle(Millis(t), Input::Tick);
        if !dials(&later).is_empty() {
            break;
        }
    }
    let (second, _) = dials(&later)[0].clone();
    assert_ne!(first, second);
    // A stale completion of the first dial (a runtime that raced) is closed
    // and never becomes the master's connection.
    let out = n.handle(
        Millis(5_001),
        Input::Dialled {
            dial: first,
            result: DialResult::Connected { conn: ConnId(1), peer: None },
        },
    );
    assert!(out.iter().any(|o| matches!(o, Output::Close { conn: ConnId(1), .. })), "{out:?}");
    assert_eq!(n.master_of(ConnId(1)), None);
    // The current one is used.
    let out = n.handle(
        Millis(5_002),
        Input::Dialled {
            dial: second,
            result: DialResult::Connected { conn: ConnId(2), peer: None },
        },
    );
    assert_eq!(sends(&out)[0].0, ConnId(2));
}

#[test]
fn repeated_dial_failures_are_news_once_in_a_row() {
    let mut n = node(&["m1:1"]);
    let mut firsts = Vec::new();
    let mut out = n.handle(Millis(0), Input::Start);
    for t in 1..20_000u64 {
        for (dial, _) in dials(&out) {
            let o = n.handle(
                Millis(t),
                Input::Dialled {
                    dial,
                    result: DialResult::Failed { reason: "refused".into(), refused: false },
                },
            );
            for x in &o {
                if let Output::Note(Note::DialFailed { first, .. }) = x {
                    firsts.push(*first);
                }
            }
        }
        out = n.handle(Millis(t), Input::Tick);
    }
    assert!(firsts.len() > 3, "the machine kept dialling: {firsts:?}");
    assert!(firsts[0]);
    assert!(firsts[1..].iter().all(|f| !f), "later failures are routine: {firsts:?}");
}

#[test]
fn frames_of_a_closed_connection_are_ignored_and_its_close_is_reported_once() {
    let mut n = node(&["m1:1"]);
    connected(&mut n, 3);
    let out = n.handle(
        Millis(10),
        Input::Closed {
            conn: ConnId(3),
            how: regent_core::node::Ended::ByPeer,
            reason: "reset".into(),
        },
    );
    assert!(out.iter().any(|o| matches!(o, Output::Note(Note::Disconnected { .. }))));
    // A late frame of the closed connection reaches nothing.
    let out = n.handle(Millis(11), Input::Message { conn: ConnId(3), msg: leader_reply(9) });
    assert!(sends(&out).is_empty(), "{out:?}");
    assert_eq!(n.status().max_epoch, Epoch(5), "the late reply was not believed");
    let out = n.handle(
        Millis(12),
        Input::Closed {
            conn: ConnId(3),
            how: regent_core::node::Ended::ByPeer,
            reason: "again".into(),
        },
    );
    assert!(!out.iter().any(|o| matches!(o, Output::Note(Note::Disconnected { .. }))));
}

#[test]
fn once_stopping_no_executor_starts_and_the_launch_is_reported_killed() {
    let mut n = node(&["m1:1"]);
    let out = connected(&mut n, 4);
    assert!(sends(&out).iter().any(|(_, m)| matches!(m, Message::RegisterWorker(_))));
    let out = n.handle(
        Millis(3),
        Input::Message {
            conn: ConnId(4),
            msg: Message::Registered {
                epoch: Epoch(5),
                heartbeat_interval: Millis(1_000),
                duplicate: false,
                masters: vec![],
            },
        },
    );
    assert!(out.iter().any(|o| matches!(o, Output::Note(Note::Status(s)) if s.registered)));
    let _ = n.handle(Millis(4), Input::Stop);
    let launch = Message::LaunchExecutor {
        epoch: Epoch(5),
        executor: ExecutorId::new("e1"),
        framework: FrameworkId::new("f1"),
        spec: ExecutorSpec {
            command: vec!["true".into()],
            env: vec![],
            cores: 1,
            memory_mb: 1,
            launch: Default::default(),
        },
        launch: 1,
    };
    let out = n.handle(Millis(5), Input::Message { conn: ConnId(4), msg: launch });
    assert!(
        !out.iter().any(|o| matches!(o, Output::Executor(ExecutorCommand::Start { .. }))),
        "{out:?}"
    );
    assert!(out.iter().any(|o| matches!(o, Output::Note(Note::NotStarting { .. }))));
    let reported = sends(&out).into_iter().any(|(_, m)| {
        matches!(m, Message::ExecutorStatus { report, .. }
            if report.id == ExecutorId::new("e1") && report.state == ExecutorState::Killed)
    });
    assert!(reported, "the master hears the executor was killed: {out:?}");
}

/// Seed 002 (docs/design.md#seed-002): a worker with a callback listener says where it is after
/// `Hello`; a master that dials the listener and says `MasterChanged` is a
/// hint: the worker dials the named leader itself (it never knew it), and
/// closes the callback connection.
#[test]
fn a_new_leader_on_the_callback_listener_is_dialled_and_probed() {
    let mut cfg = worker::Config::new(
        "test",
        WorkerId::new("w1"),
        Incarnation(7),
        vec![Addr::new("old:1")],
        4,
        1024,
    );
    cfg.callback = Some(Addr::new("w1.example:7078"));
    let mut n = WorkerNode::new(cfg);
    let out = n.handle(Millis(0), Input::Start);
    let (dial, _) = dials(&out)[0].clone();
    let out = n.handle(
        Millis(1),
        Input::Dialled { dial, result: DialResult::Connected { conn: ConnId(1), peer: None } },
    );
    let s = sends(&out);
    assert!(matches!(s[0].1, Message::Hello(_)));
    assert_eq!(s[1].1, Message::Callback { addr: Addr::new("w1.example:7078") });

    // The old master dies; a new one at an address the worker never knew
    // dials the callback listener.
    let _ = n.handle(
        Millis(2),
        Input::Closed {
            conn: ConnId(1),
            how: regent_core::node::Ended::ByPeer,
            reason: "reset".into(),
        },
    );
    let _ = n.handle(Millis(3), Input::Accepted { conn: ConnId(50) });
    let hello = Message::Hello(regent_core::protocol::Hello {
        version: regent_core::protocol::PROTOCOL_VERSION,
        cluster: "test".into(),
        role: Role::Master,
        node: "m2".into(),
    });
    assert!(n.handle(Millis(3), Input::Message { conn: ConnId(50), msg: hello }).is_empty());
    let leader = regent_core::protocol::LeaderHint {
        id: MasterId::new("m2"),
        addr: Addr::new("new:2"),
        epoch: Epoch(9),
    };
    let changed = Message::MasterChanged { epoch: Epoch(9), leader, masters: vec![] };
    let out = n.handle(Millis(4), Input::Message { conn: ConnId(50), msg: changed });
    assert!(
        out.iter().any(|o| matches!(o, Output::Close { conn: ConnId(50), .. })),
        "the callback connection is closed: {out:?}"
    );
    let d = dials(&out);
    assert_eq!(d.len(), 1, "the new leader is dialled: {out:?}");
    assert_eq!(d[0].1, Addr::new("new:2"));
    // Its proof makes the worker follow it and register there.
    let out = n.handle(
        Millis(5),
        Input::Dialled {
            dial: d[0].0,
            result: DialResult::Connected { conn: ConnId(51), peer: None },
        },
    );
    assert!(matches!(sends(&out)[0].1, Message::Hello(_)));
    let mut reply = leader_reply(9);
    if let Message::HelloReply(r) = &mut reply {
        r.master = MasterId::new("m2");
    }
    let out = n.handle(Millis(6), Input::Message { conn: ConnId(51), msg: reply });
    assert!(
        sends(&out)
            .iter()
            .any(|(c, m)| *c == ConnId(51) && matches!(m, Message::RegisterWorker(_))),
        "registers with the new leader: {out:?}"
    );
}

//! The submit node (`regent_core::node::SubmitNode`): the subscriber machine
//! with dials, connections, timers, progress and what the user is shown,
//! driven by hand with a virtual clock. Assertions are on the exact I/O
//! outputs (dial, send, close, exit); shown lines are checked where they are
//! the point.

use regent_core::ids::InstanceId;
use regent_core::node::submit::{
    Config, DialId, DialResult, Input, Output, Show, SubmitExit, EXIT_ERROR, EXIT_FAILED_OVER,
    EXIT_INTERRUPTED, EXIT_SUCCEEDED,
};
use regent_core::node::SubmitNode;
use regent_core::progress::{SubmitError, SubmitOutcome};
use regent_core::protocol::{
    ExecutorInfo, ExecutorState, GroupSpec, Hello, HelloReply, LeaderHint, Message, Role,
    Subscribe, PROTOCOL_VERSION,
};
use regent_core::subscriber::{self, Action};
use regent_core::{Addr, ConnId, Epoch, ExecutorId, FrameworkId, MasterId, Millis, WorkerId};

const ME: InstanceId = InstanceId(7);
const EPOCH: Epoch = Epoch(5);

fn addr(s: &str) -> Addr {
    Addr::new(s)
}

/// Defaults, except no jitter, so deadlines are exact.
fn node(masters: &[&str]) -> SubmitNode {
    let mut sub =
        subscriber::Config::new("test", "app", ME, masters.iter().map(|m| addr(m)).collect());
    sub.jitter_min_pct = 100;
    SubmitNode::new(Config::new(sub))
}

/// The same, with `--keep`: a done submission leaves its framework to its
/// failover timeout and ends at once.
fn kept_node(masters: &[&str]) -> SubmitNode {
    let mut sub =
        subscriber::Config::new("test", "app", ME, masters.iter().map(|m| addr(m)).collect());
    sub.jitter_min_pct = 100;
    let mut config = Config::new(sub);
    config.keep = true;
    SubmitNode::new(config)
}

fn spec(slots: u32) -> GroupSpec {
    GroupSpec {
        group: "main".into(),
        slots,
        command: vec!["sleep".into(), "1".into()],
        env: vec![],
        cores: 1,
        memory_mb: 64,
        policy: Default::default(),
        launch: Default::default(),
    }
}

/// The I/O outputs only (what is shown and observed, and the connections'
/// timeouts, left out: `the_connection_timeouts_follow_the_subscription`).
fn io(out: &[Output]) -> Vec<Output> {
    out.iter()
        .filter(|o| {
            !matches!(o, Output::Show(_) | Output::Observed(_) | Output::ConnTimeouts { .. })
        })
        .cloned()
        .collect()
}

/// The heartbeat intervals said in `out`.
fn timeouts(out: &[Output]) -> Vec<Millis> {
    out.iter()
        .filter_map(|o| match o {
            Output::ConnTimeouts { heartbeat } => Some(*heartbeat),
            _ => None,
        })
        .collect()
}

/// The connections' timeouts scale with the heartbeat interval the master
/// told in `Subscribed`: the node says it once, when it becomes known, and
/// not again while it stays the same (the pump reads nothing out of the
/// subscriber).
#[test]
fn the_connection_timeouts_follow_the_subscription() {
    let mut n = node(&["m1:1"]);
    assert_eq!(timeouts(&n.handle(Millis(0), Input::Start)), vec![], "not known yet");
    let _ = n.handle(Millis(0), Input::Declare(spec(1)));
    assert_eq!(timeouts(&n.handle(Millis(1), dialled(1, 1))), vec![]);
    assert_eq!(timeouts(&n.handle(Millis(2), msg(1, leading("m1:1", EPOCH)))), vec![]);
    let out = n.handle(Millis(3), msg(1, subscribed("fw-1", EPOCH)));
    assert_eq!(timeouts(&out), vec![Millis(1000)], "{out:?}");
    let out = n.handle(Millis(4), Input::Tick);
    assert_eq!(timeouts(&out), vec![], "said once: {out:?}");
}

/// The plain lines shown.
fn lines(out: &[Output]) -> Vec<String> {
    out.iter()
        .filter_map(|o| match o {
            Output::Show(Show::Line(l)) => Some(l.clone()),
            _ => None,
        })
        .collect()
}

fn dial(n: u64, master: &str) -> Output {
    Output::Dial { dial: DialId(n), master: addr(master), timeout: Millis::from_secs(2) }
}

fn send(conn: u64, msg: Message) -> Output {
    Output::Send { conn: ConnId(conn), msg }
}

fn hello() -> Message {
    Message::Hello(Hello {
        version: PROTOCOL_VERSION,
        cluster: "test".into(),
        role: Role::Subscriber,
        node: "app".into(),
    })
}

fn subscribe(framework: Option<&str>, attempt: u64) -> Message {
    Message::Subscribe(Subscribe {
        framework: framework.map(FrameworkId::new),
        name: "app".into(),
        instance: ME,
        attempt,
        failover_timeout: Millis::from_secs(60),
        tenant: None,
    })
}

fn leading(master: &str, epoch: Epoch) -> Message {
    Message::HelloReply(HelloReply {
        role: Role::Master,
        master: MasterId::new(master),
        leading: true,
        epoch,
        leader: Some(LeaderHint { id: MasterId::new(master), addr: addr(master), epoch }),
        masters: vec![],
    })
}

fn subscribed(framework: &str, epoch: Epoch) -> Message {
    Message::Subscribed {
        epoch,
        framework: FrameworkId::new(framework),
        heartbeat_interval: Millis(1000),
        executors: vec![],
    }
}

fn update(slot: u32, state: ExecutorState) -> Message {
    Message::ExecutorUpdate {
        epoch: EPOCH,
        info: ExecutorInfo {
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            id: ExecutorId::new(format!("fw-1/main#{slot}#1")),
            group: "main".into(),
            slot,
            worker: Some(WorkerId::new("w1")),
            state,
        },
    }
}

fn msg(conn: u64, msg: Message) -> Input {
    Input::Message { conn: ConnId(conn), msg }
}

fn closed(conn: u64, reason: &str) -> Input {
    Input::Closed {
        conn: ConnId(conn),
        how: regent_core::node::Ended::ByPeer,
        reason: reason.into(),
    }
}

fn dialled(n: u64, conn: u64) -> Input {
    Input::Dialled {
        dial: DialId(n),
        result: DialResult::Connected { conn: ConnId(conn), peer: None },
    }
}

/// Starts `n` on `master` (the first configured) and subscribes it as
/// framework `fw-1` on connection 1, the group `main` of `slots` slots
/// declared and accepted. Returns the time reached.
fn subscribe_on(n: &mut SubmitNode, master: &str, slots: u32) -> Millis {
    assert_eq!(io(&n.handle(Millis(0), Input::Start)), vec![dial(1, master)]);
    let out = n.handle(Millis(0), Input::Declare(spec(slots)));
    assert_eq!(io(&out), vec![]);
    assert!(lines(&out)[0].starts_with(&format!("submitting {slots} x")), "{out:?}");
    assert_eq!(
        io(&n.handle(Millis(1), dialled(1, 1))),
        vec![send(1, hello()), send(1, subscribe(None, 1))]
    );
    assert_eq!(io(&n.handle(Millis(2), msg(1, leading(master, EPOCH)))), vec![]);
    let out = n.handle(Millis(3), msg(1, subscribed("fw-1", EPOCH)));
    let sent = io(&out);
    let [Output::Send { conn: ConnId(1), msg: Message::DeclareGroup { request, spec: s } }] =
        sent.as_slice()
    else {
        panic!("expected the declaration, got {out:?}")
    };
    assert_eq!(*s, spec(slots));
    assert_eq!(lines(&out), vec!["framework fw-1".to_string(), format!("subscribed to {master}")]);
    let out =
        n.handle(Millis(4), msg(1, Message::RequestAccepted { epoch: EPOCH, request: *request }));
    assert_eq!(io(&out), vec![]);
    assert_eq!(lines(&out), vec![format!("group main accepted ({slots} slots)")]);
    Millis(4)
}

fn exit_of(out: &[Output]) -> Option<SubmitExit> {
    out.iter().find_map(|o| match o {
        Output::Exit(e) => Some(e.clone()),
        _ => None,
    })
}

#[test]
fn a_kept_submission_ends_with_exit_0_when_every_slot_is_done() {
    let mut n = kept_node(&["m1:1"]);
    subscribe_on(&mut n, "m1:1", 2);
    for slot in 0..2 {
        let out = n.handle(Millis(10), msg(1, update(slot, ExecutorState::Running)));
        assert_eq!(io(&out), vec![]);
        assert_eq!(lines(&out), vec![format!("fw-1/main#{slot}#1 slot {slot} on w1: RUNNING")]);
    }
    // The same state again is not shown again.
    let out = n.handle(Millis(11), msg(1, update(0, ExecutorState::Running)));
    assert_eq!(lines(&out), Vec::<String>::new());
    let out = n.handle(Millis(20), msg(1, update(0, ExecutorState::Exited { code: 0 })));
    assert_eq!(io(&out), vec![]);
    assert_eq!(n.ending(), None);

    // The last slot done: the connection is closed, the outcome shown...
    let out = n.handle(Millis(30), msg(1, update(1, ExecutorState::Exited { code: 0 })));
    assert_eq!(
        io(&out),
        vec![Output::Close { conn: ConnId(1), reason: "the submission is over".into() }]
    );
    assert_eq!(
        lines(&out),
        vec![
            "fw-1/main#1#1 slot 1 on w1: EXITED 0".to_string(),
            "done: all 2 executors of framework fw-1 exited 0; the framework is kept (--keep) \
             until its failover timeout (60s)"
                .into()
        ]
    );
    assert_eq!(n.ending().map(|e| e.code), Some(EXIT_SUCCEEDED));
    // ...frames still in flight on it are ignored...
    assert_eq!(n.handle(Millis(31), msg(1, update(1, ExecutorState::Running))), vec![]);
    // ...and once it has ended, the node exits 0.
    let out = n.handle(Millis(32), closed(1, "closed"));
    assert_eq!(
        out,
        vec![Output::Exit(SubmitExit {
            outcome: Ok(SubmitOutcome::Succeeded),
            code: EXIT_SUCCEEDED,
            message: None
        })]
    );
    assert!(n.is_exited());
    assert_eq!(n.poll_timeout(), None);
    assert_eq!(n.handle(Millis(40), Input::Tick), vec![]);
}

#[test]
fn a_connection_that_never_ends_delays_the_exit_by_the_linger_time_only() {
    let mut n = kept_node(&["m1:1"]);
    subscribe_on(&mut n, "m1:1", 1);
    let out = n.handle(Millis(30), msg(1, update(0, ExecutorState::Exited { code: 0 })));
    assert_eq!(exit_of(&out), None);
    assert_eq!(n.poll_timeout(), Some(Millis(1030)));
    assert_eq!(n.handle(Millis(500), Input::Tick), vec![]);
    let out = n.handle(Millis(1030), Input::Tick);
    assert_eq!(exit_of(&out).map(|e| e.code), Some(EXIT_SUCCEEDED));
}

#[test]
fn a_failover_to_another_master_resubscribes_with_the_same_framework_id() {
    let mut n = kept_node(&["m1:1", "m2:1"]);
    subscribe_on(&mut n, "m1:1", 1);
    let out = n.handle(Millis(10), msg(1, update(0, ExecutorState::Running)));
    assert_eq!(io(&out), vec![]);

    // The first master goes away: the subscription is lost, shown with the
    // runtime's reason, and retried after the backoff.
    let out = n.handle(Millis(100), closed(1, "connection reset"));
    assert_eq!(io(&out), vec![]);
    assert_eq!(
        lines(&out),
        vec![
            "disconnected: subscription with m1:1 lost: m1:1: connection closed (connection reset)"
                .to_string()
        ]
    );
    assert!(out.iter().any(|o| matches!(o, Output::Observed(Action::Disconnected { .. }))));
    let retry = n.poll_timeout().expect("a retry is scheduled");
    assert_eq!(n.subscriber().deadline(subscriber::Timer::Retry), Some(retry));
    // Its connection's late events are not fed to the subscriber.
    assert_eq!(io(&n.handle(Millis(101), closed(1, "closed"))), vec![]);

    // It first tries the master it was subscribed with, which refuses...
    assert_eq!(io(&n.handle(retry, Input::Tick)), vec![dial(2, "m1:1")]);
    let out = n.handle(
        retry,
        Input::Dialled {
            dial: DialId(2),
            result: DialResult::Failed { reason: "connection refused".into(), refused: false },
        },
    );
    assert_eq!(io(&out), vec![dial(3, "m2:1")]);
    assert_eq!(lines(&out), vec!["cannot reach master m1:1: connection refused".to_string()]);

    // ...then the second, which answers Hello as the leader at a higher
    // epoch: the SUBSCRIBE carries the framework id the first one assigned.
    assert_eq!(
        io(&n.handle(retry + Millis(1), dialled(3, 2))),
        vec![send(2, hello()), send(2, subscribe(Some("fw-1"), 2))]
    );
    let later = Epoch(EPOCH.0 + 1);
    assert_eq!(io(&n.handle(retry + Millis(2), msg(2, leading("m2:1", later)))), vec![]);
    let out = n.handle(retry + Millis(3), msg(2, subscribed("fw-1", later)));
    let sent = io(&out);
    let [Output::Send { conn: ConnId(2), msg: Message::DeclareGroup { spec: s, .. } }] =
        sent.as_slice()
    else {
        panic!("expected the declaration re-sent to m2, got {out:?}")
    };
    assert_eq!(*s, spec(1));
    // The framework id is not shown again; the new master is.
    assert_eq!(lines(&out), vec!["subscribed to m2:1".to_string()]);
    let status = n.status();
    assert!(status.subscribed);
    assert_eq!(status.master, Some(addr("m2:1")));
    assert_eq!(status.framework, Some(FrameworkId::new("fw-1")));

    // The submission goes on with the new master.
    // (At the new leader's epoch: an update at the old one is fenced.)
    let stale = n.handle(retry + Millis(9), msg(2, update(0, ExecutorState::Exited { code: 0 })));
    assert_eq!(io(&stale), vec![]);
    assert_eq!(n.ending(), None);
    let mut done = update(0, ExecutorState::Exited { code: 0 });
    if let Message::ExecutorUpdate { epoch, .. } = &mut done {
        *epoch = later;
    }
    let out = n.handle(retry + Millis(10), msg(2, done));
    assert_eq!(
        io(&out),
        vec![Output::Close { conn: ConnId(2), reason: "the submission is over".into() }]
    );
    let out = n.handle(retry + Millis(11), closed(2, "closed"));
    assert_eq!(exit_of(&out).map(|e| e.outcome), Some(Ok(SubmitOutcome::Succeeded)));
}

#[test]
fn a_framework_taken_over_by_another_instance_exits_3_naming_it() {
    let mut n = node(&["m1:1"]);
    subscribe_on(&mut n, "m1:1", 1);
    let other = InstanceId(0xfeed);
    let out = n.handle(
        Millis(10),
        msg(
            1,
            Message::FrameworkError {
                epoch: EPOCH,
                message: "framework fw-1 failed over".into(),
                failed_over_to: Some(other),
            },
        ),
    );
    // The subscriber closes its connection and stops; nothing else is sent.
    let [Output::Close { conn: ConnId(1), .. }] = io(&out).as_slice() else {
        panic!("expected the connection closed, got {out:?}")
    };
    let shown = lines(&out);
    assert!(shown[0].contains(&format!("failed over to instance {other}")), "{shown:?}");
    assert_eq!(shown[1], format!("stopped: the framework now belongs to instance {other}"));
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Observed(Action::Exit { failed_over_to: Some(i), .. }) if *i == other
    )));
    assert_eq!(exit_of(&out), None, "the exit waits for the connection to end");

    let out = n.handle(Millis(11), closed(1, "closed"));
    assert_eq!(
        out,
        vec![Output::Exit(SubmitExit {
            outcome: Ok(SubmitOutcome::FailedOver { to: other.to_string() }),
            code: EXIT_FAILED_OVER,
            message: Some(format!(
                "the framework failed over to another instance ({other}); this submit stops"
            )),
        })]
    );
    assert_eq!(EXIT_FAILED_OVER, 3);
}

#[test]
fn a_dial_result_of_a_superseded_dial_is_closed_and_ignored() {
    let mut n = node(&["m1:1", "m2:1"]);
    assert_eq!(io(&n.handle(Millis(0), Input::Start)), vec![dial(1, "m1:1")]);
    let _ = n.handle(Millis(0), Input::Declare(spec(1)));
    // The dial hangs past the attempt timeout: the subscriber abandons it
    // and tries the next master.
    let timeout = n.poll_timeout().unwrap();
    assert_eq!(timeout, Millis::from_secs(5));
    assert_eq!(io(&n.handle(timeout, Input::Tick)), vec![dial(2, "m2:1")]);

    // The abandoned dial completes after all: its connection is closed at
    // once, and nothing is sent on it.
    let out = n.handle(timeout + Millis(1), dialled(1, 7));
    assert_eq!(out, vec![Output::Close { conn: ConnId(7), reason: "dial-1 was abandoned".into() }]);
    // Whatever still arrives on it is ignored.
    assert_eq!(n.handle(timeout + Millis(2), msg(7, leading("m1:1", EPOCH))), vec![]);
    assert_eq!(n.handle(timeout + Millis(3), msg(7, subscribed("fw-1", EPOCH))), vec![]);
    assert_eq!(n.handle(timeout + Millis(4), closed(7, "closed")), vec![]);
    assert!(!n.status().subscribed);

    // The current dial goes on as usual.
    assert_eq!(
        io(&n.handle(timeout + Millis(5), dialled(2, 8))),
        vec![send(8, hello()), send(8, subscribe(None, 1))]
    );
}

#[test]
fn an_older_dial_of_the_same_master_is_superseded_by_the_newer_one() {
    let mut n = node(&["m1:1"]);
    assert_eq!(io(&n.handle(Millis(0), Input::Start)), vec![dial(1, "m1:1")]);
    // Attempt timeout, no other master: back off, then dial m1 again.
    let out = n.handle(Millis::from_secs(5), Input::Tick);
    assert_eq!(io(&out), vec![]);
    let retry = n.poll_timeout().unwrap();
    assert_eq!(io(&n.handle(retry, Input::Tick)), vec![dial(2, "m1:1")]);
    // The first dial's connection arrives late: closed, not used.
    let out = n.handle(retry + Millis(1), dialled(1, 1));
    assert_eq!(
        io(&out),
        vec![Output::Close { conn: ConnId(1), reason: "dial-1 was abandoned".into() }]
    );
    // A failed superseded dial is simply ignored.
    assert_eq!(
        n.handle(
            retry + Millis(1),
            Input::Dialled {
                dial: DialId(1),
                result: DialResult::Failed { reason: "x".into(), refused: false }
            }
        ),
        vec![]
    );
    assert_eq!(
        io(&n.handle(retry + Millis(2), dialled(2, 2))),
        vec![send(2, hello()), send(2, subscribe(None, 1))]
    );
}

#[test]
fn an_interrupt_leaves_the_framework_and_exits_130() {
    let mut n = node(&["m1:1"]);
    subscribe_on(&mut n, "m1:1", 1);
    let _ = n.handle(Millis(10), msg(1, update(0, ExecutorState::Running)));
    let out = n.handle(Millis(20), Input::Interrupt);
    // No teardown: the connection is only closed.
    assert_eq!(
        io(&out),
        vec![Output::Close { conn: ConnId(1), reason: "the submission is over".into() }]
    );
    let shown = lines(&out);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].starts_with("interrupted: framework fw-1 is left running"), "{shown:?}");
    assert!(shown[0].contains("kept for 60s"), "{shown:?}");
    assert!(shown[0].contains("--framework-id fw-1"), "{shown:?}");
    // A second interrupt changes nothing.
    assert_eq!(n.handle(Millis(21), Input::Interrupt), vec![]);
    let exit = exit_of(&n.handle(Millis(22), closed(1, "closed"))).unwrap();
    assert_eq!(exit.outcome, Ok(SubmitOutcome::Interrupted));
    assert_eq!(exit.code, EXIT_INTERRUPTED);
}

#[test]
fn an_interrupt_before_any_connection_exits_at_once() {
    let mut n = node(&["m1:1"]);
    let _ = n.handle(Millis(0), Input::Start);
    let _ = n.handle(Millis(0), Input::Declare(spec(1)));
    let out = n.handle(Millis(5), Input::Interrupt);
    assert_eq!(lines(&out), vec!["interrupted before subscribing".to_string()]);
    assert_eq!(exit_of(&out).map(|e| e.code), Some(EXIT_INTERRUPTED));
    // The node has exited: a dial finishing now is the runtime's to drop.
    assert_eq!(n.handle(Millis(6), dialled(1, 1)), vec![]);
}

#[test]
fn a_refused_declaration_ends_with_an_error() {
    let mut n = node(&["m1:1"]);
    assert_eq!(io(&n.handle(Millis(0), Input::Start)), vec![dial(1, "m1:1")]);
    let _ = n.handle(Millis(0), Input::Declare(spec(1)));
    let _ = n.handle(Millis(1), dialled(1, 1));
    let _ = n.handle(Millis(2), msg(1, leading("m1:1", EPOCH)));
    let out = n.handle(Millis(3), msg(1, subscribed("fw-1", EPOCH)));
    let sent = io(&out);
    let [Output::Send { msg: Message::DeclareGroup { request, .. }, .. }] = sent.as_slice() else {
        panic!("{out:?}")
    };
    let refused = Message::RequestRefused {
        epoch: EPOCH,
        request: *request,
        reason: "a different spec".into(),
    };
    let out = n.handle(Millis(4), msg(1, refused));
    assert_eq!(
        io(&out),
        vec![Output::Close { conn: ConnId(1), reason: "the submission is over".into() }]
    );
    let exit = exit_of(&n.handle(Millis(5), closed(1, "closed"))).unwrap();
    assert_eq!(exit.code, EXIT_ERROR);
    assert_eq!(
        exit.outcome.map_err(|e| e.to_string()),
        Err("the master refused group main: a different spec".into())
    );
    assert_eq!(exit.message, Some("error: the master refused group main: a different spec".into()));
}

#[test]
fn a_subscription_refused_by_a_limit_ends_with_an_error_instead_of_retrying() {
    let mut n = node(&["m1:1", "m2:1"]);
    assert_eq!(io(&n.handle(Millis(0), Input::Start)), vec![dial(1, "m1:1")]);
    let _ = n.handle(Millis(0), Input::Declare(spec(1)));
    let _ = n.handle(Millis(1), dialled(1, 1));
    let _ = n.handle(Millis(2), msg(1, leading("m1:1", EPOCH)));
    let reason = "failover timeout of 18446744073709551615 ms; the limit is 604800000 ms";
    let refused = Message::SubscribeRefused { epoch: EPOCH, reason: reason.into() };
    let out = n.handle(Millis(3), msg(1, refused));
    // The connection is closed and nothing is dialled: no retry.
    assert!(
        matches!(io(&out).as_slice(), [Output::Close { conn: ConnId(1), .. }]),
        "expected only the close, got {out:?}"
    );
    let exit = exit_of(&n.handle(Millis(4), closed(1, "closed"))).expect("exits");
    assert_eq!(exit.code, EXIT_ERROR);
    let expected = format!("the leader refused the subscription: {reason}");
    assert_eq!(exit.outcome.map_err(|e| e.to_string()), Err(expected.clone()));
    assert_eq!(exit.message, Some(format!("error: {expected}")));
    // Nothing is left to do: no timer asks to be woken up for a retry.
    assert!(n.is_exited());
    assert_eq!(io(&n.handle(Millis(60_000), Input::Tick)), vec![]);
}

#[test]
fn the_progress_summary_follows_lines_and_changes_only() {
    let mut n = node(&["m1:1"]);
    let progress = |out: &[Output]| -> Vec<String> {
        out.iter()
            .filter_map(|o| match o {
                Output::Show(Show::Progress(p)) => Some(p.clone()),
                _ => None,
            })
            .collect()
    };
    // Nothing to summarise before a group is declared.
    assert_eq!(progress(&n.handle(Millis(0), Input::Start)), Vec::<String>::new());
    let out = n.handle(Millis(0), Input::Declare(spec(2)));
    assert_eq!(progress(&out), vec!["[0/2 running, 0 done, 0 failed]".to_string()]);
    // A dial shows nothing and changes nothing.
    assert_eq!(progress(&n.handle(Millis(1), dialled(1, 1))), Vec::<String>::new());
    let _ = n.handle(Millis(2), msg(1, leading("m1:1", EPOCH)));
    let _ = n.handle(Millis(3), msg(1, subscribed("fw-1", EPOCH)));
    let out = n.handle(Millis(4), msg(1, update(0, ExecutorState::Running)));
    assert_eq!(progress(&out), vec!["[1/2 running, 0 done, 0 failed]".to_string()]);
    // The summary comes after the lines of the same input.
    assert!(matches!(out.last(), Some(Output::Show(Show::Progress(_)))), "{out:?}");
    // A heartbeat shows nothing.
    let out = n.handle(Millis(5), msg(1, Message::FrameworkHeartbeat { epoch: EPOCH }));
    assert_eq!(progress(&out), Vec::<String>::new());
    assert_eq!(io(&out), vec![send(1, Message::FrameworkHeartbeatAck { epoch: EPOCH })]);
}

#[test]
fn exit_codes_and_messages_follow_the_documented_table() {
    let e = SubmitExit::new(Ok::<_, SubmitError>(SubmitOutcome::SlotsFailed(vec![
        "slot 1: boom".into()
    ])));
    assert_eq!((e.code, e.message.as_deref()), (2, Some("application failed: slot 1: boom")));
    let e = SubmitExit::new(Ok::<_, SubmitError>(SubmitOutcome::Interrupted));
    assert_eq!(e.code, 130);
    let e = SubmitExit::new(Err("bad"));
    assert_eq!((e.code, e.message.as_deref()), (1, Some("error: bad")));
    assert_eq!(SubmitExit::new(Ok::<_, SubmitError>(SubmitOutcome::Succeeded)).message, None);
}

/// Fails every dial at once and follows the node's deadlines until it exits
/// (or `limit` passes). Returns the lines shown and the exit.
fn fail_every_dial(n: &mut SubmitNode, limit: Millis) -> (Vec<String>, Option<SubmitExit>) {
    let mut shown = Vec::new();
    let mut now = Millis(0);
    let mut pending: Vec<DialId> = Vec::new();
    let mut out = n.handle(now, Input::Start);
    loop {
        shown.extend(lines(&out));
        if let Some(e) = exit_of(&out) {
            return (shown, Some(e));
        }
        for o in &out {
            if let Output::Dial { dial, .. } = o {
                pending.push(*dial);
            }
        }
        if let Some(d) = pending.pop() {
            out = n.handle(
                now,
                Input::Dialled {
                    dial: d,
                    result: DialResult::Failed {
                        reason: "connection refused".into(),
                        refused: false,
                    },
                },
            );
            continue;
        }
        match n.poll_timeout() {
            Some(at) if at <= limit => {
                now = at.max(now);
                out = n.handle(now, Input::Tick);
            }
            _ => return (shown, None),
        }
    }
}

#[test]
fn without_a_first_master_within_the_connect_timeout_the_submission_ends_naming_every_master() {
    let mut sub = subscriber::Config::new("test", "app", ME, vec![addr("m1:1"), addr("m2:2")]);
    sub.jitter_min_pct = 100;
    let mut config = Config::new(sub);
    config.connect_timeout = Some(Millis::from_secs(30));
    let mut n = SubmitNode::new(config);
    let (shown, exit) = fail_every_dial(&mut n, Millis::from_secs(120));
    let exit = exit.expect("the node gives up");
    assert_eq!(exit.code, EXIT_ERROR);
    let message = exit.message.expect("a message");
    assert!(message.contains("within 30 s"), "{message}");
    assert!(message.contains("m1:1: connection refused"), "{message}");
    assert!(message.contains("m2:2: connection refused"), "{message}");
    // One line per 5 s at most while trying, plus the closing summary.
    let unreachable = shown.iter().filter(|l| l.starts_with("cannot reach master")).count();
    assert!((1..=7).contains(&unreachable), "{shown:?}");
    assert!(shown[0].contains("retrying m1:1, m2:2"), "{shown:?}");
}

#[test]
fn without_a_connect_timeout_the_node_keeps_trying() {
    let mut n = node(&["m1:1"]);
    let (_, exit) = fail_every_dial(&mut n, Millis::from_secs(300));
    assert_eq!(exit, None);
}

/// Seed 002 (docs/design.md#seed-002): with a callback listener the subscriber says where it is
/// after `Hello`; a new leader dialling it with `MasterChanged` at a higher
/// epoch moves the subscription there (the callback connection closed).
#[test]
fn a_new_leader_on_the_callback_listener_takes_the_subscription() {
    let mut sub = subscriber::Config::new("test", "app", ME, vec![addr("old:1")]);
    sub.jitter_min_pct = 100;
    sub.callback = Some(addr("10.0.0.9:7079"));
    let mut n = SubmitNode::new(Config::new(sub));
    assert_eq!(io(&n.handle(Millis(0), Input::Start)), vec![dial(1, "old:1")]);
    let _ = n.handle(Millis(0), Input::Declare(spec(1)));
    assert_eq!(
        io(&n.handle(Millis(1), dialled(1, 1))),
        vec![
            send(1, hello()),
            send(1, Message::Callback { addr: addr("10.0.0.9:7079") }),
            send(1, subscribe(None, 1))
        ]
    );
    let _ = n.handle(Millis(2), msg(1, leading("old:1", EPOCH)));
    let _ = n.handle(Millis(3), msg(1, subscribed("fw-1", EPOCH)));
    let _ = n.handle(Millis(4), closed(1, "reset"));

    let _ = n.handle(Millis(5), Input::Accepted { conn: ConnId(40) });
    let newer = Epoch(EPOCH.0 + 1);
    let changed = Message::MasterChanged {
        epoch: newer,
        leader: LeaderHint { id: MasterId::new("m2"), addr: addr("new:2"), epoch: newer },
        masters: vec![addr("new:2")],
    };
    let out = io(&n.handle(Millis(6), msg(40, changed)));
    assert!(
        out.contains(&Output::Close {
            conn: ConnId(40),
            reason: "the leader's news is taken".into()
        }),
        "{out:?}"
    );
    assert!(
        out.iter().any(|o| matches!(o, Output::Dial { master, .. } if *master == addr("new:2"))),
        "the new leader is dialled: {out:?}"
    );
}

/// Issue 20 (docs/design.md#issue-20), scenario 8: a leader that answers `Hello` as the leader but
/// whose store has not made the SUBSCRIBE durable within the connect
/// timeout is slow, not unreachable: the node says so and keeps trying
/// (on main it ended the submission "no master subscribed the framework
/// within 30 s" while the write was about to land).
#[test]
fn issue_20_a_leader_that_answers_keeps_the_connect_timeout_from_ending_the_submission() {
    let mut sub = subscriber::Config::new("test", "app", ME, vec![addr("m1:1")]);
    sub.jitter_min_pct = 100;
    let mut config = Config::new(sub);
    config.connect_timeout = Some(Millis::from_secs(30));
    let mut n = SubmitNode::new(config);
    let _ = n.handle(Millis(0), Input::Start);
    let _ = n.handle(Millis(0), Input::Declare(spec(1)));
    let _ = n.handle(Millis(1), dialled(1, 1));
    let _ = n.handle(Millis(2), msg(1, leading("m1:1", EPOCH)));
    // No answer to the SUBSCRIBE: every attempt times out, each one later.
    let mut shown = Vec::new();
    let mut next_dial = 2;
    while let Some(at) = n.poll_timeout().filter(|at| *at <= Millis::from_secs(40)) {
        let out = n.handle(at, Input::Tick);
        shown.extend(lines(&out));
        assert_eq!(exit_of(&out), None, "{shown:?}");
        if out.iter().any(|o| matches!(o, Output::Dial { .. })) {
            let _ = n.handle(at, dialled(next_dial, next_dial));
            let _ = n.handle(at, msg(next_dial, leading("m1:1", EPOCH)));
            next_dial += 1;
        }
    }
    let slow = shown.iter().filter(|l| l.contains("answers but has not subscribed")).count();
    assert_eq!(slow, 1, "{shown:?}");
    // It subscribes at last.
    let out = n.handle(Millis::from_secs(41), msg(next_dial - 1, subscribed("fw-1", EPOCH)));
    assert!(lines(&out).contains(&"subscribed to m1:1".to_string()), "{out:?}");
}

/// An update of slot `slot` of group `group`.
fn group_update(group: &str, slot: u32, state: ExecutorState) -> Message {
    Message::ExecutorUpdate {
        epoch: EPOCH,
        info: ExecutorInfo {
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            id: ExecutorId::new(format!("fw-1/{group}#{slot}#1")),
            group: group.into(),
            slot,
            worker: Some(WorkerId::new("w1")),
            state,
        },
    }
}

#[test]
fn a_job_of_several_groups_shows_progress_and_each_groups_end_group_by_group() {
    let mut n = node(&["m1:1"]);
    let progress = |out: &[Output]| -> Vec<String> {
        out.iter()
            .filter_map(|o| match o {
                Output::Show(Show::Progress(p)) => Some(p.clone()),
                _ => None,
            })
            .collect()
    };
    let _ = n.handle(Millis(0), Input::Start);
    let mut driver = spec(1);
    driver.group = "driver".into();
    let mut mappers = spec(2);
    mappers.group = "mappers".into();
    let _ = n.handle(Millis(0), Input::Declare(driver));
    let out = n.handle(Millis(0), Input::Declare(mappers));
    assert_eq!(
        progress(&out),
        vec!["[driver 0/1 running, 0 done, 0 failed | mappers 0/2 running, 0 done, 0 failed]"]
    );
    let _ = n.handle(Millis(1), dialled(1, 1));
    let _ = n.handle(Millis(2), msg(1, leading("m1:1", EPOCH)));
    let _ = n.handle(Millis(3), msg(1, subscribed("fw-1", EPOCH)));
    let _ = n.handle(Millis(4), msg(1, group_update("mappers", 0, ExecutorState::Running)));
    let out =
        n.handle(Millis(5), msg(1, group_update("mappers", 0, ExecutorState::Exited { code: 0 })));
    assert!(!lines(&out).iter().any(|l| l.starts_with("group mappers:")), "one slot of two");
    let out =
        n.handle(Millis(6), msg(1, group_update("mappers", 1, ExecutorState::Exited { code: 0 })));
    assert!(lines(&out).contains(&"group mappers: all 2 slots done".to_string()), "{out:?}");
    assert_eq!(
        progress(&out),
        vec!["[driver 0/1 running, 0 done, 0 failed | mappers 0/2 running, 2 done, 0 failed]"]
    );
    assert!(exit_of(&out).is_none(), "the driver still runs");
    let out =
        n.handle(Millis(7), msg(1, group_update("driver", 0, ExecutorState::Exited { code: 0 })));
    let shown = lines(&out);
    assert!(shown.contains(&"group driver: its slot is done".to_string()), "{shown:?}");
    assert!(!shown.iter().any(|l| l.starts_with("group mappers:")), "shown once: {shown:?}");
}

/// A driver learns where its executors listen from the line a running
/// executor prints: every named port at its worker's host.
#[test]
fn a_running_executor_line_names_where_its_ports_are_reached() {
    let mut info = ExecutorInfo {
        resources: Default::default(),
        host: Some("10.0.0.7".into()),
        ports: vec![("http".into(), 20000), ("admin".into(), 20001)],
        id: ExecutorId::new("fw-1/server#0#1"),
        group: "server".into(),
        slot: 0,
        worker: Some(WorkerId::new("w1")),
        state: ExecutorState::Running,
    };
    assert_eq!(
        regent_core::node::submit::executor_line(&info),
        "fw-1/server#0#1 slot 0 on w1: RUNNING http=10.0.0.7:20000 admin=10.0.0.7:20001"
    );
    info.host = Some("::1".into());
    assert_eq!(
        regent_core::node::submit::listening(&info).as_deref(),
        Some("http=[::1]:20000 admin=[::1]:20001")
    );
    // An ended executor listens nowhere.
    info.state = ExecutorState::Exited { code: 0 };
    assert_eq!(
        regent_core::node::submit::executor_line(&info),
        "fw-1/server#0#1 slot 0 on w1: EXITED 0"
    );
}

/// The teardown request a done submission sends on `conn`, and its id.
fn teardown_sent(out: &[Output], conn: u64) -> u64 {
    let sent = io(out);
    match sent.as_slice() {
        [Output::Send { conn: ConnId(c), msg: Message::Teardown { request } }] if *c == conn => {
            *request
        }
        _ => panic!("expected a Teardown on connection {conn}, got {out:?}"),
    }
}

/// Item 7 of issue 43 (docs/design.md#issue-43): a done submission ends its framework at once (a
/// `Teardown`, which the master records as COMPLETED since every slot
/// exited 0) and exits only once the master accepted it, durably.
#[test]
fn a_done_submission_ends_its_framework_and_exits_once_the_master_accepted() {
    let mut n = node(&["m1:1"]);
    subscribe_on(&mut n, "m1:1", 2);
    let _ = n.handle(Millis(10), msg(1, update(0, ExecutorState::Exited { code: 0 })));
    let out = n.handle(Millis(20), msg(1, update(1, ExecutorState::Exited { code: 0 })));
    let request = teardown_sent(&out, 1);
    assert!(
        lines(&out).contains(&"ending framework fw-1 (to be recorded as COMPLETED)".to_string()),
        "{out:?}"
    );
    assert_eq!(n.ending(), None, "not before the master accepted");
    assert_eq!(
        n.deadlines().get(regent_core::node::submit::Timer::Complete),
        Some(Millis(20) + Millis::from_secs(30))
    );
    // A heartbeat meanwhile changes nothing.
    let out = n.handle(Millis(25), msg(1, Message::FrameworkHeartbeat { epoch: EPOCH }));
    assert_eq!(n.ending(), None, "{out:?}");

    // Accepted (the master answers once the history record and the
    // framework record's delete are durable): the submission ends.
    let out = n.handle(Millis(30), msg(1, Message::RequestAccepted { epoch: EPOCH, request }));
    assert_eq!(
        io(&out),
        vec![Output::Close { conn: ConnId(1), reason: "framework fw-1 torn down".into() }]
    );
    assert_eq!(
        lines(&out).last().map(String::as_str),
        Some("done: all 2 executors of framework fw-1 exited 0; the framework has ended")
    );
    let out = n.handle(Millis(31), closed(1, "closed"));
    assert_eq!(
        exit_of(&out),
        Some(SubmitExit {
            outcome: Ok(SubmitOutcome::Succeeded),
            code: EXIT_SUCCEEDED,
            message: None
        })
    );
}

/// Failed slots: the framework is ended too (the master records it as
/// FAILED), and the submission keeps its exit code 2.
#[test]
fn a_submission_with_failed_slots_ends_its_framework_too_and_exits_2() {
    let mut n = node(&["m1:1"]);
    subscribe_on(&mut n, "m1:1", 1);
    let failed = Message::SlotFailed {
        epoch: EPOCH,
        group: "main".into(),
        slot: 0,
        reason: "exited 1 three times".into(),
    };
    let out = n.handle(Millis(10), msg(1, failed));
    let request = teardown_sent(&out, 1);
    assert!(lines(&out).contains(&"ending framework fw-1 (to be recorded as FAILED)".to_string()));
    let _ = n.handle(Millis(11), msg(1, Message::RequestAccepted { epoch: EPOCH, request }));
    let out = n.handle(Millis(12), closed(1, "closed"));
    assert_eq!(exit_of(&out).map(|e| e.code), Some(regent_core::node::submit::EXIT_SLOTS_FAILED));
}

/// No answer within the complete timeout: the submission exits anyway
/// with its slots' outcome, saying the framework's end is unconfirmed.
#[test]
fn without_an_acceptance_the_submission_exits_after_the_complete_timeout_saying_so() {
    let mut n = node(&["m1:1"]);
    subscribe_on(&mut n, "m1:1", 1);
    let out = n.handle(Millis(10), msg(1, update(0, ExecutorState::Exited { code: 0 })));
    let _ = teardown_sent(&out, 1);
    let at = Millis(10) + Millis::from_secs(30);
    // The master's heartbeats keep the subscription; nothing ends early.
    let mut t = Millis(10);
    while t + Millis(900) < at {
        t = t + Millis(900);
        let _ = n.handle(t, msg(1, Message::FrameworkHeartbeat { epoch: EPOCH }));
        let _ = n.handle(t, Input::Tick);
        assert_eq!(n.ending(), None, "at {t:?}");
    }
    let out = n.handle(at, Input::Tick);
    assert_eq!(
        lines(&out).last().map(String::as_str),
        Some(
            "done: all 1 executors of framework fw-1 exited 0; the master did not confirm the end \
             of the framework within 30 s: it may end only at its failover timeout (60s)"
        ),
        "{out:?}"
    );
    assert_eq!(n.ending().map(|e| e.code), Some(EXIT_SUCCEEDED));
}

/// The leader fails over while the teardown is unanswered: the node
/// subscribes with the next leader, sends the teardown again (and no
/// declaration: the groups are done) and ends once that one accepts.
#[test]
fn a_failover_before_the_acceptance_sends_the_teardown_to_the_next_leader() {
    let mut n = node(&["m1:1", "m2:1"]);
    subscribe_on(&mut n, "m1:1", 1);
    let out = n.handle(Millis(10), msg(1, update(0, ExecutorState::Exited { code: 0 })));
    let _ = teardown_sent(&out, 1);
    let _ = n.handle(Millis(100), closed(1, "connection reset"));
    assert_eq!(n.ending(), None);
    let retry = n.poll_timeout().expect("a retry is scheduled");
    assert_eq!(io(&n.handle(retry, Input::Tick)), vec![dial(2, "m1:1")]);
    let refused = DialResult::Failed { reason: "connection refused".into(), refused: true };
    let out = n.handle(retry, Input::Dialled { dial: DialId(2), result: refused });
    assert_eq!(io(&out), vec![dial(3, "m2:1")]);
    let _ = n.handle(retry + Millis(1), dialled(3, 2));
    let later = Epoch(EPOCH.0 + 1);
    let _ = n.handle(retry + Millis(2), msg(2, leading("m2:1", later)));
    let out = n.handle(retry + Millis(3), msg(2, subscribed("fw-1", later)));
    let request = teardown_sent(&out, 2);
    let out =
        n.handle(retry + Millis(4), msg(2, Message::RequestAccepted { epoch: later, request }));
    assert_eq!(
        lines(&out).last().map(String::as_str),
        Some("done: all 1 executors of framework fw-1 exited 0; the framework has ended")
    );
    assert_eq!(n.ending().map(|e| e.code), Some(EXIT_SUCCEEDED));
}

/// The next leader refuses the subscription because the framework has
/// finished: the end was recorded before the failover, and the submission
/// still succeeds.
#[test]
fn a_subscription_refused_as_finished_while_ending_means_the_end_was_recorded() {
    let mut n = node(&["m1:1"]);
    subscribe_on(&mut n, "m1:1", 1);
    let out = n.handle(Millis(10), msg(1, update(0, ExecutorState::Exited { code: 0 })));
    let _ = teardown_sent(&out, 1);
    let _ = n.handle(Millis(100), closed(1, "connection reset"));
    let retry = n.poll_timeout().expect("a retry is scheduled");
    let _ = n.handle(retry, Input::Tick);
    let _ = n.handle(retry, dialled(2, 2));
    let later = Epoch(EPOCH.0 + 1);
    let _ = n.handle(retry + Millis(1), msg(2, leading("m1:1", later)));
    let refusal = Message::SubscribeRefused {
        epoch: later,
        reason: "framework fw-1 has finished (COMPLETED)".into(),
    };
    let out = n.handle(retry + Millis(2), msg(2, refusal));
    assert_eq!(
        lines(&out).last().map(String::as_str),
        Some(
            "done: all 1 executors of framework fw-1 exited 0; the framework had finished \
             already (the leader refused its subscription)"
        ),
        "{out:?}"
    );
    assert_eq!(n.ending().map(|e| e.code), Some(EXIT_SUCCEEDED));
}

/// Ctrl-C while waiting for the acceptance: the slots are done, so the
/// submission keeps its outcome (exit 0); the framework's end is said to
/// be unconfirmed.
#[test]
fn an_interrupt_while_ending_keeps_the_outcome_and_says_the_end_is_unconfirmed() {
    let mut n = node(&["m1:1"]);
    subscribe_on(&mut n, "m1:1", 1);
    let out = n.handle(Millis(10), msg(1, update(0, ExecutorState::Exited { code: 0 })));
    let _ = teardown_sent(&out, 1);
    let out = n.handle(Millis(20), Input::Interrupt);
    let last = lines(&out).last().cloned().unwrap_or_default();
    assert!(
        last.contains("interrupted before the master confirmed the end of the framework"),
        "{last}"
    );
    assert_eq!(n.ending().map(|e| e.code), Some(EXIT_SUCCEEDED));
}

/// The master refuses the teardown: the submission keeps its outcome and
/// says why the framework's end is unconfirmed, without waiting out the
/// complete timeout.
#[test]
fn a_refused_teardown_ends_the_submission_saying_why() {
    let mut n = node(&["m1:1"]);
    subscribe_on(&mut n, "m1:1", 1);
    let out = n.handle(Millis(10), msg(1, update(0, ExecutorState::Exited { code: 0 })));
    let request = teardown_sent(&out, 1);
    let refusal =
        Message::RequestRefused { epoch: EPOCH, request, reason: "the leader is busy".into() };
    let out = n.handle(Millis(20), msg(1, refusal));
    assert_eq!(
        lines(&out).last().map(String::as_str),
        Some(
            "done: all 1 executors of framework fw-1 exited 0; the master refused to end the \
             framework (the leader is busy): it may end only at its failover timeout (60s)"
        ),
        "{out:?}"
    );
    assert_eq!(n.ending().map(|e| e.code), Some(EXIT_SUCCEEDED));
}

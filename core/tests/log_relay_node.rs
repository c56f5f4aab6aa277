//! Executor output through the master node (`MasterNode`, ZooKeeper mode,
//! on the pure ZooKeeper model of `node_harness`): a log read is no
//! command, so a new leader relays it without waiting for its acting lease.
#![cfg(feature = "testkit")]

mod node_harness;

use regent_core::ids::QueryId;
use regent_core::master::Status;
use regent_core::node::master::{Answer, Input, Output, Query};
use regent_core::protocol::{GroupSpec, LogRead, LogStream, Message};
use regent_core::ConnId;

/// A one-master ZooKeeper cluster, leading, with worker `w1` on connection
/// 10, a framework on 20, and one placed executor (its launch still waiting
/// for the acting lease).
fn leader_with_one_executor() -> (node_harness::Cluster, regent_core::ExecutorId) {
    let mut c = node_harness::Cluster::zookeeper(1);
    let _ = c.feed(0, Input::Start);
    assert_eq!(c.nodes[0].status(), Status::Alive);
    let _ = c.register(0, 10, "w1", 1);
    let _ = c.subscribe(0, 20, 1);
    let spec = GroupSpec {
        group: "g".into(),
        slots: 1,
        command: vec!["true".into()],
        env: vec![],
        cores: 1,
        memory_mb: 64,
        policy: Default::default(),
        launch: Default::default(),
    };
    let declare = Message::DeclareGroup { request: 1, spec };
    let _ = c.feed(0, Input::Message { conn: ConnId(20), msg: declare });
    let e = c.nodes[0].node.master().executors().next().expect("placed").id.clone();
    (c, e)
}

/// A new ZooKeeper-mode leader holds its first launch until its acting
/// lease is confirmed (docs/design.md#issue-12), but a log read is no command: it is
/// relayed at once, and its answer passed back at once.
#[test]
fn a_new_leader_relays_reads_without_waiting_for_its_acting_lease() {
    let (mut c, e) = leader_with_one_executor();
    assert_eq!(c.nodes[0].node.held_frames(), 1, "the launch waits for the acting lease");
    let out = c.feed(
        0,
        Input::Message {
            conn: ConnId(30),
            msg: Message::LogRequest {
                request: 1,
                executor: e,
                stream: LogStream::Stdout,
                offset: Some(0),
                max: 16,
            },
        },
    );
    let relay = out
        .iter()
        .find_map(|o| match o {
            Output::Send { conn: ConnId(10), msg: Message::ReadLog { relay, .. } } => Some(*relay),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the read goes out at once: {out:?}"));
    assert_eq!(c.nodes[0].node.held_frames(), 1, "and the launch still waits");
    let data = Message::LogData {
        relay,
        live: false,
        read: LogRead::Chunk { offset: 0, data: vec![], size: 0 },
    };
    let out = c.feed(0, Input::Message { conn: ConnId(10), msg: data });
    assert!(
        out.iter().any(|o| matches!(
            o,
            Output::Send { conn: ConnId(30), msg: Message::LogChunk { request: 1, size: 0, .. } }
        )),
        "{out:?}"
    );
}

/// An HTTP log read (`GET /api/logs`) is the node's to route: the runtime
/// hands it in as `Input::Query` and gets exactly one `Output::Answer` for
/// it, with the worker's bytes; nothing is sent on a connection the runtime
/// does not own.
#[test]
fn an_http_log_query_is_relayed_and_answered_by_the_node() {
    let (mut c, e) = leader_with_one_executor();
    let query = Input::Query {
        query: QueryId(77),
        ask: Query::Log { executor: e, stream: LogStream::Stderr, offset: Some(0), max: 16 },
    };
    let out = c.feed(0, query);
    let relay = out
        .iter()
        .find_map(|o| match o {
            Output::Send { conn: ConnId(10), msg: Message::ReadLog { relay, .. } } => Some(*relay),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the read goes to the executor's worker: {out:?}"));
    assert!(!out.iter().any(|o| matches!(o, Output::Answer { .. })), "not answered yet: {out:?}");
    let data = Message::LogData {
        relay,
        live: false,
        read: LogRead::Chunk { offset: 0, data: b"oops".to_vec(), size: 4 },
    };
    let out = c.feed(0, Input::Message { conn: ConnId(10), msg: data });
    let answers: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Answer { query, answer: Answer::Reply(msg) } => Some((*query, msg.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 1, "exactly one answer: {out:?}");
    assert_eq!(answers[0].0, QueryId(77));
    assert!(
        matches!(&answers[0].1, Message::LogChunk { data, size: 4, .. } if data == b"oops"),
        "{answers:?}"
    );
    let owned = [ConnId(10), ConnId(20)];
    assert!(
        out.iter().all(|o| match o {
            Output::Send { conn, .. } | Output::Close { conn, .. } => owned.contains(conn),
            _ => true,
        }),
        "nothing on a connection the runtime does not own: {out:?}"
    );
}

/// A query for an executor the leader does not know is refused in the same
/// step, as `RequestRefused` naming it.
#[test]
fn an_http_log_query_for_an_unknown_executor_is_refused_at_once() {
    let mut c = node_harness::Cluster::zookeeper(1);
    let _ = c.feed(0, Input::Start);
    let out = c.feed(
        0,
        Input::Query {
            query: QueryId(5),
            ask: Query::Log {
                executor: "fw-nope/g/0".into(),
                stream: LogStream::Stdout,
                offset: None,
                max: 16,
            },
        },
    );
    let answer = out
        .iter()
        .find_map(|o| match o {
            Output::Answer { query: QueryId(5), answer: Answer::Reply(msg) } => Some(msg.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("answered in the same step: {out:?}"));
    assert!(matches!(answer, Message::RequestRefused { .. }), "{answer:?}");
}

/// A log read in flight when the leadership ends still gets its one answer:
/// refused, saying the master stopped leading (nothing closes for a query).
#[test]
fn an_http_log_query_in_flight_is_refused_when_the_leadership_ends() {
    let (mut c, e) = leader_with_one_executor();
    let ask = Query::Log { executor: e, stream: LogStream::Stdout, offset: Some(0), max: 16 };
    let out = c.feed(0, Input::Query { query: QueryId(9), ask });
    assert!(!out.iter().any(|o| matches!(o, Output::Answer { .. })), "relayed: {out:?}");
    let out = c.feed(0, Input::StepDown);
    let answers: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Answer { query, answer: Answer::Reply(msg) } => Some((*query, msg.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(answers.len(), 1, "{out:?}");
    assert_eq!(answers[0].0, QueryId(9));
    assert!(
        matches!(&answers[0].1, Message::RequestRefused { reason, .. } if reason.contains("stopped leading")),
        "{answers:?}"
    );
}

/// A state query is answered in its own step, after the lease check: a
/// leader stopped past its lease answers STANDBY, never the leadership it
/// no longer holds (the runtime feeds no `Tick` first).
#[test]
fn a_state_query_past_the_lease_shows_no_leadership() {
    let (mut c, _) = leader_with_one_executor();
    let state = |out: &[Output]| {
        let answers: Vec<_> = out
            .iter()
            .filter_map(|o| match o {
                Output::Answer { answer: Answer::State { state, counters }, .. } => {
                    Some((state.status, counters.node.revocations))
                }
                _ => None,
            })
            .collect();
        assert_eq!(answers.len(), 1, "one answer in the same step: {out:?}");
        answers[0]
    };
    let ask = Query::State { cached: true };
    let out = c.feed(0, Input::Query { query: QueryId(1), ask: ask.clone() });
    assert_eq!(state(&out), (regent_core::states::MasterStatus::Alive, 0));
    let lease_until = c.nodes[0].node.elector_status(c.now).unwrap().lease_until;
    c.freeze(lease_until.since(c.now) + regent_core::Millis(1));
    let out = c.feed_only(0, Input::Query { query: QueryId(2), ask });
    assert_eq!(
        state(&out),
        (regent_core::states::MasterStatus::Standby, 1),
        "revoked before the read"
    );
}

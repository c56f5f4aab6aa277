//! Executor output relayed by the leader (docs/design.md#issue-14 item 6): an operator's
//! `LogRequest` goes to the executor's worker as `ReadLog`, the worker's
//! `LogData` comes back as `LogChunk`, and every way a relay can fail ends
//! with a `RequestRefused` naming why — never a hang, never a panic, and
//! never an answer to a read nobody asked for.

mod common;

use common::*;
use regent_core::ids::InstanceId;
use regent_core::limits::{
    LOG_RELAY_TIMEOUT, MAX_LOG_CHUNK, MAX_LOG_RELAYS, MAX_LOG_RELAYS_PER_CONN,
};
use regent_core::master::{self, Master};
use regent_core::node::worker::{Input as NodeInput, LogReadRequest, Output as NodeOutput};
use regent_core::node::{DialResult, WorkerNode};
use regent_core::protocol::{
    ExecutorReport, ExecutorSpec, ExecutorState, GroupSpec, HelloReply, LogRead, LogStream,
    Message, RegisterWorker, Role, Subscribe,
};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::worker;
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, MasterId, Millis};

const T: Millis = Millis(0);
const WORKER: u64 = 100;
const CLIENT: u64 = 7;

/// Feeds every write back as durable until none is left; returns every
/// message sent on the way.
fn settle(m: &mut Master, now: Millis, actions: Vec<master::Action>) -> Vec<(ConnId, Message)> {
    let mut sends = m_sends(&actions);
    let mut pending = actions;
    while !pending.is_empty() {
        let mut next = Vec::new();
        for a in pending {
            if let master::Action::Store(StoreCommand::Persist { write, .. })
            | master::Action::Store(StoreCommand::Unpersist { write, .. }) = a
            {
                let out = m.handle(now, master::Event::Store(StoreEvent::Persisted { write }));
                sends.extend(m_sends(&out));
                next.extend(out);
            }
        }
        pending = next;
    }
    sends
}

fn deliver(m: &mut Master, now: Millis, conn: u64, msg: Message) -> Vec<(ConnId, Message)> {
    let out = m.handle(now, master::Event::Message { conn: ConnId(conn), msg });
    settle(m, now, out)
}

fn register(worker: &str, inc: u64) -> Message {
    Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: worker.into(),
        incarnation: Incarnation(inc),
        cores: 4,
        memory_mb: 4096,
        executors: vec![],
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    })
}

/// Leader "a" with worker w0 (conn 100) running executor `e` of a
/// framework subscribed on conn 1, and an operator connected on conn 7.
fn cluster() -> (Master, ExecutorId) {
    let mut m = master("a");
    let out = elect(&mut m, T, 1);
    let _ = settle(&mut m, T, out);
    let _ = connect_worker(&mut m, T, WORKER, "w0");
    let _ = deliver(&mut m, T, WORKER, register("w0", 100));
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(1) });
    let _ = deliver(&mut m, T, 1, hello(Role::Subscriber, "s"));
    let sub = Message::Subscribe(Subscribe {
        framework: Some(FrameworkId::new("fw")),
        name: "app".into(),
        instance: InstanceId(1),
        attempt: 1,
        failover_timeout: Millis(30_000),
        tenant: None,
    });
    let _ = deliver(&mut m, T, 1, sub);
    let spec = GroupSpec {
        group: "g".into(),
        slots: 1,
        command: vec!["/bin/echo".into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy: Default::default(),
        launch: Default::default(),
    };
    let sends = deliver(&mut m, T, 1, Message::DeclareGroup { request: 1, spec });
    let e = sends
        .iter()
        .find_map(|(_, m)| match m {
            Message::LaunchExecutor { executor, .. } => Some(executor.clone()),
            _ => None,
        })
        .expect("the executor is launched on w0");
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(CLIENT) });
    let _ = deliver(&mut m, T, CLIENT, hello(Role::Client, "regent-logs"));
    (m, e)
}

fn ask(executor: &ExecutorId, request: u64, offset: Option<u64>, max: u32) -> Message {
    Message::LogRequest {
        request,
        executor: executor.clone(),
        stream: LogStream::Stdout,
        offset,
        max,
    }
}

/// The relay number of the one `ReadLog` in `sends`, sent to the worker.
fn relayed(sends: &[(ConnId, Message)]) -> u64 {
    match sends {
        [(ConnId(WORKER), Message::ReadLog { relay, .. })] => *relay,
        other => panic!("expected one ReadLog to the worker, got {other:?}"),
    }
}

fn refusal(sends: &[(ConnId, Message)], conn: u64, request: u64) -> String {
    match sends {
        [(c, Message::RequestRefused { request: r, reason, .. })] if *c == ConnId(conn) => {
            assert_eq!(*r, request);
            reason.clone()
        }
        other => panic!("expected one RequestRefused on conn {conn}, got {other:?}"),
    }
}

fn chunk(offset: u64, data: &[u8], size: u64) -> LogRead {
    LogRead::Chunk { offset, data: data.to_vec(), size }
}

#[test]
fn a_request_goes_to_the_executors_worker_and_its_bytes_come_back_as_a_chunk() {
    let (mut m, e) = cluster();
    let sends = deliver(&mut m, T, CLIENT, ask(&e, 5, Some(0), 1024));
    assert_eq!(
        sends,
        vec![(
            ConnId(WORKER),
            Message::ReadLog {
                epoch: m.epoch(),
                relay: 0,
                executor: e.clone(),
                stream: LogStream::Stdout,
                offset: Some(0),
                max: 1024
            }
        )]
    );
    assert_eq!(m.log_relays_in_flight(), 1);
    let data = Message::LogData { relay: 0, live: true, read: chunk(0, b"hello\n", 6) };
    let sends = deliver(&mut m, T, WORKER, data);
    assert_eq!(
        sends,
        vec![(
            ConnId(CLIENT),
            Message::LogChunk {
                epoch: m.epoch(),
                request: 5,
                offset: 0,
                data: b"hello\n".to_vec(),
                size: 6,
                finished: false
            }
        )]
    );
    assert_eq!(m.log_relays_in_flight(), 0);
    assert_eq!(m.metrics().log_relays, 1);
}

#[test]
fn finished_only_once_the_leader_and_the_worker_both_know_the_executor_ended() {
    let (mut m, e) = cluster();
    let report = |state| Message::ExecutorStatus {
        incarnation: Incarnation(100),
        report: ExecutorReport {
            health: None,
            ran_ms: None,
            resources: Default::default(),
            ports: Default::default(),
            id: e.clone(),
            framework: FrameworkId::new("fw"),
            cores: 1,
            memory_mb: 1,
            state,
        },
    };
    let _ = deliver(&mut m, T, WORKER, report(ExecutorState::Running));
    let finished = |m: &mut Master, live: bool| {
        let relay = relayed(&deliver(m, T, CLIENT, ask(&e, 1, None, 100)));
        let data = Message::LogData { relay, live, read: chunk(0, b"done\n", 5) };
        match &deliver(m, T, WORKER, data)[..] {
            [(_, Message::LogChunk { finished, offset: 0, size: 5, .. })] => *finished,
            other => panic!("{other:?}"),
        }
    };
    assert!(!finished(&mut m, false), "the leader still sees it running");
    let _ = deliver(&mut m, T, WORKER, report(ExecutorState::Exited { code: 0 }));
    assert!(!finished(&mut m, true), "the worker still ran it when it read");
    assert!(finished(&mut m, false));
}

#[test]
fn an_unknown_executor_or_a_path_is_refused_without_asking_any_worker() {
    let (mut m, _) = cluster();
    for (i, id) in ["nope", "../../etc/passwd"].into_iter().enumerate() {
        let sends = deliver(&mut m, T, CLIENT, ask(&ExecutorId::new(id), i as u64, None, 10));
        let reason = refusal(&sends, CLIENT, i as u64);
        assert!(reason.contains(&format!("no executor {id} is known to the leader")), "{reason}");
    }
    assert_eq!(m.metrics().log_requests_refused, 2);
    assert_eq!(m.log_relays_in_flight(), 0);
}

#[test]
fn a_worker_that_is_not_connected_is_named_in_the_refusal() {
    let (mut m, e) = cluster();
    let _ = m.handle(T, master::Event::Disconnected { conn: ConnId(WORKER) });
    let reason = refusal(&deliver(&mut m, T, CLIENT, ask(&e, 3, None, 10)), CLIENT, 3);
    assert!(reason.contains("runs on worker w0, which is not connected"), "{reason}");
}

#[test]
fn a_worker_that_disconnects_mid_relay_gets_its_reads_answered_at_once() {
    let (mut m, e) = cluster();
    let _ = relayed(&deliver(&mut m, T, CLIENT, ask(&e, 4, Some(0), 10)));
    let out = m.handle(T, master::Event::Disconnected { conn: ConnId(WORKER) });
    let reason = refusal(&m_sends(&out), CLIENT, 4);
    assert!(reason.contains("worker w0 disconnected before it answered"), "{reason}");
    assert_eq!(m.log_relays_in_flight(), 0);
}

#[test]
fn a_silent_worker_times_the_relay_out_with_an_answer() {
    let (mut m, e) = cluster();
    let out =
        m.handle(T, master::Event::Message { conn: ConnId(CLIENT), msg: ask(&e, 6, Some(0), 10) });
    assert_eq!(m.deadline(master::Timer::LogRelays), Some(T + LOG_RELAY_TIMEOUT), "{out:?}");
    let early = m.handle(Millis(1), master::Event::Tick);
    assert!(m_sends(&early).is_empty(), "not yet: {early:?}");
    let out = m.handle(T + LOG_RELAY_TIMEOUT, master::Event::Tick);
    // The same tick heartbeats the frameworks; the refusal is what counts.
    let mut sends = m_sends(&out);
    sends.retain(|(_, msg)| !matches!(msg, Message::FrameworkHeartbeat { .. }));
    let reason = refusal(&sends, CLIENT, 6);
    assert!(reason.contains("worker w0 did not answer"), "{reason}");
    assert_eq!(m.metrics().log_relays_timed_out, 1);
    // The worker's late answer is one nobody asked for now: dropped, counted.
    let late = Message::LogData { relay: 0, live: true, read: chunk(0, b"x", 1) };
    assert!(deliver(&mut m, T + LOG_RELAY_TIMEOUT, WORKER, late).is_empty());
    assert_eq!(m.metrics().log_answers_refused, 1);
}

#[test]
fn every_limit_is_checked_before_anything_is_relayed() {
    let (mut m, e) = cluster();
    let reason =
        refusal(&deliver(&mut m, T, CLIENT, ask(&e, 1, None, MAX_LOG_CHUNK + 1)), CLIENT, 1);
    assert!(reason.contains("the limit is 65536 bytes (MAX_LOG_CHUNK)"), "{reason}");
    for i in 0..MAX_LOG_RELAYS_PER_CONN as u64 {
        let _ = relayed(&deliver(&mut m, T, CLIENT, ask(&e, 10 + i, None, MAX_LOG_CHUNK)));
    }
    let reason = refusal(&deliver(&mut m, T, CLIENT, ask(&e, 99, None, 1)), CLIENT, 99);
    assert!(reason.contains("(MAX_LOG_RELAYS_PER_CONN)"), "{reason}");
    // Other connections fill the leader up to its total.
    let mut conn = 1_000;
    while m.log_relays_in_flight() < MAX_LOG_RELAYS {
        conn += 1;
        let _ = relayed(&deliver(&mut m, T, conn, ask(&e, 0, None, 1)));
    }
    let reason = refusal(&deliver(&mut m, T, 5_000, ask(&e, 7, None, 1)), 5_000, 7);
    assert!(reason.contains("(MAX_LOG_RELAYS)"), "{reason}");
    assert_eq!(m.log_relays_in_flight(), MAX_LOG_RELAYS);
}

#[test]
fn a_hostile_worker_cannot_answer_reads_it_was_not_asked() {
    let (mut m, e) = cluster();
    // Another registered worker on conn 101.
    let _ = connect_worker(&mut m, T, 101, "w1");
    let _ = deliver(&mut m, T, 101, register("w1", 101));
    let rejected = m.metrics().rejected;
    // A relay that never existed.
    let forged = Message::LogData { relay: 42, live: false, read: chunk(0, b"evil", 4) };
    assert!(deliver(&mut m, T, 101, forged).is_empty());
    // A relay that exists, answered from the wrong connection.
    let relay = relayed(&deliver(&mut m, T, CLIENT, ask(&e, 8, Some(0), 4)));
    let stolen = Message::LogData { relay, live: false, read: chunk(0, b"evil", 4) };
    assert!(deliver(&mut m, T, 101, stolen).is_empty());
    assert_eq!(m.metrics().log_answers_refused, 2);
    assert_eq!(m.metrics().rejected, rejected + 2);
    assert_eq!(m.log_relays_in_flight(), 1, "the real relay still waits for its worker");
    // The real worker answers with more than was asked: refused, counted,
    // and the operator is told.
    let big = Message::LogData { relay, live: true, read: chunk(0, b"12345", 5) };
    let reason = refusal(&deliver(&mut m, T, WORKER, big), CLIENT, 8);
    assert!(reason.contains("does not fit the read asked for"), "{reason}");
    assert_eq!(m.metrics().log_answers_refused, 3);
    // Bytes past the size it claims, or at another offset: refused too.
    for bad in [chunk(0, b"abcd", 2), chunk(3, b"ab", 10), chunk(u64::MAX, b"ab", u64::MAX)] {
        let relay = relayed(&deliver(&mut m, T, CLIENT, ask(&e, 9, Some(0), 4)));
        let msg = Message::LogData { relay, live: true, read: bad };
        let reason = refusal(&deliver(&mut m, T, WORKER, msg), CLIENT, 9);
        assert!(reason.contains("does not fit"), "{reason}");
    }
    // A worker's failure is passed on, naming the worker.
    let relay = relayed(&deliver(&mut m, T, CLIENT, ask(&e, 10, None, 4)));
    let failed = LogRead::Failed { reason: "no stdout file for executor x".into() };
    let msg = Message::LogData { relay, live: false, read: failed };
    let reason = refusal(&deliver(&mut m, T, WORKER, msg), CLIENT, 10);
    assert_eq!(reason, "worker w0: no stdout file for executor x");
}

#[test]
fn an_answer_for_an_operator_that_left_is_dropped_quietly() {
    let (mut m, e) = cluster();
    let relay = relayed(&deliver(&mut m, T, CLIENT, ask(&e, 1, None, 4)));
    let _ = m.handle(T, master::Event::Disconnected { conn: ConnId(CLIENT) });
    let msg = Message::LogData { relay, live: true, read: chunk(0, b"ab", 2) };
    assert!(deliver(&mut m, T, WORKER, msg).is_empty());
    assert_eq!(m.metrics().log_answers_refused, 0, "it was asked for: not hostile");
    assert_eq!(m.log_relays_in_flight(), 0);
}

#[test]
fn a_standby_answers_not_leader() {
    let mut m = master("b");
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(CLIENT) });
    let sends = deliver(&mut m, T, CLIENT, ask(&ExecutorId::new("e"), 1, None, 4));
    assert!(matches!(&sends[..], [(_, Message::NotLeader { .. })]), "{sends:?}");
}

// ----- the worker's side ------------------------------------------------

fn registered_worker() -> worker::Worker {
    let mut w = worker("w1", 7, &["a", "b"]);
    let _ = w.handle(T, worker::Event::Start);
    let _ = w.handle(T, worker::Event::Connected { master: addr("a") });
    let _ = w.handle(T, worker::Event::Connected { master: addr("b") });
    let reg = Message::Registered {
        epoch: Epoch(2),
        heartbeat_interval: Millis(1_000),
        duplicate: false,
        masters: vec![addr("a"), addr("b")],
    };
    let _ = from(&mut w, T, "a", reg);
    w
}

fn read_log(epoch: u64, executor: &str, max: u32) -> Message {
    Message::ReadLog {
        epoch: Epoch(epoch),
        relay: 3,
        executor: ExecutorId::new(executor),
        stream: LogStream::Stderr,
        offset: Some(8),
        max,
    }
}

#[test]
fn the_worker_reads_for_the_master_it_follows_and_says_whether_the_executor_runs() {
    let mut w = registered_worker();
    let launch = Message::LaunchExecutor {
        epoch: Epoch(2),
        executor: ExecutorId::new("e1"),
        framework: FrameworkId::new("f"),
        spec: ExecutorSpec {
            command: vec!["/bin/true".into()],
            env: vec![],
            cores: 1,
            memory_mb: 1,
            launch: Default::default(),
        },
        launch: 1,
    };
    let _ = from(&mut w, T, "a", launch);
    let out = from(&mut w, T, "a", read_log(2, "e1", u32::MAX));
    assert_eq!(
        out,
        vec![worker::Action::ReadLog {
            master: addr("a"),
            relay: 3,
            executor: ExecutorId::new("e1"),
            stream: LogStream::Stderr,
            offset: Some(8),
            max: MAX_LOG_CHUNK,
            live: true,
        }],
        "the size is capped at the limit"
    );
    let out = from(&mut w, T, "a", read_log(2, "gone", 10));
    assert!(matches!(&out[..], [worker::Action::ReadLog { live: false, .. }]), "{out:?}");
    // A master it does not follow is told why, not left waiting.
    let out = from(&mut w, T, "b", read_log(2, "e1", 10));
    match &out[..] {
        [worker::Action::Send {
            to,
            msg: Message::LogData { relay: 3, live: false, read: LogRead::Failed { reason } },
        }] => {
            assert_eq!(to, &addr("b"));
            assert!(reason.contains("worker w1 follows a"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // A deposed leader's read is fenced like any of its messages.
    assert!(from(&mut w, T, "a", read_log(1, "e1", 10)).is_empty());
}

#[test]
fn the_worker_node_answers_on_the_connection_the_read_came_in_on() {
    let cfg = worker::Config::new(
        "test",
        regent_core::WorkerId::new("w1"),
        Incarnation(7),
        vec![addr("m1:1")],
        4,
        1024,
    );
    let mut n = WorkerNode::new(cfg);
    let out = n.handle(T, NodeInput::Start);
    let dial = out
        .iter()
        .find_map(|o| match o {
            NodeOutput::Dial { dial, .. } => Some(*dial),
            _ => None,
        })
        .unwrap();
    let connected = DialResult::Connected { conn: ConnId(9), peer: None };
    let _ = n.handle(T, NodeInput::Dialled { dial, result: connected });
    let reply = Message::HelloReply(HelloReply {
        role: Role::Master,
        master: MasterId::new("m1"),
        leading: true,
        epoch: Epoch(5),
        leader: None,
        masters: vec![],
    });
    let _ = n.handle(T, NodeInput::Message { conn: ConnId(9), msg: reply });
    let out = n.handle(T, NodeInput::Message { conn: ConnId(9), msg: read_log(5, "e1", 100) });
    let read = match &out[..] {
        [NodeOutput::ReadLog(LogReadRequest {
            read,
            executor,
            stream: LogStream::Stderr,
            offset: Some(8),
            max: 100,
        })] => {
            assert_eq!(executor.as_str(), "e1");
            *read
        }
        other => panic!("{other:?}"),
    };
    let result = chunk(8, b"err\n", 12);
    let out = n.handle(T, NodeInput::LogRead { read, result: result.clone() });
    assert_eq!(
        out,
        vec![NodeOutput::Send {
            conn: ConnId(9),
            msg: Message::LogData { relay: 3, live: false, read: result.clone() }
        }]
    );
    // A second answer for the same read, or one for a connection that
    // closed meanwhile, sends nothing.
    assert!(n.handle(T, NodeInput::LogRead { read, result: result.clone() }).is_empty());
    let out = n.handle(T, NodeInput::Message { conn: ConnId(9), msg: read_log(5, "e1", 100) });
    let NodeOutput::ReadLog(LogReadRequest { read, .. }) = out[0].clone() else {
        panic!("{out:?}")
    };
    let _ = n.handle(
        T,
        NodeInput::Closed {
            conn: ConnId(9),
            how: regent_core::node::Ended::ByPeer,
            reason: "reset".into(),
        },
    );
    let out = n.handle(T, NodeInput::LogRead { read, result });
    assert!(!out.iter().any(|o| matches!(o, NodeOutput::Send { .. })), "{out:?}");
}

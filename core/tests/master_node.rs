//! The master node (`regent_core::node::MasterNode`): the master with its
//! elector, lease and fenced ZooKeeper store, driven through the pure
//! ZooKeeper model with fake peers and a virtual clock
//! (`node_harness`). Each test is named after what an operator would
//! notice; assertions are on messages sent to peers, the master's status and
//! the records under `<root>/state/`.
#![cfg(feature = "testkit")]

mod node_harness;

use node_harness::*;
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use regent_core::elector::DeposeOutcome;
use regent_core::master::{Status, WorkerState};
use regent_core::node::master::{Input, Leadership, Note, Output};
use regent_core::node::{DialResult, Ended, ProbeResult};
use regent_core::protocol::{GroupSpec, HelloReply, Message, Role};
use regent_core::store::{Record, WorkerRecord};
use regent_core::zk::{MultiOp, RequestId, ZkCommand, ZkError, ZkEvent, ZkOp, ZkResult};
use regent_core::{Addr, ConnId, Epoch, Incarnation, MasterId, Millis, WorkerId};

// ----- helpers -------------------------------------------------------------

fn worker_record(id: &str, inc: u64) -> Record {
    Record::Worker(WorkerRecord {
        dead: false,
        id: WorkerId::new(id),
        incarnation: Incarnation(inc),
        cores: 4,
        memory_mb: 4096,
        callback: None,
        maintenance: None,
    })
}

/// `n` ZooKeeper-mode nodes started one after another: node 0 leads (ALIVE
/// over an empty store), the others are standbys.
fn led_by_node_0(n: usize) -> Cluster {
    let mut c = Cluster::zookeeper(n);
    for i in 0..n {
        let _ = c.feed(i, Input::Start);
    }
    c.advance(Millis(100));
    assert_eq!(c.nodes[0].status(), Status::Alive);
    assert_eq!(c.leaders(), vec![0]);
    c
}

fn is_registered(m: &Message) -> bool {
    matches!(m, Message::Registered { .. })
}

fn count_on(c: &Cluster, i: usize, conn: u64, what: fn(&Message) -> bool) -> usize {
    c.nodes[i].sends_to(conn).iter().filter(|(_, m)| what(m)).count()
}

/// The coordination requests of node `i` from call `from` on, with their
/// request ids.
fn requests_since(c: &Cluster, i: usize, from: usize) -> Vec<(RequestId, ZkOp)> {
    c.nodes[i]
        .outputs_since(from)
        .into_iter()
        .filter_map(|o| match o {
            Output::Zk(ZkCommand::Request { req, op, .. }) => Some((req, op)),
            _ => None,
        })
        .collect()
}

/// The reply node `i` was fed for request `req`.
fn reply_to(c: &Cluster, i: usize, req: RequestId) -> Option<ZkResult> {
    c.nodes[i].calls.iter().find_map(|call| match &call.input {
        Input::Zk(ZkEvent::Reply { req: r, result }) if *r == req => Some(result.clone()),
        _ => None,
    })
}

/// Messages that act on a peer or acknowledge durable state.
fn acts(m: &Message) -> bool {
    matches!(
        m,
        Message::Registered { .. }
            | Message::LaunchExecutor { .. }
            | Message::KillExecutorOnWorker { .. }
            | Message::Shutdown { .. }
            | Message::Subscribed { .. }
            | Message::RequestAccepted { .. }
            | Message::MasterChanged { .. }
    )
}

fn store_request(o: &Output) -> bool {
    matches!(o, Output::Zk(ZkCommand::Request { op, .. }) if op_path(op).starts_with(STATE))
}

// ----- 1 -------------------------------------------------------------------

/// Node 0 is started over a store that holds a worker which never reports,
/// so it stays RECOVERING for the whole recovery window with sweeps firing
/// inside it; worker `w1` registers, then goes silent for an hour.
fn silent_worker_scenario(c: &mut Cluster, blip: bool) {
    let _ = c.feed(0, Input::Start);
    assert_eq!(c.nodes[0].status(), Status::Recovering);
    let t0 = c.now;
    let _ = c.register(0, 10, "w1", 1);
    assert_eq!(count_on(c, 0, 10, is_registered), 1);
    if blip {
        // A ZooKeeper blip across the first sweep: it fires SUSPENDED.
        c.advance(Millis(1_500));
        c.drop_link(0);
        assert_eq!(c.nodes[0].status(), Status::Suspended);
        c.advance(Millis(2_000));
        c.reconnect(0);
        assert_eq!(c.nodes[0].status(), Status::Recovering);
    }
    c.advance(Millis(3_600_000) - c.now.since(t0));
    assert_eq!(c.nodes[0].worker_state("w1"), Some(WorkerState::Dead));
    assert_eq!(c.nodes[0].status(), Status::Alive);
    assert!(!c.nodes[0].exited());
}

/// The old bug: a Sweep that fired while the master could not act on it
/// (RECOVERING, or SUSPENDED) was never armed again, so a worker that went
/// silent was never declared DEAD.
#[test]
fn a_worker_silent_for_an_hour_is_declared_dead() {
    for blip in [false, true] {
        let mut c = Cluster::zookeeper(1);
        c.seed_store(&[Record::Epoch(Epoch(3)), worker_record("gone", 7)]);
        silent_worker_scenario(&mut c, blip);
        let records = c.records();
        assert!(!records.contains_key("w-w1"), "the dead worker's record is removed: {records:?}");
    }
    let mut c = Cluster::single();
    let store = c.nodes[0].store.as_mut().unwrap();
    store.insert(worker_record("gone", 7).key(), worker_record("gone", 7));
    silent_worker_scenario(&mut c, false);
    let store = c.nodes[0].store.as_ref().unwrap();
    assert!(!store.contains_key(&worker_record("w1", 1).key()));
}

// ----- 2 -------------------------------------------------------------------

/// A subscriber keeps hearing from the leader after a two-second ZooKeeper
/// connection loss that the session survives.
#[test]
fn framework_heartbeats_resume_after_a_zookeeper_blip() {
    let mut c = led_by_node_0(1);
    let _ = c.subscribe(0, 20, 1);
    let subscribed = |m: &Message| matches!(m, Message::Subscribed { .. });
    assert_eq!(count_on(&c, 0, 20, subscribed), 1);
    let beat = |m: &Message| matches!(m, Message::FrameworkHeartbeat { .. });
    c.advance(HEARTBEAT.times(3));
    assert!(count_on(&c, 0, 20, beat) >= 2, "heartbeats flow before the blip");

    c.drop_link(0);
    assert_eq!(c.nodes[0].status(), Status::Suspended);
    c.advance(Millis(2_000));
    c.reconnect(0);
    let resumed = c.now;
    assert_eq!(c.nodes[0].status(), Status::Alive, "the session survived: leadership resumes");

    c.advance(HEARTBEAT.times(3));
    let after: Vec<Millis> = c.nodes[0]
        .sends_to(20)
        .into_iter()
        .filter(|(at, m)| *at >= resumed && beat(m))
        .map(|(at, _)| at)
        .collect();
    assert!(
        after.len() >= 2,
        "FrameworkHeartbeat is sent again within a few intervals of resuming (sent at {after:?}, resumed at {resumed})"
    );
    assert!(!c.nodes[0].closed.contains(&ConnId(20)), "the subscription survived the blip");
}

// ----- 3 -------------------------------------------------------------------

/// The recovery deadline passes while the leader is SUSPENDED; once the
/// session is back, recovery still ends: ALIVE, and the recovered worker that
/// never reported is declared DEAD and its record removed.
#[test]
fn a_recovery_deadline_that_passed_while_suspended_still_ends_recovery() {
    let mut c = Cluster::zookeeper(1);
    c.seed_store(&[Record::Epoch(Epoch(3)), worker_record("a", 1), worker_record("b", 1)]);
    let _ = c.feed(0, Input::Start);
    assert_eq!(c.nodes[0].status(), Status::Recovering);
    let elected = c.now;
    // a reports (and keeps heartbeating); b never does.
    let _ = c.register(0, 10, "a", 1);
    assert_eq!(count_on(&c, 0, 10, is_registered), 1);
    let run = |c: &mut Cluster, secs: u64| {
        for _ in 0..secs {
            c.advance(Millis(1_000));
            let _ = c.heartbeat(0, 10, 1);
        }
    };
    run(&mut c, 9);
    assert_eq!(c.nodes[0].status(), Status::Recovering);

    c.drop_link(0);
    assert_eq!(c.nodes[0].status(), Status::Suspended);
    run(&mut c, 2);
    assert!(c.now > elected + Millis(10_000), "the recovery deadline passed while suspended");
    assert_eq!(c.nodes[0].status(), Status::Suspended);
    c.reconnect(0);
    run(&mut c, 3);

    assert_eq!(c.nodes[0].status(), Status::Alive);
    assert_eq!(c.nodes[0].worker_state("a"), Some(WorkerState::Alive));
    assert_eq!(c.nodes[0].worker_state("b"), Some(WorkerState::Dead));
    let records = c.records();
    assert!(records.contains_key("w-a") && !records.contains_key("w-b"), "{records:?}");
}

// ----- 4 -------------------------------------------------------------------

/// A leader with workers is stopped (SIGSTOP) past its lease and past the
/// worker timeout; when it runs again, a due Tick and a worker message
/// arrive back to back. The first thing it does is give up the leadership it
/// no longer holds: nothing is marked DEAD, nothing is killed or launched,
/// nothing is acknowledged.
fn paused_leader(no_lease_check: bool) -> (Cluster, Vec<Output>, Vec<Output>) {
    let mut config = zk_config(0);
    if let Leadership::Zookeeper(e) = &mut config.leadership {
        e.unsafe_no_lease_check = no_lease_check;
    }
    let mut c = Cluster::with_configs(vec![config]);
    let _ = c.feed(0, Input::Start);
    assert_eq!(c.nodes[0].status(), Status::Alive);
    let _ = c.register(0, 10, "w1", 1);
    let _ = c.register(0, 11, "w2", 1);
    c.hello(0, 12, Role::Worker, "w3");
    assert_eq!(count_on(&c, 0, 10, is_registered), 1);
    c.advance(Millis(500));
    let _ = c.heartbeat(0, 10, 1);
    let _ = c.heartbeat(0, 11, 1);

    let lease_until = c.nodes[0].node.elector_status(c.now).unwrap().lease_until;
    // Stopped past the lease and past the worker timeout: a sweep is due.
    c.freeze(lease_until.since(c.now) + Millis(20_000));
    assert!(c.nodes[0].node.poll_timeout().is_some_and(|t| t <= c.now));
    let first = c.feed_only(0, Input::Tick);
    let second = c.feed_only(0, Input::Message { conn: ConnId(12), msg: register_msg("w3", 1) });
    (c, first, second)
}

#[test]
fn a_paused_leader_past_its_lease_acts_on_nothing() {
    let (mut c, first, second) = paused_leader(false);
    let session = c.nodes[0].calls[0..c.nodes[0].calls.len() - 2]
        .iter()
        .rev()
        .find_map(|call| match &call.input {
            Input::Zk(ZkEvent::SessionConnected { session, .. }) => Some(*session),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        first.first(),
        Some(&Output::Note(Note::Revoked)),
        "revocation comes first: {first:?}"
    );
    assert!(
        first.contains(&Output::Zk(ZkCommand::CloseSession { session })),
        "the session goes in the same step: {first:?}"
    );
    let calls = &c.nodes[0].calls;
    assert_eq!(calls[calls.len() - 2].status, Status::Standby);
    assert_eq!(calls[calls.len() - 1].status, Status::Standby);
    for o in first.iter().chain(&second) {
        if let Output::Send { msg, .. } = o {
            assert!(!acts(msg), "acted on an expired lease: {msg:?}");
        }
        assert!(!store_request(o), "wrote the store on an expired lease: {o:?}");
        assert!(!matches!(o, Output::Exit { .. }));
    }
    assert!(
        second.iter().any(|o| matches!(o, Output::Send { msg: Message::NotLeader { .. }, .. })),
        "the late registration is refused: {second:?}"
    );
    // The process lives on and leads again with a fresh session and a
    // higher epoch.
    let old_epoch = c.nodes[0].node.master().epoch();
    c.pump();
    c.advance(Millis(100));
    assert_eq!(c.leaders(), vec![0]);
    assert!(c.nodes[0].node.master().epoch() > old_epoch);
    assert_ne!(c.nodes[0].session, Some(session));
    assert!(!c.nodes[0].exited());

    // The control: without the lease check the same schedule marks the
    // silent workers DEAD (un-persisting them) on the expired lease.
    let (_, first, _) = paused_leader(true);
    assert!(first.iter().any(store_request), "the control acts: {first:?}");
}

// ----- 5 -------------------------------------------------------------------

/// A registration's write gets ConnectionLoss (applied by the server, or
/// not) while a second registration's write is in flight beside it: the
/// master is SUSPENDED and acknowledges nothing; once the session is back
/// both writes are sent again, the first before the second, exactly one
/// record each lands, `Registered` is sent once each, and the master is
/// ALIVE. The process never exits.
#[test]
fn a_connection_loss_during_a_store_write_suspends_then_resends_in_order() {
    for applied in [false, true] {
        let mut c = led_by_node_0(1);
        c.hello(0, 10, Role::Worker, "w1");
        c.hello(0, 11, Role::Worker, "w2");
        c.lose_next_reply(0, applied, Box::new(|op: &ZkOp| creates_record(op, "w-w1")));
        let from = c.nodes[0].calls.len();
        // Both registrations arrive before the first write is answered.
        let _ = c.feed_only(0, Input::Message { conn: ConnId(10), msg: register_msg("w1", 1) });
        let _ = c.feed_only(0, Input::Message { conn: ConnId(11), msg: register_msg("w2", 1) });
        c.pump();
        assert_eq!(c.nodes[0].status(), Status::Suspended, "applied: {applied}");
        assert_eq!(count_on(&c, 0, 10, is_registered), 0);
        assert_eq!(count_on(&c, 0, 11, is_registered), 0);
        assert_eq!(
            c.records().contains_key("w-w1"),
            applied,
            "the first attempt landed only if applied"
        );

        c.advance(Millis(500)); // the client reconnects within the session
        assert_eq!(c.nodes[0].status(), Status::Alive, "applied: {applied}");
        assert_eq!(count_on(&c, 0, 10, is_registered), 1);
        assert_eq!(count_on(&c, 0, 11, is_registered), 1);
        let names: Vec<String> = c.records().into_keys().collect();
        assert_eq!(names, vec!["epoch", "w-w1", "w-w2"]);
        assert_eq!(c.records()["w-w1"], worker_record("w1", 1));
        assert_eq!(c.records()["w-w2"], worker_record("w2", 1));
        // Both writes are in flight together (distinct records, pipelined:
        // docs/design.md#issue-46), and both are sent again after the loss, in their order:
        // each request of w1's write goes out before the same request of
        // w2's (the resend of an applied w1 needs no `Create`).
        let writes: Vec<String> = requests_since(&c, 0, from)
            .into_iter()
            .filter(|(_, op)| matches!(op, ZkOp::Multi(_)))
            .map(|(_, op)| op_path(&op))
            .collect();
        let at = |stem: &str| -> Vec<usize> {
            writes.iter().enumerate().filter(|(_, p)| p.ends_with(stem)).map(|(i, _)| i).collect()
        };
        let (w1, w2) = (at("w-w1"), at("w-w2"));
        // Its `SetData`, its `Create` (the lost one), and at least one more.
        assert!(w1.len() >= 3, "{writes:?}");
        assert!(w1.iter().zip(&w2).all(|(a, b)| a < b), "{writes:?}");
        assert!(w2[0] < w1[1], "w2's write went out before w1's was answered: {writes:?}");
        let acks: Vec<ConnId> = c.nodes[0]
            .sends()
            .into_iter()
            .filter(|(_, _, m)| is_registered(m))
            .map(|(_, conn, _)| conn)
            .collect();
        assert_eq!(acks, vec![ConnId(10), ConnId(11)]);
        // Both were in flight when the connection was lost.
        assert_eq!(c.nodes[0].node.metrics().store_resends, 2);
        assert!(!c.nodes[0].exited());
        assert!(!c.nodes[0].notes().iter().any(|n| matches!(n, Note::SteppedDown { .. })));
    }
}

/// The same loss, but the client reconnects at once and the server is slow
/// to answer the elector's first `Sync`: the store's retry timer fires
/// before the round has confirmed the leadership. The write still waits for
/// that confirmation (SUSPENDED writes nothing and acknowledges nothing).
#[test]
fn a_write_lost_in_a_blip_waits_until_the_leadership_is_confirmed() {
    for applied in [false, true] {
        let mut c = led_by_node_0(1);
        c.hello(0, 10, Role::Worker, "w1");
        c.reconnect_delay = Millis(10);
        c.lose_next_reply(0, applied, Box::new(|op: &ZkOp| creates_record(op, "w-w1")));
        let _ = c.feed(0, Input::Message { conn: ConnId(10), msg: register_msg("w1", 1) });
        assert_eq!(c.nodes[0].status(), Status::Suspended);
        // The reconnect's first request (the elector's Sync) is held.
        c.hold(
            0,
            Box::new(|op: &ZkOp| matches!(op, ZkOp::Sync { path } if path.ends_with("/election"))),
        );
        let from = c.nodes[0].calls.len();
        c.advance(Millis(1_000));
        assert_eq!(c.nodes[0].status(), Status::Suspended, "not confirmed yet");
        let early: Vec<ZkOp> = requests_since(&c, 0, from)
            .into_iter()
            .map(|(_, op)| op)
            .filter(|op| op_path(op).starts_with(STATE))
            .collect();
        assert!(early.is_empty(), "no store write while SUSPENDED (applied: {applied}): {early:?}");
        c.release(0);
        for call in &c.nodes[0].calls[from..] {
            for o in &call.outputs {
                if let Output::Send { msg, .. } = o {
                    assert!(
                        !is_registered(msg) || call.status == Status::Alive,
                        "Registered sent while {:?} (applied: {applied})",
                        call.status
                    );
                }
            }
        }
        assert_eq!(c.nodes[0].status(), Status::Alive);
        assert_eq!(count_on(&c, 0, 10, is_registered), 1);
        assert_eq!(c.records()["w-w1"], worker_record("w1", 1));
    }
}

// ----- 6 -------------------------------------------------------------------

/// The new leader's epoch write is applied but its reply is lost. After the
/// reconnect the versioned set gets BadVersion; the node reads the epoch
/// back (after a `Sync`), finds its own bytes, and leads with that epoch.
#[test]
fn an_epoch_write_whose_first_attempt_landed_counts_as_success() {
    let mut c = Cluster::zookeeper(1);
    c.seed_store(&[Record::Epoch(Epoch(5))]);
    c.lose_next_reply(0, true, Box::new(|op: &ZkOp| writes_record(op, "epoch")));
    let _ = c.feed(0, Input::Start);
    // Elected, the epoch write in doubt: not leading (nor SUSPENDED) before
    // its epoch is durable.
    assert_eq!(c.nodes[0].status(), Status::Standby, "elected, epoch write in doubt");
    assert_eq!(c.records()["epoch"], Record::Epoch(Epoch(6)), "the first attempt landed");
    let from = c.nodes[0].calls.len();
    c.advance(Millis(500));

    let reqs = requests_since(&c, 0, from);
    let resend = reqs.iter().position(|(_, op)| writes_record(op, "epoch")).expect("resent");
    let (req, op) = &reqs[resend];
    assert!(
        matches!(op, ZkOp::Multi(ops) if matches!(ops[1], MultiOp::SetData { version: Some(0), .. })),
        "a versioned set: {op:?}"
    );
    assert_eq!(reply_to(&c, 0, *req), Some(Err(ZkError::BadVersion)));
    let store_next: Vec<&ZkOp> = reqs[resend + 1..]
        .iter()
        .map(|(_, op)| op)
        .filter(|op| op_path(op).starts_with(STATE))
        .collect();
    assert!(matches!(store_next[0], ZkOp::Sync { .. }), "{store_next:?}");
    assert!(
        matches!(store_next[1], ZkOp::GetData { path, .. } if path == &format!("{STATE}/epoch")),
        "{store_next:?}"
    );
    assert_eq!(c.nodes[0].node.master().epoch(), Epoch(6));
    assert_eq!(c.nodes[0].status(), Status::Alive);
    assert!(!c.nodes[0].notes().iter().any(|n| matches!(n, Note::SteppedDown { .. })));
    assert!(!c.nodes[0]
        .zk_commands()
        .iter()
        .any(|(_, cmd)| matches!(cmd, ZkCommand::CloseSession { .. })));
    assert_eq!(c.records()["epoch"], Record::Epoch(Epoch(6)));
    // Workers hear of it at that epoch.
    let _ = c.register(0, 10, "w1", 1);
    assert!(c.nodes[0]
        .sends_to(10)
        .iter()
        .any(|(_, m)| matches!(m, Message::Registered { epoch: Epoch(6), .. })));
}

// ----- 7 -------------------------------------------------------------------

/// The leader's election node is deleted from outside (as a standby doing a
/// fast takeover would). Its next write is fenced: in that same step it
/// closes its session and returns to STANDBY, then joins the election again
/// with a fresh session; the other node leads. Nobody exits.
#[test]
fn a_fenced_write_returns_the_master_to_standby_and_it_rejoins() {
    let mut c = led_by_node_0(2);
    let s0 = c.nodes[0].session.unwrap();
    let epoch0 = c.nodes[0].node.master().epoch();
    let node0 = c.nodes[0].node.elector().unwrap().node_path().unwrap();
    c.hello(0, 10, Role::Worker, "w1");
    // The write is sent before the leader hears of the deletion (its watch
    // on its own node fires after the write reached the server).
    c.delete_from_outside(&node0);
    let from = c.nodes[0].calls.len();
    let _ = c.feed_only(0, Input::Message { conn: ConnId(10), msg: register_msg("w1", 1) });
    c.pump();

    let calls = &c.nodes[0].calls[from..];
    let step = calls
        .iter()
        .find(|call| {
            call.outputs.iter().any(|o| matches!(o, Output::Note(Note::SteppedDown { .. })))
        })
        .expect("the master steps down");
    assert!(
        matches!(&step.input, Input::Zk(ZkEvent::Reply { result: Err(ZkError::NoNode), .. })),
        "stepped down on the fenced write's answer: {:?}",
        step.input
    );
    assert!(
        step.outputs.contains(&Output::Zk(ZkCommand::CloseSession { session: s0 })),
        "the session is closed in the same step: {:?}",
        step.outputs
    );
    assert!(step.outputs.iter().any(|o| matches!(o, Output::Zk(ZkCommand::NewSession { .. }))));
    assert_eq!(step.status, Status::Standby);
    assert_eq!(count_on(&c, 0, 10, is_registered), 0);
    assert!(!c.records().contains_key("w-w1"));

    c.advance(Millis(500));
    assert_eq!(c.leaders(), vec![1]);
    assert_eq!(c.nodes[0].status(), Status::Standby);
    let s0_new = c.nodes[0].session.expect("a fresh session");
    assert_ne!(s0_new, s0);
    let mine = c.nodes[0].node.elector().unwrap().node_path().expect("a candidate again");
    assert!(c.zk.node(&mine).is_some_and(|n| n.ephemeral_owner == Some(s0_new)));
    // It knows who leads once its watch connection has the leader's proof.
    assert_eq!(c.nodes[0].node.master().state().leader, None, "no unproven hint");
    let _ = c.connect_dial(0, 1, 900);
    let leader = c.nodes[0].node.master().state().leader.expect("knows the leader");
    assert_eq!(leader.id, MasterId::new("m1"));
    assert_eq!(leader.epoch, c.nodes[1].node.master().epoch(), "the leader's real epoch");
    assert!(c.nodes[1].node.master().epoch() > epoch0, "the new leader's epoch is higher");
    assert!(!c.nodes[0].exited() && !c.nodes[1].exited());
}

/// The same deletion, but the leader hears of it first (its watch on its
/// own node) with no write in flight: it gives the leadership up the same
/// way (docs/design.md#leadership-that-cannot-act-is-given-up, "election node gone"): the session is closed in that
/// step, the master is STANDBY, and it joins again with a fresh session.
#[test]
fn a_leader_whose_election_node_vanished_closes_its_session_and_rejoins() {
    let mut c = led_by_node_0(2);
    let s0 = c.nodes[0].session.unwrap();
    let node0 = c.nodes[0].node.elector().unwrap().node_path().unwrap();
    let _ = c.register(0, 10, "w1", 1);
    c.delete_from_outside(&node0);
    let from = c.nodes[0].calls.len();
    c.pump();
    let calls = &c.nodes[0].calls[from..];
    let step = calls
        .iter()
        .find(|call| call.outputs.contains(&Output::Note(Note::Revoked)))
        .expect("the leadership is lost");
    assert!(
        step.outputs.contains(&Output::Zk(ZkCommand::CloseSession { session: s0 })),
        "the session is closed in the same step: {:?}",
        step.outputs
    );
    assert!(step.outputs.iter().any(|o| matches!(o, Output::Zk(ZkCommand::NewSession { .. }))));
    assert_eq!(step.status, Status::Standby);
    c.advance(Millis(500));
    assert_eq!(c.leaders(), vec![1]);
    let s0_new = c.nodes[0].session.expect("a fresh session");
    assert_ne!(s0_new, s0);
    let mine = c.nodes[0].node.elector().unwrap().node_path().expect("a candidate again");
    assert!(c.zk.node(&mine).is_some_and(|n| n.ephemeral_owner == Some(s0_new)));
    assert!(!c.nodes[0].exited());
}

// ----- 8 -------------------------------------------------------------------

/// An operator's `StepDown`: accepted, the session closed in the same step,
/// the standby leads; the old leader is a candidate again. In single-master
/// mode there is nobody to hand over to: refused.
#[test]
fn step_down_hands_leadership_to_the_standby() {
    let mut c = led_by_node_0(2);
    let s0 = c.nodes[0].session.unwrap();
    let epoch = c.nodes[0].node.master().epoch();
    c.hello(0, 30, Role::Client, "ops");
    let out =
        c.feed_only(0, Input::Message { conn: ConnId(30), msg: Message::StepDown { request: 7 } });
    assert_eq!(
        out.first(),
        Some(&Output::Send {
            conn: ConnId(30),
            msg: Message::RequestAccepted { epoch, request: 7 }
        })
    );
    assert!(out.contains(&Output::Zk(ZkCommand::CloseSession { session: s0 })), "{out:?}");
    assert_eq!(c.nodes[0].status(), Status::Standby);
    c.pump();
    c.advance(Millis(500));
    assert_eq!(c.leaders(), vec![1]);
    assert!(c.nodes[1].node.master().epoch() > epoch);
    assert!(c.nodes[0].node.elector().unwrap().node_path().is_some(), "a candidate again");
    assert_ne!(c.nodes[0].session, Some(s0));

    // A standby refuses.
    c.hello(0, 31, Role::Client, "ops");
    let out = c.feed(0, Input::Message { conn: ConnId(31), msg: Message::StepDown { request: 8 } });
    assert!(
        matches!(&out[..], [Output::Send { msg: Message::RequestRefused { request: 8, .. }, .. }]),
        "{out:?}"
    );
    assert_eq!(c.leaders(), vec![1]);

    // Single-master mode refuses and keeps leading.
    let mut c = Cluster::single();
    let _ = c.feed(0, Input::Start);
    assert_eq!(c.nodes[0].status(), Status::Alive);
    c.hello(0, 30, Role::Client, "ops");
    let out = c.feed(0, Input::Message { conn: ConnId(30), msg: Message::StepDown { request: 7 } });
    assert!(
        matches!(
            &out[..],
            [Output::Send { conn: ConnId(30), msg: Message::RequestRefused { request: 7, .. } }]
        ),
        "{out:?}"
    );
    assert_eq!(c.nodes[0].status(), Status::Alive);
    assert!(!c.nodes[0].exited());
}

/// A local asker's `StepDown` (the HTTP API, `Query::Command`) is the
/// operator's on a connection: answered `RequestAccepted`, the session
/// closed in the same step; a standby's answer is the refusal.
#[test]
fn a_local_askers_step_down_is_answered_as_a_connections() {
    use regent_core::ids::QueryId;
    use regent_core::node::master::{Answer, Query};
    let mut c = led_by_node_0(2);
    let s0 = c.nodes[0].session.unwrap();
    let epoch = c.nodes[0].node.master().epoch();
    let ask = Query::Command {
        msg: Message::StepDown { request: 7 },
        principal: Box::new(regent_core::token::Principal::Root),
    };
    let out = c.feed_only(0, Input::Query { query: QueryId(3), ask });
    assert_eq!(
        out.first(),
        Some(&Output::Answer {
            query: QueryId(3),
            answer: Answer::Reply(Message::RequestAccepted { epoch, request: 7 })
        })
    );
    assert!(out.contains(&Output::Zk(ZkCommand::CloseSession { session: s0 })), "{out:?}");
    assert_eq!(c.nodes[0].status(), Status::Standby);
    let ask = Query::Command {
        msg: Message::StepDown { request: 8 },
        principal: Box::new(regent_core::token::Principal::Root),
    };
    let out = c.feed_only(0, Input::Query { query: QueryId(4), ask });
    assert!(
        matches!(
            &out[..],
            [Output::Answer {
                query: QueryId(4),
                answer: Answer::Reply(Message::RequestRefused { request: 8, .. })
            }]
        ),
        "{out:?}"
    );
}

// ----- 8b ------------------------------------------------------------------

/// A standby's reply to a worker.
fn standby_reply(c: &mut Cluster, i: usize, conn: u64) -> HelloReply {
    let _ = c.feed(i, Input::Accepted { conn: ConnId(conn) });
    let out = c.feed(i, Input::Message { conn: ConnId(conn), msg: hello(Role::Worker, "w9") });
    match sends_on(&out, ConnId(conn)).as_slice() {
        [Message::HelloReply(r)] => r.clone(),
        other => panic!("expected one HelloReply, got {other:?}"),
    }
}

/// Issue 12 (docs/design.md#issue-12): hints carry the leader's real epoch, or none. The elector
/// names the leader with a sequence floor far below the epoch workers have
/// seen; a hint with it was discarded. A standby now dials the leader (its
/// watch connection) and names it only once the leader's own `HelloReply`
/// proved its epoch; when leadership moves, the old hint goes at once and
/// the new leader is named once proven.
#[test]
fn a_standby_names_the_leader_with_its_real_epoch_or_not_at_all() {
    let mut c = led_by_node_0(2);
    let epoch0 = c.nodes[0].node.master().epoch();
    let leader_addr = Addr::new("10.0.0.0:7077");
    assert!(
        c.nodes[1].dials.iter().any(|(_, a)| *a == leader_addr),
        "the standby dials the leader"
    );
    let before = standby_reply(&mut c, 1, 40);
    assert_eq!(before.leader, None, "no unproven hint");
    assert!(before.masters.contains(&leader_addr), "the address is still advertised");

    let _ = c.connect_dial(1, 0, 900);
    let after = standby_reply(&mut c, 1, 41);
    let hint = after.leader.expect("a proven hint");
    assert_eq!((hint.id, hint.addr, hint.epoch), (MasterId::new("m0"), leader_addr, epoch0));
    assert_eq!(after.epoch, epoch0, "the standby knows the leader's epoch");
    assert!(!after.leading);

    // The watch keeps probing: each probe is answered by the leader.
    let probes = count_on(&c, 1, 900, |m| matches!(m, Message::Hello(_)));
    c.advance(Millis(2_500));
    assert!(count_on(&c, 1, 900, |m| matches!(m, Message::Hello(_))) > probes, "probed again");

    // Leadership moves to node 1: it closes its watch and leads above it;
    // node 0, now a standby, names node 1 only once proven.
    c.hello(0, 30, Role::Client, "ops");
    let _ = c.feed(0, Input::Message { conn: ConnId(30), msg: Message::StepDown { request: 1 } });
    c.advance(Millis(500));
    assert_eq!(c.leaders(), vec![1]);
    assert!(c.nodes[1].closed.contains(&ConnId(900)), "the new leader closed its watch");
    assert_eq!(standby_reply(&mut c, 0, 42).leader, None, "the old hint is gone");
    let _ = c.connect_dial(0, 1, 901);
    let hint = standby_reply(&mut c, 0, 43).leader.expect("a proven hint");
    assert_eq!(hint.id, MasterId::new("m1"));
    assert!(hint.epoch > epoch0);
    assert_eq!(hint.epoch, c.nodes[1].node.master().epoch());
}

/// Issue 12 (docs/design.md#issue-12): the master set is advertised. The leader lists every master
/// of the election (the addresses in the candidates' nodes) in its replies,
/// and tells its workers when the set changes: a master that leaves the
/// election is no longer listed, one that joins is listed at once.
#[test]
fn the_leader_advertises_the_masters_of_the_election_and_their_changes() {
    let mut c = led_by_node_0(3);
    let addr = |i: usize| Addr::new(format!("10.0.0.{i}:7077"));
    let _ = c.register(0, 10, "w1", 1);
    let reply = |c: &mut Cluster, conn: u64| {
        let _ = c.feed(0, Input::Accepted { conn: ConnId(conn) });
        let out = c.feed(0, Input::Message { conn: ConnId(conn), msg: hello(Role::Client, "x") });
        match sends_on(&out, ConnId(conn)).as_slice() {
            [Message::HelloReply(r)] => r.masters.clone(),
            other => panic!("expected one HelloReply, got {other:?}"),
        }
    };
    assert_eq!(reply(&mut c, 20), vec![addr(0), addr(1), addr(2)]);

    // Master 2 stops (its session closes, its candidate node goes).
    let from = c.nodes[0].calls.len();
    let _ = c.feed(2, Input::Stop);
    c.advance(Millis(200));
    assert_eq!(reply(&mut c, 21), vec![addr(0), addr(1)], "the departed master is not listed");
    let told: Vec<Message> = c.nodes[0].calls[from..]
        .iter()
        .flat_map(|call| sends_on(&call.outputs, ConnId(10)))
        .filter(|m| matches!(m, Message::MasterChanged { .. }))
        .collect();
    let epoch = c.nodes[0].node.master().epoch();
    assert!(
        matches!(told.as_slice(), [Message::MasterChanged { epoch: e, masters, .. }]
            if *e == epoch && *masters == vec![addr(0), addr(1)]),
        "the worker is told the new set once: {told:?}"
    );
}

/// Seed 002 (docs/design.md#seed-002): a new leader contacts its recorded workers. Recovering from
/// records that carry callback addresses, it dials each (paced), and on
/// each connection says `Hello` as a master and `MasterChanged` with its
/// address and epoch, then closes it; a worker without a callback address
/// is not dialled.
#[test]
fn a_new_leader_dials_its_recorded_workers_callbacks_and_announces_itself() {
    let mut c = Cluster::single();
    let with_callback = |id: &str, cb: Option<&str>| {
        let Record::Worker(mut w) = worker_record(id, 1) else { unreachable!() };
        w.callback = cb.map(Addr::new);
        (w.id.clone(), Record::Worker(w))
    };
    let store = c.nodes[0].store.as_mut().unwrap();
    for (id, cb) in [("w1", Some("10.0.1.1:7078")), ("w2", Some("10.0.1.2:7078")), ("w3", None)] {
        let (_, r) = with_callback(id, cb);
        store.insert(r.key(), r);
    }
    let _ = c.feed(0, Input::Start);
    assert_eq!(c.nodes[0].status(), Status::Recovering);
    let dialled: Vec<Addr> = c.nodes[0].dials.iter().map(|(_, a)| a.clone()).collect();
    assert_eq!(dialled, vec![Addr::new("10.0.1.1:7078"), Addr::new("10.0.1.2:7078")]);

    let (dial, _) = c.nodes[0].dials[0].clone();
    let out = c.feed(
        0,
        Input::Dialled { dial, result: DialResult::Connected { conn: ConnId(70), peer: None } },
    );
    let epoch = c.nodes[0].node.master().epoch();
    match sends_on(&out, ConnId(70)).as_slice() {
        [Message::Hello(h), Message::MasterChanged { epoch: e, leader, .. }] => {
            assert_eq!(h.role, Role::Master);
            assert_eq!(*e, epoch);
            assert_eq!(leader.addr, Addr::new("10.0.0.0:7077"));
        }
        other => panic!("expected Hello and MasterChanged, got {other:?}"),
    }
    assert!(out.iter().any(|o| matches!(o, Output::Close { conn: ConnId(70), .. })), "{out:?}");
    // A dial that fails is noted, not retried.
    let (dial, _) = c.nodes[0].dials[1].clone();
    let failed = DialResult::Failed { reason: "connection refused".into(), refused: false };
    let out = c.feed(0, Input::Dialled { dial, result: failed });
    assert!(out.iter().any(|o| matches!(o, Output::Note(Note::PeerUnreached { .. }))), "{out:?}");
    assert!(!out.iter().any(|o| matches!(o, Output::Dial { .. })));
}

/// A damaged store does not spin the masters through the election: the
/// first time a leader gives up over it, it rejoins at once (another master
/// may be fine); each further time before it reaches ALIVE it stays out of
/// the election longer (1 s, 2 s, ... up to 30 s).
#[test]
fn a_master_that_keeps_finding_the_store_damaged_rejoins_with_a_backoff() {
    let mut c = Cluster::zookeeper(1);
    c.seed_images(&[("w-w1".into(), b"RGNT garbage".to_vec())]);
    let _ = c.feed(0, Input::Start);
    c.advance(Millis(100));
    let sessions = |c: &Cluster| {
        c.nodes[0]
            .zk_commands()
            .into_iter()
            .filter(|(_, z)| matches!(z, ZkCommand::NewSession { .. }))
            .map(|(at, _)| at)
            .collect::<Vec<_>>()
    };
    let steps = |c: &Cluster| {
        c.nodes[0].notes().iter().filter(|n| matches!(n, Note::SteppedDown { .. })).count()
    };
    assert!(steps(&c) >= 2, "it gave up over the damaged record, twice: {:?}", c.nodes[0].notes());
    c.advance(Millis(20_000));
    let at = sessions(&c);
    // Over 20 s: the first session, the rejoin at once, then 1 s, 2 s, 4 s,
    // 8 s apart — a handful, not thousands.
    assert!(at.len() <= 7, "{} sessions in 20 s: {at:?}", at.len());
    let gaps: Vec<u64> = at.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(gaps.iter().skip(2).all(|g| *g >= 1_000), "rejoins back off: {gaps:?}");
    assert!(gaps.windows(2).skip(2).all(|w| w[1] >= w[0]), "and grow: {gaps:?}");
    assert!(!c.nodes[0].exited());
}

// ----- 9 -------------------------------------------------------------------

/// A new leader's load starts with a `Sync`, so it never lists or reads a
/// lagging server and misses a record the old leader acknowledged: on its
/// first leadership (after the store path is ensured) and on a later one.
#[test]
fn a_new_leader_syncs_before_it_loads() {
    fn load_requests(c: &Cluster, i: usize, from: usize) -> Vec<ZkOp> {
        let calls = &c.nodes[i].calls[from..];
        let elected = calls
            .iter()
            .position(|call| {
                call.outputs.iter().any(|o| matches!(o, Output::Note(Note::Elected { .. })))
            })
            .expect("elected");
        calls[elected..]
            .iter()
            .flat_map(|call| call.outputs.iter())
            .filter_map(|o| match o {
                Output::Zk(ZkCommand::Request { op, .. }) if op_path(op).starts_with(STATE) => {
                    Some(op.clone())
                }
                _ => None,
            })
            .filter(|op| !matches!(op, ZkOp::Create { .. })) // the store path, ensured once
            .collect()
    }
    fn assert_sync_first(ops: &[ZkOp]) {
        assert!(matches!(&ops[0], ZkOp::Sync { path } if path == STATE), "{ops:?}");
        assert!(matches!(&ops[1], ZkOp::GetChildren { path, .. } if path == STATE), "{ops:?}");
    }
    let mut c = Cluster::zookeeper(2);
    c.seed_store(&[Record::Epoch(Epoch(3)), worker_record("a", 1)]);
    let _ = c.feed(0, Input::Start);
    let _ = c.feed(1, Input::Start);
    c.advance(Millis(100));
    assert_sync_first(&load_requests(&c, 0, 0));
    // Node 1's first leadership, then node 0's second.
    let from1 = c.nodes[1].calls.len();
    let _ = c.feed(0, Input::StepDown);
    c.advance(Millis(100));
    assert_eq!(c.leaders(), vec![1]);
    assert_sync_first(&load_requests(&c, 1, from1));
    let from0 = c.nodes[0].calls.len();
    let _ = c.feed(1, Input::StepDown);
    c.advance(Millis(100));
    assert_eq!(c.leaders(), vec![0]);
    assert_sync_first(&load_requests(&c, 0, from0));
    // Its store path is known by now: the Sync is its very first store
    // request of that leadership.
    let first = c.nodes[0].calls[from0..].iter().flat_map(|call| call.outputs.iter()).find_map(
        |o| match o {
            Output::Zk(ZkCommand::Request { op, .. }) if op_path(op).starts_with(STATE) => {
                Some(op.clone())
            }
            _ => None,
        },
    );
    assert!(matches!(first, Some(ZkOp::Sync { .. })), "{first:?}");
}

// ----- 10 ------------------------------------------------------------------

/// One step of a generated schedule.
#[derive(Clone, Debug)]
enum Step {
    /// A worker (re)registers (connecting first if it has no connection).
    Register { node: u8, worker: u8 },
    /// A worker heartbeats on its connection.
    Heartbeat { node: u8, worker: u8 },
    /// A subscriber connects and subscribes (dropping its old connection).
    Subscribe { node: u8, sub: u8 },
    /// A subscriber's connection drops.
    Unsubscribe { node: u8, sub: u8 },
    /// The node's ZooKeeper connection drops (until `Reconnect` or a while).
    DropLink { node: u8, for_ms: u16 },
    /// The node's client reconnects.
    Reconnect { node: u8 },
    /// The next store write's reply is lost (applied or not).
    LoseWrite { node: u8, applied: bool },
    /// The server expires the node's session.
    Expire { node: u8 },
    /// An operator asks the node to step down (hand leadership over).
    Handover { node: u8 },
    /// Time passes; timers fire.
    Advance { ms: u16 },
    /// The node's process stops for a while, then runs again.
    Pause { node: u8, ms: u16 },
}

impl Arbitrary for Step {
    fn arbitrary(g: &mut Gen) -> Self {
        let node = u8::arbitrary(g) % 2;
        let peer = u8::arbitrary(g) % 3;
        let ms = u16::arbitrary(g) % 15_000;
        match u8::arbitrary(g) % 16 {
            0 | 1 => Step::Register { node, worker: peer },
            2 | 3 => Step::Heartbeat { node, worker: peer },
            4 => Step::Subscribe { node, sub: peer },
            5 => Step::Unsubscribe { node, sub: peer },
            6 => Step::DropLink { node, for_ms: ms % 4_000 },
            7 => Step::Reconnect { node },
            8 => Step::LoseWrite { node, applied: bool::arbitrary(g) },
            9 => Step::Expire { node },
            10 => Step::Handover { node },
            11 => Step::Pause { node, ms },
            _ => Step::Advance { ms },
        }
    }
}

/// The peers' side of the schedule: which connection each fake peer uses.
struct Peers {
    next_conn: u64,
    conns: std::collections::BTreeMap<(usize, char, u8), u64>,
}

impl Peers {
    /// The live connection of peer (`kind`, `n`) to node `i`, opening one
    /// (with `Hello`) if it has none or the node closed it.
    fn conn(&mut self, c: &mut Cluster, i: usize, kind: char, n: u8) -> u64 {
        if let Some(conn) = self.conns.get(&(i, kind, n)) {
            if !c.nodes[i].closed.contains(&ConnId(*conn)) {
                return *conn;
            }
        }
        self.next_conn += 1;
        let conn = self.next_conn;
        let (role, name) = match kind {
            'w' => (Role::Worker, format!("w{n}")),
            _ => (Role::Subscriber, format!("app-{n}")),
        };
        c.hello(i, conn, role, &name);
        self.conns.insert((i, kind, n), conn);
        conn
    }

    fn drop_conn(&mut self, c: &mut Cluster, i: usize, kind: char, n: u8) {
        if let Some(conn) = self.conns.remove(&(i, kind, n)) {
            if !c.nodes[i].closed.contains(&ConnId(conn)) {
                let how = Ended::Failed;
                let _ =
                    c.feed(i, Input::Closed { conn: ConnId(conn), how, reason: "reset".into() });
            }
        }
    }
}

fn run_schedule(n: usize, steps: &[Step]) -> Result<(), String> {
    let mut c = Cluster::zookeeper(n);
    c.check_timers = true;
    let mut peers = Peers { next_conn: 100, conns: Default::default() };
    for i in 0..n {
        let _ = c.feed(i, Input::Start);
    }
    let check = |c: &Cluster, step: &str| -> Result<(), String> {
        if let Some(v) = c.violations.first() {
            return Err(format!("during {step}: {v}"));
        }
        for (i, node) in c.nodes.iter().enumerate() {
            let missing = node.missing_timers();
            if !missing.is_empty() {
                return Err(format!(
                    "after {step}: node {i} ({:?}) lacks {missing:?}; deadlines {:?}",
                    node.status(),
                    node.node.master().deadlines().collect::<Vec<_>>()
                ));
            }
            if node.exited() {
                return Err(format!("after {step}: node {i} exited"));
            }
        }
        Ok(())
    };
    check(&c, "start")?;
    for step in steps {
        let node = |k: &u8| usize::from(*k) % n;
        match step {
            Step::Register { node: k, worker } => {
                let i = node(k);
                let conn = peers.conn(&mut c, i, 'w', *worker);
                let msg = register_msg(&format!("w{worker}"), 1);
                let _ = c.feed(i, Input::Message { conn: ConnId(conn), msg });
            }
            Step::Heartbeat { node: k, worker } => {
                let i = node(k);
                if let Some(conn) = peers.conns.get(&(i, 'w', *worker)).copied() {
                    if !c.nodes[i].closed.contains(&ConnId(conn)) {
                        let _ = c.heartbeat(i, conn, 1);
                    }
                }
            }
            Step::Subscribe { node: k, sub } => {
                let i = node(k);
                peers.drop_conn(&mut c, i, 's', *sub);
                let conn = peers.conn(&mut c, i, 's', *sub);
                let msg = subscribe_msg(u64::from(*sub) + 1);
                let _ = c.feed(i, Input::Message { conn: ConnId(conn), msg });
            }
            Step::Unsubscribe { node: k, sub } => peers.drop_conn(&mut c, node(k), 's', *sub),
            Step::DropLink { node: k, for_ms } => {
                let until = c.now + Millis(u64::from(*for_ms));
                c.disconnect(node(k), Some(until));
                c.pump();
            }
            Step::Reconnect { node: k } => c.reconnect(node(k)),
            Step::LoseWrite { node: k, applied } => c.lose_next_reply(
                node(k),
                *applied,
                Box::new(|op: &ZkOp| matches!(op, ZkOp::Multi(_))),
            ),
            Step::Expire { node: k } => c.expire(node(k)),
            Step::Handover { node: k } => {
                let _ = c.feed(node(k), Input::StepDown);
            }
            Step::Advance { ms } => c.advance(Millis(u64::from(*ms))),
            Step::Pause { node: k, ms } => {
                c.pause(node(k));
                c.advance(Millis(u64::from(*ms)));
                c.unpause(node(k));
                // Running again: the first thing it gets is a due Tick.
                if c.nodes[node(k)].node.poll_timeout().is_some_and(|t| t <= c.now) {
                    let _ = c.feed(node(k), Input::Tick);
                }
            }
        }
        check(&c, &format!("{step:?} at {}", c.now))?;
    }
    // Let everything settle: the property holds at rest too.
    c.advance(Millis(30_000));
    check(&c, "the final advance")
}

/// docs/design.md#time-is-an-input for the node: whenever a master timer's condition holds
/// (leading: sweep and framework heartbeat; recovering: the recovery
/// deadline), the node's one deadline table holds a deadline for it — after
/// every `handle` call, over random schedules of registrations, heartbeats,
/// subscriptions, ZooKeeper drops, lost write replies, expiry, step-downs,
/// pauses and time.
#[test]
fn timers_exist_whenever_their_condition_holds() {
    fn prop(two: bool, steps: Vec<Step>) -> TestResult {
        let n = if two { 2 } else { 1 };
        match run_schedule(n, &steps) {
            Ok(()) => TestResult::passed(),
            Err(e) => TestResult::error(e),
        }
    }
    QuickCheck::new()
        .tests(200)
        .rng(Gen::new(40))
        .quickcheck(prop as fn(bool, Vec<Step>) -> TestResult);
}

// ----- fast takeover and the acting lease (docs/design.md#issue-12) -------------------------

/// Answers node `i`'s probes, oldest first, with `result` every 25 ms until
/// it asks for none; returns how many it answered.
fn answer_probes(c: &mut Cluster, i: usize, result: ProbeResult) -> usize {
    let mut answered = 0;
    for _ in 0..20 {
        let probes = std::mem::take(&mut c.nodes[i].probes);
        if probes.is_empty() {
            c.advance(Millis(25));
            if c.nodes[i].probes.is_empty() {
                break;
            }
            continue;
        }
        for (probe, _) in probes {
            answered += 1;
            let _ = c.feed(i, Input::Probed { probe, result: result.clone() });
        }
    }
    answered
}

fn deposition_notes(c: &Cluster, i: usize) -> Vec<Note> {
    c.nodes[i]
        .notes()
        .into_iter()
        .filter(|n| matches!(n, Note::Deposing { .. } | Note::Deposed { .. }))
        .collect()
}

/// kill -9 of the leader: its watch connection ends by the peer and its
/// port refuses, so the standby deletes the leader's election node and
/// leads within milliseconds, while the dead leader's session (10 s) is
/// still alive at the server.
#[test]
fn a_standby_deposes_a_leader_whose_process_died_and_leads_within_milliseconds() {
    let mut c = led_by_node_0(2);
    let _ = c.connect_dial(1, 0, 900);
    let s0 = c.nodes[0].session.unwrap();
    c.pause(0); // the process is gone; its session is not
    let killed = c.now;
    let _ =
        c.feed(1, Input::Closed { conn: ConnId(900), how: Ended::ByPeer, reason: "reset".into() });
    // The first probe waits one spacing (a killed process's listening
    // socket closes after its connections).
    assert!(c.nodes[1].probes.is_empty(), "no probe at the very instant");
    c.advance(Millis(25));
    assert_eq!(
        c.nodes[1].probes.iter().map(|(_, a)| a.clone()).collect::<Vec<_>>(),
        vec![Addr::new("10.0.0.0:7077")],
        "the leader's address is probed (the runtime gave no socket address)"
    );
    assert_eq!(answer_probes(&mut c, 1, ProbeResult::Refused), 3);
    c.advance(Millis(100));
    let now = c.now;
    assert!(c.nodes[1].node.elector().unwrap().is_acting(now), "the standby leads");
    assert_eq!(c.nodes[1].status(), Status::Alive);
    assert!(c.zk.is_alive(s0), "the dead leader's session has not expired");
    assert!(c.now.since(killed) < Millis(300), "took {}", c.now.since(killed));
    match deposition_notes(&c, 1).as_slice() {
        [Note::Deposing { leader, evidence }, Note::Deposed { outcome: DeposeOutcome::Deleted { .. }, .. }] =>
        {
            assert_eq!(*leader, MasterId::new("m0"));
            assert!(evidence.contains("refused 3 connections"), "{evidence}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(c.nodes[1].node.metrics().takeovers, 1);
}

/// A watch connection that timed out (a frozen leader, a partition) is
/// never taken for a dead process; nor is one whose port still accepts
/// (a restarted process, a proxy that came back), nor one refused for less
/// than 50 ms.
#[test]
fn a_timeout_or_a_port_that_accepts_deposes_nobody() {
    let mut c = led_by_node_0(2);
    let _ = c.connect_dial(1, 0, 900);
    let _ = c
        .feed(1, Input::Closed { conn: ConnId(900), how: Ended::TimedOut, reason: "reset".into() });
    assert!(c.nodes[1].probes.is_empty(), "a timeout is not probed");

    c.advance(Millis(2_000));
    let _ = c.connect_dial(1, 0, 901);
    let _ =
        c.feed(1, Input::Closed { conn: ConnId(901), how: Ended::ByPeer, reason: "reset".into() });
    c.advance(Millis(25));
    let (probe, _) = c.nodes[1].probes.remove(0);
    let _ = c.feed(1, Input::Probed { probe, result: ProbeResult::Refused });
    c.advance(Millis(25));
    let (probe, _) = c.nodes[1].probes.remove(0);
    let _ = c.feed(1, Input::Probed { probe, result: ProbeResult::Accepted });
    c.advance(Millis(500));
    assert!(c.nodes[1].probes.is_empty(), "no more probes once one was accepted");
    assert!(deposition_notes(&c, 1).is_empty());
    assert_eq!(c.leaders(), vec![0]);
}

fn group(slots: u32) -> Message {
    Message::DeclareGroup {
        request: 1,
        spec: GroupSpec {
            group: "g".into(),
            slots,
            command: vec!["true".into()],
            env: Vec::new(),
            cores: 1,
            memory_mb: 64,
            policy: Default::default(),
            launch: Default::default(),
        },
    }
}

fn launches_on(c: &Cluster, i: usize, conn: u64) -> Vec<Millis> {
    c.nodes[i]
        .sends_to(conn)
        .into_iter()
        .filter(|(_, m)| matches!(m, Message::LaunchExecutor { .. }))
        .map(|(at, _)| at)
        .collect()
}

/// A new leader's first command leaves no earlier than 1.1 L + 10 ms after
/// its election, and only after a sync + exists on its own node confirmed
/// it; registrations and other replies go out at once.
#[test]
fn a_new_leaders_first_launch_waits_for_its_acting_lease() {
    let mut c = Cluster::zookeeper(1);
    let _ = c.feed(0, Input::Start);
    let elected = c.now;
    assert_eq!(c.nodes[0].status(), Status::Alive);
    let _ = c.register(0, 10, "w1", 1);
    assert_eq!(count_on(&c, 0, 10, is_registered), 1, "registration is not held");
    let _ = c.subscribe(0, 20, 1);
    let _ = c.feed(0, Input::Message { conn: ConnId(20), msg: group(2) });
    assert!(launches_on(&c, 0, 10).is_empty(), "no command before the wait is over");
    assert_eq!(c.nodes[0].node.metrics().commands_held, 2);
    c.advance(Millis(300));
    let launches = launches_on(&c, 0, 10);
    assert_eq!(launches.len(), 2, "both launches went out once confirmed");
    let wait = Millis(120);
    assert!(launches[0] >= elected + wait, "first launch at {} (elected {elected})", launches[0]);
    // The confirmation: a sync, then an exists with a watch on the own
    // node, sent before the first launch and less than L before it.
    let node = c.nodes[0].node.elector().unwrap().node_path().unwrap();
    let confirm_at = c.nodes[0]
        .zk_commands()
        .into_iter()
        .filter_map(|(at, cmd)| match cmd {
            ZkCommand::Request { op: ZkOp::Exists { path, .. }, .. } if path == node => Some(at),
            _ => None,
        })
        .filter(|at| *at <= launches[0])
        .max()
        .expect("a confirmation before the first launch");
    assert!(launches[0] < confirm_at + Millis(100));
}

/// `n` nodes led by node 0 for a second, with worker `w1` on conn 10 and a
/// framework on conn 20.
fn settled_with_worker_and_framework(n: usize) -> Cluster {
    let mut c = led_by_node_0(n);
    c.advance(Millis(1_000));
    let _ = c.register(0, 10, "w1", 1);
    let _ = c.subscribe(0, 20, 1);
    c
}

/// Commands held while the acting lease cannot be confirmed (ZooKeeper
/// answers nothing) are never sent once the leader's node is deleted: the
/// successor decides afresh.
#[test]
fn commands_held_when_the_leadership_ends_are_never_sent() {
    let mut c = settled_with_worker_and_framework(2);
    c.hold(0, Box::new(|op| matches!(op, ZkOp::Sync { .. })));
    let _ = c.feed(0, Input::Message { conn: ConnId(20), msg: group(1) });
    c.advance(Millis(200));
    assert!(launches_on(&c, 0, 10).is_empty(), "not confirmed: held");
    assert_eq!(c.nodes[0].node.held_frames(), 1);
    let node0 = c.nodes[0].node.elector().unwrap().node_path().unwrap();
    c.delete_from_outside(&node0);
    c.release(0);
    c.advance(Millis(500));
    assert!(launches_on(&c, 0, 10).is_empty(), "a held command of a lost leadership never leaves");
    assert_eq!(c.nodes[0].node.metrics().commands_dropped, 1);
    assert_eq!(c.nodes[0].node.held_frames(), 0);
    assert_eq!(c.leaders(), vec![1]);
}

// ----- the acting lease with ZooKeeper far away (docs/design.md#issue-20) ----------------

/// A ZooKeeper-mode leader `one_way` away from its ensemble (every request
/// and every reply take that long), with worker `w1` on conn 10 and a
/// framework on conn 20 declaring a group of 2: the time of each launch.
fn launches_with_zookeeper_away(
    one_way: Millis,
    tweak: impl Fn(&mut regent_core::elector::Config),
) -> (Cluster, Vec<Millis>) {
    let mut config = zk_config(0);
    if let Leadership::Zookeeper(e) = &mut config.leadership {
        tweak(e);
    }
    let mut c = Cluster::with_configs(vec![config]);
    c.nodes[0].one_way = one_way;
    let _ = c.feed(0, Input::Start);
    c.advance(Millis(40 * one_way.0 + 500));
    assert_eq!(c.nodes[0].status(), Status::Alive);
    let _ = c.register(0, 10, "w1", 1);
    c.advance(Millis(4 * one_way.0 + 100));
    assert_eq!(count_on(&c, 0, 10, is_registered), 1, "registered");
    let _ = c.subscribe(0, 20, 1);
    c.advance(Millis(4 * one_way.0 + 100));
    let _ = c.feed(0, Input::Message { conn: ConnId(20), msg: group(2) });
    c.advance(Millis(12_000));
    let launches = launches_on(&c, 0, 10);
    (c, launches)
}

/// The node data of the leader's election node, as a successor reads it.
fn leader_node_data(c: &Cluster) -> regent_core::elector::CandidateData {
    let path = c.nodes[0].node.elector().unwrap().node_path().unwrap();
    let data = &c.zk.node(&path).expect("the leader's node").data;
    regent_core::elector::CandidateData::decode(data).expect("candidate data")
}

/// Issue 20 (docs/design.md#issue-20), scenario 7: ZooKeeper 150 ms away (a 300 ms round trip). The
/// acting lease used to be 100 ms whatever the round trip, so no
/// confirmation ever came back in time and no command was ever sent (the
/// framework's executors stayed LAUNCHING). The candidate now chooses its
/// lease from the round trip it measured when it created its node
/// (100 ms + 2 × 300 ms) and writes it there: the launches go out.
#[test]
fn commands_flow_with_zookeeper_150_ms_away() {
    let (c, launches) = launches_with_zookeeper_away(Millis(150), |_| {});
    assert_eq!(launches.len(), 2, "both launches went out");
    let e = c.nodes[0].node.elector().unwrap();
    assert_eq!(e.acting_lease(), Millis(700));
    assert_eq!(leader_node_data(&c).acting_lease, Millis(700), "written in the node");
    assert_eq!(c.nodes[0].node.held_frames(), 0);
}

/// The same with a 1 s round trip (ZooKeeper 500 ms away): slower, but the
/// commands flow (the lease is 2.1 s).
#[test]
fn commands_flow_with_a_one_second_zookeeper_round_trip() {
    let (c, launches) = launches_with_zookeeper_away(Millis(500), |_| {});
    assert_eq!(launches.len(), 2, "both launches went out");
    assert_eq!(c.nodes[0].node.elector().unwrap().acting_lease(), Millis(2_100));
    assert_eq!(leader_node_data(&c).acting_lease, Millis(2_100));
}

/// A leader that cannot command says why, once, after a few seconds, and
/// `/metrics` shows what waits and for how long. (Here the lease may not
/// grow: `acting_lease_max` is 100 ms.)
#[test]
fn a_leader_that_cannot_command_says_why_once() {
    let (c, launches) = launches_with_zookeeper_away(Millis(150), |e| {
        e.acting_lease_max = Millis(100);
    });
    assert!(launches.is_empty(), "a 300 ms round trip never confirms a 100 ms lease");
    let stalls: Vec<Note> = c.nodes[0]
        .notes()
        .into_iter()
        .filter(|n| matches!(n, Note::CommandsStalled { .. }))
        .collect();
    assert_eq!(stalls.len(), 1, "said once: {stalls:?}");
    match &stalls[0] {
        Note::CommandsStalled { held, waited, reason } => {
            assert_eq!(*held, 2);
            assert!(*waited >= Millis(5_000), "{waited}");
            assert!(
                reason.contains("acting lease not confirmed: ZooKeeper round trip")
                    && reason.contains("> L 100 ms"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
    let m = c.nodes[0].node.metrics();
    assert_eq!(m.commands_waiting, 2);
    assert!(m.oldest_command_wait_ms >= 11_000, "{}", m.oldest_command_wait_ms);
}

/// A leader whose round trip grows past its lease after its node was
/// created (ZooKeeper moved 150 ms away) gives the leadership up, saying
/// why, and joins again with a node whose lease fits; then the commands
/// flow.
#[test]
fn a_leader_whose_round_trip_outgrew_its_lease_rejoins_with_a_larger_one() {
    let mut c = Cluster::zookeeper(1);
    let _ = c.feed(0, Input::Start);
    c.advance(Millis(300));
    assert_eq!(c.nodes[0].node.elector().unwrap().acting_lease(), Millis(100));
    c.nodes[0].one_way = Millis(150);
    c.advance(Millis(15_000));
    let reasons: Vec<String> = c.nodes[0]
        .notes()
        .into_iter()
        .filter_map(|n| match n {
            Note::SteppedDown { reason } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains("outgrew the acting lease"), "{}", reasons[0]);
    assert_eq!(c.nodes[0].status(), Status::Alive, "leads again");
    assert!(c.nodes[0].node.elector().unwrap().acting_lease() >= Millis(700));
    let _ = c.register(0, 10, "w1", 1);
    c.advance(Millis(1_000));
    let _ = c.subscribe(0, 20, 1);
    c.advance(Millis(1_000));
    let _ = c.feed(0, Input::Message { conn: ConnId(20), msg: group(1) });
    c.advance(Millis(5_000));
    assert_eq!(launches_on(&c, 0, 10).len(), 1, "the launch went out");
}

/// A moment of slow answers (a busy host, a blip) is not a far ZooKeeper:
/// the leader keeps its leadership, and its held commands go out once the
/// answers are quick again.
#[test]
fn a_moment_of_slow_zookeeper_answers_keeps_the_leadership() {
    let mut c = settled_with_worker_and_framework(1);
    c.nodes[0].one_way = Millis(150);
    let _ = c.feed(0, Input::Message { conn: ConnId(20), msg: group(1) });
    c.advance(Millis(1_200));
    c.nodes[0].one_way = Millis::ZERO;
    c.advance(Millis(2_000));
    assert!(
        !c.nodes[0].notes().iter().any(|n| matches!(n, Note::SteppedDown { .. })),
        "no step-down for a moment of slowness"
    );
    assert_eq!(launches_on(&c, 0, 10).len(), 1, "the launch went out");
}

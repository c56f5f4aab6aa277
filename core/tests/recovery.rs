//! Master leadership and recovery (docs/design.md#issue-4): the epoch rule, RECOVERING,
//! the removal limit, suspension and revocation.

mod common;

use common::*;
use regent_core::master::{self, Master, Status, WorkerState};
use regent_core::protocol::{Message, RegisterWorker};
use regent_core::states::MasterStatus;
use regent_core::store::{Record, RecordKey, WorkerRecord};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::{ConnId, Epoch, Incarnation, Millis, WorkerId};

fn worker_record(i: u64) -> Record {
    Record::Worker(WorkerRecord {
        dead: false,
        id: WorkerId(format!("w{i}")),
        incarnation: Incarnation(100 + i),
        cores: 4,
        memory_mb: 1024,
        callback: None,
        maintenance: None,
    })
}

fn register(i: u64) -> Message {
    Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: WorkerId(format!("w{i}")),
        incarnation: Incarnation(100 + i),
        cores: 4,
        memory_mb: 1024,
        executors: vec![],
        epoch_seen: Epoch(0),
        launch_seen: 0,
        attributes: vec![],
    })
}

/// Elects `m` over `records`, returns what it did once the epoch is durable.
fn elect_over(
    m: &mut Master,
    now: Millis,
    floor: u64,
    clock: u64,
    records: Vec<Record>,
) -> Vec<master::Action> {
    let out = m.handle(now, master::Event::Elected { floor: Epoch(floor), clock });
    assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
    assert_eq!(
        m.status(),
        Status::Standby,
        "an elected master does not act before its epoch is durable"
    );
    let out = m.handle(now, master::Event::Store(StoreEvent::Loaded { records }));
    match &out[..] {
        [master::Action::Store(StoreCommand::Persist { record: Record::Epoch(_), .. })] => {}
        other => panic!("the epoch must be written before anything else: {other:?}"),
    }
    persist_all(m, now, &out)
}

fn chosen_epoch(m: &mut Master, floor: u64, clock: u64, stored: Option<u64>) -> Epoch {
    let records = stored.map(|e| vec![Record::Epoch(Epoch(e))]).unwrap_or_default();
    let _ = elect_over(m, Millis(0), floor, clock, records);
    let e = m.epoch();
    let _ = m.handle(Millis(0), master::Event::Revoked);
    e
}

#[test]
fn epoch_is_max_of_durable_plus_one_floor_and_clock_and_never_reused() {
    let mut m = master("a");
    assert_eq!(chosen_epoch(&mut m, 3, 0, Some(7)), Epoch(8));
    assert_eq!(chosen_epoch(&mut m, 30, 0, Some(7)), Epoch(30));
    assert_eq!(chosen_epoch(&mut m, 3, 1_700_000_000_000, Some(7)), Epoch(1_700_000_000_000));
    // A wiped store and an old floor cannot bring the epoch back below what
    // the clock term gives: a restart in `none` mode still moves forward.
    let first = chosen_epoch(&mut m, 1, 1_700_000_000_000, None);
    let second = chosen_epoch(&mut m, 1, 1_700_000_000_500, None);
    assert!(second > first);
    // Re-election over the store the last leadership wrote.
    let mut store_epoch = None;
    let mut seen = Vec::new();
    for _ in 0..5 {
        let e = chosen_epoch(&mut m, 1, 0, store_epoch);
        assert!(!seen.contains(&e), "epoch {e} reused");
        seen.push(e);
        store_epoch = Some(e.0);
    }
}

#[test]
fn recovery_completes_when_all_recovered_workers_report() {
    let mut m = master("a");
    let _ = connect_worker(&mut m, Millis(0), 1, "w1");
    let _ = connect_worker(&mut m, Millis(0), 2, "w2");
    let out = elect_over(
        &mut m,
        Millis(0),
        5,
        0,
        vec![Record::Epoch(Epoch(4)), worker_record(1), worker_record(2)],
    );
    let sends = m_sends(&out);
    assert_eq!(sends.len(), 2);
    assert!(sends
        .iter()
        .all(|(_, msg)| matches!(msg, Message::MasterChanged { epoch: Epoch(5), .. })));
    assert_eq!(m.status(), Status::Recovering);
    assert!(m.workers().iter().all(|w| w.state == WorkerState::Unknown));
    // A recovered worker reports: acknowledged at once, its record is durable.
    let acts = m.handle(Millis(10), master::Event::Message { conn: ConnId(1), msg: register(1) });
    assert!(!acts.iter().any(|a| matches!(a, master::Action::Store(StoreCommand::Persist { .. }))));
    assert!(matches!(
        &m_sends(&acts)[..],
        [(ConnId(1), Message::Registered { epoch: Epoch(5), duplicate: false, .. })]
    ));
    assert_eq!(m.status(), Status::Recovering);
    let _ = deliver_to_master(&mut m, Millis(20), 2, register(2));
    assert_eq!(m.status(), Status::Alive, "recovery ends when every recovered worker answered");
    assert!(m.workers().iter().all(|w| w.state == WorkerState::Alive));
    // The recovery timer firing later changes nothing.
    let out = m.handle(Millis(20_000), master::Event::Timer(master::Timer::Recovery));
    assert!(out.is_empty());
}

#[test]
fn recovery_timeout_removes_few_silent_workers() {
    let mut m = master("a");
    let records = (1..=4).map(worker_record).collect();
    let _ = elect_over(&mut m, Millis(0), 1, 0, records);
    for i in 1..=3 {
        let _ = connect_worker(&mut m, Millis(0), i, &format!("w{i}"));
        let _ = deliver_to_master(&mut m, Millis(1), i, register(i));
    }
    assert_eq!(m.status(), Status::Recovering);
    let out = m.handle(Millis(10_000), master::Event::Timer(master::Timer::Recovery));
    assert_eq!(m.status(), Status::Alive);
    let dead: Vec<_> = out
        .iter()
        .filter_map(|a| match a {
            master::Action::Store(StoreCommand::Unpersist {
                key: RecordKey::Worker(w),
                incarnation,
                ..
            }) => Some((w.clone(), *incarnation)),
            _ => None,
        })
        .collect();
    assert_eq!(dead, vec![(WorkerId::new("w4"), Some(Incarnation(104)))]);
    assert_eq!(m.metrics().unknown_workers, 0);
}

#[test]
fn removal_limit_exceeded_keeps_workers_unknown_until_an_operator_removes_them() {
    let mut m = master("a");
    let records = (1..=4).map(worker_record).collect();
    let _ = elect_over(&mut m, Millis(0), 1, 0, records);
    let _ = connect_worker(&mut m, Millis(0), 1, "w1");
    let _ = deliver_to_master(&mut m, Millis(1), 1, register(1));
    // 3 of 4 silent (75 % > 50 %): more likely a partition than dead machines.
    let out = m.handle(Millis(10_000), master::Event::Timer(master::Timer::Recovery));
    assert!(!out
        .iter()
        .any(|a| matches!(a, master::Action::Store(StoreCommand::Unpersist { .. }))));
    assert_eq!(m.status(), Status::Alive, "the master becomes ALIVE either way");
    assert_eq!(m.metrics().unknown_workers, 3);
    let unknown: Vec<_> = m
        .workers()
        .iter()
        .filter(|w| w.state == WorkerState::Unknown)
        .map(|w| w.id.clone())
        .collect();
    assert_eq!(unknown.len(), 3);
    // The DEAD sweep never removes them silently.
    let out = m.handle(Millis(1_000_000), master::Event::Timer(master::Timer::Sweep));
    assert!(!out.iter().any(|a| matches!(a, master::Action::Store(StoreCommand::Unpersist { key: RecordKey::Worker(w), .. }) if w.as_str() != "w1")));
    assert_eq!(m.workers().iter().filter(|w| w.state == WorkerState::Unknown).count(), 3);
    // An operator removes one.
    let out =
        m.handle(Millis(1_000_001), master::Event::RemoveWorker { worker: WorkerId::new("w2") });
    assert!(
        matches!(&out[..], [master::Action::Store(StoreCommand::Unpersist { key: RecordKey::Worker(w), incarnation: Some(Incarnation(102)), .. })] if w.as_str() == "w2")
    );
    assert_eq!(m.metrics().unknown_workers, 2);
    // A late worker that comes back is welcomed.
    let _ = connect_worker(&mut m, Millis(1_000_002), 3, "w3");
    let replies = deliver_to_master(&mut m, Millis(1_000_002), 3, register(3));
    assert!(matches!(&replies[..], [(_, Message::Registered { .. })]));
}

#[test]
fn revoked_mid_recovery_drops_everything_and_closes_connections() {
    let mut m = master("a");
    let _ = connect_worker(&mut m, Millis(0), 1, "w1");
    let _ = elect_over(&mut m, Millis(0), 1, 0, vec![worker_record(1), worker_record(2)]);
    assert_eq!(m.status(), Status::Recovering);
    let out = m.handle(Millis(5), master::Event::Revoked);
    assert_eq!(
        out,
        vec![master::Action::Close { conn: ConnId(1), reason: "leadership revoked".into() }]
    );
    assert_eq!(m.status(), Status::Standby);
    assert!(m.workers().is_empty());
    assert!(m.handle(Millis(10_000), master::Event::Timer(master::Timer::Recovery)).is_empty());
    assert!(m.handle(Millis(10_000), master::Event::Timer(master::Timer::Sweep)).is_empty());
    // A registration now meets a standby.
    let _ = connect_worker(&mut m, Millis(6), 2, "w1");
    let replies = deliver_to_master(&mut m, Millis(6), 2, register(1));
    assert!(matches!(&replies[..], [(_, Message::NotLeader { .. })]));
}

#[test]
fn suspended_then_resumed_declares_no_worker_dead() {
    let mut m = master("a");
    let _ = elect(&mut m, Millis(0), 1);
    let _ = connect_worker(&mut m, Millis(0), 1, "w1");
    let _ = deliver_to_master(&mut m, Millis(0), 1, register(1));
    let _ = m.handle(Millis(1_000), master::Event::Suspended);
    assert_eq!(m.status(), Status::Suspended);
    // Registrations are retryable, heartbeats still accepted.
    let _ = connect_worker(&mut m, Millis(1_000), 2, "w2");
    let out = m.handle(Millis(1_000), master::Event::Message { conn: ConnId(2), msg: register(2) });
    assert_eq!(m_sends(&out), vec![(ConnId(2), Message::LeaderSuspended { epoch: Epoch(1) })]);
    assert!(
        !out.iter().any(|a| matches!(a, master::Action::Store(StoreCommand::Persist { .. }))),
        "no store writes while suspended"
    );
    let hb = Message::WorkerHeartbeat { incarnation: Incarnation(101) };
    let out = m.handle(Millis(2_000), master::Event::Message { conn: ConnId(1), msg: hb.clone() });
    assert_eq!(m_sends(&out), vec![(ConnId(1), Message::HeartbeatAck { epoch: Epoch(1) })]);
    // Its Hello replies do not claim leadership.
    let reply = connect_worker(&mut m, Millis(2_000), 3, "w3");
    assert!(matches!(reply, Message::HelloReply(r) if !r.leading));
    // A long suspension: no DEAD sweep.
    let out = m.handle(Millis(60_000), master::Event::Timer(master::Timer::Sweep));
    assert!(!out
        .iter()
        .any(|a| matches!(a, master::Action::Store(StoreCommand::Unpersist { .. }))));
    // Resumed: every worker gets a fresh worker_timeout.
    let _ = m.handle(Millis(60_000), master::Event::Resumed);
    assert_eq!(m.status(), Status::Alive);
    let out = m.handle(Millis(65_000), master::Event::Timer(master::Timer::Sweep));
    assert!(
        !out.iter().any(|a| matches!(a, master::Action::Store(StoreCommand::Unpersist { .. }))),
        "no worker declared DEAD for the suspension"
    );
    assert_eq!(m.workers()[0].state, WorkerState::Alive);
}

#[test]
fn suspension_belongs_to_an_election_and_shows_once_the_epoch_is_durable() {
    let mut m = master("a");
    let _ = connect_worker(&mut m, Millis(0), 1, "w1");
    // A standby has nothing to suspend: it stays a standby.
    let _ = m.handle(Millis(0), master::Event::Suspended);
    assert_eq!(m.status(), Status::Standby);
    let out = m.handle(Millis(0), master::Event::Message { conn: ConnId(1), msg: register(1) });
    assert!(matches!(&m_sends(&out)[..], [(_, Message::NotLeader { .. })]));
    // Elected, then suspended while loading: not leading yet (STANDBY), but
    // its refusals say it may resume.
    let out = m.handle(Millis(1), master::Event::Elected { floor: Epoch(5), clock: 0 });
    assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
    let _ = m.handle(Millis(1), master::Event::Suspended);
    assert_eq!(m.status(), Status::Standby);
    let out = m.handle(Millis(1), master::Event::Message { conn: ConnId(1), msg: register(1) });
    assert_eq!(m_sends(&out), vec![(ConnId(1), Message::LeaderSuspended { epoch: Epoch(0) })]);
    // It goes on loading and making its epoch durable while suspended, and
    // shows SUSPENDED from then on; it acts only once resumed.
    let out = m.handle(Millis(2), master::Event::Store(StoreEvent::Loaded { records: vec![] }));
    let _ = persist_all(&mut m, Millis(2), &out);
    assert_eq!(m.epoch(), Epoch(5));
    assert_eq!(m.status(), Status::Suspended);
    let out = m.handle(Millis(3), master::Event::Message { conn: ConnId(1), msg: register(1) });
    assert_eq!(m_sends(&out), vec![(ConnId(1), Message::LeaderSuspended { epoch: Epoch(5) })]);
    let _ = m.handle(Millis(4), master::Event::Resumed);
    assert_eq!(m.status(), Status::Alive);
    // Revoked: a standby again, and a later election starts unsuspended.
    let _ = m.handle(Millis(5), master::Event::Revoked);
    assert_eq!(m.status(), Status::Standby);
    let _ = elect(&mut m, Millis(6), 6);
    assert_eq!(m.status(), Status::Alive);
}

#[test]
fn a_leader_that_cannot_make_state_durable_abdicates() {
    let mut m = master("a");
    let _ = m.handle(Millis(0), master::Event::Elected { floor: Epoch(1), clock: 0 });
    let out = m.handle(
        Millis(0),
        master::Event::Store(StoreEvent::LoadFailed { reason: "w-x.rec: CRC mismatch".into() }),
    );
    assert!(
        matches!(&out[..], [master::Action::Abdicate { reason }] if reason.contains("CRC mismatch"))
    );
    assert_eq!(m.status(), Status::Standby);
    // The epoch write itself failing.
    let _ = m.handle(Millis(0), master::Event::Elected { floor: Epoch(1), clock: 0 });
    let out = m.handle(Millis(0), master::Event::Store(StoreEvent::Loaded { records: vec![] }));
    let write = match &out[..] {
        [master::Action::Store(StoreCommand::Persist { write, .. })] => *write,
        other => panic!("{other:?}"),
    };
    let out = m.handle(
        Millis(0),
        master::Event::Store(StoreEvent::PersistFailed { write, reason: "fsync: EIO".into() }),
    );
    assert!(matches!(&out[..], [master::Action::Abdicate { .. }, ..]));
    assert_eq!(m.status(), Status::Standby);
    // A failure of a write from an earlier leadership is old news.
    let _ = elect(&mut m, Millis(1), 2);
    let out = m.handle(
        Millis(1),
        master::Event::Store(StoreEvent::PersistFailed { write, reason: "late".into() }),
    );
    assert!(out.is_empty());
    assert_eq!(m.status(), Status::Alive);
}

#[test]
fn operators_remove_unknown_workers_and_read_the_state_from_any_master() {
    let mut m = master("a");
    let records = (1..=4).map(worker_record).collect();
    let _ = elect_over(&mut m, Millis(0), 1, 0, records);
    let _ = connect_worker(&mut m, Millis(0), 1, "w1");
    let _ = deliver_to_master(&mut m, Millis(1), 1, register(1));
    let _ = m.handle(Millis(10_000), master::Event::Timer(master::Timer::Recovery));
    let _ = m.handle(Millis(10_000), master::Event::Connected { conn: ConnId(9) });
    let ask = |m: &mut Master, msg| {
        m_sends(&m.handle(Millis(10_001), master::Event::Message { conn: ConnId(9), msg }))
    };
    // An ALIVE worker is not removed, an UNKNOWN one is.
    let refused = ask(&mut m, Message::RemoveWorker { request: 1, worker: WorkerId::new("w1") });
    assert!(
        matches!(&refused[..], [(_, Message::RequestRefused { request: 1, reason, .. })] if reason.contains("Alive"))
    );
    // Accepted only once the delete of its record is durable (docs/design.md#durable-before-acknowledged).
    let msg = Message::RemoveWorker { request: 2, worker: WorkerId::new("w3") };
    let out = m.handle(Millis(10_001), master::Event::Message { conn: ConnId(9), msg });
    assert!(m_sends(&out).is_empty(), "nothing accepted before the delete is durable: {out:?}");
    assert!(out.iter().any(|a| matches!(
        a,
        master::Action::Store(StoreCommand::Unpersist { key: RecordKey::Worker(w), .. }) if w.as_str() == "w3"
    )));
    let accepted = m_sends(&persist_all(&mut m, Millis(10_001), &out));
    assert_eq!(
        accepted,
        vec![(ConnId(9), Message::RequestAccepted { epoch: Epoch(1), request: 2 })]
    );
    let state = match &ask(&mut m, Message::StateRequest)[..] {
        [(_, Message::StateReply(s))] => s.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(state.status, MasterStatus::Alive);
    let states: Vec<(String, String)> =
        state.workers.iter().map(|w| (w.id.0.clone(), w.state.to_string())).collect();
    assert_eq!(
        states,
        vec![
            ("w1".into(), "ALIVE".into()),
            ("w2".into(), "UNKNOWN".into()),
            ("w4".into(), "UNKNOWN".into())
        ]
    );
    // A standby answers too, naming the leader it knows.
    let mut b = master("b");
    let _ = b.handle(
        Millis(0),
        master::Event::LeaderIs(regent_core::protocol::LeaderHint {
            id: "a".into(),
            addr: addr("a"),
            epoch: Epoch(1),
        }),
    );
    let _ = b.handle(Millis(0), master::Event::Connected { conn: ConnId(1) });
    let out =
        m_sends(&b.handle(
            Millis(0),
            master::Event::Message { conn: ConnId(1), msg: Message::StateRequest },
        ));
    assert!(
        matches!(&out[..], [(_, Message::StateReply(s))] if s.status == MasterStatus::Standby && s.leader.as_ref().is_some_and(|l| l.addr == addr("a")))
    );
    let out = m_sends(&b.handle(
        Millis(0),
        master::Event::Message {
            conn: ConnId(1),
            msg: Message::KillFramework { request: 3, framework: "f".into() },
        },
    ));
    assert!(matches!(&out[..], [(_, Message::NotLeader { .. })]));
}

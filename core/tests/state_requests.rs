//! `StateRequest` floods (docs/design.md#issue-11 item 3): every request is answered, but
//! the master builds a fresh snapshot at most once per connection per
//! `limits::STATE_REQUEST_INTERVAL`, and not at all while nothing changed
//! (up to `limits::STATE_SNAPSHOT_MAX_AGE`); the others get the cached one.

mod common;

use common::*;
use regent_core::limits::{
    HTTP_SNAPSHOT_GAP_PER_ENTRY_US, STATE_REQUEST_INTERVAL, STATE_SNAPSHOT_MAX_AGE,
};
use regent_core::master::{self, Master};
use regent_core::protocol::{ClusterState, Message, RegisterWorker, Role};
use regent_core::states::MasterStatus;
use regent_core::{ConnId, Epoch, Incarnation, Millis, WorkerId};

fn alive_master() -> Master {
    let mut m = master("m");
    let _ = elect(&mut m, Millis(0), 1);
    m
}

/// Asks on `conn` at `now`; returns the one reply.
fn ask(m: &mut Master, now: Millis, conn: u64) -> ClusterState {
    let out =
        m.handle(now, master::Event::Message { conn: ConnId(conn), msg: Message::StateRequest });
    match &m_sends(&out)[..] {
        [(c, Message::StateReply(s))] if *c == ConnId(conn) => (**s).clone(),
        other => panic!("one StateReply on conn {conn}, got {other:?}"),
    }
}

fn operator(m: &mut Master, now: Millis, conn: u64) {
    let _ = m.handle(now, master::Event::Connected { conn: ConnId(conn) });
    let _ = m
        .handle(now, master::Event::Message { conn: ConnId(conn), msg: hello(Role::Client, "op") });
}

fn register_w1(m: &mut Master, now: Millis) {
    register(m, now, 9, "w1");
}

/// Registers worker `id` on connection `conn`.
fn register(m: &mut Master, now: Millis, conn: u64, id: &str) {
    let _ = connect_worker(m, now, conn, id);
    let msg = Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: WorkerId::new(id),
        incarnation: Incarnation(1),
        cores: 4,
        memory_mb: 1024,
        executors: vec![],
        epoch_seen: Epoch(0),
        launch_seen: 0,
        attributes: vec![],
    });
    let sends = deliver_to_master(m, now, conn, msg);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Registered { .. })), "{sends:?}");
}

#[test]
fn a_flood_on_one_connection_is_answered_from_one_snapshot() {
    let mut m = alive_master();
    operator(&mut m, Millis(10), 1);
    let before = m.metrics().state_snapshots_built;
    let first = ask(&mut m, Millis(10), 1);
    // Ten thousand more within the same millisecond, then spread over the
    // next 900 ms: every one answered, all from the first snapshot (nothing
    // changed, and it is younger than the maximum age).
    for i in 0..10_000u64 {
        let now = Millis(10 + i * 900 / 10_000);
        assert_eq!(ask(&mut m, now, 1), first, "request {i} answered from the cache");
    }
    assert_eq!(m.metrics().state_snapshots_built - before, 1, "one snapshot built");
    assert_eq!(m.metrics().state_replies_cached, 10_000);
}

#[test]
fn a_change_is_shown_within_one_interval_and_a_quiet_cluster_within_the_maximum_age() {
    let mut m = alive_master();
    operator(&mut m, Millis(0), 1);
    operator(&mut m, Millis(0), 2);
    let t0 = Millis(1_000);
    assert!(ask(&mut m, t0, 1).workers.is_empty());
    register_w1(&mut m, t0 + Millis(10));
    // Connection 1 had a fresh snapshot less than an interval ago: the
    // cached one, stale.
    let cached = ask(&mut m, t0 + STATE_REQUEST_INTERVAL - Millis(1), 1);
    assert!(cached.workers.is_empty(), "cached within the interval: {cached:?}");
    // Another connection may build: it sees the worker.
    let fresh = ask(&mut m, t0 + Millis(20), 2);
    assert_eq!(fresh.workers.len(), 1, "{fresh:?}");
    // So does connection 1 once its interval is over (here from the cache
    // connection 2 refreshed, which nothing has changed since).
    let built = m.metrics().state_snapshots_built;
    assert_eq!(ask(&mut m, t0 + STATE_REQUEST_INTERVAL, 1).workers.len(), 1);
    assert_eq!(m.metrics().state_snapshots_built, built, "nothing changed: the cache serves");
    // A quiet cluster: the counters move on once the snapshot is too old.
    let t1 = t0 + Millis(20) + STATE_SNAPSHOT_MAX_AGE;
    let later = ask(&mut m, t1 - Millis(1), 1);
    assert_eq!(later.messages, fresh.messages, "still the cached snapshot");
    let renewed = ask(&mut m, t1, 1);
    assert!(renewed.messages > fresh.messages, "rebuilt after the maximum age");
    assert_eq!(m.metrics().state_snapshots_built, built + 1);
}

#[test]
fn many_connections_asking_at_once_build_at_most_one_snapshot_each_per_interval() {
    let mut m = alive_master();
    for c in 1..=50 {
        operator(&mut m, Millis(0), c);
    }
    let before = m.metrics().state_snapshots_built;
    // Each round: a change (a heartbeat-like event), then every connection
    // asks twenty times in the same millisecond.
    let rounds = 10u64;
    for r in 0..rounds {
        let now = Millis(1_000 + r * 10);
        let _ = m.handle(now, master::Event::Tick);
        for c in 1..=50 {
            for _ in 0..20 {
                let _ = ask(&mut m, now, c);
            }
        }
    }
    // Ten rounds within one interval: each connection builds at most once.
    let built = m.metrics().state_snapshots_built - before;
    assert!(built <= 50, "at most one build per connection per interval, got {built}");
    assert_eq!(
        m.metrics().state_replies_cached + built,
        rounds * 50 * 20,
        "every request answered"
    );
}

#[test]
fn a_standby_answers_too() {
    let mut m = master("standby");
    operator(&mut m, Millis(0), 1);
    for _ in 0..100 {
        assert_eq!(ask(&mut m, Millis(0), 1).status, MasterStatus::Standby);
    }
    assert_eq!(m.metrics().state_snapshots_built, 1);
}

#[test]
fn heartbeats_move_only_the_counters_and_do_not_make_a_snapshot_stale() {
    let mut m = alive_master();
    operator(&mut m, Millis(0), 1);
    register_w1(&mut m, Millis(0));
    let first = ask(&mut m, Millis(10), 1);
    let built = m.metrics().state_snapshots_built;
    // A busy cluster: heartbeats all the time, nothing else.
    let heartbeat = Message::WorkerHeartbeat { incarnation: Incarnation(1) };
    let mut now = Millis(10);
    while now < Millis(10) + STATE_SNAPSHOT_MAX_AGE - Millis(1) {
        now = now + Millis(50);
        let sends = deliver_to_master(&mut m, now, 9, heartbeat.clone());
        assert!(matches!(sends[..], [(_, Message::HeartbeatAck { .. })]));
        if now.since(Millis(10)) < STATE_SNAPSHOT_MAX_AGE {
            assert_eq!(ask(&mut m, now, 1), first, "the cached snapshot at {now}");
        }
    }
    assert_eq!(m.metrics().state_snapshots_built, built, "no rebuild for heartbeats");
    // Past the maximum age the counters move on.
    let later = ask(&mut m, Millis(10) + STATE_SNAPSHOT_MAX_AGE, 1);
    assert!(later.messages > first.messages);
    assert_eq!(later.workers, first.workers);
    // Anything else that may change the view makes it stale at once (the
    // connection's interval allowing).
    let _ = m.handle(Millis(1_200), master::Event::Tick);
    let _ = ask(&mut m, Millis(1_200), 1);
    assert_eq!(m.metrics().state_snapshots_built, built + 2);
}

/// The HTTP event stream's poller (`Master::cached_state`) shares the
/// cache: polling a quiet cluster builds nothing, a change shows at the
/// next poll, and the cache it leaves serves `StateRequest`s too.
#[test]
fn the_event_pollers_cached_state_builds_only_after_a_change() {
    let mut m = alive_master();
    operator(&mut m, Millis(0), 1);
    let before = m.metrics().state_snapshots_built;
    let first = m.cached_state(Millis(10));
    for i in 1..=4u64 {
        assert_eq!(m.cached_state(Millis(10 + i * 200)), first, "poll {i}: nothing changed");
    }
    assert_eq!(m.metrics().state_snapshots_built - before, 1, "one build for five polls");
    register_w1(&mut m, Millis(900));
    let after = m.cached_state(Millis(910));
    assert_eq!(after.workers.len(), 1, "the registration shows at the next poll");
    assert_eq!(m.metrics().state_snapshots_built - before, 2);
    assert_eq!(ask(&mut m, Millis(920), 1), *after, "a StateRequest gets the same snapshot");
    // Past the maximum age the poller gets a fresh one even when quiet.
    let later = Millis(910) + STATE_SNAPSHOT_MAX_AGE;
    let _ = m.cached_state(later);
    assert_eq!(m.metrics().state_snapshots_built - before, 3);
}

/// Every HTTP asker together counts as one, paced by the size of the last
/// view: dashboards polling a cluster that changes all the time get a fresh
/// view only once the last is `HTTP_SNAPSHOT_GAP_PER_ENTRY_US` per entry
/// old (docs/design.md#issue-24: the snapshot built at most once per interval, the loop
/// never held longer than a stated bound), while a small cluster's changes
/// show at the next read.
#[test]
fn http_askers_of_a_changing_cluster_are_paced_by_the_views_size() {
    let mut m = alive_master();
    // A small cluster: the pause is under a millisecond, so a change shows
    // at the next read (an operator's command, then `/api/state`).
    register(&mut m, Millis(1), 100, "w-0");
    let before = m.metrics().state_snapshots_built;
    assert_eq!(m.cached_state(Millis(2)).workers.len(), 1);
    register(&mut m, Millis(3), 101, "w-1");
    assert_eq!(m.cached_state(Millis(4)).workers.len(), 2, "shown at the next read");
    assert_eq!(m.metrics().state_snapshots_built - before, 2);
    // 2,000 workers: a view of 2,000 entries pauses the HTTP side's builds
    // for 2,000 × 15 µs = 30 ms.
    for i in 2..2_000u64 {
        register(&mut m, Millis(5), 100 + i, &format!("w-{i}"));
    }
    let gap = Millis(2_000 * HTTP_SNAPSHOT_GAP_PER_ENTRY_US / 1_000);
    let before = m.metrics().state_snapshots_built;
    let first = m.cached_state(Millis(1_000));
    assert_eq!(first.workers.len(), 2_000);
    // Something changes every millisecond; ten dashboards poll every
    // millisecond: the cached view until the pause is over.
    for t in 1_001..1_000 + gap.0 {
        let _ = m.handle(Millis(t), master::Event::Tick);
        for _ in 0..10 {
            assert_eq!(m.cached_state(Millis(t)), first, "at {t} ms: the cached one");
        }
    }
    assert_eq!(m.metrics().state_snapshots_built - before, 1, "no build within the pause");
    register(&mut m, Millis(1_000 + gap.0 - 1), 5_000, "w-late");
    let fresh = m.cached_state(Millis(1_000) + gap);
    assert_eq!(fresh.workers.len(), 2_001, "the change shows once the pause is over");
    assert_eq!(m.cached_state(Millis(1_000) + gap), fresh, "the other askers share it");
    assert_eq!(m.metrics().state_snapshots_built - before, 2);
}

/// The HTTP side's interval never hides a change of leadership: a master
/// that lost it (or whose session is in doubt) says so at the next poll,
/// however recently the last view was built, so no operator or test ever
/// sees two ALIVE masters because one of them answered from its cache.
#[test]
fn http_askers_see_a_change_of_leadership_at_once() {
    let mut m = alive_master();
    // 2,000 workers: the HTTP side's pause is 30 ms.
    for i in 0..2_000u64 {
        register(&mut m, Millis(1), 100 + i, &format!("w-{i}"));
    }
    assert_eq!(m.cached_state(Millis(1_000)).status, MasterStatus::Alive);
    // Anything else waits for the pause.
    let before = m.metrics().state_snapshots_built;
    let _ = m.handle(Millis(1_001), master::Event::Tick);
    let _ = m.cached_state(Millis(1_001));
    assert_eq!(m.metrics().state_snapshots_built, before, "no build within the pause");
    let _ = m.handle(Millis(1_002), master::Event::Suspended);
    assert_eq!(m.cached_state(Millis(1_004)).status, MasterStatus::Suspended, "within the pause");
    let _ = m.handle(Millis(1_006), master::Event::Revoked);
    assert_eq!(m.cached_state(Millis(1_008)).status, MasterStatus::Standby, "within the pause");
}

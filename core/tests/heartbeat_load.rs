//! Heartbeat load control (docs/design.md#issue-13 item 6, Nomad's
//! `max_heartbeats_per_second`): past the ceiling the leader tells workers
//! longer heartbeat intervals, so all of them together stay under it, and
//! each worker's DEAD timeout grows with its own interval.

mod common;

use common::*;
use quickcheck::{quickcheck, TestResult};
use regent_core::master::{self, Master, Timer as MTimer, WorkerState};
use regent_core::protocol::{Message, RegisterWorker};
use regent_core::store::{Record, WorkerRecord};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::worker::{self, Timer};
use regent_core::{ConnId, Epoch, Incarnation, MasterId, Millis, WorkerId};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

const T0: Millis = Millis(0);

/// A leader with a 1 s heartbeat interval, a 10 s worker timeout and a
/// ceiling of `ceiling` heartbeats per second.
fn leader(ceiling: u32) -> Master {
    let mut cfg = master::Config::new(MasterId::new("m"), addr("m"));
    cfg.max_heartbeats_per_second = ceiling;
    let mut m = Master::new(cfg);
    let _ = elect(&mut m, T0, 1);
    m
}

fn name(i: u64) -> String {
    format!("w{i:04}")
}

/// Registers worker `i` on conn `i`; returns the interval it was told.
fn register(m: &mut Master, now: Millis, i: u64) -> Millis {
    let _ = connect_worker(m, now, i, &name(i));
    let reg = RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: WorkerId(name(i)),
        incarnation: Incarnation(100 + i),
        cores: 4,
        memory_mb: 4096,
        executors: vec![],
        epoch_seen: Epoch(0),
        launch_seen: 0,
        attributes: vec![],
    };
    let sends = deliver_to_master(m, now, i, Message::RegisterWorker(reg));
    match &sends[..] {
        [(ConnId(c), Message::Registered { heartbeat_interval, .. })] if *c == i => {
            *heartbeat_interval
        }
        other => panic!("expected Registered for {i}, got {other:?}"),
    }
}

/// Worker `i` heartbeats; returns the new interval it is told, if any.
fn heartbeat(m: &mut Master, now: Millis, i: u64) -> Option<Millis> {
    let msg = Message::WorkerHeartbeat { incarnation: Incarnation(100 + i) };
    let sends = deliver_to_master(m, now, i, msg);
    assert!(
        matches!(sends.first(), Some((_, Message::HeartbeatAck { .. }))),
        "every heartbeat is acknowledged: {sends:?}"
    );
    sends.iter().find_map(|(_, msg)| match msg {
        Message::Registered { heartbeat_interval, duplicate: true, .. } => {
            Some(*heartbeat_interval)
        }
        _ => None,
    })
}

fn entry(m: &Master, i: u64) -> master::WorkerEntry {
    m.workers().into_iter().find(|w| w.id.as_str() == name(i)).expect("registered").clone()
}

/// `n` workers register one by one (one per `gap` ms) and then heartbeat as
/// the worker machine does: every interval they were told last, a new
/// interval taking effect from the heartbeat after the one it answered.
/// Returns the heartbeats counted in each whole second.
fn run(m: &mut Master, n: u64, gap: u64, until: Millis) -> BTreeMap<u64, u64> {
    let mut told: BTreeMap<u64, Millis> = BTreeMap::new();
    let mut next = BinaryHeap::new();
    let mut per_second = BTreeMap::new();
    let mut joined = 0;
    loop {
        let join_at = Millis(joined * gap);
        let due = next.peek().map(|Reverse((t, _))| *t);
        if joined < n && due.is_none_or(|t| join_at <= t) {
            let now = join_at;
            let interval = register(m, now, joined);
            told.insert(joined, interval);
            next.push(Reverse((now + interval, joined)));
            joined += 1;
            continue;
        }
        let Some(Reverse((t, i))) = next.pop() else { break };
        if t >= until {
            break;
        }
        let now = t;
        // The worker's timer was set with the interval it knew when it
        // fired: the next heartbeat follows at that interval, whatever
        // this one's acknowledgement says.
        let interval = told[&i];
        if let Some(new) = heartbeat(m, now, i) {
            told.insert(i, new);
        }
        *per_second.entry(now.0 / 1_000).or_insert(0) += 1;
        next.push(Reverse((now + interval, i)));
    }
    per_second
}

#[test]
fn below_the_ceiling_nothing_changes() {
    let mut m = leader(master::DEFAULT_MAX_HEARTBEATS_PER_SECOND);
    for i in 0..3 {
        assert_eq!(register(&mut m, T0, i), Millis(1_000), "the configured interval, no jitter");
    }
    for i in 0..3 {
        assert_eq!(heartbeat(&mut m, Millis(1_000), i), None, "no new interval");
        assert_eq!(entry(&m, i).timeout, Millis(10_000), "the configured timeout");
    }
    assert_eq!(m.longest_heartbeat_interval(), Millis(1_000));
}

#[test]
fn intervals_keep_the_heartbeat_rate_under_the_ceiling() {
    // 200 workers at 1 s would send 200 heartbeats a second; the ceiling
    // is 50.
    let ceiling = 50;
    let n = 200;
    let mut m = leader(ceiling);
    let per_second = run(&mut m, n, 10, Millis(100_000));
    // Once every worker has heard the interval the whole cluster calls for
    // (registration ends at 2 s; the longest interval is 5 s), the
    // cluster stays under the ceiling.
    let floor = m.config().heartbeat_interval_for(n as usize);
    assert_eq!(floor, Millis(4_000));
    // 80 s from 20 s on: at most 50 a second on average...
    let total: u64 = per_second.range(20..100).map(|(_, c)| c).sum();
    assert!(
        total <= 80 * u64::from(ceiling),
        "{total} heartbeats in 80 s; the ceiling is {ceiling} a second"
    );
    // ...and not far below it (the jitter lengthens intervals by 12% on
    // average).
    assert!(total > 80 * 50 * 3 / 4, "{total} heartbeats in 80 s");
    // Any 10 s, from the start (workers that registered while the cluster
    // was small are told a longer interval with their next heartbeat): at
    // most 10 s at the ceiling, plus one heartbeat per worker (a window's
    // edges).
    for start in 0..90 {
        let count: u64 = per_second.range(start..start + 10).map(|(_, c)| c).sum();
        assert!(count <= 10 * u64::from(ceiling) + n, "{count} in the 10 s from {start} s");
    }
    // Every worker: interval at least the floor, at most a quarter above it
    // (the jitter), timeout scaled in proportion.
    let mut intervals = Vec::new();
    for w in m.workers() {
        assert_eq!(w.state, WorkerState::Alive);
        assert!(w.heartbeat_interval >= floor && w.heartbeat_interval.0 <= floor.0 * 5 / 4);
        assert_eq!(w.timeout.0, 10 * w.heartbeat_interval.0, "the same multiple as configured");
        intervals.push(w.heartbeat_interval.0);
    }
    let rate: f64 = intervals.iter().map(|i| 1_000.0 / *i as f64).sum();
    assert!(rate <= f64::from(ceiling), "{rate} heartbeats per second");
    // The jitter spreads them: not all the same.
    intervals.sort();
    intervals.dedup();
    assert!(intervals.len() > 50, "{} distinct intervals", intervals.len());
    assert_eq!(m.longest_heartbeat_interval(), Millis(*intervals.last().unwrap()));
}

#[test]
fn a_worker_is_not_declared_dead_before_its_own_timeout() {
    let mut m = leader(100);
    // 250 workers: each is told at least 2.5 s, so a 25 s timeout.
    for i in 0..250 {
        let _ = register(&mut m, T0, i);
    }
    let t = Millis(1_000);
    for i in 0..250 {
        let _ = heartbeat(&mut m, t, i);
    }
    // Settle: the timeout covered the old and new interval until the next
    // heartbeat.
    let t = Millis(4_000);
    for i in 0..250 {
        assert_eq!(heartbeat(&mut m, t, i), None, "told once");
    }
    let w = entry(&m, 7);
    assert!(w.heartbeat_interval >= Millis(2_500), "{:?}", w.heartbeat_interval);
    let own = w.timeout;
    assert_eq!(own.0, 10 * w.heartbeat_interval.0);
    // Everyone but worker 7 keeps heartbeating; sweeps run every 2.5 s.
    let mut now = t;
    while now + Millis(2_500) <= t + own {
        now = now + Millis(2_500);
        for i in (0..250).filter(|i| *i != 7) {
            let _ = heartbeat(&mut m, now, i);
        }
        let out = m.handle(now, master::Event::Tick);
        assert!(
            !out.iter().any(|a| matches!(a, master::Action::Store(StoreCommand::Unpersist { .. }))),
            "worker 7 silent for {} of its {} timeout is not DEAD (the configured timeout is 10 s)",
            now.since(t),
            own
        );
        assert_eq!(entry(&m, 7).state, WorkerState::Alive);
    }
    assert!(now.since(t) > Millis(20_000), "swept well past the configured timeout");
    // Past its own timeout, at the next sweep.
    now = (t + own + Millis(1)).max(m.deadline(MTimer::Sweep).expect("a leader sweeps"));
    for i in (0..250).filter(|i| *i != 7) {
        let _ = heartbeat(&mut m, now, i);
    }
    let out = m.handle(now, master::Event::Tick);
    assert_eq!(
        out.iter()
            .filter(|a| matches!(a, master::Action::Store(StoreCommand::Unpersist { .. })))
            .count(),
        1,
        "past its own timeout, worker 7 (and only it) is DEAD"
    );
    assert_eq!(entry(&m, 7).state, WorkerState::Dead);
}

#[test]
fn a_shrinking_cluster_shortens_intervals_after_the_old_one_is_covered() {
    let mut m = leader(100);
    for i in 0..300 {
        let _ = register(&mut m, T0, i);
    }
    for i in 0..300 {
        let _ = heartbeat(&mut m, Millis(500), i);
    }
    let long = entry(&m, 0).heartbeat_interval;
    assert!(long >= Millis(3_000));
    // 250 of them go silent and are swept DEAD (their timeouts are 30 to
    // 37.5 s); the other 50 heartbeat once meanwhile, before any death, and
    // so are told nothing new yet.
    let mut now = Millis(500);
    while now < Millis(40_500) {
        now = now + Millis(2_500);
        if now == Millis(20_500) {
            for i in 0..50 {
                assert_eq!(heartbeat(&mut m, now, i), None);
            }
        }
        let out = m.handle(now, master::Event::Tick);
        let _ = persist_all(&mut m, now, &out);
    }
    let alive: Vec<_> = m
        .workers()
        .into_iter()
        .filter(|w| w.state == WorkerState::Alive)
        .map(|w| w.id.clone())
        .collect();
    assert_eq!(alive.len(), 50, "{alive:?}");
    // The 50 left heartbeat: each is told the configured interval again
    // (the cluster's floor is 1 s, under half its interval)...
    let old = entry(&m, 0).heartbeat_interval;
    now = now + Millis(100);
    assert_eq!(heartbeat(&mut m, now, 0), Some(Millis(1_000)));
    // ...but its next heartbeat may still come at the old interval: until
    // then its timeout covers that one.
    let w = entry(&m, 0);
    assert_eq!(w.heartbeat_interval, Millis(1_000));
    assert_eq!(w.timeout.0, 10 * old.0);
    now = now + old;
    assert_eq!(heartbeat(&mut m, now, 0), None);
    assert_eq!(entry(&m, 0).timeout, Millis(10_000), "settled on the new interval");
}

#[test]
fn the_worker_heartbeats_at_a_new_interval_from_its_next_heartbeat() {
    let mut w = worker("w1", 7, &["m"]);
    let _ = w.handle(T0, worker::Event::Start);
    let _ = w.handle(T0, worker::Event::Connected { master: addr("m") });
    let reply = Message::HelloReply(regent_core::protocol::HelloReply {
        role: regent_core::protocol::Role::Master,
        master: MasterId::new("m"),
        leading: true,
        epoch: Epoch(1),
        leader: None,
        masters: vec![addr("m")],
    });
    let _ = from(&mut w, T0, "m", reply);
    let registered = |interval: u64, duplicate| Message::Registered {
        epoch: Epoch(1),
        heartbeat_interval: Millis(interval),
        duplicate,
        masters: vec![addr("m")],
    };
    let out = from(&mut w, T0, "m", registered(1_000, false));
    assert_eq!(w.deadline(Timer::Heartbeat), Some(Millis(1_000)), "{out:?}");
    let out = w.handle(Millis(1_000), worker::Event::Tick);
    assert_eq!(w.deadline(Timer::Heartbeat), Some(Millis(2_000)), "{out:?}");
    // The leader answers that heartbeat with a longer interval.
    let out = from(&mut w, Millis(1_005), "m", registered(2_600, true));
    assert!(w_sends(&out).is_empty() && w.status().registered, "nothing else changes: {out:?}");
    assert_eq!(w.heartbeat_interval(), Some(Millis(2_600)));
    let out = w.handle(Millis(2_000), worker::Event::Tick);
    assert_eq!(w.deadline(Timer::Heartbeat), Some(Millis(4_600)), "{out:?}");
}

#[test]
fn a_new_leader_waits_for_its_recorded_workers_as_long_as_their_intervals_call_for() {
    let mut m = Master::new({
        let mut cfg = master::Config::new(MasterId::new("m"), addr("m"));
        cfg.max_heartbeats_per_second = 100;
        cfg
    });
    let now = Millis(50);
    let _ = m.handle(now, master::Event::Elected { floor: Epoch(1), clock: 0 });
    let records = (0..400)
        .map(|i| {
            Record::Worker(WorkerRecord {
                dead: false,
                id: WorkerId(name(i)),
                incarnation: Incarnation(100 + i),
                cores: 4,
                memory_mb: 4096,
                callback: None,
                maintenance: None,
            })
        })
        .collect();
    let out = m.handle(now, master::Event::Store(StoreEvent::Loaded { records }));
    let out = persist_all(&mut m, now, &out);
    // 400 workers at 100 a second: 4 s intervals, so 40 s instead of 10 s.
    assert_eq!(m.deadline(MTimer::Recovery), Some(Millis(40_050)), "{out:?}");
}

/// The interval for `n` workers is the shortest that keeps `n` heartbeats
/// per interval within the ceiling, and never below the configured one;
/// scaled timeouts keep the configured proportion.
#[test]
fn the_interval_is_the_shortest_under_the_ceiling() {
    fn prop(ceiling: u16, n: u16, base: u16) -> TestResult {
        let (ceiling, n, base) = (u32::from(ceiling) + 1, u64::from(n), u64::from(base) + 1);
        let mut cfg = master::Config::new(MasterId::new("m"), addr("m"));
        cfg.max_heartbeats_per_second = ceiling;
        cfg.heartbeat_interval = Millis(base);
        let i = cfg.heartbeat_interval_for(n as usize).0;
        if i < base {
            return TestResult::error(format!("{i} below the configured {base}"));
        }
        // n heartbeats every i ms: at most `ceiling` a second.
        if n * 1_000 > u64::from(ceiling) * i {
            return TestResult::error(format!("{n} workers every {i} ms pass {ceiling}/s"));
        }
        // And one ms less would pass it (unless it is the configured one).
        if i > base && n * 1_000 <= u64::from(ceiling) * (i - 1) {
            return TestResult::error(format!("{i} ms is longer than needed"));
        }
        let timeout = cfg.scaled(cfg.worker_timeout, Millis(i));
        let want = 10_000 * i / base;
        if timeout.0 != want.max(10_000) {
            return TestResult::error(format!("timeout {timeout:?} for {i} ms, want {want}"));
        }
        TestResult::passed()
    }
    quickcheck(prop as fn(u16, u16, u16) -> TestResult);
    // No ceiling: always the configured interval.
    let mut cfg = master::Config::new(MasterId::new("m"), addr("m"));
    cfg.max_heartbeats_per_second = 0;
    assert_eq!(cfg.heartbeat_interval_for(10_000_000), Millis(1_000));
}

/// Whatever the ceiling and the number of workers, once each worker has
/// heartbeated after the last registration, the intervals the workers hold
/// keep the cluster within the ceiling.
#[test]
fn after_one_heartbeat_each_the_cluster_is_within_the_ceiling() {
    fn prop(ceiling: u8, n: u8) -> TestResult {
        let ceiling = u32::from(ceiling % 40) + 1;
        let n = u64::from(n % 120) + 1;
        let mut m = leader(ceiling);
        for i in 0..n {
            let _ = register(&mut m, T0, i);
        }
        for i in 0..n {
            let _ = heartbeat(&mut m, Millis(500), i);
        }
        let rate: f64 = m.workers().iter().map(|w| 1_000.0 / w.heartbeat_interval.0 as f64).sum();
        if rate > f64::from(ceiling) + 1e-9 {
            return TestResult::error(format!("{n} workers, ceiling {ceiling}: {rate}/s"));
        }
        if m.workers().iter().any(|w| w.timeout.0 != 10 * w.heartbeat_interval.0) {
            return TestResult::error("a timeout out of proportion");
        }
        TestResult::passed()
    }
    quickcheck(prop as fn(u8, u8) -> TestResult);
}

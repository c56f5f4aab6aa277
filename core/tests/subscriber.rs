//! The subscriber machine: SUBSCRIBE semantics of seed 001 (docs/design.md#seed-001) (close before
//! resubscribe, heartbeat watchdog, failover to another instance), leader
//! discovery, backoff, epochs and declarations, asserting exact actions.

use quickcheck::{Arbitrary, Gen, QuickCheck};
use regent_core::ids::InstanceId;
use regent_core::protocol::{
    ExecutorInfo, ExecutorState, GroupSpec, Hello, HelloReply, LeaderHint, Message, Role,
    Subscribe, PROTOCOL_VERSION,
};
use regent_core::subscriber::{Action, Config, Event, Request, Subscriber, Timer};
use regent_core::{Addr, Epoch, ExecutorId, FrameworkId, MasterId, Millis, WorkerId};

const ME: InstanceId = InstanceId(7);

fn addr(s: &str) -> Addr {
    Addr::new(s)
}

/// Defaults, except no jitter, so deadlines are exact: backoffs are their
/// nominal values and a lost subscription is retried at once.
fn cfg(masters: &[&str]) -> Config {
    let mut c = Config::new("test", "fw", ME, masters.iter().map(|m| addr(m)).collect());
    c.jitter_min_pct = 100;
    c.reconnect_first_max = Millis(0);
    c
}

fn sub(masters: &[&str]) -> Subscriber {
    Subscriber::new(cfg(masters))
}

fn connect(m: &str) -> Action {
    Action::Connect { master: addr(m) }
}

fn hello() -> Message {
    Message::Hello(Hello {
        version: PROTOCOL_VERSION,
        cluster: "test".into(),
        role: Role::Subscriber,
        node: "fw".into(),
    })
}

fn subscribe(framework: Option<&str>, attempt: u64) -> Message {
    Message::Subscribe(Subscribe {
        framework: framework.map(FrameworkId::new),
        name: "fw".into(),
        instance: ME,
        attempt,
        failover_timeout: Millis::from_secs(60),
        tenant: None,
    })
}

fn send(to: &str, msg: Message) -> Action {
    Action::Send { to: addr(to), msg }
}

/// The two frames of a subscription attempt on a fresh connection.
fn opening(to: &str, framework: Option<&str>, attempt: u64) -> Vec<Action> {
    vec![send(to, hello()), send(to, subscribe(framework, attempt))]
}

fn subscribed(epoch: u64, interval: u64) -> Message {
    Message::Subscribed {
        epoch: Epoch(epoch),
        framework: FrameworkId::new("f1"),
        heartbeat_interval: Millis(interval),
        executors: vec![],
    }
}

fn hint(m: &str, epoch: u64) -> LeaderHint {
    LeaderHint { id: MasterId::new(m), addr: addr(m), epoch: Epoch(epoch) }
}

fn msg(s: &mut Subscriber, t: u64, from: &str, m: Message) -> Vec<Action> {
    s.handle(Millis(t), Event::Message { from: addr(from), msg: m })
}

fn ev(s: &mut Subscriber, t: u64, e: Event) -> Vec<Action> {
    s.handle(Millis(t), e)
}

fn connected(m: &str) -> Event {
    Event::Connected { master: addr(m) }
}

fn failed(m: &str) -> Event {
    Event::ConnectFailed { master: addr(m) }
}

fn is_close(a: &Action, m: &str) -> bool {
    matches!(a, Action::Close { master, .. } if master == &addr(m))
}

fn spec(group: &str, slots: u32) -> GroupSpec {
    GroupSpec {
        group: group.into(),
        slots,
        command: vec!["/bin/server".into()],
        env: vec![("MODE".into(), "prod".into())],
        cores: 1,
        memory_mb: 128,
        policy: Default::default(),
        launch: Default::default(),
    }
}

/// A subscriber subscribed with `a` at epoch 5 (framework f1, heartbeat
/// interval 1 s) at t = 100, after attempt 1.
fn subscribed_with_a(masters: &[&str]) -> Subscriber {
    let mut s = sub(masters);
    assert_eq!(ev(&mut s, 0, Event::Start), vec![connect("a")]);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_000)));
    assert_eq!(ev(&mut s, 10, connected("a")), opening("a", None, 1));
    let out = msg(&mut s, 100, "a", subscribed(5, 1_000));
    assert_eq!(
        out,
        vec![Action::Subscribed {
            framework: FrameworkId::new("f1"),
            master: addr("a"),
            executors: vec![],
        },]
    );
    assert_eq!(s.deadline(Timer::Attempt), None);
    assert_eq!(s.deadline(Timer::Watchdog), Some(Millis(5_100)));
    assert!(s.status().subscribed);
    s
}

#[test]
fn first_subscribe_is_hello_then_subscribe_without_framework_id() {
    let s = subscribed_with_a(&["a", "b"]);
    let st = s.status();
    assert_eq!(st.framework, Some(FrameworkId::new("f1")));
    assert_eq!(st.master, Some(addr("a")));
    assert_eq!(st.attempt, 1);
    assert_eq!(st.max_epoch, Epoch(5));
    assert!(!st.exited);
}

#[test]
fn framework_id_is_carried_after_assignment_and_attempts_grow() {
    let mut s = subscribed_with_a(&["a"]);
    // The connection drops; the subscriber resubscribes at once (the
    // jitter of `reconnect_first_max` is 0 here).
    let out = ev(&mut s, 200, Event::Disconnected { master: addr("a") });
    assert!(matches!(&out[..], [Action::Disconnected { .. }]));
    assert_eq!(s.deadline(Timer::Watchdog), None);
    assert_eq!(s.deadline(Timer::Attempt), None);
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(200)));
    assert!(!out.iter().any(|a| matches!(a, Action::Close { .. })));
    assert_eq!(ev(&mut s, 200, Event::Tick), vec![connect("a")]);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_200)));
    assert_eq!(ev(&mut s, 210, connected("a")), opening("a", Some("f1"), 2));
    // A failed attempt, then another after the backoff: attempt numbers
    // keep growing.
    let out = ev(&mut s, 220, Event::Disconnected { master: addr("a") });
    assert_eq!(out, vec![]);
    assert_eq!(s.deadline(Timer::Attempt), None);
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(420)));
    let _ = ev(&mut s, 420, Event::Tick);
    assert_eq!(ev(&mut s, 430, connected("a")), opening("a", Some("f1"), 3));
    assert_eq!(s.status().attempt, 3);
}

#[test]
fn a_resumed_framework_id_from_config_is_sent_on_the_first_subscribe() {
    // Seed scenario 3, subscriber half: a newly started instance of an
    // existing framework subscribes with the framework id and its own
    // instance id; the master closes the old instance's connection.
    let mut c = cfg(&["a"]);
    c.framework = Some(FrameworkId::new("f1"));
    c.instance = InstanceId(99);
    let mut s = Subscriber::new(c);
    let _ = ev(&mut s, 0, Event::Start);
    let out = ev(&mut s, 1, connected("a"));
    assert_eq!(
        out[1],
        send(
            "a",
            Message::Subscribe(Subscribe {
                framework: Some(FrameworkId::new("f1")),
                name: "fw".into(),
                instance: InstanceId(99),
                attempt: 1,
                failover_timeout: Millis::from_secs(60),
                tenant: None,
            })
        )
    );
}

#[test]
fn close_precedes_resubscribe_when_a_new_leader_is_announced() {
    let mut s = subscribed_with_a(&["a", "b"]);
    let out = msg(
        &mut s,
        500,
        "a",
        Message::MasterChanged {
            epoch: Epoch(6),
            leader: hint("b", 6),
            masters: vec![addr("a"), addr("b")],
        },
    );
    assert_eq!(
        out,
        vec![
            Action::Close { master: addr("a"), reason: "b leads at epoch 6".into() },
            Action::Disconnected { reason: "subscription with a lost: b leads at epoch 6".into() },
            connect("b"),
        ]
    );
    assert_eq!(s.deadline(Timer::Watchdog), None);
    assert_eq!(s.deadline(Timer::Retry), None);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_500)));
    assert_eq!(ev(&mut s, 510, connected("b")), opening("b", Some("f1"), 2));
    // A late message on the old connection (runtime race) is ignored.
    assert!(msg(&mut s, 520, "a", subscribed(6, 1_000)).is_empty());
    let out = msg(&mut s, 530, "b", subscribed(6, 1_000));
    assert!(out.contains(&Action::Subscribed {
        framework: FrameworkId::new("f1"),
        master: addr("b"),
        executors: vec![]
    }));
    assert_eq!(s.status().master, Some(addr("b")));
}

#[test]
fn round_robin_over_every_master_then_back_off() {
    let mut s = sub(&["a", "b", "c"]);
    assert_eq!(ev(&mut s, 0, Event::Start), vec![connect("a")]);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_000)));
    assert_eq!(ev(&mut s, 1, failed("a")), vec![connect("b")]);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_001)));
    assert_eq!(ev(&mut s, 2, failed("b")), vec![connect("c")]);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_002)));
    // Every master tried once: back off (200 ms, then 400 ms...).
    assert_eq!(ev(&mut s, 3, failed("c")), vec![]);
    assert_eq!(s.deadline(Timer::Attempt), None);
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(203)));
    // An early or repeated timer is harmless.
    assert!(ev(&mut s, 100, Event::Tick).is_empty());
    assert_eq!(ev(&mut s, 203, Event::Tick), vec![connect("a")]);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_203)));
    let _ = ev(&mut s, 204, failed("a"));
    let _ = ev(&mut s, 205, failed("b"));
    assert_eq!(ev(&mut s, 206, failed("c")), vec![]);
    assert_eq!(s.deadline(Timer::Attempt), None);
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(606)));
    // The abandoned attempt's deadline is gone: nothing fires before the
    // retry.
    assert!(ev(&mut s, 605, Event::Tick).is_empty());
    assert_eq!(ev(&mut s, 606, Event::Tick), vec![connect("a")]);
}

#[test]
fn not_leader_hint_is_followed() {
    let mut s = sub(&["a", "b", "c"]);
    let _ = ev(&mut s, 0, Event::Start);
    let _ = ev(&mut s, 1, connected("a"));
    let out =
        msg(&mut s, 2, "a", Message::NotLeader { epoch: Epoch(3), leader: Some(hint("c", 3)) });
    assert_eq!(
        out,
        vec![
            Action::Close {
                master: addr("a"),
                reason: "a is not the leader; it names c at epoch 3".into()
            },
            connect("c"),
        ]
    );
    assert_eq!(s.deadline(Timer::Retry), None);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_002)));
    assert_eq!(ev(&mut s, 3, connected("c")), opening("c", None, 2));
    // The refused master's Hello reply, arriving late, is not for the
    // current attempt: ignored.
    let late = Message::HelloReply(HelloReply {
        role: Role::Master,
        master: MasterId::new("a"),
        leading: false,
        epoch: Epoch(3),
        leader: Some(hint("c", 3)),
        masters: vec![],
    });
    assert!(msg(&mut s, 4, "a", late).is_empty());
    assert_eq!(s.status().master, Some(addr("c")));
}

#[test]
fn a_hint_older_than_the_known_epoch_is_ignored_and_the_next_master_tried() {
    let mut s = subscribed_with_a(&["a", "b", "c"]);
    let _ = ev(&mut s, 200, Event::Disconnected { master: addr("a") });
    let _ = ev(&mut s, 400, Event::Tick);
    // a (last leader) is tried first; it refuses.
    assert_eq!(s.status().master, Some(addr("a")));
    let _ = ev(&mut s, 401, connected("a"));
    // It names c, but at epoch 4 < 5 (known): stale, try b instead.
    let out =
        msg(&mut s, 402, "a", Message::NotLeader { epoch: Epoch(5), leader: Some(hint("c", 4)) });
    assert_eq!(
        out,
        vec![
            Action::Close { master: addr("a"), reason: "a is not the leader".into() },
            connect("b"),
        ]
    );
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_402)));
    // A hint back to an already-tried master at the same epoch is not
    // followed either (no ping-pong between standbys).
    let _ = ev(&mut s, 403, connected("b"));
    let out =
        msg(&mut s, 404, "b", Message::NotLeader { epoch: Epoch(5), leader: Some(hint("a", 5)) });
    assert_eq!(out[0], Action::Close { master: addr("b"), reason: "b is not the leader".into() });
    assert_eq!(out[1], connect("c"));
}

#[test]
fn a_stale_not_leader_moves_on_without_following_its_hint() {
    let mut s = subscribed_with_a(&["a", "b", "c"]);
    let _ = msg(
        &mut s,
        150,
        "a",
        Message::MasterChanged { epoch: Epoch(8), leader: hint("b", 8), masters: vec![] },
    );
    let _ = ev(&mut s, 160, connected("b"));
    // A lagging standby answers at epoch 3 with a hint to c at epoch 3.
    let out =
        msg(&mut s, 170, "b", Message::NotLeader { epoch: Epoch(3), leader: Some(hint("c", 3)) });
    assert!(is_close(&out[0], "b"));
    assert_eq!(out[1], connect("a"), "next in list order, not the stale hint");
    assert_eq!(s.status().max_epoch, Epoch(8));
}

#[test]
fn a_subscribed_master_that_no_longer_leads_is_left_for_its_hint() {
    let mut s = subscribed_with_a(&["a", "b"]);
    let out =
        msg(&mut s, 300, "a", Message::NotLeader { epoch: Epoch(6), leader: Some(hint("b", 6)) });
    assert_eq!(
        out,
        vec![
            Action::Close {
                master: addr("a"),
                reason: "a is not the leader; it names b at epoch 6".into()
            },
            Action::Disconnected {
                reason: "subscription with a lost: a is not the leader; it names b at epoch 6"
                    .into()
            },
            connect("b"),
        ]
    );
    assert_eq!(s.deadline(Timer::Watchdog), None);
    assert_eq!(s.deadline(Timer::Retry), None);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_300)));
    assert_eq!(ev(&mut s, 310, connected("b")), opening("b", Some("f1"), 2));
}

#[test]
fn messages_before_start_are_ignored() {
    let mut s = sub(&["a"]);
    let changed = Message::MasterChanged { epoch: Epoch(3), leader: hint("b", 3), masters: vec![] };
    assert!(msg(&mut s, 0, "a", changed).is_empty());
    assert!(ev(&mut s, 0, connected("a")).is_empty());
    assert_eq!(s.status().attempt, 0);
}

#[test]
fn advertised_masters_are_added_and_tried() {
    let mut s = sub(&["a"]);
    let _ = ev(&mut s, 0, Event::Start);
    let _ = ev(&mut s, 1, connected("a"));
    // a is a standby that knows no leader but advertises d.
    let out = msg(
        &mut s,
        2,
        "a",
        Message::HelloReply(HelloReply {
            role: Role::Master,
            master: MasterId::new("a"),
            leading: false,
            epoch: Epoch(2),
            leader: None,
            masters: vec![addr("a"), addr("d")],
        }),
    );
    assert_eq!(
        out,
        vec![
            Action::Close { master: addr("a"), reason: "a is not the leader".into() },
            connect("d"),
        ]
    );
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_002)));
    assert_eq!(s.known_masters(), &[addr("a"), addr("d")]);
}

#[test]
fn watchdog_fires_after_n_intervals_and_not_before() {
    let mut s = subscribed_with_a(&["a"]);
    // Heartbeats keep it alive (each is answered, so the master's side of
    // the connection never looks idle); the watchdog re-arms from the last one.
    assert_eq!(
        msg(&mut s, 1_100, "a", Message::FrameworkHeartbeat { epoch: Epoch(5) }),
        vec![Action::Send {
            to: addr("a"),
            msg: Message::FrameworkHeartbeatAck { epoch: Epoch(5) }
        }]
    );
    assert_eq!(ev(&mut s, 5_100, Event::Tick), vec![]);
    assert_eq!(s.deadline(Timer::Watchdog), Some(Millis(6_100)));
    // Nothing more: 5 × 1 s after the last heartbeat, not a millisecond earlier.
    assert_eq!(ev(&mut s, 6_099, Event::Tick), vec![]);
    assert_eq!(s.deadline(Timer::Watchdog), Some(Millis(6_100)));
    assert!(s.status().subscribed);
    let out = ev(&mut s, 6_100, Event::Tick);
    assert_eq!(
        out,
        vec![
            Action::Close { master: addr("a"), reason: "no heartbeat for 5000ms".into() },
            Action::Disconnected {
                reason: "subscription with a lost: no heartbeat for 5000ms".into()
            },
        ]
    );
    assert_eq!(s.deadline(Timer::Watchdog), None);
    assert_eq!(s.deadline(Timer::Attempt), None);
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(6_100)));
    assert!(!s.status().subscribed);
}

#[test]
fn heartbeat_timeout_factor_is_configurable() {
    let mut c = cfg(&["a"]);
    c.heartbeat_timeout_factor = 2;
    let mut s = Subscriber::new(c);
    let _ = ev(&mut s, 0, Event::Start);
    let _ = ev(&mut s, 0, connected("a"));
    let _ = msg(&mut s, 0, "a", subscribed(1, 300));
    assert_eq!(s.deadline(Timer::Watchdog), Some(Millis(600)));
    assert!(is_close(&ev(&mut s, 600, Event::Tick)[0], "a"));
}

#[test]
fn seed_scenario_2_missing_heartbeats_close_and_resubscribe() {
    // The master closed the connection; the subscriber never saw it.
    let mut s = subscribed_with_a(&["a"]);
    let out = ev(&mut s, 5_100, Event::Tick);
    assert!(is_close(&out[0], "a"));
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(5_100)));
    let out = ev(&mut s, 5_100, Event::Tick);
    assert_eq!(out, vec![connect("a")]);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(10_100)));
    assert_eq!(ev(&mut s, 5_110, connected("a")), opening("a", Some("f1"), 2));
    let out = msg(&mut s, 5_120, "a", subscribed(5, 1_000));
    assert!(out.iter().any(|a| matches!(a, Action::Subscribed { .. })));
}

#[test]
fn seed_scenario_1_disconnect_seen_by_the_subscriber_resubscribes() {
    let mut s = subscribed_with_a(&["a"]);
    let out = ev(&mut s, 300, Event::Disconnected { master: addr("a") });
    // Already closed: no Close, the program hears of it, a retry is armed.
    assert!(!out.iter().any(|a| matches!(a, Action::Close { .. })));
    assert!(out.iter().any(|a| matches!(a, Action::Disconnected { .. })));
    let _ = ev(&mut s, 500, Event::Tick);
    assert_eq!(ev(&mut s, 501, connected("a")), opening("a", Some("f1"), 2));
}

#[test]
fn seed_scenario_5_timed_out_attempt_is_closed_before_the_next_and_its_answer_ignored() {
    let mut s = sub(&["a"]);
    let _ = ev(&mut s, 0, Event::Start);
    assert_eq!(ev(&mut s, 10, connected("a")), opening("a", None, 1));
    // Attempt A (1) is not answered in time: close A, then (one master only)
    // back off before attempt B.
    assert!(ev(&mut s, 4_999, Event::Tick).is_empty());
    let out = ev(&mut s, 5_000, Event::Tick);
    assert_eq!(
        out,
        vec![Action::Close {
            master: addr("a"),
            reason: "no answer to SUBSCRIBE attempt 1 from a within 5000ms".into()
        },]
    );
    assert_eq!(s.deadline(Timer::Attempt), None);
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(5_200)));
    // A's SUBSCRIBED, sent on the closed connection, is ignored.
    assert!(msg(&mut s, 5_100, "a", subscribed(5, 1_000)).is_empty());
    assert!(!s.status().subscribed);
    // Attempt A went unanswered: B gets twice as long (docs/design.md#progress-when-dependencies-are-slow).
    assert_eq!(ev(&mut s, 5_200, Event::Tick), vec![connect("a")]);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(15_200)));
    // Still dialling B: an answer now cannot be for B.
    assert!(msg(&mut s, 5_201, "a", subscribed(5, 1_000)).is_empty());
    assert_eq!(ev(&mut s, 5_210, connected("a")), opening("a", None, 2));
    // The master accepted A after B and errored B (Mesos' race): retried.
    let out = msg(
        &mut s,
        5_220,
        "a",
        Message::FrameworkError {
            epoch: Epoch(5),
            message: "framework re-subscribed on another connection".into(),
            failed_over_to: Some(ME),
        },
    );
    assert_eq!(
        out,
        vec![
            Action::Error { message: "framework re-subscribed on another connection".into() },
            Action::Close {
                master: addr("a"),
                reason: "master error: framework re-subscribed on another connection".into()
            },
        ]
    );
    assert_eq!(s.deadline(Timer::Attempt), None);
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(5_620)));
    let _ = ev(&mut s, 5_620, Event::Tick);
    assert_eq!(ev(&mut s, 5_630, connected("a")), opening("a", None, 3));
    let out = msg(&mut s, 5_640, "a", subscribed(5, 1_000));
    assert!(out.iter().any(|a| matches!(a, Action::Subscribed { .. })));
}

#[test]
fn backoff_is_capped_and_reset_after_success() {
    let mut c = cfg(&["a"]);
    c.backoff_min = Millis(100);
    c.backoff_max = Millis(1_000);
    let mut s = Subscriber::new(c);
    let _ = ev(&mut s, 0, Event::Start);
    let mut t = 0;
    let mut delays = vec![];
    for _ in 0..7 {
        let out = ev(&mut s, t, failed("a"));
        let Some(at) = s.deadline(Timer::Retry) else { panic!("no retry armed: {out:?}") };
        delays.push(at.0 - t);
        t = at.0;
        let _ = ev(&mut s, t, Event::Tick);
    }
    assert_eq!(delays, vec![100, 200, 400, 800, 1_000, 1_000, 1_000]);
    let _ = ev(&mut s, t, connected("a"));
    let _ = msg(&mut s, t, "a", subscribed(1, 1_000));
    let _ = ev(&mut s, t + 10, Event::Disconnected { master: addr("a") });
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(t + 10)), "a lost subscription: at once");
    let _ = ev(&mut s, t + 10, Event::Tick);
    let _ = ev(&mut s, t + 20, failed("a"));
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(t + 120)), "reset to the minimum");
}

#[test]
fn a_lost_subscription_is_retried_within_reconnect_first_max_then_backs_off() {
    // Default configuration: jittered, seeded.
    for seed in 0..50 {
        let mut c = Config::new("test", "fw", ME, vec![addr("a")]);
        c.seed = seed;
        let mut s = Subscriber::new(c);
        let _ = ev(&mut s, 0, Event::Start);
        let _ = ev(&mut s, 0, connected("a"));
        let _ = msg(&mut s, 0, "a", subscribed(1, 1_000));
        let out = ev(&mut s, 1_000, Event::Disconnected { master: addr("a") });
        let Some(at) = s.deadline(Timer::Retry) else { panic!("no retry armed: {out:?}") };
        assert!(at.0 >= 1_000 && at.0 <= 1_010, "first retry at {at:?}, not within 10 ms");
        // That retry fails too: now the backoff (100–200 ms) applies.
        let _ = ev(&mut s, at.0, Event::Tick);
        let out = ev(&mut s, at.0, failed("a"));
        let Some(next) = s.deadline(Timer::Retry) else { panic!("no retry armed: {out:?}") };
        let delay = next.0 - at.0;
        assert!((100..=200).contains(&delay), "second retry after {delay} ms");
    }
}

#[test]
fn jitter_is_seeded_and_bounded() {
    let run = |seed: u64| {
        let mut c = Config::new("test", "fw", ME, vec![addr("a")]);
        c.seed = seed;
        let mut s = Subscriber::new(c);
        let _ = ev(&mut s, 0, Event::Start);
        let mut t = 0;
        let mut delays = vec![];
        for _ in 0..10 {
            let out = ev(&mut s, t, failed("a"));
            let Some(at) = s.deadline(Timer::Retry) else { panic!("no retry armed: {out:?}") };
            delays.push(at.0 - t);
            t = at.0;
            let _ = ev(&mut s, t, Event::Tick);
        }
        delays
    };
    let d = run(1);
    assert_eq!(d, run(1), "same seed, same delays");
    assert_ne!(d, run(2), "another seed, other delays");
    let mut nominal = 200u64;
    for x in d {
        assert!(nominal / 2 <= x && x <= nominal, "{x} outside 50–100% of {nominal}");
        nominal = (nominal * 2).min(10_000);
    }
}

#[test]
fn failover_to_another_instance_exits_naming_it() {
    // Seed scenario 4: another instance took the framework over.
    let mut s = subscribed_with_a(&["a"]);
    let out = msg(
        &mut s,
        300,
        "a",
        Message::FrameworkError {
            epoch: Epoch(5),
            message: "framework f1 failed over".into(),
            failed_over_to: Some(InstanceId(0xb)),
        },
    );
    let reason = "framework f1 failed over to instance inst-b; this instance inst-7 stops: \
                  framework f1 failed over"
        .to_string();
    assert_eq!(
        out,
        vec![
            Action::Close { master: addr("a"), reason: reason.clone() },
            Action::Exit { reason, failed_over_to: Some(InstanceId(0xb)) },
        ]
    );
    assert!(s.status().exited);
    // Every later event is ignored.
    assert!(ev(&mut s, 400, Event::Tick).is_empty());
    assert!(ev(&mut s, 400, Event::Start).is_empty());
    assert!(msg(&mut s, 400, "a", subscribed(9, 1_000)).is_empty());
    assert!(ev(&mut s, 400, Event::Declare(spec("web", 1))).is_empty());
}

#[test]
fn other_errors_are_reported_and_retried() {
    let mut s = subscribed_with_a(&["a", "b"]);
    let out = msg(
        &mut s,
        300,
        "a",
        Message::FrameworkError {
            epoch: Epoch(5),
            message: "internal".into(),
            failed_over_to: None,
        },
    );
    assert_eq!(
        out,
        vec![
            Action::Error { message: "internal".into() },
            Action::Close { master: addr("a"), reason: "master error: internal".into() },
            Action::Disconnected {
                reason: "subscription with a lost: master error: internal".into()
            },
        ]
    );
    assert_eq!(s.deadline(Timer::Watchdog), None);
    assert_eq!(s.deadline(Timer::Attempt), None);
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(500)));
    assert!(!s.status().exited);
    // The next round starts with the master that errored (it leads).
    assert_eq!(ev(&mut s, 500, Event::Tick), vec![connect("a")]);
    assert_eq!(s.deadline(Timer::Attempt), Some(Millis(5_500)));
}

#[test]
fn leader_suspended_is_retried() {
    let mut s = sub(&["a"]);
    let _ = ev(&mut s, 0, Event::Start);
    let _ = ev(&mut s, 0, connected("a"));
    let out = msg(&mut s, 10, "a", Message::LeaderSuspended { epoch: Epoch(2) });
    assert_eq!(out, vec![Action::Close { master: addr("a"), reason: "leader suspended".into() },]);
    assert_eq!(s.deadline(Timer::Attempt), None);
    assert_eq!(s.deadline(Timer::Retry), Some(Millis(210)));
    let _ = ev(&mut s, 210, Event::Tick);
    assert_eq!(ev(&mut s, 211, connected("a")), opening("a", None, 2));
}

#[test]
fn lower_epoch_messages_are_ignored() {
    let mut s = subscribed_with_a(&["a", "b"]);
    let info = ExecutorInfo {
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        id: ExecutorId::new("e1"),
        group: "web".into(),
        slot: 0,
        worker: Some(WorkerId::new("w1")),
        state: ExecutorState::Running,
    };
    let old = [
        Message::FrameworkHeartbeat { epoch: Epoch(4) },
        Message::ExecutorUpdate { epoch: Epoch(4), info: info.clone() },
        Message::FrameworkError {
            epoch: Epoch(4),
            message: "x".into(),
            failed_over_to: Some(InstanceId(1)),
        },
        Message::MasterChanged { epoch: Epoch(4), leader: hint("b", 4), masters: vec![] },
        Message::LeaderSuspended { epoch: Epoch(4) },
        Message::NotLeader { epoch: Epoch(4), leader: Some(hint("b", 4)) },
        subscribed(4, 1_000),
    ];
    for m in old {
        assert!(msg(&mut s, 1_000, "a", m.clone()).is_empty(), "{m:?}");
    }
    // A stale heartbeat does not feed the watchdog.
    let out = ev(&mut s, 5_100, Event::Tick);
    assert!(is_close(&out[0], "a"));
    // The current epoch is honoured.
    let mut s = subscribed_with_a(&["a", "b"]);
    assert_eq!(
        msg(&mut s, 1_000, "a", Message::ExecutorUpdate { epoch: Epoch(5), info: info.clone() }),
        vec![Action::ExecutorUpdate(info)]
    );
    assert!(s.status().subscribed && !s.status().exited);
}

#[test]
fn declarations_are_resent_after_every_resubscription() {
    let mut s = sub(&["a"]);
    // Declared before the first subscription: sent once subscribed.
    assert!(ev(&mut s, 0, Event::Declare(spec("web", 2))).is_empty());
    let _ = ev(&mut s, 0, Event::Start);
    let _ = ev(&mut s, 1, connected("a"));
    let out = msg(&mut s, 2, "a", subscribed(1, 1_000));
    assert_eq!(
        out.last(),
        Some(&send("a", Message::DeclareGroup { request: 1, spec: spec("web", 2) }))
    );
    // Declared while subscribed: sent at once, with the next id.
    assert_eq!(
        ev(&mut s, 3, Event::Declare(spec("db", 1))),
        vec![send("a", Message::DeclareGroup { request: 2, spec: spec("db", 1) })]
    );
    assert_eq!(
        msg(&mut s, 4, "a", Message::RequestAccepted { epoch: Epoch(1), request: 1 }),
        vec![Action::RequestAccepted {
            request: 1,
            command: Request::Declare { group: "web".into() }
        }]
    );
    // A repeated answer is not reported twice.
    assert!(
        msg(&mut s, 4, "a", Message::RequestAccepted { epoch: Epoch(1), request: 1 }).is_empty()
    );
    // Failover to a new leader: every declaration again, fresh ids, after
    // Subscribed (so the master adopts the running executors).
    let _ = msg(
        &mut s,
        5,
        "a",
        Message::MasterChanged { epoch: Epoch(2), leader: hint("b", 2), masters: vec![] },
    );
    assert_eq!(ev(&mut s, 6, connected("b")), opening("b", Some("f1"), 2));
    let out = msg(&mut s, 7, "b", subscribed(2, 1_000));
    let sends: Vec<&Action> = out.iter().filter(|a| matches!(a, Action::Send { .. })).collect();
    assert_eq!(
        sends,
        vec![
            &send("b", Message::DeclareGroup { request: 3, spec: spec("db", 1) }),
            &send("b", Message::DeclareGroup { request: 4, spec: spec("web", 2) }),
        ]
    );
    assert!(matches!(out[0], Action::Subscribed { .. }), "Subscribed first");
    // A refused declaration is forgotten.
    let out = msg(
        &mut s,
        8,
        "b",
        Message::RequestRefused { epoch: Epoch(2), request: 3, reason: "no such command".into() },
    );
    assert_eq!(
        out,
        vec![Action::RequestRefused {
            request: 3,
            command: Request::Declare { group: "db".into() },
            reason: "no such command".into()
        }]
    );
    assert_eq!(s.declarations().cloned().collect::<Vec<_>>(), vec![spec("web", 2)]);
}

#[test]
fn kills_are_queued_until_answered_and_teardown_exits() {
    let mut s = sub(&["a"]);
    let _ = ev(&mut s, 0, Event::Start);
    assert!(ev(&mut s, 0, Event::Kill(ExecutorId::new("e1"))).is_empty());
    let _ = ev(&mut s, 1, connected("a"));
    let out = msg(&mut s, 2, "a", subscribed(1, 1_000));
    assert_eq!(
        out.last(),
        Some(&send("a", Message::KillExecutor { request: 1, executor: ExecutorId::new("e1") }))
    );
    // Unanswered when the subscription is lost: sent again after it.
    let _ = ev(&mut s, 3, Event::Disconnected { master: addr("a") });
    let _ = ev(&mut s, 203, Event::Tick);
    let _ = ev(&mut s, 204, connected("a"));
    let out = msg(&mut s, 205, "a", subscribed(1, 1_000));
    assert_eq!(
        out.last(),
        Some(&send("a", Message::KillExecutor { request: 2, executor: ExecutorId::new("e1") }))
    );
    // The answer to the first send (another connection) is unknown: ignored.
    assert!(
        msg(&mut s, 206, "a", Message::RequestAccepted { epoch: Epoch(1), request: 1 }).is_empty()
    );
    assert_eq!(
        msg(&mut s, 207, "a", Message::RequestAccepted { epoch: Epoch(1), request: 2 }),
        vec![Action::RequestAccepted {
            request: 2,
            command: Request::Kill { executor: ExecutorId::new("e1") }
        }]
    );
    assert_eq!(ev(&mut s, 208, Event::Teardown), vec![send("a", Message::Teardown { request: 3 })]);
    let out = msg(&mut s, 209, "a", Message::RequestAccepted { epoch: Epoch(1), request: 3 });
    assert_eq!(
        out,
        vec![
            Action::RequestAccepted { request: 3, command: Request::Teardown },
            Action::Close { master: addr("a"), reason: "framework f1 torn down".into() },
            Action::Exit { reason: "framework f1 torn down".into(), failed_over_to: None },
        ]
    );
    assert!(s.status().exited);
}

#[test]
fn slot_failures_and_snapshots_reach_the_program() {
    let mut s = sub(&["a"]);
    let _ = ev(&mut s, 0, Event::Start);
    let _ = ev(&mut s, 1, connected("a"));
    let info = ExecutorInfo {
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        id: ExecutorId::new("e1"),
        group: "web".into(),
        slot: 0,
        worker: Some(WorkerId::new("w1")),
        state: ExecutorState::Running,
    };
    // Before Subscribed, executor news is not for us yet.
    assert!(msg(&mut s, 2, "a", Message::ExecutorUpdate { epoch: Epoch(1), info: info.clone() })
        .is_empty());
    let out = msg(
        &mut s,
        3,
        "a",
        Message::Subscribed {
            epoch: Epoch(1),
            framework: FrameworkId::new("f1"),
            heartbeat_interval: Millis(1_000),
            executors: vec![info.clone()],
        },
    );
    assert_eq!(
        out.last(),
        Some(&Action::Subscribed {
            framework: FrameworkId::new("f1"),
            master: addr("a"),
            executors: vec![info]
        })
    );
    assert_eq!(
        msg(
            &mut s,
            4,
            "a",
            Message::SlotFailed {
                epoch: Epoch(1),
                group: "web".into(),
                slot: 1,
                reason: "no worker fits".into()
            }
        ),
        vec![Action::SlotFailed { group: "web".into(), slot: 1, reason: "no worker fits".into() }]
    );
}

// ----- property: one subscription at a time ------------------------------------

#[derive(Clone, Debug)]
enum Step {
    Connected(u8),
    ConnectFailed(u8),
    Disconnected(u8),
    Msg(u8, u8, u8),
    /// Time passes to the subscriber's next deadline, which fires.
    Tick,
    Declare(u8),
    Kill,
    Advance(u16),
}

impl Arbitrary for Step {
    fn arbitrary(g: &mut Gen) -> Self {
        // 0..=2: the current connection's master; 3, 4: b, c.
        let m = u8::arbitrary(g) % 5;
        // Weighted toward progress (dial answered, subscription answered) so
        // that most cases subscribe several times.
        match u8::arbitrary(g) % 14 {
            0..=2 => Step::Connected(m),
            3 => Step::ConnectFailed(m),
            4 => Step::Disconnected(m),
            5..=9 => Step::Msg(m, u8::arbitrary(g), u8::arbitrary(g) % 4),
            10 | 11 => Step::Tick,
            12 => {
                if bool::arbitrary(g) {
                    Step::Declare(u8::arbitrary(g) % 3)
                } else {
                    Step::Kill
                }
            }
            _ => Step::Advance(u16::arbitrary(g)),
        }
    }
}

const MASTERS: [&str; 3] = ["a", "b", "c"];

fn random_msg(kind: u8, epoch: u8) -> Message {
    let e = Epoch(u64::from(epoch));
    let other = MASTERS[(kind as usize / 16) % 3];
    match kind % 12 {
        0 | 10 | 11 => subscribed(u64::from(epoch), 1_000),
        1 => Message::FrameworkHeartbeat { epoch: e },
        2 => Message::NotLeader { epoch: e, leader: Some(hint(other, u64::from(epoch))) },
        3 => Message::NotLeader { epoch: e, leader: None },
        4 => Message::MasterChanged {
            epoch: e,
            leader: hint(other, u64::from(epoch)),
            masters: vec![addr("d")],
        },
        5 => Message::FrameworkError {
            epoch: e,
            message: "x".into(),
            failed_over_to: if (kind / 12).is_multiple_of(4) { Some(InstanceId(1)) } else { None },
        },
        6 => Message::LeaderSuspended { epoch: e },
        7 => Message::HelloReply(HelloReply {
            role: Role::Master,
            master: MasterId::new(other),
            leading: kind.is_multiple_of(2),
            epoch: e,
            leader: Some(hint(other, u64::from(epoch))),
            masters: vec![addr(other)],
        }),
        8 => Message::RequestAccepted { epoch: e, request: u64::from(kind % 5) },
        _ => Message::Teardown { request: 1 },
    }
}

#[test]
fn never_subscribes_while_an_older_connection_is_open() {
    fn prop(steps: Vec<Step>) -> bool {
        let mut s = Subscriber::new(Config::new(
            "test",
            "fw",
            ME,
            MASTERS.iter().map(|m| addr(m)).collect(),
        ));
        // Connections the subscriber opened and has not closed (nor been told
        // are closed), oldest first.
        let mut open: Vec<Addr> = Vec::new();
        let mut t = 0u64;
        let mut exited = false;
        let mut last_attempt = 0u64;
        let mut framework: Option<FrameworkId> = None;
        let steps = std::iter::once(None).chain(steps.into_iter().map(Some));
        for st in steps {
            // Deliveries are biased toward the master of the current
            // connection (as it is now) so the interesting paths are exercised.
            let cur = s.status().master;
            let pick = |m: u8| {
                if m < 3 {
                    cur.clone().unwrap_or_else(|| addr("a"))
                } else {
                    addr(MASTERS[m as usize - 2])
                }
            };
            let event = match st {
                None => Event::Start,
                Some(Step::Connected(m)) => Event::Connected { master: pick(m) },
                Some(Step::ConnectFailed(m)) => Event::ConnectFailed { master: pick(m) },
                Some(Step::Disconnected(m)) => Event::Disconnected { master: pick(m) },
                Some(Step::Msg(m, kind, epoch)) => {
                    Event::Message { from: pick(m), msg: random_msg(kind, epoch) }
                }
                Some(Step::Tick) => {
                    if let Some(at) = s.poll_timeout() {
                        // `t` grows by one below, to the deadline.
                        t = t.max(at.0.saturating_sub(1));
                    }
                    Event::Tick
                }
                Some(Step::Declare(g)) => Event::Declare(spec(["x", "y", "z"][g as usize], 1)),
                Some(Step::Kill) => Event::Kill(ExecutorId::new("e")),
                Some(Step::Advance(d)) => {
                    t += u64::from(d);
                    continue;
                }
            };
            t += 1;
            // The runtime's view: a reported close ends that connection.
            if let Event::ConnectFailed { master } | Event::Disconnected { master } = &event {
                if open.first() == Some(master) {
                    open.remove(0);
                } else {
                    // Not a connection the subscriber holds: do not feed it
                    // (a real runtime only reports its own connections).
                    continue;
                }
            }
            if let Event::Connected { master } = &event {
                if open.first() != Some(master) {
                    continue;
                }
            }
            let out = s.handle(Millis(t), event);
            if exited && !out.is_empty() {
                return false; // acted after Exit
            }
            for a in out {
                match a {
                    Action::Connect { master } => {
                        if !open.is_empty() {
                            return false; // a second connection
                        }
                        open.push(master);
                    }
                    Action::Close { master, .. } => {
                        if open.first() != Some(&master) {
                            return false; // closed something it does not hold
                        }
                        open.remove(0);
                    }
                    // SUBSCRIBE with an older connection still open.
                    Action::Send { to, msg: Message::Subscribe(_) }
                        if open.as_slice() != std::slice::from_ref(&to) =>
                    {
                        return false
                    }
                    // Attempts strictly grow; a framework id, once assigned,
                    // is carried by every later SUBSCRIBE.
                    Action::Send { msg: Message::Subscribe(sub), .. } => {
                        if sub.attempt <= last_attempt || sub.framework != framework {
                            return false;
                        }
                        last_attempt = sub.attempt;
                    }
                    Action::Subscribed { framework: f, .. } => framework = Some(f),
                    Action::Exit { .. } => exited = true,
                    _ => {}
                }
            }
            if s.status().exited != exited {
                return false;
            }
        }
        true
    }
    QuickCheck::new().tests(3_000).rng(Gen::new(300)).quickcheck(prop as fn(Vec<Step>) -> bool);
}

#[test]
fn learned_masters_the_leader_stops_listing_are_not_tried_again() {
    let changed = |masters: &[&str]| Message::MasterChanged {
        epoch: Epoch(5),
        leader: hint("a", 5),
        masters: masters.iter().map(|m| addr(m)).collect(),
    };
    // The subscription drops; the masters of the next round, in order.
    let round = |s: &mut Subscriber| {
        let _ = ev(s, 300, Event::Disconnected { master: addr("a") });
        let mut dialled = vec![];
        let mut out = ev(s, 300, Event::Tick);
        while let Some(Action::Connect { master }) = out.first().cloned() {
            dialled.push(master.clone());
            out = ev(s, 310, failed(master.as_str()));
            out.retain(|a| matches!(a, Action::Connect { .. }));
        }
        dialled
    };
    let mut s = subscribed_with_a(&["a"]);
    let _ = msg(&mut s, 200, "a", changed(&["a", "b"]));
    assert_eq!(round(&mut s), vec![addr("a"), addr("b")], "a listed master is tried");

    let mut s = subscribed_with_a(&["a"]);
    let _ = msg(&mut s, 200, "a", changed(&["a", "b"]));
    let _ = msg(&mut s, 250, "a", changed(&["a"]));
    assert_eq!(round(&mut s), vec![addr("a")], "b left the election; the configured a is kept");
}

/// Runs a subscriber of the single master `a`, whose every SUBSCRIBE is
/// answered `Subscribed` only `write` after it arrived (the master makes
/// each attempt durable first, and its store takes that long; an answer on
/// a connection the subscriber closed is never fed, as the runtime
/// guarantees). Dials complete in 1 ms. Returns when it was subscribed (if
/// by `until`) and the nominal timeout of each attempt, in order.
fn against_a_slow_store(
    cfg: Config,
    write: Millis,
    until: Millis,
) -> (Option<Millis>, Vec<Millis>) {
    let mut s = Subscriber::new(cfg);
    let mut deliveries: Vec<(Millis, u64, Event)> = Vec::new();
    let (mut gen, mut live) = (0u64, None::<u64>);
    let mut timeouts = Vec::new();
    let mut now = Millis::ZERO;
    let mut actions = s.handle(now, Event::Start);
    loop {
        for a in std::mem::take(&mut actions) {
            match a {
                Action::Connect { master } => {
                    gen += 1;
                    live = Some(gen);
                    timeouts.push(s.attempt_timeout());
                    deliveries.push((now + Millis(1), gen, Event::Connected { master }));
                }
                Action::Close { .. } => live = None,
                Action::Send { to, msg: Message::Subscribe(_) } => {
                    let answer = Event::Message { from: to, msg: subscribed(5, 1_000) };
                    deliveries.push((now + write, gen, answer));
                }
                Action::Subscribed { .. } => return (Some(now), timeouts),
                _ => {}
            }
        }
        // The earliest timer, or else the earliest delivery; a timer due at
        // the same instant as an answer fires first (the pessimistic order).
        let timer = s.poll_timeout();
        let delivery = (0..deliveries.len()).min_by_key(|i| deliveries[*i].0);
        match (timer, delivery) {
            (Some(at), d) if d.is_none_or(|i| at <= deliveries[i].0) => {
                if at > until {
                    return (None, timeouts);
                }
                now = now.max(at);
                actions = s.handle(now, Event::Tick);
            }
            (_, Some(i)) => {
                let (at, g, event) = deliveries.remove(i);
                if at > until {
                    return (None, timeouts);
                }
                now = now.max(at);
                if live == Some(g) {
                    actions = s.handle(now, event);
                }
            }
            _ => return (None, timeouts),
        }
    }
}

/// Issue 20 (docs/design.md#issue-20), scenario 8: a master whose store takes 10 s to make a
/// SUBSCRIBE durable. With a fixed 5 s attempt timeout every attempt was
/// abandoned just before its answer, and the next one made the master
/// write again: never subscribed. Each unanswered attempt now doubles the
/// next one's timeout (jittered, capped at 30 s), so it subscribes.
#[test]
fn issue_20_a_store_write_of_10_s_still_subscribes() {
    let mut c = Config::new("test", "fw", ME, vec![addr("a")]);
    c.seed = 20;
    let (at, timeouts) = against_a_slow_store(c, Millis::from_secs(10), Millis::from_secs(120));
    let at = at.unwrap_or_else(|| panic!("never subscribed; attempt timeouts {timeouts:?}"));
    assert!(at <= Millis::from_secs(60), "subscribed only at {at}");
    assert_eq!(
        &timeouts[..2],
        &[Millis::from_secs(5), Millis::from_secs(10)],
        "each unanswered attempt doubles the next one's timeout"
    );
    assert!(timeouts.len() <= 3, "attempts: {timeouts:?}");
}

/// The grown attempt timeout stops at `subscribe_timeout_max` (a master
/// that never answers is still retried, about every 30 s), and a
/// `Subscribed` brings it back to `subscribe_timeout`.
#[test]
fn the_attempt_timeout_is_capped_and_reset_by_a_subscription() {
    let c = cfg(&["a"]);
    let (max, first) = (c.subscribe_timeout_max, c.subscribe_timeout);
    let (at, timeouts) = against_a_slow_store(c, Millis::MAX, Millis::from_secs(600));
    assert_eq!(at, None);
    assert!(timeouts.len() > 10, "still retrying: {timeouts:?}");
    assert!(timeouts.iter().all(|t| *t <= max), "{timeouts:?}");
    assert_eq!(timeouts.last(), Some(&max));

    let mut s = sub(&["a"]);
    let _ = ev(&mut s, 0, Event::Start);
    let _ = ev(&mut s, 10, connected("a"));
    let _ = ev(&mut s, 5_010, Event::Tick);
    assert_eq!(s.attempt_timeout(), first.times(2));
    let _ = ev(&mut s, 5_210, Event::Tick);
    let _ = ev(&mut s, 5_220, connected("a"));
    let _ = msg(&mut s, 5_300, "a", subscribed(5, 1_000));
    assert!(s.status().subscribed);
    assert_eq!(s.attempt_timeout(), first);
}

/// Issue 20 (docs/design.md#issue-20), scenario 8 (sim seed 8, docs/design.md#simulator-seeds `--slow-store`): a leader whose store
/// is slower than the largest attempt timeout still subscribes the
/// framework, with one attempt. The leader heartbeats the subscription it
/// accepted while it makes it durable; each heartbeat pushes the attempt's
/// deadline on, so the subscriber never abandons the attempt and never
/// makes the master queue a second write behind the first.
#[test]
fn issue_20_a_leader_that_heartbeats_a_pending_subscribe_is_waited_for() {
    let mut s = sub(&["a"]);
    let _ = ev(&mut s, 0, Event::Start);
    let _ = ev(&mut s, 10, connected("a"));
    let max = s.attempt_timeout().max(Config::new("t", "f", ME, vec![]).subscribe_timeout_max);
    let mut t = 1_000;
    while Millis(t) < max.times(2) {
        let out = msg(&mut s, t, "a", Message::FrameworkHeartbeat { epoch: Epoch(5) });
        assert!(
            out.iter().any(|a| matches!(
                a,
                Action::Send { msg: Message::FrameworkHeartbeatAck { .. }, .. }
            )),
            "the heartbeat is answered: {out:?}"
        );
        // The attempt's timer, as first armed or any later: stale now.
        let out = ev(&mut s, t + 500, Event::Tick);
        assert!(
            !out.iter().any(|a| matches!(a, Action::Close { .. } | Action::Connect { .. })),
            "abandoned at {t} ms though the leader heartbeats it: {out:?}"
        );
        t += 1_000;
    }
    let _ = msg(&mut s, t, "a", subscribed(5, 1_000));
    assert!(s.status().subscribed);

    // Without heartbeats the attempt is abandoned at its timeout.
    let mut s = sub(&["a"]);
    let _ = ev(&mut s, 0, Event::Start);
    let _ = ev(&mut s, 10, connected("a"));
    let out = ev(&mut s, 5_010, Event::Tick);
    assert!(out.iter().any(|a| matches!(a, Action::Close { .. })), "{out:?}");
}

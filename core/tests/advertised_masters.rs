//! Issue 20 (docs/design.md#issue-20), scenario 5: the masters a peer advertises are bounded. One
//! `HelloReply`, `MasterChanged`, `Registered` or callback hint listing
//! 20,000 addresses made a worker dial 20,000 addresses (and a subscriber
//! try each one); nothing bounded an address's length. Such a message is
//! now ignored as a whole, reported and counted, and a leader never
//! advertises past the limits itself.

mod common;

use common::*;
use regent_core::ids::InstanceId;
use regent_core::limits::{MAX_ADDR_BYTES, MAX_ADVERTISED_MASTERS};
use regent_core::master;
use regent_core::protocol::{HelloReply, LeaderHint, Message, Role};
use regent_core::subscriber::{self, Subscriber};
use regent_core::worker::{self, Worker};
use regent_core::{Addr, Epoch, MasterId, Millis};

const T0: Millis = Millis(0);

/// `n` distinct master addresses.
fn many(n: usize) -> Vec<Addr> {
    (0..n).map(|i| addr(&format!("10.{}.{}.{}:7077", i >> 16, (i >> 8) & 255, i & 255))).collect()
}

/// An address one byte past the limit.
fn too_long() -> Addr {
    addr(&format!("{}:7077", "h".repeat(MAX_ADDR_BYTES - 4)))
}

fn leading_reply(from: &str, masters: Vec<Addr>) -> Message {
    Message::HelloReply(HelloReply {
        role: Role::Master,
        master: MasterId::new(from),
        leading: true,
        epoch: Epoch(3),
        leader: Some(LeaderHint { id: MasterId::new(from), addr: addr(from), epoch: Epoch(3) }),
        masters,
    })
}

fn master_changed(leader: Addr, masters: Vec<Addr>) -> Message {
    Message::MasterChanged {
        epoch: Epoch(4),
        leader: LeaderHint { id: MasterId::new("new"), addr: leader, epoch: Epoch(4) },
        masters,
    }
}

fn w_dials(out: &[worker::Action]) -> usize {
    out.iter().filter(|a| matches!(a, worker::Action::Connect { .. })).count()
}

fn w_rejections(out: &[worker::Action]) -> Vec<String> {
    out.iter()
        .filter_map(|a| match a {
            worker::Action::Rejected { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

/// A worker of master `a`, connected to it, nothing heard yet.
fn connected_worker() -> Worker {
    let mut w = worker("w1", 7, &["a"]);
    let _ = w.handle(T0, worker::Event::Start);
    let _ = w.handle(T0, worker::Event::Connected { master: addr("a") });
    w
}

#[test]
fn issue_20_a_hello_reply_listing_20000_masters_makes_the_worker_dial_none() {
    let mut w = connected_worker();
    let out = from(&mut w, T0, "a", leading_reply("a", many(20_000)));
    assert_eq!(w_dials(&out), 0, "dialled {} masters", w_dials(&out));
    let why = w_rejections(&out);
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(why[0].contains("20000 masters") && why[0].contains("MAX_ADVERTISED_MASTERS"));
    assert_eq!(w.rejected(), 1);
    assert_eq!(w.known_masters().count(), 1, "nothing learned");
    assert!(w_registrations(&out).is_empty(), "the whole message is ignored");
}

#[test]
fn issue_20_master_changed_registered_and_hints_past_the_limits_are_ignored_by_the_worker() {
    let mut w = connected_worker();
    // An address one byte too long, in a MasterChanged.
    let out = from(&mut w, T0, "a", master_changed(addr("a"), vec![addr("a"), too_long()]));
    assert_eq!(w_dials(&out), 0);
    assert!(w_rejections(&out)[0].contains("MAX_ADDR_BYTES"), "{out:?}");
    // A leader hint whose own address is too long.
    let out = from(&mut w, T0, "a", master_changed(too_long(), vec![addr("a")]));
    assert_eq!((w_dials(&out), w_rejections(&out).len()), (0, 1));
    // A Registered listing too many.
    let registered = Message::Registered {
        epoch: Epoch(3),
        heartbeat_interval: Millis(1_000),
        duplicate: false,
        masters: many(MAX_ADVERTISED_MASTERS + 1),
    };
    let out = from(&mut w, T0, "a", registered);
    assert_eq!((w_dials(&out), w_rejections(&out).len()), (0, 1));
    assert!(!w.status().registered, "the whole message is ignored");
    // A callback hint listing 20,000.
    let hint = LeaderHint { id: MasterId::new("b"), addr: addr("b"), epoch: Epoch(9) };
    let out = w.handle(T0, worker::Event::Hint { leader: hint, masters: many(20_000) });
    assert_eq!((w_dials(&out), w_rejections(&out).len()), (0, 1));
    assert_eq!(w.rejected(), 4);
    assert_eq!(w.known_masters().count(), 1);
}

#[test]
fn a_list_at_the_limit_is_learned() {
    let mut w = connected_worker();
    let mut masters = many(MAX_ADVERTISED_MASTERS - 1);
    masters.push(addr("a"));
    let out = from(&mut w, T0, "a", leading_reply("a", masters));
    assert_eq!(w_dials(&out), MAX_ADVERTISED_MASTERS - 1);
    assert!(w_rejections(&out).is_empty());
    assert_eq!(w_registrations(&out), vec![addr("a")]);
}

fn subscriber_of_a() -> Subscriber {
    let mut s =
        Subscriber::new(subscriber::Config::new("test", "fw", InstanceId(7), vec![addr("a")]));
    let _ = s.handle(T0, subscriber::Event::Start);
    let _ = s.handle(T0, subscriber::Event::Connected { master: addr("a") });
    s
}

fn s_msg(s: &mut Subscriber, from: &str, msg: Message) -> Vec<subscriber::Action> {
    s.handle(T0, subscriber::Event::Message { from: addr(from), msg })
}

fn s_rejections(out: &[subscriber::Action]) -> usize {
    out.iter().filter(|a| matches!(a, subscriber::Action::Rejected { .. })).count()
}

#[test]
fn issue_20_the_subscriber_learns_nothing_from_lists_past_the_limits() {
    let mut s = subscriber_of_a();
    let out = s_msg(&mut s, "a", leading_reply("a", many(20_000)));
    assert_eq!(s_rejections(&out), 1, "{:?}", &out[..out.len().min(3)]);
    assert_eq!(s.known_masters(), &[addr("a")], "no master learned");
    // A MasterChanged naming a leader whose address is too long: not
    // followed (no Close, no Connect).
    let out = s_msg(&mut s, "a", master_changed(too_long(), vec![addr("a")]));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(s_rejections(&out), 1);
    // A NotLeader hint with a long address is not followed either.
    let not_leader = Message::NotLeader {
        epoch: Epoch(3),
        leader: Some(LeaderHint { id: MasterId::new("x"), addr: too_long(), epoch: Epoch(5) }),
    };
    let out = s_msg(&mut s, "a", not_leader);
    assert!(!out.iter().any(|a| matches!(a, subscriber::Action::Connect { .. })), "{out:?}");
    assert_eq!(s.rejected(), 3);
    // Within the limits, as before: learned.
    let out = s_msg(&mut s, "a", leading_reply("a", vec![addr("a"), addr("b")]));
    assert_eq!(s_rejections(&out), 0);
    assert_eq!(s.known_masters(), &[addr("a"), addr("b")]);
}

/// The master's own listing (every candidate of its election) keeps its
/// own address and the first candidates, within the limits its peers
/// check, so a crowded or broken election never makes the leader's every
/// reply one that peers ignore.
#[test]
fn issue_20_the_master_advertises_within_the_limits_whatever_its_election_lists() {
    let mut m = master("a");
    let _ = elect(&mut m, T0, 1);
    let mut addrs = vec![too_long()];
    addrs.extend(many(20_000));
    let rejected = m.metrics().rejected;
    let _ = m.handle(T0, master::Event::Masters { addrs });
    assert_eq!(m.metrics().rejected, rejected + 1, "the cut is counted");
    let reply = connect_worker(&mut m, T0, 1, "w1");
    let Message::HelloReply(reply) = reply else { panic!("{reply:?}") };
    assert_eq!(reply.masters.len(), MAX_ADVERTISED_MASTERS);
    assert!(reply.masters.contains(&addr("a")), "its own address is kept");
    assert!(!reply.masters.contains(&too_long()));
    // What it advertises, a worker takes.
    let mut w = connected_worker();
    let out = from(&mut w, T0, "a", Message::HelloReply(reply));
    assert!(w_rejections(&out).is_empty());
}

fn standby_reply(from: &str, masters: Vec<Addr>) -> Message {
    Message::HelloReply(HelloReply {
        role: Role::Master,
        master: MasterId::new(from),
        leading: false,
        epoch: Epoch(3),
        leader: None,
        masters,
    })
}

/// However many messages bring new masters (each within the limit), a
/// worker keeps at most its configured masters plus MAX_ADVERTISED_MASTERS
/// learned ones, and dials no more.
#[test]
fn issue_20_many_lists_within_the_limit_still_bound_what_the_worker_dials() {
    let mut w = connected_worker();
    let all = many(3 * MAX_ADVERTISED_MASTERS);
    let mut dials = 0;
    let mut rejected = 0;
    for chunk in all.chunks(MAX_ADVERTISED_MASTERS) {
        let out = from(&mut w, T0, "a", standby_reply("a", chunk.to_vec()));
        dials += w_dials(&out);
        rejected += w_rejections(&out).len();
    }
    assert_eq!(dials, MAX_ADVERTISED_MASTERS);
    assert_eq!(w.known_masters().count(), 1 + MAX_ADVERTISED_MASTERS);
    assert_eq!(rejected, 2, "one report per message past the bound");
}

/// The same for a subscriber: each standby it tries names 64 new masters
/// (the hostile ones among them answer the same way); it learns at most its
/// configured masters plus MAX_ADVERTISED_MASTERS.
#[test]
fn issue_20_many_lists_within_the_limit_still_bound_what_the_subscriber_learns() {
    let mut s = subscriber_of_a();
    let all = many(3 * MAX_ADVERTISED_MASTERS);
    let mut rejected = 0;
    for chunk in all.chunks(MAX_ADVERTISED_MASTERS) {
        let current = s.status().master.expect("an attempt in progress");
        let _ = s.handle(T0, subscriber::Event::Connected { master: current.clone() });
        let out = s_msg(&mut s, current.as_str(), standby_reply(current.as_str(), chunk.to_vec()));
        rejected += s_rejections(&out);
    }
    assert_eq!(s.known_masters().len(), 1 + MAX_ADVERTISED_MASTERS);
    assert_eq!(rejected, 2);
}

//! Elector scenarios, driven through the ZooKeeper model (`testkit::zk`).

use super::*;
use crate::testkit::zk::Sim;
use crate::zk::{CreateMode, RequestId, WatchEvent, ZkOp, ZkReply, ZkResult};

fn is_candidate_create(op: &ZkOp) -> bool {
    matches!(op, ZkOp::Create { mode: CreateMode::EphemeralSequential, .. })
}

fn candidate_creates(sim: &Sim, i: usize) -> usize {
    sim.members[i].sent.iter().filter(|(_, _, op)| is_candidate_create(op)).count()
}

fn elected_count(sim: &Sim, i: usize) -> usize {
    sim.members[i]
        .leadership_outcomes()
        .iter()
        .filter(|a| matches!(a, Action::Elected { .. }))
        .count()
}

fn token(sim: &Sim, i: usize) -> String {
    format!("_c_{:016x}.", sim.members[i].elector.config().guid)
}

/// Paths member `i` waited on: the data watches a candidate leaves on its
/// predecessor and the leader. (A leader's watch on its own node is an
/// `Exists` watch, set only once it leads: it waits for nothing.)
fn watched(sim: &Sim, i: usize) -> Vec<String> {
    sim.members[i]
        .sent
        .iter()
        .filter_map(|(_, _, op)| match op {
            ZkOp::GetData { path, watch: true } => Some(path.clone()),
            _ => None,
        })
        .collect()
}

/// Advances in ticks, checking at most one elector acts at every step.
fn advance_checked(sim: &mut Sim, dur: Millis) {
    let end = sim.now + dur;
    while sim.now < end {
        sim.tick();
        assert!(sim.acting().len() <= 1, "two leaders at {}", sim.now);
    }
}

#[test]
fn aurora_1061_connection_loss_during_create_keeps_one_candidate() {
    let mut sim = Sim::new(3, |_| {});
    sim.lose_next_reply(0, is_candidate_create);
    sim.start();
    advance_checked(&mut sim, Millis(1_000));
    // The create was applied although member 0 saw ConnectionLoss ...
    assert_eq!(candidate_creates(&sim, 0), 1, "no blind second create");
    // ... and after reconnecting it adopted that node.
    assert_eq!(sim.candidates().len(), 3);
    assert_eq!(sim.nodes_of(0).len(), 1);
    let node = sim.members[0].elector.node_path();
    assert_eq!(node.as_ref(), sim.nodes_of(0).first());
    // The round after reconnecting: Sync, then list, then watches or
    // leadership; never a create.
    let ops: Vec<&ZkOp> = sim.members[0].sent.iter().map(|(_, _, op)| op).collect();
    let create_at = ops.iter().position(|op| is_candidate_create(op)).unwrap();
    assert!(matches!(ops[create_at + 1], ZkOp::Sync { .. }), "{ops:?}");
    assert!(matches!(ops[create_at + 2], ZkOp::GetChildren { .. }));
    // Member 0 created first, so it leads, once; nobody else was elected.
    assert_eq!(sim.acting(), vec![0]);
    assert_eq!(elected_count(&sim, 0), 1);
    assert_eq!(elected_count(&sim, 1) + elected_count(&sim, 2), 0);
    // Everyone agrees who leads.
    for i in 0..3 {
        let last = sim.members[i].leadership_outcomes().into_iter().rev().find_map(|a| match a {
            Action::LeaderNamed { id, .. } => Some(id),
            _ => None,
        });
        assert_eq!(last, Some(MasterId::new("m0")), "member {i}");
    }
}

#[test]
fn aurora_1061_knob_reproduces_the_deadlock() {
    let mut sim = Sim::new(3, |c| c.unsafe_no_adopt_after_connection_loss = true);
    sim.lose_next_reply(0, is_candidate_create);
    sim.start();
    sim.advance(Millis(3_000));
    // The old behaviour: a second node for the same live session, the first
    // one (the lowest) leads in everyone's eyes, and member 0 waits on it.
    assert_eq!(candidate_creates(&sim, 0), 2);
    assert_eq!(sim.nodes_of(0).len(), 2);
    assert_eq!(sim.candidates().len(), 4);
    assert!(sim.acting().is_empty(), "deadlock: nobody leads");
    let lowest = format!("{}/{}", sim.election_path(), sim.candidates()[0]);
    assert!(sim.nodes_of(0).contains(&lowest));
    assert!(watched(&sim, 0).contains(&lowest), "waits on itself");
}

#[test]
fn curator_202_reconnect_same_session_adopts_node() {
    let mut sim = Sim::new(2, |_| {});
    sim.start();
    sim.advance(Millis(200));
    assert_eq!(sim.acting(), vec![0]);
    // Member 1 loses its node on a rejoin (its node is deleted under it by
    // an operator) and the create's reply is lost.
    sim.lose_next_reply(1, is_candidate_create);
    let node1 = sim.members[1].elector.node_path().unwrap();
    let session = sim.members[1].session.unwrap();
    let s0 = sim.members[0].session.unwrap();
    let deleted = sim.zk.execute(sim.now, s0, &ZkOp::Delete { path: node1.clone(), version: None });
    assert_eq!(deleted, Ok(ZkReply::Deleted));
    // Member 1's keep-alive finds its node gone, it creates again, the reply
    // is lost, it reconnects with the same session and adopts.
    advance_checked(&mut sim, Millis(2_000));
    assert_eq!(sim.members[1].session, Some(session), "same session");
    assert_eq!(candidate_creates(&sim, 1), 2, "one create per lost node");
    assert_eq!(sim.nodes_of(1).len(), 1);
    assert_ne!(sim.nodes_of(1)[0], node1);
    assert_eq!(sim.members[1].elector.node_path().as_ref(), sim.nodes_of(1).first());
    assert_eq!(sim.candidates().len(), 2);
    assert_eq!(sim.acting(), vec![0]);
    let new_sessions = sim.members[1]
        .outcomes
        .iter()
        .filter(|(_, a)| matches!(a, Action::Zk(ZkCommand::NewSession { .. })))
        .count();
    assert_eq!(new_sessions, 1);
}

#[test]
fn suspension_without_abdication() {
    let mut sim = Sim::new(2, |_| {});
    sim.start();
    sim.advance(Millis(200));
    assert_eq!(sim.acting(), vec![0]);
    let node = sim.members[0].elector.node_path();
    let session = sim.members[0].session;
    let before = sim.members[0].leadership_outcomes().len();
    sim.disconnect(0, Millis(600));
    sim.pump();
    assert_eq!(sim.members[0].leadership_outcomes()[before..], [Action::Suspended]);
    assert!(sim.acting().is_empty(), "a suspended leader does not act");
    assert!(sim.members[0].elector.status(sim.now).leader);
    advance_checked(&mut sim, Millis(1_000));
    assert_eq!(
        sim.members[0].leadership_outcomes()[before..],
        [Action::Suspended, Action::Resumed]
    );
    assert_eq!(sim.acting(), vec![0]);
    assert_eq!(sim.members[0].elector.node_path(), node, "same node");
    assert_eq!(sim.members[0].session, session, "same session");
    assert_eq!(candidate_creates(&sim, 0), 1);
    assert_eq!(elected_count(&sim, 1), 0);
    // And it stays leader while idle: the keep-alive renews the lease.
    advance_checked(&mut sim, Millis(10_000));
    assert_eq!(sim.acting(), vec![0]);
}

#[test]
fn lease_expiry_while_paused_then_revoked_and_rejoined_with_new_node() {
    let mut sim = Sim::new(2, |_| {});
    sim.start();
    sim.advance(Millis(200));
    assert_eq!(sim.acting(), vec![0]);
    let old_session = sim.members[0].session.unwrap();
    let old_node = sim.members[0].elector.node_path().unwrap();
    let lease_until = sim.members[0].elector.status(sim.now).lease_until;
    // 2 s negotiated: lease 2000 - 666 = 1334 ms from the last ack.
    sim.pause(0, Millis(1_700));
    let wake = sim.now + Millis(1_700);
    while sim.now + sim.step < wake {
        sim.tick();
        assert_eq!(sim.members[0].elector.is_acting(sim.now), sim.now < lease_until);
        assert_eq!(elected_count(&sim, 1), 0);
    }
    // The server has not expired the paused leader's session yet: the
    // lease ran out before the server could.
    assert!(sim.zk.is_alive(old_session));
    assert!(sim.acting().is_empty());
    let before = sim.members[0].outcomes.len();
    advance_checked(&mut sim, Millis(500));
    let after: Vec<Action> =
        sim.members[0].outcomes[before..].iter().map(|(_, a)| a.clone()).collect();
    assert_eq!(
        after[..3],
        [
            Action::Revoked,
            Action::Zk(ZkCommand::CloseSession { session: old_session }),
            Action::Zk(ZkCommand::NewSession { timeout: Millis(2_000) })
        ]
    );
    assert!(!sim.zk.is_alive(old_session));
    assert_eq!(sim.acting(), vec![1]);
    assert_eq!(elected_count(&sim, 1), 1);
    let new_node = sim.members[0].elector.node_path().unwrap();
    assert_ne!(new_node, old_node);
    assert!(new_node.contains(&format!("{}1-n_", token(&sim, 0))), "{new_node}");
    assert_eq!(sim.nodes_of(0), vec![new_node]);
    assert_eq!(sim.candidates().len(), 2);
}

#[test]
fn expiry_then_recreate() {
    let mut sim = Sim::new(2, |_| {});
    sim.start();
    sim.advance(Millis(200));
    assert_eq!(sim.acting(), vec![0]);
    // The standby is cut off until the server expires its session.
    let old_session = sim.members[1].session.unwrap();
    let old_node = sim.members[1].elector.node_path().unwrap();
    sim.expire(1);
    advance_checked(&mut sim, Millis(1_900));
    assert!(sim.zk.is_alive(old_session), "not yet: the server waits");
    assert_eq!(sim.candidates().len(), 2);
    let before = sim.members[1].outcomes.len();
    advance_checked(&mut sim, Millis(500));
    assert!(!sim.zk.is_alive(old_session));
    // On reconnect the client learns of the expiry; the elector asks for a
    // new session and creates a new node (generation 1).
    assert_eq!(
        sim.members[1].outcomes[before].1,
        Action::Zk(ZkCommand::NewSession { timeout: Millis(2_000) })
    );
    assert_ne!(sim.members[1].session, Some(old_session));
    let new_node = sim.members[1].elector.node_path().unwrap();
    assert_ne!(new_node, old_node);
    assert!(new_node.contains(&format!("{}1-n_", token(&sim, 1))), "{new_node}");
    assert_eq!(sim.nodes_of(1), vec![new_node]);
    assert_eq!(candidate_creates(&sim, 1), 2);
    assert_eq!(sim.candidates().len(), 2);
    assert_eq!(sim.acting(), vec![0]);
    assert_eq!(elected_count(&sim, 1), 0);
}

#[test]
fn predecessor_deleted_while_disconnected_then_leads_after_reconnect() {
    let mut sim = Sim::new(2, |_| {});
    sim.start();
    sim.advance(Millis(200));
    assert_eq!(sim.acting(), vec![0]);
    let session = sim.members[1].session;
    let node = sim.members[1].elector.node_path();
    sim.disconnect(1, Millis(800));
    sim.pump();
    // While member 1 is away, the leader goes; the notification is lost
    // with the connection (the sim drops notifications and watches of a
    // disconnected session).
    sim.shutdown(0);
    assert_eq!(sim.candidates().len(), 1);
    sim.advance(Millis(300));
    assert!(sim.acting().is_empty());
    advance_checked(&mut sim, Millis(1_000));
    assert_eq!(sim.acting(), vec![1]);
    assert_eq!(sim.members[1].session, session, "same session");
    assert_eq!(sim.members[1].elector.node_path(), node, "same node");
    assert_eq!(candidate_creates(&sim, 1), 1);
}

/// Runs a fault-heavy scenario and returns whether any elector ever left a
/// watch on a node carrying its own protected token.
fn waits_on_itself(knob: bool) -> bool {
    let mut sim = Sim::new(3, |c| c.unsafe_no_adopt_after_connection_loss = knob);
    sim.lose_next_reply(0, is_candidate_create);
    sim.lose_next_reply(2, is_candidate_create);
    sim.start();
    sim.advance(Millis(500));
    sim.disconnect(1, Millis(300));
    sim.lose_next_reply(1, |op| matches!(op, ZkOp::Sync { .. }));
    sim.advance(Millis(1_000));
    sim.expire(0);
    sim.advance(Millis(3_000));
    (0..3).any(|i| {
        let t = token(&sim, i);
        watched(&sim, i).iter().any(|p| p.contains(&t))
    })
}

#[test]
fn leader_never_waits_on_its_own_node() {
    assert!(!waits_on_itself(false));
    // The check can fail: the old behaviour does wait on itself.
    assert!(waits_on_itself(true));
    // And the elector that would have waited leads instead.
    let mut sim = Sim::new(2, |_| {});
    sim.lose_next_reply(0, is_candidate_create);
    sim.start();
    sim.advance(Millis(1_000));
    assert_eq!(sim.acting(), vec![0]);
    assert!(watched(&sim, 0).is_empty(), "the leader watches nothing");
}

#[test]
fn duplicate_nodes_of_one_session_are_pruned_to_the_lowest() {
    let mut sim = Sim::new(1, |_| {});
    sim.start();
    sim.advance(Millis(200));
    let s = sim.members[0].session.unwrap();
    let node = sim.members[0].elector.node_path().unwrap();
    // A lower layer retried the create behind our back: two nodes.
    let prefix = node.trim_end_matches(|c: char| c.is_ascii_digit()).to_owned();
    let dup = sim.zk.execute(
        sim.now,
        s,
        &ZkOp::Create { path: prefix, data: vec![], mode: CreateMode::EphemeralSequential },
    );
    assert!(dup.is_ok());
    assert_eq!(sim.nodes_of(0).len(), 2);
    sim.disconnect(0, Millis(50));
    sim.advance(Millis(300));
    assert_eq!(sim.nodes_of(0), vec![node.clone()]);
    assert_eq!(sim.members[0].elector.node_path(), Some(node));
    assert_eq!(sim.acting(), vec![0]);
}

#[test]
fn fence_checks_the_leaders_node() {
    let mut sim = Sim::new(2, |_| {});
    sim.start();
    sim.advance(Millis(200));
    let fence = sim.members[0].elector.fence().unwrap();
    assert!(sim.members[1].elector.fence().is_none());
    let s0 = sim.members[0].session.unwrap();
    let write = ZkOp::Multi(vec![
        fence.clone(),
        ZkOp::Create { path: "/regent/epoch".into(), data: vec![1], mode: CreateMode::Persistent }
            .into_multi(),
    ]);
    assert!(sim.zk.execute(sim.now, s0, &write).is_ok());
    sim.zk.expire(s0);
    let s1 = sim.members[1].session.unwrap();
    let write = ZkOp::Multi(vec![
        fence,
        MultiOp::SetData { path: "/regent/epoch".into(), data: vec![2], version: Some(0) },
    ]);
    assert_eq!(sim.zk.execute(sim.now, s1, &write), Err(ZkError::NoNode));
}

impl ZkOp {
    fn into_multi(self) -> MultiOp {
        match self {
            ZkOp::Create { path, data, mode } => MultiOp::Create { path, data, mode },
            other => panic!("not a multi op: {other:?}"),
        }
    }
}

// ----- fast takeover and the acting lease (docs/design.md#issue-12) -------------------------

fn deposed(sim: &Sim, i: usize) -> Vec<DeposeOutcome> {
    sim.members[i]
        .outcomes
        .iter()
        .filter_map(|(_, a)| match a {
            Action::Deposed { outcome, .. } => Some(outcome.clone()),
            _ => None,
        })
        .collect()
}

/// A standby told that the leader's process is gone deletes every node of
/// the leader's session — the duplicate AURORA-1061 can leave included — and
/// leads at once, long before the dead leader's session would expire.
#[test]
fn depose_deletes_every_node_of_the_leaders_session_and_the_standby_leads_at_once() {
    let mut sim = Sim::new(2, |_| {});
    sim.start();
    sim.advance(Millis(200));
    assert_eq!(sim.acting(), vec![0]);
    let s0 = sim.members[0].session.unwrap();
    let node = sim.members[0].elector.node_path().unwrap();
    let prefix = node.trim_end_matches(|c: char| c.is_ascii_digit()).to_owned();
    let dup = ZkOp::Create { path: prefix, data: vec![], mode: CreateMode::EphemeralSequential };
    assert!(sim.zk.execute(sim.now, s0, &dup).is_ok());
    assert_eq!(sim.nodes_of(0).len(), 2);
    // The leader's process dies: nothing of it runs any more, its session
    // lives on at the server until it expires.
    sim.pause(0, Millis(60_000));
    let t = sim.now;
    sim.inject(1, Event::Depose { leader: MasterId::new("m0") });
    sim.advance(Millis(50));
    assert!(sim.nodes_of(0).is_empty(), "every node of the dead session is gone");
    let outcomes = deposed(&sim, 1);
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert!(outcomes.iter().all(|o| matches!(o, DeposeOutcome::Deleted { .. })));
    assert!(sim.zk.is_alive(s0), "the dead leader's session has not expired yet");
    assert!(sim.members[1].elector.is_acting(sim.now), "the standby leads");
    let elected_at = sim.members[1]
        .outcomes
        .iter()
        .find(|(_, a)| matches!(a, Action::Elected { .. }))
        .map(|(at, _)| *at)
        .unwrap();
    assert!(
        elected_at.since(t) <= Millis(50),
        "elected {} after the deposition",
        elected_at.since(t)
    );
}

/// At most one deposition per session timeout; a leader the election no
/// longer names, a master that leads, or an unsettled one depose nobody.
#[test]
fn depose_is_refused_when_it_would_not_be_safe_or_useful() {
    let mut sim = Sim::new(3, |_| {});
    sim.start();
    sim.advance(Millis(200));
    // Not the leader the election names.
    sim.inject(1, Event::Depose { leader: MasterId::new("m2") });
    assert!(matches!(deposed(&sim, 1).as_slice(), [DeposeOutcome::Skipped { .. }]));
    // The leader itself.
    sim.inject(0, Event::Depose { leader: MasterId::new("m0") });
    assert!(matches!(deposed(&sim, 0).as_slice(), [DeposeOutcome::Skipped { .. }]));
    assert_eq!(sim.acting(), vec![0]);
    // A real deposition by m1 ...
    sim.pause(0, Millis(60_000));
    sim.inject(1, Event::Depose { leader: MasterId::new("m0") });
    sim.advance(Millis(100));
    assert!(sim.members[1].elector.is_acting(sim.now), "m1 leads");
    // (The frozen m0 still believes in its session lease, but it holds no
    // acting lease: it could command nothing if it woke now.)
    assert!(!sim.members[0].elector.may_command(sim.now));
    // ... then m1 steps down and m2 leads; told at once that m2 died, m1 —
    // which deposed m0 less than a session timeout ago — deposes nobody.
    sim.inject(1, Event::Abandon);
    sim.advance(Millis(300));
    assert!(sim.members[2].elector.is_acting(sim.now), "m2 leads");
    assert!(sim.members[1].elector.status(sim.now).settled, "m1 is a settled standby");
    sim.inject(1, Event::Depose { leader: MasterId::new("m2") });
    match deposed(&sim, 1).last() {
        Some(DeposeOutcome::Skipped { reason }) => {
            assert!(reason.contains("less than a session timeout ago"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    sim.advance(Millis(100));
    assert!(sim.members[2].elector.is_acting(sim.now), "m2 still leads");
}

/// The acting lease: a new leader may not command before its wait, nor
/// without a confirmation sent less than L ago; the confirmation is a sync
/// followed by an exists with a watch on its own node.
#[test]
fn a_leader_commands_only_under_a_fresh_confirmation_after_its_wait() {
    let mut sim = Sim::new(1, |c| c.acting_lease = Millis(100));
    sim.start();
    sim.pump();
    let e = &sim.members[0].elector;
    assert!(e.is_acting(sim.now));
    assert!(!e.may_command(sim.now), "no command right after the election");
    let from = e.commands_from();
    // The wait is 1.1 L + 10 ms.
    assert_eq!(e.config().command_wait(), Millis(120));
    sim.advance(Millis(150));
    assert!(sim.now >= from);
    sim.inject(0, Event::Confirm);
    let sent: Vec<&ZkOp> = sim.members[0].sent.iter().rev().take(2).map(|(_, _, op)| op).collect();
    // (The exists asks for a watch only when none is set on the own node:
    // the election left one already.)
    assert!(matches!(sent.as_slice(), [ZkOp::Exists { .. }, ZkOp::Sync { .. }]), "{sent:?}");
    let confirmed = sim.members[0].outcomes.iter().rev().find_map(|(_, a)| match a {
        Action::Confirmed { until } => Some(*until),
        _ => None,
    });
    assert_eq!(confirmed, Some(sim.now + Millis(100)));
    assert!(sim.members[0].elector.may_command(sim.now));
    sim.advance(Millis(100));
    assert!(!sim.members[0].elector.may_command(sim.now), "the lease ran out");
}

/// A watch event on the leader's own node (deleted by a standby's fast
/// takeover) ends the acting lease in that very step, before any relisting.
#[test]
fn node_deleted_ends_the_acting_lease_at_once() {
    let mut sim = Sim::new(1, |_| {});
    sim.start();
    sim.advance(Millis(200));
    sim.inject(0, Event::Confirm);
    let now = sim.now;
    assert!(sim.members[0].elector.may_command(now));
    let s0 = sim.members[0].session.unwrap();
    let node = sim.members[0].elector.node_path().unwrap();
    let event = WatchEvent { kind: WatchKind::NodeDeleted, path: node };
    let _ = sim.members[0].elector.handle(now, Event::Zk(ZkEvent::Watch { session: s0, event }));
    assert!(!sim.members[0].elector.may_command(now));
}

/// A long leadership confirms its acting lease thousands of times; each
/// watching `exists` leaves a one-shot watcher in the client until the node
/// changes, so confirmations ask for a watch only when none is set (after
/// the election's, or after a reconnect).
#[test]
fn confirmations_do_not_pile_up_watches_on_the_own_node() {
    let mut sim = Sim::new(1, |_| {});
    sim.start();
    sim.advance(Millis(200));
    for _ in 0..50 {
        sim.inject(0, Event::Confirm);
        sim.advance(Millis(100));
    }
    let node = sim.members[0].elector.node_path().unwrap();
    let watching = |sim: &Sim| {
        sim.members[0]
            .sent
            .iter()
            .filter(|(_, _, op)| matches!(op, ZkOp::Exists { path, watch: true } if *path == node))
            .count()
    };
    assert_eq!(watching(&sim), 1, "only the election's watch");
    // After a reconnect the next confirmation sets one again.
    sim.disconnect(0, Millis(50));
    sim.advance(Millis(200));
    sim.inject(0, Event::Confirm);
    assert!(watching(&sim) >= 2);
    assert!(sim.members[0].elector.is_acting(sim.now));
}

// ----- acting leases that differ (docs/design.md#issue-20) --------------------------------

/// Member `m0` uses a 700 ms acting lease (as a candidate far from
/// ZooKeeper chooses), the others the default 100 ms.
fn m0_far(c: &mut Config) {
    if c.id == MasterId::new("m0") {
        c.acting_lease = Millis(700);
    }
}

/// Two members, `m0` (with the larger lease) leading, then frozen.
fn far_leader_frozen() -> Sim {
    let mut sim = Sim::new(2, m0_far);
    sim.start();
    sim.advance(Millis(200));
    assert_eq!(sim.acting(), vec![0]);
    sim.pause(0, Millis(60_000));
    sim
}

fn elected_at(sim: &Sim, i: usize) -> Millis {
    sim.members[i]
        .outcomes
        .iter()
        .rev()
        .find(|(_, a)| matches!(a, Action::Elected { .. }))
        .map(|(at, _)| *at)
        .expect("elected")
}

/// The successor of a deposed leader with a larger acting lease waits
/// 1.1 × that lease + 10 ms (read from the deposed leader's node data),
/// not its own: the deposed leader may command until its last
/// confirmation + its own L.
#[test]
fn a_successor_waits_for_the_deposed_leaders_larger_lease() {
    let mut sim = far_leader_frozen();
    let node = sim.members[0].elector.node_path().unwrap();
    let data = CandidateData::decode(&sim.zk.node(&node).unwrap().data).unwrap();
    assert_eq!(data.acting_lease, Millis(700), "the lease is in the node data");
    sim.inject(1, Event::Depose { leader: MasterId::new("m0") });
    sim.advance(Millis(50));
    assert!(sim.members[1].elector.is_acting(sim.now), "the standby leads");
    let e = &sim.members[1].elector;
    assert_eq!(e.acting_lease(), Millis(100), "its own lease stays 100 ms");
    assert_eq!(e.wait_lease(), Millis(700));
    assert_eq!(e.commands_from(), elected_at(&sim, 1) + Millis(780));
    sim.advance(Millis(600));
    sim.inject(1, Event::Confirm);
    assert!(!sim.members[1].elector.may_command(sim.now), "still within the deposed lease");
    sim.advance(Millis(200));
    sim.inject(1, Event::Confirm);
    assert!(sim.members[1].elector.may_command(sim.now));
}

/// A master that joins while a standby deposes a leader, and leads at its
/// first listing without ever having read the deposed leader's node (the
/// deposer stopped right after), learns the deposed leader's lease from the
/// marker the deposition wrote on the election directory; once its wait is
/// over it empties the marker.
#[test]
fn a_master_joining_during_a_takeover_waits_for_the_deposed_leaders_lease() {
    let mut sim = Sim::new(3, m0_far);
    sim.pause(2, Millis(1_000));
    sim.start();
    sim.advance(Millis(200));
    assert_eq!(sim.acting(), vec![0]);
    sim.pause(0, Millis(60_000));
    sim.inject(1, Event::Depose { leader: MasterId::new("m0") });
    sim.advance(Millis(50));
    assert!(sim.members[1].elector.is_acting(sim.now), "the deposer leads");
    let marker = sim.zk.node(&sim.election_path()).unwrap().data.clone();
    assert_eq!(
        DeposeMarker::decode(&marker),
        Ok(Some(DeposeMarker { acting_lease: Millis(700) })),
        "written with the delete"
    );
    sim.shutdown(1);
    sim.advance(Millis(1_000));
    // (The frozen m0 still believes in its session lease, but holds no
    // acting lease.)
    assert!(sim.members[2].elector.is_acting(sim.now), "the newcomer leads");
    assert!(!sim.members[0].elector.may_command(sim.now));
    let e = &sim.members[2].elector;
    assert_eq!(e.wait_lease(), Millis(700));
    assert_eq!(e.commands_from(), elected_at(&sim, 2) + Millis(780));
    sim.advance(Millis(800));
    sim.inject(2, Event::Confirm);
    assert!(sim.members[2].elector.may_command(sim.now));
    let marker = sim.zk.node(&sim.election_path()).unwrap().data.clone();
    assert!(marker.is_empty(), "emptied once the wait was over");
}

/// The same when the leader's node goes without a deposition's marker (an
/// operator deleted it): the standby read the node's data while it lived.
#[test]
fn a_successor_waits_for_the_lease_of_a_leader_whose_node_was_deleted_by_hand() {
    let mut sim = far_leader_frozen();
    let node = sim.members[0].elector.node_path().unwrap();
    let s1 = sim.members[1].session.unwrap();
    let deleted = sim.zk.execute(sim.now, s1, &ZkOp::Delete { path: node, version: None });
    assert_eq!(deleted, Ok(ZkReply::Deleted));
    sim.advance(Millis(50));
    assert!(sim.members[1].elector.is_acting(sim.now), "the standby leads");
    assert!(sim.zk.node(&sim.election_path()).unwrap().data.is_empty(), "no marker");
    let e = &sim.members[1].elector;
    assert_eq!(e.wait_lease(), Millis(700));
    assert_eq!(e.commands_from(), elected_at(&sim, 1) + Millis(780));
}

// ----- ZooKeeper far away (docs/design.md#issue-20) ----------------------------------------

/// Runs one elector against the ZooKeeper model with every reply arriving
/// `rtt` after its request (executed on arrival at the server, half way),
/// for `run`; returns how often it was elected and how often it lost the
/// leadership.
fn far_from_zookeeper(rtt: Millis, session_timeout: Millis, run: Millis) -> (usize, usize) {
    use crate::testkit::zk::ZkModel;
    let mut cfg = Config::new("/r", 1, MasterId::new("m0"), Addr::new("m0:7077"));
    cfg.session_timeout = session_timeout;
    let mut e = Elector::new(cfg);
    let mut zk = ZkModel::new(Millis(200));
    let mut session = None;
    // (deliver at, sequence, event): replies in order, timers by deadline.
    let mut inbox: std::collections::BTreeMap<(Millis, u64), Event> = Default::default();
    let mut timers: std::collections::BTreeMap<Timer, Millis> = Default::default();
    let mut seq = 0u64;
    let (mut elected, mut lost) = (0, 0);
    let mut now = Millis::ZERO;
    let mut actions = e.handle(now, Event::Start);
    loop {
        for a in std::mem::take(&mut actions) {
            match a {
                Action::Zk(ZkCommand::NewSession { timeout }) => {
                    let (s, t) = zk.connect(now, timeout);
                    session = Some(s);
                    seq += 1;
                    inbox.insert(
                        (now + rtt, seq),
                        Event::Zk(ZkEvent::SessionConnected { session: s, timeout: t }),
                    );
                }
                Action::Zk(ZkCommand::CloseSession { session: s }) => zk.close(s),
                Action::Zk(ZkCommand::Request { session: s, req, op }) if Some(s) == session => {
                    zk.touch(now + Millis(rtt.0 / 2), s);
                    let result = zk.execute(now + Millis(rtt.0 / 2), s, &op);
                    seq += 1;
                    inbox.insert((now + rtt, seq), Event::Zk(ZkEvent::Reply { req, result }));
                }
                Action::SetTimer { timer, at } => {
                    timers.insert(timer, at);
                }
                Action::CancelTimer { timer } => {
                    timers.remove(&timer);
                }
                Action::Elected { .. } => elected += 1,
                Action::Revoked => lost += 1,
                _ => {}
            }
        }
        let timer = timers.iter().min_by_key(|(_, at)| **at).map(|(t, at)| (*t, *at));
        let next = inbox.keys().next().copied();
        let event = match (timer, next) {
            (Some((t, at)), n) if n.is_none_or(|(d, _)| at < d) => {
                timers.remove(&t);
                now = now.max(at);
                Event::Timer(t)
            }
            (_, Some(k)) => {
                now = now.max(k.0);
                inbox.remove(&k).expect("a delivery")
            }
            _ => break,
        };
        if now > run {
            break;
        }
        actions = e.handle(now, event);
    }
    (elected, lost)
}

/// Issue 20 (docs/design.md#issue-20) scenario 7, the session side (sim seed 6, docs/design.md#simulator-seeds `--zk-latency`): a
/// candidate whose ZooKeeper answers after 400 ms, with a 2 s session.
/// Only a write or a sync confirms the session, and the ping was sent only
/// while no request of the election round was in flight: a round of reads,
/// one round trip each, outlasted the session lease (2 s − 667 ms), so
/// every new leader lost its leadership within a second, for good. And
/// with a round trip near the ping interval, a ping timer that fired
/// during a confirmation skipped a whole interval. The ping now keeps the
/// session confirmed whenever nothing in flight does, and a skipped one
/// goes out when the confirmation comes back.
#[test]
fn a_round_of_slow_reads_does_not_lapse_the_session_lease() {
    let (elected, lost) = far_from_zookeeper(Millis(400), Millis(2_000), Millis(60_000));
    assert_eq!((elected, lost), (1, 0), "elected once, and kept it for a minute");
    // A 1 s round trip needs a session of at least 3 round trips (the lease
    // covers 2/3 of it, and one confirmation is in flight at a time).
    let (elected, lost) = far_from_zookeeper(Millis(1_000), Millis(4_000), Millis(60_000));
    assert_eq!((elected, lost), (1, 0), "1 s round trips, a 4 s session");
}

/// A listing whose marker read comes back first (sim seed 16599, docs/design.md#simulator-seeds with every
/// slow dependency: the transport handed the replies over out of order) is
/// still acted on: the candidate with the lowest node waited in its listing
/// step for good, and no master led for minutes. ZooKeeper ran the two in
/// order, so the pair is complete either way.
#[test]
fn a_listing_whose_marker_reply_came_first_is_acted_on() {
    let elected = lone_candidate(|_, mut replies| {
        // Every listing's reply goes after the step's other replies.
        replies.sort_by_key(|(op, _, _)| matches!(op, ZkOp::GetChildren { .. }));
        replies
    });
    assert!(elected, "the only candidate leads although its marker replies came first");
}

/// Runs one candidate against a ZooKeeper model for up to 10 s, each step's
/// requests executed in order and their replies passed through `arrange`
/// (which sees the elector, and may reorder or rewrite them) before they
/// are fed back; whether it was elected.
fn lone_candidate(
    mut arrange: impl FnMut(
        &Elector,
        Vec<(ZkOp, RequestId, ZkResult)>,
    ) -> Vec<(ZkOp, RequestId, ZkResult)>,
) -> bool {
    use crate::testkit::zk::ZkModel;
    let cfg = Config::new("/r", 1, MasterId::new("m0"), Addr::new("m0:7077"));
    let mut e = Elector::new(cfg);
    let mut zk = ZkModel::new(Millis(200));
    let mut session = None;
    let mut now = Millis::ZERO;
    let mut queue: std::collections::VecDeque<Event> = [Event::Start].into();
    while let Some(event) = queue.pop_front() {
        now = now + Millis(1);
        let mut replies = Vec::new();
        for a in e.handle(now, event) {
            match a {
                Action::Zk(ZkCommand::NewSession { timeout }) => {
                    let (s, t) = zk.connect(now, timeout);
                    session = Some(s);
                    queue
                        .push_back(Event::Zk(ZkEvent::SessionConnected { session: s, timeout: t }));
                }
                Action::Zk(ZkCommand::Request { session: s, req, op }) if Some(s) == session => {
                    let result = zk.execute(now, s, &op);
                    replies.push((op, req, result));
                }
                Action::Elected { .. } => return true,
                _ => {}
            }
        }
        for (_, req, result) in arrange(&e, replies) {
            queue.push_back(Event::Zk(ZkEvent::Reply { req, result }));
        }
        if now > Millis(10_000) {
            break;
        }
    }
    false
}

/// A listing that names this master's own node twice (a real ZooKeeper never
/// does; a buggy proxy or a hostile server might) is peer input: the
/// elector must neither panic nor delete its own node as a "duplicate", and
/// still leads (docs/design.md#peer-input-never-panics).
#[test]
fn a_listing_naming_the_own_node_twice_neither_panics_nor_deletes_it() {
    let mut own_deleted = false;
    let elected = lone_candidate(|e, mut replies| {
        for (op, _, result) in &mut replies {
            if let ZkOp::Delete { path, .. } = op {
                own_deleted |= e.node_path().as_deref() == Some(path.as_str());
            }
            if let Ok(ZkReply::Children(names)) = result {
                *names = names.iter().flat_map(|n| [n.clone(), n.clone()]).collect();
            }
        }
        replies
    });
    assert!(!own_deleted, "the own node was deleted as its own duplicate");
    assert!(elected, "the only candidate leads although its listing named it twice");
}

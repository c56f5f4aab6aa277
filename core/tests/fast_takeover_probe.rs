//! The fast takeover's detector (the standby's watch on the leader) against
//! the way a killed process really closes its sockets, driven through the
//! node harness (`node_harness`): the pure ZooKeeper model, fake peers, a
//! virtual clock.
#![cfg(feature = "testkit")]

mod node_harness;

use node_harness::*;
use regent_core::elector::DeposeOutcome;
use regent_core::node::master::{Input, Note, Output};
use regent_core::node::{Ended, ProbeResult};
use regent_core::{ConnId, Millis};

/// Node 0 leads; node 1 stands by with its watch connection (conn 900) to
/// node 0 open and confirmed.
fn standby_watching_the_leader() -> Cluster {
    let mut c = Cluster::zookeeper(2);
    for i in 0..2 {
        let _ = c.feed(i, Input::Start);
    }
    c.advance(Millis(100));
    assert_eq!(c.leaders(), vec![0]);
    let _ = c.connect_dial(1, 0, 900);
    c.nodes[1].probes.clear();
    c
}

/// Advances the clock 1 ms at a time (at most `bound`) until node `i` asks
/// for a probe; returns the probe and how long that took.
fn next_probe(c: &mut Cluster, i: usize, bound: Millis) -> (u64, Millis) {
    let start = c.now;
    loop {
        if let Some((probe, _)) = c.nodes[i].probes.pop() {
            return (probe, c.now.since(start));
        }
        assert!(c.now.since(start) < bound, "no probe within {bound}");
        c.advance(Millis(1));
    }
}

/// Regression (found by runtime-smol's `e2e_fast_takeover` suite): `kill
/// -9` of the leader ends the watch connection (EOF) a moment *before* the
/// leader's listening socket closes — the kernel releases a dead process's
/// sockets newest first — so the probe the standby sent at once was
/// accepted by the dying listener, the detector gave up, and the standby
/// waited out the leader's whole session. The first probe now goes out one
/// probe spacing after the end; three refusals over 50 ms still depose.
#[test]
fn the_first_probe_waits_for_a_killed_leaders_listening_socket_to_close() {
    let mut c = standby_watching_the_leader();
    // The leader's process dies: no event, no timer, no ping (its session
    // lives on in ZooKeeper until it expires).
    c.nodes[0].paused = true;
    let out =
        c.feed(1, Input::Closed { conn: ConnId(900), how: Ended::ByPeer, reason: "reset".into() });
    assert!(
        !out.iter().any(|o| matches!(o, Output::Probe { .. })),
        "no probe at the instant the connection ended: {out:?}"
    );

    let (first, after) = next_probe(&mut c, 1, Millis(50));
    assert!(after > Millis::ZERO && after <= Millis(50), "first probe {after} after the end");
    let mut probe = first;
    for n in 1..=3 {
        let _ = c.feed(1, Input::Probed { probe, result: ProbeResult::Refused });
        if n < 3 {
            probe = next_probe(&mut c, 1, Millis(50)).0;
        }
    }
    assert!(
        c.nodes[1].notes().iter().any(|n| matches!(n, Note::Deposing { .. })),
        "three refusals over 50 ms depose the leader: {:?}",
        c.nodes[1].notes()
    );
    c.advance(Millis(200));
    assert!(
        c.nodes[1]
            .notes()
            .iter()
            .any(|n| matches!(n, Note::Deposed { outcome: DeposeOutcome::Deleted { .. }, .. })),
        "{:?}",
        c.nodes[1].notes()
    );
    // (Node 0 is a dead process: its last status means nothing.)
    assert!(
        c.leaders().contains(&1),
        "the standby leads long before the session expires: {:?}",
        c.nodes[1].status()
    );
}

/// The other side of the same rule: a port that still accepts when the
/// (delayed) first probe arrives proves a listener, and nobody is deposed.
#[test]
fn a_first_probe_accepted_deposes_nobody() {
    let mut c = standby_watching_the_leader();
    let _ =
        c.feed(1, Input::Closed { conn: ConnId(900), how: Ended::ByPeer, reason: "reset".into() });
    let (probe, _) = next_probe(&mut c, 1, Millis(50));
    let _ = c.feed(1, Input::Probed { probe, result: ProbeResult::Accepted });
    c.advance(Millis(500));
    assert!(
        !c.nodes[1].notes().iter().any(|n| matches!(n, Note::Deposing { .. })),
        "{:?}",
        c.nodes[1].notes()
    );
    assert_eq!(c.leaders(), vec![0]);
}

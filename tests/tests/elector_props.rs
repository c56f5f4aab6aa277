//! Elector properties: 2–5 electors against the pure ZooKeeper model with
//! generated faults (connection loss, "request applied, reply lost", session
//! expiry, process pauses). Checked after every step of virtual time:
//!
//! * an elector that has settled never has two candidate nodes in its live
//!   session (AURORA-1061);
//! * at most one elector acts as leader (elected, not suspended, lease valid),
//!   and none acts once it has seen its connection drop;
//! * after the faults stop, one leader is elected within bounded model time
//!   and every elector reports it in `LeaderNamed`.

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use regent_core::elector::Action;
use regent_core::testkit::zk::{OpFilter, Sim};
use regent_core::zk::{CreateMode, ZkOp};
use regent_core::Millis;

/// Virtual time allowed for a leader to emerge once the faults stop: two
/// session timeouts (2 s) for lingering sessions to expire, plus rounds.
const SETTLE: Millis = Millis(6_000);

#[derive(Clone, Copy, Debug)]
enum Lost {
    Create,
    Sync,
    List,
    Any,
}

impl Lost {
    fn filter(self) -> OpFilter {
        match self {
            Lost::Create => {
                |op| matches!(op, ZkOp::Create { mode: CreateMode::EphemeralSequential, .. })
            }
            Lost::Sync => |op| matches!(op, ZkOp::Sync { .. }),
            Lost::List => |op| matches!(op, ZkOp::GetChildren { .. }),
            Lost::Any => |_| true,
        }
    }
}

#[derive(Clone, Debug)]
enum Fault {
    /// Let virtual time pass (ms).
    Advance(u64),
    /// Drop member's connection for ms (beyond 2 s its session expires).
    Disconnect(usize, u64),
    /// The member's next matching request is applied, its reply lost.
    LoseReply(usize, Lost),
    /// The server expires the member's session.
    Expire(usize),
    /// Pause the member's process for ms.
    Pause(usize, u64),
}

#[derive(Clone, Debug)]
struct Scenario {
    n: usize,
    faults: Vec<Fault>,
}

fn below(g: &mut Gen, n: u64) -> u64 {
    u64::arbitrary(g) % n
}

impl Arbitrary for Scenario {
    fn arbitrary(g: &mut Gen) -> Self {
        let n = 2 + below(g, 4) as usize;
        let len = below(g, 16) as usize;
        let faults = (0..len)
            .map(|_| {
                let who = below(g, n as u64) as usize;
                match below(g, 10) {
                    0..=2 => Fault::Advance(below(g, 800)),
                    3 | 4 => Fault::Disconnect(who, 10 + below(g, 3_000)),
                    5 => Fault::LoseReply(
                        who,
                        *g.choose(&[Lost::Create, Lost::Sync, Lost::List, Lost::Any]).unwrap(),
                    ),
                    6 => Fault::LoseReply(who, Lost::Create),
                    7 => Fault::Expire(who),
                    _ => Fault::Pause(who, 10 + below(g, 3_000)),
                }
            })
            .collect();
        Scenario { n, faults }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let mut out = Vec::new();
        for i in 0..self.faults.len() {
            let mut s = self.clone();
            s.faults.remove(i);
            out.push(s);
        }
        if self.n > 2 {
            let mut s = self.clone();
            s.n -= 1;
            for f in &mut s.faults {
                match f {
                    Fault::Disconnect(w, _)
                    | Fault::LoseReply(w, _)
                    | Fault::Expire(w)
                    | Fault::Pause(w, _) => *w %= s.n,
                    Fault::Advance(_) => {}
                }
            }
            out.push(s);
        }
        Box::new(out.into_iter())
    }
}

fn check(sim: &Sim) -> Result<(), String> {
    let acting = sim.acting();
    if acting.len() > 1 {
        return Err(format!("at {}: several leaders act: {acting:?}", sim.now));
    }
    for (i, m) in sim.members.iter().enumerate() {
        if m.elector.is_acting(sim.now) && !m.is_connected() && !m.is_paused(sim.now) {
            return Err(format!("at {}: member {i} acts while disconnected", sim.now));
        }
        if !m.elector.status(sim.now).settled {
            continue;
        }
        let nodes = sim.nodes_of(i);
        if nodes.len() > 1 {
            return Err(format!(
                "at {}: member {i} settled with {} nodes in one session: {nodes:?}",
                sim.now,
                nodes.len()
            ));
        }
    }
    Ok(())
}

fn advance_checked(sim: &mut Sim, dur: Millis) -> Result<(), String> {
    let end = sim.now + dur;
    while sim.now < end {
        sim.tick();
        check(sim)?;
    }
    Ok(())
}

/// Runs a scenario; faults before the first `Advance` apply before start.
fn run(s: &Scenario, knob: bool) -> Result<(), String> {
    let mut sim = Sim::new(s.n, |c| c.unsafe_no_adopt_after_connection_loss = knob);
    sim.step = Millis(20);
    let mut started = false;
    for f in &s.faults {
        match *f {
            Fault::Advance(ms) => {
                if !started {
                    sim.start();
                    started = true;
                    check(&sim)?;
                }
                advance_checked(&mut sim, Millis(ms))?;
            }
            Fault::Disconnect(w, ms) => sim.disconnect(w, Millis(ms)),
            Fault::LoseReply(w, lost) => sim.lose_next_reply(w, lost.filter()),
            Fault::Expire(w) => sim.expire(w),
            Fault::Pause(w, ms) => sim.pause(w, Millis(ms)),
        }
        if started {
            sim.pump();
            check(&sim)?;
        }
    }
    if !started {
        sim.start();
    }
    sim.heal();
    advance_checked(&mut sim, SETTLE)?;
    let acting = sim.acting();
    if acting.len() != 1 {
        return Err(format!(
            "no leader {} ms after the faults stopped (candidates {:?})",
            SETTLE.0,
            sim.candidates()
        ));
    }
    let leader = sim.members[acting[0]].elector.config().id.clone();
    for (i, m) in sim.members.iter().enumerate() {
        let seen = m.outcomes.iter().rev().find_map(|(_, a)| match a {
            Action::LeaderNamed { id, .. } => Some(id.clone()),
            _ => None,
        });
        if seen.as_ref() != Some(&leader) {
            return Err(format!("member {i} sees {seen:?}, leader is {leader}"));
        }
    }
    if sim.candidates().len() != s.n {
        return Err(format!("{} members but candidates {:?}", s.n, sim.candidates()));
    }
    Ok(())
}

fn prop_safe_and_live(s: Scenario) -> TestResult {
    match run(&s, false) {
        Ok(()) => TestResult::passed(),
        Err(e) => TestResult::error(e),
    }
}

fn prop_with_knob(s: Scenario) -> TestResult {
    match run(&s, true) {
        Ok(()) => TestResult::passed(),
        Err(e) => TestResult::error(e),
    }
}

#[test]
fn electors_are_safe_and_live_under_faults() {
    QuickCheck::new().tests(1_500).quickcheck(prop_safe_and_live as fn(Scenario) -> TestResult);
}

#[test]
fn knob_reintroduces_aurora_1061_and_the_property_catches_it() {
    // A fixed scenario: member 0's first create is applied, its reply lost.
    let s = Scenario { n: 3, faults: vec![Fault::LoseReply(0, Lost::Create), Fault::Advance(100)] };
    assert_eq!(run(&s, false), Ok(()));
    let err = run(&s, true).unwrap_err();
    assert!(err.contains("nodes in one session"), "{err}");
    // And generated faults find it too.
    let found =
        QuickCheck::new().tests(300).quicktest(prop_with_knob as fn(Scenario) -> TestResult);
    assert!(found.is_err(), "the knob's bug went unnoticed");
}

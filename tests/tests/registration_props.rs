//! quickcheck properties of worker registration over generated schedules:
//! 1–4 workers, 2–3 masters, leadership changes (some late), message drops,
//! duplicates, reorders, disconnects and partitions. Invariants are checked
//! after every step; a failing schedule is shrunk to a minimal one.

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use regent_core::Millis;
use regent_tests::cluster::{Cluster, Step, Violation};

#[derive(Clone, Debug)]
struct Schedule {
    masters: usize,
    workers: usize,
    seed: u64,
    steps: Vec<Step>,
}

fn step(g: &mut Gen) -> Step {
    let i = usize::arbitrary(g);
    let j = usize::arbitrary(g);
    match u8::arbitrary(g) % 100 {
        0..=39 => Step::Deliver(i),
        40..=47 => Step::Drop(i),
        48..=52 => Step::Duplicate(i),
        // At most 500 ms per tick: a schedule (<= 100 steps) stays shorter
        // than the ~53 s a worker needs at the least to give up its first
        // registration, so any exit is a bug.
        53..=77 => Step::Tick(u16::arbitrary(g) % 500 + 1),
        78..=82 => Step::Elect(i),
        83..=85 => Step::ElectLate(i),
        86..=88 => Step::RevokeStale,
        89..=94 => Step::Disconnect(i, j),
        _ => Step::TogglePartition(i, j),
    }
}

impl Arbitrary for Schedule {
    fn arbitrary(g: &mut Gen) -> Self {
        let n = usize::arbitrary(g) % 100;
        Schedule {
            masters: 2 + usize::arbitrary(g) % 2,
            workers: 1 + usize::arbitrary(g) % 4,
            seed: u64::arbitrary(g),
            steps: {
                let mut steps: Vec<Step> = (0..n).map(|_| step(g)).collect();
                // Half the schedules start with a leader, so more of the
                // chaos happens to registered workers.
                if bool::arbitrary(g) {
                    steps.insert(0, Step::Elect(0));
                }
                steps
            },
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let me = self.clone();
        let fewer_workers =
            (self.workers > 1).then(|| Schedule { workers: self.workers - 1, ..self.clone() });
        Box::new(fewer_workers.into_iter().chain(
            // Shrink the step list by removing chunks and single steps.
            (0..self.steps.len()).rev().map(move |i| {
                let mut s = me.clone();
                s.steps.remove(i);
                s
            }),
        ))
    }
}

/// Runs the schedule, checking safety after every step, then calms the
/// cluster and checks that it settles.
fn run(s: &Schedule, check_settled: bool) -> Result<(), Violation> {
    let mut c = Cluster::new(s.masters, s.workers, s.seed);
    c.check_safety()?;
    for st in &s.steps {
        c.step(st);
        c.check_safety()?;
    }
    if check_settled {
        c.calm();
        c.check_safety()?;
        c.settle(Millis(40_000));
        c.check_safety()?;
        c.check_settled()?;
    }
    Ok(())
}

fn judge(s: &Schedule, invariant: &str, settled: bool) -> TestResult {
    match run(s, settled) {
        Ok(()) => TestResult::passed(),
        Err(v) if v.invariant == invariant => {
            TestResult::error(format!("{}: {}", v.invariant, v.detail))
        }
        // Another invariant broke: its own property reports it.
        Err(_) => TestResult::discard(),
    }
}

fn check(prop: fn(Schedule) -> TestResult) {
    QuickCheck::new().tests(1_000).max_tests(20_000).quickcheck(prop);
}

#[test]
fn leader_registry_never_holds_a_worker_twice() {
    fn unique(s: Schedule) -> TestResult {
        judge(&s, "registry_unique", false)
    }
    fn once(s: Schedule) -> TestResult {
        judge(&s, "registered_once", false)
    }
    check(unique);
    check(once);
}

#[test]
fn no_worker_exits_while_a_leader_is_reachable() {
    fn prop(s: Schedule) -> TestResult {
        judge(&s, "no_exit", true)
    }
    check(prop);
}

#[test]
fn active_master_carries_the_highest_epoch_seen() {
    fn prop(s: Schedule) -> TestResult {
        judge(&s, "follows_highest_epoch", false)
    }
    check(prop);
}

#[test]
fn quiet_cluster_registers_every_worker_with_exactly_the_leader() {
    fn prop(s: Schedule) -> TestResult {
        judge(&s, "settled", true)
    }
    check(prop);
}

#[test]
fn schedules_replay_exactly() {
    let mut g = Gen::new(100);
    for _ in 0..20 {
        let s = Schedule::arbitrary(&mut g);
        let trace = |s: &Schedule| {
            let mut c = Cluster::new(s.masters, s.workers, s.seed);
            for st in &s.steps {
                c.step(st);
            }
            c.calm();
            c.settle(Millis(5_000));
            format!("{:?}", c.workers.iter().map(|w| w.status()).collect::<Vec<_>>())
        };
        assert_eq!(trace(&s), trace(&s));
    }
}

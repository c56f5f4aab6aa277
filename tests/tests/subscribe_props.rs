//! quickcheck properties of subscriptions and executors over generated
//! schedules: 2–3 masters, 2–4 workers, 1–2 frameworks whose subscribers
//! fail over to new instances, executors that exit, leadership changes,
//! drops, duplicates, reorders, disconnects and partitions. Safety is
//! checked after every step; after the faults stop, the cluster settles and
//! every executor, slot and reported exit is accounted for.

use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use regent_core::Millis;
use regent_tests::cluster::{Cluster, Step, Violation};

#[derive(Clone, Debug)]
struct Schedule {
    masters: usize,
    workers: usize,
    frameworks: usize,
    seed: u64,
    steps: Vec<Step>,
}

fn step(g: &mut Gen) -> Step {
    let i = usize::arbitrary(g);
    let j = usize::arbitrary(g);
    match u8::arbitrary(g) % 100 {
        0..=44 => Step::Deliver(i),
        45..=49 => Step::Drop(i),
        50..=52 => Step::Duplicate(i),
        53..=72 => Step::Tick(u16::arbitrary(g) % 500 + 1),
        73..=76 => Step::Elect(i),
        77..=78 => Step::ElectLate(i),
        79..=80 => Step::RevokeStale,
        81..=84 => Step::Disconnect(i, j),
        85..=86 => Step::TogglePartition(i, j),
        87..=89 => Step::FailoverSubscriber(i),
        90..=91 => Step::Quiet(u16::arbitrary(g) % 2_000),
        _ => Step::ExitExecutor(i, bool::arbitrary(g) || bool::arbitrary(g)),
    }
}

impl Arbitrary for Schedule {
    fn arbitrary(g: &mut Gen) -> Self {
        let n = usize::arbitrary(g) % 120;
        let mut steps: Vec<Step> = (0..n).map(|_| step(g)).collect();
        // Most schedules start from a working cluster, so the faults hit
        // registered workers, live subscriptions and running executors.
        if u8::arbitrary(g) % 5 != 0 {
            steps.insert(0, Step::Quiet(3_000));
            steps.insert(0, Step::Elect(0));
        }
        Schedule {
            masters: 2 + usize::arbitrary(g) % 2,
            workers: 2 + usize::arbitrary(g) % 3,
            frameworks: 1 + usize::arbitrary(g) % 2,
            seed: u64::arbitrary(g),
            steps,
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let me = self.clone();
        Box::new((0..self.steps.len()).rev().map(move |i| {
            let mut s = me.clone();
            s.steps.remove(i);
            s
        }))
    }
}

fn run(s: &Schedule) -> Result<(), Violation> {
    let mut c = Cluster::with_frameworks(s.masters, s.workers, s.frameworks, s.seed);
    for st in &s.steps {
        c.step(st);
        c.check_safety()?;
    }
    c.calm();
    c.settle(Millis(60_000));
    c.check_safety()?;
    c.check_settled()
}

fn judge(s: &Schedule, invariants: &[&str]) -> TestResult {
    match run(s) {
        Ok(()) => TestResult::passed(),
        Err(v) if invariants.contains(&v.invariant) => {
            TestResult::error(format!("{}: {}", v.invariant, v.detail))
        }
        Err(_) => TestResult::discard(),
    }
}

fn check(prop: fn(Schedule) -> TestResult) {
    QuickCheck::new().tests(500).max_tests(10_000).quickcheck(prop);
}

#[test]
fn at_most_one_live_subscription_per_framework_and_close_before_resubscribe() {
    fn prop(s: Schedule) -> TestResult {
        judge(&s, &["one_subscription"])
    }
    check(prop);
}

#[test]
fn resources_never_exceed_a_workers_capacity() {
    fn prop(s: Schedule) -> TestResult {
        judge(&s, &["capacity"])
    }
    check(prop);
}

#[test]
fn every_executor_runs_on_exactly_one_worker_and_no_slot_runs_two() {
    fn prop(s: Schedule) -> TestResult {
        judge(&s, &["executor_on_one_worker", "executors"])
    }
    check(prop);
}

#[test]
fn no_reported_exit_is_lost_and_every_subscriber_reattaches() {
    fn prop(s: Schedule) -> TestResult {
        judge(&s, &["exit_not_lost", "settled"])
    }
    check(prop);
}
/// The generated schedules must reach the interesting states: a harness
/// that never ran an executor to completion would pass everything above.
#[test]
fn schedules_exercise_exits_failovers_and_placement() {
    let mut g = Gen::new(100);
    let (mut exits, mut executors, mut failovers) = (0, 0, 0);
    for _ in 0..200 {
        let s = Schedule::arbitrary(&mut g);
        failovers += s.steps.iter().filter(|st| matches!(st, Step::FailoverSubscriber(_))).count();
        let mut c = Cluster::with_frameworks(s.masters, s.workers, s.frameworks, s.seed);
        for st in &s.steps {
            c.step(st);
        }
        c.calm();
        c.settle(Millis(60_000));
        exits += c.known_exits.len();
        executors += c.masters.iter().map(|m| m.executors().count()).sum::<usize>();
    }
    assert!(exits > 50, "only {exits} exits of counted executors in 200 schedules");
    assert!(executors > 300, "only {executors} executors placed in 200 schedules");
    assert!(failovers > 50, "only {failovers} subscriber failovers in 200 schedules");
}

//! quickcheck over fault schedules: a schedule is a list of faults at times
//! that quickcheck generates and shrinks (fewer faults, shorter faults, no
//! network chaos), so a failure comes with a minimal schedule.

use quickcheck::{QuickCheck, TestResult};
use regent_tests::sim::{run_schedule, shrink, Fault, Knobs, Schedule, SimConfig};

/// Invariants of issue 41 (docs/design.md#issue-41) that the code before its fixes breaks in many
/// schedules (the `KNOWN_BUGS` of `sim_seeds.rs`): remove each once its fix
/// is merged.
const KNOWN_BUGS: &[&str] = &[];

#[test]
fn generated_schedules_keep_every_invariant() {
    fn prop(seed: u64, schedule: Schedule) -> TestResult {
        let skip = KNOWN_BUGS.iter().map(|s| (*s).to_owned()).collect();
        let cfg = SimConfig { skip, ..SimConfig::default() }.sized_for(seed);
        match run_schedule(seed, &cfg, &schedule, false) {
            Ok(_) => TestResult::passed(),
            // An open, reported bug (see `fixtures/regressions/`).
            Err((v, _)) => TestResult::error(format!("{v:?}")),
        }
    }
    QuickCheck::new().tests(40).quickcheck(prop as fn(u64, Schedule) -> TestResult);
}

#[test]
fn a_failure_shrinks_to_a_minimal_schedule() {
    // Without the lease check, a leader paused past its session acts beside
    // its successor. Take a seed's whole schedule and let the shrinker find
    // the fault that matters.
    let base = SimConfig {
        knobs: Knobs { no_lease_check: true, ..Knobs::default() },
        ..SimConfig::default()
    };
    let (seed, cfg, schedule) = (1_000_000..1_000_100)
        .find_map(|seed| {
            let cfg = base.sized_for(seed);
            let s = Schedule::from_seed(seed, cfg.window_ms, cfg.faults);
            run_schedule(seed, &cfg, &s, false)
                .err()
                .filter(|(v, _)| v.invariant == "single_leader")
                .map(|_| (seed, cfg, s))
        })
        .expect("a seed that breaks single_leader without the lease check");
    let (small, violation) = shrink(seed, &cfg, &schedule, 500);
    let violation = violation.expect("the shrunk schedule still fails");
    println!("seed {seed}: {} faults shrunk to {small:?}: {violation:?}", schedule.faults.len());
    assert!(small.faults.len() <= 2, "not minimal: {small:?}");
    assert!(
        small.faults.iter().any(|(_, f)| matches!(f, Fault::PauseMaster { .. })),
        "a pause is what the lease check guards against: {small:?}"
    );
}

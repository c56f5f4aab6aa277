//! Proof that the simulator can fail: each test-only knob that removes a
//! protection makes it report a violation within a bounded number of seeds.

use regent_tests::sim::{run_seed, Knobs, SimConfig};

/// The first failing seed below `bound` with `knobs`, and what it broke.
fn first_failure(knobs: Knobs, bound: u64) -> Option<(u64, &'static str)> {
    let cfg = SimConfig { knobs, ..SimConfig::default() };
    (1_000_000..1_000_000 + bound)
        .find_map(|seed| run_seed(seed, &cfg).err().map(|f| (seed, f.violation.invariant)))
}

#[test]
fn without_epoch_fencing_the_simulator_fails() {
    let knobs = Knobs { no_epoch_fencing: true, ..Knobs::default() };
    let found = first_failure(knobs, 400);
    assert!(found.is_some(), "no violation within 400 seeds without epoch fencing");
    println!("without epoch fencing: {found:?}");
}

#[test]
fn without_adoption_after_connection_loss_the_simulator_fails() {
    let knobs = Knobs { no_adopt_after_connection_loss: true, ..Knobs::default() };
    let found = first_failure(knobs, 400);
    assert!(found.is_some(), "no violation within 400 seeds without adoption (AURORA-1061)");
    println!("without adoption: {found:?}");
}

#[test]
fn without_the_lease_check_the_simulator_fails() {
    let knobs = Knobs { no_lease_check: true, ..Knobs::default() };
    let found = first_failure(knobs, 400);
    assert!(found.is_some(), "no violation within 400 seeds without the lease check");
    println!("without the lease check: {found:?}");
}

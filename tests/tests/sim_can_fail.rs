//! Proof that the simulator can fail: each test-only knob that removes a
//! protection makes it report a violation within a bounded number of seeds.

use regent_tests::sim::{run_seed, Knobs, SimConfig};

/// The first seed (of `bound`) with `knobs` that violates `invariant` (the
/// one the knob's protection guards; other violations are the known bugs
/// recorded in `fixtures/regressions/`).
fn first_failure(knobs: Knobs, invariant: &str, bound: u64) -> Option<u64> {
    let cfg = SimConfig { knobs, ..SimConfig::default() };
    (1_000_000..1_000_000 + bound).find(|seed| {
        run_seed(*seed, &cfg).err().is_some_and(|f| f.violation.invariant == invariant)
    })
}

#[test]
fn without_epoch_fencing_the_simulator_fails() {
    let knobs = Knobs { no_epoch_fencing: true, ..Knobs::default() };
    let found = first_failure(knobs, "epochs", 1_000);
    assert!(found.is_some(), "no epoch violation within 1000 seeds without epoch fencing");
    println!("without epoch fencing: {found:?}");
}

#[test]
fn without_adoption_after_connection_loss_the_simulator_fails() {
    let knobs = Knobs { no_adopt_after_connection_loss: true, ..Knobs::default() };
    let found = first_failure(knobs, "liveness", 400);
    assert!(
        found.is_some(),
        "no liveness violation within 400 seeds without adoption (AURORA-1061)"
    );
    println!("without adoption: {found:?}");
}

#[test]
fn without_the_lease_check_the_simulator_fails() {
    let knobs = Knobs { no_lease_check: true, ..Knobs::default() };
    let found = first_failure(knobs, "single_leader", 100);
    assert!(found.is_some(), "no single-leader violation within 100 seeds without the lease check");
    println!("without the lease check: {found:?}");
}

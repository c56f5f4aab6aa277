//! The exhaustive checker's small bounds (docs/design.md#issue-41): every interleaving of
//! each bounded scenario, up to its small bound, keeps every invariant.
//!
//! On the code before issue 41 (docs/design.md#issue-41)'s fixes, five of these fail, each with the
//! counterexample of its scenario (see docs/simulator.md, "The exhaustive
//! checker"): `service_late_exit_0` (scenario 1), `broken_rollout` (4),
//! `kill_during_blip` (5), `end_reported_to_new_leader` (6) and
//! `teardown_frees_capacity` (8): that is how the checker was shown able
//! to fail. `cordon_dead_failover` (3) and `healthy_run_then_failover` (2)
//! pass at their small bounds; their large bounds (`regent-check`) find
//! scenarios 3 and 2.

use regent_tests::check::{all, explore, Scenario};

fn scenario(name: &str) -> Scenario {
    all().into_iter().find(|s| s.name == name).expect("a scenario of that name")
}

fn holds(name: &str) {
    let sc = scenario(name);
    let report = explore(&sc, sc.small);
    println!("{report}");
    assert!(report.violation.is_none(), "{report}");
    assert!(report.complete, "the small bound was cut: {report}");
}

#[test]
fn service_late_exit_0() {
    holds("service_late_exit_0");
}

#[test]
fn kill_during_blip() {
    holds("kill_during_blip");
}

#[test]
fn teardown_frees_capacity() {
    holds("teardown_frees_capacity");
}

#[test]
fn end_reported_to_new_leader() {
    holds("end_reported_to_new_leader");
}

#[test]
fn healthy_run_then_failover() {
    holds("healthy_run_then_failover");
}

#[test]
fn broken_rollout() {
    holds("broken_rollout");
}

#[test]
fn cordon_dead_failover() {
    holds("cordon_dead_failover");
}

#[test]
fn every_scenario_has_a_test() {
    let names: Vec<&str> = all().iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "service_late_exit_0",
            "kill_during_blip",
            "teardown_frees_capacity",
            "end_reported_to_new_leader",
            "healthy_run_then_failover",
            "broken_rollout",
            "cordon_dead_failover"
        ]
    );
}

//! Proof that the simulator can fail: each test-only knob that removes a
//! protection makes it report a violation within a bounded number of seeds.

use regent_tests::sim::{run_schedule, run_seed, Fault, Knobs, Schedule, SimConfig};

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

#[test]
fn without_the_acting_lease_the_simulator_fails() {
    // A standby deposes a live leader (a detector false positive); the
    // leader, frozen meanwhile, wakes with a kill to send, unaware. Without
    // the acting lease (and a new leader's wait) that kill goes out after
    // its successor's first commands.
    // About one seed in 400 runs into it (1000378 and 1000876 on the code of
    // 2026-12-01); the search stops at the first.
    let knobs = Knobs { no_acting_lease: true, ..Knobs::default() };
    let found = first_failure(knobs, "command_order", 1_500);
    assert!(
        found.is_some(),
        "no command-order violation within 1500 seeds without the acting lease"
    );
    println!("without the acting lease: {found:?}");
}

/// The fast takeover's worst case, on purpose: a subscriber asks the leader
/// to kill an executor, the leader freezes right after the kill's write
/// landed, and its listener refuses, so a standby deposes it and leads.
/// The frozen leader wakes with its session (and ZooKeeper lease) alive and
/// the write's confirmation to act on.
fn frozen_deposed_leader() -> Schedule {
    let t = 10_000;
    Schedule {
        chaos: 0,
        faults: vec![
            (t, Fault::SubKill { s: 0 }),
            (t + 4, Fault::PauseMaster { m: 0, leader: true, ms: 450 }),
            (t + 5, Fault::ListenerRefuses { m: 0, leader: true, ms: 1_000 }),
        ],
    }
}

#[test]
fn a_frozen_deposed_leader_commands_after_its_successor_only_without_the_acting_lease() {
    let schedule = frozen_deposed_leader();
    let run = |knobs: Knobs, seed: u64| {
        let cfg = SimConfig { knobs, ..SimConfig::default() }.sized_for(seed);
        run_schedule(seed, &cfg, &schedule, false)
    };
    let unsafe_knobs = Knobs { no_acting_lease: true, ..Knobs::default() };
    let caught: Vec<u64> = (0..40)
        .filter(|seed| run(unsafe_knobs, *seed).is_err_and(|(v, _)| v.invariant == "command_order"))
        .collect();
    assert!(caught.len() >= 4, "the schedule rarely reaches the race: {caught:?}");
    for seed in caught {
        if let Err((v, _)) = run(Knobs::default(), seed) {
            panic!("seed {seed} fails with the acting lease: {v:?}");
        }
    }
}

/// Issue 20 (docs/design.md#issue-20) scenario 6 (by reading the code, now shown): a runtime clock
/// that stops while the host is suspended (CLOCK_MONOTONIC, `Instant` on
/// Linux) lets a leader that slept past its session wake believing its
/// lease fresh, and act beside its successor. With the clock the runtimes
/// must use (CLOCK_BOOTTIME, counting the sleep) the same seeds pass
/// (`sim_seeds::seeds_0_to_99_with_host_suspends`).
#[test]
fn with_a_clock_that_stops_during_a_suspend_the_simulator_fails() {
    let knobs = Knobs { monotonic_clock: true, ..Knobs::default() };
    let cfg = SimConfig { knobs, suspend: true, ..SimConfig::default() };
    let found = (1_000_000..1_000_100u64).find(|seed| {
        run_seed(*seed, &cfg).err().is_some_and(|f| f.violation.invariant == "single_leader")
    });
    assert!(found.is_some(), "no single-leader violation within 100 seeds with a stopped clock");
    println!("with a clock that stops during a suspend: {found:?}");
}

/// The first seed (of `bound`) of the preemption mode (`--api-jobs
/// --preemption`) with `knobs` that violates `invariant`.
fn first_preemption_failure(knobs: Knobs, invariant: &str, bound: u64) -> Option<u64> {
    let cfg = SimConfig { knobs, api_jobs: true, preemption: true, ..SimConfig::default() };
    (1_000_000..1_000_000 + bound).find(|seed| {
        run_seed(*seed, &cfg).err().is_some_and(|f| f.violation.invariant == invariant)
    })
}

/// A leader that does not know the tenants' guarantees (told them without
/// any) preempts as one that ignored them would: `preemption_guarantee`,
/// judging by the guarantees the operator meant, catches it.
#[test]
fn a_leader_preempting_below_a_guarantee_is_caught() {
    let knobs = Knobs { hidden_guarantees: true, ..Knobs::default() };
    let found = first_preemption_failure(knobs, "preemption_guarantee", 100);
    assert!(found.is_some(), "no preemption_guarantee violation within 100 seeds");
    println!("preempting below a guarantee: {found:?}");
}

/// A leader that settles a preempted executor's slot when it ends instead
/// of refilling it (`master::Config::unsafe_no_refill_after_stop`) loses
/// the slot: `preempted_slots` catches it.
#[test]
fn a_leader_losing_a_preempted_slot_is_caught() {
    let knobs = Knobs { no_refill_after_stop: true, ..Knobs::default() };
    let found = first_preemption_failure(knobs, "preempted_slots", 100);
    assert!(found.is_some(), "no preempted_slots violation within 100 seeds");
    println!("losing a preempted slot: {found:?}");
}

/// The first seed (of `bound`) of the services mode (`--api-jobs
/// --services`, docs/design.md#issue-45 item 5) with `knobs` that violates
/// `invariant`.
fn first_services_failure(knobs: Knobs, invariant: &str, bound: u64) -> Option<u64> {
    let cfg = SimConfig { knobs, api_jobs: true, services: true, ..SimConfig::default() };
    (1_000_000..1_000_000 + bound).find(|seed| {
        run_seed(*seed, &cfg).err().is_some_and(|f| f.violation.invariant == invariant)
    })
}

/// A worker that starts a check's run while one is in flight
/// (`worker::Config::unsafe_overlapping_checks`) is caught by
/// `check_inflight` (a SLOWCHECK executor answers after its interval).
#[test]
fn a_worker_running_a_check_twice_at_once_is_caught() {
    let knobs = Knobs { overlapping_checks: true, ..Knobs::default() };
    let found = first_services_failure(knobs, "check_inflight", 20);
    assert!(found.is_some(), "no check_inflight violation within 20 seeds");
    println!("overlapping check runs: {found:?}");
}

/// A worker that counts a run its backstop skipped as a failure
/// (`worker::Config::unsafe_skipped_checks_fail`) stops an executor whose
/// checks never failed (a SLOWCHECK one): `health_restarts` catches it.
#[test]
fn a_worker_stopping_an_executor_its_checks_did_not_fail_is_caught() {
    let knobs = Knobs { skipped_checks_fail: true, ..Knobs::default() };
    let found = first_services_failure(knobs, "health_restarts", 20);
    assert!(found.is_some(), "no health_restarts violation within 20 seeds");
    println!("skipped runs counted as failures: {found:?}");
}

/// A worker whose manual checks lapse however often the framework reports
/// (`worker::Config::unsafe_manual_ttl_kept`) stops executors their
/// framework reported healthy: `health_restarts` catches it
/// (docs/design.md#issue-45).
#[test]
fn a_worker_lapsing_manual_checks_the_framework_reported_is_caught() {
    let knobs = Knobs { manual_ttl_kept: true, ..Knobs::default() };
    let found = first_services_failure(knobs, "health_restarts", 20);
    assert!(found.is_some(), "no health_restarts violation within 20 seeds");
    println!("manual reports ignored for the TTL: {found:?}");
}

/// A leader that does not charge a baking slot to `max_parallel`
/// (`master::Config::unsafe_deploy_uncharged_baking`) stops the next old
/// executor as soon as a new one runs: `deploy_down` catches it.
#[test]
fn a_deployment_not_counting_baking_slots_is_caught() {
    let knobs = Knobs { deploy_uncharged_baking: true, ..Knobs::default() };
    let found = first_services_failure(knobs, "deploy_down", 20);
    assert!(found.is_some(), "no deploy_down violation within 20 seeds");
    println!("baking slots uncharged: {found:?}");
}

/// A leader that never reverts a failed deployment
/// (`master::Config::unsafe_no_auto_revert`): `deploy_reverts` catches it.
#[test]
fn a_failed_deployment_left_unreverted_is_caught() {
    let knobs = Knobs { no_auto_revert: true, ..Knobs::default() };
    let found = first_services_failure(knobs, "deploy_reverts", 20);
    assert!(found.is_some(), "no deploy_reverts violation within 20 seeds");
    println!("no auto_revert: {found:?}");
}

/// A new leader that starts every loaded deployment's counts afresh
/// (`master::Config::unsafe_deployment_afresh_on_takeover`) loses the ends
/// its predecessor counted: `deploy_durable` catches it.
#[test]
fn a_deployment_forgotten_at_a_failover_is_caught() {
    let knobs = Knobs { deployment_afresh_on_takeover: true, ..Knobs::default() };
    let found = first_services_failure(knobs, "deploy_durable", 40);
    assert!(found.is_some(), "no deploy_durable violation within 40 seeds");
    println!("deployments afresh on takeover: {found:?}");
}

/// Without the executor shims' leases (`Knobs::no_shim`,
/// docs/design.md#issue-45) only a running worker process stops a
/// cut-off singleton: one that outlived its worker's process (a crash) or
/// whose process was paused runs on past the leader's wait while its slot
/// runs elsewhere, and `singleton_slots`, which no longer leaves such
/// executors out, catches it (seed 92 of `--singletons --api-jobs` first,
/// on the code of 2026-12-07). The seed it finds passes with the shims.
#[test]
fn without_the_shims_lease_a_singleton_runs_twice() {
    let with_shims = SimConfig { singletons: true, api_jobs: true, ..SimConfig::default() };
    let knobs = Knobs { no_shim: true, ..Knobs::default() };
    let without = SimConfig { knobs, ..with_shims.clone() };
    let found = (0..300).find(|seed| {
        run_seed(*seed, &without).err().is_some_and(|f| f.violation.invariant == "singleton_slots")
    });
    let Some(seed) = found else {
        panic!("no singleton_slots violation within 300 seeds without the shims' leases");
    };
    if let Err(f) = run_seed(seed, &with_shims) {
        panic!("seed {seed} fails with the shims too: {f}");
    }
    println!("without the shims' leases: seed {seed}");
}

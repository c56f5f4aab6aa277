//! `regent-sim`: a deterministic, in-memory failover demonstration.
//!
//! Three masters and five workers run through the real machines over the
//! test harness's network; the leader is deposed twice (once with a late
//! revocation, so two masters briefly believe they lead) and the program
//! prints who registered where and how long (in virtual time) each failover
//! took. Same seed, same output.
//!
//! Usage: `regent-sim [SEED]`

use regent_core::master::WorkerState;
use regent_core::Millis;
use regent_tests::cluster::{master_addr, Cluster, Step};

fn registered_with(c: &Cluster, leader: usize) -> usize {
    c.workers
        .iter()
        .filter(|w| w.status().registered && w.status().active == Some(master_addr(leader)))
        .count()
}

fn until_all_registered(c: &mut Cluster, leader: usize) -> Millis {
    let start = c.now;
    while registered_with(c, leader) < c.workers.len() {
        assert!(
            c.now.since(start) < Millis(120_000),
            "workers did not re-register within 2 minutes"
        );
        c.settle(Millis(10));
    }
    c.now.since(start)
}

fn report(c: &Cluster, leader: usize) {
    let m = &c.masters[leader];
    let alive = m.workers().iter().filter(|e| e.state == WorkerState::Alive).count();
    println!(
        "  m{leader} leads at {}: {} workers in its registry, {} alive, {} worker exits",
        m.epoch(),
        m.workers().len(),
        alive,
        c.exits.len()
    );
}

fn main() {
    let seed = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(7);
    let mut c = Cluster::new(3, 5, seed);
    println!("regent-sim (seed {seed}): 3 masters, 5 workers");
    c.step(&Step::Elect(0));
    let t = until_all_registered(&mut c, 0);
    println!("m0 elected; all 5 workers registered after {t} of virtual time");
    report(&c, 0);

    c.step(&Step::Elect(1));
    let t = until_all_registered(&mut c, 1);
    println!("m0 deposed, m1 elected; all workers followed m1 after {t}");
    report(&c, 1);

    c.step(&Step::ElectLate(2));
    let t = until_all_registered(&mut c, 2);
    c.revoke_stale();
    println!("m2 elected while m1 still believed it led; all workers followed m2 after {t}");
    report(&c, 2);

    c.settle(Millis(30_000));
    if let Err(v) = c.check_safety().and_then(|_| c.check_settled()) {
        eprintln!("invariant {} violated: {}", v.invariant, v.detail);
        std::process::exit(1);
    }
    println!("after 30 s of quiet: every worker registered exactly once with m2, no exits");
}

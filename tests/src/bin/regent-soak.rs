//! `regent-soak`: runs the deterministic whole-cluster simulator over a range
//! of seeds and reports simulated runs per second; on a failure it prints the
//! seed, the violated invariant, the fault schedule, the last events and a
//! command that replays it.
//!
//! ```text
//! regent-soak [--seeds N] [--from S] [--threads T] [--keep-going]
//!             [--datagram] [--takeovers] [--operator] [--jobs] [--api-jobs] [--tenants] [--preemption]
//!             [--slow-store] [--zk-latency] [--zk-packet-limit BYTES] [--clock-steps] [--lost-id-state] [--suspend] [--singletons] [--services]
//!             [--no-epoch-fencing] [--no-adopt] [--no-lease-check] [--no-acting-lease]
//!             [--monotonic-clock] [--hide-guarantees] [--no-refill-after-stop] [--overlapping-checks] [--skipped-checks-fail] [--manual-ttl-kept]
//!             [--uncharged-baking] [--no-auto-revert] [--deployment-afresh] [--no-shim] [--skip INVARIANT]...
//! regent-soak --replay SEED [same flags]
//! ```
//!
//! The fault flags add faults to each seed's schedule (docs/design.md#issue-20: store
//! writes 10–15 s late, ZooKeeper round trips of 150 ms–1 s, wall-clock
//! steps of an hour, host suspends); `--zk-packet-limit` lowers the
//! ZooKeeper model's 1 MiB packet limit; the `--no-*` and
//! `--monotonic-clock` knobs remove a protection (the simulator must then
//! fail); `--skip` leaves an invariant unchecked (a known bug's). A
//! failure's replay line carries every flag of the run.
//! ```

use regent_tests::sim::{run_seed, Knobs, SimConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

struct Args {
    seeds: u64,
    from: u64,
    threads: usize,
    replay: Option<u64>,
    keep_going: bool,
    config: SimConfig,
}

fn usage() -> ! {
    eprintln!(
        "usage: regent-soak [--seeds N] [--from S] [--threads T] [--datagram] [--takeovers] [--operator] [--jobs] [--api-jobs] [--tenants] [--preemption] [--slow-store] [--zk-latency] [--zk-packet-limit BYTES] [--clock-steps] [--lost-id-state] [--suspend] [--singletons] [--services] [--skip INVARIANT] [--no-epoch-fencing] [--no-adopt] [--no-lease-check] [--no-acting-lease] [--monotonic-clock] [--hide-guarantees] [--no-refill-after-stop] [--overlapping-checks] [--skipped-checks-fail] [--manual-ttl-kept] [--uncharged-baking] [--no-auto-revert] [--deployment-afresh] [--no-shim] [--keep-going]\n       regent-soak --replay SEED [knobs]"
    );
    std::process::exit(2)
}

fn parse() -> Args {
    let mut a = Args {
        seeds: 1_000,
        from: 0,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        replay: None,
        keep_going: false,
        config: SimConfig::default(),
    };
    let mut knobs = Knobs::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let num = |it: &mut dyn Iterator<Item = String>| -> u64 {
            it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| usage())
        };
        match arg.as_str() {
            "--seeds" => a.seeds = num(&mut it),
            "--from" => a.from = num(&mut it),
            "--threads" => a.threads = num(&mut it).max(1) as usize,
            "--replay" => a.replay = Some(num(&mut it)),
            "--keep-going" => a.keep_going = true,
            "--datagram" => a.config.datagram = true,
            "--takeovers" => a.config.takeovers = true,
            "--operator" => a.config.operator = true,
            "--jobs" => a.config.jobs = true,
            "--api-jobs" => a.config.api_jobs = true,
            "--tenants" => a.config.tenants = true,
            "--preemption" => a.config.preemption = true,
            "--hide-guarantees" => knobs.hidden_guarantees = true,
            "--no-refill-after-stop" => knobs.no_refill_after_stop = true,
            "--slow-store" => a.config.slow_store = true,
            "--zk-latency" => a.config.zk_latency = true,
            "--zk-packet-limit" => a.config.zk_packet_limit = num(&mut it) as usize,
            "--clock-steps" => a.config.clock_steps = true,
            "--lost-id-state" => a.config.lost_id_state = true,
            "--suspend" => a.config.suspend = true,
            "--singletons" => a.config.singletons = true,
            "--services" => a.config.services = true,
            "--overlapping-checks" => knobs.overlapping_checks = true,
            "--skipped-checks-fail" => knobs.skipped_checks_fail = true,
            "--manual-ttl-kept" => knobs.manual_ttl_kept = true,
            "--uncharged-baking" => knobs.deploy_uncharged_baking = true,
            "--no-auto-revert" => knobs.no_auto_revert = true,
            "--deployment-afresh" => knobs.deployment_afresh_on_takeover = true,
            "--no-shim" => knobs.no_shim = true,
            "--monotonic-clock" => knobs.monotonic_clock = true,
            "--skip" => a.config.skip.push(it.next().unwrap_or_else(|| usage())),
            "--no-epoch-fencing" => knobs.no_epoch_fencing = true,
            "--no-adopt" => knobs.no_adopt_after_connection_loss = true,
            "--no-lease-check" => knobs.no_lease_check = true,
            "--no-acting-lease" => knobs.no_acting_lease = true,
            _ => usage(),
        }
    }
    a.config.knobs = knobs;
    a
}

fn main() {
    let args = parse();
    if let Some(seed) = args.replay {
        match run_seed(seed, &args.config) {
            Ok(stats) => println!("seed {seed} passes: {stats:?}"),
            Err(f) => {
                println!("{f}");
                std::process::exit(1);
            }
        }
        return;
    }
    let next = Arc::new(AtomicU64::new(args.from));
    let end = args.from + args.seeds;
    let done = Arc::new(AtomicU64::new(0));
    let events = Arc::new(AtomicU64::new(0));
    // Leaderships given up, fast takeovers, and those of a live leader.
    let step_downs = Arc::new(AtomicU64::new(0));
    let depositions = Arc::new(AtomicU64::new(0));
    let live_depositions = Arc::new(AtomicU64::new(0));
    // Executors started, and those given GPUs (named resources).
    let started = Arc::new(AtomicU64::new(0));
    let gpu_started = Arc::new(AtomicU64::new(0));
    // The API client's requests, its submissions accepted, and replayed.
    let api = Arc::new((AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)));
    // Executors stopped by preemption.
    let preemptions = Arc::new(AtomicU64::new(0));
    // Singleton executors stopped by their cut-off workers.
    let cut_off_stops = Arc::new(AtomicU64::new(0));
    // Singleton executors stopped by their shims' leases: in all, with the
    // worker's process down, paused.
    let shim_stops = Arc::new([0; 3].map(AtomicU64::new));
    // Check runs, unhealthy stops, deployments failed and stopped, reverts
    // started and succeeded.
    let services = Arc::new([0; 12].map(AtomicU64::new));
    let failures: Arc<Mutex<Vec<u64>>> = Arc::default();
    let start = Instant::now();
    let workers: Vec<_> = (0..args.threads)
        .map(|_| {
            let (next, done, events, failures) =
                (next.clone(), done.clone(), events.clone(), failures.clone());
            let (step_downs, depositions, live_depositions) =
                (step_downs.clone(), depositions.clone(), live_depositions.clone());
            let (started, gpu_started) = (started.clone(), gpu_started.clone());
            let api = api.clone();
            let preemptions = preemptions.clone();
            let cut_off_stops = cut_off_stops.clone();
            let shim_stops = shim_stops.clone();
            let services = services.clone();
            let config = args.config.clone();
            let keep_going = args.keep_going;
            std::thread::spawn(move || loop {
                if !keep_going && !failures.lock().expect("no panics").is_empty() {
                    return;
                }
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= end {
                    return;
                }
                match run_seed(seed, &config) {
                    Ok(stats) => {
                        events.fetch_add(stats.events, Ordering::Relaxed);
                        step_downs.fetch_add(stats.step_downs, Ordering::Relaxed);
                        depositions.fetch_add(stats.depositions, Ordering::Relaxed);
                        live_depositions.fetch_add(stats.live_depositions, Ordering::Relaxed);
                        started.fetch_add(stats.executors_started, Ordering::Relaxed);
                        gpu_started.fetch_add(stats.resource_executors_started, Ordering::Relaxed);
                        api.0.fetch_add(stats.api_requests, Ordering::Relaxed);
                        api.1.fetch_add(stats.api_accepted, Ordering::Relaxed);
                        api.2.fetch_add(stats.api_replayed, Ordering::Relaxed);
                        preemptions.fetch_add(stats.preemptions, Ordering::Relaxed);
                        cut_off_stops.fetch_add(stats.cut_off_stops, Ordering::Relaxed);
                        for (i, n) in
                            [stats.shim_stops, stats.shim_stops_down, stats.shim_stops_paused]
                                .into_iter()
                                .enumerate()
                        {
                            shim_stops[i].fetch_add(n, Ordering::Relaxed);
                        }
                        for (i, n) in [
                            stats.check_runs,
                            stats.unhealthy_stops,
                            stats.deployments_failed,
                            stats.reverts_started,
                            stats.reverts_succeeded,
                            stats.manual_reports,
                            stats.manual_reports_counted,
                            stats.promotions_sent,
                            stats.promotions,
                            stats.promotions_refused,
                            stats.manual_stops,
                            stats.readopted_with_rules,
                        ]
                        .into_iter()
                        .enumerate()
                        {
                            services[i].fetch_add(n, Ordering::Relaxed);
                        }
                    }
                    Err(f) => {
                        println!("FAILURE\n{f}\n");
                        failures.lock().expect("no panics").push(seed);
                    }
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if n % 1_000 == 0 {
                    let secs = start.elapsed().as_secs_f64();
                    eprintln!("{n} runs, {:.1} runs/s", n as f64 / secs);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("soak thread");
    }
    let secs = start.elapsed().as_secs_f64();
    let n = done.load(Ordering::Relaxed);
    let mut failed = failures.lock().expect("no panics").clone();
    failed.sort_unstable();
    println!(
        "{n} runs (seeds {}..{end}) in {secs:.1} s: {:.1} runs/s, {:.0} events/run, {} threads; {} failing seeds {failed:?}",
        args.from,
        n as f64 / secs,
        events.load(Ordering::Relaxed) as f64 / n.max(1) as f64,
        args.threads,
        failed.len()
    );
    println!(
        "passing runs: {} step-downs, {} depositions (fast takeovers), {} of them of a live leader; {} executors started, {} of them with GPUs",
        step_downs.load(Ordering::Relaxed),
        depositions.load(Ordering::Relaxed),
        live_depositions.load(Ordering::Relaxed),
        started.load(Ordering::Relaxed),
        gpu_started.load(Ordering::Relaxed)
    );
    if args.config.api_jobs {
        println!(
            "API client: {} requests sent (retries included), {} submissions accepted, {} of them replayed",
            api.0.load(Ordering::Relaxed),
            api.1.load(Ordering::Relaxed),
            api.2.load(Ordering::Relaxed)
        );
    }
    if args.config.preemption {
        println!(
            "preemption: {} executors stopped by preemption",
            preemptions.load(Ordering::Relaxed)
        );
    }
    if args.config.singletons {
        println!(
            "singletons: {} executors stopped by workers cut off from every master",
            cut_off_stops.load(Ordering::Relaxed)
        );
        let n = |i: usize| shim_stops[i].load(Ordering::Relaxed);
        println!(
            "shims: {} singletons stopped by their shim's lease, {} of them lapsed with the worker process down, {} with it paused",
            n(0),
            n(1),
            n(2)
        );
    }
    if args.config.services {
        let n = |i: usize| services[i].load(Ordering::Relaxed);
        println!(
            "services: {} check runs, {} executors stopped by failing checks, {} deployments failed and stopped, {} reverts started, {} reverts succeeded",
            n(0),
            n(1),
            n(2),
            n(3),
            n(4)
        );
        println!(
            "manual checks: {} reports sent, {} taken in by workers, {} executors stopped by a failing manual check; promotions: {} sent, {} accepted, {} refused (nothing awaited one)",
            n(5),
            n(6),
            n(10),
            n(7),
            n(8),
            n(9)
        );
        println!("re-adopted executors given their checks and disconnect rule again: {}", n(11));
    }
    if !failed.is_empty() {
        std::process::exit(1);
    }
}

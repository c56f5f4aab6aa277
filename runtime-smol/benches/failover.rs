//! Failover and footprint figures of the `regent` binary, measured on real
//! processes on loopback (and a real ZooKeeper server, tickTime 200):
//!
//! * ZooKeeper failover, in replacement rounds (docs/design.md#issue-12): two masters and
//!   three workers told of the first master only; each round a fresh master
//!   joins at a *new* address, then the leader is stopped — `kill -9` with
//!   sessions of 4 s and 40 s (the fast takeover: a standby sees the
//!   leader's connection end and its port refuse, and deletes its election
//!   node), or SIGTERM (the leader closes its session) — and the time runs
//!   from the signal to one master ALIVE with all three workers
//!   re-registered (every master's `/api/state` polled every 20 ms);
//! * an operator's handoff: from `regent step-down` to the other master
//!   ALIVE with every worker (the old leader stays up as a standby);
//! * a cut link: the leader's ZooKeeper connection severed at a TCP proxy
//!   while a fourth worker registers, until a leader is ALIVE with all four
//!   (the write is resent on the same session; nobody exits);
//! * filesystem mode: `kill -9` of the master, restart on the same port and
//!   store, until ALIVE with all three workers (process start included);
//! * the same with the master replaced at a *new* address (the workers were
//!   told of the old one only: the new master contacts them, seed 002 (docs/design.md#seed-002));
//!   (A replacement round counts as recovered when one master is ALIVE with
//!   every worker within the session timeout + 10 s, at least 30 s.)
//! * a fresh master's launch to ALIVE (filesystem, empty store);
//! * the master's RSS (`VmRSS`) idle with three workers registered.
//!
//! `cargo bench -p regent-smol --bench failover` (release build; Cargo
//! passes `--bench`). `REGENT_BENCH_REPS` sets the repetitions (default 5).
//! Figures, not assertions: the end-to-end suites assert outcomes only.

#[path = "../tests/support/cluster.rs"]
mod cluster;
#[path = "../tests/support/zk_proxy.rs"]
mod zk_proxy;
#[path = "../tests/support/zk_server.rs"]
mod zk_server;

use cluster::{
    alive_with_workers, api_state, sole_alive, unique, wait_for, Cluster, MasterSpec, Proc,
};
use std::time::{Duration, Instant};
use zk_proxy::ZkProxy;
use zk_server::ZkServer;

const WORKERS: [&str; 3] = ["w1", "w2", "w3"];
/// How often the masters are polled while timing.
const TIMING_POLL: Duration = Duration::from_millis(20);
/// Bound for one measured event.
const BOUND: Duration = Duration::from_secs(60);

/// Polls `f` every [`TIMING_POLL`] from `start`; returns the elapsed time
/// when it first holds.
fn time_until(start: Instant, what: &str, mut f: impl FnMut() -> bool) -> Duration {
    loop {
        if f() {
            return start.elapsed();
        }
        assert!(start.elapsed() < BOUND, "{what} did not happen within {BOUND:?}");
        std::thread::sleep(TIMING_POLL);
    }
}

/// The `timeout=` of the master's "ZooKeeper session open" log line.
fn negotiated(p: &Proc) -> String {
    let log = p.stderr();
    log.lines()
        .rev()
        .filter(|l| l.contains("ZooKeeper session open"))
        .find_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("timeout=")))
        .unwrap_or("?")
        .to_owned()
}

/// One ZooKeeper failover: three masters, three workers, the leader
/// stopped (`kill -9`, or SIGTERM when `graceful`). Returns the time from
/// the signal to a new leader ALIVE with every worker, and the session
/// timeout the server granted the killed leader.
/// How the leader is made to go (or to falter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Kill9,
    Term,
    StepDown,
    Sever,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Kill9 => "kill -9",
            Fault::Term => "SIGTERM",
            Fault::StepDown => "regent step-down",
            Fault::Sever => "a severed ZooKeeper link during a registration",
        }
    }
}

fn zk_failover(zk: &ZkServer, session_ms: u64, fault: Fault) -> (Duration, String) {
    let c = Cluster::new("bench-zk");
    let root = format!("/{}", unique("bench"));
    // Each master dials ZooKeeper through a proxy of its own (for `Sever`).
    let proxies: Vec<ZkProxy> = (0..3).map(|_| ZkProxy::start(zk.addr())).collect();
    let specs: Vec<MasterSpec> = ["m1", "m2", "m3"]
        .iter()
        .zip(&proxies)
        .map(|(id, proxy)| MasterSpec::zookeeper(id, &proxy.addr(), &root, session_ms))
        .collect();
    let masters: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
    let mut procs: Vec<Proc> = specs.iter().map(|s| c.master(s)).collect();
    let mut running = vec![true; 3];
    let mut _workers: Vec<Proc> =
        WORKERS.iter().map(|id| c.worker(id, &masters, 1, 256, &[])).collect();
    let (leader, _) =
        wait_for(BOUND, "a leader with 3 workers", || sole_alive(&specs, &running, &WORKERS));
    wait_for(BOUND, "two standbys", || {
        let standbys = (0..3)
            .filter(|&i| i != leader)
            .filter(|&i| api_state(&specs[i].http_addr()).is_some_and(|v| v["status"] == "STANDBY"))
            .count();
        if standbys == 2 {
            Ok(())
        } else {
            Err(format!("{standbys} standbys"))
        }
    });
    // Let the standbys settle on their watches.
    std::thread::sleep(Duration::from_millis(500));
    let granted = negotiated(&procs[leader]);
    let start = Instant::now();
    let took = match fault {
        Fault::Kill9 | Fault::Term => {
            if fault == Fault::Term {
                procs[leader].sigterm();
            } else {
                procs[leader].kill9();
            }
            running[leader] = false;
            time_until(start, "a new leader with every worker", || {
                sole_alive(&specs, &running, &WORKERS).is_ok()
            })
        }
        Fault::StepDown => {
            let out = c.run(&["step-down", "--masters", &masters.join(",")], BOUND);
            assert!(out.status.success(), "step-down: {}", String::from_utf8_lossy(&out.stderr));
            time_until(
                start,
                "another leader with every worker",
                || matches!(sole_alive(&specs, &running, &WORKERS), Ok((i, _)) if i != leader),
            )
        }
        Fault::Sever => {
            proxies[leader].sever();
            _workers.push(c.worker("w4", &masters, 1, 256, &[]));
            let all = ["w1", "w2", "w3", "w4"];
            time_until(start, "a leader with all four workers", || {
                sole_alive(&specs, &running, &all).is_ok()
            })
        }
    };
    for (i, p) in procs.iter_mut().enumerate().filter(|(i, _)| running[*i]) {
        assert!(p.is_running(), "m{} exited after {}", i + 1, fault.name());
    }
    (took, granted)
}

/// One filesystem-mode restart; returns (kill -9 to ALIVE with every
/// worker, launch of the first master to ALIVE, the master's idle RSS in
/// kB with three workers).
fn fs_restart() -> (Duration, Duration, u64) {
    let c = Cluster::new("bench-fs");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let masters = vec![spec.addr()];
    let start = Instant::now();
    let mut master = c.master(&spec);
    let launch = time_until(start, "the first master ALIVE", || {
        api_state(&spec.http_addr()).is_some_and(|v| v["status"] == "ALIVE")
    });
    let mut _workers: Vec<Proc> =
        WORKERS.iter().map(|id| c.worker(id, &masters, 1, 256, &[])).collect();
    wait_for(BOUND, "3 workers", || {
        alive_with_workers(&api_state(&spec.http_addr()).ok_or("no answer")?, &WORKERS)
    });
    // Idle: a few heartbeats.
    std::thread::sleep(Duration::from_secs(3));
    let rss = regent_std::host::rss_kb(master.pid()).expect("the master's VmRSS");
    let start = Instant::now();
    master.kill9();
    let _master = c.master(&spec);
    let took = time_until(start, "the restarted master ALIVE with every worker", || {
        api_state(&spec.http_addr()).is_some_and(|v| alive_with_workers(&v, &WORKERS).is_ok())
    });
    (took, launch, rss)
}

/// Filesystem mode, the master replaced at a new address: from the kill
/// to the new master ALIVE with every worker (told of the old address only).
fn fs_replace() -> Duration {
    let c = Cluster::new("bench-fs-replace");
    let store = c.path("store");
    let store = store.to_str().unwrap();
    let old = MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store]);
    let mut master = c.master(&old);
    let mut _workers: Vec<Proc> =
        WORKERS.iter().map(|id| c.worker(id, &[old.addr()], 1, 256, &[])).collect();
    wait_for(BOUND, "3 workers", || {
        alive_with_workers(&api_state(&old.http_addr()).ok_or("no answer")?, &WORKERS)
    });
    let new = MasterSpec::new("m2", &["--recovery", "filesystem", "--store", store]);
    let start = Instant::now();
    master.kill9();
    let _new = c.master(&new);
    time_until(start, "the new master ALIVE with every worker", || {
        api_state(&new.http_addr()).is_some_and(|v| alive_with_workers(&v, &WORKERS).is_ok())
    })
}

/// Replacement rounds with ZooKeeper (see the module docs): for each round,
/// the time to recover, or `None` when no master was ALIVE with every
/// worker within [`ROUND_BOUND`].
fn zk_replacement_rounds(
    zk: &ZkServer,
    session_ms: u64,
    fault: Fault,
    rounds: usize,
) -> (Vec<Option<Duration>>, String) {
    let c = Cluster::new("bench-zk-replace");
    let root = format!("/{}", unique("bench-replace"));
    let zk_addr = zk.addr();
    let round_bound = ROUND_BOUND.max(Duration::from_millis(session_ms + 10_000));
    let master = |id: &str| MasterSpec::zookeeper(id, &zk_addr, &root, session_ms);
    let mut specs = vec![master("m1")];
    let mut procs = vec![c.master(&specs[0])];
    let mut running = vec![true];
    wait_for(BOUND, "m1 ALIVE", || sole_alive(&specs, &running, &[]).map(|_| ()));
    specs.push(master("m2"));
    procs.push(c.master(&specs[1]));
    running.push(true);
    let mut _workers: Vec<Proc> =
        WORKERS.iter().map(|id| c.worker(id, &[specs[0].addr()], 1, 256, &[])).collect();
    let mut out = Vec::new();
    let mut granted = Vec::new();
    for round in 0..rounds {
        let Ok((leader, _)) = wait_for_opt(round_bound, || sole_alive(&specs, &running, &WORKERS))
        else {
            out.push(None);
            continue;
        };
        let id = format!("m{}", specs.len() + 1);
        specs.push(master(&id));
        procs.push(c.master(specs.last().unwrap()));
        running.push(true);
        let newcomer = specs.len() - 1;
        wait_for(BOUND, "the newcomer STANDBY", || match api_state(&specs[newcomer].http_addr()) {
            Some(v) if v["status"] == "STANDBY" => Ok(()),
            other => Err(format!("{other:?}")),
        });
        // Let the newcomer settle on its watch of the leader.
        std::thread::sleep(Duration::from_millis(500));
        granted.push(negotiated(&procs[leader]));
        let start = Instant::now();
        match fault {
            Fault::Term => procs[leader].sigterm(),
            _ => procs[leader].kill9(),
        }
        running[leader] = false;
        let took = wait_for_opt(round_bound, || sole_alive(&specs, &running, &WORKERS))
            .ok()
            .map(|_| start.elapsed());
        eprintln!(
            "  zookeeper {} session {session_ms} round {round}: {:?} ms",
            fault.name(),
            took.map(|d| ms(d).round())
        );
        out.push(took);
    }
    granted.sort();
    granted.dedup();
    (out, granted.join("/"))
}

/// How long a replacement round may take to count as recovered, at least.
const ROUND_BOUND: Duration = Duration::from_secs(30);

/// Polls `f` until it holds (its value) or `bound` passes (its last error).
fn wait_for_opt<T>(bound: Duration, mut f: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    let start = Instant::now();
    loop {
        match f() {
            Ok(t) => return Ok(t),
            Err(e) if start.elapsed() > bound => return Err(e),
            Err(_) => std::thread::sleep(TIMING_POLL),
        }
    }
}

/// (min, median, max).
fn summary(mut xs: Vec<f64>) -> (f64, f64, f64) {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = xs.len();
    let median = if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 };
    (xs[0], median, xs[n - 1])
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn row(name: &str, unit: &str, xs: Vec<f64>, target: &str) {
    let n = xs.len();
    let (min, med, max) = summary(xs);
    println!("{name:<72} {n:>2} {min:>9.0} {med:>9.0} {max:>9.0} {unit:<3}  {target}");
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --benches` runs this without `--bench`: nothing to do.
        println!("failover: run with `cargo bench -p regent-smol --bench failover`");
        return;
    }
    let reps: usize =
        std::env::var("REGENT_BENCH_REPS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    eprintln!("failover bench: {reps} repetitions each, binary {}", cluster::BIN);

    let mut fs = Vec::new();
    for i in 0..reps {
        let r = fs_restart();
        eprintln!(
            "  filesystem rep {i}: restart {:.0} ms, launch {:.0} ms, RSS {} kB",
            ms(r.0),
            ms(r.1),
            r.2
        );
        fs.push(r);
    }

    let mut fs_replaced = Vec::new();
    for i in 0..reps {
        let took = fs_replace();
        eprintln!("  filesystem replacement rep {i}: {:.0} ms", ms(took));
        fs_replaced.push(ms(took));
    }

    let zk = ZkServer::start();
    let replacement: Vec<(u64, Fault, Vec<Option<Duration>>, String)> =
        [(4000, Fault::Kill9), (40_000, Fault::Kill9), (4000, Fault::Term)]
            .into_iter()
            .map(|(session, fault)| {
                let (rounds, granted) = zk_replacement_rounds(&zk, session, fault, reps);
                (session, fault, rounds, granted)
            })
            .collect();
    let mut zk_rows = Vec::new();
    for (session, fault) in [(3000, Fault::StepDown), (3000, Fault::Sever)] {
        let mut xs = Vec::new();
        let mut granted = Vec::new();
        for i in 0..reps {
            let (took, g) = zk_failover(&zk, session, fault);
            eprintln!(
                "  zookeeper {} session {session} rep {i}: {:.0} ms (granted {g})",
                fault.name(),
                ms(took)
            );
            xs.push(ms(took));
            granted.push(g);
        }
        granted.sort();
        granted.dedup();
        zk_rows.push((session, fault, xs, granted.join("/")));
    }

    println!();
    println!(
        "{:<72} {:>2} {:>9} {:>9} {:>9} {:<3}  target",
        "measurement (ZooKeeper tickTime 200 ms)", "n", "min", "median", "max", ""
    );
    for (session, fault, rounds, granted) in replacement {
        let recovered: Vec<f64> = rounds.iter().flatten().map(|d| ms(*d)).collect();
        let name = format!(
            "ZooKeeper, leader replaced: {} (session {session}, granted {granted}), {} of {} rounds",
            fault.name(),
            recovered.len(),
            rounds.len()
        );
        let target = match fault {
            Fault::Kill9 => "median <= 300 ms",
            _ => "median <= 100 ms",
        };
        if recovered.is_empty() {
            println!("{name}: none recovered");
        } else {
            row(&name, "ms", recovered, target);
        }
    }
    for (session, fault, xs, granted) in zk_rows {
        let target = match fault {
            Fault::Sever => format!("< {session} ms (within the session)"),
            _ => "< 500 ms".to_owned(),
        };
        row(
            &format!("ZooKeeper: {} (session {session}, granted {granted})", fault.name()),
            "ms",
            xs,
            &target,
        );
    }
    row(
        "filesystem restart after kill -9 (to ALIVE + 3 workers)",
        "ms",
        fs.iter().map(|r| ms(r.0)).collect(),
        "median <= 100 ms",
    );
    row(
        "filesystem: kill -9, replaced at a new address (to ALIVE + 3 workers)",
        "ms",
        fs_replaced,
        "",
    );
    row(
        "master launch to ALIVE (filesystem, empty store)",
        "ms",
        fs.iter().map(|r| ms(r.1)).collect(),
        "",
    );
    row(
        "master RSS idle with 3 workers (VmRSS)",
        "kB",
        fs.iter().map(|r| r.2 as f64).collect(),
        "< 15360 kB (15 MB)",
    );
}

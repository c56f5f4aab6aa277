//! End-to-end: a seeded minute of mixed faults against three ZooKeeper-mode
//! masters (2 s sessions) and four workers, injected where users meet them:
//! the leader killed with `kill -9` and started again, masters paused with
//! SIGSTOP/SIGCONT, a master's ZooKeeper link severed at a TCP proxy,
//! workers killed and restarted. Watched throughout: no master lists a
//! worker twice, and no master reports ALIVE more than 1 s after another
//! master reported ALIVE at a higher epoch. Afterwards: every master process
//! is alive (losing leadership is not process death), one master is ALIVE
//! with every worker, and an application completes.
//!
//! The seed is printed (default 2026); `REGENT_FAULT_SEED=<n>` runs another
//! schedule, and replays it (the schedule, not the timing: processes and
//! the kernel are not simulated).
//! Run one at a time (`--test-threads=1`).

mod support;

use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::cluster::{
    api_state, sole_alive, unique, wait_for, workers, Cluster, MasterSpec, Proc,
};
use support::zk_proxy::ZkProxy;
use support::zk_server::ZkServer;

const WORKERS: [&str; 4] = ["w1", "w2", "w3", "w4"];
const FAULT_TIME: Duration = Duration::from_secs(60);
/// Bound for the cluster to settle after the faults (a 2 s session, a
/// recovery window, worker reconnect backoff): generous, never a timing.
const SETTLE: Duration = Duration::from_secs(60);
/// A stale leader is one still reporting ALIVE this long after another
/// master reported ALIVE at a higher epoch.
const STALE_AFTER: Duration = Duration::from_secs(1);

/// splitmix64: a seeded schedule without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One answer of one master: when the request was sent and the answer
/// received (the snapshot was taken in between), status, epoch, workers.
#[derive(Clone, Debug)]
struct Seen {
    master: usize,
    sent: Instant,
    received: Instant,
    status: String,
    epoch: u64,
    workers: Vec<String>,
}

fn observe(
    specs: Vec<MasterSpec>,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> Vec<std::thread::JoinHandle<()>> {
    // One poller per master: a paused master must not stall the others'.
    specs
        .into_iter()
        .enumerate()
        .map(|(i, spec)| {
            let (stop, seen) = (stop.clone(), seen.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let sent = Instant::now();
                    if let Some(v) = api_state(&spec.http_addr()) {
                        let s = Seen {
                            master: i,
                            sent,
                            received: Instant::now(),
                            status: v["status"].as_str().unwrap_or("?").to_owned(),
                            epoch: v["epoch"].as_u64().unwrap_or(0),
                            workers: workers(&v).into_iter().map(|(id, _)| id).collect(),
                        };
                        seen.lock().unwrap().push(s);
                    }
                    std::thread::sleep(Duration::from_millis(150));
                }
            })
        })
        .collect()
}

/// Every violation of the two watched invariants.
fn violations(seen: &[Seen]) -> Vec<String> {
    let mut out = Vec::new();
    for s in seen {
        let mut ids = s.workers.clone();
        ids.sort();
        let before = ids.len();
        ids.dedup();
        if ids.len() != before {
            out.push(format!("m{} lists a worker twice: {:?}", s.master + 1, s.workers));
        }
    }
    let alive: Vec<&Seen> = seen.iter().filter(|s| s.status == "ALIVE").collect();
    for old in &alive {
        // Conservative on both sides: the old report at the earliest it
        // could have been taken, the newer one at the latest.
        if let Some(newer) = alive.iter().find(|n| {
            n.master != old.master
                && n.epoch > old.epoch
                && old.sent > n.received
                && old.sent.duration_since(n.received) > STALE_AFTER
        }) {
            out.push(format!(
                "m{} reported ALIVE at epoch {} {:?} after m{} reported ALIVE at epoch {}",
                old.master + 1,
                old.epoch,
                old.sent.duration_since(newer.received),
                newer.master + 1,
                newer.epoch
            ));
        }
    }
    out
}

fn signal(pid: u32, sig: &str) {
    let _ =
        std::process::Command::new("kill").args([&format!("-{sig}"), &pid.to_string()]).status();
}

#[test]
fn a_seeded_minute_of_faults_leaves_every_master_running_and_a_valid_cluster() {
    // A fixed default keeps CI's schedule reproducible; set the variable to
    // explore others.
    let seed: u64 =
        std::env::var("REGENT_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(2026);
    eprintln!("fault minute: REGENT_FAULT_SEED={seed}");
    let mut rng = Rng(seed);

    let zk = ZkServer::start();
    let c = Cluster::new("fault-minute");
    let root = format!("/{}", unique("faults"));
    let proxies: Vec<ZkProxy> = (0..3).map(|_| ZkProxy::start(zk.addr())).collect();
    let specs: Vec<MasterSpec> = (0..3)
        .map(|i| {
            let zk_addr = proxies[i].addr();
            MasterSpec::new(
                &format!("m{}", i + 1),
                &[
                    "--recovery",
                    "zookeeper",
                    "--zk",
                    &zk_addr,
                    "--zk-root",
                    &root,
                    "--zk-session-timeout",
                    "2000",
                    "--worker-timeout",
                    "3000",
                ],
            )
        })
        .collect();
    let addrs: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
    let mut masters: Vec<Proc> = specs.iter().map(|s| c.master(s)).collect();
    let mut workers: Vec<Proc> =
        WORKERS.iter().map(|id| c.worker(id, &addrs, 2, 256, &[])).collect();
    wait_for(SETTLE, "a leader with every worker", || sole_alive(&specs, &[true; 3], &WORKERS));

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let pollers = observe(specs.clone(), stop.clone(), seen.clone());

    let leader = |seen: &Arc<Mutex<Vec<Seen>>>| -> Option<usize> {
        let s = seen.lock().unwrap();
        s.iter().rev().find(|x| x.status == "ALIVE").map(|x| x.master)
    };
    let end = Instant::now() + FAULT_TIME;
    let mut log = Vec::new();
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1_500 + rng.below(2_000)));
        let fault = rng.below(4);
        match fault {
            0 => {
                let m = leader(&seen).unwrap_or(rng.below(3) as usize);
                log.push(format!("kill -9 m{} and start it again", m + 1));
                masters[m].kill9();
                std::thread::sleep(Duration::from_millis(200 + rng.below(800)));
                masters[m] = c.master(&specs[m]);
            }
            1 => {
                let m = if rng.below(2) == 0 {
                    leader(&seen).unwrap_or(0)
                } else {
                    rng.below(3) as usize
                };
                let pause = 300 + rng.below(2_700);
                log.push(format!("SIGSTOP m{} for {pause} ms", m + 1));
                signal(masters[m].pid(), "STOP");
                std::thread::sleep(Duration::from_millis(pause));
                signal(masters[m].pid(), "CONT");
            }
            2 => {
                let m = rng.below(3) as usize;
                log.push(format!("sever m{}'s ZooKeeper link", m + 1));
                proxies[m].sever();
            }
            _ => {
                let w = rng.below(WORKERS.len() as u64) as usize;
                log.push(format!("kill -9 {} and start it again", WORKERS[w]));
                workers[w].kill9();
                std::thread::sleep(Duration::from_millis(200));
                workers[w] = c.worker(WORKERS[w], &addrs, 2, 256, &[]);
            }
        }
    }
    eprintln!("faults: {}", log.join("; "));

    let (leader_now, _) =
        wait_for(SETTLE, "after the faults, one leader with every worker", || {
            sole_alive(&specs, &[true; 3], &WORKERS)
        });
    stop.store(true, Ordering::SeqCst);
    for p in pollers {
        let _ = p.join();
    }
    for (i, m) in masters.iter_mut().enumerate() {
        m.assert_running(&format!("m{} after the fault minute (seed {seed})", i + 1));
    }
    let seen = seen.lock().unwrap().clone();
    let bad = violations(&seen);
    assert!(bad.is_empty(), "seed {seed}: {} violations:\n{}", bad.len(), bad.join("\n"));

    let marker = unique("after-faults");
    let mut submit = c.submit(
        "submit",
        &addrs,
        &["--executors", "2", "--cores", "1", "--memory", "64"],
        &["sh", "-c", "exit 0", &marker],
    );
    let status = submit.wait_exit(SETTLE);
    assert_eq!(
        status.code(),
        Some(0),
        "seed {seed}: an application completes after the faults (leader m{}):\n{}\n{}",
        leader_now + 1,
        submit.stdout(),
        submit.stderr()
    );
    let view: Option<Value> = api_state(&specs[leader_now].http_addr());
    eprintln!("final leader m{}: {:?}", leader_now + 1, view.map(|v| v["epoch"].clone()));
}

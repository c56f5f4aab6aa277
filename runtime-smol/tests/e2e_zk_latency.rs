//! End-to-end: ZooKeeper far away (docs/design.md#issue-20, scenario 7). A TCP proxy
//! between the leader and a real ZooKeeper server adds 150 ms, then 500 ms,
//! in each direction (a round trip of 300 ms, then 1 s), as an ensemble in
//! another region would. With the acting lease fixed at 100 ms no
//! confirmation came back in time and a framework's executors stayed
//! LAUNCHING for good; the lease now follows the measured round trip, so
//! the executors run, more slowly. Real `regent` processes on loopback,
//! 10 s sessions; outcomes within generous bounds, never timings (the
//! launch times are printed, not asserted). Run one at a time
//! (`--test-threads=1`).

mod support;

use std::time::{Duration, Instant};
use support::cluster::{api_state, executors, http_get, unique, wait_for, Cluster, MasterSpec};
use support::zk_proxy::ZkProxy;
use support::zk_server::ZkServer;

/// Bound for the cluster to form and for a framework's executors to run.
const BOUND: Duration = Duration::from_secs(120);

const WORKERS: [&str; 2] = ["w1", "w2"];

/// A `/metrics` sample of the master at `http`.
fn metric(http: &str, name: &str) -> Option<f64> {
    let (_, body) = http_get(http, "/metrics")?;
    body.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Waits until the leader at `http` shows `n` executors, every one
/// RUNNING; returns how long that took.
fn wait_running(http: &str, n: usize, what: &str) -> Duration {
    let start = Instant::now();
    wait_for(BOUND, what, || {
        let v = api_state(http).ok_or("the master does not answer")?;
        let ex = executors(&v);
        if v["status"] == "ALIVE" && ex.len() == n && ex.iter().all(|(_, s)| s == "RUNNING") {
            Ok(())
        } else {
            Err(format!("status {} executors {ex:?}", v["status"]))
        }
    });
    start.elapsed()
}

#[test]
fn executors_run_with_zookeeper_150_ms_then_500_ms_away() {
    let zk = ZkServer::start();
    let proxy = ZkProxy::start(zk.addr());
    proxy.set_latency(Duration::from_millis(150));
    let c = Cluster::new("zk-latency");
    let root = format!("/{}", unique("zk-latency"));
    let spec = MasterSpec::zookeeper("m1", &proxy.addr(), &root, 10_000);
    let masters = vec![spec.addr()];
    let http = spec.http_addr();
    let master = c.master(&spec);
    let _workers: Vec<_> = WORKERS.iter().map(|id| c.worker(id, &masters, 6, 1024, &[])).collect();
    wait_for(BOUND, "m1 ALIVE with both workers", || {
        let v = api_state(&http).ok_or("no answer")?;
        support::cluster::alive_with_workers(&v, &WORKERS)
    });
    let lease = metric(&http, "regent_acting_lease_seconds").expect("the lease gauge");
    assert!(lease >= 0.4, "the lease follows a 300 ms round trip: {lease} s");

    // One framework of 4 executors after another; each must run, making
    // `total` RUNNING on the leader. Returns the submit process (alive for
    // the test) and how long its executors took.
    let marker = unique("zk-latency-app");
    let launch = |name: &str, total: usize, what: &str| {
        let started = Instant::now();
        let submit = c.submit(
            name,
            &masters,
            &["--executors", "4", "--cores", "1", "--memory", "64"],
            &["sh", "-c", "sleep 600", &marker],
        );
        wait_running(&http, total, what);
        (submit, started.elapsed())
    };

    // 150 ms away.
    let (_first, took) = launch("submit-150", 4, "4 executors RUNNING, ZooKeeper 150 ms away");
    eprintln!("150 ms one way (L {lease} s): submit to 4 executors RUNNING in {took:?}");

    // 500 ms away: the leader's round trip outgrows its lease; it rejoins
    // with a larger one and a second framework's executors run too.
    proxy.set_latency(Duration::from_millis(500));
    let (_second, took) = launch("submit-500", 8, "8 executors RUNNING, ZooKeeper 500 ms away");
    let lease = metric(&http, "regent_acting_lease_seconds").expect("the lease gauge");
    eprintln!("500 ms one way (L {lease} s), rejoining: 4 more executors RUNNING in {took:?}");
    assert!(lease >= 1.0, "the lease follows a 1 s round trip: {lease} s");
    let log = master.stderr();
    assert!(log.contains("outgrew the acting lease"), "the leader said why it rejoined:\n{log}");

    // Still 500 ms away, with the lease that fits from the start.
    let (_third, took) = launch("submit-500-again", 12, "12 executors RUNNING, 500 ms away");
    eprintln!("500 ms one way (L {lease} s), steady: 4 more executors RUNNING in {took:?}");
    assert_eq!(metric(&http, "regent_commands_waiting"), Some(0.0), "nothing waits any more");
}

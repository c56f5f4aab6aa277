//! End-to-end: three masters elected through a real ZooKeeper server, the
//! leader killed with `kill -9` twice while an application runs. Real
//! `regent` processes and a real server on loopback; sessions of 3 s (the
//! server's tickTime 200 caps them at 4 s); outcomes are asserted within
//! generous bounds, never timings. Run one at a time (`--test-threads=1`).

mod support;

use serde_json::Value;
use std::time::Duration;
use support::cluster::{
    api_state, executors, leaders_with_marker, sole_alive, unique, wait_for, Cluster, MasterSpec,
    Proc,
};
use support::zk_server::ZkServer;

/// Generous bound for anything to happen (a failover takes a session
/// timeout plus re-registration).
const BOUND: Duration = Duration::from_secs(60);

const WORKERS: [&str; 3] = ["w1", "w2", "w3"];

/// The one ALIVE master among those still running, with every worker ALIVE
/// there exactly once: its index and view.
fn sole_leader(specs: &[MasterSpec], running: &[bool]) -> Result<(usize, Value), String> {
    sole_alive(specs, running, &WORKERS)
}

/// The executors of a view, sorted, when each is RUNNING or EXITED (none
/// failed, lost or killed).
fn healthy_executors(v: &Value) -> Result<Vec<String>, String> {
    let ex = executors(v);
    if ex.iter().all(|(_, s)| s == "RUNNING" || s == "EXITED") {
        let mut ids: Vec<String> = ex.into_iter().map(|(id, _)| id).collect();
        ids.sort();
        Ok(ids)
    } else {
        Err(format!("executors {ex:?}"))
    }
}

#[test]
fn zookeeper_three_masters_two_leader_kills() {
    let zk = ZkServer::start();
    let c = Cluster::new("zk-failover");
    let root = format!("/{}", unique("zk"));
    let (zk_addr, root) = (zk.addr(), root.as_str());
    let specs: Vec<MasterSpec> = ["m1", "m2", "m3"]
        .iter()
        .map(|id| {
            MasterSpec::new(
                id,
                &[
                    "--recovery",
                    "zookeeper",
                    "--zk",
                    &zk_addr,
                    "--zk-root",
                    root,
                    "--zk-session-timeout",
                    "3000",
                ],
            )
        })
        .collect();
    let masters: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
    let mut procs: Vec<Proc> = specs.iter().map(|s| c.master(s)).collect();
    let mut running = vec![true; 3];
    let mut workers: Vec<Proc> =
        WORKERS.iter().map(|id| c.worker(id, &masters, 1, 256, &[])).collect();
    let (first, _) =
        wait_for(BOUND, "one leader ALIVE with the 3 workers", || sole_leader(&specs, &running));

    // Long enough to span both failovers on a slow machine; the check is
    // only that the same executors run to completion.
    let marker = unique("zk-app");
    let mut submit = c.submit(
        "submit",
        &masters,
        &["--executors", "3", "--cores", "1", "--memory", "64"],
        &["sh", "-c", "sleep 25; exit 0", &marker],
    );
    let ids = wait_for(BOUND, "3 executors RUNNING on the leader", || {
        let v = api_state(&specs[first].http_addr()).ok_or("the leader does not answer")?;
        let ex = executors(&v);
        if ex.len() == 3 && ex.iter().all(|(_, s)| s == "RUNNING") {
            healthy_executors(&v)
        } else {
            Err(format!("executors {ex:?}"))
        }
    });

    let mut leader = first;
    for round in 1..=2 {
        procs[leader].kill9();
        running[leader] = false;
        let (next, view) = wait_for(BOUND, &format!("a new leader after kill {round}"), || {
            sole_leader(&specs, &running)
        });
        assert_ne!(next, leader, "a killed master cannot lead");
        assert_eq!(
            healthy_executors(&view).unwrap_or_else(|e| panic!("after kill {round}: {e}")),
            ids,
            "the new leader knows the same executors (none relaunched, none lost)"
        );
        for w in &mut workers {
            w.assert_running(&format!("after leader kill {round}"));
        }
        eprintln!(
            "kill {round}: {} -> {} leads; executor shells alive: {}",
            specs[leader].id,
            specs[next].id,
            leaders_with_marker(&marker).len()
        );
        leader = next;
    }

    let status = submit.wait_exit(BOUND);
    assert_eq!(status.code(), Some(0), "submit:\n{}\n{}", submit.stdout(), submit.stderr());
    let end = api_state(&specs[leader].http_addr()).expect("the last leader answers");
    let exited: Vec<String> = {
        let mut v: Vec<String> =
            executors(&end).into_iter().filter(|(_, s)| s == "EXITED").map(|(id, _)| id).collect();
        v.sort();
        v
    };
    assert_eq!(exited, ids, "the same three executors exited");
    for w in &mut workers {
        w.assert_running("at the end");
    }
    drop(workers);
    drop(procs);
}

//! End-to-end: tenants (docs/tenants.md; docs/design.md#issue-44) through
//! real processes. One master (filesystem store) with `--http`; tenants
//! `a` (weight 1) and `b` (weight 3) each submit a job asking for more
//! 1-core slots than the cluster holds, before any worker registers, so
//! the first placement sees both; two workers of 4 cores then join and
//! weighted DRF fills the 8 cores 2:6 (`regent tenant list --json`), and
//! the slots that wait say why (`GET /v1/jobs/{id}`). Then (ignored: it
//! finds a bug) two ZooKeeper masters, tenant `a` limited to `cores=2`, a
//! job of 4 one-core slots on 4 cores: 2 run and 2 wait on the tenant
//! limit, before and after the leader is killed with SIGKILL.

mod support;

use serde_json::Value;
use std::time::Duration;
use support::cli::{ok, run, sleep_job};
use support::cluster::{
    alive_with_workers, api_state, http_get, sole_alive, unique, wait_for, Cluster, MasterSpec,
    Proc,
};
use support::zk_server::ZkServer;

/// Generous bound for anything to happen (never a timing assertion).
const BOUND: Duration = Duration::from_secs(60);

/// `tenant name -> cores held` from `regent tenant list --json`.
fn held_cores(c: &Cluster, m: &str) -> Result<(Vec<(String, u64)>, Value), String> {
    let (code, out, err) = run(c, &["tenant", "list", "--masters", m, "--json"]);
    if code != Some(0) {
        return Err(format!("tenant list failed: {out}{err}"));
    }
    let v: Value = serde_json::from_str(&out).map_err(|e| format!("{e}: {out}"))?;
    let list = v
        .as_array()
        .ok_or(format!("not a list: {v}"))?
        .iter()
        .map(|t| {
            (
                t["tenant"]["name"].as_str().unwrap_or("?").to_owned(),
                t["held"]["cores"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    Ok((list, v))
}

fn cores_of(list: &[(String, u64)], name: &str) -> u64 {
    list.iter().find(|(n, _)| n == name).map(|(_, c)| *c).unwrap_or(0)
}

#[test]
fn two_tenants_with_weights_1_and_3_share_a_full_cluster_about_1_to_3() {
    let c = Cluster::new("tenants-drf");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let m = spec.addr();
    let masters = vec![m.clone()];
    let _master = c.master(&spec);
    wait_for(BOUND, "the master ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &[])
    });

    ok(&c, &["tenant", "set", "a", "--weight", "1", "--masters", &m]);
    ok(&c, &["tenant", "set", "b", "--weight", "3", "--masters", &m]);

    // Both jobs ask for more than the 8 cores, before any worker is there.
    let ja = sleep_job(&c, "ja", r#"tenant = "a""#, 10, "");
    let jb = sleep_job(&c, "jb", r#"tenant = "b""#, 10, "");
    ok(&c, &["job", "submit", "--masters", &m, &ja]);
    ok(&c, &["job", "submit", "--masters", &m, &jb]);

    let _w1 = c.worker("w1", &masters, 4, 1024, &[]);
    let _w2 = c.worker("w2", &masters, 4, 1024, &[]);
    wait_for(BOUND, "the workers ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1", "w2"])
    });

    // The cluster full: 8 cores held between a and b.
    let (list, v) = wait_for(BOUND, "the 8 cores held by a and b", || {
        let (list, v) = held_cores(&c, &m)?;
        if cores_of(&list, "a") + cores_of(&list, "b") == 8 {
            Ok((list, v))
        } else {
            Err(format!("{list:?}"))
        }
    });
    let (a, b) = (cores_of(&list, "a"), cores_of(&list, "b"));
    // Weighted DRF (docs/tenants.md): a 1/8 per slot at weight 1, b 1/24
    // per slot at weight 3, ties to the lower name: a 2, b 6.
    assert_eq!((a, b), (2, 6), "weights 1:3 share 8 cores 2:6: {v:#}");
    for t in v.as_array().unwrap() {
        match t["tenant"]["name"].as_str() {
            Some("a") => assert_eq!(t["tenant"]["weight"], 1, "{t}"),
            Some("b") => assert_eq!(t["tenant"]["weight"], 3, "{t}"),
            _ => {}
        }
    }

    // The waiting slots say why, and the running ones are what was counted.
    for (job, running) in [("ja", 2), ("jb", 6)] {
        let v: Value = wait_for(BOUND, "the slots running", || {
            let (status, body) =
                http_get(&spec.http_addr(), &format!("/v1/jobs/{job}")).ok_or("no answer")?;
            if status != 200 {
                return Err(format!("{status}: {body}"));
            }
            let v: Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
            let slots = v["groups"][0]["slots"].as_array().cloned().unwrap_or_default();
            let n = slots.iter().filter(|s| s["phase"] == "running").count();
            if n == running {
                Ok(v)
            } else {
                Err(format!("{n} running: {v}"))
            }
        });
        let slots = v["groups"][0]["slots"].as_array().unwrap();
        assert_eq!(slots.len(), 10, "{v}");
        let waiting: Vec<&Value> = slots.iter().filter(|s| s["phase"] == "waiting").collect();
        assert_eq!(waiting.len(), 10 - running, "{v}");
        for s in waiting {
            let reason = s["reason"].as_str().unwrap_or("");
            assert!(!reason.is_empty(), "a waiting slot names a reason: {s}");
            assert!(s["reasons"].as_array().is_some_and(|r| !r.is_empty()), "{s}");
        }
    }
    let status = ok(&c, &["job", "status", "--masters", &m, "ja"]);
    assert!(status.contains("waiting: "), "{status}");

    // Nothing moves afterwards: still 2 and 6.
    std::thread::sleep(Duration::from_secs(2));
    let (list, v) = held_cores(&c, &m).expect("tenant list");
    assert_eq!((cores_of(&list, "a"), cores_of(&list, "b")), (2, 6), "{v:#}");

    ok(&c, &["job", "delete", "--masters", &m, "ja"]);
    ok(&c, &["job", "delete", "--masters", &m, "jb"]);
}

/// `(running, waiting reasons)` of the one group of `job` as the ALIVE
/// master among `specs` (still `running`) serves `GET /v1/jobs/{job}`.
fn slots_at_leader(
    specs: &[MasterSpec],
    running: &[bool],
    job: &str,
) -> Result<(usize, Vec<String>), String> {
    let (leader, _) = sole_alive(specs, running, &["w1", "w2"])?;
    let (status, body) = http_get(&specs[leader].http_addr(), &format!("/v1/jobs/{job}"))
        .ok_or("the leader does not answer")?;
    if status != 200 {
        return Err(format!("{status}: {body}"));
    }
    let v: Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
    let slots = v["groups"][0]["slots"].as_array().cloned().unwrap_or_default();
    let n = slots.iter().filter(|s| s["phase"] == "running").count();
    let reasons = slots
        .iter()
        .filter(|s| s["phase"] == "waiting")
        .map(|s| s["reason"].as_str().unwrap_or("").to_owned())
        .collect();
    Ok((n, reasons))
}

/// The tenant limit line: exactly 2 running, 2 waiting on the limit.
fn two_run_two_wait_on_the_limit(
    specs: &[MasterSpec],
    running: &[bool],
) -> Result<(usize, Vec<String>), String> {
    let (n, reasons) = slots_at_leader(specs, running, "ja")?;
    assert!(n <= 2, "never more than the limit runs: {n} running");
    let on_limit = reasons.iter().filter(|r| r.starts_with("tenant limit: cores 2 of 2")).count();
    if n == 2 && reasons.len() == 2 && on_limit == 2 {
        Ok((n, reasons))
    } else {
        Err(format!("{n} running, waiting: {reasons:?}"))
    }
}

/// A limit holds across a `kill -9` of the leader (regression: the ZooKeeper
/// store's layout did not list a tenant's `t-` record node, so a new
/// leader loaded no tenant and placed 4 executors under `cores=2`).
#[test]
fn a_tenant_limit_holds_across_a_leader_failover() {
    let zk = ZkServer::start();
    let c = Cluster::new("tenants-limit");
    let root = format!("/{}", unique("tenants"));
    let zk_addr = zk.addr();
    let specs: Vec<MasterSpec> =
        ["m1", "m2"].iter().map(|id| MasterSpec::zookeeper(id, &zk_addr, &root, 3000)).collect();
    let masters: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
    let m = masters.join(",");
    let mut procs: Vec<Proc> = specs.iter().map(|s| c.master(s)).collect();
    let mut running = vec![true; 2];
    let _w1 = c.worker("w1", &masters, 2, 1024, &[]);
    let _w2 = c.worker("w2", &masters, 2, 1024, &[]);
    wait_for(BOUND, "one leader ALIVE with both workers", || {
        sole_alive(&specs, &running, &["w1", "w2"])
    });

    ok(&c, &["tenant", "set", "a", "--limit", "cores=2", "--masters", &m]);
    let ja = sleep_job(&c, "ja", r#"tenant = "a""#, 4, "");
    ok(&c, &["job", "submit", "--masters", &m, &ja]);

    let (_, reasons) = wait_for(BOUND, "2 running, 2 waiting on the limit", || {
        two_run_two_wait_on_the_limit(&specs, &running)
    });
    assert!(reasons.iter().all(|r| r.ends_with("(tenant a)")), "{reasons:?}");
    // Room for 4 and 2 free cores: the limit, not the cluster, holds them.
    let (list, v) = held_cores(&c, &m).expect("tenant list");
    assert_eq!(cores_of(&list, "a"), 2, "{v:#}");

    let (leader, _) = sole_alive(&specs, &running, &["w1", "w2"]).expect("a leader");
    procs[leader].kill9();
    running[leader] = false;
    let (next, _) = wait_for(BOUND, "a new leader with both workers", || {
        sole_alive(&specs, &running, &["w1", "w2"])
    });
    assert_ne!(next, leader, "a killed master cannot lead");

    // The new leader keeps the limit: still exactly 2 run, never more.
    wait_for(BOUND, "2 running, 2 waiting on the limit at the new leader", || {
        two_run_two_wait_on_the_limit(&specs, &running)
    });
    for _ in 0..10 {
        let (n, _) = slots_at_leader(&specs, &running, "ja").expect("the new leader answers");
        assert!(n <= 2, "never more than the limit runs: {n}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let (list, v) = held_cores(&c, &m).expect("tenant list");
    assert_eq!(cores_of(&list, "a"), 2, "{v:#}");
    let a = v.as_array().unwrap().iter().find(|t| t["tenant"]["name"] == "a").expect("a listed");
    assert_eq!(a["set"], true, "{a}");
    assert_eq!(a["tenant"]["limit"]["cores"], 2, "the limit is still listed: {a}");

    ok(&c, &["job", "delete", "--masters", &m, "ja"]);
}

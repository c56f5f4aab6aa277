//! End-to-end: group priorities and preemption (docs/tenants.md;
//! docs/design.md#issue-44) through real processes, no tenant set. One
//! master (filesystem store) with `--http` and one worker of 4 cores; job
//! `low` (priority 20) fills it with 4 one-core slots; job `high`
//! (priority 80) then asks for 6: the low job's executors are preempted,
//! their slots wait again (no retry charged, nothing failed) behind the 2
//! high slots that do not fit (`regent job plan`, `regent job status`,
//! `GET /v1/jobs/low`); when the high job is deleted its cores free and
//! the low job's slots run again.

mod support;

use serde_json::Value;
use std::time::Duration;
use support::cli::{ok, run, sleep_job};
use support::cluster::{alive_with_workers, api_state, http_get, wait_for, Cluster, MasterSpec};

/// Generous bound for anything to happen (never a timing assertion).
const BOUND: Duration = Duration::from_secs(60);

/// `GET /v1/jobs/{job}` at `http`.
fn job_status(http: &str, job: &str) -> Result<Value, String> {
    let (status, body) = http_get(http, &format!("/v1/jobs/{job}")).ok_or("no answer")?;
    if status != 200 {
        return Err(format!("{status}: {body}"));
    }
    serde_json::from_str(&body).map_err(|e| e.to_string())
}

/// The slots of `job`'s one group in phase `phase`.
fn in_phase(v: &Value, phase: &str) -> Vec<Value> {
    let slots = v["groups"][0]["slots"].as_array().cloned().unwrap_or_default();
    slots.into_iter().filter(|s| s["phase"] == phase).collect()
}

/// Waits until `job` has exactly `running` slots running; its status.
fn wait_running(http: &str, job: &str, running: usize) -> Value {
    wait_for(BOUND, &format!("{running} slots of {job} running"), || {
        let v = job_status(http, job)?;
        let n = in_phase(&v, "running").len();
        if n == running {
            Ok(v)
        } else {
            Err(format!("{n} running: {v}"))
        }
    })
}

#[test]
fn a_high_priority_job_preempts_a_low_one_on_a_full_cluster_and_the_slots_come_back() {
    let c = Cluster::new("priority");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let m = spec.addr();
    let http = spec.http_addr();
    let masters = vec![m.clone()];
    let _master = c.master(&spec);
    let _w1 = c.worker("w1", &masters, 4, 1024, &[]);
    wait_for(BOUND, "the master ALIVE with w1", || {
        let state = api_state(&http).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1"])
    });

    let low = sleep_job(&c, "low", "", 4, "priority = 20");
    ok(&c, &["job", "submit", "--masters", &m, &low]);
    let v = wait_running(&http, "low", 4);
    assert_eq!(v["groups"][0]["priority"], 20, "{v}");

    // The high job asks for more than the cluster holds.
    let high = sleep_job(&c, "high", "", 6, "priority = 80");
    ok(&c, &["job", "submit", "--masters", &m, &high]);
    let v = wait_running(&http, "high", 4);
    assert_eq!(v["groups"][0]["priority"], 80, "{v}");
    assert_eq!(in_phase(&v, "waiting").len(), 2, "{v}");

    // Every low executor was preempted: its slots wait again, behind the 2
    // high slots that wait, and none failed.
    let v = wait_for(BOUND, "the low slots waiting behind the high ones", || {
        let v = job_status(&http, "low")?;
        let waiting = in_phase(&v, "waiting");
        let behind = waiting
            .iter()
            .filter(|s| s["reason"].as_str() == Some("behind 2 slots of higher priority"))
            .count();
        if waiting.len() == 4 && behind == 4 {
            Ok(v)
        } else {
            Err(format!("{v}"))
        }
    });
    for s in in_phase(&v, "waiting") {
        assert_eq!(s["reasons"][0], serde_json::json!({"behind_priority": {"slots": 2}}), "{s}");
    }
    assert!(in_phase(&v, "failed").is_empty(), "a preempted slot does not fail: {v}");
    // A plan that cannot place every slot exits 2 and says why.
    let (code, out, err) = run(&c, &["job", "plan", "--masters", &m, &low]);
    let plan = format!("{out}{err}");
    assert_eq!(code, Some(2), "{plan}");
    assert!(plan.contains("4 would not: behind 2 slots of higher priority"), "{plan}");
    let status = ok(&c, &["job", "status", "--masters", &m, "low"]);
    assert!(status.contains("priority 20"), "{status}");
    // Each line names who took its executor (docs/design.md#issue-44).
    assert!(
        status.contains("waiting, preempted by high/work: behind 2 slots of higher priority"),
        "{status}"
    );

    // The high job ends: its cores free, and the low slots come back.
    ok(&c, &["job", "delete", "--masters", &m, "high"]);
    let v = wait_running(&http, "low", 4);
    assert!(in_phase(&v, "failed").is_empty(), "{v}");
    ok(&c, &["job", "delete", "--masters", &m, "low"]);
}

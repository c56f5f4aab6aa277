//! End-to-end: every reason a slot waits (docs/jobs.md, "Why a slot
//! waits"; docs/design.md#issue-44), through real processes. A master with
//! `--http` and three workers on loopback: w1 on rack r1 with two GPUs, w2
//! on rack r1 with two GPUs, cordoned, w3 on rack r2 without. A job whose
//! group of 2 slots asks for 2 GPUs each on rack r1 gets one slot placed
//! (on w1); the other waits, and `regent job plan`, `regent job status`
//! and `GET /v1/jobs/{id}` give all its reasons, ranked (no GPU free on a
//! matching worker, one matching worker cordoned); a group asking for rack
//! r9 waits because no ALIVE worker matches it; `regent status` shows a
//! waiting group's first reason and how many more.

mod support;

use serde_json::Value;
use std::time::Duration;
use support::cluster::{alive_with_workers, api_state, http_get, wait_for, Cluster, MasterSpec};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// Runs a `regent` command; its exit code and stdout.
fn run(c: &Cluster, args: &[&str]) -> (Option<i32>, String) {
    let out = c.run(args, BOUND);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some(), "regent {args:?} was killed: {stdout}\n{stderr}");
    (out.status.code(), format!("{stdout}{stderr}"))
}

const GPU_WORDS: &str = "needs 2 more gpu: the most free on a matching worker is 0 (on w1)";
const CORDONED_WORDS: &str = "1 matching worker(s) are cordoned";
const R9_WORDS: &str = "no ALIVE worker matches rack=r9";

#[test]
fn a_waiting_slot_shows_all_its_reasons_in_job_status_the_api_and_the_plan() {
    let c = Cluster::new("wait-reasons");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let m = spec.addr();
    let masters = vec![m.clone()];
    let _master = c.master(&spec);
    let _w1 =
        c.worker("w1", &masters, 4, 1024, &["--attribute", "rack=r1", "--resource", "gpu=0,1"]);
    let _w2 =
        c.worker("w2", &masters, 4, 1024, &["--attribute", "rack=r1", "--resource", "gpu=0,1"]);
    let _w3 = c.worker("w3", &masters, 4, 1024, &["--attribute", "rack=r2"]);
    wait_for(BOUND, "the workers ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1", "w2", "w3"])
    });
    let (code, out) = run(&c, &["cordon", "--masters", &m, "w2"]);
    assert_eq!(code, Some(0), "{out}");

    let job = c.path("train.toml");
    std::fs::write(
        &job,
        r#"name = "train"

[[group]]
name = "train"
count = 2
command = ["sleep", "600"]
memory_mb = 16
constraints = ["rack=r1"]
resources = { gpu = 2 }

[[group]]
name = "r9"
command = ["sleep", "600"]
memory_mb = 16
constraints = ["rack=r9"]
"#,
    )
    .unwrap();
    let job = job.to_str().unwrap();

    // The plan: every reason, ranked, the first on the group's line.
    let (code, plan) = run(&c, &["job", "plan", "--masters", &m, job]);
    assert_eq!(code, Some(2), "not all placed: {plan}");
    assert!(
        plan.contains(&format!(
            "group \"train\": 1 of 2 slot(s) would be placed (slot 0 -> w1); 1 would not: \
             {GPU_WORDS}\n  \
             reason 2: {CORDONED_WORDS}\n"
        )),
        "{plan}"
    );
    assert!(
        plan.contains(&format!(
            "group \"r9\": 0 of 1 slot(s) would be placed; 1 would not: {R9_WORDS}\n"
        )),
        "{plan}"
    );

    let (code, out) = run(&c, &["job", "submit", "--masters", &m, job]);
    assert_eq!(code, Some(0), "{out}");

    // `regent job status`: each waiting slot with every reason.
    let text = wait_for(BOUND, "the slots waiting with their reasons", || {
        let (_, text) = run(&c, &["job", "status", "--masters", &m]);
        if text
            .contains(&format!("    slot 1 waiting: {GPU_WORDS}\n      also: {CORDONED_WORDS}\n"))
        {
            Ok(text)
        } else {
            Err(text)
        }
    });
    assert!(text.contains("group \"train\": desired/placed/running/done 2/1/"), "{text}");
    assert!(text.contains(&format!("    slot 0 waiting: {R9_WORDS}\n")), "{text}");

    // `GET /v1/jobs/train`: the reasons as data, ranked.
    let (status, body) = http_get(&spec.http_addr(), "/v1/jobs/train").expect("the API answers");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    let slot = &v["groups"][0]["slots"][1];
    assert_eq!(slot["phase"], "waiting", "{v}");
    assert_eq!(slot["reason"], GPU_WORDS, "{v}");
    assert_eq!(
        slot["reasons"],
        serde_json::json!([
            {"shortfall": {"dimension": "gpu", "needed": 2, "most_free": 0, "worker": "w1"}},
            {"cordoned": {"workers": 1}}
        ]),
        "{v}"
    );
    assert_eq!(
        v["groups"][1]["slots"][0]["reasons"],
        serde_json::json!([{"no_matching_worker": {"constraint": "rack=r9"}}]),
        "{v}"
    );

    // `regent status`: a waiting group's first reason and how many more.
    let (code, status) = run(&c, &["status", "--masters", &m]);
    assert_eq!(code, Some(0), "{status}");
    assert!(status.contains(&format!("train 1/2, 1 waiting: {GPU_WORDS} (+1 more)")), "{status}");
    assert!(status.contains(&format!("r9 0/1, 1 waiting: {R9_WORDS}")), "{status}");

    let (code, out) = run(&c, &["job", "delete", "--masters", &m, "train"]);
    assert_eq!(code, Some(0), "{out}");
}

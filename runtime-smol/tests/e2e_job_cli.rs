//! End-to-end: the jobs the leader owns through the CLI (docs/jobs.md,
//! "Jobs the leader owns"): `regent job submit` creates a job (version 1),
//! a retry with the same idempotency key is replayed, an unchanged file is
//! unchanged, a check-and-set and a count change are refused with the
//! leader's reason, a changed command is an update (version 2); `regent job
//! status` shows every group's counts and the slot that cannot be placed,
//! as text and as the JSON of `GET /v1/jobs`; `regent job promote` is
//! refused while nothing awaits promotion; `regent job delete` tears the
//! job down (its executors end, TORN_DOWN in the history). A real master
//! and worker on loopback, temp dirs, bounded waits.

mod support;

use serde_json::Value;
use std::time::Duration;
use support::cli::{ok, refused};
use support::cluster::{alive_with_workers, api_state, unique, wait_for, Cluster, MasterSpec};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// A job file: group "g" (`count` slots of `sleep 600` tagged `marker`)
/// and group "big", whose one slot no worker can hold.
fn job_file(c: &Cluster, name: &str, count: u32, marker: &str) -> String {
    let path = c.path(name);
    let text = format!(
        "name = \"web\"\n\n\
         [[group]]\nname = \"g\"\ncount = {count}\n\
         command = [\"sh\", \"-c\", \"sleep 600\", \"{marker}\"]\ncores = 1\nmemory_mb = 64\n\n\
         [[group]]\nname = \"big\"\ncount = 1\ncommand = [\"true\"]\ncores = 64\n"
    );
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// The ids of the executors `/api/state` shows RUNNING.
fn running(state: &Value) -> Vec<String> {
    state["executors"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e["state"] == "RUNNING")
                .filter_map(|e| e["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn job_submit_status_and_delete_drive_a_job_the_leader_owns() {
    let c = Cluster::new("job-cli");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let masters = vec![spec.addr()];
    let m = spec.addr();
    let _master = c.master(&spec);
    let _w1 = c.worker("w1", &masters, 4, 1024, &[]);
    let state = |what: &str| api_state(&spec.http_addr()).ok_or(format!("no /api/state: {what}"));
    wait_for(BOUND, "the master ALIVE with w1", || alive_with_workers(&state("w1")?, &["w1"]));

    let marker = unique("jobcli");
    let v1 = job_file(&c, "v1.toml", 2, &marker);
    let submit = |extra: &[&str], file: &str| -> Vec<String> {
        let mut args = vec!["job", "submit", "--masters", &m];
        args.extend_from_slice(extra);
        args.push(file);
        args.into_iter().map(str::to_owned).collect()
    };
    let run = |args: Vec<String>| ok(&c, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let refuse =
        |args: Vec<String>| refused(&c, &args.iter().map(String::as_str).collect::<Vec<_>>());

    // Created, then the same key replayed, then the same file unchanged.
    assert_eq!(run(submit(&["--idempotency-key", "k1"], &v1)), "job web version 1: created\n");
    assert_eq!(run(submit(&["--idempotency-key", "k1"], &v1)), "job web version 1: replayed\n");
    assert_eq!(run(submit(&[], &v1)), "job web version 1: unchanged\n");
    // Refusals name why and change nothing.
    let err = refuse(submit(&["--expect-version", "0"], &v1));
    assert!(err.contains("job web exists (version 1); expected it not to"), "{err}");
    let err = refuse(submit(&["--expect-version", "7"], &v1));
    assert!(err.contains("job web is at version 1, not 7"), "{err}");
    let err = refuse(submit(&[], &job_file(&c, "count.toml", 3, &marker)));
    assert!(err.contains("an update does not change a group's count"), "{err}");
    let err = refuse(submit(&["--idempotency-key", ""], &v1));
    assert!(err.contains("--idempotency-key must be 1 to 128 bytes"), "{err}");

    // Status: g's two slots run; big's slot waits, naming why.
    let text = wait_for(BOUND, "g's 2 slots running in `job status`", || {
        let text = ok(&c, &["job", "status", "--masters", &m]);
        if text.contains("group \"g\": desired/placed/running/done 2/2/2/0") {
            Ok(text)
        } else {
            Err(text)
        }
    });
    assert!(text.starts_with("job web (name \"web\") version 1 ACTIVE\n"), "{text}");
    assert!(text.contains("group \"big\": desired/placed/running/done 1/0/0/0"), "{text}");
    assert!(text.contains("    slot 0 waiting: needs 64 cores"), "{text}");
    assert!(!text.contains("    slot 0 running"), "running slots are not listed: {text}");
    let all: Value =
        serde_json::from_str(&ok(&c, &["job", "status", "--masters", &m, "--json"])).unwrap();
    assert!(all["epoch"].as_u64().is_some(), "{all}");
    assert_eq!(all["jobs"][0]["job"], "web", "{all}");
    let one: Value =
        serde_json::from_str(&ok(&c, &["job", "status", "--masters", &m, "--json", "web"]))
            .unwrap();
    assert_eq!(one, all["jobs"][0], "one job's JSON is its entry in the list");
    assert_eq!(one["version"], 1, "{one}");
    let slots = one["groups"][0]["slots"].as_array().expect("g's slots");
    assert_eq!(slots.len(), 2, "{one}");
    assert!(slots.iter().all(|s| s["phase"] == "running" && s["worker"] == "w1"), "{one}");
    assert_eq!(one["groups"][1]["slots"][0]["phase"], "waiting", "{one}");
    let err = refused(&c, &["job", "status", "--masters", &m, "nope"]);
    assert!(err.contains("no job nope"), "{err}");

    // A changed command is an update: version 2, rolled out.
    let v2 = job_file(&c, "v2.toml", 2, &unique("jobcli2"));
    assert_eq!(run(submit(&["--max-parallel", "2"], &v2)), "job web version 2: updated\n");
    let one: Value =
        serde_json::from_str(&ok(&c, &["job", "status", "--masters", &m, "--json", "web"]))
            .unwrap();
    assert_eq!(one["version"], 2, "{one}");
    // Its deployment has no canary: nothing awaits promotion, and
    // `regent job promote` says so, naming each group's state.
    let err = refused(&c, &["job", "promote", "--masters", &m, "--group", "g", "web"]);
    assert!(err.contains("job web has no deployment awaiting promotion (g: rolling)"), "{err}");
    let err = refused(&c, &["job", "promote", "--masters", &m, "--group", "nope", "web"]);
    assert!(err.contains("job web has no group \"nope\""), "{err}");
    assert_eq!(
        run(submit(&["--idempotency-key", "k1"], &v1)),
        "job web version 1: replayed\n",
        "a replay answers what the key produced then, and changes nothing"
    );

    // Delete: the job is gone from the list, its executors end, and the
    // history keeps it TORN_DOWN.
    assert_eq!(ok(&c, &["job", "delete", "--masters", &m, "web"]), "job web deleted\n");
    assert_eq!(ok(&c, &["job", "status", "--masters", &m]), "no jobs\n");
    wait_for(BOUND, "web's executors ended", || {
        let s = state("after delete")?;
        let r = running(&s);
        if r.is_empty() {
            Ok(())
        } else {
            Err(format!("still running: {r:?}"))
        }
    });
    let table = ok(&c, &["status", "--masters", &m]);
    assert!(table.contains("TORN_DOWN"), "{table}");
    let err = refused(&c, &["job", "delete", "--masters", &m, "web"]);
    assert!(err.contains("no job web"), "{err}");
}

//! End-to-end: named resources (GPUs). A worker finds 4 "GPUs" with a
//! Spark-format discovery script; a job of 5 executors of 1 GPU each runs
//! 4 of them with 4 distinct `CUDA_VISIBLE_DEVICES` (and the same in
//! `REGENT_RESOURCE_GPU`), the fifth waits and `regent job plan` says why;
//! a kill -9 of the leader and then of the worker keep every assignment
//! (learned again from the re-registration, re-adopted from the running
//! records) and start nothing more. Real `regent` processes on loopback;
//! outcomes within generous bounds.

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use support::cluster::{alive_with_workers, api_state, wait_for, Cluster, MasterSpec};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// A discovery script printing 4 GPUs in Spark's format.
fn discovery_script(c: &Cluster) -> String {
    let path = c.path("find-gpus.sh");
    std::fs::write(
        &path,
        "#!/bin/sh\necho '{\"name\": \"gpu\", \"addresses\": [\"0\", \"1\", \"2\", \"3\"]}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!("gpu={}", path.display())
}

/// What each executor wrote (a file per process): its id ->
/// `CUDA_VISIBLE_DEVICES REGENT_RESOURCE_GPU`.
fn written(out: &std::path::Path) -> BTreeMap<String, String> {
    std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            let text = std::fs::read_to_string(e.path()).ok()?;
            let (id, rest) = text.strip_suffix('\n')?.split_once(' ')?;
            Some((id.to_owned(), rest.to_owned()))
        })
        .collect()
}

/// The leader's view of the executors' GPUs: id -> addresses, for the
/// running ones.
fn api_gpus(state: &serde_json::Value) -> BTreeMap<String, Vec<String>> {
    state["executors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["state"] == "RUNNING")
        .map(|e| {
            let gpus = e["resources"]["gpu"]
                .as_array()
                .map(|a| a.iter().map(|g| g.as_str().unwrap().to_owned()).collect())
                .unwrap_or_default();
            (e["id"].as_str().unwrap().to_owned(), gpus)
        })
        .collect()
}

#[test]
fn four_gpus_go_to_four_executors_a_fifth_waits_with_a_reason_and_failovers_keep_them() {
    let c = Cluster::new("gpus");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let mut master = c.master(&spec);
    let discovery = discovery_script(&c);
    let worker_args = ["--resource-discovery", discovery.as_str()];
    let mut worker = c.worker("w1", &[spec.addr()], 8, 2048, &worker_args);
    let alive = || {
        wait_for(BOUND, "the worker ALIVE", || {
            let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
            alive_with_workers(&state, &["w1"])
        })
    };
    alive();
    let state = api_state(&spec.http_addr()).unwrap();
    let offered = &state["workers"][0]["resources"]["gpu"];
    assert_eq!(offered["addresses"], serde_json::json!(["0", "1", "2", "3"]), "{state}");

    let out = c.path("out");
    std::fs::create_dir(&out).unwrap();
    // Each executor writes the GPUs it was given, then stays.
    let script = format!(
        "echo \"$REGENT_EXECUTOR_ID $CUDA_VISIBLE_DEVICES $REGENT_RESOURCE_GPU\" > {}/$$.tmp && \
         mv {0}/$$.tmp {0}/$$; exec sleep 600",
        out.display()
    );
    let opts = ["--executors", "5", "--cores", "1", "--memory", "16", "--resource", "gpu=1"];
    let mut submit = c.submit("submit", &[spec.addr()], &opts, &["sh", "-c", script.as_str()]);
    let four = wait_for(BOUND, "four executors to write their GPUs", || {
        let w = written(&out);
        if w.len() >= 4 {
            Ok(w)
        } else {
            Err(format!("{} of 4; submit: {}", w.len(), submit.stdout()))
        }
    });
    let mut gpus: Vec<String> = four
        .values()
        .map(|line| {
            let (cuda, regent) = line.split_once(' ').expect("two values");
            assert_eq!(cuda, regent, "CUDA_VISIBLE_DEVICES is REGENT_RESOURCE_GPU");
            cuda.to_owned()
        })
        .collect();
    gpus.sort();
    assert_eq!(gpus, ["0", "1", "2", "3"], "four distinct GPUs: {four:?}");

    // The fifth waits: the plan of one more such slot says why.
    let job = c.path("one-more.toml");
    std::fs::write(
        &job,
        "name = \"one-more\"\n[[group]]\nname = \"g\"\ncommand = [\"true\"]\nmemory_mb = 16\nresources = { gpu = 1 }\n",
    )
    .unwrap();
    let plan = c.run(&["job", "plan", "--masters", &spec.addr(), job.to_str().unwrap()], BOUND);
    let said = String::from_utf8_lossy(&plan.stdout);
    assert_eq!(plan.status.code(), Some(2), "not all placed: {said}");
    assert!(said.contains("needs 1 more gpu: the most free on a matching worker is 0"), "{said}");
    let state = api_state(&spec.http_addr()).unwrap();
    let before = api_gpus(&state);
    assert_eq!(before.len(), 4, "four running at the leader: {state}");
    let w = &state["workers"][0]["resources"]["gpu"];
    assert_eq!((w["held"].as_u64(), w["free"].clone()), (Some(4), serde_json::json!([])), "{w}");
    for (id, line) in &four {
        assert_eq!(before[id], vec![line.split(' ').next().unwrap().to_owned()], "{id}");
    }

    // kill -9 of the leader: the new process learns every assignment from
    // the worker's registration and launches nothing more.
    master.kill9();
    let _master = c.master(&spec);
    alive();
    let after = wait_for(BOUND, "the new leader to know the four executors' GPUs", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        let g = api_gpus(&state);
        if g.len() == 4 && g.values().all(|a| a.len() == 1) {
            Ok(g)
        } else {
            Err(format!("{g:?}"))
        }
    });
    assert_eq!(after, before, "every assignment kept across the failover");

    // kill -9 of the worker: the restarted one re-adopts them with their
    // GPUs from its running records.
    worker.kill9();
    let _worker = c.worker("w1", &[spec.addr()], 8, 2048, &worker_args);
    alive();
    let readopted = wait_for(BOUND, "the restarted worker to report the GPUs again", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        let g = api_gpus(&state);
        if g == before {
            Ok(g)
        } else {
            Err(format!("{g:?}"))
        }
    });
    assert_eq!(readopted, before);
    assert_eq!(written(&out).len(), 4, "no fifth executor was started meanwhile");
    submit.sigterm();
    let _ = submit.wait_exit(BOUND);
}

#[test]
fn a_worker_whose_discovery_script_fails_does_not_start_and_says_why() {
    let c = Cluster::new("gpus-bad-discovery");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let path = c.path("broken.sh");
    std::fs::write(&path, "#!/bin/sh\necho 'no driver loaded' >&2\nexit 4\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let flag = format!("gpu={}", path.display());
    let mut w = c.worker("w1", &[spec.addr()], 2, 512, &["--resource-discovery", &flag]);
    let status = w.wait_exit(BOUND);
    assert!(!status.success(), "the worker must not start");
    let err = w.stderr();
    assert!(err.contains("failed (exit status: 4): no driver loaded"), "{err}");
}

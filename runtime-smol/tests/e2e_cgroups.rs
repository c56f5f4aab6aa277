//! End-to-end: a worker enforces its executors' limits with this machine's
//! real cgroups (v1 controllers here; v2 where the host mounts it), as
//! root. A real `regent` master, worker and submits on loopback; bounds are
//! generous.
//!
//! * An executor allocating past its memory is killed by the kernel and
//!   reported `FAILED` with `out of memory: limit 32 MiB, ...` by `regent
//!   submit` and in the leader's history.
//! * A worker killed with SIGKILL and restarted over its work directory
//!   keeps its re-adopted executor in the same cgroup with the same limits;
//!   stopping the job removes the cgroup.
//! * `--isolation cgroups` where there are none: the worker exits non-zero
//!   naming why; `--isolation none` starts and says limits are accounted
//!   only.
//! * `--executor-user`: an executor runs as that user and cannot read the
//!   worker's secret; an unknown user is refused at start.
//! * An executor's memory in use (from its cgroup) and the worker's work
//!   directory's free space reach the leader's `/api/state` and `/metrics`.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;
use support::cluster::{alive_with_workers, api_state, wait_for, wait_until, Cluster, MasterSpec};

const BOUND: Duration = Duration::from_secs(60);

/// The executor cgroup directories of worker `id` under controller `c`
/// (`/sys/fs/cgroup/<c>/regent/<id>@<digest>/<executor>`, or the v2 tree).
fn executor_cgroups(id: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let top = if root.join("cgroup.controllers").exists() {
        root.join("regent")
    } else {
        root.join("memory").join("regent")
    };
    let prefix = format!("{id}@");
    let mut found = Vec::new();
    for worker in std::fs::read_dir(&top).into_iter().flatten().flatten() {
        if !worker.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        for e in std::fs::read_dir(worker.path()).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                found.push(e.path());
            }
        }
    }
    found
}

/// The memory limit of a memory cgroup directory, in bytes.
fn memory_limit(dir: &Path) -> u64 {
    let file = if dir.join("memory.max").exists() { "memory.max" } else { "memory.limit_in_bytes" };
    std::fs::read_to_string(dir.join(file)).unwrap().trim().parse().unwrap()
}

fn procs(dir: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    let mut v: Vec<u32> = text.split_whitespace().filter_map(|p| p.parse().ok()).collect();
    v.sort_unstable();
    v
}

#[test]
fn an_executor_past_its_memory_is_reported_out_of_memory() {
    let c = Cluster::new("cgroup-oom");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let _worker = c.worker("oom-w1", &[spec.addr()], 2, 1024, &["--isolation", "cgroups"]);
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["oom-w1"])
    });
    let opts = ["--executors", "1", "--cores", "1", "--memory", "32", "--retries", "0"];
    let mut hog = c.submit(
        "hog",
        &[spec.addr()],
        &opts,
        &["python3", "-c", "b = b'x' * (256 << 20); print(len(b))"],
    );
    let status = hog.wait_exit(BOUND);
    let out = hog.stdout();
    assert!(!status.success(), "an executor killed for memory fails the job: {out}");
    assert!(out.contains("out of memory: limit 32 MiB, peak"), "{out}");
    // The leader's view says the same.
    let state = api_state(&spec.http_addr()).expect("the master answers");
    assert!(state.to_string().contains("out of memory: limit 32 MiB"), "{state}");
    // Its cgroup went with it.
    wait_until(BOUND, "the executor's cgroup removed", || executor_cgroups("oom-w1").is_empty());
}

#[test]
fn a_restarted_worker_keeps_its_executors_cgroup_and_limits() {
    let c = Cluster::new("cgroup-restart");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let masters = [spec.addr()];
    let mut worker = c.worker("keep-w1", &masters, 2, 1024, &[]);
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["keep-w1"])
    });
    // A short failover timeout: once the submit is gone, the leader ends
    // its executor within a second.
    let opts = ["--executors", "1", "--cores", "1", "--memory", "48", "--failover-timeout", "1000"];
    let mut job = c.submit("long", &masters, &opts, &["sleep", "600"]);
    let dir = wait_for(BOUND, "the executor's cgroup", || {
        let dirs = executor_cgroups("keep-w1");
        match dirs.as_slice() {
            [one] if !procs(one).is_empty() => Ok(one.clone()),
            other => Err(format!("{other:?}")),
        }
    });
    assert_eq!(memory_limit(&dir), 48 << 20);
    let before = procs(&dir);
    worker.kill9();
    let _worker = c.worker("keep-w1", &masters, 2, 1024, &[]);
    wait_for(BOUND, "the restarted worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["keep-w1"])
    });
    // The restart cleaned nothing of its re-adopted executor (its cleanup
    // of leftovers runs before the worker registers).
    assert_eq!(executor_cgroups("keep-w1"), vec![dir.clone()]);
    assert_eq!(memory_limit(&dir), 48 << 20, "the limit is kept across the restart");
    assert_eq!(procs(&dir), before, "the executor's processes stay in its cgroup");
    job.assert_running("the job still runs after the worker restart");
    // The job going away ends the executor and removes its cgroup.
    job.sigterm();
    let _ = job.wait_exit(BOUND);
    wait_until(BOUND, "the executor's cgroup removed", || !dir.exists());
}

#[test]
fn isolation_cgroups_without_cgroups_refuses_to_start_and_none_says_accounted_only() {
    let c = Cluster::new("cgroup-refuse");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let nowhere = c.path("no-cgroups");
    std::fs::create_dir_all(&nowhere).unwrap();
    let nowhere = nowhere.to_str().unwrap();
    let mut refused = c.worker(
        "ref-w1",
        &[spec.addr()],
        1,
        256,
        &["--isolation", "cgroups", "--cgroup-root", nowhere],
    );
    let status = refused.wait_exit(BOUND);
    assert!(!status.success());
    let err = refused.stderr();
    assert!(err.contains("no cgroup file system under"), "{err}");
    assert!(err.contains("--isolation none"), "{err}");
    let mut none = c.worker(
        "ref-w2",
        &[spec.addr()],
        1,
        256,
        &["--isolation", "none", "--cgroup-root", nowhere],
    );
    wait_for(BOUND, "the worker with --isolation none ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["ref-w2"])
    });
    let err = none.stderr();
    assert!(err.contains("accounted only, not enforced"), "{err}");
    none.sigterm();
    let _ = none.wait_exit(BOUND);
}

#[test]
fn executors_usage_and_the_work_dirs_space_reach_the_leader() {
    let c = Cluster::new("cgroup-usage");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let masters = [spec.addr()];
    let _worker = c.worker("use-w1", &masters, 2, 1024, &[]);
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["use-w1"])
    });
    // Holds 24 MiB of written memory.
    let opts = ["--executors", "1", "--cores", "1", "--memory", "64", "--failover-timeout", "1000"];
    let hold = "import time\nb = b'x' * (24 << 20)\ntime.sleep(600)";
    let mut job = c.submit("hold", &masters, &opts, &["python3", "-c", hold]);
    // Samples go every 10 s at most: within a generous bound the leader
    // shows the executor's memory and the worker's disk.
    let (memory, free) = wait_for(BOUND, "the executor's usage at the leader", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        let x = state["executors"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["state"] == "RUNNING"))
            .ok_or("no running executor")?;
        let memory = x["memory_bytes"].as_u64().ok_or(format!("no usage yet: {x}"))?;
        if memory < 24 << 20 {
            return Err(format!("{memory} bytes so far"));
        }
        let w = &state["workers"][0]["usage"];
        let free = w["work_dir_free_bytes"].as_u64().ok_or(format!("no disk figure: {w}"))?;
        Ok((memory, free))
    });
    assert!(memory < 64 << 20, "{memory} bytes: more than its limit?");
    assert!(free > 0);
    let (code, metrics) = support::cluster::http_get(&spec.http_addr(), "/metrics").unwrap();
    assert_eq!(code, 200);
    let line = metrics
        .lines()
        .find(|l| l.starts_with("regent_executor_memory_in_use_bytes "))
        .expect("the usage gauge");
    let value: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(value >= 24 << 20, "{line}");
    job.sigterm();
    let _ = job.wait_exit(BOUND);
}

#[test]
fn a_worker_with_executor_user_runs_executors_as_that_user_away_from_its_secret() {
    let c = Cluster::new("run-as");
    let name = format!("regent-e{}", std::process::id());
    let made = std::process::Command::new("useradd")
        .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", &name])
        .status()
        .expect("useradd runs");
    assert!(made.success(), "useradd {name}");
    struct Gone(String);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::process::Command::new("userdel").arg(&self.0).status();
        }
    }
    let _gone = Gone(name.clone());
    // The cluster secret: root's, 0600.
    let secret = c.path("secret");
    std::fs::write(&secret, "run-as-test-secret-0123456789abcdef\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let secret = secret.to_str().unwrap().to_owned();
    let spec = MasterSpec::new("m1", &["--recovery", "none", "--secret-file", &secret]);
    let _master = c.master(&spec);
    let masters = [spec.addr()];
    let _worker = c.worker(
        "user-w1",
        &masters,
        2,
        1024,
        &["--secret-file", &secret, "--executor-user", &name],
    );
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["user-w1"])
    });
    let script =
        format!("id -un; if cat {secret} 2>/dev/null; then echo READ; else echo denied; fi");
    let opts = ["--executors", "1", "--cores", "1", "--memory", "32", "--secret-file", &secret];
    let mut job = c.submit("whoami", &masters, &opts, &["sh", "-c", &script]);
    assert!(job.wait_exit(BOUND).success(), "{}", job.stderr());
    let dirs: Vec<_> =
        std::fs::read_dir(c.work_dir("user-w1").join("executors")).unwrap().flatten().collect();
    assert_eq!(dirs.len(), 1);
    let out = std::fs::read_to_string(dirs[0].path().join("stdout")).unwrap();
    assert_eq!(out, format!("{name}\ndenied\n"), "runs as {name}, cannot read the secret");
    // A worker that is not root, or a user that does not exist, is refused
    // at start with the reason.
    let mut refused = c.worker(
        "user-w2",
        &masters,
        1,
        256,
        &["--secret-file", &secret, "--executor-user", "no-such-user-here"],
    );
    assert!(!refused.wait_exit(BOUND).success());
    assert!(refused.stderr().contains("no such user"), "{}", refused.stderr());
}

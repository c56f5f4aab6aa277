//! End-to-end: restart policies. A batch job whose executor always fails is
//! retried its `attempts` and then fails, naming them; a service submitted
//! with `--restart service` is restarted after every exit 0; and a backoff
//! outlives a `kill -9` of the master (filesystem recovery): the restarted
//! master keeps the wait instead of relaunching at once. Real `regent`
//! processes on loopback; outcomes are asserted within generous bounds, and
//! the one timing asserted is a lower bound (a slow machine only makes the
//! relaunch later).

mod support;

use std::time::Duration;
use support::cluster::{alive_with_workers, api_state, wait_for, Cluster, Kind, MasterSpec, Proc};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(90);

/// The start times (ms since the Unix epoch) the executors wrote to `runs`.
fn runs(path: &std::path::Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// A command that appends its start time (ms) to `runs`, then runs `then`.
fn logging(runs: &std::path::Path, then: &str) -> String {
    format!("date +%s%3N >> {}; {then}", runs.display())
}

/// Master `spec` and worker `w1` (2 cores, 512 MiB), waited for ALIVE.
fn master_and_worker(c: &Cluster, spec: &MasterSpec) -> (Proc, Proc) {
    let master = c.master(spec);
    let worker = c.worker("w1", &[spec.addr()], 2, 512, &[]);
    wait_for(BOUND, "the worker ALIVE", || {
        alive_with_workers(&api_state(&spec.http_addr()).ok_or("no answer")?, &["w1"])
    });
    (master, worker)
}

/// `regent submit` of one slot (1 core, 16 MiB) running `sh -c script`
/// with `policy` flags and a backoff from `delay` up to `max_delay`.
fn one_slot(
    c: &Cluster,
    spec: &MasterSpec,
    policy: &[&str],
    delay: &str,
    max_delay: &str,
    script: &str,
) -> Proc {
    let mut opts = vec!["--executors", "1", "--cores", "1", "--memory", "16"];
    opts.extend_from_slice(policy);
    opts.extend(["--restart-delay", delay, "--restart-max-delay", max_delay]);
    c.submit("submit", &[spec.addr()], &opts, &["sh", "-c", script])
}

/// The first framework's first group in the master's `/api/state`.
fn group(spec: &MasterSpec) -> Result<serde_json::Value, String> {
    let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
    state["frameworks"][0]["groups"][0]
        .as_object()
        .map(|g| serde_json::Value::Object(g.clone()))
        .ok_or_else(|| format!("no group yet: {state}"))
}

#[test]
fn a_failing_batch_job_is_retried_its_attempts_then_fails_naming_them() {
    let c = Cluster::new("restart-batch");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let (_master, _worker) = master_and_worker(&c, &spec);
    let log = c.path("runs");
    let job = c.path("job.toml");
    std::fs::write(
        &job,
        format!(
            r#"name = "flaky"

[[group]]
name = "step"
command = ["sh", "-c", "{}"]

[group.restart]
attempts = 2
delay = "200ms"
max_delay = "1s"
"#,
            logging(&log, "exit 3")
        ),
    )
    .unwrap();
    let addr = spec.addr();
    let mut run = c.spawn(
        "run",
        Kind::Submit,
        &["run", "--masters", &addr, "--connect-timeout", "30", job.to_str().unwrap()],
    );
    let status = run.wait_exit(BOUND);
    let (stdout, stderr) = (run.stdout(), run.stderr());
    assert_ne!(status.code(), Some(0), "a failed slot fails the run:\n{stdout}\n{stderr}");
    assert_eq!(runs(&log).len(), 3, "the first run and its 2 retries:\n{stdout}");
    let said = format!("{stdout}{stderr}");
    assert!(
        said.contains("exited 3; 3 ends in a row; the restart policy allows 2 retries"),
        "the reason names the attempts:\n{said}"
    );
    let starts = runs(&log);
    assert!(
        starts[1] - starts[0] >= 150 && starts[2] - starts[1] >= 350,
        "each retry waited its backoff (200 ms, then 400 ms): {starts:?}"
    );
}

#[test]
fn a_service_is_restarted_after_it_exits_0() {
    let c = Cluster::new("restart-service");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let (_master, _worker) = master_and_worker(&c, &spec);
    let log = c.path("runs");
    let script = logging(&log, "exit 0");
    let mut submit = one_slot(&c, &spec, &["--restart", "service"], "100ms", "300ms", &script);
    wait_for(BOUND, "the service started three times", || {
        let n = runs(&log).len();
        if n >= 3 {
            Ok(())
        } else {
            Err(format!("{n} runs; submit: {}", submit.stdout()))
        }
    });
    submit.assert_running("a service never finishes");
    let g = group(&spec).expect("the group is shown");
    assert!(
        g["last_failure"].as_str().is_some_and(|s| s.contains("exited 0")),
        "the last end is shown: {g}"
    );
    submit.sigterm();
    let _ = submit.wait_exit(BOUND);
}

#[test]
fn a_service_killed_with_sigkill_is_restarted_after_its_backoff() {
    let c = Cluster::new("restart-service-kill9");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let (_master, _worker) = master_and_worker(&c, &spec);
    let log = c.path("runs");
    let pid = c.path("pid");
    // Runs until killed; writes its pid once it is logged.
    let script = logging(&log, &format!("echo $$ > {}; exec sleep 1000", pid.display()));
    let mut submit = one_slot(&c, &spec, &["--restart", "service"], "2s", "2s", &script);
    let first = wait_for(BOUND, "the service running", || {
        std::fs::read_to_string(&pid)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
            .ok_or_else(|| format!("no pid yet; submit: {}", submit.stdout()))
    });
    let _ = std::fs::remove_file(&pid);
    let status = std::process::Command::new("kill").args(["-9", &first.to_string()]).status();
    assert!(status.is_ok_and(|s| s.success()), "kill -9 {first}");
    wait_for(BOUND, "the service restarted", || {
        let n = runs(&log).len();
        if n >= 2 {
            Ok(())
        } else {
            Err(format!("{n} runs; group {:?}", group(&spec)))
        }
    });
    let starts = runs(&log);
    assert!(starts[1] - starts[0] >= 1_900, "the restart waited out the 2 s backoff: {starts:?}");
    let g = group(&spec).expect("the group is shown");
    assert!(
        g["last_failure"].as_str().is_some_and(|s| s.contains("137") || s.contains("signal")),
        "the SIGKILL is the last end shown: {g}"
    );
    // The restarted executor runs; stop everything.
    wait_for(BOUND, "the second pid", || {
        std::fs::read_to_string(&pid)
            .ok()
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| "no pid".to_string())
    });
    submit.sigterm();
    let _ = submit.wait_exit(BOUND);
}

#[test]
fn a_backoff_outlives_a_kill_9_of_the_master() {
    let c = Cluster::new("restart-durable");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let (mut master, _worker) = master_and_worker(&c, &spec);
    let log = c.path("runs");
    // The first run fails; the retry waits 20 s.
    let script = logging(&log, "exit 3");
    let mut submit = one_slot(&c, &spec, &["--retries", "3"], "20s", "20s", &script);
    wait_for(BOUND, "the first run failed and its slot waits", || {
        let g = group(&spec)?;
        if g["waiting_to_restart"] == 1 {
            Ok(())
        } else {
            Err(format!("group {g}"))
        }
    });
    master.kill9();
    let _master = c.master(&spec);
    wait_for(BOUND, "the restarted master ALIVE with its worker", || {
        alive_with_workers(&api_state(&spec.http_addr()).ok_or("no answer")?, &["w1"])
    });
    let g = wait_for(BOUND, "the framework recovered", || group(&spec));
    assert_eq!(g["waiting_to_restart"], 1, "the new master keeps the wait: {g}");
    wait_for(BOUND, "the retry", || {
        let n = runs(&log).len();
        if n >= 2 {
            Ok(())
        } else {
            Err(format!("{n} runs; group {:?}", group(&spec)))
        }
    });
    let starts = runs(&log);
    assert!(
        starts[1] - starts[0] >= 19_000,
        "the retry waited out the backoff across the restart, not relaunched at once: {starts:?}"
    );
    submit.sigterm();
    let _ = submit.wait_exit(BOUND);
}

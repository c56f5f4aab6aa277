//! End-to-end: a second `regent submit` with the same framework id takes
//! the framework over from the first. Real `regent` processes on loopback;
//! outcomes are asserted within generous bounds, never timings.

mod support;

use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, executors, wait_for, Cluster, MasterSpec, Proc,
};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// A master `m1` with `args` (and `--http`), and worker `w1` (2 cores,
/// 512 MiB) ALIVE on it.
fn master_and_worker(c: &Cluster, args: &[&str]) -> (MasterSpec, Proc, Proc) {
    let spec = MasterSpec::new("m1", args);
    let master = c.master(&spec);
    let worker = c.worker("w1", &[spec.addr()], 2, 512, &[]);
    wait_for(BOUND, "the worker ALIVE", || alive_with_workers(&state(&spec)?, &["w1"]));
    (spec, master, worker)
}

/// The master's `/api/state`.
fn state(spec: &MasterSpec) -> Result<serde_json::Value, String> {
    api_state(&spec.http_addr()).ok_or_else(|| "the master does not answer".to_owned())
}

#[test]
fn second_submit_with_same_framework_id_takes_over() {
    let c = Cluster::new("submit-takeover");
    let (spec, _master, mut worker) = master_and_worker(&c, &["--recovery", "none"]);
    let masters = vec![spec.addr()];
    let state = || state(&spec);

    let framework = "fw-e2e-takeover";
    let opts = ["--framework-id", framework, "--executors", "1", "--cores", "1", "--memory", "64"];
    // Long enough to outlast the takeover by far.
    let cmd = ["sh", "-c", "sleep 8; exit 0"];
    let mut first = c.submit("submit-1", &masters, &opts, &cmd);
    let executor = wait_for(BOUND, "the executor RUNNING", || {
        let ex = executors(&state()?);
        match ex.as_slice() {
            [(id, s)] if s == "RUNNING" => Ok(id.clone()),
            _ => Err(format!("executors {ex:?}")),
        }
    });

    let mut second = c.submit("submit-2", &masters, &opts, &cmd);
    let status = first.wait_exit(BOUND);
    assert_eq!(
        status.code(),
        Some(3),
        "the first submit stops with code 3:\n{}\n{}",
        first.stdout(),
        first.stderr()
    );
    assert!(
        first.stderr().contains("failed over"),
        "the first submit says it failed over:\n{}",
        first.stderr()
    );
    // Still the one executor, not a new launch.
    let ex = executors(&state().unwrap());
    assert_eq!(
        ex,
        vec![(executor.clone(), "RUNNING".to_owned())],
        "the second submit adopted the executor"
    );

    let status = second.wait_exit(BOUND);
    assert_eq!(
        status.code(),
        Some(0),
        "the second submit completes:\n{}\n{}",
        second.stdout(),
        second.stderr()
    );
    let ex = executors(&state().unwrap());
    assert_eq!(
        ex,
        vec![(executor, "EXITED".to_owned())],
        "the adopted executor ran to completion, alone"
    );
    worker.assert_running("at the end");
}

/// A healthy subscription stays up however long the application runs.
///
/// Fails today: the subscriber sends nothing once subscribed (heartbeats go
/// master → subscriber only), and the master's connection reader closes any
/// connection it has not *read* from for `NetConfig::idle_timeout` (60 s),
/// so every running `regent submit` is cut off once a minute. The master logs
/// it as `WARN connection refused: idle connection timed out after 60s` and
/// counts it in `rejected_connections`; the submit prints `disconnected:
/// subscription ... lost` and resubscribes.
#[test]
fn idle_subscription_is_not_dropped() {
    let c = Cluster::new("submit-idle");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let masters = vec![spec.addr()];
    let master = c.master(&spec);
    let _worker = c.worker("w1", &masters, 1, 256, &[]);
    let state =
        || api_state(&spec.http_addr()).ok_or_else(|| "the master does not answer".to_owned());
    wait_for(BOUND, "the worker ALIVE", || alive_with_workers(&state()?, &["w1"]));

    // Outlasts the 60 s idle timeout.
    let mut submit = c.submit(
        "submit",
        &masters,
        &["--executors", "1", "--cores", "1", "--memory", "64"],
        &["sh", "-c", "sleep 70; exit 0"],
    );
    let status = submit.wait_exit(Duration::from_secs(120));
    assert_eq!(status.code(), Some(0), "submit:\n{}\n{}", submit.stdout(), submit.stderr());
    let v = state().unwrap();
    assert_eq!(v["rejected_connections"], 0, "no connection refused: {v}");
    assert!(
        !submit.stdout().contains("disconnected"),
        "the subscription stayed up:\n{}",
        submit.stdout()
    );
    assert!(!master.stderr().contains("idle connection timed out"), "master:\n{}", master.stderr());
}

/// Every later `regent submit --framework-id F` takes the framework over.
///
/// Fails today (with probability 1 - 2^-6 over six takeovers): the master
/// refuses a SUBSCRIBE whose instance id is lower than the current one
/// (core `master/frameworks.rs`: "instance ids grow with their process's
/// start time"; the newcomer is told "framework F failed over to instance
/// <old>; instance <new> is older" and exits 3), but `regent submit` draws
/// its instance id at random (`InstanceId(random_u64())` in
/// runtime-smol/src/submit.rs), so about every other takeover is refused.
#[test]
fn later_submits_always_take_over() {
    let c = Cluster::new("submit-takeovers");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let masters = vec![spec.addr()];
    let _master = c.master(&spec);
    let _worker = c.worker("w1", &masters, 2, 512, &[]);
    let state =
        || api_state(&spec.http_addr()).ok_or_else(|| "the master does not answer".to_owned());
    wait_for(BOUND, "the worker ALIVE", || alive_with_workers(&state()?, &["w1"]));
    let opts =
        ["--framework-id", "fw-e2e-chain", "--executors", "1", "--cores", "1", "--memory", "64"];
    let cmd = ["sh", "-c", "sleep 1000"];
    let mut current = c.submit("submit-0", &masters, &opts, &cmd);
    wait_for(BOUND, "the executor RUNNING", || {
        let ex = executors(&state()?);
        if ex.iter().any(|(_, s)| s == "RUNNING") {
            Ok(())
        } else {
            Err(format!("executors {ex:?}"))
        }
    });
    for round in 1..=6 {
        let mut next = c.submit(&format!("submit-{round}"), &masters, &opts, &cmd);
        // One of the two stops: it must be the previous one.
        wait_for(BOUND, &format!("takeover {round}: one of the two submits stops"), || {
            if let Some(s) = next.exit_status() {
                panic!(
                    "takeover {round}: the newer submit stopped ({s}) instead of the older:\n{}",
                    next.stdout()
                );
            }
            match current.exit_status() {
                Some(s) if s.code() == Some(3) => Ok(()),
                Some(s) => panic!("takeover {round}: the older submit stopped with {s}"),
                None => Err("both run".to_owned()),
            }
        });
        current = next;
    }
}

/// A submission refused by a limit of the leader stops with a clear error
/// instead of retrying forever (docs/design.md#issue-11): with `--max-frameworks 1` and one
/// application running, a second application's `regent submit` exits 1
/// naming the limit, long before its connect timeout, while the first goes
/// on. The flag itself is checked: a ZooKeeper master refuses a limit over
/// what ZooKeeper can list.
#[test]
fn a_submit_refused_by_max_frameworks_exits_naming_the_limit() {
    let c = Cluster::new("submit-max-frameworks");
    let (spec, _master, mut worker) =
        master_and_worker(&c, &["--recovery", "none", "--max-frameworks", "1"]);
    let masters = vec![spec.addr()];
    let state = || state(&spec);

    let opts = ["--executors", "1", "--cores", "1", "--memory", "64"];
    let mut first = c.submit("first", &masters, &opts, &["sleep", "30"]);
    wait_for(BOUND, "the first application's executor RUNNING", || {
        let ex = executors(&state()?);
        match ex.as_slice() {
            [(_, s)] if s == "RUNNING" => Ok(()),
            _ => Err(format!("executors {ex:?}")),
        }
    });

    // A connect timeout longer than the bound: an exit within the bound is
    // the refusal's, not the timeout's.
    let second_opts = [&opts[..], &["--name", "second", "--connect-timeout", "600"]].concat();
    let mut second = c.submit("second", &masters, &second_opts, &["true"]);
    let status = second.wait_exit(BOUND);
    let err = second.stderr();
    assert_eq!(status.code(), Some(1), "the second submit exits 1:\n{}\n{err}", second.stdout());
    assert!(
        err.contains("refused the subscription") && err.contains("max_frameworks"),
        "the error names the limit:\n{err}"
    );
    assert!(first.is_running(), "the first application goes on:\n{}", first.stderr());
    worker.assert_running("at the end");
    first.stop(Duration::from_secs(5));

    let out = c.run(
        &[
            "master",
            "--id",
            "m2",
            "--listen",
            "127.0.0.1:1",
            "--recovery",
            "zookeeper",
            "--zk",
            "127.0.0.1:2",
            "--max-frameworks",
            "5001",
        ],
        BOUND,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a ZooKeeper master with 5001 frameworks starts:\n{err}");
    assert!(err.contains("--max-frameworks 5001 is over 4000"), "{err}");
}

/// The live frameworks of a state: (name, state).
fn live_frameworks(state: &serde_json::Value) -> Vec<(String, String)> {
    let name_state = |f: &serde_json::Value| {
        (
            f["name"].as_str().unwrap_or_default().to_owned(),
            f["state"].as_str().unwrap_or_default().to_owned(),
        )
    };
    state["frameworks"].as_array().map(|a| a.iter().map(name_state).collect()).unwrap_or_default()
}

/// The history of a state: (name, outcome), newest first.
fn finished_frameworks(state: &serde_json::Value) -> Vec<(String, String)> {
    let name_outcome = |f: &serde_json::Value| {
        (
            f["name"].as_str().unwrap_or_default().to_owned(),
            f["outcome"].as_str().unwrap_or_default().to_owned(),
        )
    };
    state["history"].as_array().map(|a| a.iter().map(name_outcome).collect()).unwrap_or_default()
}

/// Issue 43 (docs/design.md#issue-43), item 7: a done `regent submit` ends its framework before it
/// exits — the master's history shows it COMPLETED (FAILED when a slot
/// failed) the moment the submit has exited, and it is no longer a live
/// framework (no DISCONNECTED entry for the 60 s failover timeout). With
/// `--keep` it stays, DISCONNECTED, and is not in the history.
#[test]
fn a_done_submit_completes_its_framework_at_once_unless_kept() {
    let c = Cluster::new("submit-complete");
    let (spec, _master, mut worker) = master_and_worker(&c, &["--recovery", "none"]);
    let masters = vec![spec.addr()];
    let state = || state(&spec);
    let opts =
        |name: &'static str| ["--name", name, "--executors", "2", "--cores", "1", "--memory", "64"];

    let mut done = c.submit_ending("done", &masters, &opts("done-app"), &["sh", "-c", "exit 0"]);
    let status = done.wait_exit(BOUND);
    let said = format!("{}\n{}", done.stdout(), done.stderr());
    assert_eq!(status.code(), Some(0), "{said}");
    assert!(said.contains("; the framework has ended"), "{said}");
    // Read once, right after the exit: the end was durable before it.
    let s = state().unwrap();
    assert_eq!(finished_frameworks(&s), vec![("done-app".into(), "COMPLETED".into())], "{s}");
    assert_eq!(live_frameworks(&s), vec![], "{s}");

    // Slots that fail for good (no retries): FAILED, exit 2.
    let mut failing = c.submit_ending(
        "failing",
        &masters,
        &[&opts("failing-app")[..], &["--retries", "0"]].concat(),
        &["sh", "-c", "exit 3"],
    );
    let status = failing.wait_exit(BOUND);
    let said = format!("{}\n{}", failing.stdout(), failing.stderr());
    assert_eq!(status.code(), Some(2), "{said}");
    let s = state().unwrap();
    assert_eq!(
        finished_frameworks(&s),
        vec![("failing-app".into(), "FAILED".into()), ("done-app".into(), "COMPLETED".into())],
        "{s}"
    );
    assert_eq!(live_frameworks(&s), vec![], "{s}");

    // Kept: live (DISCONNECTED) after the exit, not finished.
    let mut kept = c.submit("kept", &masters, &opts("kept-app"), &["sh", "-c", "exit 0"]);
    let status = kept.wait_exit(BOUND);
    let said = format!("{}\n{}", kept.stdout(), kept.stderr());
    assert_eq!(status.code(), Some(0), "{said}");
    assert!(said.contains("the framework is kept (--keep)"), "{said}");
    let s = state().unwrap();
    assert_eq!(live_frameworks(&s), vec![("kept-app".into(), "DISCONNECTED".into())], "{s}");
    assert_eq!(finished_frameworks(&s).len(), 2, "{s}");
    worker.assert_running("at the end");
}

//! End-to-end: the operator commands that change the cluster (docs/design.md#issue-14
//! items 1 and 4) against real processes: a filesystem-store master, two
//! workers and a long-running application. `regent cordon`, `scale`,
//! `drain` (with its progress until DRAINED), a `kill -9` and restart of the
//! master (the cordon and drain are durable), `scale` down, `kill-executor`
//! with and without refill, `uncordon`, and refusals with their exact
//! messages. Loopback only, temp dirs, generous bounds, no timings.

mod support;

use serde_json::Value;
use std::time::Duration;
use support::cli::{ok, refused};
use support::cluster::{
    alive_with_workers, api_state, free_port, leaders_with_marker, processes_under, unique,
    wait_for, Cluster, MasterSpec,
};
use support::tcp_proxy::TcpProxy;

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

fn fs_master(c: &Cluster) -> MasterSpec {
    let store = c.path("store");
    MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()])
}

fn state_of(spec: &MasterSpec) -> Result<Value, String> {
    api_state(&spec.http_addr()).ok_or_else(|| format!("{} does not answer /api/state", spec.id))
}

/// `(id, worker)` of every RUNNING executor.
fn running(state: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = state["executors"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e["state"] == "RUNNING")
                .map(|e| {
                    (
                        e["id"].as_str().unwrap_or("?").to_owned(),
                        e["worker_id"].as_str().unwrap_or("?").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn worker_json<'a>(state: &'a Value, id: &str) -> &'a Value {
    state["workers"]
        .as_array()
        .and_then(|a| a.iter().find(|w| w["id"] == id))
        .unwrap_or_else(|| panic!("no worker {id} in {state}"))
}

/// Waits until exactly `n` executors run, all on the workers `on`.
fn wait_running(spec: &MasterSpec, n: usize, on: &[&str], what: &str) -> Vec<(String, String)> {
    wait_for(BOUND, what, || {
        let r = running(&state_of(spec)?);
        if r.len() == n && r.iter().all(|(_, w)| on.contains(&w.as_str())) {
            Ok(r)
        } else {
            Err(format!("running {r:?}"))
        }
    })
}

#[test]
fn cordon_scale_drain_survive_a_master_restart_then_scale_down_and_kill_executors() {
    let c = Cluster::new("operator");
    let spec = fs_master(&c);
    let masters = vec![spec.addr()];
    let m = spec.addr();
    let mut master = c.master(&spec);
    let mut w1 = c.worker("w1", &masters, 4, 1024, &[]);
    let mut w2 = c.worker("w2", &masters, 8, 2048, &[]);
    wait_for(BOUND, "the master ALIVE with w1 and w2", || {
        alive_with_workers(&state_of(&spec)?, &["w1", "w2"])
    });
    let marker = unique("op");
    let mut submit = c.submit(
        "submit",
        &masters,
        &["--executors", "2", "--cores", "1", "--memory", "64"],
        // SIGTERM is ignored (and the ignoring inherited by sleep): only
        // the SIGKILL at a drain's deadline (or a kill's grace) ends them.
        &["sh", "-c", "trap '' TERM; sleep 600", &marker],
    );
    // Spread: one executor on each worker.
    let first = wait_running(&spec, 2, &["w1", "w2"], "2 executors RUNNING");
    assert_ne!(first[0].1, first[1].1, "one per worker: {first:?}");
    let state = state_of(&spec).unwrap();
    let fw = state["frameworks"][0]["id"].as_str().expect("framework id").to_owned();
    let group = state["frameworks"][0]["groups"][0]["name"].as_str().expect("group").to_owned();

    // Cordon w1: nothing is killed; scaling up places only on w2.
    let out = ok(&c, &["cordon", "--masters", &m, "w1"]);
    assert!(out.contains("worker w1 cordoned"), "{out}");
    let s = state_of(&spec).unwrap();
    assert_eq!(worker_json(&s, "w1")["cordoned"], true);
    assert_eq!(worker_json(&s, "w1")["state"], "ALIVE");
    let out = ok(&c, &["scale", "--masters", &m, &fw, &group, "4"]);
    assert!(out.contains("scaled to 4 slots"), "{out}");
    let four = wait_running(&spec, 4, &["w1", "w2"], "4 executors RUNNING");
    let on_w1: Vec<&(String, String)> = four.iter().filter(|(_, w)| w == "w1").collect();
    assert_eq!(on_w1.len(), 1, "the new executors landed on w2 only: {four:?}");
    let s = state_of(&spec).unwrap();
    assert_eq!(s["frameworks"][0]["groups"][0]["slots"], 4);
    assert_eq!(s["frameworks"][0]["groups"][0]["declared_slots"], 2);

    // Drain w1 and follow it until DRAINED: its executor ignores SIGTERM,
    // so it runs until the SIGKILL at the deadline; then it is replaced on
    // w2.
    let out = ok(&c, &["drain", "--masters", &m, "w1", "--deadline", "3s"]);
    assert!(out.contains("worker w1 draining: executors stopped, SIGKILL after 3s"), "{out}");
    assert!(out.contains("worker w1: DRAINING, 1 executors left"), "progress shown: {out}");
    assert!(out.contains("worker w1 DRAINED"), "{out}");
    let four = wait_running(&spec, 4, &["w2"], "4 executors RUNNING on w2");
    assert!(!four.iter().any(|(id, _)| id == &on_w1[0].0), "the drained executor is gone");
    let s = state_of(&spec).unwrap();
    let w = worker_json(&s, "w1");
    assert_eq!((w["state"].as_str(), w["cordoned"].as_bool()), (Some("DRAINED"), Some(true)));
    assert_eq!(w["executors"], 0);
    wait_for(BOUND, "no process left in w1's work dir", || {
        let left = processes_under(&c.work_dir("w1"));
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("pids {left:?}"))
        }
    });
    assert_eq!(leaders_with_marker(&marker).len(), 4, "4 executor shells run");
    let status = ok(&c, &["status", "--masters", &m]);
    assert!(status.contains("DRAINED"), "{status}");
    assert!(status.contains(&format!("{group} 4/4, scaled from 2")), "{status}");

    // kill -9 and restart the master: w1 is still drained (and cordoned).
    master.kill9();
    let _master = c.master(&spec);
    let s = wait_for(BOUND, "the restarted master ALIVE with w1 and w2", || {
        let s = state_of(&spec)?;
        // A master still loading lists no workers yet.
        let state = |id: &str| {
            s["workers"].as_array().and_then(|a| a.iter().find(|w| w["id"] == id)).cloned()
        };
        let (w1, w2) = (state("w1").unwrap_or_default(), state("w2").unwrap_or_default());
        if s["status"] == "ALIVE" && w1["state"] == "DRAINED" && w2["state"] == "ALIVE" {
            Ok(s)
        } else {
            Err(format!("{s}"))
        }
    });
    assert_eq!(worker_json(&s, "w1")["cordoned"], true);
    let after = wait_running(&spec, 4, &["w2"], "the 4 executors adopted on w2");
    assert_eq!(after, four, "the same executors, adopted, none relaunched");

    // Scale down: the highest slots go, their processes with them.
    let out = ok(&c, &["scale", "--masters", &m, &fw, &group, "2"]);
    assert!(out.contains("scaled to 2 slots"), "{out}");
    let two = wait_running(&spec, 2, &["w2"], "2 executors RUNNING after scaling down");
    wait_for(BOUND, "2 executor shells left", || {
        let n = leaders_with_marker(&marker).len();
        if n == 2 {
            Ok(())
        } else {
            Err(format!("{n} shells"))
        }
    });

    // Kill one executor: its slot is refilled (w2 again: w1 is drained).
    let out = ok(&c, &["kill-executor", "--masters", &m, &two[0].0]);
    assert!(out.contains("its slot gets a replacement"), "{out}");
    let refilled = wait_for(BOUND, "the killed executor replaced", || {
        let r = running(&state_of(&spec)?);
        if r.len() == 2 && !r.iter().any(|(id, _)| id == &two[0].0) {
            Ok(r)
        } else {
            Err(format!("running {r:?}"))
        }
    });
    assert!(refilled.iter().all(|(_, w)| w == "w2"));
    // And one without refill: one executor is left.
    let out = ok(&c, &["kill-executor", "--masters", &m, &refilled[0].0, "--no-refill"]);
    assert!(out.contains("its slot is left empty"), "{out}");
    wait_running(&spec, 1, &["w2"], "1 executor RUNNING after a kill without refill");

    // Uncordon: w1 takes executors again.
    let out = ok(&c, &["uncordon", "--masters", &m, "w1"]);
    assert!(out.contains("worker w1 uncordoned"), "{out}");
    let s = state_of(&spec).unwrap();
    let w = worker_json(&s, "w1");
    assert_eq!((w["state"].as_str(), w["cordoned"].as_bool()), (Some("ALIVE"), Some(false)));
    ok(&c, &["scale", "--masters", &m, &fw, &group, "3"]);
    wait_for(BOUND, "a new executor on w1", || {
        let r = running(&state_of(&spec)?);
        if r.iter().any(|(_, w)| w == "w1") {
            Ok(())
        } else {
            Err(format!("running {r:?}"))
        }
    });

    // The application's submitter lived through all of it.
    submit.assert_running("through cordon, drain, scaling and kills");
    w1.assert_running("drained, not stopped");
    w2.assert_running("to the end");
}

#[test]
fn operator_commands_refuse_unknown_targets_with_the_leaders_reason() {
    let c = Cluster::new("operator-refusals");
    let spec = fs_master(&c);
    let masters = vec![spec.addr()];
    let m = spec.addr();
    let _master = c.master(&spec);
    let _w1 = c.worker("w1", &masters, 2, 512, &[]);
    wait_for(BOUND, "the master ALIVE with w1", || alive_with_workers(&state_of(&spec)?, &["w1"]));
    let err = refused(&c, &["cordon", "--masters", &m, "w9"]);
    assert!(err.contains("no worker w9"), "{err}");
    let err = refused(&c, &["drain", "--masters", &m, "w9", "--no-wait"]);
    assert!(err.contains("no worker w9"), "{err}");
    let err = refused(&c, &["uncordon", "--masters", &m, "w9"]);
    assert!(err.contains("no worker w9"), "{err}");
    let err = refused(&c, &["scale", "--masters", &m, "fw-nope", "main", "3"]);
    assert!(err.contains("no framework fw-nope"), "{err}");
    let err = refused(&c, &["kill-executor", "--masters", &m, "fw-nope/main#0#1.1"]);
    assert!(err.contains("no executor fw-nope/main#0#1.1"), "{err}");
    // Bad input is refused before anything is sent.
    let err = refused(&c, &["drain", "--masters", &m, "w1", "--deadline", "3 weeks"]);
    assert!(err.contains("deadline \"3 weeks\""), "{err}");
    let err = refused(&c, &["drain", "--masters", &m, "w1", "--deadline", "8d"]);
    assert!(err.contains("unknown unit \"d\""), "{err}");
    // Nothing changed.
    let s = state_of(&spec).unwrap();
    assert_eq!(worker_json(&s, "w1")["cordoned"], false);
}

#[test]
fn a_submission_scaled_down_succeeds_with_its_remaining_slots() {
    let c = Cluster::new("operator-scale-submit");
    let spec = fs_master(&c);
    let masters = vec![spec.addr()];
    let m = spec.addr();
    let _master = c.master(&spec);
    let _w1 = c.worker("w1", &masters, 4, 1024, &[]);
    wait_for(BOUND, "the master ALIVE with w1", || alive_with_workers(&state_of(&spec)?, &["w1"]));
    // Every executor waits for a file, then exits 0.
    let go = c.path("go");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.1; done; exit 0", go.display());
    let mut submit = c.submit(
        "submit",
        &masters,
        &["--executors", "3", "--cores", "1", "--memory", "64"],
        &["sh", "-c", &script],
    );
    let three = wait_running(&spec, 3, &["w1"], "3 executors RUNNING");
    let state = state_of(&spec).unwrap();
    let fw = state["frameworks"][0]["id"].as_str().expect("framework id").to_owned();
    let group = state["frameworks"][0]["groups"][0]["name"].as_str().expect("group").to_owned();
    ok(&c, &["scale", "--masters", &m, &fw, &group, "1"]);
    let left = wait_running(&spec, 1, &["w1"], "1 executor RUNNING after scaling down");
    assert!(three.contains(&left[0]), "slot 0's executor stays: {three:?} {left:?}");
    wait_for(BOUND, "the submitter told of the scale", || {
        let out = submit.stdout();
        if out.contains(&format!("group {group} was scaled to 1 slots by an operator")) {
            Ok(())
        } else {
            Err(out)
        }
    });
    std::fs::write(&go, b"").unwrap();
    let status = submit.wait_exit(BOUND);
    assert_eq!(
        status.code(),
        Some(0),
        "the one remaining slot succeeded: {}\n{}",
        submit.stdout(),
        submit.stderr()
    );
}

/// The same commands against the blocking runtime (`--runtime std` master
/// and workers; no HTTP, so observed with `regent status --json`): a drain
/// ends with the std worker's SIGKILL at the deadline, and the restarted
/// master still shows the worker DRAINED.
#[test]
fn a_std_master_and_std_workers_drain_durably() {
    let c = Cluster::new("operator-std");
    let store = c.path("store");
    let store = store.to_str().unwrap();
    let addr = support::cluster::loopback(support::cluster::free_port());
    let std_master = || {
        let args = ["--runtime", "std", "master", "--id", "m1", "--listen", &addr];
        let mut args = args.to_vec();
        args.extend(["--recovery", "filesystem", "--store", store]);
        c.spawn("m1", support::cluster::Kind::Master, &args)
    };
    let masters = vec![addr.clone()];
    let status = || c.status_json(&masters).ok_or_else(|| "no leader answers".to_owned());
    let mut master = std_master();
    let std = ["--runtime", "std"];
    let mut w1 = c.worker("w1", &masters, 2, 512, &std);
    let _w2 = c.worker("w2", &masters, 2, 512, &std);
    wait_for(BOUND, "the std master ALIVE with w1 and w2", || {
        alive_with_workers(&status()?, &["w1", "w2"])
    });
    let _submit = c.submit(
        "submit",
        &masters,
        &["--executors", "2", "--cores", "1", "--memory", "64"],
        &["sh", "-c", "trap '' TERM; sleep 600"],
    );
    wait_for(BOUND, "an executor RUNNING on each worker", || {
        let r = running(&status()?);
        if r.len() == 2 && r[0].1 != r[1].1 {
            Ok(())
        } else {
            Err(format!("running {r:?}"))
        }
    });
    let out = ok(&c, &["drain", "--masters", &addr, "w1", "--deadline", "2s"]);
    assert!(out.contains("worker w1 DRAINED"), "{out}");
    wait_for(BOUND, "both executors on w2", || {
        let r = running(&status()?);
        if r.len() == 2 && r.iter().all(|(_, w)| w == "w2") {
            Ok(())
        } else {
            Err(format!("running {r:?}"))
        }
    });
    master.kill9();
    let _master = std_master();
    let s = wait_for(BOUND, "the restarted std master ALIVE", || {
        let s = status()?;
        alive_with_workers(&s, &["w1", "w2"]).or_else(|e| {
            // w1 shows as DRAINED, not ALIVE.
            let w1 = s["workers"].as_array().and_then(|a| a.iter().find(|w| w["id"] == "w1"));
            if s["status"] == "ALIVE" && w1.is_some_and(|w| w["state"] == "DRAINED") {
                Ok(())
            } else {
                Err(e)
            }
        })?;
        Ok::<Value, String>(s)
    });
    let w = worker_json(&s, "w1");
    assert_eq!((w["state"].as_str(), w["cordoned"].as_bool()), (Some("DRAINED"), Some(true)));
    w1.assert_running("drained, not stopped");
}

/// A drain accepted just before the master dies: the restarted master reads
/// the drain from the store, the worker's executor (which ignores SIGTERM)
/// ends at the deadline, its slot is refilled on the other worker, and the
/// drained worker shows DRAINED.
#[test]
fn a_drain_under_way_survives_a_master_kill9_restart() {
    let c = Cluster::new("operator-drain-failover");
    let spec = fs_master(&c);
    let masters = vec![spec.addr()];
    let m = spec.addr();
    let mut master = c.master(&spec);
    let _w1 = c.worker("w1", &masters, 1, 512, &[]);
    let _w2 = c.worker("w2", &masters, 2, 512, &[]);
    wait_for(BOUND, "the master ALIVE with w1 and w2", || {
        alive_with_workers(&state_of(&spec)?, &["w1", "w2"])
    });
    let marker = unique("opfail");
    let _submit = c.submit(
        "submit",
        &masters,
        &["--executors", "2", "--cores", "1", "--memory", "64"],
        &["sh", "-c", "trap '' TERM; sleep 600", &marker],
    );
    let two = wait_running(&spec, 2, &["w1", "w2"], "2 executors RUNNING");
    let on_w1 = two.iter().find(|(_, w)| w == "w1").expect("one on w1").0.clone();
    let out = ok(&c, &["drain", "--masters", &m, "w1", "--deadline", "5s", "--no-wait"]);
    assert!(out.contains("worker w1 draining"), "{out}");
    assert!(!out.contains("DRAINED"), "--no-wait returns at once: {out}");
    master.kill9();
    let _master = c.master(&spec);
    // Nothing is asked again: the new master knows the drain from its
    // store, and the worker ends the executor at the deadline.
    wait_for(BOUND, "w1 DRAINED at the restarted master", || {
        let s = state_of(&spec)?;
        let w1 = s["workers"].as_array().and_then(|a| a.iter().find(|w| w["id"] == "w1"));
        match w1.and_then(|w| w["state"].as_str()) {
            Some("DRAINED") => Ok(()),
            other => Err(format!("w1 {other:?}")),
        }
    });
    let after = wait_running(&spec, 2, &["w2"], "both executors on w2");
    assert!(!after.iter().any(|(id, _)| *id == on_w1), "w1's executor ended: {after:?}");
    let s = state_of(&spec).unwrap();
    assert_eq!(worker_json(&s, "w1")["state"], "DRAINED");
    wait_for(BOUND, "no process left in w1's work dir", || {
        let left = processes_under(&c.work_dir("w1"));
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("pids {left:?}"))
        }
    });
}

/// Issue 41 (docs/design.md#issue-41) scenario 8, against real processes: one worker of 2 cores,
/// framework A running two long executors, framework B waiting for both
/// cores. `regent kill A` tears A down; its executors end, and B's two
/// slots run on the freed cores (on main 87b59ae they stayed waiting).
#[test]
fn capacity_freed_by_regent_kill_goes_to_the_framework_that_waits() {
    let c = Cluster::new("operator-kill-frees");
    let spec = fs_master(&c);
    let masters = vec![spec.addr()];
    let m = spec.addr();
    let _master = c.master(&spec);
    let _w1 = c.worker("w1", &masters, 2, 1024, &[]);
    wait_for(BOUND, "the master ALIVE with w1", || alive_with_workers(&state_of(&spec)?, &["w1"]));
    let args = ["--executors", "2", "--cores", "1", "--memory", "64"];
    let _a = c.submit("submit-a", &masters, &args, &["sleep", "300"]);
    let a = wait_running(&spec, 2, &["w1"], "A's 2 executors RUNNING");
    let a_id = a[0].0.split('/').next().expect("framework part").to_owned();
    let _b = c.submit("submit-b", &masters, &args, &["sleep", "300"]);
    wait_for(BOUND, "B subscribed and waiting", || {
        let s = state_of(&spec)?;
        let n = s["frameworks"].as_array().map_or(0, |f| f.len());
        if n == 2 {
            Ok(())
        } else {
            Err(format!("{n} frameworks"))
        }
    });
    assert_eq!(running(&state_of(&spec).unwrap()), a, "B waits: both cores are A's");
    ok(&c, &["kill", "--masters", &m, &a_id]);
    let b = wait_running(&spec, 2, &["w1"], "B's 2 executors RUNNING on the freed cores");
    assert!(b.iter().all(|(x, _)| !x.starts_with(&a_id)), "{b:?}");
}

/// Issue 41 (docs/design.md#issue-41) scenario 5, against real processes: the worker reaches the
/// master through a proxy (the address the master advertises); the proxy
/// stops, cutting the worker's connection (it stays ALIVE and redials);
/// meanwhile `regent kill-executor --no-refill` is accepted. When the
/// proxy listens again the worker registers again reporting the executor
/// running, and the leader sends the kill again: it ends (on main 87b59ae
/// it ran for ever, its slot recorded killed).
#[test]
fn an_accepted_kill_is_carried_out_after_a_worker_connection_blip() {
    let c = Cluster::new("operator-kill-blip");
    let mut spec = fs_master(&c);
    let m = spec.addr();
    let mut proxy = TcpProxy::start(free_port(), &m);
    spec.args.extend(["--advertise".to_owned(), proxy.addr()]);
    let _master = c.master(&spec);
    let _w1 = c.worker("w1", &[proxy.addr()], 2, 1024, &[]);
    wait_for(BOUND, "the master ALIVE with w1", || alive_with_workers(&state_of(&spec)?, &["w1"]));
    let args = ["--executors", "2", "--cores", "1", "--memory", "64"];
    let _submit = c.submit("submit", std::slice::from_ref(&m), &args, &["sleep", "300"]);
    let two = wait_running(&spec, 2, &["w1"], "2 executors RUNNING");
    // The kill goes out while the connection is cut (whether or not the
    // leader has seen it close yet): it is lost on the way.
    proxy.stop();
    ok(&c, &["kill-executor", "--masters", &m, &two[1].0, "--no-refill"]);
    proxy.restart();
    let left = wait_running(&spec, 1, &["w1"], "the killed executor ended after the blip");
    assert_eq!(left, vec![two[0].clone()], "only the other executor runs");
}

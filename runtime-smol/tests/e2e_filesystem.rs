//! End-to-end: a filesystem-mode master killed with `kill -9` and restarted
//! on the same port and store while executors run; `regent store check` on
//! a damaged store. Real `regent` processes on loopback; outcomes are
//! asserted within generous bounds, never timings.

mod support;

use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, executors, leaders_with_marker, unique, wait_for, Cluster,
    MasterSpec,
};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

const WORKERS: [&str; 3] = ["w1", "w2", "w3"];

fn fs_master(c: &Cluster) -> MasterSpec {
    let store = c.path("store");
    MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()])
}

fn state_of(spec: &MasterSpec) -> Result<serde_json::Value, String> {
    api_state(&spec.http_addr()).ok_or_else(|| format!("{} does not answer /api/state", spec.id))
}

/// Waits for three RUNNING executors on `spec`; returns their ids.
fn three_running(spec: &MasterSpec) -> Vec<String> {
    wait_for(BOUND, "3 executors RUNNING", || {
        let ex = executors(&state_of(spec)?);
        if ex.len() == 3 && ex.iter().all(|(_, st)| st == "RUNNING") {
            Ok(ex.into_iter().map(|(id, _)| id).collect::<Vec<_>>())
        } else {
            Err(format!("executors {ex:?}"))
        }
    })
}

#[test]
fn filesystem_master_kill9_restart_keeps_workers_and_completes() {
    let c = Cluster::new("fs-restart");
    let spec = fs_master(&c);
    let masters = vec![spec.addr()];
    let mut master = c.master(&spec);
    // One core each: the three executors land one per worker.
    let mut workers: Vec<_> =
        WORKERS.iter().map(|id| c.worker(id, &masters, 1, 256, &[])).collect();
    wait_for(BOUND, "the master ALIVE with its 3 workers", || {
        alive_with_workers(&state_of(&spec)?, &WORKERS)
    });

    let marker = unique("fs");
    // Long enough to outlast the restart by far (the check below wants them
    // still RUNNING), short enough for the suite.
    let mut submit = c.submit(
        "submit",
        &masters,
        &["--executors", "3", "--cores", "1", "--memory", "64"],
        &["sh", "-c", "sleep 8; exit 0", &marker],
    );
    let mut ids = three_running(&spec);
    ids.sort();

    master.kill9();
    // The executors do not depend on the master.
    assert_eq!(
        leaders_with_marker(&marker).len(),
        3,
        "the 3 executor shells run while no master does"
    );

    let _master = c.master(&spec);
    let state = wait_for(BOUND, "the restarted master ALIVE with its 3 workers, each once", || {
        let s = state_of(&spec)?;
        alive_with_workers(&s, &WORKERS).map(|()| s)
    });
    let mut after = executors(&state);
    after.sort();
    let expected: Vec<(String, String)> =
        ids.iter().map(|id| (id.clone(), "RUNNING".to_owned())).collect();
    assert_eq!(
        after, expected,
        "the same 3 executors, still RUNNING, in the restarted master's view"
    );
    for w in &mut workers {
        w.assert_running("across the master's restart");
    }

    let status = submit.wait_exit(BOUND);
    assert_eq!(status.code(), Some(0), "submit: {}\n{}", submit.stdout(), submit.stderr());
    let done = state_of(&spec).expect("the master answers");
    let exited: Vec<_> =
        executors(&done).into_iter().filter(|(_, st)| st == "EXITED").map(|(id, _)| id).collect();
    let mut exited = exited;
    exited.sort();
    assert_eq!(exited, ids, "the same executors ran to completion (none relaunched)");
    for w in &mut workers {
        w.assert_running("by the end of the application");
    }
}

#[test]
fn store_check_names_a_damaged_record() {
    let c = Cluster::new("store-check");
    let spec = fs_master(&c);
    let store = c.path("store");
    let store_arg = store.to_str().unwrap();
    {
        let mut master = c.master(&spec);
        let _w = c.worker("w1", &[spec.addr()], 1, 128, &[]);
        wait_for(BOUND, "the worker registered", || alive_with_workers(&state_of(&spec)?, &["w1"]));
        master.stop(Duration::from_secs(10));
    }

    let ok = c.run(&["store", "check", store_arg], BOUND);
    assert!(ok.status.success(), "an intact store checks: {}", String::from_utf8_lossy(&ok.stderr));

    let record = std::fs::read_dir(&store)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("w-w1"))
        .expect("a record of worker w1 in the store");
    let mut bytes = std::fs::read(&record).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&record, &bytes).unwrap();

    let out = c.run(&["store", "check", store_arg], BOUND);
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "a damaged store must fail the check: {text}");
    let name = record.file_name().unwrap().to_string_lossy().into_owned();
    assert!(text.contains(&name), "the check names the damaged record {name}: {text}");
}

/// Seed 002 (docs/design.md#issue-12): a master replaced at a new address is found by the
/// workers started before it. The master is killed with `kill -9`; a new
/// master process on another port, over the same store, recovers the
/// workers' records — each with the worker's callback address — dials each
/// worker and says it leads. The workers never knew its address; they probe
/// it, it proves its epoch, and they re-register with it, their executors
/// still running.
#[test]
fn a_master_replaced_at_a_new_address_is_found_by_its_workers() {
    let c = Cluster::new("fs-new-address");
    let old = fs_master(&c);
    let mut master = c.master(&old);
    let masters = vec![old.addr()];
    let mut workers: Vec<_> =
        WORKERS.iter().map(|id| c.worker(id, &masters, 1, 256, &[])).collect();
    wait_for(BOUND, "the first master ALIVE with its 3 workers", || {
        alive_with_workers(&state_of(&old)?, &WORKERS)
    });
    let marker = unique("fs-new-address");
    let mut submit = c.submit(
        "submit",
        &masters,
        &["--executors", "3", "--cores", "1", "--memory", "64", "--failover-timeout", "120000"],
        &["sh", "-c", "sleep 600", &marker],
    );
    three_running(&old);

    master.kill9();
    // The same store, another id, another port: nobody was told of it.
    let mut new = fs_master(&c);
    new.id = "m2".into();
    assert_ne!(new.port, old.port);
    let mut replacement = c.master(&new);
    wait_for(BOUND, "the new master ALIVE with the 3 workers started before it", || {
        alive_with_workers(&state_of(&new)?, &WORKERS)
    });
    let ex = executors(&state_of(&new).unwrap());
    assert_eq!(ex.len(), 3, "the executors were recovered, not relaunched: {ex:?}");
    assert!(ex.iter().all(|(_, st)| st == "RUNNING"), "{ex:?}");
    for w in &mut workers {
        w.assert_running("after the replacement");
    }
    replacement.assert_running("at the end");
    submit.stop(Duration::from_secs(5));
    for w in &mut workers {
        w.stop(Duration::from_secs(10));
    }
    assert!(leaders_with_marker(&marker).is_empty(), "no executor outlives its worker");
}

/// The same with the blocking runtime's master (`--runtime std`, no HTTP:
/// observed with `regent status --json`): it dials its recorded workers'
/// callback listeners too.
#[test]
fn a_std_master_replaced_at_a_new_address_is_found_by_its_workers() {
    let c = Cluster::new("fs-std-new-address");
    let store = c.path("store");
    let store = store.to_str().unwrap();
    let std_master = |id: &str| {
        let port = support::cluster::free_port();
        let addr = support::cluster::loopback(port);
        let args = ["--runtime", "std", "master", "--id", id, "--listen", &addr];
        let mut args = args.to_vec();
        args.extend(["--recovery", "filesystem", "--store", store]);
        (addr.clone(), c.spawn(id, support::cluster::Kind::Master, &args))
    };
    let alive = |addr: &str| {
        let s = c.status_json(&[addr.to_owned()]).ok_or("no leader answers")?;
        alive_with_workers(&s, &WORKERS)
    };
    let (old, mut m1) = std_master("m1");
    let workers: Vec<_> =
        WORKERS.iter().map(|id| c.worker(id, std::slice::from_ref(&old), 1, 256, &[])).collect();
    wait_for(BOUND, "the std master ALIVE with its 3 workers", || alive(&old));
    m1.kill9();
    let (new, mut m2) = std_master("m2");
    wait_for(BOUND, "the new std master ALIVE with the 3 workers", || alive(&new));
    m2.assert_running("at the end");
    for mut w in workers {
        w.assert_running("at the end");
    }
}

/// Seed 002 (docs/design.md#seed-002) for applications: a `regent submit --callback` told of the old
/// master only is contacted by its replacement at a new address,
/// resubscribes there and completes.
#[test]
fn a_submit_with_a_callback_follows_a_master_replaced_at_a_new_address() {
    let c = Cluster::new("fs-submit-new-address");
    let old = fs_master(&c);
    let mut master = c.master(&old);
    let masters = vec![old.addr()];
    let _workers: Vec<_> = WORKERS.iter().map(|id| c.worker(id, &masters, 1, 256, &[])).collect();
    wait_for(BOUND, "the first master ALIVE with its 3 workers", || {
        alive_with_workers(&state_of(&old)?, &WORKERS)
    });
    let opts = ["--executors", "3", "--cores", "1", "--memory", "64", "--callback", "127.0.0.1:0"];
    let mut submit = c.submit("submit", &masters, &opts, &["sh", "-c", "sleep 4; exit 0"]);
    three_running(&old);
    master.kill9();
    let mut new = fs_master(&c);
    new.id = "m2".into();
    let _replacement = c.master(&new);
    let status = submit.wait_exit(BOUND);
    assert_eq!(
        status.code(),
        Some(0),
        "the submit completes with the new master:\n{}\n{}",
        submit.stdout(),
        submit.stderr()
    );
    assert!(submit.stdout().contains(&new.addr()), "it subscribed to the new master");
}

//! End-to-end, issue 20 (docs/design.md#issue-20) scenario 8: a filesystem-store master on a slow
//! disk. An `LD_PRELOAD` shim (`fixtures/slow_fsync/slow_fsync.c`, built
//! here with `cc`) makes every `fsync`/`fdatasync` of the master take
//! 2.5 s, so a batch of the store (the record's file, then the directory)
//! commits in about 5 s, as long as `regent submit`'s first SUBSCRIBE
//! waits. On main the submission abandoned every attempt just before its
//! write landed and never subscribed. Checked here, with real processes on
//! loopback: (a) the submission subscribes; (b) a worker registering
//! (slowly: its record takes a batch too) into the waiting slots runs
//! exactly one executor per slot, counted from the live processes; (c)
//! everything completes. Outcomes within generous bounds, never timings.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::cluster::{api_state, executors, leaders_with_marker, unique, wait_for, Cluster};
use support::cluster::{MasterSpec, Proc};

/// Generous bound for anything to happen on the slow disk.
const BOUND: Duration = Duration::from_secs(120);

/// Every fsync of the master takes this long.
const FSYNC_MS: &str = "2500";

const SLOTS: usize = 2;

/// Builds the shim into the test's temp dir; panics naming what failed.
fn build_shim(c: &Cluster) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/slow_fsync/slow_fsync.c");
    let out = c.path("slow_fsync.so");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-ldl")
        .output()
        .unwrap_or_else(|e| panic!("cannot run cc to build {}: {e}", src.display()));
    assert!(
        built.status.success(),
        "cc could not build {}: {}",
        src.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

/// The slot of each live executor process (the group leaders whose command
/// line carries `marker`), by `REGENT_EXECUTOR_ID`
/// (`<framework>/<group>#<slot>#<launch>`): slot → (pid, executor id).
fn live_by_slot(marker: &str) -> BTreeMap<String, Vec<(u32, String)>> {
    let mut by_slot: BTreeMap<String, Vec<(u32, String)>> = BTreeMap::new();
    for pid in leaders_with_marker(marker) {
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else { continue };
        let id = env
            .split(|b| *b == 0)
            .find_map(|kv| kv.strip_prefix(b"REGENT_EXECUTOR_ID="))
            .map(|v| String::from_utf8_lossy(v).into_owned());
        if let Some(id) = id {
            let slot = id.split('#').nth(1).unwrap_or("?").to_owned();
            by_slot.entry(slot).or_default().push((pid, id));
        }
    }
    by_slot
}

fn state(spec: &MasterSpec) -> Result<serde_json::Value, String> {
    api_state(&spec.http_addr()).ok_or_else(|| "the master does not answer".to_owned())
}

fn fail(what: &str, submit: &mut Proc) -> ! {
    panic!(
        "{what}\n--- submit stdout ---\n{}\n--- submit stderr ---\n{}",
        submit.stdout(),
        submit.stderr()
    )
}

#[test]
fn issue_20_slow_fsync_a_submission_subscribes_and_each_slot_runs_once() {
    let c = Cluster::new("slow-disk");
    let shim = build_shim(&c);
    let fsync_log = c.path("fsync.log");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let masters = vec![spec.addr()];
    let (shim, log) = (shim.to_str().unwrap(), fsync_log.to_str().unwrap());
    let env =
        [("LD_PRELOAD", shim), ("REGENT_SLOW_FSYNC_MS", FSYNC_MS), ("REGENT_SLOW_FSYNC_LOG", log)];
    let _master = c.master_env(&spec, &env);
    wait_for(BOUND, "the master ALIVE (its epoch durable on the slow disk)", || {
        let s = state(&spec)?;
        if s["status"] == "ALIVE" {
            Ok(())
        } else {
            Err(format!("status {}", s["status"]))
        }
    });
    let fsyncs = std::fs::read_to_string(&fsync_log).unwrap_or_default().lines().count();
    assert!(fsyncs >= 1, "the shim slowed no fsync of the master: is LD_PRELOAD in effect?");

    // (a) The submission subscribes, though each SUBSCRIBE takes a batch.
    let marker = unique("slowdisk");
    let cores = SLOTS.to_string();
    let mut submit = c.submit(
        "submit",
        &masters,
        &["--executors", &cores, "--cores", "1", "--memory", "64"],
        &["sh", "-c", "sleep 6; exit 0", &marker],
    );
    let deadline = Instant::now() + BOUND;
    while !submit.stdout().contains("subscribed to") {
        if let Some(status) = submit.exit_status() {
            fail(&format!("the submission ended ({status}) before subscribing"), &mut submit);
        }
        if Instant::now() > deadline {
            fail("the submission did not subscribe", &mut submit);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_for(BOUND, "the group accepted, its slots waiting", || {
        let out = submit.stdout();
        if out.contains("group main accepted") {
            Ok(())
        } else {
            Err(out)
        }
    });
    assert!(leaders_with_marker(&marker).is_empty(), "no executor before any worker");

    // (b) A worker registers (its record takes a batch) into the waiting
    // slots: one executor per slot, whatever the timing.
    let _worker = c.worker("w1", &masters, SLOTS as u32, 512, &[]);
    let mut seen: BTreeMap<String, BTreeSet<(u32, String)>> = BTreeMap::new();
    let status = loop {
        for (slot, live) in live_by_slot(&marker) {
            assert!(
                live.len() <= 1,
                "slot {slot} runs {} executors at once: {live:?}\nsubmit:\n{}",
                live.len(),
                submit.stdout()
            );
            seen.entry(slot).or_default().extend(live);
        }
        if let Some(status) = submit.exit_status() {
            break status;
        }
        if Instant::now() > deadline + BOUND {
            fail("the submission did not complete", &mut submit);
        }
        std::thread::sleep(Duration::from_millis(50));
    };

    // (c) Everything completed, each slot by the one executor it ran.
    if status.code() != Some(0) {
        fail(&format!("the submission ended with {status}"), &mut submit);
    }
    assert_eq!(seen.len(), SLOTS, "executors seen by slot: {seen:?}");
    for (slot, runs) in &seen {
        assert_eq!(runs.len(), 1, "slot {slot} ran {} executors: {runs:?}", runs.len());
    }
    let ex = executors(&state(&spec).unwrap());
    assert_eq!(ex.len(), SLOTS, "the master's executors: {ex:?}");
    assert!(ex.iter().all(|(_, s)| s == "EXITED"), "the master's executors: {ex:?}");
}

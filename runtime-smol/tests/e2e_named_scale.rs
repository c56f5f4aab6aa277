//! End-to-end: a scale that names the executors it removes
//! (docs/design.md#issue-43, item 3) against real processes: a
//! filesystem-store master, one worker and an application of four
//! executors whose command records its pid and traps SIGTERM into a file.
//! `regent scale FW GROUP 2 --remove A,B --signal TERM --deadline 20s`
//! removes exactly A and B — they get SIGTERM (the trap writes its file)
//! and die — while the other two keep running with the same pids; then
//! one more goes with `--signal USR1`. A refusal names the bad id and
//! changes nothing. Loopback only, temp dirs,
//! generous bounds, no timings.

mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use support::cluster::{alive_with_workers, api_state, unique, wait_for, Cluster, MasterSpec};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

fn state_of(spec: &MasterSpec) -> Result<Value, String> {
    api_state(&spec.http_addr()).ok_or_else(|| format!("{} does not answer /api/state", spec.id))
}

/// The ids of every RUNNING executor, sorted by slot.
fn running(state: &Value) -> Vec<String> {
    let mut v: Vec<String> = state["executors"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e["state"] == "RUNNING")
                .filter_map(|e| e["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|id| slot_of(id));
    v
}

/// The slot an executor id names (`FW/GROUP#SLOT#...`).
fn slot_of(id: &str) -> u32 {
    id.split('#').nth(1).and_then(|s| s.parse().ok()).unwrap_or(u32::MAX)
}

/// The file name the command uses for executor `id`.
fn file_name(id: &str) -> String {
    id.replace(['/', '#'], "_")
}

/// The pid executor `id` recorded, if it did.
fn pid_of(marks: &Path, id: &str) -> Option<u32> {
    let text = std::fs::read_to_string(marks.join(format!("{}.pid", file_name(id)))).ok()?;
    text.trim().parse().ok()
}

fn alive(pid: u32) -> bool {
    // A zombie is not alive: its state is `Z` in /proc/PID/stat.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, rest)| rest.trim_start().to_owned()))
        .is_some_and(|rest| !rest.starts_with('Z'))
}

#[test]
fn a_scale_that_names_two_of_four_executors_stops_exactly_those_with_sigterm() {
    let c = Cluster::new("named-scale");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let masters = vec![spec.addr()];
    let m = spec.addr();
    let _master = c.master(&spec);
    let mut w1 = c.worker("w1", &masters, 8, 2048, &[]);
    wait_for(BOUND, "the master ALIVE with w1", || alive_with_workers(&state_of(&spec)?, &["w1"]));
    let marks = c.path("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let marker = unique("named");
    // Each executor writes its pid, and on SIGTERM or SIGUSR1 a `.term` file
    // naming the signal, then exits (the signal the worker sends the group
    // ends its `sleep` too).
    let script = format!(
        "f={dir}/$(printf %s \"$REGENT_EXECUTOR_ID\" | tr '/#' '__'); \
         trap 'echo TERM > \"$f.term\"; exit 0' TERM; \
         trap 'echo USR1 > \"$f.term\"; exit 0' USR1; \
         echo $$ > \"$f.pid.tmp\" && mv \"$f.pid.tmp\" \"$f.pid\"; \
         while true; do sleep 1; done",
        dir = marks.display()
    );
    let mut submit = c.submit(
        "submit",
        &masters,
        &["--executors", "4", "--cores", "1", "--memory", "64"],
        &["sh", "-c", &script, &marker],
    );
    let four = wait_for(BOUND, "4 executors RUNNING, each with its pid recorded", || {
        let r = running(&state_of(&spec)?);
        if r.len() == 4 && r.iter().all(|id| pid_of(&marks, id).is_some()) {
            Ok(r)
        } else {
            Err(format!("running {r:?}"))
        }
    });
    let pids: BTreeMap<String, u32> =
        four.iter().map(|id| (id.clone(), pid_of(&marks, id).unwrap())).collect();
    let state = state_of(&spec).unwrap();
    let fw = state["frameworks"][0]["id"].as_str().expect("framework id").to_owned();
    let group = state["frameworks"][0]["groups"][0]["name"].as_str().expect("group").to_owned();

    // A bad id refuses the whole request, naming it; nothing changes.
    let bogus = format!("{fw}/{group}#9#1.1");
    let out = c.run(
        &["scale", "--masters", &m, &fw, &group, "2", "--remove", &format!("{},{bogus}", four[0])],
        BOUND,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains(&format!("executor {bogus} is not a live executor")), "{stderr}");
    assert_eq!(running(&state_of(&spec).unwrap()), four, "nothing changed");

    // Remove slots 0 and 2 (not the highest): 1 and 3 keep running.
    let (gone, kept) = (vec![&four[0], &four[2]], vec![&four[1], &four[3]]);
    let remove = format!("{},{}", gone[0], gone[1]);
    let out = c.run(
        &[
            "scale",
            "--masters",
            &m,
            &fw,
            &group,
            "2",
            "--remove",
            &remove,
            "--signal",
            "TERM",
            "--deadline",
            "20s",
        ],
        BOUND,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("scaled to 2 slots"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "removed (stopped with SIGTERM, SIGKILL after 20s): {}, {}",
            gone[0], gone[1]
        )),
        "{stdout}"
    );
    wait_for(BOUND, "the named executors got SIGTERM and ended", || {
        let r = running(&state_of(&spec)?);
        let termed = gone.iter().all(|id| marks.join(format!("{}.term", file_name(id))).exists());
        let dead = gone.iter().all(|id| !alive(pids[*id]));
        if termed && dead && r.len() == 2 {
            Ok(())
        } else {
            Err(format!("running {r:?}, SIGTERM seen {termed}, processes gone {dead}"))
        }
    });
    let s = state_of(&spec).unwrap();
    assert_eq!(running(&s), kept.iter().map(|s| (*s).clone()).collect::<Vec<_>>());
    assert_eq!(s["frameworks"][0]["groups"][0]["slots"], 2, "{s}");
    for id in &kept {
        assert!(alive(pids[*id]), "{id} keeps its process");
        assert_eq!(pid_of(&marks, id), Some(pids[*id]), "{id} was not restarted");
        assert!(!marks.join(format!("{}.term", file_name(id))).exists(), "{id} got no SIGTERM");
    }
    for id in &gone {
        let sig = std::fs::read_to_string(marks.join(format!("{}.term", file_name(id))));
        assert_eq!(sig.unwrap().trim(), "TERM", "{id}");
    }

    // Another signal: slot 1 goes with SIGUSR1 (the shim outlives it and
    // records the end), slot 3 stays.
    let out = c.run(
        &["scale", "--masters", &m, &fw, &group, "1", "--remove", kept[0], "--signal", "usr1"],
        BOUND,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("removed (stopped with SIGUSR1, SIGKILL after 30s)"), "{stdout}");
    wait_for(BOUND, "the executor of slot 1 got SIGUSR1 and ended", || {
        let r = running(&state_of(&spec)?);
        let sig = std::fs::read_to_string(marks.join(format!("{}.term", file_name(kept[0]))));
        let sig = sig.map(|s| s.trim().to_owned()).unwrap_or_default();
        if sig == "USR1" && !alive(pids[kept[0]]) && r == vec![kept[1].clone()] {
            Ok(())
        } else {
            Err(format!("running {r:?}, signal seen {sig:?}"))
        }
    });
    assert!(alive(pids[kept[1]]), "slot 3 keeps its process");

    // Nothing replaces the removed ones: only the four first executors ever
    // recorded a pid.
    let recorded = std::fs::read_dir(&marks)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".pid"))
        .count();
    assert_eq!(recorded, 4, "no executor was launched after the scale");
    submit.assert_running("through the named scale");
    w1.assert_running("to the end");
}

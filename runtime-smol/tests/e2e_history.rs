//! End-to-end: the history of finished frameworks with real `regent`
//! processes. A filesystem-store master and a worker; one application runs
//! to completion, another is killed with `regent kill`; both show in
//! `regent status --json` (and `/api/state`, and the `regent status` table)
//! with their outcomes; the master is killed with `kill -9` and restarted:
//! still shown; restarted with `--retained-frameworks 1`: only the newest
//! remains, in the view and in the store. Outcomes are asserted within
//! generous bounds, never timings.

mod support;

use serde_json::Value;
use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, executors, unique, wait_for, Cluster, MasterSpec,
};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

fn fs_master(c: &Cluster, extra: &[&str]) -> MasterSpec {
    let store = c.path("store");
    let mut args = vec!["--recovery", "filesystem", "--store", store.to_str().unwrap()];
    args.extend_from_slice(extra);
    MasterSpec::new("m1", &args)
}

fn state_of(spec: &MasterSpec) -> Result<Value, String> {
    api_state(&spec.http_addr()).ok_or_else(|| format!("{} does not answer /api/state", spec.id))
}

/// The finished frameworks of a state: (name, outcome), newest first.
fn history(state: &Value) -> Vec<(String, String)> {
    state["history"]
        .as_array()
        .map(|h| {
            h.iter()
                .map(|f| {
                    (
                        f["name"].as_str().unwrap_or_default().to_owned(),
                        f["outcome"].as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The entry named `name` in the history of `state`.
fn entry<'a>(state: &'a Value, name: &str) -> Option<&'a Value> {
    state["history"].as_array()?.iter().find(|f| f["name"] == name)
}

/// `regent status --json` once it shows every `(name, outcome)` of `want`
/// (in that order, newest first) in its history, and nothing else.
fn status_with_history(c: &Cluster, masters: &[String], want: &[(&str, &str)]) -> Value {
    let want: Vec<(String, String)> =
        want.iter().map(|(n, o)| (n.to_string(), o.to_string())).collect();
    wait_for(BOUND, &format!("history {want:?} in regent status --json"), || {
        let s = c.status_json(masters).ok_or("regent status --json failed")?;
        if s["status"] != "ALIVE" {
            return Err(format!("status {}", s["status"]));
        }
        let got = history(&s);
        if got == want {
            Ok(s)
        } else {
            Err(format!("history {got:?}"))
        }
    })
}

fn history_files(c: &Cluster) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(c.path("store"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("h-") && n.ends_with(".rec"))
        .collect();
    v.sort();
    v
}

#[test]
fn finished_frameworks_are_kept_across_a_kill9_restart_and_trimmed_to_the_limit() {
    let c = Cluster::new("history");
    let spec = fs_master(&c, &[]);
    let masters = vec![spec.addr()];
    let mut master = c.master(&spec);
    let _worker = c.worker("w1", &masters, 2, 512, &[]);
    wait_for(BOUND, "the master ALIVE with its worker", || {
        alive_with_workers(&state_of(&spec)?, &["w1"])
    });

    // An application that runs to completion, kept (`--keep`, the
    // harness's `submit`): the master ends it when its failover timeout
    // expires, COMPLETED by its slots. (Without `--keep` it ends at once:
    // e2e_submit.rs.)
    let mut done = c.submit(
        "done",
        &masters,
        &[
            "--name",
            "done-app",
            "--executors",
            "2",
            "--cores",
            "1",
            "--memory",
            "64",
            "--failover-timeout",
            "1500",
        ],
        &["sh", "-c", "exit 0"],
    );
    let status = done.wait_exit(BOUND);
    assert_eq!(status.code(), Some(0), "submit: {}\n{}", done.stdout(), done.stderr());
    let s = status_with_history(&c, &masters, &[("done-app", "COMPLETED")]);
    let d = entry(&s, "done-app").unwrap();
    let slots = d["slots"].as_array().expect("slots");
    assert_eq!(slots.len(), 2, "{d}");
    for (i, slot) in slots.iter().enumerate() {
        assert_eq!(slot["group"], "main", "{slot}");
        assert_eq!(slot["slot"], i, "{slot}");
        assert_eq!(slot["state"], "EXITED", "{slot}");
        assert_eq!(slot["exit_code"], 0, "{slot}");
        assert_eq!(slot["attempts"], 1, "{slot}");
        assert!(slot["executor"].is_string(), "{slot}");
    }
    let done_at = d["finished_at_ms"].as_u64().expect("finished_at_ms");
    assert!(done_at > 1_600_000_000_000, "a wall-clock time: {done_at}");
    assert!(d["registered_at_ms"].as_u64().is_some_and(|r| r <= done_at), "{d}");
    assert!(s["frameworks"].as_array().unwrap().is_empty(), "no longer live: {s}");

    // An application killed by an operator while it runs.
    let marker = unique("history");
    let mut killed = c.submit(
        "killed",
        &masters,
        &["--name", "killed-app", "--executors", "1", "--cores", "1", "--memory", "64"],
        &["sh", "-c", "sleep 120", &marker],
    );
    let fw = wait_for(BOUND, "killed-app's executor RUNNING", || {
        let s = state_of(&spec)?;
        let running = executors(&s).iter().any(|(_, st)| st == "RUNNING");
        let fw = s["frameworks"]
            .as_array()
            .and_then(|f| f.iter().find(|f| f["name"] == "killed-app"))
            .and_then(|f| f["id"].as_str().map(str::to_owned));
        match fw {
            Some(fw) if running => Ok(fw),
            _ => Err(format!("frameworks {} executors {:?}", s["frameworks"], executors(&s))),
        }
    });
    let out = c.run(&["kill", "--masters", &masters[0], &fw], BOUND);
    assert!(out.status.success(), "regent kill: {}", String::from_utf8_lossy(&out.stderr));
    // Its submit is told and stops: it does not start the application over.
    let status = killed.wait_exit(BOUND);
    assert_ne!(status.code(), Some(0));
    let said = format!("{}{}", killed.stdout(), killed.stderr());
    assert!(said.contains("killed by an operator"), "{said}");
    assert!(said.contains("has finished (KILLED)"), "{said}");
    let s =
        status_with_history(&c, &masters, &[("killed-app", "KILLED"), ("done-app", "COMPLETED")]);
    let k = entry(&s, "killed-app").unwrap();
    assert_eq!(k["id"], fw.as_str());
    let slot = &k["slots"][0];
    assert_eq!(slot["state"], "KILLED", "{k}");
    assert!(slot["exit_code"].is_null(), "{k}");
    // /api/state says the same.
    let api = state_of(&spec).unwrap();
    assert_eq!(api["history"], s["history"], "/api/state and regent status --json agree");
    // And the table.
    let table = c.run(&["status", "--masters", &masters[0]], BOUND);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(table.contains("FINISHED FRAMEWORKS (2)"), "{table}");
    assert!(table.contains("killed-app") && table.contains("KILLED"), "{table}");
    assert!(table.contains("2 EXITED 0"), "{table}");
    assert_eq!(history_files(&c).len(), 2);

    // kill -9 and restart on the same store: still shown, as written.
    master.kill9();
    let mut master = c.master(&spec);
    let again =
        status_with_history(&c, &masters, &[("killed-app", "KILLED"), ("done-app", "COMPLETED")]);
    assert_eq!(again["history"], s["history"], "every field as before the restart");

    // Restarted with room for one: only the newest remains, in the store too.
    master.kill9();
    let one = MasterSpec {
        args: {
            let mut a = spec.args.clone();
            a.extend(["--retained-frameworks".into(), "1".into()]);
            a
        },
        ..spec.clone()
    };
    let _master = c.master(&one);
    let last = status_with_history(&c, &masters, &[("killed-app", "KILLED")]);
    assert_eq!(last["history"][0], s["history"][0]);
    wait_for(BOUND, "one history record left in the store", || {
        let files = history_files(&c);
        if files.len() == 1 {
            Ok(())
        } else {
            Err(format!("{files:?}"))
        }
    });
}

#[test]
fn a_retained_frameworks_limit_past_the_maximum_is_refused_naming_it() {
    let c = Cluster::new("history-flag");
    let out = c.run(
        &["master", "--id", "m1", "--listen", "127.0.0.1:0", "--retained-frameworks", "10001"],
        BOUND,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--retained-frameworks") && err.contains("10001"), "{err}");
}

/// ZooKeeper mode: the history is in the shared store, so a standby that
/// takes over after the leader's `kill -9` shows it as the old leader did.
#[test]
fn zookeeper_history_survives_failover_to_a_standby() {
    use support::cluster::sole_alive;
    use support::zk_server::ZkServer;
    support::zk_server::require_installed();
    let zk = ZkServer::start();
    let c = Cluster::new("history-zk");
    let root = format!("/{}", unique("zk-history"));
    let specs: Vec<MasterSpec> =
        ["m1", "m2"].iter().map(|id| MasterSpec::zookeeper(id, &zk.addr(), &root, 3000)).collect();
    let masters: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
    let mut procs: Vec<_> = specs.iter().map(|s| c.master(s)).collect();
    let mut running = vec![true; 2];
    let _worker = c.worker("w1", &masters, 2, 512, &[]);
    let (first, _) = wait_for(BOUND, "one leader ALIVE with the worker", || {
        sole_alive(&specs, &running, &["w1"])
    });

    let mut app = c.submit(
        "app",
        &masters,
        &[
            "--name",
            "zk-app",
            "--executors",
            "2",
            "--cores",
            "1",
            "--memory",
            "64",
            "--failover-timeout",
            "1500",
        ],
        &["sh", "-c", "exit 0"],
    );
    let status = app.wait_exit(BOUND);
    assert_eq!(status.code(), Some(0), "submit: {}\n{}", app.stdout(), app.stderr());
    let before = wait_for(BOUND, "zk-app COMPLETED in the leader's history", || {
        let s = state_of(&specs[first])?;
        match history(&s)[..] {
            [(ref n, ref o)] if n == "zk-app" && o == "COMPLETED" => Ok(s),
            ref other => Err(format!("history {other:?}")),
        }
    });

    procs[first].kill9();
    running[first] = false;
    let (next, after) = wait_for(BOUND, "the standby leads with the worker", || {
        sole_alive(&specs, &running, &["w1"])
    });
    assert_ne!(next, first);
    assert_eq!(after["history"], before["history"], "the new leader shows the same history");
    let e = entry(&after, "zk-app").unwrap();
    assert_eq!(e["slots"].as_array().map(Vec::len), Some(2), "{e}");
    drop(procs);
}

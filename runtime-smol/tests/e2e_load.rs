//! `regent load` against a real master: every simulated worker registers,
//! heartbeats are acknowledged, the frameworks' executors are all launched
//! and RUNNING as their frameworks are told, and the report (one line of
//! JSON with `--json`) says so. Figures belong to the scale benchmarks;
//! this asserts outcomes only.

mod support;

use std::time::Duration;
use support::cluster::{api_state, wait_for, Cluster, Kind, MasterSpec};

#[test]
fn regent_load_registers_every_simulated_worker_and_reports_json() {
    let c = Cluster::new("e2e-load");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let master = c.master(&spec);
    wait_for(Duration::from_secs(30), "the master ALIVE", || match api_state(&spec.http_addr()) {
        Some(v) if v["status"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let pid = master.pid().to_string();
    let out = c.run(
        &[
            "load",
            "--masters",
            &spec.addr(),
            "--workers",
            "200",
            "--secs",
            "2",
            "--frameworks",
            "2",
            "--executors",
            "50",
            "--master-pid",
            &pid,
            "--json",
        ],
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "regent load failed: {}", String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().last().expect("one line of JSON");
    let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
    assert_eq!(v["workers"], 200);
    assert_eq!(v["registered"], 200, "{v}");
    assert!(v["registration_ms"].is_number(), "{v}");
    assert!(v["heartbeats"].as_u64().unwrap() > 0, "heartbeats were acknowledged: {v}");
    assert_eq!(v["executors_launched"], 50, "{v}");
    // RUNNING as the frameworks were told by the master, not only launched.
    assert_eq!(v["executors_running"], 50, "{v}");
    assert!(v["running_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{v}");
    assert!(v["running_per_sec"].as_f64().is_some_and(|r| r > 0.0), "{v}");
    assert!(v["master_cpu_placement_percent"].is_number(), "{v}");
    assert_eq!(v["rejections"], 0, "{v}");
    assert!(v["master_rss_kb"].as_u64().unwrap() > 0, "{v}");
    assert!(v["master_cpu_percent"].is_number(), "{v}");
    // The master saw them all.
    let state = api_state(&spec.http_addr()).expect("the master answers");
    let workers = state["workers"].as_array().expect("workers").len();
    assert!(workers >= 200, "{workers} workers in the master's registry");
}

/// The simulated peers share one callback listener: a master started at
/// an address none of them was given (the old one killed, the store kept)
/// recovers their records, dials the listener once, and every simulated
/// worker follows it there and registers again — the seed 002 (docs/design.md#seed-002) path at the
/// generator's scale.
#[test]
fn regent_load_peers_find_a_replacement_master_through_their_shared_callback_listener() {
    let c = Cluster::new("e2e-load-callback");
    let store = c.path("store");
    let store = store.to_str().unwrap();
    let old = MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store]);
    let mut first = c.master(&old);
    wait_for(Duration::from_secs(30), "the first master ALIVE", || {
        match api_state(&old.http_addr()) {
            Some(v) if v["status"] == "ALIVE" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    const N: usize = 100;
    let args = ["load", "--masters", &old.addr(), "--workers", "100", "--secs", "40", "--json"];
    let mut load = c.spawn("load", Kind::Other, &args);
    let alive = |http: &str| -> Result<(), String> {
        let v = api_state(http).ok_or("no answer")?;
        let n = v["workers"]
            .as_array()
            .ok_or("no workers")?
            .iter()
            .filter(|w| w["state"] == "ALIVE")
            .count();
        if v["status"] == "ALIVE" && n == N {
            Ok(())
        } else {
            Err(format!("{} with {n} ALIVE workers", v["status"]))
        }
    };
    wait_for(Duration::from_secs(60), "every simulated worker ALIVE", || alive(&old.http_addr()));
    first.kill9();
    // The replacement: same store, new ports nobody was told about.
    let new = MasterSpec::new("m2", &["--recovery", "filesystem", "--store", store]);
    let _second = c.master(&new);
    wait_for(Duration::from_secs(60), "every simulated worker ALIVE at the new master", || {
        alive(&new.http_addr())
    });
    let status = load.wait_exit(Duration::from_secs(120));
    assert!(status.success(), "regent load failed: {}", load.stderr());
    let stdout = load.stdout();
    let line = stdout.lines().last().expect("one line of JSON");
    let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
    assert!(v["callback"].as_str().is_some_and(|a| a.starts_with("127.0.0.1:")), "{v}");
    assert!(v["contacts"].as_u64().unwrap() >= 1, "the new leader dialled the listener: {v}");
    assert_eq!(v["registered"], 100, "{v}");
}

#[test]
fn regent_load_refuses_a_malformed_shard() {
    let c = Cluster::new("e2e-load-flags");
    let out =
        c.run(&["load", "--masters", "127.0.0.1:1", "--shard", "2/2"], Duration::from_secs(30));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("2/2: needs 0 <= I < N"), "{stderr}");
}

/// The std runtime's ceiling: below it every worker registers; past it a
/// connection is closed at once with a log line naming the ceiling, and
/// the master keeps serving the workers it has.
#[test]
fn the_std_master_takes_workers_up_to_its_ceiling_and_says_so_past_it() {
    let c = Cluster::new("e2e-load-std");
    let spec = MasterSpec::new("m1", &[]);
    let addr = spec.addr();
    let args = ["--runtime", "std", "master", "--id", "m1", "--listen", &addr];
    let mut master =
        c.spawn("m1", Kind::Master, &[&args[..], &["--max-connections", "40"]].concat());
    wait_for(Duration::from_secs(30), "the std master listening", || {
        std::net::TcpStream::connect(&addr).map(|_| ()).map_err(|e| e.to_string())
    });
    let out = c.run(
        &[
            "load",
            "--masters",
            &spec.addr(),
            "--workers",
            "60",
            "--secs",
            "1",
            "--register-within",
            "5",
            "--json",
        ],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "regent load failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("a line")).expect("JSON");
    assert_eq!(v["registered"], 40, "exactly the ceiling registered: {v}");
    assert!(v["heartbeats"].as_u64().unwrap() > 0, "{v}");
    assert!(master.is_running(), "the std master kept running");
    let log = master.stderr();
    assert!(
        log.contains("refusing a connection: 40 connections are open"),
        "the refusal names the ceiling: {log}"
    );
}

#[test]
fn a_std_ceiling_beyond_the_process_limits_is_refused_at_start() {
    let c = Cluster::new("e2e-load-std-limit");
    let out = c.run(
        &[
            "--runtime",
            "std",
            "master",
            "--id",
            "m1",
            "--listen",
            "127.0.0.1:0",
            "--max-connections",
            "100000000",
        ],
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--max-connections 100000000 needs"), "{stderr}");
}

/// The smol master keeps 256 file descriptors for itself: with a limit of
/// 330 it takes about 70 workers, refuses the rest at once with a log line
/// naming the ceiling, and its HTTP server and the workers it took keep
/// working (at the limit tiny_http's accept thread used to panic).
#[test]
fn the_smol_master_keeps_descriptors_for_itself_and_says_so() {
    let c = Cluster::new("e2e-load-fds");
    let spec = MasterSpec::new("m1", &[]);
    let (addr, http) = (spec.addr(), spec.http_addr());
    let log = c.path("m1.stderr");
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _master = KillOnDrop(
        std::process::Command::new("prlimit")
            .args(["--nofile=330:330", "--", support::cluster::BIN])
            .args([
                "master",
                "--id",
                "m1",
                "--listen",
                &addr,
                "--http",
                &http,
                "--recovery",
                "none",
            ])
            .stderr(std::fs::File::create(&log).expect("a log file"))
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("prlimit (util-linux) runs the master"),
    );
    wait_for(Duration::from_secs(30), "the master ALIVE", || match api_state(&http) {
        Some(v) if v["status"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let out = c.run(
        &[
            "load",
            "--masters",
            &addr,
            "--workers",
            "120",
            "--secs",
            "1",
            "--register-within",
            "5",
            "--json",
        ],
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("the load's JSON");
    let registered = v["registered"].as_u64().unwrap();
    assert!((40..120).contains(&registered), "some, not all, registered: {v}");
    let state = api_state(&http).expect("HTTP still answers");
    assert_eq!(state["status"], "ALIVE");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("refusing a connection") && text.contains("file-descriptor limit"),
        "the refusal names the ceiling: {text}"
    );
    assert!(!text.contains("panicked"), "{text}");
}

//! End-to-end: a framework in another language (issue 43, docs/design.md#issue-43, item 8).
//! `tests/python/regent_adaptive.py` — Dask's adaptive interface written
//! against the `/v1/` JSON API with Python's standard library only — drives
//! three masters elected through a real ZooKeeper server and two workers,
//! through a `kill -9` of the leader:
//!
//! 1. it creates a job of 4 `sleep` executors and waits for 4 running;
//! 2. scales up to 6, then down naming 2 executors: exactly those go, the
//!    other 4 keep their ids;
//! 3. says `step await-failover`; this test kills the leader with
//!    `kill -9` and writes a line on its stdin;
//! 4. it finds the new leader (the next master on `503` or a refused
//!    connection), checks that the same 4 executors run and nothing runs
//!    twice, removes one more by name, checks again, and follows the event
//!    stream across the failover (resumed after the last index, a gap line
//!    re-listing the job); it exits 0 with `step ok`.
//!
//! Real `regent` processes, a real ZooKeeper server and `python3` on
//! loopback; every wait is bounded and generous; every process is stopped
//! at the end (the `Proc`s, the script's guard, the temp dir's leftovers).
//! Run one at a time (`--test-threads=1`).

mod support;

use serde_json::Value;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use support::cluster::{api_state, sole_alive, tail, unique, wait_for, Cluster, MasterSpec, Proc};
use support::zk_server::ZkServer;

/// Generous bound for anything to happen (a failover takes a session
/// timeout plus re-registration; the script's own waits are 90 s each).
const BOUND: Duration = Duration::from_secs(90);

/// The whole scenario, start to end.
const SCENARIO: Duration = Duration::from_secs(400);

const WORKERS: [&str; 2] = ["w1", "w2"];

/// The script, from this crate's directory.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/regent_adaptive.py")
}

/// The Python script as a child process: stdin kept for the failover
/// signal, output captured to files; killed (its group) when dropped.
struct Script {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: PathBuf,
    stderr: PathBuf,
    status: Option<ExitStatus>,
}

impl Script {
    fn start(c: &Cluster, args: &[&str]) -> Script {
        let (stdout, stderr) = (c.path("script.stdout"), c.path("script.stderr"));
        let mut child = Command::new("python3")
            .arg("-u")
            .arg(script())
            .args(args)
            .current_dir(c.dir())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start python3 (scripts/test installs it): {e}"));
        let stdin = child.stdin.take();
        Script { child, stdin, stdout, stderr, status: None }
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// The first `step NAME ...` line, once printed (its `key=value`
    /// fields); panics, with the script's output, if the script exits
    /// first or `bound` passes.
    fn step(&mut self, name: &str, bound: Duration) -> Vec<(String, String)> {
        let deadline = Instant::now() + bound;
        let prefix = format!("step {name}");
        loop {
            let out = self.stdout();
            if let Some(line) =
                out.lines().find(|l| *l == prefix || l.starts_with(&format!("{prefix} ")))
            {
                return fields(line);
            }
            if let Some(s) = self.exited() {
                panic!("the script exited ({s}) before step {name}:\n{}\n{}", out, self.stderr());
            }
            if Instant::now() > deadline {
                panic!("no step {name} within {bound:?}:\n{out}\n{}", tail(&self.stderr(), 40));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin kept");
        stdin.write_all(b"failed over\n").and_then(|()| stdin.flush()).expect("write the signal");
    }

    fn wait(&mut self, bound: Duration) -> ExitStatus {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(s) = self.exited() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the script did not exit within {bound:?}:\n{}\n{}",
                self.stdout(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        if self.exited().is_none() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.child.id())])
                .stderr(Stdio::null())
                .status();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("===== script stdout =====\n{}", self.stdout());
            eprintln!("===== script stderr =====\n{}", tail(&self.stderr(), 60));
        }
    }
}

/// The `key=value` fields of a step line.
fn fields(line: &str) -> Vec<(String, String)> {
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], key: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {key}= in {fields:?}"))
}

fn ids(list: &str) -> Vec<String> {
    let mut v: Vec<String> = list.split(',').map(str::to_owned).collect();
    v.sort();
    v
}

/// The job's executors the leader's `/api/state` lists as RUNNING or
/// LAUNCHING, sorted.
fn live_executors(state: &Value, job: &str) -> Vec<String> {
    let mut v: Vec<String> = state["executors"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e["framework_id"] == job)
                .filter(|e| e["state"] == "RUNNING" || e["state"] == "LAUNCHING")
                .filter_map(|e| e["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_python_framework_scales_by_name_through_a_leader_kill() {
    let zk = ZkServer::start();
    let c = Cluster::new("python-adaptive");
    let root = format!("/{}", unique("adaptive"));
    let zk_addr = zk.addr();
    let specs: Vec<MasterSpec> = ["m1", "m2", "m3"]
        .iter()
        .map(|id| {
            MasterSpec::new(
                id,
                &[
                    "--recovery",
                    "zookeeper",
                    "--zk",
                    &zk_addr,
                    "--zk-root",
                    &root,
                    "--zk-session-timeout",
                    "3000",
                ],
            )
        })
        .collect();
    let masters: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
    let mut procs: Vec<Proc> = specs.iter().map(|s| c.master(s)).collect();
    let mut running = vec![true; 3];
    let mut workers: Vec<Proc> =
        WORKERS.iter().map(|id| c.worker(id, &masters, 4, 1024, &[])).collect();
    wait_for(BOUND, "one leader ALIVE with both workers", || {
        sole_alive(&specs, &running, &WORKERS)
    });

    let job = "adaptive-e2e";
    let http: Vec<String> = specs.iter().map(|s| format!("http://{}", s.http_addr())).collect();
    let http = http.join(",");
    let mut script = Script::start(&c, &["--masters", &http, "--job", job, "--bound", "90"]);

    let created = script.step("created", BOUND);
    assert_eq!(field(&created, "change"), "created", "{created:?}");
    let four = ids(field(&script.step("running", BOUND), "ids"));
    assert_eq!(four.len(), 4, "{four:?}");
    let six = ids(field(&script.step("scaled-up", BOUND), "ids"));
    assert_eq!(six.len(), 6);
    assert!(four.iter().all(|e| six.contains(e)), "scale up kept the first four: {six:?}");
    let down = script.step("scaled-down", BOUND);
    let (removed, kept) = (ids(field(&down, "removed")), ids(field(&down, "kept")));
    assert_eq!(removed.len(), 2, "{down:?}");
    let mut expected: Vec<String> = six.iter().filter(|e| !removed.contains(e)).cloned().collect();
    expected.sort();
    assert_eq!(kept, expected, "exactly the named executors went");

    // The leader the script talks to is the one to kill.
    let await_failover = script.step("await-failover", BOUND);
    let leader_http = field(&await_failover, "leader").trim_start_matches("http://").to_owned();
    let leader = specs.iter().position(|s| s.http_addr() == leader_http).expect("a master");
    let (sole, view) =
        wait_for(BOUND, "the leader's view", || sole_alive(&specs, &running, &WORKERS));
    assert_eq!(sole, leader, "the script talks to the leader");
    assert_eq!(live_executors(&view, job), kept, "the leader runs exactly the kept four");

    procs[leader].kill9();
    running[leader] = false;
    let (next, _) = wait_for(BOUND, "a new leader with both workers", || {
        sole_alive(&specs, &running, &WORKERS)
    });
    assert_ne!(next, leader, "a killed master cannot lead");
    script.signal();

    let failover = script.step("failover", BOUND);
    assert_eq!(ids(field(&failover, "same")), kept, "no executor lost or doubled");
    let after = script.step("scaled-down-after-failover", BOUND);
    let last = field(&after, "removed").to_owned();
    assert!(kept.contains(&last), "{after:?}");
    let final_ids = ids(field(&after, "kept"));
    let mut want: Vec<String> = kept.iter().filter(|e| **e != last).cloned().collect();
    want.sort();
    assert_eq!(final_ids, want, "exactly the named executor went");
    let watch = script.step("watch", BOUND);
    let streams: u32 = field(&watch, "streams").parse().unwrap();
    assert!(streams >= 2, "the event stream resumed at the new leader: {watch:?}");
    script.step("ok", BOUND);
    let status = script.wait(SCENARIO);
    assert!(status.success(), "the script exits 0:\n{}\n{}", script.stdout(), script.stderr());

    // The new leader's own list agrees: the three, nothing else live.
    let new_leader = api_state(&specs[next].http_addr()).expect("the new leader answers");
    assert_eq!(live_executors(&new_leader, job), want, "{new_leader}");
    for w in &mut workers {
        w.assert_running("at the end");
    }
}

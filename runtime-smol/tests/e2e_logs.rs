//! End-to-end, issue 14 (docs/design.md#issue-14) item 6: an executor's output through the leader.
//!
//! Real `regent` processes on loopback, every connection authenticated
//! with a cluster secret: a master, a worker and applications whose
//! executors print known bytes. `regent logs` prints exactly them (stdout,
//! `--stderr`, `--tail-bytes`, binary bytes, more than one chunk); `GET
//! /api/logs/...` returns the same bytes; an executor id that tries to
//! escape the work directory is refused with a clear message; `--follow`
//! ends once the executor has ended and everything was printed, also when
//! the master restarts meanwhile. Outcomes are asserted within generous
//! bounds, never timings.

mod support;

use serde_json::Value;
use std::process::Output;
use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, http_get, unique, wait_for, wait_until, Cluster, MasterSpec,
};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// A cluster secret file in the cluster's temp dir; returns its path.
fn secret_file(c: &Cluster) -> String {
    let path = c.path("secret");
    std::fs::write(&path, "logs-test-secret-0123456789abcdef\n").unwrap();
    path.to_str().unwrap().to_owned()
}

/// The id of the one executor of framework `name` in `state`, once it is in
/// one of `states`.
fn executor_of(state: &Value, name: &str, states: &[&str]) -> Result<String, String> {
    let fw: Vec<&str> = state["frameworks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["name"] == name)
        .filter_map(|f| f["id"].as_str())
        .collect();
    let found: Vec<(String, String)> = state["executors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["framework_id"].as_str().is_some_and(|id| fw.contains(&id)))
        .map(|e| {
            (e["id"].as_str().unwrap_or("?").into(), e["state"].as_str().unwrap_or("?").into())
        })
        .collect();
    match found.as_slice() {
        [(id, s)] if states.contains(&s.as_str()) => Ok(id.clone()),
        _ => Err(format!("executors of {name}: {found:?}")),
    }
}

/// `regent --secret-file S logs --masters M ARGS`, run to completion with
/// its raw output.
fn logs(c: &Cluster, secret: &str, masters: &str, args: &[&str]) -> Output {
    let mut all = vec!["--secret-file", secret, "logs", "--masters", masters];
    all.extend_from_slice(args);
    let mut cmd = c.command(&all);
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("start regent logs");
    // Bounded: `regent logs` without --follow ends by itself; a watchdog
    // kills it after BOUND, and is called off as soon as it has ended.
    let pid = child.id();
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let timed_out = ended.recv_timeout(BOUND);
        if timed_out == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    });
    let out = child.wait_with_output().expect("wait for regent logs");
    drop(done);
    let _ = watchdog.join();
    out
}

/// Percent-encodes an executor id for a URL path (ids hold `/` and `#`).
fn encode(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn logs_prints_exactly_what_the_executor_wrote_over_the_cli_and_http() {
    let c = Cluster::new("logs");
    let secret = secret_file(&c);
    let spec = MasterSpec::new("m1", &["--recovery", "none", "--secret-file", &secret]);
    let masters = spec.addr();
    let _master = c.master(&spec);
    let state =
        || api_state(&spec.http_addr()).ok_or_else(|| "the master does not answer".to_owned());
    let _worker =
        c.worker("w1", std::slice::from_ref(&masters), 2, 512, &["--secret-file", &secret]);
    wait_for(BOUND, "the worker ALIVE", || alive_with_workers(&state()?, &["w1"]));

    // More than one chunk (64 KiB) of stdout, binary bytes at its end, and
    // two lines on stderr.
    let marker = unique("logs");
    let script =
        "echo out-1; echo err-1 >&2; seq 1 30000; echo err-2 >&2; printf '\\377\\000end\\n'";
    let mut submit = c.submit(
        "app",
        std::slice::from_ref(&masters),
        &[
            "--name",
            "printer",
            "--executors",
            "1",
            "--cores",
            "1",
            "--memory",
            "64",
            "--secret-file",
            &secret,
        ],
        &["sh", "-c", script, &marker],
    );
    assert!(submit.wait_exit(BOUND).success(), "the application succeeds: {}", submit.stderr());
    let executor =
        wait_for(BOUND, "the executor EXITED", || executor_of(&state()?, "printer", &["EXITED"]));

    let mut stdout = b"out-1\n".to_vec();
    for i in 1..=30000 {
        stdout.extend_from_slice(format!("{i}\n").as_bytes());
    }
    stdout.extend_from_slice(b"\xff\x00end\n");
    assert!(stdout.len() > 2 * 64 * 1024, "the output spans chunks");

    let out = logs(&c, &secret, &masters, &[&executor]);
    assert!(out.status.success(), "regent logs: {}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.stdout == stdout,
        "stdout differs ({} bytes, {} expected)",
        out.stdout.len(),
        stdout.len()
    );

    let out = logs(&c, &secret, &masters, &[&executor, "--stderr"]);
    assert!(out.status.success(), "regent logs --stderr: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "err-1\nerr-2\n");

    let out = logs(&c, &secret, &masters, &[&executor, "--tail-bytes", "12"]);
    assert!(
        out.status.success(),
        "regent logs --tail-bytes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"30000\n\xff\x00end\n"[..].to_vec());

    // --follow on an executor that has ended: prints everything, exits 0.
    let out = logs(&c, &secret, &masters, &[&executor, "--stderr", "--follow"]);
    assert!(out.status.success(), "regent logs --follow: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "err-1\nerr-2\n");

    // The HTTP route returns the same bytes (checked on text: the stderr
    // file, and the start of stdout, which is one chunk).
    let http = spec.http_addr();
    let path = format!("/api/logs/{}?stream=stderr", encode(&executor));
    let (code, body) = http_get(&http, &path).expect("GET /api/logs");
    assert_eq!((code, body.as_str()), (200, "err-1\nerr-2\n"), "{path}");
    let path = format!("/api/logs/{}?stream=stdout", encode(&executor));
    let (code, body) = http_get(&http, &path).expect("GET /api/logs");
    assert_eq!(code, 200, "{body}");
    assert_eq!(body.as_bytes(), &stdout[..64 * 1024], "the first chunk of stdout");
    let path = format!("/api/logs/{}?stream=stdout&offset=6", encode(&executor));
    let (code, body) = http_get(&http, &path).expect("GET /api/logs");
    assert_eq!(code, 200, "{body}");
    assert!(body.starts_with("1\n2\n3\n"), "from offset 6: {}", &body[..20.min(body.len())]);

    // A path escape names no executor: refused, clearly, on both faces.
    let out = logs(&c, &secret, &masters, &["../../etc/passwd"]);
    assert!(!out.status.success(), "a path is not an executor");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no executor ../../etc/passwd is known to the leader"), "{err}");
    assert!(out.stdout.is_empty(), "nothing printed: {:?}", String::from_utf8_lossy(&out.stdout));
    for path in ["/api/logs/..%2F..%2Fetc%2Fpasswd", "/api/logs/../../etc/passwd"] {
        let (code, body) = http_get(&http, path).expect("GET /api/logs");
        assert_eq!(code, 404, "{path}: {body}");
        assert!(body.contains("no executor ../../etc/passwd is known"), "{path}: {body}");
    }
    // The relays and the refusals are counted in /metrics.
    let (_, metrics) = http_get(&http, "/metrics").expect("GET /metrics");
    let counter = |name: &str| -> u64 {
        let line = metrics.lines().find(|l| l.starts_with(&format!("{name} ")));
        line.and_then(|l| l.split(' ').nth(1)?.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing:\n{metrics}"))
    };
    assert!(counter("regent_log_relays_total") >= 3, "every read was relayed:\n{metrics}");
    assert!(counter("regent_log_requests_refused_total") >= 3, "the path reads were refused");

    // Without the secret nothing is read: the handshake is refused.
    let mut cmd = c.command(&["logs", "--masters", &masters, "--connect-timeout", "1", &executor]);
    let out = cmd.output().expect("run regent logs");
    assert!(!out.status.success() && out.stdout.is_empty(), "no secret, no output");
}

#[test]
fn logs_follow_ends_when_the_executor_ends_even_across_a_master_restart() {
    let c = Cluster::new("logs-follow");
    let secret = secret_file(&c);
    let store = c.path("store");
    let store = store.to_str().unwrap();
    let spec = MasterSpec::new(
        "m1",
        &["--recovery", "filesystem", "--store", store, "--secret-file", &secret],
    );
    let masters = spec.addr();
    let mut master = c.master(&spec);
    let state =
        || api_state(&spec.http_addr()).ok_or_else(|| "the master does not answer".to_owned());
    let _worker =
        c.worker("w1", std::slice::from_ref(&masters), 2, 512, &["--secret-file", &secret]);
    wait_for(BOUND, "the worker ALIVE", || alive_with_workers(&state()?, &["w1"]));

    // Prints a line every 300 ms for about 6 s.
    let marker = unique("follow");
    let script = "for i in $(seq 1 20); do echo tick-$i; sleep 0.3; done";
    let _submit = c.submit(
        "ticker",
        std::slice::from_ref(&masters),
        &[
            "--name",
            "ticker",
            "--executors",
            "1",
            "--cores",
            "1",
            "--memory",
            "64",
            "--secret-file",
            &secret,
        ],
        &["sh", "-c", script, &marker],
    );
    let executor =
        wait_for(BOUND, "the executor RUNNING", || executor_of(&state()?, "ticker", &["RUNNING"]));
    let mut follow = c.spawn(
        "follow",
        support::cluster::Kind::Other,
        &["--secret-file", &secret, "logs", "--masters", &masters, "--follow", &executor],
    );
    wait_for(BOUND, "the first lines followed", || {
        let out = follow.stdout();
        if out.contains("tick-2\n") {
            Ok(())
        } else {
            Err(format!("followed so far: {out:?}"))
        }
    });
    // The master goes away and comes back over its store: the follower
    // finds it again, and the worker's report tells the new leadership
    // about the executor.
    master.kill9();
    std::thread::sleep(Duration::from_millis(700));
    let _master = c.master(&spec);
    let status = follow.wait_exit(BOUND);
    assert!(status.success(), "regent logs --follow exits 0: {}", follow.stderr());
    let expected: String = (1..=20).map(|i| format!("tick-{i}\n")).collect();
    assert_eq!(follow.stdout(), expected, "every line once, in order");
    let st = state().expect("the master answers");
    assert!(executor_of(&st, "ticker", &["EXITED"]).is_ok(), "it ended: {st}");
}

/// The blocking runtime's master and worker relay and read the same way,
/// over the CLI and over the std master's HTTP server.
#[test]
fn logs_work_with_the_std_runtime_daemons_too() {
    let c = Cluster::new("logs-std");
    let secret = secret_file(&c);
    // Started by hand (the fixture starts smol masters).
    let masters = support::cluster::loopback(support::cluster::free_port());
    let http = support::cluster::loopback(support::cluster::free_port());
    let _master = c.spawn(
        "m1",
        support::cluster::Kind::Master,
        &[
            "--secret-file",
            &secret,
            "--runtime",
            "std",
            "master",
            "--id",
            "m1",
            "--listen",
            &masters,
            "--http",
            &http,
        ],
    );
    let state = || {
        let mut cmd =
            c.command(&["--secret-file", &secret, "status", "--masters", &masters, "--json"]);
        let out = cmd.output().map_err(|e| e.to_string())?;
        serde_json::from_slice::<Value>(&out.stdout).map_err(|e| format!("status: {e}"))
    };
    let _worker = c.worker(
        "w1",
        std::slice::from_ref(&masters),
        2,
        512,
        &["--secret-file", &secret, "--runtime", "std"],
    );
    wait_for(BOUND, "the worker ALIVE", || alive_with_workers(&state()?, &["w1"]));
    let marker = unique("logs-std");
    let mut submit = c.submit(
        "app",
        std::slice::from_ref(&masters),
        &[
            "--name",
            "std-printer",
            "--executors",
            "1",
            "--cores",
            "1",
            "--memory",
            "64",
            "--secret-file",
            &secret,
        ],
        &["sh", "-c", "echo hello from std; echo oops >&2", &marker],
    );
    assert!(submit.wait_exit(BOUND).success(), "the application succeeds: {}", submit.stderr());
    let executor = wait_for(BOUND, "the executor EXITED", || {
        executor_of(&state()?, "std-printer", &["EXITED"])
    });
    let out = logs(&c, &secret, &masters, &[&executor, "--follow"]);
    assert!(out.status.success(), "regent logs: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello from std\n");
    let out = logs(&c, &secret, &masters, &[&executor, "--stderr"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "oops\n");
    // The std master's HTTP relays the same read.
    let path = format!("/api/logs/{}?stream=stdout", encode(&executor));
    let (code, body) = http_get(&http, &path).expect("GET /api/logs from the std master");
    assert_eq!((code, body.as_str()), (200, "hello from std\n"));
    let path = format!("/api/logs/{}?stream=stderr", encode(&executor));
    let (code, body) = http_get(&http, &path).expect("GET /api/logs from the std master");
    assert_eq!((code, body.as_str()), (200, "oops\n"));
}

/// `--follow` across a real leader failover: two masters elected through a
/// real ZooKeeper server, the leader killed with `kill -9` while the
/// executor prints; the follower finds the new leader and ends once the
/// executor has ended, every line printed once. (A ZooKeeper suite: run
/// with `--test-threads=1`.)
#[test]
fn logs_follow_survives_a_leader_failover() {
    let zk = support::zk_server::ZkServer::start();
    let c = Cluster::new("logs-failover");
    let secret = secret_file(&c);
    let root = format!("/{}", unique("logs"));
    let zk_addr = zk.addr();
    let specs: Vec<MasterSpec> = ["m1", "m2"]
        .iter()
        .map(|id| {
            let args = [
                "--recovery",
                "zookeeper",
                "--zk",
                &zk_addr,
                "--zk-root",
                &root,
                "--zk-session-timeout",
                "3000",
                "--secret-file",
                &secret,
            ];
            MasterSpec::new(id, &args)
        })
        .collect();
    let masters: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
    let mut procs: Vec<support::cluster::Proc> = specs.iter().map(|s| c.master(s)).collect();
    let mut running = vec![true; 2];
    let _worker = c.worker("w1", &masters, 2, 512, &["--secret-file", &secret]);
    let (leader, _) = wait_for(BOUND, "one leader ALIVE with w1", || {
        support::cluster::sole_alive(&specs, &running, &["w1"])
    });

    // A line every 300 ms for about 12 s: long enough to span the failover.
    let marker = unique("failover");
    let script = "for i in $(seq 1 40); do echo tick-$i; sleep 0.3; done";
    let mut opts = vec!["--name", "ticker", "--executors", "1", "--cores", "1", "--memory", "64"];
    opts.extend(["--secret-file", &secret]);
    let _submit = c.submit("ticker", &masters, &opts, &["sh", "-c", script, &marker]);
    let leader_state = |i: usize| {
        api_state(&specs[i].http_addr()).ok_or_else(|| format!("{} does not answer", specs[i].id))
    };
    let executor = wait_for(BOUND, "the executor RUNNING", || {
        executor_of(&leader_state(leader)?, "ticker", &["RUNNING"])
    });
    let list = masters.join(",");
    let mut follow = c.spawn(
        "follow",
        support::cluster::Kind::Other,
        &["--secret-file", &secret, "logs", "--masters", &list, "--follow", &executor],
    );
    wait_for(BOUND, "the first lines followed", || {
        let out = follow.stdout();
        if out.contains("tick-3\n") {
            Ok(())
        } else {
            Err(format!("followed so far: {out:?}"))
        }
    });
    procs[leader].kill9();
    running[leader] = false;
    let (next, _) = wait_for(BOUND, "a new leader with w1", || {
        support::cluster::sole_alive(&specs, &running, &["w1"])
    });
    assert_ne!(next, leader);
    let status = follow.wait_exit(BOUND);
    assert!(status.success(), "regent logs --follow exits 0: {}", follow.stderr());
    let expected: String = (1..=40).map(|i| format!("tick-{i}\n")).collect();
    assert_eq!(follow.stdout(), expected, "every line once, in order");
    let st = leader_state(next).expect("the new leader answers");
    assert!(executor_of(&st, "ticker", &["EXITED"]).is_ok(), "it ended: {st}");
}

/// The on-disk bytes of `stream` (`stdout`, `stdout.1`, ...) of every
/// executor under `work`.
fn output_bytes_on_disk(work: &std::path::Path, stream: &str) -> u64 {
    let mut total = 0;
    for exec in std::fs::read_dir(work.join("executors")).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(exec.path()).into_iter().flatten().flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            let numbered = name.strip_prefix(stream).is_some_and(|rest| {
                rest.is_empty() || rest[1..].chars().all(|c| c.is_ascii_digit())
            });
            if numbered && (name == stream || name.as_bytes().get(stream.len()) == Some(&b'.')) {
                total += f.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    total
}

/// A master and a worker `w1` whose executors' output rotates at
/// `max_bytes` into `files` files, with a cluster secret.
struct Rotating {
    cluster: Cluster,
    secret: String,
    masters: String,
    spec: MasterSpec,
    rotation: (String, String),
    _master: support::cluster::Proc,
    worker: support::cluster::Proc,
}

impl Rotating {
    fn start(name: &str, max_bytes: &str, files: &str) -> Rotating {
        let cluster = Cluster::new(name);
        let secret = secret_file(&cluster);
        let spec = MasterSpec::new("m1", &["--recovery", "none", "--secret-file", &secret]);
        let masters = spec.addr();
        let master = cluster.master(&spec);
        let rotation = (max_bytes.to_owned(), files.to_owned());
        let worker = Self::worker_of(&cluster, &masters, &secret, &rotation);
        let r = Rotating { cluster, secret, masters, spec, rotation, _master: master, worker };
        wait_for(BOUND, "the worker ALIVE", || alive_with_workers(&r.state()?, &["w1"]));
        r
    }

    fn worker_of(
        c: &Cluster,
        masters: &str,
        secret: &str,
        (max_bytes, files): &(String, String),
    ) -> support::cluster::Proc {
        let flags = [
            "--secret-file",
            secret,
            "--executor-log-max-bytes",
            max_bytes,
            "--executor-log-files",
            files,
        ];
        c.worker("w1", &[masters.to_owned()], 2, 512, &flags)
    }

    /// Kills the worker with SIGKILL and starts it again over its work
    /// directory; returns once it is ALIVE.
    fn restart_worker(&mut self) {
        self.worker.kill9();
        self.worker = Self::worker_of(&self.cluster, &self.masters, &self.secret, &self.rotation);
        wait_for(BOUND, "the restarted worker ALIVE", || {
            alive_with_workers(&self.state()?, &["w1"])
        });
    }

    fn state(&self) -> Result<Value, String> {
        api_state(&self.spec.http_addr()).ok_or_else(|| "the master does not answer".to_owned())
    }
}

#[test]
fn three_hundred_mib_of_output_leave_at_most_files_times_max_bytes_and_logs_has_the_newest() {
    let r = Rotating::start("logs-rotate", "1048576", "3");
    let (c, secret, masters) = (&r.cluster, &r.secret, &r.masters);
    let state = || r.state();
    let script = "head -c 314572800 /dev/zero | tr '\\000' x; echo; echo err-end >&2; echo THE-END";
    let opts = ["--name", "chatty", "--executors", "1", "--cores", "1", "--memory", "64"];
    let mut submit = c.submit(
        "app",
        std::slice::from_ref(masters),
        &[&opts[..], &["--secret-file", secret]].concat(),
        &["sh", "-c", script],
    );
    assert!(submit.wait_exit(BOUND * 3).success(), "the application succeeds: {}", submit.stderr());
    let executor =
        wait_for(BOUND, "the executor EXITED", || executor_of(&state()?, "chatty", &["EXITED"]));
    let on_disk = output_bytes_on_disk(&c.work_dir("w1"), "stdout");
    assert!(on_disk <= 3 * 1048576, "{on_disk} bytes of stdout on disk, at most 3 × 1 MiB");
    assert!(on_disk >= 2 * 1048576, "{on_disk} bytes: the kept files are full ones");
    let out = logs(c, secret, masters, &[&executor, "--tail-bytes", "20"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, b"xxxxxxxxxxx\nTHE-END\n".to_vec(), "the newest 20 bytes");
    let err = logs(c, secret, masters, &[&executor, "--stderr"]);
    assert_eq!(String::from_utf8_lossy(&err.stdout), "err-end\n");
}

#[test]
fn a_groups_own_rotation_overrides_the_workers() {
    // The worker keeps 3 files of 1 MiB; the group asks for 2 of 64 KiB.
    let r = Rotating::start("logs-rotate-group", "1048576", "3");
    let (c, secret, masters) = (&r.cluster, &r.secret, &r.masters);
    let script = "head -c 1048576 /dev/zero | tr '\\000' y; echo; echo THE-END";
    let opts = [
        &["--name", "own", "--executors", "1", "--cores", "1", "--memory", "64"][..],
        &["--log-max-bytes", "65536", "--log-files", "2", "--secret-file", secret][..],
    ]
    .concat();
    let mut submit = c.submit("app", std::slice::from_ref(masters), &opts, &["sh", "-c", script]);
    assert!(submit.wait_exit(BOUND * 2).success(), "the application succeeds: {}", submit.stderr());
    let executor =
        wait_for(BOUND, "the executor EXITED", || executor_of(&r.state()?, "own", &["EXITED"]));
    let on_disk = output_bytes_on_disk(&c.work_dir("w1"), "stdout");
    assert!(
        on_disk <= 2 * 65536,
        "{on_disk} bytes of stdout on disk, at most the group's 2 × 64 KiB"
    );
    assert!(on_disk >= 65536, "{on_disk} bytes: a full rotated file is kept");
    let out = logs(c, secret, masters, &[&executor, "--tail-bytes", "12"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, b"yyy\nTHE-END\n".to_vec(), "the newest bytes");
}

#[test]
fn logs_follow_goes_on_across_rotations() {
    let r = Rotating::start("logs-follow-rotate", "400", "5");
    let (c, secret, masters) = (&r.cluster, &r.secret, &r.masters);
    let state = || r.state();
    // 40 lines of 50 bytes, one every 150 ms: the 400-byte files rotate
    // four times while the follower reads.
    let line = "0123456789012345678901234567890123456789";
    let script = format!("for i in $(seq 100 139); do echo tick-$i-{line}; sleep 0.15; done");
    let opts = ["--name", "ticker", "--executors", "1", "--cores", "1", "--memory", "64"];
    let _submit = c.submit(
        "ticker",
        std::slice::from_ref(masters),
        &[&opts[..], &["--secret-file", secret]].concat(),
        &["sh", "-c", &script],
    );
    let executor =
        wait_for(BOUND, "the executor RUNNING", || executor_of(&state()?, "ticker", &["RUNNING"]));
    let mut follow = c.spawn(
        "follow",
        support::cluster::Kind::Other,
        &["--secret-file", secret, "logs", "--masters", masters, "--follow", &executor],
    );
    let status = follow.wait_exit(BOUND);
    assert!(status.success(), "regent logs --follow exits 0: {}", follow.stderr());
    let expected: String = (100..140).map(|i| format!("tick-{i}-{line}\n")).collect();
    assert_eq!(follow.stdout(), expected, "every line once, in order, across the rotations");
    assert!(c
        .work_dir("w1")
        .join("executors")
        .read_dir()
        .unwrap()
        .flatten()
        .any(|e| e.path().join("stdout.4").exists()));
}

#[test]
fn rotation_goes_on_while_the_worker_is_killed_and_restarted() {
    let mut r = Rotating::start("logs-rotate-restart", "400", "5");
    // 40 lines of 50 bytes, one every 150 ms: 2,000 bytes in five 400-byte
    // files, rotated by the shim, which outlives its worker.
    let line = "0123456789012345678901234567890123456789";
    let script = format!("for i in $(seq 100 139); do echo tick-$i-{line}; sleep 0.15; done");
    let opts = ["--name", "ticker", "--executors", "1", "--cores", "1", "--memory", "64"];
    let mut submit = r.cluster.submit(
        "ticker",
        std::slice::from_ref(&r.masters),
        &[&opts[..], &["--secret-file", &r.secret]].concat(),
        &["sh", "-c", &script],
    );
    let executor = wait_for(BOUND, "the executor RUNNING", || {
        executor_of(&r.state()?, "ticker", &["RUNNING"])
    });
    let stdout = r.cluster.work_dir("w1").join("executors");
    wait_until(BOUND, "a first rotation", || {
        stdout
            .read_dir()
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join("stdout.1").exists())
    });
    r.restart_worker();
    assert!(submit.wait_exit(BOUND).success(), "the job completes: {}", submit.stderr());
    let (c, secret, masters) = (&r.cluster, &r.secret, &r.masters);
    let out = logs(c, secret, masters, &[&executor, "--tail-bytes", "2000"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected: String = (100..140).map(|i| format!("tick-{i}-{line}\n")).collect();
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "every line once, in order");
    assert!(stdout.read_dir().unwrap().flatten().any(|e| e.path().join("stdout.4").exists()));
}

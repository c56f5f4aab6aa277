//! A process fixture for the end-to-end suites: real `regent` processes on
//! loopback, free ports, one temp dir per cluster, bounded waits, and
//! cleanup of every process even when the test fails.
//!
//! * [`Cluster`] owns a temp dir. Every daemon it spawns runs with that dir
//!   as its working directory, in a process group of its own, with stdout
//!   and stderr captured to files there (`<name>.<n>.stderr`).
//! * [`Proc`] is one spawned process. Dropping it stops it: SIGTERM, up to
//!   5 s (workers: they kill their executors, which run in process groups of
//!   their own) or 2 s (others) to exit, then SIGKILL to its whole group.
//!   When the thread is panicking (a failed assertion) the tail of its
//!   stderr is printed, so the failure shows what the daemon saw.
//! * Dropping the [`Cluster`] (declare it before its processes, so it drops
//!   last) SIGKILLs whatever still runs with a working directory inside the
//!   temp dir: executors left behind by a worker killed with `kill -9`.
//!
//! Self-contained (no `super::`), so a benchmark can include it with
//! `#[path = "../tests/support/cluster.rs"] mod cluster;`.
#![allow(dead_code)]

use serde_json::Value;
use std::cell::Cell;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// The `regent` binary Cargo built for this test (or benchmark).
pub const BIN: &str = env!("CARGO_BIN_EXE_regent");

/// How often [`wait_for`] polls.
pub const POLL: Duration = Duration::from_millis(75);

/// Lines of stderr printed per process when a test fails.
const TAIL_LINES: usize = 60;

/// A free loopback port for a process to listen on later, taken *below*
/// the kernel's ephemeral range (32768 and up here): a port the kernel
/// handed out for `127.0.0.1:0` can be taken again by any outgoing
/// connection (a worker dialling, a master's ZooKeeper session) before the
/// process binds it, which once failed a master's start with "address in
/// use". Each process walks its own sequence (seeded by its pid), never
/// handing out a port twice.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const LOW: u32 = 10_000;
    const SPAN: u32 = 22_000; // up to 31999
    let start = std::process::id().wrapping_mul(7_919) % SPAN;
    for _ in 0..SPAN {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (LOW + (start + n * 7) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {LOW}..{}", LOW + SPAN)
}

/// `127.0.0.1:<port>`.
pub fn loopback(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// What a process is; decides how it is stopped on drop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `regent master`.
    Master,
    /// `regent worker` (its executors run in process groups of their own).
    Worker,
    /// `regent submit`.
    Submit,
    /// Anything else.
    Other,
}

/// One spawned `regent` process.
#[derive(Debug)]
pub struct Proc {
    /// A name for messages and log files.
    pub name: String,
    kind: Kind,
    child: Child,
    stderr: PathBuf,
    stdout: PathBuf,
    status: Option<ExitStatus>,
}

impl Proc {
    /// The process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process still runs (reaps it if it has exited).
    pub fn is_running(&mut self) -> bool {
        self.exit_status().is_none()
    }

    /// Panics (with the stderr tail) when the process has exited.
    pub fn assert_running(&mut self, context: &str) {
        if let Some(s) = self.exit_status() {
            panic!(
                "{} exited ({s}) {context}; stderr tail:\n{}",
                self.name,
                tail(&self.stderr(), TAIL_LINES)
            );
        }
    }

    /// The exit status, if it has exited.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.status = Some(s);
            }
        }
        self.status
    }

    /// Waits (at most `bound`) for the process to exit; panics, with its
    /// output, when it does not.
    pub fn wait_exit(&mut self, bound: Duration) -> ExitStatus {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(s) = self.exit_status() {
                return s;
            }
            if Instant::now() > deadline {
                panic!(
                    "{} did not exit within {bound:?}\n--- stdout ---\n{}\n--- stderr (tail) ---\n{}",
                    self.name,
                    self.stdout(),
                    tail(&self.stderr(), TAIL_LINES)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Everything the process wrote to stdout so far.
    pub fn stdout(&self) -> String {
        fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// The path of the stderr capture.
    pub fn stderr_path(&self) -> &Path {
        &self.stderr
    }

    /// `kill -9` of this process (not its group), then reaps it.
    pub fn kill9(&mut self) {
        if self.exit_status().is_none() {
            let _ = self.child.kill();
            if let Ok(s) = self.child.wait() {
                self.status = Some(s);
            }
        }
    }

    /// Sends SIGTERM (the process then shuts down by itself).
    pub fn sigterm(&mut self) {
        if self.exit_status().is_none() {
            signal(&self.pid().to_string(), "TERM");
        }
    }

    /// SIGTERM, `grace` to exit, then SIGKILL to the whole process group.
    /// Nothing is signalled once the process has been reaped (its pid may
    /// belong to someone else by then).
    pub fn stop(&mut self, grace: Duration) {
        if self.exit_status().is_some() {
            return;
        }
        self.sigterm();
        let deadline = Instant::now() + grace;
        while self.exit_status().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.exit_status().is_none() {
            // The group may hold more than the leader (never executors:
            // those run in groups of their own).
            signal(&format!("-{}", self.pid()), "KILL");
            self.kill9();
        }
    }
}

/// `kill -<sig> -- <target>` (a pid, or `-pgid` for a group).
fn signal(target: &str, sig: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{sig}"), "--", target])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// `kill -9` of a process (the function the suites name).
pub fn kill9(p: &mut Proc) {
    p.kill9();
}

impl Drop for Proc {
    fn drop(&mut self) {
        let grace = match self.kind {
            Kind::Worker => Duration::from_secs(5),
            _ => Duration::from_secs(2),
        };
        self.stop(grace);
        if std::thread::panicking() {
            eprintln!(
                "===== {} (pid {}, {:?}) stderr tail: {} =====\n{}",
                self.name,
                self.pid(),
                self.status,
                self.stderr.display(),
                tail(&self.stderr(), TAIL_LINES)
            );
            let out = self.stdout();
            if !out.is_empty() {
                eprintln!("===== {} stdout =====\n{}", self.name, tail(&out, TAIL_LINES));
            }
        }
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A master's id, ports and extra arguments, kept so it can be restarted
/// on the same ports.
#[derive(Clone, Debug)]
pub struct MasterSpec {
    /// `--id`.
    pub id: String,
    /// The `--listen` port.
    pub port: u16,
    /// The `--http` port.
    pub http: u16,
    /// Arguments after `--http` (recovery mode, store, ZooKeeper...).
    pub args: Vec<String>,
}

impl MasterSpec {
    /// A master on two free loopback ports.
    pub fn new(id: &str, args: &[&str]) -> MasterSpec {
        MasterSpec {
            id: id.to_owned(),
            port: free_port(),
            http: free_port(),
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A ZooKeeper-mode master on two free loopback ports: `--recovery
    /// zookeeper --zk ZK --zk-root ROOT --zk-session-timeout SESSION_MS`.
    pub fn zookeeper(id: &str, zk: &str, root: &str, session_ms: u64) -> MasterSpec {
        let session = session_ms.to_string();
        let args = [
            "--recovery",
            "zookeeper",
            "--zk",
            zk,
            "--zk-root",
            root,
            "--zk-session-timeout",
            &session,
        ];
        MasterSpec::new(id, &args)
    }

    /// Where workers and subscribers dial.
    pub fn addr(&self) -> String {
        loopback(self.port)
    }

    /// Where `/api/state` is served.
    pub fn http_addr(&self) -> String {
        loopback(self.http)
    }
}

/// A temp dir and the processes started in it.
#[derive(Debug)]
pub struct Cluster {
    dir: tempfile::TempDir,
    spawned: Cell<usize>,
}

impl Cluster {
    /// A fresh temp dir named after the test.
    pub fn new(name: &str) -> Cluster {
        // REGENT_KEEP_E2E=1 keeps every test's directory (process logs,
        // stores, work dirs) for a post-mortem.
        let keep = std::env::var_os("REGENT_KEEP_E2E").is_some();
        let dir = tempfile::Builder::new()
            .prefix(&format!("regent-e2e-{name}-"))
            .disable_cleanup(keep)
            .tempdir()
            .expect("create the test's temp dir");
        if keep {
            eprintln!("keeping {}", dir.path().display());
        }

        Cluster { dir, spawned: Cell::new(0) }
    }

    /// The temp dir.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A path inside the temp dir.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// A `regent` command with the fixture's environment: the temp dir as
    /// working directory and `XDG_STATE_HOME` (where `regent submit` keeps
    /// its last instance id), no colours in logs, `RUST_LOG=info` unless
    /// the test runs with its own `RUST_LOG`.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_via(&[], args)
    }

    /// [`Cluster::command`] run through `wrapper` (`wrapper... regent
    /// ARGS`: a program that prepares the process and `exec`s the rest,
    /// keeping its pid).
    pub fn command_via(&self, wrapper: &[&str], args: &[&str]) -> Command {
        let mut cmd = match wrapper.split_first() {
            None => Command::new(BIN),
            Some((program, rest)) => {
                let mut cmd = Command::new(program);
                cmd.args(rest).arg(BIN);
                cmd
            }
        };
        cmd.args(args).current_dir(self.dir()).env("NO_COLOR", "1").stdin(Stdio::null());
        // `regent submit` keeps its last instance id here, not in $HOME.
        cmd.env("XDG_STATE_HOME", self.dir());
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        cmd
    }

    /// Spawns `regent ARGS` in a process group of its own, its output
    /// captured to files in the temp dir.
    pub fn spawn(&self, name: &str, kind: Kind, args: &[&str]) -> Proc {
        self.spawn_env(name, kind, args, &[])
    }

    /// [`Cluster::spawn`] with extra environment variables (e.g. a
    /// `RUST_LOG` of the test's own, over the fixture's).
    pub fn spawn_env(&self, name: &str, kind: Kind, args: &[&str], env: &[(&str, &str)]) -> Proc {
        self.spawn_via(name, kind, &[], args, env)
    }

    /// [`Cluster::spawn_env`] through `wrapper` ([`Cluster::command_via`]).
    pub fn spawn_via(
        &self,
        name: &str,
        kind: Kind,
        wrapper: &[&str],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Proc {
        let n = self.spawned.get();
        self.spawned.set(n + 1);
        if kind == Kind::Master {
            remember_bearer(args, env);
        }
        let stderr = self.path(&format!("{name}.{n}.stderr"));
        let stdout = self.path(&format!("{name}.{n}.stdout"));
        let mut cmd = self.command_via(wrapper, args);
        cmd.stdout(fs::File::create(&stdout).expect("create a stdout capture"))
            .stderr(fs::File::create(&stderr).expect("create a stderr capture"))
            .process_group(0);
        cmd.envs(env.iter().copied());
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
        Proc { name: name.to_owned(), kind, child, stderr, stdout, status: None }
    }

    /// Runs `regent ARGS` to completion (killed after `bound`).
    pub fn run(&self, args: &[&str], bound: Duration) -> Output {
        let mut p = self.spawn("cmd", Kind::Other, args);
        let status = p.wait_exit(bound);
        Output { status, stdout: p.stdout().into_bytes(), stderr: p.stderr().into_bytes() }
    }

    /// Starts a master from `spec`: `master --id --listen --http ARGS`.
    pub fn master(&self, spec: &MasterSpec) -> Proc {
        self.master_env(spec, &[])
    }

    /// [`Cluster::master`] with extra environment variables.
    pub fn master_env(&self, spec: &MasterSpec, env: &[(&str, &str)]) -> Proc {
        let (listen, http) = (spec.addr(), spec.http_addr());
        let mut args = vec!["master", "--id", &spec.id, "--listen", &listen, "--http", &http];
        args.extend(spec.args.iter().map(String::as_str));
        self.spawn_env(&spec.id, Kind::Master, &args, env)
    }

    /// The work dir of worker `id`.
    pub fn work_dir(&self, id: &str) -> PathBuf {
        self.path(&format!("work-{id}"))
    }

    /// Starts worker `id` (work dir `work-<id>` in the temp dir) with
    /// `extra` arguments appended.
    pub fn worker(
        &self,
        id: &str,
        masters: &[String],
        cores: u32,
        memory_mb: u64,
        extra: &[&str],
    ) -> Proc {
        self.worker_env(id, masters, cores, memory_mb, extra, &[])
    }

    /// [`Cluster::worker`] with extra environment variables (e.g. a faked
    /// clock: libfaketime's `LD_PRELOAD` and `FAKETIME`).
    pub fn worker_env(
        &self,
        id: &str,
        masters: &[String],
        cores: u32,
        memory_mb: u64,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Proc {
        self.worker_via(id, &[], masters, cores, memory_mb, extra, env)
    }

    /// [`Cluster::worker_env`] through `wrapper` ([`Cluster::command_via`]:
    /// e.g. one that moves it into a cgroup and drops to another user).
    #[allow(clippy::too_many_arguments)]
    pub fn worker_via(
        &self,
        id: &str,
        wrapper: &[&str],
        masters: &[String],
        cores: u32,
        memory_mb: u64,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Proc {
        let (masters, cores, memory) =
            (masters.join(","), cores.to_string(), memory_mb.to_string());
        let work = self.work_dir(id);
        let work = work.to_str().expect("a UTF-8 temp dir");
        let mut args = vec![
            "worker",
            "--masters",
            &masters,
            "--cores",
            &cores,
            "--memory",
            &memory,
            "--work-dir",
            work,
            "--id",
            id,
        ];
        args.extend_from_slice(extra);
        self.spawn_via(id, Kind::Worker, wrapper, &args, env)
    }

    /// Starts `regent submit --masters M --keep OPTS -- CMD`: the suites
    /// look at a done application's executors in the master's live state
    /// afterwards, so the framework is kept (to its failover timeout);
    /// [`Cluster::submit_ending`] runs the default, which ends it at once.
    pub fn submit(&self, name: &str, masters: &[String], opts: &[&str], cmd: &[&str]) -> Proc {
        self.submit_env(name, masters, opts, cmd, &[])
    }

    /// `regent submit --masters M OPTS -- CMD` without `--keep`: once done,
    /// the submission ends its framework (COMPLETED or FAILED in the
    /// history) before it exits.
    pub fn submit_ending(
        &self,
        name: &str,
        masters: &[String],
        opts: &[&str],
        cmd: &[&str],
    ) -> Proc {
        let masters = masters.join(",");
        let mut args = vec!["submit", "--masters", &masters];
        args.extend_from_slice(opts);
        args.push("--");
        args.extend_from_slice(cmd);
        self.spawn(name, Kind::Submit, &args)
    }

    /// [`Cluster::submit`] (with `--keep`) with extra environment variables.
    pub fn submit_env(
        &self,
        name: &str,
        masters: &[String],
        opts: &[&str],
        cmd: &[&str],
        env: &[(&str, &str)],
    ) -> Proc {
        let masters = masters.join(",");
        let mut args = vec!["submit", "--masters", &masters, "--keep"];
        args.extend_from_slice(opts);
        args.push("--");
        args.extend_from_slice(cmd);
        self.spawn_env(name, Kind::Submit, &args, env)
    }

    /// The leader's view through `regent status --json` (`None` when the
    /// command fails, e.g. no leader yet).
    pub fn status_json(&self, masters: &[String]) -> Option<Value> {
        let masters = masters.join(",");
        let out = self.run(&["status", "--masters", &masters, "--json"], Duration::from_secs(20));
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Executors left behind by a worker killed with kill -9 (their cwd
        // is in a work dir inside the temp dir).
        for _ in 0..3 {
            let left = processes_under(self.dir());
            if left.is_empty() {
                break;
            }
            for pid in &left {
                signal(&pid.to_string(), "KILL");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The cluster's full bearer token of every HTTP address a master with a
/// cluster secret was started on (with a secret, every HTTP request needs
/// a token, on loopback too: docs/design.md#issue-44). Addresses are
/// free ports, unique across the tests of a process.
static BEARERS: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// Notes the bearer token of a master started with `args` and `env`:
/// its `--http` address (or `REGENT_HTTP`) and the secret of
/// `--secret-file` (or `REGENT_SECRET_FILE`), when it has both.
fn remember_bearer(args: &[&str], env: &[(&str, &str)]) {
    let after = |flag: &str| args.windows(2).find(|w| w[0] == flag).map(|w| w[1].to_owned());
    let from_env = |key: &str| env.iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_string());
    let file = after("--secret-file").or_else(|| from_env("REGENT_SECRET_FILE"));
    let http = after("--http").or_else(|| from_env("REGENT_HTTP"));
    let (Some(http), Some(file)) = (http, file) else { return };
    let Ok(bytes) = fs::read(&file) else { return };
    let Ok(secret) = regent_core::secret::Secret::new(bytes.trim_ascii().to_vec()) else { return };
    let token = regent_smol::http::bearer_token(&secret);
    let mut all = BEARERS.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(a, _)| *a != http);
    all.push((http, token));
}

/// The full bearer token the master serving HTTP on `addr` requires, if it
/// was started with a cluster secret.
pub fn bearer_for(addr: &str) -> Option<String> {
    let all = BEARERS.lock().unwrap_or_else(|e| e.into_inner());
    all.iter().find(|(a, _)| a == addr).map(|(_, t)| t.clone())
}

/// The `Authorization` header line for `addr` (empty without a secret).
fn auth_line(addr: &str) -> String {
    bearer_for(addr).map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default()
}

/// `GET path` over a plain TcpStream: the status code and body. With the
/// full bearer token when the master on `addr` has a cluster secret
/// ([`bearer_for`]).
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    let auth = auth_line(addr);
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_owned()))
}

/// `POST path` with a JSON `body` over a plain TcpStream: the status code
/// and body (with the full bearer token as [`http_get`]).
pub fn http_post(addr: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(15))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    let auth = auth_line(addr);
    let len = body.len();
    write!(
        s,
        "POST {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\n\
         Content-Length: {len}\r\nConnection: close\r\n\r\n{body}"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_owned()))
}

/// A master's `/api/state` (`None` when it does not answer 200 with JSON).
pub fn api_state(http_addr: &str) -> Option<Value> {
    match http_get(http_addr, "/api/state")? {
        (200, body) => serde_json::from_str(&body).ok(),
        _ => None,
    }
}

/// `(id, state)` of every worker entry in a state document.
pub fn workers(state: &Value) -> Vec<(String, String)> {
    entries(state, "workers")
}

/// `(id, state)` of every executor entry in a state document.
pub fn executors(state: &Value) -> Vec<(String, String)> {
    entries(state, "executors")
}

fn entries(state: &Value, key: &str) -> Vec<(String, String)> {
    state[key]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        e["id"].as_str().unwrap_or("?").to_owned(),
                        e["state"].as_str().unwrap_or("?").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `Ok` when `state` is an ALIVE master listing exactly the workers `ids`,
/// each once and ALIVE; `Err` describes what it shows instead.
pub fn alive_with_workers(state: &Value, ids: &[&str]) -> Result<(), String> {
    let ws = workers(state);
    let mut seen: Vec<&str> = ws.iter().map(|(id, _)| id.as_str()).collect();
    seen.sort_unstable();
    let mut want = ids.to_vec();
    want.sort_unstable();
    let ok = state["status"] == "ALIVE" && seen == want && ws.iter().all(|(_, s)| s == "ALIVE");
    if ok {
        Ok(())
    } else {
        Err(format!("status {} workers {ws:?}", state["status"]))
    }
}

/// Among the masters of `specs` still `running`, the one ALIVE master, with
/// exactly the workers `ids` ALIVE there, each once: its index and view.
/// `Err` describes what the masters show instead (none or several ALIVE,
/// workers missing, duplicated or not ALIVE).
pub fn sole_alive(
    specs: &[MasterSpec],
    running: &[bool],
    ids: &[&str],
) -> Result<(usize, Value), String> {
    let mut seen = Vec::new();
    let mut leaders = Vec::new();
    for (i, spec) in specs.iter().enumerate().filter(|(i, _)| running[*i]) {
        match api_state(&spec.http_addr()) {
            Some(v) => {
                seen.push(format!("{}: {}", spec.id, v["status"]));
                if v["status"] == "ALIVE" {
                    leaders.push((i, v));
                }
            }
            None => seen.push(format!("{}: no answer", spec.id)),
        }
    }
    if leaders.len() != 1 {
        return Err(format!("{} ALIVE masters ({})", leaders.len(), seen.join(", ")));
    }
    let (i, v) = leaders.pop().expect("one leader");
    alive_with_workers(&v, ids).map_err(|e| format!("{}: {e}", specs[i].id))?;
    Ok((i, v))
}

/// Polls `f` every [`POLL`] until it returns `Ok` (returned) or `bound`
/// passes (panics naming `what` and the last `Err`, the last observation).
pub fn wait_for<T>(bound: Duration, what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + bound;
    loop {
        let last = match f() {
            Ok(t) => return t,
            Err(e) => e,
        };
        if Instant::now() > deadline {
            panic!("timed out after {bound:?} waiting for {what}; last observed: {last}");
        }
        std::thread::sleep(POLL);
    }
}

/// Polls `f` every [`POLL`] until it is true or `bound` passes (panics).
pub fn wait_until(bound: Duration, what: &str, mut f: impl FnMut() -> bool) {
    wait_for(bound, what, || if f() { Ok(()) } else { Err("false".to_owned()) })
}

/// The fields of `/proc/<pid>/stat` after the command name (`state` first).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Whether `pid` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s != "Z" && s != "X"))
}

fn all_pids() -> Vec<u32> {
    fs::read_dir("/proc")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// Live (non-zombie) processes whose command line contains `marker`,
/// other than `regent` processes (a `regent submit` names the command its
/// executors run) — except executor shims (`regent executor-shim ... --
/// CMD`), which lead the executors' process groups.
pub fn pids_with_marker(marker: &str) -> Vec<u32> {
    let me = std::process::id();
    all_pids()
        .into_iter()
        .filter(|&pid| pid != me && pid_alive(pid))
        .filter(|pid| {
            let Ok(raw) = fs::read(format!("/proc/{pid}/cmdline")) else { return false };
            let text = String::from_utf8_lossy(&raw);
            let mut argv = text.split('\0');
            let (argv0, argv1) = (argv.next().unwrap_or(""), argv.next().unwrap_or(""));
            (argv0 != BIN || argv1 == "executor-shim") && text.contains(marker)
        })
        .collect()
}

/// [`pids_with_marker`] restricted to process group leaders: the executor
/// processes themselves (a shell's child between `fork` and `exec` still
/// shows the shell's command line, but not its pid as group id).
pub fn leaders_with_marker(marker: &str) -> Vec<u32> {
    pids_with_marker(marker)
        .into_iter()
        .filter(|&pid| stat_fields(pid).and_then(|f| f.get(2)?.parse::<u32>().ok()) == Some(pid))
        .collect()
}

/// Live (non-zombie) members of process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&pid| {
            stat_fields(pid)
                .is_some_and(|f| f[0] != "Z" && f.get(2).and_then(|g| g.parse().ok()) == Some(pgid))
        })
        .collect()
}

/// Live processes (other than this one) whose working directory is inside
/// `dir`.
pub fn processes_under(dir: &Path) -> Vec<u32> {
    let me = std::process::id();
    all_pids()
        .into_iter()
        .filter(|&pid| pid != me && pid_alive(pid))
        .filter(|pid| {
            fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
        })
        .collect()
}

/// The process group ids recorded in a worker's work dir
/// (`running/*.rec`, `pgid=` lines).
pub fn recorded_pgids(work_dir: &Path) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(d) = fs::read_dir(work_dir.join("running")) {
        for e in d.flatten() {
            if let Ok(text) = fs::read_to_string(e.path()) {
                out.extend(
                    text.lines().filter_map(|l| l.strip_prefix("pgid=")?.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

/// A name unique to this test process, for marker arguments.
pub fn unique(name: &str) -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!(
        "regent-e2e-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// `GET path` over HTTPS (a master with `--tls-cert`), trusting the CA of
/// `ca_pem` for `addr`'s IP: the status code and body, or why not.
pub fn https_get(addr: &str, path: &str, ca_pem: &str) -> Result<(u16, String), String> {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let sa: std::net::SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    let name = rustls::pki_types::ServerName::from(sa.ip());
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name)
        .map_err(|e| e.to_string())?;
    let s = TcpStream::connect_timeout(&sa, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, s);
    let auth = auth_line(addr);
    write!(tls, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    match tls.read_to_end(&mut raw) {
        Ok(_) => {}
        // A close without close_notify after the whole answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP answer")?;
    let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).ok_or("no status")?;
    Ok((code, body.to_owned()))
}

//! Health checks as I/O (docs/design.md#issue-45): the probes the worker
//! machine asks for ([`regent_core::health::CheckRun`]) carried out on a
//! bounded pool of threads, so the worker's pump never blocks on one. The
//! machine decides what to probe and when, and counts the outcomes; this
//! module only runs them.
//!
//! * **http**: `GET path` at `host:port` (`ureq`), within the run's
//!   timeout, no redirects followed, no proxy; passes when the status is in
//!   the expected range. Detail: `GET /health answered 500`, or the error.
//! * **tcp**: a connection within the timeout.
//! * **exec**: the command run as its executor runs, from the executor's
//!   [`ExecContext`] (kept by the supervisor per executor, in memory and in
//!   its durable record, so a re-adopted executor is checked the same way):
//!   * as the executor's user (its group's `user`, else the worker's
//!     `--executor-user`, else the worker's own): uid, gid and, through the
//!     shim's `executor-exec` as at launch, its supplementary groups
//!     (without a shim, std sets the uid and gid and clears the groups, as
//!     a launch without a shim does);
//!   * in the executor's working directory (its group's `cwd` inside the
//!     executor's directory, else that directory);
//!   * with exactly the executor's environment and nothing else (the
//!     worker's environment at the executor's launch with the group's
//!     `env`, the port and resource variables, `REGENT_FRAMEWORK_ID`,
//!     `REGENT_EXECUTOR_ID`, `REGENT_CORES`, `REGENT_MEMORY_MB` and, for
//!     another user, `USER`, `LOGNAME` and `HOME` over it): the
//!     environment is cleared first, so a variable the worker gained since
//!     (or after a restart) is not seen; a worker variable whose name or
//!     value is not UTF-8 is left out;
//!   * in its own process group, moved into the executor's cgroups once
//!     started; killed with SIGKILL (the whole group) at the timeout.
//!
//!   Exit 0 passes. Detail: the first bytes of its output. An executor
//!   adopted from a record written before the context was kept is checked
//!   as before: in its executor's directory, as the worker's executor user,
//!   with the worker's environment.
//!
//! At most [`CHECK_THREADS`] run at once and [`CHECK_QUEUE`] wait; a run
//! that does not fit is answered `Skipped` at once, which the machine
//! counts as nothing: an overloaded worker never restarts a service.

use super::user::{Identity, RunAs, EXEC_SUBCOMMAND};
use regent_core::health::{CheckOutcome, CheckRun, Probe};
use std::io::Read as _;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Threads that run checks at once, per worker.
pub const CHECK_THREADS: usize = 4;
/// Runs that may wait for a thread; one more is skipped.
pub const CHECK_QUEUE: usize = 256;

/// What an executor was started with, for its exec checks to run exactly
/// as it does (see the module documentation): kept by the supervisor per
/// executor and in its durable record (`sandbox=`, one line of JSON:
/// [`super::record`]). The record file holds the environment, secrets
/// included: it is the worker's, mode 0600, in a 0700 directory.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExecContext {
    /// The user it runs as; `None`: the worker's own.
    pub user: Option<RunAs>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its whole environment, sorted by name.
    pub env: Vec<(String, String)>,
}

/// Where an exec check runs: its directory, the executor's cgroups, the
/// user and the environment.
#[derive(Clone, Debug, Default)]
pub struct Sandbox {
    /// The directory it starts in (when it is one).
    pub dir: PathBuf,
    /// The executor's cgroup directories (its `cgroup.procs` take the
    /// command's pid); empty without cgroups.
    pub cgroups: Vec<PathBuf>,
    /// The identity to run as; `None`: the worker's own.
    pub user: Option<Identity>,
    /// The whole environment, in place of the worker's (cleared first);
    /// `None`: the worker's own.
    pub env: Option<Vec<(String, String)>>,
    /// The program that becomes [`Sandbox::user`] (supplementary groups,
    /// gid, uid) and execs the command: `PROGRAM executor-exec`, the
    /// executor shim ([`super::user::exec_as`]). `None`: std sets the uid
    /// and gid and clears the supplementary groups.
    pub exec_as: Option<PathBuf>,
}

/// One run waiting for a thread, with where its outcome goes.
struct Job {
    run: CheckRun,
    sandbox: Sandbox,
    done: Box<dyn FnOnce(CheckRun, CheckOutcome) + Send>,
}

/// A bounded pool of check threads (see the module documentation).
pub struct CheckPool {
    queue: SyncSender<Job>,
}

impl std::fmt::Debug for CheckPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckPool").finish_non_exhaustive()
    }
}

impl CheckPool {
    /// [`CHECK_THREADS`] threads waiting for runs; they end when the pool
    /// is dropped (after the runs in hand).
    pub fn new() -> CheckPool {
        let (queue, jobs) = sync_channel::<Job>(CHECK_QUEUE);
        let jobs = Arc::new(Mutex::new(jobs));
        for i in 0..CHECK_THREADS {
            let jobs = jobs.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("regent-check-{i}"))
                .spawn(move || work(&jobs));
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start a health check thread");
            }
        }
        CheckPool { queue }
    }

    /// Runs `run` on a pool thread and gives `done` its outcome; if the
    /// queue is full, `done` gets `Skipped` at once, on this thread.
    pub fn submit(
        &self,
        run: CheckRun,
        sandbox: Sandbox,
        done: impl FnOnce(CheckRun, CheckOutcome) + Send + 'static,
    ) {
        let job = Job { run, sandbox, done: Box::new(done) };
        match self.queue.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                (job.done)(job.run, CheckOutcome::Skipped("check queue full".into()))
            }
        }
    }
}

impl Default for CheckPool {
    fn default() -> Self {
        CheckPool::new()
    }
}

fn work(jobs: &Mutex<Receiver<Job>>) {
    loop {
        let job = {
            let rx = jobs.lock().unwrap_or_else(|e| e.into_inner());
            rx.recv()
        };
        let Ok(Job { run, sandbox, done }) = job else { return };
        let outcome = run_probe(&run.probe, Duration::from_millis(run.timeout.0), &sandbox);
        done(run, outcome);
    }
}

/// Carries out one probe within `timeout` (an exec one in `sandbox`).
pub fn run_probe(probe: &Probe, timeout: Duration, sandbox: &Sandbox) -> CheckOutcome {
    match probe {
        Probe::Http { host, port, path, expect } => http(host, *port, path, *expect, timeout),
        Probe::Tcp { host, port } => tcp(host, *port, timeout),
        Probe::Exec { command } => exec(command, timeout, sandbox),
    }
}

fn http(host: &str, port: u16, path: &str, expect: (u16, u16), timeout: Duration) -> CheckOutcome {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .proxy(None)
        .build()
        .into();
    let host = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
    match agent.get(format!("http://{host}:{port}{path}")).call() {
        Ok(answer) => {
            let status = answer.status().as_u16();
            if (expect.0..=expect.1).contains(&status) {
                CheckOutcome::Passed
            } else {
                CheckOutcome::Failed(format!("GET {path} answered {status}"))
            }
        }
        Err(ureq::Error::Timeout(_)) => {
            CheckOutcome::Failed(format!("GET {path}: no answer within {} ms", timeout.as_millis()))
        }
        Err(e) => CheckOutcome::Failed(format!("GET {path}: {e}")),
    }
}

fn tcp(host: &str, port: u16, timeout: Duration) -> CheckOutcome {
    let addrs = match (host, port).to_socket_addrs() {
        Ok(addrs) => addrs.collect::<Vec<_>>(),
        Err(e) => return CheckOutcome::Failed(format!("cannot resolve {host}: {e}")),
    };
    let mut last = format!("{host} has no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(_) => return CheckOutcome::Passed,
            Err(e) => last = format!("connect to {a}: {e}"),
        }
    }
    CheckOutcome::Failed(last)
}

fn exec(command: &[String], timeout: Duration, sandbox: &Sandbox) -> CheckOutcome {
    let Some((program, args)) = command.split_first() else {
        return CheckOutcome::Failed("no command".into());
    };
    let mut cmd = match (&sandbox.user, &sandbox.exec_as) {
        (Some(identity), Some(via)) => {
            // As the executor's own command is started: the supplementary
            // groups too (std cannot set them without unsafe code).
            let mut cmd = Command::new(via);
            cmd.arg(EXEC_SUBCOMMAND).arg(identity.to_string()).arg("--").arg(program).args(args);
            cmd
        }
        (user, _) => {
            let mut cmd = Command::new(program);
            cmd.args(args);
            if let Some(identity) = user {
                cmd.uid(identity.uid).gid(identity.gid);
            }
            cmd
        }
    };
    if let Some(env) = &sandbox.env {
        cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    if sandbox.dir.is_dir() {
        cmd.current_dir(&sandbox.dir);
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            let through = match (&sandbox.user, &sandbox.exec_as) {
                (Some(_), Some(via)) => format!(" through {}", via.display()),
                _ => String::new(),
            };
            return CheckOutcome::Failed(format!("cannot start {program:?}{through}: {e}"));
        }
    };
    for dir in &sandbox.cgroups {
        // Best effort: the executor's cgroup may be gone with it.
        let _ = std::fs::write(dir.join("cgroup.procs"), child.id().to_string());
    }
    let output = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut first = Vec::new();
            if let Some(mut pipe) = pipe {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let room = regent_core::launch::check::MAX_CHECK_DETAIL_BYTES
                        .saturating_sub(first.len());
                    first.extend_from_slice(&buf[..n.min(room)]);
                }
            }
            first
        })
    };
    let out = output(child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let err = output(child.stderr.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => break None,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return CheckOutcome::Failed(format!("cannot wait for {program:?}: {e}")),
        }
    };
    if status.is_none() {
        if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = child.wait();
    }
    let mut said = out.join().unwrap_or_default();
    said.extend(err.join().unwrap_or_default());
    let said = String::from_utf8_lossy(&said).trim().to_string();
    let said = regent_core::launch::check::cut_detail(&said);
    match status {
        None => CheckOutcome::Failed(format!("{program} ran past {} ms", timeout.as_millis())),
        Some(s) if s.success() => CheckOutcome::Passed,
        Some(s) => {
            let code = s.code().map_or_else(|| "a signal".to_string(), |c| c.to_string());
            let said = if said.is_empty() { String::new() } else { format!(": {said}") };
            CheckOutcome::Failed(format!("{program} exited {code}{said}"))
        }
    }
}

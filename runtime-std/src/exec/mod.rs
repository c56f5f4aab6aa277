//! Executor process supervision, shared by every worker runtime.
//!
//! A [`Supervisor`] runs each executor as a child process in its own process
//! group, captures its output to files, waits for it on a thread of its own
//! and reports every state change as an [`ExecEvent`] through a callback the
//! runtime supplies (a channel sender, a waker...), so nothing here depends
//! on an async runtime or on the network: executors keep running while the
//! worker has no master.
//!
//! # Work directory
//!
//! ```text
//! <work_dir>/supervisor.lock          flock held for the supervisor's life
//! <work_dir>/running/<id>.rec         one durable record per live process group
//! <work_dir>/executors/<id>/stdout    the executor's output (appended)
//! <work_dir>/executors/<id>/stderr
//! <work_dir>/executors/<id>/exit-status   how it ended, written by its shim
//! ```
//!
//! # The shim
//!
//! With [`SupervisorConfig::shim`] set (the daemons set it to their own
//! binary), every executor runs under a [`shim`] process: the shim is the
//! recorded group leader (its pid is the executor's pid and pgid), starts the
//! command as its child in the same group, records how it ended in
//! `exit-status` and exits with the same code. The supervisor waits for the
//! shim's handshake before `launch` returns, so a command that cannot be
//! started is still reported `Failed` with the OS error, synchronously.
//! Without a shim the command itself leads the group (an adopted executor's
//! end is then `Lost`).
//!
//! Ids are escaped for file names (see [`names`]). The record of a process
//! group is written (temp file, fsync, rename, fsync of the directory) before
//! [`Supervisor::launch`] returns and removed when the executor ends. The
//! record names the process group, the start time of its leader and the
//! boot it was started in (`/proc/sys/kernel/random/boot_id`).
//!
//! # A new supervisor over the same directory (worker upgrade)
//!
//! A worker restarted over the same work directory (after an upgrade, a
//! crash or `kill -9`) finds the records of the groups its previous process
//! left and [`classify`]es each. A group is **its own** only when the record
//! names this boot, its leader still runs with the recorded start time, and
//! the leader still leads the group: a pid after a reboot or a recycled pid
//! is never taken for an executor. Then, by [`LeftBehindPolicy`]:
//!
//! * `Adopt` (the default): the group is supervised again. The supervisor is
//!   not the process's parent and cannot `wait` for it: a thread polls
//!   `/proc/<pgid>/stat` every [`SupervisorConfig::adopt_poll`] and reports
//!   its end as its shim recorded it (`Exited` with its code, `Failed`), or
//!   `Killed` when it was killed. Only without a status file (started
//!   without a shim, or the whole group was killed with SIGKILL by someone
//!   else) is it reported [`ExecutorState::Lost`].
//! * `Kill` (`regent worker --kill-left-behind`): the group is killed with
//!   SIGKILL and reported `Killed`.
//!
//! A record whose group has ended (or ran in another boot) is reported as
//! its shim recorded it (`Finished`: `Exited` with its code), or, without a
//! status file, ended (`Lost`). A group that still runs but cannot be
//! proven its own (a record without boot id or start time, a leader that
//! left its group, a group whose leader is gone) is **left alone** — never signalled, never adopted
//! — and reported `Lost` with a warning naming the executor, the pid and the
//! reason. Every record of a group not adopted is removed.
//!
//! # Lifecycle and events
//!
//! * `launch` → [`ExecutorState::Running`] once the child runs and its group
//!   is recorded, or [`ExecutorState::Failed`] naming the OS error.
//! * The child exits by itself → [`ExecutorState::Exited`] with its code
//!   (`128 + signal` when a signal ended it), as its shim recorded it
//!   (`Failed` if the shim could not start it after all).
//! * [`Supervisor::kill`] → SIGTERM to the group, SIGKILL after the grace
//!   period, then [`ExecutorState::Killed`].
//!
//! Events of one executor arrive in that order, from the launching thread
//! (`Running`, `Failed`) or the executor's waiter thread (terminal states).
//! When the group leader exits, whatever else still runs in its group is
//! killed (an executor's helpers do not outlive it); processes that leave
//! the group (`setsid`) escape, as without cgroups nothing holds them.
//!
//! No signal is ever sent to a group after its leader was reaped: the waiter
//! observes the exit with `waitid(WNOWAIT)` (the zombie keeps the pid), marks
//! the executor exited under the lock every signaller takes, and only then
//! reaps it.
//!
//! An adopted group is signalled only if its leader was seen just before
//! with its recorded start time, still leading its group. It is not this
//! process's child, so nothing pins its pid between that check and the
//! signal: that window stays open, but a pid is reused only after the
//! kernel's pid space has wrapped around.
//!
//! One window is not covered: a worker killed between the `fork` of a child
//! and the fsync of its record leaves a group no record names (the record
//! cannot name a pid before the child exists). A temporary record file that
//! was written completely but not renamed is still picked up.
//!
//! Dropping a `Supervisor` does not kill anything: executors keep running
//! and their waiter threads keep reporting. Call [`Supervisor::kill_all`] to
//! stop them on shutdown (adopted ones too).

pub mod logs;
pub mod names;
pub mod record;
pub mod shim;

use record::Record;
use regent_core::protocol::{ExecutorSpec, ExecutorState};
use regent_core::{ExecutorId, FrameworkId};
use rustix::fs::{flock, FlockOperation};
use rustix::process::{
    kill_process_group, test_kill_process_group, waitid, Pid, Signal, WaitId, WaitIdOptions,
};
use shim::{ShimArgs, ShimStatus};
use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead as _, Write as _};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The name of the lock file in the work directory.
pub const LOCK_FILE: &str = "supervisor.lock";
/// How long [`Supervisor::new`] retries a lock that is held.
const LOCK_RETRY: Duration = Duration::from_millis(500);
/// The directory of durable process-group records.
pub const RUNNING_DIR: &str = "running";
/// The directory of per-executor directories (working directory and logs).
pub const EXECUTORS_DIR: &str = "executors";

/// Settings of a [`Supervisor`].
#[derive(Clone, Debug)]
pub struct SupervisorConfig {
    /// The worker's work directory (created if missing).
    pub work_dir: PathBuf,
    /// How long [`Supervisor::kill`] waits after SIGTERM before SIGKILL.
    pub kill_grace: Duration,
    /// How long a new supervisor waits for left-behind groups it killed to
    /// disappear, and [`Supervisor::kill_all`] waits after SIGKILL.
    pub reap_timeout: Duration,
    /// What a new supervisor does with the groups a previous one left that
    /// are proven its own.
    pub left_behind: LeftBehindPolicy,
    /// How often the end of an adopted executor is looked for (it is not
    /// this process's child, so it cannot be waited for).
    pub adopt_poll: Duration,
    /// The program that runs every executor under the [`shim`] (the
    /// `regent` binary: `PROGRAM executor-shim ...`), so that how it ended
    /// is known even after a new worker process re-adopted it. `None`
    /// starts the command directly: an adopted executor's end is then
    /// reported `Lost`.
    pub shim: Option<PathBuf>,
}

impl SupervisorConfig {
    /// Defaults: 3 s grace, 5 s reap timeout, adopt what a previous
    /// supervisor left, polled every 100 ms, no shim (the daemons set
    /// [`SupervisorConfig::shim`] to their own binary).
    pub fn new(work_dir: impl Into<PathBuf>) -> Self {
        SupervisorConfig {
            work_dir: work_dir.into(),
            kill_grace: Duration::from_secs(3),
            reap_timeout: Duration::from_secs(5),
            left_behind: LeftBehindPolicy::Adopt,
            adopt_poll: Duration::from_millis(100),
            shim: None,
        }
    }
}

/// What a new supervisor does with a process group a previous supervisor
/// over the same work directory left running, once [`classify`] proved it
/// its own. (What cannot be proven is always left alone.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LeftBehindPolicy {
    /// Supervise it again (a worker upgrade keeps its executors).
    #[default]
    Adopt,
    /// Kill it with SIGKILL (`regent worker --kill-left-behind`).
    Kill,
}

/// A state change of one executor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecEvent {
    /// The executor.
    pub executor: ExecutorId,
    /// Its framework.
    pub framework: FrameworkId,
    /// The new state: `Running`, or a terminal `Exited`, `Failed`, `Killed`.
    pub state: ExecutorState,
}

/// What [`Supervisor::launch`] did (the same outcome is also delivered as an
/// [`ExecEvent`], except for `AlreadyRunning`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launched {
    /// The child runs and its process group is recorded.
    Started {
        /// Its pid, which is also its process group id.
        pid: u32,
    },
    /// An executor with this id runs already (a repeated launch is
    /// harmless); nothing was started and no event is sent.
    AlreadyRunning,
    /// Nothing runs.
    Failed {
        /// What went wrong, naming the OS error.
        reason: String,
    },
}

/// A process group a previous supervisor over the same work directory left
/// behind (its worker crashed, was killed or upgraded without `kill_all`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftBehind {
    /// The executor.
    pub executor: ExecutorId,
    /// Its framework.
    pub framework: FrameworkId,
    /// The recorded process group id.
    pub pgid: i32,
    /// Cores it holds, as recorded (0 in an old record).
    pub cores: u32,
    /// Memory it holds in MiB, as recorded (0 in an old record).
    pub memory_mb: u64,
    /// What the new supervisor found and did.
    pub outcome: LeftBehindOutcome,
}

/// What became of a left-behind process group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeftBehindOutcome {
    /// Proven this worker's and still running: supervised again (its end
    /// comes as an [`ExecEvent`]).
    Adopted,
    /// Proven this worker's: killed with SIGKILL ([`LeftBehindPolicy::Kill`]).
    Killed,
    /// Nothing of it runs any more, and its shim recorded how it ended
    /// (it ended while no worker process watched it).
    Finished {
        /// How it ended, as its shim recorded it (see [`shim_state`]).
        state: ExecutorState,
    },
    /// Nothing of it runs any more (or it ran in another boot); anything now
    /// using its pid was left alone. Its exit status is unknown (no status
    /// file: started without a shim, or killed with its shim).
    Ended {
        /// Why it counts as ended.
        why: String,
    },
    /// Something still runs under its process group that cannot be proven
    /// to be this worker's executor: left alone, neither signalled nor
    /// adopted.
    Unprovable {
        /// Why it cannot be proven.
        why: String,
    },
}

impl LeftBehind {
    /// The state to report to the master for it: `Running` when adopted,
    /// `Killed` when killed, the recorded end when finished, `Lost`
    /// otherwise (its exit status is unknown, and an unprovable process is
    /// not this worker's to supervise).
    pub fn state(&self) -> ExecutorState {
        match &self.outcome {
            LeftBehindOutcome::Adopted => ExecutorState::Running,
            LeftBehindOutcome::Killed => ExecutorState::Killed,
            LeftBehindOutcome::Finished { state } => state.clone(),
            LeftBehindOutcome::Ended { .. } | LeftBehindOutcome::Unprovable { .. } => {
                ExecutorState::Lost
            }
        }
    }
}

/// What [`classify`] makes of a record left by a previous supervisor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// The group is this worker's: same boot, its leader runs (or is an
    /// unreaped zombie) with the recorded start time and leads its group.
    Proven {
        /// The process group.
        pgid: Pid,
        /// Its leader's start time.
        start_time: u64,
    },
    /// Nothing of it runs in this boot.
    Ended {
        /// Why.
        why: String,
    },
    /// Something runs under its pid or group that cannot be proven to be
    /// this worker's executor.
    Unprovable {
        /// Why.
        why: String,
    },
}

/// An executor that runs now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningExecutor {
    /// The executor.
    pub executor: ExecutorId,
    /// Its framework.
    pub framework: FrameworkId,
    /// Its pid (= process group id).
    pub pid: u32,
}

/// Why a [`Supervisor`] could not be created.
#[derive(Debug)]
pub enum SupervisorError {
    /// Another supervisor (another worker process) uses the work directory.
    Locked {
        /// The lock file.
        path: PathBuf,
        /// What the holder wrote into it.
        holder: String,
    },
    /// A file-system operation failed.
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

impl fmt::Display for SupervisorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SupervisorError::Locked { path, holder } => {
                write!(f, "work directory is in use: {} is locked by {holder}", path.display())
            }
            SupervisorError::Io { what, path, source } => {
                write!(f, "cannot {what} {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for SupervisorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SupervisorError::Io { source, .. } => Some(source),
            SupervisorError::Locked { .. } => None,
        }
    }
}

type Sink = Box<dyn Fn(ExecEvent) + Send + Sync>;

/// Supervises the executor processes of one worker. Cheap to share behind an
/// `Arc`; every method takes `&self`.
pub struct Supervisor {
    shared: Arc<Shared>,
    _lock: File,
}

impl fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Supervisor")
            .field("work_dir", &self.shared.config.work_dir)
            .field("running", &self.running().len())
            .finish()
    }
}

struct Shared {
    config: SupervisorConfig,
    running_dir: PathBuf,
    /// This boot's id, recorded with every group.
    boot_id: Option<String>,
    sink: Sink,
    executors: Mutex<HashMap<ExecutorId, Arc<Entry>>>,
}

struct Entry {
    framework: FrameworkId,
    pgid: Pid,
    /// Adopted (not this process's child): the leader's start time, checked
    /// before every signal.
    adopted_start: Option<u64>,
    state: Mutex<EntryState>,
    changed: Condvar,
}

impl Entry {
    /// Whether the group may be signalled (under the state lock, with the
    /// leader not seen exited): always for a child of ours (its zombie holds
    /// the pid until the waiter reaps it, after marking it exited); for an
    /// adopted group, only while its leader still runs with the recorded
    /// start time at the head of its group.
    fn may_signal(&self) -> bool {
        match self.adopted_start {
            None => true,
            Some(start) => record::proc_stat(self.pgid.as_raw_nonzero().get()).is_some_and(|st| {
                st.start_time == start && st.pgid == self.pgid.as_raw_nonzero().get()
            }),
        }
    }
}

#[derive(Default)]
struct EntryState {
    /// A kill was requested: the terminal state is `Killed`.
    kill_requested: bool,
    /// The leader exited (it may not be reaped yet); no signal may be sent.
    exited: bool,
    /// The terminal event was delivered and the entry forgotten.
    finished: bool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks cannot leave the data
    // inconsistent (flags and a map updated in single steps), so poisoning
    // is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Supervisor {
    /// A supervisor over `work_dir` with default settings, and the groups a
    /// previous supervisor left behind there (adopted, or found ended, or
    /// left alone: see the module docs). `sink`
    /// receives every [`ExecEvent`], from several threads; it must not block
    /// for long.
    pub fn new(
        work_dir: impl Into<PathBuf>,
        sink: impl Fn(ExecEvent) + Send + Sync + 'static,
    ) -> Result<(Supervisor, Vec<LeftBehind>), SupervisorError> {
        Self::with_config(SupervisorConfig::new(work_dir), sink)
    }

    /// [`Supervisor::new`] with explicit settings.
    pub fn with_config(
        config: SupervisorConfig,
        sink: impl Fn(ExecEvent) + Send + Sync + 'static,
    ) -> Result<(Supervisor, Vec<LeftBehind>), SupervisorError> {
        let io_err = |what, path: &Path| {
            let path = path.to_owned();
            move |source| SupervisorError::Io { what, path, source }
        };
        let work = &config.work_dir;
        let running_dir = work.join(RUNNING_DIR);
        for dir in [work.clone(), running_dir.clone(), work.join(EXECUTORS_DIR)] {
            fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
        }
        let lock_file = take_lock(&work.join(LOCK_FILE))?;
        let boot_id = record::boot_id();
        if boot_id.is_none() {
            tracing::warn!(
                path = record::BOOT_ID_PATH,
                "cannot read this boot's id: executors left by a previous worker process cannot be \
                 proven this worker's and will be left alone"
            );
        }
        let shared = Arc::new(Shared {
            config,
            running_dir: running_dir.clone(),
            boot_id,
            sink: Box::new(sink),
            executors: Mutex::new(HashMap::new()),
        });
        let left = reclaim(&shared).map_err(io_err("reclaim records in", &running_dir))?;
        Ok((Supervisor { shared, _lock: lock_file }, left))
    }

    /// The directory an executor runs in and writes `stdout` and `stderr`
    /// to.
    pub fn executor_dir(&self, executor: &ExecutorId) -> PathBuf {
        logs::executor_dir(&self.shared.config.work_dir, executor)
    }

    /// Reads a chunk of an executor's `stdout` or `stderr` in this
    /// supervisor's work directory, for the leader (see [`logs::read_log`]:
    /// no path escape, no symbolic link followed). Works for executors that
    /// ended, and for those of earlier worker processes, as long as their
    /// files are there.
    pub fn read_log(
        &self,
        executor: &ExecutorId,
        stream: regent_core::protocol::LogStream,
        offset: Option<u64>,
        max: u32,
    ) -> regent_core::protocol::LogRead {
        logs::read_log(&self.shared.config.work_dir, executor, stream, offset, max)
    }

    /// Starts an executor in its own process group, with its output captured
    /// to files in [`Supervisor::executor_dir`] and the environment variables
    /// `REGENT_FRAMEWORK_ID`, `REGENT_EXECUTOR_ID`, `REGENT_CORES` and
    /// `REGENT_MEMORY_MB` set (they override the spec's own `env`). Records the
    /// group durably before it returns, then reports `Running`; a launch
    /// that fails is reported as `Failed` and leaves nothing running.
    pub fn launch(
        &self,
        executor: ExecutorId,
        framework: FrameworkId,
        spec: ExecutorSpec,
    ) -> Launched {
        let shared = &self.shared;
        if lock(&shared.executors).contains_key(&executor) {
            return Launched::AlreadyRunning;
        }
        let dir = self.executor_dir(&executor);
        let mut child = match self.spawn(&executor, &framework, &spec, &dir) {
            Ok(child) => child,
            Err(reason) => return self.fail(&executor, &framework, reason),
        };
        let pid = child.id();
        let pgid = Pid::from_child(&child);
        let rec = Record {
            executor: executor.clone(),
            framework: framework.clone(),
            pgid: pgid.as_raw_nonzero().get(),
            start_time: record::proc_stat(pgid.as_raw_nonzero().get()).map(|s| s.start_time),
            boot_id: shared.boot_id.clone(),
            cores: spec.cores,
            memory_mb: spec.memory_mb,
        };
        if let Err(e) = record::write(&shared.running_dir, &rec) {
            destroy(child, pgid);
            let _ = record::remove(&shared.running_dir, &executor);
            let reason = format!(
                "cannot record process group {pid} in {}: {e}; the process was killed",
                shared.running_dir.display()
            );
            return self.fail(&executor, &framework, reason);
        }
        if let Err(reason) = self.handshake(&mut child) {
            // The command is not running: the shim ended (or is killed now).
            destroy(child, pgid);
            let _ = record::remove(&shared.running_dir, &executor);
            return self.fail(&executor, &framework, reason);
        }
        let entry = Arc::new(Entry {
            framework: framework.clone(),
            pgid,
            adopted_start: None,
            state: Mutex::new(EntryState::default()),
            changed: Condvar::new(),
        });
        {
            let mut map = lock(&shared.executors);
            if map.contains_key(&executor) {
                // A concurrent launch of the same id won the race; ours is
                // the duplicate.
                drop(map);
                destroy(child, pgid);
                return Launched::AlreadyRunning;
            }
            map.insert(executor.clone(), entry.clone());
        }
        tracing::info!(executor = %executor, pid, "executor started");
        (shared.sink)(ExecEvent {
            executor: executor.clone(),
            framework: framework.clone(),
            state: ExecutorState::Running,
        });
        let waiter_shared = shared.clone();
        let id = executor.clone();
        let spawned = std::thread::Builder::new().name(format!("regent-exec-{pid}")).spawn({
            let entry = entry.clone();
            move || wait_for(&waiter_shared, id, &entry, child)
        });
        if let Err(e) = spawned {
            // The closure (and with it the child) is dropped; the process
            // still runs unwaited. Kill it and report, as best we can.
            tracing::error!(executor = %executor, error = %e, "cannot start waiter thread");
            let _ = kill_process_group(pgid, Signal::KILL);
            let _ = record::remove(&shared.running_dir, &executor);
            lock(&shared.executors).remove(&executor);
            lock(&entry.state).finished = true;
            (shared.sink)(ExecEvent {
                executor: executor.clone(),
                framework: framework.clone(),
                state: ExecutorState::Failed {
                    reason: format!("cannot start a thread to wait for the process: {e}"),
                },
            });
        }
        Launched::Started { pid }
    }

    fn spawn(
        &self,
        executor: &ExecutorId,
        framework: &FrameworkId,
        spec: &ExecutorSpec,
        dir: &Path,
    ) -> Result<Child, String> {
        let Some((program, args)) = spec.command.split_first() else {
            return Err("empty command".to_owned());
        };
        for (k, v) in &spec.env {
            if k.is_empty() || k.contains(['=', '\0']) || v.contains('\0') {
                return Err(format!("invalid environment variable {k:?}"));
            }
        }
        fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create directory {}: {e}", dir.display()))?;
        let log = |name: &str| {
            let path = dir.join(name);
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))
        };
        let (stdout, stderr) = (log("stdout")?, log("stderr")?);
        let mut cmd = match &self.shared.config.shim {
            None => {
                let mut cmd = Command::new(program);
                cmd.args(args).stdout(stdout);
                cmd
            }
            Some(shim_program) => {
                // A status file left by an earlier run of this id must not
                // be taken for this run's.
                let status = dir.join(shim::STATUS_FILE);
                match fs::remove_file(&status) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        return Err(format!("cannot remove {}: {e}", status.display()))
                    }
                    _ => {}
                }
                let shim_args = ShimArgs {
                    status,
                    stdout: dir.join("stdout"),
                    command: spec.command.iter().map(Into::into).collect(),
                };
                let mut cmd = Command::new(shim_program);
                // The shim's stdout is the handshake pipe; it appends the
                // command's stdout to the file itself.
                cmd.args(shim_args.to_args()).stdout(Stdio::piped());
                cmd
            }
        };
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env("REGENT_FRAMEWORK_ID", framework.as_str())
            .env("REGENT_EXECUTOR_ID", executor.as_str())
            .env("REGENT_CORES", spec.cores.to_string())
            .env("REGENT_MEMORY_MB", spec.memory_mb.to_string())
            .current_dir(dir)
            .stdin(Stdio::null())
            .stderr(stderr)
            .process_group(0);
        match &self.shared.config.shim {
            None => cmd.spawn().map_err(|e| format!("cannot start {program:?}: {e}")),
            Some(shim_program) => cmd.spawn().map_err(|e| {
                format!(
                    "cannot start the executor shim {} (to run {program:?}): {e}",
                    shim_program.display()
                )
            }),
        }
    }

    /// Under a shim: waits for its handshake line, `Ok` once the command
    /// runs, else the reason it could not be started (the shim's own,
    /// naming the OS error, or how the shim ended). Directly started
    /// commands need none.
    fn handshake(&self, child: &mut Child) -> Result<(), String> {
        let Some(pipe) = child.stdout.take() else {
            return Ok(());
        };
        let mut line = String::new();
        let read = io::BufReader::new(pipe).read_line(&mut line);
        if let Some(rest) = line.trim_end().strip_prefix(shim::HANDSHAKE_STARTED) {
            if rest.starts_with(' ') {
                return Ok(());
            }
        }
        if let Some(reason) = line.trim_end().strip_prefix(shim::HANDSHAKE_CANNOT_START) {
            return Err(reason.trim_start().to_owned());
        }
        let shim_program =
            self.shared.config.shim.as_deref().map(Path::display).map(|p| p.to_string());
        let shim_program = shim_program.unwrap_or_default();
        // It closed the pipe without a word: it is ending (or is not a
        // shim). A moment for its exit status, then it is killed.
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut ended = child.try_wait();
        while matches!(ended, Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            ended = child.try_wait();
        }
        let how = match (read, ended) {
            (Err(e), _) => format!("its handshake cannot be read: {e}"),
            (Ok(_), Ok(Some(status))) if line.is_empty() => format!("it ended with {status}"),
            (Ok(_), _) => format!("it wrote {:?} instead of a handshake", line.trim_end()),
        };
        Err(format!("the executor shim {shim_program} did not start the command: {how}"))
    }

    fn fail(&self, executor: &ExecutorId, framework: &FrameworkId, reason: String) -> Launched {
        tracing::warn!(executor = %executor, %reason, "executor launch failed");
        let stderr = self.executor_dir(executor).join("stderr");
        if let Ok(mut f) = OpenOptions::new().append(true).open(stderr) {
            let _ = writeln!(f, "regent: {reason}");
        }
        (self.shared.sink)(ExecEvent {
            executor: executor.clone(),
            framework: framework.clone(),
            state: ExecutorState::Failed { reason: reason.clone() },
        });
        Launched::Failed { reason }
    }

    /// Kills an executor: SIGTERM to its whole process group, SIGKILL after
    /// the grace period if the leader still runs; its terminal state is
    /// then `Killed`. Returns `false` if no such executor runs. Idempotent:
    /// a repeated kill while one is under way does nothing more.
    pub fn kill(&self, executor: &ExecutorId) -> bool {
        self.stop(executor, self.shared.config.kill_grace)
    }

    /// Stops an executor (a drain): SIGTERM to its whole process group,
    /// SIGKILL after `grace` if the leader still runs; as [`Supervisor::kill`]
    /// with the grace period given. A stop or kill already under way is not
    /// repeated (its own grace period stands).
    pub fn stop(&self, executor: &ExecutorId, grace: Duration) -> bool {
        let Some(entry) = lock(&self.shared.executors).get(executor).cloned() else {
            return false;
        };
        if !request_kill(&entry) {
            return true;
        }
        let spawned = std::thread::Builder::new().name("regent-exec-kill".to_owned()).spawn({
            let entry = entry.clone();
            move || {
                let deadline = Instant::now() + grace;
                if !wait_until(&entry, deadline, |s| s.exited) {
                    signal(&entry, Signal::KILL);
                }
            }
        });
        if spawned.is_err() {
            // No thread for the grace period: no grace.
            signal(&entry, Signal::KILL);
        }
        true
    }

    /// Kills every executor (worker shutdown): SIGTERM to every group,
    /// SIGKILL to those still running after the grace period, then waits
    /// (bounded by the reap timeout) until each has been reported. Returns
    /// the executors that still were not reported when it gave up (normally
    /// none). Executors launched while it runs are not included: stop
    /// launching first.
    pub fn kill_all(&self) -> Vec<ExecutorId> {
        let entries: Vec<(ExecutorId, Arc<Entry>)> =
            lock(&self.shared.executors).iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (_, e) in &entries {
            request_kill(e);
        }
        let grace_end = Instant::now() + self.shared.config.kill_grace;
        for (_, e) in &entries {
            if !wait_until(e, grace_end, |s| s.exited) {
                signal(e, Signal::KILL);
            }
        }
        let reap_end = Instant::now() + self.shared.config.reap_timeout;
        entries
            .into_iter()
            .filter(|(_, e)| !wait_until(e, reap_end, |s| s.finished))
            .map(|(id, _)| id)
            .collect()
    }

    /// The executors running now.
    pub fn running(&self) -> Vec<RunningExecutor> {
        let mut v: Vec<_> = lock(&self.shared.executors)
            .iter()
            .map(|(id, e)| RunningExecutor {
                executor: id.clone(),
                framework: e.framework.clone(),
                pid: e.pgid.as_raw_nonzero().get() as u32,
            })
            .collect();
        v.sort_by(|a, b| a.executor.cmp(&b.executor));
        v
    }
}

/// Marks a kill requested and sends SIGTERM to the group; `false` if a kill
/// was already requested or the leader has exited.
fn request_kill(entry: &Entry) -> bool {
    let mut st = lock(&entry.state);
    if st.kill_requested || st.exited {
        return false;
    }
    st.kill_requested = true;
    // Under the lock: the leader is not reaped (or, adopted, was just seen),
    // so the group is ours.
    if entry.may_signal() {
        let _ = kill_process_group(entry.pgid, Signal::TERM);
    }
    true
}

/// Signals the group unless its leader has exited.
fn signal(entry: &Entry, sig: Signal) {
    let st = lock(&entry.state);
    if !st.exited && entry.may_signal() {
        let _ = kill_process_group(entry.pgid, sig);
    }
}

/// Waits until `done` holds or the deadline passes; returns whether it
/// holds.
fn wait_until(entry: &Entry, deadline: Instant, done: impl Fn(&EntryState) -> bool) -> bool {
    let mut st = lock(&entry.state);
    loop {
        if done(&st) {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        st = entry.changed.wait_timeout(st, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// The waiter thread of one executor.
fn wait_for(shared: &Shared, id: ExecutorId, entry: &Entry, mut child: Child) {
    // Wait for the exit without reaping: the zombie keeps the pid, so the
    // group cannot be recycled while signallers still may use it.
    loop {
        match waitid(WaitId::Pid(entry.pgid), WaitIdOptions::EXITED | WaitIdOptions::NOWAIT) {
            Ok(_) => break,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => {
                // Cannot happen for our own unreaped child; fall back to a
                // plain wait below.
                tracing::error!(executor = %id, error = %e, "waitid failed");
                break;
            }
        }
    }
    let killed = {
        let mut st = lock(&entry.state);
        st.exited = true;
        entry.changed.notify_all();
        st.kill_requested
    };
    // The leader is gone; whatever remains of its group goes with it.
    let _ = kill_process_group(entry.pgid, Signal::KILL);
    let state = match child.wait() {
        Ok(_) if killed => ExecutorState::Killed,
        // Under a shim, its record is the precise one; without (or when the
        // shim was killed before writing it), the exit status itself.
        Ok(status) => match read_shim_status(shared, &id) {
            Some(recorded) => shim_state(recorded),
            None => ExecutorState::Exited { code: exit_code(status) },
        },
        Err(e) => ExecutorState::Failed { reason: format!("cannot wait for the process: {e}") },
    };
    if let Err(e) = record::remove(&shared.running_dir, &id) {
        // The record stays; a later supervisor finds the pid gone (or
        // recycled) and reports it as already gone.
        tracing::error!(executor = %id, error = %e, "cannot remove executor record");
    }
    lock(&shared.executors).remove(&id);
    tracing::info!(executor = %id, ?state, "executor ended");
    (shared.sink)(ExecEvent { executor: id, framework: entry.framework.clone(), state });
    lock(&entry.state).finished = true;
    entry.changed.notify_all();
}

/// The status the shim recorded for `id` (none without a shim, or when
/// the shim did not write one).
fn read_shim_status(shared: &Shared, id: &ExecutorId) -> Option<ShimStatus> {
    shared.config.shim.as_ref()?;
    shim::read_status(&logs::executor_dir(&shared.config.work_dir, id).join(shim::STATUS_FILE))
}

/// The state to report for an executor that ended by itself as its shim
/// recorded: `Exited` with its code (`128 + signal` when a signal ended
/// it, as for a child waited for directly), or `Failed` when it could not
/// be started.
pub fn shim_state(status: ShimStatus) -> ExecutorState {
    match status {
        ShimStatus::Exited { code } => ExecutorState::Exited { code },
        ShimStatus::Signaled { signal } => ExecutorState::Exited { code: 128 + signal },
        ShimStatus::CannotStart { reason } => ExecutorState::Failed { reason },
    }
}

/// Kills a just-spawned child's group and reaps it.
fn destroy(mut child: Child, pgid: Pid) {
    let _ = kill_process_group(pgid, Signal::KILL);
    let _ = child.wait();
}

/// An exit status as a code: the exit code, or `128 + signal`.
pub fn exit_code(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        // Neither exited nor signalled: not possible for a waited-for
        // process; report it as a generic failure code.
        (None, None) => 255,
    }
}

fn take_lock(path: &Path) -> Result<File, SupervisorError> {
    let io_err = |what| {
        let path = path.to_owned();
        move |source| SupervisorError::Io { what, path, source }
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io_err("open"))?;
    // A lock just released may be held a moment longer by a child another
    // thread of this process is forking (it inherits the descriptor until
    // its exec closes it): retry briefly before naming a holder.
    let deadline = Instant::now() + LOCK_RETRY;
    let mut result = flock(&file, FlockOperation::NonBlockingLockExclusive);
    while result == Err(rustix::io::Errno::WOULDBLOCK) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        result = flock(&file, FlockOperation::NonBlockingLockExclusive);
    }
    match result {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
            let holder = fs::read_to_string(path).unwrap_or_default();
            let holder = holder.trim();
            return Err(SupervisorError::Locked {
                path: path.to_owned(),
                holder: if holder.is_empty() {
                    "an unknown process".to_owned()
                } else {
                    holder.to_owned()
                },
            });
        }
        Err(e) => return Err(io_err("lock")(e.into())),
    }
    file.set_len(0).map_err(io_err("truncate"))?;
    writeln!(file, "regent worker pid {}", std::process::id()).map_err(io_err("write"))?;
    Ok(file)
}

/// Settles the process groups recorded by a previous supervisor: adopts
/// (or, by policy, kills) those proven this worker's, reports the others,
/// removes the records of every group not adopted, and waits (up to the
/// reap timeout) for killed groups to go.
fn reclaim(shared: &Arc<Shared>) -> io::Result<Vec<LeftBehind>> {
    let dir = &shared.running_dir;
    let scan = record::scan(dir)?;
    for path in &scan.torn {
        tracing::warn!(path = %path.display(), "removing a torn executor record");
        fs::remove_file(path)?;
    }
    for path in &scan.damaged {
        // Cannot be checked without a pgid; keep it for the operator.
        let mut aside = path.clone().into_os_string();
        aside.push(record::CORRUPT_SUFFIX);
        tracing::error!(
            path = %path.display(),
            "damaged executor record; its process group (if any) was left alone"
        );
        fs::rename(path, aside)?;
    }
    let mut left = Vec::new();
    let mut killed = Vec::new();
    let mut removed = false;
    for (path, rec) in &scan.records {
        if lock(&shared.executors).contains_key(&rec.executor) {
            // A second record of an executor already adopted (a temporary
            // file beside its committed one): the same group. The committed
            // record is the adopted one's.
            if *path != record::record_path(dir, &rec.executor) {
                fs::remove_file(path)?;
                removed = true;
            }
            continue;
        }
        let outcome = match classify(rec, shared.boot_id.as_deref()) {
            Finding::Proven { pgid, start_time } => match shared.config.left_behind {
                LeftBehindPolicy::Adopt => match adopt(shared, rec, pgid, start_time, path) {
                    Ok(()) => LeftBehindOutcome::Adopted,
                    Err(e) => {
                        // It cannot be supervised (no thread to watch it, or
                        // its record cannot be committed): left alone like
                        // what cannot be proven.
                        LeftBehindOutcome::Unprovable { why: format!("cannot supervise it: {e}") }
                    }
                },
                LeftBehindPolicy::Kill => {
                    let _ = kill_process_group(pgid, Signal::KILL);
                    killed.push(pgid);
                    LeftBehindOutcome::Killed
                }
            },
            // Its shim may have recorded how it ended (a status file is
            // removed before every launch, so it is this run's).
            Finding::Ended { why } => match shim::read_status(
                &logs::executor_dir(&shared.config.work_dir, &rec.executor).join(shim::STATUS_FILE),
            ) {
                Some(status) => LeftBehindOutcome::Finished { state: shim_state(status) },
                None => LeftBehindOutcome::Ended { why },
            },
            Finding::Unprovable { why } => LeftBehindOutcome::Unprovable { why },
        };
        match &outcome {
            LeftBehindOutcome::Adopted => tracing::info!(
                executor = %rec.executor,
                pid = rec.pgid,
                "adopted an executor a previous worker process left running"
            ),
            LeftBehindOutcome::Killed => tracing::warn!(
                executor = %rec.executor,
                pid = rec.pgid,
                "killed an executor a previous worker process left running (--kill-left-behind)"
            ),
            LeftBehindOutcome::Finished { state } => tracing::info!(
                executor = %rec.executor,
                pid = rec.pgid,
                ?state,
                "an executor of a previous worker process ended while no worker watched it; its \
                 shim recorded how"
            ),
            LeftBehindOutcome::Ended { why } => tracing::warn!(
                executor = %rec.executor,
                pid = rec.pgid,
                %why,
                "an executor of a previous worker process has ended; its exit status is unknown"
            ),
            LeftBehindOutcome::Unprovable { why } => tracing::warn!(
                executor = %rec.executor,
                pid = rec.pgid,
                %why,
                "left alone: cannot prove that process group {} is this worker's executor {} \
                 (neither adopted nor killed)",
                rec.pgid,
                rec.executor
            ),
        }
        if outcome != LeftBehindOutcome::Adopted {
            match fs::remove_file(path) {
                // A waiter thread of a dropped supervisor in this same
                // process may have removed it as its child died.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                r => r?,
            }
            removed = true;
        }
        left.push(LeftBehind {
            executor: rec.executor.clone(),
            framework: rec.framework.clone(),
            pgid: rec.pgid,
            cores: rec.cores,
            memory_mb: rec.memory_mb,
            outcome,
        });
    }
    let deadline = Instant::now() + shared.config.reap_timeout;
    for pgid in killed {
        while group_alive(pgid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if group_alive(pgid) {
            tracing::warn!(pgid = pgid.as_raw_nonzero().get(), "killed group has not gone yet");
        }
    }
    if removed || !scan.torn.is_empty() || !scan.damaged.is_empty() {
        record::sync_dir(dir)?;
    }
    Ok(left)
}

/// Supervises a proven group again: an entry, a committed record (a
/// temporary one found complete is committed now) and a thread that polls
/// for its end.
fn adopt(
    shared: &Arc<Shared>,
    rec: &Record,
    pgid: Pid,
    start_time: u64,
    path: &Path,
) -> io::Result<()> {
    if path != record::record_path(&shared.running_dir, &rec.executor) {
        record::write(&shared.running_dir, rec)?;
        fs::remove_file(path)?;
    }
    let entry = Arc::new(Entry {
        framework: rec.framework.clone(),
        pgid,
        adopted_start: Some(start_time),
        state: Mutex::new(EntryState::default()),
        changed: Condvar::new(),
    });
    lock(&shared.executors).insert(rec.executor.clone(), entry.clone());
    let spawned = std::thread::Builder::new().name(format!("regent-adopt-{}", rec.pgid)).spawn({
        let (shared, id, entry) = (shared.clone(), rec.executor.clone(), entry);
        move || watch_adopted(&shared, id, &entry, start_time)
    });
    if let Err(e) = spawned {
        lock(&shared.executors).remove(&rec.executor);
        return Err(e);
    }
    Ok(())
}

/// The watcher thread of an adopted executor: it is not our child, so its
/// end is seen by polling `/proc`, and how it ended is read from its
/// shim's status file (`Killed` when a kill was requested; `Lost` when
/// there is no status file).
fn watch_adopted(shared: &Shared, id: ExecutorId, entry: &Entry, start_time: u64) {
    let raw = entry.pgid.as_raw_nonzero().get();
    let running =
        || record::proc_stat(raw).is_some_and(|st| st.start_time == start_time && st.state != 'Z');
    while running() {
        // Woken early by nothing: a kill request only signals; the end is
        // what is waited for.
        let st = lock(&entry.state);
        let _ = entry.changed.wait_timeout(st, shared.config.adopt_poll);
    }
    let killed = {
        let mut st = lock(&entry.state);
        // Whatever remains of the group goes with its leader: while its
        // zombie pins the pid, or, once it is reaped, while no process has
        // that pid and the group still exists (Linux does not reuse a pid
        // while a process group of that id exists, so only our group's
        // members can be in it). A pid taken by another process is left
        // alone.
        let ours = match record::proc_stat(raw) {
            Some(now) => now.start_time == start_time,
            None => group_exists(entry.pgid),
        };
        if ours {
            let _ = kill_process_group(entry.pgid, Signal::KILL);
        }
        st.exited = true;
        entry.changed.notify_all();
        st.kill_requested
    };
    // Not our child: how it ended is known only from its shim's record
    // (read regardless of this supervisor's own shim setting: the previous
    // process may have used one). None (no shim, or the group was killed
    // with SIGKILL by someone else): unknown, `Lost`.
    let recorded = shim::read_status(
        &logs::executor_dir(&shared.config.work_dir, &id).join(shim::STATUS_FILE),
    );
    let known = recorded.is_some();
    let state = match recorded {
        _ if killed => ExecutorState::Killed,
        Some(recorded) => shim_state(recorded),
        None => ExecutorState::Lost,
    };
    if let Err(e) = record::remove(&shared.running_dir, &id) {
        tracing::error!(executor = %id, error = %e, "cannot remove executor record");
    }
    lock(&shared.executors).remove(&id);
    if known || killed {
        tracing::info!(executor = %id, pid = raw, ?state, "adopted executor ended");
    } else {
        tracing::warn!(
            executor = %id,
            pid = raw,
            "adopted executor ended without a recorded exit status (no shim, or its group was \
             killed with SIGKILL): its exit status is unknown"
        );
    }
    (shared.sink)(ExecEvent { executor: id, framework: entry.framework.clone(), state });
    lock(&entry.state).finished = true;
    entry.changed.notify_all();
}

/// Whether the process group `pgid` exists (a group whose members we may
/// not signal exists too).
fn group_exists(pgid: Pid) -> bool {
    match test_kill_process_group(pgid) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

/// Whether the group a previous supervisor recorded is provably this
/// worker's (same boot as `boot_id`, the leader running with the recorded
/// start time and still leading its group), has ended, or cannot be proven
/// either way. Never signals anything.
pub fn classify(rec: &Record, boot_id: Option<&str>) -> Finding {
    let pid = rec.pgid;
    let Some(pgid) = Pid::from_raw(pid) else {
        return Finding::Ended { why: format!("its record names no process group ({pid})") };
    };
    let stat = record::proc_stat(pid);
    let something_runs = stat.is_some() || group_exists(pgid);
    let gone = || Finding::Ended {
        why: format!("no process of group {pid} runs: it ended while no worker watched it"),
    };
    match (rec.boot_id.as_deref(), boot_id) {
        (Some(then), Some(now)) if then != now => {
            let why = if something_runs {
                format!(
                    "it was started in another boot ({then}; this boot is {now}) and ended with \
                     it; pid {pid} now belongs to another process, which is left alone (neither \
                     adopted nor killed)"
                )
            } else {
                format!(
                    "it was started in another boot ({then}; this boot is {now}) and ended with it"
                )
            };
            return Finding::Ended { why };
        }
        _ if !something_runs => return gone(),
        (None, _) => {
            return Finding::Unprovable {
                why: "its record names no boot (written by an older regent)".to_owned(),
            }
        }
        (Some(_), None) => {
            return Finding::Unprovable { why: "this machine's boot id cannot be read".to_owned() }
        }
        _ => {}
    }
    // The same boot, and something runs under the pid or the group.
    let Some(st) = stat else {
        return Finding::Unprovable {
            why: format!(
                "its leader (pid {pid}) is gone but processes remain in group {pid}: they cannot \
                 be proven this worker's"
            ),
        };
    };
    let Some(recorded) = rec.start_time else {
        return Finding::Unprovable {
            why: format!("its record has no start time to check pid {pid} against"),
        };
    };
    if st.start_time != recorded {
        return Finding::Ended {
            why: format!(
                "pid {pid} now belongs to another process (started at tick {}, the executor at \
                 tick {recorded}), which is left alone: the executor ended",
                st.start_time
            ),
        };
    }
    if st.pgid != pid {
        return Finding::Unprovable {
            why: format!(
                "process {pid} no longer leads its process group (it is in group {})",
                st.pgid
            ),
        };
    }
    Finding::Proven { pgid, start_time: recorded }
}

/// Whether a process group still has a member that is not a zombie (zombies
/// left to a non-reaping init count as gone).
fn group_alive(pgid: Pid) -> bool {
    if test_kill_process_group(pgid).is_err() {
        return false;
    }
    match record::proc_stat(pgid.as_raw_nonzero().get()) {
        Some(st) if st.state == 'Z' => {
            // The leader is a zombie; members may remain, but after SIGKILL
            // they die promptly. Count the group as gone.
            false
        }
        _ => true,
    }
}

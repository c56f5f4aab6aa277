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
//! <work_dir>/last-word                the worker's last word from its master,
//!                                     for singleton executors' shims
//!                                     ([`Supervisor::set_word`])
//! <work_dir>/running/<id>.rec         one durable record per live process group
//!                                     (0600, in a 0700 directory: it holds the
//!                                     executor's environment)
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

pub mod artifacts;
pub mod cgroup;
pub mod check;
pub mod delegation;
pub mod gc;
mod launch;
pub mod logs;
pub mod names;
mod reclaim;
pub mod record;
pub mod rotate;
pub mod shim;
mod stop;
pub mod user;

pub(crate) use launch::log_launched;
pub use launch::{exit_code, shim_state, Launched};
pub use reclaim::{classify, Finding, LeftBehind, LeftBehindOutcome};

use regent_core::protocol::ExecutorState;
use regent_core::{ExecutorId, FrameworkId};
use rustix::fs::{flock, FlockOperation};
use rustix::process::Pid;
use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
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
    /// The most bytes the artifact cache (`<work_dir>/artifact-cache`)
    /// keeps ([`artifacts`]).
    pub artifact_cache_bytes: u64,
    /// How executors' stdout and stderr are rotated by size ([`rotate`];
    /// by the shim, so only with [`SupervisorConfig::shim`]). `None`: the
    /// files grow without bound.
    pub log_rotation: Option<rotate::Rotation>,
    /// The user every executor runs as ([`user`]; resolved, the worker
    /// being root). `None`: the worker's own user.
    pub run_as: Option<user::RunAs>,
    /// The users an executor's spec may name to run as
    /// ([`regent_core::launch::LaunchSpec::user`]; resolved at each
    /// launch). Any other is refused, with the reason.
    pub allowed_users: Vec<String>,
}

impl SupervisorConfig {
    /// Defaults: 3 s grace, 5 s reap timeout, adopt what a previous
    /// supervisor left, polled every 100 ms, a 1 GiB artifact cache,
    /// output rotated at 64 MiB into 5 files (under a shim), no
    /// shim (the daemons set
    /// [`SupervisorConfig::shim`] to their own binary).
    pub fn new(work_dir: impl Into<PathBuf>) -> Self {
        SupervisorConfig {
            work_dir: work_dir.into(),
            kill_grace: Duration::from_secs(3),
            reap_timeout: Duration::from_secs(5),
            left_behind: LeftBehindPolicy::Adopt,
            adopt_poll: Duration::from_millis(100),
            shim: None,
            artifact_cache_bytes: artifacts::DEFAULT_CACHE_BYTES,
            log_rotation: Some(rotate::Rotation::default()),
            run_as: None,
            allowed_users: Vec::new(),
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
    /// For a check's outcome (`check` is `Some`), `Running`: no change.
    pub state: ExecutorState,
    /// A health check's outcome ([`Supervisor::run_check`]) instead of a
    /// state change.
    pub check: Option<CheckDone>,
}

/// The outcome of one health check run ([`Supervisor::run_check`]; docs/design.md#issue-45).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckDone {
    /// Which of the executor's checks.
    pub check: u8,
    /// The run's number, echoed.
    pub run: u64,
    /// What it found.
    pub outcome: regent_core::health::CheckOutcome,
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
    /// The artifact cache, opened at the first launch that needs it.
    artifacts: Mutex<Option<Arc<artifacts::ArtifactCache>>>,
    /// Executors whose artifacts are being fetched
    /// ([`Supervisor::launch_in_background`]), and whether a kill or stop
    /// came for them meanwhile (always locked after `executors`).
    preparing: Mutex<HashMap<ExecutorId, bool>>,
    /// The executors' cgroups, once [`Supervisor::isolate`] set them
    /// (limits are accounted only until then, or without).
    cgroups: std::sync::OnceLock<cgroup::Cgroups>,
    /// The health check threads, started at the first run
    /// ([`Supervisor::run_check`]).
    checks: std::sync::OnceLock<check::CheckPool>,
    /// The word last written to the word file ([`Supervisor::set_word`]),
    /// and whether the last write failed (logged once until one succeeds).
    word: Mutex<(Option<u64>, bool)>,
}

impl Drop for Shared {
    /// The last holder of the supervisor is gone (its executors' waiters
    /// too): the worker's parent cgroups go if they are empty.
    fn drop(&mut self) {
        if let Some(cg) = self.cgroups.get() {
            cg.remove_parents_if_empty();
        }
    }
}

struct Entry {
    framework: FrameworkId,
    pgid: Pid,
    /// Adopted (not this process's child): the leader's start time, checked
    /// before every signal.
    adopted_start: Option<u64>,
    /// Its group's kill grace, if the group set one (else the supervisor's).
    kill_grace: Option<Duration>,
    /// What it was started with, for its exec checks (`None`: adopted from
    /// a record without it).
    context: Option<Arc<check::ExecContext>>,
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
        // The records hold the executors' environments: the worker's alone.
        {
            use std::os::unix::fs::PermissionsExt as _;
            fs::set_permissions(&running_dir, fs::Permissions::from_mode(0o700))
                .map_err(io_err("set the mode of", &running_dir))?;
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
            artifacts: Mutex::new(None),
            preparing: Mutex::new(HashMap::new()),
            cgroups: std::sync::OnceLock::new(),
            checks: std::sync::OnceLock::new(),
            word: Mutex::new((None, false)),
        });
        let left = reclaim::reclaim(&shared).map_err(io_err("reclaim records in", &running_dir))?;
        Ok((Supervisor { shared, _lock: lock_file }, left))
    }

    /// Runs one health check of an executor on the check pool (bounded:
    /// see [`check`]), without blocking; its outcome comes through the sink
    /// as an [`ExecEvent`] with `check` set. An exec check runs as the
    /// executor does: its user, working directory and environment
    /// ([`check::ExecContext`]), its cgroups.
    pub fn run_check(&self, run: regent_core::health::CheckRun) {
        let id = run.executor.clone();
        let (framework, context) = lock(&self.shared.executors).get(&id).map_or_else(
            || (FrameworkId::new(""), None),
            |e| (e.framework.clone(), e.context.clone()),
        );
        let config = &self.shared.config;
        let cgroups = self.shared.cgroups.get().map_or_else(Vec::new, |cg| cg.dirs(id.as_str()));
        let sandbox = match context {
            Some(context) => check::Sandbox {
                dir: context.cwd.clone(),
                cgroups,
                user: context.user.as_ref().map(user::Identity::from),
                env: Some(context.env.clone()),
                exec_as: config.shim.clone(),
            },
            // Adopted from a record written before the context was kept
            // (or gone meanwhile): as exec checks ran before.
            None => check::Sandbox {
                dir: self.executor_dir(&id),
                cgroups,
                user: config.run_as.as_ref().map(user::Identity::from),
                env: None,
                exec_as: config.shim.clone(),
            },
        };
        let shared = self.shared.clone();
        let pool = self.shared.checks.get_or_init(check::CheckPool::new);
        pool.submit(run, sandbox, move |run, outcome| {
            (shared.sink)(ExecEvent {
                executor: run.executor,
                framework,
                state: ExecutorState::Running,
                check: Some(CheckDone { check: run.check, run: run.run, outcome }),
            })
        });
    }

    /// Hands the worker's last word from its master to the shims of its
    /// singleton executors: `boot_ms`, a `CLOCK_BOOTTIME` reading in ms
    /// ([`crate::clock::RuntimeClock::boot_ms`] of the core's
    /// `Worker::last_word`), written to `<work_dir>/last-word`
    /// ([`shim::WORD_FILE`], atomically, not fsynced) when it differs
    /// from the last one written. Each such shim stops its command once
    /// the boot clock passes this plus its group's `stop_after`, with the
    /// worker process down or paused too (docs/design.md#issue-45). Call
    /// it before carrying out the core's actions that follow the word (a
    /// launch among them). Without a shim, nothing is written. A failed
    /// write is logged and retried at the next call: the shims then stop
    /// their commands early, never late.
    pub fn set_word(&self, boot_ms: u64) {
        if self.shared.config.shim.is_none() {
            return;
        }
        let mut last = lock(&self.shared.word);
        if last.0 == Some(boot_ms) {
            return;
        }
        let path = self.shared.config.work_dir.join(shim::WORD_FILE);
        match shim::write_word(&path, boot_ms) {
            Ok(()) => *last = (Some(boot_ms), false),
            Err(e) if !last.1 => {
                last.1 = true;
                tracing::warn!(
                    path = %path.display(),
                    error = %e,
                    "cannot write the word file: singleton executors may be stopped early"
                );
            }
            Err(_) => {}
        }
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

    /// Enforces every later executor's limits with `cgroups` (set once: a
    /// second call is refused, returning them), and cleans what a previous
    /// process of this worker left under its parents: the cgroups of
    /// executors that no longer run are removed; one that still holds
    /// processes but whose executor was not re-adopted (it could not be
    /// proven this worker's) is left alone, with a warning.
    pub fn isolate(&self, cgroups: cgroup::Cgroups) -> Result<(), cgroup::Cgroups> {
        self.shared.cgroups.set(cgroups)?;
        let Some(cg) = self.shared.cgroups.get() else { return Ok(()) };
        let running = lock(&self.shared.executors);
        for id in cg.existing() {
            if running.contains_key(&ExecutorId::new(id.clone())) {
                continue;
            }
            let pids = cg.pids(&id);
            if pids.is_empty() {
                for problem in cg.remove(&id, Duration::from_secs(1)) {
                    tracing::warn!(executor = %id, %problem, "cannot remove a cgroup left behind");
                }
            } else {
                tracing::warn!(
                    executor = %id,
                    ?pids,
                    "a cgroup left behind holds processes of an executor this worker did not                      re-adopt: left alone"
                );
            }
        }
        Ok(())
    }

    /// The executors' cgroups, when limits are enforced.
    pub fn cgroups(&self) -> Option<&cgroup::Cgroups> {
        self.shared.cgroups.get()
    }

    /// An executor's memory and CPU use, from its cgroup (`None` without
    /// enforcement).
    pub fn usage(&self, executor: &ExecutorId) -> Option<regent_core::protocol::Usage> {
        Some(self.shared.cgroups.get()?.usage(executor.as_str()))
    }

    /// A sample of the running executors' usage (from their cgroups; none
    /// without enforcement) and the work directory's free space, for the
    /// worker's [`regent_core::protocol::Message::WorkerUsage`].
    pub fn usage_sample(&self) -> regent_core::protocol::WorkerUsage {
        use regent_core::protocol::{ExecutorUsage, WorkerUsage};
        let executors = match self.shared.cgroups.get() {
            None => Vec::new(),
            Some(cg) => self
                .running()
                .into_iter()
                .map(|r| ExecutorUsage {
                    usage: cg.usage(r.executor.as_str()),
                    executor: r.executor,
                })
                .collect(),
        };
        let space = gc::space(&self.shared.config.work_dir);
        WorkerUsage {
            executors,
            work_dir_free_bytes: space.map(|(free, _)| free),
            work_dir_total_bytes: space.map(|(_, total)| total),
        }
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

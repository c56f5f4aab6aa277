//! Launching an executor: its directory and record written durably, the
//! shim started in a new process group (and, through its handshake, the
//! command exec'd or its failure reported synchronously), a waiter thread
//! per executor that reaps it and reports how it ended (the shim's status
//! file first, the wait status otherwise).

use super::cgroup::Limits;
use super::check::ExecContext;
use super::{lock, logs, record, shim, Entry, EntryState, ExecEvent, Shared, Supervisor};
use record::Record;
use regent_core::protocol::{ExecutorSpec, ExecutorState};
use regent_core::{ExecutorId, FrameworkId};
use rustix::process::{kill_process_group, waitid, Pid, Signal, WaitId, WaitIdOptions};
use shim::{ShimArgs, ShimStatus};
use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, BufRead as _, Write as _};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

impl Supervisor {
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
        if !spec.launch.artifacts.is_empty() {
            if let Err(reason) = self.install_artifacts(&spec, &dir) {
                return self.fail(&executor, &framework, reason);
            }
            // Killed while its artifacts were fetched: it never starts.
            if lock(&shared.preparing).get(&executor) == Some(&true) {
                lock(&shared.preparing).remove(&executor);
                (shared.sink)(ExecEvent {
                    check: None,
                    executor: executor.clone(),
                    framework: framework.clone(),
                    state: ExecutorState::Killed,
                });
                return Launched::Cancelled;
            }
        }
        let (mut child, context) = match self.spawn(&executor, &framework, &spec, &dir) {
            Ok(spawned) => spawned,
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
            kill_grace_ms: spec.launch.kill_grace_ms,
            ports: regent_core::ports::numbered(&spec.launch.ports, &spec.env),
            resources: regent_core::resources::assigned_from_env(&spec.launch.resources, &spec.env),
            disconnect_ms: spec.launch.disconnect.map(|d| d.stop_after_ms),
            checks: spec.launch.checks.clone(),
            sandbox: Some(context.clone()),
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
            kill_grace: spec.launch.kill_grace_ms.map(Duration::from_millis),
            context: Some(Arc::new(context)),
            state: Mutex::new(EntryState::default()),
            changed: Condvar::new(),
        });
        let cancelled = {
            let mut map = lock(&shared.executors);
            if map.contains_key(&executor) {
                // A concurrent launch of the same id won the race; ours is
                // the duplicate.
                drop(map);
                destroy(child, pgid);
                return Launched::AlreadyRunning;
            }
            map.insert(executor.clone(), entry.clone());
            // From here a kill finds it in the map; one that came while
            // its artifacts were fetched is carried out below.
            lock(&shared.preparing).remove(&executor).unwrap_or(false)
        };
        tracing::info!(executor = %executor, pid, "executor started");
        (shared.sink)(ExecEvent {
            check: None,
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
                check: None,
                executor: executor.clone(),
                framework: framework.clone(),
                state: ExecutorState::Failed {
                    reason: format!("cannot start a thread to wait for the process: {e}"),
                },
            });
        } else if cancelled {
            self.kill(&executor);
        }
        Launched::Started { pid }
    }

    /// [`Supervisor::launch`] on a thread of its own when the spec has
    /// artifacts to fetch (a download may take minutes: the caller, a
    /// worker's pump, must go on heartbeating), else at once. A kill or
    /// stop while the artifacts are fetched is kept and carried out: the
    /// executor then never starts (reported `Killed`), or is killed as soon
    /// as it does. A second start of an executor being prepared is ignored.
    pub fn launch_in_background(
        self: &Arc<Self>,
        executor: ExecutorId,
        framework: FrameworkId,
        spec: ExecutorSpec,
    ) -> Option<Launched> {
        if spec.launch.artifacts.is_empty() {
            return Some(self.launch(executor, framework, spec));
        }
        {
            let running = lock(&self.shared.executors);
            let mut preparing = lock(&self.shared.preparing);
            if running.contains_key(&executor) || preparing.contains_key(&executor) {
                return Some(Launched::AlreadyRunning);
            }
            preparing.insert(executor.clone(), false);
        }
        let sup = self.clone();
        let id = executor.clone();
        let spawned =
            std::thread::Builder::new().name("regent-artifacts".into()).spawn(move || {
                let launched = sup.launch(id.clone(), framework, spec);
                lock(&sup.shared.preparing).remove(&id);
                log_launched(&id, launched);
            });
        match spawned {
            Ok(_) => None,
            Err(e) => {
                lock(&self.shared.preparing).remove(&executor);
                tracing::error!(%executor, error = %e, "cannot start a thread to fetch artifacts");
                Some(Launched::Failed { reason: format!("cannot start a thread: {e}") })
            }
        }
    }

    /// Fetches (or takes from the cache) and installs the spec's artifacts
    /// into the executor's directory; the reason it failed, naming the
    /// artifact, otherwise.
    fn install_artifacts(&self, spec: &ExecutorSpec, dir: &Path) -> Result<(), String> {
        let cache = {
            let mut slot = lock(&self.shared.artifacts);
            match &*slot {
                Some(cache) => cache.clone(),
                None => {
                    let config = &self.shared.config;
                    let cache = super::artifacts::ArtifactCache::new(
                        config.work_dir.join(super::artifacts::CACHE_DIR),
                        config.artifact_cache_bytes,
                    )
                    .map_err(|e| e.to_string())?;
                    slot.insert(Arc::new(cache)).clone()
                }
            }
        };
        cache.install(&spec.launch.artifacts, dir).map_err(|e| e.to_string())
    }

    pub(super) fn spawn(
        &self,
        executor: &ExecutorId,
        framework: &FrameworkId,
        spec: &ExecutorSpec,
        dir: &Path,
    ) -> Result<(Child, ExecContext), String> {
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
        let cwd = match &spec.launch.cwd {
            None => dir.to_path_buf(),
            // The master refuses such a cwd; a worker does not trust that.
            Some(cwd) if !regent_core::launch::is_inside(cwd) => {
                return Err(format!("cwd {cwd:?} is not inside the executor directory"))
            }
            Some(cwd) => {
                let cwd = dir.join(cwd);
                fs::create_dir_all(&cwd)
                    .map_err(|e| format!("cannot create cwd {}: {e}", cwd.display()))?;
                cwd
            }
        };
        let log = |name: &str| {
            let path = dir.join(name);
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| format!("cannot open {}: {e}", path.display()))
        };
        let (stdout, stderr) = (log("stdout")?, log("stderr")?);
        let spec_user = match &spec.launch.user {
            None => None,
            Some(name) => self.user_for(name)?,
        };
        let run_as = spec_user.as_ref().or(self.shared.config.run_as.as_ref());
        if let Some(user) = run_as {
            give_to(user, dir, &self.shared.config.work_dir)?;
        }
        let cgroups = match self.shared.cgroups.get() {
            None => Vec::new(),
            Some(cg) => cg
                .create(
                    executor.as_str(),
                    Limits::for_executor(spec.cores, spec.memory_mb, cg.pids_max()),
                )
                .map_err(|e| e.to_string())?,
        };
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
                // The worker's rotation, with what the group says of its own.
                let rotation = self.shared.config.log_rotation.map(|r| {
                    let own = spec.launch.logs.unwrap_or_default();
                    super::rotate::Rotation {
                        max_bytes: own.max_bytes.unwrap_or(r.max_bytes),
                        files: own.files.unwrap_or(r.files),
                    }
                });
                let shim_args = ShimArgs {
                    status,
                    stdout: dir.join("stdout"),
                    stderr: rotation.map(|_| dir.join("stderr")),
                    rotation,
                    user: run_as.map(super::user::Identity::from),
                    cgroups: cgroups.clone(),
                    // A singleton's shim stops it by itself once the
                    // worker's word lapses, even with the worker process
                    // down or paused (docs/design.md#issue-45).
                    lease: spec.launch.disconnect.map(|rule| shim::Lease {
                        word: self.shared.config.work_dir.join(shim::WORD_FILE),
                        stop_after_ms: rule.stop_after_ms,
                        grace_ms: spec.launch.kill_grace_ms.unwrap_or(
                            u64::try_from(self.shared.config.kill_grace.as_millis())
                                .unwrap_or(u64::MAX),
                        ),
                    }),
                    command: spec.command.iter().map(Into::into).collect(),
                };
                let mut cmd = Command::new(shim_program);
                // The shim's stdout is the handshake pipe; it appends the
                // command's stdout to the file itself.
                cmd.args(shim_args.to_args()).stdout(Stdio::piped());
                cmd
            }
        };
        // Over the worker's own environment (inherited), in this order:
        // later ones win.
        let mut own: Vec<(OsString, OsString)> =
            spec.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
        own.extend([
            ("REGENT_FRAMEWORK_ID".into(), framework.as_str().into()),
            ("REGENT_EXECUTOR_ID".into(), executor.as_str().into()),
            ("REGENT_CORES".into(), spec.cores.to_string().into()),
            ("REGENT_MEMORY_MB".into(), spec.memory_mb.to_string().into()),
        ]);
        if let Some(user) = run_as {
            own.extend([
                ("USER".into(), user.name.clone().into()),
                ("LOGNAME".into(), user.name.clone().into()),
                ("HOME".into(), user.home.clone().into_os_string()),
            ]);
        }
        let context = ExecContext {
            user: run_as.cloned(),
            cwd: cwd.clone(),
            env: whole_env(std::env::vars_os().chain(own.iter().cloned())),
        };
        cmd.envs(own).current_dir(&cwd).stdin(Stdio::null()).stderr(stderr).process_group(0);
        if let Some(user) = run_as {
            if self.shared.config.shim.is_none() {
                // Without a shim, std drops to the user (uid and gid; the
                // supplementary groups are cleared, not set).
                cmd.uid(user.uid).gid(user.gid);
            }
        }
        match &self.shared.config.shim {
            None => {
                let child = cmd.spawn().map_err(|e| format!("cannot start {program:?}: {e}"))?;
                // Without a shim the child is moved after it started: what
                // it forks before that is not limited (embedders without a
                // shim only; the daemons always have one).
                let pid = child.id().to_string();
                for dir in &cgroups {
                    if let Err(e) = super::cgroup::write_file(&dir.join("cgroup.procs"), &pid) {
                        let pgid = Pid::from_child(&child);
                        destroy(child, pgid);
                        return Err(format!(
                            "cannot move the executor into cgroup {}: {e}",
                            dir.display()
                        ));
                    }
                }
                Ok((child, context))
            }
            Some(shim_program) => match cmd.spawn() {
                Ok(child) => Ok((child, context)),
                Err(e) => Err(format!(
                    "cannot start the executor shim {} (to run {program:?}): {e}",
                    shim_program.display()
                )),
            },
        }
    }

    /// The user a spec's `user` names, resolved, if this worker may run it
    /// (`None`: it is the worker's own user); the reason otherwise.
    fn user_for(&self, name: &str) -> Result<Option<super::user::RunAs>, String> {
        let config = &self.shared.config;
        if config.run_as.as_ref().is_some_and(|r| r.name == name) {
            return Ok(config.run_as.clone());
        }
        let me = rustix::process::geteuid();
        let own = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(me.as_raw()))
            .ok()
            .flatten()
            .map(|u| u.name);
        if config.run_as.is_none() && own.as_deref() == Some(name) {
            return Ok(None);
        }
        if !config.allowed_users.iter().any(|u| u == name) {
            let allowed = if config.allowed_users.is_empty() {
                "none".to_owned()
            } else {
                config.allowed_users.join(", ")
            };
            return Err(format!(
                "user {name:?} is not allowed on this worker (--allowed-users: {allowed})"
            ));
        }
        super::user::RunAs::lookup(name).map(Some).map_err(|e| e.to_string())
    }

    /// Under a shim: waits for its handshake line, `Ok` once the command
    /// runs, else the reason it could not be started (the shim's own,
    /// naming the OS error, or how the shim ended). Directly started
    /// commands need none.
    pub(super) fn handshake(&self, child: &mut Child) -> Result<(), String> {
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

    pub(super) fn fail(
        &self,
        executor: &ExecutorId,
        framework: &FrameworkId,
        reason: String,
    ) -> Launched {
        tracing::warn!(executor = %executor, %reason, "executor launch failed");
        remove_cgroup(&self.shared, executor);
        let stderr = self.executor_dir(executor).join("stderr");
        if let Ok(mut f) = OpenOptions::new().append(true).open(stderr) {
            let _ = writeln!(f, "regent: {reason}");
        }
        (self.shared.sink)(ExecEvent {
            check: None,
            executor: executor.clone(),
            framework: framework.clone(),
            state: ExecutorState::Failed { reason: reason.clone() },
        });
        Launched::Failed { reason }
    }
}

/// An executor's whole environment from `vars` (the worker's, then its
/// own over them: a later one wins), sorted by name, as its exec checks
/// get it ([`ExecContext::env`]); a variable whose name or value is not
/// UTF-8 is left out.
fn whole_env(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<(String, String)> {
    let mut env = std::collections::BTreeMap::new();
    for (k, v) in vars {
        match (k.into_string(), v.into_string()) {
            (Ok(k), Ok(v)) => {
                env.insert(k, v);
            }
            (Ok(k), Err(_)) => {
                // Its newer value is not UTF-8: no older one stands.
                env.remove(&k);
            }
            (Err(_), _) => {}
        }
    }
    env.into_iter().collect()
}

/// What [`Supervisor::launch`] did (the same outcome is also delivered as an
/// [`ExecEvent`], except for `AlreadyRunning`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launched {
    /// Killed while its artifacts were fetched: never started (reported
    /// `Killed`).
    Cancelled,
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

/// The waiter thread of one executor.
pub(super) fn wait_for(shared: &Shared, id: ExecutorId, entry: &Entry, mut child: Child) {
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
    let oom = end_cgroup(shared, &id);
    let state = match child.wait() {
        Ok(_) if killed => ExecutorState::Killed,
        // Under a shim, its record is the precise one; without (or when the
        // shim was killed before writing it), the exit status itself.
        Ok(status) => with_oom(
            match read_shim_status(shared, &id) {
                Some(recorded) => shim_state(recorded),
                None => ExecutorState::Exited { code: exit_code(status) },
            },
            oom,
        ),
        Err(e) => ExecutorState::Failed { reason: format!("cannot wait for the process: {e}") },
    };
    if let Err(e) = record::remove(&shared.running_dir, &id) {
        // The record stays; a later supervisor finds the pid gone (or
        // recycled) and reports it as already gone.
        tracing::error!(executor = %id, error = %e, "cannot remove executor record");
    }
    lock(&shared.executors).remove(&id);
    tracing::info!(executor = %id, ?state, "executor ended");
    (shared.sink)(ExecEvent {
        executor: id,
        framework: entry.framework.clone(),
        state,
        check: None,
    });
    lock(&entry.state).finished = true;
    entry.changed.notify_all();
}

/// The status the shim recorded for `id` (none without a shim, or when
/// the shim did not write one).
pub(super) fn read_shim_status(shared: &Shared, id: &ExecutorId) -> Option<ShimStatus> {
    shared.config.shim.as_ref()?;
    shim::read_status(&logs::executor_dir(&shared.config.work_dir, id).join(shim::STATUS_FILE))
}

/// The state to report for an executor that ended by itself as its shim
/// recorded: `Exited` with its code (`128 + signal` when a signal ended
/// it, as for a child waited for directly), or `Failed` when it could not
/// be started, or when the shim stopped it for its group's disconnect rule
/// — then with the reason the worker's core gives its own cut-off stop
/// (`stopped: no master heard for 30s`: the leader charges no retry,
/// docs/design.md#issue-45).
pub fn shim_state(status: ShimStatus) -> ExecutorState {
    match status {
        ShimStatus::Exited { code } => ExecutorState::Exited { code },
        ShimStatus::Signaled { signal } => ExecutorState::Exited { code: 128 + signal },
        ShimStatus::CannotStart { reason } => ExecutorState::Failed { reason },
        ShimStatus::CutOff { stop_after_ms } => ExecutorState::Failed {
            reason: regent_core::launch::cut_off_reason(regent_core::launch::Disconnect::after_ms(
                stop_after_ms,
            )),
        },
    }
}

/// Gives an executor's directory (and what it holds: output files, its
/// working directory, installed artifacts) to `user`, 0700, and makes
/// `<work_dir>/executors` traversable (0711) but not listable by it.
fn give_to(user: &super::user::RunAs, dir: &Path, work_dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    let set_mode = |path: &Path, mode: u32| {
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
            .map_err(|e| format!("cannot set the mode of {}: {e}", path.display()))
    };
    set_mode(&work_dir.join(super::EXECUTORS_DIR), 0o711)?;
    user.own_tree(dir).map_err(|e| {
        format!("cannot give {} to user {} (uid {}): {e}", dir.display(), user.name, user.uid)
    })?;
    set_mode(dir, 0o700)
}

/// How an executor that ended by itself is reported when its cgroup saw an
/// out-of-memory kill (`oom`, the reason): `Failed` with it — unless the
/// command exited 0, when the kill hit a helper it could do without and
/// its slot is done.
pub(super) fn with_oom(ended: ExecutorState, oom: Option<String>) -> ExecutorState {
    match (ended, oom) {
        (ended @ ExecutorState::Exited { code: 0 }, _) | (ended, None) => ended,
        (_, Some(reason)) => ExecutorState::Failed { reason },
    }
}

/// How the executor's cgroup saw its end (the out-of-memory reason when the
/// kernel killed it for memory), read before the cgroup is removed with
/// whatever still ran in it. `None` without cgroups.
pub(super) fn end_cgroup(shared: &Shared, id: &ExecutorId) -> Option<String> {
    let cg = shared.cgroups.get()?;
    let oom = cg.out_of_memory(id.as_str()).map(|o| o.reason());
    remove_cgroup(shared, id);
    oom
}

/// Kills what is left in `id`'s cgroup and removes it (logged when that
/// fails).
pub(super) fn remove_cgroup(shared: &Shared, id: &ExecutorId) {
    let Some(cg) = shared.cgroups.get() else { return };
    for problem in cg.remove(id.as_str(), Duration::from_secs(2)) {
        tracing::warn!(executor = %id, %problem, "cannot remove the executor's cgroup");
    }
}

/// Kills a just-spawned child's group and reaps it.
pub(super) fn destroy(mut child: Child, pgid: Pid) {
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

/// Logs how a launch went (`Running` or `Failed` itself comes back through
/// the supervisor's sink).
pub(crate) fn log_launched(executor: &ExecutorId, launched: Launched) {
    match launched {
        Launched::Started { pid } => tracing::debug!(%executor, pid, "executor started"),
        Launched::Failed { reason } => {
            tracing::warn!(%executor, %reason, "executor launch failed")
        }
        Launched::Cancelled => {
            tracing::info!(%executor, "executor killed while its artifacts were fetched")
        }
        Launched::AlreadyRunning => {
            tracing::warn!(%executor, "executor already runs; launch ignored")
        }
    }
}

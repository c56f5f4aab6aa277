//! What a previous supervisor over the same work directory left behind:
//! its records read back and classified ([`classify`]: another boot, a
//! reused pid, a group no longer there, a live group), live groups adopted
//! or killed by [`LeftBehindPolicy`], ended ones reported as their shim
//! recorded them, and adopted groups watched until they end.

use super::{
    lock, logs, record, shim, shim_state, Entry, EntryState, ExecEvent, LeftBehindPolicy, Shared,
};
use record::Record;
use regent_core::protocol::ExecutorState;
use regent_core::{ExecutorId, FrameworkId};
use rustix::process::{kill_process_group, test_kill_process_group, Pid, Signal};
use std::fs::{self};
use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

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
    /// The named ports it holds, as recorded (none in an old record).
    pub ports: Vec<(String, u16)>,
    /// The named resources' addresses it holds, as recorded (none in an
    /// old record).
    pub resources: regent_core::resources::Assigned,
    /// Its group's disconnect rule's `stop_after` in ms, as recorded
    /// (docs/design.md#issue-45).
    pub disconnect_ms: Option<u64>,
    /// Its group's health checks, as recorded (docs/design.md#issue-45).
    pub checks: Vec<regent_core::launch::CheckSpec>,
    /// What the new supervisor found and did.
    pub outcome: LeftBehindOutcome,
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

/// Settles the process groups recorded by a previous supervisor: adopts
/// (or, by policy, kills) those proven this worker's, reports the others,
/// removes the records of every group not adopted, and waits (up to the
/// reap timeout) for killed groups to go.
pub(super) fn reclaim(shared: &Arc<Shared>) -> io::Result<Vec<LeftBehind>> {
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
            ports: rec.ports.clone(),
            resources: rec.resources.clone(),
            disconnect_ms: rec.disconnect_ms,
            checks: rec.checks.clone(),
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
pub(super) fn adopt(
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
        kill_grace: rec.kill_grace_ms.map(Duration::from_millis),
        context: rec.sandbox.clone().map(Arc::new),
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
pub(super) fn watch_adopted(shared: &Shared, id: ExecutorId, entry: &Entry, start_time: u64) {
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
    let oom = super::launch::end_cgroup(shared, &id);
    let state = match recorded {
        _ if killed => ExecutorState::Killed,
        Some(recorded) => super::launch::with_oom(shim_state(recorded), oom),
        // Its end is unknown but for the kernel's out-of-memory kill.
        None => super::launch::with_oom(ExecutorState::Lost, oom),
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
    (shared.sink)(ExecEvent {
        executor: id,
        framework: entry.framework.clone(),
        state,
        check: None,
    });
    lock(&entry.state).finished = true;
    entry.changed.notify_all();
}

/// Whether the process group `pgid` exists (a group whose members we may
/// not signal exists too).
pub(super) fn group_exists(pgid: Pid) -> bool {
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
pub(super) fn group_alive(pgid: Pid) -> bool {
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

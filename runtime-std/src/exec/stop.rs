//! Stopping executors: a kill or a drain's stop (SIGTERM to the whole process
//! group, or the signal a named scale asked for, SIGKILL after the grace
//! period if the leader still runs; a group
//! is signalled only while it may be: see `Entry::may_signal`), and
//! `kill_all` on shutdown.

use super::{lock, Entry, EntryState, Supervisor};
use regent_core::api::StopSignal;
use regent_core::ExecutorId;
use rustix::process::{kill_process_group, Signal};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Supervisor {
    /// Kills an executor: SIGTERM to its whole process group, SIGKILL after
    /// the grace period (its group's `kill_grace`, else the supervisor's) if
    /// the leader still runs; its terminal state is then `Killed`. Returns
    /// `false` if no such executor runs. Idempotent: a repeated kill while
    /// one is under way does nothing more.
    pub fn kill(&self, executor: &ExecutorId) -> bool {
        let grace = lock(&self.shared.executors).get(executor).and_then(|e| e.kill_grace);
        self.stop(executor, grace.unwrap_or(self.shared.config.kill_grace))
    }

    /// Marks an executor whose artifacts are being fetched as killed (it
    /// never starts, or is killed once it does); `false` if none is. Called
    /// with the executors' map locked and the executor not in it, so a
    /// launch cannot slip between the two looks.
    fn cancel_preparing(&self, executor: &ExecutorId) -> bool {
        match lock(&self.shared.preparing).get_mut(executor) {
            Some(cancelled) => {
                *cancelled = true;
                true
            }
            None => false,
        }
    }

    /// Stops an executor (a drain): SIGTERM to its whole process group,
    /// SIGKILL after `grace` if the leader still runs; as [`Supervisor::kill`]
    /// with the grace period given. A stop or kill already under way is not
    /// repeated (its own grace period stands).
    pub fn stop(&self, executor: &ExecutorId, grace: Duration) -> bool {
        self.stop_with(executor, StopSignal::Term, grace)
    }

    /// Stops an executor with `first` instead of SIGTERM (a scale that names
    /// the executors it removes, `regent scale --remove --signal`), SIGKILL
    /// after `grace`; otherwise as [`Supervisor::stop`]. The executor's shim
    /// survives every [`StopSignal`] (it handles each), so it records how
    /// the command ended.
    pub fn stop_with(&self, executor: &ExecutorId, first: StopSignal, grace: Duration) -> bool {
        let entry = {
            let map = lock(&self.shared.executors);
            match map.get(executor) {
                Some(e) => e.clone(),
                None => return self.cancel_preparing(executor),
            }
        };
        if !request_kill_with(&entry, os_signal(first)) {
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
    /// SIGKILL to those still running after its grace period (its group's
    /// `kill_grace`, else the supervisor's; all counted from the same
    /// SIGTERM), then waits
    /// (bounded by the reap timeout) until each has been reported. Returns
    /// the executors that still were not reported when it gave up (normally
    /// none). Executors launched while it runs are not included: stop
    /// launching first.
    pub fn kill_all(&self) -> Vec<ExecutorId> {
        let entries: Vec<(ExecutorId, Arc<Entry>)> = {
            let map = lock(&self.shared.executors);
            // Those still fetching artifacts never start.
            lock(&self.shared.preparing).values_mut().for_each(|c| *c = true);
            map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        for (_, e) in &entries {
            request_kill(e);
        }
        let start = Instant::now();
        let mut by_grace: Vec<&(ExecutorId, Arc<Entry>)> = entries.iter().collect();
        by_grace.sort_by_key(|(_, e)| e.kill_grace.unwrap_or(self.shared.config.kill_grace));
        for (_, e) in by_grace {
            let grace_end = start + e.kill_grace.unwrap_or(self.shared.config.kill_grace);
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
}

/// Marks a kill requested and sends SIGTERM to the group; `false` if a kill
/// was already requested or the leader has exited.
pub(super) fn request_kill(entry: &Entry) -> bool {
    request_kill_with(entry, Signal::TERM)
}

/// The OS signal of a [`StopSignal`].
fn os_signal(s: StopSignal) -> Signal {
    match s {
        StopSignal::Term => Signal::TERM,
        StopSignal::Int => Signal::INT,
        StopSignal::Hup => Signal::HUP,
        StopSignal::Quit => Signal::QUIT,
        StopSignal::Usr1 => Signal::USR1,
        StopSignal::Usr2 => Signal::USR2,
    }
}

/// Marks a kill requested and sends `first` to the group; `false` if a
/// kill was already requested or the leader has exited.
fn request_kill_with(entry: &Entry, first: Signal) -> bool {
    let mut st = lock(&entry.state);
    if st.kill_requested || st.exited {
        return false;
    }
    st.kill_requested = true;
    // Under the lock: the leader is not reaped (or, adopted, was just seen),
    // so the group is ours.
    if entry.may_signal() {
        let _ = kill_process_group(entry.pgid, first);
    }
    true
}

/// Signals the group unless its leader has exited.
pub(super) fn signal(entry: &Entry, sig: Signal) {
    let st = lock(&entry.state);
    if !st.exited && entry.may_signal() {
        let _ = kill_process_group(entry.pgid, sig);
    }
}

/// Waits until `done` holds or the deadline passes; returns whether it
/// holds.
pub(super) fn wait_until(
    entry: &Entry,
    deadline: Instant,
    done: impl Fn(&EntryState) -> bool,
) -> bool {
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

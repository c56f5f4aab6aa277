//! The worker's health checks of the executors it runs
//! (docs/design.md#issue-45, docs/jobs.md#health-checks-groupcheck): when
//! each check runs, what its results add up to, and when an executor whose
//! checks fail is stopped. Only the worker counts results: a check probes a
//! port or runs a command on the executor's own host, so a partition between
//! worker and leader cannot fail it, and losing the leader stops nothing.
//!
//! Pure: time is the worker's `now`, the first run's jitter comes from the
//! worker's seeded generator, and a run is an order to the runtime
//! ([`CheckRun`]) answered by a result ([`CheckOutcome`]).
//!
//! * **Schedule.** A check first runs `grace` after RUNNING, jittered later
//!   by up to a tenth of its interval, then every `interval`. A run in flight is never started again: a check slower than
//!   its interval runs less often, never twice at once.
//! * **Damping.** Each check keeps a debt: a failure adds 2, a pass pays 1
//!   back, a skipped run counts nothing. The executor is stopped once a
//!   check with `failures > 0` owes `2 × failures`: N straight failures stop
//!   it, a check failing every other run after about 2N − 1 failures (a
//!   flapping service is still restarted), one passing 9 runs in 10 never.
//!   Results before `grace` has passed move the status, never the debt.
//! * **Backstop.** A run with no result by `timeout + 1 s` counts as
//!   skipped: an overloaded worker whose runner falls behind never causes a
//!   restart.
//! * **Manual checks** are reported by the framework through the leader; a
//!   report holds for the check's `ttl`. A TTL that lapses without one is a
//!   failure only while the worker hears from its leader; cut off, the
//!   check is held pending, so losing the leader never reads as an
//!   unhealthy service.

use crate::ids::ExecutorId;
use crate::launch::{CheckKind, CheckSpec};
use crate::protocol::{HealthReport, HealthStatus};
use crate::rng::Jitter;
use crate::time::Millis;
use std::collections::BTreeMap;

/// How long past its timeout a run may stay unanswered before it counts as
/// skipped ([`CheckOutcome::Skipped`]).
pub const BACKSTOP: Millis = Millis(1_000);

/// What the runtime probes for one run: everything decided here (the port
/// number, the host), so the runtime decides nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// `GET path` at `host:port`; passes when the status is in `expect`.
    Http {
        /// Where the executor's ports are reached.
        host: String,
        /// The number the worker gave the check's port.
        port: u16,
        /// The path asked for.
        path: String,
        /// The lowest and highest status that pass.
        expect: (u16, u16),
    },
    /// A TCP connection to `host:port`.
    Tcp {
        /// Where the executor's ports are reached.
        host: String,
        /// The number the worker gave the check's port.
        port: u16,
    },
    /// `command` run in the executor's sandbox: exit 0 passes.
    Exec {
        /// The program and its arguments.
        command: Vec<String>,
    },
}

/// One run of one check, for the runtime to carry out and answer with its
/// outcome within `timeout` (`Event::CheckResult` of the worker).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckRun {
    /// The executor checked.
    pub executor: ExecutorId,
    /// Which of its group's checks (its place in the list).
    pub check: u8,
    /// This run's number: a result is matched to it.
    pub run: u64,
    /// What to probe.
    pub probe: Probe,
    /// How long the run may take; past it, the runtime abandons the probe
    /// and answers `Failed` with the timeout.
    pub timeout: Millis,
}

/// What one run found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    /// The check passed.
    Passed,
    /// The check failed: what was seen (`GET /health answered 500`).
    Failed(String),
    /// The run could not be carried out for a reason of the worker's own (a
    /// full queue, a runner that gave no result): counts nothing.
    Skipped(String),
}

/// What a result did to its executor ([`Health::result`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The executor's health status, or what its report says of why,
    /// changed (report it).
    pub changed: bool,
    /// The executor's checks have failed enough: stop it (returned once).
    pub stop: bool,
}

/// What a sweep found due ([`Health::sweep`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Runs to start.
    pub runs: Vec<CheckRun>,
    /// Executors whose status (or its detail) changed (a backstop or a
    /// lapsed TTL).
    pub changed: Vec<ExecutorId>,
    /// Executors to stop (each returned once).
    pub stop: Vec<ExecutorId>,
}

/// An executor's health as the leader keeps it (never stored): what its
/// worker last reported and when it arrived by the leader's clock, so it is
/// shown as of any later time (`for_ms` plus the time since; the leader's
/// clock may have started after the status began).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthSeen {
    /// Passing, failing or pending.
    pub status: HealthStatus,
    /// How long the status had held when reported.
    pub for_ms: u64,
    /// When the report arrived, by the leader's clock.
    pub at: Millis,
    /// The first failing check's name and what it saw.
    pub detail: String,
}

impl HealthSeen {
    /// What a report says, received at `now`; its detail cut to
    /// [`crate::protocol::MAX_HEALTH_DETAIL`] (peer input).
    pub fn received(now: Millis, report: &HealthReport) -> HealthSeen {
        HealthSeen {
            status: report.status,
            for_ms: report.for_ms,
            at: now,
            detail: crate::launch::check::cut_detail(&report.detail),
        }
    }

    /// As a report at `now`.
    pub fn report(&self, now: Millis) -> HealthReport {
        HealthReport {
            status: self.status,
            for_ms: self.for_ms.saturating_add(now.since(self.at).0),
            detail: self.detail.clone(),
        }
    }
}

/// The checks of every live executor (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct Health {
    watched: BTreeMap<ExecutorId, Watched>,
    /// The last run number given.
    runs: u64,
    /// Test-only: a run is started while one is in flight.
    unsafe_overlapping_runs: bool,
    /// Test-only: a run skipped by the backstop counts as a failure.
    unsafe_skipped_runs_fail: bool,
    /// Test-only: a framework's report of a manual check does not put its
    /// TTL off.
    unsafe_manual_ttl_kept: bool,
}

#[derive(Clone, Debug)]
struct Watched {
    checks: Vec<CheckState>,
    /// When it was seen RUNNING; `None`: launched, not running yet.
    running_at: Option<Millis>,
    status: HealthStatus,
    /// When `status` last changed.
    since: Millis,
    /// Why it is being stopped, once its checks failed enough.
    stopping: Option<String>,
    /// The detail its last report carried ([`Watched::detail`]): a change
    /// of it is reported too, so a check that failed with "connection
    /// refused" and now fails with "answered 500" says so.
    shown: String,
}

#[derive(Clone, Debug)]
struct CheckState {
    spec: CheckSpec,
    /// `None` for a manual check (nothing to run).
    probe: Option<Probe>,
    next_at: Millis,
    /// The run in flight and its backstop.
    in_flight: Option<(u64, Millis)>,
    debt: u32,
    /// Failures counted since the debt was last paid off.
    failed: u32,
    last: Option<bool>,
    detail: String,
}

impl Health {
    /// No executor watched.
    pub fn new() -> Self {
        Health::default()
    }

    /// Test-only, never set outside tests: no executor watched, with the
    /// rules the simulator's `check_inflight` and `health_restarts`
    /// invariants guard broken (tests/tests/sim_can_fail.rs):
    /// `overlapping_runs` starts a check's run while one is in flight,
    /// `skipped_runs_fail` counts a run the backstop skipped as a failure,
    /// `manual_ttl_kept` lets a manual check's TTL lapse however often the
    /// framework reports.
    #[doc(hidden)]
    pub fn unsafe_broken(
        overlapping_runs: bool,
        skipped_runs_fail: bool,
        manual_ttl_kept: bool,
    ) -> Self {
        Health {
            unsafe_overlapping_runs: overlapping_runs,
            unsafe_skipped_runs_fail: skipped_runs_fail,
            unsafe_manual_ttl_kept: manual_ttl_kept,
            ..Health::default()
        }
    }

    /// `executor` was launched with `checks`; its ports numbered as
    /// `ports` (name, number), reached at `host`. Nothing runs before
    /// [`Health::running`]. A group without checks is not watched.
    pub fn launched(
        &mut self,
        executor: ExecutorId,
        checks: &[CheckSpec],
        ports: &[(String, u16)],
        host: &str,
    ) {
        if checks.is_empty() {
            return;
        }
        let number = |name: &str| ports.iter().find(|(n, _)| n == name).map_or(0, |(_, p)| *p);
        let checks = checks
            .iter()
            .map(|spec| {
                // A port the group does not ask for is refused at
                // declaration; a peer that sends one anyway gets port 0,
                // which fails its check.
                let probe = match &spec.kind {
                    CheckKind::Http { port, path, expect } => Some(Probe::Http {
                        host: host.to_string(),
                        port: number(port),
                        path: path.clone(),
                        expect: *expect,
                    }),
                    CheckKind::Tcp { port } => {
                        Some(Probe::Tcp { host: host.to_string(), port: number(port) })
                    }
                    CheckKind::Exec { command } => Some(Probe::Exec { command: command.clone() }),
                    CheckKind::Manual { .. } => None,
                };
                CheckState {
                    spec: spec.clone(),
                    probe,
                    next_at: Millis::MAX,
                    in_flight: None,
                    debt: 0,
                    failed: 0,
                    last: None,
                    detail: String::new(),
                }
            })
            .collect();
        let watched = Watched {
            checks,
            running_at: None,
            status: HealthStatus::Pending,
            since: Millis::ZERO,
            stopping: None,
            shown: String::new(),
        };
        self.watched.insert(executor, watched);
    }

    /// `executor` is RUNNING since `now`: its checks are scheduled (see the
    /// module documentation).
    pub fn running(&mut self, now: Millis, executor: &ExecutorId, jitter: &mut Jitter) {
        let Some(w) = self.watched.get_mut(executor) else { return };
        if w.running_at.is_some() {
            return;
        }
        w.running_at = Some(now);
        w.since = now;
        for c in &mut w.checks {
            let start = now + Millis(c.spec.grace_ms);
            c.next_at = match c.spec.kind {
                // A manual check's first report is due a TTL after grace.
                CheckKind::Manual { ttl_ms } => start + Millis(ttl_ms),
                // Up to a tenth of the interval later, so the checks of
                // executors started together spread out; never before
                // grace has passed, so the first result counts.
                _ => start + Millis(jitter.below(c.spec.interval_ms / 10 + 1)),
            };
        }
    }

    /// `executor` ended: no longer watched. The reason for its end, if its
    /// checks stopped it ([`crate::launch::unhealthy_reason`]).
    pub fn forget(&mut self, executor: &ExecutorId) -> Option<String> {
        self.watched.remove(executor)?.stopping
    }

    /// Whether `executor` is watched and has a check named `name`: its
    /// place in the list.
    pub fn check_index(&self, executor: &ExecutorId, name: &str) -> Option<u8> {
        let w = self.watched.get(executor)?;
        w.checks.iter().position(|c| c.spec.name == name).and_then(|i| u8::try_from(i).ok())
    }

    /// Whether `executor`'s check `check` is a manual one.
    pub fn is_manual(&self, executor: &ExecutorId, check: u8) -> bool {
        self.watched
            .get(executor)
            .and_then(|w| w.checks.get(usize::from(check)))
            .is_some_and(|c| matches!(c.spec.kind, CheckKind::Manual { .. }))
    }

    /// The earliest time something is due: a run, a backstop, a manual
    /// check's TTL.
    pub fn next_deadline(&self) -> Option<Millis> {
        self.watched
            .values()
            .filter(|w| w.running_at.is_some() && w.stopping.is_none())
            .flat_map(|w| &w.checks)
            .map(|c| match c.in_flight {
                Some((_, backstop)) => backstop,
                None => c.next_at,
            })
            .filter(|at| *at != Millis::MAX)
            .min()
    }

    /// Everything due at `now`: runs to start, backstops passed (skipped),
    /// manual TTLs lapsed (a failure if `leader_heard`, else held pending).
    #[must_use]
    pub fn sweep(&mut self, now: Millis, leader_heard: bool) -> Sweep {
        let mut sweep = Sweep::default();
        for (id, w) in &mut self.watched {
            let Some(running_at) = w.running_at else { continue };
            if w.stopping.is_some() {
                continue;
            }
            let mut stop = false;
            for (i, c) in w.checks.iter_mut().enumerate() {
                if let Some((_, backstop)) = c.in_flight {
                    if backstop > now && !self.unsafe_overlapping_runs {
                        continue;
                    }
                    if backstop <= now {
                        // Skipped: counts nothing; the next run is due now.
                        c.in_flight = None;
                        c.detail = "the check runner gave no result".into();
                        c.next_at = c.next_at.max(now);
                        if self.unsafe_skipped_runs_fail {
                            let detail = "the check runner gave no result".to_string();
                            stop |= c.count(now, running_at, false, detail);
                        }
                    }
                }
                if c.next_at > now {
                    continue;
                }
                let interval = Millis(c.spec.interval_ms);
                match (&c.probe, c.spec.kind.clone()) {
                    (Some(probe), _) => {
                        self.runs += 1;
                        let timeout = Millis(c.spec.timeout_ms);
                        c.in_flight = Some((self.runs, now + timeout + BACKSTOP));
                        sweep.runs.push(CheckRun {
                            executor: id.clone(),
                            // At most MAX_CHECKS (8) checks are declared.
                            check: u8::try_from(i).unwrap_or(u8::MAX),
                            run: self.runs,
                            probe: probe.clone(),
                            timeout,
                        });
                        // On the beat; after a late sweep or a slow run,
                        // an interval from now (never a burst to catch up).
                        c.next_at = c.next_at + interval;
                        if c.next_at <= now {
                            c.next_at = now + interval;
                        }
                    }
                    (None, CheckKind::Manual { ttl_ms }) => {
                        c.next_at = now + Millis(ttl_ms);
                        if leader_heard {
                            let detail = format!("no report within its ttl of {ttl_ms} ms");
                            stop |= c.count(now, running_at, false, detail);
                        } else {
                            // Cut off from the leader, no report could
                            // arrive: held, never counted.
                            c.last = None;
                            c.detail = "held: no leader heard to relay a report".into();
                        }
                    }
                    (None, _) => c.next_at = Millis::MAX,
                }
            }
            if w.refresh(now) {
                sweep.changed.push(id.clone());
            }
            if stop {
                w.stopping = w.unhealthy_reason();
                sweep.stop.push(id.clone());
            }
        }
        sweep
    }

    /// The outcome of run `run` of `executor`'s check `check`, at `now`. A
    /// result for an unknown executor, check or run (a stale one, one the
    /// backstop already skipped) is ignored.
    pub fn result(
        &mut self,
        now: Millis,
        executor: &ExecutorId,
        check: u8,
        run: u64,
        outcome: CheckOutcome,
    ) -> Verdict {
        let Some(w) = self.watched.get_mut(executor) else { return Verdict::default() };
        let (Some(running_at), None) = (w.running_at, &w.stopping) else {
            return Verdict::default();
        };
        let Some(c) = w.checks.get_mut(usize::from(check)) else { return Verdict::default() };
        if c.in_flight.map(|(r, _)| r) != Some(run) {
            return Verdict::default();
        }
        c.in_flight = None;
        // A run slower than its interval: the next is due now, not before.
        c.next_at = c.next_at.max(now);
        let stop = match outcome {
            CheckOutcome::Passed => c.count(now, running_at, true, String::new()),
            CheckOutcome::Failed(detail) => c.count(now, running_at, false, detail),
            CheckOutcome::Skipped(detail) => {
                c.detail = crate::launch::check::cut_detail(&detail);
                false
            }
        };
        w.verdict(now, stop)
    }

    /// A manual check's report (relayed by the leader from the framework):
    /// one result of `executor`'s check `check`, holding for its TTL. Not
    /// a manual check, or not watched: ignored.
    pub fn report(
        &mut self,
        now: Millis,
        executor: &ExecutorId,
        check: u8,
        passing: bool,
        detail: &str,
    ) -> Verdict {
        let Some(w) = self.watched.get_mut(executor) else { return Verdict::default() };
        let (Some(running_at), None) = (w.running_at, &w.stopping) else {
            return Verdict::default();
        };
        let Some(c) = w.checks.get_mut(usize::from(check)) else { return Verdict::default() };
        let CheckKind::Manual { ttl_ms } = c.spec.kind else { return Verdict::default() };
        if !self.unsafe_manual_ttl_kept {
            c.next_at = now + Millis(ttl_ms);
        }
        let stop = c.count(now, running_at, passing, detail.to_string());
        w.verdict(now, stop)
    }

    /// `executor`'s health as its reports carry it: `for_ms` is how long
    /// the status has held, by this worker's clock. `None` if it has no
    /// checks or does not run yet.
    pub fn of(&self, now: Millis, executor: &ExecutorId) -> Option<HealthReport> {
        let w = self.watched.get(executor)?;
        w.running_at?;
        Some(HealthReport { status: w.status, for_ms: now.since(w.since).0, detail: w.detail() })
    }
}

impl CheckState {
    /// Counts one result at `now`; whether it brings the check to its
    /// stopping debt.
    fn count(&mut self, now: Millis, running_at: Millis, passed: bool, detail: String) -> bool {
        self.last = Some(passed);
        self.detail = crate::launch::check::cut_detail(&detail);
        if now < running_at + Millis(self.spec.grace_ms) {
            return false; // in grace: the status moves, the debt does not
        }
        if passed {
            self.debt = self.debt.saturating_sub(1);
            if self.debt == 0 {
                self.failed = 0;
            }
            return false;
        }
        self.debt = self.debt.saturating_add(2);
        self.failed = self.failed.saturating_add(1);
        self.spec.failures > 0 && self.debt >= 2 * self.spec.failures
    }
}

impl Watched {
    /// Recomputes the status at `now`; whether it, or its detail, changed.
    fn refresh(&mut self, now: Millis) -> bool {
        let status = if self.checks.iter().any(|c| c.last == Some(false)) {
            HealthStatus::Failing
        } else if self.checks.iter().all(|c| c.last == Some(true)) {
            HealthStatus::Passing
        } else {
            HealthStatus::Pending
        };
        let detail = self.detail();
        if status == self.status {
            // The same status for another reason is news too (not how
            // long it held).
            let changed = detail != self.shown;
            self.shown = detail;
            return changed;
        }
        self.shown = detail;
        self.status = status;
        self.since = now;
        true
    }

    /// What a report says of why: the first failing check's name and
    /// detail; else the first check with a word.
    fn detail(&self) -> String {
        let failing = self.checks.iter().find(|c| c.last == Some(false));
        match failing.or_else(|| self.checks.iter().find(|c| !c.detail.is_empty())) {
            Some(c) if !c.detail.is_empty() => {
                crate::launch::check::cut_detail(&format!("{}: {}", c.spec.name, c.detail))
            }
            _ => String::new(),
        }
    }

    /// The verdict of a counted result (`stop`: its check reached its debt).
    fn verdict(&mut self, now: Millis, stop: bool) -> Verdict {
        let changed = self.refresh(now);
        if stop {
            self.stopping = self.unhealthy_reason();
        }
        Verdict { changed, stop }
    }

    /// The reason of the first check that reached its debt.
    fn unhealthy_reason(&self) -> Option<String> {
        let c =
            self.checks.iter().find(|c| c.spec.failures > 0 && c.debt >= 2 * c.spec.failures)?;
        Some(crate::launch::unhealthy_reason(&c.spec.name, c.failed, &c.detail))
    }
}

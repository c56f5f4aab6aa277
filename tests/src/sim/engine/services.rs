//! The services model (`regent-soak --services`, docs/design.md#issue-45
//! item 5, docs/simulator.md#services): groups with health checks and
//! `[group.update]` policies, and the simulated check runner that answers
//! the worker's check runs.
//!
//! The worker's own health code (`core/src/health.rs`) decides when a check
//! runs and counts what it found; the simulator only plays the runtime's
//! probe. What a probe finds is a per-executor fault plan
//! ([`Plan`]), drawn when the executor starts: most are healthy, some
//! always fail, some alternate, some answer slowly (later than their
//! interval, or so late that the worker's backstop has skipped the run).
//! An executor of an unhealthy version ([`UNHEALTHY`] in its command)
//! always fails. A probe runs on the executor's own host: a partition
//! between worker and leader changes nothing it finds (the
//! `health_restarts` invariant holds the worker to that).

use super::{Ev, World};
use regent_core::health::{CheckOutcome, CheckRun, BACKSTOP};
use regent_core::launch::{CheckKind, CheckSpec};
use regent_core::policy::UpdatePolicy;
use regent_core::protocol::{ExecutorSpec, GroupSpec};
use regent_core::{ExecutorId, Millis};
use std::collections::BTreeMap;

/// A command argument that makes a version unhealthy: it runs, and every
/// check of its executors fails (`--services`' broken updates).
pub(crate) const UNHEALTHY: &str = "unhealthy-version";

/// What one executor's checks find, drawn when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Every run passes, at once.
    Healthy,
    /// Every run fails ("exit 1").
    Unhealthy,
    /// Runs fail and pass in turn, starting with a pass.
    Flappy,
    /// Runs pass, but late: half of them after the check's interval
    /// (before its timeout), half after the worker's backstop (the worker
    /// skipped the run; the late result is stale).
    SlowCheck,
}

/// The check model's state (one per world).
#[derive(Debug)]
pub(crate) struct Model {
    rng: fastrand::Rng,
    /// Each checked executor's plan and the checks of its group.
    pub(crate) plans: BTreeMap<ExecutorId, (Plan, Vec<CheckSpec>)>,
    /// Flapping executors' next answer (`true`: pass).
    flip: BTreeMap<ExecutorId, bool>,
    /// Runs in flight as the worker counts them: (worker, process
    /// generation, executor, check) -> (run, its backstop)
    /// (`check_inflight`).
    pub(crate) in_flight: BTreeMap<(usize, u64, ExecutorId, u8), (u64, Millis)>,
    /// When each executor's process was seen RUNNING, by worker.
    pub(crate) running_at: BTreeMap<(usize, ExecutorId), Millis>,
    /// Failures delivered to its worker, in time to count (after grace,
    /// before the backstop), by executor and check (`health_restarts`).
    pub(crate) failures: BTreeMap<(ExecutorId, u8), u32>,
    /// Check runs asked for.
    pub(crate) runs: u64,
}

impl Model {
    pub(crate) fn new(seed: u64) -> Self {
        Model {
            rng: fastrand::Rng::with_seed(seed ^ 0x6865_616c_7468),
            plans: BTreeMap::new(),
            flip: BTreeMap::new(),
            in_flight: BTreeMap::new(),
            running_at: BTreeMap::new(),
            failures: BTreeMap::new(),
            runs: 0,
        }
    }
}

/// A service group's check: one `exec` check (no port needed), its timing
/// drawn so some checks are slower than their interval.
pub(crate) fn checks(rng: &mut fastrand::Rng) -> Vec<CheckSpec> {
    let interval_ms = rng.u64(500..3_000);
    vec![CheckSpec {
        name: "ready".into(),
        kind: CheckKind::Exec { command: vec!["ready".into()] },
        interval_ms,
        // Up to above the interval: a run may outlast it.
        timeout_ms: rng.u64(300..4_000),
        grace_ms: rng.u64(0..2_000),
        failures: rng.u32(2..=3),
    }]
}

/// A service group's update policy for `slots` slots.
pub(crate) fn update_policy(rng: &mut fastrand::Rng, slots: u32) -> UpdatePolicy {
    let min_healthy_time_ms = rng.u64(500..4_000);
    let healthy_deadline_ms = min_healthy_time_ms + rng.u64(6_000..20_000);
    let progress_deadline_ms =
        if rng.bool() { 0 } else { healthy_deadline_ms + rng.u64(5_000..20_000) };
    UpdatePolicy {
        max_parallel: rng.u32(1..=slots.max(1)),
        min_healthy_time_ms,
        healthy_deadline_ms,
        progress_deadline_ms,
        canary: if slots > 1 && rng.u8(0..3) == 0 { 1 } else { 0 },
        // Nothing in the simulator promotes: canaries promote themselves.
        auto_promote: true,
        auto_revert: rng.u8(0..6) > 0,
    }
}

/// Makes `spec` a service with checks and an update policy.
pub(crate) fn make_service(spec: &mut GroupSpec, rng: &mut fastrand::Rng) {
    spec.launch.checks = checks(rng);
    spec.policy.update = Some(Box::new(update_policy(rng, spec.slots)));
    spec.policy.restart.mode = regent_core::policy::RestartMode::Service;
    spec.policy.restart.attempts = None;
}

impl World {
    /// A worker starts executor `x` of `spec`: its checks' plan is drawn.
    pub(crate) fn plan_checks(&mut self, x: &ExecutorId, spec: &ExecutorSpec) {
        if spec.launch.checks.is_empty() {
            return;
        }
        let plan = if spec.command.iter().any(|c| c == UNHEALTHY) {
            Plan::Unhealthy
        } else {
            match self.checks.rng.u8(0..100) {
                0..78 => Plan::Healthy,
                78..85 => Plan::Unhealthy,
                85..93 => Plan::Flappy,
                _ => Plan::SlowCheck,
            }
        };
        self.log(|| format!("checks of {x}: {plan:?}"));
        self.checks.plans.insert(x.clone(), (plan, spec.launch.checks.clone()));
    }

    /// Worker `w` (process `gen`) asks for one check run: the probe's
    /// outcome is delivered after its latency.
    pub(crate) fn run_check(&mut self, w: usize, gen: u64, run: CheckRun) {
        self.checks.runs += 1;
        super::invariants::check_inflight::on_run(self, w, gen, &run);
        let key = (w, gen, run.executor.clone(), run.check);
        let backstop = self.now + run.timeout + BACKSTOP;
        self.checks.in_flight.insert(key, (run.run, backstop));
        let x = run.executor.clone();
        let runs = self.execs.get(&(w, x.clone())) == Some(&true);
        let (plan, interval) = match self.checks.plans.get(&x) {
            Some((plan, specs)) => {
                let interval = specs.get(usize::from(run.check)).map_or(1_000, |c| c.interval_ms);
                (*plan, interval)
            }
            None => (Plan::Healthy, 1_000),
        };
        let quick = Millis(self.checks.rng.u64(1..50));
        let (outcome, after) = if !runs {
            // Its process is gone (or never ran here): nothing answers.
            (CheckOutcome::Failed("exit 1: connection refused".into()), quick)
        } else {
            match plan {
                Plan::Healthy => (CheckOutcome::Passed, quick),
                Plan::Unhealthy => (CheckOutcome::Failed("exit 1".into()), quick),
                Plan::Flappy => {
                    let pass = self.checks.flip.entry(x.clone()).or_insert(true);
                    let outcome = if *pass {
                        CheckOutcome::Passed
                    } else {
                        CheckOutcome::Failed("exit 1 (flapping)".into())
                    };
                    *pass = !*pass;
                    (outcome, quick)
                }
                Plan::SlowCheck => {
                    let timeout = run.timeout.0;
                    let late = if self.checks.rng.bool() {
                        // After its interval if the timeout allows, before
                        // the timeout.
                        let from = interval.min(timeout.saturating_sub(1)).max(1);
                        Millis(self.checks.rng.u64(from..timeout.max(from + 1)))
                    } else {
                        // The runner fell behind: past the backstop.
                        run.timeout + BACKSTOP + Millis(self.checks.rng.u64(1..2_000))
                    };
                    (CheckOutcome::Passed, late)
                }
            }
        };
        let ev = Ev::CheckResult { w, gen, x, check: run.check, run: run.run, outcome };
        self.after(after, ev);
    }

    /// A probe's outcome reaches worker `w`'s process `gen`.
    pub(crate) fn check_result(
        &mut self,
        w: usize,
        gen: u64,
        x: ExecutorId,
        check: u8,
        run: u64,
        outcome: CheckOutcome,
    ) {
        if self.workers[w].p.gen != gen || !self.workers[w].p.up {
            return;
        }
        if self.workers[w].p.suspended(self.now) {
            // The runner sleeps with its host.
            let at = self.workers[w].p.paused_until + Millis(1);
            self.at(at, Ev::CheckResult { w, gen, x, check, run, outcome });
            return;
        }
        let key = (w, gen, x.clone(), check);
        if let Some((r, backstop)) = self.checks.in_flight.get(&key).copied() {
            if r == run {
                self.checks.in_flight.remove(&key);
                let grace = self
                    .checks
                    .plans
                    .get(&x)
                    .and_then(|(_, specs)| specs.get(usize::from(check)))
                    .map_or(0, |c| c.grace_ms);
                let counted = self.now < backstop
                    && self
                        .checks
                        .running_at
                        .get(&(w, x.clone()))
                        .is_some_and(|t| self.now >= *t + Millis(grace));
                if counted && matches!(outcome, CheckOutcome::Failed(_)) {
                    *self.checks.failures.entry((x.clone(), check)).or_insert(0) += 1;
                }
            }
        }
        self.log(|| format!("w{w} check {check} run {run} of {x}: {outcome:?}"));
        let input =
            regent_core::node::worker::Input::CheckResult { executor: x, check, run, outcome };
        self.deliver(super::Node::Worker(w), gen, super::Input::Worker(input));
    }
}

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

use super::{ConnId, Ev, World};
use regent_core::health::{CheckOutcome, CheckRun, BACKSTOP};
use regent_core::ids::QueryId;
use regent_core::launch::{CheckKind, CheckSpec};
use regent_core::node::master::{self as mnode, Answer, Query};
use regent_core::policy::UpdatePolicy;
use regent_core::protocol::Message;
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
    /// The manual checks' reporters and the operator's promotions
    /// ([`Manual`]).
    pub(crate) manual: Manual,
}

/// What one executor's framework reports of its `manual` check, drawn when
/// the executor is seen RUNNING (docs/design.md#issue-45 item 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Report {
    /// Passing, well within the check's TTL.
    Healthy,
    /// Failing, well within the TTL.
    Unhealthy,
    /// Failing and passing in turn, starting with a pass.
    Flappy,
    /// Never reports: the TTL lapses.
    Silent,
    /// Passing, but sometimes later than the TTL.
    Late,
}

/// The reporter of manual checks and the operator who promotes canaries
/// (`--services`, docs/design.md#issue-45 item 5, docs/simulator.md#services),
/// drawn from a generator of its own so the check runner's draws, and so
/// every recorded seed's checks, stay as they were.
///
/// The reporter is a framework asking the leader through the API on a
/// master's host (a local query, like the API client's): a report goes to
/// whichever master leads as far as it knows, which relays it over the
/// simulated network to the executor's worker (`HealthOnWorker`), so
/// partitions, failovers and lost relays apply. What the worker took in
/// is recorded here for `health_restarts`.
#[derive(Debug)]
pub(crate) struct Manual {
    rng: fastrand::Rng,
    /// Each reported executor's plan and its group's manual checks (index,
    /// TTL).
    plans: BTreeMap<ExecutorId, (Report, Vec<(u8, u64)>)>,
    /// Flapping reporters' next report (`true`: passing).
    flip: BTreeMap<ExecutorId, bool>,
    /// The process of each worker that saw each executor RUNNING, by
    /// worker and executor: reports are counted only in it.
    pub(crate) running_gen: BTreeMap<(usize, ExecutorId), u64>,
    /// The last report a worker took in of each manual check, or the end
    /// of the check's grace (by the simulator's clock): TTLs lapse from it.
    pub(crate) last: BTreeMap<(ExecutorId, u8), Millis>,
    /// TTLs that may have lapsed between the reports taken in, by
    /// executor and check: whole TTLs between two reports
    /// (`health_restarts`).
    pub(crate) lapses: BTreeMap<(ExecutorId, u8), u32>,
    /// The master at the other end of each connection that carried a
    /// relayed report to a worker.
    pub(crate) relayed_by: BTreeMap<ConnId, usize>,
    /// Queries asked and not answered: query -> promotion (`true`) or
    /// report.
    asked: BTreeMap<u64, bool>,
    next_query: u64,
    /// Reports sent to a master.
    pub(crate) reports_sent: u64,
    /// Reports a worker took in (relayed by the master it follows, to a
    /// running executor of its current process).
    pub(crate) reports_counted: u64,
    /// Executors stopped by a failing manual check (its name in the
    /// reason).
    pub(crate) stopped: std::collections::BTreeSet<ExecutorId>,
    /// Promotions sent.
    pub(crate) promotions_sent: u64,
    /// Promotions accepted (something awaited promotion; durable).
    pub(crate) promotions: u64,
    /// Promotions refused (nothing awaited one, or no such job yet).
    pub(crate) promotions_refused: u64,
}

/// Where the reporter's and the promoter's query numbers start (apart from
/// the API client's).
pub(crate) const QUERY_BASE: u64 = 1 << 50;

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
            manual: Manual {
                rng: fastrand::Rng::with_seed(seed ^ 0x6d61_6e75_616c),
                plans: BTreeMap::new(),
                flip: BTreeMap::new(),
                running_gen: BTreeMap::new(),
                last: BTreeMap::new(),
                lapses: BTreeMap::new(),
                asked: BTreeMap::new(),
                relayed_by: BTreeMap::new(),
                next_query: QUERY_BASE,
                reports_sent: 0,
                reports_counted: 0,
                stopped: Default::default(),
                promotions_sent: 0,
                promotions: 0,
                promotions_refused: 0,
            },
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
        // [`make_service`] leaves most canaries to the operator.
        auto_promote: true,
        auto_revert: rng.u8(0..6) > 0,
    }
}

/// Makes `spec` a service with checks and an update policy; `more` (a
/// generator of its own, so `rng`'s draws stay as they were) adds a
/// `manual` check to half of them and makes most canaries wait for an
/// operator's promotion (docs/design.md#issue-45 item 5).
pub(crate) fn make_service(
    spec: &mut GroupSpec,
    rng: &mut fastrand::Rng,
    more: &mut fastrand::Rng,
) {
    spec.launch.checks = checks(rng);
    let mut update = update_policy(rng, spec.slots);
    if more.bool() {
        spec.launch.checks.push(CheckSpec {
            name: "manual".into(),
            kind: CheckKind::Manual { ttl_ms: more.u64(800..4_000) },
            interval_ms: 1_000,
            timeout_ms: 1_000,
            grace_ms: more.u64(0..2_000),
            failures: more.u32(2..=3),
        });
    }
    // Most groups of more than one slot roll out behind canaries (1 to
    // all but one slot), two in three of them promoted by the operator.
    if update.canary > 0 || (spec.slots > 1 && more.u8(0..3) > 0) {
        update.canary = more.u32(1..spec.slots.max(2));
        update.auto_promote = more.u8(0..3) == 0;
    }
    spec.policy.update = Some(Box::new(update));
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
        self.plan_reports(x, spec);
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

impl World {
    /// Executor `x` of `spec` starts: its framework's reporter plan for
    /// its manual checks, if it has any, is drawn.
    fn plan_reports(&mut self, x: &ExecutorId, spec: &ExecutorSpec) {
        let manual: Vec<(u8, u64)> = spec
            .launch
            .checks
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match c.kind {
                CheckKind::Manual { ttl_ms } => Some((i as u8, ttl_ms)),
                _ => None,
            })
            .collect();
        if manual.is_empty() {
            return;
        }
        let report = if spec.command.iter().any(|c| c == UNHEALTHY) {
            Report::Unhealthy
        } else {
            match self.checks.manual.rng.u8(0..100) {
                0..70 => Report::Healthy,
                70..78 => Report::Unhealthy,
                78..86 => Report::Flappy,
                86..93 => Report::Silent,
                _ => Report::Late,
            }
        };
        self.log(|| format!("manual reports of {x}: {report:?}"));
        self.checks.manual.plans.insert(x.clone(), (report, manual));
    }

    /// Worker `w` (process `gen`) sees executor `x` RUNNING: its manual
    /// checks' TTLs run from the end of their grace, and its framework
    /// starts reporting.
    pub(crate) fn manual_running(&mut self, w: usize, gen: u64, x: &ExecutorId) {
        let Some((report, manual)) = self.checks.manual.plans.get(x).cloned() else { return };
        self.checks.manual.running_gen.insert((w, x.clone()), gen);
        for (c, _) in &manual {
            let grace = self.grace_of(x, *c);
            self.checks.manual.last.insert((x.clone(), *c), self.now + Millis(grace));
        }
        if report != Report::Silent {
            let first = self.report_gap(report, &manual);
            self.after(first, Ev::ManualReport { w, x: x.clone() });
        }
    }

    /// Worker `w`'s new process `gen` re-adopts executor `x` and is given
    /// its checks again (`Input::Readopted`, docs/design.md#issue-45): as
    /// that process's health code does, its checks count from now, grace
    /// first, and the reports it takes in are its own. The framework's
    /// reporter runs on as it was (it never stopped: the executor ran).
    pub(crate) fn readopted(&mut self, w: usize, gen: u64, x: &ExecutorId) {
        if !self.checks.plans.contains_key(x) {
            return;
        }
        self.checks.running_at.insert((w, x.clone()), self.now);
        let Some((_, manual)) = self.checks.manual.plans.get(x).cloned() else { return };
        self.checks.manual.running_gen.insert((w, x.clone()), gen);
        for (c, ttl) in &manual {
            let key = (x.clone(), *c);
            // The TTLs that lapsed under the process that died stay
            // allowed (the bound only grows), and the new one's run from
            // the end of its grace.
            if let Some(last) = self.checks.manual.last.get(&key).copied() {
                let lapsed = (self.now.0.saturating_sub(last.0) / ttl.max(&1)) as u32;
                *self.checks.manual.lapses.entry(key.clone()).or_insert(0) += lapsed;
            }
            let grace = self.grace_of(x, *c);
            self.checks.manual.last.insert(key, self.now + Millis(grace));
        }
    }

    fn grace_of(&self, x: &ExecutorId, check: u8) -> u64 {
        self.checks
            .plans
            .get(x)
            .and_then(|(_, specs)| specs.get(usize::from(check)))
            .map_or(0, |c| c.grace_ms)
    }

    /// The time to a reporter's next report.
    fn report_gap(&mut self, report: Report, manual: &[(u8, u64)]) -> Millis {
        let ttl = manual.iter().map(|(_, t)| *t).min().unwrap_or(1_000);
        let rng = &mut self.checks.manual.rng;
        Millis(match report {
            Report::Late => rng.u64(ttl / 2..ttl * 3 / 2),
            _ => rng.u64(ttl / 4..ttl * 2 / 3),
        })
    }

    /// The framework of executor `x` (on worker `w`) reports its manual
    /// checks to the master it takes for the leader, while `x` runs.
    pub(crate) fn manual_report(&mut self, w: usize, x: ExecutorId) {
        if self.execs.get(&(w, x.clone())) != Some(&true) {
            return; // it ended: nothing more to report
        }
        let Some((report, manual)) = self.checks.manual.plans.get(&x).cloned() else { return };
        let pick = self.checks.manual.rng.usize(..);
        let m = self.leader_or(pick);
        if self.masters[m].p.up {
            for (c, _) in &manual {
                let passing = match report {
                    Report::Healthy | Report::Late | Report::Silent => true,
                    Report::Unhealthy => false,
                    Report::Flappy => {
                        let pass = self.checks.manual.flip.entry(x.clone()).or_insert(true);
                        *pass = !*pass;
                        !*pass
                    }
                };
                let name = self
                    .checks
                    .plans
                    .get(&x)
                    .and_then(|(_, specs)| specs.get(usize::from(*c)))
                    .map_or_else(|| "manual".to_owned(), |s| s.name.clone());
                self.checks.manual.next_query += 1;
                let request = self.checks.manual.next_query;
                let detail = if passing { String::new() } else { "answered 503".into() };
                let msg = Message::ReportHealth {
                    request,
                    executor: x.clone(),
                    check: name,
                    passing,
                    detail,
                };
                self.checks.manual.reports_sent += 1;
                self.manual_ask(m, request, false, msg);
            }
        }
        let next = self.report_gap(report, &manual);
        self.after(next, Ev::ManualReport { w, x });
    }

    /// The operator promotes subscriber `s`'s deployments (its first
    /// group's, or every group's; `None`: the API client's job `api0`'s),
    /// at random times: before, while and after one awaits promotion,
    /// across failovers (`regent job promote`).
    pub(crate) fn promote(&mut self, s: Option<usize>) {
        let next = Millis(self.checks.manual.rng.u64(1_000..10_000));
        self.after(next, Ev::Promote { s });
        let (job, group) = match s {
            Some(s) => match self.subs[s].framework.clone() {
                Some(job) => (job, self.subs[s].specs[0].group.clone()),
                None => return,
            },
            None => (regent_core::FrameworkId("api0".into()), "web".to_owned()),
        };
        let group = self.checks.manual.rng.bool().then_some(group);
        let pick = self.checks.manual.rng.usize(..);
        let m = self.leader_or(pick);
        if !self.masters[m].p.up {
            return;
        }
        self.checks.manual.next_query += 1;
        let request = self.checks.manual.next_query;
        self.checks.manual.promotions_sent += 1;
        self.manual_ask(m, request, true, Message::PromoteDeployment { request, job, group });
    }

    fn manual_ask(&mut self, m: usize, request: u64, promotion: bool, msg: Message) {
        self.checks.manual.asked.insert(request, promotion);
        self.log(|| format!("framework asks m{m} ({request}): {msg:?}"));
        let ask = Query::Command { msg, principal: Box::new(regent_core::token::Principal::Root) };
        let input = mnode::Input::Query { query: QueryId(request), ask };
        self.local_input(super::Node::Master(m), super::Input::Master(input));
    }

    /// Master `m` answers `query`: whether it was the reporter's or the
    /// operator's (then it is counted here).
    pub(crate) fn manual_answer(&mut self, m: usize, query: QueryId, answer: &Answer) -> bool {
        let Some(promotion) = self.checks.manual.asked.remove(&query.0) else {
            return query.0 >= QUERY_BASE;
        };
        self.log(|| format!("framework hears from m{m} ({query}): {answer:?}"));
        if promotion {
            match answer {
                Answer::Reply(Message::RequestAccepted { .. }) => {
                    self.checks.manual.promotions += 1
                }
                Answer::Reply(Message::RequestRefused { .. }) => {
                    self.checks.manual.promotions_refused += 1
                }
                _ => {}
            }
        }
        true
    }

    /// Worker `w` is handed `msg` on `conn`: a relayed manual report it
    /// will take in (from the master it follows, at its epoch, of an
    /// executor its current process saw RUNNING) is recorded, with the TTLs
    /// that may have lapsed before it (`health_restarts`).
    pub(crate) fn manual_taken_in(&mut self, w: usize, conn: ConnId, msg: &Message) {
        let Message::HealthOnWorker { epoch, executor: x, check, passing, .. } = msg else {
            return;
        };
        let Some(m) = self.checks.manual.relayed_by.get(&conn).copied() else { return };
        let status = self.workers[w].node.status();
        // As the worker takes it in: from the master it follows (registered
        // or not yet again), not fenced.
        let followed = status.active == Some(super::master_addr(m)) && *epoch >= status.max_epoch;
        let gen = self.workers[w].p.gen;
        // Watched by this process since it saw it RUNNING (until its end
        // is seen, which may come after the simulator killed it; after
        // that nothing counts, so nothing more can stop it).
        let running = self.checks.manual.running_gen.get(&(w, x.clone())) == Some(&gen);
        let ttl = match self.checks.plans.get(x).and_then(|(_, s)| s.get(usize::from(*check))) {
            Some(CheckSpec { kind: CheckKind::Manual { ttl_ms }, .. }) => *ttl_ms,
            _ => return,
        };
        self.log(|| format!("w{w} manual report of {x}: followed {followed}, running {running}"));
        if !followed || !running {
            return;
        }
        let key = (x.clone(), *check);
        let now = self.now;
        if let Some(last) = self.checks.manual.last.get(&key).copied() {
            let lapsed = (now.0.saturating_sub(last.0) / ttl) as u32;
            *self.checks.manual.lapses.entry(key.clone()).or_insert(0) += lapsed;
        }
        self.checks.manual.last.insert(key.clone(), now);
        self.checks.manual.reports_counted += 1;
        let grace = self.grace_of(x, *check);
        let after_grace =
            self.checks.running_at.get(&(w, x.clone())).is_some_and(|t| now >= *t + Millis(grace));
        if !passing && after_grace {
            *self.checks.failures.entry(key).or_insert(0) += 1;
        }
    }
}

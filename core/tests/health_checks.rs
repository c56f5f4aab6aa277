//! Health checks, the worker's side (docs/design.md#issue-45,
//! docs/jobs.md#health-checks-groupcheck): the worker runs each check on
//! its schedule, counts results with damping, stops an executor whose
//! checks failed enough (its end reads `unhealthy: …`), and carries health
//! in its reports; a partition from the leader stops nothing.

mod common;

use common::*;
use regent_core::health::{CheckOutcome, CheckRun, Probe};
use regent_core::launch::{CheckKind, CheckSpec, LaunchSpec};
use regent_core::ports::PortRange;
use regent_core::protocol::{
    ExecutorReport, ExecutorSpec, ExecutorState, HealthStatus, Message, RegisterWorker,
};
use regent_core::worker::{self, ExecutorCommand, Worker};
use regent_core::{Epoch, ExecutorId, FrameworkId, Millis};

const WEB: &str = "f/web#0#1";

/// An http check of port `http` every second, timeout 500 ms, grace 2 s,
/// stopping after `failures`.
fn http_check(failures: u32) -> CheckSpec {
    CheckSpec {
        interval_ms: 1_000,
        timeout_ms: 500,
        grace_ms: 2_000,
        failures,
        ..CheckSpec::new(CheckKind::Http {
            port: "http".into(),
            path: "/health".into(),
            expect: (200, 299),
        })
    }
}

/// A worker (ports 20000-20009) registered with `a` at epoch 2, running
/// `f/web#0#1` with `checks` since time 0.
fn worker_running(checks: Vec<CheckSpec>) -> Worker {
    let mut cfg = worker_cfg("w1", 7, &["a"]);
    cfg.ports = vec![PortRange { first: 20_000, last: 20_009 }];
    let mut w = registered_worker_with(cfg);
    let launch = Message::LaunchExecutor {
        epoch: Epoch(2),
        executor: ExecutorId::new(WEB),
        framework: FrameworkId::new("f"),
        spec: ExecutorSpec {
            command: vec!["serve".into()],
            env: vec![],
            cores: 1,
            memory_mb: 64,
            launch: Box::new(LaunchSpec {
                ports: vec!["http".into()],
                checks,
                ..Default::default()
            }),
        },
        launch: 1,
    };
    let out = from(&mut w, Millis(0), "a", launch);
    assert!(out
        .iter()
        .any(|a| matches!(a, worker::Action::Executor(ExecutorCommand::Start { .. }))));
    let running = worker::Event::ExecutorChanged {
        executor: ExecutorId::new(WEB),
        state: ExecutorState::Running,
    };
    let _ = w.handle(Millis(0), running);
    w
}

/// What happened while driving a worker.
#[derive(Default)]
struct Seen {
    runs: Vec<(u64, CheckRun)>,
    kills: Vec<u64>,
    statuses: Vec<(u64, ExecutorReport)>,
}

impl Seen {
    fn take(&mut self, now: u64, out: Vec<worker::Action>) -> Vec<CheckRun> {
        let mut runs = Vec::new();
        for a in out {
            match a {
                worker::Action::Executor(ExecutorCommand::RunCheck(run)) => {
                    self.runs.push((now, run.clone()));
                    runs.push(run);
                }
                worker::Action::Executor(ExecutorCommand::Kill { .. }) => self.kills.push(now),
                worker::Action::Send { msg: Message::ExecutorStatus { report, .. }, .. } => {
                    self.statuses.push((now, report))
                }
                _ => {}
            }
        }
        runs
    }
}

/// Drives `w` from its next deadline to `until`, acknowledging heartbeats
/// unless `partitioned`; each run is answered at once by `answer` (given
/// the run's index among all runs), or left unanswered if it gives `None`.
fn drive(
    w: &mut Worker,
    seen: &mut Seen,
    until: u64,
    partitioned: bool,
    answer: &mut dyn FnMut(usize, &CheckRun) -> Option<CheckOutcome>,
) {
    let mut now = 0;
    while let Some(at) = w.poll_timeout().filter(|at| at.0 <= until) {
        // A deadline already passed fires at the next tick, not earlier.
        now = now.max(at.0);
        let at = Millis(now);
        let out = w.handle(at, worker::Event::Tick);
        let acks = out.iter().any(|a| {
            matches!(a, worker::Action::Send { msg: Message::WorkerHeartbeat { .. }, .. })
        });
        for run in seen.take(now, out) {
            let n = seen.runs.len() - 1;
            if let Some(outcome) = answer(n, &run) {
                let CheckRun { executor, check, run, .. } = run;
                let out =
                    w.handle(at, worker::Event::CheckResult { executor, check, run, outcome });
                let _ = seen.take(now, out);
            }
        }
        if acks && !partitioned {
            let out = from(w, at, "a", Message::HeartbeatAck { epoch: Epoch(2) });
            let _ = seen.take(now, out);
        }
    }
}

fn fail() -> CheckOutcome {
    CheckOutcome::Failed("GET /health answered 500".into())
}

fn end_of(w: &Worker) -> Option<ExecutorState> {
    w.executors().find(|e| e.id.as_str() == WEB).map(|e| e.state.clone())
}

/// Feeds the end of a killed executor at `now`.
fn killed(w: &mut Worker, now: u64, seen: &mut Seen) {
    let ev = worker::Event::ExecutorChanged {
        executor: ExecutorId::new(WEB),
        state: ExecutorState::Killed,
    };
    let out = w.handle(Millis(now), ev);
    let _ = seen.take(now, out);
}

#[test]
fn the_first_run_comes_after_grace_at_the_numbered_port_and_then_every_interval() {
    let mut w = worker_running(vec![http_check(3)]);
    let mut seen = Seen::default();
    drive(&mut w, &mut seen, 6_000, false, &mut |_, _| Some(CheckOutcome::Passed));
    let (first, run) = &seen.runs[0];
    // Grace 2 s, jittered later by up to a tenth of the 1 s interval.
    assert!((2_000..=2_100).contains(first), "first run at {first}");
    assert_eq!(
        run.probe,
        Probe::Http {
            host: "127.0.0.1".into(),
            port: 20_000,
            path: "/health".into(),
            expect: (200, 299)
        }
    );
    assert_eq!(run.timeout, Millis(500));
    let times: Vec<u64> = seen.runs.iter().map(|(t, _)| *t).collect();
    assert!(times.windows(2).all(|p| p[1] - p[0] == 1_000), "{times:?}");
    assert!(seen.kills.is_empty());
}

#[test]
fn no_run_before_grace_and_failures_in_grace_move_the_status_but_never_stop() {
    let mut w =
        worker_running(vec![CheckSpec { grace_ms: 5_000, interval_ms: 500, ..http_check(1) }]);
    let mut seen = Seen::default();
    drive(&mut w, &mut seen, 4_999, false, &mut |_, _| Some(fail()));
    assert!(seen.runs.is_empty(), "no run before grace");
    // A manual check's report may come in grace: it moves the status, not
    // the count.
    let manual = CheckSpec {
        grace_ms: 5_000,
        failures: 1,
        ..CheckSpec::new(CheckKind::Manual { ttl_ms: 60_000 })
    };
    let mut h = regent_core::health::Health::new();
    let web = ExecutorId::new(WEB);
    h.launched(web.clone(), &[manual], &[], "127.0.0.1");
    h.running(Millis(0), &web, &mut regent_core::rng::Jitter::new(1));
    let v = h.report(Millis(1_000), &web, 0, false, "not ready");
    assert_eq!((v.changed, v.stop), (true, false));
    assert_eq!(
        h.of(Millis(1_500), &web).map(|r| (r.status, r.for_ms)),
        Some((HealthStatus::Failing, 500))
    );
    assert!(!h.report(Millis(2_000), &web, 0, true, "").stop);
    assert_eq!(h.of(Millis(2_000), &web).map(|r| r.status), Some(HealthStatus::Passing));
    // After grace, one failure is enough (failures = 1).
    assert!(h.report(Millis(5_000), &web, 0, false, "lost its lock").stop);
    assert_eq!(
        h.forget(&web).as_deref(),
        Some("unhealthy: check \"manual\" failed once (last: lost its lock)")
    );
}

#[test]
fn three_straight_failures_stop_the_executor_once_and_its_end_says_why() {
    let mut w = worker_running(vec![http_check(3)]);
    let mut seen = Seen::default();
    drive(&mut w, &mut seen, 20_000, false, &mut |_, _| Some(fail()));
    assert_eq!(seen.kills.len(), 1, "killed once");
    let failures = seen.runs.iter().filter(|(t, _)| *t <= seen.kills[0]).count();
    assert_eq!(failures, 3);
    assert_eq!(seen.runs.len(), 3, "no run after the decision");
    killed(&mut w, seen.kills[0] + 100, &mut seen);
    let reason = "unhealthy: check \"http\" failed 3 times (last: GET /health answered 500)";
    assert_eq!(end_of(&w), Some(ExecutorState::Failed { reason: reason.into() }));
    // The end is reported to the leader with that reason.
    let (_, report) = seen.statuses.last().unwrap();
    assert_eq!(report.state, ExecutorState::Failed { reason: reason.into() });
    assert!(regent_core::launch::is_unhealthy(reason));
}

#[test]
fn a_check_failing_every_other_run_stops_after_five_failures_of_three() {
    let mut w = worker_running(vec![http_check(3)]);
    let mut seen = Seen::default();
    drive(&mut w, &mut seen, 30_000, false, &mut |n, _| {
        Some(if n % 2 == 0 { fail() } else { CheckOutcome::Passed })
    });
    assert_eq!(seen.kills.len(), 1, "a flapping service is restarted");
    let before: Vec<_> = seen.runs.iter().filter(|(t, _)| *t <= seen.kills[0]).collect();
    assert_eq!(before.len(), 9, "F P F P F P F P F");
    killed(&mut w, 30_000, &mut seen);
    let Some(ExecutorState::Failed { reason }) = end_of(&w) else { panic!() };
    assert!(reason.starts_with("unhealthy: check \"http\" failed 5 times"), "{reason}");
}

#[test]
fn nine_passes_in_ten_never_stop_and_zero_failures_only_reports() {
    // One failure every ten runs: the debt goes to 2, is paid back, never
    // reaches 4 (failures = 2).
    let mut w = worker_running(vec![http_check(2)]);
    let mut seen = Seen::default();
    drive(&mut w, &mut seen, 120_000, false, &mut |n, _| {
        Some(if n % 10 == 9 { fail() } else { CheckOutcome::Passed })
    });
    assert!(seen.kills.is_empty());
    assert!(seen.runs.len() > 100);
    // failures = 0 reports only: never stops.
    let mut w = worker_running(vec![http_check(0)]);
    let mut seen = Seen::default();
    drive(&mut w, &mut seen, 60_000, false, &mut |_, _| Some(fail()));
    assert!(seen.kills.is_empty());
    let (_, last) = seen.statuses.last().unwrap();
    let health = last.health.clone().unwrap();
    assert_eq!(health.status, HealthStatus::Failing);
    assert_eq!(health.detail, "http: GET /health answered 500");
}

#[test]
fn a_check_slower_than_its_interval_has_one_run_in_flight_and_unanswered_runs_count_nothing() {
    let mut check = http_check(1);
    check.timeout_ms = 3_000;
    let mut w = worker_running(vec![check]);
    let mut seen = Seen::default();
    // Nothing answers: each run is skipped by the backstop (timeout + 1 s)
    // before the next is sent, and never counted as a failure.
    drive(&mut w, &mut seen, 30_000, false, &mut |_, _| None);
    assert!(seen.kills.is_empty(), "skipped runs count nothing");
    let times: Vec<u64> = seen.runs.iter().map(|(t, _)| *t).collect();
    assert!(times.len() >= 6, "{times:?}");
    assert!(times.windows(2).all(|p| p[1] - p[0] >= 4_000), "one in flight at a time: {times:?}");
    // A late answer to a skipped run is stale: ignored.
    let (_, old) = seen.runs[0].clone();
    let out = w.handle(
        Millis(30_001),
        worker::Event::CheckResult {
            executor: old.executor,
            check: 0,
            run: old.run,
            outcome: fail(),
        },
    );
    let _ = seen.take(30_001, out);
    assert!(seen.kills.is_empty());
}

#[test]
fn ten_minutes_cut_off_from_the_leader_with_passing_checks_stop_nothing() {
    let mut w = worker_running(vec![http_check(1)]);
    let mut seen = Seen::default();
    drive(&mut w, &mut seen, 600_000, true, &mut |_, _| Some(CheckOutcome::Passed));
    assert!(seen.kills.is_empty());
    assert!(seen.runs.len() > 590, "checks ran throughout: {}", seen.runs.len());
    assert_eq!(end_of(&w), Some(ExecutorState::Running));
}

#[test]
fn a_manual_ttl_lapsed_while_cut_off_is_held_and_counts_once_the_leader_is_heard() {
    let manual = CheckSpec {
        grace_ms: 0,
        failures: 1,
        ..CheckSpec::new(CheckKind::Manual { ttl_ms: 5_000 })
    };
    let mut w = worker_running(vec![manual]);
    let mut seen = Seen::default();
    // Cut off (no heartbeat answered) for 60 s: TTLs lapse, none counts.
    drive(&mut w, &mut seen, 60_000, true, &mut |_, _| None);
    assert!(seen.kills.is_empty(), "losing the leader never reads as unhealthy");
    // The leader answers again (the link redialled, a registration): the
    // next lapse counts.
    let out = w.handle(Millis(60_050), worker::Event::Connected { master: addr("a") });
    let _ = seen.take(60_050, out);
    let out = from(
        &mut w,
        Millis(60_100),
        "a",
        Message::Registered {
            epoch: Epoch(2),
            heartbeat_interval: Millis(1_000),
            duplicate: false,
            masters: vec![addr("a")],
        },
    );
    let _ = seen.take(60_100, out);
    drive(&mut w, &mut seen, 80_000, false, &mut |_, _| None);
    assert_eq!(seen.kills.len(), 1);
    killed(&mut w, 80_000, &mut seen);
    let Some(ExecutorState::Failed { reason }) = end_of(&w) else { panic!() };
    assert!(reason.contains("no report within its ttl"), "{reason}");
}

#[test]
fn health_rides_in_executor_status_when_it_changes_and_in_registration() {
    let mut w = worker_running(vec![http_check(3)]);
    let mut seen = Seen::default();
    drive(&mut w, &mut seen, 10_000, false, &mut |_, _| Some(CheckOutcome::Passed));
    // Pending → Passing: one status, nothing for unchanged results.
    let with_health: Vec<_> = seen.statuses.iter().filter(|(_, r)| r.health.is_some()).collect();
    assert_eq!(with_health.len(), 1, "{:?}", seen.statuses);
    let (at, report) = with_health[0];
    assert_eq!(report.state, ExecutorState::Running);
    assert_eq!(
        report.health.as_ref().map(|h| (h.status, h.for_ms)),
        Some((HealthStatus::Passing, 0))
    );
    // A re-registration carries health, with how long it has held.
    let out = from(&mut w, Millis(10_000), "a", Message::ReconnectWorker { epoch: Epoch(2) });
    let registration = out.iter().find_map(|a| match a {
        worker::Action::Send { msg: Message::RegisterWorker(r), .. } => Some(r.clone()),
        _ => None,
    });
    let RegisterWorker { executors, .. } = registration.expect("re-registered");
    let health = executors[0].health.clone().unwrap();
    assert_eq!(health.status, HealthStatus::Passing);
    assert_eq!(health.for_ms, 10_000 - at);
}

#[test]
fn an_executor_readopted_by_a_restarted_worker_is_still_checked_and_still_a_singleton() {
    // A new worker process finds the executor its predecessor left running,
    // its record keeping its port, its group's checks and disconnect rule.
    let mut cfg = worker_cfg("w1", 8, &["a"]);
    cfg.ports = vec![PortRange { first: 20_000, last: 20_009 }];
    let mut w = Worker::new(cfg);
    let _ = w.handle(Millis(0), worker::Event::Start);
    let report = ExecutorReport {
        health: None,
        ran_ms: None,
        id: ExecutorId::new(WEB),
        framework: FrameworkId::new("f"),
        cores: 1,
        memory_mb: 64,
        state: ExecutorState::Running,
        ports: vec![("http".into(), 20_007)],
        resources: Vec::new(),
    };
    let _ = w.handle(Millis(0), worker::Event::LeftBehind(report));
    let readopted = worker::Event::Readopted {
        executor: ExecutorId::new(WEB),
        disconnect: Some(regent_core::launch::Disconnect::after_ms(30_000)),
        checks: vec![http_check(3)],
    };
    let _ = w.handle(Millis(0), readopted);
    let mut seen = Seen::default();
    // No master ever answers: the checks run at the recorded port, and the
    // singleton is stopped once no master was heard for 30 s.
    drive(&mut w, &mut seen, 31_000, true, &mut |_, _| Some(CheckOutcome::Passed));
    let (first, run) = &seen.runs[0];
    assert!((2_000..=2_100).contains(first), "{first}");
    assert!(matches!(run.probe, Probe::Http { port: 20_007, .. }), "{:?}", run.probe);
    assert_eq!(seen.kills, vec![30_000], "cut off for its stop_after: stopped once");
}

/// Found by e2e_deployments (docs/design.md#issue-45): a check that first
/// failed with "connection refused" (the service not listening yet) and
/// then with "answered 500" kept the first detail in the leader's view,
/// its events and `regent status`, since only a change of status was
/// reported. A change of what the report says is reported too; the same
/// failure again is not.
#[test]
fn a_failure_for_another_reason_is_reported_and_the_same_one_again_is_not() {
    let mut w = worker_running(vec![http_check(0)]);
    let mut seen = Seen::default();
    let refused = || CheckOutcome::Failed("GET /health: io: Connection refused".into());
    drive(&mut w, &mut seen, 10_000, false, &mut |n, _| {
        Some(if n < 2 { refused() } else { fail() })
    });
    let details: Vec<(HealthStatus, String)> = seen
        .statuses
        .iter()
        .filter_map(|(_, r)| r.health.as_ref().map(|h| (h.status, h.detail.clone())))
        .collect();
    assert_eq!(
        details,
        vec![
            (HealthStatus::Failing, "http: GET /health: io: Connection refused".into()),
            (HealthStatus::Failing, "http: GET /health answered 500".into()),
        ],
        "{:?}",
        seen.statuses
    );
}

/// A manual check `ready` (TTL 30 s, no grace, stopping after 2 failures).
fn manual_ready() -> CheckSpec {
    CheckSpec {
        name: "ready".into(),
        grace_ms: 0,
        failures: 2,
        ..CheckSpec::new(CheckKind::Manual { ttl_ms: 30_000 })
    }
}

fn health_on_worker(passing: bool, detail: &str) -> Message {
    Message::HealthOnWorker {
        epoch: Epoch(2),
        executor: ExecutorId::new(WEB),
        check: 0,
        passing,
        detail: detail.into(),
    }
}

#[test]
fn a_relayed_manual_report_counts_like_a_run_and_two_failures_stop_the_executor() {
    let mut w = worker_running(vec![manual_ready()]);
    let mut seen = Seen::default();
    // A pass: the status the leader hears turns to passing.
    let out = from(&mut w, Millis(1_000), "a", health_on_worker(true, ""));
    let _ = seen.take(1_000, out);
    let (_, report) = seen.statuses.last().expect("health changed: reported");
    assert_eq!(report.health.as_ref().map(|h| h.status), Some(HealthStatus::Passing));
    // A master the worker does not follow is not heard.
    let out = from(&mut w, Millis(2_000), "b", health_on_worker(false, "db down"));
    assert!(w_kills(&out).is_empty());
    let out = from(&mut w, Millis(2_000), "a", health_on_worker(false, "db down"));
    assert!(w_kills(&out).is_empty(), "one failure of two");
    let out = from(&mut w, Millis(3_000), "a", health_on_worker(false, "db still down"));
    assert_eq!(w_kills(&out), vec![ExecutorId::new(WEB)]);
    killed(&mut w, 3_100, &mut seen);
    let reason = "unhealthy: check \"ready\" failed 2 times (last: db still down)";
    assert_eq!(end_of(&w), Some(ExecutorState::Failed { reason: reason.into() }));
}

mod relay {
    //! The leader's side of manual checks: a framework's `ReportHealth` is
    //! relayed to the executor's worker as `HealthOnWorker` (the check by
    //! its index) and accepted; a report on an executor that is unknown or
    //! not running, or on a check that is not one of its group's manual
    //! checks, is refused naming it, and nothing is relayed.

    use super::common::*;
    use regent_core::launch::{CheckKind, CheckSpec, LaunchSpec};
    use regent_core::protocol::{ExecutorState, Message};
    use regent_core::{ConnId, ExecutorId};

    fn report(executor: &ExecutorId, check: &str) -> Message {
        Message::ReportHealth {
            request: 7,
            executor: executor.clone(),
            check: check.into(),
            passing: false,
            detail: "db down".into(),
        }
    }

    fn refusal(sends: &[(ConnId, Message)]) -> String {
        assert!(
            !sends.iter().any(|(_, m)| matches!(m, Message::HealthOnWorker { .. })),
            "nothing relayed: {sends:?}"
        );
        match sends {
            [(ConnId(1), Message::RequestRefused { request: 7, reason, .. })] => reason.clone(),
            other => panic!("one refusal to the asker: {other:?}"),
        }
    }

    #[test]
    fn a_report_is_relayed_to_the_executors_worker_and_a_wrong_one_refused_naming_it() {
        let mut run = Run::with_w1_and_app();
        let exec = CheckSpec::new(CheckKind::Exec { command: vec!["true".into()] });
        let ready = CheckSpec { name: "ready".into(), ..super::manual_ready() };
        let launch = LaunchSpec { checks: vec![exec, ready], ..Default::default() };
        let spec = group_with("web", 1, launch);
        let sends = run.send(1, Message::DeclareGroup { request: 1, spec });
        let (_, id, fw) = launches(&sends).pop().expect("one launch");
        // Launching: not counted yet.
        let why = refusal(&run.send(1, report(&id, "ready")));
        assert!(why.contains("not RUNNING"), "{why}");
        let _ = run.status(&fw, &id, ExecutorState::Running);
        let sends = run.send(1, report(&id, "ready"));
        assert!(sends.contains(&(
            ConnId(100),
            Message::HealthOnWorker {
                epoch: run.m.epoch(),
                executor: id.clone(),
                check: 1,
                passing: false,
                detail: "db down".into(),
            }
        )));
        assert!(sends
            .iter()
            .any(|(c, m)| *c == ConnId(1)
                && matches!(m, Message::RequestAccepted { request: 7, .. })));
        let why = refusal(&run.send(1, report(&id, "exec")));
        assert!(why.contains("\"exec\" is not a manual check"), "{why}");
        assert!(why.contains("its manual checks: ready"), "{why}");
        let why = refusal(&run.send(1, report(&id, "nope")));
        assert!(why.contains("\"nope\" is no check of executor"), "{why}");
        let why = refusal(&run.send(1, report(&ExecutorId::new("app/x#0#1.1"), "ready")));
        assert!(why.contains("no executor app/x#0#1.1"), "{why}");
    }
}

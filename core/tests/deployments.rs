//! Deployments gated on health (docs/jobs.md, docs/design.md#issue-45): a
//! new executor counts as healthy only after `min_healthy_time` and must
//! stay so until the deployment ends; `max_parallel` counts baking slots;
//! canaries wait to be promoted; a start failure, a crash loop or a
//! passed deadline fail the deployment and revert it to the last healthy
//! spec without a canary phase, keeping the executors that run it; a
//! failed revert stops; a new leader goes on with the same counts.

mod common;

use common::*;
use regent_core::master::{self, Master};
use regent_core::policy::{GroupPolicy, UpdatePolicy};
use regent_core::protocol::{ExecutorReport, ExecutorState, GroupSpec, Message};
use regent_core::store::{Deployment, DeploymentState, Record, StoreCommand, StoreEvent};
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis};
use std::collections::BTreeMap;

impl Run {
    /// The group's deployment, as durable.
    fn deployment(&self) -> Deployment {
        self.record().groups[0].deployment.clone().expect("a deployment")
    }
}

/// Group `web` of 3 slots running `serve VERSION` under `update`.
fn web(version: &str, update: UpdatePolicy) -> GroupSpec {
    GroupSpec {
        group: "web".into(),
        slots: 3,
        command: vec!["serve".into(), version.into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy: GroupPolicy { update: Some(Box::new(update)), ..Default::default() },
        launch: Default::default(),
    }
}

/// One slot at a time, healthy after 10 s, no canary.
fn gated() -> UpdatePolicy {
    UpdatePolicy { min_healthy_time_ms: 10_000, ..Default::default() }
}

/// (executor, command) of the launches in `sends`.
fn launched(sends: &[(ConnId, Message)]) -> Vec<(ExecutorId, Vec<String>)> {
    sends
        .iter()
        .filter_map(|(_, m)| match m {
            Message::LaunchExecutor { executor, spec, .. } => {
                Some((executor.clone(), spec.command.clone()))
            }
            _ => None,
        })
        .collect()
}

fn stops(sends: &[(ConnId, Message)]) -> Vec<ExecutorId> {
    sends
        .iter()
        .filter_map(|(_, m)| match m {
            Message::StopExecutorOnWorker { executor, .. } => Some(executor.clone()),
            _ => None,
        })
        .collect()
}

/// A leader with worker w1 (conn 100) and framework `app` (conn 1) whose
/// group `web` runs three executors of `serve v1` under `update`.
fn running_v1(update: UpdatePolicy) -> (Run, FrameworkId, Vec<ExecutorId>) {
    let mut run = Run::with_w1_and_app();
    let sends = run.send(1, Message::DeclareGroup { request: 1, spec: web("v1", update) });
    let ids: Vec<ExecutorId> = launched(&sends).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), 3, "{sends:?}");
    let fw = run.m.frameworks().next().expect("app").id.clone();
    for id in &ids {
        let _ = run.status(&fw, id, ExecutorState::Running);
    }
    (run, fw, ids)
}

/// Stops `old` and runs its replacement: the replacement's id.
fn replace(run: &mut Run, fw: &FrameworkId, old: &ExecutorId) -> ExecutorId {
    let sends = run.status(fw, old, ExecutorState::Killed);
    let new = launched(&sends);
    assert_eq!(new.len(), 1, "its slot refilled: {sends:?}");
    let _ = run.status(fw, &new[0].0, ExecutorState::Running);
    new[0].0.clone()
}

#[test]
fn the_next_slot_waits_until_the_new_executor_ran_for_min_healthy_time() {
    let (mut run, fw, old) = running_v1(gated());
    let sends =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", gated()), max_parallel: 1 });
    assert_eq!(stops(&sends), vec![old[0].clone()]);
    let new0 = replace(&mut run, &fw, &old[0]);
    // Running, but baking: it takes the one slot of max_parallel.
    assert!(stops(&run.advance(9_999)).is_empty(), "not before 10 s");
    assert_eq!(run.deployment().healthy.len(), 0);
    let sends = run.advance(1);
    assert_eq!(stops(&sends), vec![old[1].clone()], "then the next slot, at 10 s exactly");
    assert_eq!(run.deployment().healthy, [0].into(), "slot 0 healthy, durably");
    let new1 = replace(&mut run, &fw, &old[1]);
    let sends = run.advance(10_000);
    assert_eq!(stops(&sends), vec![old[2].clone()]);
    let _new2 = replace(&mut run, &fw, &old[2]);
    let _ = run.advance(10_000);
    let d = run.deployment();
    assert_eq!(d.state, DeploymentState::Succeeded);
    assert_eq!(d.healthy, [0, 1, 2].into());
    assert!(run.record().groups[0].active_deployment().is_none());
    let _ = (new0, new1);
}

#[test]
fn a_slot_that_stops_being_healthy_leaves_the_healthy_set_and_three_ends_are_a_crash_loop_reverted()
{
    let (mut run, fw, old) = running_v1(gated());
    let _ =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", gated()), max_parallel: 1 });
    let mut new0 = replace(&mut run, &fw, &old[0]);
    let sends = run.advance(10_000);
    assert_eq!(stops(&sends), vec![old[1].clone()]);
    assert_eq!(run.deployment().healthy, [0].into());
    // Slot 0's new executor crashes twice: out of the healthy set (the
    // bake window), counted in `ends`.
    for n in 1..=2u32 {
        let sends = run.status(&fw, &new0, ExecutorState::Exited { code: 1 });
        assert!(!run.deployment().healthy.contains(&0), "crash {n}");
        assert_eq!(run.deployment().ends.get(&0), Some(&n));
        new0 = launched(&sends).first().map(|(id, _)| id.clone()).unwrap_or_else(|| {
            // A restart may wait out a backoff.
            let later = run.advance(60_000);
            launched(&later)[0].0.clone()
        });
        let _ = run.status(&fw, &new0, ExecutorState::Running);
    }
    // The third end is a crash loop: the deployment fails and the same
    // write starts the revert to v1, with no canary phase.
    let sends = run.status(&fw, &new0, ExecutorState::Exited { code: 1 });
    let record = run.record();
    let g = &record.groups[0];
    let d = g.deployment.clone().expect("the revert");
    assert_eq!((d.seq, d.revert_of, d.state.clone()), (2, Some(1), DeploymentState::Rolling));
    assert_eq!(d.policy.canary, 0);
    assert_eq!(g.spec.command, ["serve", "v1"], "the spec is v1 again");
    // old[1] (being stopped) aside, old[2] runs v1: kept, never stopped.
    let mut all = sends;
    all.extend(run.status(&fw, &old[1], ExecutorState::Killed));
    all.extend(run.advance(120_000));
    assert!(!stops(&all).contains(&old[2]), "the stable executor is kept: {all:?}");
    assert!(launched(&all).iter().all(|(_, c)| c == &["serve", "v1"]), "{all:?}");
}

#[test]
fn a_canary_waits_for_promotion_stops_nothing_meanwhile_and_rolls_on_once_promoted() {
    let canary = UpdatePolicy { canary: 1, ..gated() };
    let (mut run, fw, old) = running_v1(canary);
    let sends =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", canary), max_parallel: 1 });
    assert_eq!(stops(&sends), vec![old[0].clone()], "the canary slot first");
    assert_eq!(run.deployment().state, DeploymentState::Canary);
    let _ = replace(&mut run, &fw, &old[0]);
    let sends = run.advance(10_000);
    assert!(stops(&sends).is_empty(), "{sends:?}");
    assert_eq!(run.deployment().state, DeploymentState::AwaitingPromotion);
    // `regent job status` and `/v1/jobs` show it.
    let sends = run.send(1, Message::JobsRequest { request: 6, job: Some(fw.clone()) });
    let view = sends.iter().find_map(|(_, m)| match m {
        Message::JobsReply { jobs, .. } => jobs[0].groups[0].deployment.clone(),
        _ => None,
    });
    let view = view.expect("the group's deployment in the jobs reply");
    assert_eq!(
        (view.seq, view.state.as_str(), view.healthy, view.open, view.canary),
        (1, "awaiting_promotion", 1, 3, 1)
    );
    // Waiting is no failure: past every deadline, nothing more happens.
    let sends = run.advance(3_600_000);
    assert!(stops(&sends).is_empty());
    assert_eq!(run.deployment().state, DeploymentState::AwaitingPromotion);
    // Promoting another group is refused, naming what there is.
    let promote = |request, group: &str| Message::PromoteDeployment {
        request,
        job: fw.clone(),
        group: Some(group.into()),
    };
    let sends = run.send(1, promote(7, "api"));
    let refused = sends.iter().find_map(|(_, m)| match m {
        Message::RequestRefused { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert!(refused.is_some_and(|r| r.contains("has no group \"api\"")), "{sends:?}");
    // `regent job promote`: accepted once durable, and the next slot goes.
    let sends = run.send(1, promote(8, "web"));
    assert!(
        sends.iter().any(|(_, m)| matches!(m, Message::RequestAccepted { request: 8, .. })),
        "{sends:?}"
    );
    assert_eq!(run.deployment().state, DeploymentState::Rolling, "durable");
    assert_eq!(stops(&sends), vec![old[1].clone()]);
    // Nothing awaits promotion any more: refused, nothing changed.
    let sends = run.send(1, promote(9, "web"));
    let refused = sends.iter().find_map(|(_, m)| match m {
        Message::RequestRefused { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert!(
        refused.is_some_and(|r| r.contains("no deployment awaiting promotion (web: rolling)")),
        "{sends:?}"
    );
}

#[test]
fn healthy_canaries_promote_themselves_with_auto_promote() {
    let canary = UpdatePolicy { canary: 1, auto_promote: true, ..gated() };
    let (mut run, fw, old) = running_v1(canary);
    let _ =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", canary), max_parallel: 1 });
    let _ = replace(&mut run, &fw, &old[0]);
    let sends = run.advance(10_000);
    assert_eq!(stops(&sends), vec![old[1].clone()]);
    assert_eq!(run.deployment().state, DeploymentState::Rolling);
}

#[test]
fn no_progress_for_progress_deadline_fails_and_reverts_keeping_the_stable_executors() {
    let quick =
        UpdatePolicy { healthy_deadline_ms: 20_000, progress_deadline_ms: 30_000, ..gated() };
    let (mut run, fw, old) = running_v1(quick);
    let _ =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", quick), max_parallel: 1 });
    // The replacement never gets to RUNNING (it is stuck launching).
    let sends = run.status(&fw, &old[0], ExecutorState::Killed);
    let stuck = launched(&sends)[0].0.clone();
    let sends = run.advance(29_999);
    assert!(stops(&sends).is_empty());
    assert_eq!(run.deployment().state, DeploymentState::Rolling);
    let sends = run.advance(1);
    let g = &run.record().groups[0];
    let d = g.deployment.clone().expect("the revert");
    assert_eq!((d.seq, d.revert_of), (2, Some(1)));
    assert_eq!(g.spec.command, ["serve", "v1"]);
    let stopped = stops(&sends);
    assert_eq!(stopped, vec![stuck.clone()], "the v2 executor goes, v1's stay: {sends:?}");
    let sends = run.status(&fw, &stuck, ExecutorState::Killed);
    let v1 = launched(&sends);
    assert_eq!(v1.len(), 1);
    assert_eq!(v1[0].1, ["serve", "v1"]);
    let _ = run.status(&fw, &v1[0].0, ExecutorState::Running);
    let _ = run.advance(10_000);
    assert_eq!(run.deployment().state, DeploymentState::Succeeded, "the revert succeeds");
    let live: Vec<ExecutorId> =
        run.m.executors().filter(|e| !e.state.is_terminal()).map(|e| e.id.clone()).collect();
    assert!(live.contains(&old[1]) && live.contains(&old[2]), "{live:?}");
}

#[test]
fn a_revert_that_fails_too_stops_without_reverting_again() {
    let (mut run, fw, old) = running_v1(gated());
    let _ =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", gated()), max_parallel: 1 });
    let sends = run.status(&fw, &old[0], ExecutorState::Killed);
    let broken = launched(&sends)[0].0.clone();
    // A start failure: the deployment fails, the revert starts (v1).
    let failed = ExecutorState::Failed { reason: "exec: no such file".into() };
    let sends = run.status(&fw, &broken, failed.clone());
    assert_eq!(run.deployment().revert_of, Some(1));
    let v1 = launched(&sends);
    assert_eq!(v1[0].1, ["serve", "v1"]);
    // v1 cannot start either now (its binary is gone too).
    let _ = run.status(&fw, &v1[0].0, failed);
    let d = run.deployment();
    assert_eq!(d.seq, 2);
    match &d.state {
        DeploymentState::Failed { reason } => {
            assert!(reason.starts_with("revert failed too"), "{reason}")
        }
        other => panic!("the revert failed and stopped, not {other:?}"),
    }
    assert_eq!(run.record().groups[0].spec.command, ["serve", "v1"], "no ping-pong to v2");
    let sends = run.advance(600_000);
    assert!(stops(&sends).is_empty(), "nothing more is stopped: {sends:?}");
}

#[test]
fn a_new_leader_goes_on_with_the_same_seq_healthy_set_and_ends_and_stops_nothing_twice() {
    let (mut run, fw, old) = running_v1(gated());
    let _ =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", gated()), max_parallel: 1 });
    let new0 = replace(&mut run, &fw, &old[0]);
    let sends = run.advance(10_000);
    assert_eq!(stops(&sends), vec![old[1].clone()]);
    let before = run.deployment();
    assert_eq!(before.healthy, [0].into());
    // old[1] is stopped, its v2 replacement runs 4 s; the leader dies.
    let new1 = replace(&mut run, &fw, &old[1]);
    let _ = run.advance(4_000);
    let records: Vec<Record> = run.store.values().cloned().collect();
    let mut m2 = Master::new(master::Config::new("b".into(), addr("b")));
    let _ = connect_worker(&mut m2, run.now, 100, "w1");
    let out = m2.handle(run.now, master::Event::Elected { floor: Epoch(5), clock: 0 });
    assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
    let mut run2 = Run { m: m2, now: run.now, store: BTreeMap::new() };
    let _ = run2.feed(master::Event::Store(StoreEvent::Loaded { records }));
    let ran =
        |ms| ExecutorReport { ran_ms: Some(ms), ..report(&new0, &fw, ExecutorState::Running) };
    let sends = run2.send(
        100,
        w1_registration(vec![
            ran(14_000),
            ExecutorReport { id: new1.clone(), ..ran(4_000) },
            report(&old[2], &fw, ExecutorState::Running),
        ]),
    );
    assert_eq!(run2.m.status(), master::Status::Alive);
    assert!(stops(&sends).is_empty(), "slot 1 still bakes: nothing stopped: {sends:?}");
    // The new leader counts the longer of the worker's 4 s and its own
    // view: never sooner than 10 s in all, at the latest 10 s from now.
    let sends = run2.advance(6_000);
    assert!(stops(&sends).is_empty(), "{sends:?}");
    assert_eq!(run2.m.deadline(master::Timer::Deployment), Some(run2.now + Millis(4_000)));
    let sends = run2.advance(4_000);
    assert_eq!(stops(&sends), vec![old[2].clone()], "the last old one, once: {sends:?}");
    let d = run2.deployment();
    assert_eq!(d.seq, before.seq, "the same deployment");
    assert_eq!(d.healthy, [0, 1].into());
    assert_eq!(d.ends, before.ends);
    let sends = run2.advance(60_000);
    assert!(stops(&sends).is_empty(), "old[2] is not stopped twice: {sends:?}");
}

/// A new leader whose wall clock is behind the one that stored the
/// deployment's progress (an hour here) fails a stalled deployment
/// `progress_deadline` after its takeover at the latest, not that much plus
/// the clocks' difference (docs/design.md#issue-45).
#[test]
fn a_new_leader_with_a_wall_clock_behind_fails_a_stalled_deployment_on_time() {
    let quick =
        UpdatePolicy { healthy_deadline_ms: 20_000, progress_deadline_ms: 30_000, ..gated() };
    let (mut run, fw, old) = running_v1(quick);
    // Leader a's wall clock counts from its start: an hour in, it reads an hour.
    let _ = run.advance(3_600_000);
    let _ =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", quick), max_parallel: 1 });
    let sends = run.status(&fw, &old[0], ExecutorState::Killed);
    let stuck = launched(&sends)[0].0.clone();
    let _ = run.advance(5_000);
    assert_eq!(run.deployment().state, DeploymentState::Rolling);
    let records: Vec<Record> = run.store.values().cloned().collect();
    // Leader b started a second ago, its wall clock an hour behind a's.
    let b_now = Millis(1_000);
    let mut m2 = Master::new(master::Config::new("b".into(), addr("b")));
    let _ = connect_worker(&mut m2, b_now, 100, "w1");
    let _ = m2.handle(b_now, master::Event::Elected { floor: Epoch(5), clock: 0 });
    let mut run2 = Run { m: m2, now: b_now, store: BTreeMap::new() };
    let _ = run2.feed(master::Event::Store(StoreEvent::Loaded { records }));
    let _ = run2.send(
        100,
        w1_registration(vec![
            report(&stuck, &fw, ExecutorState::Launching),
            report(&old[1], &fw, ExecutorState::Running),
            report(&old[2], &fw, ExecutorState::Running),
        ]),
    );
    assert_eq!(run2.m.status(), master::Status::Alive);
    let sends = run2.advance(29_000);
    assert!(stops(&sends).is_empty(), "{sends:?}");
    let state = |m: &Master| {
        let g = &m.frameworks().next().expect("app").groups[0];
        g.record.deployment.as_ref().map(|d| d.state.clone())
    };
    assert_eq!(state(&run2.m), Some(DeploymentState::Rolling), "not failed yet");
    // 30 s after the takeover (its last word on progress is older).
    let sends = run2.advance(1_000);
    let g = &run2.m.frameworks().next().expect("app").groups[0];
    let d = g.record.deployment.clone().expect("a deployment");
    assert_eq!((d.seq, d.revert_of), (2, Some(1)), "failed and reverted: {d:?}");
    assert_eq!(stops(&sends), vec![stuck], "the stuck v2 executor goes: {sends:?}");
}

/// Sim seed 283 with `--api-jobs --services` (docs/design.md#simulator-seeds): an
/// end of the deployed spec that a leader recorded, and died before
/// acknowledging, is reported again to the next leader, which counts it
/// once in the slot's restart state and must not count it again in the
/// deployment's `ends` (three make a crash loop).
#[test]
fn an_end_a_new_leader_hears_again_is_not_counted_twice_in_the_deployment() {
    let (mut run, fw, old) = running_v1(gated());
    let _ =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", gated()), max_parallel: 1 });
    let new0 = replace(&mut run, &fw, &old[0]);
    // v2 on slot 0 crashes; the end is recorded durably, its
    // acknowledgement never reaches the worker: the leader dies.
    let _ = run.status(&fw, &new0, ExecutorState::Exited { code: 1 });
    let before = run.deployment();
    assert_eq!(before.ends, [(0, 1)].into());
    let records: Vec<Record> = run.store.values().cloned().collect();
    let mut m2 = Master::new(master::Config::new("b".into(), addr("b")));
    let _ = connect_worker(&mut m2, run.now, 100, "w1");
    let _ = m2.handle(run.now, master::Event::Elected { floor: Epoch(5), clock: 0 });
    let mut run2 = Run { m: m2, now: run.now, store: BTreeMap::new() };
    let _ = run2.feed(master::Event::Store(StoreEvent::Loaded { records }));
    let _ = run2.send(
        100,
        w1_registration(vec![
            report(&new0, &fw, ExecutorState::Exited { code: 1 }),
            report(&old[1], &fw, ExecutorState::Running),
            report(&old[2], &fw, ExecutorState::Running),
        ]),
    );
    let d = run2.deployment();
    assert_eq!(d.seq, before.seq, "the same deployment");
    assert_eq!(d.ends, [(0, 1)].into(), "the end counted once");
    assert_eq!(d.state, DeploymentState::Rolling);
}

/// Sim seed 46787 with `--api-jobs --services` (docs/design.md#simulator-seeds): after
/// a deployment succeeded (its eras pruned to the deployed spec's), a new
/// leader hears of a v1 executor its predecessor never saw again (its
/// worker was cut off; its slot was refilled with v2). Reported first, it
/// must not be adopted into its slot: nothing would replace it, and the
/// slot's v2 executor would be killed as the stray.
#[test]
fn after_a_deployment_succeeded_a_new_leader_keeps_the_deployed_spec_over_a_stale_old_executor() {
    let (mut run, fw, old) = running_v1(gated());
    let _ =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", gated()), max_parallel: 1 });
    let new0 = replace(&mut run, &fw, &old[0]);
    let _ = run.advance(10_000);
    let new1 = replace(&mut run, &fw, &old[1]);
    let _ = run.advance(10_000);
    let new2 = replace(&mut run, &fw, &old[2]);
    let _ = run.advance(10_000);
    assert_eq!(run.deployment().state, DeploymentState::Succeeded);
    let records: Vec<Record> = run.store.values().cloned().collect();
    let mut m2 = Master::new(master::Config::new("b".into(), addr("b")));
    let _ = connect_worker(&mut m2, run.now, 100, "w1");
    let _ = m2.handle(run.now, master::Event::Elected { floor: Epoch(5), clock: 0 });
    let mut run2 = Run { m: m2, now: run.now, store: BTreeMap::new() };
    let _ = run2.feed(master::Event::Store(StoreEvent::Loaded { records }));
    let sends = run2.send(
        100,
        w1_registration(vec![
            report(&old[0], &fw, ExecutorState::Running),
            report(&new0, &fw, ExecutorState::Running),
            report(&new1, &fw, ExecutorState::Running),
            report(&new2, &fw, ExecutorState::Running),
        ]),
    );
    assert_eq!(run2.m.status(), master::Status::Alive);
    let killed: Vec<ExecutorId> = sends
        .iter()
        .filter_map(|(_, m)| match m {
            Message::KillExecutorOnWorker { executor, .. } => Some(executor.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(killed, vec![old[0].clone()], "the stale v1 one goes, v2 stays: {sends:?}");
    let live: Vec<ExecutorId> = run2
        .m
        .executors()
        .filter(|e| !e.state.is_terminal() && !e.operator_stop && !e.kill_requested)
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(live, vec![new0, new1, new2], "slot 0 runs v2");
    assert!(launched(&run2.advance(60_000)).is_empty(), "nothing to refill");
}

/// `web` with an http check (docs/jobs.md, health checks).
fn checked(version: &str, update: UpdatePolicy) -> GroupSpec {
    use regent_core::launch::{CheckKind, CheckSpec};
    let mut spec = web(version, update);
    spec.launch.ports = vec!["http".into()];
    let http = CheckKind::Http { port: "http".into(), path: "/health".into(), expect: (200, 299) };
    spec.launch.checks = vec![CheckSpec::new(http)];
    spec
}

impl Run {
    /// `id` RUNNING with its worker's health report: `status` for `for_ms`.
    fn health(
        &mut self,
        fw: &FrameworkId,
        id: &ExecutorId,
        status: regent_core::protocol::HealthStatus,
        for_ms: u64,
    ) -> Vec<(ConnId, Message)> {
        let mut report = report(id, fw, ExecutorState::Running);
        let detail = String::new();
        report.health = Some(regent_core::protocol::HealthReport { status, for_ms, detail });
        self.send(100, Message::ExecutorStatus { incarnation: Incarnation(100), report })
    }
}

#[test]
fn with_checks_a_new_executor_is_healthy_only_once_its_checks_passed_for_min_healthy_time() {
    use regent_core::protocol::HealthStatus::{Failing, Passing, Pending};
    let (mut run, fw, old) = running_v1(gated());
    let v2 = checked("v2", gated());
    let sends = run.send(1, Message::UpdateGroup { request: 2, spec: v2, max_parallel: 1 });
    assert_eq!(stops(&sends), vec![old[0].clone()]);
    let new0 = replace(&mut run, &fw, &old[0]);
    // Running for 30 s, its checks never reported or pending: not healthy,
    // so the next slot is not touched.
    assert!(stops(&run.advance(15_000)).is_empty(), "no report: not healthy");
    let _ = run.health(&fw, &new0, Pending, 0);
    assert!(stops(&run.advance(15_000)).is_empty(), "pending: not healthy");
    assert!(run.deployment().healthy.is_empty());
    // Passing for 4 s: 6 s more to go, whatever it ran before.
    let _ = run.health(&fw, &new0, Passing, 4_000);
    assert!(stops(&run.advance(5_999)).is_empty(), "passing for 9.999 s");
    let sends = run.advance(1);
    assert_eq!(stops(&sends), vec![old[1].clone()], "passing for 10 s: the next slot");
    assert_eq!(run.deployment().healthy, [0].into());
    // Failing before the deployment ends: out of the healthy set again.
    let _ = run.health(&fw, &new0, Failing, 0);
    assert!(run.deployment().healthy.is_empty(), "the bake window");
}

#[test]
fn with_checks_that_never_pass_the_healthy_deadline_fails_the_deployment_and_reverts() {
    use regent_core::protocol::HealthStatus::Failing;
    let update = UpdatePolicy { healthy_deadline_ms: 60_000, ..gated() };
    let (mut run, fw, old) = running_v1(update);
    let v2 = checked("v2", update);
    let _ = run.send(1, Message::UpdateGroup { request: 2, spec: v2, max_parallel: 1 });
    let new0 = replace(&mut run, &fw, &old[0]);
    let _ = run.health(&fw, &new0, Failing, 0);
    let sends = run.advance(59_000);
    assert!(stops(&sends).is_empty(), "{sends:?}");
    assert_eq!(run.deployment().state, DeploymentState::Rolling);
    let sends = run.advance(2_000);
    let record = run.record();
    let d = record.groups[0].deployment.clone().expect("the revert");
    assert_eq!((d.seq, d.revert_of), (2, Some(1)), "failed and reverted: {sends:?}");
    assert_eq!(record.groups[0].spec.command, ["serve", "v1"]);
    assert_eq!(stops(&sends), vec![new0], "the unhealthy v2 executor is replaced first");
}

// What readers see of a deployment (`JobsReply`, `GET /v1/jobs/{id}/deployment`,
// the state view) and the events its changes make
// (docs/design.md#issue-45: core/src/master/deployment_view.rs, core/src/events.rs).

impl Run {
    /// The group's deployment as `JobsReply` shows it.
    fn view(&mut self, fw: &FrameworkId) -> regent_core::api::DeploymentView {
        let sends = self.send(1, Message::JobsRequest { request: 60, job: Some(fw.clone()) });
        sends
            .iter()
            .find_map(|(_, m)| match m {
                Message::JobsReply { jobs, .. } => jobs[0].groups[0].deployment.clone(),
                _ => None,
            })
            .expect("the group's deployment in the jobs reply")
    }

    /// The events between the state view `before` and now, and the view now.
    fn events_since(
        &self,
        before: &regent_core::protocol::ClusterState,
    ) -> (Vec<regent_core::events::ClusterEvent>, regent_core::protocol::ClusterState) {
        let now = self.m.state();
        (regent_core::events::diff(before, &now), now)
    }
}

/// The deployment events of `events` as `(change, seq, reason)`.
fn deployment_events(
    events: &[regent_core::events::ClusterEvent],
) -> Vec<(&'static str, u64, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            regent_core::events::ClusterEvent::Deployment { change, seq, reason, .. } => {
                Some((change.name(), *seq, reason.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn the_deployment_view_shows_digests_canaries_counts_and_deadlines() {
    use regent_core::store::spec_digest;
    let canary = UpdatePolicy { canary: 1, progress_deadline_ms: 600_000, ..gated() };
    let (mut run, fw, old) = running_v1(canary);
    let started = run.now.0;
    let _ =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", canary), max_parallel: 1 });
    let v = run.view(&fw);
    assert_eq!((v.seq, v.state.as_str(), v.canaries.clone()), (1, "canary", vec![0]));
    assert_eq!(v.target_digest, spec_digest(&web("v2", canary)));
    assert_eq!(v.revert_to_digest, Some(spec_digest(&web("v1", canary))));
    // Old[0] is being stopped: still a live executor of the old version.
    assert_eq!((v.healthy, v.placed, v.old, v.open), (0, 0, 3, 3));
    assert!(v.auto_revert && !v.auto_promote);
    assert_eq!((v.healthy_deadline_ms, v.progress_deadline_ms), (300_000, 600_000));
    // The leader's wall clock is its clock term plus the election's offset:
    // the deadline is the start plus the progress deadline, whatever that is.
    assert_eq!(v.progress_due_ms, Some(v.started_ms + 600_000));
    assert_eq!(v.progress_ms, v.started_ms);
    let _ = started;
    let _ = replace(&mut run, &fw, &old[0]);
    let v = run.view(&fw);
    assert_eq!((v.healthy, v.placed, v.old), (0, 1, 2), "the canary placed, not healthy yet");
    let _ = run.advance(10_000);
    let v = run.view(&fw);
    assert_eq!((v.state.as_str(), v.healthy, v.placed, v.old), ("awaiting_promotion", 1, 1, 2));
    assert_eq!(v.canaries, vec![0]);
    assert_eq!(v.progress_due_ms, None, "waiting for promotion has no deadline");
    assert_eq!(v.progress_ms, v.started_ms + 10_000, "the canary's health was progress");
}

#[test]
fn a_canary_deployment_is_told_as_started_awaiting_promotion_promoted_and_succeeded() {
    let canary = UpdatePolicy { canary: 1, ..gated() };
    let (mut run, fw, old) = running_v1(canary);
    let s0 = run.m.state();
    let _ =
        run.send(1, Message::UpdateGroup { request: 2, spec: web("v2", canary), max_parallel: 1 });
    let (events, s1) = run.events_since(&s0);
    assert_eq!(deployment_events(&events), vec![("started", 1, None)], "{events:?}");
    let line = events
        .iter()
        .find(|e| e.kind() == "deployment")
        .map(regent_core::events::ClusterEvent::describe)
        .unwrap();
    assert!(line.contains("deployment 1 of group") && line.contains("started, canary"), "{line}");
    let _ = replace(&mut run, &fw, &old[0]);
    let _ = run.advance(10_000);
    let (events, s2) = run.events_since(&s1);
    assert_eq!(deployment_events(&events), vec![("awaiting_promotion", 1, None)]);
    let job = fw.clone();
    let _ = run.send(1, Message::PromoteDeployment { request: 8, job, group: None });
    let (events, s3) = run.events_since(&s2);
    assert_eq!(deployment_events(&events), vec![("promoted", 1, None)]);
    assert!(deployment_events(&run.events_since(&s3).0).is_empty(), "no change, no event");
    let new1 = replace(&mut run, &fw, &old[1]);
    let _ = run.advance(10_000);
    let _ = replace(&mut run, &fw, &old[2]);
    let _ = run.advance(10_000);
    let (events, _) = run.events_since(&s3);
    assert_eq!(deployment_events(&events), vec![("succeeded", 1, None)], "{events:?}");
    let _ = new1;
}

#[test]
fn a_failed_deployment_is_told_with_its_reason_then_its_revert() {
    let quick = UpdatePolicy { healthy_deadline_ms: 60_000, ..gated() };
    let (mut run, fw, old) = running_v1(quick);
    let v2 = checked("v2", quick);
    let _ = run.send(1, Message::UpdateGroup { request: 2, spec: v2, max_parallel: 1 });
    let new0 = replace(&mut run, &fw, &old[0]);
    let s0 = run.m.state();
    let _ = run.health(&fw, &new0, regent_core::protocol::HealthStatus::Failing, 0);
    let _ = run.advance(61_000);
    // Between two views the deployment failed and its revert started in
    // one write: still two events, the failure with why.
    let (events, _) = run.events_since(&s0);
    let why = "healthy_deadline 1m passed on slot 0".to_string();
    let lines: Vec<String> = events
        .iter()
        .filter(|e| e.kind() == "deployment")
        .map(regent_core::events::ClusterEvent::describe)
        .collect();
    let failed = " failed, 0/3 healthy: healthy_deadline 1m passed on slot 0";
    assert!(
        lines[0].starts_with("deployment 1 of group ") && lines[0].ends_with(failed),
        "{lines:?}"
    );
    assert!(lines[1].contains("deployment 2 (revert of 1) of group "), "{lines:?}");
    assert!(lines[1].contains(" reverting, rolling, "), "{lines:?}");
    assert_eq!(
        deployment_events(&events),
        vec![("failed", 1, Some(why.clone())), ("reverting", 2, Some(why.clone()))],
        "{events:?}"
    );
    let v = run.view(&fw);
    assert_eq!((v.seq, v.revert_of, v.reverts_because), (2, Some(1), Some(why)));
    assert_eq!(v.revert_to_digest, None, "a revert reverts to nothing");
}

#[test]
fn a_failure_without_revert_is_told_once_with_its_reason() {
    let no_revert = UpdatePolicy { auto_revert: false, ..gated() };
    let (mut run, fw, old) = running_v1(no_revert);
    let _ = run
        .send(1, Message::UpdateGroup { request: 2, spec: web("v2", no_revert), max_parallel: 1 });
    let sends = run.status(&fw, &old[0], ExecutorState::Killed);
    let broken = launched(&sends)[0].0.clone();
    let s0 = run.m.state();
    let failed = ExecutorState::Failed { reason: "exec: no such file".into() };
    let _ = run.status(&fw, &broken, failed);
    let (events, s1) = run.events_since(&s0);
    let got = deployment_events(&events);
    assert_eq!(got.len(), 1, "{events:?}");
    assert_eq!((got[0].0, got[0].1), ("failed", 1));
    let reason = got[0].2.clone().unwrap_or_default();
    assert!(reason.contains("failed to start on slot 0 (exec: no such file)"), "{reason}");
    assert_eq!(run.view(&fw).reason, Some(reason));
    assert!(deployment_events(&run.events_since(&s1).0).is_empty());
}

#[test]
fn an_executors_health_changes_are_events_and_its_view_carries_them() {
    use regent_core::events::ClusterEvent;
    use regent_core::protocol::HealthStatus::{Failing, Passing, Pending};
    let (mut run, fw, old) = running_v1(gated());
    let _ = run.send(
        1,
        Message::UpdateGroup { request: 2, spec: checked("v2", gated()), max_parallel: 1 },
    );
    let new0 = replace(&mut run, &fw, &old[0]);
    let health = |events: &[ClusterEvent]| -> Vec<(String, Option<String>, String)> {
        events
            .iter()
            .filter_map(|e| match e {
                ClusterEvent::ExecutorHealth { executor, status, previous, detail, .. } => {
                    assert_eq!(executor, &new0);
                    Some((status.clone(), previous.clone(), detail.clone()))
                }
                _ => None,
            })
            .collect()
    };
    let s0 = run.m.state();
    let _ = run.health(&fw, &new0, Pending, 0);
    let (events, s1) = run.events_since(&s0);
    assert_eq!(health(&events), vec![("pending".into(), None, String::new())]);
    let _ = run.health(&fw, &new0, Passing, 1_000);
    let (events, s2) = run.events_since(&s1);
    assert_eq!(health(&events), vec![("passing".into(), Some("pending".into()), String::new())]);
    // The same status reported again, only longer held: no event.
    let _ = run.health(&fw, &new0, Passing, 5_000);
    let (events, s3) = run.events_since(&s2);
    assert!(health(&events).is_empty(), "{events:?}");
    assert!(
        events.iter().all(|e| e.kind() != "executor"),
        "no executor `updated` either: {events:?}"
    );
    let mut report = report(&new0, &fw, ExecutorState::Running);
    let detail = "http: GET /health answered 500".to_string();
    report.health = Some(regent_core::protocol::HealthReport {
        status: Failing,
        for_ms: 0,
        detail: detail.clone(),
    });
    let _ = run.send(100, Message::ExecutorStatus { incarnation: Incarnation(100), report });
    let (events, s4) = run.events_since(&s3);
    assert_eq!(health(&events), vec![("failing".into(), Some("passing".into()), detail.clone())]);
    let line = events.iter().find(|e| e.kind() == "executor_health").unwrap().describe();
    assert!(
        line.ends_with("health failing (was passing): http: GET /health answered 500"),
        "{line}"
    );
    let view = s4.executors.iter().find(|e| e.id == new0).and_then(|e| e.health.clone());
    assert_eq!(view.map(|h| (h.status, h.detail)), Some((Failing, detail)));
    // It ends: its view has no health any more, and no health event.
    let _ = run.status(&fw, &new0, ExecutorState::Exited { code: 1 });
    let (events, s5) = run.events_since(&s4);
    assert!(health(&events).is_empty(), "{events:?}");
    assert!(s5.executors.iter().find(|e| e.id == new0).is_none_or(|e| e.health.is_none()));
}

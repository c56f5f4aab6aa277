//! Rolling updates (`UpdateGroup`, `regent run --update`): a group's new
//! spec is durable before anything is stopped; its old executors are
//! replaced slot by slot, never more than `max_parallel` slots down at once;
//! a new leader goes on with the rollout, telling old executors from new
//! ones by the epoch and launch number in their ids; a count change is
//! refused.

mod common;

use common::*;
use regent_core::master::{self, Master};
use regent_core::protocol::{ExecutorReport, ExecutorState, GroupSpec, Message};
use regent_core::store::{Record, StoreCommand, StoreEvent};
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis};
use std::collections::BTreeMap;

const T: Millis = Millis(0);

/// Group `web` of 3 slots running `serve VERSION`, deployed one slot at a
/// time with no baking (`min_healthy_time` 0: these tests are about the
/// order; core/tests/deployments.rs gates on health).
fn web(version: &str) -> GroupSpec {
    web_at(version, 1)
}

/// [`web`] deployed `max_parallel` slots at a time.
fn web_at(version: &str, max_parallel: u32) -> GroupSpec {
    let update = regent_core::policy::UpdatePolicy {
        max_parallel,
        min_healthy_time_ms: 0,
        ..Default::default()
    };
    GroupSpec {
        group: "web".into(),
        slots: 3,
        command: vec!["serve".into(), version.into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy: regent_core::policy::GroupPolicy {
            update: Some(Box::new(update)),
            ..Default::default()
        },
        launch: Default::default(),
    }
}

fn status(run: &mut Run, r: ExecutorReport) -> Vec<(ConnId, Message)> {
    run.send(100, Message::ExecutorStatus { incarnation: Incarnation(100), report: r })
}

/// (executor, command) of the launches in `sends`.
fn launches(sends: &[(ConnId, Message)]) -> Vec<(ExecutorId, FrameworkId, Vec<String>)> {
    sends
        .iter()
        .filter_map(|(_, m)| match m {
            Message::LaunchExecutor { executor, framework, spec, .. } => {
                Some((executor.clone(), framework.clone(), spec.command.clone()))
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

fn accepted(sends: &[(ConnId, Message)]) -> bool {
    sends.iter().any(|(_, m)| matches!(m, Message::RequestAccepted { .. }))
}

fn refusal(sends: &[(ConnId, Message)]) -> Option<String> {
    sends.iter().find_map(|(_, m)| match m {
        Message::RequestRefused { reason, .. } => Some(reason.clone()),
        _ => None,
    })
}

/// A leader with worker w1 (conn 100) and framework `app` (conn 1) whose
/// group `web` runs three executors of `serve v1`.
fn running_v1() -> (Run, FrameworkId, Vec<ExecutorId>) {
    let mut m = Master::new(master::Config::new("a".into(), addr("a")));
    let _ = elect(&mut m, T, 1);
    let mut run = Run { m, now: T, store: BTreeMap::new() };
    let _ = connect_worker(&mut run.m, T, 100, "w1");
    let _ = run.send(100, w1_registration(vec![]));
    subscribe(&mut run.m, 1);
    let sends = run.send(1, Message::DeclareGroup { request: 1, spec: web("v1") });
    let launched = launches(&sends);
    assert_eq!(launched.len(), 3, "{sends:?}");
    let fw = launched[0].1.clone();
    let ids: Vec<ExecutorId> = launched.into_iter().map(|(id, ..)| id).collect();
    for id in &ids {
        let _ = status(&mut run, report(id, &fw, ExecutorState::Running));
    }
    (run, fw, ids)
}

#[test]
fn an_update_replaces_the_executors_slot_by_slot_never_more_than_max_parallel_down() {
    let (mut run, fw, old) = running_v1();
    let sends = run.send(1, Message::UpdateGroup { request: 2, spec: web("v2"), max_parallel: 1 });
    assert!(accepted(&sends), "{sends:?}");
    let mut stopping = stops(&sends);
    assert_eq!(stopping, vec![old[0].clone()], "one slot at a time, lowest first");
    // The new spec and the rollout were durable before the stop was sent.
    let framework = run.store.values().find_map(|r| match r {
        Record::Framework(f) => Some(f.clone()),
        _ => None,
    });
    let group = &framework.expect("a framework record").groups[0];
    assert_eq!(group.spec.command, ["serve", "v2"]);
    assert_eq!(group.active_deployment().map(|d| d.policy.max_parallel), Some(1));
    let mut replaced = Vec::new();
    for round in 0..3 {
        let gone = stopping.pop().expect("an executor being stopped");
        let sends = status(&mut run, report(&gone, &fw, ExecutorState::Killed));
        let new = launches(&sends);
        assert_eq!(new.len(), 1, "round {round}: its slot refilled: {sends:?}");
        assert_eq!(new[0].2, ["serve", "v2"], "with the new spec");
        assert!(stops(&sends).is_empty(), "round {round}: the new one is not running yet");
        let sends = status(&mut run, report(&new[0].0, &fw, ExecutorState::Running));
        replaced.push(new[0].0.clone());
        stopping = stops(&sends);
        if round < 2 {
            assert_eq!(stopping, vec![old[round + 1].clone()], "round {round}: then the next");
        } else {
            assert!(stopping.is_empty(), "every old executor replaced");
        }
    }
    // Done: the rollout is cleared from the record, no retry was charged.
    let Some(Record::Framework(f)) =
        run.store.values().find(|r| matches!(r, Record::Framework(_))).cloned()
    else {
        panic!("a framework record")
    };
    assert_eq!(f.groups[0].active_deployment(), None);
    assert_eq!(f.groups[0].retries_used, 0);
    let live: Vec<_> = run.m.executors().filter(|e| !e.state.is_terminal()).collect();
    assert_eq!(live.len(), 3);
    assert!(live.iter().all(|e| replaced.contains(&e.id)), "{live:?}");
    // The same update again changes nothing.
    let sends = run.send(1, Message::UpdateGroup { request: 3, spec: web("v2"), max_parallel: 1 });
    assert!(accepted(&sends) && stops(&sends).is_empty() && launches(&sends).is_empty());
}

#[test]
fn max_parallel_slots_are_replaced_at_once() {
    let (mut run, _fw, old) = running_v1();
    let spec = web_at("v2", 2);
    let sends = run.send(1, Message::UpdateGroup { request: 2, spec, max_parallel: 1 });
    assert_eq!(stops(&sends), old[..2].to_vec(), "the group's update policy says 2");
}

#[test]
fn an_update_changing_the_count_or_with_max_parallel_0_is_refused_and_changes_nothing() {
    let (mut run, _fw, _old) = running_v1();
    let before = run.store.clone();
    let mut more = web("v2");
    more.slots = 4;
    let sends = run.send(1, Message::UpdateGroup { request: 2, spec: more, max_parallel: 1 });
    let reason = refusal(&sends).expect("refused");
    assert!(reason.contains("does not change a group's count (group \"web\": 3 -> 4)"), "{reason}");
    let sends = run.send(1, Message::UpdateGroup { request: 3, spec: web("v2"), max_parallel: 0 });
    assert!(refusal(&sends).unwrap().contains("max_parallel must be at least 1"));
    assert!(stops(&sends).is_empty());
    assert_eq!(run.store, before, "nothing written");
    // Without --update, a changed spec is refused as before.
    let sends = run.send(1, Message::DeclareGroup { request: 4, spec: web("v2") });
    assert!(refusal(&sends).unwrap().contains("already declared with a different spec"));
}

#[test]
fn a_new_leader_goes_on_with_a_rollout_and_stops_only_old_executors() {
    let (mut run, fw, old) = running_v1();
    let sends = run.send(1, Message::UpdateGroup { request: 2, spec: web("v2"), max_parallel: 1 });
    assert_eq!(stops(&sends), vec![old[0].clone()]);
    let sends = status(&mut run, report(&old[0], &fw, ExecutorState::Killed));
    let new = launches(&sends)[0].0.clone();
    let _ = status(&mut run, report(&new, &fw, ExecutorState::Running));
    // The leader dies while old[1] is being stopped; a new one loads the
    // records and hears the worker: old[1] and old[2] still run v1.
    let records: Vec<Record> = run.store.values().cloned().collect();
    let mut m2 = Master::new(master::Config::new("b".into(), addr("b")));
    let _ = connect_worker(&mut m2, T, 100, "w1");
    let out = m2.handle(T, master::Event::Elected { floor: Epoch(5), clock: 0 });
    assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
    let mut run2 = Run { m: m2, now: T, store: BTreeMap::new() };
    let _ = run2.feed(master::Event::Store(StoreEvent::Loaded { records }));
    let sends = run2.send(
        100,
        w1_registration(vec![
            report(&new, &fw, ExecutorState::Running),
            report(&old[1], &fw, ExecutorState::Running),
            report(&old[2], &fw, ExecutorState::Running),
        ]),
    );
    assert_eq!(run2.m.status(), master::Status::Alive);
    assert_eq!(stops(&sends), vec![old[1].clone()], "an old one, never the new one: {sends:?}");
}

/// Regression (sim seed 10148, docs/design.md#simulator-seeds, with
/// `--api-jobs --jobs --operator --takeovers`): an update reopens the
/// group's failed slots, and they are placed again with the new spec — the
/// index of open slots placement reads was left behind (debug builds check
/// it after every step and panicked).
#[test]
fn an_update_reopens_a_failed_slot_and_places_it_with_the_new_spec() {
    let (mut run, fw, old) = running_v1();
    // Slot 0 fails until its retries are spent: no relaunch follows.
    let mut current = old[0].clone();
    let mut failed_for_good = false;
    for _ in 0..20 {
        let failed = ExecutorState::Failed { reason: "boom".into() };
        let sends = status(&mut run, report(&current, &fw, failed));
        match launches(&sends).first() {
            Some((next, ..)) => current = next.clone(),
            None => {
                failed_for_good = true;
                break;
            }
        }
    }
    assert!(failed_for_good, "slot 0 fails for good within 20 failures");
    let sends = run.send(1, Message::UpdateGroup { request: 2, spec: web("v2"), max_parallel: 1 });
    assert!(accepted(&sends), "{sends:?}");
    let placed = launches(&sends);
    assert!(
        placed.iter().any(|(_, _, command)| command == &["serve", "v2"]),
        "the reopened slot is placed with the new spec: {sends:?}"
    );
}

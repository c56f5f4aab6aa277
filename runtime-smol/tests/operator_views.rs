//! What operators see of cordons, drains and scaled groups (docs/design.md#issue-14 items
//! 1 and 4): `/api/state` JSON, `/metrics`, the `regent status` table, and
//! the parsing of `regent drain --deadline`.

use regent_core::protocol::{ClusterState, FrameworkView, GroupView, WorkerView};
use regent_core::states::{DrainState, FrameworkState, MasterStatus, WorkerState};
use regent_core::{Epoch, FrameworkId, MasterId, WorkerId};
use regent_smol::client::{
    deadline_text, parse_deadline, placement_text, render_table, utc_text, DeadlineError,
};
use regent_smol::http::{
    metrics_text, paged_state_body, state_json, state_page, HttpSnapshot, MetricsSnapshot,
};
use std::time::Duration;

fn worker(id: &str, state: &str, cordoned: bool, drain: &str, deadline: Option<u64>) -> WorkerView {
    WorkerView {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        usage: None,
        ports: Default::default(),
        ports_used: Default::default(),
        id: WorkerId::new(id),
        state: WorkerState::from_name(state).expect("a worker state"),
        cores: 4,
        cores_used: 1,
        memory_mb: 1024,
        memory_used_mb: 64,
        cordoned,
        drain: DrainState::from_name(drain),
        drain_deadline_ms: deadline,
        executors: 1,
        attributes: Vec::new(),
    }
}

/// 2026-12-01 15:00:00 UTC.
const DEADLINE: u64 = 1_796_137_200_000;

fn state() -> ClusterState {
    ClusterState {
        master: MasterId::new("m1"),
        status: MasterStatus::Alive,
        epoch: Epoch(3),
        leader: None,
        workers: vec![
            worker("w-open", "ALIVE", false, "", None),
            worker("w-cordoned", "ALIVE", true, "", None),
            worker("w-draining", "ALIVE", true, "DRAINING", Some(DEADLINE)),
            worker("w-drained", "ALIVE", true, "DRAINED", None),
            worker("w-dead-drained", "DEAD", true, "DRAINED", None),
            worker("w-unknown", "UNKNOWN", true, "", None),
        ],
        frameworks: vec![FrameworkView {
            tenant: None,
            id: FrameworkId::new("fw-1"),
            name: "etl".into(),
            state: FrameworkState::Active,
            connected: true,
            groups: vec![
                GroupView {
                    name: "main".into(),
                    slots: 5,
                    declared: 2,
                    running: 4,
                    waiting: 0,
                    last_end: None,
                    unplaced: 0,
                    reasons: Vec::new(),
                    deployment: None,
                },
                GroupView {
                    name: "aux".into(),
                    slots: 1,
                    declared: 1,
                    running: 1,
                    waiting: 0,
                    last_end: None,
                    unplaced: 0,
                    reasons: Vec::new(),
                    deployment: None,
                },
            ],
        }],
        executors: vec![],
        messages: 1,
        rejected: 0,
        history: vec![],
        history_omitted: 0,
    }
}

#[test]
fn api_state_shows_cordons_and_drains_and_keeps_the_other_states() {
    let v = state_json(&state());
    let ws = v["workers"].as_array().unwrap();
    let got: Vec<(&str, &str, bool)> = ws
        .iter()
        .map(|w| {
            (
                w["id"].as_str().unwrap(),
                w["state"].as_str().unwrap(),
                w["cordoned"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("w-open", "ALIVE", false),
            ("w-cordoned", "ALIVE", true),
            ("w-draining", "DRAINING", true),
            ("w-drained", "DRAINED", true),
            ("w-dead-drained", "DEAD", true),
            ("w-unknown", "UNKNOWN", true),
        ]
    );
    assert_eq!(ws[2]["drain_deadline_ms"], DEADLINE);
    assert!(ws[0]["drain_deadline_ms"].is_null());
    assert_eq!(ws[2]["executors"], 1);
    let g = &v["frameworks"][0]["groups"];
    assert_eq!(g[0]["name"], "main");
    assert_eq!(g[0]["slots"], 5);
    assert_eq!(g[0]["declared_slots"], 2);
    assert_eq!(g[0]["running"], 4);
    assert_eq!(g[1]["slots"], 1);
}

#[test]
fn metrics_count_cordoned_workers_by_maintenance() {
    let text = metrics_text(&MetricsSnapshot::from(&HttpSnapshot {
        state: state().into(),
        rejected_connections: 0,
        node: regent_core::node::master::Metrics::default(),
        master: Default::default(),
    }));
    assert!(text.contains("# TYPE regent_workers_cordoned gauge"), "{text}");
    for line in [
        "regent_workers_cordoned{maintenance=\"CORDONED\"} 2",
        "regent_workers_cordoned{maintenance=\"DRAINING\"} 1",
        "regent_workers_cordoned{maintenance=\"DRAINED\"} 2",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} missing from\n{text}");
    }
}

/// Prometheus' naming rules, as `promtool check metrics` applies them: every
/// family has HELP and TYPE, counters end in `_total`, durations are in the
/// base unit (seconds), and a sample's value parses as a float.
#[test]
fn metrics_follow_prometheus_naming() {
    let node = regent_core::node::master::Metrics {
        acting_lease_ms: 1_250,
        oldest_command_wait_ms: 7,
        ..Default::default()
    };
    let text = metrics_text(&MetricsSnapshot::from(&HttpSnapshot {
        state: state().into(),
        rejected_connections: 0,
        node,
        master: Default::default(),
    }));
    let mut families = 0;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            families += 1;
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(text.contains(&format!("# HELP {name} ")), "{name} has no HELP");
            assert_eq!(kind.ends_with("counter"), name.ends_with("_total"), "{name} is a {kind}");
            for unit in ["millisecond", "_ms", "minutes", "hours"] {
                assert!(!name.contains(unit), "{name}: durations are in seconds");
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let value = line.rsplit(' ').next().unwrap_or_default();
            assert!(value.parse::<f64>().is_ok(), "{line:?}: the value is no number");
        }
    }
    assert!(families > 30, "{families} families in\n{text}");
    for line in ["regent_acting_lease_seconds 1.250", "regent_commands_oldest_wait_seconds 0.007"] {
        assert!(text.lines().any(|l| l == line), "{line:?} missing from\n{text}");
    }
}

#[test]
fn status_table_shows_placement_and_scaled_groups() {
    let table = render_table(&state());
    for needle in [
        "PLACEMENT",
        "open",
        "CORDONED",
        "DRAINING (SIGKILL at 2026-12-01 15:00:00 UTC)",
        "DRAINED",
        "GROUPS (RUNNING/SLOTS)",
        "main 4/5, scaled from 2; aux 1/1",
    ] {
        assert!(table.contains(needle), "{needle:?} missing from\n{table}");
    }
    let w = worker("w", "ALIVE", true, "DRAINING", None);
    assert_eq!(placement_text(&w), "DRAINING");
    assert_eq!(utc_text(0), "1970-01-01 00:00:00 UTC");
    assert_eq!(utc_text(951_782_400_000), "2000-02-29 00:00:00 UTC");
}

#[test]
fn drain_deadlines_parse_with_units_and_refuse_the_rest_by_name() {
    assert_eq!(parse_deadline("90s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_deadline("90"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_deadline("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_deadline("5m"), Ok(Duration::from_secs(300)));
    assert_eq!(parse_deadline("2h"), Ok(Duration::from_secs(7_200)));
    assert_eq!(parse_deadline("168h"), Ok(Duration::from_secs(7 * 24 * 3_600)));
    assert_eq!(
        parse_deadline("169h").map_err(|e| e.to_string()),
        Err("deadline \"169h\" is longer than the limit of 7 days".into())
    );
    assert_eq!(
        parse_deadline("8d").map_err(|e| e.to_string()),
        Err("deadline \"8d\": unknown unit \"d\" (use ms, s, m or h)".into())
    );
    assert_eq!(
        parse_deadline("soon").map_err(|e| e.to_string()),
        Err("deadline \"soon\" is not a duration: use e.g. 90s, 500ms, 5m or 1h".into())
    );
    assert_eq!(
        parse_deadline("99999999999999999999s").map_err(|e| e.to_string()),
        Err("deadline \"99999999999999999999s\" is not a duration: use e.g. 90s, 500ms, 5m or 1h"
            .into())
    );
    assert!(matches!(
        parse_deadline("8d"),
        Err(DeadlineError::UnknownUnit { unit, .. }) if unit == "d"
    ));
    assert_eq!(deadline_text(Duration::from_secs(60)), "60s");
    assert_eq!(deadline_text(Duration::from_millis(1_500)), "1500ms");
}

#[test]
fn api_state_pages_workers_in_id_order_with_their_executors() {
    let snap = |s: ClusterState| HttpSnapshot {
        state: s.into(),
        rejected_connections: 0,
        node: Default::default(),
        master: Default::default(),
    };
    let mut s = state();
    s.executors = vec![regent_core::protocol::ExecutorView {
        id: regent_core::ExecutorId::new("fw-1/main#0#1.1"),
        framework: FrameworkId::new("fw-1"),
        worker: Some(WorkerId::new("w-open")),
        state: regent_core::protocol::ExecutorState::Running,
        ports: vec![],
        resources: vec![],
        usage: None,
        preempted_by: None,
        health: None,
    }];
    let snap = snap(s);
    let first = state_page("/api/state?limit=4").unwrap().unwrap();
    let v: serde_json::Value = serde_json::from_str(&paged_state_body(&snap, &first)).unwrap();
    let ids = |v: &serde_json::Value| -> Vec<String> {
        v["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&v), ["w-cordoned", "w-dead-drained", "w-drained", "w-draining"]);
    assert_eq!(v["page"]["next_after"], "w-draining");
    assert_eq!(v["page"]["workers_total"], 6);
    assert_eq!(v["executors"].as_array().unwrap().len(), 0, "w-open is on the next page");
    assert_eq!(v["frameworks"].as_array().unwrap().len(), 1, "every framework on every page");
    let next = state_page("/api/state?limit=4&after=w-draining").unwrap().unwrap();
    let v: serde_json::Value = serde_json::from_str(&paged_state_body(&snap, &next)).unwrap();
    assert_eq!(ids(&v), ["w-open", "w-unknown"]);
    assert!(v["page"]["next_after"].is_null(), "the last page");
    assert_eq!(v["executors"][0]["worker_id"], "w-open");
    assert_eq!(state_page("/api/state").unwrap(), None);
    assert!(state_page("/api/state?limit=0").unwrap_err().to_string().contains("limit=0"));
    assert!(state_page("/api/state?limit=10001").is_err());
    assert_eq!(state_page("/api/state?_=123").unwrap(), None, "a cache buster is ignored");
    assert!(state_page("/api/state?after=%zz").unwrap_err().to_string().contains("after=%zz"));
}

/// `regent status` and `/api/state` (the page's source) show each running
/// executor's health from the leader's view, and a group's deployment under
/// way (docs/design.md#issue-45).
#[test]
fn status_shows_each_executors_health_and_a_groups_deployment() {
    use regent_core::protocol::{ExecutorState, ExecutorView, HealthReport, HealthStatus};
    let executor = |n: u32, health: Option<HealthReport>| ExecutorView {
        id: regent_core::ExecutorId::new(format!("fw-1/main#{n}#1.{n}")),
        framework: FrameworkId::new("fw-1"),
        worker: Some(WorkerId::new("w-open")),
        state: ExecutorState::Running,
        ports: vec![],
        resources: vec![],
        usage: None,
        preempted_by: None,
        health,
    };
    let report =
        |status, detail: &str| Some(HealthReport { status, for_ms: 4_000, detail: detail.into() });
    let mut s = state();
    s.executors = vec![
        executor(0, report(HealthStatus::Passing, "")),
        executor(1, report(HealthStatus::Failing, "http: GET /health answered 500")),
        executor(2, report(HealthStatus::Pending, "")),
        executor(3, None),
    ];
    s.frameworks[0].groups[0].deployment = Some(regent_core::api::DeploymentView {
        seq: 2,
        state: "canary".into(),
        healthy: 0,
        open: 3,
        canary: 1,
        ..Default::default()
    });
    let table = render_table(&s);
    let executors = table.split("\nEXECUTORS (").nth(1).expect("the executors table");
    let header = executors.lines().nth(1).expect("a header");
    assert!(header.contains("STATE") && header.contains("HEALTH"), "{header}");
    let row = |n: u32| {
        let id = format!("fw-1/main#{n}#1.{n}");
        executors
            .lines()
            .find(|l| l.starts_with(&id))
            .unwrap_or_else(|| panic!("{table}"))
            .to_owned()
    };
    assert!(row(0).contains("RUNNING  passing"), "{}", row(0));
    assert!(row(1).contains("RUNNING  failing (http: GET /health answered 500)"), "{}", row(1));
    assert!(row(2).contains("RUNNING  pending"), "{}", row(2));
    assert!(row(3).contains("RUNNING  -"), "{}", row(3));
    let frameworks = table.split("\nFRAMEWORKS (").nth(1).unwrap();
    assert!(frameworks.contains(", deployment 2 canary 0/3 healthy"), "{table}");

    let v = state_json(&s);
    assert_eq!(v["executors"][1]["health"]["status"], "failing");
    assert_eq!(v["executors"][1]["health"]["detail"], "http: GET /health answered 500");
    assert!(v["executors"][3]["health"].is_null());
    assert_eq!(v["frameworks"][0]["groups"][0]["deployment"]["state"], "canary");
}

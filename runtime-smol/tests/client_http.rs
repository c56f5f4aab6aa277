//! Operator commands (`regent_smol::client`) against fake masters on
//! loopback, and the HTTP pages (`regent_smol::http`): JSON shape, metrics,
//! HTML escaping, and the served routes.
//!
//! Every wait is bounded; everything listens on 127.0.0.1.

use regent_core::auth::Side;
use regent_core::protocol::{
    ClusterState, ExecutorState, ExecutorView, FrameworkView, GroupView, HelloReply, LeaderHint,
    Message, Role, WorkerView,
};
use regent_core::protocol::{FinishedFramework, FinishedSlot, FrameworkOutcome};
use regent_core::secret::Secret;
use regent_core::states::{FrameworkState, MasterStatus, WorkerState};
use regent_core::{Addr, ConnId, Epoch, ExecutorId, FrameworkId, MasterId, WorkerId};
use regent_smol::client::{
    fetch_state, kill_framework, remove_worker, render_table, ClientError, Tried,
};
use regent_smol::http::{self, metrics_text, state_json, HttpQuery, HttpSnapshot, MetricsSnapshot};
use regent_smol::net::{spawn_connection, NetConfig, NetEvent};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CLUSTER: &str = "test-cluster";

fn net() -> Arc<NetConfig> {
    Arc::new(NetConfig::new(CLUSTER, None))
}

// ---------------------------------------------------------------------------
// Hand-built states.

fn leader_hint(id: &str, addr: &str, epoch: u64) -> LeaderHint {
    LeaderHint { id: MasterId::new(id), addr: Addr::new(addr), epoch: Epoch(epoch) }
}

fn worker(id: &str, state: &str) -> WorkerView {
    WorkerView {
        users: Default::default(),
        resources: Default::default(),
        usage: None,
        host: Default::default(),
        ports: Default::default(),
        ports_used: Default::default(),
        id: WorkerId::new(id),
        state: WorkerState::from_name(state).expect("a worker state"),
        cores: 8,
        cores_used: 3,
        memory_mb: 4096,
        memory_used_mb: 1024,
        cordoned: false,
        drain: None,
        drain_deadline_ms: None,
        executors: 2,
        attributes: Vec::new(),
    }
}

fn executor(id: &str, worker: Option<&str>, state: ExecutorState) -> ExecutorView {
    ExecutorView {
        resources: Default::default(),
        usage: None,
        preempted_by: None,
        health: None,
        ports: Default::default(),
        id: ExecutorId::new(id),
        framework: FrameworkId::new("fw-1"),
        worker: worker.map(WorkerId::new),
        state,
    }
}

fn sample_state(master: &str, status: &str, epoch: u64) -> ClusterState {
    ClusterState {
        master: MasterId::new(master),
        status: MasterStatus::from_name(status).expect("a master status"),
        epoch: Epoch(epoch),
        leader: Some(leader_hint(master, "127.0.0.1:5050", epoch)),
        workers: vec![
            worker("w-alive", "ALIVE"),
            worker("w-dead", "DEAD"),
            worker("w-reg", "REGISTERING"),
            worker("w-unknown", "UNKNOWN"),
        ],
        frameworks: vec![
            FrameworkView {
                tenant: None,
                id: FrameworkId::new("fw-1"),
                name: "etl".into(),
                state: FrameworkState::Active,
                connected: true,
                groups: vec![GroupView {
                    name: "main".into(),
                    slots: 3,
                    declared: 2,
                    running: 3,
                    waiting: 0,
                    last_end: None,
                    unplaced: 0,
                    reasons: Vec::new(),
                    deployment: None,
                }],
            },
            FrameworkView {
                tenant: None,
                id: FrameworkId::new("fw-2"),
                name: "batch".into(),
                state: FrameworkState::Disconnected,
                connected: false,
                groups: Vec::new(),
            },
        ],
        executors: vec![
            executor("e1", Some("w-alive"), ExecutorState::Launching),
            executor("e2", Some("w-alive"), ExecutorState::Running),
            executor("e3", Some("w-alive"), ExecutorState::Exited { code: 3 }),
            executor("e4", Some("w-dead"), ExecutorState::Failed { reason: "no such file".into() }),
            executor("e5", Some("w-alive"), ExecutorState::Killed),
            executor("e6", None, ExecutorState::Lost),
        ],
        messages: 42,
        rejected: 2,
        history: vec![FinishedFramework {
            id: FrameworkId::new("fw-0"),
            name: "nightly".into(),
            outcome: FrameworkOutcome::Killed,
            finished_at_ms: 1_764_603_000_000,
            registered_at_ms: Some(1_764_602_000_000),
            slots: vec![
                FinishedSlot {
                    group: "g".into(),
                    slot: 0,
                    executor: Some(ExecutorId::new("fw-0/g#0#1.1")),
                    state: Some(ExecutorState::Exited { code: 0 }),
                    attempts: 1,
                    preempted_by: None,
                },
                FinishedSlot {
                    group: "g".into(),
                    slot: 1,
                    executor: Some(ExecutorId::new("fw-0/g#1#1.3")),
                    state: Some(ExecutorState::Killed),
                    attempts: 2,
                    preempted_by: Some("batch/urgent".into()),
                },
                FinishedSlot {
                    group: "g".into(),
                    slot: 2,
                    executor: None,
                    state: None,
                    attempts: 0,
                    preempted_by: None,
                },
            ],
            slots_omitted: 0,
        }],
        history_omitted: 3,
    }
}

#[test]
fn state_json_shows_finished_frameworks_with_every_slot() {
    let v = state_json(&sample_state("m1", "ALIVE", 7));
    let history = v["history"].as_array().expect("history array");
    assert_eq!(history.len(), 1);
    let f = &history[0];
    assert_eq!(f["id"], "fw-0");
    assert_eq!(f["name"], "nightly");
    assert_eq!(f["outcome"], "KILLED");
    assert_eq!(f["finished_at_ms"], 1_764_603_000_000u64);
    assert_eq!(f["registered_at_ms"], 1_764_602_000_000u64);
    let slots = f["slots"].as_array().expect("slots array");
    assert_eq!(slots.len(), 3);
    for s in slots {
        for key in ["group", "slot", "executor", "state", "exit_code", "attempts"] {
            assert!(s.get(key).is_some(), "slot lacks {key}: {s}");
        }
    }
    assert_eq!(slots[0]["state"], "EXITED");
    assert_eq!(slots[0]["exit_code"], 0);
    assert_eq!(slots[1]["state"], "KILLED");
    assert!(slots[1]["exit_code"].is_null());
    assert_eq!(slots[1]["attempts"], 2);
    assert_eq!(slots[1]["executor"], "fw-0/g#1#1.3");
    // Its last end was a preemption (docs/design.md#issue-44).
    assert_eq!(slots[1]["preempted_by"], "batch/urgent");
    assert!(slots[0].get("preempted_by").is_none());
    assert_eq!(slots[2]["state"], "NONE");
    assert!(slots[2]["executor"].is_null());
    assert_eq!(v["history_omitted"], 3);

    let table = render_table(&sample_state("m1", "ALIVE", 7));
    for needle in [
        "FINISHED FRAMEWORKS (1)",
        "nightly",
        "KILLED",
        "2025-12-01 15:30:00",
        "1 EXITED 0, 1 KILLED (preempted by batch/urgent), 1 NONE",
        "3 older finished frameworks",
    ] {
        assert!(table.contains(needle), "{needle:?} missing from\n{table}");
    }
}

// ---------------------------------------------------------------------------
// JSON, metrics, HTML, table.

#[test]
fn state_json_has_the_documented_shape_and_state_names() {
    let v = state_json(&sample_state("m1", "ALIVE", 7));
    assert_eq!(v["status"], "ALIVE");
    assert_eq!(v["epoch"], 7);
    assert_eq!(v["id"], "m1");
    assert_eq!(v["leader"], "127.0.0.1:5050", "leader is the leader's address");
    assert_eq!(v["leader_id"], "m1");

    let workers = v["workers"].as_array().expect("workers array");
    assert_eq!(workers.len(), 4);
    for w in workers {
        for key in ["id", "state", "cores", "cores_used", "memory_mb", "memory_used_mb"] {
            assert!(w.get(key).is_some(), "worker lacks {key}: {w}");
        }
    }
    let states: Vec<&str> = workers.iter().map(|w| w["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["ALIVE", "DEAD", "REGISTERING", "UNKNOWN"]);
    assert_eq!(workers[0]["cores"], 8);
    assert_eq!(workers[0]["cores_used"], 3);
    assert_eq!(workers[0]["memory_mb"], 4096);
    assert_eq!(workers[0]["memory_used_mb"], 1024);

    let frameworks = v["frameworks"].as_array().expect("frameworks array");
    assert_eq!(frameworks[0]["id"], "fw-1");
    assert_eq!(frameworks[0]["name"], "etl");
    assert_eq!(frameworks[0]["state"], "ACTIVE");
    assert_eq!(frameworks[0]["connected"], true);
    assert_eq!(frameworks[1]["connected"], false);

    let executors = v["executors"].as_array().expect("executors array");
    let states: Vec<&str> = executors.iter().map(|e| e["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["LAUNCHING", "RUNNING", "EXITED", "FAILED", "KILLED", "LOST"]);
    for e in executors {
        for key in ["id", "framework_id", "worker_id", "state"] {
            assert!(e.get(key).is_some(), "executor lacks {key}: {e}");
        }
        assert_eq!(e["framework_id"], "fw-1");
    }
    assert_eq!(executors[0]["worker_id"], "w-alive");
    assert_eq!(executors[2]["exit_code"], 3);
    assert!(executors[2].get("reason").is_none());
    assert_eq!(executors[3]["reason"], "no such file");
    assert!(executors[3].get("exit_code").is_none());
    assert!(executors[5]["worker_id"].is_null());
}

#[test]
fn state_json_of_a_standby_without_leader_has_null_leader() {
    let mut s = sample_state("m2", "STANDBY", 3);
    s.leader = None;
    s.workers.clear();
    s.frameworks.clear();
    s.executors.clear();
    let v = state_json(&s);
    assert_eq!(v["status"], "STANDBY");
    assert!(v["leader"].is_null());
    assert_eq!(v["workers"].as_array().map(Vec::len), Some(0));
    assert_eq!(v["frameworks"].as_array().map(Vec::len), Some(0));
    assert_eq!(v["executors"].as_array().map(Vec::len), Some(0));
}

#[test]
fn metrics_text_has_help_type_and_every_family() {
    let master = regent_core::master::Metrics {
        state_snapshots_built: 11,
        state_replies_cached: 12,
        log_relays: 13,
        log_requests_refused: 14,
        log_relays_timed_out: 15,
        log_answers_refused: 16,
        ..Default::default()
    };
    let snap = HttpSnapshot {
        state: sample_state("m1", "ALIVE", 7).into(),
        rejected_connections: 5,
        node: Default::default(),
        master,
    };
    let text = metrics_text(&MetricsSnapshot::from(&snap));
    let lines: Vec<&str> = text.lines().collect();
    for expected in [
        "regent_state_snapshots_built_total 11",
        "regent_state_snapshots_cached_total 12",
        "regent_log_relays_total 13",
        "regent_log_requests_refused_total 14",
        "regent_log_relays_timed_out_total 15",
        "regent_log_answers_refused_total 16",
        "regent_master_status{status=\"ALIVE\"} 1",
        "regent_master_status{status=\"STANDBY\"} 0",
        "regent_master_status{status=\"RECOVERING\"} 0",
        "regent_master_status{status=\"SUSPENDED\"} 0",
        "regent_epoch 7",
        "regent_workers{state=\"ALIVE\"} 1",
        "regent_workers{state=\"UNKNOWN\"} 1",
        "regent_workers{state=\"DEAD\"} 1",
        "regent_workers{state=\"REGISTERING\"} 1",
        "regent_frameworks 2",
        "regent_executors{state=\"LAUNCHING\"} 1",
        "regent_executors{state=\"RUNNING\"} 1",
        "regent_executors{state=\"EXITED\"} 1",
        "regent_executors{state=\"FAILED\"} 1",
        "regent_executors{state=\"KILLED\"} 1",
        "regent_executors{state=\"LOST\"} 1",
        "regent_messages_total 42",
        "regent_rejected_messages_total 2",
        "regent_rejected_connections_total 5",
        "# TYPE regent_messages_total counter",
        "# TYPE regent_epoch gauge",
    ] {
        assert!(lines.contains(&expected), "missing line {expected:?} in\n{text}");
    }
    // Every sample's family has HELP and TYPE.
    for line in &lines {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let name = line.split(['{', ' ']).next().unwrap();
        assert!(text.contains(&format!("# HELP {name} ")), "no HELP for {name}");
        assert!(text.contains(&format!("# TYPE {name} ")), "no TYPE for {name}");
    }

    // An empty standby still lists every state, at zero.
    let mut s = sample_state("m2", "STANDBY", 3);
    s.workers.clear();
    s.executors.clear();
    let text = metrics_text(&MetricsSnapshot::from(&HttpSnapshot {
        state: s.into(),
        rejected_connections: 0,
        node: Default::default(),
        master: Default::default(),
    }));
    assert!(text.lines().any(|l| l == "regent_master_status{status=\"STANDBY\"} 1"));
    assert!(text.lines().any(|l| l == "regent_master_status{status=\"ALIVE\"} 0"));
    assert!(text.lines().any(|l| l == "regent_executors{state=\"RUNNING\"} 0"));
    assert!(text.lines().any(|l| l == "regent_workers{state=\"ALIVE\"} 0"));
}

#[test]
fn the_page_is_self_contained_and_inserts_state_as_text_only() {
    let page = http::page::PAGE;
    // Nothing from elsewhere (the machines running it may have no network).
    for needle in ["http://", "https://", "src=\"//", "href=\"//", "@import"] {
        assert!(!page.contains(needle), "the page loads {needle}");
    }
    // State strings go in as text nodes: the only markup written is the
    // empty string that clears the view.
    for (i, _) in page.match_indices("innerHTML") {
        assert!(page[i..].starts_with("innerHTML = \"\""), "innerHTML used at {i}");
    }
    assert!(!page.contains("insertAdjacentHTML") && !page.contains("document.write"));
    // It follows the event stream and reads the state.
    assert!(page.contains("new EventSource(\"/api/events\")"));
    assert!(page.contains("fetch(\"/api/state\""));
}

#[test]
fn render_table_lists_master_workers_frameworks_and_executors() {
    let table = render_table(&sample_state("m1", "ALIVE", 7));
    for needle in [
        "MASTER",
        "m1",
        "ALIVE",
        "127.0.0.1:5050",
        "WORKERS (4)",
        "w-unknown",
        "UNKNOWN",
        "3/8",
        "1024/4096",
        "FRAMEWORKS (2)",
        "etl",
        "DISCONNECTED",
        "EXECUTORS (6)",
        "EXITED (code 3)",
        "FAILED (no such file)",
        "LOST",
    ] {
        assert!(table.contains(needle), "{needle:?} missing from\n{table}");
    }
    // An executor's named ports are listed with it.
    let mut served = sample_state("m1", "ALIVE", 7);
    served.executors[0].ports = vec![("http".into(), 20000), ("admin".into(), 20001)];
    let table = render_table(&served);
    assert!(table.contains("PORTS"), "{table}");
    assert!(table.contains("http=20000 admin=20001"), "{table}");
    let mut empty = sample_state("m2", "STANDBY", 1);
    empty.leader = None;
    empty.workers.clear();
    let table = render_table(&empty);
    assert!(table.contains("unknown"), "{table}");
    assert!(table.contains("WORKERS (0)\n  (none)"), "{table}");
}

// ---------------------------------------------------------------------------
// The HTTP server.

/// A plain HTTP/1.0 request; returns (status, head, body).
fn http_request(addr: std::net::SocketAddr, method: &str, path: &str) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "{method} {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// Serves on a free loopback port; a thread answers queries with `snap`.
fn serve_with_daemon(
    snap: HttpSnapshot,
) -> (std::net::SocketAddr, async_channel::Sender<()>, std::thread::JoinHandle<()>) {
    let server = http::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.server_addr().to_ip().expect("an IP listener");
    let (qtx, qrx) = async_channel::unbounded::<HttpQuery>();
    let handle = http::serve_on(server, qtx);
    let (stop_tx, stop_rx) = async_channel::bounded::<()>(1);
    std::thread::spawn(move || {
        // The daemon loop: answer until told to stop, then drop `qrx`.
        while stop_rx.try_recv().is_err() {
            let q = smol::block_on(smol::future::or(async { qrx.recv().await.ok() }, async {
                async_io::Timer::after(Duration::from_millis(100)).await;
                None
            }));
            if let Some(q) = q {
                answer(q, &snap);
            }
        }
    });
    (addr, stop_tx, handle)
}

/// Answers `q` as a daemon whose state is `snap` would.
fn answer(q: HttpQuery, snap: &HttpSnapshot) {
    match q {
        HttpQuery::State { reply, .. } => {
            let _ = reply.send(snap.clone());
        }
        HttpQuery::Metrics { reply } => {
            let _ = reply.send(MetricsSnapshot::from(snap));
        }
        HttpQuery::Log(_) | HttpQuery::Command { .. } => {}
        HttpQuery::Revocations { reply } => {
            let _ = reply.send(Default::default());
        }
    }
}

fn wait_finished(handle: &std::thread::JoinHandle<()>, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if handle.is_finished() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn serve_answers_state_metrics_and_html_404_and_405() {
    let snap = HttpSnapshot {
        state: sample_state("m1", "ALIVE", 7).into(),
        rejected_connections: 5,
        node: Default::default(),
        master: Default::default(),
    };
    let (addr, stop, handle) = serve_with_daemon(snap);

    let (status, head, body) = http_request(addr, "GET", "/api/state");
    assert_eq!(status, 200, "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: application/json"), "{head}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
    assert_eq!(v["status"], "ALIVE");
    assert_eq!(v["epoch"], 7);
    assert_eq!(v["rejected_connections"], 5);
    assert_eq!(v["workers"].as_array().map(Vec::len), Some(4));

    let (status, _, body) = http_request(addr, "GET", "/api/state?pretty=1");
    assert_eq!(status, 200);
    assert!(body.contains("\"executors\""));

    // Paged: two workers at a time, then the rest; a bad limit is a 400.
    let (status, _, body) = http_request(addr, "GET", "/api/state?limit=2");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
    assert_eq!(v["workers"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(v["page"]["workers_total"], 4);
    let after = v["page"]["next_after"].as_str().expect("a next page").to_owned();
    let (status, _, body) = http_request(addr, "GET", &format!("/api/state?limit=2&after={after}"));
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
    assert_eq!(v["workers"].as_array().map(Vec::len), Some(2), "{v}");
    assert!(v["page"]["next_after"].is_null(), "the last page: {v}");
    let (status, _, body) = http_request(addr, "GET", "/api/state?limit=0");
    assert_eq!(status, 400);
    assert!(body.contains("limit=0: write a number of workers from 1 to 10000"), "{body}");

    let (status, head, body) = http_request(addr, "GET", "/metrics");
    assert_eq!(status, 200, "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/plain"), "{head}");
    assert!(body.lines().any(|l| l == "regent_master_status{status=\"ALIVE\"} 1"), "{body}");
    assert!(body.lines().any(|l| l == "regent_rejected_connections_total 5"), "{body}");

    let (status, head, body) = http_request(addr, "GET", "/");
    assert_eq!(status, 200, "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/html"), "{head}");
    assert!(body.contains("<title>regent</title>") && body.contains("/api/events"), "{body}");

    let (status, _, body) = http_request(addr, "HEAD", "/api/state");
    assert_eq!(status, 200);
    assert!(body.is_empty(), "HEAD has no body: {body:?}");

    let (status, _, _) = http_request(addr, "GET", "/nope");
    assert_eq!(status, 404);
    let (status, head, _) = http_request(addr, "POST", "/api/state");
    assert_eq!(status, 405, "{head}");
    assert!(head.to_ascii_lowercase().contains("allow: get, head"), "{head}");
    let (status, _, _) = http_request(addr, "DELETE", "/");
    assert_eq!(status, 405);

    // The thread ends once the daemon is gone.
    stop.send_blocking(()).unwrap();
    assert!(wait_finished(&handle, Duration::from_secs(10)), "HTTP thread still running");
}

#[test]
fn serve_answers_503_when_the_daemon_does_not_answer() {
    let server = http::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.server_addr().to_ip().unwrap();
    let (qtx, qrx) = async_channel::unbounded::<HttpQuery>();
    let handle = http::serve_on(server, qtx);
    let start = Instant::now();
    let (status, _, body) = http_request(addr, "GET", "/api/state");
    assert_eq!(status, 503, "{body}");
    assert!(start.elapsed() < Duration::from_secs(10));
    // Drain the query left over from the first request.
    while qrx.try_recv().is_ok() {}
    // A daemon that drops the reply sender is a 503 too, at once.
    let answerer = std::thread::spawn({
        let qrx = qrx.clone();
        move || {
            // Dropped unanswered.
            let _q = qrx.recv_blocking().unwrap();
        }
    });
    let (status, _, _) = http_request(addr, "GET", "/metrics");
    assert_eq!(status, 503);
    answerer.join().unwrap();
    drop(qrx);
    assert!(wait_finished(&handle, Duration::from_secs(10)), "HTTP thread still running");
}

/// Reads server-sent events from `reader` into `(id, event, data)`
/// triples, until the connection ends.
fn sse_events(
    reader: impl std::io::BufRead + Send + 'static,
) -> std::sync::mpsc::Receiver<(u64, String, serde_json::Value)> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut id, mut event, mut data) = (0, String::new(), String::new());
        for line in reader.lines() {
            let Ok(line) = line else { return };
            if line.is_empty() {
                if !data.is_empty() {
                    let v = serde_json::from_str(&data).expect("JSON data");
                    if tx.send((id, std::mem::take(&mut event), v)).is_err() {
                        return;
                    }
                }
                data.clear();
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = v.parse().expect("a numeric id");
            } else if let Some(v) = line.strip_prefix("event: ") {
                event = v.to_owned();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            }
        }
    });
    rx
}

#[test]
fn an_event_stream_that_falls_behind_the_backlog_gets_a_fresh_snapshot() {
    let server = http::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.server_addr().to_ip().unwrap();
    let (qtx, qrx) = async_channel::unbounded::<HttpQuery>();
    let handle = http::serve_on(server, qtx);
    let mut empty = sample_state("m1", "ALIVE", 7);
    empty.workers.clear();
    empty.executors.clear();
    empty.frameworks.clear();
    let current = Arc::new(Mutex::new(empty.clone()));
    let closer = qrx.clone();
    let daemon = {
        let current = current.clone();
        std::thread::spawn(move || {
            while let Ok(q) = qrx.recv_blocking() {
                let state = current.lock().unwrap().clone();
                let snap = HttpSnapshot {
                    state: state.into(),
                    rejected_connections: 0,
                    node: Default::default(),
                    master: Default::default(),
                };
                answer(q, &snap);
            }
        })
    };
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(s, "GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let events = sse_events(std::io::BufReader::new(s.try_clone().unwrap()));
    let next = || events.recv_timeout(Duration::from_secs(60)).expect("an event");
    let (id0, kind, data) = next();
    assert_eq!(kind, "snapshot");
    assert_eq!(data["workers"].as_array().map(Vec::len), Some(0));
    // More changes at once than the backlog keeps: a fresh snapshot.
    let many = http::events::BACKLOG + 100;
    current.lock().unwrap().workers =
        (0..many).map(|i| worker(&format!("w{i:05}"), "ALIVE")).collect();
    let (id1, kind, data) = next();
    assert_eq!(kind, "snapshot", "resynchronised by a snapshot");
    assert_eq!(data["workers"].as_array().map(Vec::len), Some(many));
    assert_eq!(id1, id0 + many as u64, "the snapshot's id counts every event it includes");
    // Then events again, with the next ids.
    current.lock().unwrap().workers[0].state = WorkerState::Dead;
    let (id2, kind, data) = next();
    assert_eq!((id2, kind.as_str()), (id1 + 1, "worker"));
    assert_eq!(data["worker"], "w00000");
    assert_eq!(data["change"], "state");
    assert_eq!(data["previous"], "ALIVE");
    assert_eq!(data["state"], "DEAD");
    // The daemon goes away: the server stops (the stream's thread with it).
    closer.close();
    daemon.join().unwrap();
    assert!(wait_finished(&handle, Duration::from_secs(10)), "HTTP thread still running");
}

#[test]
fn serve_on_a_taken_address_names_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let (qtx, _qrx) = async_channel::unbounded::<HttpQuery>();
    let err = http::serve(addr, qtx).expect_err("the address is taken").to_string();
    assert!(err.contains(&addr.to_string()), "{err}");
}

// ---------------------------------------------------------------------------
// Fake masters.

/// What a fake master answers to one message.
type Behaviour = Arc<dyn Fn(&Message) -> Vec<Message> + Send + Sync>;

/// A fake master on loopback: each connection gets `behaviour`'s answers;
/// every message received is recorded.
struct FakeMaster {
    addr: Addr,
    seen: Arc<Mutex<Vec<Message>>>,
}

impl FakeMaster {
    fn start(cfg: Arc<NetConfig>, behaviour: Behaviour) -> FakeMaster {
        static CONN: AtomicU64 = AtomicU64::new(1000);
        let listener =
            smol::block_on(smol::net::TcpListener::bind("127.0.0.1:0")).expect("bind loopback");
        let addr = Addr::new(listener.local_addr().unwrap().to_string());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        smol::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (tx, rx) = async_channel::unbounded();
                let conn = ConnId(CONN.fetch_add(1, Ordering::Relaxed));
                let handle = spawn_connection(stream, Side::Server, conn, cfg.clone(), tx);
                let (behaviour, seen) = (behaviour.clone(), seen2.clone());
                smol::spawn(async move {
                    while let Ok(NetEvent::Message { msg, .. }) = rx.recv().await {
                        for reply in behaviour(&msg) {
                            handle.send(reply);
                        }
                        seen.lock().unwrap().push(msg);
                    }
                })
                .detach();
            }
        })
        .detach();
        FakeMaster { addr, seen }
    }

    fn seen(&self) -> Vec<Message> {
        self.seen.lock().unwrap().clone()
    }
}

fn hello_reply(id: &str, leading: bool, epoch: u64, leader: Option<LeaderHint>) -> Message {
    Message::HelloReply(HelloReply {
        role: Role::Master,
        master: MasterId::new(id),
        leading,
        epoch: Epoch(epoch),
        leader,
        masters: Vec::new(),
    })
}

/// A leader: answers Hello, StateRequest, and operator requests with `verdict`
/// (`None` accepts, `Some(reason)` refuses).
fn leader(cfg: Arc<NetConfig>, id: &'static str, verdict: Option<&'static str>) -> FakeMaster {
    FakeMaster::start(
        cfg,
        Arc::new(move |msg| match msg {
            Message::Hello(h) => {
                assert_eq!(h.role, Role::Client);
                assert_eq!(h.cluster, CLUSTER);
                vec![hello_reply(id, true, 9, None)]
            }
            Message::StateRequest => {
                vec![Message::StateReply(Box::new(sample_state(id, "ALIVE", 9)))]
            }
            Message::KillFramework { request, .. } | Message::RemoveWorker { request, .. } => {
                vec![match verdict {
                    None => Message::RequestAccepted { epoch: Epoch(9), request: *request },
                    Some(reason) => Message::RequestRefused {
                        epoch: Epoch(9),
                        request: *request,
                        reason: reason.into(),
                    },
                }]
            }
            _ => vec![],
        }),
    )
}

/// A standby: its HelloReply says it does not lead and carries `hint`; it
/// answers StateRequest with its own (empty) view and any operator request
/// with NotLeader.
fn standby(cfg: Arc<NetConfig>, id: &'static str, hint: Option<LeaderHint>) -> FakeMaster {
    FakeMaster::start(
        cfg,
        Arc::new(move |msg| match msg {
            Message::Hello(_) => vec![hello_reply(id, false, 9, hint.clone())],
            Message::StateRequest => {
                let mut s = sample_state(id, "STANDBY", 9);
                s.leader = hint.clone();
                s.workers.clear();
                s.frameworks.clear();
                s.executors.clear();
                vec![Message::StateReply(Box::new(s))]
            }
            Message::KillFramework { .. } | Message::RemoveWorker { .. } => {
                vec![Message::NotLeader { epoch: Epoch(9), leader: hint.clone() }]
            }
            _ => vec![],
        }),
    )
}

/// A master that said it leads in its HelloReply but lost leadership before
/// the request: answers requests with NotLeader and a hint.
fn deposed(cfg: Arc<NetConfig>, id: &'static str, hint: LeaderHint) -> FakeMaster {
    FakeMaster::start(
        cfg,
        Arc::new(move |msg| match msg {
            Message::Hello(_) => vec![hello_reply(id, true, 8, None)],
            Message::StateRequest
            | Message::KillFramework { .. }
            | Message::RemoveWorker { .. } => {
                vec![Message::NotLeader { epoch: Epoch(9), leader: Some(hint.clone()) }]
            }
            _ => vec![],
        }),
    )
}

/// A loopback address nothing listens on.
fn closed_addr() -> Addr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    Addr::new(a.to_string())
}

fn hint_to(m: &FakeMaster, id: &str) -> LeaderHint {
    leader_hint(id, m.addr.as_str(), 9)
}

/// Runs `f` with a generous bound (never a timing assertion).
fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    smol::block_on(smol::future::or(f, async {
        async_io::Timer::after(Duration::from_secs(40)).await;
        panic!("operation did not finish within 40 s")
    }))
}

#[test]
fn fetch_state_asks_the_first_master_that_answers() {
    let cfg = net();
    let l = leader(cfg.clone(), "m1", None);
    let dead = closed_addr();
    let state = bounded(fetch_state(&[dead, l.addr.clone()], cfg.clone(), false)).unwrap();
    assert_eq!(state.master, MasterId::new("m1"));
    assert_eq!(state.status, MasterStatus::Alive);
    assert_eq!(state.workers.len(), 4);
    assert!(l.seen().contains(&Message::StateRequest));

    // Without leader_only a standby's own view is an answer.
    let s = standby(cfg.clone(), "m2", Some(hint_to(&l, "m1")));
    let state = bounded(fetch_state(std::slice::from_ref(&s.addr), cfg, false)).unwrap();
    assert_eq!(state.status, MasterStatus::Standby);
    assert_eq!(state.leader.map(|h| h.addr), Some(l.addr.clone()));
}

#[test]
fn fetch_state_leader_only_follows_the_standby_hint() {
    let cfg = net();
    let l = leader(cfg.clone(), "m1", None);
    let s = standby(cfg.clone(), "m2", Some(hint_to(&l, "m1")));
    // Only the standby is given: the hint leads to the leader.
    let state = bounded(fetch_state(std::slice::from_ref(&s.addr), cfg.clone(), true)).unwrap();
    assert_eq!(state.master, MasterId::new("m1"));
    assert_eq!(state.status, MasterStatus::Alive);
    assert!(!s.seen().contains(&Message::StateRequest), "the standby was not asked");

    // A master deposed between HelloReply and the request answers NotLeader;
    // its hint is followed too.
    let d = deposed(cfg.clone(), "m3", hint_to(&l, "m1"));
    let state = bounded(fetch_state(std::slice::from_ref(&d.addr), cfg, true)).unwrap();
    assert_eq!(state.master, MasterId::new("m1"));
    assert!(d.seen().contains(&Message::StateRequest));
}

#[test]
fn fetch_state_error_names_every_master_tried_and_why() {
    let cfg = net();
    let dead = closed_addr();
    let s = standby(cfg.clone(), "m2", None);
    let err = bounded(fetch_state(&[dead.clone(), s.addr.clone()], cfg.clone(), true)).unwrap_err();
    // The variant a caller matches on lists each master tried, in order.
    match &err {
        ClientError::NoAnswer { leader_only: true, tried, gave_up: None } => {
            let addrs: Vec<&Addr> = tried.iter().map(|t: &Tried| &t.addr).collect();
            assert_eq!(addrs, [&dead, &s.addr], "{err}");
            assert!(tried[0].why.starts_with("connect failed"), "{err}");
        }
        other => panic!("expected NoAnswer, got {other:?}"),
    }
    let err = err.to_string();
    assert!(err.starts_with("no leading master answered (tried 2): "), "{err}");
    assert!(err.contains(dead.as_str()), "{err}");
    assert!(err.contains("connect failed"), "{err}");
    assert!(err.contains(s.addr.as_str()), "{err}");
    assert!(err.contains("leader unknown"), "{err}");

    // A hint to a dead leader: the hinted address is tried and named too.
    let dead_leader = closed_addr();
    let s2 = standby(cfg.clone(), "m4", Some(leader_hint("m9", dead_leader.as_str(), 9)));
    let err = bounded(fetch_state(std::slice::from_ref(&s2.addr), cfg.clone(), true))
        .unwrap_err()
        .to_string();
    assert!(err.contains(s2.addr.as_str()) && err.contains(dead_leader.as_str()), "{err}");

    let err = bounded(fetch_state(&[], cfg, false)).unwrap_err();
    assert!(matches!(err, ClientError::NoMasterGiven), "{err}");
    assert!(err.to_string().contains("no master"), "{err}");
}

#[test]
fn fetch_state_gives_up_on_a_silent_master() {
    // Accepts the connection and never says a word.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = Addr::new(listener.local_addr().unwrap().to_string());
    let keep = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_secs(8));
        drop(s);
    });
    let start = Instant::now();
    let err =
        bounded(fetch_state(std::slice::from_ref(&addr), net(), false)).unwrap_err().to_string();
    assert!(err.contains(addr.as_str()) && err.contains("no answer within"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(30));
    keep.join().unwrap();
}

#[test]
fn fetch_state_over_an_authenticated_connection() {
    let secret = Secret::new(vec![7u8; 32]).unwrap();
    let cfg = Arc::new(NetConfig::new(CLUSTER, Some(secret)));
    let l = leader(cfg.clone(), "m1", None);
    let state = bounded(fetch_state(std::slice::from_ref(&l.addr), cfg, true)).unwrap();
    assert_eq!(state.master, MasterId::new("m1"));
    // Without the secret the master is unreachable, and the error says so.
    let err =
        bounded(fetch_state(std::slice::from_ref(&l.addr), net(), false)).unwrap_err().to_string();
    assert!(err.contains(l.addr.as_str()), "{err}");
}

#[test]
fn kill_framework_refused_is_an_error_with_the_reason() {
    let cfg = net();
    let l = leader(cfg.clone(), "m1", Some("no framework fw-9"));
    let err = bounded(kill_framework(std::slice::from_ref(&l.addr), cfg, "fw-9")).unwrap_err();
    assert!(
        matches!(&err, ClientError::Refused { reason } if reason == "no framework fw-9"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "no framework fw-9");
    assert!(l.seen().iter().any(|m| matches!(
        m,
        Message::KillFramework { framework, .. } if framework.as_str() == "fw-9"
    )));
}

#[test]
fn kill_framework_goes_to_the_leader() {
    let cfg = net();
    let l = leader(cfg.clone(), "m1", None);
    let s = standby(cfg.clone(), "m2", Some(hint_to(&l, "m1")));
    bounded(kill_framework(std::slice::from_ref(&s.addr), cfg, "fw-1")).unwrap();
    assert!(!s.seen().iter().any(|m| matches!(m, Message::KillFramework { .. })));
    assert!(l.seen().iter().any(|m| matches!(m, Message::KillFramework { .. })));
}

#[test]
fn remove_worker_follows_not_leader_and_reports_refusals() {
    let cfg = net();
    let l = leader(cfg.clone(), "m1", None);
    let d = deposed(cfg.clone(), "m3", hint_to(&l, "m1"));
    bounded(remove_worker(std::slice::from_ref(&d.addr), cfg.clone(), "w-unknown")).unwrap();
    assert!(d.seen().iter().any(|m| matches!(m, Message::RemoveWorker { .. })));
    assert!(l.seen().iter().any(|m| matches!(
        m,
        Message::RemoveWorker { worker, .. } if worker.as_str() == "w-unknown"
    )));

    let refusing = leader(cfg.clone(), "m5", Some("worker w-alive is Alive"));
    let err =
        bounded(remove_worker(std::slice::from_ref(&refusing.addr), cfg, "w-alive")).unwrap_err();
    assert_eq!(err.to_string(), "worker w-alive is Alive");
}

#[test]
fn operator_tools_refuse_a_non_loopback_master_without_a_secret() {
    // 192.0.2.1 is TEST-NET-1: the refusal happens before any connection.
    let err = smol::block_on(fetch_state(&[Addr::new("192.0.2.1:7077")], net(), false))
        .expect_err("refused")
        .to_string();
    assert!(err.contains("192.0.2.1:7077") && err.contains("not a loopback"), "{err}");
    assert!(err.contains("--insecure") && err.contains("--secret-file"), "{err}");
}

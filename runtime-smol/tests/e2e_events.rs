//! End-to-end: the event stream. `GET /api/events` (server-sent events) of
//! a smol master and of a std master: a snapshot first, then a worker
//! joining and dying; the std master's other endpoints; the stream limit;
//! and `regent events` following the leader across a ZooKeeper failover.
//! Real processes on loopback, bounded waits. The ZooKeeper test needs
//! `--test-threads=1` with the other ZooKeeper suites.

mod support;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::cluster::{api_state, http_get, wait_for, Cluster, Kind, MasterSpec};
use support::zk_server::ZkServer;

const BOUND: Duration = Duration::from_secs(60);

/// One server-sent event.
#[derive(Debug, Clone)]
struct Sse {
    id: Option<u64>,
    event: String,
    data: Value,
}

/// Opens `GET /api/events` and hands every event to the returned channel
/// (from a reader thread that ends with the connection). Returns the status
/// line and headers too.
fn open_stream(addr: &str) -> (String, mpsc::Receiver<Sse>, TcpStream) {
    let mut s = TcpStream::connect(addr).expect("connect to the HTTP server");
    s.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
    write!(s, "GET /api/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n")
        .unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut id, mut event, mut data) = (None, String::new(), String::new());
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if !data.is_empty() {
                    let v = serde_json::from_str(&data).expect("event data is JSON");
                    if tx.send(Sse { id, event: std::mem::take(&mut event), data: v }).is_err() {
                        return;
                    }
                }
                data.clear();
                id = None;
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = v.parse().ok();
            } else if let Some(v) = line.strip_prefix("event: ") {
                event = v.to_owned();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            }
        }
    });
    (head, rx, s)
}

/// The next event that `pred` accepts, within `bound` (panics otherwise,
/// listing what came).
fn next_matching(rx: &mpsc::Receiver<Sse>, what: &str, pred: impl Fn(&Sse) -> bool) -> Sse {
    let deadline = Instant::now() + BOUND;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(e) if pred(&e) => return e,
            Ok(e) => seen.push(format!("{} {}", e.event, e.data)),
            Err(_) => panic!("no {what} within {BOUND:?}; got: {seen:#?}"),
        }
    }
}

/// Snapshot first, then a worker joining and dying, against the master at
/// `spec` (already started).
fn snapshot_then_worker_join_and_death(c: &Cluster, spec: &MasterSpec, worker_args: &[&str]) {
    let http = spec.http_addr();
    wait_for(BOUND, "the master ALIVE", || match api_state(&http) {
        Some(v) if v["status"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let (head, rx, _conn) = open_stream(&http);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/event-stream"), "{head}");
    let first = rx.recv_timeout(BOUND).expect("a first event");
    assert_eq!(first.event, "snapshot", "the snapshot comes first: {first:?}");
    assert_eq!(first.data["status"], "ALIVE");
    assert_eq!(first.data["workers"], Value::Array(vec![]), "{first:?}");
    let mut w = c.worker("w1", &[spec.addr()], 2, 512, worker_args);
    let added = next_matching(&rx, "worker w1 added", |e| {
        e.event == "worker" && e.data["worker"] == "w1" && e.data["change"] == "added"
    });
    assert_eq!(added.data["kind"], "worker");
    assert_eq!(added.data["cores"], 2);
    assert!(added.id > first.id, "ids grow: {first:?} then {added:?}");
    assert_eq!(added.data["id"].as_u64(), added.id);
    w.kill9();
    let dead = next_matching(&rx, "worker w1 DEAD", |e| {
        e.event == "worker" && e.data["worker"] == "w1" && e.data["state"] == "DEAD"
    });
    assert_eq!(dead.data["change"], "state");
    assert!(dead.id > added.id, "ids grow: {added:?} then {dead:?}");
}

#[test]
fn the_event_stream_starts_with_a_snapshot_then_reports_a_worker_joining_and_dying() {
    let c = Cluster::new("events-smol");
    let spec = MasterSpec::new("m1", &["--worker-timeout", "2000", "--heartbeat-interval", "500"]);
    let _m = c.master(&spec);
    snapshot_then_worker_join_and_death(&c, &spec, &[]);
}

/// The value of the one sample `name` (with its labels) in `metrics`.
fn sample(metrics: &str, name: &str) -> Option<u64> {
    metrics.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Issue 24 (docs/design.md#issue-24) item 3: `/metrics` reads the master's counters. Scraping it
/// builds no snapshot of the cluster (the counter of snapshots built
/// stands still across scrapes), and its gauges still follow the cluster:
/// a worker joining shows in the counts and the cores offered.
#[test]
fn metrics_scrapes_build_no_snapshot_and_follow_the_cluster() {
    let c = Cluster::new("metrics-counters");
    let spec = MasterSpec::new("m1", &["--worker-timeout", "2000", "--heartbeat-interval", "200"]);
    let _m = c.master(&spec);
    let http = spec.http_addr();
    let scrape = || http_get(&http, "/metrics").filter(|(code, _)| *code == 200).map(|(_, m)| m);
    wait_for(BOUND, "the master ALIVE in /metrics", || match scrape() {
        Some(m) if sample(&m, "regent_master_status{status=\"ALIVE\"}") == Some(1) => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let _w = c.worker("w1", &[spec.addr()], 3, 512, &[]);
    let joined = wait_for(BOUND, "w1 ALIVE in /metrics", || match scrape() {
        Some(m) if sample(&m, "regent_workers{state=\"ALIVE\"}") == Some(1) => Ok(m),
        other => Err(format!("{other:?}")),
    });
    assert_eq!(sample(&joined, "regent_cores_offered"), Some(3), "{joined}");
    assert_eq!(sample(&joined, "regent_memory_offered_bytes"), Some(512 << 20), "{joined}");
    let built = sample(&joined, "regent_state_snapshots_built_total").expect("the counter");
    // Twenty scrapes while the worker heartbeats every 200 ms.
    let mut last = joined;
    for _ in 0..20 {
        last = scrape().expect("/metrics answers");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        sample(&last, "regent_state_snapshots_built_total"),
        Some(built),
        "a /metrics scrape built a snapshot:\n{last}"
    );
    assert!(
        sample(&last, "regent_messages_total") > sample(&last, "regent_rejected_messages_total")
    );
    // `/api/state` does build one (the cached one, at most once per
    // interval): the counter is the one that would have moved.
    assert_eq!(api_state(&http).expect("/api/state")["workers"][0]["id"], "w1");
    let after = scrape().expect("/metrics answers");
    assert!(
        sample(&after, "regent_state_snapshots_built_total") > Some(built),
        "/api/state built no snapshot?\n{after}"
    );
}

#[test]
fn a_std_master_serves_the_same_endpoints_and_event_stream() {
    let c = Cluster::new("events-std");
    let spec = MasterSpec::new("m1", &["--worker-timeout", "2000", "--heartbeat-interval", "500"]);
    let (listen, http) = (spec.addr(), spec.http_addr());
    let args = [
        "--runtime",
        "std",
        "master",
        "--id",
        "m1",
        "--listen",
        &listen,
        "--http",
        &http,
        "--worker-timeout",
        "2000",
        "--heartbeat-interval",
        "500",
    ];
    let _m = c.spawn("m1", Kind::Master, &args);
    let state = wait_for(BOUND, "the std master's /api/state", || {
        api_state(&http).ok_or_else(|| "no answer".to_owned())
    });
    assert_eq!(state["id"], "m1");
    assert!(state["rejected_connections"].is_u64(), "{state}");
    let (code, metrics) = http_get(&http, "/metrics").expect("/metrics answers");
    assert_eq!(code, 200);
    assert!(metrics.contains("regent_master_status{status=\"ALIVE\"} 1"), "{metrics}");
    let (code, page) = http_get(&http, "/").expect("/ answers");
    assert_eq!(code, 200);
    assert!(page.contains("<title>regent</title>") && page.contains("/api/events"), "{page}");
    assert_eq!(http_get(&http, "/nope").map(|(c, _)| c), Some(404));
    snapshot_then_worker_join_and_death(&c, &spec, &["--runtime", "std"]);

    // The exposure rule holds for the std master's --http too.
    let out = c.run(
        &[
            "--runtime",
            "std",
            "master",
            "--id",
            "m9",
            "--listen",
            "127.0.0.1:0",
            "--http",
            "0.0.0.0:0",
        ],
        Duration::from_secs(20),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--http") && err.contains("--secret-file"), "{err}");
}

#[test]
fn event_streams_past_the_limit_get_503_and_a_closed_one_frees_its_place() {
    let c = Cluster::new("events-limit");
    let spec = MasterSpec::new("m1", &[]);
    let _m = c.master(&spec);
    let http = spec.http_addr();
    wait_for(BOUND, "the master ALIVE", || match api_state(&http) {
        Some(v) if v["status"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let max = regent_smol::http::events::MAX_STREAMS;
    let mut open = Vec::new();
    for _ in 0..max {
        let (head, rx, conn) = open_stream(&http);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        open.push((rx, conn));
    }
    let mut s = TcpStream::connect(&http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET /api/events HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 503") || answer.starts_with("HTTP/1.0 503"), "{answer}");
    assert!(answer.contains("too many event streams"), "{answer}");
    // A client that goes away frees its place (found at the next write:
    // the keepalive comment at the latest).
    let (_, conn) = open.pop().unwrap();
    conn.shutdown(std::net::Shutdown::Both).unwrap();
    drop(conn);
    wait_for(BOUND, "a place in the stream limit", || {
        let (head, _rx, _c) = open_stream(&http);
        if head.starts_with("HTTP/1.1 200") {
            Ok(())
        } else {
            Err(head)
        }
    });
}

/// Lines `regent events` printed so far, parsed as JSON.
fn lines(p: &support::cluster::Proc) -> Vec<Value> {
    p.stdout().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[test]
fn regent_events_follows_the_leader_across_a_zookeeper_failover() {
    let zk = ZkServer::start();
    let c = Cluster::new("events-failover");
    let root = format!("/{}", support::cluster::unique("events"));
    let specs = [
        MasterSpec::zookeeper("m1", &zk.addr(), &root, 4_000),
        MasterSpec::zookeeper("m2", &zk.addr(), &root, 4_000),
    ];
    let addrs: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
    let mut m1 = c.master(&specs[0]);
    wait_for(BOUND, "m1 ALIVE", || match api_state(&specs[0].http_addr()) {
        Some(v) if v["status"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let _m2 = c.master(&specs[1]);
    let _w1 = c.worker("w1", &addrs, 1, 256, &[]);
    wait_for(BOUND, "m2 STANDBY", || match api_state(&specs[1].http_addr()) {
        Some(v) if v["status"] == "STANDBY" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let joined = addrs.join(",");
    let events = c.spawn("events", Kind::Other, &["events", "--masters", &joined, "--json"]);
    let snapshot = wait_for(BOUND, "the snapshot line", || {
        lines(&events).into_iter().next().ok_or_else(|| events.stderr())
    });
    assert_eq!(snapshot["kind"], "snapshot");
    assert_eq!(snapshot["state"]["id"], "m1");
    let old_epoch = snapshot["state"]["epoch"].as_u64().expect("an epoch");
    wait_for(BOUND, "worker w1 ALIVE in the events", || {
        let ls = lines(&events);
        let alive = ls[0]["state"]["workers"]
            .as_array()
            .is_some_and(|ws| ws.iter().any(|w| w["id"] == "w1" && w["state"] == "ALIVE"))
            || ls
                .iter()
                .any(|e| e["kind"] == "worker" && e["worker"] == "w1" && e["state"] == "ALIVE");
        if alive {
            Ok(())
        } else {
            Err(format!("{ls:?}"))
        }
    });

    // The leader dies: the command says so, finds m2 and goes on.
    m1.kill9();
    let leader = wait_for(BOUND, "a leader event naming m2", || {
        let ls = lines(&events);
        ls.iter()
            .find(|e| e["kind"] == "leader" && e["leader"] == "m2")
            .cloned()
            .ok_or_else(|| format!("{ls:#?}\n{}", events.stderr()))
    });
    assert_eq!(leader["previous"], "m1", "{leader}");
    assert_eq!(leader["previous_epoch"].as_u64(), Some(old_epoch), "{leader}");
    assert!(leader["epoch"].as_u64().unwrap_or(0) > old_epoch, "a higher epoch: {leader}");
    assert_eq!(leader["addr"], specs[1].addr().as_str());
    // If a poll found no leader (m2 may take over between two polls: fast
    // takeover), that was said before the new leader.
    let ls = lines(&events);
    let new = ls.iter().position(|e| e["kind"] == "leader" && e["leader"] == "m2");
    if let Some(lost) = ls.iter().position(|e| e["kind"] == "leader_lost") {
        assert!(Some(lost) < new, "leader_lost before the new leader: {ls:#?}");
        assert_eq!(ls[lost]["leader"], "m1");
    }
    // It keeps printing: a worker joining the new leader is reported.
    let _w2 = c.worker("w2", &addrs, 1, 256, &[]);
    wait_for(BOUND, "worker w2 added, from m2", || {
        let ls = lines(&events);
        if ls.iter().any(|e| e["kind"] == "worker" && e["worker"] == "w2") {
            Ok(())
        } else {
            Err(format!("{ls:#?}"))
        }
    });
    // The text form says the same in words.
    let text = c.spawn("events-text", Kind::Other, &["events", "--masters", &joined]);
    let first = wait_for(BOUND, "a text snapshot line", || {
        text.stdout().lines().next().map(str::to_owned).ok_or_else(|| text.stderr())
    });
    assert!(first.starts_with("snapshot: master m2 ALIVE"), "{first}");
    drop(zk);
}

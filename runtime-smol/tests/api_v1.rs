//! The `/v1/` HTTP API (docs/api.md): routing, errors naming the field,
//! limits, authentication, a standby's answer, and the event stream's
//! resume and gap semantics.
//!
//! Two kinds of test: the server against a fake daemon loop in this
//! process (deterministic: the test decides every answer and counts the
//! commands that reach the "master"), and real `regent` processes on
//! loopback (free ports, temp dirs, bounded waits, every process stopped).

mod support;

use regent_core::ids::Epoch;
use regent_core::protocol::{LeaderHint, Message};
use regent_core::secret::Secret;
use regent_core::states::MasterStatus;
use regent_smol::http::{self, HttpQuery, HttpSnapshot, MetricsSnapshot, Tokens};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::cluster::{api_state, free_port, loopback, wait_for, Cluster, MasterSpec};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(30);

/// What a fake master answers to a command.
type Answer = fn(&Message) -> Message;

/// A `/v1/` server on a free loopback port whose daemon is a thread of
/// this test: snapshots of `status`, commands answered by `answer` and
/// counted.
struct Fake {
    addr: SocketAddr,
    commands: Arc<AtomicUsize>,
    queries: async_channel::Receiver<HttpQuery>,
}

impl Drop for Fake {
    /// Closes the query channel: the daemon thread ends, and the server's
    /// thread soon after.
    fn drop(&mut self) {
        self.queries.close();
    }
}

fn state(status: MasterStatus) -> HttpSnapshot {
    let config = regent_core::master::Config::new("m1".into(), "127.0.0.1:1".into());
    let mut state = regent_core::master::Master::new(config).state();
    state.status = status;
    state.epoch = Epoch(3);
    if status == MasterStatus::Standby {
        state.leader = Some(hint());
    }
    HttpSnapshot {
        state: Arc::new(state),
        rejected_connections: 0,
        node: Default::default(),
        master: Default::default(),
    }
}

fn hint() -> LeaderHint {
    LeaderHint { id: "m2".into(), addr: "127.0.0.1:7002".into(), epoch: Epoch(3) }
}

fn fake(status: MasterStatus, tokens: Option<Tokens>, answer: Answer) -> Fake {
    let server = http::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.server_addr().to_ip().expect("an IP listener");
    let (qtx, qrx) = async_channel::unbounded::<HttpQuery>();
    http::serve_on_with(server, tokens, qtx);
    let commands = Arc::new(AtomicUsize::new(0));
    let counted = commands.clone();
    let snap = state(status);
    let queries = qrx.clone();
    std::thread::spawn(move || {
        // The daemon loop: answers until the channel is closed.
        loop {
            let Ok(q) = qrx.recv_blocking() else { return };
            match q {
                HttpQuery::State { reply, .. } => {
                    let _ = reply.send(snap.clone());
                }
                HttpQuery::Metrics { reply } => {
                    let _ = reply.send(MetricsSnapshot::from(&snap));
                }
                HttpQuery::Command { msg, reply, .. } => {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let _ = reply.send(answer(&msg));
                }
                HttpQuery::Log(_) => {}
                HttpQuery::Revocations { reply } => {
                    let _ = reply.send(Default::default());
                }
            }
        }
    });
    Fake { addr, commands, queries }
}

/// A master that accepts everything: `JobAccepted` (created), `JobsReply`
/// with no job, `RequestAccepted`, `PlanReply` with no group.
fn accepting(msg: &Message) -> Message {
    let epoch = Epoch(3);
    match msg {
        Message::SubmitJob { request, job } => Message::JobAccepted {
            epoch,
            request: *request,
            job: job.job.clone(),
            version: 1,
            change: regent_core::api::JobChange::Created,
        },
        Message::JobsRequest { request, .. } => {
            Message::JobsReply { epoch, request: *request, jobs: Vec::new() }
        }
        Message::PlanRequest { request, .. } => {
            Message::PlanReply { epoch, request: *request, groups: Vec::new() }
        }
        other => Message::RequestAccepted { epoch, request: request_of(other) },
    }
}

fn request_of(msg: &Message) -> u64 {
    match msg {
        Message::CordonWorker { request, .. }
        | Message::UncordonWorker { request, .. }
        | Message::DrainWorker { request, .. }
        | Message::RemoveWorker { request, .. }
        | Message::OperatorKillExecutor { request, .. }
        | Message::StepDown { request }
        | Message::DeleteJob { request, .. }
        | Message::ScaleGroup { request, .. }
        | Message::PromoteDeployment { request, .. } => *request,
        _ => 0,
    }
}

/// One request on its own connection: status, head and body.
fn call(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, String) {
    let mut s = TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(5))
        .expect("the server takes connections");
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    // The server may answer (413) before reading all of a large body.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let body = raw.get(split + 4..).unwrap_or_default();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    let body = if chunked { unchunk(body) } else { body.to_vec() };
    (status, head, String::from_utf8_lossy(&body).into_owned())
}

/// The body of a `Transfer-Encoding: chunked` response (a large answer,
/// the OpenAPI document, is sent so).
fn unchunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&rest[..eol]).into_owned();
        let n = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or_else(|e| panic!("a bad chunk size {size:?}: {e}"));
        if n == 0 {
            break;
        }
        let data = &rest[eol + 2..];
        out.extend_from_slice(&data[..n]);
        rest = data[n..].strip_prefix(b"\r\n").unwrap_or(&data[n..]);
    }
    out
}

fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[test]
fn bad_requests_are_refused_naming_the_field_and_nothing_reaches_the_master() {
    let f = fake(MasterStatus::Alive, None, accepting);
    let addr = f.addr.to_string();
    let job = |group: &str| format!(r#"{{"name": "web", "group": [{group}]}}"#);

    let wrong_type = job(r#"{"name": "g", "command": ["sleep", "1"], "count": "x"}"#);
    let (code, head, body) = call(&addr, "POST", "/v1/jobs", &[], wrong_type.as_bytes());
    assert_eq!(code, 400, "{body}");
    assert!(head.to_ascii_lowercase().contains("content-type: application/json"), "{head}");
    let v = json_of(&body);
    assert_eq!(v["field"], "group[0].count", "{v}");
    assert_eq!(v["error"], "invalid type: string \"x\", expected u32", "{v}");

    let unknown = job(r#"{"name": "g", "command": ["sleep", "1"], "coresx": 1}"#);
    let v = json_of(&call(&addr, "POST", "/v1/jobs", &[], unknown.as_bytes()).2);
    assert!(v["error"].as_str().unwrap().starts_with("unknown field `coresx`"), "{v}");
    assert!(v["field"].as_str().unwrap().starts_with("group[0]"), "{v}");

    let rule = job(r#"{"name": "g", "command": ["sleep", "1"], "cores": 0}"#);
    let v = json_of(&call(&addr, "POST", "/v1/jobs", &[], rule.as_bytes()).2);
    assert_eq!(v["field"], "group[0].cores", "{v}");

    let (code, _, body) = call(&addr, "POST", "/v1/jobs", &[], b"{not json");
    assert_eq!(code, 400, "{body}");
    assert!(json_of(&body)["error"].as_str().unwrap().contains("not JSON"), "{body}");

    let good = job(r#"{"name": "g", "command": ["sleep", "1"]}"#);
    let (code, _, body) = call(&addr, "POST", "/v1/jobs?expect_version=x", &[], good.as_bytes());
    assert_eq!((code, json_of(&body)["field"].as_str()), (400, Some("expect_version")));
    let (code, _, body) =
        call(&addr, "POST", "/v1/jobs", &[("Idempotency-Key", &"k".repeat(200))], good.as_bytes());
    assert_eq!((code, json_of(&body)["field"].as_str()), (400, Some("Idempotency-Key")));

    let scale = br#"{"count": 2, "drain": {"signal": "KILL", "deadline": "1s"}}"#;
    let (code, _, body) = call(&addr, "POST", "/v1/jobs/web/groups/g/scale", &[], scale);
    assert_eq!((code, json_of(&body)["field"].as_str()), (400, Some("drain.signal")));

    let too_large = vec![b' '; http::v1::MAX_BODY + 1];
    let (code, _, body) = call(&addr, "POST", "/v1/jobs", &[], &too_large);
    assert_eq!(code, 413, "{body}");
    assert!(json_of(&body)["error"].as_str().unwrap().contains("1048576 bytes"), "{body}");

    let (code, head, body) = call(&addr, "PUT", "/v1/jobs", &[], b"");
    assert_eq!(code, 405, "{body}");
    assert!(head.contains("Allow: GET, HEAD, POST"), "{head}");
    let (code, _, body) = call(&addr, "GET", "/v1/nothing/here", &[], b"");
    assert_eq!(code, 404, "{body}");
    assert!(json_of(&body)["error"].as_str().unwrap().contains("/v1/nothing/here"), "{body}");

    assert_eq!(f.commands.load(Ordering::SeqCst), 0, "no bad request reached the master");

    // The good job does, and its answer is rendered.
    let (code, _, body) = call(
        &addr,
        "POST",
        "/v1/jobs",
        &[("Content-Type", "application/json")],
        job(r#"{"name": "g", "command": ["sleep", "1"], "count": 3}"#).as_bytes(),
    );
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        json_of(&body),
        json!({"job": "web", "version": 1, "change": "created", "epoch": 3})
    );
    // TOML too, with the id from the query.
    let toml = "name = \"web\"\n[[group]]\nname = \"g\"\ncommand = [\"sleep\", \"1\"]\n";
    let (code, _, body) = call(
        &addr,
        "POST",
        "/v1/jobs?id=web-2",
        &[("Content-Type", "application/toml")],
        toml.as_bytes(),
    );
    assert_eq!((code, json_of(&body)["job"].as_str()), (201, Some("web-2")), "{body}");
    assert_eq!(f.commands.load(Ordering::SeqCst), 2);
}

#[test]
fn answers_are_rendered_by_kind_and_refusals_by_what_they_name() {
    fn refusing(msg: &Message) -> Message {
        let reason = match msg {
            Message::CordonWorker { worker, .. } => format!("no worker {worker}"),
            Message::SubmitJob { job, .. } => format!("job {} is at version 2, not 1", job.job),
            _ => "count must be at least 1".to_string(),
        };
        Message::RequestRefused { epoch: Epoch(3), request: request_of(msg), reason }
    }
    let f = fake(MasterStatus::Alive, None, refusing);
    let addr = f.addr.to_string();
    let (code, _, body) = call(&addr, "POST", "/v1/workers/w9/cordon", &[], b"");
    assert_eq!((code, json_of(&body)["error"].as_str()), (404, Some("no worker w9")));
    let job = br#"{"name": "web", "group": [{"name": "g", "command": ["true"]}]}"#;
    let (code, _, body) = call(&addr, "POST", "/v1/jobs?expect_version=1", &[], job);
    assert_eq!(code, 409, "{body}");
    let (code, _, body) =
        call(&addr, "POST", "/v1/jobs/web/groups/g/scale", &[], br#"{"count": 0}"#);
    assert_eq!(code, 400, "{body}");

    let f = fake(MasterStatus::Alive, None, accepting);
    let addr = f.addr.to_string();
    let (code, _, body) = call(&addr, "GET", "/v1/jobs", &[], b"");
    assert_eq!((code, json_of(&body)), (200, json!({"epoch": 3, "jobs": []})));
    let (code, _, body) = call(&addr, "GET", "/v1/jobs/web", &[], b"");
    assert_eq!((code, json_of(&body)["error"].as_str()), (404, Some("no such job: web")));
    let (code, _, body) = call(&addr, "DELETE", "/v1/jobs/web", &[], b"");
    assert_eq!((code, json_of(&body)), (200, json!({"job": "web", "deleted": true, "epoch": 3})));
    let scale = br#"{"count": 1, "remove": ["web/g#0"], "drain": {"deadline": "30s"}}"#;
    let (code, _, body) = call(&addr, "POST", "/v1/jobs/web/groups/g/scale", &[], scale);
    assert_eq!(
        (code, json_of(&body)),
        (200, json!({"job": "web", "group": "g", "count": 1, "removed": ["web/g#0"], "epoch": 3}))
    );
    let (code, _, body) =
        call(&addr, "POST", "/v1/workers/w1/drain", &[], br#"{"deadline": "5s"}"#);
    assert_eq!(
        (code, json_of(&body)),
        (200, json!({"worker": "w1", "action": "drain", "epoch": 3}))
    );
    let (code, _, body) =
        call(&addr, "POST", "/v1/executors/e1/kill", &[], br#"{"refill": false}"#);
    assert_eq!(json_of(&body)["refill"], false, "{code} {body}");
    let (code, _, body) = call(&addr, "DELETE", "/v1/workers/w1", &[], b"");
    assert_eq!((code, json_of(&body)["removed"].as_bool()), (200, Some(true)));
    let (code, _, body) = call(&addr, "POST", "/v1/leader/step-down", &[], b"");
    assert_eq!((code, json_of(&body)["stepped_down"].as_bool()), (200, Some(true)));
}

#[test]
fn a_standby_answers_503_naming_the_leader() {
    fn standby(_: &Message) -> Message {
        Message::NotLeader { epoch: Epoch(3), leader: Some(hint()) }
    }
    let f = fake(MasterStatus::Standby, None, standby);
    let addr = f.addr.to_string();
    let leader = json!({"id": "m2", "addr": "127.0.0.1:7002"});
    for (method, path) in [("GET", "/v1/jobs"), ("POST", "/v1/workers/w1/cordon")] {
        let (code, _, body) = call(&addr, method, path, &[], b"");
        assert_eq!(code, 503, "{path}: {body}");
        assert_eq!(json_of(&body), json!({"error": "not the leader", "leader": leader}));
    }
    // The event stream is refused too.
    let (code, _, body) = call(&addr, "GET", "/v1/events", &[], b"");
    assert_eq!((code, json_of(&body)["leader"].clone()), (503, leader));
}

#[test]
fn tokens_grant_their_access_and_a_read_only_one_may_not_write() {
    let secret = Secret::new(b"a /v1/ test secret of enough bytes".to_vec()).unwrap();
    let tokens = Tokens::of(&secret);
    // With a secret the tokens are required on every address, loopback
    // too (docs/design.md#issue-44); without one, none is.
    assert_eq!(http::required_token(Some(&secret)), Some(tokens.clone()));
    assert_eq!(http::required_token(None), None);
    let f = fake(MasterStatus::Alive, Some(tokens.clone()), accepting);
    let addr = f.addr.to_string();
    let full = format!("Bearer {}", tokens.full);
    let read_only = format!("Bearer {}", tokens.read_only);

    let (code, head, body) = call(&addr, "GET", "/v1/jobs", &[], b"");
    assert_eq!(code, 401, "{body}");
    assert!(head.contains("WWW-Authenticate: Bearer"), "{head}");
    assert!(json_of(&body)["error"].as_str().unwrap().contains("regent http-token"), "{body}");
    let (code, _, _) = call(&addr, "GET", "/v1/jobs", &[("Authorization", &read_only)], b"");
    assert_eq!(code, 200);
    let (code, _, body) =
        call(&addr, "POST", "/v1/workers/w1/cordon", &[("Authorization", &read_only)], b"");
    assert_eq!(code, 403, "{body}");
    assert!(json_of(&body)["error"].as_str().unwrap().contains("read-only"), "{body}");
    assert_eq!(f.commands.load(Ordering::SeqCst), 1, "only the read reached the master");
    let (code, _, body) =
        call(&addr, "POST", "/v1/workers/w1/cordon", &[("Authorization", &full)], b"");
    assert_eq!(code, 200, "{body}");
    // The old pages take the read-only token too.
    let (code, _, _) = call(&addr, "GET", "/api/state", &[("Authorization", &read_only)], b"");
    assert_eq!(code, 200);
    // A scoped token: what its capabilities grant, refusals naming the
    // capability missing.
    let claims = regent_core::token::Claims {
        id: regent_core::token::TokenId([3; 16]),
        name: "reader".into(),
        key_id: 1,
        capabilities: [regent_core::token::Capability::Read].into_iter().collect(),
        tenant: None,
        frameworks: None,
        workers: None,
        issued_ms: 0,
        expires_ms: None,
    };
    let scoped = regent_core::token::Token::issue(&secret, &claims).unwrap();
    let scoped = format!("Bearer {scoped}");
    let (code, _, body) = call(&addr, "GET", "/v1/jobs", &[("Authorization", &scoped)], b"");
    assert_eq!(code, 200, "{body}");
    let (code, _, body) =
        call(&addr, "POST", "/v1/workers/w1/cordon", &[("Authorization", &scoped)], b"");
    assert_eq!(code, 403, "{body}");
    assert!(json_of(&body)["error"].as_str().unwrap().contains("`operator`"), "{body}");
    let (code, _, body) = call(&addr, "GET", "/api/logs/e1", &[("Authorization", &scoped)], b"");
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("`logs`"), "{body}");
}

#[test]
fn a_connection_is_kept_alive_across_requests() {
    let f = fake(MasterStatus::Alive, None, accepting);
    let mut s = TcpStream::connect(f.addr).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    for _ in 0..3 {
        write!(s, "GET /v1/jobs HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut length = 0;
        loop {
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
            assert!(!line.is_empty(), "the connection closed");
        }
        let mut body = vec![0; length];
        r.read_exact(&mut body).unwrap();
        assert_eq!(json_of(&String::from_utf8(body).unwrap())["jobs"], json!([]));
    }
}

/// An open `/v1/events` stream: its lines as JSON, read with a bound.
struct Stream {
    lines: std::sync::mpsc::Receiver<Value>,
    _conn: TcpStream,
}

fn open_events(http: &str, query: &str) -> Stream {
    let mut s = TcpStream::connect(http).unwrap();
    write!(s, "GET /v1/events{query} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    let read = s.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut r = BufReader::new(read);
        let mut line = String::new();
        // The head.
        while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
            if line.starts_with("HTTP/1.1") {
                assert!(line.contains(" 200 "), "{line}");
            }
            line.clear();
        }
        line.clear();
        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
            if tx.send(serde_json::from_str(line.trim()).unwrap()).is_err() {
                return;
            }
            line.clear();
        }
    });
    Stream { lines, _conn: s }
}

impl Stream {
    fn next(&self) -> Value {
        self.lines.recv_timeout(BOUND).expect("a line within the bound")
    }

    /// The next line that is not a heartbeat.
    fn next_news(&self) -> Value {
        loop {
            let v = self.next();
            if v["heartbeat"] != true {
                return v;
            }
        }
    }
}

#[test]
fn events_resume_exactly_within_the_backlog_and_say_gap_otherwise() {
    let c = Cluster::new("api-v1-events");
    let spec = MasterSpec::new("m1", &["--worker-timeout", "3000", "--heartbeat-interval", "500"]);
    let mut m = c.master(&spec);
    let http = spec.http_addr();
    wait_for(BOUND, "the master ALIVE", || match api_state(&http) {
        Some(v) if v["status"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let a = open_events(&http, "?heartbeat=200ms");
    let start = a.next();
    let now = start["index"].as_str().expect("the stream says where it starts").to_owned();
    let (epoch, _) = now.split_once('.').unwrap();
    let mut w1 = c.worker("w1", &[spec.addr()], 1, 256, &[]);
    let first = a.next_news();
    assert_eq!(first["event"]["worker"], "w1", "{first}");
    let mut w2 = c.worker("w2", &[spec.addr()], 1, 256, &[]);
    let second = wait_for(BOUND, "w2's event", || {
        let v = a.next_news();
        if v["event"]["worker"] == "w2" {
            Ok(v)
        } else {
            Err(format!("{v}"))
        }
    });
    // Resumed after the first event: the stream continues with the very
    // events that followed it.
    let after = first["index"].as_str().unwrap();
    let b = open_events(&http, &format!("?after={after}&heartbeat=200ms"));
    let resumed = b.next_news();
    assert_ne!(resumed["gap"], true, "{resumed}");
    // Every event of b up to w2's is what a saw after `first`.
    let mut seen = vec![resumed];
    while seen.last().unwrap()["index"] != second["index"] {
        seen.push(b.next_news());
    }
    assert!(seen.iter().all(|v| v["event"].is_object()), "{seen:?}");
    assert_eq!(seen.last().unwrap(), &second);

    // Another epoch, a future index, a malformed one.
    let other_epoch = epoch.parse::<u64>().unwrap() + 5;
    let c1 = open_events(&http, &format!("?after={other_epoch}.1"));
    let gap = c1.next();
    assert_eq!(gap["gap"], true, "{gap}");
    assert_eq!(gap["resync"], "/v1/jobs");
    assert!(gap["index"].as_str().unwrap().starts_with(&format!("{epoch}.")), "{gap}");
    let future = open_events(&http, &format!("?after={epoch}.999999"));
    assert_eq!(future.next()["gap"], true);
    let (code, _, body) = call(&http, "GET", "/v1/events?after=soon", &[], b"");
    assert_eq!((code, json_of(&body)["field"].as_str()), (400, Some("after")));

    // A heartbeat on an idle stream.
    let hb = wait_for(BOUND, "a heartbeat", || match c1.next() {
        v if v["heartbeat"] == true => Ok(v),
        v => Err(format!("{v}")),
    });
    assert!(hb["index"].is_string(), "{hb}");
    w1.stop(Duration::from_secs(5));
    w2.stop(Duration::from_secs(5));
    m.stop(Duration::from_secs(5));
}

#[test]
fn a_plan_over_v1_reaches_a_real_master() {
    let c = Cluster::new("api-v1-operator");
    let spec = MasterSpec::new("m1", &[]);
    let mut m = c.master(&spec);
    let http = spec.http_addr();
    let mut w = c.worker("w1", &[spec.addr()], 2, 512, &[]);
    wait_for(BOUND, "w1 ALIVE", || match api_state(&http) {
        Some(v) if v["workers"][0]["state"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let job = br#"{"name": "web", "group": [{"name": "g", "count": 2, "command": ["sleep", "60"], "cores": 1, "memory_mb": 64}]}"#;
    let (code, _, body) = call(&http, "POST", "/v1/jobs/web/plan", &[], job);
    assert_eq!(code, 200, "{body}");
    let plan = json_of(&body);
    assert_eq!(plan["job"], "web");
    assert_eq!(plan["groups"].as_array().map(Vec::len), Some(1), "{plan}");
    assert!(plan["epoch"].as_u64().is_some(), "{plan}");

    w.stop(Duration::from_secs(5));
    m.stop(Duration::from_secs(5));
}

#[test]
fn the_read_only_token_from_the_cli_is_refused_on_writes_off_loopback() {
    let c = Cluster::new("api-v1-token");
    let secret = c.path("secret");
    std::fs::write(&secret, "an api test secret of enough bytes\n").unwrap();
    let secret = secret.to_str().unwrap();
    let http_port = free_port();
    let http = format!("0.0.0.0:{http_port}");
    let listen = loopback(free_port());
    let args = [
        "master",
        "--id",
        "m1",
        "--listen",
        &listen,
        "--http",
        &http,
        "--recovery",
        "none",
        "--secret-file",
        secret,
    ];
    let mut m = c.spawn("m1", support::cluster::Kind::Master, &args);
    let via = loopback(http_port);
    let token = |extra: &[&str]| {
        let out = c.run(&[&["http-token", "--secret-file", secret], extra].concat(), BOUND);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        format!("Bearer {}", String::from_utf8(out.stdout).unwrap().trim())
    };
    let (full, read_only) = (token(&[]), token(&["--read-only"]));
    assert_ne!(full, read_only);
    let (code, _, body) = wait_for(BOUND, "the HTTP server answers", || {
        m.assert_running("the master");
        let r = call_opt(&via, "GET", "/v1/jobs", &[]);
        r.ok_or_else(|| "no answer yet".to_string())
    });
    assert_eq!(code, 401, "{body}");
    let (code, _, body) =
        call(&via, "GET", "/v1/jobs/web/plan", &[("Authorization", &read_only)], b"");
    assert_eq!(code, 405, "past authentication: {body}");
    let job = br#"{"name": "web", "group": [{"name": "g", "command": ["true"]}]}"#;
    // A plan only reads: the read-only token may ask for one; a submission
    // writes.
    let (code, _, body) =
        call(&via, "POST", "/v1/jobs/web/plan", &[("Authorization", &read_only)], job);
    assert_eq!(code, 200, "{body}");
    let (code, _, body) = call(&via, "POST", "/v1/jobs", &[("Authorization", &read_only)], job);
    assert_eq!(code, 403, "{body}");
    let (code, _, body) = call(&via, "POST", "/v1/jobs/web/plan", &[("Authorization", &full)], job);
    assert_eq!(code, 200, "{body}");
    m.stop(Duration::from_secs(5));
}

/// [`call`] that says `None` when nothing listens yet.
fn call_opt(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Option<(u16, String, String)> {
    TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(2)).ok()?;
    Some(call(addr, method, path, headers, b""))
}

/// The validator of `status`'s answer to `method path` (as the document
/// writes the path) in the OpenAPI document `doc`: the response's schema
/// with the document's components beside it, so its `$ref`s resolve.
fn validator(doc: &Value, path: &str, method: &str, status: u16) -> jsonschema::Validator {
    let response = &doc["paths"][path][method]["responses"][status.to_string()];
    let content = response["content"].as_object().unwrap_or_else(|| {
        panic!("{method} {path} {status} has no content in the document: {response}")
    });
    let (_, media) = content.iter().next().expect("one media type");
    let mut schema = media["schema"].clone();
    schema["components"] = doc["components"].clone();
    jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{path}: a schema: {e}"))
}

/// Asserts that `body` is valid for `status`'s answer to `method path`.
fn conforms(doc: &Value, path: &str, method: &str, status: u16, body: &Value) {
    let v = validator(doc, path, method, status);
    let errors: Vec<String> = v.iter_errors(body).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{method} {path} {status}: {body} does not fit: {errors:?}");
}

fn openapi_of(addr: &str) -> Value {
    let (code, head, body) = call(addr, "GET", "/v1/openapi.json", &[], b"");
    assert_eq!(code, 200, "{head}");
    json_of(&body)
}

#[test]
fn the_answers_of_a_fake_master_fit_the_openapi_document() {
    fn with_a_job(msg: &Message) -> Message {
        use regent_core::api::{GroupStatus, JobStatus, SlotPhase, SlotStatus, WaitReason};
        match msg {
            Message::JobsRequest { request, .. } => {
                let slot =
                    |slot, phase, executor: Option<&str>, reasons: Vec<WaitReason>| SlotStatus {
                        // A running slot's health (docs/design.md#issue-45).
                        health: executor.map(|_| regent_core::protocol::HealthReport {
                            status: regent_core::protocol::HealthStatus::Passing,
                            for_ms: 42_000,
                            detail: String::new(),
                        }),
                        preempted_by: None,
                        slot,
                        phase,
                        executor: executor.map(Into::into),
                        worker: executor.map(|_| "w1".into()),
                        reason: reasons.first().map(ToString::to_string),
                        reasons,
                    };
                let waiting = vec![
                    WaitReason::NoMatchingWorker { constraint: "rack=r9".into() },
                    WaitReason::Shortfall {
                        dimension: "gpu".into(),
                        needed: 2,
                        most_free: 0,
                        worker: Some("w1".into()),
                    },
                    WaitReason::Cordoned { workers: 1 },
                    WaitReason::PlacedNext {},
                ];
                let job = JobStatus {
                    tenant: None,
                    job: "web".into(),
                    name: "web".into(),
                    version: Some(2),
                    state: regent_core::states::FrameworkState::Active,
                    groups: vec![GroupStatus {
                        group: "g".into(),
                        desired: 3,
                        placed: 1,
                        running: 1,
                        done: 0,
                        rolling: false,
                        priority: 50,
                        stop_after_ms: Some(30_000),
                        deployment: Some(regent_core::api::DeploymentView {
                            seq: 2,
                            state: "canary".into(),
                            reason: None,
                            revert_of: None,
                            healthy: 0,
                            open: 3,
                            canary: 1,
                            max_parallel: 1,
                            min_healthy_time_ms: 10_000,
                            target_digest: 0xdead_beef,
                            revert_to_digest: Some(7),
                            placed: 1,
                            old: 2,
                            canaries: vec![0],
                            auto_revert: true,
                            auto_promote: false,
                            healthy_deadline_ms: 300_000,
                            progress_deadline_ms: 600_000,
                            started_ms: 1_700_000_000_000,
                            progress_ms: 1_700_000_000_000,
                            progress_due_ms: Some(1_700_000_600_000),
                            reverts_because: None,
                        }),
                        slots: vec![
                            slot(0, SlotPhase::Running, Some("web/g#0#1"), Vec::new()),
                            slot(1, SlotPhase::Waiting, None, waiting),
                            slot(
                                2,
                                SlotPhase::Backoff,
                                None,
                                vec![WaitReason::Backoff { until_ms: 5_000, in_ms: 300 }],
                            ),
                        ],
                    }],
                };
                Message::JobsReply { epoch: Epoch(3), request: *request, jobs: vec![job] }
            }
            other => accepting(other),
        }
    }
    let f = fake(MasterStatus::Alive, None, with_a_job);
    let addr = f.addr.to_string();
    let doc = openapi_of(&addr);
    let job = br#"{"name": "web", "group": [{"name": "g", "command": ["sleep", "1"]}]}"#;
    let checks: [(&str, &str, &str, &[u8], u16); 14] = [
        ("POST", "/v1/jobs", "/v1/jobs", job, 201),
        ("GET", "/v1/jobs", "/v1/jobs", b"", 200),
        ("GET", "/v1/jobs/web", "/v1/jobs/{id}", b"", 200),
        ("GET", "/v1/jobs/web/deployment", "/v1/jobs/{id}/deployment", b"", 200),
        ("GET", "/v1/jobs/nope/deployment", "/v1/jobs/{id}/deployment", b"", 404),
        ("DELETE", "/v1/jobs/web", "/v1/jobs/{id}", b"", 200),
        (
            "POST",
            "/v1/jobs/web/groups/g/scale",
            "/v1/jobs/{id}/groups/{group}/scale",
            br#"{"count": 2, "remove": ["e1"]}"#,
            200,
        ),
        (
            "POST",
            "/v1/jobs/web/deployment/promote",
            "/v1/jobs/{id}/deployment/promote",
            br#"{"group": "g"}"#,
            200,
        ),
        ("POST", "/v1/jobs/web/deployment/promote", "/v1/jobs/{id}/deployment/promote", b"", 200),
        ("POST", "/v1/workers/w1/drain", "/v1/workers/{id}/{action}", b"", 200),
        ("DELETE", "/v1/workers/w1", "/v1/workers/{id}", b"", 200),
        ("POST", "/v1/executors/e1/kill", "/v1/executors/{id}/kill", b"", 200),
        ("POST", "/v1/leader/step-down", "/v1/leader/step-down", b"", 200),
        ("POST", "/v1/jobs", "/v1/jobs", br#"{"name": 7}"#, 400),
    ];
    for (method, path, documented, body, status) in checks {
        let (code, _, answer) = call(&addr, method, path, &[], body);
        assert_eq!(code, status, "{method} {path}: {answer}");
        conforms(&doc, documented, &method.to_ascii_lowercase(), status, &json_of(&answer));
    }
    // The deployment of each group, as the leader shows it.
    let (_, _, answer) = call(&addr, "GET", "/v1/jobs/web/deployment", &[], b"");
    let v = json_of(&answer);
    assert_eq!((v["job"].as_str(), v["version"].as_u64()), (Some("web"), Some(2)), "{v}");
    let g = &v["groups"][0];
    assert_eq!((g["group"].as_str(), g["desired"].as_u64()), (Some("g"), Some(3)), "{v}");
    let d = &g["deployment"];
    assert_eq!(d["state"], "canary");
    assert_eq!(d["canaries"], json!([0]));
    assert_eq!((d["placed"].as_u64(), d["old"].as_u64()), (Some(1), Some(2)));
    assert_eq!(d["target_digest"], 0xdead_beef_u32);
    assert_eq!(d["progress_due_ms"], 1_700_000_600_000_u64);
    let (_, _, answer) = call(&addr, "GET", "/v1/jobs/nope/deployment", &[], b"");
    assert!(json_of(&answer)["error"].as_str().is_some_and(|e| e.contains("nope")), "{answer}");
    // A document that would not fit is caught: the check can fail.
    let wrong = json!({"job": "web", "version": "two", "change": "created", "epoch": 3});
    assert!(!validator(&doc, "/v1/jobs", "post", 201).is_valid(&wrong));
    let wrong_phase = json!({"slot": 0, "phase": "sleeping"});
    let slot = jsonschema::draft202012::new(&{
        let mut s = json!({"$ref": "#/components/schemas/SlotStatus"});
        s["components"] = doc["components"].clone();
        s
    })
    .unwrap();
    assert!(!slot.is_valid(&wrong_phase));

    // A standby's 503.
    fn standby(_: &Message) -> Message {
        Message::NotLeader { epoch: Epoch(3), leader: Some(hint()) }
    }
    let f = fake(MasterStatus::Standby, None, standby);
    let (code, _, answer) = call(&f.addr.to_string(), "GET", "/v1/jobs", &[], b"");
    assert_eq!(code, 503);
    conforms(&doc, "/v1/jobs", "get", 503, &json_of(&answer));
}

#[test]
fn the_answers_of_a_real_master_fit_the_openapi_document() {
    let c = Cluster::new("api-v1-openapi");
    let spec = MasterSpec::new("m1", &[]);
    let mut m = c.master(&spec);
    let http = spec.http_addr();
    wait_for(BOUND, "the master ALIVE", || match api_state(&http) {
        Some(v) if v["status"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let doc = openapi_of(&http);
    let events = open_events(&http, "?heartbeat=200ms");
    let start = events.next();
    conforms(&doc, "/v1/events", "get", 200, &start);
    let mut w = c.worker("w1", &[spec.addr()], 2, 512, &[]);
    let added = events.next_news();
    assert!(added["event"].is_object(), "{added}");
    conforms(&doc, "/v1/events", "get", 200, &added);
    let heartbeat = wait_for(BOUND, "a heartbeat", || match events.next() {
        v if v["heartbeat"] == true => Ok(v),
        v => Err(format!("{v}")),
    });
    conforms(&doc, "/v1/events", "get", 200, &heartbeat);

    let job =
        br#"{"name": "web", "group": [{"name": "g", "count": 2, "command": ["sleep", "60"]}]}"#;
    let (code, _, body) = call(&http, "POST", "/v1/jobs/web/plan", &[], job);
    assert_eq!(code, 200, "{body}");
    conforms(&doc, "/v1/jobs/{id}/plan", "post", 200, &json_of(&body));
    let (code, _, body) = call(
        &http,
        "POST",
        "/v1/jobs/web/plan",
        &[],
        br#"{"name": "web", "group": [{"name": "g"}]}"#,
    );
    assert_eq!(code, 400, "{body}");
    conforms(&doc, "/v1/jobs/{id}/plan", "post", 400, &json_of(&body));
    let (code, _, body) = call(&http, "GET", "/v1/events?after=x", &[], b"");
    assert_eq!(code, 400, "{body}");
    conforms(&doc, "/v1/events", "get", 400, &json_of(&body));
    w.stop(Duration::from_secs(5));
    m.stop(Duration::from_secs(5));
}

#[test]
fn events_are_server_sent_when_the_client_accepts_them() {
    let f = fake(MasterStatus::Alive, None, accepting);
    let mut s = TcpStream::connect(f.addr).unwrap();
    s.set_read_timeout(Some(BOUND)).unwrap();
    write!(
        s,
        "GET /v1/events?heartbeat=100ms HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut head = String::new();
    while !head.ends_with("\r\n\r\n") {
        assert!(r.read_line(&mut head).unwrap() > 0, "the stream closed: {head}");
    }
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-type: text/event-stream"), "{head}");
    // Two events: where the stream starts, then a heartbeat; each with its
    // index as `id:` and the same JSON as the NDJSON line as `data:`.
    for expected in ["index", "heartbeat"] {
        let (mut id, mut data, mut line) = (String::new(), String::new(), String::new());
        r.read_line(&mut id).unwrap();
        r.read_line(&mut data).unwrap();
        r.read_line(&mut line).unwrap();
        let id = id.strip_prefix("id: ").expect("an id line").trim();
        let v = json_of(data.strip_prefix("data: ").expect("a data line"));
        assert_eq!(v["index"], id, "{v}");
        assert!(v.get(expected).is_some(), "{expected}: {v}");
        assert_eq!(line, "\n", "an event ends with an empty line");
    }
    // HEAD: the head only.
    let (code, head, body) = call(&f.addr.to_string(), "HEAD", "/v1/events", &[], b"");
    assert_eq!((code, body.as_str()), (200, ""), "{head}");
}

// The tests below need the jobs assignment's core (API-owned jobs,
// operator commands answered to a local asker): on this branch's base the
// master refuses them as not served yet (rendered 501), and the last one
// the scale assignment's named scale too. Un-ignore on merge; all pass on
// http merged with jobs and scale (with clients, so does e2e_python_adaptive).

#[test]
fn jobs_over_v1_on_a_real_master() {
    let c = Cluster::new("api-v1-jobs");
    let spec = MasterSpec::new("m1", &[]);
    let mut m = c.master(&spec);
    let http = spec.http_addr();
    let mut w = c.worker("w1", &[spec.addr()], 2, 512, &[]);
    wait_for(BOUND, "w1 ALIVE", || match api_state(&http) {
        Some(v) if v["workers"][0]["state"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let doc = openapi_of(&http);
    let job = br#"{"id": "web", "name": "web", "group": [{"name": "g", "count": 3, "command": ["sleep", "600"], "cores": 1, "memory_mb": 64}]}"#;
    let key = [("Idempotency-Key", "deploy-1")];
    let (code, _, body) = call(&http, "POST", "/v1/jobs?expect_version=0", &key, job);
    assert_eq!(code, 201, "{body}");
    conforms(&doc, "/v1/jobs", "post", 201, &json_of(&body));
    assert_eq!(json_of(&body)["version"], 1, "{body}");
    // A retry with the same key: replayed, nothing changed.
    let (code, _, body) = call(&http, "POST", "/v1/jobs?expect_version=0", &key, job);
    assert_eq!((code, json_of(&body)["change"].as_str()), (200, Some("replayed")), "{body}");
    // Check-and-set against another version.
    let (code, _, body) = call(&http, "POST", "/v1/jobs?expect_version=7", &[], job);
    assert_eq!(code, 409, "{body}");
    conforms(&doc, "/v1/jobs", "post", 409, &json_of(&body));
    // Two of three slots fit (2 cores); the third waits, saying why.
    let status = wait_for(BOUND, "two slots running", || {
        let (code, _, body) = call(&http, "GET", "/v1/jobs/web", &[], b"");
        let v = json_of(&body);
        if code == 200 && v["groups"][0]["running"] == 2 {
            Ok(v)
        } else {
            Err(body)
        }
    });
    conforms(&doc, "/v1/jobs/{id}", "get", 200, &status);
    let waiting =
        status["groups"][0]["slots"].as_array().unwrap().iter().find(|s| s["phase"] == "waiting");
    assert!(waiting.is_some_and(|s| s["reason"].is_string()), "{status}");
    let (code, _, body) = call(&http, "GET", "/v1/jobs", &[], b"");
    assert_eq!(code, 200, "{body}");
    conforms(&doc, "/v1/jobs", "get", 200, &json_of(&body));
    let (code, _, body) = call(&http, "DELETE", "/v1/jobs/web", &[], b"");
    assert_eq!(code, 200, "{body}");
    conforms(&doc, "/v1/jobs/{id}", "delete", 200, &json_of(&body));
    let (code, _, body) = call(&http, "DELETE", "/v1/jobs/web", &[], b"");
    assert_eq!(code, 404, "{body}");
    w.stop(Duration::from_secs(5));
    m.stop(Duration::from_secs(5));
}

#[test]
fn operator_commands_over_v1_reach_a_real_master() {
    let c = Cluster::new("api-v1-operator");
    let spec = MasterSpec::new("m1", &[]);
    let mut m = c.master(&spec);
    let http = spec.http_addr();
    let mut w = c.worker("w1", &[spec.addr()], 2, 512, &[]);
    wait_for(BOUND, "w1 ALIVE", || match api_state(&http) {
        Some(v) if v["workers"][0]["state"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    // Cordon over /v1/, then the state shows it; an unknown worker is 404.
    let (code, _, body) = call(&http, "POST", "/v1/workers/w1/cordon", &[], b"");
    assert_eq!(code, 200, "{body}");
    assert_eq!(json_of(&body)["action"], "cordon", "{body}");
    wait_for(BOUND, "w1 cordoned in /api/state", || match api_state(&http) {
        Some(v) if v["workers"][0]["cordoned"] == true => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let (code, _, body) = call(&http, "POST", "/v1/workers/nope/cordon", &[], b"");
    assert_eq!(code, 404, "{body}");
    let (code, _, body) = call(&http, "POST", "/v1/workers/w1/uncordon", &[], b"");
    assert_eq!(code, 200, "{body}");
    wait_for(BOUND, "w1 uncordoned", || match api_state(&http) {
        Some(v) if v["workers"][0]["cordoned"] == false => Ok(()),
        other => Err(format!("{other:?}")),
    });
    w.stop(Duration::from_secs(5));
    m.stop(Duration::from_secs(5));
}

#[test]
fn a_scale_over_v1_removes_exactly_the_named_executors() {
    let c = Cluster::new("api-v1-scale");
    let spec = MasterSpec::new("m1", &[]);
    let mut m = c.master(&spec);
    let http = spec.http_addr();
    let mut w = c.worker("w1", &[spec.addr()], 4, 1024, &[]);
    wait_for(BOUND, "w1 ALIVE", || match api_state(&http) {
        Some(v) if v["workers"][0]["state"] == "ALIVE" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let doc = openapi_of(&http);
    let job = br#"{"name": "web", "group": [{"name": "g", "count": 3, "command": ["sleep", "600"], "cores": 1, "memory_mb": 64}]}"#;
    let (code, _, body) = call(&http, "POST", "/v1/jobs", &[], job);
    assert_eq!(code, 201, "{body}");
    let running = |n: u64| {
        wait_for(BOUND, "the slots running", || {
            let (_, _, body) = call(&http, "GET", "/v1/jobs/web", &[], b"");
            let v = json_of(&body);
            let g = &v["groups"][0];
            if g["running"] == n && g["desired"] == n {
                Ok(v)
            } else {
                Err(body)
            }
        })
    };
    let before = running(3);
    let executors = |v: &Value| -> Vec<String> {
        v["groups"][0]["slots"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["executor"].as_str().map(String::from))
            .collect()
    };
    let all = executors(&before);
    assert_eq!(all.len(), 3, "{before}");
    let named = all[0].clone();
    let scale =
        json!({"count": 2, "remove": [named], "drain": {"signal": "TERM", "deadline": "5s"}});
    let (code, _, body) =
        call(&http, "POST", "/v1/jobs/web/groups/g/scale", &[], scale.to_string().as_bytes());
    assert_eq!(code, 200, "{body}");
    conforms(&doc, "/v1/jobs/{id}/groups/{group}/scale", "post", 200, &json_of(&body));
    let after = wait_for(BOUND, "the named executor gone", || {
        let v = running(2);
        let left = executors(&v);
        if left.contains(&named) {
            Err(format!("{v}"))
        } else {
            Ok(left)
        }
    });
    assert_eq!(after, all[1..].to_vec(), "exactly the named one went; the others kept their ids");
    let (code, _, body) = call(
        &http,
        "POST",
        "/v1/jobs/web/groups/g/scale",
        &[],
        br#"{"count": 1, "remove": ["nope"]}"#,
    );
    assert_eq!(code, 400, "{body}");
    w.stop(Duration::from_secs(5));
    m.stop(Duration::from_secs(5));
}

/// `GET /v1/tenants` and `PUT /v1/tenants/{name}` (docs/tenants.md): the
/// answers fit the document, the body reaches the master as a `SetTenant`,
/// and a bad dimension is refused naming the field before it does.
#[test]
fn tenants_over_v1_fit_the_openapi_document() {
    use regent_core::protocol::tenants::{Dims, Held, Tenant, TenantView};
    fn tenants(msg: &Message) -> Message {
        match msg {
            Message::TenantsRequest { request } => Message::TenantsReply {
                epoch: Epoch(3),
                request: *request,
                tenants: vec![TenantView {
                    tenant: Tenant {
                        limit: Dims::parse("cores=64,gpu=2").unwrap(),
                        ..Tenant::new("team-a")
                    },
                    set: true,
                    held: Held { cores: 8, memory_mb: 512, resources: vec![("gpu".into(), 1)] },
                    dominant_share_ppm: 125_000,
                    frameworks: 1,
                }],
            },
            Message::SetTenant { tenant, .. } if tenant.weight == 3 => {
                assert_eq!(tenant.limit.cores, Some(64));
                assert_eq!(tenant.guarantee.memory_mb, Some(65_536));
                Message::RequestAccepted { epoch: Epoch(3), request: 0 }
            }
            other => Message::RequestRefused {
                epoch: Epoch(3),
                request: 0,
                reason: format!("unexpected {}", other.kind()),
            },
        }
    }
    let f = fake(MasterStatus::Alive, None, tenants);
    let addr = f.addr.to_string();
    let doc = openapi_of(&addr);
    let (code, _, answer) = call(&addr, "GET", "/v1/tenants", &[], b"");
    assert_eq!(code, 200, "{answer}");
    let listed = json_of(&answer);
    assert_eq!(listed["tenants"][0]["use"]["gpu"], 1, "{listed}");
    assert_eq!(listed["tenants"][0]["limit"], "cores=64,gpu=2", "{listed}");
    conforms(&doc, "/v1/tenants", "get", 200, &listed);
    let body = br#"{"guarantee": "cores=16,memory=64G", "limit": "cores=64", "weight": 3}"#;
    let (code, _, answer) = call(&addr, "PUT", "/v1/tenants/team-a", &[], body);
    assert_eq!(code, 200, "{answer}");
    conforms(&doc, "/v1/tenants/{name}", "put", 200, &json_of(&answer));
    let before = f.commands.load(Ordering::SeqCst);
    let (code, _, answer) =
        call(&addr, "PUT", "/v1/tenants/team-a", &[], br#"{"limit": "cores=x"}"#);
    assert_eq!(code, 400, "{answer}");
    assert_eq!(json_of(&answer)["field"], "limit", "{answer}");
    conforms(&doc, "/v1/tenants/{name}", "put", 400, &json_of(&answer));
    assert_eq!(f.commands.load(Ordering::SeqCst), before, "nothing reached the master");
    let (code, head, _) = call(&addr, "POST", "/v1/tenants", &[], b"");
    assert_eq!(code, 405);
    assert!(head.contains("GET, HEAD"), "{head}");
}

//! End-to-end: scoped tokens on a master's HTTP face, with real `regent`
//! processes on loopback (docs/design.md#issue-44, docs/security.md):
//!
//! * with a cluster secret, a request without a token is `401` naming how
//!   to get one, on loopback too;
//! * `regent token create` issues tokens; a `read` token scoped to `a-*`
//!   lists only its jobs in `/v1/jobs` and `/api/state` (no workers);
//! * a `read` token without `logs` is `403` on `/api/logs/...` naming
//!   `logs`;
//! * a `submit` token scoped to `a-*` deleting job `b-1` is `403` naming its
//!   scope, and nothing changes;
//! * an expired token is `401` naming its expiry;
//! * `POST /v1/tokens/revoke` (the twin of `regent token revoke`) needs
//!   `operator`, refuses a body naming neither a token nor keys, and once
//!   it answers the revoked token is `401` naming the revocation; one
//!   revoked on the wire protocol is `401` soon after;
//! * the audit log (`--audit-log`), `GET /v1/audit` and `regent audit` name
//!   each change with the token's name, accepted or refused.
//!
//! Until frameworks carry a tenant (the tenants work), every framework is
//! of tenant `default`: the scoping here is by framework pattern.

mod support;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::cluster::{api_state, wait_for, Cluster, MasterSpec};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(30);

/// `METHOD path` with an optional bearer token and a body: (status, body).
fn call(addr: &str, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_secs(5))
        .expect("the server takes connections");
    s.set_read_timeout(Some(BOUND)).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{auth}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, body.to_owned())
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

/// `regent --secret-file S token create ARGS`: the token.
fn token(c: &Cluster, secret: &str, args: &[&str]) -> String {
    let out = c.run(&[&["--secret-file", secret, "token", "create"], args].concat(), BOUND);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "token create: {stderr}");
    assert!(stderr.contains("token id "), "the id on stderr: {stderr}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn job(name: &str) -> String {
    format!(
        r#"{{"name": "{name}", "group": [{{"name": "g", "command": ["sh", "-c", "echo out-{name}; sleep 60"], "cores": 1, "memory_mb": 32}}]}}"#
    )
}

#[test]
fn scoped_tokens_on_http_read_and_act_within_their_scope_and_every_change_is_audited() {
    let c = Cluster::new("tokens-http");
    let secret = c.path("secret");
    std::fs::write(&secret, "a tokens-http test secret of enough bytes\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let secret = secret.to_str().unwrap().to_owned();
    let audit = c.path("audit.log");
    let audit_arg = audit.to_str().unwrap().to_owned();
    let spec = MasterSpec::new(
        "m1",
        &["--recovery", "none", "--secret-file", &secret, "--audit-log", &audit_arg],
    );
    let mut m = c.master(&spec);
    let http = spec.http_addr();
    let mut w = c.worker("w1", &[spec.addr()], 4, 512, &["--secret-file", &secret]);
    // The harness sends the cluster's full token (it knows the secret).
    wait_for(BOUND, "w1 ALIVE", || {
        m.assert_running("the master");
        match api_state(&http) {
            Some(v) if v["workers"][0]["state"] == "ALIVE" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });

    // No token, on loopback: 401 naming how to get one.
    let (code, body) = call(&http, "GET", "/api/state", None, "");
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("regent token create"), "{body}");
    let (code, body) = call(&http, "GET", "/v1/jobs", None, "");
    assert_eq!(code, 401, "{body}");

    let submit_a = token(
        &c,
        &secret,
        &["--capability", "submit,read", "--frameworks", "a-*", "--name", "ci-a"],
    );
    let read_a = token(
        &c,
        &secret,
        &["--capability", "read", "--tenant", "default", "--frameworks", "a-*", "--name", "dash-a"],
    );
    let full = regent_smol::http::bearer_token(
        &regent_core::secret::Secret::new(std::fs::read(&secret).unwrap().trim_ascii().to_vec())
            .unwrap(),
    );

    // a-1 by the scoped token, b-1 by the root.
    let (code, body) = call(&http, "POST", "/v1/jobs", Some(&submit_a), &job("a-1"));
    assert_eq!(code, 201, "{body}");
    let (code, body) = call(&http, "POST", "/v1/jobs", Some(&full), &job("b-1"));
    assert_eq!(code, 201, "{body}");
    // The scoped token may not create b-2 either.
    let (code, body) = call(&http, "POST", "/v1/jobs", Some(&submit_a), &job("b-2"));
    assert_eq!(code, 403, "{body}");

    // The read token of a-* lists only a-1.
    let (code, body) = call(&http, "GET", "/v1/jobs", Some(&read_a), "");
    assert_eq!(code, 200, "{body}");
    let ids: Vec<String> = json(&body)["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job"].as_str().unwrap_or("?").to_owned())
        .collect();
    assert_eq!(ids, ["a-1"], "{body}");
    let (code, body) = call(&http, "GET", "/v1/jobs", Some(&full), "");
    assert_eq!((code, json(&body)["jobs"].as_array().map(Vec::len)), (200, Some(2)), "{body}");
    // Its /api/state: a-1's framework and executors only, no worker.
    let state = wait_for(BOUND, "a-1's executor in the scoped state", || {
        let (code, body) = call(&http, "GET", "/api/state", Some(&read_a), "");
        let v = json(&body);
        match v["executors"].as_array() {
            Some(e) if code == 200 && !e.is_empty() => Ok(v),
            _ => Err(format!("{code}: {body}")),
        }
    });
    let frameworks: Vec<&str> =
        state["frameworks"].as_array().unwrap().iter().filter_map(|f| f["id"].as_str()).collect();
    assert_eq!(frameworks, ["a-1"], "{state}");
    assert!(state["executors"].as_array().unwrap().iter().all(|e| e["framework_id"] == "a-1"));
    assert_eq!(state["workers"].as_array().map(Vec::len), Some(0), "{state}");
    let executor = state["executors"][0]["id"].as_str().unwrap().to_owned();
    let enc: String = executor
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();

    // `read` without `logs`: 403 naming `logs`; the root reads it.
    let logs = format!("/api/logs/{enc}?stream=stdout");
    let (code, body) = call(&http, "GET", &logs, Some(&read_a), "");
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("`logs`"), "{body}");
    let out =
        wait_for(BOUND, "a-1's output", || match call(&http, "GET", &logs, Some(&full), "") {
            (200, b) if b.contains("out-a-1") => Ok(b),
            other => Err(format!("{other:?}")),
        });
    assert!(out.contains("out-a-1"), "{out}");

    // The a-* token deleting b-1: 403 naming its scope; b-1 stays.
    let (code, body) = call(&http, "DELETE", "/v1/jobs/b-1", Some(&submit_a), "");
    assert_eq!(code, 403, "{body}");
    let error = json(&body)["error"].as_str().unwrap_or("").to_owned();
    assert!(error.contains("\"a-*\"") && error.contains("b-1"), "{error}");
    let (code, _) = call(&http, "GET", "/v1/jobs/b-1", Some(&full), "");
    assert_eq!(code, 200, "b-1 is still there");
    // Its own job it may delete.
    let (code, body) = call(&http, "DELETE", "/v1/jobs/a-1", Some(&submit_a), "");
    assert_eq!(code, 200, "{body}");

    // An expired token: 401 naming its expiry.
    let expired =
        token(&c, &secret, &["--capability", "read", "--expires", "1ms", "--name", "old"]);
    std::thread::sleep(Duration::from_millis(20));
    let (code, body) = call(&http, "GET", "/v1/jobs", Some(&expired), "");
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("expired"), "{body}");

    // Revoking over HTTP needs `operator`; once answered, the token is
    // refused at once (this HTTP face drops its copy of the list).
    let ops = token(&c, &secret, &["--capability", "operator", "--name", "ops"]);
    let revoke = format!(r#"{{"token": "{read_a}"}}"#);
    let (code, body) = call(&http, "POST", "/v1/tokens/revoke", Some(&read_a), &revoke);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("`operator`"), "{body}");
    let (code, body) = call(&http, "POST", "/v1/tokens/revoke", Some(&ops), "{}");
    assert_eq!(code, 400, "neither a token nor keys: {body}");
    let (code, body) = call(&http, "GET", "/v1/jobs", Some(&read_a), "");
    assert_eq!(code, 200, "not revoked yet: {body}");
    let (code, body) = call(&http, "POST", "/v1/tokens/revoke", Some(&ops), &revoke);
    assert_eq!(code, 200, "{body}");
    let read_a_id = json(&body)["revoked"].as_str().unwrap_or("").to_owned();
    assert_eq!(read_a_id.len(), 32, "{body}");
    let (code, body) = call(&http, "GET", "/v1/jobs", Some(&read_a), "");
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("was revoked"), "{body}");
    let (code, body) = call(&http, "GET", "/api/state", Some(&read_a), "");
    assert_eq!(code, 401, "{body}");

    // A revocation made on the wire protocol (`regent token revoke`) is
    // refused by the HTTP face too, once its copy of the list is renewed
    // (within a second; docs/security.md).
    let other = token(&c, &secret, &["--capability", "read", "--name", "other"]);
    let (code, body) = call(&http, "GET", "/v1/jobs", Some(&other), "");
    assert_eq!(code, 200, "{body}");
    let out = c.run(
        &["--secret-file", &secret, "token", "revoke", "--masters", &spec.addr(), &other],
        BOUND,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for(BOUND, "the wire's revocation refused over HTTP", || {
        match call(&http, "GET", "/v1/jobs", Some(&other), "") {
            (401, body) if body.contains("was revoked") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });

    // The audit log names each change with the token's name.
    let (code, body) = call(&http, "GET", "/v1/audit", Some(&submit_a), "");
    assert_eq!(code, 403, "reading the audit log needs `operator`: {body}");
    assert!(body.contains("`operator`"), "{body}");
    let (code, body) = call(&http, "GET", "/v1/audit?since=0", Some(&full), "");
    assert_eq!(code, 200, "{body}");
    let records = json(&body)["records"].as_array().cloned().unwrap_or_default();
    let seen: Vec<(String, String, String, String)> = records
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_owned();
            (s("token"), s("action"), s("target"), s("outcome"))
        })
        .collect();
    let want = |t: &str, a: &str, target: &str, o: &str| {
        (t.to_owned(), a.to_owned(), target.to_owned(), o.to_owned())
    };
    for expected in [
        want("ci-a", "submit-job", "a-1", "accepted"),
        want("root", "submit-job", "b-1", "accepted"),
        want("ci-a", "submit-job", "b-2", "refused"),
        want("ci-a", "delete-job", "b-1", "refused"),
        want("ci-a", "delete-job", "a-1", "accepted"),
        want("ops", "revoke-token", &read_a_id, "accepted"),
    ] {
        assert!(seen.contains(&expected), "{expected:?} in {seen:?}");
    }
    assert!(records.iter().all(|r| r["time_ms"].as_u64().is_some_and(|t| t > 1_600_000_000_000)));
    let file = std::fs::read_to_string(&audit).unwrap();
    assert_eq!(file.lines().count(), records.len(), "{file}");
    // `regent audit` reads it back, merged by time.
    let url = format!("http://{http}");
    let out = c.run(&["--secret-file", &secret, "audit", "--http", &url], BOUND);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(printed.lines().count(), records.len(), "{printed}");
    assert!(printed.contains(r#""token":"ci-a""#), "{printed}");

    w.stop(Duration::from_secs(5));
    m.stop(Duration::from_secs(5));
}

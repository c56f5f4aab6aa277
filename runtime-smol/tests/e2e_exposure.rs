//! End-to-end: the exposure rule beyond `--listen` (docs/design.md#issue-11, item 5) and
//! clients that give up (item 6). Real `regent` processes; nothing is ever
//! dialled but loopback: the documentation range address 192.0.2.1 must be
//! refused before any connection is attempted. Outcomes are asserted within
//! generous bounds.
//!
//! * `--zk` with a non-loopback host and no secret: refused, naming the host;
//! * `--http 0.0.0.0:PORT` without a secret: refused;
//! * `--http 0.0.0.0:PORT` with a secret: every request needs
//!   `Authorization: Bearer <token>` (`regent http-token` prints it); a
//!   missing or wrong token gets 401 saying why; the server stays
//!   read-only; an HTTP server bound to loopback with a secret needs a
//!   token too (docs/design.md#issue-44): any local user could read it;
//! * `regent submit` / `regent status` with `--connect-timeout 2` against a
//!   master nobody runs: a non-zero exit naming the master, with a bounded
//!   number of lines.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::cluster::{free_port, loopback, wait_for, Cluster};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(30);

/// A cluster secret file in the cluster's temp dir; returns its path.
fn secret_file(c: &Cluster) -> String {
    let path = c.path("secret");
    std::fs::write(&path, "an exposure test secret of enough bytes\n").unwrap();
    path.to_str().unwrap().to_owned()
}

/// `METHOD path` with an optional `Authorization` value: status and body.
fn request(addr: &str, method: &str, path: &str, auth: Option<&str>) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let auth = auth.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    write!(s, "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n")
        .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.split_whitespace().nth(1)?.parse().ok()?, body.to_owned()))
}

fn refused_fast(c: &Cluster, args: &[&str], names: &str) -> String {
    let started = Instant::now();
    let out = c.run(args, BOUND);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "the master must refuse to start: {stderr}");
    assert!(stderr.contains(names), "the error names {names}: {stderr}");
    assert!(stderr.contains("--insecure"), "the error names the way out: {stderr}");
    // Refused before anything is dialled (a dial to 192.0.2.1 would hang
    // for the ZooKeeper client's connect timeouts).
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "refused only after {:?}",
        started.elapsed()
    );
    stderr
}

/// `regent master` with recovery `none`, a cluster secret and `--http`.
fn secret_master(c: &Cluster, listen: &str, http: &str, secret: &str) -> support::cluster::Proc {
    secret_master_on(c, &[], listen, http, secret)
}

/// [`secret_master`] with global arguments first (`--runtime std`).
fn secret_master_on(
    c: &Cluster,
    global: &[&str],
    listen: &str,
    http: &str,
    secret: &str,
) -> support::cluster::Proc {
    let args = ["master", "--id", "m1", "--listen", listen, "--http", http, "--recovery", "none"];
    let mut args = [global, &args].concat();
    args.extend(["--secret-file", secret]);
    c.spawn("m1", support::cluster::Kind::Master, &args)
}

#[test]
fn a_non_loopback_zookeeper_host_without_a_secret_is_refused_naming_it() {
    let c = Cluster::new("exposure-zk");
    let listen = loopback(free_port());
    let zk = format!("{},192.0.2.1:2181", loopback(free_port()));
    let stderr = refused_fast(
        &c,
        &["master", "--id", "m1", "--listen", &listen, "--recovery", "zookeeper", "--zk", &zk],
        "192.0.2.1:2181",
    );
    assert!(stderr.contains("--zk"), "{stderr}");
}

#[test]
fn a_non_loopback_http_address_without_a_secret_is_refused() {
    let c = Cluster::new("exposure-http");
    let listen = loopback(free_port());
    let http = format!("0.0.0.0:{}", free_port());
    let stderr = refused_fast(
        &c,
        &["master", "--id", "m1", "--listen", &listen, "--http", &http, "--recovery", "none"],
        &http,
    );
    assert!(stderr.contains("--http"), "{stderr}");
}

#[test]
fn http_bound_off_loopback_with_a_secret_requires_the_bearer_token() {
    bearer_token_required(&[]);
}

#[test]
fn a_std_master_requires_the_bearer_token_likewise() {
    bearer_token_required(&["--runtime", "std"]);
}

fn bearer_token_required(global: &[&str]) {
    let c = Cluster::new("exposure-token");
    let secret = secret_file(&c);
    let (port, http_port) = (free_port(), free_port());
    let listen = loopback(port);
    let http = format!("0.0.0.0:{http_port}");
    let mut m = secret_master_on(&c, global, &listen, &http, &secret);
    // Reached over loopback: the token is required because of the bind.
    let via = loopback(http_port);
    let (code, body) = wait_for(BOUND, "the HTTP server answers", || {
        m.assert_running("the master with a non-loopback --http and a secret");
        request(&via, "GET", "/api/state", None).ok_or_else(|| "no answer yet".to_string())
    });
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("Authorization: Bearer") && body.contains("regent http-token"), "{body}");

    let out = c.run(&["http-token", "--secret-file", &secret], BOUND);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64, "hex of HMAC-SHA256: {token}");

    let wrong = format!("Bearer {}", "0".repeat(64));
    let (code, body) = request(&via, "GET", "/api/state", Some(&wrong)).unwrap();
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("wrong bearer token"), "{body}");
    let (code, body) = request(&via, "GET", "/metrics", Some("Basic abc")).unwrap();
    assert_eq!(code, 401, "{body}");
    // The page and the event stream too.
    for path in ["/", "/api/events"] {
        let (code, body) = request(&via, "GET", path, None).unwrap();
        assert_eq!(code, 401, "{path}: {body}");
    }

    let good = format!("Bearer {token}");
    let (code, body) = request(&via, "GET", "/api/state", Some(&good)).unwrap();
    assert_eq!(code, 200, "{body}");
    let state: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(state["id"], "m1", "{state}");
    // Still read-only with the token.
    let (code, body) = request(&via, "POST", "/api/state", Some(&good)).unwrap();
    assert_eq!(code, 405, "{body}");
    m.stop(Duration::from_secs(5));

    // `http-token` without a secret says what it needs.
    let out = c.run(&["http-token"], BOUND);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--secret-file"));
}

#[test]
fn http_bound_to_loopback_with_a_secret_requires_a_token_too() {
    let c = Cluster::new("exposure-loopback");
    let secret = secret_file(&c);
    let (listen, http) = (loopback(free_port()), loopback(free_port()));
    let mut m = secret_master(&c, &listen, &http, &secret);
    let (code, body) = wait_for(BOUND, "the HTTP server answers", || {
        m.assert_running("the master with a loopback --http");
        request(&http, "GET", "/api/state", None).ok_or_else(|| "no answer yet".to_string())
    });
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("regent token create"), "names how to get a token: {body}");
    let out = c.run(&["http-token", "--secret-file", &secret], BOUND);
    let good = format!("Bearer {}", String::from_utf8(out.stdout).unwrap().trim());
    let (code, body) = request(&http, "GET", "/api/state", Some(&good)).unwrap();
    assert_eq!(code, 200, "{body}");
    m.stop(Duration::from_secs(5));
}

/// Runs a client against a master nobody runs with `--connect-timeout 2`:
/// it must exit non-zero within the bound, name the master, and print a
/// bounded number of lines.
fn gives_up(c: &Cluster, args: &[&str], master: &str) {
    let started = Instant::now();
    let out = c.run(args, Duration::from_secs(60));
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "must give up: {stdout}{stderr}");
    assert!(stderr.contains(master), "the error names {master}: {stderr}");
    assert!(started.elapsed() < Duration::from_secs(45), "gave up after {:?}", started.elapsed());
    let lines = stdout.lines().count() + stderr.lines().count();
    assert!(lines <= 12, "a bounded number of lines, got {lines}:\n{stdout}{stderr}");
}

#[test]
fn submit_gives_up_after_the_connect_timeout_naming_the_master() {
    let c = Cluster::new("exposure-submit");
    let master = loopback(free_port());
    gives_up(
        &c,
        &[
            "submit",
            "--masters",
            &master,
            "--connect-timeout",
            "2",
            "--executors",
            "1",
            "--cores",
            "1",
            "--memory",
            "16",
            "--",
            "true",
        ],
        &master,
    );
}

#[test]
fn status_and_kill_give_up_after_the_connect_timeout_naming_the_master() {
    let c = Cluster::new("exposure-status");
    let master = loopback(free_port());
    gives_up(&c, &["status", "--masters", &master, "--connect-timeout", "2"], &master);
    gives_up(&c, &["kill", "--masters", &master, "--connect-timeout", "2", "fw-1"], &master);
}

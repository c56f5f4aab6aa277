//! End-to-end: tokens on the wire protocol (docs/security.md,
//! docs/design.md#issue-44) against real processes on a cluster with a
//! secret: a worker dials with a `worker` token and registers only ids with
//! its prefix; a framework token acts only on the frameworks of its
//! pattern; an operator command needs `operator`; an expired token and a
//! revoked one are refused (the revoked one after use: its worker's
//! connection is closed and its registration refused); the revocation
//! survives a master restart; a `read` token of tenant A reads only A's
//! frameworks and tenant over the wire (`regent status`, `regent job
//! status`, `regent tenant list`: no workers, nothing of `default`'s). The tokens are minted with
//! `regent_core::token::Token::issue` (`regent token create` is the HTTP
//! side's). Loopback only, temp dirs, generous bounds.

mod support;

use regent_core::secret::Secret;
use regent_core::token::{Capability, Claims, Token, TokenId};
use serde_json::Value;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use support::cli::{ok, refused, run};
use support::cluster::{alive_with_workers, wait_for, Cluster, MasterSpec, Proc};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

const SECRET: &str = "tokens-wire-test-secret-0123456789";

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn claims(id: u8, name: &str, caps: &[Capability]) -> Claims {
    Claims {
        id: TokenId([id; 16]),
        name: name.into(),
        key_id: 1,
        capabilities: caps.iter().copied().collect(),
        tenant: None,
        frameworks: None,
        workers: None,
        issued_ms: now_ms(),
        expires_ms: None,
    }
}

/// Mints `claims` with the cluster's secret into a token file; returns its
/// path and the token.
fn token_file(c: &Cluster, file: &str, claims: &Claims) -> (String, String) {
    let secret = Secret::new(SECRET.as_bytes().to_vec()).unwrap();
    let text = Token::issue(&secret, claims).unwrap();
    let path = c.path(file);
    std::fs::write(&path, format!("{text}\n")).unwrap();
    (path.to_str().unwrap().to_owned(), text)
}

/// The leader's view, read as the root.
fn state(c: &Cluster, secret: &str, m: &str) -> Result<Value, String> {
    let (code, stdout, stderr) =
        run(c, &["--secret-file", secret, "status", "--masters", m, "--json"]);
    if code != Some(0) {
        return Err(stderr);
    }
    serde_json::from_str(&stdout).map_err(|e| format!("{e}: {stdout}"))
}

fn frameworks(state: &Value) -> Vec<String> {
    let mut v: Vec<String> = state["frameworks"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f["id"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Waits until `p`'s log says `text`.
fn wait_log(p: &Proc, text: &str) {
    wait_for(BOUND, &format!("{} to log {text:?}", p.name), || {
        let log = p.stderr();
        if log.contains(text) {
            Ok(())
        } else {
            Err(support::cluster::tail(&log, 5))
        }
    })
}

/// A job file named `name` of one slot no worker can hold (it waits).
fn job_file(c: &Cluster, name: &str) -> String {
    tenant_job_file(c, name, None)
}

/// [`job_file`] of `tenant` (`None`: the file names none).
fn tenant_job_file(c: &Cluster, name: &str, tenant: Option<&str>) -> String {
    let path = c.path(&format!("{name}.toml"));
    let tenant = tenant.map(|t| format!("tenant = \"{t}\"\n")).unwrap_or_default();
    let text = format!(
        "name = \"{name}\"\n{tenant}\n[[group]]\nname = \"g\"\ncount = 1\ncommand = [\"true\"]\ncores = 64\n"
    );
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn tokens_are_authorized_on_the_wire_and_a_revoked_one_is_cut_off() {
    let c = Cluster::new("tokens-wire");
    let secret_path = c.path("secret");
    std::fs::write(&secret_path, format!("{SECRET}\n")).unwrap();
    let secret = secret_path.to_str().unwrap().to_owned();
    let store = c.path("store");
    let spec = MasterSpec::new(
        "m1",
        &["--recovery", "filesystem", "--store", store.to_str().unwrap(), "--secret-file", &secret],
    );
    let masters = vec![spec.addr()];
    let m = spec.addr();
    let mut master = c.master(&spec);

    // A `worker` token for ids starting `rack1-`: rack1-w1 registers.
    let rack1 =
        Claims { workers: Some("rack1-".into()), ..claims(1, "rack1", &[Capability::Worker]) };
    let (rack1_file, _) = token_file(&c, "rack1.token", &rack1);
    let w1 = c.worker("rack1-w1", &masters, 2, 256, &["--token-file", &rack1_file]);
    wait_for(BOUND, "rack1-w1 ALIVE", || {
        alive_with_workers(&state(&c, &secret, &m)?, &["rack1-w1"])
    });
    // The same token is refused as w2, naming the prefix.
    let mut w2 = c.worker("w2", &masters, 2, 256, &["--token-file", &rack1_file]);
    wait_log(&w2, "may only register workers whose id starts with \"rack1-\", not \"w2\"");
    w2.stop(Duration::from_secs(10));
    assert!(alive_with_workers(&state(&c, &secret, &m).unwrap(), &["rack1-w1"]).is_ok());

    // Two jobs created by the root; a framework token for `web-*` kills
    // only the one in its pattern.
    let root = ["--secret-file", secret.as_str()];
    for id in ["web-1", "db-1"] {
        let file = job_file(&c, id);
        let mut args = root.to_vec();
        args.extend(["job", "submit", "--masters", &m, "--id", id, &file]);
        ok(&c, &args);
    }
    let web =
        Claims { frameworks: Some("web-*".into()), ..claims(2, "web", &[Capability::Submit]) };
    let (web_file, _) = token_file(&c, "web.token", &web);
    let err = refused(&c, &["--token-file", &web_file, "kill", "--masters", &m, "db-1"]);
    assert!(
        err.contains("token \"web\" may not act on framework db-1")
            && err.contains("scoped to frameworks \"web-*\""),
        "{err}"
    );
    ok(&c, &["--token-file", &web_file, "kill", "--masters", &m, "web-1"]);
    wait_for(BOUND, "web-1 gone, db-1 kept", || {
        let fws = frameworks(&state(&c, &secret, &m)?);
        (fws == ["db-1"]).then_some(()).ok_or(format!("{fws:?}"))
    });

    // Tenant-scoped reads over the wire: a job of tenant team-a beside
    // db-1 (`default`'s); team-a's read token reads only its own.
    let file = tenant_job_file(&c, "a-1", Some("team-a"));
    ok(&c, &["--secret-file", &secret, "job", "submit", "--masters", &m, "--id", "a-1", &file]);
    assert_eq!(frameworks(&state(&c, &secret, &m).unwrap()), ["a-1", "db-1"]);
    let reader =
        Claims { tenant: Some("team-a".into()), ..claims(5, "read-a", &[Capability::Read]) };
    let (reader_file, _) = token_file(&c, "read-a.token", &reader);
    let as_reader = |args: &[&str]| -> Value {
        let mut all = vec!["--token-file", reader_file.as_str()];
        all.extend(args);
        all.extend(["--masters", m.as_str(), "--json"]);
        let out = ok(&c, &all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    };
    let seen = as_reader(&["status"]);
    assert_eq!(frameworks(&seen), ["a-1"], "{seen}");
    assert_eq!(seen["workers"].as_array().map(Vec::len), Some(0), "{seen}");
    let jobs = as_reader(&["job", "status"]);
    let ids: Vec<&str> =
        jobs["jobs"].as_array().unwrap().iter().filter_map(|j| j["job"].as_str()).collect();
    assert_eq!(ids, ["a-1"], "{jobs}");
    let tenants = as_reader(&["tenant", "list"]);
    let names: Vec<&str> =
        tenants.as_array().unwrap().iter().filter_map(|t| t["tenant"]["name"].as_str()).collect();
    assert_eq!(names, ["team-a"], "{tenants}");

    // An operator command needs `operator`.
    let err = refused(&c, &["--token-file", &web_file, "cordon", "--masters", &m, "rack1-w1"]);
    assert!(
        err.contains("token \"web\" lacks the `operator` capability needed to cordon a worker"),
        "{err}"
    );
    let ops = claims(3, "ops", &[Capability::Operator, Capability::Read]);
    let (ops_file, _) = token_file(&c, "ops.token", &ops);
    ok(&c, &["--token-file", &ops_file, "cordon", "--masters", &m, "rack1-w1"]);
    ok(&c, &["--token-file", &ops_file, "uncordon", "--masters", &m, "rack1-w1"]);

    // An expired token is refused, naming its expiry.
    let old =
        Claims { expires_ms: Some(now_ms() - 60_000), ..claims(4, "old", &[Capability::Operator]) };
    let (old_file, _) = token_file(&c, "old.token", &old);
    let err = refused(&c, &["--token-file", &old_file, "cordon", "--masters", &m, "rack1-w1"]);
    assert!(err.contains("token \"old\" expired at"), "{err}");

    // Revoking rack1's token after use: its worker's connection is closed
    // and its registration refused from then on, naming the revocation.
    let out = ok(
        &c,
        &["--token-file", &ops_file, "token", "revoke", "--masters", &m, &rack1.id.to_string()],
    );
    assert!(out.contains(&format!("token {} revoked", rack1.id)), "{out}");
    let revoked = format!("token \"rack1\" ({}) was revoked", rack1.id);
    wait_log(&w1, &revoked);
    // The list is durable: after a restart of the master the worker, still
    // retrying, is still refused.
    let before = w1.stderr().matches(&revoked).count();
    master.kill9();
    let mut master = c.master(&spec);
    wait_for(BOUND, "rack1-w1 refused again by the restarted master", || {
        let n = w1.stderr().matches(&revoked).count();
        (n > before).then_some(()).ok_or(format!("{n} refusals logged"))
    });
    ok(&c, &["--token-file", &ops_file, "status", "--masters", &m]);
    let err = refused(&c, &["--token-file", &ops_file, "token", "revoke", "--masters", &m, "zz"]);
    assert!(err.contains("is not 32 hex digits"), "{err}");
    master.stop(Duration::from_secs(10));
}

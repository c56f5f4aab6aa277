//! End-to-end: SIGHUP reloads a master's TLS material (docs/design.md#issue-24) without
//! dropping a connection. A master's certificate and CA files are replaced
//! by another CA's and the master is sent SIGHUP: a client of the old CA is
//! then refused and one of the new CA served, while the worker connected
//! under the old material stays connected and registered. A reload of files
//! that do not load keeps the material in force and says why; SIGHUP no
//! longer shuts a daemon down. HTTPS presents the new certificate too.
//! Real `regent` processes on loopback; bounded waits, never timings.

mod support;

use regent_std::tls::{DevCa, Validity};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::cluster::{alive_with_workers, https_get, wait_for, wait_until, Cluster, MasterSpec};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// Writes `ca`'s certificate and one it issues for 127.0.0.1 into `dir`
/// (`cert.pem`, `key.pem`, `ca.pem`).
fn write_material(ca: &DevCa, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let node = ca.issue(&["127.0.0.1".to_string()], Validity::Open).unwrap();
    std::fs::write(dir.join("cert.pem"), node.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), node.key_pem).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.cert_pem()).unwrap();
}

/// The TLS flags naming the files of `dir`.
fn flags(dir: &Path) -> Vec<String> {
    let f = |n: &str| dir.join(n).to_str().unwrap().to_owned();
    ["--tls-cert", &f("cert.pem"), "--tls-key", &f("key.pem"), "--tls-ca", &f("ca.pem")]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// `regent status` with the material of `dir`: (succeeded, stderr).
fn status(c: &Cluster, master: &str, dir: &Path) -> (bool, String) {
    let tls = flags(dir);
    let mut args = vec!["status", "--masters", master, "--connect-timeout", "30"];
    args.extend(tls.iter().map(String::as_str));
    let out = c.run(&args, BOUND);
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn sighup(pid: u32) {
    let ok = std::process::Command::new("kill").args(["-HUP", &pid.to_string()]).status();
    assert!(ok.unwrap().success(), "kill -HUP {pid}");
}

#[test]
fn sighup_reloads_the_tls_material_and_keeps_open_connections() {
    let c = Cluster::new("tls-reload");
    let (old_ca, new_ca) = (DevCa::new("regent").unwrap(), DevCa::new("regent").unwrap());
    let (live, old, new): (PathBuf, PathBuf, PathBuf) =
        (c.path("live"), c.path("old"), c.path("new"));
    write_material(&old_ca, &live);
    write_material(&old_ca, &old);
    write_material(&new_ca, &new);

    let live_flags = flags(&live);
    let mut args = vec!["--recovery", "none"];
    args.extend(live_flags.iter().map(String::as_str));
    let spec = MasterSpec::new("m1", &args);
    let masters = vec![spec.addr()];
    let mut master = c.master(&spec);
    let old_flags = flags(&old);
    let old_args: Vec<&str> = old_flags.iter().map(String::as_str).collect();
    let mut worker = c.worker("w1", &masters, 1, 128, &old_args);
    // `/api/state` over HTTPS, trusting the CA whose certificate the
    // master presents (HTTPS reloads with the rest).
    let state = |ca: &DevCa| match https_get(&spec.http_addr(), "/api/state", &ca.cert_pem()) {
        Ok((200, body)) => serde_json::from_str(&body).map_err(|e| e.to_string()),
        other => Err(format!("the master does not answer: {other:?}")),
    };
    wait_for(BOUND, "the TLS worker ALIVE", || alive_with_workers(&state(&old_ca)?, &["w1"]));
    let (ok, err) = status(&c, &spec.addr(), &old);
    assert!(ok, "a client of the old CA before the reload: {err}");

    // The new CA's material replaces the old in the files the master reads.
    write_material(&new_ca, &live);
    sighup(master.pid());
    wait_until(BOUND, "the master reloads its TLS material", || {
        master.stderr().contains("SIGHUP: TLS material reloaded")
    });
    let started = Instant::now();
    let (ok, err) = status(&c, &spec.addr(), &old);
    assert!(!ok, "a client of the old CA is refused after the reload");
    assert!(err.contains("not signed by this node's --tls-ca"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "the refusal is not retried");
    let (ok, err) = status(&c, &spec.addr(), &new);
    assert!(ok, "a client of the new CA after the reload: {err}");

    // The worker's connection, made under the old material, was not
    // dropped: it is still registered and never connected again (a
    // reconnection would now be refused: its CA is the old one).
    alive_with_workers(&state(&new_ca).unwrap(), &["w1"]).unwrap();
    worker.assert_running("after the master's reload");
    let log = worker.stderr();
    assert_eq!(log.matches("connected to master").count(), 1, "one connection only:\n{log}");
    assert!(!log.contains("TLS:"), "no TLS failure on the worker:\n{log}");

    // Files that do not load: the material in force stays, the log says why.
    std::fs::write(live.join("cert.pem"), "not a certificate").unwrap();
    sighup(master.pid());
    wait_until(BOUND, "the master refuses the broken material", || {
        master.stderr().contains("SIGHUP: TLS material not reloaded (the old stays)")
    });
    let (ok, err) = status(&c, &spec.addr(), &new);
    assert!(ok, "the new CA's material is still in force: {err}");
    master.assert_running("after two SIGHUPs");
}

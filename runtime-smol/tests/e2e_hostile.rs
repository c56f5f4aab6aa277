//! End-to-end: hostile peers. Garbage bytes, an oversized length prefix, a
//! `Hello` of another cluster and a handshake with the wrong secret each get
//! their connection closed, with a master log line naming the peer and the
//! reason, while registered workers stay ALIVE; a master asked to listen on
//! a non-loopback address without a secret refuses to start. Real `regent`
//! processes on loopback; outcomes are asserted within generous bounds.

mod support;

use regent_core::auth::{FrameReader, Handshake, Step, HANDSHAKE_MAX_BODY};
use regent_core::codec;
use regent_core::protocol::{Hello, Message, Role, PROTOCOL_VERSION};
use regent_core::secret::Secret;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use support::cluster::{
    alive_with_workers, api_state, free_port, wait_for, Cluster, MasterSpec, Proc,
};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(30);

/// Reads until the peer closes (EOF or reset); panics if it stays open for
/// `BOUND`.
fn expect_closed(s: &mut TcpStream, what: &str) {
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let deadline = Instant::now() + BOUND;
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return, // reset: closed too
        }
        assert!(Instant::now() < deadline, "the master kept the connection of {what} open");
    }
}

/// Sends `bytes` on a fresh connection and waits for the master to close
/// it; returns the local address (the peer the master names).
fn send_and_expect_closed(master: &str, bytes: &[u8], what: &str) -> String {
    let mut s = TcpStream::connect(master).expect("connect to the master");
    let local = s.local_addr().unwrap().to_string();
    // The master may close before everything is written: not an error.
    let _ = s.write_all(bytes);
    expect_closed(&mut s, what);
    local
}

/// Waits for a `connection refused` line naming `peer` in the master's
/// stderr and returns it.
fn refusal_line(master: &Proc, peer: &str) -> String {
    wait_for(BOUND, &format!("a refusal naming {peer} in the master's log"), || {
        let log = master.stderr();
        log.lines()
            .find(|l| l.contains("connection refused") && l.contains(&format!("peer={peer} ")))
            .map(str::to_owned)
            .ok_or_else(|| format!("log tail: {}", support::cluster::tail(&log, 5)))
    })
}

#[test]
fn hostile_bytes_and_wrong_cluster_are_refused_while_workers_stay_alive() {
    let c = Cluster::new("hostile");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let masters = vec![spec.addr()];
    let master = c.master(&spec);
    let mut worker = c.worker("w1", &masters, 1, 128, &[]);
    let state =
        || api_state(&spec.http_addr()).ok_or_else(|| "the master does not answer".to_owned());
    wait_for(BOUND, "the worker ALIVE", || alive_with_workers(&state()?, &["w1"]));

    // A length prefix announcing 16 bytes, then 16 bytes that are no
    // message.
    let mut garbage = vec![0, 0, 0, 16];
    garbage.extend_from_slice(&[0xff; 16]);
    let peer = send_and_expect_closed(&spec.addr(), &garbage, "garbage");
    let line = refusal_line(&master, &peer);
    assert!(line.contains("malformed"), "the reason says malformed: {line}");

    // A length prefix of 4 GiB - 1, then a few bytes.
    let peer =
        send_and_expect_closed(&spec.addr(), &[0xff, 0xff, 0xff, 0xff, 1, 2, 3], "oversized");
    let line = refusal_line(&master, &peer);
    assert!(line.contains("exceeds the maximum"), "the reason names the size: {line}");

    // A well-formed Hello of another cluster.
    let hello = codec::encode(&Message::Hello(Hello {
        version: PROTOCOL_VERSION,
        cluster: "not-this-cluster".to_owned(),
        role: Role::Worker,
        node: "intruder".to_owned(),
    }));
    let peer = send_and_expect_closed(&spec.addr(), &hello, "a Hello of another cluster");
    let line = refusal_line(&master, &peer);
    assert!(line.contains("not-this-cluster"), "the reason names the cluster: {line}");

    // The registered worker was never disturbed.
    let v = state().unwrap();
    alive_with_workers(&v, &["w1"]).expect("the worker stays ALIVE");
    assert!(v["rejected_connections"].as_u64().unwrap_or(0) >= 3, "three refusals counted: {v}");
    worker.assert_running("after the hostile connections");
}

/// Plays the client side of the handshake with `secret`.
fn handshake_with(master: &str, secret: &Secret) -> String {
    let mut s = TcpStream::connect(master).expect("connect to the master");
    let local = s.local_addr().unwrap().to_string();
    s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let (mut hs, first) = Handshake::client(secret, [7u8; 32]);
    s.write_all(&first).unwrap();
    let mut reader = FrameReader::new(HANDSHAKE_MAX_BODY);
    let deadline = Instant::now() + BOUND;
    let mut buf = [0u8; 4096];
    loop {
        assert!(
            Instant::now() < deadline,
            "the handshake with a wrong secret neither failed nor closed"
        );
        match s.read(&mut buf) {
            Ok(0) => return local,
            Ok(n) => reader.feed(&buf[..n]).expect("handshake frames"),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return local,
        }
        while let Some(body) = reader.next_body().expect("handshake frames") {
            match hs.receive(body) {
                Step::Send(frame) => {
                    let _ = s.write_all(&frame);
                }
                Step::Established { .. } => {
                    panic!("a handshake with the wrong secret was established")
                }
                Step::Failed { frame, .. } => {
                    if let Some(frame) = frame {
                        let _ = s.write_all(&frame);
                    }
                    expect_closed(&mut s, "a wrong secret");
                    return local;
                }
            }
        }
    }
}

#[test]
fn wrong_secret_is_refused_while_workers_stay_alive() {
    let c = Cluster::new("hostile-secret");
    let good = c.path("secret");
    std::fs::write(&good, "e2e-good-secret-0123456789abcdef\n").unwrap();
    let good_arg = good.to_str().unwrap();
    let spec = MasterSpec::new("m1", &["--recovery", "none", "--secret-file", good_arg]);
    let masters = vec![spec.addr()];
    let master = c.master(&spec);
    let mut worker = c.worker("w1", &masters, 1, 128, &["--secret-file", good_arg]);
    let state =
        || api_state(&spec.http_addr()).ok_or_else(|| "the master does not answer".to_owned());
    wait_for(BOUND, "the worker (with the secret) ALIVE", || {
        alive_with_workers(&state()?, &["w1"])
    });

    let wrong = Secret::new(b"e2e-wrong-secret-0123456789abcde".to_vec()).unwrap();
    let peer = handshake_with(&spec.addr(), &wrong);
    let line = refusal_line(&master, &peer);
    assert!(line.contains("secret"), "the reason names the secret: {line}");

    // The command line with the wrong secret fails too.
    let bad = c.path("wrong-secret");
    std::fs::write(&bad, "e2e-wrong-secret-0123456789abcde\n").unwrap();
    let out = c
        .run(&["status", "--masters", &spec.addr(), "--secret-file", bad.to_str().unwrap()], BOUND);
    assert!(!out.status.success(), "status with the wrong secret fails");

    let v = state().unwrap();
    alive_with_workers(&v, &["w1"]).expect("the worker stays ALIVE");
    assert!(v["rejected_connections"].as_u64().unwrap_or(0) >= 2, "both refusals counted: {v}");
    worker.assert_running("after the wrong-secret connections");
}

#[test]
fn non_loopback_listen_without_secret_exits_nonzero() {
    let c = Cluster::new("exposure");
    let listen = format!("0.0.0.0:{}", free_port());
    let out = c.run(&["master", "--id", "m1", "--listen", &listen, "--recovery", "none"], BOUND);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the master must refuse to start: {stderr}");
    assert!(
        stderr.contains("loopback") && stderr.contains("--insecure"),
        "the message names loopback and --insecure: {stderr}"
    );
}

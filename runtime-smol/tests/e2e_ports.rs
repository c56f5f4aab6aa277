//! End-to-end: named ports. A worker offers `--ports`; a job's server group
//! names a port, gets it as `REGENT_PORT_HTTP` and listens on it; `regent
//! run` prints where it listens (what the framework's subscriber learned
//! from the leader), and a client group reaches the server at that
//! address. A worker killed with kill -9 and started again re-adopts its
//! executor with the same port, reported to the leader again, and never
//! hands that port to another executor. Real `regent` processes and
//! Python servers on loopback; outcomes within generous bounds.

mod support;

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, free_port, wait_for, Cluster, Kind, MasterSpec, Proc,
};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// A server answering every connection on `127.0.0.1:$REGENT_PORT_HTTP`
/// with `hello from <its executor id>` (a TOML literal string).
const SERVER: &str = r#"'''
import os, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(os.environ["REGENT_PORT_HTTP"])))
s.listen(16)
while True:
    c, _ = s.accept()
    c.sendall(("hello from " + os.environ["REGENT_EXECUTOR_ID"] + "\n").encode())
    c.close()
'''"#;

/// A client that waits for `$OUT/server-addr` (`HOST:PORT` and a newline),
/// reads what the server there says and writes it to `$OUT/client-got`.
const CLIENT: &str = r#"'''
import os, socket, time
p = os.path.join(os.environ["OUT"], "server-addr")
while not (os.path.exists(p) and open(p).read().endswith("\n")):
    time.sleep(0.1)
host, port = open(p).read().strip().rsplit(":", 1)
c = socket.create_connection((host, int(port)), timeout=10)
data = b""
while True:
    b = c.recv(4096)
    if not b:
        break
    data += b
open(os.path.join(os.environ["OUT"], "client-got.tmp"), "wb").write(data)
os.rename(os.path.join(os.environ["OUT"], "client-got.tmp"), os.path.join(os.environ["OUT"], "client-got"))
'''"#;

/// A master `m1` with its HTTP API and a worker `w1` offering `ports`.
fn master_and_worker(c: &Cluster, ports: &str) -> (MasterSpec, Proc, Proc) {
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let master = c.master(&spec);
    let worker = c.worker("w1", &[spec.addr()], 4, 1024, &["--ports", ports]);
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1"])
    });
    (spec, master, worker)
}

/// What a server at `addr` says.
fn ask(addr: &str) -> Result<String, String> {
    let mut s =
        TcpStream::connect_timeout(&addr.parse().map_err(|e| format!("{addr}: {e}"))?, BOUND)
            .map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).map_err(|e| format!("{addr}: {e}"))?;
    Ok(got)
}

/// The `http=HOST:PORT` address in the first line of `out` naming one.
fn printed_address(out: &str) -> Result<String, String> {
    out.lines()
        .flat_map(|l| l.split_whitespace())
        .find_map(|w| w.strip_prefix("http="))
        .map(str::to_owned)
        .ok_or_else(|| format!("no http= address printed yet:\n{out}"))
}

/// The named ports of `executor` in the leader's `/api/state`.
fn api_ports(state: &serde_json::Value, executor: &str) -> Option<serde_json::Value> {
    state["executors"]
        .as_array()?
        .iter()
        .find(|e| e["id"] == executor)
        .map(|e| e["addresses"].clone())
}

#[test]
fn a_client_group_reaches_a_server_group_at_the_address_run_printed() {
    let c = Cluster::new("ports-job");
    let (p1, p2) = (free_port(), free_port());
    let (spec, _master, _worker) = master_and_worker(&c, &format!("{p1},{p2}"));
    let out = c.path("out");
    std::fs::create_dir(&out).unwrap();
    let job = c.path("job.toml");
    std::fs::write(
        &job,
        format!(
            r#"name = "served"

[[group]]
name = "server"
ports = ["http"]
command = ["python3", "-c", {SERVER}]

[[group]]
name = "client"
command = ["python3", "-c", {CLIENT}]
env = {{ OUT = "{}" }}
"#,
            out.display()
        ),
    )
    .unwrap();
    let mut run = c.spawn(
        "run",
        Kind::Submit,
        &["run", "--masters", &spec.addr(), "--connect-timeout", "30", job.to_str().unwrap()],
    );
    // The run prints where the server listens, learned from the leader.
    let at =
        wait_for(BOUND, "run to print the server's address", || printed_address(&run.stdout()));
    let port: u16 =
        at.strip_prefix("127.0.0.1:").expect("the worker's loopback host").parse().unwrap();
    assert!(port == p1.min(p2), "the lowest offered port: {at} of {p1},{p2}");
    let said = wait_for(BOUND, "the server to answer", || ask(&at));
    assert!(said.starts_with("hello from "), "{said}");
    // The client group reaches it through the address the test passes on.
    std::fs::write(out.join("server-addr"), format!("{at}\n")).unwrap();
    let got = wait_for(BOUND, "the client to write what it got", || {
        std::fs::read_to_string(out.join("client-got")).map_err(|e| e.to_string())
    });
    assert_eq!(got, said, "the client reached the same server");
    // The leader shows it too.
    let state = api_state(&spec.http_addr()).expect("the master answers");
    let server_id = said.trim().strip_prefix("hello from ").unwrap();
    assert_eq!(api_ports(&state, server_id), Some(serde_json::json!({ "http": at })), "{state}");
    let w1 = &state["workers"][0];
    assert_eq!((w1["ports"].as_u64(), w1["ports_used"].as_u64()), (Some(2), Some(1)), "{w1}");
    assert_eq!(w1["host"], "127.0.0.1");
    run.assert_running("a service-like server group keeps the run following");
    run.sigterm();
    let _ = run.wait_exit(BOUND);
}

#[test]
fn a_worker_restarted_after_kill_9_keeps_its_adopted_executors_port_and_gives_another() {
    let c = Cluster::new("ports-adopt");
    let (p1, p2) = (free_port(), free_port());
    let ports = format!("{p1},{p2}");
    let (spec, _master, mut worker) = master_and_worker(&c, &ports);
    let masters = [spec.addr()];
    let server = ["python3", "-c", SERVER.trim_matches('\'')];
    let opts = ["--executors", "1", "--cores", "1", "--memory", "16", "--port", "http"];
    let mut first =
        c.submit("first", &masters, &[&["--name", "first"][..], &opts[..]].concat(), &server);
    let at = wait_for(BOUND, "the first server's address", || printed_address(&first.stdout()));
    let said = wait_for(BOUND, "the first server to answer", || ask(&at));
    let id = said.trim().strip_prefix("hello from ").unwrap().to_owned();

    // The worker dies; its executor runs on and is re-adopted with its port.
    worker.kill9();
    let _worker = c.worker("w1", &masters, 4, 1024, &["--ports", &ports]);
    wait_for(BOUND, "the restarted worker to report the adopted executor's port", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1"])?;
        match api_ports(&state, &id) {
            Some(p) if p == serde_json::json!({ "http": at }) => Ok(()),
            other => Err(format!("ports {other:?}: {state}")),
        }
    });
    assert_eq!(ask(&at).unwrap(), said, "the same process still serves");
    // A second server on the same worker gets the other port, not the
    // adopted executor's.
    let mut second =
        c.submit("second", &masters, &[&["--name", "second"][..], &opts[..]].concat(), &server);
    let at2 = wait_for(BOUND, "the second server's address", || printed_address(&second.stdout()));
    assert_ne!(at2, at, "never the port a live executor holds");
    let said2 = wait_for(BOUND, "the second server to answer", || ask(&at2));
    assert_ne!(said2, said);
    first.sigterm();
    second.sigterm();
    let _ = first.wait_exit(BOUND);
    let _ = second.wait_exit(BOUND);
}

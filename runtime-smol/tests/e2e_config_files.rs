//! End-to-end: the daemons start from the example configuration files in
//! `deploy/` (`master.toml`, `worker.toml`), as the systemd units start
//! them (`regent master --config FILE`). A real ZooKeeper server, three
//! masters and a worker on loopback; only what must differ on a test
//! machine (ids, ports, directories, the ZooKeeper address and root, the
//! secret file) is given, through `REGENT_*` variables over the files: the
//! cluster name, the recovery mode, the session timeout, the memory offered
//! come from the files. One flag over both: the worker's `--cores` beats its
//! `REGENT_CORES`, which beats the file. And a file with an unknown key
//! stops `regent master` with the file, the line and the key named. Bounds
//! are generous, never timings. Run one at a time (`--test-threads=1`).

mod support;

use std::path::PathBuf;
use std::time::Duration;
use support::cluster::{sole_alive, unique, wait_for, Cluster, Kind, MasterSpec, Proc};
use support::zk_server::ZkServer;

/// Generous bound for anything to happen (a JVM start, an election).
const BOUND: Duration = Duration::from_secs(60);

/// A file of `deploy/`.
fn deploy(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(name);
    assert!(path.is_file(), "{} is missing", path.display());
    path.to_str().expect("a UTF-8 path").to_owned()
}

/// `regent status --json` with `env`, `None` until it answers.
fn status_json(c: &Cluster, masters: &str, env: &[(&str, &str)]) -> Option<serde_json::Value> {
    let args = ["status", "--masters", masters, "--json", "--connect-timeout", "5"];
    let mut p = c.spawn_env("status", Kind::Other, &args, env);
    if !p.wait_exit(Duration::from_secs(30)).success() {
        return None;
    }
    serde_json::from_str(&p.stdout()).ok()
}

#[test]
fn daemons_start_from_the_example_configuration_files() {
    let zk = ZkServer::start();
    let c = Cluster::new("config-files");
    let root = format!("/{}", unique("cfg"));
    let secret = c.path("secret");
    std::fs::write(&secret, "a cluster secret for the config-file test\n").unwrap();
    let secret = secret.to_str().unwrap().to_owned();
    let zk_addr = zk.addr();
    let master_toml = deploy("master.toml");

    let specs: Vec<MasterSpec> =
        ["m1", "m2", "m3"].iter().map(|id| MasterSpec::new(id, &[])).collect();
    let _masters: Vec<Proc> = specs
        .iter()
        .map(|s| {
            let (listen, http) = (s.addr(), s.http_addr());
            let env = [
                ("REGENT_ID", s.id.as_str()),
                ("REGENT_LISTEN", listen.as_str()),
                ("REGENT_ADVERTISE", listen.as_str()),
                ("REGENT_HTTP", http.as_str()),
                ("REGENT_ZK", zk_addr.as_str()),
                ("REGENT_ZK_ROOT", root.as_str()),
                ("REGENT_SECRET_FILE", secret.as_str()),
            ];
            c.spawn_env(&s.id, Kind::Master, &["master", "--config", &master_toml], &env)
        })
        .collect();

    let masters: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
    let masters = masters.join(",");
    let callback = support::cluster::loopback(support::cluster::free_port());
    let work = c.work_dir("w1");
    let work = work.to_str().unwrap();
    let worker_env = [
        ("REGENT_ID", "w1"),
        ("REGENT_MASTERS", masters.as_str()),
        ("REGENT_LISTEN", callback.as_str()),
        ("REGENT_ADVERTISE", callback.as_str()),
        ("REGENT_WORK_DIR", work),
        ("REGENT_SECRET_FILE", secret.as_str()),
        // The flag below wins over this, which would win over the file.
        ("REGENT_CORES", "5"),
    ];
    let mut worker = c.spawn_env(
        "w1",
        Kind::Worker,
        &["worker", "--config", &deploy("worker.toml"), "--cores", "3"],
        &worker_env,
    );

    // One leader, the worker registered with it.
    let running = [true; 3];
    let (leader, view) =
        wait_for(BOUND, "a leader with w1 ALIVE", || sole_alive(&specs, &running, &["w1"]));
    let w = &view["workers"][0];
    assert_eq!(w["cores"], 3, "flag over environment over file: {w}");
    assert_eq!(w["memory_mb"], 65536, "the file's memory (no flag, no variable): {w}");
    worker.assert_running("after registering");

    // The operator's view, with the file's cluster name and the secret
    // given to the client through the environment too.
    let client_env = [("REGENT_CLUSTER", "prod"), ("REGENT_SECRET_FILE", secret.as_str())];
    let status = wait_for(BOUND, "regent status", || {
        status_json(&c, &masters, &client_env).ok_or_else(|| "no answer".to_owned())
    });
    assert_eq!(status["status"], "ALIVE", "{status}");
    assert_eq!(status["id"], specs[leader].id.as_str(), "{status}");
    // Without the cluster name of the file, the masters refuse the client.
    let refused = status_json(&c, &masters, &[("REGENT_SECRET_FILE", secret.as_str())]);
    assert!(refused.is_none(), "a client of cluster `regent` was answered: {refused:?}");
}

#[test]
fn an_unknown_key_stops_the_master_naming_file_line_and_key() {
    let c = Cluster::new("config-unknown-key");
    let mut text = std::fs::read_to_string(deploy("master.toml")).unwrap();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let line = text.lines().count() + 1;
    text.push_str("lisen = \"127.0.0.1:7077\"\n");
    let path = c.path("master.toml");
    std::fs::write(&path, text).unwrap();
    let path = path.to_str().unwrap();
    let mut p = c.spawn("master", Kind::Master, &["master", "--config", path]);
    let status = p.wait_exit(Duration::from_secs(30));
    assert!(!status.success(), "regent master started with an unknown key");
    let want = format!("{path}:{line}:1: unknown key \"lisen\"");
    assert!(p.stderr().contains(&want), "stderr does not say {want:?}: {}", p.stderr());
}

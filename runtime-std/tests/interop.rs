//! Interop: the std pumps (`regent --runtime std`) and the smol daemons (`regent`)
//! in one cluster. Real processes on loopback, free ports, temp dirs,
//! bounded waits, every process stopped on drop; outcomes are asserted,
//! never timings.
//!
//! `regent` belongs to another package, so Cargo does not hand this test its
//! path: it is built here once (`cargo build -p regent-smol --bin regent`
//! into the same target dir, bounded), a no-op when it is fresh.

use regent_core::protocol::{ClusterState, Hello, Message, Role, PROTOCOL_VERSION};
use regent_core::states::{MasterStatus, WorkerState};
use regent_core::ConnId;
use regent_std::net::{NetConfig, NetEvent};
use regent_std::pumps::conn::spawn_connection;
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// `target/<profile>`: this test binary lives in its `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>").to_path_buf()
}

/// The `regent` binary of the same target dir, built on first use. Both
/// runtimes are in it: `--runtime std` selects the blocking pumps.
fn regent_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let profile_dir = profile_dir();
        let target = profile_dir.parent().expect("the target dir");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut child = Command::new(cargo)
            .args(["build", "-q", "-p", "regent-smol", "--bin", "regent"])
            .env("CARGO_TARGET_DIR", target)
            .current_dir(workspace)
            .stdin(Stdio::null())
            .spawn()
            .expect("run cargo build for regent");
        let deadline = Instant::now() + Duration::from_secs(600);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("building regent took more than 600 s");
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(status.success(), "cargo build -p regent-smol failed: {status}");
        let bin = profile_dir.join("regent");
        assert!(bin.exists(), "{} was not built", bin.display());
        bin
    })
}

fn free_addr() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// Which implementation a process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rt {
    Smol,
    Std,
}

impl Rt {
    fn runtime(self) -> &'static str {
        match self {
            Rt::Smol => "smol",
            Rt::Std => "std",
        }
    }
}

/// One process; dropping it stops it (SIGTERM, 5 s, SIGKILL to its group)
/// and, when the test is failing, prints its stderr.
struct Proc {
    name: String,
    child: Child,
    out: PathBuf,
    err: PathBuf,
    status: Option<ExitStatus>,
}

impl Proc {
    fn spawn(dir: &Path, name: &str, rt: Rt, args: &[&str]) -> Proc {
        let out = dir.join(format!("{name}.stdout"));
        let err = dir.join(format!("{name}.stderr"));
        let child = Command::new(regent_bin())
            .args(["--runtime", rt.runtime()])
            .args(args)
            .current_dir(dir)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out).unwrap())
            .stderr(fs::File::create(&err).unwrap())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", regent_bin().display()));
        Proc { name: name.into(), child, out, err, status: None }
    }

    fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    fn stdout(&self) -> String {
        fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        fs::read_to_string(&self.err).unwrap_or_default()
    }

    fn wait_exit(&mut self, bound: Duration) -> ExitStatus {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(s) = self.exit_status() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {bound:?}\n{}\n{}",
                self.name,
                self.stdout(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&self, sig: &str, target: String) {
        let _ = Command::new("kill")
            .args([&format!("-{sig}"), "--", &target])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    fn kill9(&mut self) {
        if self.exit_status().is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }

    fn assert_running(&mut self, context: &str) {
        if let Some(s) = self.exit_status() {
            panic!("{} exited ({s}) {context}:\n{}", self.name, self.stderr());
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exit_status().is_none() {
            self.signal("TERM", self.child.id().to_string());
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.exit_status().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if self.exit_status().is_none() {
                self.signal("KILL", format!("-{}", self.child.id()));
                self.kill9();
            }
        }
        if std::thread::panicking() {
            eprintln!("===== {} stderr =====\n{}", self.name, self.stderr());
        }
    }
}

fn master(dir: &Path, rt: Rt, name: &str, listen: &str, extra: &[&str]) -> Proc {
    let mut args = vec!["master", "--id", name, "--listen", listen, "--heartbeat-interval", "300"];
    args.extend_from_slice(extra);
    Proc::spawn(dir, name, rt, &args)
}

fn worker(dir: &Path, rt: Rt, id: &str, master: &str) -> Proc {
    let work = dir.join(format!("work-{id}"));
    let work = work.to_str().unwrap();
    let args = [
        "worker",
        "--masters",
        master,
        "--cores",
        "4",
        "--memory",
        "1024",
        "--work-dir",
        work,
        "--id",
        id,
    ];
    Proc::spawn(dir, id, rt, &args)
}

fn submit(dir: &Path, rt: Rt, name: &str, master: &str, opts: &[&str], cmd: &[&str]) -> Proc {
    // `--keep`: these tests read a done application's executors after the
    // submit exits; without it a done submission ends its framework at
    // once (docs/design.md#issue-43).
    let mut args = vec!["submit", "--keep", "--masters", master];
    args.extend_from_slice(opts);
    args.push("--");
    args.extend_from_slice(cmd);
    Proc::spawn(dir, name, rt, &args)
}

/// The master's view, asked over the protocol as an operator client
/// (`None` when it does not answer within a few seconds).
fn state(master: &str) -> Option<ClusterState> {
    state_with(master, None)
}

/// [`state`] with a cluster secret.
fn state_with(master: &str, secret: Option<&[u8]>) -> Option<ClusterState> {
    let secret = secret.map(|s| regent_core::secret::Secret::new(s.to_vec()).unwrap());
    let stream = TcpStream::connect_timeout(&master.parse().ok()?, Duration::from_secs(2)).ok()?;
    let (tx, rx) = mpsc::channel();
    let net = Arc::new(NetConfig::new("regent", secret));
    let h = spawn_connection(stream, regent_core::auth::Side::Client, ConnId(1), net, move |e| {
        let _ = tx.send(e);
    })
    .ok()?;
    h.send(Message::Hello(Hello {
        version: PROTOCOL_VERSION,
        cluster: "regent".into(),
        role: Role::Client,
        node: "interop-test".into(),
    }));
    h.send(Message::StateRequest);
    let deadline = Instant::now() + Duration::from_secs(5);
    let result = loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(NetEvent::Message { msg: Message::StateReply(s), .. }) => break Some(*s),
            Ok(NetEvent::Message { .. }) => {}
            _ => break None,
        }
    };
    h.close();
    result
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + BOUND;
    loop {
        match f() {
            Ok(t) => return t,
            Err(e) if Instant::now() > deadline => panic!("not within {BOUND:?}: {what}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The leader is ALIVE with exactly these workers, each once, each ALIVE.
fn alive_with(master: &str, ids: &[&str]) -> Result<ClusterState, String> {
    let s = state(master).ok_or("the master does not answer")?;
    let got: Vec<(String, String)> =
        s.workers.iter().map(|w| (w.id.to_string(), w.state.to_string())).collect();
    let want: Vec<(String, String)> =
        ids.iter().map(|id| (id.to_string(), "ALIVE".to_string())).collect();
    if s.status == MasterStatus::Alive && got == want {
        Ok(s)
    } else {
        Err(format!("status {} workers {got:?}", s.status))
    }
}

fn tempdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("regent-interop-{name}-")).tempdir().unwrap()
}

/// A master of one runtime, two workers of the other, a submit of `sub`:
/// the application completes (exit 0) with every executor exited 0.
fn application_completes(m: Rt, w: Rt, sub: Rt) {
    let dir = tempdir("app");
    let addr = free_addr();
    let _m = master(dir.path(), m, "m1", &addr, &["--recovery", "none"]);
    let mut w1 = worker(dir.path(), w, "w1", &addr);
    let mut w2 = worker(dir.path(), w, "w2", &addr);
    wait_for("two workers ALIVE", || alive_with(&addr, &["w1", "w2"]));
    let opts = ["--executors", "3", "--cores", "1", "--memory", "64"];
    let mut s = submit(dir.path(), sub, "submit", &addr, &opts, &["sh", "-c", "exit 0"]);
    let status = s.wait_exit(BOUND);
    assert_eq!(status.code(), Some(0), "the submit completes:\n{}\n{}", s.stdout(), s.stderr());
    let st = state(&addr).unwrap();
    assert_eq!(st.executors.len(), 3, "{:?}", st.executors);
    assert!(
        st.executors
            .iter()
            .all(|e| e.state == regent_core::protocol::ExecutorState::Exited { code: 0 }),
        "{:?}",
        st.executors
    );
    w1.assert_running("at the end");
    w2.assert_running("at the end");
}

#[test]
fn std_master_with_smol_workers_completes_an_application() {
    application_completes(Rt::Std, Rt::Smol, Rt::Smol);
}

#[test]
fn smol_master_with_std_workers_completes_an_application() {
    application_completes(Rt::Smol, Rt::Std, Rt::Std);
}

/// A filesystem-mode master of runtime `m` is killed (-9) and restarted on
/// the same port and store: the three workers of runtime `w` are registered
/// again, each exactly once, at a higher epoch, and none of them exited.
fn restart_keeps_workers(m: Rt, w: Rt) {
    let dir = tempdir("restart");
    let addr = free_addr();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    let fs_args = ["--recovery", "filesystem", "--store", store, "--worker-timeout", "5000"];
    let mut m1 = master(dir.path(), m, "m1", &addr, &fs_args);
    let mut ws: Vec<Proc> =
        ["w1", "w2", "w3"].iter().map(|id| worker(dir.path(), w, id, &addr)).collect();
    let before = wait_for("three workers ALIVE", || alive_with(&addr, &["w1", "w2", "w3"]));
    m1.kill9();
    let _m2 = master(dir.path(), m, "m1", &addr, &fs_args);
    let after = wait_for("the three workers ALIVE again, each once", || {
        let s = alive_with(&addr, &["w1", "w2", "w3"])?;
        if s.epoch > before.epoch {
            Ok(s)
        } else {
            Err(format!("epoch {} not above {}", s.epoch, before.epoch))
        }
    });
    // Still so a little later (no duplicate or replaced registration).
    std::thread::sleep(Duration::from_millis(1500));
    let later = alive_with(&addr, &["w1", "w2", "w3"]).unwrap();
    assert_eq!(later.epoch, after.epoch);
    for w in &mut ws {
        w.assert_running("after the master restart");
    }
}

#[test]
fn filesystem_restart_of_a_std_master_keeps_smol_workers_once() {
    restart_keeps_workers(Rt::Std, Rt::Smol);
}

#[test]
fn filesystem_restart_of_a_smol_master_keeps_std_workers_once() {
    restart_keeps_workers(Rt::Smol, Rt::Std);
}

#[test]
fn std_submit_takes_over_a_framework_from_a_smol_submit() {
    let dir = tempdir("takeover");
    let addr = free_addr();
    let _m = master(dir.path(), Rt::Smol, "m1", &addr, &["--recovery", "none"]);
    let mut w = worker(dir.path(), Rt::Std, "w1", &addr);
    wait_for("the worker ALIVE", || alive_with(&addr, &["w1"]));

    let framework = "fw-interop-takeover";
    let opts = ["--framework-id", framework, "--executors", "1", "--cores", "1", "--memory", "64"];
    let cmd = ["sh", "-c", "sleep 5; exit 0"];
    let mut first = submit(dir.path(), Rt::Smol, "submit-smol", &addr, &opts, &cmd);
    let executor = wait_for("the executor RUNNING", || {
        let s = state(&addr).ok_or("no answer")?;
        match s.executors.as_slice() {
            [e] if e.state == regent_core::protocol::ExecutorState::Running => Ok(e.id.clone()),
            other => Err(format!("{other:?}")),
        }
    });
    let mut second = submit(dir.path(), Rt::Std, "submit-std", &addr, &opts, &cmd);
    let status = first.wait_exit(BOUND);
    assert_eq!(status.code(), Some(3), "the smol submit exits 3:\n{}", first.stderr());
    assert!(first.stderr().contains("failed over"), "{}", first.stderr());
    let status = second.wait_exit(BOUND);
    assert_eq!(
        status.code(),
        Some(0),
        "the std submit completes:\n{}\n{}",
        second.stdout(),
        second.stderr()
    );
    let s = state(&addr).unwrap();
    assert_eq!(s.executors.len(), 1, "the executor was adopted, not relaunched: {:?}", s.executors);
    assert_eq!(s.executors[0].id, executor);
    w.assert_running("at the end");
}

/// The handshake and frame MACs of both runtimes agree: a std master and a
/// smol worker sharing a secret register, and a peer without it is refused.
#[test]
fn a_secret_cluster_mixes_runtimes() {
    let dir = tempdir("secret");
    let secret = b"interop-secret-0123456789";
    let file = dir.path().join("secret");
    fs::write(&file, secret).unwrap();
    let file = file.to_str().unwrap();
    let addr = free_addr();
    let _m = master(dir.path(), Rt::Std, "m1", &addr, &["--secret-file", file]);
    let work = dir.path().join("work-w1");
    let args = [
        "worker",
        "--masters",
        &addr,
        "--cores",
        "2",
        "--memory",
        "256",
        "--work-dir",
        work.to_str().unwrap(),
        "--id",
        "w1",
        "--secret-file",
        file,
    ];
    let mut w = Proc::spawn(dir.path(), "w1", Rt::Smol, &args);
    wait_for("the smol worker ALIVE at the std master", || {
        let s = state_with(&addr, Some(secret)).ok_or("no answer")?;
        match s.workers.as_slice() {
            [v] if v.id.to_string() == "w1" && v.state == WorkerState::Alive => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    assert!(state(&addr).is_none(), "a client without the secret gets no answer");
    w.assert_running("at the end");
}

//! Executor supervision with real processes: exit codes, signals, output
//! capture, environment, killing whole process groups, failed launches, and
//! what a new supervisor does with groups left behind by one that was killed
//! with SIGKILL: adopts (or, by policy, kills) what is proven its own, and
//! leaves alone what is not (another boot, another start time, no start
//! time, no boot id, a leader that left its group). Every wait is bounded
//! by a deadline; every process a test starts is killed before it ends.

mod harness;

use harness::Guarded;
use regent_core::protocol::{ExecutorSpec, ExecutorState};
use regent_core::{ExecutorId, FrameworkId};
use regent_std::exec::record::{self, Record};
use regent_std::exec::{
    classify, ExecEvent, Finding, Launched, LeftBehindOutcome, LeftBehindPolicy, Supervisor,
    SupervisorConfig, SupervisorError, RUNNING_DIR,
};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

fn supervisor(dir: &Path) -> (Guarded, Receiver<ExecEvent>) {
    supervisor_with(SupervisorConfig::new(dir))
}

fn supervisor_with(config: SupervisorConfig) -> (Guarded, Receiver<ExecEvent>) {
    let (tx, rx) = channel();
    let (sup, left) = Supervisor::with_config(config, move |e| {
        let _ = tx.send(e);
    })
    .expect("supervisor");
    assert!(left.is_empty(), "nothing left behind in a fresh dir: {left:?}");
    (Guarded::new(sup), rx)
}

/// An executor of framework `fw-1` and what it runs.
fn spec(id: &str, command: &[&str]) -> (ExecutorId, ExecutorSpec) {
    let spec = ExecutorSpec {
        command: command.iter().map(|s| s.to_string()).collect(),
        env: vec![],
        cores: 2,
        memory_mb: 512,
        launch: Default::default(),
    };
    (ExecutorId::new(id), spec)
}

fn sh(id: &str, script: &str) -> (ExecutorId, ExecutorSpec) {
    spec(id, &["sh", "-c", script])
}

fn launch(sup: &Supervisor, (executor, spec): (ExecutorId, ExecutorSpec)) -> Launched {
    sup.launch(executor, FrameworkId::new("fw-1"), spec)
}

fn next(rx: &Receiver<ExecEvent>) -> ExecEvent {
    rx.recv_timeout(DEADLINE).expect("an event within the deadline")
}

fn expect_state(rx: &Receiver<ExecEvent>, id: &str, state: ExecutorState) {
    let e = next(rx);
    assert_eq!(e.executor.as_str(), id, "{e:?}");
    assert_eq!(e.state, state, "{e:?}");
}

fn started(l: Launched) -> u32 {
    match l {
        Launched::Started { pid } => pid,
        other => panic!("expected a start, got {other:?}"),
    }
}

/// Gone: no such process, or a zombie nobody has reaped yet (an orphan
/// left to an init that reaps slowly).
fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'),
    }
}

fn wait_gone(pid: u32) {
    let end = Instant::now() + DEADLINE;
    while !is_gone(pid) {
        assert!(Instant::now() < end, "process {pid} still runs");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads a pid a script wrote to a file, waiting for it to appear.
fn read_pid(path: &Path) -> u32 {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        assert!(Instant::now() < end, "{} never written", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn records(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join(RUNNING_DIR)).unwrap().map(|e| e.unwrap().path()).collect()
}

/// Kills a process a test started outside the supervisor.
fn kill_pid(pid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

#[test]
fn exit_code_is_reported_and_record_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    started(launch(&sup, sh("e1", "exit 7")));
    expect_state(&rx, "e1", ExecutorState::Running);
    expect_state(&rx, "e1", ExecutorState::Exited { code: 7 });
    assert!(sup.running().is_empty());
    assert!(records(dir.path()).is_empty(), "record removed at exit");
    assert!(!sup.kill(&ExecutorId::new("e1")), "nothing left to kill");
}

#[test]
fn death_by_signal_is_128_plus_signal() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    started(launch(&sup, sh("e1", "kill -9 $$")));
    expect_state(&rx, "e1", ExecutorState::Running);
    expect_state(&rx, "e1", ExecutorState::Exited { code: 128 + 9 });
}

#[test]
fn output_is_captured_to_files() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    started(launch(&sup, sh("e1", "echo to-out; echo to-err >&2")));
    expect_state(&rx, "e1", ExecutorState::Running);
    expect_state(&rx, "e1", ExecutorState::Exited { code: 0 });
    let edir = sup.executor_dir(&ExecutorId::new("e1"));
    assert_eq!(edir, dir.path().join("executors/e1"));
    assert_eq!(std::fs::read_to_string(edir.join("stdout")).unwrap(), "to-out\n");
    assert_eq!(std::fs::read_to_string(edir.join("stderr")).unwrap(), "to-err\n");
}

#[test]
fn environment_and_working_directory_are_set() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    let mut s = sh(
        "exec/1 x",
        "echo \"$REGENT_EXECUTOR_ID|$REGENT_FRAMEWORK_ID|$REGENT_CORES|$REGENT_MEMORY_MB|$FOO\"; pwd",
    );
    s.1.env = vec![("FOO".into(), "bar baz".into()), ("REGENT_CORES".into(), "spoofed".into())];
    started(launch(&sup, s));
    expect_state(&rx, "exec/1 x", ExecutorState::Running);
    expect_state(&rx, "exec/1 x", ExecutorState::Exited { code: 0 });
    let edir = sup.executor_dir(&ExecutorId::new("exec/1 x"));
    assert_eq!(edir.file_name().unwrap(), "exec%2F1%20x", "id escaped");
    let out = std::fs::read_to_string(edir.join("stdout")).unwrap();
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("exec/1 x|fw-1|2|512|bar baz"));
    let pwd = PathBuf::from(lines.next().unwrap());
    assert_eq!(pwd.canonicalize().unwrap(), edir.canonicalize().unwrap());
}

#[test]
fn a_group_cwd_is_made_inside_the_executor_directory_and_the_process_starts_there() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    let mut s = sh("e1", "pwd; echo here > marker");
    s.1.launch.cwd = Some("work/sub".into());
    started(launch(&sup, s));
    expect_state(&rx, "e1", ExecutorState::Running);
    expect_state(&rx, "e1", ExecutorState::Exited { code: 0 });
    let edir = sup.executor_dir(&ExecutorId::new("e1"));
    // The logs stay in the executor directory; the process ran in its cwd.
    let out = std::fs::read_to_string(edir.join("stdout")).unwrap();
    let pwd = PathBuf::from(out.lines().next().unwrap());
    assert_eq!(pwd.canonicalize().unwrap(), edir.join("work/sub").canonicalize().unwrap());
    assert_eq!(std::fs::read_to_string(edir.join("work/sub/marker")).unwrap(), "here\n");
    // A cwd that would leave the directory is refused before anything runs
    // (the master refuses it too; the worker does not rely on that).
    let mut s = sh("e2", "echo ran > ../../escaped");
    s.1.launch.cwd = Some("../..".into());
    let l = launch(&sup, s);
    let Launched::Failed { reason } = l else { panic!("expected a failure, got {l:?}") };
    assert!(reason.contains("not inside the executor directory"), "{reason}");
    expect_state(&rx, "e2", ExecutorState::Failed { reason });
    assert!(!dir.path().join("escaped").exists() && !edir.join("../../escaped").exists());
}

#[test]
fn a_group_kill_grace_overrides_the_workers_and_is_kept_in_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = SupervisorConfig::new(dir.path());
    // The worker's own grace is far longer than the test's deadline: only
    // the group's 300 ms lets the kill finish in time.
    config.kill_grace = Duration::from_secs(600);
    let (sup, rx) = supervisor_with(config);
    let mut s = sh("e1", "trap '' TERM; sleep 1000 & echo $! > grandchild; wait");
    s.1.launch.kill_grace_ms = Some(300);
    let pid = started(launch(&sup, s));
    expect_state(&rx, "e1", ExecutorState::Running);
    let recs = records(dir.path());
    assert_eq!(recs.len(), 1);
    let text = std::fs::read_to_string(&recs[0]).unwrap();
    assert!(text.contains("\nkill_grace_ms=300\n"), "{text}");
    let id = ExecutorId::new("e1");
    let grandchild = read_pid(&sup.executor_dir(&id).join("grandchild"));
    assert!(sup.kill(&id));
    expect_state(&rx, "e1", ExecutorState::Killed);
    wait_gone(pid);
    wait_gone(grandchild);
}

#[test]
fn artifacts_are_installed_before_the_process_starts_and_a_bad_digest_never_runs() {
    use sha2::Digest as _;
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    let src = dir.path().join("input.txt");
    std::fs::write(&src, b"fetched data\n").unwrap();
    let digest: String =
        sha2::Sha256::digest(b"fetched data\n").iter().map(|b| format!("{b:02x}")).collect();
    let artifact = |sha256: &str| regent_core::launch::Artifact {
        source: format!("file://{}", src.display()),
        sha256: sha256.into(),
        dest: "in".into(),
        unpack: false,
    };
    let mut s = sh("e1", "cat in/input.txt > seen");
    s.1.launch.artifacts = vec![artifact(&digest)];
    started(launch(&sup, s));
    expect_state(&rx, "e1", ExecutorState::Running);
    expect_state(&rx, "e1", ExecutorState::Exited { code: 0 });
    let seen = sup.executor_dir(&ExecutorId::new("e1")).join("seen");
    assert_eq!(std::fs::read_to_string(seen).unwrap(), "fetched data\n");
    // A digest that does not match: the launch fails naming both digests,
    // and the command never ran.
    let wrong = "0".repeat(64);
    let mut s = sh("e2", "echo ran > ran");
    s.1.launch.artifacts = vec![artifact(&wrong)];
    let l = launch(&sup, s);
    let Launched::Failed { reason } = l else { panic!("expected a failure, got {l:?}") };
    assert!(reason.contains(&format!("expected {wrong}, received {digest}")), "{reason}");
    expect_state(&rx, "e2", ExecutorState::Failed { reason });
    assert!(!sup.executor_dir(&ExecutorId::new("e2")).join("ran").exists(), "never ran");
    assert!(records(dir.path()).is_empty());
}

/// An artifact read from a FIFO: its fetch blocks until the test writes
/// it, a download as slow as the test wants, with no sleep.
fn fifo_artifact(dir: &Path, name: &str, data: &[u8]) -> (PathBuf, regent_core::launch::Artifact) {
    use sha2::Digest as _;
    let path = dir.join(name);
    assert!(Command::new("mkfifo").arg(&path).status().unwrap().success(), "mkfifo");
    let artifact = regent_core::launch::Artifact {
        source: format!("file://{}", path.display()),
        sha256: sha2::Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect(),
        dest: String::new(),
        unpack: false,
    };
    (path, artifact)
}

#[test]
fn a_launch_fetching_artifacts_does_not_hold_its_caller_and_a_kill_meanwhile_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx) = channel();
    let (sup, _) = Supervisor::with_config(SupervisorConfig::new(dir.path()), move |e| {
        let _ = tx.send(e);
    })
    .unwrap();
    let sup = std::sync::Arc::new(sup);
    // Killed while its artifact is fetched: it never starts.
    let (fifo, a) = fifo_artifact(dir.path(), "slow-1", b"data");
    let mut s = sh("e1", "echo ran > ran");
    s.1.launch.artifacts = vec![a];
    let (id, spec) = s;
    // Returns at once although nothing has written the FIFO yet.
    assert_eq!(sup.launch_in_background(id.clone(), FrameworkId::new("fw-1"), spec.clone()), None);
    assert_eq!(
        sup.launch_in_background(id.clone(), FrameworkId::new("fw-1"), spec),
        Some(Launched::AlreadyRunning),
        "a second start while it is prepared"
    );
    assert!(sup.kill(&id), "the kill is kept for the executor being prepared");
    std::fs::write(&fifo, b"data").unwrap();
    expect_state(&rx, "e1", ExecutorState::Killed);
    assert!(!sup.executor_dir(&id).join("ran").exists(), "never ran");
    // Not killed: it runs once its artifact has come.
    let (fifo, a) = fifo_artifact(dir.path(), "slow-2", b"more");
    let mut s = sh("e2", "cat slow-2 > ran");
    s.1.launch.artifacts = vec![a];
    let (id, spec) = s;
    assert_eq!(sup.launch_in_background(id.clone(), FrameworkId::new("fw-1"), spec), None);
    std::fs::write(&fifo, b"more").unwrap();
    expect_state(&rx, "e2", ExecutorState::Running);
    expect_state(&rx, "e2", ExecutorState::Exited { code: 0 });
    assert_eq!(std::fs::read(sup.executor_dir(&id).join("ran")).unwrap(), b"more");
    assert!(sup.kill_all().is_empty());
}

#[test]
fn kill_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    let pid = started(launch(&sup, sh("e1", "sleep 1000 & echo $! > grandchild; wait")));
    expect_state(&rx, "e1", ExecutorState::Running);
    let id = ExecutorId::new("e1");
    let grandchild = read_pid(&sup.executor_dir(&id).join("grandchild"));
    assert!(!is_gone(grandchild));
    assert_eq!(sup.running().len(), 1);
    assert!(sup.kill(&id));
    // A repeated kill is harmless (it may find the executor ended already).
    sup.kill(&id);
    expect_state(&rx, "e1", ExecutorState::Killed);
    wait_gone(pid);
    wait_gone(grandchild);
    assert!(records(dir.path()).is_empty());
    assert!(!sup.kill(&id));
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "one Killed only");
}

#[test]
fn kill_escalates_to_sigkill_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = SupervisorConfig::new(dir.path());
    config.kill_grace = Duration::from_millis(300);
    let (sup, rx) = supervisor_with(config);
    // Ignored signals are inherited: neither sh nor sleep dies of SIGTERM.
    let pid =
        started(launch(&sup, sh("e1", "trap '' TERM; sleep 1000 & echo $! > grandchild; wait")));
    expect_state(&rx, "e1", ExecutorState::Running);
    let id = ExecutorId::new("e1");
    let grandchild = read_pid(&sup.executor_dir(&id).join("grandchild"));
    assert!(sup.kill(&id));
    expect_state(&rx, "e1", ExecutorState::Killed);
    wait_gone(pid);
    wait_gone(grandchild);
}

#[test]
fn a_drain_stop_sends_sigterm_first_and_sigkill_after_its_own_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = SupervisorConfig::new(dir.path());
    // The worker's own kill grace is long: the stop's grace decides.
    config.kill_grace = Duration::from_secs(600);
    let (sup, rx) = supervisor_with(config);
    // A process that ignores SIGTERM is SIGKILLed once the grace has passed.
    let pid =
        started(launch(&sup, sh("e1", "trap '' TERM; sleep 1000 & echo $! > grandchild; wait")));
    expect_state(&rx, "e1", ExecutorState::Running);
    let id = ExecutorId::new("e1");
    let grandchild = read_pid(&sup.executor_dir(&id).join("grandchild"));
    assert!(sup.stop(&id, Duration::from_millis(300)));
    expect_state(&rx, "e1", ExecutorState::Killed);
    wait_gone(pid);
    wait_gone(grandchild);
    // One that handles SIGTERM gets it first, and ends by itself.
    // (It says it is ready once its trap is set: a SIGTERM before that
    // would end the shell by default — found flaky in CI.)
    let script = "trap 'echo bye > termed; exit 0' TERM; echo $$ > ready; sleep 1000 & wait";
    let pid = started(launch(&sup, sh("e2", script)));
    expect_state(&rx, "e2", ExecutorState::Running);
    let id = ExecutorId::new("e2");
    read_pid(&sup.executor_dir(&id).join("ready"));
    let termed = sup.executor_dir(&id).join("termed");
    assert!(sup.stop(&id, Duration::from_secs(600)));
    expect_state(&rx, "e2", ExecutorState::Killed);
    wait_gone(pid);
    assert_eq!(std::fs::read_to_string(termed).unwrap(), "bye\n", "SIGTERM came first");
    assert!(!sup.stop(&id, Duration::ZERO), "nothing left to stop");
}

#[test]
fn a_named_scale_stop_sends_its_own_signal_first() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    // SIGTERM is ignored: only the SIGUSR1 asked for ends it before the
    // (long) grace.
    let script =
        "trap '' TERM; trap 'echo usr1 > got; exit 0' USR1; echo $$ > ready; sleep 1000 & wait";
    let pid = started(launch(&sup, sh("e1", script)));
    expect_state(&rx, "e1", ExecutorState::Running);
    let id = ExecutorId::new("e1");
    read_pid(&sup.executor_dir(&id).join("ready"));
    let got = sup.executor_dir(&id).join("got");
    let usr1 = regent_core::api::StopSignal::Usr1;
    assert!(sup.stop_with(&id, usr1, Duration::from_secs(600)));
    expect_state(&rx, "e1", ExecutorState::Killed);
    wait_gone(pid);
    assert_eq!(std::fs::read_to_string(got).unwrap(), "usr1\n", "SIGUSR1 came first");
}

#[test]
fn leader_exit_takes_its_group_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    started(launch(&sup, sh("e1", "sleep 1000 & echo $! > grandchild; exit 3")));
    expect_state(&rx, "e1", ExecutorState::Running);
    expect_state(&rx, "e1", ExecutorState::Exited { code: 3 });
    let grandchild = read_pid(&sup.executor_dir(&ExecutorId::new("e1")).join("grandchild"));
    wait_gone(grandchild);
}

#[test]
fn nonexistent_command_fails_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    let l = launch(&sup, spec("e1", &["regent-no-such-command-xyz", "arg"]));
    let Launched::Failed { reason } = l else {
        panic!("expected a failure, got {l:?}");
    };
    assert!(reason.contains("regent-no-such-command-xyz"), "{reason}");
    assert!(reason.contains("No such file or directory"), "{reason}");
    expect_state(&rx, "e1", ExecutorState::Failed { reason: reason.clone() });
    assert!(sup.running().is_empty());
    assert!(records(dir.path()).is_empty());
    // The reason is in the executor's stderr file too.
    let err = std::fs::read_to_string(sup.executor_dir(&ExecutorId::new("e1")).join("stderr"));
    assert!(err.unwrap().contains("regent-no-such-command-xyz"));

    let l = launch(&sup, spec("e2", &[]));
    assert_eq!(l, Launched::Failed { reason: "empty command".into() });
    expect_state(&rx, "e2", ExecutorState::Failed { reason: "empty command".into() });

    let mut bad_env = spec("e3", &["true"]);
    bad_env.1.env = vec![("A=B".into(), "x".into())];
    assert!(matches!(launch(&sup, bad_env), Launched::Failed { .. }));
    assert!(matches!(next(&rx).state, ExecutorState::Failed { .. }));
}

#[test]
fn duplicate_launch_is_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    let pid = started(launch(&sup, spec("e1", &["sleep", "1000"])));
    expect_state(&rx, "e1", ExecutorState::Running);
    assert_eq!(launch(&sup, spec("e1", &["sleep", "1000"])), Launched::AlreadyRunning);
    let running = sup.running();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].pid, pid);
    // The record names the group while it runs.
    let recs = records(dir.path());
    assert_eq!(recs.len(), 1);
    let text = std::fs::read_to_string(&recs[0]).unwrap();
    assert!(text.contains(&format!("pgid={pid}\n")), "{text}");
    assert!(sup.kill_all().is_empty());
    expect_state(&rx, "e1", ExecutorState::Killed);
    wait_gone(pid);
}

#[test]
fn kill_all_kills_and_reports_every_executor() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = SupervisorConfig::new(dir.path());
    config.kill_grace = Duration::from_millis(300);
    let (sup, rx) = supervisor_with(config);
    let mut pids = vec![];
    for i in 0..3 {
        pids.push(started(launch(&sup, spec(&format!("e{i}"), &["sleep", "1000"]))));
        assert_eq!(next(&rx).state, ExecutorState::Running);
    }
    pids.push(started(launch(&sup, sh("stubborn", "trap '' TERM; sleep 1000 & wait"))));
    assert_eq!(next(&rx).state, ExecutorState::Running);
    assert!(sup.kill_all().is_empty(), "everything reported");
    let mut killed: Vec<String> = (0..4)
        .map(|_| {
            let e = rx.try_recv().expect("reported before kill_all returned");
            assert_eq!(e.state, ExecutorState::Killed);
            e.executor.0
        })
        .collect();
    killed.sort();
    assert_eq!(killed, ["e0", "e1", "e2", "stubborn"]);
    for pid in pids {
        wait_gone(pid);
    }
    assert!(sup.running().is_empty());
    assert!(records(dir.path()).is_empty());
}

#[test]
fn a_second_supervisor_is_locked_out() {
    let dir = tempfile::tempdir().unwrap();
    let (_sup, _rx) = supervisor(dir.path());
    let err = Supervisor::new(dir.path(), |_| {}).unwrap_err();
    assert!(matches!(err, SupervisorError::Locked { .. }), "{err}");
    assert!(err.to_string().contains(&std::process::id().to_string()), "{err}");
}

#[test]
fn dropping_the_supervisor_leaves_executors_running_for_the_next_one_which_adopts_them() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, rx) = channel();
    let (sup, _) = Supervisor::new(dir.path(), move |e| {
        let _ = tx.send(e);
    })
    .unwrap();
    // Started with the port numbers its worker gave it (REGENT_PORT_*).
    let (id, mut served) = spec("e1", &["sleep", "1000"]);
    served.launch.ports = vec!["http".into(), "admin".into()];
    served.env.push(("REGENT_PORT_HTTP".into(), "20001".into()));
    served.env.push(("REGENT_PORT_ADMIN".into(), "20000".into()));
    let pid = started(launch(&sup, (id, served)));
    expect_state(&rx, "e1", ExecutorState::Running);
    drop(sup);
    assert!(!is_gone(pid), "dropping the supervisor killed nothing");
    let (tx2, rx2) = channel();
    let (sup2, left) = Supervisor::new(dir.path(), move |e| {
        let _ = tx2.send(e);
    })
    .unwrap_or_else(|e| {
        kill_pid(pid);
        panic!("{e}");
    });
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].executor.as_str(), "e1");
    assert_eq!(left[0].framework.as_str(), "fw-1");
    assert_eq!((left[0].cores, left[0].memory_mb), (2, 512), "recorded resources");
    let ports = vec![("http".to_string(), 20001), ("admin".to_string(), 20000)];
    assert_eq!(left[0].ports, ports, "an adopted executor keeps its port numbers");
    assert_eq!(left[0].outcome, LeftBehindOutcome::Adopted);
    assert_eq!(left[0].state(), ExecutorState::Running);
    assert!(!is_gone(pid), "adopted, not killed");
    let running = sup2.running();
    assert_eq!(running.len(), 1);
    assert_eq!((running[0].executor.as_str(), running[0].pid), ("e1", pid));
    assert_eq!(records(dir.path()).len(), 1, "an adopted group stays recorded");
    // The adopting supervisor can kill it, and sees it end.
    assert!(sup2.kill(&ExecutorId::new("e1")));
    expect_state(&rx2, "e1", ExecutorState::Killed);
    wait_gone(pid);
    assert!(records(dir.path()).is_empty());
    assert!(sup2.running().is_empty());
}

/// Not a test by itself: the helper process of
/// `groups_left_by_a_killed_supervisor_are_killed_and_reported`, which runs
/// this binary with `REGENT_EXEC_HELPER_DIR` set. It starts a supervisor,
/// launches an executor with a grandchild, prints their pids and waits to be
/// killed with SIGKILL.
#[test]
fn helper_supervisor_process() {
    let Ok(dir) = std::env::var("REGENT_EXEC_HELPER_DIR") else {
        return;
    };
    let (sup, _left) = Supervisor::new(&dir, |_| {}).unwrap();
    let pid = started(launch(&sup, sh("left/behind", "sleep 1000 & echo $! > grandchild; wait")));
    let grandchild =
        read_pid(&sup.executor_dir(&ExecutorId::new("left/behind")).join("grandchild"));
    println!("HELPER-PIDS {pid} {grandchild}");
    // Bounded, in case the parent test dies before killing us.
    std::thread::sleep(Duration::from_secs(120));
    sup.kill_all();
}

/// Runs `helper_supervisor_process` in a child process, which launches an
/// executor with a grandchild, then kills that process with SIGKILL: the
/// work dir and the executor's leader and grandchild pids, both running.
fn left_by_a_killed_supervisor() -> (tempfile::TempDir, u32, u32) {
    let dir = tempfile::tempdir().unwrap();
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "helper_supervisor_process", "--nocapture", "--test-threads=1"])
        .env("REGENT_EXEC_HELPER_DIR", dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = helper.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest may print "test <name> ... " on the same line first.
            if let Some(at) = line.find("HELPER-PIDS ") {
                let rest = &line[at + "HELPER-PIDS ".len()..];
                let pids: Vec<u32> = rest.split(' ').map(|p| p.parse().unwrap()).collect();
                let _ = tx.send(pids);
            }
        }
    });
    let pids = rx.recv_timeout(DEADLINE);
    helper.kill().unwrap(); // SIGKILL: no cleanup in the helper.
    helper.wait().unwrap();
    let Ok(pids) = pids else {
        // Clean up whatever the helper started before failing.
        for rec in records(dir.path()) {
            let text = std::fs::read_to_string(rec).unwrap_or_default();
            for pgid in text.lines().filter_map(|l| l.strip_prefix("pgid=")) {
                if let Some(pgid) = pgid.parse().ok().and_then(rustix::process::Pid::from_raw) {
                    let _ =
                        rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
                }
            }
        }
        panic!("the helper did not print its executor's pids");
    };
    let (leader, grandchild) = (pids[0], pids[1]);
    assert!(!is_gone(leader) && !is_gone(grandchild), "the executor outlived its worker");

    (dir, leader, grandchild)
}

#[test]
fn groups_left_by_a_killed_supervisor_are_killed_with_the_kill_policy() {
    let (dir, leader, grandchild) = left_by_a_killed_supervisor();
    let mut config = SupervisorConfig::new(dir.path());
    config.left_behind = LeftBehindPolicy::Kill;
    let (_sup, left) = match Supervisor::with_config(config, |_| {}) {
        Ok(ok) => ok,
        Err(e) => {
            kill_pid(leader);
            kill_pid(grandchild);
            panic!("{e}");
        }
    };
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].executor.as_str(), "left/behind");
    assert_eq!(left[0].framework.as_str(), "fw-1");
    assert_eq!(left[0].pgid, leader as i32);
    assert_eq!(left[0].outcome, LeftBehindOutcome::Killed);
    assert_eq!(left[0].state(), ExecutorState::Killed);
    wait_gone(leader);
    wait_gone(grandchild);
    assert!(records(dir.path()).is_empty(), "records removed after reclaiming");
}

#[test]
fn groups_left_by_a_killed_supervisor_are_adopted_and_their_end_is_seen() {
    let (dir, leader, grandchild) = left_by_a_killed_supervisor();
    let (tx, rx) = channel();
    let mut config = SupervisorConfig::new(dir.path());
    config.kill_grace = Duration::from_millis(200);
    let (sup, left) = match Supervisor::with_config(config, move |e| {
        let _ = tx.send(e);
    }) {
        Ok(ok) => ok,
        Err(e) => {
            kill_pid(leader);
            kill_pid(grandchild);
            panic!("{e}");
        }
    };
    let sup = Guarded::new(sup);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].outcome, LeftBehindOutcome::Adopted);
    assert!(!is_gone(leader) && !is_gone(grandchild), "adoption kills nothing");
    assert_eq!(sup.running()[0].pid, leader);
    // It ends by itself (here: its leader is killed from outside). Not our
    // child: its exit status is unknown, so it is reported LOST, and what
    // remained of its group goes with it.
    kill_pid(leader);
    expect_state(&rx, "left/behind", ExecutorState::Lost);
    wait_gone(grandchild);
    assert!(records(dir.path()).is_empty());
    assert!(sup.running().is_empty());
}

/// Starts `sleep 1000` in its own process group, outside any supervisor.
fn foreign_group_leader() -> std::process::Child {
    Command::new("sleep").arg("1000").process_group(0).spawn().unwrap()
}

/// Plants a record as a previous supervisor would have written it.
fn write_record(dir: &Path, name: &str, pgid: u32, start_time: Option<u64>, boot: Option<&str>) {
    let running = dir.join(RUNNING_DIR);
    std::fs::create_dir_all(&running).unwrap();
    let rec = Record {
        resources: Default::default(),
        executor: ExecutorId::new(name),
        framework: FrameworkId::new("fw"),
        pgid: pgid as i32,
        start_time,
        boot_id: boot.map(str::to_owned),
        cores: 1,
        memory_mb: 64,
        kill_grace_ms: Default::default(),
        ports: Vec::new(),
        disconnect_ms: None,
        checks: Vec::new(),
        sandbox: None,
    };
    record::write(&running, &rec).unwrap();
}

/// Plants a version 1 record (no boot id), as regent wrote before.
fn write_v1_record(dir: &Path, name: &str, pgid: u32, start_time: u64) {
    let running = dir.join(RUNNING_DIR);
    std::fs::create_dir_all(&running).unwrap();
    std::fs::write(
        running.join(format!("{name}.rec")),
        format!(
            "regent-executor-record 1\nexecutor={name}\nframework=fw\npgid={pgid}\nstart_time={start_time}\nend\n"
        ),
    )
    .unwrap();
}

fn this_boot() -> String {
    record::boot_id().expect("/proc/sys/kernel/random/boot_id")
}

/// A boot id that is not this machine's.
const OTHER_BOOT: &str = "00000000-0000-4000-8000-000000000000";

/// The supervisor with the kill policy over a directory of planted
/// records: what it reports, and whether `pid` survived it.
fn reclaim_with_kill_policy(dir: &Path, pid: u32) -> (Vec<regent_std::exec::LeftBehind>, bool) {
    let mut config = SupervisorConfig::new(dir);
    config.left_behind = LeftBehindPolicy::Kill;
    let result = Supervisor::with_config(config, |_| {});
    // Give a SIGKILL, had one been sent, time to land.
    std::thread::sleep(Duration::from_millis(100));
    let alive = !is_gone(pid);
    let (_sup, left) = result.unwrap();
    (left, alive)
}

fn start_time(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = s[s.rfind(')').unwrap() + 1..].split_whitespace().collect();
    fields[19].parse().unwrap()
}

fn rec(pgid: u32, start_time: Option<u64>, boot: Option<&str>) -> Record {
    Record {
        resources: Default::default(),
        executor: ExecutorId::new("e"),
        framework: FrameworkId::new("fw"),
        pgid: pgid as i32,
        start_time,
        boot_id: boot.map(str::to_owned),
        cores: 1,
        memory_mb: 64,
        kill_grace_ms: Default::default(),
        ports: Vec::new(),
        disconnect_ms: None,
        checks: Vec::new(),
        sandbox: None,
    }
}

#[test]
fn classify_proves_only_same_boot_same_start_time_group_leaders() {
    let boot = this_boot();
    let mut other = foreign_group_leader();
    let pid = other.id();
    let t = start_time(pid);
    let mut in_my_group = Command::new("sleep").arg("1000").spawn().unwrap();
    let member = in_my_group.id();
    let tm = start_time(member);
    let proven = classify(&rec(pid, Some(t), Some(&boot)), Some(&boot));
    let other_boot = classify(&rec(pid, Some(t), Some(OTHER_BOOT)), Some(&boot));
    let reused = classify(&rec(pid, Some(t + 1), Some(&boot)), Some(&boot));
    let no_start = classify(&rec(pid, None, Some(&boot)), Some(&boot));
    let no_boot = classify(&rec(pid, Some(t), None), Some(&boot));
    let unknown_boot = classify(&rec(pid, Some(t), Some(&boot)), None);
    let not_leader = classify(&rec(member, Some(tm), Some(&boot)), Some(&boot));
    for c in [&mut other, &mut in_my_group] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let gone = classify(&rec(pid, Some(t), Some(&boot)), Some(&boot));
    assert!(matches!(proven, Finding::Proven { start_time, .. } if start_time == t), "{proven:?}");
    assert!(
        matches!(&other_boot, Finding::Ended { why } if why.contains("another boot") && why.contains(OTHER_BOOT)),
        "{other_boot:?}"
    );
    assert!(
        matches!(&reused, Finding::Ended { why } if why.contains("another process")),
        "{reused:?}"
    );
    assert!(
        matches!(&no_start, Finding::Unprovable { why } if why.contains("no start time")),
        "{no_start:?}"
    );
    assert!(
        matches!(&no_boot, Finding::Unprovable { why } if why.contains("no boot")),
        "{no_boot:?}"
    );
    assert!(matches!(&unknown_boot, Finding::Unprovable { .. }), "{unknown_boot:?}");
    assert!(
        matches!(&not_leader, Finding::Unprovable { why } if why.contains("no longer leads")),
        "{not_leader:?}"
    );
    assert!(matches!(&gone, Finding::Ended { .. }), "{gone:?}");
}

#[test]
fn a_record_of_another_boot_is_never_killed_nor_adopted() {
    let dir = tempfile::tempdir().unwrap();
    // Someone else's live process now has the pid the record names, even
    // with the recorded start time: after a reboot, neither proves anything.
    let mut other = foreign_group_leader();
    let pid = other.id();
    write_record(dir.path(), "old", pid, Some(start_time(pid)), Some(OTHER_BOOT));
    let (left, alive) = reclaim_with_kill_policy(dir.path(), pid);
    // With the default policy too: nothing adopted.
    write_record(dir.path(), "old", pid, Some(start_time(pid)), Some(OTHER_BOOT));
    let (sup, left2) = Supervisor::new(dir.path(), |_| {}).unwrap();
    let alive2 = !is_gone(pid);
    let _ = other.kill();
    let _ = other.wait();
    assert!(alive && alive2, "a process of another boot's record was killed");
    assert_eq!(left.len(), 1);
    assert!(
        matches!(&left[0].outcome, LeftBehindOutcome::Ended { why } if why.contains("another boot"))
    );
    assert_eq!(left[0].state(), ExecutorState::Lost);
    assert!(matches!(&left2[0].outcome, LeftBehindOutcome::Ended { .. }), "{left2:?}");
    assert!(sup.running().is_empty(), "not adopted");
    assert!(records(dir.path()).is_empty());
}

#[test]
fn a_recycled_pid_is_never_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut other = foreign_group_leader();
    let pid = other.id();
    // A record naming the pid with another start time: the recorded process
    // ended and the pid now belongs to someone else.
    write_record(dir.path(), "old", pid, Some(start_time(pid) + 1), Some(&this_boot()));
    let (left, alive) = reclaim_with_kill_policy(dir.path(), pid);
    let _ = other.kill();
    let _ = other.wait();
    assert!(alive, "the recycled pid's process was killed");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].executor.as_str(), "old");
    assert!(matches!(left[0].outcome, LeftBehindOutcome::Ended { .. }), "{left:?}");
    assert!(records(dir.path()).is_empty());
}

#[test]
fn a_record_without_start_time_or_boot_id_is_left_alone() {
    for v1 in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut other = foreign_group_leader();
        let pid = other.id();
        if v1 {
            write_v1_record(dir.path(), "old", pid, start_time(pid));
        } else {
            write_record(dir.path(), "old", pid, None, Some(&this_boot()));
        }
        let (left, alive) = reclaim_with_kill_policy(dir.path(), pid);
        let _ = other.kill();
        let _ = other.wait();
        assert!(alive, "an unprovable process was killed (v1 record: {v1})");
        assert!(matches!(&left[0].outcome, LeftBehindOutcome::Unprovable { .. }), "{left:?}");
        assert_eq!(left[0].state(), ExecutorState::Lost);
    }
}

#[test]
fn a_proven_group_is_killed_by_policy_and_a_gone_one_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut ours = foreign_group_leader();
    let pid = ours.id();
    let boot = this_boot();
    write_record(dir.path(), "alive", pid, Some(start_time(pid)), Some(&boot));
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    write_record(dir.path(), "gone", gone_pid, Some(1), Some(&boot));
    let mut config = SupervisorConfig::new(dir.path());
    config.left_behind = LeftBehindPolicy::Kill;
    let result = Supervisor::with_config(config, |_| {});
    let status = ours.wait().unwrap(); // SIGKILLed by the supervisor, or hangs
    let (_sup, mut left) = result.unwrap();
    left.sort_by(|a, b| a.executor.cmp(&b.executor));
    assert_eq!(left[0].executor.as_str(), "alive");
    assert_eq!(left[0].outcome, LeftBehindOutcome::Killed);
    assert_eq!(left[1].executor.as_str(), "gone");
    assert!(matches!(left[1].outcome, LeftBehindOutcome::Ended { .. }), "{left:?}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9));
}

#[test]
fn an_adopted_group_that_exits_by_itself_is_reported_lost() {
    let dir = tempfile::tempdir().unwrap();
    let mut short = Command::new("sleep").arg("1").process_group(0).spawn().unwrap();
    let pid = short.id();
    write_record(dir.path(), "short", pid, Some(start_time(pid)), Some(&this_boot()));
    let (tx, rx) = channel();
    let (sup, left) = Supervisor::new(dir.path(), move |e| {
        let _ = tx.send(e);
    })
    .unwrap();
    let sup = Guarded::new(sup);
    assert_eq!(left[0].outcome, LeftBehindOutcome::Adopted, "{left:?}");
    assert_eq!((left[0].cores, left[0].memory_mb), (1, 64));
    // Its zombie (our child here) counts as ended.
    expect_state(&rx, "short", ExecutorState::Lost);
    let _ = short.wait();
    assert!(records(dir.path()).is_empty());
    assert!(sup.running().is_empty());
}

#[test]
fn damaged_and_torn_records_are_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let running = dir.path().join(RUNNING_DIR);
    std::fs::create_dir_all(&running).unwrap();
    std::fs::write(running.join("x.rec"), "garbage").unwrap();
    std::fs::write(running.join("y.rec.tmp"), "regent-executor-record 1\nexecutor=y\npg").unwrap();
    let (_sup, left) = Supervisor::new(dir.path(), |_| {}).unwrap();
    assert!(left.is_empty());
    let mut names: Vec<_> = records(dir.path())
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["x.rec.corrupt"]);
}

/// Sets the modification time of `dir` and the files in it `age` back.
fn backdate(dir: &Path, age: Duration) {
    let when = std::time::SystemTime::now() - age;
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()));
    for p in paths {
        let f = std::fs::File::open(&p).unwrap();
        f.set_times(std::fs::FileTimes::new().set_modified(when)).unwrap();
    }
}

#[test]
fn the_work_dir_gc_removes_ended_executors_past_the_ttl_never_a_running_or_recorded_one() {
    use regent_std::exec::gc::GcPolicy;
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(dir.path());
    let _ = started(launch(&sup, spec("ended", &["sh", "-c", "echo done"])));
    expect_state(&rx, "ended", ExecutorState::Running);
    expect_state(&rx, "ended", ExecutorState::Exited { code: 0 });
    let pid = started(launch(&sup, spec("running", &["sleep", "1000"])));
    expect_state(&rx, "running", ExecutorState::Running);
    // A record of an executor a previous process left (re-adoptable).
    write_record(dir.path(), "recorded", 999_999, None, None);
    std::fs::create_dir_all(sup.executor_dir(&ExecutorId::new("recorded"))).unwrap();
    let young = sup.executor_dir(&ExecutorId::new("young"));
    std::fs::create_dir_all(&young).unwrap();
    std::fs::write(young.join("stdout"), "x").unwrap();
    let week = Duration::from_secs(8 * 24 * 3600);
    for id in ["ended", "running", "recorded"] {
        backdate(&sup.executor_dir(&ExecutorId::new(id)), week);
    }
    let report = sup.collect_garbage(GcPolicy::default(), std::time::SystemTime::now());
    let removed: Vec<_> = report.removed.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(removed, vec![sup.executor_dir(&ExecutorId::new("ended"))], "{report:?}");
    assert!(report.removed[0].1.contains("ttl 604800 s"), "{report:?}");
    assert!(sup.executor_dir(&ExecutorId::new("running")).join("stdout").exists());
    assert!(sup.executor_dir(&ExecutorId::new("recorded")).exists(), "a recorded one stays");
    assert!(young.exists(), "younger than the ttl");
    // Under disk pressure ended ones go oldest first, whatever their age
    // beyond a minute; the running one still stays.
    backdate(&young, Duration::from_secs(3600));
    let full = GcPolicy { max_used_pct: 1, ..GcPolicy::default() };
    let report = sup.collect_garbage(full, std::time::SystemTime::now());
    if regent_std::exec::gc::used_pct(dir.path()).is_some_and(|u| u > 1) {
        assert_eq!(report.removed.len(), 1, "{report:?}");
        assert!(report.removed[0].1.contains("% full"), "{report:?}");
        assert!(!young.exists());
    }
    assert!(sup.executor_dir(&ExecutorId::new("running")).exists());
    assert!(!is_gone(pid));
}

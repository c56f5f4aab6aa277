//! The executor shim with real processes: the exit code, a terminating
//! signal and a graceful stop of the group are recorded in the status file
//! and reported exactly; a command that cannot be started fails with the
//! OS error, synchronously; and an executor re-adopted by a new supervisor
//! (after the first was killed with SIGKILL) is reported as it ended
//! (`Exited` with its code), not `Lost`, unless its status file is missing.
//! An exec health check runs as its executor does (docs/design.md#issue-45):
//! the group's `user` (as root, with a throwaway user), its `cwd` and the
//! executor's environment, also once a restarted worker re-adopted it.
//!
//! regent-std has no `regent` binary, so this test binary is its own shim:
//! run with `executor-shim ...` as its first argument, it runs
//! [`shim::run`] exactly as `regent executor-shim` does. Hence a `main` of
//! its own (`harness = false`): `cargo test -p regent-std --test shim
//! [NAME...]` runs every test (or those whose name contains a NAME), one
//! after the other. Every wait is bounded; every process a test starts is
//! killed before it ends.

mod harness;

use harness::Guarded;
use regent_core::protocol::{ExecutorSpec, ExecutorState};
use regent_core::{ExecutorId, FrameworkId};
use regent_std::exec::shim::{self, ShimArgs, ShimStatus};
use regent_std::exec::{
    ExecEvent, Launched, LeftBehindOutcome, Supervisor, SupervisorConfig, RUNNING_DIR,
};
use std::ffi::OsString;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

const TESTS: &[harness::Test] = &[
    ("status_files_round_trip_and_torn_ones_do_not_parse", status_files_round_trip),
    ("shim_arguments_parse_and_bad_ones_are_named", shim_arguments_parse),
    ("an_exit_code_is_recorded_and_reported", an_exit_code_is_recorded_and_reported),
    ("a_terminating_signal_is_recorded_and_reported", a_terminating_signal_is_recorded),
    ("output_is_rotated_by_size_and_read_across_the_files", output_is_rotated),
    ("an_executor_run_as_another_user_cannot_read_the_workers_secret", run_as_another_user),
    ("a_graceful_stop_of_the_group_is_recorded_by_the_surviving_shim", a_graceful_stop),
    ("an_unstartable_command_fails_synchronously_with_the_reason", an_unstartable_command),
    ("adopted_executors_are_reported_as_they_ended_not_lost", adopted_executors_end_exactly),
    ("an_adopted_executor_without_a_status_file_is_lost", adopted_without_status_is_lost),
    ("an_executor_that_ended_while_no_supervisor_ran_is_reported_as_recorded", ended_unwatched),
    ("an_exec_check_runs_as_its_executor_user_cwd_and_environment", a_check_runs_as_its_executor),
    ("an_exec_check_of_a_readopted_executor_runs_as_it_still", a_readopted_check_runs_as_before),
    ("a_lapsing_word_stops_a_singleton_within_bounds_and_says_why", a_lapsing_word_stops_it),
    ("a_word_kept_fresh_keeps_a_singleton_running", a_fresh_word_keeps_it_running),
    ("without_a_word_file_the_lease_counts_from_the_shims_start", no_word_file_counts_from_start),
    (
        "a_readopted_singleton_stopped_by_its_shim_ends_as_the_core_says",
        readopted_singleton_cut_off,
    ),
];

fn main() {
    harness::act_as_shim_if_asked();
    let mut args = std::env::args_os().skip(1);
    match args.next().as_ref().and_then(|a| a.to_str()) {
        Some(HELPER) => helper(args.collect()),
        Some(HELPER_SANDBOXED) => helper_sandboxed(args.collect()),
        Some(HELPER_SINGLETON) => helper_singleton(args.collect()),
        _ => {}
    }
    harness::run(TESTS)
}

/// This binary, acting as the shim.
fn this_shim() -> PathBuf {
    std::env::current_exe().expect("the test binary's path")
}

fn config(dir: &Path) -> SupervisorConfig {
    let mut config = SupervisorConfig::new(dir);
    config.shim = Some(this_shim());
    config
}

fn supervisor(config: SupervisorConfig) -> (Guarded, Receiver<ExecEvent>) {
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
        cores: 1,
        memory_mb: 64,
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

fn expect_state(rx: &Receiver<ExecEvent>, id: &str, state: ExecutorState) {
    let e = rx.recv_timeout(DEADLINE).expect("an event within the deadline");
    assert_eq!(e.executor.as_str(), id, "{e:?}");
    assert_eq!(e.state, state, "{e:?}");
}

fn started(l: Launched) -> u32 {
    match l {
        Launched::Started { pid } => pid,
        other => panic!("expected a start, got {other:?}"),
    }
}

fn status_of(sup: &Supervisor, id: &str) -> Option<ShimStatus> {
    shim::read_status(&sup.executor_dir(&ExecutorId::new(id)).join(shim::STATUS_FILE))
}

fn records(dir: &Path) -> usize {
    std::fs::read_dir(dir.join(RUNNING_DIR)).unwrap().count()
}

/// Gone: no such process, or a zombie nobody has reaped yet.
fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'),
    }
}

fn wait_for_file(path: &Path) -> String {
    wait_for_text(path, |text| text.ends_with('\n'))
}

fn wait_for_text(path: &Path, done: impl Fn(&str) -> bool) -> String {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if done(&text) {
                return text;
            }
        }
        assert!(Instant::now() < end, "{} never written", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn kill_group(pgid: u32) {
    if let Some(pgid) = rustix::process::Pid::from_raw(pgid as i32) {
        let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
    }
}

fn status_files_round_trip() {
    for status in [
        ShimStatus::Exited { code: 0 },
        ShimStatus::Exited { code: 3 },
        ShimStatus::Signaled { signal: 15 },
        ShimStatus::CannotStart { reason: "cannot start \"x\": No such file".into() },
        ShimStatus::CutOff { stop_after_ms: 30_000 },
    ] {
        let text = status.encode();
        assert_eq!(ShimStatus::decode(&text), Some(status.clone()), "{text}");
        for cut in 0..text.len() {
            assert_eq!(ShimStatus::decode(&text[..cut]), None, "torn at {cut}: {text:?}");
        }
    }
    assert_eq!(ShimStatus::Signaled { signal: 9 }.exit_code(), 137);
    assert_eq!(ShimStatus::CannotStart { reason: String::new() }.exit_code(), 127);
    // A reason over several lines is kept on one.
    let multi = ShimStatus::CannotStart { reason: "a\nb".into() }.encode();
    assert_eq!(ShimStatus::decode(&multi), Some(ShimStatus::CannotStart { reason: "a b".into() }));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(shim::STATUS_FILE);
    assert_eq!(shim::read_status(&path), None);
    shim::write_status(&path, &ShimStatus::Exited { code: 7 }).unwrap();
    assert_eq!(shim::read_status(&path), Some(ShimStatus::Exited { code: 7 }));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
}

fn shim_arguments_parse() {
    let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
    let args = ShimArgs {
        status: "/w/exit-status".into(),
        stdout: "/w/stdout".into(),
        stderr: Some("/w/stderr".into()),
        user: Some("1000:1000:1000,27".parse().unwrap()),
        rotation: Some(regent_std::exec::rotate::Rotation { max_bytes: 1000, files: 3 }),
        cgroups: vec!["/cg/memory/x".into(), "/cg/cpu/x".into()],
        lease: Some(shim::Lease { word: "/w/last-word".into(), stop_after_ms: 3_000, grace_ms: 0 }),
        command: os(&["sh", "-c", "exit 3"]),
    };
    let line = args.to_args();
    assert_eq!(line[0], shim::SUBCOMMAND);
    assert_eq!(ShimArgs::parse(line[1..].to_vec()), Ok(args.clone()));
    let plain = ShimArgs { lease: None, ..args };
    assert_eq!(ShimArgs::parse(plain.to_args()[1..].to_vec()), Ok(plain));
    let err = |v: &[&str]| ShimArgs::parse(os(v)).unwrap_err().to_string();
    assert!(err(&["--status", "s", "--stdout", "o", "--"]).contains("no command"));
    assert!(err(&["--stdout", "o", "--", "true"]).contains("--status"));
    assert!(err(&["--status", "s", "--", "true"]).contains("--stdout"));
    assert!(err(&["--status"]).contains("--status needs a value"));
    assert!(err(&["--status", "s", "--stdout", "o", "--cgroup"]).contains("--cgroup needs a value"));
    let half = ["--status", "s", "--stdout", "o", "--log-files", "2", "--", "true"];
    assert!(err(&half).contains("--log-max-bytes"), "{}", err(&half));
    let zero = ["--status", "s", "--stdout", "o", "--log-files", "0", "--", "true"];
    assert!(err(&zero).contains("--log-files needs a positive number"), "{}", err(&zero));
    assert!(err(&["--bogus", "--", "true"]).contains("--bogus"));
    let no_grace =
        ["--status", "s", "--stdout", "o", "--word", "w", "--stop-after", "5", "--", "x"];
    assert!(err(&no_grace).contains("--grace"), "{}", err(&no_grace));
    let no_word =
        ["--status", "s", "--stdout", "o", "--stop-after", "5", "--grace", "1", "--", "x"];
    assert!(err(&no_word).contains("--word"), "{}", err(&no_word));
    let zero =
        ["--status", "s", "--stdout", "o", "--word", "w", "--stop-after", "0", "--grace", "1"];
    assert!(err(&zero).contains("--stop-after needs a positive number"), "{}", err(&zero));
    assert!(err(&["--status", "s", "--stdout", "o"]).contains("--"));
}

fn an_exit_code_is_recorded_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(config(dir.path()));
    let pid = started(launch(&sup, sh("e1", "echo out; echo err >&2; exit 3")));
    expect_state(&rx, "e1", ExecutorState::Running);
    expect_state(&rx, "e1", ExecutorState::Exited { code: 3 });
    assert_eq!(status_of(&sup, "e1"), Some(ShimStatus::Exited { code: 3 }));
    let edir = sup.executor_dir(&ExecutorId::new("e1"));
    assert_eq!(std::fs::read_to_string(edir.join("stdout")).unwrap(), "out\n");
    assert_eq!(std::fs::read_to_string(edir.join("stderr")).unwrap(), "err\n");
    assert_eq!(records(dir.path()), 0);
    assert!(is_gone(pid));
    // The shim leads the group; the command runs under it with the
    // executor's environment and working directory.
    let pid = started(launch(&sup, sh(
        "e2",
        "read -r _ _ _ ppid pgrp _ < /proc/$$/stat; echo \"$REGENT_EXECUTOR_ID $(pwd) $pgrp $ppid\" > seen",
    )));
    expect_state(&rx, "e2", ExecutorState::Running);
    expect_state(&rx, "e2", ExecutorState::Exited { code: 0 });
    let edir = sup.executor_dir(&ExecutorId::new("e2"));
    let seen = wait_for_file(&edir.join("seen"));
    let want = format!("e2 {} {pid} {pid}\n", edir.canonicalize().unwrap().display());
    assert_eq!(seen, want, "(executor id, cwd, pgid, parent = the shim)");
}

fn output_is_rotated() {
    use regent_core::protocol::{LogRead, LogStream};
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.log_rotation = Some(regent_std::exec::rotate::Rotation { max_bytes: 1000, files: 2 });
    let (sup, rx) = supervisor(cfg);
    // 10,000 bytes of stdout (lines of 10), 2,000 of stderr, then markers.
    let script = "seq 100000000 100000999 | head -c 10000; echo out-end; \
                  seq 200000000 200000199 >&2; echo err-end >&2";
    started(launch(&sup, sh("e1", script)));
    expect_state(&rx, "e1", ExecutorState::Running);
    expect_state(&rx, "e1", ExecutorState::Exited { code: 0 });
    let edir = sup.executor_dir(&ExecutorId::new("e1"));
    let len = |name: &str| std::fs::metadata(edir.join(name)).map(|m| m.len()).unwrap_or(0);
    assert_eq!(len("stdout.1"), 1000, "the older file is full");
    assert!(len("stdout") <= 1000);
    assert!(!edir.join("stdout.2").exists(), "two files kept in all");
    assert_eq!(len("stderr.1"), 1000);
    let id = ExecutorId::new("e1");
    let LogRead::Chunk { data, size, .. } = sup.read_log(&id, LogStream::Stdout, None, 12) else {
        panic!("no chunk")
    };
    assert_eq!((data, size), (b"999\nout-end\n".to_vec(), 10_008));
    let LogRead::Chunk { data, size, .. } = sup.read_log(&id, LogStream::Stderr, None, 8) else {
        panic!("no chunk")
    };
    assert_eq!((data, size), (b"err-end\n".to_vec(), 2_008));
}

/// A throwaway system user for the test, removed when dropped.
struct TestUser(String);

impl TestUser {
    fn create() -> Option<TestUser> {
        if !rustix::process::geteuid().is_root() {
            println!("skipped: not root (running executors as another user needs root)");
            return None;
        }
        let name = format!("regent-t{}", std::process::id());
        let made = Command::new("useradd")
            .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", &name])
            .status()
            .expect("useradd (Debian's passwd package) runs");
        assert!(made.success(), "useradd {name} failed");
        Some(TestUser(name))
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.0).status();
    }
}

fn run_as_another_user() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let Some(user) = TestUser::create() else { return };
    let run_as = regent_std::exec::user::RunAs::lookup(&user.0).expect("the test user resolves");
    let dir = tempfile::tempdir().unwrap();
    // The worker's secret: root's, 0600, beside the work directory.
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "cluster-secret").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cfg = config(&dir.path().join("work"));
    cfg.run_as = Some(run_as.clone());
    let (sup, rx) = supervisor(cfg);
    let script = format!(
        "id -u; id -g; echo \"$USER $HOME\"; if cat {} 2>/dev/null; then echo READ; else echo denied; fi; \
         touch own-file && echo wrote",
        secret.display()
    );
    started(launch(&sup, sh("e1", &script)));
    expect_state(&rx, "e1", ExecutorState::Running);
    expect_state(&rx, "e1", ExecutorState::Exited { code: 0 });
    let edir = sup.executor_dir(&ExecutorId::new("e1"));
    let out = std::fs::read_to_string(edir.join("stdout")).unwrap();
    let want = format!(
        "{}\n{}\n{} {}\ndenied\nwrote\n",
        run_as.uid,
        run_as.gid,
        user.0,
        run_as.home.display()
    );
    assert_eq!(out, want, "runs as the user and cannot read the secret");
    let meta = std::fs::metadata(&edir).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (run_as.uid, 0o700), "its directory is its own");
    assert_eq!(std::fs::metadata(edir.join("own-file")).unwrap().uid(), run_as.uid);
    // The shim stayed root: it recorded how the command ended.
    assert_eq!(status_of(&sup, "e1"), Some(ShimStatus::Exited { code: 0 }));
    // A group naming a user: run as it only when the worker allows it.
    let dir2 = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir2.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cfg = config(&dir2.path().join("work"));
    cfg.allowed_users = vec![user.0.clone()];
    let (sup, rx) = supervisor(cfg);
    let (id, mut spec) = sh("e2", "id -un");
    spec.launch.user = Some(user.0.clone());
    started(launch(&sup, (id, spec)));
    expect_state(&rx, "e2", ExecutorState::Running);
    expect_state(&rx, "e2", ExecutorState::Exited { code: 0 });
    let out = std::fs::read_to_string(sup.executor_dir(&ExecutorId::new("e2")).join("stdout"));
    assert_eq!(out.unwrap(), format!("{}\n", user.0), "the group's user");
    let (id, mut spec) = sh("e3", "id -un");
    spec.launch.user = Some("daemon".into());
    let Launched::Failed { reason } = launch(&sup, (id, spec)) else { panic!("not refused") };
    let want =
        format!("user \"daemon\" is not allowed on this worker (--allowed-users: {})", user.0);
    assert_eq!(reason, want);
    // Root is refused as the user to run as.
    let err = regent_std::exec::user::RunAs::lookup("root").unwrap_err().to_string();
    assert!(err.contains("is root (uid 0)"), "{err}");
    let err = regent_std::exec::user::RunAs::lookup("no-such-user-here").unwrap_err().to_string();
    assert!(err.contains("no such user"), "{err}");
}

fn a_terminating_signal_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(config(dir.path()));
    // The command alone dies of SIGKILL (not its group): the shim records
    // the signal; it is reported as a direct child would be, 128 + 9.
    started(launch(&sup, sh("e1", "kill -KILL $$")));
    expect_state(&rx, "e1", ExecutorState::Running);
    expect_state(&rx, "e1", ExecutorState::Exited { code: 137 });
    assert_eq!(status_of(&sup, "e1"), Some(ShimStatus::Signaled { signal: 9 }));
}

fn a_graceful_stop() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    // Long enough that SIGKILL never comes: SIGTERM alone ends them.
    cfg.kill_grace = Duration::from_secs(60);
    let (sup, rx) = supervisor(cfg);
    let plain = started(launch(&sup, spec("plain", &["sleep", "1000"])));
    expect_state(&rx, "plain", ExecutorState::Running);
    let trapping = started(launch(
        &sup,
        sh(
            "trapping",
            "trap 'echo stopping; exit 0' TERM; echo ready > ready; while :; do sleep 0.05; done",
        ),
    ));
    expect_state(&rx, "trapping", ExecutorState::Running);
    wait_for_file(&sup.executor_dir(&ExecutorId::new("trapping")).join("ready"));
    assert!(sup.kill(&ExecutorId::new("plain")));
    expect_state(&rx, "plain", ExecutorState::Killed);
    // The shim survived the group's SIGTERM and recorded the command's end.
    assert_eq!(status_of(&sup, "plain"), Some(ShimStatus::Signaled { signal: 15 }));
    assert!(sup.kill(&ExecutorId::new("trapping")));
    expect_state(&rx, "trapping", ExecutorState::Killed);
    assert_eq!(status_of(&sup, "trapping"), Some(ShimStatus::Exited { code: 0 }));
    let out = sup.executor_dir(&ExecutorId::new("trapping")).join("stdout");
    assert_eq!(std::fs::read_to_string(out).unwrap(), "stopping\n");
    assert!(is_gone(plain) && is_gone(trapping));
}

fn an_unstartable_command() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(config(dir.path()));
    let l = launch(&sup, spec("e1", &["regent-no-such-command-xyz", "arg"]));
    let Launched::Failed { reason } = l else {
        panic!("expected a failure, got {l:?}");
    };
    assert!(reason.contains("regent-no-such-command-xyz"), "{reason}");
    assert!(reason.contains("No such file or directory"), "{reason}");
    expect_state(&rx, "e1", ExecutorState::Failed { reason: reason.clone() });
    assert!(sup.running().is_empty());
    assert_eq!(records(dir.path()), 0);
    assert_eq!(status_of(&sup, "e1"), Some(ShimStatus::CannotStart { reason: reason.clone() }));
    let err = std::fs::read_to_string(sup.executor_dir(&ExecutorId::new("e1")).join("stderr"));
    assert!(err.unwrap().contains("regent-no-such-command-xyz"));

    // Not executable.
    let script = dir.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    let l = launch(&sup, spec("e2", &[script.to_str().unwrap()]));
    let Launched::Failed { reason } = l else {
        panic!("expected a failure, got {l:?}");
    };
    assert!(reason.contains("not-executable") && reason.contains("Permission denied"), "{reason}");
    expect_state(&rx, "e2", ExecutorState::Failed { reason });

    // A shim that cannot be started at all.
    let dir2 = tempfile::tempdir().unwrap();
    let mut cfg = SupervisorConfig::new(dir2.path());
    cfg.shim = Some(dir2.path().join("no-such-shim"));
    let (sup2, rx2) = supervisor(cfg);
    let l = launch(&sup2, spec("e3", &["true"]));
    let Launched::Failed { reason } = l else {
        panic!("expected a failure, got {l:?}");
    };
    assert!(reason.contains("executor shim") && reason.contains("no-such-shim"), "{reason}");
    expect_state(&rx2, "e3", ExecutorState::Failed { reason });
    assert_eq!(records(dir2.path()), 0);
}

/// The helper-process mode of this binary.
const HELPER: &str = "helper-supervisor";

/// Run as `HELPER DIR ID SCRIPT [ID SCRIPT...]`: a supervisor over DIR with
/// this binary as the shim launches each script, prints their pids on one
/// line and waits to be killed with SIGKILL (bounded, in case the test dies
/// first).
fn helper(args: Vec<OsString>) -> ! {
    let args: Vec<String> = args.into_iter().map(|a| a.into_string().unwrap()).collect();
    let (sup, _left) = Supervisor::with_config(config(Path::new(&args[0])), |_| {}).unwrap();
    let pids: Vec<String> = args[1..]
        .chunks(2)
        .map(|pair| started(launch(&sup, sh(&pair[0], &pair[1]))).to_string())
        .collect();
    println!("HELPER-PIDS {}", pids.join(" "));
    std::thread::sleep(Duration::from_secs(120));
    sup.kill_all();
    std::process::exit(0)
}

/// Runs [`helper`] in a child process with these executors, waits for
/// their pids, then kills the helper with SIGKILL: the executors (and their
/// shims) keep running, no longer anyone's child here.
fn left_by_a_killed_supervisor(dir: &Path, executors: &[(&str, &str)]) -> Vec<u32> {
    let mut cmd = Command::new(this_shim());
    cmd.arg(HELPER).arg(dir);
    for (id, script) in executors {
        cmd.args([id, script]);
    }
    killed_helper(cmd, executors.len())
}

/// Runs a helper (`cmd`), waits for the pids of the `count` executors it
/// launched, then kills it with SIGKILL.
fn killed_helper(mut cmd: Command, count: usize) -> Vec<u32> {
    let mut helper = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let stdout = helper.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("HELPER-PIDS ") {
                let pids: Vec<u32> = rest.split(' ').map(|p| p.parse().unwrap()).collect();
                let _ = tx.send(pids);
            }
        }
    });
    let pids = rx.recv_timeout(DEADLINE);
    helper.kill().unwrap(); // SIGKILL: no cleanup in the helper.
    helper.wait().unwrap();
    let pids = pids.expect("the helper printed its executors' pids");
    assert_eq!(pids.len(), count);
    pids
}

/// Kills the groups when dropped (a failing test leaves nothing running).
struct Groups(Vec<u32>);

impl Drop for Groups {
    fn drop(&mut self) {
        for pgid in &self.0 {
            kill_group(*pgid);
        }
    }
}

fn adopted_executors_end_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    // Each waits for its `go` file, appends a line to `runs`, and ends.
    let script = |name: &str, end: &str| {
        format!("while [ ! -e go ]; do sleep 0.05; done; echo {name} >> {}; {end}", runs.display())
    };
    let (ok, three, killed) =
        (script("ok", "exit 0"), script("three", "exit 3"), script("killed", "sleep 1000"));
    let pids = Groups(left_by_a_killed_supervisor(
        dir.path(),
        &[("e-ok", &ok), ("e-three", &three), ("e-killed", &killed)],
    ));
    assert!(pids.0.iter().all(|p| !is_gone(*p)), "the executors outlived their worker");
    let (tx, rx) = channel();
    let mut cfg = config(dir.path());
    cfg.kill_grace = Duration::from_secs(60);
    let (sup, left) = Supervisor::with_config(cfg, move |e| {
        let _ = tx.send(e);
    })
    .expect("supervisor");
    let sup = Guarded::new(sup);
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(left.iter().all(|l| l.outcome == LeftBehindOutcome::Adopted), "{left:?}");
    let go = |id: &str| {
        std::fs::write(sup.executor_dir(&ExecutorId::new(id)).join("go"), "").unwrap();
    };
    go("e-ok");
    expect_state(&rx, "e-ok", ExecutorState::Exited { code: 0 });
    go("e-three");
    expect_state(&rx, "e-three", ExecutorState::Exited { code: 3 });
    go("e-killed");
    let log = wait_for_text(&runs, |t| t.contains("killed\n"));
    assert_eq!(log, "ok\nthree\nkilled\n");
    // A graceful stop of an adopted executor: the shim records it too.
    assert!(sup.kill(&ExecutorId::new("e-killed")));
    expect_state(&rx, "e-killed", ExecutorState::Killed);
    assert_eq!(status_of(&sup, "e-killed"), Some(ShimStatus::Signaled { signal: 15 }));
    assert_eq!(records(dir.path()), 0);
    assert!(sup.running().is_empty());
    assert!(pids.0.iter().all(|p| is_gone(*p)));
}

fn adopted_without_status_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let pids = Groups(left_by_a_killed_supervisor(dir.path(), &[("e1", "sleep 1000")]));
    let (tx, rx) = channel();
    let (sup, left) = Supervisor::with_config(config(dir.path()), move |e| {
        let _ = tx.send(e);
    })
    .expect("supervisor");
    let sup = Guarded::new(sup);
    assert_eq!(left[0].outcome, LeftBehindOutcome::Adopted, "{left:?}");
    // Someone else kills the whole group with SIGKILL: the shim writes
    // nothing, so the end is unknown.
    kill_group(pids.0[0]);
    expect_state(&rx, "e1", ExecutorState::Lost);
    assert_eq!(status_of(&sup, "e1"), None);
    assert_eq!(records(dir.path()), 0);
}

fn ended_unwatched() {
    // The helper's orphans (the shims) come to this process, which reaps
    // them: they must be gone, not zombies (an init that does not reap
    // would leave zombies, which a new supervisor adopts and sees end).
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pids = Groups(left_by_a_killed_supervisor(
        dir.path(),
        &[
            ("e-ok", "while [ ! -e go ]; do sleep 0.05; done; exit 0"),
            ("e-three", "while [ ! -e go ]; do sleep 0.05; done; exit 3"),
            ("e-gone", "sleep 1000"),
        ],
    ));
    // They end while no supervisor runs: two by themselves (their shims
    // record it), one killed with its shim (nothing recorded).
    for id in ["e-ok", "e-three"] {
        let edir = dir.path().join("executors").join(id);
        std::fs::write(edir.join("go"), "").unwrap();
    }
    kill_group(pids.0[2]);
    let end = Instant::now() + DEADLINE;
    let exists = |pid: &u32| Path::new(&format!("/proc/{pid}")).exists();
    while pids.0.iter().any(exists) {
        assert!(Instant::now() < end, "the executors never ended");
        while let Ok(Some(_)) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {}
        std::thread::sleep(Duration::from_millis(10));
    }
    let (sup, left) = Supervisor::with_config(config(dir.path()), |_| {}).expect("supervisor");
    let sup = Guarded::new(sup);
    let mut found: Vec<(String, LeftBehindOutcome, ExecutorState)> =
        left.iter().map(|l| (l.executor.to_string(), l.outcome.clone(), l.state())).collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let finished = |code| LeftBehindOutcome::Finished { state: ExecutorState::Exited { code } };
    assert_eq!(found[0].0, "e-gone");
    assert!(matches!(found[0].1, LeftBehindOutcome::Ended { .. }), "{found:?}");
    assert_eq!(found[0].2, ExecutorState::Lost);
    assert_eq!(found[1], ("e-ok".into(), finished(0), ExecutorState::Exited { code: 0 }));
    assert_eq!(found[2], ("e-three".into(), finished(3), ExecutorState::Exited { code: 3 }));
    assert_eq!(records(dir.path()), 0);
    assert!(sup.running().is_empty());
}

/// An executor whose exec checks must see its group's `env` (a port
/// variable too), its `cwd` and its `user` (when given).
fn sandboxed(id: &str, user: Option<&str>) -> (ExecutorId, ExecutorSpec) {
    let (id, mut spec) = sh(id, "sleep 1000");
    spec.env = vec![
        ("GROUP_VAR".into(), "a=b c\nsecond line".into()),
        ("REGENT_PORT_HTTP".into(), "20001".into()),
    ];
    spec.launch.cwd = Some("app/run".into());
    spec.launch.user = user.map(str::to_owned);
    (id, spec)
}

/// What an exec check of `id` prints, run through the supervisor: user,
/// working directory, the group's variable, the executor's id, its port
/// and `HELPER_ONLY` (set only in the environment of the worker process
/// that launched it, if any), one per line.
const SHOW: &str = "id -un; pwd; echo \"$GROUP_VAR\"; echo \"$REGENT_EXECUTOR_ID\"; \
                    echo \"$REGENT_PORT_HTTP\"; echo \"${HELPER_ONLY-unset}\"; exit 1";

fn check(sup: &Supervisor, rx: &Receiver<ExecEvent>, id: &str, script: &str, ms: u64) -> String {
    use regent_core::health::{CheckOutcome, CheckRun, Probe};
    sup.run_check(CheckRun {
        executor: ExecutorId::new(id),
        check: 0,
        run: 1,
        probe: Probe::Exec { command: vec!["sh".into(), "-c".into(), script.into()] },
        timeout: regent_core::Millis(ms),
    });
    let e = rx.recv_timeout(DEADLINE).expect("the check's outcome within the deadline");
    let Some(done) = e.check else { panic!("not a check's outcome: {e:?}") };
    assert_eq!((e.executor.as_str(), e.state), (id, ExecutorState::Running));
    match done.outcome {
        CheckOutcome::Failed(detail) => detail,
        other => panic!("{other:?}"),
    }
}

/// The user the executor runs as: the test user's name, or this
/// process's own.
fn user_name(user: Option<&TestUser>) -> String {
    match user {
        Some(u) => u.0.clone(),
        None => {
            let out = Command::new("id").arg("-un").output().unwrap();
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        }
    }
}

/// A work directory others may traverse (an executor's user must reach
/// its own directory in it).
fn open_work_dir() -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = dir.path().join("work");
    (dir, work)
}

fn a_check_runs_as_its_executor() {
    use std::os::unix::fs::PermissionsExt as _;
    let user = TestUser::create();
    if user.is_none() {
        println!("  (the group's user is not checked: the rest is)");
    }
    let (_dir, work) = open_work_dir();
    let mut cfg = config(&work);
    cfg.allowed_users = user.iter().map(|u| u.0.clone()).collect();
    let (sup, rx) = supervisor(cfg);
    started(launch(&sup, sandboxed("e1", user.as_ref().map(|u| u.0.as_str()))));
    expect_state(&rx, "e1", ExecutorState::Running);
    let cwd = sup.executor_dir(&ExecutorId::new("e1")).join("app/run");
    let want = format!(
        "sh exited 1: {}\n{}\na=b c\nsecond line\ne1\n20001\nunset",
        user_name(user.as_ref()),
        cwd.display()
    );
    assert_eq!(check(&sup, &rx, "e1", SHOW, 10_000), want);
    // The environment is the executor's: its user's HOME and USER with it.
    if let Some(u) = &user {
        let run_as = regent_std::exec::user::RunAs::lookup(&u.0).unwrap();
        let ids = check(&sup, &rx, "e1", "id -u; id -g; echo \"$USER $HOME\"; exit 1", 10_000);
        let want = format!(
            "sh exited 1: {}\n{}\n{} {}",
            run_as.uid,
            run_as.gid,
            u.0,
            run_as.home.display()
        );
        assert_eq!(ids, want);
    }
    // Still killed, its whole group, at its timeout.
    let started_at = Instant::now();
    let slow = check(&sup, &rx, "e1", "sleep 30 & sleep 30", 300);
    assert_eq!(slow, "sh ran past 300 ms");
    assert!(started_at.elapsed() < Duration::from_secs(10), "its group killed, pipes closed");
    // Its record, which holds the environment, is the worker's alone.
    let running = work.join(RUNNING_DIR);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&running), 0o700);
    let rec = std::fs::read_dir(&running).unwrap().next().unwrap().unwrap().path();
    assert_eq!(mode(&rec), 0o600);
    assert!(std::fs::read_to_string(&rec).unwrap().contains("\nsandbox={"));
    assert!(sup.kill(&ExecutorId::new("e1")));
    expect_state(&rx, "e1", ExecutorState::Killed);
}

/// The helper-process mode that launches one [`sandboxed`] executor.
const HELPER_SANDBOXED: &str = "helper-sandboxed";

/// Run as `HELPER_SANDBOXED DIR ID [USER]`: [`helper`], with one
/// [`sandboxed`] executor run as USER when given.
fn helper_sandboxed(args: Vec<OsString>) -> ! {
    let args: Vec<String> = args.into_iter().map(|a| a.into_string().unwrap()).collect();
    let mut cfg = config(Path::new(&args[0]));
    cfg.allowed_users = args.get(2).cloned().into_iter().collect();
    let (sup, _left) = Supervisor::with_config(cfg, |_| {}).unwrap();
    let pid = started(launch(&sup, sandboxed(&args[1], args.get(2).map(String::as_str))));
    println!("HELPER-PIDS {pid}");
    std::thread::sleep(Duration::from_secs(120));
    sup.kill_all();
    std::process::exit(0)
}

fn a_readopted_check_runs_as_before() {
    let user = TestUser::create();
    let (_dir, work) = open_work_dir();
    let mut cmd = Command::new(this_shim());
    cmd.arg(HELPER_SANDBOXED).arg(&work).arg("e1");
    if let Some(u) = &user {
        cmd.arg(&u.0);
    }
    // Only the first worker process has it: the executor got it, so its
    // checks do, under the next worker process too.
    cmd.env("HELPER_ONLY", "from the first worker");
    let _pids = Groups(killed_helper(cmd, 1));
    // The next worker process: no user allowed, no HELPER_ONLY; what the
    // executor was started with comes from its record.
    let (tx, rx) = channel();
    let (sup, left) = Supervisor::with_config(config(&work), move |e| {
        let _ = tx.send(e);
    })
    .expect("supervisor");
    let sup = Guarded::new(sup);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].outcome, LeftBehindOutcome::Adopted, "{left:?}");
    let cwd = sup.executor_dir(&ExecutorId::new("e1")).join("app/run");
    let want = format!(
        "sh exited 1: {}\n{}\na=b c\nsecond line\ne1\n20001\nfrom the first worker",
        user_name(user.as_ref()),
        cwd.display()
    );
    assert_eq!(check(&sup, &rx, "e1", SHOW, 10_000), want);
    assert!(sup.kill(&ExecutorId::new("e1")));
    expect_state(&rx, "e1", ExecutorState::Killed);
}

/// A singleton executor (docs/design.md#issue-45): `disconnect = {
/// stop_after = STOP_AFTER_MS }`, `kill_grace = GRACE_MS`.
fn singleton(
    id: &str,
    script: &str,
    stop_after_ms: u64,
    grace_ms: u64,
) -> (ExecutorId, ExecutorSpec) {
    let (id, mut spec) = sh(id, script);
    spec.launch.disconnect = Some(regent_core::launch::Disconnect::after_ms(stop_after_ms));
    spec.launch.kill_grace_ms = Some(grace_ms);
    (id, spec)
}

/// The end the worker's core gives its own cut-off stop.
fn cut_off(stop_after_ms: u64) -> ExecutorState {
    ExecutorState::Failed {
        reason: regent_core::launch::cut_off_reason(regent_core::launch::Disconnect::after_ms(
            stop_after_ms,
        )),
    }
}

/// The next event, with when it came (boot-clock ms).
fn next_event(rx: &Receiver<ExecEvent>) -> (ExecEvent, u64) {
    let e = rx.recv_timeout(DEADLINE).expect("an event within the deadline");
    (e, regent_std::clock::boot_ms())
}

/// Runs forever, stamping `alive` (so a test sees it run to the end).
const LOOP: &str = "while :; do date +%s%N >> alive; sleep 0.05; done";

fn a_lapsing_word_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(config(dir.path()));
    let word = regent_std::clock::boot_ms();
    sup.set_word(word);
    let text = std::fs::read_to_string(dir.path().join(shim::WORD_FILE)).unwrap();
    assert_eq!(text, format!("{word}\n"), "the word file holds the boot-clock ms");
    // One ends on SIGTERM; the other ignores it (its children inherit
    // that): SIGKILL after the group's grace.
    let polite = started(launch(&sup, singleton("polite", LOOP, 1_000, 400)));
    expect_state(&rx, "polite", ExecutorState::Running);
    let stubborn =
        started(launch(&sup, singleton("stubborn", &format!("trap '' TERM; {LOOP}"), 1_000, 400)));
    expect_state(&rx, "stubborn", ExecutorState::Running);
    let mut ends = std::collections::BTreeMap::new();
    for _ in 0..2 {
        let (e, at) = next_event(&rx);
        assert_eq!(e.state, cut_off(1_000), "{e:?}");
        ends.insert(e.executor.to_string(), at);
    }
    let (p, s) = (ends["polite"], ends["stubborn"]);
    // Not before word + stop_after; SIGKILL not before the grace; both
    // within a poll (100 ms), the grace and a generous slack.
    assert!(p >= word + 1_000, "stopped {} ms after the word", p - word);
    assert!(s >= word + 1_000 + 400, "SIGKILL {} ms after the word, before the grace", s - word);
    assert!(s <= word + 1_000 + 100 + 400 + 3_000, "stopped {} ms after the word", s - word);
    assert!(p <= word + 1_000 + 100 + 3_000, "stopped {} ms after the word", p - word);
    for id in ["polite", "stubborn"] {
        assert_eq!(status_of(&sup, id), Some(ShimStatus::CutOff { stop_after_ms: 1_000 }), "{id}");
        let err = std::fs::read_to_string(sup.executor_dir(&ExecutorId::new(id)).join("stderr"));
        assert!(err.unwrap().contains("no word from a master"), "{id} says why on its stderr");
    }
    assert!(is_gone(polite) && is_gone(stubborn));
    // Nothing of the groups stamps any more.
    let alive = sup.executor_dir(&ExecutorId::new("stubborn")).join("alive");
    let before = std::fs::read_to_string(&alive).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(std::fs::read_to_string(&alive).unwrap(), before, "its helpers are gone too");
    assert_eq!(records(dir.path()), 0);
}

fn a_fresh_word_keeps_it_running() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(config(dir.path()));
    sup.set_word(regent_std::clock::boot_ms());
    let pid = started(launch(&sup, singleton("kept", LOOP, 500, 200)));
    expect_state(&rx, "kept", ExecutorState::Running);
    // The worker hears from its master every 100 ms for 2.5 s: five
    // times stop_after.
    let until = Instant::now() + Duration::from_millis(2_500);
    let mut last = 0;
    while Instant::now() < until {
        last = regent_std::clock::boot_ms();
        sup.set_word(last);
        assert!(rx.try_recv().is_err(), "stopped while its worker heard from a master");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!is_gone(pid), "runs on under a fresh word");
    // Then no more word: stopped within bounds.
    let (e, at) = next_event(&rx);
    assert_eq!(e.state, cut_off(500), "{e:?}");
    assert!(at >= last + 500, "stopped {} ms after the last word", at - last);
    assert!(at <= last + 500 + 50 + 3_000, "stopped {} ms after the last word", at - last);
    assert!(is_gone(pid));
}

fn no_word_file_counts_from_start() {
    let dir = tempfile::tempdir().unwrap();
    let (sup, rx) = supervisor(config(dir.path()));
    assert!(!dir.path().join(shim::WORD_FILE).exists());
    let before = regent_std::clock::boot_ms();
    let pid = started(launch(&sup, singleton("unworded", LOOP, 800, 200)));
    expect_state(&rx, "unworded", ExecutorState::Running);
    let (e, at) = next_event(&rx);
    assert_eq!(e.state, cut_off(800), "{e:?}");
    assert!(at >= before + 800, "stopped {} ms after its launch", at - before);
    assert!(at <= before + 800 + 80 + 3_000, "stopped {} ms after its launch", at - before);
    assert!(is_gone(pid));
}

/// The helper-process mode that launches a singleton.
const HELPER_SINGLETON: &str = "helper-singleton";

/// Run as `HELPER_SINGLETON DIR ID STOP_AFTER_MS SCRIPT`: a supervisor over
/// DIR writes the word (now), launches a singleton, prints its pid and
/// waits to be killed (as [`helper`]).
fn helper_singleton(args: Vec<OsString>) -> ! {
    let args: Vec<String> = args.into_iter().map(|a| a.into_string().unwrap()).collect();
    let (sup, _left) = Supervisor::with_config(config(Path::new(&args[0])), |_| {}).unwrap();
    sup.set_word(regent_std::clock::boot_ms());
    let stop_after = args[2].parse().unwrap();
    let pid = started(launch(&sup, singleton(&args[1], &args[3], stop_after, 200)));
    println!("HELPER-PIDS {pid}");
    std::thread::sleep(Duration::from_secs(120));
    sup.kill_all();
    std::process::exit(0)
}

fn readopted_singleton_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(this_shim());
    cmd.arg(HELPER_SINGLETON).arg(dir.path()).args(["solo", "2000", LOOP]);
    let killed_at = regent_std::clock::boot_ms();
    let pids = Groups(killed_helper(cmd, 1));
    let word: u64 = shim::read_word(&dir.path().join(shim::WORD_FILE)).expect("the helper's word");
    assert!(word <= killed_at + DEADLINE.as_millis() as u64);
    // A new worker process over the same directory re-adopts it; it has
    // had no word from a master, so it writes none: the shim stops the
    // command at the old word + stop_after, and the new supervisor
    // reports the end as the core's own cut-off stop is reported.
    let (tx, rx) = channel();
    let (sup, left) = Supervisor::with_config(config(dir.path()), move |e| {
        let _ = tx.send(e);
    })
    .expect("supervisor");
    let _sup = Guarded::new(sup);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0].outcome, LeftBehindOutcome::Adopted, "{left:?}");
    assert_eq!(left[0].disconnect_ms, Some(2_000));
    let (e, at) = next_event(&rx);
    assert_eq!(e.executor.as_str(), "solo");
    assert_eq!(e.state, cut_off(2_000), "{e:?}");
    assert!(at >= word + 2_000, "stopped {} ms after the word", at - word);
    assert!(at <= word + 2_000 + 200 + 200 + 3_000, "stopped {} ms after the word", at - word);
    assert!(pids.0.iter().all(|p| is_gone(*p)));
    assert_eq!(records(dir.path()), 0);
}

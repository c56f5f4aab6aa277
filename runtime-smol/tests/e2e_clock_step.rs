//! End-to-end: processes restarted after their host's wall clock stepped
//! back an hour (NTP after a reboot, a restored VM) are still newer than
//! their dead predecessors (docs/design.md#issue-20, scenario 6; docs/design.md#identity-and-time-do-not-trust-the-wall-clock).
//!
//! The step is injected into the restarted process alone with Debian's
//! libfaketime (`LD_PRELOAD`, `FAKETIME=-1h`; `scripts/test` installs the
//! `faketime` package): its wall clock reads an hour earlier than the
//! master's, its monotonic and boot clocks are untouched. Real `regent`
//! processes on loopback; outcomes are asserted within generous bounds,
//! never timings.

mod support;

use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, executors, wait_for, Cluster, MasterSpec, Proc,
};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// Debian's libfaketime (package `libfaketime`, brought by `faketime`):
/// `/usr/lib/<multiarch triple>/faketime/libfaketime.so.1`.
fn libfaketime() -> String {
    let found = std::fs::read_dir("/usr/lib").ok().and_then(|dir| {
        dir.filter_map(|e| e.ok())
            .map(|e| e.path().join("faketime").join("libfaketime.so.1"))
            .find(|p| p.exists())
    });
    let path = found.expect(
        "no /usr/lib/*/faketime/libfaketime.so.1: install Debian's faketime package \
         (scripts/test does)",
    );
    path.to_str().expect("a UTF-8 path").to_owned()
}

/// The environment that makes a process's wall clock read an hour earlier
/// (only the wall clock: `CLOCK_MONOTONIC` is left alone).
fn clock_stepped_back_an_hour() -> Vec<(&'static str, String)> {
    vec![
        ("LD_PRELOAD", libfaketime()),
        ("FAKETIME", "-1h".to_owned()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
        ("FAKETIME_DONT_RESET", "1".to_owned()),
    ]
}

/// [`clock_stepped_back_an_hour`] as the support code takes it.
fn env_of<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The master's `/api/state`.
fn state(spec: &MasterSpec) -> Result<serde_json::Value, String> {
    api_state(&spec.http_addr()).ok_or_else(|| "the master does not answer".to_owned())
}

/// A master `m1` with `args` (and `--http`), and worker `w1` (1 core,
/// 256 MiB) ALIVE on it.
fn master_and_worker(c: &Cluster, args: &[&str]) -> (MasterSpec, Proc, Proc) {
    let spec = MasterSpec::new("m1", args);
    let master = c.master(&spec);
    let worker = c.worker("w1", &[spec.addr()], 1, 256, &[]);
    wait_for(BOUND, "the worker ALIVE", || alive_with_workers(&state(&spec)?, &["w1"]));
    (spec, master, worker)
}

/// Starts `regent submit --framework-id FRAMEWORK` (one slot of `sleep
/// 1000`) with `env`.
fn submit(
    c: &Cluster,
    spec: &MasterSpec,
    name: &str,
    framework: &str,
    env: &[(&str, &str)],
) -> Proc {
    let opts = ["--framework-id", framework, "--executors", "1", "--cores", "1", "--memory", "64"];
    c.submit_env(name, &[spec.addr()], &opts, &["sh", "-c", "sleep 1000"], env)
}

/// Waits for exactly one executor RUNNING; its id.
fn the_one_running(spec: &MasterSpec) -> String {
    wait_for(BOUND, "one executor RUNNING", || match running(spec)?.as_slice() {
        [id] => Ok(id.clone()),
        ex => Err(format!("running {ex:?}")),
    })
}

/// The executors RUNNING by the master's view.
fn running(spec: &MasterSpec) -> Result<Vec<String>, String> {
    let ex = executors(&state(spec)?);
    Ok(ex.into_iter().filter(|(_, s)| s == "RUNNING").map(|(id, _)| id).collect())
}

/// A worker killed with `kill -9` and restarted over the same work dir with
/// its clock an hour back registers (a new incarnation, higher than its
/// predecessor's, which the master still lists) and runs the executor the
/// master launches into its slot, instead of being told `Shutdown`.
///
/// Failed before the incarnation counter (`next_ordered_id` over
/// `<work dir>/incarnation`): the incarnation was wall-clock ordered, so
/// the restarted worker's was an hour lower than its dead predecessor's and
/// the master told it "worker id w1 conflict: incarnation ... was replaced
/// by incarnation ..."; it exited 1.
#[test]
fn a_worker_restarted_with_its_clock_an_hour_back_registers_and_runs_an_executor() {
    let c = Cluster::new("clock-step-worker");
    // The dead predecessor stays listed throughout the test.
    let (spec, _master, mut worker) =
        master_and_worker(&c, &["--recovery", "none", "--worker-timeout", "120000"]);
    let masters = vec![spec.addr()];
    let mut submit = c.submit(
        "submit",
        &masters,
        &["--executors", "1", "--cores", "1", "--memory", "64"],
        &["sh", "-c", "sleep 1000"],
    );
    let first = the_one_running(&spec);

    worker.kill9();
    // Its executor is killed with it (no adoption to muddle what runs), and
    // the master launches a new one into the slot once the new incarnation
    // registers.
    let env = clock_stepped_back_an_hour();
    let mut worker = c.worker_env("w1", &masters, 1, 256, &["--kill-left-behind"], &env_of(&env));
    let second = wait_for(BOUND, "a new executor RUNNING on the restarted worker", || {
        worker.assert_running("(restarted with its clock an hour back)");
        match running(&spec)?.as_slice() {
            [id] if *id != first => Ok(id.clone()),
            ex => Err(format!("running {ex:?}; worker stderr:\n{}", worker.stderr())),
        }
    });
    assert!(alive_with_workers(&state(&spec).unwrap(), &["w1"]).is_ok(), "w1 ALIVE");
    // Past registration and a launch: a conflict would have been sent.
    std::thread::sleep(Duration::from_secs(1));
    worker.assert_running("after registering");
    assert!(!worker.stderr().contains("conflict"), "worker:\n{}", worker.stderr());
    assert_eq!(running(&spec).unwrap(), vec![second], "the one executor still runs");
    submit.assert_running("with its executor running");
}

/// Proof that the fault is injected: a process under
/// [`clock_stepped_back_an_hour`] reads a wall clock an hour earlier.
#[test]
fn the_injected_step_moves_the_wall_clock_back_an_hour() {
    let out = std::process::Command::new("date")
        .arg("+%s")
        .envs(clock_stepped_back_an_hour())
        .output()
        .expect("run date");
    let faked: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("seconds");
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    assert!(real.abs_diff(faked + 3600) < 60, "faked {faked}, real {real}");
}

/// A `regent submit --framework-id F` killed with `kill -9` and restarted
/// with its clock an hour back subscribes and keeps the framework's
/// executor (adopted, not relaunched), instead of being told that F
/// "failed over to" its dead predecessor and stopping for good.
///
/// Failed before the instance counter (`next_instance_id` over
/// `<state dir>/submit-instance`, the state dir being `$XDG_STATE_HOME/regent`
/// here): the instance id was wall-clock ordered, so the restarted
/// submitter's was an hour lower than its predecessor's, which the master
/// still held; it was refused and exited 3.
#[test]
fn a_submit_restarted_with_its_clock_an_hour_back_keeps_its_framework() {
    let c = Cluster::new("clock-step-submit");
    let (spec, _master, mut worker) = master_and_worker(&c, &["--recovery", "none"]);
    let mut first = submit(&c, &spec, "submit-1", "fw-clock-step", &[]);
    let executor = the_one_running(&spec);

    first.kill9();
    let env = clock_stepped_back_an_hour();
    let mut second = submit(&c, &spec, "submit-2", "fw-clock-step", &env_of(&env));
    wait_for(BOUND, "the restarted submit subscribed", || {
        if let Some(s) = second.exit_status() {
            panic!("the restarted submit stopped ({s}):\n{}\n{}", second.stdout(), second.stderr());
        }
        if second.stdout().contains("subscribed to") {
            Ok(())
        } else {
            Err(format!("stdout:\n{}", second.stdout()))
        }
    });
    // Past the subscription: a refusal would have been sent by now.
    std::thread::sleep(Duration::from_secs(1));
    second.assert_running("after subscribing");
    assert!(!second.stderr().contains("failed over"), "submit:\n{}", second.stderr());
    assert_eq!(running(&spec).unwrap(), vec![executor], "the executor adopted, still alone");
    worker.assert_running("at the end");
}

/// A second `regent submit --framework-id F` started while the first still
/// runs, on the same host (the same state dir) but with its clock an hour
/// back, takes the framework over: the first is told it failed over and
/// stops with code 3, the second keeps the executor. No master rule about
/// disconnected instances can decide this one, as the first is connected:
/// only the durable instance series orders the two.
///
/// Failed before the instance counter: the second was an hour "older", so
/// the master refused it ("failed over to" the first) and it exited 3.
#[test]
fn a_takeover_from_a_clock_an_hour_back_still_takes_the_framework_over() {
    let c = Cluster::new("clock-step-takeover");
    let (spec, _master, mut worker) = master_and_worker(&c, &["--recovery", "none"]);
    let mut first = submit(&c, &spec, "submit-1", "fw-clock-takeover", &[]);
    let executor = the_one_running(&spec);

    let env = clock_stepped_back_an_hour();
    let mut second = submit(&c, &spec, "submit-2", "fw-clock-takeover", &env_of(&env));
    let status = wait_for(BOUND, "one of the two submits stops", || {
        if let Some(s) = second.exit_status() {
            panic!("the newer submit stopped ({s}):\n{}\n{}", second.stdout(), second.stderr());
        }
        first.exit_status().ok_or_else(|| "both run".to_owned())
    });
    assert_eq!(status.code(), Some(3), "the first submit failed over:\n{}", first.stderr());
    second.assert_running("after taking over");
    assert_eq!(running(&spec).unwrap(), vec![executor], "the executor adopted, still alone");
    worker.assert_running("at the end");
}

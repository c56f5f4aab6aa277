//! End-to-end: upgrading (restarting) a worker daemon without killing its
//! executors. Real `regent` processes on loopback; outcomes are asserted
//! within generous bounds, never timings.
//!
//! * A worker killed with `kill -9` leaves its executors running in their
//!   own process groups; a new worker process with the same id and work dir
//!   re-adopts them: the same pids keep running, the master shows them
//!   RUNNING on that worker and places no replacement; when they end, the
//!   application completes. Their shims (`regent executor-shim`, the group
//!   leaders) record how they ended, so the new worker reports them EXITED
//!   with their codes: a finished executor is not run again, one that exits
//!   3 is a failure with code 3 (its slot retried once). The same when
//!   they end while the worker is down.
//! * A record whose boot id is not this machine's names a live process of
//!   someone else's (here: the test's own): it is neither adopted nor
//!   killed, and the worker's log says so.
//! * `--kill-left-behind`: the executors are killed and replaced.

mod support;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, leaders_with_marker, pid_alive, recorded_pgids, unique,
    wait_for, wait_until, Cluster, MasterSpec, Proc,
};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// `(id, worker, state)` of every executor the master shows.
fn executors(state: &Value) -> Vec<(String, String, String)> {
    state["executors"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| {
                    let s = |k: &str| e[k].as_str().unwrap_or("?").to_owned();
                    (s("id"), s("worker_id"), s("state"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The executors' default script: wait for the release file (`$0`).
const WAIT_FOR_RELEASE: &str = "while [ ! -e \"$0\" ]; do sleep 0.2; done";

/// `(state, exit_code)` of executor `id` as the master shows it.
fn outcome(state: &Value, id: &str) -> (String, Option<i64>) {
    let e = state["executors"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["id"] == id))
        .unwrap_or(&Value::Null);
    (e["state"].as_str().unwrap_or("?").to_owned(), e["exit_code"].as_i64())
}

/// A master, a worker `w1` and an application of two executors that each
/// wait for `release` to exist (a marker in their command line).
struct Setup {
    c: Cluster,
    spec: MasterSpec,
    masters: Vec<String>,
    master: Proc,
    worker: Proc,
    submit: Proc,
    release: std::path::PathBuf,
    marker: String,
    /// Extra arguments of every `regent worker` (the runtime).
    worker_args: &'static [&'static str],
}

impl Setup {
    fn start(name: &str, worker_args: &'static [&'static str]) -> Setup {
        Setup::start_with(name, false, worker_args)
    }

    /// `filesystem`: the master keeps its state in a filesystem store (it
    /// can be restarted), else `--recovery none`.
    fn start_with(name: &str, filesystem: bool, worker_args: &'static [&'static str]) -> Setup {
        Setup::start_script(name, filesystem, worker_args, WAIT_FOR_RELEASE)
    }

    /// [`Setup::start_with`] with executors running `sh -c SCRIPT RELEASE
    /// RUNS`: `$0` is the release file, `$1` a file in the cluster's dir
    /// ([`Setup::runs`]).
    fn start_script(
        name: &str,
        filesystem: bool,
        worker_args: &'static [&'static str],
        script: &str,
    ) -> Setup {
        let c = Cluster::new(name);
        let store = c.path("store");
        let store = store.to_str().expect("a UTF-8 temp dir");
        let spec = if filesystem {
            MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store])
        } else {
            MasterSpec::new("m1", &["--recovery", "none"])
        };
        let masters = vec![spec.addr()];
        let master = c.master(&spec);
        let worker = c.worker("w1", &masters, 2, 256, worker_args);
        let marker = unique("upgrade");
        let release = c.path(&format!("{marker}.release"));
        let release_arg = release.to_str().expect("a UTF-8 temp dir").to_owned();
        let runs = c.path("runs");
        let runs_arg = runs.to_str().expect("a UTF-8 temp dir").to_owned();
        wait_for(BOUND, "the worker ALIVE", || {
            let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
            alive_with_workers(&state, &["w1"])
        });
        let submit = c.submit(
            "submit",
            &masters,
            &["--executors", "2", "--cores", "1", "--memory", "64"],
            &["sh", "-c", script, &release_arg, &runs_arg],
        );
        Setup { c, spec, masters, master, worker, submit, release, marker, worker_args }
    }

    /// The file the executors of [`Setup::start_script`] may append to.
    fn runs(&self) -> std::path::PathBuf {
        self.c.path("runs")
    }

    fn state(&self) -> Result<Value, String> {
        api_state(&self.spec.http_addr()).ok_or_else(|| "the master does not answer".to_owned())
    }

    /// The two executors RUNNING on w1 and their process groups (each the
    /// pid of an executor leading its own group, recorded in the work dir).
    fn running(&self) -> (BTreeSet<String>, BTreeSet<u32>) {
        wait_for(BOUND, "two executors RUNNING on w1, recorded, leading their groups", || {
            let ex = executors(&self.state()?);
            let ids: BTreeSet<String> = ex
                .iter()
                .filter(|(_, w, s)| w == "w1" && s == "RUNNING")
                .map(|(id, _, _)| id.clone())
                .collect();
            let live = ex.iter().filter(|(_, _, s)| s == "RUNNING" || s == "LAUNCHING").count();
            let recorded: BTreeSet<u32> =
                recorded_pgids(&self.c.work_dir("w1")).into_iter().collect();
            let leaders: BTreeSet<u32> = leaders_with_marker(&self.marker).into_iter().collect();
            if ids.len() == 2 && live == 2 && recorded.len() == 2 && recorded == leaders {
                Ok((ids, leaders))
            } else {
                Err(format!("executors {ex:?}, recorded groups {recorded:?}, leaders {leaders:?}"))
            }
        })
    }

    fn kill9_worker(&mut self, pgids: &BTreeSet<u32>) {
        self.worker.kill9();
        std::thread::sleep(Duration::from_millis(500));
        let leaders: BTreeSet<u32> = leaders_with_marker(&self.marker).into_iter().collect();
        assert_eq!(&leaders, pgids, "the executors outlive their worker's kill -9");
    }

    fn release_and_complete(&mut self) {
        std::fs::write(&self.release, b"go").expect("write the release file");
        let status = self.submit.wait_exit(BOUND);
        assert!(
            status.success(),
            "the application completes: {status:?}\n{}",
            support::cluster::tail(&self.submit.stderr(), 30)
        );
    }
}

#[test]
fn a_restarted_worker_readopts_its_executors_and_the_master_keeps_them() {
    readopt(&[]);
}

#[test]
fn a_restarted_std_runtime_worker_readopts_its_executors_too() {
    readopt(&["--runtime", "std"]);
}

#[test]
fn a_worker_readopts_its_executors_under_a_master_that_restarted_meanwhile() {
    readopt_with(true, &[]);
}

fn readopt(worker_args: &'static [&'static str]) {
    readopt_with(false, worker_args)
}

/// `master_restarts`: the master (filesystem store) is killed with `kill
/// -9` too while the worker is down, and started again before the worker:
/// it recovers the worker (old incarnation) and the framework from its
/// store, then adopts what the new worker process reports.
fn readopt_with(master_restarts: bool, worker_args: &'static [&'static str]) {
    let mut s = Setup::start_with("upgrade-adopt", master_restarts, worker_args);
    let (ids, pgids) = s.running();
    s.kill9_worker(&pgids);
    if master_restarts {
        s.master.kill9();
        s.master = s.c.master(&s.spec);
    }

    let mut worker = s.c.worker("w1", &s.masters, 2, 256, s.worker_args);
    wait_until(BOUND, "the new worker adopts both executors", || {
        worker
            .stderr()
            .matches("adopted an executor a previous worker process left running")
            .count()
            == 2
    });
    // The master shows the same executors RUNNING on the new incarnation
    // of w1, and nothing else: no replacement was placed.
    let check = |s: &Setup| -> Result<(), String> {
        let state = s.state()?;
        alive_with_workers(&state, &["w1"])?;
        let ex = executors(&state);
        let running: BTreeSet<String> = ex
            .iter()
            .filter(|(_, w, st)| w == "w1" && st == "RUNNING")
            .map(|(id, _, _)| id.clone())
            .collect();
        let others: Vec<_> = ex.iter().filter(|(id, _, _)| !ids.contains(id)).collect();
        if running == ids && others.is_empty() {
            Ok(())
        } else {
            Err(format!("executors {ex:?}"))
        }
    };
    wait_for(BOUND, "the adopted executors RUNNING on w1, no replacement", || check(&s));
    // A while later it is still so, and the same processes run.
    std::thread::sleep(Duration::from_secs(2));
    check(&s).unwrap_or_else(|e| panic!("after the adoption settled: {e}"));
    worker.assert_running("after adopting");
    let leaders: BTreeSet<u32> = leaders_with_marker(&s.marker).into_iter().collect();
    assert_eq!(leaders, pgids, "the same executor processes keep running");

    // They end: the new worker sees it (it is not their parent, but their
    // shims recorded how they ended: exit 0), reports them EXITED 0, and the
    // application completes with no slot run again.
    s.release_and_complete();
    for pgid in &pgids {
        wait_until(BOUND, "the adopted executor gone", || !pid_alive(*pgid));
    }
    let state = s.state().expect("the master answers");
    let all = executors(&state);
    assert_eq!(all.len(), 2, "no replacement was ever placed: {all:?}");
    for id in &ids {
        assert_eq!(outcome(&state, id), ("EXITED".to_owned(), Some(0)), "{id}: {all:?}");
    }
    worker.assert_running("after the application completed");
    s.worker = worker;
}

/// Each executor appends its id to the runs file, waits for the release
/// file, then exits: the first of them to get there with code 3 (an atomic
/// `mkdir` decides), the others (and the retry) with 0.
const RUN_ONCE_THEN_EXIT: &str = "echo \"$REGENT_EXECUTOR_ID\" >> \"$1\"; \
     while [ ! -e \"$0\" ]; do sleep 0.2; done; \
     if mkdir \"$0.failed-once\" 2>/dev/null; then exit 3; fi; exit 0";

#[test]
fn adopted_executors_that_finish_are_reported_exactly_and_not_run_again() {
    adopted_executors_finish(&[]);
}

#[test]
fn adopted_std_runtime_executors_that_finish_are_reported_exactly_too() {
    adopted_executors_finish(&["--runtime", "std"]);
}

/// Two executors re-adopted after `kill -9` of their worker, then released:
/// one exits 0, one exits 3. The new worker reports each exactly (EXITED 0,
/// EXITED 3 — no LOST): the one that exited 0 is not run again, the one
/// that exited 3 is a failure (retried once, which exits 0), and the
/// application completes. Each run appended one line to the runs file.
fn adopted_executors_finish(worker_args: &'static [&'static str]) {
    let mut s = Setup::start_script("upgrade-finish", false, worker_args, RUN_ONCE_THEN_EXIT);
    let (ids, pgids) = s.running();
    s.kill9_worker(&pgids);
    let mut worker = s.c.worker("w1", &s.masters, 2, 256, s.worker_args);
    wait_until(BOUND, "the new worker adopts both executors", || {
        worker
            .stderr()
            .matches("adopted an executor a previous worker process left running")
            .count()
            == 2
    });
    wait_for(BOUND, "the adopted executors RUNNING on the new w1", || {
        let state = s.state()?;
        alive_with_workers(&state, &["w1"])?;
        let ex = executors(&state);
        let running = ex.iter().filter(|(id, _, st)| ids.contains(id) && st == "RUNNING").count();
        if running == 2 && ex.len() == 2 {
            Ok(())
        } else {
            Err(format!("executors {ex:?}"))
        }
    });
    s.release_and_complete();
    for pgid in &pgids {
        wait_until(BOUND, "the adopted executor gone", || !pid_alive(*pgid));
    }
    let state = s.state().expect("the master answers");
    let all = executors(&state);
    let outcomes: Vec<(String, Option<i64>)> = ids.iter().map(|id| outcome(&state, id)).collect();
    let mut sorted = outcomes.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        vec![("EXITED".to_owned(), Some(0)), ("EXITED".to_owned(), Some(3))],
        "the adopted executors reported as they ended: {all:?}\n{}",
        support::cluster::tail(&worker.stderr(), 30)
    );
    let failed = ids
        .iter()
        .zip(&outcomes)
        .find(|(_, o)| o.1 == Some(3))
        .map(|(id, _)| id.clone())
        .expect("one exited 3");
    let submit_out = s.submit.stdout();
    assert!(
        submit_out.lines().any(|l| l.contains(&failed) && l.contains("EXITED 3")),
        "regent submit shows the failure with its code:\n{submit_out}"
    );
    // Only the slot that failed ran again, once, and its retry exited 0.
    let retries: Vec<_> = all.iter().filter(|(id, _, _)| !ids.contains(id)).collect();
    assert_eq!(retries.len(), 1, "one retry, of the failed slot: {all:?}");
    assert_eq!(outcome(&state, &retries[0].0), ("EXITED".to_owned(), Some(0)), "{all:?}");
    let runs = std::fs::read_to_string(s.runs()).expect("the runs file");
    let mut lines: Vec<&str> = runs.lines().collect();
    lines.sort_unstable();
    let mut want: Vec<&str> =
        ids.iter().map(String::as_str).chain([retries[0].0.as_str()]).collect();
    want.sort_unstable();
    assert_eq!(lines, want, "each executor ran exactly once:\n{runs}");
    assert!(!worker.stderr().contains("exit status is unknown"), "{}", worker.stderr());
    worker.assert_running("after the application completed");
    s.worker = worker;
}

/// The executors end while their worker is down (after its `kill -9`,
/// before the new process starts): their shims recorded how, and the new
/// worker reports that (the exit 0 completes its slot even though the
/// master writes the old incarnation's executors off as it registers).
/// Nothing that finished runs again; only the slot that exited 3 does.
#[test]
fn executors_that_finish_while_their_worker_is_down_are_not_run_again() {
    // The killed worker's orphans (the shims) come to this process, which
    // reaps them below: then they are gone, not zombies (which a new worker
    // would adopt and see end at once).
    use rustix::process::{set_child_subreaper, waitpid, Pid, WaitOptions};
    set_child_subreaper(Some(rustix::process::getpid())).expect("become a subreaper");
    let mut s = Setup::start_script("upgrade-down", false, &[], RUN_ONCE_THEN_EXIT);
    let (ids, pgids) = s.running();
    s.kill9_worker(&pgids);
    std::fs::write(&s.release, b"go").expect("write the release file");
    for pgid in &pgids {
        wait_until(BOUND, "the executor (and its shim) ended and was reaped", || {
            let _ = waitpid(Pid::from_raw(*pgid as i32), WaitOptions::NOHANG);
            !Path::new(&format!("/proc/{pgid}")).exists()
        });
    }
    let mut worker = s.c.worker("w1", &s.masters, 2, 256, s.worker_args);
    wait_until(BOUND, "the new worker finds both ended, as their shims recorded", || {
        worker.stderr().matches("ended while no worker watched it").count() == 2
    });
    let status = s.submit.wait_exit(BOUND);
    assert!(
        status.success(),
        "the application completes: {status:?}\n{}\n{}",
        support::cluster::tail(&s.submit.stdout(), 30),
        support::cluster::tail(&worker.stderr(), 30)
    );
    let state = s.state().expect("the master answers");
    let all = executors(&state);
    let succeeded: Vec<_> =
        ids.iter().filter(|id| outcome(&state, id) == ("EXITED".to_owned(), Some(0))).collect();
    assert_eq!(succeeded.len(), 1, "the one that exited 0 is recorded so: {all:?}");
    let runs = std::fs::read_to_string(s.runs()).expect("the runs file");
    let mut lines: Vec<&str> = runs.lines().collect();
    lines.sort_unstable();
    let mut want: Vec<&str> = all.iter().map(|(id, _, _)| id.as_str()).collect();
    want.sort_unstable();
    assert_eq!(lines, want, "every executor the master knows ran once:\n{runs}");
    assert_eq!(all.len(), 3, "only the slot that exited 3 ran again: {all:?}");
    worker.assert_running("after the application completed");
    s.worker = worker;
}

#[test]
fn a_record_of_another_boot_or_without_start_time_is_neither_adopted_nor_killed() {
    let c = Cluster::new("upgrade-foreign");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let masters = vec![spec.addr()];
    let _master = c.master(&spec);
    let state = || api_state(&spec.http_addr()).ok_or_else(|| "no answer".to_owned());
    let mut worker = c.worker("w1", &masters, 1, 256, &[]);
    wait_for(BOUND, "the worker ALIVE", || alive_with_workers(&state()?, &["w1"]));
    worker.kill9();

    // Processes of someone else's (the test's own), each leading its group,
    // named by records the previous incarnation "left": one of another boot
    // (with the process's real start time), one with no start time.
    use std::os::unix::process::CommandExt;
    let spawn =
        || std::process::Command::new("sleep").arg("1000").process_group(0).spawn().expect("sleep");
    let (mut other_boot, mut no_start) = (spawn(), spawn());
    let running = c.work_dir("w1").join("running");
    plant(
        &running,
        "fw-x/main#0#1.1",
        other_boot.id(),
        &start_time(other_boot.id()),
        "00000000-0000-4000-8000-000000000000",
    );
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").expect("boot id");
    plant(&running, "fw-x/main#1#1.2", no_start.id(), "-", boot.trim());

    let mut worker = c.worker("w1", &masters, 1, 256, &[]);
    wait_for(BOUND, "the new worker ALIVE", || alive_with_workers(&state()?, &["w1"]));
    let log_names = |w: &Proc, what: &str, pid: u32| {
        let log = w.stderr();
        log.lines().any(|l| l.contains(what) && l.contains(&format!("pid={pid}")))
    };
    wait_until(BOUND, "the log names the record of another boot and its pid", || {
        log_names(&worker, "another boot", other_boot.id())
    });
    wait_until(BOUND, "the log names the unprovable record and its pid", || {
        log_names(&worker, "left alone", no_start.id())
    });
    std::thread::sleep(Duration::from_secs(1));
    let alive = (pid_alive(other_boot.id()), pid_alive(no_start.id()));
    let log = worker.stderr();
    for p in [&mut other_boot, &mut no_start] {
        let _ = p.kill();
        let _ = p.wait();
    }
    assert_eq!(
        alive,
        (true, true),
        "neither process was killed:\n{}",
        support::cluster::tail(&log, 20)
    );
    assert!(!log.contains("adopted an executor"), "nothing adopted:\n{log}");
    assert!(recorded_pgids(&c.work_dir("w1")).is_empty(), "their records are gone");
    worker.assert_running("after leaving them alone");
}

#[test]
fn kill_left_behind_kills_the_executors_and_they_are_replaced() {
    let mut s = Setup::start("upgrade-kill", &[]);
    let (ids, pgids) = s.running();
    s.kill9_worker(&pgids);

    let mut worker = s.c.worker("w1", &s.masters, 2, 256, &["--kill-left-behind"]);
    for pgid in &pgids {
        wait_until(BOUND, "the left-behind executor killed", || !pid_alive(*pgid));
    }
    wait_until(BOUND, "the worker says what it killed", || {
        worker.stderr().matches("killed an executor a previous worker process left running").count()
            == 2
    });
    wait_for(BOUND, "two replacements RUNNING on w1", || {
        let ex = executors(&s.state()?);
        let new: Vec<_> = ex
            .iter()
            .filter(|(id, w, st)| !ids.contains(id) && w == "w1" && st == "RUNNING")
            .collect();
        let old_ended = ex
            .iter()
            .filter(|(id, _, st)| ids.contains(id) && (st == "KILLED" || st == "LOST"))
            .count();
        if new.len() == 2 && old_ended == 2 {
            Ok(())
        } else {
            Err(format!("executors {ex:?}"))
        }
    });
    let leaders: BTreeSet<u32> = leaders_with_marker(&s.marker).into_iter().collect();
    assert!(leaders.is_disjoint(&pgids), "replacements are new processes: {leaders:?}");
    s.release_and_complete();
    worker.assert_running("after the application completed");
    s.worker = worker;
}

fn start_time(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest = &stat[stat.rfind(')').expect("comm") + 1..];
    rest.split_whitespace().nth(19).expect("starttime").to_owned()
}

/// Writes a version 2 executor record, as a previous worker process would
/// have (ids escaped for file names and values: `/` and `#` as `%XX`).
fn plant(running: &Path, executor: &str, pid: u32, start: &str, boot: &str) {
    let esc = |s: &str| {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    std::fs::create_dir_all(running).expect("running dir");
    let text = format!(
        "regent-executor-record 2\nexecutor={}\nframework=fw-x\npgid={pid}\nstart_time={start}\n\
         boot_id={}\ncores=1\nmemory_mb=64\nend\n",
        esc(executor),
        esc(boot)
    );
    std::fs::write(running.join(format!("{}.rec", esc(executor))), text).expect("plant record");
}

//! End-to-end: a singleton (`disconnect = { stop_after = "3s" }`,
//! docs/design.md#issue-45) on a worker cut off silently from its master.
//! Worker w1 reaches the master only through a TCP proxy, which is also the
//! address the master advertises; once the singleton runs on w1 the proxy
//! drops every byte either way without closing anything (a switch losing
//! packets), and w2 joins on the master's own address. w1 stops the
//! executor when it has heard nothing for 3 s; the leader declares w1 DEAD
//! after 2.5 s but places the slot on w2 only once 3 s + the group's kill
//! grace (1 s) + the margin (1.3 s) have passed since it last heard from w1.
//! Each executor process writes its work directory, then a timestamp every
//! 50 ms, into a file of its own: the cut-off one's last timestamp comes
//! before its replacement's first. Filesystem recovery, real `regent`
//! processes on loopback; outcomes within generous bounds, and the one
//! comparison is of the processes' own clocks (both on this host).
//!
//! Then the same singleton with w1's *process* down (docs/design.md#issue-45):
//! paused with SIGSTOP (resumed once the replacement runs) or killed with
//! `kill -9` (restarted over the same work directory). Nothing of the
//! worker runs to stop the executor; its shim does, at the worker's last
//! word + 3 s, so its process group is gone when the replacement on w2
//! starts, and w1, back, reports the end as a cut-off stop and never runs
//! the slot again.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, free_port, group_members, pid_alive, recorded_pgids, wait_for,
    Cluster, Kind, MasterSpec,
};
use support::tcp_proxy::TcpProxy;

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// The job: one singleton slot running a loop that stamps its file.
fn singleton_job(out: &Path) -> String {
    format!(
        r#"name = "lock-holder"

[[group]]
name = "holder"
command = ["sh", "-c", "f=\"$OUT/run-$$\"; pwd > \"$f\"; while :; do date +%s%N >> \"$f\"; sleep 0.05; done"]
env = {{ OUT = "{}" }}
kill_grace = "1s"
disconnect = {{ stop_after = "3s" }}
"#,
        out.display()
    )
}

/// One executor process's file: its pid, its work directory and its
/// timestamps (ns since the Unix epoch).
struct Run {
    pid: u32,
    dir: String,
    stamps: Vec<u128>,
}

fn runs(out: &Path) -> Vec<Run> {
    let Ok(entries) = std::fs::read_dir(out) else { return Vec::new() };
    let mut v: Vec<Run> = entries
        .filter_map(|e| {
            let path: PathBuf = e.ok()?.path();
            let pid = path.file_name()?.to_str()?.strip_prefix("run-")?.parse().ok()?;
            let text = std::fs::read_to_string(&path).ok()?;
            let mut lines = text.lines();
            let dir = lines.next()?.to_owned();
            // A line being written may be cut short: only whole stamps.
            let stamps = lines.filter(|l| l.len() >= 19).filter_map(|l| l.parse().ok()).collect();
            Some(Run { pid, dir, stamps })
        })
        .collect();
    v.sort_by_key(|r| r.stamps.first().copied().unwrap_or(u128::MAX));
    v
}

/// The runs under worker `id`'s work directory with at least one stamp.
fn runs_on(out: &Path, c: &Cluster, id: &str) -> Vec<Run> {
    let work = c.work_dir(id);
    let work = work.to_str().expect("a UTF-8 temp dir").to_owned();
    runs(out).into_iter().filter(|r| r.dir.starts_with(&work) && !r.stamps.is_empty()).collect()
}

/// Kills, when dropped, every executor process a run file names that still
/// runs, with its process group (executors outlive their workers).
struct Reaper(PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        for r in runs(&self.0).into_iter().filter(|r| pid_alive(r.pid)) {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", r.pid)).unwrap_or_default();
            let pgid = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().nth(2));
            let mut targets = vec![r.pid.to_string()];
            targets.extend(pgid.filter(|g| *g != "0").map(|g| format!("-{g}")));
            for target in targets {
                let _ = std::process::Command::new("kill").args(["-KILL", "--", &target]).status();
            }
        }
    }
}

/// The setup every test here shares: a cluster named `name`, its `out`
/// directory (where each executor process writes its run file), the
/// [`Reaper`] of those processes (keep it until the end of the test), and
/// the spec of a master on a filesystem store in the cluster's directory
/// that declares a worker DEAD after 2.5 s of silence, with heartbeats
/// every 500 ms.
fn singleton_cluster(name: &str) -> (Cluster, PathBuf, Reaper, MasterSpec) {
    let c = Cluster::new(name);
    let out = c.path("out");
    std::fs::create_dir_all(&out).expect("out dir");
    let reaper = Reaper(out.clone());
    let store = c.path("store");
    let store = store.to_str().expect("a UTF-8 temp dir");
    let spec = MasterSpec::new(
        "m1",
        &[
            "--recovery",
            "filesystem",
            "--store",
            store,
            "--worker-timeout",
            "2500",
            "--heartbeat-interval",
            "500",
        ],
    );
    (c, out, reaper, spec)
}

#[test]
fn a_singleton_on_a_silently_cut_off_worker_stops_before_its_replacement_starts() {
    let (c, out, _reaper, mut spec) = singleton_cluster("e2e-singleton");
    let proxy = TcpProxy::start(free_port(), &spec.addr());
    spec.args.extend(["--advertise".to_owned(), proxy.addr()]);
    let mut master = c.master(&spec);
    let mut w1 = c.worker("w1", &[proxy.addr()], 2, 512, &[]);
    wait_for(BOUND, "w1 ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1"])
    });
    let job = c.path("job.toml");
    std::fs::write(&job, singleton_job(&out)).expect("job file");
    let job = job.to_str().expect("a UTF-8 temp dir").to_owned();
    let mut run = c.spawn("run", Kind::Submit, &["run", "--masters", &spec.addr(), &job]);
    wait_for(BOUND, "the singleton running on w1", || match runs_on(&out, &c, "w1").as_slice() {
        [r] if r.stamps.len() >= 2 => Ok(()),
        other => Err(format!("{} runs on w1", other.len())),
    });

    // w1 hears nothing more from the master, nor the master from w1;
    // nothing is closed. w2 joins on the master's own address.
    proxy.hold();
    let mut w2 = c.worker("w2", &[spec.addr()], 2, 512, &[]);
    let replacement = wait_for(BOUND, "the slot placed again on w2", || {
        runs_on(&out, &c, "w2").into_iter().next().ok_or_else(|| "no run on w2 yet".to_owned())
    });
    let cut_off = runs_on(&out, &c, "w1");
    assert_eq!(cut_off.len(), 1, "one run on w1, never restarted there");
    let cut_off = &cut_off[0];
    wait_for(BOUND, "w1's executor gone", || {
        if pid_alive(cut_off.pid) {
            Err(format!("pid {} runs on", cut_off.pid))
        } else {
            Ok(())
        }
    });
    // Its file, now final.
    let last = runs_on(&out, &c, "w1")[0].stamps.last().copied().expect("stamps");
    let first = replacement.stamps[0];
    assert!(
        last < first,
        "w1's executor stamped at {last} ns, after its replacement on w2 started at {first} ns"
    );
    println!("w1's executor last stamped {} ms before w2's first", (first - last) / 1_000_000);
    // The worker was cut off, not stopped: it runs on, and so does w2.
    w1.assert_running("w1, cut off");
    w2.assert_running("w2");
    master.assert_running("the master");

    proxy.release();
    run.stop(Duration::from_secs(5));
    w2.stop(Duration::from_secs(10));
    w1.stop(Duration::from_secs(10));
    master.stop(Duration::from_secs(10));
}

/// What happens to the worker process running the singleton.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// `kill -STOP`, then `kill -CONT` once the replacement runs.
    Pause,
    /// `kill -9`, then a new worker process over the same work directory.
    Kill9,
}

/// `kill -<sig> <pid>`.
fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{sig} {pid}");
}

/// The leader's executors on worker `id`: (executor id, state, reason).
fn executors_on(state: &serde_json::Value, id: &str) -> Vec<(String, String, String)> {
    state["executors"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e["worker_id"] == id)
                .map(|e| {
                    let s = |k: &str| e[k].as_str().unwrap_or("").to_owned();
                    (s("id"), s("state"), s("reason"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The singleton's lease (docs/design.md#issue-45): with the worker
/// *process* that runs it paused or killed, nothing of the worker stops
/// it, so its executor shim does, at the worker's last word from the
/// leader + `stop_after` (3 s), by the boot clock. The leader re-places it
/// on w2 only 3 s + the kill grace (1 s) + the margin (1.3 s) after it
/// last heard from w1: when w2's executor writes its first stamp, w1's
/// executor process group is already gone, and its last stamp came
/// before. w1, resumed or restarted, reports the end as its core's own
/// cut-off stop (`stopped: no master heard for 3s`, from the shim's
/// status) and never runs the slot again.
fn a_singleton_stops_with_its_worker_process_down(fault: Fault) {
    let name = format!("e2e-singleton-lease-{fault:?}").to_lowercase();
    let (c, out, _reaper, spec) = singleton_cluster(&name);
    let mut master = c.master(&spec);
    let mut w1 = c.worker("w1", &[spec.addr()], 2, 512, &[]);
    wait_for(BOUND, "w1 ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1"])
    });
    let job = c.path("job.toml");
    std::fs::write(&job, singleton_job(&out)).expect("job file");
    let job = job.to_str().expect("a UTF-8 temp dir").to_owned();
    let mut run = c.spawn("run", Kind::Submit, &["run", "--masters", &spec.addr(), &job]);
    let first = wait_for(BOUND, "the singleton running on w1", || {
        match runs_on(&out, &c, "w1").as_slice() {
            [r] if r.stamps.len() >= 2 => Ok(r.pid),
            other => Err(format!("{} runs on w1", other.len())),
        }
    });
    let shim = match recorded_pgids(&c.work_dir("w1")).as_slice() {
        [pgid] => *pgid,
        other => panic!("one executor group recorded on w1, not {other:?}"),
    };
    assert!(group_members(shim).contains(&first), "the command runs in its shim's group");
    let mut w2 = c.worker("w2", &[spec.addr()], 2, 512, &[]);
    wait_for(BOUND, "w1 and w2 ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1", "w2"])
    });

    match fault {
        Fault::Pause => signal(w1.pid(), "STOP"),
        Fault::Kill9 => w1.kill9(),
    }
    let replacement = wait_for(BOUND, "the slot placed again on w2", || {
        runs_on(&out, &c, "w2").into_iter().next().ok_or_else(|| "no run on w2 yet".to_owned())
    });
    // Already gone when the replacement started: no wait here.
    let left: Vec<u32> = group_members(shim);
    assert!(
        left.is_empty(),
        "w1's executor group {shim} still runs ({left:?}) while its replacement runs on w2"
    );
    let cut_off = runs_on(&out, &c, "w1");
    assert_eq!(cut_off.len(), 1, "one run on w1");
    let last = cut_off[0].stamps.last().copied().expect("stamps");
    let first_new = replacement.stamps[0];
    assert!(
        last < first_new,
        "w1's executor stamped at {last} ns, after its replacement on w2 started at {first_new} ns"
    );
    println!(
        "{fault:?}: w1's executor last stamped {} ms before w2's first",
        (first_new - last) / 1_000_000
    );
    let status = std::fs::read_dir(c.work_dir("w1").join("executors"))
        .expect("w1's executor dirs")
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("exit-status")).ok())
        .collect::<Vec<_>>();
    assert_eq!(status.len(), 1, "{status:?}");
    assert!(status[0].contains("cut-off=3000"), "the shim recorded why: {status:?}");

    // w1 comes back: resumed, or a new process over its work directory.
    match fault {
        Fault::Pause => signal(w1.pid(), "CONT"),
        Fault::Kill9 => w1 = c.worker("w1", &[spec.addr()], 2, 512, &[]),
    }
    let ended = wait_for(BOUND, "w1 back, its executor's end reported", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1", "w2"])?;
        let on_w1 = executors_on(&state, "w1");
        let on_w2 = executors_on(&state, "w2");
        if on_w1.iter().any(|(_, s, _)| s == "RUNNING") {
            return Err(format!("RUNNING on w1: {on_w1:?}"));
        }
        match on_w2.iter().filter(|(_, s, _)| s == "RUNNING").count() {
            1 => Ok(on_w1),
            _ => Err(format!("w2: {on_w2:?}")),
        }
    });
    println!("{fault:?}: the leader's executors on w1: {ended:?}");
    // The leader wrote it off LOST when it declared w1 DEAD (a later
    // report does not change a terminal state); a cut-off stop it heard
    // of first would show as such. Neither charges a retry.
    for (id, state, reason) in &ended {
        assert!(
            state == "LOST" || (state == "FAILED" && reason == "stopped: no master heard for 3s"),
            "{id} on w1 ended {state} {reason:?}"
        );
    }
    // w1 itself reports the end as its core's own cut-off stop, from the
    // shim's status: a new process finds it ended while no worker ran; a
    // resumed one sees its shim end (unless its core's own timer, due
    // during the pause, had it killed first: reported the same way).
    let log = w1.stderr();
    let reported = log.contains(r#"state=Failed { reason: "stopped: no master heard for 3s" }"#);
    match fault {
        Fault::Kill9 => assert!(reported, "w1's log:\n{log}"),
        Fault::Pause => assert!(reported || log.contains("state=Killed"), "w1's log:\n{log}"),
    }
    // A few heartbeats later, w1 has not run the slot again.
    std::thread::sleep(Duration::from_secs(3));
    let on_w1 = runs_on(&out, &c, "w1");
    assert_eq!(on_w1.len(), 1, "w1 never runs the slot again");
    assert_eq!(on_w1[0].stamps.last().copied(), Some(last), "nor does its old run go on");
    assert!(pid_alive(replacement.pid), "the replacement runs on");
    w1.assert_running("w1, back");
    w2.assert_running("w2");
    master.assert_running("the master");

    run.stop(Duration::from_secs(5));
    w2.stop(Duration::from_secs(10));
    w1.stop(Duration::from_secs(10));
    master.stop(Duration::from_secs(10));
}

#[test]
fn a_singleton_on_a_paused_worker_process_stops_before_its_replacement_starts() {
    a_singleton_stops_with_its_worker_process_down(Fault::Pause);
}

#[test]
fn a_singleton_on_a_killed_worker_process_stops_before_its_replacement_starts() {
    a_singleton_stops_with_its_worker_process_down(Fault::Kill9);
}

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

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, free_port, pid_alive, wait_for, Cluster, Kind, MasterSpec,
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

#[test]
fn a_singleton_on_a_silently_cut_off_worker_stops_before_its_replacement_starts() {
    let c = Cluster::new("e2e-singleton");
    let out = c.path("out");
    std::fs::create_dir_all(&out).expect("out dir");
    let _reaper = Reaper(out.clone());
    let store = c.path("store");
    let store = store.to_str().expect("a UTF-8 temp dir");
    let mut spec = MasterSpec::new(
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

//! End-to-end: a worker cleans its work directory. With `--work-dir-ttl
//! 2s`, the directory of an executor that ended is removed soon after; the
//! directory of one that runs stays however old it is. A real `regent`
//! master, worker and submits on loopback; bounds are generous.

mod support;

use std::time::Duration;
use support::cluster::{alive_with_workers, api_state, wait_for, wait_until, Cluster, MasterSpec};

const BOUND: Duration = Duration::from_secs(60);

#[test]
fn an_ended_executors_directory_goes_after_the_ttl_and_a_running_ones_stays() {
    let c = Cluster::new("work-dir-gc");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let _worker = c.worker("w1", &[spec.addr()], 4, 1024, &["--work-dir-ttl", "2s"]);
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1"])
    });
    let executors = c.work_dir("w1").join("executors");
    let masters = [spec.addr()];
    let opts = ["--executors", "1", "--cores", "1", "--memory", "16"];
    let mut long =
        c.submit("long", &masters, &[&opts[..], &["--name", "long"]].concat(), &["sleep", "600"]);
    let dirs = || -> Vec<String> {
        std::fs::read_dir(&executors)
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default()
    };
    let running = wait_for(BOUND, "the long executor's directory", || {
        dirs().into_iter().next().ok_or_else(|| "none yet".to_string())
    });
    let mut short =
        c.submit("short", &masters, &[&opts[..], &["--name", "short"]].concat(), &["true"]);
    let status = short.wait_exit(BOUND);
    assert_eq!(status.code(), Some(0), "{}", short.stdout());
    // The ended one's directory goes (it existed: the submit saw it exit).
    wait_until(BOUND, "the ended executor's directory removed", || dirs() == vec![running.clone()]);
    // The running one stays, well past the ttl.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(dirs(), vec![running.clone()], "a running executor's directory is never removed");
    assert!(executors.join(&running).join("stdout").exists());
    long.assert_running("its executor still runs");
    long.sigterm();
    let _ = long.wait_exit(BOUND);
}

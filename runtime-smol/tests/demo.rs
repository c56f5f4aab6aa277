//! The main job, `regent demo`, as a user runs it: it must end by itself
//! with status 0 after the master's in-process restart. Regression: the
//! stopped master's listening socket stayed open (its acceptor task was
//! detached) until a connection happened to arrive, so the restarted master
//! could fail to bind the same port and the demo waited 30 s and failed.

mod support;

use std::time::Duration;
use support::cluster::Cluster;

#[test]
fn the_demo_completes_after_the_masters_restart() {
    let c = Cluster::new("demo");
    let out = c.run(&["demo"], Duration::from_secs(180));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "regent demo failed:\n{stdout}\n{stderr}");
    for line in [
        "master stopped; executors keep running",
        "ALIVE with all 3 workers re-registered",
        "application completed: every executor exited 0",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
}

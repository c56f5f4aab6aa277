//! End-to-end: health checks (docs/design.md#issue-45). A job of the small
//! HTTP service `fixtures/services/svc.py` with an http check: two healthy
//! slots show `health passing` in `regent job status`; the slot of a
//! version whose `/health` starts answering 500 is stopped by its worker
//! after its failures, its end says `unhealthy: …`, and the leader starts it
//! again under its restart policy; the healthy slots are untouched. Real
//! `regent` processes and Python services on loopback; outcomes within
//! generous bounds.

mod support;

use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, free_port, leaders_with_marker, unique, wait_for, Cluster, Kind,
    MasterSpec,
};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(90);

/// The service, from the repository.
fn svc() -> String {
    format!("{}/../fixtures/services/svc.py", env!("CARGO_MANIFEST_DIR"))
}

/// A group `name` of `count` slots of svc.py tagged `marker`, with
/// `SVC_HEALTH = health`, an http check of `/health` every 500 ms (grace
/// 1 s, 2 failures) and a service restart policy.
fn group(name: &str, count: u32, marker: &str, health: &str) -> String {
    format!(
        "[[group]]\nname = \"{name}\"\ncount = {count}\n\
         command = [\"python3\", \"{svc}\", \"{marker}\"]\n\
         env = {{ SVC_HEALTH = \"{health}\" }}\nports = [\"http\"]\nmemory_mb = 32\n\n\
         [group.restart]\nmode = \"service\"\ndelay = \"200ms\"\nmax_delay = \"1s\"\n\n\
         [[group.check]]\ntype = \"http\"\nport = \"http\"\npath = \"/health\"\n\
         interval = \"500ms\"\ntimeout = \"2s\"\ngrace = \"1s\"\nfailures = 2\n\n",
        svc = svc()
    )
}

#[test]
fn a_service_that_starts_answering_500_is_restarted_after_its_failures() {
    let c = Cluster::new("health");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let m = spec.addr();
    let _master = c.master(&spec);
    let first = free_port();
    let ports = format!("{first},{},{},{}", free_port(), free_port(), free_port());
    let _worker = c.worker("w1", std::slice::from_ref(&m), 4, 1024, &["--ports", &ports]);
    wait_for(BOUND, "the worker ALIVE", || {
        alive_with_workers(&api_state(&spec.http_addr()).ok_or("no answer")?, &["w1"])
    });
    let events = c.spawn("events", Kind::Other, &["events", "--masters", &m]);

    let (good, bad) = (unique("svc-good"), unique("svc-bad"));
    let job = c.path("svc.toml");
    let text = format!(
        "name = \"svc\"\n\n{}{}",
        group("web", 2, &good, "ok"),
        group("flaky", 1, &bad, "fail_after:8")
    );
    std::fs::write(&job, text).unwrap();
    let out = c.run(&["job", "submit", "--masters", &m, job.to_str().unwrap()], BOUND);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Both web slots pass their checks, and `regent job status` says so.
    let status = wait_for(BOUND, "web's slots passing in `regent job status`", || {
        let out = c.run(&["job", "status", "--masters", &m, "svc"], BOUND);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let passing = text
            .lines()
            .filter(|l| l.contains("executor svc/web"))
            .all(|l| l.contains(" running ") && l.contains(" health passing "));
        if passing && text.matches("executor svc/web").count() == 2 {
            Ok(text)
        } else {
            Err(text)
        }
    });
    assert!(status.contains("group \"web\": desired/placed/running/done 2/2/2/0"), "{status}");
    let web_pids = wait_for(BOUND, "two web services", || match leaders_with_marker(&good) {
        p if p.len() == 2 => Ok(p),
        p => Err(format!("{p:?}")),
    });
    let flaky_pid = wait_for(BOUND, "the flaky service", || match leaders_with_marker(&bad)[..] {
        [p] => Ok(p),
        ref p => Err(format!("{p:?}")),
    });

    // After 8 passing checks its /health answers 500: stopped after 2
    // failures, its end says why, and the leader starts it again.
    let reason = "unhealthy: check \"http\" failed 2 times (last: GET /health answered 500)";
    wait_for(BOUND, "the flaky slot's end reported unhealthy", || {
        let said = events.stdout();
        if said.contains(reason) {
            Ok(())
        } else {
            Err(said)
        }
    });
    wait_for(BOUND, "the flaky slot started again", || match leaders_with_marker(&bad)[..] {
        [p] if p != flaky_pid => Ok(()),
        ref p => Err(format!("{p:?} (was {flaky_pid})")),
    });
    let mut now = leaders_with_marker(&good);
    now.sort();
    let mut before = web_pids.clone();
    before.sort();
    assert_eq!(now, before, "the healthy slots are untouched");
    let out = c.run(&["job", "status", "--masters", &m, "svc"], BOUND);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("group \"web\": desired/placed/running/done 2/2/2/0"), "{text}");
}

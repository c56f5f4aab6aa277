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

/// A manual check (docs/jobs.md, health checks): the framework's reports,
/// through the CLI and `POST /v1/executors/{id}/health`, reach the
/// executor's worker through the leader: a pass shows `health passing`,
/// two failures stop the executor with the framework's detail in its end,
/// and the leader starts the slot again; a report on a check that is not
/// a manual one is refused naming the group's manual checks.
#[test]
fn a_frameworks_manual_reports_are_relayed_and_two_failures_restart_the_slot() {
    use support::cluster::http_post;
    let c = Cluster::new("manual");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let m = spec.addr();
    let _master = c.master(&spec);
    let _worker = c.worker("w1", std::slice::from_ref(&m), 2, 512, &[]);
    wait_for(BOUND, "the worker ALIVE", || {
        alive_with_workers(&api_state(&spec.http_addr()).ok_or("no answer")?, &["w1"])
    });
    let events = c.spawn("events", Kind::Other, &["events", "--masters", &m]);
    let marker = unique("manual");
    let job = c.path("manual.toml");
    let text = format!(
        "name = \"man\"\n\n[[group]]\nname = \"db\"\ncount = 1\n\
         command = [\"sh\", \"-c\", \"exec sleep 600 # {marker}\"]\nmemory_mb = 16\n\n\
         [group.restart]\nmode = \"service\"\ndelay = \"200ms\"\nmax_delay = \"1s\"\n\n\
         [[group.check]]\ntype = \"manual\"\nname = \"ready\"\nttl = \"10m\"\n\
         grace = \"0s\"\nfailures = 2\n"
    );
    std::fs::write(&job, text).unwrap();
    let out = c.run(&["job", "submit", "--masters", &m, job.to_str().unwrap()], BOUND);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let status = |c: &Cluster| {
        let out = c.run(&["job", "status", "--masters", &m, "man"], BOUND);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let executor = wait_for(BOUND, "the slot running", || {
        let text = status(&c);
        let line = text.lines().find(|l| l.contains("executor man/db") && l.contains(" running "));
        match line.and_then(|l| l.split_whitespace().find(|w| w.starts_with("man/db#"))) {
            Some(id) => Ok(id.to_string()),
            None => Err(text),
        }
    });

    // A pass through the CLI: the slot shows passing.
    let args = ["report-health", "--masters", &m, &executor, "--check", "ready", "--passing"];
    let out = c.run(&args, BOUND);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_for(BOUND, "health passing in `regent job status`", || {
        let text = status(&c);
        if text.contains(" health passing ") {
            Ok(())
        } else {
            Err(text)
        }
    });

    // A check that is not a manual one: refused, naming the manual checks.
    let args = ["report-health", "--masters", &m, &executor, "--check", "http", "--failing"];
    let out = c.run(&args, BOUND);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("its manual checks: ready"), "{said}");

    // Two failures through /v1/: the worker stops it, its end carries the
    // framework's detail, and the leader starts the slot again.
    let path = format!("/v1/executors/{}/health", executor.replace('/', "%2F").replace('#', "%23"));
    let body = r#"{"check": "ready", "passing": false, "detail": "db down"}"#;
    for _ in 0..2 {
        let answer = http_post(&spec.http_addr(), &path, body);
        assert!(matches!(&answer, Some((200, b)) if b.contains("\"passing\":false")), "{answer:?}");
    }
    let reason = "unhealthy: check \"ready\" failed 2 times (last: db down)";
    wait_for(BOUND, "the slot's end reported with the framework's detail", || {
        let said = events.stdout();
        if said.contains(reason) {
            Ok(())
        } else {
            Err(said)
        }
    });
    wait_for(BOUND, "the slot started again", || {
        let text = status(&c);
        let again = text
            .lines()
            .any(|l| l.contains(" running ") && l.contains("man/db#") && !l.contains(&executor));
        if again {
            Ok(())
        } else {
            Err(text)
        }
    });
    // An unknown executor is a 404.
    let answer = http_post(&spec.http_addr(), "/v1/executors/nope/health", body);
    assert!(matches!(answer, Some((404, _))), "{answer:?}");
}

//! End-to-end: predictable preemption (docs/tenants.md#preemption;
//! docs/design.md#issue-44) through real processes. One master
//! (filesystem store) with `--http`, tenants `a` and `b` of weight 1, one
//! worker of 4 cores that tenant `a`'s job of 4 one-core slots fills.
//! `regent job plan` of tenant `b`'s job of 4 slots names the two
//! executors of `a` preemption would stop (down to equal shares) and the
//! budget left; once `b`'s job is submitted, exactly those two are
//! stopped, `regent events` says `preempted by jb/work` for each, and the
//! cluster ends 2:2.

mod support;

use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;
use support::cli::{ok, run, sleep_job};
use support::cluster::{
    alive_with_workers, api_state, http_get, wait_for, Cluster, Kind, MasterSpec,
};

/// Generous bound for anything to happen (never a timing assertion).
const BOUND: Duration = Duration::from_secs(60);

/// The ids of the running executors of `job`, from `GET /v1/jobs/{job}`.
fn running(http: &str, job: &str) -> Result<BTreeSet<String>, String> {
    let (status, body) = http_get(http, &format!("/v1/jobs/{job}")).ok_or("no answer")?;
    if status != 200 {
        return Err(format!("{status}: {body}"));
    }
    let v: Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
    let slots = v["groups"][0]["slots"].as_array().cloned().unwrap_or_default();
    Ok(slots
        .iter()
        .filter(|s| s["phase"] == "running")
        .filter_map(|s| s["executor"].as_str().map(str::to_owned))
        .collect())
}

#[test]
fn the_plan_names_the_victims_and_their_events_say_preempted_by() {
    let c = Cluster::new("preemption-plan");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let m = spec.addr();
    let http = spec.http_addr();
    let masters = vec![m.clone()];
    let _master = c.master(&spec);
    wait_for(BOUND, "the master ALIVE", || {
        let state = api_state(&http).ok_or("the master does not answer")?;
        alive_with_workers(&state, &[])
    });
    ok(&c, &["tenant", "set", "a", "--masters", &m]);
    ok(&c, &["tenant", "set", "b", "--masters", &m]);

    let ja = sleep_job(&c, "ja", r#"tenant = "a""#, 4, "");
    ok(&c, &["job", "submit", "--masters", &m, &ja]);
    let _w1 = c.worker("w1", &masters, 4, 1024, &[]);
    let before = wait_for(BOUND, "a's 4 executors running", || {
        let r = running(&http, "ja")?;
        if r.len() == 4 {
            Ok(r)
        } else {
            Err(format!("{r:?}"))
        }
    });

    // The plan of b's job names two of a's executors, why, and the budget.
    let jb = sleep_job(&c, "jb", r#"tenant = "b""#, 4, "");
    let (code, plan, err) = run(&c, &["job", "plan", "--masters", &m, &jb]);
    assert_eq!(code, Some(2), "slots would wait: {plan}\n{err}");
    let victims: Vec<String> = plan
        .lines()
        .filter_map(|l| l.trim().strip_prefix("would preempt "))
        .map(|l| l.split(' ').next().unwrap().to_owned())
        .collect();
    assert_eq!(victims.len(), 2, "down to equal shares: {plan}");
    for v in &victims {
        assert!(before.contains(v), "{v} is one of a's running executors: {plan}");
        let line = plan.lines().find(|l| l.contains(&format!("would preempt {v} "))).unwrap();
        assert!(
            line.contains("(ja/work, tenant a, on w1)")
                && line.ends_with(": tenant above its fair share"),
            "{line}"
        );
    }
    assert!(
        plan.contains("preemption budget: 60 of 60 victims left this minute for tenant b"),
        "{plan}"
    );

    // The events, followed from before b's job, say who preempted whom.
    let events = c.spawn("events", Kind::Other, &["events", "--masters", &m]);
    wait_for(BOUND, "the events stream", || {
        if events.stdout().lines().count() > 0 {
            Ok(())
        } else {
            Err(events.stderr())
        }
    });
    ok(&c, &["job", "submit", "--masters", &m, &jb]);
    let after = wait_for(BOUND, "2 of a's executors left running, 2 of b's", || {
        let (a, b) = (running(&http, "ja")?, running(&http, "jb")?);
        if a.len() == 2 && b.len() == 2 {
            Ok(a)
        } else {
            Err(format!("a {a:?}, b {b:?}"))
        }
    });
    let stopped: BTreeSet<String> = before.difference(&after).cloned().collect();
    assert_eq!(
        stopped,
        victims.iter().cloned().collect::<BTreeSet<_>>(),
        "the leader stopped exactly the plan's victims"
    );
    for v in &victims {
        wait_for(BOUND, "the victim's end says preempted by jb/work", || {
            let out = events.stdout();
            let said = out.lines().any(|l| {
                l.contains(&format!("executor {v} "))
                    && l.contains("KILLED")
                    && l.contains("(preempted by jb/work)")
            });
            if said {
                Ok(())
            } else {
                Err(out)
            }
        });
    }
    // Nothing more is taken: still 2:2.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(running(&http, "ja").unwrap().len(), 2);
    assert_eq!(running(&http, "jb").unwrap().len(), 2);
    drop(events);
    ok(&c, &["job", "delete", "--masters", &m, "ja"]);
    ok(&c, &["job", "delete", "--masters", &m, "jb"]);
}

//! End-to-end: deployments gated on health, with real processes
//! (docs/jobs.md, deployments; docs/design.md#issue-45). A job of three
//! slots of the small HTTP service `fixtures/services/svc.py` (`GET /`
//! answers its version and pid, `GET /health` 200 or 500) with an http
//! check, updated with `regent job submit`:
//!
//! * a broken version (its `/health` answers 500) with `canary = 1`: the
//!   canary never becomes healthy, the deployment fails at its
//!   `healthy_deadline` and reverts; every slot ends on the old version and
//!   the two old executors outside the canary's slot are never stopped (the
//!   same pids answer `GET /` throughout);
//! * a good version with `canary = 1`: it waits for `regent job promote`
//!   (nothing more is replaced meanwhile), then completes, every slot on
//!   the new version;
//! * `kill -9` of the leader mid-deployment (two masters and ZooKeeper):
//!   the new leader goes on with the same deployment and completes it,
//!   never running more than one executor per slot.
//!
//! What a user sees is read where a user reads it: `GET
//! /v1/jobs/{id}/deployment`, `regent job status`, `regent status`'s
//! health column and `regent events`' deployment and health lines;
//! processes by the pids the services answer with and by their process
//! groups (one per executor). Real
//! `regent` processes and Python services on loopback; outcomes within
//! generous bounds, never timings.

mod support;

use serde_json::Value;
use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, free_port, http_get, leaders_with_marker, pid_alive, sole_alive,
    unique, wait_for, Cluster, Kind, MasterSpec, Proc,
};
use support::zk_server::ZkServer;

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(120);

/// The service, from the repository.
fn svc() -> String {
    format!("{}/../fixtures/services/svc.py", env!("CARGO_MANIFEST_DIR"))
}

/// Job `svc`: group `web` of 3 slots of svc.py tagged `marker` answering
/// `version`, its `/health` per `health` (`ok`, `fail`), checked every
/// 300 ms (reporting only: `failures = 0`), deployed under `update` (the
/// lines of `[group.update]`).
fn job(marker: &str, version: &str, health: &str, update: &str) -> String {
    format!(
        "name = \"svc\"\n\n[[group]]\nname = \"web\"\ncount = 3\n\
         command = [\"python3\", \"{svc}\", \"{marker}\"]\n\
         env = {{ SVC_VERSION = \"{version}\", SVC_HEALTH = \"{health}\" }}\n\
         ports = [\"http\"]\nmemory_mb = 32\nkill_grace = \"2s\"\n\n\
         [group.restart]\nmode = \"service\"\ndelay = \"200ms\"\nmax_delay = \"1s\"\n\n\
         [[group.check]]\ntype = \"http\"\nport = \"http\"\npath = \"/health\"\n\
         interval = \"300ms\"\ntimeout = \"2s\"\ngrace = \"0s\"\nfailures = 0\n\n\
         [group.update]\n{update}\n",
        svc = svc()
    )
}

/// `--ports` for a worker: 8 free loopback ports (3 slots, with room for
/// replacements whose ports are not yet given back).
fn ports() -> String {
    (0..8).map(|_| free_port().to_string()).collect::<Vec<_>>().join(",")
}

/// One running executor of job `svc` and what its service answers.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Serving {
    executor: String,
    slot: u32,
    version: String,
    pid: u32,
}

/// Every RUNNING executor of `svc` in `state`, asked `GET /` at its
/// address; an error while one does not answer (yet).
fn serving(state: &Value) -> Result<Vec<Serving>, String> {
    let mut all = Vec::new();
    for e in state["executors"].as_array().into_iter().flatten() {
        if e["framework_id"] != "svc" || e["state"] != "RUNNING" {
            continue;
        }
        let id = e["id"].as_str().unwrap_or_default().to_owned();
        let slot =
            id.split('#').nth(1).and_then(|s| s.parse().ok()).ok_or(format!("slot of {id}"))?;
        let addr = e["addresses"]["http"].as_str().ok_or(format!("no address for {id}: {e}"))?;
        let (code, body) = http_get(addr, "/").ok_or(format!("{id} at {addr} does not answer"))?;
        let mut words = body.split_whitespace();
        match (code, words.next(), words.next().and_then(|p| p.parse().ok())) {
            (200, Some(v), Some(pid)) => {
                all.push(Serving { executor: id, slot, version: v.to_owned(), pid })
            }
            _ => return Err(format!("{id} answered {code} {body:?}")),
        }
    }
    all.sort_by_key(|s| s.slot);
    Ok(all)
}

/// `GET /v1/jobs/svc/deployment` on `http`: group `web`'s deployment.
fn deployment(http: &str) -> Result<Value, String> {
    match http_get(http, "/v1/jobs/svc/deployment") {
        Some((200, body)) => {
            let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
            assert_eq!(v["groups"][0]["group"], "web", "{v}");
            Ok(v["groups"][0]["deployment"].clone())
        }
        other => Err(format!("{other:?}")),
    }
}

/// One worker w1 and one master (no store) on loopback, the event stream
/// followed by `regent events`.
struct One {
    c: Cluster,
    spec: MasterSpec,
    _master: Proc,
    _worker: Proc,
    events: Proc,
}

impl One {
    fn start(name: &str) -> One {
        let c = Cluster::new(name);
        let spec = MasterSpec::new("m1", &["--recovery", "none"]);
        let m = spec.addr();
        let master = c.master(&spec);
        let worker = c.worker("w1", std::slice::from_ref(&m), 8, 1024, &["--ports", &ports()]);
        wait_for(BOUND, "the worker ALIVE", || {
            alive_with_workers(&api_state(&spec.http_addr()).ok_or("no answer")?, &["w1"])
        });
        let events = c.spawn("events", Kind::Other, &["events", "--masters", &m]);
        One { c, spec, _master: master, _worker: worker, events }
    }

    /// `regent job submit` of `text` (as `svc.toml`).
    fn submit(&self, text: &str) {
        let path = self.c.path("svc.toml");
        std::fs::write(&path, text).unwrap();
        let m = self.spec.addr();
        let out = self.c.run(&["job", "submit", "--masters", &m, path.to_str().unwrap()], BOUND);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// Waits until three executors of `version` serve, one per slot.
    fn three_serving(&self, version: &str) -> Vec<Serving> {
        wait_for(BOUND, &format!("three {version} executors serving"), || {
            let all = serving(&api_state(&self.spec.http_addr()).ok_or("no state")?)?;
            let slots: Vec<u32> = all.iter().map(|s| s.slot).collect();
            if slots == [0, 1, 2] && all.iter().all(|s| s.version == version) {
                Ok(all)
            } else {
                Err(format!("{all:?}"))
            }
        })
    }

    /// `regent COMMAND --masters M ARGS`, which must exit 0: its stdout.
    fn cli(&self, command: &[&str], args: &[&str]) -> String {
        let m = self.spec.addr();
        let mut all = command.to_vec();
        all.extend(["--masters", m.as_str()]);
        all.extend_from_slice(args);
        let out = self.c.run(&all, BOUND);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits for `regent events` to have printed a line containing each of
    /// `lines`, in that order.
    fn told(&self, what: &str, lines: &[&str]) -> String {
        wait_for(BOUND, what, || {
            let said = self.events.stdout();
            let mut rest = said.as_str();
            for l in lines {
                match rest.find(l) {
                    Some(at) => rest = &rest[at + l.len()..],
                    None => return Err(format!("no {l:?} in:\n{said}")),
                }
            }
            Ok(said.clone())
        })
    }
}

#[test]
fn a_broken_canary_fails_its_deployment_and_every_slot_ends_on_the_old_version() {
    let one = One::start("deploy-broken");
    let marker = unique("svc-broken");
    let update = "max_parallel = 1\nmin_healthy_time = \"1s\"\nhealthy_deadline = \"6s\"\n\
                  canary = 1\nauto_revert = true";
    one.submit(&job(&marker, "v1", "ok", update));
    let v1 = one.three_serving("v1");
    // `regent status` shows each running executor's health.
    let text = wait_for(BOUND, "three executors passing in `regent status`", || {
        let text = one.cli(&["status"], &[]);
        let passing =
            text.lines().filter(|l| l.contains(" RUNNING ") && l.contains(" passing")).count();
        if passing == 3 {
            Ok(text)
        } else {
            Err(text)
        }
    });
    assert!(text.contains("HEALTH"), "{text}");

    // v2's /health answers 500: the canary (slot 0) never becomes healthy.
    one.submit(&job(&marker, "v2", "fail", update));
    let canary = wait_for(BOUND, "the v2 canary serving on slot 0", || {
        let all = serving(&api_state(&one.spec.http_addr()).ok_or("no state")?)?;
        match all.iter().find(|s| s.slot == 0 && s.version == "v2") {
            Some(s) => Ok(s.clone()),
            None => Err(format!("{all:?}")),
        }
    });
    let d = deployment(&one.spec.http_addr()).unwrap();
    assert_eq!(
        (d["seq"].as_u64(), d["canaries"].clone()),
        (Some(1), serde_json::json!([0])),
        "{d}"
    );
    // Its health, failing, in the events and in `regent status`.
    one.told(
        "the canary's health failing",
        &[&format!("executor {}", canary.executor), "health failing", "GET /health answered 500"],
    );
    // The old executors of slots 1 and 2 serve throughout; the deployment
    // fails at the canary's healthy deadline and reverts.
    let reverted = wait_for(BOUND, "deployment 2, the revert, succeeded", || {
        let all = serving(&api_state(&one.spec.http_addr()).ok_or("no state")?)?;
        for old in &v1[1..] {
            assert!(all.contains(old), "{old:?} serves throughout: {all:?}");
        }
        let d = deployment(&one.spec.http_addr())?;
        if d["seq"] == 2 && d["state"] == "succeeded" {
            Ok((d, all))
        } else {
            Err(format!("{d}"))
        }
    });
    let (d, all) = reverted;
    assert_eq!(d["revert_of"], 1, "{d}");
    assert_eq!(d["reverts_because"], "healthy_deadline 6s passed on slot 0", "{d}");
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(all.iter().all(|s| s.version == "v1"), "every slot on v1: {all:?}");
    assert_eq!(&all[1..], &v1[1..], "slots 1 and 2: the same v1 executors, never stopped");
    assert!(!pid_alive(canary.pid), "the canary is gone: {canary:?}");
    assert_eq!(leaders_with_marker(&marker).len(), 3, "one executor per slot, no other");
    one.told(
        "the failure and the revert told",
        &[
            "deployment 1 of group svc/web started",
            "deployment 1 of group svc/web failed",
            "healthy: healthy_deadline 6s passed on slot 0",
            "deployment 2 (revert of 1) of group svc/web reverting",
            "deployment 2 (revert of 1) of group svc/web succeeded",
        ],
    );
    let text = one.cli(&["job", "status"], &["svc"]);
    assert!(text.contains("group \"web\": desired/placed/running/done 3/3/3/0"), "{text}");
}

#[test]
fn a_good_canary_waits_for_promotion_then_every_slot_runs_the_new_version() {
    let one = One::start("deploy-good");
    let marker = unique("svc-good");
    let update = "max_parallel = 1\nmin_healthy_time = \"1s\"\ncanary = 1";
    one.submit(&job(&marker, "v1", "ok", update));
    let v1 = one.three_serving("v1");
    one.submit(&job(&marker, "v2", "ok", update));
    let d = wait_for(BOUND, "the canary healthy, awaiting promotion", || {
        let d = deployment(&one.spec.http_addr())?;
        if d["state"] == "awaiting_promotion" {
            Ok(d)
        } else {
            Err(format!("{d}"))
        }
    });
    assert_eq!(
        (d["healthy"].as_u64(), d["placed"].as_u64(), d["old"].as_u64()),
        (Some(1), Some(1), Some(2)),
        "{d}"
    );
    assert!(d["progress_due_ms"].is_null(), "no deadline while waiting: {d}");
    let text = one.cli(&["job", "status"], &["svc"]);
    assert!(text.contains("deployment 1: canary 1/1 healthy, awaiting promotion: regent job promote svc --group web"), "{text}");
    // Waiting replaces nothing: slots 1 and 2 keep their v1 executors
    // (checked twice, a few health intervals apart).
    for _ in 0..2 {
        std::thread::sleep(Duration::from_secs(1));
        let all = serving(&api_state(&one.spec.http_addr()).unwrap()).unwrap();
        assert_eq!(&all[1..], &v1[1..], "nothing replaced before promotion: {all:?}");
        assert_eq!(all[0].version, "v2", "{all:?}");
        assert_eq!(deployment(&one.spec.http_addr()).unwrap()["state"], "awaiting_promotion");
    }
    let _ = one.cli(&["job", "promote"], &["svc"]);
    let v2 = one.three_serving("v2");
    let d = wait_for(BOUND, "deployment 1 succeeded", || {
        let d = deployment(&one.spec.http_addr())?;
        if d["state"] == "succeeded" {
            Ok(d)
        } else {
            Err(format!("{d}"))
        }
    });
    assert_eq!(
        (d["seq"].as_u64(), d["healthy"].as_u64(), d["old"].as_u64()),
        (Some(1), Some(3), Some(0)),
        "{d}"
    );
    assert!(
        v2.iter().all(|s| !v1.iter().any(|o| o.pid == s.pid)),
        "every v1 replaced: {v1:?} {v2:?}"
    );
    assert!(v1.iter().all(|s| !pid_alive(s.pid)), "no v1 process is left: {v1:?}");
    assert_eq!(leaders_with_marker(&marker).len(), 3, "one executor per slot, no other");
    one.told(
        "the deployment told",
        &[
            "deployment 1 of group svc/web started",
            "deployment 1 of group svc/web awaiting_promotion",
            "deployment 1 of group svc/web promoted",
            "deployment 1 of group svc/web succeeded",
        ],
    );
}

#[test]
fn a_new_leader_goes_on_with_a_deployment_after_a_kill_9_and_never_doubles_a_slot() {
    let zk = ZkServer::start();
    let c = Cluster::new("deploy-failover");
    let root = format!("/{}", unique("deploy-failover"));
    let specs: Vec<MasterSpec> =
        ["m1", "m2"].iter().map(|id| MasterSpec::zookeeper(id, &zk.addr(), &root, 4000)).collect();
    let mut masters = vec![c.master(&specs[0])];
    let mut running = vec![true, true];
    wait_for(BOUND, "m1 ALIVE", || sole_alive(&specs[..1], &running[..1], &[]).map(|_| ()));
    masters.push(c.master(&specs[1]));
    let all_masters: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
    let m = all_masters.join(",");
    let _worker = c.worker("w1", &all_masters, 8, 1024, &["--ports", &ports()]);
    let leader = wait_for(BOUND, "a leader with w1", || sole_alive(&specs, &running, &["w1"]));
    let http = |i: usize| specs[i].http_addr();

    let marker = unique("svc-failover");
    let update = "max_parallel = 1\nmin_healthy_time = \"3s\"";
    let submit = |text: String| {
        let path = c.path("svc.toml");
        std::fs::write(&path, text).unwrap();
        let out = c.run(&["job", "submit", "--masters", &m, path.to_str().unwrap()], BOUND);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    submit(job(&marker, "v1", "ok", update));
    let on = |i: usize, version: &str| -> Result<Vec<Serving>, String> {
        let all = serving(&api_state(&http(i)).ok_or("no state")?)?;
        let slots: Vec<u32> = all.iter().map(|s| s.slot).collect();
        if slots == [0, 1, 2] && all.iter().all(|s| s.version == version) {
            Ok(all)
        } else {
            Err(format!("{all:?}"))
        }
    };
    let v1 = wait_for(BOUND, "three v1 executors serving", || on(leader.0, "v1"));

    // Never more than one service process per slot: at most three at any
    // sample, from the update to the end.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (stop, marker) = (stop.clone(), marker.clone());
        std::thread::spawn(move || {
            let mut most = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(leaders_with_marker(&marker).len());
                std::thread::sleep(Duration::from_millis(20));
            }
            most
        })
    };
    submit(job(&marker, "v2", "ok", update));
    // Slot 0 healthy on v2, slot 1 being replaced: the leader dies.
    let before = wait_for(BOUND, "deployment 1 with slot 0 healthy", || {
        let d = deployment(&http(leader.0))?;
        if d["state"] == "rolling" && d["healthy"].as_u64() == Some(1) {
            Ok(d)
        } else {
            Err(format!("{d}"))
        }
    });
    masters[leader.0].kill9();
    running[leader.0] = false;
    let next = 1 - leader.0;
    wait_for(BOUND, "the standby leads with w1", || {
        sole_alive(&specs, &running, &["w1"]).map(|(i, _)| assert_eq!(i, next))
    });
    let after = wait_for(BOUND, "the new leader's deployment succeeded", || {
        let d = deployment(&http(next))?;
        assert_eq!(d["seq"], before["seq"], "the same deployment: {d}");
        if d["state"] == "succeeded" {
            Ok(d)
        } else {
            Err(format!("{d}"))
        }
    });
    let v2 = wait_for(BOUND, "three v2 executors serving", || on(next, "v2"));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let most = sampler.join().unwrap();
    assert!(most <= 3, "at most one service process per slot, saw {most}");
    assert_eq!((after["healthy"].as_u64(), after["old"].as_u64()), (Some(3), Some(0)), "{after}");
    assert!(v1.iter().all(|s| !pid_alive(s.pid)), "no v1 process is left: {v1:?}");
    assert_eq!(leaders_with_marker(&marker).len(), 3, "one executor per slot, no other");
    assert!(v2.iter().all(|s| pid_alive(s.pid)), "{v2:?}");
    masters[next].assert_running("at the end");
}

//! End-to-end: Spark's FaultToleranceTest scenarios against regent, with a
//! real ZooKeeper server and real processes (docs/design.md#issue-12 item 7). Every master
//! that replaces a stopped one comes up at a *new* address: the workers,
//! started with the first master's address only, find it through the
//! leader's advertised master set and the new leader's contact of its
//! recorded workers (docs/design.md#seed-002). Masters are stopped with `kill -9` (the
//! standby's fast takeover then deposes the dead leader; its own suite is
//! `e2e_fast_takeover.rs`); sessions are 4 s (10 s for the frozen leader).
//! Outcomes are asserted within generous bounds; the figures belong in the
//! failover benchmark. Run one at a time (`--test-threads=1`).

mod support;

use std::time::Duration;
use support::cluster::{sole_alive, unique, wait_for, Cluster, MasterSpec, Proc};
use support::zk_server::ZkServer;

/// Bound for one step (a JVM start, an election after a session expiry).
const BOUND: Duration = Duration::from_secs(60);

const WORKERS: [&str; 3] = ["w1", "w2", "w3"];

/// A cluster of masters sharing one ZooKeeper root, and workers that were
/// told of the first master only.
struct Fixture {
    _zk: ZkServer,
    c: Cluster,
    zk: String,
    root: String,
    specs: Vec<MasterSpec>,
    masters: Vec<Proc>,
    running: Vec<bool>,
    workers: Vec<Proc>,
    /// The session timeout every master asks for.
    session_ms: u64,
}

impl Fixture {
    fn start(name: &str, masters: usize) -> Fixture {
        Fixture::start_with_session(name, masters, 4000)
    }

    fn start_with_session(name: &str, masters: usize, session_ms: u64) -> Fixture {
        let zk_server = ZkServer::start();
        let mut f = Fixture {
            zk: zk_server.addr(),
            _zk: zk_server,
            c: Cluster::new(name),
            root: format!("/{}", unique(name)),
            specs: Vec::new(),
            masters: Vec::new(),
            running: Vec::new(),
            workers: Vec::new(),
            session_ms,
        };
        for _ in 0..masters {
            f.add_master();
            // One after another: the first leads (the oldest candidate).
            if f.specs.len() == 1 {
                wait_for(BOUND, "the first master ALIVE", || f.view(&[]).map(|_| ()));
            }
        }
        let first = vec![f.specs[0].addr()];
        f.workers = WORKERS.iter().map(|id| f.c.worker(id, &first, 1, 256, &[])).collect();
        f.leader_with_all_workers("the cluster forms");
        f
    }

    /// Starts one more master, at a new address.
    fn add_master(&mut self) -> usize {
        let id = format!("m{}", self.specs.len() + 1);
        let spec = MasterSpec::zookeeper(&id, &self.zk, &self.root, self.session_ms);
        self.masters.push(self.c.master(&spec));
        self.specs.push(spec);
        self.running.push(true);
        self.specs.len() - 1
    }

    fn kill(&mut self, i: usize) {
        self.masters[i].kill9();
        self.running[i] = false;
    }

    fn view(&self, workers: &[&str]) -> Result<usize, String> {
        sole_alive(&self.specs, &self.running, workers).map(|(i, _)| i)
    }

    /// Waits for exactly one ALIVE master with every worker ALIVE there.
    fn leader_with_all_workers(&self, what: &str) -> usize {
        wait_for(BOUND, what, || self.view(&WORKERS))
    }

    fn assert_running(&mut self, context: &str) {
        for (m, up) in self.masters.iter_mut().zip(&self.running) {
            if *up {
                m.assert_running(context);
            }
        }
        for w in &mut self.workers {
            w.assert_running(context);
        }
    }
}

/// FaultToleranceTest "sanity" and "many masters": three masters, one
/// leads, the others stand by; an application completes.
#[test]
fn sanity_with_many_masters_an_application_completes() {
    let mut f = Fixture::start("ft-sanity", 3);
    let leader = f.leader_with_all_workers("one leader");
    assert_eq!(leader, 0, "the oldest master leads");
    let masters: Vec<String> = f.specs.iter().map(MasterSpec::addr).collect();
    let mut submit = f.c.submit(
        "submit",
        &masters,
        &["--executors", "3", "--cores", "1", "--memory", "64"],
        &["sh", "-c", "exit 0"],
    );
    let status = submit.wait_exit(BOUND);
    assert_eq!(status.code(), Some(0), "{}\n{}", submit.stdout(), submit.stderr());
    f.assert_running("at the end");
}

/// FaultToleranceTest "single master halt" and "single master restart"
/// (here: at a new address): the only master dies; a new one at another
/// address leads over the same ZooKeeper state, and the workers — told of
/// the dead master only — re-register with it.
#[test]
fn a_lone_master_killed_and_replaced_at_a_new_address_keeps_its_workers() {
    let mut f = Fixture::start("ft-single", 1);
    f.kill(0);
    let new = f.add_master();
    let leader = f.leader_with_all_workers("the replacement ALIVE with every worker");
    assert_eq!(leader, new);
    f.assert_running("after the replacement");
}

/// FaultToleranceTest "all but standby failure": the leader and one
/// standby die at once; the last standby leads with every worker.
#[test]
fn all_but_one_standby_fail_and_it_leads_with_every_worker() {
    let mut f = Fixture::start("ft-all-but-standby", 3);
    f.kill(0);
    f.kill(1);
    let leader = f.leader_with_all_workers("the last standby ALIVE with every worker");
    assert_eq!(leader, 2);
    f.assert_running("after the failures");
}

/// FaultToleranceTest "rolling outage": again and again a fresh master
/// joins (at a new address) and the leader dies; the oldest surviving
/// master leads each time, with every worker.
#[test]
fn rolling_outage_the_oldest_surviving_master_leads_each_time() {
    let mut f = Fixture::start("ft-rolling", 2);
    for round in 0..3 {
        let leader = f.leader_with_all_workers(&format!("round {round}: a leader"));
        f.add_master();
        // Let the newcomer join the election (and the master set).
        wait_for(BOUND, "the newcomer STANDBY", || {
            let spec = f.specs.last().expect("just added");
            match support::cluster::api_state(&spec.http_addr()) {
                Some(v) if v["status"] == "STANDBY" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        });
        f.kill(leader);
        let next = f.leader_with_all_workers(&format!("round {round}: the next leader"));
        let oldest = f.running.iter().position(|up| *up).expect("masters survive");
        assert_eq!(next, oldest, "round {round}: the oldest surviving master leads");
    }
    f.assert_running("after the rolling outage");
}

/// FaultToleranceTest "whole cluster restart" (at new addresses): every
/// master dies; two new ones come up elsewhere over the same ZooKeeper
/// state, and the workers find the new leader.
#[test]
fn every_master_replaced_at_new_addresses_keeps_the_workers() {
    let mut f = Fixture::start("ft-whole", 2);
    f.kill(0);
    f.kill(1);
    f.add_master();
    f.add_master();
    let leader = f.leader_with_all_workers("a new leader ALIVE with every worker");
    assert!(leader >= 2, "one of the new masters leads");
    f.assert_running("after the restart");
}

/// A frozen leader (SIGSTOP past its 10 s session, then SIGCONT). Its port
/// still accepts and its connections stay open, so the fast takeover's
/// detector never fires: for 5 s (well inside the session; its last ping
/// may have been up to a third of the session before the stop) the standby
/// stays STANDBY and logs no deposition. Then the session expires and the
/// standby takes over with every worker; once woken, the old leader never
/// reports ALIVE beside its successor — its lease ran out while it was
/// stopped, so it steps down before acting on anything — and no worker
/// follows it: one master is ALIVE with every worker at every poll.
#[test]
fn a_frozen_leader_woken_after_its_session_never_leads_beside_its_successor() {
    let mut f = Fixture::start_with_session("ft-frozen", 2, 10_000);
    // The standby's watch on the leader is up (it proved m1's epoch).
    wait_for(BOUND, "m2 watching m1", || {
        match support::cluster::api_state(&f.specs[1].http_addr()) {
            Some(v)
                if v["status"] == "STANDBY"
                    && v["leader_id"] == "m1"
                    && v["leader_epoch"].as_u64() > Some(0) =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    });
    let pid = f.masters[0].pid().to_string();
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill").args([sig, &pid]).status();
        assert!(ok.is_ok_and(|s| s.success()), "kill {sig} {pid}");
    };
    let detector = ["the leader's process is gone", "deposed: deleted", "not deposed ("];
    let deposition = |log: &str| -> Option<String> {
        log.lines().find(|l| detector.iter().any(|d| l.contains(d))).map(str::to_owned)
    };
    signal("-STOP");
    let stopped = std::time::Instant::now();
    // Not taken over early: the standby stays STANDBY, its detector silent.
    while stopped.elapsed() < Duration::from_secs(5) {
        let status = support::cluster::api_state(&f.specs[1].http_addr())
            .map(|v| v["status"].as_str().unwrap_or("?").to_owned());
        assert_eq!(
            status.as_deref(),
            Some("STANDBY"),
            "m2 {:?} after the leader froze: too early",
            stopped.elapsed()
        );
        if let Some(line) = deposition(&f.masters[1].stderr()) {
            panic!("the standby tried to depose a frozen leader: {line}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Stopped, it answers nothing: watch the standby only.
    let standby_only = [false, true];
    wait_for(BOUND, "the standby ALIVE with every worker", || {
        sole_alive(&f.specs, &standby_only, &WORKERS).map(|_| ())
    });
    eprintln!("the standby took over {:?} after the leader froze", stopped.elapsed());
    if let Some(line) = deposition(&f.masters[1].stderr()) {
        panic!("the session's expiry, not the detector, took the frozen leader over: {line}");
    }
    signal("-CONT");
    // For a while after the wake-up, every poll sees exactly one ALIVE
    // master — the successor — with every worker.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < until {
        match f.view(&WORKERS) {
            Ok(1) => {}
            // The woken process may not answer HTTP for a moment.
            Err(e) if e.contains("no answer") && !e.contains("2 ALIVE") => {}
            other => panic!("after the wake-up: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for(BOUND, "the woken master STANDBY", || {
        match support::cluster::api_state(&f.specs[0].http_addr()) {
            Some(v) if v["status"] == "STANDBY" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    f.assert_running("after the wake-up");
}

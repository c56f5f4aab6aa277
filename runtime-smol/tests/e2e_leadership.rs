//! End-to-end: losing leadership is not process death (docs/design.md#leadership-that-cannot-act-is-given-up), and
//! a ZooKeeper connection loss is not a loss of leadership. Real `regent`
//! processes, a real ZooKeeper server on loopback, 10 s sessions; the
//! faults are injected where users meet them: a TCP proxy between the
//! leader and ZooKeeper that cuts the connection while a store write
//! passes, the leader's election node deleted from outside, an operator's
//! `regent step-down`. Outcomes are asserted within bounds well under the
//! session timeout (the figures belong in benchmarks). Run one at a time
//! (`--test-threads=1`).

mod support;

use regent_core::elector::CandidateName;
use serde_json::Value;
use std::time::Duration;
use support::cluster::{api_state, sole_alive, unique, wait_for, Cluster, MasterSpec, Proc};
use support::zk_proxy::ZkProxy;
use support::zk_server::ZkServer;
use zookeeper_client as zkc;

/// Bound for a cluster to form (JVM, processes, first election).
const START: Duration = Duration::from_secs(60);

/// The session timeout every master asks for (the fixture's server allows
/// up to 20 s).
const SESSION_MS: &str = "10000";

/// Bound for recovering from each fault: well under the 10 s session
/// timeout, so passing proves no session had to expire.
const WELL_BEFORE_EXPIRY: Duration = Duration::from_secs(7);

const WORKERS: [&str; 2] = ["w1", "w2"];

fn zk_args<'a>(zk: &'a str, root: &'a str) -> Vec<&'a str> {
    vec![
        "--recovery",
        "zookeeper",
        "--zk",
        zk,
        "--zk-root",
        root,
        "--zk-session-timeout",
        SESSION_MS,
    ]
}

fn status(spec: &MasterSpec) -> String {
    api_state(&spec.http_addr())
        .map(|v| v["status"].as_str().unwrap_or("?").to_owned())
        .unwrap_or_else(|| "no answer".into())
}

/// `spec` answers as STANDBY (its process alive, its HTTP served).
fn is_standby(spec: &MasterSpec) -> Result<(), String> {
    match status(spec).as_str() {
        "STANDBY" => Ok(()),
        other => Err(format!("{} is {other}", spec.id)),
    }
}

fn leader_view(specs: &[MasterSpec]) -> Result<(usize, Value), String> {
    sole_alive(specs, &vec![true; specs.len()], &WORKERS)
}

/// The election nodes under `<root>/election`, lowest sequence first.
fn election_nodes(zk: &str, root: &str) -> Vec<String> {
    smol::block_on(async {
        let client = zkc::Client::connect(zk).await.expect("a test client connects");
        let mut names =
            client.list_children(&format!("{root}/election")).await.expect("list election");
        names.sort_by_key(|n| CandidateName::parse(n).map(|c| c.seq).unwrap_or(u64::MAX));
        names
    })
}

fn delete_node(zk: &str, path: &str) {
    smol::block_on(async {
        let client = zkc::Client::connect(zk).await.expect("a test client connects");
        client.delete(path, None).await.expect("delete the election node");
    })
}

struct Fixture {
    _zk: ZkServer,
    c: Cluster,
    specs: Vec<MasterSpec>,
    masters: Vec<Proc>,
    workers: Vec<Proc>,
    zk_addr: String,
    root: String,
}

impl Fixture {
    /// Two masters (`m1` dialling ZooKeeper through `m1_zk`, if given) and
    /// two workers; waits for `m1` to lead with both workers.
    fn start(name: &str, proxy_for_m1: Option<&dyn Fn(String) -> String>) -> Fixture {
        let zk = ZkServer::start();
        let zk_addr = zk.addr();
        let c = Cluster::new(name);
        let root = format!("/{}", unique(name));
        let m1_zk = proxy_for_m1.map(|p| p(zk_addr.clone())).unwrap_or_else(|| zk_addr.clone());
        let specs = vec![
            MasterSpec::new("m1", &zk_args(&m1_zk, &root)),
            MasterSpec::new("m2", &zk_args(&zk_addr, &root)),
        ];
        let addrs: Vec<String> = specs.iter().map(MasterSpec::addr).collect();
        let mut masters = vec![c.master(&specs[0])];
        // m1 first, so it holds the lowest election node and leads.
        wait_for(START, "m1 ALIVE", || match status(&specs[0]).as_str() {
            "ALIVE" => Ok(()),
            other => Err(other.to_owned()),
        });
        masters.push(c.master(&specs[1]));
        let workers = WORKERS.iter().map(|id| c.worker(id, &addrs, 1, 256, &[])).collect();
        let (first, _) = wait_for(START, "one leader with both workers", || leader_view(&specs));
        assert_eq!(first, 0, "m1 leads");
        wait_for(START, "m2 STANDBY", || is_standby(&specs[1]));
        Fixture { _zk: zk, c, specs, masters, workers, zk_addr, root }
    }

    fn assert_all_running(&mut self, context: &str) {
        for m in &mut self.masters {
            m.assert_running(context);
        }
        for w in &mut self.workers {
            w.assert_running(context);
        }
    }
}

#[test]
fn a_zookeeper_cut_during_a_store_write_leaves_every_master_running() {
    let proxy = std::cell::OnceCell::<ZkProxy>::new();
    let make = |upstream: String| proxy.get_or_init(|| ZkProxy::start(upstream)).addr();
    let mut f = Fixture::start("zk-cut-write", Some(&make));
    let proxy = proxy.get().expect("m1 dials through the proxy");
    let addrs: Vec<String> = f.specs.iter().map(MasterSpec::addr).collect();

    // A third worker registers: its record's fenced write is forwarded to
    // ZooKeeper (applied) and the connection is cut before the reply.
    proxy.arm_multi_trap(&regent_core::zk::layout::stem_path("/state", "w-w3"));
    f.workers.push(f.c.worker("w3", &addrs, 1, 256, &[]));
    wait_for(START, "the store write of w3 to be cut", || {
        if proxy.fired() > 0 {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
    let all = ["w1", "w2", "w3"];
    let (leader, _) = wait_for(WELL_BEFORE_EXPIRY, "a leader with all three workers", || {
        sole_alive(&f.specs, &[true, true], &all)
    });
    assert_eq!(leader, 0, "m1 kept its leadership through the cut (same session)");
    f.assert_all_running("after the cut");
    let log = f.masters[0].stderr();
    assert!(log.contains("suspended"), "m1 was suspended during the cut:\n{log}");
    assert!(!log.contains("giving up leadership"), "m1 never gave up leadership:\n{log}");
    let metrics = support::cluster::http_get(&f.specs[0].http_addr(), "/metrics")
        .expect("m1 serves /metrics")
        .1;
    assert!(
        metrics.lines().any(|l| l.starts_with("regent_store_resends_total ") && !l.ends_with(" 0")),
        "the cut write was resent:\n{metrics}"
    );
}

#[test]
fn a_zookeeper_cut_during_the_new_leaders_epoch_write_still_elects_it() {
    // The epoch write is the first a new leader makes; cut right after it
    // lands, the resend finds the node there (NodeExists), syncs, reads back
    // its own bytes and counts it as done, without giving up leadership.
    let proxy = std::cell::OnceCell::<ZkProxy>::new();
    let make = |upstream: String| {
        let p = proxy.get_or_init(|| ZkProxy::start(upstream));
        p.arm_multi_trap("/state/epoch");
        p.addr()
    };
    let mut f = Fixture::start("zk-cut-epoch", Some(&make));
    let proxy = proxy.get().expect("m1 dials through the proxy");
    assert_eq!(proxy.fired(), 1, "m1's epoch write was cut after it landed");
    f.assert_all_running("after the cut epoch write");
    let log = f.masters[0].stderr();
    assert!(!log.contains("giving up leadership"), "m1 never gave up leadership:\n{log}");
}

#[test]
fn deleting_the_leaders_election_node_hands_over_and_the_old_leader_stays_up() {
    let mut f = Fixture::start("zk-node-deleted", None);
    let nodes = election_nodes(&f.zk_addr, &f.root);
    assert_eq!(nodes.len(), 2, "two candidates: {nodes:?}");
    // What a standby taking over does: delete the leader's node.
    delete_node(&f.zk_addr, &format!("{}/election/{}", f.root, nodes[0]));
    // m1 may still answer ALIVE for the few milliseconds before its watch
    // fires: wait for the handover itself.
    wait_for(WELL_BEFORE_EXPIRY, "m2 ALIVE with both workers", || match leader_view(&f.specs)? {
        (1, v) => Ok(v),
        (i, _) => Err(format!("{} still leads", f.specs[i].id)),
    });
    wait_for(WELL_BEFORE_EXPIRY, "m1 STANDBY", || is_standby(&f.specs[0]));
    f.assert_all_running("after the node was deleted");
    // m1 is a candidate again (behind m2), so it can lead later.
    wait_for(WELL_BEFORE_EXPIRY, "two candidates again", || {
        let n = election_nodes(&f.zk_addr, &f.root);
        if n.len() == 2 {
            Ok(())
        } else {
            Err(format!("{n:?}"))
        }
    });
}

#[test]
fn step_down_hands_leadership_to_the_standby_and_the_old_leader_stays_up() {
    let mut f = Fixture::start("zk-step-down", None);
    let masters = f.specs.iter().map(MasterSpec::addr).collect::<Vec<_>>().join(",");
    let out = f.c.run(&["step-down", "--masters", &masters], Duration::from_secs(30));
    assert!(
        out.status.success(),
        "step-down: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (leader, state) =
        wait_for(WELL_BEFORE_EXPIRY, "m2 ALIVE with both workers", || leader_view(&f.specs));
    assert_eq!(leader, 1, "m2 leads");
    wait_for(WELL_BEFORE_EXPIRY, "m1 STANDBY", || is_standby(&f.specs[0]));
    // The standby names the leader with its real epoch (proven over its
    // watch connection), not the election's sequence floor (docs/design.md#issue-12).
    let epoch = state["epoch"].as_u64().expect("the leader's epoch");
    wait_for(WELL_BEFORE_EXPIRY, "m1 names m2 at m2's epoch", || {
        let s = api_state(&f.specs[0].http_addr()).ok_or("m1 does not answer")?;
        match (s["leader_id"].as_str(), s["leader_epoch"].as_u64()) {
            (Some("m2"), Some(e)) if e == epoch => Ok(()),
            other => Err(format!("m1 names {other:?}, m2 leads at {epoch}")),
        }
    });
    f.assert_all_running("after the step-down");
    let log = f.masters[0].stderr();
    assert!(log.contains("step down"), "m1 says why it stepped down:\n{log}");

    // And back: m2 steps down, m1 (a candidate again) leads.
    let out = f.c.run(&["step-down", "--masters", &masters], Duration::from_secs(30));
    assert!(out.status.success(), "second step-down: {}", String::from_utf8_lossy(&out.stderr));
    let (leader, _) = wait_for(WELL_BEFORE_EXPIRY, "m1 ALIVE again", || leader_view(&f.specs));
    assert_eq!(leader, 0, "m1 leads again");
    f.assert_all_running("after the second step-down");
}

#[test]
fn step_down_is_refused_by_a_single_master() {
    let c = Cluster::new("single-step-down");
    let spec = MasterSpec::new("solo", &[]);
    let mut m = c.master(&spec);
    wait_for(START, "solo ALIVE", || match status(&spec).as_str() {
        "ALIVE" => Ok(()),
        other => Err(other.to_owned()),
    });
    let out = c.run(&["step-down", "--masters", &spec.addr()], Duration::from_secs(30));
    assert!(!out.status.success(), "a single master cannot hand over");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no standby can take over"), "{err}");
    m.assert_running("after the refused step-down");
    assert_eq!(status(&spec), "ALIVE");
}

/// Issue 12 (docs/design.md#issue-12): the master set is advertised. A worker given only the
/// leader's address learns the standby from the leader's master list (the
/// masters of the election), so when the leader stops it re-registers with
/// the standby that took over, although nobody told it of that master.
#[test]
fn a_worker_given_only_the_leader_follows_the_standby_it_learned_of() {
    let mut f = Fixture::start("zk-master-set", None);
    let only_m1 = vec![f.specs[0].addr()];
    f.workers.push(f.c.worker("w3", &only_m1, 1, 256, &[]));
    let all = ["w1", "w2", "w3"];
    wait_for(START, "m1 ALIVE with all three workers", || {
        sole_alive(&f.specs, &[true, true], &all).and_then(|(l, _)| match l {
            0 => Ok(()),
            other => Err(format!("m{} leads", other + 1)),
        })
    });
    f.masters[0].sigterm();
    let _ = f.masters[0].wait_exit(START);
    let (leader, _) = wait_for(START, "m2 ALIVE with all three workers", || {
        sole_alive(&f.specs, &[false, true], &all)
    });
    assert_eq!(leader, 1);
    for w in &mut f.workers {
        w.assert_running("after the handover");
    }
}

/// Issue 12 (docs/design.md#issue-12): detection through ZooKeeper, Mesos style. `--masters
/// zk://HOSTS/ROOT` reads the election nodes: `regent status` finds the
/// leader, a worker started with it registers and follows the leader across
/// a step-down; a wrong root is an error naming it.
#[test]
fn clients_and_workers_find_the_masters_through_zookeeper() {
    let mut f = Fixture::start("zk-detect", None);
    let zk_masters = format!("zk://{}{}", f.zk_addr, f.root);
    let out = f.c.run(&["status", "--masters", &zk_masters, "--json"], Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "status: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    let state: Value = serde_json::from_str(&stdout).expect("status --json prints JSON");
    assert_eq!(state["id"], "m1", "the leader answers: {state}");

    f.workers.push(f.c.worker("w3", std::slice::from_ref(&zk_masters), 1, 256, &[]));
    let all = ["w1", "w2", "w3"];
    wait_for(START, "w3 registered with the leader", || {
        sole_alive(&f.specs, &[true, true], &all).map(|_| ())
    });
    let out = f.c.run(&["step-down", "--masters", &zk_masters], Duration::from_secs(30));
    assert!(out.status.success(), "step-down: {}", String::from_utf8_lossy(&out.stderr));
    let (leader, _) = wait_for(START, "m2 ALIVE with all three workers", || {
        sole_alive(&f.specs, &[true, true], &all)
    });
    assert_eq!(leader, 1);

    let wrong = format!("zk://{}/no-such-root", f.zk_addr);
    let out = f.c.run(&["status", "--masters", &wrong], Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("/no-such-root/election"), "the error names the root: {err}");
    f.assert_all_running("at the end");
}

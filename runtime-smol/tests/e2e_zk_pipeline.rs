//! End-to-end: the pipelined ZooKeeper store (docs/design.md#issue-46, item 3) under a cut
//! link. A real leader `m1` reaches a real ZooKeeper server through a
//! proxy that adds 10 ms each way, so its puts queue in the write window
//! (`--zk-write-window`, 64); a standby `m2` dials ZooKeeper directly.
//! `regent load` registers 300 simulated workers from cold (one fenced put
//! each, a create: two round trips) and two frameworks declare 100
//! executors. The proxy severs the leader's link in the middle of the
//! burst, after 300 store writes (multis) passed and while at least 32 are
//! unanswered: the server applied a prefix of those, the leader hears of
//! none.
//!
//! * Within the session (the link is back at once): the leader keeps its
//!   leadership, resends every write in flight, and ends with every worker
//!   registered once, in its view and in ZooKeeper; killed with `kill -9`,
//!   its standby loads exactly the records ZooKeeper holds and leads the
//!   same workers and the same executors, none launched twice.
//! * Longer than the session (ZooKeeper refused for good): the leader stops
//!   acting, the standby takes over, there is never more than one ALIVE
//!   master, and the end is the same; the old leader, back in reach,
//!   rejoins as a standby.
//!
//! Why this shape: the load generator registers hundreds of workers from
//! one process at once, the cheapest way to fill the window with distinct
//! records; 10 ms each way keeps each write in flight long enough for the
//! window to fill without slowing the test; the cut is triggered by what
//! the proxy sees (writes passed, writes unanswered), not by a sleep, so it
//! lands mid-burst on any machine; the standby dials ZooKeeper directly, so
//! the cut is the leader's alone and a second ALIVE master would be a
//! split brain, checked at every poll. What ZooKeeper holds is read
//! directly (no proxy) and compared with what the masters acknowledged.
//!
//! What a user would notice is asserted, never a timing; bounds are
//! generous. Real processes on loopback; run one at a time
//! (`--test-threads=1`). `REGENT_ZK_WRITE_WINDOW=1` (the masters inherit
//! the environment) makes both fail: no cut ever finds 32 writes in flight.

mod support;

use regent_core::store::{format, Record};
use regent_core::zk::layout;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;
use support::cluster::{
    api_state, executors, http_get, unique, wait_for, workers, Cluster, Kind, MasterSpec, Proc,
};
use support::zk_proxy::ZkProxy;
use support::zk_server::ZkServer;
use zookeeper_client as zkc;

/// Bound for a cluster to form, a burst to settle, a failover to end.
const BOUND: Duration = Duration::from_secs(90);

/// One-way latency between the leader and ZooKeeper: a round trip of
/// 20 ms, so a few hundred puts keep the 64-wide window full for a while.
const LATENCY: Duration = Duration::from_millis(10);

/// Simulated workers, registering from cold: 300 puts, each a `SetData`
/// that finds no node then a `Create` (two multis).
const WORKERS: usize = 300;

/// Executors the two frameworks declare (placed once every worker is
/// registered).
const EXECUTORS: usize = 100;

/// The cut comes once this many multis (store writes) passed, in the
/// middle of the burst of registrations (about 600 multis), when many
/// registrations were acknowledged already (the first 64 multis are all
/// `SetData`s that find no node)...
const CUT_AFTER: usize = 300;

/// ... at a moment when this many of them are unanswered (sent, no reply
/// back to the leader yet). With one write at a time
/// (`--zk-write-window 1`) there is never more than one, and no cut.
const CUT_IN_FLIGHT: usize = 32;

/// The simulated peers' measured seconds: long enough that they stay
/// connected through the whole test, a failover included.
const LOAD_SECS: &str = "60";

/// Two masters, a proxied ZooKeeper, and a load started once the proxy is
/// armed. Fields drop in order: the load and the masters first, ZooKeeper after
/// them, the temp dir last.
struct Fixture {
    load: Proc,
    masters: Vec<Proc>,
    specs: Vec<MasterSpec>,
    root: String,
    proxy: ZkProxy,
    zk: ZkServer,
    _c: Cluster,
}

fn status(spec: &MasterSpec) -> String {
    api_state(&spec.http_addr())
        .map(|v| v["status"].as_str().unwrap_or("?").to_owned())
        .unwrap_or_else(|| "no answer".into())
}

fn metric(spec: &MasterSpec, name: &str) -> Option<f64> {
    let (_, body) = http_get(&spec.http_addr(), "/metrics")?;
    body.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

impl Fixture {
    /// `m1` leading through the proxy, `m2` standing by, then the proxy
    /// armed to sever mid-burst ([`CUT_AFTER`], [`CUT_IN_FLIGHT`]; when
    /// `refuse`, every reconnection is refused from then on), then the load.
    fn start(name: &str, session_ms: u64, refuse: bool) -> Fixture {
        let zk = ZkServer::start();
        let proxy = ZkProxy::start(zk.addr());
        proxy.set_latency(LATENCY);
        let c = Cluster::new(name);
        let root = format!("/{}", unique(name));
        let specs = vec![
            MasterSpec::zookeeper("m1", &proxy.addr(), &root, session_ms),
            MasterSpec::zookeeper("m2", &zk.addr(), &root, session_ms),
        ];
        let mut masters = vec![c.master(&specs[0])];
        // m1 first, so it holds the lowest election node and leads.
        wait_for(BOUND, "m1 ALIVE", || match status(&specs[0]).as_str() {
            "ALIVE" => Ok(()),
            other => Err(other.to_owned()),
        });
        masters.push(c.master(&specs[1]));
        wait_for(BOUND, "m2 STANDBY", || match status(&specs[1]).as_str() {
            "STANDBY" => Ok(()),
            other => Err(other.to_owned()),
        });
        proxy.sever_after_multis(CUT_AFTER, CUT_IN_FLIGHT);
        // Only new connections are refused: m1's current one carries the
        // burst until the cut.
        proxy.refuse(refuse);
        let addrs = specs.iter().map(MasterSpec::addr).collect::<Vec<_>>().join(",");
        let (n, e) = (WORKERS.to_string(), EXECUTORS.to_string());
        let args = [
            "load",
            "--masters",
            &addrs,
            "--workers",
            &n,
            "--frameworks",
            "2",
            "--executors",
            &e,
            "--secs",
            LOAD_SECS,
            "--json",
        ];
        let load = c.spawn("load", Kind::Other, &args);
        Fixture { load, masters, specs, root, proxy, zk, _c: c }
    }

    /// Waits for the proxy's cut; returns how many writes it found in
    /// flight (at least [`CUT_IN_FLIGHT`]).
    fn wait_cut(&self) -> usize {
        wait_for(BOUND, "the cut in the burst of registrations", || {
            if self.proxy.fired() == 1 {
                Ok(())
            } else {
                Err("not yet".into())
            }
        });
        let in_flight = self.proxy.in_flight_at_cut();
        assert!(in_flight >= CUT_IN_FLIGHT, "the cut found {in_flight} writes in flight");
        in_flight
    }

    /// The indices of the masters (among those `running`) that say ALIVE;
    /// panics when there are two: a split brain is never waited out.
    fn alive(&self, running: &[bool]) -> Vec<usize> {
        let seen: Vec<(usize, String)> = self
            .specs
            .iter()
            .enumerate()
            .filter(|(i, _)| running[*i])
            .map(|(i, s)| (i, status(s)))
            .collect();
        let alive: Vec<usize> =
            seen.iter().filter(|(_, st)| st == "ALIVE").map(|(i, _)| *i).collect();
        assert!(alive.len() <= 1, "two masters ALIVE at once: {seen:?}");
        alive
    }

    /// Waits until master `leader` is the one ALIVE master and shows the
    /// whole load settled ([`settled`]); checks for a split brain at every
    /// poll. Returns the worker ids and executor ids it shows.
    fn wait_settled(
        &self,
        leader: usize,
        running: &[bool],
        what: &str,
    ) -> (Vec<String>, Vec<String>) {
        wait_for(BOUND, what, || {
            match self.alive(running).as_slice() {
                [i] if *i == leader => {}
                other => return Err(format!("ALIVE masters {other:?}")),
            }
            settled(&api_state(&self.specs[leader].http_addr()).ok_or("no answer")?)
        })
    }

    /// The ids of the worker records in ZooKeeper, read directly (no
    /// proxy), and how many record nodes the store holds in all.
    fn zk_records(&self) -> (Vec<String>, usize) {
        let state = format!("{}/state", self.root);
        let client = smol::block_on(zkc::Client::connect(&self.zk.addr())).expect("a test client");
        let nodes = layout::record_nodes(&state, |p| {
            smol::block_on(client.list_children(p)).unwrap_or_default()
        });
        let mut ids = Vec::new();
        for node in &nodes {
            if !node.stem.starts_with("w-") {
                continue;
            }
            let (data, _) = smol::block_on(client.get_data(&node.path))
                .unwrap_or_else(|e| panic!("{}: {e}", node.path));
            match format::decode(&data) {
                Ok(Record::Worker(w)) if !w.dead => ids.push(w.id.to_string()),
                Ok(Record::Worker(w)) => panic!("{} is marked dead", w.id),
                other => panic!("{}: not a worker record: {other:?}", node.path),
            }
        }
        ids.sort();
        (ids, nodes.len())
    }

    /// Waits for the load to end; its report must say every worker
    /// registered, every executor launched once and RUNNING, no peer
    /// refused.
    fn assert_load_report(&mut self) {
        let status = self.load.wait_exit(BOUND + Duration::from_secs(60));
        assert!(status.success(), "regent load failed:\n{}", self.load.stderr());
        let stdout = self.load.stdout();
        let v: Value = serde_json::from_str(stdout.lines().last().expect("one line of JSON"))
            .expect("the load's JSON report");
        eprintln!("load report: {v}");
        assert_eq!(v["registered"], WORKERS, "every worker registered: {v}");
        // Launched on a simulated worker: a second launch of any slot
        // (relaunched after the cut or the failover) would count here.
        assert_eq!(v["executors_launched"], EXECUTORS, "each executor launched once: {v}");
        assert_eq!(v["executors_running"], EXECUTORS, "{v}");
        assert_eq!(v["rejections"], 0, "{v}");
    }
}

/// `Ok((workers, executors))` when `v` is an ALIVE master with exactly
/// [`WORKERS`] distinct workers, every one ALIVE (durable: a worker shows
/// REGISTERING until its record is written), and exactly [`EXECUTORS`]
/// distinct executors, every one RUNNING.
fn settled(v: &Value) -> Result<(Vec<String>, Vec<String>), String> {
    let ws = workers(v);
    let ex = executors(v);
    let w_ids: BTreeSet<&str> = ws.iter().map(|(id, _)| id.as_str()).collect();
    let e_ids: BTreeSet<&str> = ex.iter().map(|(id, _)| id.as_str()).collect();
    // A doubled entry is a failure at once, not something to wait out.
    assert_eq!(w_ids.len(), ws.len(), "a worker listed twice");
    assert_eq!(e_ids.len(), ex.len(), "an executor listed twice");
    let w_alive = ws.iter().filter(|(_, s)| s == "ALIVE").count();
    let e_running = ex.iter().filter(|(_, s)| s == "RUNNING").count();
    if v["status"] == "ALIVE"
        && ws.len() == WORKERS
        && w_alive == WORKERS
        && ex.len() == EXECUTORS
        && e_running == EXECUTORS
    {
        let w = w_ids.into_iter().map(str::to_owned).collect();
        let e = e_ids.into_iter().map(str::to_owned).collect();
        Ok((w, e))
    } else {
        let odd: Vec<_> = ex.iter().filter(|(_, s)| s != "RUNNING").take(5).collect();
        Err(format!(
            "status {}: {} workers ({w_alive} ALIVE), {} executors ({e_running} RUNNING; others e.g. {odd:?})",
            v["status"],
            ws.len(),
            ex.len()
        ))
    }
}

/// The ids `regent load` gives its workers.
fn load_worker_ids() -> Vec<String> {
    let mut ids: Vec<String> = (0..WORKERS).map(|j| format!("load-0-{j}")).collect();
    ids.sort();
    ids
}

#[test]
fn a_cut_with_dozens_of_writes_in_flight_loses_none_and_doubles_none() {
    let mut f = Fixture::start("zk-pipeline-cut", 10_000, false);
    let in_flight = f.wait_cut();

    // The link is back at once: m1 keeps leading (m2 never leads), every
    // write in doubt is resent, and every worker ends ALIVE once.
    let both = [true, true];
    let (ids, execs) = f.wait_settled(0, &both, "m1 with every worker and executor");
    assert_eq!(ids, load_worker_ids());
    assert_eq!(status(&f.specs[1]), "STANDBY");
    assert_eq!(metric(&f.specs[1], "regent_elections_total"), Some(0.0), "m2 never led");
    let log = f.masters[0].stderr();
    assert!(!log.contains("giving up leadership"), "m1 kept its leadership:\n{log}");
    let resends = metric(&f.specs[0], "regent_store_resends_total").unwrap_or(0.0);
    eprintln!("cut with {in_flight} writes unanswered at the proxy; m1 resent {resends}");
    assert!(resends >= in_flight as f64, "every write in flight resent: {resends} < {in_flight}");

    // ZooKeeper holds exactly those workers, once each.
    let (zk_ids, records) = f.zk_records();
    assert_eq!(zk_ids, ids, "ZooKeeper's worker records are the workers m1 acknowledged");

    // A new leader recovers exactly that: the records it loads, then the
    // same workers and executors (none relaunched).
    f.masters[0].kill9();
    let (ids2, execs2) = f.wait_settled(1, &[false, true], "m2 leading every worker and executor");
    assert_eq!(ids2, ids, "m2 leads the same workers");
    assert_eq!(execs2, execs, "m2 leads the same executors");
    let loaded = metric(&f.specs[1], "regent_store_records_loaded");
    assert_eq!(loaded, Some(records as f64), "m2 loaded every record ZooKeeper holds");
    f.assert_load_report();
}

#[test]
fn a_cut_longer_than_the_session_hands_over_to_one_new_leader_with_every_worker_once() {
    // Short sessions (the server allows 400 ms and up) keep the wait for
    // expiry short; the lease of a 20 ms round trip is far shorter still.
    let mut f = Fixture::start("zk-pipeline-long-cut", 3_000, true);
    let in_flight = f.wait_cut();

    // What m1 acknowledged: its workers ALIVE (a worker is REGISTERING
    // until its record's write is confirmed, and no confirmation comes
    // after the cut). What is durable: ZooKeeper's records now, once what
    // reached the server before the cut is applied, and before m2 can lead
    // (m1's session has seconds to run).
    std::thread::sleep(Duration::from_millis(200));
    let acked: BTreeSet<String> = api_state(&f.specs[0].http_addr())
        .map(|v| workers(&v).into_iter().filter(|(_, s)| s == "ALIVE").map(|(id, _)| id).collect())
        .unwrap_or_default();
    let (durable, records) = f.zk_records();
    assert_eq!(status(&f.specs[1]), "STANDBY", "m2 took over too early for this check");
    let durable: BTreeSet<String> = durable.into_iter().collect();
    eprintln!(
        "cut with {in_flight} writes unanswered at the proxy; m1 had acknowledged {} workers, \
         ZooKeeper holds {} worker records",
        acked.len(),
        durable.len()
    );
    assert!(!acked.is_empty(), "the cut came after some registrations were acknowledged");
    let lost: Vec<&String> = acked.difference(&durable).collect();
    assert!(lost.is_empty(), "acknowledged by m1 but not in ZooKeeper: {lost:?}");
    let all: BTreeSet<String> = load_worker_ids().into_iter().collect();
    assert!(durable.is_subset(&all), "only the load's workers are recorded");

    // ZooKeeper stays out of m1's reach: its session expires, m2 takes
    // over, and at no poll are both ALIVE. m2 loads exactly what
    // ZooKeeper held at the cut.
    let both = [true, true];
    let (ids, _) = f.wait_settled(1, &both, "m2 leading every worker and executor");
    assert_eq!(ids, load_worker_ids());
    let loaded = metric(&f.specs[1], "regent_store_records_loaded");
    assert_eq!(loaded, Some(records as f64), "m2 loaded every record ZooKeeper held");
    let (zk_ids, _) = f.zk_records();
    assert_eq!(zk_ids, ids, "ZooKeeper's worker records are the workers m2 leads");

    // Back in reach, m1 finds its session gone and stands by.
    f.proxy.refuse(false);
    wait_for(BOUND, "m1 STANDBY again, m2 the one leader", || {
        assert!(f.alive(&both).len() <= 1);
        match (status(&f.specs[0]).as_str(), status(&f.specs[1]).as_str()) {
            ("STANDBY", "ALIVE") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    f.masters[0].assert_running("after its session expired");
    let revoked = metric(&f.specs[0], "regent_revocations_total").unwrap_or(0.0);
    assert!(revoked >= 1.0, "m1 lost its leadership (its session), {revoked}");
    f.wait_settled(1, &both, "m2 still leading every worker and executor");
    f.assert_load_report();
}

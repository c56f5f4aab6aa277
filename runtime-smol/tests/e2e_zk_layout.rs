//! End-to-end: a ZooKeeper store written in the flat layout of earlier
//! versions (every record directly under `<root>/state/`, planted here by
//! hand with a plain client) is read by `regent store check --zk`, loaded
//! by a new `regent` master, which moves every record into its shard, and
//! checked again. A real server on loopback; outcomes only, never timings
//! (the figures are the `recovery` benchmark's). Run one at a time
//! (`--test-threads=1`).

mod support;

use regent_core::store::names::key_stem;
use regent_core::store::{format, FrameworkRecord, Record, WorkerRecord};
use regent_core::zk::layout;
use regent_core::{Epoch, FrameworkId, Incarnation, WorkerId};
use std::time::Duration;
use support::cluster::{api_state, unique, wait_for, workers, Cluster, MasterSpec};
use support::zk_proxy::ZkProxy;
use support::zk_server::ZkServer;
use zookeeper_client as zkc;

const BOUND: Duration = Duration::from_secs(60);
const WORKERS: usize = 40;

fn records() -> Vec<Record> {
    records_of(WORKERS)
}

fn records_of(workers: usize) -> Vec<Record> {
    let mut out = vec![Record::Epoch(Epoch(41))];
    out.extend((0..workers).map(|i| {
        Record::Worker(WorkerRecord {
            dead: false,
            id: WorkerId::new(format!("old-{i:03}")),
            incarnation: Incarnation(1),
            cores: 2,
            memory_mb: 512,
            callback: None,
            maintenance: None,
        })
    }));
    out.push(Record::Framework(FrameworkRecord {
        id: FrameworkId::new("fw-old"),
        name: "an application of the old layout".into(),
        failover_timeout_ms: 600_000,
        groups: vec![],
        callback: None,
        registered_at_ms: None,
        job: None,
        tenant: None,
    }));
    out
}

/// Plants `records` in the flat layout under `<root>/state` with a plain
/// client, which it returns.
fn plant_flat(zk_addr: &str, root: &str, records: &[Record]) -> zkc::Client {
    let state = format!("{root}/state");
    smol::block_on(async {
        let zk = zkc::Client::connector()
            .with_session_timeout(Duration::from_secs(4))
            .connect(zk_addr)
            .await
            .expect("a ZooKeeper session");
        let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
        for path in [root, &state] {
            zk.create(path, b"", &open).await.expect("the store's path");
        }
        for r in records {
            let path = layout::flat_path(&state, &key_stem(&r.key()));
            zk.create(&path, &format::encode(r).unwrap(), &open).await.expect("a flat record");
        }
        zk
    })
}

/// Where each planted record is now: (in the flat layout, in its shard).
fn places(client: &zkc::Client, state: &str, records: &[Record]) -> Vec<(bool, bool)> {
    smol::block_on(async {
        let mut out = Vec::new();
        for r in records {
            let flat = layout::flat_path(state, &key_stem(&r.key()));
            let sharded = layout::record_path(state, &r.key());
            let flat = client.check_stat(&flat).await.unwrap().is_some();
            let sharded = client.check_stat(&sharded).await.unwrap().is_some();
            out.push((flat, sharded));
        }
        out
    })
}

/// Every one of `records` is in its shard with the bytes planted.
async fn assert_sharded_as_planted(client: &zkc::Client, state: &str, records: &[Record]) {
    for r in records {
        let path = layout::record_path(state, &r.key());
        let (data, _) = client.get_data(&path).await.unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(data, format::encode(r).unwrap(), "{path}");
    }
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn a_flat_store_of_an_earlier_version_is_loaded_and_moved_into_its_shards() {
    let zk = ZkServer::start();
    let c = Cluster::new("zk-layout");
    let root = format!("/{}", unique("layout"));
    let state = format!("{root}/state");
    let zk_addr = zk.addr();
    let planted = records();
    let client = plant_flat(&zk_addr, &root, &planted);
    let check = || c.run(&["store", "check", "--zk", &zk_addr, "--zk-root", &root], BOUND);
    let out = check();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("{} record node(s) in the flat layout", WORKERS + 1)));
    assert!(text(&out).contains(&format!("{} records in 0 shards", WORKERS + 2)), "{}", text(&out));

    let spec = MasterSpec::zookeeper("m1", &zk_addr, &root, 3000);
    let mut m = c.master(&spec);
    let want = WORKERS;
    wait_for(BOUND, "the master RECOVERING with every recorded worker", || {
        let s = api_state(&spec.http_addr()).ok_or("no /api/state yet")?;
        let n = workers(&s).len();
        // (ALIVE too: after the recovery timeout, silent workers stay.)
        if (s["status"] == "RECOVERING" || s["status"] == "ALIVE") && n == want {
            Ok(())
        } else {
            Err(format!("status {}, {n} workers", s["status"]))
        }
    });
    let log = m.stderr();
    assert!(
        log.contains(&format!("recovering: loaded {} records in", WORKERS + 2)),
        "the load's log line:\n{log}"
    );
    let metrics = support::cluster::http_get(&spec.http_addr(), "/metrics").expect("/metrics").1;
    let moved = format!("regent_store_records_moved_total {}", WORKERS + 1);
    assert!(metrics.lines().any(|l| l == moved), "{moved}:\n{metrics}");
    // Every record is in its shard now, with the same bytes; the epoch is
    // above the planted one.
    smol::block_on(async {
        let top = client.list_children(&state).await.unwrap();
        assert!(
            top.iter().all(|n| n == "epoch" || layout::parse_shard(n).is_some()),
            "only the epoch and shards on top: {top:?}"
        );
        assert_sharded_as_planted(&client, &state, &planted[1..]).await;
        let (epoch, _) = client.get_data(&format!("{state}/epoch")).await.unwrap();
        let Ok(Record::Epoch(e)) = format::decode(&epoch) else { panic!("an epoch record") };
        assert!(e > Epoch(41), "{e:?}");
    });
    m.stop(Duration::from_secs(10));

    let out = check();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("flat layout"), "{}", text(&out));
    assert!(text(&out).contains(&format!("{} records in ", WORKERS + 2)), "{}", text(&out));
    assert!(text(&out).contains("all intact"), "{}", text(&out));
}

/// The move of a flat store interrupted at the daemon: the leader's
/// ZooKeeper connection is cut right after the first move multi reached the
/// server (its reply lost), ZooKeeper stays out of its reach, and the
/// process is killed -9 in the middle of the migration. Every record is in
/// exactly one place at that moment, and the next master finishes the move:
/// every record loaded once, in its shard, with the bytes planted.
#[test]
fn a_migration_killed_halfway_is_finished_by_the_next_master_with_every_record_in_one_place() {
    const N: usize = 600; // five move multis of at most 128 records
    let zk = ZkServer::start();
    let c = Cluster::new("zk-layout-kill");
    let root = format!("/{}", unique("layout-kill"));
    let state = format!("{root}/state");
    let zk_addr = zk.addr();
    let planted = records_of(N);
    let workers_planted = &planted[1..=N];
    let client = plant_flat(&zk_addr, &root, &planted);

    // The first master reaches ZooKeeper through a proxy that goes silent
    // after forwarding the first move multi: the server applies it, the
    // master hears nothing more, and nothing after it reaches the server.
    let proxy = ZkProxy::start(zk_addr.clone());
    proxy.arm_multi_hold(&format!("{state}/w-old-"));
    let first = MasterSpec::zookeeper("m1", &proxy.addr(), &root, 3000);
    let mut m1 = c.master(&first);
    wait_for(BOUND, "the first move multi cut", || {
        if proxy.fired() > 0 {
            Ok(())
        } else {
            Err(format!("not yet; m1 log:\n{}", support::cluster::tail(&m1.stderr(), 5)))
        }
    });
    // Time for the server to apply the multi; then the process dies
    // mid-migration.
    std::thread::sleep(Duration::from_millis(500));
    m1.kill9();
    drop(proxy);

    let at_kill = places(&client, &state, workers_planted);
    assert!(at_kill.iter().all(|(f, s)| f != s), "every record in exactly one place: {at_kill:?}");
    let moved = at_kill.iter().filter(|(_, s)| *s).count();
    assert!(moved > 0, "the cut multi was applied by the server; m1:\n{}", m1.stderr());
    assert!(moved < N, "the kill came halfway: {moved} of {N} moved");

    let second = MasterSpec::zookeeper("m2", &zk_addr, &root, 3000);
    let mut m2 = c.master(&second);
    wait_for(BOUND, "the next master RECOVERING or ALIVE with every recorded worker", || {
        let s = api_state(&second.http_addr()).ok_or("no /api/state yet")?;
        let n = workers(&s).len();
        if (s["status"] == "RECOVERING" || s["status"] == "ALIVE") && n == N {
            Ok(())
        } else {
            Err(format!("status {}, {n} workers", s["status"]))
        }
    });
    let metrics = support::cluster::http_get(&second.http_addr(), "/metrics").expect("/metrics").1;
    let want = format!("regent_store_records_moved_total {}", N - moved);
    assert!(metrics.lines().any(|l| l == want), "{want}:\n{metrics}");
    let after = places(&client, &state, workers_planted);
    assert!(after.iter().all(|p| *p == (false, true)), "every record in its shard only");
    smol::block_on(assert_sharded_as_planted(&client, &state, workers_planted));
    m2.stop(Duration::from_secs(10));
    let out = c.run(&["store", "check", "--zk", &zk_addr, "--zk-root", &root], BOUND);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("flat layout"), "{}", text(&out));
    assert!(text(&out).contains("all intact"), "{}", text(&out));
}

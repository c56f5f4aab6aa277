//! End-to-end: a ZooKeeper store written in the flat layout of earlier
//! versions (every record directly under `<root>/state/`, planted here by
//! hand with a plain client) is read by `regent store check --zk`, loaded
//! by a new `regent` master, which moves every record into its shard, and
//! checked again. A real server on loopback; outcomes only, never timings
//! (the figures are the `recovery` benchmark's). Run one at a time
//! (`--test-threads=1`).

mod support;

use regent_core::store::names::key_stem;
use regent_core::store::{format, zk_layout, FrameworkRecord, Record, WorkerRecord};
use regent_core::{Epoch, FrameworkId, Incarnation, WorkerId};
use std::time::Duration;
use support::cluster::{api_state, unique, wait_for, workers, Cluster, MasterSpec};
use support::zk_server::ZkServer;
use zookeeper_client as zkc;

const BOUND: Duration = Duration::from_secs(60);
const WORKERS: usize = 40;

fn records() -> Vec<Record> {
    let mut out = vec![Record::Epoch(Epoch(41))];
    out.extend((0..WORKERS).map(|i| {
        Record::Worker(WorkerRecord {
            id: WorkerId::new(format!("old-{i:02}")),
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
    }));
    out
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
    let client = smol::block_on(async {
        let zk = zkc::Client::connector()
            .with_session_timeout(Duration::from_secs(4))
            .connect(&zk_addr)
            .await
            .expect("a ZooKeeper session");
        let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
        for path in [&root, &state] {
            zk.create(path, b"", &open).await.expect("the store's path");
        }
        for r in &planted {
            let path = zk_layout::flat_path(&state, &key_stem(&r.key()));
            zk.create(&path, &format::encode(r).unwrap(), &open).await.expect("a flat record");
        }
        zk
    });
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
            top.iter().all(|n| n == "epoch" || zk_layout::parse_shard(n).is_some()),
            "only the epoch and shards on top: {top:?}"
        );
        for r in &planted[1..] {
            let path = zk_layout::record_path(&state, &r.key());
            let (data, _) = client.get_data(&path).await.unwrap_or_else(|e| panic!("{path}: {e}"));
            assert_eq!(data, format::encode(r).unwrap(), "{path}");
        }
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

//! The fenced ZooKeeper store against a real server: records round-trip,
//! deletes are conditional on the incarnation, damage is named, oversized
//! records are refused, and a write is rejected once the writer lost its
//! election node.

mod support;

use regent_core::elector::MultiOp;
use regent_core::store::format;
use regent_core::store::{Record, RecordKey, WorkerRecord, WriteId};
use regent_core::{Epoch, Incarnation, WorkerId};
use regent_smol::zk::{spawn_elector, Outcome, ZkConfig, ZkStore, ZkStoreError};
use regent_std::store::{Op, Outcome as StoreOutcome};
use std::time::Duration;
use support::zk_server::ZkServer;
use support::{elector_config, unique_root, wait_outcome, BOUND};

fn worker(id: &str, inc: u64) -> Record {
    Record::Worker(WorkerRecord {
        id: WorkerId::new(id),
        incarnation: Incarnation(inc),
        cores: 4,
        memory_mb: 8192,
    })
}

#[test]
fn fenced_store_round_trips_and_rejects_a_deposed_writer() {
    let server = ZkServer::start();
    smol::block_on(async {
        let root = unique_root("store");
        let zk = ZkConfig::new(server.addr());
        let (h, out, _t) = spawn_elector(elector_config(&root, "m1", 0x5701, 3000), zk.clone());
        let (won, _) = wait_outcome(&out, BOUND, |o| matches!(o, Outcome::Elected { .. }))
            .await
            .expect("elected");
        let Outcome::Elected { fence, .. } = won else { unreachable!() };
        let MultiOp::Check { path: node, .. } = fence.clone() else { panic!("fence is a check") };

        let store = ZkStore::open(&zk, &root, Duration::from_secs(3)).await.expect("store opens");
        assert_eq!(store.load().await.expect("empty load"), vec![]);
        let batch = vec![
            (WriteId(1), Op::Put(Record::Epoch(Epoch(7)))),
            (WriteId(2), Op::Put(worker("w 1/x", 1))),
            (WriteId(3), Op::Put(worker("w 1/x", 2))),
            (WriteId(4), Op::Put(worker("w2", 9))),
            (
                WriteId(5),
                Op::Delete {
                    key: RecordKey::Worker(WorkerId::new("w 1/x")),
                    incarnation: Some(Incarnation(1)),
                },
            ),
            (
                WriteId(6),
                Op::Delete { key: RecordKey::Worker(WorkerId::new("gone")), incarnation: None },
            ),
        ];
        let done = store.commit(&fence, batch).await.expect("fenced commit");
        let outcomes: Vec<_> = done.iter().map(|c| c.outcome.clone()).collect();
        assert_eq!(
            outcomes,
            vec![
                StoreOutcome::Stored,
                StoreOutcome::Stored,
                StoreOutcome::Stored,
                StoreOutcome::Stored,
                StoreOutcome::IncarnationMismatch { stored: Some(Incarnation(2)) },
                StoreOutcome::AlreadyAbsent,
            ]
        );
        let loaded = store.load().await.expect("load");
        assert_eq!(loaded.len(), 3);
        assert!(loaded.contains(&worker("w 1/x", 2)));
        assert!(loaded.contains(&Record::Epoch(Epoch(7))));

        // Oversized: refused before anything is sent.
        let big = worker(&"x".repeat(1_045_000), 1);
        let err = store.put(&fence, &big).await.unwrap_err();
        assert!(matches!(err, ZkStoreError::TooLarge { .. }), "{err}");

        // Damage is named, never dropped.
        let raw = zookeeper_client::Client::connector()
            .with_session_timeout(Duration::from_secs(3))
            .connect(&server.addr())
            .await
            .unwrap();
        let bad = format!("{}/w-bad", store.state_path());
        let mut img = format::encode(&worker("bad", 1));
        let last = img.len() - 1;
        img[last] ^= 1;
        let opts = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        raw.create(&bad, &img, &opts).await.unwrap();
        let err = store.load().await.unwrap_err();
        match &err {
            ZkStoreError::Damaged { errors } => {
                assert_eq!(errors.len(), 1);
                assert_eq!(errors[0].record, bad);
            }
            other => panic!("expected damage, got {other}"),
        }
        raw.delete(&bad, None).await.unwrap();

        // The writer loses its election node: its writes are rejected.
        raw.delete(&node, None).await.expect("delete the leader's node");
        let err = store.put(&fence, &Record::Epoch(Epoch(8))).await.unwrap_err();
        assert!(matches!(err, ZkStoreError::Fenced { .. }), "{err}");
        assert!(err.is_fatal());
        let err = store.delete(&fence, &RecordKey::Epoch, None).await.unwrap_err();
        assert!(matches!(err, ZkStoreError::Fenced { .. }), "{err}");
        // Nothing changed.
        assert!(store.load().await.unwrap().contains(&Record::Epoch(Epoch(7))));
        // The elector notices (its watch or keep-alive) and is revoked.
        wait_outcome(&out, BOUND, |o| matches!(o, Outcome::Revoked))
            .await
            .expect("the elector sees its node gone");
        h.shutdown().await;
    });
}

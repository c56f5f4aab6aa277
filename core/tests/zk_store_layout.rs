//! The ZooKeeper store's layout through the master node (docs/design.md#issue-13 item 4):
//! records sharded by a hash prefix, a load that lists every shard and
//! reads every record with a bounded number of requests in flight, and a
//! store of the flat layout of earlier versions moved into its shards by
//! the first leader that loads it, under its fence, surviving a lost reply.
#![cfg(feature = "testkit")]

mod node_harness;

use node_harness::*;
use regent_core::master::{Status, WorkerState};
use regent_core::node::master::{Input, Output};
use regent_core::store::names::key_stem;
use regent_core::store::{format, Record, WorkerRecord};
use regent_core::zk::layout;
use regent_core::zk::{MultiOp, ZkCommand, ZkEvent, ZkOp};
use regent_core::zk::{MAX_LOAD_IN_FLIGHT, MULTI_READ_BATCH};
use regent_core::{Epoch, Incarnation, Millis, WorkerId};
use std::collections::{BTreeMap, BTreeSet};

fn worker(id: &str) -> Record {
    Record::Worker(WorkerRecord {
        dead: false,
        id: WorkerId::new(id),
        incarnation: Incarnation(1),
        cores: 4,
        memory_mb: 4096,
        callback: None,
        maintenance: None,
    })
}

fn images(records: &[Record]) -> Vec<(String, Vec<u8>)> {
    records.iter().map(|r| (key_stem(&r.key()), format::encode(r).unwrap())).collect()
}

fn flat_nodes(c: &Cluster) -> Vec<String> {
    c.record_nodes().into_iter().filter(|n| n.is_flat()).map(|n| n.path).collect()
}

/// Whether `op` moves a flat record (a multi deleting a node directly
/// under the store's path).
fn moves_flat(op: &ZkOp) -> bool {
    matches!(op, ZkOp::Multi(ops) if ops.iter().any(|o| matches!(o,
        MultiOp::Delete { path, .. } if layout::is_record_path(STATE, path)
            && path.matches('/').count() == STATE.matches('/').count() + 1)))
}

#[test]
fn a_flat_store_of_an_earlier_version_is_loaded_and_moved_into_its_shards() {
    let mut c = Cluster::zookeeper(2);
    let workers: Vec<Record> = (1..=5).map(|i| worker(&format!("w{i}"))).collect();
    let mut records = vec![Record::Epoch(Epoch(7))];
    records.extend(workers.iter().cloned());
    c.seed_flat_images(&images(&records));
    assert_eq!(flat_nodes(&c).len(), 5);
    let _ = c.feed(0, Input::Start);
    let _ = c.feed(1, Input::Start);
    c.advance(Millis(100));
    assert_eq!(c.leaders(), vec![0]);
    assert_eq!(c.nodes[0].status(), Status::Recovering);
    for i in 1..=5 {
        assert_eq!(c.nodes[0].worker_state(&format!("w{i}")), Some(WorkerState::Unknown), "w{i}");
    }
    assert!(c.nodes[0].node.master().epoch() > Epoch(7));
    assert!(flat_nodes(&c).is_empty(), "every record moved: {:?}", c.record_nodes());
    for r in &workers {
        let path = layout::record_path(STATE, &r.key());
        assert_eq!(c.zk.node(&path).map(|n| n.data.clone()), Some(format::encode(r).unwrap()));
    }
    // Every move was fenced by the leader's election node.
    let fence = c.nodes[0].node.elector().unwrap().node_path().unwrap();
    let moves: Vec<ZkOp> = c.nodes[0]
        .zk_commands()
        .into_iter()
        .filter_map(|(_, z)| match z {
            ZkCommand::Request { op, .. } if moves_flat(&op) => Some(op),
            _ => None,
        })
        .collect();
    let mut moved = 0;
    for op in &moves {
        let ZkOp::Multi(ops) = op else { unreachable!() };
        assert!(matches!(&ops[0], MultiOp::Check { path, .. } if *path == fence), "{ops:?}");
        moved += ops.iter().filter(|o| matches!(o, MultiOp::Delete { .. })).count();
    }
    assert_eq!(moved, 5, "each flat record moved once: {moves:?}");
    assert_eq!(c.nodes[0].node.metrics().store_records_moved, 5);
    // The next leader reads the sharded store and moves nothing.
    let from = c.nodes[1].calls.len();
    let _ = c.feed(0, Input::StepDown);
    c.advance(Millis(100));
    assert_eq!(c.leaders(), vec![1]);
    let recovered = c.nodes[1].node.master().workers();
    assert_eq!(recovered.len(), 5);
    assert!(!c.nodes[1]
        .outputs_since(from)
        .iter()
        .any(|o| matches!(o, Output::Zk(ZkCommand::Request { op, .. }) if moves_flat(op))));
}

#[test]
fn a_move_whose_reply_is_lost_is_seen_by_the_load_that_runs_again() {
    for applied in [false, true] {
        let mut c = Cluster::zookeeper(1);
        let records: Vec<Record> = (1..=3).map(|i| worker(&format!("w{i}"))).collect();
        c.seed_flat_images(&images(&records));
        c.lose_next_reply(0, applied, Box::new(moves_flat));
        let _ = c.feed(0, Input::Start);
        c.advance(Millis(2_000));
        assert_eq!(c.leaders(), vec![0], "applied: {applied}");
        assert_eq!(c.nodes[0].node.master().workers().len(), 3, "applied: {applied}");
        assert!(flat_nodes(&c).is_empty(), "applied: {applied}: {:?}", c.record_nodes());
        let stems: BTreeSet<String> = c.records().into_keys().collect();
        assert_eq!(stems, ["epoch", "w-w1", "w-w2", "w-w3"].map(String::from).into());
        assert!(c.nodes[0].node.metrics().store_resends >= 1, "the load ran again");
    }
}

#[test]
fn a_load_lists_each_shard_and_reads_each_record_once_by_batches_within_the_bound_in_flight() {
    let n = MAX_LOAD_IN_FLIGHT + 500;
    let mut c = Cluster::zookeeper(1);
    let mut records = vec![Record::Epoch(Epoch(3))];
    records.extend((0..n).map(|i| worker(&format!("worker-{i:05}"))));
    c.seed_images(&images(&records));
    let _ = c.feed(0, Input::Start);
    c.advance(Millis(100));
    assert_eq!(c.nodes[0].status(), Status::Recovering);
    assert_eq!(c.nodes[0].node.master().workers().len(), n);

    // Store requests (under STATE) out, their replies in: never more than
    // the bound outstanding, counted in records (and listings).
    let weight = |op: &ZkOp| match op {
        ZkOp::MultiRead(paths) => paths.len(),
        _ => 1,
    };
    let mut pending = BTreeMap::new();
    let (mut most, mut lists, mut read) = (0, BTreeSet::new(), BTreeSet::new());
    for call in &c.nodes[0].calls {
        if let Input::Zk(ZkEvent::Reply { req, .. }) = &call.input {
            pending.remove(req);
        }
        for o in &call.outputs {
            if let Output::Zk(ZkCommand::Request { req, op, .. }) = o {
                if op_path(op).starts_with(STATE) {
                    pending.insert(*req, weight(op));
                    match op {
                        ZkOp::GetChildren { path, .. } => assert!(lists.insert(path.clone())),
                        ZkOp::GetData { path, .. } => assert!(read.insert(path.clone())),
                        ZkOp::MultiRead(paths) => {
                            assert!(paths.len() <= MULTI_READ_BATCH);
                            for p in paths {
                                assert!(read.insert(p.clone()), "{p} read twice");
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        most = most.max(pending.values().sum::<usize>());
    }
    assert!(most <= MAX_LOAD_IN_FLIGHT, "{most}");
    assert!(most > MAX_LOAD_IN_FLIGHT - MULTI_READ_BATCH, "{most}: the pipeline fills");
    assert_eq!(lists.len(), 1 + layout::SHARDS, "the store and each of its shards, once");
    assert_eq!(read.len(), n + 1, "each record once");
}

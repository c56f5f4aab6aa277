//! The ZooKeeper store of the master node with a cluster secret: records are
//! sealed under the current key and read by the next leader, and a rotation
//! re-seals records found under a previous key right after the load. (The
//! refusals of planted, altered and unverifiable records are unit tests of
//! the store machine, `regent_core::zk::store`: a single node that keeps
//! refusing its store re-enters the election at once, which this harness
//! runs without end at one instant.)
#![cfg(feature = "testkit")]

mod node_harness;

use node_harness::*;
use regent_core::master::Status;
use regent_core::node::master::Input;
use regent_core::secret::Secret;
use regent_core::store::format::{self, SEALED_VERSION, UNSEALED_VERSION};
use regent_core::store::names::key_stem;
use regent_core::store::seal::{SealKey, Sealing};
use regent_core::store::{Record, WorkerRecord};
use regent_core::{Epoch, Incarnation, Millis, WorkerId};

fn secret(s: &str) -> Secret {
    Secret::new(s.as_bytes().to_vec()).unwrap()
}

fn current() -> Secret {
    secret("the current cluster secret")
}

fn previous() -> Secret {
    secret("the previous cluster secret")
}

fn worker(id: &str, inc: u64) -> Record {
    Record::Worker(WorkerRecord {
        dead: false,
        id: WorkerId::new(id),
        incarnation: Incarnation(inc),
        cores: 4,
        memory_mb: 4096,
        callback: None,
        maintenance: None,
    })
}

fn image(r: &Record, sealing: &Sealing) -> (String, Vec<u8>) {
    (key_stem(&r.key()), format::encode_with(r, sealing).unwrap())
}

/// The key id a sealed image names (`None`: unsealed).
fn key_id_of(img: &[u8]) -> Option<[u8; 8]> {
    match u16::from_be_bytes([img[4], img[5]]) {
        SEALED_VERSION => Some(img[6..14].try_into().unwrap()),
        v => {
            assert_eq!(v, UNSEALED_VERSION);
            None
        }
    }
}

#[test]
fn a_leader_with_a_secret_writes_sealed_records_its_successor_reads() {
    let sealing = Sealing::with_secret(&current());
    let mut c = Cluster::zookeeper_sealed(2, sealing);
    let _ = c.feed(0, Input::Start);
    let _ = c.feed(1, Input::Start);
    c.advance(Millis(100));
    assert_eq!(c.leaders(), vec![0]);
    let _ = c.register(0, 1, "w1", 7);
    let want = SealKey::derive(&current()).id().0;
    let images = c.images();
    assert!(images.contains_key("epoch") && images.contains_key("w-w1"), "{images:?}");
    for (name, img) in &images {
        assert_eq!(key_id_of(img), Some(want), "{name} is sealed under the current key");
    }
    let _ = c.feed(0, Input::StepDown);
    c.advance(Millis(100));
    assert_eq!(c.leaders(), vec![1]);
    assert_eq!(c.nodes[1].status(), Status::Recovering);
    assert_eq!(c.records().get("w-w1"), Some(&worker("w1", 7)));
}

#[test]
fn a_rotating_leader_reseals_what_it_loaded_under_the_previous_key() {
    let old = Sealing::with_secret(&previous());
    let rotating = Sealing::with_secret(&current()).and_previous(&previous());
    let mut c = Cluster::zookeeper_sealed(2, rotating);
    c.seed_images(&[
        image(&Record::Epoch(Epoch(5)), &old),
        image(&worker("w1", 1), &old),
        image(&worker("w2", 2), &Sealing::with_secret(&current())),
    ]);
    let _ = c.feed(0, Input::Start);
    let _ = c.feed(1, Input::Start);
    c.advance(Millis(100));
    assert_eq!(c.leaders(), vec![0]);
    let cur = SealKey::derive(&current()).id().0;
    for (name, img) in c.images() {
        assert_eq!(key_id_of(&img), Some(cur), "{name} re-sealed under the current key");
    }
    // epoch and w1 were under the previous key (the epoch was also written
    // anew by the election); w2 was current already.
    assert_eq!(c.nodes[0].node.metrics().store_reseals, 2);
    assert_eq!(c.records().get("w-w1"), Some(&worker("w1", 1)));
    // A master that only has the new secret now reads the whole store.
    let only_new = Sealing::with_secret(&current());
    for (name, img) in c.images() {
        assert!(format::decode_with(&img, &only_new).is_ok(), "{name}");
    }
}

//! Writes: durability across reopen, per-key order, conditional deletes,
//! fatal fsync failures, group commit on the writer thread, and a model
//! check over generated histories.

mod common;

use common::{file_names, framework, put_image, worker};
use quickcheck::{Arbitrary, Gen, QuickCheck};
use regent_core::store::format::Damage;
use regent_core::store::{Record, RecordKey, WriteId};
use regent_core::{Epoch, FrameworkId, Incarnation, WorkerId};
use regent_std::store::{
    spawn_writer, Completion, FsStore, Op, Outcome, StoreError, Warning, WriterEvent,
};
use std::collections::BTreeMap;
use std::fs;
use std::sync::mpsc;

fn wkey(id: &str) -> RecordKey {
    RecordKey::Worker(WorkerId::new(id))
}

fn reopen(dir: &std::path::Path) -> Vec<Record> {
    FsStore::open(dir, "reopen").unwrap().1.records
}

fn outcomes(done: &[Completion]) -> Vec<Outcome> {
    done.iter().map(|c| c.outcome.clone()).collect()
}

#[test]
fn committed_records_survive_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut store, loaded) = FsStore::open(tmp.path(), "m1").unwrap();
    assert!(loaded.records.is_empty() && loaded.warnings.is_empty());
    let recs = [Record::Epoch(Epoch(3)), worker("a", 1), worker("b/../c", 2), framework("fw", "x")];
    let batch =
        recs.iter().enumerate().map(|(i, r)| (WriteId(i as u64), Op::Put(r.clone()))).collect();
    let done = store.commit(batch).unwrap();
    assert_eq!(
        done.iter().map(|c| c.id).collect::<Vec<_>>(),
        (0..4).map(WriteId).collect::<Vec<_>>()
    );
    assert!(done.iter().all(|c| c.outcome == Outcome::Stored));
    assert_eq!(store.len(), 4);
    drop(store);
    let mut want = recs.to_vec();
    want.sort_by_key(Record::key);
    assert_eq!(reopen(tmp.path()), want);
}

#[test]
fn writes_to_one_key_keep_their_order_within_and_across_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut store, _) = FsStore::open(tmp.path(), "m1").unwrap();
    // Within a batch: the last put wins; a delete naming the superseded
    // incarnation sees the newer one and leaves it.
    let done = store
        .commit(vec![
            (WriteId(1), Op::Put(worker("w", 1))),
            (WriteId(2), Op::Put(worker("w", 2))),
            (WriteId(3), Op::Delete { key: wkey("w"), incarnation: Some(Incarnation(1)) }),
        ])
        .unwrap();
    assert_eq!(
        outcomes(&done),
        vec![
            Outcome::Stored,
            Outcome::Stored,
            Outcome::IncarnationMismatch { stored: Some(Incarnation(2)) }
        ]
    );
    // Put, delete, put again in one batch: the final put stands.
    store
        .commit(vec![
            (WriteId(4), Op::Put(worker("v", 1))),
            (WriteId(5), Op::Delete { key: wkey("v"), incarnation: Some(Incarnation(1)) }),
            (WriteId(6), Op::Put(worker("v", 3))),
        ])
        .unwrap();
    // Across batches.
    for inc in 3..20 {
        store.commit(vec![(WriteId(inc), Op::Put(worker("w", inc)))]).unwrap();
    }
    drop(store);
    assert_eq!(reopen(tmp.path()), vec![worker("v", 3), worker("w", 19)]);
}

#[test]
fn conditional_delete_ignores_a_mismatched_incarnation() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut store, _) = FsStore::open(tmp.path(), "m1").unwrap();
    store
        .commit(vec![
            (WriteId(1), Op::Put(worker("w", 5))),
            (WriteId(2), Op::Put(framework("fw", "x"))),
        ])
        .unwrap();
    let del =
        |key: RecordKey, inc: Option<u64>| Op::Delete { key, incarnation: inc.map(Incarnation) };
    let done = store
        .commit(vec![
            (WriteId(3), del(wkey("w"), Some(4))),
            (WriteId(4), del(RecordKey::Framework(FrameworkId::new("fw")), Some(5))),
        ])
        .unwrap();
    assert_eq!(
        outcomes(&done),
        vec![
            Outcome::IncarnationMismatch { stored: Some(Incarnation(5)) },
            Outcome::IncarnationMismatch { stored: None }
        ]
    );
    drop(store);
    assert_eq!(reopen(tmp.path()), vec![worker("w", 5), framework("fw", "x")]);

    let (mut store, _) = FsStore::open(tmp.path(), "m1").unwrap();
    let done = store
        .commit(vec![
            (WriteId(5), del(wkey("w"), Some(5))),
            (WriteId(6), del(wkey("w"), Some(5))),
            (WriteId(7), del(RecordKey::Framework(FrameworkId::new("fw")), None)),
            (WriteId(8), del(wkey("never"), None)),
        ])
        .unwrap();
    assert_eq!(
        outcomes(&done),
        vec![Outcome::Deleted, Outcome::AlreadyAbsent, Outcome::Deleted, Outcome::AlreadyAbsent]
    );
    drop(store);
    assert_eq!(reopen(tmp.path()), vec![]);
    assert_eq!(file_names(tmp.path()), vec!["LOCK"]);
}

#[test]
fn a_failed_fsync_is_fatal_and_never_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut store, _) = FsStore::open(tmp.path(), "m1").unwrap();
    store.commit(vec![(WriteId(1), Op::Put(worker("w", 1)))]).unwrap();
    store.inject_fsync_failure();
    let err = store.commit(vec![(WriteId(2), Op::Put(worker("w", 2)))]).unwrap_err();
    assert!(err.is_fatal());
    match &err {
        StoreError::Fatal { path, action, .. } => {
            assert_eq!(*action, "fsync");
            assert_eq!(path, &tmp.path().join("w-w.rec.tmp"));
        }
        other => panic!("expected Fatal, got {other:?}"),
    }
    assert!(store.is_failed());
    // Later batches are refused without touching the disk.
    let err = store.commit(vec![(WriteId(3), Op::Put(worker("x", 1)))]).unwrap_err();
    assert!(matches!(err, StoreError::Unusable { .. }), "{err:?}");
    assert!(err.to_string().contains("injected fsync failure"));
    assert!(!tmp.path().join("w-x.rec").exists());
    drop(store);
    // The committed version is intact; the unsynced temp file is not trusted.
    let (_, loaded) = FsStore::open(tmp.path(), "m2").unwrap();
    assert_eq!(loaded.records, vec![worker("w", 1)]);
    assert!(matches!(&loaded.warnings[..], [Warning::StrayTemp { path, .. }]
        if path.ends_with("w-w.rec.tmp")));
}

#[test]
fn a_failed_directory_fsync_is_fatal_too() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut store, _) = FsStore::open(tmp.path(), "m1").unwrap();
    // A delete fsyncs only the directory.
    store.commit(vec![(WriteId(1), Op::Put(worker("w", 1)))]).unwrap();
    store.inject_fsync_failure();
    let err = store
        .commit(vec![(WriteId(2), Op::Delete { key: wkey("w"), incarnation: None })])
        .unwrap_err();
    assert!(matches!(&err, StoreError::Fatal { path, action: "fsync", .. } if path == tmp.path()));
}

#[test]
fn stray_temp_files_are_never_trusted_and_committed_records_never_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut store, _) = FsStore::open(tmp.path(), "m1").unwrap();
    store
        .commit(vec![
            (WriteId(1), Op::Put(worker("w", 1))),
            (WriteId(2), Op::Put(framework("fw", "x"))),
        ])
        .unwrap();
    drop(store);
    // Crash debris: a torn newer version, a whole newer version never
    // renamed, and a temp for a key that was never committed.
    let newer = regent_core::store::format::encode(&worker("w", 2)).unwrap();
    fs::write(tmp.path().join("w-w.rec.tmp"), &newer[..7]).unwrap();
    fs::write(
        tmp.path().join("f-fw.rec.tmp"),
        regent_core::store::format::encode(&framework("fw", "y")).unwrap(),
    )
    .unwrap();
    fs::write(tmp.path().join("w-new.rec.tmp"), b"").unwrap();
    fs::write(tmp.path().join("notes.txt"), b"operator's notes").unwrap();
    let (_, loaded) = FsStore::open(tmp.path(), "m2").unwrap();
    assert_eq!(loaded.records, vec![worker("w", 1), framework("fw", "x")]);
    let strays = loaded.warnings.iter().filter(|w| matches!(w, Warning::StrayTemp { .. })).count();
    assert_eq!(strays, 3);
    assert!(loaded
        .warnings
        .iter()
        .any(|w| matches!(w, Warning::UnknownFile { path } if path.ends_with("notes.txt"))));
    assert_eq!(file_names(tmp.path()), vec!["LOCK", "f-fw.rec", "notes.txt", "w-w.rec"]);
}

#[test]
fn a_record_truncated_at_every_offset_fails_the_load_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    put_image(tmp.path(), &Record::Epoch(Epoch(9)));
    let rec = worker("worker-1", 77);
    let path = put_image(tmp.path(), &rec);
    let full = fs::read(&path).unwrap();
    for cut in 0..full.len() {
        fs::write(&path, &full[..cut]).unwrap();
        match FsStore::open(tmp.path(), "t") {
            Err(StoreError::Damaged { errors, .. }) => {
                assert_eq!(errors.len(), 1, "cut {cut}");
                assert_eq!(errors[0].record, path.display().to_string());
                assert!(
                    matches!(errors[0].damage, Damage::Truncated { len, .. } if len == cut),
                    "cut {cut}: {:?}",
                    errors[0].damage
                );
            }
            other => panic!("cut {cut}: expected Damaged, got {:?}", other.map(|r| r.1)),
        }
    }
    fs::write(&path, &full).unwrap();
    assert_eq!(reopen(tmp.path()), vec![Record::Epoch(Epoch(9)), rec.clone()]);
    // And every single flipped bit.
    for bit in 0..full.len() * 8 {
        let mut bad = full.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        fs::write(&path, &bad).unwrap();
        assert!(
            matches!(FsStore::open(tmp.path(), "t"), Err(StoreError::Damaged { .. })),
            "bit {bit}"
        );
    }
}

#[test]
fn writer_thread_group_commits_and_reports_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = FsStore::open(tmp.path(), "m1").unwrap();
    let (tx, rx) = mpsc::channel();
    let writer = spawn_writer(store, move |ev| tx.send(ev).unwrap()).unwrap();
    let n = 500u64;
    for i in 0..n {
        // Twenty keys, each written many times in order.
        writer.submit(WriteId(i), Op::Put(worker(&format!("w{}", i % 20), i))).unwrap();
    }
    let mut seen = Vec::new();
    let mut batches = 0;
    while seen.len() < n as usize {
        match rx.recv().unwrap() {
            WriterEvent::Durable(done) => {
                batches += 1;
                seen.extend(done.into_iter().map(|c| c.id));
            }
            WriterEvent::Failed { error, .. } => panic!("{error}"),
        }
    }
    assert_eq!(seen, (0..n).map(WriteId).collect::<Vec<_>>());
    assert!(batches < n, "no group commit: {batches} batches for {n} writes");
    let store = writer.close().unwrap();
    assert!(!store.is_failed());
    drop(store);
    let got = reopen(tmp.path());
    assert_eq!(got.len(), 20);
    for r in got {
        let Record::Worker(w) = r else { panic!() };
        let k: u64 = w.id.as_str()[1..].parse().unwrap();
        assert_eq!(w.incarnation.0, n - 20 + k, "last write of {}", w.id);
    }
}

#[test]
fn writer_thread_reports_failure_for_every_later_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut store, _) = FsStore::open(tmp.path(), "m1").unwrap();
    store.inject_fsync_failure();
    let (tx, rx) = mpsc::channel();
    let writer = spawn_writer(store, move |ev| tx.send(ev).unwrap()).unwrap();
    writer.submit(WriteId(1), Op::Put(worker("w", 1))).unwrap();
    match rx.recv().unwrap() {
        WriterEvent::Failed { writes, error } => {
            assert_eq!(writes, vec![WriteId(1)]);
            assert!(matches!(error, StoreError::Fatal { .. }));
        }
        other => panic!("{other:?}"),
    }
    writer.submit(WriteId(2), Op::Put(worker("w", 2))).unwrap();
    match rx.recv().unwrap() {
        WriterEvent::Failed { writes, error } => {
            assert_eq!(writes, vec![WriteId(2)]);
            assert!(matches!(error, StoreError::Unusable { .. }));
        }
        other => panic!("{other:?}"),
    }
    assert!(writer.close().unwrap().is_failed());
}

/// A generated history: batches of ops over a small key space.
#[derive(Clone, Debug)]
struct History(Vec<Vec<Op>>);

impl Arbitrary for History {
    fn arbitrary(g: &mut Gen) -> Self {
        let pick = |g: &mut Gen, n: u8| u8::arbitrary(g) % n;
        let batches = 1 + pick(g, 6) as usize;
        let mut h = Vec::new();
        for _ in 0..batches {
            let len = 1 + pick(g, 6) as usize;
            let mut b = Vec::new();
            for _ in 0..len {
                let w = format!("w{}", pick(g, 3));
                let inc = u64::from(pick(g, 3));
                let op = match pick(g, 6) {
                    0 | 1 => Op::Put(worker(&w, inc)),
                    2 => Op::Delete { key: wkey(&w), incarnation: Some(Incarnation(inc)) },
                    3 => Op::Delete { key: wkey(&w), incarnation: None },
                    4 => Op::Put(framework("f", &format!("n{inc}"))),
                    _ => Op::Put(Record::Epoch(Epoch(inc))),
                };
                b.push(op);
            }
            h.push(b);
        }
        History(h)
    }
}

#[test]
fn prop_store_matches_a_model_and_survives_reopen() {
    fn prop(h: History) -> bool {
        let tmp = tempfile::tempdir().unwrap();
        let (mut store, _) = FsStore::open(tmp.path(), "prop").unwrap();
        let mut model: BTreeMap<RecordKey, Record> = BTreeMap::new();
        let mut id = 0;
        for batch in h.0 {
            let mut want = Vec::new();
            let mut writes = Vec::new();
            for op in batch {
                id += 1;
                let outcome = match &op {
                    Op::Put(r) => {
                        model.insert(r.key(), r.clone());
                        Outcome::Stored
                    }
                    Op::Delete { key, incarnation } => {
                        let stored = model.get(key).map(|r| match r {
                            Record::Worker(w) => Some(w.incarnation),
                            _ => None,
                        });
                        match stored {
                            None => Outcome::AlreadyAbsent,
                            Some(s) if incarnation.is_some() && *incarnation != s => {
                                Outcome::IncarnationMismatch { stored: s }
                            }
                            Some(_) => {
                                model.remove(key);
                                Outcome::Deleted
                            }
                        }
                    }
                };
                want.push(outcome);
                writes.push((WriteId(id), op));
            }
            let done = store.commit(writes).unwrap();
            if outcomes(&done) != want {
                return false;
            }
        }
        drop(store);
        reopen(tmp.path()) == model.into_values().collect::<Vec<_>>()
    }
    QuickCheck::new().tests(40).quickcheck(prop as fn(History) -> bool);
}

#[test]
fn a_large_store_loads_every_record_and_names_damage_with_parallel_readers() {
    let tmp = tempfile::tempdir().unwrap();
    let mut want: Vec<Record> = (0..3000).map(|i| worker(&format!("w{i:05}"), i)).collect();
    for r in &want {
        put_image(tmp.path(), r);
    }
    want.sort_by_key(Record::key);
    assert_eq!(reopen(tmp.path()), want);
    let damaged = [tmp.path().join("w-w00017.rec"), tmp.path().join("w-w02999.rec")];
    for path in &damaged {
        fs::write(path, b"RGNT").unwrap();
    }
    match FsStore::open(tmp.path(), "t") {
        Err(StoreError::Damaged { errors, .. }) => {
            let named: Vec<_> = errors.iter().map(|e| e.record.clone()).collect();
            let want: Vec<_> = damaged.iter().map(|p| p.display().to_string()).collect();
            assert_eq!(named, want);
        }
        other => panic!("expected Damaged, got {:?}", other.map(|r| r.1)),
    }
}

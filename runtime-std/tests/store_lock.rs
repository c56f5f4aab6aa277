//! The directory lock keeps a second master out, names the holder, and dies
//! with a killed holder. Also: a writer killed mid-stream loses no write it
//! reported durable.

mod common;

use common::{spawn_child, worker};
use regent_core::store::{Record, WriteId};
use regent_std::store::{FsStore, Op, StoreError, LOCK_FILE};
use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

const CHILD_DIR: &str = "REGENT_STORE_TEST_DIR";

#[test]
fn a_second_opener_is_refused_naming_the_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = FsStore::open(tmp.path(), "master-a").unwrap();
    let err = FsStore::open(tmp.path(), "master-b").unwrap_err();
    match &err {
        StoreError::Locked { dir, holder } => {
            assert_eq!(dir, tmp.path());
            assert_eq!(holder, &format!("pid {} owner master-a", std::process::id()));
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(err.to_string().contains("locked by another master: pid "));
    assert!(err.to_string().contains("owner master-a"));
    drop(store);
    let (_store, _) = FsStore::open(tmp.path(), "master-b").unwrap();
    let text = std::fs::read_to_string(tmp.path().join(LOCK_FILE)).unwrap();
    assert_eq!(text, format!("pid {} owner master-b\n", std::process::id()));
}

/// Child side: hold the store open and report, until killed.
#[test]
#[ignore]
fn child_holds_the_lock() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let (_store, _) = FsStore::open(&dir, "child-master").unwrap();
    println!("LOCKED");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(120));
}

#[test]
fn a_killed_holders_lock_goes_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let mut child = spawn_child("child_holds_the_lock", &[(CHILD_DIR, dir)]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // libtest prints "test <name> ... " before the child's own output.
    assert!(lines.any(|l| l.unwrap().ends_with("LOCKED")), "child never locked");
    match FsStore::open(tmp.path(), "parent") {
        Err(StoreError::Locked { holder, .. }) => {
            assert_eq!(holder, format!("pid {} owner child-master", child.id()));
        }
        other => panic!("expected Locked, got {:?}", other.map(|r| r.1)),
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (_store, loaded) = FsStore::open(tmp.path(), "parent").unwrap();
    assert!(loaded.records.is_empty());
}

/// Child side: commit small batches forever, printing each durable write.
#[test]
#[ignore]
fn child_writes_until_killed() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let (mut store, _) = FsStore::open(&dir, "child-writer").unwrap();
    let mut out = std::io::stdout().lock();
    for i in 1u64.. {
        let batch: Vec<_> = (0..1 + i % 4)
            .map(|j| {
                let n = i * 4 + j;
                (WriteId(n), Op::Put(worker(&format!("w{}", n % 7), n)))
            })
            .collect();
        let ids: Vec<u64> = batch.iter().map(|(id, _)| id.0).collect();
        store.commit(batch).unwrap();
        for id in ids {
            writeln!(out, "DURABLE {id}").unwrap();
        }
        out.flush().unwrap();
    }
}

#[test]
fn a_writer_killed_mid_stream_loses_no_durable_write() {
    for round in 0..3 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_str().unwrap();
        let mut child = spawn_child("child_writes_until_killed", &[(CHILD_DIR, dir)]);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // The latest durable incarnation of each key, as the child reported.
        let mut last = [0u64; 7];
        let mut seen = 0;
        let stop_after = 150 + round * 97;
        for line in lines.by_ref() {
            let line = line.unwrap();
            let Some((_, n)) = line.split_once("DURABLE ") else {
                continue;
            };
            let n: u64 = n.parse().unwrap();
            last[(n % 7) as usize] = n;
            seen += 1;
            if seen == stop_after {
                break;
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let (_, loaded) = FsStore::open(tmp.path(), "parent").unwrap();
        for (k, &n) in last.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let found = loaded.records.iter().find_map(|r| match r {
                Record::Worker(w) if w.id.as_str() == format!("w{k}") => Some(w.incarnation.0),
                _ => None,
            });
            let found = found.unwrap_or_else(|| panic!("durable write {n} of w{k} lost"));
            // A later write may have landed before the kill; an earlier one
            // never wins over a durable one.
            assert!(found >= n, "w{k}: durable {n}, found {found}");
        }
    }
}

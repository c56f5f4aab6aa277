//! The committed store images in `fixtures/store/` pin the record format and
//! the store's reaction to each kind of damage.

mod common;

use common::{cases, copy_case, file_names, fixtures_root, write_fixtures};
use common::{fixture_sealing, fixture_secret, other_secret, valid_records, worker};
use regent_core::store::format::Damage;
use regent_core::store::seal::{Seal, SealKey};
use regent_core::store::WriteId;
use regent_std::store::{FsStore, Op, StoreError, Warning};
use std::fs;

/// Rewrites `fixtures/store/` from the format as it is. Run it only for a
/// deliberate format change (with a FORMAT_VERSION bump):
/// `cargo test -p regent-std --test store_fixtures -- --ignored regenerate`.
#[test]
#[ignore]
fn regenerate_store_fixtures() {
    write_fixtures(&fixtures_root());
}

#[test]
fn committed_fixtures_equal_the_current_format_byte_for_byte() {
    for case in cases() {
        let dir = fixtures_root().join(case.name);
        let mut want: Vec<&str> = case.files.iter().map(|(n, _)| n.as_str()).collect();
        want.sort();
        assert_eq!(file_names(&dir), want, "files of fixture {}", case.name);
        for (name, bytes) in &case.files {
            let committed = fs::read(dir.join(name)).unwrap();
            assert_eq!(
                &committed, bytes,
                "fixtures/store/{}/{name} differs from what this build writes: the format changed",
                case.name
            );
        }
    }
}

#[test]
fn committed_fixtures_load_as_expected() {
    for case in cases() {
        let tmp = copy_case(case.name);
        let result = FsStore::open_with(tmp.path(), "fixture-test", case.sealing.clone());
        match (&case.expect, result) {
            (Ok((records, strays)), Ok((_store, loaded))) => {
                assert_eq!(&loaded.records, records, "records of {}", case.name);
                let mut got: Vec<String> = loaded
                    .warnings
                    .iter()
                    .map(|w| match w {
                        Warning::StrayTemp { path, .. } => {
                            path.file_name().unwrap().to_str().unwrap().to_owned()
                        }
                        other => panic!("unexpected warning {other} in {}", case.name),
                    })
                    .collect();
                got.sort();
                let mut want = strays.clone();
                want.sort();
                assert_eq!(got, want, "stray temp files of {}", case.name);
                // The strays are gone; only records and the lock remain.
                assert!(file_names(tmp.path()).iter().all(|n| n == "LOCK" || n.ends_with(".rec")));
            }
            (Err(damaged), Err(StoreError::Damaged { dir, errors })) => {
                assert_eq!(dir, tmp.path());
                let got: Vec<(String, _)> = errors
                    .iter()
                    .map(|e| {
                        let name = e.record.rsplit('/').next().unwrap().to_owned();
                        assert_eq!(e.record, tmp.path().join(&name).display().to_string());
                        (name, e.damage.clone())
                    })
                    .collect();
                assert_eq!(&got, damaged, "damage in fixture {}", case.name);
            }
            (want, got) => panic!(
                "fixture {}: expected {:?}, got {:?}",
                case.name,
                want.as_ref().map(|_| "a load").map_err(|_| "damage"),
                got.map(|(_, l)| l)
            ),
        }
    }
}

#[test]
fn damage_messages_name_the_file_and_the_fault() {
    let tmp = copy_case("truncated");
    let err = FsStore::open(tmp.path(), "t").unwrap_err();
    let msg = err.to_string();
    let file = tmp.path().join("w-worker-1.rec");
    assert!(msg.contains(&format!("record {}: truncated at byte 20 of ", file.display())), "{msg}");
    let tmp = copy_case("flipped-bit");
    let msg = FsStore::open(tmp.path(), "t").unwrap_err().to_string();
    assert!(msg.contains("w-worker-1.rec: CRC mismatch"), "{msg}");
    let tmp = copy_case("unknown-version");
    let msg = FsStore::open(tmp.path(), "t").unwrap_err().to_string();
    assert!(msg.contains("unknown format version 3"), "{msg}");
}

/// Every file of `dir` that is a record, by name, with the key id of its
/// seal (`None`: unsealed).
fn seals(dir: &std::path::Path) -> Vec<(String, Option<[u8; 8]>)> {
    file_names(dir)
        .into_iter()
        .filter(|n| n.ends_with(".rec"))
        .map(|n| {
            let img = fs::read(dir.join(&n)).unwrap();
            let id = (img[4..6] == [0, 2]).then(|| img[6..14].try_into().unwrap());
            (n, id)
        })
        .collect()
}

#[test]
fn a_planted_record_is_refused_by_name_telling_the_operator_what_to_do() {
    let tmp = copy_case("unsealed-under-secret");
    let err = FsStore::open_with(tmp.path(), "t", fixture_sealing()).unwrap_err();
    let msg = err.to_string();
    let file = tmp.path().join("w-worker-1.rec");
    assert!(msg.contains(&format!("record {}: not sealed", file.display())), "{msg}");
    assert!(msg.contains("regent store seal --accept-unsealed"), "{msg}");
    // Nothing was rewritten or removed.
    assert_eq!(
        fs::read(&file).unwrap(),
        fs::read(fixtures_root().join("unsealed-under-secret/w-worker-1.rec")).unwrap()
    );
    let tmp = copy_case("sealed-altered");
    let msg = FsStore::open_with(tmp.path(), "t", fixture_sealing()).unwrap_err().to_string();
    assert!(msg.contains("w-worker-1.rec: MAC does not verify under record key"), "{msg}");
    let tmp = copy_case("sealed-unknown-key");
    let msg = FsStore::open_with(tmp.path(), "t", fixture_sealing()).unwrap_err().to_string();
    let b = SealKey::derive(&other_secret()).id();
    assert!(msg.contains(&format!("w-worker-1.rec: sealed under record key {b}")), "{msg}");
}

#[test]
fn a_sealed_store_cannot_be_verified_without_the_secret() {
    let tmp = copy_case("sealed-valid");
    match FsStore::open(tmp.path(), "t") {
        Err(StoreError::Damaged { errors, .. }) => {
            assert_eq!(errors.len(), 4, "{errors:?}");
            let a = SealKey::derive(&fixture_secret()).id();
            assert!(errors.iter().all(|e| e.damage == Damage::CannotVerify { key_id: a }));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_rotating_master_reads_the_previous_key_and_reseals_at_open() {
    let tmp = copy_case("sealed-unknown-key");
    let rotating = fixture_sealing().and_previous(&other_secret());
    let (_store, loaded) = FsStore::open_with(tmp.path(), "t", rotating).unwrap();
    let b = SealKey::derive(&other_secret()).id();
    assert_eq!(loaded.resealed, vec![(common::key(&worker("worker-1", 0x1111)), Seal::Sealed(b))]);
    drop(_store);
    let a = SealKey::derive(&fixture_secret()).id().0;
    assert!(seals(tmp.path()).iter().all(|(_, id)| *id == Some(a)), "{:?}", seals(tmp.path()));
    // The previous secret is no longer needed.
    let (_store, loaded) = FsStore::open_with(tmp.path(), "t", fixture_sealing()).unwrap();
    assert!(loaded.resealed.is_empty());
    assert_eq!(loaded.records.len(), 2);
}

#[test]
fn sealing_an_unsealed_store_takes_the_operators_word_and_then_needs_only_the_secret() {
    let tmp = copy_case("valid");
    let (store, loaded) =
        FsStore::open_with(tmp.path(), "seal", fixture_sealing().accepting_unsealed()).unwrap();
    assert_eq!(loaded.records, valid_records());
    assert_eq!(loaded.resealed.len(), 4);
    assert!(loaded.resealed.iter().all(|(_, s)| *s == Seal::Unsealed));
    drop(store);
    let (_store, loaded) = FsStore::open_with(tmp.path(), "m", fixture_sealing()).unwrap();
    assert_eq!(loaded.records, valid_records());
    assert!(loaded.resealed.is_empty());
    // Byte for byte the sealed fixture: sealing is deterministic.
    for name in file_names(tmp.path()).iter().filter(|n| n.ends_with(".rec")) {
        assert_eq!(
            fs::read(tmp.path().join(name)).unwrap(),
            fs::read(fixtures_root().join("sealed-valid").join(name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn a_store_with_a_secret_writes_sealed_records() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut store, _) = FsStore::open_with(tmp.path(), "m", fixture_sealing()).unwrap();
    let batch = valid_records()
        .into_iter()
        .enumerate()
        .map(|(i, r)| (WriteId(i as u64), Op::Put(r)))
        .collect();
    store.commit(batch).unwrap();
    drop(store);
    let a = SealKey::derive(&fixture_secret()).id().0;
    assert!(seals(tmp.path()).iter().all(|(_, id)| *id == Some(a)));
    assert!(FsStore::open(tmp.path(), "no secret").is_err());
    let (_, loaded) = FsStore::open_with(tmp.path(), "m", fixture_sealing()).unwrap();
    assert_eq!(loaded.records, valid_records());
}

#[test]
fn a_history_record_loads_and_a_damaged_one_is_named() {
    // Whole: every field as written (the round trip through the file).
    let tmp = copy_case("history");
    let (_store, loaded) = FsStore::open(tmp.path(), "t").unwrap();
    assert!(loaded.records.contains(&common::history(7)));
    assert!(tmp.path().join("h-00000000000000000007.rec").exists());
    // Torn.
    let tmp = copy_case("history-truncated");
    let msg = FsStore::open(tmp.path(), "t").unwrap_err().to_string();
    let file = tmp.path().join("h-00000000000000000007.rec");
    assert!(msg.contains(&format!("record {}: truncated at byte ", file.display())), "{msg}");
    // Altered under a seal.
    let tmp = copy_case("history-sealed-altered");
    let msg = FsStore::open_with(tmp.path(), "t", fixture_sealing()).unwrap_err().to_string();
    assert!(msg.contains("h-00000000000000000007.rec: MAC does not verify"), "{msg}");
}

#[test]
fn a_history_record_is_written_and_deleted_like_any_other() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut store, _) = FsStore::open(tmp.path(), "t").unwrap();
    let h = common::history(3);
    store.commit(vec![(WriteId(1), Op::Put(h.clone()))]).unwrap();
    drop(store);
    let (mut store, loaded) = FsStore::open(tmp.path(), "t").unwrap();
    assert_eq!(loaded.records, vec![h.clone()]);
    store.commit(vec![(WriteId(2), Op::Delete { key: h.key(), incarnation: None })]).unwrap();
    drop(store);
    let (_, loaded) = FsStore::open(tmp.path(), "t").unwrap();
    assert!(loaded.records.is_empty());
}

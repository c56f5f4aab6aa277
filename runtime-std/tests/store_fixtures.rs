//! The committed store images in `fixtures/store/` pin the record format and
//! the store's reaction to each kind of damage.

mod common;

use common::{cases, copy_case, file_names, fixtures_root, write_fixtures};
use regent_std::store::{FsStore, StoreError, Warning};
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
        let result = FsStore::open(tmp.path(), "fixture-test");
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
    assert!(msg.contains("unknown format version 2"), "{msg}");
}

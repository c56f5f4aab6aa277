//! Loading a filesystem store of 100,000 records: time and peak memory, with
//! a warm and a cold page cache.
//!
//! `cargo bench -p regent-std --bench load` (set `REGENT_BENCH_DIR` to put the
//! store somewhere other than the system temp dir, `REGENT_BENCH_RECORDS` to
//! change the count).
//!
//! Cold: the page cache of every record file and the directory is dropped
//! with `posix_fadvise(POSIX_FADV_DONTNEED)` after a `syncfs` (writing
//! `/proc/sys/vm/drop_caches` needs a writable /proc/sys, which a container
//! usually lacks). Dentries and inodes stay cached, so this is cold data, not
//! a cold machine.
//! Peak memory: VmHWM from /proc/self/status, reset before each load by
//! writing 5 to /proc/self/clear_refs.

use regent_core::store::format;
use regent_core::store::{FrameworkRecord, Record, WorkerRecord};
use regent_core::{Epoch, FrameworkId, Incarnation, WorkerId};
use regent_std::store::names::record_file_name;
use regent_std::store::FsStore;
use rustix::fs::{fadvise, Advice};
use std::fs::{self, File};
use std::path::Path;
use std::time::{Duration, Instant};

fn status_kb(field: &str) -> Option<u64> {
    let s = fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn reset_peak() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn build(dir: &Path, n: usize) {
    let mut buf = Vec::with_capacity(128);
    let mut write = |r: &Record| {
        buf.clear();
        format::encode_into(r, &mut buf).unwrap();
        fs::write(dir.join(record_file_name(&r.key())), &buf).unwrap();
    };
    write(&Record::Epoch(Epoch(7)));
    let frameworks = n / 100;
    for i in 0..frameworks {
        write(&Record::Framework(FrameworkRecord {
            id: FrameworkId::new(format!("framework-{i:06}")),
            name: format!("analytics job {i}"),
            failover_timeout_ms: 3_600_000,
            groups: Vec::new(),
            callback: None,
            registered_at_ms: None,
            job: None,
            tenant: None,
        }));
    }
    for i in 0..n - 1 - frameworks {
        write(&Record::Worker(WorkerRecord {
            dead: false,
            id: WorkerId::new(format!("rack-{:03}/host-{i:06}.example.net", i % 512)),
            incarnation: Incarnation(0x9e37_79b9_7f4a_7c15 ^ i as u64),
            cores: 64,
            memory_mb: 262_144,
            callback: None,
            maintenance: None,
        }));
    }
    rustix::fs::syncfs(File::open(dir).unwrap()).unwrap();
}

fn drop_cache(dir: &Path) -> usize {
    let mut n = 0;
    for e in fs::read_dir(dir).unwrap() {
        let f = File::open(e.unwrap().path()).unwrap();
        fadvise(&f, 0, None, Advice::DontNeed).unwrap();
        n += 1;
    }
    let d = File::open(dir).unwrap();
    let _ = fadvise(&d, 0, None, Advice::DontNeed);
    n
}

fn load(dir: &Path, expect: usize) -> (Duration, Option<u64>) {
    let reset = reset_peak();
    let t = Instant::now();
    let (store, loaded) = FsStore::open(dir, "bench").unwrap();
    let took = t.elapsed();
    assert_eq!(loaded.records.len(), expect);
    assert!(loaded.warnings.is_empty());
    let peak = if reset { status_kb("VmHWM:") } else { None };
    drop(loaded);
    drop(store);
    (took, peak)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it with no
    // `--bench`: keep that run small.
    let real = std::env::args().any(|a| a == "--bench");
    let n: usize = std::env::var("REGENT_BENCH_RECORDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if real { 100_000 } else { 1_000 });
    let base =
        std::env::var_os("REGENT_BENCH_DIR").map(Into::into).unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("regent-store-bench-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();

    let t = Instant::now();
    build(&dir, n);
    println!(
        "built {n} records in {} in {:.2?} (direct image writes + one syncfs)",
        dir.display(),
        t.elapsed()
    );
    let rss_before = status_kb("VmRSS:").unwrap_or(0);
    println!("RSS before loading: {rss_before} KiB");

    let mut warm = Vec::new();
    for _ in 0..5 {
        warm.push(load(&dir, n));
    }
    warm.sort();
    let (med, peak) = warm[warm.len() / 2];
    println!(
        "warm load: median {:.1} ms (min {:.1} ms, max {:.1} ms) over {} runs; peak RSS (VmHWM) {} KiB",
        med.as_secs_f64() * 1e3,
        warm[0].0.as_secs_f64() * 1e3,
        warm[warm.len() - 1].0.as_secs_f64() * 1e3,
        warm.len(),
        peak.map_or("unknown".into(), |p| p.to_string()),
    );

    let mut cold = Vec::new();
    for _ in 0..3 {
        drop_cache(&dir);
        cold.push(load(&dir, n));
    }
    cold.sort();
    let (med, peak) = cold[cold.len() / 2];
    println!(
        "cold load (posix_fadvise DONTNEED on every file and the directory): median {:.1} ms (min {:.1} ms, max {:.1} ms) over {} runs; peak RSS (VmHWM) {} KiB",
        med.as_secs_f64() * 1e3,
        cold[0].0.as_secs_f64() * 1e3,
        cold[cold.len() - 1].0.as_secs_f64() * 1e3,
        cold.len(),
        peak.map_or("unknown".into(), |p| p.to_string()),
    );
    fs::remove_dir_all(&dir).unwrap();
}

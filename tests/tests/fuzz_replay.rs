//! Replays the fuzz corpus in `cargo test` (docs/design.md#every-promise-is-tested-where-it-can-fail, issue 11 (docs/design.md#issue-11)
//! item 2): every file of `fixtures/fuzz/<target>/` through its target,
//! then up to 2,000 random inputs (fresh bytes, and mutations and splices
//! of the corpus files; at most 8 s of them) from a fixed seed, all under the counting
//! allocator, which aborts the test binary on any single allocation over
//! 1 MiB and names the input on stderr.
//!
//! A panic names the input too; a failing random input is written to
//! `target/fuzz-replay-failures/` so it can join the corpus.
//!
//! Coverage-guided runs (much longer, with libFuzzer) are `scripts/fuzz`;
//! see README "Fuzzing".

use regent_tests::fuzz::{self, alloc};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: alloc::LimitAlloc = alloc::LimitAlloc;

/// Random inputs per target, at most (each target is its own test, so two
/// cores run them in parallel).
const RANDOM_INPUTS: usize = 2_000;
/// And at most this long per target: a mutation of a corpus input that
/// builds a large cluster takes a while in a debug build. Input `i` of a
/// seed is the same input on every machine; a slower one runs fewer.
const RANDOM_BUDGET: Duration = Duration::from_secs(8);
/// The longest random input, in bytes.
const MAX_RANDOM_LEN: usize = 768;
/// The seed of the random inputs (`REGENT_FUZZ_SEED` overrides it, to
/// explore further by hand).
const SEED: u64 = 0x5eed_f022;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/fuzz")
}

fn corpus(name: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fixtures().join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, data)
        })
        .collect()
}

/// Runs one input, turning a panic into one that names the input.
fn run(name: &str, target: fuzz::Target, label: String, data: &[u8], on_failure: impl FnOnce()) {
    alloc::set_label(format!("{name}: {label}"));
    let result = panic::catch_unwind(AssertUnwindSafe(|| alloc::guarded(|| target(data))));
    if result.is_err() {
        on_failure();
        panic!("fuzz target {name} panicked on {label} (see the panic above)");
    }
}

/// A random input: fresh bytes, or a corpus file mutated or spliced.
fn random_input(rng: &mut fastrand::Rng, corpus: &[(PathBuf, Vec<u8>)]) -> Vec<u8> {
    if corpus.is_empty() || rng.u8(..4) == 0 {
        let len = rng.usize(..=MAX_RANDOM_LEN);
        return std::iter::repeat_with(|| rng.u8(..)).take(len).collect();
    }
    let mut data = corpus[rng.usize(..corpus.len())].1.clone();
    for _ in 0..=rng.usize(..4) {
        match rng.u8(..5) {
            0 if !data.is_empty() => {
                let at = rng.usize(..data.len());
                data[at] ^= 1 << rng.u8(..8);
            }
            1 if !data.is_empty() => {
                let at = rng.usize(..data.len());
                data[at] = rng.u8(..);
            }
            2 => {
                let at = rng.usize(..=data.len());
                data.insert(at, rng.u8(..));
            }
            3 if !data.is_empty() => {
                data.truncate(rng.usize(..data.len()));
            }
            _ => {
                let other = &corpus[rng.usize(..corpus.len())].1;
                let from = rng.usize(..=other.len());
                let at = rng.usize(..=data.len());
                data.truncate(at);
                data.extend_from_slice(&other[from..]);
            }
        }
    }
    data.truncate(MAX_RANDOM_LEN * 4);
    data
}

fn replay(name: &str) {
    let target = fuzz::target(name).expect("a target of that name");
    let corpus = corpus(name);
    assert!(!corpus.is_empty(), "fixtures/fuzz/{name}/ holds no input");
    for (path, data) in &corpus {
        let file = path.file_name().expect("a file name").to_string_lossy().into_owned();
        run(name, target, format!("fixtures/fuzz/{name}/{file}"), data, || {});
    }
    let seed = std::env::var("REGENT_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(SEED)
        ^ name.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    // Mutations start from the corpus, not from the regression inputs
    // (replayed as they are above; some build large clusters, slow to run
    // again and again in a debug build).
    let bases: Vec<_> = corpus
        .iter()
        .filter(|(p, _)| {
            !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("regression-"))
        })
        .cloned()
        .collect();
    let mut rng = fastrand::Rng::with_seed(seed);
    let start = Instant::now();
    for i in 0..RANDOM_INPUTS {
        if start.elapsed() > RANDOM_BUDGET {
            println!("{name}: {i} random inputs in {RANDOM_BUDGET:?}");
            break;
        }
        let data = random_input(&mut rng, &bases);
        run(name, target, format!("random input {i} of seed {seed:#x}"), &data, || {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-replay-failures");
            let _ = std::fs::create_dir_all(&dir);
            let file = dir.join(format!("{name}-{seed:x}-{i}"));
            if std::fs::write(&file, &data).is_ok() {
                eprintln!("the failing input is in {}", file.display());
            }
        });
    }
    assert!(
        alloc::stats().largest_guarded > 0,
        "the counting allocator saw nothing: is it the global allocator?"
    );
}

#[test]
fn frames() {
    replay("frames");
}

#[test]
fn codec() {
    replay("codec");
}

#[test]
fn master_node() {
    replay("master_node");
}

#[test]
fn worker_node() {
    replay("worker_node");
}

#[test]
fn submit_node() {
    replay("submit_node");
}

#[test]
fn store() {
    replay("store");
}

#[test]
fn every_target_has_a_corpus_and_every_corpus_a_target() {
    for (name, _) in fuzz::TARGETS {
        assert!(fixtures().join(name).is_dir(), "fixtures/fuzz/{name}/ is missing");
    }
    for entry in std::fs::read_dir(fixtures()).expect("fixtures/fuzz") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            let name = path.file_name().expect("a name").to_string_lossy().into_owned();
            assert!(fuzz::target(&name).is_some(), "fixtures/fuzz/{name}/ names no fuzz target");
        }
    }
}

#[test]
fn the_allocator_counts_what_runs_guarded() {
    let before = alloc::stats();
    alloc::guarded(|| std::hint::black_box(Vec::<u8>::with_capacity(100_000)));
    let after = alloc::stats();
    assert!(after.allocations > before.allocations);
    assert!(after.largest_guarded >= 100_000);
}

/// The environment variable that makes [`alloc_probe`] allocate.
const PROBE: &str = "REGENT_FUZZ_ALLOC_PROBE";

/// Proof that the harness can fail: a child process running
/// [`alloc_probe`] makes one 2 MiB allocation inside `guarded`, and must die
/// with the allocator's report.
#[test]
fn an_allocation_over_the_limit_fails_the_run() {
    let out = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "alloc_probe", "--include-ignored", "--nocapture", "--test-threads=1"])
        .env(PROBE, "1")
        .output()
        .expect("run the probe");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the probe survived a 2 MiB allocation: {stderr}");
    assert!(
        stderr.contains("a single allocation of 2097152 bytes, over the 1 MiB limit")
            && stderr.contains("while running the probe"),
        "the probe died without the allocator's report: {stderr}"
    );
    // Outside `guarded`, large allocations are the harness's own business.
    std::hint::black_box(Vec::<u8>::with_capacity(2 << 20));
}

#[test]
#[ignore = "run in a child process by an_allocation_over_the_limit_fails_the_run"]
fn alloc_probe() {
    if std::env::var_os(PROBE).is_none() {
        return;
    }
    alloc::set_label("the probe".into());
    alloc::guarded(|| std::hint::black_box(Vec::<u8>::with_capacity(2 << 20)));
    unreachable!("the allocator let a 2 MiB allocation through");
}

//! What the supervisor's real-process tests share: a supervisor that kills
//! its executors when a test ends (even when it fails), and, for the test
//! binaries that are their own executor shim (`harness = false`), acting
//! as the shim and running the tests one after the other.
#![allow(dead_code)]

use regent_std::exec::shim::{self, ShimArgs};
use regent_std::exec::Supervisor;
use std::path::PathBuf;

/// A supervisor whose executors are killed when the test ends, and then
/// the directories in `remove_dirs` removed (a test's cgroup parents).
pub struct Guarded {
    sup: Supervisor,
    /// Removed (empty directories only) after the kill.
    pub remove_dirs: Vec<PathBuf>,
}

impl Guarded {
    /// Guards `sup`.
    pub fn new(sup: Supervisor) -> Guarded {
        Guarded { sup, remove_dirs: Vec::new() }
    }
}

impl std::ops::Deref for Guarded {
    type Target = Supervisor;
    fn deref(&self) -> &Supervisor {
        &self.sup
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        self.sup.kill_all();
        for dir in &self.remove_dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A named test.
pub type Test = (&'static str, fn());

/// Run as `executor-shim ...` (the supervisor starts this binary as its
/// shim): be the shim, exactly as `regent executor-shim`, and exit.
pub fn act_as_shim_if_asked() {
    regent_std::exec::user::exec_if_asked();
    let mut args = std::env::args_os().skip(1);
    if args.next().as_ref().and_then(|a| a.to_str()) == Some(shim::SUBCOMMAND) {
        let parsed = ShimArgs::parse(args).unwrap_or_else(|e| {
            eprintln!("executor-shim: {e}");
            std::process::exit(2)
        });
        std::process::exit(shim::run(&parsed));
    }
}

/// Runs `tests` (those whose name contains an argument, or all), one after
/// the other, and exits 101 if one failed.
pub fn run(tests: &[Test]) -> ! {
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let chosen: Vec<&Test> = tests
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    println!("running {} tests", chosen.len());
    let mut failed = Vec::new();
    for (name, test) in chosen {
        let outcome = std::panic::catch_unwind(test);
        println!("test {name} ... {}", if outcome.is_ok() { "ok" } else { "FAILED" });
        if outcome.is_err() {
            failed.push(*name);
        }
    }
    if failed.is_empty() {
        println!("test result: ok");
        std::process::exit(0)
    }
    println!("test result: FAILED: {failed:?}");
    std::process::exit(101)
}

//! `regent-check`: the exhaustive checker's larger bounds (docs/design.md#issue-41).
//!
//! ```sh
//! cargo run --release -p regent-tests --bin regent-check               # every scenario, its large bound
//! cargo run --release -p regent-tests --bin regent-check -- --small    # the test command's bounds
//! cargo run --release -p regent-tests --bin regent-check -- --scenario kill_during_blip --depth 6
//! ```
//!
//! For each scenario it prints the bound, the states explored, the time
//! and, on a violation, the invariant, the path of choices and the end of
//! the trace. It exits 1 if any scenario found a violation.

use regent_tests::check::{all, explore, replay, Choice};

fn main() {
    let mut small = false;
    let mut only: Option<String> = None;
    let mut depth: Option<usize> = None;
    let mut max_states: Option<u64> = None;
    let mut path: Option<Vec<Choice>> = None;
    let mut skip: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--small" => small = true,
            "--scenario" => only = args.next(),
            "--depth" => depth = args.next().and_then(|d| d.parse().ok()),
            "--max-states" => max_states = args.next().and_then(|d| d.parse().ok()),
            "--skip" => skip.extend(args.next()),
            "--path" => path = args.next().map(|p| parse_path(&p)),
            _ => {
                eprintln!(
                    "usage: regent-check [--small] [--scenario NAME] [--depth N] [--max-states N] [--skip INVARIANT] [--path a0,c,a1,...]"
                );
                std::process::exit(2);
            }
        }
    }
    let mut failed = 0;
    for sc in all() {
        if only.as_ref().is_some_and(|n| n != sc.name) {
            continue;
        }
        let mut bound = if small { sc.small } else { sc.large };
        if let Some(d) = depth {
            bound.depth = d;
        }
        if let Some(m) = max_states {
            bound.max_states = m;
        }
        let mut sc = sc;
        sc.skip(&skip);
        println!("# {} (docs/design.md#issue-41, scenario {}): {}", sc.name, sc.targets, sc.about);
        if let Some(path) = &path {
            let (violation, trace) = replay(&sc, bound, path);
            for line in trace {
                println!("  {line}");
            }
            println!("{violation:?}");
            continue;
        }
        let report = explore(&sc, bound);
        println!("{report}");
        if report.violation.is_some() {
            failed += 1;
        }
    }
    if failed > 0 {
        println!("{failed} scenario(s) found a violation");
        std::process::exit(1);
    }
}

/// `c` continue, `aN` action N (a path as a counterexample's choices).
fn parse_path(p: &str) -> Vec<Choice> {
    p.split(',')
        .filter_map(|c| match c.trim() {
            "c" => Some(Choice::Continue),
            a => a.strip_prefix('a').and_then(|n| n.parse().ok()).map(Choice::Act),
        })
        .collect()
}

//! End-to-end: job files. `regent job validate` of a good and a bad file,
//! `regent run` of a two-group job whose executors each write a file
//! (with an environment variable of the job file in it), and `regent
//! submit --env`. Real `regent` processes on loopback; outcomes are
//! asserted within generous bounds, never timings.

mod support;

use std::time::Duration;
use support::cluster::{
    alive_with_workers, api_state, wait_for, wait_until, Cluster, Kind, MasterSpec, Proc,
};

/// Generous bound for anything to happen.
const BOUND: Duration = Duration::from_secs(60);

/// A master `m1` (`--recovery none`, `--http`), and worker `w1` (4 cores,
/// 1 GiB) ALIVE on it.
fn master_and_worker(c: &Cluster) -> (MasterSpec, Proc, Proc) {
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let master = c.master(&spec);
    let worker = c.worker("w1", &[spec.addr()], 4, 1024, &[]);
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1"])
    });
    (spec, master, worker)
}

/// Two groups: `driver` (one slot) and `mappers` (two slots, 2 cores, a
/// `cwd` and a `kill_grace`), each executor writing `<group>-<executor id>`
/// into `out` holding `$GREETING` (and the mappers where they ran).
fn two_group_job(out: &str) -> String {
    format!(
        r#"name = "wordcount"

[[group]]
name = "driver"
command = ["sh", "-c", "echo \"$GREETING from driver\" > \"$OUT/driver-$(echo $REGENT_EXECUTOR_ID | tr '/#' '__')\""]
env = {{ GREETING = "hello", OUT = "{out}" }}

[[group]]
name = "mappers"
count = 2
command = ["sh", "-c", "echo \"$GREETING from mappers in $(basename $(dirname $(pwd)))/$(basename $(pwd))\" > \"$OUT/mappers-$(echo $REGENT_EXECUTOR_ID | tr '/#' '__')\""]
env = {{ GREETING = "bonjour", OUT = "{out}" }}
cwd = "work/sub"
kill_grace = "10s"
cores = 2
memory_mb = 64
"#
    )
}

#[test]
fn validate_checks_a_job_file_offline() {
    let c = Cluster::new("job-validate");
    let good = c.path("good.toml");
    std::fs::write(&good, two_group_job("/tmp")).unwrap();
    let out = c.run(&["job", "validate", good.to_str().unwrap()], BOUND);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("job \"wordcount\": 2 group(s), valid"), "{stdout}");
    assert!(stdout.contains("group \"driver\": count 1, cores 1, memory 0 MiB"), "{stdout}");
    assert!(stdout.contains("group \"mappers\": count 2, cores 2, memory 64 MiB"), "{stdout}");

    let bad = c.path("bad.toml");
    std::fs::write(&bad, two_group_job("/tmp").replace("cores = 2", "cores = 0")).unwrap();
    let out = c.run(&["job", "validate", bad.to_str().unwrap()], BOUND);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("bad.toml:15:1: group \"mappers\": cores must be at least 1"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing on stdout for an invalid file");

    let served = c.path("served.toml");
    std::fs::write(&served, two_group_job("/tmp").replace("cores = 2", "ports = [\"http\"]"))
        .unwrap();
    let out = c.run(&["job", "validate", served.to_str().unwrap()], BOUND);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("group \"mappers\": count 2, cores 1, memory 64 MiB, ports http"),
        "{stdout}"
    );
    std::fs::write(&served, two_group_job("/tmp").replace("cores = 2", "ports = [\"Http\"]"))
        .unwrap();
    let out = c.run(&["job", "validate", served.to_str().unwrap()], BOUND);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("served.toml:15:1: group \"mappers\": ports: port name \"Http\" must be"),
        "{stderr}"
    );
}

#[test]
fn run_declares_every_group_of_a_job_and_ends_when_all_are_done() {
    let c = Cluster::new("job-run");
    let (spec, _master, mut worker) = master_and_worker(&c);
    let out = c.path("out");
    std::fs::create_dir(&out).unwrap();
    let job = c.path("job.toml");
    std::fs::write(&job, two_group_job(out.to_str().unwrap())).unwrap();

    let addr = spec.addr();
    let mut run = c.spawn(
        "run",
        Kind::Submit,
        &["run", "--masters", &addr, "--connect-timeout", "30", job.to_str().unwrap()],
    );
    let status = run.wait_exit(BOUND);
    assert_eq!(status.code(), Some(0), "run:\n{}\n{}", run.stdout(), run.stderr());

    let mut written: Vec<(String, String)> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let group = name.split('-').next().unwrap().to_owned();
            (group, std::fs::read_to_string(e.path()).unwrap())
        })
        .collect();
    written.sort();
    assert_eq!(
        written,
        vec![
            ("driver".to_owned(), "hello from driver\n".to_owned()),
            ("mappers".to_owned(), "bonjour from mappers in work/sub\n".to_owned()),
            ("mappers".to_owned(), "bonjour from mappers in work/sub\n".to_owned()),
        ],
        "one file per executor, each with its group's variable, the mappers in their cwd; run:\n{}",
        run.stdout()
    );
    let state = api_state(&spec.http_addr()).expect("the master answers");
    let text = state.to_string();
    assert!(text.contains("wordcount"), "the framework is named after the job: {state}");
    worker.assert_running("at the end");
}

#[test]
fn submit_env_reaches_the_executor() {
    let c = Cluster::new("job-submit-env");
    let (spec, _master, _worker) = master_and_worker(&c);
    let out = c.path("env.out");
    let out_s = out.to_str().unwrap().to_owned();
    // One executor of 1 core and 16 MiB, with the `--env` flags.
    let opts = |env: &[&str]| {
        let mut opts = vec!["--executors", "1", "--cores", "1", "--memory", "16"];
        for e in env {
            opts.extend(["--env", e]);
        }
        opts.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let good = opts(&["COLOUR=teal", &format!("OUT={out_s}"), "EQ=a=b"]);
    let good: Vec<&str> = good.iter().map(String::as_str).collect();
    let cmd = ["sh", "-c", "echo \"$COLOUR $EQ\" > \"$OUT\""];
    let mut submit = c.submit("submit", &[spec.addr()], &good, &cmd);
    let status = submit.wait_exit(BOUND);
    assert_eq!(status.code(), Some(0), "submit:\n{}\n{}", submit.stdout(), submit.stderr());
    wait_until(BOUND, "the executor's file", || out.exists());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "teal a=b\n");

    let addr = spec.addr();
    let mut args = vec!["submit".to_owned(), "--masters".into(), addr];
    args.extend(opts(&["NOEQUALS"]));
    args.extend(["--".into(), "true".into()]);
    let bad = c.run(&args.iter().map(String::as_str).collect::<Vec<_>>(), BOUND);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "a usage error: {stderr}");
    assert!(stderr.contains("expected KEY=VALUE, found \"NOEQUALS\" (no '=')"), "{stderr}");
}

/// A one-group job of `count` executors that run until killed.
fn service_job(count: u32) -> String {
    format!(
        r#"name = "webfarm"

[[group]]
name = "web"
count = {count}
command = ["sleep", "600"]
"#
    )
}

/// The ids of the executors the leader shows, sorted.
fn executor_ids(state: &serde_json::Value) -> Vec<String> {
    let mut ids: Vec<String> =
        support::cluster::executors(state).into_iter().map(|(id, _)| id).collect();
    ids.sort();
    ids
}

#[test]
fn running_the_same_job_file_again_follows_the_live_framework_and_a_changed_count_is_refused() {
    let c = Cluster::new("job-rerun");
    let (spec, _master, _worker) = master_and_worker(&c);
    let job = c.path("job.toml");
    std::fs::write(&job, service_job(2)).unwrap();
    let addr = spec.addr();
    let run_args = |file: &str| {
        vec!["run", "--masters", &addr, "--connect-timeout", "30", file]
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let args = run_args(job.to_str().unwrap());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut first = c.spawn("run1", Kind::Submit, &args);
    let before = wait_for(BOUND, "both executors RUNNING", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        let running =
            support::cluster::executors(&state).iter().filter(|(_, s)| s == "RUNNING").count();
        if running == 2 {
            Ok(executor_ids(&state))
        } else {
            Err(format!("{running} running: {state}"))
        }
    });

    // The same file again: the live framework is followed, nothing new runs.
    let mut second = c.spawn("run2", Kind::Submit, &args);
    wait_until(BOUND, "the second run follows the live framework", || {
        second.stdout().contains("job \"webfarm\" is live as framework")
    });
    let status = first.wait_exit(BOUND);
    assert_eq!(status.code(), Some(3), "the first run is taken over:\n{}", first.stdout());
    wait_until(BOUND, "the second run subscribed", || {
        second.stdout().contains("group web accepted")
    });
    let state = api_state(&spec.http_addr()).expect("the master answers");
    assert_eq!(state["frameworks"].as_array().map(Vec::len), Some(1), "{state}");
    assert_eq!(executor_ids(&state), before, "the same executors, none added");

    // A changed count is refused before anything is taken over.
    let changed = c.path("changed.toml");
    std::fs::write(&changed, service_job(3)).unwrap();
    let out = c.run(
        &["run", "--masters", &addr, "--connect-timeout", "30", changed.to_str().unwrap()],
        BOUND,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the file changes it (group \"web\": count 2 -> 3)"), "{stderr}");
    second.assert_running("a refused change takes nothing over");
    let state = api_state(&spec.http_addr()).expect("the master answers");
    assert_eq!(executor_ids(&state), before);
    second.sigterm();
    let _ = second.wait_exit(BOUND);
}

#[test]
fn a_constrained_submit_runs_only_on_matching_workers() {
    let c = Cluster::new("job-constraint");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let _ssd = c.worker("wssd", &[spec.addr()], 4, 1024, &["--attribute", "disk=ssd"]);
    let _hdd = c.worker("whdd", &[spec.addr()], 4, 1024, &["--attribute", "disk=hdd"]);
    wait_for(BOUND, "both workers ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["whdd", "wssd"])
    });
    let out = c.path("where");
    std::fs::create_dir(&out).unwrap();
    let out_s = out.to_str().unwrap().to_owned();
    let opts = ["--executors", "4", "--cores", "1", "--memory", "16", "--constraint", "disk=ssd"];
    let script = format!("pwd > {out_s}/$$");
    let cmd = ["sh", "-c", script.as_str()];
    let mut submit = c.submit("submit", &[spec.addr()], &opts, &cmd);
    let status = submit.wait_exit(BOUND);
    assert_eq!(status.code(), Some(0), "submit:\n{}\n{}", submit.stdout(), submit.stderr());
    let dirs: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(dirs.len(), 4, "every executor ran: {dirs:?}");
    assert!(dirs.iter().all(|d| d.contains("wssd") && !d.contains("whdd")), "{dirs:?}");
}

/// Every file under `dir` with its bytes, by path (a store's whole image).
fn tree(dir: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                files.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    files
}

#[test]
fn job_plan_shows_placements_and_reasons_and_changes_nothing() {
    let c = Cluster::new("job-plan");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let _master = c.master(&spec);
    let _ssd = c.worker("w1", &[spec.addr()], 4, 1024, &["--attribute", "disk=ssd"]);
    let _hdd = c.worker("w2", &[spec.addr()], 4, 1024, &["--attribute", "disk=hdd"]);
    wait_for(BOUND, "the workers ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1", "w2"])
    });
    let job = c.path("plan.toml");
    std::fs::write(
        &job,
        r#"name = "planned"

[[group]]
name = "ssd"
count = 3
command = ["true"]
constraints = ["disk=ssd"]

[[group]]
name = "r9"
command = ["true"]
constraints = ["rack=r9"]

[[group]]
name = "big"
command = ["true"]
cores = 8
"#,
    )
    .unwrap();
    let frameworks = |state: &serde_json::Value| state["frameworks"].as_array().map(Vec::len);
    let before_state = api_state(&spec.http_addr()).expect("the master answers");
    let before = tree(&store);
    let out = c.run(
        &[
            "job",
            "plan",
            "--masters",
            &spec.addr(),
            "--connect-timeout",
            "30",
            job.to_str().unwrap(),
        ],
        BOUND,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "some slots would not be placed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("job \"planned\": a plan against the leader now; nothing was changed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("group \"ssd\": 3 of 3 slot(s) would be placed (slots 0-2 -> w1)"),
        "{stdout}"
    );
    assert!(stdout.contains("group \"r9\": 0 of 1 slot(s) would be placed; 1 would not: no ALIVE worker matches rack=r9"), "{stdout}");
    assert!(stdout.contains("group \"big\": 0 of 1 slot(s) would be placed; 1 would not: needs 8 cores: the largest matching worker has 4"), "{stdout}");
    assert_eq!(tree(&store), before, "the store is byte for byte as it was");
    let after_state = api_state(&spec.http_addr()).expect("the master answers");
    assert_eq!(frameworks(&after_state), frameworks(&before_state), "no framework: {after_state}");
    assert_eq!(after_state["workers"], before_state["workers"], "nothing held on any worker");

    // A job that fits exits 0.
    std::fs::write(
        &job,
        "name = \"fits\"\n[[group]]\nname = \"g\"\ncount = 2\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let out = c.run(&["job", "plan", "--masters", &spec.addr(), job.to_str().unwrap()], BOUND);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("group \"g\": 2 of 2 slot(s) would be placed"), "{stdout}");
}

/// A gzipped tarball of `entries` (path, bytes, mode), the path's bytes
/// written as given (a hostile `../` included).
fn tar_gz(entries: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    for (path, data, mode) in entries {
        let mut h = tar::Header::new_gnu();
        h.as_gnu_mut().unwrap().name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_size(data.len() as u64);
        h.set_mode(*mode);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append(&h, *data).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn artifacts_are_fetched_checked_and_unpacked_before_an_executor_runs() {
    let c = Cluster::new("job-artifacts");
    let (spec, _master, mut worker) = master_and_worker(&c);
    let out = c.path("out");
    std::fs::create_dir(&out).unwrap();
    let good = tar_gz(&[(
        "tool/run.sh",
        b"#!/bin/sh\necho \"tool ran in $(pwd)\" > \"$OUT/$1\"\n",
        0o755,
    )]);
    let evil = tar_gz(&[("../../../escaped", b"x", 0o644)]);
    let server = support::file_server::FileServer::start(vec![
        ("tool.tar.gz".into(), good.clone()),
        ("evil.tar.gz".into(), evil.clone()),
    ]);
    let job = c.path("artifacts.toml");
    let out_s = out.to_str().unwrap();
    std::fs::write(
        &job,
        format!(
            r#"name = "tools"

[[group]]
name = "good"
count = 2
command = ["bin/tool/run.sh", "good"]
env = {{ OUT = "{out_s}" }}
[[group.artifacts]]
source = "{good_url}"
sha256 = "{good_sha}"
dest = "bin"
unpack = true

[[group]]
name = "mismatch"
command = ["sh", "-c", "echo ran > \"$OUT/mismatch\""]
env = {{ OUT = "{out_s}" }}
[group.restart]
attempts = 0
[[group.artifacts]]
source = "{good_url}"
sha256 = "{wrong}"

[[group]]
name = "escape"
command = ["sh", "-c", "echo ran > \"$OUT/escape\""]
env = {{ OUT = "{out_s}" }}
[group.restart]
attempts = 0
[[group.artifacts]]
source = "{evil_url}"
sha256 = "{evil_sha}"
unpack = true
"#,
            good_url = server.url("tool.tar.gz"),
            good_sha = sha256(&good),
            wrong = "0".repeat(64),
            evil_url = server.url("evil.tar.gz"),
            evil_sha = sha256(&evil),
        ),
    )
    .unwrap();
    let validate = c.run(&["job", "validate", job.to_str().unwrap()], BOUND);
    assert_eq!(validate.status.code(), Some(0), "{}", String::from_utf8_lossy(&validate.stderr));
    let mut run = c.spawn(
        "run",
        Kind::Submit,
        &["run", "--masters", &spec.addr(), "--connect-timeout", "30", job.to_str().unwrap()],
    );
    let status = run.wait_exit(BOUND);
    let shown = format!("{}\n{}", run.stdout(), run.stderr());
    assert_eq!(status.code(), Some(2), "two groups' slots fail:\n{shown}");
    // The good group ran its fetched, unpacked program (twice: two slots),
    // in its executor directory.
    let ran = std::fs::read_to_string(out.join("good")).unwrap_or_default();
    assert!(ran.starts_with("tool ran in "), "{ran}\n{shown}");
    assert!(ran.contains("/executors/"), "{ran}");
    // The others never ran, and say why.
    assert!(!out.join("mismatch").exists() && !out.join("escape").exists(), "{shown}");
    assert!(
        shown.contains(&format!(
            "sha256 mismatch: expected {}, received {}",
            "0".repeat(64),
            sha256(&good)
        )),
        "{shown}"
    );
    assert!(shown.contains("would escape the executor directory"), "{shown}");
    assert!(!c.dir().join("escaped").exists() && !std::path::Path::new("/escaped").exists());
    // Three fetches: the good tarball once for both slots of its group
    // (cached by digest), the mismatching one once (never cached: it did
    // not check), the escaping one once.
    assert_eq!(server.hits.load(std::sync::atomic::Ordering::SeqCst), 3, "{shown}");
    worker.assert_running("after failed artifacts");
}

#[test]
fn the_readme_quickstart_job_plans_and_runs() {
    let c = Cluster::new("job-quickstart");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let _w1 = c.worker("w1", &[spec.addr()], 4, 4096, &[]);
    let _w2 = c.worker("w2", &[spec.addr()], 4, 4096, &["--attribute", "disk=ssd"]);
    wait_for(BOUND, "the workers ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["w1", "w2"])
    });
    let job = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/jobs/quickstart.toml");
    let plan = c.run(&["job", "plan", "--masters", &spec.addr(), job], BOUND);
    let stdout = String::from_utf8_lossy(&plan.stdout);
    assert_eq!(plan.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&plan.stderr));
    assert!(
        stdout.contains("group \"indexers\": 2 of 2 slot(s) would be placed (slots 0-1 -> w2)"),
        "{stdout}"
    );
    let mut run = c.spawn("run", Kind::Submit, &["run", "--masters", &spec.addr(), job]);
    let status = run.wait_exit(BOUND);
    assert_eq!(status.code(), Some(0), "run:\n{}\n{}", run.stdout(), run.stderr());
}

#[test]
fn a_constrained_job_keeps_its_constraint_across_a_kill_9_of_the_leader() {
    let c = Cluster::new("job-constraint-failover");
    let store = c.path("store");
    let spec =
        MasterSpec::new("m1", &["--recovery", "filesystem", "--store", store.to_str().unwrap()]);
    let mut master = c.master(&spec);
    let _ssd = c.worker("wssd", &[spec.addr()], 8, 1024, &["--attribute", "disk=ssd"]);
    let _hdd = c.worker("whdd", &[spec.addr()], 8, 1024, &["--attribute", "disk=hdd"]);
    let both = || {
        wait_for(BOUND, "both workers ALIVE", || {
            let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
            alive_with_workers(&state, &["whdd", "wssd"])
        })
    };
    both();
    let out = c.path("where");
    std::fs::create_dir(&out).unwrap();
    // Each executor writes where it runs, then stays.
    let script = format!("pwd > {}/$$; exec sleep 600", out.display());
    let opts = ["--executors", "2", "--cores", "1", "--memory", "16", "--constraint", "disk=ssd"];
    let mut submit = c.submit("submit", &[spec.addr()], &opts, &["sh", "-c", script.as_str()]);
    let dirs = |n: usize| {
        wait_for(BOUND, "the executors' reports", || {
            let d: Vec<String> = std::fs::read_dir(&out)
                .unwrap()
                .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
                .filter(|d| !d.is_empty())
                .collect();
            if d.len() >= n {
                Ok(d)
            } else {
                Err(format!("{} of {n}; submit: {}", d.len(), submit.stdout()))
            }
        })
    };
    assert!(dirs(2).iter().all(|d| d.contains("wssd")), "placed on ssd before the failover");
    master.kill9();
    let _master = c.master(&spec);
    both();
    // The recovered group, scaled up by an operator: the new executors
    // land on the ssd worker too (the constraint came back with the
    // framework record, the attributes with the re-registrations).
    let state = wait_for(BOUND, "the framework recovered", || {
        let s = api_state(&spec.http_addr()).ok_or("no answer")?;
        if s["frameworks"][0]["id"].is_string() {
            Ok(s)
        } else {
            Err(format!("no framework yet: {s}"))
        }
    });
    let fw = state["frameworks"][0]["id"].as_str().unwrap().to_owned();
    let scaled = c.run(&["scale", "--masters", &spec.addr(), &fw, "main", "5"], BOUND);
    assert!(scaled.status.success(), "{}", String::from_utf8_lossy(&scaled.stderr));
    let all = dirs(5);
    assert!(all.iter().all(|d| d.contains("wssd") && !d.contains("whdd")), "{all:?}");
    submit.sigterm();
    let _ = submit.wait_exit(BOUND);
}

/// A job of three executors that each write `$V` into a file of their own
/// under `out`, then run until killed.
fn versioned_job(out: &str, version: &str) -> String {
    format!(
        r#"name = "rolling"

[[group]]
name = "web"
count = 3
command = ["sh", "-c", "echo $V > \"$OUT/$(echo $REGENT_EXECUTOR_ID | tr '/#' '__')\"; exec sleep 600"]
env = {{ V = "{version}", OUT = "{out}" }}
"#
    )
}

/// The running executors the leader shows.
fn running_ids(state: &serde_json::Value) -> Vec<String> {
    let mut ids: Vec<String> = support::cluster::executors(state)
        .into_iter()
        .filter(|(_, s)| s == "RUNNING")
        .map(|(id, _)| id)
        .collect();
    ids.sort();
    ids
}

#[test]
fn run_update_replaces_a_changed_group_slot_by_slot_and_without_it_a_change_is_refused() {
    let c = Cluster::new("job-update");
    let (spec, _master, _worker) = master_and_worker(&c);
    let out = c.path("out");
    std::fs::create_dir(&out).unwrap();
    let out_s = out.to_str().unwrap().to_owned();
    let v1 = c.path("v1.toml");
    std::fs::write(&v1, versioned_job(&out_s, "v1")).unwrap();
    let v2 = c.path("v2.toml");
    std::fs::write(&v2, versioned_job(&out_s, "v2")).unwrap();
    let addr = spec.addr();
    let mut first =
        c.spawn("run1", Kind::Submit, &["run", "--masters", &addr, v1.to_str().unwrap()]);
    let before = wait_for(BOUND, "three v1 executors RUNNING", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        let ids = running_ids(&state);
        if ids.len() == 3 {
            Ok(ids)
        } else {
            Err(format!("{state}"))
        }
    });

    // Without --update the changed file is refused, naming the change.
    let mut refused =
        c.spawn("run2", Kind::Submit, &["run", "--masters", &addr, v2.to_str().unwrap()]);
    let status = refused.wait_exit(BOUND);
    assert_ne!(status.code(), Some(0), "{}", refused.stdout());
    let said = format!("{}{}", refused.stdout(), refused.stderr());
    assert!(said.contains("already declared with a different spec"), "{said}");
    let state = api_state(&spec.http_addr()).expect("the master answers");
    assert_eq!(running_ids(&state), before, "nothing was replaced");

    // With --update every slot is replaced by an executor of the new spec.
    let mut update = c.spawn(
        "run3",
        Kind::Submit,
        &["run", "--masters", &addr, "--update", "--max-parallel", "1", v2.to_str().unwrap()],
    );
    wait_until(BOUND, "the update follows the live framework", || {
        update.stdout().contains("is live as framework") && update.stdout().contains("updating it")
    });
    let after = wait_for(BOUND, "three new executors RUNNING", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        let ids = running_ids(&state);
        if ids.len() == 3 && ids.iter().all(|id| !before.contains(id)) {
            Ok(ids)
        } else {
            Err(format!("running {ids:?}, before {before:?}"))
        }
    });
    for id in &after {
        let file = out.join(id.replace(['/', '#'], "_"));
        let v = wait_for(BOUND, "the new executor to write its version", || {
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))
        });
        assert_eq!(v.trim(), "v2", "{id} runs the new spec");
    }
    for id in &before {
        let file = out.join(id.replace(['/', '#'], "_"));
        assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "v1");
    }
    let state = api_state(&spec.http_addr()).expect("the master answers");
    let f = &state["frameworks"][0];
    assert_eq!(state["frameworks"].as_array().map(Vec::len), Some(1), "{state}");
    assert_eq!(f["groups"][0]["running"].as_u64(), Some(3), "{f}");
    let _ = first.wait_exit(BOUND);
    update.assert_running("the update follows the framework on");
    update.sigterm();
    let _ = update.wait_exit(BOUND);
}

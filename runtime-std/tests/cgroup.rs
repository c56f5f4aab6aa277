//! Executors' limits enforced with cgroups ([`regent_std::exec::cgroup`]).
//!
//! * On a fake cgroup tree in a temporary directory, for cgroup v2 and v1:
//!   the parents and the controllers enabled for their children, each
//!   limit file's value, the out-of-memory reason read from the counters,
//!   removal, and the errors that name why a tree cannot be used.
//! * On this machine's real cgroups (v1 controllers here, v2 where the host
//!   mounts it; as root): an executor allocating past its memory is killed
//!   by the kernel and reported `Failed` with `out of memory: limit 32 MiB`;
//!   two busy loops with `cores = 1` use at most about one core (from the
//!   cgroup's own CPU time); a fork loop stops at the pids limit and the
//!   supervisor goes on launching; the cgroup is gone after every end, and
//!   nothing it held survives.
//!
//! The real tests need root and a cgroup file system; without them they
//! fail naming why, unless `REGENT_SKIP_REAL_CGROUPS=1` is set (then they
//! print that they were skipped). `scripts/test` runs them as root on the
//! CI machine's v1 controllers.
//!
//! This binary is its own shim (as `tests/shim.rs`): run with
//! `executor-shim ...` first it runs `regent_std::exec::shim::run`. Every wait is bounded;
//! every process a test starts is killed before it ends.

mod harness;

use harness::Guarded;
use regent_core::protocol::{ExecutorSpec, ExecutorState};
use regent_core::{ExecutorId, FrameworkId};
use regent_std::exec::cgroup::{
    self, Cgroups, IsolationConfig, IsolationMode, Limits, Offered, OutOfMemory,
};
use regent_std::exec::delegation::Opener;
use regent_std::exec::{ExecEvent, Launched, Supervisor, SupervisorConfig};
use std::fs;
use std::path::Path;
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(30);

const TESTS: &[harness::Test] = &[
    ("a_fake_v2_tree_gets_parents_controllers_and_limits", fake_v2),
    ("a_fake_v1_tree_gets_a_cgroup_per_controller", fake_v1),
    ("trees_that_cannot_be_used_are_refused_naming_why", refusals),
    ("a_fake_v2_tree_delegated_to_a_user_holds_its_executors_below_its_own", fake_v2_delegated),
    ("a_fake_v1_tree_delegated_to_a_user_holds_its_executors_below_its_own", fake_v1_delegated),
    ("a_user_without_a_delegated_cgroup_is_refused_naming_delegate_yes", not_delegated),
    ("real_an_executor_past_its_memory_is_reported_out_of_memory", real_out_of_memory),
    ("real_two_busy_loops_with_one_core_use_about_one_core", real_cpu_quota),
    ("real_a_fork_loop_stops_at_the_pids_limit", real_pids_limit),
];

fn main() {
    harness::act_as_shim_if_asked();
    harness::run(TESTS)
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn config(root: &Path, mode: IsolationMode, pids_max: u32) -> IsolationConfig {
    IsolationConfig { mode, root: root.to_owned(), pids_max }
}

/// Root, whoever runs the test: the machine-wide layout.
fn as_root() -> Opener {
    Opener { uid: 0, gid: 0, pid: 1, proc_cgroup: "0::/\n".to_owned() }
}

/// Opens a fake tree as root.
fn open_as_root(
    cfg: &IsolationConfig,
    worker: &str,
) -> Result<Option<Cgroups>, cgroup::CgroupError> {
    Cgroups::open_as(cfg, worker, &as_root())
}

/// Delegates `dirs` (and their `cgroup.procs`) to a user who is not root,
/// as systemd's `Delegate=yes` does: a made-up uid when the test runs as
/// root (it owns the files; no process of it is needed), else the test's
/// own. Returns that user, in cgroups `proc_cgroup`, as pid 4242.
fn delegate(dirs: &[&Path], proc_cgroup: &str) -> Opener {
    let (uid, gid) = if rustix::process::geteuid().is_root() {
        for dir in dirs {
            for p in [dir.to_path_buf(), dir.join("cgroup.procs")] {
                std::os::unix::fs::chown(&p, Some(4000), Some(4000)).unwrap();
            }
        }
        (4000, 4000)
    } else {
        (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw())
    };
    Opener { uid, gid, pid: 4242, proc_cgroup: proc_cgroup.to_owned() }
}

/// A fake cgroup directory: `cgroup.procs` holding `procs`, and, for v2,
/// `cgroup.controllers` offering memory, cpu and pids.
fn fake_cgroup(dir: &Path, v2: bool, procs: &str) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("cgroup.procs"), procs).unwrap();
    if v2 {
        fs::write(dir.join("cgroup.controllers"), "cpu memory pids\n").unwrap();
    }
}

fn fake_v2() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    fs::write(root.join("cgroup.controllers"), "cpuset cpu io memory hugetlb pids\n").unwrap();
    assert_eq!(cgroup::detect(root), Offered::V2);
    let cg = open_as_root(&config(root, IsolationMode::Auto, 100), "w1@0011")
        .unwrap()
        .expect("v2 offered");
    let parent = root.join("regent").join("w1@0011");
    assert_eq!(cg.parents(), vec![parent.clone()]);
    for dir in [root, &root.join("regent"), &parent] {
        assert_eq!(read(&dir.join("cgroup.subtree_control")), "+memory +cpu +pids", "{dir:?}");
    }
    let dirs = cg.create("fw-1/main/0", Limits::for_executor(2, 64, cg.pids_max())).unwrap();
    assert_eq!(dirs.len(), 1);
    let dir = &dirs[0];
    assert!(dir.starts_with(&parent), "{dir:?}");
    assert_eq!(read(&dir.join("memory.max")), "67108864");
    assert_eq!(read(&dir.join("cpu.max")), "200000 100000");
    assert_eq!(read(&dir.join("pids.max")), "100");
    // No memory.swap.max in this tree (no swap controller): not written.
    assert!(!dir.join("memory.swap.max").exists());
    assert_eq!(cg.existing(), vec!["fw-1/main/0".to_owned()]);
    // No kill counted: not out of memory.
    fs::write(dir.join("memory.events"), "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\n").unwrap();
    assert_eq!(cg.out_of_memory("fw-1/main/0"), None);
    fs::write(dir.join("memory.events"), "low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n").unwrap();
    fs::write(dir.join("memory.peak"), "67108864\n").unwrap();
    let oom = cg.out_of_memory("fw-1/main/0").expect("an oom kill");
    assert_eq!(oom, OutOfMemory { limit_bytes: Some(64 << 20), peak_bytes: Some(64 << 20) });
    assert_eq!(oom.reason(), "out of memory: limit 64 MiB, peak 64 MiB");
    assert!(regent_core::launch::is_out_of_memory(&oom.reason()));
    fs::write(dir.join("memory.current"), "1048576\n").unwrap();
    fs::write(dir.join("cpu.stat"), "usage_usec 2500\nuser_usec 2000\n").unwrap();
    let usage = cg.usage("fw-1/main/0");
    assert_eq!(usage.memory_bytes, Some(1 << 20));
    assert_eq!(usage.cpu_usec, Some(2500));
    // Unlimited kinds are written as such.
    let dirs = cg.create("fw-1/main/1", Limits::for_executor(0, 0, 7)).unwrap();
    assert_eq!(read(&dirs[0].join("memory.max")), "max");
    assert_eq!(read(&dirs[0].join("cpu.max")), "max 100000");
    assert!(cg.remove("fw-1/main/0", Duration::from_secs(1)).is_empty());
    assert!(!dir.exists());
    assert_eq!(cg.existing(), vec!["fw-1/main/1".to_owned()]);
}

fn fake_v1() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    for c in ["memory", "cpu", "cpuacct", "pids"] {
        fs::create_dir(root.join(c)).unwrap();
        fs::write(root.join(c).join("cgroup.procs"), "").unwrap();
    }
    fs::create_dir(root.join("unified")).unwrap();
    fs::write(root.join("unified").join("cgroup.controllers"), "").unwrap();
    assert_eq!(cgroup::detect(root), Offered::V1 { hybrid: true });
    let cg = open_as_root(&config(root, IsolationMode::Cgroups, 4096), "w1@0011")
        .unwrap()
        .expect("v1 offered");
    // cpuacct is mounted apart from cpu: a cgroup there too, for CPU time.
    assert_eq!(cg.parents().len(), 4, "{:?}", cg.parents());
    let dirs = cg.create("e1", Limits::for_executor(1, 32, 4096)).unwrap();
    assert_eq!(dirs.len(), 4);
    let at = |c: &str, f: &str| read(&root.join(c).join("regent/w1@0011/e1").join(f));
    assert_eq!(at("memory", "memory.limit_in_bytes"), "33554432");
    assert_eq!(at("cpu", "cpu.cfs_quota_us"), "100000");
    assert_eq!(at("cpu", "cpu.cfs_period_us"), "100000");
    assert_eq!(at("pids", "pids.max"), "4096");
    let mem = root.join("memory/regent/w1@0011/e1");
    fs::write(mem.join("memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
        .unwrap();
    fs::write(mem.join("memory.max_usage_in_bytes"), "33554432").unwrap();
    assert_eq!(
        cg.out_of_memory("e1").map(|o| o.reason()).as_deref(),
        Some("out of memory: limit 32 MiB, peak 32 MiB")
    );
    fs::write(root.join("cpuacct/regent/w1@0011/e1/cpuacct.usage"), "3000000").unwrap();
    assert_eq!(cg.usage("e1").cpu_usec, Some(3000));
    assert!(cg.remove("e1", Duration::from_secs(1)).is_empty());
    assert!(cg.existing().is_empty());
}

fn refusals() {
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(cgroup::detect(empty.path()), Offered::Nothing);
    // Auto on a host without cgroups: accounted only; cgroups: an error.
    assert_eq!(open_as_root(&config(empty.path(), IsolationMode::Auto, 1), "w").unwrap(), None);
    assert_eq!(open_as_root(&config(empty.path(), IsolationMode::None, 1), "w").unwrap(), None);
    let err = open_as_root(&config(empty.path(), IsolationMode::Cgroups, 1), "w")
        .unwrap_err()
        .to_string();
    assert!(err.contains("no cgroup file system under"), "{err}");
    assert!(err.contains("--isolation none"), "{err}");
    // v2 without the pids controller.
    let v2 = tempfile::tempdir().unwrap();
    fs::write(v2.path().join("cgroup.controllers"), "cpu memory\n").unwrap();
    let err =
        open_as_root(&config(v2.path(), IsolationMode::Auto, 1), "w").unwrap_err().to_string();
    assert!(err.contains("the pids controller is not available"), "{err}");
    assert!(err.contains("\"cpu memory\""), "{err}");
    // A tree this process cannot write (a read-only directory, for a
    // non-root user; root writes anyway, so only the message is checked
    // where it applies).
    if !rustix::process::geteuid().is_root() {
        let ro = tempfile::tempdir().unwrap();
        fs::write(ro.path().join("cgroup.controllers"), "cpu memory pids\n").unwrap();
        let mut perm = fs::metadata(ro.path()).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o555);
        fs::set_permissions(ro.path(), perm).unwrap();
        let err =
            open_as_root(&config(ro.path(), IsolationMode::Auto, 1), "w").unwrap_err().to_string();
        assert!(err.contains("not root"), "{err}");
    }
    assert_eq!(
        "sometimes".parse::<IsolationMode>().unwrap_err(),
        "unknown isolation \"sometimes\": expected auto, cgroups or none"
    );
}

fn fake_v2_delegated() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    fs::write(root.join("cgroup.controllers"), "cpuset cpu io memory pids\n").unwrap();
    // systemd's unit cgroup with Delegate=yes: the worker (4242) and the
    // wrapper that started it (17) in it.
    let own = root.join("system.slice/regent-worker.service");
    fake_cgroup(&own, true, "17\n4242\n");
    let who = delegate(&[&own], "0::/system.slice/regent-worker.service\n");
    let cfg = config(root, IsolationMode::Auto, 100);
    let cg = Cgroups::open_as(&cfg, "w1@0011", &who).unwrap().expect("v2 offered");
    assert!(cg.delegated());
    let parent = own.join("regent/w1@0011");
    assert_eq!(cg.parents(), vec![parent.clone()]);
    // The no-internal-processes rule: the processes moved into the
    // supervisor leaf (a fake file keeps the last write; the worker's own
    // pid went first), then the controllers enabled below the own cgroup.
    assert_eq!(read(&own.join("supervisor/cgroup.procs")), "17");
    for dir in [&own, &own.join("regent"), &parent] {
        assert_eq!(read(&dir.join("cgroup.subtree_control")), "+memory +cpu +pids", "{dir:?}");
    }
    // Nothing outside the delegated cgroup is touched.
    assert!(!root.join("regent").exists());
    assert!(!root.join("cgroup.subtree_control").exists());
    let dirs = cg.create("fw-1/main/0", Limits::for_executor(1, 64, cg.pids_max())).unwrap();
    assert_eq!(dirs, vec![parent.join("fw-1%2Fmain%2F0")], "below the worker's own cgroup");
    assert_eq!(read(&dirs[0].join("memory.max")), "67108864");
    assert_eq!(read(&dirs[0].join("cpu.max")), "100000 100000");
    // A restarted worker: systemd's DelegateSubgroup=supervisor (or the
    // previous process's move) started it in the leaf. It finds the same
    // parent and the executor's cgroup to re-adopt, and moves nothing.
    fs::write(own.join("supervisor/cgroup.procs"), "5151").unwrap();
    let again = Opener {
        pid: 5151,
        proc_cgroup: "0::/system.slice/regent-worker.service/supervisor\n".to_owned(),
        ..who.clone()
    };
    let cg2 = Cgroups::open_as(&cfg, "w1@0011", &again).unwrap().expect("v2 offered");
    assert_eq!(cg2.parents(), cg.parents());
    assert_eq!(cg2.existing(), vec!["fw-1/main/0".to_owned()]);
    assert_eq!(read(&own.join("supervisor/cgroup.procs")), "5151");
    assert!(!own.join("supervisor/supervisor").exists());
    // Its executors gone, the worker leaves nothing of its own behind
    // (a fake tree holds the files written into it: removed first).
    assert!(cg2.remove("fw-1/main/0", Duration::from_secs(1)).is_empty());
    for d in [&parent, &own.join("regent")] {
        fs::remove_file(d.join("cgroup.subtree_control")).unwrap();
    }
    cg2.remove_parents_if_empty();
    assert!(!own.join("regent").exists());
}

fn fake_v1_delegated() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    for c in ["memory", "cpu", "cpuacct", "pids"] {
        fake_cgroup(&root.join(c), false, "");
    }
    // Each controller places the worker elsewhere; cpu and cpuacct are
    // co-mounted in /proc/self/cgroup's view.
    let mem = root.join("memory/process_api/74ba/regent-worker");
    let cpu = root.join("cpu/regent-worker");
    let acct = root.join("cpuacct/regent-worker");
    let pids = root.join("pids/system.slice/regent-worker");
    for d in [&mem, &cpu, &acct, &pids] {
        fake_cgroup(d, false, "4242\n");
    }
    let text = "9:name=systemd:/\n8:pids:/system.slice/regent-worker\n\
                4:memory:/process_api/74ba/regent-worker\n2:cpu,cpuacct:/regent-worker\n0::/\n";
    let who = delegate(&[&mem, &cpu, &acct, &pids], text);
    let cfg = config(root, IsolationMode::Cgroups, 4096);
    let cg = Cgroups::open_as(&cfg, "w1@0011", &who).unwrap().expect("v1 offered");
    assert!(cg.delegated());
    let parent = |own: &Path| own.join("regent/w1@0011");
    assert_eq!(cg.parents(), vec![parent(&mem), parent(&cpu), parent(&pids), parent(&acct)]);
    // v1 has no no-internal-processes rule: the worker stays where it is.
    assert!(!mem.join("supervisor").exists());
    assert!(!root.join("memory/regent").exists());
    let dirs = cg.create("e1", Limits::for_executor(1, 32, 4096)).unwrap();
    assert_eq!(dirs.len(), 4);
    assert_eq!(read(&parent(&mem).join("e1/memory.limit_in_bytes")), "33554432");
    assert_eq!(read(&parent(&cpu).join("e1/cpu.cfs_quota_us")), "100000");
    assert_eq!(read(&parent(&pids).join("e1/pids.max")), "4096");
    // Restarted in the same cgroups: the same parents, the executor found.
    let cg2 = Cgroups::open_as(&cfg, "w1@0011", &Opener { pid: 5151, ..who.clone() })
        .unwrap()
        .expect("v1 offered");
    assert_eq!(cg2.parents(), cg.parents());
    assert_eq!(cg2.existing(), vec!["e1".to_owned()]);
    assert!(cg2.remove("e1", Duration::from_secs(1)).is_empty());
    cg2.remove_parents_if_empty();
    assert!(!mem.join("regent").exists());
    assert!(!pids.join("regent").exists());
}

fn not_delegated() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    for c in ["memory", "cpu", "pids"] {
        fake_cgroup(&root.join(c), false, "");
    }
    // Delegated in memory and cpu, but its pids cgroup is the hierarchy's
    // root: refused before anything is made, naming that cgroup and the
    // fix, whether --isolation is auto or cgroups.
    let mem = root.join("memory/svc");
    let cpu = root.join("cpu/svc");
    fake_cgroup(&mem, false, "4242\n");
    fake_cgroup(&cpu, false, "4242\n");
    let who = delegate(&[&mem, &cpu], "8:pids:/\n4:memory:/svc\n1:cpu:/svc\n");
    for mode in [IsolationMode::Auto, IsolationMode::Cgroups] {
        let err = Cgroups::open_as(&config(root, mode, 1), "w", &who).unwrap_err().to_string();
        let expected = format!(
            "the worker runs as uid {}, not root, and its own cgroup {} is not delegated to it",
            who.uid,
            root.join("pids").display()
        );
        assert!(err.starts_with(&expected), "{err}");
        assert!(err.contains("systemd with Delegate=yes"), "{err}");
        // On v1 systemd gives a unit with User= no controller: the unit's
        // hand-over is named too.
        assert!(
            err.contains("on cgroup v1, ExecStartPre=+regent delegate-cgroups --user USER"),
            "{err}"
        );
        assert!(err.contains("chown -R that cgroup to this user"), "{err}");
        assert!(err.contains("--isolation none"), "{err}");
    }
    assert!(!mem.join("regent").exists(), "nothing made in the other hierarchies");
    // Not even a line for the controller, or a cgroup that is not there.
    let who = Opener { proc_cgroup: "4:memory:/svc\n1:cpu:/svc\n".to_owned(), ..who };
    let err =
        Cgroups::open_as(&config(root, IsolationMode::Auto, 1), "w", &who).unwrap_err().to_string();
    assert!(
        err.contains("/proc/self/cgroup names no cgroup of it in the v1 pids hierarchy"),
        "{err}"
    );
    assert!(err.contains("Delegate=yes"), "{err}");
    let who = Opener { proc_cgroup: "8:pids:/gone\n4:memory:/svc\n1:cpu:/svc\n".to_owned(), ..who };
    let err =
        Cgroups::open_as(&config(root, IsolationMode::Auto, 1), "w", &who).unwrap_err().to_string();
    assert!(err.contains("its cgroup /gone in the v1 pids hierarchy"), "{err}");
    // v2: the own cgroup not writable by the user.
    let v2 = tempfile::tempdir().unwrap();
    fs::write(v2.path().join("cgroup.controllers"), "cpu memory pids\n").unwrap();
    let user = v2.path().join("user.slice");
    fake_cgroup(&user, true, "4242\n");
    let stranger = Opener {
        uid: who.uid + 1,
        gid: who.gid + 1,
        pid: 4242,
        proc_cgroup: "0::/user.slice\n".to_owned(),
    };
    let err = Cgroups::open_as(&config(v2.path(), IsolationMode::Auto, 1), "w", &stranger)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&format!("its own cgroup {} is not delegated", user.display())), "{err}");
    assert!(err.contains("systemd with Delegate=yes (as"), "{err}");
    assert!(!err.contains("delegate-cgroups"), "nothing to hand over on v2: {err}");
    assert!(!user.join("supervisor").exists(), "the worker was not moved");
    // None stays none, and a host without cgroups stays accounted only.
    assert_eq!(
        Cgroups::open_as(&config(root, IsolationMode::None, 1), "w", &stranger).unwrap(),
        None
    );
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(
        Cgroups::open_as(&config(empty.path(), IsolationMode::Auto, 1), "w", &stranger).unwrap(),
        None
    );
}

// ---- the real cgroups of this machine ----

/// This machine's cgroups for a test worker, or `None` (skipped) when
/// `REGENT_SKIP_REAL_CGROUPS=1` and they cannot be used.
fn real(pids_max: u32) -> Option<(Cgroups, tempfile::TempDir)> {
    let work = tempfile::tempdir().unwrap();
    let name = cgroup::worker_cgroup_name("test-worker", work.path());
    let cfg = IsolationConfig { mode: IsolationMode::Cgroups, pids_max, ..Default::default() };
    match Cgroups::open(&cfg, &name) {
        Ok(cg) => Some((cg.expect("cgroups mode gives cgroups"), work)),
        Err(e) if std::env::var("REGENT_SKIP_REAL_CGROUPS").as_deref() == Ok("1") => {
            println!("skipped (REGENT_SKIP_REAL_CGROUPS=1): {e}");
            None
        }
        Err(e) => panic!("this machine's cgroups cannot be used ({e}); run as root on a host with cgroups, or set REGENT_SKIP_REAL_CGROUPS=1"),
    }
}

fn supervisor(cg: Cgroups, work: &Path) -> (Guarded, Receiver<ExecEvent>) {
    let mut config = SupervisorConfig::new(work);
    config.shim = Some(std::env::current_exe().unwrap());
    config.kill_grace = Duration::from_millis(200);
    let (tx, rx) = channel();
    let (sup, _) = Supervisor::with_config(config, move |e| {
        let _ = tx.send(e);
    })
    .unwrap();
    let parents = cg.parents();
    sup.isolate(cg).unwrap();
    let mut sup = Guarded::new(sup);
    // The test worker's cgroup parents go with it.
    sup.remove_dirs = parents;
    (sup, rx)
}

fn launch(sup: &Supervisor, id: &str, cores: u32, memory_mb: u64, script: &str) -> u32 {
    let spec = ExecutorSpec {
        command: vec!["sh".into(), "-c".into(), script.into()],
        env: vec![],
        cores,
        memory_mb,
        launch: Default::default(),
    };
    match sup.launch(ExecutorId::new(id), FrameworkId::new("fw-1"), spec) {
        Launched::Started { pid } => pid,
        other => panic!("{id}: {other:?}"),
    }
}

fn next_end(rx: &Receiver<ExecEvent>, id: &str) -> ExecutorState {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let e = rx.recv_timeout(left).unwrap_or_else(|_| panic!("{id} did not end in time"));
        if e.executor.as_str() == id && e.state != ExecutorState::Running {
            return e.state;
        }
    }
}

fn real_out_of_memory() {
    let Some((cg, work)) = real(cgroup::DEFAULT_PIDS_MAX) else { return };
    let (sup, rx) = supervisor(cg, work.path());
    let dirs = sup.cgroups().unwrap().dirs("hog");
    // 256 MiB of written bytes in a 32 MiB cgroup without swap.
    launch(&sup, "hog", 1, 32, "python3 -c \"b = b'x' * (256 << 20); print(len(b))\"");
    assert!(dirs.iter().all(|d| d.exists()), "the executor's cgroups exist while it runs");
    let state = next_end(&rx, "hog");
    let ExecutorState::Failed { reason } = &state else { panic!("not failed: {state:?}") };
    assert!(reason.starts_with("out of memory: limit 32 MiB, peak "), "{reason}");
    assert!(dirs.iter().all(|d| !d.exists()), "its cgroups are removed after it ended");
    // A helper killed for memory while the command itself exits 0: the
    // slot is done, not failed.
    let helper = "python3 -c \"b = b'x' * (256 << 20)\"; exit 0";
    launch(&sup, "helper", 1, 32, helper);
    assert_eq!(next_end(&rx, "helper"), ExecutorState::Exited { code: 0 });
    // A run within its limit is not mistaken for one.
    launch(&sup, "small", 1, 32, "python3 -c \"b = b'x' * (4 << 20)\"");
    assert_eq!(next_end(&rx, "small"), ExecutorState::Exited { code: 0 });
}

fn real_cpu_quota() {
    let Some((cg, work)) = real(cgroup::DEFAULT_PIDS_MAX) else { return };
    let (sup, rx) = supervisor(cg, work.path());
    launch(&sup, "busy", 1, 64, "while :; do :; done & while :; do :; done & wait");
    let id = ExecutorId::new("busy");
    std::thread::sleep(Duration::from_millis(500));
    let cpu = || sup.usage(&id).and_then(|u| u.cpu_usec).expect("CPU time from the cgroup");
    let (t0, c0) = (Instant::now(), cpu());
    std::thread::sleep(Duration::from_secs(3));
    let (t1, c1) = (Instant::now(), cpu());
    let cores = (c1 - c0) as f64 / (t1 - t0).as_micros() as f64;
    println!("two busy loops with cores = 1 used {cores:.3} cores");
    // The quota is one core per 100 ms period; a period's overrun is
    // carried by the kernel, hence the margin.
    assert!(cores <= 1.1, "used {cores:.3} cores with a quota of 1");
    assert!(cores > 0.2, "the loops barely ran ({cores:.3} cores): the test measured nothing");
    assert!(sup.kill(&id));
    assert_eq!(next_end(&rx, "busy"), ExecutorState::Killed);
}

fn real_pids_limit() {
    let Some((cg, work)) = real(24) else { return };
    let (sup, rx) = supervisor(cg, work.path());
    // Forks sleepers until fork fails, prints how many it started.
    let script = "python3 -c \"
import os, sys, time
n = 0
for i in range(500):
    try:
        pid = os.fork()
    except OSError as e:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
print(n, flush=True)
time.sleep(60)
\"";
    launch(&sup, "bomb", 1, 256, script);
    let out = sup.executor_dir(&ExecutorId::new("bomb")).join("stdout");
    let deadline = Instant::now() + DEADLINE;
    let forked: u32 = loop {
        if let Some(n) = fs::read_to_string(&out).ok().and_then(|t| t.trim().parse().ok()) {
            break n;
        }
        assert!(Instant::now() < deadline, "the fork loop did not report");
        std::thread::sleep(Duration::from_millis(50));
    };
    let held = sup.cgroups().unwrap().pids("bomb").len();
    println!("forked {forked} before the pids limit of 24; {held} processes in the cgroup");
    assert!(forked < 24, "forked {forked} processes past a limit of 24");
    assert!(held <= 24, "{held} processes in a cgroup limited to 24");
    // The supervisor (the worker) is unharmed: it launches another.
    launch(&sup, "after", 1, 64, "exit 0");
    assert_eq!(next_end(&rx, "after"), ExecutorState::Exited { code: 0 });
    let pids = sup.cgroups().unwrap().pids("bomb");
    assert!(sup.kill(&ExecutorId::new("bomb")));
    assert_eq!(next_end(&rx, "bomb"), ExecutorState::Killed);
    for pid in pids {
        assert!(!Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid), "{pid} survived");
    }
}

fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z')))
        .unwrap_or(true)
}

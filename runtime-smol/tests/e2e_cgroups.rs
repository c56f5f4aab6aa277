//! End-to-end: a worker enforces its executors' limits with this machine's
//! real cgroups (v1 controllers here; v2 where the host mounts it), as
//! root. A real `regent` master, worker and submits on loopback; bounds are
//! generous.
//!
//! * An executor allocating past its memory is killed by the kernel and
//!   reported `FAILED` with `out of memory: limit 32 MiB, ...` by `regent
//!   submit` and in the leader's history.
//! * A worker killed with SIGKILL and restarted over its work directory
//!   keeps its re-adopted executor in the same cgroup with the same limits;
//!   stopping the job removes the cgroup.
//! * `--isolation cgroups` where there are none: the worker exits non-zero
//!   naming why; `--isolation none` starts and says limits are accounted
//!   only.
//! * `--executor-user`: an executor runs as that user and cannot read the
//!   worker's secret; an unknown user is refused at start.
//! * A worker run as a user who is not root (the documented unit's
//!   `User=regent`), in a cgroup delegated to that user (a subtree made
//!   and `chown -R`ed, as systemd's `Delegate=yes` does, the worker moved
//!   into it by a wrapper that then drops to the user): `--isolation auto`
//!   enforces limits with executors' cgroups below the worker's own, and a
//!   restarted worker re-adopts its executor there; the same user without
//!   delegation is refused at start with the message naming
//!   `Delegate=yes`.
//! * An executor's memory in use (from its cgroup) and the worker's work
//!   directory's free space reach the leader's `/api/state` and `/metrics`.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;
use support::cluster::{alive_with_workers, api_state, wait_for, wait_until, Cluster, MasterSpec};

const BOUND: Duration = Duration::from_secs(60);

/// The executor cgroup directories of worker `id` under controller `c`
/// (`/sys/fs/cgroup/<c>/regent/<id>@<digest>/<executor>`, or the v2 tree).
fn executor_cgroups(id: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let top = if root.join("cgroup.controllers").exists() {
        root.join("regent")
    } else {
        root.join("memory").join("regent")
    };
    let prefix = format!("{id}@");
    let mut found = Vec::new();
    for worker in std::fs::read_dir(&top).into_iter().flatten().flatten() {
        if !worker.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        for e in std::fs::read_dir(worker.path()).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                found.push(e.path());
            }
        }
    }
    found
}

/// The memory limit of a memory cgroup directory, in bytes.
fn memory_limit(dir: &Path) -> u64 {
    let file = if dir.join("memory.max").exists() { "memory.max" } else { "memory.limit_in_bytes" };
    std::fs::read_to_string(dir.join(file)).unwrap().trim().parse().unwrap()
}

fn procs(dir: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    let mut v: Vec<u32> = text.split_whitespace().filter_map(|p| p.parse().ok()).collect();
    v.sort_unstable();
    v
}

#[test]
fn an_executor_past_its_memory_is_reported_out_of_memory() {
    let c = Cluster::new("cgroup-oom");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let _worker = c.worker("oom-w1", &[spec.addr()], 2, 1024, &["--isolation", "cgroups"]);
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["oom-w1"])
    });
    let opts = ["--executors", "1", "--cores", "1", "--memory", "32", "--retries", "0"];
    let mut hog = c.submit(
        "hog",
        &[spec.addr()],
        &opts,
        &["python3", "-c", "b = b'x' * (256 << 20); print(len(b))"],
    );
    let status = hog.wait_exit(BOUND);
    let out = hog.stdout();
    assert!(!status.success(), "an executor killed for memory fails the job: {out}");
    assert!(out.contains("out of memory: limit 32 MiB, peak"), "{out}");
    // The leader's view says the same.
    let state = api_state(&spec.http_addr()).expect("the master answers");
    assert!(state.to_string().contains("out of memory: limit 32 MiB"), "{state}");
    // Its cgroup went with it.
    wait_until(BOUND, "the executor's cgroup removed", || executor_cgroups("oom-w1").is_empty());
}

#[test]
fn a_restarted_worker_keeps_its_executors_cgroup_and_limits() {
    let c = Cluster::new("cgroup-restart");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let masters = [spec.addr()];
    let mut worker = c.worker("keep-w1", &masters, 2, 1024, &[]);
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["keep-w1"])
    });
    // A short failover timeout: once the submit is gone, the leader ends
    // its executor within a second.
    let opts = ["--executors", "1", "--cores", "1", "--memory", "48", "--failover-timeout", "1000"];
    let mut job = c.submit("long", &masters, &opts, &["sleep", "600"]);
    let dir = wait_for(BOUND, "the executor's cgroup", || {
        let dirs = executor_cgroups("keep-w1");
        match dirs.as_slice() {
            [one] if !procs(one).is_empty() => Ok(one.clone()),
            other => Err(format!("{other:?}")),
        }
    });
    assert_eq!(memory_limit(&dir), 48 << 20);
    let before = procs(&dir);
    worker.kill9();
    let _worker = c.worker("keep-w1", &masters, 2, 1024, &[]);
    wait_for(BOUND, "the restarted worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["keep-w1"])
    });
    // The restart cleaned nothing of its re-adopted executor (its cleanup
    // of leftovers runs before the worker registers).
    assert_eq!(executor_cgroups("keep-w1"), vec![dir.clone()]);
    assert_eq!(memory_limit(&dir), 48 << 20, "the limit is kept across the restart");
    assert_eq!(procs(&dir), before, "the executor's processes stay in its cgroup");
    job.assert_running("the job still runs after the worker restart");
    // The job going away ends the executor and removes its cgroup.
    job.sigterm();
    let _ = job.wait_exit(BOUND);
    wait_until(BOUND, "the executor's cgroup removed", || !dir.exists());
}

#[test]
fn isolation_cgroups_without_cgroups_refuses_to_start_and_none_says_accounted_only() {
    let c = Cluster::new("cgroup-refuse");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let nowhere = c.path("no-cgroups");
    std::fs::create_dir_all(&nowhere).unwrap();
    let nowhere = nowhere.to_str().unwrap();
    let mut refused = c.worker(
        "ref-w1",
        &[spec.addr()],
        1,
        256,
        &["--isolation", "cgroups", "--cgroup-root", nowhere],
    );
    let status = refused.wait_exit(BOUND);
    assert!(!status.success());
    let err = refused.stderr();
    assert!(err.contains("no cgroup file system under"), "{err}");
    assert!(err.contains("--isolation none"), "{err}");
    let mut none = c.worker(
        "ref-w2",
        &[spec.addr()],
        1,
        256,
        &["--isolation", "none", "--cgroup-root", nowhere],
    );
    wait_for(BOUND, "the worker with --isolation none ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["ref-w2"])
    });
    let err = none.stderr();
    assert!(err.contains("accounted only, not enforced"), "{err}");
    none.sigterm();
    let _ = none.wait_exit(BOUND);
}

#[test]
fn executors_usage_and_the_work_dirs_space_reach_the_leader() {
    let c = Cluster::new("cgroup-usage");
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let masters = [spec.addr()];
    let _worker = c.worker("use-w1", &masters, 2, 1024, &[]);
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["use-w1"])
    });
    // Holds 24 MiB of written memory.
    let opts = ["--executors", "1", "--cores", "1", "--memory", "64", "--failover-timeout", "1000"];
    let hold = "import time\nb = b'x' * (24 << 20)\ntime.sleep(600)";
    let mut job = c.submit("hold", &masters, &opts, &["python3", "-c", hold]);
    // Samples go every 10 s at most: within a generous bound the leader
    // shows the executor's memory and the worker's disk.
    let (memory, free) = wait_for(BOUND, "the executor's usage at the leader", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        let x = state["executors"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["state"] == "RUNNING"))
            .ok_or("no running executor")?;
        let memory = x["memory_bytes"].as_u64().ok_or(format!("no usage yet: {x}"))?;
        if memory < 24 << 20 {
            return Err(format!("{memory} bytes so far"));
        }
        let w = &state["workers"][0]["usage"];
        let free = w["work_dir_free_bytes"].as_u64().ok_or(format!("no disk figure: {w}"))?;
        Ok((memory, free))
    });
    assert!(memory < 64 << 20, "{memory} bytes: more than its limit?");
    assert!(free > 0);
    let (code, metrics) = support::cluster::http_get(&spec.http_addr(), "/metrics").unwrap();
    assert_eq!(code, 200);
    let line = metrics
        .lines()
        .find(|l| l.starts_with("regent_executor_memory_in_use_bytes "))
        .expect("the usage gauge");
    let value: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(value >= 24 << 20, "{line}");
    job.sigterm();
    let _ = job.wait_exit(BOUND);
}

#[test]
fn a_worker_with_executor_user_runs_executors_as_that_user_away_from_its_secret() {
    let c = Cluster::new("run-as");
    let user = ThrowawayUser::new("regent-e");
    let name = user.name.clone();
    // The cluster secret: root's, 0600.
    let secret = c.path("secret");
    std::fs::write(&secret, "run-as-test-secret-0123456789abcdef\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let secret = secret.to_str().unwrap().to_owned();
    let spec = MasterSpec::new("m1", &["--recovery", "none", "--secret-file", &secret]);
    let _master = c.master(&spec);
    let masters = [spec.addr()];
    let _worker = c.worker(
        "user-w1",
        &masters,
        2,
        1024,
        &["--secret-file", &secret, "--executor-user", &name],
    );
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["user-w1"])
    });
    let script =
        format!("id -un; if cat {secret} 2>/dev/null; then echo READ; else echo denied; fi");
    let opts = ["--executors", "1", "--cores", "1", "--memory", "32", "--secret-file", &secret];
    let mut job = c.submit("whoami", &masters, &opts, &["sh", "-c", &script]);
    assert!(job.wait_exit(BOUND).success(), "{}", job.stderr());
    let dirs: Vec<_> =
        std::fs::read_dir(c.work_dir("user-w1").join("executors")).unwrap().flatten().collect();
    assert_eq!(dirs.len(), 1);
    let out = std::fs::read_to_string(dirs[0].path().join("stdout")).unwrap();
    assert_eq!(out, format!("{name}\ndenied\n"), "runs as {name}, cannot read the secret");
    // A worker that is not root, or a user that does not exist, is refused
    // at start with the reason.
    let mut refused = c.worker(
        "user-w2",
        &masters,
        1,
        256,
        &["--secret-file", &secret, "--executor-user", "no-such-user-here"],
    );
    assert!(!refused.wait_exit(BOUND).success());
    assert!(refused.stderr().contains("no such user"), "{}", refused.stderr());
}

/// useradd and userdel lock /etc/passwd: one at a time in this suite.
static PASSWD: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A throwaway system user (removed on drop) and its uid and gid.
struct ThrowawayUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl ThrowawayUser {
    fn new(prefix: &str) -> ThrowawayUser {
        let name = format!("{prefix}{}", std::process::id());
        let _one = PASSWD.lock().unwrap_or_else(|e| e.into_inner());
        let made = std::process::Command::new("useradd")
            .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", &name])
            .status()
            .expect("useradd runs");
        assert!(made.success(), "useradd {name}");
        let id = |flag: &str| -> u32 {
            let out = std::process::Command::new("id").args([flag, &name]).output().unwrap();
            String::from_utf8(out.stdout).unwrap().trim().parse().unwrap()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        ThrowawayUser { name, uid, gid }
    }
}

impl Drop for ThrowawayUser {
    fn drop(&mut self) {
        let _one = PASSWD.lock().unwrap_or_else(|e| e.into_inner());
        let _ = std::process::Command::new("userdel").arg(&self.name).status();
    }
}

/// A cgroup delegated to a user, as systemd's `Delegate=yes` makes one: a
/// child of this test process's own cgroup in every hierarchy the worker
/// uses (v1: memory, cpu, cpuacct, pids, each where /proc/self/cgroup
/// places us; v2: a child of the root), `chown -R`ed to the user. On drop
/// every process left in it is killed and it is removed, deepest first.
struct DelegatedCgroup {
    /// One per hierarchy, memory's first.
    dirs: Vec<PathBuf>,
    v2: bool,
}

/// This test process's own cgroup in each hierarchy a worker uses, from
/// /proc/self/cgroup: memory, cpu, cpuacct and pids where mounted (v1), or
/// the unified one (v2); memory's first.
fn own_cgroups() -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let own_in = |wanted: &dyn Fn(&str, &str) -> bool| -> String {
        let line = own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (id, cs, path) = (parts.next()?, parts.next()?, parts.next()?);
            wanted(id, cs).then(|| path.to_owned())
        });
        line.unwrap_or_default()
    };
    // `/a/b` below a mount; `/` is the mount itself (no trailing slash, as
    // the worker names it).
    let under = |mount: PathBuf, own: String| -> PathBuf {
        own.split('/').filter(|p| !p.is_empty()).fold(mount, |dir, p| dir.join(p))
    };
    if root.join("cgroup.controllers").exists() {
        return vec![under(root.to_owned(), own_in(&|id, cs| id == "0" && cs.is_empty()))];
    }
    let mut dirs = Vec::new();
    for c in ["memory", "cpu", "cpuacct", "pids"] {
        let mount = root.join(c);
        if mount.join("cgroup.procs").exists() {
            let dir = under(mount, own_in(&|_, cs| cs.split(',').any(|have| have == c)));
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs
}

impl DelegatedCgroup {
    /// Made and `chown -R`ed to `user`.
    fn new(name: &str, user: &ThrowawayUser) -> DelegatedCgroup {
        let made = Self::made(name);
        for dir in &made.dirs {
            let owner = format!("{}:{}", user.uid, user.gid);
            let chown =
                std::process::Command::new("chown").args(["-R", &owner]).arg(dir).status().unwrap();
            assert!(chown.success(), "chown -R {owner} {}", dir.display());
        }
        made
    }

    /// Made, root's (as systemd makes a unit's cgroups on v1 without
    /// delegating them to its `User=`).
    fn made(name: &str) -> DelegatedCgroup {
        let root = Path::new("/sys/fs/cgroup");
        // v2: below the root (a cgroup of ours holds processes, so it
        // could not enable controllers for a child).
        let v2 = root.join("cgroup.controllers").exists();
        let dirs = if v2 {
            vec![root.join(name)]
        } else {
            own_cgroups().into_iter().map(|d| d.join(name)).collect()
        };
        let made = DelegatedCgroup { dirs, v2 };
        for dir in &made.dirs {
            std::fs::create_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        }
        made
    }

    /// The memory hierarchy's delegated cgroup.
    fn memory(&self) -> &Path {
        &self.dirs[0]
    }

    /// A wrapper for [`Cluster::worker_via`]: as root, moves the process
    /// into the delegated cgroup (on v2 into its `supervisor` leaf once the
    /// worker made one, as systemd's `DelegateSubgroup=supervisor` would),
    /// then runs `pre` (as root, in those cgroups: a unit's
    /// `ExecStartPre=+`), then `exec`s the worker as `user`.
    fn wrapper(&self, user: &ThrowawayUser, pre: Option<&str>) -> Vec<String> {
        let mut script = String::new();
        for dir in &self.dirs {
            let leaf = dir.join("supervisor");
            let target = if self.v2 && leaf.exists() { leaf } else { dir.clone() };
            script.push_str(&format!("echo $$ > '{}/cgroup.procs' && ", target.display()));
        }
        if let Some(pre) = pre {
            script.push_str(pre);
            script.push_str(" && ");
        }
        script.push_str("exec \"$@\"");
        let (uid, gid) = (user.uid.to_string(), user.gid.to_string());
        let mut w: Vec<String> = ["sh", "-c", &script, "sh"].map(str::to_owned).to_vec();
        w.extend(
            ["setpriv", "--reuid", &uid, "--regid", &gid, "--clear-groups"].map(str::to_owned),
        );
        w
    }

    /// Every cgroup below `dir`, deepest first, `dir` last.
    fn tree(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(Self::tree(&e.path()));
            }
        }
        out.push(dir.to_owned());
        out
    }
}

impl Drop for DelegatedCgroup {
    fn drop(&mut self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        for dir in &self.dirs {
            loop {
                let tree = Self::tree(dir);
                for d in &tree {
                    for pid in procs(d) {
                        if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                            let _ =
                                rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                        }
                    }
                }
                for d in &tree {
                    let _ = std::fs::remove_dir(d);
                }
                if !dir.exists() || std::time::Instant::now() >= deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// The executor cgroups of worker `id` below `top` (`<top>/regent/<id>@<digest>/<executor>`).
fn executor_cgroups_below(top: &Path, id: &str) -> Vec<PathBuf> {
    let prefix = format!("{id}@");
    let mut found = Vec::new();
    for worker in std::fs::read_dir(top.join("regent")).into_iter().flatten().flatten() {
        if !worker.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        for e in std::fs::read_dir(worker.path()).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                found.push(e.path());
            }
        }
    }
    found
}

/// The real uid of process `pid`.
fn uid_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("Uid:")?.split_whitespace().next()?.parse().ok())
}

#[test]
fn a_worker_run_as_a_user_in_a_delegated_cgroup_puts_executors_below_its_own() {
    let user = ThrowawayUser::new("regent-d");
    let delegated =
        DelegatedCgroup::new(&format!("regent-e2e-delegated-{}", std::process::id()), &user);
    let c = Cluster::new("cgroup-delegated");
    // The user reaches its work directories (not the rest of the test's).
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(c.dir(), std::fs::Permissions::from_mode(0o711)).unwrap();
    for id in ["dlg-w1", "dlg-w2"] {
        let work = c.work_dir(id);
        std::fs::create_dir(&work).unwrap();
        std::os::unix::fs::chown(&work, Some(user.uid), Some(user.gid)).unwrap();
    }
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let masters = [spec.addr()];
    let wrapper = delegated.wrapper(&user, None);
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    // The default isolation, as the unit runs it.
    let mut worker = c.worker_via("dlg-w1", &wrapper, &masters, 2, 1024, &[], &[]);
    wait_for(BOUND, "the delegated worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["dlg-w1"]).map_err(|e| format!("{e}; {}", worker.stderr()))
    });
    assert!(uid_of(worker.pid()) == Some(user.uid), "the worker runs as {}", user.name);
    assert!(worker.stderr().contains("delegated=true"), "{}", worker.stderr());
    let opts = ["--executors", "1", "--cores", "1", "--memory", "48", "--failover-timeout", "1000"];
    let mut job = c.submit("long", &masters, &opts, &["sleep", "600"]);
    let dir = wait_for(BOUND, "the executor's cgroup below the worker's own", || {
        let dirs = executor_cgroups_below(delegated.memory(), "dlg-w1");
        match dirs.as_slice() {
            [one] if !procs(one).is_empty() => Ok(one.clone()),
            other => Err(format!("{other:?}")),
        }
    });
    assert_eq!(memory_limit(&dir), 48 << 20, "the memory limit is applied");
    let before = procs(&dir);
    for pid in &before {
        assert_eq!(uid_of(*pid), Some(user.uid), "the executor runs as {}", user.name);
    }
    // Nothing in the machine-wide layout, which the user could not write.
    assert!(executor_cgroups("dlg-w1").is_empty());
    // Every controller's cgroup of the executor is below the worker's own.
    for own in &delegated.dirs {
        let found = executor_cgroups_below(own, "dlg-w1");
        assert_eq!(found.len(), 1, "{}: {found:?}", own.display());
        assert_eq!(procs(&found[0]), before, "{}", found[0].display());
    }
    // A restart (kill -9, started again in the same delegated cgroup)
    // re-adopts the executor in the same cgroup with the same limit.
    worker.kill9();
    let wrapper = delegated.wrapper(&user, None);
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let mut worker = c.worker_via("dlg-w1", &wrapper, &masters, 2, 1024, &[], &[]);
    wait_for(BOUND, "the restarted delegated worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["dlg-w1"]).map_err(|e| format!("{e}; {}", worker.stderr()))
    });
    assert_eq!(executor_cgroups_below(delegated.memory(), "dlg-w1"), vec![dir.clone()]);
    assert_eq!(memory_limit(&dir), 48 << 20, "the limit is kept across the restart");
    assert_eq!(procs(&dir), before, "the executor's processes stay in its cgroup");
    job.assert_running("the job still runs after the worker restart");
    job.sigterm();
    let _ = job.wait_exit(BOUND);
    wait_until(BOUND, "the executor's cgroup removed", || !dir.exists());

    // The same user without a delegated cgroup (in this test's own
    // cgroups, which root owns): refused at start, naming the fix.
    let setpriv = [
        "setpriv",
        "--reuid",
        &user.uid.to_string(),
        "--regid",
        &user.gid.to_string(),
        "--clear-groups",
    ]
    .map(|s| s.to_owned());
    let setpriv: Vec<&str> = setpriv.iter().map(String::as_str).collect();
    let mut refused = c.worker_via("dlg-w2", &setpriv, &masters, 1, 256, &[], &[]);
    assert!(!refused.wait_exit(BOUND).success());
    let err = refused.stderr();
    let own_memory = own_cgroups().remove(0);
    let fix = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "run the worker under systemd with Delegate=yes (as deploy/regent-worker.service does)"
    } else {
        "run the worker under systemd with Delegate=yes and, on cgroup v1, ExecStartPre=+regent \
         delegate-cgroups --user USER (as deploy/regent-worker.service does)"
    };
    let expected = format!(
        "cannot isolate executors with cgroups: the worker runs as uid {}, not root, and its own \
         cgroup {} is not delegated to it (the directory or its cgroup.procs is not writable by \
         this user): {fix}, or have root chown -R that cgroup to this user; use --isolation none \
         to run with limits accounted only",
        user.uid,
        own_memory.display()
    );
    assert!(err.contains(&expected), "expected {expected:?} in:\n{err}");
    worker.sigterm();
    let _ = worker.wait_exit(BOUND);
}

#[test]
fn the_units_v1_recipe_hands_its_cgroups_to_the_worker_user_with_delegate_cgroups() {
    let user = ThrowawayUser::new("regent-v");
    let c = Cluster::new("cgroup-hand-over");
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        // cgroup v2: Delegate=yes does it; the command says so and does
        // nothing.
        let out = c.run(&["delegate-cgroups", "--user", &user.name], BOUND);
        assert!(out.status.success());
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(said.contains("nothing to hand over"), "{said}");
        return;
    }
    // systemd on v1 makes the unit's cgroups (MemoryAccounting= and the
    // like) but gives them to no User=: the unit's ExecStartPre=+ does, as
    // root, in the cgroups the worker then starts in.
    let unit = DelegatedCgroup::made(&format!("regent-e2e-unit-{}", std::process::id()));
    use std::os::unix::fs::MetadataExt as _;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(c.dir(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let work = c.work_dir("unit-w1");
    std::fs::create_dir(&work).unwrap();
    std::os::unix::fs::chown(&work, Some(user.uid), Some(user.gid)).unwrap();
    let spec = MasterSpec::new("m1", &["--recovery", "none"]);
    let _master = c.master(&spec);
    let masters = [spec.addr()];
    // The unit's own ExecStartPre=+ line, with this build's binary and the
    // throwaway user for its User=.
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/regent-worker.service");
    let file = std::fs::read_to_string(file).unwrap();
    let line = |key: &str| file.lines().find_map(|l| l.strip_prefix(key)).map(str::to_owned);
    let unit_user = line("User=").expect("the unit runs the worker as a user");
    let pre = line("ExecStartPre=+").expect("the unit hands its v1 cgroups over as root");
    let user_arg = format!("--user {unit_user}");
    assert!(pre.starts_with("/usr/local/bin/regent delegate-cgroups "), "{pre}");
    assert!(pre.ends_with(&user_arg), "{pre} names the unit's User=");
    let said = c.path("delegate-cgroups.out");
    let pre = format!(
        "{} > '{}'",
        pre.replace("/usr/local/bin/regent", support::cluster::BIN)
            .replace(&user_arg, &format!("--user {}", user.name)),
        said.display()
    );
    let wrapper = unit.wrapper(&user, Some(&pre));
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let mut worker = c.worker_via("unit-w1", &wrapper, &masters, 2, 1024, &[], &[]);
    wait_for(BOUND, "the worker ALIVE", || {
        let state = api_state(&spec.http_addr()).ok_or("the master does not answer")?;
        alive_with_workers(&state, &["unit-w1"]).map_err(|e| format!("{e}; {}", worker.stderr()))
    });
    let said = std::fs::read_to_string(&said).unwrap();
    for dir in &unit.dirs {
        assert!(said.contains(&format!("{} handed to {}", dir.display(), user.name)), "{said}");
        assert_eq!(std::fs::metadata(dir).unwrap().uid(), user.uid);
        assert_eq!(std::fs::metadata(dir.join("cgroup.procs")).unwrap().uid(), user.uid);
    }
    // The unit's own limit stays root's.
    let limit = unit.memory().join("memory.limit_in_bytes");
    assert_eq!(std::fs::metadata(&limit).unwrap().uid(), 0);
    let opts = ["--executors", "1", "--cores", "1", "--memory", "40", "--failover-timeout", "1000"];
    let mut job = c.submit("long", &masters, &opts, &["sleep", "600"]);
    let dir = wait_for(BOUND, "the executor's cgroup below the unit's", || {
        let dirs = executor_cgroups_below(unit.memory(), "unit-w1");
        match dirs.as_slice() {
            [one] if !procs(one).is_empty() => Ok(one.clone()),
            other => Err(format!("{other:?}")),
        }
    });
    assert_eq!(memory_limit(&dir), 40 << 20);
    job.sigterm();
    let _ = job.wait_exit(BOUND);
    wait_until(BOUND, "the executor's cgroup removed", || !dir.exists());
    worker.sigterm();
    let _ = worker.wait_exit(BOUND);
}

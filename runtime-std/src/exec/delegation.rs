//! A worker that is not root puts its executors' cgroups below its own
//! cgroup, which must have been delegated to it (systemd `Delegate=yes`, or
//! a subtree root `chown`ed to its user).
//!
//! ```text
//! /proc/self/cgroup           v2:  0::/system.slice/regent-worker.service
//!                             v1:  4:memory:/system.slice/regent-worker.service
//!                                  1:cpu,cpuacct:/system.slice/regent-worker.service
//!
//! the delegated cgroup <own>  v2:  <root>/system.slice/regent-worker.service
//!                             v1:  <root>/<controller>/system.slice/regent-worker.service
//! the worker itself           v2:  <own>/supervisor   (moved there, see below)
//!                             v1:  <own>              (stays)
//! its executors               v2:  <own>/regent/<worker>/<executor>
//!                             v1:  <root>/<controller>/<own>/regent/<worker>/<executor>
//! ```
//!
//! The own cgroup is read per hierarchy from `/proc/self/cgroup` (on v1
//! every controller may place the process elsewhere). Its path is taken
//! relative to the mount under `--cgroup-root`, as it is on a host and in
//! a container with its own cgroup namespace.
//!
//! **cgroup v2's no-internal-processes rule.** Controllers can be enabled
//! for a cgroup's children only while the cgroup itself holds no process,
//! so a delegated worker first creates the leaf `<own>/supervisor` and
//! moves every process of `<own>` (itself, and a wrapper that started it)
//! there, as systemd's delegation documentation describes. A worker that
//! already runs in a cgroup named `supervisor` (systemd's
//! `DelegateSubgroup=supervisor`, or the previous process of a worker
//! started over it) takes that cgroup's parent as its own. v1 has no such
//! rule; the same naming is understood there so that both agree.
//!
//! **Delegated** means that this user may write the own cgroup's directory
//! and its `cgroup.procs` (by the mode bits, for its uid and its primary
//! gid): what systemd's `Delegate=yes` with `User=` sets up, and what
//! `chown -R USER <own>` does. A worker that is not root and whose own
//! cgroup is not delegated is refused with the fix named
//! ([`super::cgroup::CgroupError::NotDelegated`]).
//!
//! **systemd on cgroup v1.** On the legacy hierarchy systemd delegates no
//! controller to a unit whose process drops privileges (`User=`): only its
//! `name=systemd` tree. There root hands the unit's own memory, cpu,
//! cpuacct and pids cgroups to the worker's user before it starts
//! (`ExecStartPre=+regent delegate-cgroups --user regent`, [`hand_over`]):
//! the directory, its `cgroup.procs` and `tasks`, as systemd's delegation
//! does on v2, and nothing else (the unit's own limits stay root's).

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

/// The leaf a delegated worker runs in on cgroup v2 (and that
/// `DelegateSubgroup=` names in the unit).
pub const SUPERVISOR: &str = "supervisor";

/// Who opens a worker's cgroups: what [`super::cgroup::Cgroups::open`]
/// reads from the process itself ([`Opener::this_process`]); tests pass
/// their own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opener {
    /// The effective uid: 0 (root) keeps the machine-wide layout under
    /// `<root>/regent`; any other uses its delegated cgroup.
    pub uid: u32,
    /// The effective gid (a group-writable delegated cgroup counts).
    pub gid: u32,
    /// The process id (moved into `<own>/supervisor` on v2).
    pub pid: u32,
    /// The text of the process's `/proc/self/cgroup`.
    pub proc_cgroup: String,
}

impl Opener {
    /// This process: its effective uid and gid, its pid and its
    /// `/proc/self/cgroup`.
    pub fn this_process() -> io::Result<Opener> {
        Ok(Opener {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
            pid: std::process::id(),
            proc_cgroup: fs::read_to_string("/proc/self/cgroup")?,
        })
    }

    /// Whether this is root.
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// The cgroup of this process on the unified hierarchy (`0::/path`).
    pub fn own_v2(&self) -> Option<&str> {
        self.lines().find(|(id, controllers, _)| *id == "0" && controllers.is_empty()).map(|l| l.2)
    }

    /// The cgroup of this process in the v1 hierarchy of `controller`
    /// (`N:cpu,cpuacct:/path` names two).
    pub fn own_v1(&self, controller: &str) -> Option<&str> {
        self.lines()
            .find(|(_, controllers, _)| controllers.split(',').any(|c| c == controller))
            .map(|l| l.2)
    }

    fn lines(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.proc_cgroup.lines().filter_map(|l| {
            let (id, rest) = l.split_once(':')?;
            let (controllers, path) = rest.split_once(':')?;
            Some((id, controllers, path))
        })
    }
}

/// Where a cgroup path from `/proc/self/cgroup` lies under `mount` (the
/// hierarchy's mount point): `None` when it is not a plain absolute path
/// (`..`, or the ` (deleted)` the kernel appends to a removed cgroup).
pub fn dir_under(mount: &Path, own: &str) -> Option<PathBuf> {
    let own = Path::new(own);
    if !own.is_absolute() || own.to_string_lossy().ends_with(" (deleted)") {
        return None;
    }
    let mut dir = mount.to_owned();
    for c in own.components() {
        match c {
            Component::RootDir => {}
            Component::Normal(name) => dir.push(name),
            _ => return None,
        }
    }
    Some(dir)
}

/// The delegated cgroup for a worker whose own cgroup is `own` under
/// `mount`, and whether the worker already runs in its leaf
/// [`SUPERVISOR`] below it.
pub fn delegated(mount: &Path, own: &str) -> Option<(PathBuf, bool)> {
    let dir = dir_under(mount, own)?;
    match dir.file_name() {
        Some(name) if name == SUPERVISOR && dir != mount => {
            Some((dir.parent().expect("a file name has a parent").to_owned(), true))
        }
        _ => Some((dir, false)),
    }
}

/// Whether `dir` and its `cgroup.procs` are writable by `who` by their
/// mode bits (owner, primary group, others): what delegation grants.
/// Root may write anything.
pub fn writable_by(dir: &Path, who: &Opener) -> bool {
    if who.is_root() {
        return true;
    }
    let writable = |path: &Path| {
        fs::metadata(path).is_ok_and(|m| {
            let mode = m.mode();
            (m.uid() == who.uid && mode & 0o200 != 0)
                || (m.gid() == who.gid && mode & 0o020 != 0)
                || mode & 0o002 != 0
        })
    };
    writable(dir) && writable(&dir.join("cgroup.procs"))
}

/// Creates `<own>/supervisor` and moves every process of `own` there
/// (`who` first, which must succeed; others are moved where the kernel
/// lets this user), so that `own` holds no process and may enable
/// controllers for its children (cgroup v2). Returns the leaf.
pub fn move_into_supervisor(own: &Path, who: &Opener) -> io::Result<PathBuf> {
    let leaf = own.join(SUPERVISOR);
    match fs::create_dir(&leaf) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let procs = leaf.join("cgroup.procs");
    write_file(&procs, &who.pid.to_string())?;
    let others = fs::read_to_string(own.join("cgroup.procs")).unwrap_or_default();
    for pid in others.split_whitespace().filter(|p| *p != who.pid.to_string()) {
        // A process that is gone, or not this user's, stays; enabling the
        // controllers then fails with EBUSY, which says so.
        let _ = write_file(&procs, pid);
    }
    Ok(leaf)
}

/// Why [`hand_over`] cannot hand a cgroup over.
#[derive(Debug, thiserror::Error)]
pub enum HandOverError {
    /// The process's cgroup in a hierarchy is that hierarchy's root (or
    /// unknown): handing it over would give the user the whole machine.
    #[error("this process's {controller} cgroup is the root of {} (or /proc/self/cgroup names none): refusing to hand the whole hierarchy over; under systemd set MemoryAccounting=yes, CPUAccounting=yes and TasksAccounting=yes so that the unit gets cgroups of its own", mount.display())]
    HierarchyRoot {
        /// `memory`, `cpu`, `cpuacct` or `pids`.
        controller: &'static str,
        /// The hierarchy's mount point.
        mount: PathBuf,
    },
    /// A `chown` failed.
    #[error("cannot give {} to uid {uid}: {source}", path.display())]
    Chown {
        /// The file.
        path: PathBuf,
        /// The user.
        uid: u32,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

crate::error::into_report!(HandOverError);

/// On cgroup v1, gives user `uid`:`gid` the cgroup `who` is in, in every
/// hierarchy a worker uses (`controllers`, mounted at `<root>/<controller>`):
/// the directory and its `cgroup.procs` and `tasks`. A cgroup named
/// `supervisor` or `.control` (systemd's for its own helper processes)
/// stands for its parent, as in [`delegated`]. Returns the directories
/// handed over; nothing on a host without v1 controllers.
pub fn hand_over(
    root: &Path,
    controllers: &[&'static str],
    who: &Opener,
    uid: u32,
    gid: u32,
) -> Result<Vec<PathBuf>, HandOverError> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for &controller in controllers {
        let mount = root.join(controller);
        let dir = who
            .own_v1(controller)
            .and_then(|own| {
                let own = own.strip_suffix("/.control").unwrap_or(own);
                delegated(&mount, own)
            })
            .map(|(dir, _)| dir)
            .filter(|dir| *dir != mount && dir.is_dir());
        let Some(dir) = dir else {
            return Err(HandOverError::HierarchyRoot { controller, mount });
        };
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    for dir in &dirs {
        for path in [dir.clone(), dir.join("cgroup.procs"), dir.join("tasks")] {
            if path != *dir && !path.exists() {
                continue;
            }
            std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                .map_err(|source| HandOverError::Chown { path, uid, source })?;
        }
    }
    Ok(dirs)
}

/// Writes `value` to a cgroup file in one `write` (a fake tree's file is
/// created). Here, below [`super::cgroup`], so that moving a process into
/// a delegated cgroup needs nothing of the module that uses it.
pub fn write_file(path: &Path, value: &str) -> io::Result<()> {
    let mut f = fs::OpenOptions::new().write(true).create(true).truncate(true).open(path)?;
    f.write_all(value.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "9:name=systemd:/\n8:pids:/a/b\n4:memory:/process_api/74ba\n\
                      2:cpu,cpuacct:/x\n0::/\n";

    fn opener(uid: u32, text: &str) -> Opener {
        Opener { uid, gid: uid, pid: 4242, proc_cgroup: text.to_owned() }
    }

    #[test]
    fn own_cgroups_are_read_per_hierarchy() {
        let o = opener(1000, V1);
        assert_eq!(o.own_v1("memory"), Some("/process_api/74ba"));
        assert_eq!(o.own_v1("pids"), Some("/a/b"));
        // Co-mounted controllers share a line.
        assert_eq!(o.own_v1("cpu"), Some("/x"));
        assert_eq!(o.own_v1("cpuacct"), Some("/x"));
        assert_eq!(o.own_v1("cpuset"), None);
        // `name=systemd` is no controller named `systemd`.
        assert_eq!(o.own_v1("systemd"), None);
        assert_eq!(o.own_v2(), Some("/"));
        let v2 = opener(1000, "0::/system.slice/regent-worker.service\n");
        assert_eq!(v2.own_v2(), Some("/system.slice/regent-worker.service"));
        assert_eq!(v2.own_v1("memory"), None);
        assert_eq!(opener(0, "").own_v2(), None);
    }

    #[test]
    fn the_delegated_cgroup_is_the_own_one_or_the_parent_of_its_supervisor_leaf() {
        let m = Path::new("/sys/fs/cgroup");
        let unit = m.join("system.slice/regent-worker.service");
        assert_eq!(
            delegated(m, "/system.slice/regent-worker.service"),
            Some((unit.clone(), false))
        );
        assert_eq!(
            delegated(m, "/system.slice/regent-worker.service/supervisor"),
            Some((unit, true))
        );
        assert_eq!(delegated(m, "/"), Some((m.to_owned(), false)));
        assert_eq!(delegated(m, "/a/../b"), None);
        assert_eq!(delegated(m, "relative"), None);
        assert_eq!(delegated(m, "/gone (deleted)"), None);
        // A top-level leaf: the root itself (which no user but root may
        // write).
        assert_eq!(delegated(m, "/supervisor"), Some((m.to_owned(), true)));
    }

    #[test]
    fn delegation_is_write_access_for_the_user_to_the_cgroup_and_its_procs() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("own");
        fs::create_dir(&own).unwrap();
        fs::write(own.join("cgroup.procs"), "").unwrap();
        // Owned by a user who is not root (a test run as root gives it to
        // a made-up one; no process of that uid is needed).
        if rustix::process::geteuid().is_root() {
            for p in [own.clone(), own.join("cgroup.procs")] {
                std::os::unix::fs::chown(&p, Some(4000), Some(4000)).unwrap();
            }
        }
        let me = fs::metadata(&own).unwrap();
        let (uid, gid) = (me.uid(), me.gid());
        let who = Opener { uid, gid, pid: 1, proc_cgroup: String::new() };
        // Root may write anything; the owner may; another user may not.
        assert!(writable_by(&own, &Opener { uid: 0, ..who.clone() }));
        let set = |p: &Path, mode| fs::set_permissions(p, fs::Permissions::from_mode(mode));
        set(&own, 0o755).unwrap();
        set(&own.join("cgroup.procs"), 0o644).unwrap();
        assert!(writable_by(&own, &who));
        let stranger = Opener { uid: uid + 1, gid: gid + 1, ..who.clone() };
        assert!(!writable_by(&own, &stranger));
        // Its procs file read-only: not delegated (systemd chowns both).
        set(&own.join("cgroup.procs"), 0o444).unwrap();
        assert!(!writable_by(&own, &who));
        // Group-writable for the user's primary group.
        set(&own, 0o775).unwrap();
        set(&own.join("cgroup.procs"), 0o664).unwrap();
        assert!(writable_by(&own, &Opener { uid: uid + 1, ..who.clone() }));
        assert!(!writable_by(&own, &stranger));
        assert!(!writable_by(&dir.path().join("missing"), &who));
    }

    #[test]
    fn root_hands_over_its_own_v1_cgroups_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let unit = "system.slice/regent-worker.service";
        for c in ["memory", "cpu", "pids"] {
            fs::create_dir_all(root.join(c).join(unit)).unwrap();
            fs::write(root.join(c).join("cgroup.procs"), "").unwrap();
            fs::write(root.join(c).join(unit).join("cgroup.procs"), "").unwrap();
            fs::write(root.join(c).join(unit).join("tasks"), "").unwrap();
            fs::write(root.join(c).join(unit).join("memory.limit_in_bytes"), "").unwrap();
        }
        // Root as a test runner may give files away; anyone may "give"
        // them to themselves.
        let me = fs::metadata(root).unwrap();
        let (uid, gid) =
            if rustix::process::geteuid().is_root() { (4000, 4000) } else { (me.uid(), me.gid()) };
        let text = format!(
            "9:name=systemd:/{unit}/.control\n8:pids:/{unit}\n4:memory:/{unit}/.control\n\
             1:cpu,cpuacct:/{unit}\n"
        );
        let who = Opener { uid: 0, gid: 0, pid: 1, proc_cgroup: text.clone() };
        let dirs = hand_over(root, &["memory", "cpu", "pids"], &who, uid, gid).unwrap();
        let units: Vec<PathBuf> =
            ["memory", "cpu", "pids"].iter().map(|c| root.join(c).join(unit)).collect();
        assert_eq!(dirs, units);
        for d in &units {
            for f in ["", "cgroup.procs", "tasks"] {
                assert_eq!(fs::metadata(d.join(f)).unwrap().uid(), uid, "{d:?} {f}");
            }
            // The unit's own limits stay root's.
            assert_eq!(fs::metadata(d.join("memory.limit_in_bytes")).unwrap().uid(), me.uid());
        }
        // The worker then finds them delegated.
        let worker = Opener { uid, gid, pid: 2, proc_cgroup: text.replace("/.control", "") };
        for c in ["memory", "cpu", "pids"] {
            let (own, _) = delegated(&root.join(c), worker.own_v1(c).unwrap()).unwrap();
            assert!(writable_by(&own, &worker), "{own:?}");
        }
        // A process at a hierarchy's root hands nothing over.
        let top = Opener { proc_cgroup: format!("8:pids:/\n4:memory:/{unit}\n"), ..who };
        let err = hand_over(root, &["memory", "pids"], &top, uid, gid).unwrap_err().to_string();
        assert!(err.starts_with("this process's pids cgroup is the root of"), "{err}");
        assert!(err.contains("TasksAccounting=yes"), "{err}");
    }

    #[test]
    fn the_worker_and_its_companions_move_into_the_supervisor_leaf() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path();
        // A fake tree: the file keeps only the last write.
        fs::write(own.join("cgroup.procs"), "17\n4242\n").unwrap();
        let who = opener(1000, "");
        let leaf = move_into_supervisor(own, &who).unwrap();
        assert_eq!(leaf, own.join(SUPERVISOR));
        assert_eq!(fs::read_to_string(leaf.join("cgroup.procs")).unwrap(), "17");
        // Again (a restarted worker): the leaf is reused.
        fs::write(own.join("cgroup.procs"), "4242\n").unwrap();
        move_into_supervisor(own, &who).unwrap();
        assert_eq!(fs::read_to_string(leaf.join("cgroup.procs")).unwrap(), "4242");
    }
}

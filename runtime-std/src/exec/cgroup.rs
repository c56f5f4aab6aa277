//! Enforced limits: one cgroup per executor (cgroup v2, or the v1
//! controllers), under a parent the worker owns.
//!
//! ```text
//! v2:  <root>/regent/<worker>/<executor>/      memory.max, memory.swap.max,
//!                                              cpu.max, pids.max
//! v1:  <root>/memory/regent/<worker>/<executor>/   memory.limit_in_bytes,
//!                                                  memory.memsw.limit_in_bytes
//!      <root>/cpu/regent/<worker>/<executor>/      cpu.cfs_quota_us, cpu.cfs_period_us
//!      <root>/pids/regent/<worker>/<executor>/     pids.max
//!      <root>/cpuacct/regent/<worker>/<executor>/  cpuacct.usage (when mounted apart)
//! ```
//!
//! `<root>` is `/sys/fs/cgroup` (`regent worker --cgroup-root`); `<worker>`
//! and `<executor>` are escaped ids ([`super::names::file_name`]). That is
//! the layout of a worker running as root. A worker running as another user
//! puts the same `regent/<worker>/<executor>` below its own cgroup (read
//! from `/proc/self/cgroup`), which must be delegated to it (systemd
//! `Delegate=yes`): `<own>/regent/<worker>/<executor>` on v2, where the
//! worker moves itself into `<own>/supervisor` first, and
//! `<root>/<controller>/<own>/regent/<worker>/<executor>` on v1
//! ([`super::delegation`]). The parents are made at worker start
//! ([`Cgroups::open`], which says exactly why when it cannot: not root and
//! not delegated, a controller not offered, a read-only mount). The
//! limits: memory hard limit = the executor's memory, no swap; CPU quota =
//! cores × the period (100 ms); a pids limit ([`DEFAULT_PIDS_MAX`] unless
//! configured).
//!
//! The executor's shim joins every cgroup of the executor (it writes its own
//! pid to `cgroup.procs`) *before* it starts the command, so the command
//! and everything it forks are inside from their first instruction.
//!
//! When the executor ends, whatever is still in its cgroup is killed (so a
//! process that left the executor's process group with `setsid` does not
//! outlive it), its out-of-memory counter is read (v2 `memory.events`
//! `oom_kill`, v1 `memory.oom_control` `oom_kill`) and the cgroup removed.
//! An executor the kernel killed for memory is reported `Failed` with the
//! reason `out of memory: limit 64 MiB, peak 64 MiB`
//! ([`OutOfMemory::reason`]).
//!
//! Everything here reads and writes plain files under `<root>`, so the
//! cgroup v2 path is tested against a fake tree in a temporary directory
//! (`runtime-std/tests/cgroup.rs`) as well as the v1 path on this
//! machine's real controllers.

pub use super::delegation::write_file;
use super::delegation::{self, Opener};
use super::names;
use regent_core::protocol::Usage;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The default mount point of the cgroup file systems.
pub const DEFAULT_ROOT: &str = "/sys/fs/cgroup";
/// The default most processes (and threads) one executor may have.
pub const DEFAULT_PIDS_MAX: u32 = 4096;
/// The CPU period the quota is a share of, in microseconds.
pub const CPU_PERIOD_US: u64 = 100_000;
/// The directory under each hierarchy that holds every worker's parent.
pub const TOP: &str = "regent";
/// The v1 controllers an executor is limited by.
const V1_REQUIRED: [&str; 3] = ["memory", "cpu", "pids"];
/// The v2 controllers an executor is limited by.
const V2_REQUIRED: [&str; 3] = ["memory", "cpu", "pids"];

/// `regent worker --isolation`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IsolationMode {
    /// Cgroups when the host offers them (v2 or v1), else limits are
    /// accounted only (logged as a warning).
    #[default]
    Auto,
    /// Cgroups, or the worker does not start.
    Cgroups,
    /// No enforcement: limits are accounted only.
    None,
}

impl std::str::FromStr for IsolationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(IsolationMode::Auto),
            "cgroups" => Ok(IsolationMode::Cgroups),
            "none" => Ok(IsolationMode::None),
            other => Err(format!("unknown isolation {other:?}: expected auto, cgroups or none")),
        }
    }
}

/// How a worker isolates its executors (`--isolation`, `--cgroup-root`,
/// `--executor-pids-max`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsolationConfig {
    /// Whether cgroups enforce the limits.
    pub mode: IsolationMode,
    /// Where the cgroup file systems are mounted ([`DEFAULT_ROOT`]).
    pub root: PathBuf,
    /// The most processes and threads of one executor.
    pub pids_max: u32,
}

impl Default for IsolationConfig {
    /// Cgroups when the host offers them, under [`DEFAULT_ROOT`],
    /// [`DEFAULT_PIDS_MAX`] processes per executor.
    fn default() -> Self {
        IsolationConfig {
            mode: IsolationMode::Auto,
            root: PathBuf::from(DEFAULT_ROOT),
            pids_max: DEFAULT_PIDS_MAX,
        }
    }
}

/// The name of a worker's parent cgroup: its id and a digest of its work
/// directory (`w1@1f2e3d4c`), so two workers that share an id on one
/// machine (two clusters, or tests) never share executors' cgroups, and a
/// restarted worker finds its own by its work directory.
pub fn worker_cgroup_name(worker: &str, work_dir: &Path) -> String {
    use sha2::Digest as _;
    let dir = fs::canonicalize(work_dir).unwrap_or_else(|_| work_dir.to_owned());
    let digest = sha2::Sha256::digest(dir.as_os_str().as_encoded_bytes());
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}@{hex}", names::file_name(worker))
}

/// What cgroup file systems a host offers ([`detect`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Offered {
    /// The unified hierarchy (cgroup v2) is mounted at the root.
    V2,
    /// The v1 controllers are mounted under the root (`hybrid`: an
    /// unified hierarchy beside them, as systemd's hybrid mode mounts at
    /// `<root>/unified`; its controllers are unused).
    V1 {
        /// A unified hierarchy is mounted beside the v1 controllers.
        hybrid: bool,
    },
    /// Neither.
    Nothing,
}

impl fmt::Display for Offered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Offered::V2 => f.write_str("cgroup v2"),
            Offered::V1 { hybrid: false } => f.write_str("cgroup v1"),
            Offered::V1 { hybrid: true } => f.write_str("cgroup v1 (hybrid: v1 controllers used)"),
            Offered::Nothing => f.write_str("no cgroup file system"),
        }
    }
}

/// What the host under `root` offers: v2 when `root` itself is the unified
/// hierarchy (it has `cgroup.controllers`), v1 when a `memory` controller
/// directory is there, else nothing.
pub fn detect(root: &Path) -> Offered {
    if root.join("cgroup.controllers").is_file() {
        Offered::V2
    } else if root.join("memory").join("cgroup.procs").is_file() {
        Offered::V1 { hybrid: root.join("unified").join("cgroup.controllers").is_file() }
    } else {
        Offered::Nothing
    }
}

/// Why the worker's cgroup parent cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// `--isolation cgroups` on a host without cgroups.
    #[error("no cgroup file system under {} (neither cgroup v2 nor the v1 memory controller is mounted there); use --isolation none to run with limits accounted only", root.display())]
    NotOffered {
        /// The root looked at.
        root: PathBuf,
    },
    /// A controller the limits need is not there.
    #[error("the {controller} controller is not available under {}: {detail}; use --isolation none to run with limits accounted only", root.display())]
    MissingController {
        /// `memory`, `cpu` or `pids`.
        controller: &'static str,
        /// The root.
        root: PathBuf,
        /// What was found instead.
        detail: String,
    },
    /// A worker that is not root, whose own cgroup is not delegated to it.
    #[error("the worker runs as uid {uid}, not root, and its own cgroup {} is not delegated to it (the directory or its cgroup.procs is not writable by this user): {}, or have root chown -R that cgroup to this user; use --isolation none to run with limits accounted only", dir.display(), systemd_fix(*v1))]
    NotDelegated {
        /// The worker's effective uid.
        uid: u32,
        /// Its own cgroup (for the first hierarchy that is not delegated).
        dir: PathBuf,
        /// On cgroup v1 (where systemd's delegation needs a hand).
        v1: bool,
    },
    /// A worker that is not root cannot tell its own cgroup.
    #[error("the worker runs as uid {uid}, not root, so its executors' cgroups go below its own, but {detail}: {}; use --isolation none to run with limits accounted only", systemd_fix(*v1))]
    NoOwnCgroup {
        /// The worker's effective uid.
        uid: u32,
        /// What is wrong with `/proc/self/cgroup`.
        detail: String,
        /// On cgroup v1.
        v1: bool,
    },
    /// A file-system step failed.
    #[error("cannot {what} {}: {source}{}; use --isolation none to run with limits accounted only", path.display(), hint(source))]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

crate::error::into_report!(CgroupError);

/// How systemd delegates a worker's cgroup, for the messages: on cgroup v1
/// systemd gives a unit with `User=` no controller, so root hands them over
/// ([`delegation::hand_over`]).
fn systemd_fix(v1: bool) -> &'static str {
    if v1 {
        "run the worker under systemd with Delegate=yes and, on cgroup v1, \
         ExecStartPre=+regent delegate-cgroups --user USER (as deploy/regent-worker.service does)"
    } else {
        "run the worker under systemd with Delegate=yes (as deploy/regent-worker.service does)"
    }
}

/// The likely cause of an OS error on a cgroup file, for the message.
fn hint(e: &io::Error) -> &'static str {
    use rustix::io::Errno;
    let is = |errno: Errno| e.raw_os_error() == Some(errno.raw_os_error());
    if is(Errno::ACCESS) || is(Errno::PERM) {
        " (not root, or the cgroup is not delegated to this user)"
    } else if is(Errno::ROFS) {
        " (the cgroup file system is mounted read-only)"
    } else if is(Errno::BUSY) {
        " (the cgroup has processes of its own, so controllers cannot be enabled for its children)"
    } else if is(Errno::NOTSUP) || is(Errno::NOENT) {
        " (the controller is not offered to, or not delegated to, this cgroup)"
    } else {
        ""
    }
}

/// Why an executor's cgroup could not be made ([`Cgroups::create`]): its
/// launch fails with this reason.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what} {}: {source}", path.display())]
pub struct ExecutorCgroupError {
    /// What was being done.
    pub what: String,
    /// On which path.
    pub path: PathBuf,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

/// The limits of one executor's cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The memory hard limit in bytes (no swap); `None`: unlimited.
    pub memory_bytes: Option<u64>,
    /// The CPU quota per [`CPU_PERIOD_US`], in microseconds; `None`:
    /// unlimited.
    pub cpu_quota_us: Option<u64>,
    /// The most processes and threads.
    pub pids_max: u32,
}

impl Limits {
    /// The limits of an executor of `cores` cores and `memory_mb` MiB
    /// (zero means no limit of that kind), with `pids_max` processes.
    pub fn for_executor(cores: u32, memory_mb: u64, pids_max: u32) -> Limits {
        Limits {
            memory_bytes: (memory_mb > 0).then(|| memory_mb.saturating_mul(1 << 20)),
            cpu_quota_us: (cores > 0).then(|| u64::from(cores) * CPU_PERIOD_US),
            pids_max,
        }
    }
}

/// An executor the kernel killed because it reached its memory limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory {
    /// Its limit in bytes.
    pub limit_bytes: Option<u64>,
    /// The most memory it used, in bytes, where the kernel reports it.
    pub peak_bytes: Option<u64>,
}

impl OutOfMemory {
    /// The reason reported with its `Failed` state:
    /// `out of memory: limit 64 MiB, peak 64 MiB`.
    pub fn reason(&self) -> String {
        let mib = |b: Option<u64>| match b {
            Some(b) => format!("{} MiB", b.div_ceil(1 << 20)),
            None => "unknown".to_owned(),
        };
        format!(
            "{}: limit {}, peak {}",
            regent_core::launch::OUT_OF_MEMORY,
            mib(self.limit_bytes),
            mib(self.peak_bytes)
        )
    }
}

/// The flavour in use and its parent directories.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Layout {
    /// One parent: `<root>/regent/<worker>`.
    V2 { parent: PathBuf },
    /// One parent per controller: `(controller, <root>/<controller>/regent/<worker>)`.
    V1 { parents: Vec<(&'static str, PathBuf)> },
}

/// The cgroups of one worker's executors (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroups {
    offered: Offered,
    layout: Layout,
    delegated: bool,
    pids_max: u32,
}

impl Cgroups {
    /// Makes (or finds) the parent cgroups `regent/<worker>` (a name from
    /// [`worker_cgroup_name`]) under `config.root` (as root) or under this
    /// process's own delegated cgroup (as another user; on v2 it moves
    /// itself into `<own>/supervisor`), and checks they can hold
    /// executors' cgroups. `None` when the mode is `None`, or `Auto` on a
    /// host without cgroups (the caller logs that limits are accounted
    /// only); an error naming the cause otherwise — for a worker that is
    /// not root and has no delegated cgroup, with either mode: the host
    /// could enforce the limits, and the fix is one line of its unit
    /// ([`CgroupError::NotDelegated`]).
    pub fn open(config: &IsolationConfig, worker: &str) -> Result<Option<Cgroups>, CgroupError> {
        let who = Opener::this_process().unwrap_or_else(|_| Opener {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
            pid: std::process::id(),
            // No /proc: a worker that is not root is told it has no cgroup.
            proc_cgroup: String::new(),
        });
        Cgroups::open_as(config, worker, &who)
    }

    /// [`Cgroups::open`] for the process `who` describes (tests pass a
    /// fake `/proc/self/cgroup` and identity).
    pub fn open_as(
        config: &IsolationConfig,
        worker: &str,
        who: &Opener,
    ) -> Result<Option<Cgroups>, CgroupError> {
        let (mode, root, pids_max) = (config.mode, config.root.as_path(), config.pids_max);
        let offered = match mode {
            IsolationMode::None => return Ok(None),
            _ => detect(root),
        };
        // A name from `worker_cgroup_name` is one path component already.
        let plain = !worker.is_empty() && worker != "." && worker != ".." && !worker.contains('/');
        let worker = if plain { worker.to_owned() } else { names::file_name(worker) };
        let layout = match offered {
            Offered::Nothing if mode == IsolationMode::Auto => return Ok(None),
            Offered::Nothing => return Err(CgroupError::NotOffered { root: root.to_owned() }),
            Offered::V2 if who.is_root() => Layout::V2 { parent: open_v2(root, &worker)? },
            Offered::V2 => Layout::V2 { parent: open_v2_delegated(root, &worker, who)? },
            Offered::V1 { .. } => Layout::V1 { parents: open_v1(root, &worker, who)? },
        };
        Ok(Some(Cgroups { offered, layout, delegated: !who.is_root(), pids_max }))
    }

    /// Whether the parents are below the worker's own delegated cgroup
    /// (a worker that is not root), not the machine-wide `<root>/regent`.
    pub fn delegated(&self) -> bool {
        self.delegated
    }

    /// What the host offered.
    pub fn offered(&self) -> &Offered {
        &self.offered
    }

    /// The pids limit of every executor.
    pub fn pids_max(&self) -> u32 {
        self.pids_max
    }

    /// The parent directories (one for v2, one per controller for v1).
    pub fn parents(&self) -> Vec<PathBuf> {
        match &self.layout {
            Layout::V2 { parent } => vec![parent.clone()],
            Layout::V1 { parents } => parents.iter().map(|(_, p)| p.clone()).collect(),
        }
    }

    /// The cgroup directories of `executor` (what its shim joins).
    pub fn dirs(&self, executor: &str) -> Vec<PathBuf> {
        let name = names::file_name(executor);
        self.parents().into_iter().map(|p| p.join(&name)).collect()
    }

    fn dir_of(&self, controller: &str, executor: &str) -> Option<PathBuf> {
        let name = names::file_name(executor);
        match &self.layout {
            Layout::V2 { parent } => Some(parent.join(name)),
            Layout::V1 { parents } => {
                parents.iter().find(|(c, _)| *c == controller).map(|(_, p)| p.join(name))
            }
        }
    }

    /// Makes `executor`'s cgroups with `limits` (a cgroup left from an
    /// earlier run of the same id is reused, its limits rewritten); the
    /// error names the file, the value and the OS error.
    pub fn create(
        &self,
        executor: &str,
        limits: Limits,
    ) -> Result<Vec<PathBuf>, ExecutorCgroupError> {
        let dirs = self.dirs(executor);
        for dir in &dirs {
            match fs::create_dir(dir) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                    return Err(ExecutorCgroupError {
                        what: "create cgroup".to_owned(),
                        path: dir.clone(),
                        source: e,
                    })
                }
                _ => {}
            }
        }
        let set = |controller: &str, file: &str, value: String, optional: bool| {
            let Some(dir) = self.dir_of(controller, executor) else { return Ok(()) };
            let path = dir.join(file);
            if optional && !path.exists() {
                return Ok(());
            }
            write_file(&path, &value).map_err(|source| ExecutorCgroupError {
                what: format!("write {value:?} to"),
                path,
                source,
            })
        };
        let max = |v: Option<u64>| v.map_or("max".to_owned(), |v| v.to_string());
        match &self.layout {
            Layout::V2 { .. } => {
                set("memory", "memory.max", max(limits.memory_bytes), false)?;
                set("memory", "memory.swap.max", "0".to_owned(), true)?;
                let quota = max(limits.cpu_quota_us);
                set("cpu", "cpu.max", format!("{quota} {CPU_PERIOD_US}"), false)?;
                set("pids", "pids.max", limits.pids_max.to_string(), false)?;
            }
            Layout::V1 { .. } => {
                let v1 = |v: Option<u64>| v.map_or("-1".to_owned(), |v| v.to_string());
                // memory+swap must never be below memory: lifted first, set
                // last.
                set("memory", "memory.memsw.limit_in_bytes", "-1".to_owned(), true)?;
                set("memory", "memory.limit_in_bytes", v1(limits.memory_bytes), false)?;
                set("memory", "memory.memsw.limit_in_bytes", v1(limits.memory_bytes), true)?;
                set("cpu", "cpu.cfs_period_us", CPU_PERIOD_US.to_string(), false)?;
                set("cpu", "cpu.cfs_quota_us", v1(limits.cpu_quota_us), false)?;
                set("pids", "pids.max", limits.pids_max.to_string(), false)?;
            }
        }
        Ok(dirs)
    }

    /// The processes in `executor`'s cgroups now.
    pub fn pids(&self, executor: &str) -> Vec<u32> {
        let mut pids: Vec<u32> = self
            .dirs(executor)
            .iter()
            .filter_map(|d| fs::read_to_string(d.join("cgroup.procs")).ok())
            .flat_map(|t| t.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<_>>())
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Whether the kernel killed a process of `executor` for memory, and
    /// its limit and peak.
    pub fn out_of_memory(&self, executor: &str) -> Option<OutOfMemory> {
        let dir = self.dir_of("memory", executor)?;
        let kills = match &self.layout {
            Layout::V2 { .. } => key_value(&dir.join("memory.events"), "oom_kill"),
            Layout::V1 { .. } => key_value(&dir.join("memory.oom_control"), "oom_kill"),
        };
        if kills.unwrap_or(0) == 0 {
            return None;
        }
        let (limit, peak) = match &self.layout {
            Layout::V2 { .. } => {
                (read_u64(&dir.join("memory.max")), read_u64(&dir.join("memory.peak")))
            }
            Layout::V1 { .. } => (
                read_u64(&dir.join("memory.limit_in_bytes")),
                read_u64(&dir.join("memory.max_usage_in_bytes")),
            ),
        };
        Some(OutOfMemory { limit_bytes: limit, peak_bytes: peak })
    }

    /// `executor`'s memory and CPU use now (the figures the worker sends
    /// its leader).
    pub fn usage(&self, executor: &str) -> Usage {
        let mem = self.dir_of("memory", executor);
        match &self.layout {
            Layout::V2 { .. } => {
                let Some(dir) = mem else { return Usage::default() };
                Usage {
                    memory_bytes: read_u64(&dir.join("memory.current")),
                    memory_peak_bytes: read_u64(&dir.join("memory.peak")),
                    cpu_usec: key_value(&dir.join("cpu.stat"), "usage_usec"),
                }
            }
            Layout::V1 { .. } => Usage {
                memory_bytes: mem.as_ref().and_then(|d| read_u64(&d.join("memory.usage_in_bytes"))),
                memory_peak_bytes: mem
                    .as_ref()
                    .and_then(|d| read_u64(&d.join("memory.max_usage_in_bytes"))),
                cpu_usec: self
                    .dir_of("cpuacct", executor)
                    .and_then(|d| read_u64(&d.join("cpuacct.usage")))
                    .map(|ns| ns / 1000),
            },
        }
    }

    /// Kills whatever is left in `executor`'s cgroups (SIGKILL) and removes
    /// them, waiting up to `timeout` for the processes to go. Returns what
    /// could not be removed (with the reason), for the log.
    pub fn remove(&self, executor: &str, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        let dirs = self.dirs(executor);
        loop {
            for pid in self.pids(executor) {
                if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            let mut left = Vec::new();
            for dir in &dirs {
                match fs::remove_dir(dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    // A fake tree (tests) holds the files written into it.
                    Err(_) if !is_cgroup_fs(dir) => {
                        let _ = fs::remove_dir_all(dir);
                    }
                    Err(e) => left.push(format!("{}: {e}", dir.display())),
                }
            }
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Removes this worker's parent cgroups if no executor's cgroup is left
    /// in them (a worker that stops with executors it may re-adopt keeps
    /// them).
    pub fn remove_parents_if_empty(&self) {
        for parent in self.parents() {
            let _ = fs::remove_dir(&parent);
            // Below a delegated cgroup `regent` is this user's alone (the
            // machine-wide one is shared by every worker of the host).
            if self.delegated {
                if let Some(top) = parent.parent() {
                    let _ = fs::remove_dir(top);
                }
            }
        }
    }

    /// The executors with a cgroup under this worker's parents (their ids
    /// unescaped), for cleaning up after a restart.
    pub fn existing(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .parents()
            .iter()
            .filter_map(|p| fs::read_dir(p).ok())
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| names::unescape(&e.file_name().to_string_lossy()))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// Whether `path` is on a cgroup file system (not a fake tree).
fn is_cgroup_fs(path: &Path) -> bool {
    let probe = path.parent().unwrap_or(path);
    rustix::fs::statfs(probe).is_ok_and(|s| {
        // `f_type`'s width differs between targets.
        #[allow(clippy::unnecessary_cast)]
        let magic = s.f_type as i64;
        magic == 0x0027_e0eb || magic == 0x6367_7270 // CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC
    })
}

/// `<own>/regent/<worker>` below the worker's own delegated cgroup on the
/// unified hierarchy, after moving the worker (and whatever else runs in
/// `<own>`) into the leaf `<own>/supervisor`, so that `<own>` may enable
/// controllers for its children.
fn open_v2_delegated(root: &Path, worker: &str, who: &Opener) -> Result<PathBuf, CgroupError> {
    let (base, in_leaf) = own_dir(root, who.own_v2(), "the unified hierarchy (0::)", who, false)?;
    if !in_leaf {
        delegation::move_into_supervisor(&base, who).map_err(|source| CgroupError::Io {
            what: "move the worker into",
            path: base.join(delegation::SUPERVISOR),
            source,
        })?;
    }
    open_v2(&base, worker)
}

/// The delegated cgroup of `who` in a hierarchy mounted at `mount`, where
/// `/proc/self/cgroup` says it is `own`; whether it already runs in its
/// `supervisor` leaf. Refused when it is not there or not delegated.
fn own_dir(
    mount: &Path,
    own: Option<&str>,
    hierarchy: &str,
    who: &Opener,
    v1: bool,
) -> Result<(PathBuf, bool), CgroupError> {
    let uid = who.uid;
    let Some(own) = own else {
        let detail = format!("/proc/self/cgroup names no cgroup of it in {hierarchy}");
        return Err(CgroupError::NoOwnCgroup { uid, detail, v1 });
    };
    let found = delegation::delegated(mount, own).filter(|(dir, _)| dir.is_dir());
    let Some((dir, in_leaf)) = found else {
        let detail = format!(
            "its cgroup {own} in {hierarchy} (from /proc/self/cgroup) is not a directory under {}",
            mount.display()
        );
        return Err(CgroupError::NoOwnCgroup { uid, detail, v1 });
    };
    if !delegation::writable_by(&dir, who) {
        return Err(CgroupError::NotDelegated { uid, dir, v1 });
    }
    Ok((dir, in_leaf))
}

/// `<top>/regent/<worker>` on the unified hierarchy, with the memory, cpu
/// and pids controllers enabled for the children of each level (`top` is
/// the root, or a worker's delegated cgroup).
fn open_v2(root: &Path, worker: &str) -> Result<PathBuf, CgroupError> {
    let controllers = fs::read_to_string(root.join("cgroup.controllers")).map_err(|source| {
        CgroupError::Io { what: "read", path: root.join("cgroup.controllers"), source }
    })?;
    for c in V2_REQUIRED {
        if !controllers.split_whitespace().any(|have| have == c) {
            return Err(CgroupError::MissingController {
                controller: c,
                root: root.to_owned(),
                detail: format!("cgroup.controllers lists {:?}", controllers.trim()),
            });
        }
    }
    let enable = V2_REQUIRED.map(|c| format!("+{c}")).join(" ");
    let top = root.join(TOP);
    let parent = top.join(worker);
    for (dir, child) in [(root, &top), (&top, &parent)] {
        enable_v2(dir, &enable)?;
        make_dir(child)?;
    }
    enable_v2(&parent, &enable)?;
    Ok(parent)
}

/// Enables `enable` (`+memory +cpu +pids`) in `dir`'s
/// `cgroup.subtree_control`, unless they are on already.
fn enable_v2(dir: &Path, enable: &str) -> Result<(), CgroupError> {
    let path = dir.join("cgroup.subtree_control");
    let on = fs::read_to_string(&path).unwrap_or_default();
    if V2_REQUIRED.iter().all(|c| on.split_whitespace().any(|have| have == *c)) {
        return Ok(());
    }
    write_file(&path, enable).map_err(|source| CgroupError::Io {
        what: "enable the memory, cpu and pids controllers in",
        path,
        source,
    })
}

/// `<root>/<controller>/regent/<worker>` for every v1 controller (and
/// `cpuacct` when it is mounted apart from `cpu`, for the CPU time); for a
/// worker that is not root, `<root>/<controller>/<own>/regent/<worker>`
/// below its own delegated cgroup of each controller.
fn open_v1(
    root: &Path,
    worker: &str,
    who: &Opener,
) -> Result<Vec<(&'static str, PathBuf)>, CgroupError> {
    let mut tops = Vec::new();
    for c in v1_controllers(root) {
        let mount = root.join(c);
        if !mount.join("cgroup.procs").is_file() {
            return Err(CgroupError::MissingController {
                controller: c,
                root: root.to_owned(),
                detail: format!("{} is not a mounted v1 hierarchy", mount.display()),
            });
        }
        let top = if who.is_root() {
            mount
        } else {
            own_dir(&mount, who.own_v1(c), &format!("the v1 {c} hierarchy"), who, true)?.0
        };
        tops.push((c, top));
    }
    // Every hierarchy checked before anything is made.
    let mut parents = Vec::new();
    for (c, top) in tops {
        let parent = top.join(TOP).join(worker);
        make_dir(&top.join(TOP))?;
        make_dir(&parent)?;
        parents.push((c, parent));
    }
    Ok(parents)
}

/// The v1 controllers a worker uses under `root`: memory, cpu and pids,
/// and cpuacct when it is mounted apart from cpu (for the CPU time).
pub fn v1_controllers(root: &Path) -> Vec<&'static str> {
    let mut controllers: Vec<&'static str> = V1_REQUIRED.to_vec();
    let cpu_has_usage = root.join("cpu").join("cpuacct.usage").exists();
    if !cpu_has_usage && root.join("cpuacct").join("cgroup.procs").is_file() {
        controllers.push("cpuacct");
    }
    controllers
}

fn make_dir(dir: &Path) -> Result<(), CgroupError> {
    match fs::create_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
            Err(CgroupError::Io { what: "create cgroup", path: dir.to_owned(), source: e })
        }
        _ => Ok(()),
    }
}

/// A file holding one number (`max` is `None`).
fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The number after `key` in a `key value` per line file.
fn key_value(path: &Path, key: &str) -> Option<u64> {
    let text = fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

//! Host helpers both runtimes' drivers share, outside any driver: the
//! worker's id file, the durable series of incarnation and instance ids
//! ([`next_ordered_id`]: ordered even when the wall clock steps back), the
//! check of configured master addresses, what a previous worker process
//! left behind, the log lines of the worker node's notes and of executor
//! launches, and the wall clock (the runtime clock is
//! [`crate::clock::RuntimeClock`]). No protocol decision lives here.

use crate::exec::{
    ExecEvent, Launched, LeftBehind, LeftBehindPolicy, Supervisor, SupervisorConfig,
    SupervisorError,
};
use crate::net::{check_exposure, random_u64, time_ordered_id, NetConfig, NetError};
use regent_core::node::worker::{ExecutorCommand, Input as NodeInput, LogReadRequest, Note};
use regent_core::protocol::ExecutorReport;
use regent_core::Millis;
use regent_core::{worker, Addr, ExecutorId, Incarnation, WorkerId};
use std::fs;
use std::io::Write as _;
use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The file in the work directory that keeps a generated worker id.
pub const ID_FILE: &str = "worker-id";

/// How long dialling one master may take (resolution and TCP connect).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long connections get to flush their last messages (executor reports)
/// when the worker stops.
pub const FLUSH_GRACE: Duration = Duration::from_millis(500);

/// The report of an executor a previous worker process left behind:
/// `Running` when adopted (the master keeps it if its slot still names it,
/// else has it killed), `Killed` when killed, how it ended when it ended
/// while no worker process ran and its shim recorded it (`Exited`, rarely
/// `Failed`: a success completes its slot even if the master wrote it off
/// meanwhile), else `Lost` — its end is unknown, not the executor's fault,
/// so it must not use the group's retry budget. The cores and memory are
/// the recorded ones.
pub fn left_behind_report(lb: LeftBehind) -> ExecutorReport {
    // The supervisor logged what it found and did.
    ExecutorReport {
        ran_ms: None,
        // Reported again, so the leader keeps telling the framework where
        // it listens and no other executor here is given its numbers (or
        // its resources' addresses).
        ports: lb.ports.clone(),
        resources: lb.resources.clone(),
        state: lb.state(),
        id: lb.executor,
        framework: lb.framework,
        cores: lb.cores,
        memory_mb: lb.memory_mb,
    }
}

/// Carries out a worker node's [`ExecutorCommand`] on `supervisor`: the one
/// place both runtimes execute it (the smol runtime calls it on its blocking
/// pool, since a launch forks and fsyncs a record). What happens to the
/// executor comes back through the supervisor's sink: `Running` or `Failed`
/// after a start, `Killed` after a kill or a stop.
pub fn execute_executor_command(supervisor: &Arc<Supervisor>, cmd: ExecutorCommand) {
    match cmd {
        ExecutorCommand::Start { executor, framework, spec } => {
            tracing::debug!(%executor, %framework, command = ?spec.command, "starting executor");
            let id = executor.clone();
            // A launch with artifacts to fetch goes on in the background:
            // the caller, the worker's pump, must keep heartbeating.
            if let Some(launched) = supervisor.launch_in_background(executor, framework, spec) {
                log_launched(&id, launched);
            }
        }
        ExecutorCommand::Stop { executor, grace } => {
            tracing::debug!(%executor, %grace, "stopping executor (drain)");
            if !supervisor.stop(&executor, Duration::from_millis(grace.0)) {
                tracing::debug!(%executor, "executor to stop is not running");
            }
        }
        ExecutorCommand::Kill { executor } => {
            tracing::debug!(%executor, "killing executor");
            if !supervisor.kill(&executor) {
                // It ended already; its terminal event is on its way.
                tracing::debug!(%executor, "executor to kill is not running");
            }
        }
    }
}

/// Answers a worker node's [`LogReadRequest`] from `supervisor`'s executor
/// directories: a bounded pread (at most `MAX_LOG_CHUNK`) of a local file.
/// The input it returns goes back to the node.
pub fn read_executor_log(supervisor: &Supervisor, req: LogReadRequest) -> NodeInput {
    let result = supervisor.read_log(&req.executor, req.stream, req.offset, req.max);
    req.answer(result)
}

/// Logs how a launch went (`Running` or `Failed` itself comes back through
/// the supervisor's sink).
pub(crate) fn log_launched(executor: &ExecutorId, launched: Launched) {
    match launched {
        Launched::Started { pid } => tracing::debug!(%executor, pid, "executor started"),
        Launched::Failed { reason } => {
            tracing::warn!(%executor, %reason, "executor launch failed")
        }
        Launched::Cancelled => {
            tracing::info!(%executor, "executor killed while its artifacts were fetched")
        }
        Launched::AlreadyRunning => {
            tracing::warn!(%executor, "executor already runs; launch ignored")
        }
    }
}

/// Logs a worker node's [`Note`]: connections, dial failures (the first in
/// a row at info, later ones at debug, an exposure refusal once as a
/// warning), closes, the followed master and registration.
pub fn log_worker_note(note: &Note) {
    match note {
        Note::Connected { master, conn } => tracing::info!(%master, %conn, "connected to master"),
        Note::DialFailed { master, reason, first, refused_first } => {
            if *first {
                tracing::info!(%master, %reason, "cannot connect to master");
            } else {
                tracing::debug!(%master, %reason, "cannot connect to master");
            }
            if *refused_first {
                tracing::warn!(%master, %reason, "master refused by the exposure check");
            }
        }
        Note::Disconnected { master, reason } => {
            tracing::info!(%master, %reason, "disconnected from master")
        }
        Note::Closing { master, reason } => {
            tracing::info!(%master, %reason, "closing the connection to master")
        }
        Note::Status(st) => match (&st.active, st.registered) {
            (Some(m), true) => {
                tracing::info!(master = %m, epoch = st.max_epoch.0, "registered with master")
            }
            (Some(m), false) => {
                tracing::info!(master = %m, epoch = st.max_epoch.0, "following master; registering")
            }
            (None, _) => tracing::info!("no master followed"),
        },
        Note::NotStarting { executor } => {
            tracing::warn!(%executor, "not starting an executor: the worker is shutting down")
        }
        Note::Hinted { leader } => {
            tracing::info!(leader = %leader.addr, epoch = leader.epoch.0, "a master says it leads; probing it")
        }
        Note::Rejected { master, reason } => {
            tracing::warn!(%master, %reason, "ignored a master's message past a limit")
        }
        Note::RegistrationRefused { master, reason } => {
            tracing::warn!(%master, %reason, "registration refused; retrying slowly")
        }
    }
}

/// Why a host-side step of a daemon failed: its configuration, its work or
/// state directory, the files that keep its ids.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// No master address was configured.
    #[error("no master address given")]
    NoMasters,
    /// A configured master address is not `host:port`.
    #[error("master address {0:?} is not host:port")]
    MasterNotHostPort(String),
    /// A configured master resolves to an address the exposure rule
    /// refuses.
    #[error("master {master}: {source}")]
    MasterExposed {
        /// The master, as configured.
        master: Addr,
        /// The refusal.
        #[source]
        source: NetError,
    },
    /// The callback listener's address is refused by the exposure rule.
    #[error("--listen {listen}: {source}")]
    ListenExposed {
        /// The address.
        listen: std::net::SocketAddr,
        /// The refusal.
        #[source]
        source: NetError,
    },
    /// The worker's cluster differs from its network configuration's.
    #[error("the worker's cluster {worker:?} differs from its network configuration's {net:?}")]
    ClusterMismatch {
        /// The worker's cluster.
        worker: String,
        /// The network configuration's.
        net: String,
    },
    /// The configured worker id is empty.
    #[error("the worker id is empty")]
    EmptyWorkerId,
    /// `--host` is empty or longer than a host name may be.
    #[error(
        "host {host:?} for executors' ports must be 1 to {} bytes",
        regent_core::limits::MAX_HOST_BYTES
    )]
    BadHost {
        /// The host given.
        host: String,
    },
    /// The port ranges offered break a rule of [`regent_core::ports`].
    #[error("--ports: {0}")]
    BadPorts(regent_core::ports::PortsProblem),
    /// The named resources offered break a rule of
    /// [`regent_core::resources`].
    #[error("--resource: {0}")]
    BadResources(regent_core::resources::ResourcesProblem),
    /// The executors' user cannot be used (`--executor-user`).
    #[error("--executor-user: {0}")]
    User(#[from] crate::exec::user::UserError),
    /// The executors' cgroups cannot be made (`--isolation`).
    #[error("cannot isolate executors with cgroups: {0}")]
    Isolation(#[from] crate::exec::cgroup::CgroupError),
    /// The executor supervisor could not take the work directory.
    #[error("cannot supervise executors in {}: {source}", dir.display())]
    Supervise {
        /// The work directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: SupervisorError,
    },
    /// The worker id file could not be read.
    #[error("cannot read the worker id from {}: {source}", path.display())]
    ReadWorkerId {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A new worker id could not be stored.
    #[error("cannot store the worker id in {}: {source}", path.display())]
    StoreWorkerId {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A series' file does not hold an id.
    #[error(
        "{} is corrupt: {text:?} is not an id (a decimal number). It keeps the last id \
         of this process series so that the next is newer even if the clock stepped \
         back; repair or remove it",
        path.display()
    )]
    CorruptId {
        /// The file.
        path: PathBuf,
        /// The start of what it holds (at most 40 characters).
        text: String,
    },
    /// A series' file could not be read.
    #[error("cannot read the last id from {}: {source}", path.display())]
    ReadLastId {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A series' file holds the largest id there is.
    #[error("{} holds the largest id there is; no later id exists", path.display())]
    IdsExhausted {
        /// The file.
        path: PathBuf,
    },
    /// The next id of a series could not be stored.
    #[error("cannot store the last id in {}: {source}", path.display())]
    StoreLastId {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A submitter's state directory could not be created.
    #[error(
        "cannot create the state directory {} (where the last instance id is kept; \
         --state-dir names another): {source}",
        dir.display()
    )]
    StateDir {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The lock file of a state directory could not be opened.
    #[error("cannot open {}: {source}", path.display())]
    OpenLock {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The lock file of a state directory could not be locked.
    #[error("cannot lock {}: {source}", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

crate::error::into_report!(HostError);

/// Checks the configured masters before anything starts: each must be
/// `host:port`, and none may resolve to a non-loopback address without a
/// secret unless `insecure`. A name that does not resolve yet is warned
/// about only.
pub fn check_masters(masters: &[Addr], has_secret: bool, insecure: bool) -> Result<(), HostError> {
    if masters.is_empty() {
        return Err(HostError::NoMasters);
    }
    for m in masters {
        let ok = m
            .as_str()
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !ok {
            return Err(HostError::MasterNotHostPort(m.to_string()));
        }
        match m.as_str().to_socket_addrs() {
            Ok(addrs) => {
                for a in addrs {
                    check_exposure(&a, has_secret, insecure)
                        .map_err(|source| HostError::MasterExposed { master: m.clone(), source })?;
                }
            }
            Err(e) => {
                tracing::warn!(master = %m, error = %e, "cannot resolve master yet; will keep trying")
            }
        }
    }
    Ok(())
}

/// The id kept in `<work_dir>/worker-id`, or a new one (`worker-<host>-<hex>`)
/// written there durably (temp file, fsync, rename, directory fsync).
pub fn load_or_create_id(work_dir: &Path) -> Result<String, HostError> {
    let path = work_dir.join(ID_FILE);
    match fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => return Ok(s.trim().to_owned()),
        Ok(_) => {
            tracing::warn!(path = %path.display(), "empty worker id file; generating a new id")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(HostError::ReadWorkerId { path, source }),
    }
    let id = generate_id();
    write_durably(&path, &id)
        .map_err(|source| HostError::StoreWorkerId { path: path.clone(), source })?;
    tracing::info!(worker = %id, path = %path.display(), "generated the worker id");
    Ok(id)
}

/// The file in the work directory that keeps the worker's last
/// incarnation, so the next process of the worker is newer even when the
/// host's clock stepped back (docs/design.md#identity-and-time-do-not-trust-the-wall-clock).
pub const INCARNATION_FILE: &str = "incarnation";

/// The next id of a series kept in the file `path` (created with the
/// series): `max(time-ordered id, last + 1)` ([`time_ordered_id`]), stored
/// durably (temp file, fsync, rename, directory fsync) before it is
/// returned. Ids so drawn grow with the wall clock while it moves forward,
/// and stay unique and ordered when it steps back (NTP after a reboot, a
/// restored VM): a step back only makes the next id its predecessor + 1.
/// The caller keeps other processes of the series out meanwhile (the
/// worker: the work directory's lock). Fails naming the file when it
/// cannot be read or written, or does not hold an id (it is never
/// overwritten then: removing it is the operator's call).
pub fn next_ordered_id(path: &Path) -> Result<u64, HostError> {
    let last = match fs::read_to_string(path) {
        Ok(text) => Some(text.trim().parse::<u64>().map_err(|_| HostError::CorruptId {
            path: path.to_owned(),
            text: text.chars().take(40).collect(),
        })?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(HostError::ReadLastId { path: path.to_owned(), source }),
    };
    let id = ordered_after(time_ordered_id(), last)
        .ok_or_else(|| HostError::IdsExhausted { path: path.to_owned() })?;
    write_durably(path, &id.to_string())
        .map_err(|source| HostError::StoreLastId { path: path.to_owned(), source })?;
    Ok(id)
}

/// The file in a submitter's state directory that keeps the last instance
/// id drawn there.
pub const INSTANCE_FILE: &str = "submit-instance";

/// Where `regent submit` keeps its last instance id unless told
/// (`--state-dir`): `$XDG_STATE_HOME/regent`, else
/// `$HOME/.local/state/regent`; `None` when neither variable holds an
/// absolute path.
pub fn default_state_dir() -> Option<PathBuf> {
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|h| h.join(".local").join("state")))
        .map(|d| d.join("regent"))
}

/// A submitter's instance id. With a state directory (created if missing):
/// the next of the series in `<dir>/submit-instance` ([`next_ordered_id`]:
/// newer than every instance drawn there before, even when the wall clock
/// stepped back), drawn under an exclusive `flock` of
/// `<dir>/submit-instance.lock`, as a user's submitters may start side by
/// side. Without one: the clock's id alone ([`time_ordered_id`]), ordered
/// only while the wall clock does not step back. Fails naming the
/// directory or file that cannot be used.
pub fn next_instance_id(state_dir: Option<&Path>) -> Result<u64, HostError> {
    let Some(dir) = state_dir else {
        return Ok(time_ordered_id());
    };
    fs::create_dir_all(dir)
        .map_err(|source| HostError::StateDir { dir: dir.to_owned(), source })?;
    let lock_path = dir.join(format!("{INSTANCE_FILE}.lock"));
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| HostError::OpenLock { path: lock_path.clone(), source })?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| HostError::Lock { path: lock_path, source: e.into() })?;
    // The lock ends with `lock`, after the id is durable.
    next_ordered_id(&dir.join(INSTANCE_FILE))
}

/// `max(clock, last + 1)`: `None` when `last` is the largest id.
fn ordered_after(clock: u64, last: Option<u64>) -> Option<u64> {
    match last {
        None => Some(clock),
        Some(last) => Some(clock.max(last.checked_add(1)?)),
    }
}

/// Replaces `path`'s contents with `line` durably: a temp file beside it,
/// fsync, rename, fsync of the directory.
fn write_durably(path: &Path, line: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = fs::File::create(&tmp)?;
    writeln!(f, "{line}")?;
    f.sync_all()?;
    fs::rename(&tmp, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::File::open(dir)?.sync_all()
}

/// This machine's host name (`/proc/sys/kernel/hostname`, else
/// `/etc/hostname`), only the characters a host name may hold; empty when
/// neither is readable.
fn machine_hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| fs::read_to_string("/etc/hostname"))
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
        .collect()
}

/// The host a worker's executors' ports are reached at: `--host`, else
/// `127.0.0.1` when every configured master is on loopback (a local
/// cluster), else this machine's host name; `None` only when none is
/// known. Refused when longer than [`regent_core::limits::MAX_HOST_BYTES`].
pub fn executor_host(cfg: &WorkerConfig) -> Result<Option<String>, HostError> {
    let host = match &cfg.host {
        Some(h) => Some(h.clone()),
        None => {
            if all_loopback(&cfg.masters) {
                Some("127.0.0.1".to_string())
            } else {
                Some(machine_hostname()).filter(|h| !h.is_empty())
            }
        }
    };
    match host {
        Some(h) if h.is_empty() || h.len() > regent_core::limits::MAX_HOST_BYTES => {
            Err(HostError::BadHost { host: h })
        }
        h => Ok(h),
    }
}

/// `worker-<hostname>-<random hex>`: readable, and unique even for two
/// workers on one host.
fn generate_id() -> String {
    let host = machine_hostname();
    let suffix = format!("{:08x}", random_u64() as u32);
    if host.is_empty() {
        format!("worker-{suffix}")
    } else {
        format!("worker-{host}-{suffix}")
    }
}

/// Wall-clock milliseconds since the Unix epoch (the clock term of a new
/// leader's epoch, docs/design.md#epochs-fence-everything).
pub fn wall_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// How to run a worker (the flags of `regent worker`).
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The cluster name (sent in `Hello`; must be the one in `net`).
    pub cluster: String,
    /// The configured masters, as `host:port`. More are learned from the
    /// masters themselves.
    pub masters: Vec<Addr>,
    /// Cores offered to the cluster.
    pub cores: u32,
    /// Memory offered to the cluster, in MiB.
    pub memory_mb: u64,
    /// The work directory (created if missing).
    pub work_dir: PathBuf,
    /// The worker id; without one, an id is generated once and kept in
    /// `<work_dir>/worker-id`.
    pub id: Option<String>,
    /// How connections behave (cluster, secret, limits).
    pub net: Arc<NetConfig>,
    /// Allow masters on non-loopback addresses without a cluster secret.
    pub insecure: bool,
    /// Where the callback listener binds (masters dial it: a new leader
    /// tells the worker of itself, seed 002 (docs/design.md#seed-002)). `None`: `127.0.0.1:0` when
    /// every configured master is on loopback, else no listener. The smol
    /// runtime runs it; the std runtime has none.
    pub listen: Option<std::net::SocketAddr>,
    /// The address masters should dial (default: the bound address).
    pub advertise: Option<String>,
    /// Kill the executors a previous process of this worker left running
    /// (those proven its own) instead of adopting them.
    pub kill_left_behind: bool,
    /// The most bytes its artifact cache keeps
    /// ([`crate::exec::artifacts`]; `--artifact-cache-mb`).
    pub artifact_cache_bytes: u64,
    /// The attributes the worker announces (`--attribute rack=r1`), sorted
    /// by name, names unique.
    pub attributes: Vec<(String, String)>,
    /// The port ranges the worker offers executors' named ports from
    /// (`--ports 20000-20999`; [`regent_core::ports`]), sorted, not
    /// overlapping; empty: none.
    pub ports: Vec<regent_core::ports::PortRange>,
    /// The host executors' ports are reached at (`--host`; default:
    /// [`executor_host`]).
    pub host: Option<String>,
    /// The named resources the worker offers (`--resource gpu=0,1`, or
    /// found by `--resource-discovery`; [`regent_core::resources`]).
    pub resources: Vec<regent_core::resources::Resource>,
    /// When ended executors' directories are removed
    /// (`--work-dir-ttl`, `--work-dir-max-used`; [`crate::exec::gc`]).
    pub gc: crate::exec::gc::GcPolicy,
    /// How executors' limits are enforced (`--isolation`; cgroups when
    /// the host offers them: [`crate::exec::cgroup`]).
    pub isolation: crate::exec::cgroup::IsolationConfig,
    /// How executors' stdout and stderr are rotated
    /// (`--executor-log-max-bytes`, `--executor-log-files`;
    /// [`crate::exec::rotate`]).
    pub executor_logs: crate::exec::rotate::Rotation,
    /// The user every executor runs as (`--executor-user`; the worker must
    /// be root: [`crate::exec::user`]). `None`: the worker's own.
    pub executor_user: Option<String>,
    /// The users a group may name to run as (`--allowed-users`); others
    /// are refused at launch.
    pub allowed_users: Vec<String>,
    /// The program every executor runs under as its shim
    /// ([`crate::exec::shim`]; the `regent` binary, normally
    /// `std::env::current_exe()`), so a re-adopted executor's end is known.
    /// `None` starts commands directly.
    pub executor_shim: Option<PathBuf>,
}

/// Where a worker's callback listener binds: `cfg.listen`, or
/// `127.0.0.1:0` when every configured master is on loopback (a local
/// cluster works out of the box), else none. Refused, naming the address,
/// when it is not loopback and there is no secret and no `insecure`.
pub fn callback_listen(cfg: &WorkerConfig) -> Result<Option<std::net::SocketAddr>, HostError> {
    callback_listen_for(cfg.listen, &cfg.masters, cfg.net.secret.is_some(), cfg.insecure)
}

/// [`callback_listen`] for any peer that runs a callback listener (a
/// worker, `regent load`'s shared listener): `listen`, or `127.0.0.1:0`
/// when every master is on loopback, else none; refused, naming the
/// address, when it is not loopback and there is neither a secret nor
/// `insecure`.
pub fn callback_listen_for(
    listen: Option<std::net::SocketAddr>,
    masters: &[Addr],
    secret: bool,
    insecure: bool,
) -> Result<Option<std::net::SocketAddr>, HostError> {
    use std::net::{Ipv4Addr, SocketAddr};
    let listen = match listen {
        Some(l) => Some(l),
        None => all_loopback(masters).then_some(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))),
    };
    if let Some(l) = &listen {
        check_exposure(l, secret, insecure)
            .map_err(|source| HostError::ListenExposed { listen: *l, source })?;
    }
    Ok(listen)
}

/// Whether every one of `masters` resolves to loopback addresses only (a
/// cluster on one machine).
fn all_loopback(masters: &[Addr]) -> bool {
    masters.iter().all(|m| {
        m.as_str().to_socket_addrs().map(|mut a| a.all(|a| a.ip().is_loopback())).unwrap_or(false)
    })
}

/// What a worker runtime starts with: the supervisor over the work
/// directory (its lock held), what a previous process left behind, the
/// worker's id and the node's configuration.
#[derive(Debug)]
pub struct PreparedWorker {
    /// The executor supervisor; its events go to the sink given to
    /// [`prepare_worker`]. Its work directory is cleaned by a thread of
    /// its own ([`spawn_work_dir_gc`]) while it lives.
    pub supervisor: Arc<Supervisor>,
    /// Process groups a previous process of this worker left (adopted,
    /// killed, ended or left alone).
    pub left_behind: Vec<LeftBehind>,
    /// The worker id (given, or generated once and kept in the work dir).
    pub id: String,
    /// The worker node's configuration (a fresh incarnation, larger than
    /// every earlier one of this work directory: [`next_ordered_id`]).
    pub config: worker::Config,
}

/// Checks `cfg` and prepares a worker (blocking: resolution, the work
/// directory's lock, the id file). Fails naming the problem when the
/// cluster names differ, a configured master address is malformed or is
/// exposed without a secret (and not `insecure`), the id is empty, the work
/// directory cannot be used (or another worker holds it), or the id cannot
/// be read or stored, or the incarnation file is unreadable or corrupt
/// ([`next_ordered_id`]). Executor events go to `sink`, from the supervisor's
/// threads.
pub fn prepare_worker(
    cfg: &WorkerConfig,
    sink: impl Fn(ExecEvent) + Send + Sync + 'static,
) -> Result<PreparedWorker, HostError> {
    if cfg.cluster != cfg.net.cluster {
        return Err(HostError::ClusterMismatch {
            worker: cfg.cluster.clone(),
            net: cfg.net.cluster.clone(),
        });
    }
    check_masters(&cfg.masters, cfg.net.secret.is_some(), cfg.insecure)?;
    if cfg.id.as_ref().is_some_and(|id| id.trim().is_empty()) {
        return Err(HostError::EmptyWorkerId);
    }
    if let Some(problem) = regent_core::ports::ranges_problem(&cfg.ports) {
        return Err(HostError::BadPorts(problem));
    }
    if let Some(problem) = regent_core::resources::offers_problem(&cfg.resources) {
        return Err(HostError::BadResources(problem));
    }
    let mut sup_cfg = SupervisorConfig::new(cfg.work_dir.clone());
    if cfg.kill_left_behind {
        sup_cfg.left_behind = LeftBehindPolicy::Kill;
    }
    sup_cfg.shim = cfg.executor_shim.clone();
    sup_cfg.artifact_cache_bytes = cfg.artifact_cache_bytes;
    sup_cfg.log_rotation = Some(cfg.executor_logs);
    sup_cfg.run_as =
        cfg.executor_user.as_deref().map(crate::exec::user::RunAs::lookup).transpose()?;
    sup_cfg.allowed_users = cfg.allowed_users.clone();
    if let Some(user) = &sup_cfg.run_as {
        tracing::info!(user = %user.name, uid = user.uid, gid = user.gid, "executors run as another user");
    }
    let (supervisor, left_behind) = Supervisor::with_config(sup_cfg, sink)
        .map_err(|source| HostError::Supervise { dir: cfg.work_dir.clone(), source })?;
    // Under the supervisor's lock: no other worker races for the id file.
    let id = match &cfg.id {
        Some(id) => id.clone(),
        None => load_or_create_id(&cfg.work_dir)?,
    };
    // Written before it is used, under the same lock.
    let incarnation = Incarnation(next_ordered_id(&cfg.work_dir.join(INCARNATION_FILE))?);
    let mut config = worker::Config::new(
        cfg.cluster.clone(),
        WorkerId::new(id.clone()),
        incarnation,
        cfg.masters.clone(),
        cfg.cores,
        cfg.memory_mb,
    );
    config.attributes = cfg.attributes.clone();
    config.ports = cfg.ports.clone();
    config.resources = cfg.resources.clone();
    config.users = executor_users(cfg);
    config.host = executor_host(cfg)?;
    tracing::info!(
        worker = %id,
        %incarnation,
        masters = ?cfg.masters,
        cores = cfg.cores,
        memory_mb = cfg.memory_mb,
        ports = %regent_core::ports::describe_ranges(&cfg.ports),
        host = ?config.host,
        resources = %cfg.resources.iter().map(ToString::to_string).collect::<Vec<_>>().join(" "),
        work_dir = %cfg.work_dir.display(),
        "worker starting"
    );
    isolate(&supervisor, cfg, &id)?;
    let supervisor = Arc::new(supervisor);
    spawn_work_dir_gc(&supervisor, cfg.gc);
    Ok(PreparedWorker { supervisor, left_behind, id, config })
}

/// The users this worker starts executors as, announced to the leader so
/// it places a group naming a user only where it may run: the executor
/// user (`--executor-user`, else the worker's own), then, as root, every
/// `--allowed-users` one (a worker not running as root starts no one
/// else).
pub fn executor_users(cfg: &WorkerConfig) -> Vec<String> {
    let euid = rustix::process::geteuid();
    let own = cfg.executor_user.clone().or_else(|| {
        nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(euid.as_raw()))
            .ok()
            .flatten()
            .map(|u| u.name)
    });
    let mut users: Vec<String> = own.into_iter().collect();
    if euid.is_root() {
        for u in &cfg.allowed_users {
            if !users.contains(u) && users.len() < regent_core::launch::MAX_WORKER_USERS {
                users.push(u.clone());
            }
        }
    }
    users.retain(|u| regent_core::launch::is_user_name(u));
    users
}

/// Enforces executors' limits with cgroups as `cfg.isolation` says
/// ([`crate::exec::cgroup`]), or says clearly in the log that they are
/// accounted only.
fn isolate(supervisor: &Supervisor, cfg: &WorkerConfig, id: &str) -> Result<(), HostError> {
    use crate::exec::cgroup::{self, Cgroups, IsolationMode};
    let name = cgroup::worker_cgroup_name(id, &cfg.work_dir);
    match Cgroups::open(&cfg.isolation, &name)? {
        Some(cg) => {
            tracing::info!(
                isolation = %cg.offered(),
                delegated = cg.delegated(),
                parents = ?cg.parents(),
                pids_max = cg.pids_max(),
                "executors' memory, cpu and process limits are enforced with cgroups"
            );
            // A fresh supervisor: its cgroups were never set.
            let _ = supervisor.isolate(cg);
        }
        None if cfg.isolation.mode == IsolationMode::None => tracing::warn!(
            "--isolation none: executors' cores and memory are accounted only, not enforced"
        ),
        None => tracing::warn!(
            root = %cfg.isolation.root.display(),
            "no cgroup file system here: executors' cores and memory are accounted only, not \
             enforced"
        ),
    }
    Ok(())
}

/// How often a worker samples its executors' usage: as often as the node
/// sends it at most ([`regent_core::worker::USAGE_INTERVAL`]).
pub const USAGE_SAMPLE_EVERY: Duration =
    Duration::from_millis(regent_core::worker::USAGE_INTERVAL.0);

/// Samples `supervisor`'s usage ([`Supervisor::usage_sample`]) on a
/// thread of its own, first at once and then every `every`, handing each
/// sample to `send` (for the worker node's `Input::Usage`), until the
/// supervisor is dropped or `send` returns `false` (the daemon is gone).
pub fn spawn_usage_sampler(
    supervisor: &Arc<Supervisor>,
    every: Duration,
    send: impl Fn(regent_core::protocol::WorkerUsage) -> bool + Send + 'static,
) {
    spawn_periodic(supervisor, "regent-usage", every, move |sup| send(sup.usage_sample()))
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot start the usage sampler: executors' usage is not reported")
        });
}

/// Cleans `supervisor`'s work directory by `policy` on a thread of its
/// own ([`Supervisor::collect_garbage`]), first at once and then every
/// quarter of the time to live (at least every 10 minutes, at most every
/// second), until the supervisor is dropped.
pub fn spawn_work_dir_gc(supervisor: &Arc<Supervisor>, policy: crate::exec::gc::GcPolicy) {
    let every = (policy.ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(600));
    spawn_periodic(supervisor, "regent-work-dir-gc", every, move |sup| {
        let _ = sup.collect_garbage(policy, std::time::SystemTime::now());
        true
    })
    .unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot start the work directory's cleaning thread; ended executors' directories stay")
    });
}

/// Runs `work` on a thread named `name`, first at once and then every
/// `every`, until it returns `false` or the supervisor is dropped (looked
/// for at least every half second; the thread holds it only while `work`
/// runs).
fn spawn_periodic(
    supervisor: &Arc<Supervisor>,
    name: &str,
    every: Duration,
    work: impl Fn(&Supervisor) -> bool + Send + 'static,
) -> std::io::Result<()> {
    let weak = Arc::downgrade(supervisor);
    std::thread::Builder::new().name(name.into()).spawn(move || {
        let tick = every.min(Duration::from_millis(500));
        let mut waited = every;
        loop {
            if waited >= every {
                let Some(sup) = weak.upgrade() else { return };
                if !work(&sup) {
                    return;
                }
                waited = Duration::ZERO;
            }
            std::thread::sleep(tick);
            waited += tick;
            if weak.strong_count() == 0 {
                return;
            }
        }
    })?;
    Ok(())
}

/// The master machine's settings from a daemon's flags: the worker timeout,
/// the recovery window (default: the worker timeout), the heartbeat
/// interval (in the machine's milliseconds), the heartbeat ceiling and the
/// framework limit.
pub fn master_config(
    id: &str,
    advertise: regent_core::Addr,
    worker_timeout: Duration,
    recovery_timeout: Option<Duration>,
    heartbeat_interval: Duration,
    max_heartbeats_per_second: u32,
    max_frameworks: usize,
) -> regent_core::master::Config {
    let ms = |d: Duration| Millis(d.as_millis() as u64);
    let mut cfg = regent_core::master::Config::new(regent_core::MasterId::new(id), advertise);
    cfg.worker_timeout = ms(worker_timeout);
    cfg.recovery_timeout = ms(recovery_timeout.unwrap_or(worker_timeout));
    cfg.heartbeat_interval = ms(heartbeat_interval);
    cfg.max_heartbeats_per_second = max_heartbeats_per_second;
    cfg.max_frameworks = max_frameworks;
    cfg
}

/// A limit of this process read from `/proc/self/limits` (`Max open files`,
/// `Max processes`), soft value; `None` when unreadable or unlimited.
pub fn proc_limit(name: &str) -> Option<usize> {
    let limits = fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// A process's CPU time so far, user + system, in clock ticks (1/100 s on
/// Linux), from `/proc/PID/stat`.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// A process's resident set (`VmRSS`), in kB, from `/proc/PID/status`.
pub fn rss_kb(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()
}

/// A master's ceiling on peer connections: past `max` open ones, a new
/// connection is closed at once, and the log says so at most every 10 s
/// (with `why`, naming the ceiling and what raises it). Both runtimes'
/// masters keep one.
#[derive(Debug)]
pub struct ConnectionCeiling {
    /// The most peer connections at once.
    pub max: usize,
    /// Connections closed at once because the ceiling was reached.
    pub refused: u64,
    why: &'static str,
    logged: Option<Instant>,
}

impl ConnectionCeiling {
    /// A ceiling of `max` connections; `why` ends the log line.
    pub fn new(max: usize, why: &'static str) -> Self {
        ConnectionCeiling { max, refused: 0, why, logged: None }
    }

    /// Whether a connection accepted with `open` connections already open
    /// must be closed at once (counted, and logged when due).
    pub fn refuses(&mut self, open: usize, peer: Option<std::net::SocketAddr>) -> bool {
        if open < self.max {
            return false;
        }
        self.refused += 1;
        if self.logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            self.logged = Some(Instant::now());
            let peer = peer.map(|p| p.to_string()).unwrap_or_default();
            tracing::warn!(
                %peer,
                refused = self.refused,
                "refusing a connection: {open} connections are open, {}",
                self.why
            );
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id a process started with its clock `ms` milliseconds ahead
    /// would have drawn (as a predecessor did before the clock stepped
    /// back by that much).
    fn drawn_ahead(ms: u64) -> u64 {
        time_ordered_id() + (ms << 16)
    }

    #[test]
    fn an_id_drawn_after_the_clock_stepped_back_an_hour_is_newer() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join(INCARNATION_FILE);
        let before = drawn_ahead(3_600_000);
        fs::write(&path, format!("{before}\n")).expect("write the predecessor's id");
        let id = next_ordered_id(&path).expect("an id");
        assert_eq!(id, before + 1, "the predecessor's id + 1, not the clock's smaller id");
        assert_eq!(fs::read_to_string(&path).expect("the file"), format!("{id}\n"));
    }

    #[test]
    fn ids_drawn_in_a_row_grow_and_the_last_is_kept() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join(INCARNATION_FILE);
        let ids: Vec<u64> = (0..5).map(|_| next_ordered_id(&path).expect("an id")).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids {ids:?}");
        // The clock term leads while the clock moves forward.
        assert!(ids[0] >> 16 >= wall_clock_ms() - 60_000, "ids {ids:?}");
        assert_eq!(fs::read_to_string(&path).expect("the file").trim(), ids[4].to_string());
        assert!(!dir.path().join("incarnation.tmp").exists(), "no temp file left");
    }

    #[test]
    fn a_corrupt_id_file_is_an_error_naming_it_and_is_left_alone() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join(INCARNATION_FILE);
        for junk in ["", "not a number\n", "-3\n", "18446744073709551616\n"] {
            fs::write(&path, junk).expect("write junk");
            let err = next_ordered_id(&path).expect_err("a corrupt file").to_string();
            assert!(err.contains(&path.display().to_string()), "{err}");
            assert!(err.contains("is corrupt"), "{err}");
            assert_eq!(fs::read_to_string(&path).expect("the file"), junk, "left as it was");
        }
    }

    #[test]
    fn an_unreadable_id_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("a temp dir");
        // A directory where the file should be: cannot be read as a file.
        let path = dir.path().join(INCARNATION_FILE);
        fs::create_dir(&path).expect("a directory");
        let err = next_ordered_id(&path).expect_err("unreadable").to_string();
        assert!(err.contains("cannot read") && err.contains(&path.display().to_string()), "{err}");
    }

    #[test]
    fn the_largest_id_has_no_successor() {
        assert_eq!(ordered_after(5, None), Some(5));
        assert_eq!(ordered_after(5, Some(9)), Some(10));
        assert_eq!(ordered_after(50, Some(9)), Some(50));
        assert_eq!(ordered_after(5, Some(u64::MAX)), None);
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join(INCARNATION_FILE);
        fs::write(&path, u64::MAX.to_string()).expect("write");
        let err = next_ordered_id(&path).expect_err("no successor").to_string();
        assert!(err.contains("largest id"), "{err}");
    }

    #[test]
    fn submitters_side_by_side_draw_distinct_instances_from_one_state_dir() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let state = dir.path().join("state").join("regent");
        // The series starts an hour "ahead": every id below is last + 1.
        let before = drawn_ahead(3_600_000);
        fs::create_dir_all(&state).expect("the state dir");
        fs::write(state.join(INSTANCE_FILE), format!("{before}\n")).expect("write");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let state = state.clone();
                std::thread::spawn(move || {
                    (0..10)
                        .map(|_| next_instance_id(Some(&state)).expect("an id"))
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut ids: Vec<u64> =
            threads.into_iter().flat_map(|t| t.join().expect("no panic")).collect();
        ids.sort_unstable();
        let expected: Vec<u64> = (1..=80).map(|n| before + n).collect();
        assert_eq!(ids, expected, "80 distinct ids, each newer than the series' last");
    }

    #[test]
    fn a_state_dir_that_cannot_be_created_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let file = dir.path().join("a-file");
        fs::write(&file, "").expect("write");
        let state = file.join("regent");
        let err = next_instance_id(Some(&state)).expect_err("under a file").to_string();
        assert!(err.contains(&state.display().to_string()), "{err}");
        // Without a state directory, the clock's id.
        let id = next_instance_id(None).expect("an id");
        assert!(id >> 16 >= wall_clock_ms() - 60_000);
    }
}

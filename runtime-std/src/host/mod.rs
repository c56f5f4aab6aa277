//! Host helpers both runtimes' daemons share, outside any pump, by
//! subject: [`ids`] (the worker's id file and the durable series of
//! incarnation and instance ids, ordered even when the wall clock steps
//! back), [`worker`] (checking a worker's configuration, preparing its
//! supervisor and node configuration, carrying out its executor commands),
//! [`procfs`] (what `/proc` tells of a process and this machine),
//! [`ceiling`] (a master's ceiling on peer connections), and the wall
//! clock (the runtime clock is [`crate::clock::RuntimeClock`]). The
//! errors of them all are [`HostError`]. No protocol decision lives here;
//! the log lines of the nodes' notes are [`crate::notes`]'.

use crate::exec::SupervisorError;
use crate::net::NetError;
use regent_core::Addr;
use std::path::PathBuf;

pub mod ceiling;
pub mod ids;
pub mod procfs;
pub mod worker;

pub use ceiling::ConnectionCeiling;
pub use ids::{
    default_state_dir, load_or_create_id, next_instance_id, next_ordered_id, ID_FILE,
    INCARNATION_FILE, INSTANCE_FILE,
};
pub use procfs::{cpu_ticks, proc_limit, rss_kb};
pub use worker::{
    callback_listen, callback_listen_for, check_masters, exec_input, execute_executor_command,
    executor_host, executor_users, left_behind_inputs, left_behind_report, persist_word,
    prepare_worker, read_executor_log, spawn_usage_sampler, spawn_work_dir_gc, PreparedWorker,
    WorkerConfig, CONNECT_TIMEOUT, FLUSH_GRACE, USAGE_SAMPLE_EVERY,
};

/// Wall-clock milliseconds since the Unix epoch (the clock term of a new
/// leader's epoch, docs/design.md#epochs-fence-everything).
pub fn wall_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
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

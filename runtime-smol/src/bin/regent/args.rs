//! The command line's argument types (clap): every subcommand and its
//! flags. No behaviour here: `main.rs` dispatches, `daemons.rs`,
//! `operator.rs` and `store.rs` run the commands.

use clap::{Args, Parser, Subcommand, ValueEnum};
use regent_core::token::Capability;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "regent", version, about = "A fault-tolerant cluster manager")]
pub struct Cli {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// The cluster's name; peers of another cluster are refused.
    #[arg(long, env = "REGENT_CLUSTER", global = true, default_value = "regent")]
    pub cluster: String,
    /// A file holding the cluster secret (at least 16 bytes): every
    /// connection then authenticates and every frame carries a MAC.
    #[arg(long, env = "REGENT_SECRET_FILE", global = true, value_name = "F")]
    pub secret_file: Option<PathBuf>,
    /// A file holding a token (`rgt1.…`, docs/security.md) to dial masters
    /// with instead of the cluster secret: the master then allows what the
    /// token's capabilities grant (a worker daemon, a framework, an
    /// operator command).
    #[arg(long, env = "REGENT_TOKEN_FILE", global = true, value_name = "F")]
    pub token_file: Option<PathBuf>,
    /// Allow non-loopback addresses without a secret.
    #[arg(long, env = "REGENT_INSECURE", global = true)]
    pub insecure: bool,
    /// This node's TLS certificate (PEM, then any intermediates): every
    /// connection then runs over mutual TLS. With --tls-key and --tls-ca.
    #[arg(long, env = "REGENT_TLS_CERT", global = true, value_name = "F")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "REGENT_TLS_KEY", global = true, value_name = "F")]
    pub tls_key: Option<PathBuf>,
    /// The cluster's CA certificate (PEM): a peer's certificate must chain
    /// to it.
    #[arg(long, env = "REGENT_TLS_CA", global = true, value_name = "F")]
    pub tls_ca: Option<PathBuf>,
    /// Accept plain-TCP peers too (a rollout to TLS: the accepting nodes
    /// first, then every dialling node, then without this flag).
    #[arg(long, env = "REGENT_TLS_OPTIONAL", global = true)]
    pub tls_optional: bool,
    /// Which runtime drives `master`, `worker` and `submit`: `smol` (async,
    /// every feature) or `std` (blocking threads; recovery none/filesystem,
    /// no ZooKeeper; the same HTTP endpoints).
    #[arg(long, env = "REGENT_RUNTIME", global = true, value_enum, default_value = "smol")]
    pub runtime: Runtime,
}

/// `--connect-timeout` of the client commands.
#[derive(Args, Debug, Clone, Copy)]
pub struct ConnectTimeout {
    /// How long (seconds) to keep trying to reach a first master before
    /// giving up with an error naming every master tried (at most one
    /// "still trying" line every few seconds meanwhile).
    #[arg(long = "connect-timeout", value_name = "SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub secs: u64,
}

impl ConnectTimeout {
    pub fn duration(self) -> Duration {
        Duration::from_secs(self.secs)
    }
}

/// `regent executor-shim` (see `regent_std::exec::shim`).
#[derive(Args, Debug)]
pub struct ExecutorShimArgs {
    /// Where the command's exit status is recorded.
    #[arg(long, value_name = "FILE")]
    pub status: PathBuf,
    /// The file the command's stdout is appended to.
    #[arg(long, value_name = "FILE")]
    pub stdout: PathBuf,
    /// The command's stderr file (with rotation; else it inherits the
    /// shim's stderr).
    #[arg(long, value_name = "FILE")]
    pub stderr: Option<PathBuf>,
    /// Rotate the command's output at this many bytes per file.
    #[arg(long, value_name = "BYTES", requires = "log_files",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub log_max_bytes: Option<u64>,
    /// Keep this many files per output stream.
    #[arg(long, value_name = "FILES", requires = "log_max_bytes",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub log_files: Option<u32>,
    /// Run the command as UID:GID:GROUPS.
    #[arg(long, value_name = "UID:GID:GROUPS",
          value_parser = |s: &str| s.parse::<regent_std::exec::user::Identity>())]
    pub user: Option<regent_std::exec::user::Identity>,
    /// A cgroup to join before the command starts (one per hierarchy).
    #[arg(long = "cgroup", value_name = "DIR")]
    pub cgroups: Vec<PathBuf>,
    /// A singleton's lease: the worker's word file (its last word from a
    /// master, boot-clock ms); the command is stopped once `--stop-after`
    /// has passed since (docs/design.md#issue-45).
    #[arg(long, value_name = "FILE", requires_all = ["stop_after", "grace"])]
    pub word: Option<PathBuf>,
    /// The lease's length, in ms (with `--word`).
    #[arg(long, value_name = "MS", requires = "word",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub stop_after: Option<u64>,
    /// How long after SIGTERM a lapsed lease waits before SIGKILL, in ms
    /// (with `--word`).
    #[arg(long, value_name = "MS", requires = "word")]
    pub grace: Option<u64>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    Smol,
    Std,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a master.
    Master(MasterArgs),
    /// Run a worker.
    Worker(WorkerArgs),
    /// Submit an application: one group of executors running CMD.
    Submit(SubmitArgs),
    /// Run a job file (docs/jobs.md): declare its groups and follow them
    /// like `submit` does, until every slot is done.
    Run(RunArgs),
    /// Job files and the jobs the leader owns: `regent job validate`,
    /// `plan`, `submit`, `status`, `delete`.
    Job {
        #[command(subcommand)]
        command: JobCommand,
    },
    /// Scoped credentials (docs/security.md): `regent token create`,
    /// `regent token revoke`.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Tenants (docs/tenants.md): `regent tenant set`, `list`.
    Tenant {
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// Show the leader's view of the cluster.
    Status {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        /// Print the same JSON as `GET /api/state`.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Follow the cluster's changes: one line per change (workers,
    /// frameworks, executors, leader with its epoch), from the leader,
    /// following it across failovers; until interrupted.
    ///
    /// With --http: the leader's `GET /v1/events` stream, every event with
    /// its index, resumed at the next master after the last index (a gap
    /// line when events were missed). With --masters: the wire protocol,
    /// which needs no HTTP port: a snapshot, then the difference of the
    /// leader's state every 250 ms.
    Events {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(
            long,
            value_delimiter = ',',
            required_unless_present = "http",
            conflicts_with = "http"
        )]
        masters: Vec<String>,
        /// Every master's `--http` base URL (`http://HOST:PORT,...`, plain
        /// HTTP): follow `GET /v1/events` instead of the wire protocol.
        #[arg(long, value_delimiter = ',', value_name = "URL")]
        http: Vec<String>,
        /// A file holding the bearer token (`regent token create
        /// --capability read`, or `regent http-token`), needed by a master
        /// with a cluster secret (with --http; without it, the full token
        /// of --secret-file is sent).
        #[arg(long, value_name = "FILE", requires = "http")]
        token_file: Option<std::path::PathBuf>,
        /// Resume after this index (`EPOCH.SEQ`, as a previous run printed
        /// with --json; with --http).
        #[arg(long, value_name = "INDEX", requires = "http")]
        after: Option<String>,
        /// One JSON object per line: with --http the lines as
        /// `/v1/events` sends them (heartbeats left out); else the snapshot,
        /// then the events as `GET /api/events` sends them.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Tear a framework down (kill its executors).
    Kill {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        /// The framework.
        framework_id: String,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Print an executor's output (its stdout, or its stderr), relayed by
    /// the leader from the executor's worker. Bytes are written as they are.
    Logs {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        /// The executor (`regent status` lists them).
        executor_id: String,
        /// Print its standard error instead of its standard output.
        #[arg(long)]
        stderr: bool,
        /// Keep printing new output until the executor has ended and
        /// everything was printed (then exit 0); survives a leader failover.
        #[arg(long, short = 'f')]
        follow: bool,
        /// Start this many bytes before the end instead of at the start.
        #[arg(long, value_name = "N")]
        tail_bytes: Option<u64>,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Remove a worker left UNKNOWN by the recovery removal limit.
    RemoveWorker {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        /// The worker.
        worker_id: String,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Ask the leader to step down: it closes its ZooKeeper session so a
    /// standby leads at once, stays up as a standby and rejoins the election
    /// (ZooKeeper mode only; refused by a single-master leader).
    StepDown {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Cordon a worker: place nothing new on it; what runs on it keeps
    /// running. Durable (a restarted worker or a new leader keeps it).
    Cordon {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        /// The worker.
        worker_id: String,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Clear a worker's cordon or drain: executors are placed on it again.
    Uncordon {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        /// The worker.
        worker_id: String,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Drain a worker: cordon it, stop its executors (SIGTERM now, SIGKILL
    /// at the deadline), place their slots on other workers without
    /// charging any retry budget; the worker is DRAINED once nothing runs on
    /// it. Shows the executors left until then, unless --no-wait.
    Drain {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        /// The worker.
        worker_id: String,
        /// How long executors get between SIGTERM and SIGKILL: `90s`,
        /// `500ms`, `5m`, `1h` (a bare number is seconds; at most 7 days).
        #[arg(long, default_value = "60s", value_parser = regent_smol::client::parse_deadline)]
        deadline: Duration,
        /// Return once the drain is accepted (durable), without waiting for
        /// the worker to be DRAINED.
        #[arg(long)]
        no_wait: bool,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Give a running group N slots, up or down. Scaling down kills the
    /// executors of the highest slots and drops those slots; scaling up
    /// places new slots. With --remove, the named executors are the ones
    /// that go and every other keeps running in its slot (fewer named than
    /// the reduction: the highest other slots go too; the count kept or
    /// raised: the named ones are replaced, no retry charged). One durable
    /// change; the application's subscriber is told.
    Scale {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        /// The framework.
        framework_id: String,
        /// The group.
        group: String,
        /// The slot count wanted (1 to 2048).
        slots: u32,
        /// The executors to remove (as `regent status` lists them), up to
        /// 1000: each must be a live executor of the group, or nothing
        /// changes.
        #[arg(long, value_delimiter = ',', value_name = "ID,...")]
        remove: Vec<String>,
        /// Stop the removed executors with this signal first (TERM, INT,
        /// HUP, QUIT, USR1, USR2), SIGKILL at --deadline. Without --signal
        /// or --deadline they are killed as `regent kill` kills (SIGTERM,
        /// SIGKILL after the group's kill grace).
        #[arg(long, requires = "remove", value_parser = parse_signal)]
        signal: Option<regent_core::api::StopSignal>,
        /// How long the removed executors get between the signal and
        /// SIGKILL: `30s`, `500ms`, `5m` (a bare number is seconds; at most
        /// 7 days; default 30s with --signal).
        #[arg(long, requires = "remove", value_parser = regent_smol::client::parse_deadline)]
        deadline: Option<Duration>,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Kill one executor. By default its slot is refilled: a replacement is
    /// placed (an operator's kill is not a failure: no retry is charged).
    /// With --no-refill the slot is recorded as killed and left empty.
    KillExecutor {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        /// The executor (as `regent status` lists it).
        executor_id: String,
        /// Leave the slot empty (recorded as killed) instead of placing a
        /// replacement.
        #[arg(long)]
        no_refill: bool,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Report one result of a `manual` health check of a running executor
    /// (as its framework would; `POST /v1/executors/{id}/health`). The
    /// leader relays it to the executor's worker, which counts it like a
    /// run of the check; it holds for the check's TTL (docs/jobs.md,
    /// health checks).
    ReportHealth {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        /// The executor (as `regent status` lists it).
        executor_id: String,
        /// The name of one of its group's manual checks.
        #[arg(long, value_name = "NAME")]
        check: String,
        /// The check passed.
        #[arg(long, conflicts_with = "failing", required_unless_present = "failing")]
        passing: bool,
        /// The check failed.
        #[arg(long)]
        failing: bool,
        /// What to say about it (shown with the executor's health).
        #[arg(long, default_value = "")]
        detail: String,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
    },
    /// Print the cluster's full bearer token for a master's HTTP server
    /// (`Authorization: Bearer <token>`: the root), derived from the
    /// cluster secret given with `--secret-file`.
    HttpToken {
        /// Print the read-only token instead: it may only read (`GET`);
        /// a write under `/v1/` with it is refused with 403.
        #[arg(long)]
        read_only: bool,
    },
    /// Print the audit log: every change a client asked, accepted or
    /// refused, from `GET /v1/audit` of every master given, merged by time
    /// (each master logs what it answered while it led). Needs a token with
    /// `operator` (--token-file), or --secret-file.
    Audit {
        /// Every master's `--http` base URL (`http://HOST:PORT,...`).
        #[arg(long, value_delimiter = ',', value_name = "URL", required = true)]
        http: Vec<String>,
        /// Only records at or after this wall-clock time (ms since the
        /// Unix epoch).
        #[arg(long, value_name = "MS", default_value_t = 0)]
        since: u64,
        /// A file holding the bearer token (without it, the full token of
        /// --secret-file is sent).
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
    },
    /// Inspect a filesystem store.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// The main job: a master, three workers and an application in one
    /// process; the master is killed and restarted while executors run.
    Demo,
    /// As root, just before a worker that runs as USER starts in the same
    /// cgroups (a systemd unit's `ExecStartPre=+`): on cgroup v1, gives
    /// USER this process's own memory, cpu, cpuacct and pids cgroups (the
    /// directories, their cgroup.procs and tasks), which systemd's
    /// Delegate=yes does not hand to a unit with User= there, so the worker
    /// can make its executors' cgroups below them. Does nothing on cgroup
    /// v2, where Delegate=yes does it.
    DelegateCgroups {
        /// The user the worker runs as.
        #[arg(long)]
        user: String,
        /// Where the cgroup file systems are mounted.
        #[arg(long, value_name = "DIR", default_value = "/sys/fs/cgroup")]
        cgroup_root: PathBuf,
    },
    /// Internal: the parent process a worker runs every executor under
    /// (records how the command ended in `--status`).
    #[command(hide = true, name = "executor-shim")]
    ExecutorShim(ExecutorShimArgs),
    /// TLS material for a cluster (docs/design.md#issue-24, first step: the connections do
    /// not use it yet).
    Tls {
        #[command(subcommand)]
        command: TlsCommand,
    },
    /// A load generator: N simulated workers (real worker nodes on real
    /// connections; executors simulated) and optionally M frameworks
    /// declaring K executors, then a report of registration time, heartbeat
    /// round trips, rejections and errors (and the master's CPU and RSS
    /// given --master-pid).
    Load(LoadArgs),
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// The masters (`host:port,...` or `zk://HOSTS/ROOT`).
    #[arg(long, value_delimiter = ',', required = true)]
    pub masters: Vec<String>,
    /// Simulated workers in this process.
    #[arg(long, default_value_t = 1_000)]
    pub workers: usize,
    /// Seconds measured once every worker is registered.
    #[arg(long, default_value_t = 10)]
    pub secs: u64,
    /// Frameworks to run (each declares its share of --executors).
    #[arg(long, default_value_t = 0)]
    pub frameworks: usize,
    /// Executors the frameworks declare in total (1 core, 1 MiB each).
    #[arg(long, default_value_t = 0)]
    pub executors: u32,
    /// Cores each simulated worker offers.
    #[arg(long, default_value_t = 8)]
    pub cores: u32,
    /// Memory each simulated worker offers, in MiB.
    #[arg(long, default_value_t = 8_192)]
    pub memory: u64,
    /// This process's part of a load shared by several processes (`I/N`,
    /// I from 0): its workers are named `load-I-<j>`.
    #[arg(long, default_value = "0/1", value_parser = parse_shard)]
    pub shard: (u32, u32),
    /// The master's pid: its CPU and RSS are read from /proc over the run.
    #[arg(long, value_name = "PID")]
    pub master_pid: Option<u32>,
    /// Seconds to wait for every worker to register before measuring anyway.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub register_within: u64,
    /// Start the simulated workers evenly over this many milliseconds
    /// instead of all at once, so their heartbeats spread over the interval
    /// as a running cluster's do (registration time then includes it).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub spread_start: u64,
    /// Print one line of JSON at the end instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Where the simulated peers' shared callback listener binds (a new
    /// leader dials it once and every simulated peer hears it). Default
    /// `127.0.0.1:0` when every master is on loopback, else none. A
    /// non-loopback address needs --secret-file (or --insecure).
    #[arg(long, conflicts_with = "no_callback")]
    pub listen: Option<SocketAddr>,
    /// The address masters should dial for the shared callback listener
    /// (default: the bound address).
    #[arg(long, conflicts_with = "no_callback")]
    pub advertise: Option<String>,
    /// Run no callback listener: the simulated peers find a new leader only
    /// through --masters and the master set leaders advertise.
    #[arg(long)]
    pub no_callback: bool,
}

pub fn parse_shard(s: &str) -> Result<(u32, u32), String> {
    let (i, n) = s.split_once('/').ok_or_else(|| format!("{s}: expected I/N, e.g. 0/2"))?;
    let i: u32 = i.parse().map_err(|_| format!("{s}: I is not a number"))?;
    let n: u32 = n.parse().map_err(|_| format!("{s}: N is not a number"))?;
    if n == 0 || i >= n {
        return Err(format!("{s}: needs 0 <= I < N"));
    }
    Ok((i, n))
}

#[derive(Subcommand, Debug)]
pub enum StoreCommand {
    /// Verify every record, naming any damaged one (with --secret-file, as a
    /// master with that secret would: a record that is not sealed under it
    /// is named too). A filesystem store's directory, or a ZooKeeper
    /// cluster's records (--zk, --zk-root; both layouts: sharded, and the
    /// flat one of earlier versions), read only.
    Check(StoreArgs),
    /// Print every record (a directory, or --zk).
    Dump(StoreArgs),
    /// Seal every record under the cluster secret (--secret-file), with
    /// every master of the cluster stopped: records sealed under a previous
    /// secret (--previous-secret-file) or, with --accept-unsealed, written
    /// without a secret are verified and written again under the current
    /// one. In ZooKeeper, every node of the cluster is also made readable
    /// and writable by the current secret only.
    Seal(SealArgs),
}

#[derive(Args, Debug)]
pub struct StoreArgs {
    /// The filesystem store's directory (or give --zk).
    #[arg(required_unless_present = "zk", conflicts_with = "zk")]
    pub dir: Option<PathBuf>,
    /// The ZooKeeper servers of a `--recovery zookeeper` cluster.
    #[arg(long, value_delimiter = ',')]
    pub zk: Vec<String>,
    /// The cluster's root node in ZooKeeper.
    #[arg(long, default_value = "/regent")]
    pub zk_root: String,
}

#[derive(Args, Debug)]
pub struct SealArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// A file holding a previous cluster secret whose records are verified
    /// and re-sealed (repeat for several).
    #[arg(long = "previous-secret-file", value_name = "F")]
    pub previous_secret_files: Vec<PathBuf>,
    /// Also accept records that carry no seal (a store from before the
    /// secret was set), checked by their CRC only: say so only for a store
    /// you trust (see `regent store dump`).
    #[arg(long)]
    pub accept_unsealed: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryMode {
    None,
    Filesystem,
    Zookeeper,
}

#[derive(Args, Debug)]
pub struct MasterArgs {
    /// A TOML file of this command's settings, one `key = value` a line,
    /// the keys being the long flags' names (`zk-root = "/regent"`, `zk =
    /// ["h1:2181", "h2:2181"]`, `insecure = true`). A flag on the command
    /// line or a REGENT_* variable wins over the file; an unknown key is an
    /// error naming its line. See deploy/README.md.
    #[arg(long, env = "REGENT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// This master's id.
    #[arg(long, env = "REGENT_ID")]
    pub id: String,
    /// Where workers and subscribers connect.
    #[arg(long, env = "REGENT_LISTEN")]
    pub listen: SocketAddr,
    /// Where to serve the web page, /api/state, /api/events and /metrics
    /// (read-only; both runtimes).
    /// A non-loopback address needs --secret-file (or --insecure); with a
    /// secret every request needs `Authorization: Bearer <token>`, on
    /// loopback too: a token of `regent token create` or `regent
    /// http-token`.
    #[arg(long, env = "REGENT_HTTP")]
    pub http: Option<SocketAddr>,
    /// Where master state survives a crash.
    #[arg(long, env = "REGENT_RECOVERY", value_enum, default_value = "none")]
    pub recovery: RecoveryMode,
    /// The filesystem store's directory (`--recovery filesystem`).
    #[arg(long, env = "REGENT_STORE")]
    pub store: Option<PathBuf>,
    /// ZooKeeper servers (`--recovery zookeeper`). A host that is not
    /// loopback needs --secret-file (or --insecure).
    #[arg(long, env = "REGENT_ZK", value_delimiter = ',')]
    pub zk: Vec<String>,
    /// The cluster's root node in ZooKeeper.
    #[arg(long, env = "REGENT_ZK_ROOT", default_value = "/regent")]
    pub zk_root: String,
    /// The ZooKeeper session timeout to ask for, in ms (the server clamps it
    /// to [2, 20] x its tickTime).
    #[arg(long, env = "REGENT_ZK_SESSION_TIMEOUT", default_value_t = 4000)]
    pub zk_session_timeout: u64,
    /// The most ZooKeeper store writes (to distinct records) in flight at
    /// once; 1 writes one record per round trip.
    #[arg(
        long,
        env = "REGENT_ZK_WRITE_WINDOW",
        default_value_t = regent_core::zk::DEFAULT_WRITE_WINDOW as u64,
        value_parser = clap::value_parser!(u64).range(1..=100_000)
    )]
    pub zk_write_window: u64,
    /// A worker silent this long (ms) is DEAD.
    #[arg(long, env = "REGENT_WORKER_TIMEOUT", default_value_t = 10_000)]
    pub worker_timeout: u64,
    /// How long (ms) a new leader waits for recovered workers; defaults to
    /// the worker timeout.
    #[arg(long, env = "REGENT_RECOVERY_TIMEOUT")]
    pub recovery_timeout: Option<u64>,
    /// How often (ms) workers heartbeat, at least.
    #[arg(long, env = "REGENT_HEARTBEAT_INTERVAL", default_value_t = 1000)]
    pub heartbeat_interval: u64,
    /// Heartbeat load control: the most heartbeats per second all workers
    /// send together. Past it the leader tells each worker a longer
    /// interval (workers / N seconds, jittered) and its DEAD timeout grows
    /// in proportion. 0: no ceiling.
    #[arg(long, env = "REGENT_MAX_HEARTBEATS_PER_SECOND", default_value_t = regent_core::master::DEFAULT_MAX_HEARTBEATS_PER_SECOND)]
    pub max_heartbeats_per_second: u32,
    /// Whether a waiting slot may preempt executors of a richer tenant
    /// (docs/tenants.md; only once a tenant is set): `on` or `off`.
    #[arg(long, env = "REGENT_PREEMPTION", value_enum, default_value_t = Switch::On)]
    pub preemption: Switch,
    /// How many frameworks the cluster keeps records of; a SUBSCRIBE of a
    /// new framework past it is refused and that submit stops (existing
    /// frameworks resubscribe). At most 100000, and at most 4000 with
    /// `--recovery zookeeper` (every framework record in one shard must
    /// still list within ZooKeeper's packet limit).
    #[arg(long, env = "REGENT_MAX_FRAMEWORKS", default_value_t = regent_core::limits::DEFAULT_MAX_FRAMEWORKS as u64,
          value_parser = clap::value_parser!(u64).range(1..=regent_core::limits::MAX_FRAMEWORKS_LIMIT as u64))]
    pub max_frameworks: u64,
    /// How many workers the cluster keeps (every worker id the leader
    /// knows, DEAD ones included); a registration of a new worker id past
    /// it is refused, and that worker logs the reason and retries slowly
    /// (known workers always register again). At most 1000000.
    /// Independently, a new worker id whose record would take its store
    /// shard's listing past ZooKeeper's packet limit is refused.
    #[arg(long, env = "REGENT_MAX_WORKERS", default_value_t = regent_core::limits::DEFAULT_MAX_WORKERS as u64,
          value_parser = clap::value_parser!(u64).range(1..=regent_core::limits::MAX_WORKERS_LIMIT as u64))]
    pub max_workers: u64,
    /// How many finished frameworks the leader keeps (shown by `regent
    /// status` and `/api/state` under "history"); older ones are deleted
    /// from the store. Like Spark's `spark.deploy.retainedApplications`.
    /// At most 10000.
    #[arg(long, env = "REGENT_RETAINED_FRAMEWORKS", value_name = "N", default_value_t = regent_core::limits::DEFAULT_RETAINED_FRAMEWORKS as u64,
          value_parser = clap::value_parser!(u64).range(0..=regent_core::limits::MAX_RETAINED_FRAMEWORKS as u64))]
    pub retained_frameworks: u64,
    /// `--runtime std` only: the most peer connections at once (two threads
    /// each); one more is closed at once with a log line. Checked at start
    /// against the process's file and thread limits. The smol runtime has no
    /// such ceiling (file descriptors only).
    #[arg(long, env = "REGENT_MAX_CONNECTIONS", value_name = "N")]
    pub max_connections: Option<usize>,
    /// Where the audit log goes: every change a client asked, accepted or
    /// refused, one JSON line each (default: audit.log in --store's
    /// directory with --recovery filesystem; none otherwise).
    #[arg(long, env = "REGENT_AUDIT_LOG", value_name = "PATH")]
    pub audit_log: Option<PathBuf>,
    /// The address advertised to workers and other masters (default: the
    /// listen address).
    #[arg(long, env = "REGENT_ADVERTISE")]
    pub advertise: Option<String>,
    /// A file holding a previous cluster secret (a rotation; repeat for
    /// several): records sealed under it are still read, and re-sealed under
    /// --secret-file; ZooKeeper sessions also authenticate with it.
    #[arg(long = "previous-secret-file", env = "REGENT_PREVIOUS_SECRET_FILE", value_name = "F")]
    pub previous_secret_files: Vec<PathBuf>,
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// A TOML file of this command's settings, one `key = value` a line,
    /// the keys being the long flags' names (`zk-root = "/regent"`, `zk =
    /// ["h1:2181", "h2:2181"]`, `insecure = true`). A flag on the command
    /// line or a REGENT_* variable wins over the file; an unknown key is an
    /// error naming its line. See deploy/README.md.
    #[arg(long, env = "REGENT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The masters, `host:port,...`, or `zk://HOST:PORT[,...]/ROOT` to read
    /// them from the election in ZooKeeper.
    #[arg(long, env = "REGENT_MASTERS", value_delimiter = ',', required = true)]
    pub masters: Vec<String>,
    /// Cores offered (accounted, not enforced).
    #[arg(long, env = "REGENT_CORES")]
    pub cores: u32,
    /// Memory offered in MiB (accounted, not enforced).
    #[arg(long, env = "REGENT_MEMORY")]
    pub memory: u64,
    /// Where executors run and their output is kept.
    #[arg(long, env = "REGENT_WORK_DIR")]
    pub work_dir: PathBuf,
    /// The worker's id (default: generated once and kept in the work dir).
    #[arg(long, env = "REGENT_ID")]
    pub id: Option<String>,
    /// Where the callback listener binds: a new leader — even one at an
    /// address this worker never knew — dials it to say it leads. Default
    /// `127.0.0.1:0` when every master is on loopback, else none. A
    /// non-loopback address needs --secret-file (or --insecure). Smol
    /// runtime only.
    #[arg(long, env = "REGENT_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// The address masters should dial for the callback listener (default:
    /// the bound address).
    #[arg(long, env = "REGENT_ADVERTISE")]
    pub advertise: Option<String>,
    /// Kill the executors a previous process of this worker (same work
    /// directory) left running, instead of adopting them. Only processes
    /// proven this worker's (same boot, same start time, still leading their
    /// process group) are killed; what cannot be proven is left alone and
    /// logged either way.
    #[arg(long, env = "REGENT_KILL_LEFT_BEHIND")]
    pub kill_left_behind: bool,
    /// The most MiB the worker's artifact cache
    /// (`<work-dir>/artifact-cache`, by digest) keeps; the least recently
    /// used artifacts go first. An artifact larger than this is refused.
    #[arg(long, env = "REGENT_ARTIFACT_CACHE_MB", default_value_t = 1024, value_name = "MIB")]
    pub artifact_cache_mb: u64,
    /// An attribute this worker announces, `KEY=VALUE` (repeatable:
    /// `--attribute rack=r1 --attribute disk=ssd`); a group's constraints
    /// and `spread` match them. Names are unique. Several may be given at
    /// once separated by commas, as `REGENT_ATTRIBUTE=rack=r1,disk=ssd`
    /// does (a value cannot hold a comma).
    #[arg(
        long = "attribute",
        env = "REGENT_ATTRIBUTE",
        value_delimiter = ',',
        value_name = "KEY=VALUE"
    )]
    pub attribute: Vec<String>,
    /// The port numbers this worker offers executors' named ports from,
    /// `FIRST-LAST` or one port, comma-separated (`20000-20999,8080`):
    /// counted by the leader like cores, numbered by the worker at launch
    /// (`REGENT_PORT_<NAME>`). Default: none (a group naming ports is
    /// placed elsewhere).
    #[arg(long, env = "REGENT_PORTS", value_name = "RANGES", value_parser = parse_port_ranges)]
    pub ports: Option<PortRanges>,
    /// The host executors' ports are reached at, told to the frameworks
    /// with every executor's ports (default: 127.0.0.1 when every master
    /// is on loopback, else this machine's host name).
    #[arg(long, env = "REGENT_HOST")]
    pub host: Option<String>,
    /// A named resource this worker offers, `NAME=ADDRESS,...`
    /// (repeatable: `--resource gpu=0,1,2,3 --resource fpga=a`): counted by
    /// the leader like cores; each executor asking for some gets addresses
    /// of its own (`REGENT_RESOURCE_<NAME>`, and `CUDA_VISIBLE_DEVICES` for
    /// `gpu`). `REGENT_RESOURCE` takes several separated by `;`.
    #[arg(
        long = "resource",
        env = "REGENT_RESOURCE",
        value_delimiter = ';',
        value_name = "NAME=ADDRESS,...",
        value_parser = parse_resource_offer
    )]
    pub resource: Vec<regent_core::resources::Resource>,
    /// A script printing a named resource's addresses in Spark's format,
    /// `{"name":"gpu","addresses":["0","1"]}`, run once at start
    /// (repeatable: `--resource-discovery gpu=/opt/find-gpus.sh`; the
    /// worker does not start if it fails). `REGENT_RESOURCE_DISCOVERY`
    /// takes several separated by `;`.
    #[arg(
        long = "resource-discovery",
        env = "REGENT_RESOURCE_DISCOVERY",
        value_delimiter = ';',
        value_name = "NAME=SCRIPT"
    )]
    pub resource_discovery: Vec<String>,
    /// How long the directory of an executor that ended (its output
    /// included) is kept after it last changed (`7d`, `12h`); then it is
    /// removed. Never a running or re-adoptable executor's.
    #[arg(long, env = "REGENT_WORK_DIR_TTL", value_name = "DURATION", default_value = "7d",
          value_parser = parse_duration_ms)]
    pub work_dir_ttl: u64,
    /// While the work directory's file system is fuller than this percent,
    /// ended executors' directories are removed, oldest first (100: never
    /// for space).
    #[arg(long, env = "REGENT_WORK_DIR_MAX_USED", value_name = "PERCENT", default_value_t = 90,
          value_parser = clap::value_parser!(u8).range(1..=100))]
    pub work_dir_max_used: u8,
    /// How executors' cores, memory and process counts are enforced:
    /// `cgroups` (one cgroup per executor; the worker does not start when
    /// it cannot make them, and says why), `none` (accounted only, logged),
    /// or `auto`: cgroups when the host has a cgroup file system (v2, or
    /// the v1 controllers), else none. See docs/operating.md.
    #[arg(long, env = "REGENT_ISOLATION", value_name = "auto|cgroups|none", default_value = "auto",
          value_parser = |s: &str| s.parse::<regent_std::exec::cgroup::IsolationMode>())]
    pub isolation: regent_std::exec::cgroup::IsolationMode,
    /// Where the cgroup file systems are mounted.
    #[arg(long, env = "REGENT_CGROUP_ROOT", value_name = "DIR", default_value = "/sys/fs/cgroup")]
    pub cgroup_root: PathBuf,
    /// The most processes and threads one executor may have (its cgroup's
    /// pids limit): a fork bomb stops there.
    #[arg(long, env = "REGENT_EXECUTOR_PIDS_MAX", value_name = "N", default_value_t = 4096,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub executor_pids_max: u32,
    /// The most bytes of one of an executor's output files: past it,
    /// `stdout` (or `stderr`) becomes `stdout.1`, the older ones shift and
    /// the oldest beyond `--executor-log-files` is deleted. `regent logs`
    /// reads across them. Default 64 MiB.
    #[arg(long, env = "REGENT_EXECUTOR_LOG_MAX_BYTES", value_name = "BYTES",
          default_value_t = 64 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub executor_log_max_bytes: u64,
    /// How many files of each output stream are kept, the current one
    /// included: at most FILES × BYTES per stream on disk.
    #[arg(long, env = "REGENT_EXECUTOR_LOG_FILES", value_name = "FILES", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub executor_log_files: u32,
    /// Run every executor as this user (its uid, gid and groups; the
    /// worker must run as root): executors cannot read the worker's files
    /// (its secret) nor each other's directories. Default: the worker's
    /// own user.
    #[arg(long, env = "REGENT_EXECUTOR_USER", value_name = "NAME")]
    pub executor_user: Option<String>,
    /// The users a group may name to run as (`user = "alice"` in a job
    /// file, `submit --user`), comma-separated; any other is refused at
    /// launch with the reason. Default: none (groups run as
    /// `--executor-user`, or the worker's own user).
    #[arg(long, env = "REGENT_ALLOWED_USERS", value_name = "NAME,...", value_delimiter = ',')]
    pub allowed_users: Vec<String>,
}

impl WorkerArgs {
    /// `--executor-log-max-bytes`, `--executor-log-files`.
    pub fn executor_logs(&self) -> regent_std::exec::rotate::Rotation {
        regent_std::exec::rotate::Rotation {
            max_bytes: self.executor_log_max_bytes,
            files: self.executor_log_files,
        }
    }

    /// `--isolation`, `--cgroup-root`, `--executor-pids-max`.
    pub fn isolation(&self) -> regent_std::exec::cgroup::IsolationConfig {
        regent_std::exec::cgroup::IsolationConfig {
            mode: self.isolation,
            root: self.cgroup_root.clone(),
            pids_max: self.executor_pids_max,
        }
    }
}

fn parse_resource_offer(s: &str) -> Result<regent_core::resources::Resource, String> {
    regent_core::resources::parse_offer(s).map_err(|e| e.to_string())
}

fn parse_resource_amount(s: &str) -> Result<(String, u32), String> {
    regent_core::resources::parse_amount(s).map_err(|e| e.to_string())
}

/// `--ports 20000-20999,8080`, parsed and checked.
#[derive(Clone, Debug)]
pub struct PortRanges(pub Vec<regent_core::ports::PortRange>);

fn parse_port_ranges(s: &str) -> Result<PortRanges, String> {
    regent_core::ports::parse_ranges(s).map(PortRanges).map_err(|e| e.to_string())
}

/// How `submit` and `run` subscribe and follow (the same flags for both).
#[derive(Args, Debug)]
pub struct FollowArgs {
    /// The masters, `host:port,...`, or `zk://HOST:PORT[,...]/ROOT` to read
    /// them from the election in ZooKeeper.
    #[arg(long, value_delimiter = ',', required = true)]
    pub masters: Vec<String>,
    /// Resume (take over) this framework.
    #[arg(long)]
    pub framework_id: Option<String>,
    /// How long (ms) the master keeps the executors while no submit is
    /// connected.
    #[arg(long, default_value_t = 60_000)]
    pub failover_timeout: u64,
    /// Run a callback listener on ADDR (e.g. `127.0.0.1:0`): a new leader —
    /// even one at an address this submit never knew — dials it to say it
    /// leads. A non-loopback address needs --secret-file (or --insecure).
    /// Smol runtime only.
    #[arg(long, value_name = "ADDR")]
    pub callback: Option<SocketAddr>,
    /// Where this submit keeps the last instance id drawn on this host
    /// (the file `submit-instance`), so a later submit taking the
    /// framework over is newer even if the wall clock stepped back
    /// (default: $XDG_STATE_HOME/regent, else ~/.local/state/regent).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    #[command(flatten)]
    pub connect_timeout: ConnectTimeout,
    /// Once done (every slot exited 0, or slots failed and nothing can
    /// change any more), leave the framework to its failover timeout
    /// instead of ending it at once (COMPLETED, or FAILED, in the history).
    #[arg(long)]
    pub keep: bool,
}

#[derive(Args, Debug)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub follow: FollowArgs,
    /// The application's name.
    #[arg(long, default_value = "app")]
    pub name: String,
    /// How many executors (slots).
    #[arg(long)]
    pub executors: u32,
    /// Cores per executor.
    #[arg(long)]
    pub cores: u32,
    /// Memory per executor, in MiB.
    #[arg(long)]
    pub memory: u64,
    /// An environment variable of every executor, `KEY=VALUE` (repeatable;
    /// the value may hold `=`).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
    pub env: Vec<(String, String)>,
    /// How the executors are placed, `pack` or `spread` (default: the
    /// master's policy, `spread`).
    #[arg(long, value_name = "pack|spread", value_parser = parse_placement)]
    pub placement: Option<regent_core::policy::Placement>,
    /// A condition every worker running an executor meets: `KEY=VALUE`,
    /// `KEY!=VALUE`, `KEY in [A, B]`, `KEY not in [A, B]` or `KEY` (has the
    /// attribute); repeatable, all must hold.
    #[arg(long = "constraint", value_name = "EXPR", value_parser = parse_constraint)]
    pub constraint: Vec<regent_core::policy::Constraint>,
    /// A worker attribute to spread the executors over evenly (`rack`).
    #[arg(long, value_name = "ATTR")]
    pub spread: Option<String>,
    /// The group's priority, 0 to 100 (default 50): higher waiting slots
    /// are placed first and may preempt lower running executors.
    #[arg(long, value_name = "0-100", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub priority: Option<u8>,
    /// A named port every executor gets (repeatable: `--port http --port
    /// admin`), numbered by its worker from `regent worker --ports` and
    /// given as `REGENT_PORT_<NAME>`; the executors' `host:port` are
    /// printed as they start.
    #[arg(long = "port", value_name = "NAME")]
    pub port: Vec<String>,
    /// An amount of a named resource every executor gets (repeatable:
    /// `--resource gpu=1`): placed only on workers with that many free
    /// addresses (`regent worker --resource`), given as
    /// `REGENT_RESOURCE_<NAME>` (and `CUDA_VISIBLE_DEVICES` for `gpu`).
    #[arg(long = "resource", value_name = "NAME=N", value_parser = parse_resource_amount)]
    pub resource: Vec<(String, u32)>,
    /// The most bytes of one of each executor's output files before it is
    /// rotated (default: the worker's `--executor-log-max-bytes`).
    #[arg(long, value_name = "BYTES")]
    pub log_max_bytes: Option<u64>,
    /// How many output files of each stream are kept per executor
    /// (default: the worker's `--executor-log-files`).
    #[arg(long, value_name = "FILES")]
    pub log_files: Option<u32>,
    /// Run the executors as this user (their worker must run as root and
    /// allow it: `regent worker --allowed-users`).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// What happens when an executor ends: `batch` (exit 0 ends its slot,
    /// a failure is retried) or `service` (restarted whenever it ends).
    #[arg(long, value_name = "batch|service", value_parser = parse_restart_mode)]
    pub restart: Option<regent_core::policy::RestartMode>,
    /// How many failures in a row of one slot are retried before the slot
    /// fails (default: batch slots share the master's
    /// --max-executor-retries; a service is restarted forever).
    #[arg(long, value_name = "N")]
    pub retries: Option<u32>,
    /// The wait before a failed slot's first retry (`500ms`, `10s`, `1m`),
    /// doubled on every further failure in a row.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    pub restart_delay: Option<u64>,
    /// The longest wait between retries (`5m`); default: no cap but a day.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    pub restart_max_delay: Option<u64>,
    /// How long an executor must run for its slot's failures in a row to
    /// be forgotten (the wait starts again from --restart-delay).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    pub healthy_after: Option<u64>,
    /// The directory every executor starts in, relative to its executor
    /// directory (created; default: the executor directory itself).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// How long a kill waits after SIGTERM before SIGKILL (`30s`); default:
    /// the worker's own, 3 s.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    pub kill_grace: Option<u64>,
    /// The command every executor runs.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// A feature turned on or off (`--preemption on|off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    /// On.
    On,
    /// Off.
    Off,
}

fn parse_placement(s: &str) -> Result<regent_core::policy::Placement, String> {
    regent_core::policy::Placement::from_name(s)
        .ok_or_else(|| format!("{s:?} is no placement (pack or spread)"))
}

fn parse_restart_mode(s: &str) -> Result<regent_core::policy::RestartMode, String> {
    regent_core::policy::RestartMode::from_name(s)
        .ok_or_else(|| format!("{s:?} is no restart mode (batch or service)"))
}

pub use crate::duration::parse_duration_ms;

fn parse_constraint(s: &str) -> Result<regent_core::policy::Constraint, String> {
    regent_core::policy::Constraint::parse(s).map_err(|e| e.to_string())
}

/// `regent run JOB.toml`.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub follow: FollowArgs,
    /// The job file (TOML; docs/jobs.md).
    #[arg(value_name = "JOB.toml")]
    pub job: PathBuf,
    /// Start another framework even when one named like the job is live
    /// (without it, a live one is followed: running the same job file twice
    /// runs it once).
    #[arg(long, conflicts_with = "framework_id")]
    pub new: bool,
    /// Replace the groups the file changes (command, environment,
    /// resources, policy, launch options; not their count: `regent
    /// scale`) in the live framework, slot by slot: each old executor is
    /// stopped and its slot refilled with the new spec, at most
    /// --max-parallel slots down at a time. Without it a changed group is
    /// refused.
    #[arg(long, conflicts_with = "new")]
    pub update: bool,
    /// With --update: how many slots of a group are replaced at once.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "update",
          value_parser = clap::value_parser!(u32).range(1..=regent_core::limits::MAX_SLOTS_PER_GROUP as i64))]
    pub max_parallel: u32,
}

/// `regent tls ...`.
#[derive(Subcommand, Debug)]
pub enum TlsCommand {
    /// A development CA and a certificate for each node, in `--out`:
    /// `ca.pem` (every node's CA), `ca-key.pem`, and `NAME.pem` with
    /// `NAME-key.pem` per `--node` (keys mode 0600). Refuses a directory
    /// that already holds a `ca.pem`. Not for production: the CA's
    /// validity is open-ended and its key sits beside the certificates.
    GenDevCa {
        /// Where the files go (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The cluster the CA is named after.
        #[arg(long, default_value = "regent")]
        cluster: String,
        /// A node's certificate, for the name or IP address peers dial it
        /// at (repeat for each node).
        #[arg(long = "node", value_name = "NAME", required = true)]
        nodes: Vec<String>,
    },
}

/// `regent token ...` (run by `token.rs`).
#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Issue a token signed with the cluster secret (--secret-file): prints
    /// it on stdout, its id on stderr.
    Create(CreateArgs),
    /// Revoke a token (by its id, or the token itself), or retire every
    /// token signed with a key id at or below N (`--retire-keys N`, after a
    /// key rotation): the leader refuses them from now on, closes their
    /// open connections, and keeps the list durably. Needs the cluster
    /// secret or an `operator` token.
    Revoke(RevokeArgs),
}

/// `regent token create`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// What it may do: a comma-separated list of submit, read, scale,
    /// logs, operator, worker.
    #[arg(long, value_delimiter = ',', required = true, value_parser = parse_capability)]
    pub capability: Vec<Capability>,
    /// The tenant it is bound to: it only sees and acts on that tenant's
    /// frameworks, and the frameworks it creates are that tenant's.
    #[arg(long, value_name = "T")]
    pub tenant: Option<String>,
    /// The frameworks it may act on: an exact id, or a prefix ending in
    /// `*` (`web-*`).
    #[arg(long, value_name = "PATTERN")]
    pub frameworks: Option<String>,
    /// With `worker`: the worker ids it may register start with this.
    #[arg(long, value_name = "PREFIX")]
    pub workers: Option<String>,
    /// How long it is accepted (`30d`, `12h`); without it, until revoked.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    pub expires: Option<u64>,
    /// The signing key id (retiring a key id refuses every token signed
    /// with it or an older one).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub key_id: u32,
    /// Its name, shown in the audit log and in refusals.
    #[arg(long)]
    pub name: String,
}

pub(crate) fn parse_capability(s: &str) -> Result<Capability, String> {
    Capability::parse(s).map_err(|e| e.to_string())
}

/// `regent token revoke ID|TOKEN | --retire-keys N`.
#[derive(Args, Debug)]
pub struct RevokeArgs {
    /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
    #[arg(long, value_delimiter = ',', required = true)]
    pub masters: Vec<String>,
    #[command(flatten)]
    pub connect_timeout: ConnectTimeout,
    /// The token's id (32 hex digits, as `regent token create` prints it),
    /// or the token itself (`rgt1.…`: its expiry is then kept with the
    /// entry, which is dropped once the token expires).
    #[arg(value_name = "ID|TOKEN", required_unless_present = "retire_keys")]
    pub id: Option<String>,
    /// Retire every key id at or below N instead.
    #[arg(long, value_name = "N", conflicts_with = "id")]
    pub retire_keys: Option<u32>,
}

/// `regent job ...`.
#[derive(Subcommand, Debug)]
pub enum JobCommand {
    /// Read and check a job file, offline: one line per group, or the
    /// first error (file:line:column, the group and the key), exit 1.
    Validate {
        /// The job file (TOML; docs/jobs.md).
        #[arg(value_name = "JOB.toml")]
        job: PathBuf,
    },
    /// Ask the leader where a job's slots would be placed now, and why
    /// those that would not be placed would not; changes nothing. Exit 0
    /// when every slot would be placed, 2 when some would not, 1 on an
    /// error.
    Plan {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
        /// The job file (TOML; docs/jobs.md).
        #[arg(value_name = "JOB.toml")]
        job: PathBuf,
    },
    /// Create or update a job the leader owns (`POST /v1/jobs`): it has no
    /// subscriber and runs until `regent job delete`. Prints `job ID
    /// version N: created|updated|unchanged|replayed`; a refusal (a
    /// version that does not match, a bad group) is printed, exit 1.
    Submit {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
        /// The job's id (its framework's id); default: the job's name.
        #[arg(long, value_name = "ID")]
        id: Option<String>,
        /// A retried submission with the same key changes nothing and is
        /// answered as the first was (`replayed`).
        #[arg(long, value_name = "K")]
        idempotency_key: Option<String>,
        /// Check-and-set: apply only if the job is at version N now (0:
        /// only if it does not exist).
        #[arg(long, value_name = "N")]
        expect_version: Option<u64>,
        /// The most slots of a group an update replaces at once.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..))]
        max_parallel: u32,
        /// The job file (TOML; docs/jobs.md).
        #[arg(value_name = "JOB.toml")]
        job: PathBuf,
    },
    /// The status of one job or of every job (`GET /v1/jobs[/{id}]`): per
    /// job its id, name, version (or "subscriber") and state, per group
    /// desired/placed/running/done, and every slot that does not run with
    /// its phase and reason. Exit 1 when the job asked for does not exist.
    Status {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
        /// Print the same JSON as `GET /v1/jobs` (with ID: `GET
        /// /v1/jobs/{id}`).
        #[arg(long)]
        json: bool,
        /// The job (default: every job).
        #[arg(value_name = "ID")]
        id: Option<String>,
    },
    /// Tear a job the leader owns down (`DELETE /v1/jobs/{id}`): its
    /// executors are killed and it ends TORN_DOWN in the history.
    Delete {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
        /// The job.
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Promote a job's deployments awaiting promotion (their canaries are
    /// healthy): they replace the other slots (docs/jobs.md, deployments).
    Promote {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
        /// Only this group's deployment (default: every group's).
        #[arg(long, value_name = "GROUP")]
        group: Option<String>,
        /// The job.
        #[arg(value_name = "ID")]
        id: String,
    },
}

/// `--env KEY=VALUE`: split at the first `=`; the name must not be empty
/// nor hold a NUL (a value may be empty).
pub fn parse_env(s: &str) -> Result<(String, String), String> {
    let (key, value) =
        s.split_once('=').ok_or_else(|| format!("expected KEY=VALUE, found {s:?} (no '=')"))?;
    if key.is_empty() {
        return Err(format!("expected KEY=VALUE, found {s:?} (an empty name)"));
    }
    if s.contains('\0') {
        return Err(format!("{key:?}: an environment variable cannot hold a NUL byte"));
    }
    Ok((key.to_owned(), value.to_owned()))
}

/// A stop signal by name (`TERM`, `SIGTERM`, `term`).
fn parse_signal(s: &str) -> Result<regent_core::api::StopSignal, String> {
    regent_core::api::StopSignal::parse(s).ok_or_else(|| {
        let names: Vec<&str> = regent_core::api::StopSignal::ALL.iter().map(|s| s.name()).collect();
        format!("unknown signal {s:?}; one of {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::{parse_env, parse_signal};
    use regent_core::api::StopSignal;

    #[test]
    fn env_flags_split_at_the_first_equals_sign() {
        assert_eq!(parse_env("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert_eq!(parse_env("EMPTY="), Ok(("EMPTY".into(), String::new())));
        assert_eq!(parse_env("NOPE"), Err("expected KEY=VALUE, found \"NOPE\" (no '=')".into()));
        assert_eq!(parse_env("=v"), Err("expected KEY=VALUE, found \"=v\" (an empty name)".into()));
    }

    #[test]
    fn stop_signals_are_named_with_or_without_sig_in_any_case() {
        assert_eq!(parse_signal("TERM"), Ok(StopSignal::Term));
        assert_eq!(parse_signal("sigusr1"), Ok(StopSignal::Usr1));
        let err = parse_signal("KILL").unwrap_err();
        assert!(err.contains("one of TERM, INT, HUP, QUIT, USR1, USR2"), "{err}");
    }
}

/// `regent tenant ...`.
#[derive(Subcommand, Debug)]
pub enum TenantCommand {
    /// Create or replace a tenant (an operator command; durable before it
    /// is answered). Unset dimensions have no guarantee or no limit.
    Set {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
        /// What the tenant is guaranteed: `cores=16,memory=64G,gpu=2`.
        #[arg(long, value_name = "DIMS", default_value = "none")]
        guarantee: String,
        /// The most its live executors may hold: `cores=64,memory=256G`;
        /// a slot that would pass it waits.
        #[arg(long, value_name = "DIMS", default_value = "none")]
        limit: String,
        /// Its weight in weighted fair sharing (1 to 1000).
        #[arg(long, value_name = "W", default_value_t = 1)]
        weight: u32,
        /// The tenant's name.
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Every tenant: what it holds, its guarantee, limit, weight and
    /// dominant share.
    List {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        #[command(flatten)]
        connect_timeout: ConnectTimeout,
        /// Print the tenants as JSON.
        #[arg(long)]
        json: bool,
    },
}

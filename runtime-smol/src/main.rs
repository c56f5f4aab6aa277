//! `regent`: the command line of the reference daemons.
//!
//! Every command takes `--cluster NAME` (default `regent`), `--secret-file F`
//! and `--insecure`. See `regent --help` and README.md.

use clap::{Args, Parser, Subcommand, ValueEnum};
use regent_core::auth::Secret;
use regent_core::Addr;
use regent_smol::master::{MasterOptions, Recovery};
use regent_smol::net::NetConfig;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "regent", version, about = "A fault-tolerant cluster manager")]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug, Clone)]
struct Common {
    /// The cluster's name; peers of another cluster are refused.
    #[arg(long, global = true, default_value = "regent")]
    cluster: String,
    /// A file holding the cluster secret (at least 16 bytes): every
    /// connection then authenticates and every frame carries a MAC.
    #[arg(long, global = true, value_name = "F")]
    secret_file: Option<PathBuf>,
    /// Allow non-loopback addresses without a secret.
    #[arg(long, global = true)]
    insecure: bool,
    /// Which runtime drives `master`, `worker` and `submit`: `smol` (async,
    /// every feature) or `std` (blocking threads; recovery none/filesystem,
    /// no ZooKeeper; the same HTTP endpoints).
    #[arg(long, global = true, value_enum, default_value = "smol")]
    runtime: Runtime,
}

/// `--connect-timeout` of the client commands.
#[derive(Args, Debug, Clone, Copy)]
struct ConnectTimeout {
    /// How long (seconds) to keep trying to reach a first master before
    /// giving up with an error naming every master tried (at most one
    /// "still trying" line every few seconds meanwhile).
    #[arg(long = "connect-timeout", value_name = "SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    secs: u64,
}

impl ConnectTimeout {
    fn duration(self) -> Duration {
        Duration::from_secs(self.secs)
    }
}

/// Prints a client's "still trying" line on stderr.
fn notice(line: &str) {
    eprintln!("regent: {line}");
}

fn patience(t: ConnectTimeout) -> regent_smol::client::Patience<'static> {
    regent_smol::client::Patience { connect_timeout: t.duration(), notice: &notice }
}

/// `regent executor-shim` (see `regent_std::exec::shim`).
#[derive(Args, Debug)]
struct ExecutorShimArgs {
    /// Where the command's exit status is recorded.
    #[arg(long, value_name = "FILE")]
    status: PathBuf,
    /// The file the command's stdout is appended to.
    #[arg(long, value_name = "FILE")]
    stdout: PathBuf,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<std::ffi::OsString>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Runtime {
    Smol,
    Std,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a master.
    Master(MasterArgs),
    /// Run a worker.
    Worker(WorkerArgs),
    /// Submit an application: one group of executors running CMD.
    Submit(SubmitArgs),
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
    /// Follow the cluster's changes: a snapshot, then one line per change
    /// (workers, frameworks, executors, leader with its epoch), from the
    /// leader, following it across failovers; until interrupted.
    Events {
        /// The masters to ask (`host:port,...` or `zk://HOSTS/ROOT`).
        #[arg(long, value_delimiter = ',', required = true)]
        masters: Vec<String>,
        /// One JSON object per line (the snapshot, then the events as
        /// `GET /api/events` sends them).
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
    /// places new slots. Durable; the application's subscriber is told.
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
    /// Print the bearer token that a master's HTTP server bound to a
    /// non-loopback address requires (`Authorization: Bearer <token>`),
    /// derived from the cluster secret given with `--secret-file`.
    HttpToken,
    /// Inspect a filesystem store.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// The main job: a master, three workers and an application in one
    /// process; the master is killed and restarted while executors run.
    Demo,
    /// Internal: the parent process a worker runs every executor under
    /// (records how the command ended in `--status`).
    #[command(hide = true, name = "executor-shim")]
    ExecutorShim(ExecutorShimArgs),
    /// A load generator: N simulated workers (real worker nodes on real
    /// connections; executors simulated) and optionally M frameworks
    /// declaring K executors, then a report of registration time, heartbeat
    /// round trips, rejections and errors (and the master's CPU and RSS
    /// given --master-pid).
    Load(LoadArgs),
}

#[derive(Args, Debug)]
struct LoadArgs {
    /// The masters (`host:port,...` or `zk://HOSTS/ROOT`).
    #[arg(long, value_delimiter = ',', required = true)]
    masters: Vec<String>,
    /// Simulated workers in this process.
    #[arg(long, default_value_t = 1_000)]
    workers: usize,
    /// Seconds measured once every worker is registered.
    #[arg(long, default_value_t = 10)]
    secs: u64,
    /// Frameworks to run (each declares its share of --executors).
    #[arg(long, default_value_t = 0)]
    frameworks: usize,
    /// Executors the frameworks declare in total (1 core, 1 MiB each).
    #[arg(long, default_value_t = 0)]
    executors: u32,
    /// Cores each simulated worker offers.
    #[arg(long, default_value_t = 8)]
    cores: u32,
    /// Memory each simulated worker offers, in MiB.
    #[arg(long, default_value_t = 8_192)]
    memory: u64,
    /// This process's part of a load shared by several processes (`I/N`,
    /// I from 0): its workers are named `load-I-<j>`.
    #[arg(long, default_value = "0/1", value_parser = parse_shard)]
    shard: (u32, u32),
    /// The master's pid: its CPU and RSS are read from /proc over the run.
    #[arg(long, value_name = "PID")]
    master_pid: Option<u32>,
    /// Seconds to wait for every worker to register before measuring anyway.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    register_within: u64,
    /// Print one line of JSON at the end instead of the text report.
    #[arg(long)]
    json: bool,
    /// Where the simulated peers' shared callback listener binds (a new
    /// leader dials it once and every simulated peer hears it). Default
    /// `127.0.0.1:0` when every master is on loopback, else none. A
    /// non-loopback address needs --secret-file (or --insecure).
    #[arg(long, conflicts_with = "no_callback")]
    listen: Option<SocketAddr>,
    /// The address masters should dial for the shared callback listener
    /// (default: the bound address).
    #[arg(long, conflicts_with = "no_callback")]
    advertise: Option<String>,
    /// Run no callback listener: the simulated peers find a new leader only
    /// through --masters and the master set leaders advertise.
    #[arg(long)]
    no_callback: bool,
}

fn parse_shard(s: &str) -> Result<(u32, u32), String> {
    let (i, n) = s.split_once('/').ok_or_else(|| format!("{s}: expected I/N, e.g. 0/2"))?;
    let i: u32 = i.parse().map_err(|_| format!("{s}: I is not a number"))?;
    let n: u32 = n.parse().map_err(|_| format!("{s}: N is not a number"))?;
    if n == 0 || i >= n {
        return Err(format!("{s}: needs 0 <= I < N"));
    }
    Ok((i, n))
}

#[derive(Subcommand, Debug)]
enum StoreCommand {
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
struct StoreArgs {
    /// The filesystem store's directory (or give --zk).
    #[arg(required_unless_present = "zk", conflicts_with = "zk")]
    dir: Option<PathBuf>,
    /// The ZooKeeper servers of a `--recovery zookeeper` cluster.
    #[arg(long, value_delimiter = ',')]
    zk: Vec<String>,
    /// The cluster's root node in ZooKeeper.
    #[arg(long, default_value = "/regent")]
    zk_root: String,
}

#[derive(Args, Debug)]
struct SealArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// A file holding a previous cluster secret whose records are verified
    /// and re-sealed (repeat for several).
    #[arg(long = "previous-secret-file", value_name = "F")]
    previous_secret_files: Vec<PathBuf>,
    /// Also accept records that carry no seal (a store from before the
    /// secret was set), checked by their CRC only: say so only for a store
    /// you trust (see `regent store dump`).
    #[arg(long)]
    accept_unsealed: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum RecoveryMode {
    None,
    Filesystem,
    Zookeeper,
}

#[derive(Args, Debug)]
struct MasterArgs {
    /// This master's id.
    #[arg(long)]
    id: String,
    /// Where workers and subscribers connect.
    #[arg(long)]
    listen: SocketAddr,
    /// Where to serve the web page, /api/state, /api/events and /metrics
    /// (read-only; both runtimes).
    /// A non-loopback address needs --secret-file (or --insecure); with a
    /// secret it then requires `Authorization: Bearer <token>`, the token
    /// printed by `regent http-token`.
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Where master state survives a crash.
    #[arg(long, value_enum, default_value = "none")]
    recovery: RecoveryMode,
    /// The filesystem store's directory (`--recovery filesystem`).
    #[arg(long)]
    store: Option<PathBuf>,
    /// ZooKeeper servers (`--recovery zookeeper`). A host that is not
    /// loopback needs --secret-file (or --insecure).
    #[arg(long, value_delimiter = ',')]
    zk: Vec<String>,
    /// The cluster's root node in ZooKeeper.
    #[arg(long, default_value = "/regent")]
    zk_root: String,
    /// The ZooKeeper session timeout to ask for, in ms (the server clamps it
    /// to [2, 20] x its tickTime).
    #[arg(long, default_value_t = 4000)]
    zk_session_timeout: u64,
    /// A worker silent this long (ms) is DEAD.
    #[arg(long, default_value_t = 10_000)]
    worker_timeout: u64,
    /// How long (ms) a new leader waits for recovered workers; defaults to
    /// the worker timeout.
    #[arg(long)]
    recovery_timeout: Option<u64>,
    /// How often (ms) workers heartbeat, at least.
    #[arg(long, default_value_t = 1000)]
    heartbeat_interval: u64,
    /// Heartbeat load control: the most heartbeats per second all workers
    /// send together. Past it the leader tells each worker a longer
    /// interval (workers / N seconds, jittered) and its DEAD timeout grows
    /// in proportion. 0: no ceiling.
    #[arg(long, default_value_t = regent_core::master::DEFAULT_MAX_HEARTBEATS_PER_SECOND)]
    max_heartbeats_per_second: u32,
    /// How many frameworks the cluster keeps records of; a SUBSCRIBE of a
    /// new framework past it is refused and that submit stops (existing
    /// frameworks resubscribe). At most 100000, and at most 4000 with
    /// `--recovery zookeeper` (every framework record in one shard must
    /// still list within ZooKeeper's packet limit).
    #[arg(long, default_value_t = regent_core::limits::DEFAULT_MAX_FRAMEWORKS as u64,
          value_parser = clap::value_parser!(u64).range(1..=regent_core::limits::MAX_FRAMEWORKS_LIMIT as u64))]
    max_frameworks: u64,
    /// How many workers the cluster keeps (every worker id the leader
    /// knows, DEAD ones included); a registration of a new worker id past
    /// it is refused, and that worker logs the reason and retries slowly
    /// (known workers always register again). At most 1000000.
    /// Independently, a new worker id whose record would take its store
    /// shard's listing past ZooKeeper's packet limit is refused.
    #[arg(long, default_value_t = regent_core::limits::DEFAULT_MAX_WORKERS as u64,
          value_parser = clap::value_parser!(u64).range(1..=regent_core::limits::MAX_WORKERS_LIMIT as u64))]
    max_workers: u64,
    /// How many finished frameworks the leader keeps (shown by `regent
    /// status` and `/api/state` under "history"); older ones are deleted
    /// from the store. Like Spark's `spark.deploy.retainedApplications`.
    /// At most 10000.
    #[arg(long, value_name = "N", default_value_t = regent_core::limits::DEFAULT_RETAINED_FRAMEWORKS as u64,
          value_parser = clap::value_parser!(u64).range(0..=regent_core::limits::MAX_RETAINED_FRAMEWORKS as u64))]
    retained_frameworks: u64,
    /// `--runtime std` only: the most peer connections at once (two threads
    /// each); one more is closed at once with a log line. Checked at start
    /// against the process's file and thread limits. The smol runtime has no
    /// such ceiling (file descriptors only).
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// The address advertised to workers and other masters (default: the
    /// listen address).
    #[arg(long)]
    advertise: Option<String>,
    /// A file holding a previous cluster secret (a rotation; repeat for
    /// several): records sealed under it are still read, and re-sealed under
    /// --secret-file; ZooKeeper sessions also authenticate with it.
    #[arg(long = "previous-secret-file", value_name = "F")]
    previous_secret_files: Vec<PathBuf>,
}

#[derive(Args, Debug)]
struct WorkerArgs {
    /// The masters, `host:port,...`, or `zk://HOST:PORT[,...]/ROOT` to read
    /// them from the election in ZooKeeper.
    #[arg(long, value_delimiter = ',', required = true)]
    masters: Vec<String>,
    /// Cores offered (accounted, not enforced).
    #[arg(long)]
    cores: u32,
    /// Memory offered in MiB (accounted, not enforced).
    #[arg(long)]
    memory: u64,
    /// Where executors run and their output is kept.
    #[arg(long)]
    work_dir: PathBuf,
    /// The worker's id (default: generated once and kept in the work dir).
    #[arg(long)]
    id: Option<String>,
    /// Where the callback listener binds: a new leader — even one at an
    /// address this worker never knew — dials it to say it leads. Default
    /// `127.0.0.1:0` when every master is on loopback, else none. A
    /// non-loopback address needs --secret-file (or --insecure). Smol
    /// runtime only.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// The address masters should dial for the callback listener (default:
    /// the bound address).
    #[arg(long)]
    advertise: Option<String>,
    /// Kill the executors a previous process of this worker (same work
    /// directory) left running, instead of adopting them. Only processes
    /// proven this worker's (same boot, same start time, still leading their
    /// process group) are killed; what cannot be proven is left alone and
    /// logged either way.
    #[arg(long)]
    kill_left_behind: bool,
}

#[derive(Args, Debug)]
struct SubmitArgs {
    /// The masters, `host:port,...`, or `zk://HOST:PORT[,...]/ROOT` to read
    /// them from the election in ZooKeeper.
    #[arg(long, value_delimiter = ',', required = true)]
    masters: Vec<String>,
    /// The application's name.
    #[arg(long, default_value = "app")]
    name: String,
    /// Resume (take over) this framework.
    #[arg(long)]
    framework_id: Option<String>,
    /// How long (ms) the master keeps the executors while no submit is
    /// connected.
    #[arg(long, default_value_t = 60_000)]
    failover_timeout: u64,
    /// How many executors (slots).
    #[arg(long)]
    executors: u32,
    /// Cores per executor.
    #[arg(long)]
    cores: u32,
    /// Memory per executor, in MiB.
    #[arg(long)]
    memory: u64,
    /// Run a callback listener on ADDR (e.g. `127.0.0.1:0`): a new leader —
    /// even one at an address this submit never knew — dials it to say it
    /// leads. A non-loopback address needs --secret-file (or --insecure).
    /// Smol runtime only.
    #[arg(long, value_name = "ADDR")]
    callback: Option<SocketAddr>,
    /// Where this submit keeps the last instance id drawn on this host
    /// (the file `submit-instance`), so a later submit taking the
    /// framework over is newer even if the wall clock stepped back
    /// (default: $XDG_STATE_HOME/regent, else ~/.local/state/regent).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// The command every executor runs.
    #[arg(last = true, required = true)]
    command: Vec<String>,
    #[command(flatten)]
    connect_timeout: ConnectTimeout,
}

/// Reads a cluster secret from a file (surrounding whitespace trimmed).
fn read_secret(path: &std::path::Path) -> Result<Secret, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?;
    let trimmed = bytes.trim_ascii().to_vec();
    Secret::new(trimmed).map_err(|e| format!("secret file {}: {e}", path.display()))
}

fn read_secrets(paths: &[PathBuf]) -> Result<Vec<Secret>, String> {
    paths.iter().map(|p| read_secret(p)).collect()
}

fn net_config(common: &Common) -> Result<Arc<NetConfig>, String> {
    let secret = common.secret_file.as_deref().map(read_secret).transpose()?;
    let mut net = NetConfig::new(common.cluster.clone(), secret);
    net.insecure = common.insecure;
    Ok(Arc::new(net))
}

fn addrs(list: &[String]) -> Vec<Addr> {
    list.iter().map(|s| Addr(s.trim().to_string())).filter(|a| !a.0.is_empty()).collect()
}

/// How long reading the masters from ZooKeeper (`--masters zk://...`) may
/// take.
const ZK_DETECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The masters of `--masters`: a static `host:port,...` list, or
/// `zk://HOST:PORT[,HOST:PORT...]/ROOT`, read from the election nodes
/// (`regent_smol::zk::detect`; the exposure rule of `--zk` applies). Both
/// runtimes get the resolved list; from there the leader's advertised
/// master set is followed.
async fn masters_of(common: &Common, list: &[String]) -> Result<Vec<Addr>, String> {
    use regent_smol::zk::detect::ZkMasters;
    // `--masters` splits at commas, and a connect string has them too.
    let joined = list.join(",");
    let Some(parsed) = ZkMasters::parse(&joined) else {
        return Ok(addrs(list));
    };
    let zk = parsed?;
    let net = net_config(common)?;
    let (hosts, has_secret, insecure) = (zk.hosts.clone(), net.secret.is_some(), common.insecure);
    smol::unblock(move || regent_std::net::check_zk_exposure(&hosts, has_secret, insecure))
        .await
        .map_err(|e| format!("--masters {joined}: {e}"))?;
    let secret = net.secret.as_ref().map(|s| s.expose());
    let masters = zk.resolve(secret, ZK_DETECT_TIMEOUT).await?;
    tracing::info!(masters = ?masters, "masters read from ZooKeeper");
    Ok(masters)
}

/// Stops a std-runtime driver on SIGTERM/SIGINT.
fn stop_on_shutdown(stopper: regent_std::drivers::Stopper) {
    let rx = shutdown_channel();
    std::thread::spawn(move || {
        let _ = smol::block_on(rx.recv());
        stopper.stop();
    });
}

/// The exit code of a submission, as the submit node decides it
/// (`regent_core::node::submit`: 0 done, 1 error, 2 slots failed, 3 taken
/// over by another instance, 130 interrupted), with its message on stderr.
fn submit_exit(outcome: Result<regent_core::progress::SubmitOutcome, String>) -> ExitCode {
    let exit = regent_core::node::submit::SubmitExit::new(outcome);
    if let Some(message) = &exit.message {
        eprintln!("regent: {message}");
    }
    ExitCode::from(exit.code)
}

async fn run_std(common: &Common, command: Command) -> Result<ExitCode, String> {
    use regent_std::drivers as d;
    let net = net_config(common)?;
    match command {
        Command::Master(a) => {
            let recovery =
                match a.recovery {
                    RecoveryMode::None => d::Recovery::None,
                    RecoveryMode::Filesystem => d::Recovery::Filesystem {
                        dir: a.store.ok_or("--recovery filesystem needs --store DIR")?,
                    },
                    RecoveryMode::Zookeeper => return Err(
                        "--recovery zookeeper needs --runtime smol (the ZooKeeper client is async)"
                            .into(),
                    ),
                };
            let mut cfg = d::MasterConfig::new(a.id, a.listen, net);
            cfg.advertise = a.advertise.map(Addr);
            cfg.http = a.http;
            cfg.recovery = recovery;
            cfg.worker_timeout = Duration::from_millis(a.worker_timeout);
            cfg.recovery_timeout = a.recovery_timeout.map(Duration::from_millis);
            cfg.heartbeat_interval = Duration::from_millis(a.heartbeat_interval);
            cfg.max_heartbeats_per_second = a.max_heartbeats_per_second;
            cfg.max_frameworks = a.max_frameworks as usize;
            cfg.retained_frameworks = a.retained_frameworks as usize;
            cfg.max_workers = a.max_workers as usize;
            cfg.insecure = common.insecure;
            cfg.previous_secrets = read_secrets(&a.previous_secret_files)?;
            if let Some(max) = a.max_connections {
                cfg.max_connections = max;
            }
            let m = d::spawn_master(cfg)?;
            stop_on_shutdown(m.stopper());
            smol::unblock(move || m.wait()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker(a) => {
            if a.listen.is_some() || a.advertise.is_some() {
                return Err("--listen and --advertise of a worker need --runtime smol (the std \
                            worker has no callback listener)"
                    .into());
            }
            let w = d::spawn_worker(d::WorkerConfig {
                cluster: common.cluster.clone(),
                masters: masters_of(common, &a.masters).await?,
                cores: a.cores,
                memory_mb: a.memory,
                work_dir: a.work_dir,
                id: a.id,
                net,
                insecure: common.insecure,
                listen: None,
                advertise: None,
                kill_left_behind: a.kill_left_behind,
                executor_shim: Some(executor_shim()?),
            })?;
            stop_on_shutdown(w.stopper());
            smol::unblock(move || w.wait()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Submit(a) => {
            if a.callback.is_some() {
                return Err("--callback needs --runtime smol (the std submitter has no callback \
                            listener)"
                    .into());
            }
            use std::io::IsTerminal;
            let progress = std::io::stdout().is_terminal();
            let cfg = d::SubscriberConfig {
                cluster: common.cluster.clone(),
                masters: masters_of(common, &a.masters).await?,
                name: a.name,
                framework_id: a.framework_id,
                failover_timeout: Duration::from_millis(a.failover_timeout),
                executors: a.executors,
                cores: a.cores,
                memory_mb: a.memory,
                command: a.command,
                net,
                insecure: common.insecure,
                connect_timeout: Some(a.connect_timeout.duration()),
                callback: None,
                state_dir: a.state_dir.clone().or_else(regent_std::host::default_state_dir),
            };
            let s = d::spawn_subscriber_with_output(cfg, std::io::stdout(), progress)?;
            stop_on_shutdown(s.stopper());
            let outcome = smol::unblock(move || {
                // Printed by the driver; the events are only drained.
                for _ in s.events().iter() {}
                s.wait()
            })
            .await;
            Ok(submit_exit(outcome.map_err(|e| e.to_string())))
        }
        _ => Err("--runtime std applies to master, worker and submit only".into()),
    }
}

/// A channel closed by SIGTERM/SIGINT: every daemon's shutdown signal.
/// Sends an operator's change to the leader, as `regent kill` does.
async fn operator_change(
    common: &Common,
    masters: &[String],
    connect_timeout: ConnectTimeout,
    change: &regent_smol::client::Change,
) -> Result<(), String> {
    regent_smol::client::change_with(
        &masters_of(common, masters).await?,
        net_config(common)?,
        change,
        patience(connect_timeout),
    )
    .await
}

fn shutdown_channel() -> async_channel::Receiver<()> {
    let (tx, rx) = async_channel::bounded::<()>(1);
    let _ = ctrlc::set_handler(move || {
        let _ = tx.try_send(());
    });
    rx
}

/// This binary, which every executor of a worker runs under as its shim
/// (`regent executor-shim`): resolved once, when the worker starts, so a
/// binary replaced on disk later (an upgrade) is still found by its path.
fn executor_shim() -> Result<PathBuf, String> {
    std::env::current_exe()
        .map_err(|e| format!("cannot find this program's path to run executors under: {e}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::ExecutorShim(a) = &cli.command {
        // Before any logging setup: the shim writes nothing but its
        // handshake and, on trouble, a line to the executor's stderr.
        let code = regent_std::exec::shim::run(&regent_std::exec::shim::ShimArgs {
            status: a.status.clone(),
            stdout: a.stdout.clone(),
            command: a.command.clone(),
        });
        return ExitCode::from(u8::try_from(code).unwrap_or(255));
    }
    // The demo narrates on stdout; its daemons' logs stay quiet unless asked.
    let default_level = if matches!(cli.command, Command::Demo) { "warn" } else { "info" };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level)),
        )
        .init();
    match smol::block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("regent: error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode, String> {
    let common = cli.common;
    let daemon =
        matches!(cli.command, Command::Master(_) | Command::Worker(_) | Command::Submit(_));
    if common.runtime == Runtime::Std && daemon {
        return run_std(&common, cli.command).await;
    }
    match cli.command {
        Command::Master(a) => {
            if a.max_connections.is_some() {
                return Err("--max-connections applies to --runtime std (the smol master is \
                            bounded by file descriptors only)"
                    .into());
            }
            let net = net_config(&common)?;
            let recovery = match a.recovery {
                RecoveryMode::None => Recovery::None,
                RecoveryMode::Filesystem => Recovery::Filesystem {
                    dir: a.store.ok_or("--recovery filesystem needs --store DIR")?,
                },
                RecoveryMode::Zookeeper => {
                    if a.zk.is_empty() {
                        return Err("--recovery zookeeper needs --zk HOST:PORT,...".into());
                    }
                    let zk_max = regent_core::limits::MAX_FRAMEWORKS_ZOOKEEPER;
                    if a.max_frameworks as usize > zk_max {
                        return Err(format!(
                            "--max-frameworks {} is over {zk_max}, the most the ZooKeeper store \
                             takes (every framework record in one shard must still list \
                             within ZooKeeper's 1 MB packet limit)",
                            a.max_frameworks
                        ));
                    }
                    Recovery::Zookeeper {
                        hosts: a.zk.join(","),
                        root: a.zk_root,
                        session_timeout: Duration::from_millis(a.zk_session_timeout),
                    }
                }
            };
            let opts = MasterOptions {
                id: a.id,
                listen: a.listen,
                advertise: a.advertise.map(Addr),
                http: a.http,
                recovery,
                worker_timeout: Duration::from_millis(a.worker_timeout),
                recovery_timeout: a.recovery_timeout.map(Duration::from_millis),
                heartbeat_interval: Duration::from_millis(a.heartbeat_interval),
                max_heartbeats_per_second: a.max_heartbeats_per_second,
                max_frameworks: a.max_frameworks as usize,
                retained_frameworks: a.retained_frameworks as usize,
                max_workers: a.max_workers as usize,
                net,
                insecure: common.insecure,
                previous_secrets: read_secrets(&a.previous_secret_files)?,
                ready: None,
            };
            // On the executor thread that runs the connections' tasks: a
            // frame then reaches the master's loop, and its reply the
            // connection's writer, without waking another thread (half the
            // CPU of a heartbeat, measured with `regent load`).
            smol::spawn(regent_smol::master::run_master(opts, shutdown_channel())).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker(a) => {
            let opts = regent_smol::worker::WorkerOptions {
                cluster: common.cluster.clone(),
                masters: masters_of(&common, &a.masters).await?,
                cores: a.cores,
                memory_mb: a.memory,
                work_dir: a.work_dir,
                id: a.id,
                net: net_config(&common)?,
                insecure: common.insecure,
                listen: a.listen,
                advertise: a.advertise,
                kill_left_behind: a.kill_left_behind,
                executor_shim: Some(executor_shim()?),
            };
            regent_smol::worker::run_worker(opts, shutdown_channel()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Submit(a) => {
            let opts = regent_smol::submit::SubmitOptions {
                cluster: common.cluster.clone(),
                masters: masters_of(&common, &a.masters).await?,
                name: a.name,
                framework_id: a.framework_id,
                failover_timeout: Duration::from_millis(a.failover_timeout),
                executors: a.executors,
                cores: a.cores,
                memory_mb: a.memory,
                command: a.command,
                net: net_config(&common)?,
                insecure: common.insecure,
                connect_timeout: Some(a.connect_timeout.duration()),
                callback: a.callback,
                state_dir: a.state_dir.clone().or_else(regent_std::host::default_state_dir),
            };
            use std::io::IsTerminal;
            let progress = std::io::stdout().is_terminal();
            let outcome = regent_smol::submit::run_submit_with_progress(
                opts,
                std::io::stdout(),
                shutdown_channel(),
                progress,
            )
            .await;
            Ok(submit_exit(outcome))
        }
        Command::Status { masters, json, connect_timeout } => {
            let state = regent_smol::client::fetch_state_with(
                &masters_of(&common, &masters).await?,
                net_config(&common)?,
                true,
                patience(connect_timeout),
            )
            .await?;
            if json {
                println!("{}", regent_smol::http::state_json(&state));
            } else {
                print!("{}", regent_smol::client::render_table(&state));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Events { masters, json, connect_timeout } => {
            regent_smol::events::follow(
                &masters_of(&common, &masters).await?,
                net_config(&common)?,
                json,
                patience(connect_timeout),
                shutdown_channel(),
                |line| println!("{line}"),
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Kill { masters, framework_id, connect_timeout } => {
            regent_smol::client::kill_framework_with(
                &masters_of(&common, &masters).await?,
                net_config(&common)?,
                &framework_id,
                patience(connect_timeout),
            )
            .await?;
            println!("framework {framework_id} torn down");
            Ok(ExitCode::SUCCESS)
        }
        Command::Logs { masters, executor_id, stderr, follow, tail_bytes, connect_timeout } => {
            let opts = regent_smol::logs::LogsOptions {
                executor: executor_id,
                stream: if stderr {
                    regent_core::protocol::LogStream::Stderr
                } else {
                    regent_core::protocol::LogStream::Stdout
                },
                follow,
                tail_bytes,
            };
            regent_smol::logs::print_logs(
                &masters_of(&common, &masters).await?,
                net_config(&common)?,
                &opts,
                patience(connect_timeout),
                &mut std::io::stdout().lock(),
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::RemoveWorker { masters, worker_id, connect_timeout } => {
            regent_smol::client::remove_worker_with(
                &masters_of(&common, &masters).await?,
                net_config(&common)?,
                &worker_id,
                patience(connect_timeout),
            )
            .await?;
            println!("worker {worker_id} removed");
            Ok(ExitCode::SUCCESS)
        }
        Command::Cordon { masters, worker_id, connect_timeout } => {
            let change = regent_smol::client::Change::Cordon(worker_id.clone());
            operator_change(&common, &masters, connect_timeout, &change).await?;
            println!("worker {worker_id} cordoned: nothing new is placed on it");
            Ok(ExitCode::SUCCESS)
        }
        Command::Uncordon { masters, worker_id, connect_timeout } => {
            let change = regent_smol::client::Change::Uncordon(worker_id.clone());
            operator_change(&common, &masters, connect_timeout, &change).await?;
            println!("worker {worker_id} uncordoned: executors are placed on it again");
            Ok(ExitCode::SUCCESS)
        }
        Command::Drain { masters, worker_id, deadline, no_wait, connect_timeout } => {
            let change = regent_smol::client::Change::Drain { worker: worker_id.clone(), deadline };
            operator_change(&common, &masters, connect_timeout, &change).await?;
            println!(
                "worker {worker_id} draining: executors stopped, SIGKILL after {}",
                regent_smol::client::deadline_text(deadline)
            );
            if no_wait {
                return Ok(ExitCode::SUCCESS);
            }
            regent_smol::client::wait_drained(
                &masters_of(&common, &masters).await?,
                net_config(&common)?,
                &worker_id,
                deadline,
                patience(connect_timeout),
                &|line| println!("{line}"),
            )
            .await?;
            println!("worker {worker_id} DRAINED");
            Ok(ExitCode::SUCCESS)
        }
        Command::Scale { masters, framework_id, group, slots, connect_timeout } => {
            let change = regent_smol::client::Change::Scale {
                framework: framework_id.clone(),
                group: group.clone(),
                slots,
            };
            operator_change(&common, &masters, connect_timeout, &change).await?;
            println!("group {group} of framework {framework_id} scaled to {slots} slots");
            Ok(ExitCode::SUCCESS)
        }
        Command::KillExecutor { masters, executor_id, no_refill, connect_timeout } => {
            let change = regent_smol::client::Change::KillExecutor {
                executor: executor_id.clone(),
                refill: !no_refill,
            };
            operator_change(&common, &masters, connect_timeout, &change).await?;
            if no_refill {
                println!("executor {executor_id} killed; its slot is left empty");
            } else {
                println!("executor {executor_id} killed; its slot gets a replacement");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::StepDown { masters, connect_timeout } => {
            regent_smol::client::step_down_with(
                &masters_of(&common, &masters).await?,
                net_config(&common)?,
                patience(connect_timeout),
            )
            .await?;
            println!("the leader stepped down");
            Ok(ExitCode::SUCCESS)
        }
        Command::HttpToken => {
            let net = net_config(&common)?;
            let secret = net.secret.as_ref().ok_or(
                "regent http-token needs the cluster secret (--secret-file F): the token is \
                 derived from it",
            )?;
            println!("{}", regent_smol::http::bearer_token(secret));
            Ok(ExitCode::SUCCESS)
        }
        Command::Store { command: StoreCommand::Seal(a) } => seal_command(&common, a).await,
        Command::Store { command } => store_command(&common, command).await,
        Command::Demo => {
            regent_smol::demo::run_demo(Some(executor_shim()?)).await.map(|()| ExitCode::SUCCESS)
        }
        Command::ExecutorShim(_) => Err("executor-shim is run before the runtime starts".into()),
        Command::Load(a) => {
            let masters = masters_of(&common, &a.masters).await?;
            let listen = if a.no_callback {
                None
            } else {
                regent_std::host::callback_listen_for(
                    a.listen,
                    &masters,
                    common.secret_file.is_some(),
                    common.insecure,
                )?
            };
            let opts = regent_smol::load::LoadOptions {
                cluster: common.cluster.clone(),
                masters,
                listen,
                advertise: a.advertise,
                workers: a.workers,
                shard: a.shard,
                cores: a.cores,
                memory_mb: a.memory,
                secs: a.secs,
                frameworks: a.frameworks,
                executors: a.executors,
                master_pid: a.master_pid,
                register_within: Duration::from_secs(a.register_within),
                net: net_config(&common)?,
                insecure: common.insecure,
            };
            // On the executor thread of its connections (as the master).
            let report = smol::spawn(regent_smol::load::run_load(opts)).await?;
            if a.json {
                println!("{}", serde_json::to_string(&report).map_err(|e| e.to_string())?);
            } else {
                for line in report.lines() {
                    println!("{line}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn store_command(common: &Common, command: StoreCommand) -> Result<ExitCode, String> {
    let (args, dump) = match command {
        StoreCommand::Check(args) => (args, false),
        StoreCommand::Dump(args) => (args, true),
        StoreCommand::Seal(_) => unreachable!("run by seal_command"),
    };
    let Some(dir) = args.dir else {
        return zk_store_command(common, &args.zk, &args.zk_root, dump).await;
    };
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    // No previous secrets here: a check only reads, and re-sealing is a
    // write (`regent store seal`).
    let secret = common.secret_file.as_deref().map(read_secret).transpose()?;
    let sealing = regent_std::store::master_sealing(secret.as_ref(), &[])?;
    match regent_std::store::FsStore::open_with(&dir, "regent store", sealing) {
        Ok((_store, loaded)) => {
            for w in &loaded.warnings {
                println!("warning: {w}");
            }
            if dump {
                for r in &loaded.records {
                    println!("{}: {r:?}", r.key());
                }
            }
            println!("{}: {} records, all intact", dir.display(), loaded.records.len());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("regent: store {}: {e}", dir.display());
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `regent store check|dump --zk`: reads and verifies a ZooKeeper store.
async fn zk_store_command(
    common: &Common,
    hosts: &[String],
    root: &str,
    dump: bool,
) -> Result<ExitCode, String> {
    let secret = common.secret_file.as_deref().map(read_secret).transpose()?;
    let sealing = regent_std::store::master_sealing(secret.as_ref(), &[])?;
    let mut zk = regent_smol::zk::ZkConfig::new(hosts.join(","));
    if let Some(secret) = &secret {
        zk = zk.with_secret(secret.expose().to_vec());
    }
    match regent_smol::zk::seal::check_zookeeper(&zk, root, &sealing).await {
        Ok(report) => {
            if dump {
                for r in &report.records {
                    println!("{}: {r:?}", r.key());
                }
            }
            if report.flat > 0 {
                println!(
                    "note: {} record node(s) in the flat layout of an earlier version: the next \
                     leader moves them into their shards",
                    report.flat
                );
            }
            println!(
                "{root}: {} records in {} shards, all intact",
                report.records.len(),
                report.shards
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("regent: store {root}: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `regent store seal`: see [`StoreCommand::Seal`].
async fn seal_command(common: &Common, a: SealArgs) -> Result<ExitCode, String> {
    use regent_core::store::seal::Seal;
    let secret = common
        .secret_file
        .as_deref()
        .map(read_secret)
        .transpose()?
        .ok_or("regent store seal needs the cluster secret (--secret-file F) to seal with")?;
    let previous = read_secrets(&a.previous_secret_files)?;
    let mut sealing = regent_std::store::master_sealing(Some(&secret), &previous)?;
    if a.accept_unsealed {
        sealing = sealing.accepting_unsealed();
    }
    let key = sealing.current_key_id().map(|k| k.to_string()).unwrap_or_default();
    let how = |seal: &Seal| match seal {
        Seal::Unsealed => "unsealed".to_owned(),
        Seal::Sealed(k) => format!("sealed under previous key {k}"),
    };
    if let Some(dir) = a.store.dir {
        if !dir.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
        // The directory lock keeps a running master out (and this out of a
        // running master's store).
        let (_store, loaded) =
            regent_std::store::FsStore::open_with(&dir, "regent store seal", sealing)
                .map_err(|e| format!("store {}: {e}", dir.display()))?;
        for (k, seal) in &loaded.resealed {
            println!("sealed {k} (was {})", how(seal));
        }
        println!(
            "{}: {} records, {} re-sealed, all sealed under key {key}",
            dir.display(),
            loaded.records.len(),
            loaded.resealed.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let hosts = a.store.zk.join(",");
    let mut zk = regent_smol::zk::ZkConfig::new(hosts).with_secret(secret.expose().to_vec());
    for p in &previous {
        zk = zk.with_previous_secret(p.expose().to_vec());
    }
    let report = regent_smol::zk::seal::seal_zookeeper(&zk, &a.store.zk_root, &sealing).await?;
    for (path, seal) in &report.resealed {
        println!("sealed {path} (was {})", how(seal));
    }
    println!(
        "{}: {} records, {} re-sealed, all sealed under key {key}; {} nodes readable and \
         writable by the current secret only",
        a.store.zk_root,
        report.records,
        report.resealed.len(),
        report.acls_set.len()
    );
    Ok(ExitCode::SUCCESS)
}

//! `regent-std`: the master, worker and submit daemons on regent-std's
//! blocking drivers (std threads and sockets), with the flags of `regent`.
//!
//! Differences from `regent`: recovery modes `none` and `filesystem` only
//! (`--recovery zookeeper` is refused), no HTTP (`--http` is refused), no
//! live progress line in `submit`. Exit codes of `submit` are `regent`'s:
//! 0 done, 2 a slot failed, 3 failed over to another instance, 130
//! interrupted, 1 an error.

use clap::{Args, Parser, Subcommand, ValueEnum};
use regent_core::auth::Secret;
use regent_core::Addr;
use regent_std::drivers::{self, Recovery, Stopper, SubmitOutcome};
use regent_std::net::NetConfig;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "regent-std", version, about = "regent's daemons on std threads")]
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
    /// A file holding the cluster secret (at least 16 bytes).
    #[arg(long, global = true, value_name = "F")]
    secret_file: Option<PathBuf>,
    /// Allow non-loopback addresses without a secret.
    #[arg(long, global = true)]
    insecure: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a master (recovery none or filesystem).
    Master(MasterArgs),
    /// Run a worker.
    Worker(WorkerArgs),
    /// Submit an application: one group of executors running CMD.
    Submit(SubmitArgs),
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
    /// Not supported by the std runtime (use `regent master`).
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Where master state survives a crash.
    #[arg(long, value_enum, default_value = "none")]
    recovery: RecoveryMode,
    /// The filesystem store's directory (`--recovery filesystem`).
    #[arg(long)]
    store: Option<PathBuf>,
    /// Not supported by the std runtime.
    #[arg(long, value_delimiter = ',')]
    zk: Vec<String>,
    /// Not supported by the std runtime.
    #[arg(long, default_value = "/regent")]
    zk_root: String,
    /// Not supported by the std runtime.
    #[arg(long, default_value_t = 4000)]
    zk_session_timeout: u64,
    /// A worker silent this long (ms) is DEAD.
    #[arg(long, default_value_t = 10_000)]
    worker_timeout: u64,
    /// How long (ms) a new leader waits for recovered workers; defaults to
    /// the worker timeout.
    #[arg(long)]
    recovery_timeout: Option<u64>,
    /// How often (ms) workers heartbeat.
    #[arg(long, default_value_t = 1000)]
    heartbeat_interval: u64,
    /// The address advertised to workers (default: the listen address).
    #[arg(long)]
    advertise: Option<String>,
}

#[derive(Args, Debug)]
struct WorkerArgs {
    /// The masters, `host:port,...`.
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
}

#[derive(Args, Debug)]
struct SubmitArgs {
    /// The masters, `host:port,...`.
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
    /// The command every executor runs.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn net_config(common: &Common) -> Result<Arc<NetConfig>, String> {
    let secret = match &common.secret_file {
        None => None,
        Some(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?;
            let trimmed = bytes.trim_ascii().to_vec();
            Some(Secret::new(trimmed).map_err(|e| format!("secret file {}: {e}", path.display()))?)
        }
    };
    Ok(Arc::new(NetConfig::new(common.cluster.clone(), secret)))
}

fn addrs(list: &[String]) -> Vec<Addr> {
    list.iter().map(|s| Addr(s.trim().to_string())).filter(|a| !a.0.is_empty()).collect()
}

/// SIGTERM/SIGINT call `stopper` (installed once the daemon runs).
fn on_signal(stopper: Stopper) {
    let slot = Arc::new(Mutex::new(Some(stopper)));
    let _ = ctrlc::set_handler(move || {
        if let Some(s) = slot.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            s.stop();
        }
    });
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("regent-std: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, String> {
    let common = cli.common;
    match cli.command {
        Command::Master(a) => {
            if a.http.is_some() {
                return Err("--http is not supported by regent-std (use `regent master`)".into());
            }
            let recovery = match a.recovery {
                RecoveryMode::None => Recovery::None,
                RecoveryMode::Filesystem => Recovery::Filesystem {
                    dir: a.store.ok_or("--recovery filesystem needs --store DIR")?,
                },
                RecoveryMode::Zookeeper => {
                    return Err("--recovery zookeeper is not supported by regent-std \
                                (use `regent master`)"
                        .into())
                }
            };
            let _ = (&a.zk, &a.zk_root, a.zk_session_timeout);
            let mut cfg = drivers::MasterConfig::new(a.id, a.listen, net_config(&common)?);
            cfg.advertise = a.advertise.map(Addr);
            cfg.recovery = recovery;
            cfg.worker_timeout = Duration::from_millis(a.worker_timeout);
            cfg.recovery_timeout = a.recovery_timeout.map(Duration::from_millis);
            cfg.heartbeat_interval = Duration::from_millis(a.heartbeat_interval);
            cfg.insecure = common.insecure;
            let master = drivers::spawn_master(cfg)?;
            on_signal(master.stopper());
            master.wait()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Worker(a) => {
            let worker = drivers::spawn_worker(drivers::WorkerConfig {
                cluster: common.cluster.clone(),
                masters: addrs(&a.masters),
                cores: a.cores,
                memory_mb: a.memory,
                work_dir: a.work_dir,
                id: a.id,
                net: net_config(&common)?,
                insecure: common.insecure,
            })?;
            on_signal(worker.stopper());
            worker.wait()?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Submit(a) => {
            let failover = Duration::from_millis(a.failover_timeout);
            let sub = drivers::spawn_subscriber(drivers::SubscriberConfig {
                cluster: common.cluster.clone(),
                masters: addrs(&a.masters),
                name: a.name,
                framework_id: a.framework_id,
                failover_timeout: failover,
                executors: a.executors,
                cores: a.cores,
                memory_mb: a.memory,
                command: a.command.clone(),
                net: net_config(&common)?,
                insecure: common.insecure,
            })?;
            on_signal(sub.stopper());
            println!(
                "submitting {} x {:?} ({} cores, {} MiB each) as instance {}",
                a.executors,
                a.command,
                a.cores,
                a.memory,
                sub.instance()
            );
            // The channel ends when the driver has ended.
            let mut framework = None;
            for event in sub.events().iter() {
                if let regent_core::subscriber::Action::Subscribed { framework: f, .. } = &event {
                    framework = Some(f.to_string());
                }
                if let Some(line) = drivers::subscriber::describe(&event) {
                    println!("{line}");
                }
            }
            let fw = framework.unwrap_or_default();
            match sub.wait()? {
                SubmitOutcome::Succeeded => {
                    println!("done: all {} executors of framework {fw} exited 0", a.executors);
                    Ok(ExitCode::SUCCESS)
                }
                SubmitOutcome::SlotsFailed(reasons) => {
                    println!("failed: {} of {} slots failed", reasons.len(), a.executors);
                    eprintln!("regent-std: application failed: {}", reasons.join("; "));
                    Ok(ExitCode::from(2))
                }
                SubmitOutcome::FailedOver { to } => {
                    println!("stopped: the framework now belongs to instance {to}");
                    eprintln!(
                        "regent-std: the framework failed over to another instance ({to}); \
                         this submit stops"
                    );
                    Ok(ExitCode::from(3))
                }
                SubmitOutcome::Interrupted => {
                    println!(
                        "interrupted: framework {fw} is left running (its executors are kept \
                         for {failover:?} without a subscriber)"
                    );
                    eprintln!(
                        "regent-std: interrupted; the executors keep running until the \
                         failover timeout"
                    );
                    Ok(ExitCode::from(130))
                }
            }
        }
    }
}

//! The daemons: `regent master`, `regent worker` and `regent submit` on
//! either runtime (smol, or std with `--runtime std`), `regent run` (smol)
//! and `regent job validate`, and `regent demo`.

use crate::args::{
    Command, Common, FollowArgs, MasterArgs, RecoveryMode, RunArgs, SubmitArgs, WorkerArgs,
};
use crate::common::{masters_of, net_config, read_secrets, shutdown_channel};
use regent_core::Addr;
use regent_smol::master::{MasterConfig, Recovery};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The master's configuration from `regent master`'s arguments, for either
/// runtime (the std one refuses ZooKeeper recovery, the smol one
/// `--max-connections`).
pub fn master_config(common: &Common, a: MasterArgs) -> Result<MasterConfig, String> {
    let recovery = match a.recovery {
        RecoveryMode::None => Recovery::None,
        RecoveryMode::Filesystem => {
            Recovery::Filesystem { dir: a.store.ok_or("--recovery filesystem needs --store DIR")? }
        }
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
                write_window: a.zk_write_window as usize,
            }
        }
    };
    let mut cfg = MasterConfig::new(a.id, a.listen, net_config(common)?);
    cfg.advertise = a.advertise.map(Addr);
    cfg.http = a.http;
    cfg.recovery = recovery;
    cfg.worker_timeout = Duration::from_millis(a.worker_timeout);
    cfg.recovery_timeout = a.recovery_timeout.map(Duration::from_millis);
    cfg.heartbeat_interval = Duration::from_millis(a.heartbeat_interval);
    cfg.max_heartbeats_per_second = a.max_heartbeats_per_second;
    cfg.max_frameworks = a.max_frameworks as usize;
    cfg.preemption = a.preemption == crate::args::Switch::On;
    cfg.retained_frameworks = a.retained_frameworks as usize;
    cfg.max_workers = a.max_workers as usize;
    cfg.insecure = common.insecure;
    cfg.previous_secrets = read_secrets(&a.previous_secret_files)?;
    cfg.max_connections = a.max_connections;
    cfg.audit_log = a.audit_log;
    Ok(cfg)
}

/// `regent master` on the smol runtime.
pub async fn master(common: &Common, a: MasterArgs) -> Result<ExitCode, String> {
    let cfg = master_config(common, a)?;
    // On smol's executor thread, beside the tasks of its ZooKeeper client,
    // HTTP and dials (its connections are its poller's, on no task).
    // Measured: run on this thread instead (which drives async-io's
    // reactor while it waits), 18,000 workers cost the same (14.7 % of a
    // core, p99 5.0 ms, against 15.0 % and 4.6 ms).
    smol::spawn(regent_smol::master::run_master(cfg, shutdown_channel())).await?;
    Ok(ExitCode::SUCCESS)
}

/// `regent worker` on the smol runtime.
pub async fn worker(common: &Common, a: WorkerArgs) -> Result<ExitCode, String> {
    let opts = regent_smol::worker::WorkerOptions {
        isolation: a.isolation(),
        executor_logs: a.executor_logs(),
        executor_user: a.executor_user.clone(),
        allowed_users: a.allowed_users.clone(),
        gc: regent_std::exec::gc::GcPolicy {
            ttl: Duration::from_millis(a.work_dir_ttl),
            max_used_pct: a.work_dir_max_used,
        },
        cluster: common.cluster.clone(),
        masters: masters_of(common, &a.masters).await?,
        cores: a.cores,
        memory_mb: a.memory,
        work_dir: a.work_dir,
        id: a.id,
        net: net_config(common)?,
        insecure: common.insecure,
        listen: a.listen,
        advertise: a.advertise,
        kill_left_behind: a.kill_left_behind,
        artifact_cache_bytes: a.artifact_cache_mb.saturating_mul(1 << 20),
        attributes: worker_attributes(&a.attribute)?,
        ports: a.ports.map(|p| p.0).unwrap_or_default(),
        resources: worker_resources(&a.resource, &a.resource_discovery)?,
        host: a.host,
        executor_shim: Some(executor_shim()?),
    };
    regent_smol::worker::run_worker(opts, shutdown_channel()).await?;
    Ok(ExitCode::SUCCESS)
}

/// The options of a submission from `submit`'s or `run`'s flags (`run`
/// leaves the group's fields empty: its groups are the job's).
async fn submit_options(
    common: &Common,
    f: &FollowArgs,
) -> Result<regent_smol::submit::SubmitOptions, String> {
    Ok(regent_smol::submit::SubmitOptions {
        update: Default::default(),
        cluster: common.cluster.clone(),
        masters: masters_of(common, &f.masters).await?,
        name: String::new(),
        framework_id: f.framework_id.clone(),
        failover_timeout: Duration::from_millis(f.failover_timeout),
        executors: 0,
        cores: 0,
        memory_mb: 0,
        command: Vec::new(),
        env: Vec::new(),
        policy: Default::default(),
        launch: Default::default(),
        net: net_config(common)?,
        insecure: common.insecure,
        connect_timeout: Some(f.connect_timeout.duration()),
        callback: f.callback,
        state_dir: f.state_dir.clone().or_else(regent_std::host::default_state_dir),
        keep: f.keep,
        tenant: None,
    })
}

/// `submit`'s options: [`submit_options`] with its one group.
async fn submit_group_options(
    common: &Common,
    a: SubmitArgs,
) -> Result<regent_smol::submit::SubmitOptions, String> {
    let mut opts = submit_options(common, &a.follow).await?;
    opts.name = a.name;
    opts.executors = a.executors;
    opts.cores = a.cores;
    opts.memory_mb = a.memory;
    opts.command = a.command;
    opts.env = a.env;
    opts.policy.placement = a.placement;
    opts.policy.constraints = a.constraint;
    opts.policy.spread = a.spread;
    opts.policy.priority = a.priority.unwrap_or(regent_core::policy::DEFAULT_PRIORITY);
    let r = &mut opts.policy.restart;
    r.mode = a.restart.unwrap_or_default();
    r.attempts = a.retries;
    r.delay_ms = a.restart_delay.unwrap_or(0);
    r.max_delay_ms = a.restart_max_delay.unwrap_or(0);
    r.healthy_after_ms = a.healthy_after.unwrap_or(0);
    opts.launch.cwd = a.cwd;
    opts.launch.kill_grace_ms = a.kill_grace;
    if let Some(problem) = regent_core::ports::names_problem(&a.port) {
        return Err(format!("--port: {problem}"));
    }
    opts.launch.ports = a.port;
    let mut resources = a.resource;
    resources.sort();
    if let Some(problem) = regent_core::resources::amounts_problem(&resources) {
        return Err(format!("--resource: {problem}"));
    }
    opts.launch.resources = resources;
    if a.log_max_bytes.is_some() || a.log_files.is_some() {
        opts.launch.logs = Some(regent_core::launch::LogRotation {
            max_bytes: a.log_max_bytes,
            files: a.log_files,
        });
    }
    if let Some(p) = opts.launch.problem() {
        return Err(format!("submit: {p}"));
    }
    if let Some(user) = a.user.as_deref().filter(|u| !regent_core::launch::is_user_name(u)) {
        return Err(format!("--user: {}", regent_core::launch::LaunchProblem::User(user.into())));
    }
    opts.launch.user = a.user;
    Ok(opts)
}

/// `regent submit` on the smol runtime.
pub async fn submit(common: &Common, a: SubmitArgs) -> Result<ExitCode, String> {
    let opts = submit_group_options(common, a).await?;
    use std::io::IsTerminal;
    let progress = std::io::stdout().is_terminal();
    let outcome = regent_smol::submit::run_submit_with_progress(
        opts,
        std::io::stdout(),
        shutdown_channel(),
        progress,
    )
    .await;
    Ok(submit_exit(outcome.map_err(String::from)))
}

/// `regent run JOB.toml` (smol runtime): the job file read and validated
/// before anything is dialled, then its groups submitted and followed.
pub async fn run_job(common: &Common, a: RunArgs) -> Result<ExitCode, String> {
    let job = crate::job_file::load(&a.job)?;
    let mut opts = submit_options(common, &a.follow).await?;
    opts.update = a.update.then_some(a.max_parallel);
    if opts.framework_id.is_none() && !a.new {
        let state = regent_smol::client::fetch_state_with(
            &opts.masters,
            opts.net.clone(),
            true,
            crate::common::patience(a.follow.connect_timeout),
        )
        .await?;
        if let Some(id) = job.live_framework(&state).map_err(|e| e.to_string())? {
            if a.update {
                println!(
                    "job {:?} is live as framework {id}: updating it (changed groups are replaced, at most {} slot(s) at a time)",
                    job.name, a.max_parallel
                );
            } else {
                println!(
                    "job {:?} is live as framework {id}: following it (the same groups are adopted, a changed one is refused)",
                    job.name
                );
            }
            opts.framework_id = Some(id.as_str().to_owned());
        }
    }
    use std::io::IsTerminal;
    let progress = std::io::stdout().is_terminal();
    let outcome = regent_smol::submit::run_job_with_progress(
        opts,
        &job,
        std::io::stdout(),
        shutdown_channel(),
        progress,
    )
    .await;
    Ok(submit_exit(outcome.map_err(String::from)))
}

/// `regent job validate JOB.toml`: offline; one line per group on stdout.
pub fn validate_job(path: &std::path::Path) -> Result<ExitCode, String> {
    let job = crate::job_file::load(path)?;
    println!("job {:?}: {} group(s), valid", job.name, job.groups.len());
    for g in &job.groups {
        let ports = if g.launch.ports.is_empty() {
            String::new()
        } else {
            format!(", ports {}", g.launch.ports.join(" "))
        };
        println!(
            "group {:?}: count {}, cores {}, memory {} MiB{ports}, command {:?}",
            g.name, g.count, g.cores, g.memory_mb, g.command
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `regent demo`.
pub async fn demo() -> Result<ExitCode, String> {
    regent_smol::demo::run_demo(Some(executor_shim()?)).await?;
    Ok(ExitCode::SUCCESS)
}

/// Stops a std-runtime pump on SIGTERM/SIGINT.
pub fn stop_on_shutdown(stopper: regent_std::pumps::Stopper) {
    let rx = shutdown_channel();
    std::thread::spawn(move || {
        let _ = smol::block_on(rx.recv());
        stopper.stop();
    });
}

/// The exit code of a submission, as the submit node decides it
/// (`regent_core::node::submit`: 0 done, 1 error, 2 slots failed, 3 taken
/// over by another instance, 130 interrupted), with its message on stderr.
pub fn submit_exit(outcome: Result<regent_core::progress::SubmitOutcome, String>) -> ExitCode {
    let exit = regent_core::node::submit::SubmitExit::new(outcome);
    if let Some(message) = &exit.message {
        eprintln!("regent: {message}");
    }
    ExitCode::from(exit.code)
}

pub async fn run_std(common: &Common, command: Command) -> Result<ExitCode, String> {
    use regent_std::pumps as d;
    let net = net_config(common)?;
    match command {
        Command::Master(a) => {
            let m = d::spawn_master(master_config(common, a)?)?;
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
                isolation: a.isolation(),
                executor_logs: a.executor_logs(),
                executor_user: a.executor_user.clone(),
                allowed_users: a.allowed_users.clone(),
                gc: regent_std::exec::gc::GcPolicy {
                    ttl: Duration::from_millis(a.work_dir_ttl),
                    max_used_pct: a.work_dir_max_used,
                },
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
                artifact_cache_bytes: a.artifact_cache_mb.saturating_mul(1 << 20),
                attributes: worker_attributes(&a.attribute)?,
                ports: a.ports.map(|p| p.0).unwrap_or_default(),
                resources: worker_resources(&a.resource, &a.resource_discovery)?,
                host: a.host,
                executor_shim: Some(executor_shim()?),
            })?;
            stop_on_shutdown(w.stopper());
            smol::unblock(move || w.wait()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Submit(a) => {
            if a.follow.callback.is_some() {
                return Err("--callback needs --runtime smol (the std submitter has no callback \
                            listener)"
                    .into());
            }
            use std::io::IsTerminal;
            let progress = std::io::stdout().is_terminal();
            let cfg = submit_group_options(common, a).await?;
            let s = d::spawn_subscriber_with_output(cfg, std::io::stdout(), progress)?;
            stop_on_shutdown(s.stopper());
            let outcome = smol::unblock(move || {
                // Printed by the pump; the events are only drained.
                for _ in s.events().iter() {}
                s.wait()
            })
            .await;
            Ok(submit_exit(outcome.map_err(|e| e.to_string())))
        }
        _ => {
            Err("--runtime std applies to master, worker and submit only (run is smol only)".into())
        }
    }
}

/// This binary, which every executor of a worker runs under as its shim
/// (`regent executor-shim`): resolved once, when the worker starts, so a
/// binary replaced on disk later (an upgrade) is still found by its path.
pub fn executor_shim() -> Result<PathBuf, String> {
    std::env::current_exe()
        .map_err(|e| format!("cannot find this program's path to run executors under: {e}"))
}

/// The named resources a worker offers: `--resource` ones, then what each
/// `--resource-discovery NAME=SCRIPT` prints (run now, once), checked
/// together (a name given twice is refused).
pub fn worker_resources(
    offers: &[regent_core::resources::Resource],
    discovery: &[String],
) -> Result<Vec<regent_core::resources::Resource>, String> {
    let mut all = offers.to_vec();
    for d in discovery {
        let Some((name, script)) = d.split_once('=') else {
            return Err(format!("--resource-discovery {d:?}: write NAME=SCRIPT"));
        };
        let found = regent_std::discovery::discover(name, std::path::Path::new(script))
            .map_err(|e| e.to_string())?;
        tracing::info!(resource = %found, script, "named resource discovered");
        all.push(found);
    }
    if let Some(problem) = regent_core::resources::offers_problem(&all) {
        return Err(format!("--resource: {problem}"));
    }
    Ok(all)
}

/// `--attribute KEY=VALUE` flags as a worker announces them: sorted by
/// name; a malformed or repeated one, or one past the limits, is an error
/// naming it.
pub fn worker_attributes(flags: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut v = Vec::with_capacity(flags.len());
    for f in flags {
        let Some((k, val)) = f.split_once('=') else {
            return Err(format!("--attribute {f:?}: write KEY=VALUE"));
        };
        if v.iter().any(|(o, _): &(String, String)| o == k) {
            return Err(format!("--attribute {f:?}: attribute {k:?} given twice"));
        }
        v.push((k.to_string(), val.to_string()));
    }
    v.sort();
    if let Some(problem) = regent_core::limits::attributes_problem(&v) {
        return Err(format!("--attribute: this worker {problem}"));
    }
    Ok(v)
}

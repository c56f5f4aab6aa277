//! `regent`: the command line of the reference daemons.
//!
//! Every command takes `--cluster NAME` (default `regent`), `--secret-file F`
//! and `--insecure`. `regent master` and `regent worker` also read their
//! settings from `REGENT_*` environment variables and a `--config` TOML file
//! (`config_file.rs`; precedence flag > environment > file > default). See
//! `regent --help`, README.md and deploy/README.md.
//!
//! `args.rs` holds the argument types, `daemons.rs` starts the master, the
//! worker and the submitter (on either runtime) and runs job files
//! (`job_file.rs` reads them), `job.rs` the jobs the leader owns
//! (`regent job submit`, `status`, `delete`), `operator.rs` runs the
//! operator's commands, `store.rs` the store commands, `token.rs` the
//! token commands, `common.rs` what they
//! share; this file parses and dispatches.

mod args;
mod audit;
mod common;
mod config_file;
mod daemons;
mod duration;
mod job;
mod job_file;
mod operator;
mod store;
mod tenant;
mod token;

use args::{Cli, Command, JobCommand, Runtime, StoreCommand, TlsCommand};
use std::process::ExitCode;

fn main() -> ExitCode {
    // `regent executor-exec` (started by an executor's shim to run it as
    // another user): drops to the user and execs, before anything else.
    regent_std::exec::user::exec_if_asked();
    let cli = match config_file::parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(config_file::ParseError::Clap(e)) => e.exit(),
        Err(config_file::ParseError::File(e)) => {
            eprintln!("regent: error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Command::ExecutorShim(a) = &cli.command {
        // Before any logging setup: the shim writes nothing but its
        // handshake and, on trouble, a line to the executor's stderr.
        let code = regent_std::exec::shim::run(&regent_std::exec::shim::ShimArgs {
            status: a.status.clone(),
            stdout: a.stdout.clone(),
            stderr: a.stderr.clone(),
            user: a.user.clone(),
            rotation: a
                .log_max_bytes
                .zip(a.log_files)
                .map(|(max_bytes, files)| regent_std::exec::rotate::Rotation { max_bytes, files }),
            cgroups: a.cgroups.clone(),
            lease: a.word.clone().zip(a.stop_after).zip(a.grace).map(
                |((word, stop_after_ms), grace_ms)| regent_std::exec::shim::Lease {
                    word,
                    stop_after_ms,
                    grace_ms,
                },
            ),
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
    let daemon = matches!(
        cli.command,
        Command::Master(_) | Command::Worker(_) | Command::Submit(_) | Command::Run(_)
    );
    if common.runtime == Runtime::Std && daemon {
        if common.tls_cert.is_some() || common.tls_key.is_some() || common.tls_ca.is_some() {
            return Err("TLS (--tls-cert, --tls-key, --tls-ca) runs on --runtime smol only: \
                 the std runtime's connections are plain TCP"
                .into());
        }
        return daemons::run_std(&common, cli.command).await;
    }
    match cli.command {
        Command::Master(a) => daemons::master(&common, a).await,
        Command::Worker(a) => daemons::worker(&common, a).await,
        Command::Submit(a) => daemons::submit(&common, a).await,
        Command::Run(a) => daemons::run_job(&common, a).await,
        Command::Job { command: JobCommand::Validate { job } } => daemons::validate_job(&job),
        Command::Job { command: JobCommand::Plan { masters, connect_timeout, job } } => {
            operator::plan_job(&common, &masters, connect_timeout, &job).await
        }
        Command::Job { command } => job::run(&common, command).await,
        Command::Token { command } => token::run(&common, command).await,
        Command::Tenant { command } => tenant::run(&common, command).await,
        Command::Demo => daemons::demo().await,
        Command::Store { command: StoreCommand::Seal(a) } => store::seal_command(&common, a).await,
        Command::Store { command } => store::store_command(&common, command).await,
        Command::ExecutorShim(_) => Err("executor-shim is run before the runtime starts".into()),
        Command::Audit { http, since, token_file } => {
            let secret = common::net_config(&common)?.secret.clone();
            smol::unblock(move || audit::run(&http, since, token_file.as_deref(), secret.as_ref()))
                .await
        }
        Command::Load(a) => operator::load(&common, a).await,
        Command::Tls { command: TlsCommand::GenDevCa { out, cluster, nodes } } => {
            gen_dev_ca(&out, &cluster, &nodes)
        }
        Command::DelegateCgroups { user, cgroup_root } => delegate_cgroups(&user, &cgroup_root),
        command => operator::run(&common, command).await,
    }
}

/// `regent delegate-cgroups`: see [`Command::DelegateCgroups`].
fn delegate_cgroups(user: &str, root: &std::path::Path) -> Result<ExitCode, String> {
    use regent_std::exec::{cgroup, delegation};
    let who = delegation::Opener::this_process()
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    if !who.is_root() {
        return Err(format!(
            "delegate-cgroups gives cgroups away, which only root may do (this is uid {}); in a \
             systemd unit run it as ExecStartPre=+...",
            who.uid
        ));
    }
    let to = regent_std::exec::user::RunAs::lookup(user).map_err(|e| e.to_string())?;
    match cgroup::detect(root) {
        cgroup::Offered::V1 { .. } => {
            let controllers = cgroup::v1_controllers(root);
            let dirs = delegation::hand_over(root, &controllers, &who, to.uid, to.gid)
                .map_err(|e| e.to_string())?;
            for dir in dirs {
                println!("{} handed to {user} (uid {})", dir.display(), to.uid);
            }
        }
        other => println!(
            "{other} under {}: nothing to hand over (on cgroup v2 the unit's Delegate=yes \
             delegates)",
            root.display()
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `regent tls gen-dev-ca`: see [`TlsCommand::GenDevCa`].
fn gen_dev_ca(out: &std::path::Path, cluster: &str, nodes: &[String]) -> Result<ExitCode, String> {
    use regent_std::tls::{DevCa, Validity};
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if out.join("ca.pem").exists() {
        return Err(format!(
            "{} already holds a ca.pem: refusing to replace a CA (remove it first)",
            out.display()
        ));
    }
    for n in nodes {
        if n.is_empty() || n.contains('/') || n.starts_with('.') {
            return Err(format!("--node {n:?}: write a host name or an IP address"));
        }
    }
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let write = |name: &str, text: &str, secret: bool| -> Result<(), String> {
        let path = out.join(name);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(if secret { 0o600 } else { 0o644 })
            .open(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        f.write_all(text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    let ca = DevCa::new(cluster).map_err(|e| e.to_string())?;
    write("ca.pem", &ca.cert_pem(), false)?;
    write("ca-key.pem", &ca.key_pem(), true)?;
    for n in nodes {
        let issued =
            ca.issue(std::slice::from_ref(n), Validity::Open).map_err(|e| e.to_string())?;
        write(&format!("{n}.pem"), &issued.cert_pem, false)?;
        write(&format!("{n}-key.pem"), &issued.key_pem, true)?;
    }
    println!(
        "a development CA for cluster {cluster} and {} node certificate(s) in {}",
        nodes.len(),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

//! The operator's commands: `regent status`, `events`, `kill`, `logs`,
//! `remove-worker`, `step-down`, `cordon`, `uncordon`, `drain`, `scale`,
//! `kill-executor`, `http-token` and the load generator `regent load`.

use crate::args::{Command, Common, ConnectTimeout, LoadArgs};
use crate::common::{masters_of, net_config, patience, shutdown_channel};
use std::process::ExitCode;
use std::time::Duration;

/// How long executors removed by `regent scale --remove --signal` get
/// before SIGKILL when no --deadline is given.
const DEFAULT_STOP_DEADLINE: Duration = Duration::from_secs(30);

/// Runs an operator command (every [`Command`] but the daemons, `store`,
/// `demo`, `executor-shim` and `load`, which `main` dispatches elsewhere).
pub async fn run(common: &Common, command: Command) -> Result<ExitCode, String> {
    match command {
        Command::Status { masters, json, connect_timeout } => {
            let state = regent_smol::client::fetch_state_with(
                &masters_of(common, &masters).await?,
                net_config(common)?,
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
        Command::Events { http, token_file, after, json, connect_timeout, .. }
            if !http.is_empty() =>
        {
            let token = match token_file {
                // With the cluster secret and no token file: the secret's
                // full token (every HTTP request needs one then).
                None => net_config(common)?.secret.as_ref().map(regent_smol::http::bearer_token),
                Some(f) => Some(
                    std::fs::read_to_string(&f)
                        .map_err(|e| format!("cannot read the token file {}: {e}", f.display()))?
                        .trim()
                        .to_owned(),
                ),
            };
            let opts = regent_smol::events_http::HttpFollow {
                urls: http,
                token,
                after,
                json,
                patience: connect_timeout.duration(),
            };
            let stop = shutdown_channel();
            let stopped = move || stop.is_closed() || !stop.is_empty();
            smol::unblock(move || {
                regent_smol::events_http::follow_http(&opts, &stopped, &mut |line| {
                    println!("{line}")
                })
            })
            .await
            .map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Events { masters, json, connect_timeout, .. } => {
            regent_smol::events::follow(
                &masters_of(common, &masters).await?,
                net_config(common)?,
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
                &masters_of(common, &masters).await?,
                net_config(common)?,
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
                &masters_of(common, &masters).await?,
                net_config(common)?,
                &opts,
                patience(connect_timeout),
                &mut std::io::stdout().lock(),
            )
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::RemoveWorker { masters, worker_id, connect_timeout } => {
            regent_smol::client::remove_worker_with(
                &masters_of(common, &masters).await?,
                net_config(common)?,
                &worker_id,
                patience(connect_timeout),
            )
            .await?;
            println!("worker {worker_id} removed");
            Ok(ExitCode::SUCCESS)
        }
        Command::Cordon { masters, worker_id, connect_timeout } => {
            let change = regent_smol::client::Change::Cordon(worker_id.clone());
            operator_change(common, &masters, connect_timeout, &change).await?;
            println!("worker {worker_id} cordoned: nothing new is placed on it");
            Ok(ExitCode::SUCCESS)
        }
        Command::Uncordon { masters, worker_id, connect_timeout } => {
            let change = regent_smol::client::Change::Uncordon(worker_id.clone());
            operator_change(common, &masters, connect_timeout, &change).await?;
            println!("worker {worker_id} uncordoned: executors are placed on it again");
            Ok(ExitCode::SUCCESS)
        }
        Command::Drain { masters, worker_id, deadline, no_wait, connect_timeout } => {
            let change = regent_smol::client::Change::Drain { worker: worker_id.clone(), deadline };
            operator_change(common, &masters, connect_timeout, &change).await?;
            println!(
                "worker {worker_id} draining: executors stopped, SIGKILL after {}",
                regent_smol::client::deadline_text(deadline)
            );
            if no_wait {
                return Ok(ExitCode::SUCCESS);
            }
            regent_smol::client::wait_drained(
                &masters_of(common, &masters).await?,
                net_config(common)?,
                &worker_id,
                deadline,
                patience(connect_timeout),
                &|line| println!("{line}"),
            )
            .await?;
            println!("worker {worker_id} DRAINED");
            Ok(ExitCode::SUCCESS)
        }
        Command::Scale {
            masters,
            framework_id,
            group,
            slots,
            remove,
            signal,
            deadline,
            connect_timeout,
        } => {
            let stop = (signal.is_some() || deadline.is_some()).then(|| regent_core::api::Stop {
                signal: signal.unwrap_or(regent_core::api::StopSignal::Term),
                deadline: regent_core::Millis(
                    u64::try_from(deadline.unwrap_or(DEFAULT_STOP_DEADLINE).as_millis())
                        .unwrap_or(u64::MAX),
                ),
            });
            let change = regent_smol::client::Change::Scale {
                framework: framework_id.clone(),
                group: group.clone(),
                slots,
                remove: remove.clone(),
                stop,
            };
            operator_change(common, &masters, connect_timeout, &change).await?;
            println!("group {group} of framework {framework_id} scaled to {slots} slots");
            if !remove.is_empty() {
                let how = match stop {
                    Some(s) => format!(
                        "stopped with SIG{}, SIGKILL after {}",
                        s.signal.name(),
                        regent_smol::client::deadline_text(Duration::from_millis(s.deadline.0))
                    ),
                    None => "killed".to_owned(),
                };
                println!("removed ({how}): {}", remove.join(", "));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::KillExecutor { masters, executor_id, no_refill, connect_timeout } => {
            let change = regent_smol::client::Change::KillExecutor {
                executor: executor_id.clone(),
                refill: !no_refill,
            };
            operator_change(common, &masters, connect_timeout, &change).await?;
            if no_refill {
                println!("executor {executor_id} killed; its slot is left empty");
            } else {
                println!("executor {executor_id} killed; its slot gets a replacement");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::ReportHealth {
            masters,
            executor_id,
            check,
            passing,
            failing: _,
            detail,
            connect_timeout,
        } => {
            regent_smol::client::report_health_with(
                &masters_of(common, &masters).await?,
                net_config(common)?,
                regent_smol::client::HealthResult {
                    executor: executor_id.clone(),
                    check: check.clone(),
                    passing,
                    detail,
                },
                patience(connect_timeout),
            )
            .await?;
            let what = if passing { "passing" } else { "failing" };
            println!("executor {executor_id}: check {check:?} reported {what}");
            Ok(ExitCode::SUCCESS)
        }
        Command::StepDown { masters, connect_timeout } => {
            regent_smol::client::step_down_with(
                &masters_of(common, &masters).await?,
                net_config(common)?,
                patience(connect_timeout),
            )
            .await?;
            println!("the leader stepped down");
            Ok(ExitCode::SUCCESS)
        }
        Command::HttpToken { read_only } => {
            let net = net_config(common)?;
            let secret = net.secret.as_ref().ok_or(
                "regent http-token needs the cluster secret (--secret-file F): the token is \
                 derived from it",
            )?;
            if read_only {
                println!("{}", regent_smol::http::v1::auth::read_only_token(secret));
            } else {
                println!("{}", regent_smol::http::bearer_token(secret));
            }
            Ok(ExitCode::SUCCESS)
        }
        other => unreachable!("{other:?} is dispatched by main"),
    }
}

/// `regent load`.
pub async fn load(common: &Common, a: LoadArgs) -> Result<ExitCode, String> {
    let masters = masters_of(common, &a.masters).await?;
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
        spread_start: Duration::from_millis(a.spread_start),
        net: net_config(common)?,
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

/// Sends an operator's change to the leader, as `regent kill` does.
pub async fn operator_change(
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
    .map_err(String::from)
}

/// `regent job plan JOB.toml`: the leader's plan of the job's groups.
pub async fn plan_job(
    common: &Common,
    masters: &[String],
    connect_timeout: ConnectTimeout,
    path: &std::path::Path,
) -> Result<ExitCode, String> {
    let job = crate::job_file::load(path)?;
    let plan = regent_smol::client::plan_with(
        &masters_of(common, masters).await?,
        net_config(common)?,
        job.groups_to_declare(),
        job.tenant.clone(),
        patience(connect_timeout),
    )
    .await?;
    print!("{}", regent_smol::client::render_plan(&job.name, &plan));
    let all_placed = plan.iter().all(|g| g.unplaced == 0);
    Ok(if all_placed { ExitCode::SUCCESS } else { ExitCode::from(2) })
}

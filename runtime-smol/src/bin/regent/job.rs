//! The jobs the leader owns, over the wire protocol: `regent job submit`,
//! `status` and `delete` (the CLI equivalents of `POST /v1/jobs`,
//! `GET /v1/jobs[/{id}]` and `DELETE /v1/jobs/{id}`; docs/jobs.md).
//! `validate` and `plan` are dispatched by `main`.

use crate::args::{Common, JobCommand};
use crate::common::{masters_of, net_config, patience};
use regent_core::api::{JobChange, JobSubmission, MAX_IDEMPOTENCY_KEY_BYTES};
use regent_core::FrameworkId;
use std::process::ExitCode;

/// Runs `regent job submit|status|delete`.
pub async fn run(common: &Common, command: JobCommand) -> Result<ExitCode, String> {
    match command {
        JobCommand::Submit {
            masters,
            connect_timeout,
            id,
            idempotency_key,
            expect_version,
            max_parallel,
            job,
        } => {
            if let Some(k) = &idempotency_key {
                if k.is_empty() || k.len() > MAX_IDEMPOTENCY_KEY_BYTES {
                    return Err(format!(
                        "--idempotency-key must be 1 to {MAX_IDEMPOTENCY_KEY_BYTES} bytes"
                    ));
                }
            }
            let spec = crate::job_file::load(&job)?;
            let id = id.unwrap_or_else(|| spec.name.clone());
            if id.is_empty() {
                return Err("--id must not be empty".into());
            }
            let submission = JobSubmission {
                job: FrameworkId::new(id),
                name: spec.name.clone(),
                groups: spec.groups_to_declare(),
                key: idempotency_key,
                expect_version,
                max_parallel,
                tenant: spec.tenant.clone(),
            };
            let accepted = regent_smol::client::submit_job_with(
                &masters_of(common, &masters).await?,
                net_config(common)?,
                submission,
                patience(connect_timeout),
            )
            .await?;
            println!(
                "job {} version {}: {}",
                accepted.job,
                accepted.version,
                change_name(accepted.change)
            );
            Ok(ExitCode::SUCCESS)
        }
        JobCommand::Status { masters, connect_timeout, json, id } => {
            let (epoch, jobs) = regent_smol::client::jobs_with(
                &masters_of(common, &masters).await?,
                net_config(common)?,
                id.as_deref(),
                patience(connect_timeout),
            )
            .await?;
            let jobs = match &id {
                None => jobs,
                Some(id) => {
                    let one: Vec<_> = jobs.into_iter().filter(|j| j.job.as_str() == id).collect();
                    if one.is_empty() {
                        return Err(format!("no such job: {id}"));
                    }
                    one
                }
            };
            if json {
                let text = match (&id, jobs.first()) {
                    (Some(_), Some(job)) => serde_json::to_string(job),
                    _ => serde_json::to_string(&serde_json::json!({
                        "epoch": epoch.0,
                        "jobs": jobs,
                    })),
                }
                .map_err(|e| format!("cannot render the jobs as JSON: {e}"))?;
                println!("{text}");
            } else {
                print!("{}", regent_smol::client::render_jobs(&jobs));
            }
            Ok(ExitCode::SUCCESS)
        }
        JobCommand::Delete { masters, connect_timeout, id } => {
            regent_smol::client::delete_job_with(
                &masters_of(common, &masters).await?,
                net_config(common)?,
                &id,
                patience(connect_timeout),
            )
            .await?;
            println!("job {id} deleted");
            Ok(ExitCode::SUCCESS)
        }
        JobCommand::Promote { masters, connect_timeout, group, id } => {
            regent_smol::client::promote_deployment_with(
                &masters_of(common, &masters).await?,
                net_config(common)?,
                &id,
                group.clone(),
                patience(connect_timeout),
            )
            .await?;
            match group {
                Some(g) => println!("job {id}: the deployment of group {g} promoted"),
                None => println!("job {id}: its deployments awaiting promotion promoted"),
            }
            Ok(ExitCode::SUCCESS)
        }
        JobCommand::Validate { .. } | JobCommand::Plan { .. } => {
            Err("regent job validate and plan are run by main".into())
        }
    }
}

/// A change as the API spells it (`created`, `updated`, ...).
fn change_name(change: JobChange) -> &'static str {
    match change {
        JobChange::Created => "created",
        JobChange::Updated => "updated",
        JobChange::Unchanged => "unchanged",
        JobChange::Replayed => "replayed",
    }
}

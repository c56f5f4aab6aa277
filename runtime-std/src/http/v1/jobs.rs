//! `/v1/jobs`: submit (create or update), plan, list, read, delete, and
//! scale a group naming the executors it removes. Each is one wire message
//! (`SubmitJob`, `PlanRequest`, `JobsRequest`, `DeleteJob`, `ScaleGroup`)
//! and the master's reply rendered as JSON.

use super::errors::{json_response, ApiError, ErrorBody, Unavailable};
use super::Asker;
use super::{body, command, header_value, number_param, query_param, request_id, unexpected};
use crate::http::Response;
use crate::job_file;
use regent_core::api::{
    DeploymentView, JobChange, JobStatus, JobSubmission, Stop, StopSignal,
    MAX_IDEMPOTENCY_KEY_BYTES,
};
use regent_core::ids::{ExecutorId, FrameworkId};
use regent_core::job::JobSpec;
use regent_core::protocol::{GroupPlan, Message};
use regent_core::time::Millis;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The answer to an accepted `POST /v1/jobs`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Accepted {
    /// The job's id.
    pub job: String,
    /// Its version now.
    pub version: u64,
    /// What the submission did.
    pub change: JobChange,
    /// The leader's epoch.
    pub epoch: u64,
}

/// The answer to `GET /v1/jobs`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct JobList {
    /// The leader's epoch.
    pub epoch: u64,
    /// Every job (every framework), by id.
    pub jobs: Vec<JobStatus>,
}

/// The answer to `POST /v1/jobs/{id}/plan`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Plan {
    /// The leader's epoch.
    pub epoch: u64,
    /// The job planned.
    pub job: String,
    /// Where each group's slots would go, in the body's order (`regent job
    /// plan`'s answer: `group`, `slots`, `placed` as `[slot, worker]`
    /// pairs, `placed_omitted`, `unplaced`, `reason`, and `reasons`: every
    /// reason, ranked, each a `WaitReason` object as in `SlotStatus`).
    #[schema(value_type = Vec<Object>)]
    pub groups: Vec<GroupPlan>,
}

/// The answer to `DELETE /v1/jobs/{id}`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Deleted {
    /// The job.
    pub job: String,
    /// Always `true`: the teardown is durable.
    pub deleted: bool,
    /// The leader's epoch.
    pub epoch: u64,
}

/// The answer to a scale.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Scaled {
    /// The job.
    pub job: String,
    /// The group.
    pub group: String,
    /// Its slot count now.
    pub count: u32,
    /// The executors removed.
    pub removed: Vec<String>,
    /// The leader's epoch.
    pub epoch: u64,
}

/// A `status` response of `v`'s JSON.
pub fn answer<T: Serialize>(status: u16, v: &T) -> Response {
    json_response(status, &serde_json::to_value(v).unwrap_or_default())
}

/// The job in a request's body: JSON (the job file's keys plus an
/// optional `id`), or TOML (the job file itself) with
/// `Content-Type: application/toml`. `400` naming the field otherwise.
pub fn read_job(request: &mut tiny_http::Request) -> Result<(Option<String>, JobSpec), ApiError> {
    let toml = header_value(request, "Content-Type").is_some_and(|c| c.contains("toml"));
    let bytes = body(request)?;
    if toml {
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| ApiError::field(None, "the TOML body is not UTF-8"))?;
        let job =
            job_file::parse("body", text).map_err(|e| ApiError::field(None, e.to_string()))?;
        Ok((None, job))
    } else {
        job_file::parse_json(&bytes).map_err(|e| ApiError::field(e.field, e.message))
    }
}

/// `POST /v1/jobs`: creates or updates a job. `201` when created, `200`
/// otherwise: `{"job", "version", "change", "epoch"}`.
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs",
    params(
        ("expect_version" = Option<u64>, Query, description = "Check-and-set: apply only if the job is at this version (0: only if it does not exist)."),
        ("max_parallel" = Option<u32>, Query, description = "The most slots of a group an update replaces at once (default 1)."),
        ("id" = Option<String>, Query, description = "The job's id for a TOML body (JSON: the body's `id`; default: the name)."),
        ("Idempotency-Key" = Option<String>, Header, description = "A retried request with the same key changes nothing and gets the same answer."),
    ),
    request_body(content = Object, description = "The job file's keys as JSON (docs/jobs.md: `name`, `group`) plus an optional `id`; or the TOML file itself with `Content-Type: application/toml`."),
    responses(
        (status = 201, description = "Created, durable.", body = Accepted),
        (status = 200, description = "Updated, unchanged or replayed.", body = Accepted),
        (status = 400, description = "Malformed, unknown field, wrong type, a rule broken.", body = ErrorBody),
        (status = 409, description = "The version does not match, or the spec conflicts.", body = ErrorBody),
        (status = 413, description = "The body is over the limit.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn submit(
    request: &mut tiny_http::Request,
    url: &str,
    queries: &Asker<'_>,
) -> Result<Response, ApiError> {
    let key = header_value(request, "Idempotency-Key").map(|k| k.trim().to_string());
    if let Some(k) = &key {
        if k.is_empty() || k.len() > MAX_IDEMPOTENCY_KEY_BYTES {
            return Err(ApiError::field(
                Some("Idempotency-Key".into()),
                format!("must be 1 to {MAX_IDEMPOTENCY_KEY_BYTES} bytes"),
            ));
        }
    }
    let expect_version = number_param(url, "expect_version")?;
    let max_parallel = match number_param(url, "max_parallel")? {
        None => 1,
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| ApiError::field(Some("max_parallel".into()), "must be at least 1"))?,
    };
    let (id, job) = read_job(request)?;
    let id = id.or_else(|| query_param(url, "id")).unwrap_or_else(|| job.name.clone());
    if id.is_empty() {
        return Err(ApiError::field(Some("id".into()), "must not be empty"));
    }
    let submission = JobSubmission {
        job: FrameworkId::new(id.clone()),
        name: job.name.clone(),
        groups: job.groups_to_declare(),
        key,
        expect_version,
        max_parallel,
        tenant: job.tenant.clone(),
    };
    match command(queries, Message::SubmitJob { request: request_id(), job: submission })? {
        Message::JobAccepted { epoch, job, version, change, .. } => {
            let status = if change == JobChange::Created { 201 } else { 200 };
            let job = job.as_str().to_string();
            Ok(answer(status, &Accepted { job, version, change, epoch: epoch.0 }))
        }
        other => Err(unexpected(other, &id)),
    }
}

/// `POST /v1/jobs/{id}/plan`: where the body's groups would be placed now;
/// nothing changes. `{"epoch", "job", "groups": [GroupPlan...]}`.
#[utoipa::path(post, path = "/v1/jobs/{id}/plan", tag = "jobs",
    params(("id" = String, Path, description = "The job.")),
    request_body(content = Object, description = "As `POST /v1/jobs`."),
    responses(
        (status = 200, description = "Where the groups would go; nothing changed.", body = Plan),
        (status = 400, description = "A bad job.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn plan(
    request: &mut tiny_http::Request,
    id: &str,
    queries: &Asker<'_>,
) -> Result<Response, ApiError> {
    let (_, job) = read_job(request)?;
    let msg = Message::PlanRequest {
        request: request_id(),
        groups: job.groups_to_declare(),
        tenant: job.tenant.clone(),
    };
    match command(queries, msg)? {
        Message::PlanReply { epoch, groups, .. } => {
            Ok(answer(200, &Plan { epoch: epoch.0, job: id.to_string(), groups }))
        }
        other => Err(unexpected(other, id)),
    }
}

/// `GET /v1/jobs`: `{"epoch", "jobs": [JobStatus...]}`.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs",
    responses(
        (status = 200, description = "Every job.", body = JobList),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn list_all(queries: &Asker<'_>) -> Result<Response, ApiError> {
    list(queries, None)
}

/// `GET /v1/jobs/{id}`: one JobStatus, `404` when there is no such job.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "The job.")),
    responses(
        (status = 200, description = "The job: every group and slot.", body = JobStatus),
        (status = 404, description = "No such job.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn get_one(queries: &Asker<'_>, id: &str) -> Result<Response, ApiError> {
    list(queries, Some(id))
}

fn list(queries: &Asker<'_>, id: Option<&str>) -> Result<Response, ApiError> {
    let msg = Message::JobsRequest { request: request_id(), job: id.map(FrameworkId::from) };
    match command(queries, msg)? {
        Message::JobsReply { epoch, jobs, .. } => match id {
            // Only the jobs the token may read (docs/design.md#issue-44).
            None => {
                let jobs =
                    regent_core::visibility::jobs_visible_to(&queries.access.principal(), jobs);
                Ok(answer(200, &JobList { epoch: epoch.0, jobs }))
            }
            Some(id) => match jobs.into_iter().find(|j| j.job.as_str() == id) {
                Some(job) => Ok(answer(200, &job)),
                None => Err(ApiError::new(404, format!("no such job: {id}"))),
            },
        },
        other => Err(unexpected(other, id.unwrap_or(""))),
    }
}

/// The answer to `GET /v1/jobs/{id}/deployment`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Deployments {
    /// The leader's epoch.
    pub epoch: u64,
    /// The job.
    pub job: String,
    /// Its version (an API job's; `None` for a framework a subscriber
    /// drives).
    pub version: Option<u64>,
    /// Every group, in declaration order, with its current or last
    /// deployment.
    pub groups: Vec<GroupDeployment>,
}

/// One group's deployment in [`Deployments`].
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct GroupDeployment {
    /// The group.
    pub group: String,
    /// Slots wanted.
    pub desired: u32,
    /// Slots with an executor placed (launching, running or stopping),
    /// of any version.
    pub placed: u32,
    /// Slots whose executor runs, of any version.
    pub running: u32,
    /// Its current or last deployment; `null` when it never had one.
    pub deployment: Option<DeploymentView>,
}

/// `GET /v1/jobs/{id}/deployment`: each group's current or last deployment
/// (state, digests, canaries, healthy/placed/open counts, deadlines, why it
/// failed): `{"epoch", "job", "version", "groups": [{"group", "desired",
/// "placed", "running", "deployment"}]}`; `404` naming the job when there
/// is no such job (docs/jobs.md, deployments).
#[utoipa::path(get, path = "/v1/jobs/{id}/deployment", tag = "jobs",
    params(("id" = String, Path, description = "The job.")),
    responses(
        (status = 200, description = "Each group's current or last deployment.", body = Deployments),
        (status = 404, description = "No such job.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn deployment(queries: &Asker<'_>, id: &str) -> Result<Response, ApiError> {
    let msg = Message::JobsRequest { request: request_id(), job: Some(FrameworkId::from(id)) };
    match command(queries, msg)? {
        Message::JobsReply { epoch, jobs, .. } => {
            let Some(job) = jobs.into_iter().find(|j| j.job.as_str() == id) else {
                return Err(ApiError::new(404, format!("no such job: {id}")));
            };
            Ok(answer(200, &deployments_of(epoch.0, job)))
        }
        other => Err(unexpected(other, id)),
    }
}

/// The deployments of `job`'s groups, as `GET /v1/jobs/{id}/deployment`
/// answers them.
pub fn deployments_of(epoch: u64, job: JobStatus) -> Deployments {
    Deployments {
        epoch,
        job: job.job.as_str().to_string(),
        version: job.version,
        groups: job
            .groups
            .into_iter()
            .map(|g| GroupDeployment {
                group: g.group,
                desired: g.desired,
                placed: g.placed,
                running: g.running,
                deployment: g.deployment,
            })
            .collect(),
    }
}

/// `DELETE /v1/jobs/{id}`: tears the job down, once durable:
/// `{"job", "deleted": true, "epoch"}`.
#[utoipa::path(delete, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "The job.")),
    responses(
        (status = 200, description = "Torn down, durable.", body = Deleted),
        (status = 404, description = "No such job.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn delete(queries: &Asker<'_>, id: &str) -> Result<Response, ApiError> {
    let msg = Message::DeleteJob { request: request_id(), job: FrameworkId::from(id) };
    match command(queries, msg)? {
        Message::RequestAccepted { epoch, .. } => {
            Ok(answer(200, &Deleted { job: id.to_string(), deleted: true, epoch: epoch.0 }))
        }
        other => Err(unexpected(other, id)),
    }
}

/// The body of `POST /v1/jobs/{id}/groups/{group}/scale`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScaleBody {
    /// The slot count wanted.
    pub count: u32,
    /// The executors removed (their slots dropped when the count is
    /// lowered, refilled when it is kept).
    #[serde(default)]
    pub remove: Vec<String>,
    /// How they stop (`None`: killed).
    #[serde(default)]
    pub drain: Option<DrainBody>,
}

/// How named executors stop: `signal` (default `TERM`), SIGKILL after
/// `deadline` (e.g. `30s`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DrainBody {
    /// The signal sent first (`TERM`, `INT`, `HUP`, `QUIT`, `USR1`, `USR2`).
    #[serde(default)]
    pub signal: Option<String>,
    /// How long they may take after it.
    pub deadline: String,
}

/// A JSON body as `T`; `400` naming the field at fault.
pub fn read_json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        ApiError::field((path != ".").then_some(path), e.inner().to_string())
    })
}

/// The scale's stop, from its `drain`; `400` naming the field.
fn stop_of(drain: &DrainBody) -> Result<Stop, ApiError> {
    let signal = match &drain.signal {
        None => StopSignal::Term,
        Some(s) => StopSignal::parse(s).ok_or_else(|| {
            ApiError::field(
                Some("drain.signal".into()),
                format!("{s:?} is no signal (TERM, INT, HUP, QUIT, USR1, USR2)"),
            )
        })?,
    };
    let deadline = job_file::duration_ms(&drain.deadline)
        .map_err(|e| ApiError::field(Some("drain.deadline".into()), e.to_string()))?;
    Ok(Stop { signal, deadline: Millis(deadline) })
}

/// `POST /v1/jobs/{id}/groups/{group}/scale`: sets the count and removes
/// the named executors in one durable write:
/// `{"job", "group", "count", "removed", "epoch"}`.
#[utoipa::path(post, path = "/v1/jobs/{id}/groups/{group}/scale", tag = "jobs",
    params(("id" = String, Path, description = "The job."), ("group" = String, Path, description = "The group.")),
    request_body(content = ScaleBody),
    responses(
        (status = 200, description = "Scaled, durable.", body = Scaled),
        (status = 400, description = "A bad body, or a scale the group cannot take.", body = ErrorBody),
        (status = 404, description = "No such job or group.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn scale(
    request: &mut tiny_http::Request,
    job: &str,
    group: &str,
    queries: &Asker<'_>,
) -> Result<Response, ApiError> {
    let b: ScaleBody = read_json(&body(request)?)?;
    let stop = b.drain.as_ref().map(stop_of).transpose()?;
    let msg = Message::ScaleGroup {
        request: request_id(),
        framework: FrameworkId::from(job),
        group: group.to_string(),
        slots: b.count,
        remove: b.remove.iter().map(|e| ExecutorId::from(e.as_str())).collect(),
        stop,
    };
    match command(queries, msg)? {
        Message::RequestAccepted { epoch, .. } => Ok(answer(
            200,
            &Scaled {
                job: job.to_string(),
                group: group.to_string(),
                count: b.count,
                removed: b.remove,
                epoch: epoch.0,
            },
        )),
        other => Err(unexpected(other, job)),
    }
}

/// The body of `POST /v1/jobs/{id}/deployment/promote` (empty: every
/// group's deployment awaiting promotion).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PromoteBody {
    /// Only this group's deployment.
    #[serde(default)]
    pub group: Option<String>,
}

/// The answer to a promotion.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Promoted {
    /// The job.
    pub job: String,
    /// The group named, if one was.
    pub group: Option<String>,
    /// Always `true`: the promotion is durable.
    pub promoted: bool,
    /// The leader's epoch.
    pub epoch: u64,
}

/// `POST /v1/jobs/{id}/deployment/promote`: the job's deployments awaiting
/// promotion (or the named group's) go on rolling, once durable:
/// `{"job", "group", "promoted": true, "epoch"}` (docs/jobs.md,
/// deployments).
#[utoipa::path(post, path = "/v1/jobs/{id}/deployment/promote", tag = "jobs",
    params(("id" = String, Path, description = "The job.")),
    request_body(content = PromoteBody),
    responses(
        (status = 200, description = "Promoted, durable.", body = Promoted),
        (status = 400, description = "A bad body, no such group, or nothing awaits promotion (the reason names each group's state).", body = ErrorBody),
        (status = 404, description = "No such job.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn promote(
    request: &mut tiny_http::Request,
    job: &str,
    queries: &Asker<'_>,
) -> Result<Response, ApiError> {
    let bytes = body(request)?;
    let b: PromoteBody = if bytes.iter().all(u8::is_ascii_whitespace) {
        PromoteBody::default()
    } else {
        read_json(&bytes)?
    };
    let msg = Message::PromoteDeployment {
        request: request_id(),
        job: FrameworkId::from(job),
        group: b.group.clone(),
    };
    match command(queries, msg)? {
        Message::RequestAccepted { epoch, .. } => Ok(answer(
            200,
            &Promoted { job: job.to_string(), group: b.group, promoted: true, epoch: epoch.0 },
        )),
        other => Err(unexpected(other, job)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_promote_body_names_a_group_or_nothing() {
        let b: PromoteBody = read_json(br#"{"group": "web"}"#).unwrap();
        assert_eq!(b.group.as_deref(), Some("web"));
        let b: PromoteBody = read_json(b"{}").unwrap();
        assert_eq!(b, PromoteBody::default());
        let e = read_json::<PromoteBody>(br#"{"groups": ["web"]}"#).unwrap_err();
        assert_eq!(e.body["field"], "groups", "{e:?}");
        assert_eq!(
            super::super::route("/v1/jobs/web/deployment/promote"),
            Some(super::super::Route::Promote("web".into()))
        );
    }

    #[test]
    fn a_scale_body_is_read_naming_the_field_at_fault() {
        let b: ScaleBody =
            read_json(br#"{"count": 2, "remove": ["e1"], "drain": {"deadline": "30s"}}"#).unwrap();
        assert_eq!(b.count, 2);
        let stop = stop_of(b.drain.as_ref().unwrap()).unwrap();
        assert_eq!(stop, Stop { signal: StopSignal::Term, deadline: Millis(30_000) });
        let e = read_json::<ScaleBody>(br#"{"count": "two"}"#).unwrap_err();
        assert_eq!(e.body["field"], "count");
        let e = read_json::<ScaleBody>(br#"{"count": 1, "drain": {"deadline": "1s", "x": 1}}"#)
            .unwrap_err();
        assert_eq!(e.body["field"], "drain.x", "{e:?}");
        let bad = DrainBody { signal: Some("KILL".into()), deadline: "1s".into() };
        assert_eq!(stop_of(&bad).unwrap_err().body["field"], "drain.signal");
        let bad = DrainBody { signal: None, deadline: "soon".into() };
        assert_eq!(stop_of(&bad).unwrap_err().body["field"], "drain.deadline");
    }
}

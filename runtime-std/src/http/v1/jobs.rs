//! `/v1/jobs`: submit (create or update), plan, list, read, delete, and
//! scale a group naming the executors it removes. Each is one wire message
//! (`SubmitJob`, `PlanRequest`, `JobsRequest`, `DeleteJob`, `ScaleGroup`)
//! and the master's reply rendered as JSON.

use super::errors::{json_response, ApiError};
use super::{body, command, header_value, number_param, query_param, request_id, unexpected};
use crate::http::{HttpQuery, Response};
use crate::job_file;
use regent_core::api::{JobChange, JobSubmission, Stop, StopSignal, MAX_IDEMPOTENCY_KEY_BYTES};
use regent_core::ids::{ExecutorId, FrameworkId};
use regent_core::job::JobSpec;
use regent_core::protocol::Message;
use regent_core::time::Millis;
use serde::Deserialize;
use serde_json::json;

/// The job in a request's body: JSON (the job file's keys plus an
/// optional `id`), or TOML (the job file itself) with
/// `Content-Type: application/toml`. `400` naming the field otherwise.
pub fn read_job(request: &mut tiny_http::Request) -> Result<(Option<String>, JobSpec), ApiError> {
    let toml = header_value(request, "Content-Type").is_some_and(|c| c.contains("toml"));
    let bytes = body(request)?;
    if toml {
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| ApiError::field(None, "the TOML body is not UTF-8"))?;
        let job = job_file::parse("body", text).map_err(|e| ApiError::field(None, e))?;
        Ok((None, job))
    } else {
        job_file::parse_json(&bytes).map_err(|e| ApiError::field(e.field, e.message))
    }
}

/// `POST /v1/jobs`: creates or updates a job. `201` when created, `200`
/// otherwise: `{"job", "version", "change", "epoch"}`.
pub fn submit(
    request: &mut tiny_http::Request,
    url: &str,
    queries: &async_channel::Sender<HttpQuery>,
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
    };
    match command(queries, Message::SubmitJob { request: request_id(), job: submission })? {
        Message::JobAccepted { epoch, job, version, change, .. } => {
            let status = if change == JobChange::Created { 201 } else { 200 };
            Ok(json_response(
                status,
                &json!({"job": job.as_str(), "version": version, "change": change, "epoch": epoch.0}),
            ))
        }
        other => Err(unexpected(other, &id)),
    }
}

/// `POST /v1/jobs/{id}/plan`: where the body's groups would be placed now;
/// nothing changes. `{"epoch", "job", "groups": [GroupPlan...]}`.
pub fn plan(
    request: &mut tiny_http::Request,
    id: &str,
    queries: &async_channel::Sender<HttpQuery>,
) -> Result<Response, ApiError> {
    let (_, job) = read_job(request)?;
    let msg = Message::PlanRequest { request: request_id(), groups: job.groups_to_declare() };
    match command(queries, msg)? {
        Message::PlanReply { epoch, groups, .. } => {
            Ok(json_response(200, &json!({"epoch": epoch.0, "job": id, "groups": groups})))
        }
        other => Err(unexpected(other, id)),
    }
}

/// `GET /v1/jobs` (`{"epoch", "jobs": [JobStatus...]}`) and
/// `GET /v1/jobs/{id}` (one JobStatus, `404` when there is no such job).
pub fn list(
    queries: &async_channel::Sender<HttpQuery>,
    id: Option<&str>,
) -> Result<Response, ApiError> {
    let msg = Message::JobsRequest { request: request_id(), job: id.map(FrameworkId::from) };
    match command(queries, msg)? {
        Message::JobsReply { epoch, jobs, .. } => match id {
            None => Ok(json_response(200, &json!({"epoch": epoch.0, "jobs": jobs}))),
            Some(id) => match jobs.into_iter().find(|j| j.job.as_str() == id) {
                Some(job) => Ok(json_response(200, &json!(job))),
                None => Err(ApiError::new(404, format!("no such job: {id}"))),
            },
        },
        other => Err(unexpected(other, id.unwrap_or(""))),
    }
}

/// `DELETE /v1/jobs/{id}`: tears the job down, once durable:
/// `{"job", "deleted": true, "epoch"}`.
pub fn delete(queries: &async_channel::Sender<HttpQuery>, id: &str) -> Result<Response, ApiError> {
    let msg = Message::DeleteJob { request: request_id(), job: FrameworkId::from(id) };
    match command(queries, msg)? {
        Message::RequestAccepted { epoch, .. } => {
            Ok(json_response(200, &json!({"job": id, "deleted": true, "epoch": epoch.0})))
        }
        other => Err(unexpected(other, id)),
    }
}

/// The body of `POST /v1/jobs/{id}/groups/{group}/scale`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
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
/// `deadline` (`30s`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
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
        .map_err(|e| ApiError::field(Some("drain.deadline".into()), e))?;
    Ok(Stop { signal, deadline: Millis(deadline) })
}

/// `POST /v1/jobs/{id}/groups/{group}/scale`: sets the count and removes
/// the named executors in one durable write:
/// `{"job", "group", "count", "removed", "epoch"}`.
pub fn scale(
    request: &mut tiny_http::Request,
    job: &str,
    group: &str,
    queries: &async_channel::Sender<HttpQuery>,
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
        Message::RequestAccepted { epoch, .. } => Ok(json_response(
            200,
            &json!({"job": job, "group": group, "count": b.count, "removed": b.remove, "epoch": epoch.0}),
        )),
        other => Err(unexpected(other, job)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

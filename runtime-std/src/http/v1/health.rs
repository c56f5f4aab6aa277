//! `POST /v1/executors/{id}/health`: a framework reports one result of a
//! `manual` health check of its running executor (docs/jobs.md, health
//! checks). The leader relays it to the executor's worker, which counts it
//! like a run of any check; it holds for the check's TTL, so the framework
//! reports again within it. Nothing is stored.

use super::errors::{ApiError, ErrorBody, Unavailable};
use super::jobs::{answer, read_json};
use super::Asker;
use super::{body, command, request_id, unexpected};
use crate::http::Response;
use regent_core::ids::ExecutorId;
use regent_core::protocol::Message;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of `POST /v1/executors/{id}/health`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthBody {
    /// The name of one of the executor's group's `manual` checks.
    pub check: String,
    /// Whether the check passed.
    pub passing: bool,
    /// What the framework says about it (cut to 256 bytes).
    #[serde(default)]
    pub detail: String,
}

/// The answer to a health report.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct HealthRelayed {
    /// The executor.
    pub executor: String,
    /// The check.
    pub check: String,
    /// The result relayed.
    pub passing: bool,
    /// The leader's epoch.
    pub epoch: u64,
}

/// `POST /v1/executors/{id}/health`: relays one result of a manual check
/// to the executor's worker: `{"executor", "check", "passing", "epoch"}`.
#[utoipa::path(post, path = "/v1/executors/{id}/health", tag = "jobs",
    params(("id" = String, Path, description = "The executor.")),
    request_body(content = HealthBody),
    responses(
        (status = 200, description = "Relayed to the executor's worker.", body = HealthRelayed),
        (status = 400, description = "A bad body, an executor not RUNNING, or a check that is not one of its group's manual checks (the reason names them).", body = ErrorBody),
        (status = 404, description = "No such executor.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn report(
    request: &mut tiny_http::Request,
    id: &str,
    queries: &Asker<'_>,
) -> Result<Response, ApiError> {
    let b: HealthBody = read_json(&body(request)?)?;
    let msg = Message::ReportHealth {
        request: request_id(),
        executor: ExecutorId::from(id),
        check: b.check.clone(),
        passing: b.passing,
        detail: b.detail,
    };
    match command(queries, msg)? {
        Message::RequestAccepted { epoch, .. } => Ok(answer(
            200,
            &HealthRelayed {
                executor: id.to_string(),
                check: b.check,
                passing: b.passing,
                epoch: epoch.0,
            },
        )),
        other => Err(unexpected(other, id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_health_body_names_the_check_and_the_result() {
        let b: HealthBody =
            read_json(br#"{"check": "ready", "passing": false, "detail": "db down"}"#).unwrap();
        assert_eq!((b.check.as_str(), b.passing, b.detail.as_str()), ("ready", false, "db down"));
        let b: HealthBody = read_json(br#"{"check": "ready", "passing": true}"#).unwrap();
        assert!(b.detail.is_empty());
        let e = read_json::<HealthBody>(br#"{"check": "ready"}"#).unwrap_err();
        assert!(format!("{e:?}").contains("passing"), "{e:?}");
        let e = read_json::<HealthBody>(br#"{"check": "ready", "passing": true, "ok": 1}"#)
            .unwrap_err();
        assert_eq!(e.body["field"], "ok", "{e:?}");
        assert_eq!(
            super::super::route("/v1/executors/web%2Fapi%230%231.2/health"),
            Some(super::super::Route::ExecutorHealth("web/api#0#1.2".into()))
        );
    }
}

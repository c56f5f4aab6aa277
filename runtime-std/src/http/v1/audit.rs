//! `GET /v1/audit?since=MS`: this master's audit log (docs/security.md#audit,
//! docs/design.md#issue-44): every change a client asked while it led,
//! accepted or refused, at or after wall-clock `since` (ms since the Unix
//! epoch; default 0). Needs the `operator` capability. Each master answers
//! with its own log: the full trail is the union over the masters
//! (`regent audit --http URL,URL` merges them by time).

use super::errors::{ApiError, ErrorBody};
use super::jobs::answer;
use super::number_param;
use crate::http::Response;
use regent_core::audit::AuditRecord;
use serde::Serialize;

/// The answer: the records, oldest first.
#[derive(Debug, Serialize)]
pub struct AuditLines {
    /// The records at or after `since`, in the order they were written.
    pub records: Vec<AuditRecord>,
}

/// `GET /v1/audit`.
#[utoipa::path(get, path = "/v1/audit", tag = "operator",
    params(("since" = Option<u64>, Query, description = "Records at or after this wall-clock time (ms since the Unix epoch).")),
    responses(
        (status = 200, description = "`{\"records\": [{\"time_ms\", \"token\", \"tenant\", \"action\", \"target\", \"outcome\", \"reason\"}]}`, oldest first."),
        (status = 404, description = "This master keeps no audit log.", body = ErrorBody),
    ))]
pub fn read(url: &str) -> Result<Response, ApiError> {
    let since = number_param(url, "since")?.unwrap_or(0);
    let Some(path) = crate::audit::served_path() else {
        return Err(ApiError::new(
            404,
            "this master keeps no audit log (start it with --audit-log PATH, or --recovery \
             filesystem)",
        ));
    };
    let records = crate::audit::read_since(path, since).map_err(|e| {
        ApiError::new(500, format!("cannot read the audit log {}: {e}", path.display()))
    })?;
    Ok(answer(200, &AuditLines { records }))
}

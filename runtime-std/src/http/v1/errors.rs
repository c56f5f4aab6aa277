//! The `/v1/` answers that are not a success: `{"error": "...", "field":
//! "group[0].count"}` with the status that says whose fault it is, and the
//! master's refusals classified by what the request named.

use super::super::{header, Response};
use regent_core::protocol::LeaderHint;
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;

/// The body of every error but a `503`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What is wrong, naming the problem.
    pub error: String,
    /// The field at fault (`group[0].count`, `expect_version`), when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// The body of a `503`: this master cannot answer now; `leader` names the
/// leader when it is known (`null`: try the next master, or retry).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Unavailable {
    /// Why (`not the leader`, no answer in time, ...).
    pub error: String,
    /// The leader, when this master knows it.
    pub leader: Option<LeaderRef>,
}

/// Where the leader is.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct LeaderRef {
    /// Its master id.
    pub id: String,
    /// Its address for workers and subscribers (its `--listen`).
    pub addr: String,
}

/// An error answer: its status and its JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// The HTTP status (400, 401, 403, 404, 405, 409, 413, 503).
    pub status: u16,
    /// The JSON body (`error`, and `field` or `leader` when they apply).
    pub body: Value,
    /// `Allow` for a `405`.
    pub allow: Option<&'static str>,
}

impl ApiError {
    /// `status` with `{"error": message}` (a `503` with `"leader": null`).
    pub fn new(status: u16, message: impl Into<String>) -> ApiError {
        let error = message.into();
        let body = if status == 503 {
            json!(Unavailable { error, leader: None })
        } else {
            json!(ErrorBody { error, field: None })
        };
        ApiError { status, body, allow: None }
    }

    /// `400` naming the field at fault (`None`: the body as a whole).
    pub fn field(field: Option<String>, message: impl Into<String>) -> ApiError {
        let mut e = ApiError::new(400, message);
        if let Some(f) = field {
            e.body["field"] = json!(f);
        }
        e
    }

    /// `405 Method Not Allowed` with the methods that are.
    pub fn method(allow: &'static str) -> ApiError {
        let error = format!("method not allowed here: use {allow}");
        ApiError { status: 405, body: json!(ErrorBody { error, field: None }), allow: Some(allow) }
    }

    /// `503`: this master does not lead; `leader` names the one that does,
    /// when known (a client configured with every master tries the next).
    pub fn not_leader(leader: Option<&LeaderHint>) -> ApiError {
        let leader = leader.map(|h| json!({ "id": h.id.as_str(), "addr": h.addr.as_str() }));
        ApiError {
            status: 503,
            body: json!({ "error": "not the leader", "leader": leader }),
            allow: None,
        }
    }

    /// `503`: the master did not answer in time.
    pub fn timeout() -> ApiError {
        // A write waits for the store: a slow one can outlast the wait and
        // still become durable, so the client must not read this as "not
        // done" (docs/api.md, Errors).
        ApiError::new(
            503,
            "the master did not answer in time; a write may still be applied: retry it with \
             the same Idempotency-Key (a job), or read the state before repeating it",
        )
    }

    /// The response.
    pub fn response(&self) -> Response {
        let mut r = json_response(self.status, &self.body);
        if let Some(allow) = self.allow {
            r = r.with_header(header("Allow", allow));
        }
        r
    }
}

/// A JSON response: `status`, `Content-Type: application/json`, `v` on
/// one line.
pub fn json_response(status: u16, v: &Value) -> Response {
    let mut body = serde_json::to_string(v).unwrap_or_else(|_| "{}".into());
    body.push('\n');
    tiny_http::Response::from_string(body)
        .with_status_code(status)
        .with_header(header("Content-Type", "application/json"))
}

/// The status of a master's `RequestRefused` with `reason` for a request
/// that named `named` (a job, worker or executor id): `404` when the
/// reason says that thing is not known (`no worker w9`, `unknown ...`), `409` for a version that does not
/// match or a conflicting spec, `501` for a command this master does not
/// serve yet, `400` for the rest (the request itself is at fault).
pub fn refusal_status(reason: &str, named: &str) -> u16 {
    let r = reason.to_ascii_lowercase();
    let unknown = ["unknown", "no such", "not found", "not known", "does not exist"];
    let conflict =
        ["version", "conflict", "already exists", "exists already", "driven by a subscriber"];
    if r.starts_with(regent_core::master::FORBIDDEN) {
        403
    } else if r.contains("not served") {
        501
    } else if conflict.iter().any(|w| r.contains(w)) {
        409
    } else if (unknown.iter().any(|w| r.contains(w)) || r.starts_with("no "))
        && (named.is_empty() || reason.contains(named))
    {
        404
    } else {
        400
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_classified_by_what_they_say_of_what_was_named() {
        assert_eq!(refusal_status("unknown worker \"w9\"", "w9"), 404);
        assert_eq!(refusal_status("no worker w9", "w9"), 404);
        let driven = "job web is driven by a subscriber (regent run/submit); it cannot be changed through the API";
        assert_eq!(refusal_status(driven, "web"), 409);
        assert_eq!(refusal_status("job \"web\" is at version 3, not 2", "web"), 409);
        assert_eq!(refusal_status("SubmitJob is not served to local askers yet", "web"), 501);
        assert_eq!(refusal_status("count must be at least 1", "web"), 400);
        // An unknown thing other than the one named is the request's fault.
        assert_eq!(refusal_status("unknown executor \"e1\" in remove", "web"), 400);
    }

    #[test]
    fn a_standby_names_the_leader() {
        let hint = LeaderHint {
            id: "m2".into(),
            addr: "127.0.0.1:7001".into(),
            epoch: regent_core::ids::Epoch(4),
        };
        let e = ApiError::not_leader(Some(&hint));
        assert_eq!(e.status, 503);
        assert_eq!(
            e.body,
            json!({"error": "not the leader", "leader": {"id": "m2", "addr": "127.0.0.1:7001"}})
        );
        assert_eq!(ApiError::not_leader(None).body["leader"], Value::Null);
    }
}

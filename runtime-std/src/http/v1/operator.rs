//! The operator's commands over `/v1/`, with the CLI's semantics: cordon,
//! uncordon and drain a worker, remove a worker, kill an executor, and
//! make the leader step down. Each is one wire message answered once
//! durable.

use super::errors::{json_response, ApiError};
use super::jobs::read_json;
use super::{body, command, request_id, unexpected};
use crate::http::{HttpQuery, Response};
use regent_core::ids::{ExecutorId, WorkerId};
use regent_core::protocol::Message;
use regent_core::time::Millis;
use serde::Deserialize;
use serde_json::json;

/// What `POST /v1/workers/{id}/{action}` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerAction {
    /// Place nothing more on it.
    Cordon,
    /// Place on it again.
    Uncordon,
    /// Cordon it and move what runs on it elsewhere.
    Drain,
}

impl WorkerAction {
    /// The action a path segment names.
    pub fn parse(s: &str) -> Option<WorkerAction> {
        match s {
            "cordon" => Some(WorkerAction::Cordon),
            "uncordon" => Some(WorkerAction::Uncordon),
            "drain" => Some(WorkerAction::Drain),
            _ => None,
        }
    }

    /// Its name in the path and the answer.
    pub fn name(self) -> &'static str {
        match self {
            WorkerAction::Cordon => "cordon",
            WorkerAction::Uncordon => "uncordon",
            WorkerAction::Drain => "drain",
        }
    }
}

/// A drain's default deadline, as `regent drain`'s.
pub const DEFAULT_DRAIN_DEADLINE: &str = "60s";

/// The body of `POST /v1/workers/{id}/drain` (optional).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrainWorkerBody {
    /// Between SIGTERM and SIGKILL (default [`DEFAULT_DRAIN_DEADLINE`]).
    #[serde(default)]
    pub deadline: Option<String>,
}

/// The body of `POST /v1/executors/{id}/kill` (optional).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillBody {
    /// Place a replacement in its slot (default `true`, as
    /// `regent kill-executor` without `--no-refill`).
    #[serde(default)]
    pub refill: Option<bool>,
}

/// An optional JSON body: empty means `T::default()`.
fn optional_body<T: serde::de::DeserializeOwned + Default>(
    request: &mut tiny_http::Request,
) -> Result<T, ApiError> {
    let bytes = body(request)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        Ok(T::default())
    } else {
        read_json(&bytes)
    }
}

/// `POST /v1/workers/{id}/cordon|uncordon|drain`:
/// `{"worker", "action", "epoch"}` once durable.
pub fn worker(
    request: &mut tiny_http::Request,
    id: &str,
    action: WorkerAction,
    queries: &async_channel::Sender<HttpQuery>,
) -> Result<Response, ApiError> {
    let (request_no, worker) = (request_id(), WorkerId::from(id));
    let msg = match action {
        WorkerAction::Cordon => Message::CordonWorker { request: request_no, worker },
        WorkerAction::Uncordon => Message::UncordonWorker { request: request_no, worker },
        WorkerAction::Drain => {
            let b: DrainWorkerBody = optional_body(request)?;
            let text = b.deadline.as_deref().unwrap_or(DEFAULT_DRAIN_DEADLINE);
            let ms = crate::job_file::duration_ms(text)
                .map_err(|e| ApiError::field(Some("deadline".into()), e))?;
            Message::DrainWorker { request: request_no, worker, deadline: Millis(ms) }
        }
    };
    accepted(command(queries, msg)?, id, json!({"worker": id, "action": action.name()}))
}

/// `DELETE /v1/workers/{id}`: forgets a worker left UNKNOWN or DEAD.
pub fn remove_worker(
    id: &str,
    queries: &async_channel::Sender<HttpQuery>,
) -> Result<Response, ApiError> {
    let msg = Message::RemoveWorker { request: request_id(), worker: WorkerId::from(id) };
    accepted(command(queries, msg)?, id, json!({"worker": id, "removed": true}))
}

/// `POST /v1/executors/{id}/kill`: `{"executor", "killed", "refill",
/// "epoch"}`.
pub fn kill_executor(
    request: &mut tiny_http::Request,
    id: &str,
    queries: &async_channel::Sender<HttpQuery>,
) -> Result<Response, ApiError> {
    let b: KillBody = optional_body(request)?;
    let refill = b.refill.unwrap_or(true);
    let msg = Message::OperatorKillExecutor {
        request: request_id(),
        executor: ExecutorId::from(id),
        refill,
    };
    accepted(command(queries, msg)?, id, json!({"executor": id, "killed": true, "refill": refill}))
}

/// `POST /v1/leader/step-down`: `{"stepped_down": true, "epoch"}`.
pub fn step_down(queries: &async_channel::Sender<HttpQuery>) -> Result<Response, ApiError> {
    let msg = Message::StepDown { request: request_id() };
    accepted(command(queries, msg)?, "", json!({"stepped_down": true}))
}

/// `200` with `body` and the epoch for `RequestAccepted`; the refusal
/// otherwise.
fn accepted(
    reply: Message,
    named: &str,
    mut body: serde_json::Value,
) -> Result<Response, ApiError> {
    match reply {
        Message::RequestAccepted { epoch, .. } => {
            body["epoch"] = json!(epoch.0);
            Ok(json_response(200, &body))
        }
        other => Err(unexpected(other, named)),
    }
}

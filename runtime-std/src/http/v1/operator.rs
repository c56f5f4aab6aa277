//! The operator's commands over `/v1/`, with the CLI's semantics: cordon,
//! uncordon and drain a worker, remove a worker, kill an executor, and
//! make the leader step down. Each is one wire message answered once
//! durable.

use super::errors::{ApiError, ErrorBody, Unavailable};
use super::jobs::{answer, read_json};
use super::Asker;
use super::{body, command, request_id, unexpected};
use crate::http::Response;
use regent_core::ids::{ExecutorId, WorkerId};
use regent_core::protocol::Message;
use regent_core::time::Millis;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The answer to a cordon, uncordon or drain.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct WorkerChanged {
    /// The worker.
    pub worker: String,
    /// `cordon`, `uncordon` or `drain`.
    pub action: String,
    /// The leader's epoch.
    pub epoch: u64,
}

/// The answer to `DELETE /v1/workers/{id}`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct WorkerRemoved {
    /// The worker.
    pub worker: String,
    /// Always `true`: its record is deleted, durably.
    pub removed: bool,
    /// The leader's epoch.
    pub epoch: u64,
}

/// The answer to `POST /v1/executors/{id}/kill`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ExecutorKilled {
    /// The executor.
    pub executor: String,
    /// Always `true`.
    pub killed: bool,
    /// Whether its slot gets a replacement.
    pub refill: bool,
    /// The leader's epoch.
    pub epoch: u64,
}

/// The answer to `POST /v1/leader/step-down`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SteppedDown {
    /// Always `true`.
    pub stepped_down: bool,
    /// The epoch of the leadership given up.
    pub epoch: u64,
}

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
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DrainWorkerBody {
    /// Between SIGTERM and SIGKILL (default [`DEFAULT_DRAIN_DEADLINE`]).
    #[serde(default)]
    pub deadline: Option<String>,
}

/// The body of `POST /v1/executors/{id}/kill` (optional).
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
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
#[utoipa::path(post, path = "/v1/workers/{id}/{action}", tag = "operator",
    params(
        ("id" = String, Path, description = "The worker."),
        ("action" = String, Path, description = "`cordon` (place nothing more on it), `uncordon`, or `drain` (cordon, stop what runs there, place it elsewhere)."),
    ),
    request_body(content = DrainWorkerBody, description = "For `drain` only; optional (an empty body: the default deadline)."),
    responses(
        (status = 200, description = "Done, durable.", body = WorkerChanged),
        (status = 404, description = "No such worker.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn worker(
    request: &mut tiny_http::Request,
    id: &str,
    action: WorkerAction,
    queries: &Asker<'_>,
) -> Result<Response, ApiError> {
    let (request_no, worker) = (request_id(), WorkerId::from(id));
    let msg = match action {
        WorkerAction::Cordon => Message::CordonWorker { request: request_no, worker },
        WorkerAction::Uncordon => Message::UncordonWorker { request: request_no, worker },
        WorkerAction::Drain => {
            let b: DrainWorkerBody = optional_body(request)?;
            let text = b.deadline.as_deref().unwrap_or(DEFAULT_DRAIN_DEADLINE);
            let ms = crate::job_file::duration_ms(text)
                .map_err(|e| ApiError::field(Some("deadline".into()), e.to_string()))?;
            Message::DrainWorker { request: request_no, worker, deadline: Millis(ms) }
        }
    };
    let (worker, action) = (id.to_string(), action.name().to_string());
    accepted(command(queries, msg)?, id, |epoch| WorkerChanged { worker, action, epoch })
}

/// `DELETE /v1/workers/{id}`: forgets a worker left UNKNOWN or DEAD.
#[utoipa::path(delete, path = "/v1/workers/{id}", tag = "operator",
    params(("id" = String, Path, description = "The worker.")),
    responses(
        (status = 200, description = "Removed, durable.", body = WorkerRemoved),
        (status = 400, description = "The worker is not UNKNOWN or DEAD.", body = ErrorBody),
        (status = 404, description = "No such worker.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn remove_worker(id: &str, queries: &Asker<'_>) -> Result<Response, ApiError> {
    let msg = Message::RemoveWorker { request: request_id(), worker: WorkerId::from(id) };
    let worker = id.to_string();
    accepted(command(queries, msg)?, id, |epoch| WorkerRemoved { worker, removed: true, epoch })
}

/// `POST /v1/executors/{id}/kill`: `{"executor", "killed", "refill",
/// "epoch"}`.
#[utoipa::path(post, path = "/v1/executors/{id}/kill", tag = "operator",
    params(("id" = String, Path, description = "The executor.")),
    request_body(content = KillBody, description = "Optional (an empty body: refill)."),
    responses(
        (status = 200, description = "Killed.", body = ExecutorKilled),
        (status = 404, description = "No such executor.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn kill_executor(
    request: &mut tiny_http::Request,
    id: &str,
    queries: &Asker<'_>,
) -> Result<Response, ApiError> {
    let b: KillBody = optional_body(request)?;
    let refill = b.refill.unwrap_or(true);
    let msg = Message::OperatorKillExecutor {
        request: request_id(),
        executor: ExecutorId::from(id),
        refill,
    };
    let executor = id.to_string();
    accepted(command(queries, msg)?, id, |epoch| ExecutorKilled {
        executor,
        killed: true,
        refill,
        epoch,
    })
}

/// `POST /v1/leader/step-down`: `{"stepped_down": true, "epoch"}`.
#[utoipa::path(post, path = "/v1/leader/step-down", tag = "operator",
    responses(
        (status = 200, description = "Stepped down; another master leads (ZooKeeper mode).", body = SteppedDown),
        (status = 400, description = "Refused (a single-master mode).", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn step_down(queries: &Asker<'_>) -> Result<Response, ApiError> {
    let msg = Message::StepDown { request: request_id() };
    accepted(command(queries, msg)?, "", |epoch| SteppedDown { stepped_down: true, epoch })
}

/// `200` with the body `body` makes of the epoch for `RequestAccepted`;
/// the refusal otherwise.
fn accepted<T: Serialize>(
    reply: Message,
    named: &str,
    body: impl FnOnce(u64) -> T,
) -> Result<Response, ApiError> {
    match reply {
        Message::RequestAccepted { epoch, .. } => Ok(answer(200, &body(epoch.0))),
        other => Err(unexpected(other, named)),
    }
}

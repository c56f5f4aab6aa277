//! `/v1/`: the HTTP API for clients in any language (docs/api.md). JSON in
//! and out; every write and job read is one wire [`Message`] handed to the
//! node as [`HttpQuery::Command`] and the master's reply rendered
//! ([`jobs`], [`operator`]); the event stream ([`events`]) follows the
//! server's hub; [`openapi`] describes it all, from these types.
//!
//! * Routing ([`route`]): an unknown path is `404`, a known path with
//!   another method `405` with `Allow`.
//! * Bodies are read up to [`MAX_BODY`] bytes; a larger one is `413`
//!   naming the limit, before anything is parsed.
//! * The master's answer: `NotLeader` is `503` naming the leader,
//!   `LeaderSuspended` `503`, no answer within [`COMMAND_TIMEOUT`] `503`,
//!   `RequestRefused` `400`, `404` or `409` by what it says of what the
//!   request named ([`errors::refusal_status`]).
//! * Keep-alive is tiny_http's: a response of known length keeps the
//!   connection for the client's next request.

use super::{HttpQuery, Response};
use errors::ApiError;
use regent_core::protocol::Message;
use regent_core::token::{Capability, Denied};
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub mod audit;
pub mod auth;
pub mod errors;
pub mod events;
pub mod health;
pub mod jobs;
pub mod openapi;
pub mod operator;
pub mod tenants;
pub mod tokens;

/// Where the API lives.
pub const PREFIX: &str = "/v1/";

/// The largest request body read; a larger one is `413`.
pub const MAX_BODY: usize = crate::job_file::MAX_JOB_BYTES;

/// How long a command waits for the master's answer (a write is answered
/// once durable) before `503`.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// Request numbers of this process's commands (the reply is per query;
/// the number is only echoed).
static REQUEST: AtomicU64 = AtomicU64::new(1);

/// A fresh request number.
pub fn request_id() -> u64 {
    REQUEST.fetch_add(1, Ordering::Relaxed)
}

/// What a `/v1/` path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/v1/jobs`: GET lists, POST submits.
    Jobs,
    /// `/v1/jobs/{id}`: GET, DELETE.
    Job(String),
    /// `/v1/jobs/{id}/plan`: POST.
    Plan(String),
    /// `/v1/jobs/{id}/groups/{group}/scale`: POST.
    Scale(String, String),
    /// `/v1/events`: GET.
    Events,
    /// `/v1/workers/{id}/{cordon|uncordon|drain}`: POST.
    Worker(String, operator::WorkerAction),
    /// `/v1/workers/{id}`: DELETE (remove-worker).
    RemoveWorker(String),
    /// `/v1/executors/{id}/kill`: POST.
    KillExecutor(String),
    /// `/v1/executors/{id}/health`: POST (a manual check's result).
    ExecutorHealth(String),
    /// `/v1/leader/step-down`: POST.
    StepDown,
    /// `/v1/openapi.json`: GET.
    OpenApi,
    /// `/v1/audit`: GET (docs/design.md#issue-44).
    Audit,
    /// `/v1/tenants`: GET (docs/tenants.md).
    Tenants,
    /// `/v1/tenants/{name}`: PUT.
    Tenant(String),
    /// `/v1/tokens/revoke`: POST (docs/security.md).
    RevokeToken,
    /// `/v1/jobs/{id}/deployment/promote`: POST (docs/jobs.md,
    /// deployments).
    Promote(String),
    /// `/v1/jobs/{id}/deployment`: GET (docs/jobs.md, deployments).
    Deployment(String),
}

impl Route {
    /// The methods it takes, as `Allow` lists them.
    pub fn allow(&self) -> &'static str {
        match self {
            Route::Jobs => "GET, HEAD, POST",
            Route::Job(_) => "GET, HEAD, DELETE",
            Route::RemoveWorker(_) => "DELETE",
            Route::Events
            | Route::OpenApi
            | Route::Audit
            | Route::Tenants
            | Route::Deployment(_) => "GET, HEAD",
            Route::Tenant(_) => "PUT",
            Route::Plan(_)
            | Route::Scale(..)
            | Route::Worker(..)
            | Route::KillExecutor(_)
            | Route::ExecutorHealth(_)
            | Route::StepDown
            | Route::RevokeToken
            | Route::Promote(_) => "POST",
        }
    }
}

/// The route of `path` (without the query), its ids percent-decoded;
/// `None` for a path the API does not have.
pub fn route(path: &str) -> Option<Route> {
    let rest = path.strip_prefix(PREFIX)?;
    let raw: Vec<&str> = rest.split('/').collect();
    let mut seg = Vec::with_capacity(raw.len());
    for s in &raw {
        seg.push(crate::exec::names::unescape(s)?);
    }
    let s: Vec<&str> = seg.iter().map(String::as_str).collect();
    let id = |i: usize| (!s[i].is_empty()).then(|| s[i].to_string());
    Some(match s.as_slice() {
        ["jobs"] => Route::Jobs,
        ["jobs", _] => Route::Job(id(1)?),
        ["jobs", _, "plan"] => Route::Plan(id(1)?),
        ["jobs", _, "groups", _, "scale"] => Route::Scale(id(1)?, id(3)?),
        ["jobs", _, "deployment"] => Route::Deployment(id(1)?),
        ["jobs", _, "deployment", "promote"] => Route::Promote(id(1)?),
        ["events"] => Route::Events,
        ["workers", _] => Route::RemoveWorker(id(1)?),
        ["workers", _, action] => Route::Worker(id(1)?, operator::WorkerAction::parse(action)?),
        ["executors", _, "kill"] => Route::KillExecutor(id(1)?),
        ["executors", _, "health"] => Route::ExecutorHealth(id(1)?),
        ["leader", "step-down"] => Route::StepDown,
        ["openapi.json"] => Route::OpenApi,
        ["audit"] => Route::Audit,
        ["tenants"] => Route::Tenants,
        ["tenants", _] => Route::Tenant(id(1)?),
        ["tokens", "revoke"] => Route::RevokeToken,
        _ => return None,
    })
}

/// The value of query parameter `name` in `url`, percent-decoded.
pub fn query_param(url: &str, name: &str) -> Option<String> {
    let (_, query) = url.split_once('?')?;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| crate::exec::names::unescape(v).unwrap_or_else(|| v.to_string()))
    })
}

/// A number parameter of `url` (`None` when absent); `400` naming it when
/// it is not a number.
pub fn number_param(url: &str, name: &str) -> Result<Option<u64>, ApiError> {
    match query_param(url, name) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| {
            ApiError::field(Some(name.to_string()), format!("{v:?} is not a whole number"))
        }),
    }
}

/// The value of header `name`, if the request has it.
pub fn header_value<'a>(request: &'a tiny_http::Request, name: &'static str) -> Option<&'a str> {
    request.headers().iter().find(|h| h.field.equiv(name)).map(|h| h.value.as_str())
}

/// Reads the request's body, at most [`MAX_BODY`] bytes (`413` past it).
pub fn body(request: &mut tiny_http::Request) -> Result<Vec<u8>, ApiError> {
    let too_large =
        || ApiError::new(413, format!("the request body is over the limit of {MAX_BODY} bytes"));
    if request.body_length().is_some_and(|n| n > MAX_BODY) {
        return Err(too_large());
    }
    let mut buf = Vec::new();
    request
        .as_reader()
        .take(MAX_BODY as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| ApiError::new(400, format!("cannot read the request body: {e}")))?;
    if buf.len() > MAX_BODY {
        return Err(too_large());
    }
    Ok(buf)
}

/// Who asks and through what: the daemon's query channel and the
/// request's access (its principal goes to the master with every command).
#[derive(Clone, Copy, Debug)]
pub struct Asker<'a> {
    /// The daemon's query channel.
    pub queries: &'a async_channel::Sender<HttpQuery>,
    /// What the request's token grants.
    pub access: &'a auth::Access,
}

/// Sends `msg` to the master with the asker's principal and waits for its
/// reply (at most [`COMMAND_TIMEOUT`]). A standby's `NotLeader`, a
/// suspended leader and no answer are errors (`503`); every other reply is
/// the caller's to render.
pub fn command(asker: &Asker<'_>, msg: Message) -> Result<Message, ApiError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let principal = Box::new(asker.access.principal());
    if asker.queries.send_blocking(HttpQuery::Command { msg, principal, reply: tx }).is_err() {
        return Err(ApiError::new(503, "the master is shutting down"));
    }
    match rx.recv_timeout(COMMAND_TIMEOUT) {
        Ok(Message::NotLeader { leader, .. }) => Err(ApiError::not_leader(leader.as_ref())),
        Ok(Message::LeaderSuspended { .. }) => {
            let mut e = ApiError::not_leader(None);
            e.body["error"] = "the leader's coordination session is in doubt; retry".into();
            Err(e)
        }
        Ok(reply) => Ok(reply),
        Err(_) => Err(ApiError::timeout()),
    }
}

/// An error for a reply that is neither what the command expects nor a
/// refusal (`RequestRefused` with `reason` is classified by what the
/// request named, `named`).
pub fn unexpected(reply: Message, named: &str) -> ApiError {
    match reply {
        Message::RequestRefused { reason, .. } => {
            ApiError::new(errors::refusal_status(&reason, named), reason)
        }
        other => ApiError::new(502, format!("the master answered {} unexpectedly", other.kind())),
    }
}

/// Answers a request under `/v1/` from a client with `access`.
pub(super) fn respond(
    mut request: tiny_http::Request,
    queries: &async_channel::Sender<HttpQuery>,
    hub: &std::sync::Arc<super::events::Hub>,
    access: auth::Access,
) {
    let method = request.method().clone();
    let url = request.url().to_string();
    let path = url.split(['?', '#']).next().unwrap_or("").to_string();
    let read = matches!(method, tiny_http::Method::Get | tiny_http::Method::Head);
    let result = match route(&path) {
        None => Err(ApiError::new(404, format!("no such path: {path} (see /v1/openapi.json)"))),
        Some(r) if !r.allow().split(", ").any(|m| m == method.as_str()) => {
            Err(ApiError::method(r.allow()))
        }
        Some(r) => match allowed(&r, read, &access) {
            Err(denied) => Err(ApiError::new(403, format!("forbidden: {denied}"))),
            Ok(()) if r == Route::Events => {
                tracing::debug!(%method, %path, "HTTP /v1/ event stream");
                return events::serve(request, &url, hub, access.principal());
            }
            Ok(()) => {
                let asker = Asker { queries, access: &access };
                handle(r, &method, &url, &mut request, &asker)
            }
        },
    };
    let response = result.unwrap_or_else(|e| e.response());
    tracing::debug!(%method, %path, status = response.status_code().0, "HTTP /v1/ request");
    if let Err(e) = request.respond(response) {
        tracing::debug!(%path, error = %e, "HTTP response not delivered");
    }
}

/// The capability a request of `route` (a read: `GET` or `HEAD`) needs,
/// and what it does in words: what its wire message needs
/// ([`regent_core::token::required`]); `None` for the API's description,
/// which any token may read.
pub fn needs(route: &Route, read: bool) -> Option<(Capability, &'static str)> {
    Some(match route {
        Route::Jobs if read => (Capability::Read, "read jobs"),
        Route::Jobs => (Capability::Submit, "submit a job"),
        Route::Job(_) if read => (Capability::Read, "read jobs"),
        Route::Job(_) => (Capability::Submit, "delete a job"),
        Route::Plan(_) => (Capability::Read, "read a plan"),
        Route::Scale(..) => (Capability::Scale, "scale a group"),
        Route::Events => (Capability::Read, "read the events"),
        Route::Worker(..) => (Capability::Operator, "cordon, uncordon or drain a worker"),
        Route::RemoveWorker(_) => (Capability::Operator, "remove a worker"),
        Route::KillExecutor(_) => (Capability::Operator, "kill any executor"),
        Route::ExecutorHealth(_) => (Capability::Submit, "report an executor's health"),
        Route::StepDown => (Capability::Operator, "step the leader down"),
        Route::Audit => (Capability::Operator, "read the audit log"),
        Route::Tenants => (Capability::Read, "read tenants"),
        Route::Tenant(_) => (Capability::Operator, "set a tenant"),
        Route::RevokeToken => (Capability::Operator, "revoke tokens"),
        Route::Promote(_) => (Capability::Submit, "promote a deployment"),
        Route::Deployment(_) => (Capability::Read, "read jobs"),
        Route::OpenApi => return None,
    })
}

/// `Ok` when `access` may make a request of `route`, else the refusal
/// naming the capability missing.
fn allowed(route: &Route, read: bool, access: &auth::Access) -> Result<(), Denied> {
    needs(route, read).map_or(Ok(()), |(cap, action)| access.require(cap, action))
}

fn handle(
    route: Route,
    method: &tiny_http::Method,
    url: &str,
    request: &mut tiny_http::Request,
    queries: &Asker<'_>,
) -> Result<Response, ApiError> {
    use tiny_http::Method::{Delete, Post};
    match (route, method) {
        (Route::Jobs, Post) => jobs::submit(request, url, queries),
        (Route::Jobs, _) => jobs::list_all(queries),
        (Route::Job(id), Delete) => jobs::delete(queries, &id),
        (Route::Job(id), _) => jobs::get_one(queries, &id),
        (Route::Plan(id), _) => jobs::plan(request, &id, queries),
        (Route::Scale(job, group), _) => jobs::scale(request, &job, &group, queries),
        (Route::Worker(id, action), _) => operator::worker(request, &id, action, queries),
        (Route::RemoveWorker(id), _) => operator::remove_worker(&id, queries),
        (Route::KillExecutor(id), _) => operator::kill_executor(request, &id, queries),
        (Route::ExecutorHealth(id), _) => health::report(request, &id, queries),
        (Route::StepDown, _) => operator::step_down(queries),
        (Route::OpenApi, _) => Ok(openapi::response()),
        (Route::Audit, _) => audit::read(url),
        (Route::Tenants, _) => tenants::list(queries),
        (Route::Tenant(name), _) => tenants::set(request, &name, queries),
        (Route::RevokeToken, _) => tokens::revoke(request, queries),
        (Route::Promote(id), _) => jobs::promote(request, &id, queries),
        (Route::Deployment(id), _) => jobs::deployment(queries, &id),
        (Route::Events, _) => Err(ApiError::new(500, "the event stream is served apart")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route_with_their_ids_decoded() {
        assert_eq!(route("/v1/jobs"), Some(Route::Jobs));
        assert_eq!(route("/v1/jobs/web"), Some(Route::Job("web".into())));
        assert_eq!(route("/v1/jobs/a%2Fb/plan"), Some(Route::Plan("a/b".into())));
        assert_eq!(
            route("/v1/jobs/web/groups/g/scale"),
            Some(Route::Scale("web".into(), "g".into()))
        );
        assert_eq!(
            route("/v1/workers/w1/cordon"),
            Some(Route::Worker("w1".into(), operator::WorkerAction::Cordon))
        );
        assert_eq!(route("/v1/workers/w1"), Some(Route::RemoveWorker("w1".into())));
        assert_eq!(route("/v1/executors/e%231/kill"), Some(Route::KillExecutor("e#1".into())));
        assert_eq!(route("/v1/leader/step-down"), Some(Route::StepDown));
        assert_eq!(route("/v1/events"), Some(Route::Events));
        assert_eq!(route("/v1/jobs/web/deployment"), Some(Route::Deployment("web".into())));
        for unknown in ["/v1/", "/v1/jobs/", "/v1/nope", "/v1/workers/w1/paint", "/v2/jobs"] {
            assert_eq!(route(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn query_parameters_are_read_and_numbers_checked() {
        assert_eq!(query_param("/v1/events?after=3.14&x", "after").as_deref(), Some("3.14"));
        assert_eq!(query_param("/v1/jobs", "after"), None);
        assert_eq!(number_param("/v1/jobs?expect_version=2", "expect_version"), Ok(Some(2)));
        let e = number_param("/v1/jobs?expect_version=two", "expect_version").unwrap_err();
        assert_eq!((e.status, e.body["field"].as_str()), (400, Some("expect_version")));
    }
}

//! The HTTP face of every master, leader or standby (`--http ADDR`):
//!
//! * `GET /api/state`: the master's view as JSON ([`state_json`], plus
//!   `rejected_connections`);
//! * `GET /metrics`: Prometheus text exposition ([`metrics_text`]);
//! * `GET /api/events`: the cluster as server-sent events, a snapshot then
//!   every change ([`events`]);
//! * `GET /`: the web page ([`page`]): plain HTML and JavaScript embedded in
//!   the binary, which reads `/api/state` and follows `/api/events`.
//! * `GET /api/logs/<executor>?stream=stdout|stderr[&offset=N|&tail=N]`: a
//!   chunk of an executor's output, relayed by the leader ([`logs`]).
//! * `/v1/...`: the HTTP API for clients in any language ([`v1`],
//!   docs/api.md): jobs, scaling, operator commands, the resumable event
//!   stream, `/v1/openapi.json`.
//!
//! On the pages, `HEAD` is answered like `GET` without a body; any other
//! method is `405 Method Not Allowed`, any other path `404 Not Found`.
//!
//! The server is tiny_http on a dedicated thread (event streams get a thread
//! each, see [`events`]). It keeps no copy of the master's state: for every
//! request of `/api/state` or `/metrics` it asks the daemon loop for an
//! [`HttpSnapshot`] through an [`HttpQuery`] (which the pump hands its node
//! as a query, [`queries`]) and renders it (the page is
//! static; the event streams share one poller); when the daemon does not
//! answer within [`QUERY_TIMEOUT`] the request gets `503 Service
//! Unavailable`. The thread ends soon after the daemon drops (or closes) the
//! receiving end of the query channel.
//!
//! Exposure: the pages are read-only but describe the whole cluster, so
//! `--http` follows the rule of `--listen` (the master checks it with
//! [`crate::net::check_exposure`] before binding anything): a non-loopback
//! address needs a cluster secret, or `--insecure`. HTTP has no handshake,
//! so with a cluster secret every request needs `Authorization: Bearer
//! <token>`, on loopback too (docs/design.md#issue-44): the secret's full
//! token ([`bearer_token`], `regent http-token`), its read-only token, or
//! a scoped token (`regent token create`) verified with the secret
//! ([`v1::auth`]). A request without one, or with one refused, gets `401
//! Unauthorized` (with `WWW-Authenticate: Bearer realm="regent"`) naming
//! why and how to get one; a request its token may not make gets `403`
//! naming the capability missing: `read` for the page, `/api/state`,
//! `/api/events` and `/metrics`, `logs` for `/api/logs/`, and under `/v1/`
//! what its wire message needs. A cluster without a secret stays open.
//! The pages only read; `/v1/` also writes, each write one wire message
//! handed to the node ([`HttpQuery::Command`]) with the request's
//! principal.

use regent_core::protocol::{ClusterState, ExecutorState};
use regent_core::secret::Secret;
use regent_core::states::{MaintenanceState, MasterStatus, WorkerState};
use regent_core::token::Capability;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub mod events;
pub mod https;
pub mod logs;
pub mod page;
pub mod queries;
pub mod revocations;
pub mod v1;

pub use v1::auth::Tokens;

/// How long a request waits for the daemon's snapshot before `503`.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// How often the server thread checks whether the daemon is gone.
const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// A request from the HTTP thread to the daemon loop. The daemon answers
/// each on the query's own reply channel (or drops it, which the request
/// sees as `503`). The queries travel on an `async_channel`
/// (runtime-neutral: the smol master awaits it, the std master's
/// forwarding thread blocks on it); the replies are std channels the HTTP
/// thread waits on with a timeout.
#[derive(Debug)]
pub enum HttpQuery {
    /// `GET /api/state` and the event stream: a snapshot of the cluster.
    State {
        /// Where the daemon sends it (`try_send`: room for one).
        reply: std::sync::mpsc::SyncSender<HttpSnapshot>,
        /// The asker may see the state a moment late (`/api/state`, the
        /// event stream's poller): the daemon answers with the master's
        /// cached snapshot (`Master::cached_state`), rebuilt only when
        /// something other than heartbeats happened, and for all HTTP
        /// askers together paced by the view's size
        /// ([`regent_core::limits::HTTP_SNAPSHOT_GAP_PER_ENTRY_US`]).
        /// `false`: a snapshot built now.
        cached: bool,
    },
    /// `GET /metrics`: the counters and gauges, no snapshot
    /// (`Master::gauges`: about a quarter of a millisecond of the loop at
    /// 18,000 workers and executors).
    Metrics {
        /// Where the daemon sends them (`try_send`: room for one).
        reply: std::sync::mpsc::SyncSender<MetricsSnapshot>,
    },
    /// `GET /api/logs/...`: a log read, answered on its own channel.
    Log(logs::LogQuery),
    /// A `/v1/` write or job read: a client's command as the wire
    /// protocol carries it, from an authenticated HTTP client
    /// ([`regent_core::node::master::Query::Command`]).
    Command {
        /// The command.
        msg: regent_core::protocol::Message,
        /// Who sends it (the request's token; docs/design.md#issue-44).
        /// Boxed: claims are large.
        principal: Box<regent_core::token::Principal>,
        /// Where the daemon sends the master's reply (`try_send`: room for
        /// one).
        reply: std::sync::mpsc::SyncSender<regent_core::protocol::Message>,
    },
    /// The revocations in force at the node (a request with a scoped
    /// token is checked against them; docs/security.md).
    Revocations {
        /// Where the daemon sends them (`try_send`: room for one).
        reply: std::sync::mpsc::SyncSender<regent_core::token::Revocations>,
    },
}

/// What the daemon loop answers to an [`HttpQuery::Metrics`].
#[derive(Clone, Debug, Default)]
pub struct MetricsSnapshot {
    /// The cluster's counts and gauges, from the master's counters.
    pub gauges: regent_core::master::Gauges,
    /// Connections the runtime refused or closed (see
    /// [`HttpSnapshot::rejected_connections`]).
    pub rejected_connections: u64,
    /// The node's leadership counters.
    pub node: regent_core::node::master::Metrics,
    /// The master machine's counters.
    pub master: regent_core::master::Metrics,
}

impl From<&HttpSnapshot> for MetricsSnapshot {
    /// The metrics a snapshot shows: its gauges computed from the state
    /// ([`Gauges::of_state`](regent_core::master::Gauges::of_state)), the
    /// same counters. For daemons and tests that answer with snapshots.
    fn from(snap: &HttpSnapshot) -> MetricsSnapshot {
        MetricsSnapshot {
            gauges: regent_core::master::Gauges::of_state(&snap.state),
            rejected_connections: snap.rejected_connections,
            node: snap.node.clone(),
            master: snap.master.clone(),
        }
    }
}

impl HttpSnapshot {
    /// The snapshot a request acting as `p` may read
    /// ([`ClusterState::visible_to`]; the same one for a principal that
    /// sees everything).
    pub fn visible_to(self, p: &regent_core::token::Principal) -> HttpSnapshot {
        if regent_core::visibility::sees_all(p) {
            return self;
        }
        HttpSnapshot { state: Arc::new(self.state.visible_to(p)), ..self }
    }
}

/// What the daemon loop answers to an [`HttpQuery::State`].
#[derive(Clone, Debug)]
pub struct HttpSnapshot {
    /// The master's view (its machine's `state()`; shared with its cache).
    pub state: std::sync::Arc<ClusterState>,
    /// Connections the runtime refused or closed (wrong cluster or secret,
    /// garbage, oversized frames, too many connections) since start.
    pub rejected_connections: u64,
    /// The node's leadership counters (leader changes, elections,
    /// step-downs, revocations, store resends).
    pub node: regent_core::node::master::Metrics,
    /// The master machine's counters (snapshots built and cached, the log
    /// relay).
    pub master: regent_core::master::Metrics,
}

/// What the bearer token is derived from: HMAC-SHA256 of this under the
/// cluster secret (see [`bearer_token`]).
pub const BEARER_LABEL: &[u8] = b"regent http bearer v1";

/// The bearer token an HTTP server bound to a non-loopback address requires
/// (`Authorization: Bearer <token>`): the lowercase hex of
/// HMAC-SHA256(secret, [`BEARER_LABEL`]). `regent http-token` prints it.
pub fn bearer_token(secret: &Secret) -> String {
    v1::auth::hmac_hex(secret, BEARER_LABEL)
}

/// The tokens a server requires with the cluster secret `secret` (the
/// full [`bearer_token`], the read-only [`v1::auth::read_only_token`] and
/// scoped tokens the secret signed): on every address, loopback too
/// (docs/design.md#issue-44). `None` without a secret (the exposure check
/// refuses a non-loopback address without a secret unless `--insecure`,
/// which then leaves it open).
pub fn required_token(secret: Option<&Secret>) -> Option<Tokens> {
    secret.map(Tokens::of)
}

/// Why the HTTP face could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The address could not be bound.
    #[error("cannot serve HTTP on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The server's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

crate::error::into_report!(HttpError);

/// Binds `addr` and serves on a dedicated thread (see [`serve_on`]), open to
/// every request. The error names the address when it cannot be bound.
pub fn serve(
    addr: SocketAddr,
    queries: async_channel::Sender<HttpQuery>,
) -> Result<std::thread::JoinHandle<()>, HttpError> {
    serve_with(addr, None, queries)
}

/// [`serve`], requiring `Authorization: Bearer <token>` on every request
/// when `token` is given (see [`required_token`]).
pub fn serve_with(
    addr: SocketAddr,
    token: Option<Tokens>,
    queries: async_channel::Sender<HttpQuery>,
) -> Result<std::thread::JoinHandle<()>, HttpError> {
    let server = bind(addr)?;
    Ok(serve_on_with(server, token, queries))
}

/// Binds an HTTP server on `addr` (port 0 picks a free port: read it back
/// with `server.server_addr().to_ip()`). The error names the address.
pub fn bind(addr: SocketAddr) -> Result<tiny_http::Server, HttpError> {
    tiny_http::Server::http(addr).map_err(|source| HttpError::Bind { addr, source })
}

/// Serves requests of `server` on a new thread named `regent-http` until the
/// receiving end of `queries` is closed.
pub fn serve_on(
    server: tiny_http::Server,
    queries: async_channel::Sender<HttpQuery>,
) -> std::thread::JoinHandle<()> {
    serve_on_with(server, None, queries)
}

/// [`serve_on`], requiring `Authorization: Bearer <token>` on every request
/// when `token` is given.
pub fn serve_on_with(
    server: tiny_http::Server,
    token: Option<Tokens>,
    queries: async_channel::Sender<HttpQuery>,
) -> std::thread::JoinHandle<()> {
    let bound = server.server_addr().to_string();
    tracing::info!(addr = %bound, bearer = token.is_some(), "HTTP listening");
    std::thread::Builder::new()
        .name("regent-http".into())
        .spawn(move || {
            let hub = events::Hub::new(queries.clone());
            // One copy of the revocation list per server (docs/security.md).
            let mut revoked = revocations::RevocationCache::default();
            while !queries.is_closed() {
                match server.recv_timeout(POLL_INTERVAL) {
                    Ok(Some(request)) => {
                        respond(request, &queries, &hub, token.as_ref(), &mut revoked)
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(addr = %bound, error = %e, "HTTP server failed; stopping");
                        break;
                    }
                }
            }
            tracing::debug!(addr = %bound, "HTTP server stopped");
        })
        .expect("the OS can start a thread")
}

/// Which page a path names.
#[derive(Clone, Copy)]
enum Page {
    Html,
    State,
    Metrics,
    Events,
}

fn respond(
    request: tiny_http::Request,
    queries: &async_channel::Sender<HttpQuery>,
    hub: &Arc<events::Hub>,
    tokens: Option<&Tokens>,
    revocations: &mut revocations::RevocationCache,
) {
    let method = request.method().clone();
    let path = request.url().split(['?', '#']).next().unwrap_or("").to_string();
    let api = path.starts_with(v1::PREFIX);
    let given = v1::header_value(&request, "Authorization");
    let now_ms = crate::host::wall_clock_ms();
    // A scoped token is checked against this face's copy of the leader's
    // revocations, at most `revocations::MAX_AGE` old (the cluster
    // secret's own tokens need none).
    let scoped = given.is_some_and(|g| g.contains(regent_core::token::PREFIX));
    let none = regent_core::token::Revocations::default();
    let revoked = match (scoped && tokens.is_some())
        .then(|| revocations.current(queries, std::time::Instant::now()))
    {
        None => &none,
        Some(Ok(list)) => list,
        Some(Err(unchecked)) => {
            let response = unchecked_response(&unchecked, api);
            let _ = request.respond(response);
            return;
        }
    };
    let access = match v1::auth::access(given, tokens, now_ms, revoked) {
        Ok(access) => access,
        Err(why) => {
            let why = why.to_string();
            tracing::debug!(%method, %path, status = 401, "HTTP request refused");
            let response = if api {
                v1::errors::ApiError::new(401, why).response()
            } else {
                text(401, &format!("{why}\n"))
            };
            let response =
                response.with_header(header("WWW-Authenticate", "Bearer realm=\"regent\""));
            if let Err(e) = request.respond(response) {
                tracing::debug!(%path, error = %e, "HTTP response not delivered");
            }
            return;
        }
    };
    if api {
        // A revocation made here is in force for this face's next request.
        let revoking = method == tiny_http::Method::Post && path == "/v1/tokens/revoke";
        v1::respond(request, queries, hub, access);
        if revoking {
            revocations.invalidate();
        }
        return;
    }
    let (cap, action) = if path.starts_with(logs::PREFIX) {
        (Capability::Logs, "read an executor's output")
    } else {
        (Capability::Read, "read the cluster's state")
    };
    if let Err(denied) = access.require(cap, action) {
        tracing::debug!(%method, %path, status = 403, "HTTP request refused");
        if let Err(e) = request.respond(text(403, &format!("forbidden: {denied}\n"))) {
            tracing::debug!(%path, error = %e, "HTTP response not delivered");
        }
        return;
    }
    if path.starts_with(logs::PREFIX) {
        let response = match method {
            tiny_http::Method::Get | tiny_http::Method::Head => {
                match logs::allowed(request.url(), queries, &access.principal()) {
                    Ok(()) => logs::respond(request.url(), queries),
                    Err(why @ logs::LogsDenied::NoAnswer) => text(503, &format!("{why}\n")),
                    Err(why) => text(403, &format!("forbidden: {why}\n")),
                }
            }
            _ => {
                text(405, "method not allowed: use GET\n").with_header(header("Allow", "GET, HEAD"))
            }
        };
        tracing::debug!(%method, %path, status = response.status_code().0, "HTTP request");
        if let Err(e) = request.respond(response) {
            tracing::debug!(%path, error = %e, "HTTP response not delivered");
        }
        return;
    }
    let page = match path.as_str() {
        "/" | "/index.html" => Some(Page::Html),
        "/api/state" => Some(Page::State),
        "/metrics" => Some(Page::Metrics),
        "/api/events" => Some(Page::Events),
        _ => None,
    };
    let get = matches!(method, tiny_http::Method::Get | tiny_http::Method::Head);
    if get && matches!(page, Some(Page::Events)) {
        tracing::debug!(%method, %path, "HTTP event stream");
        return events::serve(request, hub, access.principal());
    }
    let response = match (&method, page) {
        (_, None) => text(404, "not found\n"),
        // The page is static: it reads the state itself.
        (tiny_http::Method::Get | tiny_http::Method::Head, Some(Page::Html)) => {
            tiny_http::Response::from_string(page::PAGE)
                .with_header(header("Content-Type", "text/html; charset=utf-8"))
                .with_header(header("Cache-Control", "no-cache"))
        }
        (tiny_http::Method::Get | tiny_http::Method::Head, Some(Page::Metrics)) => {
            match metrics_of(queries) {
                Some(m) => tiny_http::Response::from_string(metrics_text(&m)).with_header(header(
                    "Content-Type",
                    "text/plain; version=0.0.4; charset=utf-8",
                )),
                None => text(503, "the master did not answer in time; retry\n"),
            }
        }
        (tiny_http::Method::Get | tiny_http::Method::Head, Some(page)) => {
            match (page, state_page(request.url())) {
                (Page::State, Err(why)) => text(400, &format!("{why}\n")),
                (_, paged) => match snapshot(queries).map(|s| s.visible_to(&access.principal())) {
                    Some(snap) => match (page, paged) {
                        (Page::State, Ok(Some(p))) => paged_state(&snap, &p),
                        _ => render(page, &snap),
                    },
                    None => text(503, "the master did not answer in time; retry\n"),
                },
            }
        }
        (_, Some(_)) => {
            text(405, "method not allowed: use GET\n").with_header(header("Allow", "GET, HEAD"))
        }
    };
    let status = response.status_code().0;
    tracing::debug!(%method, %path, status, "HTTP request");
    if let Err(e) = request.respond(response) {
        tracing::debug!(%path, error = %e, "HTTP response not delivered");
    }
}

/// Asks the daemon for a snapshot; `None` after [`QUERY_TIMEOUT`] or when
/// the daemon is gone. The master's cached one
/// (`cached` in [`HttpQuery::State`]): rebuilt only when something other than
/// heartbeats happened since, or once it is
/// [`regent_core::limits::STATE_SNAPSHOT_MAX_AGE`] old, so a dashboard
/// polling `/api/state` costs the master's
/// loop at most one build per that age while the cluster is quiet (its
/// heartbeat counters may lag by it), and all HTTP askers together paced by
/// the view's size while it changes
/// ([`regent_core::limits::HTTP_SNAPSHOT_GAP_PER_ENTRY_US`]).
fn snapshot(queries: &async_channel::Sender<HttpQuery>) -> Option<HttpSnapshot> {
    snapshot_of(queries, true)
}

/// The most workers one page of `/api/state` lists.
pub const MAX_PAGE_WORKERS: usize = 10_000;

/// Why `/api/state`'s page parameters are refused (a `400`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// `limit` is not a number from 1 to [`MAX_PAGE_WORKERS`].
    #[error("limit={0}: write a number of workers from 1 to {MAX_PAGE_WORKERS}")]
    Limit(String),
    /// `after` is not a percent-encoded worker id.
    #[error("after={0}: not a percent-encoded worker id")]
    After(String),
}

/// A page of `GET /api/state?limit=N&after=WORKER`: the workers whose ids
/// come after `after` (in id order), at most `limit` of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatePage {
    /// How many workers at most (1 to [`MAX_PAGE_WORKERS`]).
    pub limit: usize,
    /// The last worker id of the page before (`None`: from the first).
    pub after: Option<String>,
}

/// The page `url` asks for: `None` without `limit` or `after` (the whole
/// state); an error naming a malformed `limit` or `after` (other
/// parameters are ignored).
pub fn state_page(url: &str) -> Result<Option<StatePage>, PageError> {
    let Some((_, query)) = url.split_once('?') else { return Ok(None) };
    let (mut limit, mut after) = (None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "limit" => {
                let n: usize = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_PAGE_WORKERS).contains(n))
                    .ok_or_else(|| PageError::Limit(v.to_owned()))?;
                limit = Some(n);
            }
            "after" => {
                after = Some(
                    crate::exec::names::unescape(v)
                        .ok_or_else(|| PageError::After(v.to_owned()))?,
                )
            }
            // Other parameters (a cache buster, `pretty`) are ignored, as
            // they always were.
            _ => {}
        }
    }
    if limit.is_none() && after.is_none() {
        return Ok(None);
    }
    Ok(Some(StatePage { limit: limit.unwrap_or(1_000), after }))
}

/// One page of `/api/state` as a response: the page's workers and the executors placed on
/// them, every framework (and the history), and `page`: `{limit, after,
/// next_after, workers_total}` (`next_after` is what to pass as `after`
/// for the next page, `null` on the last).
fn paged_state(snap: &HttpSnapshot, page: &StatePage) -> Response {
    tiny_http::Response::from_string(paged_state_body(snap, page))
        .with_header(header("Content-Type", "application/json"))
}

/// The body of one page of `/api/state` (see [`state_page`]), on one line.
pub fn paged_state_body(snap: &HttpSnapshot, page: &StatePage) -> String {
    let s = &*snap.state;
    let total = s.workers.len();
    let mut workers: Vec<&regent_core::protocol::WorkerView> = s.workers.iter().collect();
    workers.sort_by(|a, b| a.id.cmp(&b.id));
    let start = match &page.after {
        Some(a) => workers.partition_point(|w| w.id.as_str() <= a.as_str()),
        None => 0,
    };
    let end = (start + page.limit).min(workers.len());
    let listed = &workers[start..end];
    let next_after =
        (end < total).then(|| listed.last().map(|w| w.id.as_str().to_owned())).flatten();
    let on_page: std::collections::HashSet<&str> = listed.iter().map(|w| w.id.as_str()).collect();
    // Only the page is copied, never the whole cluster.
    let state = ClusterState {
        master: s.master.clone(),
        status: s.status,
        epoch: s.epoch,
        leader: s.leader.clone(),
        workers: listed.iter().map(|w| (*w).clone()).collect(),
        frameworks: s.frameworks.clone(),
        executors: s
            .executors
            .iter()
            .filter(|e| e.worker.as_ref().is_some_and(|w| on_page.contains(w.as_str())))
            .cloned()
            .collect(),
        messages: s.messages,
        rejected: s.rejected,
        history: s.history.clone(),
        history_omitted: s.history_omitted,
    };
    let mut body = state_value(&state, snap.rejected_connections);
    body["page"] = json!({
        "limit": page.limit,
        "after": page.after,
        "next_after": next_after,
        "workers_total": total,
    });
    json_text(&body, false)
}

/// [`snapshot`], the cached one when `cached` (see [`HttpQuery::State`]).
fn snapshot_of(queries: &async_channel::Sender<HttpQuery>, cached: bool) -> Option<HttpSnapshot> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    // The channel is unbounded: this never blocks.
    queries.send_blocking(HttpQuery::State { reply: tx, cached }).ok()?;
    rx.recv_timeout(QUERY_TIMEOUT).ok()
}

/// The answer to a request with a scoped token this face cannot check now.
fn unchecked_response(unchecked: &revocations::Unchecked, api: bool) -> Response {
    use revocations::Unchecked;
    match (unchecked, api) {
        (Unchecked::NotLeading(leader), true) => {
            v1::errors::ApiError::not_leader(leader.as_ref()).response()
        }
        (Unchecked::NotLeading(leader), false) => {
            let leader =
                leader.as_ref().map_or("unknown".to_owned(), |h| format!("{} at {}", h.id, h.addr));
            text(
                503,
                &format!(
                    "this master does not lead, so it does not hold the revocation list a                      scoped token is checked against: ask the leader ({leader}), or use the                      cluster's own token (regent http-token)\n"
                ),
            )
        }
        (Unchecked::Timeout, _) => {
            let why = "cannot check the token against the revocation list: the master did not                        answer in time; retry";
            if api {
                v1::errors::ApiError::new(503, why.to_owned()).response()
            } else {
                text(503, why)
            }
        }
    }
}

/// Asks the daemon for the revocations in force; `None` after
/// [`QUERY_TIMEOUT`] or when the daemon is gone.
fn revocations_of(
    queries: &async_channel::Sender<HttpQuery>,
) -> Option<regent_core::token::Revocations> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    queries.send_blocking(HttpQuery::Revocations { reply: tx }).ok()?;
    rx.recv_timeout(QUERY_TIMEOUT).ok()
}

/// Asks the daemon for its counters and gauges (`GET /metrics`); `None`
/// after [`QUERY_TIMEOUT`] or when the daemon is gone.
fn metrics_of(queries: &async_channel::Sender<HttpQuery>) -> Option<MetricsSnapshot> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    queries.send_blocking(HttpQuery::Metrics { reply: tx }).ok()?;
    rx.recv_timeout(QUERY_TIMEOUT).ok()
}

type Response = tiny_http::Response<std::io::Cursor<Vec<u8>>>;

fn render(page: Page, snap: &HttpSnapshot) -> Response {
    match page {
        Page::State => tiny_http::Response::from_string(state_body(snap, true))
            .with_header(header("Content-Type", "application/json")),
        // Answered without a snapshot (see `respond`).
        Page::Metrics | Page::Html | Page::Events => {
            text(500, "internal error: not a snapshot page\n")
        }
    }
}

/// The body of `GET /api/state`: [`state_json`] plus
/// `rejected_connections`, pretty or on one line, ending with a newline.
pub fn state_body(snap: &HttpSnapshot, pretty: bool) -> String {
    json_text(&state_value(&snap.state, snap.rejected_connections), pretty)
}

/// [`state_json`] plus `rejected_connections`.
fn state_value(state: &ClusterState, rejected_connections: u64) -> Value {
    let mut v = state_json(state);
    v["rejected_connections"] = json!(rejected_connections);
    v
}

/// `v` as text, pretty or on one line, ending with a newline.
fn json_text(v: &Value, pretty: bool) -> String {
    let body = if pretty { serde_json::to_string_pretty(v) } else { serde_json::to_string(v) };
    let mut body = body.unwrap_or_else(|_| "{}".into());
    body.push('\n');
    body
}

fn text(code: u16, body: &str) -> Response {
    tiny_http::Response::from_string(body)
        .with_status_code(code)
        .with_header(header("Content-Type", "text/plain; charset=utf-8"))
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes())
        .expect("static header names and values are valid")
}

/// The executor state's name as the API shows it (one definition, in core).
pub use regent_core::events::executor_state_name;

/// The master's view as JSON (the body of `GET /api/state`, which adds
/// `rejected_connections`; also `regent status --json`):
///
/// ```json
/// {
///   "id": "m1", "status": "ALIVE", "epoch": 7,
///   "leader": "127.0.0.1:5050", "leader_id": "m1", "leader_epoch": 7,
///   "messages": 120, "rejected_messages": 0,
///   "workers": [{"id": "w1", "state": "ALIVE", "cores": 8, "cores_used": 2,
///                "memory_mb": 4096, "memory_used_mb": 512}],
///   "frameworks": [{"id": "fw-1", "name": "etl", "state": "ACTIVE", "connected": true}],
///   "executors": [{"id": "e1", "framework_id": "fw-1", "worker_id": "w1",
///                  "state": "EXITED", "exit_code": 0}]
/// }
/// ```
///
/// * `status`: STANDBY, RECOVERING, ALIVE or SUSPENDED.
/// * `leader`: the leader's *address* (what workers dial), or `null` when
///   this master knows of no leader; `leader_id` and `leader_epoch` give its
///   id and the hint's epoch (both `null` likewise).
/// * worker `state`: ALIVE, UNKNOWN or DEAD, and also REGISTERING for a
///   worker whose registration is still being made durable: shown as the
///   master reports it, not folded into ALIVE.
/// * framework `state`: ACTIVE, FINISHED, FAILED or DISCONNECTED.
/// * executor `state`: one of [`executor_state_name`]'s names; EXITED adds
///   `exit_code`, FAILED adds `reason`. `worker_id` is `null` when unknown.
/// * named ports: a worker's `host`, `ports` (how many it offers) and
///   `ports_used`; an executor's `ports` (`{"http": 20000}`) and
///   `addresses` (`{"http": "10.0.0.7:20000"}`, at its worker's host).
/// * named resources: a worker's `resources` (`{"gpu": {"addresses":
///   ["0","1"], "used": ["1"], "free": ["0"], "held": 1}}`: `used` are the
///   addresses its executors were reported to hold, `held` how many they
///   hold in all, launching ones included); an executor's `resources`
///   (`{"gpu": ["1"]}`).
/// * a worker's `users`: whom it starts executors as (its executor user,
///   then its `--allowed-users` when it runs as root); a group naming a
///   user is placed only on a worker listing it.
/// * usage (from the worker's latest sample, every 10 s at most; `null`
///   before one, or where the host does not report it): a worker's
///   `usage` `{memory_bytes, cpu_seconds, work_dir_free_bytes,
///   work_dir_total_bytes}` (memory and CPU summed over its running
///   executors); a running executor's `memory_bytes`,
///   `memory_peak_bytes`, `cpu_seconds`.
/// * health (docs/jobs.md#health-checks-groupcheck): a running executor
///   of a group with checks has `health` `{status, for_ms, detail}`
///   (`status` `pending`, `passing` or `failing`; `for_ms` how long it
///   had held at its worker's last report), `null` otherwise; a group's
///   `deployment` is its current or last deployment as
///   `/v1/jobs/{id}/deployment` shows it (`null`: never deployed).
pub fn state_json(s: &ClusterState) -> Value {
    let workers: Vec<Value> = s
        .workers
        .iter()
        .map(|w| {
            let state = w.shown_state();
            json!({
                "id": w.id.as_str(),
                "state": state,
                "cordoned": w.cordoned,
                "drain_deadline_ms": w.drain_deadline_ms,
                "executors": w.executors,
                "cores": w.cores,
                "cores_used": w.cores_used,
                "memory_mb": w.memory_mb,
                "memory_used_mb": w.memory_used_mb,
                "attributes": w
                    .attributes
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect::<serde_json::Map<String, Value>>(),
                "host": w.host,
                "ports": w.ports,
                "ports_used": w.ports_used,
                "users": w.users,
                "resources": w.resources.iter().map(|r| (r.name.clone(), json!({
                    "addresses": r.addresses,
                    "used": r.used,
                    "free": r.addresses.iter().filter(|a| !r.used.contains(a)).collect::<Vec<_>>(),
                    "held": r.held,
                }))).collect::<serde_json::Map<String, Value>>(),
                "usage": w.usage.as_ref().map(|u| json!({
                    "memory_bytes": u.memory_bytes,
                    "cpu_seconds": u.cpu_usec as f64 / 1e6,
                    "work_dir_free_bytes": u.work_dir_free_bytes,
                    "work_dir_total_bytes": u.work_dir_total_bytes,
                })),
            })
        })
        .collect();
    let frameworks: Vec<Value> = s
        .frameworks
        .iter()
        .map(|f| {
            json!({
                "id": f.id.as_str(),
                "name": f.name,
                "state": f.state,
                "connected": f.connected,
                "groups": f.groups.iter().map(|g| json!({
                    "name": g.name,
                    "slots": g.slots,
                    "declared_slots": g.declared,
                    "running": g.running,
                    "waiting_to_restart": g.waiting,
                    "last_failure": g.last_end,
                    "unplaced": g.unplaced,
                    "reasons": g.reasons,
                    "reason_words": g.reasons.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "deployment": g.deployment,
                })).collect::<Vec<Value>>(),
            })
        })
        .collect();
    let hosts: std::collections::HashMap<&str, &str> =
        s.workers.iter().filter_map(|w| w.host.as_deref().map(|h| (w.id.as_str(), h))).collect();
    let executors: Vec<Value> = s
        .executors
        .iter()
        .map(|e| {
            let host = e.worker.as_ref().and_then(|w| hosts.get(w.as_str()).copied());
            let mut v = json!({
                "id": e.id.as_str(),
                "framework_id": e.framework.as_str(),
                "worker_id": e.worker.as_ref().map(|w| w.as_str()),
                "state": executor_state_name(&e.state),
                "ports": e.ports.iter().map(|(n, p)| (n.clone(), json!(p)))
                    .collect::<serde_json::Map<String, Value>>(),
                "addresses": e.ports.iter().map(|(n, p)| {
                    let at = match host {
                        Some(h) if h.contains(':') => format!("[{h}]:{p}"),
                        Some(h) => format!("{h}:{p}"),
                        None => p.to_string(),
                    };
                    (n.clone(), json!(at))
                }).collect::<serde_json::Map<String, Value>>(),
                "resources": e.resources.iter().map(|(n, a)| (n.clone(), json!(a)))
                    .collect::<serde_json::Map<String, Value>>(),
                "memory_bytes": e.usage.and_then(|u| u.memory_bytes),
                "memory_peak_bytes": e.usage.and_then(|u| u.memory_peak_bytes),
                "cpu_seconds": e.usage.and_then(|u| u.cpu_usec).map(|us| us as f64 / 1e6),
                "health": e.health.as_ref().map(|h| json!({
                    "status": h.status,
                    "for_ms": h.for_ms,
                    "detail": h.detail,
                })),
            });
            match &e.state {
                ExecutorState::Exited { code } => v["exit_code"] = json!(code),
                ExecutorState::Failed { reason } => v["reason"] = json!(reason),
                _ => {}
            }
            v
        })
        .collect();
    // Finished frameworks, newest first (see `regent_core::history`).
    let history: Vec<Value> = s
        .history
        .iter()
        .map(|f| {
            let slots: Vec<Value> = f
                .slots
                .iter()
                .map(|sl| {
                    let mut v = json!({
                        "group": sl.group,
                        "slot": sl.slot,
                        "executor": sl.executor.as_ref().map(|e| e.as_str()),
                        "state": sl.state_name(),
                        "exit_code": sl.exit_code(),
                        "attempts": sl.attempts,
                    });
                    if let Some(ExecutorState::Failed { reason }) = &sl.state {
                        v["reason"] = json!(reason);
                    }
                    // Its last end was a preemption (docs/design.md#issue-44).
                    if let Some(by) = &sl.preempted_by {
                        v["preempted_by"] = json!(by);
                    }
                    v
                })
                .collect();
            json!({
                "id": f.id.as_str(),
                "name": f.name,
                "outcome": f.outcome.as_str(),
                "finished_at_ms": f.finished_at_ms,
                "registered_at_ms": f.registered_at_ms,
                "slots": slots,
                "slots_omitted": f.slots_omitted,
            })
        })
        .collect();
    json!({
        "id": s.master.as_str(),
        "status": s.status,
        "epoch": s.epoch.0,
        "leader": s.leader.as_ref().map(|h| h.addr.as_str()),
        "leader_id": s.leader.as_ref().map(|h| h.id.as_str()),
        "leader_epoch": s.leader.as_ref().map(|h| h.epoch.0),
        "messages": s.messages,
        "rejected_messages": s.rejected,
        "workers": workers,
        "frameworks": frameworks,
        "executors": executors,
        "history": history,
        "history_omitted": s.history_omitted,
    })
}

/// The Prometheus text exposition of `GET /metrics` (format 0.0.4): every
/// family has `# HELP` and `# TYPE`; labelled families list every known
/// label value (zero when none), so a state that empties still shows.
///
/// Families: `regent_master_status{status}` (1 for the current status),
/// `regent_epoch`, `regent_workers{state}`, `regent_cores_offered`,
/// `regent_cores_used`, `regent_memory_offered_bytes`,
/// `regent_memory_used_bytes`, `regent_frameworks`,
/// `regent_frameworks_connected`, `regent_executors{state}`,
/// `regent_messages_total`, `regent_rejected_messages_total`,
/// `regent_rejected_connections_total`.
///
/// Every figure comes from the master's counters ([`MetricsSnapshot`],
/// `Master::gauges`), never from a snapshot of the cluster: a scrape costs
/// the master's loop one pass over its worker entries.
pub fn metrics_text(s: &MetricsSnapshot) -> String {
    let g = &s.gauges;
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(Option<String>, u64)>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            match labels {
                Some(l) => {
                    let _ = writeln!(out, "{name}{{{l}}} {value}");
                }
                None => {
                    let _ = writeln!(out, "{name} {value}");
                }
            }
        }
    };
    let labelled = |label: &str, names: &[&str], counts: &[u64]| -> Vec<(Option<String>, u64)> {
        names
            .iter()
            .zip(counts)
            .map(|(n, count)| (Some(format!("{label}=\"{}\"", label_escape(n))), *count))
            .collect()
    };
    family(
        "regent_master_status",
        "gauge",
        "Status of this master: 1 for its current status, 0 for the others.",
        labelled(
            "status",
            &MasterStatus::ALL.map(MasterStatus::name),
            &MasterStatus::ALL.map(|st| u64::from(st == g.status)),
        ),
    );
    family(
        "regent_epoch",
        "gauge",
        "This master's epoch (its own when leading, else the highest it knows of).",
        vec![(None, g.epoch.0)],
    );
    let n = &s.node;
    family(
        "regent_leader_changes_total",
        "counter",
        "How often the leader this master sees changed (itself included).",
        vec![(None, n.leader_changes)],
    );
    family(
        "regent_elections_total",
        "counter",
        "How often this master was elected.",
        vec![(None, n.elections)],
    );
    family(
        "regent_step_downs_total",
        "counter",
        "How often this master gave leadership up on purpose (a store it could not write, an operator's step-down) and rejoined the election.",
        vec![(None, n.step_downs)],
    );
    family(
        "regent_revocations_total",
        "counter",
        "How often this master lost leadership (lease, session or election node gone).",
        vec![(None, n.revocations)],
    );
    family(
        "regent_store_resends_total",
        "counter",
        "Store writes sent again after a ZooKeeper connection loss.",
        vec![(None, n.store_resends)],
    );
    family(
        "regent_store_coalesced_total",
        "counter",
        "Store writes that joined a queued write of the same record (a slow store).",
        vec![(None, n.store_coalesced)],
    );
    family(
        "regent_store_reseals_total",
        "counter",
        "Records this master wrote again under the current record key after finding them sealed under a previous one (ZooKeeper store).",
        vec![(None, n.store_reseals)],
    );
    family(
        "regent_store_records_loaded",
        "gauge",
        "Records the last load of this master's ZooKeeper store reported.",
        vec![(None, n.store_records_loaded)],
    );
    family(
        "regent_store_records_moved_total",
        "counter",
        "Records of the flat layout of earlier versions this master moved into their shards (ZooKeeper store).",
        vec![(None, n.store_records_moved)],
    );
    family(
        "regent_takeovers_total",
        "counter",
        "Election nodes of a dead leader this master deleted (fast takeover: the leader's connection ended and its port refused connections).",
        vec![(None, n.takeovers)],
    );
    family(
        "regent_commands_held_total",
        "counter",
        "Commands (launch, kill, shutdown) that waited for this leader's acting lease to be confirmed.",
        vec![(None, n.commands_held)],
    );
    family(
        "regent_commands_dropped_total",
        "counter",
        "Commands that never went out: the leadership ended while they waited for the acting lease.",
        vec![(None, n.commands_dropped)],
    );
    family(
        "regent_commands_waiting",
        "gauge",
        "Commands waiting now for this leader's acting lease (a new leader's wait, a confirmation not back yet).",
        vec![(None, n.commands_waiting)],
    );
    let m = &s.master;
    family(
        "regent_state_snapshots_built_total",
        "counter",
        "Views of the cluster built afresh (StateRequest, the event stream's poller).",
        vec![(None, m.state_snapshots_built)],
    );
    family(
        "regent_state_snapshots_cached_total",
        "counter",
        "Views of the cluster answered from the cached snapshot (nothing but heartbeats since it was built).",
        vec![(None, m.state_replies_cached)],
    );
    family(
        "regent_log_relays_total",
        "counter",
        "Reads of executor output relayed to a worker (regent logs, GET /api/logs).",
        vec![(None, m.log_relays)],
    );
    family(
        "regent_log_requests_refused_total",
        "counter",
        "Reads of executor output refused (unknown executor, worker not connected, a limit, a read failure, a timeout).",
        vec![(None, m.log_requests_refused)],
    );
    family(
        "regent_log_relays_timed_out_total",
        "counter",
        "Relayed reads a worker did not answer within LOG_RELAY_TIMEOUT.",
        vec![(None, m.log_relays_timed_out)],
    );
    family(
        "regent_log_answers_refused_total",
        "counter",
        "Answers of workers to reads never asked of them, or not fitting what was asked (also counted as rejected messages).",
        vec![(None, m.log_answers_refused)],
    );
    family(
        "regent_executor_out_of_memory_kills_total",
        "counter",
        "Executors their worker reported killed by the kernel at their cgroup's memory limit (FAILED, out of memory), while this master led.",
        vec![(None, m.out_of_memory_kills)],
    );
    family(
        "regent_workers",
        "gauge",
        "Workers in this master's registry, by state.",
        labelled("state", &WorkerState::ALL.map(WorkerState::name), &g.workers),
    );
    family(
        "regent_workers_cordoned",
        "gauge",
        "Workers on which nothing new is placed (cordoned, draining or drained), by maintenance: CORDONED, DRAINING or DRAINED.",
        labelled("maintenance", &MaintenanceState::ALL.map(MaintenanceState::name), &g.maintenance),
    );
    family(
        "regent_cores_offered",
        "gauge",
        "Cores offered by the workers in the registry.",
        vec![(None, g.cores_offered)],
    );
    family(
        "regent_cores_used",
        "gauge",
        "Cores held by executors on the workers in the registry.",
        vec![(None, g.cores_used)],
    );
    family(
        "regent_memory_offered_bytes",
        "gauge",
        "Memory offered by the workers in the registry, in bytes.",
        vec![(None, g.memory_offered_mb.saturating_mul(1 << 20))],
    );
    family(
        "regent_memory_used_bytes",
        "gauge",
        "Memory held by executors on the workers in the registry, in bytes.",
        vec![(None, g.memory_used_mb.saturating_mul(1 << 20))],
    );
    family(
        "regent_executor_memory_in_use_bytes",
        "gauge",
        "Memory the running executors use, from their cgroups (the workers' latest samples, every 10 s at most), in bytes.",
        vec![(None, g.executor_memory_bytes)],
    );
    family(
        "regent_executor_cpu_seconds",
        "gauge",
        "CPU time the running executors used so far, from their cgroups (the workers' latest samples), in seconds.",
        vec![(None, g.executor_cpu_usec / 1_000_000)],
    );
    family(
        "regent_work_dir_free_bytes_min",
        "gauge",
        "The least free space of any worker's work directory (the workers' latest samples), in bytes; 0 before any sample.",
        vec![(None, g.work_dir_free_bytes_min.unwrap_or(0))],
    );
    family(
        "regent_frameworks",
        "gauge",
        "Frameworks this master knows of.",
        vec![(None, g.frameworks)],
    );
    family(
        "regent_frameworks_connected",
        "gauge",
        "Frameworks with a live subscription.",
        vec![(None, g.frameworks_connected)],
    );
    family(
        "regent_executors",
        "gauge",
        "Executors this master knows of, by state.",
        labelled("state", &ExecutorState::NAMES, &g.executors),
    );
    family(
        "regent_messages_total",
        "counter",
        "Protocol messages handled since this master started.",
        vec![(None, g.messages)],
    );
    family(
        "regent_rejected_messages_total",
        "counter",
        "Protocol messages refused since this master started.",
        vec![(None, g.rejected)],
    );
    family(
        "regent_rejected_connections_total",
        "counter",
        "Connections refused or closed for a bad handshake, cluster, frame or limit.",
        vec![(None, s.rejected_connections)],
    );
    // Durations in Prometheus' base unit, seconds (`promtool check metrics`).
    let n = &s.node;
    seconds_gauge(
        &mut out,
        "regent_commands_oldest_wait_seconds",
        "How long the oldest command waiting for the acting lease has waited (0: none waits). The leader logs why once it passes 5 s.",
        n.oldest_command_wait_ms,
    );
    seconds_gauge(
        &mut out,
        "regent_acting_lease_seconds",
        "The acting lease L this master chose from its measured ZooKeeper round trip and wrote in its election node (0 without ZooKeeper).",
        n.acting_lease_ms,
    );
    out
}

/// One gauge of a duration kept in milliseconds, shown in seconds (three
/// decimals, so nothing is lost).
fn seconds_gauge(out: &mut String, name: &str, help: &str, ms: u64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
    let _ = writeln!(out, "{name} {}.{:03}", ms / 1000, ms % 1000);
}

/// Escapes a Prometheus label value (`\`, `"`, newline).
fn label_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

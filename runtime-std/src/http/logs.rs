//! `GET /api/logs/<executor>?stream=stdout|stderr[&offset=N|&tail=N]`: a
//! chunk of an executor's output as `text/plain`, read-only.
//!
//! The HTTP thread does not read anything itself: it hands a [`LogQuery`]
//! to the daemon loop (inside an [`HttpQuery`], like the snapshot queries),
//! and the daemon hands it to its master node as a query
//! ([`super::queries`]); the leader relays it to the executor's worker over
//! the authenticated protocol exactly as a `regent logs` request, and every
//! limit of the relay applies. The node's answer comes back on
//! [`LogQuery::reply`] and becomes the response:
//!
//! * `LogChunk` → `200`, the bytes as they are, with `X-Regent-Offset`,
//!   `X-Regent-Size` (the file's size), `X-Regent-Next-Offset` and
//!   `X-Regent-Finished` (`true` once the executor ended and the file
//!   grows no more);
//! * a refusal → `404` for an unknown executor or a missing file, `503`
//!   for what may pass (the worker not connected or silent, a limit), the
//!   leader's reason as the body;
//! * a standby → `503` naming the leader (its HTTP server answers).
//!
//! `<executor>` is percent-decoded (ids hold `/` and `#`: a page links to
//! `/api/logs/` + `encodeURIComponent(id)`). `offset` defaults to 0;
//! `tail=N` asks for the last `N` bytes instead. At most
//! [`MAX_LOG_CHUNK`] bytes come back; read on from `X-Regent-Next-Offset`.

use super::HttpQuery;
use regent_core::limits::{LOG_RELAY_TIMEOUT, MAX_LOG_CHUNK};
use regent_core::protocol::{LogStream, Message};
use regent_core::ExecutorId;
use std::time::Duration;

/// The path prefix of the route.
pub const PREFIX: &str = "/api/logs/";

/// A log read the HTTP thread asks the daemon loop for.
#[derive(Debug)]
pub struct LogQuery {
    /// The executor.
    pub executor: ExecutorId,
    /// Which file.
    pub stream: LogStream,
    /// Where to start; `None`: the last `max` bytes.
    pub offset: Option<u64>,
    /// The most bytes wanted (at most [`MAX_LOG_CHUNK`]).
    pub max: u32,
    /// Where the daemon sends the node's answer (`LogChunk`,
    /// `RequestRefused`, `NotLeader` or `LeaderSuspended`; `try_send`:
    /// room for one).
    pub reply: std::sync::mpsc::SyncSender<Message>,
}

/// How long the HTTP thread waits for the daemon's answer: the relay's own
/// timeout answers before it, so this only covers a daemon that is gone.
const ANSWER_TIMEOUT: Duration = Duration::from_millis(LOG_RELAY_TIMEOUT.0 + 5_000);

type Response = tiny_http::Response<std::io::Cursor<Vec<u8>>>;

fn text(code: u16, body: impl Into<String>) -> Response {
    let mut body = body.into();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    tiny_http::Response::from_string(body)
        .with_status_code(code)
        .with_header(header("Content-Type", "text/plain; charset=utf-8"))
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes())
        .expect("header names and values here are ASCII")
}

/// Why a request may not read an executor's output (a `403`, or a `503`
/// when the master did not answer).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LogsDenied {
    /// The master did not answer in time (its view tells whose executor
    /// it is).
    #[error("the master did not answer in time; retry")]
    NoAnswer,
    /// Not an executor of a framework in the token's scope.
    #[error(
        "token {token:?} may not read the output of executor {executor}: it is not an \
         executor of a framework in its scope"
    )]
    OutOfScope {
        /// The token's name.
        token: String,
        /// The executor.
        executor: ExecutorId,
    },
}

/// `Ok` when `principal` may read the output the URL `url` names: an
/// executor of one of its frameworks, or any for a principal without a
/// scope ([`regent_core::visibility::sees_logs_of`], asked of the
/// master's cached view); else why not.
pub fn allowed(
    url: &str,
    queries: &async_channel::Sender<HttpQuery>,
    principal: &regent_core::token::Principal,
) -> Result<(), LogsDenied> {
    use regent_core::token::Principal;
    if matches!(principal, Principal::Token(c) if c.tenant.is_some() || c.frameworks.is_some()) {
        let path = url.split_once('?').map_or(url, |(p, _)| p);
        let raw = path.strip_prefix(PREFIX).unwrap_or("");
        let executor = ExecutorId::new(crate::exec::names::unescape(raw).unwrap_or_default());
        let snap = super::snapshot(queries).ok_or(LogsDenied::NoAnswer)?;
        if !regent_core::visibility::sees_logs_of(principal, &snap.state, &executor) {
            return Err(LogsDenied::OutOfScope { token: principal.name().to_owned(), executor });
        }
    }
    Ok(())
}

/// Answers `GET /api/logs/...` (`url` is the request's whole URL, path and
/// query), asking the daemon through `queries`.
pub fn respond(url: &str, queries: &async_channel::Sender<HttpQuery>) -> Response {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let Some(raw) = path.strip_prefix(PREFIX) else {
        return text(404, "not found");
    };
    // Ids hold `/` and `#`: a page links to the percent-encoded id.
    let executor = match crate::exec::names::unescape(raw) {
        Some(id) if !id.is_empty() => ExecutorId::new(id),
        _ => return text(400, "bad request: the executor id in the path is not valid UTF-8"),
    };
    let mut stream = LogStream::Stdout;
    let mut offset = Some(0);
    let mut max = MAX_LOG_CHUNK;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match (key, value) {
            ("stream", "stdout") => stream = LogStream::Stdout,
            ("stream", "stderr") => stream = LogStream::Stderr,
            ("stream", other) => {
                return text(400, format!("bad request: stream={other}; use stdout or stderr"))
            }
            ("offset", n) => match n.parse::<u64>() {
                Ok(n) => offset = Some(n),
                Err(_) => return text(400, format!("bad request: offset={n} is not a number")),
            },
            ("tail", n) => match n.parse::<u32>() {
                Ok(n) if n <= MAX_LOG_CHUNK => {
                    offset = None;
                    max = n;
                }
                _ => {
                    return text(
                        400,
                        format!("bad request: tail={n}; at most {MAX_LOG_CHUNK} bytes"),
                    )
                }
            },
            _ => {}
        }
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let log = LogQuery { executor: executor.clone(), stream, offset, max, reply: tx };
    // The query channel is unbounded: this never blocks.
    let answer = match queries.send_blocking(HttpQuery::Log(log)) {
        Ok(()) => rx.recv_timeout(ANSWER_TIMEOUT).ok(),
        Err(_) => None,
    };
    match answer {
        Some(Message::LogChunk { offset, data, size, finished, .. }) => {
            let next = offset + data.len() as u64;
            tiny_http::Response::from_data(data)
                .with_header(header("Content-Type", "text/plain; charset=utf-8"))
                .with_header(header("X-Regent-Offset", &offset.to_string()))
                .with_header(header("X-Regent-Size", &size.to_string()))
                .with_header(header("X-Regent-Next-Offset", &next.to_string()))
                .with_header(header("X-Regent-Finished", if finished { "true" } else { "false" }))
        }
        Some(Message::RequestRefused { reason, .. }) => {
            let missing = reason.starts_with("no executor ")
                || reason.contains(&format!("no {} file for executor", stream.file_name()));
            text(if missing { 404 } else { 503 }, reason)
        }
        Some(Message::NotLeader { leader, .. }) => text(
            503,
            match leader {
                Some(h) => format!(
                    "this master is not the leader; the leader is {} at {} (ask its HTTP server)",
                    h.id, h.addr
                ),
                None => "this master is not the leader, and knows of none yet; retry".into(),
            },
        ),
        Some(Message::LeaderSuspended { .. }) => {
            text(503, "the leader's coordination session is in doubt; retry shortly")
        }
        Some(other) => text(502, format!("unexpected answer {}", other.kind())),
        None => text(503, "the master did not answer in time; retry"),
    }
}

#[cfg(test)]
mod tests {
    use crate::exec::names::unescape as percent_decode;

    #[test]
    fn ids_with_slashes_and_hashes_decode() {
        assert_eq!(percent_decode("fw-1%2Fetl%230%2342.1").as_deref(), Some("fw-1/etl#0#42.1"));
        assert_eq!(percent_decode("fw/g%230").as_deref(), Some("fw/g#0"));
        assert_eq!(percent_decode("%2E%2E%2F%2E%2E%2Fetc").as_deref(), Some("../../etc"));
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%ff"), None);
    }
}

//! `GET /v1/events?after=EPOCH.SEQ`: the cluster's events as
//! newline-delimited JSON (server-sent events when the client `Accept`s
//! `text/event-stream`), resumable without losing any silently.
//!
//! Built on the server's hub ([`crate::http::events`]): every event gets
//! the index `EPOCH.SEQ`, the leader's epoch from the snapshot that showed
//! it and the hub's sequence number (which only grows). Each line is one
//! of:
//!
//! ```text
//! {"index":"7.41"}                                    // a stream without `after` starts here
//! {"index":"7.42","event":{"kind":"worker",...}}      // an event (a ClusterEvent)
//! {"gap":true,"resync":"/v1/jobs","index":"7.42"}     // events were missed: re-read, go on from here
//! {"heartbeat":true,"index":"7.42"}                   // nothing happened for a while
//! ```
//!
//! * `after` within the hub's backlog (same epoch, a sequence number the
//!   backlog continues exactly from): the stream continues with the next
//!   event.
//! * Any other `after` (another epoch: another leader or leadership; a
//!   number the backlog no longer holds; one from before the hub paused
//!   with no stream open; a future one): the first line is a gap, then
//!   events from now. A stream that falls [`crate::http::events::BACKLOG`]
//!   events behind gets a gap line too.
//! * Heartbeats every [`HEARTBEAT`] (or `?heartbeat=DURATION`, from
//!   [`MIN_HEARTBEAT`] to [`HEARTBEAT`]) keep proxies from closing an idle
//!   stream and find clients that went away.
//! * A standby refuses the stream: `503` naming the leader.

use super::errors::{ApiError, ErrorBody, Unavailable};
use super::{header_value, query_param};
use crate::http::events::{Hub, Next};
use crate::http::QUERY_TIMEOUT;
use regent_core::events::ClusterEvent;
use regent_core::states::MasterStatus;
use regent_core::token::Principal;
use regent_core::visibility::{sees_event, FrameworkTenants};
use serde::Serialize;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;
use utoipa::ToSchema;

/// How long an idle stream waits before a heartbeat line.
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// The shortest heartbeat a client may ask for.
pub const MIN_HEARTBEAT: Duration = Duration::from_millis(100);

/// One line of the stream: an event, where a stream starts, a gap, or a
/// heartbeat (see the module docs). Only the keys of its kind are written.
#[derive(Clone, Debug, Default, Serialize, ToSchema)]
pub struct EventLine {
    /// `EPOCH.SEQ`: the event's index; for the other lines, the index the
    /// stream is at (resume with `?after=` it).
    pub index: String,
    /// The event (a `ClusterEvent`, as `/api/events` shows it).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub event: Option<ClusterEvent>,
    /// `true`: events were missed; re-read `resync`, then go on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<bool>,
    /// What to re-read after a gap (`/v1/jobs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resync: Option<String>,
    /// `true`: nothing happened for a while.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<bool>,
}

impl EventLine {
    fn at(epoch: u64, seq: u64) -> EventLine {
        EventLine { index: index(epoch, seq), ..EventLine::default() }
    }

    fn gap(epoch: u64, seq: u64) -> EventLine {
        EventLine { gap: Some(true), resync: Some("/v1/jobs".into()), ..EventLine::at(epoch, seq) }
    }
}

/// `EPOCH.SEQ` as the API writes it.
pub fn index(epoch: u64, seq: u64) -> String {
    format!("{epoch}.{seq}")
}

/// The `(epoch, seq)` of an `after` parameter, `None` when malformed.
pub fn parse_index(s: &str) -> Option<(u64, u64)> {
    let (e, q) = s.split_once('.')?;
    Some((e.parse().ok()?, q.parse().ok()?))
}

/// What the request asks of its stream.
struct Ask {
    after: Option<(u64, u64)>,
    heartbeat: Duration,
    sse: bool,
}

fn ask(request: &tiny_http::Request, url: &str) -> Result<Ask, ApiError> {
    let after = match query_param(url, "after") {
        None => None,
        Some(a) => Some(parse_index(&a).ok_or_else(|| {
            ApiError::field(Some("after".into()), format!("{a:?} is no index (EPOCH.SEQ)"))
        })?),
    };
    let heartbeat = match query_param(url, "heartbeat") {
        None => HEARTBEAT,
        Some(h) => crate::job_file::duration_ms(&h)
            .map(Duration::from_millis)
            .ok()
            .filter(|d| (MIN_HEARTBEAT..=HEARTBEAT).contains(d))
            .ok_or_else(|| {
                ApiError::field(
                    Some("heartbeat".into()),
                    format!("{h:?}: write a duration from 100ms to 15s"),
                )
            })?,
    };
    let sse = header_value(request, "Accept").is_some_and(|a| a.contains("text/event-stream"));
    Ok(Ask { after, heartbeat, sse })
}

/// Answers `GET /v1/events`: `400` for a malformed parameter, `503` past
/// the hub's stream limit, else a stream on a thread of its own.
#[utoipa::path(get, path = "/v1/events", tag = "events",
    params(
        ("after" = Option<String>, Query, description = "Resume after this index (`EPOCH.SEQ`); a gap line first when that cannot be done exactly."),
        ("heartbeat" = Option<String>, Query, description = "How long an idle stream waits before a heartbeat line (100ms to 15s; default 15s)."),
    ),
    responses(
        (status = 200, description = "Newline-delimited JSON, one EventLine a line (server-sent events, `data:` the same JSON, with `Accept: text/event-stream`).", body = EventLine, content_type = "application/x-ndjson"),
        (status = 400, description = "A malformed parameter.", body = ErrorBody),
        (status = 503, description = "A standby (naming the leader), or too many streams.", body = Unavailable),
    ))]
pub(in crate::http) fn serve(
    request: tiny_http::Request,
    url: &str,
    hub: &Arc<Hub>,
    principal: Principal,
) {
    let ask = match ask(&request, url) {
        Ok(a) => a,
        Err(e) => {
            let _ = request.respond(e.response());
            return;
        }
    };
    if !hub.enter() {
        let e = ApiError::new(503, "too many event streams at once; retry later");
        let _ = request.respond(e.response());
        return;
    }
    let hub2 = hub.clone();
    let spawned =
        std::thread::Builder::new().name("regent-http-v1-events".into()).spawn(move || {
            stream(request, &ask, &hub2, &principal);
            hub2.leave();
        });
    if spawned.is_err() {
        hub.leave();
        tracing::warn!("cannot start a thread for an event stream");
    }
}

/// One line: NDJSON, or an SSE event whose `id` is its index.
fn line(v: &EventLine, sse: bool) -> String {
    let json = serde_json::to_string(v).unwrap_or_default();
    if sse {
        format!("id: {}\ndata: {json}\n\n", v.index)
    } else {
        format!("{json}\n")
    }
}

/// Streams the events `principal` may see
/// ([`regent_core::visibility::sees_event`]; docs/design.md#issue-44).
fn stream(request: tiny_http::Request, ask: &Ask, hub: &Hub, principal: &Principal) {
    let Some((snap, now)) = hub.current(QUERY_TIMEOUT) else {
        let _ = request.respond(ApiError::timeout().response());
        return;
    };
    if snap.state.status == MasterStatus::Standby {
        let _ = request.respond(ApiError::not_leader(snap.state.leader.as_ref()).response());
        return;
    }
    let mut epoch = snap.state.epoch.0;
    // The view the events' frameworks are looked up in (their tenants).
    let mut view = FrameworkTenants::of(&snap.state);
    drop(snap);
    let content_type = if ask.sse { "text/event-stream" } else { "application/x-ndjson" };
    if *request.method() == tiny_http::Method::Head {
        let head = tiny_http::Response::empty(200)
            .with_header(crate::http::header("Content-Type", content_type))
            .with_header(crate::http::header("Cache-Control", "no-cache"));
        let _ = request.respond(head);
        return;
    }
    let mut out = request.into_writer();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nCache-Control: no-cache\r\n\
         Connection: close\r\nX-Accel-Buffering: no\r\n\r\n"
    );
    let (mut cursor, first) = match ask.after {
        None => (now, Some(EventLine::at(epoch, now))),
        Some((e, s)) if s <= now && hub.epoch_at(s) == Some(e) => {
            epoch = e;
            (s, None)
        }
        Some(_) => (now, Some(EventLine::gap(epoch, now))),
    };
    let mut text = head;
    if let Some(first) = first {
        text.push_str(&line(&first, ask.sse));
    }
    if out.write_all(text.as_bytes()).and_then(|_| out.flush()).is_err() {
        return;
    }
    loop {
        let mut buf = String::new();
        match hub.next(cursor, ask.heartbeat) {
            None => return,
            Some(Next::Snapshot(snap, id)) => {
                epoch = snap.state.epoch.0;
                view = FrameworkTenants::of(&snap.state);
                cursor = id;
                buf.push_str(&line(&EventLine::gap(epoch, id), ask.sse));
            }
            Some(Next::Events(events)) if events.is_empty() => {
                let v = EventLine { heartbeat: Some(true), ..EventLine::at(epoch, cursor) };
                buf.push_str(&line(&v, ask.sse));
            }
            Some(Next::Events(events)) => {
                for (id, e, event) in &events {
                    (cursor, epoch) = (*id, *e);
                    if !sees_event(principal, &view, event) {
                        continue;
                    }
                    let v =
                        EventLine { event: Some(event.clone()), ..EventLine::at(epoch, cursor) };
                    buf.push_str(&line(&v, ask.sse));
                }
            }
        }
        if out.write_all(buf.as_bytes()).and_then(|_| out.flush()).is_err() {
            tracing::debug!("/v1/events stream closed by the client");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_read_back() {
        assert_eq!(parse_index(&index(7, 42)), Some((7, 42)));
        for bad in ["7", "7.", ".3", "a.b", "7.3.1", "-1.2"] {
            assert_eq!(parse_index(bad), None, "{bad}");
        }
    }
}

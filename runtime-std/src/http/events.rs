//! `GET /api/events`: the cluster as a stream of server-sent events.
//!
//! A stream starts with one `snapshot` event whose data is the JSON of
//! `GET /api/state` (on one line), then one event per change, named by its
//! kind (`leader`, `status`, `worker`, `framework`, `executor`, `finished`) with the
//! JSON of a [`ClusterEvent`] plus its `id` as data:
//!
//! ```text
//! id: 41
//! event: snapshot
//! data: {"id":"m1","status":"ALIVE","epoch":7,...}
//!
//! id: 42
//! event: worker
//! data: {"id":42,"kind":"worker","change":"state","worker":"w2","state":"DEAD","previous":"ALIVE",...}
//! ```
//!
//! How: one poller thread per server (not one per stream), running only
//! while at least one stream is open, asks the daemon for a snapshot every
//! [`POLL_INTERVAL`] and diffs it with the previous one
//! ([`regent_core::events::diff`]); the events get ids from one counter that
//! only grows (for the life of the process) and are kept in a backlog of
//! [`BACKLOG`] events that every stream reads from. Whatever the number of
//! streams, the master builds at most one snapshot per interval for them.
//!
//! * Coalescing: changes between two polls are seen as one (see
//!   [`regent_core::events`]): an executor that started and exited within
//!   200 ms is one event from LAUNCHING to EXITED.
//! * A stream that falls more than [`BACKLOG`] events behind gets a fresh
//!   `snapshot` event and goes on from there.
//! * `Last-Event-ID` is not used to replay: a reconnecting client gets a
//!   fresh snapshot (whose `id` says which events it includes).
//! * At most [`MAX_STREAMS`] streams at once, one thread each; one more is
//!   answered `503`. A comment line every [`KEEPALIVE`] keeps proxies from
//!   closing an idle stream and finds clients that went away: a stream's
//!   thread ends when a write fails (a client that went away is found at
//!   the next event or comment), or when the master's daemon is gone (its
//!   connection then closes with the process, or when the client closes
//!   it: tiny_http keeps a connection open for the client's next request).
//!   A client that stays connected without reading holds its place (and,
//!   once the socket's send buffer is full, its thread, blocked in a write:
//!   tiny_http gives no write timeout) until it reads or disconnects; the
//!   limit keeps such clients to [`MAX_STREAMS`] threads, and the other
//!   endpoints are not affected.

use super::{header, snapshot_of, state_body, text, HttpQuery, HttpSnapshot, QUERY_TIMEOUT};
use regent_core::events::{diff, ClusterEvent};
use regent_core::token::Principal;
use regent_core::visibility::{sees_event, FrameworkTenants};
use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often the poller asks the daemon for a snapshot while streams are
/// open.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// The most event streams at once; one more gets `503`.
pub const MAX_STREAMS: usize = 64;

/// Events kept for streams that are behind; one further behind gets a
/// fresh snapshot.
pub const BACKLOG: usize = 4_096;

/// A comment line is written when a stream had nothing to write this long.
pub const KEEPALIVE: Duration = Duration::from_secs(10);

/// What a browser's `EventSource` waits before reconnecting (`retry:`).
const RETRY_MS: u64 = 2_000;

/// The streams of one server and their shared poller.
#[derive(Debug)]
pub struct Hub {
    inner: Mutex<Inner>,
    changed: Condvar,
    queries: async_channel::Sender<HttpQuery>,
}

#[derive(Debug, Default)]
struct Inner {
    streams: usize,
    poller: bool,
    /// The last snapshot polled; it includes every event up to `next_id - 1`.
    last: Option<Arc<HttpSnapshot>>,
    next_id: u64,
    /// The events kept: `(id, epoch, event)`, the epoch being the one of
    /// the snapshot that showed the event.
    backlog: VecDeque<(u64, u64, ClusterEvent)>,
    /// The id and epoch just before the backlog's oldest event (the base
    /// the backlog continues exactly from), once known.
    floor: Option<(u64, u64)>,
    /// The daemon is gone: streams end.
    gone: bool,
}

impl Hub {
    /// A hub asking the daemon through `queries`.
    pub fn new(queries: async_channel::Sender<HttpQuery>) -> Arc<Hub> {
        Arc::new(Hub {
            inner: Mutex::new(Inner { next_id: 1, ..Inner::default() }),
            changed: Condvar::new(),
            queries,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Open streams now.
    pub fn streams(&self) -> usize {
        self.lock().streams
    }

    /// Counts a new stream in, starting the poller if it is not running;
    /// `false` when [`MAX_STREAMS`] are open already.
    pub(super) fn enter(self: &Arc<Self>) -> bool {
        let mut st = self.lock();
        if st.streams >= MAX_STREAMS {
            return false;
        }
        st.streams += 1;
        if !st.poller {
            // The last snapshot is from before a pause: not a base to diff
            // from, nor one to show. What happened during the pause was
            // not seen: an id is skipped, so no stream resumes across it
            // as if nothing had (`/v1/events` says there is a gap).
            st.last = None;
            st.next_id += 1;
            st.backlog.clear();
            st.floor = None;
            st.poller = true;
            let hub = self.clone();
            let spawned = std::thread::Builder::new()
                .name("regent-http-poll".into())
                .spawn(move || hub.poll());
            if spawned.is_err() {
                st.poller = false;
                st.streams -= 1;
                return false;
            }
        }
        true
    }

    pub(super) fn leave(&self) {
        let mut st = self.lock();
        st.streams = st.streams.saturating_sub(1);
    }

    /// The poller: a snapshot every [`POLL_INTERVAL`] while streams are
    /// open, diffed into the backlog.
    fn poll(&self) {
        loop {
            // The master's cached snapshot: rebuilt only when something other
            // than heartbeats happened (at 18,000 workers a build is tens of ms).
            let snap = snapshot_of(&self.queries, true);
            {
                let mut st = self.lock();
                if self.queries.is_closed() {
                    st.gone = true;
                }
                if st.gone || st.streams == 0 {
                    st.poller = false;
                    self.changed.notify_all();
                    return;
                }
                if let Some(snap) = snap {
                    let epoch = snap.state.epoch.0;
                    if let Some(last) = st.last.clone() {
                        for event in diff(&last.state, &snap.state) {
                            let id = st.next_id;
                            st.next_id += 1;
                            st.backlog.push_back((id, epoch, event));
                        }
                        while st.backlog.len() > BACKLOG {
                            if let Some((id, epoch, _)) = st.backlog.pop_front() {
                                st.floor = Some((id, epoch));
                            }
                        }
                    } else {
                        st.floor = Some((st.next_id - 1, epoch));
                    }
                    st.last = Some(Arc::new(snap));
                    self.changed.notify_all();
                }
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// The epoch of the event with id `seq`, if the backlog continues
    /// exactly from it: `seq` is the newest id, an event the backlog holds,
    /// or the one just before its oldest. `None`: a stream cannot resume
    /// exactly after `seq`.
    pub(super) fn epoch_at(&self, seq: u64) -> Option<u64> {
        let st = self.lock();
        if seq + 1 == st.next_id {
            if let Some((_, epoch, _)) = st.backlog.back() {
                return Some(*epoch);
            }
            return st.floor.filter(|(id, _)| *id == seq).map(|(_, e)| e);
        }
        if let Some((_, epoch, _)) = st.backlog.iter().find(|(id, _, _)| *id == seq) {
            return Some(*epoch);
        }
        st.floor.filter(|(id, _)| *id == seq).map(|(_, e)| e)
    }

    /// Waits (bounded by `bound`) until there is a snapshot; returns it with
    /// the id of the last event it includes.
    pub(super) fn current(&self, bound: Duration) -> Option<(Arc<HttpSnapshot>, u64)> {
        let deadline = Instant::now() + bound;
        let mut st = self.lock();
        loop {
            if let Some(last) = &st.last {
                return Some((last.clone(), st.next_id - 1));
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            if st.gone {
                return None;
            }
            st = self.changed.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// What a stream at `cursor` writes next: the events after it, or a
    /// snapshot when the backlog no longer reaches back to it; waits up to
    /// `bound` for something. `None` when the daemon is gone.
    pub(super) fn next(&self, cursor: u64, bound: Duration) -> Option<Next> {
        let deadline = Instant::now() + bound;
        let mut st = self.lock();
        loop {
            if st.gone {
                return None;
            }
            if st.next_id - 1 > cursor {
                let oldest = st.backlog.front().map_or(st.next_id, |(id, _, _)| *id);
                if oldest > cursor + 1 {
                    let last = st.last.clone()?;
                    return Some(Next::Snapshot(last, st.next_id - 1));
                }
                let events = st
                    .backlog
                    .iter()
                    .filter(|(id, _, _)| *id > cursor)
                    .cloned()
                    .collect::<Vec<_>>();
                return Some(Next::Events(events));
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return Some(Next::Events(Vec::new()));
            };
            st = self.changed.wait_timeout(st, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

/// What a stream writes next ([`Hub::next`]).
pub(super) enum Next {
    /// The stream fell behind the backlog: the snapshot now and the id of
    /// the last event it includes.
    Snapshot(Arc<HttpSnapshot>, u64),
    /// The events after the stream's cursor, `(id, epoch, event)`; none
    /// when the wait ran out.
    Events(Vec<(u64, u64, ClusterEvent)>),
}

/// Answers `GET /api/events`: a `503` past [`MAX_STREAMS`] or when the
/// master does not answer, else a stream on a thread of its own.
pub(super) fn serve(request: tiny_http::Request, hub: &Arc<Hub>, principal: Principal) {
    if !hub.enter() {
        let _ = request.respond(text(
            503,
            &format!("too many event streams (at most {MAX_STREAMS} at once); retry later\n"),
        ));
        return;
    }
    let hub2 = hub.clone();
    let spawned = std::thread::Builder::new().name("regent-http-events".into()).spawn(move || {
        stream(request, &hub2, &principal);
        hub2.leave();
    });
    if spawned.is_err() {
        // The request went with the closure; the client sees the
        // connection close.
        hub.leave();
        tracing::warn!("cannot start a thread for an event stream");
    }
}

/// Streams what `principal` may see: its part of each snapshot
/// ([`HttpSnapshot::visible_to`]) and the events about it
/// ([`regent_core::visibility::sees_event`]; docs/design.md#issue-44).
fn stream(request: tiny_http::Request, hub: &Hub, principal: &Principal) {
    let Some((snap, mut cursor)) = hub.current(QUERY_TIMEOUT) else {
        let _ = request.respond(text(503, "the master did not answer in time; retry\n"));
        return;
    };
    let head_only = *request.method() == tiny_http::Method::Head;
    if head_only {
        let _ = request.respond(
            tiny_http::Response::empty(200)
                .with_header(header("Content-Type", "text/event-stream"))
                .with_header(header("Cache-Control", "no-cache")),
        );
        return;
    }
    let mut out = request.into_writer();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         Connection: close\r\nX-Accel-Buffering: no\r\n\r\nretry: {RETRY_MS}\n\n"
    );
    if out.write_all(head.as_bytes()).and_then(|_| out.flush()).is_err() {
        return;
    }
    let mut view = FrameworkTenants::of(&snap.state);
    if write_snapshot(&mut out, &HttpSnapshot::clone(&snap).visible_to(principal), cursor).is_err()
    {
        return;
    }
    loop {
        let wrote = match hub.next(cursor, KEEPALIVE) {
            None => return,
            Some(Next::Snapshot(snap, id)) => {
                cursor = id;
                view = FrameworkTenants::of(&snap.state);
                write_snapshot(&mut out, &HttpSnapshot::clone(&snap).visible_to(principal), id)
            }
            Some(Next::Events(events)) if events.is_empty() => {
                out.write_all(b": keepalive\n\n").and_then(|_| out.flush())
            }
            Some(Next::Events(events)) => {
                let mut buf = String::new();
                for (id, _, event) in &events {
                    if sees_event(principal, &view, event) {
                        buf.push_str(&event_text(*id, event));
                    }
                    cursor = *id;
                }
                out.write_all(buf.as_bytes()).and_then(|_| out.flush())
            }
        };
        if wrote.is_err() {
            tracing::debug!("event stream closed by the client");
            return;
        }
    }
}

fn write_snapshot(out: &mut impl Write, snap: &HttpSnapshot, id: u64) -> std::io::Result<()> {
    let data = state_body(snap, false);
    out.write_all(format!("id: {id}\nevent: snapshot\ndata: {}\n\n", data.trim_end()).as_bytes())?;
    out.flush()
}

/// One event in the SSE format: `id`, `event` (the kind) and the JSON (with
/// its `id`) as data on one line.
pub fn event_text(id: u64, event: &ClusterEvent) -> String {
    let mut v = serde_json::to_value(event).unwrap_or_default();
    if let Some(map) = v.as_object_mut() {
        map.insert("id".into(), id.into());
    }
    format!("id: {id}\nevent: {}\ndata: {v}\n\n", event.kind())
}

//! The web page of `GET /`: plain HTML, CSS and JavaScript in one file
//! (`page.html`, embedded in the binary: nothing is loaded from elsewhere).
//!
//! The page reads `GET /api/state` and follows `GET /api/events`
//! (`EventSource`): every event re-reads the state (debounced) and is listed
//! under "Recent events", so the page follows the cluster without reloading.
//! A dot in the header says how it is connected: `live` (the event stream
//! is open), `reconnecting`, `polling` (the stream failed three times in a
//! row, or the browser has no `EventSource`: the state is then re-read every
//! 2 s, and the stream retried every 30 s) or `offline` (the master does not
//! answer).
//!
//! Views (hash routes, so any link can be bookmarked and the server serves
//! one page): `#/` the cluster — a summary (workers by state, cores and
//! memory used of total, frameworks running and finished), workers,
//! frameworks, finished frameworks (`history`, when the master reports it)
//! and recent events; `#/workers/ID` one worker and its executors;
//! `#/frameworks/ID` one framework, its executors (or, once finished, the
//! final state of every slot). Every executor links to its output,
//! `/api/logs/ID?stream=stdout` and `?stream=stderr`. Executor ids
//! (`FRAMEWORK/GROUP#SLOT#EPOCH.LAUNCH`) are shown as `GROUP[SLOT]` with the
//! full id in a tooltip; framework ids shortened to their last 8
//! characters (`fw-…6f8cd9ae`) next to their names.
//! Fields that a master may not report (`cordoned`, `history`) are shown
//! when present. Every string from the state is inserted as text, never as
//! markup.

/// The page (HTML with its CSS and JavaScript inline).
pub const PAGE: &str = include_str!("page.html");

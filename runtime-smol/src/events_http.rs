//! `regent events --http URL,...`: the cluster's events from the leader's
//! `GET /v1/events` stream (docs/api.md), followed across failovers by
//! resuming at the next master with `after=` the last index seen.
//!
//! Where [`crate::events`] asks the leader for its whole state over the
//! wire protocol every 250 ms and diffs two answers (so it needs only the
//! masters' wire port, and coalesces what changed between two polls), this
//! follower reads the stream the master's own event hub writes: every
//! event with its index `EPOCH.SEQ`, and an explicit gap line whenever a
//! resume cannot continue exactly (another leader, a backlog passed by).
//!
//! * Text: one line per event ([`ClusterEvent::describe`]); a gap prints as
//!   `gap: events were missed since INDEX; re-read /v1/jobs`.
//! * JSON (`--json`): every line as the server sent it, except heartbeats.
//! * Heartbeats (asked every [`HEARTBEAT`]) are never printed: they move the
//!   index and let [`follow_http`] look at its stop condition.
//! * A master that refuses the connection, answers `503` (a standby, or its
//!   stream limit), another server error, or ends the stream: the next URL
//!   is asked, round after round, pausing [`RETRY_PAUSE`] after a round in
//!   which none streamed. `400`, `401`, `403`, `404` end the command: asking
//!   again would not change the answer.
//!
//! Plain `http://` only in this step: ureq is built without TLS here (a
//! master's `--http` is plain HTTP; TLS is the wire protocol's).

use regent_core::events::ClusterEvent;
use serde::Deserialize;
use std::io::{BufRead, BufReader, Read};
use std::time::{Duration, Instant};

/// How often an idle stream sends a heartbeat line (`?heartbeat=`).
pub const HEARTBEAT: &str = "1s";

/// The pause after a round of URLs in which none streamed.
pub const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest line read from a stream (a longer one is a broken stream).
pub const MAX_LINE: u64 = 1 << 20;

/// What to follow, and how.
#[derive(Clone, Debug)]
pub struct HttpFollow {
    /// Every master's `--http` base URL (`http://HOST:PORT`), tried in turn.
    pub urls: Vec<String>,
    /// The bearer token (`regent http-token`), sent when given.
    pub token: Option<String>,
    /// Resume after this index (`EPOCH.SEQ`); `None`: from now.
    pub after: Option<String>,
    /// Print the lines as JSON (as sent) instead of text.
    pub json: bool,
    /// Give up when no master streamed within this long at the start.
    pub patience: Duration,
}

/// Why [`follow_http`] ended without being stopped.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// No URL was given.
    #[error("no --http URL given")]
    NoUrl,
    /// A URL is not `http://HOST:PORT`.
    #[error("{0:?} is not an http:// URL (https is not supported here)")]
    BadUrl(String),
    /// No master streamed within the patience, at the start.
    #[error("no master streamed /v1/events within {waited:?}; last: {last}")]
    NoLeader {
        /// How long it tried.
        waited: Duration,
        /// The last failure.
        last: String,
    },
    /// A master refused the request for good (bad `after`, token, path).
    #[error("{url}: {status}: {body}")]
    Refused {
        /// The request.
        url: String,
        /// Its status.
        status: u16,
        /// The answer's body (the API's `{"error": ...}`).
        body: String,
    },
}

/// One line of the stream (docs/api.md).
#[derive(Debug, Deserialize)]
struct Line {
    index: String,
    #[serde(default)]
    event: Option<ClusterEvent>,
    #[serde(default)]
    gap: bool,
    #[serde(default)]
    heartbeat: bool,
}

/// How one stream ended (other than by `stop`).
enum Ended {
    /// The master could not or would not stream: try the next one.
    Retry(String),
    /// The master streamed, then the stream ended: try the next one at once.
    Streamed(String),
}

/// Follows `/v1/events` of the masters in `opts.urls`, handing `emit` one
/// printable line per event or gap, until `stop()` answers `true` (looked
/// at between lines, so at least every [`HEARTBEAT`] while streaming).
pub fn follow_http(
    opts: &HttpFollow,
    stop: &dyn Fn() -> bool,
    emit: &mut dyn FnMut(&str),
) -> Result<(), FollowError> {
    if opts.urls.is_empty() {
        return Err(FollowError::NoUrl);
    }
    let mut bases = Vec::new();
    for url in &opts.urls {
        let base = url.trim().trim_end_matches('/');
        if !base.starts_with("http://") {
            return Err(FollowError::BadUrl(url.clone()));
        }
        bases.push(base.to_owned());
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(CONNECT_TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into();
    let start = Instant::now();
    let mut last = opts.after.clone();
    let mut ever_streamed = false;
    let mut next = 0;
    loop {
        let mut streamed_this_round = false;
        let mut failure = String::new();
        for _ in 0..bases.len() {
            if stop() {
                return Ok(());
            }
            let base = &bases[next];
            next = (next + 1) % bases.len();
            match stream_once(&agent, base, opts, &mut last, stop, emit)? {
                None => return Ok(()),
                Some(Ended::Streamed(why)) => {
                    tracing::debug!(%base, %why, "stream ended; trying the next master");
                    ever_streamed = true;
                    streamed_this_round = true;
                }
                Some(Ended::Retry(why)) => {
                    tracing::debug!(%base, %why, "no stream; trying the next master");
                    failure = format!("{base}: {why}");
                }
            }
        }
        if !ever_streamed && start.elapsed() > opts.patience {
            return Err(FollowError::NoLeader { waited: start.elapsed(), last: failure });
        }
        if !streamed_this_round {
            std::thread::sleep(RETRY_PAUSE);
        }
    }
}

/// One request to `base`: streams until it ends. `Ok(None)`: stopped.
fn stream_once(
    agent: &ureq::Agent,
    base: &str,
    opts: &HttpFollow,
    last: &mut Option<String>,
    stop: &dyn Fn() -> bool,
    emit: &mut dyn FnMut(&str),
) -> Result<Option<Ended>, FollowError> {
    let mut url = format!("{base}/v1/events?heartbeat={HEARTBEAT}");
    if let Some(after) = last.as_deref() {
        url.push_str("&after=");
        url.push_str(after);
    }
    let mut request = agent.get(&url).header("Accept", "application/x-ndjson");
    if let Some(token) = &opts.token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let response = match request.call() {
        Ok(r) => r,
        Err(e) => return Ok(Some(Ended::Retry(e.to_string()))),
    };
    let status = response.status().as_u16();
    if status != 200 {
        let body = response.into_body().read_to_string().unwrap_or_default();
        return if status == 503 || status >= 500 {
            Ok(Some(Ended::Retry(format!("{status}: {}", body.trim()))))
        } else {
            Err(FollowError::Refused { url, status, body: body.trim().to_owned() })
        };
    }
    let mut reader = BufReader::new(response.into_body().into_reader());
    loop {
        if stop() {
            return Ok(None);
        }
        let mut text = String::new();
        match (&mut reader).take(MAX_LINE).read_line(&mut text) {
            Ok(0) => return Ok(Some(Ended::Streamed("the stream ended".into()))),
            Ok(_) => {}
            Err(e) => return Ok(Some(Ended::Streamed(e.to_string()))),
        }
        if !text.ends_with('\n') {
            return Ok(Some(Ended::Streamed("a line cut short".into())));
        }
        let text = text.trim_end();
        if text.is_empty() {
            continue;
        }
        let line: Line = match serde_json::from_str(text) {
            Ok(l) => l,
            Err(e) => return Ok(Some(Ended::Streamed(format!("a line that is no event: {e}")))),
        };
        if let Some(printed) = render(&line, text, last.as_deref(), opts.json) {
            emit(&printed);
        }
        *last = Some(line.index);
    }
}

/// What to print for `line` (`raw` as the server sent it), given the index
/// before it; `None` for heartbeats (and, as text, the start line).
fn render(line: &Line, raw: &str, before: Option<&str>, json: bool) -> Option<String> {
    if line.heartbeat {
        return None;
    }
    if json {
        return Some(raw.to_owned());
    }
    if line.gap {
        let since = before.unwrap_or("the start");
        return Some(format!("gap: events were missed since {since}; re-read /v1/jobs"));
    }
    line.event.as_ref().map(ClusterEvent::describe)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Line {
        serde_json::from_str(s).expect("a stream line")
    }

    #[test]
    fn gaps_name_the_last_index_and_heartbeats_are_not_printed() {
        let gap = r#"{"gap":true,"resync":"/v1/jobs","index":"8.3"}"#;
        assert_eq!(
            render(&parse(gap), gap, Some("7.41"), false).as_deref(),
            Some("gap: events were missed since 7.41; re-read /v1/jobs")
        );
        assert_eq!(render(&parse(gap), gap, Some("7.41"), true).as_deref(), Some(gap));
        let beat = r#"{"heartbeat":true,"index":"7.41"}"#;
        assert_eq!(render(&parse(beat), beat, None, false), None);
        assert_eq!(render(&parse(beat), beat, None, true), None);
        let start = r#"{"index":"7.41"}"#;
        assert_eq!(render(&parse(start), start, None, false), None);
        assert_eq!(render(&parse(start), start, None, true).as_deref(), Some(start));
    }

    #[test]
    fn urls_must_be_plain_http() {
        let opts = HttpFollow {
            urls: vec!["https://127.0.0.1:1".into()],
            token: None,
            after: None,
            json: false,
            patience: Duration::ZERO,
        };
        let err = follow_http(&opts, &|| false, &mut |_| {}).unwrap_err();
        assert!(matches!(err, FollowError::BadUrl(_)), "{err}");
    }
}

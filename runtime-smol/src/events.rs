//! `regent events`: the cluster's changes as they happen, following the
//! leader across failovers.
//!
//! It asks the leader for its state (`StateRequest` over the authenticated
//! wire protocol, as `regent status` does: [`crate::client::fetch_state`])
//! every [`POLL_INTERVAL`] and prints what changed since the last answer,
//! as [`regent_core::events::diff`] finds it: first one `snapshot` line
//! summing the cluster up, then one line per event. When the leader stops
//! answering, a `leader_lost` event is printed once and the masters (the
//! given ones, and every leader seen) are asked until one leads again; the
//! first answer of the new leader is diffed with the last one of the old,
//! so it shows as a `leader` event (with both epochs), followed by whatever
//! changed in between. Changes between two polls are coalesced (see
//! [`regent_core::events`]). Runs until interrupted.
//!
//! Text: one line per event ([`ClusterEvent::describe`]). JSON (`--json`):
//! one object per line, `{"kind":"snapshot","state":{...}}` (the JSON of
//! `GET /api/state`) first, then the events as `GET /api/events` sends them
//! (without the stream's `id`).

use crate::client::{fetch_state, fetch_state_with, ClientError, Patience};
use crate::net::NetConfig;
use async_channel::Receiver;
use regent_core::events::{diff, summary, ClusterEvent};
use regent_core::protocol::ClusterState;
use regent_core::Addr;
use std::sync::Arc;
use std::time::Duration;

/// How often the leader is asked.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Follows the leader of `masters` and hands `emit` one line per event
/// (text, or JSON with `json`) until `stop` fires. Fails only when no
/// leader answers within `patience` at the start.
pub async fn follow(
    masters: &[Addr],
    net: Arc<NetConfig>,
    json: bool,
    patience: Patience<'_>,
    stop: Receiver<()>,
    mut emit: impl FnMut(&str),
) -> Result<(), ClientError> {
    let mut known: Vec<Addr> = masters.to_vec();
    let mut last = fetch_state_with(&known, net.clone(), true, patience).await?;
    learn(&mut known, &last);
    emit(&snapshot_line(&last, json));
    let mut lost = false;
    loop {
        let pause = smol::future::or(
            async {
                async_io::Timer::after(POLL_INTERVAL).await;
                false
            },
            async {
                let _ = stop.recv().await;
                true
            },
        );
        if pause.await {
            return Ok(());
        }
        match fetch_state(&known, net.clone(), true).await {
            Ok(now) => {
                for event in diff(&last, &now) {
                    emit(&event_line(&event, json));
                }
                learn(&mut known, &now);
                last = now;
                lost = false;
            }
            Err(reason) if !lost => {
                lost = true;
                let event = ClusterEvent::LeaderLost {
                    leader: last.master.clone(),
                    epoch: last.epoch.0,
                    reason: reason.to_string(),
                };
                emit(&event_line(&event, json));
            }
            Err(reason) => tracing::debug!(%reason, "still no leader"),
        }
    }
}

/// Keeps the leader's address among the masters asked, first: the next
/// poll dials it before any other (a dead master that does not refuse
/// connections costs a connect timeout only once it stopped leading).
fn learn(known: &mut Vec<Addr>, s: &ClusterState) {
    if let Some(h) = &s.leader {
        known.retain(|a| *a != h.addr);
        known.insert(0, h.addr.clone());
    }
}

/// The first line: the state summed up (text) or in full (JSON).
pub fn snapshot_line(s: &ClusterState, json: bool) -> String {
    if json {
        serde_json::json!({"kind": "snapshot", "state": crate::http::state_json(s)}).to_string()
    } else {
        format!("snapshot: {}", summary(s))
    }
}

/// One event's line.
pub fn event_line(event: &ClusterEvent, json: bool) -> String {
    if json {
        serde_json::to_string(event).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    } else {
        event.describe()
    }
}

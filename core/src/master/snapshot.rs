//! The `StateReply` snapshot cache: how often a flood of `StateRequest`s
//! makes the master build its view of the cluster (see
//! [`crate::limits::STATE_SNAPSHOT_MAX_AGE`] and
//! [`crate::limits::STATE_REQUEST_INTERVAL`]).
//!
//! Every `StateRequest` is answered, never dropped. A snapshot is built
//! afresh only when the cached one may be out of date (anything other than
//! a `StateRequest` or a heartbeat was handled since it was built —
//! heartbeats move only its counters — or it is older than
//! `STATE_SNAPSHOT_MAX_AGE`) *and* the asking connection has not had a
//! fresh one within `STATE_REQUEST_INTERVAL`; otherwise the cached one is
//! sent. A peer asking in a loop thus costs at most one build per interval,
//! and none while the cluster is quiet; one that does not read its replies
//! fills its send queue and is disconnected by the runtime.
//!
//! Tests: core/tests/state_requests.rs, the unit tests below.

use crate::limits::{STATE_REQUEST_INTERVAL, STATE_SNAPSHOT_MAX_AGE};
use crate::protocol::ClusterState;
use crate::time::Millis;

/// The last snapshot built.
#[derive(Debug, Default)]
pub(super) struct SnapshotCache {
    cached: Option<Cached>,
    /// When the HTTP side (`/api/state`, the event stream's poller) may
    /// next have a snapshot built for it: all its askers count as one,
    /// paced by the size of the last view
    /// ([`crate::limits::HTTP_SNAPSHOT_GAP_PER_ENTRY_US`]).
    http_next_build: Option<Millis>,
}

#[derive(Debug)]
struct Cached {
    built_at: Millis,
    /// Something other than a `StateRequest` was handled since.
    stale: bool,
    /// Shared: an HTTP poller's copy is a pointer, not the cluster.
    state: std::sync::Arc<ClusterState>,
}

impl SnapshotCache {
    /// The master handled an event that may change its state.
    pub(super) fn invalidate(&mut self) {
        if let Some(c) = &mut self.cached {
            c.stale = true;
        }
    }

    /// Whether a request at `now`, on a connection that last got a fresh
    /// snapshot at `last_fresh`, gets a freshly built one.
    pub(super) fn needs_build(&self, now: Millis, last_fresh: Option<Millis>) -> bool {
        let Some(c) = &self.cached else { return true };
        let out_of_date = c.stale || now.since(c.built_at) >= STATE_SNAPSHOT_MAX_AGE;
        let conn_may_build = match last_fresh {
            None => true,
            Some(t) => now.since(t) >= STATE_REQUEST_INTERVAL,
        };
        out_of_date && conn_may_build
    }

    /// Keeps `state`, built at `now`.
    pub(super) fn store(&mut self, now: Millis, state: ClusterState) {
        self.cached =
            Some(Cached { built_at: now, stale: false, state: std::sync::Arc::new(state) });
    }

    /// Whether the HTTP side may have a snapshot built for it at `now`.
    pub(super) fn http_may_build(&self, now: Millis) -> bool {
        self.http_next_build.is_none_or(|at| now >= at)
    }

    /// The HTTP side had a snapshot of `entries` workers, executors and
    /// frameworks built for it at `now`.
    pub(super) fn http_built(&mut self, now: Millis, entries: usize) {
        let gap_us = (entries as u64).saturating_mul(crate::limits::HTTP_SNAPSHOT_GAP_PER_ENTRY_US);
        self.http_next_build = Some(now + Millis(gap_us / 1_000));
    }

    /// The cached snapshot (shared).
    pub(super) fn reply(&self) -> Option<std::sync::Arc<ClusterState>> {
        self.cached.as_ref().map(|c| c.state.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Epoch, MasterId};

    fn state() -> ClusterState {
        ClusterState {
            master: MasterId::new("m"),
            status: crate::states::MasterStatus::Alive,
            epoch: Epoch(1),
            leader: None,
            workers: vec![],
            frameworks: vec![],
            executors: vec![],
            messages: 0,
            rejected: 0,
            history: vec![],
            history_omitted: 0,
        }
    }

    #[test]
    fn builds_only_when_out_of_date_and_the_connection_may() {
        let mut c = SnapshotCache::default();
        assert!(c.needs_build(Millis(0), None), "nothing cached yet");
        c.store(Millis(0), state());
        // Quiet cluster: the cache serves until it is too old.
        assert!(!c.needs_build(Millis(999), None));
        assert!(c.needs_build(Millis(1_000), None));
        // A change: rebuilt for a connection that may build...
        c.invalidate();
        assert!(c.needs_build(Millis(10), None));
        // ...but not for one that got a fresh one less than 100 ms ago.
        assert!(!c.needs_build(Millis(99), Some(Millis(0))));
        assert!(c.needs_build(Millis(100), Some(Millis(0))));
        // A fresh build clears the change.
        c.store(Millis(100), state());
        assert!(!c.needs_build(Millis(150), None));
    }
}

//! The HTTP face's copy of the leader's revocation list
//! (docs/security.md, docs/design.md#issue-44): a request with a scoped
//! token is checked against a copy at most [`MAX_AGE`] old, not against a
//! list asked of the node per request.
//!
//! * The copy is refreshed by two queries of the node (its cached state,
//!   for whether this master leads, then the list) when it is older than
//!   [`MAX_AGE`], and dropped at once when this HTTP face makes a
//!   revocation (`POST /v1/tokens/revoke`): its next request reads the
//!   new list.
//! * A revocation made elsewhere (`regent token revoke` on the wire, or
//!   another face) is refused by the leader's HTTP within [`MAX_AGE`] of
//!   the leader taking it into force.
//! * A standby does not hold the list (only a leader loads it, when
//!   elected: [`Revocations::held_by`]); while this master does not lead,
//!   a scoped token is refused `503` naming the leader. A new leader's
//!   HTTP accepts scoped tokens again within [`MAX_AGE`] of its election,
//!   against the list it loaded.
//!
//! Tests: runtime-smol/tests/e2e_tokens_http.rs (a revocation through this
//! face, refused at once), the unit tests below.

use super::{revocations_of, snapshot_of, HttpQuery};
use regent_core::protocol::LeaderHint;
use regent_core::token::Revocations;
use std::time::{Duration, Instant};

/// The oldest copy of the list the HTTP face checks a token against.
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// Why a scoped token cannot be checked now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unchecked {
    /// The node did not answer in time.
    Timeout,
    /// This master does not lead (the leader it knows of, if any).
    NotLeading(Option<LeaderHint>),
}

/// What the node said, and when.
#[derive(Clone, Debug)]
enum Known {
    Leading(Revocations),
    NotLeading(Option<LeaderHint>),
}

/// The copy of the revocation list one HTTP server keeps.
#[derive(Debug, Default)]
pub struct RevocationCache {
    copy: Option<(Instant, Known)>,
}

impl RevocationCache {
    /// The list in force as of at most [`MAX_AGE`] before `now`, asked of
    /// the node through `queries` when the copy is older.
    pub fn current(
        &mut self,
        queries: &async_channel::Sender<HttpQuery>,
        now: Instant,
    ) -> Result<&Revocations, Unchecked> {
        let fresh = self.copy.as_ref().is_some_and(|(at, _)| now.duration_since(*at) < MAX_AGE);
        if !fresh {
            self.copy = Some((now, fetch(queries).ok_or(Unchecked::Timeout)?));
        }
        self.known()
    }

    fn known(&self) -> Result<&Revocations, Unchecked> {
        match self.copy.as_ref().map(|(_, k)| k) {
            Some(Known::Leading(list)) => Ok(list),
            Some(Known::NotLeading(leader)) => Err(Unchecked::NotLeading(leader.clone())),
            None => Err(Unchecked::Timeout),
        }
    }

    /// Forgets the copy: the next check asks the node (after a revocation
    /// this face made).
    pub fn invalidate(&mut self) {
        self.copy = None;
    }
}

/// Whether this master leads and, if it does, its list.
fn fetch(queries: &async_channel::Sender<HttpQuery>) -> Option<Known> {
    let state = snapshot_of(queries, true)?.state;
    if !Revocations::held_by(state.status) {
        return Some(Known::NotLeading(state.leader.clone()));
    }
    revocations_of(queries).map(Known::Leading)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpSnapshot;
    use regent_core::states::MasterStatus;
    use regent_core::token::TokenId;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A node answering `status` and a list naming one revoked token;
    /// counts the revocation queries.
    fn node(status: MasterStatus) -> (async_channel::Sender<HttpQuery>, Arc<AtomicUsize>) {
        let (tx, rx) = async_channel::unbounded();
        let asked = Arc::new(AtomicUsize::new(0));
        let counted = asked.clone();
        std::thread::spawn(move || {
            while let Ok(q) = rx.recv_blocking() {
                match q {
                    HttpQuery::State { reply, .. } => {
                        let config =
                            regent_core::master::Config::new("m1".into(), "127.0.0.1:1".into());
                        let mut state = regent_core::master::Master::new(config).state();
                        state.status = status;
                        let _ = reply.send(HttpSnapshot {
                            state: Arc::new(state),
                            rejected_connections: 0,
                            node: Default::default(),
                            master: Default::default(),
                        });
                    }
                    HttpQuery::Revocations { reply } => {
                        counted.fetch_add(1, Ordering::SeqCst);
                        let mut list = Revocations::default();
                        list.tokens.insert(TokenId([1; 16]), None);
                        let _ = reply.send(list);
                    }
                    _ => {}
                }
            }
        });
        (tx, asked)
    }

    #[test]
    fn the_list_is_asked_once_per_max_age_and_again_after_a_revocation() {
        let (queries, asked) = node(MasterStatus::Alive);
        let mut cache = RevocationCache::default();
        let t0 = Instant::now();
        for i in 0..100 {
            let list = cache.current(&queries, t0 + Duration::from_millis(i)).unwrap();
            assert!(list.tokens.contains_key(&TokenId([1; 16])));
        }
        assert_eq!(asked.load(Ordering::SeqCst), 1, "one query for 100 requests");
        let _ = cache.current(&queries, t0 + MAX_AGE).unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 2, "asked again once MAX_AGE old");
        cache.invalidate();
        let _ = cache.current(&queries, t0 + MAX_AGE).unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 3, "asked again after a revocation");
    }

    #[test]
    fn a_standby_does_not_check_scoped_tokens() {
        let (queries, asked) = node(MasterStatus::Standby);
        let mut cache = RevocationCache::default();
        assert_eq!(cache.current(&queries, Instant::now()), Err(Unchecked::NotLeading(None)));
        assert_eq!(asked.load(Ordering::SeqCst), 0);
    }
}

//! A master's ceiling on peer connections, the same in both runtimes.

use std::time::{Duration, Instant};

/// A master's ceiling on peer connections: past `max` open ones, a new
/// connection is closed at once, and the log says so at most every 10 s
/// (with `why`, naming the ceiling and what raises it). Both runtimes'
/// masters keep one.
#[derive(Debug)]
pub struct ConnectionCeiling {
    /// The most peer connections at once.
    pub max: usize,
    /// Connections closed at once because the ceiling was reached.
    pub refused: u64,
    why: &'static str,
    logged: Option<Instant>,
}

impl ConnectionCeiling {
    /// A ceiling of `max` connections; `why` ends the log line.
    pub fn new(max: usize, why: &'static str) -> Self {
        ConnectionCeiling { max, refused: 0, why, logged: None }
    }

    /// Whether a connection accepted with `open` connections already open
    /// must be closed at once (counted, and logged when due).
    pub fn refuses(&mut self, open: usize, peer: Option<std::net::SocketAddr>) -> bool {
        if open < self.max {
            return false;
        }
        self.refused += 1;
        if self.logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            self.logged = Some(Instant::now());
            let peer = peer.map(|p| p.to_string()).unwrap_or_default();
            tracing::warn!(
                %peer,
                refused = self.refused,
                "refusing a connection: {open} connections are open, {}",
                self.why
            );
        }
        true
    }
}

//! The connection table of a master pump, the same for both runtimes: which
//! connections are open, which the node closed itself (their later end is
//! not fed back: the node already forgot them), how many were refused (the
//! descriptor ceiling, a failed handshake), and the log lines of sends,
//! closes and ends. The connections themselves are the runtime's
//! (`regent_smol::net::ConnHandle`, [`crate::pumps::conn::ConnHandle`]);
//! both implement [`Peer`]. Nothing here decides protocol.

use crate::net::CloseCause;
use regent_core::node::Ended;
use regent_core::protocol::Message;
use regent_core::ConnId;
use rustc_hash::{FxHashMap, FxHashSet};

/// The log target of a master's connection lines (closes, refusals, ends),
/// the same in both runtimes: `RUST_LOG=info,regent::conn=debug` shows
/// every end.
pub const CONN_TARGET: &str = "regent::conn";

/// What the table keeps of a connection at least: the peer's address, for
/// logs. A connection layer that sends through the table's owner rather
/// than through a handle (`regent_smol::poller`) keeps only this, and asks
/// [`Conns::route`] and [`Conns::forget`].
pub trait Named {
    /// The peer's address, for logs.
    fn peer(&self) -> &str;
}

impl Named for String {
    fn peer(&self) -> &str {
        self
    }
}

/// A daemon's end of one connection, as the table drives it.
pub trait Peer: Named {
    /// Queues `msg`; never blocks (past the send queue's bound the
    /// connection closes instead).
    fn send(&self, msg: Message);
    /// Flushes what was queued and closes; never blocks.
    fn close(&self);
}

/// The open connections of a master pump, by number.
#[derive(Debug)]
pub struct Conns<H> {
    open: FxHashMap<ConnId, H>,
    /// Closed by the node (`Output::Close`) and not yet reported ended.
    closed_by_us: FxHashSet<ConnId>,
    /// Connections refused: past the ceiling, or closed by a refusal
    /// (`regent_rejected_connections_total`).
    rejected: u64,
}

impl<H> Default for Conns<H> {
    fn default() -> Self {
        Self { open: FxHashMap::default(), closed_by_us: FxHashSet::default(), rejected: 0 }
    }
}

impl<H: Named> Conns<H> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a running connection.
    pub fn insert(&mut self, conn: ConnId, handle: H) {
        self.open.insert(conn, handle);
    }

    /// Whether `conn` is open (frames of a connection the node closed are
    /// not fed).
    pub fn contains(&self, conn: ConnId) -> bool {
        self.open.contains_key(&conn)
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Whether `msg` goes out on `conn` (it is open); a command is logged
    /// once, by kind, at target `regent::command` (for audits, and the
    /// fast-takeover tests: never two leaders' commands interleaved).
    pub fn route(&self, conn: ConnId, msg: &Message) -> Option<&H> {
        let c = self.open.get(&conn)?;
        if msg.is_command() {
            let epoch = msg.master_epoch().map(|e| e.0).unwrap_or(0);
            tracing::debug!(
                target: "regent::command",
                epoch,
                peer = %c.peer(),
                "command sent: {}",
                msg.kind()
            );
        }
        Some(c)
    }

    /// The node closes `conn`: it leaves the table and its end is not fed
    /// back ([`Conns::ended`] answers `None` for it). The handle, if it was
    /// open, for the caller to close after what was queued on it.
    pub fn forget(&mut self, conn: ConnId, reason: &str) -> Option<H> {
        let c = self.open.remove(&conn)?;
        tracing::info!(target: CONN_TARGET, peer = %c.peer(), %conn, "closing: {reason}");
        self.closed_by_us.insert(conn);
        Some(c)
    }

    /// Counts a connection refused before it ran (the descriptor ceiling).
    pub fn count_refused(&mut self) {
        self.rejected += 1;
    }

    /// Connections refused so far.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// `conn` ended with `cause`: how, for the node's `Input::Closed`, or
    /// `None` when the node closed it itself or it is not in the table. A
    /// refusal (a failed handshake, a frame past a limit) is counted and
    /// logged as a warning, any other end at debug.
    pub fn ended(&mut self, conn: ConnId, cause: &CloseCause) -> Option<Ended> {
        if self.closed_by_us.remove(&conn) {
            return None;
        }
        let h = self.open.remove(&conn)?;
        if cause.is_refusal() {
            self.rejected += 1;
            tracing::warn!(target: CONN_TARGET, peer = %h.peer(), %conn, "connection refused: {cause}");
        } else {
            tracing::debug!(target: CONN_TARGET, peer = %h.peer(), %conn, "connection closed: {cause}");
        }
        Some(cause.ended())
    }
}

impl<H: Peer> Conns<H> {
    /// Sends `msg` on `conn` (dropped if it is gone; see [`Conns::route`]).
    pub fn send(&self, conn: ConnId, msg: Message) {
        if let Some(c) = self.route(conn, &msg) {
            c.send(msg);
        }
    }

    /// Closes `conn` for the node, after what was queued on it (see
    /// [`Conns::forget`]).
    pub fn close(&mut self, conn: ConnId, reason: &str) {
        if let Some(c) = self.forget(conn, reason) {
            c.close();
        }
    }

    /// Closes every connection (shutdown).
    pub fn close_all(&self) {
        for c in self.open.values() {
            c.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[derive(Default)]
    struct Fake {
        sent: RefCell<Vec<Message>>,
        closed: RefCell<bool>,
    }

    impl Named for &Fake {
        fn peer(&self) -> &str {
            "127.0.0.1:1"
        }
    }

    impl Peer for &Fake {
        fn send(&self, msg: Message) {
            self.sent.borrow_mut().push(msg);
        }
        fn close(&self) {
            *self.closed.borrow_mut() = true;
        }
    }

    #[test]
    fn a_connection_the_node_closed_is_not_reported_ended_and_a_refusal_is_counted() {
        let (a, b) = (Fake::default(), Fake::default());
        let mut conns = Conns::new();
        conns.insert(ConnId(1), &a);
        conns.insert(ConnId(2), &b);
        conns.send(ConnId(1), Message::FrameworkHeartbeat { epoch: regent_core::Epoch(1) });
        conns.send(ConnId(9), Message::FrameworkHeartbeat { epoch: regent_core::Epoch(1) });
        assert_eq!(a.sent.borrow().len(), 1, "sent on the open connection only");

        conns.close(ConnId(1), "test");
        assert!(*a.closed.borrow());
        assert!(!conns.contains(ConnId(1)));
        assert_eq!(conns.ended(ConnId(1), &CloseCause::Local), None, "the node forgot it");

        let refused = CloseCause::NoWriter("cannot start a writer".into());
        assert!(refused.is_refusal());
        assert_eq!(conns.ended(ConnId(2), &refused), Some(refused.ended()));
        assert_eq!(conns.rejected(), 1);
        assert_eq!(conns.ended(ConnId(2), &refused), None, "reported once");
        conns.count_refused();
        assert_eq!(conns.rejected(), 2);
        assert!(conns.is_empty());
    }
}

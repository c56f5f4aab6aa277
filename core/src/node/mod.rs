//! Nodes: each daemon's composition as one pure machine.
//!
//! A daemon is not one machine but a composition: the master with its
//! leadership source (the [`elector`](crate::elector) over ZooKeeper, or
//! single-master self-election), its lease and its store fence. That
//! composition lives here, once, with the same shape as the machines
//! (`new`, `#[must_use] handle(now, input) -> Vec<Output>`, and
//! [`MasterNode::poll_timeout`] for the next deadline). Both runtimes and the
//! simulator drive the same node; a runtime is an I/O pump that executes
//! outputs and feeds back inputs, and makes no protocol decision.
//!
//! * [`master`]: [`MasterNode`], the master daemon's composition.
//! * [`worker`]: [`WorkerNode`], the worker daemon's: the machine, its links
//!   to the masters and its executor bookkeeping.
//! * [`submit`]: [`SubmitNode`], the submitter's: the subscriber, progress
//!   and what the user is shown.
//! * [`Deadlines`]: the one deadline table every node keeps.
//!
//! # The pump contract
//!
//! Every runtime drives a node with the same loop (each loop struct is
//! named `Pump` and says so in its docs):
//!
//! ```text
//! feed Input::Start
//! loop {
//!     wait for the first of: a socket event, a store or ZooKeeper report,
//!         a local request (an HTTP query, a signal), or poll_timeout() passing
//!     turn it into one Input (Tick for the deadline) and call handle(now, input) once
//!     execute the returned outputs in order (sends, closes, dials, store and
//!         ZooKeeper commands); a result that is ready at once is queued as the
//!         next input, never fed inside the loop over the outputs
//!     ask poll_timeout() for the next deadline
//! }
//! ```
//!
//! The three nodes share one vocabulary for connections: `Accepted { conn }`
//! (the listener took one), `Dialled { dial, result }` (a dial the node
//! asked for ended), `Message { conn, msg }` and `Closed { conn, how, reason
//! }` (how it ended, [`Ended`], and why, for the log); and each says when the
//! heartbeat interval its connections' read and write timeouts scale with
//! changed (`Output::ConnTimeouts`), so no pump reads it out of a machine.
//!
//! `now` is the runtime's monotonic clock (CLOCK_BOOTTIME in regent-std),
//! never decreasing between calls. A pump decides nothing: what to send,
//! whom to refuse, how a connection's end counts, all come from the node.
//!
//! A pump reads nothing out of a node to answer someone: a local read (the
//! master's HTTP state, metrics and log reads) is an input too,
//! [`master::Input::Query`] under the pump's [`QueryId`](crate::ids::QueryId),
//! answered by exactly one [`master::Output::Answer`]. So every read passes
//! the same lease check as every other input, and the pump never feeds a
//! `Tick` "to be safe" before one.

mod contact;
mod deadlines;
pub mod master;
pub mod submit;
mod watch;
pub mod worker;

use crate::ids::{Addr, ConnId};
use std::fmt;

/// A node's number for one dial; echoed back with the dial's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DialId(pub u64);

impl fmt::Display for DialId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dial-{}", self.0)
    }
}

/// How a dial ended (worker and master nodes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DialResult {
    /// Connected; the runtime runs the connection as `conn` (the handshake
    /// happens inside it).
    Connected {
        /// The runtime's number for the new connection.
        conn: ConnId,
        /// The socket address it connected to (`ip:port`), when the
        /// runtime knows it: a standby probes exactly this address, not a
        /// re-resolved name, when its watch on the leader ends.
        peer: Option<Addr>,
    },
    /// Failed.
    Failed {
        /// Why, for the log.
        reason: String,
        /// Every address the name resolves to was refused by the exposure
        /// check (a configuration problem, not a transient one).
        refused: bool,
    },
}

impl From<Result<ConnId, String>> for DialResult {
    /// A dial whose runtime knows neither the peer's socket address nor an
    /// exposure refusal (simulators, test harnesses).
    fn from(result: Result<ConnId, String>) -> Self {
        match result {
            Ok(conn) => DialResult::Connected { conn, peer: None },
            Err(reason) => DialResult::Failed { reason, refused: false },
        }
    }
}

/// How loud a node's note is in the operator's log: decided by the note
/// (`Note::level()` of each node), so every runtime logs a note at the same
/// level and no runtime decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteLevel {
    /// Routine detail, for debugging (a dial that failed again).
    Debug,
    /// Expected in a healthy cluster (a leader named, an election won, a
    /// connection made).
    Info,
    /// Worth an operator's attention (leadership lost or given up, a
    /// leader deposed, commands stalled, a refusal).
    Warn,
}

/// How a connection ended, as far as the fast takeover cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The peer's end closed it: EOF or a reset (a process that died has
    /// its sockets closed by the kernel).
    ByPeer,
    /// Nothing arrived within the read timeout, or writes made no progress
    /// (a frozen or partitioned peer looks like this).
    TimedOut,
    /// Anything else: a malformed frame, a refused handshake, a local
    /// failure.
    Failed,
}

/// What one probe (a bare `connect()` to a socket address, closed at once)
/// found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeResult {
    /// `ECONNREFUSED`: nothing listens on the port.
    Refused,
    /// The connection was accepted: something listens.
    Accepted,
    /// Anything else (timeout, unreachable, ...): proves nothing.
    Failed {
        /// Why, for the log.
        reason: String,
    },
}

pub use deadlines::Deadlines;
pub use master::MasterNode;
pub use submit::SubmitNode;
pub use worker::WorkerNode;

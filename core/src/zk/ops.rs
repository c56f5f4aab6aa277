//! The abstract coordination operations the elector and the ZooKeeper store
//! ask for, and their results. A real ZooKeeper backend (`zookeeper-client` in `regent-smol`)
//! and the pure model (`testkit::zk`) both execute them with the semantics
//! of the ZooKeeper server: one session's requests are applied in the order
//! they were sent, and replies come back in that order.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A ZooKeeper session id, as the server assigned it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct SessionId(pub u64);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:x}", self.0)
    }
}

/// The number of one request, unique for the life of an elector. Echoed back
/// in [`ZkEvent::Reply`].
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct RequestId(pub u64);

/// How a node is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CreateMode {
    /// Stays until deleted.
    Persistent,
    /// Deleted when the creating session ends (expiry or close).
    Ephemeral,
    /// Persistent; the server appends a 10-digit sequence number to the name.
    PersistentSequential,
    /// Ephemeral; the server appends a 10-digit sequence number to the name.
    EphemeralSequential,
}

impl CreateMode {
    /// Whether the node goes with its session.
    pub fn is_ephemeral(self) -> bool {
        matches!(self, CreateMode::Ephemeral | CreateMode::EphemeralSequential)
    }

    /// Whether the server appends a sequence number.
    pub fn is_sequential(self) -> bool {
        matches!(self, CreateMode::PersistentSequential | CreateMode::EphemeralSequential)
    }
}

/// One coordination operation. Paths are absolute (`/a/b`), without a
/// trailing slash. `version: None` means "any version" (ZooKeeper's -1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ZkOp {
    /// Create a node; answered by [`ZkReply::Created`] with the actual path
    /// (with the sequence suffix for sequential modes).
    Create {
        /// The path (the prefix, for sequential modes).
        path: String,
        /// The node's data.
        data: Vec<u8>,
        /// Persistent / ephemeral, sequential or not.
        mode: CreateMode,
    },
    /// Delete a node (conditional on `version` when given); answered by
    /// [`ZkReply::Deleted`].
    Delete {
        /// The node.
        path: String,
        /// The version it must have.
        version: Option<i32>,
    },
    /// Does the node exist? Answered by [`ZkReply::Stat`]. With `watch`, a
    /// one-shot watch is left on the path (created, deleted or changed).
    Exists {
        /// The node.
        path: String,
        /// Leave a watch.
        watch: bool,
    },
    /// Read a node's data; answered by [`ZkReply::Data`] or `NoNode`. With
    /// `watch` (and the node present), a one-shot data watch (changed or
    /// deleted) is left.
    GetData {
        /// The node.
        path: String,
        /// Leave a watch.
        watch: bool,
    },
    /// Replace a node's data (conditional on `version` when given); answered
    /// by [`ZkReply::Stat`] with the new stat.
    SetData {
        /// The node.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The version it must have.
        version: Option<i32>,
    },
    /// List a node's children (names, not paths, in no particular order);
    /// answered by [`ZkReply::Children`]. With `watch`, a one-shot children
    /// watch is left.
    GetChildren {
        /// The parent.
        path: String,
        /// Leave a watch.
        watch: bool,
    },
    /// Make the server this session talks to catch up with the leader of the
    /// ensemble before later reads; answered by [`ZkReply::Synced`].
    Sync {
        /// The path (ZooKeeper syncs the whole tree in practice).
        path: String,
    },
    /// Apply every operation atomically, or none; answered by
    /// [`ZkReply::Multi`] (one reply per operation) or by the error of the
    /// first operation that failed.
    Multi(Vec<MultiOp>),
    /// Read several nodes' data in one request (ZooKeeper's `multiRead`,
    /// servers 3.6 and later; no watches); answered by
    /// [`ZkReply::MultiRead`] with one result per path, in order: a
    /// [`ZkReply::Data`], or that read's own error (`NoNode`...). A server
    /// that does not know the request answers `BadArguments`.
    MultiRead(Vec<String>),
}

/// One operation inside a [`ZkOp::Multi`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MultiOp {
    /// Fail the whole multi unless `path` exists at `version`.
    Check {
        /// The node.
        path: String,
        /// The version it must have.
        version: i32,
    },
    /// As [`ZkOp::Create`].
    Create {
        /// The path.
        path: String,
        /// The data.
        data: Vec<u8>,
        /// The mode.
        mode: CreateMode,
    },
    /// As [`ZkOp::SetData`].
    SetData {
        /// The node.
        path: String,
        /// The data.
        data: Vec<u8>,
        /// The version it must have.
        version: Option<i32>,
    },
    /// As [`ZkOp::Delete`].
    Delete {
        /// The node.
        path: String,
        /// The version it must have.
        version: Option<i32>,
    },
}

/// A node's metadata, as far as regent uses it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stat {
    /// Data version: 0 at creation, +1 per set.
    pub version: i32,
    /// Children version: +1 per child created or deleted.
    pub cversion: i32,
    /// The owning session of an ephemeral node.
    pub ephemeral_owner: Option<SessionId>,
    /// The transaction that created the node.
    pub czxid: u64,
    /// The transaction that last modified the node.
    pub mzxid: u64,
}

/// A successful answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ZkReply {
    /// The node was created at `path`.
    Created {
        /// The full path, with the sequence suffix if any.
        path: String,
    },
    /// The node was deleted.
    Deleted,
    /// The stat of the node (`None`: no such node, from `Exists`).
    Stat(Option<Stat>),
    /// The node's data and stat.
    Data {
        /// The data.
        data: Vec<u8>,
        /// The stat.
        stat: Stat,
    },
    /// The children's names.
    Children(Vec<String>),
    /// The sync completed.
    Synced,
    /// One reply per operation of a multi (a `Check` answers
    /// [`ZkReply::Checked`]).
    Multi(Vec<ZkReply>),
    /// A multi's check passed.
    Checked,
    /// One result per path of a [`ZkOp::MultiRead`], in order.
    MultiRead(Vec<ZkResult>),
}

/// Why an operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ZkError {
    /// The connection dropped before the reply came: the operation **may or
    /// may not** have been applied (AURORA-1061, CURATOR-45).
    ConnectionLoss,
    /// The session is gone; its ephemeral nodes are deleted.
    SessionExpired,
    /// No such node (or, for a create, no parent).
    NoNode,
    /// The node exists already.
    NodeExists,
    /// The version did not match.
    BadVersion,
    /// The node has children.
    NotEmpty,
    /// Ephemeral nodes cannot have children.
    NoChildrenForEphemerals,
    /// A malformed path or request.
    BadArguments,
    /// The node's ACL does not grant this session the operation.
    NoAuth,
}

/// What an operation came to.
pub type ZkResult = Result<ZkReply, ZkError>;

/// What a fired one-shot watch reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WatchKind {
    /// The node was created (exists watch).
    NodeCreated,
    /// The node was deleted (exists or data watch; children watch on it).
    NodeDeleted,
    /// The node's data changed (exists or data watch).
    NodeDataChanged,
    /// A child was created or deleted (children watch).
    NodeChildrenChanged,
}

/// A fired watch, delivered to the session that left it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WatchEvent {
    /// The watched path.
    pub path: String,
    /// What happened.
    pub kind: WatchKind,
}

/// What a composition asks of its coordination client: the I/O part of the
/// elector's actions, shared by everything that talks to ZooKeeper on the
/// one session of a master (election, lease and store).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZkCommand {
    /// Open a new session asking for `timeout`, then feed
    /// [`ZkEvent::SessionConnected`]. An earlier session was closed by a
    /// preceding [`ZkCommand::CloseSession`] or is expired: feed no events of
    /// it again.
    NewSession {
        /// The timeout to ask for.
        timeout: crate::Millis,
    },
    /// Close `session` (its ephemeral nodes go at once if the close reaches
    /// the server) and feed no more events of it.
    CloseSession {
        /// The session.
        session: SessionId,
    },
    /// Send `op` on `session` (requests go out in the order of the
    /// commands), then feed [`ZkEvent::Reply`]. While the connection is down
    /// answer `Err(ConnectionLoss)`; drop it if `session` is not current.
    Request {
        /// The session to send on.
        session: SessionId,
        /// Echoed in the reply.
        req: RequestId,
        /// The operation.
        op: ZkOp,
    },
}

/// What the coordination client reports: the I/O part of the elector's
/// events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZkEvent {
    /// `session` is connected with the negotiated `timeout` (after
    /// [`ZkCommand::NewSession`] and after every reconnect within it).
    SessionConnected {
        /// The session.
        session: SessionId,
        /// The negotiated session timeout.
        timeout: crate::Millis,
    },
    /// The connection of `session` dropped; the client reconnects by itself.
    Disconnected {
        /// The session.
        session: SessionId,
    },
    /// The server expired `session`.
    Expired {
        /// The session.
        session: SessionId,
    },
    /// The answer to [`ZkCommand::Request`] `req`.
    Reply {
        /// The request.
        req: RequestId,
        /// What it came to.
        result: ZkResult,
    },
    /// A watch left by `session` fired.
    Watch {
        /// The session that left it.
        session: SessionId,
        /// What fired.
        event: WatchEvent,
    },
}

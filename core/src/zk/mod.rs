//! Everything regent-core knows about ZooKeeper, in one place.
//!
//! In ZooKeeper mode a master holds one ZooKeeper session, and three things
//! share it: the election, the leader's lease, and the recovery store
//! under `<root>/state/`. This module holds what they have in common and
//! the store's half; the election recipe itself is the
//! [`elector`](crate::elector).
//!
//! * The **operations** (`ops`, re-exported here): the coordination
//!   requests a machine asks for ([`ZkOp`], [`MultiOp`]), what they come to
//!   ([`ZkReply`], [`ZkError`], [`Stat`], [`WatchEvent`]), and the two
//!   halves of the conversation with a client: [`ZkCommand`] (open or close
//!   a session, send a request) and [`ZkEvent`] (a session connected,
//!   dropped or expired, a reply, a fired watch). The semantics are the
//!   server's: one session's requests are applied in the order they were
//!   sent, and their replies come back in that order.
//! * The **layout** ([`layout`]): where the store keeps its records, nodes
//!   under `<root>/state/` sharded by a hash prefix, and the flat layout of
//!   earlier versions that a load still reads.
//! * The **store** (`store`, crate-private): the recovery store as a pure
//!   machine, turning the master's [`StoreCommand`](crate::store::StoreCommand)s
//!   into fenced requests on the elector's session. Its public limits are
//!   re-exported here ([`MAX_RECORD_IMAGE`], [`MAX_LOAD_IN_FLIGHT`],
//!   [`MULTI_READ_BATCH`]), beside ZooKeeper's packet limit
//!   ([`JUTE_MAXBUFFER`], [`REQUEST_OVERHEAD`]).
//!
//! How the others use it:
//!
//! * the [`elector`](crate::elector) sends [`ZkOp`]s for the election and
//!   the lease and is fed [`ZkEvent`]s (its `Action::Zk` and `Event::Zk`);
//! * the [`MasterNode`](crate::node::MasterNode) composes the elector and
//!   the store on the one session: it numbers every request, passes the
//!   elector's [`ZkCommand`]s out, sends the store's requests fenced by the
//!   elector's [`fence`](crate::elector::Elector::fence), and routes each
//!   [`ZkEvent::Reply`] back to whichever asked;
//! * a runtime's backend (`regent-smol`'s `zk` module, on
//!   `zookeeper-client`) executes the [`ZkCommand`]s against an ensemble
//!   and reports [`ZkEvent`]s, deciding nothing; the pure model in
//!   `testkit::zk` does the same for tests and the simulator.

pub mod layout;
mod ops;
pub(crate) mod store;

pub use ops::{
    CreateMode, MultiOp, RequestId, SessionId, Stat, WatchEvent, WatchKind, ZkCommand, ZkError,
    ZkEvent, ZkOp, ZkReply, ZkResult,
};
pub use store::{DEFAULT_WRITE_WINDOW, MAX_LOAD_IN_FLIGHT, MAX_RECORD_IMAGE, MULTI_READ_BATCH};

/// ZooKeeper's default `jute.maxbuffer`, 0xfffff bytes (1 MiB - 1): the
/// server refuses a larger request (a whole multi counts as one request),
/// and clients refuse a larger response.
pub const JUTE_MAXBUFFER: usize = 0xfffff;

/// Room a write request needs besides the record image: request and multi
/// headers, the fence check and its path, the record's path, the ACL.
pub const REQUEST_OVERHEAD: usize = 4096;

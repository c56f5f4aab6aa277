//! # regent-smol
//!
//! The async runtime of regent, on smol and async-io, and the `regent`
//! binary. Runtimes stay thin: each daemon waits for a frame, a deadline, an
//! I/O completion or a command, makes one `handle` call on its pure machine
//! from `regent-core`, and executes every action in order. No protocol
//! decision lives here.
//!
//! Modules:
//! * [`error`]: the library's error enums, printed with their causes.
//! * [`net`]: TCP connections with the cluster-secret handshake and framing.
//! * [`poller`]: the master's connections on one epoll instance (no task
//!   or channel per connection).
//! * [`master`]: the master daemon, an I/O pump for
//!   `regent_core::node::MasterNode` (TCP, ZooKeeper, store, HTTP).
//! * [`worker`]: the worker daemon (executors as real processes).
//! * [`submit`]: the framework side: subscribe, declare, follow progress.
//! * [`client`]: operator commands (`status`, `kill`, `remove-worker`).
//! * [`events`]: `regent events`, the cluster's changes following the leader.
//! * [`events_http`]: `regent events --http`, the leader's `/v1/events` stream.
//! * [`logs`]: `regent logs`, an executor's output through the leader.
//! * [`demo`]: `regent demo`, the main job in one process.
//! * [`http`]: the web page, `/api/state`, `/api/events`, `/api/logs` and
//!   `/metrics` (re-exported from regent-std: both runtimes serve them).
//! * [`zk`]: the ZooKeeper client of the master node (sessions and requests
//!   executed with `zookeeper-client`; no protocol decision).
#![warn(missing_docs)]

pub mod client;
pub mod demo;
pub mod error;
pub mod events;
pub mod events_http;
pub mod load;
pub mod logs;
pub mod master;
pub mod net;
pub mod poller;
pub mod submit;
pub mod worker;
pub mod zk;

/// The clock every machine is fed (monotonic ms since start) and the
/// wall-clock term of a new leader's epoch: the host's, shared with the
/// blocking runtime.
pub use regent_std::clock::RuntimeClock;
pub use regent_std::host::wall_clock_ms;

/// The HTTP face of a master (`/`, `/api/state`, `/api/events`,
/// `/metrics`): served by
/// both runtimes, so it lives in regent-std.
pub use regent_std::http;

//! # regent-smol
//!
//! The async runtime of regent, on smol and async-io, and the `regent`
//! binary. Runtimes stay thin: each daemon waits for a frame, a deadline, an
//! I/O completion or a command, makes one `handle` call on its pure machine
//! from `regent-core`, and executes every action in order. No protocol
//! decision lives here.
//!
//! Modules:
//! * [`net`]: TCP connections with the cluster-secret handshake and framing.
//! * [`master`]: the master daemon, an I/O pump for
//!   `regent_core::node::MasterNode` (TCP, ZooKeeper, store, HTTP).
//! * [`worker`]: the worker daemon (executors as real processes).
//! * [`submit`]: the framework side: subscribe, declare, follow progress.
//! * [`client`]: operator commands (`status`, `kill`, `remove-worker`).
//! * [`logs`]: `regent logs`, an executor's output through the leader.
//! * [`demo`]: `regent demo`, the main job in one process.
//! * [`http`]: `/api/state`, `/metrics` and the HTML page.
//! * [`http_logs`]: `/api/logs/<executor>`, an executor's output.
//! * [`zk`]: the ZooKeeper client of the master node (sessions and requests
//!   executed with `zookeeper-client`; no protocol decision).
#![warn(missing_docs)]

pub mod client;
pub mod demo;
pub mod http;
pub mod http_logs;
pub mod load;
pub mod logs;
pub mod master;
pub mod net;
pub mod submit;
pub mod worker;
pub mod zk;

/// The clock every machine is fed (monotonic ms since start) and the
/// wall-clock term of a new leader's epoch: the host's, shared with the
/// blocking runtime.
pub use regent_std::host::{millis_since, wall_clock_ms};

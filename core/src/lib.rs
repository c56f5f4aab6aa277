//! # regent-core
//!
//! The pure heart of regent, a fault-tolerant cluster manager. Every piece of
//! protocol logic lives here as a sans-IO state machine with the same shape:
//!
//! ```text
//! Config, Event, Action, Timer, the machine, then
//! fn new(config: Config) -> Self
//! fn handle(&mut self, now: Millis, event: Event) -> Vec<Action>
//! ```
//!
//! The crate performs no I/O: no sockets, files, clocks, threads or global
//! randomness. Time is an argument, randomness comes from a seed in `Config`,
//! and anything unique per process (incarnations, GUIDs) is passed in by the
//! runtime. The runtimes (`regent-std`, `regent-smol`) execute the actions.
//!
//! Modules:
//! * [`time`], [`ids`]: the vocabulary (caller-given time, identifiers, epochs).
//! * [`limits`]: the limits on peer-supplied numbers.
//! * [`protocol`]: every message that crosses the wire.
//! * [`codec`]: length-prefixed postcard frames, the incremental [`codec::Decoder`].
//! * [`auth`]: the cluster-secret handshake (HMAC-SHA256 challenge–response) and
//!   per-frame MACs with per-direction keys and sequence numbers.
//! * [`worker`]: the worker machine (registration, failover, heartbeats).
//! * [`master`]: the master machine (leadership lifecycle, worker registry).
//! * [`store`]: the records a master makes durable.
//! * [`zk`]: what regent knows of ZooKeeper: the coordination operations
//!   the elector and the store ask for, the store's layout under
//!   `<root>/state/`, and the ZooKeeper store machine.
//! * [`node`]: each daemon's composition as one pure machine
//!   ([`node::MasterNode`]: master + elector or self-election, lease, fenced
//!   store on one session); the runtimes and the simulator drive nodes.
//! * [`states`]: the states operators see (a master's status, a worker's
//!   state and drain, a framework's state) as enums with one table of names.
//! * [`events`]: cluster events, the pure difference of two
//!   [`protocol::ClusterState`] snapshots (`GET /api/events`, `regent events`).
//! * [`job`]: a job (a framework's executor groups as data, what a job file
//!   holds), validated against the master's limits before it is declared.
//! * [`launch`]: what a worker prepares around an executor's process (its
//!   working directory, kill grace, artifacts fetched before it starts).
//! * [`progress`]: a submitter's view of one executor group, fed the
//!   subscriber machine's actions: slot states, completion and
//!   [`progress::SubmitOutcome`].
#![warn(missing_docs)]

pub mod audit;
pub mod auth;
pub mod codec;
pub mod cut_off;
pub mod deadlines;
pub mod elector;
pub mod events;
pub mod health;
pub mod ids;
pub mod job;
pub mod launch;
pub mod limits;
pub mod master;
pub mod node;
pub mod policy;
pub mod ports;
pub mod preemption;
pub mod progress;
pub mod protocol;
/// The HTTP API's types ([`protocol::api`]): they travel in wire messages,
/// so they live with the protocol.
pub use protocol::api;
pub mod resources;
pub mod rng;
pub mod secret;
pub mod states;
pub mod store;
pub mod subscriber;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod time;
pub mod token;
pub mod visibility;
pub mod worker;
pub mod zk;

pub use ids::{Addr, ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, MasterId, WorkerId};
pub use time::Millis;

//! regent-std: the shared host layer of regent's runtimes, and the blocking
//! runtime built on it.
//!
//! **The host layer** (used by both runtimes; knows nothing of threads per
//! connection or of smol; imports nothing from [`pumps`], which a test,
//! `tests/layers.rs`, checks):
//!
//! * [`store`]: the crash-safe filesystem recovery store (one directory, one
//!   file per record, `flock`ed for the life of the store) and
//!   [`store::spawn_writer`], a dedicated writer thread that group-commits
//!   batches so a runtime never blocks its event loop on fsync.
//! * [`exec`]: executor process supervision (process groups, output capture,
//!   exit monitoring, kill with grace, cleanup of groups a crashed worker
//!   left behind), runtime-agnostic.
//! * [`host`]: the worker's host: its id file, what a previous worker left
//!   behind, the one place a worker node's executor commands and log reads
//!   are carried out ([`host::execute_executor_command`],
//!   [`host::read_executor_log`]), the ordered incarnation ids.
//! * [`net`]: the runtime-independent parts of connections (timeouts, the
//!   bounded send queue, write batches, typed close causes, the exposure
//!   rule, probe classification).
//! * [`conns`]: a master pump's connection table (open, closed by the
//!   node, refused; the log lines of sends, closes and ends).
//! * [`http`]: the HTTP face of a master (`/`, `/api/state`, `/api/events`,
//!   `/metrics`), on a thread of its own, for both runtimes.
//! * [`clock`]: the runtime clock both runtimes feed their nodes (boot
//!   time: it counts while the host is suspended).
//! * [`config`]: how to run a master ([`config::MasterConfig`],
//!   [`config::Recovery`]), one configuration for both runtimes.
//! * [`notes`]: the log lines of the nodes' notes, at the level each note
//!   asks for.
//! * [`error`]: every fallible function returns its domain's error enum;
//!   [`error::report`] prints one with its causes.
//!
//! **The blocking runtime**, [`pumps`]: the master, worker and subscriber
//! nodes pumped on std threads (one thread owns each node), over
//! [`pumps::conn`] (connections as a reader and a writer thread each),
//! for embedders and for `regent --runtime std`. Recovery modes `none` and
//! `filesystem` only.
#![warn(missing_docs)]

pub mod audit;
pub mod clock;
pub mod config;
pub mod conns;
pub mod discovery;
pub mod error;
pub mod exec;
pub mod host;
pub mod http;
pub mod job_file;
pub mod net;
pub mod notes;
pub mod pumps;
pub mod store;
pub mod tls;

pub use store::{
    spawn_writer, Completion, FsStore, Loaded, Op, Outcome, StoreError, Warning, WriterEvent,
    WriterHandle, WriterStopped,
};

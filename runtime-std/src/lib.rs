//! regent-std: the shared I/O layer of regent.
//!
//! * [`store`]: the crash-safe filesystem recovery store (one directory, one
//!   file per record, `flock`ed for the life of the store) and
//!   [`store::spawn_writer`], a dedicated writer thread that group-commits
//!   batches so a runtime never blocks its event loop on fsync.
//! * [`exec`]: executor process supervision (process groups, output capture,
//!   exit monitoring, kill with grace, cleanup of groups a crashed worker
//!   left behind), runtime-agnostic.
//! * [`net`]: connections on blocking sockets (the cluster-secret handshake,
//!   framing, bounds), one reader and one writer thread per connection.
//! * [`http`]: the HTTP face of a master (`/`, `/api/state`, `/api/events`,
//!   `/metrics`), on a thread of its own, for both runtimes.
//! * [`clock`]: the runtime clock both runtimes feed their nodes (boot
//!   time: it counts while the host is suspended).
//! * [`config`]: how to run a master ([`config::MasterConfig`],
//!   [`config::Recovery`]), one configuration for both runtimes.
//! * [`drivers`]: the master, worker and subscriber machines driven on std
//!   threads (one thread owns each machine), for embedders and for
//!   `regent --runtime std`. Recovery modes `none` and `filesystem` only.
//! * [`error`]: every fallible function returns its domain's error enum;
//!   [`error::report`] prints one with its causes.
#![warn(missing_docs)]

pub mod clock;
pub mod config;
pub mod drivers;
pub mod error;
pub mod exec;
pub mod host;
pub mod http;
pub mod net;
pub mod notes;
pub mod store;

pub use store::{
    spawn_writer, Completion, FsStore, Loaded, Op, Outcome, StoreError, Warning, WriterEvent,
    WriterHandle, WriterStopped,
};

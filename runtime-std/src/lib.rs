//! regent-std: the shared I/O layer of regent.
//!
//! * [`store`]: the crash-safe filesystem recovery store (one directory, one
//!   file per record, `flock`ed for the life of the store) and
//!   [`store::spawn_writer`], a dedicated writer thread that group-commits
//!   batches so a runtime never blocks its event loop on fsync.
//! * [`exec`]: executor process supervision (process groups, output capture,
//!   exit monitoring, kill with grace, cleanup of groups a crashed worker
//!   left behind), runtime-agnostic.
#![warn(missing_docs)]

pub mod exec;
pub mod store;

pub use store::{
    spawn_writer, Completion, FsStore, Loaded, Op, Outcome, StoreError, Warning, WriterEvent,
    WriterHandle, WriterStopped,
};

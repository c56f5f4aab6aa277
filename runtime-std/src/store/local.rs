//! The local recovery store as a master driver uses it, in either runtime:
//! nowhere (`--recovery none`) or the filesystem store behind its writer
//! thread (group commit, fsync off the driver's thread). The ZooKeeper store
//! is the smol runtime's own.

use super::{spawn_writer, FsStore, Op, StoreError, WriterEvent, WriterHandle};
use regent_core::node::master::StoreResult;
use regent_core::store::seal::Sealing;
use regent_core::store::{Record, WriteId};
use std::path::Path;

/// Where a single-master driver keeps its records.
#[derive(Debug)]
pub enum LocalStore {
    /// In memory only: every write is "durable" at once.
    Memory,
    /// A filesystem store: writes go to its writer thread.
    Files {
        /// The writer thread.
        writer: WriterHandle,
        /// The records read at open, handed out once (`LoadRecords`).
        loaded: Vec<Record>,
    },
}

/// The writer thread's report as store results for the master node.
pub fn store_results(event: WriterEvent) -> Vec<StoreResult> {
    match event {
        WriterEvent::Durable(done) => {
            done.into_iter().map(|c| StoreResult::Persisted { write: c.id }).collect()
        }
        WriterEvent::Failed { writes, error } => {
            let reason = error.to_string();
            writes
                .into_iter()
                .map(|write| StoreResult::PersistFailed { write, reason: reason.clone() })
                .collect()
        }
    }
}

impl LocalStore {
    /// Opens the store in `dir` for `owner` with the master's `sealing`
    /// (taking its lock; a damaged, planted or unverifiable record or another
    /// holder is an error naming it; what was ignored is logged; records
    /// under a previous key are re-sealed) and starts its writer. `deliver`
    /// receives the machine's events for every finished batch, on the writer
    /// thread: send them on the driver's channel.
    pub fn open_files(
        dir: &Path,
        owner: &str,
        sealing: Sealing,
        mut deliver: impl FnMut(Vec<StoreResult>) + Send + 'static,
    ) -> Result<LocalStore, StoreError> {
        let (fs, loaded) = FsStore::open_with(dir, owner, sealing)?;
        for w in &loaded.warnings {
            tracing::warn!(store = %dir.display(), "{w}");
        }
        let writer = spawn_writer(fs, move |event| deliver(store_results(event)))
            .map_err(|source| StoreError::WriterThread { source })?;
        Ok(LocalStore::Files { writer, loaded: loaded.records })
    }

    /// Executes a `Persist`/`Unpersist`: the event to feed at once, if any
    /// (in memory it is durable at once; a stopped writer fails it), or
    /// `None` when the writer thread will answer.
    pub fn write(&mut self, write: WriteId, op: Op) -> Option<StoreResult> {
        match self {
            LocalStore::Memory => Some(StoreResult::Persisted { write }),
            LocalStore::Files { writer, .. } => writer.submit(write, op).err().map(|_| {
                StoreResult::PersistFailed { write, reason: "the store writer stopped".into() }
            }),
        }
    }

    /// Answers `LoadRecords` with the records read at open (once).
    pub fn load(&mut self) -> StoreResult {
        match self {
            LocalStore::Memory => StoreResult::Loaded { records: Vec::new() },
            LocalStore::Files { loaded, .. } => {
                StoreResult::Loaded { records: std::mem::take(loaded) }
            }
        }
    }
}

//! The local recovery store as a master pump uses it, in either runtime:
//! nowhere (`--recovery none`) or the filesystem store behind its writer
//! thread (group commit, fsync off the pump's thread). The ZooKeeper store
//! is the smol runtime's own.

use super::{spawn_writer, FsStore, Op, StoreError, WriterEvent, WriterHandle};
use regent_core::store::seal::Sealing;
use regent_core::store::{Record, StoreCommand, StoreEvent, WriteId};
use std::path::Path;

/// Where a single-master pump keeps its records.
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
pub fn store_results(event: WriterEvent) -> Vec<StoreEvent> {
    match event {
        WriterEvent::Durable(done) => {
            done.into_iter().map(|c| StoreEvent::Persisted { write: c.id }).collect()
        }
        WriterEvent::Failed { writes, error } => {
            let reason = error.to_string();
            writes
                .into_iter()
                .map(|write| StoreEvent::PersistFailed { write, reason: reason.clone() })
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
    /// thread: send them on the pump's channel.
    pub fn open_files(
        dir: &Path,
        owner: &str,
        sealing: Sealing,
        mut deliver: impl FnMut(Vec<StoreEvent>) + Send + 'static,
    ) -> Result<LocalStore, StoreError> {
        let (fs, loaded) = FsStore::open_with(dir, owner, sealing)?;
        for w in &loaded.warnings {
            tracing::warn!(store = %dir.display(), "{w}");
        }
        let writer = spawn_writer(fs, move |event| deliver(store_results(event)))
            .map_err(|source| StoreError::WriterThread { source })?;
        Ok(LocalStore::Files { writer, loaded: loaded.records })
    }

    /// Executes one of the master node's store commands
    /// ([`regent_core::node::master::Output::Store`]): the event to feed at
    /// once, if any (in memory a write is durable at once; a stopped writer
    /// fails it; a load answers at once), or `None` when the writer thread
    /// will answer.
    pub fn execute(&mut self, command: StoreCommand) -> Option<StoreEvent> {
        match command {
            StoreCommand::Persist { write, record } => self.write(write, Op::Put(record)),
            StoreCommand::Unpersist { write, key, incarnation } => {
                self.write(write, Op::Delete { key, incarnation })
            }
            StoreCommand::LoadRecords => Some(self.load()),
        }
    }

    /// Executes a `Persist`/`Unpersist`: the event to feed at once, if any
    /// (in memory it is durable at once; a stopped writer fails it), or
    /// `None` when the writer thread will answer.
    fn write(&mut self, write: WriteId, op: Op) -> Option<StoreEvent> {
        match self {
            LocalStore::Memory => Some(StoreEvent::Persisted { write }),
            LocalStore::Files { writer, .. } => writer.submit(write, op).err().map(|_| {
                StoreEvent::PersistFailed { write, reason: "the store writer stopped".into() }
            }),
        }
    }

    /// Answers `LoadRecords` with the records read at open (once).
    pub fn load(&mut self) -> StoreEvent {
        match self {
            LocalStore::Memory => StoreEvent::Loaded { records: Vec::new() },
            LocalStore::Files { loaded, .. } => {
                StoreEvent::Loaded { records: std::mem::take(loaded) }
            }
        }
    }
}

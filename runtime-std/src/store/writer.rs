//! A dedicated writer thread for an [`FsStore`], so a runtime never blocks its
//! event loop on fsync.
//!
//! The runtime submits writes through a [`WriterHandle`] (never blocks: the
//! channel is unbounded) and learns of their fate through a callback run on
//! the writer thread: wake the event loop from it (send on a channel, notify an
//! eventfd...) and feed `Persisted` into the machine from the loop.
//!
//! Group commit: the thread takes everything pending (up to [`MAX_BATCH`]
//! writes) as one batch, so many writes share one directory fsync. Batches are
//! committed one after another, so writes to one key keep their submission
//! order. After a fatal error every later write is answered with
//! [`WriterEvent::Failed`] too: none is ever retried.

use super::{Completion, FsStore, Op, StoreError};
use regent_core::store::WriteId;
use std::fmt;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

/// The most writes committed as one batch.
pub const MAX_BATCH: usize = 4096;

/// What the writer thread reports.
#[derive(Debug)]
pub enum WriterEvent {
    /// These writes are durable, in submission order.
    Durable(Vec<Completion>),
    /// These writes were not made durable, and never will be: the store
    /// failed (now, or earlier). Fatal to leadership.
    Failed {
        /// The writes of the failed batch.
        writes: Vec<WriteId>,
        /// Why.
        error: StoreError,
    },
}

/// The writer thread has stopped (it panicked); nothing more can be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterStopped;

impl fmt::Display for WriterStopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the store writer thread has stopped")
    }
}

impl std::error::Error for WriterStopped {}

/// Feeds writes to the writer thread. Dropping it finishes the pending writes
/// and then closes the store (releasing its lock).
#[derive(Debug)]
pub struct WriterHandle {
    tx: Option<Sender<Vec<(WriteId, Op)>>>,
    thread: Option<JoinHandle<FsStore>>,
}

impl WriterHandle {
    /// Queues one write. Never blocks.
    pub fn submit(&self, id: WriteId, op: Op) -> Result<(), WriterStopped> {
        self.submit_batch(vec![(id, op)])
    }

    /// Queues writes, in order. Never blocks.
    pub fn submit_batch(&self, writes: Vec<(WriteId, Op)>) -> Result<(), WriterStopped> {
        if writes.is_empty() {
            return Ok(());
        }
        self.tx
            .as_ref()
            .expect("the sender lives until close or drop")
            .send(writes)
            .map_err(|_| WriterStopped)
    }

    /// Waits for every queued write to be reported, stops the thread and
    /// hands the store back (still locked; it may have failed).
    pub fn close(mut self) -> Result<FsStore, WriterStopped> {
        self.tx = None;
        let thread = self.thread.take().expect("joined only once");
        thread.join().map_err(|_| WriterStopped)
    }
}

impl Drop for WriterHandle {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs `store` on a new thread named `regent-store`. `on_event` is called on
/// that thread after each batch, in commit order.
pub fn spawn_writer<F>(store: FsStore, on_event: F) -> std::io::Result<WriterHandle>
where
    F: FnMut(WriterEvent) + Send + 'static,
{
    let (tx, rx) = channel();
    let thread = std::thread::Builder::new()
        .name("regent-store".into())
        .spawn(move || run(store, rx, on_event))?;
    Ok(WriterHandle { tx: Some(tx), thread: Some(thread) })
}

fn run<F>(mut store: FsStore, rx: Receiver<Vec<(WriteId, Op)>>, mut on_event: F) -> FsStore
where
    F: FnMut(WriterEvent),
{
    // A group that did not fit in the last batch starts the next one.
    let mut carry: Option<Vec<(WriteId, Op)>> = None;
    loop {
        let mut batch = match carry.take() {
            Some(b) => b,
            None => match rx.recv() {
                Ok(b) => b,
                Err(_) => return store,
            },
        };
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(more) if batch.len() + more.len() <= MAX_BATCH => batch.extend(more),
                Ok(more) => {
                    carry = Some(more);
                    break;
                }
                Err(_) => break,
            }
        }
        let ids: Vec<WriteId> = batch.iter().map(|(id, _)| *id).collect();
        match store.commit(batch) {
            Ok(done) => on_event(WriterEvent::Durable(done)),
            Err(error) => on_event(WriterEvent::Failed { writes: ids, error }),
        }
    }
}

//! The filesystem recovery store.
//!
//! One directory holds one file per record (`epoch.rec`, `w-<id>.rec`,
//! `f-<id>.rec`, see [`names`]), each a self-checking image in the format of
//! [`regent_core::store::format`], plus a `LOCK` file.
//!
//! * **Opening** ([`FsStore::open_with`]) takes an exclusive `flock` on
//!   `LOCK` (held for the life of the store; a second opener is refused with
//!   [`StoreError::Locked`] naming the holder), then loads every record. A
//!   damaged record fails the open with [`StoreError::Damaged`], naming every
//!   damaged file and what is wrong with it: nothing is dropped or trusted
//!   silently. Temporary files a crash left behind are never read as records:
//!   they are removed and reported as [`Warning`]s.
//! * **Sealing**: the store writes and checks records with a [`Sealing`] (the
//!   master's cluster secret and any previous ones, see
//!   [`regent_core::store::seal`]). A planted, altered or unverifiable record
//!   fails the open by name like any damaged one. Records the open found
//!   sealed under a previous key (a rotation), or unsealed when the sealing
//!   accepts that (`regent store seal`), are written again under the current
//!   key before the open returns ([`Loaded::resealed`]).
//! * **Writing** ([`FsStore::commit`]) applies a batch of [`Op`]s in order.
//!   Each record that changes is written to `<name>.rec.tmp`, fsynced and
//!   renamed over `<name>.rec`; deletions unlink; then the directory is
//!   fsynced once for the whole batch (group commit). Only then are the writes
//!   reported durable. Writes to one key keep their order; a delete may be
//!   conditional on the worker incarnation the stored record names.
//! * **Failure** is fatal: any I/O error while committing (a failed fsync
//!   above all) is returned as [`StoreError::Fatal`] and never retried; the
//!   store refuses every later batch with [`StoreError::Unusable`]. The
//!   leader must give up its leadership (docs/design.md#leadership-that-cannot-act-is-given-up).
//!
//! [`spawn_writer`] runs a store on a dedicated thread fed by a channel, so a
//! runtime never blocks its event loop on fsync.

pub mod names;

mod local;
mod lock;
mod writer;

pub use local::{store_results, LocalStore};
pub use lock::LOCK_FILE;
pub use writer::{spawn_writer, WriterEvent, WriterHandle, WriterStopped};

use lock::{DirLock, LockError};
use names::{key_stem, RECORD_EXT, TEMP_SUFFIX};
use regent_core::secret::Secret;
use regent_core::store::format::{self, Damage, RecordError};
use regent_core::store::seal::{Seal, Sealing};
use regent_core::store::{Record, RecordKey, WriteId};
use regent_core::Incarnation;
use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The sealing of a master with cluster secret `secret` (if any) that also
/// reads records sealed under `previous` secrets (a rotation). Previous
/// secrets without a current one are refused: a master without a secret
/// writes unsealed records, so it would never finish the rotation.
pub fn master_sealing(secret: Option<&Secret>, previous: &[Secret]) -> Result<Sealing, StoreError> {
    match secret {
        None if !previous.is_empty() => Err(StoreError::PreviousWithoutSecret),
        None => Ok(Sealing::none()),
        Some(s) => Ok(previous.iter().fold(Sealing::with_secret(s), |acc, p| acc.and_previous(p))),
    }
}

/// One write the machine asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Store this record under its key, replacing what was there.
    Put(Record),
    /// Remove the record under `key`.
    Delete {
        /// The key to remove.
        key: RecordKey,
        /// When set, remove only if the stored record names this incarnation
        /// (a worker record); otherwise leave it and report
        /// [`Outcome::IncarnationMismatch`]. Records without an incarnation
        /// (epoch, frameworks) never match a `Some`. `None` removes
        /// unconditionally.
        incarnation: Option<Incarnation>,
    },
}

impl Op {
    /// The key this op writes.
    pub fn key(&self) -> RecordKey {
        match self {
            Op::Put(r) => r.key(),
            Op::Delete { key, .. } => key.clone(),
        }
    }
}

/// What a durable write did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The record is stored.
    Stored,
    /// The record was removed.
    Deleted,
    /// There was nothing to delete.
    AlreadyAbsent,
    /// A conditional delete found another incarnation (or a record without
    /// one) and left it in place.
    IncarnationMismatch {
        /// The incarnation the stored record names, if any.
        stored: Option<Incarnation>,
    },
}

/// One write made durable (or, for a delete that did nothing, decided after
/// every earlier write to its key was durable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The write, as the caller numbered it.
    pub id: WriteId,
    /// What it did.
    pub outcome: Outcome,
}

/// Something found while loading that was not trusted and did not fail the
/// load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warning {
    /// A temporary file a crash left behind. It never held a committed
    /// record (the committed version, if any, is its `.rec` file); it was
    /// removed.
    StrayTemp {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        len: u64,
    },
    /// A file that is not a record, a temporary file or the lock. Left in
    /// place, not read.
    UnknownFile {
        /// The file.
        path: PathBuf,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::StrayTemp { path, len } => write!(
                f,
                "removed stray temporary file {} ({len} bytes) left by an interrupted write",
                path.display()
            ),
            Warning::UnknownFile { path } => {
                write!(f, "ignored unknown file {}", path.display())
            }
        }
    }
}

/// What [`FsStore::open`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Every stored record, ordered by key.
    pub records: Vec<Record>,
    /// What was ignored (and why); also logged.
    pub warnings: Vec<Warning>,
    /// Records that were unsealed or sealed under a previous key, with how
    /// they were found, ordered by key: the open wrote them again under the
    /// current key (durably) before it returned.
    pub resealed: Vec<(RecordKey, Seal)>,
}

/// Why the store failed.
#[derive(Debug)]
pub enum StoreError {
    /// Another store (this process or another) holds the directory lock.
    Locked {
        /// The store directory.
        dir: PathBuf,
        /// What the holder wrote in the lock file: its pid and owner.
        holder: String,
    },
    /// One or more records are damaged; the store was not opened.
    Damaged {
        /// The store directory.
        dir: PathBuf,
        /// Every damaged record, by file, with what is wrong.
        errors: Vec<RecordError>,
    },
    /// An I/O error while opening or loading.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The error.
        source: io::Error,
    },
    /// An I/O error while committing (a failed fsync above all). The batch is
    /// not durable, the on-disk state of its keys is unknown, and the store
    /// refuses every later batch. Never retried.
    Fatal {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The error.
        source: io::Error,
    },
    /// The store failed earlier and refuses to write.
    Unusable {
        /// The fatal error, as text.
        cause: String,
    },
    /// Previous secrets were given without a current one
    /// ([`master_sealing`]).
    PreviousWithoutSecret,
    /// The store's writer thread could not be started.
    WriterThread {
        /// The OS error.
        source: io::Error,
    },
}

impl StoreError {
    /// Whether this error costs the leadership: the store can no longer make
    /// anything durable.
    pub fn is_fatal(&self) -> bool {
        matches!(self, StoreError::Fatal { .. } | StoreError::Unusable { .. })
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Locked { dir, holder } => {
                write!(f, "store {} is locked by another master: {holder}", dir.display())
            }
            StoreError::Damaged { dir, errors } => {
                write!(f, "store {} has {} damaged record(s): ", dir.display(), errors.len())?;
                for (i, e) in errors.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{e}")?;
                }
                Ok(())
            }
            StoreError::Io { path, action, source } => {
                write!(f, "store: {action} {} failed: {source}", path.display())
            }
            StoreError::Fatal { path, action, source } => write!(
                f,
                "store: {action} {} failed: {source} (fatal: nothing more can be made durable)",
                path.display()
            ),
            StoreError::Unusable { cause } => {
                write!(f, "store is unusable after an earlier failure: {cause}")
            }
            StoreError::PreviousWithoutSecret => f.write_str(
                "--previous-secret-file needs --secret-file: records are re-sealed under the \
                 current secret",
            ),
            StoreError::WriterThread { source } => {
                write!(f, "cannot start the store writer: {source}")
            }
        }
    }
}

crate::error::into_report!(StoreError);

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. }
            | StoreError::Fatal { source, .. }
            | StoreError::WriterThread { source } => Some(source),
            _ => None,
        }
    }
}

/// What is stored under a key, as far as conditional deletes care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Absent,
    /// Present, with the incarnation a worker record names.
    Present(Option<Incarnation>),
}

fn incarnation_of(record: &Record) -> Option<Incarnation> {
    match record {
        Record::Worker(w) => Some(w.incarnation),
        _ => None,
    }
}

/// The open, locked store directory.
#[derive(Debug)]
pub struct FsStore {
    dir: PathBuf,
    dir_handle: File,
    _lock: DirLock,
    /// What is on disk, by key (this store is the only writer: it holds the
    /// lock).
    stored: HashMap<RecordKey, Option<Incarnation>>,
    failed: Option<String>,
    fail_next_fsync: bool,
    buf: Vec<u8>,
    sealing: Sealing,
}

impl FsStore {
    /// Opens (creating if needed) the store in `dir`, locks it for `owner`
    /// (a master id; the lock file gets `pid <pid> owner <owner>`), and loads
    /// every record.
    ///
    /// Fails with [`StoreError::Locked`] if another store holds the lock,
    /// [`StoreError::Damaged`] if any record is damaged (naming each file),
    /// [`StoreError::Io`] on an I/O error. Stray temporary files are removed
    /// and reported in [`Loaded::warnings`].
    ///
    /// This is the store of a master without a cluster secret
    /// ([`Sealing::none`]): records are written unsealed and sealed ones are
    /// refused. See [`FsStore::open_with`].
    pub fn open(dir: impl AsRef<Path>, owner: &str) -> Result<(FsStore, Loaded), StoreError> {
        FsStore::open_with(dir, owner, Sealing::none())
    }

    /// [`FsStore::open`] with `sealing`: records are written sealed under its
    /// current key (if any) and checked against its keys on load; a record
    /// the sealing refuses (planted, altered, unknown key, unsealed under a
    /// secret, sealed without one) fails the open with
    /// [`StoreError::Damaged`] naming it. Records it accepts but would not
    /// write as they are (a previous key; unsealed, when it accepts those)
    /// are rewritten under the current key before this returns, and listed
    /// in [`Loaded::resealed`]; a failure doing so is returned as
    /// [`StoreError::Fatal`].
    pub fn open_with(
        dir: impl AsRef<Path>,
        owner: &str,
        sealing: Sealing,
    ) -> Result<(FsStore, Loaded), StoreError> {
        let dir = dir.as_ref().to_path_buf();
        let io = |path: &Path, action, source| StoreError::Io {
            path: path.to_path_buf(),
            action,
            source,
        };
        if !dir.is_dir() {
            fs::create_dir_all(&dir).map_err(|e| io(&dir, "create directory", e))?;
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                File::open(parent)
                    .and_then(|p| p.sync_all())
                    .map_err(|e| io(parent, "fsync directory", e))?;
            }
        }
        let holder = format!("pid {} owner {owner}", std::process::id());
        let lock = DirLock::acquire(&dir, &holder).map_err(|e| match e {
            LockError::Held(holder) => StoreError::Locked { dir: dir.clone(), holder },
            LockError::Io(path, action, source) => StoreError::Io { path, action, source },
        })?;
        let dir_handle = File::open(&dir).map_err(|e| io(&dir, "open directory", e))?;
        let mut loaded = load(&dir, &sealing)?;
        if loaded.warnings.iter().any(|w| matches!(w, Warning::StrayTemp { .. })) {
            dir_handle.sync_all().map_err(|e| io(&dir, "fsync directory", e))?;
        }
        let stored = loaded.records.iter().map(|r| (r.key(), incarnation_of(r))).collect();
        let mut store = FsStore {
            dir,
            dir_handle,
            _lock: lock,
            stored,
            failed: None,
            fail_next_fsync: false,
            buf: Vec::with_capacity(256),
            sealing,
        };
        if !loaded.resealed.is_empty() {
            let keys: Vec<&RecordKey> = loaded.resealed.iter().map(|(k, _)| k).collect();
            let batch = loaded
                .records
                .iter()
                .filter(|r| keys.contains(&&r.key()))
                .enumerate()
                .map(|(i, r)| (WriteId(i as u64), Op::Put(r.clone())))
                .collect();
            store.commit(batch)?;
            tracing::info!(
                store = %store.dir.display(),
                records = loaded.resealed.len(),
                key = ?store.sealing.current_key_id().map(|k| k.to_string()),
                "re-sealed records under the current record key"
            );
        }
        loaded.resealed.sort_by(|a, b| a.0.cmp(&b.0));
        Ok((store, loaded))
    }

    /// The sealing records are written and checked with.
    pub fn sealing(&self) -> &Sealing {
        &self.sealing
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether a fatal error made the store unusable.
    pub fn is_failed(&self) -> bool {
        self.failed.is_some()
    }

    /// How many records are stored.
    pub fn len(&self) -> usize {
        self.stored.len()
    }

    /// Whether no record is stored.
    pub fn is_empty(&self) -> bool {
        self.stored.is_empty()
    }

    /// Makes the next fsync fail, as a disk would. For tests of the fatal
    /// path only.
    #[doc(hidden)]
    pub fn inject_fsync_failure(&mut self) {
        self.fail_next_fsync = true;
    }

    /// Applies `batch` in order and makes it durable, blocking until it is
    /// (one directory fsync for the whole batch). On success every write of
    /// the batch is durable and its [`Completion`] is returned, in batch
    /// order. Only the last version of each key in the batch reaches the
    /// disk; earlier ones are superseded in order, so per-key order holds.
    ///
    /// On error nothing of the batch may be taken as durable; the error is
    /// fatal ([`StoreError::is_fatal`]) and the store refuses later batches.
    pub fn commit(&mut self, batch: Vec<(WriteId, Op)>) -> Result<Vec<Completion>, StoreError> {
        if let Some(cause) = &self.failed {
            return Err(StoreError::Unusable { cause: cause.clone() });
        }
        // Decide every write against the state as it will be after the writes
        // before it, then write only each key's final state.
        let mut overlay: HashMap<RecordKey, Slot> = HashMap::new();
        let mut finals: HashMap<RecordKey, Option<Record>> = HashMap::new();
        let mut order: Vec<RecordKey> = Vec::new();
        let mut done = Vec::with_capacity(batch.len());
        for (id, op) in batch {
            let outcome = match op {
                Op::Put(record) => {
                    let key = record.key();
                    overlay.insert(key.clone(), Slot::Present(incarnation_of(&record)));
                    if finals.insert(key.clone(), Some(record)).is_none() {
                        order.push(key);
                    }
                    Outcome::Stored
                }
                Op::Delete { key, incarnation } => {
                    let slot = overlay.get(&key).copied().unwrap_or_else(|| {
                        self.stored.get(&key).map_or(Slot::Absent, |i| Slot::Present(*i))
                    });
                    match slot {
                        Slot::Absent => Outcome::AlreadyAbsent,
                        Slot::Present(stored) if incarnation.is_some() && incarnation != stored => {
                            Outcome::IncarnationMismatch { stored }
                        }
                        Slot::Present(_) => {
                            overlay.insert(key.clone(), Slot::Absent);
                            if finals.insert(key.clone(), None).is_none() {
                                order.push(key);
                            }
                            Outcome::Deleted
                        }
                    }
                }
            };
            done.push(Completion { id, outcome });
        }
        if order.is_empty() {
            return Ok(done);
        }
        for key in &order {
            let result = match finals.remove(key).expect("every ordered key has a final") {
                Some(record) => self.write_record(key, &record),
                None => self.remove_record(key),
            };
            if let Err(e) = result {
                return Err(self.fail(e));
            }
        }
        if let Err(e) = sync(&self.dir_handle, &self.dir, &mut self.fail_next_fsync) {
            return Err(self.fail(e));
        }
        for (key, slot) in overlay {
            match slot {
                Slot::Absent => self.stored.remove(&key),
                Slot::Present(i) => self.stored.insert(key, i),
            };
        }
        Ok(done)
    }

    fn fail(&mut self, e: StoreError) -> StoreError {
        tracing::error!(error = %e, "recovery store failed; no more writes will be accepted");
        self.failed = Some(e.to_string());
        e
    }

    fn write_record(&mut self, key: &RecordKey, record: &Record) -> Result<(), StoreError> {
        let stem = key_stem(key);
        let path = self.dir.join(format!("{stem}{RECORD_EXT}"));
        let tmp = self.dir.join(format!("{stem}{RECORD_EXT}{TEMP_SUFFIX}"));
        let fatal = |path: &Path, action, source| StoreError::Fatal {
            path: path.to_path_buf(),
            action,
            source,
        };
        self.buf.clear();
        format::encode_into_with(record, &self.sealing, &mut self.buf)
            .map_err(|e| fatal(&tmp, "encode", io::Error::new(io::ErrorKind::InvalidInput, e)))?;
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| fatal(&tmp, "create", e))?;
        file.write_all(&self.buf).map_err(|e| fatal(&tmp, "write", e))?;
        sync(&file, &tmp, &mut self.fail_next_fsync)?;
        drop(file);
        fs::rename(&tmp, &path).map_err(|e| fatal(&tmp, "rename", e))
    }

    fn remove_record(&mut self, key: &RecordKey) -> Result<(), StoreError> {
        let path = self.dir.join(format!("{}{RECORD_EXT}", key_stem(key)));
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            // Already gone (removed by hand): the goal is reached.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::Fatal { path, action: "remove", source: e }),
        }
    }
}

/// fsyncs `file`; any failure is fatal. `inject` makes this one fail (tests).
fn sync(file: &File, path: &Path, inject: &mut bool) -> Result<(), StoreError> {
    let result = if std::mem::take(inject) {
        Err(io::Error::other("injected fsync failure"))
    } else {
        file.sync_all()
    };
    result.map_err(|source| StoreError::Fatal { path: path.to_path_buf(), action: "fsync", source })
}

/// Most threads reading records at open.
const MAX_READERS: usize = 8;

/// Fewest files worth a reader thread of their own.
const MIN_PER_READER: usize = 512;

/// What one reader found: the records with how each was sealed, and the
/// damaged ones.
type ReadRecords = (Vec<(Record, Seal)>, Vec<RecordError>);

/// Reads and decodes record files (`(path, file name)`) with `sealing`,
/// checking that each holds the key its name says.
fn read_records(files: &[(PathBuf, String)], sealing: &Sealing) -> Result<ReadRecords, StoreError> {
    let mut records = Vec::with_capacity(files.len());
    let mut errors = Vec::new();
    let mut buf = Vec::with_capacity(4096);
    for (path, name) in files {
        buf.clear();
        File::open(path).and_then(|mut f| f.read_to_end(&mut buf)).map_err(|e| StoreError::Io {
            path: path.clone(),
            action: "read",
            source: e,
        })?;
        let label = path.display().to_string();
        let stem = name.strip_suffix(RECORD_EXT).unwrap_or(name);
        match format::decode_named_with(&label, &buf, sealing) {
            Ok((record, seal)) if key_stem(&record.key()) == stem => records.push((record, seal)),
            Ok((record, _)) => errors.push(RecordError {
                record: label,
                damage: Damage::WrongKey {
                    stored_as: name.clone(),
                    found: record.key().to_string(),
                },
            }),
            Err(e) => errors.push(e),
        }
    }
    Ok((records, errors))
}

/// Reads every record in `dir` with `sealing`, removing stray temporary
/// files; lists in `resealed` the records to write again under the current
/// key.
fn load(dir: &Path, sealing: &Sealing) -> Result<Loaded, StoreError> {
    let io =
        |path: &Path, action, source| StoreError::Io { path: path.to_path_buf(), action, source };
    let mut entries = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io(dir, "read directory", e))? {
        let entry = entry.map_err(|e| io(dir, "read directory", e))?;
        entries.push(entry);
    }
    // Reading in inode order keeps a cold load close to sequential.
    entries.sort_by_key(std::os::unix::fs::DirEntryExt::ino);
    let mut loaded = Loaded::default();
    let mut to_read: Vec<(PathBuf, String)> = Vec::with_capacity(entries.len());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            loaded.warnings.push(Warning::UnknownFile { path });
            continue;
        };
        if name == LOCK_FILE {
            continue;
        }
        let is_file = entry.file_type().map_err(|e| io(&path, "stat", e))?.is_file();
        if name.ends_with(TEMP_SUFFIX) && is_file {
            let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
            fs::remove_file(&path).map_err(|e| io(&path, "remove stray temporary file", e))?;
            loaded.warnings.push(Warning::StrayTemp { path, len });
            continue;
        }
        if !(is_file && name.ends_with(RECORD_EXT)) {
            loaded.warnings.push(Warning::UnknownFile { path });
            continue;
        }
        to_read.push((path, name.to_owned()));
    }
    // Read in a few contiguous runs in parallel: a cold load is bound by
    // I/O latency, a warm one by syscalls; both gain from more than one
    // reader.
    let readers = (to_read.len() / MIN_PER_READER).clamp(1, MAX_READERS);
    let chunk = to_read.len().div_ceil(readers).max(1);
    let mut errors = Vec::new();
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = to_read
            .chunks(chunk)
            .map(|files| s.spawn(move || read_records(files, sealing)))
            .collect();
        handles
            .into_iter()
            // A reader only decodes; decoding never panics on any bytes.
            .map(|h| h.join().expect("record reader panicked"))
            .collect()
    });
    for result in results {
        let (records, errs) = result?;
        for (record, seal) in records {
            if sealing.needs_reseal(seal) {
                loaded.resealed.push((record.key(), seal));
            }
            loaded.records.push(record);
        }
        errors.extend(errs);
    }
    for w in &loaded.warnings {
        tracing::warn!(store = %dir.display(), "{w}");
    }
    if !errors.is_empty() {
        errors.sort_by(|a, b| a.record.cmp(&b.record));
        let err = StoreError::Damaged { dir: dir.to_path_buf(), errors };
        tracing::error!(error = %err, "recovery store is damaged");
        return Err(err);
    }
    loaded.records.sort_by_key(Record::key);
    Ok(loaded)
}

//! The directory lock: an exclusive `flock` on `<dir>/LOCK`.
//!
//! The lock is held by the open file, so it lasts as long as the
//! [`DirLock`] and goes away with the process however it dies (a killed
//! holder's lock is released by the kernel). The holder writes its pid and
//! owner name into the file so that a refused opener can name it.

use rustix::fs::{flock, FlockOperation};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The name of the lock file inside the store directory.
pub const LOCK_FILE: &str = "LOCK";

/// A held directory lock.
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

/// Why the lock was not taken.
pub(crate) enum LockError {
    /// Another open store holds it; the text is what the holder wrote.
    Held(String),
    /// The lock file could not be opened, locked or written.
    Io(PathBuf, &'static str, io::Error),
}

impl DirLock {
    /// Takes the lock without waiting, and records `holder` in the file.
    pub(crate) fn acquire(dir: &Path, holder: &str) -> Result<DirLock, LockError> {
        let path = dir.join(LOCK_FILE);
        let io_err = |what, e| LockError::Io(path.clone(), what, e);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io_err("open", e))?;
        // A lock this process just released can still be held for an instant
        // by a child forked (by another thread) before it execs: the child
        // shares the open file until exec closes it. Retry briefly before
        // calling the lock held by someone else.
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
        let mut attempt = flock(&file, FlockOperation::NonBlockingLockExclusive);
        while attempt == Err(rustix::io::Errno::WOULDBLOCK) && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
            attempt = flock(&file, FlockOperation::NonBlockingLockExclusive);
        }
        match attempt {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let text = text.trim();
                let holder = if text.is_empty() {
                    "an unknown holder (it has not written its name yet)".to_owned()
                } else {
                    text.to_owned()
                };
                return Err(LockError::Held(holder));
            }
            Err(e) => return Err(io_err("flock", e.into())),
        }
        file.set_len(0).map_err(|e| io_err("truncate", e))?;
        file.seek(SeekFrom::Start(0)).map_err(|e| io_err("seek", e))?;
        file.write_all(holder.as_bytes())
            .and_then(|()| file.write_all(b"\n"))
            .map_err(|e| io_err("write", e))?;
        Ok(DirLock { _file: file })
    }
}

//! Reading an executor's output files for the leader (`regent logs`).
//!
//! The worker node asks for a chunk of `<work_dir>/executors/<id>/stdout` or
//! `stderr` ([`regent_core::node::worker::Output::ReadLog`]); [`read_log`]
//! reads it. The executor id comes from the network, so it never becomes a
//! path by itself: it is escaped by [`names::file_name`] (no `/`, no `.` or
//! `..`, no NUL), the directory and the file are opened with `O_NOFOLLOW`
//! (a symbolic link planted by an executor is refused, never followed), and
//! only a regular file is read. So `../../etc/passwd` names the harmless
//! directory `executors/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd`, which does not
//! exist.

use super::{names, EXECUTORS_DIR};
use regent_core::limits::MAX_LOG_CHUNK;
use regent_core::protocol::{LogRead, LogStream};
use regent_core::ExecutorId;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

/// The directory holding executor `executor`'s output files (and its
/// working directory), under `work_dir`. Always a direct child of
/// `<work_dir>/executors`, whatever the id.
pub fn executor_dir(work_dir: &Path, executor: &ExecutorId) -> PathBuf {
    let name = names::file_name(executor.as_str());
    // `file_name` never yields a separator, `.` or `..`: a path escape is
    // impossible by construction; checked anyway, as this path is built
    // from network input.
    debug_assert!(!name.contains('/') && name != "." && name != "..");
    work_dir.join(EXECUTORS_DIR).join(name)
}

/// Reads at most `max` bytes (capped at [`MAX_LOG_CHUNK`]) of `executor`'s
/// `stream` file under `work_dir`: from `offset`, or the last `max` bytes
/// when `offset` is `None`. The chunk never goes past the size the file had
/// when it was opened (`offset + data.len() <= size`); an offset past the
/// end gives no bytes. Failures come back as [`LogRead::Failed`] naming
/// the file and the error, never as a panic.
pub fn read_log(
    work_dir: &Path,
    executor: &ExecutorId,
    stream: LogStream,
    offset: Option<u64>,
    max: u32,
) -> LogRead {
    let dir = executor_dir(work_dir, executor);
    let path = dir.join(stream.file_name());
    match read_chunk(&dir, stream, offset, max.min(MAX_LOG_CHUNK)) {
        Ok((offset, data, size)) => LogRead::Chunk { offset, data, size },
        Err(Errno::NOENT) => LogRead::Failed {
            reason: format!(
                "no {} file for executor {executor} in this worker's work directory ({})",
                stream.file_name(),
                path.display()
            ),
        },
        Err(Errno::LOOP) | Err(Errno::NOTDIR) => LogRead::Failed {
            reason: format!(
                "{} is a symbolic link or not a regular file; it is not read",
                path.display()
            ),
        },
        Err(e) => LogRead::Failed { reason: format!("cannot read {}: {e}", path.display()) },
    }
}

fn read_chunk(
    dir: &Path,
    stream: LogStream,
    offset: Option<u64>,
    max: u32,
) -> Result<(u64, Vec<u8>, u64), Errno> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = rustix::fs::open(dir, flags | OFlags::DIRECTORY, Mode::empty())?;
    let fd = rustix::fs::openat(&dir, stream.file_name(), flags | OFlags::NONBLOCK, Mode::empty())?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
    if !meta.is_file() {
        return Err(Errno::NOTDIR);
    }
    let size = meta.len();
    let start = offset.unwrap_or_else(|| size.saturating_sub(u64::from(max)));
    let len = size.saturating_sub(start).min(u64::from(max)) as usize;
    let mut data = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match file.read_at(&mut data[got..], start + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Errno::from_io_error(&e).unwrap_or(Errno::IO)),
        }
    }
    data.truncate(got);
    Ok((start, data, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, ExecutorId) {
        let dir = tempfile::tempdir().unwrap();
        let id = ExecutorId::new("fw/g#0#1.2");
        let exec = executor_dir(dir.path(), &id);
        std::fs::create_dir_all(&exec).unwrap();
        std::fs::write(exec.join("stdout"), b"hello\nworld\n").unwrap();
        (dir, id)
    }

    #[test]
    fn reads_from_an_offset_and_the_tail() {
        let (dir, id) = setup();
        let read = read_log(dir.path(), &id, LogStream::Stdout, Some(0), 5);
        assert_eq!(read, LogRead::Chunk { offset: 0, data: b"hello".to_vec(), size: 12 });
        let read = read_log(dir.path(), &id, LogStream::Stdout, Some(6), 100);
        assert_eq!(read, LogRead::Chunk { offset: 6, data: b"world\n".to_vec(), size: 12 });
        let read = read_log(dir.path(), &id, LogStream::Stdout, None, 6);
        assert_eq!(read, LogRead::Chunk { offset: 6, data: b"world\n".to_vec(), size: 12 });
        let read = read_log(dir.path(), &id, LogStream::Stdout, Some(50), 6);
        assert_eq!(read, LogRead::Chunk { offset: 50, data: vec![], size: 12 });
    }

    #[test]
    fn a_missing_file_or_a_path_escape_is_refused_by_name() {
        let (dir, id) = setup();
        let LogRead::Failed { reason } = read_log(dir.path(), &id, LogStream::Stderr, None, 10)
        else {
            panic!("no stderr file")
        };
        assert!(reason.contains("no stderr file for executor fw/g#0#1.2"), "{reason}");
        // A file outside the executors directory that an escape would hit.
        std::fs::write(dir.path().join("secret"), b"no").unwrap();
        for evil in ["../secret", "../../etc/passwd", "..", ".", "/etc/passwd"] {
            let read = read_log(dir.path(), &ExecutorId::new(evil), LogStream::Stdout, None, 10);
            assert!(matches!(read, LogRead::Failed { .. }), "{evil}: {read:?}");
            let path = executor_dir(dir.path(), &ExecutorId::new(evil));
            assert_eq!(path.parent().unwrap(), dir.path().join(EXECUTORS_DIR), "{evil}");
        }
    }

    #[test]
    fn symbolic_links_are_not_followed() {
        let (dir, id) = setup();
        std::fs::write(dir.path().join("secret"), b"no").unwrap();
        let exec = executor_dir(dir.path(), &id);
        std::os::unix::fs::symlink(dir.path().join("secret"), exec.join("stderr")).unwrap();
        let LogRead::Failed { reason } = read_log(dir.path(), &id, LogStream::Stderr, None, 10)
        else {
            panic!("a link must not be followed")
        };
        assert!(reason.contains("symbolic link"), "{reason}");
        // A linked executor directory is refused too.
        let other = ExecutorId::new("linked");
        std::os::unix::fs::symlink(&exec, executor_dir(dir.path(), &other)).unwrap();
        let read = read_log(dir.path(), &other, LogStream::Stdout, None, 10);
        assert!(matches!(read, LogRead::Failed { .. }), "{read:?}");
    }
}

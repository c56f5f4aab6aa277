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

use super::{names, rotate, EXECUTORS_DIR};
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
/// `stream` under `work_dir`: from `offset`, or the last `max` bytes when
/// `offset` is `None`. Offsets and `size` are positions in the whole stream,
/// across its rotated files ([`rotate`]); an offset before the oldest kept
/// byte reads from there (the chunk's offset says where). The chunk never
/// goes past the size the stream had when it was opened
/// (`offset + data.len() <= size`); an offset past the end gives no bytes. Failures come back as [`LogRead::Failed`] naming
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

/// The most rotated files looked at (far more than `--executor-log-files`
/// allows).
const MAX_ROTATED: u32 = 1000;

/// Opens `name` in `dir` for reading: a regular file, never through a link.
fn open_regular(dir: &impl rustix::fd::AsFd, name: &str) -> Result<File, Errno> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let file = File::from(rustix::fs::openat(dir, name, flags, Mode::empty())?);
    let meta = file.metadata().map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
    if !meta.is_file() {
        return Err(Errno::NOTDIR);
    }
    Ok(file)
}

/// The `<name>.start` record ([`rotate::start_record`]), read through `dir`.
fn start_record(dir: &impl rustix::fd::AsFd, name: &str) -> Option<(u64, u64)> {
    let mut text = String::new();
    let mut f = open_regular(dir, &format!("{name}{}", rotate::START_SUFFIX)).ok()?;
    std::io::Read::read_to_string(&mut f, &mut text).ok()?;
    let (start, inode) = text.trim().split_once(' ')?;
    Some((start.parse().ok()?, inode.parse().ok()?))
}

/// One file of a stream and where it starts in the whole stream.
struct Segment {
    start: u64,
    len: u64,
    file: File,
}

/// The files of `name` (the rotated ones first, oldest first), each placed
/// in the whole stream ([`rotate`]). Retried while a rotation is half done.
fn segments(dir: &impl rustix::fd::AsFd, name: &str) -> Result<Vec<Segment>, Errno> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = |f: &File| f.metadata().map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO));
    let mut attempt = 0;
    loop {
        attempt += 1;
        let current = open_regular(dir, name)?;
        let m = meta(&current)?;
        let record = start_record(dir, name);
        let start = match record {
            None => 0,
            Some((start, inode)) if inode == m.ino() => start,
            // The files moved on and the record is not written yet.
            Some(_) if attempt < 20 => {
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            }
            Some((start, _)) => start,
        };
        let mut segs = vec![Segment { start, len: m.len(), file: current }];
        let mut at = start;
        for n in 1..=MAX_ROTATED {
            match open_regular(dir, &format!("{name}.{n}")) {
                Ok(file) => {
                    let len = meta(&file)?.len();
                    at = at.saturating_sub(len);
                    segs.push(Segment { start: at, len, file });
                }
                Err(Errno::NOENT) => break,
                Err(e) => return Err(e),
            }
        }
        // A rotation while the files were opened shifted them: again.
        if start_record(dir, name) != record && attempt < 20 {
            continue;
        }
        segs.reverse();
        return Ok(segs);
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
    let segs = segments(&dir, stream.file_name())?;
    let last = segs.last().ok_or(Errno::NOENT)?;
    let size = last.start + last.len;
    let earliest = segs.first().map_or(0, |s| s.start);
    let start = offset.unwrap_or_else(|| size.saturating_sub(u64::from(max)));
    // Bytes of deleted files are gone: from the oldest kept one.
    let start = start.max(earliest);
    let end = size.min(start.saturating_add(u64::from(max)));
    let mut data = Vec::with_capacity(end.saturating_sub(start) as usize);
    for seg in &segs {
        let (from, to) = (start.max(seg.start), end.min(seg.start + seg.len));
        if from >= to {
            continue;
        }
        let at = data.len();
        data.resize(at + (to - from) as usize, 0);
        let mut got = 0;
        while at + got < data.len() {
            match seg.file.read_at(&mut data[at + got..], from - seg.start + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Errno::from_io_error(&e).unwrap_or(Errno::IO)),
            }
        }
        data.truncate(at + got);
        if got < (to - from) as usize {
            // The file is shorter than it was (truncated meanwhile).
            break;
        }
    }
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
    fn reads_span_rotated_files_with_offsets_in_the_whole_stream() {
        use crate::exec::rotate::{RotatingFile, Rotation};
        let dir = tempfile::tempdir().unwrap();
        let id = ExecutorId::new("chatty");
        let exec = executor_dir(dir.path(), &id);
        std::fs::create_dir_all(&exec).unwrap();
        let rotation = Rotation { max_bytes: 10, files: 3 };
        let mut out = RotatingFile::open(&exec.join("stdout"), rotation).unwrap();
        // 45 bytes: "00".."44" as digits of one stream, in writes of 7.
        let stream: Vec<u8> = (0..45u8).map(|i| b'a' + i % 26).collect();
        for chunk in stream.chunks(7) {
            out.write_all(chunk).unwrap();
        }
        let on_disk: u64 = std::fs::read_dir(&exec)
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name().to_string_lossy().starts_with("stdout")
                    && !e.file_name().to_string_lossy().ends_with(".start")
            })
            .map(|e| e.metadata().unwrap().len())
            .sum();
        assert_eq!(on_disk, 25, "3 files of at most 10 bytes: 10 + 10 + 5");
        assert!(!exec.join("stdout.3").exists());
        // The tail spans files and is the newest bytes.
        let read = read_log(dir.path(), &id, LogStream::Stdout, None, 12);
        assert_eq!(read, LogRead::Chunk { offset: 33, data: stream[33..].to_vec(), size: 45 });
        // From the start: the oldest kept byte is 20 (bytes 0..20 are gone).
        let read = read_log(dir.path(), &id, LogStream::Stdout, Some(0), 100);
        assert_eq!(read, LogRead::Chunk { offset: 20, data: stream[20..].to_vec(), size: 45 });
        // A follower at offset 38 goes on across the next rotation.
        let read = read_log(dir.path(), &id, LogStream::Stdout, Some(38), 100);
        assert_eq!(read, LogRead::Chunk { offset: 38, data: stream[38..].to_vec(), size: 45 });
        out.write_all(b"0123456789AB").unwrap();
        let read = read_log(dir.path(), &id, LogStream::Stdout, Some(45), 100);
        assert_eq!(read, LogRead::Chunk { offset: 45, data: b"0123456789AB".to_vec(), size: 57 });
        // A reopened file (a restarted shim) goes on from the record.
        drop(out);
        let mut again = RotatingFile::open(&exec.join("stdout"), rotation).unwrap();
        again.write_all(b"xyz").unwrap();
        let read = read_log(dir.path(), &id, LogStream::Stdout, Some(57), 100);
        assert_eq!(read, LogRead::Chunk { offset: 57, data: b"xyz".to_vec(), size: 60 });
    }

    #[test]
    fn one_file_rotation_keeps_only_the_newest_bytes() {
        use crate::exec::rotate::{RotatingFile, Rotation};
        let dir = tempfile::tempdir().unwrap();
        let id = ExecutorId::new("one");
        let exec = executor_dir(dir.path(), &id);
        std::fs::create_dir_all(&exec).unwrap();
        let mut out =
            RotatingFile::open(&exec.join("stderr"), Rotation { max_bytes: 4, files: 1 }).unwrap();
        out.write_all(b"abcdefghij").unwrap();
        let read = read_log(dir.path(), &id, LogStream::Stderr, Some(0), 100);
        assert_eq!(read, LogRead::Chunk { offset: 8, data: b"ij".to_vec(), size: 10 });
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

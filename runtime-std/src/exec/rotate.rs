//! Executors' output rotated by size, so a chatty executor cannot fill the
//! worker's disk (`regent worker --executor-log-max-bytes`, default 64 MiB,
//! and `--executor-log-files`, default 5).
//!
//! ```text
//! executors/<id>/stdout          the newest bytes (at most max_bytes)
//! executors/<id>/stdout.1        the file before it
//! executors/<id>/stdout.<n-1>    the oldest kept; n files in all
//! executors/<id>/stdout.start    where `stdout` starts in the whole stream
//! ```
//!
//! The executor's shim ([`super::shim`]) gives the command pipes for stdout
//! and stderr and copies them into a [`RotatingFile`] each: a write that
//! would take the file past `max_bytes` fills it to exactly `max_bytes`,
//! then the files shift by one (the oldest is deleted), the start of the
//! new `stdout` in the whole stream is written to `stdout.start`, and the
//! rest goes into a new `stdout`. So at most `files × max_bytes` bytes per
//! stream are on disk.
//!
//! Offsets are positions in the whole stream since the executor started,
//! not in one file: [`super::logs::read_log`] reads across the files, and
//! a follower (`regent logs --follow`) that asks for the next offset after
//! a rotation gets the bytes that follow, from whichever file holds them.
//! Bytes of files already deleted are gone: a read from before the oldest
//! kept file starts at the oldest kept byte (the chunk's offset says
//! where).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// The default most bytes of one output file.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;
/// The default number of files per stream (the current one included).
pub const DEFAULT_FILES: u32 = 5;
/// The suffix of the file holding where the current file starts.
pub const START_SUFFIX: &str = ".start";

/// How an executor's output files are rotated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// The most bytes of one file (at least 1).
    pub max_bytes: u64,
    /// The most files per stream, the current one included (at least 1;
    /// 1: the file is emptied at each rotation).
    pub files: u32,
}

impl Default for Rotation {
    /// [`DEFAULT_MAX_BYTES`] per file, [`DEFAULT_FILES`] files.
    fn default() -> Self {
        Rotation { max_bytes: DEFAULT_MAX_BYTES, files: DEFAULT_FILES }
    }
}

/// `path` with `.n` appended (`stdout.2`); `n = 0` is `path` itself.
pub fn numbered(path: &Path, n: u32) -> PathBuf {
    if n == 0 {
        return path.to_owned();
    }
    let mut p = path.as_os_str().to_owned();
    p.push(format!(".{n}"));
    PathBuf::from(p)
}

fn start_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(START_SUFFIX);
    PathBuf::from(p)
}

/// Where the current file `path` starts in the whole stream (0 before the
/// first rotation, or without a readable `.start` file).
pub fn start_of(path: &Path) -> u64 {
    start_record(path).map_or(0, |(start, _)| start)
}

/// An output file that rotates itself by [`Rotation`].
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    file: File,
    /// The current file's size.
    size: u64,
    /// Where the current file starts in the whole stream.
    start: u64,
}

impl RotatingFile {
    /// Opens (appends to) `path`, going on from what an earlier run left.
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<RotatingFile> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let size = file.metadata()?.len();
        let rotation =
            Rotation { max_bytes: rotation.max_bytes.max(1), files: rotation.files.max(1) };
        Ok(RotatingFile { path: path.to_owned(), rotation, file, size, start: start_of(path) })
    }

    /// Appends `data`, rotating whenever the current file is full.
    pub fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            if self.size >= self.rotation.max_bytes {
                self.rotate()?;
            }
            let room = (self.rotation.max_bytes - self.size).min(data.len() as u64) as usize;
            self.file.write_all(&data[..room])?;
            self.size += room as u64;
            data = &data[room..];
        }
        Ok(())
    }

    /// Shifts the files by one (the oldest is deleted) and starts a new
    /// current file.
    fn rotate(&mut self) -> io::Result<()> {
        let last = self.rotation.files - 1;
        let gone_ok = |r: io::Result<()>| match r {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        if last == 0 {
            // One file: a new one replaces it.
            fs::remove_file(&self.path)?;
        } else {
            gone_ok(fs::remove_file(numbered(&self.path, last)))?;
            for n in (1..last).rev() {
                gone_ok(fs::rename(numbered(&self.path, n), numbered(&self.path, n + 1)))?;
            }
            fs::rename(&self.path, numbered(&self.path, 1))?;
        }
        self.start += self.size;
        self.file = OpenOptions::new().create(true).append(true).open(&self.path)?;
        self.size = 0;
        let inode = std::os::unix::fs::MetadataExt::ino(&self.file.metadata()?);
        write_start(&self.path, self.start, inode)
    }
}

/// Records that the file `path` with this inode starts at `start` in the
/// whole stream (`<start> <inode>`, replaced atomically). The inode tells a
/// reader whether the record is the current file's or a rotation is half
/// done.
fn write_start(path: &Path, start: u64, inode: u64) -> io::Result<()> {
    let target = start_path(path);
    let mut tmp = target.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, format!("{start} {inode}\n"))?;
    fs::rename(&tmp, &target)
}

/// What the `.start` file of `path` says: where the current file starts in
/// the whole stream and its inode (`None`: never rotated, or unreadable).
pub fn start_record(path: &Path) -> Option<(u64, u64)> {
    let text = fs::read_to_string(start_path(path)).ok()?;
    let (start, inode) = text.trim().split_once(' ')?;
    Some((start.parse().ok()?, inode.parse().ok()?))
}

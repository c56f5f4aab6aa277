//! Artifacts: the files a group's executors need, fetched by the worker into
//! each executor's directory before its process starts
//! ([`regent_core::launch::Artifact`]; the job file's `[[group.artifacts]]`).
//!
//! * **Fetch**: `http://` and `https://` with `ureq` (a blocking client:
//!   launches already run on a blocking thread), `file:///` from the local
//!   file system. Connect timeout 30 s, the whole fetch at most 10 min; a
//!   body larger than the cache's cap is refused as it streams.
//! * **Digest**: SHA-256 over the bytes as they stream into a temporary
//!   file in the cache; a mismatch deletes it and fails the executor with
//!   both digests named. Nothing unchecked is ever installed or run.
//! * **Cache**: `<work_dir>/artifact-cache/<sha256>`, one file per digest,
//!   shared by every executor on the worker: an artifact fetched once
//!   serves every later executor of any group with that digest (one lock
//!   per digest, so executors launched together fetch it once). Using a
//!   file refreshes its modification time; past the cap
//!   ([`ArtifactCache::new`]) the least recently used files go, never the
//!   one just added. A crashed fetch leaves a `.part` file, removed when
//!   the cache opens.
//! * **Install**: into `<executor dir>/<dest>/`: the file itself (hard
//!   linked from the cache, copied across file systems; mode 0755 so a
//!   fetched program runs) under the last segment of its URL, or, with
//!   `unpack`, the archive's contents (`.tar.gz`/`.tgz`, `.tar`, `.zip`).
//! * **No path escape**: every entry of an archive is checked before
//!   anything is written; an absolute path, a `..` component, or a link
//!   whose target is absolute or climbs with `..` refuses the whole
//!   artifact, naming the entry. A zip's symbolic links are refused.

use regent_core::launch::{is_inside, ArchiveKind, Artifact};
use sha2::{Digest as _, Sha256};
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How long a fetch may take to connect.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one whole fetch may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(600);
/// The default cap of a worker's artifact cache: 1 GiB.
pub const DEFAULT_CACHE_BYTES: u64 = 1 << 30;
/// The cache's directory under a worker's work directory.
pub const CACHE_DIR: &str = "artifact-cache";

/// Why an artifact could not be installed; every variant names the
/// artifact's source.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// The cache directory cannot be made or read.
    #[error("artifact cache {}: {source}", dir.display())]
    Cache {
        /// The cache directory.
        dir: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The source could not be fetched (refused, not found, an HTTP error).
    #[error("artifact {url}: cannot fetch it: {reason}")]
    Fetch {
        /// The artifact's source.
        url: String,
        /// Why, as the client or the file system says.
        reason: String,
    },
    /// The body is larger than the cache may hold.
    #[error("artifact {url}: larger than the artifact cache's cap of {cap} bytes")]
    TooLarge {
        /// The artifact's source.
        url: String,
        /// The cap.
        cap: u64,
    },
    /// What was fetched is not what the group declared.
    #[error("artifact {url}: sha256 mismatch: expected {expected}, received {received}")]
    DigestMismatch {
        /// The artifact's source.
        url: String,
        /// The declared digest.
        expected: String,
        /// The digest of what was fetched.
        received: String,
    },
    /// The declared digest is not 64 hexadecimal digits (the master refuses
    /// such a declaration; a worker does not rely on it): nothing fetched.
    #[error("artifact {url}: sha256 {digest:?} is not 64 hexadecimal digits; nothing was fetched")]
    BadDigest {
        /// The artifact's source.
        url: String,
        /// The digest as declared.
        digest: String,
    },
    /// An archive entry would land outside its destination.
    #[error("artifact {url}: archive entry {entry:?} would escape the executor directory (absolute, \"..\" or a link out); nothing was unpacked")]
    Escape {
        /// The artifact's source.
        url: String,
        /// The entry's path (or link target) as the archive has it.
        entry: String,
    },
    /// The archive cannot be read.
    #[error("artifact {url}: cannot unpack it: {reason}")]
    Unpack {
        /// The artifact's source.
        url: String,
        /// Why.
        reason: String,
    },
    /// `dest` is not inside the executor directory.
    #[error("artifact {url}: dest {dest:?} is not inside the executor directory")]
    Dest {
        /// The artifact's source.
        url: String,
        /// The destination as given.
        dest: String,
    },
    /// Writing the file or its directory failed.
    #[error("artifact {url}: {}: {source}", path.display())]
    Io {
        /// The artifact's source.
        url: String,
        /// The path being written.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

/// A worker's cache of fetched artifacts, by digest (see the module
/// documentation). Shared by every launch on the worker.
#[derive(Debug)]
pub struct ArtifactCache {
    dir: PathBuf,
    cap_bytes: u64,
    /// One lock per digest being fetched or used.
    locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    agent: ureq::Agent,
}

impl ArtifactCache {
    /// The cache in `dir` (created if missing; `.part` files a crash left
    /// removed), holding at most `cap_bytes`.
    pub fn new(dir: impl Into<PathBuf>, cap_bytes: u64) -> Result<Self, ArtifactError> {
        let dir = dir.into();
        let cache_err = |source| ArtifactError::Cache { dir: dir.clone(), source };
        fs::create_dir_all(&dir).map_err(cache_err)?;
        for e in fs::read_dir(&dir).map_err(cache_err)? {
            let path = e.map_err(cache_err)?.path();
            if path.extension().is_some_and(|x| x == "part") {
                let _ = fs::remove_file(&path);
            }
        }
        let agent = ureq::Agent::config_builder()
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(FETCH_TIMEOUT))
            .build()
            .into();
        Ok(ArtifactCache { dir, cap_bytes, locks: Mutex::new(HashMap::new()), agent })
    }

    /// Where the cache keeps its files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Fetches (or finds in the cache) every artifact and installs it into
    /// `exec_dir` (created if missing), in order; the first failure stops
    /// and is returned.
    pub fn install(&self, artifacts: &[Artifact], exec_dir: &Path) -> Result<(), ArtifactError> {
        for a in artifacts {
            if !is_inside(&a.dest) {
                return Err(ArtifactError::Dest { url: a.source.clone(), dest: a.dest.clone() });
            }
            let target = exec_dir.join(&a.dest);
            fs::create_dir_all(&target).map_err(|source| ArtifactError::Io {
                url: a.source.clone(),
                path: target.clone(),
                source,
            })?;
            // The digest's lock covers the fetch only: installing into this
            // executor's own directory needs no other to wait.
            let cached = {
                let lock = self.lock_for(&a.sha256);
                let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
                self.fetch(a)?
            };
            match (a.unpack, ArchiveKind::of(&a.source)) {
                (true, Some(kind)) => unpack(&a.source, &cached, kind, &target)?,
                (true, None) => {
                    return Err(ArtifactError::Unpack {
                        url: a.source.clone(),
                        reason: "its name ends in none of .tar.gz, .tgz, .tar, .zip".into(),
                    })
                }
                (false, _) => place(&a.source, &cached, &target)?,
            }
        }
        Ok(())
    }

    fn lock_for(&self, digest: &str) -> Arc<Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        locks.entry(digest.to_owned()).or_default().clone()
    }

    /// The cached file of `a`, fetched and checked first if it is not
    /// there (the caller holds the digest's lock).
    fn fetch(&self, a: &Artifact) -> Result<PathBuf, ArtifactError> {
        let url = || a.source.clone();
        let digest_ok = a.sha256.len() == 64 && a.sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !digest_ok {
            // The master refuses such a digest; a worker does not trust that
            // (it names a file in the cache).
            return Err(ArtifactError::BadDigest { url: url(), digest: a.sha256.clone() });
        }
        let path = self.dir.join(a.sha256.to_ascii_lowercase());
        if path.is_file() {
            // In use: the newest for the eviction's order.
            if let Ok(f) = File::options().append(true).open(&path) {
                let _ = f.set_modified(SystemTime::now());
            }
            return Ok(path);
        }
        let part = self.dir.join(format!("{}.{}.part", a.sha256, std::process::id()));
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ArtifactError::Io { url: a.source.clone(), path, source }
        };
        let mut out = File::create(&part).map_err(io_err(&part))?;
        let result = self.copy_source(a, &mut out);
        let received = match result.and_then(|d| out.sync_all().map(|()| d).map_err(io_err(&part)))
        {
            Ok(d) => d,
            Err(e) => {
                let _ = fs::remove_file(&part);
                return Err(e);
            }
        };
        drop(out);
        if !received.eq_ignore_ascii_case(&a.sha256) {
            let _ = fs::remove_file(&part);
            return Err(ArtifactError::DigestMismatch {
                url: url(),
                expected: a.sha256.clone(),
                received,
            });
        }
        fs::rename(&part, &path).map_err(io_err(&path))?;
        self.evict(&path);
        Ok(path)
    }

    /// Streams `a`'s source into `out`, hashing it; its SHA-256 in hex.
    fn copy_source(&self, a: &Artifact, out: &mut File) -> Result<String, ArtifactError> {
        let url = &a.source;
        let fetch_err = |reason: String| ArtifactError::Fetch { url: url.clone(), reason };
        let mut reader: Box<dyn Read> = if let Some(path) = url.strip_prefix("file://") {
            Box::new(File::open(path).map_err(|e| fetch_err(format!("{path}: {e}")))?)
        } else if url.starts_with("http://") || url.starts_with("https://") {
            let response = self.agent.get(url).call().map_err(|e| fetch_err(e.to_string()))?;
            Box::new(response.into_body().into_reader())
        } else {
            return Err(fetch_err("only http://, https:// and file:// sources are fetched".into()));
        };
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(fetch_err(e.to_string())),
            };
            total += n as u64;
            if total > self.cap_bytes {
                return Err(ArtifactError::TooLarge { url: url.clone(), cap: self.cap_bytes });
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(|source| ArtifactError::Io {
                url: url.clone(),
                path: self.dir.clone(),
                source,
            })?;
        }
        Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Removes the least recently used files until the cache is within its
    /// cap, never `keep`.
    fn evict(&self, keep: &Path) {
        let Ok(entries) = fs::read_dir(&self.dir) else { return };
        let mut files: Vec<(SystemTime, u64, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                let name = e.file_name();
                let cached = name.len() == 64 && m.is_file();
                cached.then(|| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
        files.sort();
        for (_, len, path) in files {
            if total <= self.cap_bytes {
                break;
            }
            if path == keep {
                continue;
            }
            // A file in use by a running executor stays there: installs
            // are hard links or copies, not the cache's file.
            if fs::remove_file(&path).is_ok() {
                total = total.saturating_sub(len);
            }
        }
    }
}

/// The name a placed file gets: the last segment of its URL's path.
fn file_name(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    match path.rsplit('/').next() {
        Some(name) if !name.is_empty() && name != "." && name != ".." => name.to_owned(),
        _ => "artifact".to_owned(),
    }
}

/// Places the cached file in `target` under its URL's name, executable.
fn place(url: &str, cached: &Path, target: &Path) -> Result<(), ArtifactError> {
    let path = target.join(file_name(url));
    let err = |source| ArtifactError::Io { url: url.to_owned(), path: path.clone(), source };
    match fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(err(e)),
        _ => {}
    }
    // A copy, not a link: the executor may change its file, and the cache's
    // must stay what its digest says.
    fs::copy(cached, &path).map_err(err)?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).map_err(err)
}

/// Whether a path from an archive stays inside the directory it is
/// unpacked in: relative, no `..`.
fn stays_inside(path: &Path) -> bool {
    path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

fn unpack(url: &str, cached: &Path, kind: ArchiveKind, target: &Path) -> Result<(), ArtifactError> {
    let unpack_err = |reason: String| ArtifactError::Unpack { url: url.to_owned(), reason };
    let open = || File::open(cached).map_err(|e| unpack_err(e.to_string()));
    match kind {
        ArchiveKind::Zip => {
            let mut zip = zip::ZipArchive::new(open()?).map_err(|e| unpack_err(e.to_string()))?;
            // Every name first: nothing is written from an archive that
            // holds one bad entry.
            for i in 0..zip.len() {
                let f = zip.by_index(i).map_err(|e| unpack_err(e.to_string()))?;
                let raw = String::from_utf8_lossy(f.name_raw()).into_owned();
                if f.is_symlink() || f.enclosed_name().is_none_or(|p| !stays_inside(&p)) {
                    return Err(ArtifactError::Escape { url: url.to_owned(), entry: raw });
                }
            }
            for i in 0..zip.len() {
                let mut f = zip.by_index(i).map_err(|e| unpack_err(e.to_string()))?;
                let Some(rel) = f.enclosed_name() else { unreachable!("checked above") };
                let path = target.join(rel);
                let err =
                    |source| ArtifactError::Io { url: url.to_owned(), path: path.clone(), source };
                if f.is_dir() {
                    fs::create_dir_all(&path).map_err(err)?;
                    continue;
                }
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent).map_err(err)?;
                }
                let mut out = File::create(&path).map_err(err)?;
                io::copy(&mut f, &mut out).map_err(err)?;
                if let Some(mode) = f.unix_mode() {
                    fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o777))
                        .map_err(err)?;
                }
            }
            Ok(())
        }
        ArchiveKind::Tar | ArchiveKind::TarGz => {
            let reader = |file: File| -> Box<dyn Read> {
                match kind {
                    ArchiveKind::TarGz => Box::new(flate2::read::GzDecoder::new(file)),
                    _ => Box::new(file),
                }
            };
            // Pass one: every entry's path and link target.
            let mut archive = tar::Archive::new(reader(open()?));
            for entry in archive.entries().map_err(|e| unpack_err(e.to_string()))? {
                let entry = entry.map_err(|e| unpack_err(e.to_string()))?;
                let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
                let path = entry.path().map_err(|e| unpack_err(e.to_string()))?;
                if !stays_inside(&path) {
                    return Err(ArtifactError::Escape { url: url.to_owned(), entry: raw });
                }
                if let Some(link) = entry.link_name().map_err(|e| unpack_err(e.to_string()))? {
                    let climbs = !stays_inside(&link);
                    // A symbolic link is read from where it sits; a hard
                    // link's target from the archive's root.
                    if climbs {
                        let entry = format!("{raw} -> {}", link.display());
                        return Err(ArtifactError::Escape { url: url.to_owned(), entry });
                    }
                }
            }
            // Pass two: unpack (tar's own `unpack_in` refuses escapes too).
            let mut archive = tar::Archive::new(reader(open()?));
            archive.set_preserve_permissions(true);
            for entry in archive.entries().map_err(|e| unpack_err(e.to_string()))? {
                let mut entry = entry.map_err(|e| unpack_err(e.to_string()))?;
                let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
                let inside =
                    entry.unpack_in(target).map_err(|e| unpack_err(format!("{raw}: {e}")))?;
                if !inside {
                    return Err(ArtifactError::Escape { url: url.to_owned(), entry: raw });
                }
            }
            Ok(())
        }
    }
}

//! Cleaning the work directory: the directories of executors that ended
//! (`<work_dir>/executors/<name>`, their output included) are removed once
//! older than a time to live (`regent worker --work-dir-ttl`, default 7
//! days, as Spark's `spark.worker.cleanup.appDataTtl`), and, oldest first,
//! while the work directory's file system is fuller than a bound
//! (`--work-dir-max-used`, default 90 %).
//!
//! Never removed: the directory of an executor that runs (supervised by
//! this process), that a running record names (`<work_dir>/running/`: a
//! re-adoptable executor, or one being recorded), whose artifacts are being
//! fetched, or that changed within the last [`MIN_AGE`] or time to live,
//! whichever is shorter (one being created). An executor's age is the newest modification time of its
//! directory and of the files directly in it (`stdout`, `stderr`).

use super::{lock, record, Supervisor, EXECUTORS_DIR};
use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A directory that changed more recently than this (or than the time to
/// live, if shorter) is never removed.
pub const MIN_AGE: Duration = Duration::from_secs(60);

/// The default time to live of an ended executor's directory.
pub const DEFAULT_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The default bound on how full the work directory's file system may be
/// before ended executors' directories go, oldest first, in percent.
pub const DEFAULT_MAX_USED_PCT: u8 = 90;

/// What the cleaning removes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcPolicy {
    /// An ended executor's directory older than this goes.
    pub ttl: Duration,
    /// While the file system is fuller than this (percent of its blocks
    /// used), ended executors' directories go, oldest first; 100: never
    /// for space.
    pub max_used_pct: u8,
}

impl Default for GcPolicy {
    fn default() -> Self {
        GcPolicy { ttl: DEFAULT_TTL, max_used_pct: DEFAULT_MAX_USED_PCT }
    }
}

/// What one cleaning did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// The directories removed, with why (`older than the ttl` or `the
    /// file system was N % full`).
    pub removed: Vec<(PathBuf, String)>,
    /// Directories that could not be removed, with the error.
    pub failed: Vec<(PathBuf, String)>,
    /// How full the file system was after, in percent (if known).
    pub used_pct: Option<u8>,
}

/// How full the file system holding `path` is, in percent of its blocks
/// (as `df` counts: used over used plus available to unprivileged users).
pub fn used_pct(path: &Path) -> Option<u8> {
    let st = rustix::fs::statvfs(path).ok()?;
    let used = st.f_blocks.saturating_sub(st.f_bfree);
    let total = used.saturating_add(st.f_bavail);
    if total == 0 {
        return Some(0);
    }
    Some(((used as u128 * 100).div_ceil(total as u128)).min(100) as u8)
}

/// The bytes free to unprivileged users and the size of the file system
/// holding `path` (as `df` shows them).
pub fn space(path: &Path) -> Option<(u64, u64)> {
    let st = rustix::fs::statvfs(path).ok()?;
    Some((st.f_bavail.saturating_mul(st.f_frsize), st.f_blocks.saturating_mul(st.f_frsize)))
}

/// The newest modification time of `dir` and the files directly in it.
fn last_change(dir: &Path) -> Option<SystemTime> {
    let mut newest = fs::symlink_metadata(dir).ok()?.modified().ok()?;
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                newest = newest.max(t);
            }
        }
    }
    Some(newest)
}

impl Supervisor {
    /// Removes ended executors' directories by `policy` (see the module
    /// documentation), `now` being the wall clock. Blocking (it walks the
    /// directories); a worker runs it on a thread of its own every so often
    /// (the worker host's `spawn_work_dir_gc`).
    pub fn collect_garbage(&self, policy: GcPolicy, now: SystemTime) -> GcReport {
        let work = &self.shared.config.work_dir;
        let mut protected: HashSet<String> = {
            let executors = lock(&self.shared.executors);
            let preparing = lock(&self.shared.preparing);
            executors
                .keys()
                .chain(preparing.keys())
                .map(|id| super::names::file_name(id.as_str()))
                .collect()
        };
        // Records (committed, being written, or set aside as damaged) name
        // executors that may run: their directories stay.
        if let Ok(entries) = fs::read_dir(&self.shared.running_dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let stem = name
                    .strip_suffix(record::CORRUPT_SUFFIX)
                    .or_else(|| name.strip_suffix(record::TEMP_SUFFIX))
                    .unwrap_or(&name);
                let stem = stem.strip_suffix(record::RECORD_EXT).unwrap_or(stem);
                protected.insert(stem.to_owned());
            }
        }
        let mut ended: Vec<(SystemTime, PathBuf)> = Vec::new();
        let mut report = GcReport::default();
        let root = work.join(EXECUTORS_DIR);
        for e in fs::read_dir(&root).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if !is_dir || protected.contains(&name) {
                continue;
            }
            let Some(changed) = last_change(&path) else { continue };
            let age = now.duration_since(changed).unwrap_or_default();
            if age < MIN_AGE.min(policy.ttl) {
                continue;
            }
            if age > policy.ttl {
                let why = format!(
                    "ended, unchanged for {} s (ttl {} s)",
                    age.as_secs(),
                    policy.ttl.as_secs()
                );
                remove(&path, why, &mut report);
            } else {
                ended.push((changed, path));
            }
        }
        ended.sort();
        let mut used = used_pct(work);
        for (_, path) in ended {
            match used {
                Some(u) if u > policy.max_used_pct => {
                    let why = format!(
                        "ended, and the work directory's file system was {u} % full (at most {} %)",
                        policy.max_used_pct
                    );
                    remove(&path, why, &mut report);
                    used = used_pct(work);
                }
                _ => break,
            }
        }
        report.used_pct = used;
        report
    }
}

fn remove(path: &Path, why: String, report: &mut GcReport) {
    match fs::remove_dir_all(path) {
        Ok(()) => {
            tracing::info!(dir = %path.display(), %why, "removed an ended executor's directory");
            report.removed.push((path.to_owned(), why));
        }
        Err(e) => {
            tracing::warn!(dir = %path.display(), error = %e, "cannot remove an ended executor's directory");
            report.failed.push((path.to_owned(), e.to_string()));
        }
    }
}

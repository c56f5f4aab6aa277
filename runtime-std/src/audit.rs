//! The audit log on disk (docs/security.md#audit, docs/design.md#issue-44):
//! the master's [`AuditRecord`]s appended as JSON lines to one file
//! (`--audit-log PATH`, else `audit.log` in the filesystem store's
//! directory; none without either), fsync'd once per batch: the records of
//! one step of the master are written, then synced together.
//!
//! `GET /v1/audit?since=MS` reads the file back ([`read_since`]) through the
//! path the master registered at start ([`serve_path`]; one master per
//! process).

use regent_core::audit::AuditRecord;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The audit file being appended to, if the master has one.
#[derive(Debug, Default)]
pub struct AuditLog {
    file: Option<(PathBuf, File)>,
    unsynced: bool,
}

impl AuditLog {
    /// Opens (creating, mode 0600) `path` for appending; `None`: no log.
    pub fn open(path: Option<&Path>) -> std::io::Result<AuditLog> {
        let Some(path) = path else { return Ok(AuditLog::default()) };
        use std::os::unix::fs::OpenOptionsExt as _;
        let file = OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
        Ok(AuditLog { file: Some((path.to_owned(), file)), unsynced: false })
    }

    /// Where it writes, if anywhere.
    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|(p, _)| p.as_path())
    }

    /// Appends `record` as one JSON line (synced by [`AuditLog::sync`]).
    pub fn append(&mut self, record: &AuditRecord) {
        let Some((path, file)) = &mut self.file else { return };
        let mut line = serde_json::to_string(record).unwrap_or_default();
        line.push('\n');
        if let Err(e) = file.write_all(line.as_bytes()) {
            tracing::error!(path = %path.display(), error = %e, "cannot append to the audit log");
        }
        self.unsynced = true;
    }

    /// Makes what was appended since the last call durable (one fsync for
    /// the batch; nothing when nothing was appended).
    pub fn sync(&mut self) {
        if !std::mem::take(&mut self.unsynced) {
            return;
        }
        if let Some((path, file)) = &self.file {
            if let Err(e) = file.sync_data() {
                tracing::error!(path = %path.display(), error = %e, "cannot sync the audit log");
            }
        }
    }
}

/// The audit file `GET /v1/audit` reads, registered by the master at start.
static SERVED: OnceLock<PathBuf> = OnceLock::new();

/// Registers `path` as the file `GET /v1/audit` reads (the first master of
/// the process wins).
pub fn serve_path(path: &Path) {
    let _ = SERVED.set(path.to_owned());
}

/// The file `GET /v1/audit` reads, if a master registered one.
pub fn served_path() -> Option<&'static Path> {
    SERVED.get().map(PathBuf::as_path)
}

/// The records of `path` at or after wall-clock `since_ms`, in the file's
/// order (lines that do not parse are skipped).
pub fn read_since(path: &Path, since_ms: u64) -> std::io::Result<Vec<AuditRecord>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for line in BufReader::new(file).lines() {
        if let Ok(r) = serde_json::from_str::<AuditRecord>(&line?) {
            if r.time_ms >= since_ms {
                out.push(r);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::audit::Outcome;

    #[test]
    fn records_are_appended_as_lines_and_read_back_since_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let mut log = AuditLog::open(Some(&path)).unwrap();
        for t in [10, 20, 30] {
            log.append(&AuditRecord {
                time_ms: t,
                token: "ci".into(),
                tenant: Some("a".into()),
                action: "submit-job".into(),
                target: "a-1".into(),
                outcome: Outcome::Accepted,
                reason: None,
            });
        }
        log.sync();
        let got = read_since(&path, 20).unwrap();
        assert_eq!(got.iter().map(|r| r.time_ms).collect::<Vec<_>>(), [20, 30]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(text.contains(r#""token":"ci""#) && text.contains(r#""outcome":"accepted""#));
        assert!(read_since(&dir.path().join("none"), 0).unwrap().is_empty());
    }
}

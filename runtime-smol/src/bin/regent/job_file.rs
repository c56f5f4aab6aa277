//! The job file of `regent run` and `regent job validate`: TOML, read and
//! validated by [`regent_std::job_file`] (the same types `POST /v1/jobs`
//! reads as JSON; `docs/jobs.md` is the reference). Every error names the
//! file, the line and column, and the key.

use regent_core::job::JobSpec;
use std::path::Path;

/// Reads and validates the job file at `path`; the error is the message
/// the CLI prints.
pub fn load(path: &Path) -> Result<JobSpec, String> {
    regent_std::job_file::load(path).map_err(|e| e.to_string())
}

//! The job file of `regent run` and `regent job validate`: TOML, read and
//! validated by [`regent_std::job_file`] (the same types `POST /v1/jobs`
//! reads as JSON; `docs/jobs.md` is the reference). Every error names the
//! file, the line and column, and the key.

pub use regent_std::job_file::load;

//! What a worker prepares and honours around an executor's process, beyond
//! its command, environment and resources: the directory it starts in, how
//! long a stop waits between SIGTERM and SIGKILL, and the artifacts fetched
//! into its directory before it starts, and the ports it asks for by name.
//!
//! A [`LaunchSpec`] is declared with a group ([`crate::protocol::GroupSpec::launch`],
//! a job file's `cwd`, `kill_grace` and `[[group.artifacts]]`), kept in the
//! framework record, and sent with every executor
//! ([`crate::protocol::ExecutorSpec::launch`]); the worker's runtime carries
//! it out. The default is what an executor got before: it starts in its
//! executor directory, the worker's own kill grace applies, nothing is
//! fetched; a framework record whose groups all have it keeps the earlier
//! store layout byte for byte.
//!
//! What the master checks at declaration ([`LaunchSpec::problem`], called by
//! [`crate::limits::group_spec_problem`]): paths are relative and stay
//! inside the executor directory (no `..`, nothing absolute), a digest is
//! 64 hexadecimal digits, a source is `http://`, `https://` or `file://`,
//! and the sizes are bounded. What only the worker can know (the fetch, the
//! digest of what it received, an archive entry that would escape) fails
//! the executor with a reason naming it; the executor never runs.

use serde::{Deserialize, Serialize};

pub mod check;
pub use check::{is_unhealthy, unhealthy_reason, CheckKind, CheckSpec, UNHEALTHY};

/// Most artifacts one group fetches.
pub const MAX_ARTIFACTS: usize = 16;
/// Longest artifact source URL, in bytes.
pub const MAX_SOURCE_BYTES: usize = 2_048;
/// Longest relative path (`cwd`, an artifact's `dest`), in bytes.
pub const MAX_PATH_BYTES: usize = 256;
/// Longest kill grace a group may ask for: 1 hour.
pub const MAX_KILL_GRACE_MS: u64 = 3_600_000;

/// What a worker does around one executor's process (see the module
/// documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// The directory the process starts in, relative to its executor
    /// directory (created if missing); `None`: the executor directory.
    pub cwd: Option<String>,
    /// How long a stop waits after SIGTERM before SIGKILL, in ms; `None`:
    /// the worker's own (3 s in the daemons).
    pub kill_grace_ms: Option<u64>,
    /// Fetched into the executor directory, in order, before it starts.
    pub artifacts: Vec<Artifact>,
    /// The ports the executor asks for, by name (`http`): numbered by its
    /// worker from the worker's ranges, given as `REGENT_PORT_<NAME>` (see
    /// [`crate::ports`]).
    pub ports: Vec<String>,
    /// The user the executor runs as (a job's `user = "alice"`); its
    /// worker starts it so only when it runs as root and the user is in
    /// its `--allowed-users`, and fails the launch with the reason
    /// otherwise. `None`: the worker's executor user.
    pub user: Option<String>,
    /// Named resources the executor asks for, by name and amount
    /// (`resources = { gpu = 1 }`), in name order: counted by the leader
    /// like cores, the addresses picked by the worker and given as
    /// `REGENT_RESOURCE_<NAME>` (see [`crate::resources`]).
    pub resources: Vec<(String, u32)>,
    /// How the executor's stdout and stderr are rotated, where the group
    /// says (`[group.logs]`, `submit --log-max-bytes/--log-files`); what it
    /// leaves unsaid is the worker's (`--executor-log-max-bytes`,
    /// `--executor-log-files`). `None`: the worker's.
    pub logs: Option<LogRotation>,
    /// What the executor's worker does when it hears from no master
    /// (`disconnect = { stop_after = "30s" }`, a singleton that must never
    /// run twice; docs/design.md#issue-45). `None`: it runs on through
    /// any partition, as before.
    pub disconnect: Option<Disconnect>,
    /// The group's health checks (`[[group.check]]`, at most
    /// [`check::MAX_CHECKS`]), run by the executor's worker beside it
    /// (docs/jobs.md, docs/design.md#issue-45). Empty: none, the executor is
    /// judged by its process alone, as before.
    pub checks: Vec<CheckSpec>,
}

/// A group's rule for a worker cut off from every master (see
/// [`LaunchSpec::disconnect`]): once the worker has heard from no master
/// for `stop_after_ms`, it stops the group's executors, and the leader
/// places their replacements only after that time, the kill grace and a
/// margin for clock rates have passed since it last heard from the worker
/// (docs/jobs.md, docs/design.md#issue-45).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disconnect {
    /// How long the worker runs the executors on without hearing from any
    /// master, in ms: [`MIN_STOP_AFTER_MS`] to [`MAX_STOP_AFTER_MS`].
    pub stop_after_ms: u64,
}

impl Disconnect {
    /// The policy of `stop_after_ms`.
    pub fn after_ms(stop_after_ms: u64) -> Self {
        Disconnect { stop_after_ms }
    }
}

impl std::fmt::Display for Disconnect {
    /// `stop_after 30s` (whole seconds), else `stop_after 1500ms`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.stop_after_ms {
            ms if ms % 1_000 == 0 => write!(f, "stop_after {}s", ms / 1_000),
            ms => write!(f, "stop_after {ms}ms"),
        }
    }
}

/// The shortest `stop_after` a group may ask for: 1 s (shorter would stop
/// executors over a lost heartbeat or two).
pub const MIN_STOP_AFTER_MS: u64 = 1_000;
/// The longest `stop_after` a group may ask for: 1 day (a replacement
/// waits at least this long after its worker is declared DEAD).
pub const MAX_STOP_AFTER_MS: u64 = 86_400_000;

/// A group's own rotation of its executors' output (see
/// [`LaunchSpec::logs`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRotation {
    /// The most bytes of one output file, 1 to [`MAX_LOG_BYTES`].
    pub max_bytes: Option<u64>,
    /// How many files of each stream are kept, 1 to [`MAX_LOG_FILES`].
    pub files: Option<u32>,
}

/// The largest output file a group may ask for: 1 TiB.
pub const MAX_LOG_BYTES: u64 = 1 << 40;
/// The most output files per stream a group may ask for.
pub const MAX_LOG_FILES: u32 = 1_000;

/// Longest user name a group may name, in bytes (as `useradd` allows).
pub const MAX_USER_BYTES: usize = 32;

/// Most users a worker may announce it starts executors as
/// ([`crate::protocol::RegisterWorker::users`]).
pub const MAX_WORKER_USERS: usize = 64;

/// Whether `name` is a user name a group may name: 1 to
/// [`MAX_USER_BYTES`] bytes of ASCII letters, digits, `_`, `-` and `.`,
/// not starting with `-` (what `useradd` accepts, so never a path or a
/// flag).
pub fn is_user_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_USER_BYTES
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// One file the worker fetches before an executor starts, checked against
/// its digest, optionally unpacked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// Where from: `http://…`, `https://…` or `file:///absolute/path`.
    pub source: String,
    /// The SHA-256 of the file as fetched, 64 lowercase hexadecimal digits.
    pub sha256: String,
    /// The directory it goes to, relative to the executor directory (`""`:
    /// the executor directory itself).
    pub dest: String,
    /// Unpack it (`.tar.gz`, `.tgz`, `.tar`, `.zip`, by the source's name)
    /// into `dest` instead of placing the file there.
    pub unpack: bool,
}

/// Why a [`LaunchSpec`] cannot be declared.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LaunchProblem {
    /// A path is absolute, climbs out with `..`, or is too long.
    #[error("{key} {path:?} must be a relative path inside the executor directory of at most {MAX_PATH_BYTES} bytes, without \"..\"")]
    Path {
        /// `cwd` or `artifacts[i].dest`.
        key: String,
        /// The path as given.
        path: String,
    },
    /// A `disconnect.stop_after` shorter than [`MIN_STOP_AFTER_MS`] or
    /// longer than [`MAX_STOP_AFTER_MS`].
    #[error("disconnect.stop_after {0} ms is out of range: {MIN_STOP_AFTER_MS} ms (1 s) to {MAX_STOP_AFTER_MS} ms (1 day)")]
    StopAfter(u64),
    /// A health check breaks a rule of [`check::checks_problem`].
    #[error("check[{index}]: {why}")]
    Check {
        /// Which check (its place in the group's list).
        index: usize,
        /// What is wrong with it.
        why: check::CheckProblem,
    },
    /// The kill grace is longer than [`MAX_KILL_GRACE_MS`].
    #[error("kill_grace {0} ms is longer than the most, {MAX_KILL_GRACE_MS} ms (1 hour)")]
    KillGrace(u64),
    /// More than [`MAX_ARTIFACTS`] artifacts.
    #[error("{0} artifacts, more than the most, {MAX_ARTIFACTS}")]
    TooManyArtifacts(usize),
    /// A source that is not `http://`, `https://` or `file:///…`, or too long.
    #[error("artifacts[{index}].source {url:?} must start with http://, https:// or file:/// and be at most {MAX_SOURCE_BYTES} bytes")]
    Source {
        /// Which artifact.
        index: usize,
        /// The source as given.
        url: String,
    },
    /// A digest that is not 64 lowercase hexadecimal digits.
    #[error("artifacts[{index}].sha256 {digest:?} must be 64 lowercase hexadecimal digits")]
    Digest {
        /// Which artifact.
        index: usize,
        /// The digest as given.
        digest: String,
    },
    /// `unpack` on a source whose name is no archive regent unpacks.
    #[error("artifacts[{index}] has unpack = true but {url:?} does not end in .tar.gz, .tgz, .tar or .zip")]
    NotAnArchive {
        /// Which artifact.
        index: usize,
        /// The source as given.
        url: String,
    },
    /// The port names break a rule of [`crate::ports::names_problem`].
    #[error("ports: {0}")]
    Ports(crate::ports::PortsProblem),
    /// The named resources break a rule of
    /// [`crate::resources::amounts_problem`].
    #[error("resources: {0}")]
    Resources(crate::resources::ResourcesProblem),
    /// A rotation past its limits.
    #[error(
        "logs: max_bytes must be 1 to {MAX_LOG_BYTES} and files 1 to {MAX_LOG_FILES} (got {0:?})"
    )]
    Logs(LogRotation),
    /// A user name that is no user name ([`is_user_name`]).
    #[error("user {0:?} must be 1 to {MAX_USER_BYTES} letters, digits, '_', '-' or '.', not starting with '-'")]
    User(String),
}

/// The kind of archive a source's name says it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchiveKind {
    /// `.tar.gz` or `.tgz`.
    TarGz,
    /// `.tar`.
    Tar,
    /// `.zip`.
    Zip,
}

impl ArchiveKind {
    /// What the last part of `source`'s path (before any `?` or `#`) says.
    pub fn of(source: &str) -> Option<ArchiveKind> {
        let path = source.split(['?', '#']).next().unwrap_or(source).to_ascii_lowercase();
        if path.ends_with(".tar.gz") || path.ends_with(".tgz") {
            Some(ArchiveKind::TarGz)
        } else if path.ends_with(".tar") {
            Some(ArchiveKind::Tar)
        } else if path.ends_with(".zip") {
            Some(ArchiveKind::Zip)
        } else {
            None
        }
    }
}

/// Whether `path` is relative and stays inside the directory it is taken
/// from: not absolute, no `..` component, at most [`MAX_PATH_BYTES`].
pub fn is_inside(path: &str) -> bool {
    path.len() <= MAX_PATH_BYTES
        && !path.starts_with('/')
        && !path.contains('\0')
        && path.split('/').all(|part| part != "..")
}

impl LaunchSpec {
    /// Whether this is the default (nothing beyond what every executor gets).
    pub fn is_default(&self) -> bool {
        *self == LaunchSpec::default()
    }

    /// The first rule this breaks, if any (see the module documentation).
    pub fn problem(&self) -> Option<LaunchProblem> {
        if let Some(user) = self.user.as_ref().filter(|u| !is_user_name(u)) {
            return Some(LaunchProblem::User(user.clone()));
        }
        if let Some(cwd) = &self.cwd {
            if !is_inside(cwd) {
                return Some(LaunchProblem::Path { key: "cwd".into(), path: cwd.clone() });
            }
        }
        if let Some(grace) = self.kill_grace_ms {
            if grace > MAX_KILL_GRACE_MS {
                return Some(LaunchProblem::KillGrace(grace));
            }
        }
        if self.artifacts.len() > MAX_ARTIFACTS {
            return Some(LaunchProblem::TooManyArtifacts(self.artifacts.len()));
        }
        for (index, a) in self.artifacts.iter().enumerate() {
            let scheme_ok = a.source.starts_with("http://")
                || a.source.starts_with("https://")
                || a.source.starts_with("file:///");
            if !scheme_ok || a.source.len() > MAX_SOURCE_BYTES {
                return Some(LaunchProblem::Source { index, url: a.source.clone() });
            }
            let hex = a.sha256.len() == 64
                && a.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !hex {
                return Some(LaunchProblem::Digest { index, digest: a.sha256.clone() });
            }
            if !is_inside(&a.dest) {
                return Some(LaunchProblem::Path {
                    key: format!("artifacts[{index}].dest"),
                    path: a.dest.clone(),
                });
            }
            if a.unpack && ArchiveKind::of(&a.source).is_none() {
                return Some(LaunchProblem::NotAnArchive { index, url: a.source.clone() });
            }
        }
        if let Some(p) = crate::resources::amounts_problem(&self.resources) {
            return Some(LaunchProblem::Resources(p));
        }
        if let Some(logs) = &self.logs {
            if logs.max_bytes.is_some_and(|b| b == 0 || b > MAX_LOG_BYTES)
                || logs.files.is_some_and(|f| f == 0 || f > MAX_LOG_FILES)
            {
                return Some(LaunchProblem::Logs(*logs));
            }
        }
        if let Some(d) = self.disconnect {
            if !(MIN_STOP_AFTER_MS..=MAX_STOP_AFTER_MS).contains(&d.stop_after_ms) {
                return Some(LaunchProblem::StopAfter(d.stop_after_ms));
            }
        }
        if let Some(p) = crate::ports::names_problem(&self.ports) {
            return Some(LaunchProblem::Ports(p));
        }
        check::checks_problem(&self.checks, &self.ports)
            .map(|(index, why)| LaunchProblem::Check { index, why })
    }

    /// The bytes this adds to a record at most (what
    /// [`crate::limits::group_spec_problem`] counts with the command and
    /// environment).
    pub fn size(&self) -> usize {
        self.cwd.as_ref().map_or(0, |c| c.len())
            + self
                .artifacts
                .iter()
                .map(|a| a.source.len() + a.sha256.len() + a.dest.len() + 1)
                .sum::<usize>()
            + self.ports.iter().map(String::len).sum::<usize>()
            + self.user.as_ref().map_or(0, String::len)
            + self.resources.iter().map(|(n, _)| n.len() + 4).sum::<usize>()
            + self.checks.iter().map(CheckSpec::size).sum::<usize>()
    }
}

/// How the reason of an executor the kernel killed for reaching its memory
/// limit begins (`out of memory: limit 64 MiB, peak 64 MiB`, written by a
/// worker that enforces limits with cgroups): a `Failed` state with such a
/// reason is an out-of-memory kill, not a crash ([`is_out_of_memory`]).
pub const OUT_OF_MEMORY: &str = "out of memory";

/// How a worker's `Failed` reason begins when it refused a launch for lack
/// of a port or a named resource the leader counted free (something the
/// leader has not heard of yet still holds it): no failure of the
/// executor's own, so the leader re-queues the slot without charging a
/// retry ([`is_refused_launch`]).
pub const REFUSED_LAUNCH: &str = "not started";

/// The `Failed` reason of a launch refused for `why` ([`REFUSED_LAUNCH`]).
pub fn refused_launch(why: &str) -> String {
    format!("{REFUSED_LAUNCH}: {why}")
}

/// How a worker's `Failed` reason begins when it stopped a singleton
/// executor because it heard from no master for the group's `stop_after`
/// ([`Disconnect`], docs/design.md#issue-45): no failure of the executor's
/// own, so the leader refills the slot without charging a retry
/// ([`is_cut_off`]).
pub const CUT_OFF: &str = "stopped: no master heard for";

/// The `Failed` reason of a singleton executor stopped under `rule`
/// ([`CUT_OFF`]): `stopped: no master heard for 30s`.
pub fn cut_off_reason(rule: Disconnect) -> String {
    let after = rule.to_string();
    let after = after.strip_prefix("stop_after ").unwrap_or(&after);
    format!("{CUT_OFF} {after}")
}

/// Whether a `Failed` reason is a singleton stopped by its cut-off worker
/// ([`CUT_OFF`]).
pub fn is_cut_off(reason: &str) -> bool {
    reason.strip_prefix(CUT_OFF).is_some_and(|rest| rest.starts_with(' '))
}

/// Whether a `Failed` reason is a refused launch ([`REFUSED_LAUNCH`]).
pub fn is_refused_launch(reason: &str) -> bool {
    reason.strip_prefix(REFUSED_LAUNCH).is_some_and(|rest| rest.starts_with(": "))
}

/// Whether a `Failed` reason reports an out-of-memory kill
/// ([`OUT_OF_MEMORY`]).
pub fn is_out_of_memory(reason: &str) -> bool {
    reason.strip_prefix(OUT_OF_MEMORY).is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn out_of_memory_reasons_are_recognised() {
        assert!(super::is_out_of_memory("out of memory: limit 64 MiB, peak 64 MiB"));
        assert!(super::is_out_of_memory("out of memory"));
        assert!(!super::is_out_of_memory("out of memoryless: x"));
        assert!(!super::is_out_of_memory("cannot start \"x\": out of memory"));
    }

    use super::*;

    fn artifact(source: &str) -> Artifact {
        Artifact {
            source: source.into(),
            sha256: "a".repeat(64),
            dest: "bin".into(),
            unpack: false,
        }
    }

    #[test]
    fn paths_must_stay_inside_the_executor_directory() {
        for good in ["", "bin", "a/b/c", "./x", "a..b"] {
            assert!(is_inside(good), "{good}");
        }
        for bad in ["/etc", "..", "a/../..", "../x", "a/.."] {
            assert!(!is_inside(bad), "{bad}");
        }
        let spec = LaunchSpec { cwd: Some("../up".into()), ..Default::default() };
        assert!(matches!(spec.problem(), Some(LaunchProblem::Path { .. })));
    }

    #[test]
    fn artifacts_need_a_known_scheme_a_digest_and_an_archive_name_to_unpack() {
        let ok = LaunchSpec { artifacts: vec![artifact("https://h/x.tgz")], ..Default::default() };
        assert_eq!(ok.problem(), None);
        let ftp = LaunchSpec { artifacts: vec![artifact("ftp://h/x")], ..Default::default() };
        assert!(ftp.problem().unwrap().to_string().contains("http://, https:// or file:///"));
        let mut short = artifact("file:///srv/x");
        short.sha256 = "abc".into();
        let spec = LaunchSpec { artifacts: vec![short], ..Default::default() };
        assert!(matches!(spec.problem(), Some(LaunchProblem::Digest { index: 0, .. })));
        let mut plain = artifact("http://h/prog");
        plain.unpack = true;
        let spec = LaunchSpec { artifacts: vec![plain], ..Default::default() };
        assert!(matches!(spec.problem(), Some(LaunchProblem::NotAnArchive { .. })));
        assert_eq!(ArchiveKind::of("http://h/a.tar.gz?x=1"), Some(ArchiveKind::TarGz));
        assert_eq!(ArchiveKind::of("file:///a/B.ZIP"), Some(ArchiveKind::Zip));
        assert_eq!(ArchiveKind::of("http://h/a.gz"), None);
    }
}

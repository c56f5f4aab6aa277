//! A group's health checks (`[[group.check]]`, docs/jobs.md,
//! docs/design.md#issue-45): what its executors' worker probes, how often,
//! and how many failures stop an executor. Declared with the group
//! ([`super::LaunchSpec::checks`]), sent with every executor, counted only
//! by the worker that runs it (`crate::health`), so a partition between
//! worker and leader never reads as an unhealthy service.

use serde::{Deserialize, Serialize};

/// Most checks one group declares.
pub const MAX_CHECKS: usize = 8;
/// Longest check name, in bytes.
pub const MAX_CHECK_NAME_BYTES: usize = 32;
/// Longest http check path, in bytes.
pub const MAX_CHECK_PATH_BYTES: usize = 256;
/// Longest detail a check result carries (an answer, an error, an exec
/// check's first output), in bytes; a longer one is cut.
pub const MAX_CHECK_DETAIL_BYTES: usize = 256;

/// Default time between two runs of a check: 10 s.
pub const DEFAULT_INTERVAL_MS: u64 = 10_000;
/// Default time a run may take: 5 s (not 1 s: a slow moment of a busy
/// service must not read as a failure and restart it).
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
/// Default time from RUNNING before results count: 10 s.
pub const DEFAULT_GRACE_MS: u64 = 10_000;
/// Default number of straight failures that stop an executor.
pub const DEFAULT_FAILURES: u32 = 3;
/// Default time a manual check's report holds: 30 s.
pub const DEFAULT_TTL_MS: u64 = 30_000;
/// Default range of http answers that pass: 200 to 399.
pub const DEFAULT_EXPECT: (u16, u16) = (200, 399);

/// Shortest interval and timeout: 100 ms.
pub const MIN_CHECK_MS: u64 = 100;
/// Longest interval, grace and manual TTL: 1 hour.
pub const MAX_INTERVAL_MS: u64 = 3_600_000;
/// Longest timeout: 10 minutes.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Most failures a check may ask for before it stops an executor.
pub const MAX_FAILURES: u32 = 100;

/// One health check of a group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckSpec {
    /// Unique in the group, 1 to [`MAX_CHECK_NAME_BYTES`] bytes of `a-z`,
    /// `0-9`, `_` and `-`; a job file's default is the kind's name
    /// (`http`).
    pub name: String,
    /// What is probed.
    pub kind: CheckKind,
    /// Time between two runs, in ms ([`DEFAULT_INTERVAL_MS`]).
    pub interval_ms: u64,
    /// Time one run may take, in ms ([`DEFAULT_TIMEOUT_MS`]); may exceed
    /// the interval (a run in flight is never started twice).
    pub timeout_ms: u64,
    /// Time from RUNNING during which failures do not count, in ms
    /// ([`DEFAULT_GRACE_MS`]).
    pub grace_ms: u64,
    /// How many straight failures stop the executor (damped: a pass pays
    /// back half a failure; see `crate::health`); 0: report only, never
    /// stop ([`DEFAULT_FAILURES`]).
    pub failures: u32,
}

/// What a check probes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CheckKind {
    /// `GET path` on a port the executor asked for: passes when the answer's
    /// status is in `expect` (inclusive).
    Http {
        /// The port's name in [`super::LaunchSpec::ports`].
        port: String,
        /// The path asked for, starting with `/`.
        path: String,
        /// The lowest and highest status that pass.
        expect: (u16, u16),
    },
    /// A TCP connection to a port the executor asked for.
    Tcp {
        /// The port's name in [`super::LaunchSpec::ports`].
        port: String,
    },
    /// A command run in the executor's sandbox (its cgroup, user, working
    /// directory and environment): exit 0 passes.
    Exec {
        /// The program and its arguments.
        command: Vec<String>,
    },
    /// Reported by the framework itself (`POST /v1/executors/{id}/health`):
    /// a report holds for `ttl_ms`; none by then is one failure.
    Manual {
        /// How long one report holds, in ms.
        ttl_ms: u64,
    },
}

impl CheckKind {
    /// The kind's name, a check's default name: `http`, `tcp`, `exec` or
    /// `manual`.
    pub fn name(&self) -> &'static str {
        match self {
            CheckKind::Http { .. } => "http",
            CheckKind::Tcp { .. } => "tcp",
            CheckKind::Exec { .. } => "exec",
            CheckKind::Manual { .. } => "manual",
        }
    }

    /// The port it probes, by name (http and tcp).
    pub fn port(&self) -> Option<&str> {
        match self {
            CheckKind::Http { port, .. } | CheckKind::Tcp { port } => Some(port),
            _ => None,
        }
    }
}

impl CheckSpec {
    /// A check of `kind` with every default, named for its kind.
    pub fn new(kind: CheckKind) -> Self {
        CheckSpec {
            name: kind.name().to_string(),
            kind,
            interval_ms: DEFAULT_INTERVAL_MS,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            grace_ms: DEFAULT_GRACE_MS,
            failures: DEFAULT_FAILURES,
        }
    }

    /// The bytes it adds to a record at most.
    pub fn size(&self) -> usize {
        let kind = match &self.kind {
            CheckKind::Http { port, path, .. } => port.len() + path.len() + 4,
            CheckKind::Tcp { port } => port.len(),
            CheckKind::Exec { command } => command.iter().map(|a| a.len() + 1).sum(),
            CheckKind::Manual { .. } => 8,
        };
        self.name.len() + kind + 28
    }

    /// The first rule this check breaks, given the group's port names.
    pub fn problem(&self, ports: &[String]) -> Option<CheckProblem> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= MAX_CHECK_NAME_BYTES
            && self.name.bytes().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-'));
        if !name_ok {
            return Some(CheckProblem::Name(self.name.clone()));
        }
        if !(MIN_CHECK_MS..=MAX_INTERVAL_MS).contains(&self.interval_ms) {
            return Some(CheckProblem::Interval(self.interval_ms));
        }
        if !(MIN_CHECK_MS..=MAX_TIMEOUT_MS).contains(&self.timeout_ms) {
            return Some(CheckProblem::Timeout(self.timeout_ms));
        }
        if self.grace_ms > MAX_INTERVAL_MS {
            return Some(CheckProblem::Grace(self.grace_ms));
        }
        if self.failures > MAX_FAILURES {
            return Some(CheckProblem::Failures(self.failures));
        }
        if let Some(port) = self.kind.port() {
            if !ports.iter().any(|p| p == port) {
                return Some(CheckProblem::Port(port.to_string()));
            }
        }
        match &self.kind {
            CheckKind::Http { path, expect, .. } => {
                if !path.starts_with('/')
                    || path.len() > MAX_CHECK_PATH_BYTES
                    || path.bytes().any(|b| b.is_ascii_control() || b == b' ')
                {
                    return Some(CheckProblem::Path(path.clone()));
                }
                if !(100..=599).contains(&expect.0)
                    || !(100..=599).contains(&expect.1)
                    || expect.0 > expect.1
                {
                    return Some(CheckProblem::Expect(expect.0, expect.1));
                }
            }
            CheckKind::Exec { command } if command.first().is_none_or(|p| p.is_empty()) => {
                return Some(CheckProblem::Command);
            }
            CheckKind::Manual { ttl_ms } if !(MIN_CHECK_MS..=MAX_INTERVAL_MS).contains(ttl_ms) => {
                return Some(CheckProblem::Ttl(*ttl_ms));
            }
            _ => {}
        }
        None
    }
}

/// The first rule a group's checks break, if any: each check's own
/// ([`CheckSpec::problem`]), then at most [`MAX_CHECKS`] of them, and names
/// unique in the group. The index is the check's place in the list.
pub fn checks_problem(checks: &[CheckSpec], ports: &[String]) -> Option<(usize, CheckProblem)> {
    if checks.len() > MAX_CHECKS {
        return Some((MAX_CHECKS, CheckProblem::TooMany(checks.len())));
    }
    for (index, c) in checks.iter().enumerate() {
        if let Some(p) = c.problem(ports) {
            return Some((index, p));
        }
        if checks[..index].iter().any(|o| o.name == c.name) {
            return Some((index, CheckProblem::Duplicate(c.name.clone())));
        }
    }
    None
}

/// Why a check cannot be declared.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckProblem {
    /// A name that is empty, too long, or not `a-z0-9_-`.
    #[error("name {0:?} must be 1 to {MAX_CHECK_NAME_BYTES} bytes of a-z, 0-9, '_' or '-'")]
    Name(String),
    /// Two checks of the group with one name.
    #[error("name {0:?} is taken by an earlier check of the group (give each a name)")]
    Duplicate(String),
    /// More than [`MAX_CHECKS`] checks.
    #[error("{0} checks, more than the most, {MAX_CHECKS}")]
    TooMany(usize),
    /// An interval out of range.
    #[error("interval {0} ms is out of range: {MIN_CHECK_MS} ms to {MAX_INTERVAL_MS} ms (1 hour)")]
    Interval(u64),
    /// A timeout out of range.
    #[error(
        "timeout {0} ms is out of range: {MIN_CHECK_MS} ms to {MAX_TIMEOUT_MS} ms (10 minutes)"
    )]
    Timeout(u64),
    /// A grace past an hour.
    #[error("grace {0} ms is longer than the most, {MAX_INTERVAL_MS} ms (1 hour)")]
    Grace(u64),
    /// Too many failures.
    #[error("failures {0} is more than the most, {MAX_FAILURES}")]
    Failures(u32),
    /// A port the group does not ask for.
    #[error("port {0:?} is not one of the group's ports")]
    Port(String),
    /// An http path that does not start with `/`, is too long, or holds a
    /// space or control character.
    #[error(
        "path {0:?} must start with '/', be at most {MAX_CHECK_PATH_BYTES} bytes, without spaces"
    )]
    Path(String),
    /// An expected status range out of 100 to 599, or reversed.
    #[error("expect [{0}, {1}] must be two statuses from 100 to 599, the lower first")]
    Expect(u16, u16),
    /// An exec check without a program.
    #[error("an exec check needs a command")]
    Command,
    /// A manual check's TTL out of range.
    #[error("ttl {0} ms is out of range: {MIN_CHECK_MS} ms to {MAX_INTERVAL_MS} ms (1 hour)")]
    Ttl(u64),
}

/// How a worker's `Failed` reason begins when it stopped an executor whose
/// checks failed: the leader refills its slot under the group's restart
/// policy, as for a crash ([`is_unhealthy`]).
pub const UNHEALTHY: &str = "unhealthy:";

/// The `Failed` reason of an executor stopped by check `check` after
/// `failures` failures, the last with `last`: `unhealthy: check "http"
/// failed 3 times (last: GET /health answered 500)`.
pub fn unhealthy_reason(check: &str, failures: u32, last: &str) -> String {
    let times = if failures == 1 { "once".to_string() } else { format!("{failures} times") };
    format!("{UNHEALTHY} check {check:?} failed {times} (last: {last})")
}

/// Whether a `Failed` reason is an executor stopped for failed checks
/// ([`UNHEALTHY`]).
pub fn is_unhealthy(reason: &str) -> bool {
    reason.strip_prefix(UNHEALTHY).is_some_and(|rest| rest.starts_with(' '))
}

/// `detail` cut to at most [`MAX_CHECK_DETAIL_BYTES`] bytes, on a character
/// boundary.
pub fn cut_detail(detail: &str) -> String {
    let mut end = detail.len().min(MAX_CHECK_DETAIL_BYTES);
    while !detail.is_char_boundary(end) {
        end -= 1;
    }
    detail[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http() -> CheckSpec {
        CheckSpec::new(CheckKind::Http {
            port: "http".into(),
            path: "/health".into(),
            expect: DEFAULT_EXPECT,
        })
    }

    #[test]
    fn checks_name_their_ports_ranges_and_names() {
        let ports = vec!["http".to_string()];
        assert_eq!(checks_problem(&[http()], &ports), None);
        assert_eq!(checks_problem(&[http()], &[]), Some((0, CheckProblem::Port("http".into()))));
        assert_eq!(
            checks_problem(&[http(), http()], &ports),
            Some((1, CheckProblem::Duplicate("http".into())))
        );
        let mut c = http();
        c.timeout_ms = 50;
        assert_eq!(c.problem(&ports), Some(CheckProblem::Timeout(50)));
        c = http();
        c.kind = CheckKind::Http { port: "http".into(), path: "health".into(), expect: (200, 299) };
        assert!(matches!(c.problem(&ports), Some(CheckProblem::Path(_))));
        c.kind = CheckKind::Http { port: "http".into(), path: "/".into(), expect: (300, 200) };
        assert_eq!(c.problem(&ports), Some(CheckProblem::Expect(300, 200)));
        let exec = CheckSpec::new(CheckKind::Exec { command: vec![] });
        assert_eq!(exec.problem(&[]), Some(CheckProblem::Command));
        let mut bad = CheckSpec::new(CheckKind::Tcp { port: "http".into() });
        bad.name = "Web".into();
        assert_eq!(bad.problem(&ports), Some(CheckProblem::Name("Web".into())));
        let many = vec![CheckSpec::new(CheckKind::Tcp { port: "http".into() }); 9];
        assert_eq!(checks_problem(&many, &ports), Some((8, CheckProblem::TooMany(9))));
        let manual = CheckSpec::new(CheckKind::Manual { ttl_ms: DEFAULT_TTL_MS });
        assert_eq!(manual.problem(&[]), None, "reports are relayed (ReportHealth)");
        let lapse = CheckSpec::new(CheckKind::Manual { ttl_ms: 10 });
        assert_eq!(lapse.problem(&[]), Some(CheckProblem::Ttl(10)));
    }

    #[test]
    fn a_change_of_checks_is_named_by_the_checks_names() {
        let old = crate::protocol::GroupSpec {
            group: "web".into(),
            slots: 1,
            command: vec!["true".into()],
            env: vec![],
            cores: 1,
            memory_mb: 0,
            policy: Default::default(),
            launch: Default::default(),
        };
        let mut new = old.clone();
        new.launch.ports = vec!["http".into()];
        new.launch.checks = vec![http(), CheckSpec::new(CheckKind::Tcp { port: "http".into() })];
        assert_eq!(
            crate::protocol::spec_changes(&old, &new),
            ["ports [] -> [http]", "checks none -> http,tcp"]
        );
    }

    #[test]
    fn unhealthy_reasons_read_as_the_operator_sees_them() {
        let r = unhealthy_reason("http", 3, "GET /health answered 500");
        assert_eq!(r, "unhealthy: check \"http\" failed 3 times (last: GET /health answered 500)");
        assert!(is_unhealthy(&r));
        assert!(!is_unhealthy("unhealthyish"));
        assert_eq!(cut_detail(&"é".repeat(200)).len(), 256);
    }
}

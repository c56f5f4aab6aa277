//! The job file of `regent run`, `regent job validate` and `POST /v1/jobs`
//! (docs/jobs.md, docs/api.md): one set of serde types read from TOML (the
//! file) or JSON (the HTTP API), validated by
//! [`regent_core::job::JobSpec::validate`].
//!
//! ```toml
//! name = "wordcount"
//! [[group]]
//! name = "mappers"
//! count = 4
//! command = ["sh", "-c", "wc -l < $INPUT"]
//! env = { INPUT = "/data/in" }
//! cores = 1
//! memory_mb = 256
//! ```
//!
//! The types are generic over how a value is carried ([`Carrier`]): in TOML
//! each value keeps where it was written ([`toml::Spanned`]), so every
//! error names the file, the line and column, and the key:
//! `job.toml:12:5: group "mappers": cores must be at least 1`; in JSON a
//! value is itself ([`Plain`]) and an error names the field's path
//! ([`FieldError`]: `group[0].count: invalid type: string "x", expected
//! u32`). An unknown key is an error naming it, in both.

use regent_core::job::{JobGroup, JobKey, JobSpec};
use regent_core::limits::GroupKey;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;

/// A value read from a job file, with where it was written when the format
/// keeps it.
pub trait Carried<T> {
    /// The value.
    fn get_ref(&self) -> &T;
    /// Where it was written (an empty range at 0 when not kept).
    fn span(&self) -> Range<usize>;
}

impl<T> Carried<T> for Spanned<T> {
    fn get_ref(&self) -> &T {
        Spanned::get_ref(self)
    }
    fn span(&self) -> Range<usize> {
        Spanned::span(self)
    }
}

/// A value without a position (JSON): deserialized as the value itself.
#[derive(Clone, Debug, Deserialize)]
#[serde(transparent)]
pub struct Plain<T>(pub T);

impl<T> Carried<T> for Plain<T> {
    fn get_ref(&self) -> &T {
        &self.0
    }
    fn span(&self) -> Range<usize> {
        0..0
    }
}

/// How a format carries the job file's values: [`Toml`] with positions,
/// [`Json`] without.
pub trait Carrier {
    /// A value of type `T` in this format.
    type Of<T: DeserializeOwned>: DeserializeOwned + Carried<T>;
}

/// The TOML job file: values keep their positions.
#[derive(Debug)]
pub enum Toml {}

impl Carrier for Toml {
    type Of<T: DeserializeOwned> = Spanned<T>;
}

/// A job as JSON (`POST /v1/jobs`): values are themselves.
#[derive(Debug)]
pub enum Json {}

impl Carrier for Json {
    type Of<T: DeserializeOwned> = Plain<T>;
}

/// A job file's top level.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, bound = "")]
struct RawJob<C: Carrier> {
    name: C::Of<String>,
    tenant: Option<C::Of<String>>,
    #[serde(default = "Vec::new")]
    group: Vec<C::Of<RawGroup<C>>>,
}

/// One `[[group]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, bound = "")]
struct RawGroup<C: Carrier> {
    name: C::Of<String>,
    count: Option<C::Of<u32>>,
    command: C::Of<Vec<String>>,
    env: Option<C::Of<BTreeMap<String, String>>>,
    cores: Option<C::Of<u32>>,
    memory_mb: Option<C::Of<u64>>,
    placement: Option<C::Of<String>>,
    constraints: Option<C::Of<Vec<String>>>,
    spread: Option<C::Of<String>>,
    priority: Option<C::Of<u32>>,
    restart: Option<C::Of<RawRestart<C>>>,
    cwd: Option<C::Of<String>>,
    kill_grace: Option<C::Of<String>>,
    artifacts: Option<C::Of<Vec<RawArtifact>>>,
    ports: Option<C::Of<Vec<String>>>,
    user: Option<C::Of<String>>,
    resources: Option<C::Of<BTreeMap<String, u32>>>,
    logs: Option<C::Of<RawLogs>>,
    disconnect: Option<C::Of<RawDisconnect>>,
    check: Option<C::Of<Vec<RawCheck>>>,
    update: Option<C::Of<RawUpdate>>,
}

/// One of a group's `[[group.check]]` (docs/jobs.md, docs/design.md#issue-45):
/// `type` says which keys apply; durations are written as people write them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    #[serde(rename = "type")]
    kind: String,
    name: Option<String>,
    port: Option<String>,
    path: Option<String>,
    expect: Option<(u16, u16)>,
    command: Option<Vec<String>>,
    ttl: Option<String>,
    interval: Option<String>,
    timeout: Option<String>,
    grace: Option<String>,
    failures: Option<u32>,
}

impl RawCheck {
    /// The check; an error names the key as `check[i].key` and why (its
    /// rules are checked by the job's validation).
    fn spec(&self, i: usize) -> Result<regent_core::launch::CheckSpec, String> {
        use regent_core::launch::check::{DEFAULT_EXPECT, DEFAULT_TTL_MS};
        use regent_core::launch::{CheckKind, CheckSpec};
        let key = |k: &str| format!("key \"check[{i}].{k}\"");
        let ms = |k: &str, v: &Option<String>| -> Result<Option<u64>, String> {
            v.as_ref().map(|v| duration_ms(v).map_err(|e| format!("{}: {e}", key(k)))).transpose()
        };
        let needs = |k: &str, v: &Option<String>| {
            v.clone().ok_or_else(|| format!("{}: a {} check needs it", key(k), self.kind))
        };
        // Which keys each type takes, beyond name and the timing keys.
        let (kind, takes): (CheckKind, &[&str]) = match self.kind.as_str() {
            "http" => (
                CheckKind::Http {
                    port: needs("port", &self.port)?,
                    path: self.path.clone().unwrap_or_else(|| "/".into()),
                    expect: self.expect.unwrap_or(DEFAULT_EXPECT),
                },
                &["port", "path", "expect"],
            ),
            "tcp" => (CheckKind::Tcp { port: needs("port", &self.port)? }, &["port"]),
            "exec" => (
                CheckKind::Exec {
                    command: self
                        .command
                        .clone()
                        .ok_or_else(|| format!("{}: an exec check needs it", key("command")))?,
                },
                &["command"],
            ),
            "manual" => (
                CheckKind::Manual { ttl_ms: ms("ttl", &self.ttl)?.unwrap_or(DEFAULT_TTL_MS) },
                &["ttl"],
            ),
            other => {
                return Err(format!(
                    "{}: {other:?} is no check type (http, tcp, exec or manual)",
                    key("type")
                ))
            }
        };
        let set = [
            ("port", self.port.is_some()),
            ("path", self.path.is_some()),
            ("expect", self.expect.is_some()),
            ("command", self.command.is_some()),
            ("ttl", self.ttl.is_some()),
        ];
        if let Some((k, _)) = set.iter().find(|(k, set)| *set && !takes.contains(k)) {
            return Err(format!("{}: a {} check takes no {k}", key(k), self.kind));
        }
        let mut c = CheckSpec::new(kind);
        if let Some(name) = &self.name {
            c.name = name.clone();
        }
        c.interval_ms = ms("interval", &self.interval)?.unwrap_or(c.interval_ms);
        c.timeout_ms = ms("timeout", &self.timeout)?.unwrap_or(c.timeout_ms);
        c.grace_ms = ms("grace", &self.grace)?.unwrap_or(c.grace_ms);
        c.failures = self.failures.unwrap_or(c.failures);
        Ok(c)
    }
}

/// A group's `[group.update]` table: how a changed spec is deployed
/// (docs/jobs.md, docs/design.md#issue-45); a key left out keeps its
/// default ([`regent_core::policy::UpdatePolicy::default`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUpdate {
    max_parallel: Option<u32>,
    min_healthy_time: Option<String>,
    healthy_deadline: Option<String>,
    progress_deadline: Option<String>,
    canary: Option<u32>,
    auto_promote: Option<bool>,
    auto_revert: Option<bool>,
}

impl RawUpdate {
    /// The policy; an error names the key (`update.min_healthy_time`).
    fn policy(&self) -> Result<regent_core::policy::UpdatePolicy, String> {
        let mut u = regent_core::policy::UpdatePolicy::default();
        let ms = |key: &str, v: &Option<String>, default: u64| -> Result<u64, String> {
            match v {
                None => Ok(default),
                Some(v) => duration_ms(v).map_err(|e| format!("key \"update.{key}\": {e}")),
            }
        };
        u.max_parallel = self.max_parallel.unwrap_or(u.max_parallel);
        u.min_healthy_time_ms =
            ms("min_healthy_time", &self.min_healthy_time, u.min_healthy_time_ms)?;
        u.healthy_deadline_ms =
            ms("healthy_deadline", &self.healthy_deadline, u.healthy_deadline_ms)?;
        u.progress_deadline_ms =
            ms("progress_deadline", &self.progress_deadline, u.progress_deadline_ms)?;
        u.canary = self.canary.unwrap_or(u.canary);
        u.auto_promote = self.auto_promote.unwrap_or(u.auto_promote);
        u.auto_revert = self.auto_revert.unwrap_or(u.auto_revert);
        Ok(u)
    }
}

/// A group's `disconnect = { stop_after = "30s" }`: a singleton's rule for
/// a worker cut off from every master (docs/design.md#issue-45).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDisconnect {
    stop_after: String,
}

/// A group's `[group.logs]` table: its executors' own output rotation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLogs {
    max_bytes: Option<u64>,
    files: Option<u32>,
}

/// One of a group's `[[group.artifacts]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArtifact {
    source: String,
    sha256: String,
    #[serde(default)]
    dest: String,
    #[serde(default)]
    unpack: bool,
}

/// A group's `[group.restart]` table; durations are written as people
/// write them (`500ms`, `10s`, `5m`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, bound = "")]
struct RawRestart<C: Carrier> {
    mode: Option<C::Of<String>>,
    attempts: Option<C::Of<u32>>,
    delay: Option<C::Of<String>>,
    max_delay: Option<C::Of<String>>,
    healthy_after: Option<C::Of<String>>,
}

impl<C: Carrier> RawRestart<C> {
    /// The policy; an error names the key (the caller adds where it is).
    fn policy(&self) -> Result<regent_core::policy::RestartPolicy, (Range<usize>, String)> {
        let mut r = regent_core::policy::RestartPolicy::default();
        if let Some(v) = &self.mode {
            r.mode = regent_core::policy::RestartMode::from_name(v.get_ref()).ok_or_else(|| {
                (
                    v.span(),
                    format!(
                        "key \"restart.mode\": {:?} is no restart mode (batch or service)",
                        v.get_ref()
                    ),
                )
            })?;
        }
        r.attempts = self.attempts.as_ref().map(|v| *v.get_ref());
        let ms = |key: &str, v: &Option<C::Of<String>>| -> Result<u64, (Range<usize>, String)> {
            match v {
                None => Ok(0),
                Some(v) => duration_ms(v.get_ref())
                    .map_err(|e| (v.span(), format!("key \"restart.{key}\": {e}"))),
            }
        };
        r.delay_ms = ms("delay", &self.delay)?;
        r.max_delay_ms = ms("max_delay", &self.max_delay)?;
        r.healthy_after_ms = ms("healthy_after", &self.healthy_after)?;
        Ok(r)
    }
}

impl<C: Carrier> RawGroup<C> {
    /// Where `key`'s value is, if the group sets it.
    fn span_of(&self, key: GroupKey) -> Option<Range<usize>> {
        match key {
            GroupKey::Name => Some(self.name.span()),
            GroupKey::Slots => self.count.as_ref().map(|v| v.span()),
            GroupKey::Command => Some(self.command.span()),
            GroupKey::Env => self.env.as_ref().map(|v| v.span()),
            GroupKey::Cores => self.cores.as_ref().map(|v| v.span()),
            GroupKey::MemoryMb => self.memory_mb.as_ref().map(|v| v.span()),
            GroupKey::Constraints => self.constraints.as_ref().map(|v| v.span()),
            GroupKey::Spread => self.spread.as_ref().map(|v| v.span()),
            GroupKey::Restart => self.restart.as_ref().map(|v| v.span()),
            GroupKey::Cwd => self.cwd.as_ref().map(|v| v.span()),
            GroupKey::KillGrace => self.kill_grace.as_ref().map(|v| v.span()),
            GroupKey::Artifacts => self.artifacts.as_ref().map(|v| v.span()),
            GroupKey::Ports => self.ports.as_ref().map(|v| v.span()),
            GroupKey::User => self.user.as_ref().map(|v| v.span()),
            GroupKey::Resources => self.resources.as_ref().map(|v| v.span()),
            GroupKey::Logs => self.logs.as_ref().map(|v| v.span()),
            GroupKey::Priority => self.priority.as_ref().map(|v| v.span()),
            GroupKey::Disconnect => self.disconnect.as_ref().map(|v| v.span()),
            GroupKey::Check => self.check.as_ref().map(|v| v.span()),
            GroupKey::Update => self.update.as_ref().map(|v| v.span()),
        }
    }

    /// The group's launch keys (`cwd`, `kill_grace`, `artifacts`, `ports`,
    /// `user`, `resources`); an error
    /// names the key (the caller adds where it is). Their rules are checked
    /// by the job's validation.
    fn launch(&self) -> Result<regent_core::launch::LaunchSpec, (Range<usize>, String)> {
        let mut l = regent_core::launch::LaunchSpec {
            cwd: self.cwd.as_ref().map(|v| v.get_ref().clone()),
            ports: self.ports.as_ref().map_or_else(Vec::new, |v| v.get_ref().clone()),
            user: self.user.as_ref().map(|v| v.get_ref().clone()),
            // A table, so in name order.
            resources: self
                .resources
                .as_ref()
                .map_or_else(Vec::new, |v| v.get_ref().clone().into_iter().collect()),
            logs: self.logs.as_ref().map(|v| regent_core::launch::LogRotation {
                max_bytes: v.get_ref().max_bytes,
                files: v.get_ref().files,
            }),
            ..Default::default()
        };
        if let Some(v) = &self.kill_grace {
            l.kill_grace_ms = Some(
                duration_ms(v.get_ref())
                    .map_err(|e| (v.span(), format!("key \"kill_grace\": {e}")))?,
            );
        }
        if let Some(v) = &self.disconnect {
            let ms = duration_ms(&v.get_ref().stop_after)
                .map_err(|e| (v.span(), format!("key \"disconnect.stop_after\": {e}")))?;
            l.disconnect = Some(regent_core::launch::Disconnect::after_ms(ms));
        }
        if let Some(v) = &self.check {
            for (i, c) in v.get_ref().iter().enumerate() {
                l.checks.push(c.spec(i).map_err(|e| (v.span(), e))?);
            }
        }
        if let Some(v) = &self.artifacts {
            l.artifacts = v
                .get_ref()
                .iter()
                .map(|a| regent_core::launch::Artifact {
                    source: a.source.clone(),
                    sha256: a.sha256.clone(),
                    dest: a.dest.clone(),
                    unpack: a.unpack,
                })
                .collect();
        }
        Ok(l)
    }

    /// The group's policy keys; an error names the key (the caller adds
    /// where it is).
    fn policy(&self) -> Result<regent_core::policy::GroupPolicy, (Range<usize>, String)> {
        let mut p = regent_core::policy::GroupPolicy::default();
        if let Some(v) = &self.placement {
            p.placement =
                Some(regent_core::policy::Placement::from_name(v.get_ref()).ok_or_else(|| {
                    (
                        v.span(),
                        format!(
                            "key \"placement\": {:?} is no placement (pack or spread)",
                            v.get_ref()
                        ),
                    )
                })?);
        }
        if let Some(v) = &self.constraints {
            for c in v.get_ref() {
                let c = regent_core::policy::Constraint::parse(c)
                    .map_err(|e| (v.span(), format!("key \"constraints\": {e}")))?;
                p.constraints.push(c);
            }
        }
        p.spread = self.spread.as_ref().map(|v| v.get_ref().clone());
        if let Some(v) = &self.priority {
            use regent_core::policy::{MAX_PRIORITY, MIN_PRIORITY};
            p.priority = u8::try_from(*v.get_ref())
                .ok()
                .filter(|p| *p <= MAX_PRIORITY)
                .ok_or_else(|| {
                    (
                        v.span(),
                        format!(
                            "key \"priority\": {} is out of range: a priority is {MIN_PRIORITY} to {MAX_PRIORITY}",
                            v.get_ref()
                        ),
                    )
                })?;
        }
        if let Some(r) = &self.restart {
            p.restart = r.get_ref().policy()?;
        }
        if let Some(v) = &self.update {
            p.update = Some(Box::new(v.get_ref().policy().map_err(|e| (v.span(), e))?));
        }
        Ok(p)
    }

    fn to_group(&self) -> JobGroup {
        let mut g = JobGroup::new(self.name.get_ref().clone(), self.command.get_ref().clone());
        g.count = self.count.as_ref().map_or(g.count, |v| *v.get_ref());
        g.env = self.env.as_ref().map_or_else(BTreeMap::new, |v| v.get_ref().clone());
        g.cores = self.cores.as_ref().map_or(g.cores, |v| *v.get_ref());
        g.memory_mb = self.memory_mb.as_ref().map_or(g.memory_mb, |v| *v.get_ref());
        // Checked in `parse` before.
        g.policy = self.policy().unwrap_or_default();
        g.launch = self.launch().unwrap_or_default();
        g
    }
}

impl<C: Carrier> RawJob<C> {
    /// The job as read (each group's policy and launch keys checked
    /// before: see [`RawGroup::policy`] and [`RawGroup::launch`]).
    fn to_job(&self) -> JobSpec {
        JobSpec {
            name: self.name.get_ref().clone(),
            groups: self.group.iter().map(|g| g.get_ref().to_group()).collect(),
            tenant: self.tenant.as_ref().map(|t| t.get_ref().clone()),
        }
    }
}

/// The most bytes of a job file the HTTP API reads (`POST /v1/jobs`); the
/// server refuses a larger body before parsing it.
pub const MAX_JOB_BYTES: usize = 1 << 20;

/// Why a job sent as JSON is refused: the field at fault when one is
/// (`group[0].count`, `name`), and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", field.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct FieldError {
    /// The path of the field at fault (`group[1].restart.delay`), if one is.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl FieldError {
    fn at(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError { field: Some(field.into()), message: message.into() }
    }
}

/// A job sent as JSON (`POST /v1/jobs`): the job file's keys, plus an
/// optional top-level `"id"` (the job's id; `None`: the client did not
/// choose one). Validated like the file; an error names the field's path.
pub fn parse_json(body: &[u8]) -> Result<(Option<String>, JobSpec), FieldError> {
    let mut value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| FieldError { field: None, message: format!("the body is not JSON: {e}") })?;
    let Some(object) = value.as_object_mut() else {
        return Err(FieldError {
            field: None,
            message: "the body must be a JSON object (a job: name, group, id)".into(),
        });
    };
    let id = match object.remove("id") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(id)) => Some(id),
        Some(other) => {
            return Err(FieldError::at("id", format!("invalid type: {other}, expected a string")))
        }
    };
    let raw: RawJob<Json> = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = json_message(&e.inner().to_string());
        let field = (path != ".").then_some(path);
        FieldError { field, message }
    })?;
    for (i, g) in raw.group.iter().enumerate() {
        if let Err((_, e)) = g.get_ref().policy().and_then(|_| g.get_ref().launch()) {
            // The messages start `key "restart.delay": ...`.
            let (key, message) = match e.strip_prefix("key \"").and_then(|r| r.split_once("\": ")) {
                Some((key, rest)) => (format!("group[{i}].{key}"), rest.to_string()),
                None => (format!("group[{i}]"), e),
            };
            return Err(FieldError::at(key, message));
        }
    }
    let job = raw.to_job();
    job.validate().map_err(|e| {
        let field = match (e.key, e.group) {
            (JobKey::Name, _) => Some("name".to_string()),
            (JobKey::Group(key), Some(i)) => {
                Some(format!("group[{i}].{}", regent_core::job::key_name(key)))
            }
            (_, Some(i)) => Some(format!("group[{i}]")),
            (_, None) => Some("group".to_string()),
        };
        FieldError { field, message: e.message }
    })?;
    Ok((id, job))
}

/// serde's message for JSON: an unknown field with the fields that are.
fn json_message(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field ") else { return message.to_string() };
    let field = rest.split(',').next().unwrap_or(rest);
    if rest.contains("`sha256`") {
        format!("unknown field {field}; an artifact's fields are source, sha256, dest, unpack")
    } else if rest.contains("`count`") {
        format!("unknown field {field}; a group's fields are {GROUP_KEYS}")
    } else if rest.contains("`attempts`") {
        format!("unknown field {field}; restart's fields are mode, attempts, delay, max_delay, healthy_after")
    } else if rest.contains("`min_healthy_time`") {
        format!("unknown field {field}; update's fields are {UPDATE_KEYS}")
    } else if rest.contains("`max_bytes`") {
        format!("unknown field {field}; logs' fields are max_bytes, files")
    } else if rest.contains("`failures`") {
        format!("unknown field {field}; {CHECK_KEYS}")
    } else {
        format!("unknown field {field}; a job's fields are id, name, tenant and group")
    }
}

/// The keys of a group's `[group.update]`, in the order docs/jobs.md lists
/// them.
const UPDATE_KEYS: &str = "max_parallel, min_healthy_time, healthy_deadline, progress_deadline, canary, auto_promote, auto_revert";

/// A group's keys, in the order docs/jobs.md lists them.
const GROUP_KEYS: &str = "name, count, command, env, cores, memory_mb, placement, constraints, spread, priority, restart, cwd, kill_grace, artifacts, ports, user, resources, logs, disconnect, check, update";

/// A check's keys, in the order docs/jobs.md lists them.
const CHECK_KEYS: &str = "a check's keys are type, name, port, path, expect, command, ttl, interval, timeout, grace, failures";

/// Why a duration is refused ([`duration_ms`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a duration.
    #[error("{text:?} is no duration ({reason}; write e.g. 500ms, 10s, 5m)")]
    Malformed {
        /// What was written.
        text: String,
        /// The parser's reason.
        reason: String,
    },
    /// More milliseconds than 64 bits hold.
    #[error("{0:?} is too long")]
    TooLong(String),
}

/// A duration as people write it (`500ms`, `10s`, `5m`), in milliseconds.
pub fn duration_ms(s: &str) -> Result<u64, DurationError> {
    let d = humantime::parse_duration(s)
        .map_err(|e| DurationError::Malformed { text: s.to_string(), reason: e.to_string() })?;
    u64::try_from(d.as_millis()).map_err(|_| DurationError::TooLong(s.to_string()))
}

/// Why a job file is refused ([`load`], [`parse`]).
#[derive(Debug, thiserror::Error)]
pub enum JobFileError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid job: the message names the file, line and
    /// column, the group and the key (`job.toml:12:1: group "mappers":
    /// cores must be at least 1`).
    #[error("{0}")]
    Invalid(String),
}

/// `line:column` (from 1) of byte `offset` of `text`.
fn position(text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("{line}:{column}")
}

/// Reads and validates the job file at `path`.
pub fn load(path: &Path) -> Result<JobSpec, JobFileError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| JobFileError::Read { path: path.display().to_string(), source })?;
    parse(&path.display().to_string(), &text)
}

/// Parses and validates `text`, the job file `file` (named in errors).
pub fn parse(file: &str, text: &str) -> Result<JobSpec, JobFileError> {
    parse_text(file, text).map_err(JobFileError::Invalid)
}

/// [`parse`], its error the message.
fn parse_text(file: &str, text: &str) -> Result<JobSpec, String> {
    let at = |offset: usize| format!("{file}:{}", position(text, key_start(text, offset)));
    let raw: RawJob<Toml> = toml::from_str(text).map_err(|e| {
        let message = serde_message(e.message());
        match e.span() {
            Some(span) => {
                let named =
                    message.starts_with("unknown key") || message.starts_with("missing key");
                let key = key_at(text, span.start)
                    .filter(|_| !named)
                    .map(|k| format!("key \"{k}\": "))
                    .unwrap_or_default();
                let group = group_at(text, span.start)
                    .map(|g| format!("group {g:?}: "))
                    .unwrap_or_default();
                format!("{}: {group}{key}{message}", at(span.start))
            }
            None => format!("{file}: {message}"),
        }
    })?;
    for g in &raw.group {
        if let Err((span, e)) = g.get_ref().policy().and_then(|_| g.get_ref().launch()) {
            return Err(format!("{}: group {:?}: {e}", at(span.start), g.get_ref().name.get_ref()));
        }
    }
    let job = raw.to_job();
    job.validate().map_err(|e| {
        let span = match (e.key, e.group) {
            (JobKey::Name, _) => Some(raw.name.span()),
            (JobKey::Group(key), Some(i)) => {
                let g = &raw.group[i];
                Some(g.get_ref().span_of(key).unwrap_or_else(|| g.span()))
            }
            (_, Some(i)) => Some(raw.group[i].span()),
            (_, None) => {
                raw.group.get(regent_core::limits::MAX_GROUPS_PER_FRAMEWORK).map(|v| v.span())
            }
        };
        match span {
            Some(span) => format!("{}: {}", at(span.start), e.message),
            None => format!("{file}: {}", e.message),
        }
    })?;
    Ok(job)
}

/// serde's message in the job file's words: keys, not fields, and for an
/// unknown key the keys that are (not those refused as not supported yet).
fn serde_message(message: &str) -> String {
    let message = message.replace("missing field", "missing key");
    let Some(rest) = message.strip_prefix("unknown field ") else { return message };
    let key = rest.split(',').next().unwrap_or(rest);
    if rest.contains("`sha256`") {
        format!("unknown key {key}; an artifact's keys are source, sha256, dest, unpack")
    } else if rest.contains("`failures`") {
        format!("unknown key {key}; {CHECK_KEYS}")
    } else if rest.contains("`count`") {
        format!("unknown key {key}; a group's keys are {GROUP_KEYS}")
    } else if rest.contains("`min_healthy_time`") {
        format!("unknown key {key}; update's keys are {UPDATE_KEYS}")
    } else {
        format!("unknown key {key}; a job's keys are name and group")
    }
}

/// The line of `text` holding byte `offset`, and where that line starts.
fn line_at(text: &str, offset: usize) -> (usize, &str) {
    let offset = offset.min(text.len());
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    (start, &text[start..offset])
}

/// The key written before the value at `offset` on its line (`key = value`),
/// if there is one.
fn key_at(text: &str, offset: usize) -> Option<&str> {
    let (_, before) = line_at(text, offset);
    let key = match before.trim_end().strip_suffix('=') {
        Some(key) => key,
        // Or the error is at a key itself (a duplicate): `key = ...` after it.
        None if before.trim().is_empty() => text[offset.min(text.len())..].split('=').next()?,
        None => return None,
    };
    let key = key.trim().trim_matches('"');
    let bare = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    (!key.is_empty() && key.chars().all(bare)).then_some(key)
}

/// Where the key of the value at `offset` starts, or `offset` itself when
/// no key is written before it on its line (positions point at keys).
fn key_start(text: &str, offset: usize) -> usize {
    let (start, before) = line_at(text, offset);
    match key_at(text, offset) {
        Some(_) => start + (before.len() - before.trim_start().len()),
        None => offset,
    }
}

/// The name of the `[[group]]` table holding byte `offset`, when the file
/// can be read that far (for messages of values serde refused).
fn group_at(text: &str, offset: usize) -> Option<String> {
    #[derive(Deserialize)]
    struct Names {
        #[serde(default)]
        group: Vec<Spanned<Name>>,
    }
    #[derive(Deserialize)]
    struct Name {
        name: Option<toml::Value>,
    }
    let headers: Vec<usize> = text
        .match_indices("[[group]]")
        .filter(|(i, _)| line_at(text, *i).1.trim().is_empty())
        .map(|(i, _)| i)
        .collect();
    let index = headers.iter().rposition(|&h| h <= offset)?;
    let names: Names = toml::from_str(text).ok()?;
    match names.group.get(index)?.get_ref().name.as_ref()? {
        toml::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse("job.toml", text).expect_err("refused").to_string()
    }

    const TWO: &str = r#"name = "wordcount"

[[group]]
name = "driver"
command = ["sh", "-c", "echo driving"]

[[group]]
name = "mappers"
count = 4
command = ["wc", "-l"]
env = { INPUT = "/data/in", MODE = "fast" }
cores = 2
memory_mb = 256
"#;

    #[test]
    fn an_update_block_fills_the_policy_and_a_broken_one_names_group_and_key() {
        let block = "[group.update]\nmax_parallel = 2\nmin_healthy_time = \"3s\"\ncanary = 1\nauto_promote = true\nhealthy_deadline = \"1m\"\nprogress_deadline = \"2m\"\n";
        let job = parse("job.toml", &format!("{TWO}{block}")).unwrap();
        let u = job.groups[1].policy.update.as_deref().copied().expect("the update block");
        assert_eq!(
            u,
            regent_core::policy::UpdatePolicy {
                max_parallel: 2,
                min_healthy_time_ms: 3_000,
                healthy_deadline_ms: 60_000,
                progress_deadline_ms: 120_000,
                canary: 1,
                auto_promote: true,
                auto_revert: true,
            }
        );
        assert_eq!(job.groups[0].policy.update, None, "defaults, not written");
        let e = err(&format!("{TWO}[group.update]\nmax_parallel = 5\n"));
        assert!(
            e.contains("group \"mappers\"")
                && e.contains("update.max_parallel is 5; it is 1 to the group's count (4)"),
            "{e}"
        );
        let e = err(&format!("{TWO}[group.update]\nmin_healthy_time = \"10m\"\n"));
        assert!(e.contains("update.healthy_deadline (300000 ms) must be more than"), "{e}");
        let e = err(&format!("{TWO}[group.update]\nmin_healthy_time = \"soon\"\n"));
        assert!(e.contains("key \"update.min_healthy_time\": \"soon\" is no duration"), "{e}");
        let e = err(&format!("{TWO}[group.update]\nsurge = 1\n"));
        assert!(e.contains("unknown key `surge`; update's keys are max_parallel,"), "{e}");
        let body = br#"{"name": "web", "group": [{"name": "g", "count": 3, "command": ["true"],
            "update": {"max_parallel": 2, "min_healthy_time": "0s", "auto_revert": false}}]}"#;
        let u = parse_json(body).unwrap().1.groups[0].policy.update_or_default();
        assert_eq!((u.max_parallel, u.min_healthy_time_ms, u.auto_revert), (2, 0, false));
        let body = br#"{"name": "web", "group": [{"name": "g", "command": ["true"],
            "update": {"canary": 2}}]}"#;
        let e = parse_json(body).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("group[0].update"));
        assert_eq!(e.message, "group \"g\": update.canary is 2; it is 0 to the group's count (1)");
    }

    #[test]
    fn a_job_file_names_its_tenant_in_toml_and_json() {
        let job = parse("job.toml", &format!("tenant = \"team-a\"\n{TWO}")).unwrap();
        assert_eq!(job.tenant.as_deref(), Some("team-a"));
        assert_eq!(parse("job.toml", TWO).unwrap().tenant, None);
        let body = br#"{"name": "web", "tenant": "team-b", "group": [{"name": "g", "command": ["true"]}]}"#;
        let (_, job) = parse_json(body).unwrap();
        assert_eq!(job.tenant.as_deref(), Some("team-b"));
    }

    #[test]
    fn a_valid_two_group_file_parses_to_its_job() {
        let job = parse("job.toml", TWO).unwrap();
        let mut mappers = JobGroup::new("mappers", vec!["wc".into(), "-l".into()]);
        mappers.count = 4;
        mappers.env = [("INPUT", "/data/in"), ("MODE", "fast")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        mappers.cores = 2;
        mappers.memory_mb = 256;
        let driver = JobGroup::new("driver", vec!["sh".into(), "-c".into(), "echo driving".into()]);
        assert_eq!(
            job,
            JobSpec { name: "wordcount".into(), groups: vec![driver, mappers], tenant: None }
        );
    }

    #[test]
    fn a_rule_broken_names_file_line_column_group_and_key() {
        let text = TWO.replace("cores = 2", "cores = 0");
        assert_eq!(err(&text), "job.toml:12:1: group \"mappers\": cores must be at least 1");
        let text = TWO.replace("count = 4", "count = 0");
        assert_eq!(err(&text), "job.toml:9:1: group \"mappers\": count must be at least 1");
        let text = TWO.replace("name = \"mappers\"", "name = \"driver\"");
        assert_eq!(
            err(&text),
            "job.toml:8:1: group \"driver\" is named twice; group names must be unique"
        );
        assert_eq!(err("name = \"empty\"\n"), "job.toml: job \"empty\" has no group");
    }

    #[test]
    fn a_value_of_the_wrong_type_names_its_key_and_group() {
        let text = TWO.replace("count = 4", "count = \"four\"");
        let e = err(&text);
        assert!(e.starts_with("job.toml:9:1: group \"mappers\": key \"count\": "), "{e}");
        assert!(e.contains("string"), "{e}");
        let e = err(&TWO.replace("cores = 2", "cores = -1"));
        assert!(e.starts_with("job.toml:12:1: group \"mappers\": key \"cores\": "), "{e}");
    }

    #[test]
    fn an_unknown_key_is_named() {
        let e = err(&TWO.replace("cores = 2", "coers = 2"));
        assert!(e.starts_with("job.toml:12:1: "), "{e}");
        assert!(e.contains("unknown key `coers`"), "{e}");
        assert_eq!(
            err(&format!("owner = \"me\"\n{TWO}")),
            "job.toml:1:1: unknown key `owner`; a job's keys are name and group"
        );
    }

    #[test]
    fn a_missing_or_duplicate_key_is_named() {
        assert_eq!(
            err("name = \"x\"\n[[group]]\nname = \"a\"\n"),
            "job.toml:2:1: group \"a\": missing key `command`"
        );
        // Not TOML: the group is not known, the key is.
        assert_eq!(
            err(&TWO.replace("cores = 2", "count = 2")),
            "job.toml:12:1: key \"count\": duplicate key"
        );
    }

    #[test]
    fn a_user_to_run_as_is_read_and_checked() {
        let text = TWO.replace("cores = 2", "user = \"alice\"");
        let job = parse("job.toml", &text).unwrap();
        assert_eq!(job.groups[1].launch.user.as_deref(), Some("alice"));
        assert_eq!(job.groups[0].launch.user, None);
        let e = err(&TWO.replace("cores = 2", "user = \"-rf\""));
        assert!(e.starts_with("job.toml:12:1: group \"mappers\": "), "{e}");
        assert!(e.contains("user \"-rf\" must be 1 to 32 letters"), "{e}");
        assert!(err(&TWO.replace("cores = 2", "user = \"a/b\"")).contains("user \"a/b\""));
    }

    #[test]
    fn a_groups_own_log_rotation_is_read_and_checked() {
        let text = TWO.replace("cores = 2", "logs = { max_bytes = 65536, files = 2 }");
        let job = parse("job.toml", &text).unwrap();
        let want = regent_core::launch::LogRotation { max_bytes: Some(65536), files: Some(2) };
        assert_eq!(job.groups[1].launch.logs, Some(want));
        assert_eq!(job.groups[0].launch.logs, None);
        let e = err(&TWO.replace("cores = 2", "logs = { files = 0 }"));
        assert!(e.starts_with("job.toml:12:1: group \"mappers\": "), "{e}");
        assert!(e.contains("files 1 to 1000"), "{e}");
        let e = err(&TWO.replace("cores = 2", "logs = { size = 1 }"));
        assert!(e.contains("unknown"), "{e}");
    }

    #[test]
    fn named_resources_are_read_and_checked() {
        let text = TWO.replace("cores = 2", "resources = { gpu = 2, fpga = 1 }");
        let job = parse("job.toml", &text).unwrap();
        let want = vec![("fpga".to_string(), 1), ("gpu".to_string(), 2)];
        assert_eq!(job.groups[1].launch.resources, want);
        assert!(job.groups[0].launch.resources.is_empty());
        let e = err(&TWO.replace("cores = 2", "resources = { gpu = 0 }"));
        assert!(e.starts_with("job.toml:12:1: group \"mappers\": "), "{e}");
        assert!(e.contains("amount \"0\" must be a whole number from 1 to 256"), "{e}");
        let e = err(&TWO.replace("cores = 2", "resources = { GPU = 1 }"));
        assert!(e.contains("resource name \"GPU\""), "{e}");
    }

    #[test]
    fn named_ports_are_read_and_their_names_checked() {
        let text = TWO.replace("cores = 2", "ports = [\"http\", \"admin\"]");
        let job = parse("job.toml", &text).unwrap();
        assert_eq!(job.groups[1].launch.ports, ["http", "admin"]);
        assert!(job.groups[0].launch.ports.is_empty());
        let text = TWO.replace("cores = 2", "ports = [\"HTTP\"]");
        let e = err(&text);
        assert!(e.starts_with("job.toml:12:1: group \"mappers\": "), "{e}");
        assert!(e.contains("port name \"HTTP\" must be"), "{e}");
        let text = TWO.replace("cores = 2", "ports = [\"a\", \"a\"]");
        assert!(err(&text).contains("port \"a\" is named twice"), "{}", err(&text));
        let text = TWO.replace("cores = 2", "ports = \"http\"");
        let e = err(&text);
        assert!(e.starts_with("job.toml:12:1: group \"mappers\": key \"ports\": "), "{e}");
    }

    #[test]
    fn a_restart_table_fills_the_restart_policy() {
        let text = format!(
            "{TWO}\n[group.restart]\nmode = \"service\"\nattempts = 5\ndelay = \"500ms\"\nmax_delay = \"1m\"\nhealthy_after = \"10m\"\n"
        );
        let job = parse("job.toml", &text).unwrap();
        let r = &job.groups[1].policy.restart;
        assert_eq!(r.mode, regent_core::policy::RestartMode::Service);
        assert_eq!(
            (r.attempts, r.delay_ms, r.max_delay_ms, r.healthy_after_ms),
            (Some(5), 500, 60_000, 600_000)
        );
        assert!(job.groups[0].policy.is_default(), "the table is the second group's");
        let e = err(&format!("{TWO}\n[group.restart]\ndelay = \"soon\"\n"));
        assert!(
            e.starts_with(
                "job.toml:16:1: group \"mappers\": key \"restart.delay\": \"soon\" is no duration"
            ),
            "{e}"
        );
        let e = err(&format!("{TWO}\n[group.restart]\nmode = \"forever\"\n"));
        assert!(e.contains("\"forever\" is no restart mode (batch or service)"), "{e}");
        let e = err(&format!("{TWO}\n[group.restart]\ndelay = \"2m\"\nmax_delay = \"1m\"\n"));
        assert!(
            e.starts_with("job.toml:15:1: group \"mappers\": restart: "),
            "the table is named: {e}"
        );
        assert!(e.contains("max_delay"), "{e}");
        let e = err(&format!("{TWO}\n[group.restart]\nretries = 3\n"));
        assert!(e.contains("unknown key `retries`"), "{e}");
    }

    /// [`TWO`] with a port `http` and the check `check` for the mappers.
    fn checked(check: &str) -> String {
        format!("{TWO}ports = [\"http\"]\n\n[[group.check]]\n{check}\n")
    }

    #[test]
    fn checks_fill_the_launch_with_defaults_and_a_bad_one_names_group_and_key() {
        use regent_core::launch::{CheckKind, CheckSpec};
        let job = parse(
            "job.toml",
            &checked(
                "type = \"http\"\nport = \"http\"\npath = \"/health\"\ninterval = \"5s\"\n\
                 timeout = \"3s\"\ngrace = \"1s\"\nfailures = 2\nexpect = [200, 299]\n\n\
                 [[group.check]]\ntype = \"tcp\"\nport = \"http\"\n\n\
                 [[group.check]]\ntype = \"exec\"\nname = \"ready\"\ncommand = [\"test\", \"-f\", \"ready\"]",
            ),
        )
        .unwrap();
        let checks = &job.groups[1].launch.checks;
        let http =
            CheckKind::Http { port: "http".into(), path: "/health".into(), expect: (200, 299) };
        assert_eq!(
            checks[0],
            CheckSpec {
                interval_ms: 5_000,
                timeout_ms: 3_000,
                grace_ms: 1_000,
                failures: 2,
                ..CheckSpec::new(http)
            }
        );
        assert_eq!(checks[1], CheckSpec::new(CheckKind::Tcp { port: "http".into() }));
        assert_eq!(checks[2].name, "ready");
        assert_eq!(checks[2].interval_ms, 10_000);
        assert!(job.groups[0].launch.checks.is_empty());
        // A manual check: its framework reports (`ReportHealth`).
        let manual =
            parse("job.toml", &checked("type = \"manual\"\nname = \"ready\"\nttl = \"20s\""));
        let manual = &manual.unwrap().groups[1].launch.checks[0];
        assert_eq!(manual.kind, CheckKind::Manual { ttl_ms: 20_000 });
        assert_eq!(manual.name, "ready");
        // A port the group does not ask for, two checks of one name, a
        // type that takes no such key, a type that is none: each names
        // the group and the key.
        let e = err(&checked("type = \"tcp\"\nport = \"grpc\""));
        assert!(
            e.contains(
                "group \"mappers\": check[0]: port \"grpc\" is not one of the group's ports"
            ),
            "{e}"
        );
        let e = err(&checked(
            "type = \"tcp\"\nport = \"http\"\n[[group.check]]\ntype = \"tcp\"\nport = \"http\"",
        ));
        assert!(e.contains("check[1]: name \"tcp\" is taken"), "{e}");
        let e = err(&checked("type = \"tcp\"\nport = \"http\"\npath = \"/\""));
        assert!(
            e.contains("group \"mappers\": key \"check[0].path\": a tcp check takes no path"),
            "{e}"
        );
        let e = err(&checked("type = \"manual\"\nttl = \"20ms\""));
        assert!(e.contains("check[0]: ttl 20 ms is out of range"), "{e}");
        let e = err(&checked("type = \"grpc\""));
        assert!(e.contains("key \"check[0].type\": \"grpc\" is no check type"), "{e}");
        let e = err(&checked("type = \"http\"\nport = \"http\"\ntimeout = \"50ms\""));
        assert!(e.contains("check[0]: timeout 50 ms is out of range"), "{e}");
        let e = err(&checked("type = \"http\"\nport = \"http\"\nretries = 3"));
        assert!(e.contains("unknown key `retries`; a check's keys are type, name"), "{e}");
        // The same as JSON, the field named by its path.
        let body =
            br#"{"name": "web", "group": [{"name": "g", "command": ["true"], "ports": ["http"],
            "check": [{"type": "http", "port": "http", "path": "/health", "interval": "2s"}]}]}"#;
        let spec = parse_json(body).unwrap().1;
        assert_eq!(spec.groups[0].launch.checks[0].interval_ms, 2_000);
        let body = br#"{"name": "web", "group": [{"name": "g", "command": ["true"],
            "check": [{"type": "tcp"}]}]}"#;
        let e = parse_json(body).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("group[0].check[0].port"));
        let body = br#"{"name": "web", "group": [{"name": "g", "command": ["true"],
            "check": [{"type": "tcp", "port": "http"}]}]}"#;
        let e = parse_json(body).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("group[0].check"));
        assert!(
            e.message.contains("port \"http\" is not one of the group's ports"),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_disconnect_rule_fills_the_launch_and_a_zero_or_absurd_one_names_the_group() {
        let job =
            parse("job.toml", &TWO.replace("cores = 2", "disconnect = { stop_after = \"30s\" }"))
                .unwrap();
        assert_eq!(
            job.groups[1].launch.disconnect,
            Some(regent_core::launch::Disconnect::after_ms(30_000))
        );
        assert_eq!(job.groups[0].launch.disconnect, None);
        for (bad, ms) in [("0s", 0), ("500ms", 500), ("2d", 172_800_000)] {
            let e =
                err(&TWO
                    .replace("cores = 2", &format!("disconnect = {{ stop_after = \"{bad}\" }}")));
            assert!(
                e.starts_with("job.toml:12:1: group \"mappers\": ")
                    && e.contains(&format!("disconnect.stop_after {ms} ms is out of range")),
                "{e}"
            );
        }
        let e = err(&TWO.replace("cores = 2", "disconnect = { stop_after = \"soon\" }"));
        assert!(e.contains("key \"disconnect.stop_after\": \"soon\" is no duration"), "{e}");
        let e = err(&TWO.replace("cores = 2", "disconnect = { after = \"30s\" }"));
        assert!(e.contains("after"), "{e}");
        let body = br#"{"name": "web", "group": [{"name": "g", "command": ["true"],
            "disconnect": {"stop_after": "45s"}}]}"#;
        let spec = parse_json(body).unwrap().1;
        assert_eq!(spec.groups[0].launch.disconnect.map(|d| d.stop_after_ms), Some(45_000));
        let body = br#"{"name": "web", "group": [{"name": "g", "command": ["true"],
            "disconnect": {"stop_after": "0s"}}]}"#;
        let e = parse_json(body).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("group[0].disconnect"));
        assert!(e.message.contains("0 ms is out of range"), "{}", e.message);
    }

    #[test]
    fn a_priority_fills_the_policy_and_one_out_of_range_names_group_and_value() {
        let job = parse("job.toml", &TWO.replace("cores = 2", "priority = 80")).unwrap();
        assert_eq!(job.groups[1].policy.priority, 80);
        assert_eq!(job.groups[0].policy.priority, regent_core::policy::DEFAULT_PRIORITY);
        for bad in ["101", "300", "4294967295"] {
            let e = err(&TWO.replace("cores = 2", &format!("priority = {bad}")));
            assert_eq!(
                e,
                format!("job.toml:12:1: group \"mappers\": key \"priority\": {bad} is out of range: a priority is 0 to 100")
            );
        }
        let body =
            br#"{"name": "web", "group": [{"name": "g", "command": ["true"], "priority": 150}]}"#;
        let e = parse_json(body).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("group[0].priority"));
        assert_eq!(e.message, "150 is out of range: a priority is 0 to 100");
        let body =
            br#"{"name": "web", "group": [{"name": "g", "command": ["true"], "priority": 0}]}"#;
        assert_eq!(parse_json(body).unwrap().1.groups[0].policy.priority, 0);
    }

    #[test]
    fn placement_constraints_and_spread_fill_the_policy() {
        let text = TWO.replace(
            "cores = 2",
            "placement = \"pack\"\nconstraints = [\"disk=ssd\", \"rack!=r9\"]\nspread = \"rack\"",
        );
        let job = parse("job.toml", &text).unwrap();
        let p = &job.groups[1].policy;
        assert_eq!(p.placement, Some(regent_core::policy::Placement::Pack));
        let shown: Vec<String> = p.constraints.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["disk=ssd", "rack!=r9"]);
        assert_eq!(p.spread.as_deref(), Some("rack"));
        assert!(job.groups[0].policy.is_default());
        let e = err(&TWO.replace("cores = 2", "placement = \"tight\""));
        assert_eq!(
            e,
            "job.toml:12:1: group \"mappers\": key \"placement\": \"tight\" is no placement (pack or spread)"
        );
        let e = err(&TWO.replace("cores = 2", "constraints = [\"=ssd\"]"));
        assert!(e.starts_with("job.toml:12:1: group \"mappers\": key \"constraints\": "), "{e}");
    }

    #[test]
    fn cwd_kill_grace_and_artifacts_fill_the_launch_options() {
        let digest = "ab".repeat(32);
        let text = format!(
            "{}\n[[group.artifacts]]\nsource = \"http://127.0.0.1:1/tool.tar.gz\"\nsha256 = \"{digest}\"\ndest = \"bin\"\nunpack = true\n\n[[group.artifacts]]\nsource = \"file:///srv/data.csv\"\nsha256 = \"{digest}\"\n",
            TWO.replace("cores = 2", "cwd = \"work\"\nkill_grace = \"10s\"")
        );
        let job = parse("job.toml", &text).unwrap();
        let l = &job.groups[1].launch;
        assert_eq!(l.cwd.as_deref(), Some("work"));
        assert_eq!(l.kill_grace_ms, Some(10_000));
        assert_eq!(l.artifacts.len(), 2);
        assert_eq!(
            (l.artifacts[0].dest.as_str(), l.artifacts[0].unpack, l.artifacts[1].dest.as_str()),
            ("bin", true, "")
        );
        assert!(job.groups[0].launch.is_default());
        let e = err(&TWO.replace("cores = 2", "cwd = \"../elsewhere\""));
        assert!(
            e.starts_with(
                "job.toml:12:1: group \"mappers\": cwd \"../elsewhere\" must be a relative path"
            ),
            "{e}"
        );
        let e = err(&TWO.replace("cores = 2", "kill_grace = \"later\""));
        assert!(
            e.starts_with(
                "job.toml:12:1: group \"mappers\": key \"kill_grace\": \"later\" is no duration"
            ),
            "{e}"
        );
        let e = err(&TWO.replace("cores = 2", "kill_grace = \"2h\""));
        assert!(e.contains("kill_grace 7200000 ms is longer than the most"), "{e}");
        let bad = text.replace(&format!("sha256 = \"{digest}\"\ndest"), "sha256 = \"beef\"\ndest");
        let e = err(&bad);
        assert!(e.contains("group \"mappers\": artifacts[0].sha256 \"beef\" must be 64 lowercase hexadecimal digits"), "{e}");
        let e = err(&text.replace("unpack = true", "unpak = true"));
        assert!(
            e.contains("unknown key `unpak`; an artifact's keys are source, sha256, dest, unpack"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod json_tests {
    use super::*;

    fn err(body: &str) -> FieldError {
        parse_json(body.as_bytes()).expect_err("refused")
    }

    const JOB: &str = r#"{"name": "wordcount", "group": [
        {"name": "driver", "command": ["sh", "-c", "echo driving"]},
        {"name": "mappers", "count": 4, "command": ["wc", "-l"], "cores": 2, "memory_mb": 256,
         "restart": {"mode": "service", "delay": "500ms"}}]}"#;

    #[test]
    fn json_reads_to_the_same_job_as_the_toml_file() {
        let toml = r#"name = "wordcount"
[[group]]
name = "driver"
command = ["sh", "-c", "echo driving"]
[[group]]
name = "mappers"
count = 4
command = ["wc", "-l"]
cores = 2
memory_mb = 256
restart = { mode = "service", delay = "500ms" }
"#;
        let (id, job) = parse_json(JOB.as_bytes()).unwrap();
        assert_eq!(id, None);
        assert_eq!(job, parse("job.toml", toml).unwrap());
        let (id, _) = parse_json(JOB.replacen('{', "{\"id\": \"wc-1\", ", 1).as_bytes()).unwrap();
        assert_eq!(id.as_deref(), Some("wc-1"));
    }

    #[test]
    fn a_wrong_type_names_the_fields_path() {
        let e = err(&JOB.replace("\"count\": 4", "\"count\": \"x\""));
        assert_eq!(e.field.as_deref(), Some("group[1].count"));
        assert_eq!(e.message, "invalid type: string \"x\", expected u32");
        assert_eq!(e.to_string(), "group[1].count: invalid type: string \"x\", expected u32");
        let e = err(&JOB.replacen('{', "{\"id\": 7, ", 1));
        assert_eq!(e.field.as_deref(), Some("id"));
    }

    #[test]
    fn an_unknown_field_is_named() {
        let e = err(&JOB.replace("\"cores\"", "\"coers\""));
        assert!(e.field.as_deref().unwrap_or("").starts_with("group[1]"), "{e:?}");
        assert!(e.message.starts_with("unknown field `coers`; a group's fields are name"), "{e:?}");
        let e = err(&JOB.replacen('{', "{\"owner\": \"me\", ", 1));
        assert!(e
            .message
            .contains("unknown field `owner`; a job's fields are id, name, tenant and group"));
    }

    #[test]
    fn rules_broken_name_the_field() {
        let e = err(&JOB.replace("\"count\": 4", "\"count\": 0"));
        assert_eq!(e.field.as_deref(), Some("group[1].count"));
        assert!(e.message.contains("count must be at least 1"), "{e:?}");
        let e = err(&JOB.replace("\"500ms\"", "\"soon\""));
        assert_eq!(e.field.as_deref(), Some("group[1].restart.delay"));
        assert!(e.message.starts_with("\"soon\" is no duration"), "{e:?}");
        let e = err(r#"{"name": "empty"}"#);
        assert_eq!(e.field.as_deref(), Some("group"));
        let e = err(r#"{"group": []}"#);
        assert!(e.message.contains("missing field `name`"), "{e:?}");
        assert!(err("[1]").message.contains("JSON object"));
        assert!(err("{").message.starts_with("the body is not JSON"));
    }
}

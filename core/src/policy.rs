//! What a group asks of the master beyond its resources: where its
//! executors may run (a placement policy, constraints on worker attributes,
//! an attribute to spread over) and what happens when one ends (a restart
//! policy).
//!
//! A [`GroupPolicy`] travels in [`crate::protocol::GroupSpec::policy`]: a
//! subscriber declares it with the group, the master keeps it in the
//! framework record (so a new leader places and restarts the group the same
//! way), and [`crate::job::JobGroup`] fills it from a job file. The default
//! policy is what a group got before policies existed: the master's own
//! placement, no constraints, batch restarts with the master's retry budget
//! and no delay; a framework record whose groups all have it keeps the
//! earlier store layout byte for byte.
//!
//! Worker attributes, which constraints and `spread` name, are what a worker
//! announces in [`crate::protocol::RegisterWorker::attributes`]
//! (`regent worker --attribute rack=r1`).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Executor placement policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Placement {
    /// Round robin over the workers with room: spreads load.
    #[default]
    Spread,
    /// The fullest worker that still fits: keeps whole workers free.
    Pack,
}

impl Placement {
    /// The name a flag or a job file uses: `spread` or `pack`.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Spread => "spread",
            Placement::Pack => "pack",
        }
    }

    /// The policy named `name` (`spread` or `pack`).
    pub fn from_name(name: &str) -> Option<Placement> {
        match name {
            "spread" => Some(Placement::Spread),
            "pack" => Some(Placement::Pack),
            _ => None,
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a group's executors may run and what happens when one ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupPolicy {
    /// What happens when an executor of the group ends.
    pub restart: RestartPolicy,
    /// How the group's executors are placed; `None`: the master's
    /// [`crate::master::Config::placement`] (`spread` unless an embedder
    /// sets it).
    pub placement: Option<Placement>,
    /// Every constraint a worker must meet to run an executor of the group.
    pub constraints: Vec<Constraint>,
    /// A worker attribute whose values the group's executors are spread
    /// over evenly (`rack`: as many on each rack as placement allows): the
    /// next executor goes to a fitting worker whose value has the fewest
    /// live executors of the group, ties broken by the placement policy.
    /// Workers lacking the attribute count as one value, `""`
    /// ([`spread_value`]).
    pub spread: Option<String>,
    /// The group's priority, [`MIN_PRIORITY`] to [`MAX_PRIORITY`]
    /// ([`DEFAULT_PRIORITY`] unless the group says): waiting slots of a
    /// higher priority are offered capacity first, and may preempt running
    /// executors of a lower one (docs/tenants.md, docs/design.md#issue-44).
    pub priority: u8,
    /// How a change of the group's spec is deployed (`[group.update]`,
    /// docs/jobs.md); `None`: [`UpdatePolicy::default`] (with the
    /// submission's `max_parallel` when it names one). Only the leader
    /// reads it; a change of it alone is no deployment
    /// (docs/design.md#issue-45).
    pub update: Option<Box<UpdatePolicy>>,
}

/// How a changed spec replaces a group's executors: a deployment
/// (`[group.update]` in the job file, `"update"` in `/v1/` JSON;
/// docs/jobs.md, docs/design.md#issue-45). Every group gets the defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdatePolicy {
    /// The most slots below healthy (failed, waiting, starting, being
    /// stopped, or baking) at once; 1 to the group's count.
    pub max_parallel: u32,
    /// How long a new executor must run (pass its checks) before it counts
    /// as healthy, ms.
    pub min_healthy_time_ms: u64,
    /// How long a new executor may take to become healthy before the
    /// deployment fails, ms; more than `min_healthy_time_ms`.
    pub healthy_deadline_ms: u64,
    /// How long a deployment may go without a slot becoming healthy before
    /// it fails, ms; more than `healthy_deadline_ms`, or 0: none.
    pub progress_deadline_ms: u64,
    /// How many slots are replaced first, as canaries, before the
    /// deployment waits to be promoted; 0 to the group's count.
    pub canary: u32,
    /// Whether healthy canaries promote the deployment themselves.
    pub auto_promote: bool,
    /// Whether a failed deployment reverts to the last healthy spec.
    pub auto_revert: bool,
}

/// [`UpdatePolicy::min_healthy_time_ms`] unless a group says.
pub const DEFAULT_MIN_HEALTHY_TIME_MS: u64 = 10_000;
/// [`UpdatePolicy::healthy_deadline_ms`] unless a group says (5 min).
pub const DEFAULT_HEALTHY_DEADLINE_MS: u64 = 300_000;
/// [`UpdatePolicy::progress_deadline_ms`] unless a group says (10 min).
pub const DEFAULT_PROGRESS_DEADLINE_MS: u64 = 600_000;
/// The longest duration an update policy may name (one day).
pub const MAX_UPDATE_DURATION_MS: u64 = 86_400_000;

impl Default for UpdatePolicy {
    fn default() -> Self {
        UpdatePolicy {
            max_parallel: 1,
            min_healthy_time_ms: DEFAULT_MIN_HEALTHY_TIME_MS,
            healthy_deadline_ms: DEFAULT_HEALTHY_DEADLINE_MS,
            progress_deadline_ms: DEFAULT_PROGRESS_DEADLINE_MS,
            canary: 0,
            auto_promote: false,
            auto_revert: true,
        }
    }
}

impl UpdatePolicy {
    /// Why this policy cannot govern a group of `slots` slots: the key at
    /// fault (as the job file spells it, under `update.`) and the rule.
    /// `None` when it keeps every rule.
    pub fn problem(&self, slots: u32) -> Option<String> {
        if self.max_parallel == 0 || self.max_parallel > slots.max(1) {
            return Some(format!(
                "update.max_parallel is {}; it is 1 to the group's count ({slots})",
                self.max_parallel
            ));
        }
        if self.canary > slots {
            return Some(format!(
                "update.canary is {}; it is 0 to the group's count ({slots})",
                self.canary
            ));
        }
        for (key, ms) in [
            ("min_healthy_time", self.min_healthy_time_ms),
            ("healthy_deadline", self.healthy_deadline_ms),
            ("progress_deadline", self.progress_deadline_ms),
        ] {
            if ms > MAX_UPDATE_DURATION_MS {
                return Some(format!(
                    "update.{key} is {ms} ms; the limit is {MAX_UPDATE_DURATION_MS} ms (MAX_UPDATE_DURATION_MS)"
                ));
            }
        }
        if self.healthy_deadline_ms <= self.min_healthy_time_ms {
            return Some(format!(
                "update.healthy_deadline ({} ms) must be more than update.min_healthy_time ({} ms)",
                self.healthy_deadline_ms, self.min_healthy_time_ms
            ));
        }
        if self.progress_deadline_ms != 0 && self.progress_deadline_ms <= self.healthy_deadline_ms {
            return Some(format!(
                "update.progress_deadline ({} ms) must be more than update.healthy_deadline ({} ms), or 0 for none",
                self.progress_deadline_ms, self.healthy_deadline_ms
            ));
        }
        None
    }
}

/// The lowest priority a group may have.
pub const MIN_PRIORITY: u8 = 0;

/// The highest priority a group may have.
pub const MAX_PRIORITY: u8 = 100;

/// The priority of a group that names none (every group before priorities
/// existed).
pub const DEFAULT_PRIORITY: u8 = 50;

impl Default for GroupPolicy {
    fn default() -> Self {
        GroupPolicy {
            restart: RestartPolicy::default(),
            placement: None,
            constraints: Vec::new(),
            spread: None,
            priority: DEFAULT_PRIORITY,
            update: None,
        }
    }
}

impl GroupPolicy {
    /// Whether this is the default policy (see the module docs).
    pub fn is_default(&self) -> bool {
        *self == GroupPolicy::default()
    }

    /// The group's update policy, the defaults unless it names one
    /// ([`UpdatePolicy::default`]).
    pub fn update_or_default(&self) -> UpdatePolicy {
        self.update.as_deref().copied().unwrap_or_default()
    }
}

/// What happens when an executor of a group ends.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartPolicy {
    /// Batch or service.
    pub mode: RestartMode,
    /// How many failed runs of a slot are retried before the slot fails;
    /// `None`: the master's `--max-executor-retries`, shared by the group.
    pub attempts: Option<u32>,
    /// The wait before the first retry, ms; doubled on every further
    /// failure in a row, up to `max_delay_ms`.
    pub delay_ms: u64,
    /// The longest wait between retries, ms; 0: no cap beyond `delay_ms`
    /// doubling.
    pub max_delay_ms: u64,
    /// How long an executor must run before its failures in a row are
    /// forgotten (the backoff starts again from `delay_ms`), ms; 0: never.
    pub healthy_after_ms: u64,
}

/// Whether a slot is done when its executor exits 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RestartMode {
    /// An exit 0 ends the slot; a failure is retried (the default).
    #[default]
    Batch,
    /// The slot is restarted whenever its executor ends, however it ends.
    Service,
}

impl RestartMode {
    /// The name a flag or a job file uses: `batch` or `service`.
    pub fn name(self) -> &'static str {
        match self {
            RestartMode::Batch => "batch",
            RestartMode::Service => "service",
        }
    }

    /// The mode named `name` (`batch` or `service`).
    pub fn from_name(name: &str) -> Option<RestartMode> {
        match name {
            "batch" => Some(RestartMode::Batch),
            "service" => Some(RestartMode::Service),
            _ => None,
        }
    }
}

impl fmt::Display for RestartMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A condition on one worker attribute.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Constraint {
    /// The attribute's name, e.g. `rack`.
    pub attribute: String,
    /// What its value must be.
    pub op: ConstraintOp,
}

/// What a [`Constraint`] asks of an attribute's value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConstraintOp {
    /// The worker has the attribute with this value (`disk=ssd`).
    Equals(String),
    /// The worker does not have the attribute with this value (a worker
    /// without the attribute meets it) (`rack!=r9`).
    NotEquals(String),
    /// The worker has the attribute, whatever its value (`gpu`).
    Present,
    /// The worker has the attribute with one of these values
    /// (`rack in [r1, r2]`; appended: earlier encodings are unchanged).
    In(Vec<String>),
    /// The worker does not have the attribute with any of these values (a
    /// worker without the attribute meets it) (`rack not in [r8, r9]`).
    NotIn(Vec<String>),
}

impl ConstraintOp {
    /// The values it names (none for [`ConstraintOp::Present`]).
    pub fn values(&self) -> Vec<&str> {
        match self {
            ConstraintOp::Equals(v) | ConstraintOp::NotEquals(v) => vec![v.as_str()],
            ConstraintOp::Present => vec![],
            ConstraintOp::In(vs) | ConstraintOp::NotIn(vs) => {
                vs.iter().map(String::as_str).collect()
            }
        }
    }
}

impl Constraint {
    /// Whether a worker with `attributes` meets this constraint.
    pub fn allows(&self, attributes: &[(String, String)]) -> bool {
        let value = attributes.iter().find(|(k, _)| *k == self.attribute).map(|(_, v)| v);
        self.allows_value(value.map(String::as_str))
    }

    /// Whether a worker whose value of this constraint's attribute is
    /// `value` (`None`: it lacks the attribute) meets this constraint.
    pub fn allows_value(&self, value: Option<&str>) -> bool {
        match &self.op {
            ConstraintOp::Equals(want) => value == Some(want.as_str()),
            ConstraintOp::NotEquals(not) => value != Some(not.as_str()),
            ConstraintOp::Present => value.is_some(),
            ConstraintOp::In(vs) => value.is_some_and(|v| vs.iter().any(|x| x == v)),
            ConstraintOp::NotIn(vs) => value.is_none_or(|v| !vs.iter().any(|x| x == v)),
        }
    }

    /// Parses `name=value` (or `name==value`), `name!=value`, `name in
    /// [a, b]`, `name not in [a, b]` or `name` (the flag and job file
    /// syntax); the error says what is wrong.
    pub fn parse(text: &str) -> Result<Constraint, ConstraintError> {
        let list = |rest: &str| -> Result<Vec<String>, ConstraintError> {
            let inner = rest
                .trim()
                .strip_prefix('[')
                .and_then(|r| r.strip_suffix(']'))
                .ok_or_else(|| ConstraintError::NoList(text.to_string()))?;
            let values: Vec<String> =
                inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
            if values.is_empty() {
                return Err(ConstraintError::NoList(text.to_string()));
            }
            Ok(values)
        };
        let (attribute, op) = if let Some((k, rest)) = text.split_once(" not in ") {
            (k.trim(), ConstraintOp::NotIn(list(rest)?))
        } else if let Some((k, rest)) = text.split_once(" in ") {
            (k.trim(), ConstraintOp::In(list(rest)?))
        } else if let Some((k, v)) = text.split_once("!=") {
            (k, ConstraintOp::NotEquals(v.to_string()))
        } else if let Some((k, v)) = text.split_once("==") {
            (k, ConstraintOp::Equals(v.to_string()))
        } else if let Some((k, v)) = text.split_once('=') {
            (k, ConstraintOp::Equals(v.to_string()))
        } else {
            (text, ConstraintOp::Present)
        };
        if attribute.is_empty() || attribute.contains(char::is_whitespace) {
            return Err(ConstraintError::NoAttribute(text.to_string()));
        }
        Ok(Constraint { attribute: attribute.to_string(), op })
    }
}

/// Why a constraint's text is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    /// Nothing before the `=` or `!=` (`=ssd`).
    #[error("constraint {0:?} names no attribute (write name=value, name!=value, name in [a, b], name not in [a, b] or name)")]
    NoAttribute(String),
    /// `in` or `not in` without a bracketed, non-empty list.
    #[error("constraint {0:?}: `in` and `not in` take a list of values, as in rack in [r1, r2]")]
    NoList(String),
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.op {
            ConstraintOp::Equals(v) => write!(f, "{}={v}", self.attribute),
            ConstraintOp::NotEquals(v) => write!(f, "{}!={v}", self.attribute),
            ConstraintOp::Present => f.write_str(&self.attribute),
            ConstraintOp::In(vs) => write!(f, "{} in [{}]", self.attribute, vs.join(", ")),
            ConstraintOp::NotIn(vs) => write!(f, "{} not in [{}]", self.attribute, vs.join(", ")),
        }
    }
}

/// The value `attribute` has in `attributes`; `""` when it is absent: under
/// [`GroupPolicy::spread`], the workers lacking the attribute count as one
/// more value, the empty one (they are not skipped: a group spread over
/// `rack` still runs on workers with no rack, as evenly as the rest).
pub fn spread_value<'a>(attributes: &'a [(String, String)], attribute: &str) -> &'a str {
    attributes.iter().find(|(k, _)| k == attribute).map_or("", |(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn constraints_parse_and_print_as_written_and_judge_attributes() {
        for text in
            ["disk=ssd", "rack!=r9", "gpu", "empty=", "rack in [r1, r2]", "rack not in [r9]"]
        {
            assert_eq!(Constraint::parse(text).unwrap().to_string(), text);
        }
        assert_eq!(Constraint::parse("disk==ssd").unwrap().to_string(), "disk=ssd");
        assert_eq!(Constraint::parse("rack in [r1,r2 ]").unwrap().to_string(), "rack in [r1, r2]");
        for bad in ["rack in r1", "rack in []", "rack not in [ , ]"] {
            let e = Constraint::parse(bad).unwrap_err().to_string();
            assert!(e.contains("take a list of values"), "{bad}: {e}");
        }
        assert!(Constraint::parse(" in [a]").is_err());
        assert!(Constraint::parse("=ssd").unwrap_err().to_string().contains("names no attribute"));
        let w = attrs(&[("disk", "ssd"), ("rack", "r1")]);
        assert!(Constraint::parse("disk=ssd").unwrap().allows(&w));
        assert!(!Constraint::parse("disk=hdd").unwrap().allows(&w));
        assert!(Constraint::parse("rack!=r9").unwrap().allows(&w));
        assert!(!Constraint::parse("rack!=r1").unwrap().allows(&w));
        assert!(Constraint::parse("zone!=z1").unwrap().allows(&w), "absent is not z1");
        assert!(Constraint::parse("rack").unwrap().allows(&w));
        assert!(!Constraint::parse("gpu").unwrap().allows(&w));
        assert!(Constraint::parse("rack in [r0, r1]").unwrap().allows(&w));
        assert!(!Constraint::parse("rack in [r2, r3]").unwrap().allows(&w));
        assert!(!Constraint::parse("zone in [z1]").unwrap().allows(&w), "absent is in no list");
        assert!(Constraint::parse("rack not in [r2, r3]").unwrap().allows(&w));
        assert!(!Constraint::parse("rack not in [r1]").unwrap().allows(&w));
        assert!(Constraint::parse("zone not in [z1]").unwrap().allows(&w), "absent is in none");
    }

    #[test]
    fn changes_name_each_key_and_hide_environment_values() {
        let old = crate::protocol::GroupSpec {
            group: "web".into(),
            slots: 2,
            command: vec!["srv".into()],
            env: vec![("TOKEN".into(), "s3cret".into()), ("MODE".into(), "a".into())],
            cores: 1,
            memory_mb: 64,
            policy: GroupPolicy::default(),
            launch: Default::default(),
        };
        use crate::protocol::spec_changes;
        assert!(spec_changes(&old, &old).is_empty());
        let mut new = old.clone();
        new.slots = 4;
        new.env[0].1 = "other".into();
        new.policy.placement = Some(Placement::Pack);
        new.policy.constraints.push(Constraint::parse("disk=ssd").unwrap());
        new.policy.priority = 80;
        new.launch.disconnect = Some(crate::launch::Disconnect::after_ms(30_000));
        let changes = spec_changes(&old, &new);
        assert_eq!(
            changes,
            [
                "count 2 -> 4",
                "env (TOKEN)",
                "placement the master's -> pack",
                "constraints [] -> [disk=ssd]",
                "priority 50 -> 80",
                "disconnect none -> stop_after 30s"
            ]
        );
        // A singleton's stop_after of zero, or past a day, is a problem
        // naming the group and the value (docs/design.md#issue-45).
        for ms in [0, 999, crate::launch::MAX_STOP_AFTER_MS + 1] {
            let mut bad = old.clone();
            bad.launch.disconnect = Some(crate::launch::Disconnect::after_ms(ms));
            let problem =
                crate::limits::group_spec_problem(&bad, crate::limits::GroupKey::wire_name)
                    .unwrap();
            assert_eq!(problem.key, crate::limits::GroupKey::Disconnect);
            assert_eq!(
                problem.message("leader"),
                format!("group \"leader\": disconnect.stop_after {ms} ms is out of range: 1000 ms (1 s) to 86400000 ms (1 day)")
            );
        }
        let mut odd = old.clone();
        odd.launch.disconnect = Some(crate::launch::Disconnect::after_ms(1_500));
        assert!(
            crate::limits::group_spec_problem(&odd, crate::limits::GroupKey::wire_name).is_none()
        );
        assert_eq!(odd.launch.disconnect.unwrap().to_string(), "stop_after 1500ms");
        assert!(!changes.concat().contains("s3cret"));
        // A priority past the highest is a problem naming the value (the
        // master refuses the declaration; a job file is refused before).
        let mut high = old.clone();
        high.policy.priority = 101;
        let problem =
            crate::limits::group_spec_problem(&high, crate::limits::GroupKey::wire_name).unwrap();
        assert_eq!(problem.key, crate::limits::GroupKey::Priority);
        assert_eq!(
            problem.message("web"),
            "group \"web\": priority is 101; a priority is 0 to 100 (MAX_PRIORITY)"
        );
        high.policy.priority = MAX_PRIORITY;
        assert!(
            crate::limits::group_spec_problem(&high, crate::limits::GroupKey::wire_name).is_none()
        );
    }

    #[test]
    fn names_round_trip() {
        for p in [Placement::Spread, Placement::Pack] {
            assert_eq!(Placement::from_name(p.name()), Some(p));
        }
        for m in [RestartMode::Batch, RestartMode::Service] {
            assert_eq!(RestartMode::from_name(m.name()), Some(m));
        }
        assert!(GroupPolicy::default().is_default());
    }
}

//! Jobs: a framework described as data, its executor groups and their
//! settings, checked before anything is sent.
//!
//! A [`JobSpec`] is what a job file (`regent run JOB.toml`, see
//! `docs/jobs.md`) holds, and what an embedding program builds in code:
//!
//! ```
//! use regent_core::job::{JobGroup, JobSpec};
//! let mut mappers = JobGroup::new("mappers", vec!["wc".into(), "-l".into()]);
//! mappers.count = 4;
//! mappers.env.insert("INPUT".into(), "/data/in".into());
//! let job = JobSpec { name: "wordcount".into(), groups: vec![mappers], tenant: None };
//! job.validate().unwrap();
//! assert_eq!(job.groups_to_declare()[0].slots, 4);
//! ```
//!
//! [`JobSpec::validate`] applies the rules the master enforces on a
//! declaration ([`crate::limits::group_spec_problem`], the same function the
//! master calls) plus the job's own: a name, at least one group and at most
//! [`crate::limits::MAX_GROUPS_PER_FRAMEWORK`], group names unique and not
//! empty, at least one core per executor. Its error names the group and the
//! key as the job file spells it ([`JobGroup`]'s field names), e.g.
//! `group "mappers": cores must be at least 1`. The one rule it cannot
//! check is the framework record's worst-case size
//! ([`crate::limits::MAX_RECORD_PAYLOAD`]): it depends on the framework id
//! the master assigns; a job past it is refused by the master at
//! declaration, naming the limit.
//!
//! [`JobSpec::groups_to_declare`] maps a job to the
//! [`GroupSpec`]s a subscriber declares, one per group, in order.

use crate::launch::LaunchSpec;
use crate::limits::{self, GroupKey};
use crate::policy::GroupPolicy;
use crate::protocol::GroupSpec;
use std::collections::{BTreeMap, BTreeSet};

/// A job: a framework's name and its executor groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSpec {
    /// The framework's name (`name = "wordcount"`).
    pub name: String,
    /// Its executor groups, declared in this order (`[[group]]` tables).
    pub groups: Vec<JobGroup>,
    /// The tenant it belongs to (`tenant = "team-a"`; docs/tenants.md):
    /// `None`, its credential's tenant, else `default`.
    pub tenant: Option<String>,
}

/// One executor group of a job: `count` executors running `command`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobGroup {
    /// The group's name, unique within the job.
    pub name: String,
    /// How many executors (slots); default [`JobGroup::DEFAULT_COUNT`].
    pub count: u32,
    /// The program and its arguments; not empty.
    pub command: Vec<String>,
    /// Environment variables of every executor (in name order on the wire,
    /// so the same job always declares the same group).
    pub env: BTreeMap<String, String>,
    /// Cores each executor holds; default [`JobGroup::DEFAULT_CORES`].
    pub cores: u32,
    /// Memory each executor holds, MiB; default [`JobGroup::DEFAULT_MEMORY_MB`].
    pub memory_mb: u64,
    /// Placement, restarts and priority (`restart`, `placement`,
    /// `constraints`, `spread`, `priority`); default: [`GroupPolicy::default`].
    pub policy: GroupPolicy,
    /// What the worker does around each executor's process (`cwd`,
    /// `kill_grace`, `artifacts`); default: [`LaunchSpec::default`].
    pub launch: LaunchSpec,
}

impl JobGroup {
    /// `count` when the job does not say.
    pub const DEFAULT_COUNT: u32 = 1;
    /// `cores` when the job does not say.
    pub const DEFAULT_CORES: u32 = 1;
    /// `memory_mb` when the job does not say: none held.
    pub const DEFAULT_MEMORY_MB: u64 = 0;

    /// A group `name` running `command`, every other key at its default.
    pub fn new(name: impl Into<String>, command: Vec<String>) -> JobGroup {
        JobGroup {
            name: name.into(),
            count: Self::DEFAULT_COUNT,
            command,
            env: BTreeMap::new(),
            cores: Self::DEFAULT_CORES,
            memory_mb: Self::DEFAULT_MEMORY_MB,
            policy: GroupPolicy::default(),
            launch: LaunchSpec::default(),
        }
    }

    /// What a subscriber declares for this group.
    pub fn to_declare(&self) -> GroupSpec {
        GroupSpec {
            group: self.name.clone(),
            slots: self.count,
            command: self.command.clone(),
            env: self.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            cores: self.cores,
            memory_mb: self.memory_mb,
            policy: self.policy.clone(),
            launch: Box::new(self.launch.clone()),
        }
    }
}

/// Which key of a job an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKey {
    /// The job's `name`.
    Name,
    /// The job's groups as a whole (none, or too many).
    Groups,
    /// A key of one group.
    Group(GroupKey),
}

/// Why a job is not valid: the group (its index in [`JobSpec::groups`]),
/// the key, and a message naming both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobError {
    /// The group at fault; `None` for the job's own keys.
    pub group: Option<usize>,
    /// The key at fault.
    pub key: JobKey,
    /// What is wrong, e.g. `group "mappers": cores must be at least 1`.
    pub message: String,
}

impl std::fmt::Display for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JobError {}

/// A group's key as the job file spells it (`name`, `count`, `command`,
/// `env`, `cores`, `memory_mb`).
pub fn key_name(key: GroupKey) -> &'static str {
    match key {
        GroupKey::Name => "name",
        GroupKey::Slots => "count",
        GroupKey::Command => "command",
        GroupKey::Env => "env",
        GroupKey::Cores => "cores",
        GroupKey::MemoryMb => "memory_mb",
        GroupKey::Restart => "restart",
        GroupKey::Constraints => "constraints",
        GroupKey::Spread => "spread",
        GroupKey::Cwd => "cwd",
        GroupKey::KillGrace => "kill_grace",
        GroupKey::Artifacts => "artifacts",
        GroupKey::Ports => "ports",
        GroupKey::User => "user",
        GroupKey::Resources => "resources",
        GroupKey::Logs => "logs",
        GroupKey::Priority => "priority",
        GroupKey::Disconnect => "disconnect",
        GroupKey::Check => "check",
        GroupKey::Update => "update",
    }
}

/// Why a run of a job cannot follow the live framework of its name
/// ([`JobSpec::live_framework`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LiveJobError {
    /// Several live frameworks carry the job's name.
    #[error(
        "job {job:?} runs as {} frameworks ({}): give --framework-id to follow one, or --new to start another",
        frameworks.len(),
        frameworks.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(", ")
    )]
    Several {
        /// The job's name.
        job: String,
        /// The frameworks of that name.
        frameworks: Vec<crate::ids::FrameworkId>,
    },
    /// The live framework was declared with other groups or counts.
    #[error(
        "job {job:?} is live as framework {framework} and the file changes it ({}); nothing was changed: \
         stop it first (regent kill --masters ... {framework}) or give --new to run another",
        changes.join("; ")
    )]
    Changed {
        /// The job's name.
        job: String,
        /// The live framework.
        framework: crate::ids::FrameworkId,
        /// What the file changes, group by group.
        changes: Vec<String>,
    },
}

impl JobSpec {
    /// The live framework a run of this job follows instead of starting
    /// another (a resubmission of the same job file is idempotent): the one
    /// framework in `state` named like the job; `None` when there is none.
    /// An error when several are (naming them: `--framework-id` picks one),
    /// or when the job's groups or counts differ from what that framework
    /// was declared with (naming the difference, before anything is taken
    /// over; a changed command, environment or policy is refused by the
    /// master, which knows the whole declaration).
    pub fn live_framework(
        &self,
        state: &crate::protocol::ClusterState,
    ) -> Result<Option<crate::ids::FrameworkId>, LiveJobError> {
        let named: Vec<&crate::protocol::FrameworkView> =
            state.frameworks.iter().filter(|f| f.name == self.name).collect();
        let f = match named[..] {
            [] => return Ok(None),
            [f] => f,
            _ => {
                return Err(LiveJobError::Several {
                    job: self.name.clone(),
                    frameworks: named.iter().map(|f| f.id.clone()).collect(),
                })
            }
        };
        let mut changes = Vec::new();
        for g in &self.groups {
            match f.groups.iter().find(|v| v.name == g.name) {
                None => changes.push(format!("group {:?} is new", g.name)),
                Some(v) if v.declared != g.count => {
                    changes.push(format!("group {:?}: count {} -> {}", g.name, v.declared, g.count))
                }
                Some(_) => {}
            }
        }
        for v in &f.groups {
            if !self.groups.iter().any(|g| g.name == v.name) {
                changes.push(format!("group {:?} is gone from the file", v.name));
            }
        }
        if changes.is_empty() {
            Ok(Some(f.id.clone()))
        } else {
            Err(LiveJobError::Changed { job: self.name.clone(), framework: f.id.clone(), changes })
        }
    }

    /// The first rule the job breaks, in the order of its groups (see the
    /// module documentation); `Ok` when the master would accept every
    /// group's declaration.
    pub fn validate(&self) -> Result<(), JobError> {
        let job = |key, message: String| Err(JobError { group: None, key, message });
        if self.name.is_empty() {
            return job(JobKey::Name, "name must not be empty".into());
        }
        if self.name.len() > limits::MAX_NAME_BYTES {
            return job(
                JobKey::Name,
                format!(
                    "name is {} bytes; the limit is {} bytes (MAX_NAME_BYTES)",
                    self.name.len(),
                    limits::MAX_NAME_BYTES
                ),
            );
        }
        if self.groups.is_empty() {
            return job(JobKey::Groups, format!("job {:?} has no group", self.name));
        }
        if self.groups.len() > limits::MAX_GROUPS_PER_FRAMEWORK {
            return job(
                JobKey::Groups,
                format!(
                    "job {:?} has {} groups; the limit is {} (MAX_GROUPS_PER_FRAMEWORK)",
                    self.name,
                    self.groups.len(),
                    limits::MAX_GROUPS_PER_FRAMEWORK
                ),
            );
        }
        let mut seen = BTreeSet::new();
        for (i, g) in self.groups.iter().enumerate() {
            let group = |key, message| Err(JobError { group: Some(i), key, message });
            if g.name.is_empty() {
                return group(
                    JobKey::Group(GroupKey::Name),
                    format!("group {}: name must not be empty", i + 1),
                );
            }
            if let Some(p) = limits::group_spec_problem(&g.to_declare(), key_name) {
                return group(JobKey::Group(p.key), p.message(&g.name));
            }
            if g.cores == 0 {
                return group(
                    JobKey::Group(GroupKey::Cores),
                    format!("group {:?}: cores must be at least 1", g.name),
                );
            }
            if !seen.insert(g.name.as_str()) {
                return group(
                    JobKey::Group(GroupKey::Name),
                    format!("group {:?} is named twice; group names must be unique", g.name),
                );
            }
        }
        Ok(())
    }

    /// What a subscriber declares for this job: one [`GroupSpec`] per
    /// group, in order.
    pub fn groups_to_declare(&self) -> Vec<GroupSpec> {
        self.groups.iter().map(JobGroup::to_declare).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str) -> JobGroup {
        JobGroup::new(name, vec!["true".into()])
    }

    fn job(groups: Vec<JobGroup>) -> JobSpec {
        JobSpec { name: "wordcount".into(), groups, tenant: None }
    }

    /// The message of the first rule `j` breaks, and the group and key.
    fn error(j: &JobSpec) -> (Option<usize>, JobKey, String) {
        let e = j.validate().expect_err("invalid");
        (e.group, e.key, e.message)
    }

    fn with(f: impl FnOnce(&mut JobGroup)) -> JobSpec {
        let mut g = group("mappers");
        f(&mut g);
        job(vec![group("driver"), g])
    }

    #[test]
    fn job_valid_two_groups_declare_in_order() {
        let mut m = group("mappers");
        m.count = 3;
        m.cores = 2;
        m.memory_mb = 512;
        m.env.insert("B".into(), "2".into());
        m.env.insert("A".into(), "1".into());
        let j = job(vec![group("driver"), m]);
        assert_eq!(j.validate(), Ok(()));
        let d = j.groups_to_declare();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].group, "driver");
        assert_eq!((d[0].slots, d[0].cores, d[0].memory_mb), (1, 1, 0), "defaults");
        assert_eq!(d[1].group, "mappers");
        assert_eq!((d[1].slots, d[1].cores, d[1].memory_mb), (3, 2, 512));
        assert_eq!(d[1].command, vec!["true".to_owned()]);
        assert_eq!(
            d[1].env,
            vec![("A".into(), "1".into()), ("B".into(), "2".into())],
            "in name order"
        );
    }

    #[test]
    fn job_needs_a_name_and_a_group() {
        let mut j = job(vec![group("g")]);
        j.name = String::new();
        assert_eq!(error(&j), (None, JobKey::Name, "name must not be empty".into()));
        j.name = "n".repeat(limits::MAX_NAME_BYTES + 1);
        assert_eq!(
            error(&j),
            (
                None,
                JobKey::Name,
                "name is 257 bytes; the limit is 256 bytes (MAX_NAME_BYTES)".into()
            )
        );
        assert_eq!(
            error(&job(vec![])),
            (None, JobKey::Groups, "job \"wordcount\" has no group".into())
        );
        let many =
            (0..=limits::MAX_GROUPS_PER_FRAMEWORK).map(|i| group(&format!("g{i}"))).collect();
        assert_eq!(
            error(&job(many)),
            (
                None,
                JobKey::Groups,
                "job \"wordcount\" has 65 groups; the limit is 64 (MAX_GROUPS_PER_FRAMEWORK)"
                    .into()
            )
        );
    }

    #[test]
    fn job_group_names_are_unique_and_not_empty() {
        assert_eq!(
            error(&job(vec![group("a"), group("b"), group("a")])),
            (
                Some(2),
                JobKey::Group(GroupKey::Name),
                "group \"a\" is named twice; group names must be unique".into()
            )
        );
        assert_eq!(
            error(&with(|g| g.name = String::new())),
            (Some(1), JobKey::Group(GroupKey::Name), "group 2: name must not be empty".into())
        );
        assert_eq!(
            error(&with(|g| g.name = "n".repeat(300))),
            (
                Some(1),
                JobKey::Group(GroupKey::Name),
                "name of 300 bytes; the limit is 256 bytes (MAX_NAME_BYTES)".into()
            )
        );
    }

    #[test]
    fn job_group_rules_name_the_group_and_the_key() {
        let cases: Vec<(JobSpec, GroupKey, &str)> = vec![
            (with(|g| g.cores = 0), GroupKey::Cores, "cores must be at least 1"),
            (
                with(|g| g.cores = limits::MAX_CORES + 1),
                GroupKey::Cores,
                "cores is 1048577; the limit is 1048576 per executor (MAX_CORES)",
            ),
            (
                with(|g| g.memory_mb = limits::MAX_MEMORY_MB + 1),
                GroupKey::MemoryMb,
                "memory_mb is 1099511627777; the limit is 1099511627776 MiB per executor (MAX_MEMORY_MB)",
            ),
            (with(|g| g.count = 0), GroupKey::Slots, "count must be at least 1"),
            (
                with(|g| g.count = limits::MAX_SLOTS_PER_GROUP + 1),
                GroupKey::Slots,
                "count is 2049; the limit is 2048 per group (MAX_SLOTS_PER_GROUP)",
            ),
            (with(|g| g.command.clear()), GroupKey::Command, "command must name a program"),
            (
                with(|g| g.command = vec!["x".into(); limits::MAX_COMMAND_ARGS + 1]),
                GroupKey::Command,
                "command has 1025 arguments; the limit is 1024 (MAX_COMMAND_ARGS)",
            ),
            (
                with(|g| g.command.push("a".repeat(limits::MAX_ARG_BYTES + 1))),
                GroupKey::Command,
                "command argument 1 is 16385 bytes; the limit is 16384 bytes (MAX_ARG_BYTES)",
            ),
            (
                with(|g| {
                    g.env = (0..=limits::MAX_ENV_VARS).map(|i| (format!("K{i}"), String::new())).collect()
                }),
                GroupKey::Env,
                "env has 1025 variables; the limit is 1024 (MAX_ENV_VARS)",
            ),
            (
                with(|g| {
                    g.env.insert("K".repeat(limits::MAX_ENV_KEY_BYTES + 1), String::new());
                }),
                GroupKey::Env,
                "env has a variable name of 1025 bytes; the limit is 1024 bytes (MAX_ENV_KEY_BYTES)",
            ),
            (
                with(|g| {
                    g.env.insert("BIG".into(), "v".repeat(limits::MAX_ENV_VALUE_BYTES + 1));
                }),
                GroupKey::Env,
                "env: the value of \"BIG\" is 16385 bytes; the limit is 16384 bytes (MAX_ENV_VALUE_BYTES)",
            ),
            (
                with(|g| {
                    g.env = (0..5).map(|i| (format!("K{i}"), "v".repeat(16_000))).collect()
                }),
                GroupKey::Env,
                "command and env are 80014 bytes together; the limit is 65536 bytes (MAX_GROUP_SPEC_BYTES)",
            ),
        ];
        for (j, key, reason) in cases {
            assert_eq!(
                error(&j),
                (Some(1), JobKey::Group(key), format!("group \"mappers\": {reason}")),
                "{reason}"
            );
        }
    }

    #[test]
    fn job_limits_at_their_bound_are_accepted() {
        let j = with(|g| {
            g.count = limits::MAX_SLOTS_PER_GROUP;
            g.cores = limits::MAX_CORES;
            g.memory_mb = limits::MAX_MEMORY_MB;
        });
        assert_eq!(j.validate(), Ok(()));
    }
}

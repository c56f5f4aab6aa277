//! Operator commands over the regent protocol: `regent status`,
//! `regent kill`, `regent remove-worker`, `regent step-down`, the changes
//! of issue 14 (docs/design.md#issue-14) ([`Change`]: `regent cordon`, `uncordon`, `drain`, `scale`,
//! `kill-executor`), the jobs the leader owns (`regent job submit`,
//! `status`, `delete`: [`submit_job_with`], [`jobs_with`],
//! [`delete_job_with`]), and the chunks `regent logs` reads
//! ([`fetch_log_chunk_with`]).
//!
//! Each command dials masters one at a time as a [`Role::Client`]: `Hello`,
//! then one request, then close. Every step is bounded: [`CONNECT_TIMEOUT`]
//! to open the TCP connection, then [`ANSWER_TIMEOUT`] for the handshake,
//! the `HelloReply` and the answer together, per master.
//!
//! Finding the leader: a master's `HelloReply` says whether it leads and
//! where it thinks the leader is; a standby answers a leader-only request
//! with `NotLeader` and the same hint. A command that needs the leader skips
//! standbys and dials the hinted address next (hints may name masters not
//! in the list given, and the `masters` a reply advertises are tried after
//! the given ones). Nothing is decided here beyond "who do I ask next": the
//! masters' machines decide what is accepted.
//!
//! When no master gives an answer, the error names every master tried and
//! why each one did not answer.
//!
//! Patience (`--connect-timeout`, [`Patience`]): the `*_with` variants keep
//! going round the masters until one answers or the connect timeout passes
//! (a round that started before it is finished), pausing briefly between
//! rounds and reporting at most one line per [`NOTICE_INTERVAL`] through
//! the caller's notice function: why the last round failed and what is
//! tried next. A master refused by the exposure rule, or whose handshake
//! refuses ours (wrong secret or cluster), is a configuration error and is
//! not retried. The plain variants make one round.

use crate::http::executor_state_name;
use crate::net::{CloseCause, ConnHandle, NetConfig, NetEvent};
use async_channel::Receiver;
use regent_core::protocol::{
    ClusterState, ExecutorState, Hello, LeaderHint, Message, Role, WorkerView, PROTOCOL_VERSION,
};
use regent_core::states::{DrainState, MaintenanceState};
use regent_core::{Addr, ConnId, ExecutorId, FrameworkId, Millis, WorkerId};
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How long opening the TCP connection to one master may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long one master may take, once connected, to complete the handshake,
/// answer `Hello` and answer the request.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// While waiting for a first master: at most one notice per this interval.
pub const NOTICE_INTERVAL: Duration = Duration::from_secs(5);

/// The pause between two rounds over the masters (doubling up to 2 s).
const ROUND_PAUSE: Duration = Duration::from_millis(250);

/// How long an operator command keeps trying to reach a master, and where
/// it reports that it is still trying.
#[derive(Clone, Copy)]
pub struct Patience<'a> {
    /// Rounds over the masters start until this much time has passed
    /// (`--connect-timeout`); zero makes one round.
    pub connect_timeout: Duration,
    /// Called with one line (at most one per [`NOTICE_INTERVAL`]) while
    /// no master answered: why, and what is tried next.
    pub notice: &'a (dyn Fn(&str) + Sync),
}

impl Patience<'static> {
    /// One round over the masters, no notices (the plain functions).
    pub fn once() -> Self {
        Patience { connect_timeout: Duration::ZERO, notice: &|_| {} }
    }
}

impl std::fmt::Debug for Patience<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Patience").field("connect_timeout", &self.connect_timeout).finish()
    }
}

/// The most masters one command dials (given ones, hinted and advertised
/// ones together), so hints that point at each other cannot loop.
const MAX_ATTEMPTS: usize = 16;

/// Why a request to the masters failed. The text is what the CLI prints.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No master was named to ask.
    #[error("no master address given")]
    NoMasterGiven,
    /// No master (with `leader_only`, no leading master) answered: each one
    /// tried was unreachable, silent, closed, not the leader, or refused
    /// the connection.
    #[error("{}", no_answer_text(*.leader_only, .tried, .gave_up))]
    NoAnswer {
        /// Only a leading master's answer was wanted.
        leader_only: bool,
        /// Every master tried, in order, with why it did not answer.
        tried: Vec<Tried>,
        /// Set when rounds were retried until the connect timeout passed.
        gave_up: Option<GaveUp>,
    },
    /// The leader answered and refused the request (an unknown framework,
    /// worker or executor, a single-master mode that cannot step down...).
    #[error("{reason}")]
    Refused {
        /// The leader's reason, as it gave it.
        reason: String,
    },
    /// A drain was followed and the worker left the leader's registry.
    #[error("worker {worker} is no longer in the leader's registry")]
    WorkerGone {
        /// The worker followed.
        worker: String,
    },
    /// A drain was followed and the worker stopped draining (uncordoned).
    #[error("worker {worker} is no longer draining (placement: {placement})")]
    NotDraining {
        /// The worker followed.
        worker: String,
        /// Its placement now, in words ([`placement_text`]).
        placement: String,
    },
    /// A drain was followed until a minute past its deadline.
    #[error(
        "worker {worker} is still DRAINING with {executors} executors, a minute past its deadline"
    )]
    StillDraining {
        /// The worker followed.
        worker: String,
        /// The executors it still runs.
        executors: u32,
    },
}

crate::error::into_report!(ClientError, DeadlineError);

/// One master a request was sent to, and why it did not answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tried {
    /// The master's address.
    pub addr: Addr,
    /// Why it gave no answer (`connect failed: ...`, `not the leader ...`).
    pub why: String,
}

/// Rounds over the masters retried until the connect timeout passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GaveUp {
    /// How many rounds were tried.
    pub rounds: u32,
    /// The connect timeout (`--connect-timeout`).
    pub after: Duration,
}

/// `no master answered (tried 2): a: why; b: why`, and the rounds given up
/// after.
fn no_answer_text(leader_only: bool, tried: &[Tried], gave_up: &Option<GaveUp>) -> String {
    let what = if leader_only { "no leading master answered" } else { "no master answered" };
    let detail: Vec<String> = tried.iter().map(|t| format!("{}: {}", t.addr, t.why)).collect();
    let mut text = format!("{what} (tried {}): {}", tried.len(), detail.join("; "));
    if let Some(g) = gave_up {
        text.push_str(&format!(
            "; gave up after {} rounds in {:?} (--connect-timeout)",
            g.rounds, g.after
        ));
    }
    text
}

/// Why a drain deadline ([`parse_deadline`]) was not understood.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeadlineError {
    /// Not a number followed by a unit.
    #[error("deadline {text:?} is not a duration: use e.g. 90s, 500ms, 5m or 1h")]
    NotADuration {
        /// The text given.
        text: String,
    },
    /// A unit other than ms, s, m or h.
    #[error("deadline {text:?}: unknown unit {unit:?} (use ms, s, m or h)")]
    UnknownUnit {
        /// The text given.
        text: String,
        /// The unit it named.
        unit: String,
    },
    /// Longer than [`regent_core::limits::MAX_DRAIN_DEADLINE`].
    #[error("deadline {text:?} is longer than the limit of 7 days")]
    TooLong {
        /// The text given.
        text: String,
    },
}

/// Asks the masters for their view of the cluster.
///
/// Without `leader_only`, the first master that answers is used (a standby
/// reports its status and the leader it knows of, and no registry). With
/// `leader_only`, standbys are skipped and their leader hints followed, so
/// the answer comes from the master that leads (in any of its leading
/// states: RECOVERING, ALIVE or SUSPENDED).
///
/// Errors name every master tried and why it did not answer.
pub async fn fetch_state(
    masters: &[Addr],
    net: Arc<NetConfig>,
    leader_only: bool,
) -> Result<ClusterState, ClientError> {
    fetch_state_with(masters, net, leader_only, Patience::once()).await
}

/// [`fetch_state`], trying until `patience.connect_timeout` passes.
pub async fn fetch_state_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    leader_only: bool,
    patience: Patience<'_>,
) -> Result<ClusterState, ClientError> {
    ask_patiently(
        masters,
        &net,
        leader_only,
        patience,
        || Message::StateRequest,
        |msg| match msg {
            Message::StateReply(state) => Some(*state),
            _ => None,
        },
    )
    .await
}

/// Asks the leader where `groups` would be placed now (`regent job plan`),
/// following leader hints; nothing is declared, placed or written.
/// `tenant` is the tenant the job names (the plan's preemption victims
/// depend on it). The answer has one
/// [`GroupPlan`](regent_core::protocol::GroupPlan) per group, in order.
/// Errors name every master tried and why.
pub async fn plan_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    groups: Vec<regent_core::protocol::GroupSpec>,
    tenant: Option<String>,
    patience: Patience<'_>,
) -> Result<Vec<regent_core::protocol::GroupPlan>, ClientError> {
    ask_patiently(
        masters,
        &net,
        true,
        patience,
        || Message::PlanRequest { request: 1, groups: groups.clone(), tenant: tenant.clone() },
        |msg| match msg {
            Message::PlanReply { groups, .. } => Some(groups),
            _ => None,
        },
    )
    .await
}

/// What the leader answered a `regent job submit` ([`Message::JobAccepted`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobAccepted {
    /// The job's id.
    pub job: FrameworkId,
    /// Its version now.
    pub version: u64,
    /// What the submission did.
    pub change: regent_core::api::JobChange,
}

/// Creates or updates a job the leader owns (`regent job submit`,
/// `POST /v1/jobs`), following leader hints. `Ok` once the leader has made
/// it durable; a refusal (a version that does not match, a bad group, a
/// job a subscriber drives) is `Err` with the leader's reason. A retry
/// after a lost answer carries the same idempotency key, if any.
pub async fn submit_job_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    job: regent_core::api::JobSubmission,
    patience: Patience<'_>,
) -> Result<JobAccepted, ClientError> {
    let request = crate::net::random_u64();
    ask_patiently(
        masters,
        &net,
        true,
        patience,
        || Message::SubmitJob { request, job: job.clone() },
        |msg| match msg {
            Message::JobAccepted { request: r, job, version, change, .. } if r == request => {
                Some(Ok(JobAccepted { job, version, change }))
            }
            Message::RequestRefused { request: r, reason, .. } if r == request => {
                Some(Err(ClientError::Refused { reason }))
            }
            _ => None,
        },
    )
    .await?
}

/// The status of job `job`, or of every job (`regent job status`,
/// `GET /v1/jobs[/{id}]`), from the leader, with its epoch. A job the
/// leader does not know is refused (`Err` with its reason: `no job ID`).
pub async fn jobs_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    job: Option<&str>,
    patience: Patience<'_>,
) -> Result<(regent_core::Epoch, Vec<regent_core::api::JobStatus>), ClientError> {
    let request = crate::net::random_u64();
    let job = job.map(FrameworkId::new);
    ask_patiently(
        masters,
        &net,
        true,
        patience,
        || Message::JobsRequest { request, job: job.clone() },
        |msg| match msg {
            Message::JobsReply { request: r, epoch, jobs } if r == request => {
                Some(Ok((epoch, jobs)))
            }
            Message::RequestRefused { request: r, reason, .. } if r == request => {
                Some(Err(ClientError::Refused { reason }))
            }
            _ => None,
        },
    )
    .await?
}

/// Creates or replaces tenant `tenant` (`regent tenant set`;
/// docs/tenants.md). `Ok` once durable; a refusal is `Err` with the
/// leader's reason.
pub async fn set_tenant_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    tenant: regent_core::protocol::tenants::Tenant,
    patience: Patience<'_>,
) -> Result<(), ClientError> {
    leader_request(masters, &net, patience, move |request| Message::SetTenant {
        request,
        tenant: tenant.clone(),
    })
    .await
}

/// Every tenant with what it holds (`regent tenant list`), from the
/// leader.
pub async fn tenants_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    patience: Patience<'_>,
) -> Result<Vec<regent_core::protocol::tenants::TenantView>, ClientError> {
    let request = crate::net::random_u64();
    ask_patiently(
        masters,
        &net,
        true,
        patience,
        || Message::TenantsRequest { request },
        |msg| match msg {
            Message::TenantsReply { request: r, tenants, .. } if r == request => Some(Ok(tenants)),
            Message::RequestRefused { request: r, reason, .. } if r == request => {
                Some(Err(ClientError::Refused { reason }))
            }
            _ => None,
        },
    )
    .await?
}

/// Tears job `job` down (`regent job delete`, `DELETE /v1/jobs/{id}`):
/// its executors are killed and it ends TORN_DOWN in the history. `Ok`
/// once durable; a refusal (no such job, a job a subscriber drives) is
/// `Err` with the leader's reason.
pub async fn delete_job_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    job: &str,
    patience: Patience<'_>,
) -> Result<(), ClientError> {
    let job = FrameworkId::new(job);
    leader_request(masters, &net, patience, move |request| Message::DeleteJob {
        request,
        job: job.clone(),
    })
    .await
}

/// Promotes job `job`'s deployments awaiting promotion, or only `group`'s
/// (`regent job promote`; docs/jobs.md, deployments). `Ok` once durable; a
/// refusal (no such job or group, nothing awaiting promotion) is `Err`
/// with the leader's reason.
pub async fn promote_deployment_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    job: &str,
    group: Option<String>,
    patience: Patience<'_>,
) -> Result<(), ClientError> {
    let job = FrameworkId::new(job);
    leader_request(masters, &net, patience, move |request| Message::PromoteDeployment {
        request,
        job: job.clone(),
        group: group.clone(),
    })
    .await
}

/// One result of a `manual` health check, as a framework reports it
/// ([`report_health_with`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthResult {
    /// The executor.
    pub executor: String,
    /// The name of one of its group's manual checks.
    pub check: String,
    /// Whether the check passed.
    pub passing: bool,
    /// What the framework says about it.
    pub detail: String,
}

/// Reports `result` to the leader (`regent report-health`; docs/jobs.md,
/// health checks), which relays it to the executor's worker. `Ok` once
/// relayed; a refusal (no such executor, not running, no manual check of
/// that name) is `Err` with the leader's reason.
pub async fn report_health_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    result: HealthResult,
    patience: Patience<'_>,
) -> Result<(), ClientError> {
    leader_request(masters, &net, patience, move |request| Message::ReportHealth {
        request,
        executor: ExecutorId::new(result.executor.as_str()),
        check: result.check.clone(),
        passing: result.passing,
        detail: result.detail.clone(),
    })
    .await
}

/// A group's deployment in words (docs/jobs.md, deployments): `deployment
/// 4: canary 1/1 healthy, awaiting promotion: regent job promote web
/// --group g`, `deployment 2 (revert of 1): rolling 2/3 healthy,
/// max_parallel 1`, `deployment 4: FAILED (crash loop: 3 ends on slot 0)`.
fn deployment_line(job: &FrameworkId, group: &str, d: &regent_core::api::DeploymentView) -> String {
    let revert = d.revert_of.map_or(String::new(), |of| format!(" (revert of {of})"));
    let what = match d.state.as_str() {
        "canary" => format!("canary {}/{} healthy", d.healthy.min(d.canary), d.canary),
        "awaiting_promotion" => format!(
            "canary {}/{} healthy, awaiting promotion: regent job promote {job} --group {group}",
            d.healthy.min(d.canary),
            d.canary
        ),
        "rolling" => {
            format!("rolling {}/{} healthy, max_parallel {}", d.healthy, d.open, d.max_parallel)
        }
        "failed" => format!("FAILED ({})", d.reason.as_deref().unwrap_or("no reason")),
        other => other.to_string(),
    };
    format!("deployment {}{revert}: {what}", d.seq)
}

/// Jobs in words (`regent job status`): per job a line (id, name, version
/// or "subscriber", state), per group its `desired/placed/running/done`
/// counts, then one line per slot that does not run, with its phase and
/// reason (a waiting slot's further reasons, ranked, each on an `also:`
/// line).
pub fn render_jobs(jobs: &[regent_core::api::JobStatus]) -> String {
    use regent_core::api::SlotPhase;
    use std::fmt::Write as _;
    if jobs.is_empty() {
        return "no jobs\n".to_string();
    }
    let mut out = String::new();
    for j in jobs {
        let version = match j.version {
            Some(v) => format!("version {v}"),
            None => "subscriber".to_string(),
        };
        let _ = writeln!(out, "job {} (name {:?}) {version} {}", j.job, j.name, j.state);
        for g in &j.groups {
            let _ = write!(
                out,
                "  group {:?}: desired/placed/running/done {}/{}/{}/{}",
                g.group, g.desired, g.placed, g.running, g.done
            );
            if g.priority != regent_core::policy::DEFAULT_PRIORITY {
                let _ = write!(out, " priority {}", g.priority);
            }
            if let Some(ms) = g.stop_after_ms {
                // A singleton (docs/design.md#issue-45): stopped by a cut-off worker.
                let d = regent_core::launch::Disconnect::after_ms(ms);
                let _ = write!(out, " singleton ({d})");
            }
            if g.rolling {
                out.push_str(" (rolling out an update)");
            }
            out.push('\n');
            if let Some(d) = &g.deployment {
                let _ = writeln!(out, "    {}", deployment_line(&j.job, &g.group, d));
            }
            // Running slots are shown only with their health (a group with
            // checks; docs/design.md#issue-45).
            for s in g.slots.iter().filter(|s| s.phase != SlotPhase::Running || s.health.is_some())
            {
                let phase = serde_json::to_value(s.phase)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| format!("{:?}", s.phase));
                let _ = write!(out, "    slot {} {phase}", s.slot);
                if let Some(e) = &s.executor {
                    let _ = write!(out, " executor {e}");
                }
                if let Some(w) = &s.worker {
                    let _ = write!(out, " on {w}");
                }
                if let Some(by) = &s.preempted_by {
                    // Its executor, or the last it had, was preempted
                    // (docs/design.md#issue-44).
                    let _ = write!(out, ", preempted by {by}");
                }
                if let Some(h) = &s.health {
                    let _ = write!(out, " health {} {}s", h.status.name(), h.for_ms / 1_000);
                    if !h.detail.is_empty() {
                        let _ = write!(out, " ({})", h.detail);
                    }
                }
                match s.reasons.split_first() {
                    // A slot that waits: every reason, ranked.
                    Some((first, more)) => {
                        let _ = write!(out, ": {first}");
                        for r in more {
                            let _ = write!(out, "\n      also: {r}");
                        }
                    }
                    None => {
                        if let Some(r) = &s.reason {
                            let _ = write!(out, ": {r}");
                        }
                    }
                }
                out.push('\n');
            }
        }
    }
    out
}

/// A plan in words, one line per group (and the job's first line): where
/// the slots would go (`slot 0 -> w1`, runs of one worker shown once),
/// how many would not, and why: the first reason on the group's line, every
/// further one, ranked, on a line of its own (`  reason 2: ...`).
pub fn render_plan(job: &str, plan: &[regent_core::protocol::GroupPlan]) -> String {
    use std::fmt::Write as _;
    let mut out = format!("job {job:?}: a plan against the leader now; nothing was changed\n");
    for g in plan {
        let placed = g.placed.len() as u32 + g.placed_omitted;
        let _ = write!(out, "group {:?}: {placed} of {} slot(s) would be placed", g.group, g.slots);
        if !g.placed.is_empty() {
            // Consecutive slots on one worker in one entry: `slots 0-3 -> w1`.
            let mut parts: Vec<String> = Vec::new();
            let mut i = 0;
            while i < g.placed.len() {
                let (first, worker) = &g.placed[i];
                let mut j = i;
                while j + 1 < g.placed.len()
                    && g.placed[j + 1].1 == *worker
                    && g.placed[j + 1].0 == g.placed[j].0 + 1
                {
                    j += 1;
                }
                let last = g.placed[j].0;
                parts.push(if last == *first {
                    format!("slot {first} -> {worker}")
                } else {
                    format!("slots {first}-{last} -> {worker}")
                });
                i = j + 1;
            }
            let _ = write!(out, " ({}", parts.join(", "));
            if g.placed_omitted > 0 {
                let _ = write!(out, ", {} more not listed", g.placed_omitted);
            }
            out.push(')');
        }
        if g.unplaced > 0 {
            match g.reasons.split_first() {
                Some((first, more)) => {
                    let _ = write!(out, "; {} would not: {first}", g.unplaced);
                    // Every further reason, ranked, on its own line.
                    for (i, r) in more.iter().enumerate() {
                        let _ = write!(out, "\n  reason {}: {r}", i + 2);
                    }
                }
                None => {
                    let reason = g.reason.as_deref().unwrap_or("no reason given");
                    let _ = write!(out, "; {} would not: {reason}", g.unplaced);
                }
            }
            // The exact executors preemption would stop, and what bounds it.
            for v in &g.victims {
                let _ = write!(
                    out,
                    "\n  would preempt {} ({}/{}, tenant {}, on {}) for slot {}: {}",
                    v.executor, v.framework, v.group, v.tenant, v.worker, v.for_slot, v.why
                );
            }
            if let Some(p) = &g.preemption {
                let _ = write!(out, "\n  {p}");
            }
        }
        out.push('\n');
    }
    out
}

/// Asks the leader to tear framework `framework` down (kill its executors
/// and forget it). `Ok` once the leader has made that durable; a refusal
/// (for instance an unknown framework) is `Err` with the leader's reason.
pub async fn kill_framework(
    masters: &[Addr],
    net: Arc<NetConfig>,
    framework: &str,
) -> Result<(), ClientError> {
    kill_framework_with(masters, net, framework, Patience::once()).await
}

/// [`kill_framework`], trying until `patience.connect_timeout` passes.
pub async fn kill_framework_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    framework: &str,
    patience: Patience<'_>,
) -> Result<(), ClientError> {
    let framework = FrameworkId::new(framework);
    leader_request(masters, &net, patience, move |request| Message::KillFramework {
        request,
        framework: framework.clone(),
    })
    .await
}

/// Asks the leader to forget worker `worker` (only a worker left UNKNOWN or
/// DEAD can be removed). A refusal is `Err` with the leader's reason.
pub async fn remove_worker(
    masters: &[Addr],
    net: Arc<NetConfig>,
    worker: &str,
) -> Result<(), ClientError> {
    remove_worker_with(masters, net, worker, Patience::once()).await
}

/// [`remove_worker`], trying until `patience.connect_timeout` passes.
pub async fn remove_worker_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    worker: &str,
    patience: Patience<'_>,
) -> Result<(), ClientError> {
    let worker = WorkerId::new(worker);
    leader_request(masters, &net, patience, move |request| Message::RemoveWorker {
        request,
        worker: worker.clone(),
    })
    .await
}

/// Asks the leader to give leadership up on purpose (an operator's
/// handoff): it closes its ZooKeeper session so a standby leads at once,
/// returns to standby and joins the election again. Refused (`Err` with the
/// leader's reason) in the single-master modes, where nobody can take over.
pub async fn step_down(masters: &[Addr], net: Arc<NetConfig>) -> Result<(), ClientError> {
    step_down_with(masters, net, Patience::once()).await
}

/// [`step_down`], trying until `patience.connect_timeout` passes.
pub async fn step_down_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    patience: Patience<'_>,
) -> Result<(), ClientError> {
    leader_request(masters, &net, patience, |request| Message::StepDown { request }).await
}

/// A chunk of an executor's output, as the leader answered it
/// ([`Message::LogChunk`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogChunk {
    /// Where `data` starts in the file.
    pub offset: u64,
    /// The bytes.
    pub data: Vec<u8>,
    /// The file's size when the worker read it.
    pub size: u64,
    /// The executor has ended: the file grows no more.
    pub finished: bool,
}

/// Asks the leader for a chunk of `executor`'s `stream` output: from
/// `offset`, or the last `max` bytes when `offset` is `None`; `max` at most
/// [`regent_core::limits::MAX_LOG_CHUNK`]. [`ClientError::Refused`] is the
/// leader's refusal (an unknown executor, its worker not connected, no such
/// file...); the other errors say no leader answered.
pub async fn fetch_log_chunk_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    executor: &str,
    stream: regent_core::protocol::LogStream,
    offset: Option<u64>,
    max: u32,
    patience: Patience<'_>,
) -> Result<LogChunk, ClientError> {
    let request = crate::net::random_u64();
    let executor = regent_core::ExecutorId::new(executor);
    ask_patiently(
        masters,
        &net,
        true,
        patience,
        || Message::LogRequest { request, executor: executor.clone(), stream, offset, max },
        |msg| match msg {
            Message::LogChunk { request: r, offset, data, size, finished, .. } if r == request => {
                Some(Ok(LogChunk { offset, data, size, finished }))
            }
            Message::RequestRefused { request: r, reason, .. } if r == request => {
                Some(Err(ClientError::Refused { reason }))
            }
            _ => None,
        },
    )
    .await?
}

/// An operator's change to the cluster (docs/design.md#issue-14), sent to the leader and
/// accepted once durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// `regent cordon WORKER`.
    Cordon(String),
    /// `regent uncordon WORKER`.
    Uncordon(String),
    /// `regent drain WORKER --deadline D`.
    Drain {
        /// The worker.
        worker: String,
        /// SIGKILL after this long.
        deadline: Duration,
    },
    /// `regent scale FRAMEWORK GROUP N [--remove ID,...] [--signal S]
    /// [--deadline D]`.
    Scale {
        /// The framework.
        framework: String,
        /// The group.
        group: String,
        /// The slot count wanted.
        slots: u32,
        /// The executors that go (the highest slots otherwise).
        remove: Vec<String>,
        /// How the removed executors stop (`None`: killed).
        stop: Option<regent_core::api::Stop>,
    },
    /// `regent kill-executor EXECUTOR [--no-refill]`.
    KillExecutor {
        /// The executor.
        executor: String,
        /// Place a replacement in its slot.
        refill: bool,
    },
    /// `regent token revoke ID|TOKEN`.
    RevokeToken {
        /// The token's id.
        id: regent_core::token::TokenId,
        /// Its expiry, when known (the entry is dropped after it).
        expires_ms: Option<u64>,
    },
    /// `regent token revoke --retire-keys N`.
    RetireKeys(u32),
}

impl Change {
    /// The request message for request id `request`.
    pub fn message(&self, request: u64) -> Message {
        match self {
            Change::Cordon(w) => Message::CordonWorker { request, worker: WorkerId::new(w) },
            Change::Uncordon(w) => Message::UncordonWorker { request, worker: WorkerId::new(w) },
            Change::Drain { worker, deadline } => Message::DrainWorker {
                request,
                worker: WorkerId::new(worker),
                deadline: Millis(u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX)),
            },
            Change::Scale { framework, group, slots, remove, stop } => Message::ScaleGroup {
                request,
                framework: FrameworkId::new(framework),
                group: group.clone(),
                slots: *slots,
                remove: remove.iter().map(ExecutorId::new).collect(),
                stop: *stop,
            },
            Change::KillExecutor { executor, refill } => Message::OperatorKillExecutor {
                request,
                executor: ExecutorId::new(executor),
                refill: *refill,
            },
            Change::RevokeToken { id, expires_ms } => {
                Message::RevokeToken { request, id: *id, expires_ms: *expires_ms }
            }
            Change::RetireKeys(through) => Message::RetireKeys { request, through: *through },
        }
    }
}

/// Asks the leader to make `change`. `Ok` once the leader has made it
/// durable; a refusal (an unknown worker, say) is `Err` with the leader's
/// reason. Finds the leader as every operator command does.
pub async fn change(
    masters: &[Addr],
    net: Arc<NetConfig>,
    change: &Change,
) -> Result<(), ClientError> {
    change_with(masters, net, change, Patience::once()).await
}

/// [`change`], trying until `patience.connect_timeout` passes.
pub async fn change_with(
    masters: &[Addr],
    net: Arc<NetConfig>,
    change: &Change,
    patience: Patience<'_>,
) -> Result<(), ClientError> {
    leader_request(masters, &net, patience, |request| change.message(request)).await
}

/// Parses a drain deadline: `90s`, `500ms`, `5m`, `1h`, or a bare number of
/// seconds; at most [`regent_core::limits::MAX_DRAIN_DEADLINE`].
pub fn parse_deadline(text: &str) -> Result<Duration, DeadlineError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 =
        digits.parse().map_err(|_| DeadlineError::NotADuration { text: text.to_string() })?;
    let ms = match unit {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => {
            return Err(DeadlineError::UnknownUnit {
                text: text.to_string(),
                unit: unit.to_string(),
            })
        }
    };
    let max = regent_core::limits::MAX_DRAIN_DEADLINE.0;
    match ms {
        Some(ms) if ms <= max => Ok(Duration::from_millis(ms)),
        _ => Err(DeadlineError::TooLong { text: text.to_string() }),
    }
}

/// A deadline as given back to the operator (`90s`, `1500ms`).
pub fn deadline_text(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Follows a drain of `worker` until the leader shows it DRAINED, calling
/// `progress` with a line whenever the number of executors left changes.
/// Asks the leader (following it across a failover) about once a second;
/// gives up with an error once the deadline has passed by more than a
/// minute, or when the worker is no longer draining (uncordoned, or
/// removed).
pub async fn wait_drained(
    masters: &[Addr],
    net: Arc<NetConfig>,
    worker: &str,
    deadline: Duration,
    patience: Patience<'_>,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), ClientError> {
    let give_up = std::time::Instant::now() + deadline + Duration::from_secs(60);
    let mut last: Option<String> = None;
    loop {
        let state = fetch_state_with(masters, net.clone(), true, patience).await?;
        let Some(w) = state.workers.iter().find(|w| w.id.as_str() == worker) else {
            return Err(ClientError::WorkerGone { worker: worker.to_string() });
        };
        if w.drain == Some(DrainState::Drained) {
            return Ok(());
        }
        if w.drain != Some(DrainState::Draining) {
            return Err(ClientError::NotDraining {
                worker: worker.to_string(),
                placement: placement_text(w),
            });
        }
        let line = format!("worker {worker}: DRAINING, {} executors left", w.executors);
        if last.as_ref() != Some(&line) {
            progress(&line);
            last = Some(line);
        }
        if std::time::Instant::now() > give_up {
            return Err(ClientError::StillDraining {
                worker: worker.to_string(),
                executors: w.executors,
            });
        }
        async_io::Timer::after(Duration::from_millis(500)).await;
    }
}

/// Renders `state` as a human-readable table: the answering master (status,
/// epoch, leader, message counters), then workers (id, state, cores
/// used/total, memory used/total), frameworks and executors.
pub fn render_table(state: &ClusterState) -> String {
    let mut out = String::new();
    let leader = match &state.leader {
        Some(h) => format!("{} ({}, epoch {})", h.id, h.addr, h.epoch.0),
        None => "unknown".to_string(),
    };
    out.push_str(&table(
        &["MASTER", "STATUS", "EPOCH", "LEADER", "MESSAGES", "REJECTED"],
        vec![vec![
            state.master.to_string(),
            state.status.to_string(),
            state.epoch.0.to_string(),
            leader,
            state.messages.to_string(),
            state.rejected.to_string(),
        ]],
    ));

    out.push_str(&format!("\nWORKERS ({})\n", state.workers.len()));
    out.push_str(&table(
        &["ID", "STATE", "PLACEMENT", "EXECUTORS", "CORES (USED/TOTAL)", "MEMORY MiB (USED/TOTAL)"],
        state
            .workers
            .iter()
            .map(|w| {
                vec![
                    w.id.to_string(),
                    w.state.to_string(),
                    placement_text(w),
                    w.executors.to_string(),
                    format!("{}/{}", w.cores_used, w.cores),
                    format!("{}/{}", w.memory_used_mb, w.memory_mb),
                ]
            })
            .collect(),
    ));

    out.push_str(&format!("\nFRAMEWORKS ({})\n", state.frameworks.len()));
    out.push_str(&table(
        &["ID", "NAME", "STATE", "CONNECTED", "GROUPS (RUNNING/SLOTS)"],
        state
            .frameworks
            .iter()
            .map(|f| {
                let groups: Vec<String> = f
                    .groups
                    .iter()
                    .map(|g| {
                        let scaled = if g.slots != g.declared {
                            format!(", scaled from {}", g.declared)
                        } else {
                            String::new()
                        };
                        let waiting = if g.waiting > 0 {
                            format!(", {} waiting to restart", g.waiting)
                        } else {
                            String::new()
                        };
                        let last = match &g.last_end {
                            Some(end) => format!(" (last failure {end})"),
                            None => String::new(),
                        };
                        let unplaced = match (g.unplaced, g.reasons.split_first()) {
                            (0, _) => String::new(),
                            (n, None) => format!(", {n} waiting"),
                            (n, Some((first, []))) => format!(", {n} waiting: {first}"),
                            (n, Some((first, more))) => {
                                format!(", {n} waiting: {first} (+{} more)", more.len())
                            }
                        };
                        // A deployment under way, or one that failed.
                        let deploying = match &g.deployment {
                            Some(d) if d.state == "failed" => {
                                format!(", deployment {} FAILED", d.seq)
                            }
                            Some(d) if d.state != "succeeded" => format!(
                                ", deployment {} {} {}/{} healthy",
                                d.seq, d.state, d.healthy, d.open
                            ),
                            _ => String::new(),
                        };
                        format!(
                            "{} {}/{}{scaled}{waiting}{unplaced}{deploying}{last}",
                            g.name, g.running, g.slots
                        )
                    })
                    .collect();
                vec![
                    f.id.to_string(),
                    f.name.clone(),
                    f.state.to_string(),
                    if f.connected { "yes" } else { "no" }.to_string(),
                    if groups.is_empty() { "-".into() } else { groups.join("; ") },
                ]
            })
            .collect(),
    ));

    out.push_str(&format!("\nEXECUTORS ({})\n", state.executors.len()));
    out.push_str(&table(
        &["ID", "FRAMEWORK", "WORKER", "STATE", "HEALTH", "PORTS"],
        state
            .executors
            .iter()
            .map(|e| {
                let st = match &e.state {
                    ExecutorState::Exited { code } => format!("EXITED (code {code})"),
                    ExecutorState::Failed { reason } => format!("FAILED ({reason})"),
                    other => executor_state_name(other).to_string(),
                };
                vec![
                    e.id.to_string(),
                    e.framework.to_string(),
                    e.worker.as_ref().map(|w| w.to_string()).unwrap_or_else(|| "-".into()),
                    st,
                    health_text(e.health.as_ref()),
                    if e.ports.is_empty() {
                        "-".into()
                    } else {
                        regent_core::ports::describe(&e.ports)
                    },
                ]
            })
            .collect(),
    ));

    out.push_str(&format!("\nFINISHED FRAMEWORKS ({})\n", state.history.len()));
    out.push_str(&table(
        &["ID", "NAME", "OUTCOME", "FINISHED (UTC)", "SLOTS"],
        state
            .history
            .iter()
            .map(|f| {
                vec![
                    f.id.to_string(),
                    f.name.clone(),
                    f.outcome.to_string(),
                    utc(f.finished_at_ms),
                    slot_summary(f),
                ]
            })
            .collect(),
    ));
    if state.history_omitted > 0 {
        out.push_str(&format!(
            "  ({} older finished frameworks kept by the leader, not shown: the reply's history is capped at {} bytes)\n",
            state.history_omitted,
            regent_core::limits::MAX_HISTORY_STATE_BYTES
        ));
    }
    out
}

/// An executor's health in one cell of `regent status`
/// (docs/jobs.md#health-checks-groupcheck): `passing`, `pending`,
/// `failing (http: GET /health answered 500)`; `-` without checks or a
/// report.
fn health_text(h: Option<&regent_core::protocol::HealthReport>) -> String {
    match h {
        None => "-".into(),
        Some(h)
            if h.detail.is_empty() || h.status == regent_core::protocol::HealthStatus::Passing =>
        {
            h.status.name().into()
        }
        Some(h) => format!("{} ({})", h.status.name(), h.detail),
    }
}

/// A finished framework's slots in one cell: how many ended in each state
/// (`2 EXITED 0, 1 KILLED`), and how many were left out of the reply.
fn slot_summary(f: &regent_core::protocol::FinishedFramework) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for s in &f.slots {
        let name = match s.exit_code() {
            Some(code) => format!("EXITED {code}"),
            None => s.state_name().to_string(),
        };
        // A slot whose last end was a preemption says by whom
        // (docs/design.md#issue-44).
        let name = match &s.preempted_by {
            Some(by) => format!("{name} (preempted by {by})"),
            None => name,
        };
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += 1,
            None => counts.push((name, 1)),
        }
    }
    let mut parts: Vec<String> = counts.into_iter().map(|(n, c)| format!("{c} {n}")).collect();
    if f.slots_omitted > 0 {
        parts.push(format!("{} more not shown", f.slots_omitted));
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// `ms` since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC`; `-` for 0
/// (unknown).
fn utc(ms: u64) -> String {
    if ms == 0 {
        "-".to_string()
    } else {
        utc_text(ms)
    }
}

/// How a worker takes new executors, for `regent status`: `open`,
/// `CORDONED`, `DRAINING (SIGKILL at <UTC time>)` or `DRAINED`.
pub fn placement_text(w: &WorkerView) -> String {
    match (w.cordoned, w.drain) {
        (false, _) => "open".into(),
        (true, None) => MaintenanceState::Cordoned.name().into(),
        (true, Some(DrainState::Draining)) => match w.drain_deadline_ms {
            Some(ms) => format!("DRAINING (SIGKILL at {})", utc_text(ms)),
            None => DrainState::Draining.name().into(),
        },
        (true, Some(other)) => other.name().into(),
    }
}

/// Wall-clock milliseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc_text(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Left-aligned columns separated by two spaces; control characters in
/// cells (a newline in a reason, say) are shown as spaces so rows stay rows.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    if rows.is_empty() {
        return "  (none)\n".to_string();
    }
    let clean =
        |s: &str| -> String { s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect() };
    let rows: Vec<Vec<String>> =
        rows.into_iter().map(|r| r.iter().map(|c| clean(c)).collect()).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(cell);
                let pad = widths[i] - cell.chars().count() + 2;
                s.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

/// Sends a leader-only request and reads `RequestAccepted`/`RequestRefused`.
async fn leader_request(
    masters: &[Addr],
    net: &Arc<NetConfig>,
    patience: Patience<'_>,
    make: impl Fn(u64) -> Message,
) -> Result<(), ClientError> {
    let request = crate::net::random_u64();
    let outcome = ask_patiently(
        masters,
        net,
        true,
        patience,
        || make(request),
        |msg| match msg {
            Message::RequestAccepted { request: r, .. } if r == request => Some(Ok(())),
            Message::RequestRefused { request: r, reason, .. } if r == request => {
                Some(Err(ClientError::Refused { reason }))
            }
            _ => None,
        },
    )
    .await?;
    outcome
}

/// What one master did with the request.
enum Attempt<T> {
    /// The answer (which may itself be a refusal).
    Answered(T),
    /// Not the leader: try the hinted leader (if any) next.
    NotLeader { why: String, hint: Option<LeaderHint>, masters: Vec<Addr> },
    /// Unreachable, silent, closed, or otherwise no answer.
    Failed(String),
    /// Refused by the exposure rule before dialling, or the handshake was
    /// refused (wrong secret or cluster): not worth retrying.
    Refused(String),
}

/// A round over the masters that got no answer.
struct NoAnswer {
    /// [`ClientError::NoAnswer`] (naming every master tried and why it did
    /// not answer) or [`ClientError::NoMasterGiven`].
    error: ClientError,
    /// Every master tried was refused by the exposure rule (retrying cannot
    /// help).
    refused: bool,
    /// The masters tried, in order.
    tried: Vec<Addr>,
}

/// Rounds of [`ask_masters`] until one answers or `patience` runs out.
async fn ask_patiently<T>(
    masters: &[Addr],
    net: &Arc<NetConfig>,
    leader_only: bool,
    patience: Patience<'_>,
    request: impl Fn() -> Message,
    answer: impl Fn(Message) -> Option<T>,
) -> Result<T, ClientError> {
    let start = std::time::Instant::now();
    let mut pause = ROUND_PAUSE;
    let mut last_notice: Option<std::time::Instant> = None;
    let mut rounds = 0u32;
    loop {
        rounds += 1;
        let failed = match ask_masters(masters, net, leader_only, &request, &answer).await {
            Ok(t) => return Ok(t),
            Err(failed) => failed,
        };
        let elapsed = start.elapsed();
        if failed.refused || elapsed >= patience.connect_timeout {
            let mut error = failed.error;
            if !patience.connect_timeout.is_zero() && !failed.refused {
                if let ClientError::NoAnswer { gave_up, .. } = &mut error {
                    *gave_up = Some(GaveUp { rounds, after: patience.connect_timeout });
                }
            }
            return Err(error);
        }
        if last_notice.is_none_or(|at: std::time::Instant| at.elapsed() >= NOTICE_INTERVAL) {
            last_notice = Some(std::time::Instant::now());
            let next: Vec<String> = failed.tried.iter().map(|a| a.to_string()).collect();
            let left = patience.connect_timeout.saturating_sub(elapsed);
            (patience.notice)(&format!(
                "{}; trying {} again (giving up in {} s)",
                failed.error,
                next.join(", "),
                left.as_secs()
            ));
        }
        async_io::Timer::after(pause.min(patience.connect_timeout - elapsed)).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// Dials masters in turn until one answers `request` with a message that
/// `answer` accepts. Returns `Err` (naming every master tried) when none
/// does; `Ok(answer)` otherwise.
async fn ask_masters<T>(
    masters: &[Addr],
    net: &Arc<NetConfig>,
    leader_only: bool,
    request: &impl Fn() -> Message,
    answer: &impl Fn(Message) -> Option<T>,
) -> Result<T, NoAnswer> {
    let mut queue: VecDeque<Addr> = VecDeque::new();
    for m in masters {
        if !queue.contains(m) {
            queue.push_back(m.clone());
        }
    }
    if queue.is_empty() {
        return Err(NoAnswer {
            error: ClientError::NoMasterGiven,
            refused: true,
            tried: Vec::new(),
        });
    }
    let mut tried: Vec<(Addr, String)> = Vec::new();
    let mut refused = 0usize;
    let mut next_conn = 0u64;
    while let Some(addr) = queue.pop_front() {
        if tried.iter().any(|(a, _)| *a == addr) {
            continue;
        }
        if tried.len() >= MAX_ATTEMPTS {
            tried.push((addr, format!("not tried: gave up after {MAX_ATTEMPTS} masters")));
            break;
        }
        next_conn += 1;
        let attempt = ask_one(&addr, ConnId(next_conn), net, leader_only, request, answer).await;
        match attempt {
            Attempt::Answered(t) => return Ok(t),
            Attempt::NotLeader { why, hint, masters: advertised } => {
                if let Some(h) = &hint {
                    if !tried.iter().any(|(a, _)| *a == h.addr) && h.addr != addr {
                        queue.retain(|a| *a != h.addr);
                        queue.push_front(h.addr.clone());
                    }
                }
                for m in advertised {
                    if !queue.contains(&m) && m != addr {
                        queue.push_back(m);
                    }
                }
                tracing::debug!(master = %addr, %why, "not the leader");
                tried.push((addr, why));
            }
            Attempt::Failed(why) => {
                tracing::debug!(master = %addr, %why, "no answer");
                tried.push((addr, why));
            }
            Attempt::Refused(why) => {
                tracing::debug!(master = %addr, %why, "refused");
                refused += 1;
                tried.push((addr, why));
            }
        }
    }
    Err(NoAnswer {
        refused: refused > 0 && refused == tried.len(),
        tried: tried.iter().map(|(a, _)| a.clone()).collect(),
        error: ClientError::NoAnswer {
            leader_only,
            tried: tried.into_iter().map(|(addr, why)| Tried { addr, why }).collect(),
            gave_up: None,
        },
    })
}

/// One connection to one master: connect, `Hello`, request, answer, close.
async fn ask_one<T>(
    addr: &Addr,
    conn: ConnId,
    net: &Arc<NetConfig>,
    leader_only: bool,
    request: &impl Fn() -> Message,
    answer: &impl Fn(Message) -> Option<T>,
) -> Attempt<T> {
    let has_secret = net.authenticates(regent_core::auth::Side::Client);
    let insecure = net.insecure;
    // Refuses a non-loopback master without a secret unless --insecure,
    // before a single byte goes out.
    let dialled = match crate::net::dial(addr, has_secret, insecure, true, CONNECT_TIMEOUT).await {
        Ok(s) => s,
        Err(e) if e.refused => return Attempt::Refused(format!("connect failed: {}", e.reason)),
        Err(e) => return Attempt::Failed(format!("connect failed: {}", e.reason)),
    };
    let (events_tx, events) = async_channel::unbounded();
    let handle = crate::net::spawn_dialled(dialled, conn, net.clone(), events_tx);
    let exchange = exchange(&handle, &events, net, leader_only, request, answer);
    let attempt = match deadline(ANSWER_TIMEOUT, exchange).await {
        Some(a) => a,
        None => Attempt::Failed(format!("no answer within {ANSWER_TIMEOUT:?}")),
    };
    handle.close();
    attempt
}

async fn exchange<T>(
    handle: &ConnHandle,
    events: &Receiver<NetEvent>,
    net: &NetConfig,
    leader_only: bool,
    request: &impl Fn() -> Message,
    answer: &impl Fn(Message) -> Option<T>,
) -> Attempt<T> {
    handle.send(Message::Hello(Hello {
        version: PROTOCOL_VERSION,
        cluster: net.cluster.clone(),
        role: Role::Client,
        node: client_node_name(),
    }));
    let hello = loop {
        match next_message(events).await {
            // A wrong secret or cluster is a configuration error, like an
            // exposure refusal: retrying cannot help.
            Err(gone) if gone.is_handshake_refusal() => return Attempt::Refused(gone.to_string()),
            Err(gone) => return Attempt::Failed(gone.to_string()),
            Ok(Message::HelloReply(r)) => break r,
            Ok(Message::NotLeader { epoch, leader }) => {
                return not_leader(epoch.0, leader, Vec::new());
            }
            Ok(other) => {
                tracing::debug!(kind = other.kind(), "unexpected message before HelloReply");
            }
        }
    };
    if leader_only && !hello.leading {
        return not_leader(hello.epoch.0, hello.leader, hello.masters);
    }
    handle.send(request());
    loop {
        match next_message(events).await {
            Err(gone) => return Attempt::Failed(gone.to_string()),
            Ok(Message::NotLeader { epoch, leader }) => {
                return not_leader(epoch.0, leader, hello.masters);
            }
            Ok(Message::LeaderSuspended { epoch }) => {
                return Attempt::Failed(format!(
                    "leader at epoch {} is suspended (its coordination session is in doubt); \
                     retry shortly",
                    epoch.0
                ));
            }
            Ok(msg) => {
                let kind = msg.kind();
                match answer(msg) {
                    Some(t) => return Attempt::Answered(t),
                    None => tracing::debug!(kind, "ignoring unrelated message"),
                }
            }
        }
    }
}

fn not_leader<T>(epoch: u64, leader: Option<LeaderHint>, masters: Vec<Addr>) -> Attempt<T> {
    let why = match &leader {
        Some(h) => format!(
            "not the leader (epoch {epoch}); leader is {} at {} (epoch {})",
            h.id, h.addr, h.epoch.0
        ),
        None => format!("not the leader (epoch {epoch}); leader unknown"),
    };
    Attempt::NotLeader { why, hint: leader, masters }
}

/// The connection ended before the next message: its cause (`None` when
/// the event channel ended without one).
struct Gone(Option<CloseCause>);

impl Gone {
    fn is_handshake_refusal(&self) -> bool {
        self.0.as_ref().is_some_and(CloseCause::is_handshake_refusal)
    }
}

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(cause) => write!(f, "connection closed: {cause}"),
            None => f.write_str("connection closed"),
        }
    }
}

async fn next_message(events: &Receiver<NetEvent>) -> Result<Message, Gone> {
    loop {
        return match events.recv().await {
            Ok(NetEvent::Message { msg, .. }) => Ok(msg),
            Ok(NetEvent::Closed { cause, .. }) => Err(Gone(Some(cause))),
            // Only an accepting side hears of a token: never a dialled one.
            Ok(NetEvent::Authenticated { .. }) => continue,
            Err(_) => Err(Gone(None)),
        };
    }
}

/// `None` when `d` passes first.
async fn deadline<T>(d: Duration, f: impl Future<Output = T>) -> Option<T> {
    smol::future::or(async { Some(f.await) }, async {
        async_io::Timer::after(d).await;
        None
    })
    .await
}

/// The node name an operator tool gives in `Hello`, for the masters' logs.
fn client_node_name() -> String {
    format!("regent-client-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::render_jobs;
    use regent_core::api::{GroupStatus, JobStatus, SlotPhase, SlotStatus, WaitReason};
    use regent_core::states::FrameworkState;
    use regent_core::{ExecutorId, FrameworkId, WorkerId};

    fn slot(slot: u32, phase: SlotPhase, reason: Option<&str>) -> SlotStatus {
        let placed = matches!(phase, SlotPhase::Running | SlotPhase::Stopping);
        SlotStatus {
            health: None,
            preempted_by: None,
            slot,
            phase,
            executor: placed.then(|| ExecutorId::new(format!("fw/g#{slot}#1.{slot}"))),
            worker: placed.then(|| WorkerId::new("w1")),
            reason: reason.map(str::to_owned),
            reasons: Vec::new(),
        }
    }

    #[test]
    fn job_status_text_lists_counts_and_every_slot_that_does_not_run() {
        let jobs = vec![JobStatus {
            tenant: None,
            job: FrameworkId::new("fw"),
            name: "wordcount".into(),
            version: None,
            state: FrameworkState::Active,
            groups: vec![GroupStatus {
                group: "g".into(),
                desired: 5,
                placed: 2,
                running: 1,
                done: 1,
                rolling: true,
                priority: 80,
                stop_after_ms: Some(30_000),
                deployment: Some(regent_core::api::DeploymentView {
                    seq: 4,
                    state: "awaiting_promotion".into(),
                    reason: None,
                    revert_of: None,
                    healthy: 1,
                    open: 4,
                    canary: 1,
                    max_parallel: 1,
                    min_healthy_time_ms: 10_000,
                    ..Default::default()
                }),
                slots: vec![
                    slot(0, SlotPhase::Running, None),
                    // A preemption's victim (docs/design.md#issue-44).
                    SlotStatus {
                        preempted_by: Some("jb/work".into()),
                        ..slot(1, SlotPhase::Stopping, None)
                    },
                    slot(2, SlotPhase::Backoff, Some("restarts at 12:00:05")),
                    slot(3, SlotPhase::Failed, Some("exit 3")),
                    SlotStatus {
                        preempted_by: Some("jb/work".into()),
                        reason: Some("no ALIVE worker matches rack=r9".into()),
                        reasons: vec![
                            WaitReason::NoMatchingWorker { constraint: "rack=r9".into() },
                            WaitReason::Cordoned { workers: 2 },
                        ],
                        ..slot(4, SlotPhase::Waiting, None)
                    },
                    // A running slot shows its health (docs/design.md#issue-45).
                    SlotStatus {
                        health: Some(regent_core::protocol::HealthReport {
                            status: regent_core::protocol::HealthStatus::Failing,
                            for_ms: 3_500,
                            detail: "http: GET /health answered 500".into(),
                        }),
                        ..slot(5, SlotPhase::Running, None)
                    },
                ],
            }],
        }];
        assert_eq!(
            render_jobs(&jobs),
            "job fw (name \"wordcount\") subscriber ACTIVE\n\
             \x20 group \"g\": desired/placed/running/done 5/2/1/1 priority 80 singleton (stop_after 30s) (rolling out an update)\n\
             \x20   deployment 4: canary 1/1 healthy, awaiting promotion: regent job promote fw --group g\n\
             \x20   slot 1 stopping executor fw/g#1#1.1 on w1, preempted by jb/work\n\
             \x20   slot 2 backoff: restarts at 12:00:05\n\
             \x20   slot 3 failed: exit 3\n\
             \x20   slot 4 waiting, preempted by jb/work: no ALIVE worker matches rack=r9\n\
             \x20     also: 2 matching worker(s) are cordoned\n\
             \x20   slot 5 running executor fw/g#5#1.5 on w1 health failing 3s (http: GET /health answered 500)\n"
        );
        assert_eq!(render_jobs(&[]), "no jobs\n");
    }
}

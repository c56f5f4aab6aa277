//! The API client (`regent-soak --api-jobs`): a program on a master's host
//! asking the leader through the HTTP API, which hands the node each
//! request as a local query (`Query::Command`) and waits for the one
//! answer. It submits, updates, deletes and lists jobs the leader owns
//! ([`Fault::ApiJob`](crate::sim::Fault::ApiJob)), one request at a time,
//! as a careful client does: a request not answered for good (no answer
//! yet, the master it asked died, or it is not the leader) is retried at
//! its next turn on whichever master leads then, with the same idempotency
//! key. What its answers promise is checked by
//! [`invariants::api_jobs`](super::invariants::api_jobs).

use super::invariants::api_jobs;
use super::{spec_for, Input, Node, World};
use crate::sim::SimConfig;
use regent_core::api::{JobChange, JobSubmission};
use regent_core::ids::QueryId;
use regent_core::node::master::{self as mnode, Answer, Query};
use regent_core::protocol::tenants::{Dims, Tenant};
use regent_core::protocol::Message;
use regent_core::FrameworkId;
use std::collections::BTreeMap;

/// How many job ids the client uses (`api0`, `api1`, `api2`).
const JOBS: u32 = 3;

/// With `--singletons`, job `api1`'s group: a singleton (`disconnect = {
/// stop_after = "12s" }`, docs/design.md#issue-45), named apart from the
/// other jobs' `web` so the `singleton_slots` invariant knows it.
pub(crate) const SINGLETON_GROUP: &str = "single";

/// `--tenants`: the priority of job `apiK`'s group (docs/design.md#issue-44).
const JOB_PRIORITIES: [u8; JOBS as usize] = [50, 80, 20];

/// `--tenants`: the tenants the client sets first and the cores each may
/// hold; job `apiK` belongs to the `K % 2`th.
pub(crate) const TENANT_LIMITS: [(&str, u64); 2] = [("team-0", 1), ("team-1", 2)];

/// `--preemption`: the tenants the client sets first, as (name, cores
/// guaranteed, core limit, weight); job `apiK` belongs to the `K % 2`th.
/// `team-0`'s guarantee is above what weighted DRF alone would leave it
/// beside `team-1` (weight 4) on the smaller clusters, so the guarantee is
/// what protects it; the sum of the guarantees (4 cores) fits the
/// smallest cluster (5 cores).
pub(crate) const PREEMPTION_TENANTS: [(&str, u64, Option<u64>, u32); 2] =
    [("team-0", 3, None, 1), ("team-1", 1, Some(6), 4)];

/// The tenants the client sets first in `cfg`'s mode, as the operator means
/// them (with `Knobs::hidden_guarantees`, the leader is told them without
/// their guarantees).
fn tenants_of(cfg: &SimConfig) -> Vec<Tenant> {
    if cfg.preemption {
        PREEMPTION_TENANTS
            .iter()
            .map(|(name, guaranteed, limit, weight)| Tenant {
                guarantee: Dims { cores: Some(*guaranteed), ..Dims::default() },
                limit: Dims { cores: *limit, ..Dims::default() },
                weight: *weight,
                ..Tenant::new(*name)
            })
            .collect()
    } else if cfg.tenants {
        TENANT_LIMITS
            .iter()
            .map(|(name, cores)| Tenant {
                limit: Dims { cores: Some(*cores), ..Dims::default() },
                ..Tenant::new(*name)
            })
            .collect()
    } else {
        Vec::new()
    }
}

/// The guarantee the operator set for `tenant` in `cfg`'s mode, if it set
/// that tenant.
pub(crate) fn guarantee_of(cfg: &SimConfig, tenant: &str) -> Option<Dims> {
    tenants_of(cfg).into_iter().find(|t| t.name == tenant).map(|t| t.guarantee)
}

/// The client's state.
#[derive(Debug, Default)]
pub(crate) struct ApiClient {
    /// Numbers the client gave its queries and requests.
    next: u64,
    /// The request waiting for a final answer.
    pending: Option<Message>,
    /// Queries asked and not answered: query -> the request's number.
    asked: BTreeMap<QueryId, u64>,
    /// The version of each job the client last heard of (for
    /// `expect_version`).
    known: BTreeMap<FrameworkId, u64>,
    /// How many of the tenants of `--tenants` were set (accepted).
    tenants_set: usize,
    /// Requests sent (tries included).
    pub(crate) sent: u64,
    /// Final answers received.
    pub(crate) answered: u64,
    /// `JobAccepted` answers received.
    pub(crate) accepted: u64,
    /// Of them, `Replayed` ones (a retry's key seen before).
    pub(crate) replayed: u64,
}

/// The request number a message carries.
fn request_of(msg: &Message) -> u64 {
    match msg {
        Message::SubmitJob { request, .. }
        | Message::DeleteJob { request, .. }
        | Message::JobsRequest { request, .. }
        | Message::SetTenant { request, .. } => *request,
        _ => u64::MAX,
    }
}

impl World {
    /// The API client's turn ([`Fault::ApiJob`](crate::sim::Fault::ApiJob)).
    pub(crate) fn api_turn(&mut self, op: u8, n: u32) {
        let m = self.leader_or(n as usize);
        if !self.masters[m].p.up {
            return;
        }
        let msg = match self.api.pending.clone() {
            Some(msg) => msg,
            None => match self.api_request(op, n) {
                Some(msg) => msg,
                None => return,
            },
        };
        self.api.next += 1;
        let query = QueryId(self.api.next);
        self.api.asked.insert(query, request_of(&msg));
        self.api.pending = Some(msg.clone());
        self.api.sent += 1;
        self.log(|| format!("api client asks m{m} ({query}): {msg:?}"));
        let ask = Query::Command { msg, principal: Box::new(regent_core::token::Principal::Root) };
        self.local_input(Node::Master(m), Input::Master(mnode::Input::Query { query, ask }));
    }

    /// A new request, remembered by the invariant as sent.
    fn api_request(&mut self, op: u8, n: u32) -> Option<Message> {
        self.api.next += 1;
        let request = self.api.next;
        // `--tenants`, `--preemption`: the tenants first, one at a time
        // (each durable before any job is submitted), then jobs of theirs.
        let tenants = tenants_of(&self.cfg);
        if let Some(tenant) = tenants.get(self.api.tenants_set) {
            let mut tenant = tenant.clone();
            if self.cfg.knobs.hidden_guarantees {
                tenant.guarantee = Dims::default();
            }
            return Some(Message::SetTenant { request, tenant });
        }
        let tenant = (!tenants.is_empty())
            .then(|| tenants[(n % JOBS) as usize % tenants.len()].name.clone());
        let job = FrameworkId(format!("api{}", n % JOBS));
        // With `--preemption` jobs of 2 to 4 slots, which overfill the
        // cluster beside the subscribers' frameworks.
        let slots = if self.cfg.preemption { 2 + n / 3 % 3 } else { 1 + n / 3 % 2 };
        let submission = |job: FrameworkId, key: String, expect_version: Option<u64>| {
            let mut spec = spec_for(9, slots);
            spec.group = "web".into();
            spec.memory_mb = 64;
            // Every other submission of a job changes its command (an
            // update, rolled out), the count only at creation.
            spec.command = vec!["serve".into(), format!("v{}", n / 6 % 2)];
            // `--tenants`: each job its own priority (docs/design.md#issue-44),
            // so placement by priority and preemption by priority run too.
            if self.cfg.tenants {
                spec.policy.priority = JOB_PRIORITIES[(n % JOBS) as usize];
            }
            // `--services`: a service with a check and an update policy of
            // its own (fixed per job, so only the command makes a
            // deployment), whose third version runs unhealthy.
            if self.cfg.services {
                let k = u64::from(n % JOBS);
                spec.launch.checks = vec![regent_core::launch::CheckSpec {
                    name: "ready".into(),
                    kind: regent_core::launch::CheckKind::Exec { command: vec!["ready".into()] },
                    interval_ms: 700 + 400 * k,
                    timeout_ms: 500 + 700 * k,
                    grace_ms: 300 * k,
                    failures: 2 + (k % 2) as u32,
                }];
                // Job `api1`'s framework also reports a manual check
                // (docs/design.md#issue-45 item 5).
                if k == 1 {
                    spec.launch.checks.push(regent_core::launch::CheckSpec {
                        name: "manual".into(),
                        kind: regent_core::launch::CheckKind::Manual { ttl_ms: 2_000 },
                        interval_ms: 1_000,
                        timeout_ms: 1_000,
                        grace_ms: 500,
                        failures: 2,
                    });
                }
                spec.policy.update = Some(Box::new(regent_core::policy::UpdatePolicy {
                    max_parallel: 1,
                    min_healthy_time_ms: 1_000 + 500 * k,
                    healthy_deadline_ms: 12_000,
                    progress_deadline_ms: if k == 1 { 0 } else { 30_000 },
                    // Job `api0` rolls out behind a canary the operator
                    // promotes (docs/design.md#issue-45 item 5).
                    canary: u32::from(k == 0),
                    auto_promote: k != 0,
                    auto_revert: k != 2,
                }));
                spec.policy.restart.mode = regent_core::policy::RestartMode::Service;
                spec.command = vec!["serve".into(), format!("v{}", n / 6 % 3)];
                if n / 6 % 3 == 2 {
                    spec.command.push(super::services::UNHEALTHY.into());
                }
            }
            if self.cfg.singletons && job.0 == "api1" {
                spec.group = SINGLETON_GROUP.into();
                spec.launch.disconnect = Some(regent_core::launch::Disconnect::after_ms(12_000));
            }
            JobSubmission {
                name: job.0.clone(),
                job,
                groups: vec![spec],
                key: Some(key),
                expect_version,
                max_parallel: 1 + n % 2,
                tenant: tenant.clone(),
            }
        };
        let key = format!("key-{request}");
        let msg = match op % 6 {
            0 | 1 => Message::SubmitJob { request, job: submission(job, key, None) },
            2 => {
                let expect = self.api.known.get(&job).copied().unwrap_or(0);
                Message::SubmitJob { request, job: submission(job, key, Some(expect)) }
            }
            3 => Message::DeleteJob { request, job },
            4 => Message::JobsRequest { request, job: None },
            _ => {
                let ns = self.subs.len();
                let framework = self.subs.get(n as usize % ns.max(1))?.framework.clone()?;
                Message::SubmitJob { request, job: submission(framework, key, None) }
            }
        };
        api_jobs::on_request(self, &msg);
        Some(msg)
    }

    /// Master `m` answers `query`: the client's if it asked it.
    pub(crate) fn api_answer(&mut self, m: usize, query: QueryId, answer: Answer) {
        if self.manual_answer(m, query, &answer) {
            return; // the manual checks' reporter's or the operator's
        }
        let Some(request) = self.api.asked.remove(&query) else { return };
        let Answer::Reply(reply) = answer else {
            api_jobs::fail(self, format!("m{m} answered the API's {query} with no reply"));
            return;
        };
        self.log(|| format!("api client hears from m{m} ({query}): {reply:?}"));
        api_jobs::on_answer(self, m, request, &reply);
        let done = match &reply {
            Message::JobAccepted { job, version, change, .. } => {
                self.api.known.insert(job.clone(), *version);
                self.api.accepted += 1;
                self.api.replayed += u64::from(*change == JobChange::Replayed);
                true
            }
            Message::RequestAccepted { .. }
                if matches!(self.api.pending, Some(Message::SetTenant { .. })) =>
            {
                self.api.tenants_set += 1;
                true
            }
            Message::RequestAccepted { .. } | Message::JobsReply { .. } => true,
            // Refused for good (a version mismatch, no such job, a
            // subscriber's framework): the client moves on.
            Message::RequestRefused { .. } => true,
            // Not the leader, or not ready: tried again at the next turn.
            _ => false,
        };
        if !done || self.api.pending.as_ref().is_none_or(|p| request_of(p) != request) {
            return;
        }
        if let Some(Message::DeleteJob { job, .. }) = self.api.pending.take() {
            self.api.known.remove(&job);
        }
        self.api.answered += 1;
    }
}

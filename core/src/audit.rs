//! The audit log's records (docs/security.md#audit, docs/design.md#issue-44):
//! one per change a client asked of the leader, accepted or refused, with
//! who asked (the token's name and tenant), what and on what.
//!
//! The master emits a record ([`crate::master::Action::Audit`], the node's
//! `Output::Audit`) when it answers the change: accepted once the change is
//! durable, refused with the reason. The runtime appends it to its audit
//! file as one JSON line. Each master logs what it answered while leader:
//! the full trail is the union over the masters (`regent audit` merges
//! several masters' logs by time).

use crate::protocol::Message;
use crate::token::Principal;
use serde::{Deserialize, Serialize};

/// Whether a change was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Accepted (and durable).
    Accepted,
    /// Refused (see the record's reason).
    Refused,
}

/// One line of the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// When the master answered, wall-clock ms since the Unix epoch.
    pub time_ms: u64,
    /// The name of the token that asked (`root` for the cluster secret).
    pub token: String,
    /// The token's tenant, if it has one.
    pub tenant: Option<String>,
    /// What was asked (`submit-job`, `delete-job`, `scale`, `kill-framework`,
    /// `cordon`, `uncordon`, `drain`, `remove-worker`, `kill-executor`,
    /// `step-down`).
    pub action: String,
    /// What it was asked on (a job, framework, worker or executor id).
    pub target: String,
    /// Accepted or refused.
    pub outcome: Outcome,
    /// Why it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A change asked and not answered yet: who asked what on what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asked {
    /// The token's name.
    pub token: String,
    /// The token's tenant.
    pub tenant: Option<String>,
    /// The action's name.
    pub action: &'static str,
    /// Its target.
    pub target: String,
}

impl Asked {
    /// The change `msg` asks, by `principal`; `None` for a read (a plan,
    /// a job listing) or a message that changes nothing.
    pub fn of(principal: &Principal, msg: &Message) -> Option<Asked> {
        let (action, target) = match msg {
            Message::SubmitJob { job, .. } => ("submit-job", job.job.to_string()),
            Message::DeleteJob { job, .. } => ("delete-job", job.to_string()),
            Message::ScaleGroup { framework, group, .. } => {
                ("scale", format!("{framework}/{group}"))
            }
            Message::KillFramework { framework, .. } => ("kill-framework", framework.to_string()),
            Message::CordonWorker { worker, .. } => ("cordon", worker.to_string()),
            Message::UncordonWorker { worker, .. } => ("uncordon", worker.to_string()),
            Message::DrainWorker { worker, .. } => ("drain", worker.to_string()),
            Message::RemoveWorker { worker, .. } => ("remove-worker", worker.to_string()),
            Message::OperatorKillExecutor { executor, .. } => {
                ("kill-executor", executor.to_string())
            }
            Message::StepDown { .. } => ("step-down", String::new()),
            Message::RevokeToken { id, .. } => ("revoke-token", id.to_string()),
            Message::RetireKeys { through, .. } => ("retire-keys", format!("through {through}")),
            _ => return None,
        };
        Some(Asked {
            token: principal.name().to_owned(),
            tenant: principal.tenant().map(str::to_owned),
            action,
            target,
        })
    }

    /// The record of its answer `reply` at wall-clock `time_ms`, when the
    /// reply answers a change (accepted or refused).
    pub fn answered(self, time_ms: u64, reply: &Message) -> Option<AuditRecord> {
        let (outcome, reason) = match reply {
            Message::RequestAccepted { .. } | Message::JobAccepted { .. } => {
                (Outcome::Accepted, None)
            }
            Message::RequestRefused { reason, .. } => (Outcome::Refused, Some(reason.clone())),
            _ => return None,
        };
        Some(AuditRecord {
            time_ms,
            token: self.token,
            tenant: self.tenant,
            action: self.action.to_owned(),
            target: self.target,
            outcome,
            reason,
        })
    }
}

/// The request number a reply answers, when it answers a change.
pub fn answers_request(reply: &Message) -> Option<u64> {
    match reply {
        Message::RequestAccepted { request, .. }
        | Message::JobAccepted { request, .. }
        | Message::RequestRefused { request, .. } => Some(*request),
        _ => None,
    }
}

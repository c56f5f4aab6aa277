//! Who may send a local command (the HTTP API's writes and job reads,
//! `Event::Command`), checked before the master acts
//! (docs/design.md#issue-44, docs/security.md).
//!
//! Every command carries the principal of the request that sent it: the
//! root for the cluster secret's own tokens, a token's claims otherwise.
//! The master checks the capability the message needs
//! ([`Principal::check`]) and, for a message that names a framework, that
//! the framework is inside the token's tenant and pattern
//! ([`Principal::require_framework`]). A refusal is a `RequestRefused`
//! whose reason starts with [`FORBIDDEN`] and names the capability missing
//! or the scope passed (the HTTP API answers it `403`). The wire
//! protocol's connections are checked on their own path.
//!
//! Tests: core/tests/authorize_query.rs.

use super::{Action, Master, Origin};
use crate::audit::{answers_request, Asked};
use crate::ids::FrameworkId;
use crate::protocol::Message;
use crate::time::Millis;
use crate::token::{Denied, Principal};

/// How a refusal for want of a capability or scope starts (the HTTP API
/// answers it `403`).
pub const FORBIDDEN: &str = "forbidden: ";

pub use crate::visibility::DEFAULT_TENANT;

/// The most changes waiting for their answer the audit log remembers (the
/// oldest is forgotten past it: an answer that never comes).
pub const MAX_PENDING_AUDITS: usize = 4_096;

/// The request number of a client's command (echoed in its refusal); 0
/// for a message that carries none.
pub(super) fn request_of(msg: &Message) -> u64 {
    match msg {
        Message::SubmitJob { request, .. }
        | Message::DeleteJob { request, .. }
        | Message::JobsRequest { request, .. }
        | Message::PlanRequest { request, .. }
        | Message::ScaleGroup { request, .. }
        | Message::KillFramework { request, .. }
        | Message::RemoveWorker { request, .. }
        | Message::CordonWorker { request, .. }
        | Message::UncordonWorker { request, .. }
        | Message::DrainWorker { request, .. }
        | Message::OperatorKillExecutor { request, .. }
        | Message::StepDown { request }
        | Message::RevokeToken { request, .. }
        | Message::RetireKeys { request, .. }
        | Message::PromoteDeployment { request, .. }
        | Message::ReportHealth { request, .. } => *request,
        _ => 0,
    }
}

/// The framework a client's command acts on or reads, if it names one.
pub fn framework_of(msg: &Message) -> Option<&FrameworkId> {
    match msg {
        Message::SubmitJob { job, .. } => Some(&job.job),
        Message::DeleteJob { job, .. } | Message::PromoteDeployment { job, .. } => Some(job),
        Message::JobsRequest { job, .. } => job.as_ref(),
        Message::ScaleGroup { framework, .. } | Message::KillFramework { framework, .. } => {
            Some(framework)
        }
        _ => None,
    }
}

impl Master {
    /// `Ok` when `principal` may send `msg` as a local command: it has the
    /// capability the message needs and, when the message names a
    /// framework, the framework is in its scope (a framework not known yet
    /// is its creator's tenant's).
    pub(super) fn authorize_query(
        &self,
        principal: &Principal,
        msg: &Message,
    ) -> Result<(), Denied> {
        principal.check(msg)?;
        let Some(fid) = framework_of(msg) else { return Ok(()) };
        let tenant = if self.frameworks.contains_key(fid) {
            self.framework_tenant(fid)
        } else {
            principal.tenant().unwrap_or(DEFAULT_TENANT)
        };
        principal.require_framework(fid.as_str(), tenant)
    }
}

/// Changes asked and not answered yet, for the audit log: what was asked,
/// by asker and request number, looked up directly when the answer is
/// made (at most [`MAX_PENDING_AUDITS`]; the oldest is forgotten past it).
/// A local asker has one answer: its request number is not part of the
/// key.
#[derive(Debug, Default)]
pub(super) struct PendingAudits {
    asked: std::collections::HashMap<(Origin, u64), (u64, Asked)>,
    /// The keys by the order they were asked in (for forgetting the oldest).
    order: std::collections::BTreeMap<u64, (Origin, u64)>,
    next: u64,
}

impl PendingAudits {
    fn key(asker: Origin, request: u64) -> (Origin, u64) {
        match asker {
            Origin::Conn(_) => (asker, request),
            Origin::Query(_) => (asker, 0),
        }
    }

    fn insert(&mut self, asker: Origin, request: u64, asked: Asked) {
        let key = Self::key(asker, request);
        if let Some((seq, _)) = self.asked.remove(&key) {
            self.order.remove(&seq);
        }
        if self.asked.len() >= MAX_PENDING_AUDITS {
            if let Some((_, oldest)) = self.order.pop_first() {
                self.asked.remove(&oldest);
            }
        }
        let seq = self.next;
        self.next += 1;
        self.order.insert(seq, key);
        self.asked.insert(key, (seq, asked));
    }

    fn take(&mut self, asker: Origin, request: u64) -> Option<Asked> {
        let (seq, asked) = self.asked.remove(&Self::key(asker, request))?;
        self.order.remove(&seq);
        Some(asked)
    }

    /// How many changes wait for their answer.
    pub(super) fn len(&self) -> usize {
        self.asked.len()
    }
}

impl Master {
    /// Remembers that `principal` asked the change `msg` (if it is one) of
    /// `asker`, for the audit record of its answer.
    pub(super) fn audit_asked(&mut self, asker: Origin, principal: &Principal, msg: &Message) {
        let asked = Asked::of(principal, msg);
        self.audit_pending(asker, request_of(msg), asked);
    }

    /// Remembers `asked` (when a change) for the answer to `request` of
    /// `asker`.
    pub(super) fn audit_pending(&mut self, asker: Origin, request: u64, asked: Option<Asked>) {
        if let Some(asked) = asked {
            self.audits.insert(asker, request, asked);
        }
    }

    /// The audit record of `reply`, the answer to `to` made now, when it
    /// answers a change asked ([`Master::audit_asked`]): what waits for
    /// its answer after a durable write.
    pub(super) fn audit_answer(
        &mut self,
        now: Millis,
        to: Origin,
        reply: &Message,
    ) -> Option<Action> {
        let request = answers_request(reply)?;
        let asked = self.audits.take(to, request)?;
        asked.answered(self.wall(now), reply).map(Action::Audit)
    }

    /// The audit record of the answer to `asker`'s change `request`, when
    /// the master answered it at once: among what handling it added to
    /// `out` (from `from` on), appended to `out`.
    pub(super) fn audit_answered_now(
        &mut self,
        now: Millis,
        asker: Origin,
        request: u64,
        from: usize,
        out: &mut Vec<Action>,
    ) {
        if self.audits.len() == 0 {
            return;
        }
        let from = from.min(out.len());
        let answers = |a: &Action| match (a, asker) {
            (Action::Send { conn, msg }, Origin::Conn(c)) if *conn == c => {
                answers_request(msg) == Some(request)
            }
            (Action::Answer { query, msg }, Origin::Query(q)) if *query == q => {
                answers_request(msg).is_some()
            }
            _ => false,
        };
        let Some(i) = out[from..].iter().position(answers) else { return };
        let (Action::Send { msg, .. } | Action::Answer { msg, .. }) = &out[from + i] else {
            return;
        };
        if let Some(record) = self.audit_answer(now, asker, msg) {
            out.push(record);
        }
    }
}

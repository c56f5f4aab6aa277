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
        | Message::RetireKeys { request, .. } => *request,
        _ => 0,
    }
}

/// The framework a client's command acts on or reads, if it names one.
pub fn framework_of(msg: &Message) -> Option<&FrameworkId> {
    match msg {
        Message::SubmitJob { job, .. } => Some(&job.job),
        Message::DeleteJob { job, .. } => Some(job),
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
            if self.audits.len() >= MAX_PENDING_AUDITS {
                self.audits.remove(0);
            }
            self.audits.push((asker, request, asked));
        }
    }

    /// An audit record for every answer among `out` to a change asked
    /// ([`Master::audit_asked`]), appended to `out`.
    pub(super) fn audit_answers(&mut self, now: Millis, out: &mut Vec<Action>) {
        if self.audits.is_empty() {
            return;
        }
        let mut records = Vec::new();
        for a in out.iter() {
            let (origin, msg) = match a {
                Action::Send { conn, msg } => (Origin::Conn(*conn), msg),
                Action::Answer { query, msg } => (Origin::Query(*query), msg),
                _ => continue,
            };
            let Some(request) = answers_request(msg) else { continue };
            // A local query has one answer; a connection's is by request.
            let i = self.audits.iter().position(|(o, r, _)| {
                *o == origin && (matches!(origin, Origin::Query(_)) || *r == request)
            });
            if let Some(i) = i {
                let (_, _, asked) = self.audits.remove(i);
                records.extend(asked.answered(self.wall(now), msg).map(Action::Audit));
            }
        }
        out.extend(records);
    }
}

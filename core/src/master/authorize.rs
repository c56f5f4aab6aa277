//! The master's authorization of what a token's holder sends
//! (docs/security.md, docs/design.md#issue-44).
//!
//! A connection whose peer proved the cluster secret (or any connection of
//! a cluster without one) acts as the root and is never checked here. A
//! connection whose peer proved a token ([`super::Event::Authenticated`])
//! has every message checked before it is handled:
//!
//! 1. the token itself: expired (by the leader's wall clock, once it knows
//!    one: a token is checked against it from the first message after it
//!    is known), revoked, or signed with a retired key id — the message is
//!    refused and the connection closed, naming why;
//! 2. the capability the message needs ([`Principal::check`]). `Hello` is
//!    every token's, even a refused one's (it only learns who leads, and
//!    the message after it hears why the token is refused);
//! 3. the scope: a worker registration against the token's worker-id
//!    prefix ([`Principal::require_worker`]); a SUBSCRIBE, a job submission
//!    or deletion, a framework kill, a scale and an output request against
//!    the framework's tenant and the token's framework pattern
//!    ([`Principal::require_framework`]). A subscribed framework's own
//!    messages (declare, update, kill an executor, teardown) act on the
//!    framework its SUBSCRIBE was authorized for.
//!
//! A refused message changes nothing (a change is audited as refused, with
//! the reason) and is answered the way its kind is
//! refused anyway, with the [`Denied`] text: `RegisterRefused` for a
//! registration and for what a worker sends (the worker logs it and
//! retries slowly; its connection stays open, or it would reconnect at once
//! over and over), `SubscribeRefused` (and the connection closed) for a
//! SUBSCRIBE, `RequestRefused` for a request (closed too when the token
//! itself is refused); any other message with no refusal of its own (a
//! state request) closes the connection with the reason. A revocation
//! closes the revoked token's connections at once.
//!
//! Tests: core/tests/tokens.rs.

use super::{Action, AfterWrite, Event, Master, Origin};
use crate::ids::FrameworkId;
use crate::protocol::{Message, Subscribe};
use crate::store::{Record, StoreCommand};
use crate::token::{Claims, Denied, Principal, TokenError, TokenId};
use crate::ConnId;
use crate::Millis;

/// The most revoked tokens the list holds (each entry is kept until the
/// token expires): about 26 bytes each, far under a record's limit. Past
/// it, retiring the key id they were signed with revokes them all at once.
pub const MAX_REVOKED_TOKENS: usize = 10_000;

/// An operator's revocation.
pub(super) enum Revoke {
    /// One token, with the expiry it carries.
    Token { id: TokenId, expires_ms: Option<u64> },
    /// Every key id at or below `through`.
    Keys { through: u32 },
}

/// Why a message of a token's holder is refused.
struct Refusal {
    reason: String,
    /// The token itself is refused: the connection closes.
    close: bool,
}

impl Master {
    /// Whether `msg` from `conn` may be handled: `true` for the root and for
    /// what a token grants; otherwise the refusal is in `out` (and the
    /// connection closed if the token itself is refused) and nothing else
    /// happens.
    pub(super) fn authorize(
        &mut self,
        now: Millis,
        conn: ConnId,
        msg: &Message,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some(refusal) = self.judge(now, conn, msg) else { return true };
        // A change refused is audited with the reason, as over HTTP.
        let asked = crate::audit::Asked::of(self.principal(conn), msg);
        let refused = Message::RequestRefused {
            epoch: self.epoch,
            request: super::authorize_query::request_of(msg),
            reason: refusal.reason.clone(),
        };
        self.refuse_denied(now, conn, msg, refusal, out);
        out.extend(asked.and_then(|a| a.answered(self.wall(now), &refused)).map(Action::Audit));
        false
    }

    /// Whether `conn`'s peer may send `msg` now (for a message the node
    /// handles before the master, such as `StepDown`: when not, the node
    /// hands it to the master, whose [`Master::authorize`] refuses it).
    pub(crate) fn permits(&self, now: Millis, conn: ConnId, msg: &Message) -> bool {
        self.judge(now, conn, msg).is_none()
    }

    /// The tenant a framework created by `conn`'s peer belongs to: its
    /// token's tenant when the token has one (a token of tenant A only
    /// creates frameworks of tenant A); `None`: whatever the submission
    /// names, else `default`.
    #[allow(dead_code)] // read by the framework tenant (the tenants work), docs/design.md#issue-44
    pub(super) fn creator_tenant(&self, conn: ConnId) -> Option<&str> {
        self.principal(conn).tenant()
    }

    /// Why a token is refused at wall-clock `now`, if it is.
    pub(super) fn token_refusal(&self, now: Millis, claims: &Claims) -> Option<TokenError> {
        let wall = crate::time::wall_ms(self.wall_base, now);
        if let (Some(expires_ms), Some(wall)) = (claims.expires_ms, wall) {
            if wall >= expires_ms {
                return Some(TokenError::Expired { name: claims.name.clone(), expires_ms });
            }
        }
        self.revocations.check(claims).err()
    }

    fn judge(&self, now: Millis, conn: ConnId, msg: &Message) -> Option<Refusal> {
        let principal = self.principal(conn);
        let Principal::Token(claims) = principal else { return None };
        // A Hello only learns who leads; what follows it is refused with
        // the reason its kind carries.
        if matches!(msg, Message::Hello(_)) {
            return None;
        }
        if let Some(e) = self.token_refusal(now, claims) {
            return Some(Refusal { reason: e.to_string(), close: true });
        }
        let denied = principal.check(msg).and_then(|()| self.scope(principal, msg));
        denied.err().map(|d| Refusal { reason: d.to_string(), close: false })
    }

    /// The framework or worker `msg` names, checked against the token's
    /// scope.
    fn scope(&self, p: &Principal, msg: &Message) -> Result<(), Denied> {
        match msg {
            Message::RegisterWorker(reg) => p.require_worker(&reg.worker.0),
            Message::Subscribe(sub) => self.require_framework(p, &subscribe_id(sub)),
            Message::SubmitJob { job, .. } => self.require_framework(p, &job.job),
            Message::KillFramework { framework, .. }
            | Message::ScaleGroup { framework, .. }
            | Message::DeleteJob { job: framework, .. }
            | Message::PromoteDeployment { job: framework, .. } => {
                self.require_framework(p, framework)
            }
            Message::JobsRequest { job: Some(job), .. } => self.require_framework(p, job),
            Message::LogRequest { executor, .. } | Message::ReportHealth { executor, .. } => {
                match self.executors.get(executor) {
                    Some(e) => self.require_framework(p, &e.framework),
                    // Refused anyway, naming no framework.
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// `p` may act on `fid`: an existing framework by its tenant, a new one
    /// by the tenant it would get.
    fn require_framework(&self, p: &Principal, fid: &FrameworkId) -> Result<(), Denied> {
        let tenant = match self.frameworks.contains_key(fid) {
            true => self.framework_tenant(fid),
            false => p.tenant().unwrap_or("default"),
        };
        p.require_framework(&fid.0, tenant)
    }

    fn refuse_denied(
        &mut self,
        now: Millis,
        conn: ConnId,
        msg: &Message,
        refusal: Refusal,
        out: &mut Vec<Action>,
    ) {
        self.metrics.rejected += 1;
        let Refusal { reason, mut close } = refusal;
        let epoch = self.epoch;
        let reply = match msg {
            // A worker hears why in its log and retries slowly on the same
            // connection: closing it would have it reconnect at once, over
            // and over.
            Message::RegisterWorker(_)
            | Message::Callback { .. }
            | Message::WorkerHeartbeat { .. }
            | Message::ExecutorStatus { .. }
            | Message::WorkerUsage { .. }
            | Message::LogData { .. } => {
                close = false;
                Some(Message::RegisterRefused { epoch, reason: reason.clone() })
            }
            Message::Subscribe(_) => {
                // The subscriber stops on it: the connection has no use.
                close = true;
                Some(Message::SubscribeRefused { epoch, reason: reason.clone() })
            }
            m => request_of(m).map(|request| Message::RequestRefused {
                epoch,
                request,
                reason: reason.clone(),
            }),
        };
        match reply {
            Some(reply) => out.push(Action::Send { conn, msg: reply }),
            None => close = true,
        }
        if close {
            self.close_refused(now, conn, format!("refused: {reason}"), out);
        }
    }

    /// An operator's revocation from `asker`: in force at once (the open
    /// connections of what it refuses are closed now), accepted once the
    /// list is durable. Entries of tokens past their expiry are dropped on
    /// the way.
    pub(super) fn revoke(
        &mut self,
        now: Millis,
        asker: Origin,
        request: u64,
        what: Revoke,
        out: &mut Vec<Action>,
    ) {
        let mut next = self.revocations.clone();
        if let Some(wall) = crate::time::wall_ms(self.wall_base, now) {
            next.tokens.retain(|_, expires| expires.is_none_or(|e| e > wall));
        }
        match what {
            Revoke::Token { id, expires_ms } => {
                if !next.tokens.contains_key(&id) && next.tokens.len() >= MAX_REVOKED_TOKENS {
                    let reason = format!(
                        "the revocation list holds {MAX_REVOKED_TOKENS} tokens (the limit): \
                         retire the key id they were signed with instead (regent token revoke \
                         --retire-keys N)"
                    );
                    out.push(self.refuse_request(asker, request, reason));
                    return;
                }
                next.tokens.insert(id, expires_ms);
            }
            Revoke::Keys { through } => next.retired_through = next.retired_through.max(through),
        }
        self.revocations = next.clone();
        let write = self.next_write();
        out.push(Action::Store(StoreCommand::Persist { write, record: Record::Revocations(next) }));
        self.after_write
            .entry(write)
            .or_default()
            .push(AfterWrite::AcceptTo { to: asker, request });
        let refused: Vec<(ConnId, String)> = self
            .conns
            .iter()
            .filter_map(|(conn, c)| match &c.principal {
                Principal::Token(claims) => {
                    self.revocations.check(claims).err().map(|e| (*conn, e.to_string()))
                }
                Principal::Root => None,
            })
            .collect();
        for (conn, reason) in refused {
            self.close_refused(now, conn, format!("refused: {reason}"), out);
        }
    }

    /// The revocations in force (the HTTP side refuses by them too).
    pub fn revocations(&self) -> &crate::token::Revocations {
        &self.revocations
    }

    /// Closes `conn` (a refused token's), unbinding what it carried as if
    /// its peer had gone.
    pub(super) fn close_refused(
        &mut self,
        now: Millis,
        conn: ConnId,
        reason: String,
        out: &mut Vec<Action>,
    ) {
        out.push(Action::Close { conn, reason });
        self.dispatch(now, Event::Disconnected { conn }, out);
    }
}

/// The id a SUBSCRIBE acts on: the one it names, else the one its first
/// SUBSCRIBE gets (derived from the instance, as `subscribe` does).
pub(super) fn subscribe_id(sub: &Subscribe) -> FrameworkId {
    match &sub.framework {
        Some(id) => id.clone(),
        None => FrameworkId(format!("fw-{:016x}", sub.instance.0)),
    }
}

/// The request id of a message that carries one (its refusal is a
/// `RequestRefused`).
fn request_of(msg: &Message) -> Option<u64> {
    match msg {
        Message::DeclareGroup { request, .. }
        | Message::UpdateGroup { request, .. }
        | Message::KillExecutor { request, .. }
        | Message::Teardown { request }
        | Message::RemoveWorker { request, .. }
        | Message::KillFramework { request, .. }
        | Message::StepDown { request }
        | Message::LogRequest { request, .. }
        | Message::CordonWorker { request, .. }
        | Message::UncordonWorker { request, .. }
        | Message::DrainWorker { request, .. }
        | Message::ScaleGroup { request, .. }
        | Message::OperatorKillExecutor { request, .. }
        | Message::PlanRequest { request, .. }
        | Message::SubmitJob { request, .. }
        | Message::DeleteJob { request, .. }
        | Message::JobsRequest { request, .. }
        | Message::RevokeToken { request, .. }
        | Message::RetireKeys { request, .. }
        | Message::PromoteDeployment { request, .. }
        | Message::ReportHealth { request, .. } => Some(*request),
        _ => None,
    }
}

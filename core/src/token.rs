//! Scoped credentials: tokens signed with the cluster secret
//! (docs/security.md), verified by every master without a lookup.
//!
//! The cluster secret stays the root credential. A token is a set of
//! [`Claims`] — capabilities, a tenant, a framework-id pattern, a worker-id
//! prefix, an expiry, a key id for rotation — and a MAC over them under a
//! key derived from the secret and the key id. Whoever holds the secret can
//! issue one (`regent token create`), and every master checks one with the
//! secret alone; a durable [`Revocations`] list (the leader's) refuses a
//! revoked token or every token of a retired key id.
//!
//! # Text form (version 1)
//!
//! `rgt1.<claims>.<mac>`: `claims` is the base64url (no padding) of the
//! claims' postcard encoding, `mac` the base64url of
//! HMAC-SHA256(key, [`MAC_LABEL`] ‖ claims bytes), where key =
//! HMAC-SHA256(secret, [`KEY_LABEL`] ‖ key id as 4 big-endian bytes). The
//! MAC is also the token's *proof key* ([`Token::proof_key`]): a token
//! holder on the wire protocol proves it without sending it, in the same
//! challenge–response the cluster secret uses ([`crate::auth`]), and a
//! master recomputes it from the claims.
//!
//! # Who may do what
//!
//! [`Principal`] is who a connection or an HTTP request acts as: the root
//! (the cluster secret, or a cluster without one) may do everything; a token
//! what its capabilities grant ([`Capability`], [`Principal::check`]). A
//! refusal ([`Denied`]) names the capability missing or the scope passed.
//!
//! Tests: the unit tests below (tampering, expiry, revocation, key
//! retirement, each capability's messages).

use crate::protocol::Message;
use crate::secret::Secret;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::collections::BTreeSet;
use std::fmt;

type HmacSha256 = Hmac<Sha256>;

/// The prefix of a token's text form (the format's version).
pub const PREFIX: &str = "rgt1";
/// The label of the per-key-id signing key's derivation.
pub const KEY_LABEL: &[u8] = b"regent token key v1";
/// The label a token's MAC starts with.
pub const MAC_LABEL: &[u8] = b"regent token v1";
/// The longest token text accepted (bounds what a peer can make us decode).
pub const MAX_TOKEN_LEN: usize = 2048;
/// The longest name, tenant, pattern or prefix a token may carry.
pub const MAX_CLAIM_TEXT: usize = 128;

/// One thing a token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Capability {
    /// Subscribe frameworks, submit, update and delete jobs, kill its
    /// frameworks, within the token's tenant and framework pattern.
    Submit,
    /// Read: state, jobs, plans, events, metrics (of its tenant's
    /// frameworks when the token has a tenant).
    Read,
    /// Scale groups of its frameworks (named removals included).
    Scale,
    /// Read executors' output (of its frameworks).
    Logs,
    /// Operator commands: cordon, uncordon, drain, remove a worker, kill
    /// any executor, step the leader down, set tenants, revoke tokens.
    Operator,
    /// Register workers (with ids starting with the token's prefix, if
    /// it has one) and speak for them.
    Worker,
}

impl Capability {
    /// Every capability, in the order of [`Capability::name`]'s list.
    pub const ALL: [Capability; 6] = [
        Capability::Submit,
        Capability::Read,
        Capability::Scale,
        Capability::Logs,
        Capability::Operator,
        Capability::Worker,
    ];

    /// The lowercase name (`submit`, `read`, `scale`, `logs`, `operator`,
    /// `worker`), as the CLI and the docs write it.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Submit => "submit",
            Capability::Read => "read",
            Capability::Scale => "scale",
            Capability::Logs => "logs",
            Capability::Operator => "operator",
            Capability::Worker => "worker",
        }
    }

    /// The capability named `name` (as [`Capability::name`] writes it).
    pub fn parse(name: &str) -> Result<Capability, TokenError> {
        Capability::ALL
            .into_iter()
            .find(|c| c.name() == name.trim())
            .ok_or_else(|| TokenError::UnknownCapability(name.to_owned()))
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A token's random id (defined with the other ids, so the protocol can
/// name one without a circle between the modules).
pub use crate::ids::TokenId;

impl TokenId {
    /// Parses the 32 lowercase hex digits [`TokenId`]'s `Display` writes.
    pub fn parse(text: &str) -> Result<TokenId, TokenError> {
        let text = text.trim();
        let bad = || TokenError::Malformed(format!("token id {text:?} is not 32 hex digits"));
        if text.len() != 32 || !text.is_ascii() {
            return Err(bad());
        }
        let mut id = [0u8; 16];
        for (i, b) in id.iter_mut().enumerate() {
            *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(TokenId(id))
    }

    /// What a revocation of `text` names: a token id (32 hex digits; its
    /// expiry unknown) or a token (`rgt1.…`, whose claims carry both;
    /// its MAC is not checked: revoking needs no proof of the token).
    /// `regent token revoke` and `POST /v1/tokens/revoke` read it alike.
    pub fn revoked_by(text: &str) -> Result<(TokenId, Option<u64>), TokenError> {
        if text.trim().starts_with(PREFIX) {
            let (claims, _, _) = Token::unverified_claims(text)?;
            return Ok((claims.id, claims.expires_ms));
        }
        TokenId::parse(text).map(|id| (id, None))
    }
}

/// What a token says about its holder. Times are wall-clock milliseconds
/// since the Unix epoch (the caller's clock is an input).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The token's id (random, drawn by the issuer).
    pub id: TokenId,
    /// The name it was issued under (shown in the audit log).
    pub name: String,
    /// Which signing key signed it ([`KEY_LABEL`]); retiring a key id
    /// refuses every token signed with it or an older one.
    pub key_id: u32,
    /// What it may do.
    pub capabilities: BTreeSet<Capability>,
    /// The tenant its frameworks belong to; `None`: any tenant (and a
    /// framework it creates belongs to `default` unless the job names one).
    pub tenant: Option<String>,
    /// The frameworks it may act on: an exact id, or a prefix ending in
    /// `*`; `None`: every framework (of its tenant).
    pub frameworks: Option<String>,
    /// The worker ids a `worker` token may register: ids starting with it;
    /// `None`: any id.
    pub workers: Option<String>,
    /// When it was issued.
    pub issued_ms: u64,
    /// When it stops being accepted; `None`: never.
    pub expires_ms: Option<u64>,
}

impl Claims {
    /// Whether the token grants `cap`.
    pub fn has(&self, cap: Capability) -> bool {
        self.capabilities.contains(&cap)
    }

    /// Whether the token may act on framework `framework` of tenant
    /// `tenant`: its pattern matches the id and, when it has a tenant, the
    /// framework is that tenant's.
    pub fn covers_framework(&self, framework: &str, tenant: &str) -> bool {
        let tenant_ok = self.tenant.as_deref().is_none_or(|t| t == tenant);
        tenant_ok && self.frameworks.as_deref().is_none_or(|p| pattern_matches(p, framework))
    }

    /// Whether a `worker` token may speak for worker `worker`.
    pub fn covers_worker(&self, worker: &str) -> bool {
        self.workers.as_deref().is_none_or(|prefix| worker.starts_with(prefix))
    }

    fn check_lengths(&self) -> Result<(), TokenError> {
        let texts = [
            Some(self.name.as_str()),
            self.tenant.as_deref(),
            self.frameworks.as_deref(),
            self.workers.as_deref(),
        ];
        if texts.into_iter().flatten().any(|t| t.len() > MAX_CLAIM_TEXT) {
            return Err(TokenError::Malformed(format!(
                "a name, tenant, pattern or prefix is longer than {MAX_CLAIM_TEXT} bytes"
            )));
        }
        Ok(())
    }
}

/// Whether framework id `id` matches `pattern`: equal, or starting with
/// the pattern's text before a final `*` (`*` alone matches every id).
pub fn pattern_matches(pattern: &str, id: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => id.starts_with(prefix),
        None => pattern == id,
    }
}

/// A verified token: its claims and its proof key.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// What it says.
    pub claims: Claims,
    mac: [u8; 32],
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token").field("claims", &self.claims).finish_non_exhaustive()
    }
}

/// The signing key of `key_id`.
fn signing_key(secret: &Secret, key_id: u32) -> [u8; 32] {
    let mut mac = <HmacSha256 as Mac>::new_from_slice(secret.expose()).expect("any key length");
    mac.update(KEY_LABEL);
    mac.update(&key_id.to_be_bytes());
    mac.finalize().into_bytes().into()
}

fn token_mac(secret: &Secret, key_id: u32, claims: &[u8]) -> [u8; 32] {
    let key = signing_key(secret, key_id);
    let mut mac = <HmacSha256 as Mac>::new_from_slice(&key).expect("any key length");
    mac.update(MAC_LABEL);
    mac.update(claims);
    mac.finalize().into_bytes().into()
}

impl Token {
    /// Signs `claims` with `secret`: the token's text form.
    pub fn issue(secret: &Secret, claims: &Claims) -> Result<String, TokenError> {
        claims.check_lengths()?;
        let bytes = postcard::to_allocvec(claims).expect("claims always encode");
        let mac = token_mac(secret, claims.key_id, &bytes);
        Ok(format!("{PREFIX}.{}.{}", URL_SAFE_NO_PAD.encode(&bytes), URL_SAFE_NO_PAD.encode(mac)))
    }

    /// The claims of `text` *without* checking its MAC: what a token holder
    /// (who has no secret) sends ahead of its proof, and what a master then
    /// verifies with [`Token::from_claims`].
    pub fn unverified_claims(text: &str) -> Result<(Claims, Vec<u8>, [u8; 32]), TokenError> {
        let text = text.trim();
        if text.len() > MAX_TOKEN_LEN {
            return Err(TokenError::Malformed(format!(
                "a token is at most {MAX_TOKEN_LEN} bytes, this one has {}",
                text.len()
            )));
        }
        let mut parts = text.split('.');
        let (Some(prefix), Some(claims), Some(mac), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed(format!(
                "a token has three parts `{PREFIX}.<claims>.<mac>` separated by dots"
            )));
        };
        if prefix != PREFIX {
            return Err(TokenError::Malformed(format!(
                "a token starts with `{PREFIX}.` (this is not a regent token, or one of \
                 another version)"
            )));
        }
        let claims_bytes = URL_SAFE_NO_PAD
            .decode(claims)
            .map_err(|e| TokenError::Malformed(format!("its claims are not base64url: {e}")))?;
        let mac: [u8; 32] = URL_SAFE_NO_PAD
            .decode(mac)
            .map_err(|e| TokenError::Malformed(format!("its MAC is not base64url: {e}")))?
            .try_into()
            .map_err(|_| TokenError::Malformed("its MAC is not 32 bytes".into()))?;
        let claims = Claims::decode(&claims_bytes)?;
        Ok((claims, claims_bytes, mac))
    }

    /// Verifies `text` with `secret` at wall-clock `now_ms` against
    /// `revoked`: the token, or why it is refused.
    pub fn verify(
        secret: &Secret,
        text: &str,
        now_ms: u64,
        revoked: &Revocations,
    ) -> Result<Token, TokenError> {
        let (claims, bytes, mac) = Token::unverified_claims(text)?;
        let expected = token_mac(secret, claims.key_id, &bytes);
        if !constant_time_eq(&expected, &mac) {
            return Err(TokenError::BadSignature);
        }
        let token = Token { claims, mac };
        token.check_valid(now_ms, revoked)?;
        Ok(token)
    }

    /// The token whose claims' encoding is `bytes`, signed anew with
    /// `secret` (what a master does with the claims a wire peer sent: the
    /// peer then proves it holds [`Token::proof_key`]).
    pub fn from_claims(secret: &Secret, bytes: &[u8]) -> Result<Token, TokenError> {
        let claims = Claims::decode(bytes)?;
        let mac = token_mac(secret, claims.key_id, bytes);
        Ok(Token { claims, mac })
    }

    /// Whether it is accepted at wall-clock `now_ms` against `revoked`.
    pub fn check_valid(&self, now_ms: u64, revoked: &Revocations) -> Result<(), TokenError> {
        if let Some(expires) = self.claims.expires_ms.filter(|e| now_ms >= *e) {
            return Err(TokenError::Expired {
                name: self.claims.name.clone(),
                expires_ms: expires,
            });
        }
        revoked.check(&self.claims)
    }

    /// The key a wire peer proves it holds in the handshake: the token's
    /// MAC, which only the secret's holder can compute from the claims.
    pub fn proof_key(&self) -> Secret {
        Secret::new(self.mac.to_vec()).expect("32 bytes is long enough")
    }
}

impl Claims {
    fn decode(bytes: &[u8]) -> Result<Claims, TokenError> {
        let claims: Claims = postcard::from_bytes(bytes)
            .map_err(|e| TokenError::Malformed(format!("its claims do not decode: {e}")))?;
        claims.check_lengths()?;
        Ok(claims)
    }
}

/// The revoked tokens and the retired key ids: durable, the leader's
/// (`regent token revoke`). Small by construction: an entry is kept until
/// the token it names expires (a caller may prune expired ones).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revocations {
    /// Revoked tokens, by id, with the expiry they carried (`None`: never).
    pub tokens: std::collections::BTreeMap<TokenId, Option<u64>>,
    /// Every token signed with a key id at or below this is refused (0:
    /// none retired).
    pub retired_through: u32,
}

impl Revocations {
    /// Why `claims` are refused, if they are.
    pub fn check(&self, claims: &Claims) -> Result<(), TokenError> {
        if self.tokens.contains_key(&claims.id) {
            return Err(TokenError::Revoked { name: claims.name.clone(), id: claims.id });
        }
        if claims.key_id <= self.retired_through {
            return Err(TokenError::KeyRetired { key_id: claims.key_id });
        }
        Ok(())
    }

    /// Whether a master in `status` holds the list in force: a leader
    /// (recovering, acting or suspended) loaded it from the store when it
    /// was elected and keeps it current; a standby does not hold it, so
    /// its HTTP face refuses scoped tokens (docs/security.md).
    pub fn held_by(status: crate::states::MasterStatus) -> bool {
        !matches!(status, crate::states::MasterStatus::Standby)
    }
}

/// Who a connection or a request acts as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// The cluster secret's holder (or anyone, on a cluster without a
    /// secret): everything.
    Root,
    /// A token's holder: what its claims grant.
    Token(Claims),
}

/// Why a principal may not do something: the capability missing or the
/// scope passed, in words a user can act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// The token lacks a capability.
    #[error("token {name:?} lacks the `{missing}` capability needed to {action}")]
    Missing {
        /// The token's name.
        name: String,
        /// The capability it would need.
        missing: Capability,
        /// What was asked, in words.
        action: &'static str,
    },
    /// The framework is outside the token's tenant or pattern.
    #[error(
        "token {name:?} may not act on framework {framework} of tenant {tenant:?} (it is \
         scoped to {scope})"
    )]
    Framework {
        /// The token's name.
        name: String,
        /// The framework.
        framework: String,
        /// Its tenant.
        tenant: String,
        /// The token's scope, in words.
        scope: String,
    },
    /// The worker id is outside the token's prefix.
    #[error(
        "token {name:?} may only register workers whose id starts with {prefix:?}, not {worker:?}"
    )]
    Worker {
        /// The token's name.
        name: String,
        /// The worker id.
        worker: String,
        /// The prefix.
        prefix: String,
    },
    /// A message no client sends (a master's own message).
    #[error("a token's holder may not send {0}")]
    NotAClientMessage(&'static str),
}

impl Principal {
    /// The token's name, for the audit log (`root` for the root).
    pub fn name(&self) -> &str {
        match self {
            Principal::Root => "root",
            Principal::Token(c) => &c.name,
        }
    }

    /// The tenant it is bound to, if any.
    pub fn tenant(&self) -> Option<&str> {
        match self {
            Principal::Root => None,
            Principal::Token(c) => c.tenant.as_deref(),
        }
    }

    /// Whether it has `cap` (the root has every one).
    pub fn has(&self, cap: Capability) -> bool {
        match self {
            Principal::Root => true,
            Principal::Token(c) => c.has(cap),
        }
    }

    /// `Ok` when it has `cap`, else the refusal naming it and `action`.
    pub fn require(&self, cap: Capability, action: &'static str) -> Result<(), Denied> {
        match self {
            Principal::Token(c) if !c.has(cap) => {
                Err(Denied::Missing { name: c.name.clone(), missing: cap, action })
            }
            _ => Ok(()),
        }
    }

    /// `Ok` when it may act on `framework` of `tenant`.
    pub fn require_framework(&self, framework: &str, tenant: &str) -> Result<(), Denied> {
        match self {
            Principal::Token(c) if !c.covers_framework(framework, tenant) => {
                Err(Denied::Framework {
                    name: c.name.clone(),
                    framework: framework.to_owned(),
                    tenant: tenant.to_owned(),
                    scope: scope_words(c),
                })
            }
            _ => Ok(()),
        }
    }

    /// `Ok` when it may register or speak for worker `worker`.
    pub fn require_worker(&self, worker: &str) -> Result<(), Denied> {
        self.require(Capability::Worker, "register a worker")?;
        match self {
            Principal::Token(c) if !c.covers_worker(worker) => Err(Denied::Worker {
                name: c.name.clone(),
                worker: worker.to_owned(),
                prefix: c.workers.clone().unwrap_or_default(),
            }),
            _ => Ok(()),
        }
    }

    /// The capability `msg` needs from a client (the first check; the
    /// master then checks the framework or worker it names with
    /// [`Principal::require_framework`] / [`Principal::require_worker`]).
    pub fn check(&self, msg: &Message) -> Result<(), Denied> {
        // The greeting needs no capability: every peer sends it (a
        // `worker`-only token too), and what follows it is checked.
        if matches!(msg, Message::Hello(_)) {
            return Ok(());
        }
        let (cap, action) = match required(msg) {
            Ok(need) => need,
            Err(name) => {
                return match self {
                    Principal::Root => Ok(()),
                    Principal::Token(_) => Err(Denied::NotAClientMessage(name)),
                };
            }
        };
        self.require(cap, action)
    }
}

fn scope_words(c: &Claims) -> String {
    match (&c.tenant, &c.frameworks) {
        (Some(t), Some(p)) => format!("tenant {t:?}, frameworks {p:?}"),
        (Some(t), None) => format!("tenant {t:?}"),
        (None, Some(p)) => format!("frameworks {p:?}"),
        (None, None) => "every framework".to_owned(),
    }
}

/// The capability a client message needs and what it does, in words; or,
/// for a message only masters send, its name. `Hello` needs none
/// ([`Principal::check`] lets every principal send it).
pub fn required(msg: &Message) -> Result<(Capability, &'static str), &'static str> {
    use Capability::*;
    Ok(match msg {
        Message::RegisterWorker(_) => (Worker, "register a worker"),
        Message::WorkerHeartbeat { .. }
        | Message::ExecutorStatus { .. }
        | Message::LogData { .. }
        | Message::WorkerUsage { .. }
        | Message::Callback { .. } => (Worker, "speak for a worker"),
        Message::Subscribe(_) => (Submit, "subscribe a framework"),
        Message::DeclareGroup { .. }
        | Message::KillExecutor { .. }
        | Message::Teardown { .. }
        | Message::FrameworkHeartbeatAck { .. }
        | Message::UpdateGroup { .. } => (Submit, "act for a framework"),
        Message::SubmitJob { .. } => (Submit, "submit a job"),
        Message::DeleteJob { .. } => (Submit, "delete a job"),
        Message::KillFramework { .. } => (Submit, "kill a framework"),
        Message::ScaleGroup { .. } => (Scale, "scale a group"),
        Message::PromoteDeployment { .. } => (Submit, "promote a deployment"),
        Message::ReportHealth { .. } => (Submit, "report an executor's health"),
        Message::StateRequest => (Read, "read the cluster's state"),
        Message::PlanRequest { .. } => (Read, "read a plan"),
        Message::JobsRequest { .. } => (Read, "read jobs"),
        Message::LogRequest { .. } => (Logs, "read an executor's output"),
        Message::RemoveWorker { .. } => (Operator, "remove a worker"),
        Message::CordonWorker { .. } => (Operator, "cordon a worker"),
        Message::UncordonWorker { .. } => (Operator, "uncordon a worker"),
        Message::DrainWorker { .. } => (Operator, "drain a worker"),
        Message::OperatorKillExecutor { .. } => (Operator, "kill any executor"),
        Message::StepDown { .. } => (Operator, "step the leader down"),
        Message::RevokeToken { .. } => (Operator, "revoke a token"),
        Message::RetireKeys { .. } => (Operator, "retire signing keys"),
        Message::SetTenant { .. } => (Operator, "set a tenant"),
        Message::TenantsRequest { .. } => (Read, "read tenants"),
        other => return Err(other.kind()),
    })
}

/// Why a token is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a token of this format.
    #[error("malformed token: {0}")]
    Malformed(String),
    /// Its MAC does not match (another cluster's secret, or altered).
    #[error(
        "token signature does not verify (it was issued with another cluster secret, or altered)"
    )]
    BadSignature,
    /// Past its expiry.
    #[error("token {name:?} expired at {expires_ms} ms since the Unix epoch")]
    Expired {
        /// Its name.
        name: String,
        /// When it expired.
        expires_ms: u64,
    },
    /// On the revocation list.
    #[error("token {name:?} ({id}) was revoked")]
    Revoked {
        /// Its name.
        name: String,
        /// Its id.
        id: TokenId,
    },
    /// Signed with a retired key id.
    #[error("token signed with key id {key_id}, which was retired (issue a new token)")]
    KeyRetired {
        /// Its key id.
        key_id: u32,
    },
    /// A capability name the CLI does not know.
    #[error("unknown capability {0:?} (known: submit, read, scale, logs, operator, worker)")]
    UnknownCapability(String),
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::FrameworkId;

    fn secret() -> Secret {
        Secret::new(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap()
    }

    fn claims(caps: &[Capability]) -> Claims {
        Claims {
            id: TokenId([7; 16]),
            name: "ci".into(),
            key_id: 1,
            capabilities: caps.iter().copied().collect(),
            tenant: Some("a".into()),
            frameworks: Some("web-*".into()),
            workers: None,
            issued_ms: 1_000,
            expires_ms: Some(10_000),
        }
    }

    #[test]
    fn a_token_verifies_and_any_change_breaks_it() {
        let c = claims(&[Capability::Submit]);
        let text = Token::issue(&secret(), &c).unwrap();
        let none = Revocations::default();
        let t = Token::verify(&secret(), &text, 5_000, &none).unwrap();
        assert_eq!(t.claims, c);
        let other = Secret::new(b"another secret of enough bytes!!".to_vec()).unwrap();
        assert_eq!(Token::verify(&other, &text, 5_000, &none), Err(TokenError::BadSignature));
        // Claims of a wider token with this token's MAC.
        let mut wider = c.clone();
        wider.capabilities.insert(Capability::Operator);
        let wider_text = Token::issue(&secret(), &wider).unwrap();
        let forged = format!(
            "{}.{}",
            wider_text.rsplit_once('.').unwrap().0,
            text.rsplit_once('.').unwrap().1
        );
        assert_eq!(Token::verify(&secret(), &forged, 5_000, &none), Err(TokenError::BadSignature));
        assert!(matches!(
            Token::verify(&secret(), "rgt1.abc", 5_000, &none),
            Err(TokenError::Malformed(_))
        ));
        // The proof key a master derives from the claims is the holder's.
        let (_, bytes, _) = Token::unverified_claims(&text).unwrap();
        let derived = Token::from_claims(&secret(), &bytes).unwrap();
        assert_eq!(derived.proof_key(), t.proof_key());
    }

    #[test]
    fn expired_revoked_and_retired_tokens_are_refused_naming_why() {
        let c = claims(&[Capability::Read]);
        let text = Token::issue(&secret(), &c).unwrap();
        let none = Revocations::default();
        assert!(matches!(
            Token::verify(&secret(), &text, 10_000, &none),
            Err(TokenError::Expired { expires_ms: 10_000, .. })
        ));
        let mut revoked = Revocations::default();
        revoked.tokens.insert(c.id, c.expires_ms);
        let err = Token::verify(&secret(), &text, 5_000, &revoked).unwrap_err();
        assert!(err.to_string().contains("was revoked"), "{err}");
        let retired = Revocations { retired_through: 1, ..Default::default() };
        assert_eq!(
            Token::verify(&secret(), &text, 5_000, &retired),
            Err(TokenError::KeyRetired { key_id: 1 })
        );
    }

    #[test]
    fn each_message_needs_its_capability_and_scope() {
        let submit = Principal::Token(claims(&[Capability::Submit]));
        let kill = Message::KillFramework { request: 1, framework: FrameworkId("web-1".into()) };
        assert_eq!(submit.check(&kill), Ok(()));
        let err = submit.check(&Message::StepDown { request: 1 }).unwrap_err();
        assert!(err.to_string().contains("lacks the `operator` capability"), "{err}");
        assert!(submit.require_framework("web-1", "a").is_ok());
        let err = submit.require_framework("web-1", "b").unwrap_err();
        assert!(err.to_string().contains("tenant \"b\""), "{err}");
        assert!(submit.require_framework("db-1", "a").is_err());
        assert_eq!(Principal::Root.check(&Message::StepDown { request: 1 }), Ok(()));
        // Every token may greet, a worker-only one too.
        let hello = Message::Hello(crate::protocol::Hello {
            version: crate::protocol::PROTOCOL_VERSION,
            cluster: "c".into(),
            role: crate::protocol::Role::Worker,
            node: "w1".into(),
        });
        let worker_only = Principal::Token(claims(&[Capability::Worker]));
        assert_eq!(worker_only.check(&hello), Ok(()));
        let worker = Principal::Token(Claims {
            workers: Some("rack1-".into()),
            ..claims(&[Capability::Worker])
        });
        assert!(worker.require_worker("rack1-w3").is_ok());
        assert!(worker.require_worker("rack2-w3").is_err());
        assert!(submit.require_worker("rack1-w3").is_err());
    }

    #[test]
    fn patterns_match_exactly_or_by_prefix() {
        assert!(pattern_matches("*", "x"));
        assert!(pattern_matches("web-*", "web-1"));
        assert!(!pattern_matches("web-*", "db"));
        assert!(pattern_matches("web", "web"));
        assert!(!pattern_matches("web", "web-1"));
    }
}

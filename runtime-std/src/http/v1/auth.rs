//! Who may do what (docs/api.md#authentication, docs/security.md): with a
//! cluster secret, every request needs `Authorization: Bearer <token>`,
//! on loopback too (docs/design.md#issue-44). Three kinds of token are
//! accepted:
//!
//! * the full token derived from the secret ([`super::super::bearer_token`],
//!   `regent http-token`): the root, everything;
//! * the read-only token ([`read_only_token`], `regent http-token
//!   --read-only`): the root for reading (`read` and `logs`), nothing else;
//! * a scoped token (`rgt1.…`, `regent token create`), verified with the
//!   secret at the wall clock's time against the revocations
//!   ([`regent_core::token::Token::verify`]): what its claims grant.
//!
//! A request without a token, or with one refused, is `401` naming why and
//! how to get one; a request its token may not make is `403` naming the
//! capability missing ([`Access::require`]).

use hmac::{Hmac, Mac};
use regent_core::secret::Secret;
use regent_core::token::{Capability, Claims, Denied, Principal, Revocations, Token};

/// What the read-only token is derived from: HMAC-SHA256 of this under the
/// cluster secret.
pub const READ_ONLY_LABEL: &[u8] = b"regent http read-only v1";

/// The read-only bearer token: the lowercase hex of HMAC-SHA256(secret,
/// [`READ_ONLY_LABEL`]). `regent http-token --read-only` prints it.
pub fn read_only_token(secret: &Secret) -> String {
    hmac_hex(secret, READ_ONLY_LABEL)
}

/// The lowercase hex of HMAC-SHA256(secret, label).
pub(in crate::http) fn hmac_hex(secret: &Secret, label: &[u8]) -> String {
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.expose())
        .expect("HMAC takes a key of any length");
    mac.update(label);
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// The tokens a server requires (see [`super::super::required_token`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tokens {
    /// Full access: [`super::super::bearer_token`].
    pub full: String,
    /// Reads only: [`read_only_token`].
    pub read_only: String,
    /// The cluster secret, which verifies scoped tokens.
    pub secret: Secret,
}

impl Tokens {
    /// The tokens of `secret`.
    pub fn of(secret: &Secret) -> Tokens {
        Tokens {
            full: super::super::bearer_token(secret),
            read_only: read_only_token(secret),
            secret: secret.clone(),
        }
    }
}

/// What a request may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// Everything (the full token, or a server that requires none).
    Full,
    /// Reads only (the read-only token): `read` and `logs`, of everything.
    ReadOnly,
    /// What a scoped token's claims grant.
    Token(Claims),
}

impl Access {
    /// Who the request acts as, for the master: the root for the secret's
    /// tokens (the read-only one never reaches the master with a write),
    /// the claims for a scoped token.
    pub fn principal(&self) -> Principal {
        match self {
            Access::Full | Access::ReadOnly => Principal::Root,
            Access::Token(c) => Principal::Token(c.clone()),
        }
    }

    /// `Ok` when the request may `action`, which needs `cap`; else the
    /// refusal naming the capability (a `403`).
    pub fn require(&self, cap: Capability, action: &'static str) -> Result<(), Denied> {
        match self {
            Access::Full => Ok(()),
            Access::ReadOnly if matches!(cap, Capability::Read | Capability::Logs) => Ok(()),
            Access::ReadOnly => Err(Denied::Missing {
                name: "the read-only bearer token (regent http-token --read-only)".into(),
                missing: cap,
                action,
            }),
            Access::Token(c) => Principal::Token(c.clone()).require(cap, action),
        }
    }
}

/// How a client gets a token, for a `401`'s message.
pub const HOW_TO_GET_A_TOKEN: &str = "`regent token create --capability read --name NAME \
     --secret-file F` issues a scoped token; `regent http-token --secret-file F` prints the \
     cluster's full token";

/// Why a request's token grants nothing (a `401`'s message).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unauthorized {
    /// No `Authorization` header.
    #[error(
        "unauthorized: this cluster has a secret, so every HTTP request needs \
         `Authorization: Bearer <token>`: {HOW_TO_GET_A_TOKEN}"
    )]
    Missing,
    /// Another scheme than `Bearer`.
    #[error("unauthorized: the Authorization header must be `Bearer <token>`")]
    Scheme,
    /// A scoped token that does not verify, expired, or was revoked.
    #[error("unauthorized: {0}; {HOW_TO_GET_A_TOKEN}")]
    Token(#[from] regent_core::token::TokenError),
    /// Neither the cluster's tokens nor a scoped one.
    #[error(
        "unauthorized: wrong bearer token (not the cluster's, nor a token issued with its \
         secret): {HOW_TO_GET_A_TOKEN}"
    )]
    Wrong,
}

/// What the `Authorization` header `given` grants under `tokens` (`None`:
/// an open server) at wall-clock `now_ms` against `revoked`, or why it
/// grants nothing (a `401`).
pub fn access(
    given: Option<&str>,
    tokens: Option<&Tokens>,
    now_ms: u64,
    revoked: &Revocations,
) -> Result<Access, Unauthorized> {
    let Some(tokens) = tokens else { return Ok(Access::Full) };
    let Some(given) = given.map(str::trim) else { return Err(Unauthorized::Missing) };
    let presented = match given.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        _ => return Err(Unauthorized::Scheme),
    };
    if presented.starts_with(regent_core::token::PREFIX) {
        let token = Token::verify(&tokens.secret, presented, now_ms, revoked)?;
        return Ok(Access::Token(token.claims));
    }
    if constant_time_eq(presented.as_bytes(), tokens.full.as_bytes()) {
        Ok(Access::Full)
    } else if constant_time_eq(presented.as_bytes(), tokens.read_only.as_bytes()) {
        Ok(Access::ReadOnly)
    } else {
        Err(Unauthorized::Wrong)
    }
}

/// Compares without stopping at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap()
    }

    fn bearer(t: &str) -> String {
        format!("Bearer {t}")
    }

    #[test]
    fn each_token_grants_its_access_and_nothing_else_does() {
        let t = Tokens::of(&secret());
        let none = Revocations::default();
        assert_ne!(t.full, t.read_only, "another label");
        assert_eq!(t.read_only.len(), 64);
        assert_eq!(access(None, None, 0, &none), Ok(Access::Full), "an open server");
        assert_eq!(access(Some(&bearer(&t.full)), Some(&t), 0, &none), Ok(Access::Full));
        assert_eq!(
            access(Some(&format!("bearer {}", t.read_only)), Some(&t), 0, &none),
            Ok(Access::ReadOnly)
        );
        let e = access(None, Some(&t), 0, &none).unwrap_err().to_string();
        assert!(e.contains("Authorization: Bearer") && e.contains("regent token create"), "{e}");
        let e = access(Some("Basic abc"), Some(&t), 0, &none).unwrap_err().to_string();
        assert!(e.contains("must be `Bearer"), "{e}");
        let wrong = bearer(&"0".repeat(64));
        assert!(access(Some(&wrong), Some(&t), 0, &none)
            .unwrap_err()
            .to_string()
            .contains("wrong bearer"));
    }

    #[test]
    fn a_scoped_token_grants_its_claims_until_it_expires_or_is_revoked() {
        use regent_core::token::TokenId;
        let t = Tokens::of(&secret());
        let claims = Claims {
            id: TokenId([1; 16]),
            name: "ci".into(),
            key_id: 1,
            capabilities: [Capability::Read].into_iter().collect(),
            tenant: Some("a".into()),
            frameworks: None,
            workers: None,
            issued_ms: 0,
            expires_ms: Some(1_000),
        };
        let text = Token::issue(&secret(), &claims).unwrap();
        let none = Revocations::default();
        let got = access(Some(&bearer(&text)), Some(&t), 10, &none).unwrap();
        assert_eq!(got, Access::Token(claims.clone()));
        assert_eq!(got.require(Capability::Read, "read"), Ok(()));
        let e = got.require(Capability::Logs, "read logs").unwrap_err().to_string();
        assert!(e.contains("`logs`"), "{e}");
        assert_eq!(got.principal(), Principal::Token(claims.clone()));
        let e = access(Some(&bearer(&text)), Some(&t), 1_000, &none).unwrap_err().to_string();
        assert!(e.contains("expired"), "{e}");
        let mut revoked = Revocations::default();
        revoked.tokens.insert(claims.id, claims.expires_ms);
        let e = access(Some(&bearer(&text)), Some(&t), 10, &revoked).unwrap_err().to_string();
        assert!(e.contains("revoked"), "{e}");
        let other = Secret::new(b"another secret of enough bytes!!".to_vec()).unwrap();
        let e = access(Some(&bearer(&text)), Some(&Tokens::of(&other)), 10, &none)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not verify"), "{e}");
        // The read-only token reads everything and writes nothing.
        assert_eq!(Access::ReadOnly.require(Capability::Logs, "read logs"), Ok(()));
        let e = Access::ReadOnly.require(Capability::Submit, "submit").unwrap_err().to_string();
        assert!(e.contains("read-only") && e.contains("`submit`"), "{e}");
    }
}

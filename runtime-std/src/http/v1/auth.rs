//! Who may do what (docs/api.md#authentication): a server bound off
//! loopback with a cluster secret requires `Authorization: Bearer <token>`
//! on every request. Two tokens are derived from the secret: the full one
//! ([`super::super::bearer_token`], `regent http-token`) and a read-only
//! one ([`read_only_token`], `regent http-token --read-only`) that may only
//! read (`GET`, `HEAD`); a write with it is `403`. A server bound to
//! loopback is open (the tenancy work will close it).

use hmac::{Hmac, Mac};
use regent_core::secret::Secret;

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
}

impl Tokens {
    /// Both tokens of `secret`.
    pub fn of(secret: &Secret) -> Tokens {
        Tokens { full: super::super::bearer_token(secret), read_only: read_only_token(secret) }
    }
}

/// What a request may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Everything (the full token, or a server that requires none).
    Full,
    /// Reads only (the read-only token).
    ReadOnly,
}

/// What the `Authorization` header `given` grants under `tokens` (`None`:
/// an open server), or why it grants nothing (a `401`'s message).
pub fn access(given: Option<&str>, tokens: Option<&Tokens>) -> Result<Access, &'static str> {
    let Some(tokens) = tokens else { return Ok(Access::Full) };
    let Some(given) = given.map(str::trim) else {
        return Err("unauthorized: this HTTP server is bound to a non-loopback address and needs \
             `Authorization: Bearer <token>`; `regent http-token --secret-file F` prints the \
             token");
    };
    let presented = match given.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        _ => return Err("unauthorized: the Authorization header must be `Bearer <token>`"),
    };
    if constant_time_eq(presented.as_bytes(), tokens.full.as_bytes()) {
        Ok(Access::Full)
    } else if constant_time_eq(presented.as_bytes(), tokens.read_only.as_bytes()) {
        Ok(Access::ReadOnly)
    } else {
        Err("unauthorized: wrong bearer token (it is derived from the cluster secret: \
             `regent http-token --secret-file F` prints it)")
    }
}

/// Compares without stopping at the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_token_grants_its_access_and_nothing_else_does() {
        let secret = Secret::new(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap();
        let t = Tokens::of(&secret);
        assert_ne!(t.full, t.read_only, "another label");
        assert_eq!(t.read_only.len(), 64);
        assert_eq!(access(None, None), Ok(Access::Full), "an open server");
        assert_eq!(access(Some(&format!("Bearer {}", t.full)), Some(&t)), Ok(Access::Full));
        assert_eq!(
            access(Some(&format!("bearer {}", t.read_only)), Some(&t)),
            Ok(Access::ReadOnly)
        );
        assert!(access(None, Some(&t)).unwrap_err().contains("Authorization: Bearer"));
        assert!(access(Some("Basic abc"), Some(&t)).unwrap_err().contains("must be `Bearer"));
        let wrong = format!("Bearer {}", "0".repeat(64));
        assert!(access(Some(&wrong), Some(&t)).unwrap_err().contains("wrong bearer token"));
    }
}

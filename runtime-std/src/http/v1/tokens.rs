//! Token revocation over `/v1/` (docs/security.md, docs/api.md,
//! docs/design.md#issue-44): `POST /v1/tokens/revoke`, the twin of
//! `regent token revoke`, with the `operator` capability. The body names
//! one token (its id, or the token itself, whose expiry is then kept with
//! the entry) or a key id through which every signing key is retired; the
//! answer comes once the leader's revocation list is durable.

use super::errors::{ApiError, ErrorBody, Unavailable};
use super::jobs::{answer, read_json};
use super::{body, command, request_id, unexpected, Asker};
use crate::http::Response;
use regent_core::protocol::Message;
use regent_core::token::TokenId;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of `POST /v1/tokens/revoke`: exactly one of `token` and
/// `retire_keys`.
#[derive(Clone, Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeBody {
    /// The token's id (32 hex digits, as `regent token create` prints it)
    /// or the token itself (`rgt1.…`).
    #[serde(default)]
    pub token: Option<String>,
    /// Retire every signing key id at or below this one: every token
    /// signed with one is refused.
    #[serde(default)]
    pub retire_keys: Option<u32>,
}

/// The answer to `POST /v1/tokens/revoke`, once durable.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Revoked {
    /// The token id revoked (`null` for a key retirement).
    pub revoked: Option<String>,
    /// The key ids retired through (`null` for one token).
    pub retired_keys_through: Option<u32>,
    /// The leader's epoch.
    pub epoch: u64,
}

/// `POST /v1/tokens/revoke`: `{"revoked", "retired_keys_through",
/// "epoch"}` once the revocation list is durable; from then on every
/// master refuses the token (docs/security.md says how soon its HTTP
/// does).
#[utoipa::path(post, path = "/v1/tokens/revoke", tag = "operator",
    request_body(content = RevokeBody, description = "`{\"token\": ID or TOKEN}` or `{\"retire_keys\": N}`."),
    responses(
        (status = 200, description = "Revoked, durable.", body = Revoked),
        (status = 400, description = "Neither or both fields, a malformed id or token, or the list is full.", body = ErrorBody),
        (status = 403, description = "The token lacks `operator`.", body = ErrorBody),
        (status = 503, description = "Not the leader, or no answer in time.", body = Unavailable),
    ))]
pub fn revoke(request: &mut tiny_http::Request, queries: &Asker<'_>) -> Result<Response, ApiError> {
    let b: RevokeBody = read_json(&body(request)?)?;
    let request = request_id();
    let (msg, revoked, through) = match (b.token, b.retire_keys) {
        (Some(text), None) => {
            let (id, expires_ms) = TokenId::revoked_by(&text)
                .map_err(|e| ApiError::field(Some("token".into()), e.to_string()))?;
            (Message::RevokeToken { request, id, expires_ms }, Some(id.to_string()), None)
        }
        (None, Some(through)) => (Message::RetireKeys { request, through }, None, Some(through)),
        _ => {
            return Err(ApiError::field(
                None,
                "name exactly one of `token` (an id or the token) and `retire_keys` (a key id)",
            ))
        }
    };
    match command(queries, msg)? {
        Message::RequestAccepted { epoch, .. } => {
            Ok(answer(200, &Revoked { revoked, retired_keys_through: through, epoch: epoch.0 }))
        }
        other => Err(unexpected(other, "")),
    }
}

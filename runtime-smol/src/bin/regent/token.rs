//! `regent token ...`: scoped credentials (docs/security.md,
//! docs/design.md#issue-44). `revoke` asks the leader over the wire
//! protocol; each subcommand is a function of its own.

use crate::args::{Common, RevokeArgs, TokenCommand};
use crate::common::{masters_of, net_config, patience};
use regent_core::token::{Token, TokenId};
use regent_smol::client::Change;
use std::process::ExitCode;

/// Runs `regent token ...`.
pub async fn run(common: &Common, command: TokenCommand) -> Result<ExitCode, String> {
    match command {
        TokenCommand::Revoke(a) => revoke(common, a).await,
    }
}

/// `regent token revoke ID|TOKEN | --retire-keys N`: accepted once the
/// leader's revocation list is durable.
async fn revoke(common: &Common, a: RevokeArgs) -> Result<ExitCode, String> {
    let (change, done) = match (&a.id, a.retire_keys) {
        (_, Some(through)) => (
            Change::RetireKeys(through),
            format!("key ids through {through} retired: every token signed with one is refused"),
        ),
        (Some(text), None) => {
            let (id, expires_ms) = revoked_token(text)?;
            (Change::RevokeToken { id, expires_ms }, format!("token {id} revoked"))
        }
        (None, None) => return Err("name a token id (or the token), or --retire-keys N".into()),
    };
    regent_smol::client::change_with(
        &masters_of(common, &a.masters).await?,
        net_config(common)?,
        &change,
        patience(a.connect_timeout),
    )
    .await
    .map_err(String::from)?;
    println!("{done}");
    Ok(ExitCode::SUCCESS)
}

/// The id and expiry `text` names: a token id (32 hex digits; expiry
/// unknown) or a token (`rgt1.…`, whose claims carry both).
fn revoked_token(text: &str) -> Result<(TokenId, Option<u64>), String> {
    if text.trim().starts_with(regent_core::token::PREFIX) {
        let (claims, _, _) = Token::unverified_claims(text).map_err(|e| e.to_string())?;
        return Ok((claims.id, claims.expires_ms));
    }
    Ok((TokenId::parse(text).map_err(|e| e.to_string())?, None))
}

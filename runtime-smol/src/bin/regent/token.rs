//! `regent token ...`: scoped credentials (docs/security.md,
//! docs/design.md#issue-44); each subcommand is a function of its own.
//!
//! `regent token create` issues one: it draws a random token id from the
//! OS, fills the claims from its flags and signs them with the secret of
//! `--secret-file` ([`regent_core::token::Token::issue`]). The token goes
//! to stdout (and nothing else, so `> F` makes a token file), its id to
//! stderr (what a revocation names). `revoke` asks the leader over the
//! wire protocol.

use crate::args::{Common, CreateArgs, RevokeArgs, TokenCommand};
use crate::common::{masters_of, net_config, patience};
use regent_core::secret::Secret;
use regent_core::token::{Claims, Token, TokenId};
use regent_smol::client::Change;
use std::collections::BTreeSet;
use std::process::ExitCode;

/// Runs `regent token ...`.
pub async fn run(common: &Common, command: TokenCommand) -> Result<ExitCode, String> {
    match command {
        TokenCommand::Create(a) => create(crate::common::net_config(common)?.secret.as_ref(), a),
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

/// The id and expiry `text` names ([`TokenId::revoked_by`]).
fn revoked_token(text: &str) -> Result<(TokenId, Option<u64>), String> {
    TokenId::revoked_by(text).map_err(|e| e.to_string())
}

/// `regent token create`: see [`TokenCommand::Create`].
fn create(secret: Option<&Secret>, a: CreateArgs) -> Result<ExitCode, String> {
    let secret = secret.ok_or(
        "regent token create needs the cluster secret (--secret-file F): a token is signed \
         with it",
    )?;
    let now = regent_std::host::wall_clock_ms();
    let claims = Claims {
        id: random_id()?,
        name: a.name,
        key_id: a.key_id,
        capabilities: a.capability.into_iter().collect::<BTreeSet<_>>(),
        tenant: a.tenant,
        frameworks: a.frameworks,
        workers: a.workers,
        issued_ms: now,
        expires_ms: a.expires.map(|d| now.saturating_add(d)),
    };
    let text = Token::issue(secret, &claims).map_err(|e| e.to_string())?;
    println!("{text}");
    eprintln!("token id {}", claims.id);
    Ok(ExitCode::SUCCESS)
}

/// A token id from the OS's randomness.
fn random_id() -> Result<TokenId, String> {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).map_err(|e| format!("cannot draw a token id from the OS: {e}"))?;
    Ok(TokenId(id))
}

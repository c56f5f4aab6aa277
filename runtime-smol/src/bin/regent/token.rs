//! `regent token ...`: scoped credentials signed with the cluster secret
//! (docs/security.md, docs/design.md#issue-44).
//!
//! `regent token create` issues one: it draws a random token id from the
//! OS, fills the claims from its flags and signs them with the secret of
//! `--secret-file` ([`regent_core::token::Token::issue`]). The token goes
//! to stdout (and nothing else, so `> F` makes a token file), its id to
//! stderr (what a revocation names).

use crate::duration::parse_duration_ms;
use clap::{Args, Subcommand};
use regent_core::secret::Secret;
use regent_core::token::{Capability, Claims, Token, TokenId};
use std::collections::BTreeSet;
use std::process::ExitCode;

/// `regent token ...`.
#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Issue a token signed with the cluster secret (--secret-file): prints
    /// it on stdout, its id on stderr.
    Create(CreateArgs),
}

/// `regent token create`.
#[derive(Args, Debug)]
pub struct CreateArgs {
    /// What it may do: a comma-separated list of submit, read, scale,
    /// logs, operator, worker.
    #[arg(long, value_delimiter = ',', required = true, value_parser = parse_capability)]
    pub capability: Vec<Capability>,
    /// The tenant it is bound to: it only sees and acts on that tenant's
    /// frameworks, and the frameworks it creates are that tenant's.
    #[arg(long, value_name = "T")]
    pub tenant: Option<String>,
    /// The frameworks it may act on: an exact id, or a prefix ending in
    /// `*` (`web-*`).
    #[arg(long, value_name = "PATTERN")]
    pub frameworks: Option<String>,
    /// With `worker`: the worker ids it may register start with this.
    #[arg(long, value_name = "PREFIX")]
    pub workers: Option<String>,
    /// How long it is accepted (`30d`, `12h`); without it, until revoked.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    pub expires: Option<u64>,
    /// The signing key id (retiring a key id refuses every token signed
    /// with it or an older one).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub key_id: u32,
    /// Its name, shown in the audit log and in refusals.
    #[arg(long)]
    pub name: String,
}

fn parse_capability(s: &str) -> Result<Capability, String> {
    Capability::parse(s).map_err(|e| e.to_string())
}

/// Runs `regent token ...` with the cluster secret of `--secret-file`.
pub fn run(secret: Option<&Secret>, command: TokenCommand) -> Result<ExitCode, String> {
    match command {
        TokenCommand::Create(a) => create(secret, a),
    }
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

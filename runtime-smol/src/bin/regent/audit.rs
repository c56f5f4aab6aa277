//! `regent audit --http URL[,URL...] [--since MS] [--token-file F]`: the
//! audit log (docs/security.md#audit, docs/design.md#issue-44). Each master
//! logs what it answered while it led, so the full trail is the union over
//! the masters: this reads `GET /v1/audit` of every URL given and prints
//! the records merged by time (duplicates dropped), one JSON line each.

use regent_core::audit::AuditRecord;
use regent_core::secret::Secret;
use std::process::ExitCode;
use std::time::Duration;

/// How long one master may take to answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// `regent audit`: prints the merged records; fails naming a master that
/// did not answer 200 (a master without an audit log is skipped, said on
/// stderr).
pub fn run(
    http: &[String],
    since: u64,
    token_file: Option<&std::path::Path>,
    secret: Option<&Secret>,
) -> Result<ExitCode, String> {
    let token = match token_file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .map_err(|e| format!("cannot read the token file {}: {e}", f.display()))?
                .trim()
                .to_owned(),
        ),
        None => secret.map(regent_smol::http::bearer_token),
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into();
    let mut all: Vec<AuditRecord> = Vec::new();
    for base in http {
        let url = format!("{}/v1/audit?since={since}", base.trim().trim_end_matches('/'));
        let mut request = agent.get(&url);
        if let Some(t) = &token {
            request = request.header("Authorization", format!("Bearer {t}"));
        }
        let response = request.call().map_err(|e| format!("{url}: {e}"))?;
        let status = response.status().as_u16();
        let body = response.into_body().read_to_string().map_err(|e| format!("{url}: {e}"))?;
        match status {
            200 => {}
            404 => {
                eprintln!("{url}: {}", body.trim());
                continue;
            }
            _ => return Err(format!("{url} answered {status}: {}", body.trim())),
        }
        let v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| format!("{url}: not JSON: {e}"))?;
        let records: Vec<AuditRecord> = serde_json::from_value(v["records"].clone())
            .map_err(|e| format!("{url}: unexpected records: {e}"))?;
        all.extend(records);
    }
    all.sort_by_key(|r| r.time_ms);
    all.dedup();
    for r in &all {
        println!("{}", serde_json::to_string(r).unwrap_or_default());
    }
    Ok(ExitCode::SUCCESS)
}

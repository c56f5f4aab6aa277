//! Helpers every command shares: the cluster secret, the connection
//! settings, resolving `--masters`, the client's patience and the shutdown
//! signal.

use crate::args::{Common, ConnectTimeout};
use regent_core::secret::Secret;
use regent_core::Addr;
use regent_smol::net::NetConfig;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Prints a client's "still trying" line on stderr.
pub fn notice(line: &str) {
    eprintln!("regent: {line}");
}

pub fn patience(t: ConnectTimeout) -> regent_smol::client::Patience<'static> {
    regent_smol::client::Patience { connect_timeout: t.duration(), notice: &notice }
}

/// Reads a cluster secret from a file (surrounding whitespace trimmed).
pub fn read_secret(path: &std::path::Path) -> Result<Secret, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read the secret file {}: {e}", path.display()))?;
    let trimmed = bytes.trim_ascii().to_vec();
    // Anyone who can read it can join the cluster and read every frame.
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt as _;
        if meta.permissions().mode() & 0o077 != 0 {
            notice(&format!(
                "warning: the secret file {} is readable by others (mode {:o}); chmod 600 it",
                path.display(),
                meta.permissions().mode() & 0o777
            ));
        }
    }
    Secret::new(trimmed).map_err(|e| format!("secret file {}: {e}", path.display()))
}

pub fn read_secrets(paths: &[PathBuf]) -> Result<Vec<Secret>, String> {
    paths.iter().map(|p| read_secret(p)).collect()
}

/// Reads a token from a file (surrounding whitespace trimmed), checking it
/// is well-formed (its signature is the master's to check).
pub fn read_token(path: &std::path::Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
    let text = text.trim().to_owned();
    regent_core::token::Token::unverified_claims(&text)
        .map_err(|e| format!("token file {}: {e}", path.display()))?;
    Ok(text)
}

pub fn net_config(common: &Common) -> Result<Arc<NetConfig>, String> {
    let secret = common.secret_file.as_deref().map(read_secret).transpose()?;
    let token = common.token_file.as_deref().map(read_token).transpose()?;
    if secret.is_some() && token.is_some() {
        return Err("--token-file and --secret-file exclude each other: a node dials with the \
                    cluster secret (the root) or with a token"
            .into());
    }
    let mut net = NetConfig::new(common.cluster.clone(), secret);
    net.token = token;
    net.insecure = common.insecure;
    net.tls = tls_context(common)?;
    Ok(Arc::new(net))
}

/// The TLS material of `--tls-cert`, `--tls-key`, `--tls-ca` (all three or
/// none), loaded once per process (a command may build its connection
/// settings more than once; SIGHUP reloads the one context).
pub fn tls_context(common: &Common) -> Result<Option<Arc<regent_std::tls::TlsContext>>, String> {
    use regent_std::tls::{TlsContext, TlsFiles};
    if let Some(ctx) = TLS_CONTEXTS.lock().unwrap_or_else(|p| p.into_inner()).first() {
        return Ok(Some(ctx.clone()));
    }
    let given = [
        ("--tls-cert", &common.tls_cert),
        ("--tls-key", &common.tls_key),
        ("--tls-ca", &common.tls_ca),
    ];
    let missing: Vec<&str> =
        given.iter().filter(|(_, p)| p.is_none()).map(|(flag, _)| *flag).collect();
    match (&common.tls_cert, &common.tls_key, &common.tls_ca) {
        (Some(cert), Some(key), Some(ca)) => {
            let files = TlsFiles { cert: cert.clone(), key: key.clone(), ca: ca.clone() };
            let ctx = TlsContext::from_files(files, common.tls_optional)
                .map_err(|e| format!("TLS: {e}"))?;
            let ctx = Arc::new(ctx);
            TLS_CONTEXTS.lock().unwrap_or_else(|p| p.into_inner()).push(ctx.clone());
            Ok(Some(ctx))
        }
        (None, None, None) if common.tls_optional => {
            Err("--tls-optional needs --tls-cert, --tls-key and --tls-ca (without them every \
             connection is plain TCP already)"
                .into())
        }
        (None, None, None) => Ok(None),
        _ => Err(format!(
            "--tls-cert, --tls-key and --tls-ca go together: missing {}",
            missing.join(", ")
        )),
    }
}

pub fn addrs(list: &[String]) -> Vec<Addr> {
    list.iter().map(|s| Addr(s.trim().to_string())).filter(|a| !a.0.is_empty()).collect()
}

/// How long reading the masters from ZooKeeper (`--masters zk://...`) may
/// take.
pub const ZK_DETECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The masters of `--masters`: a static `host:port,...` list, or
/// `zk://HOST:PORT[,HOST:PORT...]/ROOT`, read from the election nodes
/// (`regent_smol::zk::detect`; the exposure rule of `--zk` applies). Both
/// runtimes get the resolved list; from there the leader's advertised
/// master set is followed.
pub async fn masters_of(common: &Common, list: &[String]) -> Result<Vec<Addr>, String> {
    use regent_smol::zk::detect::ZkMasters;
    // `--masters` splits at commas, and a connect string has them too.
    let joined = list.join(",");
    let Some(parsed) = ZkMasters::parse(&joined) else {
        return Ok(addrs(list));
    };
    let zk = parsed?;
    let net = net_config(common)?;
    let (hosts, has_secret, insecure) = (zk.hosts.clone(), net.secret.is_some(), common.insecure);
    smol::unblock(move || regent_std::net::check_zk_exposure(&hosts, has_secret, insecure))
        .await
        .map_err(|e| format!("--masters {joined}: {e}"))?;
    let secret = net.secret.as_ref().map(|s| s.expose());
    let masters = zk.resolve(secret, ZK_DETECT_TIMEOUT).await?;
    tracing::info!(masters = ?masters, "masters read from ZooKeeper");
    Ok(masters)
}

/// A channel closed by SIGTERM/SIGINT: every daemon's shutdown signal.
/// SIGHUP reloads the TLS material instead ([`reload_tls`]): new
/// connections use the new files, open ones keep theirs.
pub fn shutdown_channel() -> async_channel::Receiver<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let (tx, rx) = async_channel::bounded::<()>(1);
    match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
        Ok(mut signals) => {
            let spawned = std::thread::Builder::new().name("signals".into()).spawn(move || {
                for signal in signals.forever() {
                    if signal == SIGHUP {
                        reload_tls();
                    } else {
                        let _ = tx.try_send(());
                    }
                }
            });
            if let Err(e) = spawned {
                notice(&format!("warning: no signal thread ({e}): SIGTERM kills at once"));
            }
        }
        Err(e) => notice(&format!("warning: cannot handle signals ({e}): SIGTERM kills at once")),
    }
    rx
}

/// The TLS context this process made (`net_config`; at most one: one
/// command line), reloaded on SIGHUP.
static TLS_CONTEXTS: std::sync::Mutex<Vec<Arc<regent_std::tls::TlsContext>>> =
    std::sync::Mutex::new(Vec::new());

/// Reads every TLS context's files again; on an error the old material
/// stays in force and the log says why.
pub fn reload_tls() {
    let contexts = TLS_CONTEXTS.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if contexts.is_empty() {
        tracing::info!("SIGHUP: no TLS material to reload");
    }
    for ctx in contexts {
        match ctx.reload() {
            Ok(()) => tracing::info!(
                "SIGHUP: TLS material reloaded: new connections use it, open ones keep theirs"
            ),
            Err(e) => tracing::warn!("SIGHUP: TLS material not reloaded (the old stays): {e}"),
        }
    }
}

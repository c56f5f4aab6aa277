//! TLS material (docs/design.md#issue-24 item 4, first step): a node's certificate, key
//! and cluster CA loaded into rustls configurations for **mutual** TLS —
//! a server requires a client certificate chaining to the cluster's CA, a
//! client checks the server's against it — and a development CA
//! ([`DevCa`]) to issue them with.
//!
//! [`TlsContext`] is what a daemon's connections use (`--tls-cert`,
//! `--tls-key`, `--tls-ca`, `--tls-optional`): the current configurations,
//! replaced whole by [`TlsContext::reload`] (connections already open keep
//! theirs), and the rule for a peer's first byte ([`TlsContext::sniff`]: a
//! TLS record or a regent frame, never ambiguous). TLS sits under the
//! cluster-secret handshake and the frame MACs, which still authorize: TLS
//! adds confidentiality and host authentication. [`describe`] turns a
//! rustls error into a line an operator can act on.
//!
//! rustls with its `ring` provider (the one already in the tree through
//! ureq), certificates made with rcgen.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// Why TLS material could not be read, made or used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {what} {path}: {source}")]
    Read {
        /// What the file holds (`certificate`, `key`, `CA`).
        what: &'static str,
        /// Where.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The PEM holds nothing usable.
    #[error("{what}: {reason}")]
    Pem {
        /// What was being read.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the material (a key that does not match, a CA it
    /// cannot use).
    #[error("TLS configuration refused: {0}")]
    Config(String),
    /// rcgen could not make a key or certificate.
    #[error("cannot make a certificate: {0}")]
    Generate(String),
    /// A plain-TCP peer of a node that requires TLS ([`PLAIN_PEER_REFUSED`]).
    #[error("{PLAIN_PEER_REFUSED}")]
    PlainPeer,
    /// A TLS peer of a node without TLS ([`TLS_PEER_REFUSED`]).
    #[error("{TLS_PEER_REFUSED}")]
    TlsPeer,
    /// A dialled address whose host no certificate can name.
    #[error("{addr}: {host} is no name a certificate can carry ({reason})")]
    ServerName {
        /// The address dialled.
        addr: String,
        /// Its host part.
        host: String,
        /// Why it is no name.
        reason: String,
    },
}

/// A node's TLS material: its certificate chain and key, and the cluster's
/// CA its peers must chain to.
#[derive(Debug)]
pub struct TlsMaterial {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    roots: Arc<RootCertStore>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsMaterial {
    /// From PEM text: `cert` (the node's certificate, then any
    /// intermediates), `key` (its private key), `ca` (one or more CA
    /// certificates).
    pub fn from_pem(cert: &str, key: &str, ca: &str) -> Result<TlsMaterial, TlsError> {
        let chain = certificates("certificate", cert)?;
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| TlsError::Pem {
            what: "key",
            reason: format!("no private key in it ({e})"),
        })?;
        let mut roots = RootCertStore::empty();
        for c in certificates("CA", ca)? {
            roots.add(c).map_err(|e| TlsError::Pem { what: "CA", reason: e.to_string() })?;
        }
        Ok(TlsMaterial { chain, key, roots: Arc::new(roots) })
    }

    /// From the files of `--tls-cert`, `--tls-key` and `--tls-ca`; an error
    /// names the file.
    pub fn load(cert: &Path, key: &Path, ca: &Path) -> Result<TlsMaterial, TlsError> {
        let read = |what, p: &Path| {
            std::fs::read_to_string(p).map_err(|source| TlsError::Read {
                what,
                path: p.display().to_string(),
                source,
            })
        };
        TlsMaterial::from_pem(&read("certificate", cert)?, &read("key", key)?, &read("CA", ca)?)
    }

    /// The accepting side: presents the node's certificate and requires a
    /// client certificate chaining to the cluster's CA.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            self.roots.clone(),
            provider(),
        )
        .build()
        .map_err(|e| TlsError::Config(e.to_string()))?;
        self.server_with(verifier)
    }

    /// The HTTPS side: presents the node's certificate and asks browsers
    /// for none (the HTTP bearer token is what authorizes there).
    pub fn https_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        self.server_with(Arc::new(rustls::server::NoClientAuth))
    }

    fn server_with(
        &self,
        verifier: Arc<dyn rustls::server::danger::ClientCertVerifier>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| TlsError::Config(e.to_string()))?;
        Ok(Arc::new(config))
    }

    /// The dialling side: checks the server's certificate against the
    /// cluster's CA and presents the node's own.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let config = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(self.roots.clone())
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| TlsError::Config(e.to_string()))?;
        Ok(Arc::new(config))
    }
}

/// Where a node's TLS material lives (`--tls-cert`, `--tls-key`,
/// `--tls-ca`), read again by [`TlsContext::reload`].
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The node's certificate (then any intermediates), PEM.
    pub cert: PathBuf,
    /// Its private key, PEM.
    pub key: PathBuf,
    /// The cluster's CA certificate(s), PEM.
    pub ca: PathBuf,
}

/// The first byte of every TLS connection: a handshake record. A regent
/// frame starts with its big-endian length, and a first byte of `0x16`
/// would announce a body over 369 MB, far past any frame limit: the two are
/// told apart by one byte.
pub const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// A node's TLS settings as its connections use them.
#[derive(Debug)]
pub struct TlsContext {
    files: Option<TlsFiles>,
    current: RwLock<Configs>,
    optional: bool,
}

/// The configurations of one set of material.
#[derive(Debug)]
struct Configs {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
    https: Arc<ServerConfig>,
}

impl Configs {
    fn of(m: &TlsMaterial) -> Result<Configs, TlsError> {
        Ok(Configs {
            server: m.server_config()?,
            client: m.client_config()?,
            https: m.https_config()?,
        })
    }
}

impl TlsContext {
    /// From loaded material; `optional`: plain-TCP peers are still accepted
    /// (`--tls-optional`, for a rollout). Such a context cannot
    /// [`TlsContext::reload`].
    pub fn new(material: &TlsMaterial, optional: bool) -> Result<TlsContext, TlsError> {
        let current = RwLock::new(Configs::of(material)?);
        Ok(TlsContext { files: None, current, optional })
    }

    /// From the files of `--tls-cert`, `--tls-key`, `--tls-ca`.
    pub fn from_files(files: TlsFiles, optional: bool) -> Result<TlsContext, TlsError> {
        let material = TlsMaterial::load(&files.cert, &files.key, &files.ca)?;
        let mut ctx = TlsContext::new(&material, optional)?;
        ctx.files = Some(files);
        Ok(ctx)
    }

    /// Reads the files again (SIGHUP): new connections use the new
    /// material, open ones keep theirs. On an error the old material stays
    /// in force.
    pub fn reload(&self) -> Result<(), TlsError> {
        let Some(files) = &self.files else {
            return Err(TlsError::Config("this TLS context was not made from files".into()));
        };
        let material = TlsMaterial::load(&files.cert, &files.key, &files.ca)?;
        let fresh = Configs::of(&material)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }

    /// The accepting side's configuration in force.
    pub fn server(&self) -> Arc<ServerConfig> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).server.clone()
    }

    /// The HTTPS server's configuration in force (no client certificate).
    pub fn https(&self) -> Arc<ServerConfig> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).https.clone()
    }

    /// The dialling side's configuration in force.
    pub fn client(&self) -> Arc<ClientConfig> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).client.clone()
    }

    /// Whether plain-TCP peers are accepted too (`--tls-optional`).
    pub fn optional(&self) -> bool {
        self.optional
    }

    /// What an accepted connection whose first byte is `first` runs: TLS
    /// (`Ok(true)`), plain TCP (`Ok(false)`, only with `--tls-optional`, or
    /// on a node without TLS), or a refusal naming why. `tls` is the
    /// node's context, if it has one.
    pub fn sniff(tls: Option<&TlsContext>, first: u8) -> Result<bool, TlsError> {
        let speaks_tls = first == TLS_HANDSHAKE_RECORD;
        match tls {
            Some(_) if speaks_tls => Ok(true),
            Some(t) if t.optional => Ok(false),
            Some(_) => Err(TlsError::PlainPeer),
            None if speaks_tls => Err(TlsError::TlsPeer),
            None => Ok(false),
        }
    }
}

/// Why a plain-TCP peer is refused by a node that requires TLS.
pub const PLAIN_PEER_REFUSED: &str = "a plain-TCP peer, and this node requires TLS: give the \
     peer --tls-cert, --tls-key and --tls-ca, or run this node with --tls-optional during a rollout";

/// What a node requiring TLS answers a plain-TCP peer before it closes: a
/// TLS alert record (fatal, `handshake_failure`). Its first bytes, read as
/// a frame's length prefix, tell the peer it met TLS
/// ([`crate::net::CloseCause::frame`]).
pub const PLAIN_PEER_ALERT: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28];

/// Why a TLS peer is refused by a node without TLS.
pub const TLS_PEER_REFUSED: &str = "the peer speaks TLS and this node has no TLS material: \
     give it --tls-cert, --tls-key and --tls-ca";

/// The server name a dialled peer's certificate must carry: the host of
/// `addr` (`host:port`, `[v6]:port`), a DNS name or an IP address.
pub fn server_name(addr: &str) -> Result<rustls::pki_types::ServerName<'static>, TlsError> {
    let host = match addr.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| TlsError::ServerName {
        addr: addr.to_string(),
        host: host.to_string(),
        reason: e.to_string(),
    })
}

/// A rustls error as a line an operator can act on: which side refused
/// what, and the flag to look at.
pub fn describe(e: &rustls::Error) -> String {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    match e {
        E::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => format!(
            "{e}: the peer's certificate is not signed by this node's --tls-ca \
             (a certificate of another cluster or CA)"
        ),
        E::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
            format!("{e}: the peer's certificate has expired; issue it a new one")
        }
        E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => format!(
            "{e}: the peer's certificate does not name the address it was dialled at \
             (issue it for that host name or IP address)"
        ),
        E::NoCertificatesPresented => {
            format!("{e}: the peer presented no certificate (it needs --tls-cert and --tls-key)")
        }
        E::AlertReceived(
            alert @ (A::UnknownCA | A::BadCertificate | A::CertificateUnknown | A::DecryptError),
        ) => {
            format!(
                "the peer refused this node's certificate (TLS alert {alert:?}): \
                 it is not signed by the peer's --tls-ca"
            )
        }
        E::AlertReceived(A::CertificateExpired) => {
            "the peer refused this node's certificate (TLS alert CertificateExpired): \
             it has expired; issue a new one"
                .to_string()
        }
        E::AlertReceived(A::CertificateRequired) => "the peer requires a client certificate \
             (TLS alert CertificateRequired): give this node --tls-cert and --tls-key"
            .to_string(),
        _ => e.to_string(),
    }
}

fn certificates(what: &'static str, pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem { what, reason: e.to_string() })?;
    if certs.is_empty() {
        return Err(TlsError::Pem { what, reason: "no certificate in it".into() });
    }
    Ok(certs)
}

/// A development CA: issues node certificates for one cluster. Not for
/// production (its key is wherever it was written, its validity open-ended).
pub struct DevCa {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl std::fmt::Debug for DevCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevCa").finish_non_exhaustive()
    }
}

/// A certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// Its private key.
    pub key_pem: String,
}

/// How long an issued certificate is valid.
#[derive(Debug, Clone, Copy)]
pub enum Validity {
    /// rcgen's default (from 1975 to 4096): a development certificate.
    Open,
    /// From and until these calendar years (January 1st, UTC).
    Years {
        /// First year.
        from: i32,
        /// Until January 1st of this year.
        until: i32,
    },
}

fn generate(e: rcgen::Error) -> TlsError {
    TlsError::Generate(e.to_string())
}

impl DevCa {
    /// A new CA named after `cluster`.
    pub fn new(cluster: &str) -> Result<DevCa, TlsError> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(generate)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, format!("regent development CA, cluster {cluster}"));
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages =
            vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        let key = rcgen::KeyPair::generate().map_err(generate)?;
        let cert = params.self_signed(&key).map_err(generate)?;
        Ok(DevCa { cert, key })
    }

    /// The CA certificate, PEM (every node's `--tls-ca`).
    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// The CA's private key, PEM (keep it off the nodes).
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A node certificate for `names` (host names or IP addresses, as its
    /// peers dial it), good for both ends of a connection.
    pub fn issue(&self, names: &[String], validity: Validity) -> Result<Issued, TlsError> {
        let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(generate)?;
        if let Some(first) = names.first() {
            params.distinguished_name.push(rcgen::DnType::CommonName, first.clone());
        }
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        if let Validity::Years { from, until } = validity {
            params.not_before = rcgen::date_time_ymd(from, 1, 1);
            params.not_after = rcgen::date_time_ymd(until, 1, 1);
        }
        let key = rcgen::KeyPair::generate().map_err(generate)?;
        let cert = params.signed_by(&key, &self.cert, &self.key).map_err(generate)?;
        Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
    use rustls::{ClientConnection, ServerConnection};

    /// Runs a handshake in memory: `Ok` once both ends are done, else which
    /// end refused and why.
    fn handshake(server: &TlsMaterial, client: &TlsMaterial, name: &str) -> Result<(), String> {
        let mut s = ServerConnection::new(server.server_config().unwrap()).unwrap();
        let name = ServerName::try_from(name.to_string()).unwrap();
        let mut c = ClientConnection::new(client.client_config().unwrap(), name).unwrap();
        for _ in 0..20 {
            let mut buf = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            if !buf.is_empty() {
                s.read_tls(&mut &buf[..]).unwrap();
                s.process_new_packets().map_err(|e| format!("server refused: {e}"))?;
            }
            let mut buf = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut buf).unwrap();
            }
            if !buf.is_empty() {
                c.read_tls(&mut &buf[..]).unwrap();
                c.process_new_packets().map_err(|e| format!("client refused: {e}"))?;
            }
            if !c.is_handshaking() && !s.is_handshaking() && !c.wants_write() {
                return Ok(());
            }
        }
        Err("the handshake made no progress".into())
    }

    fn node(ca: &DevCa, name: &str, validity: Validity) -> TlsMaterial {
        let issued = ca.issue(&[name.to_string()], validity).unwrap();
        TlsMaterial::from_pem(&issued.cert_pem, &issued.key_pem, &ca.cert_pem()).unwrap()
    }

    #[test]
    fn two_nodes_of_one_cluster_complete_a_mutual_handshake() {
        let ca = DevCa::new("c1").unwrap();
        let (m, w) = (node(&ca, "127.0.0.1", Validity::Open), node(&ca, "w1", Validity::Open));
        handshake(&m, &w, "127.0.0.1").unwrap();
    }

    #[test]
    fn a_server_certificate_of_another_ca_is_refused_by_the_client() {
        let (ca, other) = (DevCa::new("c1").unwrap(), DevCa::new("c2").unwrap());
        let err = handshake(
            &node(&other, "127.0.0.1", Validity::Open),
            &node(&ca, "w1", Validity::Open),
            "127.0.0.1",
        )
        .unwrap_err();
        assert!(err.starts_with("client refused") && err.contains("UnknownIssuer"), "{err}");
    }

    #[test]
    fn an_expired_certificate_is_refused() {
        let ca = DevCa::new("c1").unwrap();
        let expired = node(&ca, "127.0.0.1", Validity::Years { from: 2020, until: 2021 });
        let err = handshake(&expired, &node(&ca, "w1", Validity::Open), "127.0.0.1").unwrap_err();
        assert!(err.starts_with("client refused") && err.contains("certificate expired"), "{err}");
    }

    #[test]
    fn a_client_certificate_of_another_cluster_is_refused_by_the_server() {
        let (ca, other) = (DevCa::new("c1").unwrap(), DevCa::new("c2").unwrap());
        // The client trusts the server's CA but presents another cluster's
        // certificate.
        let theirs = other.issue(&["w9".to_string()], Validity::Open).unwrap();
        let client =
            TlsMaterial::from_pem(&theirs.cert_pem, &theirs.key_pem, &ca.cert_pem()).unwrap();
        let err =
            handshake(&node(&ca, "127.0.0.1", Validity::Open), &client, "127.0.0.1").unwrap_err();
        assert!(err.starts_with("server refused") && err.contains("UnknownIssuer"), "{err}");
    }

    #[test]
    fn unreadable_or_empty_material_is_refused_naming_it() {
        let err = TlsMaterial::load(
            Path::new("/nonexistent/cert.pem"),
            Path::new("/nonexistent/key.pem"),
            Path::new("/nonexistent/ca.pem"),
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("cannot read certificate /nonexistent/cert.pem"));
        let ca = DevCa::new("c1").unwrap();
        let issued = ca.issue(&["n".to_string()], Validity::Open).unwrap();
        let err = TlsMaterial::from_pem("", &issued.key_pem, &ca.cert_pem()).unwrap_err();
        assert_eq!(err.to_string(), "certificate: no certificate in it");
        let err = TlsMaterial::from_pem(&issued.cert_pem, "", &ca.cert_pem()).unwrap_err();
        assert!(err.to_string().starts_with("key: no private key in it"), "{err}");
    }
}

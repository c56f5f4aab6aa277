//! The ZooKeeper backend of regent, on `zookeeper-client` and smol.
//!
//! * [`ZkBackend`] executes the elector's I/O actions (`NewSession`,
//!   `CloseSession`, `Request`) against a real ZooKeeper ensemble and turns
//!   what happens into elector events (`SessionConnected` with the
//!   negotiated timeout, `Disconnected`, `Expired`, `Reply`, `Watch`). It
//!   makes no protocol decision: the elector decides, the backend executes.
//! * Everything else — the election, the lease, the fenced record store
//!   under `<root>/state/` — is decided in
//!   [`MasterNode`](regent_core::node::MasterNode), whose ZooKeeper requests
//!   all go out on the one session the backend holds.
//!
//! # Security: the cluster secret and ACLs
//!
//! Without a secret ([`ZkConfig::secret`] `None`) nodes are created with
//! ZooKeeper's `world:anyone` all-permissions ACL: anyone who reaches the
//! ensemble can read and change the election and the stored state (which is
//! why `--zk` off loopback needs a secret or `--insecure`).
//!
//! With a secret, every session authenticates with ZooKeeper's `digest`
//! scheme as user [`DIGEST_USER`] with a password *derived* from the secret
//! ([`digest_credentials`]: hex of SHA-256 over a fixed label and the
//! secret), and every node regent creates carries exactly one ACL entry:
//! all permissions for that digest identity ([`digest_id`], the
//! `digest:regent:<base64 SHA-1>` entry ZooKeeper's `auth:` expands to).
//! There is **no world access at all**, not even read: records hold executor
//! commands and environments, and election nodes the masters' addresses. A
//! session without the credentials can neither read nor write regent's nodes
//! (nor list the children of one); operators and tools read the cluster
//! through a master (`regent status`, HTTP), or authenticate with the
//! credentials (`addauth digest regent:<password>` in `zkCli.sh`, the
//! password being what [`digest_credentials`] derives).
//!
//! The identity is written out rather than as `auth:` so that a session that
//! also holds a previous secret's credentials ([`ZkConfig::previous_secrets`],
//! during a rotation: it still reads and writes the nodes the previous
//! secret created) creates nodes for the current identity only. `regent
//! store seal --zk` moves every node of the cluster to the current identity,
//! after which the previous secret can be dropped.
//!
//! The digest scheme sends the password in clear to the server (use TLS to
//! the ensemble where that matters); deriving it keeps the cluster secret
//! itself, which also keys regent's wire and record MACs, off the ZooKeeper
//! wire and out of ZooKeeper's logs. Nodes created before a secret was set
//! keep their open ACLs until `regent store seal --zk` closes them; parents
//! that already exist are not changed. ZooKeeper checks a create or delete
//! against the *parent's* ACL, so the protection covers everything below
//! the first node regent created: let regent create the cluster's root (e.g.
//! `/regent`) rather than pre-creating it open.
//!
//! Records also carry a MAC under the cluster secret
//! ([`regent_core::store::seal`]), so even a record written by someone who
//! got past the ACLs without the secret is refused by name on load.

mod backend;
pub mod detect;
pub mod exec;
pub mod seal;

pub use backend::ZkBackend;
pub use regent_core::zk::{JUTE_MAXBUFFER, MAX_RECORD_IMAGE, REQUEST_OVERHEAD};

use base64::Engine as _;
use sha2::{Digest, Sha256};
use std::fmt;
use std::time::Duration;
use zookeeper_client as zkc;

/// The digest user regent's sessions authenticate as when a cluster secret
/// is set.
pub const DIGEST_USER: &str = "regent";

/// How to reach ZooKeeper.
#[derive(Clone)]
pub struct ZkConfig {
    /// The connect string, `host:port[,host:port...]` (no chroot: the
    /// elector's root is an absolute path).
    pub hosts: String,
    /// The cluster secret, if any: sessions authenticate with credentials
    /// derived from it and regent's nodes are readable and writable only by
    /// them (see the [module docs](self)).
    pub secret: Option<Vec<u8>>,
    /// Secrets being rotated out: sessions also authenticate with their
    /// credentials, so nodes created under them stay readable and writable.
    /// New nodes are created for the current secret's identity only.
    pub previous_secrets: Vec<Vec<u8>>,
    /// Pause between attempts to open a session while the ensemble cannot
    /// be reached. Default 500 ms.
    pub reconnect_interval: Duration,
}

impl ZkConfig {
    /// A configuration for `hosts`, without a secret.
    pub fn new(hosts: impl Into<String>) -> Self {
        ZkConfig {
            hosts: hosts.into(),
            secret: None,
            previous_secrets: Vec::new(),
            reconnect_interval: Duration::from_millis(500),
        }
    }

    /// The same configuration with a cluster secret.
    pub fn with_secret(mut self, secret: impl Into<Vec<u8>>) -> Self {
        self.secret = Some(secret.into());
        self
    }

    /// The same configuration, also authenticating with a previous secret's
    /// credentials (a rotation; see [`ZkConfig::previous_secrets`]).
    pub fn with_previous_secret(mut self, secret: impl Into<Vec<u8>>) -> Self {
        self.previous_secrets.push(secret.into());
        self
    }

    /// The ACL every node regent creates carries: without a secret
    /// `world:anyone` all; with one, all for the secret's digest identity
    /// only (see the [module docs](self)).
    pub fn acls(&self) -> Vec<zkc::Acl> {
        match &self.secret {
            None => vec![zkc::Acl::new(zkc::Permission::ALL, zkc::AuthId::anyone())],
            Some(secret) => vec![zkc::Acl::new(
                zkc::Permission::ALL,
                zkc::AuthId::new("digest", &digest_id(secret)),
            )],
        }
    }

    /// Opens a session asking for `timeout`, authenticated when a secret is
    /// set (with the credentials of the current and every previous secret).
    /// The client reconnects by itself within the session.
    pub async fn connect(&self, timeout: Duration) -> Result<zkc::Client, zkc::Error> {
        let mut connector = zkc::Client::connector().with_session_timeout(timeout);
        if let Some(secret) = &self.secret {
            connector = connector.with_auth("digest", &digest_credentials(secret));
            for previous in &self.previous_secrets {
                connector = connector.with_auth("digest", &digest_credentials(previous));
            }
        }
        connector.connect(&self.hosts).await
    }
}

impl fmt::Debug for ZkConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkConfig")
            .field("hosts", &self.hosts)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("previous_secrets", &self.previous_secrets.len())
            .field("reconnect_interval", &self.reconnect_interval)
            .finish()
    }
}

/// The `digest` credentials for a cluster secret: `regent:<password>`,
/// the password being the hex SHA-256 of `"regent zookeeper digest v1\0"`
/// followed by the secret. Any process holding the secret derives the same
/// credentials; the secret cannot be recovered from them.
pub fn digest_credentials(secret: &[u8]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(b"regent zookeeper digest v1\0");
    h.update(secret);
    let mut out = format!("{DIGEST_USER}:").into_bytes();
    for b in h.finalize() {
        out.extend_from_slice(format!("{b:02x}").as_bytes());
    }
    out
}

/// The digest identity of a cluster secret, as ZooKeeper names it in an ACL:
/// `regent:<base64 of the SHA-1 of the credentials>` (ZooKeeper's digest
/// scheme), the credentials being [`digest_credentials`].
pub fn digest_id(secret: &[u8]) -> String {
    let credentials = digest_credentials(secret);
    let hash = <sha1::Sha1 as sha1::Digest>::digest(&credentials);
    format!("{DIGEST_USER}:{}", base64::engine::general_purpose::STANDARD.encode(hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_derived_not_the_secret() {
        let c = digest_credentials(b"s3cret");
        let s = String::from_utf8(c.clone()).unwrap();
        assert!(s.starts_with("regent:"));
        assert_eq!(s.len(), "regent:".len() + 64);
        assert!(!s.contains("s3cret"));
        assert_eq!(c, digest_credentials(b"s3cret"));
        assert_ne!(c, digest_credentials(b"other"));
        assert!(!format!("{:?}", ZkConfig::new("h:1").with_secret("s3cret")).contains("s3cret"));
    }

    #[test]
    fn the_acl_names_the_digest_identity_only() {
        // ZooKeeper's DigestAuthenticationProvider.generateDigest of
        // "regent:pw" is "regent:" + base64(sha1("regent:pw")); the value
        // was computed independently (Python's hashlib and base64).
        let id = digest_id(b"s3cret");
        assert_eq!(id, "regent:KZxLqmcez+0Q8LCgNfF7/vsyj00=");
        let acls = ZkConfig::new("h:1").with_secret("s3cret").with_previous_secret("old").acls();
        assert_eq!(acls.len(), 1);
        assert_eq!(acls[0].scheme(), "digest");
        assert_eq!(acls[0].id(), id);
        assert_eq!(acls[0].permission(), zkc::Permission::ALL);
        let open = ZkConfig::new("h:1").acls();
        assert_eq!(open[0].scheme(), "world");
    }
}

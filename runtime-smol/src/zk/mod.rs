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
//! ensemble can change the election and the stored state.
//!
//! With a secret, every session authenticates with ZooKeeper's `digest`
//! scheme as user [`DIGEST_USER`] with a password *derived* from the secret
//! ([`digest_credentials`]: hex of SHA-256 over a fixed label and the
//! secret), and every node regent creates carries two ACL entries:
//!
//! * `auth:` (all permissions): ZooKeeper expands it to the session's
//!   authenticated digest identity, so only sessions holding the cluster's
//!   credentials can create, change or delete regent's nodes;
//! * `world:anyone` read: anyone may read who leads (operators, tools).
//!
//! The digest scheme sends the password in clear to the server (use TLS to
//! the ensemble where that matters); deriving it keeps the cluster secret
//! itself, which also keys regent's wire MACs, off the ZooKeeper wire and
//! out of ZooKeeper's logs. Nodes created before a secret was set keep their
//! open ACLs; parents that already exist are not changed. ZooKeeper checks a
//! create or delete against the *parent's* ACL, so the protection covers
//! everything below the first node regent created: let regent create the
//! cluster's root (e.g. `/regent`) rather than pre-creating it open.

mod backend;
pub mod detect;
pub mod exec;

pub use backend::ZkBackend;
pub use regent_core::node::{JUTE_MAXBUFFER, MAX_RECORD_IMAGE, REQUEST_OVERHEAD};

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
    /// derived from it and regent's nodes are writable only by them (see the
    /// [module docs](self)).
    pub secret: Option<Vec<u8>>,
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
            reconnect_interval: Duration::from_millis(500),
        }
    }

    /// The same configuration with a cluster secret.
    pub fn with_secret(mut self, secret: impl Into<Vec<u8>>) -> Self {
        self.secret = Some(secret.into());
        self
    }

    /// The ACL every node regent creates carries (see the [module
    /// docs](self)).
    pub fn acls(&self) -> Vec<zkc::Acl> {
        match self.secret {
            None => vec![zkc::Acl::new(zkc::Permission::ALL, zkc::AuthId::anyone())],
            Some(_) => vec![
                zkc::Acl::new(zkc::Permission::ALL, zkc::AuthId::new("auth", "")),
                zkc::Acl::new(zkc::Permission::READ, zkc::AuthId::anyone()),
            ],
        }
    }

    /// Opens a session asking for `timeout`, authenticated when a secret is
    /// set. The client reconnects by itself within the session.
    pub async fn connect(&self, timeout: Duration) -> Result<zkc::Client, zkc::Error> {
        let mut connector = zkc::Client::connector().with_session_timeout(timeout);
        if let Some(secret) = &self.secret {
            connector = connector.with_auth("digest", &digest_credentials(secret));
        }
        connector.connect(&self.hosts).await
    }
}

impl fmt::Debug for ZkConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkConfig")
            .field("hosts", &self.hosts)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
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
}

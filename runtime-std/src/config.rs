//! How to run a master: one [`MasterConfig`] and one [`Recovery`] for both
//! runtimes.
//!
//! The smol runtime (`regent_smol::master::run_master`) runs every
//! recovery mode; the std runtime ([`crate::pumps::spawn_master`]) runs
//! `none` and `filesystem` and refuses [`Recovery::Zookeeper`] with an error
//! saying so (the ZooKeeper client is async). `regent master` fills this
//! from its flags, environment and configuration file, whichever runtime is
//! asked for.

use crate::net::NetConfig;
use regent_core::secret::Secret;
use regent_core::{Addr, Millis};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where master state survives a crash.
#[derive(Clone, Debug)]
pub enum Recovery {
    /// Nowhere: state lives in memory. Single master.
    None,
    /// A directory (locked by the running master). Single master.
    Filesystem {
        /// The store directory.
        dir: PathBuf,
    },
    /// ZooKeeper: leader election among any number of masters, records
    /// under `<root>/state/`. The smol runtime only.
    Zookeeper {
        /// `host:port[,host:port...]`.
        hosts: String,
        /// The cluster's root node, e.g. `/regent`.
        root: String,
        /// The session timeout to ask for (the server may clamp it).
        session_timeout: Duration,
        /// The most store writes in flight at once on the session (1: one
        /// record per round trip; docs/design.md#issue-46).
        write_window: usize,
    },
}

/// The error the std runtime gives for [`Recovery::Zookeeper`].
pub const ZOOKEEPER_NEEDS_SMOL: &str =
    "--recovery zookeeper needs --runtime smol (the ZooKeeper client is async)";

/// How to run a master, on either runtime.
#[derive(Clone, Debug)]
pub struct MasterConfig {
    /// This master's id.
    pub id: String,
    /// Where workers and subscribers connect (port 0 picks a free port).
    pub listen: SocketAddr,
    /// The address advertised to peers (default: the bound address).
    pub advertise: Option<Addr>,
    /// Where to serve HTTP (`/`, `/api/state`, `/api/events`, `/metrics`),
    /// if anywhere; see [`crate::http`].
    pub http: Option<SocketAddr>,
    /// The recovery mode.
    pub recovery: Recovery,
    /// A worker silent this long is DEAD.
    pub worker_timeout: Duration,
    /// How long a new leader waits for recovered workers (default: the
    /// worker timeout).
    pub recovery_timeout: Option<Duration>,
    /// How workers heartbeat, at least.
    pub heartbeat_interval: Duration,
    /// The most heartbeats per second all workers send together; past it
    /// the leader tells them longer intervals (0: no ceiling; see
    /// `regent_core::master::Config::max_heartbeats_per_second`).
    pub max_heartbeats_per_second: u32,
    /// How many frameworks the cluster keeps records of (see
    /// `regent_core::limits::DEFAULT_MAX_FRAMEWORKS`).
    pub max_frameworks: usize,
    /// Whether waiting slots may preempt (`regent_core::master::Config::
    /// preemption`).
    pub preemption: bool,
    /// How many finished frameworks the leader keeps (see
    /// `regent_core::limits::DEFAULT_RETAINED_FRAMEWORKS`).
    pub retained_frameworks: usize,
    /// How many workers the leader's registry may hold; a new worker id
    /// past it is refused (see `regent_core::master::Config::max_workers`).
    pub max_workers: usize,
    /// Connection settings (cluster, secret, limits).
    pub net: Arc<NetConfig>,
    /// Allow non-loopback addresses without a secret.
    pub insecure: bool,
    /// Secrets being rotated out: records sealed under them are still read
    /// (and re-sealed under the secret of `net`), and ZooKeeper sessions
    /// also authenticate with their credentials. Needs that secret.
    pub previous_secrets: Vec<Secret>,
    /// The std runtime's ceiling of peer connections at once (two threads
    /// and a socket each; default
    /// [`crate::pumps::master::DEFAULT_MAX_CONNECTIONS`]); one more is
    /// closed at once, with a log line. Checked at start against the
    /// process's limits. The smol runtime has no such ceiling (file
    /// descriptors only) and refuses a value here.
    pub max_connections: Option<usize>,
    /// Where the audit log goes (`--audit-log`); `None`: `audit.log` in
    /// the filesystem store's directory, or no log ([`MasterConfig::audit_path`]).
    pub audit_log: Option<std::path::PathBuf>,
}

impl MasterConfig {
    /// A master with `regent master`'s defaults: recovery `none`, 10 s
    /// worker timeout, 1 s heartbeats, the default limits.
    pub fn new(id: impl Into<String>, listen: SocketAddr, net: Arc<NetConfig>) -> Self {
        MasterConfig {
            id: id.into(),
            listen,
            advertise: None,
            http: None,
            recovery: Recovery::None,
            worker_timeout: Duration::from_secs(10),
            recovery_timeout: None,
            heartbeat_interval: Duration::from_secs(1),
            max_heartbeats_per_second: regent_core::master::DEFAULT_MAX_HEARTBEATS_PER_SECOND,
            max_frameworks: regent_core::limits::DEFAULT_MAX_FRAMEWORKS,
            preemption: true,
            retained_frameworks: regent_core::limits::DEFAULT_RETAINED_FRAMEWORKS,
            max_workers: regent_core::limits::DEFAULT_MAX_WORKERS,
            net,
            insecure: false,
            previous_secrets: Vec::new(),
            max_connections: None,
            audit_log: None,
        }
    }

    /// The audit log's file: `--audit-log`, else `audit.log` in the
    /// filesystem store's directory, else none.
    pub fn audit_path(&self) -> Option<std::path::PathBuf> {
        match (&self.audit_log, &self.recovery) {
            (Some(p), _) => Some(p.clone()),
            (None, Recovery::Filesystem { dir }) => Some(dir.join("audit.log")),
            _ => None,
        }
    }

    /// Opens the audit log ([`MasterConfig::audit_path`]) and registers it
    /// for `GET /v1/audit`.
    pub fn open_audit_log(&self) -> std::io::Result<crate::audit::AuditLog> {
        let path = self.audit_path();
        let log = crate::audit::AuditLog::open(path.as_deref())?;
        if let Some(p) = log.path() {
            crate::audit::serve_path(p);
        }
        Ok(log)
    }

    /// The master machine's settings: every one that the flags set, the
    /// recovery window defaulting to the worker timeout, `advertise` the
    /// address this master tells its peers (the bound one when
    /// [`MasterConfig::advertise`] is unset). The one place a runtime gets
    /// them from.
    pub fn machine(&self, advertise: Addr) -> regent_core::master::Config {
        let ms = |d: Duration| Millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let id = regent_core::MasterId::new(self.id.clone());
        regent_core::master::Config {
            worker_timeout: ms(self.worker_timeout),
            recovery_timeout: ms(self.recovery_timeout.unwrap_or(self.worker_timeout)),
            heartbeat_interval: ms(self.heartbeat_interval),
            max_heartbeats_per_second: self.max_heartbeats_per_second,
            max_frameworks: self.max_frameworks,
            preemption: self.preemption,
            retained_frameworks: self.retained_frameworks,
            max_workers: self.max_workers,
            ..regent_core::master::Config::new(id, advertise)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag reaches the machine; nothing is patched afterwards.
    #[test]
    fn the_machine_gets_every_flag() {
        let net = Arc::new(NetConfig::new("c", None));
        let mut cfg = MasterConfig::new("m1", "127.0.0.1:0".parse().unwrap(), net);
        cfg.worker_timeout = Duration::from_secs(7);
        cfg.heartbeat_interval = Duration::from_millis(250);
        cfg.max_heartbeats_per_second = 9;
        cfg.max_frameworks = 3;
        cfg.retained_frameworks = 4;
        cfg.max_workers = 5;
        let m = cfg.machine(Addr::new("10.0.0.1:7070"));
        assert_eq!(m.id.as_str(), "m1");
        assert_eq!(m.addr.as_str(), "10.0.0.1:7070");
        assert_eq!(m.worker_timeout, Millis(7_000));
        assert_eq!(m.recovery_timeout, Millis(7_000), "defaults to the worker timeout");
        assert_eq!(m.heartbeat_interval, Millis(250));
        assert_eq!(
            (m.max_heartbeats_per_second, m.max_frameworks, m.retained_frameworks, m.max_workers),
            (9, 3, 4, 5)
        );
        cfg.recovery_timeout = Some(Duration::from_secs(30));
        assert_eq!(cfg.machine(Addr::new("a:1")).recovery_timeout, Millis(30_000));
    }
}

//! Finding the masters through ZooKeeper, Mesos style: `--masters
//! zk://HOST:PORT[,HOST:PORT...]/ROOT` instead of a static list.
//!
//! The election nodes under `<ROOT>/election` hold each candidate's id and
//! advertised address ([`CandidateData`]); read in election order (lowest
//! sequence, the leader, first) they are the list a worker, a submitter or
//! an operator tool starts from. From there the protocol follows the
//! leader as usual: the leader advertises the master set in its replies and
//! tells its peers when it changes, and a peer follows a master only once
//! that master's own `Hello` reply proves its epoch. The access is read-only;
//! with a cluster secret the session authenticates (regent's nodes carry no
//! world-readable ACL then), and without one a non-loopback ensemble is
//! refused unless `--insecure` (the exposure rule of `--zk`).

use super::ZkConfig;
use regent_core::elector::{CandidateData, CandidateName};
use regent_core::Addr;
use std::time::Duration;

/// The scheme prefix of a ZooKeeper masters list.
pub const SCHEME: &str = "zk://";

/// Why a `zk://HOSTS/ROOT` masters list is malformed ([`ZkMasters::parse`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ZkSpecError {
    /// No `/ROOT` after the hosts.
    #[error("{spec}: no root path (zk://HOST:PORT[,HOST:PORT...]/ROOT)")]
    NoRoot {
        /// The list given.
        spec: String,
    },
    /// No host before the root.
    #[error("{spec}: no ZooKeeper host before the root path")]
    NoHost {
        /// The list given.
        spec: String,
    },
    /// The root is `/`.
    #[error("{spec}: the root path is empty (e.g. zk://{hosts}/regent)")]
    EmptyRoot {
        /// The list given.
        spec: String,
        /// Its hosts.
        hosts: String,
    },
    /// Two commas in a row, or one at an end.
    #[error("{spec}: an empty host in {hosts:?}")]
    EmptyHost {
        /// The list given.
        spec: String,
        /// Its hosts.
        hosts: String,
    },
}

crate::error::into_report!(ZkSpecError);

/// Why the masters could not be read from ZooKeeper ([`ZkMasters::resolve`]).
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    /// No session could be opened with the ensemble.
    #[error("cannot reach ZooKeeper at {hosts}: {source}")]
    Unreachable {
        /// The connect string.
        hosts: String,
        /// ZooKeeper's error.
        source: zookeeper_client::Error,
    },
    /// The election node could not be listed (a wrong root, refused
    /// credentials).
    #[error("cannot list {election} at {hosts}: {source} (is --zk-root {root} right?)")]
    NoElection {
        /// The election node's path.
        election: String,
        /// The connect string.
        hosts: String,
        /// The root given.
        root: String,
        /// ZooKeeper's error.
        source: zookeeper_client::Error,
    },
    /// The election lists no master.
    #[error("no master is a candidate under {election} at {hosts}")]
    NoCandidate {
        /// The election node's path.
        election: String,
        /// The connect string.
        hosts: String,
    },
    /// The reads took longer than the timeout.
    #[error("reading the masters from ZooKeeper at {hosts} timed out after {after:?}")]
    TimedOut {
        /// The connect string.
        hosts: String,
        /// The timeout.
        after: Duration,
    },
}

crate::error::into_report!(DetectError);

/// A parsed `zk://HOSTS/ROOT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkMasters {
    /// The connect string, `host:port[,host:port...]`.
    pub hosts: String,
    /// The cluster's root node, e.g. `/regent` (as given to `regent master
    /// --zk-root`).
    pub root: String,
}

impl ZkMasters {
    /// Parses `zk://HOSTS/ROOT`; `None` when `spec` does not start with
    /// `zk://`, an error naming what is wrong when it does but is malformed.
    pub fn parse(spec: &str) -> Option<Result<ZkMasters, ZkSpecError>> {
        let rest = spec.trim().strip_prefix(SCHEME)?;
        let spec = spec.to_string();
        let parsed = match rest.find('/') {
            None => Err(ZkSpecError::NoRoot { spec }),
            Some(0) => Err(ZkSpecError::NoHost { spec }),
            Some(i) => {
                let (hosts, root) = rest.split_at(i);
                let root = root.trim_end_matches('/');
                let listed = hosts.to_string();
                if root.is_empty() {
                    Err(ZkSpecError::EmptyRoot { spec, hosts: listed })
                } else if hosts.split(',').any(|h| h.trim().is_empty()) {
                    Err(ZkSpecError::EmptyHost { spec, hosts: listed })
                } else {
                    Ok(ZkMasters { hosts: hosts.to_owned(), root: root.to_owned() })
                }
            }
        };
        Some(parsed)
    }

    /// Reads the election nodes and returns the masters' advertised
    /// addresses, the leader first, within `timeout`. An error names the
    /// ensemble and what failed (unreachable, no election, no candidates,
    /// refused credentials).
    pub async fn resolve(
        &self,
        secret: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Vec<Addr>, DetectError> {
        let mut config = ZkConfig::new(self.hosts.clone());
        if let Some(s) = secret {
            config = config.with_secret(s.to_vec());
        }
        let election = format!("{}/election", self.root);
        let read = async {
            let client = config
                .connect(timeout)
                .await
                .map_err(|source| DetectError::Unreachable { hosts: self.hosts.clone(), source })?;
            let names = client.list_children(&election).await.map_err(|source| {
                DetectError::NoElection {
                    election: election.clone(),
                    hosts: self.hosts.clone(),
                    root: self.root.clone(),
                    source,
                }
            })?;
            let mut candidates: Vec<(u64, String)> = names
                .into_iter()
                .filter_map(|n| CandidateName::parse(&n).map(|c| (c.seq, n)))
                .collect();
            candidates.sort();
            let mut addrs: Vec<Addr> = Vec::new();
            for (_, name) in candidates {
                let path = format!("{election}/{name}");
                // A candidate that left meanwhile is simply not listed.
                let Ok((data, _)) = client.get_data(&path).await else { continue };
                if let Some(d) = CandidateData::decode(&data) {
                    if !addrs.contains(&d.addr) {
                        addrs.push(d.addr);
                    }
                }
            }
            if addrs.is_empty() {
                return Err(DetectError::NoCandidate { election, hosts: self.hosts.clone() });
            }
            Ok(addrs)
        };
        smol::future::or(read, async {
            async_io::Timer::after(timeout).await;
            Err(DetectError::TimedOut { hosts: self.hosts.clone(), after: timeout })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_and_root() {
        let z = ZkMasters::parse("zk://10.0.0.1:2181,10.0.0.2:2181/regent/prod").unwrap().unwrap();
        assert_eq!(z.hosts, "10.0.0.1:2181,10.0.0.2:2181");
        assert_eq!(z.root, "/regent/prod");
        assert_eq!(ZkMasters::parse("zk://h:1/regent/").unwrap().unwrap().root, "/regent");
        assert_eq!(ZkMasters::parse("127.0.0.1:7077"), None, "a plain address is no zk:// list");
    }

    #[test]
    fn malformed_lists_are_named() {
        assert!(matches!(
            ZkMasters::parse("zk://a:1,,b:2/r"),
            Some(Err(ZkSpecError::EmptyHost { hosts, .. })) if hosts == "a:1,,b:2"
        ));
        for (spec, says) in [
            ("zk://h:2181", "no root path"),
            ("zk:///regent", "no ZooKeeper host"),
            ("zk://h:2181/", "root path is empty"),
            ("zk://a:1,,b:2/r", "an empty host"),
        ] {
            let err = ZkMasters::parse(spec).unwrap().unwrap_err().to_string();
            assert!(err.contains(says) && err.contains(spec), "{spec}: {err}");
        }
    }
}

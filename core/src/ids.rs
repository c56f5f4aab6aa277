//! Identifiers and epochs.
//!
//! Names chosen by operators (worker, master, framework ids) are strings;
//! values that must be unique per process (incarnations, instance ids) are
//! 64-bit numbers the runtime draws from OS entropy and passes in.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub struct $name(pub String);

        impl $name {
            /// Builds the id from anything string-like.
            pub fn new(s: impl Into<String>) -> Self {
                Self(s.into())
            }
            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }
    };
}

macro_rules! number_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{:x}"), self.0)
            }
        }
    };
}

string_id!(
    /// A worker's stable id (`--id`, or generated once and kept in its work dir).
    WorkerId
);
string_id!(
    /// A master's stable id (`--id`).
    MasterId
);
string_id!(
    /// A framework (application) id, assigned by the master on first SUBSCRIBE
    /// or chosen by the submitter.
    FrameworkId
);
string_id!(
    /// An executor id, unique within the cluster's lifetime.
    ExecutorId
);
string_id!(
    /// A network address as `host:port`, as configured or advertised.
    Addr
);

/// A worker id reads as its string (the placement index keeps ids as
/// shared strings and looks their entries up by them).
impl std::borrow::Borrow<str> for WorkerId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl ExecutorId {
    /// When the master launched it, from the id it gives it
    /// (`<framework>/<group>#<slot>#<epoch>.<launch>`): `(epoch, launch)`,
    /// which orders launches as the leaders made them (a later leadership
    /// has a higher epoch, and a leadership counts its launches up).
    /// `None` for an id of another shape.
    pub fn launched(&self) -> Option<(u64, u64)> {
        let (e, l) = self.0.rsplit('#').next()?.split_once('.')?;
        Some((e.parse().ok()?, l.parse().ok()?))
    }

    /// The (group, slot) this executor fills, from the id the master gives
    /// it: `<framework>/<group>#<slot>#<epoch>.<launch>`. `None` for an id
    /// of another shape or of another framework.
    pub fn group_slot(&self, framework: &FrameworkId) -> Option<(String, u32)> {
        let rest = self.0.strip_prefix(framework.as_str())?.strip_prefix('/')?;
        let mut parts = rest.rsplitn(3, '#');
        let _launch = parts.next()?;
        let slot = parts.next()?.parse().ok()?;
        let group = parts.next()?;
        Some((group.to_owned(), slot))
    }
}

number_id!(
    /// One run of a worker process: fresh for every process start. Two
    /// registrations with the same worker id and incarnation are the same
    /// process; a larger incarnation is a newer process, which replaces the
    /// older one, and an older one never replaces a newer one. Runtimes build
    /// it from the start time and OS entropy, and never below the previous
    /// incarnation + 1 kept in the worker's work directory, so it grows even
    /// across a wall clock stepped back (see `next_ordered_id` in
    /// regent-std's `host`).
    Incarnation,
    "inc-"
);
number_id!(
    /// A transport connection, numbered by the runtime that accepted or opened it.
    ConnId,
    "conn-"
);
number_id!(
    /// A local read (an HTTP query: the state, the metrics, a log read),
    /// numbered by the runtime that took it; the node's answer carries it
    /// back. Never a connection: nothing is sent to a query.
    QueryId,
    "query-"
);
number_id!(
    /// One run of a subscriber process (Mesos' scheduler instance). Like an
    /// [`Incarnation`], larger means newer: a SUBSCRIBE from an older
    /// instance never takes a framework back from a newer one. `regent
    /// submit` keeps the last one it drew in its state directory, so the
    /// next is newer even across a wall clock stepped back (see
    /// `next_instance_id` in regent-std's `host`).
    InstanceId,
    "inst-"
);

/// A leadership term. Strictly increases across leaderships and is made
/// durable before a leader acts (docs/design.md#epochs-fence-everything); every master message carries
/// it and receivers ignore lower epochs.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Epoch(pub u64);

impl Epoch {
    /// The epoch before any leadership.
    pub const ZERO: Epoch = Epoch(0);

    /// The next epoch.
    pub fn next(self) -> Epoch {
        Epoch(self.0.saturating_add(1))
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "epoch {}", self.0)
    }
}

/// A token's random id, named by revocations and the audit log
/// (`regent_core::token`, docs/security.md). `Display`: 32 lowercase hex
/// digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TokenId(pub [u8; 16]);

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

//! The error enums of regent-smol's library, and how the binary prints them.
//!
//! Every fallible public function returns its domain's error enum
//! ([`crate::client::ClientError`], [`crate::client::DeadlineError`],
//! [`crate::logs::LogsError`], ...): a caller matches on the variant; the
//! text is what the `regent` binary prints. An underlying typed error is
//! the variant's [`source`](std::error::Error::source).
//! [`regent_std::error::report`] prints one with every cause.

/// `impl From<$error> for String` through [`regent_std::error::report`]:
/// the binary's commands that return `Result<_, String>` take these errors
/// with `?`, and print them with their causes.
macro_rules! into_report {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for String {
            fn from(e: $error) -> String {
                regent_std::error::report(&e)
            }
        }
    )*};
}
pub(crate) use into_report;

/// What `--http` exposes, said when its address is refused.
pub(crate) const HTTP_EXPOSED: &str = " (the HTTP pages describe the whole cluster)";

/// Why a master ([`crate::master::run_master`]) did not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum MasterError {
    /// `--max-connections` was given to the smol master.
    #[error(
        "--max-connections applies to --runtime std (the smol master is bounded by file \
         descriptors only)"
    )]
    MaxConnections,
    /// An address would be exposed beyond loopback without a cluster
    /// secret or `--insecure`.
    #[error("{flag}: {source}{why}")]
    Exposure {
        /// The option naming the address (`--listen`, `--http`, `--zk`).
        flag: &'static str,
        /// Why that exposure matters, or nothing.
        why: &'static str,
        /// The exposure rule's refusal.
        source: regent_std::net::NetError,
    },
    /// The master's listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for (`--listen`).
        addr: std::net::SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The HTTP server could not start.
    #[error(transparent)]
    Http(#[from] regent_std::http::HttpError),
    /// The store could not be opened (a missing secret, an unreadable or
    /// damaged directory).
    #[error(transparent)]
    Store(#[from] regent_std::store::StoreError),
    /// The node gave up (a single-master store failed).
    #[error("giving up leadership: {reason}")]
    Exit {
        /// The node's reason.
        reason: String,
    },
    /// The audit log could not be opened (`--audit-log`).
    #[error("cannot open the audit log: {0}")]
    Audit(#[source] std::io::Error),
    /// The loop's thread or its waker (an eventfd) could not be made
    /// (docs/design.md#issue-46).
    #[error("cannot start the master's loop: {0}")]
    Loop(#[source] std::io::Error),
}

into_report!(MasterError);

/// Why a worker ([`crate::worker::run_worker`]) did not start, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Preparing the host failed (its configuration, work directory, id
    /// file, cgroups, or the callback address it would listen on).
    #[error(transparent)]
    Host(#[from] regent_std::host::HostError),
    /// The callback listener could not listen.
    #[error(transparent)]
    Callback(#[from] crate::net::CallbackError),
    /// The node gave up (e.g. the masters refused it); the node's reason.
    #[error("{reason}")]
    Exit {
        /// The node's reason.
        reason: String,
    },
}

into_report!(WorkerError);
// The callback listener sits below this module (`net`), so its error
// converts here rather than there.
into_report!(crate::net::CallbackError);

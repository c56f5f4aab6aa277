//! The machines of `regent-core` driven on std threads and blocking sockets.
//!
//! Each pump has the shape of every regent runtime (docs/design.md#runtimes-only-pump):
//! one thread owns the machine; it waits on one channel with
//! `recv_timeout` until the earliest timer deadline; makes one `handle`
//! call per input (a frame, a deadline, an I/O completion or a command);
//! executes every action in order; recomputes the next deadline. Sockets,
//! dials, the store writer and executor supervision run on threads of their
//! own and report into that channel. No protocol decision lives here.
//!
//! * [`master`]: [`spawn_master`], recovery modes `none` and `filesystem`
//!   (group commit on the store's writer thread). ZooKeeper mode needs the
//!   async client and stays with the smol runtime; so does HTTP.
//! * [`worker`]: [`spawn_worker`], executors as real processes through
//!   [`crate::exec::Supervisor`].
//! * [`subscriber`]: [`spawn_subscriber`], an I/O pump for
//!   `regent_core::node::SubmitNode`: one framework with one executor
//!   group, its app-facing events on a channel and its outcome from
//!   [`subscriber::SubscriberHandle::wait`].

pub mod conn;
pub mod master;
pub mod subscriber;
pub mod worker;

pub use crate::config::{MasterConfig, Recovery};
pub use master::{spawn_master, MasterHandle};
pub use subscriber::{
    spawn_subscriber, spawn_subscriber_with_output, SubmitOutcome, SubscriberConfig,
    SubscriberHandle,
};
pub use worker::{spawn_worker, WorkerConfig, WorkerHandle};

use crate::net::{check_exposure, NetError};
use regent_core::Addr;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

pub use crate::clock::RuntimeClock;
pub use crate::host::wall_clock_ms;

/// Why a pump could not start, or how it ended when it stopped by itself.
#[derive(Debug, thiserror::Error)]
pub enum PumpError {
    /// The std runtime has no ZooKeeper client (it is async).
    #[error("{}", crate::config::ZOOKEEPER_NEEDS_SMOL)]
    ZookeeperNeedsSmol,
    /// The listen address is refused by the exposure rule.
    #[error("--listen: {0}")]
    ListenExposed(#[source] NetError),
    /// The HTTP address is refused by the exposure rule.
    #[error("--http: {0} (the HTTP pages describe the whole cluster)")]
    HttpExposed(#[source] NetError),
    /// `--max-connections` needs more file descriptors than the process may
    /// open.
    #[error(
        "--max-connections {max} needs {needed} file descriptors but this process may open \
         {limit} (raise `ulimit -n`, lower --max-connections, or use --runtime smol)"
    )]
    TooFewFiles {
        /// The connections asked for.
        max: usize,
        /// The descriptors they need.
        needed: usize,
        /// The process's limit.
        limit: usize,
    },
    /// `--max-connections` needs more threads than the machine allows.
    #[error(
        "--max-connections {max} needs {needed} threads (two per connection) but this machine \
         allows {limit} (threads-max, pid_max, `ulimit -u`); lower --max-connections or use \
         --runtime smol"
    )]
    TooFewThreads {
        /// The connections asked for.
        max: usize,
        /// The threads they need.
        needed: usize,
        /// The machine's limit.
        limit: usize,
    },
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The audit log could not be opened (`--audit-log`).
    #[error("cannot open the audit log: {0}")]
    Audit(#[source] std::io::Error),
    /// A thread of the pump could not be started.
    #[error("cannot start the {what} thread: {source}")]
    Thread {
        /// Which thread.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The HTTP face could not start.
    #[error(transparent)]
    Http(#[from] crate::http::HttpError),
    /// The host-side preparation failed (configured masters, work or state
    /// directory, id files).
    #[error(transparent)]
    Host(#[from] crate::host::HostError),
    /// A submission's options are invalid.
    #[error("{0}")]
    Options(&'static str),
    /// The pump's thread panicked.
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
    /// The pump stopped by itself, saying why (a master giving up its
    /// leadership, a worker told to stop).
    #[error("{reason}")]
    Ended {
        /// Which pump.
        pump: &'static str,
        /// Its reason.
        reason: String,
    },
}

crate::error::into_report!(PumpError);

impl From<PumpError> for regent_core::progress::SubmitError {
    /// A submission's pump failed: [`SubmitError::Runtime`], with the
    /// causes.
    ///
    /// [`SubmitError::Runtime`]: regent_core::progress::SubmitError::Runtime
    fn from(e: PumpError) -> Self {
        regent_core::progress::SubmitError::Runtime(crate::error::report(&e))
    }
}

/// Why dialling a master failed.
#[derive(Debug)]
struct DialError {
    reason: String,
    /// Every address it resolves to was refused by [`check_exposure`].
    refused: bool,
}

/// Dials `master` within `timeout` (resolution, then TCP connect to each
/// address in turn with the time left). With `strict`, one resolved address
/// refused by [`check_exposure`] refuses the master (the subscriber's rule);
/// otherwise refused addresses are skipped (the worker's rule).
fn dial(
    master: &Addr,
    has_secret: bool,
    insecure: bool,
    strict: bool,
    timeout: Duration,
) -> Result<TcpStream, DialError> {
    let deadline = Instant::now() + timeout;
    let addrs: Vec<SocketAddr> = master
        .as_str()
        .to_socket_addrs()
        .map_err(|e| DialError { reason: format!("cannot resolve {master}: {e}"), refused: false })?
        .collect();
    let mut err = DialError { reason: format!("{master} resolves to no address"), refused: false };
    if strict {
        for a in &addrs {
            check_exposure(a, has_secret, insecure).map_err(|e| DialError {
                reason: format!("master {master}: {e}"),
                refused: true,
            })?;
        }
    }
    let mut all_refused = !addrs.is_empty();
    for addr in addrs {
        if let Err(reason) = check_exposure(&addr, has_secret, insecure) {
            err.reason = reason.to_string();
            continue;
        }
        all_refused = false;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            err.reason = format!("connecting to {master} timed out after {timeout:?}");
            break;
        }
        match TcpStream::connect_timeout(&addr, left) {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => err.reason = format!("cannot connect to {addr}: {e}"),
        }
    }
    err.refused = all_refused;
    Err(err)
}

/// Runs [`dial`] on a thread of its own and hands the result to `done`.
/// `false` when no thread could be started (`done` is not called; the
/// caller feeds the machine a failed dial).
fn spawn_dial(
    master: Addr,
    has_secret: bool,
    insecure: bool,
    strict: bool,
    timeout: Duration,
    done: impl FnOnce(Addr, Result<TcpStream, DialError>) + Send + 'static,
) -> bool {
    let spawned = std::thread::Builder::new()
        .name("regent-dial".into())
        .stack_size(conn::CONN_STACK)
        .spawn(move || {
            let result = dial(&master, has_secret, insecure, strict, timeout);
            done(master, result);
        });
    match spawned {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!("cannot start a dial thread: {e}");
            false
        }
    }
}

/// Asks a running pump to stop, from any thread (a signal handler, a test).
/// Cheap to clone; stopping a pump that has stopped already does nothing.
#[derive(Clone)]
pub struct Stopper(std::sync::Arc<dyn Fn() + Send + Sync>);

impl Stopper {
    fn new(f: impl Fn() + Send + Sync + 'static) -> Self {
        Stopper(std::sync::Arc::new(f))
    }

    /// Requests the stop; returns at once.
    pub fn stop(&self) {
        (self.0)()
    }
}

impl std::fmt::Debug for Stopper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stopper")
    }
}

/// What every pump handle shares: the pump's thread and how to ask it to
/// stop. Dropping it stops the pump and waits for it.
#[derive(Debug)]
struct PumpThread<T, E = PumpError> {
    what: &'static str,
    stop: Stopper,
    thread: Option<std::thread::JoinHandle<Result<T, E>>>,
}

impl<T, E: From<PumpError>> PumpThread<T, E> {
    fn new(
        what: &'static str,
        stop: Stopper,
        thread: std::thread::JoinHandle<Result<T, E>>,
    ) -> Self {
        PumpThread { what, stop, thread: Some(thread) }
    }

    fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Waits for the pump's end; `None` when it was waited for already.
    fn join(&mut self) -> Option<Result<T, E>> {
        let t = self.thread.take()?;
        Some(t.join().unwrap_or_else(|_| Err(PumpError::Panicked(self.what).into())))
    }
}

impl<T, E> Drop for PumpThread<T, E> {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.stop();
            let _ = t.join();
        }
    }
}

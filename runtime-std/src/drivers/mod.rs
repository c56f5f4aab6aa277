//! The machines of `regent-core` driven on std threads and blocking sockets.
//!
//! Each driver has the shape of every regent runtime (DESIGN "Runtimes"):
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

use crate::net::check_exposure;
use regent_core::Addr;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

pub use crate::clock::RuntimeClock;
pub use crate::host::wall_clock_ms;

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
            err.reason = reason;
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
        .stack_size(crate::net::CONN_STACK)
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

/// Asks a running driver to stop, from any thread (a signal handler, a test).
/// Cheap to clone; stopping a driver that has stopped already does nothing.
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

/// What every driver handle shares: the driver's thread and how to ask it to
/// stop. Dropping it stops the driver and waits for it.
#[derive(Debug)]
struct DriverThread<T> {
    what: &'static str,
    stop: Stopper,
    thread: Option<std::thread::JoinHandle<Result<T, String>>>,
}

impl<T> DriverThread<T> {
    fn new(
        what: &'static str,
        stop: Stopper,
        thread: std::thread::JoinHandle<Result<T, String>>,
    ) -> Self {
        DriverThread { what, stop, thread: Some(thread) }
    }

    fn is_finished(&self) -> bool {
        self.thread.as_ref().map_or(true, |t| t.is_finished())
    }

    /// Waits for the driver's end; `None` when it was waited for already.
    fn join(&mut self) -> Option<Result<T, String>> {
        let t = self.thread.take()?;
        Some(t.join().unwrap_or_else(|_| Err(format!("the {} thread panicked", self.what))))
    }
}

impl<T> Drop for DriverThread<T> {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop.stop();
            let _ = self.join();
        }
    }
}

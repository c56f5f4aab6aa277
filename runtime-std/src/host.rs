//! Host helpers both runtimes' drivers share, outside any driver: the
//! worker's id file, the check of configured master addresses, what a
//! previous worker process left behind, and the log lines of the worker
//! node's notes and of executor launches. No protocol decision lives here.

use crate::exec::{Launched, LeftBehind, LeftBehindOutcome};
use crate::net::{check_exposure, random_u64};
use regent_core::node::worker::Note;
use regent_core::protocol::{ExecutorReport, ExecutorState};
use regent_core::{Addr, ExecutorId};
use std::fs;
use std::io::Write as _;
use std::net::ToSocketAddrs;
use std::path::Path;
use std::time::Duration;

/// The file in the work directory that keeps a generated worker id.
pub const ID_FILE: &str = "worker-id";

/// How long dialling one master may take (resolution and TCP connect).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long connections get to flush their last messages (executor reports)
/// when the worker stops.
pub const FLUSH_GRACE: Duration = Duration::from_millis(500);

/// The report of an executor a previous worker process left behind
/// (logged as a warning): `Killed`, not `Failed`, also for one that had
/// ended by itself, since its end is the worker's doing or unknown, not the
/// executor's fault, so it must not use the group's retry budget.
pub fn left_behind_report(lb: LeftBehind) -> ExecutorReport {
    let what = match lb.outcome {
        LeftBehindOutcome::Killed => "killed an executor a previous worker process left running",
        LeftBehindOutcome::AlreadyGone => {
            "an executor of a previous worker process had ended; its exit status is unknown"
        }
    };
    tracing::warn!(executor = %lb.executor, pgid = lb.pgid, "{what}");
    ExecutorReport {
        id: lb.executor,
        framework: lb.framework,
        cores: 0,
        memory_mb: 0,
        state: ExecutorState::Killed,
    }
}

/// Logs how a launch went (`Running` or `Failed` itself comes back through
/// the supervisor's sink).
pub fn log_launched(executor: &ExecutorId, launched: Launched) {
    match launched {
        Launched::Started { pid } => tracing::debug!(%executor, pid, "executor started"),
        Launched::Failed { reason } => {
            tracing::warn!(%executor, %reason, "executor launch failed")
        }
        Launched::AlreadyRunning => {
            tracing::warn!(%executor, "executor already runs; launch ignored")
        }
    }
}

/// Logs a worker node's [`Note`]: connections, dial failures (the first in
/// a row at info, later ones at debug, an exposure refusal once as a
/// warning), closes, the followed master and registration.
pub fn log_worker_note(note: &Note) {
    match note {
        Note::Connected { master, conn } => tracing::info!(%master, %conn, "connected to master"),
        Note::DialFailed { master, reason, first, refused_first } => {
            if *first {
                tracing::info!(%master, %reason, "cannot connect to master");
            } else {
                tracing::debug!(%master, %reason, "cannot connect to master");
            }
            if *refused_first {
                tracing::warn!(%master, %reason, "master refused by the exposure check");
            }
        }
        Note::Disconnected { master, reason } => {
            tracing::info!(%master, %reason, "disconnected from master")
        }
        Note::Closing { master, reason } => {
            tracing::info!(%master, %reason, "closing the connection to master")
        }
        Note::Status(st) => match (&st.active, st.registered) {
            (Some(m), true) => {
                tracing::info!(master = %m, epoch = st.max_epoch.0, "registered with master")
            }
            (Some(m), false) => {
                tracing::info!(master = %m, epoch = st.max_epoch.0, "following master; registering")
            }
            (None, _) => tracing::info!("no master followed"),
        },
        Note::NotStarting { executor } => {
            tracing::warn!(%executor, "not starting an executor: the worker is shutting down")
        }
    }
}

/// Checks the configured masters before anything starts: each must be
/// `host:port`, and none may resolve to a non-loopback address without a
/// secret unless `insecure`. A name that does not resolve yet is warned
/// about only.
pub fn check_masters(masters: &[Addr], has_secret: bool, insecure: bool) -> Result<(), String> {
    if masters.is_empty() {
        return Err("no master address given".to_owned());
    }
    for m in masters {
        let ok = m
            .as_str()
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !ok {
            return Err(format!("master address {m:?} is not host:port"));
        }
        match m.as_str().to_socket_addrs() {
            Ok(addrs) => {
                for a in addrs {
                    check_exposure(&a, has_secret, insecure)
                        .map_err(|e| format!("master {m}: {e}"))?;
                }
            }
            Err(e) => {
                tracing::warn!(master = %m, error = %e, "cannot resolve master yet; will keep trying")
            }
        }
    }
    Ok(())
}

/// The id kept in `<work_dir>/worker-id`, or a new one (`worker-<host>-<hex>`)
/// written there durably (temp file, fsync, rename, directory fsync).
pub fn load_or_create_id(work_dir: &Path) -> Result<String, String> {
    let path = work_dir.join(ID_FILE);
    match fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => return Ok(s.trim().to_owned()),
        Ok(_) => {
            tracing::warn!(path = %path.display(), "empty worker id file; generating a new id")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot read the worker id from {}: {e}", path.display())),
    }
    let id = generate_id();
    let tmp = work_dir.join(format!("{ID_FILE}.tmp"));
    (|| {
        let mut f = fs::File::create(&tmp)?;
        writeln!(f, "{id}")?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        fs::File::open(work_dir)?.sync_all()
    })()
    .map_err(|e| format!("cannot store the worker id in {}: {e}", path.display()))?;
    tracing::info!(worker = %id, path = %path.display(), "generated the worker id");
    Ok(id)
}

/// `worker-<hostname>-<random hex>`: readable, and unique even for two
/// workers on one host.
fn generate_id() -> String {
    let host: String = fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| fs::read_to_string("/etc/hostname"))
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
        .collect();
    let suffix = format!("{:08x}", random_u64() as u32);
    if host.is_empty() {
        format!("worker-{suffix}")
    } else {
        format!("worker-{host}-{suffix}")
    }
}

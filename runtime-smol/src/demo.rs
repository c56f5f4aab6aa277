//! `regent demo`: the main job, in one process.
//!
//! A master with the filesystem store in a temporary directory, three
//! workers and an application of three executors. While the executors run,
//! the master is stopped and started again over the same store and port; the
//! demo prints what happened and how long recovery took, checks that every
//! worker registered again exactly once and that the application completed,
//! and ends by itself.

use crate::master::{MasterConfig, Recovery};
use crate::net::NetConfig;
use crate::submit::{SubmitOptions, SubmitOutcome};
use crate::worker::WorkerOptions;
use regent_core::protocol::{ClusterState, ExecutorState};
use regent_core::states::{MasterStatus, WorkerState};
use regent_core::Addr;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A free loopback port (bound, then released).
fn free_port() -> Result<SocketAddr, DemoError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(DemoError::FreePort)?;
    l.local_addr().map_err(DemoError::FreePort)
}

/// Why the demo did not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The temporary directory for the store and the workers.
    #[error("cannot make a temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
    /// No loopback port could be bound for the master.
    #[error("demo: cannot find a free loopback port: {0}")]
    FreePort(#[source] std::io::Error),
    /// The cluster did not reach a state in time.
    #[error("demo: gave up waiting for {what} after {after:?}")]
    Waited {
        /// The state waited for (`three ALIVE workers`).
        what: String,
        /// How long.
        after: Duration,
    },
    /// A master stopped with an error.
    #[error("demo: the master failed: {0}")]
    Master(#[source] crate::error::MasterError),
    /// A worker stopped with an error.
    #[error("demo: a worker failed: {0}")]
    Worker(#[source] crate::error::WorkerError),
    /// After the restart a worker was registered twice or not at all.
    #[error("demo: expected each worker registered exactly once, saw {workers:?}")]
    Registrations {
        /// The workers the restarted master shows.
        workers: Vec<regent_core::protocol::WorkerView>,
    },
    /// The application ran past its minute.
    #[error("demo: the application did not finish within 60 s")]
    AppTimedOut,
    /// The application's submission failed.
    #[error(transparent)]
    App(#[from] crate::submit::RunError),
    /// The application ended without success.
    #[error("demo: the application did not succeed: {outcome:?}")]
    AppFailed {
        /// How it ended.
        outcome: SubmitOutcome,
    },
}

crate::error::into_report!(DemoError);

fn master_options(listen: SocketAddr, store: &Path, net: Arc<NetConfig>) -> MasterConfig {
    let mut cfg = MasterConfig::new("demo-master", listen, net);
    cfg.recovery = Recovery::Filesystem { dir: store.to_path_buf() };
    cfg.heartbeat_interval = Duration::from_millis(500);
    cfg
}

/// Polls the master until `pred` holds, for at most `limit`.
async fn wait_for(
    masters: &[Addr],
    net: &Arc<NetConfig>,
    limit: Duration,
    what: &str,
    pred: impl Fn(&ClusterState) -> bool,
) -> Result<ClusterState, DemoError> {
    let start = Instant::now();
    loop {
        if let Ok(s) = crate::client::fetch_state(masters, net.clone(), true).await {
            if pred(&s) {
                return Ok(s);
            }
        }
        if start.elapsed() > limit {
            return Err(DemoError::Waited { what: what.to_string(), after: limit });
        }
        async_io::Timer::after(Duration::from_millis(20)).await;
    }
}

fn alive_workers(s: &ClusterState) -> usize {
    s.workers.iter().filter(|w| w.state == WorkerState::Alive).count()
}

/// Runs the demo; `Err` names what did not happen. The workers run their
/// executors under `executor_shim` (the `regent` binary; `None`: directly).
pub async fn run_demo(executor_shim: Option<std::path::PathBuf>) -> Result<(), DemoError> {
    let dir = tempfile::tempdir().map_err(DemoError::TempDir)?;
    let store = dir.path().join("store");
    let listen = free_port()?;
    let masters = vec![Addr(listen.to_string())];
    let net = Arc::new(NetConfig::new("demo", None));
    println!("regent demo: master on {listen}, store in {}", store.display());

    let (stop_master, master_shutdown) = async_channel::bounded::<()>(1);
    let master = smol::spawn(crate::master::run_master(
        master_options(listen, &store, net.clone()),
        master_shutdown,
    ));
    let (stop_workers, workers_shutdown) = async_channel::bounded::<()>(1);
    let mut workers = Vec::new();
    for i in 1..=3 {
        let opts = WorkerOptions {
            resources: Default::default(),
            gc: Default::default(),
            isolation: Default::default(),
            executor_logs: Default::default(),
            executor_user: None,
            allowed_users: Vec::new(),
            cluster: "demo".into(),
            masters: masters.clone(),
            cores: 2,
            memory_mb: 1024,
            work_dir: dir.path().join(format!("worker-{i}")),
            id: Some(format!("worker-{i}")),
            net: net.clone(),
            insecure: false,
            listen: None,
            advertise: None,
            kill_left_behind: false,
            artifact_cache_bytes: regent_std::exec::artifacts::DEFAULT_CACHE_BYTES,
            ports: Vec::new(),
            host: None,
            attributes: Vec::new(),
            executor_shim: executor_shim.clone(),
        };
        workers.push(smol::spawn(crate::worker::run_worker(opts, workers_shutdown.clone())));
    }
    let t0 = Instant::now();
    let s = wait_for(&masters, &net, Duration::from_secs(20), "three ALIVE workers", |s| {
        alive_workers(s) == 3
    })
    .await?;
    println!(
        "[{:>6} ms] master {} at {}; 3 workers registered",
        t0.elapsed().as_millis(),
        s.status,
        s.epoch
    );

    let submit = SubmitOptions {
        update: Default::default(),
        keep: false,
        tenant: None,
        cluster: "demo".into(),
        masters: masters.clone(),
        name: "demo-app".into(),
        framework_id: Some("demo-app".into()),
        failover_timeout: Duration::from_secs(60),
        executors: 3,
        cores: 1,
        memory_mb: 64,
        command: vec!["sh".into(), "-c".into(), "sleep 3; echo finished".into()],
        env: vec![],
        policy: Default::default(),
        net: net.clone(),
        insecure: false,
        connect_timeout: None,
        callback: None,
        state_dir: None,
        launch: Default::default(),
    };
    let (_stop_submit, submit_shutdown) = async_channel::bounded::<()>(1);
    let app = smol::spawn(crate::submit::run_submit(submit, std::io::sink(), submit_shutdown));
    wait_for(&masters, &net, Duration::from_secs(20), "three RUNNING executors", |s| {
        s.executors.iter().filter(|e| e.state == ExecutorState::Running).count() == 3
    })
    .await?;
    println!("[{:>6} ms] application submitted; 3 executors RUNNING", t0.elapsed().as_millis());

    // The master goes away while the executors run...
    stop_master.close();
    master.await.map_err(DemoError::Master)?;
    println!(
        "[{:>6} ms] master stopped; executors keep running on the workers",
        t0.elapsed().as_millis()
    );
    async_io::Timer::after(Duration::from_millis(300)).await;

    // ...and comes back over the same store.
    let restarted = Instant::now();
    let (stop_master, master_shutdown) = async_channel::bounded::<()>(1);
    let master = smol::spawn(crate::master::run_master(
        master_options(listen, &store, net.clone()),
        master_shutdown,
    ));
    let s =
        wait_for(&masters, &net, Duration::from_secs(30), "recovery with all workers back", |s| {
            s.status == MasterStatus::Alive && alive_workers(s) == 3
        })
        .await?;
    let recovery = restarted.elapsed();
    println!(
        "[{:>6} ms] master restarted at {}; ALIVE with all 3 workers re-registered after {} ms",
        t0.elapsed().as_millis(),
        s.epoch,
        recovery.as_millis()
    );
    if s.workers.len() != 3 {
        return Err(DemoError::Registrations { workers: s.workers });
    }
    let running = s.executors.iter().filter(|e| e.state == ExecutorState::Running).count();
    println!(
        "[{:>6} ms] {running} executors still RUNNING after the failover",
        t0.elapsed().as_millis()
    );

    let outcome = smol::future::or(async { Some(app.await) }, async {
        async_io::Timer::after(Duration::from_secs(60)).await;
        None
    })
    .await
    .ok_or(DemoError::AppTimedOut)??;
    if !matches!(outcome, SubmitOutcome::Succeeded) {
        return Err(DemoError::AppFailed { outcome });
    }
    println!("[{:>6} ms] application completed: every executor exited 0", t0.elapsed().as_millis());

    stop_workers.close();
    for w in workers {
        w.await.map_err(DemoError::Worker)?;
    }
    stop_master.close();
    master.await.map_err(DemoError::Master)?;
    println!(
        "summary: master recovery (restart to ALIVE with every worker) took {} ms",
        recovery.as_millis()
    );
    Ok(())
}

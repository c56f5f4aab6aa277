//! The std pumps together in one process: a master, workers and a
//! subscriber on loopback (free ports, temp dirs, bounded waits).

use regent_core::states::{MasterStatus, WorkerState};
use regent_core::subscriber::Action;
use regent_core::Addr;
use regent_std::net::NetConfig;
use regent_std::pumps::{
    spawn_master, spawn_subscriber, spawn_worker, MasterConfig, MasterHandle, Recovery,
    SubmitOutcome, SubscriberConfig, WorkerConfig, WorkerHandle,
};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Generous bound for anything to happen (never a timing assertion).
const BOUND: Duration = Duration::from_secs(30);

fn net() -> Arc<NetConfig> {
    Arc::new(NetConfig::new("regent", None))
}

fn master(recovery: Recovery, listen: &str) -> MasterHandle {
    let mut cfg = MasterConfig::new("m1", listen.parse().unwrap(), net());
    cfg.recovery = recovery;
    cfg.heartbeat_interval = Duration::from_millis(200);
    cfg.worker_timeout = Duration::from_secs(5);
    spawn_master(cfg).expect("master starts")
}

fn worker(master: &str, dir: &Path, id: &str) -> WorkerHandle {
    spawn_worker(WorkerConfig {
        resources: Default::default(),
        gc: Default::default(),
        isolation: Default::default(),
        executor_logs: Default::default(),
        executor_user: None,
        allowed_users: Vec::new(),
        cluster: "regent".into(),
        masters: vec![Addr::new(master)],
        cores: 4,
        memory_mb: 1024,
        work_dir: dir.join(id),
        id: Some(id.into()),
        net: net(),
        insecure: false,
        listen: None,
        advertise: None,
        kill_left_behind: false,
        artifact_cache_bytes: regent_std::exec::artifacts::DEFAULT_CACHE_BYTES,
        ports: Vec::new(),
        host: None,
        attributes: Vec::new(),
        // regent-std's tests have no `regent` binary: commands run directly.
        executor_shim: None,
    })
    .expect("worker starts")
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !f() {
        assert!(Instant::now() < deadline, "not within {BOUND:?}: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn alive_workers(m: &MasterHandle) -> Vec<String> {
    m.state()
        .map(|s| {
            s.workers
                .iter()
                .filter(|w| w.state == WorkerState::Alive)
                .map(|w| w.id.to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_application_completes_on_std_pumps() {
    let dir = tempfile::tempdir().unwrap();
    let m = master(Recovery::None, "127.0.0.1:0");
    let addr = m.addr().to_string();
    let w1 = worker(&addr, dir.path(), "w1");
    let w2 = worker(&addr, dir.path(), "w2");
    eventually("both workers registered", || w1.status().registered && w2.status().registered);
    eventually("both workers ALIVE at the master", || alive_workers(&m).len() == 2);

    let sub = spawn_subscriber(SubscriberConfig {
        update: Default::default(),
        keep: false,
        tenant: None,
        cluster: "regent".into(),
        masters: vec![Addr::new(&addr)],
        name: "app".into(),
        framework_id: None,
        failover_timeout: Duration::from_secs(30),
        executors: 3,
        cores: 1,
        memory_mb: 64,
        command: vec!["sh".into(), "-c".into(), "exit 0".into()],
        env: vec![],
        policy: Default::default(),
        net: net(),
        insecure: false,
        connect_timeout: None,
        callback: None,
        state_dir: None,
        launch: Default::default(),
    })
    .unwrap();
    let events: Vec<Action> = sub.events().iter().collect();
    assert_eq!(sub.wait(), Ok(SubmitOutcome::Succeeded));
    assert!(events.iter().any(|a| matches!(a, Action::Subscribed { .. })), "{events:?}");
    let exited = events
        .iter()
        .filter(|a| {
            matches!(a, Action::ExecutorUpdate(i)
                if i.state == regent_core::protocol::ExecutorState::Exited { code: 0 })
        })
        .count();
    assert!(exited >= 3, "{events:?}");

    assert_eq!(w1.shutdown().map_err(|e| e.to_string()), Ok(()));
    assert_eq!(w2.shutdown().map_err(|e| e.to_string()), Ok(()));
    assert_eq!(m.shutdown().map_err(|e| e.to_string()), Ok(()));
}

#[test]
fn a_filesystem_master_restart_keeps_each_worker_registered_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let m = master(Recovery::Filesystem { dir: store.clone() }, "127.0.0.1:0");
    let listen = m.addr().to_string();
    let ws: Vec<WorkerHandle> =
        ["w1", "w2", "w3"].iter().map(|id| worker(&listen, dir.path(), id)).collect();
    eventually("three workers ALIVE", || alive_workers(&m).len() == 3);
    let epoch = m.state().unwrap().epoch;

    // Stop and restart on the same port with the same store (the lock is
    // released by the shutdown).
    assert_eq!(m.shutdown().map_err(|e| e.to_string()), Ok(()));
    let m = master(Recovery::Filesystem { dir: store }, &listen);
    eventually("the three workers ALIVE again, each once", || {
        let Some(s) = m.state() else { return false };
        let ids: Vec<String> = s.workers.iter().map(|w| w.id.to_string()).collect();
        s.status == MasterStatus::Alive
            && ids == ["w1", "w2", "w3"]
            && s.workers.iter().all(|w| w.state == WorkerState::Alive)
    });
    assert!(m.state().unwrap().epoch > epoch, "a restart moves the epoch forward");
    for w in &ws {
        assert!(w.status().registered, "{} registered", w.id());
        assert!(!w.status().exited);
    }
    for w in ws {
        assert_eq!(w.shutdown().map_err(|e| e.to_string()), Ok(()));
    }
    assert_eq!(m.shutdown().map_err(|e| e.to_string()), Ok(()));
}

#[test]
fn a_second_master_on_the_same_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let m = master(Recovery::Filesystem { dir: store.clone() }, "127.0.0.1:0");
    let mut cfg = MasterConfig::new("m2", "127.0.0.1:0".parse().unwrap(), net());
    cfg.recovery = Recovery::Filesystem { dir: store };
    let err = spawn_master(cfg).expect_err("the store is locked").to_string();
    assert!(!err.is_empty());
    drop(m);
}

#[test]
fn an_exposed_listen_address_is_refused_without_a_secret() {
    let cfg = MasterConfig::new("m1", "0.0.0.0:0".parse().unwrap(), net());
    let err = spawn_master(cfg).expect_err("refused").to_string();
    assert!(err.contains("--secret-file"), "{err}");
}

#[test]
fn an_interrupted_submission_leaves_its_executor_until_the_worker_shuts_down() {
    let dir = tempfile::tempdir().unwrap();
    let m = master(Recovery::None, "127.0.0.1:0");
    let addr = m.addr().to_string();
    let w = worker(&addr, dir.path(), "w1");
    eventually("the worker ALIVE", || alive_workers(&m).len() == 1);
    let sub = spawn_subscriber(SubscriberConfig {
        update: Default::default(),
        keep: false,
        tenant: None,
        cluster: "regent".into(),
        masters: vec![Addr::new(&addr)],
        name: "app".into(),
        framework_id: Some("fw-interrupt".into()),
        failover_timeout: Duration::from_secs(30),
        executors: 1,
        cores: 1,
        memory_mb: 64,
        command: vec!["sleep".into(), "30".into()],
        env: vec![],
        policy: Default::default(),
        net: net(),
        insecure: false,
        connect_timeout: None,
        callback: None,
        state_dir: None,
        launch: Default::default(),
    })
    .unwrap();
    let running = |a: &Action| {
        matches!(a, Action::ExecutorUpdate(i)
            if i.state == regent_core::protocol::ExecutorState::Running)
    };
    let deadline = Instant::now() + BOUND;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let a = sub.events().recv_timeout(left).expect("the executor RUNNING");
        if running(&a) {
            break;
        }
    }
    sub.interrupt();
    assert_eq!(sub.wait(), Ok(SubmitOutcome::Interrupted));
    let executor_state = || m.state().unwrap().executors.first().map(|e| e.state.clone());
    assert_eq!(
        executor_state(),
        Some(regent_core::protocol::ExecutorState::Running),
        "the framework is left in place"
    );
    assert_eq!(w.shutdown().map_err(|e| e.to_string()), Ok(()));
    eventually("the executor reported KILLED", || {
        executor_state() == Some(regent_core::protocol::ExecutorState::Killed)
    });
    assert_eq!(m.shutdown().map_err(|e| e.to_string()), Ok(()));
}

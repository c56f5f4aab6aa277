//! The worker daemon ([`regent_smol::worker::run_worker`]) against a fake
//! master on loopback: registration, executor reports, the id file,
//! shutdown, exit on a master's `Shutdown`, left-behind executors, and the
//! exposure check.

use async_channel::{Receiver, Sender};
use regent_core::auth::Side;
use regent_core::protocol::{
    ExecutorSpec, ExecutorState, HelloReply, LeaderHint, Message, RegisterWorker, Role,
};
use regent_core::{Addr, ConnId, Epoch, ExecutorId, FrameworkId, MasterId, Millis};
use regent_smol::error::WorkerError;
use regent_smol::net::{spawn_connection, NetConfig, NetEvent};
use regent_smol::worker::{run_worker, WorkerOptions, ID_FILE};
use smol::net::TcpListener;
use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLUSTER: &str = "test-cluster";
const EPOCH: Epoch = Epoch(7);
/// Generous bound for anything to happen (never a timing assertion).
const BOUND: Duration = Duration::from_secs(10);

/// What the fake master does besides answering Hello, RegisterWorker and
/// heartbeats.
#[derive(Clone, Default)]
struct Script {
    /// Sent once, after the first `Registered`.
    launch: Option<Vec<String>>,
    /// Answer the first `Running` report with `Shutdown` naming this.
    shutdown_on_running: Option<String>,
}

struct FakeMaster {
    addr: Addr,
    /// Every message a worker sent, in order.
    seen: Receiver<Message>,
    _task: smol::Task<()>,
}

async fn fake_master(script: Script) -> FakeMaster {
    fake_master_at("127.0.0.1:0", script).await
}

async fn fake_master_at(bind: &str, script: Script) -> FakeMaster {
    let listener = TcpListener::bind(bind).await.expect("bind loopback");
    let addr = Addr::new(listener.local_addr().expect("local addr").to_string());
    let (seen_tx, seen) = async_channel::unbounded();
    let task = smol::spawn(serve(listener, addr.clone(), script, seen_tx));
    FakeMaster { addr, seen, _task: task }
}

async fn serve(listener: TcpListener, me: Addr, script: Script, seen: Sender<Message>) {
    enum Wake {
        Accepted(smol::net::TcpStream),
        Net(NetEvent),
    }
    let cfg = Arc::new(NetConfig::new(CLUSTER, None));
    let (ev_tx, ev_rx) = async_channel::unbounded();
    let mut conns = HashMap::new();
    let mut next = 0;
    let mut launched = false;
    let mut shut = false;
    loop {
        let wake = smol::future::or(
            async { Wake::Accepted(listener.accept().await.expect("accept").0) },
            async { Wake::Net(ev_rx.recv().await.expect("sender held")) },
        )
        .await;
        match wake {
            Wake::Accepted(stream) => {
                next += 1;
                let h = spawn_connection(
                    stream,
                    Side::Server,
                    ConnId(next),
                    cfg.clone(),
                    ev_tx.clone(),
                );
                conns.insert(ConnId(next), h);
            }
            Wake::Net(NetEvent::Closed { conn, .. }) => {
                conns.remove(&conn);
            }
            // The fake master's peers prove the secret, never a token.
            Wake::Net(NetEvent::Authenticated { .. }) => {}
            Wake::Net(NetEvent::Message { conn, msg }) => {
                let Some(h) = conns.get(&conn) else { continue };
                match &msg {
                    Message::Hello(_) => h.send(Message::HelloReply(HelloReply {
                        role: Role::Master,
                        master: MasterId::new("m1"),
                        leading: true,
                        epoch: EPOCH,
                        leader: Some(LeaderHint {
                            id: MasterId::new("m1"),
                            addr: me.clone(),
                            epoch: EPOCH,
                        }),
                        masters: vec![me.clone()],
                    })),
                    Message::RegisterWorker(_) => {
                        h.send(Message::Registered {
                            epoch: EPOCH,
                            heartbeat_interval: Millis(100),
                            duplicate: false,
                            masters: vec![me.clone()],
                        });
                        if let (Some(command), false) = (&script.launch, launched) {
                            launched = true;
                            h.send(Message::LaunchExecutor {
                                epoch: EPOCH,
                                executor: ExecutorId::new("e1"),
                                framework: FrameworkId::new("f1"),
                                spec: ExecutorSpec {
                                    command: command.clone(),
                                    env: vec![],
                                    cores: 1,
                                    memory_mb: 64,
                                    launch: Default::default(),
                                },
                                launch: 1,
                            });
                        }
                    }
                    Message::WorkerHeartbeat { .. } => {
                        h.send(Message::HeartbeatAck { epoch: EPOCH })
                    }
                    Message::ExecutorStatus { report, .. } => {
                        if report.state.is_terminal() {
                            h.send(Message::ExecutorStatusAck {
                                epoch: EPOCH,
                                executor: report.id.clone(),
                            });
                        }
                        if let (ExecutorState::Running, Some(reason), false) =
                            (&report.state, &script.shutdown_on_running, shut)
                        {
                            shut = true;
                            h.send(Message::Shutdown { epoch: EPOCH, reason: reason.clone() });
                        }
                    }
                    _ => {}
                }
                let _ = seen.send(msg).await;
            }
        }
    }
}

/// `fut`, or a failed test after [`BOUND`].
async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    smol::future::or(fut, async {
        async_io::Timer::after(BOUND).await;
        panic!("timed out after {BOUND:?} waiting for {what}");
    })
    .await
}

/// The next message matching `pred`; everything before it is appended to
/// `log`.
async fn wait_msg(
    rx: &Receiver<Message>,
    log: &mut Vec<Message>,
    what: &str,
    mut pred: impl FnMut(&Message) -> bool,
) -> Message {
    within(what, async {
        loop {
            let msg = rx.recv().await.expect("fake master runs");
            if pred(&msg) {
                log.push(msg.clone());
                return msg;
            }
            log.push(msg);
        }
    })
    .await
}

fn status_of(msg: &Message, id: &str) -> Option<ExecutorState> {
    match msg {
        Message::ExecutorStatus { report, .. } if report.id.as_str() == id => {
            Some(report.state.clone())
        }
        _ => None,
    }
}

fn registration(msg: &Message) -> Option<&RegisterWorker> {
    match msg {
        Message::RegisterWorker(r) => Some(r),
        _ => None,
    }
}

fn options(master: &Addr, work_dir: &Path) -> WorkerOptions {
    WorkerOptions {
        resources: Default::default(),
        gc: Default::default(),
        isolation: Default::default(),
        executor_logs: Default::default(),
        executor_user: None,
        allowed_users: Vec::new(),
        cluster: CLUSTER.to_owned(),
        masters: vec![master.clone()],
        cores: 2,
        memory_mb: 1024,
        work_dir: work_dir.to_owned(),
        id: None,
        net: Arc::new(NetConfig::new(CLUSTER, None)),
        insecure: false,
        listen: None,
        advertise: None,
        kill_left_behind: false,
        artifact_cache_bytes: regent_std::exec::artifacts::DEFAULT_CACHE_BYTES,
        ports: Vec::new(),
        host: None,
        attributes: Vec::new(),
        executor_shim: Some(env!("CARGO_BIN_EXE_regent").into()),
    }
}

/// A running worker and the sender of its shutdown signal.
struct Running {
    stop: Sender<()>,
    task: smol::Task<Result<(), String>>,
}

fn start(opts: WorkerOptions) -> Running {
    let (stop, rx) = async_channel::bounded(1);
    Running {
        stop,
        task: smol::spawn(async { run_worker(opts, rx).await.map_err(|e| e.to_string()) }),
    }
}

impl Running {
    async fn shutdown(self) -> Result<(), String> {
        self.stop.send(()).await.expect("the worker listens");
        within("the worker to stop", self.task).await
    }
}

fn records_left(work_dir: &Path) -> Vec<String> {
    std::fs::read_dir(work_dir.join(regent_std::exec::RUNNING_DIR))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into()).collect())
        .unwrap_or_default()
}

#[test]
fn registers_once_and_reports_executor_exit() {
    smol::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let master = fake_master(Script {
            launch: Some(vec!["sh".into(), "-c".into(), "echo hi; exit 3".into()]),
            ..Script::default()
        })
        .await;
        let worker = start(options(&master.addr, dir.path()));
        let mut log = Vec::new();

        let reg =
            wait_msg(&master.seen, &mut log, "RegisterWorker", |m| registration(m).is_some()).await;
        let reg = registration(&reg).unwrap();
        assert_eq!((reg.cores, reg.memory_mb), (2, 1024));
        assert!(reg.executors.is_empty(), "{reg:?}");

        wait_msg(&master.seen, &mut log, "Running", |m| {
            status_of(m, "e1") == Some(ExecutorState::Running)
        })
        .await;
        wait_msg(&master.seen, &mut log, "Exited { code: 3 }", |m| {
            status_of(m, "e1").is_some_and(|s| s.is_terminal())
        })
        .await;
        let states: Vec<ExecutorState> = log.iter().filter_map(|m| status_of(m, "e1")).collect();
        assert_eq!(states, vec![ExecutorState::Running, ExecutorState::Exited { code: 3 }]);
        let out = std::fs::read_to_string(dir.path().join("executors/e1/stdout")).unwrap();
        assert_eq!(out, "hi\n");

        // Let a few heartbeats go by: still one registration.
        let mut beats = 0;
        while beats < 3 {
            wait_msg(&master.seen, &mut log, "heartbeats", |m| {
                matches!(m, Message::WorkerHeartbeat { .. })
            })
            .await;
            beats += 1;
        }
        let regs = log.iter().filter(|m| registration(m).is_some()).count();
        assert_eq!(regs, 1, "{log:?}");

        assert_eq!(worker.shutdown().await, Ok(()));
    });
}

#[test]
fn generated_id_is_kept_across_restarts() {
    smol::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let master = fake_master(Script::default()).await;
        let mut log = Vec::new();

        let worker = start(options(&master.addr, dir.path()));
        let first =
            wait_msg(&master.seen, &mut log, "first registration", |m| registration(m).is_some())
                .await;
        let first = registration(&first).unwrap().clone();
        let stored = std::fs::read_to_string(dir.path().join(ID_FILE)).unwrap();
        assert_eq!(stored.trim(), first.worker.as_str());
        assert!(first.worker.as_str().starts_with("worker-"), "{}", first.worker);
        assert_eq!(worker.shutdown().await, Ok(()));

        let worker = start(options(&master.addr, dir.path()));
        let second = wait_msg(&master.seen, &mut log, "second registration", |m| {
            registration(m).is_some_and(|r| r.incarnation != first.incarnation)
        })
        .await;
        let second = registration(&second).unwrap();
        assert_eq!(second.worker, first.worker);
        assert_eq!(std::fs::read_to_string(dir.path().join(ID_FILE)).unwrap(), stored);
        assert_eq!(worker.shutdown().await, Ok(()));
    });
}

#[test]
fn explicit_id_is_used_and_not_stored() {
    smol::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let master = fake_master(Script::default()).await;
        let mut log = Vec::new();
        let mut opts = options(&master.addr, dir.path());
        opts.id = Some("w-explicit".into());
        let worker = start(opts);
        let reg =
            wait_msg(&master.seen, &mut log, "registration", |m| registration(m).is_some()).await;
        assert_eq!(registration(&reg).unwrap().worker.as_str(), "w-explicit");
        assert!(!dir.path().join(ID_FILE).exists());
        assert_eq!(worker.shutdown().await, Ok(()));
    });
}

#[test]
fn shutdown_kills_running_executor_and_reports_killed() {
    smol::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let master = fake_master(Script {
            launch: Some(vec!["sleep".into(), "30".into()]),
            ..Script::default()
        })
        .await;
        let worker = start(options(&master.addr, dir.path()));
        let mut log = Vec::new();
        wait_msg(&master.seen, &mut log, "Running", |m| {
            status_of(m, "e1") == Some(ExecutorState::Running)
        })
        .await;
        assert_eq!(records_left(dir.path()).len(), 1);

        let started = Instant::now();
        assert_eq!(worker.shutdown().await, Ok(()));
        wait_msg(&master.seen, &mut log, "Killed", |m| {
            status_of(m, "e1") == Some(ExecutorState::Killed)
        })
        .await;
        assert!(started.elapsed() < BOUND);
        assert!(records_left(dir.path()).is_empty(), "{:?}", records_left(dir.path()));
    });
}

#[test]
fn closing_the_shutdown_channel_stops_every_worker_sharing_it() {
    smol::block_on(async {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let master = fake_master(Script::default()).await;
        let (stop, rx) = async_channel::bounded::<()>(1);
        let workers: Vec<_> = dirs
            .iter()
            .map(|d| smol::spawn(run_worker(options(&master.addr, d.path()), rx.clone())))
            .collect();
        let mut log = Vec::new();
        let mut ids = std::collections::HashSet::new();
        while ids.len() < 2 {
            let reg =
                wait_msg(&master.seen, &mut log, "registrations", |m| registration(m).is_some())
                    .await;
            ids.insert(registration(&reg).unwrap().worker.clone());
        }
        stop.close();
        for w in workers {
            assert_eq!(within("a worker to stop", w).await.map_err(|e| e.to_string()), Ok(()));
        }
    });
}

#[test]
fn master_shutdown_makes_worker_exit_naming_the_reason() {
    smol::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let master = fake_master(Script {
            launch: Some(vec!["sleep".into(), "30".into()]),
            shutdown_on_running: Some("worker id w1 is taken by another incarnation".into()),
        })
        .await;
        let (stop, rx) = async_channel::bounded(1);
        let result =
            within("the worker to exit", run_worker(options(&master.addr, dir.path()), rx)).await;
        drop(stop);
        let err = result.expect_err("the worker exits with an error");
        assert!(matches!(err, WorkerError::Exit { .. }), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("worker id w1 is taken by another incarnation"), "{err}");
        // The executor was killed before the worker returned.
        assert!(records_left(dir.path()).is_empty(), "{:?}", records_left(dir.path()));
    });
}

/// A worker process dies without a shutdown (as with kill -9) while its
/// executor runs; a new one over the same work directory re-adopts it and
/// reports it `Running` in its registration — or, with
/// `kill_left_behind`, kills it and reports it `Killed`.
async fn restart_with_an_executor_left_behind(kill_left_behind: bool) {
    let dir = tempfile::tempdir().unwrap();
    let master = fake_master(Script {
        launch: Some(vec!["sleep".into(), "30".into()]),
        ..Script::default()
    })
    .await;
    let mut log = Vec::new();
    let worker = start(options(&master.addr, dir.path()));
    let first =
        wait_msg(&master.seen, &mut log, "registration", |m| registration(m).is_some()).await;
    let first = registration(&first).unwrap().clone();
    wait_msg(&master.seen, &mut log, "Running", |m| {
        status_of(m, "e1") == Some(ExecutorState::Running)
    })
    .await;
    worker.task.cancel().await;
    assert_eq!(records_left(dir.path()).len(), 1);

    let mut opts = options(&master.addr, dir.path());
    opts.kill_left_behind = kill_left_behind;
    let worker = start(opts);
    let second = wait_msg(&master.seen, &mut log, "re-registration", |m| {
        registration(m).is_some_and(|r| r.incarnation != first.incarnation)
    })
    .await;
    let second = registration(&second).unwrap();
    assert_eq!(second.worker, first.worker);
    let e1: Vec<_> = second.executors.iter().filter(|r| r.id.as_str() == "e1").collect();
    assert_eq!(e1.len(), 1, "{second:?}");
    assert_eq!(e1[0].framework.as_str(), "f1");
    if kill_left_behind {
        assert_eq!(e1[0].state, ExecutorState::Killed);
        assert!(records_left(dir.path()).is_empty(), "{:?}", records_left(dir.path()));
        assert_eq!(worker.shutdown().await, Ok(()));
    } else {
        assert_eq!(e1[0].state, ExecutorState::Running, "re-adopted");
        assert_eq!(records_left(dir.path()).len(), 1, "the adopted executor still runs");
        // The new process supervises it: its shutdown kills it and reports.
        assert_eq!(worker.shutdown().await, Ok(()));
        wait_msg(&master.seen, &mut log, "Killed", |m| {
            status_of(m, "e1") == Some(ExecutorState::Killed)
        })
        .await;
        assert!(records_left(dir.path()).is_empty(), "{:?}", records_left(dir.path()));
    }
}

#[test]
fn restart_readopts_the_executor_left_behind_and_reports_it_running() {
    smol::block_on(restart_with_an_executor_left_behind(false));
}

#[test]
fn restart_with_kill_left_behind_reports_the_executor_left_behind_as_killed() {
    smol::block_on(restart_with_an_executor_left_behind(true));
}

#[test]
fn executor_survives_master_loss_and_is_reported_on_reregistration() {
    smol::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let master = fake_master(Script {
            launch: Some(vec!["sleep".into(), "30".into()]),
            ..Script::default()
        })
        .await;
        let addr = master.addr.clone();
        let worker = start(options(&addr, dir.path()));
        let mut log = Vec::new();
        let first =
            wait_msg(&master.seen, &mut log, "registration", |m| registration(m).is_some()).await;
        let first = registration(&first).unwrap().clone();
        wait_msg(&master.seen, &mut log, "Running", |m| {
            status_of(m, "e1") == Some(ExecutorState::Running)
        })
        .await;

        // The master goes away (its connections close); a new one comes up
        // at the same address after a while.
        drop(master);
        async_io::Timer::after(Duration::from_millis(500)).await;
        assert_eq!(records_left(dir.path()).len(), 1, "the executor still runs");
        let master = fake_master_at(addr.as_str(), Script::default()).await;
        let again =
            wait_msg(&master.seen, &mut log, "re-registration", |m| registration(m).is_some())
                .await;
        let again = registration(&again).unwrap();
        assert_eq!((&again.worker, again.incarnation), (&first.worker, first.incarnation));
        let e1: Vec<_> = again.executors.iter().filter(|r| r.id.as_str() == "e1").collect();
        assert_eq!(e1.len(), 1, "{again:?}");
        assert_eq!(e1[0].state, ExecutorState::Running);
        assert_eq!(records_left(dir.path()).len(), 1, "the executor still runs");

        assert_eq!(worker.shutdown().await, Ok(()));
        wait_msg(&master.seen, &mut log, "Killed", |m| {
            status_of(m, "e1") == Some(ExecutorState::Killed)
        })
        .await;
    });
}

#[test]
fn refuses_a_non_loopback_master_without_a_secret() {
    smol::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        // TEST-NET-1: never routed.
        let exposed = Addr::new("192.0.2.1:5050");
        let (_stop, rx) = async_channel::bounded(1);
        let err = within("the refusal", run_worker(options(&exposed, dir.path()), rx))
            .await
            .expect_err("refused");
        assert!(matches!(err, WorkerError::Host(_)), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("192.0.2.1:5050"), "{err}");
        assert!(err.contains("loopback"), "{err}");
        assert!(err.contains("--insecure"), "{err}");
        // Refused before touching the work directory.
        assert!(!dir.path().join(ID_FILE).exists());

        // With --insecure it runs (and keeps dialling) until shut down.
        let mut opts = options(&exposed, dir.path());
        opts.insecure = true;
        let worker = start(opts);
        async_io::Timer::after(Duration::from_millis(300)).await;
        assert_eq!(worker.shutdown().await, Ok(()));
    });
}

#[test]
fn refuses_a_malformed_master_address() {
    smol::block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (_stop, rx) = async_channel::bounded(1);
        let err = run_worker(options(&Addr::new("localhost"), dir.path()), rx)
            .await
            .expect_err("refused")
            .to_string();
        assert!(err.contains("\"localhost\"") && err.contains("host:port"), "{err}");
    });
}

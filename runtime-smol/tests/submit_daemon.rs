//! The submit daemon against a fake master on loopback.
//!
//! The fake master is a `TcpListener` on 127.0.0.1:0 whose connections run
//! through `regent_smol::net::spawn_connection(.., Side::Server, ..)`; each
//! test body plays the master's side of the conversation by hand, while
//! `run_submit` runs concurrently on the same thread. Every wait is bounded.

use async_channel::Receiver;
use regent_core::auth::Side;
use regent_core::ids::InstanceId;
use regent_core::progress::SubmitError;
use regent_core::protocol::{
    ExecutorInfo, ExecutorState, GroupSpec, HelloReply, LeaderHint, Message, Role, Subscribe,
};
use regent_core::{Addr, ConnId, Epoch, ExecutorId, FrameworkId, MasterId, Millis, WorkerId};
use regent_smol::net::{spawn_connection, ConnHandle, NetConfig, NetEvent};
use regent_smol::submit::{
    run_submit, run_submit_with_progress, RunError, SubmitOptions, SubmitOutcome,
};
use smol::net::TcpListener;
use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CLUSTER: &str = "submit-test";
/// Generous bound for anything to happen (never a timing assertion).
const BOUND: Duration = Duration::from_secs(20);
const EPOCH: Epoch = Epoch(7);

/// Output shared between the daemon and the test.
#[derive(Clone, Default)]
struct Out(Arc<Mutex<Vec<u8>>>);

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Out {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

async fn bounded<T>(what: &str, f: impl Future<Output = T>) -> T {
    smol::future::or(async { Some(f.await) }, async {
        async_io::Timer::after(BOUND).await;
        None
    })
    .await
    .unwrap_or_else(|| panic!("timed out waiting for {what}"))
}

/// The fake master: accepts connections and reports their events.
struct Fake {
    addr: Addr,
    conns: Receiver<ConnHandle>,
    events: Receiver<NetEvent>,
    _accept: smol::Task<()>,
}

impl Fake {
    async fn start() -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = Addr::new(listener.local_addr().unwrap().to_string());
        let (conn_tx, conns) = async_channel::unbounded();
        let (ev_tx, events) = async_channel::unbounded();
        let cfg = Arc::new(NetConfig::new(CLUSTER, None));
        let accept = smol::spawn(async move {
            let mut n = 100;
            while let Ok((stream, _)) = listener.accept().await {
                n += 1;
                let h =
                    spawn_connection(stream, Side::Server, ConnId(n), cfg.clone(), ev_tx.clone());
                if conn_tx.send(h).await.is_err() {
                    return;
                }
            }
        });
        Fake { addr, conns, events, _accept: accept }
    }

    async fn next_event(&self) -> NetEvent {
        bounded("a master-side event", self.events.recv()).await.unwrap()
    }

    /// The next message on any connection.
    async fn next_message(&self) -> (ConnId, Message) {
        loop {
            match self.next_event().await {
                NetEvent::Message { conn, msg } => return (conn, msg),
                NetEvent::Closed { .. } | NetEvent::Authenticated { .. } => continue,
            }
        }
    }

    /// Accepts a connection and answers `Hello` with a leading `HelloReply`;
    /// returns the handle and the `Subscribe` that follows.
    async fn accept_subscriber(&self) -> (ConnHandle, Subscribe) {
        let h = bounded("a connection", self.conns.recv()).await.unwrap();
        let (conn, msg) = self.next_message().await;
        assert_eq!(conn, h.conn);
        let Message::Hello(hello) = msg else { panic!("expected Hello, got {msg:?}") };
        assert_eq!(hello.role, Role::Subscriber);
        h.send(Message::HelloReply(HelloReply {
            role: Role::Master,
            master: MasterId::new("m1"),
            leading: true,
            epoch: EPOCH,
            leader: Some(LeaderHint {
                id: MasterId::new("m1"),
                addr: self.addr.clone(),
                epoch: EPOCH,
            }),
            masters: vec![self.addr.clone()],
        }));
        let (conn, msg) = self.next_message().await;
        assert_eq!(conn, h.conn);
        let Message::Subscribe(sub) = msg else { panic!("expected Subscribe, got {msg:?}") };
        (h, sub)
    }

    /// Answers the subscription with `Subscribed` (and `executors` as the
    /// snapshot), then accepts the `DeclareGroup` that follows; returns it.
    async fn subscribe_and_accept(
        &self,
        h: &ConnHandle,
        framework: &str,
        executors: Vec<ExecutorInfo>,
    ) -> GroupSpec {
        h.send(Message::Subscribed {
            epoch: EPOCH,
            framework: FrameworkId::new(framework),
            heartbeat_interval: Millis(1000),
            executors,
        });
        let (_, msg) = self.next_message().await;
        let Message::DeclareGroup { request, spec } = msg else {
            panic!("expected DeclareGroup, got {msg:?}")
        };
        h.send(Message::RequestAccepted { epoch: EPOCH, request });
        spec
    }

    /// A done submission ends its framework: waits for its `Teardown` on
    /// `h`, accepts it, and waits until the connection has closed.
    async fn ended(&self, h: &ConnHandle) {
        loop {
            match self.next_event().await {
                NetEvent::Message { conn, msg: Message::Teardown { request } }
                    if conn == h.conn =>
                {
                    h.send(Message::RequestAccepted { epoch: EPOCH, request });
                    break;
                }
                NetEvent::Closed { conn, .. } if conn == h.conn => {
                    panic!("closed without a Teardown")
                }
                _ => {}
            }
        }
        self.closed(h.conn).await;
    }

    /// Waits until connection `conn` has closed (with no `Teardown` on it).
    async fn closed(&self, conn: ConnId) {
        loop {
            match self.next_event().await {
                NetEvent::Closed { conn: c, .. } if c == conn => return,
                NetEvent::Message { msg, .. } => {
                    assert!(!matches!(msg, Message::Teardown { .. }), "the daemon tore down")
                }
                _ => {}
            }
        }
    }
}

fn options(masters: Vec<Addr>, executors: u32) -> SubmitOptions {
    SubmitOptions {
        update: Default::default(),
        keep: false,
        tenant: None,
        cluster: CLUSTER.into(),
        masters,
        name: "test-app".into(),
        framework_id: None,
        failover_timeout: Duration::from_secs(30),
        executors,
        cores: 1,
        memory_mb: 64,
        command: vec!["sleep".into(), "1".into()],
        env: vec![],
        policy: Default::default(),
        net: Arc::new(NetConfig::new(CLUSTER, None)),
        insecure: false,
        connect_timeout: None,
        callback: None,
        state_dir: None,
        launch: Default::default(),
    }
}

fn info(framework: &str, slot: u32, launch: u32, state: ExecutorState) -> ExecutorInfo {
    ExecutorInfo {
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        id: ExecutorId::new(format!("{framework}/main#{slot}#{launch}")),
        group: "main".into(),
        slot,
        worker: Some(WorkerId::new(format!("w{slot}"))),
        state,
    }
}

fn update(info: ExecutorInfo) -> Message {
    Message::ExecutorUpdate { epoch: EPOCH, info }
}

/// Runs `submit` and `master` together; returns the submit's result once
/// both are done.
async fn together(
    submit: impl Future<Output = Result<SubmitOutcome, RunError>>,
    master: impl Future<Output = ()>,
) -> Result<SubmitOutcome, RunError> {
    bounded("the submission and the fake master", smol::future::zip(submit, master)).await.0
}

#[test]
fn every_slot_exiting_zero_succeeds_and_prints_each_state_change() {
    smol::block_on(async {
        let fake = Fake::start().await;
        let out = Out::default();
        let (_stop, shutdown) = async_channel::bounded(1);
        let submit = run_submit(options(vec![fake.addr.clone()], 3), out.clone(), shutdown);
        let master = async {
            let (h, sub) = fake.accept_subscriber().await;
            assert_eq!(sub.framework, None);
            assert_eq!(sub.name, "test-app");
            assert_eq!(sub.failover_timeout, Millis(30_000));
            let spec = fake.subscribe_and_accept(&h, "fw-1", vec![]).await;
            assert_eq!(spec.group, "main");
            assert_eq!(spec.slots, 3);
            assert_eq!(spec.command, vec!["sleep".to_string(), "1".into()]);
            assert_eq!((spec.cores, spec.memory_mb), (1, 64));
            for slot in 0..3 {
                h.send(update(info("fw-1", slot, 1, ExecutorState::Launching)));
                h.send(update(info("fw-1", slot, 1, ExecutorState::Running)));
            }
            for slot in 0..3 {
                h.send(update(info("fw-1", slot, 1, ExecutorState::Exited { code: 0 })));
            }
            fake.ended(&h).await;
        };
        let result = together(submit, master).await;
        let text = out.text();
        assert_eq!(result.map_err(|e| e.to_string()), Ok(SubmitOutcome::Succeeded), "{text}");
        assert!(text.contains("framework fw-1"), "{text}");
        assert!(text.contains(&format!("subscribed to {}", fake.addr)), "{text}");
        for slot in 0..3 {
            for state in ["LAUNCHING", "RUNNING", "EXITED 0"] {
                let line = format!("fw-1/main#{slot}#1 slot {slot} on w{slot}: {state}");
                assert!(text.contains(&line), "missing {line:?} in {text}");
            }
        }
        assert!(!text.contains('\r'), "progress on a non-terminal: {text:?}");
    });
}

#[test]
fn a_failover_to_another_instance_stops_naming_it() {
    smol::block_on(async {
        let fake = Fake::start().await;
        let out = Out::default();
        let (_stop, shutdown) = async_channel::bounded(1);
        let other = InstanceId(0xfeed);
        let submit = run_submit(options(vec![fake.addr.clone()], 2), out.clone(), shutdown);
        let master = async {
            let (h, _) = fake.accept_subscriber().await;
            fake.subscribe_and_accept(&h, "fw-2", vec![]).await;
            h.send(update(info("fw-2", 0, 1, ExecutorState::Running)));
            h.send(Message::FrameworkError {
                epoch: EPOCH,
                message: "framework fw-2 failed over".into(),
                failed_over_to: Some(other),
            });
            fake.closed(h.conn).await;
        };
        let result = together(submit, master).await;
        let text = out.text();
        assert_eq!(
            result.map_err(|e| e.to_string()),
            Ok(SubmitOutcome::FailedOver { to: other.to_string() }),
            "{text}"
        );
        assert!(text.contains(&format!("failed over to instance {other}")), "{text}");
        assert!(!text.contains('\r'), "{text:?}");
    });
}

#[test]
fn a_failed_slot_ends_with_slots_failed_once_nothing_can_change() {
    smol::block_on(async {
        let fake = Fake::start().await;
        let out = Out::default();
        let (_stop, shutdown) = async_channel::bounded(1);
        let submit = run_submit(options(vec![fake.addr.clone()], 2), out.clone(), shutdown);
        let master = async {
            let (h, _) = fake.accept_subscriber().await;
            fake.subscribe_and_accept(&h, "fw-3", vec![]).await;
            h.send(update(info("fw-3", 0, 1, ExecutorState::Running)));
            h.send(update(info("fw-3", 1, 1, ExecutorState::Running)));
            h.send(update(info("fw-3", 1, 1, ExecutorState::Exited { code: 2 })));
            h.send(Message::SlotFailed {
                epoch: EPOCH,
                group: "main".into(),
                slot: 1,
                reason: "retries are used up".into(),
            });
            // Slot 0 still runs: the daemon must wait for it.
            async_io::Timer::after(Duration::from_millis(200)).await;
            h.send(update(info("fw-3", 0, 1, ExecutorState::Exited { code: 0 })));
            fake.ended(&h).await;
        };
        let result = together(submit, master).await;
        let text = out.text();
        assert_eq!(
            result.map_err(|e| e.to_string()),
            Ok(SubmitOutcome::SlotsFailed(vec!["slot 1: retries are used up".into()])),
            "{text}"
        );
        assert!(text.contains("fw-3/main#1#1 slot 1 on w1: EXITED 2"), "{text}");
        assert!(text.contains("slot 1 failed: retries are used up"), "{text}");
        assert!(text.contains("fw-3/main#0#1 slot 0 on w0: EXITED 0"), "{text}");
        assert!(!text.contains('\r'), "{text:?}");
    });
}

#[test]
fn interrupting_leaves_the_framework_and_a_second_submit_adopts_its_executors() {
    smol::block_on(async {
        let fake = Fake::start().await;
        // First submit: subscribed, executors running, then interrupted.
        let out = Out::default();
        let (stop, shutdown) = async_channel::bounded(1);
        let mut opts = options(vec![fake.addr.clone()], 2);
        opts.framework_id = Some("fw-4".into());
        let submit = run_submit(opts.clone(), out.clone(), shutdown);
        let master = async {
            let (h, sub) = fake.accept_subscriber().await;
            assert_eq!(sub.framework, Some(FrameworkId::new("fw-4")));
            fake.subscribe_and_accept(&h, "fw-4", vec![]).await;
            h.send(update(info("fw-4", 0, 1, ExecutorState::Running)));
            h.send(update(info("fw-4", 1, 1, ExecutorState::Running)));
            // Give the daemon time to print, then interrupt it.
            async_io::Timer::after(Duration::from_millis(200)).await;
            stop.send(()).await.unwrap();
            // It closes its connection, without a Teardown.
            fake.closed(h.conn).await;
        };
        let result = together(submit, master).await;
        let first = out.text();
        assert_eq!(result.map_err(|e| e.to_string()), Ok(SubmitOutcome::Interrupted), "{first}");
        assert!(first.contains("fw-4/main#1#1 slot 1 on w1: RUNNING"), "{first}");
        assert!(first.contains("--framework-id fw-4"), "{first}");

        // Second submit, same framework id and spec: the snapshot shows the
        // running executors, the declaration is the same, they finish.
        let out = Out::default();
        let (_stop, shutdown) = async_channel::bounded(1);
        let submit = run_submit(opts, out.clone(), shutdown);
        let master = async {
            let (h, sub) = fake.accept_subscriber().await;
            assert_eq!(sub.framework, Some(FrameworkId::new("fw-4")));
            let running = vec![
                info("fw-4", 0, 1, ExecutorState::Running),
                info("fw-4", 1, 1, ExecutorState::Running),
            ];
            let spec = fake.subscribe_and_accept(&h, "fw-4", running).await;
            assert_eq!(spec.slots, 2);
            h.send(update(info("fw-4", 0, 1, ExecutorState::Exited { code: 0 })));
            h.send(update(info("fw-4", 1, 1, ExecutorState::Exited { code: 0 })));
            fake.ended(&h).await;
        };
        let result = together(submit, master).await;
        let second = out.text();
        assert_eq!(result.map_err(|e| e.to_string()), Ok(SubmitOutcome::Succeeded), "{second}");
        assert!(second.contains("fw-4/main#0#1 slot 0 on w0: RUNNING"), "{second}");
        assert!(second.contains("fw-4/main#0#1 slot 0 on w0: EXITED 0"), "{second}");
    });
}

#[test]
fn a_lost_connection_resubscribes_and_redeclares() {
    smol::block_on(async {
        let fake = Fake::start().await;
        let out = Out::default();
        let (_stop, shutdown) = async_channel::bounded(1);
        let submit = run_submit(options(vec![fake.addr.clone()], 1), out.clone(), shutdown);
        let master = async {
            let (h, _) = fake.accept_subscriber().await;
            fake.subscribe_and_accept(&h, "fw-5", vec![]).await;
            h.send(update(info("fw-5", 0, 1, ExecutorState::Running)));
            async_io::Timer::after(Duration::from_millis(100)).await;
            h.close();
            // The daemon comes back with the framework id it was given.
            let (h, sub) = fake.accept_subscriber().await;
            assert_eq!(sub.framework, Some(FrameworkId::new("fw-5")));
            assert!(sub.attempt >= 2);
            let snapshot = vec![info("fw-5", 0, 1, ExecutorState::Exited { code: 0 })];
            fake.subscribe_and_accept(&h, "fw-5", snapshot).await;
            fake.ended(&h).await;
        };
        let result = together(submit, master).await;
        let text = out.text();
        assert_eq!(result.map_err(|e| e.to_string()), Ok(SubmitOutcome::Succeeded), "{text}");
        assert!(text.contains("disconnected: "), "{text}");
        assert_eq!(text.lines().filter(|l| *l == "framework fw-5").count(), 1, "{text}");
        assert_eq!(text.matches(&format!("subscribed to {}", fake.addr)).count(), 2, "{text}");
        assert!(text.contains("fw-5/main#0#1 slot 0 on w0: EXITED 0"), "{text}");
    });
}

#[test]
fn a_refused_declaration_is_an_error() {
    smol::block_on(async {
        let fake = Fake::start().await;
        let out = Out::default();
        let (_stop, shutdown) = async_channel::bounded(1);
        let submit = run_submit(options(vec![fake.addr.clone()], 1), out.clone(), shutdown);
        let master = async {
            let (h, _) = fake.accept_subscriber().await;
            h.send(Message::Subscribed {
                epoch: EPOCH,
                framework: FrameworkId::new("fw-6"),
                heartbeat_interval: Millis(1000),
                executors: vec![],
            });
            let (_, msg) = fake.next_message().await;
            let Message::DeclareGroup { request, .. } = msg else { panic!("{msg:?}") };
            h.send(Message::RequestRefused {
                epoch: EPOCH,
                request,
                reason: "group \"main\" is already declared with a different spec".into(),
            });
            fake.closed(h.conn).await;
        };
        let result = together(submit, master).await;
        let err = result.expect_err("a refused declaration ends the submission");
        assert!(
            matches!(&err, RunError::Ended(SubmitError::GroupRefused { group, .. }) if group == "main"),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(err.contains("different spec"), "{err}");
        assert!(out.text().contains("refused"), "{}", out.text());
    });
}

#[test]
fn a_non_loopback_master_without_a_secret_is_refused_by_name() {
    smol::block_on(async {
        let (_stop, shutdown) = async_channel::bounded(1);
        let opts = options(vec![Addr::new("10.1.2.3:5050")], 1);
        let result = bounded("the refusal", run_submit(opts, Vec::new(), shutdown)).await;
        let err = result.expect_err("an exposed master without a secret");
        assert!(matches!(err, RunError::Host(_)), "{err:?}");
        let err = err.to_string();
        assert!(err.contains("10.1.2.3:5050"), "{err}");
        assert!(err.contains("--insecure"), "{err}");
    });
}

#[test]
fn the_progress_line_appears_only_when_asked_for() {
    smol::block_on(async {
        let fake = Fake::start().await;
        let out = Out::default();
        let (_stop, shutdown) = async_channel::bounded(1);
        let submit = run_submit_with_progress(
            options(vec![fake.addr.clone()], 1),
            out.clone(),
            shutdown,
            true,
        );
        let master = async {
            let (h, _) = fake.accept_subscriber().await;
            fake.subscribe_and_accept(&h, "fw-7", vec![]).await;
            h.send(update(info("fw-7", 0, 1, ExecutorState::Running)));
            async_io::Timer::after(Duration::from_millis(100)).await;
            h.send(update(info("fw-7", 0, 1, ExecutorState::Exited { code: 0 })));
            fake.ended(&h).await;
        };
        let result = together(submit, master).await;
        let text = out.text();
        assert_eq!(result.map_err(|e| e.to_string()), Ok(SubmitOutcome::Succeeded), "{text:?}");
        assert!(text.contains("\r\x1b[K[1/1 running, 0 done, 0 failed]"), "{text:?}");
        // Plain lines stay whole, and the progress line is cleared at the end.
        assert!(text.contains("fw-7/main#0#1 slot 0 on w0: RUNNING\n"), "{text:?}");
        assert!(text.ends_with('\n'), "{text:?}");
    });
}

#[test]
fn closing_the_shutdown_channel_interrupts_like_ctrl_c() {
    smol::block_on(async {
        let fake = Fake::start().await;
        let out = Out::default();
        let (stop, shutdown) = async_channel::bounded::<()>(1);
        let submit = run_submit(options(vec![fake.addr.clone()], 1), out.clone(), shutdown);
        let master = async {
            let (h, _) = fake.accept_subscriber().await;
            fake.subscribe_and_accept(&h, "fw-8", vec![]).await;
            h.send(update(info("fw-8", 0, 1, ExecutorState::Running)));
            async_io::Timer::after(Duration::from_millis(100)).await;
            // What `regent`'s Ctrl-C handler does.
            stop.close();
            fake.closed(h.conn).await;
        };
        let result = together(submit, master).await;
        assert_eq!(
            result.map_err(|e| e.to_string()),
            Ok(SubmitOutcome::Interrupted),
            "{}",
            out.text()
        );
    });
}

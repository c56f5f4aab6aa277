//! [`ZkBackend`]: the coordination client's commands ([`ZkCommand`])
//! executed against a real ZooKeeper, its reports ([`ZkEvent`]) fed back as
//! they are.

use super::exec;
use super::ZkConfig;
use async_channel::{Receiver, Sender};
use regent_core::zk::{RequestId, SessionId, ZkCommand, ZkError, ZkEvent, ZkOp, ZkResult};
use regent_core::Millis;
use smol::future;
use smol::Task;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use zookeeper_client as zkc;

/// What the backend's tasks report, tagged with the generation of the
/// session they belong to: anything of an older generation is stale (its
/// session was closed, expired or replaced) and is dropped, so the elector
/// never hears of a session again after `CloseSession` or `NewSession`.
enum Msg {
    /// A session asked for by `NewSession` is open.
    Opened(u64, zkc::Client),
    /// An event for the elector.
    Event(u64, ZkEvent),
}

struct Live {
    id: SessionId,
    timeout: Millis,
    ops: Sender<(RequestId, ZkOp)>,
    // Held, not used: dropping them closes the session (the last `Client`
    // goes with the session task) and stops its state watcher.
    _session: Task<()>,
    _state: Task<()>,
}

/// Executes the coordination client's commands against ZooKeeper and
/// produces its events (the node hands both through untouched).
///
/// * [`ZkCommand::NewSession`] opens a session asking for the timeout (retrying
///   every [`ZkConfig::reconnect_interval`] while the ensemble cannot be
///   reached) and then yields [`ZkEvent::SessionConnected`] with the session
///   id and the timeout the server *negotiated*.
/// * [`ZkCommand::CloseSession`] drops the session's client, which closes the
///   session (its ephemeral nodes go at once if the close reaches the
///   server); nothing of it is reported again.
/// * [`ZkCommand::Request`] sends the op on the session's client. Requests are
///   handed to the client in the order of the actions, and their
///   [`ZkEvent::Reply`]s come back in that order. A request made while the
///   connection is down is answered `Err(ConnectionLoss)` without being
///   sent; a request for a session that is not the current one is dropped.
///   A client `ConnectionLoss` is reported as [`ZkError::ConnectionLoss`]
///   (see [`exec::map_error`]).
/// * The client's state watcher becomes [`ZkEvent::Disconnected`],
///   [`ZkEvent::SessionConnected`] (after an automatic reconnect within the
///   session) and [`ZkEvent::Expired`] (also for `AuthFailed`, which is as
///   terminal).
/// * A watch left by a watching read becomes one [`ZkEvent::Watch`] when it
///   fires (node events only; session events come from the state watcher).
///
/// Spawns its tasks on smol's global executor.
pub struct ZkBackend {
    config: ZkConfig,
    acls: Arc<Vec<zkc::Acl>>,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    generation: u64,
    opening: Option<Task<()>>,
    live: Option<Live>,
}

impl std::fmt::Debug for ZkBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkBackend")
            .field("config", &self.config)
            .field("generation", &self.generation)
            .field("opening", &self.opening.is_some())
            .field("session", &self.live.as_ref().map(|l| l.id))
            .finish()
    }
}

impl ZkBackend {
    /// A backend for the ensemble `config` names; opens nothing until
    /// [`ZkCommand::NewSession`].
    pub fn new(config: ZkConfig) -> Self {
        let (tx, rx) = async_channel::unbounded();
        ZkBackend {
            acls: Arc::new(config.acls()),
            config,
            tx,
            rx,
            generation: 0,
            opening: None,
            live: None,
        }
    }

    /// The current session and its negotiated timeout, once connected.
    pub fn session(&self) -> Option<(SessionId, Millis)> {
        self.live.as_ref().map(|l| (l.id, l.timeout))
    }

    /// Executes one command.
    pub fn execute(&mut self, command: ZkCommand) {
        match command {
            ZkCommand::NewSession { timeout } => {
                self.forget();
                let generation = self.generation;
                let config = self.config.clone();
                let tx = self.tx.clone();
                let timeout = Duration::from_millis(timeout.0);
                self.opening = Some(smol::spawn(async move {
                    loop {
                        match config.connect(timeout).await {
                            Ok(client) => {
                                let _ = tx.send(Msg::Opened(generation, client)).await;
                                return;
                            }
                            Err(e) => {
                                tracing::warn!(hosts = %config.hosts, error = %e,
                                    "cannot open a ZooKeeper session; retrying");
                                async_io::Timer::after(config.reconnect_interval).await;
                            }
                        }
                    }
                }));
            }
            ZkCommand::CloseSession { session } => {
                if self.live.as_ref().is_some_and(|l| l.id == session) {
                    tracing::debug!(%session, "closing ZooKeeper session");
                    self.forget();
                }
            }
            ZkCommand::Request { session, req, op } => {
                match &self.live {
                    Some(l) if l.id == session => {
                        // The channel is unbounded and its receiver lives as
                        // long as the session task: this cannot fail unless
                        // the task ended, and then the session is gone too.
                        let _ = l.ops.try_send((req, op));
                    }
                    _ => tracing::debug!(%session, ?req, "request for an old session dropped"),
                }
            }
        }
    }

    /// The next event for the elector. Cancel-safe: dropping the future
    /// loses nothing.
    pub async fn next_event(&mut self) -> ZkEvent {
        loop {
            // The backend holds a sender itself, so the channel never closes.
            let Ok(msg) = self.rx.recv().await else { return future::pending().await };
            match msg {
                Msg::Opened(generation, client) if generation == self.generation => {
                    self.opening = None;
                    return self.start(client);
                }
                Msg::Event(generation, event) if generation == self.generation => return event,
                // Stale: a session closed or replaced since. Dropping a stale
                // client closes its session.
                Msg::Opened(..) | Msg::Event(..) => {}
            }
        }
    }

    /// Forgets the current session (closing it) and any session being
    /// opened.
    fn forget(&mut self) {
        self.generation += 1;
        self.opening = None;
        self.live = None;
    }

    fn start(&mut self, client: zkc::Client) -> ZkEvent {
        let id = exec::session_id(client.session_id());
        let timeout = Millis(client.session_timeout().as_millis() as u64);
        tracing::info!(session = %id, %timeout, "ZooKeeper session open");
        let generation = self.generation;
        let (ops_tx, ops_rx) = async_channel::unbounded();
        let state = smol::spawn(watch_state(
            client.state_watcher(),
            id,
            timeout,
            generation,
            self.tx.clone(),
        ));
        let session =
            smol::spawn(serve(client, self.acls.clone(), ops_rx, self.tx.clone(), generation, id));
        self.live = Some(Live { id, timeout, ops: ops_tx, _session: session, _state: state });
        ZkEvent::SessionConnected { session: id, timeout }
    }
}

/// Turns the client's session states into elector events.
async fn watch_state(
    mut watcher: zkc::StateWatcher,
    session: SessionId,
    timeout: Millis,
    generation: u64,
    tx: Sender<Msg>,
) {
    let send = |event| tx.send(Msg::Event(generation, event));
    let mut connected = true;
    // A change between the connect and the watcher's creation is seen here.
    let mut state = watcher.peek_state();
    loop {
        tracing::debug!(%session, ?state, "ZooKeeper session state");
        match state {
            zkc::SessionState::SyncConnected => {
                if !connected {
                    connected = true;
                    let _ = send(ZkEvent::SessionConnected { session, timeout }).await;
                }
            }
            zkc::SessionState::Disconnected | zkc::SessionState::ConnectedReadOnly => {
                if connected {
                    connected = false;
                    let _ = send(ZkEvent::Disconnected { session }).await;
                }
            }
            zkc::SessionState::Expired | zkc::SessionState::AuthFailed => {
                tracing::warn!(%session, ?state, "ZooKeeper session finished");
                let _ = send(ZkEvent::Expired { session }).await;
                return;
            }
            zkc::SessionState::Closed => return,
        }
        state = watcher.changed().await;
    }
}

type OpFuture<'a> =
    Pin<Box<dyn Future<Output = (ZkResult, Option<zkc::OneshotWatcher>)> + Send + 'a>>;

enum Slot<'a> {
    Pending(OpFuture<'a>),
    Ready((ZkResult, Option<zkc::OneshotWatcher>)),
}

enum Step {
    Op(Option<(RequestId, ZkOp)>),
    Done((ZkResult, Option<zkc::OneshotWatcher>)),
}

/// The session task: owns the client, sends each op as it arrives (so the
/// send order is the action order) and reports the replies in the same
/// order. Ends, dropping the client and so closing the session, when the
/// backend drops it.
async fn serve(
    client: zkc::Client,
    acls: Arc<Vec<zkc::Acl>>,
    ops: Receiver<(RequestId, ZkOp)>,
    tx: Sender<Msg>,
    generation: u64,
    session: SessionId,
) {
    let mut watches: Vec<Task<()>> = Vec::new();
    let mut inflight: VecDeque<(RequestId, Slot<'_>)> = VecDeque::new();
    loop {
        // Deliver every answered request at the front, in order.
        while let Some((_, Slot::Ready(_))) = inflight.front() {
            let Some((req, Slot::Ready(r))) = inflight.pop_front() else { unreachable!() };
            deliver(&tx, generation, session, req, r, &mut watches).await;
        }
        let step = match inflight.front_mut() {
            Some((_, Slot::Pending(front))) => {
                future::or(async { Step::Op(ops.recv().await.ok()) }, async {
                    Step::Done(front.await)
                })
                .await
            }
            _ => Step::Op(ops.recv().await.ok()),
        };
        match step {
            Step::Op(None) => return,
            Step::Op(Some((req, op))) => {
                if client.state() != zkc::SessionState::SyncConnected {
                    inflight.push_back((req, Slot::Ready((Err(ZkError::ConnectionLoss), None))));
                    continue;
                }
                let mut fut: OpFuture<'_> = Box::pin(exec::execute(&client, op, &acls));
                // The first poll hands the request to the client.
                let slot = match future::poll_once(&mut fut).await {
                    Some(r) => Slot::Ready(r),
                    None => Slot::Pending(fut),
                };
                inflight.push_back((req, slot));
            }
            Step::Done(r) => {
                if let Some((req, _)) = inflight.pop_front() {
                    deliver(&tx, generation, session, req, r, &mut watches).await;
                }
            }
        }
    }
}

async fn deliver(
    tx: &Sender<Msg>,
    generation: u64,
    session: SessionId,
    req: RequestId,
    (result, watcher): (ZkResult, Option<zkc::OneshotWatcher>),
    watches: &mut Vec<Task<()>>,
) {
    if let Some(w) = watcher {
        watches.retain(|t| !t.is_finished());
        let tx = tx.clone();
        watches.push(smol::spawn(async move {
            let ev = w.changed().await;
            if let Some(event) = exec::watch_event(&ev) {
                let _ = tx.send(Msg::Event(generation, ZkEvent::Watch { session, event })).await;
            }
        }));
    }
    let _ = tx.send(Msg::Event(generation, ZkEvent::Reply { req, result })).await;
}

//! The master daemon: drives `regent_core::master::Master` over TCP.
//!
//! One loop owns the machine. It waits for a connection, a frame, an elector
//! outcome, a store completion, an HTTP query, a deadline or shutdown; makes
//! one `handle` call; executes every action in order. Leadership comes from
//! the ZooKeeper elector (`--recovery zookeeper`), or, in the single-master
//! modes `none` and `filesystem`, this master elects itself at start. Store
//! writes go to the filesystem store's writer thread (group commit, fsync off
//! the loop), to ZooKeeper (fenced by the leader's election node), or, in
//! `none`, nowhere (acknowledged at once; state lives in memory only).

use crate::http::{self, HttpQuery, HttpSnapshot};
use crate::net::{self, ConnHandle, NetConfig, NetEvent};
use crate::zk::{self, ElectorHandle, Outcome, ZkConfig, ZkStore};
use async_channel::{Receiver, Sender};
use regent_core::auth::Side;
use regent_core::elector::MultiOp;
use regent_core::master::{self, Master};
use regent_core::protocol::LeaderHint;
use regent_core::store::{Record, WriteId};
use regent_core::{Addr, ConnId, Epoch, MasterId, Millis};
use regent_std::store::{LocalStore, Op};
use smol::net::{TcpListener, TcpStream};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where master state survives a crash.
#[derive(Clone, Debug)]
pub enum Recovery {
    /// Nowhere: state lives in memory. Single master.
    None,
    /// A directory (locked by the running master). Single master.
    Filesystem {
        /// The store directory.
        dir: PathBuf,
    },
    /// ZooKeeper: leader election among any number of masters, records
    /// under `<root>/state/`.
    Zookeeper {
        /// `host:port[,host:port...]`.
        hosts: String,
        /// The cluster's root node, e.g. `/regent`.
        root: String,
        /// The session timeout to ask for (the server may clamp it).
        session_timeout: Duration,
    },
}

/// How to run a master.
#[derive(Debug)]
pub struct MasterOptions {
    /// This master's id.
    pub id: String,
    /// Where workers and subscribers connect.
    pub listen: SocketAddr,
    /// The address advertised to peers (default: `listen`).
    pub advertise: Option<Addr>,
    /// Where to serve HTTP, if anywhere.
    pub http: Option<SocketAddr>,
    /// The recovery mode.
    pub recovery: Recovery,
    /// A worker silent this long is DEAD.
    pub worker_timeout: Duration,
    /// How long a new leader waits for recovered workers (default: the
    /// worker timeout).
    pub recovery_timeout: Option<Duration>,
    /// How workers heartbeat.
    pub heartbeat_interval: Duration,
    /// Connection settings (cluster, secret, limits).
    pub net: Arc<NetConfig>,
    /// Allow a non-loopback listen address without a secret.
    pub insecure: bool,
    /// Tells the caller the bound addresses once listening.
    pub ready: Option<Sender<SocketAddr>>,
}

enum Input {
    Accepted(std::io::Result<TcpStream>),
    Net(NetEvent),
    Elector(Outcome),
    Store(StoreEvent),
    Http(HttpQuery),
    Shutdown,
    Deadline,
}

/// Events for the machine from the store (writes done or failed, records
/// loaded), delivered off the loop.
enum StoreEvent {
    Events(Vec<master::Event>),
    Loaded(Result<Vec<Record>, String>),
}

enum Store {
    /// `none` and `filesystem`: shared with the std runtime.
    Local(LocalStore),
    /// `zookeeper`: fenced writes, applied in order by one task.
    Zookeeper { store: Arc<ZkStore>, fence: Option<MultiOp>, queue: Sender<(MultiOp, WriteId, Op)> },
}

/// Runs a master until `shutdown` fires (Ok) or leadership cannot act
/// (Err naming why).
pub async fn run_master(opts: MasterOptions, shutdown: Receiver<()>) -> Result<(), String> {
    net::check_exposure(&opts.listen, opts.net.secret.is_some(), opts.insecure)?;
    let listener = TcpListener::bind(opts.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", opts.listen))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let advertise = opts.advertise.clone().unwrap_or_else(|| Addr(bound.to_string()));
    let (tx, rx) = async_channel::unbounded::<Input>();

    // Inputs from the outside world, each forwarded into the loop's channel.
    {
        let tx = tx.clone();
        smol::spawn(async move {
            loop {
                let accepted = listener.accept().await.map(|(s, _)| s);
                if tx.send(Input::Accepted(accepted)).await.is_err() {
                    break;
                }
            }
        })
        .detach();
    }
    {
        let tx = tx.clone();
        smol::spawn(async move {
            let _ = shutdown.recv().await;
            let _ = tx.send(Input::Shutdown).await;
        })
        .detach();
    }
    if let Some(addr) = opts.http {
        let (qtx, qrx) = async_channel::unbounded::<HttpQuery>();
        http::serve(addr, qtx)?;
        let tx = tx.clone();
        smol::spawn(async move {
            while let Ok(q) = qrx.recv().await {
                if tx.send(Input::Http(q)).await.is_err() {
                    break;
                }
            }
        })
        .detach();
    }

    let mut cfg = master::Config::new(MasterId::new(opts.id.clone()), advertise.clone());
    cfg.worker_timeout = Millis(opts.worker_timeout.as_millis() as u64);
    cfg.recovery_timeout =
        Millis(opts.recovery_timeout.unwrap_or(opts.worker_timeout).as_millis() as u64);
    cfg.heartbeat_interval = Millis(opts.heartbeat_interval.as_millis() as u64);

    let mut elector: Option<ElectorHandle> = None;
    let mut pending: VecDeque<master::Event> = VecDeque::new();
    let store = match &opts.recovery {
        Recovery::None => {
            pending.push_back(master::Event::Elected {
                floor: Epoch(0),
                clock: crate::wall_clock_ms(),
            });
            Store::Local(LocalStore::Memory)
        }
        Recovery::Filesystem { dir } => {
            let sink = tx.clone();
            let store = LocalStore::open_files(dir, &opts.id, move |events| {
                let _ = sink.send_blocking(Input::Store(StoreEvent::Events(events)));
            })?;
            pending.push_back(master::Event::Elected {
                floor: Epoch(0),
                clock: crate::wall_clock_ms(),
            });
            Store::Local(store)
        }
        Recovery::Zookeeper { hosts, root, session_timeout } => {
            let mut zkc = ZkConfig::new(hosts.clone());
            if let Some(secret) = &opts.net.secret {
                zkc = zkc.with_secret(secret.expose().to_vec());
            }
            let store = ZkStore::open(&zkc, root, *session_timeout)
                .await
                .map_err(|e| format!("cannot open the ZooKeeper store at {hosts}{root}: {e}"))?;
            let store = Arc::new(store);
            let queue = spawn_zk_writer(store.clone(), tx.clone());
            let mut ecfg = regent_core::elector::Config::new(
                root.clone(),
                net::random_u64(),
                MasterId::new(opts.id.clone()),
                advertise.clone(),
            );
            ecfg.session_timeout = Millis(session_timeout.as_millis() as u64);
            let (handle, outcomes, task) = zk::spawn_elector(ecfg, zkc);
            task.detach();
            let tx2 = tx.clone();
            smol::spawn(async move {
                while let Ok(o) = outcomes.recv().await {
                    if tx2.send(Input::Elector(o)).await.is_err() {
                        break;
                    }
                }
            })
            .detach();
            elector = Some(handle);
            Store::Zookeeper { store, fence: None, queue }
        }
    };
    if let Some(ready) = &opts.ready {
        let _ = ready.send(bound).await;
    }
    tracing::info!(id = %opts.id, listen = %bound, advertise = %advertise, "master listening");

    let mut d = Daemon {
        start: Instant::now(),
        machine: Master::new(cfg),
        net: opts.net.clone(),
        tx: tx.clone(),
        conns: HashMap::new(),
        closed_by_us: HashSet::new(),
        next_conn: 1,
        timers: BTreeMap::new(),
        store,
        rejected_connections: 0,
    };
    loop {
        while let Some(event) = pending.pop_front() {
            d.step(event, &mut pending)?;
        }
        let input = d.next_input(&rx).await;
        match input {
            Input::Shutdown => {
                tracing::info!("shutting down");
                if let Some(e) = &elector {
                    // Closing the session lets a standby take over at once.
                    e.shutdown().await;
                }
                for c in d.conns.values() {
                    c.close();
                }
                async_io::Timer::after(Duration::from_millis(100)).await;
                return Ok(());
            }
            Input::Deadline => {
                let now = d.now();
                let due: Vec<master::Timer> =
                    d.timers.iter().filter(|(_, at)| **at <= now).map(|(t, _)| *t).collect();
                for t in due {
                    d.timers.remove(&t);
                    pending.push_back(master::Event::Timer(t));
                }
            }
            Input::Accepted(Ok(stream)) => {
                let conn = ConnId(d.next_conn);
                d.next_conn += 1;
                let handle =
                    net::spawn_connection(stream, Side::Server, conn, d.net.clone(), d.net_sink());
                d.conns.insert(conn, handle);
                pending.push_back(master::Event::Connected { conn });
            }
            Input::Accepted(Err(e)) => {
                tracing::warn!("accept failed: {e}");
                async_io::Timer::after(Duration::from_millis(50)).await;
            }
            Input::Net(NetEvent::Message { conn, msg }) => {
                if d.conns.contains_key(&conn) {
                    pending.push_back(master::Event::Message { conn, msg });
                }
            }
            Input::Net(NetEvent::Closed { conn, reason }) => {
                if d.closed_by_us.remove(&conn) {
                    continue;
                }
                if let Some(h) = d.conns.remove(&conn) {
                    if net::is_refusal(&reason) {
                        d.rejected_connections += 1;
                        tracing::warn!(peer = %h.peer, %conn, "connection refused: {reason}");
                    } else {
                        tracing::debug!(peer = %h.peer, %conn, "connection closed: {reason}");
                    }
                    pending.push_back(master::Event::Disconnected { conn });
                }
            }
            Input::Elector(outcome) => match outcome {
                Outcome::LeaderIs { id, addr, floor } => pending
                    .push_back(master::Event::LeaderIs(LeaderHint { id, addr, epoch: floor })),
                Outcome::Elected { floor, fence } => {
                    if let Store::Zookeeper { fence: f, .. } = &mut d.store {
                        *f = Some(fence);
                    }
                    tracing::info!(%floor, "elected");
                    pending
                        .push_back(master::Event::Elected { floor, clock: crate::wall_clock_ms() });
                }
                Outcome::Suspended => pending.push_back(master::Event::Suspended),
                Outcome::Resumed => pending.push_back(master::Event::Resumed),
                Outcome::Revoked => {
                    if let Store::Zookeeper { fence, .. } = &mut d.store {
                        *fence = None;
                    }
                    pending.push_back(master::Event::Revoked)
                }
            },
            Input::Store(StoreEvent::Events(events)) => pending.extend(events),
            Input::Store(StoreEvent::Loaded(Ok(records))) => {
                pending.push_back(master::Event::Loaded { records })
            }
            Input::Store(StoreEvent::Loaded(Err(reason))) => {
                pending.push_back(master::Event::LoadFailed { reason })
            }
            Input::Http(q) => {
                let snapshot = HttpSnapshot {
                    state: d.machine.state(),
                    rejected_connections: d.rejected_connections,
                };
                let _ = q.reply.try_send(snapshot);
            }
        }
    }
}

/// The ZooKeeper writer: applies fenced writes one at a time, in order.
fn spawn_zk_writer(store: Arc<ZkStore>, tx: Sender<Input>) -> Sender<(MultiOp, WriteId, Op)> {
    let (qtx, qrx) = async_channel::unbounded::<(MultiOp, WriteId, Op)>();
    smol::spawn(async move {
        let mut failed: Option<String> = None;
        while let Ok((fence, id, op)) = qrx.recv().await {
            // A failed write is fatal to the leadership: never retried, and
            // every later one fails too.
            let event = match &failed {
                Some(reason) => master::Event::PersistFailed { write: id, reason: reason.clone() },
                None => match store.commit(&fence, vec![(id, op)]).await {
                    Ok(_) => master::Event::Persisted { write: id },
                    Err(e) => {
                        let reason = e.to_string();
                        failed = Some(reason.clone());
                        master::Event::PersistFailed { write: id, reason }
                    }
                },
            };
            if tx.send(Input::Store(StoreEvent::Events(vec![event]))).await.is_err() {
                break;
            }
        }
    })
    .detach();
    qtx
}

struct Daemon {
    start: Instant,
    machine: Master,
    net: Arc<NetConfig>,
    tx: Sender<Input>,
    conns: HashMap<ConnId, ConnHandle>,
    closed_by_us: HashSet<ConnId>,
    next_conn: u64,
    timers: BTreeMap<master::Timer, Millis>,
    store: Store,
    rejected_connections: u64,
}

impl Daemon {
    fn now(&self) -> Millis {
        crate::millis_since(self.start)
    }

    fn net_sink(&self) -> Sender<NetEvent> {
        let (ntx, nrx) = async_channel::unbounded::<NetEvent>();
        let tx = self.tx.clone();
        smol::spawn(async move {
            while let Ok(e) = nrx.recv().await {
                if tx.send(Input::Net(e)).await.is_err() {
                    break;
                }
            }
        })
        .detach();
        ntx
    }

    async fn next_input(&self, rx: &Receiver<Input>) -> Input {
        let deadline = self.timers.values().min().copied();
        let recv = async { rx.recv().await.unwrap_or(Input::Shutdown) };
        match deadline {
            None => recv.await,
            Some(at) => {
                let when = self.start + Duration::from_millis(at.0);
                smol::future::or(recv, async move {
                    async_io::Timer::at(when).await;
                    Input::Deadline
                })
                .await
            }
        }
    }

    /// One `handle` call, then every action in order.
    fn step(
        &mut self,
        event: master::Event,
        pending: &mut VecDeque<master::Event>,
    ) -> Result<(), String> {
        let now = self.now();
        for action in self.machine.handle(now, event) {
            match action {
                master::Action::Send { conn, msg } => {
                    if let Some(c) = self.conns.get(&conn) {
                        c.send(msg);
                    }
                }
                master::Action::Close { conn, reason } => {
                    if let Some(c) = self.conns.remove(&conn) {
                        tracing::info!(peer = %c.peer, %conn, "closing: {reason}");
                        c.close();
                        self.closed_by_us.insert(conn);
                    }
                }
                master::Action::Persist { write, record } => {
                    self.write(write, Op::Put(record), pending)
                }
                master::Action::Unpersist { write, key, incarnation } => {
                    self.write(write, Op::Delete { key, incarnation }, pending)
                }
                master::Action::LoadRecords => match &mut self.store {
                    Store::Local(local) => pending.push_back(local.load()),
                    Store::Zookeeper { store, .. } => {
                        let (store, tx) = (store.clone(), self.tx.clone());
                        smol::spawn(async move {
                            let r = store.load().await.map_err(|e| e.to_string());
                            let _ = tx.send(Input::Store(StoreEvent::Loaded(r))).await;
                        })
                        .detach();
                    }
                },
                master::Action::SetTimer { timer, at } => {
                    self.timers.insert(timer, at);
                }
                master::Action::Abdicate { reason } => {
                    // DESIGN rule 8: a leader that cannot make its state
                    // durable stops, so a standby (or a restart) takes over.
                    return Err(format!("giving up leadership: {reason}"));
                }
            }
        }
        Ok(())
    }

    fn write(&mut self, write: WriteId, op: Op, pending: &mut VecDeque<master::Event>) {
        match &mut self.store {
            Store::Local(local) => pending.extend(local.write(write, op)),
            Store::Zookeeper { fence, queue, .. } => match fence.clone() {
                Some(f) => {
                    let _ = queue.try_send((f, write, op));
                }
                None => pending.push_back(master::Event::PersistFailed {
                    write,
                    reason: "not elected: no election node to fence the write".into(),
                }),
            },
        }
    }
}

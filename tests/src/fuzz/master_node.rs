//! Fuzz target `master_node`: [`MasterNode::handle`] over an input sequence
//! built from the bytes, with the harness as the runtime.
//!
//! The first bytes choose the configuration: single-master or ZooKeeper
//! leadership (the pure [`ZkModel`] as the server), whether store writes
//! and ZooKeeper replies are answered at once after every input or only
//! when the bytes say so, placement, and small or default limits on
//! frameworks and retries. Then each step is one of:
//!
//! * a connection opens or closes;
//! * a peer message on a connection — built structurally (any variant a
//!   peer may send, numbers at and past the limits, odd strings), built
//!   *from what the node said* (a report of an executor it launched, on the
//!   worker connection it launched it on; a declaration or a kill on a
//!   live subscription; a sane registration or subscription on a fresh
//!   connection), or decoded from raw bytes by the codec;
//! * time passes (to the node's next deadline, a little, or a long pause)
//!   and `Tick` fires;
//! * the store answers (writes durable or failed, records loaded — what
//!   the node wrote plus generated records — or a failed load);
//! * ZooKeeper: deliver queued replies, watches and session events; lose
//!   the connection (queued replies become `ConnectionLoss`), come back,
//!   expire the session; another client plants or deletes candidate nodes
//!   (valid or junk data) and record nodes (valid images of generated
//!   records, or junk; in their shards, or in the flat layout of earlier
//!   versions, which the next load moves), and deletes shard nodes;
//! * rarely, an operator's step-down or stop.
//!
//! Invariants: no panic, no allocation over the limit, every message the
//! node sends fits the maximum frame and survives an encode/decode round
//! trip (a `StateReply` of a large cluster excepted, see
//! `frames::check_sent`), every record it asks
//! the store to write fits [`MAX_RECORD_PAYLOAD`] and every ZooKeeper
//! write fits [`MAX_RECORD_IMAGE`] (docs/design.md#issue-11: a record the store cannot
//! write is refused before it is persisted).

use super::frames::check_sent;
use super::gen::{self, Source};
use regent_core::codec::{self, DecoderConfig};
use regent_core::elector::{self, CandidateData, CandidateName};
use regent_core::ids::InstanceId;
use regent_core::limits::MAX_RECORD_PAYLOAD;
use regent_core::master;
use regent_core::node::master::{Config, Input, Leadership, Output};
use regent_core::node::{DialId, DialResult, Ended, MasterNode, ProbeResult};
use regent_core::policy::Placement;
use regent_core::protocol::{
    ExecutorReport, GroupSpec, Hello, LogRead, LogStream, Message, RegisterWorker, Subscribe,
    PROTOCOL_VERSION,
};
use regent_core::store::StoreCommand;
use regent_core::store::StoreEvent;
use regent_core::store::{
    format, names, FrameworkRecord, GroupRecord, Record, RecordKey, SlotOutcome, WorkerRecord,
    WriteId,
};
use regent_core::testkit::zk::ZkModel;
use regent_core::zk::layout;
use regent_core::zk::MAX_RECORD_IMAGE;
use regent_core::zk::{CreateMode, MultiOp, SessionId, ZkCommand, ZkError, ZkEvent, ZkOp};
use regent_core::{Addr, ConnId, ExecutorId, FrameworkId, Incarnation, MasterId, Millis, WorkerId};
use std::collections::{BTreeMap, VecDeque};

/// Steps chosen by the bytes, at most.
const MAX_STEPS: usize = 256;
/// `handle` calls in all (pumped answers included), at most.
const MAX_CALLS: usize = 2048;
/// How many ids of each kind the harness remembers.
const POOL: usize = 32;
/// The ZooKeeper root.
const ROOT: &str = "/regent";
/// This master's election GUID.
const GUID: u64 = 0x6d30;

/// Runs one input (see the module docs).
pub fn target(data: &[u8]) {
    let mut src = Source::new(data);
    let mut h = Harness::new(&mut src);
    h.feed(Input::Start);
    h.pump();
    let mut steps = 0;
    while !src.is_empty() && steps < MAX_STEPS && h.calls < MAX_CALLS {
        steps += 1;
        h.step(&mut src);
        h.pump();
    }
    // What an operator would look at, at the end.
    let state = h.node.master().state();
    check_sent(&Message::StateReply(Box::new(state)));
    let _ = (h.node.poll_timeout(), h.node.metrics(), h.node.store_backlog());
}

/// An executor the node launched, and where.
#[derive(Clone, Debug)]
struct Launched {
    conn: ConnId,
    executor: ExecutorId,
    framework: FrameworkId,
    cores: u32,
    memory_mb: u64,
}

/// The ZooKeeper side of the runtime.
#[derive(Debug)]
struct Zk {
    model: ZkModel,
    session: Option<SessionId>,
    /// A session asked for while the connection was down.
    wants: Option<Millis>,
    up: bool,
    events: VecDeque<ZkEvent>,
    /// Another client, planting nodes.
    planter: Option<SessionId>,
}

#[derive(Debug)]
struct Harness {
    node: MasterNode,
    now: Millis,
    calls: usize,
    zk: Option<Zk>,
    auto_zk: bool,
    auto_store: bool,
    writes: VecDeque<WriteId>,
    load_pending: bool,
    /// Dials the node asked for (its watch on the leader, its contacts of
    /// recorded peers), answered by [`Harness::dial_answer`].
    dials: VecDeque<DialId>,
    probes: VecDeque<u64>,
    store: BTreeMap<RecordKey, Record>,
    executors: Vec<ExecutorId>,
    frameworks: Vec<FrameworkId>,
    launched: Vec<Launched>,
    subscriptions: Vec<(ConnId, FrameworkId)>,
    workers: BTreeMap<ConnId, (WorkerId, Incarnation)>,
    /// Log reads the node relayed to a worker: (worker connection, relay,
    /// the most bytes asked for).
    reads: Vec<(ConnId, u64, u32)>,
    /// Open connections (the runtime never reuses a number).
    open: Vec<ConnId>,
    next_conn: u64,
    exited: bool,
}

fn remember<T: PartialEq>(pool: &mut Vec<T>, item: T) {
    if !pool.contains(&item) {
        if pool.len() >= POOL {
            pool.remove(0);
        }
        pool.push(item);
    }
}

impl Harness {
    fn new(src: &mut Source) -> Self {
        let flags = src.u8();
        let id = MasterId::new("m0");
        let addr = Addr::new("m0:7077");
        let mut mc = master::Config::new(id.clone(), addr.clone());
        mc.placement = if flags & 2 != 0 { Placement::Pack } else { Placement::Spread };
        if flags & 4 != 0 {
            mc.max_frameworks = 2;
            mc.max_executor_retries = 1;
        }
        let zookeeper = flags & 1 != 0;
        let leadership = if zookeeper {
            Leadership::Zookeeper(elector::Config::new(ROOT, GUID, id, addr))
        } else {
            Leadership::Single
        };
        let clock_base = if flags & 8 != 0 { 1_700_000_000_000 } else { 0 };
        Harness {
            node: MasterNode::new(Config {
                master: mc,
                leadership,
                clock_base,
                cluster: "regent".into(),
            }),
            now: Millis(0),
            calls: 0,
            zk: zookeeper.then(|| Zk {
                model: ZkModel::new(Millis(500)),
                session: None,
                wants: None,
                up: true,
                events: VecDeque::new(),
                planter: None,
            }),
            auto_zk: flags & 16 == 0,
            auto_store: flags & 32 == 0,
            writes: VecDeque::new(),
            load_pending: false,
            dials: VecDeque::new(),
            probes: VecDeque::new(),
            store: BTreeMap::new(),
            executors: Vec::new(),
            reads: Vec::new(),
            frameworks: Vec::new(),
            launched: Vec::new(),
            subscriptions: Vec::new(),
            workers: BTreeMap::new(),
            open: Vec::new(),
            next_conn: 0,
            exited: false,
        }
    }

    fn feed(&mut self, input: Input) {
        if self.calls >= MAX_CALLS || self.exited {
            return;
        }
        self.calls += 1;
        if gen::tracing() {
            eprintln!("[{}] {input:?}", self.now);
        }
        for output in self.node.handle(self.now, input) {
            self.absorb(output);
        }
    }

    fn absorb(&mut self, output: Output) {
        match output {
            Output::Send { conn, msg } => {
                check_sent(&msg);
                self.harvest(conn, &msg);
            }
            Output::Close { conn, .. } => self.forget_conn(conn),
            Output::Store(StoreCommand::Persist { write, record }) => {
                let len = format::payload_len(&record);
                assert!(
                    len <= MAX_RECORD_PAYLOAD,
                    "the master asked to persist {} with a payload of {len} bytes, over MAX_RECORD_PAYLOAD",
                    record.key()
                );
                self.store.insert(record.key(), record);
                self.writes.push_back(write);
            }
            Output::Store(StoreCommand::Unpersist { write, key, incarnation }) => {
                let matches = match (self.store.get(&key), incarnation) {
                    (Some(Record::Worker(w)), Some(inc)) => w.incarnation == inc,
                    _ => true,
                };
                if matches {
                    self.store.remove(&key);
                }
                self.writes.push_back(write);
            }
            Output::Store(StoreCommand::LoadRecords) => self.load_pending = true,
            Output::Dial { dial, .. } => self.dials.push_back(dial),
            Output::Probe { probe, .. } => self.probes.push_back(probe),
            Output::Zk(cmd) => self.zk_command(cmd),
            Output::Exit { .. } => self.exited = true,
            // The fuzzer asks no HTTP log reads.
            Output::Note(_)
            | Output::Answer { .. }
            | Output::ConnTimeouts { .. }
            | Output::Audit(_) => {}
        }
    }

    /// Remembers the ids the node hands out, so later messages name them.
    fn harvest(&mut self, conn: ConnId, msg: &Message) {
        match msg {
            Message::LaunchExecutor { executor, framework, spec, .. } => {
                remember(&mut self.executors, executor.clone());
                if self.launched.len() >= POOL {
                    self.launched.remove(0);
                }
                self.launched.push(Launched {
                    conn,
                    executor: executor.clone(),
                    framework: framework.clone(),
                    cores: spec.cores,
                    memory_mb: spec.memory_mb,
                });
            }
            Message::Subscribed { framework, executors, .. } => {
                remember(&mut self.frameworks, framework.clone());
                if self.subscriptions.len() >= POOL {
                    self.subscriptions.remove(0);
                }
                self.subscriptions.push((conn, framework.clone()));
                for info in executors {
                    remember(&mut self.executors, info.id.clone());
                }
            }
            Message::ExecutorUpdate { info, .. } => remember(&mut self.executors, info.id.clone()),
            Message::ReadLog { relay, max, .. } => {
                assert!(
                    *max <= regent_core::limits::MAX_LOG_CHUNK,
                    "a relayed read past the limit"
                );
                if self.reads.len() >= POOL {
                    self.reads.remove(0);
                }
                self.reads.push((conn, *relay, *max));
            }
            Message::LogChunk { data, .. } => {
                assert!(
                    data.len() <= regent_core::limits::MAX_LOG_CHUNK as usize,
                    "a chunk too big"
                );
            }
            _ => {}
        }
    }

    fn forget_conn(&mut self, conn: ConnId) {
        self.open.retain(|c| *c != conn);
        self.workers.remove(&conn);
        self.subscriptions.retain(|(c, _)| *c != conn);
    }

    /// An open connection, or a new one (the node adopts a connection it
    /// hears from without `Connected`).
    fn conn(&mut self, src: &mut Source) -> ConnId {
        match src.pick(&self.open) {
            Some(c) if !src.one_in(8) => *c,
            _ => self.fresh_conn(),
        }
    }

    fn fresh_conn(&mut self) -> ConnId {
        self.next_conn += 1;
        ConnId(self.next_conn)
    }

    fn send(&mut self, conn: ConnId, msg: Message) {
        if !self.open.contains(&conn) {
            self.open.push(conn);
        }
        if let Message::RegisterWorker(r) = &msg {
            self.workers.insert(conn, (r.worker.clone(), r.incarnation));
        }
        self.feed(Input::Message { conn, msg });
    }

    fn step(&mut self, src: &mut Source) {
        match src.u8() % 20 {
            0 => {
                let conn = self.fresh_conn();
                self.open.push(conn);
                self.feed(Input::Accepted { conn });
            }
            1 => {
                let Some(conn) = src.pick(&self.open).copied() else { return };
                self.forget_conn(conn);
                let how = self.how_ended();
                self.feed(Input::Closed { conn, how, reason: "reset (fuzz)".into() });
            }
            2..=6 => {
                let conn = self.conn(src);
                let msg = self.message(src);
                self.send(conn, msg);
            }
            7..=10 => self.informed_message(src),
            11 => {
                let conn = self.conn(src);
                if let Ok(msg) = codec::decode_body(src.sized(255), &DecoderConfig::default()) {
                    self.send(conn, msg);
                }
            }
            12 | 13 => self.tick(src),
            14 => self.store_answer(src),
            15 => self.load_answer(src),
            16 => {
                for _ in 0..=src.below(8) {
                    self.deliver_zk();
                }
            }
            17 => self.zk_fault(src),
            18 => self.plant(src),
            _ => match src.u8() % 8 {
                0 => self.feed(Input::StepDown),
                1 => self.feed(Input::Stop),
                2 => {
                    let conn = self.conn(src);
                    self.send(conn, Message::StepDown { request: u64::from(src.u8()) });
                }
                3 => {
                    // A local asker (the HTTP API): a sane job, or any
                    // message.
                    let msg = if src.bool() {
                        let job = sane_submission(src);
                        Message::SubmitJob { request: u64::from(src.u8()), job }
                    } else {
                        self.message(src)
                    };
                    let query = regent_core::ids::QueryId(self.calls as u64);
                    let ask = regent_core::node::master::Query::Command {
                        msg,
                        principal: Box::new(regent_core::token::Principal::Root),
                    };
                    self.feed(Input::Query { query, ask });
                }
                _ => {
                    // A peer connects and leaves without a word.
                    let conn = self.fresh_conn();
                    self.feed(Input::Accepted { conn });
                    let how = self.how_ended();
                    self.feed(Input::Closed { conn, how, reason: "reset (fuzz)".into() });
                }
            },
        }
    }

    /// Answers the oldest dial, connected (a fresh connection, which then
    /// carries whatever the fuzzer sends on it) and failed in turn. It takes
    /// no byte of the input, so the corpus keeps its meaning.
    fn dial_answer(&mut self) {
        // A probe of the fast takeover, refused three times in four (no
        // byte of the input either).
        if let Some(probe) = self.probes.pop_front() {
            let result = if self.calls.is_multiple_of(4) {
                ProbeResult::Accepted
            } else {
                ProbeResult::Refused
            };
            self.feed(Input::Probed { probe, result });
        }
        let Some(dial) = self.dials.pop_front() else { return };
        let result = if self.calls.is_multiple_of(2) {
            let conn = self.fresh_conn();
            self.open.push(conn);
            DialResult::Connected { conn, peer: None }
        } else {
            DialResult::Failed { reason: "connection refused".into(), refused: false }
        };
        self.feed(Input::Dialled { dial, result });
    }

    /// How a connection ended, from the call count (no byte of the input).
    fn how_ended(&self) -> Ended {
        match self.calls % 3 {
            0 => Ended::ByPeer,
            1 => Ended::TimedOut,
            _ => Ended::Failed,
        }
    }

    /// Answers the node's store and ZooKeeper requests when the
    /// configuration says they are answered at once.
    fn pump(&mut self) {
        for _ in 0..256 {
            let mut progressed = false;
            if self.auto_zk && self.zk.as_ref().is_some_and(|z| !z.events.is_empty()) {
                self.deliver_zk();
                progressed = true;
            }
            if self.auto_store && !self.writes.is_empty() {
                let write = self.writes.pop_front().expect("not empty");
                self.feed(Input::Store(StoreEvent::Persisted { write }));
                progressed = true;
            }
            if self.auto_store && self.load_pending {
                self.load_pending = false;
                let records = self.store.values().cloned().collect();
                self.feed(Input::Store(StoreEvent::Loaded { records }));
                progressed = true;
            }
            if !self.dials.is_empty() {
                self.dial_answer();
                progressed = true;
            }
            if !progressed || self.calls >= MAX_CALLS || self.exited {
                return;
            }
        }
    }

    // ----- peer messages --------------------------------------------------

    /// Any message a peer may send a master, built from the bytes alone
    /// (with the ids seen so far in the mix).
    fn message(&mut self, src: &mut Source) -> Message {
        let (ex, fw) = (&self.executors, &self.frameworks);
        match src.u8() % 24 {
            0 => Message::Hello(Hello {
                version: if src.one_in(8) { src.u16() } else { PROTOCOL_VERSION },
                cluster: gen::text(src, &["regent", "other"], 64),
                role: gen::role(src),
                node: gen::text(src, &["w0", "app"], 256),
            }),
            1 | 2 => Message::RegisterWorker(RegisterWorker {
                users: Default::default(),
                resources: gen::resource_offers(src),
                host: Default::default(),
                ports: Default::default(),
                worker: gen::worker_id(src),
                incarnation: gen::incarnation(src),
                cores: gen::u32_peer(src, regent_core::limits::MAX_CORES),
                memory_mb: gen::u64_peer(src, regent_core::limits::MAX_MEMORY_MB),
                executors: gen::reports(src, ex, fw),
                epoch_seen: gen::epoch(src),
                launch_seen: 0,
                attributes: vec![],
            }),
            3 => Message::WorkerHeartbeat { incarnation: gen::incarnation(src) },
            4 => Message::ExecutorStatus {
                incarnation: gen::incarnation(src),
                report: gen::report(src, ex, fw),
            },
            5 | 6 => Message::Subscribe(Subscribe {
                framework: if src.bool() { Some(gen::framework_id(src, fw)) } else { None },
                name: gen::text(src, &["app", "job"], regent_core::limits::MAX_NAME_BYTES),
                instance: InstanceId(u64::from(src.u8() % 4)),
                attempt: u64::from(src.u8()),
                failover_timeout: gen::millis(src),
                tenant: None,
            }),
            7 | 8 => {
                Message::DeclareGroup { request: u64::from(src.u8()), spec: gen::group_spec(src) }
            }
            9 => Message::KillExecutor {
                request: u64::from(src.u8()),
                executor: gen::executor_id(src, ex, fw),
            },
            10 => Message::Teardown { request: u64::from(src.u8()) },
            11 => Message::FrameworkHeartbeatAck { epoch: gen::epoch(src) },
            12 => Message::StateRequest,
            13 => {
                Message::RemoveWorker { request: u64::from(src.u8()), worker: gen::worker_id(src) }
            }
            14 => Message::KillFramework {
                request: u64::from(src.u8()),
                framework: gen::framework_id(src, fw),
            },
            15 => Message::LogRequest {
                request: u64::from(src.u8()),
                executor: gen::executor_id(src, ex, fw),
                stream: if src.bool() { LogStream::Stdout } else { LogStream::Stderr },
                offset: if src.bool() { Some(u64::from(src.u8())) } else { None },
                max: u32::from(src.u8()) << (src.u8() % 24),
            },
            16 => Message::LogData {
                relay: u64::from(src.u8() % 8),
                live: src.bool(),
                read: if src.bool() {
                    LogRead::Chunk {
                        offset: u64::from(src.u8()),
                        data: src.sized(255).to_vec(),
                        size: u64::from(src.u8()) << (src.u8() % 40),
                    }
                } else {
                    LogRead::Failed { reason: gen::text(src, &["no such file"], 64) }
                },
            },
            17 => Message::StepDown { request: u64::from(src.u8()) },
            // The operator's changes (docs/design.md#issue-14), with peer numbers anywhere.
            18 => {
                Message::CordonWorker { request: u64::from(src.u8()), worker: gen::worker_id(src) }
            }
            19 => Message::UncordonWorker {
                request: u64::from(src.u8()),
                worker: gen::worker_id(src),
            },
            20 => Message::DrainWorker {
                request: u64::from(src.u8()),
                worker: gen::worker_id(src),
                deadline: if src.bool() { gen::millis(src) } else { Millis(src.u64()) },
            },
            21 => Message::ScaleGroup {
                request: u64::from(src.u8()),
                framework: gen::framework_id(src, fw),
                group: gen::text(src, &["g", "h"], regent_core::limits::MAX_NAME_BYTES),
                slots: gen::u32_peer(src, regent_core::limits::MAX_SLOTS_PER_GROUP),
                remove: Vec::new(),
                stop: None,
            },
            22 => Message::OperatorKillExecutor {
                request: u64::from(src.u8()),
                executor: gen::executor_id(src, ex, fw),
                refill: src.bool(),
            },
            _ => match src.u8() % 4 {
                // Jobs the leader owns (docs/design.md#issue-43), with peer
                // numbers and names anywhere.
                0 => Message::SubmitJob { request: u64::from(src.u8()), job: submission(src, fw) },
                1 => Message::DeleteJob {
                    request: u64::from(src.u8()),
                    job: gen::framework_id(src, fw),
                },
                2 => Message::JobsRequest {
                    request: u64::from(src.u8()),
                    job: if src.bool() { Some(gen::framework_id(src, fw)) } else { None },
                },
                _ => Message::PlanRequest {
                    request: u64::from(src.u8()),
                    groups: (0..src.u8() % 4).map(|_| gen::group_spec(src)).collect(),
                    tenant: None,
                },
            },
        }
    }

    /// A message that follows from what the node said, on the connection
    /// it belongs to: how a run gets past registration and subscription to
    /// placement, reports, kills and failover.
    fn informed_message(&mut self, src: &mut Source) {
        match src.u8() % 8 {
            7 => {
                // A worker answers a read relayed to it: as asked, or not.
                if self.reads.is_empty() {
                    return;
                }
                let (conn, relay, max) = self.reads.remove(src.below(self.reads.len()));
                let len =
                    if src.one_in(8) { max as usize + 1 } else { src.below(max as usize + 1) };
                let read = if src.one_in(4) {
                    LogRead::Failed { reason: "no stdout file".into() }
                } else {
                    let offset = u64::from(src.u8());
                    let size = offset + len as u64 + u64::from(src.u8());
                    LogRead::Chunk { offset, data: vec![b'x'; len], size }
                };
                self.send(conn, Message::LogData { relay, live: src.bool(), read });
            }
            0 | 1 => {
                // A worker reports an executor launched on it.
                let Some(l) = src.pick(&self.launched).cloned() else { return };
                let incarnation = match self.workers.get(&l.conn) {
                    Some((_, inc)) => *inc,
                    None => gen::incarnation(src),
                };
                let report = ExecutorReport {
                    health: None,
                    ran_ms: None,
                    resources: Default::default(),
                    ports: Default::default(),
                    id: l.executor,
                    framework: l.framework,
                    cores: l.cores,
                    memory_mb: l.memory_mb,
                    state: gen::executor_state(src),
                };
                self.send(l.conn, Message::ExecutorStatus { incarnation, report });
            }
            2 => {
                // A registered worker heartbeats, or registers again
                // (reporting what it runs, as after a failover).
                let Some((conn, (worker, incarnation))) = src
                    .pick(&self.workers.iter().map(|(c, w)| (*c, w.clone())).collect::<Vec<_>>())
                    .cloned()
                else {
                    return;
                };
                if src.bool() {
                    self.send(conn, Message::WorkerHeartbeat { incarnation });
                } else if src.u8().is_multiple_of(4) {
                    // A usage sample: its executors, some unknown or
                    // another worker's, with any figures.
                    let (ex, fw) = (&self.executors, &self.frameworks);
                    let executors = (0..src.u8() % 4)
                        .map(|_| regent_core::protocol::ExecutorUsage {
                            executor: gen::executor_id(src, ex, fw),
                            usage: regent_core::protocol::Usage {
                                memory_bytes: src.bool().then(|| u64::from(src.u8()) << 20),
                                memory_peak_bytes: None,
                                cpu_usec: Some(u64::from(src.u8())),
                            },
                        })
                        .collect();
                    let usage = regent_core::protocol::WorkerUsage {
                        executors,
                        work_dir_free_bytes: Some(u64::MAX),
                        work_dir_total_bytes: None,
                    };
                    self.send(conn, Message::WorkerUsage { incarnation, usage });
                } else {
                    let executors = self
                        .launched
                        .iter()
                        .filter(|l| l.conn == conn)
                        .map(|l| ExecutorReport {
                            health: None,
                            ran_ms: None,
                            resources: Default::default(),
                            ports: Default::default(),
                            id: l.executor.clone(),
                            framework: l.framework.clone(),
                            cores: l.cores,
                            memory_mb: l.memory_mb,
                            state: gen::executor_state(src),
                        })
                        .collect();
                    let reg = RegisterWorker {
                        users: Default::default(),
                        resources: Default::default(),
                        host: Default::default(),
                        ports: Default::default(),
                        worker,
                        incarnation,
                        cores: 16,
                        memory_mb: 65_536,
                        executors,
                        epoch_seen: gen::epoch(src),
                        launch_seen: 0,
                        attributes: vec![],
                    };
                    self.send(conn, Message::RegisterWorker(reg));
                }
            }
            3 => {
                // A framework speaks on its live subscription.
                let Some((conn, framework)) = src.pick(&self.subscriptions).cloned() else {
                    return;
                };
                let (ex, fw) = (&self.executors, &self.frameworks);
                let msg = match src.u8() % 7 {
                    0 | 1 => {
                        Message::DeclareGroup { request: u64::from(src.u8()), spec: sane_spec(src) }
                    }
                    // A rolling update (max_parallel 0 is refused).
                    5 => Message::UpdateGroup {
                        request: u64::from(src.u8()),
                        spec: sane_spec(src),
                        max_parallel: u32::from(src.u8() % 4),
                    },
                    2 => Message::DeclareGroup {
                        request: u64::from(src.u8()),
                        spec: gen::group_spec(src),
                    },
                    3 => Message::KillExecutor {
                        request: u64::from(src.u8()),
                        executor: gen::executor_id(src, ex, fw),
                    },
                    4 => Message::Teardown { request: u64::from(src.u8()) },
                    _ => Message::KillFramework { request: u64::from(src.u8()), framework },
                };
                self.send(conn, msg);
            }
            4 => {
                // A sane worker registers on a fresh connection.
                let conn = self.fresh_conn();
                let reg = RegisterWorker {
                    users: Default::default(),
                    resources: Default::default(),
                    host: Default::default(),
                    ports: Default::default(),
                    worker: WorkerId(format!("w{}", src.u8() % 4)),
                    incarnation: Incarnation(u64::from(src.u8() % 4)),
                    cores: 1 + u32::from(src.u8() % 16),
                    memory_mb: 1024 * (1 + u64::from(src.u8() % 16)),
                    executors: Vec::new(),
                    epoch_seen: gen::epoch(src),
                    launch_seen: 0,
                    attributes: vec![],
                };
                self.send(conn, Message::RegisterWorker(reg));
            }
            5 => {
                // A sane subscriber subscribes on a fresh connection.
                let conn = self.fresh_conn();
                let framework = if src.bool() { src.pick(&self.frameworks).cloned() } else { None };
                let sub = Subscribe {
                    framework,
                    name: "app".into(),
                    instance: InstanceId(u64::from(src.u8() % 4)),
                    attempt: 1,
                    failover_timeout: Millis::from_secs(60),
                    tenant: None,
                };
                self.send(conn, Message::Subscribe(sub));
            }
            _ => {
                // An operator asks for the state, removes a worker, or
                // changes the cluster (cordon, drain, scale, kill).
                let conn = self.conn(src);
                let worker = WorkerId(format!("w{}", src.u8() % 4));
                let request = u64::from(src.u8());
                let msg = match src.u8() % 10 {
                    0 | 1 => Message::StateRequest,
                    // A plan of sane groups: it must change nothing.
                    9 => Message::PlanRequest {
                        request,
                        groups: (0..1 + src.u8() % 3).map(|_| sane_spec(src)).collect(),
                        tenant: None,
                    },
                    2 => Message::RemoveWorker { request, worker: gen::worker_id(src) },
                    3 => Message::CordonWorker { request, worker },
                    4 => Message::UncordonWorker { request, worker },
                    5 => Message::DrainWorker {
                        request,
                        worker,
                        deadline: Millis(u64::from(src.u16())),
                    },
                    6 => match src.pick(&self.frameworks).cloned() {
                        Some(framework) => Message::ScaleGroup {
                            request,
                            framework,
                            group: ["g", "h"][src.below(2)].into(),
                            slots: u32::from(src.u8() % 6),
                            remove: Vec::new(),
                            stop: None,
                        },
                        None => Message::StateRequest,
                    },
                    // The output of an executor seen launched.
                    7 => match src.pick(&self.executors).cloned() {
                        Some(executor) => Message::LogRequest {
                            request,
                            executor,
                            stream: LogStream::Stdout,
                            offset: if src.bool() { Some(0) } else { None },
                            max: 4096,
                        },
                        None => Message::StateRequest,
                    },
                    _ => {
                        let (ex, fw) = (&self.executors, &self.frameworks);
                        Message::OperatorKillExecutor {
                            request,
                            executor: gen::executor_id(src, ex, fw),
                            refill: src.bool(),
                        }
                    }
                };
                self.send(conn, msg);
            }
        }
    }

    // ----- time -------------------------------------------------------------

    fn tick(&mut self, src: &mut Source) {
        let before = self.now;
        self.now = gen::later(src, self.now, self.node.poll_timeout());
        let paused = self.now.since(before) > Millis(2_000);
        if let Some(zk) = &mut self.zk {
            // A connected client keeps its session alive, unless the
            // process was paused.
            if zk.up && !paused {
                for s in zk.session.iter().chain(zk.planter.iter()) {
                    zk.model.touch(self.now, *s);
                }
            }
            for s in zk.model.expire_due(self.now) {
                if zk.session == Some(s) && zk.up {
                    zk.session = None;
                    zk.events.push_back(ZkEvent::Expired { session: s });
                }
                if zk.planter == Some(s) {
                    zk.planter = None;
                }
            }
            flush_watches(zk);
        }
        self.feed(Input::Tick);
    }

    // ----- the single-master store -------------------------------------

    fn store_answer(&mut self, src: &mut Source) {
        for _ in 0..=src.below(4) {
            let Some(write) = self.writes.pop_front() else { return };
            let result = if src.one_in(16) {
                StoreEvent::PersistFailed { write, reason: "fsync failed (fuzz)".into() }
            } else {
                StoreEvent::Persisted { write }
            };
            self.feed(Input::Store(result));
        }
    }

    fn load_answer(&mut self, src: &mut Source) {
        if !self.load_pending {
            return;
        }
        self.load_pending = false;
        if src.one_in(8) {
            let reason = "record fuzz/w-x: CRC mismatch (fuzz)".into();
            self.feed(Input::Store(StoreEvent::LoadFailed { reason }));
            return;
        }
        let mut records: Vec<Record> = self.store.values().cloned().collect();
        for _ in 0..src.below(3) {
            records.push(record(src, &self.frameworks));
        }
        self.feed(Input::Store(StoreEvent::Loaded { records }));
    }

    // ----- ZooKeeper --------------------------------------------------------

    fn zk_command(&mut self, cmd: ZkCommand) {
        let now = self.now;
        let Some(zk) = &mut self.zk else { return };
        match cmd {
            ZkCommand::NewSession { timeout } => {
                // Events of an earlier session are not fed again.
                zk.session = None;
                zk.events.clear();
                if zk.up {
                    connect(zk, now, timeout);
                } else {
                    zk.wants = Some(timeout);
                }
            }
            ZkCommand::CloseSession { session } => {
                if zk.session == Some(session) {
                    if zk.up {
                        zk.model.close(session);
                    }
                    zk.session = None;
                    zk.events.clear();
                    flush_watches(zk);
                }
            }
            ZkCommand::Request { session, req, op } => {
                if zk.session != Some(session) {
                    return;
                }
                let data = match &op {
                    ZkOp::Create { data, .. } | ZkOp::SetData { data, .. } => data.len(),
                    ZkOp::Multi(ops) => ops
                        .iter()
                        .map(|o| match o {
                            MultiOp::Create { data, .. } | MultiOp::SetData { data, .. } => {
                                data.len()
                            }
                            _ => 0,
                        })
                        .sum(),
                    _ => 0,
                };
                assert!(
                    data <= MAX_RECORD_IMAGE,
                    "a ZooKeeper request carries {data} bytes of data"
                );
                let result = if zk.up {
                    zk.model.touch(now, session);
                    zk.model.execute(now, session, &op)
                } else {
                    Err(ZkError::ConnectionLoss)
                };
                zk.events.push_back(ZkEvent::Reply { req, result });
                flush_watches(zk);
            }
        }
    }

    fn deliver_zk(&mut self) {
        let Some(event) = self.zk.as_mut().and_then(|z| z.events.pop_front()) else { return };
        self.feed(Input::Zk(event));
    }

    fn zk_fault(&mut self, src: &mut Source) {
        let now = self.now;
        let Some(zk) = &mut self.zk else { return };
        match src.u8() % 3 {
            0 => {
                // The connection drops: replies not yet read are lost.
                if !zk.up {
                    return;
                }
                zk.up = false;
                for ev in &mut zk.events {
                    if let ZkEvent::Reply { result, .. } = ev {
                        *result = Err(ZkError::ConnectionLoss);
                    }
                }
                if let Some(s) = zk.session {
                    zk.model.forget_watches(s);
                    zk.events.push_back(ZkEvent::Disconnected { session: s });
                }
            }
            1 => {
                // It comes back: the session resumes, or it expired.
                if zk.up {
                    return;
                }
                zk.up = true;
                if let Some(s) = zk.session {
                    match zk.model.resume(now, s) {
                        Some(timeout) => {
                            zk.events.push_back(ZkEvent::SessionConnected { session: s, timeout })
                        }
                        None => {
                            zk.session = None;
                            zk.events.push_back(ZkEvent::Expired { session: s });
                        }
                    }
                }
                if let Some(timeout) = zk.wants.take() {
                    connect(zk, now, timeout);
                }
                flush_watches(zk);
            }
            _ => {
                // The server expires the session.
                if let Some(s) = zk.session {
                    zk.model.expire(s);
                    if zk.up {
                        zk.session = None;
                        zk.events.push_back(ZkEvent::Expired { session: s });
                    }
                    flush_watches(zk);
                }
            }
        }
    }

    /// Another ZooKeeper client creates or deletes candidate and record
    /// nodes (a rival master, an operator, an attacker).
    fn plant(&mut self, src: &mut Source) {
        let now = self.now;
        let frameworks = self.frameworks.clone();
        let Some(zk) = &mut self.zk else { return };
        let planter = match zk.planter {
            Some(s) => s,
            None => {
                let (s, _) = zk.model.connect(now, Millis(10_000));
                zk.planter = Some(s);
                s
            }
        };
        let election = format!("{ROOT}/election");
        let state = format!("{ROOT}/state");
        let op = match src.u8() % 5 {
            0 | 1 => {
                let guid = if src.one_in(4) { GUID } else { u64::from(src.u8()) };
                let data = if src.bool() {
                    CandidateData {
                        id: MasterId::new("m9"),
                        addr: Addr::new("m9:7077"),
                        acting_lease: Millis(100),
                    }
                    .encode()
                } else {
                    src.sized(64).to_vec()
                };
                let path =
                    format!("{election}/{}", CandidateName::prefix(guid, u64::from(src.u8() % 3)));
                ZkOp::Create { path, data, mode: CreateMode::EphemeralSequential }
            }
            2 => {
                let Some(name) = src.pick(&zk.model.children(&election)).cloned() else { return };
                ZkOp::Delete { path: format!("{election}/{name}"), version: None }
            }
            3 => {
                let record = record(src, &frameworks);
                let stem = names::key_stem(&record.key());
                // In its shard, or (one stem length in three, so that no
                // byte of the input changes meaning) flat, as an earlier
                // version wrote it: the next load moves it.
                let path = if stem.len().is_multiple_of(3) {
                    layout::flat_path(&state, &stem)
                } else {
                    layout::stem_path(&state, &stem)
                };
                if let Some((parent, _)) = path.rsplit_once('/') {
                    let op = ZkOp::Create {
                        path: parent.to_owned(),
                        data: Vec::new(),
                        mode: CreateMode::Persistent,
                    };
                    let _ = zk.model.execute(now, planter, &op);
                }
                let mut data = format::encode(&record).unwrap_or_default();
                if src.one_in(4) && !data.is_empty() {
                    let at = src.below(data.len());
                    data[at] ^= src.u8().max(1);
                } else if src.one_in(4) {
                    data = src.sized(128).to_vec();
                }
                if zk.model.node(&path).is_some() {
                    ZkOp::SetData { path, data, version: None }
                } else {
                    ZkOp::Create { path, data, mode: CreateMode::Persistent }
                }
            }
            _ => {
                // A record node in either layout, or a shard node (deleted
                // when empty: the next fresh record there creates it again).
                let mut paths: Vec<String> = layout::record_nodes(&state, |p| zk.model.children(p))
                    .into_iter()
                    .map(|n| n.path)
                    .collect();
                paths.extend(zk.model.children(&state).into_iter().filter_map(|name| {
                    layout::parse_shard(&name).map(|_| format!("{state}/{name}"))
                }));
                let Some(path) = src.pick(&paths).cloned() else { return };
                ZkOp::Delete { path, version: None }
            }
        };
        zk.model.touch(now, planter);
        let _ = zk.model.execute(now, planter, &op);
        flush_watches(zk);
    }
}

fn connect(zk: &mut Zk, now: Millis, timeout: Millis) {
    let (session, negotiated) = zk.model.connect(now, timeout);
    zk.session = Some(session);
    zk.events.push_back(ZkEvent::SessionConnected { session, timeout: negotiated });
}

/// Queues the watches fired for our session (the planter's are dropped).
fn flush_watches(zk: &mut Zk) {
    if let Some(p) = zk.planter {
        zk.model.take_notifications(p);
    }
    let Some(s) = zk.session else { return };
    if !zk.up {
        return;
    }
    for event in zk.model.take_notifications(s) {
        zk.events.push_back(ZkEvent::Watch { session: s, event });
    }
}

/// A group a well-behaved subscriber declares.
/// A job submission built from the bytes alone: any id (one seen, or
/// another), any groups, key, version and parallelism.
fn submission(src: &mut Source, known: &[FrameworkId]) -> regent_core::api::JobSubmission {
    regent_core::api::JobSubmission {
        job: gen::framework_id(src, known),
        name: gen::text(src, &["web", "etl"], regent_core::limits::MAX_NAME_BYTES + 1),
        groups: (0..src.u8() % 4).map(|_| gen::group_spec(src)).collect(),
        key: if src.bool() {
            Some(gen::text(src, &["k1", "k2", ""], regent_core::api::MAX_IDEMPOTENCY_KEY_BYTES + 1))
        } else {
            None
        },
        expect_version: if src.bool() { Some(u64::from(src.u8() % 4)) } else { None },
        max_parallel: u32::from(src.u8() % 3),
        tenant: if src.bool() {
            Some(gen::text(src, &["team-a", "default", "a/b"], 70))
        } else {
            None
        },
    }
}

/// A job a sane client submits: one of three ids, sane groups, one of a
/// few keys.
fn sane_submission(src: &mut Source) -> regent_core::api::JobSubmission {
    let job = FrameworkId::new(["j0", "j1", "j2"][src.below(3)]);
    regent_core::api::JobSubmission {
        name: job.as_str().to_owned(),
        job,
        groups: (0..1 + src.u8() % 2).map(|_| sane_spec(src)).collect(),
        key: if src.bool() { Some(format!("k{}", src.u8() % 4)) } else { None },
        expect_version: if src.one_in(4) { Some(u64::from(src.u8() % 3)) } else { None },
        max_parallel: 1 + u32::from(src.u8() % 2),
        tenant: None,
    }
}

fn sane_spec(src: &mut Source) -> GroupSpec {
    GroupSpec {
        group: ["g", "h"][src.below(2)].into(),
        slots: 1 + u32::from(src.u8() % 4),
        command: vec!["/bin/true".into()],
        env: Vec::new(),
        cores: 1 + u32::from(src.u8() % 2),
        memory_mb: 64,
        policy: Default::default(),
        launch: Default::default(),
    }
}

/// A record as a store might hold it: generated (consistent or not), or
/// decoded from raw bytes.
fn record(src: &mut Source, frameworks: &[FrameworkId]) -> Record {
    match src.u8() % 4 {
        0 => Record::Epoch(gen::epoch(src)),
        1 => Record::Worker(WorkerRecord {
            dead: false,
            id: gen::worker_id(src),
            incarnation: gen::incarnation(src),
            cores: gen::u32_peer(src, regent_core::limits::MAX_CORES),
            memory_mb: gen::u64_peer(src, regent_core::limits::MAX_MEMORY_MB),
            callback: src.bool().then(|| Addr::new(gen::text(src, &["10.0.0.7:7078"], 300))),
            maintenance: None,
        }),
        2 => {
            let groups = (0..src.below(3))
                .map(|_| {
                    let spec = if src.bool() { sane_spec(src) } else { gen::group_spec(src) };
                    let n =
                        if src.one_in(4) { src.below(4) } else { (spec.slots as usize).min(64) };
                    let slots = (0..n)
                        .map(|_| match src.u8() % 5 {
                            0 | 1 => SlotOutcome::Pending,
                            2 => SlotOutcome::Done {
                                executor: gen::executor_id(src, &[], frameworks),
                            },
                            3 => SlotOutcome::Removed {
                                executor: gen::executor_id(src, &[], frameworks),
                            },
                            _ => SlotOutcome::Failed {
                                executor: gen::executor_id(src, &[], frameworks),
                                reason: gen::text(src, &["boom"], 256),
                            },
                        })
                        .collect();
                    GroupRecord {
                        replacing: Default::default(),
                        preempted: Default::default(),
                        counted: Default::default(),
                        deployment: None,
                        eras: Vec::new(),
                        spec,
                        slots,
                        retries_used: gen::u32_peer(src, 10),
                        restarts: Default::default(),
                    }
                })
                .collect();
            Record::Framework(FrameworkRecord {
                id: gen::framework_id(src, frameworks),
                name: gen::text(src, &["app"], 256),
                failover_timeout_ms: gen::millis(src).0,
                groups,
                callback: src.bool().then(|| Addr::new(gen::text(src, &["10.0.0.8:7079"], 300))),
                registered_at_ms: None,
                job: None,
                tenant: None,
            })
        }
        _ => postcard::from_bytes(src.sized(128)).unwrap_or(Record::Epoch(gen::epoch(src))),
    }
}

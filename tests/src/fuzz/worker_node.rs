//! Fuzz target `worker_node`: [`WorkerNode::handle`] over an input sequence
//! built from the bytes, with the harness as the runtime.
//!
//! The first byte chooses the configuration (resources, retry intervals).
//! Then each step is one of: a dial the node asked for completes (or fails,
//! or a dial it never asked for completes); a master message arrives on a
//! connection — built structurally (every variant, any epoch, hints to
//! unknown masters, long master lists, launches with numbers past the
//! limits), built to follow the protocol (a leading `HelloReply`, then
//! `Registered`, launches, kills and acks of executors the node started, a
//! newer leader), or decoded from raw bytes; a connection closes; an
//! executor the node started changes state (or a kill completes); the
//! runtime reports an executor left behind; time passes and `Tick` fires;
//! rarely, shutdown begins.
//!
//! Invariants: no panic, no allocation over the limit, every message the
//! node sends fits the maximum frame and survives an encode/decode round
//! trip.

use super::frames::check_sent;
use super::gen::{self, Source};
use regent_core::codec::{self, DecoderConfig};
use regent_core::node::worker::{
    DialId, DialResult, ExecutorCommand, Input, LogReadRequest, Output,
};
use regent_core::node::WorkerNode;
use regent_core::protocol::{
    ExecutorSpec, ExecutorState, HelloReply, LeaderHint, LogRead, LogStream, Message, Role,
};
use regent_core::worker;
use regent_core::{
    Addr, ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, MasterId, Millis, WorkerId,
};

/// Steps chosen by the bytes, at most.
const MAX_STEPS: usize = 256;
/// How many ids of each kind the harness remembers.
const POOL: usize = 32;
const MASTERS: [&str; 3] = ["m0:7077", "m1:7077", "m2:7077"];

/// Runs one input (see the module docs).
pub fn target(data: &[u8]) {
    let mut src = Source::new(data);
    let mut h = Harness::new(&mut src);
    h.feed(Input::Start);
    let mut steps = 0;
    while !src.is_empty() && steps < MAX_STEPS && !h.exited {
        steps += 1;
        h.step(&mut src);
    }
    let _ = (h.node.status(), h.node.poll_timeout(), h.node.open_connections());
}

#[derive(Debug)]
struct Harness {
    node: WorkerNode,
    now: Millis,
    dials: Vec<(DialId, Addr)>,
    conns: Vec<(ConnId, Addr)>,
    started: Vec<ExecutorId>,
    kills: Vec<ExecutorId>,
    /// Log reads the node asked for and the harness has not answered.
    reads: Vec<u64>,
    /// The highest epoch the harness's masters have claimed.
    epoch: u64,
    next_conn: u64,
    next_executor: u64,
    exited: bool,
}

impl Harness {
    fn new(src: &mut Source) -> Self {
        let flags = src.u8();
        let masters = MASTERS[..1 + usize::from(flags % 2)].iter().map(|m| Addr::new(*m)).collect();
        let (cores, memory_mb) = if flags & 2 != 0 { (4, 4096) } else { (64, 1 << 20) };
        let mut config = worker::Config::new(
            "regent",
            WorkerId::new("w0"),
            Incarnation(0x1000 + u64::from(flags)),
            masters,
            cores,
            memory_mb,
        );
        if flags & 4 != 0 {
            config.initial_retries = 1;
            config.total_retries = 2;
        }
        Harness {
            node: WorkerNode::new(config),
            now: Millis(0),
            dials: Vec::new(),
            conns: Vec::new(),
            started: Vec::new(),
            kills: Vec::new(),
            reads: Vec::new(),
            epoch: 1,
            next_conn: 0,
            next_executor: 0,
            exited: false,
        }
    }

    fn feed(&mut self, input: Input) {
        if gen::tracing() {
            eprintln!("[{}] {input:?}", self.now);
        }
        for output in self.node.handle(self.now, input) {
            match output {
                Output::Dial { dial, master } => self.dials.push((dial, master)),
                Output::Send { msg, .. } => check_sent(&msg),
                Output::Close { conn, .. } => self.conns.retain(|(c, _)| *c != conn),
                Output::Executor(ExecutorCommand::Start { executor, .. }) => {
                    if self.started.len() >= POOL {
                        self.started.remove(0);
                    }
                    self.started.push(executor);
                }
                Output::Executor(
                    ExecutorCommand::Kill { executor } | ExecutorCommand::Stop { executor, .. },
                ) => {
                    if self.kills.len() < POOL {
                        self.kills.push(executor);
                    }
                }
                // A run is an order to the runtime; the fuzzer answers none
                // (its backstop counts it skipped).
                Output::Executor(ExecutorCommand::RunCheck(_)) => {}
                Output::Exit { .. } => self.exited = true,
                Output::ReadLog(LogReadRequest { read, max, .. }) => {
                    assert!(max <= regent_core::limits::MAX_LOG_CHUNK, "a read past the limit");
                    if self.reads.len() < POOL {
                        self.reads.push(read);
                    }
                }
                Output::Note(_) | Output::ConnTimeouts { .. } => {}
            }
        }
        if self.dials.len() > POOL {
            self.dials.remove(0);
        }
    }

    fn conn(&mut self, src: &mut Source) -> ConnId {
        match src.pick(&self.conns) {
            Some((c, _)) if !src.one_in(8) => *c,
            _ => ConnId(u64::from(src.u8() % 8)),
        }
    }

    fn step(&mut self, src: &mut Source) {
        match src.u8() % 20 {
            0 | 1 => {
                if self.dials.is_empty() {
                    return;
                }
                let (dial, master) = self.dials.remove(src.below(self.dials.len()));
                let result = if src.one_in(4) {
                    DialResult::Failed { reason: "refused (fuzz)".into(), refused: src.bool() }
                } else {
                    self.next_conn += 1;
                    self.conns.push((ConnId(self.next_conn), master));
                    DialResult::Connected { conn: ConnId(self.next_conn), peer: None }
                };
                self.feed(Input::Dialled { dial, result });
            }
            2 => {
                // A dial the node never asked for, or one it superseded.
                self.next_conn += 1;
                let conn = ConnId(self.next_conn);
                let dial = DialId(u64::from(src.u8()));
                self.feed(Input::Dialled {
                    dial,
                    result: DialResult::Connected { conn, peer: None },
                });
            }
            3..=7 => {
                let conn = self.conn(src);
                let msg = self.message(src);
                self.feed(Input::Message { conn, msg });
            }
            8..=11 => self.informed_message(src),
            12 => {
                let conn = self.conn(src);
                if let Ok(msg) = codec::decode_body(src.sized(255), &DecoderConfig::default()) {
                    self.feed(Input::Message { conn, msg });
                }
            }
            13 => {
                let conn = self.conn(src);
                self.conns.retain(|(c, _)| *c != conn);
                self.feed(Input::Closed {
                    conn,
                    how: regent_core::node::Ended::ByPeer,
                    reason: "reset (fuzz)".into(),
                });
            }
            14 => {
                let executor = match src.pick(&self.started) {
                    Some(e) if !src.one_in(8) => e.clone(),
                    _ => gen::executor_id(src, &[], &[]),
                };
                let state = gen::executor_state(src);
                self.feed(Input::ExecutorChanged { executor, state });
            }
            15 => {
                if !self.kills.is_empty() {
                    let executor = self.kills.remove(src.below(self.kills.len()));
                    self.feed(Input::ExecutorChanged { executor, state: ExecutorState::Killed });
                }
            }
            16 => {
                let report = gen::report(src, &self.started, &[]);
                self.feed(Input::LeftBehind(report));
            }
            17 | 18 => {
                self.now = gen::later(src, self.now, self.node.poll_timeout());
                self.feed(Input::Tick);
            }
            _ => {
                if !self.reads.is_empty() && src.bool() {
                    let read = self.reads.remove(src.below(self.reads.len()));
                    let result = if src.bool() {
                        LogRead::Chunk {
                            offset: u64::from(src.u8()),
                            data: src.sized(64).to_vec(),
                            size: u64::from(src.u8()) * 4,
                        }
                    } else {
                        LogRead::Failed { reason: gen::text(src, &["no such file"], 64) }
                    };
                    self.feed(Input::LogRead { read, result });
                } else if src.one_in(4) {
                    self.feed(Input::Stop);
                }
            }
        }
    }

    fn hint(&self, src: &mut Source) -> LeaderHint {
        LeaderHint {
            id: MasterId(gen::text(src, &["m0", "m1", "m2"], 256)),
            addr: addr(src),
            epoch: gen::epoch(src),
        }
    }

    /// Any message a master may send (and a few it may not), from the bytes.
    fn message(&mut self, src: &mut Source) -> Message {
        match src.u8() % 16 {
            0 => Message::HelloReply(HelloReply {
                role: Role::Master,
                master: MasterId(gen::text(src, &["m0", "m1"], 256)),
                leading: src.bool(),
                epoch: gen::epoch(src),
                leader: if src.bool() { Some(self.hint(src)) } else { None },
                masters: addrs(src),
            }),
            1 => Message::Registered {
                epoch: gen::epoch(src),
                heartbeat_interval: gen::millis(src),
                duplicate: src.bool(),
                masters: addrs(src),
            },
            2 => Message::NotLeader {
                epoch: gen::epoch(src),
                leader: if src.bool() { Some(self.hint(src)) } else { None },
            },
            3 => Message::HeartbeatAck { epoch: gen::epoch(src) },
            4 => Message::ReconnectWorker { epoch: gen::epoch(src) },
            5 => Message::Shutdown {
                epoch: gen::epoch(src),
                reason: gen::text(src, &["conflict"], 256),
            },
            6 => Message::MasterChanged {
                epoch: gen::epoch(src),
                leader: self.hint(src),
                masters: addrs(src),
            },
            7 => Message::LeaderSuspended { epoch: gen::epoch(src) },
            8 | 9 => {
                let spec = gen::group_spec(src);
                Message::LaunchExecutor {
                    epoch: gen::epoch(src),
                    executor: gen::executor_id(src, &self.started, &[]),
                    framework: gen::framework_id(src, &[]),
                    spec: ExecutorSpec {
                        command: spec.command,
                        env: spec.env,
                        cores: spec.cores,
                        memory_mb: spec.memory_mb,
                        launch: Default::default(),
                    },
                    // Drawn from nothing: the corpus keeps its meaning.
                    launch: 1,
                }
            }
            10 => Message::KillExecutorOnWorker {
                epoch: gen::epoch(src),
                executor: gen::executor_id(src, &self.started, &[]),
            },
            11 => Message::ExecutorStatusAck {
                epoch: gen::epoch(src),
                executor: gen::executor_id(src, &self.started, &[]),
            },
            12 => Message::FrameworkHeartbeat { epoch: gen::epoch(src) },
            13 => Message::ReadLog {
                epoch: gen::epoch(src),
                relay: u64::from(src.u8()),
                executor: gen::executor_id(src, &self.started, &[]),
                stream: if src.bool() { LogStream::Stdout } else { LogStream::Stderr },
                offset: if src.bool() { Some(u64::from(src.u8())) } else { None },
                max: u32::from(src.u8()) << (src.u8() % 24),
            },
            14 => Message::StopExecutorOnWorker {
                epoch: gen::epoch(src),
                executor: gen::executor_id(src, &self.started, &[]),
                grace: gen::millis(src),
                signal: regent_core::api::StopSignal::ALL[usize::from(src.u8()) % 6],
            },
            _ => Message::StateRequest,
        }
    }

    /// A message of a master that follows the protocol, on a live
    /// connection: how a run reaches registration, launches and failover.
    fn informed_message(&mut self, src: &mut Source) {
        let Some((conn, master)) = src.pick(&self.conns).cloned() else { return };
        let epoch = Epoch(self.epoch);
        let msg = match src.u8() % 9 {
            0 => {
                if src.bool() {
                    self.epoch += 1;
                }
                Message::HelloReply(HelloReply {
                    role: Role::Master,
                    master: MasterId::new(master.as_str()),
                    leading: true,
                    epoch: Epoch(self.epoch),
                    leader: None,
                    masters: MASTERS[..2].iter().map(|m| Addr::new(*m)).collect(),
                })
            }
            1 => Message::Registered {
                epoch,
                heartbeat_interval: Millis(1_000),
                duplicate: src.one_in(4),
                masters: MASTERS[..2].iter().map(|m| Addr::new(*m)).collect(),
            },
            2 | 3 => {
                self.next_executor += 1;
                let fw = FrameworkId::new(["f0", "f1"][src.below(2)]);
                Message::LaunchExecutor {
                    epoch,
                    executor: ExecutorId(format!(
                        "{fw}/g#{}#{}.{}",
                        src.u8() % 4,
                        self.epoch,
                        self.next_executor
                    )),
                    framework: fw,
                    spec: ExecutorSpec {
                        command: vec!["/bin/true".into()],
                        env: Vec::new(),
                        cores: 1,
                        memory_mb: 64,
                        launch: Default::default(),
                    },
                    launch: self.next_executor,
                }
            }
            4 => {
                let Some(executor) = src.pick(&self.started).cloned() else { return };
                if src.bool() {
                    Message::KillExecutorOnWorker { epoch, executor }
                } else {
                    // A drain's stop.
                    let signal = regent_core::api::StopSignal::ALL[usize::from(src.u8()) % 6];
                    Message::StopExecutorOnWorker {
                        epoch,
                        executor,
                        grace: gen::millis(src),
                        signal,
                    }
                }
            }
            5 => {
                let Some(executor) = src.pick(&self.started).cloned() else { return };
                Message::ExecutorStatusAck { epoch, executor }
            }
            6 => Message::HeartbeatAck { epoch },
            7 => {
                let executor = src.pick(&self.started).cloned().unwrap_or(ExecutorId::new("x"));
                let stream = if src.bool() { LogStream::Stdout } else { LogStream::Stderr };
                let relay = u64::from(src.u8());
                Message::ReadLog { epoch, relay, executor, stream, offset: None, max: 1024 }
            }
            _ => {
                self.epoch += 1;
                let leader = LeaderHint {
                    id: MasterId::new(master.as_str()),
                    addr: master.clone(),
                    epoch: Epoch(self.epoch),
                };
                Message::MasterChanged {
                    epoch: Epoch(self.epoch),
                    leader,
                    masters: MASTERS.iter().map(|m| Addr::new(*m)).collect(),
                }
            }
        };
        self.feed(Input::Message { conn, msg });
    }
}

/// A master address: a known one, a new one, or odd.
fn addr(src: &mut Source) -> Addr {
    Addr(gen::text(src, &MASTERS, 256))
}

/// A list of master addresses: a few, or rarely many distinct ones.
fn addrs(src: &mut Source) -> Vec<Addr> {
    if src.one_in(16) {
        return (0..64).map(|i| Addr(format!("m{i}:7077"))).collect();
    }
    (0..src.below(4)).map(|_| addr(src)).collect()
}

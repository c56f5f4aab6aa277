//! Fuzz target `submit_node`: [`SubmitNode::handle`] over an input sequence
//! built from the bytes, with the harness as the runtime.
//!
//! The first byte chooses the configuration (one or two masters, a
//! framework id to resume or none, a connect timeout or none); one or two
//! groups are declared at the start (the user's own input: at most
//! [`MAX_SLOTS_PER_GROUP`](regent_core::limits::MAX_SLOTS_PER_GROUP) + 1
//! slots). Then each step is one of: another declaration; a dial completes
//! (or fails, or one the node abandoned completes); a master message on a
//! connection — built structurally (every variant a master sends, any
//! epoch, snapshots and updates naming any group and slot, takeovers by
//! other instances), built to follow the protocol (a leading `HelloReply`,
//! `Subscribed`, updates of the declared slots, answers to the requests
//! the node sent, heartbeats), or decoded from raw bytes; a connection
//! ends; time passes and `Tick` fires; rarely, the user interrupts.
//!
//! Invariants: no panic, no allocation over the limit, every message the
//! node sends fits the maximum frame and survives an encode/decode round
//! trip, and nothing follows
//! `Exit`.

use super::frames::check_sent;
use super::gen::{self, Source};
use regent_core::codec::{self, DecoderConfig};
use regent_core::ids::InstanceId;
use regent_core::limits;
use regent_core::node::submit::{Config, DialId, DialResult, Input, Output};
use regent_core::node::SubmitNode;
use regent_core::protocol::{ExecutorInfo, GroupSpec, HelloReply, LeaderHint, Message, Role};
use regent_core::subscriber;
use regent_core::{Addr, ConnId, Epoch, ExecutorId, FrameworkId, MasterId, Millis, WorkerId};

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
    for _ in 0..=src.below(2) {
        let spec = h.spec(&mut src);
        h.feed(Input::Declare(spec));
    }
    let mut steps = 0;
    while !src.is_empty() && steps < MAX_STEPS {
        steps += 1;
        h.step(&mut src);
    }
    let _ = (h.node.status(), h.node.counts(), h.node.ending(), h.node.poll_timeout());
}

#[derive(Debug)]
struct Harness {
    node: SubmitNode,
    now: Millis,
    dials: Vec<(DialId, Addr)>,
    conns: Vec<ConnId>,
    /// Closed by the node, their end not fed yet.
    closing: Vec<ConnId>,
    groups: Vec<(String, u32)>,
    requests: Vec<u64>,
    framework: FrameworkId,
    executors: Vec<ExecutorId>,
    epoch: u64,
    next_conn: u64,
    exited: bool,
}

impl Harness {
    fn new(src: &mut Source) -> Self {
        let flags = src.u8();
        let masters = MASTERS[..1 + usize::from(flags % 2)].iter().map(|m| Addr::new(*m)).collect();
        let mut sub = subscriber::Config::new("regent", "app", InstanceId(7), masters);
        if flags & 2 != 0 {
            sub.framework = Some(FrameworkId::new("f0"));
        }
        let mut config = Config::new(sub);
        if flags & 4 != 0 {
            config.connect_timeout = Some(Millis::from_secs(30));
        }
        Harness {
            node: SubmitNode::new(config),
            now: Millis(0),
            dials: Vec::new(),
            conns: Vec::new(),
            closing: Vec::new(),
            groups: Vec::new(),
            requests: Vec::new(),
            framework: FrameworkId::new("f0"),
            executors: Vec::new(),
            epoch: 1,
            next_conn: 0,
            exited: false,
        }
    }

    fn feed(&mut self, input: Input) {
        if gen::tracing() {
            eprintln!("[{}] {input:?}", self.now);
        }
        let outputs = self.node.handle(self.now, input);
        assert!(!self.exited || outputs.is_empty(), "the node spoke after Exit: {outputs:?}");
        for output in outputs {
            match output {
                Output::Dial { dial, master, .. } => {
                    if self.dials.len() >= POOL {
                        self.dials.remove(0);
                    }
                    self.dials.push((dial, master));
                }
                Output::Send { msg, .. } => {
                    check_sent(&msg);
                    if let Message::DeclareGroup { request, .. }
                    | Message::KillExecutor { request, .. }
                    | Message::Teardown { request } = msg
                    {
                        if self.requests.len() >= POOL {
                            self.requests.remove(0);
                        }
                        self.requests.push(request);
                    }
                }
                Output::Close { conn, .. } => {
                    self.conns.retain(|c| *c != conn);
                    if self.closing.len() < POOL {
                        self.closing.push(conn);
                    }
                }
                Output::Show(_) | Output::Observed(_) | Output::ConnTimeouts { .. } => {}
                Output::Exit(_) => self.exited = true,
            }
        }
    }

    /// A group the user declares (local input, so within the limit).
    fn spec(&mut self, src: &mut Source) -> GroupSpec {
        let slots = match src.u8() % 8 {
            0 => 0,
            1 => limits::MAX_SLOTS_PER_GROUP + 1,
            k => u32::from(k % 4),
        };
        let group = ["g", "h"][src.below(2)].to_owned();
        self.groups.retain(|(g, _)| *g != group);
        self.groups.push((group.clone(), slots));
        GroupSpec {
            group,
            slots,
            command: vec!["/bin/true".into()],
            env: Vec::new(),
            cores: 1,
            memory_mb: 64,
            policy: Default::default(),
            launch: Default::default(),
        }
    }

    fn conn(&mut self, src: &mut Source) -> ConnId {
        match src.pick(&self.conns) {
            Some(c) if !src.one_in(8) => *c,
            _ => ConnId(u64::from(src.u8() % 8)),
        }
    }

    fn step(&mut self, src: &mut Source) {
        match src.u8() % 20 {
            0 => {
                let spec = self.spec(src);
                self.feed(Input::Declare(spec));
            }
            1 | 2 => {
                if self.dials.is_empty() {
                    return;
                }
                let (dial, _) = self.dials.remove(src.below(self.dials.len()));
                let result = if src.one_in(4) {
                    DialResult::Failed {
                        reason: "connection refused (fuzz)".into(),
                        refused: src.one_in(2),
                    }
                } else {
                    self.next_conn += 1;
                    self.conns.push(ConnId(self.next_conn));
                    DialResult::Connected { conn: ConnId(self.next_conn), peer: None }
                };
                self.feed(Input::Dialled { dial, result });
            }
            3 => {
                // A dial the node never asked for, or abandoned.
                self.next_conn += 1;
                let result = DialResult::Connected { conn: ConnId(self.next_conn), peer: None };
                self.feed(Input::Dialled { dial: DialId(u64::from(src.u8())), result });
            }
            4..=8 => {
                let conn = self.conn(src);
                let msg = self.message(src);
                self.feed(Input::Message { conn, msg });
            }
            9..=12 => self.informed_message(src),
            13 => {
                let conn = self.conn(src);
                if let Ok(msg) = codec::decode_body(src.sized(255), &DecoderConfig::default()) {
                    self.feed(Input::Message { conn, msg });
                }
            }
            14 | 15 => {
                let conn = if !self.closing.is_empty() && src.bool() {
                    self.closing.remove(src.below(self.closing.len()))
                } else {
                    let c = self.conn(src);
                    self.conns.retain(|x| *x != c);
                    c
                };
                self.feed(Input::Closed {
                    conn,
                    how: regent_core::node::Ended::ByPeer,
                    reason: "reset (fuzz)".into(),
                });
            }
            16 | 17 => {
                self.now = gen::later(src, self.now, self.node.poll_timeout());
                self.feed(Input::Tick);
            }
            _ => {
                if src.one_in(8) {
                    self.feed(Input::Interrupt);
                }
            }
        }
    }

    fn hint(&self, src: &mut Source) -> LeaderHint {
        LeaderHint {
            id: MasterId(gen::text(src, &["m0", "m1", "m2"], 256)),
            addr: Addr(gen::text(src, &MASTERS, 256)),
            epoch: gen::epoch(src),
        }
    }

    fn info(&self, src: &mut Source) -> ExecutorInfo {
        let names: Vec<&str> = self.groups.iter().map(|(g, _)| g.as_str()).collect();
        ExecutorInfo {
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            id: gen::executor_id(src, &self.executors, std::slice::from_ref(&self.framework)),
            group: gen::text(src, &names, limits::MAX_NAME_BYTES),
            slot: gen::u32_peer(src, 4),
            worker: if src.bool() { Some(WorkerId::new("w0")) } else { None },
            state: gen::executor_state(src),
        }
    }

    /// Any message a master may send a subscriber (and a few it may not).
    fn message(&mut self, src: &mut Source) -> Message {
        match src.u8() % 15 {
            0 => Message::HelloReply(HelloReply {
                role: Role::Master,
                master: MasterId(gen::text(src, &["m0", "m1"], 256)),
                leading: src.bool(),
                epoch: gen::epoch(src),
                leader: if src.bool() { Some(self.hint(src)) } else { None },
                masters: (0..src.below(4)).map(|_| Addr(gen::text(src, &MASTERS, 256))).collect(),
            }),
            1 | 2 => Message::Subscribed {
                epoch: gen::epoch(src),
                framework: gen::framework_id(src, std::slice::from_ref(&self.framework)),
                heartbeat_interval: gen::millis(src),
                executors: (0..src.below(4)).map(|_| self.info(src)).collect(),
            },
            3 => Message::FrameworkHeartbeat { epoch: gen::epoch(src) },
            4 => Message::FrameworkError {
                epoch: gen::epoch(src),
                message: gen::text(src, &["error"], 256),
                failed_over_to: if src.bool() {
                    Some(InstanceId(u64::from(src.u8() % 10)))
                } else {
                    None
                },
            },
            5 => Message::RequestAccepted { epoch: gen::epoch(src), request: self.request(src) },
            6 => Message::RequestRefused {
                epoch: gen::epoch(src),
                request: self.request(src),
                reason: gen::text(src, &["no"], 256),
            },
            7 => Message::ExecutorUpdate { epoch: gen::epoch(src), info: self.info(src) },
            8 => Message::SlotFailed {
                epoch: gen::epoch(src),
                group: gen::text(src, &["g", "h"], 256),
                slot: gen::u32_peer(src, 4),
                reason: gen::text(src, &["boom"], 256),
            },
            9 => Message::NotLeader {
                epoch: gen::epoch(src),
                leader: if src.bool() { Some(self.hint(src)) } else { None },
            },
            10 => Message::LeaderSuspended { epoch: gen::epoch(src) },
            11 => Message::MasterChanged {
                epoch: gen::epoch(src),
                leader: self.hint(src),
                masters: (0..src.below(4)).map(|_| Addr(gen::text(src, &MASTERS, 256))).collect(),
            },
            // Not for a subscriber: an operator's log chunk (or a request
            // id it happens to use).
            12 => Message::LogChunk {
                epoch: gen::epoch(src),
                request: self.request(src),
                offset: u64::from(src.u8()),
                data: src.sized(64).to_vec(),
                size: u64::from(src.u8()),
                finished: src.bool(),
            },
            13 => Message::GroupScaled {
                epoch: gen::epoch(src),
                group: gen::text(src, &["g", "h"], 256),
                slots: gen::u32_peer(src, regent_core::limits::MAX_SLOTS_PER_GROUP),
            },
            _ => Message::HeartbeatAck { epoch: gen::epoch(src) },
        }
    }

    fn request(&self, src: &mut Source) -> u64 {
        match src.pick(&self.requests) {
            Some(r) if !src.one_in(4) => *r,
            _ => u64::from(src.u8()),
        }
    }

    /// A leader's message that follows the protocol, on a live connection:
    /// how a run reaches a subscription, progress and an outcome.
    fn informed_message(&mut self, src: &mut Source) {
        let Some(conn) = src.pick(&self.conns).copied() else { return };
        let epoch = Epoch(self.epoch);
        let msg = match src.u8() % 8 {
            0 => {
                if src.one_in(4) {
                    self.epoch += 1;
                }
                Message::HelloReply(HelloReply {
                    role: Role::Master,
                    master: MasterId::new("m0"),
                    leading: true,
                    epoch: Epoch(self.epoch),
                    leader: None,
                    masters: MASTERS[..2].iter().map(|m| Addr::new(*m)).collect(),
                })
            }
            1 => Message::Subscribed {
                epoch,
                framework: self.framework.clone(),
                heartbeat_interval: Millis(1_000),
                executors: (0..src.below(3)).map(|_| self.slot_info(src)).collect(),
            },
            2 | 3 => Message::ExecutorUpdate { epoch, info: self.slot_info(src) },
            4 => Message::RequestAccepted { epoch, request: self.request(src) },
            5 => {
                let info = self.slot_info(src);
                Message::SlotFailed {
                    epoch,
                    group: info.group,
                    slot: info.slot,
                    reason: "boom".into(),
                }
            }
            6 => Message::FrameworkHeartbeat { epoch },
            7 if src.one_in(3) => {
                // An operator scaled the group.
                let group = self.slot_info(src).group;
                Message::GroupScaled { epoch, group, slots: 1 + u32::from(src.u8() % 6) }
            }
            _ => Message::RequestRefused { epoch, request: self.request(src), reason: "no".into() },
        };
        self.feed(Input::Message { conn, msg });
    }

    /// An executor of a declared slot.
    fn slot_info(&mut self, src: &mut Source) -> ExecutorInfo {
        let (group, slots) = src.pick(&self.groups).cloned().unwrap_or(("g".into(), 1));
        let slot = src.below(slots.max(1) as usize) as u32;
        let id = ExecutorId(format!(
            "{}/{group}#{slot}#{}.{}",
            self.framework,
            self.epoch,
            src.u8() % 4
        ));
        if self.executors.len() < POOL && !self.executors.contains(&id) {
            self.executors.push(id.clone());
        }
        ExecutorInfo {
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            id,
            group,
            slot,
            worker: if src.one_in(8) { None } else { Some(WorkerId::new("w0")) },
            state: gen::executor_state(src),
        }
    }
}

//! A tiny deterministic harness for [`MasterNode`]: nodes wired to one
//! [`ZkModel`] (or to an in-memory local store in single-master mode), fake
//! peers, a virtual clock, and the faults that matter to a leader: a dropped
//! connection (with or without the in-flight request applied), session
//! expiry, and a paused process.
//!
//! Everything runs at [`Cluster::now`]; time moves only in
//! [`Cluster::advance`] (which feeds `Tick` whenever a node's
//! `poll_timeout()` has passed) and [`Cluster::freeze`] (which moves the
//! clock with no event at all, as a SIGSTOP would).
#![allow(dead_code)]

use regent_core::elector;
use regent_core::ids::InstanceId;
use regent_core::master::{self, Status, WorkerState};
use regent_core::node::master::{Config, Input, Leadership, Note, Output};
use regent_core::node::{DialId, DialResult, MasterNode};
use regent_core::protocol::{Hello, Message, RegisterWorker, Role, Subscribe, PROTOCOL_VERSION};
use regent_core::store::names::key_stem;
use regent_core::store::seal::Sealing;
use regent_core::store::StoreCommand;
use regent_core::store::StoreEvent;
use regent_core::store::{format, Record, RecordKey};
use regent_core::testkit::zk::ZkModel;
use regent_core::zk::layout;
use regent_core::zk::{
    CreateMode, MultiOp, RequestId, SessionId, ZkCommand, ZkError, ZkEvent, ZkOp, ZkResult,
};
use regent_core::{Addr, ConnId, Epoch, Incarnation, MasterId, Millis, WorkerId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The cluster's name.
pub const CLUSTER: &str = "test";
/// The cluster's root in ZooKeeper.
pub const ROOT: &str = "/regent";
/// Where the records live.
pub const STATE: &str = "/regent/state";
/// The session timeout the nodes ask for (the model's tickTime of 500 ms
/// allows up to 10 s): a lease of about 6.7 s.
pub const SESSION: Millis = Millis(10_000);
/// The master's heartbeat interval (the default).
pub const HEARTBEAT: Millis = Millis(1_000);
/// The largest step the clock takes in [`Cluster::advance`]; the client
/// library of a connected, running node pings the server at least this
/// often.
pub const MAX_STEP: Millis = Millis(250);

/// Drops the reply of the next request that matches, with the request
/// applied by the server or not.
pub type OpFilter = Box<dyn Fn(&ZkOp) -> bool>;

struct Lose {
    filter: OpFilter,
    applied: bool,
}

/// The connection of a node's coordination client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// Connected.
    Up,
    /// Down; reconnects by itself at `until` (if set).
    Down { until: Option<Millis> },
}

/// One `handle` call: the input, every output, the master's status after it.
#[derive(Clone, Debug)]
pub struct Call {
    pub at: Millis,
    pub input: Input,
    pub outputs: Vec<Output>,
    pub status: Status,
}

/// One node and its runtime's state.
pub struct Node {
    pub node: MasterNode,
    /// The coordination session the runtime holds.
    pub session: Option<SessionId>,
    pub link: Link,
    /// A stopped process: no event, no timer, no ping.
    pub paused: bool,
    wants_session: Option<Millis>,
    outbox: VecDeque<(RequestId, SessionId, ZkOp)>,
    inbox: VecDeque<Input>,
    lose: Option<Lose>,
    /// Requests held by the server unanswered (a slow server) while `hold`
    /// says so.
    hold: Option<OpFilter>,
    /// One-way latency of the link to ZooKeeper (a far ensemble, a proxy):
    /// a request reaches the server this long after it was sent, and its
    /// reply (or a watch notification) the node this long after that.
    pub one_way: Millis,
    /// When each request in the outbox was sent (with a latency).
    sent_at: BTreeMap<RequestId, Millis>,
    /// Replies and notifications on their way back (with a latency).
    returning: VecDeque<(Millis, Input)>,
    /// Every `handle` call, in order.
    pub calls: Vec<Call>,
    /// Connections the node closed.
    pub closed: BTreeSet<ConnId>,
    /// Single-master mode: the local store.
    pub store: Option<BTreeMap<RecordKey, Record>>,
    /// Dials the node asked for, unanswered (a test answers them with
    /// `Input::Dialled`).
    pub dials: Vec<(DialId, Addr)>,
    /// Probes the node asked for, unanswered (a test answers them with
    /// `Input::Probed`).
    pub probes: Vec<(u64, Addr)>,
}

impl Node {
    fn new(config: Config, sealing: &Sealing) -> Self {
        let store = match config.leadership {
            Leadership::Single => Some(BTreeMap::new()),
            Leadership::Zookeeper(_) => None,
        };
        Node {
            node: MasterNode::new(config).with_sealing(sealing.clone()),
            session: None,
            link: Link::Up,
            paused: false,
            wants_session: None,
            outbox: VecDeque::new(),
            inbox: VecDeque::new(),
            lose: None,
            hold: None,
            one_way: Millis::ZERO,
            sent_at: BTreeMap::new(),
            returning: VecDeque::new(),
            calls: Vec::new(),
            closed: BTreeSet::new(),
            store,
            dials: Vec::new(),
            probes: Vec::new(),
        }
    }

    pub fn status(&self) -> Status {
        self.node.master().status()
    }

    /// Every output so far, with the time of its call.
    pub fn outputs(&self) -> Vec<(Millis, Output)> {
        self.calls.iter().flat_map(|c| c.outputs.iter().map(move |o| (c.at, o.clone()))).collect()
    }

    /// Every output from call `from` on.
    pub fn outputs_since(&self, from: usize) -> Vec<Output> {
        self.calls[from..].iter().flat_map(|c| c.outputs.iter().cloned()).collect()
    }

    /// Every message sent, as (time, conn, message).
    pub fn sends(&self) -> Vec<(Millis, ConnId, Message)> {
        self.outputs()
            .into_iter()
            .filter_map(|(at, o)| match o {
                Output::Send { conn, msg } => Some((at, conn, msg)),
                _ => None,
            })
            .collect()
    }

    /// Messages sent on `conn`, with their times.
    pub fn sends_to(&self, conn: u64) -> Vec<(Millis, Message)> {
        self.sends()
            .into_iter()
            .filter(|(_, c, _)| *c == ConnId(conn))
            .map(|(at, _, m)| (at, m))
            .collect()
    }

    /// Every coordination command, with its time.
    pub fn zk_commands(&self) -> Vec<(Millis, ZkCommand)> {
        self.outputs()
            .into_iter()
            .filter_map(|(at, o)| match o {
                Output::Zk(c) => Some((at, c)),
                _ => None,
            })
            .collect()
    }

    /// Whether the node ever asked the process to exit.
    pub fn exited(&self) -> bool {
        self.outputs().iter().any(|(_, o)| matches!(o, Output::Exit { .. }))
    }

    /// The notes, in order.
    pub fn notes(&self) -> Vec<Note> {
        self.outputs()
            .into_iter()
            .filter_map(|(_, o)| match o {
                Output::Note(n) => Some(n),
                _ => None,
            })
            .collect()
    }

    /// The state of `worker` in the master's registry.
    pub fn worker_state(&self, worker: &str) -> Option<WorkerState> {
        self.node.master().workers().into_iter().find(|w| w.id.as_str() == worker).map(|w| w.state)
    }

    /// The node's timer invariant (docs/design.md#time-is-an-input): every master timer whose
    /// condition holds has a deadline (while leading, the sweep and the
    /// framework heartbeat; while recovering, the recovery window; while log
    /// reads are relayed, their deadline). Returns what is missing.
    pub fn missing_timers(&self) -> Vec<master::Timer> {
        let m = self.node.master();
        let required = [
            (master::Timer::Sweep, m.leads()),
            (master::Timer::FrameworkHeartbeat, m.leads()),
            (master::Timer::Recovery, m.recovering()),
            (master::Timer::LogRelays, m.log_relays_in_flight() > 0),
        ];
        required
            .into_iter()
            .filter(|(t, on)| *on && m.deadline(*t).is_none())
            .map(|(t, _)| t)
            .collect()
    }
}

/// Nodes, one ZooKeeper model, a virtual clock.
pub struct Cluster {
    pub zk: ZkModel,
    pub now: Millis,
    pub nodes: Vec<Node>,
    /// How long a connection dropped by a lost reply stays down.
    pub reconnect_delay: Millis,
    /// Check [`Node::missing_timers`] after every `handle` call and record
    /// violations here.
    pub check_timers: bool,
    pub violations: Vec<String>,
    /// How the nodes' stores seal records ([`Cluster::records`] reads with it).
    pub sealing: Sealing,
}

/// A ZooKeeper-mode node's configuration: master `m<i>` at `10.0.0.<i>:7077`.
pub fn zk_config(i: usize) -> Config {
    let id = MasterId::new(format!("m{i}"));
    let addr = Addr::new(format!("10.0.0.{i}:7077"));
    let mut e = elector::Config::new(ROOT, 0xa0 + i as u64, id.clone(), addr.clone());
    e.session_timeout = SESSION;
    Config {
        master: master::Config::new(id, addr),
        leadership: Leadership::Zookeeper(e),
        clock_base: 0,
        cluster: CLUSTER.into(),
    }
}

/// A single-master node's configuration.
pub fn single_config() -> Config {
    let id = MasterId::new("m0");
    let addr = Addr::new("10.0.0.0:7077");
    Config {
        master: master::Config::new(id, addr),
        leadership: Leadership::Single,
        clock_base: 0,
        cluster: CLUSTER.into(),
    }
}

impl Cluster {
    /// `n` ZooKeeper-mode nodes (not started).
    pub fn zookeeper(n: usize) -> Self {
        Self::with_configs((0..n).map(zk_config).collect())
    }

    /// One single-master node (not started).
    pub fn single() -> Self {
        Self::with_configs(vec![single_config()])
    }

    pub fn with_configs(configs: Vec<Config>) -> Self {
        Self::with_configs_sealed(configs, Sealing::none())
    }

    /// `n` ZooKeeper-mode nodes (not started) whose stores seal and check
    /// records with `sealing`.
    pub fn zookeeper_sealed(n: usize, sealing: Sealing) -> Self {
        Self::with_configs_sealed((0..n).map(zk_config).collect(), sealing)
    }

    pub fn with_configs_sealed(configs: Vec<Config>, sealing: Sealing) -> Self {
        Cluster {
            zk: ZkModel::new(Millis(500)),
            now: Millis::ZERO,
            nodes: configs.into_iter().map(|c| Node::new(c, &sealing)).collect(),
            sealing,
            reconnect_delay: Millis(50),
            check_timers: false,
            violations: Vec::new(),
        }
    }

    // ----- driving -------------------------------------------------------

    /// Feeds `input` to node `i` now, executes its outputs, then runs every
    /// delivery. Returns the outputs of that one call.
    pub fn feed(&mut self, i: usize, input: Input) -> Vec<Output> {
        let out = self.feed_only(i, input);
        self.pump();
        out
    }

    /// Feeds `input` to node `i` now and executes its outputs, delivering
    /// nothing else.
    pub fn feed_only(&mut self, i: usize, input: Input) -> Vec<Output> {
        let now = self.now;
        let input_is_tick = matches!(input, Input::Tick);
        let out = self.nodes[i].node.handle(now, input.clone());
        let status = self.nodes[i].status();
        self.nodes[i].calls.push(Call { at: now, input, outputs: out.clone(), status });
        if self.check_timers {
            let missing = self.nodes[i].missing_timers();
            if !missing.is_empty() {
                let call = self.nodes[i].calls.last().expect("pushed above");
                self.violations.push(format!(
                    "node {i} at {now}: {missing:?} required but not set ({:?} after {:?})",
                    status, call.input
                ));
            }
            // A tick fires every deadline that is due: none is left behind
            // (a pump would otherwise spin on a deadline in the past).
            let due = self.nodes[i].node.master().poll_timeout().filter(|at| *at <= now);
            if input_is_tick && due.is_some() {
                self.violations.push(format!(
                    "node {i} at {now}: a master deadline at {due:?} is still due after a Tick ({:?})",
                    self.nodes[i].node.master().deadlines().collect::<Vec<_>>()
                ));
            }
        }
        self.apply(i, out.clone());
        out
    }

    /// Starts every node.
    pub fn start(&mut self) {
        for i in 0..self.nodes.len() {
            let _ = self.feed_only(i, Input::Start);
        }
        self.pump();
    }

    fn apply(&mut self, i: usize, outputs: Vec<Output>) {
        for o in outputs {
            let n = &mut self.nodes[i];
            match o {
                Output::Send { .. } | Output::Note(_) | Output::Exit { .. } => {}
                Output::Answer { .. } | Output::ConnTimeouts { .. } | Output::Audit(_) => {}
                Output::Close { conn, .. } => {
                    n.closed.insert(conn);
                }
                Output::Dial { dial, addr, .. } => n.dials.push((dial, addr)),
                Output::Probe { probe, addr, .. } => n.probes.push((probe, addr)),
                Output::Store(StoreCommand::Persist { write, record }) => {
                    let store = n.store.as_mut().expect("Persist in single-master mode only");
                    store.insert(record.key(), record);
                    n.inbox.push_back(Input::Store(StoreEvent::Persisted { write }));
                }
                Output::Store(StoreCommand::Unpersist { write, key, incarnation }) => {
                    let store = n.store.as_mut().expect("Unpersist in single-master mode only");
                    let matches = match (store.get(&key), incarnation) {
                        (Some(Record::Worker(w)), Some(inc)) => w.incarnation == inc,
                        _ => true,
                    };
                    if matches {
                        store.remove(&key);
                    }
                    n.inbox.push_back(Input::Store(StoreEvent::Persisted { write }));
                }
                Output::Store(StoreCommand::LoadRecords) => {
                    let store = n.store.as_ref().expect("LoadRecords in single-master mode only");
                    let records = store.values().cloned().collect();
                    n.inbox.push_back(Input::Store(StoreEvent::Loaded { records }));
                }
                Output::Zk(ZkCommand::NewSession { timeout }) => {
                    n.session = None;
                    n.outbox.clear();
                    n.wants_session = Some(timeout);
                }
                Output::Zk(ZkCommand::CloseSession { session }) => {
                    if n.session == Some(session) {
                        if n.link == Link::Up {
                            self.zk.close(session);
                        }
                        let n = &mut self.nodes[i];
                        n.session = None;
                        n.outbox.clear();
                    }
                }
                Output::Zk(ZkCommand::Request { session, req, op }) => {
                    if n.session != Some(session) {
                        continue; // not the current session: dropped
                    }
                    if n.link == Link::Up {
                        n.sent_at.insert(req, self.now);
                        n.outbox.push_back((req, session, op));
                    } else {
                        n.inbox.push_back(Input::Zk(ZkEvent::Reply {
                            req,
                            result: Err(ZkError::ConnectionLoss),
                        }));
                    }
                }
            }
        }
    }

    /// Runs deliveries at the current time until nothing moves.
    pub fn pump(&mut self) {
        let mut rounds = 0;
        loop {
            let mut moved = false;
            for i in 0..self.nodes.len() {
                moved |= self.pump_one(i);
            }
            if !moved {
                break;
            }
            rounds += 1;
            assert!(rounds < 100_000, "deliveries do not settle at {}", self.now);
        }
    }

    fn pump_one(&mut self, i: usize) -> bool {
        let now = self.now;
        if self.nodes[i].paused {
            return false;
        }
        let mut moved = false;
        if self.nodes[i].link == Link::Up {
            if let Some(requested) = self.nodes[i].wants_session.take() {
                let (s, timeout) = self.zk.connect(now, requested);
                let n = &mut self.nodes[i];
                n.session = Some(s);
                n.inbox.push_back(Input::Zk(ZkEvent::SessionConnected { session: s, timeout }));
                moved = true;
            }
        }
        if self.nodes[i].link == Link::Up {
            let held = {
                let n = &self.nodes[i];
                let on_its_way = n.outbox.front().is_some_and(|(req, _, _)| {
                    n.sent_at.get(req).is_some_and(|at| now < *at + n.one_way)
                });
                on_its_way
                    || match (&n.hold, n.outbox.front()) {
                        (Some(f), Some((_, _, op))) => f(op),
                        _ => false,
                    }
            };
            if !held {
                if let Some((req, s, op)) = self.nodes[i].outbox.pop_front() {
                    moved = true;
                    let lose = self.nodes[i].lose.as_ref().is_some_and(|l| (l.filter)(&op));
                    if lose {
                        let l = self.nodes[i].lose.take().expect("checked");
                        if l.applied {
                            let _ = self.zk.execute(now, s, &op);
                        }
                        self.nodes[i].outbox.push_front((req, s, op));
                        self.disconnect(i, Some(now + self.reconnect_delay));
                    } else {
                        let result: ZkResult = self.zk.execute(now, s, &op);
                        if result == Err(ZkError::SessionExpired) {
                            // The server closes an expired session's
                            // connection; the client learns on reconnect.
                            self.nodes[i].outbox.push_front((req, s, op));
                            self.disconnect(i, Some(now + self.reconnect_delay));
                        } else {
                            let n = &mut self.nodes[i];
                            n.sent_at.remove(&req);
                            let reply = Input::Zk(ZkEvent::Reply { req, result });
                            if n.one_way > Millis::ZERO {
                                n.returning.push_back((now + n.one_way, reply));
                            } else {
                                n.inbox.push_back(reply);
                            }
                        }
                    }
                }
            }
        }
        if self.nodes[i].link == Link::Up {
            if let Some(s) = self.nodes[i].session {
                for event in self.zk.take_notifications(s) {
                    let n = &mut self.nodes[i];
                    let watch = Input::Zk(ZkEvent::Watch { session: s, event });
                    if n.one_way > Millis::ZERO {
                        n.returning.push_back((now + n.one_way, watch));
                    } else {
                        n.inbox.push_back(watch);
                    }
                    moved = true;
                }
            }
            while let Some((due, _)) = self.nodes[i].returning.front() {
                if *due > now {
                    break;
                }
                let (_, input) = self.nodes[i].returning.pop_front().expect("front exists");
                self.nodes[i].inbox.push_back(input);
                moved = true;
            }
        }
        if let Some(input) = self.nodes[i].inbox.pop_front() {
            moved = true;
            let _ = self.feed_only(i, input);
        }
        moved
    }

    /// Advances the clock by `dur`: connected, running clients keep their
    /// sessions alive, the server expires silent sessions, dropped links
    /// come back when due, and every node whose deadline passed gets `Tick`.
    pub fn advance(&mut self, dur: Millis) {
        let end = self.now + dur;
        let mut same_instant = 0;
        loop {
            let mut next = (self.now + MAX_STEP).min(end);
            for n in self.nodes.iter().filter(|n| !n.paused) {
                if let Some(t) = n.node.poll_timeout() {
                    next = next.min(t.max(self.now));
                }
                if let Link::Down { until: Some(u) } = n.link {
                    next = next.min(u.max(self.now));
                }
                if let Some((due, _)) = n.returning.front() {
                    next = next.min((*due).max(self.now));
                }
                if let Some(at) = n.outbox.front().and_then(|(req, _, _)| n.sent_at.get(req)) {
                    if *at + n.one_way > self.now {
                        next = next.min(*at + n.one_way);
                    }
                }
            }
            if next == self.now {
                same_instant += 1;
                assert!(same_instant < 10_000, "timers do not settle at {}", self.now);
            } else {
                same_instant = 0;
            }
            self.now = next;
            let now = self.now;
            for n in self.nodes.iter().filter(|n| !n.paused && n.link == Link::Up) {
                if let Some(s) = n.session {
                    self.zk.touch(now, s);
                }
            }
            self.zk.expire_due(now);
            for i in 0..self.nodes.len() {
                if self.nodes[i].paused {
                    continue;
                }
                if let Link::Down { until: Some(u) } = self.nodes[i].link {
                    if u <= now {
                        self.reconnect_now(i);
                    }
                }
                if self.nodes[i].node.poll_timeout().is_some_and(|t| t <= now) {
                    let _ = self.feed_only(i, Input::Tick);
                }
            }
            self.pump();
            if self.now >= end {
                break;
            }
        }
    }

    /// Moves the clock by `dur` with no event, no timer and no ping for any
    /// node: every process was stopped (SIGSTOP), the server's clock ran on.
    pub fn freeze(&mut self, dur: Millis) {
        self.now = self.now + dur;
    }

    /// Node `i`'s process stops (no events, no timers, no pings) until
    /// [`Cluster::unpause`].
    pub fn pause(&mut self, i: usize) {
        self.nodes[i].paused = true;
    }

    pub fn unpause(&mut self, i: usize) {
        self.nodes[i].paused = false;
        self.pump();
    }

    // ----- faults --------------------------------------------------------

    /// Node `i`'s connection drops: requests not yet applied fail with
    /// `ConnectionLoss`, then `Disconnected`. It stays down until `until`
    /// (or [`Cluster::reconnect`]).
    pub fn disconnect(&mut self, i: usize, until: Option<Millis>) {
        let n = &mut self.nodes[i];
        if let Link::Down { until: u } = n.link {
            n.link = Link::Down { until: u.max(until) };
            return;
        }
        n.link = Link::Down { until };
        n.sent_at.clear();
        for (_, input) in std::mem::take(&mut n.returning) {
            if let Input::Zk(ZkEvent::Reply { req, .. }) = input {
                n.inbox.push_back(Input::Zk(ZkEvent::Reply {
                    req,
                    result: Err(ZkError::ConnectionLoss),
                }));
            }
        }
        for (req, _, _) in n.outbox.drain(..) {
            n.inbox
                .push_back(Input::Zk(ZkEvent::Reply { req, result: Err(ZkError::ConnectionLoss) }));
        }
        if let Some(s) = n.session {
            n.inbox.push_back(Input::Zk(ZkEvent::Disconnected { session: s }));
            // Harsher than the real client (which re-registers watches): the
            // elector must re-arm its own.
            self.zk.forget_watches(s);
        }
    }

    /// Drops node `i`'s connection now and delivers the consequences.
    pub fn drop_link(&mut self, i: usize) {
        self.disconnect(i, None);
        self.pump();
    }

    /// Node `i`'s client reconnects: `SessionConnected` with the same session
    /// if the server still has it, else `Expired`.
    pub fn reconnect(&mut self, i: usize) {
        self.reconnect_now(i);
        self.pump();
    }

    fn reconnect_now(&mut self, i: usize) {
        let now = self.now;
        let n = &mut self.nodes[i];
        if n.link == Link::Up {
            return;
        }
        n.link = Link::Up;
        if let Some(s) = n.session {
            match self.zk.resume(now, s) {
                Some(timeout) => {
                    n.inbox.push_back(Input::Zk(ZkEvent::SessionConnected { session: s, timeout }))
                }
                None => {
                    n.session = None;
                    n.inbox.push_back(Input::Zk(ZkEvent::Expired { session: s }));
                }
            }
        }
    }

    /// The next request of node `i` matching `filter` is applied by the
    /// server (or not) and its reply lost: the node sees `ConnectionLoss`
    /// and `Disconnected`, and the client reconnects after
    /// `reconnect_delay`.
    pub fn lose_next_reply(&mut self, i: usize, applied: bool, filter: OpFilter) {
        self.nodes[i].lose = Some(Lose { filter, applied });
    }

    /// The server holds node `i`'s requests matching `filter` (and every
    /// later one: replies come in order) until [`Cluster::release`].
    pub fn hold(&mut self, i: usize, filter: OpFilter) {
        self.nodes[i].hold = Some(filter);
    }

    pub fn release(&mut self, i: usize) {
        self.nodes[i].hold = None;
        self.pump();
    }

    /// The server expires node `i`'s session (as after a long partition):
    /// the client is cut off and learns it when it reconnects.
    pub fn expire(&mut self, i: usize) {
        if let Some(s) = self.nodes[i].session {
            self.disconnect(i, Some(self.now + self.reconnect_delay));
            self.zk.expire(s);
            self.pump();
        }
    }

    // ----- what a user sees ----------------------------------------------

    /// Indices of the nodes whose master is RECOVERING or ALIVE.
    pub fn leaders(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| matches!(self.nodes[i].status(), Status::Recovering | Status::Alive))
            .collect()
    }

    /// Every record node under `<root>/state/` (both layouts).
    pub fn record_nodes(&self) -> Vec<layout::RecordNode> {
        layout::record_nodes(STATE, |p| self.zk.children(p))
    }

    /// Every record under `<root>/state/`, by node name (its key's stem),
    /// wherever it is (in its shard, or flat as an earlier version wrote
    /// it).
    pub fn records(&self) -> BTreeMap<String, Record> {
        self.images()
            .into_iter()
            .map(|(name, image)| {
                let (record, _) =
                    format::decode_with(&image, &self.sealing).expect("a well-formed record");
                (name, record)
            })
            .collect()
    }

    /// Every record image under `<root>/state/`, by node name.
    pub fn images(&self) -> BTreeMap<String, Vec<u8>> {
        self.record_nodes()
            .into_iter()
            .map(|n| {
                let node = self.zk.node(&n.path).expect("listed");
                (n.stem, node.data.clone())
            })
            .collect()
    }

    /// Writes `records` into the model as an earlier leader left them.
    pub fn seed_store(&mut self, records: &[Record]) {
        let images: Vec<_> =
            records.iter().map(|r| (key_stem(&r.key()), format::encode(r).unwrap())).collect();
        self.seed_images(&images);
    }

    /// Writes record images (node name, bytes) into the model, as an earlier
    /// leader (or someone else) left them: each in its shard.
    pub fn seed_images(&mut self, images: &[(String, Vec<u8>)]) {
        let images: Vec<_> = images
            .iter()
            .map(|(name, image)| (layout::stem_path(STATE, name), image.clone()))
            .collect();
        self.seed_paths(&images);
    }

    /// Writes record images (node name, bytes) into the model in the flat
    /// layout of earlier versions (every record directly under
    /// `<root>/state/`).
    pub fn seed_flat_images(&mut self, images: &[(String, Vec<u8>)]) {
        let images: Vec<_> = images
            .iter()
            .map(|(name, image)| (layout::flat_path(STATE, name), image.clone()))
            .collect();
        self.seed_paths(&images);
    }

    /// Writes nodes (path, bytes) into the model, creating their parents.
    pub fn seed_paths(&mut self, nodes: &[(String, Vec<u8>)]) {
        let (s, _) = self.zk.connect(self.now, SESSION);
        let mk = |path: &str, data: Vec<u8>| ZkOp::Create {
            path: path.into(),
            data,
            mode: CreateMode::Persistent,
        };
        for p in [ROOT, STATE] {
            let _ = self.zk.execute(self.now, s, &mk(p, Vec::new()));
        }
        for (path, image) in nodes {
            let mut parent = String::new();
            let dirs: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
            for part in &dirs[..dirs.len() - 1] {
                parent.push('/');
                parent.push_str(part);
                let _ = self.zk.execute(self.now, s, &mk(&parent, Vec::new()));
            }
            let created = self.zk.execute(self.now, s, &mk(path, image.clone()));
            assert!(created.is_ok(), "seeding {path}: {created:?}");
        }
        self.zk.close(s);
    }

    /// Deletes `path` from outside (another client, e.g. a standby doing a
    /// fast takeover).
    /// The watches it fires are delivered at the next [`Cluster::pump`].
    pub fn delete_from_outside(&mut self, path: &str) {
        let (s, _) = self.zk.connect(self.now, SESSION);
        let r = self.zk.execute(self.now, s, &ZkOp::Delete { path: path.into(), version: None });
        assert!(r.is_ok(), "deleting {path}: {r:?}");
        self.zk.close(s);
    }

    // ----- fake peers ----------------------------------------------------

    /// Opens `conn` to node `i` and says `Hello` as `role`.
    pub fn hello(&mut self, i: usize, conn: u64, role: Role, name: &str) {
        let _ = self.feed(i, Input::Accepted { conn: ConnId(conn) });
        let _ = self.feed(i, Input::Message { conn: ConnId(conn), msg: hello(role, name) });
    }

    /// Completes node `from`'s latest dial of node `to`'s address as
    /// connection `conn` (the same number at both ends) and carries the
    /// frames both ways until neither sends more on it. Returns the dial's
    /// outputs at `from`. Panics if `from` has no such dial.
    pub fn connect_dial(&mut self, from: usize, to: usize, conn: u64) -> Vec<Output> {
        let addr = Addr::new(format!("10.0.0.{to}:7077"));
        let at = self.nodes[from].dials.iter().rposition(|(_, a)| *a == addr);
        let (dial, _) = self.nodes[from].dials.remove(at.expect("a dial of that address"));
        let conn = ConnId(conn);
        let _ = self.feed(to, Input::Accepted { conn });
        let out = self.feed(
            from,
            Input::Dialled { dial, result: DialResult::Connected { conn, peer: None } },
        );
        let mut to_server: Vec<Message> = sends_on(&out, conn);
        while !to_server.is_empty() {
            let mut to_client = Vec::new();
            for msg in to_server {
                to_client.extend(sends_on(&self.feed(to, Input::Message { conn, msg }), conn));
            }
            to_server = Vec::new();
            for msg in to_client {
                to_server.extend(sends_on(&self.feed(from, Input::Message { conn, msg }), conn));
            }
        }
        out
    }

    /// A worker registers on `conn` (after `Hello`).
    pub fn register(&mut self, i: usize, conn: u64, worker: &str, inc: u64) -> Vec<Output> {
        self.hello(i, conn, Role::Worker, worker);
        self.feed(i, Input::Message { conn: ConnId(conn), msg: register_msg(worker, inc) })
    }

    /// A worker heartbeat on `conn`.
    pub fn heartbeat(&mut self, i: usize, conn: u64, inc: u64) -> Vec<Output> {
        let msg = Message::WorkerHeartbeat { incarnation: Incarnation(inc) };
        self.feed(i, Input::Message { conn: ConnId(conn), msg })
    }

    /// A subscriber subscribes on `conn` (after `Hello`).
    pub fn subscribe(&mut self, i: usize, conn: u64, instance: u64) -> Vec<Output> {
        self.hello(i, conn, Role::Subscriber, &format!("app-{instance}"));
        self.feed(i, Input::Message { conn: ConnId(conn), msg: subscribe_msg(instance) })
    }
}

/// The messages `out` sends on `conn`.
pub fn sends_on(out: &[Output], conn: ConnId) -> Vec<Message> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send { conn: c, msg } if *c == conn => Some(msg.clone()),
            _ => None,
        })
        .collect()
}

pub fn hello(role: Role, node: &str) -> Message {
    Message::Hello(Hello {
        version: PROTOCOL_VERSION,
        cluster: CLUSTER.into(),
        role,
        node: node.into(),
    })
}

pub fn register_msg(worker: &str, inc: u64) -> Message {
    Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: WorkerId::new(worker),
        incarnation: Incarnation(inc),
        cores: 4,
        memory_mb: 4096,
        executors: Vec::new(),
        epoch_seen: Epoch::ZERO,
        launch_seen: 0,
        attributes: vec![],
    })
}

pub fn subscribe_msg(instance: u64) -> Message {
    Message::Subscribe(Subscribe {
        framework: None,
        name: format!("app-{instance}"),
        instance: InstanceId(instance),
        attempt: 1,
        failover_timeout: Millis(60_000),
        tenant: None,
    })
}

/// Whether `op` writes the record stored under `name` (a fenced multi).
pub fn writes_record(op: &ZkOp, name: &str) -> bool {
    let target = layout::stem_path(STATE, name);
    match op {
        ZkOp::Multi(ops) => ops.iter().any(|o| match o {
            MultiOp::Create { path, .. }
            | MultiOp::SetData { path, .. }
            | MultiOp::Delete { path, .. } => *path == target,
            MultiOp::Check { .. } => false,
        }),
        _ => false,
    }
}

/// Whether `op` creates the record stored under `name` (a fenced multi).
pub fn creates_record(op: &ZkOp, name: &str) -> bool {
    let target = layout::stem_path(STATE, name);
    matches!(op, ZkOp::Multi(ops) if ops.iter().any(|o| matches!(o, MultiOp::Create { path, .. } if *path == target)))
}

/// The path an op is about (the first write's, for a multi).
pub fn op_path(op: &ZkOp) -> String {
    match op {
        ZkOp::Create { path, .. }
        | ZkOp::Delete { path, .. }
        | ZkOp::Exists { path, .. }
        | ZkOp::GetData { path, .. }
        | ZkOp::SetData { path, .. }
        | ZkOp::GetChildren { path, .. }
        | ZkOp::Sync { path } => path.clone(),
        ZkOp::MultiRead(paths) => paths.first().cloned().unwrap_or_default(),
        ZkOp::Multi(ops) => ops
            .iter()
            .find_map(|o| match o {
                MultiOp::Create { path, .. }
                | MultiOp::SetData { path, .. }
                | MultiOp::Delete { path, .. } => Some(path.clone()),
                MultiOp::Check { .. } => None,
            })
            .unwrap_or_default(),
    }
}

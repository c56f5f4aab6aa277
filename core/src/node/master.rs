//! [`MasterNode`]: the master daemon's composition, pure.
//!
//! The node owns the [`Master`] machine and its leadership source — the
//! [`Elector`] over ZooKeeper operations, or single-master self-election
//! (`--recovery none | filesystem`) — and is the only place they meet
//! (docs/design.md#child-machines-are-composed-in-core):
//!
//! * **The lease guards every input** (rule 2): before anything reaches the
//!   master, a leader whose lease ran out (a paused process, a silent
//!   ensemble) is revoked, so nothing acts on a leadership it no longer
//!   holds, however late a timer or a frame arrives.
//! * **One ZooKeeper session** carries election, lease and store: the
//!   store's requests ([`crate::zk::store`]) go out on the elector's session,
//!   each write fenced by the leader's election node. After a
//!   `ConnectionLoss` the master is SUSPENDED; once the session is back and
//!   the elector has confirmed the leadership, the unconfirmed write is sent
//!   again before any newer one.
//! * **Losing leadership is not process death** (rule 8): a ZooKeeper-mode
//!   master that gives leadership up (a fenced write refused, a damaged
//!   store) closes its session in the same step, returns to STANDBY and
//!   joins the election again with a fresh session and candidate node. Only
//!   the single-master modes stop ([`Output::Exit`]) when the store fails.
//! * **Hints carry the leader's real epoch** (ZooKeeper mode): the elector
//!   names the leader but knows only a sequence floor, so a standby keeps a
//!   watch connection to the leader ([`Output::Dial`]) and its hints name
//!   the leader only once the leader's own `HelloReply` proved its epoch
//!   (`watch.rs`).
//! * **Fast takeover, safe whatever the detector says** (ZooKeeper mode):
//!   a standby whose watch connection to the leader ended by the peer and
//!   whose probes of the leader's port are refused deletes the leader's
//!   election node(s) ([`elector::Event::Depose`]). Safety does not rest on
//!   that detector: a leader sends commands ([`Message::is_command`]) only
//!   under its *acting lease* ([`Elector::may_command`]); a command the
//!   master produces while the lease is not confirmed is held (commands keep
//!   their order, and a close of the connection waits behind them) until a
//!   confirmation arrives, and dropped if the leadership ends first. The
//!   lease follows the ZooKeeper round trip (the elector chooses it when it
//!   creates its node); a leader whose round trip outgrew it gives the
//!   leadership up and rejoins ([`elector::Action::Outgrown`]), and one
//!   whose commands waited [`STALL_NOTE_AFTER`] says why, once
//!   ([`Note::CommandsStalled`]).
//! * **Local reads are queries** ([`Input::Query`] / [`Output::Answer`]):
//!   the HTTP side's state, metrics and log reads enter with the runtime's
//!   [`QueryId`] and leave as exactly one answer each, never through a
//!   connection. Being inputs, they pass the lease check like everything
//!   else: no read shows a leadership whose lease ran out. A log read is
//!   relayed by the master for its query ([`master::Origin::Query`]) as an
//!   operator's `LogRequest` is for its connection. A new kind of read adds
//!   a [`Query`] and an [`Answer`] variant.
//! * **Deadlines**: the master owns its own ([`Master::poll_timeout`]); the
//!   node's table ([`Deadlines`]) holds the elector's, the store's, the
//!   watch's and the held commands' timers. [`MasterNode::poll_timeout`] is
//!   the earliest of both; on [`Input::Tick`] the node fires its due timers
//!   and ticks the master, earliest first.
//!
//! Tests: `core/tests/master_node.rs` (the composition end to end over the
//! ZooKeeper model), `core/tests/log_relay_node.rs` (queries and relays),
//! `core/tests/slow_store.rs`, `core/tests/fast_takeover_probe.rs`, the node
//! harness's properties (`core/tests/node_harness`), and the whole-cluster
//! simulator, which drives this node for every master.

use super::contact::{ContactOutput, Contacts};
use super::watch::{LeaderWatch, WatchOutput, DIAL_TIMEOUT, PROBE_TIMEOUT};
pub use super::NoteLevel;
use super::{DialId, DialResult, Ended, ProbeResult};
use crate::deadlines::Deadlines;
use crate::elector::{self, DeposeOutcome, Elector, ElectorStatus};
use crate::ids::{Addr, ConnId, Epoch, ExecutorId, MasterId, QueryId};
use crate::master::{self, Master, Origin, Status};
use crate::protocol::{ClusterState, Hello, LogStream, Message, Role, PROTOCOL_VERSION};
use crate::store::seal::Sealing;
use crate::store::{StoreCommand, StoreEvent};
use crate::time::Millis;
use crate::zk::store::{StoreOutput, ZkStore};
use crate::zk::{RequestId, ZkCommand, ZkError, ZkEvent};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// How long the store waits before resending after a `ConnectionLoss` that
/// the elector has not (yet) seen as a disconnect.
const STORE_RETRY: Millis = Millis(100);

/// The first delay before a master whose store failed it twice in a row
/// joins the election again (see `MasterNode::abdicate`).
pub const REJOIN_BACKOFF_MIN: Millis = Millis(1_000);
/// The largest such delay.
pub const REJOIN_BACKOFF_MAX: Millis = Millis(30_000);

/// The most commands held for one connection while the acting lease is not
/// confirmed; one more closes the connection (see `MasterNode::gate_send`).
pub const MAX_HELD_PER_CONN: usize = 1_024;

/// How long the oldest held command waits before the leader says, once,
/// why it cannot command ([`Note::CommandsStalled`]). A new leader's wait
/// and a confirmation's round trip are far shorter.
pub const STALL_NOTE_AFTER: Millis = Millis(5_000);

/// Where leadership comes from.
#[derive(Clone, Debug)]
pub enum Leadership {
    /// `--recovery none | filesystem`: the only master elects itself at
    /// [`Input::Start`]; store writes go to the runtime
    /// ([`Output::Store`]).
    Single,
    /// `--recovery zookeeper`: the elector, with the store under
    /// `<root>/state/` on the same session.
    Zookeeper(elector::Config),
}

/// Master node configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The master machine's settings.
    pub master: master::Config,
    /// The leadership source.
    pub leadership: Leadership,
    /// Wall-clock milliseconds at `now = 0`: the clock term of every new
    /// epoch is `clock_base + now` (docs/design.md#epochs-fence-everything). 0 leaves the clock term
    /// out (deterministic tests).
    pub clock_base: u64,
    /// The cluster's name, for the `Hello` of the standby's watch
    /// connection to the leader.
    pub cluster: String,
}

/// What happens to a master node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The process starts: join the election (or elect itself).
    Start,
    /// A peer connected (the listener accepted it).
    Accepted {
        /// The runtime's number for the connection.
        conn: ConnId,
    },
    /// The peer of an accepted connection proved a token: it acts as
    /// `principal` (passed to the master as
    /// [`master::Event::Authenticated`]). Without it a connection acts as
    /// the root.
    Authenticated {
        /// The connection.
        conn: ConnId,
        /// Who it acts as.
        principal: crate::token::Principal,
    },
    /// A connection closed (not one the node asked to close).
    Closed {
        /// The connection.
        conn: ConnId,
        /// How it ended (the fast takeover acts only on [`Ended::ByPeer`]).
        how: Ended,
        /// Why, as the runtime knows it, for the log.
        reason: String,
    },
    /// A frame arrived.
    Message {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// A dial asked for by [`Output::Dial`] ended. A connection it opened
    /// is the node's (no [`Input::Accepted`] for it); its frames and its
    /// end come as [`Input::Message`] and [`Input::Closed`].
    Dialled {
        /// The dial.
        dial: DialId,
        /// How it ended.
        result: DialResult,
    },
    /// A probe asked for by [`Output::Probe`] ended.
    Probed {
        /// The probe.
        probe: u64,
        /// What it found.
        result: ProbeResult,
    },
    /// The deadline from [`MasterNode::poll_timeout`] passed.
    Tick,
    /// The coordination client reports (ZooKeeper mode).
    Zk(ZkEvent),
    /// The local store answers an [`Output::Store`] (single-master modes),
    /// passed to the master untouched.
    Store(StoreEvent),
    /// A local read (the HTTP side): exactly one [`Output::Answer`] for
    /// `query` follows, in this step or (a log read) a later one, unless
    /// the process stops first.
    Query {
        /// The runtime's number for the read, echoed in the answer.
        query: QueryId,
        /// What is asked.
        ask: Query,
    },
    /// The operator asks the leader to step down (a local signal; the wire
    /// has [`Message::StepDown`]).
    StepDown,
    /// The process stops: close the session so a standby leads at once.
    Stop,
}

/// What the runtime must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Send `msg` on `conn` (drop it if the connection is gone).
    Send {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// Close `conn` after flushing what was sent before; feed no
    /// `Closed` for it.
    Close {
        /// The connection.
        conn: ConnId,
        /// Why, for the log.
        reason: String,
    },
    /// Dial `addr` (the exposure rules and the handshake apply as for any
    /// connection), giving up after `timeout`; feed [`Input::Dialled`].
    Dial {
        /// Echoed back.
        dial: DialId,
        /// Where.
        addr: Addr,
        /// How long the dial may take.
        timeout: Millis,
    },
    /// `connect()` to the socket address `addr` (no name resolution, no
    /// handshake; close it at once if it connects), giving up after
    /// `timeout`; feed [`Input::Probed`] (`ECONNREFUSED` is
    /// [`ProbeResult::Refused`]).
    Probe {
        /// Echoed back.
        probe: u64,
        /// `ip:port`.
        addr: Addr,
        /// How long the probe may take.
        timeout: Millis,
    },
    /// Single-master modes: execute the master's store command (see
    /// [`StoreCommand`]; writes to one key in order, batching allowed), then
    /// feed its answer as [`Input::Store`].
    Store(StoreCommand),
    /// ZooKeeper mode: execute on the coordination client.
    Zk(ZkCommand),
    /// Stop the process (single-master modes only: the store failed and no
    /// standby can take over). The runtime prints `reason` and exits non-zero.
    Exit {
        /// Why.
        reason: String,
    },
    /// The one answer to [`Input::Query`] `query`: hand it to the asker.
    Answer {
        /// The read.
        query: QueryId,
        /// The answer.
        answer: Answer,
    },
    /// The connections' read and write timeouts scale with `heartbeat`
    /// from now on: the longest heartbeat interval this master has told a
    /// worker (heartbeat load control), so no peer heartbeating as told is
    /// taken for a dead connection. Said at the first step and whenever it
    /// changes.
    ConnTimeouts {
        /// The interval the timeouts scale with.
        heartbeat: Millis,
    },
    /// Purely observational: something an operator wants in the log.
    Note(Note),
    /// Append the record to the audit log (one JSON line; a batch of them
    /// may share one fsync): [`crate::master::Action::Audit`].
    Audit(crate::audit::AuditRecord),
}

/// A local read ([`Input::Query`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    /// The cluster as this master sees it (`GET /api/state`, the event
    /// stream), with the counters: [`Answer::State`].
    State {
        /// The asker may see the state a moment late: the master's cached
        /// snapshot ([`Master::cached_state`]), rebuilt only when something
        /// other than heartbeats happened. `false`: one built now.
        cached: bool,
    },
    /// The counters and gauges, no snapshot (`GET /metrics`):
    /// [`Answer::Metrics`].
    Metrics,
    /// A chunk of an executor's output (`GET /api/logs/...`), answered as
    /// `regent logs` would be: [`Answer::Reply`].
    Log {
        /// The executor.
        executor: ExecutorId,
        /// Which file.
        stream: LogStream,
        /// Where to start; `None`: the last `max` bytes.
        offset: Option<u64>,
        /// The most bytes wanted.
        max: u32,
    },
    /// A client's command or request, as the wire protocol carries it
    /// (the HTTP API's writes and job reads: `SubmitJob`, `DeleteJob`,
    /// `JobsRequest`, `ScaleGroup`, `PlanRequest`, the operator commands),
    /// from an asker the runtime has already authenticated: handled as
    /// the same message on an operator's connection would be, and
    /// answered ([`Answer::Reply`]) when it would be (a write once it is
    /// durable). Any other message is refused.
    Command {
        /// The command.
        msg: Message,
        /// Who sends it (the HTTP request's token, or the root): the
        /// master checks what it may do before acting
        /// (docs/design.md#issue-44). Boxed: claims are large.
        principal: Box<crate::token::Principal>,
    },
    /// The revoked tokens and retired key ids in force (an HTTP request
    /// with a token is refused by them too, docs/security.md):
    /// [`Answer::Revocations`]. A master that is not leading has none.
    Revocations,
}

/// The node's and the master's counters, as of the answer's step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counters {
    /// The node's (leadership, store, held commands).
    pub node: Metrics,
    /// The master machine's.
    pub master: master::Metrics,
}

/// The answer to a [`Query`] ([`Output::Answer`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// To [`Query::State`].
    State {
        /// The master's view (shared with its cache when cached).
        state: Arc<ClusterState>,
        /// The counters.
        counters: Box<Counters>,
    },
    /// To [`Query::Metrics`].
    Metrics {
        /// The gauges, from the master's registry ([`Master::gauges`]).
        gauges: Box<master::Gauges>,
        /// The counters.
        counters: Box<Counters>,
    },
    /// To [`Query::Log`] and [`Query::Command`]: the master's reply, as a
    /// client on the wire protocol would get it (`LogChunk`,
    /// `RequestAccepted`, `JobAccepted`, `JobsReply`, `PlanReply`,
    /// `RequestRefused`, `NotLeader`, `LeaderSuspended`...).
    Reply(Message),
    /// To [`Query::Revocations`].
    Revocations(crate::token::Revocations),
}

/// Leadership changes worth a log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// The elector names a (new) leader; its epoch is not proven yet.
    LeaderNamed {
        /// The leader.
        id: MasterId,
        /// Its advertised address.
        addr: Addr,
        /// An epoch the leader's is at least (the elector's floor, never
        /// the epoch itself).
        floor: Epoch,
    },
    /// This master was elected.
    Elected {
        /// The elector's floor.
        floor: Epoch,
    },
    /// The coordination session is in doubt: acting stops.
    Suspended,
    /// The session is back: acting resumes (and unconfirmed writes are
    /// resent).
    Resumed,
    /// Leadership was lost (lease, session, node).
    Revoked,
    /// Leadership was given up; the session is closed and the master joins
    /// the election again.
    SteppedDown {
        /// Why.
        reason: String,
    },
    /// The fast-takeover detector saw the leader's process die: this
    /// standby deposes it.
    Deposing {
        /// The leader.
        leader: MasterId,
        /// What the detector saw.
        evidence: String,
    },
    /// What deposing a leader came to.
    Deposed {
        /// The leader.
        leader: MasterId,
        /// Deleted, or why not.
        outcome: DeposeOutcome,
    },
    /// The leader has held commands for [`STALL_NOTE_AFTER`] and still
    /// cannot send them; said once per stall (again only after every held
    /// command went out or was dropped).
    CommandsStalled {
        /// Commands waiting.
        held: u64,
        /// How long the oldest has waited.
        waited: Millis,
        /// Why the leader may not command, e.g. "acting lease not
        /// confirmed: ZooKeeper round trip 300 ms > L 100 ms".
        reason: String,
    },
    /// A recovered peer's callback address could not be dialled (docs/design.md#seed-002
    /// contact); the peer finds the leader by itself when it can.
    PeerUnreached {
        /// The callback address.
        addr: Addr,
        /// Why.
        reason: String,
    },
}

impl Note {
    /// The level to log this note at.
    pub fn level(&self) -> NoteLevel {
        match self {
            Note::LeaderNamed { .. }
            | Note::Elected { .. }
            | Note::Resumed
            | Note::PeerUnreached { .. }
            | Note::Deposed { outcome: DeposeOutcome::Skipped { .. }, .. } => NoteLevel::Info,
            Note::Suspended
            | Note::Revoked
            | Note::SteppedDown { .. }
            | Note::Deposing { .. }
            | Note::Deposed { outcome: DeposeOutcome::Deleted { .. }, .. }
            | Note::CommandsStalled { .. } => NoteLevel::Warn,
        }
    }
}

/// The node's named deadlines: its machines' timers in one table (the
/// master keeps its own: [`Master::poll_timeout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Timer {
    /// An elector timer.
    Elector(elector::Timer),
    /// Resend the store's unconfirmed write.
    StoreRetry,
    /// Probe (or dial again) the leader on the watch connection.
    Watch,
    /// Held commands: the new leader's wait is over, or the acting lease
    /// must be confirmed for them.
    Commands,
    /// The oldest held command has waited [`STALL_NOTE_AFTER`]: say why.
    Stalled,
}

/// Counters for `/metrics`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metrics {
    /// How often the leader this master sees changed (itself included).
    pub leader_changes: u64,
    /// How often this master was elected.
    pub elections: u64,
    /// How often it gave leadership up on purpose (store failure, step-down).
    pub step_downs: u64,
    /// How often it lost leadership (lease, session, node).
    pub revocations: u64,
    /// Store writes started again after a `ConnectionLoss`.
    pub store_resends: u64,
    /// Store writes that joined a queued write of the same record instead
    /// of queueing behind it (ZooKeeper mode; a slow store).
    pub store_coalesced: u64,
    /// Records re-sealed under the current key after a load (a rotation).
    pub store_reseals: u64,
    /// Records the last load of the ZooKeeper store reported.
    pub store_records_loaded: u64,
    /// Records of the flat layout of earlier versions moved into their
    /// shards by this master's loads (ZooKeeper store).
    pub store_records_moved: u64,
    /// Election nodes of a dead leader this master deleted (fast takeover).
    pub takeovers: u64,
    /// Commands that waited for the acting lease (a new leader's first
    /// commands, or a lease that had run out).
    pub commands_held: u64,
    /// Commands dropped because the leadership ended while they waited.
    pub commands_dropped: u64,
    /// Commands waiting for the acting lease now (a gauge, as of the
    /// node's last `handle` call: the one that answers the query).
    pub commands_waiting: u64,
    /// How long the oldest of them has waited, in milliseconds (0: none).
    pub oldest_command_wait_ms: u64,
    /// The acting lease L of this master's candidacy, in milliseconds (the
    /// one in its election node's data; 0 without ZooKeeper).
    pub acting_lease_ms: u64,
}

/// A command waiting for the acting lease, or a close waiting behind one.
#[derive(Clone, Debug)]
enum Held {
    Send { conn: ConnId, msg: Message, since: Millis },
    Close { conn: ConnId, reason: String },
}

enum Inner {
    Master(master::Event),
    Elector(elector::Event),
}

#[derive(Clone, Copy, Debug)]
enum Route {
    Elector(RequestId),
    Store(u64),
}

/// The master node (see the module docs).
#[derive(Debug)]
pub struct MasterNode {
    master: Master,
    elector: Option<Elector>,
    store: Option<ZkStore>,
    watch: Option<LeaderWatch>,
    contacts: Contacts,
    cluster: String,
    /// Leaderships given up to store failures since the last ALIVE.
    abdications: u32,
    clock_base: u64,
    deadlines: Deadlines<Timer>,
    routes: BTreeMap<RequestId, Route>,
    next_req: u64,
    /// The leader the elector named last, with its floor.
    last_leader: Option<(MasterId, Addr, Epoch)>,
    metrics: Metrics,
    stopped: bool,
    /// Frames waiting for the acting lease, in order.
    /// Per connection, in order (commands to different peers need no
    /// mutual order).
    held: BTreeMap<ConnId, Vec<Held>>,
    /// This stall was noted already ([`Note::CommandsStalled`]).
    stall_noted: bool,
    /// The `now` of the last `handle` call (for the gauges).
    last_now: Millis,
    /// The heartbeat interval last said in [`Output::ConnTimeouts`].
    told_heartbeat: Option<Millis>,
}

impl MasterNode {
    /// A node that has not started; feed [`Input::Start`].
    pub fn new(config: Config) -> Self {
        let (elector, store, watch) = match config.leadership {
            Leadership::Single => (None, None, None),
            Leadership::Zookeeper(ecfg) => {
                let store = ZkStore::new(&ecfg.root);
                let m = &config.master;
                let watch =
                    LeaderWatch::new(m.id.clone(), config.cluster.clone(), m.heartbeat_interval);
                (Some(Elector::new(ecfg)), Some(store), Some(watch))
            }
        };
        MasterNode {
            master: Master::new(config.master),
            elector,
            store,
            watch,
            contacts: Contacts::default(),
            cluster: config.cluster,
            abdications: 0,
            clock_base: config.clock_base,
            deadlines: Deadlines::new(),
            routes: BTreeMap::new(),
            next_req: 0,
            last_leader: None,
            metrics: Metrics::default(),
            stopped: false,
            held: BTreeMap::new(),
            stall_noted: false,
            last_now: Millis::ZERO,
            told_heartbeat: None,
        }
    }

    /// The same node, sealing and checking its ZooKeeper store's records
    /// with `sealing` (see [`crate::store::seal`]); without this call records
    /// are unsealed ([`Sealing::none`]). In single-master modes the runtime's
    /// store does the sealing and this changes nothing.
    pub fn with_sealing(mut self, sealing: Sealing) -> Self {
        if let Some(store) = &mut self.store {
            store.set_sealing(sealing);
        }
        self
    }

    /// The same node, keeping at most `window` writes of its ZooKeeper store
    /// in flight at once (default
    /// [`DEFAULT_WRITE_WINDOW`](crate::zk::DEFAULT_WRITE_WINDOW); 1 writes one
    /// record per round trip; docs/design.md#issue-46). In single-master modes this
    /// changes nothing.
    pub fn with_store_window(mut self, window: usize) -> Self {
        if let Some(store) = &mut self.store {
            store.set_window(window);
        }
        self
    }

    /// The master machine (read-only: state, status, registry).
    pub fn master(&self) -> &Master {
        &self.master
    }

    /// The elector's view at `now` (ZooKeeper mode).
    pub fn elector_status(&self, now: Millis) -> Option<ElectorStatus> {
        self.elector.as_ref().map(|e| e.status(now))
    }

    /// The elector (ZooKeeper mode), for observers.
    pub fn elector(&self) -> Option<&Elector> {
        self.elector.as_ref()
    }

    /// Counters.
    pub fn metrics(&self) -> Metrics {
        let mut m = self.metrics.clone();
        m.store_resends = self.store.as_ref().map_or(0, |s| s.resends);
        m.store_coalesced = self.store.as_ref().map_or(0, |s| s.coalesced);
        m.store_reseals = self.store.as_ref().map_or(0, |s| s.reseals);
        m.store_records_loaded = self.store.as_ref().map_or(0, |s| s.records_loaded);
        m.store_records_moved = self.store.as_ref().map_or(0, |s| s.moved);
        let commands = self.held_since();
        m.commands_waiting = commands.len() as u64;
        m.acting_lease_ms = self.elector.as_ref().map_or(0, |e| e.acting_lease().0);
        m.oldest_command_wait_ms =
            commands.into_iter().min().map_or(0, |since| self.last_now.since(since).0);
        m
    }

    /// When each held command was held.
    fn held_since(&self) -> Vec<Millis> {
        self.held
            .values()
            .flatten()
            .filter_map(|h| match h {
                Held::Send { since, .. } => Some(*since),
                Held::Close { .. } => None,
            })
            .collect()
    }

    /// The commands waiting for the acting lease, each with its
    /// connection (a read-only view: the simulator judges a held command
    /// at the step that decided it, not at the later step that sends it).
    pub fn held_commands(&self) -> impl Iterator<Item = (ConnId, &Message)> + '_ {
        self.held.values().flatten().filter_map(|h| match h {
            Held::Send { conn, msg, .. } => Some((*conn, msg)),
            Held::Close { .. } => None,
        })
    }

    /// Commands (and closes behind them) waiting for the acting lease.
    pub fn held_frames(&self) -> usize {
        self.held.values().map(Vec::len).sum()
    }

    /// Store jobs not yet confirmed (ZooKeeper mode).
    pub fn store_backlog(&self) -> usize {
        self.store.as_ref().map_or(0, |s| s.backlog())
    }

    /// The earliest deadline; feed [`Input::Tick`] once it has passed.
    pub fn poll_timeout(&self) -> Option<Millis> {
        if self.stopped {
            return None;
        }
        [self.master.poll_timeout(), self.deadlines.next()].into_iter().flatten().min()
    }

    /// Every deadline the node holds (tests, the timer property).
    pub fn deadlines(&self) -> &Deadlines<Timer> {
        &self.deadlines
    }

    /// Handles one input at time `now`.
    #[must_use]
    pub fn handle(&mut self, now: Millis, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        if self.stopped {
            return out;
        }
        self.last_now = self.last_now.max(now);
        let mut queue: VecDeque<Inner> = VecDeque::new();
        // docs/design.md#time-is-an-input: a leader whose lease ran out is revoked before
        // anything else is handled (now is fixed for the whole call).
        if self.elector.as_ref().is_some_and(|e| e.lease_expired(now)) {
            queue.push_back(Inner::Elector(elector::Event::Timer(elector::Timer::Lease)));
            self.run(now, &mut queue, &mut out);
        }
        match input {
            Input::Start => match &self.elector {
                Some(_) => queue.push_back(Inner::Elector(elector::Event::Start)),
                None => {
                    self.metrics.elections += 1;
                    self.metrics.leader_changes += 1;
                    out.push(Output::Note(Note::Elected { floor: Epoch::ZERO }));
                    queue.push_back(Inner::Master(master::Event::Elected {
                        floor: Epoch::ZERO,
                        clock: self.clock(now),
                    }))
                }
            },
            Input::Accepted { conn } => {
                queue.push_back(Inner::Master(master::Event::Connected { conn }))
            }
            Input::Authenticated { conn, principal } => {
                queue.push_back(Inner::Master(master::Event::Authenticated { conn, principal }))
            }
            Input::Closed { conn, how, .. } if self.watch_owns(conn) => {
                self.watch_do(&mut queue, &mut out, |w, o| w.on_closed(now, conn, how, o))
            }
            Input::Probed { probe, result } => {
                self.watch_do(&mut queue, &mut out, |w, o| w.probed(now, probe, result, o))
            }
            Input::Closed { conn, .. } => {
                queue.push_back(Inner::Master(master::Event::Disconnected { conn }))
            }
            Input::Message { conn, msg } if self.watch_owns(conn) => {
                self.watch_do(&mut queue, &mut out, |w, o| w.on_message(msg, o))
            }
            Input::Dialled { dial, result } if Contacts::is_contact_dial(dial) => {
                let leading = self.master.announcement().is_some();
                let mut co = Vec::new();
                self.contacts.dialled(dial, result, leading, &mut co);
                self.contact_outputs(co, &mut out);
            }
            Input::Dialled { dial, result } => {
                self.watch_do(&mut queue, &mut out, |w, o| w.dialled(now, dial, result, o))
            }
            Input::Message { conn, msg: msg @ Message::StepDown { request } }
                if self.master.permits(now, conn, &msg) =>
            {
                self.step_down_request(Origin::Conn(conn), request, &mut queue, &mut out)
            }
            Input::Message { conn, msg } => {
                queue.push_back(Inner::Master(master::Event::Message { conn, msg }))
            }
            Input::Tick => {
                // Earliest first: the master's deadlines fire together, in
                // the place of its earliest.
                let master = self.master.poll_timeout().filter(|at| *at <= now);
                let mut due: Vec<(Millis, Option<Timer>)> =
                    master.map(|at| (at, None)).into_iter().collect();
                due.extend(
                    self.deadlines.take_due_at(now).into_iter().map(|(at, t)| (at, Some(t))),
                );
                due.sort();
                for (_, timer) in due {
                    let Some(timer) = timer else {
                        queue.push_back(Inner::Master(master::Event::Tick));
                        continue;
                    };
                    match timer {
                        Timer::Elector(t) => {
                            queue.push_back(Inner::Elector(elector::Event::Timer(t)))
                        }
                        // For a loss the elector did not see. If it has seen
                        // one since (suspended), its `Resumed` resumes the
                        // store once the leadership is confirmed: a
                        // suspended leader writes nothing.
                        Timer::StoreRetry => {
                            if !self.elector.as_ref().is_some_and(|e| e.status(now).suspended) {
                                self.store_resume(&mut queue, &mut out)
                            }
                        }
                        Timer::Watch => {
                            self.watch_do(&mut queue, &mut out, |w, o| w.on_timer(now, o))
                        }
                        Timer::Commands => self.pump_held(now, &mut queue, &mut out),
                        Timer::Stalled => self.note_stall(now, &mut out),
                    }
                }
            }
            Input::Zk(event) => self.on_zk(now, event, &mut queue, &mut out),
            Input::Store(event) => queue.push_back(Inner::Master(master::Event::Store(event))),
            Input::Query { query, ask } => self.query(now, query, ask, &mut queue, &mut out),
            Input::StepDown => {
                if self.elector.is_some() && self.master.status() != Status::Standby {
                    self.give_up(
                        "the operator asked this master to step down".into(),
                        &mut queue,
                        &mut out,
                    );
                }
            }
            Input::Stop => {
                if self.elector.is_some() {
                    queue.push_back(Inner::Elector(elector::Event::Shutdown));
                }
                self.run(now, &mut queue, &mut out);
                self.stopped = true;
                return out;
            }
        }
        self.run(now, &mut queue, &mut out);
        if self.master.status() == Status::Alive {
            self.abdications = 0;
        }
        let heartbeat = self.master.longest_heartbeat_interval();
        if self.told_heartbeat.replace(heartbeat) != Some(heartbeat) {
            out.push(Output::ConnTimeouts { heartbeat });
        }
        out
    }

    /// Answers a local read; a log read goes to the master, which answers
    /// it now or once the worker did ([`master::Action::Answer`]). The
    /// lease check of this step has run: no answer shows a leadership
    /// whose lease ran out.
    fn query(
        &mut self,
        now: Millis,
        query: QueryId,
        ask: Query,
        queue: &mut VecDeque<Inner>,
        out: &mut Vec<Output>,
    ) {
        let answer = match ask {
            Query::State { cached } => {
                let state = if cached {
                    self.master.cached_state(now)
                } else {
                    Arc::new(self.master.state())
                };
                Answer::State { state, counters: self.counters() }
            }
            Query::Metrics => Answer::Metrics {
                gauges: Box::new(self.master.gauges()),
                counters: self.counters(),
            },
            Query::Revocations => Answer::Revocations(self.master.revocations().clone()),
            Query::Log { executor, stream, offset, max } => {
                let read = master::Event::LogQuery { query, executor, stream, offset, max };
                queue.push_back(Inner::Master(read));
                return;
            }
            // A step-down is the node's (it closes the elector's
            // session), answered as on a connection.
            // (Without `operator`, the master refuses it naming that.)
            Query::Command { msg: Message::StepDown { request }, principal }
                if principal.has(crate::token::Capability::Operator) =>
            {
                self.step_down_request(Origin::Query(query), request, queue, out);
                return;
            }
            Query::Command { msg, principal } => {
                queue.push_back(Inner::Master(master::Event::Command { query, msg, principal }));
                return;
            }
        };
        out.push(Output::Answer { query, answer });
    }

    /// The counters, for an answer.
    fn counters(&self) -> Box<Counters> {
        Box::new(Counters { node: self.metrics(), master: self.master.metrics().clone() })
    }

    /// Carries out what the contacts ask (docs/design.md#seed-002).
    fn contact_outputs(&mut self, co: Vec<ContactOutput>, out: &mut Vec<Output>) {
        for o in co {
            match o {
                ContactOutput::Dial { dial, addr } => {
                    out.push(Output::Dial { dial, addr, timeout: DIAL_TIMEOUT })
                }
                ContactOutput::Announce { conn, addr } => {
                    if let Some(msg) = self.master.announcement() {
                        let hello = Message::Hello(Hello {
                            version: PROTOCOL_VERSION,
                            cluster: self.cluster.clone(),
                            role: Role::Master,
                            node: self.master.config().id.as_str().to_owned(),
                        });
                        out.push(Output::Send { conn, msg: hello });
                        out.push(Output::Send { conn, msg });
                    }
                    let reason = format!("told {addr} of the new leader");
                    out.push(Output::Close { conn, reason });
                }
                ContactOutput::Close { conn } => {
                    let reason = "the leadership that dialled it ended".into();
                    out.push(Output::Close { conn, reason })
                }
                ContactOutput::Unreached { addr, reason } => {
                    out.push(Output::Note(Note::PeerUnreached { addr, reason }))
                }
            }
        }
    }

    fn watch_owns(&self, conn: ConnId) -> bool {
        self.watch.as_ref().is_some_and(|w| w.owns(conn))
    }

    /// Runs `f` on the leader watch and carries out what it asks.
    fn watch_do(
        &mut self,
        queue: &mut VecDeque<Inner>,
        out: &mut Vec<Output>,
        f: impl FnOnce(&mut LeaderWatch, &mut Vec<WatchOutput>),
    ) {
        let Some(watch) = &mut self.watch else { return };
        let mut wo = Vec::new();
        f(watch, &mut wo);
        for o in wo {
            match o {
                WatchOutput::Dial { dial, addr } => {
                    out.push(Output::Dial { dial, addr, timeout: DIAL_TIMEOUT })
                }
                WatchOutput::Send { conn, msg } => out.push(Output::Send { conn, msg }),
                WatchOutput::Close { conn, reason } => out.push(Output::Close { conn, reason }),
                WatchOutput::SetTimer { at } => self.deadlines.set(Timer::Watch, at),
                WatchOutput::CancelTimer => self.deadlines.cancel(Timer::Watch),
                WatchOutput::Confirmed(hint) => {
                    queue.push_back(Inner::Master(master::Event::LeaderIs(hint)))
                }
                WatchOutput::Probe { probe, addr } => {
                    out.push(Output::Probe { probe, addr, timeout: PROBE_TIMEOUT })
                }
                WatchOutput::Depose { leader, evidence } => {
                    out.push(Output::Note(Note::Deposing { leader: leader.clone(), evidence }));
                    queue.push_back(Inner::Elector(elector::Event::Depose { leader }));
                }
            }
        }
    }

    fn clock(&self, now: Millis) -> u64 {
        if self.clock_base == 0 {
            0
        } else {
            self.clock_base + now.0
        }
    }

    /// `StepDown` from `asker` (a connection or a local asker): accepted,
    /// then the leadership given up; refused in single-master mode or by a
    /// standby.
    fn step_down_request(
        &mut self,
        asker: Origin,
        request: u64,
        queue: &mut VecDeque<Inner>,
        out: &mut Vec<Output>,
    ) {
        let epoch = self.master.epoch();
        let answer = |msg: Message| match asker {
            Origin::Conn(conn) => Output::Send { conn, msg },
            Origin::Query(query) => Output::Answer { query, answer: Answer::Reply(msg) },
        };
        let refuse = |reason: &str| {
            answer(Message::RequestRefused { epoch, request, reason: reason.into() })
        };
        if self.elector.is_none() {
            out.push(refuse(
                "single-master mode (--recovery none or filesystem): no standby can take over; stop the process instead",
            ));
            return;
        }
        match self.master.status() {
            Status::Recovering | Status::Alive | Status::Suspended => {
                out.push(answer(Message::RequestAccepted { epoch, request }));
                self.give_up("the operator asked this master to step down".into(), queue, out);
            }
            Status::Standby => out.push(refuse("this master is not the leader")),
        }
    }

    /// docs/design.md#leadership-that-cannot-act-is-given-up in ZooKeeper mode: step down, close the session, join
    /// again as a new candidate.
    /// (A `Revoked` for a master that is in standby already, as after its
    /// own `Abdicate`, is a no-op.)
    fn give_up(&mut self, reason: String, queue: &mut VecDeque<Inner>, out: &mut Vec<Output>) {
        self.leave(reason, elector::Event::Abandon, queue, out);
    }

    /// The master gave its leadership up because the store failed it (a
    /// damaged record, a refused write): it rejoins at once the first time,
    /// then after [`REJOIN_BACKOFF_MIN`] doubling up to
    /// [`REJOIN_BACKOFF_MAX`] while it keeps failing before reaching ALIVE —
    /// a store that stays damaged would otherwise spin every master through
    /// the election.
    fn abdicate(&mut self, reason: String, queue: &mut VecDeque<Inner>, out: &mut Vec<Output>) {
        let n = self.abdications.min(16);
        self.abdications += 1;
        let event = match n {
            0 => elector::Event::Abandon,
            n => {
                let delay = REJOIN_BACKOFF_MIN.0.saturating_mul(1 << (n - 1));
                let rejoin_after = Millis(delay.min(REJOIN_BACKOFF_MAX.0));
                elector::Event::AbandonFor { rejoin_after }
            }
        };
        self.leave(reason, event, queue, out);
    }

    fn leave(
        &mut self,
        reason: String,
        event: elector::Event,
        queue: &mut VecDeque<Inner>,
        out: &mut Vec<Output>,
    ) {
        self.metrics.step_downs += 1;
        self.contacts.stop();
        out.push(Output::Note(Note::SteppedDown { reason }));
        self.drop_store_jobs();
        queue.push_back(Inner::Master(master::Event::Revoked));
        queue.push_back(Inner::Elector(event));
    }

    /// Leadership ended: the store's unconfirmed jobs belong to it and go.
    fn drop_store_jobs(&mut self) {
        if let Some(s) = &mut self.store {
            s.clear();
        }
        self.deadlines.cancel(Timer::StoreRetry);
    }

    fn on_zk(
        &mut self,
        now: Millis,
        event: ZkEvent,
        queue: &mut VecDeque<Inner>,
        out: &mut Vec<Output>,
    ) {
        match event {
            ZkEvent::Reply { req, result } => match self.routes.remove(&req) {
                Some(Route::Elector(r)) => {
                    queue.push_back(Inner::Elector(elector::Event::Zk(ZkEvent::Reply {
                        req: r,
                        result,
                    })))
                }
                Some(Route::Store(tag)) => {
                    let Some(store) = &mut self.store else { return };
                    let mut so = Vec::new();
                    let lost = store.on_reply(tag, result, &mut so);
                    self.store_outputs(so, queue, out);
                    if lost {
                        let suspended = self.elector.as_ref().is_some_and(|e| {
                            let st = e.status(now);
                            st.suspended || st.session.is_none()
                        });
                        // The elector resumes the store when it sees the
                        // session back; if it saw no disconnect at all,
                        // retry shortly.
                        if !suspended {
                            self.deadlines.set(Timer::StoreRetry, now + STORE_RETRY);
                        }
                    }
                }
                None => {}
            },
            other => queue.push_back(Inner::Elector(elector::Event::Zk(other))),
        }
    }

    fn store_resume(&mut self, queue: &mut VecDeque<Inner>, out: &mut Vec<Output>) {
        let Some(store) = &mut self.store else { return };
        let mut so = Vec::new();
        store.resume(&mut so);
        self.store_outputs(so, queue, out);
    }

    fn store_outputs(
        &mut self,
        so: Vec<StoreOutput>,
        queue: &mut VecDeque<Inner>,
        out: &mut Vec<Output>,
    ) {
        let session = self.elector.as_ref().and_then(|e| e.session());
        for o in so {
            match o {
                StoreOutput::Request { tag, op } => {
                    let Some(session) = session else {
                        // No session: the request would be dropped; answer
                        // it as lost so the store waits for the next one.
                        let store = self.store.as_mut().expect("store outputs need a store");
                        let mut again = Vec::new();
                        store.on_reply(tag, Err(ZkError::ConnectionLoss), &mut again);
                        debug_assert!(again.is_empty());
                        continue;
                    };
                    let req = self.alloc(Route::Store(tag));
                    out.push(Output::Zk(ZkCommand::Request { session, req, op }));
                }
                StoreOutput::Done(ev) => queue.push_back(Inner::Master(master::Event::Store(ev))),
            }
        }
    }

    fn alloc(&mut self, route: Route) -> RequestId {
        let req = RequestId(self.next_req);
        self.next_req += 1;
        self.routes.insert(req, route);
        req
    }

    /// Handles queued inner events until none is left.
    fn run(&mut self, now: Millis, queue: &mut VecDeque<Inner>, out: &mut Vec<Output>) {
        while let Some(inner) = queue.pop_front() {
            match inner {
                Inner::Master(ev) => {
                    let actions = self.master.handle(now, ev);
                    self.master_actions(now, actions, queue, out);
                }
                Inner::Elector(ev) => {
                    let Some(e) = &mut self.elector else { continue };
                    let actions = e.handle(now, ev);
                    self.elector_actions(now, actions, queue, out);
                }
            }
        }
    }

    fn master_actions(
        &mut self,
        now: Millis,
        actions: Vec<master::Action>,
        queue: &mut VecDeque<Inner>,
        out: &mut Vec<Output>,
    ) {
        for a in actions {
            match a {
                master::Action::Send { conn, msg } => self.gate_send(now, conn, msg, queue, out),
                master::Action::Answer { query, msg } => {
                    out.push(Output::Answer { query, answer: Answer::Reply(msg) })
                }
                master::Action::Close { conn, reason } => {
                    if let Some(h) = self.held.get_mut(&conn) {
                        h.push(Held::Close { conn, reason });
                    } else {
                        out.push(Output::Close { conn, reason })
                    }
                }
                master::Action::Store(command) => match &mut self.store {
                    None => out.push(Output::Store(command)),
                    Some(s) => {
                        let mut so = Vec::new();
                        s.execute(command, &mut so);
                        self.store_outputs(so, queue, out);
                    }
                },
                master::Action::Audit(record) => out.push(Output::Audit(record)),
                master::Action::Contact { addrs } => {
                    let mut co = Vec::new();
                    self.contacts.start(addrs, &mut co);
                    self.contact_outputs(co, out);
                }
                master::Action::Abdicate { reason } => {
                    if self.elector.is_some() {
                        // The master is in standby already; the session goes
                        // in this same step.
                        self.abdicate(reason, queue, out);
                    } else {
                        out.push(Output::Exit { reason });
                    }
                }
            }
        }
    }

    fn elector_actions(
        &mut self,
        now: Millis,
        actions: Vec<elector::Action>,
        queue: &mut VecDeque<Inner>,
        out: &mut Vec<Output>,
    ) {
        for a in actions {
            match a {
                // The store shares the session: requests are numbered again
                // so each reply finds its machine (the routes die with the
                // session).
                elector::Action::Zk(ZkCommand::Request { session, req, op }) => {
                    let req = self.alloc(Route::Elector(req));
                    out.push(Output::Zk(ZkCommand::Request { session, req, op }));
                }
                elector::Action::Zk(command) => {
                    self.routes.clear();
                    out.push(Output::Zk(command));
                }
                elector::Action::SetTimer { timer, at } => {
                    self.deadlines.set(Timer::Elector(timer), at)
                }
                elector::Action::CancelTimer { timer } => {
                    self.deadlines.cancel(Timer::Elector(timer))
                }
                elector::Action::LeaderNamed { id, addr, floor } => {
                    let named = (id.clone(), addr.clone(), floor);
                    if self.last_leader.as_ref() != Some(&named) {
                        self.metrics.leader_changes += 1;
                        self.last_leader = Some(named);
                        let (id, addr) = (id.clone(), addr.clone());
                        out.push(Output::Note(Note::LeaderNamed { id, addr, floor }));
                    }
                    let named = master::Event::LeaderNamed { id: id.clone(), addr: addr.clone() };
                    queue.push_back(Inner::Master(named));
                    self.watch_do(queue, out, |w, o| w.set_leader(Some((id, addr)), o));
                }
                elector::Action::Elected { floor } => {
                    self.metrics.elections += 1;
                    out.push(Output::Note(Note::Elected { floor }));
                    let fence = self.elector.as_ref().and_then(|e| e.fence());
                    if let Some(s) = &mut self.store {
                        s.clear();
                        s.set_fence(fence);
                    }
                    queue.push_back(Inner::Master(master::Event::Elected {
                        floor,
                        clock: self.clock(now),
                    }));
                }
                elector::Action::Suspended => {
                    out.push(Output::Note(Note::Suspended));
                    queue.push_back(Inner::Master(master::Event::Suspended));
                }
                elector::Action::Resumed => {
                    out.push(Output::Note(Note::Resumed));
                    queue.push_back(Inner::Master(master::Event::Resumed));
                    self.deadlines.cancel(Timer::StoreRetry);
                    self.store_resume(queue, out);
                    self.pump_held(now, queue, out);
                }
                elector::Action::Masters { addrs } => {
                    queue.push_back(Inner::Master(master::Event::Masters { addrs }))
                }
                elector::Action::Confirmed { .. } => self.pump_held(now, queue, out),
                elector::Action::Outgrown { round_trip, acting_lease } => {
                    let reason = format!(
                        "the ZooKeeper round trip ({} ms) outgrew the acting lease of this master's election node (L {} ms): no command can be confirmed; rejoining with a node whose lease fits",
                        round_trip.0, acting_lease.0
                    );
                    self.give_up(reason, queue, out);
                }
                elector::Action::Deposed { leader, outcome } => {
                    if matches!(outcome, DeposeOutcome::Deleted { .. }) {
                        self.metrics.takeovers += 1;
                    }
                    out.push(Output::Note(Note::Deposed { leader, outcome }));
                }
                elector::Action::Revoked => {
                    if self.master.status() != Status::Standby {
                        self.metrics.revocations += 1;
                        out.push(Output::Note(Note::Revoked));
                    }
                    self.drop_store_jobs();
                    self.contacts.stop();
                    self.drop_held(out);
                    queue.push_back(Inner::Master(master::Event::Revoked));
                }
            }
        }
    }

    /// A frame of the master: a command goes out only under the acting
    /// lease (ZooKeeper mode); commands keep their order, and a close of a
    /// connection with a held command waits behind it. (Held commands are
    /// bounded by the master's state: each is sent once per executor or
    /// connection.)
    fn gate_send(
        &mut self,
        now: Millis,
        conn: ConnId,
        msg: Message,
        queue: &mut VecDeque<Inner>,
        out: &mut Vec<Output>,
    ) {
        let Some(e) = &self.elector else {
            out.push(Output::Send { conn, msg });
            return;
        };
        if !msg.is_command() {
            // Other frames never wait: what they say is fenced by the epoch
            // at the peer, and holding them would hold a connection's
            // heartbeats behind a lease that cannot be confirmed.
            out.push(Output::Send { conn, msg });
            return;
        }
        if e.may_command(now) {
            // Confirm again before the lease runs out, so a stream of
            // commands does not stall on it.
            let half = Millis(e.acting_lease().0 / 2);
            if e.acting_until() < now + half {
                queue.push_back(Inner::Elector(elector::Event::Confirm));
            }
            self.flush_held(out);
            out.push(Output::Send { conn, msg });
            return;
        }
        let held = self.held.entry(conn).or_default();
        if held.len() >= MAX_HELD_PER_CONN {
            // A peer that keeps provoking commands (reports of executors
            // nobody launched, say) while the lease cannot be confirmed:
            // its connection goes, with what waited for it; the peer
            // reconnects and the master decides afresh.
            let dropped = self.held.remove(&conn).map_or(0, |h| h.len());
            self.metrics.commands_dropped += dropped as u64 + 1;
            let reason = format!(
                "more than {MAX_HELD_PER_CONN} commands waited for the acting lease on this connection"
            );
            out.push(Output::Close { conn, reason });
            queue.push_back(Inner::Master(master::Event::Disconnected { conn }));
            return;
        }
        self.metrics.commands_held += 1;
        held.push(Held::Send { conn, msg, since: now });
        if self.deadlines.get(Timer::Stalled).is_none() && !self.stall_noted {
            self.deadlines.set(Timer::Stalled, now + STALL_NOTE_AFTER);
        }
        self.pump_held(now, queue, out);
    }

    /// Releases held frames if the acting lease allows, or arranges for it
    /// to be confirmed (right away, or shortly before a new leader's wait
    /// ends).
    fn pump_held(&mut self, now: Millis, queue: &mut VecDeque<Inner>, out: &mut Vec<Output>) {
        let Some(e) = &self.elector else { return };
        // What the lease allows now, and when to look again.
        let (flush, confirm, wake) = if self.held.is_empty() || !e.is_acting(now) {
            // Nothing held; or suspended (`Resumed` pumps again) or
            // revoked (`Revoked` drops what is held).
            (false, false, None)
        } else if e.may_command(now) {
            (true, false, None)
        } else {
            // The first moment a command may leave, and whether the lease
            // confirmed so far still covers it.
            let from = e.commands_from();
            let start = from.max(now);
            // Confirm no earlier than half a lease before that moment, so
            // the confirmation still holds when the wait ends.
            let ask_at = Millis(start.0.saturating_sub(e.acting_lease().0 / 2));
            if e.acting_until() > start {
                (false, false, Some(from))
            } else if now < ask_at {
                (false, false, Some(ask_at))
            } else {
                // The confirmation's answer pumps again; if the wait is
                // still not over then, the timer does.
                (false, true, (now < from).then_some(from))
            }
        };
        match wake {
            Some(at) => self.deadlines.set(Timer::Commands, at),
            None => self.deadlines.cancel(Timer::Commands),
        }
        if confirm {
            queue.push_back(Inner::Elector(elector::Event::Confirm));
        }
        if flush {
            self.flush_held(out);
        }
    }

    /// The oldest held command has waited [`STALL_NOTE_AFTER`]: say why
    /// the leader cannot command, once for this stall.
    fn note_stall(&mut self, now: Millis, out: &mut Vec<Output>) {
        let Some(oldest) = self.held_since().into_iter().min() else { return };
        if self.stall_noted {
            return;
        }
        let waited = now.since(oldest);
        if waited < STALL_NOTE_AFTER {
            self.deadlines.set(Timer::Stalled, oldest + STALL_NOTE_AFTER);
            return;
        }
        let Some(e) = &self.elector else { return };
        self.stall_noted = true;
        let held = self.held_since().len() as u64;
        let reason = e.why_no_command(now);
        out.push(Output::Note(Note::CommandsStalled { held, waited, reason }));
    }

    /// Nothing is held any more: a later stall is noted again.
    fn stall_over(&mut self) {
        self.stall_noted = false;
        self.deadlines.cancel(Timer::Stalled);
    }

    fn flush_held(&mut self, out: &mut Vec<Output>) {
        self.stall_over();
        for h in std::mem::take(&mut self.held).into_values().flatten() {
            out.push(match h {
                Held::Send { conn, msg, .. } => Output::Send { conn, msg },
                Held::Close { conn, reason } => Output::Close { conn, reason },
            });
        }
    }

    /// The leadership ended: held commands never go out (the next leader
    /// decides afresh); held closes still happen.
    fn drop_held(&mut self, out: &mut Vec<Output>) {
        self.deadlines.cancel(Timer::Commands);
        self.stall_over();
        for h in std::mem::take(&mut self.held).into_values().flatten() {
            match h {
                Held::Send { msg, .. } => {
                    if msg.is_command() {
                        self.metrics.commands_dropped += 1;
                    }
                }
                Held::Close { conn, reason } => out.push(Output::Close { conn, reason }),
            }
        }
    }
}

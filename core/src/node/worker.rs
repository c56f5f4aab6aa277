//! [`WorkerNode`]: the worker daemon's composition, pure.
//!
//! The node owns the [`Worker`] machine and everything both runtimes used
//! to keep beside it: which connection belongs to which master, which dial
//! is current (a dial that was superseded or whose master was dropped
//! meanwhile is closed when it completes), which connections the worker
//! closed itself (their later frames and closes are ignored), the machine's
//! deadline (the machine's own, [`Worker::poll_timeout`]), and the shutdown rule (once stopping,
//! no executor starts: a launch the machine asks for is reported `Killed`,
//! the worker's doing, not the executor's fault). What an operator sees in
//! the log comes out as [`Note`]s.
//!
//! The runtime dials, runs connections, supervises executor processes,
//! keeps the clock and catches signals; it feeds what happens and executes
//! [`Output`]s in order.
//!
//! Executor output: a `ReadLog` of the followed master becomes
//! [`Output::ReadLog`] (at most [`MAX_LOG_READS_PER_WORKER`] unanswered;
//! past that the master is told the worker is busy), and the runtime's
//! [`Input::LogRead`] goes back as `LogData` on the connection the request
//! came in on, if it is still open.
//!
//! Tests: `core/tests/worker_node.rs`, `core/tests/log_relay.rs`, the
//! simulator (every worker), and the daemons' suites (`runtime-smol/tests/worker_daemon.rs`).

use super::{Ended, NoteLevel};
use crate::ids::{Addr, ConnId, ExecutorId};
use crate::limits::MAX_LOG_READS_PER_WORKER;
use crate::protocol::{ExecutorReport, ExecutorState, LeaderHint, LogRead, LogStream, Message};
use crate::time::Millis;
use crate::worker::{self, Worker, WorkerStatus};
use std::collections::{BTreeMap, BTreeSet};

/// Worker node configuration: the machine's.
pub type Config = worker::Config;

pub use super::{DialId, DialResult};
pub use crate::worker::ExecutorCommand;

/// What happens to a worker node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The process starts: dial every configured master.
    Start,
    /// At start-up the runtime found an executor a previous process of
    /// this worker left: re-adopted (`Running`) or killed, ended or left
    /// alone (a terminal state); the master hears of it at registration.
    /// Fed right after [`Input::Start`], before any `ExecutorChanged` of it.
    LeftBehind(ExecutorReport),
    /// A dial asked for by [`Output::Dial`] ended.
    Dialled {
        /// The dial.
        dial: DialId,
        /// How.
        result: DialResult,
    },
    /// A master dialled the callback listener: `conn` runs (the handshake
    /// happens inside it); its frames come as [`Input::Message`], its end
    /// as [`Input::Closed`].
    Accepted {
        /// The runtime's number for the connection.
        conn: ConnId,
    },
    /// A frame arrived on `conn`.
    Message {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// `conn` closed (by the peer, a failure or a refusal).
    Closed {
        /// The connection.
        conn: ConnId,
        /// How it ended.
        how: Ended,
        /// Why, for the log.
        reason: String,
    },
    /// An executor changed state (started, exited, killed, failed to start).
    ExecutorChanged {
        /// The executor.
        executor: ExecutorId,
        /// Its new state.
        state: ExecutorState,
    },
    /// The runtime's periodic sample of its executors' usage and its work
    /// directory's space ([`worker::Event::Usage`]; sample about every
    /// [`worker::USAGE_INTERVAL`]).
    Usage(crate::protocol::WorkerUsage),
    /// The deadline from [`WorkerNode::poll_timeout`] passed.
    Tick,
    /// Shutdown begins: the runtime kills every executor (feeding their
    /// ends) while the node keeps reporting; no executor starts any more.
    Stop,
    /// The answer to [`Output::ReadLog`].
    LogRead {
        /// Echoed from the output.
        read: u64,
        /// What was read, or why nothing could be.
        result: LogRead,
    },
    /// The outcome of a health check run asked for by
    /// [`worker::ExecutorCommand::RunCheck`] (appended; passed to the
    /// machine as [`worker::Event::CheckResult`]).
    CheckResult {
        /// The executor checked.
        executor: ExecutorId,
        /// Which of its group's checks.
        check: u8,
        /// The run's number, echoed.
        run: u64,
        /// What it found.
        outcome: crate::health::CheckOutcome,
    },
    /// An executor re-adopted from a previous process of this worker
    /// ([`Input::LeftBehind`] `Running`, fed right after it) whose record
    /// keeps its group's disconnect rule or health checks (appended;
    /// passed to the machine as [`worker::Event::Readopted`];
    /// docs/design.md#issue-45).
    Readopted {
        /// The executor.
        executor: ExecutorId,
        /// Its group's disconnect rule, if a singleton.
        disconnect: Option<crate::launch::Disconnect>,
        /// Its group's health checks.
        checks: Vec<crate::launch::CheckSpec>,
    },
}

/// What the runtime must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Dial `master` (resolution, the exposure check on every address, a
    /// timeout), then feed [`Input::Dialled`] with `dial`.
    Dial {
        /// Echoed back.
        dial: DialId,
        /// Where to dial.
        master: Addr,
    },
    /// Send `msg` on `conn`.
    Send {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// Close `conn` after flushing what was sent; feed nothing more of it.
    Close {
        /// The connection.
        conn: ConnId,
        /// Why, for the log.
        reason: String,
    },
    /// Carry out the machine's [`ExecutorCommand`] on the supervised
    /// executor processes (passed through untouched, except that a start
    /// asked for while stopping never reaches the runtime).
    Executor(ExecutorCommand),
    /// The worker must stop (told to by its master, or it gave up): kill
    /// every executor, feed their ends, flush the connections, exit with
    /// `reason` as the error.
    Exit {
        /// Why.
        reason: String,
    },
    /// Read a chunk of an executor's output file ([`LogReadRequest`]), then
    /// feed [`Input::LogRead`] with its `read`, always.
    ReadLog(LogReadRequest),
    /// Purely observational: a log line.
    Note(Note),
    /// The connections' read and write timeouts scale with `heartbeat`
    /// from now on: the interval the followed master told. Said once it is known and
    /// whenever it changes.
    ConnTimeouts {
        /// The interval the timeouts scale with.
        heartbeat: Millis,
    },
}

/// A read of a chunk of an executor's output file,
/// `<work_dir>/executors/<escaped id>/<stream>` (the runtime escapes the id
/// so no path can leave that directory, and follows no symbolic link): from
/// `offset`, or the last `max` bytes when `offset` is `None`; at most `max`
/// bytes, never past the size the file had when it was opened. The answer
/// is [`Input::LogRead`] with `read` (a failure is a [`LogRead::Failed`]
/// naming the file and the error).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogReadRequest {
    /// Echoed back in [`Input::LogRead`].
    pub read: u64,
    /// The executor.
    pub executor: ExecutorId,
    /// Which file.
    pub stream: LogStream,
    /// Where to start.
    pub offset: Option<u64>,
    /// The most bytes to read.
    pub max: u32,
}

impl LogReadRequest {
    /// The input that answers this request with `result`.
    pub fn answer(self, result: LogRead) -> Input {
        Input::LogRead { read: self.read, result }
    }
}

/// What an operator sees in the worker's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// Connected to `master` as `conn`.
    Connected {
        /// The master.
        master: Addr,
        /// The connection.
        conn: ConnId,
    },
    /// A dial failed. `first`: the first failure in a row for this master
    /// (later ones are routine); `refused_first`: the first time the
    /// exposure check refused it (a configuration problem: warn).
    DialFailed {
        /// The master.
        master: Addr,
        /// Why.
        reason: String,
        /// First failure in a row.
        first: bool,
        /// First refusal by the exposure check.
        refused_first: bool,
    },
    /// The connection to `master` closed.
    Disconnected {
        /// The master.
        master: Addr,
        /// Why.
        reason: String,
    },
    /// The worker closed its connection to `master`.
    Closing {
        /// The master.
        master: Addr,
        /// Why.
        reason: String,
    },
    /// The followed master or the registration changed.
    Status(WorkerStatus),
    /// An executor was not started because the worker is shutting down.
    NotStarting {
        /// The executor.
        executor: ExecutorId,
    },
    /// `master` refused this worker's registration (a limit such as
    /// `max_workers`, named in `reason`); the worker retries slowly.
    RegistrationRefused {
        /// The master.
        master: Addr,
        /// Why, naming the limit.
        reason: String,
    },
    /// A master dialled the callback listener and named a leader (seed
    /// 002); the worker probes it.
    Hinted {
        /// The leader named.
        leader: LeaderHint,
    },
    /// A master's message broke a limit on peer input (too many advertised
    /// masters, an address too long) and was ignored: log a warning.
    Rejected {
        /// The master (for a callback hint, the leader it named).
        master: Addr,
        /// Which limit, and by how much.
        reason: String,
    },
}

impl Note {
    /// The level to log this note at: a dial's first failure in a row at
    /// info and the later ones at debug, the first refusal by the exposure
    /// check (a configuration problem) as a warning, as are a refused
    /// registration, a limit broken by a master and an executor not
    /// started.
    pub fn level(&self) -> NoteLevel {
        match self {
            Note::DialFailed { refused_first: true, .. } => NoteLevel::Warn,
            Note::DialFailed { first: true, .. } => NoteLevel::Info,
            Note::DialFailed { .. } => NoteLevel::Debug,
            Note::Connected { .. }
            | Note::Disconnected { .. }
            | Note::Closing { .. }
            | Note::Status(_)
            | Note::Hinted { .. } => NoteLevel::Info,
            Note::NotStarting { .. } | Note::RegistrationRefused { .. } | Note::Rejected { .. } => {
                NoteLevel::Warn
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Dialing(DialId),
    Open(ConnId),
}

/// The worker node (see the module docs).
#[derive(Debug)]
pub struct WorkerNode {
    worker: Worker,
    links: BTreeMap<Addr, Link>,
    dials: BTreeMap<DialId, Addr>,
    conns: BTreeMap<ConnId, Addr>,
    /// Connections masters dialled to the callback listener.
    callbacks: BTreeSet<ConnId>,
    next_dial: u64,
    /// Masters whose last dial failed (a failure is news once in a row).
    failing: BTreeSet<Addr>,
    /// Masters the exposure check refused (warned about once).
    refused: BTreeSet<Addr>,
    stopping: bool,
    exited: bool,
    shown: Option<(Option<Addr>, bool)>,
    /// Log reads the runtime was asked for and has not answered: read →
    /// (connection, relay, live).
    reads: BTreeMap<u64, (ConnId, u64, bool)>,
    next_read: u64,
    /// The heartbeat interval last said in [`Output::ConnTimeouts`].
    told_heartbeat: Option<Millis>,
}

impl WorkerNode {
    /// A node that has not started; feed [`Input::Start`].
    pub fn new(config: Config) -> Self {
        WorkerNode {
            worker: Worker::new(config),
            links: BTreeMap::new(),
            dials: BTreeMap::new(),
            conns: BTreeMap::new(),
            callbacks: BTreeSet::new(),
            next_dial: 0,
            failing: BTreeSet::new(),
            refused: BTreeSet::new(),
            stopping: false,
            exited: false,
            shown: None,
            reads: BTreeMap::new(),
            next_read: 0,
            told_heartbeat: None,
        }
    }

    /// The worker machine (read-only).
    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    /// What the machine shows an observer.
    pub fn status(&self) -> WorkerStatus {
        self.worker.status()
    }

    /// The earliest deadline; feed [`Input::Tick`] once it has passed.
    pub fn poll_timeout(&self) -> Option<Millis> {
        self.worker.poll_timeout()
    }

    /// The master a connection belongs to, if the node still counts it.
    pub fn master_of(&self, conn: ConnId) -> Option<&Addr> {
        self.conns.get(&conn)
    }

    /// Every open connection (what the runtime flushes when it stops).
    pub fn open_connections(&self) -> Vec<ConnId> {
        self.conns.keys().copied().collect()
    }

    /// Handles one input at time `now`.
    #[must_use]
    pub fn handle(&mut self, now: Millis, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        let mut events: Vec<worker::Event> = Vec::new();
        match input {
            Input::Start => events.push(worker::Event::Start),
            Input::LeftBehind(report) => events.push(worker::Event::LeftBehind(report)),
            Input::Usage(usage) => events.push(worker::Event::Usage(usage)),
            Input::Readopted { executor, disconnect, checks } => {
                events.push(worker::Event::Readopted { executor, disconnect, checks })
            }
            Input::CheckResult { executor, check, run, outcome } => {
                events.push(worker::Event::CheckResult { executor, check, run, outcome })
            }
            Input::Dialled { dial, result } => self.on_dialled(dial, result, &mut events, &mut out),
            Input::Accepted { conn } => {
                self.callbacks.insert(conn);
            }
            Input::Message { conn, msg } if self.callbacks.contains(&conn) => {
                // Seed 002 (docs/design.md#seed-002): a new leader tells of itself; the rest of what
                // a master says comes on the worker's own connections.
                if let Message::MasterChanged { leader, masters, .. } = msg {
                    self.callbacks.remove(&conn);
                    let reason = "the leader's news is taken".into();
                    out.push(Output::Close { conn, reason });
                    out.push(Output::Note(Note::Hinted { leader: leader.clone() }));
                    events.push(worker::Event::Hint { leader, masters });
                }
            }
            Input::Message { conn, msg } => {
                // Frames of a connection the worker closed are ignored.
                if let Some(from) = self.conns.get(&conn).cloned() {
                    if let Message::RegisterRefused { reason, .. } = &msg {
                        let (master, reason) = (from.clone(), reason.clone());
                        out.push(Output::Note(Note::RegistrationRefused { master, reason }));
                    }
                    events.push(worker::Event::Message { from, msg });
                }
            }
            Input::Closed { conn, .. } if self.callbacks.remove(&conn) => {}
            Input::Closed { conn, reason, .. } => {
                if let Some(master) = self.conns.remove(&conn) {
                    if self.links.get(&master) == Some(&Link::Open(conn)) {
                        self.links.remove(&master);
                    }
                    out.push(Output::Note(Note::Disconnected { master: master.clone(), reason }));
                    events.push(worker::Event::Disconnected { master });
                }
            }
            Input::ExecutorChanged { executor, state } => {
                events.push(worker::Event::ExecutorChanged { executor, state })
            }
            Input::Tick => {
                if self.worker.poll_timeout().is_some_and(|at| at <= now) {
                    events.push(worker::Event::Tick);
                }
            }
            Input::Stop => self.stopping = true,
            Input::LogRead { read, result } => {
                // The answer goes out on the connection the request came
                // in on, if the node still counts it.
                if let Some((conn, relay, live)) = self.reads.remove(&read) {
                    if self.conns.contains_key(&conn) {
                        let msg = Message::LogData { relay, live, read: result };
                        out.push(Output::Send { conn, msg });
                    }
                }
            }
        }
        // One machine call per event, each one's follow-ups (a launch
        // refused while stopping) fed right after it.
        let mut queue: std::collections::VecDeque<worker::Event> = events.into();
        while let Some(event) = queue.pop_front() {
            let actions = self.worker.handle(now, event);
            for a in actions {
                self.execute(a, &mut queue, &mut out);
            }
        }
        self.note_status(&mut out);
        if let Some(heartbeat) = self.worker.heartbeat_interval() {
            if self.told_heartbeat.replace(heartbeat) != Some(heartbeat) {
                out.push(Output::ConnTimeouts { heartbeat });
            }
        }
        out
    }

    fn on_dialled(
        &mut self,
        dial: DialId,
        result: DialResult,
        events: &mut Vec<worker::Event>,
        out: &mut Vec<Output>,
    ) {
        let Some(master) = self.dials.remove(&dial) else {
            // Not a dial of ours: close what it opened.
            if let DialResult::Connected { conn, .. } = result {
                out.push(Output::Close { conn, reason: "unknown dial".into() });
            }
            return;
        };
        let current = self.links.get(&master) == Some(&Link::Dialing(dial));
        match result {
            DialResult::Connected { conn, .. } if current => {
                self.failing.remove(&master);
                self.links.insert(master.clone(), Link::Open(conn));
                self.conns.insert(conn, master.clone());
                out.push(Output::Note(Note::Connected { master: master.clone(), conn }));
                events.push(worker::Event::Connected { master });
            }
            DialResult::Connected { conn, .. } => {
                // Superseded, or the machine dropped the master meanwhile.
                out.push(Output::Close { conn, reason: "a superseded dial".into() });
            }
            DialResult::Failed { reason, refused } if current => {
                self.links.remove(&master);
                let first = self.failing.insert(master.clone());
                let refused_first = refused && self.refused.insert(master.clone());
                out.push(Output::Note(Note::DialFailed {
                    master: master.clone(),
                    reason,
                    first,
                    refused_first,
                }));
                events.push(worker::Event::ConnectFailed { master });
            }
            DialResult::Failed { .. } => {}
        }
    }

    fn execute(
        &mut self,
        action: worker::Action,
        queue: &mut std::collections::VecDeque<worker::Event>,
        out: &mut Vec<Output>,
    ) {
        match action {
            worker::Action::Connect { master } => {
                if let Some(Link::Open(conn)) = self.links.remove(&master) {
                    // One connection per master: a lingering one goes.
                    self.conns.remove(&conn);
                    out.push(Output::Close { conn, reason: "replaced by a new dial".into() });
                }
                let dial = DialId(self.next_dial);
                self.next_dial += 1;
                self.dials.insert(dial, master.clone());
                self.links.insert(master.clone(), Link::Dialing(dial));
                out.push(Output::Dial { dial, master });
            }
            worker::Action::Send { to, msg } => {
                // Without a connection the message is dropped: the machine
                // sends again what matters once connected.
                if let Some(Link::Open(conn)) = self.links.get(&to) {
                    out.push(Output::Send { conn: *conn, msg });
                }
            }
            worker::Action::Close { master, reason } => {
                if let Some(link) = self.links.remove(&master) {
                    out.push(Output::Note(Note::Closing {
                        master: master.clone(),
                        reason: reason.clone(),
                    }));
                    if let Link::Open(conn) = link {
                        self.conns.remove(&conn);
                        out.push(Output::Close { conn, reason });
                    }
                }
            }
            worker::Action::Executor(ExecutorCommand::Start { executor, .. }) if self.stopping => {
                // The runtime's kill of every executor does not cover a
                // launch made while it runs.
                out.push(Output::Note(Note::NotStarting { executor: executor.clone() }));
                queue.push_back(worker::Event::ExecutorChanged {
                    executor,
                    state: ExecutorState::Killed,
                });
            }
            worker::Action::Executor(cmd) => out.push(Output::Executor(cmd)),
            worker::Action::ReadLog { master, relay, executor, stream, offset, max, live } => {
                let Some(Link::Open(conn)) = self.links.get(&master).copied() else { return };
                if self.reads.len() >= MAX_LOG_READS_PER_WORKER {
                    let reason = format!(
                        "{} reads of executor output are in progress on this worker; the \
                         limit is {MAX_LOG_READS_PER_WORKER} (MAX_LOG_READS_PER_WORKER)",
                        self.reads.len()
                    );
                    let msg = Message::LogData { relay, live, read: LogRead::Failed { reason } };
                    out.push(Output::Send { conn, msg });
                    return;
                }
                let read = self.next_read;
                self.next_read += 1;
                self.reads.insert(read, (conn, relay, live));
                out.push(Output::ReadLog(LogReadRequest { read, executor, stream, offset, max }));
            }
            worker::Action::Rejected { from, reason } => {
                out.push(Output::Note(Note::Rejected { master: from, reason }))
            }
            worker::Action::Exit { reason } => {
                if !self.exited {
                    self.exited = true;
                    out.push(Output::Exit { reason });
                }
            }
        }
    }

    fn note_status(&mut self, out: &mut Vec<Output>) {
        let st = self.worker.status();
        let now = (st.active.clone(), st.registered);
        if self.shown.as_ref() != Some(&now) {
            self.shown = Some(now);
            out.push(Output::Note(Note::Status(st)));
        }
    }
}

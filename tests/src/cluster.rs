//! A deterministic in-memory cluster of master machines, worker nodes and
//! subscriber machines.
//!
//! Nothing here decides protocol: it only moves messages, persists writes
//! (instantly durable, acknowledged by a queued `Persisted`), keeps each
//! machine's next deadline and a virtual clock, and records what the invariants need. Each worker is a
//! [`WorkerNode`] (the worker daemon's composition, as the runtimes drive
//! it): its dials complete at once (or fail across a partition), and its one
//! deadline ([`WorkerNode::poll_timeout`]) is fed back as a `Tick`.

use regent_core::ids::InstanceId;
use regent_core::master::{self, Master};
use regent_core::node::worker::{
    self as wnode, DialResult, ExecutorCommand, LogReadRequest, WorkerNode,
};
use regent_core::protocol::Message;
use regent_core::protocol::{ExecutorState, GroupSpec};
use regent_core::store::{Record, RecordKey, SlotOutcome};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::subscriber::{self, Subscriber};
use regent_core::worker;
use regent_core::{
    Addr, ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, MasterId, Millis, WorkerId,
};
use std::collections::{BTreeMap, BTreeSet};

/// One step of a schedule.
#[derive(Clone, Debug)]
pub enum Step {
    /// Deliver the in-flight packet at this index (modulo the count): any
    /// index, so deliveries are reordered.
    Deliver(usize),
    /// Drop the in-flight packet at this index.
    Drop(usize),
    /// Duplicate the in-flight message at this index.
    Duplicate(usize),
    /// Advance the clock by this many ms and fire every due timer.
    Tick(u16),
    /// Revoke the current leader (if any) and elect this master at a new epoch.
    Elect(usize),
    /// Elect this master at a new epoch *without* revoking the old leader
    /// yet: the old one keeps acting until `RevokeStale`.
    ElectLate(usize),
    /// Revoke every leader but the newest.
    RevokeStale,
    /// Close the connection between a worker and a master.
    Disconnect(usize, usize),
    /// Cut (or heal) the link between a worker and a master: connects fail
    /// and nothing is delivered.
    TogglePartition(usize, usize),
    /// Deliver everything in order and run timers for this many ms (a calm
    /// stretch inside a schedule; partitions stay as they are).
    Quiet(u16),
    /// Start a new subscriber instance of this framework (the old one keeps
    /// running, as a partitioned scheduler would).
    FailoverSubscriber(usize),
    /// The executor at this index (over every live executor on every
    /// worker) exits by itself, with code 0 when the flag says so, else 1.
    ExitExecutor(usize, bool),
}

#[derive(Clone, Debug)]
enum Packet {
    ToMaster {
        m: usize,
        w: usize,
        conn: ConnId,
        msg: Message,
    },
    ToWorker {
        w: usize,
        m: usize,
        conn: ConnId,
        msg: Message,
    },
    Persisted {
        m: usize,
        write: regent_core::store::WriteId,
    },
    Loaded {
        m: usize,
    },
    /// An executor process of worker `w` changed state.
    Exec {
        w: usize,
        executor: regent_core::ExecutorId,
        state: regent_core::protocol::ExecutorState,
    },
    PersistFailed {
        m: usize,
        write: regent_core::store::WriteId,
    },
    FromSub {
        m: usize,
        s: usize,
        conn: ConnId,
        msg: Message,
    },
    ToSub {
        s: usize,
        m: usize,
        conn: ConnId,
        msg: Message,
    },
}

impl Packet {
    /// The ordered stream this packet belongs to: a connection's direction.
    /// Store answers and process events are each independent.
    fn stream(&self) -> Option<(ConnId, bool)> {
        match self {
            Packet::ToMaster { conn, .. } | Packet::FromSub { conn, .. } => Some((*conn, true)),
            Packet::ToWorker { conn, .. } | Packet::ToSub { conn, .. } => Some((*conn, false)),
            _ => None,
        }
    }

    /// Network messages can be lost or duplicated; the answers of the store
    /// and of the worker's own process supervision cannot.
    fn is_message(&self) -> bool {
        matches!(
            self,
            Packet::ToMaster { .. }
                | Packet::ToWorker { .. }
                | Packet::FromSub { .. }
                | Packet::ToSub { .. }
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKey {
    /// The master's earliest deadline ([`Master::poll_timeout`]).
    Master(usize),
    /// The worker node's one deadline.
    Worker(usize),
    /// The subscriber's earliest deadline ([`Subscriber::poll_timeout`]).
    Sub(usize),
}

/// A subscriber process and what its program has been told.
#[derive(Debug)]
pub struct SubProc {
    /// The machine.
    pub machine: Subscriber,
    /// Which framework (index) it serves.
    pub framework: usize,
    /// The executors as its program sees them (snapshots and updates).
    pub view: BTreeMap<ExecutorId, ExecutorState>,
    /// It stopped (told that the framework failed over elsewhere).
    pub exited: bool,
}

/// The id of framework `k`.
pub fn framework_id(k: usize) -> FrameworkId {
    FrameworkId(format!("f{k}"))
}

/// A violated invariant, with the step it was seen at.
#[derive(Clone, Debug)]
pub struct Violation {
    /// Which invariant.
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
}

/// The harness.
#[derive(Debug)]
pub struct Cluster {
    /// Virtual time.
    pub now: Millis,
    /// The master machines, by index; address `m<i>`.
    pub masters: Vec<Master>,
    /// The worker nodes, by index; id `w<i>`.
    pub workers: Vec<WorkerNode>,
    inflight: Vec<Packet>,
    timers: BTreeMap<TimerKey, Millis>,
    conns: BTreeMap<(usize, usize), ConnId>,
    partitions: BTreeSet<(usize, usize)>,
    next_conn: u64,
    next_epoch: u64,
    /// Which master each epoch was given to.
    pub epoch_owner: BTreeMap<Epoch, usize>,
    /// Masters told they lead, with the epoch floor they were given.
    leaders: BTreeMap<usize, Epoch>,
    /// The recovery store, shared by the masters as in ZooKeeper mode.
    pub store: BTreeMap<RecordKey, Record>,
    /// Exits seen, by worker.
    pub exits: Vec<(usize, String)>,
    /// Per worker: the highest epoch at which a delivered message proved
    /// its sender's leadership.
    pub proven: Vec<Epoch>,
    /// Subscriber processes, oldest first.
    pub subs: Vec<SubProc>,
    sub_conns: BTreeMap<(usize, usize), ConnId>,
    next_instance: u64,
    /// Violations seen while events were handled (not visible afterwards).
    pub seen: Vec<Violation>,
    /// Record every delivery in `trace` (for debugging a failing schedule).
    pub tracing: bool,
    /// Deliveries, when `tracing`.
    pub trace: Vec<String>,
    /// Executors whose process exit is already on its way.
    exiting: BTreeSet<ExecutorId>,
    /// Executors that exited 0 while the newest leader counted them live.
    pub known_exits: Vec<(FrameworkId, ExecutorId)>,
    /// First-time acknowledgements: (master, epoch, worker id, incarnation) -> count.
    pub acks: BTreeMap<(usize, Epoch, WorkerId, Incarnation), u32>,
}

/// The address of master `i`.
pub fn master_addr(i: usize) -> Addr {
    Addr(format!("m{i}"))
}

impl Cluster {
    /// `n_masters` standbys and `n_workers` started workers, configured with
    /// every master.
    pub fn new(n_masters: usize, n_workers: usize, seed: u64) -> Self {
        Self::with_frameworks(n_masters, n_workers, 0, seed)
    }

    /// Like [`Cluster::new`], plus one subscriber for each of `n_frameworks`
    /// frameworks, each declaring a group of two one-core executors.
    pub fn with_frameworks(
        n_masters: usize,
        n_workers: usize,
        n_frameworks: usize,
        seed: u64,
    ) -> Self {
        let masters = (0..n_masters)
            .map(|i| Master::new(master::Config::new(MasterId(format!("m{i}")), master_addr(i))))
            .collect();
        let addrs: Vec<Addr> = (0..n_masters).map(master_addr).collect();
        let workers = (0..n_workers)
            .map(|i| {
                let mut c = worker::Config::new(
                    "sim",
                    WorkerId(format!("w{i}")),
                    Incarnation(1000 + i as u64),
                    addrs.clone(),
                    4,
                    1024,
                );
                c.seed = seed.wrapping_add(i as u64);
                WorkerNode::new(c)
            })
            .collect();
        let mut c = Cluster {
            now: Millis(0),
            masters,
            workers,
            inflight: Vec::new(),
            timers: BTreeMap::new(),
            conns: BTreeMap::new(),
            partitions: BTreeSet::new(),
            next_conn: 1,
            next_epoch: 1,
            epoch_owner: BTreeMap::new(),
            leaders: BTreeMap::new(),
            store: BTreeMap::new(),
            exits: Vec::new(),
            proven: vec![Epoch::ZERO; n_workers],
            subs: Vec::new(),
            sub_conns: BTreeMap::new(),
            next_instance: 5000,
            seen: Vec::new(),
            known_exits: Vec::new(),
            exiting: BTreeSet::new(),
            tracing: false,
            trace: Vec::new(),
            acks: BTreeMap::new(),
        };
        for w in 0..n_workers {
            c.worker_event(w, wnode::Input::Start);
        }
        for k in 0..n_frameworks {
            c.start_subscriber(k);
        }
        c
    }

    fn start_subscriber(&mut self, framework: usize) {
        let addrs: Vec<Addr> = (0..self.masters.len()).map(master_addr).collect();
        self.next_instance += 1;
        let mut cfg = subscriber::Config::new("sim", "app", InstanceId(self.next_instance), addrs);
        cfg.framework = Some(framework_id(framework));
        cfg.failover_timeout = Millis(600_000);
        let machine = Subscriber::new(cfg);
        self.subs.push(SubProc { machine, framework, view: BTreeMap::new(), exited: false });
        let s = self.subs.len() - 1;
        self.sub_event(s, subscriber::Event::Start);
        let spec = GroupSpec {
            group: "g".into(),
            slots: 2,
            command: vec!["run".into()],
            env: vec![],
            cores: 1,
            memory_mb: 128,
            policy: Default::default(),
            launch: Default::default(),
        };
        self.sub_event(s, subscriber::Event::Declare(spec));
    }

    /// The newest leader, if one is acting.
    pub fn leader(&self) -> Option<usize> {
        self.leaders.iter().max_by_key(|(_, e)| **e).map(|(m, _)| *m)
    }

    /// Runs one schedule step.
    pub fn step(&mut self, step: &Step) {
        match *step {
            Step::Deliver(i) => {
                // Any connection may go first, but each delivers in order,
                // as TCP does.
                let heads = self.deliverable();
                if !heads.is_empty() {
                    let p = self.inflight.remove(heads[i % heads.len()]);
                    self.deliver(p);
                }
            }
            Step::Drop(i) => {
                // A message is lost, and as on TCP its connection breaks with
                // it. The store's answers are never lost (a failing store
                // answers `PersistFailed`, which is another fault).
                if !self.inflight.is_empty() {
                    let i = i % self.inflight.len();
                    if self.inflight[i].is_message() {
                        let p = self.inflight.remove(i);
                        self.break_connection(&p);
                    }
                }
            }
            Step::Duplicate(i) => {
                if !self.inflight.is_empty() {
                    let at = i % self.inflight.len();
                    let p = self.inflight[at].clone();
                    if p.is_message() {
                        // Delivered twice in a row: a duplicate, never a
                        // stale copy overtaking later frames.
                        self.inflight.insert(at + 1, p);
                    }
                }
            }
            Step::Tick(ms) => self.advance(Millis(u64::from(ms))),
            Step::Elect(m) => {
                let m = m % self.masters.len();
                for old in std::mem::take(&mut self.leaders).into_keys() {
                    self.master_event(old, master::Event::Revoked);
                }
                self.elect(m);
            }
            Step::ElectLate(m) => {
                let m = m % self.masters.len();
                self.elect(m);
            }
            Step::RevokeStale => self.revoke_stale(),
            Step::Disconnect(w, m) => {
                let (w, m) = (w % self.workers.len(), m % self.masters.len());
                self.disconnect(w, m);
            }
            Step::Quiet(ms) => self.settle(Millis(u64::from(ms))),
            Step::FailoverSubscriber(k) => {
                let frameworks: BTreeSet<usize> = self.subs.iter().map(|p| p.framework).collect();
                if let Some(f) = frameworks.iter().nth(k % frameworks.len().max(1)) {
                    self.start_subscriber(*f);
                }
            }
            Step::ExitExecutor(i, ok) => {
                let live: Vec<(usize, ExecutorId, FrameworkId)> = self
                    .workers
                    .iter()
                    .enumerate()
                    .flat_map(|(w, wk)| {
                        wk.worker()
                            .executors()
                            .filter(|e| {
                                e.state == ExecutorState::Running && !self.exiting.contains(&e.id)
                            })
                            .map(move |e| (w, e.id.clone(), e.framework.clone()))
                    })
                    .collect();
                if !live.is_empty() {
                    let (w, executor, framework) = live[i % live.len()].clone();
                    let counted = self.leader().is_some_and(|l| {
                        self.masters[l].executors().any(|e| {
                            e.id == executor
                                && !e.state.is_terminal()
                                && e.worker == self.workers[w].worker().config().id
                        })
                    });
                    if ok && counted {
                        self.known_exits.push((framework, executor.clone()));
                    }
                    self.exiting.insert(executor.clone());
                    let state = ExecutorState::Exited { code: if ok { 0 } else { 1 } };
                    self.inflight.push(Packet::Exec { w, executor, state });
                }
            }
            Step::TogglePartition(w, m) => {
                let (w, m) = (w % self.workers.len(), m % self.masters.len());
                if !self.partitions.remove(&(w, m)) {
                    self.partitions.insert((w, m));
                    self.disconnect(w, m);
                }
            }
        }
    }

    fn elect(&mut self, m: usize) {
        if self.leaders.contains_key(&m) {
            self.master_event(m, master::Event::Revoked);
        }
        let epoch = Epoch(self.next_epoch);
        self.next_epoch += 1;
        self.epoch_owner.insert(epoch, m);
        self.leaders.insert(m, epoch);
        let hint = regent_core::protocol::LeaderHint {
            id: MasterId(format!("m{m}")),
            addr: master_addr(m),
            epoch,
        };
        for other in 0..self.masters.len() {
            if other != m {
                self.master_event(other, master::Event::LeaderIs(hint.clone()));
            }
        }
        self.master_event(m, master::Event::Elected { floor: epoch, clock: 0 });
    }

    /// Revokes every leader but the newest.
    pub fn revoke_stale(&mut self) {
        let newest = self.leader();
        let stale: Vec<usize> =
            self.leaders.keys().copied().filter(|m| Some(*m) != newest).collect();
        for m in stale {
            self.leaders.remove(&m);
            self.master_event(m, master::Event::Revoked);
        }
    }

    /// Heals every partition, revokes stale leaders, makes sure one leads.
    pub fn calm(&mut self) {
        self.partitions.clear();
        self.revoke_stale();
        if self.leaders.is_empty() {
            self.step(&Step::Elect(0));
        }
    }

    /// Delivers everything in order and fires timers for `duration` of
    /// virtual time, with no faults.
    pub fn settle(&mut self, duration: Millis) {
        let end = self.now + duration;
        while self.now < end {
            while !self.inflight.is_empty() {
                let p = self.inflight.remove(0);
                self.deliver(p);
            }
            self.advance(Millis(50));
        }
    }

    fn advance(&mut self, by: Millis) {
        let end = self.now + by;
        loop {
            let due = self
                .timers
                .iter()
                .filter(|(_, at)| **at <= end)
                .min_by_key(|(_, at)| **at)
                .map(|(k, at)| (*k, *at));
            let Some((key, at)) = due else { break };
            self.timers.remove(&key);
            self.now = self.now.max(at);
            match key {
                TimerKey::Master(m) => self.master_event(m, master::Event::Tick),
                TimerKey::Worker(w) => self.worker_event(w, wnode::Input::Tick),
                TimerKey::Sub(s) => self.sub_event(s, subscriber::Event::Tick),
            }
        }
        self.now = end;
    }

    fn disconnect(&mut self, w: usize, m: usize) {
        if let Some(conn) = self.conns.remove(&(w, m)) {
            self.master_event(m, master::Event::Disconnected { conn });
            let (how, reason) = (regent_core::node::Ended::ByPeer, "disconnected".into());
            self.worker_event(w, wnode::Input::Closed { conn, how, reason });
        }
    }

    fn deliver(&mut self, p: Packet) {
        if self.tracing {
            self.trace.push(format!("{} deliver {p:?}", self.now));
        }
        match p {
            Packet::ToMaster { m, w, conn, msg } => {
                if self.conns.get(&(w, m)) == Some(&conn) {
                    self.master_event(m, master::Event::Message { conn, msg });
                }
            }
            Packet::ToWorker { w, m, conn, msg } => {
                if self.conns.get(&(w, m)) == Some(&conn) {
                    let proof = match &msg {
                        Message::HelloReply(r) if r.leading => Some(r.epoch),
                        Message::MasterChanged { epoch, .. }
                        | Message::Registered { epoch, .. }
                        | Message::ReconnectWorker { epoch } => Some(*epoch),
                        _ => None,
                    };
                    if let Some(e) = proof {
                        self.proven[w] = self.proven[w].max(e);
                    }
                    self.worker_event(w, wnode::Input::Message { conn, msg });
                }
            }
            Packet::Persisted { m, write } => {
                self.master_event(m, master::Event::Store(StoreEvent::Persisted { write }))
            }
            Packet::PersistFailed { m, write } => {
                let reason = "fenced: not the newest leader".to_string();
                self.master_event(
                    m,
                    master::Event::Store(StoreEvent::PersistFailed { write, reason }),
                )
            }
            Packet::Exec { w, executor, state } => {
                self.worker_event(w, wnode::Input::ExecutorChanged { executor, state })
            }
            Packet::FromSub { m, s, conn, msg } => {
                if self.sub_conns.get(&(s, m)) == Some(&conn) {
                    self.master_event(m, master::Event::Message { conn, msg });
                }
            }
            Packet::ToSub { s, m, conn, msg } => {
                if self.sub_conns.get(&(s, m)) == Some(&conn) {
                    self.sub_event(s, subscriber::Event::Message { from: master_addr(m), msg });
                }
            }
            Packet::Loaded { m } => {
                let records = self.store.values().cloned().collect();
                self.master_event(m, master::Event::Store(StoreEvent::Loaded { records }));
            }
        }
    }

    fn master_index(addr: &Addr) -> usize {
        addr.0[1..].parse().expect("harness addresses are m<i>")
    }

    fn worker_of_conn(&self, m: usize, conn: ConnId) -> Option<usize> {
        self.conns.iter().find(|((_, mm), c)| *mm == m && **c == conn).map(|((w, _), _)| *w)
    }

    /// Indices of the in-flight packets that may be delivered next: the
    /// first of each connection's direction, and every independent one.
    fn deliverable(&self) -> Vec<usize> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for (i, p) in self.inflight.iter().enumerate() {
            match p.stream() {
                Some(k) if !seen.insert(k) => {}
                _ => out.push(i),
            }
        }
        out
    }

    fn break_connection(&mut self, p: &Packet) {
        match *p {
            Packet::ToMaster { m, w, conn, .. } | Packet::ToWorker { w, m, conn, .. }
                if self.conns.get(&(w, m)) == Some(&conn) =>
            {
                self.disconnect(w, m);
            }
            Packet::FromSub { m, s, conn, .. } | Packet::ToSub { s, m, conn, .. }
                if self.sub_conns.get(&(s, m)) == Some(&conn) =>
            {
                self.sub_conns.remove(&(s, m));
                self.master_event(m, master::Event::Disconnected { conn });
                self.sub_event(s, subscriber::Event::Disconnected { master: master_addr(m) });
            }
            _ => {}
        }
    }

    /// A master closes `conn`: what it sent on it before arrives first.
    fn flush(&mut self, conn: ConnId) {
        let (now, later): (Vec<Packet>, Vec<Packet>) = std::mem::take(&mut self.inflight)
            .into_iter()
            .partition(|p| matches!(p, Packet::ToWorker { conn: c, .. } | Packet::ToSub { conn: c, .. } if *c == conn));
        self.inflight = later;
        for p in now {
            self.deliver(p);
        }
    }

    fn sub_of_conn(&self, m: usize, conn: ConnId) -> Option<usize> {
        self.sub_conns.iter().find(|((_, mm), c)| *mm == m && **c == conn).map(|((s, _), _)| *s)
    }

    fn sub_event(&mut self, s: usize, e: subscriber::Event) {
        if self.subs[s].exited {
            return;
        }
        let now = self.now;
        let actions = self.subs[s].machine.handle(now, e);
        match self.subs[s].machine.poll_timeout() {
            Some(at) => self.timers.insert(TimerKey::Sub(s), at),
            None => self.timers.remove(&TimerKey::Sub(s)),
        };
        for a in actions {
            match a {
                subscriber::Action::Connect { master } => {
                    let m = Self::master_index(&master);
                    let open: Vec<usize> = self
                        .sub_conns
                        .keys()
                        .filter(|(ss, _)| *ss == s)
                        .map(|(_, mm)| *mm)
                        .collect();
                    if !open.is_empty() {
                        self.seen.push(Violation {
                            invariant: "one_subscription",
                            detail: format!(
                                "subscriber s{s} connects to m{m} while connected to {open:?}"
                            ),
                        });
                    }
                    let conn = ConnId(self.next_conn);
                    self.next_conn += 1;
                    self.sub_conns.insert((s, m), conn);
                    self.master_event(m, master::Event::Connected { conn });
                    self.sub_event(s, subscriber::Event::Connected { master });
                }
                subscriber::Action::Send { to, msg } => {
                    let m = Self::master_index(&to);
                    if let Some(conn) = self.sub_conns.get(&(s, m)).copied() {
                        if matches!(msg, Message::Subscribe(_))
                            && self.sub_conns.keys().filter(|(ss, _)| *ss == s).count() > 1
                        {
                            self.seen.push(Violation {
                                invariant: "one_subscription",
                                detail: format!(
                                    "subscriber s{s} sends SUBSCRIBE with two connections open"
                                ),
                            });
                        }
                        self.inflight.push(Packet::FromSub { m, s, conn, msg });
                    }
                }
                subscriber::Action::Close { master, .. } => {
                    let m = Self::master_index(&master);
                    if let Some(conn) = self.sub_conns.remove(&(s, m)) {
                        self.master_event(m, master::Event::Disconnected { conn });
                    }
                }
                subscriber::Action::Subscribed { executors, .. } => {
                    let view = &mut self.subs[s].view;
                    for e in executors {
                        update_view(view, e.id, e.state);
                    }
                }
                subscriber::Action::ExecutorUpdate(info) => {
                    update_view(&mut self.subs[s].view, info.id, info.state)
                }
                subscriber::Action::Exit { .. } => {
                    self.subs[s].exited = true;
                    let open: Vec<(usize, usize)> =
                        self.sub_conns.keys().filter(|(ss, _)| *ss == s).copied().collect();
                    for key in open {
                        let conn = self.sub_conns.remove(&key).expect("listed");
                        self.master_event(key.1, master::Event::Disconnected { conn });
                    }
                    return;
                }
                subscriber::Action::SlotFailed { .. }
                | subscriber::Action::GroupScaled { .. }
                | subscriber::Action::RequestAccepted { .. }
                | subscriber::Action::RequestRefused { .. }
                | subscriber::Action::Error { .. }
                | subscriber::Action::Rejected { .. }
                | subscriber::Action::Disconnected { .. } => {}
            }
        }
    }

    fn master_event(&mut self, m: usize, e: master::Event) {
        let now = self.now;
        let actions = self.masters[m].handle(now, e);
        match self.masters[m].poll_timeout() {
            Some(at) => self.timers.insert(TimerKey::Master(m), at),
            None => self.timers.remove(&TimerKey::Master(m)),
        };
        for a in actions {
            match a {
                master::Action::Send { conn, msg } if self.sub_of_conn(m, conn).is_some() => {
                    let s = self.sub_of_conn(m, conn).expect("guarded");
                    self.inflight.push(Packet::ToSub { s, m, conn, msg });
                }
                master::Action::Close { conn, .. } if self.sub_of_conn(m, conn).is_some() => {
                    self.flush(conn);
                    let Some(s) = self.sub_of_conn(m, conn) else { continue };
                    self.sub_conns.remove(&(s, m));
                    self.sub_event(s, subscriber::Event::Disconnected { master: master_addr(m) });
                }
                master::Action::Send { conn, msg } => {
                    if let Some(w) = self.worker_of_conn(m, conn) {
                        if let Message::Registered { epoch, duplicate: false, .. } = &msg {
                            let wk = &self.workers[w];
                            let cfg = wk.worker().config();
                            let key = (m, *epoch, cfg.id.clone(), cfg.incarnation);
                            *self.acks.entry(key).or_default() += 1;
                        }
                        self.inflight.push(Packet::ToWorker { w, m, conn, msg });
                    }
                }
                master::Action::Close { conn, .. } => {
                    self.flush(conn);
                    if let Some(w) = self.worker_of_conn(m, conn) {
                        self.conns.remove(&(w, m));
                        let reason = "closed by the master".to_string();
                        let how = regent_core::node::Ended::ByPeer;
                        self.worker_event(w, wnode::Input::Closed { conn, how, reason });
                    }
                }
                // Writes are fenced by leadership, as ZooKeeper's multi with
                // a version check on the writer's election node does.
                master::Action::Store(StoreCommand::Persist { write, .. })
                | master::Action::Store(StoreCommand::Unpersist { write, .. })
                    if self.leader() != Some(m) =>
                {
                    self.inflight.push(Packet::PersistFailed { m, write });
                }
                master::Action::Store(StoreCommand::Persist { write, record }) => {
                    self.store.insert(record.key(), record);
                    self.inflight.push(Packet::Persisted { m, write });
                }
                master::Action::Store(StoreCommand::Unpersist { write, key, incarnation }) => {
                    let matches = match (self.store.get(&key), incarnation) {
                        (Some(Record::Worker(w)), Some(inc)) => w.incarnation == inc,
                        (Some(_), _) => true,
                        (None, _) => false,
                    };
                    if matches {
                        self.store.remove(&key);
                    }
                    self.inflight.push(Packet::Persisted { m, write });
                }
                master::Action::Store(StoreCommand::LoadRecords) => {
                    self.inflight.push(Packet::Loaded { m })
                }
                master::Action::Abdicate { .. } => {
                    self.leaders.remove(&m);
                }
                // The harness's workers have no callback listener.
                master::Action::Contact { .. } | master::Action::Audit(_) => {}
                // The harness asks no local queries.
                master::Action::Answer { .. } => {}
            }
        }
    }

    /// One input to worker `w`'s node, then its outputs in order, as the
    /// worker runtime executes them.
    fn worker_event(&mut self, w: usize, input: wnode::Input) {
        let now = self.now;
        let outputs = self.workers[w].handle(now, input);
        match self.workers[w].poll_timeout() {
            Some(at) => self.timers.insert(TimerKey::Worker(w), at),
            None => self.timers.remove(&TimerKey::Worker(w)),
        };
        for o in outputs {
            match o {
                wnode::Output::Dial { dial, master } => {
                    let m = Self::master_index(&master);
                    let result = if self.partitions.contains(&(w, m)) {
                        DialResult::Failed { reason: "partitioned".into(), refused: false }
                    } else {
                        let conn = ConnId(self.next_conn);
                        self.next_conn += 1;
                        if let Some(old) = self.conns.insert((w, m), conn) {
                            self.master_event(m, master::Event::Disconnected { conn: old });
                        }
                        self.master_event(m, master::Event::Connected { conn });
                        DialResult::Connected { conn, peer: None }
                    };
                    self.worker_event(w, wnode::Input::Dialled { dial, result });
                }
                wnode::Output::Send { conn, msg } => {
                    let m = self.conns.iter().find(|((ww, _), c)| *ww == w && **c == conn);
                    if let Some(((_, m), _)) = m {
                        let m = *m;
                        self.inflight.push(Packet::ToMaster { m, w, conn, msg });
                    }
                }
                wnode::Output::Close { conn, .. } => {
                    let m = self.conns.iter().find(|((ww, _), c)| *ww == w && **c == conn);
                    if let Some(((_, m), _)) = m {
                        let m = *m;
                        self.conns.remove(&(w, m));
                        self.master_event(m, master::Event::Disconnected { conn });
                    }
                }
                wnode::Output::Exit { reason } => self.exits.push((w, reason)),
                // Executors start at once and run until killed.
                wnode::Output::Executor(ExecutorCommand::Start { executor, .. }) => {
                    let state = regent_core::protocol::ExecutorState::Running;
                    self.inflight.push(Packet::Exec { w, executor, state });
                }
                wnode::Output::Executor(
                    ExecutorCommand::Kill { executor } | ExecutorCommand::Stop { executor, .. },
                ) => {
                    let state = regent_core::protocol::ExecutorState::Killed;
                    self.inflight.push(Packet::Exec { w, executor, state });
                }
                // Every health check passes in the harness, at once.
                wnode::Output::Executor(ExecutorCommand::RunCheck(run)) => {
                    let outcome = regent_core::health::CheckOutcome::Passed;
                    let (executor, check, run) = (run.executor, run.check, run.run);
                    self.worker_event(
                        w,
                        wnode::Input::CheckResult { executor, check, run, outcome },
                    );
                }
                // No files in the harness: every read finds the file empty.
                wnode::Output::ReadLog(LogReadRequest { read, offset, .. }) => {
                    let offset = offset.unwrap_or(0);
                    let result = regent_core::protocol::LogRead::Chunk {
                        offset,
                        data: Vec::new(),
                        size: offset,
                    };
                    self.worker_event(w, wnode::Input::LogRead { read, result });
                }
                wnode::Output::Note(note) => {
                    if self.tracing {
                        self.trace.push(format!("{} w{w} note: {note:?}", self.now));
                    }
                }
                // The harness's network has no read timeouts.
                wnode::Output::ConnTimeouts { .. } => {}
            }
        }
    }

    /// Safety invariants that must hold after every step.
    pub fn check_safety(&self) -> Result<(), Violation> {
        if let Some(v) = self.seen.first() {
            return Err(v.clone());
        }
        for (i, m) in self.masters.iter().enumerate() {
            if !matches!(m.status(), master::Status::Alive | master::Status::Recovering) {
                continue;
            }
            for w in m.workers() {
                if w.cores_used > w.cores || w.memory_used_mb > w.memory_mb {
                    return Err(Violation {
                        invariant: "capacity",
                        detail: format!(
                            "m{i} placed {}/{} cores, {}/{} MiB on {}",
                            w.cores_used, w.cores, w.memory_used_mb, w.memory_mb, w.id
                        ),
                    });
                }
            }
            let mut conns = BTreeSet::new();
            for f in m.frameworks() {
                if let Some(conn) = f.conn {
                    let owner =
                        self.sub_of_conn(i, conn).map(|s| framework_id(self.subs[s].framework));
                    if !conns.insert(conn) || owner.as_ref().is_some_and(|o| *o != f.id) {
                        return Err(Violation {
                            invariant: "one_subscription",
                            detail: format!(
                                "m{i} binds {conn} to {} but it belongs to {owner:?}",
                                f.id
                            ),
                        });
                    }
                }
            }
        }
        let mut running: BTreeMap<&ExecutorId, usize> = BTreeMap::new();
        for wk in &self.workers {
            for e in wk.worker().executors().filter(|e| !e.state.is_terminal()) {
                *running.entry(&e.id).or_default() += 1;
            }
        }
        if let Some((id, n)) = running.iter().find(|(_, n)| **n > 1) {
            return Err(Violation {
                invariant: "executor_on_one_worker",
                detail: format!("{id} runs on {n} workers"),
            });
        }
        for (i, m) in self.masters.iter().enumerate() {
            let entries = m.workers();
            let ids: BTreeSet<&WorkerId> = entries.iter().map(|e| &e.id).collect();
            if ids.len() != entries.len() {
                return Err(Violation {
                    invariant: "registry_unique",
                    detail: format!("master m{i} holds a worker id twice"),
                });
            }
        }
        for ((m, epoch, id, inc), n) in &self.acks {
            if *n > 1 {
                return Err(Violation {
                    invariant: "registered_once",
                    detail: format!("m{m} at {epoch} acknowledged {id} ({inc}) as new {n} times"),
                });
            }
        }
        if let Some((w, reason)) = self.exits.first() {
            return Err(Violation {
                invariant: "no_exit",
                detail: format!("worker w{w} exited: {reason}"),
            });
        }
        for (i, w) in self.workers.iter().enumerate() {
            let s = w.status();
            if s.max_epoch != self.proven[i] {
                return Err(Violation {
                    invariant: "follows_highest_epoch",
                    detail: format!(
                        "w{i} believes {} is the highest epoch, but {} was proven to it",
                        s.max_epoch, self.proven[i]
                    ),
                });
            }
            if let Some(active) = &s.active {
                let owner = self.epoch_owner.get(&s.max_epoch).copied();
                if owner != Some(Self::master_index(active)) {
                    return Err(Violation {
                        invariant: "follows_highest_epoch",
                        detail: format!("w{i} follows {active} but the highest epoch it saw ({}) belongs to {owner:?}", s.max_epoch),
                    });
                }
            }
        }
        Ok(())
    }

    /// After [`Cluster::calm`] and [`Cluster::settle`]: every live worker is
    /// registered with exactly the leader.
    pub fn check_settled(&self) -> Result<(), Violation> {
        let Some(l) = self.leader() else {
            return Err(Violation { invariant: "settled", detail: "no leader".into() });
        };
        let leader = &self.masters[l];
        for (i, w) in self.workers.iter().enumerate() {
            let s = w.status();
            if !s.registered || s.active != Some(master_addr(l)) {
                return Err(Violation {
                    invariant: "settled",
                    detail: format!("w{i} not registered with leader m{l}: {s:?}"),
                });
            }
            let n = leader
                .workers()
                .iter()
                .filter(|e| {
                    e.id == w.worker().config().id
                        && e.incarnation == w.worker().config().incarnation
                        && e.state == master::WorkerState::Alive
                })
                .count();
            if n != 1 {
                return Err(Violation {
                    invariant: "settled",
                    detail: format!("leader m{l} holds w{i} alive {n} times"),
                });
            }
        }
        // Every executor the leader counts as live runs on exactly its worker.
        for e in leader.executors().filter(|e| !e.state.is_terminal()) {
            let on = self
                .workers
                .iter()
                .filter(|w| w.worker().executors().any(|x| x.id == e.id && !x.state.is_terminal()))
                .map(|w| w.worker().config().id.clone())
                .collect::<Vec<_>>();
            if on != vec![e.worker.clone()] {
                return Err(Violation {
                    invariant: "executors",
                    detail: format!(
                        "leader counts {} live on {}, it runs on {on:?}",
                        e.id, e.worker
                    ),
                });
            }
        }
        // No slot runs two executors once the leader has settled.
        let mut per_slot: BTreeMap<(FrameworkId, String, u32), Vec<ExecutorId>> = BTreeMap::new();
        for e in leader.executors().filter(|e| !e.state.is_terminal()) {
            per_slot
                .entry((e.framework.clone(), e.group.clone(), e.slot))
                .or_default()
                .push(e.id.clone());
        }
        let live_on_workers: usize = self
            .workers
            .iter()
            .map(|w| w.worker().executors().filter(|e| !e.state.is_terminal()).count())
            .sum();
        let counted: usize = per_slot.values().map(Vec::len).sum();
        if let Some((slot, ids)) = per_slot.iter().find(|(_, v)| v.len() > 1) {
            return Err(Violation {
                invariant: "executors",
                detail: format!("slot {slot:?} runs {ids:?}"),
            });
        }
        if live_on_workers != counted {
            return Err(Violation {
                invariant: "executors",
                detail: format!(
                    "{live_on_workers} executors run on workers, the leader counts {counted}"
                ),
            });
        }
        // Every framework's newest live subscriber is subscribed with the
        // leader, and no exit reported by a worker was lost.
        for k in self.subs.iter().map(|p| p.framework).collect::<BTreeSet<_>>() {
            let Some(p) = self.subs.iter().rev().find(|p| p.framework == k && !p.exited) else {
                return Err(Violation {
                    invariant: "settled",
                    detail: format!("framework f{k} has no live subscriber"),
                });
            };
            let st = p.machine.status();
            if !st.subscribed || st.master != Some(master_addr(l)) {
                return Err(Violation {
                    invariant: "settled",
                    detail: format!("f{k}'s subscriber is not subscribed with m{l}: {st:?}"),
                });
            }
            for (f, e) in self.known_exits.iter().filter(|(f, _)| *f == framework_id(k)) {
                // The slot the exit completed is done (by this executor, or
                // by a replacement that also succeeded), and the program
                // was told of a success in it.
                let slot_of = |id: &ExecutorId| id.0.rsplit('#').nth(1).map(str::to_owned);
                let slot = slot_of(e);
                let fw = leader.frameworks().find(|x| x.id == *f);
                let done = fw.and_then(|fw| {
                    fw.groups.iter().find_map(|g| {
                        g.record.slots.iter().enumerate().find_map(|(i, o)| match o {
                            SlotOutcome::Done { executor } if Some(i.to_string()) == slot => {
                                Some(executor.clone())
                            }
                            _ => None,
                        })
                    })
                });
                let told = done
                    .as_ref()
                    .is_some_and(|d| p.view.get(d) == Some(&ExecutorState::Exited { code: 0 }));
                if !told {
                    return Err(Violation {
                        invariant: "exit_not_lost",
                        detail: format!(
                            "{e} exited 0; the leader records the slot done by {done:?}; its subscriber sees {:?}",
                            done.as_ref().and_then(|d| p.view.get(d))
                        ),
                    });
                }
            }
        }
        for (i, m) in self.masters.iter().enumerate() {
            if i != l && m.status() == master::Status::Alive {
                return Err(Violation {
                    invariant: "settled",
                    detail: format!("m{i} still acts as leader beside m{l}"),
                });
            }
        }
        Ok(())
    }
}

/// What the program believes of an executor. A terminal state is final: a
/// stale update (the harness may duplicate and reorder messages, which TCP
/// never does) does not bring an executor back to life — except that a LOST
/// executor's late exit 0 is its real end (the master completes the slot
/// with it), so it replaces LOST.
fn update_view(
    view: &mut BTreeMap<ExecutorId, ExecutorState>,
    id: ExecutorId,
    state: ExecutorState,
) {
    let late_success = matches!(view.get(&id), Some(ExecutorState::Lost))
        && state == ExecutorState::Exited { code: 0 };
    if late_success || !view.get(&id).is_some_and(|st| st.is_terminal()) {
        view.insert(id, state);
    }
}

//! A deterministic in-memory cluster of master and worker machines.
//!
//! Nothing here decides protocol: it only moves messages, persists writes
//! (instantly durable, acknowledged by a queued `Persisted`), keeps timers and
//! a virtual clock, and records what the invariants need.

use regent_core::master::{self, Master};
use regent_core::protocol::Message;
use regent_core::store::{Record, RecordKey};
use regent_core::worker::{self, Worker};
use regent_core::{Addr, ConnId, Epoch, Incarnation, MasterId, Millis, WorkerId};
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
}

impl Packet {
    /// Network messages can be lost or duplicated; the answers of the store
    /// and of the worker's own process supervision cannot.
    fn is_message(&self) -> bool {
        matches!(self, Packet::ToMaster { .. } | Packet::ToWorker { .. })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKey {
    Master(usize, master::Timer),
    Worker(usize, worker::Timer),
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
    /// The worker machines, by index; id `w<i>`.
    pub workers: Vec<Worker>,
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
                Worker::new(c)
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
            acks: BTreeMap::new(),
        };
        for w in 0..n_workers {
            c.worker_event(w, worker::Event::Start);
        }
        c
    }

    /// The newest leader, if one is acting.
    pub fn leader(&self) -> Option<usize> {
        self.leaders.iter().max_by_key(|(_, e)| **e).map(|(m, _)| *m)
    }

    /// Runs one schedule step.
    pub fn step(&mut self, step: &Step) {
        match *step {
            Step::Deliver(i) => {
                if !self.inflight.is_empty() {
                    let p = self.inflight.remove(i % self.inflight.len());
                    self.deliver(p);
                }
            }
            Step::Drop(i) => {
                // Messages get lost; the store's answers do not (a failing
                // store answers `PersistFailed`, which is another fault).
                if !self.inflight.is_empty() {
                    let i = i % self.inflight.len();
                    if self.inflight[i].is_message() {
                        self.inflight.remove(i);
                    }
                }
            }
            Step::Duplicate(i) => {
                if !self.inflight.is_empty() {
                    let p = self.inflight[i % self.inflight.len()].clone();
                    if p.is_message() {
                        self.inflight.push(p);
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
                TimerKey::Master(m, t) => self.master_event(m, master::Event::Timer(t)),
                TimerKey::Worker(w, t) => self.worker_event(w, worker::Event::Timer(t)),
            }
        }
        self.now = end;
    }

    fn disconnect(&mut self, w: usize, m: usize) {
        if let Some(conn) = self.conns.remove(&(w, m)) {
            self.master_event(m, master::Event::Disconnected { conn });
            self.worker_event(w, worker::Event::Disconnected { master: master_addr(m) });
        }
    }

    fn deliver(&mut self, p: Packet) {
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
                    self.worker_event(w, worker::Event::Message { from: master_addr(m), msg });
                }
            }
            Packet::Persisted { m, write } => {
                self.master_event(m, master::Event::Persisted { write })
            }
            Packet::PersistFailed { m, write } => {
                let reason = "fenced: not the newest leader".to_string();
                self.master_event(m, master::Event::PersistFailed { write, reason })
            }
            Packet::Exec { w, executor, state } => {
                self.worker_event(w, worker::Event::ExecutorChanged { executor, state })
            }
            Packet::Loaded { m } => {
                let records = self.store.values().cloned().collect();
                self.master_event(m, master::Event::Loaded { records });
            }
        }
    }

    fn master_index(addr: &Addr) -> usize {
        addr.0[1..].parse().expect("harness addresses are m<i>")
    }

    fn worker_of_conn(&self, m: usize, conn: ConnId) -> Option<usize> {
        self.conns.iter().find(|((_, mm), c)| *mm == m && **c == conn).map(|((w, _), _)| *w)
    }

    fn master_event(&mut self, m: usize, e: master::Event) {
        let now = self.now;
        let actions = self.masters[m].handle(now, e);
        for a in actions {
            match a {
                master::Action::Send { conn, msg } => {
                    if let Some(w) = self.worker_of_conn(m, conn) {
                        if let Message::Registered { epoch, duplicate: false, .. } = &msg {
                            let wk = &self.workers[w];
                            let key = (m, *epoch, wk.config().id.clone(), wk.config().incarnation);
                            *self.acks.entry(key).or_default() += 1;
                        }
                        self.inflight.push(Packet::ToWorker { w, m, conn, msg });
                    }
                }
                master::Action::Close { conn, .. } => {
                    if let Some(w) = self.worker_of_conn(m, conn) {
                        self.conns.remove(&(w, m));
                        self.worker_event(
                            w,
                            worker::Event::Disconnected { master: master_addr(m) },
                        );
                    }
                }
                // Writes are fenced by leadership, as ZooKeeper's multi with
                // a version check on the writer's election node does.
                master::Action::Persist { write, .. } | master::Action::Unpersist { write, .. }
                    if self.leader() != Some(m) =>
                {
                    self.inflight.push(Packet::PersistFailed { m, write });
                }
                master::Action::Persist { write, record } => {
                    self.store.insert(record.key(), record);
                    self.inflight.push(Packet::Persisted { m, write });
                }
                master::Action::Unpersist { write, key, incarnation } => {
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
                master::Action::LoadRecords => self.inflight.push(Packet::Loaded { m }),
                master::Action::SetTimer { timer, at } => {
                    self.timers.insert(TimerKey::Master(m, timer), at);
                }
                master::Action::Abdicate { .. } => {
                    self.leaders.remove(&m);
                }
            }
        }
    }

    fn worker_event(&mut self, w: usize, e: worker::Event) {
        let now = self.now;
        let actions = self.workers[w].handle(now, e);
        for a in actions {
            match a {
                worker::Action::Connect { master } => {
                    let m = Self::master_index(&master);
                    if self.partitions.contains(&(w, m)) {
                        self.worker_event(w, worker::Event::ConnectFailed { master });
                    } else {
                        let conn = ConnId(self.next_conn);
                        self.next_conn += 1;
                        if let Some(old) = self.conns.insert((w, m), conn) {
                            self.master_event(m, master::Event::Disconnected { conn: old });
                        }
                        self.master_event(m, master::Event::Connected { conn });
                        self.worker_event(w, worker::Event::Connected { master });
                    }
                }
                worker::Action::Send { to, msg } => {
                    let m = Self::master_index(&to);
                    if let Some(conn) = self.conns.get(&(w, m)) {
                        self.inflight.push(Packet::ToMaster { m, w, conn: *conn, msg });
                    }
                }
                worker::Action::Close { master, .. } => {
                    let m = Self::master_index(&master);
                    if let Some(conn) = self.conns.remove(&(w, m)) {
                        self.master_event(m, master::Event::Disconnected { conn });
                    }
                }
                worker::Action::SetTimer { timer, at } => {
                    self.timers.insert(TimerKey::Worker(w, timer), at);
                }
                worker::Action::CancelTimer { timer } => {
                    self.timers.remove(&TimerKey::Worker(w, timer));
                }
                worker::Action::Exit { reason } => self.exits.push((w, reason)),
                // Executors start at once and run until killed.
                worker::Action::StartExecutor { executor, .. } => {
                    let state = regent_core::protocol::ExecutorState::Running;
                    self.inflight.push(Packet::Exec { w, executor, state });
                }
                worker::Action::KillExecutor { executor } => {
                    let state = regent_core::protocol::ExecutorState::Killed;
                    self.inflight.push(Packet::Exec { w, executor, state });
                }
            }
        }
    }

    /// Safety invariants that must hold after every step.
    pub fn check_safety(&self) -> Result<(), Violation> {
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
                    e.id == w.config().id
                        && e.incarnation == w.config().incarnation
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

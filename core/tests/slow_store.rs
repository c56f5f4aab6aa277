//! Issue 20 (docs/design.md#issue-20), scenario 8 and docs/design.md#progress-when-dependencies-are-slow: progress when the store is
//! slow. A single master whose store takes 10 s to commit each batch of
//! writes (group commit, as the filesystem store does: a write that comes
//! while a batch is being committed waits for the next one, so it may take
//! up to 20 s), a submission and a worker, all pure nodes wired by an
//! in-memory network with 1 ms latency. Every timer that restarts work
//! (the subscriber's attempt timeout, the worker's registration retry)
//! must let such a write land: the submission subscribes, the worker
//! registers, and every slot runs to completion.

use regent_core::ids::InstanceId;
use regent_core::master;
use regent_core::node::master::{self as mnode, Leadership};
use regent_core::node::submit::{self as snode, SubmitNode};
use regent_core::node::worker::{self as wnode, ExecutorCommand, WorkerNode};
use regent_core::node::{DialResult, Ended, MasterNode};
use regent_core::protocol::{ExecutorState, GroupSpec};
use regent_core::store::StoreCommand;
use regent_core::store::StoreEvent;
use regent_core::store::{Record, RecordKey, WriteId};
use regent_core::subscriber;
use regent_core::worker;
use regent_core::{Addr, ConnId, ExecutorId, Incarnation, MasterId, Millis, WorkerId};
use std::collections::BTreeMap;

const CLUSTER: &str = "test";
const LATENCY: Millis = Millis(1);
/// How long an executor runs before it exits 0.
const RUN: Millis = Millis(3_000);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Peer {
    Submit,
    Worker,
}

#[derive(Debug)]
enum To {
    Master(mnode::Input),
    Submit(snode::Input),
    Worker(wnode::Input),
}

struct World {
    now: Millis,
    seq: u64,
    queue: Vec<(Millis, u64, To)>,
    master: MasterNode,
    submit: SubmitNode,
    worker: WorkerNode,
    worker_started: bool,
    owner: BTreeMap<ConnId, Peer>,
    next_conn: u64,
    /// The store: records, writes waiting for the next batch, the batch
    /// being committed (done at, its writes).
    records: BTreeMap<RecordKey, Record>,
    waiting: Vec<WriteId>,
    batch: Option<(Millis, Vec<WriteId>)>,
    commit: Millis,
    /// Executors whose process runs, by slot (`<group>#<slot>`).
    alive: BTreeMap<ExecutorId, String>,
    /// The most executors that ever ran at once for one slot.
    most_per_slot: usize,
    exit: Option<snode::SubmitExit>,
    subscribed_at: Option<Millis>,
    registered_at: Option<Millis>,
    subscribe_attempts: u64,
}

fn slot_of(id: &ExecutorId) -> String {
    // `<framework>/<group>#<slot>#<epoch>.<launch>`
    let s = id.to_string();
    let mut parts = s.split('#');
    let group = parts.next().unwrap_or_default().to_owned();
    format!("{group}#{}", parts.next().unwrap_or_default())
}

impl World {
    fn new(commit: Millis, slots: u32, worker_at: Option<Millis>) -> Self {
        let maddr = Addr::new("10.0.0.1:7077");
        let master = MasterNode::new(mnode::Config {
            master: master::Config::new(MasterId::new("m1"), maddr.clone()),
            leadership: Leadership::Single,
            clock_base: 0,
            cluster: CLUSTER.into(),
        });
        let mut sc =
            subscriber::Config::new(CLUSTER, "app", InstanceId(0x5eed), vec![maddr.clone()]);
        sc.seed = 8;
        let mut cfg = snode::Config::new(sc);
        cfg.connect_timeout = Some(Millis::from_secs(30)); // as `regent submit`
        let submit = SubmitNode::new(cfg);
        let mut wc = worker::Config::new(
            CLUSTER,
            WorkerId::new("w1"),
            Incarnation(0x77),
            vec![maddr],
            4,
            4096,
        );
        wc.seed = 9;
        let worker = WorkerNode::new(wc);
        let mut w = World {
            now: Millis::ZERO,
            seq: 0,
            queue: Vec::new(),
            master,
            submit,
            worker,
            worker_started: false,
            owner: BTreeMap::new(),
            next_conn: 1,
            records: BTreeMap::new(),
            waiting: Vec::new(),
            batch: None,
            commit,
            alive: BTreeMap::new(),
            most_per_slot: 0,
            exit: None,
            subscribed_at: None,
            registered_at: None,
            subscribe_attempts: 0,
        };
        w.push(Millis::ZERO, To::Master(mnode::Input::Start));
        w.push(Millis::ZERO, To::Submit(snode::Input::Start));
        let spec = GroupSpec {
            group: "main".into(),
            slots,
            command: vec!["/bin/true".into()],
            env: vec![],
            cores: 1,
            memory_mb: 128,
            policy: Default::default(),
            launch: Default::default(),
        };
        w.push(Millis::ZERO, To::Submit(snode::Input::Declare(spec)));
        if let Some(at) = worker_at {
            w.push(at, To::Worker(wnode::Input::Start));
        }
        w
    }

    fn push(&mut self, at: Millis, to: To) {
        self.seq += 1;
        self.queue.push((at, self.seq, to));
    }

    fn send_to_peer(&mut self, conn: ConnId, at: Millis, msg: regent_core::protocol::Message) {
        match self.owner.get(&conn) {
            Some(Peer::Submit) => self.push(at, To::Submit(snode::Input::Message { conn, msg })),
            Some(Peer::Worker) => self.push(at, To::Worker(wnode::Input::Message { conn, msg })),
            None => {}
        }
    }

    /// A peer's frame reaches the master, if the connection is still open.
    fn send_to_master(&mut self, conn: ConnId, at: Millis, msg: regent_core::protocol::Message) {
        if self.owner.contains_key(&conn) {
            self.push(at, To::Master(mnode::Input::Message { conn, msg }));
        }
    }

    /// A peer closes `conn`: the master sees it end (once).
    fn close_to_master(&mut self, conn: ConnId, at: Millis) {
        if self.owner.remove(&conn).is_some() {
            let how = Ended::ByPeer;
            self.push(at, To::Master(mnode::Input::Closed { conn, how, reason: "closed".into() }));
        }
    }

    /// The worker kills an executor whose process runs.
    fn kill(&mut self, executor: ExecutorId, at: Millis) {
        if self.alive.remove(&executor).is_some() {
            let state = ExecutorState::Killed;
            self.push(at, To::Worker(wnode::Input::ExecutorChanged { executor, state }));
        }
    }

    fn new_conn(&mut self, peer: Peer) -> ConnId {
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.owner.insert(conn, peer);
        conn
    }

    fn master_outputs(&mut self, out: Vec<mnode::Output>) {
        let at = self.now + LATENCY;
        for o in out {
            match o {
                mnode::Output::Send { conn, msg } => self.send_to_peer(conn, at, msg),
                mnode::Output::Close { conn, reason } => match self.owner.remove(&conn) {
                    Some(Peer::Submit) => self.push(
                        at,
                        To::Submit(snode::Input::Closed { conn, how: Ended::ByPeer, reason }),
                    ),
                    Some(Peer::Worker) => self.push(
                        at,
                        To::Worker(wnode::Input::Closed { conn, how: Ended::ByPeer, reason }),
                    ),
                    None => {}
                },
                mnode::Output::Store(StoreCommand::Persist { write, record }) => {
                    self.records.insert(record.key(), record);
                    self.waiting.push(write);
                }
                mnode::Output::Store(StoreCommand::Unpersist { write, key, .. }) => {
                    self.records.remove(&key);
                    self.waiting.push(write);
                }
                mnode::Output::Store(StoreCommand::LoadRecords) => {
                    let records = self.records.values().cloned().collect();
                    let loaded = StoreEvent::Loaded { records };
                    self.push(self.now, To::Master(mnode::Input::Store(loaded)));
                }
                mnode::Output::Dial { dial, .. } => {
                    let result = DialResult::Failed {
                        reason: "no callback listener".into(),
                        refused: false,
                    };
                    self.push(at, To::Master(mnode::Input::Dialled { dial, result }));
                }
                mnode::Output::Exit { .. } => panic!("the master exited: {o:?}"),
                _ => {}
            }
        }
        self.start_batch();
    }

    fn start_batch(&mut self) {
        if self.batch.is_none() && !self.waiting.is_empty() {
            self.batch = Some((self.now + self.commit, std::mem::take(&mut self.waiting)));
        }
    }

    fn submit_outputs(&mut self, out: Vec<snode::Output>) {
        let at = self.now + LATENCY;
        for o in out {
            match o {
                snode::Output::Dial { dial, .. } => {
                    let conn = self.new_conn(Peer::Submit);
                    self.push(at, To::Master(mnode::Input::Accepted { conn }));
                    self.push(
                        at,
                        To::Submit(snode::Input::Dialled {
                            dial,
                            result: snode::DialResult::Connected { conn, peer: None },
                        }),
                    );
                }
                snode::Output::Send { conn, msg } => {
                    if matches!(msg, regent_core::protocol::Message::Subscribe(_)) {
                        self.subscribe_attempts += 1;
                    }
                    self.send_to_master(conn, at, msg);
                }
                snode::Output::Close { conn, reason } => {
                    self.close_to_master(conn, at);
                    self.push(
                        at,
                        To::Submit(snode::Input::Closed { conn, how: Ended::ByPeer, reason }),
                    );
                }
                snode::Output::Observed(subscriber::Action::Subscribed { .. }) => {
                    self.subscribed_at.get_or_insert(self.now);
                }
                snode::Output::Exit(exit) => self.exit = Some(exit),
                _ => {}
            }
        }
    }

    fn worker_outputs(&mut self, out: Vec<wnode::Output>) {
        let at = self.now + LATENCY;
        for o in out {
            match o {
                wnode::Output::Dial { dial, .. } => {
                    let conn = self.new_conn(Peer::Worker);
                    self.push(at, To::Master(mnode::Input::Accepted { conn }));
                    let result = DialResult::Connected { conn, peer: None };
                    self.push(at, To::Worker(wnode::Input::Dialled { dial, result }));
                }
                wnode::Output::Send { conn, msg } => self.send_to_master(conn, at, msg),
                wnode::Output::Close { conn, .. } => self.close_to_master(conn, at),
                wnode::Output::Executor(ExecutorCommand::Start { executor, .. }) => {
                    let slot = slot_of(&executor);
                    self.alive.insert(executor.clone(), slot.clone());
                    let same = self.alive.values().filter(|s| **s == slot).count();
                    self.most_per_slot = self.most_per_slot.max(same);
                    let running = wnode::Input::ExecutorChanged {
                        executor: executor.clone(),
                        state: ExecutorState::Running,
                    };
                    self.push(at, To::Worker(running));
                    let exited = wnode::Input::ExecutorChanged {
                        executor,
                        state: ExecutorState::Exited { code: 0 },
                    };
                    self.push(self.now + RUN, To::Worker(exited));
                }
                wnode::Output::Executor(
                    ExecutorCommand::Kill { executor } | ExecutorCommand::Stop { executor, .. },
                ) => self.kill(executor, at),
                wnode::Output::Exit { reason } => panic!("the worker exited: {reason}"),
                wnode::Output::Note(wnode::Note::Status(st)) if st.registered => {
                    self.registered_at.get_or_insert(self.now);
                }
                _ => {}
            }
        }
    }

    fn deliver(&mut self, to: To) {
        let now = self.now;
        match to {
            To::Master(input) => {
                let out = self.master.handle(now, input);
                self.master_outputs(out);
            }
            To::Submit(input) => {
                let out = self.submit.handle(now, input);
                self.submit_outputs(out);
            }
            To::Worker(input) => {
                if let wnode::Input::ExecutorChanged { executor, state } = &input {
                    if state.is_terminal() && self.alive.remove(executor).is_none() {
                        return; // killed already: the process is gone
                    }
                }
                if matches!(input, wnode::Input::Start) {
                    self.worker_started = true;
                }
                let out = self.worker.handle(now, input);
                self.worker_outputs(out);
            }
        }
    }

    /// Runs until the submission exits or `limit` passes.
    fn run(&mut self, limit: Millis) {
        while self.exit.is_none() {
            let mut next = self.queue.iter().map(|(at, ..)| *at).min();
            let mut consider = |t: Option<Millis>| {
                if let Some(t) = t {
                    next = Some(next.map_or(t, |n: Millis| n.min(t)));
                }
            };
            consider(self.batch.as_ref().map(|(at, _)| *at));
            consider(self.master.poll_timeout());
            consider(self.submit.poll_timeout());
            if self.worker_started {
                consider(self.worker.poll_timeout());
            }
            let Some(next) = next else { return };
            if next > limit {
                return;
            }
            self.now = self.now.max(next);
            let now = self.now;
            // Deliveries due now, in the order they were sent.
            let mut due: Vec<(Millis, u64, To)> = Vec::new();
            let mut later = Vec::new();
            for item in self.queue.drain(..) {
                if item.0 <= now {
                    due.push(item);
                } else {
                    later.push(item);
                }
            }
            self.queue = later;
            due.sort_by_key(|(at, seq, _)| (*at, *seq));
            for (_, _, to) in due {
                self.deliver(to);
            }
            if self.batch.as_ref().is_some_and(|(at, _)| *at <= now) {
                let (_, writes) = self.batch.take().expect("checked");
                for write in writes {
                    let done = StoreEvent::Persisted { write };
                    let out = self.master.handle(now, mnode::Input::Store(done));
                    self.master_outputs(out);
                }
                self.start_batch();
            }
            if self.master.poll_timeout().is_some_and(|t| t <= now) {
                let out = self.master.handle(now, mnode::Input::Tick);
                self.master_outputs(out);
            }
            if self.submit.poll_timeout().is_some_and(|t| t <= now) {
                let out = self.submit.handle(now, snode::Input::Tick);
                self.submit_outputs(out);
            }
            if self.worker_started && self.worker.poll_timeout().is_some_and(|t| t <= now) {
                let out = self.worker.handle(now, wnode::Input::Tick);
                self.worker_outputs(out);
            }
        }
    }
}

/// Issue 20 (docs/design.md#issue-20), scenario 8, in pure nodes: every batch of the master's store
/// takes 10 s. The submission's first SUBSCRIBE waits behind the epoch's
/// write; on main each attempt was abandoned after 5 s, just before its
/// write landed, and the next made the master write again: it never
/// subscribed (and `--connect-timeout` ended it after 30 s). Now the
/// attempt timeouts grow, the submission subscribes, the worker (started
/// once the slots wait) registers, and both slots run once and complete.
#[test]
fn issue_20_a_store_taking_10_s_per_write_still_subscribes_registers_and_completes() {
    let mut w = World::new(Millis::from_secs(10), 2, Some(Millis::from_secs(45)));
    w.run(Millis::from_secs(600));
    let subscribed = w.subscribed_at.unwrap_or_else(|| {
        panic!("never subscribed ({} SUBSCRIBE attempts, exit {:?})", w.subscribe_attempts, w.exit)
    });
    assert!(subscribed <= Millis::from_secs(90), "subscribed only at {subscribed}");
    let registered = w.registered_at.expect("the worker registered");
    let exit = w.exit.clone().expect("the submission ended");
    assert_eq!(exit.code, snode::EXIT_SUCCEEDED, "{exit:?}");
    assert_eq!(w.most_per_slot, 1, "one executor per slot");
    eprintln!(
        "subscribed at {subscribed}, registered at {registered}, done at {} after {} attempts",
        w.now, w.subscribe_attempts
    );
}

/// The same with the worker up from the start: its registration retries
/// (every 0.5–1.5 s at first) while the registration's write waits behind
/// others; the master answers once it is durable and the worker is not
/// told to go away, nor does it give up.
#[test]
fn issue_20_a_worker_registers_while_each_store_write_takes_10_s() {
    let mut w = World::new(Millis::from_secs(10), 2, Some(Millis::ZERO));
    w.run(Millis::from_secs(600));
    assert!(w.registered_at.is_some(), "the worker never registered");
    assert!(w.subscribed_at.is_some(), "never subscribed");
    let exit = w.exit.clone().expect("the submission ended");
    assert_eq!(exit.code, snode::EXIT_SUCCEEDED, "{exit:?}");
}

//! Helpers shared by the scenario tests: build machines, pick actions apart.
#![allow(dead_code)]

use regent_core::master::{self, Master};
use regent_core::protocol::{Hello, Message, Role, PROTOCOL_VERSION};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::worker::{self, Worker};
use regent_core::{Addr, ConnId, Epoch, Incarnation, MasterId, Millis, WorkerId};

pub const CLUSTER: &str = "test";

pub fn addr(s: &str) -> Addr {
    Addr::new(s)
}

pub fn master(name: &str) -> Master {
    Master::new(master::Config::new(MasterId::new(name), addr(name)))
}

pub fn worker_cfg(id: &str, inc: u64, masters: &[&str]) -> worker::Config {
    worker::Config::new(
        CLUSTER,
        WorkerId::new(id),
        Incarnation(inc),
        masters.iter().map(|m| addr(m)).collect(),
        4,
        4096,
    )
}

pub fn worker(id: &str, inc: u64, masters: &[&str]) -> Worker {
    Worker::new(worker_cfg(id, inc, masters))
}

pub fn hello(role: Role, node: &str) -> Message {
    Message::Hello(Hello {
        version: PROTOCOL_VERSION,
        cluster: CLUSTER.into(),
        role,
        node: node.into(),
    })
}

/// Messages the worker sends, as (to, message).
pub fn w_sends(actions: &[worker::Action]) -> Vec<(Addr, Message)> {
    actions
        .iter()
        .filter_map(|a| match a {
            worker::Action::Send { to, msg } => Some((to.clone(), msg.clone())),
            _ => None,
        })
        .collect()
}

/// Registrations the worker sends, by destination.
pub fn w_registrations(actions: &[worker::Action]) -> Vec<Addr> {
    w_sends(actions)
        .into_iter()
        .filter(|(_, m)| matches!(m, Message::RegisterWorker(_)))
        .map(|(a, _)| a)
        .collect()
}

/// The executors a worker's `actions` kill, in order.
pub fn w_kills(actions: &[worker::Action]) -> Vec<regent_core::ExecutorId> {
    actions
        .iter()
        .filter_map(|a| match a {
            worker::Action::Executor(worker::ExecutorCommand::Kill { executor }) => {
                Some(executor.clone())
            }
            _ => None,
        })
        .collect()
}

pub fn w_exit(actions: &[worker::Action]) -> Option<String> {
    actions.iter().find_map(|a| match a {
        worker::Action::Exit { reason } => Some(reason.clone()),
        _ => None,
    })
}

/// The one message the worker sends to `to` (panics unless exactly one).
pub fn only_send_to(actions: &[worker::Action], to: &str) -> Message {
    let v: Vec<Message> =
        w_sends(actions).into_iter().filter(|(a, _)| a.as_str() == to).map(|(_, m)| m).collect();
    assert_eq!(v.len(), 1, "expected exactly one message to {to}, got {v:?}");
    v.into_iter().next().unwrap()
}

/// Messages the master sends, as (conn, message).
pub fn m_sends(actions: &[master::Action]) -> Vec<(ConnId, Message)> {
    actions
        .iter()
        .filter_map(|a| match a {
            master::Action::Send { conn, msg } => Some((*conn, msg.clone())),
            _ => None,
        })
        .collect()
}

/// Feeds every `Persist`/`Unpersist` of `actions` back as `Persisted` and
/// returns the actions that produced.
pub fn persist_all(m: &mut Master, now: Millis, actions: &[master::Action]) -> Vec<master::Action> {
    let mut out = Vec::new();
    for a in actions {
        if let master::Action::Store(StoreCommand::Persist { write, .. })
        | master::Action::Store(StoreCommand::Unpersist { write, .. }) = a
        {
            out.extend(
                m.handle(now, master::Event::Store(StoreEvent::Persisted { write: *write })),
            );
        }
    }
    out
}

/// Connects `conn` to `m` and says Hello as a worker; returns the reply.
pub fn connect_worker(m: &mut Master, now: Millis, conn: u64, node: &str) -> Message {
    let _ = m.handle(now, master::Event::Connected { conn: ConnId(conn) });
    let out = m
        .handle(now, master::Event::Message { conn: ConnId(conn), msg: hello(Role::Worker, node) });
    let sends = m_sends(&out);
    assert_eq!(sends.len(), 1);
    sends[0].1.clone()
}

/// Delivers a worker message to a master on `conn`, persisting synchronously.
pub fn deliver_to_master(
    m: &mut Master,
    now: Millis,
    conn: u64,
    msg: Message,
) -> Vec<(ConnId, Message)> {
    let out = m.handle(now, master::Event::Message { conn: ConnId(conn), msg });
    let mut sends = m_sends(&out);
    sends.extend(m_sends(&persist_all(m, now, &out)));
    sends
}

/// Elects `m` with an empty store at elector floor `epoch`, feeding the
/// load and the epoch write back; returns the actions once it acts.
pub fn elect(m: &mut Master, now: Millis, epoch: u64) -> Vec<master::Action> {
    let out = m.handle(now, master::Event::Elected { floor: Epoch(epoch), clock: 0 });
    assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
    let out = m.handle(now, master::Event::Store(StoreEvent::Loaded { records: vec![] }));
    assert!(m_sends(&out).is_empty(), "nothing is sent before the epoch is durable");
    persist_all(m, now, &out)
}

pub fn from(w: &mut Worker, now: Millis, master: &str, msg: Message) -> Vec<worker::Action> {
    w.handle(now, worker::Event::Message { from: addr(master), msg })
}

/// Connects `conn` to `m` as the subscriber of a new framework `app`, at
/// time 0.
pub fn subscribe(m: &mut Master, conn: u64) {
    let _ = m.handle(Millis(0), master::Event::Connected { conn: ConnId(conn) });
    let _ = m.handle(
        Millis(0),
        master::Event::Message { conn: ConnId(conn), msg: hello(Role::Subscriber, "x") },
    );
    let msg = Message::Subscribe(regent_core::protocol::Subscribe {
        framework: None::<regent_core::FrameworkId>,
        name: "app".into(),
        instance: regent_core::ids::InstanceId(7),
        attempt: 1,
        failover_timeout: Millis(30_000),
        tenant: None,
    });
    let _ = deliver_to_master(m, Millis(0), conn, msg);
}

/// A worker on `cfg` registered with master `a` at epoch 2, at time 0.
pub fn registered_worker_with(cfg: worker::Config) -> Worker {
    let mut w = Worker::new(cfg);
    let _ = w.handle(Millis(0), worker::Event::Start);
    let _ = w.handle(Millis(0), worker::Event::Connected { master: addr("a") });
    let _ = from(
        &mut w,
        Millis(0),
        "a",
        Message::Registered {
            epoch: Epoch(2),
            heartbeat_interval: Millis(1_000),
            duplicate: false,
            masters: vec![addr("a")],
        },
    );
    assert!(w.status().registered);
    w
}

/// What a worker started in `out`, with the environment it gave; or the
/// failure it reported instead.
pub fn started(out: &[worker::Action]) -> Result<Vec<(String, String)>, String> {
    use regent_core::protocol::ExecutorState;
    use regent_core::worker::ExecutorCommand;
    for a in out {
        match a {
            worker::Action::Executor(ExecutorCommand::Start { spec, .. }) => {
                return Ok(spec.env.clone())
            }
            worker::Action::Send { msg: Message::ExecutorStatus { report, .. }, .. } => {
                if let ExecutorState::Failed { reason } = &report.state {
                    return Err(reason.clone());
                }
            }
            _ => {}
        }
    }
    panic!("neither started nor failed: {out:?}")
}

/// The launches in `sends`: (worker connection, executor, framework).
pub fn launches(
    sends: &[(ConnId, Message)],
) -> Vec<(u64, regent_core::ExecutorId, regent_core::FrameworkId)> {
    sends
        .iter()
        .filter_map(|(c, m)| match m {
            Message::LaunchExecutor { executor, framework, .. } => {
                Some((c.0, executor.clone(), framework.clone()))
            }
            _ => None,
        })
        .collect()
}

/// What `m` plans for group `g` alone, asked on connection 1.
pub fn plan_one(
    m: &mut Master,
    g: regent_core::protocol::GroupSpec,
) -> regent_core::protocol::GroupPlan {
    let out = m.handle(
        Millis(0),
        master::Event::Message {
            conn: ConnId(1),
            msg: Message::PlanRequest { request: 9, groups: vec![g], tenant: None },
        },
    );
    out.into_iter()
        .find_map(|a| match a {
            master::Action::Send { msg: Message::PlanReply { groups, .. }, .. } => {
                Some(groups.into_iter().next().expect("one group planned"))
            }
            _ => None,
        })
        .expect("a PlanReply")
}

/// Worker `name`'s registration on connection `conn` (its incarnation): 8
/// cores, 64 GiB, no executors, nothing offered beyond; tests set the
/// fields they are about with `..registration(..)`.
pub fn registration(name: &str, conn: u64) -> regent_core::protocol::RegisterWorker {
    regent_core::protocol::RegisterWorker {
        worker: name.into(),
        incarnation: Incarnation(conn),
        cores: 8,
        memory_mb: 64 * 1024,
        executors: vec![],
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
        ports: vec![],
        host: None,
        resources: vec![],
        users: vec![],
    }
}

/// A group `name` of `slots` executors of 1 core and 1 MiB running
/// `sleep 10`, with `launch`.
pub fn group_with(
    name: &str,
    slots: u32,
    launch: regent_core::launch::LaunchSpec,
) -> regent_core::protocol::GroupSpec {
    regent_core::protocol::GroupSpec {
        group: name.into(),
        slots,
        command: vec!["/bin/sleep".into(), "10".into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy: Default::default(),
        launch: Box::new(launch),
    }
}

/// The durable store as the scenario tests stand it in: what each write
/// leaves under its key, and every write in order.
#[derive(Debug, Default)]
pub struct Store {
    /// The records by key.
    pub records:
        std::collections::BTreeMap<regent_core::store::RecordKey, regent_core::store::Record>,
    /// Every write applied, in order: (is a put, key).
    pub log: Vec<(bool, regent_core::store::RecordKey)>,
}

impl Store {
    /// Applies every write of `actions` and feeds `Persisted` back at
    /// `now`, then does the same for the writes that produces, until
    /// nothing is left to write; returns every action on the way (those of
    /// `actions` first).
    pub fn run(
        &mut self,
        m: &mut Master,
        now: Millis,
        actions: Vec<master::Action>,
    ) -> Vec<master::Action> {
        let mut all = Vec::new();
        let mut queue = actions;
        while !queue.is_empty() {
            let mut next = Vec::new();
            for a in queue {
                let write = match &a {
                    master::Action::Store(StoreCommand::Persist { write, record }) => {
                        self.records.insert(record.key(), record.clone());
                        self.log.push((true, record.key()));
                        Some(*write)
                    }
                    master::Action::Store(StoreCommand::Unpersist { write, key, .. }) => {
                        self.records.remove(key);
                        self.log.push((false, key.clone()));
                        Some(*write)
                    }
                    _ => None,
                };
                if let Some(write) = write {
                    next.extend(
                        m.handle(now, master::Event::Store(StoreEvent::Persisted { write })),
                    );
                }
                all.push(a);
            }
            queue = next;
        }
        all
    }

    /// [`Store::run`], returning every message sent on the way.
    pub fn settle(
        &mut self,
        m: &mut Master,
        now: Millis,
        actions: Vec<master::Action>,
    ) -> Vec<(ConnId, Message)> {
        m_sends(&self.run(m, now, actions))
    }

    /// Every record, in key order.
    pub fn all(&self) -> Vec<regent_core::store::Record> {
        self.records.values().cloned().collect()
    }

    /// Master `name` elected over these records at local time `now`, with
    /// the elector's `floor` and its wall clock reading `wall` then.
    pub fn elect(&mut self, name: &str, now: Millis, floor: Epoch, wall: u64) -> Master {
        let mut m = master(name);
        let out = m.handle(now, master::Event::Elected { floor, clock: wall });
        assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
        let out = m.handle(now, master::Event::Store(StoreEvent::Loaded { records: self.all() }));
        let _ = self.run(&mut m, now, out);
        m
    }
}

/// A leader at `now` and the records it made durable, by key, with the
/// scenario tests' cast: worker `w1` on connection 100 (incarnation 100)
/// and a subscriber on connection 1. Every write is confirmed at once.
#[derive(Debug)]
pub struct Run {
    /// The leader.
    pub m: Master,
    /// Its clock.
    pub now: Millis,
    /// What it made durable, by key.
    pub store:
        std::collections::BTreeMap<regent_core::store::RecordKey, regent_core::store::Record>,
}

impl Run {
    /// Master `a`, elected at time 0 with an empty store, worker `w1`
    /// registered on connection 100 (ports 20000-20099) and a framework
    /// `app` subscribed on connection 1.
    pub fn with_w1_and_app() -> Run {
        let mut m = Master::new(master::Config::new("a".into(), addr("a")));
        let _ = elect(&mut m, Millis(0), 1);
        let mut run = Run { m, now: Millis(0), store: Default::default() };
        let _ = connect_worker(&mut run.m, run.now, 100, "w1");
        let _ = run.send(100, w1_registration(vec![]));
        subscribe(&mut run.m, 1);
        run
    }

    /// Feeds `event` at `now`, confirming every write (and the writes
    /// those lead to) at once; the messages sent, in order.
    pub fn feed(&mut self, event: master::Event) -> Vec<(ConnId, Message)> {
        let now = self.now;
        let mut sends = Vec::new();
        let mut todo = vec![self.m.handle(now, event)];
        while let Some(out) = todo.pop() {
            sends.extend(m_sends(&out));
            for a in out {
                if let master::Action::Store(StoreCommand::Persist { write, record }) = a {
                    self.store.insert(record.key(), record);
                    let more =
                        self.m.handle(now, master::Event::Store(StoreEvent::Persisted { write }));
                    todo.push(more);
                }
            }
        }
        sends
    }

    /// `msg` arrives on connection `conn`.
    pub fn send(&mut self, conn: u64, msg: Message) -> Vec<(ConnId, Message)> {
        self.feed(master::Event::Message { conn: ConnId(conn), msg })
    }

    /// Advances the clock by `ms`, firing every deadline on the way while
    /// `w1` and the subscriber stay in touch; the messages sent.
    pub fn advance(&mut self, ms: u64) -> Vec<(ConnId, Message)> {
        let end = self.now + Millis(ms);
        let mut sends = Vec::new();
        while let Some(at) = self.m.poll_timeout().filter(|at| *at <= end) {
            self.now = at.max(self.now);
            let _ = self.send(100, Message::WorkerHeartbeat { incarnation: Incarnation(100) });
            let epoch = self.m.epoch();
            let _ = self.send(1, Message::FrameworkHeartbeatAck { epoch });
            sends.extend(self.feed(master::Event::Tick));
        }
        self.now = end;
        sends
    }

    /// `w1` reports executor `id` of `fw` in `state`.
    pub fn status(
        &mut self,
        fw: &regent_core::FrameworkId,
        id: &regent_core::ExecutorId,
        state: regent_core::protocol::ExecutorState,
    ) -> Vec<(ConnId, Message)> {
        let report = report(id, fw, state);
        self.send(100, Message::ExecutorStatus { incarnation: Incarnation(100), report })
    }

    /// The one framework's durable record.
    pub fn record(&self) -> regent_core::store::FrameworkRecord {
        self.store
            .values()
            .find_map(|r| match r {
                regent_core::store::Record::Framework(f) => Some(f.clone()),
                _ => None,
            })
            .expect("a framework record")
    }
}

/// Worker `w1`'s registration (incarnation 100, 8 cores, 8 GiB, ports
/// 20000-20099) reporting `executors`.
pub fn w1_registration(executors: Vec<regent_core::protocol::ExecutorReport>) -> Message {
    Message::RegisterWorker(regent_core::protocol::RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: None,
        ports: vec![regent_core::ports::PortRange { first: 20_000, last: 20_099 }],
        worker: "w1".into(),
        incarnation: Incarnation(100),
        cores: 8,
        memory_mb: 8192,
        executors,
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    })
}

/// A report of executor `id` of `fw` (1 core, 1 MiB) in `state`.
pub fn report(
    id: &regent_core::ExecutorId,
    fw: &regent_core::FrameworkId,
    state: regent_core::protocol::ExecutorState,
) -> regent_core::protocol::ExecutorReport {
    regent_core::protocol::ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        id: id.clone(),
        framework: fw.clone(),
        cores: 1,
        memory_mb: 1,
        state,
        ports: vec![],
    }
}

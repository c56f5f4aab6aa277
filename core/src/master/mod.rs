//! The master machine: leadership lifecycle and worker registry.
//!
//! Leadership arrives as events ([`Event::Elected`], [`Event::Revoked`]) fed
//! in by the daemon from the elector (DESIGN rule 7), so this machine is
//! testable without one.
//!
//! * **Standby**: answers registrations with `NotLeader { leader hint }` and
//!   keeps every `Hello` connection, so that it can push `MasterChanged` the
//!   moment it is elected.
//! * **Alive**: registrations are persisted before they are acknowledged
//!   (DESIGN rule 3); duplicates are acknowledged idempotently; a new
//!   incarnation of a worker id replaces the old one, which is told to shut
//!   down; a sweep timer marks silent workers DEAD and un-persists them.

mod workers;

use crate::ids::{Addr, ConnId, Epoch, Incarnation, MasterId, WorkerId};
use crate::protocol::{HelloReply, LeaderHint, Message, Role};
use crate::store::{Record, RecordKey, WriteId};
use crate::time::Millis;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

pub use workers::{WorkerEntry, WorkerState};

/// Master configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// This master's id.
    pub id: MasterId,
    /// The address workers and subscribers dial.
    pub addr: Addr,
    /// How often workers heartbeat. Default 1 s.
    pub heartbeat_interval: Millis,
    /// A worker silent this long is DEAD. Default 10 s.
    pub worker_timeout: Millis,
}

impl Config {
    /// A configuration with the documented defaults.
    pub fn new(id: MasterId, addr: Addr) -> Self {
        Config {
            id,
            addr,
            heartbeat_interval: Millis(1_000),
            worker_timeout: Millis(10_000),
        }
    }

    fn sweep_interval(&self) -> Millis {
        Millis((self.worker_timeout.0 / 4).max(1))
    }
}

/// What happens to a master.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A peer connected (nothing received yet).
    Connected {
        /// The runtime's number for the connection.
        conn: ConnId,
    },
    /// A connection closed.
    Disconnected {
        /// The connection.
        conn: ConnId,
    },
    /// A message arrived on `conn`.
    Message {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// A deadline set by [`Action::SetTimer`] passed.
    Timer(Timer),
    /// This master leads at `epoch` (already durable).
    Elected {
        /// The leadership's epoch.
        epoch: Epoch,
    },
    /// Leadership is lost.
    Revoked,
    /// The elector sees `hint` as the leader (possibly this master).
    LeaderIs(LeaderHint),
    /// The write `write` is durable.
    Persisted {
        /// The write.
        write: WriteId,
    },
    /// The write `write` failed; the leader cannot act (DESIGN rule 8).
    PersistFailed {
        /// The write.
        write: WriteId,
        /// What the store said.
        reason: String,
    },
}

/// What the runtime must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send `msg` on `conn` (drop it if the connection is gone).
    Send {
        /// The connection.
        conn: ConnId,
        /// The message.
        msg: Message,
    },
    /// Close `conn` after flushing what was sent before; do not feed
    /// `Disconnected` back.
    Close {
        /// The connection.
        conn: ConnId,
        /// Why, for the log.
        reason: String,
    },
    /// Write `record` durably, then feed `Persisted { write }` (or
    /// `PersistFailed`). Writes to one key are applied in order.
    Persist {
        /// Echoed back.
        write: WriteId,
        /// The record.
        record: Record,
    },
    /// Delete the record at `key`, only if it still names `incarnation`
    /// (for worker keys), then feed `Persisted { write }`.
    Unpersist {
        /// Echoed back.
        write: WriteId,
        /// The key.
        key: RecordKey,
        /// The incarnation the delete is conditional on.
        incarnation: Option<Incarnation>,
    },
    /// Feed `Event::Timer(timer)` at `at` (replaces an earlier deadline).
    SetTimer {
        /// Which timer.
        timer: Timer,
        /// When.
        at: Millis,
    },
    /// Give up leadership: close the coordination session so a standby can
    /// take over. The machine is back in standby.
    Abdicate {
        /// Why.
        reason: String,
    },
}

/// The master's named deadlines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Timer {
    /// Mark workers silent for `worker_timeout` DEAD.
    Sweep,
}

/// The leadership lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Not leading.
    Standby,
    /// Leading and acting.
    Alive,
}

/// Counters for metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metrics {
    /// Messages handled.
    pub messages: u64,
    /// Messages refused as unexpected for their sender or state.
    pub rejected: u64,
}

#[derive(Clone, Debug, Default)]
struct Conn {
    role: Option<Role>,
    node: Option<String>,
    worker: Option<WorkerId>,
}

/// The master machine.
#[derive(Debug)]
pub struct Master {
    config: Config,
    status: Status,
    epoch: Epoch,
    leader: Option<LeaderHint>,
    masters: BTreeSet<Addr>,
    conns: FxHashMap<ConnId, Conn>,
    workers: workers::Registry,
    next_write: u64,
    metrics: Metrics,
}

impl Master {
    /// A master in standby.
    pub fn new(config: Config) -> Self {
        let mut masters = BTreeSet::new();
        masters.insert(config.addr.clone());
        Master {
            config,
            status: Status::Standby,
            epoch: Epoch::ZERO,
            leader: None,
            masters,
            conns: FxHashMap::default(),
            workers: workers::Registry::default(),
            next_write: 0,
            metrics: Metrics::default(),
        }
    }

    /// Where the master is in its lifecycle.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The current (or last known) epoch.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The master's id.
    pub fn id(&self) -> &MasterId {
        &self.config.id
    }

    /// Counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The worker registry, ordered by id.
    pub fn workers(&self) -> Vec<&WorkerEntry> {
        self.workers.sorted()
    }

    /// Handles one event at time `now`.
    #[must_use]
    pub fn handle(&mut self, now: Millis, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        match event {
            Event::Connected { conn } => {
                self.conns.insert(conn, Conn::default());
            }
            Event::Disconnected { conn } => {
                if let Some(c) = self.conns.remove(&conn) {
                    if let Some(w) = c.worker {
                        self.workers.unbind(&w, conn);
                    }
                }
            }
            Event::Message { conn, msg } => {
                self.metrics.messages += 1;
                self.on_message(now, conn, msg, &mut out);
            }
            Event::Timer(Timer::Sweep) => {
                if self.status == Status::Alive {
                    self.sweep(now, &mut out);
                }
            }
            Event::Elected { epoch } => self.on_elected(now, epoch, &mut out),
            Event::Revoked => self.step_down(&mut out),
            Event::LeaderIs(hint) => {
                self.masters.insert(hint.addr.clone());
                if hint.epoch > self.epoch && self.status == Status::Standby {
                    self.epoch = hint.epoch;
                }
                self.leader = Some(hint);
            }
            Event::Persisted { write } => self.on_persisted(now, write, &mut out),
            Event::PersistFailed { write, reason } => {
                if self.status != Status::Standby {
                    out.push(Action::Abdicate {
                        reason: format!("store write {} failed: {reason}", write.0),
                    });
                    self.step_down(&mut out);
                }
            }
        }
        out
    }

    fn self_hint(&self) -> LeaderHint {
        LeaderHint {
            id: self.config.id.clone(),
            addr: self.config.addr.clone(),
            epoch: self.epoch,
        }
    }

    fn leader_hint(&self) -> Option<LeaderHint> {
        if self.status == Status::Alive {
            Some(self.self_hint())
        } else {
            self.leader.clone().filter(|l| l.id != self.config.id)
        }
    }

    fn known_masters(&self) -> Vec<Addr> {
        self.masters.iter().cloned().collect()
    }

    fn next_write(&mut self) -> WriteId {
        self.next_write += 1;
        WriteId(self.next_write)
    }

    fn on_message(&mut self, now: Millis, conn: ConnId, msg: Message, out: &mut Vec<Action>) {
        if !self.conns.contains_key(&conn) {
            // A runtime that forgot `Connected`: adopt the connection.
            self.conns.insert(conn, Conn::default());
        }
        match msg {
            Message::Hello(hello) => {
                let c = self.conns.get_mut(&conn).expect("inserted above");
                c.role = Some(hello.role);
                c.node = Some(hello.node);
                out.push(Action::Send {
                    conn,
                    msg: Message::HelloReply(HelloReply {
                        role: Role::Master,
                        master: self.config.id.clone(),
                        leading: self.status == Status::Alive,
                        epoch: self.epoch,
                        leader: self.leader_hint(),
                        masters: self.known_masters(),
                    }),
                });
            }
            Message::RegisterWorker(reg) => {
                if self.status != Status::Alive {
                    out.push(self.not_leader(conn));
                } else {
                    self.register_worker(now, conn, reg, out);
                }
            }
            Message::WorkerHeartbeat { incarnation } => {
                if self.status != Status::Alive {
                    out.push(self.not_leader(conn));
                } else {
                    self.worker_heartbeat(now, conn, incarnation, out);
                }
            }
            // Anything else (master-to-peer messages, messages of roles this
            // master does not serve yet): refused and counted, never fatal.
            _ => {
                self.metrics.rejected += 1;
            }
        }
    }

    fn not_leader(&self, conn: ConnId) -> Action {
        Action::Send {
            conn,
            msg: Message::NotLeader {
                epoch: self.epoch,
                leader: self.leader_hint(),
            },
        }
    }

    fn on_elected(&mut self, now: Millis, epoch: Epoch, out: &mut Vec<Action>) {
        if self.status == Status::Alive && epoch <= self.epoch {
            return; // a repeated notification
        }
        self.status = Status::Alive;
        self.epoch = epoch.max(self.epoch);
        self.leader = Some(self.self_hint());
        let changed = Message::MasterChanged {
            epoch: self.epoch,
            leader: self.self_hint(),
            masters: self.known_masters(),
        };
        let mut worker_conns: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.role == Some(Role::Worker))
            .map(|(id, _)| *id)
            .collect();
        worker_conns.sort();
        for conn in worker_conns {
            out.push(Action::Send {
                conn,
                msg: changed.clone(),
            });
        }
        out.push(Action::SetTimer {
            timer: Timer::Sweep,
            at: now + self.config.sweep_interval(),
        });
    }

    fn step_down(&mut self, out: &mut Vec<Action>) {
        if self.status == Status::Standby {
            return;
        }
        self.status = Status::Standby;
        self.workers = workers::Registry::default();
        let mut conns: Vec<ConnId> = self.conns.keys().copied().collect();
        conns.sort();
        for conn in conns {
            out.push(Action::Close {
                conn,
                reason: "leadership revoked".into(),
            });
        }
        self.conns.clear();
    }
}

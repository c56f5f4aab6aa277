//! The leader's worker registry: registration, heartbeats, the DEAD sweep.

use super::{Action, Master, Timer};
use crate::ids::{Addr, ConnId, Epoch, Incarnation, WorkerId};
use crate::protocol::{Message, RegisterWorker};
use crate::store::{Record, RecordKey, WorkerRecord, WriteId};
use crate::time::Millis;
use rustc_hash::FxHashMap;

/// How many replaced incarnations of one worker id are remembered, so a
/// replaced process that keeps talking is told to shut down instead of
/// replacing its successor in turn.
const RETIRED_KEPT: usize = 8;

/// Where a registered worker is in its life at this leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerState {
    /// Registration received; its record is being persisted.
    Registering,
    /// Registered and heard from within `worker_timeout`.
    Alive,
    /// Silent for `worker_timeout`; its record is deleted.
    Dead,
    /// Recovered from the store by a new leader and not heard from yet; or
    /// left so by the recovery removal limit. Excluded from placement and
    /// never removed by the DEAD sweep.
    Unknown,
}

/// One worker in the leader's registry.
#[derive(Clone, Debug)]
pub struct WorkerEntry {
    /// The worker's id.
    pub id: WorkerId,
    /// The incarnation registered.
    pub incarnation: Incarnation,
    /// Cores offered.
    pub cores: u32,
    /// Memory offered, in MiB.
    pub memory_mb: u64,
    /// Where it is in its life.
    pub state: WorkerState,
    /// When it was last heard from.
    pub last_seen: Millis,
    /// The connection it talks on, if any.
    pub conn: Option<ConnId>,
    /// Its record is durable.
    pub durable: bool,
    /// Incarnations of this id that were replaced by a newer one.
    pub retired: Vec<Incarnation>,
    /// Recovered from the store by this leader.
    pub recovered: bool,
    /// Cores held by its live executors.
    pub cores_used: u32,
    /// Memory held by its live executors, in MiB.
    pub memory_used_mb: u64,
    /// Where its callback listener takes masters' connections, if it said.
    pub callback: Option<Addr>,
}

#[derive(Debug, Default)]
pub(super) struct Registry {
    pub(super) entries: FxHashMap<WorkerId, WorkerEntry>,
    /// Writes in flight: which (worker, incarnation) each one makes durable.
    pending: FxHashMap<WriteId, (WorkerId, Incarnation)>,
}

impl Registry {
    pub(super) fn sorted(&self) -> Vec<&WorkerEntry> {
        let mut v: Vec<&WorkerEntry> = self.entries.values().collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    pub(super) fn insert_recovered(&mut self, r: WorkerRecord, now: Millis) {
        self.entries.insert(
            r.id.clone(),
            WorkerEntry {
                id: r.id,
                incarnation: r.incarnation,
                cores: r.cores,
                memory_mb: r.memory_mb,
                state: WorkerState::Unknown,
                last_seen: now,
                conn: None,
                durable: true,
                retired: Vec::new(),
                recovered: true,
                cores_used: 0,
                memory_used_mb: 0,
                callback: r.callback,
            },
        );
    }

    pub(super) fn count(&self, state: WorkerState) -> usize {
        self.entries.values().filter(|e| e.state == state).count()
    }

    pub(super) fn recovered_count(&self) -> usize {
        self.entries.values().filter(|e| e.recovered).count()
    }

    pub(super) fn ids_in(&self, state: WorkerState) -> Vec<WorkerId> {
        let mut v: Vec<WorkerId> =
            self.entries.values().filter(|e| e.state == state).map(|e| e.id.clone()).collect();
        v.sort();
        v
    }

    pub(super) fn refresh_all(&mut self, now: Millis) {
        for e in self.entries.values_mut() {
            e.last_seen = now;
        }
    }

    pub(super) fn remove_if_not_alive(&mut self, id: &WorkerId) -> Option<WorkerEntry> {
        match self.entries.get(id) {
            Some(e) if matches!(e.state, WorkerState::Unknown | WorkerState::Dead) => {
                self.entries.remove(id)
            }
            _ => None,
        }
    }

    /// `worker` is registered as `incarnation` and talks on `conn`.
    pub(super) fn is_bound(
        &self,
        worker: &WorkerId,
        incarnation: Incarnation,
        conn: ConnId,
    ) -> bool {
        self.entries.get(worker).is_some_and(|e| {
            e.incarnation == incarnation
                && e.conn == Some(conn)
                && matches!(e.state, WorkerState::Alive | WorkerState::Registering)
        })
    }

    pub(super) fn unbind(&mut self, worker: &WorkerId, conn: ConnId) {
        if let Some(e) = self.entries.get_mut(worker) {
            if e.conn == Some(conn) {
                e.conn = None;
            }
        }
    }
}

impl Master {
    fn registered_msg(&self, duplicate: bool) -> Message {
        Message::Registered {
            epoch: self.epoch,
            heartbeat_interval: self.config.heartbeat_interval,
            duplicate,
            masters: self.known_masters(),
        }
    }

    /// Binds `conn` to `worker`, unbinding the worker's previous connection.
    fn bind(&mut self, conn: ConnId, worker: &WorkerId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.worker = Some(worker.clone());
        }
    }

    /// Forgets a connection this master closes itself (no `Disconnected`
    /// follows) while refusing `registering`'s registration on it: neither
    /// that worker nor one registered on it before is bound to it any more, so
    /// nothing more is accepted from it or sent on it (a refused
    /// re-registration's reports were once applied on the registration it
    /// failed to replace).
    fn drop_conn(&mut self, conn: ConnId, registering: &WorkerId) {
        if let Some(worker) = self.conns.remove(&conn).and_then(|c| c.worker) {
            self.workers.unbind(&worker, conn);
        }
        self.workers.unbind(registering, conn);
    }

    pub(super) fn register_worker(
        &mut self,
        now: Millis,
        conn: ConnId,
        reg: RegisterWorker,
        out: &mut Vec<Action>,
    ) {
        if let Some(reason) = registration_limit(&reg) {
            // Checked before anything is allocated or persisted (DESIGN
            // rule 6): a worker that offers absurd numbers is misconfigured,
            // so it is told why and stops, rather than retrying forever.
            let reason = format!("registration refused: {reason}");
            out.push(Action::Send { conn, msg: Message::Shutdown { epoch: self.epoch, reason } });
            out.push(Action::Close { conn, reason: "registration past a limit".into() });
            self.drop_conn(conn, &reg.worker);
            self.metrics.rejected += 1;
            return;
        }
        let id = reg.worker.clone();
        if let Some(entry) = self.workers.entries.get(&id) {
            // Incarnations grow with their process's start time: an older one
            // (a registration sent before a crash and delivered late) never
            // replaces a newer one.
            if entry.retired.contains(&reg.incarnation) || reg.incarnation < entry.incarnation {
                let msg = shutdown_msg(self.epoch, &id, reg.incarnation, entry.incarnation);
                out.push(Action::Send { conn, msg });
                out.push(Action::Close {
                    conn,
                    reason: format!("replaced incarnation of worker {id}"),
                });
                self.drop_conn(conn, &id);
                return;
            }
        }
        self.bind(conn, &id);
        let same = self.workers.entries.get(&id).map(|e| e.incarnation == reg.incarnation);
        match same {
            Some(true) => {
                let entry = self.workers.entries.get_mut(&id).expect("checked");
                let old_conn = entry.conn.replace(conn);
                entry.last_seen = now;
                if let Some(old) = old_conn.filter(|c| *c != conn) {
                    if let Some(c) = self.conns.get_mut(&old) {
                        c.worker = None;
                    }
                }
                match entry.state {
                    WorkerState::Alive => {
                        // The same process again (a retry or a blip): acknowledge
                        // idempotently, never an error (SPARK-23191).
                        out.push(Action::Send { conn, msg: self.registered_msg(true) });
                    }
                    // The acknowledgement follows `Persisted`, on the latest conn.
                    WorkerState::Registering => {}
                    // A recovered worker reports: its record is durable already.
                    WorkerState::Unknown => {
                        entry.state = WorkerState::Alive;
                        out.push(Action::Send { conn, msg: self.registered_msg(false) });
                    }
                    WorkerState::Dead => {
                        entry.state = WorkerState::Registering;
                        entry.durable = false;
                        self.persist_worker(&id, out);
                    }
                }
            }
            Some(false) => {
                // The old incarnation's executors are lost (DESIGN rule 5).
                self.lose_executors_of(&id, out);
                let old = self.workers.entries.remove(&id).expect("checked");
                if let Some(old_conn) = old.conn.filter(|c| *c != conn) {
                    let msg = shutdown_msg(self.epoch, &id, old.incarnation, reg.incarnation);
                    out.push(Action::Send { conn: old_conn, msg });
                    out.push(Action::Close {
                        conn: old_conn,
                        reason: format!("worker {id} re-registered with a new incarnation"),
                    });
                    self.conns.remove(&old_conn);
                }
                let mut retired = old.retired;
                retired.push(old.incarnation);
                if retired.len() > RETIRED_KEPT {
                    retired.remove(0);
                }
                self.insert_registering(now, conn, reg, retired, out);
            }
            None => self.insert_registering(now, conn, reg, Vec::new(), out),
        }
    }

    fn insert_registering(
        &mut self,
        now: Millis,
        conn: ConnId,
        reg: RegisterWorker,
        retired: Vec<Incarnation>,
        out: &mut Vec<Action>,
    ) {
        let id = reg.worker.clone();
        self.workers.entries.insert(
            id.clone(),
            WorkerEntry {
                id: reg.worker,
                incarnation: reg.incarnation,
                cores: reg.cores,
                memory_mb: reg.memory_mb,
                state: WorkerState::Registering,
                last_seen: now,
                conn: Some(conn),
                durable: false,
                retired,
                recovered: false,
                cores_used: 0,
                memory_used_mb: 0,
                callback: self.conns.get(&conn).and_then(|c| c.callback.clone()),
            },
        );
        self.persist_worker(&id, out);
    }

    fn persist_worker(&mut self, id: &WorkerId, out: &mut Vec<Action>) {
        let write = self.next_write();
        let e = &self.workers.entries[id];
        let record = Record::Worker(WorkerRecord {
            id: e.id.clone(),
            incarnation: e.incarnation,
            cores: e.cores,
            memory_mb: e.memory_mb,
            callback: e.callback.clone(),
        });
        self.workers.pending.insert(write, (id.clone(), e.incarnation));
        out.push(Action::Persist { write, record });
    }

    /// Handles `Persisted` for a worker registration; `false` if `write` is
    /// another kind of write.
    pub(super) fn on_persisted(
        &mut self,
        now: Millis,
        write: WriteId,
        out: &mut Vec<Action>,
    ) -> bool {
        let Some((id, incarnation)) = self.workers.pending.remove(&write) else {
            return false;
        };
        let reply = match self.workers.entries.get_mut(&id) {
            Some(e) if e.incarnation == incarnation && e.state == WorkerState::Registering => {
                e.state = WorkerState::Alive;
                e.durable = true;
                e.last_seen = now;
                e.conn
            }
            _ => None,
        };
        if let Some(conn) = reply {
            out.push(Action::Send { conn, msg: self.registered_msg(false) });
            self.place(out);
        }
        true
    }

    pub(super) fn worker_heartbeat(
        &mut self,
        now: Millis,
        conn: ConnId,
        incarnation: Incarnation,
        out: &mut Vec<Action>,
    ) {
        let epoch = self.epoch;
        let bound = self.conns.get(&conn).and_then(|c| c.worker.as_ref());
        let entry = bound.and_then(|w| self.workers.entries.get_mut(w));
        match entry {
            Some(e) if e.incarnation == incarnation && e.state == WorkerState::Alive => {
                e.last_seen = now;
                out.push(Action::Send { conn, msg: Message::HeartbeatAck { epoch } });
            }
            Some(e) if e.retired.contains(&incarnation) => {
                let msg = shutdown_msg(epoch, &e.id, incarnation, e.incarnation);
                out.push(Action::Send { conn, msg });
            }
            // Registering: the acknowledgement is on its way; stay quiet.
            Some(e) if e.incarnation == incarnation && e.state == WorkerState::Registering => {
                e.last_seen = now;
            }
            // Unknown on this connection, dead, or another incarnation.
            _ => out.push(Action::Send { conn, msg: Message::ReconnectWorker { epoch } }),
        }
    }

    /// Marks a worker DEAD and deletes its record (conditional on its
    /// incarnation).
    pub(super) fn mark_dead(&mut self, id: &WorkerId, out: &mut Vec<Action>) {
        if !self.workers.entries.contains_key(id) {
            return;
        }
        self.lose_executors_of(id, out);
        let e = self.workers.entries.get_mut(id).expect("checked above");
        e.state = WorkerState::Dead;
        e.durable = false;
        let incarnation = e.incarnation;
        let write = self.next_write();
        out.push(Action::Unpersist {
            write,
            key: RecordKey::Worker(id.clone()),
            incarnation: Some(incarnation),
        });
    }

    pub(super) fn sweep(&mut self, now: Millis, out: &mut Vec<Action>) {
        let timeout = self.config.worker_timeout;
        let mut dead: Vec<WorkerId> = self
            .workers
            .entries
            .values()
            .filter(|e| e.state == WorkerState::Alive && now.since(e.last_seen) > timeout)
            .map(|e| e.id.clone())
            .collect();
        dead.sort();
        for id in dead {
            self.mark_dead(&id, out);
        }
        out.push(Action::SetTimer { timer: Timer::Sweep, at: now + self.config.sweep_interval() });
    }
}

fn shutdown_msg(epoch: Epoch, id: &WorkerId, old: Incarnation, new: Incarnation) -> Message {
    Message::Shutdown {
        epoch,
        reason: format!(
            "worker id {id} conflict: incarnation {old} was replaced by incarnation {new}"
        ),
    }
}

/// Why `reg` breaks a limit of [`crate::limits`], if it does.
fn registration_limit(reg: &RegisterWorker) -> Option<String> {
    use crate::limits::{MAX_CORES, MAX_ID_BYTES, MAX_MEMORY_MB, MAX_REPORTS_PER_REGISTRATION};
    let id = reg.worker.as_str();
    if id.len() > MAX_ID_BYTES {
        return Some(format!(
            "worker id of {} bytes; the limit is {MAX_ID_BYTES} bytes (MAX_ID_BYTES)",
            id.len()
        ));
    }
    if reg.cores > MAX_CORES {
        return Some(format!(
            "worker {id} offers {} cores; the limit is {MAX_CORES} (MAX_CORES)",
            reg.cores
        ));
    }
    if reg.memory_mb > MAX_MEMORY_MB {
        return Some(format!(
            "worker {id} offers {} MiB; the limit is {MAX_MEMORY_MB} MiB (MAX_MEMORY_MB)",
            reg.memory_mb
        ));
    }
    if reg.executors.len() > MAX_REPORTS_PER_REGISTRATION {
        return Some(format!(
            "worker {id} reports {} executors; the limit is {MAX_REPORTS_PER_REGISTRATION} per registration (MAX_REPORTS_PER_REGISTRATION)",
            reg.executors.len()
        ));
    }
    None
}

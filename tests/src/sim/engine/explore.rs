//! The engine's side of the exhaustive checker ([`crate::check`]): the
//! pending events as choices, firing one of them out of time order, the
//! actions a bounded scenario injects (faults, executor exits, operator
//! changes, a framework's teardown, a connection blip) and a canonical hash
//! of the whole cluster's state.
//!
//! The production nodes are not `Clone`, so the checker explores without
//! copying a world: it rebuilds one by replaying a path of choices from the
//! start, which the engine makes deterministic (every draw comes from the
//! seeded generator, every collection is ordered).

use super::{Ev, ExecWhat, Node, World};
use crate::sim::{Fault, Violation};
use regent_core::protocol::{GroupSpec, Message};
use regent_core::{ExecutorId, Millis};
use std::collections::hash_map::DefaultHasher;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};

/// The key of a pending event in the engine's queue (its time and its
/// sequence number), which names it in a path of choices.
pub(crate) type EventKey = (Millis, u64);

/// A pending event as the checker sees it.
#[derive(Clone, Debug)]
pub(crate) struct PendingEvent {
    /// Its key.
    pub(crate) key: EventKey,
    /// A message (or a connection's end) between a master and a worker or a
    /// subscriber that the job layer acts on, or an executor's change: what
    /// the checker may deliver out of time order, and where a step of
    /// "continue" stops. Heartbeats and the control plane's own traffic
    /// (ZooKeeper, masters' watches, timers) are not.
    pub(crate) job: bool,
    /// Its FIFO lane: a connection's direction (frames arrive in order) or
    /// an executor; `None` for events of no lane.
    pub(crate) lane: Option<String>,
    /// What it is, shortly (for traces).
    pub(crate) what: String,
}

impl World {
    /// Executors run until the checker ends them ([`World::exit_executor`])
    /// or they are killed: no random exits.
    pub(crate) fn script_executors(&mut self) {
        self.scripted_execs = true;
    }

    /// Keeps the last `n` trace lines (with tracing on).
    pub(crate) fn keep_trace(&mut self, n: usize) {
        self.trace_len = n;
    }

    /// A group of one core and 256 MiB per slot, named `name`.
    pub(crate) fn plain_group(name: &str, slots: u32) -> GroupSpec {
        GroupSpec { group: name.into(), ..super::spec_for(0, slots) }
    }

    /// The scenario's setup is over now.
    pub(crate) fn mark_settled(&mut self) {
        self.settled_at = self.now;
    }

    /// When the scenario's setup was over.
    pub(crate) fn settled_at(&self) -> Millis {
        self.settled_at
    }

    /// Replaces the groups subscriber `s` declares (before it starts).
    pub(crate) fn set_specs(&mut self, s: usize, specs: Vec<GroupSpec>) {
        self.subs[s].specs = specs;
    }

    /// The events pending, in the queue's order.
    pub(crate) fn pending_events(&self) -> Vec<PendingEvent> {
        self.queue
            .iter()
            .map(|(key, ev)| {
                let (job, lane) = self.classify(ev);
                PendingEvent { key: *key, job, lane, what: short(ev) }
            })
            .collect()
    }

    fn classify(&self, ev: &Ev) -> (bool, Option<String>) {
        let client_of = |conn| self.conns.get(conn).map(|c| c.client);
        let job_client = |conn| matches!(client_of(conn), Some(Node::Worker(_) | Node::Sub(_)));
        match ev {
            Ev::ToMaster { conn, msg } => {
                (job_client(conn) && !is_heartbeat(msg), Some(format!("{conn:?}>m")))
            }
            Ev::ToClient { conn, msg } => {
                (job_client(conn) && !is_heartbeat(msg), Some(format!("{conn:?}>c")))
            }
            Ev::MasterSeesClose { conn } => (job_client(conn), Some(format!("{conn:?}>m"))),
            Ev::ClientSeesClose { conn } => (job_client(conn), Some(format!("{conn:?}>c"))),
            Ev::Exec { w, x, .. } => (true, Some(format!("w{w}:{x}"))),
            // A store write of the job layer's records lands (its lane: the
            // master's ZooKeeper link, which keeps its order).
            Ev::ZkExec { m, op, .. } => (super::writes_state(op), Some(format!("zk{m}"))),
            _ => (false, None),
        }
    }

    /// Fires the pending event `key` now (at its time, or now if that is
    /// later: an event fired ahead of earlier ones arrived sooner), then
    /// checks the invariants. `false` if there is no such event.
    pub(crate) fn fire(&mut self, key: EventKey) -> Result<bool, Violation> {
        let Some(ev) = self.queue.remove(&key) else { return Ok(false) };
        self.now = self.now.max(key.0);
        self.events += 1;
        self.step(ev)?;
        Ok(true)
    }

    /// Fires the earliest pending event. `false` if none is left.
    pub(crate) fn fire_next(&mut self) -> Result<bool, Violation> {
        match self.queue.keys().next().copied() {
            Some(key) => self.fire(key),
            None => Ok(false),
        }
    }

    /// Lets virtual time pass to `t` with nothing happening (no event is
    /// due before it).
    pub(crate) fn advance_to(&mut self, t: Millis) {
        if self.queue.keys().next().is_none_or(|(due, _)| *due >= t) {
            self.now = self.now.max(t);
        }
    }

    /// Logs a line of the checker's into the trace.
    pub(crate) fn note(&mut self, line: impl FnOnce() -> String) {
        self.log(line);
    }

    /// Applies fault `f` now, then checks the invariants.
    pub(crate) fn inject(&mut self, f: Fault) -> Result<(), Violation> {
        self.log(|| format!("FAULT {f:?}"));
        self.apply_fault(f);
        self.check()
    }

    /// Cuts worker `w` off from every master for `ms` (both directions).
    pub(crate) fn isolate_worker(&mut self, w: usize, ms: u32) -> Result<(), Violation> {
        self.log(|| format!("ISOLATE w{w} for {ms} ms"));
        let node = Node::Worker(w);
        for m in 0..self.masters.len() {
            self.block(node, Node::Master(m), ms);
            self.block(Node::Master(m), node, ms);
        }
        self.check()
    }

    /// The executors whose processes run on worker `w`.
    pub(crate) fn running_on(&self, w: usize) -> Vec<ExecutorId> {
        self.running_executors(w).cloned().collect()
    }

    /// Executor `x`'s process on worker `w` exits with `code` now.
    pub(crate) fn exit_executor(
        &mut self,
        w: usize,
        x: &ExecutorId,
        code: i32,
    ) -> Result<(), Violation> {
        self.log(|| format!("EXIT {x} on w{w} with {code}"));
        let gen = self.workers[w].p.gen;
        self.exec_event(w, gen, x.clone(), ExecWhat::Exit(code));
        self.check()
    }

    /// A blip of worker `w`'s connections: each is reset under both ends
    /// (as a NAT or a switch does); the worker process lives and dials
    /// again at once.
    pub(crate) fn blip_worker(&mut self, w: usize) -> Result<(), Violation> {
        self.log(|| format!("BLIP w{w}'s connections"));
        self.blip(w);
        self.check()
    }

    /// Subscriber `s` tears its framework down (`regent kill`), on its
    /// subscription's connection. `false` if it has none.
    pub(crate) fn teardown(&mut self, s: usize) -> Result<bool, Violation> {
        let sent = self.send_teardown(s);
        self.check()?;
        Ok(sent)
    }

    /// Subscriber `s`'s process restarts at once and updates its first
    /// group (`regent run --update`) with `max_parallel`, to a command that
    /// fails at once if `broken`.
    pub(crate) fn restart_with_update(
        &mut self,
        s: usize,
        max_parallel: u32,
        broken: bool,
    ) -> Result<(), Violation> {
        let node = Node::Sub(s);
        self.log(|| {
            format!("UPDATE f{s}'s first group (max_parallel {max_parallel}, broken {broken})")
        });
        self.subs[s].forced_update = Some((max_parallel, broken));
        if self.proc(node).up {
            self.crash(node);
        }
        self.restart(node);
        self.check()
    }

    /// Subscriber `s`'s program kills its first running executor
    /// (`KillExecutor`).
    pub(crate) fn framework_kill(&mut self, s: usize) -> Result<(), Violation> {
        self.apply_fault(Fault::SubKill { s });
        self.check()
    }

    /// An operator's change on subscriber `s`'s connection
    /// ([`Fault::Operate`]).
    pub(crate) fn operator(&mut self, s: usize, w: usize, op: u8, n: u32) -> Result<(), Violation> {
        self.operate(s, w, op, n);
        self.check()
    }

    /// A hash of the cluster's state: virtual time, every process (its
    /// node, its process state), the connections, the executors' processes,
    /// the ZooKeeper model, the blocked links, the pending events (with
    /// their times, without their sequence numbers) and what the invariants
    /// remember. Left out: the random generator (it stands for the
    /// latencies the checker's choices replace), counters and the trace.
    pub(crate) fn state_hash(&self) -> u64 {
        let mut s = String::with_capacity(1 << 16);
        let _ = write!(s, "{:?}", self.now);
        for m in &self.masters {
            let _ = write!(s, "{:?}{:?}{:?}{:?}", m.p, m.node, m.zk, m.store_fail);
        }
        for w in &self.workers {
            let _ = write!(s, "{:?}{:?}{:?}", w.p, w.node, w.left_behind);
        }
        for sub in &self.subs {
            let _ = write!(s, "{:?}{:?}{:?}", sub.p, sub.node, sub.view);
        }
        let _ = write!(s, "{:?}{:?}{:?}{:?}", self.conns, self.execs, self.zk, self.blocked);
        let _ = write!(s, "{:?}{:?}", self.unsent, self.obs);
        for ((t, _), ev) in &self.queue {
            let _ = write!(s, "{t:?}{ev:?}");
        }
        let mut h = DefaultHasher::new();
        s.hash(&mut h);
        h.finish()
    }
}

fn is_heartbeat(msg: &Message) -> bool {
    matches!(
        msg,
        Message::WorkerHeartbeat { .. }
            | Message::HeartbeatAck { .. }
            | Message::FrameworkHeartbeat { .. }
            | Message::FrameworkHeartbeatAck { .. }
    )
}

fn short(ev: &Ev) -> String {
    let mut s = format!("{ev:?}");
    if s.len() > 160 {
        let mut cut = 160;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

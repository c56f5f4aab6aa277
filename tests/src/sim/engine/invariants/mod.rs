//! The invariants, one module per invariant (openraft style). Each module
//! documents what it checks. State-based invariants are checked after every
//! simulator step by [`check_all`]; event-based ones are checked when the
//! event happens (a master sends an acknowledgement, a store write is
//! applied, a worker exits) from the hooks below. [`liveness`] is checked
//! separately, once the faults are over.

pub mod api_jobs;
pub mod capacity_offered;
pub mod check_inflight;
pub mod command_order;
pub mod conflict_exits;
pub mod deploy_down;
pub mod deploy_durable;
pub mod deploy_reverts;
pub mod durable_acks;
pub mod ends_counted;
pub mod epochs;
pub mod executor_exits;
pub mod health_restarts;
pub mod healthy_runs;
pub mod kill_bound;
pub mod kills;
pub mod liveness;
pub mod maintenance;
pub mod named_resources;
pub mod one_executor;
pub mod ports;
pub mod preempted_by;
pub mod preempted_slots;
pub mod preemption_guarantee;
pub mod registry;
pub mod resources;
pub mod service_slots;
pub mod single_leader;
pub mod singleton_slots;
pub mod slot_failures;
pub mod tenant_limits;
pub mod waiting_reasons;

use super::{Node, World};
use crate::sim::{SimConfig, Violation};
use regent_core::master;
use regent_core::protocol::{ExecutorState, Message};
use regent_core::store::{Record, RecordKey};
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis, WorkerId};
use std::collections::{BTreeMap, BTreeSet};

/// What the invariants remember about the run.
#[derive(Debug, Default)]
pub(crate) struct Obs {
    // epochs
    pub(crate) master_epoch: Vec<(u64, Epoch)>,
    pub(crate) worker_epoch: Vec<(u64, Epoch)>,
    pub(crate) sub_epoch: Vec<(u64, Epoch)>,
    pub(crate) leadership: Vec<Option<(u64, Epoch)>>,
    pub(crate) max_leadership: Epoch,
    /// The epoch each master wrote into the store last (the moment its
    /// leadership began, in the store's order).
    pub(crate) landed_epoch: BTreeMap<usize, Epoch>,
    pub(crate) leaderships: u64,
    pub(crate) store_epoch: Epoch,
    // registry
    pub(crate) acked_new: BTreeSet<(usize, u64, WorkerId, Incarnation)>,
    // durable acknowledgements
    pub(crate) acked_workers: BTreeMap<WorkerId, Incarnation>,
    pub(crate) acked_frameworks: BTreeSet<FrameworkId>,
    pub(crate) acked_groups: BTreeSet<(FrameworkId, String)>,
    /// (subscriber, process generation, request id) -> declared group.
    pub(crate) sub_requests: BTreeMap<(usize, u64, u64), String>,
    /// (subscriber, process generation, request id) -> what backs its
    /// acceptance, whether a write of it landed since it was sent, and the
    /// later requests that superseded it (see `durable_acks`).
    pub(crate) backed_requests: BTreeMap<(usize, u64, u64), durable_acks::Pending>,
    // executors
    pub(crate) last_report: BTreeMap<(usize, ExecutorId), ExecutorState>,
    pub(crate) lost: BTreeSet<ExecutorId>,
    pub(crate) removed_frameworks: BTreeSet<FrameworkId>,
    pub(crate) kill_requested: BTreeSet<ExecutorId>,
    /// Executors some master asked a worker to kill or stop.
    pub(crate) kills_sent: BTreeSet<ExecutorId>,
    /// Stops master `m` decided while its acting lease was unconfirmed,
    /// judged by [`deploy_down`] at the step that decided them (held by
    /// the node, they go out later, when other slots may have gone down
    /// on their own: sim seed 57314, docs/design.md#simulator-seeds).
    pub(crate) stops_judged_held: BTreeSet<(usize, ExecutorId)>,
    /// Slots two workers registered with the leader both run, since when
    /// ([`one_executor`]).
    pub(crate) doubled_since: BTreeMap<one_executor::Slot, Millis>,
    /// Workers an operator asked to drain (their executors may be killed
    /// at the deadline).
    pub(crate) drained: BTreeSet<WorkerId>,
    /// Executors in slots an operator asked to scale away (the leader's
    /// executors of the group at slots past the new count when the scale
    /// was sent): their exits are moot even once a later scale-up makes
    /// new slots at the same indexes.
    pub(crate) scaled_away: BTreeSet<ExecutorId>,
    /// Executors a leader holds LAUNCHING, since when: (master, process
    /// generation, executor) -> first seen so ([`liveness`]).
    pub(crate) launching_since: BTreeMap<(usize, u64, ExecutorId), Millis>,
    // command order
    /// The highest epoch any command was sent at: (epoch, when the first
    /// command at it was sent, by which master).
    pub(crate) highest_command: Option<(Epoch, Millis, usize)>,
    // single leader
    /// Election nodes a standby deleted for another session, which the
    /// server still held (depositions), by path.
    pub(crate) deposed_nodes: BTreeSet<String>,
    // the job layer
    /// Kill-bearing requests sent and not yet answered, by (subscriber,
    /// process generation, request id): the sender's framework and what
    /// they kill ([`kill_bound`]).
    pub(crate) kill_intents: BTreeMap<(usize, u64, u64), (Option<FrameworkId>, kill_bound::Intent)>,
    /// Executors whose kill a leader accepted: when, and since when their
    /// worker has been reachable without a break ([`kill_bound`]).
    pub(crate) accepted_kills: BTreeMap<ExecutorId, (Millis, Option<Millis>)>,
    /// The latest scale request sent for each group ([`kill_bound`]).
    pub(crate) latest_scale: BTreeMap<(FrameworkId, String), u64>,
    /// Executors an accepted scale removed by name: no acting leader may
    /// keep one in its slot but to replace it ([`kill_bound`]).
    pub(crate) named_removed: BTreeSet<ExecutorId>,
    /// Executors a scale sent named to go, accepted or not
    /// ([`deploy_down`]: their stops are not the rollout's).
    pub(crate) named_sent: BTreeSet<ExecutorId>,
    /// Cordons, drains (`true`) and uncordons (`false`) sent and not yet
    /// answered, by request id ([`maintenance`]).
    pub(crate) maintenance_requests: BTreeMap<u64, (WorkerId, bool)>,
    /// The last accepted maintenance change of each worker ([`maintenance`]).
    pub(crate) maintained: BTreeMap<WorkerId, (bool, Epoch)>,
    /// Executors a worker reported terminal ([`ends_counted`]).
    pub(crate) ended: BTreeSet<ExecutorId>,
    /// Executors' runs on their workers: since RUNNING, until they ended
    /// (exited or failed) ([`healthy_runs`]).
    pub(crate) ran: BTreeMap<ExecutorId, (Millis, Option<Millis>)>,
    /// Executors a worker started a process for ([`slot_failures`]).
    pub(crate) started: BTreeSet<ExecutorId>,
    /// Waiting slots that fit a free worker, since when
    /// ([`capacity_offered`]).
    pub(crate) fitting_since: BTreeMap<capacity_offered::Waiting, Millis>,
    /// The API client's requests and answers ([`api_jobs`]).
    pub(crate) api: api_jobs::Seen,
    /// Executors a leader stopped by preemption, with their slots
    /// ([`preemption_guarantee`], [`preempted_slots`]).
    pub(crate) preempted: BTreeMap<ExecutorId, preemption_guarantee::Victim>,
    /// The groups (`<framework>/<group>`) a leader preempted for, each
    /// with a waiting slot then ([`preempted_by`]).
    pub(crate) preemptors: BTreeSet<String>,
    /// Singleton executors a worker reported stopped for want of a master
    /// ([`singleton_slots`]; counted in the run's stats).
    pub(crate) cut_off_stops: BTreeSet<ExecutorId>,
    /// The deployments the store held ([`deploy_durable`],
    /// [`deploy_reverts`]).
    pub(crate) deploys: deploy_durable::Seen,
    /// Executors a worker reported stopped by their failing checks
    /// ([`health_restarts`]; counted in the run's stats).
    pub(crate) unhealthy_stops: BTreeSet<ExecutorId>,
}

impl Obs {
    pub(crate) fn init(&mut self, cfg: &SimConfig) {
        self.master_epoch = vec![(0, Epoch::ZERO); cfg.masters];
        self.worker_epoch = vec![(0, Epoch::ZERO); cfg.workers];
        self.sub_epoch = vec![(0, Epoch::ZERO); cfg.subscribers];
        self.leadership = vec![None; cfg.masters];
    }
}

/// A state-based invariant's check.
type Check = fn(&mut World) -> Result<(), String>;

/// The state-based invariants, after every step.
pub(crate) fn check_all(w: &mut World) -> Result<(), Violation> {
    let checks: [(&'static str, Check); 16] = [
        ("single_leader", |w| single_leader::check(w)),
        ("epochs", epochs::check),
        ("registry", |w| registry::check(w)),
        ("resources", |w| resources::check(w)),
        ("ports", |w| ports::check(w)),
        ("named_resources", |w| named_resources::check(w)),
        ("one_executor", one_executor::check),
        ("kill_bound", kill_bound::check),
        ("capacity_offered", capacity_offered::check),
        ("maintenance", |w| maintenance::check(w)),
        ("api_jobs", api_jobs::check),
        ("waiting_reasons", |w| waiting_reasons::check(w)),
        ("tenant_limits", |w| tenant_limits::check(w)),
        ("preempted_slots", |w| preempted_slots::check(w)),
        ("preempted_by", |w| preempted_by::check(w)),
        ("singleton_slots", singleton_slots::check),
    ];
    for (invariant, check) in checks {
        if !w.skips(invariant) {
            check(w).map_err(|detail| Violation { invariant, detail, at: w.now })?;
        }
    }
    Ok(())
}

/// The client at the other end of `conn`, if it is the live process that
/// dialled it.
pub(crate) fn client_of(w: &World, conn: ConnId) -> Option<Node> {
    let c = w.conns.get(&conn)?;
    let p = w.proc(c.client);
    (p.up && p.gen == c.cgen).then_some(c.client)
}

/// What [`after_master_handle`] compares with: the frameworks master `m`
/// knows while it leads, at its epoch (`None` in standby).
pub(crate) type Leading = Option<(Epoch, BTreeSet<FrameworkId>)>;

/// Before master `m`'s node handles an input.
pub(crate) fn before_master_handle(w: &World, m: usize) -> Leading {
    let master = w.masters[m].master();
    (master.status() != master::Status::Standby)
        .then(|| (master.epoch(), master.frameworks().map(|f| f.id.clone()).collect()))
}

/// After master `m`'s node handled an input (before its outputs run).
///
/// A framework the master knew before and not after, while it still leads
/// at the same epoch, was removed by it (teardown or failover timeout: it
/// asked the store to delete the record in the same step, and sends the
/// kills of its executors now).
pub(crate) fn after_master_handle(w: &mut World, m: usize, before: Leading) {
    let master = w.masters[m].master();
    if let Some((epoch, known)) = before {
        if master.status() != master::Status::Standby && master.epoch() == epoch {
            let now: BTreeSet<&FrameworkId> = master.frameworks().map(|f| &f.id).collect();
            let removed: Vec<FrameworkId> =
                known.into_iter().filter(|f| !now.contains(f)).collect();
            w.obs.removed_frameworks.extend(removed);
        }
    }
    let mp = &w.masters[m];
    if mp.master().status() == master::Status::Standby {
        return;
    }
    // A rollout's stop held by the acting lease is judged now, with the
    // slots down as the leader decided it, and not again when it is sent.
    let held: Vec<ExecutorId> = mp
        .node
        .held_commands()
        .filter_map(|(_, msg)| match msg {
            Message::StopExecutorOnWorker { executor, .. } => Some(executor.clone()),
            _ => None,
        })
        .collect();
    for x in held {
        if w.obs.kills_sent.contains(&x) || !w.obs.stops_judged_held.insert((m, x.clone())) {
            continue; // a stop sent again, or judged at an earlier step
        }
        if let Err(detail) = deploy_down::on_stop(w, m, &x) {
            fail(w, "deploy_down", detail);
        }
    }
    let mp = &w.masters[m];
    let gen = mp.p.gen;
    for e in mp.master().executors() {
        if matches!(e.state, ExecutorState::Lost | ExecutorState::Killed) {
            w.obs.lost.insert(e.id.clone());
        }
        if e.state == ExecutorState::Launching {
            w.obs.launching_since.entry((m, gen, e.id.clone())).or_insert(w.now);
        }
    }
    registry::after_master_handle(w, m);
}

/// Master `m` sends `msg` on `conn`.
pub(crate) fn on_master_send(w: &mut World, m: usize, conn: ConnId, msg: &Message) {
    if msg.is_command() {
        if let Err(detail) = command_order::on_command(w, m, msg) {
            fail(w, "command_order", detail);
        }
    }
    // A stop sent again (owed until the executor's end is reported, and
    // re-sent on every registration of its worker) is not a new decision
    // to take a slot down.
    let mut again = false;
    if let Message::KillExecutorOnWorker { executor, .. }
    | Message::StopExecutorOnWorker { executor, .. } = msg
    {
        again = !w.obs.kills_sent.insert(executor.clone());
    }
    if let Message::StopExecutorOnWorker { executor, .. } = msg {
        // A stop held by the acting lease was judged at the step that
        // decided it (`after_master_handle`).
        let judged = w.obs.stops_judged_held.contains(&(m, executor.clone()));
        if !again && !judged {
            if let Err(detail) = deploy_down::on_stop(w, m, executor) {
                fail(w, "deploy_down", detail);
            }
        }
    }
    let Some(client) = client_of(w, conn) else { return };
    if let Node::Sub(s) = client {
        let gen = w.subs[s].p.gen;
        match msg {
            Message::RequestAccepted { request, .. } => {
                kill_bound::on_accepted(w, m, (s, gen, *request));
                maintenance::on_answer(w, m, *request, true);
            }
            Message::RequestRefused { request, .. } => {
                w.obs.kill_intents.remove(&(s, gen, *request));
                maintenance::on_answer(w, m, *request, false);
            }
            _ => {}
        }
    }
    let r = match msg {
        Message::Registered { .. } => registry::on_registered(w, m, client, msg)
            .and_then(|()| durable_acks::on_registered(w, client, msg)),
        Message::Subscribed { .. } | Message::RequestAccepted { .. } => {
            durable_acks::on_sub_ack(w, client, msg)
        }
        Message::ExecutorStatusAck { executor, .. } => {
            executor_exits::on_ack(w, m, client, executor)
        }
        Message::KillExecutorOnWorker { executor, .. } => kills::on_kill(w, m, client, executor),
        _ => Ok(()),
    };
    if let Err((invariant, detail)) = r {
        fail(w, invariant, detail);
    }
}

/// Records a violation found outside [`check_all`] (the first one wins).
pub(crate) fn fail(w: &mut World, invariant: &'static str, detail: String) {
    if w.pending.is_none() && !w.skips(invariant) {
        w.pending = Some(Violation { invariant, detail, at: w.now });
    }
}

/// Worker `i` sends `msg` (reports are remembered).
pub(crate) fn on_worker_send(w: &mut World, i: usize, msg: &Message) {
    match msg {
        Message::ExecutorStatus { report, .. } => {
            if let ExecutorState::Failed { reason } = &report.state {
                if regent_core::launch::is_cut_off(reason) {
                    w.obs.cut_off_stops.insert(report.id.clone());
                }
                if regent_core::launch::is_unhealthy(reason) {
                    w.obs.unhealthy_stops.insert(report.id.clone());
                }
            }
            w.obs.last_report.insert((i, report.id.clone()), report.state.clone());
            ends_counted::on_report(w, &report.id, &report.state);
            health_restarts::on_report(w, i, &report.id, &report.state);
        }
        Message::RegisterWorker(reg) => {
            for r in &reg.executors {
                w.obs.last_report.insert((i, r.id.clone()), r.state.clone());
                ends_counted::on_report(w, &r.id, &r.state);
                health_restarts::on_report(w, i, &r.id, &r.state);
            }
        }
        _ => {}
    }
}

/// Subscriber `s` sends `msg` (requests are remembered).
pub(crate) fn on_sub_send(w: &mut World, s: usize, msg: &Message) {
    kill_bound::on_request(w, s, msg);
    maintenance::on_request(w, msg);
    let gen = w.subs[s].p.gen;
    match msg {
        Message::DeclareGroup { request, spec } => {
            w.obs.sub_requests.insert((s, gen, *request), spec.group.clone());
        }
        Message::KillExecutor { executor, .. } => {
            w.obs.kill_requested.insert(executor.clone());
        }
        Message::Teardown { request } => {
            if let Some(framework) = w.subs[s].sub().status().framework {
                let backing = durable_acks::Backing::Teardown { framework };
                durable_acks::on_request(w, s, gen, *request, backing);
            }
        }
        _ => {}
    }
}

/// Master `m`'s load lists the store's records (`records`: what the store
/// holds at that moment, which the load then reads).
pub(crate) fn on_loaded(w: &mut World, _m: usize, records: &[Record]) {
    if let Err(detail) = durable_acks::on_loaded(w, records) {
        fail(w, "durable_acks", detail);
    }
}

/// A write of master `m` is applied to the store.
pub(crate) fn on_store_write(w: &mut World, m: usize, record: &Record) {
    let r = epochs::on_store_write(w, m, record)
        .map_err(|d| ("epochs", d))
        .and_then(|()| durable_acks::on_store_write(w, record).map_err(|d| ("durable_acks", d)))
        .and_then(|()| {
            service_slots::on_store_write(w, m, record).map_err(|d| ("service_slots", d))
        })
        .and_then(|()| ends_counted::on_store_write(w, m, record).map_err(|d| ("ends_counted", d)))
        .and_then(|()| {
            slot_failures::on_store_write(w, m, record).map_err(|d| ("slot_failures", d))
        })
        .and_then(|()| healthy_runs::on_store_write(w, m, record).map_err(|d| ("healthy_runs", d)))
        .and_then(|()| {
            deploy_reverts::on_store_write(w, m, record).map_err(|d| ("deploy_reverts", d))
        })
        .and_then(|()| {
            deploy_durable::on_store_write(w, m, record).map_err(|d| ("deploy_durable", d))
        });
    if let Err((invariant, detail)) = r {
        fail(w, invariant, detail);
    }
}

/// A delete is applied to the store.
pub(crate) fn on_store_delete(w: &mut World, key: &RecordKey) {
    durable_acks::on_store_delete(w, key);
    deploy_durable::on_store_delete(w, key);
}

/// Worker `i` exits with `reason`.
pub(crate) fn on_worker_exit(w: &mut World, i: usize, reason: &str) {
    if let Err(detail) = conflict_exits::on_worker_exit(w, i, reason) {
        fail(w, "conflict_exits", detail);
    }
}

/// Subscriber `s` exits with `reason`.
pub(crate) fn on_sub_exit(w: &mut World, s: usize, reason: &str) {
    if let Err(detail) = conflict_exits::on_sub_exit(w, s, reason) {
        fail(w, "conflict_exits", detail);
    }
}

/// Worker `i` starts a process for executor `x`.
pub(crate) fn on_executor_start(w: &mut World, _i: usize, x: &ExecutorId) {
    w.obs.started.insert(x.clone());
}

/// Executor `x`'s process on worker `_i` changed to `state` (RUNNING, or
/// ended). RUNNING counts for [`healthy_runs`] only when the worker's
/// process takes it in ([`on_worker_takes_in_running`]).
pub(crate) fn on_executor_changed(w: &mut World, _i: usize, x: &ExecutorId, state: &ExecutorState) {
    if *state != ExecutorState::Running {
        healthy_runs::on_end(w, x, state);
    }
}

/// Worker `_i`'s process takes in, now, that executor `x` is RUNNING: later
/// than the executor became RUNNING when the process was paused then.
pub(crate) fn on_worker_takes_in_running(w: &mut World, _i: usize, x: &ExecutorId) {
    healthy_runs::on_running(w, x);
}

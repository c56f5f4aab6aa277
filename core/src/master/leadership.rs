//! The leadership lifecycle: election, epoch, recovery, suspension.
//!
//! ```text
//! STANDBY --Elected--> (LoadRecords) --Loaded--> (Persist epoch) --Persisted-->
//!   RECOVERING --all recovered workers reported | recovery_timeout--> ALIVE
//! elected, any stage --Suspended--> suspended --Resumed--> not suspended
//! any --Revoked | a failed write or load--> STANDBY (state dropped)
//! ```
//!
//! One state holds all of it (`Leadership`): standby, or elected at a
//! stage (loading, persisting the epoch, recovering, alive) with or
//! without its session in doubt. A suspended master goes on loading and
//! recovering but does not act; it shows SUSPENDED once its epoch is
//! durable (before that it shows STANDBY: it does not lead yet). Callers
//! ask the question they mean: `may_act`, `may_place`,
//! `accepts_heartbeats`, `elected`, ...
//!
//! Tests: core/tests/recovery.rs (the epoch rule, recovery, suspension,
//! revocation), core/tests/master_node.rs (with the elector), the
//! simulator's `single_leader` and `epochs` invariants
//! (tests/tests/sim_seeds.rs).
//!
//! The epoch is `max(last durable epoch + 1, elector floor, wall clock ms)`
//! and is durable before the master sends anything as leader (docs/design.md#epochs-fence-everything),
//! so a restart, a wiped store or a change of recovery mode never brings an
//! epoch below one that workers have already seen.

use super::workers::WorkerState;
use super::{Action, AfterWrite, FrameworkEntry, Leadership, Master, Stage, Timer};
use crate::ids::{Addr, Epoch, WorkerId};
use crate::protocol::Role;
use crate::store::StoreCommand;
use crate::store::{Record, RecordKey};
use crate::time::Millis;

impl Master {
    pub(super) fn on_elected(
        &mut self,
        now: Millis,
        floor: Epoch,
        clock: u64,
        out: &mut Vec<Action>,
    ) {
        if self.elected() {
            return; // a repeated notification
        }
        // The wall clock of this leadership (finished frameworks' times).
        self.wall_base = (clock > 0).then(|| clock.saturating_sub(now.0));
        self.leadership =
            Leadership::Elected { stage: Stage::Loading { floor, clock }, suspended: false };
        self.leadership_writes_after = self.next_write;
        out.push(Action::Store(StoreCommand::LoadRecords));
    }

    pub(super) fn on_loaded(&mut self, records: Vec<Record>, out: &mut Vec<Action>) {
        let Some(&Stage::Loading { floor, clock }) = self.stage() else {
            return;
        };
        let durable = records
            .iter()
            .filter_map(|r| match r {
                Record::Epoch(e) => Some(*e),
                _ => None,
            })
            .max()
            .unwrap_or(Epoch::ZERO);
        let epoch = durable.next().max(floor).max(Epoch(clock));
        // Not yet this master's epoch: nobody may see it before it is durable
        // (a write that fails would leave peers fenced against the leader).
        let write = self.next_write();
        self.advance(Stage::PersistingEpoch { write, epoch, records });
        out.push(Action::Store(StoreCommand::Persist { write, record: Record::Epoch(epoch) }));
    }

    /// Moves an elected master's leadership on to `next`, its session as
    /// it was (a suspended master loads and recovers; it does not act).
    fn advance(&mut self, next: Stage) {
        if let Leadership::Elected { stage, .. } = &mut self.leadership {
            *stage = next;
        }
    }

    /// Handles `Persisted` for the epoch write; `false` if `write` is another.
    pub(super) fn on_epoch_persisted(
        &mut self,
        now: Millis,
        write: crate::store::WriteId,
        out: &mut Vec<Action>,
    ) -> bool {
        let (epoch, records) = match &mut self.leadership {
            Leadership::Elected {
                stage: Stage::PersistingEpoch { write: w, epoch, records },
                ..
            } if *w == write => (*epoch, std::mem::take(records)),
            _ => return false,
        };
        self.epoch = epoch;
        self.advance(Stage::Recovering);
        self.leader = Some(self.self_hint());
        // The history first: a framework record that a history record says
        // was finished is a crash's leftover, not a live framework.
        let mut history = Vec::new();
        let mut frameworks = Vec::new();
        let mut rest = Vec::new();
        // Only the store's revocations hold (none recorded: none).
        self.revocations = Default::default();
        for r in records {
            match r {
                Record::History(h) => history.push(h),
                Record::Framework(f) => frameworks.push(f),
                other => rest.push(other),
            }
        }
        // A singleton group created again under an id the history names
        // may be one a predecessor removed while it ran on, cut off
        // (docs/design.md#issue-45).
        let ended = history.iter().map(|h| h.framework.id.clone()).collect();
        self.singleton_holds.took_over(now, ended);
        let leftovers = self.recover_history(history, &frameworks, out);
        let live = frameworks.into_iter().filter(|f| !leftovers.contains(&f.id));
        for r in rest.into_iter().chain(live.map(Record::Framework)) {
            match r {
                Record::Worker(w) => {
                    let heartbeat = (self.config.heartbeat_interval, self.config.worker_timeout);
                    self.workers.insert_recovered(w, now, heartbeat, self.conns_opened)
                }
                Record::Framework(f) => {
                    let id = f.id.clone();
                    let mut entry = FrameworkEntry::from_record(f);
                    if self.config.unsafe_deployment_afresh_on_takeover {
                        for d in
                            entry.groups.iter_mut().filter_map(|g| g.record.deployment.as_mut())
                        {
                            d.ends.clear();
                            d.healthy.clear();
                        }
                    }
                    self.frameworks.insert(id.clone(), entry);
                    self.resume_waits_of(now, &id);
                    self.hold_singletons_after_takeover(now, &id);
                    self.refresh_slots_of(&id);
                }
                // What the last leader revoked stays revoked.
                Record::Revocations(r) => self.revocations = r,
                Record::Tenant(t) => self.tenants.insert(t),
                Record::Epoch(_) | Record::History(_) => {}
            }
        }
        self.recover_preemptions();
        self.announce(&[Role::Worker], out);
        // Seed 002 (docs/design.md#seed-002): the recorded workers need not know this master's
        // address; it contacts them (those that gave a callback address).
        let workers = self.workers.entries.values().filter_map(|w| w.callback.clone());
        let frameworks = self.frameworks.values().filter_map(|f| f.callback.clone());
        let mut addrs: Vec<Addr> = workers.chain(frameworks).collect();
        addrs.sort();
        addrs.dedup();
        if !addrs.is_empty() {
            out.push(Action::Contact { addrs });
        }
        // The recorded workers heartbeat at the interval their number
        // calls for: they get the window scaled like their timeouts.
        let interval = self.config.heartbeat_interval_for(self.workers.heartbeating());
        self.start_timers(now, now + self.config.scaled(self.config.recovery_timeout, interval));
        self.maybe_finish_recovery(now, out);
        true
    }

    /// Recovery waits on workers only: it ends when none is UNKNOWN.
    pub(super) fn maybe_finish_recovery(&mut self, now: Millis, out: &mut Vec<Action>) {
        if self.recovering() && self.workers.count(WorkerState::Unknown) == 0 {
            self.become_alive(now, out);
        }
    }

    /// RECOVERING → ALIVE: frameworks that have not resubscribed start their
    /// failover clocks now, and placement starts.
    fn become_alive(&mut self, now: Millis, out: &mut Vec<Action>) {
        self.advance(Stage::Alive);
        self.timers.cancel(Timer::Recovery);
        self.start_failover_clocks(now);
        self.place(out);
    }

    pub(super) fn on_recovery_timeout(&mut self, now: Millis, out: &mut Vec<Action>) {
        if !(self.recovering() && self.may_act()) {
            return;
        }
        let silent = self.workers.ids_in(WorkerState::Unknown);
        let recovered = self.workers.recovered_count().max(1);
        let share = silent.len() * 100 / recovered;
        if share > usize::from(self.config.recovery_removal_limit_pct) {
            // Too many at once to be a few dead machines: more likely a
            // partition. Keep them UNKNOWN for an operator to judge.
            self.metrics.unknown_workers = silent.len() as u64;
        } else {
            for id in silent {
                self.mark_dead(&id, now, out);
            }
            self.metrics.unknown_workers = 0;
        }
        self.become_alive(now, out);
    }

    /// The session is in doubt: an elected master (at any stage) is
    /// suspended until `Resumed`; a standby has nothing to suspend.
    pub(super) fn on_suspended(&mut self) {
        if let Leadership::Elected { suspended, .. } = &mut self.leadership {
            *suspended = true;
        }
    }

    pub(super) fn on_resumed(&mut self, now: Millis, out: &mut Vec<Action>) {
        let Leadership::Elected { suspended: suspended @ true, .. } = &mut self.leadership else {
            return;
        };
        *suspended = false;
        // Nobody could reach a suspended leader reliably: every worker gets a
        // fresh `worker_timeout` instead of being declared DEAD for it.
        self.workers.refresh_all(now);
        self.place(out);
    }

    /// Operator removal of a worker that is not ALIVE; `true` if removed.
    /// `then` runs once the removal is durable: the delete of its record
    /// (also when a DEAD worker's delete is already in flight: deletes of
    /// one key apply in order, and a conditional delete of a record already
    /// gone succeeds).
    pub(super) fn remove_worker(
        &mut self,
        id: &WorkerId,
        then: Option<AfterWrite>,
        out: &mut Vec<Action>,
    ) -> bool {
        if !self.may_act() {
            return false;
        }
        let Some(entry) = self.workers.remove_if_not_alive(id) else { return false };
        if entry.state == WorkerState::Unknown {
            self.metrics.unknown_workers = self.metrics.unknown_workers.saturating_sub(1);
        }
        if entry.durable || then.is_some() {
            let write = self.next_write();
            self.after_write.insert(write, then.into_iter().collect());
            out.push(Action::Store(StoreCommand::Unpersist {
                write,
                key: RecordKey::Worker(entry.id),
                incarnation: Some(entry.incarnation),
            }));
        }
        true
    }
}

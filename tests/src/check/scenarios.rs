//! The exhaustive checker's bounded scenarios, each aimed at one of issue
//! 41's scenarios (the number in [`Scenario::targets`]); the actions say
//! what may happen, the checker tries every order of them and of the
//! cluster's own events.

use super::Bound;
use crate::sim::engine::{parse_executor, World};
use crate::sim::{Fault, SimConfig, Violation};
use regent_core::master::WorkerState;
use regent_core::policy::RestartMode;
use regent_core::protocol::{ExecutorState, GroupSpec};
use regent_core::store::RecordKey;
use regent_core::ExecutorId;

/// A running executor, named by its group and slot: the first (by id, so
/// the earliest launched) whose process runs, on the lowest worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// Its group.
    pub group: &'static str,
    /// Its slot.
    pub slot: usize,
}

impl Target {
    /// The worker and the executor, if one runs.
    fn find(&self, w: &World) -> Option<(usize, ExecutorId)> {
        let mut found: Vec<(ExecutorId, usize)> = (0..w.workers.len())
            .flat_map(|i| w.running_on(i).into_iter().map(move |x| (x, i)))
            .filter(|(x, _)| {
                parse_executor(x).is_some_and(|(_, g, s)| g == self.group && s == self.slot)
            })
            .collect();
        found.sort();
        found.into_iter().next().map(|(x, i)| (i, x))
    }
}

/// What an action does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// The worker running `target` is cut off from every master for `ms`.
    Isolate {
        /// Whose worker.
        target: Target,
        /// How long.
        ms: u32,
    },
    /// `target`'s process exits with `code`.
    Exit {
        /// Which executor.
        target: Target,
        /// Its exit status.
        code: i32,
    },
    /// The acting leader's process crashes; it starts again after `ms`.
    CrashLeader {
        /// Down time.
        ms: u32,
    },
    /// The acting leader's process crashes, `after_ms` of virtual time or
    /// more after the scenario's setup; it starts again after `ms`.
    CrashLeaderAfter {
        /// Down time.
        ms: u32,
        /// The earliest time (after the setup) it may happen.
        after_ms: u64,
    },
    /// Once a leader declared some live worker DEAD (the store no longer
    /// holds its record), the acting leader's process crashes; it starts
    /// again after `ms`.
    CrashLeaderOnceDead {
        /// Down time.
        ms: u32,
    },
    /// The connections of the worker running `target` are reset; the
    /// worker lives and dials again.
    Blip {
        /// Whose worker.
        target: Target,
    },
    /// Worker `w`'s connections are reset (what is in flight on them is
    /// lost); the worker lives and dials again.
    BlipWorker {
        /// The worker.
        w: usize,
    },
    /// An operator scales subscriber `s`'s group to `slots`.
    Scale {
        /// Whose framework.
        s: usize,
        /// The new count (1 to 4).
        slots: u32,
    },
    /// An operator kills subscriber `s`'s first running executor
    /// (`regent kill-executor`, with or without refill).
    OperatorKill {
        /// Whose framework.
        s: usize,
        /// Refill its slot.
        refill: bool,
    },
    /// Subscriber `s`'s program kills its first running executor
    /// (`KillExecutor`; the slot is refilled).
    FrameworkKill {
        /// Whose framework.
        s: usize,
    },
    /// The first subscriber whose framework has a running executor tears
    /// it down (`regent kill`).
    Teardown,
    /// Subscriber `s` restarts with an update of its first group (`regent
    /// run --update`, `max_parallel`) whose new command fails at once.
    BrokenUpdate {
        /// Whose framework.
        s: usize,
        /// The rollout's `max_parallel`.
        max_parallel: u32,
    },
    /// An operator cordons the worker running `target`.
    Cordon {
        /// Whose worker.
        target: Target,
    },
}

/// An action a scenario may take once, at any point (after `after`, if
/// set).
#[derive(Clone, Debug)]
pub struct Action {
    /// What it does.
    pub what: What,
    /// Only once this action (by index) was taken.
    pub after: Option<usize>,
}

impl Action {
    fn new(what: What) -> Self {
        Action { what, after: None }
    }

    fn after(what: What, after: usize) -> Self {
        Action { what, after: Some(after) }
    }

    /// It can be taken in `w` now.
    pub(crate) fn applies(&self, w: &World) -> bool {
        match &self.what {
            What::Isolate { target, .. }
            | What::Exit { target, .. }
            | What::Blip { target }
            | What::Cordon { target } => target.find(w).is_some(),
            What::CrashLeader { .. } => w.acting_leader().is_some(),
            What::CrashLeaderAfter { after_ms, .. } => {
                w.acting_leader().is_some() && w.now.0 >= w.settled_at().0 + after_ms
            }
            What::CrashLeaderOnceDead { .. } => {
                w.acting_leader().is_some()
                    && w.workers.iter().any(|wp| {
                        let key = RecordKey::Worker(wp.worker().config().id.clone());
                        wp.p.up && w.stored_at(&key).is_none()
                    })
            }
            What::Teardown => teardown_candidate(w).is_some(),
            What::BlipWorker { w: i } => w.workers[*i].p.up,
            What::Scale { .. }
            | What::OperatorKill { .. }
            | What::FrameworkKill { .. }
            | What::BrokenUpdate { .. } => true,
        }
    }

    pub(crate) fn apply(&self, w: &mut World) -> Result<(), Violation> {
        match &self.what {
            What::Isolate { target, ms } => match target.find(w) {
                Some((i, _)) => w.isolate_worker(i, *ms),
                None => Ok(()),
            },
            What::Exit { target, code } => match target.find(w) {
                Some((i, x)) => w.exit_executor(i, &x, *code),
                None => Ok(()),
            },
            What::CrashLeader { ms }
            | What::CrashLeaderOnceDead { ms }
            | What::CrashLeaderAfter { ms, .. } => {
                w.inject(Fault::CrashMaster { m: 0, leader: true, ms: *ms })
            }
            What::Blip { target } => match target.find(w) {
                Some((i, _)) => w.blip_worker(i),
                None => Ok(()),
            },
            What::BlipWorker { w: i } => w.blip_worker(*i),
            What::Scale { s, slots } => w.operator(*s, 0, 3, slots.saturating_sub(1)),
            What::OperatorKill { s, refill } => w.operator(*s, 0, 4, u32::from(!*refill)),
            What::FrameworkKill { s } => w.framework_kill(*s),
            What::BrokenUpdate { s, max_parallel } => {
                w.restart_with_update(*s, *max_parallel, true)
            }
            What::Teardown => match teardown_candidate(w) {
                Some(s) => w.teardown(s).map(|_| ()),
                None => Ok(()),
            },
            What::Cordon { target } => match target.find(w) {
                Some((i, _)) => w.operator(0, i, 0, 0),
                None => Ok(()),
            },
        }
    }
}

/// The first subscriber whose program sees an executor of its running.
fn teardown_candidate(w: &World) -> Option<usize> {
    (0..w.subs.len()).find(|&s| {
        w.subs[s].p.up && w.subs[s].view.values().any(|st| *st == ExecutorState::Running)
    })
}

/// One bounded scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its name (`regent-check --scenario NAME`).
    pub name: &'static str,
    /// The scenario of issue 41 (docs/design.md#issue-41) it is aimed at (1–8).
    pub targets: u8,
    /// What it does, in a sentence.
    pub about: &'static str,
    /// The cluster (masters, workers, subscribers).
    pub(crate) config: SimConfig,
    /// The seed of the engine's draws (start times, latencies).
    pub(crate) seed: u64,
    /// The groups each subscriber declares.
    pub(crate) specs: fn() -> Vec<Vec<GroupSpec>>,
    /// The setup is over once this holds.
    pub(crate) ready: fn(&World) -> bool,
    /// What may happen.
    pub actions: Vec<Action>,
    /// The bound the test command runs.
    pub small: Bound,
    /// The bound `regent-check` runs by default.
    pub large: Bound,
}

impl Scenario {
    /// Leaves the invariants named out (`regent-check --skip NAME`): to
    /// measure a whole bound while a known bug breaks one.
    pub fn skip(&mut self, invariants: &[String]) {
        self.config.skip.extend(invariants.iter().cloned());
    }
}

fn cluster(masters: usize, workers: usize, subscribers: usize) -> SimConfig {
    SimConfig {
        masters,
        workers,
        subscribers,
        // Faults come from the checker alone: the schedule's heal never
        // comes within a scenario.
        window_ms: 100_000_000,
        ..SimConfig::default()
    }
}

/// Every worker is ALIVE at the acting leader, every subscriber is
/// subscribed and its program sees at least `n` executors running in all.
fn running(w: &World, n: usize) -> bool {
    w.acting_leader().is_some_and(|l| {
        let master = w.masters[l].master();
        master.workers().iter().filter(|e| e.state == WorkerState::Alive).count() == w.workers.len()
    }) && w.subs.iter().all(|s| s.framework.is_some())
        && w.subs
            .iter()
            .flat_map(|s| s.view.values())
            .filter(|st| **st == ExecutorState::Running)
            .count()
            >= n
}

fn bound(depth: usize, tail_ms: u64) -> Bound {
    Bound { depth, horizon_ms: 5, quiet_ms: 3_000, tail_ms, max_states: 100_000 }
}

/// Every scenario.
pub fn all() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "service_late_exit_0",
            targets: 1,
            about: "a service's executor exits 0 while its worker is cut off (declared DEAD, the executor replaced), and the worker comes back",
            config: cluster(2, 2, 1),
            seed: 1,
            specs: || {
                let mut g = World::plain_group("svc", 1);
                g.policy.restart.mode = RestartMode::Service;
                vec![vec![g]]
            },
            ready: |w| running(w, 1),
            actions: vec![
                Action::new(What::Isolate { target: Target { group: "svc", slot: 0 }, ms: 13_000 }),
                Action::after(What::Exit { target: Target { group: "svc", slot: 0 }, code: 0 }, 0),
            ],
            small: bound(3, 20_000),
            large: bound(9, 20_000),
        },
        Scenario {
            name: "kill_during_blip",
            targets: 5,
            about: "a group of two slots is scaled to one, an executor killed by an operator without refill, or by its framework, around a blip of the worker's connections",
            config: cluster(2, 2, 1),
            seed: 2,
            specs: || vec![vec![World::plain_group("g", 2)]],
            ready: |w| running(w, 2),
            actions: vec![
                Action::new(What::Blip { target: Target { group: "g", slot: 1 } }),
                Action::new(What::Scale { s: 0, slots: 1 }),
                Action::new(What::OperatorKill { s: 0, refill: false }),
                Action::new(What::FrameworkKill { s: 0 }),
            ],
            small: bound(3, 10_000),
            large: bound(5, 10_000),
        },
        Scenario {
            name: "teardown_frees_capacity",
            targets: 8,
            about: "one worker of 2 cores, framework A runs two executors and B waits for both cores; A is torn down",
            config: cluster(2, 1, 2),
            seed: 3,
            specs: || vec![vec![World::plain_group("a", 2)], vec![World::plain_group("b", 2)]],
            ready: |w| running(w, 2),
            actions: vec![Action::new(What::Teardown)],
            small: bound(2, 6_000),
            large: bound(8, 6_000),
        },
        Scenario {
            name: "end_reported_to_new_leader",
            targets: 6,
            about: "an executor of a group allowed one retry exits 1; the leader crashes, and the worker's connection drops (losing what is in flight), at any point while the end is recorded and acknowledged",
            config: cluster(2, 2, 1),
            seed: 4,
            specs: || {
                let mut g = World::plain_group("r", 1);
                g.policy.restart.attempts = Some(1);
                vec![vec![g]]
            },
            ready: |w| running(w, 1),
            actions: vec![
                Action::new(What::Exit { target: Target { group: "r", slot: 0 }, code: 1 }),
                Action::after(What::CrashLeader { ms: 500 }, 0),
                Action::after(What::BlipWorker { w: 1 }, 0),
            ],
            small: bound(5, 3_000),
            large: bound(8, 8_000),
        },
        Scenario {
            name: "healthy_run_then_failover",
            targets: 2,
            about: "a slot allowed one retry fails once; its retry runs past healthy_after (5 s); the leader fails over; the retry crashes",
            config: cluster(2, 2, 1),
            seed: 7,
            specs: || {
                let mut g = World::plain_group("h", 1);
                g.policy.restart.attempts = Some(1);
                g.policy.restart.healthy_after_ms = 5_000;
                vec![vec![g]]
            },
            ready: |w| running(w, 1),
            actions: vec![
                Action::new(What::Exit { target: Target { group: "h", slot: 0 }, code: 1 }),
                Action::after(What::CrashLeaderAfter { ms: 500, after_ms: 6_000 }, 0),
                Action::after(What::Exit { target: Target { group: "h", slot: 0 }, code: 1 }, 1),
            ],
            small: Bound { quiet_ms: 6_000, ..bound(8, 4_000) },
            large: Bound { quiet_ms: 6_000, ..bound(13, 4_000) },
        },
        Scenario {
            name: "broken_rollout",
            targets: 4,
            about: "three slots allowed one retry each are updated one at a time (max_parallel 1) to a command that fails at once",
            config: cluster(2, 2, 1),
            seed: 6,
            specs: || {
                let mut g = World::plain_group("u", 3);
                g.policy.restart.attempts = Some(1);
                vec![vec![g]]
            },
            ready: |w| running(w, 3),
            actions: vec![Action::new(What::BrokenUpdate { s: 0, max_parallel: 1 })],
            small: bound(2, 8_000),
            large: bound(6, 8_000),
        },
        Scenario {
            name: "cordon_dead_failover",
            targets: 3,
            about: "a worker is cordoned, cut off until it is DEAD, and the leader fails over before it comes back",
            config: cluster(2, 2, 1),
            seed: 5,
            specs: || vec![vec![World::plain_group("g", 1)]],
            ready: |w| running(w, 1),
            actions: vec![
                Action::new(What::Cordon { target: Target { group: "g", slot: 0 } }),
                Action::after(What::Isolate { target: Target { group: "g", slot: 0 }, ms: 20_000 }, 0),
                Action::after(What::CrashLeaderOnceDead { ms: 1_000 }, 1),
            ],
            small: Bound { quiet_ms: 10_000, ..bound(9, 12_000) },
            large: Bound { quiet_ms: 10_000, ..bound(13, 12_000) },
        },
    ]
}

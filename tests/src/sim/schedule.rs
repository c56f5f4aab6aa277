//! Fault schedules: a list of faults at times, generated from a seed (the
//! soak and the seed suite) or by quickcheck (which can shrink them).
//!
//! Node indices in a [`Fault`] are taken modulo the cluster's sizes when the
//! fault is applied, so any schedule fits any cluster and shrinking never
//! produces an invalid one.

use quickcheck::{Arbitrary, Gen};

/// One fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Cut the network between a worker and a master (`one_way`: only the
    /// worker → master direction) for `ms`.
    PartitionWorker {
        /// The worker.
        w: usize,
        /// The master.
        m: usize,
        /// Only worker → master traffic is lost.
        one_way: bool,
        /// How long.
        ms: u32,
    },
    /// Cut the network between a subscriber and a master for `ms`.
    PartitionSub {
        /// The subscriber.
        s: usize,
        /// The master.
        m: usize,
        /// Only master → subscriber traffic is lost.
        one_way: bool,
        /// How long.
        ms: u32,
    },
    /// Cut a master off from every worker and subscriber (not from
    /// ZooKeeper) for `ms`; `leader` picks the acting leader instead of `m`.
    IsolateMaster {
        /// The master (ignored with `leader`).
        m: usize,
        /// Target the acting leader.
        leader: bool,
        /// How long.
        ms: u32,
    },
    /// Crash a master process; it restarts with fresh machines after `ms`.
    CrashMaster {
        /// The master (ignored with `leader`).
        m: usize,
        /// Target the acting leader.
        leader: bool,
        /// Down time.
        ms: u32,
    },
    /// Crash a worker process; it restarts with a new incarnation after `ms`.
    CrashWorker {
        /// The worker.
        w: usize,
        /// Down time.
        ms: u32,
    },
    /// Crash a subscriber process; it restarts as a new instance after `ms`.
    CrashSub {
        /// The subscriber.
        s: usize,
        /// Down time.
        ms: u32,
    },
    /// Pause a master process for `ms` (longer than a session, often).
    PauseMaster {
        /// The master (ignored with `leader`).
        m: usize,
        /// Target the acting leader.
        leader: bool,
        /// How long.
        ms: u32,
    },
    /// Pause a worker process for `ms`.
    PauseWorker {
        /// The worker.
        w: usize,
        /// How long.
        ms: u32,
    },
    /// Drop a master's ZooKeeper connection for `ms` (the session survives
    /// if `ms` is shorter than its timeout).
    ZkDisconnect {
        /// The master (ignored with `leader`).
        m: usize,
        /// Target the acting leader.
        leader: bool,
        /// How long.
        ms: u32,
    },
    /// A master's ZooKeeper session expires (its connection stays down until
    /// the server has expired it).
    ZkExpire {
        /// The master (ignored with `leader`).
        m: usize,
        /// Target the acting leader.
        leader: bool,
    },
    /// The next ZooKeeper request of a master (`create_only`: the next
    /// create) is applied but its reply is lost (connection loss).
    ZkLoseReply {
        /// The master.
        m: usize,
        /// Only a create.
        create_only: bool,
    },
    /// The next store write of the acting leader fails at the ZooKeeper
    /// level: its connection drops before the write reaches the server, or
    /// (`applied`) right after the server applied it, so the reply is lost.
    /// Either way the leader sees `ConnectionLoss` and must resend.
    StoreFail {
        /// The write was applied before the failure.
        applied: bool,
    },
    /// A subscriber asks to kill one executor of its framework it sees
    /// running.
    SubKill {
        /// The subscriber.
        s: usize,
    },
    /// An operator asks the acting leader to step down (`regent
    /// step-down`).
    StepDown,
    /// A blip of worker `w`'s connections (`regent-soak --jobs`): each is
    /// reset under both ends, what is in flight on them is lost; the
    /// worker process lives and dials again at once (a drop it survives
    /// well within its timeout).
    BlipWorker {
        /// The worker.
        w: usize,
    },
    /// Subscriber `s` tears its framework down (`regent kill`;
    /// `regent-soak --jobs`).
    Teardown {
        /// The subscriber.
        s: usize,
    },
    /// An operator's change to the cluster (docs/design.md#issue-14), sent on subscriber
    /// `s`'s live connection to the leader: `op % 5` is a cordon (0),
    /// uncordon (1) or drain with a deadline of `n` ms (2) of worker `w`, a
    /// scale of a group the subscriber sees to `1 + n % 4` slots (3), or a
    /// kill of an executor it sees running, refilled when `n` is even (4).
    Operate {
        /// The subscriber whose connection carries it.
        s: usize,
        /// The worker (cordon, uncordon, drain).
        w: usize,
        /// Which change.
        op: u8,
        /// Its number (deadline, slots, refill).
        n: u32,
    },
    /// The API client (a local asker of the leader, as the HTTP API is:
    /// `Query::Command`; `regent-soak --api-jobs`) acts: it retries its
    /// unanswered request with the same idempotency key if it has one, else
    /// sends a new one, picked by `op % 6`: a create or an update of job
    /// `api<n % 3>` with a changed count or command (0, 1), the same with
    /// `expect_version` (2), a `DeleteJob` (3), a `JobsRequest` (4), or a
    /// submission under a subscriber's framework id, which must be refused
    /// (5).
    ApiJob {
        /// Which request.
        op: u8,
        /// Its number (job, count, command).
        n: u32,
    },
    /// A false positive of the fast-takeover detector: master `m`'s
    /// listener refuses for `ms` although its process lives on (a firewall
    /// rule that rejects, a listener closed and opened again). The
    /// connections other masters hold to it (their watches on the leader)
    /// are reset under both ends, so a watching standby sees them end by the
    /// peer; its probes and every dial of `m` are refused while it lasts.
    /// A watching standby then deposes a live leader.
    ListenerRefuses {
        /// The master (ignored with `leader`).
        m: usize,
        /// Target the acting leader.
        leader: bool,
        /// How long the listener refuses.
        ms: u32,
    },
    /// The recovery store is slow (docs/design.md#issue-20, docs/design.md#progress-when-dependencies-are-slow): for `ms`
    /// (0: from then on, healed never, so the cluster must settle with it),
    /// every store write any master issues lands `delay` ms late (at least
    /// 10 s: slower than every client timer that restarts work), in order.
    /// The writes have a lane of their own, so the masters' coordination
    /// requests (syncs, pings, the election) are not held up behind them,
    /// as with a slow disk under a filesystem store.
    SlowStore {
        /// How long the store stays slow.
        ms: u32,
        /// How late each write lands.
        delay: u32,
    },
    /// A host's wall clock steps by an hour (NTP after a reboot, a restored
    /// VM), forward or back. A running process does not see it (its clock
    /// terms are its start's wall clock plus monotonic time, as the
    /// runtimes compute them); the next process started on the host reads
    /// the stepped clock: a master's epoch clock term, a worker's
    /// incarnation and a subscriber's instance id (time-ordered ids, as
    /// `regent_std::net::time_ordered_id` makes them). Only with
    /// `SimConfig::clock_steps`, which gives every process wall-clock ids.
    ClockStep {
        /// Which kind of host: `host % 3` is a master (0), a worker (1) or a
        /// subscriber (2).
        host: u8,
        /// Which one (modulo their number).
        i: usize,
        /// An hour forward, or back.
        forward: bool,
    },
    /// A host is suspended for `ms` (a laptop lid, a VM paused by its
    /// hypervisor): its processes are paused, its kernel answers nothing
    /// (probes and dials of a suspended master time out, as across a
    /// partition), its executors sleep too. The runtime's clock counts the
    /// sleep (CLOCK_BOOTTIME): on waking the node sees the time jump;
    /// with `Knobs::monotonic_clock` its clock stops instead and lags by the
    /// sleep from then on (the bug docs/design.md#identity-and-time-do-not-trust-the-wall-clock closes).
    Suspend {
        /// Which kind of host: `host % 3` is a master (0), a worker (1) or a
        /// subscriber (2).
        host: u8,
        /// Which one (modulo their number; ignored for a master with
        /// `leader`).
        i: usize,
        /// For a master: the acting leader.
        leader: bool,
        /// How long it sleeps.
        ms: u32,
    },
    /// A master's ZooKeeper is far away (docs/design.md#issue-20 scenario 7): for `ms`
    /// (0: from then on, never healed, even across restarts of the master)
    /// every request and every reply and watch notification on its link
    /// takes `one_way` ms more, each way (a round trip of `2 * one_way`,
    /// above the acting lease).
    ZkLatency {
        /// The master (ignored with `leader`).
        m: usize,
        /// Target the acting leader.
        leader: bool,
        /// How long the link stays slow.
        ms: u32,
        /// Extra latency each way.
        one_way: u32,
    },
}

/// A fault schedule: faults at times (ms from the start), plus how unreliable
/// the network is while faults are on (drops, duplicates, reorders, latency
/// spikes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Network chaos level, 0 (none) to 3.
    pub chaos: u8,
    /// Faults, by time.
    pub faults: Vec<(u32, Fault)>,
}

impl Schedule {
    /// No faults at all.
    pub fn calm() -> Self {
        Schedule { chaos: 0, faults: Vec::new() }
    }

    /// The schedule a seed stands for: `n` faults within `window` ms.
    pub fn from_seed(seed: u64, window: u32, n: usize) -> Self {
        Self::from_seed_with(seed, window, n, false)
    }

    /// As [`Schedule::from_seed`]; with `takeovers`, one to three operator
    /// step-downs of the acting leader ([`Fault::StepDown`]), drawn from a
    /// stream of their own so the rest of the seed's schedule stays what it
    /// was.
    ///
    /// Every schedule may also hold detector false positives
    /// ([`Fault::ListenerRefuses`]), in about half of the seeds. Each one
    /// has a one-in-three chance of a pause of the acting leader right after
    /// it, half of those with a subscriber's kill request just before the
    /// pause: the deposed leader is then frozen while its successor is
    /// elected, and wakes with a command to send — the case the acting lease
    /// is for. They too come from a stream of their own, so the other
    /// faults of a seed are the ones it had before they existed.
    pub fn from_seed_with(seed: u64, window: u32, n: usize, takeovers: bool) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed_fa17);
        let chaos = rng.u8(0..=3);
        let mut faults: Vec<(u32, Fault)> =
            (0..n).map(|_| (rng.u32(0..window.max(1)), random_fault(&mut rng))).collect();
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x0fa1_5e90);
        if rng.bool() {
            for _ in 0..rng.usize(1..=2) {
                let t = rng.u32(0..window.max(1));
                faults.push((t, false_positive(&mut rng)));
                if rng.u8(0..3) == 0 {
                    // The leader freezes before the standbys' probes end...
                    let p = t + rng.u32(0..50);
                    let pause = Fault::PauseMaster { m: 0, leader: true, ms: rng.u32(200..1_500) };
                    faults.push((p, pause));
                    if rng.bool() {
                        // ...with a subscriber's kill in flight: its write
                        // lands, and the leader learns it (and would send
                        // the kill) only when it wakes, deposed.
                        let kill = Fault::SubKill { s: rng.usize(0..8) };
                        faults.push((p.saturating_sub(rng.u32(0..6)), kill));
                    }
                }
            }
        }
        if takeovers {
            let mut rng = fastrand::Rng::with_seed(seed ^ 0x7a6e_0fe5);
            for _ in 0..rng.usize(1..=3) {
                faults.push((rng.u32(0..window.max(1)), Fault::StepDown));
            }
        }
        faults.sort_by_key(|(t, _)| *t);
        Schedule { chaos, faults }
    }

    /// This schedule with two to six operator changes added
    /// ([`Fault::Operate`]: cordons, drains, scaling, single kills), drawn
    /// from a stream of their own.
    pub fn with_operator_commands(mut self, seed: u64, window: u32) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x0be2_a7e5);
        for _ in 0..rng.usize(2..=6) {
            let op = Fault::Operate {
                s: rng.usize(0..8),
                w: rng.usize(0..8),
                op: rng.u8(0..5),
                n: rng.u32(0..4_000),
            };
            self.faults.push((rng.u32(0..window.max(1)), op));
        }
        self.faults.sort_by_key(|(t, _)| *t);
        self
    }

    /// This schedule with eight to twenty of the API client's requests
    /// added ([`Fault::ApiJob`], `regent-soak --api-jobs`), from a stream of
    /// their own.
    pub fn with_api_jobs(mut self, seed: u64, window: u32) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x0a91_0b5e);
        for _ in 0..rng.usize(8..=20) {
            let op = Fault::ApiJob { op: rng.u8(0..6), n: rng.u32(0..1_000) };
            self.faults.push((rng.u32(0..window.max(1)), op));
        }
        self.faults.sort_by_key(|(t, _)| *t);
        self
    }

    /// This schedule with the job layer's faults added (docs/design.md#issue-41,
    /// `regent-soak --jobs`), from a stream of their own: two to five
    /// blips of a worker's connections ([`Fault::BlipWorker`]), each
    /// followed within 20 ms, two times in three, by an operator's scale or
    /// kill-executor or a framework's kill (so the kill meets the
    /// reconnection), and in one seed in four a framework's teardown
    /// ([`Fault::Teardown`]).
    pub fn with_job_faults(mut self, seed: u64, window: u32) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x6a0b_5fa1);
        for _ in 0..rng.usize(2..=5) {
            let t = rng.u32(0..window.max(1));
            self.faults.push((t, Fault::BlipWorker { w: rng.usize(0..8) }));
            let s = rng.usize(0..8);
            let after = t + rng.u32(0..20);
            match rng.u8(0..3) {
                0 => {
                    let op = Fault::Operate { s, w: 0, op: 3, n: rng.u32(0..4) };
                    self.faults.push((after, op));
                }
                1 => {
                    let op = Fault::Operate { s, w: 0, op: 4, n: rng.u32(0..2) };
                    self.faults.push((after, op));
                }
                _ => self.faults.push((after, Fault::SubKill { s })),
            }
        }
        if rng.u8(0..4) == 0 {
            self.faults.push((rng.u32(0..window.max(1)), Fault::Teardown { s: rng.usize(0..8) }));
        }
        self.faults.sort_by_key(|(t, _)| *t);
        self
    }

    /// This schedule with slow dependencies added (docs/design.md#issue-20), each from a
    /// stream of its own so the seed's other faults stay as they were:
    /// with `slow_store`, one or two windows of 5–30 s in which store
    /// writes land 10–15 s late ([`Fault::SlowStore`]), a third of them
    /// lasting to the end of the run (liveness must then hold with it); with `zk_latency`,
    /// one or two windows of 5–20 s in which a master's ZooKeeper link
    /// (the acting leader's, two times in three) has 75–500 ms more
    /// latency each way, a round trip of 150 ms to 1 s ([`Fault::ZkLatency`]),
    /// a third of each lasting to the end of the run.
    pub fn with_slow_dependencies(
        mut self,
        seed: u64,
        window: u32,
        slow_store: bool,
        zk_latency: bool,
    ) -> Self {
        if slow_store {
            let mut rng = fastrand::Rng::with_seed(seed ^ 0x5105_0e5d);
            for _ in 0..rng.usize(1..=2) {
                // A slow store for good one time in three: progress with it.
                let ms = if rng.u8(0..3) == 0 { 0 } else { rng.u32(5_000..30_000) };
                let f = Fault::SlowStore { ms, delay: rng.u32(10_000..=15_000) };
                self.faults.push((rng.u32(0..window.max(1)), f));
            }
        }
        if zk_latency {
            let mut rng = fastrand::Rng::with_seed(seed ^ 0x2c1a_7e9c);
            for _ in 0..rng.usize(1..=2) {
                // For good one time in three: commands must flow with it.
                let ms = if rng.u8(0..3) == 0 { 0 } else { rng.u32(5_000..20_000) };
                let f = Fault::ZkLatency {
                    m: rng.usize(0..8),
                    leader: rng.u8(0..3) > 0,
                    ms,
                    one_way: rng.u32(75..=500),
                };
                self.faults.push((rng.u32(0..window.max(1)), f));
            }
        }
        self.faults.sort_by_key(|(t, _)| *t);
        self
    }

    /// This schedule with one to three wall-clock steps of an hour
    /// ([`Fault::ClockStep`]), back two times in three, each followed two
    /// times in three by a crash of a process on that host 0–2 s later
    /// (down 0.1–3 s), so a new process starts with the stepped clock; from
    /// a stream of their own.
    pub fn with_clock_steps(mut self, seed: u64, window: u32) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0xc10c_57e9);
        for _ in 0..rng.usize(1..=3) {
            let (host, i, t) = (rng.u8(0..3), rng.usize(0..8), rng.u32(0..window.max(1)));
            let forward = rng.u8(0..3) == 0;
            self.faults.push((t, Fault::ClockStep { host, i, forward }));
            if rng.u8(0..3) > 0 {
                let ms = rng.u32(100..3_000);
                let crash = match host % 3 {
                    0 => Fault::CrashMaster { m: i, leader: false, ms },
                    1 => Fault::CrashWorker { w: i, ms },
                    _ => Fault::CrashSub { s: i, ms },
                };
                self.faults.push((t + rng.u32(0..2_000), crash));
            }
        }
        self.faults.sort_by_key(|(t, _)| *t);
        self
    }

    /// This schedule with one or two host suspends of 0.5–10 s
    /// ([`Fault::Suspend`]): of a master half the time (the acting leader
    /// two times in three), else of a worker or a subscriber; from a stream
    /// of their own.
    pub fn with_suspends(mut self, seed: u64, window: u32) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x5_1ee9);
        for _ in 0..rng.usize(1..=2) {
            let host = match rng.u8(0..10) {
                0..=4 => 0,
                5..=7 => 1,
                _ => 2,
            };
            let f = Fault::Suspend {
                host,
                i: rng.usize(0..8),
                leader: rng.u8(0..3) > 0,
                ms: rng.u32(500..10_000),
            };
            self.faults.push((rng.u32(0..window.max(1)), f));
        }
        self.faults.sort_by_key(|(t, _)| *t);
        self
    }

    /// This schedule with workers cut off from every master (`regent-soak
    /// --singletons`), from a stream of their own: two to four times a
    /// worker's traffic to and from each master is held for 3 to 25 s
    /// ([`Fault::PartitionWorker`] for every master at once), so its
    /// process and executors run on without a word from any master, as
    /// behind a switch that drops packets (the worker stops its singletons;
    /// the leader declares it DEAD and places them again elsewhere).
    pub fn with_cut_offs(mut self, seed: u64, window: u32) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x0c07_0ff5);
        for _ in 0..rng.usize(2..=4) {
            let (t, w, ms) = (rng.u32(0..window.max(1)), rng.usize(0..8), rng.u32(3_000..25_000));
            for m in 0..3 {
                self.faults.push((t, Fault::PartitionWorker { w, m, one_way: false, ms }));
            }
        }
        self.faults.sort_by_key(|(t, _)| *t);
        self
    }

    /// The last moment a fault of this schedule is still in effect (start
    /// plus the longest duration it names).
    pub fn end(&self) -> u32 {
        self.faults.iter().map(|(t, f)| t + f.duration()).max().unwrap_or(0)
    }
}

impl Fault {
    /// How long the fault lasts (0 for instantaneous ones).
    pub fn duration(&self) -> u32 {
        match self {
            Fault::PartitionWorker { ms, .. }
            | Fault::PartitionSub { ms, .. }
            | Fault::IsolateMaster { ms, .. }
            | Fault::CrashMaster { ms, .. }
            | Fault::CrashWorker { ms, .. }
            | Fault::CrashSub { ms, .. }
            | Fault::PauseMaster { ms, .. }
            | Fault::PauseWorker { ms, .. }
            | Fault::ZkDisconnect { ms, .. }
            | Fault::ListenerRefuses { ms, .. }
            | Fault::ZkLatency { ms, .. }
            | Fault::Suspend { ms, .. } => *ms,
            // (`ms: 0` for good: never healed, holds no heal back.)
            // Its last write lands `delay` after the window; one for good
            // is never healed, so it does not hold the heal back.
            Fault::SlowStore { ms: 0, .. } => 0,
            Fault::SlowStore { ms, delay } => ms + delay,
            Fault::ZkExpire { .. } => 6_000,
            Fault::ZkLoseReply { .. }
            | Fault::StoreFail { .. }
            | Fault::SubKill { .. }
            | Fault::StepDown
            | Fault::ClockStep { .. }
            | Fault::BlipWorker { .. }
            | Fault::Teardown { .. }
            | Fault::Operate { .. }
            | Fault::ApiJob { .. } => 0,
        }
    }

    fn shorter(&self) -> Option<Fault> {
        let mut f = self.clone();
        match &mut f {
            Fault::PartitionWorker { ms, .. }
            | Fault::PartitionSub { ms, .. }
            | Fault::IsolateMaster { ms, .. }
            | Fault::CrashMaster { ms, .. }
            | Fault::CrashWorker { ms, .. }
            | Fault::CrashSub { ms, .. }
            | Fault::PauseMaster { ms, .. }
            | Fault::PauseWorker { ms, .. }
            | Fault::ZkDisconnect { ms, .. }
            | Fault::SlowStore { ms, .. }
            | Fault::ZkLatency { ms, .. }
            | Fault::Suspend { ms, .. }
                if *ms > 200 =>
            {
                *ms /= 2;
                Some(f)
            }
            // Halved no further than 100 ms: shorter than the detector's
            // span (50 ms) it would depose nobody.
            Fault::ListenerRefuses { ms, .. } if *ms > 200 => {
                *ms /= 2;
                Some(f)
            }
            _ => None,
        }
    }
}

fn random_fault(rng: &mut fastrand::Rng) -> Fault {
    let i = rng.usize(0..8);
    let j = rng.usize(0..8);
    let leader = rng.u8(0..3) > 0;
    match rng.u8(0..100) {
        0..=11 => {
            Fault::PartitionWorker { w: i, m: j, one_way: rng.bool(), ms: rng.u32(500..15_000) }
        }
        12..=17 => {
            Fault::PartitionSub { s: i, m: j, one_way: rng.bool(), ms: rng.u32(500..15_000) }
        }
        18..=25 => Fault::IsolateMaster { m: i, leader, ms: rng.u32(500..15_000) },
        26..=35 => Fault::CrashMaster { m: i, leader, ms: rng.u32(100..8_000) },
        36..=43 => Fault::CrashWorker { w: i, ms: rng.u32(100..8_000) },
        44..=48 => Fault::CrashSub { s: i, ms: rng.u32(100..8_000) },
        49..=58 => Fault::PauseMaster { m: i, leader, ms: rng.u32(500..6_000) },
        59..=63 => Fault::PauseWorker { w: i, ms: rng.u32(500..15_000) },
        64..=71 => Fault::ZkDisconnect { m: i, leader, ms: rng.u32(100..4_000) },
        72..=78 => Fault::ZkExpire { m: i, leader },
        79..=85 => Fault::ZkLoseReply { m: i, create_only: rng.bool() },
        86..=91 => Fault::StoreFail { applied: rng.bool() },
        _ => Fault::SubKill { s: i },
    }
}

/// A detector false positive ([`Fault::ListenerRefuses`]), of the acting
/// leader two times in three: long enough, mostly, for a standby's probes
/// to depose it.
fn false_positive(rng: &mut fastrand::Rng) -> Fault {
    let m = rng.usize(0..8);
    let leader = rng.u8(0..3) > 0;
    Fault::ListenerRefuses { m, leader, ms: rng.u32(30..2_000) }
}

impl Arbitrary for Fault {
    fn arbitrary(g: &mut Gen) -> Self {
        let mut rng = fastrand::Rng::with_seed(u64::arbitrary(g));
        if rng.u8(0..100) < 8 {
            false_positive(&mut rng)
        } else {
            random_fault(&mut rng)
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        Box::new(self.shorter().into_iter())
    }
}

impl Arbitrary for Schedule {
    fn arbitrary(g: &mut Gen) -> Self {
        let n = usize::arbitrary(g) % 12;
        let mut faults: Vec<(u32, Fault)> =
            (0..n).map(|_| (u32::arbitrary(g) % 20_000, Fault::arbitrary(g))).collect();
        faults.sort_by_key(|(t, _)| *t);
        Schedule { chaos: u8::arbitrary(g) % 4, faults }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Self>> {
        let me = self.clone();
        let calmer = (self.chaos > 0).then(|| Schedule { chaos: 0, ..self.clone() });
        let me2 = self.clone();
        let fewer = (0..self.faults.len()).rev().map(move |i| {
            let mut s = me.clone();
            s.faults.remove(i);
            s
        });
        let shorter = (0..self.faults.len()).filter_map(move |i| {
            let f = me2.faults[i].1.shorter()?;
            let mut s = me2.clone();
            s.faults[i].1 = f;
            Some(s)
        });
        Box::new(calmer.into_iter().chain(fewer).chain(shorter))
    }
}

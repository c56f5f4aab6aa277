//! The deterministic whole-cluster simulator (regent issue 6 (docs/design.md#issue-6)).
//!
//! N masters (each a [`MasterNode`](regent_core::node::MasterNode) in
//! ZooKeeper mode: the master, its elector, its lease and its recovery store
//! composed in core, exactly as the runtimes drive it), M workers and K
//! subscribers run against the pure ZooKeeper model
//! ([`ZkModel`](regent_core::testkit::zk::ZkModel)), with a virtual clock
//! and a seeded network. The recovery store is the model itself: the
//! records are its nodes under `/regent/sim/state/`, each written by a
//! leader's fenced multi on its own session. Faults come from a
//! [`Schedule`]: partitions (symmetric and one-way), process crashes and
//! restarts, pauses longer than a session, ZooKeeper connection loss (also
//! "request applied, reply lost") and session expiry, store write failures
//! (the connection drops before a store write lands, or right after it
//! landed), false positives of the fast-takeover detector (a live leader's
//! listener refuses, so a standby deposes it); while faults are on, the
//! network also drops, duplicates, reorders and delays messages. A master
//! that dies ends its connections *by the peer* and its address refuses
//! probes until it restarts, so standbys take over from a dead leader
//! without waiting for its session to expire.
//!
//! Every invariant in [`invariants`] is checked after every step. Once the
//! schedule's faults are over everything is healed and liveness is checked:
//! within a bounded simulated time one leader is ALIVE and every live worker
//! and subscriber is attached to it.
//!
//! The same seed replays the same run exactly: every collection iterated is
//! ordered, every random draw comes from one `fastrand` generator seeded by
//! the seed, and time is virtual.

pub(crate) mod engine;
pub use engine::invariants;
pub mod schedule;

pub use schedule::{Fault, Schedule};

use regent_core::Millis;

/// Test-only knobs that remove a protection, for the can-fail tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Knobs {
    /// `worker::Config::unsafe_no_epoch_fencing`.
    pub no_epoch_fencing: bool,
    /// `elector::Config::unsafe_no_adopt_after_connection_loss`.
    pub no_adopt_after_connection_loss: bool,
    /// `elector::Config::unsafe_no_lease_check`.
    pub no_lease_check: bool,
    /// `elector::Config::unsafe_no_acting_lease`.
    pub no_acting_lease: bool,
    /// The runtimes' clock stops while the host is suspended
    /// (CLOCK_MONOTONIC, as `Instant` is on Linux) instead of counting the
    /// suspend (CLOCK_BOOTTIME, docs/design.md#identity-and-time-do-not-trust-the-wall-clock): after a [`Fault::Suspend`]
    /// the node's clock lags by the sleep.
    pub monotonic_clock: bool,
    /// With `preemption`: the API client sets its tenants without their
    /// guarantees, so the leader preempts as one that ignored them would;
    /// the `preemption_guarantee` invariant judges by the guarantees the
    /// operator meant (`regent-soak --hide-guarantees`).
    pub hidden_guarantees: bool,
    /// `master::Config::unsafe_no_refill_after_stop`: a stopped executor's
    /// slot is settled, not refilled (`regent-soak --no-refill-after-stop`).
    pub no_refill_after_stop: bool,
    /// `worker::Config::unsafe_overlapping_checks`: a check's run starts
    /// while one is in flight (`regent-soak --overlapping-checks`).
    pub overlapping_checks: bool,
    /// `worker::Config::unsafe_skipped_checks_fail`: a run the backstop
    /// skipped counts as a failure (`regent-soak --skipped-checks-fail`).
    pub skipped_checks_fail: bool,
    /// `worker::Config::unsafe_manual_ttl_kept`: a manual check's report
    /// does not put off its TTL (`regent-soak --manual-ttl-kept`).
    pub manual_ttl_kept: bool,
    /// `master::Config::unsafe_deploy_uncharged_baking`: a baking slot is
    /// not charged to `max_parallel` (`regent-soak --uncharged-baking`).
    pub deploy_uncharged_baking: bool,
    /// `master::Config::unsafe_no_auto_revert`: a failed deployment never
    /// reverts (`regent-soak --no-auto-revert`).
    pub no_auto_revert: bool,
    /// `master::Config::unsafe_deployment_afresh_on_takeover`: a new leader
    /// forgets a deployment's counts (`regent-soak --deployment-afresh`).
    pub deployment_afresh_on_takeover: bool,
    /// The simulated executor shims do not watch their singletons' leases
    /// (docs/design.md#issue-45): only a running worker process stops a
    /// cut-off singleton, as before the shim had a lease
    /// (`regent-soak --no-shim`).
    pub no_shim: bool,
}

/// How big a run is.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Masters.
    pub masters: usize,
    /// Workers.
    pub workers: usize,
    /// Subscribers (each declares one executor group).
    pub subscribers: usize,
    /// Faults start within this window (ms of virtual time).
    pub window_ms: u32,
    /// How many faults a seed's schedule has.
    pub faults: usize,
    /// After the faults end and everything is healed, the cluster must
    /// settle within this time (ms).
    pub liveness_bound_ms: u32,
    /// Protections removed.
    pub knobs: Knobs,
    /// The network may also duplicate and reorder messages *within* a
    /// connection (which TCP never does). Off by default: with it, a lost
    /// message is silently dropped; without it, a lost message breaks its
    /// connection, as a TCP segment that is never retransmitted does.
    pub datagram: bool,
    /// Leadership is also given up on purpose: operator step-downs of the
    /// acting leader (see [`Schedule::from_seed_with`]). Off by default, so the regression
    /// seeds keep their schedules; the soak turns it on with `--takeovers`.
    pub takeovers: bool,
    /// Operators also cordon, drain and uncordon workers, scale groups and
    /// kill single executors ([`Schedule::with_operator_commands`]). Off by
    /// default, so the regression seeds keep their schedules.
    pub operator: bool,
    /// The job layer's faults too (docs/design.md#issue-41, `regent-soak --jobs`): blips
    /// of workers' connections met by operator kills and scales and
    /// framework kills ([`Schedule::with_job_faults`]), framework
    /// teardowns, and broken rolling updates (a third of the updates' new
    /// commands fail at once). Off by default, so the regression seeds keep
    /// their schedules.
    pub jobs: bool,
    /// An API client also submits, updates, deletes and lists jobs the
    /// leader owns, as a local asker (`Query::Command`, as the HTTP API
    /// does; [`Schedule::with_api_jobs`], `regent-soak --api-jobs`),
    /// checked by the `api_jobs` invariant. Off by default, so the
    /// regression seeds keep their schedules.
    pub api_jobs: bool,
    /// With `api_jobs`: the API client first sets two tenants with core
    /// limits (docs/tenants.md), and its jobs belong to them
    /// (`regent-soak --tenants`), checked by the `tenant_limits`
    /// invariant. Off by default, so the regression seeds keep their
    /// schedules.
    pub tenants: bool,
    /// With `api_jobs`: the API client first sets two tenants with
    /// guarantees, weights and a limit, and its jobs (of more slots) belong
    /// to them, so they overfill the cluster beside the subscribers'
    /// frameworks and the leader preempts (`regent-soak --preemption`;
    /// docs/tenants.md), checked by the `preemption_guarantee` and
    /// `preempted_slots` invariants beside `tenant_limits` and
    /// `waiting_reasons`. Off by default, so the regression seeds keep
    /// their schedules; takes the place of `tenants`.
    pub preemption: bool,
    /// Invariants not checked, by name (`regent-soak --skip NAME`): to soak
    /// the other properties while a known bug breaks one. Empty by default.
    pub skip: Vec<String>,
    /// Store writes are sometimes slower than every client timer
    /// ([`Fault::SlowStore`], `regent-soak --slow-store`). Off by default.
    pub slow_store: bool,
    /// A master's ZooKeeper link sometimes has a round trip above the
    /// acting lease ([`Fault::ZkLatency`], `regent-soak --zk-latency`). Off
    /// by default.
    pub zk_latency: bool,
    /// The ZooKeeper model's packet limit (`jute.maxbuffer`), in bytes:
    /// ZooKeeper's 1 MiB by default (`regent-soak --zk-packet-limit BYTES`
    /// lowers it, so a small simulated cluster's listings and loads reach
    /// it).
    pub zk_packet_limit: usize,
    /// Hosts' wall clocks step by an hour ([`Fault::ClockStep`],
    /// `regent-soak --clock-steps`); every process then takes its ids and
    /// clock terms from its host's wall clock as the runtimes do (else they
    /// are sequential and masters leave the clock term out). Off by default.
    pub clock_steps: bool,
    /// With `clock_steps`: every process takes its ids from its host's
    /// clock alone, as if its work or state directory (which keeps the last
    /// id: `host::next_ordered_id`) were lost at each restart
    /// (`regent-soak --lost-id-state`). Off by default: ids follow the
    /// durable series, max(clock, last + 1), as the runtimes draw them.
    pub lost_id_state: bool,
    /// Hosts are sometimes suspended ([`Fault::Suspend`], `regent-soak
    /// --suspend`). Off by default.
    pub suspend: bool,
    /// Some groups are singletons (`disconnect = { stop_after }`,
    /// docs/design.md#issue-45): three in four of the subscribers' first
    /// groups (whose executors run four times as long) and, with
    /// `api_jobs`, job `api1`; and workers are cut off
    /// from every master for a while ([`Schedule::with_cut_offs`]), checked
    /// by the `singleton_slots` invariant (`regent-soak --singletons`). Off
    /// by default, so the regression seeds keep their schedules.
    pub singletons: bool,
    /// Services (docs/design.md#issue-45 item 5): the subscribers' first
    /// groups (and, with `api_jobs`, the API's jobs) are services with a
    /// health check and an update policy; the simulated check runner
    /// answers each executor's checks by a fault plan (healthy, always
    /// failing, flapping, slower than the interval or the backstop), and a
    /// third of the updates crash at start and a third run unhealthy
    /// (`regent-soak --services`; docs/simulator.md#services), checked by
    /// `check_inflight`, `health_restarts`, `deploy_down`,
    /// `deploy_durable` and `deploy_reverts`. Off by default, so the
    /// regression seeds keep their schedules.
    pub services: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            masters: 3,
            workers: 3,
            subscribers: 2,
            window_ms: 40_000,
            faults: 14,
            liveness_bound_ms: 90_000,
            knobs: Knobs::default(),
            datagram: false,
            takeovers: false,
            operator: false,
            jobs: false,
            api_jobs: false,
            tenants: false,
            preemption: false,
            skip: Vec::new(),
            slow_store: false,
            zk_latency: false,
            zk_packet_limit: regent_core::testkit::zk::PACKET_LIMIT,
            clock_steps: false,
            lost_id_state: false,
            suspend: false,
            singletons: false,
            services: false,
        }
    }
}

impl SimConfig {
    /// The cluster a seed stands for: 2–3 masters, 2–4 workers, 1–2
    /// subscribers, the rest as `self`.
    pub fn sized_for(&self, seed: u64) -> SimConfig {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x0005_12e5);
        SimConfig {
            masters: rng.usize(2..=3),
            workers: rng.usize(2..=4),
            subscribers: rng.usize(1..=2),
            ..self.clone()
        }
    }
}

impl SimConfig {
    /// The `regent-soak` flags that select this configuration's faults and
    /// skipped invariants (for a replay line).
    pub fn flags(&self) -> String {
        let mut out = String::new();
        for (on, flag) in [
            (self.datagram, "--datagram"),
            (self.takeovers, "--takeovers"),
            (self.operator, "--operator"),
            (self.jobs, "--jobs"),
            (self.api_jobs, "--api-jobs"),
            (self.tenants, "--tenants"),
            (self.preemption, "--preemption"),
            (self.slow_store, "--slow-store"),
            (self.zk_latency, "--zk-latency"),
            (self.clock_steps, "--clock-steps"),
            (self.lost_id_state, "--lost-id-state"),
            (self.suspend, "--suspend"),
            (self.singletons, "--singletons"),
            (self.services, "--services"),
            (self.knobs.no_epoch_fencing, "--no-epoch-fencing"),
            (self.knobs.no_adopt_after_connection_loss, "--no-adopt"),
            (self.knobs.no_lease_check, "--no-lease-check"),
            (self.knobs.no_acting_lease, "--no-acting-lease"),
            (self.knobs.monotonic_clock, "--monotonic-clock"),
            (self.knobs.hidden_guarantees, "--hide-guarantees"),
            (self.knobs.no_refill_after_stop, "--no-refill-after-stop"),
            (self.knobs.overlapping_checks, "--overlapping-checks"),
            (self.knobs.skipped_checks_fail, "--skipped-checks-fail"),
            (self.knobs.manual_ttl_kept, "--manual-ttl-kept"),
            (self.knobs.deploy_uncharged_baking, "--uncharged-baking"),
            (self.knobs.no_auto_revert, "--no-auto-revert"),
            (self.knobs.deployment_afresh_on_takeover, "--deployment-afresh"),
            (self.knobs.no_shim, "--no-shim"),
        ] {
            if on {
                out.push(' ');
                out.push_str(flag);
            }
        }
        if self.zk_packet_limit != regent_core::testkit::zk::PACKET_LIMIT {
            out.push_str(&format!(" --zk-packet-limit {}", self.zk_packet_limit));
        }
        for s in &self.skip {
            out.push_str(" --skip ");
            out.push_str(s);
        }
        out
    }
}

/// A broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Which invariant (its module's name).
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
    /// When (virtual time).
    pub at: Millis,
}

/// What a passing run did.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    /// Events handled.
    pub events: u64,
    /// Virtual time at the end.
    pub end: Millis,
    /// Virtual time from the heal to a settled cluster.
    pub settled_after: Millis,
    /// Leaderships seen (distinct epochs made durable).
    pub leaderships: u64,
    /// Executors started by workers.
    pub executors_started: u64,
    /// Of them, executors given named resources' addresses (GPUs).
    pub resource_executors_started: u64,
    /// Leaderships given up on purpose (step-downs, fenced writes, a
    /// damaged store): the node's `SteppedDown` notes.
    pub step_downs: u64,
    /// Operator changes (cordon, drain, scale, kill) sent to a leader.
    pub operator_changes: u64,
    /// Those of them that were scales naming the executors they remove.
    pub named_scales: u64,
    /// Requests the API client sent (`--api-jobs`; retries included).
    pub api_requests: u64,
    /// Of its submissions, those a leader accepted (`JobAccepted`).
    pub api_accepted: u64,
    /// Of them, retries answered with what the key's first acceptance
    /// produced (`JobChange::Replayed`).
    pub api_replayed: u64,
    /// Executors leaders stopped by preemption (`--preemption`), each once.
    pub preemptions: u64,
    /// Fast takeovers: election nodes a standby deleted for another
    /// session (deposing a leader it took for dead).
    pub depositions: u64,
    /// Those of them whose session a live master process still held (a
    /// detector false positive: [`Fault::ListenerRefuses`]).
    pub live_depositions: u64,
    /// Singleton executors a worker stopped because it heard no master for
    /// their `stop_after` (`--singletons`), each once.
    pub cut_off_stops: u64,
    /// Health check runs workers asked for (`--services`).
    pub check_runs: u64,
    /// Executors workers stopped for failing checks (`--services`).
    pub unhealthy_stops: u64,
    /// Deployments stored failed, without a revert or as a failed revert
    /// (`--services`).
    pub deployments_failed: u64,
    /// Reverts started (stored) (`--services`).
    pub reverts_started: u64,
    /// Reverts stored succeeded (`--services`).
    pub reverts_succeeded: u64,
    /// Manual check reports frameworks sent a master (`--services`,
    /// docs/design.md#issue-45 item 5).
    pub manual_reports: u64,
    /// Of them, those a worker took in (relayed by the master it follows,
    /// to an executor it runs).
    pub manual_reports_counted: u64,
    /// Executors workers stopped for a failing manual check, each once.
    pub manual_stops: u64,
    /// Executors a restarted worker process re-adopted and was given their
    /// group's disconnect rule and checks again (`Input::Readopted`,
    /// docs/design.md#issue-45).
    pub readopted_with_rules: u64,
    /// Singleton executors their shim stopped for its lease
    /// (docs/design.md#issue-45: no word from a master for `stop_after`,
    /// the worker's process down or paused or not yet stopping them).
    pub shim_stops: u64,
    /// Of them, those whose lease lapsed with their worker's process down.
    pub shim_stops_down: u64,
    /// Of them, those whose lease lapsed with their worker's process paused.
    pub shim_stops_paused: u64,
    /// Promotions the operator sent (`--services`; canaries with
    /// `auto_promote = false`).
    pub promotions_sent: u64,
    /// Of them, those accepted (a deployment awaited promotion).
    pub promotions: u64,
    /// Of them, those refused (nothing awaited one).
    pub promotions_refused: u64,
}

/// A failing run: what broke, the schedule, and the end of the trace.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The cluster.
    pub config: SimConfig,
    /// The schedule run.
    pub schedule: Schedule,
    /// What broke.
    pub violation: Violation,
    /// The last events before it (at most ~200).
    pub trace: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "seed {} ({} masters, {} workers, {} subscribers, knobs {:?}) violated `{}` at {}:",
            self.seed,
            self.config.masters,
            self.config.workers,
            self.config.subscribers,
            self.config.knobs,
            self.violation.invariant,
            self.violation.at
        )?;
        writeln!(f, "  {}", self.violation.detail)?;
        writeln!(f, "schedule (chaos {}):", self.schedule.chaos)?;
        for (t, fault) in &self.schedule.faults {
            writeln!(f, "  {t:>6} ms  {fault:?}")?;
        }
        writeln!(f, "last {} events:", self.trace.len())?;
        for line in &self.trace {
            writeln!(f, "  {line}")?;
        }
        write!(
            f,
            "replay: cargo run --release -p regent-tests --bin regent-soak -- --replay {}{}",
            self.seed,
            self.config.flags()
        )
    }
}

/// How many trace lines a failure keeps.
pub const TRACE_LEN: usize = 200;

/// Runs `schedule` on the cluster `config` with network and executor
/// randomness from `seed`. With `trace`, the last [`TRACE_LEN`] events are
/// kept and returned with a violation.
pub fn run_schedule(
    seed: u64,
    config: &SimConfig,
    schedule: &Schedule,
    trace: bool,
) -> Result<RunStats, (Violation, Vec<String>)> {
    let mut world = engine::World::new(seed, config, schedule, trace);
    match world.run() {
        Ok(stats) => Ok(stats),
        Err(v) => Err((v, world.take_trace())),
    }
}

/// Runs one seed: the cluster size and the fault schedule derive from it.
/// On failure the seed is replayed with tracing on, to report the trace.
pub fn run_seed(seed: u64, base: &SimConfig) -> Result<RunStats, Box<Failure>> {
    let config = base.sized_for(seed);
    let mut schedule =
        Schedule::from_seed_with(seed, config.window_ms, config.faults, config.takeovers);
    if config.operator {
        schedule = schedule.with_operator_commands(seed, config.window_ms);
    }
    if config.jobs {
        schedule = schedule.with_job_faults(seed, config.window_ms);
    }
    if config.api_jobs {
        schedule = schedule.with_api_jobs(seed, config.window_ms);
    }
    if config.clock_steps {
        schedule = schedule.with_clock_steps(seed, config.window_ms);
    }
    if config.suspend {
        schedule = schedule.with_suspends(seed, config.window_ms);
    }
    if config.singletons {
        schedule = schedule.with_cut_offs(seed, config.window_ms);
    }
    schedule = schedule.with_slow_dependencies(
        seed,
        config.window_ms,
        config.slow_store,
        config.zk_latency,
    );
    match run_schedule(seed, &config, &schedule, false) {
        Ok(stats) => Ok(stats),
        Err((violation, _)) => {
            let (replayed, trace) = match run_schedule(seed, &config, &schedule, true) {
                Err((v, t)) => (v, t),
                Ok(_) => (violation.clone(), vec!["(replay did not fail: nondeterminism!)".into()]),
            };
            assert_eq!(replayed, violation, "seed {seed} does not replay deterministically");
            Err(Box::new(Failure { seed, config, schedule, violation, trace }))
        }
    }
}

/// Shrinks a failing schedule with quickcheck's shrinker: repeatedly takes
/// the first smaller schedule that still fails (any invariant), until none
/// does. Returns the minimal schedule and its violation.
pub fn shrink(
    seed: u64,
    config: &SimConfig,
    schedule: &Schedule,
    budget: usize,
) -> (Schedule, Option<Violation>) {
    use quickcheck::Arbitrary;
    let mut best = schedule.clone();
    let mut violation = run_schedule(seed, config, &best, false).err().map(|(v, _)| v);
    if violation.is_none() {
        return (best, None);
    }
    let mut tries = 0;
    'outer: loop {
        for candidate in best.shrink() {
            tries += 1;
            if tries > budget {
                break 'outer;
            }
            if let Err((v, _)) = run_schedule(seed, config, &candidate, false) {
                best = candidate;
                violation = Some(v);
                continue 'outer;
            }
        }
        break;
    }
    (best, violation)
}

//! The pure master machine at scale (docs/design.md#issue-13 item 3): no sockets, no
//! store, one thread. A plain `main`, run with
//!
//! ```sh
//! cargo bench -p regent-tests --bench scale
//! REGENT_SCALE_WORKERS=20000 cargo bench -p regent-tests --bench scale
//! ```
//!
//! `regent_core::master::Master` is driven directly with N workers (default
//! 100,000), N/10 frameworks and N executors: registration of every worker,
//! heartbeat rounds, sweep ticks (nothing expired; 1% expired), placement of
//! N executors (`spread` over N/10 frameworks of 10, and `spread` and `pack`
//! over groups of 2,000), and a failover's recovery from N worker records
//! and N/10 framework records (`Elected` → `LoadRecords` → `Loaded` → epoch
//! durable → RECOVERING → every worker re-registers reporting its executor →
//! ALIVE → every framework resubscribes), and placement with constraints
//! (`REGENT_SCALE_ONLY=constraints`: groups constrained to a quarter and to
//! 2 % of the workers, one spread over racks, a `job plan`), and placement
//! with weighted DRF on (`REGENT_SCALE_ONLY=drf`: 1,000 frameworks in 10
//! tenants of weights 1 to 3; docs/tenants.md), single-slot refills of a
//! spread and of constrained groups (`REGENT_SCALE_ONLY=refill`:
//! docs/design.md#issue-46), and preemption checks
//! (`REGENT_SCALE_ONLY=preemption`, only when asked for: 10,000 running
//! executors of two tenants, a slot waiting). Every `Persist` and `Unpersist` is
//! made durable at once (fed back as `Persisted` right after the step that
//! asked for it), so the figures are the machine's own cost. Memory is
//! counted by the global allocator below: bytes live in the process after a
//! phase minus before it, per worker or per executor.
//!
//! Times of phases over 50 ms are the bench thread's time on a CPU
//! (`/proc/thread-self/schedstat`, so other work on a shared machine
//! inflates them less), with the wall time beside them; shorter ones (sweep
//! ticks: median and minimum over several) are wall times.
//!
//! The bench lives in `regent-tests` rather than `regent-core` because a
//! global allocator is unsafe code, which `regent-core` forbids.
#![allow(unsafe_code)] // the counting allocator below, and nothing else

use regent_core::ids::InstanceId;
use regent_core::master::{self, Master, Status, Timer};
use regent_core::protocol::{
    ExecutorReport, ExecutorState, GroupSpec, Hello, Message, RegisterWorker, Role, Subscribe,
    PROTOCOL_VERSION,
};
use regent_core::store::{FrameworkRecord, GroupRecord, Record, SlotOutcome, WorkerRecord};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::WorkerId;
use regent_core::{Addr, ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, MasterId, Millis};
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

/// The system allocator, keeping the number of bytes live.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the only addition is an atomic counter.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live_bytes() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

/// This thread's time on a CPU, in ns (Linux), if the kernel says.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// A phase's wall and CPU time.
struct Stopwatch {
    wall: Instant,
    cpu: Option<u64>,
}

/// Seconds taken: CPU time when known, wall time otherwise; and a label
/// with both.
struct Took {
    secs: f64,
    wall: f64,
}

impl Stopwatch {
    fn start() -> Self {
        Stopwatch { cpu: cpu_ns(), wall: Instant::now() }
    }

    fn stop(&self) -> Took {
        let wall = self.wall.elapsed().as_secs_f64();
        let cpu = match (self.cpu, cpu_ns()) {
            (Some(a), Some(b)) => Some((b - a) as f64 / 1e9),
            _ => None,
        };
        // The kernel accounts CPU time at scheduler ticks: only for phases
        // long enough is it the better figure.
        let secs = match cpu {
            Some(c) if wall > 0.05 => c,
            _ => wall,
        };
        Took { secs, wall }
    }
}

impl Took {
    /// "X ms in all, Y each (wall Z ms)".
    fn report(&self, n: usize) -> String {
        format!("{} in all, {} each (wall {})", ms(self.secs), per(self.secs, n), ms(self.wall))
    }
}

/// Executors per framework in the many-frameworks shape (and per framework
/// record in recovery).
const SLOTS_PER_FRAMEWORK: u32 = 10;
/// Slots per group in the big-groups shape (the per-group limit is 2,048).
const BIG_GROUP: u32 = 2_000;
const CORES: u32 = 16;
const MEMORY_MB: u64 = 65_536;

/// What the runtime would have sent, tallied.
#[derive(Default, Debug)]
struct Tally {
    launches: usize,
    sends: usize,
    writes: usize,
    registered: usize,
    subscribed: usize,
    acks: usize,
}

/// A master and an instantly durable store.
struct Driver {
    m: Master,
    now: Millis,
}

impl Driver {
    fn new(cfg: master::Config) -> Self {
        Driver { m: Master::new(cfg), now: Millis(0) }
    }

    /// Handles `event`, then feeds `Persisted` for every write it asked
    /// for (and for the writes those steps ask for, in order).
    fn feed(&mut self, event: master::Event, t: &mut Tally) {
        let mut queue = VecDeque::from([event]);
        while let Some(ev) = queue.pop_front() {
            for a in self.m.handle(self.now, ev) {
                match a {
                    master::Action::Store(StoreCommand::Persist { write, .. })
                    | master::Action::Store(StoreCommand::Unpersist { write, .. }) => {
                        t.writes += 1;
                        queue.push_back(master::Event::Store(StoreEvent::Persisted { write }));
                    }
                    master::Action::Send { msg, .. } => {
                        t.sends += 1;
                        match msg {
                            Message::LaunchExecutor { .. } => t.launches += 1,
                            Message::Registered { .. } => t.registered += 1,
                            Message::HeartbeatAck { .. } => t.acks += 1,
                            Message::Subscribed { .. } => t.subscribed += 1,
                            _ => {}
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn msg(&mut self, conn: ConnId, msg: Message, t: &mut Tally) {
        self.feed(master::Event::Message { conn, msg }, t);
    }

    fn elect_empty(&mut self) {
        let mut t = Tally::default();
        self.feed(master::Event::Elected { floor: Epoch(1), clock: 0 }, &mut t);
        self.feed(master::Event::Store(StoreEvent::Loaded { records: vec![] }), &mut t);
        assert_eq!(self.m.status(), Status::Alive);
    }
}

/// The default configuration (1 s heartbeats, 10 s worker timeout, the
/// default heartbeat ceiling), with room for the bench's frameworks.
fn config(placement: regent_core::policy::Placement) -> master::Config {
    let mut cfg = master::Config::new(MasterId::new("m"), Addr::new("10.0.0.1:7077"));
    cfg.placement = placement;
    cfg.max_frameworks = regent_core::limits::MAX_FRAMEWORKS_LIMIT;
    cfg
}

/// What heartbeat load control told the workers.
fn intervals(d: &Driver) {
    let v: Vec<u64> = d.m.workers().iter().map(|w| w.heartbeat_interval.0).collect();
    let (min, max) = (v.iter().min().copied().unwrap_or(0), v.iter().max().copied().unwrap_or(0));
    let rate: f64 = v.iter().map(|i| 1_000.0 / *i as f64).sum();
    let timeouts: Vec<u64> = d.m.workers().iter().map(|w| w.timeout.0).collect();
    println!(
        "heartbeat load control ({} a second at most): intervals {min}..{max} ms, {rate:.0} heartbeats a second in all; DEAD after {}..{} ms",
        d.m.config().max_heartbeats_per_second,
        timeouts.iter().min().copied().unwrap_or(0),
        timeouts.iter().max().copied().unwrap_or(0),
    );
}

fn worker_id(i: u64) -> WorkerId {
    WorkerId(format!("worker-{i:06}"))
}

fn worker_conn(i: u64) -> ConnId {
    ConnId(i)
}

fn framework_id(j: u64) -> FrameworkId {
    FrameworkId(format!("fw-{j:06}"))
}

fn framework_conn(j: u64) -> ConnId {
    ConnId(10_000_000 + j)
}

fn callback(i: u64) -> Addr {
    Addr(format!("10.{}.{}.{}:7078", i >> 16 & 0xff, i >> 8 & 0xff, i & 0xff))
}

fn spec(group: &str, slots: u32) -> GroupSpec {
    GroupSpec {
        group: group.into(),
        slots,
        command: vec!["/usr/bin/env".into(), "sleep".into(), "3600".into()],
        env: vec![],
        cores: 1,
        memory_mb: 1024,
        policy: Default::default(),
        launch: Default::default(),
    }
}

/// What a worker's connection says, up to and including its registration.
fn register(d: &mut Driver, i: u64, executors: Vec<ExecutorReport>, t: &mut Tally) {
    register_with(d, i, executors, vec![], t)
}

/// The attributes of worker `i` in the constraints phase: `disk=ssd` on
/// every fourth worker (`hdd` on the rest), `rack=r<i mod 100>`.
fn attributes(i: u64) -> Vec<(String, String)> {
    let disk = if i.is_multiple_of(4) { "ssd" } else { "hdd" };
    vec![("disk".into(), disk.into()), ("rack".into(), format!("r{}", i % 100))]
}

/// [`register`] announcing `attributes`.
fn register_with(
    d: &mut Driver,
    i: u64,
    executors: Vec<ExecutorReport>,
    attributes: Vec<(String, String)>,
    t: &mut Tally,
) {
    let conn = worker_conn(i);
    d.feed(master::Event::Connected { conn }, t);
    let hello = Hello {
        version: PROTOCOL_VERSION,
        cluster: "regent".into(),
        role: Role::Worker,
        node: worker_id(i).0,
    };
    d.msg(conn, Message::Hello(hello), t);
    d.msg(conn, Message::Callback { addr: callback(i) }, t);
    let reg = RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: worker_id(i),
        incarnation: Incarnation(1_000_000 + i),
        cores: CORES,
        memory_mb: MEMORY_MB,
        executors,
        epoch_seen: Epoch(0),
        launch_seen: 0,
        attributes,
    };
    d.msg(conn, Message::RegisterWorker(reg), t);
}

/// A framework's subscription on its own connection (`Subscribe` with the
/// framework's id), made durable.
fn subscribe(d: &mut Driver, j: u64, t: &mut Tally) {
    let conn = framework_conn(j);
    d.feed(master::Event::Connected { conn }, t);
    let sub = Subscribe {
        framework: Some(framework_id(j)),
        name: format!("app-{j}"),
        instance: InstanceId(5_000_000 + j),
        attempt: 1,
        failover_timeout: Millis(3_600_000),
        tenant: None,
    };
    d.msg(conn, Message::Subscribe(sub), t);
}

fn heartbeat(d: &mut Driver, i: u64, t: &mut Tally) {
    d.msg(worker_conn(i), Message::WorkerHeartbeat { incarnation: Incarnation(1_000_000 + i) }, t);
}

fn per(total_s: f64, n: usize) -> String {
    let us = total_s * 1e6 / n.max(1) as f64;
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.2} us")
    }
}

fn ms(s: f64) -> String {
    format!("{:.1} ms", s * 1e3)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A leader with `n` registered workers (ALIVE, each with a connection).
/// Prints the registration's cost and memory.
fn registered_leader(n: u64, placement: regent_core::policy::Placement, report: bool) -> Driver {
    let before = live_bytes();
    let mut d = Driver::new(config(placement));
    d.elect_empty();
    let mut t = Tally::default();
    let watch = Stopwatch::start();
    for i in 0..n {
        register(&mut d, i, vec![], &mut t);
    }
    let took = watch.stop();
    assert_eq!(t.registered as u64, n);
    let bytes = live_bytes() - before;
    if report {
        println!(
            "register {n} workers (Connected, Hello, Callback, RegisterWorker, Persisted): {}",
            took.report(n as usize)
        );
        println!(
            "memory: {:.0} bytes per registered worker ({:.1} MB for {n})",
            bytes as f64 / n as f64,
            bytes as f64 / 1e6
        );
    }
    d
}

fn heartbeat_rounds(d: &mut Driver, n: u64, rounds: u64) {
    let mut t = Tally::default();
    let watch = Stopwatch::start();
    for _ in 0..rounds {
        d.now = Millis(d.now.0 + 1_000);
        for i in 0..n {
            heartbeat(d, i, &mut t);
        }
    }
    let took = watch.stop();
    let hbs = (n * rounds) as usize;
    assert_eq!(t.acks, hbs, "one HeartbeatAck per heartbeat");
    let told = if t.registered > 0 {
        format!(" ({} told a new interval)", t.registered)
    } else {
        String::new()
    };
    println!(
        "heartbeats: {rounds} rounds of {n}: {}, {:.2} M/s{told}",
        took.report(hbs),
        hbs as f64 / took.secs / 1e6
    );
}

/// Sweep ticks with nothing expired: every worker heartbeats each second,
/// a sweep tick follows each round. The median tick is reported.
fn sweeps_nothing_expired(d: &mut Driver, n: u64, ticks: u64) {
    let mut t = Tally::default();
    let mut times = Vec::new();
    for _ in 0..ticks {
        // A round of at least a second, ending at the sweep's deadline.
        let sweep = d.m.deadline(Timer::Sweep).expect("a leader sweeps");
        d.now = sweep.max(Millis(d.now.0 + 1_000));
        for i in 0..n {
            heartbeat(d, i, &mut t);
        }
        let start = Instant::now();
        d.feed(master::Event::Tick, &mut t);
        times.push(start.elapsed().as_secs_f64());
    }
    println!(
        "sweep tick, {n} workers, nothing expired: median {} (min {})",
        per(median(times.clone()), 1),
        per(times.iter().copied().fold(f64::MAX, f64::min), 1)
    );
}

/// An operator's `StateRequest` (`regent status`), built afresh; then what
/// heartbeats do to the cached one.
fn snapshot(d: &mut Driver, n: u64) {
    let conn = ConnId(20_000_000);
    let mut t = Tally::default();
    d.feed(master::Event::Connected { conn }, &mut t);
    let built = d.m.metrics().state_snapshots_built;
    let watch = Stopwatch::start();
    d.msg(conn, Message::StateRequest, &mut t);
    let took = watch.stop();
    assert_eq!(d.m.metrics().state_snapshots_built, built + 1);
    println!(
        "StateRequest, {n} workers and {} executors: {} to build the snapshot (wall {})",
        d.m.executors().count(),
        ms(took.secs),
        ms(took.wall)
    );
    // A second of heartbeats, then the operator asks again (past the
    // per-connection interval, within the snapshot's maximum age).
    d.now = Millis(d.now.0 + 200);
    for i in 0..n {
        heartbeat(d, i, &mut t);
    }
    d.msg(conn, Message::StateRequest, &mut t);
    let rebuilt = d.m.metrics().state_snapshots_built - built - 1;
    println!(
        "StateRequest after {n} heartbeats (nothing else changed): {}",
        if rebuilt == 0 { "answered from the cached snapshot" } else { "built again" }
    );
    // What `/api/state` and `/metrics` cost the master's loop once the
    // snapshot is cached: a shared pointer, not a copy of the cluster.
    let now = d.now;
    let watch = Stopwatch::start();
    let rounds = 1_000;
    for _ in 0..rounds {
        black_box(d.m.cached_state(now));
    }
    let took = watch.stop();
    println!(
        "/api/state from the cached snapshot, {n} workers: {:.2} µs per request on the master's loop (a fresh one: the build above)",
        took.wall / f64::from(rounds) * 1e6
    );
    // `/metrics` reads the counters: no snapshot at all.
    let built = d.m.metrics().state_snapshots_built;
    let watch = Stopwatch::start();
    for _ in 0..rounds {
        black_box(d.m.gauges());
    }
    let took = watch.stop();
    assert_eq!(d.m.metrics().state_snapshots_built, built, "/metrics built a snapshot");
    println!(
        "/metrics from the counters, {n} workers and {} executors: {:.1} µs per request on the master's loop",
        d.m.executors().count(),
        took.wall / f64::from(rounds) * 1e6
    );
}

/// 1% of the workers fall silent; one sweep tick past their timeout marks
/// them DEAD (their executors LOST and replaced elsewhere). The others
/// heartbeat once per (longest) interval.
fn sweep_one_percent_expired(d: &mut Driver, n: u64) {
    let mut t = Tally::default();
    let timeout = d.m.workers().iter().map(|w| w.timeout.0).max().unwrap_or(0);
    let hb = d.m.workers().iter().map(|w| w.heartbeat_interval.0).max().unwrap_or(1).max(1);
    let silent = |i: u64| i % 100 == 7;
    let until = d.now.0 + timeout + 1;
    while d.now.0 + hb < until {
        d.now = Millis(d.now.0 + hb);
        for i in (0..n).filter(|i| !silent(*i)) {
            heartbeat(d, i, &mut t);
        }
    }
    d.now = Millis(until).max(d.m.deadline(Timer::Sweep).expect("a leader sweeps"));
    let before = t.launches;
    let watch = Stopwatch::start();
    let out = d.m.handle(d.now, master::Event::Tick);
    let tick = watch.stop();
    let deaths = out
        .iter()
        .filter(|a| matches!(a, master::Action::Store(StoreCommand::Unpersist { .. })))
        .count();
    // The writes the tick asked for, made durable (replacements are placed
    // once the lost executors' records are).
    let watch = Stopwatch::start();
    for a in out {
        if let master::Action::Store(StoreCommand::Persist { write, .. })
        | master::Action::Store(StoreCommand::Unpersist { write, .. }) = a
        {
            d.feed(master::Event::Store(StoreEvent::Persisted { write }), &mut t);
        }
    }
    let settle = watch.stop();
    println!(
        "sweep tick, {n} workers, 1% expired: {} for the tick ({deaths} DEAD; wall {}), {} more to make it durable and relaunch {} executors",
        ms(tick.secs),
        ms(tick.wall),
        ms(settle.secs),
        t.launches - before
    );
}

/// Places `frameworks × per_framework` executors: each framework subscribes
/// and declares one group; the time counts from the first declaration to
/// the last launch.
fn place(d: &mut Driver, frameworks: u64, per_framework: u32, label: &str) -> usize {
    let mut t = Tally::default();
    for j in 0..frameworks {
        subscribe(d, j, &mut t);
    }
    let before = live_bytes();
    let watch = Stopwatch::start();
    let mut t = Tally::default();
    for j in 0..frameworks {
        d.msg(
            framework_conn(j),
            Message::DeclareGroup { request: 1, spec: spec("g", per_framework) },
            &mut t,
        );
    }
    let took = watch.stop();
    let bytes = live_bytes() - before;
    let n = frameworks as usize * per_framework as usize;
    assert_eq!(t.launches, n, "every executor placed");
    println!(
        "placement ({label}): {n} executors, {frameworks} frameworks x {per_framework}: {}",
        took.report(n)
    );
    println!(
        "memory: {:.0} bytes per placed executor (its group slot and framework record included)",
        bytes as f64 / n as f64
    );
    n
}

/// Places `n` executors over 1,000 frameworks in 10 tenants of weights 1
/// to 3 (docs/tenants.md): every placement takes the weighted DRF path
/// (tenants and frameworks in heaps keyed by dominant share, use kept per
/// executor). The time counts from the first declaration to the last
/// launch.
fn place_drf(d: &mut Driver, n: u64) {
    const FRAMEWORKS: u64 = 1_000;
    const TENANTS: u64 = 10;
    let mut t = Tally::default();
    let op = ConnId(9_999_999);
    d.feed(master::Event::Connected { conn: op }, &mut t);
    for k in 0..TENANTS {
        let tenant = regent_core::protocol::tenants::Tenant {
            weight: 1 + (k % 3) as u32,
            ..regent_core::protocol::tenants::Tenant::new(format!("tenant-{k}"))
        };
        d.msg(op, Message::SetTenant { request: k, tenant }, &mut t);
    }
    for j in 0..FRAMEWORKS {
        let conn = framework_conn(j);
        d.feed(master::Event::Connected { conn }, &mut t);
        let sub = Subscribe {
            framework: Some(framework_id(j)),
            name: format!("app-{j}"),
            instance: InstanceId(5_000_000 + j),
            attempt: 1,
            failover_timeout: Millis(3_600_000),
            tenant: Some(format!("tenant-{}", j % TENANTS)),
        };
        d.msg(conn, Message::Subscribe(sub), &mut t);
    }
    let per = u32::try_from(n / FRAMEWORKS).unwrap_or(u32::MAX).max(1);
    let watch = Stopwatch::start();
    let mut t = Tally::default();
    for j in 0..FRAMEWORKS {
        d.msg(
            framework_conn(j),
            Message::DeclareGroup { request: 1, spec: spec("g", per) },
            &mut t,
        );
    }
    let took = watch.stop();
    let placed = FRAMEWORKS as usize * per as usize;
    assert_eq!(t.launches, placed, "every executor placed");
    println!(
        "placement (weighted DRF): {placed} executors, {FRAMEWORKS} frameworks in {TENANTS} tenants x {per}: {}",
        took.report(placed)
    );
}

/// Preemption checks (docs/tenants.md, docs/design.md#issue-44) at `n`
/// workers and 10,000 running executors: the first 10,000 workers
/// (`pool=busy`) run one 16-core executor each, 5,000 of tenant `a` and
/// 5,000 of tenant `b`, and one more slot waits on them (its tenant with
/// one more would be the richer: no victim). Measured: a leader's step
/// (`Tick`) 600 ms apart with nothing changed (before event-triggered
/// preemption, each was a full check), and a change that makes a check due
/// (a tenant set, made durable) with a `Tick` 600 ms later; each with
/// preemption on and off, the difference being the checks' cost.
fn preemption(n: u64) {
    let n = n.max(PREEMPTION_BUSY);
    let on = preemption_steps(n, true);
    let off = preemption_steps(n, false);
    println!(
        "preemption: {n} workers, {PREEMPTION_BUSY} running executors, 1 slot waiting, \
         medians with preemption on (off): a step with nothing changed {} ({}), a tenant change \
         and a step {} ({}); the preemption checks' share: {} and {}",
        ms(on.0),
        ms(off.0),
        ms(on.1),
        ms(off.1),
        ms((on.0 - off.0).max(0.0)),
        ms((on.1 - off.1).max(0.0)),
    );
    println!(
        "preemption: a connection opening (a check due and made, after the change): {:.1} µs \
         ({:.1} µs); one check: {:.1} µs",
        on.2 * 1e6,
        off.2 * 1e6,
        (on.2 - off.2).max(0.0) * 1e6,
    );
}

/// Workers running an executor each in [`preemption`].
const PREEMPTION_BUSY: u64 = 10_000;

/// [`preemption`]'s cluster with `--preemption` `on` or off: the median
/// time of a step with nothing changed, of a tenant change and a step, and
/// of a connection opening (a step that makes a check due and makes it).
fn preemption_steps(n: u64, on: bool) -> (f64, f64, f64) {
    use regent_core::policy::{Constraint, GroupPolicy};
    const BUSY: u64 = PREEMPTION_BUSY;
    const PER_TENANT_FRAMEWORKS: u64 = 5;
    let mut cfg = config(regent_core::policy::Placement::Spread);
    cfg.preemption = on;
    let mut d = Driver::new(cfg);
    d.elect_empty();
    let mut t = Tally::default();
    for i in 0..n {
        let pool = if i < BUSY { "busy" } else { "idle" };
        register_with(&mut d, i, vec![], vec![("pool".into(), pool.into())], &mut t);
    }
    let op = ConnId(9_999_999);
    d.feed(master::Event::Connected { conn: op }, &mut t);
    for (k, name) in ["a", "b"].into_iter().enumerate() {
        let tenant = regent_core::protocol::tenants::Tenant::new(name);
        d.msg(op, Message::SetTenant { request: k as u64, tenant }, &mut t);
    }
    let per = u32::try_from(BUSY / (2 * PER_TENANT_FRAMEWORKS)).expect("small");
    let mut launched: Vec<(ConnId, ExecutorId, FrameworkId)> = Vec::new();
    for j in 0..2 * PER_TENANT_FRAMEWORKS {
        let conn = framework_conn(j);
        d.feed(master::Event::Connected { conn }, &mut t);
        let tenant = if j < PER_TENANT_FRAMEWORKS { "a" } else { "b" };
        let sub = Subscribe {
            framework: Some(framework_id(j)),
            name: format!("app-{j}"),
            instance: InstanceId(5_000_000 + j),
            attempt: 1,
            failover_timeout: Millis(3_600_000),
            tenant: Some(tenant.into()),
        };
        d.msg(conn, Message::Subscribe(sub), &mut t);
        let slots = per + u32::from(j == 2 * PER_TENANT_FRAMEWORKS - 1);
        let spec = GroupSpec {
            cores: CORES,
            policy: GroupPolicy {
                constraints: vec![Constraint::parse("pool=busy").unwrap()],
                ..Default::default()
            },
            ..spec("g", slots)
        };
        let mut queue = VecDeque::from([master::Event::Message {
            conn,
            msg: Message::DeclareGroup { request: 1, spec },
        }]);
        while let Some(ev) = queue.pop_front() {
            for a in d.m.handle(d.now, ev) {
                match a {
                    master::Action::Store(StoreCommand::Persist { write, .. }) => {
                        queue.push_back(master::Event::Store(StoreEvent::Persisted { write }));
                    }
                    master::Action::Send {
                        conn,
                        msg: Message::LaunchExecutor { executor, framework, .. },
                    } => launched.push((conn, executor, framework)),
                    _ => {}
                }
            }
        }
    }
    assert_eq!(launched.len() as u64, BUSY, "one executor on each busy worker");
    for (conn, id, framework) in &launched {
        let i = conn.0;
        let report = ExecutorReport {
            health: None,
            ran_ms: None,
            resources: Default::default(),
            ports: Default::default(),
            id: id.clone(),
            framework: framework.clone(),
            cores: CORES,
            memory_mb: 1024,
            state: ExecutorState::Running,
        };
        let msg = Message::ExecutorStatus { incarnation: Incarnation(1_000_000 + i), report };
        d.msg(*conn, msg, &mut t);
    }
    // Every worker heartbeats before each timed step (untimed, and no
    // change a check reads): none is found dead.
    let beat_all = |d: &mut Driver, t: &mut Tally| {
        for i in 0..n {
            heartbeat(d, i, t);
        }
    };
    // Steps with nothing changed, 600 ms apart.
    let mut idle = Vec::new();
    for _ in 0..20 {
        d.now = Millis(d.now.0 + 600);
        beat_all(&mut d, &mut t);
        let watch = Instant::now();
        let out = d.m.handle(d.now, master::Event::Tick);
        idle.push(watch.elapsed().as_secs_f64());
        assert!(!out.iter().any(|a| matches!(
            a,
            master::Action::Send { msg: Message::KillExecutorOnWorker { .. }, .. }
        )));
        black_box(out);
    }
    // A change that makes a check due, then the step that checks.
    let mut checks = Vec::new();
    for k in 0..10u64 {
        d.now = Millis(d.now.0 + 600);
        let tenant = regent_core::protocol::tenants::Tenant::new(format!("c{k}"));
        beat_all(&mut d, &mut t);
        let watch = Instant::now();
        d.msg(op, Message::SetTenant { request: 100 + k, tenant }, &mut t);
        d.now = Millis(d.now.0 + 600);
        let out = d.m.handle(d.now, master::Event::Tick);
        checks.push(watch.elapsed().as_secs_f64());
        black_box(out);
    }
    // A check made due by the cheapest event that does (a connection
    // opening), the step timed alone.
    let mut alone = Vec::new();
    let checks_before = d.m.preemption_checks();
    for k in 0..20u64 {
        d.now = Millis(d.now.0 + 600);
        beat_all(&mut d, &mut t);
        let watch = Instant::now();
        let out = d.m.handle(d.now, master::Event::Connected { conn: ConnId(20_000_000 + k) });
        alone.push(watch.elapsed().as_secs_f64());
        black_box(out);
    }
    let made = d.m.preemption_checks() - checks_before;
    assert_eq!(made, if on { 20 } else { 0 }, "one check per connection opening");
    assert_eq!(d.m.workers().len() as u64, n);
    assert!(
        d.m.workers().iter().all(|w| w.state == regent_core::states::WorkerState::Alive),
        "every worker ALIVE throughout"
    );
    black_box(d);
    (median(idle), median(checks), median(alone))
}

/// The store of a cluster of `n` workers and `n / 10` frameworks of 10
/// running executors each, executor `k` on worker `k`.
fn records(n: u64) -> Vec<Record> {
    let mut v = vec![Record::Epoch(Epoch(7))];
    for i in 0..n {
        v.push(Record::Worker(WorkerRecord {
            dead: false,
            id: worker_id(i),
            incarnation: Incarnation(1_000_000 + i),
            cores: CORES,
            memory_mb: MEMORY_MB,
            callback: Some(callback(i)),
            maintenance: None,
        }));
    }
    for j in 0..n / u64::from(SLOTS_PER_FRAMEWORK) {
        v.push(Record::Framework(FrameworkRecord {
            id: framework_id(j),
            name: format!("app-{j}"),
            failover_timeout_ms: 3_600_000,
            groups: vec![GroupRecord {
                replacing: Default::default(),
                preempted: Default::default(),
                counted: Default::default(),
                deployment: None,
                eras: Vec::new(),
                spec: spec("g", SLOTS_PER_FRAMEWORK),
                slots: vec![SlotOutcome::Pending; SLOTS_PER_FRAMEWORK as usize],
                retries_used: 0,
                restarts: Default::default(),
            }],
            callback: Some(Addr(format!("10.200.{}.{}:7079", j >> 8 & 0xff, j & 0xff))),
            registered_at_ms: None,
            job: None,
            tenant: None,
        }));
    }
    v
}

/// The executor a worker of the recovered cluster reports.
fn executor_of(i: u64) -> ExecutorReport {
    let j = i / u64::from(SLOTS_PER_FRAMEWORK);
    let slot = i % u64::from(SLOTS_PER_FRAMEWORK);
    let fid = framework_id(j);
    ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id: ExecutorId(format!("{fid}/g#{slot}#6.{}", i + 1)),
        framework: fid,
        cores: 1,
        memory_mb: 1024,
        state: ExecutorState::Running,
    }
}

fn recovery(n: u64) {
    let frameworks = n / u64::from(SLOTS_PER_FRAMEWORK);
    let recs = records(n);
    let before = live_bytes();
    let mut d = Driver::new(config(regent_core::policy::Placement::Spread));
    d.now = Millis(1_000_000);
    let mut t = Tally::default();
    let all = Stopwatch::start();
    let out = d.m.handle(d.now, master::Event::Elected { floor: Epoch(1), clock: 0 });
    assert!(out.contains(&master::Action::Store(StoreCommand::LoadRecords)));
    let loaded = Stopwatch::start();
    let out = d.m.handle(d.now, master::Event::Store(StoreEvent::Loaded { records: recs }));
    let [master::Action::Store(StoreCommand::Persist { write, .. })] = out[..] else {
        panic!("{out:?}")
    };
    let out = d.m.handle(d.now, master::Event::Store(StoreEvent::Persisted { write }));
    let to_recovering = loaded.stop();
    let contacts = out
        .iter()
        .map(|a| match a {
            master::Action::Contact { addrs } => addrs.len(),
            _ => 0,
        })
        .sum::<usize>();
    drop(out);
    assert_eq!(d.m.status(), Status::Recovering);
    assert_eq!(contacts as u64, n + frameworks);
    println!(
        "recovery: Loaded ({n} worker + {frameworks} framework records) -> epoch durable -> RECOVERING: {} (wall {}; {contacts} peers to contact)",
        ms(to_recovering.secs),
        ms(to_recovering.wall)
    );
    let rereg = Stopwatch::start();
    for i in 0..n {
        register(&mut d, i, vec![executor_of(i)], &mut t);
    }
    let took = rereg.stop();
    assert_eq!(d.m.status(), Status::Alive);
    assert_eq!(t.registered as u64, n);
    assert_eq!(t.launches, 0, "every executor adopted, none launched");
    println!(
        "recovery: {n} workers re-register, each reporting its running executor (adopted) -> ALIVE: {}",
        took.report(n as usize)
    );
    let resub = Stopwatch::start();
    for j in 0..frameworks {
        subscribe(&mut d, j, &mut t);
    }
    let took = resub.stop();
    assert_eq!(t.subscribed as u64, frameworks);
    println!(
        "recovery: {frameworks} frameworks resubscribe (Subscribed carries its executors): {}",
        took.report(frameworks as usize)
    );
    let total = all.stop();
    let bytes = live_bytes() - before;
    println!(
        "recovery: Elected to every worker and framework back: {} (wall {})",
        ms(total.secs),
        ms(total.wall)
    );
    println!(
        "memory after recovery: {:.1} MB, {:.0} bytes per (worker + its executor + 1/10 framework)",
        bytes as f64 / 1e6,
        bytes as f64 / n as f64
    );
    assert_eq!(d.m.executors().count() as u64, n);
    black_box(d);
}

/// Placement with constraints at `n` workers (docs/design.md#issue-22): every fourth
/// worker `disk=ssd`, 100 racks. Groups of 2,000 constrained to `disk=ssd`
/// (a quarter match: the index walk skips the rest), one to `rack in [r1,
/// r2]` (2 % match), one spread over `rack` (placed in one batch: one pass
/// over the candidates, a logarithmic step per slot), and a plan of a
/// three-group job.
fn constraints(n: u64) {
    use regent_core::policy::{Constraint, GroupPolicy};
    let mut d = Driver::new(config(regent_core::policy::Placement::Spread));
    d.elect_empty();
    let mut t = Tally::default();
    let watch = Stopwatch::start();
    for i in 0..n {
        register_with(&mut d, i, vec![], attributes(i), &mut t);
    }
    let took = watch.stop();
    assert_eq!(t.registered as u64, n);
    println!(
        "constraints: register {n} workers with 2 attributes each: {}",
        took.report(n as usize)
    );
    let constrained = |slots: u32, c: &str| GroupSpec {
        policy: GroupPolicy {
            constraints: vec![Constraint::parse(c).unwrap()],
            ..Default::default()
        },
        ..spec("g", slots)
    };
    let declare = |d: &mut Driver, j: u64, group: GroupSpec, label: &str| {
        let mut t = Tally::default();
        subscribe(d, j, &mut t);
        let slots = group.slots as usize;
        let watch = Stopwatch::start();
        let mut t = Tally::default();
        d.msg(framework_conn(j), Message::DeclareGroup { request: 1, spec: group }, &mut t);
        let took = watch.stop();
        assert_eq!(t.launches, slots, "{label}: every executor placed");
        println!("constraints: placement of {slots} executors ({label}): {}", took.report(slots));
    };
    let ssd_groups = (n / 4 / u64::from(BIG_GROUP)).max(1);
    let watch = Stopwatch::start();
    for j in 0..ssd_groups {
        declare(
            &mut d,
            j,
            constrained(BIG_GROUP, "disk=ssd"),
            "disk=ssd, a quarter of the workers",
        );
    }
    let total = watch.stop();
    let placed = ssd_groups as usize * BIG_GROUP as usize;
    println!(
        "constraints: {placed} executors constrained to disk=ssd in all: {}",
        total.report(placed)
    );
    declare(
        &mut d,
        ssd_groups,
        constrained(BIG_GROUP, "rack in [r1, r2]"),
        "rack in [r1, r2], 2 % of the workers",
    );
    let spread = GroupSpec {
        policy: GroupPolicy { spread: Some("rack".into()), ..Default::default() },
        ..spec("g", 1_000)
    };
    declare(&mut d, ssd_groups + 1, spread, "spread over 100 racks, placed in one batch");
    let mut big = spec("big", 10);
    big.cores = CORES + 1;
    let job = vec![constrained(BIG_GROUP, "disk=ssd"), constrained(100, "rack=r999"), big];
    let watch = Stopwatch::start();
    let out = d.m.handle(
        d.now,
        master::Event::Message {
            conn: framework_conn(0),
            msg: Message::PlanRequest { request: 1, groups: job, tenant: None },
        },
    );
    let took = watch.stop();
    let planned = out.iter().any(|a| {
        matches!(a, master::Action::Send { msg: Message::PlanReply { groups, .. }, .. }
            if groups[0].unplaced == 0 && groups[1].unplaced == 100 && groups[2].unplaced == 10)
    });
    assert!(planned, "the plan places the ssd group and says why not the others");
    println!(
        "constraints: job plan of 3 groups (2,000 ssd slots placed, 100 on a missing rack, 10 too large) at {n} workers: {}",
        took.report(1)
    );
    black_box(d);
}

/// Single-slot refills at `n` workers (docs/design.md#issue-46, item 4):
/// the workers of the constraints phase (`disk=ssd` on a quarter, 100
/// racks); per group, its executors placed, then `REFILLS` times one of
/// them ends (its worker reports it KILLED: refilled without charging the
/// retry budget) and its slot is placed again alone. Timed per refill: the
/// step that places it (the framework record's write made durable, then
/// the placement), and the whole refill from the report to the launch.
fn refill(n: u64) {
    use regent_core::policy::{Constraint, GroupPolicy};
    const REFILLS: usize = 200;
    let mut d = Driver::new(config(regent_core::policy::Placement::Spread));
    d.elect_empty();
    let mut t = Tally::default();
    for i in 0..n {
        register_with(&mut d, i, vec![], attributes(i), &mut t);
    }
    assert_eq!(t.registered as u64, n);
    let constrained = |slots: u32, c: &str| GroupSpec {
        policy: GroupPolicy {
            constraints: vec![Constraint::parse(c).unwrap()],
            ..Default::default()
        },
        ..spec("g", slots)
    };
    let spread = GroupSpec {
        policy: GroupPolicy { spread: Some("rack".into()), ..Default::default() },
        ..spec("g", 1_000)
    };
    let cases = [
        ("spread over rack, 100 values, 1,000 slots", spread),
        ("disk=ssd (a quarter), 2,000 slots", constrained(BIG_GROUP, "disk=ssd")),
        ("rack in [r1, r2] (2 %), 2,000 slots", constrained(BIG_GROUP, "rack in [r1, r2]")),
    ];
    for (j, (label, group)) in cases.into_iter().enumerate() {
        let j = j as u64;
        let slots = group.slots as usize;
        subscribe(&mut d, j, &mut t);
        // Every executor of the group, by launch: (worker conn, executor).
        let mut running: Vec<(ConnId, ExecutorId)> = Vec::new();
        let msg = Message::DeclareGroup { request: 1, spec: group };
        let mut launches = step_all(&mut d, framework_conn(j), msg).1;
        running.append(&mut launches);
        assert_eq!(running.len(), slots, "{label}: every executor placed");
        let mut placing = Vec::with_capacity(REFILLS);
        let mut whole = Vec::with_capacity(REFILLS);
        for k in 0..REFILLS {
            // A different executor each time, spread over the group.
            let pick = (k * 7_919) % running.len();
            let (conn, id) = running[pick].clone();
            let report = ExecutorReport {
                health: None,
                ran_ms: None,
                resources: Default::default(),
                ports: Default::default(),
                id,
                framework: framework_id(j),
                cores: 1,
                memory_mb: 1024,
                state: ExecutorState::Killed,
            };
            let i = conn.0;
            let msg = Message::ExecutorStatus { incarnation: Incarnation(1_000_000 + i), report };
            let watch = Instant::now();
            let (place_step, mut launched) = step_all(&mut d, conn, msg);
            whole.push(watch.elapsed().as_secs_f64());
            placing.push(place_step);
            assert_eq!(launched.len(), 1, "{label}: the slot is refilled at once");
            running[pick] = launched.pop().expect("one");
        }
        let us = |v: &[f64], f: fn(Vec<f64>) -> f64| f(v.to_vec()) * 1e6;
        let min = |v: Vec<f64>| v.into_iter().fold(f64::INFINITY, f64::min);
        println!(
            "refill at {n} workers ({label}): the placing step median {:.1} us (min {:.1} us), \
             report to launch median {:.1} us (min {:.1} us), over {REFILLS} refills",
            us(&placing, median),
            us(&placing, min),
            us(&whole, median),
            us(&whole, min),
        );
    }
    black_box(d);
}

/// Handles `msg` on `conn` and every step it leads to (each write made
/// durable at once, in order), as [`Driver::feed`] does; returns how long
/// the step that launched took, and what was launched: (worker
/// connection, executor).
fn step_all(d: &mut Driver, conn: ConnId, msg: Message) -> (f64, Vec<(ConnId, ExecutorId)>) {
    let mut queue = VecDeque::from([master::Event::Message { conn, msg }]);
    let mut launched = Vec::new();
    let mut placing = 0.0;
    while let Some(ev) = queue.pop_front() {
        let watch = Instant::now();
        let out = d.m.handle(d.now, ev);
        let took = watch.elapsed().as_secs_f64();
        let before = launched.len();
        for a in out {
            match a {
                master::Action::Store(StoreCommand::Persist { write, .. })
                | master::Action::Store(StoreCommand::Unpersist { write, .. }) => {
                    queue.push_back(master::Event::Store(StoreEvent::Persisted { write }));
                }
                master::Action::Send { conn, msg: Message::LaunchExecutor { executor, .. } } => {
                    launched.push((conn, executor))
                }
                _ => {}
            }
        }
        if launched.len() > before {
            placing += took;
        }
    }
    (placing, launched)
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --all-targets` builds benches; nothing to run there
    }
    let n: u64 =
        std::env::var("REGENT_SCALE_WORKERS").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let only: Option<String> = std::env::var("REGENT_SCALE_ONLY").ok();
    let run = |name: &str| match only.as_deref() {
        None => true,
        Some(o) => o.split(',').any(|x| x == name),
    };
    println!("regent-core master at scale: {n} workers (REGENT_SCALE_WORKERS)");

    if run("registry") || run("placement") {
        let mut d = registered_leader(n, regent_core::policy::Placement::Spread, true);
        heartbeat_rounds(&mut d, n, 5);
        intervals(&d);
        sweeps_nothing_expired(&mut d, n, 9);
        if run("placement") {
            let frameworks = n / u64::from(SLOTS_PER_FRAMEWORK);
            place(&mut d, frameworks, SLOTS_PER_FRAMEWORK, "spread");
            snapshot(&mut d, n);
            heartbeat_rounds(&mut d, n, 2);
            sweeps_nothing_expired(&mut d, n, 9);
        }
        sweep_one_percent_expired(&mut d, n);
        black_box(d);
    }
    if run("drf") {
        let mut d = registered_leader(n, regent_core::policy::Placement::Spread, false);
        place_drf(&mut d, n);
        black_box(d);
    }
    if run("big-groups") {
        for (name, policy) in [
            ("spread", regent_core::policy::Placement::Spread),
            ("pack", regent_core::policy::Placement::Pack),
        ] {
            let mut d = registered_leader(n, policy, false);
            place(&mut d, n / u64::from(BIG_GROUP), BIG_GROUP, name);
            if policy == regent_core::policy::Placement::Pack {
                // Workers full of executors of big frameworks: every death
                // loses 16 executors, each a change to a 2,000-slot record.
                sweep_one_percent_expired(&mut d, n);
            }
            black_box(d);
        }
    }
    if only.as_deref().is_some_and(|o| o.split(',').any(|x| x == "preemption")) {
        preemption(n);
    }
    if run("recovery") {
        recovery(n);
    }
    if run("constraints") {
        constraints(n);
    }
    if run("refill") {
        refill(n);
    }
}

//! `regent load`: a load generator that speaks the real protocol.
//!
//! One process runs N simulated workers — each a real
//! [`WorkerNode`](regent_core::node::WorkerNode), the very composition
//! `regent worker` runs, with its registration, heartbeats, failover and
//! reconnection rules — and optionally M frameworks, each a real
//! [`SubmitNode`](regent_core::node::SubmitNode) declaring its share of K
//! executors. Every simulated peer has its own TCP connections (through the
//! daemons' dialler and connection code, so a cluster secret authenticates
//! them like any peer); only executors are simulated: a launch is reported
//! `Running` at once and a kill `Killed`, no process is started.
//!
//! What it measures: the time from the first dial to every worker
//! registered, heartbeat round trips (send of a `WorkerHeartbeat` to its
//! `HeartbeatAck`, over the measured seconds), rejections (`Shutdown`, a
//! worker or framework that gave up) and connection errors, the time from
//! the frameworks' declarations to every executor launched (a simulated
//! worker received its `LaunchExecutor`) and to every executor RUNNING (its
//! framework received the master's `ExecutorUpdate` saying so: the
//! worker's report went through the master and was forwarded), and — given
//! the master's pid — the master's CPU and RSS over the measured seconds
//! and its CPU from the declarations to every executor RUNNING (from
//! `/proc`).
//!
//! Several processes can share a load (`--shard I/N`) when one process's
//! file descriptors do not suffice: shard I names its workers
//! `load-I-<j>`, so shards never collide.
//!
//! The simulated peers of one process share one callback listener
//! (`--listen`, default `127.0.0.1:0` when every master is on loopback;
//! `--advertise`): every simulated worker and framework gives its address
//! in `Callback`, so a new leader — even one at an address none of them was
//! given — recovers their records and dials it. A leader dials each
//! distinct callback address once per leadership (the recorded addresses
//! are deduplicated in core), and what it says there, `MasterChanged`, is
//! the same for every peer behind the address, so the listener needs no
//! per-peer routing: the hint is handed to every simulated peer through its
//! own node's callback path (`Accepted` + `Message`), and each one follows
//! it only once that master's own `HelloReply` proves the epoch — as a
//! real worker does. Without a listener (`--no-callback`) the peers find a
//! new leader through `--masters` and the master set leaders advertise.

use crate::net::{spawn_connection, ConnHandle, NetConfig, NetEvent};
use regent_core::auth::Side;
use regent_core::ids::{ExecutorId, InstanceId};
use regent_core::node::submit::{self as snode, SubmitNode};
use regent_core::node::worker::{self as wnode, WorkerNode};
use regent_core::protocol::{ExecutorState, GroupSpec, Message};
use regent_core::subscriber;
use regent_core::worker;
use regent_core::{Addr, ConnId, Incarnation, Millis, WorkerId};
use regent_std::host::{cpu_ticks, rss_kb};
use smol::future;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many dials may be in flight at once: a cold start of tens of
/// thousands of connections would otherwise overflow the master's accept
/// backlog, and dropped SYNs are retried only after a second.
const DIALS_IN_FLIGHT: usize = 256;
/// How long one dial may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(5);

/// What `regent load` runs with.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// The cluster's name.
    pub cluster: String,
    /// The masters the simulated peers are given.
    pub masters: Vec<Addr>,
    /// Simulated workers in this process.
    pub workers: usize,
    /// This process's shard and the number of shards (`--shard I/N`).
    pub shard: (u32, u32),
    /// Cores each simulated worker offers.
    pub cores: u32,
    /// Memory each simulated worker offers, in MiB.
    pub memory_mb: u64,
    /// Seconds measured once every worker is registered.
    pub secs: u64,
    /// Frameworks to run.
    pub frameworks: usize,
    /// Executors the frameworks declare in total.
    pub executors: u32,
    /// The master's pid, for its CPU and RSS.
    pub master_pid: Option<u32>,
    /// How long to wait for every worker to register before measuring
    /// anyway.
    pub register_within: Duration,
    /// The connections' configuration (cluster, secret).
    pub net: Arc<NetConfig>,
    /// Dial non-loopback masters without a secret.
    pub insecure: bool,
    /// Where the shared callback listener binds (`None`: no listener).
    pub listen: Option<std::net::SocketAddr>,
    /// The address masters should dial for it (default: the bound one).
    pub advertise: Option<String>,
    /// Start the simulated peers evenly over this long instead of all at
    /// once: their heartbeats are then spread over the interval as a real
    /// cluster's are, rather than phase-aligned by a cold start (the round
    /// trips then measure the master, not the burst). Registration time
    /// includes the spread.
    pub spread_start: Duration,
}

/// What a load run measured.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct LoadReport {
    /// Simulated workers.
    pub workers: usize,
    /// Workers registered at the end of the run.
    pub registered: usize,
    /// From the first dial to every worker registered, in ms (`None`: not
    /// all registered).
    pub registration_ms: Option<f64>,
    /// The heartbeat interval the master gave, in ms.
    pub heartbeat_interval_ms: u64,
    /// Seconds measured.
    pub secs: f64,
    /// Heartbeat round trips measured.
    pub heartbeats: u64,
    /// Heartbeats acknowledged per second over the measured seconds.
    pub heartbeats_per_sec: f64,
    /// Round-trip percentiles, in ms.
    pub rtt_p50_ms: f64,
    /// 90th percentile.
    pub rtt_p90_ms: f64,
    /// 99th percentile.
    pub rtt_p99_ms: f64,
    /// The largest round trip.
    pub rtt_max_ms: f64,
    /// `Shutdown`s received and peers that gave up.
    pub rejections: u64,
    /// Connections that failed or were closed by the master, and failed
    /// dials.
    pub errors: u64,
    /// Executors launched on the simulated workers.
    pub executors_launched: u64,
    /// From the frameworks' start to every executor launched, in ms.
    pub executors_ms: Option<f64>,
    /// Distinct executors the frameworks were told are RUNNING (by the
    /// master's `ExecutorUpdate`).
    pub executors_running: u64,
    /// From the frameworks' declarations to every declared executor
    /// RUNNING as its framework was told, in ms (`None`: not all were).
    pub running_ms: Option<f64>,
    /// Executors RUNNING per second: the declared executors over
    /// [`LoadReport::running_ms`].
    pub running_per_sec: Option<f64>,
    /// From the frameworks' declarations to every executor RUNNING or, if
    /// some never were, to the end of the run, in ms: with
    /// [`LoadReport::executors_running`], the rate of a run cut short.
    pub placement_window_ms: Option<f64>,
    /// The master's CPU over [`LoadReport::placement_window_ms`], % of one
    /// core.
    pub master_cpu_placement_percent: Option<f64>,
    /// This load process's own CPU over the same window, % of one core (its
    /// simulated peers run on one thread: at 100 % the generator, not the
    /// master, bounds the rate).
    pub load_cpu_placement_percent: Option<f64>,
    /// The master's CPU over the measured seconds, % of one core.
    pub master_cpu_percent: Option<f64>,
    /// The master's RSS at the end, in kB.
    pub master_rss_kb: Option<u64>,
    /// The master's RSS before the first dial, in kB.
    pub master_rss_idle_kb: Option<u64>,
    /// The shared callback listener's address (`None`: no listener).
    pub callback: Option<String>,
    /// Masters that dialled the callback listener and said they lead.
    pub contacts: u64,
}

impl LoadReport {
    /// The report as lines for a person.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![
            format!(
                "workers: {} of {} registered{}",
                self.registered,
                self.workers,
                match self.registration_ms {
                    Some(ms) => format!(" in {ms:.0} ms"),
                    None => String::new(),
                }
            ),
            format!(
                "heartbeats: {} over {:.1} s ({:.0}/s, interval {} ms); round trip p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                self.heartbeats,
                self.secs,
                self.heartbeats_per_sec,
                self.heartbeat_interval_ms,
                self.rtt_p50_ms,
                self.rtt_p90_ms,
                self.rtt_p99_ms,
                self.rtt_max_ms
            ),
            format!("rejections: {}, errors: {}", self.rejections, self.errors),
        ];
        if let Some(cb) = &self.callback {
            v.push(format!(
                "callback listener {cb}: {} leader contact(s), each handed to every simulated peer",
                self.contacts
            ));
        }
        if self.executors_launched > 0 || self.executors_ms.is_some() {
            v.push(format!(
                "executors launched: {}{}",
                self.executors_launched,
                match self.executors_ms {
                    Some(ms) => format!(" (all in {ms:.0} ms)"),
                    None => String::new(),
                }
            ));
            v.push(format!(
                "executors RUNNING (as their frameworks were told): {}{}{}{}",
                self.executors_running,
                match (self.running_ms, self.running_per_sec) {
                    (Some(ms), Some(rate)) => format!(" (all in {ms:.0} ms, {rate:.0}/s)"),
                    _ => String::new(),
                },
                match self.master_cpu_placement_percent {
                    Some(cpu) => format!(", master CPU {cpu:.1} % of one core meanwhile"),
                    None => String::new(),
                },
                match self.load_cpu_placement_percent {
                    Some(cpu) => format!(", this load's {cpu:.1} %"),
                    None => String::new(),
                }
            ));
        }
        if let (Some(cpu), Some(rss)) = (self.master_cpu_percent, self.master_rss_kb) {
            let per = match (self.master_rss_idle_kb, self.registered) {
                (Some(idle), n) if n > 0 => {
                    format!(
                        ", {:.1} kB per worker above idle",
                        (rss.saturating_sub(idle)) as f64 / n as f64
                    )
                }
                _ => String::new(),
            };
            v.push(format!("master: CPU {cpu:.1} % of one core, RSS {rss} kB{per}"));
        }
        v
    }
}

/// A simulated peer.
enum Peer {
    Worker(Box<WorkerNode>),
    Framework(Box<SubmitNode>),
}

enum PeerInput {
    Worker(wnode::Input),
    Framework(snode::Input),
}

enum Wake {
    Net(NetEvent),
    Accepted(smol::net::TcpStream),
    Dialled(usize, Dial, Result<crate::net::Dialled, String>),
    Deadline,
    End,
}

#[derive(Clone, Copy)]
enum Dial {
    Worker(wnode::DialId),
    Framework(regent_core::node::DialId),
}

struct Load {
    /// The peers' clock (boot time, like every daemon's).
    clock: crate::RuntimeClock,
    peers: Vec<Peer>,
    /// The next deadline of each peer, as queued in `timers`.
    scheduled: Vec<Option<Millis>>,
    timers: BinaryHeap<Reverse<(Millis, usize)>>,
    conns: HashMap<ConnId, (usize, ConnHandle)>,
    /// Connections masters dialled to the shared callback listener.
    callbacks: HashMap<ConnId, ConnHandle>,
    /// Callback connections that delivered a leader's `MasterChanged`.
    contacts: u64,
    next_conn: u64,
    net: Arc<NetConfig>,
    insecure: bool,
    net_tx: async_channel::Sender<NetEvent>,
    dial_tx: async_channel::Sender<(usize, Dial, Result<crate::net::Dialled, String>)>,
    dials_waiting: VecDeque<(usize, Dial, Addr)>,
    dials_out: usize,
    /// Heartbeats in flight: connection → send time.
    heartbeat_sent: HashMap<ConnId, Instant>,
    measuring: bool,
    rtts_us: Vec<u32>,
    registered: Vec<bool>,
    registered_count: usize,
    all_registered: Option<Instant>,
    interval: Millis,
    rejections: u64,
    errors: u64,
    launched: u64,
    /// Executors the frameworks were told are RUNNING.
    running: HashSet<ExecutorId>,
    gave_up: Vec<bool>,
}

fn incarnation() -> u64 {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).expect("OS entropy");
    u64::from_le_bytes(b)
}

/// The `p` quantile (0 to 1) of `sorted` round trips in microseconds, in
/// milliseconds (0 when there are none): the one definition of the round
/// trip figures `regent load` reports and the scale bench's floor and probe
/// report beside them.
pub fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i.min(sorted.len() - 1)]) / 1000.0
}

/// A process's CPU between two readings of its clock ticks `secs` apart,
/// in % of one core (a tick is 1/100 s, so ticks per second is the
/// percentage); `None` without both readings or without time between them.
fn cpu_rate(from: Option<u64>, to: Option<u64>, secs: f64) -> Option<f64> {
    match (from, to) {
        (Some(a), Some(b)) if secs > 0.0 => Some(b.saturating_sub(a) as f64 / secs),
        _ => None,
    }
}

/// Why a load ([`run_load`]) could not run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// `--masters` named no master.
    #[error("--masters names no master")]
    NoMaster,
    /// Neither workers nor frameworks were asked for.
    #[error("nothing to run: --workers and --frameworks are both 0")]
    NothingToRun,
    /// Executors were asked for without frameworks to run them.
    #[error("--executors needs --frameworks M (M > 0)")]
    ExecutorsWithoutFrameworks,
    /// The shared callback listener could not listen.
    #[error(transparent)]
    Callback(#[from] crate::net::CallbackError),
}

crate::error::into_report!(LoadError);

/// Runs the load until every worker registered and `secs` were measured
/// (or a bound passed), then stops every simulated peer and reports.
pub async fn run_load(opts: LoadOptions) -> Result<LoadReport, LoadError> {
    if opts.masters.is_empty() {
        return Err(LoadError::NoMaster);
    }
    if opts.workers == 0 && opts.frameworks == 0 {
        return Err(LoadError::NothingToRun);
    }
    if opts.frameworks == 0 && opts.executors > 0 {
        return Err(LoadError::ExecutorsWithoutFrameworks);
    }
    let (shard, shards) = opts.shard;
    // The shared callback listener, bound before any peer says where it is.
    let (accept_rx, _listener, callback) = match opts.listen {
        Some(listen) => {
            let (bound, rx, task) = crate::net::callback_listener(listen).await?;
            let advertise = opts.advertise.clone().unwrap_or_else(|| bound.to_string());
            tracing::info!(listen = %bound, %advertise, "shared callback listener");
            (rx, Some(task), Some(Addr::new(advertise)))
        }
        None => (async_channel::unbounded().1, None, None),
    };
    let start = Instant::now();
    let mut peers = Vec::with_capacity(opts.workers + opts.frameworks);
    for j in 0..opts.workers {
        let inc = Incarnation(incarnation());
        let mut c = worker::Config::new(
            opts.cluster.clone(),
            WorkerId::new(format!("load-{shard}-{j}")),
            inc,
            opts.masters.clone(),
            opts.cores,
            opts.memory_mb,
        );
        c.callback = callback.clone();
        peers.push(Peer::Worker(Box::new(WorkerNode::new(c))));
    }
    for f in 0..opts.frameworks {
        let mut c = subscriber::Config::new(
            opts.cluster.clone(),
            format!("load-{shard}-f{f}"),
            InstanceId(incarnation()),
            opts.masters.clone(),
        );
        c.failover_timeout = Millis::from_secs(60);
        c.callback = callback.clone();
        peers.push(Peer::Framework(Box::new(SubmitNode::new(snode::Config::new(c)))));
    }
    let n = peers.len();
    let (net_tx, net_rx) = async_channel::unbounded();
    let (dial_tx, dial_rx) = async_channel::unbounded();
    let mut l = Load {
        clock: crate::RuntimeClock::start(),
        peers,
        scheduled: vec![None; n],
        timers: BinaryHeap::new(),
        conns: HashMap::new(),
        callbacks: HashMap::new(),
        contacts: 0,
        next_conn: 0,
        net: opts.net.clone(),
        insecure: opts.insecure,
        net_tx,
        dial_tx,
        dials_waiting: VecDeque::new(),
        dials_out: 0,
        heartbeat_sent: HashMap::new(),
        measuring: false,
        rtts_us: Vec::new(),
        registered: vec![false; n],
        registered_count: 0,
        all_registered: None,
        interval: Millis::ZERO,
        rejections: 0,
        errors: 0,
        launched: 0,
        running: HashSet::new(),
        gave_up: vec![false; n],
    };
    let idle_rss = opts.master_pid.and_then(rss_kb);
    tracing::info!(
        workers = opts.workers,
        frameworks = opts.frameworks,
        shard,
        shards,
        "load starts"
    );
    // Peer i starts at i/n of the spread.
    let mut starts: VecDeque<(Instant, usize)> =
        (0..n).map(|i| (start + opts.spread_start.mul_f64(i as f64 / n as f64), i)).collect();
    // Frameworks declare their share once every worker is registered.
    let per = if opts.frameworks > 0 { opts.executors / opts.frameworks as u32 } else { 0 };
    let extra = if opts.frameworks > 0 { opts.executors % opts.frameworks as u32 } else { 0 };
    let mut declared_at: Option<Instant> = None;
    let mut executors_done: Option<Instant> = None;
    // When every declared executor was RUNNING, and the master's CPU ticks
    // at the declarations.
    let mut running_done: Option<Instant> = None;
    let mut declared_ticks: Option<u64> = None;
    let mut placement_cpu: Option<f64> = None;
    let mut own_ticks: Option<u64> = None;
    let mut own_cpu: Option<f64> = None;
    let mut placement_end: Option<Instant> = None;
    let mut measure_from: Option<(Instant, Option<u64>)> = None;
    let mut measured: Option<(f64, Option<f64>)> = None;
    // Bounds: registration within `register_within`; the run within that
    // + secs + 60 s.
    let register_by = start + opts.register_within;
    let end_by = register_by + Duration::from_secs(opts.secs + 60);
    loop {
        // Phase changes.
        let now = Instant::now();
        if l.all_registered.is_none() && l.registered_count == opts.workers {
            l.all_registered = Some(now);
            tracing::info!(
                workers = opts.workers,
                ms = now.duration_since(start).as_millis() as u64,
                "every worker registered"
            );
        }
        let ready = l.all_registered.is_some() || now > register_by;
        if ready && declared_at.is_none() && opts.frameworks > 0 {
            declared_at = Some(now);
            declared_ticks = opts.master_pid.and_then(cpu_ticks);
            own_ticks = cpu_ticks(std::process::id());
            for f in 0..opts.frameworks {
                let slots = per + u32::from((f as u32) < extra);
                if slots == 0 {
                    continue;
                }
                let spec = GroupSpec {
                    group: "load".into(),
                    slots,
                    command: vec!["true".into()],
                    env: Vec::new(),
                    cores: 1,
                    memory_mb: 1,
                    policy: Default::default(),
                    launch: Default::default(),
                };
                l.feed(opts.workers + f, PeerInput::Framework(snode::Input::Declare(spec)));
            }
        }
        if executors_done.is_none()
            && declared_at.is_some()
            && l.launched >= u64::from(opts.executors)
        {
            executors_done = Some(now);
        }
        if let (None, Some(declared)) = (running_done, declared_at) {
            if l.running.len() as u64 >= u64::from(opts.executors) {
                running_done = Some(now);
                placement_end = Some(now);
                let secs = now.duration_since(declared).as_secs_f64();
                placement_cpu = cpu_rate(declared_ticks, opts.master_pid.and_then(cpu_ticks), secs);
                own_cpu = cpu_rate(own_ticks, cpu_ticks(std::process::id()), secs);
            }
        }
        if ready && measure_from.is_none() {
            // A second to settle, then measure.
            l.rtts_us.clear();
            measure_from = Some((now + Duration::from_secs(1), None));
        }
        if let Some((from, ticks)) = measure_from.as_mut() {
            if !l.measuring && now >= *from {
                l.measuring = true;
                l.rtts_us.clear();
                *from = now;
                *ticks = opts.master_pid.and_then(cpu_ticks);
            }
            if l.measuring && now >= *from + Duration::from_secs(opts.secs) && measured.is_none() {
                let secs = now.duration_since(*from).as_secs_f64();
                let cpu = cpu_rate(*ticks, opts.master_pid.and_then(cpu_ticks), secs);
                measured = Some((secs, cpu));
                l.measuring = false;
            }
        }
        let frameworks_done =
            opts.frameworks == 0 || (executors_done.is_some() && running_done.is_some());
        if (measured.is_some() && frameworks_done) || now > end_by {
            if let (None, Some(declared)) = (running_done, declared_at) {
                // Cut short: the window and the CPU up to now.
                let secs = now.duration_since(declared).as_secs_f64();
                placement_cpu = cpu_rate(declared_ticks, opts.master_pid.and_then(cpu_ticks), secs);
                own_cpu = cpu_rate(own_ticks, cpu_ticks(std::process::id()), secs);
                placement_end = Some(now);
            }
            break;
        }
        while let Some(&(at, i)) = starts.front() {
            if at > now {
                break;
            }
            starts.pop_front();
            l.feed(i, l.start_input(i));
        }
        let next_start = starts.front().map(|(at, _)| *at);
        let deadline = l.clock.wake_at(l.timers.peek().map(|Reverse((at, _))| *at));
        let deadline = match (deadline, next_start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let tick = now + Duration::from_millis(50);
        let wake = future::or(
            future::or(
                future::or(
                    async { Wake::Net(net_rx.recv().await.expect("the load holds a sender")) },
                    async {
                        let (i, d, r) = dial_rx.recv().await.expect("the load holds a sender");
                        Wake::Dialled(i, d, r)
                    },
                ),
                async {
                    match accept_rx.recv().await {
                        Ok(stream) => Wake::Accepted(stream),
                        // No listener: never wakes.
                        Err(_) => future::pending().await,
                    }
                },
            ),
            async {
                match deadline {
                    Some(at) if at < tick => {
                        async_io::Timer::at(at).await;
                        Wake::Deadline
                    }
                    _ => {
                        async_io::Timer::at(tick).await;
                        Wake::End
                    }
                }
            },
        )
        .await;
        match wake {
            Wake::Net(ev) => {
                l.on_net(ev);
                // Drain what else is there, one handle call each.
                while let Ok(ev) = net_rx.try_recv() {
                    l.on_net(ev);
                }
            }
            Wake::Dialled(i, d, r) => l.on_dialled(i, d, r),
            Wake::Accepted(stream) => l.on_accepted(stream),
            Wake::Deadline | Wake::End => {}
        }
        l.run_due();
    }
    let (secs, cpu) = measured.unwrap_or((0.0, None));
    let mut rtts = std::mem::take(&mut l.rtts_us);
    rtts.sort_unstable();
    let report = LoadReport {
        workers: opts.workers,
        registered: l.registered.iter().take(opts.workers).filter(|r| **r).count(),
        registration_ms: l.all_registered.map(|t| t.duration_since(start).as_secs_f64() * 1000.0),
        heartbeat_interval_ms: l.interval.0,
        secs,
        heartbeats: rtts.len() as u64,
        heartbeats_per_sec: if secs > 0.0 { rtts.len() as f64 / secs } else { 0.0 },
        rtt_p50_ms: percentile(&rtts, 0.50),
        rtt_p90_ms: percentile(&rtts, 0.90),
        rtt_p99_ms: percentile(&rtts, 0.99),
        rtt_max_ms: rtts.last().map_or(0.0, |u| f64::from(*u) / 1000.0),
        rejections: l.rejections,
        errors: l.errors,
        executors_launched: l.launched,
        executors_ms: match (declared_at, executors_done) {
            (Some(a), Some(b)) => Some(b.duration_since(a).as_secs_f64() * 1000.0),
            _ => None,
        },
        executors_running: l.running.len() as u64,
        running_ms: match (declared_at, running_done) {
            (Some(a), Some(b)) => Some(b.duration_since(a).as_secs_f64() * 1000.0),
            _ => None,
        },
        running_per_sec: match (declared_at, running_done) {
            (Some(a), Some(b)) if b > a => {
                Some(f64::from(opts.executors) / b.duration_since(a).as_secs_f64())
            }
            _ => None,
        },
        placement_window_ms: match (declared_at, placement_end) {
            (Some(a), Some(b)) => Some(b.duration_since(a).as_secs_f64() * 1000.0),
            _ => None,
        },
        master_cpu_placement_percent: placement_cpu,
        load_cpu_placement_percent: own_cpu,
        // Clock ticks are 1/100 s: ticks per second is % of one core.
        master_cpu_percent: cpu,
        master_rss_kb: opts.master_pid.and_then(rss_kb),
        master_rss_idle_kb: idle_rss,
        callback: callback.map(|a| a.as_str().to_owned()),
        contacts: l.contacts,
    };
    for (_, (_, h)) in l.conns.drain() {
        h.close();
    }
    for (_, h) in l.callbacks.drain() {
        h.close();
    }
    // Let the closes reach the wire.
    async_io::Timer::after(Duration::from_millis(200)).await;
    Ok(report)
}

/// Dials `master` for peer `i`: a loopback master from one of 250 loopback
/// source addresses (127.0.N.x), so the kernel's ephemeral-port search stays
/// short at tens of thousands of connections; anything else through the
/// daemons' dialler.
async fn dial(
    master: &Addr,
    i: usize,
    has_secret: bool,
    insecure: bool,
) -> Result<crate::net::Dialled, String> {
    match master.as_str().parse::<std::net::SocketAddr>() {
        Ok(dst) if dst.ip().is_loopback() && dst.is_ipv4() => {
            let src =
                std::net::Ipv4Addr::new(127, 0, 1 + (i / 250 % 200) as u8, 1 + (i % 250) as u8);
            let attempt = async {
                let stream = regent_std::net::connect_from(src.into(), dst)
                    .map_err(|e| format!("cannot connect to {dst}: {e}"))?;
                let stream = async_io::Async::new(stream).map_err(|e| e.to_string())?;
                stream.writable().await.map_err(|e| format!("cannot connect to {dst}: {e}"))?;
                if let Some(e) = stream.get_ref().take_error().map_err(|e| e.to_string())? {
                    return Err(format!("cannot connect to {dst}: {e}"));
                }
                let stream = smol::net::TcpStream::from(stream);
                Ok(crate::net::Dialled { stream, addr: master.clone() })
            };
            future::or(attempt, async {
                async_io::Timer::after(DIAL_TIMEOUT).await;
                Err(format!("connecting to {dst} timed out after {DIAL_TIMEOUT:?}"))
            })
            .await
        }
        _ => crate::net::dial(master, has_secret, insecure, false, DIAL_TIMEOUT)
            .await
            .map_err(|e| e.reason),
    }
}

impl Load {
    fn start_input(&self, i: usize) -> PeerInput {
        match self.peers[i] {
            Peer::Worker(_) => PeerInput::Worker(wnode::Input::Start),
            Peer::Framework(_) => PeerInput::Framework(snode::Input::Start),
        }
    }

    /// Feeds peer `i` every due deadline.
    fn run_due(&mut self) {
        let now = self.clock.now();
        while let Some(Reverse((at, i))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            if self.scheduled[i] != Some(at) {
                continue; // superseded
            }
            self.scheduled[i] = None;
            let input = match self.peers[i] {
                Peer::Worker(_) => PeerInput::Worker(wnode::Input::Tick),
                Peer::Framework(_) => PeerInput::Framework(snode::Input::Tick),
            };
            self.feed(i, input);
        }
    }

    /// One `handle` call of peer `i` (and of the inputs its outputs queue),
    /// executing every output in order.
    fn feed(&mut self, i: usize, input: PeerInput) {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let now = self.clock.now();
            match (&mut self.peers[i], input) {
                (Peer::Worker(node), PeerInput::Worker(input)) => {
                    let outputs = node.handle(now, input);
                    for o in outputs {
                        self.worker_output(i, o, &mut queue);
                    }
                }
                (Peer::Framework(node), PeerInput::Framework(input)) => {
                    let outputs = node.handle(now, input);
                    for o in outputs {
                        self.framework_output(i, o);
                    }
                }
                _ => unreachable!("inputs match their peer"),
            }
        }
        let next = match &self.peers[i] {
            Peer::Worker(n) => n.poll_timeout(),
            Peer::Framework(n) => n.poll_timeout(),
        };
        if next != self.scheduled[i] {
            self.scheduled[i] = next;
            if let Some(at) = next {
                self.timers.push(Reverse((at, i)));
            }
        }
    }

    fn worker_output(&mut self, i: usize, o: wnode::Output, queue: &mut VecDeque<PeerInput>) {
        match o {
            wnode::Output::Dial { dial, master } => self.dial(i, Dial::Worker(dial), master),
            wnode::Output::Send { conn, msg } => {
                if matches!(msg, Message::WorkerHeartbeat { .. }) {
                    self.heartbeat_sent.insert(conn, Instant::now());
                }
                if let Some((_, h)) = self.conns.get(&conn) {
                    h.send(msg);
                }
            }
            wnode::Output::Close { conn, .. } => {
                if let Some((_, h)) = self.conns.remove(&conn) {
                    h.close();
                }
            }
            wnode::Output::Executor(wnode::ExecutorCommand::Start { executor, .. }) => {
                self.launched += 1;
                let state = ExecutorState::Running;
                queue.push_back(PeerInput::Worker(wnode::Input::ExecutorChanged {
                    executor,
                    state,
                }));
            }
            wnode::Output::Executor(
                wnode::ExecutorCommand::Kill { executor }
                | wnode::ExecutorCommand::Stop { executor, .. },
            ) => {
                let state = ExecutorState::Killed;
                queue.push_back(PeerInput::Worker(wnode::Input::ExecutorChanged {
                    executor,
                    state,
                }));
            }
            // The load generator's executors are not real: every health
            // check passes at once.
            wnode::Output::Executor(wnode::ExecutorCommand::RunCheck(run)) => {
                let outcome = regent_core::health::CheckOutcome::Passed;
                let (executor, check, run) = (run.executor, run.check, run.run);
                queue.push_back(PeerInput::Worker(wnode::Input::CheckResult {
                    executor,
                    check,
                    run,
                    outcome,
                }));
            }
            wnode::Output::Exit { reason } => {
                if !self.gave_up[i] {
                    self.gave_up[i] = true;
                    self.rejections += 1;
                    tracing::warn!(worker = i, "a simulated worker gave up: {reason}");
                }
            }
            // Simulated workers run nothing: no output files.
            wnode::Output::ReadLog(req) => {
                let reason = format!("simulated worker: executor {} wrote nothing", req.executor);
                let result = regent_core::protocol::LogRead::Failed { reason };
                queue.push_back(PeerInput::Worker(req.answer(result)));
            }
            // The simulated peers share one network configuration.
            wnode::Output::Note(_) | wnode::Output::ConnTimeouts { .. } => {}
        }
    }

    fn framework_output(&mut self, i: usize, o: snode::Output) {
        match o {
            snode::Output::Dial { dial, master, .. } => self.dial(i, Dial::Framework(dial), master),
            snode::Output::Send { conn, msg } => {
                if let Some((_, h)) = self.conns.get(&conn) {
                    h.send(msg);
                }
            }
            snode::Output::Close { conn, .. } => {
                if let Some((_, h)) = self.conns.remove(&conn) {
                    h.close();
                }
            }
            snode::Output::Exit(exit) => {
                if !self.gave_up[i] {
                    self.gave_up[i] = true;
                    self.rejections += 1;
                    tracing::warn!(framework = i, "a simulated framework stopped: {exit:?}");
                }
            }
            snode::Output::Observed(subscriber::Action::ExecutorUpdate(info))
                if info.state == ExecutorState::Running =>
            {
                self.running.insert(info.id);
            }
            snode::Output::Show(_)
            | snode::Output::Observed(_)
            | snode::Output::ConnTimeouts { .. } => {}
        }
    }

    fn dial(&mut self, i: usize, d: Dial, master: Addr) {
        self.dials_waiting.push_back((i, d, master));
        self.start_dials();
    }

    fn start_dials(&mut self) {
        while self.dials_out < DIALS_IN_FLIGHT {
            let Some((i, d, master)) = self.dials_waiting.pop_front() else { return };
            self.dials_out += 1;
            let tx = self.dial_tx.clone();
            let (has_secret, insecure) = (self.net.secret.is_some(), self.insecure);
            smol::spawn(async move {
                let r = dial(&master, i, has_secret, insecure).await;
                let _ = tx.send((i, d, r)).await;
            })
            .detach();
        }
    }

    fn on_dialled(&mut self, i: usize, d: Dial, r: Result<crate::net::Dialled, String>) {
        self.dials_out -= 1;
        self.start_dials();
        let conn = match r {
            Ok(dialled) => {
                let _ = dialled.stream.set_nodelay(true);
                self.next_conn += 1;
                let conn = ConnId(self.next_conn);
                let h =
                    crate::net::spawn_dialled(dialled, conn, self.net.clone(), self.net_tx.clone());
                self.conns.insert(conn, (i, h));
                Ok(conn)
            }
            Err(reason) => {
                self.errors += 1;
                Err(reason)
            }
        };
        let input = match d {
            Dial::Worker(dial) => {
                PeerInput::Worker(wnode::Input::Dialled { dial, result: conn.into() })
            }
            Dial::Framework(dial) => {
                PeerInput::Framework(snode::Input::Dialled { dial, result: conn.into() })
            }
        };
        self.feed(i, input);
    }

    /// A master dialled the shared callback listener.
    fn on_accepted(&mut self, stream: smol::net::TcpStream) {
        let _ = stream.set_nodelay(true);
        self.next_conn += 1;
        let conn = ConnId(self.next_conn);
        let h = spawn_connection(stream, Side::Server, conn, self.net.clone(), self.net_tx.clone());
        tracing::debug!(peer = %h.peer, %conn, "a master dialled the shared callback listener");
        self.callbacks.insert(conn, h);
    }

    /// What a master says on the shared callback listener: a leader's
    /// `MasterChanged` goes to every simulated peer through its own node's
    /// callback path (each node closes "its" connection, which the load
    /// closes once, after all of them heard it); anything else is ignored,
    /// as a lone worker's node ignores it.
    fn on_callback_message(&mut self, conn: ConnId, msg: Message) {
        if !matches!(msg, Message::MasterChanged { .. }) {
            return;
        }
        self.contacts += 1;
        for i in 0..self.peers.len() {
            let (accepted, message) = match self.peers[i] {
                Peer::Worker(_) => (
                    PeerInput::Worker(wnode::Input::Accepted { conn }),
                    PeerInput::Worker(wnode::Input::Message { conn, msg: msg.clone() }),
                ),
                Peer::Framework(_) => (
                    PeerInput::Framework(snode::Input::Accepted { conn }),
                    PeerInput::Framework(snode::Input::Message { conn, msg: msg.clone() }),
                ),
            };
            self.feed(i, accepted);
            self.feed(i, message);
        }
        if let Some(h) = self.callbacks.remove(&conn) {
            h.close();
        }
    }

    fn on_net(&mut self, ev: NetEvent) {
        match ev {
            NetEvent::Message { conn, msg } if self.callbacks.contains_key(&conn) => {
                self.on_callback_message(conn, msg)
            }
            NetEvent::Closed { conn, .. } if self.callbacks.remove(&conn).is_some() => {}
            // Only masters act on tokens: a token's callback is closed.
            NetEvent::Authenticated { conn, .. } => {
                if let Some(c) = self.callbacks.get(&conn) {
                    c.close();
                }
            }
            NetEvent::Message { conn, msg } => {
                let Some((i, _)) = self.conns.get(&conn) else { return };
                let i = *i;
                match &msg {
                    Message::HeartbeatAck { .. } => {
                        if let Some(sent) = self.heartbeat_sent.remove(&conn) {
                            if self.measuring {
                                let us = sent.elapsed().as_micros().min(u128::from(u32::MAX));
                                self.rtts_us.push(us as u32);
                            }
                        }
                    }
                    Message::Registered { heartbeat_interval, .. } => {
                        self.interval = *heartbeat_interval;
                        if !self.registered[i] {
                            self.registered[i] = true;
                            self.registered_count += 1;
                        }
                    }
                    Message::Shutdown { .. } => self.rejections += 1,
                    _ => {}
                }
                let input = match self.peers[i] {
                    Peer::Worker(_) => PeerInput::Worker(wnode::Input::Message { conn, msg }),
                    Peer::Framework(_) => PeerInput::Framework(snode::Input::Message { conn, msg }),
                };
                self.feed(i, input);
            }
            NetEvent::Closed { conn, cause } => {
                self.heartbeat_sent.remove(&conn);
                let Some((i, _)) = self.conns.remove(&conn) else { return };
                self.errors += 1;
                tracing::debug!(peer = i, %conn, "connection closed: {cause}");
                let (how, reason) = (cause.ended(), cause.to_string());
                let input = match self.peers[i] {
                    Peer::Worker(_) => {
                        PeerInput::Worker(wnode::Input::Closed { conn, how, reason })
                    }
                    Peer::Framework(_) => {
                        PeerInput::Framework(snode::Input::Closed { conn, how, reason })
                    }
                };
                self.feed(i, input);
            }
        }
    }
}

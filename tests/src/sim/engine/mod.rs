//! The simulator's runtime: processes, network, ZooKeeper client side,
//! executors, timers and faults, all on one ordered event queue.
//!
//! Nothing here decides protocol: like a real runtime it executes the
//! outputs of the nodes and machines and feeds back what happens. Every
//! master process is one [`MasterNode`] in ZooKeeper mode: its election,
//! lease and recovery store all run as requests on its one session against
//! the [`ZkModel`], so the store *is* the model's nodes under
//! `<root>/state/`. Every worker process is one [`WorkerNode`] and every
//! subscriber process one [`SubmitNode`], driven as the runtimes drive them:
//! their dials become simulated dials (a fresh [`ConnId`] on success), their
//! sends and closes act on those connections, every end of a connection is
//! fed back as `Closed`, and each process has one Tick timer following its
//! node's `poll_timeout()`. One event is handled per step; the invariants
//! are checked after every step.
//!
//! Connection ends are classified as a kernel reports them (`Ended`): a
//! peer that closed its end or whose process died (its sockets closed by
//! the kernel) ends the connection *by the peer*; a connection broken by the
//! network (a segment never delivered) ends by a *timeout*. A probe of a
//! master's address (`Output::Probe`, the fast takeover's detector) is
//! refused while its process is down or its listener refuses
//! ([`Fault::ListenerRefuses`]), accepted while it is up (paused or not: the
//! kernel accepts for a frozen process), and fails after its timeout across
//! a partition; its answer comes back through the event queue.

// The invariants, checked after every step, are the engine's observers,
// so a child of it: they read the world the engine steps, and the engine
// calls their hooks.
pub mod invariants;
use super::schedule::{Fault, Schedule};
use super::{Knobs, RunStats, SimConfig, Violation, TRACE_LEN};
use invariants::Obs;
use regent_core::elector::{self, Elector};
use regent_core::ids::InstanceId;
use regent_core::master::{self, Master};
use regent_core::node::master::{self as mnode, Leadership, MasterNode};
use regent_core::node::submit::{self as snode, SubmitNode};
use regent_core::node::worker::{self as wnode, ExecutorCommand, LogReadRequest, WorkerNode};
use regent_core::node::{DialResult, Ended, ProbeResult};
use regent_core::protocol::{ExecutorReport, ExecutorState, GroupSpec, Message};
use regent_core::store::format::decode_named;
use regent_core::store::names::key_stem;
use regent_core::store::StoreCommand;
use regent_core::store::{Record, RecordKey};
use regent_core::subscriber;
use regent_core::testkit::zk::ZkModel;
use regent_core::worker;
use regent_core::zk::{MultiOp, RequestId, SessionId, ZkCommand, ZkError, ZkEvent, ZkOp, ZkResult};
use regent_core::{Addr, ConnId, ExecutorId, FrameworkId, Incarnation, MasterId, Millis};
use regent_core::{FrameworkId as Fid, WorkerId};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// An executor's group rules its record keeps for a re-adopting process:
/// the disconnect rule and the health checks ([`World::launch_rules`]).
type Readopt = (Option<regent_core::launch::Disconnect>, Vec<regent_core::launch::CheckSpec>);

pub(crate) mod api_client;
pub(crate) mod explore;
pub(crate) mod services;
pub(crate) mod shim;

/// The simulated cluster's name.
const CLUSTER: &str = "sim";

/// ZooKeeper root of the simulated cluster.
const ROOT: &str = "/regent/sim";
/// Where the masters' recovery store keeps its records (`<root>/state`).
pub(crate) const STATE: &str = "/regent/sim/state";
/// Client-library ping and server expiry cadence.
const ZK_TICK: Millis = Millis(200);

/// How often TCP tries again to send across a partition.
const RETRANSMIT_EVERY: Millis = Millis(200);
/// How long a dial across a partition takes to fail.
const CONNECT_TIMEOUT: Millis = Millis(1_000);
/// The hosts' wall clock at virtual time 0 (ms since the Unix epoch, in
/// 2026), before any [`Fault::ClockStep`].
const WALL_BASE: u64 = 1_780_000_000_000;
/// A wall-clock step ([`Fault::ClockStep`]): an hour.
const CLOCK_STEP: i64 = 3_600_000;
/// The word that makes an executor's command fail at once (a broken
/// update, `regent-soak --jobs`).
const BROKEN: &str = "broken-update";
/// How long a dropped ZooKeeper connection stays down by default.
const ZK_RECONNECT: Millis = Millis(50);

/// A process of the simulated cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Node {
    /// Master `i` (address `m<i>`).
    Master(usize),
    /// Worker `i` (id `w<i>`).
    Worker(usize),
    /// Subscriber `i` (framework name `f<i>`).
    Sub(usize),
}

/// The address of master `i`.
pub fn master_addr(i: usize) -> Addr {
    Addr(format!("m{i}"))
}

fn master_index(addr: &Addr) -> Option<usize> {
    addr.0.strip_prefix('m')?.parse().ok()
}

/// An input to a process's node.
#[derive(Clone, Debug)]
pub(crate) enum Input {
    /// For a master node.
    Master(mnode::Input),
    /// For a worker node.
    Worker(wnode::Input),
    /// For a submit node.
    Sub(snode::Input),
}

/// The dial a connection was opened for, in its client node's numbering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DialTag {
    Worker(wnode::DialId),
    Sub(snode::DialId),
    /// A standby's watch on the leader.
    Master(regent_core::node::DialId),
}

#[derive(Clone, Copy, Debug)]
enum ExecWhat {
    Running,
    Exit(i32),
    Killed,
    /// An adopted executor ended: not the worker's child, its exit status
    /// is unknown (reported `Lost`).
    AdoptedEnd,
    /// Its shim stopped it for its lease (already not running): the
    /// worker's process reads the recorded end ([`shim`]).
    ShimEnd,
}

#[derive(Clone, Debug)]
enum Ev {
    Input {
        node: Node,
        gen: u64,
        input: Input,
    },
    ToMaster {
        conn: ConnId,
        msg: Message,
    },
    ToClient {
        conn: ConnId,
        msg: Message,
    },
    MasterSeesClose {
        conn: ConnId,
    },
    ClientSeesClose {
        conn: ConnId,
    },
    DialDone {
        conn: ConnId,
        ok: bool,
    },
    /// The shim of singleton executor `x` on worker `w` looks at its lease
    /// ([`shim`]); not tied to a process run of the worker.
    Shim {
        w: usize,
        x: ExecutorId,
    },
    /// Master `from`'s probe (`probe`) reaches master `to`'s address.
    ProbeArrives {
        from: usize,
        gen: u64,
        probe: u64,
        to: usize,
    },
    /// A dial to a master that does not exist fails.
    DialFailed {
        node: Node,
        gen: u64,
        dial: DialTag,
    },
    Timer {
        node: Node,
        at: Millis,
        token: u64,
    },
    ZkExec {
        m: usize,
        link: u64,
        session: SessionId,
        req: RequestId,
        op: ZkOp,
    },
    ZkConnected {
        m: usize,
        gen: u64,
        link: u64,
        session: SessionId,
        timeout: Millis,
    },
    ZkLinkUp {
        m: usize,
        gen: u64,
    },
    /// A reply crosses a slow link ([`Fault::ZkLatency`]).
    ZkReply {
        m: usize,
        link: u64,
        req: RequestId,
        result: ZkResult,
    },
    ZkTick,
    Exec {
        w: usize,
        gen: u64,
        x: ExecutorId,
        what: ExecWhat,
    },
    /// A health check's probe answers worker `w`'s process `gen`
    /// ([`services`]).
    CheckResult {
        w: usize,
        gen: u64,
        x: ExecutorId,
        check: u8,
        run: u64,
        outcome: regent_core::health::CheckOutcome,
    },
    /// The framework of executor `x` on worker `w` reports its manual
    /// checks ([`services::Manual`]).
    ManualReport {
        w: usize,
        x: ExecutorId,
    },
    /// The operator promotes subscriber `s`'s deployments (`None`: the API
    /// client's job `api0`'s) ([`services::Manual`]).
    Promote {
        s: Option<usize>,
    },
    Fault(Fault),
    Unblock {
        from: Node,
        to: Node,
    },
    /// Try again to deliver what waited behind a partition on one direction
    /// of a TCP connection ([`World::send`]).
    Retransmit {
        conn: ConnId,
        to_master: bool,
    },
    Restart(Node),
    Resume(Node),
    Heal,
}

/// What ended a connection first, which decides how each end sees it end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EndCause {
    /// The client closed it (or its process died): the master sees an EOF.
    Client,
    /// The master closed it (or its process died): the client sees an EOF.
    Master,
    /// The network lost a segment for good: both ends time out.
    Broken,
    /// Reset under both ends while the master's listener refuses
    /// ([`Fault::ListenerRefuses`]): both ends see a reset by the peer.
    Cut,
}

impl EndCause {
    /// How the master's end of the connection ends.
    fn at_master(self) -> Ended {
        match self {
            EndCause::Client | EndCause::Cut => Ended::ByPeer,
            EndCause::Broken => Ended::TimedOut,
            EndCause::Master => Ended::Failed,
        }
    }

    /// How the client's end ends, and the reason a runtime would give.
    fn at_client(self) -> (Ended, &'static str) {
        match self {
            EndCause::Master => (Ended::ByPeer, "peer closed the connection"),
            EndCause::Cut => (Ended::ByPeer, "peer reset the connection"),
            EndCause::Broken => (Ended::TimedOut, "timed out: a segment was never delivered"),
            EndCause::Client => (Ended::Failed, "closed"),
        }
    }
}

/// One connection to a master, dialled by a worker, a subscriber or
/// another master (a standby's watch on the leader).
#[derive(Clone, Debug)]
pub(crate) struct Conn {
    pub(crate) client: Node,
    pub(crate) m: usize,
    /// Established (dial completed).
    pub(crate) open: bool,
    /// The master's end is closed (it sends and receives nothing more).
    pub(crate) mclosed: bool,
    /// The client's end is closed (nothing more is sent or delivered on it).
    pub(crate) cclosed: bool,
    /// The client node was told the connection ended (`Closed`).
    pub(crate) ctold: bool,
    /// The dial that opened it.
    pub(crate) dial: DialTag,
    /// Reset: nothing more is sent on it.
    pub(crate) broken: bool,
    /// What ended it first, once something did.
    pub(crate) ended: Option<EndCause>,
    /// Process generations of both ends when it was dialled.
    pub(crate) mgen: u64,
    pub(crate) cgen: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Proc {
    pub(crate) gen: u64,
    pub(crate) up: bool,
    pub(crate) paused_until: Millis,
    deferred: VecDeque<Input>,
    /// Its host is suspended since then ([`Fault::Suspend`]), until
    /// `paused_until`: the kernel answers nothing either.
    suspended_from: Option<Millis>,
    /// How far its clock lags the simulator's: the suspends it slept
    /// through when the runtime's clock stops while the host sleeps
    /// (`Knobs::monotonic_clock`). 0 for the clock the runtimes use
    /// (CLOCK_BOOTTIME, docs/design.md#identity-and-time-do-not-trust-the-wall-clock), which counts a suspend.
    lag: Millis,
}

impl Proc {
    pub(crate) fn paused(&self, now: Millis) -> bool {
        now < self.paused_until
    }

    /// Its host is asleep now.
    pub(crate) fn suspended(&self, now: Millis) -> bool {
        self.suspended_from.is_some() && self.paused(now)
    }
}

#[derive(Debug, Default)]
pub(crate) struct ZkClient {
    pub(crate) session: Option<SessionId>,
    pub(crate) link_up: bool,
    down_until: Millis,
    link: u64,
    wants_session: Option<Millis>,
    inflight: BTreeSet<RequestId>,
    lose_next: Option<bool>,
    next_at: Millis,
    /// The store writes' own lane while they are slow
    /// ([`Fault::SlowStore`]): the next one lands no earlier than this.
    store_next_at: Millis,
    /// Extra one-way latency of this master's ZooKeeper link, until when
    /// ([`Fault::ZkLatency`]).
    extra: Millis,
    extra_until: Millis,
    /// Replies come back in order: the next one no earlier than this.
    reply_next_at: Millis,
}

impl ZkClient {
    /// The extra one-way latency of the link now.
    fn extra(&self, now: Millis) -> Millis {
        if now < self.extra_until {
            self.extra
        } else {
            Millis::ZERO
        }
    }
}

#[derive(Debug)]
pub(crate) struct MasterP {
    pub(crate) p: Proc,
    /// The master daemon's composition: master, elector, lease and store.
    pub(crate) node: MasterNode,
    guids: u64,
    pub(crate) zk: ZkClient,
    /// Injected failures of the next store writes (`true`: applied, then
    /// the reply is lost; `false`: the connection drops before it lands).
    store_fail: VecDeque<bool>,
    /// Its listener refuses connections until then although the process
    /// lives ([`Fault::ListenerRefuses`]).
    pub(crate) refusing_until: Millis,
}

impl MasterP {
    /// The master machine inside the node.
    pub(crate) fn master(&self) -> &Master {
        self.node.master()
    }

    /// The elector inside the node (the simulator runs ZooKeeper mode only).
    pub(crate) fn elector(&self) -> &Elector {
        self.node.elector().expect("simulated masters run in ZooKeeper mode")
    }
}

#[derive(Debug)]
pub(crate) struct WorkerP {
    pub(crate) p: Proc,
    /// The worker daemon's composition: the machine and its links.
    pub(crate) node: WorkerNode,
    pub(crate) exited: Option<String>,
    left_behind: Vec<ExecutorReport>,
}

impl WorkerP {
    /// The worker machine inside the node.
    pub(crate) fn worker(&self) -> &worker::Worker {
        self.node.worker()
    }
}

#[derive(Debug)]
pub(crate) struct SubP {
    pub(crate) p: Proc,
    /// The submitter's composition: the subscriber and its progress.
    pub(crate) node: SubmitNode,
    pub(crate) framework: Option<FrameworkId>,
    pub(crate) exited: Option<String>,
    /// The executors the program knows of (from `Subscribed` and updates,
    /// as the node's `Observed` outputs report them).
    pub(crate) view: BTreeMap<ExecutorId, ExecutorState>,
    /// The groups it declares (a job of one or two groups), in order.
    specs: Vec<GroupSpec>,
    /// Its next start updates its first group (`regent run --update`)
    /// with this `max_parallel`, to a broken command if `.1` (the
    /// exhaustive checker's [`World::restart_with_update`]).
    forced_update: Option<(u32, bool)>,
}

impl SubP {
    /// The subscriber machine inside the node.
    pub(crate) fn sub(&self) -> &subscriber::Subscriber {
        self.node.subscriber()
    }
}

/// The whole simulated cluster.
#[derive(Debug)]
pub(crate) struct World {
    pub(crate) now: Millis,
    rng: fastrand::Rng,
    cfg: SimConfig,
    schedule: Schedule,
    queue: BTreeMap<(Millis, u64), Ev>,
    seq: u64,
    pub(crate) zk: ZkModel,
    pub(crate) masters: Vec<MasterP>,
    pub(crate) workers: Vec<WorkerP>,
    pub(crate) subs: Vec<SubP>,
    pub(crate) conns: BTreeMap<ConnId, Conn>,
    next_conn: u64,
    /// Request ids of the kills the simulator injects for subscribers.
    next_kill: u64,
    fifo: BTreeMap<(ConnId, bool), Millis>,
    /// Frames of a TCP connection's direction held behind a partition, in
    /// order ([`World::send`]).
    unsent: BTreeMap<(ConnId, bool), VecDeque<Message>>,
    pub(crate) blocked: BTreeMap<(Node, Node), u32>,
    /// Each process's one Tick timer (its node's `poll_timeout`).
    timers: BTreeMap<Node, (Millis, u64)>,
    next_token: u64,
    /// Executor processes: running or not, per worker and id.
    execs: BTreeMap<(usize, ExecutorId), bool>,
    /// What each executor's record keeps of its group's rules, as the real
    /// worker's record does (`sandbox=`, the disconnect rule, the checks):
    /// a process that re-adopts the executor is given them again
    /// (`Input::Readopted`, docs/design.md#issue-45). Only executors with a
    /// disconnect rule or checks.
    launch_rules: BTreeMap<ExecutorId, Readopt>,
    /// How many re-adopted executors were given their rules again.
    readopted_with_rules: u64,
    /// Faults are on until then (network chaos too).
    pub(crate) heal_at: Millis,
    pub(crate) healed: bool,
    pub(crate) obs: Obs,
    pub(crate) pending: Option<Violation>,
    trace: Option<VecDeque<String>>,
    events: u64,
    executors_started: u64,
    /// Of them, those given named resources' addresses.
    resource_executors_started: u64,
    step_downs: u64,
    /// Operator changes sent ([`Fault::Operate`]).
    operator_changes: u64,
    /// The API client ([`Fault::ApiJob`]).
    pub(crate) api: api_client::ApiClient,
    /// Scales naming executors among them.
    named_scales: u64,
    depositions: u64,
    live_depositions: u64,
    local: VecDeque<(Node, Input)>,
    /// Store writes issued before then take `.1` to land
    /// ([`Fault::SlowStore`]; `u64::MAX`: for good, not healed).
    slow_store: (Millis, Millis),
    /// Each master host's ZooKeeper link latency: (until, extra one way)
    /// ([`Fault::ZkLatency`]; until `u64::MAX`: for good). A restarted
    /// process keeps its host's link.
    zk_links: Vec<(Millis, Millis)>,
    /// Each host's wall-clock offset from [`WALL_BASE`] + now, in ms
    /// ([`Fault::ClockStep`]).
    wall_offset: BTreeMap<Node, i64>,
    /// The last id each host's process series drew ([`World::process_id`]).
    last_ids: BTreeMap<Node, u64>,
    /// Executors run until the exhaustive checker ends them (no random
    /// exits: [`World::script_executors`]).
    scripted_execs: bool,
    /// When an exhaustive checker's scenario was set up
    /// ([`World::mark_settled`]).
    settled_at: Millis,
    /// How many trace lines are kept ([`TRACE_LEN`] unless the checker
    /// asks for more).
    trace_len: usize,
    /// The names of the singleton groups (`--singletons`): those with a
    /// disconnect rule ([`invariants::singleton_slots`]).
    pub(crate) singleton_groups: BTreeSet<String>,
    /// The health checks' runner (`--services`, [`services`]).
    pub(crate) checks: services::Model,
    /// The executor shims' leases and the hosts' word files ([`shim`]).
    pub(crate) shim: shim::Model,
}

impl World {
    /// Store writes or the ZooKeeper link may be slower than every client
    /// timer in this run (`--slow-store`, `--zk-latency`).
    pub(crate) fn slow_dependencies(&self) -> bool {
        self.cfg.slow_store || self.cfg.zk_latency
    }

    /// The master acting as leader, if one is.
    pub(crate) fn acting_leader(&self) -> Option<usize> {
        (0..self.masters.len()).find(|&m| {
            self.masters[m].p.up
                && self.masters[m].elector().is_acting(self.node_now(Node::Master(m)))
        })
    }
}

fn spec_for(s: usize, slots: u32) -> GroupSpec {
    GroupSpec {
        group: format!("g{s}"),
        slots,
        command: vec!["run".into(), format!("job-{s}")],
        env: Vec::new(),
        cores: 1,
        memory_mb: 256,
        policy: Default::default(),
        launch: Default::default(),
    }
}

impl World {
    pub(crate) fn new(seed: u64, cfg: &SimConfig, schedule: &Schedule, trace: bool) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let knobs = cfg.knobs;
        let masters = (0..cfg.masters)
            .map(|i| MasterP {
                p: Proc::default(),
                node: new_node(i, 0, knobs, 0, session_timeout(cfg)),
                guids: 0,
                zk: ZkClient { link_up: true, ..ZkClient::default() },
                store_fail: VecDeque::new(),
                refusing_until: Millis::ZERO,
            })
            .collect();
        let workers = (0..cfg.workers)
            .map(|i| WorkerP {
                p: Proc::default(),
                node: new_worker(i, Incarnation((i as u64 + 1) << 32), cfg.masters, knobs, seed),
                exited: None,
                left_behind: Vec::new(),
            })
            .collect();
        // A second group for some subscribers (a job of two groups), drawn
        // from a generator of its own so the main one's draws, and so every
        // recorded seed's schedule, stay as they were.
        let mut jobs = fastrand::Rng::with_seed(seed ^ 0x6a6f_6273);
        // Some second groups have a restart policy of their own (a batch
        // retry budget per slot with a backoff), drawn from a third
        // generator for the same reason.
        let mut restarts = fastrand::Rng::with_seed(seed ^ 0x7265_7374);
        // And some a placement policy (spread over the racks, a constraint
        // every worker meets, or a placement of their own), from a fourth.
        let mut places = fastrand::Rng::with_seed(seed ^ 0x636f_6e73);
        // And some name a port (numbered by their worker), from a fifth.
        let mut ports = fastrand::Rng::with_seed(seed ^ 0x706f_7274);
        // And some ask for GPUs (addresses picked by their worker), from a
        // sixth.
        let mut gpus = fastrand::Rng::with_seed(seed ^ 0x6770_7573);
        // And some groups with a restart policy are services (restarted
        // whenever their executors end), from a seventh.
        let mut services = fastrand::Rng::with_seed(seed ^ 0x7365_7276);
        // And, with `--singletons`, three in four first groups are
        // singletons, from an eighth.
        let mut singles = fastrand::Rng::with_seed(seed ^ 0x0051_6e61);
        // And, with `--services`, first groups are services with checks
        // and an update policy, from a ninth.
        let mut svc = fastrand::Rng::with_seed(seed ^ 0x7376_6373);
        // And, with `--services`, manual checks and canaries left to the
        // operator, from a tenth (docs/design.md#issue-45 item 5).
        let mut svc_more = fastrand::Rng::with_seed(seed ^ 0x6d6f_7265);
        let mut singleton_groups = BTreeSet::new();
        if cfg.singletons && cfg.api_jobs {
            singleton_groups.insert(api_client::SINGLETON_GROUP.to_owned());
        }
        let subs = (0..cfg.subscribers)
            .map(|i| {
                let slots = rng.u32(1..=3);
                let mut specs = vec![spec_for(i, slots)];
                if cfg.services {
                    services::make_service(&mut specs[0], &mut svc, &mut svc_more);
                }
                if cfg.singletons && singles.u8(0..4) > 0 {
                    let stop_after = singles.u64(1_000..=20_000);
                    specs[0].launch.disconnect =
                        Some(regent_core::launch::Disconnect::after_ms(stop_after));
                    singleton_groups.insert(specs[0].group.clone());
                }
                if jobs.bool() {
                    let mut second = spec_for(i, jobs.u32(1..=2));
                    second.group = format!("g{i}-b");
                    if restarts.bool() {
                        second.policy.restart = regent_core::policy::RestartPolicy {
                            attempts: Some(restarts.u32(1..=4)),
                            delay_ms: restarts.u64(100..2_000),
                            max_delay_ms: 4_000,
                            healthy_after_ms: restarts.u64(0..20_000),
                            ..Default::default()
                        };
                        if services.u8(0..3) == 0 {
                            second.policy.restart.mode = regent_core::policy::RestartMode::Service;
                            // A service is restarted forever unless a
                            // budget is given; half of them have none.
                            if services.bool() {
                                second.policy.restart.attempts = None;
                            }
                        }
                    }
                    match places.u8(0..4) {
                        0 => second.policy.spread = Some("rack".into()),
                        1 => {
                            second.policy.constraints =
                                vec![regent_core::policy::Constraint::parse("rack in [r0, r1]")
                                    .expect("a constraint")]
                        }
                        2 => second.policy.placement = Some(regent_core::policy::Placement::Pack),
                        _ => {}
                    }
                    if ports.bool() {
                        second.launch.ports = vec!["http".into()];
                    }
                    if gpus.u8(0..3) == 0 {
                        second.launch.resources = vec![("gpu".into(), gpus.u32(1..=2))];
                    }
                    specs.push(second);
                }
                SubP {
                    p: Proc::default(),
                    node: new_sub(
                        i,
                        InstanceId((i as u64 + 1) << 32),
                        None,
                        cfg.masters,
                        seed,
                        None,
                    ),
                    framework: None,
                    exited: None,
                    view: BTreeMap::new(),
                    specs,
                    forced_update: None,
                }
            })
            .collect();
        let mut w = World {
            now: Millis::ZERO,
            rng,
            cfg: cfg.clone(),
            schedule: schedule.clone(),
            queue: BTreeMap::new(),
            seq: 0,
            zk: ZkModel::new(Millis(200)).with_packet_limit(cfg.zk_packet_limit),
            masters,
            workers,
            subs,
            conns: BTreeMap::new(),
            next_conn: 1,
            next_kill: 1 << 48,
            fifo: BTreeMap::new(),
            unsent: BTreeMap::new(),
            blocked: BTreeMap::new(),
            timers: BTreeMap::new(),
            next_token: 0,
            execs: BTreeMap::new(),
            launch_rules: BTreeMap::new(),
            readopted_with_rules: 0,
            heal_at: Millis(u64::from(schedule.end().max(cfg.window_ms)) + 1),
            healed: false,
            obs: Obs::default(),
            pending: None,
            trace: trace.then(VecDeque::new),
            events: 0,
            executors_started: 0,
            resource_executors_started: 0,
            step_downs: 0,
            operator_changes: 0,
            api: api_client::ApiClient::default(),
            named_scales: 0,
            depositions: 0,
            live_depositions: 0,
            local: VecDeque::new(),
            slow_store: (Millis::ZERO, Millis::ZERO),
            zk_links: vec![(Millis::ZERO, Millis::ZERO); cfg.masters],
            wall_offset: BTreeMap::new(),
            last_ids: BTreeMap::new(),
            scripted_execs: false,
            settled_at: Millis::ZERO,
            // A replay may keep more (`REGENT_SIM_TRACE_LEN=N regent-soak
            // --replay SEED`).
            trace_len: std::env::var("REGENT_SIM_TRACE_LEN")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(TRACE_LEN),
            singleton_groups,
            checks: services::Model::new(seed),
            shim: shim::Model::default(),
        };
        w.obs.init(cfg);
        // The operator promotes the canaries left to it, from time to time
        // until the run ends (`--services`).
        for s in 0..w.subs.len() {
            let manual = w.subs[s].specs[0].policy.update.as_ref().is_some_and(|u| !u.auto_promote);
            if manual {
                let first = Millis(svc_more.u64(500..8_000));
                w.at(first, Ev::Promote { s: Some(s) });
            }
        }
        if cfg.services && cfg.api_jobs {
            let first = Millis(svc_more.u64(500..8_000));
            w.at(first, Ev::Promote { s: None });
        }
        for (t, f) in schedule.faults.clone() {
            w.at(Millis(u64::from(t)), Ev::Fault(f));
        }
        let heal_at = w.heal_at;
        w.at(heal_at, Ev::Heal);
        w.at(ZK_TICK, Ev::ZkTick);
        // Start everything, slightly staggered.
        for i in 0..cfg.masters {
            let d = Millis(w.rng.u64(0..50));
            w.at(d, Ev::Restart(Node::Master(i)));
        }
        for i in 0..cfg.workers {
            let d = Millis(w.rng.u64(0..300));
            w.at(d, Ev::Restart(Node::Worker(i)));
        }
        for i in 0..cfg.subscribers {
            let d = Millis(w.rng.u64(0..300));
            w.at(d, Ev::Restart(Node::Sub(i)));
        }
        w
    }

    /// Whether `invariant` is not checked in this run ([`SimConfig::skip`]).
    pub(crate) fn skips(&self, invariant: &str) -> bool {
        self.cfg.skip.iter().any(|s| s == invariant)
    }

    pub(crate) fn take_trace(&mut self) -> Vec<String> {
        self.trace.take().map(Vec::from).unwrap_or_default()
    }

    fn at(&mut self, t: Millis, ev: Ev) {
        self.seq += 1;
        self.queue.insert((t.max(self.now), self.seq), ev);
    }

    fn after(&mut self, d: Millis, ev: Ev) {
        let t = self.now + d;
        self.at(t, ev);
    }

    fn log(&mut self, what: impl FnOnce() -> String) {
        if let Some(t) = self.trace.as_mut() {
            if t.len() >= self.trace_len {
                t.pop_front();
            }
            let mut line = format!("{:>7} {}", self.now.0, what());
            if line.len() > 400 {
                let mut cut = 400;
                while !line.is_char_boundary(cut) {
                    cut -= 1;
                }
                line.truncate(cut);
                line.push('…');
            }
            t.push_back(line);
        }
    }

    // ----- the run ----------------------------------------------------------

    /// When the cluster must have settled: the liveness bound after the
    /// faults ended, plus, with a store that stays slow, one write per
    /// record the settling may have to make, one after another (the
    /// ZooKeeper store runs one job at a time, and a put after a delete
    /// is two writes: every worker's and framework's record twice, the
    /// epoch and a few more). Slower, never livelocked (docs/design.md#progress-when-dependencies-are-slow):
    /// a livelock misses any bound.
    fn liveness_deadline(&self) -> Millis {
        let bound = self.heal_at + Millis(u64::from(self.cfg.liveness_bound_ms));
        let (until, delay) = self.slow_store;
        if until <= self.heal_at {
            return bound;
        }
        let records = 2 * (self.cfg.workers + self.cfg.subscribers) as u64 + 4;
        bound + Millis(delay.0.saturating_mul(records))
    }

    pub(crate) fn run(&mut self) -> Result<RunStats, Violation> {
        let mut next_liveness = self.heal_at + Millis(500);
        while let Some(((t, _), ev)) = self.queue.pop_first() {
            if self.healed && t >= next_liveness {
                self.now = next_liveness;
                if invariants::liveness::holds(self).is_ok() {
                    return Ok(RunStats {
                        events: self.events,
                        end: self.now,
                        settled_after: self.now.since(self.heal_at),
                        leaderships: self.obs.leaderships,
                        executors_started: self.executors_started,
                        resource_executors_started: self.resource_executors_started,
                        step_downs: self.step_downs,
                        operator_changes: self.operator_changes,
                        named_scales: self.named_scales,
                        api_requests: self.api.sent,
                        api_accepted: self.api.accepted,
                        api_replayed: self.api.replayed,
                        preemptions: self.obs.preempted.len() as u64,
                        depositions: self.depositions,
                        live_depositions: self.live_depositions,
                        cut_off_stops: self.obs.cut_off_stops.len() as u64,
                        check_runs: self.checks.runs,
                        unhealthy_stops: self.obs.unhealthy_stops.len() as u64,
                        deployments_failed: self.obs.deploys.failed,
                        reverts_started: self.obs.deploys.reverts,
                        reverts_succeeded: self.obs.deploys.reverted,
                        manual_reports: self.checks.manual.reports_sent,
                        manual_reports_counted: self.checks.manual.reports_counted,
                        manual_stops: self.checks.manual.stopped.len() as u64,
                        promotions_sent: self.checks.manual.promotions_sent,
                        promotions: self.checks.manual.promotions,
                        promotions_refused: self.checks.manual.promotions_refused,
                        readopted_with_rules: self.readopted_with_rules,
                        shim_stops: self.shim.stops.down
                            + self.shim.stops.paused
                            + self.shim.stops.running,
                        shim_stops_down: self.shim.stops.down,
                        shim_stops_paused: self.shim.stops.paused,
                    });
                }
                next_liveness = next_liveness + Millis(500);
                let deadline = self.liveness_deadline();
                if next_liveness > deadline && self.skips("liveness") {
                    return Ok(RunStats {
                        events: self.events,
                        end: self.now,
                        leaderships: self.obs.leaderships,
                        executors_started: self.executors_started,
                        ..RunStats::default()
                    });
                }
                if next_liveness > deadline {
                    let detail = invariants::liveness::holds(self).err().unwrap_or_default();
                    return Err(Violation {
                        invariant: "liveness",
                        detail: format!(
                            "not settled {} after the faults ended: {detail}",
                            self.now.since(self.heal_at)
                        ),
                        at: self.now,
                    });
                }
            }
            self.now = t;
            self.events += 1;
            self.step(ev)?;
        }
        Err(Violation {
            invariant: "liveness",
            detail: "the event queue ran dry".into(),
            at: self.now,
        })
    }

    fn step(&mut self, ev: Ev) -> Result<(), Violation> {
        match ev {
            Ev::Input { node, gen, input } => self.deliver(node, gen, input),
            Ev::ToMaster { conn, msg } => {
                if let Some(c) = self.conns.get(&conn).filter(|c| !c.mclosed).cloned() {
                    self.deliver(
                        Node::Master(c.m),
                        c.mgen,
                        Input::Master(mnode::Input::Message { conn, msg }),
                    );
                }
            }
            Ev::ToClient { conn, msg } => {
                if let Some(c) = self.conns.get(&conn).filter(|c| !c.cclosed).cloned() {
                    if matches!(msg, Message::HealthOnWorker { .. }) {
                        // Remembered for a worker that takes it in after
                        // the connection is gone (paused meanwhile).
                        self.checks.manual.relayed_by.insert(conn, c.m);
                    }
                    let input = match c.client {
                        Node::Worker(_) => Input::Worker(wnode::Input::Message { conn, msg }),
                        Node::Sub(_) => Input::Sub(snode::Input::Message { conn, msg }),
                        Node::Master(_) => Input::Master(mnode::Input::Message { conn, msg }),
                    };
                    self.deliver(c.client, c.cgen, input);
                }
            }
            Ev::MasterSeesClose { conn } => {
                if let Some(c) = self.conns.get_mut(&conn).filter(|c| !c.mclosed) {
                    c.mclosed = true;
                    let (m, mgen) = (c.m, c.mgen);
                    let how = c.ended.map_or(Ended::Failed, EndCause::at_master);
                    let reason = "closed".to_string();
                    self.deliver(
                        Node::Master(m),
                        mgen,
                        Input::Master(mnode::Input::Closed { conn, how, reason }),
                    );
                }
                self.gc_conn(conn);
            }
            Ev::ClientSeesClose { conn } => {
                // Every end is fed to the client node, once, whoever closed
                // the connection (a node that closed it waits for its end).
                if let Some(c) = self.conns.get_mut(&conn).filter(|c| !c.ctold) {
                    let (how, reason) =
                        c.ended.map_or((Ended::Failed, "closed"), EndCause::at_client);
                    let reason = reason.to_string();
                    c.cclosed = true;
                    c.ctold = true;
                    let (client, cgen) = (c.client, c.cgen);
                    let input = match client {
                        Node::Worker(_) => {
                            Input::Worker(wnode::Input::Closed { conn, how, reason })
                        }
                        Node::Sub(_) => Input::Sub(snode::Input::Closed { conn, how, reason }),
                        Node::Master(_) => {
                            Input::Master(mnode::Input::Closed { conn, how, reason })
                        }
                    };
                    self.deliver(client, cgen, input);
                }
                self.gc_conn(conn);
            }
            Ev::DialDone { conn, ok } => self.dial_done(conn, ok),
            Ev::ProbeArrives { from, gen, probe, to } => {
                // The kernel answers for the process: a listener that is
                // gone (or refuses) sends a reset, one that is there
                // completes the handshake, paused process or not.
                let result =
                    if self.listening(to) { ProbeResult::Accepted } else { ProbeResult::Refused };
                let input = Input::Master(mnode::Input::Probed { probe, result });
                let back = Millis(self.rng.u64(1..3));
                self.after(back, Ev::Input { node: Node::Master(from), gen, input });
            }
            Ev::DialFailed { node, gen, dial } => {
                let input = dial_result(dial, Err("no such master".into()));
                self.deliver(node, gen, input);
            }
            Ev::Timer { node, at, token } => {
                if self.timers.get(&node) == Some(&(at, token)) {
                    self.timers.remove(&node);
                    let gen = self.proc(node).gen;
                    let input = match node {
                        Node::Master(_) => Input::Master(mnode::Input::Tick),
                        Node::Worker(_) => Input::Worker(wnode::Input::Tick),
                        Node::Sub(_) => Input::Sub(snode::Input::Tick),
                    };
                    self.deliver(node, gen, input);
                }
            }
            Ev::ZkExec { m, link, session, req, op } => self.zk_exec(m, link, session, req, op),
            Ev::ZkConnected { m, gen, link, session, timeout } => {
                // A client reports only the session it holds, on the
                // connection that opened it.
                let zk = &self.masters[m].zk;
                if zk.session == Some(session) && zk.link == link && zk.link_up {
                    let ev = ZkEvent::SessionConnected { session, timeout };
                    self.deliver(Node::Master(m), gen, Input::Master(mnode::Input::Zk(ev)));
                }
            }
            Ev::ZkLinkUp { m, gen } => self.zk_link_up(m, gen),
            Ev::ZkReply { m, link, req, result } => {
                let zk = &mut self.masters[m].zk;
                // A reply still awaited on the same connection (else the
                // client failed it with ConnectionLoss when the link dropped).
                if zk.link == link && zk.link_up && zk.inflight.remove(&req) {
                    let gen = self.masters[m].p.gen;
                    self.zk_deliver(m, gen, ZkEvent::Reply { req, result });
                }
            }
            Ev::ZkTick => self.zk_tick(),
            Ev::Exec { w, gen, x, what } => self.exec_event(w, gen, x, what),
            Ev::CheckResult { w, gen, x, check, run, outcome } => {
                self.check_result(w, gen, x, check, run, outcome)
            }
            Ev::ManualReport { w, x } => self.manual_report(w, x),
            Ev::Shim { w, x } => self.shim_event(w, x),
            Ev::Promote { s } => self.promote(s),
            Ev::Fault(f) => {
                if !self.healed {
                    self.log(|| format!("FAULT {f:?}"));
                    self.apply_fault(f);
                }
            }
            Ev::Retransmit { conn, to_master } => self.retransmit(conn, to_master),
            Ev::Unblock { from, to } => {
                if let Some(n) = self.blocked.get_mut(&(from, to)) {
                    *n -= 1;
                    if *n == 0 {
                        self.blocked.remove(&(from, to));
                    }
                }
            }
            Ev::Restart(node) => self.restart(node),
            Ev::Resume(node) => {
                if self.proc(node).up && !self.proc(node).paused(self.now) {
                    self.log(|| format!("RESUME {node:?}"));
                    let (now, stops) = (self.now, self.cfg.knobs.monotonic_clock);
                    let p = self.proc_mut(node);
                    if let Some(from) = p.suspended_from.take() {
                        // The host wakes: a clock that stopped while it
                        // slept is behind by the sleep from now on.
                        if stops {
                            p.lag = p.lag + now.since(from);
                        }
                    }
                    self.check()?;
                    while let Some(input) = self.proc_mut(node).deferred.pop_front() {
                        self.handle_input(node, input);
                        self.check()?;
                    }
                }
            }
            Ev::Heal => self.heal(),
        }
        self.check()
    }

    fn check(&mut self) -> Result<(), Violation> {
        if let Some(v) = self.pending.take() {
            return Err(v);
        }
        invariants::check_all(self)
    }

    // ----- processes --------------------------------------------------------

    /// The time on `node`'s own clock (the simulator's, less what a
    /// stopped clock missed while its host was suspended).
    pub(crate) fn node_now(&self, node: Node) -> Millis {
        Millis(self.now.0 - self.proc(node).lag.0)
    }

    pub(crate) fn proc(&self, node: Node) -> &Proc {
        match node {
            Node::Master(i) => &self.masters[i].p,
            Node::Worker(i) => &self.workers[i].p,
            Node::Sub(i) => &self.subs[i].p,
        }
    }

    fn proc_mut(&mut self, node: Node) -> &mut Proc {
        match node {
            Node::Master(i) => &mut self.masters[i].p,
            Node::Worker(i) => &mut self.workers[i].p,
            Node::Sub(i) => &mut self.subs[i].p,
        }
    }

    /// Hands `input` to the process if it is the same run (`gen`) and up;
    /// a paused process gets it when it resumes.
    fn deliver(&mut self, node: Node, gen: u64, input: Input) {
        let now = self.now;
        let p = self.proc_mut(node);
        if p.gen != gen || !p.up {
            return;
        }
        if p.paused(now) {
            p.deferred.push_back(input);
            return;
        }
        self.handle_input(node, input);
    }

    fn handle_input(&mut self, node: Node, input: Input) {
        self.local.push_back((node, input));
        while let Some((node, input)) = self.local.pop_front() {
            if !self.proc(node).up {
                continue; // it exited while this was queued
            }
            self.log(|| format!("{node:?} <- {input:?}"));
            match (node, input) {
                (Node::Master(m), Input::Master(input)) => {
                    let before = invariants::before_master_handle(self, m);
                    let preempting = invariants::preemption_guarantee::before(self, m);
                    let now = self.node_now(node);
                    let outputs = self.masters[m].node.handle(now, input);
                    self.rearm_tick(node);
                    invariants::after_master_handle(self, m, before);
                    if let Err(detail) =
                        invariants::preemption_guarantee::after(self, m, preempting)
                    {
                        invariants::fail(self, "preemption_guarantee", detail);
                    }
                    self.master_outputs(m, outputs);
                }
                (Node::Worker(w), Input::Worker(input)) => {
                    if let wnode::Input::Message { conn, msg } = &input {
                        self.manual_taken_in(w, *conn, msg);
                    }
                    if let wnode::Input::ExecutorChanged {
                        executor,
                        state: ExecutorState::Running,
                    } = &input
                    {
                        invariants::on_worker_takes_in_running(self, w, executor);
                    }
                    let now = self.node_now(node);
                    let outputs = self.workers[w].node.handle(now, input);
                    // Its word, for the shims, before what it returned is
                    // carried out (`host::persist_word`).
                    self.persist_word(w);
                    self.rearm_tick(node);
                    self.worker_outputs(w, outputs);
                }
                (Node::Sub(s), Input::Sub(input)) => {
                    let now = self.node_now(node);
                    let outputs = self.subs[s].node.handle(now, input);
                    self.rearm_tick(node);
                    self.sub_outputs(s, outputs);
                }
                _ => unreachable!("inputs are addressed by node kind"),
            }
        }
    }

    /// A process's one timer follows its node's next deadline: (re)scheduled
    /// when the deadline moved, forgotten when there is none (a tick that
    /// was scheduled earlier then finds a stale token and is ignored).
    fn rearm_tick(&mut self, node: Node) {
        if !self.proc(node).up {
            return; // it exited while handling: its timer went with it
        }
        let next = match node {
            Node::Master(m) => self.masters[m].node.poll_timeout(),
            Node::Worker(w) => self.workers[w].node.poll_timeout(),
            Node::Sub(s) => self.subs[s].node.poll_timeout(),
        };
        // The node's deadline is on its own clock.
        let lag = self.proc(node).lag;
        let next = next.map(|at| at + lag);
        match next {
            Some(at) => {
                if self.timers.get(&node).map(|(t, _)| *t) != Some(at) {
                    self.next_token += 1;
                    let token = self.next_token;
                    self.timers.insert(node, (at, token));
                    self.at(at, Ev::Timer { node, at, token });
                }
            }
            None => {
                self.timers.remove(&node);
            }
        }
    }

    /// Host `node`'s wall clock now, in ms since the Unix epoch.
    fn wall_ms(&self, node: Node) -> u64 {
        let offset = self.wall_offset.get(&node).copied().unwrap_or(0);
        (WALL_BASE + self.now.0).saturating_add_signed(offset)
    }

    /// A time-ordered id from host `node`'s wall clock, as the runtimes
    /// make incarnations and instance ids (`time_ordered_id`: wall-clock
    /// ms in the high bits, 16 random bits below); `sequential` when the
    /// run has no clock steps.
    /// With clock steps the id follows the host's durable series (the last
    /// id kept in the process's work or state directory: max(clock,
    /// last + 1), as `host::next_ordered_id`), unless `lost_id_state`.
    fn process_id(&mut self, node: Node, sequential: u64) -> u64 {
        if !self.cfg.clock_steps {
            return sequential;
        }
        let clock = (self.wall_ms(node) << 16) | self.rng.u64(0..0x1_0000);
        if self.cfg.lost_id_state {
            return clock;
        }
        let id = match self.last_ids.get(&node) {
            Some(last) => clock.max(last + 1),
            None => clock,
        };
        self.last_ids.insert(node, id);
        id
    }

    fn restart(&mut self, node: Node) {
        if self.proc(node).up {
            return;
        }
        self.log(|| format!("START {node:?}"));
        let knobs = self.cfg.knobs;
        let n_masters = self.cfg.masters;
        let p = self.proc_mut(node);
        p.gen += 1;
        p.up = true;
        p.paused_until = Millis::ZERO;
        p.deferred.clear();
        p.suspended_from = None;
        p.lag = Millis::ZERO; // a new process's clock starts now
        let gen = p.gen;
        let seed = self.rng.u64(..);
        match node {
            Node::Master(i) => {
                // The epoch's clock term is the start's wall clock plus
                // monotonic time (`clock_base + now`), with clock steps.
                let clock_base =
                    if self.cfg.clock_steps { self.wall_ms(node) - self.now.0 } else { 0 };
                let mp = &mut self.masters[i];
                mp.guids += 1;
                mp.node = new_node(i, mp.guids, knobs, clock_base, session_timeout(&self.cfg));
                let (extra_until, extra) = self.zk_links[i];
                mp.zk = ZkClient { link_up: true, extra_until, extra, ..ZkClient::default() };
                mp.store_fail.clear();
                mp.refusing_until = Millis::ZERO;
                self.local_input(node, Input::Master(mnode::Input::Start));
            }
            Node::Worker(i) => {
                let inc = Incarnation(self.process_id(node, ((i as u64 + 1) << 32) | gen));
                let wp = &mut self.workers[i];
                wp.node = new_worker(i, inc, n_masters, knobs, seed);
                wp.exited = None;
                let left = std::mem::take(&mut wp.left_behind);
                let mut inputs = vec![Input::Worker(wnode::Input::Start)];
                // The new process re-adopts what still runs (the default)
                // or kills it (`--kill-left-behind`); an adopted one ends
                // later with an unknown status.
                let adopting = self.execs.keys().any(|(ww, _)| *ww == i) && self.rng.bool();
                for mut r in left {
                    let runs = self.execs.get(&(i, r.id.clone())) == Some(&true);
                    if runs && adopting {
                        r.state = ExecutorState::Running;
                        let run = Millis(self.rng.u64(1_000..40_000));
                        let x = r.id.clone();
                        self.after(run, Ev::Exec { w: i, gen, x, what: ExecWhat::AdoptedEnd });
                        // Its record gives the new process its rules back,
                        // as the real worker's does (`left_behind_inputs`).
                        if let Some((disconnect, checks)) = self.launch_rules.get(&r.id).cloned() {
                            let executor = r.id.clone();
                            inputs.push(Input::Worker(wnode::Input::LeftBehind(r)));
                            self.readopted(i, gen, &executor);
                            self.readopted_with_rules += 1;
                            let readopted =
                                wnode::Input::Readopted { executor, disconnect, checks };
                            inputs.push(Input::Worker(readopted));
                            continue;
                        }
                    } else {
                        self.execs.remove(&(i, r.id.clone()));
                        // Its shim stopped it for its lease and recorded
                        // the cut-off end ([`shim`]): reported as the
                        // core's own cut-off stop is.
                        if let Some(state) = self.shim_end(i, &r.id) {
                            r.state = state;
                        } else if !r.state.is_terminal() {
                            r.state = ExecutorState::Killed;
                        }
                    }
                    inputs.push(Input::Worker(wnode::Input::LeftBehind(r)));
                }
                self.shim_ends_read(i);
                // Processes no record names any more (reported and
                // acknowledged before the crash) are gone.
                if !adopting {
                    self.execs.retain(|(ww, _), _| *ww != i);
                }
                for input in inputs {
                    self.local_input(node, input);
                }
            }
            Node::Sub(i) => {
                let instance = InstanceId(self.process_id(node, ((i as u64 + 1) << 32) | gen));
                let sp = &mut self.subs[i];
                // Some restarted subscribers bring a changed first group and
                // roll it out (`regent run --update`), one or two slots at
                // a time, decided by the seed.
                let draw =
                    seed ^ (i as u64).wrapping_mul(0x9e37_79b9) ^ gen.wrapping_mul(0x85eb_ca6b);
                let forced = sp.forced_update.take();
                let update = sp.framework.is_some() && (draw.is_multiple_of(3) || forced.is_some());
                if update {
                    sp.specs[0].command = vec!["run".into(), format!("job-{i}"), format!("v{gen}")];
                    // With the job layer's faults, a third of the updates
                    // are broken: the new command fails at once.
                    let broken =
                        forced.map_or(self.cfg.jobs && (draw / 3).is_multiple_of(3), |f| f.1);
                    if broken {
                        sp.specs[0].command.push(BROKEN.into());
                    }
                    // With `--services`, a third of the other updates crash
                    // as they start and a third run unhealthy (every check
                    // fails), from draws of their own.
                    if self.cfg.services && !broken && forced.is_none() {
                        match (draw / 9) % 3 {
                            0 => sp.specs[0].command.push(BROKEN.into()),
                            1 => sp.specs[0].command.push(services::UNHEALTHY.into()),
                            _ => {}
                        }
                    }
                }
                let max_parallel = update.then_some(forced.map_or(1 + (gen % 2) as u32, |f| f.0));
                sp.node = new_sub(i, instance, sp.framework.clone(), n_masters, seed, max_parallel);
                sp.exited = None;
                sp.view.clear();
                let specs = sp.specs.clone();
                self.local_input(node, Input::Sub(snode::Input::Start));
                for spec in specs {
                    self.local_input(node, Input::Sub(snode::Input::Declare(spec)));
                }
            }
        }
    }

    fn local_input(&mut self, node: Node, input: Input) {
        let gen = self.proc(node).gen;
        self.deliver(node, gen, input);
    }

    /// The process dies: memory, timers, connections and pending inputs go.
    fn crash(&mut self, node: Node) {
        if !self.proc(node).up {
            return;
        }
        let p = self.proc_mut(node);
        p.up = false;
        p.gen += 1;
        p.deferred.clear();
        p.paused_until = Millis::ZERO;
        p.suspended_from = None;
        self.timers.remove(&node);
        match node {
            Node::Master(m) => {
                // The session stays on the server until it expires.
                let zk = &mut self.masters[m].zk;
                zk.link += 1;
                zk.inflight.clear();
                zk.session = None;
                let conns: Vec<ConnId> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.m == m && c.open)
                    .map(|(id, _)| *id)
                    .collect();
                for conn in conns {
                    self.master_close(conn);
                }
                // Its watch on the leader, dialled as a client.
                self.client_gone(node);
            }
            Node::Worker(w) => {
                let wp = &mut self.workers[w];
                wp.left_behind = wp.worker().executors().cloned().collect();
                // Its executor processes outlive it (kill -9, a crash, an
                // upgrade): the next process over the same work directory
                // re-adopts the running ones (or kills them).
                // A singleton's shim watches its lease on ([`shim`]).
                self.execs.retain(|(ww, _), running| *ww != w || *running);
                self.client_gone(node);
            }
            Node::Sub(_) => self.client_gone(node),
        }
    }

    /// A client process died: its dials are void, its connections close.
    fn client_gone(&mut self, node: Node) {
        let conns: Vec<ConnId> =
            self.conns.iter().filter(|(_, c)| c.client == node).map(|(id, _)| *id).collect();
        for conn in conns {
            self.client_close(conn);
        }
    }

    // ----- network ----------------------------------------------------------

    fn chaos(&self) -> u8 {
        if self.now < self.heal_at {
            self.schedule.chaos
        } else {
            0
        }
    }

    fn is_blocked(&self, from: Node, to: Node) -> bool {
        self.blocked.contains_key(&(from, to))
    }

    /// Delivers what waited behind a partition once it healed, in order;
    /// drops it with the connection.
    fn retransmit(&mut self, conn: ConnId, to_master: bool) {
        let Some(q) = self.unsent.remove(&(conn, to_master)) else { return };
        let Some(c) = self.conns.get(&conn) else { return };
        let (from, to) =
            if to_master { (c.client, Node::Master(c.m)) } else { (Node::Master(c.m), c.client) };
        if c.open && !c.broken && self.is_blocked(from, to) {
            self.unsent.insert((conn, to_master), q);
            self.after(RETRANSMIT_EVERY, Ev::Retransmit { conn, to_master });
            return;
        }
        for msg in q {
            self.send(conn, to_master, msg);
        }
    }

    fn send(&mut self, conn: ConnId, to_master: bool, msg: Message) {
        let Some(c) = self.conns.get(&conn) else { return };
        if !c.open || c.broken || (to_master && c.cclosed) || (!to_master && c.mclosed) {
            return;
        }
        let (from, to) =
            if to_master { (c.client, Node::Master(c.m)) } else { (Node::Master(c.m), c.client) };
        if !self.cfg.datagram
            && (self.is_blocked(from, to) || self.unsent.contains_key(&(conn, to_master)))
        {
            // TCP across a partition: the segments are retransmitted until
            // they get through (or the connection is closed or times out),
            // in order; nothing on an open connection is ever lost. (The
            // one-executor-per-slot fix relies on it: a launch sent on a
            // connection is on its way for as long as that connection
            // lives.)
            let q = self.unsent.entry((conn, to_master)).or_default();
            let first = q.is_empty();
            q.push_back(msg);
            if first {
                self.after(RETRANSMIT_EVERY, Ev::Retransmit { conn, to_master });
            }
            return;
        }
        if self.is_blocked(from, to) {
            return; // a datagram into a partition is lost
        }
        let chaos = u32::from(self.chaos());
        let datagram = self.cfg.datagram;
        let mut copies = 1;
        if chaos > 0 {
            if self.rng.u32(0..100) < chaos * 2 {
                if !datagram {
                    // TCP: a lost segment that is never retransmitted
                    // means the connection broke.
                    self.reset(conn);
                }
                return; // dropped
            }
            if datagram && self.rng.u32(0..100) < chaos {
                copies = 2; // duplicated
            }
        }
        for _ in 0..copies {
            let mut lat = Millis(self.rng.u64(1..6));
            let mut reorder = false;
            if chaos > 0 {
                if self.rng.u32(0..100) < chaos {
                    lat = lat + Millis(self.rng.u64(100..3_000)); // a latency spike
                }
                reorder = datagram && self.rng.u32(0..100) < chaos * 2;
            }
            let mut t = self.now + lat;
            let last = self.fifo.entry((conn, to_master)).or_insert(Millis::ZERO);
            if !reorder {
                t = t.max(*last);
                *last = t;
            }
            let ev = if to_master {
                Ev::ToMaster { conn, msg: msg.clone() }
            } else {
                Ev::ToClient { conn, msg: msg.clone() }
            };
            self.at(t, ev);
        }
    }

    /// A client node asked to dial master `m` (`dial` names it): the dial
    /// completes after a latency (or fails after [`CONNECT_TIMEOUT`] across a
    /// partition, at once if the master is down) and its result is fed back
    /// with a fresh connection number.
    fn dial(&mut self, client: Node, m: usize, dial: DialTag) {
        let cgen = self.proc(client).gen;
        if m >= self.masters.len() {
            self.after(Millis(1), Ev::DialFailed { node: client, gen: cgen, dial });
            return;
        }
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        let mn = Node::Master(m);
        let mgen = self.masters[m].p.gen;
        self.conns.insert(
            conn,
            Conn {
                client,
                m,
                open: false,
                mclosed: false,
                cclosed: false,
                ctold: false,
                dial,
                broken: false,
                ended: None,
                mgen,
                cgen,
            },
        );
        let asleep = self.masters[m].p.suspended(self.now);
        if !self.listening(m) {
            self.after(Millis(1), Ev::DialDone { conn, ok: false });
        } else if asleep || self.is_blocked(client, mn) || self.is_blocked(mn, client) {
            self.after(CONNECT_TIMEOUT, Ev::DialDone { conn, ok: false });
        } else {
            let lat = Millis(self.rng.u64(1..6));
            self.after(lat, Ev::DialDone { conn, ok: true });
        }
    }

    fn dial_done(&mut self, conn: ConnId, ok: bool) {
        let Some(c) = self.conns.get(&conn).cloned() else { return };
        if self.proc(c.client).gen != c.cgen || !self.proc(c.client).up {
            // The process that dialled is gone.
            self.conns.remove(&conn);
            return;
        }
        let alive = self.masters[c.m].p.up && self.masters[c.m].p.gen == c.mgen;
        let alive = alive && self.listening(c.m);
        if ok && alive {
            self.conns.get_mut(&conn).expect("checked").open = true;
            self.deliver(Node::Master(c.m), c.mgen, Input::Master(mnode::Input::Accepted { conn }));
            self.deliver(c.client, c.cgen, dial_result(c.dial, Ok(conn)));
        } else {
            self.conns.remove(&conn);
            let why = if alive { "connect timed out" } else { "connection refused" };
            self.deliver(c.client, c.cgen, dial_result(c.dial, Err(why.into())));
        }
    }

    /// The client closes `conn` after flushing what it sent (no frame is
    /// delivered to it any more); the master sees the end after that, and
    /// the client node is fed the end.
    fn client_close(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(&conn) else { return };
        if !c.open {
            // A dial in flight: the process is gone (nodes close only
            // connections they were given).
            self.conns.remove(&conn);
            return;
        }
        if c.cclosed {
            return;
        }
        c.cclosed = true;
        c.ended.get_or_insert(EndCause::Client);
        let lat = Millis(self.rng.u64(1..6));
        let t = (self.now + lat).max(self.fifo.get(&(conn, true)).copied().unwrap_or_default());
        self.at(t, Ev::MasterSeesClose { conn });
        self.at(t, Ev::ClientSeesClose { conn });
    }

    /// The master closes `conn` (no `Disconnected` back to it); what it sent
    /// before is still delivered.
    fn master_close(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(&conn) else { return };
        if !c.open || c.mclosed {
            return;
        }
        c.mclosed = true;
        c.ended.get_or_insert(EndCause::Master);
        let lat = Millis(self.rng.u64(1..6));
        let t = (self.now + lat).max(self.fifo.get(&(conn, false)).copied().unwrap_or_default());
        self.at(t, Ev::ClientSeesClose { conn });
    }

    /// The connection breaks under both ends (a reset): each end learns it
    /// after a latency; nothing more is delivered on it.
    fn reset(&mut self, conn: ConnId) {
        let lat = Millis(self.rng.u64(1..6));
        self.after(lat, Ev::MasterSeesClose { conn });
        let lat = Millis(self.rng.u64(1..6));
        self.after(lat, Ev::ClientSeesClose { conn });
        if let Some(c) = self.conns.get_mut(&conn) {
            // Sends stop now; the ends are told by the events above.
            c.broken = true;
            c.ended.get_or_insert(EndCause::Broken);
        }
    }

    /// The connection is reset under both ends although both processes
    /// live (a listener that refuses): each end sees a reset by the peer
    /// after a latency; nothing more is sent on it.
    fn cut(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(&conn) else { return };
        if !c.open || c.broken {
            return;
        }
        c.broken = true;
        c.ended.get_or_insert(EndCause::Cut);
        let lat = Millis(self.rng.u64(1..6));
        self.after(lat, Ev::MasterSeesClose { conn });
        let lat = Millis(self.rng.u64(1..6));
        self.after(lat, Ev::ClientSeesClose { conn });
    }

    /// Whether master `m`'s listener accepts connections: its process is
    /// up (paused or not) and the listener does not refuse.
    fn listening(&self, m: usize) -> bool {
        let mp = &self.masters[m];
        mp.p.up && self.now >= mp.refusing_until
    }

    /// Master `from` probes `addr` (a bare `connect()`): the SYN reaches
    /// the address after a latency and the answer comes back after another
    /// ([`Ev::ProbeArrives`]); across a partition the probe fails after its
    /// `timeout`, and an address that names no master proves nothing.
    fn probe(&mut self, from: usize, probe: u64, addr: &Addr, timeout: Millis) {
        let node = Node::Master(from);
        let gen = self.masters[from].p.gen;
        let failed = |reason: &str| {
            let result = ProbeResult::Failed { reason: reason.into() };
            Input::Master(mnode::Input::Probed { probe, result })
        };
        let Some(to) = master_index(addr).filter(|&to| to < self.masters.len()) else {
            let input = failed("no such address");
            self.after(Millis(1), Ev::Input { node, gen, input });
            return;
        };
        let tn = Node::Master(to);
        // A suspended host answers nothing, as across a partition.
        let asleep = self.masters[to].p.suspended(self.now);
        if asleep || self.is_blocked(node, tn) || self.is_blocked(tn, node) {
            let input = failed("connect timed out");
            self.after(timeout, Ev::Input { node, gen, input });
            return;
        }
        let lat = Millis(self.rng.u64(1..3));
        self.after(lat, Ev::ProbeArrives { from, gen, probe, to });
    }

    fn gc_conn(&mut self, conn: ConnId) {
        if self.conns.get(&conn).is_some_and(|c| c.mclosed && c.ctold) {
            self.conns.remove(&conn);
            self.fifo.remove(&(conn, true));
            self.fifo.remove(&(conn, false));
        }
    }

    /// A connection breaks under both ends (partition detected, RST).
    fn block(&mut self, from: Node, to: Node, ms: u32) {
        *self.blocked.entry((from, to)).or_default() += 1;
        self.after(Millis(u64::from(ms)), Ev::Unblock { from, to });
    }

    // ----- master nodes -------------------------------------------------------

    /// Whether master `m` dialled `conn` (its watch on the leader).
    fn dialled_by(&self, conn: ConnId, m: usize) -> bool {
        self.conns.get(&conn).is_some_and(|c| c.client == Node::Master(m))
    }

    /// Executes master `m`'s node outputs, in order.
    fn master_outputs(&mut self, m: usize, outputs: Vec<mnode::Output>) {
        for o in outputs {
            match o {
                // On its watch connection the master is the client.
                mnode::Output::Send { conn, msg } if self.dialled_by(conn, m) => {
                    self.send(conn, true, msg)
                }
                mnode::Output::Close { conn, .. } if self.dialled_by(conn, m) => {
                    self.client_close(conn)
                }
                mnode::Output::Send { conn, msg } => {
                    invariants::on_master_send(self, m, conn, &msg);
                    self.send(conn, false, msg);
                }
                mnode::Output::Close { conn, .. } => self.master_close(conn),
                mnode::Output::Dial { dial, addr, .. } => {
                    let to = master_index(&addr).unwrap_or(usize::MAX);
                    self.dial(Node::Master(m), to, DialTag::Master(dial));
                }
                mnode::Output::Zk(cmd) => self.zk_command(m, cmd),
                mnode::Output::Probe { probe, addr, timeout } => {
                    self.log(|| format!("m{m} probes {addr}"));
                    self.probe(m, probe, &addr, timeout);
                }
                // The simulator's only asker is the API client.
                mnode::Output::Answer { query, answer } => self.api_answer(m, query, answer),
                mnode::Output::ConnTimeouts { .. } | mnode::Output::Audit(_) => {}
                mnode::Output::Note(note) => {
                    if matches!(note, mnode::Note::SteppedDown { .. }) {
                        self.step_downs += 1;
                    }
                    self.log(|| format!("m{m} note: {note:?}"))
                }
                mnode::Output::Exit { reason } => {
                    // Only the single-master modes exit; a ZooKeeper-mode
                    // master gives leadership up and lives on (rule 8).
                    invariants::fail(
                        self,
                        "master_node",
                        format!("m{m} in ZooKeeper mode asked to exit: {reason}"),
                    );
                }
                other @ (mnode::Output::Store(StoreCommand::Persist { .. })
                | mnode::Output::Store(StoreCommand::Unpersist { .. })
                | mnode::Output::Store(StoreCommand::LoadRecords)) => {
                    invariants::fail(
                        self,
                        "master_node",
                        format!("m{m} in ZooKeeper mode asked the runtime's store: {other:?}"),
                    );
                }
            }
        }
    }

    // ----- ZooKeeper client side -----------------------------------------------

    /// Feeds master `m`'s node a coordination event, after what it is
    /// handling now (the client answers on its own thread, never inside a
    /// call).
    fn zk_local(&mut self, m: usize, ev: ZkEvent) {
        self.local.push_back((Node::Master(m), Input::Master(mnode::Input::Zk(ev))));
    }

    /// Delivers a coordination event to master `m`'s node now.
    fn zk_deliver(&mut self, m: usize, gen: u64, ev: ZkEvent) {
        self.deliver(Node::Master(m), gen, Input::Master(mnode::Input::Zk(ev)));
    }

    fn zk_command(&mut self, m: usize, cmd: ZkCommand) {
        match cmd {
            ZkCommand::NewSession { timeout } => {
                let zk = &mut self.masters[m].zk;
                zk.session = None;
                zk.inflight.clear();
                zk.wants_session = Some(timeout);
                if zk.link_up {
                    self.zk_open_session(m);
                }
            }
            ZkCommand::CloseSession { session } => {
                let zk = &mut self.masters[m].zk;
                if zk.session == Some(session) {
                    let up = zk.link_up;
                    zk.session = None;
                    zk.inflight.clear();
                    if up {
                        self.zk.close(session);
                        self.flush_watches();
                    }
                }
            }
            ZkCommand::Request { session, req, op } => {
                let zk = &mut self.masters[m].zk;
                if zk.session != Some(session) {
                    return;
                }
                if !zk.link_up {
                    let result = Err(ZkError::ConnectionLoss);
                    self.zk_local(m, ZkEvent::Reply { req, result });
                    return;
                }
                zk.inflight.insert(req);
                let lat = Millis(self.rng.u64(1..4));
                let (slow_until, slow) = self.slow_store;
                let now = self.now;
                let zk = &mut self.masters[m].zk;
                let lat = lat + zk.extra(now);
                let t = if writes_state(&op) {
                    // A slow store: its writes land late, in order, on a
                    // lane of their own (the coordination requests are not
                    // held up behind them, as with a slow disk); a write
                    // issued after a slow one lands after it.
                    let slow = if now < slow_until { slow } else { Millis::ZERO };
                    let t = (now + lat + slow).max(zk.store_next_at).max(zk.next_at);
                    zk.store_next_at = t;
                    if slow == Millis::ZERO {
                        zk.next_at = t;
                    }
                    t
                } else {
                    let t = (now + lat).max(zk.next_at);
                    zk.next_at = t;
                    t
                };
                let link = zk.link;
                self.at(t, Ev::ZkExec { m, link, session, req, op });
            }
        }
    }

    fn zk_open_session(&mut self, m: usize) {
        let Some(timeout) = self.masters[m].zk.wants_session.take() else { return };
        let (session, negotiated) = self.zk.connect(self.now, timeout);
        self.masters[m].zk.session = Some(session);
        let gen = self.masters[m].p.gen;
        let link = self.masters[m].zk.link;
        let lat = Millis(self.rng.u64(1..4));
        self.after(lat, Ev::ZkConnected { m, gen, link, session, timeout: negotiated });
    }

    fn zk_exec(&mut self, m: usize, link: u64, session: SessionId, req: RequestId, op: ZkOp) {
        let zk = &self.masters[m].zk;
        if zk.link != link || !zk.link_up || zk.session != Some(session) {
            return; // failed with ConnectionLoss when the link dropped
        }
        let store_write = writes_state(&op);
        if store_write {
            if let Err(detail) = fenced(&op) {
                invariants::fail(self, "store_fencing", format!("m{m}: {detail}"));
            }
        }
        // An injected store failure hits the next store write of this master.
        let injected = if store_write { self.masters[m].store_fail.pop_front() } else { None };
        if injected == Some(false) {
            // The connection drops before the write reaches the server.
            self.log(|| format!("m{m} zk connection lost before {op:?}"));
            self.zk_drop(m, ZK_RECONNECT);
            return;
        }
        // What the deletes in a store write remove (read before applying).
        let deleting: Vec<RecordKey> =
            if store_write { self.deleted_keys(&op) } else { Vec::new() };
        let deposed = self.deposed_owner(session, &op);
        let result: ZkResult = self.zk.execute(self.now, session, &op);
        if let (Some(owner), true) = (deposed, result.is_ok()) {
            self.on_deposed(m, owner, &op);
        }
        if store_write && result.is_ok() {
            self.on_state_applied(m, &op, &deleting);
        }
        if result.is_ok() && matches!(&op, ZkOp::GetChildren { path, .. } if path == STATE) {
            // A leader's load lists the records: every acknowledged one
            // must be there for it to read.
            let records: Vec<Record> = self.stored().into_values().collect();
            invariants::on_loaded(self, m, &records);
        }
        let lose_next = match self.masters[m].zk.lose_next {
            Some(create_only) => !create_only || matches!(op, ZkOp::Create { .. }),
            None => false,
        };
        self.flush_watches();
        if injected == Some(true) || lose_next {
            // Applied, reply lost: the client sees ConnectionLoss.
            if injected.is_none() {
                self.masters[m].zk.lose_next = None;
            }
            self.log(|| format!("m{m} zk reply lost for {op:?}"));
            self.zk_drop(m, ZK_RECONNECT);
        } else if matches!(result, Err(ZkError::SessionExpired | ZkError::ConnectionLoss)) {
            // An expired session's connection is closed by the server; a
            // packet over the limit drops the connection (the model's
            // `ConnectionLoss`): every request in flight fails with it.
            if result == Err(ZkError::ConnectionLoss) {
                self.log(|| format!("m{m} zk packet over the limit: {op:?}"));
            }
            self.zk_drop(m, ZK_RECONNECT);
        } else if self.masters[m].zk.extra(self.now) > Millis::ZERO {
            // The reply crosses the slow link back, in order.
            let zk = &mut self.masters[m].zk;
            let t = (self.now + zk.extra).max(zk.reply_next_at);
            zk.reply_next_at = t;
            let link = zk.link;
            self.at(t, Ev::ZkReply { m, link, req, result });
        } else {
            let zk = &mut self.masters[m].zk;
            let t = zk.reply_next_at;
            if t > self.now {
                // Behind replies still crossing a link that was slow.
                let link = zk.link;
                self.at(t, Ev::ZkReply { m, link, req, result });
            } else {
                zk.inflight.remove(&req);
                let gen = self.masters[m].p.gen;
                self.zk_deliver(m, gen, ZkEvent::Reply { req, result });
            }
        }
    }

    /// The session owning the election node `op` deletes, when that is not
    /// `session`'s own: a standby deposing a leader (fast takeover).
    fn deposed_owner(&self, session: SessionId, op: &ZkOp) -> Option<SessionId> {
        let path = deleted_election_node(op)?;
        self.zk.node(path)?.ephemeral_owner.filter(|owner| *owner != session)
    }

    /// Master `m` deleted another session's election node: a deposition,
    /// of a live process's leadership when a master that is up (paused or
    /// not) still holds that session.
    fn on_deposed(&mut self, m: usize, owner: SessionId, op: &ZkOp) {
        self.depositions += 1;
        let live = (0..self.masters.len())
            .find(|&j| self.masters[j].p.up && self.masters[j].zk.session == Some(owner));
        if live.is_some() {
            self.live_depositions += 1;
        }
        if let Some(path) = deleted_election_node(op) {
            self.obs.deposed_nodes.insert(path.to_owned());
        }
        self.log(|| match live {
            Some(j) => format!("m{m} DEPOSES live m{j}: {op:?}"),
            None => format!("m{m} DEPOSES a dead session's node: {op:?}"),
        });
    }

    /// The master's ZooKeeper connection drops for `down_for`.
    fn zk_drop(&mut self, m: usize, down_for: Millis) {
        let until = self.now + down_for;
        let zk = &mut self.masters[m].zk;
        zk.down_until = zk.down_until.max(until);
        if !zk.link_up {
            return;
        }
        zk.link_up = false;
        zk.link += 1;
        let failed: Vec<RequestId> = std::mem::take(&mut zk.inflight).into_iter().collect();
        let session = zk.session;
        let gen = self.masters[m].p.gen;
        for req in failed {
            self.zk_deliver(m, gen, ZkEvent::Reply { req, result: Err(ZkError::ConnectionLoss) });
        }
        if let Some(s) = session {
            self.zk.forget_watches(s);
            self.zk_deliver(m, gen, ZkEvent::Disconnected { session: s });
        }
        let at = self.masters[m].zk.down_until;
        self.at(at, Ev::ZkLinkUp { m, gen });
    }

    fn zk_link_up(&mut self, m: usize, gen: u64) {
        let mp = &mut self.masters[m];
        if mp.p.gen != gen || !mp.p.up || mp.zk.link_up {
            return;
        }
        if self.now < mp.zk.down_until {
            let at = mp.zk.down_until;
            self.at(at, Ev::ZkLinkUp { m, gen });
            return;
        }
        if mp.p.paused(self.now) {
            let at = mp.p.paused_until;
            self.at(at, Ev::ZkLinkUp { m, gen });
            return;
        }
        mp.zk.link_up = true;
        if let Some(s) = mp.zk.session {
            match self.zk.resume(self.now, s) {
                Some(timeout) => {
                    self.zk_deliver(m, gen, ZkEvent::SessionConnected { session: s, timeout });
                }
                None => {
                    self.masters[m].zk.session = None;
                    self.flush_watches();
                    self.zk_deliver(m, gen, ZkEvent::Expired { session: s });
                }
            }
        }
        if self.masters[m].zk.wants_session.is_some() && self.masters[m].zk.link_up {
            self.zk_open_session(m);
        }
    }

    fn zk_tick(&mut self) {
        self.zk.expire_due(self.now);
        self.flush_watches();
        for m in 0..self.masters.len() {
            let mp = &self.masters[m];
            if !mp.p.up || mp.p.paused(self.now) || !mp.zk.link_up {
                continue;
            }
            if let Some(s) = mp.zk.session {
                if !self.zk.touch(self.now, s) {
                    // The server dropped the expired session's connection.
                    self.zk_drop(m, ZK_RECONNECT);
                }
            }
        }
        self.after(ZK_TICK, Ev::ZkTick);
    }

    fn flush_watches(&mut self) {
        for m in 0..self.masters.len() {
            let mp = &self.masters[m];
            if !mp.p.up || !mp.zk.link_up {
                continue;
            }
            let Some(s) = mp.zk.session else { continue };
            let gen = mp.p.gen;
            let extra = mp.zk.extra(self.now);
            for event in self.zk.take_notifications(s) {
                let lat = Millis(self.rng.u64(1..4)) + extra;
                let input = Input::Master(mnode::Input::Zk(ZkEvent::Watch { session: s, event }));
                self.after(lat, Ev::Input { node: Node::Master(m), gen, input });
            }
        }
    }

    // ----- the recovery store (ZooKeeper nodes under STATE) -------------------

    /// Every record the store holds now: the model's nodes under
    /// [`STATE`], decoded, by key. A node that does not decode is left out
    /// (the loading leader reports it as damaged).
    pub(crate) fn stored(&self) -> BTreeMap<RecordKey, Record> {
        regent_core::zk::layout::record_nodes(STATE, |p| self.zk.children(p))
            .into_iter()
            .filter_map(|n| decode_named(&n.path, &self.zk.node(&n.path)?.data).ok())
            .map(|r| (r.key(), r))
            .collect()
    }

    /// The record the store holds at `key`, if any.
    pub(crate) fn stored_at(&self, key: &RecordKey) -> Option<Record> {
        let path = regent_core::zk::layout::stem_path(STATE, &key_stem(key));
        let node = self.zk.node(&path)?;
        decode_named(&path, &node.data).ok().filter(|r| r.key() == *key)
    }

    /// The keys of the records the deletes in `op` remove, read from the
    /// model before `op` is applied.
    fn deleted_keys(&self, op: &ZkOp) -> Vec<RecordKey> {
        state_ops(op)
            .filter_map(|o| match o {
                StateOp::Delete(path) => {
                    let node = self.zk.node(path)?;
                    decode_named(path, &node.data).ok().map(|r| r.key())
                }
                StateOp::Write(..) => None,
            })
            .collect()
    }

    /// A store write of master `m` landed: the store hooks of the
    /// invariants see each record written and each key deleted.
    fn on_state_applied(&mut self, m: usize, op: &ZkOp, deleting: &[RecordKey]) {
        let written: Vec<_> = state_ops(op)
            .filter_map(|o| match o {
                StateOp::Write(path, data) => Some(decode_named(path, data)),
                StateOp::Delete(_) => None,
            })
            .collect();
        let written: Vec<Record> = written
            .into_iter()
            .filter_map(|r| {
                r.map_err(|e| {
                    let detail = format!("m{m} wrote a record that does not decode: {e}");
                    invariants::fail(self, "store_format", detail);
                })
                .ok()
            })
            .collect();
        for record in &written {
            invariants::on_store_write(self, m, record);
        }
        for key in deleting {
            invariants::on_store_delete(self, key);
        }
    }

    // ----- workers and executors ---------------------------------------------

    /// Executes worker `w`'s node outputs, in order (as the worker
    /// runtime does): dials, sends and closes on the simulated network,
    /// executors, the exit.
    fn worker_outputs(&mut self, w: usize, outputs: Vec<wnode::Output>) {
        let node = Node::Worker(w);
        let gen = self.workers[w].p.gen;
        for o in outputs {
            if self.workers[w].p.gen != gen {
                break; // it exited: nothing more of this run happens
            }
            match o {
                wnode::Output::Dial { dial, master } => {
                    let m = master_index(&master).unwrap_or(usize::MAX);
                    self.dial(node, m, DialTag::Worker(dial));
                }
                wnode::Output::Send { conn, msg } => {
                    invariants::on_worker_send(self, w, &msg);
                    self.send(conn, true, msg);
                }
                wnode::Output::Close { conn, .. } => self.client_close(conn),
                wnode::Output::Executor(ExecutorCommand::Start { executor, spec, .. }) => {
                    invariants::on_executor_start(self, w, &executor);
                    self.executors_started += 1;
                    if !spec.launch.resources.is_empty() {
                        self.resource_executors_started += 1;
                    }
                    self.execs.insert((w, executor.clone()), true);
                    if let Some(rule) = spec.launch.disconnect {
                        self.shim_launch(w, &executor, rule, spec.launch.kill_grace_ms);
                    }
                    if spec.launch.disconnect.is_some() || !spec.launch.checks.is_empty() {
                        let rules = (spec.launch.disconnect, spec.launch.checks.clone());
                        self.launch_rules.insert(executor.clone(), rules);
                    }
                    let start = Millis(self.rng.u64(5..60));
                    let mut run = Millis(self.rng.u64(2_000..40_000));
                    let mut code = if self.rng.u8(0..100) < 85 { 0 } else { 1 };
                    // A singleton (`--singletons`) is long-running work:
                    // it runs four times as long, so cut-offs meet it.
                    if spec.launch.disconnect.is_some() {
                        run = Millis(run.0 * 4);
                    }
                    // A service with checks (`--services`) too, so checks
                    // and deployments meet it running.
                    if !spec.launch.checks.is_empty() {
                        run = Millis(run.0 * 4);
                        self.plan_checks(&executor, &spec);
                    }
                    let broken = spec.command.iter().any(|c| c == BROKEN);
                    if broken {
                        // A broken update's command fails at once (before
                        // it was ever RUNNING).
                        run = Millis(self.rng.u64(20..200));
                        code = 1;
                    }
                    let x = executor;
                    // A broken update's command never runs: it fails as it
                    // starts.
                    if !broken {
                        let what = ExecWhat::Running;
                        self.after(start, Ev::Exec { w, gen, x: x.clone(), what });
                    }
                    if !self.scripted_execs || broken {
                        self.after(start + run, Ev::Exec { w, gen, x, what: ExecWhat::Exit(code) });
                    }
                }
                wnode::Output::Executor(
                    ExecutorCommand::Kill { executor } | ExecutorCommand::Stop { executor, .. },
                ) => {
                    if let Some(running) = self.execs.get_mut(&(w, executor.clone())) {
                        if *running {
                            *running = false;
                            let lat = Millis(self.rng.u64(1..20));
                            self.after(
                                lat,
                                Ev::Exec { w, gen, x: executor, what: ExecWhat::Killed },
                            );
                        }
                    }
                }
                // The check model (`--services`, docs/design.md#issue-45)
                // answers every run.
                wnode::Output::Executor(ExecutorCommand::RunCheck(run)) => {
                    self.run_check(w, gen, run)
                }
                wnode::Output::Exit { reason } => {
                    self.log(|| format!("w{w} EXIT: {reason}"));
                    invariants::on_worker_exit(self, w, &reason);
                    self.workers[w].exited = Some(reason);
                    // The process stops (its executors with it); a
                    // supervisor starts it again with a new incarnation.
                    self.crash(node);
                    self.execs.retain(|(ww, _), _| *ww != w);
                    let d = Millis(self.rng.u64(500..3_000));
                    self.after(d, Ev::Restart(node));
                }
                wnode::Output::Note(note) => self.log(|| format!("w{w} note: {note:?}")),
                // The simulated network has no read timeouts.
                wnode::Output::ConnTimeouts { .. } => {}
                // The simulated cluster has no operators asking for logs.
                wnode::Output::ReadLog(LogReadRequest { .. }) => {}
            }
        }
    }

    fn exec_event(&mut self, w: usize, gen: u64, x: ExecutorId, what: ExecWhat) {
        if self.workers[w].p.gen != gen {
            return;
        }
        if self.workers[w].p.suspended(self.now) {
            // Its executors sleep with the host: this happens after it wakes.
            let at = self.workers[w].p.paused_until + Millis(1);
            self.at(at, Ev::Exec { w, gen, x, what });
            return;
        }
        let state = match what {
            ExecWhat::Running => {
                if self.execs.get(&(w, x.clone())) != Some(&true) {
                    return;
                }
                self.checks.running_at.insert((w, x.clone()), self.now);
                self.manual_running(w, gen, &x);
                ExecutorState::Running
            }
            ExecWhat::Exit(code) => {
                match self.execs.get_mut(&(w, x.clone())) {
                    Some(r) if *r => *r = false,
                    _ => return,
                }
                ExecutorState::Exited { code }
            }
            ExecWhat::Killed => ExecutorState::Killed,
            ExecWhat::AdoptedEnd => {
                match self.execs.get_mut(&(w, x.clone())) {
                    Some(r) if *r => *r = false,
                    _ => return,
                }
                ExecutorState::Lost
            }
            ExecWhat::ShimEnd => match self.shim_end(w, &x) {
                Some(state) => state,
                None => return,
            },
        };
        invariants::on_executor_changed(self, w, &x, &state);
        let input = wnode::Input::ExecutorChanged { executor: x, state };
        self.deliver(Node::Worker(w), gen, Input::Worker(input));
    }

    /// The executor processes worker `w` started that still run (they
    /// outlive a crash of its process).
    pub(crate) fn running_executors(&self, w: usize) -> impl Iterator<Item = &ExecutorId> {
        self.execs
            .iter()
            .filter(move |((ww, _), running)| *ww == w && **running)
            .map(|((_, x), _)| x)
    }

    // ----- subscribers --------------------------------------------------------

    /// Executes subscriber `s`'s node outputs, in order (as the submit
    /// runtime does).
    fn sub_outputs(&mut self, s: usize, outputs: Vec<snode::Output>) {
        let node = Node::Sub(s);
        let gen = self.subs[s].p.gen;
        for o in outputs {
            if self.subs[s].p.gen != gen {
                break;
            }
            match o {
                snode::Output::Dial { dial, master, .. } => {
                    let m = master_index(&master).unwrap_or(usize::MAX);
                    self.dial(node, m, DialTag::Sub(dial));
                }
                snode::Output::Send { conn, msg } => {
                    invariants::on_sub_send(self, s, &msg);
                    self.send(conn, true, msg);
                }
                snode::Output::Close { conn, .. } => self.client_close(conn),
                snode::Output::Show(show) => self.log(|| format!("f{s} show: {show:?}")),
                snode::Output::Observed(action) => self.sub_observed(s, action),
                snode::Output::ConnTimeouts { .. } => {}
                snode::Output::Exit(exit) => {
                    self.log(|| format!("f{s} EXIT: {exit:?}"));
                    let why = exit.message.clone().unwrap_or_else(|| format!("{:?}", exit.outcome));
                    self.subs[s].exited = Some(why);
                    // The submission is over: the process ends for good.
                    self.crash(node);
                }
            }
        }
    }

    /// What the program following the framework learns from the node.
    fn sub_observed(&mut self, s: usize, action: subscriber::Action) {
        match action {
            subscriber::Action::Subscribed { framework, executors, .. } => {
                let sp = &mut self.subs[s];
                sp.framework = Some(framework);
                sp.view = executors.into_iter().map(|e| (e.id, e.state)).collect();
            }
            subscriber::Action::ExecutorUpdate(info) => {
                self.subs[s].view.insert(info.id, info.state);
            }
            subscriber::Action::Exit { reason, .. } => {
                self.log(|| format!("f{s} machine exit: {reason}"));
                invariants::on_sub_exit(self, s, &reason);
            }
            other => self.log(|| format!("f{s} observed: {other:?}")),
        }
    }

    /// The master subscriber `s` is subscribed with, and the live
    /// connection of its subscription there.
    fn subscription_conn(&self, s: usize) -> Option<(usize, ConnId)> {
        let (node, gen) = (Node::Sub(s), self.subs[s].p.gen);
        let st = self.subs[s].node.status();
        let m = st.master.as_ref().and_then(master_index).filter(|_| st.subscribed)?;
        self.conns
            .iter()
            .find(|(_, c)| {
                c.client == node && c.cgen == gen && c.m == m && c.open && !c.cclosed && !c.broken
            })
            .map(|(id, _)| (m, *id))
    }

    /// Subscriber `s`'s program asks the master it is subscribed with to
    /// kill executor `x`, on its subscription's connection (the submit node
    /// takes no commands; the master's answer names a request the
    /// subscriber did not send, which it ignores).
    fn sub_kill(&mut self, s: usize, x: ExecutorId) {
        let Some((_, conn)) = self.subscription_conn(s) else { return };
        let request = self.next_kill;
        self.next_kill += 1;
        let msg = Message::KillExecutor { request, executor: x };
        self.log(|| format!("f{s} program sends {msg:?}"));
        invariants::on_sub_send(self, s, &msg);
        self.send(conn, true, msg);
    }

    /// An operator's change (docs/design.md#issue-14), sent on subscriber `s`'s live
    /// connection to the master it is subscribed with (see
    /// [`Fault::Operate`]); remembered for the invariants.
    fn operate(&mut self, s: usize, w: usize, op: u8, n: u32) {
        let node = Node::Sub(s);
        if !self.proc(node).up || self.proc(node).paused(self.now) {
            return;
        }
        let Some((m, conn)) = self.subscription_conn(s) else { return };
        let request = self.next_kill;
        self.next_kill += 1;
        let nw = self.workers.len();
        let worker = (nw > 0).then(|| self.workers[w % nw].worker().config().id.clone());
        let running = self.subs[s]
            .view
            .iter()
            .find(|(_, st)| **st == ExecutorState::Running)
            .map(|(id, _)| id.clone());
        let msg = match (op % 5, worker, running) {
            (0, Some(worker), _) => Message::CordonWorker { request, worker },
            (1, Some(worker), _) => Message::UncordonWorker { request, worker },
            (2, Some(worker), _) => {
                self.obs.drained.insert(worker.clone());
                Message::DrainWorker { request, worker, deadline: Millis(u64::from(n)) }
            }
            (3, _, Some(x)) => {
                let Some((framework, group, _)) = parse_executor(&x) else { return };
                let slots = 1 + n % 4;
                // One scale in three names one or two executors the
                // subscriber sees running (docs/design.md#issue-43, item 3),
                // half of those with a stop signal and deadline.
                let remove: Vec<ExecutorId> = if n.is_multiple_of(3) {
                    self.subs[s]
                        .view
                        .iter()
                        .filter(|(id, st)| {
                            **st == ExecutorState::Running
                                && parse_executor(id)
                                    .is_some_and(|(f, g, _)| f == framework && g == group)
                        })
                        .map(|(id, _)| id.clone())
                        .take(1 + (n / 3 % 2) as usize)
                        .collect()
                } else {
                    Vec::new()
                };
                let stop = (n % 2 == 1 && !remove.is_empty()).then(|| regent_core::api::Stop {
                    signal: regent_core::api::StopSignal::ALL[(n / 6 % 6) as usize],
                    deadline: Millis(u64::from(n % 50)),
                });
                // Holes (slots removed by name) keep higher slots: every
                // executor from `slots` on may go.
                let away = self.masters[m]
                    .master()
                    .executors()
                    .filter(|e| e.framework == framework && e.group == group && e.slot >= slots);
                let away: Vec<ExecutorId> = away.map(|e| e.id.clone()).collect();
                self.obs.scaled_away.extend(away);
                self.obs.scaled_away.extend(remove.iter().cloned());
                self.obs.named_sent.extend(remove.iter().cloned());
                self.named_scales += u64::from(!remove.is_empty());
                Message::ScaleGroup { request, framework, group, slots, remove, stop }
            }
            (4, _, Some(executor)) => {
                self.obs.kill_requested.insert(executor.clone());
                Message::OperatorKillExecutor { request, executor, refill: n.is_multiple_of(2) }
            }
            _ => return,
        };
        use invariants::durable_acks::{Backing, Hold};
        let backing = match &msg {
            Message::CordonWorker { worker, .. } => {
                Some(Backing::Hold { worker: worker.clone(), hold: Hold::Cordon })
            }
            Message::UncordonWorker { worker, .. } => {
                Some(Backing::Hold { worker: worker.clone(), hold: Hold::Uncordon })
            }
            Message::DrainWorker { worker, .. } => {
                Some(Backing::Hold { worker: worker.clone(), hold: Hold::Drain })
            }
            Message::ScaleGroup { framework, group, slots, .. } => Some(Backing::Scale {
                framework: framework.clone(),
                group: group.clone(),
                slots: *slots,
            }),
            _ => None,
        };
        if let Some(backing) = backing {
            let gen = self.subs[s].p.gen;
            invariants::durable_acks::on_request(self, s, gen, request, backing);
        }
        invariants::on_sub_send(self, s, &msg);
        self.log(|| format!("operator on f{s}'s connection sends {msg:?}"));
        self.operator_changes += 1;
        self.send(conn, true, msg);
    }

    /// A blip of worker `w`'s connections ([`Fault::BlipWorker`]): each is
    /// reset under both ends; the worker process lives and dials again.
    fn blip(&mut self, w: usize) {
        let conns: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.client == Node::Worker(w) && c.open && !c.broken)
            .map(|(id, _)| *id)
            .collect();
        for conn in conns {
            if let Some(c) = self.conns.get_mut(&conn) {
                c.broken = true;
                c.ended.get_or_insert(EndCause::Cut);
            }
            self.after(Millis(1), Ev::MasterSeesClose { conn });
            self.after(Millis(1), Ev::ClientSeesClose { conn });
        }
    }

    /// Subscriber `s` tears its framework down (`regent kill`), on its
    /// subscription's connection. `false` if it has none.
    fn send_teardown(&mut self, s: usize) -> bool {
        let node = Node::Sub(s);
        if !self.proc(node).up || self.proc(node).paused(self.now) {
            return false;
        }
        let Some((_, conn)) = self.subscription_conn(s) else { return false };
        let request = self.next_kill;
        self.next_kill += 1;
        let msg = Message::Teardown { request };
        self.log(|| format!("f{s} tears its framework down: {msg:?}"));
        invariants::on_sub_send(self, s, &msg);
        self.send(conn, true, msg);
        true
    }

    // ----- faults -------------------------------------------------------------

    /// The master acting as leader now (else the one holding leadership,
    /// else `fallback`).
    fn leader_or(&self, fallback: usize) -> usize {
        let n = self.masters.len();
        (0..n)
            .find(|&m| {
                self.masters[m].p.up
                    && self.masters[m].elector().is_acting(self.node_now(Node::Master(m)))
            })
            .or_else(|| {
                (0..n).find(|&m| {
                    self.masters[m].p.up
                        && self.masters[m].master().status() != master::Status::Standby
                })
            })
            .unwrap_or(fallback % n)
    }

    fn apply_fault(&mut self, f: Fault) {
        let (nm, nw, ns) = (self.masters.len(), self.workers.len(), self.subs.len());
        let pick = |leader: bool, m: usize, w: &World| if leader { w.leader_or(m) } else { m % nm };
        match f {
            Fault::PartitionWorker { w, m, one_way, ms } => {
                let (a, b) = (Node::Worker(w % nw), Node::Master(m % nm));
                self.block(a, b, ms);
                if !one_way {
                    self.block(b, a, ms);
                }
            }
            Fault::PartitionSub { s, m, one_way, ms } => {
                if ns == 0 {
                    return;
                }
                let (a, b) = (Node::Sub(s % ns), Node::Master(m % nm));
                self.block(b, a, ms);
                if !one_way {
                    self.block(a, b, ms);
                }
            }
            Fault::IsolateMaster { m, leader, ms } => {
                let mn = Node::Master(pick(leader, m, self));
                let others: Vec<Node> =
                    (0..nw).map(Node::Worker).chain((0..ns).map(Node::Sub)).collect();
                for o in others {
                    self.block(mn, o, ms);
                    self.block(o, mn, ms);
                }
            }
            Fault::CrashMaster { m, leader, ms } => {
                let node = Node::Master(pick(leader, m, self));
                if self.proc(node).up {
                    self.crash(node);
                    self.after(Millis(u64::from(ms)), Ev::Restart(node));
                }
            }
            Fault::CrashWorker { w, ms } => {
                let node = Node::Worker(w % nw);
                if self.proc(node).up {
                    self.crash(node);
                    self.after(Millis(u64::from(ms)), Ev::Restart(node));
                }
            }
            Fault::CrashSub { s, ms } => {
                if ns == 0 {
                    return;
                }
                let node = Node::Sub(s % ns);
                if self.proc(node).up {
                    self.crash(node);
                    self.after(Millis(u64::from(ms)), Ev::Restart(node));
                }
            }
            Fault::PauseMaster { m, leader, ms } => {
                let node = Node::Master(pick(leader, m, self));
                self.pause(node, ms);
            }
            Fault::PauseWorker { w, ms } => self.pause(Node::Worker(w % nw), ms),
            Fault::Suspend { host, i, leader, ms } => {
                let node = match host % 3 {
                    0 => Node::Master(pick(leader, i, self)),
                    1 => Node::Worker(i % nw),
                    _ if ns > 0 => Node::Sub(i % ns),
                    _ => return,
                };
                if self.proc(node).up {
                    let now = self.now;
                    self.pause(node, ms);
                    self.proc_mut(node).suspended_from.get_or_insert(now);
                }
            }
            Fault::ZkDisconnect { m, leader, ms } => {
                let m = pick(leader, m, self);
                if self.masters[m].p.up {
                    self.zk_drop(m, Millis(u64::from(ms)));
                }
            }
            Fault::ZkExpire { m, leader } => {
                let m = pick(leader, m, self);
                if self.masters[m].p.up {
                    // Cut off until the server has expired the session.
                    let timeout = self.masters[m].elector().config().session_timeout;
                    self.zk_drop(m, Millis(timeout.0.min(4_000)) + Millis(500));
                }
            }
            Fault::ZkLoseReply { m, create_only } => {
                self.masters[m % nm].zk.lose_next = Some(create_only);
            }
            Fault::StoreFail { applied } => {
                // A ZooKeeper-level fault on the leader's next store write:
                // its connection drops before the write lands, or right
                // after it landed (the reply is lost).
                let m = self.leader_or(0);
                self.masters[m].store_fail.push_back(applied);
            }
            Fault::ListenerRefuses { m, leader, ms } => {
                let m = pick(leader, m, self);
                if self.masters[m].p.up {
                    let until = self.now + Millis(u64::from(ms));
                    let mp = &mut self.masters[m];
                    mp.refusing_until = mp.refusing_until.max(until);
                    // The other masters' watches on it are reset.
                    let cut: Vec<ConnId> = self
                        .conns
                        .iter()
                        .filter(|(_, c)| c.m == m && matches!(c.client, Node::Master(_)))
                        .map(|(id, _)| *id)
                        .collect();
                    for conn in cut {
                        self.cut(conn);
                    }
                }
            }
            Fault::SlowStore { ms, delay } => {
                let until =
                    if ms == 0 { Millis(u64::MAX) } else { self.now + Millis(u64::from(ms)) };
                self.slow_store = (until, Millis(u64::from(delay)));
            }
            Fault::ZkLatency { m, leader, ms, one_way } => {
                let m = pick(leader, m, self);
                let until =
                    if ms == 0 { Millis(u64::MAX) } else { self.now + Millis(u64::from(ms)) };
                let link = &mut self.zk_links[m];
                *link = (until, Millis(u64::from(one_way)));
                let zk = &mut self.masters[m].zk;
                (zk.extra_until, zk.extra) = *link;
            }
            Fault::ClockStep { host, i, forward } => {
                let node = match host % 3 {
                    0 => Node::Master(i % nm),
                    1 => Node::Worker(i % nw),
                    _ if ns > 0 => Node::Sub(i % ns),
                    _ => return,
                };
                let step = if forward { CLOCK_STEP } else { -CLOCK_STEP };
                *self.wall_offset.entry(node).or_default() += step;
            }
            Fault::StepDown => {
                let m = self.leader_or(0);
                if self.masters[m].p.up {
                    self.local_input(Node::Master(m), Input::Master(mnode::Input::StepDown));
                }
            }
            Fault::Operate { s, w, op, n } => {
                if ns == 0 {
                    return;
                }
                self.operate(s % ns, w, op, n);
            }
            Fault::ApiJob { op, n } => self.api_turn(op, n),
            Fault::BlipWorker { w } => self.blip(w % nw),
            Fault::Teardown { s } => {
                if ns > 0 {
                    self.send_teardown(s % ns);
                }
            }
            Fault::SubKill { s } => {
                if ns == 0 {
                    return;
                }
                let s = s % ns;
                let running = self.subs[s]
                    .view
                    .iter()
                    .find(|(_, st)| **st == ExecutorState::Running)
                    .map(|(id, _)| id.clone());
                if let Some(x) = running {
                    if self.proc(Node::Sub(s)).up && !self.proc(Node::Sub(s)).paused(self.now) {
                        self.sub_kill(s, x);
                    }
                }
            }
        }
    }

    fn pause(&mut self, node: Node, ms: u32) {
        let until = self.now + Millis(u64::from(ms));
        let p = self.proc_mut(node);
        if !p.up {
            return;
        }
        p.paused_until = p.paused_until.max(until);
        let at = p.paused_until;
        self.at(at, Ev::Resume(node));
    }

    /// Ends every fault: partitions heal, pauses end, crashed processes come
    /// back, ZooKeeper links come up, no injected failures remain.
    fn heal(&mut self) {
        self.log(|| "HEAL".into());
        self.healed = true;
        self.blocked.clear();
        if self.slow_store.0 != Millis(u64::MAX) {
            self.slow_store = (Millis::ZERO, Millis::ZERO); // slow for good stays
        }
        for m in 0..self.masters.len() {
            let mp = &mut self.masters[m];
            mp.zk.lose_next = None;
            if self.zk_links[m].0 != Millis(u64::MAX) {
                self.zk_links[m] = (Millis::ZERO, Millis::ZERO);
                mp.zk.extra_until = Millis::ZERO; // slow for good stays
            }
            mp.store_fail.clear();
            mp.refusing_until = Millis::ZERO;
            mp.zk.down_until = self.now;
            let gen = mp.p.gen;
            if !mp.zk.link_up {
                self.after(Millis(1), Ev::ZkLinkUp { m, gen });
            }
        }
        let nodes: Vec<Node> = (0..self.masters.len())
            .map(Node::Master)
            .chain((0..self.workers.len()).map(Node::Worker))
            .chain((0..self.subs.len()).map(Node::Sub))
            .collect();
        for node in nodes {
            let now = self.now;
            let p = self.proc_mut(node);
            if p.up && p.paused(now) {
                p.paused_until = now;
                self.after(Millis(0), Ev::Resume(node));
            } else if !p.up {
                let torn_down = matches!(node, Node::Sub(s) if self.subs[s].exited.is_some());
                if !torn_down {
                    self.after(Millis(1), Ev::Restart(node));
                }
            }
        }
    }
}

/// Master `i`'s node for process run `guid`: ZooKeeper mode, the store
/// under `<ROOT>/state`.
/// The masters' ZooKeeper session timeout: 2 s, or with ZooKeeper far
/// away (`zk_latency`, round trips up to 1 s) the daemons' default 4 s. One
/// confirmation is in flight at a time and the session lease is 2/3 of the
/// timeout, so a leader keeps its session only with round trips below a
/// third of it (README, "Limits").
fn session_timeout(cfg: &SimConfig) -> Millis {
    if cfg.zk_latency {
        Millis(4_000)
    } else {
        Millis(2_000)
    }
}

fn new_node(
    i: usize,
    guid: u64,
    knobs: Knobs,
    clock_base: u64,
    session_timeout: Millis,
) -> MasterNode {
    let mut c = elector::Config::new(
        ROOT,
        ((i as u64 + 1) << 32) | guid,
        MasterId(format!("m{i}")),
        master_addr(i),
    );
    c.session_timeout = session_timeout;
    c.unsafe_no_adopt_after_connection_loss = knobs.no_adopt_after_connection_loss;
    c.unsafe_no_lease_check = knobs.no_lease_check;
    c.unsafe_no_acting_lease = knobs.no_acting_lease;
    MasterNode::new(mnode::Config {
        master: master::Config {
            unsafe_no_refill_after_stop: knobs.no_refill_after_stop,
            unsafe_deploy_uncharged_baking: knobs.deploy_uncharged_baking,
            unsafe_no_auto_revert: knobs.no_auto_revert,
            unsafe_deployment_afresh_on_takeover: knobs.deployment_afresh_on_takeover,
            ..master::Config::new(MasterId(format!("m{i}")), master_addr(i))
        },
        leadership: Leadership::Zookeeper(c),
        clock_base,
        cluster: CLUSTER.into(),
    })
}

/// One write of a store request: a record written or a record deleted.
enum StateOp<'a> {
    Write(&'a str, &'a [u8]),
    Delete(&'a str),
}

fn under_state(path: &str) -> bool {
    // Records only, in their shards (a shard node is no record).
    regent_core::zk::layout::is_record_path(STATE, path)
}

/// The writes `op` makes to records under [`STATE`] (plain or in a multi).
fn state_ops(op: &ZkOp) -> impl Iterator<Item = StateOp<'_>> {
    fn one(o: StateOp<'_>) -> Option<StateOp<'_>> {
        let path = match o {
            StateOp::Write(p, _) | StateOp::Delete(p) => p,
        };
        under_state(path).then_some(o)
    }
    let ops: Vec<StateOp<'_>> = match op {
        ZkOp::Multi(ops) => ops
            .iter()
            .filter_map(|o| match o {
                MultiOp::Create { path, data, .. } | MultiOp::SetData { path, data, .. } => {
                    one(StateOp::Write(path, data))
                }
                MultiOp::Delete { path, .. } => one(StateOp::Delete(path)),
                MultiOp::Check { .. } => None,
            })
            .collect(),
        ZkOp::Create { path, data, .. } | ZkOp::SetData { path, data, .. } => {
            one(StateOp::Write(path, data)).into_iter().collect()
        }
        ZkOp::Delete { path, .. } => one(StateOp::Delete(path)).into_iter().collect(),
        _ => Vec::new(),
    };
    ops.into_iter()
}

/// Whether `op` writes a record of the recovery store.
fn writes_state(op: &ZkOp) -> bool {
    state_ops(op).next().is_some()
}

/// A store write must be a multi that starts with the check on the
/// writer's election node (the fence), so a deposed leader's write fails.
fn fenced(op: &ZkOp) -> Result<(), String> {
    let election = format!("{ROOT}/election/");
    match op {
        ZkOp::Multi(ops) => match ops.first() {
            Some(MultiOp::Check { path, .. }) if path.starts_with(&election) => Ok(()),
            first => Err(format!("a store write's multi does not start with the fence: {first:?}")),
        },
        _ => Err(format!("an unfenced store write: {op:?}")),
    }
}

fn new_worker(
    i: usize,
    incarnation: Incarnation,
    masters: usize,
    knobs: Knobs,
    seed: u64,
) -> WorkerNode {
    let mut c = worker::Config::new(
        CLUSTER,
        WorkerId(format!("w{i}")),
        incarnation,
        (0..masters).map(master_addr).collect(),
        2 + (i as u32 % 3),
        2_048,
    );
    c.seed = seed;
    c.unsafe_no_epoch_fencing = knobs.no_epoch_fencing;
    c.unsafe_overlapping_checks = knobs.overlapping_checks;
    c.unsafe_skipped_checks_fail = knobs.skipped_checks_fail;
    c.unsafe_manual_ttl_kept = knobs.manual_ttl_kept;
    // Two racks, so groups can spread over them and be constrained to
    // them (every worker meets `rack in [r0, r1]`: liveness is unchanged).
    c.attributes = vec![("rack".into(), format!("r{}", i % 2))];
    // Four ports each, one per core at most: groups naming a port are
    // numbered here and never wait for ports alone (liveness unchanged).
    c.ports = vec![regent_core::ports::PortRange { first: 30_000, last: 30_003 }];
    c.host = Some(format!("w{i}.sim"));
    // Two or three GPUs each: fewer than a worker's executors may be, so
    // groups asking for them wait for addresses (and the leader's count
    // and the worker's pick are both exercised under scarcity).
    c.resources = vec![regent_core::resources::Resource {
        name: "gpu".into(),
        addresses: (0..2 + (i % 2)).map(|a| format!("GPU-{a}")).collect(),
    }];
    WorkerNode::new(c)
}

fn new_sub(
    i: usize,
    instance: InstanceId,
    framework: Option<Fid>,
    masters: usize,
    seed: u64,
    update: Option<u32>,
) -> SubmitNode {
    let mut c = subscriber::Config::new(
        CLUSTER,
        format!("f{i}"),
        instance,
        (0..masters).map(master_addr).collect(),
    );
    c.framework = framework;
    c.seed = seed;
    c.update = update;
    let mut config = snode::Config::new(c);
    config.dial_timeout = CONNECT_TIMEOUT;
    SubmitNode::new(config)
}

/// The result of `dial` as its client node's input.
fn dial_result(dial: DialTag, result: Result<ConnId, String>) -> Input {
    match dial {
        DialTag::Worker(dial) => {
            Input::Worker(wnode::Input::Dialled { dial, result: result.into() })
        }
        DialTag::Sub(dial) => Input::Sub(snode::Input::Dialled { dial, result: result.into() }),
        DialTag::Master(dial) => {
            let result = match result {
                Ok(conn) => DialResult::Connected { conn, peer: None },
                Err(reason) => DialResult::Failed { reason, refused: false },
            };
            Input::Master(mnode::Input::Dialled { dial, result })
        }
    }
}

/// Parses `<framework>/<group>#<slot>#<launch>` into its parts.
pub(crate) fn parse_executor(id: &ExecutorId) -> Option<(FrameworkId, String, usize)> {
    let (fw, rest) = id.0.split_once('/')?;
    let mut parts = rest.rsplitn(3, '#');
    let _launch = parts.next()?;
    let slot = parts.next()?.parse().ok()?;
    let group = parts.next()?;
    Some((FrameworkId(fw.to_owned()), group.to_owned(), slot))
}

/// The election node `op` deletes, if it deletes one: a plain delete, or
/// the delete in a deposition's multi (which also writes the election
/// directory's marker).
fn deleted_election_node(op: &ZkOp) -> Option<&str> {
    let path = match op {
        ZkOp::Delete { path, .. } => path,
        ZkOp::Multi(ops) => ops.iter().find_map(|o| match o {
            MultiOp::Delete { path, .. } => Some(path),
            _ => None,
        })?,
        _ => return None,
    };
    path.starts_with(&format!("{ROOT}/election/")).then_some(path.as_str())
}

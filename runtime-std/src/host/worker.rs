//! A worker daemon's host side: its configuration checked, its supervisor
//! and node configuration prepared, its executor commands carried out, its
//! periodic threads (usage samples, work directory cleaning).

use super::ids::{load_or_create_id, next_ordered_id, INCARNATION_FILE};
use super::procfs::machine_hostname;
use super::HostError;
use crate::exec::{ExecEvent, LeftBehind, LeftBehindPolicy, Supervisor, SupervisorConfig};
use crate::net::{check_exposure, NetConfig};
use regent_core::node::worker::{ExecutorCommand, Input as NodeInput, LogReadRequest};
use regent_core::protocol::ExecutorReport;
use regent_core::{worker, Addr, Incarnation, WorkerId};
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long dialling one master may take (resolution and TCP connect).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long connections get to flush their last messages (executor reports)
/// when the worker stops.
pub const FLUSH_GRACE: Duration = Duration::from_millis(500);

/// The report of an executor a previous worker process left behind:
/// `Running` when adopted (the master keeps it if its slot still names it,
/// else has it killed), `Killed` when killed, how it ended when it ended
/// while no worker process ran and its shim recorded it (`Exited`, rarely
/// `Failed`: a success completes its slot even if the master wrote it off
/// meanwhile), else `Lost` — its end is unknown, not the executor's fault,
/// so it must not use the group's retry budget. The cores and memory are
/// the recorded ones.
pub fn left_behind_report(lb: LeftBehind) -> ExecutorReport {
    left_behind_inputs(lb).0
}

/// What the worker node hears of an executor a previous worker process
/// left behind, in order: its report ([`left_behind_report`]), then, if it
/// was re-adopted and its group has a disconnect rule or health checks,
/// those (`Input::Readopted`, docs/design.md#issue-45), so it is still
/// stopped when cut off and still checked. Both runtimes feed them.
pub fn left_behind_inputs(lb: LeftBehind) -> (ExecutorReport, Option<NodeInput>) {
    let adopted = lb.outcome == crate::exec::LeftBehindOutcome::Adopted
        && (lb.disconnect_ms.is_some() || !lb.checks.is_empty());
    let readopted = adopted.then(|| NodeInput::Readopted {
        executor: lb.executor.clone(),
        disconnect: lb.disconnect_ms.map(regent_core::launch::Disconnect::after_ms),
        checks: lb.checks.clone(),
    });
    (left_behind_report_of(lb), readopted)
}

fn left_behind_report_of(lb: LeftBehind) -> ExecutorReport {
    // The supervisor logged what it found and did.
    ExecutorReport {
        health: None,
        ran_ms: None,
        // Reported again, so the leader keeps telling the framework where
        // it listens and no other executor here is given its numbers (or
        // its resources' addresses).
        ports: lb.ports.clone(),
        resources: lb.resources.clone(),
        state: lb.state(),
        id: lb.executor,
        framework: lb.framework,
        cores: lb.cores,
        memory_mb: lb.memory_mb,
    }
}

/// Carries out a worker node's [`ExecutorCommand`] on `supervisor`: the one
/// place both runtimes execute it (the smol runtime calls it on its blocking
/// pool, since a launch forks and fsyncs a record). What happens to the
/// executor comes back through the supervisor's sink: `Running` or `Failed`
/// after a start, `Killed` after a kill or a stop.
pub fn execute_executor_command(supervisor: &Arc<Supervisor>, cmd: ExecutorCommand) {
    match cmd {
        ExecutorCommand::Start { executor, framework, spec } => {
            tracing::debug!(%executor, %framework, command = ?spec.command, "starting executor");
            let id = executor.clone();
            // A launch with artifacts to fetch goes on in the background:
            // the caller, the worker's pump, must keep heartbeating.
            if let Some(launched) = supervisor.launch_in_background(executor, framework, spec) {
                crate::exec::log_launched(&id, launched);
            }
        }
        ExecutorCommand::Stop { executor, grace, signal } => {
            tracing::debug!(%executor, %grace, signal = signal.name(), "stopping executor");
            if !supervisor.stop_with(&executor, signal, Duration::from_millis(grace.0)) {
                tracing::debug!(%executor, "executor to stop is not running");
            }
        }
        ExecutorCommand::Kill { executor } => {
            tracing::debug!(%executor, "killing executor");
            if !supervisor.kill(&executor) {
                // It ended already; its terminal event is on its way.
                tracing::debug!(%executor, "executor to kill is not running");
            }
        }
        // On the supervisor's check pool: never blocks the pump; the
        // outcome comes back through the sink (docs/design.md#issue-45).
        ExecutorCommand::RunCheck(run) => supervisor.run_check(run),
    }
}

/// Persists the worker core's last word from its master for the shims of
/// its singleton executors ([`Supervisor::set_word`], docs/design.md#issue-45):
/// the core decides what counts as word (`Worker::last_word`: an answer to
/// its own request, dated at the sending; none from a process that only
/// started, so a restarted worker never extends its executors' lease before
/// a leader answered it); this only turns it into a boot-clock instant and
/// writes it when it changed. Both runtimes call it after every `handle`,
/// before carrying out what it returned (a launch among it).
pub fn persist_word(
    supervisor: &Supervisor,
    clock: &crate::clock::RuntimeClock,
    node: &regent_core::node::WorkerNode,
) {
    if let Some(word) = node.worker().last_word() {
        supervisor.set_word(clock.boot_ms(word));
    }
}

/// What the worker node hears of a supervisor's [`ExecEvent`]: a health
/// check's outcome, or an executor's new state. Both runtimes feed it.
pub fn exec_input(ev: ExecEvent) -> NodeInput {
    match ev.check {
        Some(crate::exec::CheckDone { check, run, outcome }) => {
            tracing::debug!(executor = %ev.executor, check, run, ?outcome, "health check ran");
            NodeInput::CheckResult { executor: ev.executor, check, run, outcome }
        }
        None => {
            tracing::debug!(executor = %ev.executor, state = ?ev.state, "executor changed");
            NodeInput::ExecutorChanged { executor: ev.executor, state: ev.state }
        }
    }
}

/// Answers a worker node's [`LogReadRequest`] from `supervisor`'s executor
/// directories: a bounded pread (at most `MAX_LOG_CHUNK`) of a local file.
/// The input it returns goes back to the node.
pub fn read_executor_log(supervisor: &Supervisor, req: LogReadRequest) -> NodeInput {
    let result = supervisor.read_log(&req.executor, req.stream, req.offset, req.max);
    req.answer(result)
}

/// Checks the configured masters before anything starts: each must be
/// `host:port`, and none may resolve to a non-loopback address without a
/// secret unless `insecure`. A name that does not resolve yet is warned
/// about only.
pub fn check_masters(masters: &[Addr], has_secret: bool, insecure: bool) -> Result<(), HostError> {
    if masters.is_empty() {
        return Err(HostError::NoMasters);
    }
    for m in masters {
        let ok = m
            .as_str()
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !ok {
            return Err(HostError::MasterNotHostPort(m.to_string()));
        }
        match m.as_str().to_socket_addrs() {
            Ok(addrs) => {
                for a in addrs {
                    check_exposure(&a, has_secret, insecure)
                        .map_err(|source| HostError::MasterExposed { master: m.clone(), source })?;
                }
            }
            Err(e) => {
                tracing::warn!(master = %m, error = %e, "cannot resolve master yet; will keep trying")
            }
        }
    }
    Ok(())
}

/// The host a worker's executors' ports are reached at: `--host`, else
/// `127.0.0.1` when every configured master is on loopback (a local
/// cluster), else this machine's host name; `None` only when none is
/// known. Refused when longer than [`regent_core::limits::MAX_HOST_BYTES`].
pub fn executor_host(cfg: &WorkerConfig) -> Result<Option<String>, HostError> {
    let host = match &cfg.host {
        Some(h) => Some(h.clone()),
        None => {
            if all_loopback(&cfg.masters) {
                Some("127.0.0.1".to_string())
            } else {
                Some(machine_hostname()).filter(|h| !h.is_empty())
            }
        }
    };
    match host {
        Some(h) if h.is_empty() || h.len() > regent_core::limits::MAX_HOST_BYTES => {
            Err(HostError::BadHost { host: h })
        }
        h => Ok(h),
    }
}

/// How to run a worker (the flags of `regent worker`).
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The cluster name (sent in `Hello`; must be the one in `net`).
    pub cluster: String,
    /// The configured masters, as `host:port`. More are learned from the
    /// masters themselves.
    pub masters: Vec<Addr>,
    /// Cores offered to the cluster.
    pub cores: u32,
    /// Memory offered to the cluster, in MiB.
    pub memory_mb: u64,
    /// The work directory (created if missing).
    pub work_dir: PathBuf,
    /// The worker id; without one, an id is generated once and kept in
    /// `<work_dir>/worker-id`.
    pub id: Option<String>,
    /// How connections behave (cluster, secret, limits).
    pub net: Arc<NetConfig>,
    /// Allow masters on non-loopback addresses without a cluster secret.
    pub insecure: bool,
    /// Where the callback listener binds (masters dial it: a new leader
    /// tells the worker of itself, seed 002 (docs/design.md#seed-002)). `None`: `127.0.0.1:0` when
    /// every configured master is on loopback, else no listener. The smol
    /// runtime runs it; the std runtime has none.
    pub listen: Option<std::net::SocketAddr>,
    /// The address masters should dial (default: the bound address).
    pub advertise: Option<String>,
    /// Kill the executors a previous process of this worker left running
    /// (those proven its own) instead of adopting them.
    pub kill_left_behind: bool,
    /// The most bytes its artifact cache keeps
    /// ([`crate::exec::artifacts`]; `--artifact-cache-mb`).
    pub artifact_cache_bytes: u64,
    /// The attributes the worker announces (`--attribute rack=r1`), sorted
    /// by name, names unique.
    pub attributes: Vec<(String, String)>,
    /// The port ranges the worker offers executors' named ports from
    /// (`--ports 20000-20999`; [`regent_core::ports`]), sorted, not
    /// overlapping; empty: none.
    pub ports: Vec<regent_core::ports::PortRange>,
    /// The host executors' ports are reached at (`--host`; default:
    /// [`executor_host`]).
    pub host: Option<String>,
    /// The named resources the worker offers (`--resource gpu=0,1`, or
    /// found by `--resource-discovery`; [`regent_core::resources`]).
    pub resources: Vec<regent_core::resources::Resource>,
    /// When ended executors' directories are removed
    /// (`--work-dir-ttl`, `--work-dir-max-used`; [`crate::exec::gc`]).
    pub gc: crate::exec::gc::GcPolicy,
    /// How executors' limits are enforced (`--isolation`; cgroups when
    /// the host offers them: [`crate::exec::cgroup`]).
    pub isolation: crate::exec::cgroup::IsolationConfig,
    /// How executors' stdout and stderr are rotated
    /// (`--executor-log-max-bytes`, `--executor-log-files`;
    /// [`crate::exec::rotate`]).
    pub executor_logs: crate::exec::rotate::Rotation,
    /// The user every executor runs as (`--executor-user`; the worker must
    /// be root: [`crate::exec::user`]). `None`: the worker's own.
    pub executor_user: Option<String>,
    /// The users a group may name to run as (`--allowed-users`); others
    /// are refused at launch.
    pub allowed_users: Vec<String>,
    /// The program every executor runs under as its shim
    /// ([`crate::exec::shim`]; the `regent` binary, normally
    /// `std::env::current_exe()`), so a re-adopted executor's end is known.
    /// `None` starts commands directly.
    pub executor_shim: Option<PathBuf>,
}

/// Where a worker's callback listener binds: `cfg.listen`, or
/// `127.0.0.1:0` when every configured master is on loopback (a local
/// cluster works out of the box), else none. Refused, naming the address,
/// when it is not loopback and there is no secret and no `insecure`.
pub fn callback_listen(cfg: &WorkerConfig) -> Result<Option<std::net::SocketAddr>, HostError> {
    callback_listen_for(cfg.listen, &cfg.masters, cfg.net.secret.is_some(), cfg.insecure)
}

/// [`callback_listen`] for any peer that runs a callback listener (a
/// worker, `regent load`'s shared listener): `listen`, or `127.0.0.1:0`
/// when every master is on loopback, else none; refused, naming the
/// address, when it is not loopback and there is neither a secret nor
/// `insecure`.
pub fn callback_listen_for(
    listen: Option<std::net::SocketAddr>,
    masters: &[Addr],
    secret: bool,
    insecure: bool,
) -> Result<Option<std::net::SocketAddr>, HostError> {
    use std::net::{Ipv4Addr, SocketAddr};
    let listen = match listen {
        Some(l) => Some(l),
        None => all_loopback(masters).then_some(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))),
    };
    if let Some(l) = &listen {
        check_exposure(l, secret, insecure)
            .map_err(|source| HostError::ListenExposed { listen: *l, source })?;
    }
    Ok(listen)
}

/// Whether every one of `masters` resolves to loopback addresses only (a
/// cluster on one machine).
fn all_loopback(masters: &[Addr]) -> bool {
    masters.iter().all(|m| {
        m.as_str().to_socket_addrs().map(|mut a| a.all(|a| a.ip().is_loopback())).unwrap_or(false)
    })
}

/// What a worker runtime starts with: the supervisor over the work
/// directory (its lock held), what a previous process left behind, the
/// worker's id and the node's configuration.
#[derive(Debug)]
pub struct PreparedWorker {
    /// The executor supervisor; its events go to the sink given to
    /// [`prepare_worker`]. Its work directory is cleaned by a thread of
    /// its own ([`spawn_work_dir_gc`]) while it lives.
    pub supervisor: Arc<Supervisor>,
    /// Process groups a previous process of this worker left (adopted,
    /// killed, ended or left alone).
    pub left_behind: Vec<LeftBehind>,
    /// The worker id (given, or generated once and kept in the work dir).
    pub id: String,
    /// The worker node's configuration (a fresh incarnation, larger than
    /// every earlier one of this work directory: [`next_ordered_id`]).
    pub config: worker::Config,
}

/// Checks `cfg` and prepares a worker (blocking: resolution, the work
/// directory's lock, the id file). Fails naming the problem when the
/// cluster names differ, a configured master address is malformed or is
/// exposed without a secret (and not `insecure`), the id is empty, the work
/// directory cannot be used (or another worker holds it), or the id cannot
/// be read or stored, or the incarnation file is unreadable or corrupt
/// ([`next_ordered_id`]). Executor events go to `sink`, from the supervisor's
/// threads.
pub fn prepare_worker(
    cfg: &WorkerConfig,
    sink: impl Fn(ExecEvent) + Send + Sync + 'static,
) -> Result<PreparedWorker, HostError> {
    if cfg.cluster != cfg.net.cluster {
        return Err(HostError::ClusterMismatch {
            worker: cfg.cluster.clone(),
            net: cfg.net.cluster.clone(),
        });
    }
    check_masters(
        &cfg.masters,
        cfg.net.authenticates(regent_core::auth::Side::Client),
        cfg.insecure,
    )?;
    if cfg.id.as_ref().is_some_and(|id| id.trim().is_empty()) {
        return Err(HostError::EmptyWorkerId);
    }
    if let Some(problem) = regent_core::ports::ranges_problem(&cfg.ports) {
        return Err(HostError::BadPorts(problem));
    }
    if let Some(problem) = regent_core::resources::offers_problem(&cfg.resources) {
        return Err(HostError::BadResources(problem));
    }
    let mut sup_cfg = SupervisorConfig::new(cfg.work_dir.clone());
    if cfg.kill_left_behind {
        sup_cfg.left_behind = LeftBehindPolicy::Kill;
    }
    sup_cfg.shim = cfg.executor_shim.clone();
    sup_cfg.artifact_cache_bytes = cfg.artifact_cache_bytes;
    sup_cfg.log_rotation = Some(cfg.executor_logs);
    sup_cfg.run_as =
        cfg.executor_user.as_deref().map(crate::exec::user::RunAs::lookup).transpose()?;
    sup_cfg.allowed_users = cfg.allowed_users.clone();
    if let Some(user) = &sup_cfg.run_as {
        tracing::info!(user = %user.name, uid = user.uid, gid = user.gid, "executors run as another user");
    }
    let (supervisor, left_behind) = Supervisor::with_config(sup_cfg, sink)
        .map_err(|source| HostError::Supervise { dir: cfg.work_dir.clone(), source })?;
    // Under the supervisor's lock: no other worker races for the id file.
    let id = match &cfg.id {
        Some(id) => id.clone(),
        None => load_or_create_id(&cfg.work_dir)?,
    };
    // Written before it is used, under the same lock.
    let incarnation = Incarnation(next_ordered_id(&cfg.work_dir.join(INCARNATION_FILE))?);
    let mut config = worker::Config::new(
        cfg.cluster.clone(),
        WorkerId::new(id.clone()),
        incarnation,
        cfg.masters.clone(),
        cfg.cores,
        cfg.memory_mb,
    );
    config.attributes = cfg.attributes.clone();
    config.ports = cfg.ports.clone();
    config.resources = cfg.resources.clone();
    config.users = executor_users(cfg);
    config.host = executor_host(cfg)?;
    tracing::info!(
        worker = %id,
        %incarnation,
        masters = ?cfg.masters,
        cores = cfg.cores,
        memory_mb = cfg.memory_mb,
        ports = %regent_core::ports::describe_ranges(&cfg.ports),
        host = ?config.host,
        resources = %cfg.resources.iter().map(ToString::to_string).collect::<Vec<_>>().join(" "),
        work_dir = %cfg.work_dir.display(),
        "worker starting"
    );
    isolate(&supervisor, cfg, &id)?;
    let supervisor = Arc::new(supervisor);
    spawn_work_dir_gc(&supervisor, cfg.gc);
    Ok(PreparedWorker { supervisor, left_behind, id, config })
}

/// The users this worker starts executors as, announced to the leader so
/// it places a group naming a user only where it may run: the executor
/// user (`--executor-user`, else the worker's own), then, as root, every
/// `--allowed-users` one (a worker not running as root starts no one
/// else).
pub fn executor_users(cfg: &WorkerConfig) -> Vec<String> {
    let euid = rustix::process::geteuid();
    let own = cfg.executor_user.clone().or_else(|| {
        nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(euid.as_raw()))
            .ok()
            .flatten()
            .map(|u| u.name)
    });
    let mut users: Vec<String> = own.into_iter().collect();
    if euid.is_root() {
        for u in &cfg.allowed_users {
            if !users.contains(u) && users.len() < regent_core::launch::MAX_WORKER_USERS {
                users.push(u.clone());
            }
        }
    }
    users.retain(|u| regent_core::launch::is_user_name(u));
    users
}

/// Enforces executors' limits with cgroups as `cfg.isolation` says
/// ([`crate::exec::cgroup`]), or says clearly in the log that they are
/// accounted only.
fn isolate(supervisor: &Supervisor, cfg: &WorkerConfig, id: &str) -> Result<(), HostError> {
    use crate::exec::cgroup::{self, Cgroups, IsolationMode};
    let name = cgroup::worker_cgroup_name(id, &cfg.work_dir);
    match Cgroups::open(&cfg.isolation, &name)? {
        Some(cg) => {
            tracing::info!(
                isolation = %cg.offered(),
                delegated = cg.delegated(),
                parents = ?cg.parents(),
                pids_max = cg.pids_max(),
                "executors' memory, cpu and process limits are enforced with cgroups"
            );
            // A fresh supervisor: its cgroups were never set.
            let _ = supervisor.isolate(cg);
        }
        None if cfg.isolation.mode == IsolationMode::None => tracing::warn!(
            "--isolation none: executors' cores and memory are accounted only, not enforced"
        ),
        None => tracing::warn!(
            root = %cfg.isolation.root.display(),
            "no cgroup file system here: executors' cores and memory are accounted only, not \
             enforced"
        ),
    }
    Ok(())
}

/// How often a worker samples its executors' usage: as often as the node
/// sends it at most ([`regent_core::worker::USAGE_INTERVAL`]).
pub const USAGE_SAMPLE_EVERY: Duration =
    Duration::from_millis(regent_core::worker::USAGE_INTERVAL.0);

/// Samples `supervisor`'s usage ([`Supervisor::usage_sample`]) on a
/// thread of its own, first at once and then every `every`, handing each
/// sample to `send` (for the worker node's `Input::Usage`), until the
/// supervisor is dropped or `send` returns `false` (the daemon is gone).
pub fn spawn_usage_sampler(
    supervisor: &Arc<Supervisor>,
    every: Duration,
    send: impl Fn(regent_core::protocol::WorkerUsage) -> bool + Send + 'static,
) {
    spawn_periodic(supervisor, "regent-usage", every, move |sup| send(sup.usage_sample()))
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot start the usage sampler: executors' usage is not reported")
        });
}

/// Cleans `supervisor`'s work directory by `policy` on a thread of its
/// own ([`Supervisor::collect_garbage`]), first at once and then every
/// quarter of the time to live (at least every 10 minutes, at most every
/// second), until the supervisor is dropped.
pub fn spawn_work_dir_gc(supervisor: &Arc<Supervisor>, policy: crate::exec::gc::GcPolicy) {
    let every = (policy.ttl / 4).clamp(Duration::from_secs(1), Duration::from_secs(600));
    spawn_periodic(supervisor, "regent-work-dir-gc", every, move |sup| {
        let _ = sup.collect_garbage(policy, std::time::SystemTime::now());
        true
    })
    .unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot start the work directory's cleaning thread; ended executors' directories stay")
    });
}

/// Runs `work` on a thread named `name`, first at once and then every
/// `every`, until it returns `false` or the supervisor is dropped (looked
/// for at least every half second; the thread holds it only while `work`
/// runs).
fn spawn_periodic(
    supervisor: &Arc<Supervisor>,
    name: &str,
    every: Duration,
    work: impl Fn(&Supervisor) -> bool + Send + 'static,
) -> std::io::Result<()> {
    let weak = Arc::downgrade(supervisor);
    std::thread::Builder::new().name(name.into()).spawn(move || {
        let tick = every.min(Duration::from_millis(500));
        let mut waited = every;
        loop {
            if waited >= every {
                let Some(sup) = weak.upgrade() else { return };
                if !work(&sup) {
                    return;
                }
                waited = Duration::ZERO;
            }
            std::thread::sleep(tick);
            waited += tick;
            if weak.strong_count() == 0 {
                return;
            }
        }
    })?;
    Ok(())
}

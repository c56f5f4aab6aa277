//! Named resources (gpu, ...) in weighted dominant-resource fairness
//! (docs/tenants.md, docs/design.md#issue-44): a tenant's dominant share is
//! the largest of its shares over every dimension the cluster has capacity
//! in — cores, memory and each named resource — in the placement order and
//! in preemption alike, so "above its fair share" means the same in both.

mod common;

use common::*;
use regent_core::master::{self, Master};
use regent_core::protocol::tenants::{Tenant, TenantView};
use regent_core::protocol::{ExecutorReport, ExecutorState, GroupPlan, Message, Role};
use regent_core::resources::Resource;
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis};
use std::collections::BTreeMap;

/// The operator's connection.
const OP: ConnId = ConnId(9);

/// A leader elected over `store`'s records, with an operator on [`OP`].
fn leader(store: &mut Store, name: &str) -> Master {
    let mut m = store.elect(name, Millis(0), Epoch(1), 1);
    let _ = m.handle(Millis(0), master::Event::Connected { conn: OP });
    let _ =
        m.handle(Millis(0), master::Event::Message { conn: OP, msg: hello(Role::Client, "op") });
    m
}

/// The shape of one task: cores, MiB, gpus.
type Shape = (u32, u64, u32);

/// A group `g` of `count` tasks of `shape`.
fn group(count: u32, (cores, memory_mb, gpu): Shape) -> regent_core::protocol::GroupSpec {
    let mut g = regent_core::job::JobGroup::new("g", vec!["sleep".into(), "9".into()]);
    g.count = count;
    g.cores = cores;
    g.memory_mb = memory_mb;
    if gpu > 0 {
        g.launch.resources = vec![("gpu".into(), gpu)];
    }
    g.to_declare()
}

/// Submits job `id` of `tenant` with one group of `count` tasks of `shape`
/// at `now`; returns what was sent on the way.
fn submit(
    store: &mut Store,
    m: &mut Master,
    now: u64,
    id: &str,
    tenant: &str,
    count: u32,
    shape: Shape,
) -> Vec<(ConnId, Message)> {
    submit_group(store, m, now, id, tenant, group(count, shape))
}

/// Submits job `id` of `tenant` with group `g` at `now`; returns what was
/// sent on the way.
fn submit_group(
    store: &mut Store,
    m: &mut Master,
    now: u64,
    id: &str,
    tenant: &str,
    g: regent_core::protocol::GroupSpec,
) -> Vec<(ConnId, Message)> {
    let job = regent_core::api::JobSubmission {
        job: FrameworkId::new(id),
        name: id.into(),
        groups: vec![g],
        key: None,
        expect_version: None,
        max_parallel: 1,
        tenant: Some(tenant.into()),
    };
    let msg = Message::SubmitJob { request: 1, job };
    let out = m.handle(Millis(now), master::Event::Message { conn: OP, msg });
    let sends = store.settle(m, Millis(now), out);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::JobAccepted { .. })), "{sends:?}");
    sends
}

/// Sets tenant `name` with `weight`.
fn set_tenant(store: &mut Store, m: &mut Master, name: &str, weight: u32) {
    let msg = Message::SetTenant { request: 3, tenant: Tenant { weight, ..Tenant::new(name) } };
    let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
    let sends = store.settle(m, Millis(1), out);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::RequestAccepted { .. })), "{sends:?}");
}

/// Registers worker `name` (`cores`, `memory_mb`, `gpus` addresses) on
/// connection `conn`.
fn register(
    store: &mut Store,
    m: &mut Master,
    conn: u64,
    name: &str,
    (cores, memory_mb, gpus): (u32, u64, usize),
) -> Vec<(ConnId, Message)> {
    let resources = if gpus == 0 {
        vec![]
    } else {
        vec![Resource { name: "gpu".into(), addresses: (0..gpus).map(|i| i.to_string()).collect() }]
    };
    let reg = regent_core::protocol::RegisterWorker {
        cores,
        memory_mb,
        resources,
        ..registration(name, conn)
    };
    register_as(store, m, conn, reg)
}

/// Registers a worker as `reg` says on connection `conn`.
fn register_as(
    store: &mut Store,
    m: &mut Master,
    conn: u64,
    reg: regent_core::protocol::RegisterWorker,
) -> Vec<(ConnId, Message)> {
    let _ = connect_worker(m, Millis(1), conn, &reg.worker.to_string());
    let msg = Message::RegisterWorker(reg);
    let out = m.handle(Millis(1), master::Event::Message { conn: ConnId(conn), msg });
    store.settle(m, Millis(1), out)
}

/// How many executors of each framework were launched among `sends`.
fn launched(sends: &[(ConnId, Message)]) -> BTreeMap<String, u64> {
    let mut n = BTreeMap::new();
    for (_, m) in sends {
        if let Message::LaunchExecutor { framework, .. } = m {
            *n.entry(framework.as_str().to_owned()).or_default() += 1;
        }
    }
    n
}

fn tenants(m: &mut Master) -> Vec<TenantView> {
    let msg = Message::TenantsRequest { request: 77 };
    let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
    match m_sends(&out).as_slice() {
        [(OP, Message::TenantsReply { request: 77, tenants, .. })] => tenants.clone(),
        other => panic!("one TenantsReply: {other:?}"),
    }
}

/// GPU dominant: one worker of 12 cores and 4 GPUs; tenant `a`'s tasks ask
/// ⟨1 core, 1 gpu⟩, `b`'s ⟨1 core⟩, both far more than fits, weights 1:1.
/// `a`'s dominant share is its GPUs (n/4), `b`'s its cores (n/12): DRF
/// gives `a` 3 tasks (3/4 of the GPUs) and `b` 9 (9/12 of the cores), equal
/// dominant shares. Counting cores only, `a` would take all 4 GPUs and `b`
/// only 8 cores.
#[test]
fn gpu_dominant_tenant_gets_an_equal_dominant_share_not_an_equal_core_share() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "m1");
    let _ = submit(&mut store, &mut m, 1, "a-job", "a", 20, (1, 64, 1));
    let _ = submit(&mut store, &mut m, 1, "b-job", "b", 20, (1, 64, 0));
    let sends = register(&mut store, &mut m, 100, "w1", (12, 64 * 1024, 4));
    assert_eq!(
        launched(&sends),
        BTreeMap::from([("a-job".to_string(), 3), ("b-job".to_string(), 9)])
    );
    let shares: Vec<(String, u32)> =
        tenants(&mut m).into_iter().map(|v| (v.tenant.name, v.dominant_share_ppm)).collect();
    assert_eq!(shares, vec![("a".to_string(), 750_000), ("b".to_string(), 750_000)]);
}

/// A tenant below its guarantee of a named resource is offered capacity
/// first, like one below its guarantee of cores: `g` guarantees `a` 2 GPUs
/// although `a` is far richer by weighted share.
#[test]
fn a_gpu_guarantee_puts_its_tenant_first() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "m1");
    let a = Tenant {
        guarantee: regent_core::protocol::tenants::Dims::parse("gpu=2").unwrap(),
        ..Tenant::new("a")
    };
    let msg = Message::SetTenant { request: 3, tenant: a };
    let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
    let _ = store.settle(&mut m, Millis(1), out);
    set_tenant(&mut store, &mut m, "b", 100);
    // a's tasks take 4 cores each: by share alone b (weight 100) is
    // offered everything first and fills the cores.
    let _ = submit(&mut store, &mut m, 1, "a-job", "a", 4, (4, 64, 1));
    let _ = submit(&mut store, &mut m, 1, "b-job", "b", 40, (1, 64, 0));
    let sends = register(&mut store, &mut m, 100, "w1", (16, 64 * 1024, 4));
    assert_eq!(
        launched(&sends),
        BTreeMap::from([("a-job".to_string(), 2), ("b-job".to_string(), 8)])
    );
}

/// One demand of the property: tenants with weights and task shapes
/// (cores, MiB, gpus), and one worker's cores, MiB and gpus.
#[derive(Clone, Debug)]
struct Demand {
    /// (weight, task shape) per tenant.
    tenants: Vec<(u32, Shape)>,
    /// The worker's cores, MiB and gpus.
    worker: (u32, u64, u32),
}

impl quickcheck::Arbitrary for Demand {
    fn arbitrary(g: &mut quickcheck::Gen) -> Self {
        let pick =
            |g: &mut quickcheck::Gen, lo: u64, hi: u64| lo + u64::arbitrary(g) % (hi - lo + 1);
        let n = pick(g, 2, 4) as usize;
        let tenants = (0..n)
            .map(|_| {
                let shape =
                    (pick(g, 1, 4) as u32, pick(g, 1, 16) * 256, pick(g, 0, 3).saturating_sub(1));
                (pick(g, 1, 4) as u32, (shape.0, shape.1, shape.2 as u32))
            })
            .collect();
        Demand {
            tenants,
            worker: (pick(g, 8, 64) as u32, pick(g, 8, 64) * 1024, pick(g, 1, 12) as u32),
        }
    }
}

/// A tenant's weighted dominant share holding `n` tasks, in the master's
/// integer units (millionths, times 1000, over the weight), over cores,
/// memory and (with `gpus`) gpus.
fn weighted_share(d: &Demand, i: usize, n: u64, gpus: bool) -> u64 {
    let (cap_c, cap_m, cap_g) = (u64::from(d.worker.0), d.worker.1, u64::from(d.worker.2));
    let (w, (c, m, g)) = d.tenants[i];
    let gpu = if gpus { n * u64::from(g) * 1_000_000 / cap_g } else { 0 };
    let dom = (n * u64::from(c) * 1_000_000 / cap_c).max(n * m * 1_000_000 / cap_m).max(gpu);
    dom * 1_000 / u64::from(w)
}

/// Weighted DRF by progressive filling over three dimensions: repeatedly,
/// the tenant with the lowest weighted dominant share (ties to the lower
/// index) whose next task still fits gets one.
fn progressive_filling(d: &Demand) -> Vec<u64> {
    filling(d, true)
}

/// Progressive filling with gpus counted in the shares (`gpus`) or only
/// in what fits.
fn filling(d: &Demand, gpus: bool) -> Vec<u64> {
    let mut free = (u64::from(d.worker.0), d.worker.1, u64::from(d.worker.2));
    let mut tasks = vec![0u64; d.tenants.len()];
    let mut blocked = vec![false; d.tenants.len()];
    loop {
        let next = (0..d.tenants.len())
            .filter(|i| !blocked[*i])
            .min_by_key(|i| (weighted_share(d, *i, tasks[*i], gpus), *i));
        let Some(i) = next else { return tasks };
        let (_, (c, m, g)) = d.tenants[i];
        let (c, g) = (u64::from(c), u64::from(g));
        if c <= free.0 && m <= free.1 && g <= free.2 && tasks[i] < 100 {
            free = (free.0 - c, free.1 - m, free.2 - g);
            tasks[i] += 1;
        } else {
            blocked[i] = true;
        }
    }
}

/// Under steady demand from tenants some of which ask for gpus, the
/// leader's allocation is progressive filling's over cores, memory and
/// gpus.
fn drf_with_gpus_is_progressive_filling(d: Demand) -> quickcheck::TestResult {
    let mut store = Store::default();
    let mut m = leader(&mut store, "m1");
    for (i, (weight, shape)) in d.tenants.iter().enumerate() {
        let name = format!("t{i}");
        set_tenant(&mut store, &mut m, &name, *weight);
        let _ = submit(&mut store, &mut m, 1, &format!("job-{i}"), &name, 100, *shape);
    }
    let (c, mem, g) = d.worker;
    let sends = register(&mut store, &mut m, 100, "w1", (c, mem, g as usize));
    let placed = launched(&sends);
    let got: Vec<u64> = (0..d.tenants.len())
        .map(|i| placed.get(&format!("job-{i}")).copied().unwrap_or(0))
        .collect();
    let want = progressive_filling(&d);
    if got != want {
        return quickcheck::TestResult::error(format!("placed {got:?}, weighted DRF {want:?}"));
    }
    quickcheck::TestResult::passed()
}

#[test]
fn drf_over_cores_memory_and_gpus_is_progressive_filling() {
    // The table case above, then random demands and weights.
    let table = Demand { tenants: vec![(1, (1, 64, 1)), (1, (1, 64, 0))], worker: (12, 65536, 4) };
    assert_eq!(progressive_filling(&table), vec![3, 9]);
    let r = drf_with_gpus_is_progressive_filling(table);
    assert!(!r.is_failure() && !r.is_error(), "{r:?}");
    // The property is not vacuous: in many random demands the gpus decide
    // (the allocation differs from the one counting cores and memory).
    let mut g = quickcheck::Gen::new(20);
    let decided = (0..500)
        .map(|_| <Demand as quickcheck::Arbitrary>::arbitrary(&mut g))
        .filter(|d| filling(d, true) != filling(d, false))
        .count();
    assert!(decided > 50, "only {decided} of 500 random demands are decided by gpus");
    quickcheck::QuickCheck::new()
        .tests(200)
        .quickcheck(drf_with_gpus_is_progressive_filling as fn(Demand) -> quickcheck::TestResult);
}

fn report(id: &ExecutorId, fw: &FrameworkId, state: ExecutorState, gpu: u32) -> Message {
    Message::ExecutorStatus {
        incarnation: Incarnation(100),
        report: ExecutorReport {
            id: id.clone(),
            framework: fw.clone(),
            cores: 1,
            memory_mb: 64,
            state,
            ports: vec![],
            resources: if gpu > 0 {
                vec![("gpu".into(), (0..gpu).map(|i| format!("x{i}")).collect())]
            } else {
                vec![]
            },
            ran_ms: None,
            health: None,
        },
    }
}

/// A worker on `conn` that does what it is told: starts what is launched
/// (RUNNING), ends what is killed or stopped (KILLED). Returns the
/// executors it stopped, in order.
fn obey(
    store: &mut Store,
    m: &mut Master,
    conn: ConnId,
    now: u64,
    pending: &mut Vec<(ConnId, Message)>,
    live: &mut BTreeMap<ExecutorId, FrameworkId>,
) -> Vec<ExecutorId> {
    let mut killed = Vec::new();
    for (to, msg) in std::mem::take(pending) {
        if to != conn {
            continue;
        }
        let msg = match msg {
            Message::LaunchExecutor { executor, framework, spec, .. } => {
                live.insert(executor.clone(), framework.clone());
                let gpu = spec.launch.resources.iter().map(|(_, n)| *n).sum();
                report(&executor, &framework, ExecutorState::Running, gpu)
            }
            Message::KillExecutorOnWorker { executor, .. }
            | Message::StopExecutorOnWorker { executor, .. } => {
                let Some(framework) = live.remove(&executor) else { continue };
                killed.push(executor.clone());
                report(&executor, &framework, ExecutorState::Killed, 0)
            }
            _ => continue,
        };
        let out = m.handle(Millis(now), master::Event::Message { conn, msg });
        pending.extend(store.settle(m, Millis(now), out));
    }
    killed
}

fn count(live: &BTreeMap<ExecutorId, FrameworkId>) -> BTreeMap<String, u64> {
    live.values().fold(BTreeMap::new(), |mut n, f| {
        *n.entry(f.as_str().to_owned()).or_default() += 1;
        n
    })
}

/// Preemption judges fairness by the same dominant share as the
/// placement: `a` runs 4 tasks of ⟨1 core, 1 gpu⟩ on a worker of 12 cores
/// and 4 GPUs (dominant share 4/4), `b` then fills the other 8 cores (8/12)
/// and waits for more. `a` is the richer tenant by its GPUs, so one of its
/// executors is preempted for `b` (3/4 and 9/12: equal), and no more.
/// Counting cores only, `a` (4/12) would look the poorer and nothing would
/// be preempted.
#[test]
fn preemption_counts_gpus_in_the_fair_share() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "m1");
    set_tenant(&mut store, &mut m, "a", 1);
    set_tenant(&mut store, &mut m, "b", 1);
    let w = ConnId(100);
    let mut live = BTreeMap::new();
    let mut pending = register(&mut store, &mut m, 100, "w1", (12, 64 * 1024, 4));
    pending.extend(submit(&mut store, &mut m, 1, "a-job", "a", 4, (1, 64, 1)));
    let _ = obey(&mut store, &mut m, w, 2, &mut pending, &mut live);
    assert_eq!(count(&live), BTreeMap::from([("a-job".to_string(), 4)]));
    pending.extend(submit(&mut store, &mut m, 3, "b-job", "b", 20, (1, 64, 0)));
    let mut stopped = Vec::new();
    for step in 0..30u64 {
        let now = 1_000 + step * 600;
        stopped.extend(obey(&mut store, &mut m, w, now, &mut pending, &mut live));
        let beat = Message::WorkerHeartbeat { incarnation: Incarnation(100) };
        let out = m.handle(Millis(now), master::Event::Message { conn: w, msg: beat });
        pending.extend(store.settle(&mut m, Millis(now), out));
        let out = m.handle(Millis(now + 1), master::Event::Tick);
        pending.extend(store.settle(&mut m, Millis(now + 1), out));
    }
    assert_eq!(stopped.len(), 1, "exactly one of a's executors preempted: {stopped:?}");
    assert_eq!(
        count(&live),
        BTreeMap::from([("a-job".to_string(), 3), ("b-job".to_string(), 9)]),
        "equal dominant shares: 3 of 4 GPUs, 9 of 12 cores"
    );
}

/// Runs the cluster from `from` for `steps` steps of 600 ms: the worker on
/// `w` obeys, heartbeats, and the leader ticks. Returns the executors it
/// stopped, in order.
fn run(
    store: &mut Store,
    m: &mut Master,
    w: ConnId,
    from: u64,
    steps: u64,
    pending: &mut Vec<(ConnId, Message)>,
    live: &mut BTreeMap<ExecutorId, FrameworkId>,
) -> Vec<ExecutorId> {
    let mut stopped = Vec::new();
    for step in 0..steps {
        let now = from + step * 600;
        stopped.extend(obey(store, m, w, now, pending, live));
        let beat = Message::WorkerHeartbeat { incarnation: Incarnation(w.0) };
        let out = m.handle(Millis(now), master::Event::Message { conn: w, msg: beat });
        pending.extend(store.settle(m, Millis(now), out));
        let out = m.handle(Millis(now + 1), master::Event::Tick);
        pending.extend(store.settle(m, Millis(now + 1), out));
    }
    stopped
}

/// The plan of a job of tenant `tenant` with group `g`.
fn plan_of(
    m: &mut Master,
    now: u64,
    tenant: &str,
    g: regent_core::protocol::GroupSpec,
) -> GroupPlan {
    let msg = Message::PlanRequest { request: 9, groups: vec![g], tenant: Some(tenant.into()) };
    let out = m.handle(Millis(now), master::Event::Message { conn: OP, msg });
    match m_sends(&out).as_slice() {
        [(OP, Message::PlanReply { groups, .. })] => groups[0].clone(),
        other => panic!("one PlanReply: {other:?}"),
    }
}

/// A group waiting for a GPU is served by preemption, and `regent job plan`
/// names exactly the victims the leader then stops: tenant `a` holds all 4
/// GPUs of the only worker (4 older tasks of ⟨1 core, 1 gpu⟩) and 8 cores
/// more (8 younger tasks of ⟨1 core⟩), with 4 cores free; `b` asks for 4
/// tasks of ⟨1 core, 1 gpu⟩. Only a GPU task's end frees a GPU, so the
/// victims are `a`'s GPU tasks (not its younger CPU ones), and two of them
/// only: `b` with 2 GPUs (2/4) against `a` with 2 GPUs and 10 of 16 cores
/// (10/16) is the last preemption that leaves `a` at least as rich.
#[test]
fn a_gpu_group_preempts_gpu_holders_and_the_plan_names_them() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "m1");
    set_tenant(&mut store, &mut m, "a", 1);
    set_tenant(&mut store, &mut m, "b", 1);
    let w = ConnId(100);
    let mut live = BTreeMap::new();
    let mut pending = register(&mut store, &mut m, 100, "w1", (16, 64 * 1024, 4));
    pending.extend(submit(&mut store, &mut m, 1, "a-gpu", "a", 4, (1, 64, 1)));
    let _ = obey(&mut store, &mut m, w, 1_000, &mut pending, &mut live);
    pending.extend(submit(&mut store, &mut m, 1_100, "a-cpu", "a", 8, (1, 64, 0)));
    let _ = obey(&mut store, &mut m, w, 1_100, &mut pending, &mut live);
    assert_eq!(count(&live), BTreeMap::from([("a-cpu".to_string(), 8), ("a-gpu".to_string(), 4)]));

    let plan = plan_of(&mut m, 1_200, "b", group(4, (1, 64, 1)));
    assert_eq!(plan.unplaced, 4, "{plan:?}");
    let planned: Vec<ExecutorId> = plan.victims.iter().map(|v| v.executor.clone()).collect();
    assert_eq!(planned.len(), 2, "down to equal shares: {plan:?}");
    for v in &plan.victims {
        assert_eq!((v.framework.as_str(), v.tenant.as_str()), ("a-gpu", "a"), "{v:?}");
        assert_eq!(v.why, "tenant above its fair share");
    }
    assert_eq!((plan.victims[0].for_slot, plan.victims[1].for_slot), (0, 1));

    pending.extend(submit(&mut store, &mut m, 1_200, "b-job", "b", 4, (1, 64, 1)));
    let stopped = run(&mut store, &mut m, w, 2_000, 30, &mut pending, &mut live);
    assert_eq!(stopped, planned, "the leader preempted exactly the plan's victims, in order");
    assert_eq!(
        count(&live),
        BTreeMap::from([
            ("a-cpu".to_string(), 8),
            ("a-gpu".to_string(), 2),
            ("b-job".to_string(), 2)
        ]),
        "b's slots took the freed GPUs"
    );
}

/// A group asking for ports is served by preemption when the ports, not
/// the cores, are what is short: the worker offers 2 ports, both held by
/// `a`'s executors; `b`'s slot asking for one port preempts one of them
/// (1/16 of the cores each once done: equal shares), and no more.
#[test]
fn a_group_asking_for_ports_preempts_an_executor_holding_one() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "m1");
    set_tenant(&mut store, &mut m, "a", 1);
    set_tenant(&mut store, &mut m, "b", 1);
    let w = ConnId(100);
    let mut live = BTreeMap::new();
    let reg = regent_core::protocol::RegisterWorker {
        cores: 16,
        memory_mb: 64 * 1024,
        ports: vec![regent_core::ports::PortRange { first: 20_000, last: 20_001 }],
        ..registration("w1", 100)
    };
    let mut pending = register_as(&mut store, &mut m, 100, reg);
    let with_port = |count| {
        let mut g = group(count, (1, 64, 0));
        g.launch.ports = vec!["http".into()];
        g
    };
    pending.extend(submit_group(&mut store, &mut m, 1, "a-web", "a", with_port(2)));
    let _ = obey(&mut store, &mut m, w, 1_000, &mut pending, &mut live);
    assert_eq!(count(&live), BTreeMap::from([("a-web".to_string(), 2)]));
    let plan = plan_of(&mut m, 1_200, "b", with_port(2));
    assert_eq!(plan.victims.len(), 1, "{plan:?}");
    pending.extend(submit_group(&mut store, &mut m, 1_200, "b-web", "b", with_port(2)));
    let stopped = run(&mut store, &mut m, w, 2_000, 20, &mut pending, &mut live);
    assert_eq!(stopped, vec![plan.victims[0].executor.clone()]);
    assert_eq!(count(&live), BTreeMap::from([("a-web".to_string(), 1), ("b-web".to_string(), 1)]));
}

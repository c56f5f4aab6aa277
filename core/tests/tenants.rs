//! Tenants (docs/tenants.md, docs/design.md#issue-44) as exact protocol
//! actions of the master machine: `SetTenant` accepted only once durable,
//! refused naming what is wrong, listed by `TenantsRequest`, recovered by
//! a new leader.

mod common;

use common::*;
use regent_core::master::{self, Master};
use regent_core::protocol::tenants::{Dims, Tenant, TenantView};
use regent_core::protocol::{Message, Role};
use regent_core::store::{Record, RecordKey, StoreCommand, StoreEvent};
use regent_core::{ConnId, Epoch, Millis};
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

fn tenants(m: &mut Master) -> Vec<TenantView> {
    let out = m.handle(
        Millis(1),
        master::Event::Message { conn: OP, msg: Message::TenantsRequest { request: 77 } },
    );
    match m_sends(&out).as_slice() {
        [(OP, Message::TenantsReply { request: 77, tenants, .. })] => tenants.clone(),
        other => panic!("one TenantsReply: {other:?}"),
    }
}

fn team_a() -> Tenant {
    Tenant {
        name: "team-a".into(),
        guarantee: Dims::parse("cores=16,memory=64G,gpu=2").unwrap(),
        limit: Dims::parse("cores=64").unwrap(),
        weight: 3,
    }
}

#[test]
fn a_tenant_is_accepted_once_durable_listed_and_recovered_by_a_new_leader() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let msg = Message::SetTenant { request: 5, tenant: team_a() };
    let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
    assert!(
        !m_sends(&out).iter().any(|(_, m)| matches!(m, Message::RequestAccepted { .. })),
        "nothing accepted before the record is durable: {out:?}"
    );
    let sends = store.settle(&mut m, Millis(1), out);
    assert!(
        sends
            .iter()
            .any(|(c, m)| *c == OP && matches!(m, Message::RequestAccepted { request: 5, .. })),
        "{sends:?}"
    );
    assert_eq!(
        store.records.get(&RecordKey::Tenant("team-a".into())),
        Some(&Record::Tenant(team_a()))
    );
    let listed = tenants(&mut m);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].tenant, team_a());
    assert!(listed[0].set);
    assert_eq!(listed[0].dominant_share_ppm, 0);

    // A new leader knows it from its record alone.
    let mut b = leader(&mut store, "b");
    let listed = tenants(&mut b);
    assert_eq!(listed.iter().map(|v| &v.tenant).collect::<Vec<_>>(), vec![&team_a()]);
}

#[test]
fn a_bad_tenant_is_refused_naming_what_is_wrong_and_nothing_is_written() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let cases = [
        (Tenant { weight: 0, ..team_a() }, "weight 0"),
        (Tenant { weight: 1_001, ..team_a() }, "weight 1001"),
        (Tenant { name: "a/b".into(), ..team_a() }, "tenant name \"a/b\""),
        (Tenant { name: String::new(), ..team_a() }, "tenant name \"\""),
    ];
    for (i, (tenant, says)) in cases.into_iter().enumerate() {
        let request = 10 + i as u64;
        let msg = Message::SetTenant { request, tenant };
        let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
        assert!(!out.iter().any(|a| matches!(a, master::Action::Store(_))), "{out:?}");
        match m_sends(&out).as_slice() {
            [(OP, Message::RequestRefused { request: r, reason, .. })] if *r == request => {
                assert!(reason.contains(says), "{reason:?} names {says:?}")
            }
            other => panic!("one refusal: {other:?}"),
        }
    }
    assert!(tenants(&mut m).is_empty());
}

#[test]
fn dims_parse_and_describe_as_the_cli_writes_them() {
    let d = Dims::parse("cores=16,memory=64G,gpu=2").unwrap();
    assert_eq!(d.cores, Some(16));
    assert_eq!(d.memory_mb, Some(65_536));
    assert_eq!(d.resources, vec![("gpu".to_string(), 2)]);
    assert_eq!(d.describe(), "cores=16,memory=64G,gpu=2");
    assert_eq!(Dims::parse("none").unwrap(), Dims::default());
    assert_eq!(Dims::default().describe(), "none");
    assert!(Dims::parse("cores=1,cores=2").unwrap_err().0.contains("twice"));
    assert_eq!(Dims::parse("fpga=3").unwrap().get("fpga"), Some(3), "any resource name");
    assert!(Dims::parse("Disk=3").unwrap_err().0.contains("unknown dimension"));
    assert!(Dims::parse("cores=x").unwrap_err().0.contains("whole number"));
}

fn subscribe_msg(instance: u64, framework: Option<&str>, tenant: Option<&str>) -> Message {
    Message::Subscribe(regent_core::protocol::Subscribe {
        framework: framework.map(regent_core::FrameworkId::new),
        name: "etl".into(),
        instance: regent_core::ids::InstanceId(instance),
        attempt: 1,
        failover_timeout: Millis(60_000),
        tenant: tenant.map(str::to_owned),
    })
}

/// Subscribes on a fresh connection `conn`; returns what was sent.
fn subscribe_on(
    store: &mut Store,
    m: &mut Master,
    conn: u64,
    msg: Message,
) -> Vec<(ConnId, Message)> {
    let c = ConnId(conn);
    let _ = m.handle(Millis(1), master::Event::Connected { conn: c });
    let _ =
        m.handle(Millis(1), master::Event::Message { conn: c, msg: hello(Role::Subscriber, "s") });
    let out = m.handle(Millis(1), master::Event::Message { conn: c, msg });
    store.settle(m, Millis(1), out)
}

fn job(id: &str, tenant: Option<&str>) -> regent_core::api::JobSubmission {
    let g = regent_core::job::JobGroup::new("g", vec!["sleep".into(), "9".into()]);
    regent_core::api::JobSubmission {
        job: regent_core::FrameworkId::new(id),
        name: id.into(),
        groups: vec![g.to_declare()],
        key: None,
        expect_version: None,
        max_parallel: 1,
        tenant: tenant.map(str::to_owned),
    }
}

fn refusal_of(sends: &[(ConnId, Message)]) -> String {
    sends
        .iter()
        .find_map(|(_, m)| match m {
            Message::RequestRefused { reason, .. } | Message::SubscribeRefused { reason, .. } => {
                Some(reason.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("a refusal: {sends:?}"))
}

#[test]
fn a_framework_belongs_to_the_tenant_it_names_durably_and_never_moves() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let sends = subscribe_on(&mut store, &mut m, 1, subscribe_msg(7, None, Some("team-a")));
    let fid = sends
        .iter()
        .find_map(|(_, m)| match m {
            Message::Subscribed { framework, .. } => Some(framework.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("subscribed: {sends:?}"));
    assert_eq!(m.framework_tenant(&fid), "team-a");
    match store.records.get(&RecordKey::Framework(fid.clone())) {
        Some(Record::Framework(f)) => assert_eq!(f.tenant.as_deref(), Some("team-a")),
        other => panic!("the framework's record: {other:?}"),
    }
    // A framework naming none is in `default`, kept as no tenant.
    let sends = subscribe_on(&mut store, &mut m, 2, subscribe_msg(8, None, None));
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Subscribed { .. })), "{sends:?}");
    let listed = tenants(&mut m);
    let names: Vec<(&str, bool, u32)> =
        listed.iter().map(|v| (v.tenant.name.as_str(), v.set, v.frameworks)).collect();
    assert_eq!(names, vec![("default", false, 1), ("team-a", false, 1)]);

    // Another instance naming another tenant is refused, naming both.
    let sends =
        subscribe_on(&mut store, &mut m, 3, subscribe_msg(9, Some(fid.as_str()), Some("team-b")));
    let reason = refusal_of(&sends);
    assert!(reason.contains("team-a") && reason.contains("team-b"), "{reason}");
    assert_eq!(m.framework_tenant(&fid), "team-a");

    // A new leader knows the tenant from the record.
    let b = leader(&mut store, "b");
    assert_eq!(b.framework_tenant(&fid), "team-a");
}

#[test]
fn a_job_names_its_tenant_and_an_update_naming_another_is_refused_naming_both() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let msg = Message::SubmitJob { request: 1, job: job("web", Some("team-a")) };
    let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
    let sends = store.settle(&mut m, Millis(1), out);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::JobAccepted { .. })), "{sends:?}");
    let web = regent_core::FrameworkId::new("web");
    assert_eq!(m.framework_tenant(&web), "team-a");
    let msg = Message::SubmitJob { request: 2, job: job("web", Some("team-b")) };
    let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
    let reason = refusal_of(&store.settle(&mut m, Millis(1), out));
    assert!(reason.contains("tenant team-a, not team-b"), "{reason}");
    // Naming none, or the same, is no change of tenant.
    for (request, tenant) in [(3, None), (4, Some("team-a"))] {
        let msg = Message::SubmitJob { request, job: job("web", tenant) };
        let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
        let sends = store.settle(&mut m, Millis(1), out);
        assert!(sends.iter().any(|(_, m)| matches!(m, Message::JobAccepted { .. })), "{sends:?}");
    }
    let msg = Message::SubmitJob { request: 5, job: job("bad", Some("a b")) };
    let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
    assert!(refusal_of(&m_sends(&out)).contains("tenant name \"a b\""));
}

/// A job `id` of `tenant` with one group of `count` slots of (`cores`,
/// `memory_mb`), submitted on the operator's connection.
fn submit(
    store: &mut Store,
    m: &mut Master,
    id: &str,
    tenant: Option<&str>,
    (count, cores, memory_mb): (u32, u32, u64),
) -> Vec<(ConnId, Message)> {
    let mut g = regent_core::job::JobGroup::new("g", vec!["sleep".into(), "9".into()]);
    g.count = count;
    g.cores = cores;
    g.memory_mb = memory_mb;
    let mut sub = job(id, tenant);
    sub.groups = vec![g.to_declare()];
    let msg = Message::SubmitJob { request: 1, job: sub };
    let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
    let sends = store.settle(m, Millis(1), out);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::JobAccepted { .. })), "{sends:?}");
    sends
}

/// Registers worker `name` (`cores`, `memory_mb`) on connection `conn`.
fn register(
    store: &mut Store,
    m: &mut Master,
    conn: u64,
    name: &str,
    (cores, memory_mb): (u32, u64),
) -> Vec<(ConnId, Message)> {
    let c = ConnId(conn);
    let _ = m.handle(Millis(1), master::Event::Connected { conn: c });
    let _ = m.handle(Millis(1), master::Event::Message { conn: c, msg: hello(Role::Worker, name) });
    let msg = Message::RegisterWorker(regent_core::protocol::RegisterWorker {
        worker: name.into(),
        incarnation: regent_core::Incarnation(conn),
        cores,
        memory_mb,
        executors: vec![],
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
        ports: Default::default(),
        host: None,
        resources: vec![],
        users: vec![],
    });
    let out = m.handle(Millis(1), master::Event::Message { conn: c, msg });
    store.settle(m, Millis(1), out)
}

/// How many executors of each framework were launched among `sends`.
fn launched(sends: &[(ConnId, Message)]) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for (_, m) in sends {
        if let Message::LaunchExecutor { framework, .. } = m {
            *n.entry(framework.as_str().to_owned()).or_default() += 1;
        }
    }
    n
}

fn set_tenant(store: &mut Store, m: &mut Master, tenant: Tenant) -> Vec<(ConnId, Message)> {
    let msg = Message::SetTenant { request: 3, tenant };
    let out = m.handle(Millis(1), master::Event::Message { conn: OP, msg });
    let sends = store.settle(m, Millis(1), out);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::RequestAccepted { .. })), "{sends:?}");
    sends
}

#[test]
fn a_slot_over_its_tenants_limit_waits_never_refused_and_goes_when_the_limit_rises() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let limited = |cores| Tenant {
        limit: Dims { cores: Some(cores), ..Dims::default() },
        ..Tenant::new("team-a")
    };
    let _ = set_tenant(&mut store, &mut m, limited(2));
    let _ = register(&mut store, &mut m, 100, "w1", (8, 8192));
    let sends = submit(&mut store, &mut m, "web", Some("team-a"), (4, 1, 64));
    assert_eq!(launched(&sends), BTreeMap::from([("web".to_string(), 2)]));
    assert!(
        !sends.iter().any(|(_, m)| matches!(m, Message::RequestRefused { .. })),
        "waiting is never a refusal: {sends:?}"
    );
    let web = regent_core::FrameworkId::new("web");
    let spec = regent_core::job::JobGroup::new("g", vec![]).to_declare();
    assert_eq!(
        m.tenant_limit_reason(&web, &spec).as_deref(),
        Some("tenant limit: cores 2 of 2 in use")
    );
    let view = tenants(&mut m).into_iter().find(|v| v.tenant.name == "team-a").unwrap();
    assert_eq!((view.held.cores, view.held.memory_mb), (2, 128));
    // A limit raised lets one more go; no more than it allows.
    let sends = set_tenant(&mut store, &mut m, limited(3));
    assert_eq!(launched(&sends), BTreeMap::from([("web".to_string(), 1)]));
    // Another tenant is not held back by team-a's limit.
    let sends = submit(&mut store, &mut m, "etl", Some("team-b"), (2, 1, 64));
    assert_eq!(launched(&sends), BTreeMap::from([("etl".to_string(), 2)]));
}

/// Ghodsi et al.'s example (NSDI 2011): 9 CPUs and 18 GB; one tenant's
/// tasks ask ⟨1 CPU, 4 GB⟩, the other's ⟨3 CPU, 1 GB⟩: DRF gives them 3
/// and 2 tasks, dominant shares 2/3 each.
#[test]
fn drf_gives_ghodsis_example_three_and_two_tasks() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let _ = submit(&mut store, &mut m, "a-job", Some("a"), (20, 1, 4096));
    let _ = submit(&mut store, &mut m, "b-job", Some("b"), (20, 3, 1024));
    let sends = register(&mut store, &mut m, 100, "w1", (9, 18 * 1024));
    assert_eq!(
        launched(&sends),
        BTreeMap::from([("a-job".to_string(), 3), ("b-job".to_string(), 2)])
    );
    let views = tenants(&mut m);
    let shares: Vec<(&str, u32)> =
        views.iter().map(|v| (v.tenant.name.as_str(), v.dominant_share_ppm)).collect();
    assert_eq!(shares, vec![("a", 666_666), ("b", 666_666)]);
}

/// Weights: a tenant of weight 3 gets three times the dominant share of
/// one of weight 1 when both ask for more than the cluster holds.
#[test]
fn weighted_drf_splits_a_full_cluster_by_weight() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let _ = set_tenant(&mut store, &mut m, Tenant { weight: 3, ..Tenant::new("heavy") });
    let _ = submit(&mut store, &mut m, "light-job", Some("light"), (40, 1, 64));
    let _ = submit(&mut store, &mut m, "heavy-job", Some("heavy"), (40, 1, 64));
    let sends = register(&mut store, &mut m, 100, "w1", (16, 16 * 1024));
    assert_eq!(
        launched(&sends),
        BTreeMap::from([("heavy-job".to_string(), 12), ("light-job".to_string(), 4)])
    );
}

/// Within a named tenant, frameworks go by their dominant share: two
/// frameworks of one tenant split it evenly; the implicit `default`
/// tenant keeps first-come (framework id) order.
#[test]
fn frameworks_share_their_tenant_by_drf_but_default_keeps_first_come() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let _ = submit(&mut store, &mut m, "t-1", Some("t"), (10, 1, 64));
    let _ = submit(&mut store, &mut m, "t-2", Some("t"), (10, 1, 64));
    let sends = register(&mut store, &mut m, 100, "w1", (8, 8192));
    assert_eq!(launched(&sends), BTreeMap::from([("t-1".to_string(), 4), ("t-2".to_string(), 4)]));

    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let _ = submit(&mut store, &mut m, "d-1", None, (10, 1, 64));
    let _ = submit(&mut store, &mut m, "d-2", None, (10, 1, 64));
    let sends = register(&mut store, &mut m, 100, "w1", (8, 8192));
    assert_eq!(launched(&sends), BTreeMap::from([("d-1".to_string(), 8)]));
}

/// One demand of the DRF property: tenants with weights and task shapes,
/// and one worker's capacity.
#[derive(Clone, Debug)]
struct Demand {
    /// (weight, cores per task, MiB per task) per tenant.
    tenants: Vec<(u32, u32, u64)>,
    /// The worker's cores and MiB.
    worker: (u32, u64),
}

impl quickcheck::Arbitrary for Demand {
    fn arbitrary(g: &mut quickcheck::Gen) -> Self {
        let pick =
            |g: &mut quickcheck::Gen, lo: u64, hi: u64| lo + u64::arbitrary(g) % (hi - lo + 1);
        let n = pick(g, 2, 4) as usize;
        let tenants = (0..n)
            .map(|_| (pick(g, 1, 5) as u32, pick(g, 1, 4) as u32, pick(g, 1, 16) * 256))
            .collect();
        Demand { tenants, worker: (pick(g, 8, 64) as u32, pick(g, 8, 64) * 1024) }
    }
}

/// Weighted DRF by progressive filling (Ghodsi et al.), the reference:
/// repeatedly, the tenant with the lowest dominant share over its weight
/// (ties to the lower index) whose next task still fits gets one; shares
/// in the master's integer units (millionths, times 1000, over the
/// weight). Returns each tenant's task count.
fn progressive_filling(d: &Demand) -> Vec<u64> {
    let (cap_c, cap_m) = (u64::from(d.worker.0), d.worker.1);
    let (mut free_c, mut free_m) = (cap_c, cap_m);
    let mut tasks = vec![0u64; d.tenants.len()];
    let key = |i: usize, n: u64| weighted_share(d, i, n);
    let mut blocked = vec![false; d.tenants.len()];
    loop {
        let next =
            (0..d.tenants.len()).filter(|i| !blocked[*i]).min_by_key(|i| (key(*i, tasks[*i]), *i));
        let Some(i) = next else { return tasks };
        let (_, c, m) = d.tenants[i];
        if u64::from(c) <= free_c && m <= free_m && tasks[i] < 200 {
            free_c -= u64::from(c);
            free_m -= m;
            tasks[i] += 1;
        } else {
            blocked[i] = true;
        }
    }
}

/// A tenant's weighted dominant share holding `n` tasks, in the master's
/// integer units (millionths, times 1000, over the weight).
fn weighted_share(d: &Demand, i: usize, n: u64) -> u64 {
    let (cap_c, cap_m) = (u64::from(d.worker.0), d.worker.1);
    let (w, c, m) = d.tenants[i];
    let dom = (n * u64::from(c) * 1_000_000 / cap_c).max(n * m * 1_000_000 / cap_m);
    dom * 1_000 / u64::from(w)
}

/// Under steady demand (every tenant asks for more than the cluster
/// holds), the leader's allocation is weighted DRF's, checked two ways:
///
/// * it is the task counts of progressive filling (the reference above);
/// * directly, the stated tolerance of weighted DRF, which does not depend
///   on the reference: the cluster is full for every tenant (no tenant's
///   next task fits in what is left free), and the allocation is fair
///   within one task: whenever a tenant `j` has a lower weighted dominant
///   share than another tenant `i` had before its last task, giving `i`'s
///   last task back would still not let `j` run one more (so `j` was
///   already blocked by what is left, not passed over).
fn drf_allocation_is_progressive_fillings(d: Demand) -> quickcheck::TestResult {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    for (i, (weight, cores, mem)) in d.tenants.iter().enumerate() {
        let name = format!("t{i}");
        if *weight > 1 {
            let _ =
                set_tenant(&mut store, &mut m, Tenant { weight: *weight, ..Tenant::new(&name) });
        }
        let _ = submit(&mut store, &mut m, &format!("job-{i}"), Some(&name), (200, *cores, *mem));
    }
    let sends = register(&mut store, &mut m, 100, "w1", d.worker);
    let placed = launched(&sends);
    let got: Vec<u64> = (0..d.tenants.len())
        .map(|i| placed.get(&format!("job-{i}")).copied().unwrap_or(0) as u64)
        .collect();
    let want = progressive_filling(&d);
    if got != want {
        return quickcheck::TestResult::error(format!("placed {got:?}, weighted DRF {want:?}"));
    }
    let used_c: u64 = got.iter().zip(&d.tenants).map(|(n, t)| n * u64::from(t.1)).sum();
    let used_m: u64 = got.iter().zip(&d.tenants).map(|(n, t)| n * t.2).sum();
    let (free_c, free_m) = (u64::from(d.worker.0) - used_c, d.worker.1 - used_m);
    let fits = |j: usize, c: u64, m: u64| u64::from(d.tenants[j].1) <= c && d.tenants[j].2 <= m;
    for (j, n) in got.iter().enumerate() {
        if fits(j, free_c, free_m) && *n < 200 {
            return quickcheck::TestResult::error(format!(
                "placed {got:?}: tenant {j}'s next task still fits in {free_c} cores, {free_m} MiB"
            ));
        }
    }
    for (i, ni) in got.iter().enumerate().filter(|(_, n)| **n > 0) {
        let before_last = weighted_share(&d, i, ni - 1);
        for (j, nj) in got.iter().enumerate() {
            let (ci, mi) = (u64::from(d.tenants[i].1), d.tenants[i].2);
            if weighted_share(&d, j, *nj) < before_last && fits(j, free_c + ci, free_m + mi) {
                return quickcheck::TestResult::error(format!(
                    "placed {got:?}: tenant {j} (weighted share {}) is poorer than tenant {i} \
                     was before its last task ({before_last}) and could have run it",
                    weighted_share(&d, j, *nj)
                ));
            }
        }
    }
    quickcheck::TestResult::passed()
}

#[test]
fn drf_converges_to_weighted_shares_within_one_task() {
    // Ghodsi et al.'s example, then random demands and weights.
    let ghodsi = Demand { tenants: vec![(1, 1, 4 * 1024), (1, 3, 1024)], worker: (9, 18 * 1024) };
    assert_eq!(progressive_filling(&ghodsi), vec![3, 2]);
    let r = drf_allocation_is_progressive_fillings(ghodsi);
    assert!(!r.is_failure() && !r.is_error(), "{r:?}");
    quickcheck::QuickCheck::new()
        .tests(300)
        .quickcheck(drf_allocation_is_progressive_fillings as fn(Demand) -> quickcheck::TestResult);
}

fn status(
    id: &regent_core::ExecutorId,
    framework: &regent_core::FrameworkId,
    state: regent_core::protocol::ExecutorState,
) -> Message {
    Message::ExecutorStatus {
        incarnation: regent_core::Incarnation(100),
        report: regent_core::protocol::ExecutorReport {
            health: None,
            id: id.clone(),
            framework: framework.clone(),
            cores: 1,
            memory_mb: 64,
            state,
            ports: vec![],
            resources: Default::default(),
            ran_ms: None,
        },
    }
}

/// Preemption (docs/tenants.md, core/src/master/preempt.rs): a tenant
/// arriving on a cluster another tenant fills takes its fair share by
/// stopping the richer tenant's executors (their slots wait again, no retry
/// charged), until their weighted dominant shares are equal; never more
/// than that, and nothing is taken back.
#[test]
fn a_poorer_tenant_preempts_a_richer_one_down_to_equal_shares() {
    use regent_core::protocol::ExecutorState;
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let _ = set_tenant(&mut store, &mut m, Tenant::new("a"));
    let _ = set_tenant(&mut store, &mut m, Tenant::new("b"));
    let _ = submit(&mut store, &mut m, "a-job", Some("a"), (8, 1, 64));
    let sends = register(&mut store, &mut m, 100, "w1", (4, 4096));
    let w = ConnId(100);
    let mut live: BTreeMap<regent_core::ExecutorId, regent_core::FrameworkId> = BTreeMap::new();
    let handle = |m: &mut Master, store: &mut Store, now: u64, ev: master::Event| {
        let out = m.handle(Millis(now), ev);
        store.settle(m, Millis(now), out)
    };
    let mut pending: Vec<(ConnId, Message)> = sends;
    let mut kills = 0;
    for step in 0..40u64 {
        let now = 1_000 + step * 600;
        if step == 1 {
            pending.extend(submit(&mut store, &mut m, "b-job", Some("b"), (8, 1, 64)));
        }
        // The worker answers what it was told: starts launches, ends kills.
        for (_, msg) in std::mem::take(&mut pending) {
            let report = match msg {
                Message::LaunchExecutor { executor, framework, .. } => {
                    live.insert(executor.clone(), framework.clone());
                    status(&executor, &framework, ExecutorState::Running)
                }
                Message::KillExecutorOnWorker { executor, .. }
                | Message::StopExecutorOnWorker { executor, .. } => {
                    kills += 1;
                    let Some(framework) = live.remove(&executor) else { continue };
                    status(&executor, &framework, ExecutorState::Killed)
                }
                _ => continue,
            };
            pending.extend(handle(
                &mut m,
                &mut store,
                now,
                master::Event::Message { conn: w, msg: report },
            ));
        }
        let beat = Message::WorkerHeartbeat { incarnation: regent_core::Incarnation(100) };
        pending.extend(handle(
            &mut m,
            &mut store,
            now,
            master::Event::Message { conn: w, msg: beat },
        ));
        pending.extend(handle(&mut m, &mut store, now + 1, master::Event::Tick));
    }
    let by_framework = live.values().fold(BTreeMap::<String, usize>::new(), |mut n, f| {
        *n.entry(f.as_str().to_owned()).or_default() += 1;
        n
    });
    assert_eq!(
        by_framework,
        BTreeMap::from([("a-job".to_string(), 2), ("b-job".to_string(), 2)]),
        "equal shares of the 4 cores"
    );
    assert_eq!(kills, 2, "exactly the two executors the fair share needed were preempted");
    let a = regent_core::FrameworkId::new("a-job");
    let status = m.job_statuses(Millis(25_000)).into_iter().find(|j| j.job == a).expect("a-job");
    assert_eq!(status.groups[0].running, 2);
    assert!(
        status.groups[0].slots.iter().all(|s| s.phase != regent_core::api::SlotPhase::Failed),
        "a preempted slot waits again, it does not fail: {status:?}"
    );
}

/// A worker on `conn` that does what it is told: starts what is launched
/// (RUNNING), ends what is killed or stopped (KILLED). Returns the
/// executors it killed, in order.
fn obey(
    store: &mut Store,
    m: &mut Master,
    conn: ConnId,
    now: u64,
    pending: &mut Vec<(ConnId, Message)>,
    live: &mut BTreeMap<regent_core::ExecutorId, regent_core::FrameworkId>,
) -> Vec<regent_core::ExecutorId> {
    use regent_core::protocol::ExecutorState;
    let mut killed = Vec::new();
    for (_, msg) in std::mem::take(pending) {
        let report = match msg {
            Message::LaunchExecutor { executor, framework, .. } => {
                live.insert(executor.clone(), framework.clone());
                status(&executor, &framework, ExecutorState::Running)
            }
            Message::KillExecutorOnWorker { executor, .. }
            | Message::StopExecutorOnWorker { executor, .. } => {
                let Some(framework) = live.remove(&executor) else { continue };
                killed.push(executor.clone());
                status(&executor, &framework, ExecutorState::Killed)
            }
            _ => continue,
        };
        let out = m.handle(Millis(now), master::Event::Message { conn, msg: report });
        pending.extend(store.settle(m, Millis(now), out));
    }
    killed
}

/// The plan of a job of tenant `tenant` with one group of `count`
/// one-core slots.
fn plan_of(m: &mut Master, now: u64, tenant: &str, count: u32) -> regent_core::protocol::GroupPlan {
    let mut g = regent_core::job::JobGroup::new("g", vec!["sleep".into(), "9".into()]);
    g.count = count;
    g.cores = 1;
    g.memory_mb = 64;
    let msg = Message::PlanRequest {
        request: 9,
        groups: vec![g.to_declare()],
        tenant: Some(tenant.into()),
    };
    let out = m.handle(Millis(now), master::Event::Message { conn: OP, msg });
    match m_sends(&out).as_slice() {
        [(OP, Message::PlanReply { groups, .. })] => groups[0].clone(),
        other => panic!("one PlanReply: {other:?}"),
    }
}

/// `regent job plan` names the exact victims (docs/tenants.md,
/// docs/design.md#issue-44): the plan of tenant `b`'s job on a cluster
/// tenant `a` fills lists two of `a`'s executors, why, and the budget;
/// once `b`'s job is submitted, the leader's preemptions stop exactly
/// those two, in that order.
#[test]
fn the_plan_names_the_victims_the_leader_then_preempts() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let _ = set_tenant(&mut store, &mut m, Tenant::new("a"));
    let _ = set_tenant(&mut store, &mut m, Tenant::new("b"));
    let _ = submit(&mut store, &mut m, "a-job", Some("a"), (8, 1, 64));
    let mut pending = register(&mut store, &mut m, 100, "w1", (4, 4096));
    let w = ConnId(100);
    let mut live = BTreeMap::new();
    let mut killed = obey(&mut store, &mut m, w, 1_000, &mut pending, &mut live);
    assert!(killed.is_empty());
    assert_eq!(live.len(), 4, "a fills the worker");

    let plan = plan_of(&mut m, 1_000, "b", 8);
    assert_eq!(plan.unplaced, 8);
    let planned: Vec<regent_core::ExecutorId> =
        plan.victims.iter().map(|v| v.executor.clone()).collect();
    assert_eq!(planned.len(), 2, "down to equal shares: {plan:?}");
    for v in &plan.victims {
        assert_eq!(v.framework.as_str(), "a-job");
        assert_eq!((v.group.as_str(), v.tenant.as_str(), v.worker.as_str()), ("g", "a", "w1"));
        assert_eq!(v.why, "tenant above its fair share");
        assert!(live.contains_key(&v.executor));
    }
    assert_eq!((plan.victims[0].for_slot, plan.victims[1].for_slot), (0, 1));
    assert_eq!(
        plan.preemption.as_deref(),
        Some("preemption budget: 60 of 60 victims left this minute for tenant b")
    );
    // A plan changes nothing: no preemption comes of it.
    let out = m.handle(Millis(1_100), master::Event::Tick);
    assert!(m_sends(&out).is_empty(), "{out:?}");

    pending.extend(submit(&mut store, &mut m, "b-job", Some("b"), (8, 1, 64)));
    // The next check stops the first victim; until it ends, b's slots say
    // so first.
    let before = m.state();
    let out = m.handle(Millis(1_900), master::Event::Tick);
    pending.extend(store.settle(&mut m, Millis(1_900), out));
    // The events say which executor is preempted and by whom.
    let lines: Vec<String> = regent_core::events::diff(&before, &m.state())
        .iter()
        .map(regent_core::events::ClusterEvent::describe)
        .filter(|l| l.starts_with("executor "))
        .collect();
    assert_eq!(
        lines,
        vec![format!("executor {} on w1 updated, RUNNING (preempted by b-job/g)", planned[0])],
        "{lines:?}"
    );
    let state = m.state();
    let a_job = state.frameworks.iter().find(|f| f.id.as_str() == "a-job").expect("a-job");
    assert_eq!(
        a_job.groups[0].last_end.as_deref(),
        Some(format!("slot 0: executor {} preempted by b-job/g", planned[0]).as_str()),
        "the victim's group says why its slot waits again"
    );
    let b = regent_core::FrameworkId::new("b-job");
    let first_reasons = |m: &Master| {
        let status = m.job_statuses(Millis(1)).into_iter().find(|j| j.job == b).expect("b-job");
        status.groups[0].slots[0].reasons.clone()
    };
    assert_eq!(
        first_reasons(&m).first(),
        Some(&regent_core::api::WaitReason::WaitingForPreempted { executors: 1 }),
        "{:?}",
        first_reasons(&m)
    );
    assert_eq!(first_reasons(&m)[0].to_string(), "waiting for 1 preempted executors to end");
    let mut ended = Vec::new();
    for step in 0..20u64 {
        let now = 2_000 + step * 600;
        let before = m.state();
        killed.extend(obey(&mut store, &mut m, w, now, &mut pending, &mut live));
        for e in regent_core::events::diff(&before, &m.state()) {
            if let regent_core::events::ClusterEvent::Executor { state, reason, executor, .. } = e {
                if state == "KILLED" {
                    ended.push((executor, reason));
                }
            }
        }
        let out = m.handle(Millis(now + 1), master::Event::Tick);
        pending.extend(store.settle(&mut m, Millis(now + 1), out));
    }
    assert_eq!(killed, planned, "the leader preempted exactly the plan's victims, in order");
    let by = Some("preempted by b-job/g".to_string());
    let expected: Vec<_> = planned.iter().map(|id| (id.clone(), by.clone())).collect();
    assert_eq!(ended, expected, "each victim's end says it was preempted, and by whom");
    assert!(
        !first_reasons(&m)
            .iter()
            .any(|r| matches!(r, regent_core::api::WaitReason::WaitingForPreempted { .. })),
        "no victim runs any more: {:?}",
        first_reasons(&m)
    );
}

/// With `--preemption off` a plan says so and names no victim.
#[test]
fn a_plan_says_preemption_is_off() {
    let mut store = Store::default();
    let mut config = master::Config::new(regent_core::MasterId::new("a"), addr("a"));
    config.preemption = false;
    let mut m = master::Master::new(config);
    let now = Millis(0);
    let out = m.handle(now, master::Event::Elected { floor: Epoch(1), clock: 1 });
    assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
    let out = m.handle(now, master::Event::Store(StoreEvent::Loaded { records: vec![] }));
    let _ = store.settle(&mut m, now, out);
    let _ = m.handle(now, master::Event::Connected { conn: OP });
    let _ = m.handle(now, master::Event::Message { conn: OP, msg: hello(Role::Client, "op") });
    let _ = set_tenant(&mut store, &mut m, Tenant::new("a"));
    let _ = set_tenant(&mut store, &mut m, Tenant::new("b"));
    let _ = submit(&mut store, &mut m, "a-job", Some("a"), (8, 1, 64));
    let mut pending = register(&mut store, &mut m, 100, "w1", (4, 4096));
    let mut live = BTreeMap::new();
    let _ = obey(&mut store, &mut m, ConnId(100), 1_000, &mut pending, &mut live);
    let plan = plan_of(&mut m, 1_000, "b", 8);
    assert_eq!(plan.unplaced, 8);
    assert!(plan.victims.is_empty(), "{plan:?}");
    assert_eq!(plan.preemption.as_deref(), Some("preemption is off on this cluster"));
}

/// Preemption is checked only when something could change its answer
/// (docs/tenants.md, docs/design.md#issue-44): once the shares are fair,
/// heartbeats and ticks check nothing; a tenant set, or an executor
/// ending, makes one check due, made at the first step past the 500 ms
/// floor after the last.
#[test]
fn preemption_is_checked_only_when_something_could_change_the_answer() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let _ = set_tenant(&mut store, &mut m, Tenant::new("a"));
    let _ = set_tenant(&mut store, &mut m, Tenant::new("b"));
    let _ = submit(&mut store, &mut m, "a-job", Some("a"), (8, 1, 64));
    let mut pending = register(&mut store, &mut m, 100, "w1", (4, 4096));
    pending.extend(submit(&mut store, &mut m, "b-job", Some("b"), (8, 1, 64)));
    let w = ConnId(100);
    let mut live = BTreeMap::new();
    let beat = || Message::WorkerHeartbeat { incarnation: regent_core::Incarnation(100) };
    let mut step = |m: &mut Master, store: &mut Store, now: u64, pending: &mut Vec<_>| {
        let _ = obey(store, m, w, now, pending, &mut live);
        let out = m.handle(Millis(now), master::Event::Message { conn: w, msg: beat() });
        pending.extend(store.settle(m, Millis(now), out));
        let out = m.handle(Millis(now + 1), master::Event::Tick);
        pending.extend(store.settle(m, Millis(now + 1), out));
    };
    for k in 0..10u64 {
        step(&mut m, &mut store, 1_000 + k * 600, &mut pending);
    }
    // Fair now (2:2): nothing changes, nothing is checked.
    let settled = m.preemption_checks();
    assert!(settled >= 2, "the preemptions were checked: {settled}");
    for k in 10..30u64 {
        step(&mut m, &mut store, 1_000 + k * 600, &mut pending);
    }
    assert_eq!(m.preemption_checks(), settled, "heartbeats and ticks check nothing");
    // A tenant set: one check, at the next step.
    let _ = set_tenant(&mut store, &mut m, Tenant::new("c"));
    let out = m.handle(Millis(20_000), master::Event::Tick);
    pending.extend(store.settle(&mut m, Millis(20_000), out));
    assert_eq!(m.preemption_checks(), settled + 1);
    // Two changes within the floor: the second check waits for it.
    let _ = set_tenant(&mut store, &mut m, Tenant::new("d"));
    let out = m.handle(Millis(20_100), master::Event::Tick);
    pending.extend(store.settle(&mut m, Millis(20_100), out));
    assert_eq!(m.preemption_checks(), settled + 1, "within 500 ms of the last check");
    let out = m.handle(Millis(20_501), master::Event::Tick);
    pending.extend(store.settle(&mut m, Millis(20_501), out));
    assert_eq!(m.preemption_checks(), settled + 2, "due, past the floor");
    let out = m.handle(Millis(21_200), master::Event::Tick);
    pending.extend(store.settle(&mut m, Millis(21_200), out));
    assert_eq!(m.preemption_checks(), settled + 2, "nothing more");
}

/// Preemption judges a tenant's guarantee by what it keeps (docs/tenants.md,
/// core/src/master/preempt.rs): victims still in their grace no longer count
/// as the tenant's. Tenant `a` (2 cores guaranteed) fills the 4-core worker;
/// tenant `b` (4 guaranteed, holding none) waits with three jobs. The worker
/// never ends the kills it is sent, so every victim stays in its grace:
/// `b`'s jobs take two of `a`'s executors (one each, one preemption per
/// check), and never a third, which would leave `a` 1 core once the victims
/// end (`--api-jobs --preemption`: sim seed 611 (docs/design.md#simulator-seeds)).
#[test]
fn preemption_never_takes_a_tenant_below_its_guarantee_counting_victims_in_their_grace() {
    use regent_core::protocol::tenants::Dims;
    use regent_core::protocol::ExecutorState;
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let guarantee = |cores| Dims { cores: Some(cores), ..Dims::default() };
    let _ = set_tenant(&mut store, &mut m, Tenant { guarantee: guarantee(2), ..Tenant::new("a") });
    let _ = set_tenant(&mut store, &mut m, Tenant { guarantee: guarantee(4), ..Tenant::new("b") });
    let _ = submit(&mut store, &mut m, "a-job", Some("a"), (4, 1, 64));
    let sends = register(&mut store, &mut m, 100, "w1", (4, 4096));
    let w = ConnId(100);
    let mut pending = Vec::new();
    for (_, msg) in sends {
        if let Message::LaunchExecutor { executor, framework, .. } = msg {
            let report = status(&executor, &framework, ExecutorState::Running);
            let out = m.handle(Millis(2), master::Event::Message { conn: w, msg: report });
            pending.extend(store.settle(&mut m, Millis(2), out));
        }
    }
    for job in ["b-1", "b-2", "b-3"] {
        pending.extend(submit(&mut store, &mut m, job, Some("b"), (4, 1, 64)));
    }
    let mut killed = Vec::new();
    for step in 0..10u64 {
        let now = Millis(1_000 + step * 600);
        let beat = Message::WorkerHeartbeat { incarnation: regent_core::Incarnation(100) };
        let out = m.handle(now, master::Event::Message { conn: w, msg: beat });
        pending.extend(store.settle(&mut m, now, out));
        let out = m.handle(now, master::Event::Tick);
        pending.extend(store.settle(&mut m, now, out));
        for (_, msg) in std::mem::take(&mut pending) {
            if let Message::KillExecutorOnWorker { executor, .. } = msg {
                killed.push(executor);
            }
        }
    }
    assert_eq!(killed.len(), 2, "a keeps its 2 guaranteed cores: {killed:?}");
    assert_eq!(m.preemptions_started(), 2);
}

/// The per-tenant preemption budget refills (docs/tenants.md,
/// core/src/master/preempt.rs): tenant `a` fills a 130-core worker, tenant
/// `b` arrives asking for 130 one-core slots, and equal shares would take 65
/// of `a`'s executors. The first 60 go within a minute; then `b`'s budget
/// is used up and nothing changes that could make a check due, so the
/// leader checks again only when the oldest of those victims leaves the
/// minute, and the last 5 follow.
#[test]
fn a_used_up_preemption_budget_refills_a_minute_after_its_oldest_victim() {
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let _ = set_tenant(&mut store, &mut m, Tenant::new("a"));
    let _ = set_tenant(&mut store, &mut m, Tenant::new("b"));
    let _ = submit(&mut store, &mut m, "a-job", Some("a"), (130, 1, 64));
    let mut pending = register(&mut store, &mut m, 100, "w1", (130, 130 * 64));
    let w = ConnId(100);
    let mut live = BTreeMap::new();
    let _ = obey(&mut store, &mut m, w, 500, &mut pending, &mut live);
    assert_eq!(live.len(), 130);
    pending.extend(submit(&mut store, &mut m, "b-job", Some("b"), (130, 1, 64)));
    // The worker ends each kill at the next step, 300 ms on.
    let mut stopped_at: Vec<u64> = Vec::new();
    for step in 0..300u64 {
        let now = 1_000 + step * 300;
        let killed = obey(&mut store, &mut m, w, now, &mut pending, &mut live);
        stopped_at.extend(killed.iter().map(|_| now));
        let beat = Message::WorkerHeartbeat { incarnation: regent_core::Incarnation(100) };
        let out = m.handle(Millis(now), master::Event::Message { conn: w, msg: beat });
        pending.extend(store.settle(&mut m, Millis(now), out));
        let out = m.handle(Millis(now + 1), master::Event::Tick);
        pending.extend(store.settle(&mut m, Millis(now + 1), out));
    }
    assert_eq!(stopped_at.len(), 65, "down to equal shares: {stopped_at:?}");
    let since_first = |k: usize| stopped_at[k] - stopped_at[0];
    assert!(since_first(59) < 60_000, "60 victims within the minute: {stopped_at:?}");
    assert!(
        (60_000..=60_001 + 900).contains(&since_first(60)),
        "the 61st waits until the first leaves the minute, and no longer: {stopped_at:?}"
    );
}

/// "Preempted by" outlives a failover (docs/tenants.md,
/// docs/design.md#issue-44): the preemption's write names the preemptor
/// with the victim, so a new leader that takes over while the victim still
/// runs kills it (never adopts it), says in job status and in the group's
/// last end that its slot was emptied by a preemption and by whom, counts
/// it among the victims the preempting group waits for, and, when the
/// victim's framework ends with that slot still waiting, the history says
/// so too.
#[test]
fn a_new_leader_still_names_the_preemptor_and_kills_the_victim() {
    use regent_core::api::{SlotPhase, WaitReason};
    use regent_core::protocol::{ExecutorReport, ExecutorState};
    let mut store = Store::default();
    let mut m = leader(&mut store, "a");
    let _ = set_tenant(&mut store, &mut m, Tenant::new("a"));
    let _ = set_tenant(&mut store, &mut m, Tenant::new("b"));
    let _ = submit(&mut store, &mut m, "a-job", Some("a"), (8, 1, 64));
    let mut pending = register(&mut store, &mut m, 100, "w1", (4, 4096));
    let w = ConnId(100);
    let mut live = BTreeMap::new();
    let _ = obey(&mut store, &mut m, w, 1_000, &mut pending, &mut live);
    assert_eq!(live.len(), 4, "a fills the worker");
    let _ = submit(&mut store, &mut m, "b-job", Some("b"), (8, 1, 64));
    let out = m.handle(Millis(1_900), master::Event::Tick);
    let sends = store.settle(&mut m, Millis(1_900), out);
    let victim = sends
        .iter()
        .find_map(|(_, msg)| match msg {
            Message::KillExecutorOnWorker { executor, .. }
            | Message::StopExecutorOnWorker { executor, .. } => Some(executor.clone()),
            _ => None,
        })
        .expect("a preemption stops one of a's executors");
    let (_, victim_slot) = victim.group_slot(&regent_core::FrameworkId::new("a-job")).unwrap();
    let a = regent_core::FrameworkId::new("a-job");
    let b = regent_core::FrameworkId::new("b-job");
    let slot_of = |m: &Master, job: &regent_core::FrameworkId, slot: u32| {
        let status = m.job_statuses(Millis(2_000)).into_iter().find(|j| j.job == *job).unwrap();
        status.groups[0].slots.iter().find(|s| s.slot == slot).cloned().unwrap()
    };
    let s = slot_of(&m, &a, victim_slot);
    assert_eq!(s.phase, SlotPhase::Stopping, "{s:?}");
    assert_eq!(s.executor.as_ref(), Some(&victim));
    assert_eq!(s.preempted_by.as_deref(), Some("b-job/g"), "{s:?}");

    // The leader dies before the victim ends (the kill never reached the
    // worker); a new leader takes over from the store alone.
    let mut n = store.elect("b", Millis(0), Epoch(2), 1);
    let _ = n.handle(Millis(0), master::Event::Connected { conn: OP });
    let _ =
        n.handle(Millis(0), master::Event::Message { conn: OP, msg: hello(Role::Client, "op") });
    let c = ConnId(200);
    let _ = n.handle(Millis(1), master::Event::Connected { conn: c });
    let _ = n.handle(Millis(1), master::Event::Message { conn: c, msg: hello(Role::Worker, "w1") });
    let report = |id: &regent_core::ExecutorId, state: ExecutorState| ExecutorReport {
        health: None,
        id: id.clone(),
        framework: live[id].clone(),
        cores: 1,
        memory_mb: 64,
        state,
        ports: vec![],
        resources: Default::default(),
        ran_ms: None,
    };
    let msg = Message::RegisterWorker(regent_core::protocol::RegisterWorker {
        worker: "w1".into(),
        incarnation: regent_core::Incarnation(100),
        cores: 4,
        memory_mb: 4096,
        executors: live.keys().map(|id| report(id, ExecutorState::Running)).collect(),
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
        ports: Default::default(),
        host: None,
        resources: vec![],
        users: vec![],
    });
    let out = n.handle(Millis(1), master::Event::Message { conn: c, msg });
    let sends = store.settle(&mut n, Millis(1), out);
    let out = n.handle(Millis(2), master::Event::Tick);
    let sends: Vec<_> = sends.into_iter().chain(store.settle(&mut n, Millis(2), out)).collect();
    let killed: Vec<&regent_core::ExecutorId> = sends
        .iter()
        .filter_map(|(_, msg)| match msg {
            Message::KillExecutorOnWorker { executor, .. }
            | Message::StopExecutorOnWorker { executor, .. } => Some(executor),
            _ => None,
        })
        .collect();
    assert_eq!(killed, vec![&victim], "the new leader kills the victim, and only it: {sends:?}");
    // Its slot waits, and says who emptied it.
    let s = slot_of(&n, &a, victim_slot);
    assert_eq!(s.phase, SlotPhase::Waiting, "{s:?}");
    assert_eq!(s.preempted_by.as_deref(), Some("b-job/g"), "{s:?}");
    let state = n.state();
    let a_view = state.frameworks.iter().find(|f| f.id == a).unwrap();
    assert_eq!(
        a_view.groups[0].last_end.as_deref(),
        Some(format!("slot {victim_slot}: executor {victim} preempted by b-job/g").as_str())
    );
    // b's slots wait for the victim first, as they did at the old leader.
    let reasons = slot_of(&n, &b, 0).reasons;
    assert_eq!(
        reasons.first(),
        Some(&WaitReason::WaitingForPreempted { executors: 1 }),
        "{reasons:?}"
    );
    // The other executors of a were adopted: they say nothing of it.
    for (id, _) in live.iter().filter(|(id, _)| **id != victim) {
        let (_, slot) = id.group_slot(&a).unwrap();
        let s = slot_of(&n, &a, slot);
        assert_eq!((s.phase, s.preempted_by), (SlotPhase::Running, None), "{id}");
    }

    // The victim ends; b takes the core. a is killed with the slot still
    // waiting: the history says the slot's last end was a preemption.
    let msg = status(&victim, &a, ExecutorState::Killed);
    let out = n.handle(Millis(3), master::Event::Message { conn: c, msg });
    let mut sends = store.settle(&mut n, Millis(3), out);
    for t in [600, 1_200] {
        let out = n.handle(Millis(t), master::Event::Tick);
        sends.extend(store.settle(&mut n, Millis(t), out));
    }
    assert_eq!(launched(&sends).get("b-job"), Some(&1), "b gets the freed core: {sends:?}");
    let s = slot_of(&n, &a, victim_slot);
    assert_eq!(
        (s.phase, s.preempted_by.as_deref()),
        (SlotPhase::Waiting, Some("b-job/g")),
        "{s:?}"
    );
    let msg = Message::KillFramework { request: 4, framework: a.clone() };
    let out = n.handle(Millis(1_300), master::Event::Message { conn: OP, msg });
    let _ = store.settle(&mut n, Millis(1_300), out);
    let finished = n.history().find(|f| f.id == a).expect("a in the history").clone();
    let by: Vec<(u32, Option<&str>)> =
        finished.slots.iter().map(|s| (s.slot, s.preempted_by.as_deref())).collect();
    assert!(by.contains(&(victim_slot, Some("b-job/g"))), "{finished:?}");
    // (The new leader may have preempted another of a's executors for b's
    // next slot meanwhile: its slot says so too; the rest say nothing.)
    assert!(by.iter().all(|(_, b)| matches!(b, None | Some("b-job/g"))), "{by:?}");
    assert!(by.iter().filter(|(_, b)| b.is_none()).count() >= 6, "{by:?}");
    // Durable: a third leader reads the same history from the store.
    let third = store.elect("c", Millis(0), Epoch(3), 1);
    let again = third.history().find(|f| f.id == a).expect("a in the history");
    assert_eq!(again, &finished);
}

//! Placement by a group's policy: constraints on worker attributes, a
//! placement of the group's own, spread over an attribute; the checks on a
//! worker's announced attributes; and plans (`PlanRequest`: where a job
//! would go now and why not, changing nothing).

mod common;

use common::*;
use regent_core::api::WaitReason;
use regent_core::master::{self, Master};
use regent_core::policy::{Constraint, GroupPolicy, Placement};
use regent_core::protocol::{GroupSpec, Message, RegisterWorker};
use regent_core::{ConnId, Epoch, Millis};
use std::collections::BTreeMap;

const T: Millis = Millis(0);

fn attrs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<_> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    v.sort();
    v
}

fn register(
    m: &mut Master,
    conn: u64,
    name: &str,
    cores: u32,
    a: &[(&str, &str)],
) -> Vec<(ConnId, Message)> {
    let _ = connect_worker(m, T, conn, name);
    let reg = Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: name.into(),
        incarnation: regent_core::Incarnation(conn),
        cores,
        memory_mb: 64 * 1024,
        executors: vec![],
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: attrs(a),
    });
    deliver_to_master(m, T, conn, reg)
}

fn leader(placement: Placement) -> Master {
    let mut cfg = master::Config::new("a".into(), addr("a"));
    cfg.placement = placement;
    let mut m = Master::new(cfg);
    let _ = elect(&mut m, T, 1);
    m
}

fn spec(group: &str, slots: u32, policy: GroupPolicy) -> GroupSpec {
    GroupSpec {
        group: group.into(),
        slots,
        command: vec!["/bin/sleep".into(), "10".into()],
        env: vec![],
        cores: 1,
        memory_mb: 1,
        policy,
        launch: Default::default(),
    }
}

fn constrained(c: &[&str]) -> GroupPolicy {
    GroupPolicy {
        constraints: c.iter().map(|t| Constraint::parse(t).unwrap()).collect(),
        ..Default::default()
    }
}

/// Launches in `sends`, by the worker connection they went to.
fn launches_by_conn(sends: &[(ConnId, Message)]) -> BTreeMap<u64, usize> {
    let mut by = BTreeMap::new();
    for (c, msg) in sends {
        if matches!(msg, Message::LaunchExecutor { .. }) {
            *by.entry(c.0).or_default() += 1;
        }
    }
    by
}

fn declare(m: &mut Master, spec: GroupSpec) -> Vec<(ConnId, Message)> {
    deliver_to_master(m, T, 1, Message::DeclareGroup { request: 1, spec })
}

fn accepted(sends: &[(ConnId, Message)]) -> bool {
    sends.iter().any(|(_, m)| matches!(m, Message::RequestAccepted { .. }))
}

/// w0 ssd/r1, w1 hdd/r1, w2 ssd/r2, w3 (no attributes); conns 100..103.
fn cluster(placement: Placement, cores: u32) -> Master {
    let mut m = leader(placement);
    let _ = register(&mut m, 100, "w0", cores, &[("disk", "ssd"), ("rack", "r1")]);
    let _ = register(&mut m, 101, "w1", cores, &[("disk", "hdd"), ("rack", "r1")]);
    let _ = register(&mut m, 102, "w2", cores, &[("disk", "ssd"), ("rack", "r2")]);
    let _ = register(&mut m, 103, "w3", cores, &[]);
    subscribe(&mut m, 1);
    m
}

#[test]
fn a_constrained_group_lands_only_on_matching_workers() {
    for placement in [Placement::Spread, Placement::Pack] {
        let mut m = cluster(placement, 8);
        let sends = declare(&mut m, spec("g", 6, constrained(&["disk=ssd"])));
        assert!(accepted(&sends), "{placement}: constraints are accepted now");
        let by = launches_by_conn(&sends);
        assert_eq!(by.values().sum::<usize>(), 6, "{placement}");
        assert!(by.keys().all(|c| *c == 100 || *c == 102), "{placement}: only ssd: {by:?}");
    }
}

#[test]
fn not_equals_and_present_constraints() {
    let mut m = cluster(Placement::Spread, 8);
    let by = launches_by_conn(&declare(&mut m, spec("g", 8, constrained(&["rack!=r1"]))));
    assert_eq!(by.values().sum::<usize>(), 8);
    assert!(by.keys().all(|c| *c == 102 || *c == 103), "not r1, absent counts as not r1: {by:?}");
    let mut m = cluster(Placement::Spread, 8);
    let by = launches_by_conn(&declare(&mut m, spec("g", 8, constrained(&["rack", "disk!=ssd"]))));
    assert_eq!(by, BTreeMap::from([(101, 8)]), "has a rack and no ssd: w1 only");
}

#[test]
fn in_and_not_in_constraints_take_lists_of_values() {
    let mut m = cluster(Placement::Spread, 8);
    let by = launches_by_conn(&declare(&mut m, spec("g", 6, constrained(&["rack in [r2, r7]"]))));
    assert_eq!(by, BTreeMap::from([(102, 6)]), "only w2 is on r2 or r7");
    let mut m = cluster(Placement::Spread, 8);
    let by =
        launches_by_conn(&declare(&mut m, spec("g", 6, constrained(&["rack not in [r1, r2]"]))));
    assert_eq!(by, BTreeMap::from([(103, 6)]), "w3 has no rack: in neither");
    let (p, _) = plan(&mut m, vec![spec("x", 1, constrained(&["rack in [r8, r9]"]))]);
    assert_eq!(p[0].reason.as_deref(), Some("no ALIVE worker matches rack in [r8, r9]"));
    // A list past the limit is refused at declaration, naming it.
    let many: Vec<String> =
        (0..=regent_core::limits::MAX_CONSTRAINT_VALUES).map(|i| format!("r{i}")).collect();
    let text = format!("rack in [{}]", many.join(", "));
    let sends = declare(&mut m, spec("y", 1, constrained(&[text.as_str()])));
    let refused = sends.iter().find_map(|(_, m)| match m {
        Message::RequestRefused { reason, .. } => Some(reason.clone()),
        _ => None,
    });
    assert!(refused.is_some_and(|r| r.contains("MAX_CONSTRAINT_VALUES")), "{sends:?}");
}

#[test]
fn an_unplaceable_group_waits_and_is_placed_when_a_matching_worker_registers() {
    let mut m = cluster(Placement::Spread, 8);
    let sends = declare(&mut m, spec("g", 2, constrained(&["rack=r9"])));
    assert!(accepted(&sends));
    assert!(launches_by_conn(&sends).is_empty(), "no worker is on r9");
    let sends = register(&mut m, 104, "w4", 8, &[("rack", "r9")]);
    assert_eq!(launches_by_conn(&sends), BTreeMap::from([(104, 2)]));
}

#[test]
fn spread_over_an_attribute_gives_even_counts() {
    for placement in [Placement::Spread, Placement::Pack] {
        let mut m = leader(placement);
        // Rack r1 has three workers, r2 one: spread by worker would put
        // three of four executors on r1.
        let _ = register(&mut m, 100, "a1", 8, &[("rack", "r1")]);
        let _ = register(&mut m, 101, "a2", 8, &[("rack", "r1")]);
        let _ = register(&mut m, 102, "a3", 8, &[("rack", "r1")]);
        let _ = register(&mut m, 103, "b1", 8, &[("rack", "r2")]);
        subscribe(&mut m, 1);
        let policy = GroupPolicy { spread: Some("rack".into()), ..Default::default() };
        let by = launches_by_conn(&declare(&mut m, spec("g", 6, policy)));
        let r1: usize = [100, 101, 102].iter().map(|c| by.get(c).copied().unwrap_or(0)).sum();
        let r2 = by.get(&103).copied().unwrap_or(0);
        assert_eq!((r1, r2), (3, 3), "{placement}: even over racks: {by:?}");
    }
}

#[test]
fn a_group_placement_overrides_the_masters() {
    // The master spreads; a pack group fills one worker first.
    let mut m = cluster(Placement::Spread, 4);
    let policy = GroupPolicy { placement: Some(Placement::Pack), ..Default::default() };
    let by = launches_by_conn(&declare(&mut m, spec("g", 4, policy)));
    assert_eq!(by.len(), 1, "pack: one worker: {by:?}");
    // The master packs; a spread group goes one per worker.
    let mut m = cluster(Placement::Pack, 4);
    let policy = GroupPolicy { placement: Some(Placement::Spread), ..Default::default() };
    let by = launches_by_conn(&declare(&mut m, spec("g", 4, policy)));
    assert_eq!(by, BTreeMap::from([(100, 1), (101, 1), (102, 1), (103, 1)]), "spread");
    // And without an override, the master's pack.
    let mut m = cluster(Placement::Pack, 4);
    let by = launches_by_conn(&declare(&mut m, spec("g", 4, GroupPolicy::default())));
    assert_eq!(by.len(), 1, "master pack: {by:?}");
}

fn refusal(sends: &[(ConnId, Message)]) -> Option<String> {
    sends.iter().find_map(|(_, m)| match m {
        Message::Shutdown { reason, .. } | Message::RegisterRefused { reason, .. } => {
            Some(reason.clone())
        }
        _ => None,
    })
}

#[test]
fn registrations_with_bad_attributes_are_refused_naming_them() {
    let mut m = leader(Placement::Spread);
    let sends = register(&mut m, 100, "w0", 4, &[]);
    assert_eq!(refusal(&sends), None);
    let many: Vec<(String, String)> = (0..=regent_core::limits::MAX_WORKER_ATTRIBUTES)
        .map(|i| (format!("k{i:03}"), "v".to_string()))
        .collect();
    let _ = connect_worker(&mut m, T, 101, "w1");
    let reg = |attributes| {
        Message::RegisterWorker(RegisterWorker {
            users: Default::default(),
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            worker: "w1".into(),
            incarnation: regent_core::Incarnation(1),
            cores: 4,
            memory_mb: 4096,
            executors: vec![],
            epoch_seen: Epoch(1),
            launch_seen: 0,
            attributes,
        })
    };
    let why = refusal(&deliver_to_master(&mut m, T, 101, reg(many))).expect("refused");
    assert!(why.contains("MAX_WORKER_ATTRIBUTES"), "{why}");
    let _ = connect_worker(&mut m, T, 102, "w1");
    let twice =
        vec![("rack".to_string(), "r1".to_string()), ("rack".to_string(), "r2".to_string())];
    let why = refusal(&deliver_to_master(&mut m, T, 102, reg(twice))).expect("refused");
    assert!(why.contains("\"rack\" twice"), "{why}");
    let _ = connect_worker(&mut m, T, 103, "w1");
    let long = vec![("rack".to_string(), "x".repeat(regent_core::limits::MAX_ATTRIBUTE_BYTES + 1))];
    let why = refusal(&deliver_to_master(&mut m, T, 103, reg(long))).expect("refused");
    assert!(why.contains("MAX_ATTRIBUTE_BYTES"), "{why}");
    assert_eq!(m.workers().len(), 1, "only w0 is registered");
}

/// Asks `m` on the subscriber's connection for a plan of `groups`; the
/// plan, and every action the request caused.
fn plan(m: &mut Master, groups: Vec<GroupSpec>) -> (Vec<regent_core::protocol::GroupPlan>, usize) {
    let out = m.handle(
        T,
        master::Event::Message {
            conn: ConnId(1),
            msg: Message::PlanRequest { request: 9, groups, tenant: None },
        },
    );
    let n = out.len();
    let plan = out.into_iter().find_map(|a| match a {
        master::Action::Send { msg: Message::PlanReply { request: 9, groups, .. }, .. } => {
            Some(groups)
        }
        _ => None,
    });
    (plan.expect("a PlanReply"), n)
}

fn state(m: &mut Master) -> regent_core::protocol::ClusterState {
    let sends = deliver_to_master(m, T, 1, Message::StateRequest);
    match sends.into_iter().next() {
        Some((_, Message::StateReply(s))) => *s,
        other => panic!("expected a StateReply, got {other:?}"),
    }
}

#[test]
fn a_plan_says_where_slots_would_go_and_why_others_would_not_changing_nothing() {
    let mut m = cluster(Placement::Spread, 8);
    let before = state(&mut m);
    let mut big = spec("big", 1, GroupPolicy::default());
    big.cores = 16;
    let mut huge_memory = spec("memory", 1, GroupPolicy::default());
    huge_memory.memory_mb = 1 << 20;
    let groups = vec![
        spec("ssd", 6, constrained(&["disk=ssd"])),
        spec("r9", 2, constrained(&["rack=r9"])),
        spec("both", 1, constrained(&["disk=hdd", "rack=r2"])),
        big,
        huge_memory,
    ];
    let (p, actions) = plan(&mut m, groups);
    assert_eq!(actions, 1, "only the reply: nothing launched, nothing written");
    assert_eq!((p[0].placed.len(), p[0].unplaced), (6, 0));
    let on: std::collections::BTreeSet<&str> =
        p[0].placed.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(on, ["w0", "w2"].into(), "only the ssd workers, spread over both");
    assert_eq!(p[0].placed.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5]);
    assert_eq!(p[1].unplaced, 2);
    assert_eq!(p[1].reason.as_deref(), Some("no ALIVE worker matches rack=r9"));
    assert_eq!(p[1].reasons, [WaitReason::NoMatchingWorker { constraint: "rack=r9".into() }]);
    assert_eq!(
        p[2].reason.as_deref(),
        Some("no ALIVE worker matches disk=hdd and rack=r2 at once")
    );
    assert_eq!(p[3].reason.as_deref(), Some("needs 16 cores: the largest matching worker has 8"));
    assert_eq!(
        p[3].reasons,
        [WaitReason::TooLarge { dimension: "cores".into(), needed: 16, largest: 8 }]
    );
    assert_eq!(
        p[4].reason.as_deref(),
        Some("needs 1048576 MiB of memory: the largest matching worker has 65536 MiB")
    );
    assert_eq!(state(&mut m), before, "the cluster is as it was");
    // The same groups declared for real are placed as planned (counts).
    let by = launches_by_conn(&declare(&mut m, spec("ssd", 6, constrained(&["disk=ssd"]))));
    assert_eq!(by.values().sum::<usize>(), 6);
    assert!(by.keys().all(|c| *c == 100 || *c == 102), "{by:?}");
}

#[test]
fn a_plan_counts_what_its_earlier_slots_and_live_executors_hold() {
    // Four workers of 8 cores; 3 live executors of 4 cores on them.
    let mut m = cluster(Placement::Spread, 8);
    let mut live = spec("live", 3, GroupPolicy::default());
    live.cores = 4;
    assert!(accepted(&declare(&mut m, live)));
    // 32 cores, 12 held: 20 free, at most 4+4+4+8 whole 4-core slots = 5.
    let mut g = spec("more", 7, GroupPolicy::default());
    g.cores = 4;
    let (p, _) = plan(&mut m, vec![g.clone()]);
    assert_eq!((p[0].placed.len(), p[0].unplaced), (5, 2), "{p:?}");
    // Every worker has 0 cores free once the plan's own slots are
    // counted: 4 more are needed, on any of the 4.
    assert_eq!(
        p[0].reasons,
        [WaitReason::Shortfall {
            dimension: "cores".into(),
            needed: 4,
            most_free: 0,
            worker: Some("w0".into()),
        }],
        "{p:?}"
    );
    assert_eq!(
        p[0].reason.as_deref(),
        Some("needs 4 more cores: the most free on a matching worker is 0 (on w0)")
    );
    // A second group in the same plan sees what the first would take.
    let (p, _) = plan(&mut m, vec![spec("first", 5, GroupPolicy::default()), g]);
    assert_eq!(p[0].placed.len(), 5);
    assert!(p[1].placed.len() < 5, "fewer 4-core slots fit after 5 cores are planned: {p:?}");
}

#[test]
fn a_plan_needs_an_acting_leader() {
    let mut m = Master::new(master::Config::new("a".into(), addr("a")));
    let out = m.handle(
        T,
        master::Event::Message {
            conn: ConnId(1),
            msg: Message::PlanRequest {
                request: 9,
                groups: vec![spec("g", 1, GroupPolicy::default())],
                tenant: None,
            },
        },
    );
    assert!(
        !out.iter()
            .any(|a| matches!(a, master::Action::Send { msg: Message::PlanReply { .. }, .. })),
        "a standby does not plan: {out:?}"
    );
}

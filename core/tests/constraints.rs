//! Placement by a group's policy: constraints on worker attributes, a
//! placement of the group's own, spread over an attribute; and the checks
//! on a worker's announced attributes.

mod common;

use common::*;
use regent_core::ids::InstanceId;
use regent_core::master::{self, Master};
use regent_core::policy::{Constraint, GroupPolicy, Placement};
use regent_core::protocol::{GroupSpec, Message, RegisterWorker, Role, Subscribe};
use regent_core::{ConnId, Epoch, FrameworkId, Millis};
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

fn subscribe(m: &mut Master, conn: u64) {
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(conn) });
    let _ = m.handle(
        T,
        master::Event::Message { conn: ConnId(conn), msg: hello(Role::Subscriber, "x") },
    );
    let msg = Message::Subscribe(Subscribe {
        framework: None::<FrameworkId>,
        name: "app".into(),
        instance: InstanceId(7),
        attempt: 1,
        failover_timeout: Millis(30_000),
    });
    let _ = deliver_to_master(m, T, conn, msg);
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

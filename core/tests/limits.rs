//! Limits on peer-supplied numbers (DESIGN rule 6): refused with a reason
//! naming the limit, before anything is allocated or persisted; arithmetic
//! where peer numbers meet is checked.

mod common;

use common::*;
use regent_core::ids::InstanceId;
use regent_core::limits::{MAX_GROUPS_PER_FRAMEWORK, MAX_SLOTS_PER_GROUP};
use regent_core::master::{self, Master};
use regent_core::protocol::{GroupSpec, Message, RegisterWorker, Role, Subscribe};
use regent_core::{ConnId, Epoch, Incarnation, Millis};

const T: Millis = Millis(0);

fn spec(group: &str, slots: u32, cores: u32, memory_mb: u64) -> GroupSpec {
    GroupSpec {
        group: group.into(),
        slots,
        command: vec!["/bin/true".into()],
        env: vec![],
        cores,
        memory_mb,
    }
}

/// A leader with one worker of 4 cores / 4096 MiB and a subscribed
/// framework on connection 1.
fn cluster() -> Master {
    let mut m = Master::new(master::Config::new("a".into(), addr("a")));
    let _ = elect(&mut m, T, 1);
    let _ = connect_worker(&mut m, T, 100, "w0");
    let reg = Message::RegisterWorker(RegisterWorker {
        worker: "w0".into(),
        incarnation: Incarnation(100),
        cores: 4,
        memory_mb: 4096,
        executors: vec![],
        epoch_seen: Epoch(1),
    });
    let _ = deliver_to_master(&mut m, T, 100, reg);
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(1) });
    let _ =
        m.handle(T, master::Event::Message { conn: ConnId(1), msg: hello(Role::Subscriber, "s") });
    let sub = Message::Subscribe(Subscribe {
        framework: None,
        name: "app".into(),
        instance: InstanceId(1),
        attempt: 0,
        failover_timeout: Millis(30_000),
    });
    let sends = deliver_to_master(&mut m, T, 1, sub);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Subscribed { .. })));
    m
}

fn declare(m: &mut Master, request: u64, spec: GroupSpec) -> Vec<(ConnId, Message)> {
    deliver_to_master(m, T, 1, Message::DeclareGroup { request, spec })
}

fn refusal(sends: &[(ConnId, Message)], request: u64) -> Option<String> {
    sends.iter().find_map(|(_, m)| match m {
        Message::RequestRefused { request: r, reason, .. } if *r == request => Some(reason.clone()),
        _ => None,
    })
}

#[test]
fn a_declared_group_of_u32_max_slots_is_refused_naming_the_limit() {
    let mut m = cluster();
    // Once a 30-byte frame that aborted the master (206 GB asked for).
    let sends = declare(&mut m, 7, spec("huge", u32::MAX, 1, 1));
    let reason = refusal(&sends, 7).expect("refused");
    assert!(reason.contains(&MAX_SLOTS_PER_GROUP.to_string()), "{reason}");
    // Nothing was recorded for it; the framework declares a sane group fine.
    assert!(m.frameworks().all(|f| f.groups.is_empty()));
    let sends = declare(&mut m, 8, spec("ok", MAX_SLOTS_PER_GROUP, 1, 1));
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::RequestAccepted { request: 8, .. })));
}

#[test]
fn a_framework_cannot_declare_more_groups_than_the_limit() {
    let mut m = cluster();
    for i in 0..MAX_GROUPS_PER_FRAMEWORK as u64 {
        let sends = declare(&mut m, i, spec(&format!("g{i}"), 1, 0, 0));
        assert!(refusal(&sends, i).is_none(), "group {i} accepted");
    }
    let n = MAX_GROUPS_PER_FRAMEWORK as u64;
    let sends = declare(&mut m, n, spec("one-too-many", 1, 0, 0));
    let reason = refusal(&sends, n).expect("refused");
    assert!(reason.contains(&MAX_GROUPS_PER_FRAMEWORK.to_string()), "{reason}");
    // Declaring an existing group again is not a new group.
    let sends = declare(&mut m, n + 1, spec("g0", 1, 0, 0));
    assert!(refusal(&sends, n + 1).is_none());
}

#[test]
fn cores_and_memory_near_the_type_limits_never_overflow_placement() {
    let mut m = cluster();
    // One executor holds a core first; a group asking for u32::MAX cores
    // (or u64::MAX MiB) would wrap the sum in release builds and pass the
    // fit check. It must simply not fit anywhere.
    let sends = declare(&mut m, 1, spec("one", 1, 1, 1));
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::LaunchExecutor { .. })));
    for (req, s) in [(2, spec("cores", 1, u32::MAX, 1)), (3, spec("mem", 1, 1, u64::MAX))] {
        let sends = declare(&mut m, req, s);
        assert!(
            !sends.iter().any(|(_, m)| matches!(m, Message::LaunchExecutor { .. })),
            "nothing launched for request {req}: {sends:?}"
        );
    }
    let w = m.workers().into_iter().find(|w| w.id.as_str() == "w0").expect("w0").clone();
    assert_eq!((w.cores_used, w.memory_used_mb), (1, 1), "only the first executor holds anything");
}

//! Limits on peer-supplied numbers (docs/design.md#peer-input-never-panics): refused with a reason
//! naming the limit, before anything is allocated or persisted; arithmetic
//! where peer numbers meet is checked.

mod common;

use common::*;
use regent_core::ids::InstanceId;
use regent_core::limits::{self, MAX_GROUPS_PER_FRAMEWORK, MAX_SLOTS_PER_GROUP};
use regent_core::master::{self, Master};
use regent_core::protocol::{
    ExecutorReport, ExecutorState, GroupSpec, Message, RegisterWorker, Role, Subscribe,
};
use regent_core::store::format::{self, EncodeError, MAX_PAYLOAD};
use regent_core::store::{FrameworkRecord, GroupRecord, Record, SlotOutcome, WorkerRecord};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis, WorkerId};

const T: Millis = Millis(0);

fn spec(group: &str, slots: u32, cores: u32, memory_mb: u64) -> GroupSpec {
    GroupSpec {
        group: group.into(),
        slots,
        command: vec!["/bin/true".into()],
        env: vec![],
        cores,
        memory_mb,
        policy: Default::default(),
        launch: Default::default(),
    }
}

/// A leader with one worker of 4 cores / 4096 MiB and a subscribed
/// framework on connection 1.
fn cluster() -> Master {
    cluster_with(master::Config::new("a".into(), addr("a")))
}

fn cluster_with(config: master::Config) -> Master {
    let mut m = Master::new(config);
    let _ = elect(&mut m, T, 1);
    let _ = connect_worker(&mut m, T, 100, "w0");
    let reg = Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: "w0".into(),
        incarnation: Incarnation(100),
        cores: 4,
        memory_mb: 4096,
        executors: vec![],
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
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
        tenant: None,
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

fn subscribe_msg(instance: u64, name: &str, failover_timeout: Millis) -> Message {
    Message::Subscribe(Subscribe {
        framework: None,
        name: name.into(),
        instance: InstanceId(instance),
        attempt: 0,
        failover_timeout,
        tenant: None,
    })
}

/// Subscribes on a fresh connection `conn`; returns what the master sent.
fn subscribe_on(m: &mut Master, conn: u64, msg: Message) -> Vec<(ConnId, Message)> {
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(conn) });
    let _ = m.handle(
        T,
        master::Event::Message { conn: ConnId(conn), msg: hello(Role::Subscriber, "s") },
    );
    let out = m.handle(T, master::Event::Message { conn: ConnId(conn), msg });
    let mut sends = m_sends(&out);
    sends.extend(m_sends(&persist_all(m, T, &out)));
    sends
}

/// The reason of the `SubscribeRefused` among `sends` (a limit refusal is
/// final, so it is not a retryable `FrameworkError`).
fn subscribe_refused(sends: &[(ConnId, Message)]) -> Option<String> {
    assert!(
        !sends.iter().any(|(_, m)| matches!(m, Message::FrameworkError { .. })),
        "a limit refusal is no FrameworkError: {sends:?}"
    );
    sends.iter().find_map(|(_, m)| match m {
        Message::SubscribeRefused { reason, .. } => Some(reason.clone()),
        _ => None,
    })
}

#[test]
fn a_subscription_with_a_failover_timeout_of_u64_max_is_refused() {
    let mut m = cluster();
    let before = m.frameworks().count();
    let sends = subscribe_on(&mut m, 2, subscribe_msg(2, "forever", Millis(u64::MAX)));
    let reason = subscribe_refused(&sends).expect("refused");
    assert!(reason.contains("MAX_FAILOVER_TIMEOUT"), "{reason}");
    assert!(!sends.iter().any(|(_, m)| matches!(m, Message::Subscribed { .. })));
    assert_eq!(m.frameworks().count(), before, "no record created");
    // The largest allowed timeout is fine.
    let sends = subscribe_on(&mut m, 3, subscribe_msg(3, "week", limits::MAX_FAILOVER_TIMEOUT));
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Subscribed { .. })), "{sends:?}");
}

#[test]
fn a_subscription_past_max_frameworks_is_refused_but_existing_frameworks_resubscribe() {
    let mut config = master::Config::new("a".into(), addr("a"));
    assert_eq!(config.max_frameworks, limits::DEFAULT_MAX_FRAMEWORKS);
    config.max_frameworks = 2;
    let mut m = cluster_with(config); // framework of instance 1
    let sends = subscribe_on(&mut m, 2, subscribe_msg(2, "second", Millis(1_000)));
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Subscribed { .. })));
    let sends = subscribe_on(&mut m, 3, subscribe_msg(3, "third", Millis(1_000)));
    let reason = subscribe_refused(&sends).expect("refused");
    assert!(reason.contains("max_frameworks") && reason.contains('2'), "{reason}");
    assert!(sends
        .iter()
        .any(|(c, m)| *c == ConnId(3) && matches!(m, Message::SubscribeRefused { .. })));
    assert_eq!(m.frameworks().count(), 2);
    // An existing framework (same instance, a newer attempt) is no new record.
    let again = Message::Subscribe(Subscribe {
        framework: None,
        name: "second".into(),
        instance: InstanceId(2),
        attempt: 1,
        failover_timeout: Millis(1_000),
        tenant: None,
    });
    let sends = subscribe_on(&mut m, 4, again);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Subscribed { .. })), "{sends:?}");
}

#[test]
fn a_subscription_with_an_oversized_name_or_id_is_refused() {
    let mut m = cluster();
    let long = "n".repeat(limits::MAX_NAME_BYTES + 1);
    let sends = subscribe_on(&mut m, 2, subscribe_msg(2, &long, Millis(1_000)));
    assert!(subscribe_refused(&sends).expect("refused").contains("MAX_NAME_BYTES"));
    let by_id = Message::Subscribe(Subscribe {
        framework: Some(FrameworkId("f".repeat(limits::MAX_ID_BYTES + 1))),
        name: "x".into(),
        instance: InstanceId(3),
        attempt: 0,
        failover_timeout: Millis(1_000),
        tenant: None,
    });
    let sends = subscribe_on(&mut m, 3, by_id);
    assert!(subscribe_refused(&sends).expect("refused").contains("MAX_ID_BYTES"));
    assert_eq!(m.frameworks().count(), 1);
}

#[test]
fn group_strings_and_environment_past_their_limits_are_refused_naming_the_limit() {
    let mut m = cluster();
    let big = |n: usize| "x".repeat(n);
    let with = |f: &dyn Fn(&mut GroupSpec)| {
        let mut s = spec("g", 1, 1, 1);
        f(&mut s);
        s
    };
    let cases: Vec<(&str, GroupSpec)> = vec![
        ("MAX_NAME_BYTES", with(&|s| s.group = big(limits::MAX_NAME_BYTES + 1))),
        ("MAX_ARG_BYTES", with(&|s| s.command.push(big(limits::MAX_ARG_BYTES + 1)))),
        (
            "MAX_COMMAND_ARGS",
            with(&|s| s.command = vec![String::new(); limits::MAX_COMMAND_ARGS + 1]),
        ),
        (
            "MAX_ENV_VARS",
            with(&|s| s.env = vec![(String::new(), String::new()); limits::MAX_ENV_VARS + 1]),
        ),
        (
            "MAX_ENV_KEY_BYTES",
            with(&|s| s.env.push((big(limits::MAX_ENV_KEY_BYTES + 1), "v".into()))),
        ),
        (
            "MAX_ENV_VALUE_BYTES",
            with(&|s| s.env.push(("K".into(), big(limits::MAX_ENV_VALUE_BYTES + 1)))),
        ),
        (
            "MAX_GROUP_SPEC_BYTES",
            with(&|s| {
                let n = limits::MAX_GROUP_SPEC_BYTES / limits::MAX_ARG_BYTES + 1;
                s.command = vec![big(limits::MAX_ARG_BYTES); n];
            }),
        ),
        ("MAX_CORES", spec("g", 1, limits::MAX_CORES + 1, 1)),
        ("MAX_MEMORY_MB", spec("g", 1, 1, limits::MAX_MEMORY_MB + 1)),
    ];
    for (i, (limit, s)) in cases.into_iter().enumerate() {
        let out = m.handle(
            T,
            master::Event::Message {
                conn: ConnId(1),
                msg: Message::DeclareGroup { request: i as u64, spec: s },
            },
        );
        assert!(
            !out.iter().any(|a| matches!(a, master::Action::Store(StoreCommand::Persist { .. }))),
            "{limit}: nothing persisted"
        );
        let reason = refusal(&m_sends(&out), i as u64).unwrap_or_else(|| panic!("{limit} refused"));
        assert!(reason.contains(limit), "{limit}: {reason}");
    }
    assert!(m.frameworks().all(|f| f.groups.is_empty()));
    // At the limits exactly, a group is accepted.
    let s = spec("g", 1, limits::MAX_CORES, limits::MAX_MEMORY_MB);
    let sends = declare(&mut m, 100, s);
    assert!(refusal(&sends, 100).is_none(), "{sends:?}");
}

fn register_msg(
    worker: &str,
    cores: u32,
    memory_mb: u64,
    executors: Vec<ExecutorReport>,
) -> Message {
    Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: worker.into(),
        incarnation: Incarnation(7),
        cores,
        memory_mb,
        executors,
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    })
}

#[test]
fn a_worker_offering_more_than_the_core_or_memory_limit_is_refused_and_told_why() {
    let mut m = cluster();
    let report = ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id: ExecutorId::new("fw/g#0#1.1"),
        framework: FrameworkId::new("fw"),
        cores: 0,
        memory_mb: 0,
        state: ExecutorState::Running,
    };
    let cases = [
        ("MAX_CORES", register_msg("big1", limits::MAX_CORES + 1, 1, vec![])),
        ("MAX_MEMORY_MB", register_msg("big2", 1, limits::MAX_MEMORY_MB + 1, vec![])),
        ("MAX_ID_BYTES", register_msg(&"w".repeat(limits::MAX_ID_BYTES + 1), 1, 1, vec![])),
        (
            "MAX_REPORTS_PER_REGISTRATION",
            register_msg("big3", 1, 1, vec![report; limits::MAX_REPORTS_PER_REGISTRATION + 1]),
        ),
    ];
    for (i, (limit, reg)) in cases.into_iter().enumerate() {
        let conn = 200 + i as u64;
        let _ = connect_worker(&mut m, T, conn, "big");
        let out = m.handle(T, master::Event::Message { conn: ConnId(conn), msg: reg });
        assert!(
            !out.iter().any(|a| matches!(a, master::Action::Store(StoreCommand::Persist { .. }))),
            "{limit}"
        );
        let reason = m_sends(&out)
            .into_iter()
            .find_map(|(_, m)| match m {
                Message::Shutdown { reason, .. } => Some(reason),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{limit}: refused"));
        assert!(reason.contains(limit), "{limit}: {reason}");
        assert!(out
            .iter()
            .any(|a| matches!(a, master::Action::Close { conn: c, .. } if *c == ConnId(conn))));
    }
    assert_eq!(m.workers().len(), 1, "only w0 is registered");
}

/// Found by the `master_node` fuzz target (the input is
/// `fixtures/fuzz/master_node/regression-refused-reregistration`): a
/// registered worker that registers again on its connection with more
/// reports than the limit was told to shut down, yet its registration
/// stayed bound to the connection the master closed, so every one of the
/// refused reports was applied (a kill each: an output past 1 MiB).
#[test]
fn a_reregistration_past_the_report_limit_applies_none_of_its_reports() {
    let mut m = cluster();
    let report = ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        ports: Default::default(),
        id: ExecutorId::new("stray"),
        framework: FrameworkId::new("fw"),
        cores: 0,
        memory_mb: 0,
        state: ExecutorState::Running,
    };
    let reg = Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: "w0".into(),
        incarnation: Incarnation(100),
        cores: 4,
        memory_mb: 4096,
        executors: vec![report; limits::MAX_REPORTS_PER_REGISTRATION + 1],
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    });
    let out = m.handle(T, master::Event::Message { conn: ConnId(100), msg: reg });
    let sends = m_sends(&out);
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Shutdown { .. })), "refused: {sends:?}");
    assert!(
        !sends.iter().any(|(_, m)| matches!(m, Message::KillExecutorOnWorker { .. })),
        "no report of a refused registration is applied"
    );
    assert!(out.len() <= 4, "{} actions for a refused registration", out.len());
    // The closed connection no longer speaks for w0.
    let hb = Message::WorkerHeartbeat { incarnation: Incarnation(100) };
    let out = m.handle(T, master::Event::Message { conn: ConnId(100), msg: hb });
    assert!(
        !m_sends(&out).iter().any(|(_, m)| matches!(m, Message::HeartbeatAck { .. })),
        "{out:?}"
    );
}

/// Found while triaging the `master_node` fuzz target's report at the
/// report limit: every ended executor a registration reported for a known
/// framework made its own write of that framework's whole record, so one
/// frame of 4,096 short reports asked for 4,096 copies of a record of up
/// to a megabyte. Writes to one key are applied in order, so one write of
/// the newest record now carries every acknowledgement, each sent only
/// once it is durable.
#[test]
fn a_registration_reporting_many_ended_executors_writes_their_framework_once() {
    let mut m = cluster();
    let framework = m.frameworks().next().expect("a framework").id.clone();
    let n = limits::MAX_REPORTS_PER_REGISTRATION;
    let reports = (0..n)
        .map(|i| ExecutorReport {
            health: None,
            ran_ms: None,
            resources: Default::default(),
            ports: Default::default(),
            id: ExecutorId(format!("stray-{i}")),
            framework: framework.clone(),
            cores: 0,
            memory_mb: 0,
            state: ExecutorState::Exited { code: 1 },
        })
        .collect();
    let _ = connect_worker(&mut m, T, 300, "w9");
    let reg = Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: Default::default(),
        ports: Default::default(),
        worker: "w9".into(),
        incarnation: Incarnation(9),
        cores: 1,
        memory_mb: 1,
        executors: reports,
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    });
    let out = m.handle(T, master::Event::Message { conn: ConnId(300), msg: reg });
    let writes = out
        .iter()
        .filter(|a| {
            matches!(a, master::Action::Store(StoreCommand::Persist { record: Record::Framework(f), .. }) if f.id == framework)
        })
        .count();
    assert_eq!(writes, 1, "the framework's record is written once");
    let acks = |sends: &[(ConnId, Message)]| {
        sends.iter().filter(|(_, m)| matches!(m, Message::ExecutorStatusAck { .. })).count()
    };
    assert_eq!(acks(&m_sends(&out)), 0, "nothing is acknowledged before it is durable");
    let after = persist_all(&mut m, T, &out);
    assert_eq!(acks(&m_sends(&after)), n, "every report is acknowledged once durable");
}

/// Found by the `master_node` fuzz target (the input is
/// `fixtures/fuzz/master_node/regression-stored-retries-overflow`): a
/// framework record loaded from the store with `retries_used = u32::MAX`
/// (a planted record in ZooKeeper) made the next failed executor of that
/// group overflow the counter: a panic in debug builds, a reset retry
/// budget in release builds.
#[test]
fn a_stored_retry_count_at_u32_max_never_overflows() {
    let mut m = Master::new(master::Config::new("a".into(), addr("a")));
    let record = Record::Framework(FrameworkRecord {
        id: FrameworkId::new("fw"),
        name: "app".into(),
        failover_timeout_ms: 60_000,
        groups: vec![GroupRecord {
            replacing: Default::default(),
            preempted: Default::default(),
            counted: Default::default(),
            deployment: None,
            eras: Vec::new(),
            spec: spec("g", 1, 1, 1),
            slots: vec![SlotOutcome::Pending],
            retries_used: u32::MAX,
            restarts: Default::default(),
        }],
        callback: None,
        registered_at_ms: None,
        job: None,
        tenant: None,
    });
    let out = m.handle(T, master::Event::Elected { floor: Epoch(1), clock: 0 });
    assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
    let out = m.handle(T, master::Event::Store(StoreEvent::Loaded { records: vec![record] }));
    let _ = persist_all(&mut m, T, &out);
    let _ = connect_worker(&mut m, T, 100, "w0");
    let reg = register_msg("w0", 4, 4096, vec![]);
    let sends = deliver_to_master(&mut m, T, 100, reg);
    let executor = sends
        .iter()
        .find_map(|(_, m)| match m {
            Message::LaunchExecutor { executor, .. } => Some(executor.clone()),
            _ => None,
        })
        .expect("the pending slot is placed");
    let failed = Message::ExecutorStatus {
        incarnation: Incarnation(7),
        report: ExecutorReport {
            health: None,
            ran_ms: None,
            resources: Default::default(),
            ports: Default::default(),
            id: executor,
            framework: FrameworkId::new("fw"),
            cores: 1,
            memory_mb: 1,
            state: ExecutorState::Failed { reason: "boom".into() },
        },
    };
    let _ = deliver_to_master(&mut m, T, 100, failed);
    let fw = m.frameworks().next().expect("fw");
    assert_eq!(fw.groups[0].record.retries_used, u32::MAX);
    assert!(
        matches!(fw.groups[0].record.slots[0], SlotOutcome::Failed { .. }),
        "the budget stays used up: {:?}",
        fw.groups[0].record.slots
    );
}

/// Found by the `master_node` fuzz target (the input is
/// `fixtures/fuzz/master_node/regression-subscribed-snapshot-history`): the
/// `Subscribed` snapshot carried every executor the framework ever had,
/// ended attempts included, so a framework whose workers kept failing
/// (4,000 relaunches with 256-byte worker ids) got a snapshot over the
/// largest frame a subscriber accepts and could never subscribe again.
/// Superseded attempts are left out; live executors and finished slots stay.
#[test]
fn a_resubscription_snapshot_leaves_out_superseded_attempts() {
    let mut m = cluster();
    let framework = m.frameworks().next().expect("a framework").id.clone();
    let mut sends = declare(&mut m, 1, spec("g", 1, 1, 1));
    for _ in 0..50 {
        let executor = sends
            .iter()
            .find_map(|(_, m)| match m {
                Message::LaunchExecutor { executor, .. } => Some(executor.clone()),
                _ => None,
            })
            .expect("the slot is (re)launched");
        let killed = Message::ExecutorStatus {
            incarnation: Incarnation(100),
            report: ExecutorReport {
                health: None,
                ran_ms: None,
                resources: Default::default(),
                ports: Default::default(),
                id: executor,
                framework: framework.clone(),
                cores: 1,
                memory_mb: 1,
                state: ExecutorState::Killed,
            },
        };
        sends = deliver_to_master(&mut m, T, 100, killed);
    }
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(2) });
    let sub = Message::Subscribe(Subscribe {
        framework: Some(framework),
        name: "app".into(),
        instance: InstanceId(1),
        attempt: 1,
        failover_timeout: Millis(30_000),
        tenant: None,
    });
    let snapshot = deliver_to_master(&mut m, T, 2, sub)
        .into_iter()
        .find_map(|(_, m)| match m {
            Message::Subscribed { executors, .. } => Some(executors),
            _ => None,
        })
        .expect("subscribed");
    assert_eq!(snapshot.len(), 1, "only the live executor: {snapshot:?}");
    assert!(!snapshot[0].state.is_terminal());
}

#[test]
fn placement_puts_no_more_than_the_executor_limit_on_one_worker() {
    let mut m = cluster();
    // Executors of 0 cores and 0 MiB always "fit": only the count stops them.
    let n = limits::MAX_EXECUTORS_PER_WORKER as u32 + 10;
    let sends = declare(&mut m, 1, spec("tiny", n, 0, 0));
    assert!(refusal(&sends, 1).is_none(), "{sends:?}");
    let launched =
        sends.iter().filter(|(_, m)| matches!(m, Message::LaunchExecutor { .. })).count();
    assert_eq!(launched, limits::MAX_EXECUTORS_PER_WORKER);
}

#[test]
fn a_framework_record_that_would_exceed_the_record_limit_is_refused_before_persisting() {
    let mut m = cluster();
    let mut accepted = 0u64;
    let refused = loop {
        let name = format!("g{accepted}");
        let out = m.handle(
            T,
            master::Event::Message {
                conn: ConnId(1),
                msg: Message::DeclareGroup {
                    request: accepted,
                    spec: spec(&name, MAX_SLOTS_PER_GROUP, 0, 0),
                },
            },
        );
        if let Some(reason) = refusal(&m_sends(&out), accepted) {
            assert!(
                !out.iter()
                    .any(|a| matches!(a, master::Action::Store(StoreCommand::Persist { .. }))),
                "refused before persisting"
            );
            break reason;
        }
        let _ = persist_all(&mut m, T, &out);
        accepted += 1;
        assert!(accepted < MAX_GROUPS_PER_FRAMEWORK as u64, "the record limit must bind first");
    };
    assert!(
        refused.contains("MAX_RECORD_PAYLOAD")
            && refused.contains(&limits::MAX_RECORD_PAYLOAD.to_string()),
        "{refused}"
    );
    assert!(accepted >= 1, "one group of the largest size fits");
    let fw = m.frameworks().next().expect("framework");
    assert_eq!(fw.groups.len() as u64, accepted, "the refused group left no trace");
    // The reservation holds: the accepted record at its worst — every slot
    // failed with the longest executor id and reason, the longest name, the
    // largest counters — still encodes.
    let Record::Framework(mut worst) = fw_record(&m) else { unreachable!() };
    worst.name = "n".repeat(limits::MAX_NAME_BYTES);
    worst.failover_timeout_ms = u64::MAX;
    for g in &mut worst.groups {
        g.retries_used = u32::MAX;
        let id_len = limits::max_executor_id_len(worst.id.as_str(), &g.spec.group, g.spec.slots);
        for o in &mut g.slots {
            *o = SlotOutcome::Failed {
                executor: ExecutorId("e".repeat(id_len)),
                reason: limits::cap_reason("r".repeat(10_000)),
            };
        }
    }
    let record = Record::Framework(worst);
    let len = format::payload_len(&record);
    assert!(len <= limits::MAX_RECORD_PAYLOAD, "worst-case payload {len}");
    assert!(format::encode(&record).is_ok());
}

fn fw_record(m: &Master) -> Record {
    let fw = m.frameworks().next().expect("framework");
    Record::Framework(regent_core::store::FrameworkRecord {
        id: fw.id.clone(),
        name: fw.name.clone(),
        failover_timeout_ms: fw.failover_timeout.0,
        groups: fw.groups.iter().map(|g| g.record.clone()).collect(),
        callback: None,
        registered_at_ms: None,
        job: None,
        tenant: None,
    })
}

#[test]
fn encode_of_an_oversized_record_is_an_error_not_a_panic() {
    let record = Record::Worker(WorkerRecord {
        dead: false,
        id: WorkerId("w".repeat(MAX_PAYLOAD as usize + 1)),
        incarnation: Incarnation(1),
        cores: 1,
        memory_mb: 1,
        callback: None,
        maintenance: None,
    });
    match format::encode(&record) {
        Err(EncodeError::TooLarge { len, max, .. }) => {
            assert!(len > MAX_PAYLOAD as usize);
            assert_eq!(max, MAX_PAYLOAD);
        }
        other => panic!("{:?}", other.map(|v| v.len())),
    }
}

#[test]
fn a_failed_slot_stores_at_most_the_capped_reason() {
    let short = limits::cap_reason("exit 1".into());
    assert_eq!(short, "exit 1");
    let long = limits::cap_reason("é".repeat(limits::MAX_FAILURE_REASON_BYTES));
    assert!(long.len() <= limits::MAX_FAILURE_REASON_BYTES + '…'.len_utf8());
    assert!(long.ends_with('…'));
}

fn register_refused(sends: &[(ConnId, Message)]) -> Option<String> {
    sends.iter().find_map(|(_, m)| match m {
        Message::RegisterRefused { reason, .. } => Some(reason.clone()),
        _ => None,
    })
}

/// Issue 20 (docs/design.md#issue-20) scenario 9: workers are capped like frameworks. A new worker id
/// past `max_workers` is refused naming the limit, nothing is recorded; a
/// worker already known still registers again; the refused worker keeps
/// retrying (slowly) instead of giving up.
#[test]
fn a_registration_past_max_workers_is_refused_naming_the_limit_and_the_worker_retries() {
    let mut config = master::Config::new("a".into(), addr("a"));
    config.max_workers = 2;
    let mut m = Master::new(config);
    let _ = elect(&mut m, T, 1);
    for (conn, w) in [(100, "w0"), (101, "w1")] {
        let _ = connect_worker(&mut m, T, conn, w);
        let sends = deliver_to_master(&mut m, T, conn, register_msg(w, 1, 64, vec![]));
        assert!(sends.iter().any(|(_, m)| matches!(m, Message::Registered { .. })));
    }
    let _ = connect_worker(&mut m, T, 102, "w2");
    let out = m.handle(
        T,
        master::Event::Message { conn: ConnId(102), msg: register_msg("w2", 1, 64, vec![]) },
    );
    assert!(
        !out.iter().any(|a| matches!(a, master::Action::Store(StoreCommand::Persist { .. }))),
        "nothing recorded"
    );
    let reason = register_refused(&m_sends(&out)).expect("refused");
    assert!(reason.contains("max_workers") && reason.contains('2'), "{reason}");
    assert_eq!(m.workers().len(), 2);
    // A known worker on a new connection (a blip) is never refused by it.
    let _ = connect_worker(&mut m, T, 103, "w0");
    let sends = deliver_to_master(&mut m, T, 103, register_msg("w0", 1, 64, vec![]));
    assert!(register_refused(&sends).is_none(), "{sends:?}");
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Registered { .. })));

    // The worker's side: refused at every attempt, it keeps trying past its
    // total of attempts (a full cluster is not a reason to exit).
    let mut cfg = worker_cfg("w2", 1, &["a"]);
    cfg.total_retries = 3;
    let mut w = regent_core::worker::Worker::new(cfg);
    let _ = w.handle(T, regent_core::worker::Event::Start);
    let _ = w.handle(T, regent_core::worker::Event::Connected { master: addr("a") });
    let refused = Message::RegisterRefused { epoch: Epoch(1), reason };
    for i in 0..10 {
        let out = w.handle(Millis(i * 100_000), regent_core::worker::Event::Tick);
        assert!(w_exit(&out).is_none(), "attempt {i}: the worker gave up: {out:?}");
        let _ = from(&mut w, Millis(i * 100_000), "a", refused.clone());
    }
}

/// Worker ids chosen to hash into one store shard are refused once their
/// records' names would take that shard's ZooKeeper listing past
/// `MAX_WORKER_SHARD_LISTING` (which would make every later load fail).
#[test]
fn worker_ids_filling_one_store_shard_are_refused_naming_the_limit() {
    use regent_core::store::{names::key_stem, RecordKey};
    use regent_core::zk::layout::shard_of;
    let mut m = Master::new(master::Config::new("a".into(), addr("a")));
    let _ = elect(&mut m, T, 1);
    // Ids of 200 bytes (their escaped names are as long as names get
    // unshortened) that all hash into the shard of the first.
    let id = |i: usize| format!("{}{i:08}", "x".repeat(192));
    let shard = |s: &str| shard_of(&key_stem(&RecordKey::Worker(WorkerId::new(s))));
    let target = shard(&id(0));
    let cost = 4 + key_stem(&RecordKey::Worker(WorkerId::new(id(0)))).len();
    let fit = limits::MAX_WORKER_SHARD_LISTING / cost;
    let ids: Vec<String> = (0..).map(id).filter(|s| shard(s) == target).take(fit + 1).collect();
    for (i, w) in ids.iter().enumerate() {
        let conn = 1_000 + i as u64;
        let _ = connect_worker(&mut m, T, conn, w);
        let sends = deliver_to_master(&mut m, T, conn, register_msg(w, 1, 64, vec![]));
        if i < fit {
            assert!(register_refused(&sends).is_none(), "worker {i} of {fit}: {sends:?}");
        } else {
            let reason = register_refused(&sends).expect("the shard is full");
            assert!(reason.contains("MAX_WORKER_SHARD_LISTING"), "{reason}");
            assert!(reason.contains(&format!("{:02x}", target.unwrap())), "{reason}");
        }
    }
    assert_eq!(m.workers().len(), fit);
}

#[test]
fn a_group_policy_past_its_limits_is_refused_naming_the_setting() {
    use regent_core::policy::Constraint;
    let names = limits::GroupKey::wire_name;
    let mut s = spec("g", 1, 1, 0);
    s.policy.restart.delay_ms = limits::MAX_RESTART_DELAY.0 + 1;
    let p = limits::group_spec_problem(&s, names).expect("too long a delay");
    assert_eq!(p.key, limits::GroupKey::Restart);
    assert!(p.reason.contains("delay") && p.reason.contains("MAX_RESTART_DELAY"), "{}", p.reason);

    let mut s = spec("g", 1, 1, 0);
    s.policy.restart.delay_ms = 10_000;
    s.policy.restart.max_delay_ms = 1_000;
    let p = limits::group_spec_problem(&s, names).expect("max_delay below delay");
    assert!(p.reason.contains("shorter than delay"), "{}", p.reason);

    let mut s = spec("g", 1, 1, 0);
    s.policy.constraints =
        vec![Constraint::parse("disk=ssd").unwrap(); limits::MAX_CONSTRAINTS + 1];
    let p = limits::group_spec_problem(&s, names).expect("too many constraints");
    assert_eq!(p.key, limits::GroupKey::Constraints);
    assert!(p.reason.contains("MAX_CONSTRAINTS"), "{}", p.reason);

    let mut s = spec("g", 1, 1, 0);
    s.policy.spread = Some("r".repeat(limits::MAX_ATTRIBUTE_BYTES + 1));
    let p = limits::group_spec_problem(&s, names).expect("too long a spread attribute");
    assert!(p.message("g").starts_with("group \"g\": spread names an attribute of 257 bytes"));
}

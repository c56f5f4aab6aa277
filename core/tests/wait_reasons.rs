//! Why a slot waits, as data (docs/jobs.md, "Why a slot waits";
//! docs/design.md#issue-44): every reason the planner finds for a group
//! that fits nowhere, ranked, with the shortfall per dimension, in a plan,
//! in a job's status (`SlotStatus::reasons`) and in the cluster state
//! (`GroupView::reasons`). Each test names the reasons it expects, in
//! their rank order.

mod common;

use common::*;
use regent_core::api::{JobStatus, SlotPhase, WaitReason};
use regent_core::master::{self, Master};
use regent_core::policy::{Constraint, GroupPolicy};
use regent_core::protocol::{GroupSpec, Message, RegisterWorker, Role};
use regent_core::resources::Resource;
use regent_core::{ConnId, Millis, WorkerId};

const T: Millis = Millis(0);
/// The operator's connection.
const OP: u64 = 9;

fn leader() -> Master {
    let mut m = master("a");
    let _ = elect(&mut m, T, 1);
    m
}

/// Registers worker `name` on `conn` with `cores`, `gpu` GPUs and
/// attributes `attrs` (`key=value`).
fn join(m: &mut Master, conn: u64, name: &str, cores: u32, gpu: usize, attrs: &[&str]) {
    let _ = connect_worker(m, T, conn, name);
    let resources = if gpu == 0 {
        vec![]
    } else {
        vec![Resource { name: "gpu".into(), addresses: (0..gpu).map(|i| i.to_string()).collect() }]
    };
    let attributes = attrs
        .iter()
        .map(|a| {
            let (k, v) = a.split_once('=').expect("key=value");
            (k.to_owned(), v.to_owned())
        })
        .collect();
    let reg = RegisterWorker { cores, resources, attributes, ..registration(name, conn) };
    let sends = deliver_to_master(m, T, conn, Message::RegisterWorker(reg));
    assert!(sends.iter().any(|(_, m)| matches!(m, Message::Registered { .. })), "{sends:?}");
}

/// A group of `slots` asking `cores` cores and `gpu` GPUs, with
/// `constraints`.
fn group(name: &str, slots: u32, cores: u32, gpu: u32, constraints: &[&str]) -> GroupSpec {
    let launch = regent_core::launch::LaunchSpec {
        resources: if gpu == 0 { vec![] } else { vec![("gpu".into(), gpu)] },
        ..Default::default()
    };
    let mut g = group_with(name, slots, launch);
    g.cores = cores;
    g.policy = GroupPolicy {
        constraints: constraints
            .iter()
            .map(|c| Constraint::parse(c).expect("a constraint"))
            .collect(),
        ..GroupPolicy::default()
    };
    g
}

/// Sends operator command `msg` and settles its write.
fn operate(m: &mut Master, msg: Message) {
    let _ = m.handle(T, master::Event::Connected { conn: ConnId(OP) });
    let _ =
        m.handle(T, master::Event::Message { conn: ConnId(OP), msg: hello(Role::Client, "op") });
    let sends = deliver_to_master(m, T, OP, msg);
    assert!(
        sends.iter().any(|(_, m)| matches!(m, Message::RequestAccepted { .. })),
        "accepted: {sends:?}"
    );
}

#[test]
fn no_worker_at_all_and_no_alive_worker_are_reasons() {
    let mut m = leader();
    subscribe(&mut m, 1);
    let p = plan_one(&mut m, group("g", 1, 1, 0, &[]));
    assert_eq!(p.reasons, [WaitReason::NoWorkers { registered: 0 }]);
    assert_eq!(p.reason.as_deref(), Some("no worker is registered"));
    join(&mut m, 100, "w0", 8, 0, &[]);
    operate(&mut m, Message::CordonWorker { request: 5, worker: WorkerId::new("w0") });
    let p = plan_one(&mut m, group("g", 1, 1, 0, &[]));
    assert_eq!(
        p.reasons,
        [WaitReason::NoWorkers { registered: 1 }, WaitReason::Cordoned { workers: 1 }],
        "no worker takes executors; the one there is cordoned"
    );
    assert_eq!(p.reason.as_deref(), Some(
        "no ALIVE worker takes executors (1 registered: dead, unknown, cordoned, draining or full)"
    ));
}

#[test]
fn every_constraint_no_worker_meets_is_named_and_a_combination_met_only_apart() {
    let mut m = leader();
    join(&mut m, 100, "w0", 8, 0, &["rack=r1", "disk=ssd"]);
    join(&mut m, 101, "w1", 8, 0, &["rack=r2", "disk=hdd"]);
    subscribe(&mut m, 1);
    let p = plan_one(&mut m, group("g", 1, 1, 0, &["rack=r9", "zone=a", "disk=ssd"]));
    assert_eq!(
        p.reasons,
        [
            WaitReason::NoMatchingWorker { constraint: "rack=r9".into() },
            WaitReason::NoMatchingWorker { constraint: "zone=a".into() },
        ],
        "disk=ssd is met (by w0): not a reason"
    );
    assert_eq!(p.reason.as_deref(), Some("no ALIVE worker matches rack=r9"));
    let p = plan_one(&mut m, group("g", 1, 1, 0, &["rack=r2", "disk=ssd"]));
    assert_eq!(
        p.reasons,
        [WaitReason::NoMatchingWorker { constraint: "rack=r2 and disk=ssd at once".into() }]
    );
}

#[test]
fn a_slot_short_of_several_dimensions_gives_each_shortfall_ranked() {
    // w0: 8 cores, 1 GPU; w1: 4 cores, 2 GPUs, both on r1; w2 elsewhere.
    let mut m = leader();
    join(&mut m, 100, "w0", 8, 1, &["rack=r1", "host=a"]);
    join(&mut m, 101, "w1", 4, 2, &["rack=r1", "host=b"]);
    join(&mut m, 102, "w2", 64, 8, &["rack=r2"]);
    subscribe(&mut m, 1);
    // Asks 16 cores (more than any r1 worker has) and 2 GPUs (w1 has
    // them, w0 not): the cores never fit, so they rank first.
    let p = plan_one(&mut m, group("g", 1, 16, 2, &["rack=r1"]));
    assert_eq!(
        p.reasons,
        [WaitReason::TooLarge { dimension: "cores".into(), needed: 16, largest: 8 }],
        "the GPUs fit on w1: only the cores are short on every matching worker"
    );
    // Three GPUs and 6 cores: w0 has the cores free, no r1 worker has
    // three GPUs at all.
    let p = plan_one(&mut m, group("g", 1, 6, 3, &["rack=r1"]));
    assert_eq!(
        p.reasons,
        [WaitReason::TooLarge { dimension: "gpu".into(), needed: 3, largest: 2 }]
    );
    // Two groups of the same plan first take 4 of w0's cores and one of
    // w1's GPUs (pinned by host): a 5-core, 2-GPU slot is then short of
    // both everywhere, the GPUs by more (1 of 2 missing) than the cores
    // (1 of 5), so they rank first.
    let p = plan_all(
        &mut m,
        vec![
            group("fill-w0", 1, 4, 0, &["host=a"]),
            group("fill-w1", 1, 1, 1, &["host=b"]),
            group("g", 1, 5, 2, &["rack=r1"]),
        ],
    );
    assert_eq!((p[0].unplaced, p[1].unplaced, p[2].unplaced), (0, 0, 1), "{p:?}");
    assert_eq!(
        p[2].reasons,
        [
            WaitReason::Shortfall {
                dimension: "gpu".into(),
                needed: 2,
                most_free: 1,
                worker: Some(WorkerId::new("w0")),
            },
            WaitReason::Shortfall {
                dimension: "cores".into(),
                needed: 5,
                most_free: 4,
                worker: Some(WorkerId::new("w0")),
            },
        ],
        "{p:?}"
    );
    assert_eq!(
        p[2].reason.as_deref(),
        Some("needs 1 more gpu: the most free on a matching worker is 1 (on w0)")
    );
}

/// What `m` plans for `groups`, asked on connection 1.
fn plan_all(m: &mut Master, groups: Vec<GroupSpec>) -> Vec<regent_core::protocol::GroupPlan> {
    let msg = Message::PlanRequest { request: 9, groups, tenant: None };
    m.handle(T, master::Event::Message { conn: ConnId(1), msg })
        .into_iter()
        .find_map(|a| match a {
            master::Action::Send { msg: Message::PlanReply { groups, .. }, .. } => Some(groups),
            _ => None,
        })
        .expect("a PlanReply")
}

/// `DeclareGroup` of `g` as the subscriber sends it.
fn declare_msg(g: GroupSpec) -> Message {
    Message::DeclareGroup { request: 3, spec: g }
}

#[test]
fn each_worker_having_room_in_one_dimension_but_none_in_all_is_a_reason() {
    // w0: 8 cores, no GPU free after a GPU job; w1: 2 cores, 1 GPU.
    let mut m = leader();
    join(&mut m, 100, "w0", 8, 0, &[]);
    join(&mut m, 101, "w1", 2, 1, &[]);
    subscribe(&mut m, 1);
    let p = plan_one(&mut m, group("g", 1, 4, 1, &[]));
    assert_eq!(
        p.reasons,
        [WaitReason::NoWorkerFitsAll {
            dimensions: vec!["cores".into(), "gpu".into()],
            workers: 2
        }]
    );
    assert_eq!(
        p.reason.as_deref(),
        Some("none of 2 matching worker(s) has cores and gpu free at once")
    );
}

#[test]
fn cordoned_and_draining_matching_workers_are_counted_after_what_excludes_more() {
    let mut m = leader();
    join(&mut m, 100, "w0", 2, 0, &[]);
    join(&mut m, 101, "w1", 2, 0, &[]);
    join(&mut m, 102, "w2", 16, 0, &[]);
    join(&mut m, 103, "w3", 16, 0, &["host=d"]);
    subscribe(&mut m, 1);
    // An executor on w3, so that draining it takes a while.
    let msg = declare_msg(group("on-w3", 1, 1, 0, &["host=d"]));
    let out = m.handle(T, master::Event::Message { conn: ConnId(1), msg });
    let sends = m_sends(&persist_all(&mut m, T, &out));
    assert_eq!(launches(&sends).len(), 1, "{sends:?}");
    operate(&mut m, Message::CordonWorker { request: 5, worker: WorkerId::new("w2") });
    operate(
        &mut m,
        Message::DrainWorker { request: 6, worker: WorkerId::new("w3"), deadline: Millis(60_000) },
    );
    let p = plan_one(&mut m, group("g", 1, 8, 0, &[]));
    assert_eq!(
        p.reasons,
        [
            WaitReason::TooLarge { dimension: "cores".into(), needed: 8, largest: 2 },
            WaitReason::Cordoned { workers: 1 },
            WaitReason::Draining { workers: 1 },
        ]
    );
    assert_eq!(p.reason.as_deref(), Some("needs 8 cores: the largest matching worker has 2"));
    assert_eq!(
        p.reasons[1..].iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["1 matching worker(s) are cordoned", "1 matching worker(s) are draining"]
    );
}

#[test]
fn a_waiting_slot_shows_every_reason_in_its_job_status_and_the_cluster_state() {
    let mut m = leader();
    join(&mut m, 100, "w0", 4, 0, &["rack=r1"]);
    subscribe(&mut m, 1);
    let out = m.handle(
        T,
        master::Event::Message {
            conn: ConnId(1),
            msg: declare_msg(group("g", 2, 2, 1, &["rack=r1"])),
        },
    );
    let _ = persist_all(&mut m, T, &out);
    let want = [WaitReason::TooLarge { dimension: "gpu".into(), needed: 1, largest: 0 }];
    let jobs = jobs(&mut m);
    let slots = &jobs[0].groups[0].slots;
    assert_eq!(slots.len(), 2);
    for s in slots {
        assert_eq!(s.phase, SlotPhase::Waiting);
        assert_eq!(s.reasons, want, "{s:?}");
        assert_eq!(
            s.reason.as_deref(),
            Some("needs 1 gpu: no ALIVE matching worker offers gpu (regent worker --resource gpu=...)")
        );
    }
    let state = m.state();
    let g = &state.frameworks[0].groups[0];
    assert_eq!((g.unplaced, g.reasons.as_slice()), (2, &want[..]));
    // A worker with a GPU joins: the slot is placed and says nothing.
    join(&mut m, 101, "w1", 4, 1, &["rack=r1"]);
    let jobs = self::jobs(&mut m);
    let placed: Vec<_> = jobs[0].groups[0].slots.iter().filter(|s| s.reasons.is_empty()).collect();
    assert_eq!(placed.len(), 1, "one GPU: one slot placed, without reasons: {jobs:?}");
    let state = m.state();
    assert_eq!(state.frameworks[0].groups[0].unplaced, 1);
}

/// Every job's status, asked on connection 1.
fn jobs(m: &mut Master) -> Vec<JobStatus> {
    let out = m.handle(
        T,
        master::Event::Message {
            conn: ConnId(1),
            msg: Message::JobsRequest { request: 4, job: None },
        },
    );
    out.into_iter()
        .find_map(|a| match a {
            master::Action::Send { msg: Message::JobsReply { jobs, .. }, .. } => Some(jobs),
            _ => None,
        })
        .expect("a JobsReply")
}

#[test]
fn a_slot_with_room_somewhere_says_it_is_placed_next_and_the_words_of_the_other_kinds() {
    // Kinds the planner does not produce here, by their words.
    let words = |r: WaitReason| r.to_string();
    assert_eq!(
        words(WaitReason::Shortfall {
            dimension: "gpu".into(),
            needed: 2,
            most_free: 0,
            worker: None
        }),
        "needs 2 more gpu: the most free on a matching worker is 0"
    );
    assert_eq!(
        words(WaitReason::Shortfall {
            dimension: "memory".into(),
            needed: 1024,
            most_free: 512,
            worker: Some(WorkerId::new("w3")),
        }),
        "needs 512 more MiB of memory: the most free on a matching worker is 512 MiB (on w3)"
    );
    assert_eq!(
        words(WaitReason::TenantLimit {
            tenant: "a".into(),
            dimension: "cores".into(),
            in_use: 64,
            limit: 64
        }),
        "tenant limit: cores 64 of 64 in use (tenant a)"
    );
    assert_eq!(words(WaitReason::BehindPriority { slots: 3 }), "behind 3 slots of higher priority");
    assert_eq!(
        words(WaitReason::WaitingForPreempted { executors: 2 }),
        "waiting for 2 preempted executors to end"
    );
    assert_eq!(
        words(WaitReason::ExecutorsPerWorker { workers: 2, limit: 256 }),
        "2 matching worker(s) run the most executors a worker takes (256)"
    );
    assert_eq!(
        serde_json::to_value(WaitReason::NoMatchingWorker { constraint: "rack=r9".into() })
            .unwrap(),
        serde_json::json!({"no_matching_worker": {"constraint": "rack=r9"}})
    );
    assert_eq!(
        serde_json::to_value(WaitReason::PlacedNext {}).unwrap(),
        serde_json::json!({"placed_next": {}})
    );
}

#[test]
fn a_group_that_starts_waiting_or_whose_reasons_change_is_an_event_once() {
    use regent_core::events::{diff, ClusterEvent};
    let mut m = leader();
    join(&mut m, 100, "w0", 4, 0, &[]);
    subscribe(&mut m, 1);
    let empty = m.state();
    let out = m.handle(
        T,
        master::Event::Message { conn: ConnId(1), msg: declare_msg(group("g", 3, 8, 0, &[])) },
    );
    let _ = persist_all(&mut m, T, &out);
    let waiting = m.state();
    let too_large = vec![WaitReason::TooLarge { dimension: "cores".into(), needed: 8, largest: 4 }];
    let events: Vec<ClusterEvent> =
        diff(&empty, &waiting).into_iter().filter(|e| e.kind() == "waiting").collect();
    assert_eq!(
        events,
        [ClusterEvent::Waiting {
            framework: waiting.frameworks[0].id.clone(),
            group: "g".into(),
            unplaced: 3,
            reasons: too_large.clone(),
        }]
    );
    assert_eq!(
        events[0].describe(),
        format!(
            "group {}/g: 3 slot(s) waiting: needs 8 cores: the largest matching worker has 4",
            waiting.frameworks[0].id
        )
    );
    assert!(diff(&waiting, &m.state()).is_empty(), "nothing changed: no event");
    // The same reasons with fewer slots waiting: no event (not one per
    // placement); other reasons: one.
    let mut fewer = waiting.clone();
    fewer.frameworks[0].groups[0].unplaced = 2;
    assert!(diff(&waiting, &fewer).is_empty(), "{:?}", diff(&waiting, &fewer));
    join(&mut m, 101, "w1", 6, 0, &[]);
    let after = m.state();
    let events: Vec<ClusterEvent> =
        diff(&waiting, &after).into_iter().filter(|e| e.kind() == "waiting").collect();
    assert!(
        matches!(&events[..], [ClusterEvent::Waiting { reasons, .. }]
            if reasons == &[WaitReason::TooLarge { dimension: "cores".into(), needed: 8, largest: 6 }]),
        "{events:?}"
    );
}

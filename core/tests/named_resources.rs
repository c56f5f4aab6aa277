//! Named resources (GPUs) end to end through the pure machines: the leader
//! counts a worker's offered addresses of each kind like its cores and
//! places a group asking for some only where enough are free; the worker
//! picks the addresses at launch (`REGENT_RESOURCE_GPU`,
//! `CUDA_VISIBLE_DEVICES`), never one a live executor of its own holds, and
//! reports them; a new leader learns them from the registration, and a
//! plan says why a slot would wait.

mod common;

use common::*;
use regent_core::api::WaitReason;
use regent_core::master::{self, Master};
use regent_core::protocol::{
    ExecutorReport, ExecutorSpec, ExecutorState, GroupSpec, Message, RegisterWorker,
};
use regent_core::resources::Resource;
use regent_core::worker;
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis};

const T: Millis = Millis(0);

fn gpus(n: usize) -> Vec<Resource> {
    if n == 0 {
        return vec![];
    }
    vec![Resource { name: "gpu".into(), addresses: (0..n).map(|i| i.to_string()).collect() }]
}

fn offering(name: &str, conn: u64, n: usize, executors: Vec<ExecutorReport>) -> Message {
    Message::RegisterWorker(RegisterWorker {
        resources: gpus(n),
        executors,
        ..registration(name, conn)
    })
}

fn register(m: &mut Master, conn: u64, name: &str, n: usize) -> Vec<(ConnId, Message)> {
    let _ = connect_worker(m, T, conn, name);
    deliver_to_master(m, T, conn, offering(name, conn, n, vec![]))
}

fn leader(id: &str, epoch: u64) -> Master {
    let mut m = Master::new(master::Config::new(id.into(), addr(id)));
    let _ = elect(&mut m, T, epoch);
    m
}

fn trainer(slots: u32, gpu: u32) -> GroupSpec {
    let launch = regent_core::launch::LaunchSpec {
        resources: vec![("gpu".into(), gpu)],
        ..Default::default()
    };
    group_with("train", slots, launch)
}

fn report(
    id: &ExecutorId,
    fw: &FrameworkId,
    state: ExecutorState,
    gpus: &[&str],
) -> ExecutorReport {
    ExecutorReport {
        health: None,
        ran_ms: None,
        resources: if gpus.is_empty() {
            vec![]
        } else {
            vec![("gpu".into(), gpus.iter().map(|g| g.to_string()).collect())]
        },
        id: id.clone(),
        framework: fw.clone(),
        cores: 1,
        memory_mb: 1,
        state,
        ports: vec![],
    }
}

fn status(m: &mut Master, conn: u64, r: ExecutorReport) -> Vec<(ConnId, Message)> {
    deliver_to_master(
        m,
        T,
        conn,
        Message::ExecutorStatus { incarnation: Incarnation(conn), report: r },
    )
}

fn worker_view(m: &Master, id: &str) -> regent_core::protocol::WorkerView {
    m.state().workers.into_iter().find(|w| w.id.as_str() == id).unwrap()
}

#[test]
fn a_gpu_group_goes_only_where_gpus_are_free_and_waits_for_one_to_end() {
    let mut m = leader("a", 1);
    // w0 offers no GPU, w1 two.
    let _ = register(&mut m, 100, "w0", 0);
    let _ = register(&mut m, 101, "w1", 2);
    subscribe(&mut m, 1);
    let sends =
        deliver_to_master(&mut m, T, 1, Message::DeclareGroup { request: 1, spec: trainer(3, 1) });
    let placed = launches(&sends);
    assert_eq!(placed.len(), 2, "two GPUs in the cluster, two slots placed: {sends:?}");
    assert!(placed.iter().all(|(c, ..)| *c == 101), "never on the worker without GPUs");
    let w1 = worker_view(&m, "w1");
    assert_eq!(w1.resources[0].held, 2, "{w1:?}");
    assert!(w1.resources[0].used.is_empty(), "no address known before the reports");
    // The worker picked the addresses; the leader keeps them and shows them.
    let (_, e0, fw) = placed[0].clone();
    let (_, e1, _) = placed[1].clone();
    let sends = status(&mut m, 101, report(&e0, &fw, ExecutorState::Running, &["0"]));
    let update = sends
        .iter()
        .find_map(|(c, msg)| match msg {
            Message::ExecutorUpdate { info, .. } if c.0 == 1 => Some(info.clone()),
            _ => None,
        })
        .expect("the subscriber is told");
    assert_eq!(update.resources, vec![("gpu".to_string(), vec!["0".to_string()])]);
    let _ = status(&mut m, 101, report(&e1, &fw, ExecutorState::Running, &["1"]));
    let w1 = worker_view(&m, "w1");
    assert_eq!(w1.resources[0].used, vec!["0", "1"]);
    let shown = m.state().executors.into_iter().find(|e| e.id == e0).unwrap();
    assert_eq!(shown.resources, vec![("gpu".to_string(), vec!["0".to_string()])]);
    // Slot 0 ends: its GPU is free again and the waiting slot runs there.
    let sends = status(&mut m, 101, report(&e0, &fw, ExecutorState::Exited { code: 0 }, &["0"]));
    let again = launches(&sends);
    assert_eq!(again.len(), 1, "the third slot takes the freed GPU: {sends:?}");
    assert_eq!(again[0].0, 101);
    assert_eq!(worker_view(&m, "w1").resources[0].held, 2);
}

#[test]
fn a_new_leader_learns_every_assignment_from_the_registration_and_counts_it() {
    // A new leader (epoch 2) hears w1 register with two running executors
    // holding GPUs 0 and 1 of three: it adopts both with their addresses,
    // and only one more slot fits.
    let mut m = leader("b", 2);
    subscribe(&mut m, 1);
    let sends =
        deliver_to_master(&mut m, T, 1, Message::DeclareGroup { request: 1, spec: trainer(3, 1) });
    let fw = sends
        .iter()
        .find_map(|(_, msg)| match msg {
            Message::Subscribed { framework, .. } => Some(framework.clone()),
            _ => None,
        })
        .or_else(|| m.state().frameworks.first().map(|f| f.id.clone()))
        .expect("a framework");
    let id = |slot: u32| ExecutorId::new(format!("{fw}/train#{slot}#1.{}", slot + 1));
    let _ = connect_worker(&mut m, T, 101, "w1");
    let held = vec![
        report(&id(0), &fw, ExecutorState::Running, &["0"]),
        report(&id(1), &fw, ExecutorState::Running, &["1"]),
    ];
    let sends = deliver_to_master(&mut m, T, 101, offering("w1", 101, 3, held));
    let w1 = worker_view(&m, "w1");
    assert_eq!(w1.resources[0].held, 3, "two adopted and one placed: {w1:?} {sends:?}");
    assert_eq!(w1.resources[0].used, vec!["0", "1"]);
    let placed = launches(&sends);
    assert_eq!(placed.len(), 1, "one GPU left, one slot placed: {sends:?}");
}

#[test]
fn a_plan_says_why_a_gpu_slot_would_wait() {
    let mut m = leader("a", 1);
    let _ = register(&mut m, 100, "w0", 0);
    let _ = register(&mut m, 101, "w1", 2);
    subscribe(&mut m, 1);
    let p = plan_one(&mut m, trainer(1, 3));
    assert_eq!(p.reason.as_deref(), Some("needs 3 gpu: the largest matching worker has 2"));
    assert_eq!(
        p.reasons,
        [WaitReason::TooLarge { dimension: "gpu".into(), needed: 3, largest: 2 }]
    );
    let p = plan_one(&mut m, trainer(3, 1));
    assert_eq!((p.placed.len(), p.unplaced), (2, 1), "{p:?}");
    assert_eq!(
        p.reason.as_deref(),
        Some("needs 1 more gpu: the most free on a matching worker is 0 (on w0)")
    );
    let mut fpga = trainer(1, 1);
    fpga.launch.resources = vec![("fpga".into(), 1)];
    let p = plan_one(&mut m, fpga);
    assert_eq!(
        p.reason.as_deref(),
        Some(
            "needs 1 fpga: no ALIVE matching worker offers fpga (regent worker --resource \
             fpga=...)"
        )
    );
}

#[test]
fn a_registration_offering_an_address_twice_is_refused() {
    let mut m = leader("a", 1);
    let _ = connect_worker(&mut m, T, 100, "w0");
    let mut reg = offering("w0", 1, 2, vec![]);
    if let Message::RegisterWorker(r) = &mut reg {
        r.resources[0].addresses = vec!["0".into(), "0".into()];
    }
    let sends = deliver_to_master(&mut m, T, 100, reg);
    assert!(
        !sends.iter().any(|(_, msg)| matches!(msg, Message::Registered { .. })),
        "not registered: {sends:?}"
    );
    let said = format!("{sends:?}");
    assert!(said.contains("offers address \\\"0\\\" twice"), "the refusal names it: {said}");
}

fn launch(slot: u32, gpu: u32) -> Message {
    let mut spec = ExecutorSpec {
        command: vec!["/bin/true".into()],
        // The group's own value loses to the worker's.
        env: vec![("CUDA_VISIBLE_DEVICES".into(), "all".into())],
        cores: 1,
        memory_mb: 64,
        launch: Default::default(),
    };
    spec.launch.resources = vec![("gpu".into(), gpu)];
    Message::LaunchExecutor {
        epoch: Epoch(2),
        executor: ExecutorId::new(format!("f/train#{slot}#2.{slot}")),
        framework: FrameworkId::new("f"),
        spec,
        launch: u64::from(slot),
    }
}

fn registered_worker(n: usize) -> regent_core::worker::Worker {
    let mut cfg = worker_cfg("w1", 7, &["a"]);
    cfg.resources = gpus(n);
    registered_worker_with(cfg)
}

fn var<'a>(env: &'a [(String, String)], name: &str) -> &'a str {
    &env.iter().rev().find(|(k, _)| k == name).unwrap().1
}

#[test]
fn the_worker_gives_each_executor_its_own_gpus_never_one_a_live_executor_holds() {
    let mut w = registered_worker(4);
    // What a previous process of this worker left running, re-adopted with
    // the GPU its running record kept.
    let adopted =
        report(&ExecutorId::new("old"), &FrameworkId::new("f"), ExecutorState::Running, &["0"]);
    let _ = w.handle(T, worker::Event::LeftBehind(adopted));
    let env = started(&from(&mut w, T, "a", launch(1, 2))).unwrap();
    assert_eq!(var(&env, "CUDA_VISIBLE_DEVICES"), "1,2", "0 is the adopted executor's");
    assert_eq!(var(&env, "REGENT_RESOURCE_GPU"), "1,2");
    let env = started(&from(&mut w, T, "a", launch(2, 1))).unwrap();
    assert_eq!(var(&env, "CUDA_VISIBLE_DEVICES"), "3");
    let err = started(&from(&mut w, T, "a", launch(3, 1))).unwrap_err();
    assert_eq!(err, "not started: worker w1 has too few free gpu for 1: 4 of 4 offered are held");
    // The adopted executor ends: its GPU is free again.
    let _ = w.handle(
        T,
        worker::Event::ExecutorChanged {
            executor: ExecutorId::new("old"),
            state: ExecutorState::Exited { code: 0 },
        },
    );
    let env = started(&from(&mut w, T, "a", launch(4, 1))).unwrap();
    assert_eq!(var(&env, "CUDA_VISIBLE_DEVICES"), "0");
    // The registration after a reconnect carries every live executor's
    // addresses (what a new leader learns them from).
    let _ = w.handle(T, worker::Event::Disconnected { master: addr("a") });
    let mut out = w.handle(T, worker::Event::Connected { master: addr("a") });
    let retry = w.deadline(worker::Timer::Registration).expect("a re-registration is armed");
    out.extend(w.handle(retry, worker::Event::Tick));
    let r = w_sends(&out)
        .into_iter()
        .find_map(|(_, m)| match m {
            Message::RegisterWorker(r) => Some(r),
            _ => None,
        })
        .expect("the worker registers again");
    assert_eq!(r.resources, gpus(4));
    let held: Vec<(String, Vec<String>)> = r
        .executors
        .iter()
        .filter(|e| !e.state.is_terminal())
        .flat_map(|e| e.resources.clone())
        .collect();
    let mut all: Vec<String> = held.into_iter().flat_map(|(_, a)| a).collect();
    all.sort();
    assert_eq!(all, vec!["0", "1", "2", "3"], "every GPU once");
}

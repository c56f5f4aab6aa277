//! Named ports end to end through the pure machines: the leader counts a
//! worker's offered ports like its cores and places a group that names
//! ports only where enough are free; the worker numbers them at launch
//! (`REGENT_PORT_<NAME>`), never one a live executor of its own holds, and
//! reports them; the framework's subscriber is told `host:port`.

mod common;

use common::*;
use regent_core::api::WaitReason;
use regent_core::master::{self, Master};
use regent_core::ports::{parse_ranges, PortRange};
use regent_core::protocol::{
    ExecutorReport, ExecutorSpec, ExecutorState, GroupSpec, Message, RegisterWorker,
};
use regent_core::worker;
use regent_core::{ConnId, Epoch, ExecutorId, FrameworkId, Incarnation, Millis};

const T: Millis = Millis(0);

fn register(m: &mut Master, conn: u64, name: &str, ports: &str) -> Vec<(ConnId, Message)> {
    let _ = connect_worker(m, T, conn, name);
    let reg = Message::RegisterWorker(RegisterWorker {
        host: Some(format!("{name}.example")),
        ports: if ports.is_empty() { vec![] } else { parse_ranges(ports).unwrap() },
        ..registration(name, conn)
    });
    deliver_to_master(m, T, conn, reg)
}

fn leader() -> Master {
    let mut m = Master::new(master::Config::new("a".into(), addr("a")));
    let _ = elect(&mut m, T, 1);
    m
}

fn server(slots: u32, ports: &[&str]) -> GroupSpec {
    let launch = regent_core::launch::LaunchSpec {
        ports: ports.iter().map(|p| p.to_string()).collect(),
        ..Default::default()
    };
    group_with("server", slots, launch)
}

fn status(
    m: &mut Master,
    conn: u64,
    id: &ExecutorId,
    fw: &FrameworkId,
    state: ExecutorState,
    ports: &[(&str, u16)],
) -> Vec<(ConnId, Message)> {
    let report = ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        id: id.clone(),
        framework: fw.clone(),
        cores: 1,
        memory_mb: 1,
        state,
        ports: ports.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
    };
    deliver_to_master(
        m,
        T,
        conn,
        Message::ExecutorStatus { incarnation: Incarnation(conn), report },
    )
}

#[test]
fn a_group_naming_ports_goes_only_where_enough_are_free_and_its_subscriber_learns_host_and_port() {
    let mut m = leader();
    // w0 offers no ports, w1 two.
    let _ = register(&mut m, 100, "w0", "");
    let _ = register(&mut m, 101, "w1", "20000-20001");
    subscribe(&mut m, 1);
    let sends = deliver_to_master(
        &mut m,
        T,
        1,
        Message::DeclareGroup { request: 1, spec: server(3, &["http"]) },
    );
    let placed = launches(&sends);
    assert_eq!(placed.len(), 2, "two ports free in the cluster, two slots placed: {sends:?}");
    assert!(placed.iter().all(|(c, ..)| *c == 101), "never on the worker without ports");
    let state = regent_core::master::Master::state(&m);
    let w1 = state.workers.iter().find(|w| w.id.as_str() == "w1").unwrap();
    assert_eq!((w1.ports, w1.ports_used), (2, 2), "{w1:?}");
    // The worker numbered them; the subscriber hears where slot 0 listens.
    let (_, e0, fw) = placed[0].clone();
    let sends = status(&mut m, 101, &e0, &fw, ExecutorState::Running, &[("http", 20000)]);
    let update = sends
        .iter()
        .find_map(|(c, msg)| match msg {
            Message::ExecutorUpdate { info, .. } if c.0 == 1 => Some(info.clone()),
            _ => None,
        })
        .expect("the subscriber is told");
    assert_eq!(update.host.as_deref(), Some("w1.example"));
    assert_eq!(update.ports, vec![("http".to_string(), 20000)]);
    assert_eq!(
        regent_core::node::submit::listening(&update).as_deref(),
        Some("http=w1.example:20000")
    );
    // Slot 0 ends: its port is free again and the waiting slot runs there.
    let sends =
        status(&mut m, 101, &e0, &fw, ExecutorState::Exited { code: 0 }, &[("http", 20000)]);
    let again = launches(&sends);
    assert_eq!(again.len(), 1, "the third slot takes the freed port: {sends:?}");
    assert_eq!(again[0].0, 101);
}

#[test]
fn a_plan_says_why_a_group_naming_ports_does_not_fit() {
    let mut m = leader();
    let _ = register(&mut m, 100, "w0", "");
    let _ = register(&mut m, 101, "w1", "20000-20001");
    subscribe(&mut m, 1);
    let p = plan_one(&mut m, server(1, &["a", "b", "c"]));
    assert_eq!(p.unplaced, 1);
    assert_eq!(
        p.reason.as_deref(),
        Some("needs 3 ports: the largest matching worker has 2 (regent worker --ports)")
    );
    let p = plan_one(&mut m, server(3, &["http"]));
    assert_eq!((p.placed.len(), p.unplaced), (2, 1), "{p:?}");
    assert!(p.placed.iter().all(|(_, w)| w.as_str() == "w1"), "{p:?}");
    assert_eq!(p.reasons, [WaitReason::PortsExhausted { needed: 1, most_free: 0 }], "{p:?}");
    let reason = p.reason.unwrap();
    assert_eq!(reason, "needs 1 ports: the most free on a matching worker is 0");
}

#[test]
fn a_registration_with_overlapping_or_zero_port_ranges_is_refused() {
    let mut m = leader();
    let _ = connect_worker(&mut m, T, 100, "w0");
    let reg = Message::RegisterWorker(RegisterWorker {
        users: Default::default(),
        resources: Default::default(),
        host: None,
        ports: vec![PortRange { first: 100, last: 200 }, PortRange { first: 150, last: 160 }],
        worker: "w0".into(),
        incarnation: Incarnation(1),
        cores: 8,
        memory_mb: 1024,
        executors: vec![],
        epoch_seen: Epoch(1),
        launch_seen: 0,
        attributes: vec![],
    });
    let sends = deliver_to_master(&mut m, T, 100, reg);
    assert!(
        !sends.iter().any(|(_, msg)| matches!(msg, Message::Registered { .. })),
        "not registered: {sends:?}"
    );
    let said = format!("{sends:?}");
    assert!(said.contains("overlap"), "the refusal names the problem: {said}");
}

fn launch(id: &str, ports: &[&str]) -> Message {
    let mut spec = ExecutorSpec {
        command: vec!["/bin/true".into()],
        env: vec![("REGENT_PORT_HTTP".into(), "1".into())],
        cores: 1,
        memory_mb: 64,
        launch: Default::default(),
    };
    spec.launch.ports = ports.iter().map(|p| p.to_string()).collect();
    Message::LaunchExecutor {
        epoch: Epoch(2),
        executor: ExecutorId::new(id),
        framework: FrameworkId::new("f"),
        spec,
        launch: 1,
    }
}

fn registered_worker(ports: &str) -> regent_core::worker::Worker {
    let mut cfg = worker_cfg("w1", 7, &["a"]);
    cfg.ports = parse_ranges(ports).unwrap();
    cfg.host = Some("w1.example".into());
    registered_worker_with(cfg)
}

fn port_of(env: &[(String, String)], name: &str) -> u16 {
    env.iter().rev().find(|(k, _)| k == name).unwrap().1.parse().unwrap()
}

#[test]
fn the_worker_numbers_ports_from_its_ranges_never_one_a_live_executor_holds() {
    let mut w = registered_worker("20000-20001,30000");
    // What a previous process of this worker left running, re-adopted with
    // the port numbers its running record kept.
    let adopted = ExecutorReport {
        health: None,
        ran_ms: None,
        resources: Default::default(),
        id: ExecutorId::new("old"),
        framework: FrameworkId::new("f"),
        cores: 1,
        memory_mb: 64,
        state: ExecutorState::Running,
        ports: vec![("http".into(), 20000)],
    };
    let _ = w.handle(T, worker::Event::LeftBehind(adopted));
    let env = started(&from(&mut w, T, "a", launch("e1", &["http", "admin"]))).unwrap();
    // The worker's value comes after the group's own, so it wins.
    assert_eq!(port_of(&env, "REGENT_PORT_HTTP"), 20001, "20000 is the adopted executor's");
    assert_eq!(port_of(&env, "REGENT_PORT_ADMIN"), 30000);
    let err = started(&from(&mut w, T, "a", launch("e2", &["http"]))).unwrap_err();
    assert!(
        err.contains("too few free ports for 1 (http): 3 of 3 offered (20000-20001,30000)"),
        "{err}"
    );
    // The adopted executor ends: its number is free again.
    let _ = w.handle(
        T,
        worker::Event::ExecutorChanged {
            executor: ExecutorId::new("old"),
            state: ExecutorState::Exited { code: 0 },
        },
    );
    let env = started(&from(&mut w, T, "a", launch("e3", &["http"]))).unwrap();
    assert_eq!(port_of(&env, "REGENT_PORT_HTTP"), 20000);
    // The registration after a reconnect carries every live executor's ports.
    let regs: Vec<RegisterWorker> = {
        let _ = w.handle(T, worker::Event::Disconnected { master: addr("a") });
        let mut out = w.handle(T, worker::Event::Connected { master: addr("a") });
        let retry = w.deadline(worker::Timer::Registration).expect("a re-registration is armed");
        out.extend(w.handle(retry, worker::Event::Tick));
        w_sends(&out)
            .into_iter()
            .filter_map(|(_, m)| match m {
                Message::RegisterWorker(r) => Some(r),
                _ => None,
            })
            .collect()
    };
    let r = regs.first().expect("the worker registers again");
    assert_eq!(r.host.as_deref(), Some("w1.example"));
    assert_eq!(r.ports, parse_ranges("20000-20001,30000").unwrap());
    let e1 = r.executors.iter().find(|e| e.id.as_str() == "e1").unwrap();
    assert_eq!(e1.ports, vec![("http".to_string(), 20001), ("admin".to_string(), 30000)]);
}

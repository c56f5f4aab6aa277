//! Hot-path benchmarks (a plain `main`, run with `cargo bench -p regent-core`):
//! frames encoded and decoded per second, and master heartbeats handled per
//! second with 10,000 registered workers. Figures go to README.

use regent_core::codec::{self, Decoder, DecoderConfig};
use regent_core::ids::InstanceId;
use regent_core::master::{self, Master};
use regent_core::protocol::{
    GroupSpec, Hello, Message, RegisterWorker, Role, Subscribe, PROTOCOL_VERSION,
};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::{Addr, ConnId, Epoch, Incarnation, MasterId, Millis, WorkerId};
use std::hint::black_box;
use std::time::Instant;

fn frames_per_second() -> f64 {
    let msg = Message::WorkerHeartbeat { incarnation: Incarnation(0x1234_5678_9abc) };
    let mut decoder = Decoder::new(DecoderConfig::default());
    let mut buf = Vec::with_capacity(64);
    let n = 5_000_000u64;
    let start = Instant::now();
    for _ in 0..n {
        buf.clear();
        codec::encode_into(black_box(&msg), &mut buf);
        decoder.feed(&buf).unwrap();
        black_box(decoder.next_message().unwrap());
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn heartbeats_per_second(workers: u64) -> f64 {
    let mut m = Master::new(master::Config::new(MasterId::new("m"), Addr::new("m:1")));
    let _ = m.handle(Millis(0), master::Event::Elected { floor: Epoch(1), clock: 0 });
    for a in m.handle(Millis(0), master::Event::Store(StoreEvent::Loaded { records: vec![] })) {
        if let master::Action::Store(StoreCommand::Persist { write, .. }) = a {
            let _ = m.handle(Millis(0), master::Event::Store(StoreEvent::Persisted { write }));
        }
    }
    for i in 0..workers {
        let conn = ConnId(i);
        let _ = m.handle(Millis(0), master::Event::Connected { conn });
        let hello = Hello {
            version: PROTOCOL_VERSION,
            cluster: "b".into(),
            role: Role::Worker,
            node: format!("w{i}"),
        };
        let _ = m.handle(Millis(0), master::Event::Message { conn, msg: Message::Hello(hello) });
        let reg = RegisterWorker {
            users: Default::default(),
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            worker: WorkerId(format!("w{i}")),
            incarnation: Incarnation(i),
            cores: 8,
            memory_mb: 8192,
            executors: vec![],
            epoch_seen: Epoch(0),
            launch_seen: 0,
            attributes: vec![],
        };
        for a in
            m.handle(Millis(0), master::Event::Message { conn, msg: Message::RegisterWorker(reg) })
        {
            if let master::Action::Store(StoreCommand::Persist { write, .. }) = a {
                let _ = m.handle(Millis(0), master::Event::Store(StoreEvent::Persisted { write }));
            }
        }
    }
    assert_eq!(m.workers().len() as u64, workers);
    let n = 10_000_000u64;
    let start = Instant::now();
    for k in 0..n {
        let i = k % workers;
        let out = m.handle(
            Millis(1 + k / 1_000_000),
            master::Event::Message {
                conn: ConnId(i),
                msg: Message::WorkerHeartbeat { incarnation: Incarnation(i) },
            },
        );
        debug_assert!(matches!(
            out[..],
            [master::Action::Send { msg: Message::HeartbeatAck { .. }, .. }]
        ));
        black_box(out);
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// A leader with `workers` registered workers of 16 cores and 64 GiB.
fn leader_with_workers(workers: u64, placement: regent_core::policy::Placement) -> Master {
    let mut cfg = master::Config::new(MasterId::new("m"), Addr::new("m:1"));
    cfg.placement = placement;
    let mut m = Master::new(cfg);
    let _ = m.handle(Millis(0), master::Event::Elected { floor: Epoch(1), clock: 0 });
    for a in m.handle(Millis(0), master::Event::Store(StoreEvent::Loaded { records: vec![] })) {
        if let master::Action::Store(StoreCommand::Persist { write, .. }) = a {
            let _ = m.handle(Millis(0), master::Event::Store(StoreEvent::Persisted { write }));
        }
    }
    for i in 0..workers {
        let conn = ConnId(i);
        let _ = m.handle(Millis(0), master::Event::Connected { conn });
        let reg = RegisterWorker {
            users: Default::default(),
            resources: Default::default(),
            host: Default::default(),
            ports: Default::default(),
            worker: WorkerId(format!("w{i:05}")),
            incarnation: Incarnation(i),
            cores: 16,
            memory_mb: 65_536,
            executors: vec![],
            epoch_seen: Epoch(0),
            launch_seen: 0,
            attributes: vec![],
        };
        for a in
            m.handle(Millis(0), master::Event::Message { conn, msg: Message::RegisterWorker(reg) })
        {
            if let master::Action::Store(StoreCommand::Persist { write, .. }) = a {
                let _ = m.handle(Millis(0), master::Event::Store(StoreEvent::Persisted { write }));
            }
        }
    }
    m
}

/// Seconds to place `executors` one-core executors over `workers` workers,
/// declared as groups of 2,000, one per framework (the per-group slot limit
/// and the framework record limit allow about that many): the steps from
/// each durable declaration to its last `LaunchExecutor`.
fn placement_seconds(
    workers: u64,
    executors: u32,
    placement: regent_core::policy::Placement,
) -> f64 {
    let mut m = leader_with_workers(workers, placement);
    let mut elapsed = 0.0;
    let mut launched = 0;
    for k in 0..executors.div_ceil(2_000) {
        let conn = ConnId(1_000_000 + u64::from(k));
        let _ = m.handle(Millis(0), master::Event::Connected { conn });
        let sub = Subscribe {
            framework: None,
            name: format!("bench{k}"),
            instance: InstanceId(1 + u64::from(k)),
            attempt: 1,
            failover_timeout: Millis(60_000),
            tenant: None,
        };
        for a in m.handle(Millis(0), master::Event::Message { conn, msg: Message::Subscribe(sub) })
        {
            if let master::Action::Store(StoreCommand::Persist { write, .. }) = a {
                let _ = m.handle(Millis(0), master::Event::Store(StoreEvent::Persisted { write }));
            }
        }
        let spec = GroupSpec {
            group: "g".into(),
            slots: (executors - k * 2_000).min(2_000),
            command: vec!["/bin/true".into()],
            env: vec![],
            cores: 1,
            memory_mb: 1024,
            policy: Default::default(),
            launch: Default::default(),
        };
        let out = m.handle(
            Millis(0),
            master::Event::Message { conn, msg: Message::DeclareGroup { request: 1, spec } },
        );
        let write = match &out[..] {
            [master::Action::Store(StoreCommand::Persist { write, .. })] => *write,
            other => panic!("unexpected {other:?}"),
        };
        let start = Instant::now();
        let out = m.handle(Millis(0), master::Event::Store(StoreEvent::Persisted { write }));
        elapsed += start.elapsed().as_secs_f64();
        launched += out
            .iter()
            .filter(|a| {
                matches!(a, master::Action::Send { msg: Message::LaunchExecutor { .. }, .. })
            })
            .count();
        black_box(out);
    }
    assert_eq!(launched, executors as usize);
    elapsed
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --all-targets` builds benches; nothing to run there
    }
    println!(
        "codec: heartbeat frames encoded+decoded per second: {:.2} M",
        frames_per_second() / 1e6
    );
    println!(
        "master: heartbeats handled per second with 10,000 workers: {:.2} M",
        heartbeats_per_second(10_000) / 1e6
    );
    for (name, policy) in [
        ("spread", regent_core::policy::Placement::Spread),
        ("pack", regent_core::policy::Placement::Pack),
    ] {
        let secs = placement_seconds(1_000, 10_000, policy);
        println!(
            "master: placing 10,000 executors over 1,000 workers ({name}): {:.1} ms in all, {:.2} us per placement",
            secs * 1e3,
            secs * 1e6 / 10_000.0
        );
    }
}

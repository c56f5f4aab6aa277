//! Embedding the subscriber machine: the whole program side of a framework
//! in one loop, with a master machine standing in for the network.
//!
//! Run: `cargo run -p regent-core --example embed_subscriber`
//!
//! A real embedder replaces `wire` with its transport: `Action::Connect`
//! opens a connection, `Action::Send` writes a frame (`regent_core::codec`),
//! frames read become `Event::Message`, and once `Subscriber::poll_timeout`
//! has passed it feeds `Event::Tick` (the machine keeps its own deadlines).
//! The app-facing actions (`Subscribed`, `ExecutorUpdate`, `SlotFailed`,
//! `Exit`, ...) are the program's to act on.

use regent_core::ids::InstanceId;
use regent_core::master::{self, Master};
use regent_core::protocol::GroupSpec;
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::subscriber::{self, Subscriber};
use regent_core::{Addr, ConnId, Epoch, MasterId, Millis};

fn main() {
    let now = Millis(0);
    // The cluster side: a master elected over an empty store.
    let mut m = Master::new(master::Config::new(MasterId::new("m1"), Addr::new("m1:7077")));
    let mut to_master = m.handle(now, master::Event::Elected { floor: Epoch(1), clock: 0 });
    to_master.extend(m.handle(now, master::Event::Store(StoreEvent::Loaded { records: vec![] })));
    persist(&mut m, to_master);

    // The program side.
    let config =
        subscriber::Config::new("demo", "word-count", InstanceId(42), vec![Addr::new("m1:7077")]);
    let mut sub = Subscriber::new(config);
    let mut actions = sub.handle(now, subscriber::Event::Start);
    actions.extend(sub.handle(
        now,
        subscriber::Event::Declare(GroupSpec {
            group: "mappers".into(),
            slots: 2,
            command: vec!["/usr/bin/wc".into(), "-l".into()],
            env: vec![],
            cores: 1,
            memory_mb: 256,
            policy: Default::default(),
            launch: Default::default(),
        }),
    ));
    let conn = ConnId(1);
    while !actions.is_empty() {
        let mut next = Vec::new();
        for action in actions {
            match action {
                // Transport: here, straight into the master machine.
                subscriber::Action::Connect { master } => {
                    let _ = m.handle(now, master::Event::Connected { conn });
                    next.extend(sub.handle(now, subscriber::Event::Connected { master }));
                }
                subscriber::Action::Send { to, msg } => {
                    let out = m.handle(now, master::Event::Message { conn, msg });
                    for reply in persist(&mut m, out) {
                        next.extend(sub.handle(
                            now,
                            subscriber::Event::Message { from: to.clone(), msg: reply },
                        ));
                    }
                }
                // What the program sees.
                subscriber::Action::Subscribed { framework, .. } => {
                    println!("subscribed as {framework}")
                }
                subscriber::Action::RequestAccepted { request, .. } => {
                    println!("request {request} accepted")
                }
                other => println!("program event: {other:?}"),
            }
        }
        actions = next;
    }
    // Time stands still here; a real loop sleeps until this deadline (the
    // heartbeat watchdog, now) and then feeds `Event::Tick`.
    println!("next deadline: {:?}", sub.poll_timeout());
    println!("subscriber status: {:?}", sub.status());
}

/// Feeds every store write back as durable; returns the messages the master
/// sent (no workers here, so nothing gets placed).
fn persist(m: &mut Master, actions: Vec<master::Action>) -> Vec<regent_core::protocol::Message> {
    let mut sent = Vec::new();
    let mut queue = actions;
    while !queue.is_empty() {
        let mut more = Vec::new();
        for a in queue {
            match a {
                master::Action::Store(StoreCommand::Persist { write, .. })
                | master::Action::Store(StoreCommand::Unpersist { write, .. }) => more.extend(
                    m.handle(Millis(0), master::Event::Store(StoreEvent::Persisted { write })),
                ),
                master::Action::Send { msg, .. } => sent.push(msg),
                _ => {}
            }
        }
        queue = more;
    }
    sent
}

//! A worker whose connections are refused in their handshake (a wrong
//! cluster secret, a refused TLS certificate: the link connects at TCP,
//! then closes before the master sends a frame) backs off its redials;
//! only a link that carried a frame from the master is redialled at once
//! when it drops. Regression: the backoff was reset on the TCP connect, so
//! a refused worker redialled about 130 times a second
//! (`runtime-smol/tests/e2e_tls.rs`,
//! `a_worker_refused_for_its_certificate_backs_off_its_redials`).

mod common;

use common::{addr, worker};
use regent_core::protocol::{HelloReply, Message, Role};
use regent_core::worker::{Event, Timer, Worker};
use regent_core::{Epoch, MasterId, Millis};

/// When the worker's reconnect timer is set for.
fn reconnect_at(w: &Worker) -> Option<Millis> {
    w.deadline(Timer::Reconnect)
}

#[test]
fn links_refused_before_a_frame_back_off_and_a_working_link_redials_at_once() {
    let m = addr("m1");
    let mut w = worker("w1", 1, &["m1"]);
    let mut now = Millis(1_000);
    let _ = w.handle(now, Event::Start);
    // Ten links refused in their handshake: each delay at least the last
    // one's half (jitter 50-100 %), growing to the 1 s cap.
    let mut delays = Vec::new();
    for _ in 0..10 {
        let _ = w.handle(now, Event::Connected { master: m.clone() });
        let _ = w.handle(now, Event::Disconnected { master: m.clone() });
        let at = reconnect_at(&w).expect("a redial is scheduled");
        delays.push(at.0 - now.0);
        now = at;
        let _ = w.handle(now, Event::Tick);
    }
    assert!(delays.iter().all(|d| *d >= 25), "every refused link backs off: {delays:?}");
    assert!(delays[9] >= 500, "the backoff grows to its cap: {delays:?}");

    // A link that carried the master's reply is redialled within 10 ms
    // when it drops, and the backoff starts again from its floor.
    let _ = w.handle(now, Event::Connected { master: m.clone() });
    let reply = Message::HelloReply(HelloReply {
        role: Role::Master,
        master: MasterId::new("m1"),
        leading: false,
        epoch: Epoch(0),
        leader: None,
        masters: vec![m.clone()],
    });
    let _ = w.handle(now, Event::Message { from: m.clone(), msg: reply });
    let _ = w.handle(now, Event::Disconnected { master: m.clone() });
    let at = reconnect_at(&w).expect("a redial is scheduled");
    assert!(at.0 - now.0 <= 10, "a working link is redialled at once: {} ms", at.0 - now.0);
}

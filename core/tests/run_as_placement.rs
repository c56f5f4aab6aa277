//! A group naming a user to run as is placed only on workers that start
//! executors as that user (their executor user, or, as root, one of their
//! `--allowed-users`, announced in the registration); a plan says why a
//! slot would wait when none does.

mod common;

use common::*;
use regent_core::api::WaitReason;
use regent_core::master::{self, Master};
use regent_core::protocol::{GroupSpec, Message, RegisterWorker};
use regent_core::Millis;

const T: Millis = Millis(0);

fn register(m: &mut Master, conn: u64, name: &str, users: &[&str]) {
    let _ = connect_worker(m, T, conn, name);
    let reg = Message::RegisterWorker(RegisterWorker {
        users: users.iter().map(|u| u.to_string()).collect(),
        ..registration(name, conn)
    });
    let _ = deliver_to_master(m, T, conn, reg);
}

fn as_user(slots: u32, user: Option<&str>) -> GroupSpec {
    let launch =
        regent_core::launch::LaunchSpec { user: user.map(str::to_string), ..Default::default() };
    group_with("g", slots, launch)
}

fn cluster() -> Master {
    let mut m = Master::new(master::Config::new("a".into(), addr("a")));
    let _ = elect(&mut m, T, 1);
    register(&mut m, 100, "w0", &["regent"]);
    register(&mut m, 101, "w1", &["regent", "alice"]);
    subscribe(&mut m, 1);
    m
}

#[test]
fn a_group_running_as_alice_goes_only_to_the_worker_allowing_alice() {
    let mut m = cluster();
    let sends = deliver_to_master(
        &mut m,
        T,
        1,
        Message::DeclareGroup { request: 1, spec: as_user(3, Some("alice")) },
    );
    let placed = launches(&sends);
    assert_eq!(placed.len(), 3, "{sends:?}");
    assert!(placed.iter().all(|(c, ..)| *c == 101), "never on w0, which does not allow alice");
    let shown = m.state().workers.into_iter().find(|w| w.id.as_str() == "w1").unwrap();
    assert_eq!(shown.users, ["regent", "alice"]);
}

#[test]
fn a_plan_says_no_worker_starts_executors_as_bob() {
    let mut m = cluster();
    let p = plan_one(&mut m, as_user(1, Some("bob")));
    assert_eq!(p.unplaced, 1);
    assert_eq!(
        p.reason.as_deref(),
        Some(
            "runs as user bob: no ALIVE matching worker starts executors as bob (regent worker \
             --allowed-users bob, as root)"
        )
    );
    assert_eq!(p.reasons, [WaitReason::UserNotOffered { user: "bob".into() }]);
    let p = plan_one(&mut m, as_user(2, None));
    assert_eq!((p.placed.len(), p.unplaced), (2, 0), "a group naming no user goes anywhere");
}

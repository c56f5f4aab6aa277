//! Elections against a real ZooKeeper server: exactly one leader, the
//! other reports it; closing the leader's session elects the other; the
//! negotiated session timeout is what the server granted.

mod support;

use regent_core::{MasterId, Millis};
use regent_smol::zk::ZkConfig;
use support::elector_driver::{spawn_elector, Outcome};
use support::zk_server::ZkServer;
use support::{elector_config, eventually, unique_root, wait_outcome, BOUND};

fn is_elected(o: &Outcome) -> bool {
    matches!(o, Outcome::Elected { .. })
}

#[test]
fn two_electors_elect_exactly_one_leader_and_failover_on_close() {
    let server = ZkServer::start();
    smol::block_on(async {
        let root = unique_root("two");
        let zk = ZkConfig::new(server.addr());
        let (a, a_out, _a_task) = spawn_elector(elector_config(&root, "a", 0xa1, 3000), zk.clone());
        // `a` goes first, so it is the one to lead.
        let (a_won, _) = wait_outcome(&a_out, BOUND, is_elected).await.expect("a is elected alone");
        let Outcome::Elected { fence, .. } = a_won else { unreachable!() };
        let (b, b_out, _b_task) = spawn_elector(elector_config(&root, "b", 0xb2, 3000), zk.clone());
        let (seen, _) = wait_outcome(&b_out, BOUND, |o| matches!(o, Outcome::LeaderIs { .. }))
            .await
            .expect("b reports a leader");
        let Outcome::LeaderIs { id, addr, floor } = seen else { unreachable!() };
        assert_eq!(id, MasterId::new("a"), "b sees a lead");
        assert_eq!(addr.as_str(), "a.test:5050");
        assert!(floor.0 >= 1);

        // Exactly one leader once both settled.
        let (sa, sb) = eventually(BOUND, || async {
            let sa = a.snapshot().await?;
            let sb = b.snapshot().await?;
            (sa.status.settled && sb.status.settled).then_some((sa, sb))
        })
        .await
        .expect("both settle");
        assert!(sa.status.leader && sa.status.acting);
        assert!(!sb.status.leader);
        assert_eq!(sa.fence.as_ref(), Some(&fence));
        assert_eq!(sa.negotiated_timeout, Some(Millis(3000)));
        while let Ok(o) = b_out.try_recv() {
            assert!(!is_elected(&o), "b must not be elected while a leads: {o:?}");
        }

        // Closing the leader's session (shutdown closes it) elects b, and b
        // reports itself as the leader along with Elected.
        a.shutdown().await;
        let (_, before) = wait_outcome(&b_out, BOUND, is_elected).await.expect("b takes over");
        assert!(
            before.iter().any(|o| matches!(o, Outcome::LeaderIs { id, .. } if id.as_str() == "b")),
            "b reports itself as leader: {before:?}"
        );
        let sb = b.snapshot().await.expect("b runs");
        assert!(sb.status.leader);
        b.shutdown().await;
    });
}

#[test]
fn negotiated_timeout_is_what_the_server_grants() {
    let server = ZkServer::start();
    smol::block_on(async {
        let root = unique_root("timeout");
        let zk = ZkConfig::new(server.addr());
        // The fixture's server clamps into [minSessionTimeout=400,
        // maxSessionTimeout=60000] (without the latter: 20 x tickTime).
        for (asked, granted) in [(90_000u64, 60_000u64), (2_000, 2_000)] {
            let (h, out, _t) =
                spawn_elector(elector_config(&root, "t", 0x7000 + asked, asked), zk.clone());
            wait_outcome(&out, BOUND, is_elected).await.expect("elected alone");
            let s = h.snapshot().await.expect("runs");
            eprintln!("asked {asked} ms, negotiated {:?}", s.negotiated_timeout);
            assert_eq!(s.negotiated_timeout, Some(Millis(granted)));
            h.shutdown().await;
        }
    });
}

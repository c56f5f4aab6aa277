//! AURORA-1061 against a real ZooKeeper server: a create of the candidate
//! node reaches the server, the connection drops before its reply (a proxy
//! forwards the create and then closes both sides), the client reconnects
//! with the same session. The elector must end with exactly one candidate
//! node for its session; the old twitter-commons behaviour (the test-only
//! knob) ends with two, which shows the proxy really produces the situation.

mod support;

use regent_core::elector::CandidateName;
use regent_smol::zk::ZkConfig;
use std::time::Duration;
use support::elector_driver::{spawn_elector, Outcome};
use support::zk_proxy::ZkProxy;
use support::zk_server::ZkServer;
use support::{elector_config, eventually, unique_root, wait_outcome, BOUND};

/// The candidate nodes of process `guid`, listed by a separate client.
async fn nodes_of(client: &zookeeper_client::Client, election: &str, guid: u64) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_children(election)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|n| CandidateName::parse(n).is_some_and(|c| c.guid == guid))
        .collect();
    names.sort();
    names
}

fn run(adopt: bool) -> (usize, Vec<String>) {
    let server = ZkServer::start();
    let proxy = ZkProxy::start(server.addr());
    smol::block_on(async {
        let root = unique_root(if adopt { "aurora" } else { "aurora-knob" });
        let guid = 0x1061;
        let mut config = elector_config(&root, "m1", guid, 4000);
        config.unsafe_no_adopt_after_connection_loss = !adopt;
        let election = config.election_path();
        // Cut the connection after the first candidate create.
        proxy.arm_create_trap("/election/_c_");
        let (h, out, _task) = spawn_elector(config, ZkConfig::new(proxy.addr()));
        let observer = zookeeper_client::Client::connector()
            .with_session_timeout(Duration::from_secs(4))
            .connect(&server.addr())
            .await
            .expect("observer connects directly");
        let fired = eventually(BOUND, || async { (proxy.fired() > 0).then_some(()) }).await;
        assert!(fired.is_some(), "the proxy saw the candidate create");
        if adopt {
            let (_, seen) = wait_outcome(&out, BOUND, |o| matches!(o, Outcome::Elected { .. }))
                .await
                .expect("elected after the reconnect");
            assert!(seen.iter().all(|o| !matches!(o, Outcome::Revoked)));
        }
        // Settled (or, with the knob, two nodes held): then count.
        let nodes = eventually(BOUND, || async {
            let s = h.snapshot().await?;
            let nodes = nodes_of(&observer, &election, guid).await;
            (s.status.settled && (adopt || nodes.len() >= 2)).then_some(nodes)
        })
        .await
        .expect("the elector settles");
        // Give a stray second create time to show up, then count again.
        async_io::Timer::after(Duration::from_millis(1500)).await;
        let again = nodes_of(&observer, &election, guid).await;
        assert_eq!(nodes, again, "stable");
        let s = h.snapshot().await.expect("runs");
        assert!(s.status.session.is_some(), "the session survived the cut");
        h.shutdown().await;
        (proxy.fired(), again)
    })
}

#[test]
fn connection_loss_on_create_leaves_exactly_one_candidate_node() {
    let (fired, nodes) = run(true);
    assert_eq!(fired, 1);
    assert_eq!(nodes.len(), 1, "exactly one candidate node for the session: {nodes:?}");
}

#[test]
fn without_adoption_the_same_cut_leaves_two_nodes_aurora_1061() {
    let (fired, nodes) = run(false);
    assert_eq!(fired, 1);
    assert_eq!(nodes.len(), 2, "the old behaviour duplicates the candidate: {nodes:?}");
}

//! `ZkBackend` against a real ZooKeeper server, without an elector: every
//! `ZkOp`, replies in order, one-shot watches, the negotiated timeout,
//! `ConnectionLoss` (through a cutting proxy) and the cluster-secret ACLs.

mod support;

use regent_core::zk::{
    CreateMode, MultiOp, RequestId, SessionId, WatchKind, ZkCommand, ZkError, ZkEvent, ZkOp,
    ZkReply, ZkResult,
};
use regent_core::Millis;
use regent_smol::zk::{digest_credentials, digest_id, ZkBackend, ZkConfig};
use std::collections::BTreeMap;
use std::time::Duration;
use support::zk_proxy::ZkProxy;
use support::zk_server::ZkServer;
use support::{unique_root, BOUND};

/// Next event within the bound.
async fn next(b: &mut ZkBackend) -> ZkEvent {
    smol::future::or(async { Some(b.next_event().await) }, async {
        async_io::Timer::after(BOUND).await;
        None
    })
    .await
    .expect("an event within the bound")
}

async fn open(b: &mut ZkBackend, timeout: u64) -> (SessionId, Millis) {
    b.execute(ZkCommand::NewSession { timeout: Millis(timeout) });
    match next(b).await {
        ZkEvent::SessionConnected { session, timeout } => (session, timeout),
        other => panic!("expected SessionConnected, got {other:?}"),
    }
}

/// Sends `ops` in one go and collects their replies (and any watch events).
struct Runner {
    session: SessionId,
    next_req: u64,
    watches: Vec<ZkEvent>,
}

impl Runner {
    async fn run(&mut self, b: &mut ZkBackend, ops: Vec<ZkOp>) -> Vec<ZkResult> {
        let first = self.next_req;
        for op in ops.iter().cloned() {
            let req = RequestId(self.next_req);
            self.next_req += 1;
            b.execute(ZkCommand::Request { session: self.session, req, op });
        }
        let mut got: BTreeMap<u64, ZkResult> = BTreeMap::new();
        let mut order = Vec::new();
        while got.len() < ops.len() {
            match next(b).await {
                ZkEvent::Reply { req, result } => {
                    order.push(req.0);
                    got.insert(req.0, result);
                }
                w @ ZkEvent::Watch { .. } => self.watches.push(w),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(order, (first..self.next_req).collect::<Vec<_>>(), "replies in send order");
        got.into_values().collect()
    }

    async fn watch(&mut self, b: &mut ZkBackend) -> (String, WatchKind) {
        let ev = if self.watches.is_empty() { next(b).await } else { self.watches.remove(0) };
        match ev {
            ZkEvent::Watch { session, event } => {
                assert_eq!(session, self.session);
                (event.path, event.kind)
            }
            other => panic!("expected a watch, got {other:?}"),
        }
    }
}

#[test]
fn every_op_and_watch_against_a_real_server() {
    let server = ZkServer::start();
    smol::block_on(async {
        let mut b = ZkBackend::new(ZkConfig::new(server.addr()));
        let (session, timeout) = open(&mut b, 2500).await;
        assert_eq!(timeout, Millis(2500));
        assert_eq!(b.session(), Some((session, timeout)));
        let mut r = Runner { session, next_req: 0, watches: Vec::new() };
        let root = unique_root("ops");
        let top = root.rsplit_once('/').unwrap().0.to_owned();
        let dir = format!("{root}/d");
        let create = |path: &str, data: &[u8], mode| ZkOp::Create {
            path: path.to_owned(),
            data: data.to_vec(),
            mode,
        };
        let res = r
            .run(
                &mut b,
                vec![
                    create(&top, b"", CreateMode::Persistent),
                    create(&root, b"", CreateMode::Persistent),
                    create(&dir, b"v0", CreateMode::Persistent),
                    create(&format!("{dir}/_c_x-n_"), b"me", CreateMode::EphemeralSequential),
                    create(&dir, b"again", CreateMode::Persistent),
                    create(&format!("{root}/no/parent"), b"", CreateMode::Persistent),
                    ZkOp::Sync { path: dir.clone() },
                    ZkOp::GetChildren { path: dir.clone(), watch: true },
                    ZkOp::GetData { path: dir.clone(), watch: true },
                    ZkOp::Exists { path: format!("{dir}/later"), watch: true },
                    ZkOp::Exists { path: dir.clone(), watch: false },
                ],
            )
            .await;
        assert!(matches!(res[0], Ok(ZkReply::Created { .. }) | Err(ZkError::NodeExists)));
        assert_eq!(res[1], Ok(ZkReply::Created { path: root.clone() }));
        assert_eq!(res[2], Ok(ZkReply::Created { path: dir.clone() }));
        let Ok(ZkReply::Created { path: seq_path }) = &res[3] else { panic!("{:?}", res[3]) };
        let suffix = seq_path.strip_prefix(&format!("{dir}/_c_x-n_")).expect("prefix kept");
        assert_eq!(suffix.len(), 10, "ten-digit sequence: {seq_path}");
        assert_eq!(res[4], Err(ZkError::NodeExists));
        assert_eq!(res[5], Err(ZkError::NoNode));
        assert_eq!(res[6], Ok(ZkReply::Synced));
        let seq_name = seq_path.rsplit('/').next().unwrap().to_owned();
        assert_eq!(res[7], Ok(ZkReply::Children(vec![seq_name.clone()])));
        let Ok(ZkReply::Data { data, stat }) = &res[8] else { panic!("{:?}", res[8]) };
        assert_eq!(data, b"v0");
        assert_eq!(stat.version, 0);
        assert_eq!(stat.ephemeral_owner, None);
        assert_eq!(res[9], Ok(ZkReply::Stat(None)));
        assert!(matches!(res[10], Ok(ZkReply::Stat(Some(_)))));

        // A multi read: one result per path, in order, each with its own
        // error.
        let res = r
            .run(
                &mut b,
                vec![ZkOp::MultiRead(vec![dir.clone(), format!("{dir}/missing"), dir.clone()])],
            )
            .await;
        let Ok(ZkReply::MultiRead(reads)) = &res[0] else { panic!("{:?}", res[0]) };
        assert!(
            matches!(&reads[..], [Ok(ZkReply::Data { data: a, .. }), Err(ZkError::NoNode),
            Ok(ZkReply::Data { data: b, .. })] if a == b"v0" && b == b"v0"),
            "{reads:?}"
        );

        // Versioned set: the wrong version is refused, the right one fires
        // the data watch.
        let res = r
            .run(
                &mut b,
                vec![
                    ZkOp::SetData { path: dir.clone(), data: b"v1".to_vec(), version: Some(5) },
                    ZkOp::SetData { path: dir.clone(), data: b"v1".to_vec(), version: Some(0) },
                ],
            )
            .await;
        assert_eq!(res[0], Err(ZkError::BadVersion));
        assert!(matches!(&res[1], Ok(ZkReply::Stat(Some(s))) if s.version == 1));
        assert_eq!(r.watch(&mut b).await, (dir.clone(), WatchKind::NodeDataChanged));

        // Multi with version checks: a failing check applies nothing.
        let later = format!("{dir}/later");
        let res = r
            .run(
                &mut b,
                vec![
                    ZkOp::Multi(vec![
                        MultiOp::Check { path: dir.clone(), version: 0 },
                        MultiOp::Create {
                            path: later.clone(),
                            data: vec![],
                            mode: CreateMode::Persistent,
                        },
                    ]),
                    ZkOp::Exists { path: later.clone(), watch: false },
                    ZkOp::Multi(vec![
                        MultiOp::Check { path: dir.clone(), version: 1 },
                        MultiOp::Create {
                            path: later.clone(),
                            data: vec![],
                            mode: CreateMode::Persistent,
                        },
                        MultiOp::SetData {
                            path: later.clone(),
                            data: b"x".to_vec(),
                            version: Some(0),
                        },
                        MultiOp::Delete { path: seq_path.clone(), version: Some(0) },
                    ]),
                ],
            )
            .await;
        assert_eq!(res[0], Err(ZkError::BadVersion));
        assert_eq!(res[1], Ok(ZkReply::Stat(None)));
        let Ok(ZkReply::Multi(replies)) = &res[2] else { panic!("{:?}", res[2]) };
        assert_eq!(replies[0], ZkReply::Checked);
        assert_eq!(replies[1], ZkReply::Created { path: later.clone() });
        assert!(matches!(&replies[2], ZkReply::Stat(Some(s)) if s.version == 1));
        assert_eq!(replies[3], ZkReply::Deleted);
        // The exists watch saw the create; the children watch the changes.
        let mut fired = vec![r.watch(&mut b).await, r.watch(&mut b).await];
        fired.sort_by_key(|(p, k)| (p.clone(), format!("{k:?}")));
        assert_eq!(
            fired,
            vec![
                (dir.clone(), WatchKind::NodeChildrenChanged),
                (later.clone(), WatchKind::NodeCreated)
            ]
        );

        // Versioned delete.
        let res = r
            .run(
                &mut b,
                vec![
                    ZkOp::Delete { path: later.clone(), version: Some(0) },
                    ZkOp::Delete { path: later.clone(), version: Some(1) },
                    ZkOp::Delete { path: later.clone(), version: None },
                ],
            )
            .await;
        assert_eq!(res, vec![Err(ZkError::BadVersion), Ok(ZkReply::Deleted), Err(ZkError::NoNode)]);

        // Closing: nothing of the session is reported again.
        b.execute(ZkCommand::CloseSession { session });
        assert_eq!(b.session(), None);
        b.execute(ZkCommand::Request {
            session,
            req: RequestId(999),
            op: ZkOp::Sync { path: dir.clone() },
        });
        let (s2, _) = open(&mut b, 2000).await;
        assert_ne!(s2, session);
    });
}

#[test]
fn connection_loss_on_create_is_reported_as_connection_loss_then_reconnects() {
    let server = ZkServer::start();
    let proxy = ZkProxy::start(server.addr());
    smol::block_on(async {
        let mut b = ZkBackend::new(ZkConfig::new(proxy.addr()));
        let (session, timeout) = open(&mut b, 4000).await;
        let root = unique_root("loss");
        let top = root.rsplit_once('/').unwrap().0.to_owned();
        let mut r = Runner { session, next_req: 0, watches: Vec::new() };
        let _ = r
            .run(
                &mut b,
                vec![
                    ZkOp::Create { path: top, data: vec![], mode: CreateMode::Persistent },
                    ZkOp::Create { path: root.clone(), data: vec![], mode: CreateMode::Persistent },
                ],
            )
            .await;
        proxy.arm_create_trap("/trap-");
        let prefix = format!("{root}/trap-");
        b.execute(ZkCommand::Request {
            session,
            req: RequestId(100),
            op: ZkOp::Create { path: prefix, data: vec![], mode: CreateMode::EphemeralSequential },
        });
        let mut events = Vec::new();
        loop {
            let ev = next(&mut b).await;
            events.push(ev.clone());
            if matches!(ev, ZkEvent::SessionConnected { .. }) {
                break;
            }
        }
        assert!(
            events.contains(&ZkEvent::Reply {
                req: RequestId(100),
                result: Err(ZkError::ConnectionLoss)
            }),
            "{events:?}"
        );
        assert!(events.contains(&ZkEvent::Disconnected { session }), "{events:?}");
        assert_eq!(events.last(), Some(&ZkEvent::SessionConnected { session, timeout }));
        assert_eq!(proxy.fired(), 1);
        // The create was applied although its reply never came.
        let res = r.run(&mut b, vec![ZkOp::GetChildren { path: root.clone(), watch: false }]).await;
        let Ok(ZkReply::Children(children)) = &res[0] else { panic!("{res:?}") };
        assert_eq!(children.len(), 1, "{children:?}");
        assert!(children[0].starts_with("trap-"));
    });
}

#[test]
fn with_a_secret_only_the_cluster_reads_or_writes() {
    let server = ZkServer::start();
    smol::block_on(async {
        let zk = ZkConfig::new(server.addr()).with_secret("cluster secret");
        let mut b = ZkBackend::new(zk);
        let (session, _) = open(&mut b, 3000).await;
        let mut r = Runner { session, next_req: 0, watches: Vec::new() };
        // A parent and a child, both created by the cluster: deleting a
        // node needs DELETE on its parent, creating one CREATE on it.
        let parent = "/regent-secret";
        let node = "/regent-secret/n";
        let res = r
            .run(
                &mut b,
                vec![
                    ZkOp::Create {
                        path: parent.into(),
                        data: vec![],
                        mode: CreateMode::Persistent,
                    },
                    ZkOp::Create {
                        path: node.into(),
                        data: b"mine".to_vec(),
                        mode: CreateMode::Persistent,
                    },
                ],
            )
            .await;
        assert_eq!(res[1], Ok(ZkReply::Created { path: node.into() }));

        let connect = |auth: Option<Vec<u8>>| {
            let addr = server.addr();
            async move {
                let mut c = zookeeper_client::Client::connector()
                    .with_session_timeout(Duration::from_secs(3));
                if let Some(a) = auth {
                    c = c.with_auth("digest", &a);
                }
                c.connect(&addr).await.unwrap()
            }
        };
        let stranger = connect(None).await;
        // No world access at all: records hold commands and environments.
        assert_eq!(stranger.get_data(node).await.unwrap_err(), zookeeper_client::Error::NoAuth);
        assert_eq!(
            stranger.list_children(parent).await.unwrap_err(),
            zookeeper_client::Error::NoAuth
        );
        assert_eq!(
            stranger.set_data(node, b"theirs", None).await.unwrap_err(),
            zookeeper_client::Error::NoAuth
        );
        assert_eq!(stranger.delete(node, None).await.unwrap_err(), zookeeper_client::Error::NoAuth);
        let opts = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        assert_eq!(
            stranger.create("/regent-secret/other", b"", &opts).await.unwrap_err(),
            zookeeper_client::Error::NoAuth
        );
        let wrong = connect(Some(digest_credentials(b"another secret"))).await;
        assert_eq!(
            wrong.set_data(node, b"theirs", None).await.unwrap_err(),
            zookeeper_client::Error::NoAuth
        );
        let member = connect(Some(digest_credentials(b"cluster secret"))).await;
        member.set_data(node, b"ours", None).await.expect("the cluster writes");
        assert_eq!(member.get_data(node).await.unwrap().0, b"ours");
        let (acls, _) = member.get_acl(node).await.unwrap();
        let want = vec![zookeeper_client::Acl::new(
            zookeeper_client::Permission::ALL,
            zookeeper_client::AuthId::new("digest", &digest_id(b"cluster secret")),
        )];
        assert_eq!(acls, want, "exactly the cluster's digest identity, nothing for the world");

        // A rotation: a backend with a new secret that still holds the old
        // one reaches the old nodes, and creates new ones for the new
        // identity only.
        let rotating = ZkConfig::new(server.addr())
            .with_secret("the next cluster secret")
            .with_previous_secret("cluster secret");
        let mut b2 = ZkBackend::new(rotating);
        let (session2, _) = open(&mut b2, 3000).await;
        let mut r2 = Runner { session: session2, next_req: 1000, watches: Vec::new() };
        let child = "/regent-secret/new";
        let res = r2
            .run(
                &mut b2,
                vec![
                    ZkOp::GetData { path: node.into(), watch: false },
                    ZkOp::Create {
                        path: child.into(),
                        data: b"new".to_vec(),
                        mode: CreateMode::Persistent,
                    },
                ],
            )
            .await;
        assert!(matches!(&res[0], Ok(ZkReply::Data { data, .. }) if data == b"ours"), "{res:?}");
        assert_eq!(res[1], Ok(ZkReply::Created { path: child.into() }));
        let (acls, _) = connect(Some(digest_credentials(b"the next cluster secret")))
            .await
            .get_acl(child)
            .await
            .unwrap();
        assert_eq!(acls.len(), 1);
        assert_eq!(acls[0].id(), digest_id(b"the next cluster secret"));
        assert_eq!(member.get_data(child).await.unwrap_err(), zookeeper_client::Error::NoAuth);
        drop(b2);
        // Deleting checks the parent's ACL (the old identity's).
        member.delete(child, None).await.unwrap();
        member.delete(node, None).await.unwrap();
        member.delete(parent, None).await.unwrap();
    });
}

//! Tokens through the master node (docs/security.md,
//! docs/design.md#issue-44): a `StepDown` from a token without `operator`
//! is refused (the node hands it to the master's authorization instead of
//! stepping down), and the revocations in force are readable by the HTTP
//! side (`Query::Revocations`), in force as soon as a revocation is made.
#![cfg(feature = "testkit")]

mod node_harness;

use regent_core::ids::QueryId;
use regent_core::master::Status;
use regent_core::node::master::{Answer, Input, Output, Query};
use regent_core::protocol::Message;
use regent_core::token::{Capability, Claims, Principal, Revocations, TokenId};
use regent_core::ConnId;

fn claims(caps: &[Capability]) -> Claims {
    Claims {
        id: TokenId([5; 16]),
        name: "ci".into(),
        key_id: 1,
        capabilities: caps.iter().copied().collect(),
        tenant: None,
        frameworks: None,
        workers: None,
        issued_ms: 0,
        expires_ms: None,
    }
}

fn revocations(c: &mut node_harness::Cluster, query: u64) -> Revocations {
    let out = c.feed(0, Input::Query { query: QueryId(query), ask: Query::Revocations });
    out.into_iter()
        .find_map(|o| match o {
            Output::Answer { answer: Answer::Revocations(r), .. } => Some(r),
            _ => None,
        })
        .unwrap_or_else(|| panic!("answered in the same step"))
}

#[test]
fn a_token_step_down_is_authorized_and_revocations_are_readable() {
    let mut c = node_harness::Cluster::zookeeper(1);
    let _ = c.feed(0, Input::Start);
    assert_eq!(c.nodes[0].status(), Status::Alive);
    let conn = ConnId(30);
    let _ = c.feed(0, Input::Accepted { conn });
    let principal = Principal::Token(claims(&[Capability::Submit]));
    let _ = c.feed(0, Input::Authenticated { conn, principal });
    let out = c.feed(0, Input::Message { conn, msg: Message::StepDown { request: 4 } });
    assert!(
        out.iter().any(|o| matches!(o,
            Output::Send { conn: ConnId(30), msg: Message::RequestRefused { request: 4, reason, .. } }
                if reason.contains("lacks the `operator` capability needed to step the leader down"))),
        "{out:?}"
    );
    assert_eq!(c.nodes[0].status(), Status::Alive, "still leading");

    assert_eq!(revocations(&mut c, 1), Revocations::default());
    // The root (an HTTP command) revokes the token: in force at once.
    let revoke = Message::RevokeToken { request: 5, id: TokenId([5; 16]), expires_ms: None };
    let _ = c.feed(
        0,
        Input::Query {
            query: QueryId(2),
            ask: Query::Command {
                msg: revoke,
                principal: Box::new(regent_core::token::Principal::Root),
            },
        },
    );
    let r = revocations(&mut c, 3);
    assert_eq!(r.tokens.get(&TokenId([5; 16])), Some(&None));
}

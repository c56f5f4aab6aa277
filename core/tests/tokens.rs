//! The master's authorization of a token's holder on the wire
//! (docs/security.md, docs/design.md#issue-44): every message of a token's
//! connection is checked for its capability and its scope (a worker-id
//! prefix, a framework pattern and tenant), refused the way its kind is
//! refused with the reason, and changes nothing; an expired token is
//! refused and its connection closed; a connection that proved the secret
//! (no `Authenticated`) is the root and unchecked.

mod common;

use common::*;
use regent_core::ids::InstanceId;
use regent_core::master::{self, Master};
use regent_core::protocol::{Message, Role, Subscribe};
use regent_core::store::{StoreCommand, StoreEvent};
use regent_core::token::{Capability, Claims, Principal, TokenId};
use regent_core::{ConnId, Epoch, FrameworkId, Millis, WorkerId};

/// The leader's wall clock at its local time 0.
const WALL: u64 = 1_700_000_000_000;

fn claims(name: &str, caps: &[Capability]) -> Claims {
    Claims {
        id: TokenId([name.len() as u8; 16]),
        name: name.into(),
        key_id: 1,
        capabilities: caps.iter().copied().collect(),
        tenant: None,
        frameworks: None,
        workers: None,
        issued_ms: WALL - 1_000,
        expires_ms: None,
    }
}

/// A leader elected at local time 0 whose wall clock reads [`WALL`] then.
fn leader() -> Master {
    let mut m = master("m1");
    let out = m.handle(Millis(0), master::Event::Elected { floor: Epoch(1), clock: WALL });
    assert_eq!(out, vec![master::Action::Store(StoreCommand::LoadRecords)]);
    let out = m.handle(Millis(0), master::Event::Store(StoreEvent::Loaded { records: vec![] }));
    let _ = persist_all(&mut m, Millis(0), &out);
    m
}

/// Connects `conn` as a token's holder (`None`: one that proved the secret)
/// and says Hello; asserts the Hello is answered.
fn connect(m: &mut Master, conn: u64, token: Option<Claims>) {
    let conn = ConnId(conn);
    let _ = m.handle(Millis(0), master::Event::Connected { conn });
    if let Some(c) = token {
        let principal = Principal::Token(c);
        let out = m.handle(Millis(0), master::Event::Authenticated { conn, principal });
        assert!(out.is_empty(), "{out:?}");
    }
    let out = m.handle(Millis(0), master::Event::Message { conn, msg: hello(Role::Worker, "x") });
    assert!(matches!(&m_sends(&out)[..], [(_, Message::HelloReply(_))]), "{out:?}");
}

/// Sends `msg` on `conn` at `now`: every action, those of durable writes
/// included.
fn send(m: &mut Master, now: u64, conn: u64, msg: Message) -> Vec<master::Action> {
    let mut all = m.handle(Millis(now), master::Event::Message { conn: ConnId(conn), msg });
    let mut pending = all.clone();
    while !pending.is_empty() {
        pending = persist_all(m, Millis(now), &pending);
        all.extend(pending.iter().cloned());
    }
    all
}

fn refusal(out: &[master::Action]) -> String {
    for (_, msg) in m_sends(out) {
        match msg {
            Message::RequestRefused { reason, .. }
            | Message::RegisterRefused { reason, .. }
            | Message::SubscribeRefused { reason, .. } => return reason,
            _ => {}
        }
    }
    panic!("no refusal in {out:?}")
}

fn closed(out: &[master::Action]) -> bool {
    out.iter().any(|a| matches!(a, master::Action::Close { .. }))
}

fn writes(out: &[master::Action]) -> usize {
    out.iter().filter(|a| matches!(a, master::Action::Store(_))).count()
}

/// The state, as the root reads it.
fn state(m: &mut Master) -> regent_core::protocol::ClusterState {
    let conn = ConnId(99);
    let _ = m.handle(Millis(0), master::Event::Connected { conn });
    let out = m.handle(Millis(0), master::Event::Message { conn, msg: Message::StateRequest });
    match m_sends(&out).pop() {
        Some((_, Message::StateReply(s))) => *s,
        other => panic!("{other:?}"),
    }
}

fn subscribe_msg(framework: &str) -> Message {
    Message::Subscribe(Subscribe {
        framework: Some(FrameworkId(framework.into())),
        name: framework.into(),
        instance: InstanceId(framework.len() as u64),
        attempt: 1,
        failover_timeout: Millis(30_000),
        tenant: None,
    })
}

fn subscribed(out: &[master::Action]) -> bool {
    m_sends(out).iter().any(|(_, m)| matches!(m, Message::Subscribed { .. }))
}

#[test]
fn a_worker_token_registers_only_ids_with_its_prefix() {
    let mut m = leader();
    let rack1 = Claims { workers: Some("rack1-".into()), ..claims("rack1", &[Capability::Worker]) };
    connect(&mut m, 1, Some(rack1.clone()));
    let out = send(&mut m, 10, 1, Message::RegisterWorker(registration("rack1-w1", 1)));
    assert!(
        m_sends(&out).iter().any(|(_, msg)| matches!(msg, Message::Registered { .. })),
        "{out:?}"
    );
    connect(&mut m, 2, Some(rack1));
    let out = send(&mut m, 10, 2, Message::RegisterWorker(registration("w2", 2)));
    let reason = refusal(&out);
    assert!(
        reason.contains("may only register workers whose id starts with \"rack1-\""),
        "{reason}"
    );
    assert_eq!(writes(&out), 0, "a refused registration records nothing");
    assert!(!state(&mut m).workers.iter().any(|w| w.id == WorkerId::new("w2")));
    // A token without `worker` may not register at all, nor speak for one.
    connect(&mut m, 3, Some(claims("reader", &[Capability::Read])));
    let out = send(&mut m, 10, 3, Message::RegisterWorker(registration("rack1-w9", 3)));
    assert!(refusal(&out).contains("lacks the `worker` capability"));
    let out =
        send(&mut m, 10, 3, Message::WorkerHeartbeat { incarnation: regent_core::Incarnation(3) });
    assert!(refusal(&out).contains("lacks the `worker` capability needed to speak for a worker"));
    assert!(!closed(&out), "a worker hears why and retries on the same connection");
}

#[test]
fn a_framework_token_acts_only_on_frameworks_of_its_pattern_and_tenant() {
    let mut m = leader();
    // The root subscribes two frameworks.
    connect(&mut m, 1, None);
    assert!(subscribed(&send(&mut m, 0, 1, subscribe_msg("web-1"))));
    connect(&mut m, 2, None);
    assert!(subscribed(&send(&mut m, 0, 2, subscribe_msg("db-1"))));
    let web = Claims { frameworks: Some("web-*".into()), ..claims("web", &[Capability::Submit]) };
    connect(&mut m, 3, Some(web.clone()));
    let kill = |f: &str| Message::KillFramework { request: 5, framework: FrameworkId(f.into()) };
    let out = send(&mut m, 10, 3, kill("db-1"));
    let reason = refusal(&out);
    assert!(reason.contains("may not act on framework db-1"), "{reason}");
    assert!(reason.contains("frameworks \"web-*\""), "{reason}");
    assert_eq!(writes(&out), 0, "a refused kill changes nothing");
    assert!(state(&mut m).frameworks.iter().any(|f| f.id.0 == "db-1"));
    let out = send(&mut m, 10, 3, kill("web-1"));
    assert!(
        m_sends(&out).iter().any(|(_, msg)| matches!(msg, Message::RequestAccepted { .. })),
        "{out:?}"
    );
    // A SUBSCRIBE outside the pattern is refused and its connection closed.
    connect(&mut m, 4, Some(web.clone()));
    let out = send(&mut m, 10, 4, subscribe_msg("db-2"));
    assert!(refusal(&out).contains("may not act on framework db-2"));
    assert!(closed(&out) && !subscribed(&out));
    connect(&mut m, 5, Some(web));
    assert!(subscribed(&send(&mut m, 10, 5, subscribe_msg("web-2"))));
    // A token of tenant "a" may not act on `default`'s frameworks.
    let a = Claims { tenant: Some("a".into()), ..claims("tenant-a", &[Capability::Submit]) };
    connect(&mut m, 6, Some(a));
    let reason = refusal(&send(&mut m, 10, 6, kill("db-1")));
    assert!(
        reason.contains("of tenant \"default\"") && reason.contains("tenant \"a\""),
        "{reason}"
    );
}

#[test]
fn an_operator_command_needs_the_operator_capability() {
    let mut m = leader();
    connect(&mut m, 1, None);
    let _ = send(&mut m, 0, 1, Message::RegisterWorker(registration("w1", 1)));
    let cordon = || Message::CordonWorker { request: 7, worker: WorkerId::new("w1") };
    connect(&mut m, 2, Some(claims("ci", &[Capability::Submit, Capability::Read])));
    let out = send(&mut m, 10, 2, cordon());
    let reason = refusal(&out);
    assert_eq!(reason, "token \"ci\" lacks the `operator` capability needed to cordon a worker");
    assert_eq!(writes(&out), 0);
    assert!(!closed(&out), "a capability refusal keeps the connection");
    let out = send(&mut m, 10, 2, Message::StepDown { request: 8 });
    assert!(refusal(&out).contains("needed to step the leader down"));
    // The state is a `read` token's; the same token reads it.
    let out = send(&mut m, 10, 2, Message::StateRequest);
    assert!(matches!(&m_sends(&out)[..], [(_, Message::StateReply(_))]));
    connect(&mut m, 3, Some(claims("ops", &[Capability::Operator])));
    let out = send(&mut m, 10, 3, cordon());
    assert!(
        m_sends(&out).iter().any(|(_, msg)| matches!(msg, Message::RequestAccepted { .. })),
        "{out:?}"
    );
    // Without `read`, a state request closes the connection (it has no
    // refusal of its own).
    let out = send(&mut m, 10, 3, Message::StateRequest);
    assert!(closed(&out));
}

#[test]
fn an_expired_token_is_refused_and_its_connection_closed() {
    let mut m = leader();
    let c = Claims { expires_ms: Some(WALL + 1_000), ..claims("short", &[Capability::Operator]) };
    connect(&mut m, 1, Some(c));
    connect(&mut m, 2, None);
    let _ = send(&mut m, 0, 2, Message::RegisterWorker(registration("w1", 2)));
    let cordon = Message::CordonWorker { request: 1, worker: WorkerId::new("w1") };
    // Before its expiry by the leader's wall clock: accepted.
    let out = send(&mut m, 999, 1, cordon);
    assert!(m_sends(&out).iter().any(|(_, msg)| matches!(msg, Message::RequestAccepted { .. })));
    let uncordon = Message::UncordonWorker { request: 2, worker: WorkerId::new("w1") };
    let out = send(&mut m, 1_000, 1, uncordon);
    let reason = refusal(&out);
    assert!(reason.contains("token \"short\" expired at"), "{reason}");
    assert!(closed(&out), "an expired token's connection is closed");
    assert_eq!(writes(&out), 0);
}

/// Feeds every durable write of `out` to `store` (the records a new leader
/// would load).
fn keep_writes(store: &mut Vec<regent_core::store::Record>, out: &[master::Action]) {
    for a in out {
        if let master::Action::Store(StoreCommand::Persist { record, .. }) = a {
            store.retain(|r| r.key() != record.key());
            store.push(record.clone());
        }
    }
}

#[test]
fn a_revoked_token_is_refused_its_connections_closed_and_the_list_survives_a_failover() {
    let mut m = leader();
    let mut records = Vec::new();
    let ops = claims("ops", &[Capability::Operator]);
    let worker = Claims { id: TokenId([0x77; 16]), ..claims("rack", &[Capability::Worker]) };
    connect(&mut m, 1, Some(worker.clone()));
    let out = send(&mut m, 0, 1, Message::RegisterWorker(registration("rack-w1", 1)));
    assert!(m_sends(&out).iter().any(|(_, msg)| matches!(msg, Message::Registered { .. })));
    // Revoking needs `operator`.
    connect(&mut m, 2, Some(claims("ci", &[Capability::Submit])));
    let revoke = Message::RevokeToken { request: 3, id: worker.id, expires_ms: None };
    let out = send(&mut m, 10, 2, revoke.clone());
    assert!(refusal(&out).contains("lacks the `operator` capability needed to revoke a token"));
    assert_eq!(writes(&out), 0);
    // An operator revokes it: the worker's connection closes at once, the
    // revocation is accepted once durable.
    connect(&mut m, 3, Some(ops.clone()));
    let out = m.handle(Millis(20), master::Event::Message { conn: ConnId(3), msg: revoke });
    assert!(
        out.iter().any(|a| matches!(a, master::Action::Close { conn: ConnId(1), reason }
            if reason.contains("was revoked"))),
        "{out:?}"
    );
    assert!(m_sends(&out).iter().all(|(_, msg)| !matches!(msg, Message::RequestAccepted { .. })));
    keep_writes(&mut records, &out);
    let out = persist_all(&mut m, Millis(20), &out);
    assert!(m_sends(&out)
        .iter()
        .any(|(c, msg)| *c == ConnId(3)
            && matches!(msg, Message::RequestAccepted { request: 3, .. })));
    // A new connection with it is refused, naming why.
    connect(&mut m, 4, Some(worker.clone()));
    let out = send(&mut m, 30, 4, Message::RegisterWorker(registration("rack-w1", 4)));
    assert!(refusal(&out).contains("\"rack\" (77777777777777777777777777777777) was revoked"));
    assert!(!closed(&out), "the worker retries slowly on the same connection");
    // Retiring key id 1 refuses every token signed with it, the operator's
    // own included (its connection closes too).
    let retire = Message::RetireKeys { request: 4, through: 1 };
    let out = m.handle(Millis(40), master::Event::Message { conn: ConnId(3), msg: retire });
    assert!(out.iter().any(|a| matches!(a, master::Action::Close { conn: ConnId(3), .. })));
    keep_writes(&mut records, &out);
    // A new leader loads the list: both stay refused.
    let mut next = master("m2");
    let _ = next.handle(Millis(0), master::Event::Elected { floor: Epoch(2), clock: WALL });
    let out = next.handle(Millis(0), master::Event::Store(StoreEvent::Loaded { records }));
    let _ = persist_all(&mut next, Millis(0), &out);
    assert_eq!(next.revocations().retired_through, 1);
    assert!(next.revocations().tokens.contains_key(&worker.id));
    connect(&mut next, 5, Some(ops));
    let out = send(&mut next, 10, 5, Message::StateRequest);
    assert!(closed(&out));
    let key_two = Claims { key_id: 2, ..claims("ops2", &[Capability::Read]) };
    connect(&mut next, 6, Some(key_two));
    let out = send(&mut next, 10, 6, Message::StateRequest);
    assert!(matches!(&m_sends(&out)[..], [(_, Message::StateReply(_))]), "a newer key id holds");
}

/// The reply `conn`'s peer gets to `msg` (the last message sent to it).
fn reply(m: &mut Master, conn: u64, msg: Message) -> Message {
    let out = send(m, 10, conn, msg);
    let mut to_conn: Vec<Message> =
        m_sends(&out).into_iter().filter(|(c, _)| *c == ConnId(conn)).map(|(_, m)| m).collect();
    to_conn.pop().unwrap_or_else(|| panic!("no reply on {conn}: {out:?}"))
}

/// The frameworks of a `StateReply`, a `JobsReply` or a `TenantsReply`
/// (the tenants' names), sorted.
fn names(msg: &Message) -> Vec<String> {
    let mut v: Vec<String> = match msg {
        Message::StateReply(s) => s.frameworks.iter().map(|f| f.id.to_string()).collect(),
        Message::JobsReply { jobs, .. } => jobs.iter().map(|j| j.job.to_string()).collect(),
        Message::TenantsReply { tenants, .. } => {
            tenants.iter().map(|t| t.tenant.name.clone()).collect()
        }
        other => panic!("not a read reply: {other:?}"),
    };
    v.sort();
    v
}

#[test]
fn a_tenants_read_token_reads_only_its_tenant_over_the_wire() {
    let mut m = leader();
    // The root registers a worker and subscribes a framework of tenant a
    // and one of tenant b.
    connect(&mut m, 1, None);
    let out = send(&mut m, 0, 1, Message::RegisterWorker(registration("w1", 1)));
    assert!(m_sends(&out).iter().any(|(_, msg)| matches!(msg, Message::Registered { .. })));
    for (conn, fw, tenant) in [(2, "a-1", "a"), (3, "b-1", "b")] {
        connect(&mut m, conn, None);
        let mut sub = subscribe_msg(fw);
        if let Message::Subscribe(s) = &mut sub {
            s.tenant = Some(tenant.into());
        }
        assert!(subscribed(&send(&mut m, 0, conn, sub)));
    }
    let all_jobs = || Message::JobsRequest { request: 7, job: None };
    let tenants = || Message::TenantsRequest { request: 8 };
    // The root reads everything.
    connect(&mut m, 4, None);
    let root_state = reply(&mut m, 4, Message::StateRequest);
    assert_eq!(names(&root_state), ["a-1", "b-1"]);
    assert!(matches!(&root_state, Message::StateReply(s) if s.workers.len() == 1));
    assert_eq!(names(&reply(&mut m, 4, all_jobs())), ["a-1", "b-1"]);
    assert_eq!(names(&reply(&mut m, 4, tenants())), ["a", "b"]);
    // A read token of tenant a: its framework, no worker, its tenant.
    let a = Claims { tenant: Some("a".into()), ..claims("read-a", &[Capability::Read]) };
    connect(&mut m, 5, Some(a));
    let state_a = reply(&mut m, 5, Message::StateRequest);
    assert_eq!(names(&state_a), ["a-1"]);
    assert!(matches!(&state_a, Message::StateReply(s) if s.workers.is_empty()), "{state_a:?}");
    assert_eq!(names(&reply(&mut m, 5, all_jobs())), ["a-1"]);
    assert_eq!(names(&reply(&mut m, 5, tenants())), ["a"]);
    let one = |f: &str| Message::JobsRequest { request: 9, job: Some(FrameworkId(f.into())) };
    assert_eq!(names(&reply(&mut m, 5, one("a-1"))), ["a-1"]);
    match reply(&mut m, 5, one("b-1")) {
        Message::RequestRefused { reason, .. } => {
            assert!(reason.contains("may not act on framework b-1"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // A pattern without a tenant: its frameworks, no tenant's totals.
    let b = Claims { frameworks: Some("b-*".into()), ..claims("read-b", &[Capability::Read]) };
    connect(&mut m, 6, Some(b));
    assert_eq!(names(&reply(&mut m, 6, Message::StateRequest)), ["b-1"]);
    assert_eq!(names(&reply(&mut m, 6, all_jobs())), ["b-1"]);
    assert!(names(&reply(&mut m, 6, tenants())).is_empty());
    // The root's view is untouched by the scoped reads (the cache is shared).
    assert_eq!(names(&reply(&mut m, 4, Message::StateRequest)), ["a-1", "b-1"]);
}

fn audits(out: &[master::Action]) -> Vec<regent_core::audit::AuditRecord> {
    out.iter()
        .filter_map(|a| match a {
            master::Action::Audit(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

/// The write ids `out` asks to persist.
fn persists(out: &[master::Action]) -> Vec<regent_core::store::WriteId> {
    out.iter()
        .filter_map(|a| match a {
            master::Action::Store(StoreCommand::Persist { write, .. }) => Some(*write),
            _ => None,
        })
        .collect()
}

#[test]
fn each_wire_answer_is_audited_for_its_own_request() {
    let mut m = leader();
    connect(&mut m, 1, None);
    let _ = send(&mut m, 0, 1, Message::RegisterWorker(registration("w1", 1)));
    connect(&mut m, 2, None);
    let _ = send(&mut m, 0, 2, Message::RegisterWorker(registration("w2", 2)));
    let ops = claims("ops", &[Capability::Operator]);
    connect(&mut m, 3, Some(ops));
    // Two cordons on one connection, answered once durable: the second's
    // write lands first, and each answer is audited with its own target.
    let cordon = |request, w: &str| Message::CordonWorker { request, worker: WorkerId::new(w) };
    let mut writes = Vec::new();
    for (request, w) in [(11, "w1"), (12, "w2")] {
        let out = m
            .handle(Millis(5), master::Event::Message { conn: ConnId(3), msg: cordon(request, w) });
        assert!(audits(&out).is_empty(), "not answered yet: {out:?}");
        writes.push(persists(&out));
    }
    let mut order = Vec::new();
    for write in writes.iter().rev().flatten() {
        let out =
            m.handle(Millis(6), master::Event::Store(StoreEvent::Persisted { write: *write }));
        for r in audits(&out) {
            order.push((r.target, r.token, r.outcome));
        }
    }
    use regent_core::audit::Outcome::{Accepted, Refused};
    assert_eq!(
        order,
        [("w2".into(), "ops".into(), Accepted), ("w1".into(), "ops".into(), Accepted)]
    );
    // A change refused at once is audited at once, with its reason: by
    // the master, or by the token's check.
    connect(&mut m, 4, None);
    let kill = |request| Message::KillFramework { request, framework: FrameworkId("nope".into()) };
    let out = m.handle(Millis(7), master::Event::Message { conn: ConnId(4), msg: kill(13) });
    let got = audits(&out);
    assert_eq!(got.len(), 1, "{out:?}");
    assert_eq!((got[0].outcome, got[0].reason.as_deref()), (Refused, Some("no framework nope")));
    assert_eq!(got[0].token, "root");
    let out = m.handle(Millis(7), master::Event::Message { conn: ConnId(3), msg: kill(14) });
    let got = audits(&out);
    assert_eq!(got.len(), 1, "{out:?}");
    assert_eq!((got[0].token.as_str(), got[0].action.as_str()), ("ops", "kill-framework"));
    assert!(got[0].reason.as_deref().unwrap_or("").contains("lacks the `submit`"), "{got:?}");
    // A read is not audited.
    let out =
        m.handle(Millis(7), master::Event::Message { conn: ConnId(1), msg: Message::StateRequest });
    assert!(audits(&out).is_empty());
}

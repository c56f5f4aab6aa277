//! The principal of a local command (the HTTP API) reaches the master,
//! which checks the capability the message needs and the framework's scope
//! before acting (docs/design.md#issue-44): a refusal is a
//! `RequestRefused` starting `forbidden: ` naming the capability missing or
//! the scope passed, and nothing is written; what is allowed is handled as
//! for the root.

mod common;

use common::*;
use regent_core::api::JobSubmission;
use regent_core::audit::{AuditRecord, Outcome};
use regent_core::ids::QueryId;
use regent_core::master::{self, Master, FORBIDDEN};
use regent_core::protocol::{GroupSpec, Message};
use regent_core::token::{Capability, Claims, Principal, TokenId};
use regent_core::{FrameworkId, Millis, WorkerId};

fn token(caps: &[Capability], tenant: Option<&str>, frameworks: Option<&str>) -> Principal {
    Principal::Token(Claims {
        id: TokenId([9; 16]),
        name: "team-a".into(),
        key_id: 1,
        capabilities: caps.iter().copied().collect(),
        tenant: tenant.map(Into::into),
        frameworks: frameworks.map(Into::into),
        workers: None,
        issued_ms: 0,
        expires_ms: None,
    })
}

fn submission(id: &str) -> JobSubmission {
    JobSubmission {
        job: FrameworkId::new(id),
        name: id.into(),
        groups: vec![GroupSpec {
            group: "g".into(),
            slots: 1,
            command: vec!["/bin/sleep".into(), "1000".into()],
            env: vec![],
            cores: 1,
            memory_mb: 1,
            policy: Default::default(),
            launch: Default::default(),
        }],
        key: None,
        expect_version: None,
        max_parallel: 1,
        tenant: None,
    }
}

/// An elected master "a" with no workers.
fn leader() -> Master {
    let mut m = master("a");
    let _ = elect(&mut m, Millis(0), 1);
    m
}

/// Asks `msg` as `principal`: the actions of that step, and every answer
/// once its writes are durable.
fn ask(
    m: &mut Master,
    query: u64,
    msg: Message,
    principal: Principal,
) -> (Vec<master::Action>, Vec<Message>) {
    let t = Millis(10);
    let out = m.handle(
        t,
        master::Event::Command { query: QueryId(query), msg, principal: Box::new(principal) },
    );
    let mut all = out.clone();
    let mut pending = out;
    while !pending.is_empty() {
        let next = persist_all(m, t, &pending);
        all.extend(next.clone());
        pending = next;
    }
    let answers = all
        .iter()
        .filter_map(|a| match a {
            master::Action::Answer { query: q, msg } if q.0 == query => Some(msg.clone()),
            _ => None,
        })
        .collect();
    (all, answers)
}

fn refused(answers: &[Message]) -> String {
    match answers {
        [Message::RequestRefused { reason, .. }] => reason.clone(),
        other => panic!("expected one refusal, got {other:?}"),
    }
}

fn writes(actions: &[master::Action]) -> usize {
    actions.iter().filter(|a| matches!(a, master::Action::Store(_))).count()
}

#[test]
fn a_command_without_its_capability_is_refused_naming_it_and_nothing_is_written() {
    let mut m = leader();
    let reader = token(&[Capability::Read], None, None);
    let (out, answers) =
        ask(&mut m, 1, Message::SubmitJob { request: 4, job: submission("a-1") }, reader.clone());
    let reason = refused(&answers);
    assert!(reason.starts_with(FORBIDDEN) && reason.contains("`submit`"), "{reason}");
    assert_eq!(writes(&out), 0, "nothing is written: {out:?}");
    let cordon = Message::CordonWorker { request: 5, worker: WorkerId::new("w1") };
    let reason = refused(&ask(&mut m, 2, cordon, reader.clone()).1);
    assert!(reason.contains("`operator`"), "{reason}");
    // A read it may make is answered.
    let (_, answers) = ask(&mut m, 3, Message::JobsRequest { request: 6, job: None }, reader);
    assert!(matches!(answers.as_slice(), [Message::JobsReply { .. }]), "{answers:?}");
}

#[test]
fn a_framework_outside_the_tokens_scope_is_refused_naming_the_scope() {
    let mut m = leader();
    // The root creates b-1; a token for a-* may not delete it.
    let (_, answers) =
        ask(&mut m, 1, Message::SubmitJob { request: 1, job: submission("b-1") }, Principal::Root);
    assert!(matches!(answers.as_slice(), [Message::JobAccepted { .. }]), "{answers:?}");
    let a = token(&[Capability::Submit, Capability::Read], None, Some("a-*"));
    let delete = Message::DeleteJob { request: 2, job: FrameworkId::new("b-1") };
    let (out, answers) = ask(&mut m, 2, delete, a.clone());
    let reason = refused(&answers);
    assert!(reason.starts_with(FORBIDDEN) && reason.contains("\"a-*\""), "{reason}");
    assert!(reason.contains("b-1"), "{reason}");
    assert_eq!(writes(&out), 0, "{out:?}");
    // Its own framework it may create and delete.
    let (_, answers) =
        ask(&mut m, 3, Message::SubmitJob { request: 3, job: submission("a-1") }, a.clone());
    assert!(matches!(answers.as_slice(), [Message::JobAccepted { .. }]), "{answers:?}");
    let delete = Message::DeleteJob { request: 4, job: FrameworkId::new("a-1") };
    let (_, answers) = ask(&mut m, 4, delete, a);
    assert!(matches!(answers.as_slice(), [Message::RequestAccepted { .. }]), "{answers:?}");
    // A token of another tenant may not touch a framework of `default`.
    let other = token(&[Capability::Submit], Some("t2"), None);
    let kill = Message::KillFramework { request: 5, framework: FrameworkId::new("b-1") };
    let reason = refused(&ask(&mut m, 5, kill, other).1);
    assert!(reason.contains("tenant \"default\"") && reason.contains("\"t2\""), "{reason}");
}

#[test]
fn a_step_down_without_operator_is_refused_by_the_master() {
    let mut m = leader();
    let submit = token(&[Capability::Submit], None, None);
    let reason = refused(&ask(&mut m, 1, Message::StepDown { request: 9 }, submit).1);
    assert!(reason.contains("`operator`") && reason.contains("step the leader down"), "{reason}");
}

fn audits(actions: &[master::Action]) -> Vec<AuditRecord> {
    actions
        .iter()
        .filter_map(|a| match a {
            master::Action::Audit(r) => Some(r.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn every_change_answered_is_audited_with_the_tokens_name_and_outcome() {
    let mut m = leader();
    let a = token(&[Capability::Submit], Some("default"), Some("a-*"));
    let (out, _) =
        ask(&mut m, 1, Message::SubmitJob { request: 1, job: submission("a-1") }, a.clone());
    let got = audits(&out);
    assert_eq!(got.len(), 1, "{out:?}");
    let r = &got[0];
    assert_eq!(
        (r.token.as_str(), r.tenant.as_deref(), r.action.as_str(), r.target.as_str()),
        ("team-a", Some("default"), "submit-job", "a-1")
    );
    assert_eq!((r.outcome, r.reason.as_deref()), (Outcome::Accepted, None));
    // A refused change is audited with its reason; a read is not audited.
    let delete = Message::DeleteJob { request: 2, job: FrameworkId::new("b-9") };
    let got = audits(&ask(&mut m, 2, delete, a.clone()).0);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].outcome, Outcome::Refused);
    assert!(got[0].reason.as_deref().unwrap_or("").starts_with(FORBIDDEN), "{got:?}");
    let read = Message::JobsRequest { request: 3, job: None };
    assert!(audits(&ask(&mut m, 3, read, Principal::Root).0).is_empty());
    // The root's changes name the root.
    let (out, _) = ask(
        &mut m,
        4,
        Message::DeleteJob { request: 4, job: FrameworkId::new("a-1") },
        Principal::Root,
    );
    let got = audits(&out);
    assert_eq!((got.len(), got[0].token.as_str()), (1, "root"), "{out:?}");
}

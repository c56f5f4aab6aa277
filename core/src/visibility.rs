//! What a principal may read (docs/security.md, docs/design.md#issue-44):
//! the pure decisions behind tenant-scoped reads, on the HTTP face and in
//! the master's replies on the wire protocol alike.
//!
//! * A principal with `read` and no scope (the root, or a token with
//!   neither a tenant nor a framework pattern) reads everything.
//! * A token with a tenant or a framework pattern reads only its
//!   frameworks: their entries, their executors, their finished history
//!   and the events about them. Workers are the cluster's, not a
//!   tenant's: such a token sees none (their ids, hosts and load would
//!   tell one tenant about the others), nor the events about them.
//! * Tenants' use: a token of a tenant reads its own tenant's entry only;
//!   a token with a framework pattern and no tenant reads none (a tenant's
//!   totals count frameworks outside its pattern).
//! * Without `read`, nothing (the HTTP face and the master refuse the
//!   request first).
//!
//! Which tenant a framework belongs to is the state view's answer
//! ([`FrameworkTenants`], a map built once per view; [`DEFAULT_TENANT`] for
//! a framework that names none).
//!
//! Tests: the unit tests below.

use crate::api::JobStatus;
use crate::events::ClusterEvent;
use crate::ids::FrameworkId;
use crate::protocol::tenants::TenantView;
use crate::protocol::ClusterState;
use crate::token::{Capability, Principal};
use std::collections::HashMap;

/// The tenant of a framework with no tenant named.
pub const DEFAULT_TENANT: &str = "default";

/// The tenant framework `fid` belongs to as the state view tells it
/// ([`DEFAULT_TENANT`] for one that names none, or is not in the view).
/// One linear search: for many lookups in one view (a stream of events),
/// build a [`FrameworkTenants`] once.
pub fn framework_tenant<'a>(state: &'a ClusterState, fid: &FrameworkId) -> &'a str {
    state
        .frameworks
        .iter()
        .find(|f| &f.id == fid)
        .and_then(|f| f.tenant.as_deref())
        .unwrap_or(DEFAULT_TENANT)
}

/// Which tenant each framework of a state view belongs to, looked up in
/// O(1) (what [`sees_event`] asks once per event). Only frameworks that
/// name a tenant are kept; any other is [`DEFAULT_TENANT`]'s.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameworkTenants(HashMap<FrameworkId, String>);

impl FrameworkTenants {
    /// The tenants of `state`'s frameworks.
    pub fn of(state: &ClusterState) -> FrameworkTenants {
        FrameworkTenants(
            state
                .frameworks
                .iter()
                .filter_map(|f| f.tenant.as_ref().map(|t| (f.id.clone(), t.clone())))
                .collect(),
        )
    }

    /// The tenant of `fid` ([`DEFAULT_TENANT`] when it names none, or the
    /// view does not know it).
    pub fn tenant(&self, fid: &FrameworkId) -> &str {
        self.0.get(fid).map_or(DEFAULT_TENANT, String::as_str)
    }
}

/// Whether `p` reads everything: `read` and no tenant or framework scope.
pub fn sees_all(p: &Principal) -> bool {
    match p {
        Principal::Root => true,
        Principal::Token(c) => {
            c.has(Capability::Read) && c.tenant.is_none() && c.frameworks.is_none()
        }
    }
}

/// Whether `p` may read framework `fid` of `tenant`.
pub fn sees_framework(p: &Principal, fid: &FrameworkId, tenant: &str) -> bool {
    match p {
        Principal::Root => true,
        Principal::Token(c) => c.has(Capability::Read) && c.covers_framework(fid.as_str(), tenant),
    }
}

/// The tenant of job `job` as its status tells it ([`DEFAULT_TENANT`]
/// when it names none).
pub fn job_tenant(job: &JobStatus) -> &str {
    job.tenant.as_deref().unwrap_or(DEFAULT_TENANT)
}

/// The jobs of `jobs` that `p` may read (`GET /v1/jobs`).
pub fn jobs_visible_to(p: &Principal, mut jobs: Vec<JobStatus>) -> Vec<JobStatus> {
    if !sees_all(p) {
        jobs.retain(|j| sees_framework(p, &j.job, job_tenant(j)));
    }
    jobs
}

/// The tenants of `tenants` that `p` may read (`TenantsReply`, `GET
/// /v1/tenants`): every one for [`sees_all`]; its own tenant's for a token
/// of a tenant; none for a token with only a framework pattern (a tenant's
/// use sums frameworks outside the pattern), nor without `read`.
pub fn tenants_visible_to(p: &Principal, mut tenants: Vec<TenantView>) -> Vec<TenantView> {
    if !sees_all(p) {
        let own = match p {
            Principal::Token(c) if c.has(Capability::Read) => c.tenant.as_deref(),
            _ => None,
        };
        tenants.retain(|t| Some(t.tenant.name.as_str()) == own);
    }
    tenants
}

impl ClusterState {
    /// The part of this view `p` may read: everything for [`sees_all`];
    /// otherwise its frameworks, their executors and history, and no
    /// worker (the master's own fields and counters stay).
    pub fn visible_to(&self, p: &Principal) -> ClusterState {
        if sees_all(p) {
            return self.clone();
        }
        // The frameworks it may read, decided once each (a finished one by
        // its history entry's tenant: `default`).
        let tenants = FrameworkTenants::of(self);
        let sees = |fid: &FrameworkId| sees_framework(p, fid, tenants.tenant(fid));
        ClusterState {
            master: self.master.clone(),
            status: self.status,
            epoch: self.epoch,
            leader: self.leader.clone(),
            workers: Vec::new(),
            frameworks: self.frameworks.iter().filter(|f| sees(&f.id)).cloned().collect(),
            executors: self.executors.iter().filter(|e| sees(&e.framework)).cloned().collect(),
            messages: self.messages,
            rejected: self.rejected,
            history: self.history.iter().filter(|f| sees(&f.id)).cloned().collect(),
            history_omitted: self.history_omitted,
        }
    }
}

/// The framework executor `executor` belongs to in `state` (a live one,
/// or one in a finished framework's history), if the view knows it.
pub fn executor_framework<'a>(
    state: &'a ClusterState,
    executor: &crate::ids::ExecutorId,
) -> Option<&'a FrameworkId> {
    state.executors.iter().find(|e| e.id == *executor).map(|e| &e.framework).or_else(|| {
        state
            .history
            .iter()
            .find(|f| f.slots.iter().any(|s| s.executor.as_ref() == Some(executor)))
            .map(|f| &f.id)
    })
}

/// Whether `p` may read the output of `executor` (with `logs`, checked
/// apart): everything for a principal without a scope; else only an
/// executor of one of its frameworks that `state` knows.
pub fn sees_logs_of(
    p: &Principal,
    state: &ClusterState,
    executor: &crate::ids::ExecutorId,
) -> bool {
    let unscoped = match p {
        Principal::Root => true,
        Principal::Token(c) => c.tenant.is_none() && c.frameworks.is_none(),
    };
    unscoped
        || executor_framework(state, executor).is_some_and(|fid| match p {
            Principal::Root => true,
            Principal::Token(c) => c.covers_framework(fid.as_str(), framework_tenant(state, fid)),
        })
}

/// Whether `p` may see `event`, with `tenants` the frameworks' tenants of
/// the view it is read in ([`FrameworkTenants::of`]): the master's own
/// events (leader, status) always; a worker's with [`sees_all`]; a
/// framework's, an executor's or a finished one's when it may read the
/// framework.
pub fn sees_event(p: &Principal, tenants: &FrameworkTenants, event: &ClusterEvent) -> bool {
    if sees_all(p) {
        return true;
    }
    match event {
        ClusterEvent::Leader { .. }
        | ClusterEvent::Status { .. }
        | ClusterEvent::LeaderLost { .. } => p.has(Capability::Read),
        ClusterEvent::Worker { .. } => false,
        ClusterEvent::Framework { framework, .. }
        | ClusterEvent::Executor { framework, .. }
        | ClusterEvent::Finished { framework, .. }
        | ClusterEvent::Waiting { framework, .. }
        | ClusterEvent::Deployment { framework, .. }
        | ClusterEvent::ExecutorHealth { framework, .. } => {
            sees_framework(p, framework, tenants.tenant(framework))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ExecutorId, MasterId, WorkerId};
    use crate::protocol::{ExecutorState, ExecutorView, FrameworkView};
    use crate::states::{FrameworkState, MasterStatus};
    use crate::token::{Claims, TokenId};

    fn token(caps: &[Capability], tenant: Option<&str>, frameworks: Option<&str>) -> Principal {
        Principal::Token(Claims {
            id: TokenId([1; 16]),
            name: "t".into(),
            key_id: 1,
            capabilities: caps.iter().copied().collect(),
            tenant: tenant.map(Into::into),
            frameworks: frameworks.map(Into::into),
            workers: None,
            issued_ms: 0,
            expires_ms: None,
        })
    }

    fn framework(id: &str) -> FrameworkView {
        FrameworkView {
            tenant: None,
            id: FrameworkId::new(id),
            name: id.into(),
            state: FrameworkState::Active,
            connected: true,
            groups: vec![],
        }
    }

    fn executor(id: &str, fw: &str) -> ExecutorView {
        ExecutorView {
            id: ExecutorId::new(id),
            framework: FrameworkId::new(fw),
            worker: Some(WorkerId::new("w1")),
            state: ExecutorState::Running,
            ports: vec![],
            resources: vec![],
            usage: None,
            preempted_by: None,
            health: None,
        }
    }

    /// Frameworks a-1 and b-1 with an executor each; the worker list is
    /// taken from a view of no one (only its emptiness is checked).
    fn state() -> ClusterState {
        ClusterState {
            master: MasterId::new("m1"),
            status: MasterStatus::Alive,
            epoch: crate::Epoch(1),
            leader: None,
            workers: vec![],
            frameworks: vec![framework("a-1"), framework("b-1")],
            executors: vec![executor("e1", "a-1"), executor("e2", "b-1")],
            messages: 0,
            rejected: 0,
            history: vec![],
            history_omitted: 0,
        }
    }

    #[test]
    fn a_scoped_token_sees_only_its_frameworks_and_no_worker() {
        let s = state();
        assert_eq!(s.visible_to(&Principal::Root), s);
        let everything = token(&[Capability::Read], None, None);
        assert_eq!(s.visible_to(&everything), s);
        let a = token(&[Capability::Read], None, Some("a-*"));
        let v = s.visible_to(&a);
        assert!(v.workers.is_empty());
        let ids: Vec<&str> = v.frameworks.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["a-1"]);
        let ids: Vec<&str> = v.executors.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["e1"]);
        // A tenant that owns nothing (every framework is `default` here).
        let t2 = token(&[Capability::Read], Some("t2"), None);
        assert!(s.visible_to(&t2).frameworks.is_empty());
        let own = token(&[Capability::Read], Some(DEFAULT_TENANT), None);
        assert_eq!(s.visible_to(&own).frameworks.len(), 2);
        // Without `read`, nothing.
        let logs = token(&[Capability::Logs], None, Some("a-*"));
        assert!(s.visible_to(&logs).frameworks.is_empty());
    }

    #[test]
    fn a_scoped_token_reads_the_output_of_its_frameworks_executors_only() {
        let s = state();
        let a = token(&[Capability::Logs], None, Some("a-*"));
        assert!(sees_logs_of(&a, &s, &ExecutorId::new("e1")));
        assert!(!sees_logs_of(&a, &s, &ExecutorId::new("e2")));
        assert!(!sees_logs_of(&a, &s, &ExecutorId::new("unknown")));
        let all = token(&[Capability::Logs], None, None);
        assert!(sees_logs_of(&all, &s, &ExecutorId::new("e2")));
    }

    #[test]
    fn events_about_other_frameworks_and_workers_are_filtered_out() {
        let s = FrameworkTenants::of(&state());
        let a = token(&[Capability::Read], None, Some("a-*"));
        let about = |fw: &str| ClusterEvent::Finished {
            framework: FrameworkId::new(fw),
            name: fw.into(),
            outcome: "FINISHED".into(),
            finished_at_ms: 0,
        };
        assert!(sees_event(&a, &s, &about("a-1")));
        assert!(!sees_event(&a, &s, &about("b-1")));
        assert!(sees_event(&Principal::Root, &s, &about("b-1")));
        let lost =
            ClusterEvent::LeaderLost { leader: MasterId::new("m1"), epoch: 1, reason: "x".into() };
        assert!(sees_event(&a, &s, &lost));
    }

    #[test]
    fn a_view_maps_its_frameworks_to_their_tenants() {
        let mut s = state();
        s.frameworks[1].tenant = Some("b".into());
        let t = FrameworkTenants::of(&s);
        assert_eq!(t.tenant(&FrameworkId::new("a-1")), DEFAULT_TENANT);
        assert_eq!(t.tenant(&FrameworkId::new("b-1")), "b");
        assert_eq!(t.tenant(&FrameworkId::new("gone")), DEFAULT_TENANT);
        let b = token(&[Capability::Read], Some("b"), None);
        let about = |fw: &str| ClusterEvent::Finished {
            framework: FrameworkId::new(fw),
            name: fw.into(),
            outcome: "FINISHED".into(),
            finished_at_ms: 0,
        };
        assert!(sees_event(&b, &t, &about("b-1")));
        assert!(!sees_event(&b, &t, &about("a-1")));
        let ids: Vec<String> =
            s.visible_to(&b).frameworks.iter().map(|f| f.id.to_string()).collect();
        assert_eq!(ids, ["b-1"]);
    }

    #[test]
    fn a_token_reads_its_own_tenant_only() {
        use crate::protocol::tenants::{Held, Tenant, TenantView};
        let view = |name: &str| TenantView {
            tenant: Tenant::new(name),
            set: true,
            held: Held::default(),
            dominant_share_ppm: 0,
            frameworks: 1,
        };
        let all = || vec![view("a"), view("b"), view(DEFAULT_TENANT)];
        let names =
            |v: Vec<TenantView>| -> Vec<String> { v.into_iter().map(|t| t.tenant.name).collect() };
        assert_eq!(names(tenants_visible_to(&Principal::Root, all())).len(), 3);
        let unscoped = token(&[Capability::Read], None, None);
        assert_eq!(names(tenants_visible_to(&unscoped, all())).len(), 3);
        let a = token(&[Capability::Read], Some("a"), Some("web-*"));
        assert_eq!(names(tenants_visible_to(&a, all())), ["a"]);
        let pattern = token(&[Capability::Read], None, Some("a-*"));
        assert!(tenants_visible_to(&pattern, all()).is_empty());
        let no_read = token(&[Capability::Submit], Some("a"), None);
        assert!(tenants_visible_to(&no_read, all()).is_empty());
    }
}

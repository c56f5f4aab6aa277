//! Tenants at the leader (docs/tenants.md, docs/design.md#issue-44): the
//! tenants an operator set (durable, one record each, loaded on election)
//! and the answers about them.
//!
//! * `SetTenant` creates or replaces a tenant; it is answered
//!   `RequestAccepted` only once its record is durable (durable before
//!   acknowledged).
//! * `TenantsRequest` lists every tenant set, and every tenant frameworks
//!   name without one set (the implicit `default` among them), with what
//!   its live executors hold and its dominant share.
//!
//! Tests: core/tests/tenants.rs.

use super::fairness::Capacity;
use super::{Action, AfterWrite, Master, Origin};
use crate::protocol::tenants::{check_tenant_name, Held, Tenant, TenantView};
use crate::protocol::tenants::{DEFAULT_TENANT, MAX_TENANTS};
use crate::protocol::Message;
use crate::store::{Record, StoreCommand};
use std::collections::BTreeMap;

/// The tenants an operator set, by name.
#[derive(Debug, Default)]
pub(super) struct Tenants {
    set: BTreeMap<String, Tenant>,
}

impl Tenants {
    /// Tenant `name`, if an operator set it.
    pub(super) fn get(&self, name: &str) -> Option<&Tenant> {
        self.set.get(name)
    }

    /// Every tenant set, by name.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Tenant> {
        self.set.values()
    }

    /// Keeps `tenant` (set now, or recovered from its record).
    pub(super) fn insert(&mut self, tenant: Tenant) {
        self.set.insert(tenant.name.clone(), tenant);
    }
}

impl Master {
    /// What the ALIVE workers offer in all (kept by the worker registry
    /// as workers come, go and change state).
    pub(super) fn capacity(&self) -> Capacity {
        let (cores, memory_mb) = self.workers.alive_capacity();
        Capacity { cores, memory_mb, resources: self.workers.alive_named().clone() }
    }

    /// `SetTenant` from `asker`: checked, written, accepted once durable.
    pub(super) fn set_tenant(
        &mut self,
        asker: Origin,
        request: u64,
        tenant: Tenant,
        out: &mut Vec<Action>,
    ) {
        if let Err(reason) = tenant.check() {
            out.push(self.refuse_request(asker, request, reason.0));
            return;
        }
        if self.tenants.get(&tenant.name).is_none() && self.tenants.set.len() >= MAX_TENANTS {
            let reason = format!(
                "tenant {} refused: the cluster has {MAX_TENANTS} tenants, the most it may have \
                 (MAX_TENANTS)",
                tenant.name
            );
            out.push(self.refuse_request(asker, request, reason));
            return;
        }
        self.tenants.insert(tenant.clone());
        let write = self.next_write();
        self.after_write.insert(write, vec![AfterWrite::AcceptTo { to: asker, request }]);
        out.push(Action::Store(StoreCommand::Persist { write, record: Record::Tenant(tenant) }));
        // A limit raised or a weight changed may let waiting slots go.
        self.place(out);
    }

    /// The answer to `TenantsRequest`: every tenant set, and every tenant
    /// a framework names, by name.
    pub(super) fn tenants_reply(&self, request: u64) -> Message {
        let capacity = self.capacity();
        let mut views: BTreeMap<String, TenantView> = self
            .tenants
            .iter()
            .map(|t| {
                let view = TenantView {
                    tenant: t.clone(),
                    set: true,
                    held: Held::default(),
                    dominant_share_ppm: 0,
                    frameworks: 0,
                };
                (t.name.clone(), view)
            })
            .collect();
        for fid in self.frameworks.keys() {
            let name = self.framework_tenant(fid);
            let view = views.entry(name.to_owned()).or_insert_with(|| TenantView {
                tenant: Tenant::new(name),
                set: false,
                held: Held::default(),
                dominant_share_ppm: 0,
                frameworks: 0,
            });
            view.frameworks += 1;
        }
        for view in views.values_mut() {
            view.held = self.tenant_held(&view.tenant.name);
            view.dominant_share_ppm = capacity.dominant_share_ppm(&view.held);
        }
        Message::TenantsReply { epoch: self.epoch, request, tenants: views.into_values().collect() }
    }

    /// Tenant `name`, if an operator set it.
    pub fn tenant(&self, name: &str) -> Option<&Tenant> {
        self.tenants.get(name)
    }

    /// How many executors this leadership has stopped by preemption
    /// (`master/preempt.rs`): a read-only count for the simulator's
    /// invariants and for metrics; a new leadership starts at 0.
    pub fn preemptions_started(&self) -> u64 {
        self.preemptions.total
    }

    /// By tenant, what the live executors the leader is already stopping
    /// hold (cores, memory, named resources) (a preemption's earlier victims, kills,
    /// drains, a rollout's stops): preemption takes them off what a tenant
    /// holds, so it judges a tenant's guarantee and share by what the tenant
    /// keeps once they end (never below its guarantee; `--api-jobs
    /// --preemption`: sim seed 611 (docs/design.md#simulator-seeds)).
    pub(super) fn tenants_stopping(&self) -> BTreeMap<String, crate::preemption::Amounts> {
        let mut stopping: BTreeMap<String, crate::preemption::Amounts> = BTreeMap::new();
        for e in self.executors.iter() {
            if e.state.is_terminal() || !(e.operator_stop || e.kill_requested) {
                continue;
            }
            let s = stopping.entry(self.framework_tenant(&e.framework).to_owned()).or_default();
            *s = s.plus(&crate::preemption::Amounts::of_held(&e.held()));
        }
        stopping
    }

    /// The tenant framework `fid` belongs to: `default` when it names none
    /// (or is not here).
    pub fn framework_tenant(&self, fid: &crate::ids::FrameworkId) -> &str {
        self.frameworks.get(fid).and_then(|f| f.tenant.as_deref()).unwrap_or(DEFAULT_TENANT)
    }

    /// The tenant of framework `fid` as `asker` creates or drives it,
    /// naming `named` (`None`: none named): the credential's tenant when it
    /// has one, else the one named, else `default` (kept as `None`, so
    /// records of `default` keep their layouts). Refused, naming both, when
    /// the credential's tenant and the one named differ, or when `fid`
    /// exists in another tenant than the one named (a framework's tenant
    /// never changes); refused naming the rule for a bad name.
    pub(super) fn tenant_for(
        &self,
        asker: Origin,
        fid: &crate::ids::FrameworkId,
        named: Option<&str>,
    ) -> Result<Option<String>, String> {
        if let Some(n) = named {
            check_tenant_name(n).map_err(|e| e.0)?;
        }
        let credential = match asker {
            Origin::Conn(conn) => self.principal(conn).tenant(),
            Origin::Query(_) => None,
        };
        let wanted = match (credential, named) {
            (Some(c), Some(n)) if c != n => {
                return Err(format!(
                    "the credential belongs to tenant {c}; it cannot act for tenant {n}"
                ))
            }
            (Some(c), _) => Some(c),
            (None, n) => n,
        };
        if let Some(fw) = self.frameworks.get(fid) {
            let current = fw.tenant.as_deref().unwrap_or(DEFAULT_TENANT);
            return match wanted {
                Some(w) if w != current => Err(format!(
                    "framework {fid} belongs to tenant {current}, not {w}: a framework's tenant \
                     never changes; nothing was changed"
                )),
                _ => Ok(fw.tenant.clone()),
            };
        }
        Ok(wanted.filter(|w| *w != DEFAULT_TENANT).map(str::to_owned))
    }

    /// What the live executors of tenant `name` hold.
    pub(super) fn tenant_held(&self, name: &str) -> Held {
        self.usage.tenant(name)
    }

    /// Why one more executor of framework `fid` holding `need` would take
    /// its tenant over its limit, if it would: the first dimension
    /// (`cores`, `memory`, then named resources in name order) with what
    /// the tenant holds and its limit there. Such a slot waits (it is
    /// never refused): `tenant limit: cores 64 of 64 in use`.
    pub(super) fn tenant_limit_shortfall(
        &self,
        fid: &crate::ids::FrameworkId,
        need: &super::executors::Need,
    ) -> Option<(String, u64, u64)> {
        let tenant = self.tenants.get(self.framework_tenant(fid))?;
        let limit = &tenant.limit;
        if limit.is_empty() {
            return None;
        }
        let held = self.usage.tenant(&tenant.name);
        let over = |name: &str, asked: u64| {
            let limit = limit.get(name)?;
            let used = held.get(name);
            (asked > 0 && used.saturating_add(asked) > limit)
                .then(|| (name.to_owned(), used, limit))
        };
        over("cores", u64::from(need.cores))
            .or_else(|| over("memory", need.memory_mb))
            .or_else(|| need.resources.iter().find_map(|(n, k)| over(n, u64::from(*k))))
    }

    /// How many more executors of framework `fid` holding `need` fit
    /// under its tenant's limit (`usize::MAX`: no limit binds).
    pub(super) fn tenant_limit_room(
        &self,
        fid: &crate::ids::FrameworkId,
        need: &super::executors::Need,
    ) -> usize {
        let Some(tenant) = self.tenants.get(self.framework_tenant(fid)) else {
            return usize::MAX;
        };
        let held = self.usage.tenant(&tenant.name);
        let room = |name: &str, asked: u64| -> usize {
            match tenant.limit.get(name) {
                Some(limit) if asked > 0 => {
                    usize::try_from(limit.saturating_sub(held.get(name)) / asked)
                        .unwrap_or(usize::MAX)
                }
                _ => usize::MAX,
            }
        };
        let mut n = room("cores", u64::from(need.cores)).min(room("memory", need.memory_mb));
        for (name, k) in &need.resources {
            n = n.min(room(name, u64::from(*k)));
        }
        n
    }

    /// `tenant limit: cores 64 of 64 in use`: why a slot of `fid` waits
    /// for its tenant's limit, if it does (for plans and status reasons).
    pub fn tenant_limit_reason(
        &self,
        fid: &crate::ids::FrameworkId,
        spec: &crate::protocol::GroupSpec,
    ) -> Option<String> {
        let need = super::executors::Need::of(spec);
        self.tenant_limit_shortfall(fid, &need).map(|(dim, used, limit)| {
            let (used, limit) = if dim == "memory" {
                (
                    crate::protocol::tenants::describe_memory(used),
                    crate::protocol::tenants::describe_memory(limit),
                )
            } else {
                (used.to_string(), limit.to_string())
            };
            format!("tenant limit: {dim} {used} of {limit} in use")
        })
    }
}

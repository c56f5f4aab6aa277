//! The victims a plan names (`regent job plan`, `POST /v1/jobs/{id}/plan`;
//! docs/tenants.md, docs/design.md#issue-44): for each group with slots
//! that would not be placed, the running executors preemption would stop
//! for them, chosen by the same function with the same inputs as the
//! leader's own preemption ([`Master::choose_victims`]), so the first
//! victims a plan names are the ones the next preemption for the group
//! stops. Also what bounds preemption: `--preemption off`, or the budget
//! the group's tenant has left this minute.
//!
//! Tests: core/tests/preemption_plan.rs.

use super::preempt::{Planned, PREEMPTIONS_PER_MINUTE};
use super::{Master, Origin};
use crate::protocol::{GroupPlan, GroupSpec, PlannedVictim};
use crate::time::Millis;

impl Master {
    /// Where `groups` would be placed now, with the victims preemption
    /// would take for the slots that would not; `named` is the tenant the
    /// job names (a token's tenant wins; else `default`).
    pub(super) fn plan_with_victims(
        &self,
        now: Millis,
        asker: Origin,
        groups: &[GroupSpec],
        named: Option<&str>,
    ) -> Vec<GroupPlan> {
        let (mut plans, held) = self.candidates().plan_holding(groups);
        let credential = match asker {
            Origin::Conn(conn) => self.principal(conn).tenant().map(str::to_owned),
            Origin::Query(_) => None,
        };
        let tenant = credential
            .or_else(|| named.map(str::to_owned))
            .unwrap_or_else(|| crate::protocol::tenants::DEFAULT_TENANT.to_owned());
        let mut planned = Planned::default();
        for (worker, amounts) in held {
            planned.hold(worker, amounts);
        }
        for (plan, spec) in plans.iter_mut().zip(groups) {
            if self.may_place() && plan.unplaced > 0 {
                self.with_priority(spec.policy.priority, &mut plan.reasons);
                plan.reason = plan.reasons.first().map(ToString::to_string);
            }
            if plan.unplaced == 0 || plan.reasons.is_empty() {
                continue;
            }
            if !self.config.preemption {
                plan.preemption = Some("preemption is off on this cluster".into());
                continue;
            }
            if !self.may_preempt_for(spec.policy.priority) {
                plan.preemption = Some(format!(
                    "no preemption: no tenant is set and nothing running has a priority below {}",
                    spec.policy.priority
                ));
                continue;
            }
            let budget = self.preemption_budget_left(now, &tenant);
            plan.preemption = Some(format!(
                "preemption budget: {budget} of {PREEMPTIONS_PER_MINUTE} victims left this \
                 minute for tenant {tenant}"
            ));
            if self.tenant_limit_binds(&tenant, spec, &planned) {
                continue; // it waits for its own limit, not for capacity
            }
            let first = plan.slots - plan.unplaced;
            let unplaced = usize::try_from(plan.unplaced).unwrap_or(usize::MAX);
            for (k, choice) in self.choose_victims(&tenant, spec, &planned, unplaced, budget) {
                let for_slot = first + u32::try_from(k).unwrap_or(u32::MAX);
                for (id, why) in choice.victims.iter().zip(&choice.why) {
                    let Some(e) = self.executors.get(id) else { continue };
                    plan.victims.push(PlannedVictim {
                        executor: id.clone(),
                        framework: e.framework.clone(),
                        group: e.group.clone(),
                        worker: choice.worker.clone(),
                        tenant: self.framework_tenant(&e.framework).to_owned(),
                        why: why.to_string(),
                        for_slot,
                    });
                }
            }
        }
        plans
    }

    /// Whether one more executor of `spec` would take tenant `tenant`,
    /// holding what it holds and `planned`, past its limit in cores,
    /// memory or a named resource (as the leader's own check,
    /// `tenant_limit_shortfall`, judges it).
    fn tenant_limit_binds(&self, tenant: &str, spec: &GroupSpec, planned: &Planned) -> bool {
        let Some(t) = self.tenants.get(tenant) else { return false };
        let held = self.tenant_held(tenant);
        let over = |name: &str, held: u64, asked: u64| {
            t.limit.get(name).is_some_and(|l| asked > 0 && held.saturating_add(asked) > l)
        };
        let total = &planned.total;
        over("cores", held.cores + total.cores, u64::from(spec.cores))
            || over("memory", held.memory_mb + total.memory_mb, spec.memory_mb)
            || spec.launch.resources.iter().any(|(name, n)| {
                let planned = total.named.get(name).copied().unwrap_or(0);
                over(name, held.get(name) + planned, u64::from(*n))
            })
    }
}

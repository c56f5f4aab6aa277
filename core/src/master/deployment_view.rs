//! A group's deployment as readers see it ([`DeploymentView`]): `regent
//! job status`, `GET /v1/jobs/{id}` and `GET /v1/jobs/{id}/deployment`
//! (through `JobsReply`), and the state view whose differences are the
//! `deployment` events ([`crate::events::ClusterEvent::Deployment`];
//! docs/jobs.md, deployments; docs/design.md#issue-45).
//!
//! Built from the durable [`crate::store::Deployment`] and the executors
//! this leader knows: the counts are those the deployment itself goes by
//! (`healthy` is its durable set; an executor runs the deployed spec when
//! its era's digest is the target's, as in [`super::deployment`]).
//!
//! Tests: core/tests/deployments.rs (the view and the events of each
//! step), runtime-smol/tests/e2e_deployments.rs.

use super::frameworks::GroupState;
use super::Master;
use crate::api::DeploymentView;
use crate::ids::FrameworkId;
use crate::store::{spec_digest, DeploymentState, SlotOutcome};

impl Master {
    /// Group `g` of framework `id`: its current or last deployment, `None`
    /// when it never had one.
    pub(super) fn deployment_view(
        &self,
        id: &FrameworkId,
        g: &GroupState,
    ) -> Option<DeploymentView> {
        let d = g.record.deployment.as_ref()?;
        let live = |slot: usize| {
            g.current
                .get(slot)
                .and_then(Option::as_ref)
                .and_then(|x| self.executors.get(x))
                .filter(|e| !e.state.is_terminal())
        };
        let open: Vec<u32> = g
            .record
            .slots
            .iter()
            .enumerate()
            .filter(|(_, o)| matches!(o, SlotOutcome::Pending))
            .map(|(s, _)| u32::try_from(s).unwrap_or(u32::MAX))
            .collect();
        let placed = open
            .iter()
            .filter(|s| live(**s as usize).is_some_and(|e| g.record.digest_of(&e.id) == d.target))
            .count();
        let old = self
            .executors
            .of_framework(id)
            .filter(|e| e.group == g.record.spec.group && !e.state.is_terminal())
            .filter(|e| g.record.digest_of(&e.id) != d.target)
            .count();
        // The canaries are the first `canary` open slots, as the
        // deployment picks them.
        let canary_phase =
            matches!(d.state, DeploymentState::Canary | DeploymentState::AwaitingPromotion);
        let canaries = if canary_phase {
            open.iter().copied().take(d.policy.canary as usize).collect()
        } else {
            Vec::new()
        };
        let progress = d.policy.progress_deadline_ms;
        let progress_due_ms =
            (d.state.is_active() && d.state != DeploymentState::AwaitingPromotion && progress > 0)
                .then(|| {
                    // This leader's own deadline when it is sooner (its wall
                    // clock behind the one that stored the progress).
                    let stored = d.progress_ms.saturating_add(progress);
                    g.progress_due
                        .filter(|p| (p.seq, p.progress_ms) == (d.seq, d.progress_ms))
                        .map_or(stored, |p| stored.min(self.wall(p.at)))
                });
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Some(DeploymentView {
            seq: d.seq,
            state: d.state.name().to_string(),
            reason: match &d.state {
                DeploymentState::Failed { reason } => Some(reason.clone()),
                _ => None,
            },
            revert_of: d.revert_of,
            healthy: count(d.healthy.len()),
            open: count(open.len()),
            canary: d.policy.canary,
            max_parallel: d.policy.max_parallel,
            min_healthy_time_ms: d.policy.min_healthy_time_ms,
            target_digest: d.target,
            revert_to_digest: d.revert_to.as_deref().map(spec_digest),
            placed: count(placed),
            old: count(old),
            canaries,
            auto_revert: d.policy.auto_revert,
            auto_promote: d.policy.auto_promote,
            healthy_deadline_ms: d.policy.healthy_deadline_ms,
            progress_deadline_ms: progress,
            started_ms: d.started_ms,
            progress_ms: d.progress_ms,
            progress_due_ms,
            reverts_because: match (d.revert_of, &g.reverted) {
                (Some(of), Some((seq, why))) if of == *seq => Some(why.clone()),
                _ => None,
            },
        })
    }
}

//! A framework's reports of its executors' `manual` health checks
//! (docs/design.md#issue-45): the leader only relays them. It checks that
//! the executor runs and that its group has a manual check of that name,
//! and sends the result to the executor's worker (`HealthOnWorker`), which
//! counts it like a run of any other check ([`crate::health`]). Nothing is
//! stored: a report holds for the check's TTL on the worker, and the
//! framework reports again within it (after a failover too).

use super::{Action, Master, Origin};
use crate::ids::ExecutorId;
use crate::launch::check::{cut_detail, CheckKind};
use crate::protocol::{ExecutorState, Message};

impl Master {
    /// `ReportHealth` from `asker`: relayed to the executor's worker and
    /// accepted, or refused naming the executor or the check.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn report_health(
        &mut self,
        asker: Origin,
        request: u64,
        executor: ExecutorId,
        check: &str,
        passing: bool,
        detail: String,
        out: &mut Vec<Action>,
    ) {
        let found = self.manual_check(&executor, check);
        let (worker, index) = match found {
            Ok(found) => found,
            Err(reason) => {
                out.push(self.refuse_request(asker, request, reason));
                return;
            }
        };
        let detail = cut_detail(&detail);
        let msg =
            Message::HealthOnWorker { epoch: self.epoch, executor, check: index, passing, detail };
        self.tell_worker(&worker, msg, out);
        out.push(asker.reply(Message::RequestAccepted { epoch: self.epoch, request }));
    }

    /// The worker of running executor `executor` and the index of its
    /// group's manual check `check`; or why a report on it is refused.
    fn manual_check(
        &self,
        executor: &ExecutorId,
        check: &str,
    ) -> Result<(crate::ids::WorkerId, u8), String> {
        let e = self
            .executors
            .get(executor)
            .ok_or_else(|| format!("no executor {executor} is known to this leader"))?;
        if e.state != ExecutorState::Running {
            return Err(format!(
                "executor {executor} is {}, not RUNNING: only a running executor's health is counted",
                e.state.name()
            ));
        }
        let spec = self
            .frameworks
            .get(&e.framework)
            .and_then(|f| f.groups.iter().find(|g| g.record.spec.group == e.group))
            .map(|g| &g.record.spec.launch)
            .ok_or_else(|| format!("executor {executor}'s group {} is gone", e.group))?;
        let manual: Vec<&str> = spec
            .checks
            .iter()
            .filter(|c| matches!(c.kind, CheckKind::Manual { .. }))
            .map(|c| c.name.as_str())
            .collect();
        match spec.checks.iter().position(|c| c.name == check) {
            Some(i) if matches!(spec.checks[i].kind, CheckKind::Manual { .. }) => {
                Ok((e.worker.clone(), u8::try_from(i).expect("at most 8 checks a group")))
            }
            found => {
                let what = if found.is_some() { "is not a manual check" } else { "is no check" };
                let names = if manual.is_empty() {
                    "it has no manual check".to_owned()
                } else {
                    format!("its manual checks: {}", manual.join(", "))
                };
                Err(format!(
                    "{check:?} {what} of executor {executor}'s group {} ({names})",
                    e.group
                ))
            }
        }
    }
}

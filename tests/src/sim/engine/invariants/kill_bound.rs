//! Every accepted kill is carried out within `BOUND` (5 s) once its worker is
//! reachable. A kill is accepted when the leader answers `RequestAccepted`
//! to a framework's `KillExecutor`, an operator's `kill-executor` (with or
//! without refill), a scale below the executor's slot, or a framework's
//! teardown (`regent kill`): from then on the executor (for a scale or a
//! teardown, every live executor the accepting leader knew in the slots
//! scaled away or in the framework) must end. A later scale of the same
//! group supersedes an earlier one: the executors it gives their slots
//! back to are no longer doomed. Its worker is reachable
//! while its process runs unpaused with a live connection to an acting
//! leader that knows it ALIVE on that connection, and no partition or
//! isolation stands between them; once that has held for
//! `BOUND` (5 s) without a break, the executor's process must have ended
//! (docs/design.md#issue-41's fifth scenario: a kill sent once, into a connection that
//! had just dropped, was never sent again).

use crate::sim::engine::{parse_executor, Node, World};
use regent_core::master::WorkerState;
use regent_core::protocol::Message;
use regent_core::{ExecutorId, FrameworkId, Millis};

/// How long a reachable worker may take to carry out an accepted kill:
/// generous against a kill's grace (the simulated executors die within
/// 20 ms of a kill or a stop) and a few heartbeats of a new leader's
/// recovery.
pub(crate) const BOUND: Millis = Millis(5_000);

/// What a request asks to kill once accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Intent {
    /// One executor.
    Executor(ExecutorId),
    /// Every executor of the group at a slot from `slots` on.
    Scale { framework: FrameworkId, group: String, slots: u32 },
    /// Every executor of the framework.
    Teardown,
}

/// A request a subscriber's connection carries (by the subscriber's
/// framework, once known): remembered until the leader answers it.
pub(crate) fn on_request(w: &mut World, s: usize, msg: &Message) {
    let (request, intent) = match msg {
        Message::KillExecutor { request, executor }
        | Message::OperatorKillExecutor { request, executor, .. } => {
            (*request, Intent::Executor(executor.clone()))
        }
        Message::ScaleGroup { request, framework, group, slots, .. } => (
            *request,
            Intent::Scale { framework: framework.clone(), group: group.clone(), slots: *slots },
        ),
        Message::Teardown { request } => (*request, Intent::Teardown),
        _ => return,
    };
    if let Intent::Scale { framework, group, slots } = &intent {
        // A later scale supersedes an earlier one: the executors it gives
        // their slots back to are no longer doomed (the leader kills a
        // scale's surplus only if no later scale gave it its slot back).
        let key = (framework.clone(), group.clone());
        w.obs.latest_scale.insert(key, request);
        w.obs.accepted_kills.retain(|x, _| {
            !parse_executor(x).is_some_and(|(f, g, slot)| {
                f == *framework && g == *group && slot < *slots as usize
            })
        });
    }
    let framework = w.subs[s].framework.clone();
    w.obs.kill_intents.insert(request, (framework, intent));
}

/// Master `m` answered `request` with `RequestAccepted`.
pub(crate) fn on_accepted(w: &mut World, m: usize, request: u64) {
    let Some((framework, intent)) = w.obs.kill_intents.remove(&request) else { return };
    let master = w.masters[m].master();
    let live = master.executors().filter(|e| !e.state.is_terminal());
    let doomed: Vec<ExecutorId> = match intent {
        Intent::Executor(x) => vec![x],
        Intent::Scale { framework, group, slots } => {
            let key = (framework.clone(), group.clone());
            if w.obs.latest_scale.get(&key) != Some(&request) {
                // A later scale of the group was sent since: it decides.
                return;
            }
            live.filter(|e| e.framework == framework && e.group == group && e.slot >= slots)
                .map(|e| e.id.clone())
                .collect()
        }
        Intent::Teardown => live
            .filter(|e| Some(&e.framework) == framework.as_ref())
            .map(|e| e.id.clone())
            .collect(),
    };
    let now = w.now;
    for x in doomed {
        w.obs.accepted_kills.entry(x).or_insert((now, None));
    }
}

/// Worker `i` is reachable by an acting leader now.
fn reachable(w: &World, i: usize) -> bool {
    let wp = &w.workers[i];
    if !wp.p.up || wp.p.paused(w.now) {
        return false;
    }
    let id = &wp.worker().config().id;
    let Some(l) = w.acting_leader() else { return false };
    // Not while a partition or the leader's isolation holds either way.
    let blocked = |from: Node, to: Node| w.blocked.get(&(from, to)).is_some_and(|n| *n > 0);
    if blocked(Node::Master(l), Node::Worker(i)) || blocked(Node::Worker(i), Node::Master(l)) {
        return false;
    }
    let master = w.masters[l].master();
    let Some(entry) = master.workers().into_iter().find(|e| &e.id == id) else { return false };
    if entry.state != WorkerState::Alive {
        return false;
    }
    entry.conn.is_some_and(|conn| {
        w.conns.get(&conn).is_some_and(|c| {
            c.client == Node::Worker(i) && c.cgen == wp.p.gen && c.open && !c.broken && !c.cclosed
        })
    })
}

pub(crate) fn check(w: &mut World) -> Result<(), String> {
    if w.obs.accepted_kills.is_empty() {
        return Ok(());
    }
    let now = w.now;
    let kills: Vec<ExecutorId> = w.obs.accepted_kills.keys().cloned().collect();
    for x in kills {
        let on = (0..w.workers.len()).find(|&i| w.running_executors(i).any(|r| *r == x));
        let Some(i) = on else {
            w.obs.accepted_kills.remove(&x);
            continue;
        };
        let reach = reachable(w, i);
        let Some(entry) = w.obs.accepted_kills.get_mut(&x) else { continue };
        if !reach {
            entry.1 = None;
            continue;
        }
        let since = *entry.1.get_or_insert(now);
        if now.since(since) > BOUND {
            let (accepted, _) = *entry;
            let slot = parse_executor(&x).map(|(_, g, s)| format!("{g}#{s}")).unwrap_or_default();
            return Err(format!(
                "{x} (slot {slot}), whose kill was accepted at {accepted}, still runs on w{i}, reachable by the acting leader since {since}"
            ));
        }
    }
    Ok(())
}

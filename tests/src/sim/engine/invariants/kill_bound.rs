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
//!
//! A scale that names executors (docs/design.md#issue-43, item 3) dooms
//! exactly those, whatever later scales do, and the executors left without a
//! slot; once it is accepted, every other executor that held a slot of the
//! group when it was sent, still lives and whose slot is still wanted holds
//! that slot still (no unnamed executor is stopped by it), and no acting
//! leader ever holds a named one in a slot but to replace it (a new leader
//! does not adopt it).

use crate::sim::engine::{parse_executor, Node, World};
use regent_core::master::WorkerState;
use regent_core::protocol::Message;
use regent_core::store::SlotOutcome;
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
    /// The executors `named`, and every executor of the group left
    /// without a slot (at a slot from `slots` on, without holes).
    Scale {
        framework: FrameworkId,
        group: String,
        slots: u32,
        /// The executors named to go.
        named: Vec<ExecutorId>,
        /// The slots the group's executors held at the sender's master
        /// when it was sent.
        before: Vec<(u32, ExecutorId)>,
    },
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
        Message::ScaleGroup { request, framework, group, slots, remove, .. } => {
            let held = |m: usize| -> Vec<(u32, ExecutorId)> {
                let master = w.masters[m].master();
                let Some(f) = master.frameworks().find(|f| f.id == *framework) else {
                    return Vec::new();
                };
                let Some(g) = f.groups.iter().find(|g| g.record.spec.group == *group) else {
                    return Vec::new();
                };
                (0u32..)
                    .zip(&g.current)
                    .filter_map(|(slot, x)| x.clone().map(|x| (slot, x)))
                    .collect()
            };
            let before = w.subscription_conn(s).map(|(m, _)| held(m)).unwrap_or_default();
            (
                *request,
                Intent::Scale {
                    framework: framework.clone(),
                    group: group.clone(),
                    slots: *slots,
                    named: remove.clone(),
                    before,
                },
            )
        }
        Message::Teardown { request } => (*request, Intent::Teardown),
        _ => return,
    };
    if let Intent::Scale { framework, group, .. } = &intent {
        // A later scale supersedes an earlier one: the executors it gives
        // their slots back to are no longer doomed (the leader kills a
        // scale's surplus only if no later scale gave it its slot back;
        // with holes any slot may come back, so every unnamed executor of
        // the group is given the benefit of the doubt until this one is
        // accepted). Named ones stay doomed.
        let key = (framework.clone(), group.clone());
        w.obs.latest_scale.insert(key, request);
        let named = &w.obs.named_removed;
        w.obs.accepted_kills.retain(|x, _| {
            named.contains(x)
                || !parse_executor(x).is_some_and(|(f, g, _)| f == *framework && g == *group)
        });
    }
    let framework = w.subs[s].framework.clone();
    let gen = w.subs[s].p.gen;
    w.obs.kill_intents.insert((s, gen, request), (framework, intent));
}

/// Master `m` answered `sent` (subscriber, process generation, request
/// id) with `RequestAccepted`. Requests are told apart by their sender:
/// each subscriber process numbers its own, so a request a subscriber sent
/// on a connection that broke (never answered) must not be taken for
/// another subscriber's request of the same number.
pub(crate) fn on_accepted(w: &mut World, m: usize, sent: (usize, u64, u64)) {
    let request = sent.2;
    let Some((framework, intent)) = w.obs.kill_intents.remove(&sent) else { return };
    let doomed: Vec<ExecutorId> = match intent {
        Intent::Executor(x) => vec![x],
        Intent::Scale { framework, group, named, before, .. } => {
            let latest = w.obs.latest_scale.get(&(framework.clone(), group.clone()));
            let is_latest = latest == Some(&request);
            let decided = match scale_doomed(w, m, &framework, &group, &named, &before, is_latest) {
                Ok(doomed) => doomed,
                Err(detail) => {
                    let detail = format!("m{m} accepted scale {request}: {detail}");
                    super::fail(w, "kill_bound", detail);
                    return;
                }
            };
            // A later scale of the group was sent since: it decides the
            // rest; the named ones go whatever it does.
            let doomed = if is_latest {
                decided
            } else {
                decided.into_iter().filter(|x| named.contains(x)).collect()
            };
            w.obs.named_removed.extend(named);
            doomed
        }
        Intent::Teardown => {
            let master = w.masters[m].master();
            master
                .executors()
                .filter(|e| !e.state.is_terminal())
                .filter(|e| Some(&e.framework) == framework.as_ref())
                .map(|e| e.id.clone())
                .collect()
        }
    };
    let now = w.now;
    for x in doomed {
        w.obs.accepted_kills.entry(x).or_insert((now, None));
    }
}

/// What an accepted scale of `framework`/`group` dooms at master `m`: the
/// live `named` executors and every live executor of the group that holds
/// no slot; or, when it is the `latest` scale of the group, how an unnamed
/// executor of `before` (the slots held when it was sent) that lives and
/// whose slot is still wanted lost its slot.
fn scale_doomed(
    w: &World,
    m: usize,
    framework: &FrameworkId,
    group: &str,
    named: &[ExecutorId],
    before: &[(u32, ExecutorId)],
    latest: bool,
) -> Result<Vec<ExecutorId>, String> {
    let master = w.masters[m].master();
    let live: Vec<&regent_core::master::ExecutorEntry> =
        master.executors().filter(|e| !e.state.is_terminal()).collect();
    let is_live = |x: &ExecutorId| live.iter().any(|e| e.id == *x);
    let g = master
        .frameworks()
        .find(|f| f.id == *framework)
        .and_then(|f| f.groups.iter().find(|g| g.record.spec.group == group));
    let holds = |slot: u32, x: &ExecutorId| {
        g.is_some_and(|g| g.current.get(slot as usize) == Some(&Some(x.clone())))
    };
    if let Some(g) = g.filter(|_| latest) {
        for (slot, x) in before {
            let wanted = g.record.slots.get(*slot as usize) == Some(&SlotOutcome::Pending);
            if !named.contains(x) && is_live(x) && wanted && !holds(*slot, x) {
                let now = g.current.get(*slot as usize).cloned().flatten();
                return Err(format!(
                    "scale of {framework}/{group} naming {named:?}: unnamed {x} lost its slot {slot} (now {now:?})"
                ));
            }
        }
    }
    let mut doomed: Vec<ExecutorId> = named.iter().filter(|x| is_live(x)).cloned().collect();
    doomed.extend(
        live.iter()
            .filter(|e| e.framework == *framework && e.group == group)
            .filter(|e| !holds(e.slot, &e.id) && !named.contains(&e.id))
            .map(|e| e.id.clone()),
    );
    Ok(doomed)
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

/// No acting leader holds an executor removed by name in a slot, but to
/// replace it (its slot's record names it `replacing`, or the leader stops
/// it as an operator's).
fn named_not_kept(w: &World) -> Result<(), String> {
    if w.obs.named_removed.is_empty() {
        return Ok(());
    }
    let Some(l) = w.acting_leader() else { return Ok(()) };
    let master = w.masters[l].master();
    for f in master.frameworks() {
        for g in &f.groups {
            for (slot, x) in (0u32..).zip(&g.current) {
                let Some(x) = x.as_ref().filter(|x| w.obs.named_removed.contains(*x)) else {
                    continue;
                };
                let replacing = g.record.replacing.get(&slot) == Some(x);
                let stopping = master.executors().any(|e| e.id == *x && e.operator_stop);
                if !replacing && !stopping {
                    return Err(format!(
                        "m{l} holds {x}, removed by name by an accepted scale, in slot {}#{slot} without replacing it",
                        g.record.spec.group
                    ));
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn check(w: &mut World) -> Result<(), String> {
    named_not_kept(w)?;
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

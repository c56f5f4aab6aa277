//! The exhaustive checker (docs/design.md#issue-41): beside the random simulator, it
//! explores every interleaving of a small bounded scenario.
//!
//! A [`Scenario`] is a small cluster of the simulator's production nodes
//! (`MasterNode`s on the ZooKeeper model, `WorkerNode`s, `SubmitNode`s:
//! the same `World` the soak runs, with executors that run until the
//! scenario ends them), a setup run in time order until the cluster has
//! settled (a leader, workers registered, the frameworks' executors
//! running), and a handful of actions: faults (a worker cut off, a
//! leader's crash, a connection blip), executors' exits, operator and
//! framework requests (scale, kill-executor, a framework's kill or
//! teardown, cordon).
//!
//! From the settled state the checker explores, depth first, every
//! sequence of [`Choice`]s up to the bound's depth: at each state, either
//! **continue** (fire events in time order until one of the job layer's
//! events has fired: a message between a master and a worker or a
//! subscriber other than a heartbeat, a connection's end, an executor's
//! change, a store write landing; or until `quiet_ms` of virtual time
//! passed), or fire **early** any other pending job-layer event due within
//! `horizon_ms` that heads its lane (a connection's direction stays FIFO,
//! as TCP is), or inject any **action** not yet used (some only after
//! another: an exit during a cut, say). Every state reached is hashed
//! (`World::state_hash`: virtual time and the Debug rendering of every
//! node, connection, executor, pending event and the ZooKeeper model), so
//! a state reached again by another order is explored once. Past the
//! depth, a deterministic tail runs the cluster `tail_ms` further in time
//! order, so what the choices set in motion (a worker declared DEAD, a
//! failover, a kill that should follow a re-registration) plays out. The
//! simulator's invariants, the job layer's included, are checked after
//! every step of all of it.
//!
//! The production nodes are not `Clone`, so a state is rebuilt by
//! replaying its path of choices from the start (stateless exploration,
//! as CHESS and loom do; the engine is deterministic): each transition
//! costs the setup and the path again, which bounds the scenarios to a
//! few thousand states in a debug build.

pub mod scenarios;

pub use scenarios::{all, Scenario};

use crate::sim::engine::explore::EventKey;
use crate::sim::engine::World;
use crate::sim::{Schedule, Violation};
use regent_core::Millis;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One step of a path through a scenario's states.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Fire events in time order until a job-layer event fired (or
    /// `quiet_ms` passed).
    Continue,
    /// Fire this pending job-layer event before the earlier ones.
    Early(EventKey),
    /// Inject the scenario's action of this index.
    Act(usize),
}

/// How far a scenario is explored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    /// Choices per path.
    pub depth: usize,
    /// How far ahead of the next event (ms of virtual time) a job-layer
    /// event may be fired early.
    pub horizon_ms: u64,
    /// The most virtual time one `Continue` runs when no job-layer event
    /// fires.
    pub quiet_ms: u64,
    /// The deterministic tail after the last choice (ms of virtual time).
    pub tail_ms: u64,
    /// Stop after this many distinct states (the report says so).
    pub max_states: u64,
}

/// A violation and the path that reached it.
#[derive(Clone, Debug)]
pub struct Counterexample {
    /// What broke.
    pub violation: Violation,
    /// The choices from the settled state, described.
    pub choices: Vec<String>,
    /// Whether it broke in the deterministic tail.
    pub in_tail: bool,
    /// The last events of a replay of the path with tracing on.
    pub trace: Vec<String>,
}

/// What an exploration did.
#[derive(Clone, Debug)]
pub struct Report {
    /// The scenario's name.
    pub scenario: &'static str,
    /// Its bound.
    pub bound: Bound,
    /// Distinct states explored.
    pub states: u64,
    /// Transitions taken (a state reached again counts here only).
    pub transitions: u64,
    /// States reached again by another order (pruned).
    pub revisits: u64,
    /// Leaves whose tail was run.
    pub tails: u64,
    /// Wall-clock time.
    pub elapsed: Duration,
    /// Every state within the bound was explored (not cut by
    /// `max_states`, nor stopped by a violation).
    pub complete: bool,
    /// The first violation found, if any.
    pub violation: Option<Counterexample>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = &self.bound;
        write!(
            f,
            "{}: depth {}, horizon {} ms, quiet {} ms, tail {} ms: {} states, {} transitions ({} revisits pruned), {} tails, {:.1} s, {}",
            self.scenario,
            b.depth,
            b.horizon_ms,
            b.quiet_ms,
            b.tail_ms,
            self.states,
            self.transitions,
            self.revisits,
            self.tails,
            self.elapsed.as_secs_f64(),
            match (&self.violation, self.complete) {
                (Some(_), _) => "VIOLATION",
                (None, true) => "no violation (complete)",
                (None, false) => "no violation (cut at max_states)",
            }
        )?;
        if let Some(c) = &self.violation {
            writeln!(f)?;
            writeln!(
                f,
                "  violated `{}` at {}{}: {}",
                c.violation.invariant,
                c.violation.at,
                if c.in_tail { " (in the tail)" } else { "" },
                c.violation.detail
            )?;
            writeln!(f, "  path: {}", c.choices.join(" → "))?;
            for line in &c.trace {
                writeln!(f, "    {line}")?;
            }
        }
        Ok(())
    }
}

/// How many trace lines a replay keeps.
const TRACE_KEEP_REPLAY: usize = 100_000;

/// How many trace lines a counterexample keeps.
const TRACE_KEEP: usize = 40;

/// Trace lines a counterexample leaves out.
const NOISE: [&str; 8] = [
    "<- Master(Zk(",
    "(Tick)",
    "Heartbeat",
    "note: Status",
    "Hello",
    "Dialled {",
    "DialFailed",
    "show: Progress",
];

/// Explores `scenario` within `bound`; stops at the first violation.
pub fn explore(scenario: &Scenario, bound: Bound) -> Report {
    let started = Instant::now();
    let mut x = Explorer::new(scenario, bound);
    let root = x.replay(&[], false).unwrap_or_else(|v| {
        panic!("scenario {}: the setup violated {}: {}", scenario.name, v.invariant, v.detail)
    });
    x.visited.insert(root.state_hash(), bound.depth);
    x.states = 1;
    let mut path = Vec::new();
    let found = x.dfs(&mut path, root, bound.depth).err();
    let violation = found.map(|(path, v, in_tail)| x.counterexample(&path, v, in_tail));
    Report {
        scenario: scenario.name,
        bound,
        states: x.states,
        transitions: x.transitions,
        revisits: x.revisits,
        tails: x.tails,
        elapsed: started.elapsed(),
        complete: !x.cut && violation.is_none(),
        violation,
    }
}

/// Replays one path of `scenario` (then its tail) with tracing on: what
/// broke, if anything, and the whole trace. `Choice::Early` keys are those
/// a counterexample names.
pub fn replay(
    scenario: &Scenario,
    bound: Bound,
    path: &[Choice],
) -> (Option<Violation>, Vec<String>) {
    let x = Explorer::new(scenario, bound);
    let mut w = match x.scenario.settled(true) {
        Ok(w) => w,
        Err(v) => return (Some(v), Vec::new()),
    };
    for c in path {
        if let Err(v) = x.apply(&mut w, c) {
            return (Some(v), w.take_trace());
        }
    }
    let until = w.now + Millis(bound.tail_ms);
    while w.now < until {
        match w.fire_next() {
            Ok(true) => {}
            Ok(false) => break,
            Err(v) => return (Some(v), w.take_trace()),
        }
    }
    (None, w.take_trace())
}

struct Explorer<'a> {
    scenario: &'a Scenario,
    bound: Bound,
    /// State hash → the most depth left it was explored with.
    visited: HashMap<u64, usize>,
    states: u64,
    transitions: u64,
    revisits: u64,
    tails: u64,
    cut: bool,
}

/// A violation found: the path to it, what broke, whether in the tail.
type Found = (Vec<Choice>, Violation, bool);

impl<'a> Explorer<'a> {
    fn new(scenario: &'a Scenario, bound: Bound) -> Self {
        Explorer {
            scenario,
            bound,
            visited: HashMap::new(),
            states: 0,
            transitions: 0,
            revisits: 0,
            tails: 0,
            cut: false,
        }
    }

    /// The settled state, then `path` applied to it.
    fn replay(&self, path: &[Choice], trace: bool) -> Result<World, Violation> {
        let mut w = self.scenario.settled(trace)?;
        for c in path {
            self.apply(&mut w, c)?;
        }
        Ok(w)
    }

    /// The actions used on `path`.
    fn used(path: &[Choice]) -> Vec<usize> {
        path.iter()
            .filter_map(|c| match c {
                Choice::Act(i) => Some(*i),
                _ => None,
            })
            .collect()
    }

    fn choices(&self, w: &World, path: &[Choice]) -> Vec<Choice> {
        let mut out = vec![Choice::Continue];
        let pending = w.pending_events();
        if let Some(first) = pending.first().map(|p| p.key) {
            let horizon = Millis(first.0 .0.max(w.now.0) + self.bound.horizon_ms);
            let mut lanes_seen = std::collections::BTreeSet::new();
            for p in &pending {
                if p.key.0 > horizon {
                    break;
                }
                let head = p.lane.as_ref().is_none_or(|l| lanes_seen.insert(l.clone()));
                if p.key != first && p.job && head {
                    out.push(Choice::Early(p.key));
                }
            }
        }
        let used = Self::used(path);
        for (i, a) in self.scenario.actions.iter().enumerate() {
            let ready = a.after.is_none_or(|j| used.contains(&j));
            if !used.contains(&i) && ready && a.applies(w) {
                out.push(Choice::Act(i));
            }
        }
        out
    }

    fn apply(&self, w: &mut World, c: &Choice) -> Result<(), Violation> {
        match c {
            Choice::Continue => {
                let until = w.now + Millis(self.bound.quiet_ms);
                loop {
                    let next = w.pending_events().into_iter().next();
                    let Some(next) = next else { return Ok(()) };
                    if next.key.0 > until {
                        // Nothing of the job layer for a while: time passes.
                        w.advance_to(until);
                        return Ok(());
                    }
                    w.fire(next.key)?;
                    if next.job {
                        w.note(|| format!("CHECKER continued to {}", next.what));
                        return Ok(());
                    }
                }
            }
            Choice::Early(key) => {
                w.note(|| format!("CHECKER fires {key:?} early"));
                w.fire(*key).map(|_| ())
            }
            Choice::Act(i) => {
                let a = &self.scenario.actions[*i];
                w.note(|| format!("CHECKER action {i}: {:?}", a.what));
                a.apply(w)
            }
        }
    }

    fn dfs(&mut self, path: &mut Vec<Choice>, w: World, left: usize) -> Result<(), Found> {
        if left == 0 {
            return self.tail(path, w);
        }
        let choices = self.choices(&w, path);
        let n = choices.len();
        let mut parent = Some(w);
        for (i, c) in choices.into_iter().enumerate() {
            if self.states >= self.bound.max_states {
                self.cut = true;
                return Ok(());
            }
            let mut w = if i + 1 == n {
                parent.take().expect("the parent is used last")
            } else {
                self.replay(path, false).map_err(|v| (path.clone(), v, false))?
            };
            path.push(c.clone());
            self.transitions += 1;
            if let Err(v) = self.apply(&mut w, &c) {
                return Err((path.clone(), v, false));
            }
            let h = w.state_hash();
            if self.visited.get(&h).is_some_and(|&d| d >= left - 1) {
                self.revisits += 1;
                path.pop();
                continue;
            }
            self.visited.insert(h, left - 1);
            self.states += 1;
            self.dfs(path, w, left - 1)?;
            path.pop();
        }
        Ok(())
    }

    /// Runs the deterministic tail of a leaf.
    fn tail(&mut self, path: &[Choice], mut w: World) -> Result<(), Found> {
        self.tails += 1;
        let until = w.now + Millis(self.bound.tail_ms);
        while w.now < until {
            match w.fire_next() {
                Ok(true) => {}
                Ok(false) => break,
                Err(v) => return Err((path.to_vec(), v, true)),
            }
        }
        Ok(())
    }

    fn counterexample(&self, path: &[Choice], v: Violation, in_tail: bool) -> Counterexample {
        // Replay with tracing on (deterministic: the same violation).
        let mut trace = Vec::new();
        if let Ok(mut w) = self.replay(path, true) {
            if in_tail {
                let until = w.now + Millis(self.bound.tail_ms);
                while w.now < until && matches!(w.fire_next(), Ok(true)) {}
            }
            trace = w.take_trace();
        }
        // The control plane's own chatter (ZooKeeper, ticks, heartbeats) is
        // left out: what is kept is what the job layer did.
        trace.retain(|l| !NOISE.iter().any(|n| l.contains(n)));
        if trace.len() > TRACE_KEEP {
            trace.drain(..trace.len() - TRACE_KEEP);
        }
        let choices = path
            .iter()
            .map(|c| match c {
                Choice::Continue => "continue".to_string(),
                Choice::Early(k) => format!("early {}@{}", k.1, k.0),
                Choice::Act(i) => format!("{:?}", self.scenario.actions[*i].what),
            })
            .collect();
        Counterexample { violation: v, choices, in_tail, trace }
    }
}

impl Scenario {
    /// The scenario's cluster after its setup: run in time order until it
    /// has settled.
    fn settled(&self, trace: bool) -> Result<World, Violation> {
        let mut w = World::new(self.seed, &self.config, &Schedule::calm(), trace);
        w.script_executors();
        w.keep_trace(TRACE_KEEP_REPLAY);
        for (s, specs) in (self.specs)().into_iter().enumerate() {
            w.set_specs(s, specs);
        }
        let limit = Millis(30_000);
        while !(self.ready)(&w) {
            if w.now > limit || !w.fire_next()? {
                panic!("scenario {} did not settle within {limit}", self.name);
            }
        }
        w.mark_settled();
        Ok(w)
    }
}

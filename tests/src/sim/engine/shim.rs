//! The executor shim's lease (docs/design.md#issue-45): every executor of a
//! singleton group (`disconnect = { stop_after }`) runs under a shim, a
//! process of its own that outlives the worker's, which stops the command
//! once its host's boot clock passes the worker's last word + `stop_after`
//! — with the worker's process down (a crash, `kill -9`) or paused
//! (SIGSTOP) too, which the worker's core cannot (runtime-std's
//! `exec/shim.rs`, docs/machines.md, "A worker process down or paused").
//!
//! What is modelled, as the runtimes do it:
//!
//! * **The word file** (`<work_dir>/last-word`), one per worker host: after
//!   every input its process handles, before carrying out the outputs (a
//!   launch among them), the engine writes the core's
//!   `Worker::last_word()` when it changed, as `host::persist_word` does.
//!   That value is on the process's clock, which is the host's boot clock
//!   (the simulator's `now`) with the runtimes' CLOCK_BOOTTIME, and lags it
//!   by the sleeps of the host with `Knobs::monotonic_clock` (then the word
//!   is early and the shim stops early, as a real runtime on such a clock
//!   would). A process that only started has no word and writes none: the
//!   file of the process before it stays.
//! * **The shim**, one per singleton executor process, from the launch
//!   (the worker's `ExecutorCommand::Start`) to the command's end, across
//!   crashes and re-adoptions of its worker (it is the executor's parent,
//!   not the worker's child). It knows its group's `stop_after` and kill
//!   grace (the launch's, else the supervisor's default, 3 s) and its own
//!   start, which is its word while the host has no word file. Once the
//!   boot clock passes word + `stop_after` it lapses: SIGTERM, SIGKILL
//!   after the grace. The command is taken to ignore the SIGTERM (the worst
//!   case, which the leader's wait, `cut_off::replace_after`, budgets for):
//!   it ends at the lapse + the grace. The shim records the end
//!   (`ShimStatus::CutOff`), which a worker process reports as its core
//!   reports its own cut-off stop, `Failed` with
//!   `launch::cut_off_reason` (no retry charged): the running process at
//!   once (when it runs again, if paused), or the next one, which finds the
//!   executor ended when it starts over the work directory.
//!
//! **The poll.** The real shim reads the file every `min(250 ms,
//! stop_after / 10)` but never sleeps past word + `stop_after` + 1 ms of
//! the word it last read, and the word only moves later: so it lapses at
//! the first ms past word + `stop_after` of the word then in the file,
//! as this model does by looking at exactly that instant (re-reading the
//! file, and looking again at the new deadline if the word moved). No
//! tolerance is needed for it. Only a host's sleep delays a shim (its
//! sleeps are on the monotonic clock, which stops with the host): a shim
//! due while its host sleeps looks again one poll after the host wakes
//! (the most its sleep can have left), and a grace is not counted while
//! the host sleeps.
//!
//! `Knobs::no_shim` leaves the shims out (the worker's core alone stops
//! cut-off singletons), for the can-fail test of `singleton_slots`.

use super::{Ev, ExecWhat, World};
use regent_core::cut_off::ASSUMED_KILL_GRACE;
use regent_core::launch::{cut_off_reason, Disconnect};
use regent_core::protocol::ExecutorState;
use regent_core::{ExecutorId, Millis};
use std::collections::BTreeMap;

/// One executor's shim.
#[derive(Clone, Debug)]
struct Shim {
    /// Its group's disconnect rule.
    rule: Disconnect,
    /// How long after the SIGTERM it sends SIGKILL.
    grace: Millis,
    /// When it started (its word while the host has no word file).
    start: Millis,
    /// Once the lease lapsed: when the command ends (SIGKILL).
    kill_at: Option<Millis>,
    /// Whether the worker's process was down, paused or running when the
    /// lease lapsed (for [`Stops`]).
    lapsed_with: Lapse,
}

/// The worker's process when a shim's lease lapsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lapse {
    Down,
    Paused,
    Running,
}

impl Shim {
    /// How often it reads the word file: `min(250 ms, stop_after / 10)`,
    /// at least 10 ms (runtime-std's `Lease::poll`).
    fn poll(&self) -> Millis {
        Millis((self.rule.stop_after_ms / 10).clamp(10, 250))
    }
}

/// The commands the shims stopped, for the soak's figures, by what the
/// worker's process was when the lease lapsed.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stops {
    /// Down.
    pub(crate) down: u64,
    /// Paused (its host awake).
    pub(crate) paused: u64,
    /// Running: the shim before the core, as with a process that only
    /// started and re-adopted the executor (it counts the cut-off from its
    /// own start, the shim from the word file of the process before), or
    /// one that was paused until after the lapse.
    pub(crate) running: u64,
}

/// The shims and the word files of every worker host.
#[derive(Debug, Default)]
pub(crate) struct Model {
    /// Each worker host's word file: the boot-clock ms of its worker's last
    /// word from its master.
    words: BTreeMap<usize, Millis>,
    /// The shims of singleton executors, by worker and executor.
    shims: BTreeMap<(usize, ExecutorId), Shim>,
    /// The ends the shims recorded (their status files), until a new
    /// worker process over the same work directory starts.
    ended: BTreeMap<(usize, ExecutorId), ExecutorState>,
    /// The commands the shims stopped.
    pub(crate) stops: Stops,
}

impl World {
    /// Worker `w`'s process just handled an input: its word is written to
    /// the host's word file if it changed (`host::persist_word`).
    pub(super) fn persist_word(&mut self, w: usize) {
        let Some(word) = self.workers[w].node.worker().last_word() else { return };
        let before = self.shim.words.insert(w, word);
        if before.is_some_and(|b| word < b) {
            // The word went back (it does not, but a shim must then look
            // at its earlier deadline).
            let xs: Vec<ExecutorId> =
                self.shim.shims.keys().filter(|(ww, _)| *ww == w).map(|(_, x)| x.clone()).collect();
            for x in xs {
                self.shim_look(w, x);
            }
        }
    }

    /// Worker `w` launched singleton `x` with `rule` (the launch's kill
    /// grace, if it set one): its shim starts.
    pub(super) fn shim_launch(
        &mut self,
        w: usize,
        x: &ExecutorId,
        rule: Disconnect,
        kill_grace_ms: Option<u64>,
    ) {
        if self.cfg.knobs.no_shim {
            return;
        }
        let grace = kill_grace_ms.map_or(ASSUMED_KILL_GRACE, Millis);
        let shim =
            Shim { rule, grace, start: self.now, kill_at: None, lapsed_with: Lapse::Running };
        self.shim.shims.insert((w, x.clone()), shim);
        self.shim_look(w, x.clone());
    }

    /// Schedules shim `(w, x)`'s next look at the word file: the first ms
    /// past its deadline (a lapse), or its SIGKILL once lapsed.
    fn shim_look(&mut self, w: usize, x: ExecutorId) {
        let Some(shim) = self.shim.shims.get(&(w, x.clone())) else { return };
        let at = match shim.kill_at {
            Some(at) => at,
            None => {
                let word = self.shim.words.get(&w).copied().unwrap_or(shim.start);
                word + Millis(shim.rule.stop_after_ms) + Millis(1)
            }
        };
        self.at(at, Ev::Shim { w, x });
    }

    /// Shim `(w, x)` wakes ([`Ev::Shim`]).
    pub(super) fn shim_event(&mut self, w: usize, x: ExecutorId) {
        let key = (w, x.clone());
        let Some(shim) = self.shim.shims.get(&key).cloned() else { return };
        if self.execs.get(&key) != Some(&true) {
            // The command ended (or its process is gone): so does the shim.
            self.shim.shims.remove(&key);
            return;
        }
        let p = &self.workers[w].p;
        if p.suspended(self.now) {
            // It sleeps with its host; its sleep (on the monotonic clock)
            // has at most a poll, or what was left of the grace, to run
            // when the host wakes.
            let from = p.suspended_from.unwrap_or(self.now);
            let left = match shim.kill_at {
                Some(at) => at.since(from.min(at)),
                None => shim.poll(),
            };
            if let Some(s) = self.shim.shims.get_mut(&key) {
                if s.kill_at.is_some() {
                    s.kill_at = Some(p.paused_until + left);
                }
            }
            let at = p.paused_until + left;
            self.at(at, Ev::Shim { w, x });
            return;
        }
        match shim.kill_at {
            None => {
                let word = self.shim.words.get(&w).copied().unwrap_or(shim.start);
                if self.now > word + Millis(shim.rule.stop_after_ms) {
                    // Lapsed: SIGTERM now (ignored, the worst case),
                    // SIGKILL after the grace.
                    self.log(|| format!("w{w} shim of {x}: lease lapsed (word {word:?})"));
                    let kill_at = self.now + shim.grace;
                    let p = &self.workers[w].p;
                    let lapsed_with = match (p.up, p.paused(self.now)) {
                        (false, _) => Lapse::Down,
                        (true, true) => Lapse::Paused,
                        (true, false) => Lapse::Running,
                    };
                    if let Some(s) = self.shim.shims.get_mut(&key) {
                        s.kill_at = Some(kill_at);
                        s.lapsed_with = lapsed_with;
                    }
                }
                self.shim_look(w, x);
            }
            Some(at) if self.now < at => self.shim_look(w, x),
            Some(_) => self.shim_stop(w, x, &shim),
        }
    }

    /// Shim `(w, x)` kills its command and records the cut-off end.
    fn shim_stop(&mut self, w: usize, x: ExecutorId, shim: &Shim) {
        let key = (w, x.clone());
        self.shim.shims.remove(&key);
        self.execs.insert(key.clone(), false);
        let state = ExecutorState::Failed { reason: cut_off_reason(shim.rule) };
        self.shim.ended.insert(key, state);
        let p = &self.workers[w].p;
        let (up, paused, gen) = (p.up, p.paused(self.now), p.gen);
        let stops = &mut self.shim.stops;
        match shim.lapsed_with {
            Lapse::Down => stops.down += 1,
            Lapse::Paused => stops.paused += 1,
            Lapse::Running => stops.running += 1,
        }
        self.log(|| {
            format!("w{w} shim of {x}: command stopped (process up {up}, paused {paused})")
        });
        if up {
            // Its supervisor sees the shim end and reads the status (a
            // paused process takes it in when it runs again).
            self.exec_event(w, gen, x, ExecWhat::ShimEnd);
        }
    }

    /// The end shim `(w, x)` recorded, if it stopped the command.
    pub(super) fn shim_end(&self, w: usize, x: &ExecutorId) -> Option<ExecutorState> {
        self.shim.ended.get(&(w, x.clone())).cloned()
    }

    /// A new process of worker `w` starts over its work directory, having
    /// read the shims' status files of the executors its records name: the
    /// others' are of no more use.
    pub(super) fn shim_ends_read(&mut self, w: usize) {
        self.shim.ended.retain(|(ww, _), _| *ww != w);
    }
}

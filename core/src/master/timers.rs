//! The master's deadlines, quinn-proto's way: the machine owns them and
//! answers [`Master::poll_timeout`]; the runtime feeds [`Event::Tick`] once
//! that time has passed, and every deadline that is due fires in that one
//! step, earliest first (ties in [`Timer`] order).
//!
//! A deadline exists exactly while its condition holds, by construction:
//!
//! * the sweep and the framework heartbeat are set when a leadership starts
//!   (its epoch durable) and re-set every time they fire, and the table is
//!   emptied when the leadership ends;
//! * the recovery deadline is set with them and removed when the recovery
//!   window closes, by its deadline or because every worker is back;
//! * the drain deadline follows the draining workers that still run
//!   executors (see `operator`);
//! * the log relays' and the restarts' deadlines are not stored at all: they
//!   are the earliest of the relays in flight and of the slots waiting out a
//!   backoff.
//!
//! A deadline that passes while the leader may not act (suspended) fires
//! and is set again one interval later, so nothing is lost and nothing
//! fires in a loop.
//!
//! Tests: `core/tests/restarts.rs` (the restart deadline), the node
//! harness's timer property (`core/tests/node_harness`), and every test
//! that advances a master to its `poll_timeout`.

use super::{Action, Master, Timer};
use crate::time::Millis;

impl Master {
    /// The earliest deadline of this machine; feed [`Event::Tick`] at or
    /// after it. `None` when nothing is pending (a standby). Asked after
    /// every step by the runtime, so it allocates nothing.
    ///
    /// [`Event::Tick`]: super::Event::Tick
    pub fn poll_timeout(&self) -> Option<Millis> {
        [
            self.timers.next(),
            self.log_relay_deadline(),
            self.restart_deadline(),
            self.deployment_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The deadline of `timer`, if it is pending.
    pub fn deadline(&self, timer: Timer) -> Option<Millis> {
        match timer {
            Timer::LogRelays => self.log_relay_deadline(),
            Timer::Restart => self.restart_deadline(),
            Timer::Deployment => self.deployment_deadline(),
            Timer::Sweep | Timer::Recovery | Timer::FrameworkHeartbeat | Timer::Drain => {
                self.timers.get(timer)
            }
        }
    }

    /// Every pending deadline, in [`Timer`] order.
    pub fn deadlines(&self) -> impl Iterator<Item = (Timer, Millis)> + '_ {
        let derived = [Timer::LogRelays, Timer::Restart, Timer::Deployment];
        let mut all: Vec<(Timer, Millis)> = self
            .timers
            .iter()
            .chain(derived.into_iter().filter_map(|t| Some((t, self.deadline(t)?))))
            .collect();
        all.sort();
        all.into_iter()
    }

    /// The restart deadline: the earliest backoff to end, while leading.
    fn restart_deadline(&self) -> Option<Millis> {
        self.leads().then(|| self.restart_waits.earliest()).flatten()
    }

    /// Fires every deadline due at `now`, earliest first.
    pub(super) fn on_tick(&mut self, now: Millis, out: &mut Vec<Action>) {
        let mut due: Vec<(Millis, Timer)> =
            self.deadlines().filter(|(_, at)| *at <= now).map(|(t, at)| (at, t)).collect();
        due.sort();
        for (_, timer) in due {
            self.fire(now, timer, out);
        }
    }

    fn fire(&mut self, now: Millis, timer: Timer, out: &mut Vec<Action>) {
        match timer {
            Timer::Sweep => {
                self.timers.set(Timer::Sweep, now + self.config.sweep_interval());
                // Also while RECOVERING: a worker that re-registered and
                // then went silent is as dead as in ALIVE. (Workers still
                // UNKNOWN wait for the recovery deadline.)
                if self.may_act() {
                    self.sweep(now, out);
                }
            }
            Timer::Recovery => {
                self.timers.cancel(Timer::Recovery);
                self.on_recovery_timeout(now, out);
                if self.recovering() {
                    // It passed while suspended: look again soon after
                    // resuming, not a whole window later.
                    self.timers.set(Timer::Recovery, now + self.config.heartbeat_interval);
                }
            }
            Timer::FrameworkHeartbeat => {
                self.timers.set(Timer::FrameworkHeartbeat, now + self.config.heartbeat_interval);
                if self.elected() && !self.suspended() {
                    self.framework_tick(now, out);
                }
            }
            Timer::LogRelays => self.log_relays_expire(now, out),
            Timer::Drain => {
                self.timers.cancel(Timer::Drain);
                self.on_drain_timer(now, out);
            }
            Timer::Restart => self.on_restart_timer(now, out),
            // The pass after this step looks again (`deployment`).
            Timer::Deployment => self.deployment_wake = None,
        }
    }

    /// A leadership starts at `now` (its epoch is durable): the sweep, the
    /// framework heartbeat and the end of the recovery window at
    /// `recovery_end`.
    pub(super) fn start_timers(&mut self, now: Millis, recovery_end: Millis) {
        self.timers.set(Timer::Sweep, now + self.config.sweep_interval());
        self.timers.set(Timer::Recovery, recovery_end);
        self.timers.set(Timer::FrameworkHeartbeat, now + self.config.heartbeat_interval);
    }
}

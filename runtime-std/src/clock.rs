//! The runtime clock: the `now` every pump of both runtimes feeds its node
//! (docs/design.md#identity-and-time-do-not-trust-the-wall-clock).
//!
//! It counts milliseconds since the pump started on a clock that keeps
//! counting while the host is suspended: `CLOCK_BOOTTIME` on Linux (and
//! Android), [`Instant`] elsewhere. `Instant` is `CLOCK_MONOTONIC`, which
//! stops during a suspend: after a resume, a leader's lease and acting
//! lease would look as fresh as when the host went to sleep. By the boot
//! clock they have run out, so a resumed leader sends no command until
//! ZooKeeper confirms its leadership again. Neither clock follows the wall
//! clock, so a stepped wall clock moves nothing here.
//!
//! Timers still wake through the runtime's own timers (`async_io::Timer`,
//! `recv_timeout`), which run on `CLOCK_MONOTONIC`: a pump turns the node's
//! deadline into a wait with [`RuntimeClock::wait_for`] or
//! [`RuntimeClock::wake_at`] every time round its loop, and the node checks
//! what is due against [`RuntimeClock::now`] on every `handle`. A wait is
//! never longer than [`MAX_TIMER_WAIT`], so a deadline that passed during a
//! suspend (the monotonic timer knows nothing of it) is noticed at most
//! that long after the resume; a wake before anything is due is a `Tick`
//! the node answers with nothing.

use regent_core::Millis;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The longest a pump sleeps before it looks at the boot clock again (the
/// most a deadline that passed while the host was suspended is noticed
/// late after the resume).
pub const MAX_TIMER_WAIT: Duration = Duration::from_secs(1);

/// Milliseconds since a pump started, counted while the host is suspended,
/// never going back (see the module documentation). One per pump.
#[derive(Debug)]
pub struct RuntimeClock {
    /// The boot clock's reading when the pump started.
    origin: Duration,
    /// The largest reading handed out, so none is ever smaller.
    last: AtomicU64,
}

impl RuntimeClock {
    /// A clock that reads 0 now.
    pub fn start() -> Self {
        RuntimeClock { origin: boot_time(), last: AtomicU64::new(0) }
    }

    /// The time since [`RuntimeClock::start`]: what a node's `handle` gets
    /// as `now`. Never smaller than an earlier reading.
    pub fn now(&self) -> Millis {
        let ms =
            u64::try_from(boot_time().saturating_sub(self.origin).as_millis()).unwrap_or(u64::MAX);
        Millis(self.last.fetch_max(ms, Ordering::Relaxed).max(ms))
    }

    /// The boot clock's reading, in ms, at machine time `at` of this
    /// clock: an absolute instant another process on this host can compare
    /// with its own [`boot_ms`] (the executor shim's lease,
    /// docs/design.md#issue-45).
    pub fn boot_ms(&self, at: Millis) -> u64 {
        u64::try_from(self.origin.as_millis()).unwrap_or(u64::MAX).saturating_add(at.0)
    }

    /// How long to wait for the deadline `at` (machine time): zero once it
    /// has passed, at most [`MAX_TIMER_WAIT`]; `None` without a deadline.
    pub fn wait_for(&self, at: Option<Millis>) -> Option<Duration> {
        at.map(|at| Duration::from_millis(at.0.saturating_sub(self.now().0)).min(MAX_TIMER_WAIT))
    }

    /// When a monotonic timer (`async_io::Timer::at`) should wake for the
    /// deadline `at`: [`RuntimeClock::wait_for`] from now. Compute it afresh
    /// every time round the pump's loop.
    pub fn wake_at(&self, at: Option<Millis>) -> Option<Instant> {
        self.wait_for(at).map(|wait| Instant::now() + wait)
    }
}

/// The boot clock now, in ms: `CLOCK_BOOTTIME` on Linux (suspended time
/// included, no wall-clock step moves it), the same clock
/// [`RuntimeClock::boot_ms`] answers on.
pub fn boot_ms() -> u64 {
    u64::try_from(boot_time().as_millis()).unwrap_or(u64::MAX)
}

/// The time since boot, suspended time included.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn boot_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    // The kernel keeps tv_nsec below 10^9 and the boot clock non-negative.
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

/// Elsewhere: the monotonic clock, from the first reading of the process.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn boot_time() -> Duration {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_clock_starts_at_zero_and_never_goes_back() {
        let clock = RuntimeClock::start();
        let mut last = clock.now();
        assert!(last.0 < 1_000, "a fresh clock reads about 0, not {last:?}");
        for _ in 0..10_000 {
            let now = clock.now();
            assert!(now >= last, "the clock went back from {last:?} to {now:?}");
            last = now;
        }
    }

    #[test]
    fn the_runtime_clock_counts_elapsed_time() {
        let clock = RuntimeClock::start();
        let before = clock.now();
        std::thread::sleep(Duration::from_millis(30));
        let after = clock.now();
        assert!(after.0 >= before.0 + 30, "30 ms slept, the clock moved {before:?} -> {after:?}");
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn the_runtime_clock_is_the_boot_clock() {
        // CLOCK_BOOTTIME is at least CLOCK_MONOTONIC (equal until the host
        // first suspends): the reading follows the boot clock.
        let mono = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        let boot = boot_time();
        assert!(boot >= Duration::new(mono.tv_sec as u64, mono.tv_nsec as u32));
    }

    #[test]
    fn boot_ms_of_now_is_the_boot_clock_now() {
        let clock = RuntimeClock::start();
        let before = boot_ms();
        let at = clock.boot_ms(clock.now());
        let after = boot_ms();
        // The origin is truncated to whole ms: at most 1 ms early.
        assert!(at + 1 >= before && at <= after, "{before} <= {at} <= {after}");
    }

    #[test]
    fn a_reading_never_goes_below_one_handed_out() {
        // A reading handed out earlier (say, of a clock with a larger
        // origin error) bounds every later one from below.
        let clock = RuntimeClock::start();
        clock.last.store(3_600_000, Ordering::Relaxed);
        assert_eq!(clock.now(), Millis(3_600_000));
    }

    #[test]
    fn waits_end_at_the_deadline_and_are_capped() {
        let clock = RuntimeClock::start();
        assert_eq!(clock.wait_for(None), None);
        assert_eq!(clock.wait_for(Some(Millis(0))), Some(Duration::ZERO), "a passed deadline");
        let wait = clock.wait_for(Some(Millis(clock.now().0 + 200))).expect("a deadline");
        assert!(wait > Duration::from_millis(100) && wait <= Duration::from_millis(200));
        assert_eq!(clock.wait_for(Some(Millis(u64::MAX))), Some(MAX_TIMER_WAIT));
        let at = clock.wake_at(Some(Millis(0))).expect("a deadline");
        assert!(at <= Instant::now(), "a passed deadline wakes at once");
    }
}

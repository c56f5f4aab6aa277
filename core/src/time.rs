//! Time as an input: milliseconds on a clock the caller owns.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, Sub};

/// A point in time or a duration, in milliseconds, on a clock chosen by the
/// runtime (monotonic in the daemons, virtual in the simulator).
///
/// The machines never read a clock: every `handle` call receives `now`.
/// Arithmetic saturates, so a clock that starts at zero cannot underflow.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Millis(pub u64);

impl Millis {
    /// Zero milliseconds.
    pub const ZERO: Millis = Millis(0);
    /// The largest representable time, used as "never".
    pub const MAX: Millis = Millis(u64::MAX);

    /// `n` seconds.
    pub const fn from_secs(n: u64) -> Millis {
        Millis(n.saturating_mul(1000))
    }

    /// The raw number of milliseconds.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// `self - earlier`, or zero when `earlier` is later.
    pub fn since(self, earlier: Millis) -> Millis {
        Millis(self.0.saturating_sub(earlier.0))
    }

    /// `self * k`, saturating.
    pub fn times(self, k: u64) -> Millis {
        Millis(self.0.saturating_mul(k))
    }
}

/// The wall clock (milliseconds since the Unix epoch) at local time `now`,
/// for a machine whose runtime read the wall clock once and passed it in:
/// `base` is that reading minus the local time it was taken at (a leader's,
/// fixed at its election). The one wall-clock helper of the machines.
///
/// Fallback: none is guessed. Without a reading (`base` is `None`: the
/// runtime passed 0, as the simulator and unit tests do, or the host's clock
/// read before 1970) the wall clock is unknown and this is `None`; each
/// caller says what unknown means where it stores a time (a finished
/// framework's `finished_at_ms` is 0, a framework's `registered_at_ms` is
/// `None`, a drain deadline counts on the local clock, which stays
/// consistent because it is read back with the same `base`).
pub fn wall_ms(base: Option<u64>, now: Millis) -> Option<u64> {
    base.map(|base| base.saturating_add(now.0))
}

impl Add for Millis {
    type Output = Millis;
    fn add(self, rhs: Millis) -> Millis {
        Millis(self.0.saturating_add(rhs.0))
    }
}

impl Sub for Millis {
    type Output = Millis;
    fn sub(self, rhs: Millis) -> Millis {
        Millis(self.0.saturating_sub(rhs.0))
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

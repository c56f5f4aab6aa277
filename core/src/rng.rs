//! Seeded randomness for jitter. The machines never touch global randomness
//! (docs/design.md#no-io-in-core): each owns a generator seeded from its `Config`.

use crate::time::Millis;

/// A deterministic generator: the same seed yields the same sequence.
#[derive(Clone, Debug)]
pub struct Jitter(fastrand::Rng);

impl Jitter {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Jitter(fastrand::Rng::with_seed(seed))
    }

    /// `base` scaled by a uniform factor in `[lo_pct, hi_pct]` percent.
    pub fn scale(&mut self, base: Millis, lo_pct: u64, hi_pct: u64) -> Millis {
        let pct = if hi_pct > lo_pct { self.0.u64(lo_pct..=hi_pct) } else { lo_pct };
        Millis(base.0.saturating_mul(pct) / 100)
    }

    /// A uniform value in `0..n` (`0` when `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.0.u64(0..n)
        }
    }
}

//! A machine's own deadline table: named timers, each with one deadline.

use crate::time::Millis;
use std::collections::BTreeMap;

/// Named deadlines. Setting a timer replaces its earlier deadline; a timer
/// fires once (it is removed when taken as due).
#[derive(Clone, Debug)]
pub struct Deadlines<T: Ord + Copy> {
    at: BTreeMap<T, Millis>,
}

impl<T: Ord + Copy> Default for Deadlines<T> {
    fn default() -> Self {
        Deadlines { at: BTreeMap::new() }
    }
}

impl<T: Ord + Copy> Deadlines<T> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `timer` to fire at `at` (replacing an earlier deadline).
    pub fn set(&mut self, timer: T, at: Millis) {
        self.at.insert(timer, at);
    }

    /// Forgets `timer`.
    pub fn cancel(&mut self, timer: T) {
        self.at.remove(&timer);
    }

    /// The deadline of `timer`, if set.
    pub fn get(&self, timer: T) -> Option<Millis> {
        self.at.get(&timer).copied()
    }

    /// The earliest deadline.
    pub fn next(&self) -> Option<Millis> {
        self.at.values().min().copied()
    }

    /// Removes and returns every timer due at `now`, earliest first (ties in
    /// timer order).
    pub fn take_due(&mut self, now: Millis) -> Vec<T> {
        self.take_due_at(now).into_iter().map(|(_, t)| t).collect()
    }

    /// Removes and returns every timer due at `now` with its deadline,
    /// earliest first (ties in timer order).
    pub fn take_due_at(&mut self, now: Millis) -> Vec<(Millis, T)> {
        let mut due: Vec<(Millis, T)> =
            self.at.iter().filter(|(_, at)| **at <= now).map(|(t, at)| (*at, *t)).collect();
        due.sort();
        for (_, t) in &due {
            self.at.remove(t);
        }
        due
    }

    /// Every timer and its deadline.
    pub fn iter(&self) -> impl Iterator<Item = (T, Millis)> + '_ {
        self.at.iter().map(|(t, at)| (*t, *at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_timers_fire_once_earliest_first() {
        let mut d = Deadlines::new();
        d.set(2u8, Millis(30));
        d.set(1u8, Millis(20));
        d.set(3u8, Millis(50));
        d.set(1u8, Millis(10));
        assert_eq!(d.next(), Some(Millis(10)));
        assert_eq!(d.take_due(Millis(30)), vec![1, 2]);
        assert_eq!(d.take_due(Millis(30)), Vec::<u8>::new());
        assert_eq!(d.next(), Some(Millis(50)));
        d.cancel(3);
        assert_eq!(d.next(), None);
    }
}

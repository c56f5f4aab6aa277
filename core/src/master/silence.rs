//! The ALIVE workers in the order they were last heard from: what lets the
//! DEAD sweep find the silent workers without looking at the others.
//!
//! A doubly linked list over a slab of slots (indices, no pointers): every
//! worker entry owns a slot for its lifetime, and the slot is *linked* while
//! the worker is ALIVE. Hearing from a worker moves its slot to the tail
//! (O(1)); the sweep walks from the head and stops at the first worker
//! heard from within the worker timeout, so a sweep costs the number of
//! silent workers, not the cluster's size. Each linked slot carries the time
//! it was last moved (its *key*); keys never decrease from head to tail
//! (a key is the later of `now` and the tail's key, so even a clock fed out
//! of order keeps the list sorted).
//!
//! Tests: the unit tests below (against a model, quickcheck),
//! core/tests/registration.rs (the DEAD sweep).

use crate::ids::WorkerId;
use crate::time::Millis;

/// No slot: the end of the list.
const NONE: u32 = u32::MAX;
/// The `prev` of a slot that is not in the list.
const UNLINKED: u32 = u32::MAX - 1;

/// One slot's place in the list: 16 bytes.
#[derive(Clone, Copy, Debug)]
struct Link {
    /// The previous slot, [`NONE`] at the head, [`UNLINKED`] when the slot
    /// is not in the list.
    prev: u32,
    next: u32,
    key: Millis,
}

impl Link {
    const OFF: Link = Link { prev: UNLINKED, next: NONE, key: Millis::ZERO };

    #[cfg(any(test, debug_assertions))]
    fn linked(&self) -> bool {
        self.prev != UNLINKED
    }
}

/// The slab and its list.
#[derive(Debug)]
pub(super) struct Silence {
    links: Vec<Link>,
    /// The worker owning each slot (`None` for a free slot).
    owners: Vec<Option<WorkerId>>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
}

impl Default for Silence {
    fn default() -> Self {
        Silence { links: Vec::new(), owners: Vec::new(), free: Vec::new(), head: NONE, tail: NONE }
    }
}

impl Silence {
    /// A slot for `worker`, not linked.
    pub(super) fn alloc(&mut self, worker: WorkerId) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.links[slot as usize] = Link::OFF;
                self.owners[slot as usize] = Some(worker);
                slot
            }
            None => {
                // A registry of 2^32 - 1 workers does not fit in memory long
                // before this: peer input cannot reach it (registrations
                // need connections), so it is a broken invariant.
                let slot = u32::try_from(self.links.len())
                    .ok()
                    .filter(|s| *s < UNLINKED)
                    .expect("fewer than 2^32 - 2 workers");
                self.links.push(Link::OFF);
                self.owners.push(Some(worker));
                slot
            }
        }
    }

    /// Gives `slot` back (unlinking it first).
    pub(super) fn free(&mut self, slot: u32) {
        self.unlink(slot);
        self.owners[slot as usize] = None;
        self.free.push(slot);
    }

    /// Whether `slot` is in the list.
    #[cfg(any(test, debug_assertions))]
    pub(super) fn is_linked(&self, slot: u32) -> bool {
        self.links[slot as usize].linked()
    }

    /// Takes `slot` out of the list (nothing if it is not in it).
    pub(super) fn unlink(&mut self, slot: u32) {
        let Link { prev, next, .. } = self.links[slot as usize];
        if prev == UNLINKED {
            return;
        }
        match prev {
            NONE => self.head = next,
            p => self.links[p as usize].next = next,
        }
        match next {
            NONE => self.tail = prev,
            n => self.links[n as usize].prev = prev,
        }
        self.links[slot as usize] = Link::OFF;
    }

    /// Puts `slot` at the tail, heard from at `now` (moving it if it is
    /// linked already).
    pub(super) fn push_back(&mut self, slot: u32, now: Millis) {
        if self.tail == slot {
            let l = &mut self.links[slot as usize];
            l.key = l.key.max(now);
            return;
        }
        self.unlink(slot);
        let key = match self.tail {
            NONE => now,
            t => now.max(self.links[t as usize].key),
        };
        self.links[slot as usize] = Link { prev: self.tail, next: NONE, key };
        match self.tail {
            NONE => self.head = slot,
            t => self.links[t as usize].next = slot,
        }
        self.tail = slot;
    }

    /// Every linked slot was heard from at `now` (a resumed leader gives
    /// every worker a fresh timeout). Keys stay sorted: all equal.
    pub(super) fn touch_all(&mut self, now: Millis) {
        let mut at = self.head;
        while at != NONE {
            let l = &mut self.links[at as usize];
            l.key = now;
            at = l.next;
        }
    }

    /// The owners of the linked slots not heard from within `floor` of
    /// `now` (`now - key > floor`), oldest first. The walk stops at the
    /// first slot heard from within `floor`: everything after it was heard
    /// from later still.
    pub(super) fn silent_longer_than(&self, now: Millis, floor: Millis) -> Vec<&WorkerId> {
        let mut v = Vec::new();
        let mut at = self.head;
        while at != NONE {
            let l = &self.links[at as usize];
            if now.since(l.key) <= floor {
                break;
            }
            if let Some(w) = &self.owners[at as usize] {
                v.push(w);
            }
            at = l.next;
        }
        v
    }

    /// The owners of the linked slots, head to tail, with their keys (for
    /// invariant checks).
    #[cfg(any(test, debug_assertions))]
    pub(super) fn linked(&self) -> Vec<(&WorkerId, Millis)> {
        let mut v = Vec::new();
        let mut at = self.head;
        let mut prev = NONE;
        while at != NONE {
            let l = &self.links[at as usize];
            assert!(l.linked() && l.prev == prev, "silence list links are consistent");
            v.push((self.owners[at as usize].as_ref().expect("a linked slot has an owner"), l.key));
            prev = at;
            at = l.next;
        }
        assert_eq!(self.tail, prev, "silence list tail");
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::{quickcheck, TestResult};

    fn w(i: u8) -> WorkerId {
        WorkerId(format!("w{i}"))
    }

    #[test]
    fn the_walk_stops_at_the_first_worker_heard_from_recently() {
        let mut s = Silence::default();
        let a = s.alloc(w(1));
        let b = s.alloc(w(2));
        let c = s.alloc(w(3));
        s.push_back(a, Millis(0));
        s.push_back(b, Millis(10));
        s.push_back(c, Millis(20));
        assert_eq!(s.silent_longer_than(Millis(25), Millis(10)), vec![&w(1), &w(2)]);
        s.push_back(a, Millis(25));
        assert_eq!(s.silent_longer_than(Millis(25), Millis(10)), vec![&w(2)]);
        s.free(b);
        assert!(s.silent_longer_than(Millis(25), Millis(10)).is_empty());
        let d = s.alloc(w(4));
        assert_eq!(d, b, "a freed slot is reused");
        assert!(!s.is_linked(d));
        s.touch_all(Millis(100));
        assert!(s.silent_longer_than(Millis(110), Millis(10)).is_empty());
        assert_eq!(s.silent_longer_than(Millis(111), Millis(10)), vec![&w(3), &w(1)]);
    }

    /// Against a model (each linked worker and when it was last heard from):
    /// with time moving forward, the walk finds exactly the workers silent
    /// for longer than the floor, oldest first.
    #[test]
    fn matches_a_model_under_random_operations() {
        fn prop(ops: Vec<(u8, u8, u8)>) -> TestResult {
            let mut s = Silence::default();
            let mut slots: Vec<Option<u32>> = vec![None; 16];
            let mut model: Vec<(u8, Millis)> = Vec::new();
            let mut now = Millis(0);
            for (op, who, dt) in ops {
                now = now + Millis(u64::from(dt % 8));
                let i = (who % 16) as usize;
                match op % 4 {
                    0 => {
                        let slot = *slots[i].get_or_insert_with(|| s.alloc(w(i as u8)));
                        s.push_back(slot, now);
                        model.retain(|(x, _)| *x as usize != i);
                        model.push((i as u8, now));
                    }
                    1 => {
                        if let Some(slot) = slots[i] {
                            s.unlink(slot);
                            model.retain(|(x, _)| *x as usize != i);
                        }
                    }
                    2 => {
                        if let Some(slot) = slots[i].take() {
                            s.free(slot);
                            model.retain(|(x, _)| *x as usize != i);
                        }
                    }
                    _ => {
                        let floor = Millis(u64::from(dt % 16));
                        let got: Vec<WorkerId> =
                            s.silent_longer_than(now, floor).into_iter().cloned().collect();
                        let want: Vec<WorkerId> = model
                            .iter()
                            .filter(|(_, t)| now.since(*t) > floor)
                            .map(|(x, _)| w(*x))
                            .collect();
                        if got != want {
                            return TestResult::error(format!("{got:?} != {want:?}"));
                        }
                    }
                }
                let linked: Vec<WorkerId> =
                    s.linked().into_iter().map(|(x, _)| x.clone()).collect();
                let want: Vec<WorkerId> = model.iter().map(|(x, _)| w(*x)).collect();
                if linked != want {
                    return TestResult::error(format!("order {linked:?} != {want:?}"));
                }
            }
            TestResult::passed()
        }
        quickcheck(prop as fn(Vec<(u8, u8, u8)>) -> TestResult);
    }
}

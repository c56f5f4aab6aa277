//! The placement candidates by attribute value (docs/design.md#issue-46):
//! one slot of a group spread over an attribute, with a placement of its
//! own or with constraints, placed without a scan of every candidate.
//!
//! The index holds exactly the registry's placement candidates
//! ([`super::workers::Registry::placeable`]: ALIVE, connected, neither
//! cordoned nor draining, with room for one more executor), each
//!
//! * in one set of every candidate ordered by what it has free (free
//!   cores, free memory, id), and
//! * per attribute it has, in that order among the candidates with its
//!   value, and in id order among them.
//!
//! It is kept as workers register, leave, change state or connection, and
//! as executors take and give back cores and memory (a step of
//! `O(attributes · log W)` per change), and debug builds rebuild it from
//! the registry after every step and compare (`Registry::check`).
//!
//! What one slot costs ([`ByAttribute::best`], [`ByAttribute::next_after`]):
//! a logarithmic step per set looked at, plus the candidates in it passed
//! over because they do not fit (ports, named resources, a user, the other
//! constraints, memory under `pack`). The sets looked at: per value of the
//! `spread` attribute, in the order of the group's executors there (the
//! fewest first), until a value has a fitting candidate and the next holds
//! more; without `spread`, the values of the constraint that allows the
//! fewest candidates (`disk=ssd`, `rack in [r1, r2]`, `gpu`); a group with
//! only negative constraints (`!=`, `not in`) walks every candidate in
//! order, as before. The choice is exactly the one a scan of every
//! candidate makes (see [`super::executors`]): among the fitting
//! candidates whose `spread` value has the fewest of the group's live
//! executors, `pack` takes the fullest (fewest free cores, then memory),
//! `spread` the emptiest, ties to the lowest id; the master's own
//! `spread` is a round robin in id order from the last worker chosen.
//!
//! Tests: core/tests/refill.rs (the single path against a brute force and
//! the batch plan on random clusters), and every suite through the debug
//! check.

use crate::policy::{Constraint, ConstraintOp, Placement};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

/// A worker's id, shared by every set that holds it.
pub(super) type Name = Arc<str>;

/// A candidate by what it has free: (free cores, free memory in MiB, id).
type FreeKey = (u32, u64, Name);

/// The placement candidates by what they have free, and per attribute
/// value (see the module documentation).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ByAttribute {
    /// Every candidate, by what it has free.
    free: BTreeSet<FreeKey>,
    /// Per attribute name, the candidates that have it.
    attributes: FxHashMap<String, Values>,
}

/// The candidates with one attribute, by its value.
#[derive(Debug, Default, PartialEq, Eq)]
struct Values {
    /// How many candidates have the attribute (any value).
    count: usize,
    /// Per value, the candidates that have it.
    values: FxHashMap<String, Sets>,
}

/// The candidates with one attribute value, in both orders.
#[derive(Debug, Default, PartialEq, Eq)]
struct Sets {
    /// By what they have free.
    free: BTreeSet<FreeKey>,
    /// By id.
    names: BTreeSet<Name>,
}

/// Where a single slot looks: a set ordered by what its candidates have
/// free, or every candidate lacking an attribute (those count as the
/// empty value of a `spread` attribute).
#[derive(Clone, Copy)]
enum Source<'a> {
    Set(&'a BTreeSet<FreeKey>),
    Lacking(&'a str),
}

/// The attributes of a worker as constraints and `spread` read them: the
/// first of each name (attributes are sorted by name; a repeated name's
/// later values are never read).
fn first_of_each(attributes: &[(String, String)]) -> impl Iterator<Item = (&String, &String)> {
    attributes
        .iter()
        .enumerate()
        .filter(|(i, (k, _))| *i == 0 || attributes[i - 1].0 != *k)
        .map(|(_, (k, v))| (k, v))
}

impl ByAttribute {
    /// Adds candidate `name` with `free` (cores, memory) and `attributes`.
    pub(super) fn insert(
        &mut self,
        name: &Name,
        free: (u32, u64),
        attributes: &[(String, String)],
    ) {
        let key = (free.0, free.1, name.clone());
        for (a, v) in first_of_each(attributes) {
            let values = self.attributes.entry(a.clone()).or_default();
            values.count += 1;
            let sets = values.values.entry(v.clone()).or_default();
            sets.free.insert(key.clone());
            sets.names.insert(name.clone());
        }
        self.free.insert(key);
    }

    /// Takes candidate `name` out; `free` and `attributes` are what it was
    /// inserted with.
    pub(super) fn remove(
        &mut self,
        name: &Name,
        free: (u32, u64),
        attributes: &[(String, String)],
    ) {
        let key = (free.0, free.1, name.clone());
        for (a, v) in first_of_each(attributes) {
            let Some(values) = self.attributes.get_mut(a.as_str()) else { continue };
            if let Some(sets) = values.values.get_mut(v.as_str()) {
                if sets.names.remove(name) {
                    values.count -= 1;
                }
                sets.free.remove(&key);
                if sets.names.is_empty() {
                    values.values.remove(v.as_str());
                }
            }
            if values.values.is_empty() {
                self.attributes.remove(a.as_str());
            }
        }
        self.free.remove(&key);
    }

    /// Candidate `name` with `attributes` now has `to` free, not `from`.
    pub(super) fn rekey(
        &mut self,
        name: &Name,
        from: (u32, u64),
        to: (u32, u64),
        attributes: &[(String, String)],
    ) {
        let old = (from.0, from.1, name.clone());
        let new = (to.0, to.1, name.clone());
        for (a, v) in first_of_each(attributes) {
            let sets = self
                .attributes
                .get_mut(a.as_str())
                .and_then(|values| values.values.get_mut(v.as_str()));
            if let Some(sets) = sets {
                sets.free.remove(&old);
                sets.free.insert(new.clone());
            }
        }
        self.free.remove(&old);
        self.free.insert(new);
    }

    /// The sets of the values the positive constraint (`=`, `in`, a bare
    /// name) that allows the fewest candidates allows; `None` if no
    /// constraint is positive. Every candidate meeting the constraints is
    /// in one of them.
    fn narrowest(&self, constraints: &[Constraint]) -> Option<Vec<&Sets>> {
        let mut best: Option<(usize, Vec<&Sets>)> = None;
        for c in constraints {
            let values = self.attributes.get(c.attribute.as_str());
            let sets: Vec<&Sets> = match &c.op {
                ConstraintOp::Equals(v) => {
                    values.and_then(|vs| vs.values.get(v.as_str())).into_iter().collect()
                }
                ConstraintOp::In(list) => {
                    let mut list: Vec<&String> = list.iter().collect();
                    list.sort();
                    list.dedup();
                    list.iter().filter_map(|v| values?.values.get(v.as_str())).collect()
                }
                ConstraintOp::Present => {
                    values.map(|vs| vs.values.values().collect()).unwrap_or_default()
                }
                ConstraintOp::NotEquals(_) | ConstraintOp::NotIn(_) => continue,
            };
            let size = sets.iter().map(|s| s.names.len()).sum();
            if best.as_ref().is_none_or(|(n, _)| size < *n) {
                best = Some((size, sets));
            }
        }
        best.map(|(_, sets)| sets)
    }

    /// The candidate one slot of a group goes to: among those `ok` accepts
    /// (it fits the slot's `cores` and `memory` and everything else it
    /// asks, and meets `constraints`), the ones whose value of `spread`
    /// (if any; `""` for a candidate without it) has the fewest of the
    /// group's executors (`count`), then by `placement` (`pack`: the
    /// fullest; `spread`: the emptiest), then the lowest id. `ok` is also
    /// told an attribute the candidate must lack (the empty value of
    /// `spread`), if any.
    pub(super) fn best(
        &self,
        placement: Placement,
        spread: Option<&str>,
        constraints: &[Constraint],
        (cores, memory): (u32, u64),
        count: impl Fn(&str) -> u32,
        ok: impl Fn(&str, Option<&str>) -> bool,
    ) -> Option<Name> {
        let mut sources: Vec<(u32, &str, Source<'_>)> = Vec::new();
        match spread {
            Some(a) => {
                // Values every worker having them fails a constraint on.
                let allowed = |v: Option<&str>| {
                    constraints.iter().filter(|c| c.attribute == a).all(|c| c.allows_value(v))
                };
                let values = self.attributes.get(a);
                for (v, sets) in values.iter().flat_map(|vs| vs.values.iter()) {
                    if allowed(Some(v.as_str())) {
                        sources.push((count(v), v, Source::Set(&sets.free)));
                    }
                }
                if allowed(None) && values.map_or(0, |vs| vs.count) < self.free.len() {
                    sources.push((count(""), "", Source::Lacking(a)));
                }
            }
            None => match self.narrowest(constraints) {
                Some(sets) => {
                    sources.extend(sets.into_iter().map(|s| (0, "", Source::Set(&s.free))))
                }
                None => sources.push((0, "", Source::Set(&self.free))),
            },
        }
        sources.sort_by_key(|(n, _, _)| *n);
        let order = |c: u32, m: u64| match placement {
            Placement::Pack => (c, m),
            Placement::Spread => (u32::MAX - c, u64::MAX - m),
        };
        let empty: Name = Arc::from("");
        let mut best: Option<(u32, (u32, u64), Name)> = None;
        for (n, _, source) in sources {
            if best.as_ref().is_some_and(|(b, _, _)| *b < n) {
                break;
            }
            let (set, lacking) = match source {
                Source::Set(set) => (set, None),
                Source::Lacking(a) => (&self.free, Some(a)),
            };
            let accept = |name: &str| ok(name, lacking);
            let Some((c, m, name)) = first_fit(set, placement, (cores, memory), &empty, accept)
            else {
                continue;
            };
            let better = best.as_ref().is_none_or(|(bn, bk, bname)| {
                (n, order(c, m), name.as_ref()) < (*bn, *bk, bname.as_ref())
            });
            if better {
                best = Some((n, order(c, m), name));
            }
        }
        best.map(|(_, _, name)| name)
    }

    /// The master's own `spread` for a constrained slot: the first
    /// candidate `ok` accepts in id order after `after` (from the first
    /// when `None`), wrapping around, among the values the narrowest
    /// positive constraint allows. `None` when no constraint is positive
    /// (the caller walks every candidate).
    pub(super) fn next_after(
        &self,
        constraints: &[Constraint],
        after: Option<&str>,
        ok: impl Fn(&str) -> bool,
    ) -> Option<Option<Name>> {
        let sets = self.narrowest(constraints)?;
        let first = |range: (Bound<&str>, Bound<&str>)| {
            sets.iter()
                .filter_map(|s| s.names.range::<str, _>(range).find(|n| ok(n)))
                .min()
                .cloned()
        };
        let Some(after) = after else {
            return Some(first((Bound::Unbounded, Bound::Unbounded)));
        };
        Some(
            first((Bound::Excluded(after), Bound::Unbounded))
                .or_else(|| first((Bound::Unbounded, Bound::Included(after)))),
        )
    }
}

/// The first candidate of `set` in `placement`'s order (`pack`: fewest
/// free cores, then memory; `spread`: most; then lowest id) that has
/// `cores` and `memory` free and that `ok` accepts. `empty` is the
/// lowest id, for ranges.
fn first_fit(
    set: &BTreeSet<FreeKey>,
    placement: Placement,
    (cores, memory): (u32, u64),
    empty: &Name,
    ok: impl Fn(&str) -> bool,
) -> Option<FreeKey> {
    match placement {
        Placement::Pack => set
            .range((cores, memory, empty.clone())..)
            .find(|(_, m, name)| *m >= memory && ok(name))
            .cloned(),
        Placement::Spread => {
            // Groups of equal (free cores, free memory), the most first;
            // within one, in id order.
            let mut upper = Bound::Unbounded;
            loop {
                let (c, m) = {
                    let k = set.range((Bound::Unbounded, upper)).next_back()?;
                    (k.0, k.1)
                };
                if c < cores {
                    return None;
                }
                let low = (c, m, empty.clone());
                if m >= memory {
                    let found = set
                        .range(low.clone()..)
                        .take_while(|k| k.0 == c && k.1 == m)
                        .find(|k| ok(&k.2));
                    if let Some(k) = found {
                        return Some(k.clone());
                    }
                }
                upper = Bound::Excluded(low);
            }
        }
    }
}

//! What each tenant and framework holds, and the weighted DRF order the
//! leader offers capacity in (docs/tenants.md, docs/design.md#issue-44).
//!
//! * **Use.** What the live (not terminal) executors of each framework and
//!   tenant hold — cores, memory, named resources — kept as executors are
//!   added, change state and are removed (the three places the master
//!   changes its executor index), so each change costs O(1); rebuilt from
//!   the executors a new leader adopts, so it is exact across a failover;
//!   debug builds check it against the executors after every step.
//!   A framework's use is charged to the tenant it had when its first
//!   live executor was counted (a framework's tenant never changes; its
//!   executors may outlive it while they are killed).
//! * **Order.** A tenant's dominant share is the largest, over cores,
//!   memory and every named resource (gpu, ...), of what it holds over what
//!   the ALIVE workers offer; divided by its weight it orders the tenants
//!   (lowest first). Within a tenant,
//!   frameworks go by their own dominant share — except in the implicit
//!   `default` tenant (no `tenant set` record), where they keep framework
//!   id order, so a cluster without tenants places exactly as before.
//!
//! Tests: core/tests/tenants.rs, core/tests/drf_named.rs; every step's
//! debug check.

use crate::ids::FrameworkId;
use crate::protocol::tenants::Held;
use rustc_hash::FxHashMap;

/// What one framework's live executors hold, and the tenant it is charged to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct FrameworkUse {
    tenant: String,
    held: Held,
    live: u32,
}

/// What the live executors of each framework and tenant hold.
#[derive(Debug, Default)]
pub(super) struct Usage {
    frameworks: FxHashMap<FrameworkId, FrameworkUse>,
    tenants: FxHashMap<String, Held>,
}

/// `held += need` (`add`) or `held -= need`.
fn apply(held: &mut Held, need: &Held, add: bool) {
    let step =
        |x: &mut u64, n: u64| *x = if add { x.saturating_add(n) } else { x.saturating_sub(n) };
    step(&mut held.cores, need.cores);
    step(&mut held.memory_mb, need.memory_mb);
    for (name, n) in &need.resources {
        match held.resources.binary_search_by(|(r, _)| r.as_str().cmp(name.as_str())) {
            Ok(i) => {
                step(&mut held.resources[i].1, *n);
                if held.resources[i].1 == 0 {
                    held.resources.remove(i);
                }
            }
            Err(i) if add && *n > 0 => held.resources.insert(i, (name.clone(), *n)),
            Err(_) => {}
        }
    }
}

impl Usage {
    /// A live executor of `fid` (of tenant `tenant`, unless already
    /// charged elsewhere) holding `need` was counted.
    pub(super) fn add(&mut self, fid: &FrameworkId, tenant: &str, need: &Held) {
        let f = self.frameworks.entry(fid.clone()).or_insert_with(|| FrameworkUse {
            tenant: tenant.to_owned(),
            ..FrameworkUse::default()
        });
        f.live += 1;
        apply(&mut f.held, need, true);
        let t = self.tenants.entry(f.tenant.clone()).or_default();
        apply(t, need, true);
    }

    /// A live executor of `fid` holding `need` ended or was removed.
    pub(super) fn sub(&mut self, fid: &FrameworkId, need: &Held) {
        let Some(f) = self.frameworks.get_mut(fid) else { return };
        f.live = f.live.saturating_sub(1);
        apply(&mut f.held, need, false);
        let tenant = f.tenant.clone();
        if f.live == 0 {
            self.frameworks.remove(fid);
        }
        if let Some(t) = self.tenants.get_mut(&tenant) {
            apply(t, need, false);
            if *t == Held::default() {
                self.tenants.remove(&tenant);
            }
        }
    }

    /// What tenant `name` holds.
    pub(super) fn tenant(&self, name: &str) -> Held {
        self.tenants.get(name).cloned().unwrap_or_default()
    }

    /// What framework `fid` holds.
    pub(super) fn framework(&self, fid: &FrameworkId) -> Held {
        self.frameworks.get(fid).map(|f| f.held.clone()).unwrap_or_default()
    }

    /// The frameworks with live executors.
    pub(super) fn live_frameworks(&self) -> impl Iterator<Item = &FrameworkId> {
        self.frameworks.keys()
    }

    /// Forgets everything (leadership ends).
    pub(super) fn clear(&mut self) {
        self.frameworks.clear();
        self.tenants.clear();
    }

    /// Debug builds: the use equals what `live` executors hold, charged to
    /// `tenant_of` their framework.
    #[cfg(debug_assertions)]
    pub(super) fn check<'a>(
        &self,
        live: impl Iterator<Item = (&'a FrameworkId, Held)>,
        tenant_of: impl Fn(&FrameworkId) -> Option<String>,
    ) {
        let mut want = Usage::default();
        for (fid, held) in live {
            let charged = self.frameworks.get(fid).map(|f| f.tenant.clone());
            let tenant = charged.or_else(|| tenant_of(fid)).unwrap_or_default();
            want.add(fid, &tenant, &held);
        }
        assert_eq!(self.frameworks, want.frameworks, "use by framework");
        // A tenant whose executors hold nothing may or may not have an
        // entry (executors of no cores and no memory).
        let held = |m: &FxHashMap<String, Held>| -> std::collections::BTreeMap<String, Held> {
            m.iter()
                .filter(|(_, h)| **h != Held::default())
                .map(|(k, h)| (k.clone(), h.clone()))
                .collect()
        };
        assert_eq!(held(&self.tenants), held(&want.tenants), "use by tenant");
        for (fid, f) in &self.frameworks {
            if let Some(t) = tenant_of(fid) {
                assert_eq!(f.tenant, t, "framework {fid} is charged to its tenant");
            }
        }
    }
}

/// A dominant share over `weight` ([`crate::preemption::weighted`]): the
/// largest, over cores, memory and every named resource, of what `held`
/// takes of what the ALIVE workers offer (a dimension the cluster has none
/// of counts as full when anything holds it) — the same share preemption
/// judges fairness by.
pub(super) fn weighted_share(held: &Held, capacity: &Capacity, weight: u32) -> u64 {
    crate::preemption::weighted(capacity.dominant_ppm(held), weight)
}

/// The capacity of the cluster's ALIVE workers, by dimension: the
/// denominators of dominant shares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Capacity {
    /// Cores.
    pub(super) cores: u64,
    /// Memory, in MiB.
    pub(super) memory_mb: u64,
    /// Named resources' addresses by name.
    pub(super) resources: std::collections::BTreeMap<String, u64>,
}

impl Capacity {
    /// The dominant share of `held` in millionths: the largest of held /
    /// capacity over every dimension, named resources included
    /// ([`crate::preemption::share_ppm`]: a dimension the cluster has none
    /// of counts as fully used when anything holds it), above 10^6 when
    /// more is held than the ALIVE workers offer.
    pub(super) fn dominant_ppm(&self, held: &Held) -> u64 {
        use crate::preemption::share_ppm;
        let mut best =
            share_ppm(held.cores, self.cores).max(share_ppm(held.memory_mb, self.memory_mb));
        for (name, n) in &held.resources {
            best = best.max(share_ppm(*n, self.resources.get(name).copied().unwrap_or(0)));
        }
        best
    }

    /// [`Capacity::dominant_ppm`], at most 10^6 (what a view shows).
    pub(super) fn dominant_share_ppm(&self, held: &Held) -> u32 {
        self.dominant_ppm(held).min(1_000_000) as u32
    }
}

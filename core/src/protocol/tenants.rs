//! Tenants on the wire and in the store (docs/tenants.md,
//! docs/design.md#issue-44): a tenant's guarantee, limit and weight
//! ([`Tenant`], set by `regent tenant set`, [`crate::protocol::Message::SetTenant`])
//! and what the leader shows of each ([`TenantView`],
//! [`crate::protocol::Message::TenantsReply`]).
//!
//! Every dimension of a guarantee or a limit is optional: unset means no
//! guarantee, or no limit, in it.

use serde::{Deserialize, Serialize};

/// The tenant of a framework that names none, and whose credential names
/// none.
pub const DEFAULT_TENANT: &str = "default";

/// The longest tenant name, in bytes.
pub const MAX_TENANT_NAME_BYTES: usize = 64;

/// The largest weight a tenant may have.
pub const MAX_TENANT_WEIGHT: u32 = 1_000;

/// How many tenants a cluster may have (each is a record and a line of
/// every `TenantsReply`).
pub const MAX_TENANTS: usize = 1_000;

/// Why a tenant, a tenant name or a dimension is refused, in words naming
/// what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TenantError(pub String);

/// An amount in each dimension the cluster accounts, each optional.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dims {
    /// Cores.
    pub cores: Option<u64>,
    /// Memory, in MiB.
    pub memory_mb: Option<u64>,
    /// Named resources (`gpu`, ...) by name, in name order, each at most
    /// once.
    pub resources: Vec<(String, u64)>,
}

impl Dims {
    /// Whether no dimension is set.
    pub fn is_empty(&self) -> bool {
        self.cores.is_none() && self.memory_mb.is_none() && self.resources.is_empty()
    }

    /// The amount set for dimension `name` (`cores`, `memory` in MiB, or a
    /// named resource), if set.
    pub fn get(&self, name: &str) -> Option<u64> {
        match name {
            "cores" => self.cores,
            "memory" => self.memory_mb,
            _ => self.resources.iter().find(|(n, _)| n == name).map(|(_, v)| *v),
        }
    }

    /// `cores=16,memory=64G,gpu=2`, as the CLI takes and shows it; `none`
    /// when nothing is set.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = self.cores {
            parts.push(format!("cores={c}"));
        }
        if let Some(m) = self.memory_mb {
            parts.push(format!("memory={}", describe_memory(m)));
        }
        for (n, v) in &self.resources {
            parts.push(format!("{n}={v}"));
        }
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(",")
        }
    }

    /// Parses `cores=16,memory=64G,gpu=2` (memory in MiB, or with a `K`,
    /// `M`, `G` or `T` suffix; `none` or the empty string: nothing set).
    pub fn parse(s: &str) -> Result<Dims, TenantError> {
        Dims::parse_text(s).map_err(TenantError)
    }

    fn parse_text(s: &str) -> Result<Dims, String> {
        let mut dims = Dims::default();
        let s = s.trim();
        if s.is_empty() || s == "none" {
            return Ok(dims);
        }
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?}: expected NAME=AMOUNT (cores=16,memory=64G)"))?;
            let (k, v) = (k.trim(), v.trim());
            let amount = |v: &str| {
                v.parse::<u64>().map_err(|_| format!("{k}={v}: the amount must be a whole number"))
            };
            let seen = dims.get(k).is_some();
            if seen {
                return Err(format!("{k} given twice"));
            }
            match k {
                "cores" => dims.cores = Some(amount(v)?),
                "memory" | "memory_mb" => dims.memory_mb = Some(parse_memory(v).map_err(|e| e.0)?),
                name if crate::resources::is_name(name) => {
                    dims.resources.push((name.to_owned(), amount(v)?))
                }
                other => {
                    return Err(format!(
                    "unknown dimension {other:?} (cores, memory, or a resource name such as gpu)"
                ))
                }
            }
        }
        dims.resources.sort();
        Ok(dims)
    }
}

/// `64G`, `512M`, `1T`: MiB written in the largest unit that divides it.
pub fn describe_memory(mb: u64) -> String {
    if mb >= 1 << 20 && mb.is_multiple_of(1 << 20) {
        format!("{}T", mb >> 20)
    } else if mb >= 1024 && mb.is_multiple_of(1024) {
        format!("{}G", mb >> 10)
    } else {
        format!("{mb}M")
    }
}

/// Memory in MiB from `64G`, `512M`, `512` (MiB), `1T`, `2048K`.
pub fn parse_memory(v: &str) -> Result<u64, TenantError> {
    let bad = || TenantError(format!("memory={v}: expected MiB, or a number with K, M, G or T"));
    let (num, mult_kb): (&str, u64) = match v.char_indices().last() {
        Some((i, 'K' | 'k')) => (&v[..i], 1),
        Some((i, 'M' | 'm')) => (&v[..i], 1 << 10),
        Some((i, 'G' | 'g')) => (&v[..i], 1 << 20),
        Some((i, 'T' | 't')) => (&v[..i], 1 << 30),
        _ => (v, 1 << 10),
    };
    let n: u64 = num.trim().parse().map_err(|_| bad())?;
    n.checked_mul(mult_kb).map(|kb| kb / 1024).ok_or_else(bad)
}

/// A tenant: a guarantee and a limit per dimension, and a weight in the
/// cluster's fair sharing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tenant {
    /// Its name ([`check_tenant_name`]).
    pub name: String,
    /// What it is guaranteed (shown; the base of preemption).
    pub guarantee: Dims,
    /// The most its live executors may hold: a slot that would pass it
    /// waits.
    pub limit: Dims,
    /// Its weight in weighted DRF (1 to [`MAX_TENANT_WEIGHT`]; default 1).
    pub weight: u32,
}

impl Tenant {
    /// A tenant with no guarantee, no limit and weight 1.
    pub fn new(name: impl Into<String>) -> Tenant {
        Tenant { name: name.into(), guarantee: Dims::default(), limit: Dims::default(), weight: 1 }
    }

    /// Why this tenant may not be set, if it may not: a bad name, a
    /// weight out of range, a resource named twice or too many kinds.
    pub fn check(&self) -> Result<(), TenantError> {
        self.check_text().map_err(TenantError)
    }

    fn check_text(&self) -> Result<(), String> {
        check_tenant_name(&self.name).map_err(|e| e.0)?;
        if self.weight == 0 || self.weight > MAX_TENANT_WEIGHT {
            return Err(format!(
                "weight {} of tenant {}: it must be 1 to {MAX_TENANT_WEIGHT}",
                self.weight, self.name
            ));
        }
        for (what, d) in [("guarantee", &self.guarantee), ("limit", &self.limit)] {
            if d.resources.len() > crate::resources::MAX_RESOURCE_KINDS {
                return Err(format!(
                    "{what} of tenant {} names {} resources; the most is {}",
                    self.name,
                    d.resources.len(),
                    crate::resources::MAX_RESOURCE_KINDS
                ));
            }
            for (i, (n, _)) in d.resources.iter().enumerate() {
                if !crate::resources::is_name(n) {
                    return Err(format!("{what} of tenant {}: bad resource name {n:?}", self.name));
                }
                if d.resources[..i].iter().any(|(m, _)| m == n) {
                    return Err(format!("{what} of tenant {} names {n} twice", self.name));
                }
            }
        }
        Ok(())
    }
}

/// Why `name` is not a tenant name, if it is not: 1 to
/// [`MAX_TENANT_NAME_BYTES`] ASCII letters, digits, `-`, `_` or `.`,
/// starting with a letter or digit.
pub fn check_tenant_name(name: &str) -> Result<(), TenantError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_TENANT_NAME_BYTES
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(TenantError(format!(
            "tenant name {name:?} must be 1 to {MAX_TENANT_NAME_BYTES} ASCII letters, digits, \
             '-', '_' or '.', starting with a letter or digit"
        )))
    }
}

/// What the live executors of a tenant (or a framework) hold.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// Cores.
    pub cores: u64,
    /// Memory, in MiB.
    pub memory_mb: u64,
    /// Named resources by name, in name order (none held: left out).
    pub resources: Vec<(String, u64)>,
}

impl Held {
    /// How much of dimension `name` (`cores`, `memory`, a resource) is held.
    pub fn get(&self, name: &str) -> u64 {
        match name {
            "cores" => self.cores,
            "memory" => self.memory_mb,
            _ => self.resources.iter().find(|(n, _)| n == name).map_or(0, |(_, v)| *v),
        }
    }
}

/// One tenant as the leader shows it ([`crate::protocol::Message::TenantsReply`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantView {
    /// The tenant (the implicit `default` tenant, without a record: no
    /// guarantee, no limit, weight 1).
    pub tenant: Tenant,
    /// Whether an operator set it (`false`: the implicit `default`, or a
    /// tenant named by frameworks only).
    pub set: bool,
    /// What its live executors hold.
    pub held: Held,
    /// Its dominant share (the largest of held / cluster capacity over the
    /// dimensions), in millionths, before its weight.
    pub dominant_share_ppm: u32,
    /// Its frameworks.
    pub frameworks: u32,
}

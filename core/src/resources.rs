//! Named resources (GPUs and the like): a worker offers addresses of each
//! kind (`regent worker --resource gpu=0,1,2,3`, or a discovery script that
//! prints Spark's `{"name":"gpu","addresses":["0","1"]}`), a group asks for
//! an amount of each (`resources = { gpu = 1 }`), and every executor of the
//! group gets addresses of its own.
//!
//! * **The leader counts, the worker picks**, as for ports
//!   ([`crate::ports`]): the leader treats a worker's addresses of a kind
//!   like its cores (an executor is placed only where enough of each kind
//!   are free); the worker picks the addresses when it starts the executor
//!   ([`allocate`]: the first free ones in its offer's order, never one a
//!   live executor of its own holds), puts them in the executor's
//!   environment ([`env()`]: `REGENT_RESOURCE_GPU=2`, and for `gpu`
//!   `CUDA_VISIBLE_DEVICES=2`) and reports them with the executor
//!   ([`crate::protocol::ExecutorReport::resources`]). The worker is the one
//!   place that knows every live executor on it, including one a new leader
//!   has not heard of yet (the report behind a registration taken before
//!   it, docs/design.md#one-executor-per-slot), so no address is ever given to two live executors,
//!   not even across a failover.
//! * **Kept across failures.** The addresses are in the executor's running
//!   record on its worker, so a restarted worker re-adopts the executor with
//!   them; a new leader learns them from the workers' registrations.
//! * Addresses are opaque strings (a device index, a PCI address, a UUID):
//!   regent does not open devices, it only keeps two executors off one.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// Most kinds of resource one worker offers, or one group asks for.
pub const MAX_RESOURCE_KINDS: usize = 16;
/// Most addresses of one kind a worker offers (and so the most a group
/// may ask for).
pub const MAX_ADDRESSES: usize = 256;
/// Longest resource name, in bytes.
pub const MAX_RESOURCE_NAME_BYTES: usize = 32;
/// Longest address, in bytes.
pub const MAX_ADDRESS_BYTES: usize = 64;

/// The addresses of one kind of resource a worker offers.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Resource {
    /// Its name (`gpu`).
    pub name: String,
    /// Its addresses, in the order they are handed out.
    pub addresses: Vec<String>,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.name, self.addresses.join(","))
    }
}

/// Addresses given to one executor, by resource name, in the group's
/// order.
pub type Assigned = Vec<(String, Vec<String>)>;

/// Why a worker's offer, or a group's request, of named resources is
/// refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResourcesProblem {
    /// Not `NAME=VALUE`.
    #[error("{0:?} is not NAME=VALUE (for example gpu=0,1 on a worker, gpu=1 for a group)")]
    NotAssignment(String),
    /// A name that is empty, too long, or not lowercase letters, digits
    /// and `_`.
    #[error("resource name {0:?} must be 1 to {MAX_RESOURCE_NAME_BYTES} lowercase letters, digits or \"_\", starting with a letter")]
    BadName(String),
    /// A kind named twice.
    #[error("resource {0:?} is named twice")]
    Duplicate(String),
    /// More than [`MAX_RESOURCE_KINDS`] kinds.
    #[error("{0} kinds of resource, more than the most, {MAX_RESOURCE_KINDS}")]
    TooManyKinds(usize),
    /// An offer without addresses, or with more than [`MAX_ADDRESSES`].
    #[error("resource {name:?} offers {count} addresses: offer 1 to {MAX_ADDRESSES}")]
    AddressCount {
        /// The resource.
        name: String,
        /// How many it offered.
        count: usize,
    },
    /// An address that is empty, too long, or holds a character other than
    /// letters, digits and `.`, `:`, `-`, `_`, `/`.
    #[error("resource {name:?}: address {address:?} must be 1 to {MAX_ADDRESS_BYTES} letters, digits or . : - _ /")]
    BadAddress {
        /// The resource.
        name: String,
        /// The address.
        address: String,
    },
    /// One address offered twice.
    #[error("resource {name:?} offers address {address:?} twice")]
    DuplicateAddress {
        /// The resource.
        name: String,
        /// The address.
        address: String,
    },
    /// An amount that is not a whole number from 1 to [`MAX_ADDRESSES`].
    #[error(
        "resource {name:?}: amount {amount:?} must be a whole number from 1 to {MAX_ADDRESSES}"
    )]
    BadAmount {
        /// The resource.
        name: String,
        /// The amount as written.
        amount: String,
    },
}

/// Whether `name` is a resource name: 1 to [`MAX_RESOURCE_NAME_BYTES`]
/// lowercase letters, digits or `_`, starting with a letter.
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_RESOURCE_NAME_BYTES
        && name.as_bytes()[0].is_ascii_lowercase()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn is_address(address: &str) -> bool {
    !address.is_empty()
        && address.len() <= MAX_ADDRESS_BYTES
        && address.bytes().all(|b| b.is_ascii_alphanumeric() || b".:-_/".contains(&b))
}

/// Parses a worker's `gpu=0,1,2,3` (checked by [`offers_problem`] once all
/// are in).
pub fn parse_offer(text: &str) -> Result<Resource, ResourcesProblem> {
    let (name, addresses) =
        text.split_once('=').ok_or_else(|| ResourcesProblem::NotAssignment(text.to_string()))?;
    let name = name.trim().to_string();
    let addresses: Vec<String> =
        addresses.split(',').map(str::trim).filter(|a| !a.is_empty()).map(str::to_string).collect();
    let offer = Resource { name, addresses };
    match offers_problem(std::slice::from_ref(&offer)) {
        Some(p) => Err(p),
        None => Ok(offer),
    }
}

/// Parses a group's `gpu=1`.
pub fn parse_amount(text: &str) -> Result<(String, u32), ResourcesProblem> {
    let (name, amount) =
        text.split_once('=').ok_or_else(|| ResourcesProblem::NotAssignment(text.to_string()))?;
    let name = name.trim().to_string();
    let bad = || ResourcesProblem::BadAmount { name: name.clone(), amount: amount.to_string() };
    let n: u32 = amount.trim().parse().map_err(|_| bad())?;
    let asked = vec![(name.clone(), n)];
    match amounts_problem(&asked) {
        Some(p) => Err(p),
        None => Ok((name, n)),
    }
}

/// The first rule a worker's `offers` break: valid unique names, at most
/// [`MAX_RESOURCE_KINDS`] kinds, 1 to [`MAX_ADDRESSES`] valid unique
/// addresses each.
pub fn offers_problem(offers: &[Resource]) -> Option<ResourcesProblem> {
    if offers.len() > MAX_RESOURCE_KINDS {
        return Some(ResourcesProblem::TooManyKinds(offers.len()));
    }
    let mut names = BTreeSet::new();
    for r in offers {
        if !is_name(&r.name) {
            return Some(ResourcesProblem::BadName(r.name.clone()));
        }
        if !names.insert(r.name.as_str()) {
            return Some(ResourcesProblem::Duplicate(r.name.clone()));
        }
        if r.addresses.is_empty() || r.addresses.len() > MAX_ADDRESSES {
            return Some(ResourcesProblem::AddressCount {
                name: r.name.clone(),
                count: r.addresses.len(),
            });
        }
        let mut seen = BTreeSet::new();
        for a in &r.addresses {
            if !is_address(a) {
                return Some(ResourcesProblem::BadAddress {
                    name: r.name.clone(),
                    address: a.clone(),
                });
            }
            if !seen.insert(a.as_str()) {
                return Some(ResourcesProblem::DuplicateAddress {
                    name: r.name.clone(),
                    address: a.clone(),
                });
            }
        }
    }
    None
}

/// The first rule a group's `amounts` break: valid unique names, at most
/// [`MAX_RESOURCE_KINDS`], each amount from 1 to [`MAX_ADDRESSES`].
pub fn amounts_problem(amounts: &[(String, u32)]) -> Option<ResourcesProblem> {
    if amounts.len() > MAX_RESOURCE_KINDS {
        return Some(ResourcesProblem::TooManyKinds(amounts.len()));
    }
    let mut names = BTreeSet::new();
    for (name, n) in amounts {
        if !is_name(name) {
            return Some(ResourcesProblem::BadName(name.clone()));
        }
        if !names.insert(name.as_str()) {
            return Some(ResourcesProblem::Duplicate(name.clone()));
        }
        if *n == 0 || *n as usize > MAX_ADDRESSES {
            return Some(ResourcesProblem::BadAmount { name: name.clone(), amount: n.to_string() });
        }
    }
    None
}

/// How many addresses of `name` `offers` hold.
pub fn offered(offers: &[Resource], name: &str) -> u32 {
    offers.iter().find(|r| r.name == name).map_or(0, |r| r.addresses.len() as u32)
}

/// The (name, address) pairs `assigned` lists hold: what live executors
/// hold, for [`allocate`] and the views.
pub fn held<'a>(assigned: impl IntoIterator<Item = &'a Assigned>) -> BTreeSet<(&'a str, &'a str)> {
    assigned
        .into_iter()
        .flatten()
        .flat_map(|(n, a)| a.iter().map(move |a| (n.as_str(), a.as_str())))
        .collect()
}

/// Too few free addresses of one kind for an executor ([`allocate`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("too few free {name} for {wanted}: {held} of {offered} offered are held")]
pub struct Shortfall {
    /// The resource.
    pub name: String,
    /// How many the executor asks for.
    pub wanted: u32,
    /// How many the worker offers.
    pub offered: u32,
    /// How many of those live executors hold.
    pub held: u32,
}

/// Addresses for `amounts` from `offers`, none of them in `taken` (pairs
/// of name and address held by live executors, [`held`]): the first free
/// ones in each offer's order; the first kind with fewer free than asked
/// otherwise.
pub fn allocate(
    offers: &[Resource],
    taken: &BTreeSet<(&str, &str)>,
    amounts: &[(String, u32)],
) -> Result<Assigned, Shortfall> {
    amounts
        .iter()
        .map(|(name, n)| {
            let addresses =
                offers.iter().find(|r| r.name == *name).map_or(&[][..], |r| &r.addresses);
            let (held, free): (Vec<&String>, Vec<&String>) =
                addresses.iter().partition(|a| taken.contains(&(name.as_str(), a.as_str())));
            if free.len() < *n as usize {
                return Err(Shortfall {
                    name: name.clone(),
                    wanted: *n,
                    offered: addresses.len() as u32,
                    held: held.len() as u32,
                });
            }
            Ok((name.clone(), free.into_iter().take(*n as usize).cloned().collect()))
        })
        .collect()
}

/// The environment variable an executor finds its addresses of `name` in:
/// `REGENT_RESOURCE_GPU` for `gpu`.
pub fn env_name(name: &str) -> String {
    format!("REGENT_RESOURCE_{}", name.to_ascii_uppercase())
}

/// The variables an executor given `assigned` starts with: for each kind
/// `REGENT_RESOURCE_<NAME>=a,b`, and for `gpu` also
/// `CUDA_VISIBLE_DEVICES=a,b` (what CUDA programs read).
pub fn env(assigned: &Assigned) -> Vec<(String, String)> {
    let mut vars = Vec::new();
    for (name, addresses) in assigned {
        let list = addresses.join(",");
        if name == "gpu" {
            vars.push(("CUDA_VISIBLE_DEVICES".to_string(), list.clone()));
        }
        vars.push((env_name(name), list));
    }
    vars
}

/// The addresses a worker gave an executor asking `amounts`, read back
/// from the environment it starts with (`REGENT_RESOURCE_<NAME>`, the last
/// value winning, as for the process): what its runtime records so a
/// re-adopted executor keeps them.
pub fn assigned_from_env(amounts: &[(String, u32)], vars: &[(String, String)]) -> Assigned {
    amounts
        .iter()
        .filter_map(|(name, _)| {
            let key = env_name(name);
            let (_, value) = vars.iter().rev().find(|(k, _)| *k == key)?;
            let list: Vec<String> =
                value.split(',').filter(|a| !a.is_empty()).map(str::to_string).collect();
            Some((name.clone(), list))
        })
        .collect()
}

/// `gpu=0,1 fpga=a`, for logs, the page and the subscriber's lines.
pub fn describe(assigned: &Assigned) -> String {
    assigned.iter().map(|(n, a)| format!("{n}={}", a.join(","))).collect::<Vec<_>>().join(" ")
}

/// `gpu=1 fpga=2`, what a group asks for.
pub fn describe_amounts(amounts: &[(String, u32)]) -> String {
    amounts.iter().map(|(n, a)| format!("{n}={a}")).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    fn gpus(n: usize) -> Vec<Resource> {
        vec![Resource { name: "gpu".into(), addresses: (0..n).map(|i| i.to_string()).collect() }]
    }

    #[test]
    fn offers_and_amounts_parse_and_refuse_what_is_malformed() {
        let offer = parse_offer("gpu=0, 1,2").unwrap();
        assert_eq!(offer.addresses, vec!["0", "1", "2"]);
        assert_eq!(offer.to_string(), "gpu=0,1,2");
        assert_eq!(parse_amount("gpu=2").unwrap(), ("gpu".to_string(), 2));
        for bad in ["gpu", "GPU=1", "gpu=", "gpu=0,0", "gpu=a b", "9gpu=1"] {
            assert!(parse_offer(bad).is_err(), "{bad}");
        }
        for bad in ["gpu", "gpu=0", "gpu=x", "gpu=257", "Gpu=1"] {
            assert!(parse_amount(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_offer("gpu=0,0").unwrap_err().to_string(),
            "resource \"gpu\" offers address \"0\" twice"
        );
        let twice = vec![("gpu".to_string(), 1), ("gpu".to_string(), 2)];
        assert_eq!(amounts_problem(&twice), Some(ResourcesProblem::Duplicate("gpu".into())));
        let mut offers = gpus(2);
        offers.push(offers[0].clone());
        assert_eq!(offers_problem(&offers), Some(ResourcesProblem::Duplicate("gpu".into())));
    }

    #[test]
    fn allocation_takes_the_first_free_addresses_and_environment_names_them() {
        let offers = gpus(4);
        let taken: BTreeSet<(&str, &str)> = [("gpu", "0"), ("gpu", "2")].into_iter().collect();
        let got = allocate(&offers, &taken, &[("gpu".into(), 2)]).unwrap();
        assert_eq!(got, vec![("gpu".to_string(), vec!["1".to_string(), "3".to_string()])]);
        let short = allocate(&offers, &taken, &[("gpu".into(), 3)]).unwrap_err();
        assert_eq!(short.to_string(), "too few free gpu for 3: 2 of 4 offered are held");
        let none = allocate(&offers, &taken, &[("fpga".into(), 1)]).unwrap_err();
        assert_eq!((none.offered, none.held), (0, 0));
        let vars = env(&got);
        assert!(vars.contains(&("CUDA_VISIBLE_DEVICES".into(), "1,3".into())));
        assert!(vars.contains(&("REGENT_RESOURCE_GPU".into(), "1,3".into())));
        assert_eq!(assigned_from_env(&[("gpu".into(), 2)], &vars), got);
        assert_eq!(describe(&got), "gpu=1,3");
    }

    quickcheck! {
        /// Executors started and ended in any order never share an address,
        /// and each gets what it asked for while enough are free.
        fn no_address_is_given_twice(steps: Vec<(u8, bool)>) -> bool {
            let offers = gpus(5);
            let mut live: Vec<Vec<String>> = Vec::new();
            for (n, end) in steps {
                if end && !live.is_empty() {
                    live.remove(n as usize % live.len());
                    continue;
                }
                let want = u32::from(n % 3) + 1;
                let taken: BTreeSet<(&str, &str)> = live
                    .iter()
                    .flatten()
                    .map(|a| ("gpu", a.as_str()))
                    .collect();
                let free = 5 - taken.len() as u32;
                match allocate(&offers, &taken, &[("gpu".into(), want)]).ok() {
                    Some(got) => {
                        if want > free || got[0].1.len() != want as usize {
                            return false;
                        }
                        if got[0].1.iter().any(|a| taken.contains(&("gpu", a.as_str()))) {
                            return false;
                        }
                        live.push(got[0].1.clone());
                    }
                    None if want <= free => return false,
                    None => {}
                }
            }
            let all: Vec<&String> = live.iter().flatten().collect();
            let unique: BTreeSet<&String> = all.iter().copied().collect();
            all.len() == unique.len()
        }
    }
}

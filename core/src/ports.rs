//! Named ports: a worker offers ranges of TCP/UDP port numbers
//! (`regent worker --ports 20000-20999`), a group asks for ports by name
//! (`ports = ["http"]`), and every executor of the group gets its own
//! numbers from its worker's ranges.
//!
//! * **The leader counts, the worker numbers.** The leader treats a
//!   worker's port count like its cores: an executor is placed only where
//!   as many ports are free as its group names ([`PortRange::count`] summed
//!   in the registration). The worker picks the numbers when it starts the
//!   executor ([`allocate`]: the lowest free ones of its ranges, never one
//!   a live executor of its own holds), puts them in the executor's
//!   environment (`REGENT_PORT_<NAME>`, [`env_name`]) and reports them with
//!   the executor ([`crate::protocol::ExecutorReport::ports`]); the leader
//!   keeps them with the executor and tells the framework's subscriber, with
//!   the worker's host ([`crate::protocol::ExecutorInfo`]), so a driver
//!   learns where its executors listen.
//! * **Kept across failures.** A new leader learns every executor's ports
//!   from the workers' registrations; a restarted worker from the running
//!   records of the executors it re-adopts. No port is handed to two live
//!   executors of one worker.
//! * A number is offered, not reserved: a process outside regent may hold
//!   one (as with Mesos' and Nomad's port ranges), and the executor's bind
//!   fails.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// Most ports one group names.
pub const MAX_PORTS_PER_GROUP: usize = 16;
/// Longest port name, in bytes.
pub const MAX_PORT_NAME_BYTES: usize = 32;
/// Most ranges one worker offers.
pub const MAX_PORT_RANGES: usize = 64;

/// An inclusive range of port numbers a worker offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PortRange {
    /// The first number offered.
    pub first: u16,
    /// The last number offered (not below `first`).
    pub last: u16,
}

impl PortRange {
    /// How many numbers it holds (0 for a malformed range, `last < first`).
    pub fn count(&self) -> u32 {
        if self.last < self.first {
            0
        } else {
            u32::from(self.last - self.first) + 1
        }
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

/// Why a worker's port ranges, or a group's port names, are refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PortsProblem {
    /// A part of `--ports` is not `N` or `N-M` with numbers from 1 to 65535.
    #[error("{0:?} is not a port range: write FIRST-LAST (or one port) with numbers from 1 to 65535, FIRST not above LAST")]
    BadRange(String),
    /// Two ranges share numbers.
    #[error("port ranges {0} and {1} overlap")]
    Overlap(PortRange, PortRange),
    /// More than [`MAX_PORT_RANGES`] ranges.
    #[error("{0} port ranges, more than the most, {MAX_PORT_RANGES}")]
    TooManyRanges(usize),
    /// A port name that is empty, too long, or not lowercase letters,
    /// digits and `_`.
    #[error("port name {0:?} must be 1 to {MAX_PORT_NAME_BYTES} lowercase letters, digits or \"_\", starting with a letter")]
    BadName(String),
    /// A port named twice in one group.
    #[error("port {0:?} is named twice")]
    Duplicate(String),
    /// More than [`MAX_PORTS_PER_GROUP`] ports.
    #[error("{0} ports, more than the most, {MAX_PORTS_PER_GROUP}")]
    TooManyPorts(usize),
}

/// Parses `20000-20999`, `8080` or a comma-separated list of them, sorted,
/// checked for overlap and bounds ([`ranges_problem`]).
pub fn parse_ranges(text: &str) -> Result<Vec<PortRange>, PortsProblem> {
    let mut ranges = Vec::new();
    for part in text.split(',').map(str::trim) {
        let bad = || PortsProblem::BadRange(part.to_string());
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let first: u16 = first.parse().map_err(|_| bad())?;
        let last: u16 = last.parse().map_err(|_| bad())?;
        ranges.push(PortRange { first, last });
    }
    ranges.sort();
    match ranges_problem(&ranges) {
        Some(p) => Err(p),
        None => Ok(ranges),
    }
}

/// The first rule `ranges` (sorted, as a worker announces them) break:
/// each `1 <= first <= last`, no two sharing a number, at most
/// [`MAX_PORT_RANGES`].
pub fn ranges_problem(ranges: &[PortRange]) -> Option<PortsProblem> {
    if ranges.len() > MAX_PORT_RANGES {
        return Some(PortsProblem::TooManyRanges(ranges.len()));
    }
    for r in ranges {
        if r.first == 0 || r.last < r.first {
            return Some(PortsProblem::BadRange(r.to_string()));
        }
    }
    for pair in ranges.windows(2) {
        if pair[1].first <= pair[0].last {
            return Some(PortsProblem::Overlap(pair[0], pair[1]));
        }
    }
    None
}

/// How many numbers `ranges` offer.
pub fn count(ranges: &[PortRange]) -> u32 {
    ranges.iter().map(PortRange::count).fold(0u32, u32::saturating_add)
}

/// The first rule a group's port `names` break.
pub fn names_problem(names: &[String]) -> Option<PortsProblem> {
    if names.len() > MAX_PORTS_PER_GROUP {
        return Some(PortsProblem::TooManyPorts(names.len()));
    }
    let mut seen = BTreeSet::new();
    for n in names {
        let well_formed = !n.is_empty()
            && n.len() <= MAX_PORT_NAME_BYTES
            && n.as_bytes()[0].is_ascii_lowercase()
            && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !well_formed {
            return Some(PortsProblem::BadName(n.clone()));
        }
        if !seen.insert(n.as_str()) {
            return Some(PortsProblem::Duplicate(n.clone()));
        }
    }
    None
}

/// The environment variable an executor finds port `name` in:
/// `REGENT_PORT_HTTP` for `http`.
pub fn env_name(name: &str) -> String {
    format!("REGENT_PORT_{}", name.to_ascii_uppercase())
}

/// Numbers for `names` from `ranges`, none of them in `taken`: the lowest
/// free ones, in `names` order; `None` if fewer are free than named.
pub fn allocate(
    ranges: &[PortRange],
    taken: &BTreeSet<u16>,
    names: &[String],
) -> Option<Vec<(String, u16)>> {
    let mut free = ranges
        .iter()
        .filter(|r| r.first <= r.last)
        .flat_map(|r| r.first..=r.last)
        .filter(|p| !taken.contains(p));
    names.iter().map(|n| free.next().map(|p| (n.clone(), p))).collect()
}

/// `20000-20999,21050` (as `--ports` takes them), or `none`.
pub fn describe_ranges(ranges: &[PortRange]) -> String {
    if ranges.is_empty() {
        return "none".to_string();
    }
    ranges.iter().map(PortRange::to_string).collect::<Vec<_>>().join(",")
}

/// The numbers a worker gave the ports `names` of an executor, read back
/// from the environment it starts with (`REGENT_PORT_<NAME>`, the last
/// value of each winning, as for the process): what its runtime records so
/// a re-adopted executor keeps them. A name without a number is left out.
pub fn numbered(names: &[String], env: &[(String, String)]) -> Vec<(String, u16)> {
    names
        .iter()
        .filter_map(|n| {
            let key = env_name(n);
            let value = env.iter().rev().find(|(k, _)| *k == key)?;
            Some((n.clone(), value.1.parse().ok()?))
        })
        .collect()
}

/// `http=20000 admin=20001`, for logs and the subscriber's lines.
pub fn describe(ports: &[(String, u16)]) -> String {
    ports.iter().map(|(n, p)| format!("{n}={p}")).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ranges_parse_sorted_and_refuse_overlaps_zero_and_reversed() {
        let r = parse_ranges("21000-21001, 20000-20999,8080").unwrap();
        assert_eq!(r[0], PortRange { first: 8080, last: 8080 });
        assert_eq!(count(&r), 1 + 1000 + 2);
        assert_eq!(describe_ranges(&r), "8080,20000-20999,21000-21001");
        assert_eq!(describe_ranges(&[]), "none");
        for bad in ["", "x", "0-10", "10-5", "70000", "1-2-3"] {
            assert!(parse_ranges(bad).is_err(), "{bad}");
        }
        let err = parse_ranges("20000-20100,20050-20060").unwrap_err();
        assert_eq!(err.to_string(), "port ranges 20000-20100 and 20050-20060 overlap");
    }

    #[test]
    fn names_are_lowercase_unique_and_bounded() {
        assert_eq!(names_problem(&names(&["http", "admin_2"])), None);
        assert_eq!(names_problem(&names(&["HTTP"])), Some(PortsProblem::BadName("HTTP".into())));
        assert_eq!(names_problem(&names(&["9p"])), Some(PortsProblem::BadName("9p".into())));
        assert_eq!(names_problem(&names(&["a", "a"])), Some(PortsProblem::Duplicate("a".into())));
        assert_eq!(env_name("http_alt"), "REGENT_PORT_HTTP_ALT");
    }

    #[test]
    fn allocation_skips_taken_numbers_and_fails_when_short() {
        let r = parse_ranges("100-102,200").unwrap();
        let taken: BTreeSet<u16> = [100, 102].into();
        let got = allocate(&r, &taken, &names(&["a", "b"])).unwrap();
        assert_eq!(got, vec![("a".into(), 101), ("b".into(), 200)]);
        assert_eq!(allocate(&r, &taken, &names(&["a", "b", "c"])), None);
        assert_eq!(describe(&got), "a=101 b=200");
    }

    #[test]
    fn numbers_read_back_from_the_environment_the_worker_set() {
        let env = vec![
            ("REGENT_PORT_HTTP".to_string(), "80".to_string()),
            ("OTHER".to_string(), "1".to_string()),
            // The worker's own value comes last and wins over the group's.
            ("REGENT_PORT_HTTP".to_string(), "20001".to_string()),
            ("REGENT_PORT_ADMIN".to_string(), "not a number".to_string()),
        ];
        let got = numbered(&names(&["http", "admin", "gone"]), &env);
        assert_eq!(got, vec![("http".into(), 20001)]);
    }

    quickcheck! {
        /// Whatever is taken, what is handed out is inside the ranges,
        /// distinct, and free.
        fn allocated_ports_are_offered_distinct_and_free(taken: Vec<u16>, n: u8) -> bool {
            let ranges = parse_ranges("1000-1063,2000-2015").unwrap();
            let taken: BTreeSet<u16> = taken.into_iter().map(|t| 1000 + t % 1100).collect();
            let wanted: Vec<String> = (0..n % 20).map(|i| format!("p{i}")).collect();
            match allocate(&ranges, &taken, &wanted) {
                None => {
                    let free = (1000..=1063).chain(2000..=2015).filter(|p| !taken.contains(p));
                    free.count() < wanted.len()
                }
                Some(got) => {
                    let nums: BTreeSet<u16> = got.iter().map(|(_, p)| *p).collect();
                    nums.len() == wanted.len()
                        && nums.iter().all(|p| !taken.contains(p))
                        && nums.iter().all(|p| ranges.iter().any(|r| r.first <= *p && *p <= r.last))
                }
            }
        }
    }
}

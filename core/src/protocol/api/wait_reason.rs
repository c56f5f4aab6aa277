//! Why a slot waits, as data: [`WaitReason`], a kind with its numbers, and
//! its words (`Display`). A waiting slot has every reason the planner
//! found, ranked (docs/jobs.md, "Why a slot waits"; the planner's rank:
//! `crate::master` plan module), in `SlotStatus::reasons`,
//! `GroupPlan::reasons` and `GroupView::reasons`.
//!
//! The reasons travel on the wire protocol (postcard) and in `/v1/` JSON.
//! In JSON a reason is externally tagged: `{"shortfall": {"dimension":
//! "gpu", "needed": 2, "most_free": 0}}`; every kind is an object, so a
//! client reads the one key as the kind.

use crate::ids::WorkerId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The dimension name of memory in a reason (its amounts are MiB).
pub const MEMORY: &str = "memory";

/// The dimension name of cores in a reason.
pub const CORES: &str = "cores";

/// The dimension name of ports in a reason.
pub const PORTS: &str = "ports";

/// One reason a slot waits (docs/jobs.md, "Why a slot waits").
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitReason {
    /// No worker takes executors: none is registered, or every registered
    /// one is dead, unknown, cordoned, draining or full.
    NoWorkers {
        /// How many workers are registered.
        registered: u32,
    },
    /// No ALIVE worker meets a constraint (or, when each is met by some,
    /// all of them at once: then `constraint` joins them with ` and `).
    NoMatchingWorker {
        /// The constraint as the job file writes it: `rack=r9`.
        constraint: String,
    },
    /// The group runs as a user no matching worker starts executors as.
    UserNotOffered {
        /// The user.
        user: String,
    },
    /// One executor asks for more of a dimension than any matching worker
    /// has at all (free or not): it waits until a larger worker joins.
    TooLarge {
        /// `cores`, `memory` (MiB), `ports` or a named resource.
        dimension: String,
        /// What one executor asks for.
        needed: u64,
        /// The most a matching worker has of it (0: none offers it).
        largest: u64,
    },
    /// Every matching worker has less of a dimension free than one
    /// executor asks for.
    Shortfall {
        /// `cores`, `memory` (MiB) or a named resource.
        dimension: String,
        /// What one executor asks for.
        needed: u64,
        /// The most free on a matching worker.
        most_free: u64,
        /// That worker (the lowest id among equals).
        #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
        worker: Option<WorkerId>,
    },
    /// Every matching worker has fewer ports free than one executor asks
    /// for.
    PortsExhausted {
        /// The ports one executor asks for.
        needed: u32,
        /// The most free on a matching worker.
        most_free: u32,
    },
    /// Matching workers that run the most executors a worker takes.
    ExecutorsPerWorker {
        /// How many.
        workers: u32,
        /// The most executors one worker takes.
        limit: u32,
    },
    /// Each matching worker has room in some dimensions, none in all at
    /// once.
    NoWorkerFitsAll {
        /// The dimensions some matching worker lacks.
        dimensions: Vec<String>,
        /// How many matching workers were considered.
        workers: u32,
    },
    /// Matching workers that are cordoned (or drained): nothing new is
    /// placed on them.
    Cordoned {
        /// How many.
        workers: u32,
    },
    /// Matching workers that are draining.
    Draining {
        /// How many.
        workers: u32,
    },
    /// The slot waits out its restart backoff.
    Backoff {
        /// When its next executor may start: wall-clock milliseconds since
        /// the Unix epoch (the leader's clock).
        until_ms: u64,
        /// How long from the answer's time, in milliseconds.
        in_ms: u64,
    },
    /// The leader is recovering: it places once the workers it knows have
    /// reported (or the recovery window ends).
    Recovering {},
    /// The group's declaration or scale is not durable yet.
    NotDurable {},
    /// The master would refuse the group as declared now (a plan of a job
    /// file).
    Refused {
        /// The problem, in words.
        problem: String,
    },
    /// A worker has room: the slot is placed at the next placement.
    PlacedNext {},
    /// Placing the slot would take its tenant over a limit.
    TenantLimit {
        /// The tenant.
        tenant: String,
        /// The dimension of the limit.
        dimension: String,
        /// How much of it the tenant uses.
        in_use: u64,
        /// Its limit.
        limit: u64,
    },
    /// Slots of higher priority wait before it.
    BehindPriority {
        /// How many.
        slots: u32,
    },
    /// Executors preempted for it have not ended yet.
    WaitingForPreempted {
        /// How many.
        executors: u32,
    },
    /// A singleton's slot (`disconnect = { stop_after }`) waits until the
    /// executor it lost with a worker (or may have run on a worker this
    /// leader never heard from) must have been stopped by that worker's
    /// own rule: `stop_after` + kill grace + a margin from when the worker
    /// was last heard (docs/jobs.md, singletons; appended, protocol 19).
    SingletonHold {
        /// When it may be placed: wall-clock milliseconds since the Unix
        /// epoch (the leader's clock).
        until_ms: u64,
        /// How long from the answer's time, in milliseconds.
        in_ms: u64,
    },
}

/// `n` of `dimension` in words: `512 MiB` of memory, `2 gpu`.
fn amount(dimension: &str, n: u64) -> String {
    if dimension == MEMORY {
        format!("{n} MiB of memory")
    } else {
        format!("{n} {dimension}")
    }
}

/// `n` more of `dimension` in words: `512 more MiB of memory`, `2 more
/// gpu`.
fn more(dimension: &str, n: u64) -> String {
    if dimension == MEMORY {
        format!("{n} more MiB of memory")
    } else {
        format!("{n} more {dimension}")
    }
}

/// `n` of `dimension` as a bare count: `512 MiB` of memory, `2`.
fn count(dimension: &str, n: u64) -> String {
    if dimension == MEMORY {
        format!("{n} MiB")
    } else {
        n.to_string()
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitReason::NoWorkers { registered: 0 } => f.write_str("no worker is registered"),
            WaitReason::NoWorkers { registered } => write!(
                f,
                "no ALIVE worker takes executors ({registered} registered: dead, unknown, \
                 cordoned, draining or full)"
            ),
            WaitReason::NoMatchingWorker { constraint } => {
                write!(f, "no ALIVE worker matches {constraint}")
            }
            WaitReason::UserNotOffered { user } => write!(
                f,
                "runs as user {user}: no ALIVE matching worker starts executors as {user} \
                 (regent worker --allowed-users {user}, as root)"
            ),
            WaitReason::TooLarge { dimension, needed, largest: 0 } if !is_builtin(dimension) => {
                write!(
                    f,
                    "needs {}: no ALIVE matching worker offers {dimension} (regent worker \
                     --resource {dimension}=...)",
                    amount(dimension, *needed)
                )
            }
            WaitReason::TooLarge { dimension, needed, largest } => {
                write!(
                    f,
                    "needs {}: the largest matching worker has {}",
                    amount(dimension, *needed),
                    count(dimension, *largest)
                )?;
                if dimension == PORTS {
                    f.write_str(" (regent worker --ports)")?;
                }
                Ok(())
            }
            WaitReason::Shortfall { dimension, needed, most_free, worker } => {
                write!(
                    f,
                    "needs {}: the most free on a matching worker is {}",
                    more(dimension, needed.saturating_sub(*most_free)),
                    count(dimension, *most_free)
                )?;
                if let Some(w) = worker {
                    write!(f, " (on {w})")?;
                }
                Ok(())
            }
            WaitReason::PortsExhausted { needed, most_free } => {
                write!(f, "needs {needed} ports: the most free on a matching worker is {most_free}")
            }
            WaitReason::ExecutorsPerWorker { workers, limit } => write!(
                f,
                "{workers} matching worker(s) run the most executors a worker takes ({limit})"
            ),
            WaitReason::NoWorkerFitsAll { dimensions, workers } => write!(
                f,
                "none of {workers} matching worker(s) has {} free at once",
                dimensions.join(" and ")
            ),
            WaitReason::Cordoned { workers } => {
                write!(f, "{workers} matching worker(s) are cordoned")
            }
            WaitReason::Draining { workers } => {
                write!(f, "{workers} matching worker(s) are draining")
            }
            WaitReason::Backoff { until_ms, in_ms } => write!(
                f,
                "restart backoff: a new executor in {in_ms} ms (at {until_ms} ms since the Unix \
                 epoch)"
            ),
            WaitReason::Recovering {} => f.write_str(
                "the leader is recovering: it places once the workers it knows have reported (or \
                 the recovery window ends)",
            ),
            WaitReason::NotDurable {} => {
                f.write_str("its group's declaration or scale is not durable yet")
            }
            WaitReason::Refused { problem } => write!(f, "the master would refuse it: {problem}"),
            WaitReason::PlacedNext {} => {
                f.write_str("a worker has room for it: it is placed at the next placement")
            }
            WaitReason::TenantLimit { tenant, dimension, in_use, limit } => write!(
                f,
                "tenant limit: {dimension} {} of {} in use (tenant {tenant})",
                count(dimension, *in_use),
                count(dimension, *limit)
            ),
            WaitReason::BehindPriority { slots } => {
                write!(f, "behind {slots} slots of higher priority")
            }
            WaitReason::WaitingForPreempted { executors } => {
                write!(f, "waiting for {executors} preempted executors to end")
            }
            WaitReason::SingletonHold { until_ms, in_ms } => write!(
                f,
                "a singleton: its last executor may still run on a worker cut off from the \
                 leader until that worker's stop_after has passed; placed in {in_ms} ms (at \
                 {until_ms} ms since the Unix epoch)"
            ),
        }
    }
}

/// Whether `dimension` is one every worker has (cores, memory, ports),
/// not a named resource.
fn is_builtin(dimension: &str) -> bool {
    matches!(dimension, CORES | MEMORY | PORTS)
}

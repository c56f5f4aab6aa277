//! The states operators see, as types, with one table of names.
//!
//! Every state a view shows — a master's status, a worker's registry state
//! and drain, a framework's state — is an enum declared here once, with its
//! operator name beside each variant (`ALIVE`, `DRAINING`, ...). The table
//! gives [`name`](MasterStatus::name), parsing ([`from_name`](MasterStatus::from_name)),
//! every value in order (`ALL`, for gauges labelled by state) and serde: a
//! human-readable format (the JSON of the HTTP API and the event stream)
//! carries the name, a binary one (postcard on the wire) the variant's index.
//! Nothing compares a state with a string.
//!
//! Tests: the unit tests below; `runtime-smol/tests/operator_views.rs` (the
//! JSON views), `core/tests/codec.rs` (the wire).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Declares a state enum with its operator names (the one table).
macro_rules! named_states {
    (
        $(#[$meta:meta])*
        pub enum $ty:ident {
            $($(#[$vmeta:meta])* $variant:ident = $name:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $ty {
            $($(#[$vmeta])* $variant,)+
        }

        impl $ty {
            /// Every value, in declaration order (a gauge's labels).
            pub const ALL: [$ty; [$($name,)+].len()] = [$($ty::$variant,)+];

            /// The name operators see (views, JSON, events, `/metrics`).
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }

            /// The value named `name` (exactly as [`Self::name`] spells it).
            pub fn from_name(name: &str) -> Option<Self> {
                match name {
                    $($name => Some($ty::$variant),)+
                    _ => None,
                }
            }

            fn index(self) -> u32 {
                self as u32
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_unit_variant(stringify!($ty), self.index(), self.name())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                if d.is_human_readable() {
                    let name = String::deserialize(d)?;
                    $ty::from_name(&name).ok_or_else(|| {
                        D::Error::custom(format!(
                            "unknown {} {name:?} (one of {})",
                            stringify!($ty),
                            $ty::ALL.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
                        ))
                    })
                } else {
                    let index = u32::deserialize(d)?;
                    $ty::ALL.get(index as usize).copied().ok_or_else(|| {
                        D::Error::custom(format!("unknown {} index {index}", stringify!($ty)))
                    })
                }
            }
        }
    };
}

named_states! {
    /// Where a master is in its lifecycle, as every view shows it.
    pub enum MasterStatus {
        /// Not leading (or still loading its records as a new leader).
        Standby = "STANDBY",
        /// Leading; the recovery window is open.
        Recovering = "RECOVERING",
        /// Leading and acting.
        Alive = "ALIVE",
        /// Leading, but the coordination session is in doubt: no placement, no
        /// store writes, no DEAD sweep; registrations get `LeaderSuspended`.
        Suspended = "SUSPENDED",
    }
}

named_states! {
    /// Where a registered worker is in its life at this leader.
    pub enum WorkerState {
        /// Registration received; its record is being persisted.
        Registering = "REGISTERING",
        /// Registered and heard from within `worker_timeout`.
        Alive = "ALIVE",
        /// Silent for `worker_timeout` (its record is deleted, unless it is
        /// under maintenance).
        Dead = "DEAD",
        /// Recovered from the store by a new leader and not heard from yet; or
        /// left so by the recovery removal limit. Excluded from placement and
        /// never removed by the DEAD sweep.
        Unknown = "UNKNOWN",
    }
}

named_states! {
    /// How far a worker's drain has come (`regent drain`).
    pub enum DrainState {
        /// Its executors are being stopped; nothing new is placed on it.
        Draining = "DRAINING",
        /// Every executor it ran has ended.
        Drained = "DRAINED",
    }
}

named_states! {
    /// A worker's maintenance, as `/metrics` labels it.
    pub enum MaintenanceState {
        /// Cordoned: nothing new is placed on it.
        Cordoned = "CORDONED",
        /// See [`DrainState::Draining`].
        Draining = "DRAINING",
        /// See [`DrainState::Drained`].
        Drained = "DRAINED",
    }
}

impl From<DrainState> for MaintenanceState {
    fn from(d: DrainState) -> Self {
        match d {
            DrainState::Draining => MaintenanceState::Draining,
            DrainState::Drained => MaintenanceState::Drained,
        }
    }
}

impl Default for MasterStatus {
    /// A master starts in standby.
    fn default() -> Self {
        MasterStatus::Standby
    }
}

named_states! {
    /// The state operators see for a worker: its drain while one is under way
    /// or done (unless the worker is DEAD), else its registry state.
    pub enum ShownWorkerState {
        /// See [`WorkerState::Registering`].
        Registering = "REGISTERING",
        /// See [`WorkerState::Alive`].
        Alive = "ALIVE",
        /// See [`WorkerState::Dead`].
        Dead = "DEAD",
        /// See [`WorkerState::Unknown`].
        Unknown = "UNKNOWN",
        /// See [`DrainState::Draining`].
        Draining = "DRAINING",
        /// See [`DrainState::Drained`].
        Drained = "DRAINED",
    }
}

impl ShownWorkerState {
    /// What operators see of a worker in `state` with `drain`.
    pub fn of(state: WorkerState, drain: Option<DrainState>) -> Self {
        match (state, drain) {
            (WorkerState::Dead, _) => ShownWorkerState::Dead,
            (_, Some(DrainState::Draining)) => ShownWorkerState::Draining,
            (_, Some(DrainState::Drained)) => ShownWorkerState::Drained,
            (WorkerState::Registering, None) => ShownWorkerState::Registering,
            (WorkerState::Alive, None) => ShownWorkerState::Alive,
            (WorkerState::Unknown, None) => ShownWorkerState::Unknown,
        }
    }
}

named_states! {
    /// A framework's state in the leader's view.
    pub enum FrameworkState {
        /// Connected, with slots pending or running.
        Active = "ACTIVE",
        /// Connected, and every slot is done.
        Finished = "FINISHED",
        /// Connected, and a slot failed.
        Failed = "FAILED",
        /// No live subscription (it may resubscribe within its failover
        /// timeout).
        Disconnected = "DISCONNECTED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T>(all: &[T])
    where
        T: Copy + PartialEq + fmt::Debug + fmt::Display + Serialize + for<'de> Deserialize<'de>,
    {
        for (i, s) in all.iter().enumerate() {
            let json = serde_json::to_string(s).unwrap();
            assert_eq!(json, format!("\"{s}\""), "JSON carries the name");
            assert_eq!(serde_json::from_str::<T>(&json).unwrap(), *s);
            let wire = postcard::to_allocvec(s).unwrap();
            assert_eq!(wire, vec![i as u8], "the wire carries the index");
            assert_eq!(postcard::from_bytes::<T>(&wire).unwrap(), *s);
        }
        let past = postcard::to_allocvec(&(all.len() as u32)).unwrap();
        assert!(postcard::from_bytes::<T>(&past).is_err(), "an index past the table is refused");
    }

    #[test]
    fn every_state_carries_its_name_in_json_and_its_index_on_the_wire() {
        round_trips(&MasterStatus::ALL);
        round_trips(&WorkerState::ALL);
        round_trips(&DrainState::ALL);
        round_trips(&ShownWorkerState::ALL);
        round_trips(&FrameworkState::ALL);
        round_trips(&MaintenanceState::ALL);
    }

    #[test]
    fn an_unknown_name_is_refused_naming_the_known_ones() {
        let e = serde_json::from_str::<WorkerState>("\"ALIVE \"").unwrap_err().to_string();
        assert!(e.contains("unknown WorkerState \"ALIVE \""), "{e}");
        assert!(e.contains("REGISTERING, ALIVE, DEAD, UNKNOWN"), "{e}");
        assert_eq!(WorkerState::from_name("dead"), None, "names are exact");
    }

    #[test]
    fn a_drain_shows_unless_the_worker_is_dead() {
        use ShownWorkerState as S;
        assert_eq!(S::of(WorkerState::Alive, Some(DrainState::Draining)), S::Draining);
        assert_eq!(S::of(WorkerState::Unknown, Some(DrainState::Drained)), S::Drained);
        assert_eq!(S::of(WorkerState::Dead, Some(DrainState::Drained)), S::Dead);
        assert_eq!(S::of(WorkerState::Registering, None), S::Registering);
    }
}

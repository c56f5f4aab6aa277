//! Cross-crate property and simulation suites for regent.
//!
//! [`cluster`] is a small deterministic harness that wires master and worker
//! machines through an in-memory network whose every delivery, drop,
//! duplicate, reorder, disconnect and leadership change is chosen by a
//! schedule, so quickcheck can generate (and shrink) the schedules.
#![warn(missing_docs)]

pub mod cluster;
pub mod sim;

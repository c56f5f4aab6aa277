//! Cross-crate property and simulation suites for regent.
//!
//! [`cluster`] is a small deterministic harness that wires master and worker
//! machines through an in-memory network whose every delivery, drop,
//! duplicate, reorder, disconnect and leadership change is chosen by a
//! schedule, so quickcheck can generate (and shrink) the schedules.
//!
//! [`fuzz`] holds the fuzz targets (`fn(&[u8])`) and the allocator that
//! fails any single allocation over 1 MiB while one runs.
#![warn(missing_docs)]

pub mod check;
pub mod cluster;
pub mod fuzz;
pub mod sim;

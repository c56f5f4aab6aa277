//! # regent-smol
//!
//! The async runtime of regent, on smol and async-io.
//!
//! Modules:
//! * [`zk`]: the ZooKeeper backend of the elector (executes its operations
//!   with `zookeeper-client`), the driver loop [`zk::run_elector`], and the
//!   fenced record store of ZooKeeper recovery mode.
#![warn(missing_docs)]

pub mod zk;

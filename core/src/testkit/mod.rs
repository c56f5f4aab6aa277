//! Test kit for embedders (feature `testkit`): a pure ZooKeeper model and
//! helpers for deterministic tests.

pub mod zk;

//! Limits on peer-supplied numbers, checked before anything is allocated
//! or persisted (DESIGN rule 6). A request past a limit is refused with a
//! reason naming the limit; it never panics and never allocates in
//! proportion to the number it carries.
//!
//! This is the first step of the limits work: slots per group and groups
//! per framework (a `DeclareGroup` of `u32::MAX` slots once aborted the
//! master), and checked arithmetic wherever a peer's cores and memory meet
//! a worker's (a sum that would overflow does not fit).

/// The most slots one executor group may declare.
pub const MAX_SLOTS_PER_GROUP: u32 = 10_000;

/// The most executor groups one framework may declare.
pub const MAX_GROUPS_PER_FRAMEWORK: usize = 64;

//! Fuzz targets: `fn(&[u8])` functions over everything that reads peer
//! bytes or peer messages (docs/design.md#every-promise-is-tested-where-it-can-fail, issue 11 (docs/design.md#issue-11) item 2).
//!
//! Each target takes arbitrary bytes and must neither panic nor make a
//! single allocation over [`alloc::MAX_SINGLE_ALLOC`] (1 MiB) — the harness
//! installs [`alloc::LimitAlloc`] as the global allocator and runs each
//! input inside [`alloc::guarded`]. Where a target can tell, it also checks
//! that what decodes encodes back to the same value.
//!
//! | target | what it drives |
//! |---|---|
//! | [`frames`] | [`FrameReader`](regent_core::auth::FrameReader) fed a byte stream in arbitrary chunk splits, with a server [`Handshake`](regent_core::auth::Handshake) under a secret (or a plain session) consuming the bodies, and sealed frames opened by the session's [`FrameOpener`](regent_core::auth::FrameOpener) — raw, or from an honest client (a real proof, real MACs) with optional tampering |
//! | [`codec`] | [`codec::decode_body`](regent_core::codec::decode_body) with a fuzzed [`DecoderConfig`](regent_core::codec::DecoderConfig), round trip of what decodes, and the incremental [`Decoder`](regent_core::codec::Decoder) checked against `FrameReader` + `decode_body` on the same stream |
//! | [`master_node`] | [`MasterNode::handle`](regent_core::node::MasterNode::handle) over an input sequence built from the bytes: connections, structured peer messages (with ids the node itself handed out, so registration, subscription, declaration, placement and reports are reached), raw postcard messages, ticks, store answers and failures; in ZooKeeper mode against the pure ZooKeeper model, with connection loss, expiry, planted candidates and planted record images |
//! | [`worker_node`] | [`WorkerNode::handle`](regent_core::node::WorkerNode::handle): dials, master messages (hello replies, registrations, launches, kills, acks, hints at any epoch), executor changes, ticks, stop |
//! | [`submit_node`] | [`SubmitNode::handle`](regent_core::node::SubmitNode::handle): declarations, dials, master messages (subscriptions with snapshots, updates, failed slots, answers, errors, takeovers), closes, ticks, interrupt |
//! | [`store`] | [`store::format::decode`](regent_core::store::format::decode) on the bytes as an image, and on the bytes as the payload of an image with a correct header and CRC (so postcard's `Record` decoding is reached); round trip of what decodes |
//!
//! [`TARGETS`] lists them by name: the cargo-fuzz project in `tests/fuzz/`
//! has one `fuzz_target!` per entry, the corpus of each lives in
//! `fixtures/fuzz/<name>/`, and `tests/tests/fuzz_replay.rs` replays it
//! (plus a bounded number of random inputs) in `cargo test`.
//!
//! Structured inputs come from a [`Source`]: a reader of decisions over the
//! bytes (past the end every read is zero, so every byte string is a valid
//! input and short inputs are short runs).

pub mod alloc;
pub mod codec;
pub mod frames;
mod gen;
pub mod master_node;
pub mod store;
pub mod submit_node;
pub mod worker_node;

pub use gen::Source;

/// A fuzz target: any bytes in, no panic and no allocation over the limit.
pub type Target = fn(&[u8]);

/// Every fuzz target by name (the name of its cargo-fuzz binary and of its
/// corpus directory `fixtures/fuzz/<name>/`).
pub const TARGETS: &[(&str, Target)] = &[
    ("frames", frames::target),
    ("codec", codec::target),
    ("master_node", master_node::target),
    ("worker_node", worker_node::target),
    ("submit_node", submit_node::target),
    ("store", store::target),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

//! cargo-fuzz target `worker_node`: see `regent_tests::fuzz::worker_node`.
#![no_main]

use regent_tests::fuzz::{alloc, worker_node};

#[global_allocator]
static ALLOC: alloc::LimitAlloc = alloc::LimitAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| alloc::guarded(|| worker_node::target(data)));

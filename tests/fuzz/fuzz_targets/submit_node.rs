//! cargo-fuzz target `submit_node`: see `regent_tests::fuzz::submit_node`.
#![no_main]

use regent_tests::fuzz::{alloc, submit_node};

#[global_allocator]
static ALLOC: alloc::LimitAlloc = alloc::LimitAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| alloc::guarded(|| submit_node::target(data)));

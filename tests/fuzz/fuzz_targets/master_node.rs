//! cargo-fuzz target `master_node`: see `regent_tests::fuzz::master_node`.
#![no_main]

use regent_tests::fuzz::{alloc, master_node};

#[global_allocator]
static ALLOC: alloc::LimitAlloc = alloc::LimitAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| alloc::guarded(|| master_node::target(data)));

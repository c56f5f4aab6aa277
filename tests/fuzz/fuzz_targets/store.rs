//! cargo-fuzz target `store`: see `regent_tests::fuzz::store`.
#![no_main]

use regent_tests::fuzz::{alloc, store};

#[global_allocator]
static ALLOC: alloc::LimitAlloc = alloc::LimitAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| alloc::guarded(|| store::target(data)));

//! cargo-fuzz target `codec`: see `regent_tests::fuzz::codec`.
#![no_main]

use regent_tests::fuzz::{alloc, codec};

#[global_allocator]
static ALLOC: alloc::LimitAlloc = alloc::LimitAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| alloc::guarded(|| codec::target(data)));

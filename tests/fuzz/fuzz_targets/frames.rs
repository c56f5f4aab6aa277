//! cargo-fuzz target `frames`: see `regent_tests::fuzz::frames`.
#![no_main]

use regent_tests::fuzz::{alloc, frames};

#[global_allocator]
static ALLOC: alloc::LimitAlloc = alloc::LimitAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| alloc::guarded(|| frames::target(data)));

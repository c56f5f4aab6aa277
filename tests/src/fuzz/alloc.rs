//! A counting global allocator that refuses any single allocation over
//! [`MAX_SINGLE_ALLOC`] while a fuzz input runs.
//!
//! libFuzzer without a sanitizer enforces no memory limit, and a test
//! would only notice an allocation proportional to a peer-supplied number
//! when it is large enough to fail. docs/design.md#peer-input-never-panics says no peer number is
//! trusted before its limit check, and every limit keeps one allocation
//! well under 1 MiB, so any larger request made while an input runs is a
//! bug. The allocator counts every allocation, and on thread *armed* by
//! [`guarded`] a request over the limit prints what happened (without
//! allocating) and aborts the process: libFuzzer reports the abort as a
//! crash and saves the input; `cargo test` reports the test binary killed
//! by `SIGABRT`, with the message on stderr naming the input (see
//! [`set_label`]). Aborting, not panicking: a global allocator must not
//! unwind.
//!
//! Install it with
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOC: regent_tests::fuzz::alloc::LimitAlloc = regent_tests::fuzz::alloc::LimitAlloc;
//! ```
//!
//! Without it installed, [`guarded`] still runs the closure, and
//! [`stats`] reports nothing.
#![allow(unsafe_code)] // a GlobalAlloc implementation is unsafe by definition

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// The largest single allocation allowed while an input runs: 1 MiB.
pub const MAX_SINGLE_ALLOC: usize = 1 << 20;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static LARGEST_GUARDED: AtomicUsize = AtomicUsize::new(0);
static LABEL_PTR: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static LABEL_LEN: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting, and refusing (by aborting) a single
/// allocation over [`MAX_SINGLE_ALLOC`] on a thread inside [`guarded`].
#[derive(Clone, Copy, Debug, Default)]
pub struct LimitAlloc;

impl LimitAlloc {
    #[inline]
    fn check(size: usize) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // `try_with`: during thread teardown the flag may be gone; nothing
        // runs an input then.
        // A panic's report (its backtrace) is not the input's doing.
        if ARMED.try_with(Cell::get).unwrap_or(false) && !std::thread::panicking() {
            LARGEST_GUARDED.fetch_max(size, Ordering::Relaxed);
            if size > MAX_SINGLE_ALLOC {
                over_limit(size);
            }
        }
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the only addition is bookkeeping in atomics and a thread-local
// `Cell<bool>` (const-initialized, so reading it never allocates), and an
// abort that never returns.
unsafe impl GlobalAlloc for LimitAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::check(layout.size());
        // SAFETY: forwarded as is (see above).
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::check(layout.size());
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::check(new_size);
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Writes the report without allocating, then aborts.
#[cold]
fn over_limit(size: usize) -> ! {
    let mut err = std::io::stderr();
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = size;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let _ = err.write_all(b"\nregent fuzz harness: a single allocation of ");
    let _ = err.write_all(&digits[at..]);
    let _ = err.write_all(b" bytes, over the 1 MiB limit (docs/design.md#peer-input-never-panics: no allocation on trust)");
    let ptr = LABEL_PTR.load(Ordering::Acquire);
    if !ptr.is_null() {
        let len = LABEL_LEN.load(Ordering::Acquire);
        // SAFETY: `set_label` stores a leaked `&'static str`'s pointer
        // after its length; the pair is only read here.
        let label = unsafe { std::slice::from_raw_parts(ptr, len) };
        let _ = err.write_all(b", while running ");
        let _ = err.write_all(label);
    }
    let _ = err.write_all(b"\n");
    std::process::abort()
}

/// Runs `f` with the limit armed on this thread (nested calls are fine).
pub fn guarded<R>(f: impl FnOnce() -> R) -> R {
    struct Disarm(bool);
    impl Drop for Disarm {
        fn drop(&mut self) {
            ARMED.with(|a| a.set(self.0));
        }
    }
    let _restore = Disarm(ARMED.with(|a| a.replace(true)));
    f()
}

/// Names what runs next in the report of an allocation over the limit
/// (the replay test sets the corpus file or the random input's seed). The
/// label is leaked: call it once per input, in tests only.
pub fn set_label(label: String) {
    let leaked: &'static str = Box::leak(label.into_boxed_str());
    LABEL_PTR.store(std::ptr::null_mut(), Ordering::Release);
    LABEL_LEN.store(leaked.len(), Ordering::Release);
    LABEL_PTR.store(leaked.as_ptr() as *mut u8, Ordering::Release);
}

/// What the allocator counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    /// Allocations (and reallocations) since the process started, on every
    /// thread.
    pub allocations: u64,
    /// The largest single request made inside [`guarded`] so far.
    pub largest_guarded: usize,
}

/// The counters so far (zero when [`LimitAlloc`] is not the global
/// allocator).
pub fn stats() -> AllocStats {
    AllocStats {
        allocations: ALLOCATIONS.load(Ordering::Relaxed),
        largest_guarded: LARGEST_GUARDED.load(Ordering::Relaxed),
    }
}

//! The allocator of the rustnfs fuzz targets: the system allocator, aborting (a crash to
//! libFuzzer) on any single allocation above 64 MiB. No record, reply or READ buffer
//! comes near that, and without a sanitizer libFuzzer cannot see allocation sizes: a
//! client-chosen length allocated before it is checked would pass unnoticed on an
//! overcommitting host. Included by each target with `#[path]`, as the targets are
//! separate binaries.

/// The system allocator, refusing (abort) any single allocation above [`LIMIT`].
struct Capped;

const LIMIT: usize = 64 << 20;

impl Capped {
    fn check(size: usize) {
        if size > LIMIT {
            use std::io::Write;
            // No formatting: nothing here may allocate.
            let _ = std::io::stderr().write_all(b"fuzz target: one allocation above 64 MiB\n");
            std::process::abort();
        }
    }
}

// SAFETY: forwards to the system allocator unchanged, after the size check.
unsafe impl std::alloc::GlobalAlloc for Capped {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        Capped::check(l.size());
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: std::alloc::Layout) -> *mut u8 {
        Capped::check(l.size());
        unsafe { std::alloc::System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: std::alloc::Layout, new: usize) -> *mut u8 {
        Capped::check(new);
        unsafe { std::alloc::System.realloc(p, l, new) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        unsafe { std::alloc::System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Capped = Capped;

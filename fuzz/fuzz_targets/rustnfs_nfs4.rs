//! Fuzz target: the arguments of one NFSv4.0 COMPOUND (tag, minor version, operations),
//! sent to rustnfs in one COMPOUND call record as root (`rustnfs::fuzzing::nfs4_call`)
//! and answered on the guard's per-record path, so every mutation lands in the
//! operations' bounded decoding, the state tables and the file system calls. The RPC
//! header itself is `rustnfs_request`'s. Everything else as there:
//!
//! The export is a temporary directory made once per process (`rustnfs::fuzzing`): a
//! few files, a directory, symlinks pointing outside, and a sentinel file beside it.
//! `Target::check` panics when a reply is not an RPC reply carrying its call's xid, when
//! a reply holds the sentinel's bytes, or when anything outside the export changed.
//! Inputs name the export's handles by placeholder (see `rustnfs::fuzzing::placeholder`).
//! One allocation above 64 MiB aborts (a crash to libFuzzer): no record, reply or READ
//! buffer comes near that (records ≤ ~1 MiB), and without a sanitizer libFuzzer cannot
//! see allocation sizes — a client-chosen length allocated before it is checked (as
//! `nfs3_types` does) would pass unnoticed on an overcommitting host.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rustnfs::fuzzing::Target;

/// The system allocator, refusing (abort) any single allocation above [`LIMIT`].
struct Capped;

const LIMIT: usize = 64 << 20;

impl Capped {
    fn check(size: usize) {
        if size > LIMIT {
            use std::io::Write;
            // No formatting: nothing here may allocate.
            let _ = std::io::stderr().write_all(b"rustnfs_nfs4: one allocation above 64 MiB\n");
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

fn target() -> &'static Target {
    static T: OnceLock<Target> = OnceLock::new();
    T.get_or_init(|| Target::new().expect("the fuzz export is created"))
}

fuzz_target!(|data: &[u8]| {
    // Echoed client bytes are no leak: an input holding the sentinel proves nothing.
    if rustnfs::fuzzing::holds_sentinel(data) {
        return;
    }
    target().check(&rustnfs::fuzzing::nfs4_call(data));
});

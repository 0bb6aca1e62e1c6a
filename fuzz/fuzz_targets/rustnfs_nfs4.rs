//! Fuzz target: the arguments of one NFSv4 COMPOUND (tag, minor version 0, 1 or 2,
//! operations), sent to rustnfs in one COMPOUND call record as root
//! (`rustnfs::fuzzing::nfs4_call`) and answered on the guard's per-record path, so every
//! mutation lands in the operations' bounded decoding, the state tables, the sessions
//! and the file system calls. Each input gets a fresh NFSv4.2 session whose slot 0
//! expects sequence id 1, named by `rustnfs::fuzzing::SESSION_PLACEHOLDER`, so 4.1 and
//! 4.2 COMPOUNDs that start with SEQUENCE reach their operations. The RPC header itself
//! is `rustnfs_request`'s. Everything else as there:
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

#[path = "capped_alloc.rs"]
mod capped_alloc;

fn target() -> &'static Target {
    static T: OnceLock<Target> = OnceLock::new();
    T.get_or_init(|| {
        rustnfs::fuzzing::limit_file_size(256 << 20).expect("the file size cap is set");
        Target::new().expect("the fuzz export is created")
    })
}

fuzz_target!(|data: &[u8]| {
    // Echoed client bytes are no leak: an input holding the sentinel proves nothing.
    if rustnfs::fuzzing::holds_sentinel(data) {
        return;
    }
    target().check(&rustnfs::fuzzing::nfs4_call(data));
});

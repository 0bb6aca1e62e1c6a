//! Fuzz target: the bytes a client sends to rustnfs on one connection (record marks, RPC
//! header, credential, every procedure's arguments), answered on the guard's per-record path.
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
    target().check(data);
});

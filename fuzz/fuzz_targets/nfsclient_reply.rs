//! Fuzz target: replies from a hostile NFS server, for every call the client makes,
//! decoded as the client decodes them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nfsclient::fuzzing::{Call, Outcome, reply};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let call = Call::ALL[(sel & 0x7f) as usize % Call::ALL.len()];
    // The high bit leaves the reply's xid as sent (a confused server).
    let patch_xid = sel & 0x80 == 0;
    match reply(call, bytes, patch_xid) {
        Outcome::Data { len, .. } => assert!(len <= bytes.len()),
        Outcome::Entries(entries, _) => assert!(entries.len() <= bytes.len() / 8 + 1),
        _ => {}
    }
});

//! Fuzz target: NFSv4 COMPOUND results from a hostile server, through each of the
//! client's v4 decoders (the first byte picks one): attributes, OPEN, a READDIR page,
//! GETATTR, the RPC reply header.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nfsclient::fuzzing::{V4_DECODERS, v4_reply};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let _ = v4_reply(sel as usize % V4_DECODERS, bytes);
});

//! Fuzz target: responses from a hostile HTTP server to the load generator's worker,
//! arriving in arbitrary read sizes; and its chunked decoder split anywhere.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadgen::fuzzing::{End, STALLED, chunked, responses};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (reads, wire) = data.split_at(4);
    let reads: Vec<usize> = reads.iter().map(|&r| r as usize * 37 + 1).collect();
    let (resps, end) = responses(wire, &reads);
    let mut seen = 0u64;
    for r in &resps {
        assert!(r.body_bytes <= r.wire_bytes, "{r:?}");
        seen += r.wire_bytes;
    }
    if let End::Failed { wire_bytes, .. } = &end {
        seen += wire_bytes;
    }
    assert!(
        seen <= wire.len() as u64,
        "counted {seen} of {} bytes",
        wire.len()
    );

    // The chunked decoder gives the same answer however its input is split.
    let whole = chunked(wire, &[usize::MAX]);
    let split = chunked(wire, &reads);
    assert_ne!(split, Err(STALLED));
    match (&whole, &split) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        _ => panic!("whole {whole:?} vs split {split:?}"),
    }
});

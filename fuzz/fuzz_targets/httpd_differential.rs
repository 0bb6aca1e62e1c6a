//! Fuzz target: the same bytes on one connection to two httpd servers over the same
//! tree, one with the fast path and one without (hyper answers every request), must
//! get the same answers, but for the Date value, Server-Timing's durations and
//! multipart boundaries. The fast path promises to answer byte for byte as hyper does,
//! or to leave the request to it.
#![no_main]

use std::sync::OnceLock;

use httpd::fuzzing::{Server, difference};
use libfuzzer_sys::fuzz_target;

#[path = "httpd_tree.rs"]
mod tree;

struct Fixture {
    _dir: tempfile::TempDir,
    fast: Server,
    hyper: Server,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = tree::write(dir.path());
        let fast = Server::new(&root, true).expect("server with the fast path");
        let hyper = Server::new(&root, false).expect("server without the fast path");
        Fixture {
            _dir: dir,
            fast,
            hyper,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    // Both at once: an input that leaves a server waiting costs its timeout once.
    let (fast, hyper) = std::thread::scope(|s| {
        let fast = s.spawn(|| f.fast.exchange(data));
        let hyper = f.hyper.exchange(data);
        (fast.join().expect("fast exchange"), hyper)
    });
    let fast = fast.expect("the fast-path server neither answered nor closed within 10 s");
    let hyper = hyper.expect("the hyper server neither answered nor closed within 10 s");
    if let Some(d) = difference(&fast, &hyper) {
        panic!("{d}");
    }
});

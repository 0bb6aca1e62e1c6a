//! Fuzz target: any bytes a client sends to httpd on one connection, through the
//! server's accept loop, fast path and hyper, over a small served tree with a symlink
//! that points outside it.
#![no_main]

use std::sync::OnceLock;

use httpd::fuzzing::Server;
use libfuzzer_sys::fuzz_target;

#[path = "httpd_tree.rs"]
mod tree;

use tree::SECRET;

struct Fixture {
    _dir: tempfile::TempDir,
    server: Server,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = tree::write(dir.path());
        let server = Server::new(&root, true).expect("server");
        Fixture { _dir: dir, server }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let reply = f
        .server
        .exchange(data)
        .expect("httpd neither answered nor closed the connection within 10 s");
    assert!(
        !reply.windows(SECRET.len()).any(|w| w == SECRET),
        "a file outside the served root was sent"
    );
    // Every response hyper wrote must parse as HTTP/1.x, one after the other.
    let mut rest = &reply[..];
    while !rest.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        let head = match resp.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            other => panic!("unparsable response head: {other:?}"),
        };
        let code = resp.code.expect("status code");
        let len: usize = resp
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
            .unwrap_or(0);
        let header = |name: &str| {
            resp.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| std::str::from_utf8(h.value).unwrap().to_string())
        };
        let multipart = header("content-type").and_then(|t| {
            t.strip_prefix("multipart/byteranges; boundary=")
                .map(str::to_string)
        });
        if code == 206
            && let Some(boundary) = multipart
        {
            // Several ranges: no Content-Range of its own; the body (when there is one)
            // ends with the closing boundary.
            assert!(
                header("content-range").is_none(),
                "multipart with Content-Range"
            );
            let end = format!("--{boundary}--\r\n");
            // (A HEAD answer has no body: the bytes after it, if any, start otherwise.)
            let start = format!("--{boundary}\r\n");
            if let Some(body) = rest.get(head..head + len)
                && body.starts_with(start.as_bytes())
            {
                assert!(
                    body.ends_with(end.as_bytes()),
                    "multipart body without its end"
                );
            }
        } else if code == 206 {
            let cr = resp
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-range"))
                .expect("206 without Content-Range");
            let cr = std::str::from_utf8(cr.value).unwrap();
            let (range, size) = cr
                .strip_prefix("bytes ")
                .and_then(|r| r.split_once('/'))
                .expect("Content-Range form");
            let (a, b) = range.split_once('-').expect("range form");
            let (a, b, size): (u64, u64, u64) = (
                a.parse().unwrap(),
                b.parse().unwrap(),
                size.parse().unwrap(),
            );
            assert!(a <= b && b < size, "{cr}");
            assert_eq!(b - a + 1, len as u64, "{cr} vs Content-Length {len}");
        }
        // A HEAD response has a Content-Length but no body: it cannot be told from the
        // bytes alone, so stop at the first response that is not followed by its body.
        let body_end = head + len;
        if body_end > rest.len() {
            break;
        }
        rest = &rest[body_end..];
        if !rest.starts_with(b"HTTP/") {
            // HEAD (no body) or a 1xx; the remaining bytes are checked as another head
            // only when they look like one.
            break;
        }
    }
});

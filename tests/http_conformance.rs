//! HTTP conformance of httpd (issue 23): every protocol fix and feature, with raw
//! requests, against httpd `--root` and httpd `--nfs` (rustnfs in-process), and against
//! nginx where nginx is the reference; then REDbot (an HTTP linter nobody here wrote) on a
//! file, a directory redirect, a 304 and a 206 from both modes, failing on any BAD note.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common;
use crate::support::http::dataset;
use lab::http::Response;
use lab::inproc::{Httpd, Nfsd};

/// httpd over `www` both ways, each with `tweak` applied to its config; the NFS one
/// keeps its rustnfs alive.
struct Both {
    local: Httpd,
    nfs: Httpd,
    nfsd: Nfsd,
}

impl Both {
    fn start(www: &Path, tweak: impl Fn(&mut httpd::Config)) -> Both {
        let nfsd = Nfsd::exporting(www).unwrap();
        let mut local = httpd::Config::local(www);
        tweak(&mut local);
        let mut nfs = httpd::Config::nfs(nfsd.export_url());
        tweak(&mut nfs);
        Both {
            local: Httpd::start(local).unwrap(),
            nfs: Httpd::start(nfs).unwrap(),
            nfsd,
        }
    }

    /// (mode name, address) of both servers.
    fn each(&self) -> [(&'static str, SocketAddr); 2] {
        [("--root", self.local.addr), ("--nfs", self.nfs.addr)]
    }

    fn stop(self) {
        self.local.stop().unwrap();
        self.nfs.stop().unwrap();
        self.nfsd.stop().unwrap();
    }
}

/// nginx over `www`, when installed (required in CI).
fn nginx(www: &Path) -> Option<lab::peers::ExternalServer> {
    common::available(lab::peers::start_nginx(www))
}

/// Sends `raw` on a new connection, reads to the server's close.
fn ask(addr: SocketAddr, raw: &str) -> Response {
    lab::http::request(
        addr,
        raw.as_bytes(),
        Duration::from_secs(2),
        Duration::from_secs(15),
    )
    .unwrap_or_else(|e| panic!("{addr}: {e}\n{raw}"))
}

/// `GET target` with `extra` header lines (each ending in CRLF), `Connection: close`.
fn get(addr: SocketAddr, target: &str, extra: &str) -> Response {
    ask(
        addr,
        &format!("GET {target} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n"),
    )
}

fn head(addr: SocketAddr, target: &str, extra: &str) -> Response {
    ask(
        addr,
        &format!("HEAD {target} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n"),
    )
}

/// Every value of header `name` in a head (case-insensitive name).
fn all(r: &Response, name: &str) -> Vec<String> {
    r.head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_string())
        .collect()
}

// ---- §1: protocol bugs -----------------------------------------------------------------

#[test]
fn host_is_required_once_in_http_1_1() {
    let (_d, www) = dataset();
    let both = Both::start(&www, |_| {});
    let ng = nginx(&www);
    let mut servers = both.each().to_vec();
    servers.extend(ng.as_ref().map(|n| ("nginx", n.addr)));
    for (mode, addr) in servers {
        let r = ask(addr, "GET /small.bin HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert_eq!(r.status, 400, "{mode}: no Host\n{}", r.head);
        let r = ask(
            addr,
            "GET /small.bin HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(r.status, 400, "{mode}: two Hosts\n{}", r.head);
        let r = ask(addr, "GET /small.bin HTTP/1.0\r\n\r\n");
        assert_eq!((r.status, r.body.len()), (200, 4096), "{mode}: HTTP/1.0");
    }
    both.stop();
}

#[test]
fn a_trailing_slash_on_a_file_is_404() {
    let (_d, www) = dataset();
    let both = Both::start(&www, |_| {});
    let ng = nginx(&www);
    let mut servers = both.each().to_vec();
    servers.extend(ng.as_ref().map(|n| ("nginx", n.addr)));
    for (mode, addr) in servers {
        for target in ["/small.bin/", "/sub/note.txt/", "/index.html/"] {
            let r = get(addr, target, "");
            assert_eq!(r.status, 404, "{mode} {target}");
        }
        assert_eq!(get(addr, "/sub/note.txt", "").status, 200, "{mode}");
    }
    both.stop();
}

#[test]
fn conditional_headers_on_several_lines_are_one_list() {
    let (_d, www) = dataset();
    let both = Both::start(&www, |_| {});
    for (mode, addr) in both.each() {
        let tag = get(addr, "/small.bin", "")
            .header("etag")
            .unwrap()
            .to_string();
        let inm = format!("If-None-Match: \"a\"\r\nIf-None-Match: {tag}\r\n");
        assert_eq!(get(addr, "/small.bin", &inm).status, 304, "{mode}");
        let im = format!("If-Match: \"a\"\r\nIf-Match: {tag}\r\n");
        assert_eq!(get(addr, "/small.bin", &im).status, 200, "{mode}");
        let im = "If-Match: \"a\"\r\nIf-Match: \"b\"\r\n";
        assert_eq!(get(addr, "/small.bin", im).status, 412, "{mode}");
        // Two Range lines make no valid Range: the whole file.
        let r = get(
            addr,
            "/small.bin",
            "Range: bytes=0-1\r\nRange: bytes=2-3\r\n",
        );
        assert_eq!((r.status, r.body.len()), (200, 4096), "{mode}");
    }
    both.stop();
}

/// Reads from `s` until `end` appears (or 5 s pass); returns what was read.
fn read_until(s: &mut TcpStream, end: &[u8]) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    while !got.windows(end.len()).any(|w| w == end) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    got
}

#[test]
fn expect_100_continue_is_answered_cleanly() {
    let (_d, www) = dataset();
    let both = Both::start(&www, |_| {});
    for (mode, addr) in both.each() {
        // A small body: 100 Continue, the body is read, the connection stays usable.
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(
            b"GET /small.bin HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
        )
        .unwrap();
        let first = read_until(&mut s, b"\r\n\r\n");
        assert!(
            first.starts_with(b"HTTP/1.1 100"),
            "{mode}: {}",
            String::from_utf8_lossy(&first)
        );
        s.write_all(b"hello").unwrap();
        let mut second = read_until(&mut s, b"\r\n\r\n");
        assert!(second.starts_with(b"HTTP/1.1 200"), "{mode}");
        // The rest of its 4 KiB body.
        let head_len = second.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        while second.len() < head_len + 4096 {
            let mut buf = [0u8; 8192];
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => second.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(second.len(), head_len + 4096, "{mode}");
        s.write_all(b"HEAD /small.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let third = read_until(&mut s, b"\r\n\r\n");
        assert!(
            third.starts_with(b"HTTP/1.1 200"),
            "{mode}: the connection was not reusable: {}",
            String::from_utf8_lossy(&third)
        );

        // A large body: the final status at once, saying the connection closes, and a
        // clean close (no 100, the body is never read).
        let t = Instant::now();
        let r = ask(
            addr,
            "GET /small.bin HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000\r\nExpect: 100-continue\r\n\r\n",
        );
        assert_eq!((r.status, r.body.len()), (200, 4096), "{mode}\n{}", r.head);
        assert_eq!(r.header("connection"), Some("close"), "{mode}\n{}", r.head);
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{mode}: {:?}",
            t.elapsed()
        );
    }
    both.stop();
}

#[test]
fn nfs_status_waits_for_the_first_read() {
    let (_d, www) = dataset();
    let nfsd = Nfsd::exporting(&www).unwrap();
    let mut cfg = httpd::Config::nfs(nfsd.export_url());
    // Well inside the attribute cache's window: the open answers from the cache.
    cfg.nfs_attr_ttl = Duration::from_secs(60);
    cfg.nfs_timeout = Duration::from_secs(2);
    let h = Httpd::start(cfg).unwrap();
    let r = head(h.addr, "/testfile.bin", "");
    assert_eq!(r.status, 200);
    nfsd.stop().unwrap();
    let t = Instant::now();
    let r = get(h.addr, "/testfile.bin", "");
    assert!(
        (502..=504).contains(&r.status),
        "a dead NFS server answered {} with {} body bytes\n{}",
        r.status,
        r.body.len(),
        r.head
    );
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    h.stop().unwrap();
}

#[test]
fn redirect_location_and_server_timing_descriptions() {
    let (_d, www) = dataset();
    let both = Both::start(&www, |_| {});
    for (mode, addr) in both.each() {
        let r = get(addr, "/sub?x=1", "");
        assert_eq!(r.status, 301);
        // An absolute path (see the README: the Host header is the client's word).
        assert_eq!(r.header("location"), Some("/sub/?x=1"), "{mode}");
        let r = get(addr, "/small.bin", "");
        let st = r.header("server-timing").unwrap();
        assert!(
            st.starts_with("meta;dur=") && st.contains("desc=\"path lookup\""),
            "{mode}: {st}"
        );
        assert!(st.contains("read;dur=") && st.contains("desc=\"storage read\""));
    }
    both.stop();
}

// ---- §2: features ----------------------------------------------------------------------

/// The parts of a `multipart/byteranges` body: (Content-Range, bytes).
fn multipart(ctype: &str, body: &[u8]) -> Vec<(String, Vec<u8>)> {
    let boundary = ctype
        .split("boundary=")
        .nth(1)
        .unwrap_or_else(|| panic!("no boundary in {ctype}"))
        .trim_matches('"');
    let delim = format!("--{boundary}").into_bytes();
    let find = |hay: &[u8], n: &[u8]| hay.windows(n.len()).position(|w| w == n);
    let mut rest = &body[find(body, &delim).expect("a first boundary") + delim.len()..];
    let mut out = Vec::new();
    while !rest.starts_with(b"--") {
        rest = rest.strip_prefix(b"\r\n").expect("CRLF after a boundary");
        let end = find(rest, b"\r\n\r\n").expect("part headers");
        let heads = String::from_utf8_lossy(&rest[..end]).to_string();
        rest = &rest[end + 4..];
        let next_delim = [b"\r\n".as_slice(), &delim].concat();
        let end = find(rest, &next_delim).expect("the next boundary");
        let range = heads
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-range")
                    .then(|| v.trim().to_string())
            })
            .expect("Content-Range in a part");
        out.push((range, rest[..end].to_vec()));
        rest = &rest[end + next_delim.len()..];
    }
    out
}

#[test]
fn several_ranges_are_multipart_byteranges_like_nginx() {
    let (_d, www) = dataset();
    let big = std::fs::read(www.join("testfile.bin")).unwrap();
    let both = Both::start(&www, |_| {});
    let ng = nginx(&www);
    let mut servers = both.each().to_vec();
    servers.extend(ng.as_ref().map(|n| ("nginx", n.addr)));
    // Small parts, and parts large enough to be sent with sendfile / streamed over NFS.
    let asks = [
        (
            "bytes=0-9,20-29,-5",
            vec![(0usize, 9usize), (20, 29), (10_485_755, 10_485_759)],
        ),
        (
            "bytes=0-99999, 5000000-5299999",
            vec![(0, 99_999), (5_000_000, 5_299_999)],
        ),
    ];
    for (mode, addr) in servers {
        for (range, want) in &asks {
            let r = get(addr, "/testfile.bin", &format!("Range: {range}\r\n"));
            assert_eq!(r.status, 206, "{mode} {range}\n{}", r.head);
            let ctype = r.header("content-type").unwrap();
            assert!(
                ctype.starts_with("multipart/byteranges; boundary="),
                "{mode}"
            );
            assert_eq!(
                r.header("content-length"),
                Some(r.body.len().to_string().as_str()),
                "{mode}"
            );
            let parts = multipart(ctype, &r.body);
            let got: Vec<String> = parts.iter().map(|p| p.0.clone()).collect();
            let expect: Vec<String> = want
                .iter()
                .map(|(s, e)| format!("bytes {s}-{e}/10485760"))
                .collect();
            assert_eq!(got, expect, "{mode} {range}");
            for ((_, data), (s, e)) in parts.iter().zip(want) {
                assert!(*data == big[*s..=*e], "{mode} {range}: bytes of {s}-{e}");
            }
            let h = head(addr, "/testfile.bin", &format!("Range: {range}\r\n"));
            assert_eq!(
                h.header("content-length"),
                Some(r.body.len().to_string().as_str()),
                "{mode}: HEAD and GET disagree"
            );
        }
    }
    for (mode, addr) in both.each() {
        // Overlapping and unsorted ranges are coalesced: one whole-file part.
        let r = get(addr, "/small.bin", "Range: bytes=0-,0-,0-\r\n");
        assert_eq!(r.status, 206, "{mode}");
        assert_eq!(r.header("content-range"), Some("bytes 0-4095/4096"));
        assert_eq!(r.body.len(), 4096);
        let r = get(addr, "/small.bin", "Range: bytes=100-199,0-9\r\n");
        let parts = multipart(r.header("content-type").unwrap(), &r.body);
        assert_eq!(parts[0].0, "bytes 0-9/4096", "{mode}: sorted");
        // More parts than the bound: the whole file.
        let many: Vec<String> = (0..17)
            .map(|i| format!("{}-{}", i * 100, i * 100 + 1))
            .collect();
        let r = get(
            addr,
            "/small.bin",
            &format!("Range: bytes={}\r\n", many.join(",")),
        );
        assert_eq!((r.status, r.body.len()), (200, 4096), "{mode}");
    }
    both.stop();
}

/// `pc.txt` with `.gz` and `.br` variants (distinct bytes: only the choice is checked),
/// and a large `big.txt` with a large `.gz` (the streamed and sendfile paths).
fn precompressed_files(www: &Path) {
    std::fs::write(www.join("pc.txt"), "plain text\n".repeat(10)).unwrap();
    std::fs::write(www.join("pc.txt.gz"), b"GZ-BYTES").unwrap();
    std::fs::write(www.join("pc.txt.br"), b"BR-BYTES!").unwrap();
    std::fs::write(
        www.join("big.txt"),
        lab::dataset::pseudo_random_bytes(300_000, 5),
    )
    .unwrap();
    std::fs::write(
        www.join("big.txt.gz"),
        lab::dataset::pseudo_random_bytes(200_000, 6),
    )
    .unwrap();
}

#[test]
fn precompressed_variants_by_accept_encoding() {
    let (_d, www) = dataset();
    precompressed_files(&www);
    let both = Both::start(&www, |c| c.http.precompressed = true);
    let big_gz = std::fs::read(www.join("big.txt.gz")).unwrap();
    for (mode, addr) in both.each() {
        let plain = get(addr, "/pc.txt", "");
        assert_eq!(plain.body, "plain text\n".repeat(10).as_bytes(), "{mode}");
        assert_eq!(plain.header("vary"), Some("Accept-Encoding"), "{mode}");
        assert_eq!(plain.header("content-encoding"), None);
        let gz = get(addr, "/pc.txt", "Accept-Encoding: gzip\r\n");
        assert_eq!(gz.body, b"GZ-BYTES", "{mode}");
        assert_eq!(gz.header("content-encoding"), Some("gzip"));
        assert_eq!(gz.header("content-type"), plain.header("content-type"));
        assert_eq!(gz.header("vary"), Some("Accept-Encoding"));
        let br = get(addr, "/pc.txt", "Accept-Encoding: gzip, deflate, br\r\n");
        assert_eq!(
            (br.body.as_slice(), br.header("content-encoding")),
            (b"BR-BYTES!".as_slice(), Some("br")),
            "{mode}"
        );
        let q = get(addr, "/pc.txt", "Accept-Encoding: br;q=0, gzip;q=0.5\r\n");
        assert_eq!(q.body, b"GZ-BYTES", "{mode}: br refused");
        // No zstd file: a zstd-only client gets the identity file.
        let z = get(addr, "/pc.txt", "Accept-Encoding: zstd\r\n");
        assert_eq!(z.header("content-encoding"), None, "{mode}");
        // One ETag per encoding, and conditionals use the variant's.
        let tags = [&plain, &gz, &br].map(|r| r.header("etag").unwrap().to_string());
        assert!(tags[0] != tags[1] && tags[1] != tags[2] && tags[0] != tags[2]);
        let inm = format!("Accept-Encoding: gzip\r\nIf-None-Match: {}\r\n", tags[1]);
        let r = get(addr, "/pc.txt", &inm);
        assert_eq!(r.status, 304, "{mode}");
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
        let r = get(addr, "/pc.txt", &format!("If-None-Match: {}\r\n", tags[1]));
        assert_eq!(
            r.status, 200,
            "{mode}: the identity file is another representation"
        );
        // Ranges of a variant are ranges of its bytes; a large variant streams.
        let r = get(
            addr,
            "/pc.txt",
            "Accept-Encoding: gzip\r\nRange: bytes=0-1\r\n",
        );
        assert_eq!((r.status, r.body.as_slice()), (206, b"GZ".as_slice()));
        let r = get(addr, "/big.txt", "Accept-Encoding: gzip\r\n");
        assert!(r.body == big_gz, "{mode}: the large variant");
    }
    both.stop();
    // Off by default: the variants are never looked at.
    let both = Both::start(&www, |_| {});
    for (mode, addr) in both.each() {
        let r = get(addr, "/pc.txt", "Accept-Encoding: gzip, br\r\n");
        assert_eq!(r.body, "plain text\n".repeat(10).as_bytes(), "{mode}");
        assert_eq!(
            (r.header("vary"), r.header("content-encoding")),
            (None, None)
        );
    }
    both.stop();
}

#[test]
fn cache_control_custom_headers_and_no_server_timing() {
    let (_d, www) = dataset();
    let both = Both::start(&www, |c| {
        c.http.cache_control = Some("max-age=3600".into());
        c.http.cache_control_by_ext = vec![("html".into(), "no-cache".into())];
        c.http.headers = vec![
            ("X-Content-Type-Options".into(), "nosniff".into()),
            ("Server".into(), "static".into()),
        ];
        c.http.server_timing = false;
    });
    for (mode, addr) in both.each() {
        let r = get(addr, "/small.bin", "");
        let tag = r.header("etag").unwrap().to_string();
        assert_eq!(r.header("cache-control"), Some("max-age=3600"), "{mode}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(
            all(&r, "server"),
            ["static"],
            "{mode}: replaced, not doubled"
        );
        assert_eq!(r.header("server-timing"), None, "{mode}");
        let r = get(addr, "/small.bin", &format!("If-None-Match: {tag}\r\n"));
        assert_eq!(r.status, 304);
        assert_eq!(
            r.header("cache-control"),
            Some("max-age=3600"),
            "{mode}: 304"
        );
        let r = get(addr, "/small.bin", "Range: bytes=0-3\r\n");
        assert_eq!(
            r.header("cache-control"),
            Some("max-age=3600"),
            "{mode}: 206"
        );
        let r = get(addr, "/", "");
        assert_eq!(
            r.header("cache-control"),
            Some("no-cache"),
            "{mode}: index.html"
        );
        let r = get(addr, "/missing", "");
        assert_eq!(r.status, 404);
        assert_eq!(
            r.header("cache-control"),
            None,
            "{mode}: errors are not cached"
        );
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(r.header("server-timing"), None);
    }
    both.stop();
}

/// A shared byte buffer the access log is written into.
#[derive(Default, Clone)]
struct LogBuf(Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogBuf {
    fn target(&self) -> httpd::AccessLog {
        let w: Box<dyn Write + Send> = Box::new(self.clone());
        httpd::AccessLog::Writer(Arc::new(std::sync::Mutex::new(w)))
    }

    /// The log's lines once `n` have been written (or after 5 s), probes left out.
    fn lines(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = String::from_utf8_lossy(&self.0.lock().unwrap()).to_string();
            // Without the harness's readiness probes (`HEAD /`).
            let lines: Vec<String> = text
                .lines()
                .filter(|l| {
                    !l.contains("\"HEAD / HTTP/1.1\"") && !l.contains("\"method\":\"HEAD\"")
                })
                .map(str::to_string)
                .collect();
            if lines.len() >= n || Instant::now() > deadline {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Four access-log lines split into the two that logged `target` and the two that did
/// not, each pair in the order written; fails unless it is two and two.
fn by_target(lines: Vec<String>, target: &str) -> (Vec<String>, Vec<String>) {
    assert_eq!(lines.len(), 4, "{lines:?}");
    let (hits, others): (Vec<String>, Vec<String>) =
        lines.iter().cloned().partition(|l| l.contains(target));
    assert_eq!((hits.len(), others.len()), (2, 2), "{lines:?}");
    (hits, others)
}

#[test]
fn access_log_fields_and_combined_format() {
    let (_d, www) = dataset();
    let (json, combined) = (LogBuf::default(), LogBuf::default());
    for (fmt, buf) in [
        (httpd::AccessLogFormat::Json, &json),
        (httpd::AccessLogFormat::Combined, &combined),
    ] {
        let both = Both::start(&www, |c| {
            c.access_log = Some(buf.target());
            c.access_log_format = fmt;
        });
        for (_, addr) in both.each() {
            let r = ask(
                addr,
                "GET /small.bin?q=1 HTTP/1.1\r\nHost: example.test\r\nUser-Agent: probe \"1\"\r\nReferer: http://r.test/\r\nConnection: close\r\n\r\n",
            );
            assert_eq!(r.status, 200);
            let r = ask(addr, "GET /missing HTTP/1.0\r\n\r\n");
            assert_eq!(r.status, 404);
        }
        both.stop();
    }
    // A line is written once its response is done, which can be after the client
    // has read it all and sent the next request: under load the 404 of one server
    // can come before the 200 it followed. Pair the lines by what they logged.
    let (oks, misses) = by_target(json.lines(4), "/small.bin");
    for (ok, miss) in oks.iter().zip(&misses) {
        let ok: serde_json::Value = serde_json::from_str(ok).unwrap();
        assert_eq!(ok["host"], "example.test", "{ok}");
        assert_eq!(ok["user_agent"], "probe \"1\"");
        assert_eq!(ok["referer"], "http://r.test/");
        assert_eq!(ok["protocol"], "HTTP/1.1");
        assert_eq!(ok["status"], 200);
        let miss: serde_json::Value = serde_json::from_str(miss).unwrap();
        assert_eq!(miss["protocol"], "HTTP/1.0");
        assert!(miss["host"].is_null() && miss["user_agent"].is_null());
    }
    let (oks, misses) = by_target(combined.lines(4), "/small.bin");
    for (ok, miss) in oks.iter().zip(&misses) {
        assert!(ok.starts_with("127.0.0.1 - - ["), "{ok}");
        assert!(
            ok.ends_with(
                "+0000] \"GET /small.bin?q=1 HTTP/1.1\" 200 4096 \"http://r.test/\" \"probe \\\"1\\\"\""
            ),
            "{ok}"
        );
        assert!(
            miss.ends_with("\"GET /missing HTTP/1.0\" 404 14 \"-\" \"-\""),
            "{miss}"
        );
    }
}

#[test]
fn hidden_dotfiles_and_json_listings() {
    let (_d, www) = dataset();
    std::fs::write(www.join(".env"), "SECRET=1\n").unwrap();
    std::fs::create_dir(www.join(".git")).unwrap();
    std::fs::write(www.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir(www.join("list")).unwrap();
    for name in ["b.txt", "a.txt", ".hidden", "C.txt"] {
        std::fs::write(www.join("list").join(name), name).unwrap();
    }
    std::fs::create_dir(www.join("list/zdir")).unwrap();
    let both = Both::start(&www, |c| c.list_dirs = true);
    for (mode, addr) in both.each() {
        assert_eq!(
            get(addr, "/.env", "").status,
            200,
            "{mode}: shown by default"
        );
        let r = get(addr, "/list/?format=json", "");
        assert_eq!(r.header("content-type"), Some("application/json"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        let names: Vec<&str> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["zdir", ".hidden", "C.txt", "a.txt", "b.txt"],
            "{mode}"
        );
        assert_eq!(v[0]["type"], "dir");
        assert_eq!(v[2]["size"], 5);
        let html = get(addr, "/list/", "");
        assert!(String::from_utf8_lossy(&html.body).contains("href=\"a.txt\""));
    }
    both.stop();
    let both = Both::start(&www, |c| {
        c.list_dirs = true;
        c.http.hide_dotfiles = true;
    });
    for (mode, addr) in both.each() {
        for target in ["/.env", "/.git/config", "/.git/", "/list/.hidden"] {
            assert_eq!(get(addr, target, "").status, 404, "{mode} {target}");
        }
        let r = get(addr, "/list/?format=json", "");
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 4, "{mode}: .hidden listed");
        let html = String::from_utf8_lossy(&get(addr, "/list/", "").body).to_string();
        assert!(!html.contains(".hidden"), "{mode}");
    }
    both.stop();
}

// ---- REDbot ------------------------------------------------------------------------------

/// REDbot's notes on `url` as (note id, level), from its HAR output (its text output
/// does not print levels), or `None` when REDbot is not installed.
fn redbot(url: &str) -> Option<Vec<(String, String)>> {
    let program = common::require_tool("redbot")?;
    let out = common::run_ok(std::process::Command::new(program).args(["-o", "har", url]));
    let har: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("REDbot's HAR for {url}: {e}"));
    fn walk(v: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    if k == "_red_messages" {
                        for n in v.as_array().into_iter().flatten() {
                            let s = |f: &str| n[f].as_str().unwrap_or("").to_string();
                            out.push((s("note_id"), s("level")));
                        }
                    } else {
                        walk(v, out);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut notes = Vec::new();
    walk(&har, &mut notes);
    assert!(!notes.is_empty(), "REDbot said nothing about {url}");
    Some(notes)
}

/// REDbot checks a URL with its own follow-up requests: a conditional one (the 304:
/// `INM_304`, `IMS_304`) and a ranged one (the 206: `RANGE_CORRECT`).
#[test]
fn redbot_finds_nothing_bad() {
    let (_d, www) = dataset();
    let both = Both::start(&www, |_| {});
    for (mode, addr) in both.each() {
        for (path, must) in [
            ("/small.bin", &["INM_304", "IMS_304", "RANGE_CORRECT"][..]),
            ("/testfile.bin", &["INM_304", "RANGE_CORRECT"][..]),
            ("/sub", &[][..]),
        ] {
            let Some(notes) = redbot(&format!("http://{addr}{path}")) else {
                both.stop();
                return;
            };
            let bad: Vec<_> = notes.iter().filter(|(_, l)| l == "BAD").collect();
            assert!(bad.is_empty(), "{mode} {path}: REDbot BAD notes {bad:?}");
            for id in must {
                assert!(
                    notes.iter().any(|(n, _)| n == id),
                    "{mode} {path}: no {id} in {notes:?}"
                );
            }
        }
    }
    both.stop();
}

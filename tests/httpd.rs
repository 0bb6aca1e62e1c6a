//! End-to-end tests of httpd: real `curl` and `ab` against the server started in-process
//! on 127.0.0.1:0, for the local backend and the NFS backend (against NFS-Ganesha and
//! rustnfs started by the test); raw sockets for what curl would normalise away
//! (escape attempts, a client that never finishes its headers).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common;
use crate::support::http::*;
use lab::inproc::Httpd;

/// curl checks shared by both backends: bytes, Range, HEAD, 304, 412, 416, If-Range.
fn check_http_features(h: &Httpd, www: &Path) {
    let big = std::fs::read(www.join("testfile.bin")).unwrap();
    let (status, hd, body) = curl_head(&[&h.url("/testfile.bin")]);
    assert_eq!(status, 200);
    assert!(body == big, "10 MiB body differs");
    assert_eq!(header(&hd, "content-length"), Some("10485760"));
    assert_eq!(
        header(&hd, "content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(header(&hd, "accept-ranges"), Some("bytes"));
    assert!(header(&hd, "last-modified").is_some());
    let st = header(&hd, "server-timing").expect("Server-Timing header");
    assert!(st.starts_with("meta;dur="), "{st}");
    let etag = header(&hd, "etag").expect("ETag").to_string();

    // Small file: read at header time, so Server-Timing has the read phase too.
    let small = std::fs::read(www.join("small.bin")).unwrap();
    let (status, hd, body) = curl_head(&[&h.url("/small.bin")]);
    assert_eq!((status, body == small), (200, true));
    assert!(header(&hd, "server-timing").unwrap().contains("read;dur="));

    // Ranges: inside, open-ended, suffix, across the inline/streamed boundary.
    for (range, start, end) in [
        ("0-99", 0usize, 99usize),
        ("10485700-", 10_485_700, 10_485_759),
        ("-5000", 10_480_760, 10_485_759),
        ("1000-3000000", 1000, 3_000_000),
    ] {
        let (status, hd, body) = curl_head(&["-r", range, &h.url("/testfile.bin")]);
        assert_eq!(status, 206, "range {range}");
        assert!(body == big[start..=end], "range {range} bytes differ");
        assert_eq!(
            header(&hd, "content-range"),
            Some(format!("bytes {start}-{end}/10485760").as_str())
        );
    }
    let (status, hd, _) = curl_head(&["-r", "20000000-", &h.url("/testfile.bin")]);
    assert_eq!(status, 416);
    assert_eq!(header(&hd, "content-range"), Some("bytes */10485760"));
    // If-Range with a stale validator: the whole file, 200.
    let (status, _, body) = curl_head(&[
        "-r",
        "0-9",
        "-H",
        "If-Range: \"old\"",
        &h.url("/testfile.bin"),
    ]);
    assert_eq!((status, body.len()), (200, big.len()));
    let (status, _, body) = curl_head(&[
        "-r",
        "0-9",
        "-H",
        &format!("If-Range: {etag}"),
        &h.url("/testfile.bin"),
    ]);
    assert_eq!((status, body.len()), (206, 10));

    // HEAD: same headers, no body.
    let (status, hd, _) = curl_head(&["-I", &h.url("/testfile.bin")]);
    assert_eq!(status, 200);
    assert_eq!(header(&hd, "content-length"), Some("10485760"));
    assert_eq!(header(&hd, "etag"), Some(etag.as_str()));
    let (status, head, body) = try_raw(
        h.addr,
        "HEAD /testfile.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    assert_eq!((status, body.len()), (200, 0), "{head}");

    // Conditionals.
    let (status, _, body) = curl_head(&[
        "-H",
        &format!("If-None-Match: {etag}"),
        &h.url("/testfile.bin"),
    ]);
    assert_eq!((status, body.len()), (304, 0));
    let lm = {
        let (_, hd, _) = curl_head(&["-I", &h.url("/testfile.bin")]);
        header(&hd, "last-modified").unwrap().to_string()
    };
    let (status, _, _) = curl_head(&[
        "-H",
        &format!("If-Modified-Since: {lm}"),
        &h.url("/testfile.bin"),
    ]);
    assert_eq!(status, 304);
    let (status, _, _) = curl_head(&["-H", "If-Match: \"nope\"", &h.url("/testfile.bin")]);
    assert_eq!(status, 412);
    let (status, _, _) = curl_head(&["-H", "If-None-Match: \"nope\"", &h.url("/small.bin")]);
    assert_eq!(status, 200);

    // index.html for /, a redirect for a directory without its slash, 403 without index.
    let (status, hd, body) = curl_head(&[&h.url("/")]);
    assert_eq!(status, 200);
    assert_eq!(body, std::fs::read(www.join("index.html")).unwrap());
    assert_eq!(
        header(&hd, "content-type"),
        Some("text/html; charset=utf-8")
    );
    let (status, hd, _) = curl_head(&[&h.url("/sub")]);
    assert_eq!(status, 301);
    assert_eq!(header(&hd, "location"), Some("/sub/"));
    let (status, _, _) = curl_head(&[&h.url("/sub/")]);
    assert_eq!(status, 403);
    let (status, _, _) = curl_head(&[&h.url("/missing.bin")]);
    assert_eq!(status, 404);
    let (status, _, _) = curl_head(&["-X", "POST", &h.url("/small.bin")]);
    assert_eq!(status, 405);

    // Keep-alive: two requests on one connection.
    let out = curl(&[
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        "-w",
        "%{num_connects}\n",
        &h.url("/small.bin"),
        &h.url("/small.bin"),
    ]);
    let connects: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(connects, ["1", "0"], "second request reused the connection");

    // Every request was recorded at the end of its body.
    assert!(h.count("GET file", "total", "200") >= 3);
    assert!(h.count("GET range", "total", "206") >= 4);
    assert!(h.count("GET file", "total", "304") >= 2);
}

// ---- local backend ----------------------------------------------------------------------------

/// Guard rail of the sendfile marker trick (issue 15): pipelined keep-alive responses
/// whose bodies cross the marker size arrive byte-exact, in order — a marker copied or
/// reordered by hyper would show up as zeros or as the other file's bytes.
#[test]
fn pipelined_sendfile_responses_cross_the_marker_size_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let frame = httpd::SENDFILE_FRAME_MAX;
    // No zero byte anywhere, so a marker sent as itself (zeros) cannot go unnoticed.
    let pattern = |len: usize, k: usize| -> Vec<u8> {
        (0..len).map(|i| ((i * 7 + k) % 251 + 1) as u8).collect()
    };
    let a = pattern(frame + 4099, 1);
    let b = pattern(2 * frame + 1, 2);
    std::fs::write(dir.path().join("a.bin"), &a).unwrap();
    std::fs::write(dir.path().join("b.bin"), &b).unwrap();
    let h = Httpd::start(httpd::Config::local(dir.path())).unwrap();
    let mut c = lab::http::Connection::connect(h.addr, Duration::from_secs(20)).unwrap();
    let range = format!("bytes=1000-{}", frame + 999);
    let reqs = format!(
        "GET /a.bin HTTP/1.1\r\nHost: t\r\n\r\n\
         GET /b.bin HTTP/1.1\r\nHost: t\r\n\r\n\
         GET /b.bin HTTP/1.1\r\nHost: t\r\nRange: {range}\r\n\r\n\
         GET /a.bin HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    );
    c.send(reqs.as_bytes()).unwrap();
    let expected: [(u16, &[u8]); 4] = [
        (200, &a),
        (200, &b),
        (206, &b[1000..frame + 1000]),
        (200, &a),
    ];
    for (i, (status, body)) in expected.iter().enumerate() {
        let r = c.read_response().unwrap();
        assert_eq!(r.status, *status, "response {i}: {}", r.head);
        assert!(
            r.body == *body,
            "response {i}: body differs ({} bytes)",
            r.body.len()
        );
    }
    // Nothing after the last response: the server closes cleanly.
    let pending = c.pending().is_empty();
    let mut rest = Vec::new();
    c.stream().read_to_end(&mut rest).unwrap();
    assert!(
        pending && rest.is_empty(),
        "extra bytes after the last response"
    );
    assert_eq!(h.count("GET file", "total", "200"), 3);
    h.stop().unwrap();
}

#[test]
fn local_curl_features_and_ab() {
    if common::require_tool("curl").is_none() || common::require_tool("ab").is_none() {
        return;
    }
    let (_dir, www) = dataset();
    let h = Httpd::start(httpd::Config::local(&www)).unwrap();
    check_http_features(&h, &www);
    ab_100(&h.url("/testfile.bin"), 10 << 20);
    assert!(h.count("GET file", "total", "200") >= 100);
    // The same without sendfile (read + write path) gives the same bytes.
    let mut cfg = httpd::Config::local(&www);
    cfg.sendfile = false;
    let h2 = Httpd::start(cfg).unwrap();
    let big = std::fs::read(www.join("testfile.bin")).unwrap();
    let (status, _, body) = curl_head(&[&h2.url("/testfile.bin")]);
    assert!(status == 200 && body == big);
    ab_100(&h2.url("/testfile.bin"), 10 << 20);
    h.stop().unwrap();
    h2.stop().unwrap();
}

#[test]
fn listing_metrics_and_access_log() {
    if common::require_tool("curl").is_none() {
        return;
    }
    let (_dir, www) = dataset();
    std::fs::write(www.join("sub/<odd> & name.txt"), "x").unwrap();
    let log: Arc<LogBuf> = Arc::default();
    let mut cfg = httpd::Config::local(&www);
    cfg.list_dirs = true;
    cfg.access_log = Some(httpd::AccessLog::Writer(Arc::new(std::sync::Mutex::new(
        Box::new(LogWriter(log.clone())) as Box<dyn Write + Send>,
    ))));
    let h = Httpd::start(cfg).unwrap();
    let (status, _, body) = curl_head(&[&h.url("/sub/")]);
    assert_eq!(status, 200);
    let html = String::from_utf8(body).unwrap();
    assert!(html.contains("href=\"note.txt\""), "{html}");
    assert!(html.contains("&lt;odd&gt; &amp; name.txt"), "{html}");
    curl(&["-o", "/dev/null", &h.url("/testfile.bin")]);

    // Metrics endpoint on its own listener. A data cache's values ride along (this
    // server has none: they read 0).
    let cache = Arc::new(httpd::storage::CacheStats::default());
    let metrics = h.metrics(Some(cache)).unwrap();
    let maddr = metrics.addr;
    let prom = String::from_utf8(curl(&[&format!("http://{maddr}/metrics")]).stdout).unwrap();
    assert!(
        prom.contains(
            "httpd_request_duration_seconds_bucket{op=\"GET file\",phase=\"send\",status=\"200\""
        ),
        "{prom}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&curl(&[&format!("http://{maddr}/metrics.json")]).stdout).unwrap();
    assert!(json.to_string().contains("GET dir"));
    assert_eq!(json["nfs_data_cache"]["bytes"], 0, "{json}");
    assert!(prom.contains("httpd_nfs_data_cache_hits_total 0"), "{prom}");
    metrics.stop().unwrap();

    h.stop().unwrap();
    // After shutdown the log is flushed: one JSON line per request with the phases.
    let text = log.text();
    let line = text
        .lines()
        .find(|l| l.contains("/testfile.bin"))
        .unwrap_or_else(|| panic!("no log line for the download:\n{text}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["status"], 200);
    assert_eq!(v["bytes"], 10 << 20);
    assert_eq!(v["complete"], true);
    for k in ["total_ms", "meta_ms", "read_ms", "send_ms"] {
        assert!(v[k].is_number(), "{k} in {line}");
    }
}

/// A shared byte buffer the access log is written into.
#[derive(Default)]
struct LogBuf(std::sync::Mutex<Vec<u8>>);

impl LogBuf {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).to_string()
    }
}

struct LogWriter(Arc<LogBuf>);

impl Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn escape_attempts_never_reach_outside_files() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let secret = "TOP-SECRET-OUTSIDE-THE-ROOT";
    std::fs::write(outside.join("secret.txt"), secret).unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir(&www).unwrap();
    std::fs::write(www.join("inside.txt"), "inside").unwrap();
    std::fs::write(www.join("secret.txt"), "decoy").unwrap();
    let link =
        |target: &Path, name: &str| std::os::unix::fs::symlink(target, www.join(name)).unwrap();
    link(&outside.join("secret.txt"), "abs-link");
    link(Path::new("../outside/secret.txt"), "rel-link");
    link(&outside, "dir-link");
    link(Path::new("inside.txt"), "good-link");

    let h = Httpd::start(httpd::Config::local(&www)).unwrap();
    let cases: &[(&str, &[u16])] = &[
        ("/../outside/secret.txt", &[400]),
        ("/%2e%2e/outside/secret.txt", &[400]),
        ("/%2E%2E/outside/secret.txt", &[400]),
        ("/.%2e/outside/secret.txt", &[400]),
        ("/%2e%2e%2foutside%2fsecret.txt", &[400]),
        ("/..%2foutside%2fsecret.txt", &[400]),
        ("/..\\outside\\secret.txt", &[400]),
        ("/%5c..%5coutside%5csecret.txt", &[400]),
        ("/inside.txt%00.html", &[400]),
        (
            &format!("/{}", outside.join("secret.txt").display()),
            &[404],
        ),
        (
            &format!("/{}", outside.join("secret.txt").display()).replace('/', "//"),
            &[404],
        ),
        ("/abs-link", &[403]),
        ("/rel-link", &[403]),
        ("/dir-link/secret.txt", &[403]),
        ("relative.txt", &[400]),
    ];
    for (target, allowed) in cases {
        let (status, head, body) = raw_get(h.addr, target);
        let body = String::from_utf8_lossy(&body);
        assert!(
            !body.contains(secret),
            "{target} leaked the outside file: {head}"
        );
        assert!(
            allowed.contains(&status),
            "{target}: got {status}, want {allowed:?}\n{head}"
        );
    }
    // Symlinks that stay inside the root work.
    let (status, _, body) = raw_get(h.addr, "/good-link");
    assert_eq!((status, body.as_slice()), (200, &b"inside"[..]));
    h.stop().unwrap();

    // With --follow-symlinks the outside link is served: the refusal above was the guard.
    let mut cfg = httpd::Config::local(&www);
    cfg.follow_symlinks = true;
    let h = Httpd::start(cfg).unwrap();
    let (status, _, body) = raw_get(h.addr, "/abs-link");
    assert_eq!((status, body.as_slice()), (200, secret.as_bytes()));
    // ... but dot segments are still refused.
    let (status, _, _) = raw_get(h.addr, "/../outside/secret.txt");
    assert_eq!(status, 400);
    h.stop().unwrap();
}

#[test]
fn slow_client_is_disconnected_and_connections_are_capped() {
    let (_dir, www) = dataset();
    let mut cfg = httpd::Config::local(&www);
    cfg.header_timeout = Duration::from_secs(1);
    cfg.max_connections = 2;
    let h = Httpd::start(cfg).unwrap();
    // Let the readiness probe's connection finish and release its permit.
    std::thread::sleep(Duration::from_millis(200));

    // A client that never finishes its headers is cut off after the header timeout.
    let mut slow = TcpStream::connect(h.addr).unwrap();
    slow.write_all(b"GET /small.bin HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        .unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let t = Instant::now();
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(5),
        "disconnected after {took:?}"
    );

    // Two silent connections hold both permits: a third client is served all the same,
    // the one silent longest closed to make room (issue 22: idle connections at the cap
    // held every newcomer until the header timeout).
    let mut hold1 = TcpStream::connect(h.addr).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let _hold2 = TcpStream::connect(h.addr).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut third = TcpStream::connect(h.addr).unwrap();
    third
        .write_all(b"GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    third
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut resp = Vec::new();
    third.read_to_end(&mut resp).unwrap();
    assert!(
        resp.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&resp)
    );
    hold1
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut one = [0u8; 1];
    assert!(
        matches!(hold1.read(&mut one), Ok(0)),
        "the oldest silent connection was closed"
    );
    h.stop().unwrap();
}

#[test]
fn graceful_shutdown_finishes_in_flight_download() {
    let (_dir, www) = dataset();
    let h = Httpd::start(httpd::Config::local(&www)).unwrap();
    let addr = h.addr;
    // A slow reader (~2.5 MB/s): the server still has megabytes to write (more than the
    // socket buffers hold) when shutdown starts.
    let dl = std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /testfile.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 128 * 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        got
    });
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let registry = h.registry.clone();
    h.stop().unwrap();
    let stop_took = t.elapsed();
    let got = dl.join().unwrap();
    let split = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    assert!(got.starts_with(b"HTTP/1.1 200"));
    assert!(
        got[split + 4..] == std::fs::read(www.join("testfile.bin")).unwrap(),
        "the in-flight body was cut: {} bytes",
        got.len() - split - 4
    );
    assert!(
        stop_took > Duration::from_millis(200),
        "shutdown did not wait: {stop_took:?}"
    );
    // The request was timed to its last byte written, not to its headers.
    let snap = registry.snapshot();
    let total = snap
        .get(&latency::Key::new("GET file", "total", "200"))
        .expect("download recorded");
    assert!(
        total.quantile_seconds(1.0) > 0.5,
        "total {}",
        total.quantile_seconds(1.0)
    );
    let send = snap
        .get(&latency::Key::new("GET file", "send", "200"))
        .unwrap();
    assert!(send.quantile_seconds(1.0) > 0.5);
}

#[test]
fn stalled_reader_is_cut_off_by_the_idle_timeout() {
    let (_dir, www) = dataset();
    let mut cfg = httpd::Config::local(&www);
    cfg.idle_timeout = Duration::from_secs(1);
    let h = Httpd::start(cfg).unwrap();
    let mut s = TcpStream::connect(h.addr).unwrap();
    s.write_all(b"GET /testfile.bin HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    // Read nothing: the socket buffers fill and the server's writes stall.
    let deadline = Instant::now() + Duration::from_secs(10);
    while h.count("GET file", "total", "499") == 0 {
        assert!(Instant::now() < deadline, "stalled connection never closed");
        std::thread::sleep(Duration::from_millis(100));
    }
    // What the client can still read is less than the whole body, then the end.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(got.len() < 10 << 20, "{} bytes", got.len());
    h.stop().unwrap();
}

#[test]
fn oversized_request_head_is_refused() {
    let (_dir, www) = dataset();
    let h = Httpd::start(httpd::Config::local(&www)).unwrap();
    let big = "x".repeat(40 * 1024);
    let (status, _, _) = try_raw(
        h.addr,
        &format!("GET /small.bin HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\nConnection: close\r\n\r\n"),
    )
    .unwrap_or((0, String::new(), Vec::new()));
    // hyper answers 431, or closes the connection outright; never a 200.
    assert!(status == 431 || status == 0 || status == 400, "{status}");
    let (status, _, _) = raw_get(h.addr, "/small.bin");
    assert_eq!(status, 200);
    h.stop().unwrap();
}

#[test]
fn ipv6_listener() {
    if common::require_tool("curl").is_none() {
        return;
    }
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        common::skip("no IPv6 loopback (::1 cannot be bound)");
        return;
    }
    let (_dir, www) = dataset();
    let h = Httpd::start_on(None, "[::1]:0", httpd::Config::local(&www)).unwrap();
    let (status, _, body) = curl_head(&["-g", &h.url("/index.html")]);
    assert_eq!(status, 200);
    assert_eq!(body, std::fs::read(www.join("index.html")).unwrap());
    h.stop().unwrap();
}

// ---- NFS backend: NFS-Ganesha ------------------------------------------------------------

use crate::support::ganesha;

/// One response: status, selected headers, body.
type Resp = (u16, Vec<(String, String)>, Vec<u8>);

/// Full responses for a set of requests.
fn responses(h: &Httpd) -> Vec<Resp> {
    let keep = [
        "content-length",
        "content-type",
        "content-range",
        "etag",
        "last-modified",
        "accept-ranges",
        "location",
    ];
    let mut out = Vec::new();
    for args in [
        vec![h.url("/testfile.bin")],
        vec![h.url("/small.bin")],
        vec![h.url("/mid.bin")],
        vec![h.url("/")],
        vec![h.url("/sub")],
        vec![h.url("/sub/note.txt")],
        vec![h.url("/nope")],
        vec!["-r".into(), "5-70000".into(), h.url("/testfile.bin")],
        vec!["-r".into(), "-100".into(), h.url("/mid.bin")],
        vec!["-I".into(), h.url("/testfile.bin")],
    ] {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let (status, hd, mut body) = curl_head(&a);
        if a[0] == "-I" {
            // curl -I writes the headers (with their Date) where the body would go.
            body.clear();
        }
        let hd = hd
            .into_iter()
            .filter(|(k, _)| keep.contains(&k.as_str()))
            .collect();
        out.push((status, hd, body));
    }
    out
}

#[test]
fn nfs_backend_against_ganesha_matches_local() {
    if common::require_tool("curl").is_none() || common::require_tool("ab").is_none() {
        return;
    }
    let (_dir, www) = dataset();
    let Some(g) = ganesha::start(&www) else {
        return;
    };
    nfs_backend_matches_local(httpd::Config::nfs(ganesha::url(&g)), &www);
    // The splice path parses Ganesha's replies (its own fragmenting and attributes) too.
    nfs_backend_matches_local(spliced(httpd::Config::nfs(ganesha::url(&g))), &www);
}

/// `--nfs-splice`: READ data goes socket → pipe → socket.
fn spliced(mut cfg: httpd::Config) -> httpd::Config {
    cfg.nfs_splice = true;
    cfg
}

#[test]
fn nfs_server_killed_gives_fast_5xx_then_recovers() {
    if common::require_tool("curl").is_none() {
        return;
    }
    let (_dir, www) = dataset();
    let Some(mut g) = ganesha::start(&www) else {
        return;
    };
    let mut cfg = httpd::Config::nfs(ganesha::url(&g));
    cfg.nfs_timeout = Duration::from_secs(2);
    cfg.nfs_attr_ttl = Duration::ZERO;
    let h = Httpd::start(cfg).unwrap();
    let small = std::fs::read(www.join("small.bin")).unwrap();
    let (status, _, body) = raw_get(h.addr, "/small.bin");
    assert!(status == 200 && body == small);

    g.kill();
    for path in ["/small.bin", "/testfile.bin"] {
        let t = Instant::now();
        let (status, _, _) = raw_get(h.addr, path);
        assert!(
            (502..=504).contains(&status),
            "{path}: {status} while the server is down"
        );
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{path}: took {:?}",
            t.elapsed()
        );
    }

    g.restart().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, _, body) = raw_get(h.addr, "/small.bin");
        if status == 200 {
            assert!(body == small);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no recovery after restart: {status}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, _, body) = raw_get(h.addr, "/testfile.bin");
    assert!(status == 200 && body == std::fs::read(www.join("testfile.bin")).unwrap());
    h.stop().unwrap();
}

// ---- NFS backend: rustnfs --------------------------------------------------------------------

#[test]
fn nfs_backend_against_rustnfs_matches_local() {
    if common::require_tool("curl").is_none() || common::require_tool("ab").is_none() {
        return;
    }
    let (_dir, www) = dataset();
    let server = common::Nfsd::exporting(&www).unwrap();
    nfs_backend_matches_local(httpd::Config::nfs(server.export_url()), &www);
    nfs_backend_matches_local(spliced(httpd::Config::nfs(server.export_url())), &www);
}

/// httpd with an NFS config passes the HTTP feature checks and `ab`, and answers every
/// request exactly as httpd `--root www` does (status, headers, body).
fn nfs_backend_matches_local(cfg: httpd::Config, www: &Path) {
    let nfs = Httpd::start(cfg).unwrap();
    check_http_features(&nfs, www);
    ab_100(&nfs.url("/testfile.bin"), 10 << 20);
    let local = Httpd::start(httpd::Config::local(www)).unwrap();
    let (a, b) = (responses(&local), responses(&nfs));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x.0, y.0, "status of request {i}");
        assert_eq!(x.1, y.1, "headers of request {i}");
        assert!(x.2 == y.2, "body of request {i} differs");
    }
    nfs.stop().unwrap();
    local.stop().unwrap();
}

/// Issue 11 §1: clients that request a large NFS-backed file and stop reading must not
/// hold the stream budget other downloads need (before the fix, four of them made every
/// other large download `200` with no bytes until the 60 s idle timeout).
///
/// Then the same with READ data in pipes (`--nfs-splice`): a stalled response's pipes
/// count against the same budget as its buffers would. Each httpd has budgets of its own,
/// so the other tests' servers in this process do not take from them (when they shared
/// one, 256 stalled clients here took 28 s in a CI rehearsal).
#[test]
fn stalled_readers_do_not_starve_other_downloads() {
    // From one address and from four, with READ data in buffers and in pipes. Past 256
    // streamed bodies each new one caps its socket's unsent bytes (a stalled client's
    // socket otherwise takes 2.8 MB, and 1,000 of them had httpd copying 2.8 GB into
    // them first) and keeps the budget its written frames give back: 1,000 from four
    // addresses with buffers took 0.35-1.5 s before, 0.03-0.16 s after (binary runs).
    stalled_readers_do_not_starve(false, 1, &[8, 16, 64, 128, 256, 1000]);
    stalled_readers_do_not_starve(false, 4, &[8, 64, 256, 1000]);
    stalled_readers_do_not_starve(true, 4, &[8, 16, 64, 128, 256, 1000]);
}

/// Up to 1,000 stalled clients (issue 22's largest attack), spread over `addresses`
/// loopback addresses from 127.0.0.2.
fn stalled_readers_do_not_starve(splice: bool, addresses: u8, counts: &[usize]) {
    let (_dir, www) = dataset();
    let server = common::Nfsd::exporting(&www).unwrap();
    let mut cfg = httpd::Config::nfs(server.export_url());
    cfg.nfs_splice = splice;
    let h = Httpd::start(cfg).unwrap();
    let want = std::fs::read(www.join("testfile.bin")).unwrap();
    let mid = std::fs::read(www.join("mid.bin")).unwrap();
    let (status, body, alone) = timed_get(h.addr, "/testfile.bin");
    assert!(status == 200 && body == want, "baseline download");
    let mut stalled = Vec::new();
    for &n in counts {
        while stalled.len() < n {
            let from = std::net::Ipv4Addr::new(
                127,
                0,
                0,
                2 + (stalled.len() % usize::from(addresses)) as u8,
            );
            stalled.push(stalled_client_from(h.addr, "/testfile.bin", from));
        }
        // Let their socket buffers fill and the server notice that they do not drain:
        // newcomers that all stall at once wait their turn for the budget, and those
        // still holding shared budget when the stalled budget is full are closed after
        // 0.5 s without a byte moved while others wait, so a burst takes a few rounds of
        // ~0.6 s to absorb (256 at once: 45 s before frames were capped at 128 KiB). The
        // victim, from another address, waits behind one body of each stalled address,
        // not behind all of them (1,000 from one address: 22 s when the queue was FIFO).
        std::thread::sleep(Duration::from_millis(1500 + 10 * n as u64));
        // Issue 22's goal: under 1 s, or 2 × the quiet time + 0.5 s if that is more.
        let bound = (alone * 2 + Duration::from_millis(500)).max(Duration::from_secs(1));
        let tries = victim_downloads(h.addr, &want, bound);
        eprintln!(
            "victim with {n} stalled clients from {addresses} address(es), splice {splice}: \
             {tries:?} (alone: {alone:?}, bound {bound:?})"
        );
        // Starvation (the bug this test guards) holds every try until the 60 s idle
        // timeout; a neighbour's burst of CPU (the suite runs beside heavier tests on 2
        // cores: one CI run had a single slow try) holds only one. So the best of up to
        // three tries must be whole and inside the bound.
        assert!(
            tries.iter().any(|t| t.whole && t.took < bound),
            "{n} stalled clients: no victim download was whole within {bound:?}: {tries:?}"
        );
        let (status, body, _) = timed_get(h.addr, "/mid.bin");
        assert!(status == 200 && body == mid, "{n} stalled: 200 KB file");
    }
    drop(stalled);
    h.stop().unwrap();
}

/// One victim download beside the stalled clients: its time and whether its body was whole.
#[derive(Debug)]
struct VictimTry {
    took: Duration,
    whole: bool,
}

/// Downloads `/testfile.bin` up to three times, stopping at the first whole download
/// within `bound`; a status other than 200 fails at once (never a load artefact).
fn victim_downloads(addr: SocketAddr, want: &[u8], bound: Duration) -> Vec<VictimTry> {
    let mut tries = Vec::new();
    for _ in 0..3 {
        let (status, body, took) = timed_get(addr, "/testfile.bin");
        assert_eq!(
            status, 200,
            "victim download status (tries so far: {tries:?})"
        );
        let whole = body == want;
        tries.push(VictimTry { took, whole });
        if whole && took < bound {
            break;
        }
    }
    tries
}

#[test]
fn nfs_caches_expire_after_their_ttl() {
    let (_dir, www) = dataset();
    let server = common::Nfsd::exporting(&www).unwrap();
    let mut cfg = httpd::Config::nfs(server.export_url());
    cfg.nfs_attr_ttl = Duration::from_millis(300);
    let h = Httpd::start(cfg).unwrap();
    let (_, _, first) = raw_get(h.addr, "/sub/note.txt");
    assert_eq!(first, b"a note\n");
    std::fs::write(www.join("sub/note.txt"), "a longer, changed note\n").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let (status, _, body) = raw_get(h.addr, "/sub/note.txt");
    assert_eq!(
        (status, body.as_slice()),
        (200, &b"a longer, changed note\n"[..])
    );
    std::fs::remove_file(www.join("sub/note.txt")).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let (status, _, _) = raw_get(h.addr, "/sub/note.txt");
    assert_eq!(status, 404);
    h.stop().unwrap();
}

/// The data cache's counters: (bytes held, hits, misses, evictions, uncached).
fn cache_counts(stats: &httpd::storage::CacheStats) -> (u64, u64, u64, u64, u64) {
    use std::sync::atomic::Ordering::Relaxed;
    (
        stats.bytes.load(Relaxed),
        stats.hits.load(Relaxed),
        stats.misses.load(Relaxed),
        stats.evictions.load(Relaxed),
        stats.uncached.load(Relaxed),
    )
}

/// Writes `data` to `path` and sets its mtime to `mtime_s` seconds after the epoch.
fn write_with_mtime(path: &Path, data: &[u8], mtime_s: u64) {
    std::fs::write(path, data).unwrap();
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(mtime_s))
        .unwrap();
}

/// Where a data-cache test keeps its copies: memfds, or a directory of unlinked files
/// (`--nfs-data-cache-dir`, a temporary directory on the test machine's /tmp).
#[derive(Clone, Copy, Debug)]
enum CopiesIn {
    Memory,
    Dir,
}

impl CopiesIn {
    /// Sets `cfg`'s data cache to `size` bytes with copies here; the directory, if any,
    /// lives as long as the returned guard.
    fn configure(self, cfg: &mut httpd::Config, size: u64) -> Option<tempfile::TempDir> {
        cfg.nfs_data_cache = size;
        let dir = match self {
            CopiesIn::Memory => None,
            CopiesIn::Dir => Some(tempfile::tempdir().unwrap()),
        };
        cfg.nfs_data_cache_dir = dir.as_ref().map(|d| d.path().to_path_buf());
        dir
    }
}

#[test]
fn nfs_data_cache_serves_changed_files_new_after_revalidation() {
    serves_changed_files_new_after_revalidation(CopiesIn::Memory);
}

#[test]
fn nfs_data_cache_serves_changed_files_new_after_revalidation_from_a_dir() {
    serves_changed_files_new_after_revalidation(CopiesIn::Dir);
}

fn serves_changed_files_new_after_revalidation(copies: CopiesIn) {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path();
    let big = www.join("big.bin");
    let small = www.join("small.txt");
    write_with_mtime(
        &big,
        &lab::dataset::pseudo_random_bytes(300 << 10, 1),
        1_000_000,
    );
    write_with_mtime(&small, b"first version\n", 1_000_000);
    let server = common::Nfsd::exporting(www).unwrap();
    let mut cfg = httpd::Config::nfs(server.export_url());
    let copies_dir = copies.configure(&mut cfg, 64 << 20);
    // A long attribute TTL: only the per-open revalidation can notice the changes.
    cfg.nfs_attr_ttl = Duration::from_secs(600);
    let stats = cfg.nfs_data_cache_stats.clone();
    let h = Httpd::start(cfg).unwrap();
    for seed in [1, 1] {
        let (status, _, body) = raw_get(h.addr, "/big.bin");
        assert_eq!(status, 200);
        assert!(body == lab::dataset::pseudo_random_bytes(300 << 10, seed));
        assert_eq!(raw_get(h.addr, "/small.txt").2, b"first version\n");
    }
    let (_, hits, misses, _, _) = cache_counts(&stats);
    assert_eq!((hits, misses), (2, 2), "second round served from the cache");
    // Same size, new content and mtime.
    write_with_mtime(
        &big,
        &lab::dataset::pseudo_random_bytes(300 << 10, 2),
        1_000_001,
    );
    write_with_mtime(&small, b"second versio\n", 1_000_001);
    let (status, head, body) = raw_get(h.addr, "/big.bin");
    assert_eq!(status, 200);
    assert!(
        body == lab::dataset::pseudo_random_bytes(300 << 10, 2),
        "{head}"
    );
    assert_eq!(raw_get(h.addr, "/small.txt").2, b"second versio\n");
    // A new size (the mtime set back to the old one: the size alone must tell).
    write_with_mtime(
        &big,
        &lab::dataset::pseudo_random_bytes(200 << 10, 3),
        1_000_001,
    );
    let (status, head, body) = raw_get(h.addr, "/big.bin");
    assert_eq!(status, 200);
    assert!(
        head.contains(&format!("content-length: {}", 200 << 10)),
        "{head}"
    );
    assert!(body == lab::dataset::pseudo_random_bytes(200 << 10, 3));
    let (bytes, hits, misses, _, _) = cache_counts(&stats);
    assert_eq!((hits, misses, bytes), (2, 5, (200 << 10) + 14));
    // Removed on the server: 404 at once, not a cached copy.
    std::fs::remove_file(&big).unwrap();
    assert_eq!(raw_get(h.addr, "/big.bin").0, 404);
    h.stop().unwrap();
    if let Some(d) = copies_dir {
        // Unlinked copies: nothing was ever visible in the directory.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}

#[test]
fn nfs_data_cache_stays_within_its_size() {
    stays_within_its_size(CopiesIn::Memory);
}

#[test]
fn nfs_data_cache_stays_within_its_size_in_a_dir() {
    stays_within_its_size(CopiesIn::Dir);
}

fn stays_within_its_size(copies: CopiesIn) {
    const MIB: usize = 1 << 20;
    const SIZE: u64 = 12 << 20;
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path();
    for i in 0..10u64 {
        std::fs::write(
            www.join(format!("f{i}.bin")),
            lab::dataset::pseudo_random_bytes(2 * MIB, 10 + i),
        )
        .unwrap();
    }
    let ten = lab::dataset::pseudo_random_bytes(10 * MIB, 7);
    std::fs::write(www.join("ten.bin"), &ten).unwrap();
    let over = lab::dataset::pseudo_random_bytes(13 * MIB, 8);
    std::fs::write(www.join("over.bin"), &over).unwrap();
    let server = common::Nfsd::exporting(www).unwrap();
    let mut cfg = httpd::Config::nfs(server.export_url());
    let _copies_dir = copies.configure(&mut cfg, SIZE);
    let stats = cfg.nfs_data_cache_stats.clone();
    let h = Httpd::start(cfg).unwrap();
    // 20 MiB of files through a 12 MiB cache, twice: the bound holds after every one.
    for round in 0..2 {
        for i in 0..10u64 {
            let (status, _, body) = raw_get(h.addr, &format!("/f{i}.bin"));
            assert_eq!(status, 200);
            assert!(
                body == lab::dataset::pseudo_random_bytes(2 * MIB, 10 + i),
                "f{i} round {round}"
            );
            let (bytes, ..) = cache_counts(&stats);
            assert!(bytes <= SIZE, "{bytes} cached bytes > {SIZE}");
        }
    }
    let (_, _, _, evictions, _) = cache_counts(&stats);
    assert!(evictions >= 10, "only {evictions} evictions");
    // Larger than the cache: served over the wire, exact, nothing evicted for it.
    let before = cache_counts(&stats);
    let (status, _, body) = raw_get(h.addr, "/over.bin");
    assert!(status == 200 && body == over, "13 MiB file served uncached");
    let after = cache_counts(&stats);
    assert_eq!((after.3, after.4), (before.3, before.4 + 1));
    // The 10 MiB file: filled once, then served from the cache, byte-exact both times.
    for _ in 0..2 {
        let (status, _, body) = raw_get(h.addr, "/ten.bin");
        assert!(status == 200 && body == ten, "10 MiB file from the cache");
    }
    let end = cache_counts(&stats);
    assert_eq!((end.1 - after.1, end.2 - after.2), (1, 1));
    assert!(end.0 <= SIZE && end.0 >= 10 * MIB as u64);
    h.stop().unwrap();
}

/// A tmpfs of `size` mounted on a new temporary directory, unmounted on drop.
struct TinyTmpfs(tempfile::TempDir);

impl TinyTmpfs {
    fn mount(size: &str) -> TinyTmpfs {
        let dir = tempfile::tempdir().unwrap();
        common::run_ok(Command::new("mount").args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size}"),
            "servelab-test",
            dir.path().to_str().unwrap(),
        ]));
        TinyTmpfs(dir)
    }
}

impl Drop for TinyTmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// issue 11 §4: a copy that does not fit on the cache directory's file system fails its
/// fill with ENOSPC; the request is still answered, over the wire, and counted uncached.
#[test]
fn nfs_data_cache_dir_out_of_space_serves_over_the_wire() {
    if !lab::is_root() {
        common::skip("mounting a 1 MiB tmpfs to fill up needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path();
    let two = lab::dataset::pseudo_random_bytes(2 << 20, 21);
    std::fs::write(www.join("two.bin"), &two).unwrap();
    let half = lab::dataset::pseudo_random_bytes(512 << 10, 22);
    std::fs::write(www.join("half.bin"), &half).unwrap();
    let server = common::Nfsd::exporting(www).unwrap();
    let tiny = TinyTmpfs::mount("1m");
    let mut cfg = httpd::Config::nfs(server.export_url());
    cfg.nfs_data_cache = 64 << 20;
    cfg.nfs_data_cache_dir = Some(tiny.0.path().to_path_buf());
    let stats = cfg.nfs_data_cache_stats.clone();
    let h = Httpd::start(cfg).unwrap();
    // 2 MiB does not fit in the 1 MiB file system (the cache's SIZE would allow it).
    for round in 1..=2 {
        let (status, _, body) = raw_get(h.addr, "/two.bin");
        assert!(status == 200 && body == two, "over the wire, round {round}");
        let (bytes, hits, misses, _, uncached) = cache_counts(&stats);
        assert_eq!((bytes, hits, misses, uncached), (0, 0, 0, round));
    }
    // What fits is still cached.
    for _ in 0..2 {
        let (status, _, body) = raw_get(h.addr, "/half.bin");
        assert!(status == 200 && body == half);
    }
    let (bytes, hits, misses, _, uncached) = cache_counts(&stats);
    assert_eq!((bytes, hits, misses, uncached), (512 << 10, 1, 1, 2));
    h.stop().unwrap();
}

#[test]
fn nfs_symlinks_follow_local_rules() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let secret = "TOP-SECRET-OUTSIDE-THE-ROOT";
    std::fs::write(outside.join("secret.txt"), secret).unwrap();
    // The export is `dir`, the served root its `www` subdirectory, so `../outside` exists
    // on the server but lies outside what httpd serves.
    let www = dir.path().join("www");
    std::fs::create_dir_all(www.join("sub")).unwrap();
    std::fs::write(www.join("sub/inside.txt"), "inside").unwrap();
    let link =
        |target: &str, name: &str| std::os::unix::fs::symlink(target, www.join(name)).unwrap();
    link("sub/inside.txt", "good-link");
    link("sub", "dir-good");
    link("../outside/secret.txt", "rel-link");
    link("sub/../../outside/secret.txt", "sneaky-link");
    link(outside.join("secret.txt").to_str().unwrap(), "abs-link");
    link("loop-b", "loop-a");
    link("loop-a", "loop-b");
    let server = common::Nfsd::exporting(dir.path()).unwrap();
    let nfs = Httpd::start(httpd::Config::nfs(format!(
        "{}/www",
        server.export_url().trim_end_matches('/')
    )))
    .unwrap();
    let local = Httpd::start(httpd::Config::local(&www)).unwrap();
    for (path, want) in [
        ("/good-link", 200),
        ("/dir-good/inside.txt", 200),
        ("/rel-link", 403),
        ("/sneaky-link", 403),
        ("/abs-link", 403),
        ("/loop-a", 403),
    ] {
        for h in [&nfs, &local] {
            let (status, _, body) = raw_get(h.addr, path);
            assert!(
                !String::from_utf8_lossy(&body).contains(secret),
                "{path} leaked"
            );
            let backend = if std::ptr::eq(h, &nfs) {
                "nfs"
            } else {
                "local"
            };
            assert_eq!(status, want, "{backend} {path}");
            if want == 200 {
                assert_eq!(body, b"inside", "{backend} {path}");
            }
        }
    }
    nfs.stop().unwrap();
    local.stop().unwrap();
}

#[test]
fn nfs_unreachable_at_start_is_a_clear_error() {
    let port = common::free_port();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let cfg = httpd::Config::nfs(format!("nfs://127.0.0.1:{port}/"));
    let err = rt
        .block_on(httpd::serve(
            listener,
            cfg,
            latency::Registry::new("t"),
            async {},
        ))
        .unwrap_err();
    let line = httpd::Chain(&err).to_string();
    assert!(line.starts_with("--nfs nfs://"), "{line}");
    assert!(line.contains("unreachable"), "{line}");
}

// ---- start-up errors (the built binaries) ------------------------------------------------

/// Runs a built binary with `args` (RUST_BACKTRACE set, stderr to a file) and expects it to
/// exit non-zero within `within`; returns its last stderr line after checking that the
/// output has no backtrace, no repeated cause and no colour escape.
fn start_up_error(bin: &Path, args: &[&str], within: Duration) -> String {
    let t = Instant::now();
    let stderr = tempfile::NamedTempFile::new().unwrap();
    let mut child = lab::process::Supervised::spawn(
        "start-up",
        Command::new(bin)
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::null())
            .stderr(stderr.reopen().unwrap()),
        None,
    )
    .unwrap();
    let status = loop {
        if let Some(s) = child.try_wait() {
            break s;
        }
        assert!(
            t.elapsed() < within,
            "{args:?} still running after {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "{args:?} succeeded");
    let err = std::fs::read_to_string(stderr.path()).unwrap();
    assert!(!err.contains('\x1b'), "colour in a pipe: {err:?}");
    assert!(
        !err.contains("Caused by") && !err.contains("backtrace"),
        "{args:?}: {err}"
    );
    let last = err.lines().last().unwrap_or_default().to_string();
    // No part of the message is said twice ("unreachable: ...: unreachable: ...").
    let parts: Vec<&str> = last.split(": ").collect();
    for (i, p) in parts.iter().enumerate() {
        assert!(!parts[i + 1..].contains(p), "repeated {p:?} in {last:?}");
    }
    last
}

/// Issue 11 §2: with `--metrics` and the NFS server down, httpd exits at once with one
/// line naming the server (it used to log "metrics listening" and hang forever).
#[test]
fn nfs_down_with_metrics_exits_naming_the_server() {
    let bin = common::workspace_bin("httpd", "httpd");
    let port = common::free_port();
    let url = format!("nfs://127.0.0.1:{port}/");
    // The connect timeout is 2 s at most; the process must not outlive it by much.
    let line = start_up_error(
        &bin,
        &[
            "--nfs",
            &url,
            "--metrics",
            "127.0.0.1:0",
            "--listen",
            "127.0.0.1:0",
        ],
        Duration::from_secs(5),
    );
    assert!(line.starts_with("httpd: --nfs "), "{line}");
    assert!(
        line.contains(&format!("NFS server 127.0.0.1:{port} is unreachable")),
        "{line}"
    );
}

/// Issue 11 §6: each start-up error is one line naming the flag and the thing.
#[test]
fn start_up_errors_name_the_flag_and_the_thing() {
    let httpd = common::workspace_bin("httpd", "httpd");
    let rustnfs = common::workspace_bin("rustnfs", "rustnfs");
    let servelab = common::workspace_bin("servelab", "servelab");
    let (_dir, www) = dataset();
    let root = www.display().to_string();
    let quick = Duration::from_secs(10);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().to_string();
    let in_use = |flag: &str| format!("{flag} {busy}: address already in use");

    let line = start_up_error(&httpd, &["--root", &root, "--listen", &busy], quick);
    assert_eq!(line, format!("httpd: {}", in_use("--listen")));
    let args = [
        "--root",
        &root,
        "--listen",
        "127.0.0.1:0",
        "--metrics",
        &busy,
    ];
    let line = start_up_error(&httpd, &args, quick);
    assert_eq!(line, format!("httpd: {}", in_use("--metrics")));
    let missing = www.join("missing");
    let missing = missing.to_str().unwrap();
    let line = start_up_error(&httpd, &["--root", missing], quick);
    assert!(
        line.ends_with(&format!("--root {missing}: no such directory")),
        "{line}"
    );
    let file = www.join("small.bin");
    let line = start_up_error(&httpd, &["--root", file.to_str().unwrap()], quick);
    assert!(line.ends_with("small.bin: not a directory"), "{line}");

    // The NFS path inside the export, by name.
    let server = common::Nfsd::exporting(&www).unwrap();
    let url = format!("{}/missing", server.export_url());
    let line = start_up_error(&httpd, &["--nfs", &url, "--listen", "127.0.0.1:0"], quick);
    assert_eq!(
        line,
        format!("httpd: --nfs {url}: path /missing does not exist on the NFS server")
    );

    // The same rules for rustnfs and for servelab's subcommands.
    let line = start_up_error(&rustnfs, &["--export", &root, "--listen", &busy], quick);
    assert_eq!(line, format!("rustnfs: {}", in_use("--listen")));
    let args = [
        "--export",
        &root,
        "--listen",
        "127.0.0.1:0",
        "--metrics",
        &busy,
    ];
    let line = start_up_error(&rustnfs, &args, quick);
    assert_eq!(line, format!("rustnfs: {}", in_use("--metrics")));
    let line = start_up_error(&rustnfs, &["--export", missing], quick);
    assert!(
        line.ends_with(&format!("--export {missing}: no such directory")),
        "{line}"
    );
    let line = start_up_error(
        &servelab,
        &["httpd", "--root", &root, "--listen", &busy],
        quick,
    );
    assert_eq!(line, format!("servelab: {}", in_use("--listen")));
    // Issue 35 §1: `servelab rustnfs` said "I/O error: Address already in use (os error
    // 98)", naming neither the flag nor the address.
    for flag in ["--listen", "--metrics"] {
        let other = if flag == "--listen" {
            "--metrics"
        } else {
            "--listen"
        };
        let args = [
            "rustnfs",
            "--export",
            &root,
            flag,
            &busy,
            other,
            "127.0.0.1:0",
        ];
        let line = start_up_error(&servelab, &args, quick);
        assert_eq!(line, format!("servelab: {}", in_use(flag)));
    }
    drop(taken);
}

// ---- httpd --healthcheck (the built binary) ------------------------------------------------

/// Runs `httpd --healthcheck ARGS`; returns (exit code, stdout + stderr, elapsed).
fn healthcheck(args: &[&str]) -> (i32, String, Duration) {
    let bin = common::workspace_bin("httpd", "httpd");
    common::run_timed(
        Command::new(bin)
            .arg("--healthcheck")
            .args(args)
            .env_remove("RUST_LOG"),
    )
}

#[test]
fn healthcheck_flag_reports_healthy_and_unhealthy() {
    let (_dir, www) = dataset();
    let h = Httpd::start(httpd::Config::local(&www)).unwrap();
    // Healthy: the running server answers HEAD /; a wildcard listen address is probed on
    // loopback (the image's 0.0.0.0:PORT).
    for listen in [h.addr.to_string(), format!("0.0.0.0:{}", h.addr.port())] {
        let (code, text, _) = healthcheck(&["--listen", &listen]);
        assert_eq!(code, 0, "{listen}: {text}");
        assert_eq!(text.lines().count(), 1, "one line: {text}");
        assert!(text.starts_with("healthy: http://127.0.0.1:"), "{text}");
        assert!(text.contains("HTTP 200"), "{text}");
    }
    // Unhealthy: nothing listening (fast), and a listener that never answers (3 s limit).
    let port = common::free_port().to_string();
    let (code, text, took) = healthcheck(&["--listen", &format!("127.0.0.1:{port}")]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("unhealthy") && text.contains("connect failed"),
        "{text}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = silent.local_addr().unwrap().to_string();
    let (code, text, took) = healthcheck(&["--listen", &listen]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("no answer within 3s"), "{text}");
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(6),
        "{took:?}"
    );
    drop(silent);
    h.stop().unwrap();
}

// ---- HTTPD_* environment variables (the built binary) --------------------------------------

#[test]
fn env_vars_configure_every_flag_the_image_uses() {
    if common::require_tool("curl").is_none() {
        return;
    }
    let bin = common::workspace_bin("httpd", "httpd");
    let (dir, www) = dataset();
    let (port, metrics) = (common::free_port(), common::free_port());
    let log = dir.path().join("access.log");
    let env = [
        ("HTTPD_LISTEN", format!("127.0.0.1:{port}")),
        ("HTTPD_ROOT", www.display().to_string()),
        ("HTTPD_METRICS", format!("127.0.0.1:{metrics}")),
        ("HTTPD_ACCESS_LOG", log.display().to_string()),
        ("HTTPD_WORKERS", "1".to_string()),
        ("HTTPD_LIST", "yes".to_string()),
        ("HTTPD_NO_SENDFILE", "1".to_string()),
    ];
    let mut cmd = Command::new(&bin);
    cmd.env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (k, v) in &env {
        cmd.env(k, v);
    }
    let mut child = lab::process::Supervised::spawn("httpd", &mut cmd, None).unwrap();
    // The probe reads HTTPD_LISTEN too; it also says when the server is up.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = Command::new(&bin)
            .arg("--healthcheck")
            .env("HTTPD_LISTEN", &env[0].1)
            .output()
            .unwrap();
        if out.status.success() {
            break;
        }
        assert!(child.try_wait().is_none(), "httpd exited at start");
        assert!(
            Instant::now() < deadline,
            "httpd did not come up on HTTPD_LISTEN"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let addr: SocketAddr = env[0].1.parse().unwrap();
    // HTTPD_ROOT: the files; HTTPD_LIST: a listing for a directory without index.html.
    let (status, _, body) = raw_get(addr, "/small.bin");
    assert_eq!(status, 200);
    assert_eq!(body, std::fs::read(www.join("small.bin")).unwrap());
    let (status, _, body) = raw_get(addr, "/sub/");
    assert_eq!(status, 200, "HTTPD_LIST=yes lists directories");
    assert!(String::from_utf8_lossy(&body).contains("note.txt"));
    // HTTPD_METRICS: the metrics listener counts those requests.
    let out = curl(&["-fsS", &format!("http://127.0.0.1:{metrics}/metrics")]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("httpd_request"), "{text}");
    // HTTPD_ACCESS_LOG: one JSON line per request.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lines = std::fs::read_to_string(&log).unwrap_or_default();
        if lines.lines().count() >= 2 {
            assert!(lines.contains("/small.bin"), "{lines}");
            break;
        }
        assert!(Instant::now() < deadline, "access log: {lines:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(child);

    // A flag on the command line wins over its variable; a bad value is a clear error.
    let out = Command::new(&bin)
        .args(["--healthcheck", "--listen", &format!("127.0.0.1:{port}")])
        .env("HTTPD_LISTEN", "127.0.0.1:1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    let out = Command::new(&bin)
        .env("HTTPD_ROOT", &www)
        .env("HTTPD_WORKERS", "many")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("many") && text.contains("--workers"),
        "{text}"
    );
    let out = Command::new(&bin)
        .env("HTTPD_ROOT", &www)
        .env("HTTPD_LIST", "perhaps")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a boolean"));
}

// ---- the server's own counts (the built binary) -------------------------------------------

/// One HTTP/1.1 exchange on `s`: sends `request`, reads the head and exactly the body its
/// Content-Length announces (none for HEAD); returns the status.
fn exchange_whole(s: &mut TcpStream, request: &str, head_only: bool) -> u16 {
    s.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let status: u16 = head[9..12].parse().unwrap();
    let len: u64 = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    if !head_only {
        let got = std::io::copy(&mut (&mut *s).take(len), &mut std::io::sink()).unwrap();
        assert_eq!(got, len, "{request:?}: body cut short");
    }
    status
}

/// Sends the requests of one round — whole large, mid-sized and small files, a single
/// and a multipart range, a HEAD, a 404 — on one keep-alive connection or a connection
/// each (`Connection: close`), reading every body whole; counts the statuses received.
fn one_round(addr: SocketAddr, keep_alive: bool) -> std::collections::BTreeMap<u16, u64> {
    let requests: [(&str, &str, &str); 10] = [
        ("GET", "/testfile.bin", ""),
        ("GET", "/testfile.bin", ""),
        ("GET", "/mid.bin", ""),
        ("GET", "/mid.bin", ""),
        ("GET", "/small.bin", ""),
        ("GET", "/testfile.bin", "Range: bytes=100-3000000\r\n"),
        (
            "GET",
            "/testfile.bin",
            "Range: bytes=0-9,5000000-5000099\r\n",
        ),
        ("GET", "/mid.bin", "Range: bytes=0-9,100-199\r\n"),
        ("HEAD", "/testfile.bin", ""),
        ("GET", "/missing", ""),
    ];
    let mut got = std::collections::BTreeMap::new();
    let mut conn = None;
    for (method, path, extra) in requests {
        let close = if keep_alive {
            ""
        } else {
            "Connection: close\r\n"
        };
        let req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{extra}{close}\r\n");
        if !keep_alive || conn.is_none() {
            conn = Some(TcpStream::connect(addr).unwrap());
        }
        let s = conn.as_mut().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        *got.entry(exchange_whole(s, &req, method == "HEAD"))
            .or_default() += 1;
        if !keep_alive {
            // The server closes after its answer.
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).unwrap();
            assert!(rest.is_empty(), "{req:?}: bytes after the body");
        }
    }
    got
}

/// Requests counted per status in `httpd_request_duration_seconds_count` lines of the
/// `total` phase (Prometheus text).
fn metric_statuses(text: &str) -> std::collections::BTreeMap<u16, u64> {
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("httpd_request_duration_seconds_count{")
            && rest.contains("phase=\"total\"")
        {
            let status = rest.split("status=\"").nth(1).unwrap()[..3]
                .parse()
                .unwrap();
            let n: u64 = rest.rsplit(' ').next().unwrap().parse().unwrap();
            *out.entry(status).or_default() += n;
        }
    }
    out
}

/// Requests counted per status in the `total` rows of the table httpd prints at exit.
fn table_statuses(text: &str) -> std::collections::BTreeMap<u16, u64> {
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        // op (one or two words), phase, status, count, ...
        if let Some(i) = cols.iter().position(|c| *c == "total")
            && let (Some(s), Some(n)) = (cols.get(i + 1), cols.get(i + 2))
            && let (Ok(s), Ok(n)) = (s.parse::<u16>(), n.parse::<u64>())
        {
            *out.entry(s).or_default() += n;
        }
    }
    out
}

/// Issue 35 §1: what httpd counts per status — in /metrics and in the table it prints at
/// exit — is what its clients received, for each backend and for keep-alive and
/// one-request connections, and a download its client left is 499. Before, a streamed body whose last READ went out as one frame
/// (most NFS downloads: 98 of 100 in the README's tour), and every multipart range, were
/// counted 499 though the client had every byte.
#[test]
fn status_counts_equal_what_clients_received() {
    let (dir, www) = dataset();
    std::fs::write(www.join("large.bin"), vec![7u8; 64 << 20]).unwrap();
    let nfsd = common::Nfsd::exporting(&www).unwrap();
    let bin = common::workspace_bin("httpd", "httpd");
    let backends: [(&str, Vec<String>); 3] = [
        (
            "local, sendfile",
            vec!["--root".into(), www.display().to_string()],
        ),
        (
            "local, read + write",
            vec![
                "--root".into(),
                www.display().to_string(),
                "--no-sendfile".into(),
            ],
        ),
        ("nfs", vec!["--nfs".into(), nfsd.export_url()]),
    ];
    for (name, args) in backends {
        let (port, metrics) = (common::free_port(), common::free_port());
        let (addr, maddr): (SocketAddr, SocketAddr) = (
            format!("127.0.0.1:{port}").parse().unwrap(),
            format!("127.0.0.1:{metrics}").parse().unwrap(),
        );
        let log = dir.path().join(format!("httpd-{port}.log"));
        let mut child = lab::process::Supervised::spawn(
            "httpd",
            Command::new(&bin)
                .args(&args)
                .args([
                    "--listen",
                    &addr.to_string(),
                    "--metrics",
                    &maddr.to_string(),
                ])
                .env_remove("RUST_LOG")
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap()),
            Some(&log),
        )
        .unwrap();
        child
            .wait_ready(&[addr, maddr], Duration::from_secs(20))
            .unwrap();
        let mut received = std::collections::BTreeMap::new();
        for keep_alive in [true, false] {
            for (status, n) in one_round(addr, keep_alive) {
                *received.entry(status).or_default() += n;
            }
        }
        // A client that leaves in the middle of a download larger than any socket buffer
        // is counted 499, on every backend.
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /large.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut first = vec![0u8; 64 << 10];
        s.read_exact(&mut first).unwrap();
        drop(s);
        *received.entry(499).or_default() += 1;
        // A timer records just after its last byte is written: wait until all have.
        let total: u64 = received.values().sum();
        let deadline = Instant::now() + Duration::from_secs(10);
        let counted = loop {
            let (_, _, body) = raw_get(maddr, "/metrics");
            let counted = metric_statuses(&String::from_utf8_lossy(&body));
            if counted.values().sum::<u64>() >= total || Instant::now() > deadline {
                break counted;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(counted, received, "{name}: /metrics against the client");
        child.stop();
        let table = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            table_statuses(&table),
            received,
            "{name}: the exit table against the client:\n{table}"
        );
    }
}

/// Issue 32 §3: httpd `--nfs` over NFSv3, 4.0, 4.1 and 4.2 against rustnfs (and `auto`,
/// which lands on 4.2 as a kernel mount does) serves byte-identical bodies, with READ
/// data copied and with it spliced; the metrics endpoint names the version spoken.
#[test]
fn nfs_backend_serves_the_same_bytes_over_every_version() {
    use httpd::NfsVersionChoice as C;
    use nfsclient::NfsVersion as V;
    let (_dir, www) = dataset();
    let server = common::Nfsd::exporting(&www).unwrap();
    let files = ["/testfile.bin", "/mid.bin", "/sub/note.txt"];
    let want: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(www.join(&f[1..])).unwrap())
        .collect();
    for (choice, name) in [
        (C::Exact(V::V3), "3"),
        (C::Exact(V::V4_0), "4.0"),
        (C::Exact(V::V4_1), "4.1"),
        (C::Exact(V::V4_2), "4.2"),
        (C::Auto, "4.2"),
    ] {
        for splice in [false, true] {
            let mut cfg = httpd::Config::nfs(server.export_url());
            cfg.nfs_version = choice;
            cfg.nfs_splice = splice;
            let h = Httpd::start(cfg.clone()).unwrap();
            for (f, want) in files.iter().zip(&want) {
                let (status, _, body) = raw_get(h.addr, f);
                assert_eq!(status, 200, "{f} over {name}, splice {splice}");
                assert!(
                    body == *want,
                    "{f} over {name}, splice {splice}: body differs"
                );
            }
            let (status, _, _) = raw_get(h.addr, "/misspelt.bin");
            assert_eq!(status, 404, "over {name}");
            let m = h.metrics_for(&cfg).unwrap();
            let prom =
                String::from_utf8(curl(&[&format!("http://{}/metrics", m.addr)]).stdout).unwrap();
            let line = format!("httpd_nfs_protocol_info{{version=\"{name}\"}} 1");
            assert!(prom.contains(&line), "{choice:?}: no {line} in\n{prom}");
            m.stop().unwrap();
            h.stop().unwrap();
        }
    }
}

/// Issue 32 §4: with the NFS caches off (`--nfs-attr-ttl-ms 0`) every request serves
/// the file as it is when the request is answered, over NFSv3 and 4.x, although over
/// NFSv4 the open carries the file's first 64 KiB: a file rewritten in place or
/// replaced by a rename serves its new bytes, one grown past the 64 KiB read with the
/// LOOKUP serves all of them, an emptied one serves none, a removed one is 404, a
/// directory in its place a redirect. Over NFSv4.1+ a small file costs one COMPOUND per
/// request; over NFSv3 a LOOKUP and a READ (no GETATTR of the served root).
#[test]
fn nfs_cache_off_serves_each_request_the_file_as_it_is() {
    use httpd::NfsVersionChoice as C;
    use nfsclient::NfsVersion as V;
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path();
    std::fs::create_dir(www.join("sub")).unwrap();
    std::os::unix::fs::symlink("..", www.join("sub/up")).unwrap();
    std::os::unix::fs::symlink("f.txt", www.join("link.txt")).unwrap();
    let server = common::Nfsd::exporting(www).unwrap();
    for (version, name) in [
        (V::V3, "3"),
        (V::V4_0, "4.0"),
        (V::V4_1, "4.1"),
        (V::V4_2, "4.2"),
    ] {
        let path = www.join("f.txt");
        let _ = std::fs::remove_dir(&path);
        std::fs::write(&path, b"one\n").unwrap();
        let mut cfg = httpd::Config::nfs(server.export_url());
        cfg.nfs_version = C::Exact(version);
        cfg.nfs_attr_ttl = Duration::ZERO;
        let h = Httpd::start(cfg).unwrap();
        let get = |want: &[u8], why: &str| {
            let (status, head, body) = raw_get(h.addr, "/f.txt");
            assert_eq!(status, 200, "{name}, {why}: {head}");
            assert!(body == want, "{name}, {why}: {} bytes served", body.len());
            let len = format!("content-length: {}", want.len());
            assert!(
                head.to_ascii_lowercase().contains(&len),
                "{name}, {why}: {head}"
            );
        };
        get(b"one\n", "first");
        std::fs::write(&path, b"two\n").unwrap();
        get(b"two\n", "rewritten in place, same size");
        let tmp = www.join("f.tmp");
        std::fs::write(&tmp, b"three, renamed over it\n").unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        get(b"three, renamed over it\n", "replaced by a rename");
        for size in [(64 << 10) - 1, 64 << 10, (64 << 10) + 1, 300 << 10] {
            let data = lab::dataset::pseudo_random_bytes(size, size as u64);
            std::fs::write(&path, &data).unwrap();
            get(&data, &format!("grown to {size} bytes"));
        }
        let (status, _, body) = try_raw(
            h.addr,
            "GET /f.txt HTTP/1.1\r\nHost: t\r\nRange: bytes=70000-70009\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let data = lab::dataset::pseudo_random_bytes(300 << 10, 300 << 10);
        assert_eq!(status, 206, "{name}");
        assert!(body == data[70000..70010], "{name}: range past the head");
        std::fs::write(&path, b"").unwrap();
        get(b"", "emptied");
        std::fs::write(&path, b"small again\n").unwrap();
        get(b"small again\n", "shrunk");
        // The last request's READ may be recorded just after its client had the reply:
        // count from a snapshot that has settled, or that READ lands among the ten.
        let rpcs = settled_calls(&server);
        for _ in 0..10 {
            get(b"small again\n", "unchanged");
        }
        let after = wait_for_calls(&server, &rpcs, version);
        // NFSv3's procedures, and NFSv4's COMPOUNDs and the operations that do work
        // (each v4 operation is counted on its own too).
        let counted = [
            "GETATTR",
            "LOOKUP",
            "READ",
            "NFS4_COMPOUND",
            "NFS4_GETATTR",
            "NFS4_LOOKUP",
            "NFS4_READ",
        ];
        let per_request: Vec<(String, u64)> = after
            .iter()
            .filter(|(op, _)| counted.contains(&op.as_str()))
            .filter_map(|(op, n)| {
                let d = n - rpcs.get(op).copied().unwrap_or(0);
                (d > 0).then(|| (op.clone(), d))
            })
            .collect();
        let want: Vec<(String, u64)> = match version {
            V::V3 => vec![("LOOKUP".into(), 10), ("READ".into(), 10)],
            _ => ["NFS4_COMPOUND", "NFS4_GETATTR", "NFS4_LOOKUP", "NFS4_READ"]
                .iter()
                .map(|op| (op.to_string(), 10))
                .collect(),
        };
        assert_eq!(per_request, want, "{name}: calls for 10 requests");
        // Symlinks: to the file (the head read with the link's LOOKUP is not the
        // file's), and back to the served root, whose attributes the walk then fetches.
        let local = Httpd::start(httpd::Config::local(www)).unwrap();
        for target in ["/link.txt", "/sub/up", "/sub/up/", "/sub/up/f.txt"] {
            let (a, b) = (raw_get(h.addr, target), raw_get(local.addr, target));
            assert_eq!(
                (a.0, &a.2),
                (b.0, &b.2),
                "{name}: {target} as the local backend"
            );
        }
        local.stop().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(raw_get(h.addr, "/f.txt").0, 404, "{name}: removed");
        std::fs::create_dir(&path).unwrap();
        assert_eq!(raw_get(h.addr, "/f.txt").0, 301, "{name}: a directory now");
        h.stop().unwrap();
    }
}

/// rustnfs's completed calls per operation (`total` phase, every status).
fn nfs_calls(server: &common::Nfsd) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for (key, hist) in &server.registry.snapshot().series {
        if key.phase == "total" {
            *out.entry(key.op.to_string()).or_default() += hist.count();
        }
    }
    out
}

/// [`nfs_calls`] once two readings 100 ms apart agree (bounded, 2 s): every call already
/// answered is in it.
fn settled_calls(server: &common::Nfsd) -> std::collections::BTreeMap<String, u64> {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut last = nfs_calls(server);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = nfs_calls(server);
        if now == last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// [`nfs_calls`] once the last requests' calls are recorded (a call is recorded once
/// its reply has left, which can be just after the client has it): bounded, 2 s.
fn wait_for_calls(
    server: &common::Nfsd,
    before: &std::collections::BTreeMap<String, u64>,
    version: nfsclient::NfsVersion,
) -> std::collections::BTreeMap<String, u64> {
    let op = match version {
        nfsclient::NfsVersion::V3 => "READ",
        _ => "NFS4_COMPOUND",
    };
    let want = before.get(op).copied().unwrap_or(0) + 10;
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let now = nfs_calls(server);
        if now.get(op).copied().unwrap_or(0) >= want || Instant::now() > deadline {
            std::thread::sleep(Duration::from_millis(50));
            return nfs_calls(server);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

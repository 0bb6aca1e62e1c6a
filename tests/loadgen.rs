//! End-to-end tests of loadgen: against nginx started here, tiny misbehaving servers,
//! a stalling server under a fixed-rate schedule, our tcp-server, and rustnfs/NFS-Ganesha.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use loadgen::{ErrorKind, LoadPlan, NfsWorkload, Report, Schedule};

use crate::common;

// ---- servers under test -------------------------------------------------------------------

/// nginx (the harness's peer launcher) on 127.0.0.1:<free port> serving the common
/// dataset; stopped on drop.
struct Nginx {
    server: lab::peers::ExternalServer,
    _dir: tempfile::TempDir,
}

impl Nginx {
    fn start() -> Option<Nginx> {
        let dir = tempfile::tempdir().unwrap();
        // nginx's workers run unprivileged: they must be able to enter the directory.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let www = common::write_dataset(&dir.path().join("www"));
        let server = common::available(lab::peers::start_nginx(&www))?;
        Some(Nginx { server, _dir: dir })
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr)
    }
}

/// A tiny HTTP/1.1 server on its own threads: `respond(stream, request_index)` writes the
/// answer to each request (or misbehaves) and returns false to close the connection.
struct TinyServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    requests: Arc<AtomicU64>,
}

impl TinyServer {
    fn start<F>(respond: F) -> TinyServer
    where
        F: Fn(&mut TcpStream, u64) -> bool + Send + Sync + 'static,
    {
        TinyServer::start_raw(move |mut stream, counter: Arc<AtomicU64>| {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                // Read one request head.
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                buf.drain(..end);
                let i = counter.fetch_add(1, Ordering::SeqCst);
                if !respond(&mut stream, i) {
                    return;
                }
            }
        })
    }

    /// `conn(stream, counter)` handles each accepted connection on its own thread.
    fn start_raw<F>(conn: F) -> TinyServer
    where
        F: Fn(TcpStream, Arc<AtomicU64>) + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let conn = Arc::new(conn);
        let (s, r) = (stop.clone(), requests.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        let _ = stream.set_nodelay(true);
                        let (conn, r) = (conn.clone(), r.clone());
                        std::thread::spawn(move || conn(stream, r));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        TinyServer {
            addr,
            stop,
            thread: Some(thread),
            requests,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/x", self.addr)
    }
}

impl Drop for TinyServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn ok_response(stream: &mut TcpStream, body: &[u8]) -> bool {
    // One write: a head and a body in two small writes meet Nagle and delayed ACKs.
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\nServer: tiny\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(body);
    stream.write_all(&answer).is_ok()
}

fn plan(url: &str, schedule: Schedule, concurrency: usize) -> LoadPlan {
    let mut p = LoadPlan::new(url, schedule, concurrency).unwrap();
    p.options.timeout = Duration::from_secs(10);
    p
}

/// Runs a plan on a thread and fails the test if it does not end in `limit`.
fn run_bounded(plan: LoadPlan, limit: Duration) -> Report {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(loadgen::run(plan));
    });
    rx.recv_timeout(limit)
        .expect("the run did not end by itself")
        .expect("the run failed to start")
}

fn failures(r: &Report, kind: ErrorKind) -> u64 {
    r.failures.get(&kind).copied().unwrap_or(0)
}

// ---- nginx ----------------------------------------------------------------------------

#[test]
fn nginx_counts_and_bytes_are_exact() {
    let Some(nginx) = Nginx::start() else { return };
    // Keep-alive, the 4 KiB file.
    let r = run_bounded(
        plan(&nginx.url("/small.bin"), Schedule::Count(500), 10),
        Duration::from_secs(60),
    );
    assert_eq!(r.requests, 500);
    assert_eq!(r.failed(), 0, "{:?} {:?}", r.failures, r.first_error);
    assert_eq!(r.non_2xx, 0);
    assert_eq!(r.document_length, Some(4096));
    assert_eq!(r.body_bytes, 500 * 4096);
    assert!(r.wire_bytes > r.body_bytes);
    assert!(r.keepalive_requests >= 490, "{}", r.keepalive_requests);
    assert_eq!(r.total().unwrap().count(), 500);
    assert!(r.server_software.as_deref().unwrap().starts_with("nginx"));
    let text = r.ab_summary();
    for field in [
        "Server Software:        nginx",
        "Document Path:          /small.bin",
        "Document Length:        4096 bytes",
        "Concurrency Level:      10",
        "Complete requests:      500",
        "Failed requests:        0",
        "HTML transferred:       2048000 bytes",
        "Requests per second:",
        "(mean, across all concurrent requests)",
        "Connection Times (ms)",
        " 100%",
    ] {
        assert!(text.contains(field), "missing {field:?} in\n{text}");
    }

    // ab's default: a new HTTP/1.0 connection per request; the 10 MiB file.
    let mut p = plan(&nginx.url("/testfile.bin"), Schedule::Count(20), 4);
    p.options.keepalive = false;
    let r = run_bounded(p, Duration::from_secs(60));
    assert_eq!((r.requests, r.failed()), (20, 0), "{:?}", r.first_error);
    assert_eq!(r.body_bytes, 20 * (10 << 20));
    assert_eq!(r.keepalive_requests, 0);
    assert_eq!(r.phase("connect").unwrap().count(), 20);

    // Missing file: Non-2xx, not failed.
    let r = run_bounded(
        plan(&nginx.url("/missing"), Schedule::Count(30), 3),
        Duration::from_secs(60),
    );
    assert_eq!((r.requests, r.failed(), r.non_2xx), (30, 0, 30));
    assert!(r.ab_summary().contains("Non-2xx responses:      30"));
}

#[test]
fn json_report_matches_the_schema_and_merges_exactly() {
    let Some(nginx) = Nginx::start() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let a = run_bounded(
        plan(&nginx.url("/small.bin"), Schedule::Count(300), 3),
        Duration::from_secs(60),
    );
    let b = run_bounded(
        plan(&nginx.url("/index.html"), Schedule::Count(200), 2),
        Duration::from_secs(60),
    );
    let (pa, pb) = (tmp.path().join("a.json"), tmp.path().join("b.json"));
    a.write_json(&pa).unwrap();
    b.write_json(&pb).unwrap();

    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/loadgen/schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::draft202012::new(&schema).expect("schema is valid");
    for p in [&pa, &pb] {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", p.display());
    }
    // An open-loop run carries the generator's schedule lag as its own figure.
    let open = run_bounded(
        plan(
            &nginx.url("/small.bin"),
            Schedule::Rate {
                per_second: 500.0,
                count: Some(100),
                duration: None,
            },
            2,
        ),
        Duration::from_secs(60),
    )
    .to_json();
    let errors: Vec<String> = validator
        .iter_errors(&open)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "open loop: {errors:?}");
    assert_eq!(
        open["schedule_lag"]["count"], 100,
        "{}",
        open["schedule_lag"]
    );
    // The lag is a real distribution: ordered quantiles, and at 500/s against a local
    // nginx a generator whose median start is 250 ms late is broken (a lag counted from
    // the run's start instead of each ticket's intended start would be ~0.1 s and up).
    let lag = &open["schedule_lag"];
    let q = |k: &str| lag[k].as_f64().unwrap_or_else(|| panic!("no {k}: {lag}"));
    assert!(
        q("p50_seconds") <= q("p99_seconds") && q("p99_seconds") <= q("max_seconds"),
        "{lag}"
    );
    assert!(q("p50_seconds") < 0.25, "median schedule lag: {lag}");
    assert_eq!(open["integrity_failures"], 0);
    assert!(open["stopped"].is_null());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pa).unwrap()).unwrap();
    assert!(
        v["schedule_lag"].is_null(),
        "a closed loop has no schedule lag"
    );
    // The schema rejects what it should.
    let mut broken: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pa).unwrap()).unwrap();
    broken["failures"]["bogus"] = 1.into();
    assert!(!validator.is_valid(&broken));

    let merged = loadgen::merge_files(&[&pa, &pb]).unwrap();
    assert_eq!(merged.requests, 500);
    assert_eq!(merged.concurrency, 5);
    assert_eq!(merged.body_bytes, a.body_bytes + b.body_bytes);
    assert_eq!(merged.merged_runs, 2);
    assert_eq!(merged.total().unwrap().count(), 500);
    let mut direct = a.clone();
    direct.merge(&b).unwrap();
    assert_eq!(direct.latency.to_json(), merged.latency.to_json());
    assert_eq!(
        direct.total().unwrap().histogram,
        merged.total().unwrap().histogram,
        "histograms survive JSON exactly"
    );
    assert!(validator.is_valid(&merged.to_json()));
}

// ---- misbehaving servers ------------------------------------------------------------------

#[test]
fn reset_connections_are_counted_not_hung() {
    // Accept, leave the request unread, close: the kernel answers with RST.
    let server = TinyServer::start_raw(|stream, counter| {
        counter.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(20));
        drop(stream);
    });
    let r = run_bounded(
        plan(&server.url(), Schedule::Count(20), 2),
        Duration::from_secs(30),
    );
    assert_eq!(r.requests, 20);
    assert_eq!(r.failed(), 20);
    assert_eq!(failures(&r, ErrorKind::Reset), 20, "{:?}", r.failures);
    assert!(
        r.ab_summary()
            .contains("(Connect: 0, Receive: 20, Length: 0, Exceptions: 0)")
    );

    // Nothing listening at all.
    let port = common::free_port();
    let r = run_bounded(
        plan(&format!("http://127.0.0.1:{port}/"), Schedule::Count(5), 1),
        Duration::from_secs(30),
    );
    assert_eq!(failures(&r, ErrorKind::Connect), 5);
    assert!(r.first_error.unwrap().contains("refused"));
}

#[test]
fn slow_answers_are_timed_and_timeouts_counted() {
    let server = TinyServer::start(|s, _| {
        std::thread::sleep(Duration::from_millis(300));
        ok_response(s, b"hello")
    });
    let r = run_bounded(
        plan(&server.url(), Schedule::Count(4), 2),
        Duration::from_secs(30),
    );
    assert_eq!((r.requests, r.failed()), (4, 0));
    let p50 = r.total().unwrap().quantile_seconds(0.5);
    assert!((0.29..0.6).contains(&p50), "p50 {p50}");
    assert_eq!(r.server_software.as_deref(), Some("tiny"));

    let mut p = plan(&server.url(), Schedule::Count(3), 1);
    p.options.timeout = Duration::from_millis(100);
    let t0 = Instant::now();
    let r = run_bounded(p, Duration::from_secs(30));
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(failures(&r, ErrorKind::Timeout), 3, "{:?}", r.failures);

    // A timed run ends on time even when every answer is slower than the run.
    let t0 = Instant::now();
    let r = run_bounded(
        plan(
            &server.url(),
            Schedule::Duration(Duration::from_millis(100)),
            2,
        ),
        Duration::from_secs(30),
    );
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(r.requests, 0);
}

#[test]
fn error_pages_are_non_2xx_not_wrong_lengths() {
    // The soak's httpd --nfs run: 503/504 error pages among 64 KiB 200s were counted as
    // wrong body lengths (servelab load exit 3, "wrong data"). The first answer is a 503
    // too, so the document length must come from the first 2xx.
    let server = TinyServer::start(|s, i| {
        if i % 3 == 0 {
            let page = b"storage timeout\n";
            let mut answer = format!(
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: {}\r\n\r\n",
                page.len()
            )
            .into_bytes();
            answer.extend_from_slice(page);
            s.write_all(&answer).is_ok()
        } else {
            ok_response(s, &[b'a'; 10])
        }
    });
    let r = run_bounded(
        plan(&server.url(), Schedule::Count(9), 1),
        Duration::from_secs(30),
    );
    assert_eq!(r.requests, 9);
    assert_eq!(r.document_length, Some(10));
    assert_eq!(failures(&r, ErrorKind::Length), 0, "{:?}", r.failures);
    assert_eq!((r.failed(), r.non_2xx, r.integrity_failures()), (0, 3, 0));
}

#[test]
fn varying_lengths_and_chunked_bodies() {
    // Alternating lengths: every 20-byte answer differs from the first (10 bytes).
    let server = TinyServer::start(|s, i| {
        let body = if i % 2 == 0 {
            vec![b'a'; 10]
        } else {
            vec![b'b'; 20]
        };
        ok_response(s, &body)
    });
    let r = run_bounded(
        plan(&server.url(), Schedule::Count(10), 1),
        Duration::from_secs(30),
    );
    assert_eq!(r.requests, 10);
    assert_eq!(r.document_length, Some(10));
    assert_eq!(failures(&r, ErrorKind::Length), 5);
    assert_eq!(r.body_bytes, 5 * 10 + 5 * 20);
    let mut p = plan(&server.url(), Schedule::Count(10), 1);
    p.options.variable_length = true;
    let r = run_bounded(p, Duration::from_secs(30));
    assert_eq!(r.failed(), 0);
    assert!(r.ab_summary().contains("Document Length:        Variable"));

    // Chunked bodies with extensions and trailers, split across writes; Server-Timing.
    let server = TinyServer::start(|s, _| {
        let parts: [&[u8]; 4] = [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nServer-Timing: meta;dur=0.5, read;dur=2\r\n\r\n",
            b"5;x=y\r\nhello\r\n1",
            b"0\r\n0123456789abcdef\r\n",
            b"0\r\nTrailer: 1\r\n\r\n",
        ];
        parts.iter().all(|p| {
            let ok = s.write_all(p).is_ok();
            std::thread::sleep(Duration::from_millis(1));
            ok
        })
    });
    let r = run_bounded(
        plan(&server.url(), Schedule::Count(6), 2),
        Duration::from_secs(30),
    );
    assert_eq!((r.requests, r.failed()), (6, 0), "{:?}", r.first_error);
    assert_eq!(r.body_bytes, 6 * 21);
    assert!(r.keepalive_requests >= 4);
    let read = r
        .server_timing
        .get(&latency::Key::new("server", "read", "ok"))
        .unwrap();
    assert_eq!(read.count(), 6);
    assert!((read.quantile_seconds(0.5) - 0.002).abs() < 1e-5);
    assert!(r.render_text().contains("server read"));
}

#[test]
fn malformed_responses_are_counted() {
    let server = TinyServer::start(|s, i| {
        let answer: &[u8] = match i % 3 {
            0 => b"garbage\r\n\r\n",
            1 => b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n",
            _ => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        };
        let _ = s.write_all(answer);
        false
    });
    let r = run_bounded(
        plan(&server.url(), Schedule::Count(9), 1),
        Duration::from_secs(30),
    );
    assert_eq!(r.requests, 9);
    assert_eq!(failures(&r, ErrorKind::Malformed), 9, "{:?}", r.failures);

    // Closing in the middle of a body is a reset, not a short success.
    let server = TinyServer::start(|s, _| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b");
        false
    });
    let r = run_bounded(
        plan(&server.url(), Schedule::Count(3), 1),
        Duration::from_secs(30),
    );
    assert_eq!(failures(&r, ErrorKind::Reset), 3, "{:?}", r.failures);
}

// ---- coordinated omission -------------------------------------------------------------------

#[test]
fn a_stall_shows_in_open_loop_percentiles_only() {
    // The 100th request stalls the (single-connection) server for 500 ms.
    let stall = Duration::from_millis(500);
    let server = TinyServer::start(move |s, i| {
        if i == 100 {
            std::thread::sleep(stall);
        }
        ok_response(s, b"ok")
    });

    // Closed loop: one slow sample among many fast ones; the percentiles hide the stall.
    let r = run_bounded(
        plan(&server.url(), Schedule::Count(2000), 1),
        Duration::from_secs(60),
    );
    assert_eq!(r.failed(), 0);
    let closed = r.total().unwrap();
    assert!(
        closed.quantile_seconds(0.99) < 0.05,
        "closed p99 {}",
        closed.quantile_seconds(0.99)
    );
    assert!(closed.quantile_seconds(1.0) >= 0.49);

    // Open loop at 200/s for 2 s (400 requests): the ~100 requests meant to start during
    // the stall wait for it, timed from their intended start, uniformly 0..500 ms. So
    // p90 (40th slowest) ≈ 300 ms and p99 (4th slowest) ≈ 480 ms.
    server.requests.store(0, Ordering::SeqCst);
    let p = plan(
        &server.url(),
        Schedule::Rate {
            per_second: 200.0,
            count: Some(400),
            duration: None,
        },
        1,
    );
    let r = run_bounded(p, Duration::from_secs(60));
    assert_eq!((r.requests, r.failed()), (400, 0));
    let open = r.total().unwrap();
    let (p90, p99) = (open.quantile_seconds(0.90), open.quantile_seconds(0.99));
    assert!((0.2..0.45).contains(&p90), "open-loop p90 {p90}");
    assert!((0.4..0.6).contains(&p99), "open-loop p99 {p99}");
    // The queueing delay is recorded as its own phase.
    assert!(r.phase("queue").unwrap().quantile_seconds(0.99) > 0.3);
}

// ---- open-loop pacing ------------------------------------------------------------------------

/// What a trivial blocking client measures at the same arrival spacing: `conns`
/// threads, each on its own connection, each sending a request every `conns / rate`
/// seconds and timing write → last byte. Returns the p50 in ms. (A request that finds
/// the server and client asleep costs more than a back-to-back one — 0.30 vs 0.13 ms
/// at 10 ms vs 0 gaps with a plain Python client on the 2-core test machine — so this,
/// not a back-to-back loop, is the latency an honest open loop must report.)
fn reference_p50(addr: SocketAddr, rate: f64, conns: usize, count: usize) -> f64 {
    let gap = Duration::from_secs_f64(conns as f64 / rate);
    let threads: Vec<_> = (0..conns)
        .map(|k| {
            std::thread::spawn(move || {
                // Staggered like the open loop's tickets.
                std::thread::sleep(gap.mul_f64(k as f64 / conns as f64));
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_nodelay(true).unwrap();
                let mut buf = [0u8; 512];
                let mut out = Vec::new();
                for _ in 0..count / conns {
                    let t = Instant::now();
                    s.write_all(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                    let mut got = Vec::new();
                    // The tiny server answers a 2-byte body: done at the head's end + 2.
                    let complete = |got: &[u8]| {
                        got.windows(4)
                            .position(|w| w == b"\r\n\r\n")
                            .is_some_and(|p| got.len() >= p + 6)
                    };
                    while !complete(&got) {
                        let n = s.read(&mut buf).unwrap();
                        assert!(n > 0, "reference client: connection closed");
                        got.extend_from_slice(&buf[..n]);
                    }
                    let took = t.elapsed();
                    out.push(took);
                    std::thread::sleep(gap.saturating_sub(took));
                }
                out
            })
        })
        .collect();
    let mut all: Vec<Duration> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    all.sort();
    all[all.len() / 2].as_secs_f64() * 1e3
}

/// The open loop at `rate` for `count` requests over `conns` connections: p50s of
/// `total`, of the schedule lag and of `queue` (waiting behind busy connections), in ms.
fn open_p50(url: &str, rate: f64, conns: usize, count: u64) -> (f64, f64, f64) {
    let p = plan(
        url,
        Schedule::Rate {
            per_second: rate,
            count: Some(count),
            duration: None,
        },
        conns,
    );
    let r = run_bounded(p, Duration::from_secs(60));
    assert_eq!((r.requests, r.failed()), (count, 0), "{:?}", r.first_error);
    let lag = r
        .schedule_lag()
        .expect("a fixed rate reports its schedule lag");
    assert_eq!(lag.count(), count);
    (
        r.total().unwrap().quantile_seconds(0.5) * 1e3,
        lag.quantile_seconds(0.5) * 1e3,
        r.phase("queue").unwrap().quantile_seconds(0.5) * 1e3,
    )
}

#[test]
fn open_loop_latency_is_the_servers_not_the_pacers() {
    // Issue 12 §1: at 100/s the old generator reported a p50 14x the server's latency,
    // its own timer lateness (0.5-1 ms) charged to the server. Under a fixed rate the
    // p50 must be within 25 % of what a trivial blocking client measures at the same
    // spacing, plus this client's own per-request cost (its closed-loop p50 minus the
    // blocking client's, measured in the same attempt; near 0 in a release build).
    // Each rate gets 8 attempts: other tests running beside this one stall the server
    // at moments, and an open loop rightly shows a stalled server as queueing.
    let server = TinyServer::start(|s, _| ok_response(s, b"ok"));
    let url = server.url();
    // 5,000/s needs the client to have the headroom: an unoptimised build on a busy
    // machine may carry less, and an overloaded open loop queues by design.
    let capacity = {
        let r = run_bounded(
            plan(&url, Schedule::Count(2000), 4),
            Duration::from_secs(60),
        );
        r.requests_per_sec()
    };
    let high = 5000f64
        .min((capacity * 0.25 / 500.0).floor() * 500.0)
        .max(1000.0);
    if high < 5000.0 {
        eprintln!(
            "NOTE: closed loop carries {capacity:.0}/s here; the high rate is {high}/s, not 5000/s"
        );
    }
    let conns = 4;
    const SLACK_MS: f64 = 0.15;
    for rate in [100.0, 1000.0, high] {
        let count = (rate * 0.25).max(120.0) as u64;
        let mut attempts = Vec::new();
        let mut overloaded = 0;
        let passed = (0..8).any(|_| {
            let closed = {
                let r = run_bounded(plan(&url, Schedule::Count(300), 1), Duration::from_secs(60));
                r.total().unwrap().quantile_seconds(0.5) * 1e3
            };
            let closed_ref = reference_p50(server.addr, 1e9, 1, 300);
            let overhead = (closed - closed_ref).max(0.0);
            let reference = reference_p50(server.addr, rate, conns, count as usize);
            let (open, lag, queue) = open_p50(&url, rate, conns, count);
            let expected = reference + overhead;
            let line = format!(
                "{rate}/s: p50 {open:.3} ms vs {expected:.3} ms (blocking client {reference:.3} \
                 + this client's cost {overhead:.3}); queue p50 {queue:.3} ms; schedule lag \
                 p50 {lag:.3} ms"
            );
            eprintln!("{line}");
            attempts.push(line);
            // Most requests waiting behind busy connections means the server (or this
            // client) could not keep up at that moment; the pacer's own lateness goes to
            // the schedule lag and cannot produce that.
            // Twice the server's whole answer (~0.05 ms) spent waiting for a connection is
            // that already: a CI run beside the qemu kernel battery showed 0.14–0.5 ms of
            // queueing in 7 of 8 attempts at 5,000/s, with schedule lag at 0.004 ms.
            overloaded += usize::from(queue > 0.1);
            // 25 % plus 0.15 ms: at 3,500/s the server answers in ~0.1 ms, where a
            // neighbour test's scheduler hiccup alone is more than 25 %; the bug this
            // guards against charged 0.5-1 ms of timer lateness (14x at 100/s).
            (open - expected).abs() <= 0.25 * expected + SLACK_MS
        });
        // The high rate is only a check where the machine carried it: most attempts
        // queued means it did not (the 100/s and 1,000/s rates, where the bug this guards
        // showed, stay strict).
        if !passed && rate > 1000.0 && overloaded * 4 >= attempts.len() * 3 {
            eprintln!(
                "NOTE: this machine could not carry {rate}/s in {overloaded} of {} attempts \
                 (requests queued behind busy connections); that rate is not checked",
                attempts.len()
            );
            continue;
        }
        assert!(
            passed,
            "open-loop p50 off by more than 25 % + {SLACK_MS} ms in every attempt:\n{}",
            attempts.join("\n")
        );
    }
}

// ---- file:// ---------------------------------------------------------------------------------

/// What a worker left behind in `dir`: names starting with `servelab-`.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("servelab-"))
        .collect()
}

#[test]
fn file_reads_writes_and_metadata_in_a_temp_dir() {
    // Issue 13 §5: the same workloads as nfs:// on a local (or bind-mounted) directory.
    let tmp = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i * 31 % 251) as u8).collect();
    let file = tmp.path().join("data.bin");
    std::fs::write(&file, &data).unwrap();
    let expected = crc32(&data);

    // 1 MiB in 64 KiB reads: 2 workers x 32 reads = two full passes each.
    let mut p = plan(
        &format!("file://{}", file.display()),
        Schedule::Count(128),
        2,
    );
    p.options.block_size = 64 << 10;
    p.options.verify_crc32 = Some(expected);
    let r = run_bounded(p.clone(), Duration::from_secs(60));
    assert_eq!((r.requests, r.failed()), (128, 0), "{:?}", r.first_error);
    assert_eq!(r.kind, "file");
    assert_eq!(r.checksum_crc32, Some(expected));
    assert_eq!(r.body_bytes, 128 * (64 << 10));
    assert_eq!(r.latency.combined("read", "total").unwrap().count(), 128);
    p.options.verify_crc32 = Some(expected ^ 1);
    let r = run_bounded(p, Duration::from_secs(60));
    assert!(failures(&r, ErrorKind::Checksum) >= 2, "{:?}", r.failures);
    assert!(r.integrity_failures() >= 2);

    // Metadata mix: 3 workers, each in its own subdirectory, 40 files each; the run
    // ends mid-cycle, and every file and subdirectory is removed anyway.
    let dir = tmp.path().join("meta");
    std::fs::create_dir(&dir).unwrap();
    let mut p = plan(
        &format!("file://{}/", dir.display()),
        Schedule::Count(500),
        3,
    );
    p.options.nfs_workload = NfsWorkload::Metadata;
    p.options.nfs_files = 40;
    let r = run_bounded(p, Duration::from_secs(60));
    assert_eq!((r.requests, r.failed()), (500, 0), "{:?}", r.first_error);
    let count = |op: &str| r.latency.combined(op, "total").map_or(0, |s| s.count());
    assert!(count("create") >= 120 && count("stat") >= 120 && count("unlink") >= 80);
    assert_eq!(count("create") + count("stat") + count("unlink"), 500);
    assert!(
        leftovers(&dir).is_empty(),
        "left behind: {:?}",
        leftovers(&dir)
    );

    // Writes: 2 workers x 4 KiB blocks into a file each, removed at the end.
    let mut p = plan(&format!("file://{}", dir.display()), Schedule::Count(40), 2);
    p.options.nfs_workload = NfsWorkload::Write;
    p.options.block_size = 4096;
    let r = run_bounded(p, Duration::from_secs(60));
    assert_eq!((r.requests, r.failed()), (40, 0), "{:?}", r.first_error);
    assert_eq!(r.body_bytes, 40 * 4096);
    assert!(
        leftovers(&dir).is_empty(),
        "left behind: {:?}",
        leftovers(&dir)
    );

    // Wrong kinds of path are refused before any traffic.
    let mut p = plan(&format!("file://{}", dir.display()), Schedule::Count(1), 1);
    p.options.nfs_workload = NfsWorkload::Read;
    assert!(matches!(loadgen::run(p), Err(loadgen::Error::Plan(_))));
    let mut p = plan(
        &format!("file://{}/missing", dir.display()),
        Schedule::Count(1),
        1,
    );
    p.options.nfs_workload = NfsWorkload::Metadata;
    let err = loadgen::run(p).unwrap_err().to_string();
    assert!(err.contains("No such file"), "{err}");
}

// ---- tcp:// ----------------------------------------------------------------------------------

#[test]
fn tcp_streams_measure_throughput_and_are_acknowledged() {
    let server = lab::inproc::TcpServer::tcp(128 << 10).unwrap();
    let url = format!("tcp://{}", server.addr);
    let r = run_bounded(
        plan(&url, Schedule::Duration(Duration::from_millis(500)), 2),
        Duration::from_secs(30),
    );
    assert_eq!(r.failed(), 0, "{:?}", r.first_error);
    assert!(r.body_bytes > 10 << 20, "{} bytes", r.body_bytes);
    assert!(r.bytes_per_sec() > 1e7);
    // One acknowledgement per stream: the server received exactly what was sent.
    assert_eq!(
        r.latency.combined("tcp_ack", "total").map(|s| s.count()),
        Some(2)
    );
    assert!(r.render_text().contains("Throughput:"));

    // A fixed count of 64 KiB writes: exact bytes.
    let mut p = plan(&url, Schedule::Count(100), 1);
    p.options.block_size = 64 << 10;
    let r = run_bounded(p, Duration::from_secs(30));
    assert_eq!((r.failed(), r.body_bytes), (0, 100 * (64 << 10)));

    // Reverse: the server sends.
    let mut p = plan(&url, Schedule::Duration(Duration::from_millis(300)), 1);
    p.options.reverse = true;
    let r = run_bounded(p, Duration::from_secs(30));
    assert_eq!(r.failed(), 0, "{:?}", r.first_error);
    assert!(r.body_bytes > 1 << 20);

    // Not a tcp-server: the stream is cut, counted, the run still ends.
    let http = TinyServer::start(|s, _| ok_response(s, b"no"));
    let r = run_bounded(
        plan(
            &format!("tcp://{}", http.addr),
            Schedule::Duration(Duration::from_millis(300)),
            1,
        ),
        Duration::from_secs(30),
    );
    assert!(r.failed() > 0);
}

// ---- nfs:// ----------------------------------------------------------------------------------

fn crc32(data: &[u8]) -> u32 {
    // Bitwise CRC-32 (IEEE), independent of the implementation under test.
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn nfs_read_checks(url: &str, file: &Path) {
    let expected = crc32(&std::fs::read(file).unwrap());
    // 10 MiB in 1 MiB READs: 2 workers × 25 READs cover at least two full passes.
    let mut p = plan(url, Schedule::Count(50), 2);
    p.options.block_size = 1 << 20;
    p.options.nfs_workload = NfsWorkload::Read;
    p.options.verify_crc32 = Some(expected);
    let r = run_bounded(p.clone(), Duration::from_secs(120));
    assert_eq!((r.requests, r.failed()), (50, 0), "{:?}", r.first_error);
    assert_eq!(r.checksum_crc32, Some(expected));
    assert_eq!(r.body_bytes, 50 << 20);
    assert_eq!(r.latency.combined("READ", "total").unwrap().count(), 50);

    // A wrong expectation is caught on every complete pass.
    p.options.verify_crc32 = Some(expected ^ 1);
    let r = run_bounded(p, Duration::from_secs(120));
    assert!(failures(&r, ErrorKind::Checksum) >= 2, "{:?}", r.failures);
}

/// Every workload over an NFSv4 minor version (`url_of` gives the URL of a path from
/// the pseudo-root): a verified read of the dataset's file, the CREATE (OPEN with create
/// and CLOSE) / GETATTR / REMOVE mix and WRITEs with their COMMITs, leaving nothing
/// behind; a misspelt file ends the run before it starts.
fn nfs4_checks(url_of: impl Fn(&str) -> String, export: &Path) {
    let file = export.join("testfile.bin");
    let expected = crc32(&std::fs::read(&file).unwrap());
    let mut p = plan(&url_of("/testfile.bin"), Schedule::Count(30), 2);
    p.options.block_size = 1 << 20;
    p.options.nfs_workload = NfsWorkload::Read;
    p.options.verify_crc32 = Some(expected);
    let r = run_bounded(p, Duration::from_secs(120));
    assert_eq!((r.requests, r.failed()), (30, 0), "{:?}", r.first_error);
    assert_eq!(r.checksum_crc32, Some(expected));
    assert_eq!(r.latency.combined("READ", "total").unwrap().count(), 30);

    let mut p = plan(&url_of("/"), Schedule::Count(300), 2);
    p.options.nfs_workload = NfsWorkload::Metadata;
    p.options.nfs_files = 50;
    let r = run_bounded(p, Duration::from_secs(120));
    assert_eq!((r.requests, r.failed()), (300, 0), "{:?}", r.first_error);
    // Two workers share the 300 operations, each cycling through 50 files.
    for op in ["CREATE", "GETATTR", "REMOVE"] {
        let n = r.latency.combined(op, "total").unwrap().count();
        assert!(n >= 50, "{op}: {n}");
    }

    let mut p = plan(&url_of("/"), Schedule::Count(20), 2);
    p.options.nfs_workload = NfsWorkload::Write;
    p.options.block_size = 256 << 10;
    let r = run_bounded(p, Duration::from_secs(120));
    let writes = r
        .latency
        .combined("WRITE", "total")
        .map_or(0, |s| s.count());
    assert_eq!((writes, r.failed()), (20, 0), "{:?}", r.first_error);
    let commits = r.latency.combined("COMMIT", "total").unwrap_or_else(|| {
        panic!(
            "no COMMIT: {:?}",
            r.latency.series.keys().collect::<Vec<_>>()
        )
    });
    assert_eq!(
        commits.bytes,
        20 * (256 << 10),
        "every written byte committed"
    );
    let left: Vec<_> = std::fs::read_dir(export)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("servelab-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    let p = plan(&url_of("/testfiel.bin"), Schedule::Count(5), 1);
    let err = loadgen::run(p).unwrap_err();
    assert!(matches!(err, loadgen::Error::NoSuchFile { .. }), "{err}");
    assert!(
        err.to_string().contains("no such file on the export"),
        "{err}"
    );
}

/// Issue 32 §3: every NFS workload over NFSv4.0, 4.1 and 4.2, against rustnfs and
/// against Ganesha serving v4 (the same client, so the rows compare).
#[test]
fn nfs4_reads_writes_and_metadata_against_rustnfs_and_ganesha() {
    let tmp = tempfile::tempdir().unwrap();
    let export = common::write_dataset(&tmp.path().join("export"));
    let server = common::Nfsd::exporting(&export).unwrap();
    let port = server.port();
    for v in ["4", "4.1", "4.2"] {
        nfs4_checks(
            |p| format!("nfs://127.0.0.1{p}?version={v}&nfsport={port}"),
            &export,
        );
    }
    // Each worker ends its session and client id: more runs from one address than
    // rustnfs keeps sessions for it (16) all get one.
    for _ in 0..10 {
        let url = format!("nfs://127.0.0.1/testfile.bin?version=4.1&nfsport={port}");
        let r = run_bounded(plan(&url, Schedule::Count(2), 2), Duration::from_secs(60));
        assert_eq!((r.requests, r.failed()), (2, 0), "{:?}", r.first_error);
    }
    let gtmp = tempfile::tempdir().unwrap();
    let gexport = common::write_dataset(&gtmp.path().join("export"));
    let Some(g) = crate::support::ganesha::start_v4(&gexport) else {
        return;
    };
    let gport = crate::support::ganesha::nfs_port(&g);
    for v in ["4.0", "4.1", "4.2"] {
        nfs4_checks(
            |p| format!("nfs://127.0.0.1{p}?version={v}&nfsport={gport}&uid=0&gid=0"),
            &gexport,
        );
    }
}

#[test]
fn nfs_reads_writes_and_metadata_against_rustnfs() {
    let tmp = tempfile::tempdir().unwrap();
    let export = common::write_dataset(&tmp.path().join("export"));
    let server = common::Nfsd::exporting(&export).unwrap();
    nfs_read_checks(&server.url("//testfile.bin"), &export.join("testfile.bin"));

    // Metadata mix: 2 clients × (create, getattr, remove) × 50 files.
    let mut p = plan(&server.url("//"), Schedule::Count(300), 2);
    p.options.nfs_workload = NfsWorkload::Metadata;
    p.options.nfs_files = 50;
    let r = run_bounded(p, Duration::from_secs(120));
    assert_eq!((r.requests, r.failed()), (300, 0), "{:?}", r.first_error);
    for op in ["CREATE", "GETATTR", "REMOVE"] {
        assert!(
            r.latency.combined(op, "total").unwrap().count() >= 50,
            "{op}"
        );
    }

    // Writes: 40 × 256 KiB, files removed afterwards.
    let mut p = plan(&server.url("//"), Schedule::Count(40), 2);
    p.options.nfs_workload = NfsWorkload::Write;
    p.options.block_size = 256 << 10;
    let r = run_bounded(p, Duration::from_secs(120));
    // 40 WRITEs, plus the COMMIT each worker sends at its last file's end (as a kernel
    // client does on close), which makes every written byte stable.
    let writes = r
        .latency
        .combined("WRITE", "total")
        .map_or(0, |s| s.histogram.len());
    let commits = r
        .latency
        .combined("COMMIT", "total")
        .expect("COMMITs were sent");
    assert_eq!((writes, r.failed()), (40, 0), "{:?}", r.first_error);
    assert_eq!(r.requests, writes + commits.histogram.len());
    assert!(
        (1..=2).contains(&commits.histogram.len()),
        "{}",
        commits.histogram.len()
    );
    assert_eq!(r.body_bytes, 40 * (256 << 10));
    assert_eq!(
        commits.bytes,
        40 * (256 << 10),
        "every written byte was committed"
    );
    let left: Vec<_> = std::fs::read_dir(&export)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("servelab-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // A misspelt file or directory ends the run at its first LOOKUP, before any
    // worker starts (issue 32 §3); a bad URL is a clear error up front.
    for missing in ["//nope.bin", "//no-such-dir"] {
        let err = loadgen::run(plan(&server.url(missing), Schedule::Count(2), 1)).unwrap_err();
        assert!(matches!(err, loadgen::Error::NoSuchFile { .. }), "{err}");
        assert!(
            err.to_string().contains("no such file on the export"),
            "{err}"
        );
    }
    // A file where the metadata mix needs a directory stops the run after 100 identical
    // failures (issue 12 §5) instead of mounting again and again for the whole 30 s.
    let mut p = plan(
        &server.url("//testfile.bin"),
        Schedule::Duration(Duration::from_secs(30)),
        2,
    );
    p.options.nfs_workload = NfsWorkload::Metadata;
    let t = Instant::now();
    let r = run_bounded(p, Duration::from_secs(60));
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    assert!(
        r.stopped
            .as_deref()
            .is_some_and(|s| s.contains("100 consecutive server failures")),
        "{:?}",
        r.stopped
    );
    assert!((100..=102).contains(&r.requests), "{}", r.requests);
    // (Host names are resolved at connect time, so the bad URL is a bad port.)
    let err = LoadPlan::new("nfs://127.0.0.1:99999/x", Schedule::Count(1), 1)
        .and_then(loadgen::run)
        .unwrap_err();
    assert!(matches!(err, loadgen::Error::Url { .. }), "{err}");
}

/// The same reads against NFS-Ganesha, started by the harness (rpcbind, root; skipped
/// where Ganesha is not installed, a failure under CI). `SERVELAB_GANESHA_URL` naming a
/// running Ganesha export's 10 MiB `testfile.bin` (`nfs://127.0.0.1/tmp/lab/www//testfile.bin
/// ?version=3&nfsport=12049&mountport=12050`) and `SERVELAB_GANESHA_FILE` the same file on
/// the local disk use that one instead, as in the baseline notes.
#[test]
fn nfs_reads_against_ganesha() {
    if let (Ok(url), Ok(file)) = (
        std::env::var("SERVELAB_GANESHA_URL"),
        std::env::var("SERVELAB_GANESHA_FILE"),
    ) {
        nfs_read_checks(&url, Path::new(&file));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let export = common::write_dataset(&tmp.path().join("export"));
    let Some(g) = crate::support::ganesha::start(&export) else {
        return;
    };
    let url = crate::support::ganesha::url_on(&g, "127.0.0.1", "//testfile.bin");
    nfs_read_checks(&url, &export.join("testfile.bin"));
}

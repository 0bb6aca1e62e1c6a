//! The `servelab load` and `servelab tcp-server` command lines, run as a user would.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn servelab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_servelab"))
}

/// A keep-alive HTTP/1.1 server answering every request with 100 bytes; runs until the
/// test process ends.
fn http_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = stream;
                let _ = s.set_nodelay(true);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 2048];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    buf.drain(..end);
                    let mut answer =
                        b"HTTP/1.1 200 OK\r\nServer: cli-test\r\nContent-Length: 100\r\n\r\n"
                            .to_vec();
                    answer.extend_from_slice(&[b'x'; 100]);
                    if s.write_all(&answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn load_prints_what_ab_prints_plus_percentiles_and_json() {
    let port = http_server();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let out = servelab()
        .args([
            "load",
            &format!("http://127.0.0.1:{port}/testfile.bin"),
            "-n",
            "100",
            "-c",
            "10",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for field in [
        "Server Software:        cli-test",
        "Server Hostname:        127.0.0.1",
        &format!("Server Port:            {port}"),
        "Document Path:          /testfile.bin",
        "Document Length:        100 bytes",
        "Concurrency Level:      10",
        "Time taken for tests:",
        "Complete requests:      100",
        "Failed requests:        0",
        "Total transferred:",
        "HTML transferred:       10000 bytes",
        "Requests per second:",
        "Time per request:",
        "[ms] (mean, across all concurrent requests)",
        "Transfer rate:",
        "Connection Times (ms)",
        "              min  mean[+/-sd] median   max",
        "Connect:",
        "Processing:",
        "Waiting:",
        "Total:",
        "Percentage of the requests served within a certain time (ms)",
        "  50%",
        "  99%",
        " 100%",
        "(longest request)",
        "p99.99",
        "GET total",
    ] {
        assert!(text.contains(field), "missing {field:?} in:\n{text}");
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["requests"], 100);
    assert_eq!(v["body_bytes"], 10_000);
}

#[test]
fn bad_input_gives_a_clear_message_and_a_failure_status() {
    for (args, needle) in [
        (vec!["load", "ftp://h/x"], "unknown scheme"),
        (vec!["load", "http://[::1/x"], "IPv6"),
        (
            vec!["load", "http://127.0.0.1/", "-n", "5", "-c", "10"],
            "fewer operations",
        ),
        (vec!["load", "http://127.0.0.1/", "-z", "ten"], "duration"),
        (vec!["load", "nfs://127.0.0.1:99999/x"], "invalid URL"),
    ] {
        let out = servelab().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn tcp_server_and_tcp_load() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = servelab()
        .args(["tcp-server", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "tcp-server never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = servelab()
        .args([
            "load",
            &format!("tcp://127.0.0.1:{port}"),
            "-z",
            "500ms",
            "-c",
            "2",
        ])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Failed operations:      0"), "{text}");
    assert!(text.contains("Gbit/s"), "{text}");
}

#[test]
fn a_run_where_every_request_failed_prints_its_report_and_exits_non_zero() {
    // A port nobody listens on: every connection is refused.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = servelab()
        .args([
            "load",
            &format!("http://127.0.0.1:{port}/x"),
            "-n",
            "20",
            "-c",
            "2",
            "--timeout",
            "5s",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a run with 20 failures exited 0");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Failed requests:        20"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("all 20 operations"), "{err}");
    assert!(lines[0].contains("failed"), "{err}");
}

#[test]
fn a_run_with_some_failures_still_exits_zero() {
    // Answers the first two connections, then refuses: some requests succeed.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(2).flatten() {
            let mut s = stream;
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    let out = servelab()
        .args([
            "load",
            &format!("http://127.0.0.1:{port}/x"),
            "-n",
            "6",
            "-c",
            "1",
            "--timeout",
            "5s",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Complete requests:      6"), "{text}");
    assert!(!text.contains("Failed requests:        0"), "{text}");
    assert!(!text.contains("Failed requests:        6"), "{text}");
}

/// Issue 25 §1.3: a load started a moment before its server (`server & servelab load`)
/// counted the early failures and exited 0. The first connections here are closed
/// unanswered, the rest are served: some operations succeed, but only after failures.
#[test]
fn failures_before_the_first_success_exit_5_not_ready() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for (i, stream) in listener.incoming().flatten().enumerate() {
            let mut s = stream;
            if i < 3 {
                continue; // dropped: the client sees the connection closed, no answer
            }
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    let out = servelab()
        .args([
            "load",
            &format!("http://127.0.0.1:{port}/x"),
            "-n",
            "8",
            "-c",
            "1",
        ])
        .args(["--no-keepalive", "--timeout", "5s"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{text}\n{err}");
    assert!(text.contains("Complete requests:      8"), "{text}");
    assert!(
        text.contains("Not ready: the first 3 operations failed before any succeeded"),
        "{text}"
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("was not ready: the first 3 operations"),
        "{err}"
    );
}

/// The README tour's race as written: `servelab tcp-server ... & servelab load tcp://...`,
/// here with the server 300 ms late (and `--keep-going`, so the refusals do not stop the
/// run first): exit 5, where it used to be 0 with the refusals counted as failures.
#[test]
fn a_tcp_load_that_began_before_its_server_listened_exits_5() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let load = servelab()
        .args(["load", &format!("tcp://127.0.0.1:{port}"), "-z", "3s"])
        .args(["--keep-going", "--no-progress"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut server = servelab()
        .args(["tcp-server", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = load.wait_with_output().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{text}\n{err}");
    assert!(err.contains("was not ready"), "{err}");
    assert!(text.contains("Not ready: the first "), "{text}");
}

/// A bitwise CRC-32 (IEEE), independent of the implementation under test.
fn crc32(data: &[u8]) -> u32 {
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

#[test]
fn wrong_data_exits_3_and_says_so() {
    // Issue 12 §5: --verify-crc32 mismatches used to exit 0.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.bin");
    let data: Vec<u8> = (0..256 * 1024u32).map(|i| (i * 7 % 253) as u8).collect();
    std::fs::write(&file, &data).unwrap();
    let url = format!("file://{}", file.display());
    let run = |crc: u32| {
        servelab()
            .args(["load", &url, "-n", "16", "-c", "1", "--block", "64k"])
            .args(["--verify-crc32", &format!("{crc:08x}")])
            .output()
            .unwrap()
    };
    let good = run(crc32(&data));
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
    let text = String::from_utf8_lossy(&good.stdout);
    assert!(
        text.contains(&format!("Data CRC-32:            {:08x}", crc32(&data))),
        "{text}"
    );

    let bad = run(crc32(&data) ^ 1);
    assert_eq!(bad.status.code(), Some(3), "{bad:?}");
    let text = String::from_utf8_lossy(&bad.stdout);
    assert!(
        text.contains("checksum: 4"),
        "16 reads = 4 passes, all wrong:\n{text}"
    );
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("4 of 16 operations") && err.contains("wrong data"),
        "{err}"
    );
}

#[test]
fn an_unreachable_target_stops_after_consecutive_failures() {
    // Issue 12 §5: a closed port produced 92,820 connection attempts in 2 s.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/x");
    let t = Instant::now();
    let out = servelab()
        .args(["load", &url, "-z", "20s", "-c", "4"])
        .output()
        .unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("stopped after 100 consecutive connect failures")
            && err.contains("--keep-going"),
        "{err}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let failed: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Failed requests:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no failure count in:\n{text}"));
    // 100, plus what the other workers had in flight.
    assert!((100..=104).contains(&failed), "{failed} failures:\n{text}");
    assert!(text.contains("Run stopped early:"), "{text}");

    // --keep-going runs to the end of the schedule (and every request failed: exit 1).
    let out = servelab()
        .args(["load", &url, "-n", "300", "-c", "2", "--keep-going"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Failed requests:        300"), "{text}");

    // A missing directory is refused before any traffic, in one line.
    let out = servelab()
        .args([
            "load",
            "file:///nonexistent-servelab-dir/",
            "--workload",
            "metadata",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("No such file or directory") && err.lines().count() == 1,
        "{err}"
    );
}

#[test]
fn help_documents_the_exit_codes() {
    let out = servelab().args(["load", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "Exit status:",
        "  3  data integrity failure",
        "  4  stopped early",
        "  5  the target was not ready",
        "--keep-going",
        "--workload",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn open_loop_output_labels_what_ab_would_misread() {
    // Issue 12 §1 and §4: ab's "Time per request" is 40x the latency in an open loop,
    // and ab's whole-ms 99 % differs from the HDR p99; both say what they are.
    let port = http_server();
    let out = servelab()
        .args([
            "load",
            &format!("http://127.0.0.1:{port}/x"),
            "-q",
            "200",
            "-n",
            "100",
            "-c",
            "4",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "[ms] (mean latency; open loop at 200/s",
        "would say",
        "the interval between intended starts",
        "(ab's rule: the request at rank n*p/100, rounded to whole ms",
        "Latency (ms; HDR-histogram quantiles",
        "Generator schedule lag (ms)",
        "  schedule lag    100",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

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

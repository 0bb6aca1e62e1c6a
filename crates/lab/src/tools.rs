//! The external measuring tools (`wrk`, `ab`, `iperf3`): how each is run and how its
//! output is read back into a [`Measured`].

use std::process::{Command, Stdio};
use std::time::Duration;

use std::net::SocketAddr;

use crate::process::Supervised;
use crate::{LabError, Result, cores, find_program, free_port};

/// What one run of any tool (or of `servelab load`) measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    pub seconds: f64,
    pub requests: u64,
    /// Failed requests: socket errors, timeouts, non-2xx, length mismatches.
    pub errors: u64,
    pub per_sec: f64,
    pub bytes_per_sec: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// CPU seconds (user + system) the tool itself used, when it ran as a child.
    pub client_cpu_s: Option<f64>,
}

/// `wrk -t T -c C -d D --latency [-H 'Connection: close'] URL`, one thread per core.
pub fn wrk(url: &str, connections: usize, seconds: f64, keepalive: bool) -> Result<Measured> {
    wrk_threads(url, cores(), connections, seconds, keepalive)
}

/// `wrk` with `threads` threads (at most one per connection).
pub fn wrk_threads(
    url: &str,
    threads: usize,
    connections: usize,
    seconds: f64,
    keepalive: bool,
) -> Result<Measured> {
    let program = find_program("wrk")
        .ok_or_else(|| LabError::Missing("wrk is not installed (apt-get install wrk)".into()))?;
    let threads = threads.clamp(1, connections.max(1));
    let mut cmd = Command::new(program);
    cmd.arg("-t")
        .arg(threads.to_string())
        .arg("-c")
        .arg(connections.to_string())
        .arg("-d")
        // wrk takes whole seconds (`-d 2s`; `500ms` is a usage error).
        .arg(format!("{}s", seconds.ceil().max(1.0) as u64))
        .arg("--timeout")
        .arg("10s")
        .arg("--latency");
    if !keepalive {
        cmd.arg("-H").arg("Connection: close");
    }
    cmd.arg(url);
    let (out, cpu) = run_timed(&mut cmd, seconds + 30.0)?;
    let mut m = parse_wrk(&out)?;
    m.client_cpu_s = Some(cpu);
    Ok(m)
}

/// `ab -n N -c C [-k] URL`: exactly the original experiment's command.
pub fn ab_count(url: &str, requests: u64, concurrency: usize, keepalive: bool) -> Result<Measured> {
    let program = find_program("ab").ok_or_else(|| {
        LabError::Missing("ab is not installed (apt-get install apache2-utils)".into())
    })?;
    let mut cmd = Command::new(program);
    cmd.arg("-q")
        .arg("-n")
        .arg(requests.to_string())
        .arg("-c")
        .arg(concurrency.to_string())
        .arg("-s")
        .arg("30");
    if keepalive {
        cmd.arg("-k");
    }
    cmd.arg(url);
    let (out, cpu) = run_timed(&mut cmd, 300.0)?;
    let mut m = parse_ab(&out)?;
    m.client_cpu_s = Some(cpu);
    Ok(m)
}

/// `ab -q -c C -t D -n HUGE [-k] URL` (time-bounded; `-n` only lifts ab's 50,000 cap).
pub fn ab(url: &str, concurrency: usize, seconds: f64, keepalive: bool) -> Result<Measured> {
    let program = find_program("ab").ok_or_else(|| {
        LabError::Missing("ab is not installed (apt-get install apache2-utils)".into())
    })?;
    let mut cmd = Command::new(program);
    cmd.arg("-q")
        .arg("-c")
        .arg(concurrency.to_string())
        .arg("-t")
        .arg(format!("{}", seconds.ceil().max(1.0) as u64))
        .arg("-n")
        .arg("100000000")
        .arg("-s")
        .arg("10");
    if keepalive {
        cmd.arg("-k");
    }
    cmd.arg(url);
    let (out, cpu) = run_timed(&mut cmd, seconds + 30.0)?;
    let mut m = parse_ab(&out)?;
    m.client_cpu_s = Some(cpu);
    Ok(m)
}

/// `iperf3 -c 127.0.0.1 -p PORT -t D -J` against a one-off `iperf3 -s -1` it starts.
pub fn iperf3(seconds: f64) -> Result<Measured> {
    let program = find_program("iperf3")
        .ok_or_else(|| LabError::Missing("iperf3 is not installed".into()))?;
    let port = free_port()?;
    // No `-1`: the readiness probe below would count as its one client. The guard kills
    // it. The client starts once the server accepts, so it is never refused.
    let mut server = Command::new(&program);
    server
        .args(["-s", "-B", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut server = Supervised::spawn("iperf3 -s", &mut server, None)?.with_grace(Duration::ZERO);
    server.wait_ready(
        &[SocketAddr::from(([127, 0, 0, 1], port))],
        Duration::from_secs(5),
    )?;
    let out = run(
        Command::new(&program)
            .args(["-c", "127.0.0.1", "-J", "-p"])
            .arg(port.to_string())
            .arg("-t")
            .arg(format!("{}", seconds.ceil().max(1.0) as u64)),
        seconds + 30.0,
    )?;
    parse_iperf3(&out)
}

/// CPU seconds used by this process's reaped children so far.
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the struct we pass; zeroed is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// As [`run`], also returning the CPU seconds the tool used (children reaped meanwhile
/// would count too: tools run one at a time).
pub fn run_timed(cmd: &mut Command, limit_s: f64) -> Result<(String, f64)> {
    let before = children_cpu_s();
    let out = run(cmd, limit_s)?;
    Ok((out, (children_cpu_s() - before).max(0.0)))
}

/// Runs a tool to completion within `limit_s` seconds, supervised (an interrupted run
/// stops it with the servers); its stdout (stderr on failure).
pub fn run(cmd: &mut Command, limit_s: f64) -> Result<String> {
    let name = cmd.get_program().to_string_lossy().into_owned();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Supervised::spawn(&name, cmd, None)?.with_grace(Duration::ZERO);
    let (Some(mut so), Some(mut se)) = child.take_pipes() else {
        return Err(LabError::Failed(format!("{name}: no output pipes")));
    };
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut so, &mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut se, &mut s);
        s
    });
    let Some(status) = child.wait_for(Duration::from_secs_f64(limit_s)) else {
        child.kill();
        return Err(LabError::Failed(format!(
            "{name} did not finish within {limit_s:.0} s"
        )));
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    if !status.success() {
        return Err(LabError::Failed(format!(
            "{name} failed ({status}): {}",
            first_lines(&format!("{stderr}{stdout}"), 3)
        )));
    }
    Ok(stdout)
}

fn first_lines(text: &str, n: usize) -> String {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .collect::<Vec<_>>()
        .join(" | ")
}

/// `1.23ms`, `456.00us`, `2.00s`, `1.5m` → milliseconds.
fn wrk_duration_ms(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().ok()?;
    Some(match unit {
        "us" => v / 1e3,
        "ms" => v,
        "s" => v * 1e3,
        "m" => v * 60e3,
        "h" => v * 3600e3,
        _ => return None,
    })
}

/// `235.84MB` (wrk uses powers of 1024) → bytes.
fn wrk_bytes(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().ok()?;
    let mult = match unit {
        "" | "B" => 1.0,
        "KB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        "TB" => 1024.0_f64.powi(4),
        _ => return None,
    };
    Some(v * mult)
}

/// Reads wrk's text report (with `--latency`).
pub fn parse_wrk(out: &str) -> Result<Measured> {
    let mut m = Measured::default();
    let mut saw_rate = false;
    for line in out.lines() {
        let l = line.trim();
        if let Some(v) = l.strip_prefix("Requests/sec:") {
            m.per_sec = v
                .trim()
                .parse()
                .map_err(|_| LabError::Failed(format!("wrk: bad rate {v:?}")))?;
            saw_rate = true;
        } else if let Some(v) = l.strip_prefix("Transfer/sec:") {
            m.bytes_per_sec =
                wrk_bytes(v).ok_or_else(|| LabError::Failed(format!("wrk: bad transfer {v:?}")))?;
        } else if let Some(v) = l.strip_prefix("50%") {
            m.p50_ms = wrk_duration_ms(v);
        } else if let Some(v) = l.strip_prefix("99%") {
            m.p99_ms = wrk_duration_ms(v);
        } else if l.contains(" requests in ") {
            // `111924 requests in 2.00s, 471.68MB read`
            let mut words = l.split_whitespace();
            m.requests = words
                .next()
                .and_then(|w| w.parse().ok())
                .ok_or_else(|| LabError::Failed(format!("wrk: bad line {l:?}")))?;
            m.seconds = l
                .split(" in ")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(wrk_duration_ms)
                .map(|ms| ms / 1e3)
                .ok_or_else(|| LabError::Failed(format!("wrk: bad line {l:?}")))?;
        } else if let Some(v) = l.strip_prefix("Socket errors:") {
            // `connect 0, read 0, write 0, timeout 0`
            for part in v.split(',') {
                if let Some(n) = part
                    .split_whitespace()
                    .nth(1)
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    m.errors += n;
                }
            }
        } else if let Some(v) = l.strip_prefix("Non-2xx or 3xx responses:") {
            m.errors += v.trim().parse::<u64>().unwrap_or(0);
        }
    }
    if !saw_rate || m.requests == 0 {
        return Err(LabError::Failed(format!(
            "wrk completed no request: {}",
            first_lines(out, 4)
        )));
    }
    Ok(m)
}

/// Reads ab's report.
pub fn parse_ab(out: &str) -> Result<Measured> {
    let mut m = Measured::default();
    let num = |v: &str| -> Option<f64> { v.split_whitespace().next()?.parse().ok() };
    let mut in_percentiles = false;
    for line in out.lines() {
        let l = line.trim();
        if let Some(v) = l.strip_prefix("Time taken for tests:") {
            m.seconds = num(v).unwrap_or(0.0);
        } else if let Some(v) = l.strip_prefix("Complete requests:") {
            m.requests = num(v).unwrap_or(0.0) as u64;
        } else if let Some(v) = l.strip_prefix("Failed requests:") {
            m.errors += num(v).unwrap_or(0.0) as u64;
        } else if let Some(v) = l.strip_prefix("Non-2xx responses:") {
            m.errors += num(v).unwrap_or(0.0) as u64;
        } else if let Some(v) = l.strip_prefix("Requests per second:") {
            m.per_sec = num(v).unwrap_or(0.0);
        } else if let Some(v) = l.strip_prefix("Transfer rate:") {
            m.bytes_per_sec = num(v).unwrap_or(0.0) * 1024.0;
        } else if l.starts_with("Percentage of the requests") {
            in_percentiles = true;
        } else if in_percentiles {
            if let Some(v) = l.strip_prefix("50%") {
                m.p50_ms = num(v);
            } else if let Some(v) = l.strip_prefix("99%") {
                m.p99_ms = num(v);
            }
        }
    }
    if m.requests == 0 || m.per_sec == 0.0 {
        return Err(LabError::Failed(format!(
            "ab completed no request: {}",
            first_lines(out, 4)
        )));
    }
    Ok(m)
}

/// Reads `iperf3 -J`: the receiver's bits per second.
pub fn parse_iperf3(out: &str) -> Result<Measured> {
    let v: serde_json::Value =
        serde_json::from_str(out).map_err(|source| LabError::Unreadable {
            what: "iperf3 -J output is not JSON".into(),
            source,
        })?;
    if let Some(err) = v.get("error").and_then(|e| e.as_str()) {
        return Err(LabError::Failed(format!("iperf3: {err}")));
    }
    let sum = &v["end"]["sum_received"];
    let bits = sum["bits_per_second"].as_f64().ok_or_else(|| {
        LabError::Failed("iperf3 -J has no end.sum_received.bits_per_second".into())
    })?;
    Ok(Measured {
        seconds: sum["seconds"].as_f64().unwrap_or(0.0),
        requests: 0,
        errors: 0,
        per_sec: 0.0,
        bytes_per_sec: bits / 8.0,
        p50_ms: None,
        p99_ms: None,
        client_cpu_s: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK: &str = "Running 2s test @ http://127.0.0.1:8080/small.bin
  2 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   172.45us  120.03us   4.25ms   91.92%
    Req/Sec    28.12k     2.10k   31.00k    80.00%
  Latency Distribution
     50%  148.00us
     75%  182.00us
     90%  240.00us
     99%    1.31ms
  111924 requests in 2.00s, 471.68MB read
  Socket errors: connect 0, read 3, write 0, timeout 1
  Non-2xx or 3xx responses: 5
Requests/sec:  55963.10
Transfer/sec:    235.84MB
";

    #[test]
    fn reads_wrk() {
        let m = parse_wrk(WRK).unwrap();
        assert_eq!(m.requests, 111_924);
        assert_eq!(m.errors, 9);
        assert!((m.seconds - 2.0).abs() < 1e-9);
        assert!((m.per_sec - 55_963.10).abs() < 1e-6);
        assert!((m.bytes_per_sec - 235.84 * 1024.0 * 1024.0).abs() < 1.0);
        assert!((m.p50_ms.unwrap() - 0.148).abs() < 1e-9);
        assert!((m.p99_ms.unwrap() - 1.31).abs() < 1e-9);
        assert!(parse_wrk("unable to connect to 127.0.0.1:1 Connection refused").is_err());
    }

    const AB: &str = "Server Software:        nginx/1.22.1
Concurrency Level:      10
Time taken for tests:   2.000 seconds
Complete requests:      30511
Failed requests:        2
Non-2xx responses:      1
Keep-Alive requests:    30511
Total transferred:      132000000 bytes
Requests per second:    15255.50 [#/sec] (mean)
Time per request:       0.656 [ms] (mean)
Transfer rate:          64453.12 [Kbytes/sec] received

Percentage of the requests served within a certain time (ms)
  50%      1
  66%      1
  99%      3
 100%      9 (longest request)
";

    #[test]
    fn reads_ab() {
        let m = parse_ab(AB).unwrap();
        assert_eq!(m.requests, 30_511);
        assert_eq!(m.errors, 3);
        assert!((m.per_sec - 15_255.5).abs() < 1e-9);
        assert!((m.bytes_per_sec - 64_453.12 * 1024.0).abs() < 1e-6);
        assert_eq!(m.p50_ms, Some(1.0));
        assert_eq!(m.p99_ms, Some(3.0));
        assert!(parse_ab("apr_socket_connect(): Connection refused (111)").is_err());
    }

    #[test]
    fn reads_iperf3() {
        let json = r#"{"start":{},"end":{"sum_received":{"seconds":2.0,"bytes":1,"bits_per_second":4.0e10}}}"#;
        let m = parse_iperf3(json).unwrap();
        assert!((m.bytes_per_sec - 5.0e9).abs() < 1.0);
        assert!(parse_iperf3(r#"{"error":"unable to connect"}"#).is_err());
        assert!(parse_iperf3("nope").is_err());
    }

    #[test]
    fn units() {
        assert_eq!(wrk_duration_ms("2.00s"), Some(2000.0));
        assert_eq!(wrk_duration_ms("500.00us"), Some(0.5));
        assert_eq!(wrk_bytes("1.00KB"), Some(1024.0));
        assert_eq!(wrk_bytes("12B"), Some(12.0));
        assert_eq!(wrk_bytes("1.0XB"), None);
    }
}

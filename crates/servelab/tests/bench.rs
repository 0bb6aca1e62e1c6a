//! `servelab bench --quick` end to end: the real binary runs the reduced suite against
//! whatever peers the machine has, and the CSV, setup note and summary must be written
//! and sane. Without wrk it skips on a developer's machine and fails under CI.

use std::process::Command;
use std::time::{Duration, Instant};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

fn have(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p)
            .chain(["/usr/sbin".into(), "/sbin".into()])
            .any(|d| d.join(tool).is_file())
    })
}

#[test]
fn quick_suite_writes_csv_setup_and_summary() {
    if !have("wrk") {
        assert!(!in_ci(), "wrk is required in CI (.ci/run installs it)");
        lab::skip::skip("wrk is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let t0 = Instant::now();
    let result = Command::new(env!("CARGO_BIN_EXE_servelab"))
        .args(["bench", "--quick", "--duration", "0.5"])
        .args(["--groups", "http,nfs,memory", "--out"])
        .arg(&out)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let took = t0.elapsed();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "servelab bench failed: {stderr}");
    // A bound against a runaway suite, not a benchmark: generous for a busy 2-core CI.
    assert!(took < Duration::from_secs(240), "quick suite took {took:?}");

    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header[0], "repeat");
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<String>> = lines.map(split_csv).collect();
    assert!(rows.iter().all(|r| r.len() == header.len()), "{csv}");

    // Our own servers, measured by both tools, in every quick HTTP case.
    let http_ok = |server: &str, tool: &str| {
        rows.iter()
            .filter(|r| {
                r[col("group")] == "http" && r[col("server")] == server && r[col("tool")] == tool
            })
            .filter(|r| r[col("error")].is_empty())
            .map(|r| r[col("per_sec")].parse::<f64>().unwrap())
            .collect::<Vec<_>>()
    };
    for server in ["httpd-local", "httpd-nfs"] {
        for tool in ["servelab-load", "wrk"] {
            let rates = http_ok(server, tool);
            assert_eq!(rates.len(), 3, "{server} {tool}: {csv}");
            assert!(rates.iter().all(|r| *r > 0.0), "{server} {tool}: {rates:?}");
        }
    }
    // Memory: idle RSS of our servers, in bytes, plausible.
    for server in ["rustnfs", "httpd-local"] {
        let rss: u64 = rows
            .iter()
            .find(|r| r[col("group")] == "memory" && r[col("server")] == server)
            .map(|r| r[col("peak_rss_bytes")].parse().unwrap())
            .unwrap_or_else(|| panic!("no idle RSS row for {server}: {csv}"));
        assert!((1 << 20..1 << 30).contains(&rss), "{server} idle RSS {rss}");
    }
    // NFS: rustnfs read and metadata rows succeeded.
    for case in ["seq read 10MiB c=1", "metadata c=1", "boot set c=16"] {
        let r = rows
            .iter()
            .find(|r| {
                r[col("server")] == "rustnfs"
                    && r[col("case")] == case
                    && r[col("tool")] == "servelab-load"
            })
            .unwrap_or_else(|| panic!("no rustnfs {case}: {csv}"));
        assert!(
            r[col("error")].is_empty(),
            "rustnfs {case}: {}",
            r[col("error")]
        );
        assert!(r[col("per_sec")].parse::<f64>().unwrap() > 0.0);
    }

    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("## The bars"), "{summary}");
    assert!(
        summary.contains("httpd-nfs / httpd-local, 4KiB keep-alive c=10"),
        "{summary}"
    );
    assert!(summary.contains("rustnfs idle RSS"), "{summary}");
    if have("nginx") {
        assert!(
            summary.contains("httpd-local / nginx, 4KiB keep-alive c=10"),
            "{summary}"
        );
    } else {
        assert!(summary.contains("skipped nginx"), "{summary}");
    }
    let setup = std::fs::read_to_string(out.join("setup.md")).unwrap();
    for needle in [
        "Kernel:",
        "Load average",
        "Cache state:",
        "Settings: repeat 1",
    ] {
        assert!(setup.contains(needle), "setup.md lacks {needle}: {setup}");
    }

    // A second run into the same directory is refused, not mixed in.
    let again = Command::new(env!("CARGO_BIN_EXE_servelab"))
        .args(["bench", "--quick", "--groups", "memory", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a run"));
}

#[test]
fn bad_options_are_clear_errors() {
    for (args, needle) in [
        (&["bench", "--groups", "disk"][..], "unknown group `disk`"),
        (&["bench", "--repeat", "0"][..], "--repeat must be between"),
        (&["bench", "--duration", "-1"][..], ""),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_servelab"))
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// Splits one CSV line (fields may be quoted with doubled quotes inside).
fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    out.push(cur);
    out
}

//! `summary.md`: medians, spreads and the ratios checked against their bars, in
//! tables grouped by case, with the skips and the memory checks.

use std::fmt::Write as _;

use lab::environment::Environment;

use super::options::BenchOptions;
use super::ratios::*;
use super::record::{Row, Skip};

fn si(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2} G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.1} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k", v / 1e3)
    } else {
        format!("{v:.1}")
    }
}

/// `summary.md`.
pub fn render(
    rows: &[Row],
    skipped: &[Skip],
    env: &Environment,
    opts: &BenchOptions,
    load_before: &str,
    load_after: &str,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# servelab bench — {} on {}\n",
        &env.started_utc[..10],
        env.hostname
    );
    let _ = writeln!(
        s,
        "{} × {}, kernel {}, {} build, {} repeat(s) × {} s per measurement, interleaved (servers and tools rotate each repeat). Load average before {load_before}, after {load_after} (shared machine). Ratios are medians of per-repeat ratios (both sides measured back to back), with their min–max. Raw data: `results.csv`; setup: `setup.md`.\n",
        env.cores,
        env.cpu_model,
        env.kernel,
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        },
        opts.repeat,
        opts.seconds
    );
    let rs = ratios(rows);
    let _ = writeln!(s, "## The bars at a glance\n");
    let _ = writeln!(
        s,
        "| bar | target | cases met | median ratio, lowest–highest case |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|");
    for BarOverview {
        family,
        met,
        cases: n,
        lowest: lo,
        highest: hi,
        target,
    } in overview(&rs)
    {
        let _ = writeln!(
            s,
            "| {family} | ≥ {target:.2} | {met}/{n} | {lo:.2}–{hi:.2} |"
        );
    }
    for MemoryCheck {
        what,
        measured: v,
        limit,
    } in memory_checks(rows)
    {
        let _ = writeln!(
            s,
            "| {what} | < {:.0} MB | {} | {:.1} MB |",
            limit as f64 / 1e6,
            if v < limit { "1/1" } else { "0/1" },
            v as f64 / 1e6
        );
    }
    let _ = writeln!(s, "\n## The bars, case by case\n");
    let _ = writeln!(s, "| ratio | median | min–max | bar | met |");
    let _ = writeln!(s, "|---|---:|---:|---:|:---:|");
    for r in rs.iter().filter(|r| r.target.is_some()) {
        let _ = writeln!(
            s,
            "| {} | {:.2} | {:.2}–{:.2} | ≥ {:.2} | {} |",
            r.what,
            r.median,
            r.min,
            r.max,
            r.target.unwrap_or(0.0),
            if r.met() == Some(true) {
                "yes"
            } else {
                "**no**"
            }
        );
    }
    for MemoryCheck {
        what,
        measured: v,
        limit,
    } in memory_checks(rows)
    {
        let _ = writeln!(
            s,
            "| {what} | {:.1} MB | | < {:.0} MB | {} |",
            v as f64 / 1e6,
            limit as f64 / 1e6,
            if v < limit { "yes" } else { "**no**" }
        );
    }
    let info: Vec<&Ratio> = rs.iter().filter(|r| r.target.is_none()).collect();
    if !info.is_empty() {
        let _ = writeln!(s, "\nFor reference (no bar):\n");
        let _ = writeln!(s, "| ratio | median | min–max |");
        let _ = writeln!(s, "|---|---:|---:|");
        for r in info {
            let _ = writeln!(
                s,
                "| {} | {:.2} | {:.2}–{:.2} |",
                r.what, r.median, r.min, r.max
            );
        }
    }

    for (group, title) in [
        ("http", "HTTP"),
        ("nfs", "NFS"),
        ("loadgen", "Load generators on nginx"),
        ("tcp", "TCP, loopback"),
    ] {
        let keys = unique(
            rows.iter()
                .filter(|r| r.group == group)
                .map(|r| format!("{}\u{0}{}\u{0}{}", r.case, r.server, r.tool)),
        );
        if keys.is_empty() {
            continue;
        }
        let _ = writeln!(s, "\n## {title}\n");
        let _ = writeln!(
            s,
            "| case | server | tool | median req/s | req/s min–max | median MB/s | p50 ms | p99 ms | peak RSS MB | ok/runs |"
        );
        let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
        for k in keys {
            let mut parts = k.split('\u{0}');
            let (case, server, tool) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
            );
            let all: Vec<&Row> = rows
                .iter()
                .filter(|r| {
                    r.group == group && r.case == case && r.server == server && r.tool == tool
                })
                .collect();
            let ok: Vec<&&Row> = all.iter().filter(|r| r.ok()).collect();
            let per: Vec<f64> = ok.iter().map(|r| r.m.per_sec).collect();
            let bytes: Vec<f64> = ok.iter().map(|r| r.m.bytes_per_sec).collect();
            let p50: Vec<f64> = ok.iter().filter_map(|r| r.m.p50_ms).collect();
            let p99: Vec<f64> = ok.iter().filter_map(|r| r.m.p99_ms).collect();
            let peak = all.iter().filter_map(|r| r.peak_rss).max();
            let errors: u64 = ok.iter().map(|r| r.m.errors).sum();
            let (lo, hi) = min_max(&per);
            let _ = writeln!(
                s,
                "| {case} | {server} | {tool} | {} | {} | {:.1} | {} | {} | {} | {}/{}{} |",
                if per.is_empty() {
                    "—".into()
                } else {
                    si(median(&per))
                },
                if per.is_empty() {
                    "—".into()
                } else {
                    format!("{}–{}", si(lo), si(hi))
                },
                median(&bytes) / 1e6,
                if p50.is_empty() {
                    "—".into()
                } else {
                    format!("{:.3}", median(&p50))
                },
                if p99.is_empty() {
                    "—".into()
                } else {
                    format!("{:.3}", median(&p99))
                },
                peak.map_or("—".into(), |v| format!("{:.1}", v as f64 / 1e6)),
                ok.len(),
                all.len(),
                if errors > 0 {
                    format!(", {errors} failed requests")
                } else {
                    String::new()
                },
            );
        }
    }

    let mem: Vec<&Row> = rows.iter().filter(|r| r.group == "memory").collect();
    if !mem.is_empty() {
        let _ = writeln!(s, "\n## Memory (resident set of the server process)\n");
        let _ = writeln!(s, "| server | when | RSS MB |");
        let _ = writeln!(s, "|---|---|---:|");
        for r in mem {
            let _ = writeln!(
                s,
                "| {} | {} | {:.1} |",
                r.server,
                r.case,
                r.peak_rss.unwrap_or(0) as f64 / 1e6
            );
        }
        let _ = writeln!(
            s,
            "\nPeak RSS during each run is in the tables above (sampled every 50 ms over the server's process tree; nginx and Apache include their workers)."
        );
    }

    let failed: Vec<&Row> = rows.iter().filter(|r| !r.ok()).collect();
    if !skipped.is_empty() || !failed.is_empty() {
        let _ = writeln!(s, "\n## Skipped and failed\n");
        for Skip { what, why } in skipped {
            let _ = writeln!(s, "- skipped {what}: {why}");
        }
        for r in failed {
            let _ = writeln!(
                s,
                "- failed: repeat {} {} {} {} {}: {}",
                r.repeat,
                r.group,
                r.case,
                r.server,
                r.tool,
                r.error.as_deref().unwrap_or("")
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::names::LOAD;
    use crate::bench::record::{CSV_HEADER, csv};
    use lab::tools::Measured;

    fn row(
        rep: usize,
        group: &str,
        case: &str,
        server: &str,
        tool: &str,
        per: f64,
        bytes: f64,
    ) -> Row {
        Row::new(
            rep,
            group,
            case,
            server,
            tool,
            10,
            Ok(Measured {
                seconds: 1.0,
                requests: per as u64,
                errors: 0,
                per_sec: per,
                bytes_per_sec: bytes,
                p50_ms: Some(0.1),
                p99_ms: Some(1.0),
                client_cpu_s: None,
            }),
            Some(5_000_000),
        )
    }

    #[test]
    fn ratios_pair_repeats_and_pick_the_metric() {
        let rows = vec![
            row(
                1,
                "http",
                "4KiB keep-alive c=10",
                "httpd-local",
                LOAD,
                110.0,
                1.0,
            ),
            row(1, "http", "4KiB keep-alive c=10", "nginx", LOAD, 100.0, 9.0),
            row(
                2,
                "http",
                "4KiB keep-alive c=10",
                "httpd-local",
                LOAD,
                90.0,
                1.0,
            ),
            row(2, "http", "4KiB keep-alive c=10", "nginx", LOAD, 100.0, 9.0),
            row(
                3,
                "http",
                "4KiB keep-alive c=10",
                "httpd-local",
                LOAD,
                300.0,
                1.0,
            ),
            row(
                1,
                "http",
                "10MiB keep-alive c=10",
                "httpd-local",
                LOAD,
                1.0,
                50.0,
            ),
            row(
                1,
                "http",
                "10MiB keep-alive c=10",
                "nginx",
                LOAD,
                1.0,
                100.0,
            ),
        ];
        let rs = ratios(&rows);
        let small = rs
            .iter()
            .find(|r| r.what.starts_with("httpd-local / nginx, 4KiB"))
            .unwrap();
        // Repeat 3 has no nginx pair and is left out.
        assert!((small.median - 1.0).abs() < 1e-9);
        assert!((small.min - 0.9).abs() < 1e-9 && (small.max - 1.1).abs() < 1e-9);
        assert_eq!(small.met(), Some(true));
        let large = rs
            .iter()
            .find(|r| r.what.starts_with("httpd-local / nginx, 10MiB"))
            .unwrap();
        assert!((large.median - 0.5).abs() < 1e-9);
        assert_eq!(large.met(), Some(false));
        assert!(rs.iter().all(|r| !r.what.contains("httpd-nfs")));
        let ov = overview(&rs);
        let small = ov
            .iter()
            .find(|o| o.family == "httpd-local / nginx, 4 KiB, req/s")
            .unwrap();
        assert_eq!((small.met, small.cases), (1, 1));
        let large = ov
            .iter()
            .find(|o| o.family == "httpd-local / nginx, 10 MiB, bytes/s")
            .unwrap();
        assert_eq!((large.met, large.cases, large.target), (0, 1, 0.95));
    }

    #[test]
    fn csv_has_one_line_per_row_and_quotes() {
        let mut rows = vec![row(1, "http", "4KiB close c=10", "nginx", "wrk", 5.0, 6.0)];
        rows.push(Row::new(
            1,
            "nfs",
            "metadata c=1",
            "ganesha",
            LOAD,
            1,
            Err(anyhow::anyhow!("boom, \"bad\"")),
            None,
        ));
        let text = csv(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(lines[1].split(',').count(), CSV_HEADER.split(',').count());
        assert!(lines[2].ends_with("\"boom, \"\"bad\"\"\""));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}

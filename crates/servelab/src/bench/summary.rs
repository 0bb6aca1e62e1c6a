//! `summary.md`: medians, spreads and the ratios checked against their bars, in
//! tables grouped by case, with the skips and the memory checks.

use lab::environment::Environment;

use super::options::BenchOptions;
use super::ratios::{median, memory_checks, min_max, overview, ratios, unique};
use super::record::{Row, Skip};
use crate::doc::{Block, Doc};
use crate::table::{Align, Table};

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

/// What `summary.md` is made from.
pub struct Summary<'a> {
    pub rows: &'a [Row],
    pub skipped: &'a [Skip],
    pub env: &'a Environment,
    pub opts: &'a BenchOptions,
    pub load_before: &'a str,
    pub load_after: &'a str,
}

/// `summary.md`: its sections, top to bottom.
pub fn render(s: &Summary) -> String {
    let sections: [fn(&Summary) -> Vec<Block>; 6] = [
        preamble,
        bars_at_a_glance,
        bars_case_by_case,
        groups,
        memory,
        skipped_and_failed,
    ];
    sections
        .iter()
        .flat_map(|f| f(s))
        .collect::<Doc>()
        .to_markdown()
}

fn preamble(s: &Summary) -> Vec<Block> {
    let env = s.env;
    vec![
        Block::Heading(
            1,
            format!(
                "servelab bench — {} on {}",
                &env.started_utc[..10],
                env.hostname
            ),
        ),
        Block::text(format!(
            "{} × {}, kernel {}, {} build, {} repeat(s) × {} s per measurement, interleaved (servers and tools rotate each repeat). Load average before {}, after {} (shared machine). Ratios are medians of per-repeat ratios (both sides measured back to back), with their min–max. Raw data: `results.csv`; setup: `setup.md`.",
            env.cores,
            env.cpu_model,
            env.kernel,
            if cfg!(debug_assertions) {
                "DEBUG"
            } else {
                "release"
            },
            s.opts.repeat,
            s.opts.seconds,
            s.load_before,
            s.load_after
        )),
    ]
}

/// One line per bar: how many of its cases met it; the memory limits beside them.
fn bars_at_a_glance(s: &Summary) -> Vec<Block> {
    let mut t = Table::new([
        "bar",
        "target",
        "cases met",
        "median ratio, lowest–highest case",
    ]);
    for o in overview(&ratios(s.rows)) {
        t.row([
            o.family,
            format!("≥ {:.2}", o.target),
            format!("{}/{}", o.met, o.cases),
            format!("{:.2}–{:.2}", o.lowest, o.highest),
        ]);
    }
    for m in memory_checks(s.rows) {
        t.row([
            m.what,
            format!("< {:.0} MB", m.limit as f64 / 1e6),
            if m.measured < m.limit { "1/1" } else { "0/1" }.into(),
            format!("{:.1} MB", m.measured as f64 / 1e6),
        ]);
    }
    vec![Block::h2("The bars at a glance"), Block::Table(t)]
}

/// Every ratio against its bar, then the ratios that have none.
fn bars_case_by_case(s: &Summary) -> Vec<Block> {
    let rs = ratios(s.rows);
    let met = |yes: bool| if yes { "yes" } else { "**no**" }.to_string();
    let mut t = Table::new(["ratio", "median", "min–max", "bar", "met"]).align(4, Align::Center);
    for r in rs.iter().filter(|r| r.target.is_some()) {
        t.row([
            r.what.clone(),
            format!("{:.2}", r.median),
            format!("{:.2}–{:.2}", r.min, r.max),
            format!("≥ {:.2}", r.target.unwrap_or(0.0)),
            met(r.met() == Some(true)),
        ]);
    }
    for m in memory_checks(s.rows) {
        t.row([
            m.what,
            format!("{:.1} MB", m.measured as f64 / 1e6),
            String::new(),
            format!("< {:.0} MB", m.limit as f64 / 1e6),
            met(m.measured < m.limit),
        ]);
    }
    let mut out = vec![Block::h2("The bars, case by case"), Block::Table(t)];
    let mut info = Table::new(["ratio", "median", "min–max"]);
    for r in rs.iter().filter(|r| r.target.is_none()) {
        info.row([
            r.what.clone(),
            format!("{:.2}", r.median),
            format!("{:.2}–{:.2}", r.min, r.max),
        ]);
    }
    if !info.is_empty() {
        out.extend([Block::text("For reference (no bar):"), Block::Table(info)]);
    }
    out
}

/// One table per group: each (case, server, tool) with its medians and spread.
fn groups(s: &Summary) -> Vec<Block> {
    let mut out = Vec::new();
    for (group, title) in [
        ("http", "HTTP"),
        ("nfs", "NFS"),
        ("loadgen", "Load generators on nginx"),
        ("tcp", "TCP, loopback"),
    ] {
        let keys = unique(
            s.rows
                .iter()
                .filter(|r| r.group == group)
                .map(|r| format!("{}\u{0}{}\u{0}{}", r.case, r.server, r.tool)),
        );
        if keys.is_empty() {
            continue;
        }
        let mut t = Table::new([
            "case",
            "server",
            "tool",
            "median req/s",
            "req/s min–max",
            "median MB/s",
            "p50 ms",
            "p99 ms",
            "peak RSS MB",
            "ok/runs",
        ])
        .left(3);
        for k in keys {
            let mut parts = k.split('\u{0}');
            let mut next = || parts.next().unwrap_or("").to_string();
            let (case, server, tool) = (next(), next(), next());
            let all: Vec<&Row> = s
                .rows
                .iter()
                .filter(|r| {
                    r.group == group && r.case == case && r.server == server && r.tool == tool
                })
                .collect();
            t.row(group_row(&case, &server, &tool, &all));
        }
        out.extend([Block::h2(title), Block::Table(t)]);
    }
    out
}

/// The medians of one (case, server, tool) over its runs.
fn group_row(case: &str, server: &str, tool: &str, all: &[&Row]) -> [String; 10] {
    let ok: Vec<&&Row> = all.iter().filter(|r| r.ok()).collect();
    let per: Vec<f64> = ok.iter().map(|r| r.m.per_sec).collect();
    let bytes: Vec<f64> = ok.iter().map(|r| r.m.bytes_per_sec).collect();
    let p50: Vec<f64> = ok.iter().filter_map(|r| r.m.p50_ms).collect();
    let p99: Vec<f64> = ok.iter().filter_map(|r| r.m.p99_ms).collect();
    let peak = all.iter().filter_map(|r| r.peak_rss).max();
    let errors: u64 = ok.iter().map(|r| r.m.errors).sum();
    let (lo, hi) = min_max(&per);
    let or_dash = |v: &[f64], f: &dyn Fn() -> String| {
        if v.is_empty() { "—".into() } else { f() }
    };
    [
        case.to_string(),
        server.to_string(),
        tool.to_string(),
        or_dash(&per, &|| si(median(&per))),
        or_dash(&per, &|| format!("{}–{}", si(lo), si(hi))),
        format!("{:.1}", median(&bytes) / 1e6),
        or_dash(&p50, &|| format!("{:.3}", median(&p50))),
        or_dash(&p99, &|| format!("{:.3}", median(&p99))),
        peak.map_or("—".into(), |v| format!("{:.1}", v as f64 / 1e6)),
        format!(
            "{}/{}{}",
            ok.len(),
            all.len(),
            if errors > 0 {
                format!(", {errors} failed requests")
            } else {
                String::new()
            }
        ),
    ]
}

fn memory(s: &Summary) -> Vec<Block> {
    let mem: Vec<&Row> = s.rows.iter().filter(|r| r.group == "memory").collect();
    if mem.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new(["server", "when", "RSS MB"]).left(2);
    for r in mem {
        t.row([
            r.server.clone(),
            r.case.clone(),
            format!("{:.1}", r.peak_rss.unwrap_or(0) as f64 / 1e6),
        ]);
    }
    vec![
        Block::h2("Memory (resident set of the server process)"),
        Block::Table(t),
        Block::text(
            "Peak RSS during each run is in the tables above (sampled every 50 ms over the server's process tree; nginx and Apache include their workers).",
        ),
    ]
}

fn skipped_and_failed(s: &Summary) -> Vec<Block> {
    let failed: Vec<&Row> = s.rows.iter().filter(|r| !r.ok()).collect();
    if s.skipped.is_empty() && failed.is_empty() {
        return Vec::new();
    }
    let skipped = s
        .skipped
        .iter()
        .map(|Skip { what, why }| format!("skipped {what}: {why}"));
    let failed = failed.into_iter().map(|r| {
        format!(
            "failed: repeat {} {} {} {} {}: {}",
            r.repeat,
            r.group,
            r.case,
            r.server,
            r.tool,
            r.error.as_deref().unwrap_or("")
        )
    });
    vec![
        Block::h2("Skipped and failed"),
        Block::List(skipped.chain(failed).collect()),
    ]
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

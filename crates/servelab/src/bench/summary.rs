//! The suite's files: one CSV line per measurement, the setup note, and `summary.md`
//! with medians, spreads and the ratios checked against their bars.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use lab::dataset::DatasetInfo;
use lab::environment::Environment;
use lab::tools::Measured;

use super::names::{self as suite, LOAD};
use super::options::BenchOptions;

/// Something the suite did not measure, and why.
#[derive(Debug, Clone)]
pub struct Skip {
    pub what: String,
    pub why: String,
}

impl Skip {
    pub fn new(what: impl Into<String>, why: impl std::fmt::Display) -> Skip {
        Skip {
            what: what.into(),
            why: why.to_string(),
        }
    }
}

/// How the cases of one bar fared.
#[derive(Debug, Clone, PartialEq)]
pub struct BarOverview {
    pub family: String,
    pub met: usize,
    pub cases: usize,
    pub lowest: f64,
    pub highest: f64,
    pub target: f64,
}

/// A memory limit and what was measured against it.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryCheck {
    pub what: String,
    pub measured: u64,
    pub limit: u64,
}

/// One measurement (one CSV line).
#[derive(Debug, Clone)]
pub struct Row {
    /// 1-based repeat; 0 for rows outside the repeats (idle memory).
    pub repeat: usize,
    pub group: String,
    pub case: String,
    pub server: String,
    pub tool: String,
    pub concurrency: usize,
    pub m: Measured,
    pub peak_rss: Option<u64>,
    pub error: Option<String>,
}

impl Row {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        repeat: usize,
        group: &str,
        case: &str,
        server: &str,
        tool: &str,
        concurrency: usize,
        result: anyhow::Result<Measured>,
        peak_rss: Option<u64>,
    ) -> Row {
        let (m, error) = match result {
            Ok(m) => (m, None),
            Err(e) => (Measured::default(), Some(crate::measure::error_text(&e))),
        };
        if let Some(e) = &error {
            eprintln!("servelab bench:   failed: {e}");
        }
        Row {
            repeat,
            group: group.into(),
            case: case.into(),
            server: server.into(),
            tool: tool.into(),
            concurrency,
            m,
            peak_rss,
            error,
        }
    }

    fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// The figure a case is judged by: bytes/s for large files and streams, operations
    /// per second otherwise.
    fn metric(&self) -> f64 {
        if is_bytes_case(&self.group, &self.case) {
            self.m.bytes_per_sec
        } else {
            self.m.per_sec
        }
    }
}

fn is_bytes_case(group: &str, case: &str) -> bool {
    group == "tcp"
        || case.starts_with("10MiB")
        || case.starts_with("seq read")
        || case.starts_with("boot set")
}

const CSV_HEADER: &str = "repeat,group,case,server,tool,concurrency,seconds,requests,errors,per_sec,bytes_per_sec,p50_ms,p99_ms,peak_rss_bytes,error";

/// All rows as CSV (RFC 4180 quoting where needed).
pub fn csv(rows: &[Row]) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_default();
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{:.3},{},{},{:.2},{:.0},{},{},{},{}",
            r.repeat,
            quote(&r.group),
            quote(&r.case),
            quote(&r.server),
            quote(&r.tool),
            r.concurrency,
            r.m.seconds,
            r.m.requests,
            r.m.errors,
            r.m.per_sec,
            r.m.bytes_per_sec,
            opt(r.m.p50_ms),
            opt(r.m.p99_ms),
            r.peak_rss.map(|v| v.to_string()).unwrap_or_default(),
            quote(r.error.as_deref().unwrap_or("")),
        );
    }
    out
}

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"").replace(['\n', '\r'], " "))
    } else {
        s.to_string()
    }
}

/// The setup note: machine, versions, cache state, load, settings, dataset.
pub fn setup_note(
    env: &Environment,
    opts: &BenchOptions,
    info: &DatasetInfo,
    load_before: &str,
    load_after: &str,
    took: Duration,
    notes: &[String],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Setup of this run\n");
    let _ = writeln!(
        s,
        "- Started: {} (took {:.0} s)",
        env.started_utc,
        took.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "- Host: {} — {} × {}",
        env.hostname, env.cores, env.cpu_model
    );
    let _ = writeln!(
        s,
        "- Memory: {:.1} GiB",
        env.memory_bytes as f64 / (1u64 << 30) as f64
    );
    let _ = writeln!(s, "- Kernel: {}; OS: {}", env.kernel, env.os);
    let _ = writeln!(
        s,
        "- Load average (1/5/15 min) before: {load_before}; after: {load_after} — the machine is shared; only ratios within this run mean anything"
    );
    let _ = writeln!(s, "- Cache state: {}", env.cache_state);
    let _ = writeln!(
        s,
        "- servelab {} ({} build); httpd and rustnfs run as `servelab httpd|rustnfs` child processes",
        env.servelab_version,
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        }
    );
    for (tool, version) in &env.tools {
        let _ = writeln!(s, "- {tool}: {version}");
    }
    let _ = writeln!(
        s,
        "- Settings: repeat {}, {} s per measurement (3× for 10 MiB at c = 100, so several rounds complete){}, groups {:?}",
        opts.repeat,
        opts.seconds,
        if opts.quick { ", --quick" } else { "" },
        opts.groups
    );
    let _ = writeln!(
        s,
        "- Dataset (seed {}): {} ({} bytes), {} ({} bytes), boot set: 12 files of 1–64 KiB + 4 of 10 MiB",
        info.seed.map_or("none".into(), |s| s.to_string()),
        info.large_file,
        info.large_bytes,
        info.small_file,
        info.small_bytes
    );
    let _ = writeln!(
        s,
        "- HTTP: wrk -t min(c, cores) -c C -d D --latency [-H 'Connection: close']; servelab load: the loadgen library, one thread per core, keep-alive = HTTP/1.1 reuse, close = HTTP/1.0 new connection per request (as ab)"
    );
    let _ = writeln!(
        s,
        "- NFS: servelab load nfs:// (nfsclient, one connection per client, 1 MiB READs, metadata = CREATE/GETATTR/REMOVE over 200 names); nfs-cat = libnfs, the 10 MiB file 5 times in a row per measurement, wall time including each mount"
    );
    let _ = writeln!(
        s,
        "- TCP: servelab load tcp:// (128 KiB writes) → servelab tcp-server; iperf3 -c → iperf3 -s (default 128 KiB)"
    );
    if !notes.is_empty() {
        let _ = writeln!(s, "\n## Notes\n");
        for n in notes {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

/// Median of a slice (sorted copy); 0 for an empty one.
fn median(v: &[f64]) -> f64 {
    crate::stats::median(&mut v.to_vec()).unwrap_or(0.0)
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(*x), b.max(*x))
        })
}

/// Successful metric values of one (group, case, server, tool), per repeat.
fn values(rows: &[Row], group: &str, case: &str, server: &str, tool: &str) -> BTreeMap<usize, f64> {
    rows.iter()
        .filter(|r| {
            r.ok() && r.group == group && r.case == case && r.server == server && r.tool == tool
        })
        .map(|r| (r.repeat, r.metric()))
        .collect()
}

/// A ratio the issue sets a bar for (or an informative one, `target: None`).
#[derive(Debug, Clone)]
pub struct Ratio {
    /// The bar this ratio belongs to, without case and tool (for the overview).
    pub family: String,
    pub what: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub target: Option<f64>,
}

impl Ratio {
    pub fn met(&self) -> Option<bool> {
        self.target.map(|t| self.median >= t)
    }
}

/// `a / b` per repeat (paired: both measured in the same repeat, next to each other).
#[allow(clippy::too_many_arguments)]
fn ratio(
    rows: &[Row],
    family: &str,
    what: String,
    group: &str,
    case: &str,
    a: (&str, &str),
    b: (&str, &str),
    target: Option<f64>,
) -> Option<Ratio> {
    let va = values(rows, group, case, a.0, a.1);
    let vb = values(rows, group, case, b.0, b.1);
    let pairs: Vec<f64> = va
        .iter()
        .filter_map(|(rep, x)| vb.get(rep).filter(|y| **y > 0.0).map(|y| x / y))
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let (min, max) = min_max(&pairs);
    Some(Ratio {
        family: family.to_string(),
        what,
        median: median(&pairs),
        min,
        max,
        target,
    })
}

/// Every ratio the bars name that this run can compute.
pub fn ratios(rows: &[Row]) -> Vec<Ratio> {
    let mut out = Vec::new();
    let cases: Vec<String> = unique(
        rows.iter()
            .filter(|r| r.group == "http")
            .map(|r| r.case.clone()),
    );
    for tool in [LOAD, suite::WRK] {
        for case in &cases {
            let large = case.starts_with("10MiB");
            let unit = if large { "bytes/s" } else { "req/s" };
            out.extend(ratio(
                rows,
                if large {
                    "httpd-local / nginx, 10 MiB, bytes/s"
                } else {
                    "httpd-local / nginx, 4 KiB, req/s"
                },
                format!("httpd-local / nginx, {case}, {unit} ({tool})"),
                "http",
                case,
                (suite::HTTPD_LOCAL, tool),
                (suite::NGINX, tool),
                Some(if large { 0.95 } else { 1.0 }),
            ));
            out.extend(ratio(
                rows,
                if large {
                    "httpd-nfs / httpd-local, 10 MiB, bytes/s"
                } else {
                    "httpd-nfs / httpd-local, 4 KiB, req/s"
                },
                format!("httpd-nfs / httpd-local, {case}, {unit} ({tool})"),
                "http",
                case,
                (suite::HTTPD_NFS, tool),
                (suite::HTTPD_LOCAL, tool),
                Some(0.85),
            ));
            out.extend(ratio(
                rows,
                "httpd-local / apache",
                format!("httpd-local / apache, {case}, {unit} ({tool})"),
                "http",
                case,
                (suite::HTTPD_LOCAL, tool),
                (suite::APACHE, tool),
                None,
            ));
        }
    }
    let nfs_cases: Vec<String> = unique(
        rows.iter()
            .filter(|r| r.group == "nfs")
            .map(|r| r.case.clone()),
    );
    for case in &nfs_cases {
        for tool in [LOAD, suite::NFS_CAT] {
            let unit = if is_bytes_case("nfs", case) {
                "bytes/s"
            } else {
                "ops/s"
            };
            out.extend(ratio(
                rows,
                &format!("rustnfs / ganesha, {}", family_of_nfs(case)),
                format!("rustnfs / ganesha, {case}, {unit} ({tool})"),
                "nfs",
                case,
                (suite::RUSTNFS, tool),
                (suite::GANESHA, tool),
                Some(1.0),
            ));
        }
    }
    let lg_cases: Vec<String> = unique(
        rows.iter()
            .filter(|r| r.group == "loadgen")
            .map(|r| r.case.clone()),
    );
    for case in &lg_cases {
        out.extend(ratio(
            rows,
            "servelab load / wrk on nginx, 4 KiB, req/s",
            format!("servelab load / wrk, {case}, req/s"),
            "loadgen",
            case,
            (suite::NGINX, LOAD),
            (suite::NGINX, suite::WRK),
            Some(1.0),
        ));
        out.extend(ratio(
            rows,
            "servelab load / ab on nginx, 4 KiB, req/s",
            format!("servelab load / ab, {case}, req/s"),
            "loadgen",
            case,
            (suite::NGINX, LOAD),
            (suite::NGINX, suite::AB),
            None,
        ));
    }
    out.extend(ratio(
        rows,
        "servelab load tcp:// / iperf3, bytes/s",
        "servelab load tcp:// / iperf3, 1 stream, bytes/s".into(),
        "tcp",
        "loopback 1 stream",
        ("servelab tcp-server", LOAD),
        ("iperf3 -s", suite::IPERF3),
        Some(0.95),
    ));
    out
}

/// `seq read 10MiB c=16` → `seq read 10MiB c=16, bytes/s`: NFS cases are their own bars.
fn family_of_nfs(case: &str) -> String {
    let unit = if is_bytes_case("nfs", case) {
        "bytes/s"
    } else {
        "ops/s"
    };
    format!("{case}, {unit}")
}

/// One line per bar: how many of its cases (sizes × keep-alive × c × tool) met it, and
/// the lowest and highest median ratio among them.
pub fn overview(ratios: &[Ratio]) -> Vec<BarOverview> {
    let mut out: Vec<BarOverview> = Vec::new();
    for r in ratios {
        let Some(target) = r.target else { continue };
        let met = usize::from(r.met() == Some(true));
        match out.iter_mut().find(|o| o.family == r.family) {
            Some(o) => {
                o.met += met;
                o.cases += 1;
                o.lowest = o.lowest.min(r.median);
                o.highest = o.highest.max(r.median);
            }
            None => out.push(BarOverview {
                family: r.family.clone(),
                met,
                cases: 1,
                lowest: r.median,
                highest: r.median,
                target,
            }),
        }
    }
    out
}

/// Memory limits: (what, measured bytes, limit bytes).
pub fn memory_checks(rows: &[Row]) -> Vec<MemoryCheck> {
    let mib = 1u64 << 20;
    let mb = 1_000_000u64;
    let mut out = Vec::new();
    if let Some(v) = rows
        .iter()
        .filter(|r| r.group == "memory" && r.server == suite::RUSTNFS && r.case == "idle at start")
        .filter_map(|r| r.peak_rss)
        .max()
    {
        out.push(MemoryCheck {
            what: "rustnfs idle RSS".into(),
            measured: v,
            limit: 10 * mb,
        });
    }
    let peak = |group: &str, server: &str, c: usize| {
        rows.iter()
            .filter(|r| r.group == group && r.server == server && r.concurrency == c)
            .filter_map(|r| r.peak_rss)
            .max()
    };
    if let Some(v) = peak("nfs", suite::RUSTNFS, 16) {
        out.push(MemoryCheck {
            what: "rustnfs peak RSS with 16 clients".into(),
            measured: v,
            limit: 64 * mb,
        });
    }
    for s in [suite::HTTPD_LOCAL, suite::HTTPD_NFS] {
        if let Some(v) = peak("http", s, 100) {
            out.push(MemoryCheck {
                what: format!("{s} peak RSS at c = 100"),
                measured: v,
                limit: 32 * mb,
            });
        }
    }
    let _ = mib;
    out
}

fn unique(it: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for s in it {
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v
}

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

//! From rows to verdicts: per-repeat ratios of our servers and tools against their
//! peers, how each bar fared over its cases, and the memory limits checked.

use std::collections::BTreeMap;

use super::names::{self as suite, LOAD};
use super::record::{Row, is_bytes_case};

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

/// Median of a slice (sorted copy); 0 for an empty one.
pub fn median(v: &[f64]) -> f64 {
    crate::stats::median(&mut v.to_vec()).unwrap_or(0.0)
}

pub fn min_max(v: &[f64]) -> (f64, f64) {
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
        for tool in [LOAD, suite::LOAD_NFS4, suite::NFS_CAT] {
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

/// The distinct values in first-seen order.
pub fn unique(it: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for s in it {
        if !v.contains(&s) {
            v.push(s);
        }
    }
    v
}

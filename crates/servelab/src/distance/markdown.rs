//! The report's distance section: what was run, how long it took, one row per point
//! (A's p50 and p99 at the offered load against B's, CPU per request against B's) and
//! the sentences the answer also gives.

use super::model::{Distance, DistancePoint};
use super::sentences;
use super::sentences::size_text;
use crate::compare::model::Report;
use crate::doc::Block;
use crate::stats::Comparison;
use crate::table::Table;

/// The heading the plot sits under.
pub const HEADING: &str = "How the price of NFS grows with distance";

/// `+1.23 (+1.00 to +1.50)` or `—`.
fn cell(c: &Option<Comparison>, ratio: bool) -> String {
    match c {
        Some(c) if ratio => format!("{:.2} × ({:.2}–{:.2})", c.estimate, c.ci.low, c.ci.high),
        Some(c) => format!("{:+.2} ({:+.2} to {:+.2})", c.estimate, c.ci.low, c.ci.high),
        None => "—".into(),
    }
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or("—".into(), |v| format!("{v:.decimals$}"))
}

/// Runs whose latency counts, runs on a busy machine (CPU only), failed requests.
fn runs_cell(r: &super::model::Runs) -> String {
    format!(
        "{} quiet, {} busy, {} failed",
        r.p50_ms.len(),
        r.busy_runs,
        r.failed
    )
}

fn point_row(p: &DistancePoint) -> [String; 9] {
    [
        p.spec.label(),
        p.path.split(':').next().unwrap_or("").to_string(),
        opt(p.runs.p50(), 2),
        cell(&p.p50_minus_b_ms, false),
        opt(p.runs.p99(), 2),
        cell(&p.p99_minus_b_ms, false),
        opt(p.runs.cpu(), 3),
        cell(&p.cpu_over_b, true),
        runs_cell(&p.runs),
    ]
}

fn table(d: &Distance) -> Table {
    let mut t = Table::new([
        "Point",
        "Link path",
        "p50 ms",
        "Δ p50 vs B ms (interval)",
        "p99 ms",
        "Δ p99 vs B ms (interval)",
        "CPU ms/request",
        "× B CPU (interval)",
        "Runs",
    ])
    .left(2);
    t.row([
        "B (local disk)".to_string(),
        "—".into(),
        opt(d.b.p50(), 2),
        "—".into(),
        opt(d.b.p99(), 2),
        "—".into(),
        opt(d.b.cpu(), 3),
        "—".into(),
        runs_cell(&d.b),
    ]);
    for p in &d.points {
        t.row(point_row(p));
    }
    t
}

/// The section, when the run measured distance.
pub fn section(report: &Report) -> Vec<Block> {
    let Some(d) = &report.distance else {
        return Vec::new();
    };
    let what = if d.sweep {
        "the sweep (`--distance`)"
    } else {
        "one point (a typical LAN; `--distance` runs the sweep of 0, 0.1, 0.5 and 2 ms at 1 and 10 Gbit/s)"
    };
    let mut out = vec![
        Block::h2(HEADING),
        Block::text(format!(
            "Scenario A with its NFS hop across the emulated link, {what}: httpd on the host, \
             rustnfs behind a veth pair limited by `tc tbf`, the round trip added by the relay \
             (half each way; the relay runs in servelab's process, so the emulated wire's own CPU \
             is not counted as the stack's). Every point and B were offered {:.1} req/s of the {} file open-loop \
             ({:.0} % of the lowest of A's and B's capacities and of what the slowest link carries), \
             {:.1} s per run, {} rounds in rotating order; medians, bootstrap intervals against B; \
             CPU per request from every run, latency only from runs on a quiet machine (other \
             work under 20 % of the CPU time) unless `--keep-busy`. The phase took {:.0} s.",
            d.offered_per_sec,
            size_text(d.file_bytes),
            super::model::LOAD_SHARE * 100.0,
            d.seconds_each,
            d.rounds,
            d.elapsed_s
        )),
        Block::Table(table(d)),
        Block::List(sentences(d)),
    ];
    if !d.failures.is_empty() {
        out.push(Block::text("Points that did not run:"));
        out.push(Block::List(d.failures.clone()));
    }
    out
}

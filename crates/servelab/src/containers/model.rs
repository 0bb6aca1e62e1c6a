//! The container comparison's results as data: what `containers.json` holds and every
//! renderer reads — the rows of the original tables with their runs, sysbench, memory,
//! the sweeps, the file-system table, and the computed answer.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::stats::Comparison;

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Point {
    pub requests_per_sec: f64,
    pub mbytes_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Requests served in the run.
    #[serde(default)]
    pub requests: u64,
    /// CPU of the whole serving stack (httpd's place and the rustnfs container behind
    /// A) per request, when its processes or cgroups could be sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ms_per_request: Option<f64>,
    /// The machine was busy: other processes used more than
    /// `lab::affinity::OTHER_WORK_BUSY` of the CPU time during the run (without the
    /// stack's CPU figure: the load was above one per core before or after it).
    #[serde(default)]
    pub busy: bool,
    /// The share (0–1) of all CPU time that went to processes other than this one and
    /// the serving stack during the run, when the stack's CPU was known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_work: Option<f64>,
}

impl Point {
    /// A point at `rps` requests/s (MB/s a tenth of it, p50 1 ms, p99 2 ms), for tests.
    #[cfg(test)]
    pub fn at_rate(rps: f64) -> Point {
        Point {
            requests_per_sec: rps,
            mbytes_per_sec: rps / 10.0,
            p50_ms: 1.0,
            p99_ms: 2.0,
            ..Point::default()
        }
    }

    /// The per-field median of several runs.
    pub fn median(runs: &[Point]) -> Option<Point> {
        let field = |f: fn(&Point) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            crate::stats::median(&mut v)
        };
        Some(Point {
            requests_per_sec: field(|p| p.requests_per_sec)?,
            mbytes_per_sec: field(|p| p.mbytes_per_sec)?,
            p50_ms: field(|p| p.p50_ms)?,
            p99_ms: field(|p| p.p99_ms)?,
            requests: field(|p| p.requests as f64)?.round() as u64,
            cpu_ms_per_request: {
                let mut v: Vec<f64> = runs.iter().filter_map(|p| p.cpu_ms_per_request).collect();
                crate::stats::median(&mut v)
            },
            busy: runs.iter().any(|p| p.busy),
            other_work: {
                let mut v: Vec<f64> = runs.iter().filter_map(|p| p.other_work).collect();
                crate::stats::median(&mut v)
            },
        })
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Row {
    pub workload: String,
    pub scenario: String,
    pub place: String,
    pub runs: usize,
    pub median: Point,
    /// Every run, in the order run (the intervals are computed from these).
    pub points: Vec<Point>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct SysbenchRow {
    pub test: String,
    pub unit: String,
    pub place: String,
    pub runs: usize,
    pub median: f64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct MemoryRow {
    pub place: String,
    pub what: String,
    pub current: u64,
    pub peak: Option<u64>,
    pub source: String,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ScaleRow {
    pub scenario: String,
    pub place: String,
    pub cpus: Option<u32>,
    pub clients: usize,
    pub median: Point,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct WorkersRow {
    pub scenario: String,
    pub workers: u64,
    pub clients: usize,
    pub median: Point,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct FsRow {
    pub workload: String,
    pub place: String,
    pub runs: usize,
    pub ops_per_sec: f64,
    pub mbytes_per_sec: f64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ContainerReport {
    pub settings: String,
    pub large_file: String,
    pub small_file: String,
    pub loadavg_before: String,
    pub loadavg_after: String,
    pub rows: Vec<Row>,
    pub sysbench: Vec<SysbenchRow>,
    pub memory: Vec<MemoryRow>,
    pub scaling: Vec<ScaleRow>,
    pub workers: Vec<WorkersRow>,
    pub fs: Vec<FsRow>,
    pub notes: Vec<String>,
    pub skipped: Vec<String>,
    pub failures: Vec<String>,
    /// The computed answer: A vs B in each place, each container vs the host.
    pub answer: ContainerAnswer,
}

/// One comparison of two cells of the table.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellComparison {
    pub workload: String,
    /// `A vs B in LXD`, `LXD vs host (B)`, …
    pub what: String,
    /// Their req/s, a/b.
    pub requests_per_sec: Option<Comparison>,
    /// CPU per request of each whole serving stack, a/b.
    pub cpu_per_request: Option<Comparison>,
    /// p50 a − p50 b, ms.
    pub p50_ms: Option<Comparison>,
    /// Why the figure is not believable, when it is not.
    pub flag: Option<String>,
}

/// The answer section's data.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ContainerAnswer {
    pub sentences: Vec<String>,
    pub comparisons: Vec<CellComparison>,
    pub excluded_busy_runs: usize,
    /// Runs in the tables, busy or not.
    #[serde(default)]
    pub total_runs: usize,
    /// The other work's share of the CPU time in the runs where it was measured: the
    /// lowest, the median and the highest (0–1).
    #[serde(default)]
    pub other_work: Option<[f64; 3]>,
}

impl ContainerReport {
    /// The report in `dir`'s containers.json, when there is one that reads.
    pub fn read(dir: &Path) -> Option<ContainerReport> {
        let text = std::fs::read_to_string(dir.join("containers.json")).ok()?;
        serde_json::from_str(&text).ok()
    }
}

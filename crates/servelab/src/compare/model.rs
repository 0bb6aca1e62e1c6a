//! The comparison's results as data: what `report.json` holds and every renderer reads.
//!
//! Schema: `crates/servelab/report-schema.json` (checked by a test). Times are in
//! milliseconds, rates in units per second, sizes in bytes.

use serde::{Deserialize, Serialize};

use super::dataset::DatasetInfo;
use super::environment::Environment;

/// Bumped when a field changes meaning or goes away.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub environment: Environment,
    pub dataset: DatasetInfo,
    pub settings: Settings,
    /// One row per HTTP workload × scenario.
    pub http: Vec<HttpRow>,
    /// One row per NFS workload × NFS server.
    pub nfs: Vec<NfsRow>,
    /// Raw TCP throughput on each path (the ceiling).
    pub tcp: Vec<TcpRow>,
    /// Server-side time per phase, per HTTP scenario and workload.
    pub server_phases: Vec<PhaseRow>,
    /// Server-side NFS procedure latencies (rustnfs), per workload.
    pub nfs_procedures: Vec<ProcedureRow>,
    /// Whether every scenario served the same bytes as scenario B.
    pub byte_checks: Vec<ByteCheck>,
    /// Scenarios that did not run, and why.
    pub skipped: Vec<Skipped>,
    /// Scenarios that started but failed; the others still ran.
    pub failures: Vec<Failure>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    pub repeat: usize,
    pub large_requests: u64,
    pub large_concurrency: usize,
    pub small_concurrency: usize,
    pub small_seconds: f64,
    pub nfs_clients: usize,
    pub nfs_seconds: f64,
    pub warmup: bool,
    pub cold: bool,
    pub link: Option<String>,
    pub baselines: String,
    /// How long httpd's NFS backend reuses handles, attributes and small files (ms).
    #[serde(default = "default_nfs_cache_ms")]
    pub nfs_cache_ms: u64,
}

fn default_nfs_cache_ms() -> u64 {
    1000
}

/// Figures of one measured run (one repetition).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HttpRun {
    pub requests: u64,
    pub failed: u64,
    pub non_2xx: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub requests_per_sec: f64,
    pub transfer_bytes_per_sec: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HttpRow {
    /// `large` (the original `-n 100 -c 10` on the 10 MiB file) or `small`.
    pub workload: String,
    /// `B (local)`, `A (NFS: rustnfs)`, `nginx`, …
    pub scenario: String,
    pub description: String,
    pub runs: Vec<HttpRun>,
    /// Field-by-field median of `runs`.
    pub median: HttpRun,
    /// Lowest and highest requests/s over the runs.
    pub rps_min: f64,
    pub rps_max: f64,
    /// Latency curve of all runs merged: (percentile 0–100, ms).
    pub percentiles: Vec<(f64, f64)>,
    /// Peak resident memory of the server process(es) during the runs, when known.
    pub server_peak_rss_bytes: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NfsRow {
    /// `read` (sequential READ of the large file) or `metadata` (create/getattr/remove).
    pub workload: String,
    pub server: String,
    pub clients: usize,
    pub ops_per_sec: f64,
    pub ops_min: f64,
    pub ops_max: f64,
    pub bytes_per_sec: f64,
    pub mean_ms: f64,
    pub p99_ms: f64,
    pub failed: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TcpRow {
    pub path: String,
    pub streams: usize,
    pub bits_per_sec: f64,
    pub bits_min: f64,
    pub bits_max: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseRow {
    pub scenario: String,
    pub workload: String,
    pub phase: String,
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcedureRow {
    pub workload: String,
    pub procedure: String,
    pub count: u64,
    pub mean_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ByteCheck {
    pub scenario: String,
    pub file: String,
    pub identical_to_b: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Skipped {
    pub scenario: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Failure {
    pub scenario: String,
    pub workload: String,
    pub error: String,
}

/// Median of a list (mean of the middle two when even); 0 for an empty list.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

impl HttpRun {
    /// Field-by-field median of several runs.
    pub fn median_of(runs: &[HttpRun]) -> HttpRun {
        let m = |f: fn(&HttpRun) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
        HttpRun {
            requests: m(|r| r.requests as f64).round() as u64,
            failed: m(|r| r.failed as f64).round() as u64,
            non_2xx: m(|r| r.non_2xx as f64).round() as u64,
            bytes: m(|r| r.bytes as f64).round() as u64,
            seconds: m(|r| r.seconds),
            requests_per_sec: m(|r| r.requests_per_sec),
            transfer_bytes_per_sec: m(|r| r.transfer_bytes_per_sec),
            mean_ms: m(|r| r.mean_ms),
            p50_ms: m(|r| r.p50_ms),
            p99_ms: m(|r| r.p99_ms),
            max_ms: m(|r| r.max_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&mut []), 0.0);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        let runs = [
            HttpRun {
                requests_per_sec: 10.0,
                failed: 0,
                ..Default::default()
            },
            HttpRun {
                requests_per_sec: 30.0,
                failed: 2,
                ..Default::default()
            },
            HttpRun {
                requests_per_sec: 20.0,
                failed: 0,
                ..Default::default()
            },
        ];
        let m = HttpRun::median_of(&runs);
        assert_eq!(m.requests_per_sec, 20.0);
        assert_eq!(m.failed, 0);
    }
}

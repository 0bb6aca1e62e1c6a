//! From raw runs to the report's rows: one function per row type, no I/O. The run
//! collects [`HttpRuns`] per (workload, scenario) and load-generator reports per NFS
//! target; these turn them into medians, spreads, curves and per-phase tables.

use std::collections::BTreeMap;

use lab::tools::Measured;
use latency::{Series, Snapshot};

use super::crosscheck::{self, Reference};
use super::model::*;

/// What one (workload, scenario) pair gathered over the repeats.
#[derive(Default)]
pub struct HttpRuns {
    pub runs: Vec<HttpRun>,
    /// Each run's latency curve (`PERCENTILES`), for the median curve.
    pub curves: Vec<Vec<(f64, f64)>>,
    /// The server's own phase timings (ours only), merged over the runs.
    pub phases: Snapshot,
    /// The reference client's runs (`ab` / `wrk`) in the same slots.
    pub reference: Vec<Measured>,
}

impl HttpRuns {
    /// Adds one successful run of our load generator.
    pub fn push(
        &mut self,
        r: &loadgen::Report,
        cost: Cost,
        noise: RunNoise,
        client: Option<ClientLoad>,
    ) {
        let mut run = http_run(r);
        run.cost = Some(cost);
        run.noise = Some(noise);
        run.client = client;
        self.runs.push(run);
        if let Some(total) = r.total() {
            self.curves.push(percentile_curve(&total));
        }
    }
}

/// The row of one (workload, scenario) pair and its server-phase rows; `None` when no
/// run succeeded. Runs taken on a busy machine count for its cost, not for its
/// throughput and latency unless `keep_busy`.
pub fn http_row(
    workload: &str,
    scenario: &str,
    description: &str,
    reference: Option<&Reference>,
    a: HttpRuns,
    keep_busy: bool,
) -> Option<(HttpRow, Vec<PhaseRow>)> {
    if a.runs.is_empty() {
        return None;
    }
    // Throughput and latency from the quiet runs (neighbours distort them), from every
    // run when none was quiet (the table says so); the cost from every run, whose own
    // CPU counters neighbours do not add to.
    let quiet: Vec<HttpRun> = a
        .runs
        .iter()
        .filter(|r| keep_busy || !r.noise.is_some_and(|n| n.busy))
        .cloned()
        .collect();
    let basis = if quiet.is_empty() { &a.runs } else { &quiet };
    let rps: Vec<f64> = basis.iter().map(|r| r.requests_per_sec).collect();
    let mut median_run = HttpRun::median_of(basis);
    median_run.cost = Cost::median_of(a.runs.iter().filter_map(|r| r.cost.as_ref()));
    let reference = reference.filter(|_| !a.reference.is_empty()).map(|r| {
        let busy = a
            .runs
            .iter()
            .filter(|x| x.noise.is_some_and(|n| n.busy))
            .count();
        crosscheck::summarise(r, &a.reference, median_run.requests_per_sec, busy)
    });
    let phases = ["meta", "read", "send", "total"]
        .into_iter()
        .filter_map(|phase| {
            combine_phase(&a.phases, phase).map(|s| PhaseRow {
                scenario: scenario.into(),
                workload: workload.into(),
                phase: phase.into(),
                count: s.count(),
                mean_ms: s.mean_seconds() * 1e3,
                p50_ms: s.quantile_seconds(0.5) * 1e3,
                p99_ms: s.quantile_seconds(0.99) * 1e3,
            })
        })
        .collect();
    let bound = a
        .runs
        .iter()
        .filter(|r| r.client.is_some_and(|c| c.client_bound))
        .count();
    let row = HttpRow {
        client_bound: bound * 2 > a.runs.len(),
        workload: workload.into(),
        scenario: scenario.into(),
        description: description.into(),
        rps_min: rps.iter().copied().fold(f64::INFINITY, f64::min),
        rps_max: rps.iter().copied().fold(0.0, f64::max),
        percentiles: median_curve(&a.curves),
        server_peak_rss_bytes: a
            .runs
            .iter()
            .filter_map(|r| r.cost.as_ref().map(|c| c.peak_rss_bytes))
            .max(),
        cost: median_run.cost.clone(),
        median: median_run,
        reference,
        runs: a.runs,
    };
    Some((row, phases))
}

/// One NFS workload on one server over the repeats (`runs` is not empty).
pub fn nfs_row(workload: &str, server: &str, clients: usize, runs: &[loadgen::Report]) -> NfsRow {
    let ops: Vec<f64> = runs.iter().map(|r| r.requests_per_sec()).collect();
    let mut merged = runs[0].clone();
    for r in &runs[1..] {
        let _ = merged.merge(r);
    }
    let total = merged.total();
    NfsRow {
        workload: workload.into(),
        server: server.into(),
        clients,
        ops_per_sec: median(&mut ops.clone()),
        ops_min: ops.iter().copied().fold(f64::INFINITY, f64::min),
        ops_max: ops.iter().copied().fold(0.0, f64::max),
        bytes_per_sec: median(&mut runs.iter().map(|r| r.bytes_per_sec()).collect::<Vec<_>>()),
        mean_ms: total.as_ref().map_or(0.0, |s| s.mean_seconds() * 1e3),
        p99_ms: total
            .as_ref()
            .map_or(0.0, |s| s.quantile_seconds(0.99) * 1e3),
        failed: runs.iter().map(|r| r.failed()).sum(),
    }
}

/// Per NFS procedure (all statuses merged, non-`ok` counted as errors), for every
/// workload label rustnfs recorded.
pub fn procedure_rows(nfs_phases: &BTreeMap<String, Snapshot>) -> Vec<ProcedureRow> {
    let mut rows = Vec::new();
    for (workload, snap) in nfs_phases {
        let mut procs: BTreeMap<&str, (Series, u64)> = BTreeMap::new();
        for (k, s) in &snap.series {
            if k.phase != "total" {
                continue;
            }
            let e = procs
                .entry(k.op.as_str())
                .or_insert_with(|| (Series::new(), 0));
            let _ = e.0.merge(s);
            if k.status != "ok" {
                e.1 += s.count();
            }
        }
        for (procedure, (s, errors)) in procs {
            rows.push(ProcedureRow {
                workload: workload.clone(),
                procedure: procedure.into(),
                count: s.count(),
                mean_ms: s.mean_seconds() * 1e3,
                p99_ms: s.quantile_seconds(0.99) * 1e3,
                errors,
            });
        }
    }
    rows
}

/// One TCP path over the repeats (`bits` is not empty).
pub fn tcp_row(path: &str, mut bits: Vec<f64>, expected_bits_per_sec: Option<f64>) -> TcpRow {
    TcpRow {
        path: path.into(),
        streams: 1,
        bits_min: bits.iter().copied().fold(f64::INFINITY, f64::min),
        bits_max: bits.iter().copied().fold(0.0, f64::max),
        bits_per_sec: median(&mut bits),
        expected_bits_per_sec,
    }
}

fn http_run(r: &loadgen::Report) -> HttpRun {
    let total = r.total().unwrap_or_default();
    HttpRun {
        requests: r.requests,
        failed: r.failed(),
        non_2xx: r.non_2xx,
        bytes: r.body_bytes,
        seconds: r.duration.as_secs_f64(),
        requests_per_sec: r.requests_per_sec(),
        transfer_bytes_per_sec: r.bytes_per_sec(),
        mean_ms: total.mean_seconds() * 1e3,
        p50_ms: total.quantile_seconds(0.5) * 1e3,
        p99_ms: total.quantile_seconds(0.99) * 1e3,
        max_ms: total.quantile_seconds(1.0) * 1e3,
        noise: None,
        cost: None,
        client: None,
    }
}

const PERCENTILES: [f64; 8] = [50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 99.99, 100.0];

fn percentile_curve(s: &Series) -> Vec<(f64, f64)> {
    PERCENTILES
        .iter()
        .map(|p| (*p, s.quantile_seconds(p / 100.0) * 1e3))
        .collect()
}

/// Point by point, the median over the runs' curves — the statistic the tables show.
fn median_curve(curves: &[Vec<(f64, f64)>]) -> Vec<(f64, f64)> {
    if curves.is_empty() {
        return Vec::new();
    }
    PERCENTILES
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut v: Vec<f64> = curves
                .iter()
                .filter_map(|c| c.get(i).map(|x| x.1))
                .collect();
            (*p, median(&mut v))
        })
        .collect()
}

/// Every series of one phase (all routes and statuses) merged.
fn combine_phase(snapshot: &Snapshot, phase: &str) -> Option<Series> {
    let mut out: Option<Series> = None;
    for (k, s) in &snapshot.series {
        if k.phase == phase {
            match &mut out {
                Some(acc) => {
                    let _ = acc.merge(s);
                }
                None => out = Some(s.clone()),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Throughput from the quiet runs, cost from every run; a row of busy runs only is
    /// marked.
    #[test]
    fn busy_runs_count_for_the_cost_not_the_throughput() {
        let run = |rps: f64, cpu_us: f64, busy: bool| HttpRun {
            requests_per_sec: rps,
            cost: Some(Cost {
                cpu_us_per_request: cpu_us,
                ..Default::default()
            }),
            noise: Some(RunNoise {
                busy,
                ..Default::default()
            }),
            ..Default::default()
        };
        let runs = |v: Vec<HttpRun>| HttpRuns {
            runs: v,
            ..Default::default()
        };
        let mixed = vec![
            run(100.0, 10.0, false),
            run(10.0, 30.0, true),
            run(110.0, 20.0, false),
        ];
        let (row, _) =
            http_row("large", "B (local)", "", None, runs(mixed.clone()), false).unwrap();
        assert_eq!(row.median.requests_per_sec, 105.0);
        assert_eq!((row.rps_min, row.rps_max), (100.0, 110.0));
        assert_eq!(row.cost.as_ref().unwrap().cpu_us_per_request, 20.0);
        assert!(!row.busy_only(false));
        let (kept, _) = http_row("large", "B (local)", "", None, runs(mixed), true).unwrap();
        assert_eq!(kept.median.requests_per_sec, 100.0);
        let busy = vec![run(10.0, 30.0, true), run(20.0, 30.0, true)];
        let (row, _) = http_row("large", "B (local)", "", None, runs(busy), false).unwrap();
        assert!(row.busy_only(false) && !row.busy_only(true));
        assert_eq!(row.median.requests_per_sec, 15.0);
    }

    #[test]
    fn curves_are_medians_of_runs() {
        let c = |v: f64| PERCENTILES.iter().map(|p| (*p, v * p)).collect::<Vec<_>>();
        let m = median_curve(&[c(1.0), c(3.0), c(2.0)]);
        assert_eq!(m[0], (50.0, 100.0));
        assert!(median_curve(&[]).is_empty());
    }
}

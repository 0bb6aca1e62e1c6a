//! The plots of a [`Report`], drawn with [`crate::chart`]: throughput bars with their
//! spread, latency against percentile (log scale, every plotted percentile labelled) and
//! server memory over the median run; each names the `report.md` section whose table it
//! draws, so report.html can put it beside that table.

use super::markdown::http_heading;
use super::model::{EqualLoadRow, Report};
use crate::chart::{Axis, Bar, BarChart, BarPanel, LineChart, Point, Series};
use crate::html::Figure;

/// The headings (after `## `) of the answer's tables, which their plots sit under.
const SERVICE_DEMAND_HEADING: &str = "Service demand: CPU per request of every serving process";
const EQUAL_LOAD_HEADING: &str = "Latency at equal offered load";

/// Every plot of the report, with the section it belongs beside.
pub fn figures(report: &Report) -> Vec<Figure> {
    let mut out = Vec::new();
    for workload in workloads(report) {
        if let Some(chart) = service_demand_bars(report, workload) {
            out.push(Figure {
                file: format!("service-demand-{workload}.svg"),
                heading: SERVICE_DEMAND_HEADING.into(),
                svg: chart.to_svg(),
            });
        }
        if let Some(chart) = equal_load_latency(report, workload) {
            out.push(Figure {
                file: format!("equal-load-{workload}.svg"),
                heading: EQUAL_LOAD_HEADING.into(),
                svg: chart.to_svg(),
            });
        }
    }
    out.extend(crate::distance::plots::figures(report));
    for workload in workloads(report) {
        let heading = http_heading(report, workload);
        if report.http.iter().any(|r| r.workload == workload) {
            out.push(Figure {
                file: format!("throughput-{workload}.svg"),
                heading: heading.clone(),
                svg: throughput_bars(report, workload).to_svg(),
            });
        }
        if report
            .http
            .iter()
            .any(|r| r.workload == workload && !r.percentiles.is_empty())
        {
            out.push(Figure {
                file: format!("latency-{workload}.svg"),
                heading: heading.clone(),
                svg: latency_percentiles(report, workload).to_svg(),
            });
        }
        if report.http.iter().any(|r| {
            r.workload == workload && r.cost.as_ref().is_some_and(|c| c.rss_over_time.len() > 1)
        }) {
            out.push(Figure {
                file: format!("memory-{workload}.svg"),
                heading,
                svg: memory_over_time(report, workload).to_svg(),
            });
        }
    }
    out
}

fn workloads(report: &Report) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for r in &report.http {
        if !out.contains(&r.workload.as_str()) {
            out.push(&r.workload);
        }
    }
    out
}

/// Requests per second per scenario: the median bar, the lowest–highest whisker, B's
/// value as the reference line.
fn throughput_bars(report: &Report, workload: &str) -> BarChart {
    // A row with no quiet run is in the table, marked; its busy throughput is not drawn.
    let rows: Vec<_> = report
        .http
        .iter()
        .filter(|r| r.workload == workload && !r.busy_only(report.settings.keep_busy))
        .collect();
    let reference = rows
        .iter()
        .find(|r| r.scenario == super::model::REFERENCE_SCENARIO)
        .map(|r| (r.median.requests_per_sec, "B (local)".to_string()));
    BarChart {
        title: format!("Requests per second — {workload} workload"),
        subtitle: Some(format!(
            "median of {} runs; whiskers: lowest–highest run; dashed line: B",
            report.settings.repeat
        )),
        value_axis: Axis::linear("requests per second"),
        unit: "req/s".into(),
        whisker: "spread".into(),
        panels: vec![BarPanel {
            title: http_heading(report, workload).replace('`', ""),
            bars: rows
                .iter()
                .enumerate()
                .map(|(i, r)| Bar {
                    label: r.scenario.clone(),
                    value: r.median.requests_per_sec,
                    spread: Some((r.rps_min, r.rps_max)),
                    color: i,
                })
                .collect(),
            reference,
        }],
    }
}

/// Service demand (CPU per request of every serving process) per scenario, median with
/// the lowest–highest run, B as the reference line: the figure the answer is about.
fn service_demand_bars(report: &Report, workload: &str) -> Option<BarChart> {
    let rows: Vec<_> = report
        .answer
        .service_demand
        .iter()
        .filter(|d| d.workload == workload)
        .collect();
    if rows.is_empty() {
        return None;
    }
    let reference = rows
        .iter()
        .find(|d| d.scenario == super::model::REFERENCE_SCENARIO)
        .map(|d| (d.cpu_ms_per_request, "B (local)".to_string()));
    Some(BarChart {
        title: format!("CPU per request of every serving process — {workload} workload"),
        subtitle: Some(
            "median of the runs used; whiskers: lowest–highest run; dashed line: B".into(),
        ),
        value_axis: Axis::linear("CPU time per request (ms), all serving processes"),
        unit: "ms".into(),
        whisker: "spread".into(),
        panels: vec![BarPanel {
            title: http_heading(report, workload).replace('`', ""),
            bars: rows
                .iter()
                .enumerate()
                .map(|(i, d)| Bar {
                    label: format!(
                        "{}{}",
                        d.scenario,
                        if d.client_bound {
                            " (client-bound)"
                        } else {
                            ""
                        }
                    ),
                    value: d.cpu_ms_per_request,
                    spread: Some((d.cpu_ms_min, d.cpu_ms_max)),
                    color: i,
                })
                .collect(),
            reference,
        }],
    })
}

/// p50 and p99 against the offered rate, A and B side by side at the same rates.
fn equal_load_latency(report: &Report, workload: &str) -> Option<LineChart> {
    let rows: Vec<_> = report
        .equal_load
        .iter()
        // A point with no quiet run has no figures: the table says so, the plot leaves
        // it out rather than drawing 0 on the axis floor.
        .filter(|r| r.workload == workload && !r.runs_p50_ms.is_empty())
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut scenarios: Vec<&str> = Vec::new();
    for r in &rows {
        if !scenarios.contains(&r.scenario.as_str()) {
            scenarios.push(&r.scenario);
        }
    }
    let mut series = Vec::new();
    for (label, pick, runs) in [
        (
            "p50",
            (|r: &EqualLoadRow| r.p50_ms) as fn(&EqualLoadRow) -> f64,
            (|r: &EqualLoadRow| r.runs_p50_ms.clone()) as fn(&EqualLoadRow) -> Vec<f64>,
        ),
        (
            "p99",
            |r: &EqualLoadRow| r.p99_ms,
            |r: &EqualLoadRow| r.runs_p99_ms.clone(),
        ),
    ] {
        for s in &scenarios {
            let points = rows
                .iter()
                .filter(|r| r.scenario == *s)
                .map(|r| {
                    let v = runs(r);
                    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    Point {
                        spread: (v.len() > 1).then_some((lo, hi)),
                        x_label: Some(format!(
                            "{} req/s offered ({:.0} % of capacity)",
                            crate::chart::axis::value_text(r.offered_per_sec),
                            r.fraction_of_capacity * 100.0
                        )),
                        ..Point::new(r.offered_per_sec, pick(r))
                    }
                })
                .collect();
            series.push(Series {
                name: format!("{s} — {label}"),
                points,
            });
        }
    }
    Some(LineChart {
        title: format!("Latency at equal offered load — {workload} workload"),
        subtitle: Some("open loop at fixed rates; median of repeats, bars: lowest–highest".into()),
        x: Axis::linear("offered load (requests per second)"),
        y: Axis::log("latency (ms)"),
        x_ticks: None,
        y_unit: "ms".into(),
        series,
    })
}

/// "Nines" position of a percentile: p50 → 0.3, p90 → 1, p99 → 2, p99.9 → 3.
fn nines(p: f64) -> f64 {
    -(1.0 - (p / 100.0).min(0.99999)).log10()
}

fn percentile_label(p: f64) -> String {
    let text = format!("{p:.3}");
    format!("p{}", text.trim_end_matches('0').trim_end_matches('.'))
}

/// Latency (ms, log scale) against percentile, one series per scenario; every percentile
/// drawn is a labelled tick.
fn latency_percentiles(report: &Report, workload: &str) -> LineChart {
    let rows: Vec<_> = report
        .http
        .iter()
        .filter(|r| r.workload == workload && !r.percentiles.is_empty())
        .collect();
    let mut percentiles: Vec<f64> = rows
        .iter()
        .flat_map(|r| r.percentiles.iter().map(|p| p.0))
        .filter(|p| *p < 100.0)
        .collect();
    percentiles.sort_by(f64::total_cmp);
    percentiles.dedup();
    LineChart {
        title: format!("Latency by percentile — {workload} workload"),
        subtitle: Some(format!(
            "median of {} runs at each percentile; hover a point for its value",
            report.settings.repeat
        )),
        x: Axis::linear("percentile (spaced by nines: p90, p99, p99.9)"),
        y: Axis::log("latency (ms)"),
        x_ticks: Some(
            percentiles
                .iter()
                .map(|&p| (nines(p), percentile_label(p)))
                .collect(),
        ),
        y_unit: "ms".into(),
        series: rows
            .iter()
            .map(|r| Series {
                name: r.scenario.clone(),
                points: r
                    .percentiles
                    .iter()
                    .filter(|(p, ms)| *p < 100.0 && *ms > 0.0)
                    .map(|&(p, ms)| Point {
                        x_label: Some(percentile_label(p)),
                        ..Point::new(nines(p), ms)
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Resident memory (MB) of each scenario's serving processes over its median run.
fn memory_over_time(report: &Report, workload: &str) -> LineChart {
    LineChart {
        title: format!("Server resident memory — {workload} workload"),
        subtitle: Some("the HTTP server's process tree over its median run".into()),
        x: Axis::linear("seconds into the run"),
        y: Axis::linear("resident memory (MB)"),
        x_ticks: None,
        y_unit: "MB".into(),
        series: report
            .http
            .iter()
            .filter(|r| r.workload == workload)
            .filter_map(|r| {
                let c = r.cost.as_ref()?;
                (!c.rss_over_time.is_empty()).then(|| Series {
                    name: r.scenario.clone(),
                    points: c
                        .rss_over_time
                        .iter()
                        .map(|&(t, bytes)| Point {
                            x_label: Some(format!("{t:.1} s")),
                            ..Point::new(t, bytes as f64 / 1e6)
                        })
                        .collect(),
                })
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_labelled_and_spaced_by_nines() {
        assert_eq!(percentile_label(50.0), "p50");
        assert_eq!(percentile_label(99.9), "p99.9");
        assert!((nines(90.0) - 1.0).abs() < 1e-9);
        assert!((nines(99.0) - 2.0).abs() < 1e-9);
    }
}

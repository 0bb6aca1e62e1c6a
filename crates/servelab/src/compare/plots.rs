//! SVG plots of a [`Report`]: latency percentiles per scenario (medians of runs, the
//! tables' statistic), throughput bars, and server memory over a run.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use plotters::prelude::*;

use super::model::Report;

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Writes every plot into `dir`; returns the files written.
pub fn write_all(report: &Report, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let mut workloads: Vec<&str> = report.http.iter().map(|r| r.workload.as_str()).collect();
    workloads.dedup();
    for workload in workloads {
        let path = dir.join(format!("latency-{workload}.svg"));
        latency_percentiles(report, workload, &path)
            .with_context(|| format!("cannot draw {}", path.display()))?;
        written.push(path);
    }
    if !report.http.is_empty() {
        let path = dir.join("throughput.svg");
        throughput_bars(report, &path)
            .with_context(|| format!("cannot draw {}", path.display()))?;
        written.push(path);
    }
    if report
        .http
        .iter()
        .any(|r| r.cost.as_ref().is_some_and(|c| c.rss_over_time.len() > 1))
    {
        let path = dir.join("memory.svg");
        memory_over_time(report, &path)
            .with_context(|| format!("cannot draw {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// Resident memory (MB) of each scenario's server over its median run, one panel per
/// workload.
fn memory_over_time(report: &Report, path: &Path) -> anyhow::Result<()> {
    let mut workloads: Vec<&str> = report.http.iter().map(|r| r.workload.as_str()).collect();
    workloads.dedup();
    let root = SVGBackend::new(path, (900, 360 * workloads.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing)?;
    let panels = root.split_evenly((workloads.len(), 1));
    for (panel, workload) in panels.iter().zip(&workloads) {
        let rows: Vec<_> = report
            .http
            .iter()
            .filter(|r| r.workload == *workload)
            .filter_map(|r| {
                r.cost
                    .as_ref()
                    .map(|c| (r.scenario.as_str(), &c.rss_over_time))
            })
            .filter(|(_, c)| !c.is_empty())
            .collect();
        let t_max = rows
            .iter()
            .flat_map(|(_, c)| c.iter().map(|p| p.0))
            .fold(0.1f64, f64::max);
        let mb_max = rows
            .iter()
            .flat_map(|(_, c)| c.iter().map(|p| p.1 as f64 / 1e6))
            .fold(1.0f64, f64::max)
            * 1.15;
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("Server resident memory — {workload} workload (median run)"),
                ("sans-serif", 20),
            )
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..t_max, 0.0..mb_max)
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .x_desc("seconds into the run")
            .y_desc("RSS MB")
            .draw()
            .map_err(drawing)?;
        for (i, (name, curve)) in rows.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            chart
                .draw_series(LineSeries::new(
                    curve.iter().map(|p| (p.0, p.1 as f64 / 1e6)),
                    color.stroke_width(2),
                ))
                .map_err(drawing)?
                .label(name.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(drawing)?;
    }
    root.present().map_err(drawing)
}

/// Latency (ms, log scale) against percentile, one line per scenario.
fn latency_percentiles(report: &Report, workload: &str, path: &Path) -> anyhow::Result<()> {
    let rows: Vec<_> = report
        .http
        .iter()
        .filter(|r| r.workload == workload && !r.percentiles.is_empty())
        .collect();
    // x axis: "nines" — p50 → 0.3, p90 → 1, p99 → 2, p99.9 → 3 — as HdrHistogram plots do.
    let nines = |p: f64| -(1.0 - (p / 100.0).min(0.99999)).log10();
    let max_ms = rows
        .iter()
        .flat_map(|r| r.percentiles.iter().map(|p| p.1))
        .fold(0.001f64, f64::max);
    let min_ms = rows
        .iter()
        .flat_map(|r| r.percentiles.iter().map(|p| p.1))
        .filter(|v| *v > 0.0)
        .fold(max_ms, f64::min);
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Latency by percentile — {workload} workload"),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        // y is log10(ms) on a linear axis, so every decade gets several labelled ticks.
        .build_cartesian_2d(
            0.0f64..4.0f64,
            (min_ms * 0.8).log10()..(max_ms * 1.25).log10(),
        )
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("latency (ms)")
        // Ticks at whole "nines": p0, p90, p99, p99.9, p99.99.
        .x_labels(5)
        .x_label_formatter(&|x| {
            let p = format!("{:.2}", 100.0 * (1.0 - 10f64.powf(-*x)));
            let p = p.trim_end_matches('0').trim_end_matches('.');
            format!("p{p}")
        })
        .y_labels(10)
        .y_label_formatter(&|log_ms| {
            let ms = &10f64.powf(*log_ms);
            if *ms >= 10.0 {
                format!("{ms:.0}")
            } else if *ms >= 1.0 {
                format!("{ms:.1}")
            } else {
                format!("{ms:.2}")
            }
        })
        .draw()
        .map_err(drawing)?;
    for (i, row) in rows.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let points: Vec<(f64, f64)> = row
            .percentiles
            .iter()
            .filter(|(p, ms)| *p < 100.0 && *ms > 0.0)
            .map(|(p, ms)| (nines(*p), ms.log10()))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(drawing)?
            .label(row.scenario.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(drawing)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(drawing)?;
    root.present().map_err(drawing)
}

/// Requests per second per scenario, one panel per workload.
fn throughput_bars(report: &Report, path: &Path) -> anyhow::Result<()> {
    let mut workloads: Vec<&str> = report.http.iter().map(|r| r.workload.as_str()).collect();
    workloads.dedup();
    let root = SVGBackend::new(path, (900, 360 * workloads.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing)?;
    let panels = root.split_evenly((workloads.len(), 1));
    for (panel, workload) in panels.iter().zip(&workloads) {
        let rows: Vec<_> = report
            .http
            .iter()
            .filter(|r| r.workload == *workload)
            .collect();
        let max = rows.iter().map(|r| r.rps_max).fold(1.0f64, f64::max) * 1.15;
        let names: Vec<String> = rows.iter().map(|r| r.scenario.clone()).collect();
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("Requests/s — {workload} workload (median, whiskers = spread)"),
                ("sans-serif", 20),
            )
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((0..rows.len().saturating_sub(1)).into_segmented(), 0.0..max)
            .map_err(drawing)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc("requests/s")
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .draw()
            .map_err(drawing)?;
        for (i, row) in rows.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), row.median.requests_per_sec),
                    ],
                    color.mix(0.8).filled(),
                )))
                .map_err(drawing)?;
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![
                        (SegmentValue::CenterOf(i), row.rps_min),
                        (SegmentValue::CenterOf(i), row.rps_max),
                    ],
                    BLACK.stroke_width(2),
                )))
                .map_err(drawing)?;
        }
    }
    root.present().map_err(drawing)
}

/// plotters' errors are generic over the backend; their text is what matters here.
fn drawing(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

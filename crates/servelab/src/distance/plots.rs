//! The distance plot: A's median and p99 latency at equal load against the round-trip
//! time, one line per link rate, B's as the floor, drawn under the distance section.

use super::markdown::HEADING;
use super::model::{Distance, Runs};
use crate::chart::{Axis, LineChart, Point, Series};
use crate::compare::model::Report;
use crate::html::Figure;

/// One point per run figure: the median with the lowest–highest.
fn point(x: f64, runs: &[f64], label: String) -> Option<Point> {
    let y = crate::stats::median_of(runs)?;
    let spread = crate::stats::spread(runs).filter(|_| runs.len() > 1);
    Some(Point {
        spread,
        x_label: Some(label),
        ..Point::new(x, y)
    })
}

/// A's p50 or p99 per link rate, over the round-trip time.
fn series(d: &Distance, pick: fn(&Runs) -> &[f64], what: &str) -> Vec<Series> {
    let mut rates: Vec<Option<u64>> = Vec::new();
    for p in &d.points {
        if !rates.contains(&p.spec.rate_bits_per_sec) {
            rates.push(p.spec.rate_bits_per_sec);
        }
    }
    rates
        .into_iter()
        .map(|rate| Series {
            name: format!(
                "A {what}, {}",
                rate.map_or("loopback".into(), super::model::rate_text)
            ),
            points: d
                .points
                .iter()
                .filter(|p| p.spec.rate_bits_per_sec == rate)
                .filter_map(|p| point(p.spec.rtt_us as f64 / 1e3, pick(&p.runs), p.spec.label()))
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

/// The plot, when the run measured distance.
pub fn figures(report: &Report) -> Vec<Figure> {
    let Some(d) = &report.distance else {
        return Vec::new();
    };
    let mut all = series(d, |r| &r.p50_ms, "p50");
    all.extend(series(d, |r| &r.p99_ms, "p99"));
    let max_rtt = d.points.iter().map(|p| p.spec.rtt_us).max().unwrap_or(0) as f64 / 1e3;
    for (what, runs) in [("p50", &d.b.p50_ms), ("p99", &d.b.p99_ms)] {
        let points: Vec<Point> = [0.0, max_rtt]
            .iter()
            .filter_map(|&x| point(x, runs, "B at the same load".into()))
            .collect();
        all.push(Series {
            name: format!("B {what} (local disk)"),
            points,
        });
    }
    if all.iter().all(|s| s.points.is_empty()) {
        return Vec::new();
    }
    let chart = LineChart {
        title: format!(
            "Latency at {:.1} req/s against round-trip time",
            d.offered_per_sec
        ),
        subtitle: Some(format!(
            "medians of {} runs, bars lowest–highest; A's NFS hop across the emulated link",
            d.rounds
        )),
        x: Axis::linear("round-trip time of the NFS hop, ms"),
        y: Axis::linear("latency, ms"),
        x_ticks: None,
        y_unit: "ms".into(),
        series: all,
    };
    vec![Figure {
        file: "distance.svg".into(),
        heading: HEADING.into(),
        svg: chart.to_svg(),
    }]
}

//! The container comparison's plots: the answer's ratios as bars, and throughput and
//! p99 against clients and CPU limit — each naming the containers.md section it draws.

use super::model::{CellComparison, ContainerReport, Point};
use crate::chart::{
    Axis, Bar, BarChart, BarPanel, LineChart, Point as ChartPoint, Series as ChartSeries,
};
use crate::html::Figure;
use crate::stats::Comparison;

/// The heading (after `## `) of the containers' answer, which its plot sits under.
pub const ANSWER_HEADING: &str = "The answer (containers)";

/// The containers' answer as bars: each comparison's ratio with its interval,
/// 1.0 (no difference) as the reference line; one panel for CPU per request, one for
/// requests per second.
fn answer_chart(r: &ContainerReport) -> Option<BarChart> {
    let panel = |title: &str, pick: fn(&CellComparison) -> Option<Comparison>| {
        let bars: Vec<Bar> = r
            .answer
            .comparisons
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let v = pick(c)?;
                Some(Bar {
                    label: format!(
                        "{} ({} file){}",
                        c.what,
                        c.workload,
                        if v.significant {
                            ""
                        } else {
                            " — no measurable difference"
                        }
                    ),
                    value: v.estimate,
                    spread: Some((v.ci.low, v.ci.high)),
                    color: i,
                })
            })
            .collect();
        (!bars.is_empty()).then(|| BarPanel {
            title: title.into(),
            bars,
            reference: Some((1.0, "no difference".into())),
        })
    };
    let panels: Vec<BarPanel> = [
        panel("CPU per request of every serving process, ratio", |c| {
            c.cpu_per_request
        }),
        panel("Requests per second, ratio", |c| c.requests_per_sec),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!panels.is_empty()).then(|| BarChart {
        title: "Host, LXD and Docker: A against B, each place against the host".into(),
        subtitle: Some(
            "ratio of medians; whiskers: bootstrap interval (its confidence in the table); dashed line: 1 (no difference)"
                .into(),
        ),
        value_axis: Axis::linear("ratio (first named ÷ second named)"),
        unit: "×".into(),
        whisker: "CI".into(),
        panels,
    })
}

/// The heading (after `### `) of the scaling table, which its plots sit under.
pub const SCALING_HEADING: &str = "Scaling: small file, keep-alive, against CPU limit and clients";

/// The container comparison's plots, each naming the containers.md section it draws.
pub fn figures(r: &ContainerReport) -> Vec<Figure> {
    let mut out: Vec<Figure> = answer_chart(r)
        .map(|c| Figure {
            file: "containers-answer.svg".into(),
            heading: ANSWER_HEADING.into(),
            svg: c.to_svg(),
        })
        .into_iter()
        .collect();
    if r.scaling.is_empty() {
        return out;
    }
    out.extend([
        Figure {
            file: "scaling-throughput.svg".into(),
            heading: SCALING_HEADING.into(),
            svg: scaling_chart(
                r,
                "Requests per second",
                Axis::linear("requests per second"),
                "req/s",
                |p| p.requests_per_sec,
            )
            .to_svg(),
        },
        Figure {
            file: "scaling-p99.svg".into(),
            heading: SCALING_HEADING.into(),
            svg: scaling_chart(r, "p99 latency", Axis::log("p99 latency (ms)"), "ms", |p| {
                p.p99_ms
            })
            .to_svg(),
        },
    ]);
    out
}

/// One series per (scenario, place, CPU limit): the value against the client count.
fn scaling_chart(
    r: &ContainerReport,
    what: &str,
    y: Axis,
    unit: &str,
    f: fn(&Point) -> f64,
) -> LineChart {
    let mut keys: Vec<(String, String, Option<u32>)> = Vec::new();
    for s in &r.scaling {
        let k = (s.scenario.clone(), s.place.clone(), s.cpus);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let series = keys
        .iter()
        .map(|(sc, place, cpus)| ChartSeries {
            name: format!(
                "{sc}, {place}, {}",
                cpus.map_or("no CPU limit".into(), |c| format!(
                    "{c} CPU{}",
                    if c == 1 { "" } else { "s" }
                ))
            ),
            points: r
                .scaling
                .iter()
                .filter(|s| &s.scenario == sc && &s.place == place && &s.cpus == cpus)
                .map(|s| ChartPoint {
                    x_label: Some(format!("{} clients", s.clients)),
                    ..ChartPoint::new(s.clients as f64, f(&s.median))
                })
                .collect(),
        })
        .collect();
    LineChart {
        title: format!("{what} against clients and CPU limit"),
        subtitle: Some("small file, keep-alive; median of the runs at each point".into()),
        x: Axis::log("concurrent clients"),
        y,
        x_ticks: None,
        y_unit: unit.into(),
        series,
    }
}

//! The container comparison's results as data (`containers.json`), as the original
//! report's tables (`containers.md`, Δ% against the host) and as scaling plots (SVG).

use std::fmt::Write as _;
use std::path::Path;

use super::answer::CellComparison;
use crate::chart::{
    Axis, Bar, BarChart, BarPanel, LineChart, Point as ChartPoint, Series as ChartSeries,
};
use crate::html::Figure;
use crate::stats::Comparison;
use serde::{Deserialize, Serialize};

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
    pub answer: super::answer::ContainerAnswer,
}

/// Δ% of `v` against the reference `base`.
fn delta(v: f64, base: f64) -> String {
    match crate::stats::delta_pct(v, base) {
        Some(d) if base > 0.0 => format!("{d:+.1} %"),
        _ => "—".into(),
    }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

/// The answer section of containers.md: the sentences, then every comparison with its
/// interval and flag.
fn answer_section(r: &ContainerReport) -> String {
    use crate::table::Table;
    let mut o = String::from("\n## The answer (containers)\n\n");
    for s in &r.answer.sentences {
        let _ = writeln!(o, "- {s}");
    }
    let ratio = |c: &Option<crate::stats::Comparison>| match c {
        None => "n/a".to_string(),
        Some(c) => format!(
            "{:.2} ({:.2}–{:.2}){}",
            c.estimate,
            c.ci.low,
            c.ci.high,
            if c.significant {
                ""
            } else {
                " no measurable difference"
            }
        ),
    };
    let mut t = Table::new([
        "Workload",
        "Comparison",
        "CPU/request ratio (95 % CI)",
        "req/s ratio (95 % CI)",
        "Δ p50 ms (95 % CI)",
        "Flag",
    ]);
    for c in &r.answer.comparisons {
        t.row([
            c.workload.clone(),
            c.what.clone(),
            ratio(&c.cpu_per_request),
            ratio(&c.requests_per_sec),
            c.p50_ms.map_or("n/a".into(), |d| {
                format!("{:+.2} ({:+.2} to {:+.2})", d.estimate, d.ci.low, d.ci.high)
            }),
            c.flag.clone().unwrap_or_default(),
        ]);
    }
    if !t.is_empty() {
        o.push('\n');
        o.push_str(&t.to_markdown());
    }
    o
}

pub fn render(r: &ContainerReport) -> String {
    let mut o = answer_section(r);
    let _ = writeln!(
        o,
        "\n## Host against container (httpd on the host, in LXD, in Docker)\n"
    );
    let _ = writeln!(
        o,
        "{}. Large file {}, small file {}. Load average before {}, after {}.\n",
        r.settings, r.large_file, r.small_file, r.loadavg_before, r.loadavg_after
    );
    for n in &r.notes {
        let _ = writeln!(o, "- {n}");
    }
    for (workload, title) in [
        (
            "large",
            "Large file (as `ab -n N -c C`: a new connection per request)",
        ),
        ("small", "Small file (keep-alive)"),
    ] {
        let rows: Vec<&Row> = r.rows.iter().filter(|x| x.workload == workload).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(o, "\n### {title}\n");
        let _ = writeln!(
            o,
            "| scenario | where | req/s | Δ% vs host | MB/s | p50 ms | p99 ms | runs |"
        );
        let _ = writeln!(o, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
        for sc in ["B", "A"] {
            let host = rows
                .iter()
                .find(|x| x.scenario == sc && x.place == "host")
                .map(|x| x.median.requests_per_sec)
                .unwrap_or(0.0);
            for x in rows.iter().filter(|x| x.scenario == sc) {
                let _ = writeln!(
                    o,
                    "| {} | {} | {:.1} | {} | {:.1} | {:.2} | {:.2} | {} |",
                    if sc == "B" {
                        "B (local disk)"
                    } else {
                        "A (NFS: rustnfs in Docker)"
                    },
                    x.place,
                    x.median.requests_per_sec,
                    if x.place == "host" {
                        "—".into()
                    } else {
                        delta(x.median.requests_per_sec, host)
                    },
                    x.median.mbytes_per_sec,
                    x.median.p50_ms,
                    x.median.p99_ms,
                    x.runs
                );
            }
        }
    }
    if !r.sysbench.is_empty() {
        let _ = writeln!(o, "\n### sysbench (1 thread; medians)\n");
        let places: Vec<&str> = {
            let mut p: Vec<&str> = r.sysbench.iter().map(|x| x.place.as_str()).collect();
            p.dedup();
            p.sort_by_key(|x| ["host", "LXD", "Docker"].iter().position(|y| y == x));
            p.dedup();
            p
        };
        let mut head = "| test |".to_string();
        let mut sep = "| --- |".to_string();
        for p in &places {
            if *p == "host" {
                head += " host |";
                sep += " ---: |";
            } else {
                let _ = write!(head, " {p} | Δ% |");
                sep += " ---: | ---: |";
            }
        }
        let _ = writeln!(o, "{head}\n{sep}");
        let mut tests: Vec<&str> = r.sysbench.iter().map(|x| x.test.as_str()).collect();
        tests.dedup();
        for t in tests {
            let get = |p: &str| r.sysbench.iter().find(|x| x.test == t && x.place == p);
            let unit = get("host").map_or("", |x| x.unit.as_str());
            let host = get("host").map_or(0.0, |x| x.median);
            let mut line = format!("| {t} ({unit}) |");
            for p in &places {
                let v = get(p).map(|x| x.median);
                match (v, *p == "host") {
                    (Some(v), true) => {
                        let _ = write!(line, " {v:.1} |");
                    }
                    (Some(v), false) => {
                        let _ = write!(line, " {v:.1} | {} |", delta(v, host));
                    }
                    (None, true) => line += " — |",
                    (None, false) => line += " — | — |",
                }
            }
            let _ = writeln!(o, "{line}");
        }
    }
    if !r.memory.is_empty() {
        let _ = writeln!(o, "\n### Memory per container (after the runs)\n");
        let _ = writeln!(o, "| where | what | now | peak | from |");
        let _ = writeln!(o, "| --- | --- | ---: | ---: | --- |");
        for m in &r.memory {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} |",
                m.place,
                m.what,
                mib(m.current),
                m.peak.map_or("—".into(), mib),
                m.source
            );
        }
    }
    if !r.scaling.is_empty() {
        let _ = writeln!(
            o,
            "\n### Scaling: small file, keep-alive, against CPU limit and clients\n"
        );
        let _ = writeln!(o, "| scenario | where | CPUs | clients | req/s | p99 ms |");
        let _ = writeln!(o, "| --- | --- | ---: | ---: | ---: | ---: |");
        for s in &r.scaling {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {:.0} | {:.2} |",
                s.scenario,
                s.place,
                s.cpus.map_or("unlimited".into(), |c| c.to_string()),
                s.clients,
                s.median.requests_per_sec,
                s.median.p99_ms
            );
        }
        let _ = writeln!(o, "\nPlots: scaling-throughput.svg, scaling-p99.svg.");
    }
    if !r.workers.is_empty() {
        let _ = writeln!(
            o,
            "\n### httpd --workers on the host (small file, keep-alive)\n"
        );
        let _ = writeln!(o, "| scenario | workers | clients | req/s | p99 ms |");
        let _ = writeln!(o, "| --- | ---: | ---: | ---: | ---: |");
        for w in &r.workers {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {:.0} | {:.2} |",
                w.scenario, w.workers, w.clients, w.median.requests_per_sec, w.median.p99_ms
            );
        }
    }
    if !r.fs.is_empty() {
        let _ = writeln!(
            o,
            "\n### File-system workloads: host, container bind mount, NFS (4 clients)\n"
        );
        let _ = writeln!(o, "| workload | where | ops/s | Δ% vs host | MB/s | runs |");
        let _ = writeln!(o, "| --- | --- | ---: | ---: | ---: | ---: |");
        for f in &r.fs {
            let host =
                r.fs.iter()
                    .find(|x| x.workload == f.workload && x.place.starts_with("host"))
                    .map_or(0.0, |x| x.ops_per_sec);
            let _ = writeln!(
                o,
                "| {} | {} | {:.0} | {} | {:.1} | {} |",
                f.workload,
                f.place,
                f.ops_per_sec,
                if f.place.starts_with("host") {
                    "—".into()
                } else {
                    delta(f.ops_per_sec, host)
                },
                f.mbytes_per_sec,
                f.runs
            );
        }
    }
    for (title, list) in [("Skipped", &r.skipped), ("Failures", &r.failures)] {
        if !list.is_empty() {
            let _ = writeln!(o, "\n{title}:\n");
            for s in list {
                let _ = writeln!(o, "- {s}");
            }
        }
    }
    o
}

/// Writes containers.md, containers.json and the plots; returns the markdown and the
/// plots (for report.html).
pub fn write(r: &ContainerReport, dir: &Path) -> anyhow::Result<(String, Vec<Figure>)> {
    let md = render(r);
    std::fs::write(dir.join("containers.md"), &md)?;
    let json = serde_json::to_string_pretty(r)?;
    std::fs::write(dir.join("containers.json"), json)?;
    let figures = figures(r);
    crate::html::write_figures(&figures, dir)?;
    Ok((md, figures))
}

/// The heading (after `## `) of the containers' answer, which its plot sits under.
const ANSWER_HEADING: &str = "The answer (containers)";

/// The plots of the container run whose containers.json is in `dir` (for `servelab
/// report DIR`, which re-renders report.html from a run's files); none when it cannot be
/// read.
pub fn figures_in(dir: &Path) -> Vec<Figure> {
    std::fs::read_to_string(dir.join("containers.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<ContainerReport>(&text).ok())
        .map(|r| figures(&r))
        .unwrap_or_default()
}

/// The containers' answer as bars: each comparison's ratio with its 95 % interval,
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
            "ratio of medians; whiskers: 95 % bootstrap interval; dashed line: 1 (no difference)"
                .into(),
        ),
        value_axis: Axis::linear("ratio (first named ÷ second named)"),
        unit: "×".into(),
        whisker: "95 % CI".into(),
        panels,
    })
}

/// The heading (after `### `) of the scaling table, which its plots sit under.
const SCALING_HEADING: &str = "Scaling: small file, keep-alive, against CPU limit and clients";

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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(rps: f64) -> Point {
        Point {
            requests_per_sec: rps,
            mbytes_per_sec: rps / 10.0,
            p50_ms: 1.0,
            p99_ms: 2.0,
            ..Point::default()
        }
    }

    #[test]
    fn tables_show_delta_against_the_host() {
        let r = ContainerReport {
            rows: vec![
                Row {
                    workload: "large".into(),
                    scenario: "B".into(),
                    place: "host".into(),
                    runs: 3,
                    median: p(200.0),
                    points: vec![p(200.0)],
                },
                Row {
                    workload: "large".into(),
                    scenario: "B".into(),
                    place: "LXD".into(),
                    runs: 3,
                    median: p(180.0),
                    points: vec![p(180.0)],
                },
            ],
            sysbench: vec![
                SysbenchRow {
                    test: "cpu prime 10000".into(),
                    unit: "events/s".into(),
                    place: "host".into(),
                    runs: 1,
                    median: 700.0,
                },
                SysbenchRow {
                    test: "cpu prime 10000".into(),
                    unit: "events/s".into(),
                    place: "Docker".into(),
                    runs: 1,
                    median: 707.0,
                },
            ],
            ..Default::default()
        };
        let md = render(&r);
        assert!(
            md.contains("| B (local disk) | LXD | 180.0 | -10.0 % |"),
            "{md}"
        );
        assert!(
            md.contains("| cpu prime 10000 (events/s) | 700.0 | 707.0 | +1.0 % |"),
            "{md}"
        );
        assert!(Point::median(&[]).is_none());
        assert_eq!(
            Point::median(&[p(1.0), p(3.0), p(2.0)])
                .unwrap()
                .requests_per_sec,
            2.0
        );
    }

    #[test]
    fn scaling_plots_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let r = ContainerReport {
            scaling: [1usize, 10, 100]
                .iter()
                .flat_map(|c| {
                    [Some(1), Some(2)].into_iter().map(move |cpus| ScaleRow {
                        scenario: "B".into(),
                        place: "host".into(),
                        cpus,
                        clients: *c,
                        median: p(*c as f64 * 100.0),
                    })
                })
                .collect(),
            ..Default::default()
        };
        let (md, figures) = write(&r, dir.path()).unwrap();
        assert!(figures.iter().any(|f| f.file == "scaling-throughput.svg"));
        assert!(md.contains("| B | host | 2 | 100 | 10000 |"), "{md}");
        let svg = std::fs::read_to_string(dir.path().join("scaling-throughput.svg")).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("B, host, 2 CPUs"),
            "{svg}"
        );
        assert!(dir.path().join("containers.json").exists());
    }
}

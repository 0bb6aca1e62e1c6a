//! `containers.md`: the container comparison as a list of sections ([`SECTIONS`]) — the
//! answer, the original report's tables with Δ% against the host, sysbench, memory, the
//! sweeps and the file-system table — each a small function from the
//! [`ContainerReport`] to headings, sentences and tables.

use super::model::{ContainerReport, Row};
use super::plots::{ANSWER_HEADING, SCALING_HEADING};
use crate::doc::{Block, Doc, Section};
use crate::stats::{Comparison, Verdict, coverage, delta_pct};
use crate::table::Table;

/// containers.md, top to bottom.
pub const SECTIONS: &[Section<ContainerReport>] = &[
    answer,
    host_against_container,
    sysbench,
    memory,
    scaling,
    workers,
    file_system,
    skipped_and_failed,
];

pub fn render(r: &ContainerReport) -> String {
    Doc::of(r, SECTIONS).to_markdown()
}

/// Δ% of `v` against the reference `base`.
fn delta(v: f64, base: f64) -> String {
    match delta_pct(v, base) {
        Some(d) if base > 0.0 => format!("{d:+.1} %"),
        _ => "—".into(),
    }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

/// A ratio with its interval: `1.23 (1.10–1.40)`, and a verdict when it includes 1.
fn ratio(c: &Option<Comparison>) -> String {
    let Some(c) = c else {
        return "n/a".to_string();
    };
    let verdict = match c.verdict() {
        Verdict::Differs => "",
        Verdict::NoDifference => " no measurable difference",
        Verdict::Unresolved => " not resolved",
    };
    format!(
        "{:.2} ({:.2}–{:.2}, {}){verdict}",
        c.estimate,
        c.ci.low,
        c.ci.high,
        coverage::label(c.confidence())
    )
}

/// The sentences, then every comparison with its interval and flag.
fn answer(r: &ContainerReport) -> Vec<Block> {
    let mut t = Table::new([
        "Workload",
        "Comparison",
        "CPU/request ratio (CI, its confidence)",
        "req/s ratio (CI, its confidence)",
        "Δ p50 ms (CI, its confidence)",
        "Flag",
    ]);
    for c in &r.answer.comparisons {
        t.row([
            c.workload.clone(),
            c.what.clone(),
            ratio(&c.cpu_per_request),
            ratio(&c.requests_per_sec),
            c.p50_ms.map_or("n/a".into(), |d| {
                format!(
                    "{:+.2} ({:+.2} to {:+.2}, {})",
                    d.estimate,
                    d.ci.low,
                    d.ci.high,
                    coverage::label(d.confidence())
                )
            }),
            c.flag.clone().unwrap_or_default(),
        ]);
    }
    vec![
        Block::h2(ANSWER_HEADING),
        Block::List(r.answer.sentences.clone()),
        Block::Table(t),
    ]
}

/// The original tables: each scenario on the host, in LXD and in Docker, per workload.
fn host_against_container(r: &ContainerReport) -> Vec<Block> {
    let mut out = vec![
        Block::h2("Host against container (httpd on the host, in LXD, in Docker)"),
        Block::text(format!(
            "{}. Large file {}, small file {}. Load average before {}, after {}.",
            r.settings, r.large_file, r.small_file, r.loadavg_before, r.loadavg_after
        )),
        Block::List(r.notes.clone()),
    ];
    for (workload, title) in [
        (
            "large",
            "Large file (as `ab -n N -c C`: a new connection per request)",
        ),
        ("small", "Small file (keep-alive)"),
    ] {
        let rows: Vec<&Row> = r.rows.iter().filter(|x| x.workload == workload).collect();
        if !rows.is_empty() {
            out.push(Block::h3(title));
            out.push(Block::Table(places_table(&rows)));
        }
    }
    out
}

fn places_table(rows: &[&Row]) -> Table {
    let mut t = Table::new([
        "scenario",
        "where",
        "req/s",
        "Δ% vs host",
        "MB/s",
        "p50 ms",
        "p99 ms",
        "runs",
    ])
    .left(2);
    for sc in ["B", "A"] {
        let host = rows
            .iter()
            .find(|x| x.scenario == sc && x.place == "host")
            .map_or(0.0, |x| x.median.requests_per_sec);
        for x in rows.iter().filter(|x| x.scenario == sc) {
            t.row([
                if sc == "B" {
                    "B (local disk)"
                } else {
                    "A (NFS: rustnfs in Docker)"
                }
                .to_string(),
                x.place.clone(),
                format!("{:.1}", x.median.requests_per_sec),
                if x.place == "host" {
                    "—".into()
                } else {
                    delta(x.median.requests_per_sec, host)
                },
                format!("{:.1}", x.median.mbytes_per_sec),
                format!("{:.2}", x.median.p50_ms),
                format!("{:.2}", x.median.p99_ms),
                x.runs.to_string(),
            ]);
        }
    }
    t
}

/// One column per place (the host first), with Δ% against the host beside each other.
fn sysbench(r: &ContainerReport) -> Vec<Block> {
    if r.sysbench.is_empty() {
        return Vec::new();
    }
    let mut places: Vec<&str> = r.sysbench.iter().map(|x| x.place.as_str()).collect();
    places.dedup();
    places.sort_by_key(|x| ["host", "LXD", "Docker"].iter().position(|y| y == x));
    places.dedup();
    let mut columns = vec!["test".to_string()];
    for p in &places {
        columns.push(p.to_string());
        if *p != "host" {
            columns.push("Δ%".into());
        }
    }
    let mut t = Table::new(columns);
    let mut tests: Vec<&str> = r.sysbench.iter().map(|x| x.test.as_str()).collect();
    tests.dedup();
    for test in tests {
        let get = |p: &str| r.sysbench.iter().find(|x| x.test == test && x.place == p);
        let unit = get("host").map_or("", |x| x.unit.as_str());
        let host = get("host").map_or(0.0, |x| x.median);
        let mut cells = vec![format!("{test} ({unit})")];
        for p in &places {
            let v = get(p).map(|x| x.median);
            cells.push(v.map_or("—".into(), |v| format!("{v:.1}")));
            if *p != "host" {
                cells.push(v.map_or("—".into(), |v| delta(v, host)));
            }
        }
        t.row(cells);
    }
    vec![Block::h3("sysbench (1 thread; medians)"), Block::Table(t)]
}

fn memory(r: &ContainerReport) -> Vec<Block> {
    if r.memory.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new(["where", "what", "now", "peak", "from"])
        .left(2)
        .align(4, crate::table::Align::Left);
    for m in &r.memory {
        t.row([
            m.place.clone(),
            m.what.clone(),
            mib(m.current),
            m.peak.map_or("—".into(), mib),
            m.source.clone(),
        ]);
    }
    vec![
        Block::h3("Memory per container (after the runs)"),
        Block::Table(t),
    ]
}

fn scaling(r: &ContainerReport) -> Vec<Block> {
    if r.scaling.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new(["scenario", "where", "CPUs", "clients", "req/s", "p99 ms"]).left(2);
    for s in &r.scaling {
        t.row([
            s.scenario.clone(),
            s.place.clone(),
            s.cpus.map_or("unlimited".into(), |c| c.to_string()),
            s.clients.to_string(),
            format!("{:.0}", s.median.requests_per_sec),
            format!("{:.2}", s.median.p99_ms),
        ]);
    }
    vec![
        Block::h3(SCALING_HEADING),
        Block::Table(t),
        Block::text("Plots: scaling-throughput.svg, scaling-p99.svg."),
    ]
}

fn workers(r: &ContainerReport) -> Vec<Block> {
    if r.workers.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new(["scenario", "workers", "clients", "req/s", "p99 ms"]);
    for w in &r.workers {
        t.row([
            w.scenario.clone(),
            w.workers.to_string(),
            w.clients.to_string(),
            format!("{:.0}", w.median.requests_per_sec),
            format!("{:.2}", w.median.p99_ms),
        ]);
    }
    vec![
        Block::h3("httpd --workers on the host (small file, keep-alive)"),
        Block::Table(t),
    ]
}

fn file_system(r: &ContainerReport) -> Vec<Block> {
    if r.fs.is_empty() {
        return Vec::new();
    }
    let mut t = Table::new(["workload", "where", "ops/s", "Δ% vs host", "MB/s", "runs"]).left(2);
    for f in &r.fs {
        let host =
            r.fs.iter()
                .find(|x| x.workload == f.workload && x.place.starts_with("host"))
                .map_or(0.0, |x| x.ops_per_sec);
        t.row([
            f.workload.clone(),
            f.place.clone(),
            format!("{:.0}", f.ops_per_sec),
            if f.place.starts_with("host") {
                "—".into()
            } else {
                delta(f.ops_per_sec, host)
            },
            format!("{:.1}", f.mbytes_per_sec),
            f.runs.to_string(),
        ]);
    }
    vec![
        Block::h3("File-system workloads: host, container bind mount, NFS (4 clients)"),
        Block::Table(t),
    ]
}

fn skipped_and_failed(r: &ContainerReport) -> Vec<Block> {
    let mut out = Vec::new();
    for (title, list) in [("Skipped", &r.skipped), ("Failures", &r.failures)] {
        if !list.is_empty() {
            out.push(Block::text(format!("{title}:")));
            out.push(Block::List(list.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containers::model::{ContainerReport, Point, SysbenchRow};

    fn p(rps: f64) -> Point {
        Point::at_rate(rps)
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
        assert!(md.starts_with("## The answer (containers)\n"), "{md}");
        assert_eq!(
            Point::median(&[p(1.0), p(3.0), p(2.0)])
                .unwrap()
                .requests_per_sec,
            2.0
        );
    }

    /// The committed container run (benches/results/2026-12-02-containers) re-renders
    /// cell for cell: what changed since it was written is only the one delimiter
    /// spelling of `Table` (`|---|`, was `| --- |`), an empty cell written `| |` (was
    /// `|  |`), no blank line before the first heading — and the answer table's interval
    /// cells and headers, which were labelled 95 % whatever their repeat count and now
    /// carry the confidence it gives (`stats::coverage`): those lines may differ, no other.
    #[test]
    fn the_committed_run_re_renders_cell_for_cell() {
        let r: ContainerReport = serde_json::from_str(include_str!(
            "../../../../benches/results/2026-12-02-containers/containers.json"
        ))
        .unwrap();
        let then = include_str!("../../../../benches/results/2026-12-02-containers/containers.md");
        let then: Vec<String> = then
            .trim_start_matches('\n')
            .lines()
            .map(|l| {
                let l = l.replace("|  |", "| |");
                if l.starts_with("| ---") {
                    l.replace(' ', "")
                } else {
                    l
                }
            })
            .collect();
        let now = render(&r);
        assert_eq!(now.lines().count(), then.len());
        let mut relabelled = 0;
        for (new, old) in now.lines().zip(&then) {
            if new != old {
                relabelled += 1;
                assert!(
                    old.contains("95 % CI") || old.contains(") no measurable difference") || {
                        let stripped =
                            unlabelled(new).replace(" not resolved", " no measurable difference");
                        stripped == *old
                    },
                    "a line other than an interval's changed:\n{old}\n{new}"
                );
            }
        }
        assert!(relabelled > 0);
    }

    /// `line` without the confidence labels of its interval cells (`, 92 %)` → `)`).
    fn unlabelled(line: &str) -> String {
        let mut out = String::new();
        let mut rest = line;
        while let Some(at) = rest.find(", ") {
            let (head, tail) = rest.split_at(at);
            out.push_str(head);
            let digits = tail[2..].chars().take_while(char::is_ascii_digit).count();
            if digits > 0 && tail[2 + digits..].starts_with(" %)") {
                out.push(')');
                rest = &tail[2 + digits + 3..];
            } else {
                out.push_str(", ");
                rest = &tail[2..];
            }
        }
        out + rest
    }
}

//! The container comparison's answer: A in a container against B in the same kind of
//! container (the original experiment: httpd in LXD reading rustnfs in Docker vs httpd in
//! LXD reading its own disk), and each container against the host, with bootstrap
//! intervals over the interleaved repeats, each labelled with the confidence its repeat
//! count gives (`stats::coverage`). A difference inside its interval is "no measurable
//! difference" (from enough repeats for 95 %) or "not resolved", never a percentage; runs on a busy machine are left out; a
//! container measured faster than the host is flagged as implausible with its likely
//! cause instead of being reported as a finding.

use super::model::{CellComparison, ContainerAnswer, Point, Row};
use crate::stats::{self, Comparison};

/// Quiet runs each side needs before a comparison is stated.
const MIN_RUNS: usize = 2;

fn quiet(points: &[Point], keep_busy: bool) -> Vec<&Point> {
    points.iter().filter(|p| keep_busy || !p.busy).collect()
}

fn compare(workload: &str, what: String, a: &Row, b: &Row, keep_busy: bool) -> CellComparison {
    let (pa, pb) = (quiet(&a.points, keep_busy), quiet(&b.points, keep_busy));
    let enough = pa.len() >= MIN_RUNS && pb.len() >= MIN_RUNS;
    let field = |f: fn(&Point) -> Option<f64>, pts: &[&Point]| -> Vec<f64> {
        pts.iter().filter_map(|p| f(p)).collect()
    };
    let with = |f: fn(&Point) -> Option<f64>, cmp: fn(&[f64], &[f64]) -> Option<Comparison>| {
        let (x, y) = (field(f, &pa), field(f, &pb));
        (enough && x.len() >= MIN_RUNS && y.len() >= MIN_RUNS)
            .then(|| cmp(&x, &y))
            .flatten()
    };
    CellComparison {
        workload: workload.into(),
        what,
        requests_per_sec: with(|p| Some(p.requests_per_sec), stats::ratio),
        cpu_per_request: with(|p| p.cpu_ms_per_request, stats::ratio),
        p50_ms: with(|p| Some(p.p50_ms), stats::difference),
        flag: None,
    }
}

/// Words for a ratio: "1.23 × (75 % CI 1.10–1.40 ×)", no measurable difference, or not
/// resolved.
fn words(c: &Option<Comparison>) -> String {
    match c {
        None => "n/a (no CPU figures, or fewer than 2 quiet runs)".into(),
        Some(c) => crate::compare::answer::ratio_words(c),
    }
}

fn diff_words(c: &Option<Comparison>) -> String {
    match c {
        None => "n/a (fewer than 2 quiet runs)".into(),
        Some(c) => crate::compare::answer::difference_words(c),
    }
}

/// Every comparison and the sentences, from the table's rows (with their runs).
pub fn compute(rows: &[Row], keep_busy: bool) -> ContainerAnswer {
    let mut out = ContainerAnswer::default();
    if !keep_busy {
        out.excluded_busy_runs = rows
            .iter()
            .map(|r| r.points.iter().filter(|p| p.busy).count())
            .sum();
    }
    out.total_runs = rows.iter().map(|r| r.points.len()).sum();
    let mut shares: Vec<f64> = rows
        .iter()
        .flat_map(|r| r.points.iter().filter_map(|p| p.other_work))
        .collect();
    shares.sort_by(f64::total_cmp);
    if let (Some(&low), Some(&high)) = (shares.first(), shares.last()) {
        out.other_work = Some([low, stats::median(&mut shares).unwrap_or(low), high]);
    }
    let find = |w: &str, sc: &str, place: &str| {
        rows.iter()
            .find(|r| r.workload == w && r.scenario == sc && r.place == place)
    };
    for w in ["large", "small"] {
        let mut places: Vec<&str> = rows
            .iter()
            .filter(|r| r.workload == w)
            .map(|r| r.place.as_str())
            .collect();
        places.dedup();
        // A against B where each runs: the original experiment's question per place.
        for place in &places {
            if let (Some(a), Some(b)) = (find(w, "A", place), find(w, "B", place)) {
                out.comparisons
                    .push(compare(w, format!("A vs B in {place}"), a, b, keep_busy));
            }
        }
        // Each container against the host, per scenario.
        for place in places.iter().filter(|p| **p != "host") {
            for sc in ["B", "A"] {
                if let (Some(c), Some(h)) = (find(w, sc, place), find(w, sc, "host")) {
                    let mut cmp = compare(w, format!("{place} vs host ({sc})"), c, h, keep_busy);
                    cmp.flag = implausible(&cmp);
                    out.comparisons.push(cmp);
                }
            }
        }
    }
    out.sentences = sentences(&out);
    out
}

/// A container cannot add CPU or take work off the host's loopback: more throughput in
/// a container than on the host, beyond the interval, comes from the client or the noise.
fn implausible(c: &CellComparison) -> Option<String> {
    let r = c.requests_per_sec?;
    (r.significant && r.estimate > 1.05).then(|| {
        format!(
            "implausible: the container served {:.0} % more requests/s than the host; a \
             container adds work (veth, bridge, cgroup accounting) and no CPU, so the likely \
             cause is the client (it shares the host's CPUs with the servers) or noise from \
             other work on the machine between the rounds — read the CPU per request instead",
            (r.estimate - 1.0) * 100.0
        )
    })
}

fn sentences(a: &ContainerAnswer) -> Vec<String> {
    let mut out = Vec::new();
    for c in &a.comparisons {
        let Some(place) = c.what.strip_prefix("A vs B in ") else {
            continue;
        };
        if c.workload != "large" {
            continue;
        }
        let setting = match place {
            "LXD" => {
                "httpd in LXD reading rustnfs in Docker against httpd in LXD reading its own disk"
            }
            "Docker" => {
                "httpd in Docker reading rustnfs in Docker against httpd in Docker reading a bind mount"
            }
            _ => "httpd on the host reading rustnfs in Docker against httpd reading local disk",
        };
        out.push(format!(
            "{place}, large file ({setting}): CPU per request of the whole serving stack A/B {}; requests/s A/B {}; median latency A − B {}.",
            words(&c.cpu_per_request),
            words(&c.requests_per_sec),
            diff_words(&c.p50_ms)
        ));
    }
    let vs_host: Vec<String> = a
        .comparisons
        .iter()
        .filter(|c| c.workload == "large" && c.what.contains("vs host"))
        .map(|c| {
            format!(
                "{}: CPU per request {}, requests/s {}{}",
                c.what,
                words(&c.cpu_per_request),
                words(&c.requests_per_sec),
                if c.flag.is_some() {
                    " (flagged implausible, see below)"
                } else {
                    ""
                }
            )
        })
        .collect();
    if !vs_host.is_empty() {
        out.push(format!(
            "Each container against the host, large file: {}.",
            vs_host.join("; ")
        ));
    }
    let measured = a.other_work.map_or(String::new(), |[low, median, high]| {
        format!(
            " Other work during the runs: {:.0}–{:.0} % of the CPU time (median {:.0} %).",
            low * 100.0,
            high * 100.0,
            median * 100.0
        )
    });
    out.push(format!(
        "Runs taken on a busy machine (other processes above {:.0} % of the CPU time during the run; the load above one per core where the stack's CPU is unknown) left out: {} of {}.{measured}",
        lab::affinity::OTHER_WORK_BUSY * 100.0,
        a.excluded_busy_runs,
        a.total_runs
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(place: &str, sc: &str, rps: &[f64], cpu: &[f64]) -> Row {
        let points: Vec<Point> = rps
            .iter()
            .zip(cpu)
            .map(|(r, c)| Point {
                requests_per_sec: *r,
                p50_ms: 10.0,
                cpu_ms_per_request: Some(*c),
                ..Point::default()
            })
            .collect();
        Row {
            workload: "large".into(),
            scenario: sc.into(),
            place: place.into(),
            runs: points.len(),
            median: Point::median(&points).unwrap(),
            points,
        }
    }

    #[test]
    fn a_vs_b_in_lxd_and_implausible_container_rows() {
        let rows = vec![
            row("host", "B", &[100.0, 102.0, 98.0], &[1.0, 1.0, 1.0]),
            row("host", "A", &[90.0, 91.0, 89.0], &[4.0, 4.1, 3.9]),
            row("LXD", "B", &[130.0, 131.0, 129.0], &[1.1, 1.1, 1.1]),
            row("LXD", "A", &[95.0, 140.0, 60.0], &[4.4, 4.5, 4.3]),
        ];
        let a = compute(&rows, false);
        let lxd = a
            .comparisons
            .iter()
            .find(|c| c.what == "A vs B in LXD")
            .unwrap();
        let cpu = lxd.cpu_per_request.unwrap();
        assert!(cpu.significant && (cpu.estimate - 4.4 / 1.1).abs() < 1e-9);
        // A's req/s in LXD spread 60–140 against B's 129–131: the interval includes 1,
        // and from 3 runs a side (a 75 % interval) that is not resolved, not "no
        // measurable difference".
        assert!(!lxd.requests_per_sec.unwrap().significant);
        assert!(
            a.sentences[1].contains("requests/s A/B not resolved (0.73 ×; the 75 % CI"),
            "{:?}",
            a.sentences
        );
        // LXD's B 30 % faster than the host's: flagged, not a finding.
        let b_vs_host = a
            .comparisons
            .iter()
            .find(|c| c.what == "LXD vs host (B)")
            .unwrap();
        assert!(b_vs_host.flag.as_ref().unwrap().starts_with("implausible"));
    }

    #[test]
    fn busy_runs_do_not_count() {
        let mut b = row("host", "B", &[100.0, 100.0, 100.0], &[1.0, 1.0, 1.0]);
        let a = row("host", "A", &[50.0, 50.0, 50.0], &[2.0, 2.0, 2.0]);
        for p in b.points.iter_mut().take(2) {
            p.busy = true;
            p.other_work = Some(0.35);
        }
        b.points[2].other_work = Some(0.05);
        let ans = compute(&[b, a], false);
        assert_eq!(ans.excluded_busy_runs, 2);
        assert!(ans.comparisons[0].cpu_per_request.is_none());
        assert!(ans.sentences[0].contains("fewer than 2 quiet runs"));
        let busy = ans.sentences.last().unwrap();
        assert!(
            busy.contains("left out: 2 of 6.")
                && busy.contains("5–35 % of the CPU time (median 35 %)"),
            "{busy}"
        );
    }
}

//! Two comparison runs side by side, as data: every figure of every row both runs have,
//! its change (NEW over OLD) with a bootstrap interval from the two runs' repeats and the
//! confidence that interval has (the same [`crate::stats`] as the reports), whether it is
//! a regression beyond the threshold; the rows refused because their conditions differ
//! (file size, concurrency, protocol, link), with why; the rows only one run has; and
//! what else changed between the runs (machine, settings, version). No I/O.

use crate::compare::answer::{demand_samples, runs_that_count};
use crate::compare::model::{HttpRow, Report};
use crate::stats::{self, Comparison, Verdict};

/// Which way a figure gets worse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worse {
    Higher,
    Lower,
}

/// One figure of one row in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// `HTTP large`, `Equal load 50 %`, `NFS read`, `TCP`.
    pub group: String,
    /// The scenario, server or path.
    pub row: String,
    pub figure: String,
    pub old: f64,
    pub new: f64,
    /// median(NEW) / median(OLD) over the runs' repeats, with its interval; `None`
    /// when a run kept no per-repeat figures (the NFS and TCP rows keep medians only).
    pub ratio: Option<Comparison>,
    pub worse: Worse,
}

impl Change {
    /// The change in percent of OLD.
    pub fn pct(&self) -> Option<f64> {
        stats::delta_pct(self.new, self.old)
    }

    /// How much worse NEW is, in percent (negative: better); `None` without a change.
    fn worse_pct(&self) -> Option<f64> {
        let p = self.pct()?;
        Some(match self.worse {
            Worse::Higher => p,
            Worse::Lower => -p,
        })
    }

    /// A significant change for the worse by more than `pct` percent.
    pub fn regression_beyond(&self, pct: f64) -> bool {
        self.ratio.is_some_and(|c| c.verdict() == Verdict::Differs)
            && self.worse_pct().is_some_and(|w| w > pct)
    }

    /// A significant change for the better by more than `pct` percent.
    pub fn improvement_beyond(&self, pct: f64) -> bool {
        self.ratio.is_some_and(|c| c.verdict() == Verdict::Differs)
            && self.worse_pct().is_some_and(|w| -w > pct)
    }
}

/// A row both runs have whose conditions differ: not compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub group: String,
    pub row: String,
    /// `file size 10 MiB → 1 MiB`, one per condition that differs.
    pub reasons: Vec<String>,
}

/// The two runs compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    /// Where each run came from (as given) and when it started.
    pub old: (String, String),
    pub new: (String, String),
    pub changes: Vec<Change>,
    pub refused: Vec<Refused>,
    /// `HTTP small · nginx: only in OLD`, and figures one run has no quiet run for.
    pub unmatched: Vec<String>,
    /// What else differs between the runs: machine, version, settings.
    pub context: Vec<String>,
    /// Changes for the worse beyond this many percent are flagged.
    pub threshold_pct: f64,
}

impl Diff {
    /// The flagged regressions.
    pub fn regressions(&self, pct: f64) -> impl Iterator<Item = &Change> {
        self.changes
            .iter()
            .filter(move |c| c.regression_beyond(pct))
    }
}

/// The conditions a row's figures hold under: (what, value).
fn http_conditions(report: &Report, row: &HttpRow) -> Vec<(&'static str, String)> {
    let (d, s) = (&report.dataset, &report.settings);
    let (size, concurrency) = match row.workload.as_str() {
        "large" => (d.large_bytes, s.large_concurrency),
        _ => (d.small_bytes, s.small_concurrency),
    };
    let link = s
        .link
        .as_ref()
        .filter(|l| row.scenario.contains(l.as_str()))
        .cloned()
        .unwrap_or_else(|| "loopback".into());
    vec![
        ("file size", bytes_words(size)),
        ("concurrency", concurrency.to_string()),
        (
            "protocol",
            row.protocol().map_or_else(
                || "HTTP from local disk".into(),
                |p| format!("HTTP over {p}"),
            ),
        ),
        ("link", link),
    ]
}

/// `10 MiB`, `4 KiB`, `1000 B`.
pub fn bytes_words(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// Why two sets of conditions are not comparable (empty: they are).
fn differing(old: &[(&'static str, String)], new: &[(&'static str, String)]) -> Vec<String> {
    old.iter()
        .zip(new)
        .filter(|(o, n)| o.1 != n.1)
        .map(|(o, n)| format!("{} {} → {}", o.0, o.1, n.1))
        .collect()
}

/// The per-repeat figures of an HTTP row, each with its direction.
fn http_figures(row: &HttpRow, keep_busy: bool) -> Vec<(&'static str, Vec<f64>, Worse)> {
    let quiet = |f: fn(&crate::compare::model::HttpRun) -> f64| {
        runs_that_count(&row.runs, keep_busy)
            .map(f)
            .collect::<Vec<_>>()
    };
    vec![
        ("CPU ms/request", demand_samples(&row.runs), Worse::Higher),
        ("requests/s", quiet(|r| r.requests_per_sec), Worse::Lower),
        ("p50 ms", quiet(|r| r.p50_ms), Worse::Higher),
        ("p99 ms", quiet(|r| r.p99_ms), Worse::Higher),
    ]
}

/// One figure's change from per-repeat samples of both runs.
fn change(
    group: &str,
    row: &str,
    figure: &str,
    old: &[f64],
    new: &[f64],
    worse: Worse,
) -> Option<Change> {
    Some(Change {
        group: group.into(),
        row: row.into(),
        figure: figure.into(),
        old: stats::median_of(old)?,
        new: stats::median_of(new)?,
        ratio: (old.len() >= 2 && new.len() >= 2)
            .then(|| stats::ratio(new, old))
            .flatten(),
        worse,
    })
}

/// Everything that differs between `old` and `new`, row by row.
pub fn compare(old: &Report, new: &Report, names: (String, String), threshold_pct: f64) -> Diff {
    let mut diff = Diff {
        old: (names.0, old.environment.started_utc.clone()),
        new: (names.1, new.environment.started_utc.clone()),
        changes: Vec::new(),
        refused: Vec::new(),
        unmatched: Vec::new(),
        context: context(old, new),
        threshold_pct,
    };
    http_rows(old, new, &mut diff);
    equal_load_rows(old, new, &mut diff);
    medians_only(old, new, &mut diff);
    diff
}

fn http_rows(old: &Report, new: &Report, diff: &mut Diff) {
    for o in &old.http {
        let group = format!("HTTP {}", o.workload);
        let Some(n) = new
            .http
            .iter()
            .find(|n| n.workload == o.workload && n.scenario == o.scenario)
        else {
            diff.unmatched
                .push(format!("{group} · {}: only in OLD", o.scenario));
            continue;
        };
        let reasons = differing(&http_conditions(old, o), &http_conditions(new, n));
        if !reasons.is_empty() {
            diff.refused.push(Refused {
                group,
                row: o.scenario.clone(),
                reasons,
            });
            continue;
        }
        let (fo, fn_) = (
            http_figures(o, old.settings.keep_busy),
            http_figures(n, new.settings.keep_busy),
        );
        for ((figure, a, worse), (_, b, _)) in fo.iter().zip(&fn_) {
            match (a.is_empty(), b.is_empty()) {
                (false, false) => diff
                    .changes
                    .extend(change(&group, &o.scenario, figure, a, b, *worse)),
                (old_none, new_none) => diff.unmatched.push(format!(
                    "{group} · {} · {figure}: no quiet run in {} (taken on a busy machine), not compared",
                    o.scenario,
                    match (old_none, new_none) {
                        (true, true) => "either run",
                        (true, false) => "OLD",
                        _ => "NEW",
                    }
                )),
            }
        }
    }
    for n in &new.http {
        if !old
            .http
            .iter()
            .any(|o| o.workload == n.workload && o.scenario == n.scenario)
        {
            diff.unmatched
                .push(format!("HTTP {} · {}: only in NEW", n.workload, n.scenario));
        }
    }
}

/// The open-loop points, matched by scenario and share of capacity; the offered rates
/// follow each run's capacity, so they are named, not required equal.
fn equal_load_rows(old: &Report, new: &Report, diff: &mut Diff) {
    for o in &old.equal_load {
        let Some(n) = new
            .equal_load
            .iter()
            .find(|n| n.scenario == o.scenario && n.fraction_of_capacity == o.fraction_of_capacity)
        else {
            continue;
        };
        let group = format!("Equal load {:.0} %", o.fraction_of_capacity * 100.0);
        // The open loop drives the large file at the large workload's concurrency, so
        // its conditions are those of the scenario's large row.
        let large = |r: &Report| {
            r.http
                .iter()
                .find(|h| h.workload == "large" && h.scenario == o.scenario)
                .map(|h| http_conditions(r, h))
        };
        let reasons = match (large(old), large(new)) {
            (Some(a), Some(b)) => differing(&a, &b),
            _ => {
                let (bo, bn) = (old.dataset.large_bytes, new.dataset.large_bytes);
                (bo != bn)
                    .then(|| format!("file size {} → {}", bytes_words(bo), bytes_words(bn)))
                    .into_iter()
                    .collect()
            }
        };
        if !reasons.is_empty() {
            diff.refused.push(Refused {
                group,
                row: o.scenario.clone(),
                reasons,
            });
            continue;
        }
        let row = format!(
            "{} ({:.0} → {:.0} req/s offered)",
            o.scenario, o.offered_per_sec, n.offered_per_sec
        );
        for (figure, a, b) in [
            ("p50 ms", &o.runs_p50_ms, &n.runs_p50_ms),
            ("p99 ms", &o.runs_p99_ms, &n.runs_p99_ms),
        ] {
            diff.changes
                .extend(change(&group, &row, figure, a, b, Worse::Higher));
        }
    }
}

/// NFS-level and TCP rows: their reports keep the median and the spread only, so the
/// change has no interval and no significance call.
fn medians_only(old: &Report, new: &Report, diff: &mut Diff) {
    let mut push = |group: String, row: &str, figure: &str, a: f64, b: f64, worse| {
        diff.changes.push(Change {
            group,
            row: row.into(),
            figure: figure.into(),
            old: a,
            new: b,
            ratio: None,
            worse,
        })
    };
    for o in &old.nfs {
        if let Some(n) = new
            .nfs
            .iter()
            .find(|n| n.workload == o.workload && n.server == o.server && n.clients == o.clients)
        {
            let group = format!("NFS {}", o.workload);
            push(
                group,
                &o.server,
                "ops/s",
                o.ops_per_sec,
                n.ops_per_sec,
                Worse::Lower,
            );
        }
    }
    for o in &old.tcp {
        if let Some(n) = new.tcp.iter().find(|n| n.path == o.path) {
            let (a, b) = (o.bits_per_sec / 1e9, n.bits_per_sec / 1e9);
            push("TCP".into(), &o.path, "Gbit/s", a, b, Worse::Lower);
        }
    }
}

/// What differs between the runs besides their rows.
fn context(old: &Report, new: &Report) -> Vec<String> {
    let (eo, en, so, sn) = (
        &old.environment,
        &new.environment,
        &old.settings,
        &new.settings,
    );
    let pin = |r: &Report| r.pinning.as_ref().map_or(String::new(), |p| p.note.clone());
    let pairs: [(&str, String, String); 9] = [
        ("machine", eo.hostname.clone(), en.hostname.clone()),
        (
            "CPU",
            format!("{} × {}", eo.cores, eo.cpu_model),
            format!("{} × {}", en.cores, en.cpu_model),
        ),
        ("kernel", eo.kernel.clone(), en.kernel.clone()),
        (
            "servelab",
            eo.servelab_version.clone(),
            en.servelab_version.clone(),
        ),
        ("repeats", so.repeat.to_string(), sn.repeat.to_string()),
        (
            "--nfs-cache-ms",
            so.nfs_cache_ms.to_string(),
            sn.nfs_cache_ms.to_string(),
        ),
        ("CPU pinning", pin(old), pin(new)),
        (
            "fresh servers per headline round",
            so.fresh_servers.to_string(),
            sn.fresh_servers.to_string(),
        ),
        ("page cache", eo.cache_state.clone(), en.cache_state.clone()),
    ];
    pairs
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(what, a, b)| format!("{what}: {a} → {b}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change_of(old: &[f64], new: &[f64], worse: Worse) -> Change {
        change("HTTP large", "B (local)", "figure", old, new, worse).unwrap()
    }

    /// A regression is worse in the figure's own direction, beyond its interval and the
    /// threshold: fewer requests/s is worse, more CPU is worse; a change inside its
    /// interval or under the threshold is none.
    #[test]
    fn regressions_follow_each_figures_direction() {
        let old = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0];
        let lower = [80.0, 81.0, 79.0, 80.5, 79.5, 80.0];
        let rps = change_of(&old, &lower, Worse::Lower);
        assert!((rps.pct().unwrap() + 20.0).abs() < 1e-9);
        assert!(rps.regression_beyond(10.0) && !rps.regression_beyond(25.0));
        assert!(!rps.improvement_beyond(0.0));
        let cpu = change_of(&old, &lower, Worse::Higher);
        assert!(!cpu.regression_beyond(0.0) && cpu.improvement_beyond(10.0));
        let noise = change_of(
            &old,
            &[95.0, 105.0, 98.0, 102.0, 90.0, 110.0],
            Worse::Higher,
        );
        assert!(!noise.regression_beyond(0.0) && !noise.improvement_beyond(0.0));
        // From two repeats a side the interval is a 50 % one: a change beyond it still
        // counts, labelled so, and one inside it is not resolved.
        let two = change_of(&[100.0, 100.0], &[130.0, 130.0], Worse::Higher);
        assert!(two.regression_beyond(20.0));
        assert_eq!(two.ratio.unwrap().confidence(), 0.5);
    }

    #[test]
    fn conditions_name_what_differs() {
        let a = [
            ("file size", "10 MiB".to_string()),
            ("link", "loopback".into()),
        ];
        let b = [
            ("file size", "1 MiB".to_string()),
            ("link", "loopback".into()),
        ];
        assert_eq!(
            differing(&a, &b),
            vec!["file size 10 MiB → 1 MiB".to_string()]
        );
        assert!(differing(&a, &a).is_empty());
        assert_eq!(bytes_words(10 << 20), "10 MiB");
        assert_eq!(bytes_words(4096), "4 KiB");
        assert_eq!(bytes_words(1000), "1000 B");
    }
}

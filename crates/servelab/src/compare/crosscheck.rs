//! The report checks itself: every HTTP workload is also measured by the reference
//! client a user would reach for (`ab` for the large file, `wrk` for the small one), in
//! the same interleaved slot as ours, and any ratio the reference contradicts by more
//! than 15 %, or any run taken on a busy machine, is flagged.
//!
//! A ratio is checked twice: as the table shows it (median over median), and repeat by
//! repeat — in each repeat both clients measured the scenario and B within minutes of
//! each other, so the repeat's two ratios should agree whatever the machine's load did
//! between repeats. Medians of unpaired runs can hide that: in the committed run of
//! 2026-12-01 nginx/B for 4 KiB was 1.06 by servelab load and 1.20 by wrk (within
//! 15 %), while per repeat the two clients disagreed by 29 %, 28 % and 7 % — and the
//! benchmark suite, the same hour, had httpd ahead of nginx (1.16 / 1.11).

use lab::tools::{self, Measured};

use super::model::{HttpRow, REFERENCE_SCENARIO, ReferenceCheck, Report, median};

/// Agreement tolerance: ours / reference within 1 ± this.
pub const TOLERANCE: f64 = 0.15;

/// The reference tool for a workload.
#[derive(Debug, Clone)]
pub enum Reference {
    /// `ab -n N -c C URL` (a new connection per request, like the original experiment).
    Ab { requests: u64, concurrency: usize },
    /// `wrk -t 1 -c C -d S URL` (keep-alive).
    Wrk { connections: usize, seconds: f64 },
}

impl Reference {
    pub fn tool(&self) -> &'static str {
        match self {
            Reference::Ab { .. } => "ab",
            Reference::Wrk { .. } => "wrk",
        }
    }

    pub fn command(&self) -> String {
        match self {
            Reference::Ab {
                requests,
                concurrency,
            } => format!("ab -n {requests} -c {concurrency} URL"),
            Reference::Wrk {
                connections,
                seconds,
            } => format!(
                "wrk -t 1 -c {connections} -d {}s URL",
                seconds.ceil().max(1.0)
            ),
        }
    }

    /// Whether the tool is installed.
    pub fn available(&self) -> bool {
        lab::find_program(self.tool()).is_some()
    }

    pub fn run(&self, url: &str) -> lab::Result<Measured> {
        match self {
            Reference::Ab {
                requests,
                concurrency,
            } => tools::ab_count(url, *requests, *concurrency, false),
            Reference::Wrk {
                connections,
                seconds,
            } => tools::wrk_threads(url, 1, *connections, *seconds, true),
        }
    }
}

/// Summarises a row's reference runs against our median; `busy_runs` says how many of
/// the row's runs were taken on a busy machine (the likeliest reason two back-to-back
/// clients disagree there).
pub fn summarise(
    reference: &Reference,
    runs: &[Measured],
    ours_per_sec: f64,
    busy_runs: usize,
) -> ReferenceCheck {
    let m = |f: fn(&Measured) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
    let median_per_sec = m(|r| r.per_sec);
    let cpu = m(|r| r.client_cpu_s.unwrap_or(0.0));
    let secs = m(|r| r.seconds);
    let agreement = if median_per_sec > 0.0 {
        ours_per_sec / median_per_sec
    } else {
        0.0
    };
    let note = ((agreement - 1.0).abs() > TOLERANCE).then(|| {
        let tool_bound = secs > 0.0 && cpu / secs >= 0.85;
        if tool_bound {
            format!(
                "{} used {cpu:.2} s of CPU in {secs:.2} s — one thread at its limit, so it measured itself, not the server",
                reference.tool()
            )
        } else if busy_runs > 0 {
            format!(
                "{busy_runs} of the runs were on a busy machine: the two clients ran one after the other and got different shares of the CPU (see Noise)"
            )
        } else {
            match reference {
                Reference::Ab { .. } => "ab speaks HTTP/1.0 and reads each body in small reads from one thread; servelab load reads large chunks".into(),
                Reference::Wrk { .. } => "both ran one thread on a quiet machine: the servers answer the two clients differently (pipelining, connection reuse)".into(),
            }
        }
    });
    ReferenceCheck {
        tool: reference.tool().into(),
        command: reference.command(),
        runs_per_sec: runs.iter().map(|r| r.per_sec).collect(),
        median_per_sec,
        median_transfer_bytes_per_sec: m(|r| r.bytes_per_sec),
        median_client_cpu_s: cpu,
        median_seconds: secs,
        agreement,
        note,
    }
}

/// The report's self-checks: ratios against B that the reference client contradicts
/// by more than [`TOLERANCE`], and runs taken on a busy machine.
pub fn flags(report: &Report) -> Vec<String> {
    flags_of(&report.http)
}

/// [`flags`] of these rows.
fn flags_of(http: &[HttpRow]) -> Vec<String> {
    let mut out = Vec::new();
    let workloads: Vec<&str> = {
        let mut w: Vec<&str> = http.iter().map(|r| r.workload.as_str()).collect();
        w.dedup();
        w
    };
    for workload in workloads {
        let rows: Vec<&HttpRow> = http.iter().filter(|r| r.workload == workload).collect();
        let Some(b) = rows.iter().find(|r| r.scenario == REFERENCE_SCENARIO) else {
            continue;
        };
        let Some(b_ref) = &b.reference else { continue };
        for r in &rows {
            if r.scenario == REFERENCE_SCENARIO {
                continue;
            }
            let Some(r_ref) = &r.reference else { continue };
            if b.median.requests_per_sec <= 0.0 || b_ref.median_per_sec <= 0.0 {
                continue;
            }
            let ours = r.median.requests_per_sec / b.median.requests_per_sec;
            let theirs = r_ref.median_per_sec / b_ref.median_per_sec;
            if theirs > 0.0 && (ours / theirs - 1.0).abs() > TOLERANCE {
                out.push(format!(
                    "{workload}: {} vs B is {ours:.2}× by servelab load but {theirs:.2}× by {} — the ratio is in doubt",
                    r.scenario, r_ref.tool
                ));
            } else if let Some(p) = per_repeat(b, r)
                && (p.agreement - 1.0).abs() > TOLERANCE
            {
                let list = |v: &[f64]| {
                    v.iter()
                        .map(|x| format!("{x:.2}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                out.push(format!(
                    "{workload}: {} vs B per repeat is {} by servelab load but {} by {} (the two clients disagree by {:+.0} % in the median repeat; {ours:.2}× and {theirs:.2}× over all runs) — the ratio is in doubt",
                    r.scenario,
                    list(&p.ours),
                    list(&p.theirs),
                    r_ref.tool,
                    (p.agreement - 1.0) * 100.0
                ));
            }
        }
    }
    for r in http {
        let busy = r
            .runs
            .iter()
            .filter(|x| x.noise.is_some_and(|n| n.busy))
            .count();
        if busy > 0 {
            out.push(format!(
                "{} {}: {busy} of {} runs on a busy machine (other work above {:.0} % of the CPU time)",
                r.workload,
                r.scenario,
                r.runs.len(),
                lab::affinity::OTHER_WORK_BUSY * 100.0
            ));
        }
    }
    out
}

/// A scenario's ratio to B repeat by repeat, by both clients.
#[derive(Debug, Clone, PartialEq)]
pub struct PerRepeat {
    /// Scenario / B by servelab load, one per repeat.
    pub ours: Vec<f64>,
    /// Scenario / B by the reference client, one per repeat.
    pub theirs: Vec<f64>,
    /// Median over the repeats of ours / theirs.
    pub agreement: f64,
}

/// `row` against `b` repeat by repeat; `None` unless both rows have one run of each
/// client per repeat (a failed run leaves nothing to pair it with).
pub fn per_repeat(b: &HttpRow, row: &HttpRow) -> Option<PerRepeat> {
    let (b_ref, r_ref) = (b.reference.as_ref()?, row.reference.as_ref()?);
    let n = b.runs.len();
    if n == 0
        || row.runs.len() != n
        || b_ref.runs_per_sec.len() != n
        || r_ref.runs_per_sec.len() != n
    {
        return None;
    }
    let mut ours = Vec::with_capacity(n);
    let mut theirs = Vec::with_capacity(n);
    let mut agreement = Vec::with_capacity(n);
    for i in 0..n {
        let (bo, ro) = (b.runs[i].requests_per_sec, row.runs[i].requests_per_sec);
        let (bt, rt) = (b_ref.runs_per_sec[i], r_ref.runs_per_sec[i]);
        if bo <= 0.0 || bt <= 0.0 || rt <= 0.0 {
            return None;
        }
        ours.push(ro / bo);
        theirs.push(rt / bt);
        agreement.push((ro / bo) / (rt / bt));
    }
    Some(PerRepeat {
        ours,
        theirs,
        agreement: median(&mut agreement),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::model::HttpRun;

    fn measured(per_sec: f64, cpu: f64) -> Measured {
        Measured {
            seconds: 1.0,
            requests: 100,
            per_sec,
            client_cpu_s: Some(cpu),
            ..Measured::default()
        }
    }

    #[test]
    fn agreement_and_reasons() {
        let ab = Reference::Ab {
            requests: 100,
            concurrency: 10,
        };
        let ok = summarise(&ab, &[measured(100.0, 0.2), measured(110.0, 0.2)], 104.0, 0);
        assert!((ok.agreement - 104.0 / 105.0).abs() < 1e-9);
        assert!(ok.note.is_none());
        let cpu_bound = summarise(&ab, &[measured(100.0, 0.95)], 150.0, 0);
        assert!(cpu_bound.note.unwrap().contains("one thread at its limit"));
        let busy = summarise(&ab, &[measured(100.0, 0.2)], 150.0, 2);
        assert!(busy.note.unwrap().contains("busy machine"));
    }

    fn row(scenario: &str, ours: &[f64], tool: &Reference, theirs: &[f64]) -> HttpRow {
        let runs: Vec<HttpRun> = ours
            .iter()
            .map(|&r| HttpRun {
                requests_per_sec: r,
                ..HttpRun::default()
            })
            .collect();
        let measured: Vec<Measured> = theirs.iter().map(|&r| measured(r, 0.2)).collect();
        let m = median(&mut ours.to_vec());
        HttpRow {
            workload: "small".into(),
            scenario: scenario.into(),
            description: String::new(),
            runs,
            median: HttpRun {
                requests_per_sec: m,
                ..HttpRun::default()
            },
            rps_min: 0.0,
            rps_max: 0.0,
            percentiles: Vec::new(),
            server_peak_rss_bytes: None,
            cost: None,
            reference: Some(summarise(tool, &measured, m, 0)),
            client_bound: false,
        }
    }

    /// Issue 12 §3: the committed run of 2026-12-01 (4 KiB, keep-alive, c = 10; req/s per
    /// repeat by servelab load and by wrk in the same slots). Its medians put nginx/B at
    /// 1.06 and 1.20 — within 15 %, so the median check passed — while per repeat the
    /// two clients disagreed by 29 %, 28 % and 7 %; the report must say the ratio is in
    /// doubt.
    #[test]
    fn clients_disagreeing_repeat_by_repeat_are_flagged() {
        let wrk = Reference::Wrk {
            connections: 10,
            seconds: 3.0,
        };
        let b = row(
            REFERENCE_SCENARIO,
            &[30145.0, 34182.0, 32429.0],
            &wrk,
            &[25163.0, 31701.0, 29039.0],
        );
        let nginx = row(
            "nginx",
            &[34392.0, 23025.0, 36280.0],
            &wrk,
            &[40343.0, 29809.0, 34933.0],
        );
        let p = per_repeat(&b, &nginx).unwrap();
        assert!((p.agreement - 0.72).abs() < 0.01, "{p:?}");
        let flags = flags_of(&[b.clone(), nginx]);
        let doubt: Vec<&String> = flags.iter().filter(|f| f.contains("in doubt")).collect();
        assert_eq!(doubt.len(), 1, "{flags:#?}");
        assert!(doubt[0].contains("nginx vs B per repeat"), "{}", doubt[0]);

        // Clients that agree in every repeat are not flagged, however the load moved the
        // repeats' absolute figures.
        let steady = row(
            "nginx",
            &[30000.0, 17000.0, 32000.0],
            &wrk,
            &[25000.0, 15800.0, 28700.0],
        );
        assert!(per_repeat(&b, &steady).is_some_and(|p| (p.agreement - 1.0).abs() <= TOLERANCE));
        let flags = flags_of(&[b.clone(), steady]);
        assert!(!flags.iter().any(|f| f.contains("in doubt")), "{flags:#?}");

        // A failed run leaves the repeats unpaired: no per-repeat figure.
        let short = row("nginx", &[30000.0, 32000.0], &wrk, &[25000.0, 28700.0]);
        assert!(per_repeat(&b, &short).is_none());
    }
}

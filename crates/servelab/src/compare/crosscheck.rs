//! The report checks itself: every HTTP workload is also measured by the reference
//! client a user would reach for (`ab` for the large file, `wrk` for the small one), in
//! the same interleaved slot as ours, and any ratio the reference contradicts by more
//! than 15 %, or any run taken on a busy machine, is flagged.

use lab::tools::{self, Measured};

use super::markdown::REFERENCE_SCENARIO;
use super::model::{HttpRow, ReferenceCheck, Report, median};

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
    let mut out = Vec::new();
    let workloads: Vec<&str> = {
        let mut w: Vec<&str> = report.http.iter().map(|r| r.workload.as_str()).collect();
        w.dedup();
        w
    };
    for workload in workloads {
        let rows: Vec<&HttpRow> = report
            .http
            .iter()
            .filter(|r| r.workload == workload)
            .collect();
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
            }
        }
    }
    for r in &report.http {
        let busy = r
            .runs
            .iter()
            .filter(|x| x.noise.is_some_and(|n| n.busy))
            .count();
        if busy > 0 {
            out.push(format!(
                "{} {}: {busy} of {} runs on a busy machine (load above {:.1} per core before or after)",
                r.workload,
                r.scenario,
                r.runs.len(),
                lab::environment::BUSY_LOAD_PER_CORE
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

//! Latency at equal offered load: A and B driven open-loop at the same fixed rates (25,
//! 50 and 75 % of the lower of their closed-loop capacities on the large file), so the
//! NFS hop's added latency is read at the same load instead of from closed loops that
//! ran at different throughputs. Each request is timed from its intended start.

use std::collections::BTreeMap;
use std::time::Duration;

use loadgen::Schedule;

use super::RunContext;
use crate::compare::model::{A_SCENARIO, EqualLoadRow, REFERENCE_SCENARIO};
use crate::experiment::interrupt::Interrupted;
use crate::experiment::load::{Load, rotation};
use crate::experiment::probe::NoiseProbe;
use crate::experiment::stack::Stack;
use crate::stats;

/// The offered rates, as shares of the lower capacity.
pub const FRACTIONS: [f64; 3] = [0.25, 0.5, 0.75];

/// One open-loop run's figures.
#[derive(Default)]
struct Point {
    p50_ms: Vec<f64>,
    p99_ms: Vec<f64>,
    achieved: Vec<f64>,
    failed: u64,
    /// Runs taken on a busy machine, left out of the figures.
    busy: usize,
}

impl RunContext<'_> {
    pub(super) fn measure_equal_load(&mut self, scenarios: &[Stack]) -> Result<(), Interrupted> {
        let secs = self.opts.equal_load_seconds;
        if secs <= 0.0 {
            return Ok(());
        }
        let planned = self.opts.repeat * FRACTIONS.len() * 2;
        let Some((pair, lower)) = self.equal_load_pair(scenarios) else {
            self.progress.unplan(planned, Duration::from_secs_f64(secs));
            return Ok(());
        };
        let path = format!("/{}", self.data.info.large_file);
        let mut points: BTreeMap<(usize, usize), Point> = BTreeMap::new();
        for rep in 0..self.opts.repeat {
            for fi in rotation(rep, FRACTIONS.len()) {
                let rate = lower * FRACTIONS[fi];
                for k in rotation(rep + fi, pair.len()) {
                    let sc = &scenarios[pair[k]];
                    let what = format!(
                        "equal load {}/{} {:>4.0} req/s {}",
                        rep + 1,
                        self.opts.repeat,
                        rate,
                        sc.name
                    );
                    self.progress.step(Duration::from_secs_f64(secs), what)?;
                    let probe = NoiseProbe::start(&sc.parts);
                    let result = Load::new(
                        sc.url(&path),
                        Schedule::Rate {
                            per_second: rate,
                            count: None,
                            duration: Some(Duration::from_secs_f64(secs)),
                        },
                        self.opts.large_concurrency,
                    )
                    .keepalive(false)
                    .threads(self.opts.client_threads)
                    .run();
                    let busy = probe.finish().busy;
                    match result {
                        Ok(r) => {
                            let p = points.entry((fi, k)).or_default();
                            p.failed += r.failed();
                            if busy && !self.opts.keep_busy {
                                p.busy += 1;
                                continue;
                            }
                            let total = r.total().unwrap_or_default();
                            p.p50_ms.push(total.quantile_seconds(0.5) * 1e3);
                            p.p99_ms.push(total.quantile_seconds(0.99) * 1e3);
                            p.achieved.push(r.requests_per_sec());
                        }
                        Err(e) => self.fail(&sc.name, &format!("equal load {rate:.0}/s"), e),
                    }
                }
            }
        }
        self.equal_load_rows(&points, lower);
        Ok(())
    }

    /// B's and A's places in `scenarios` and the lower of their closed-loop capacities
    /// on the large file; `None` when either is missing.
    fn equal_load_pair(&self, scenarios: &[Stack]) -> Option<([usize; 2], f64)> {
        let find = |name: &str| scenarios.iter().position(|s| s.name == name);
        let (b, a) = (find(REFERENCE_SCENARIO)?, find(A_SCENARIO)?);
        let capacity = |name: &str| {
            self.report
                .http
                .iter()
                .find(|r| r.workload == "large" && r.scenario == name)
                .map(|r| r.median.requests_per_sec)
        };
        let lower = capacity(REFERENCE_SCENARIO)?.min(capacity(A_SCENARIO)?);
        (lower > 0.0).then_some(([b, a], lower))
    }

    /// The report's rows: medians per point, A's p50 against B's with its interval.
    fn equal_load_rows(&mut self, points: &BTreeMap<(usize, usize), Point>, lower: f64) {
        for (fi, fraction) in FRACTIONS.iter().enumerate() {
            let b_p50 = points.get(&(fi, 0)).map(|p| p.p50_ms.clone());
            for (k, name) in [REFERENCE_SCENARIO, A_SCENARIO].iter().enumerate() {
                let Some(p) = points.get(&(fi, k)) else {
                    continue;
                };
                let med = |v: &[f64]| stats::median_of(v).unwrap_or(0.0);
                self.report.equal_load.push(EqualLoadRow {
                    workload: "large".into(),
                    scenario: (*name).into(),
                    fraction_of_capacity: *fraction,
                    offered_per_sec: lower * fraction,
                    achieved_per_sec: med(&p.achieved),
                    p50_ms: med(&p.p50_ms),
                    p99_ms: med(&p.p99_ms),
                    runs_p50_ms: p.p50_ms.clone(),
                    runs_p99_ms: p.p99_ms.clone(),
                    failed: p.failed,
                    busy_runs: p.busy,
                    p50_minus_b_ms: match (k, &b_p50) {
                        (1, Some(b)) if p.p50_ms.len() >= 2 && b.len() >= 2 => {
                            stats::difference(&p.p50_ms, b)
                        }
                        _ => None,
                    },
                });
            }
        }
    }
}

//! The distance phase: scenario A with its NFS hop across the emulated link at each
//! point of [`crate::distance::model::plan`] (one by default, the sweep with
//! `--distance`), each point a stack of its own, all of them and B offered the same
//! open-loop rate in rotating rounds under the probe (latency and CPU per request from
//! the same runs). The points' stacks are stopped, and their links removed, at the end
//! of the phase.

use std::time::{Duration, Instant};

use loadgen::Schedule;

use super::RunContext;
use crate::compare::model::{A_SCENARIO, REFERENCE_SCENARIO};
use crate::distance::model::{Distance, DistancePoint, PointSpec, Runs, offered_rate, plan};
use crate::experiment::interrupt::Interrupted;
use crate::experiment::load::{Load, rotation};
use crate::experiment::probe::Probe;
use crate::experiment::stack::{self, Launch, Stack, StartEnv};

impl RunContext<'_> {
    /// Steps the distance phase will take (planned with the rest of the run).
    pub(super) fn distance_steps(&self) -> usize {
        if self.opts.distance_seconds <= 0.0 || self.rustnfs.is_none() {
            return 0;
        }
        self.opts.repeat * (plan(self.opts.distance_sweep).len() + 1)
    }

    pub(super) fn measure_distance(&mut self, scenarios: &[Stack]) -> Result<(), Interrupted> {
        let (secs, repeat) = (self.opts.distance_seconds, self.opts.repeat);
        let step = Duration::from_secs_f64(secs);
        let planned = self.distance_steps();
        let b = scenarios.iter().find(|s| s.name == REFERENCE_SCENARIO);
        let (Some(b), Some(lower), true) = (b, self.lower_large_capacity(), planned > 0) else {
            self.progress.unplan(planned, step);
            return Ok(());
        };
        let started = Instant::now();
        let specs = plan(self.opts.distance_sweep);
        let file = self.data.info.large_file.clone();
        let file_bytes = std::fs::metadata(self.data.info.root.join(&file)).map_or(0, |m| m.len());
        let mut d = Distance {
            sweep: self.opts.distance_sweep,
            offered_per_sec: offered_rate(lower, &specs, file_bytes),
            file: file.clone(),
            file_bytes,
            seconds_each: secs,
            rounds: repeat,
            ..Distance::default()
        };
        let stacks = self.start_distance_stacks(&specs, &mut d.failures);
        self.progress
            .unplan(repeat * (specs.len() - stacks.len()), step);
        let mut runs = vec![Runs::default(); stacks.len() + 1];
        for rep in 0..repeat {
            for k in rotation(rep, stacks.len() + 1) {
                let sc = if k == 0 { b } else { &stacks[k - 1].1 };
                let what = format!("distance {}/{repeat} {}", rep + 1, sc.name);
                self.progress.step(step, what)?;
                self.distance_run(sc, d.offered_per_sec, &file, &mut runs[k]);
            }
        }
        let mut runs = runs.into_iter();
        d.b = runs.next().unwrap_or_default();
        for ((spec, sc), r) in stacks.iter().zip(runs) {
            d.points
                .push(DistancePoint::new(*spec, path_of(sc), r, &d.b));
        }
        drop(stacks);
        d.elapsed_s = started.elapsed().as_secs_f64();
        self.report.distance = Some(d);
        Ok(())
    }

    /// The lower of B's and A's closed-loop capacities on the large file.
    fn lower_large_capacity(&self) -> Option<f64> {
        let capacity = |name: &str| {
            self.report
                .http
                .iter()
                .find(|r| r.workload == "large" && r.scenario == name)
                .map(|r| r.median.requests_per_sec)
        };
        let lower = capacity(REFERENCE_SCENARIO)?.min(capacity(A_SCENARIO)?);
        (lower > 0.0).then_some(lower)
    }

    /// One stack per point (A across that point's link); a point that does not start
    /// is listed with its reason and the others go on.
    fn start_distance_stacks(
        &mut self,
        specs: &[PointSpec],
        failures: &mut Vec<String>,
    ) -> Vec<(PointSpec, Stack)> {
        let mut out = Vec::new();
        for spec in specs {
            let name = format!("A (NFS: rustnfs, {})", spec.label());
            let description = match spec.link() {
                Some(l) => format!("httpd --nfs → emulated link ({l}) → rustnfs"),
                None => "httpd --nfs → rustnfs on loopback".into(),
            };
            let env = StartEnv {
                root: &self.data.info.root,
                log_dir: &self.log_dir,
                rustnfs: self.rustnfs.as_ref(),
                ganesha: None,
                nfs_cache_ms: Some(self.opts.nfs_cache_ms),
                data_cache_dir: None,
            };
            let launch = Launch::HttpdRustnfs {
                link: spec.link(),
                data_cache: None,
            };
            match stack::start(&name, &description, &launch, &env) {
                Ok(s) => {
                    for pid in s.parts.iter().filter_map(|p| p.pid()) {
                        self.pin_server(&s.name, pid);
                    }
                    out.push((*spec, s));
                }
                Err(e) => failures.push(format!("{}: {e:#}", spec.label())),
            }
        }
        out
    }

    /// One open-loop run of `sc` at `rate` under the probe, added to `runs`.
    fn distance_run(&mut self, sc: &Stack, rate: f64, file: &str, runs: &mut Runs) {
        let secs = self.opts.distance_seconds;
        let probe = Probe::start(&sc.parts, self.opts.cpus.as_ref());
        let result = Load::new(
            sc.url(&format!("/{file}")),
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
        let seen = probe.finish();
        let r = match result {
            Ok(r) => r,
            Err(e) => return self.fail(&sc.name, &format!("distance {rate:.1}/s"), e),
        };
        runs.failed += r.failed();
        // CPU per request does not depend on neighbours: kept from every run (§6);
        // latency only from quiet runs unless --keep-busy.
        if let Some(cpu) = seen.cpu_s().filter(|_| r.requests > 0) {
            runs.cpu_ms_per_request.push(cpu / r.requests as f64 * 1e3);
        }
        if seen.noise.busy && !self.opts.keep_busy {
            runs.busy_runs += 1;
            return;
        }
        let total = r.total().unwrap_or_default();
        runs.p50_ms.push(total.quantile_seconds(0.5) * 1e3);
        runs.p99_ms.push(total.quantile_seconds(0.99) * 1e3);
        runs.achieved_per_sec.push(r.requests_per_sec());
    }
}

/// How a point's link was built, from its stack's description (`[…]`), or loopback.
fn path_of(sc: &Stack) -> String {
    sc.description
        .split_once(" [")
        .map(|(_, note)| note.trim_end_matches(']').to_string())
        .unwrap_or_else(|| "loopback: no link".into())
}

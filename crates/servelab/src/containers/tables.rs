//! The original report's tables: every cell serves the file's bytes, warms up, then
//! the large and small workloads run on every cell in rotating rounds under the probe
//! (the whole serving stack's CPU, the other work on the machine); then memory per
//! column and sysbench.

use std::time::Duration;

use loadgen::Schedule;

use super::host::{host_rss, load};
use super::{Cell, MemoryRow, Point, Row, Run, docker, sysbench};
use crate::experiment::interrupt::Interrupted;
use crate::experiment::load::{error_text, interleaved};
use crate::experiment::probe::Probe;

impl Run<'_> {
    /// Same bytes everywhere before measuring.
    pub(super) fn check_bytes(&self) -> anyhow::Result<()> {
        let want = std::fs::read(self.data.join(&self.large_file))?;
        for c in &self.cells {
            match lab::http::get(
                c.stack.addr,
                &format!("/{}", self.large_file),
                Duration::from_secs(60),
            ) {
                Ok((200, body)) if body == want => {}
                other => anyhow::bail!(
                    "{} scenario {} did not serve the file's bytes: {:?}",
                    c.place,
                    c.scenario,
                    other.map(|(s, b)| (s, b.len()))
                ),
            }
        }
        Ok(())
    }

    fn large(&self, c: &Cell) -> anyhow::Result<Point> {
        load(
            &c.stack.url(&format!("/{}", self.large_file)),
            Schedule::Count(self.w.large_requests),
            self.w.large_concurrency,
            false,
        )
    }

    pub(super) fn small(&self, url: &str, c: usize, secs: f64) -> anyhow::Result<Point> {
        load(
            &format!("{url}/{}", self.small_file),
            Schedule::Duration(Duration::from_secs_f64(secs)),
            c,
            true,
        )
    }

    pub(super) fn warm_up(&mut self) -> Result<(), Interrupted> {
        let expected = Duration::from_secs(2 * self.cells.len() as u64);
        self.progress.step(expected, "warming up every cell")?;
        for c in &self.cells {
            let _ = load(
                &c.stack.url(&format!("/{}", self.large_file)),
                Schedule::Count(4),
                2,
                false,
            );
            let _ = self.small(&c.stack.url(""), 4, 0.3);
        }
        Ok(())
    }

    /// The original tables: every (place, scenario) in rotating order, per workload.
    pub(super) fn tables(&mut self) -> Result<(), Interrupted> {
        let w = self.w;
        for (workload, is_small) in [("large", false), ("small", true)] {
            let expected = Duration::from_secs_f64(if is_small { w.small_seconds } else { 2.0 });
            let mut runs: Vec<Vec<Point>> = vec![Vec::new(); self.cells.len()];
            let numbered: Vec<usize> = (0..self.cells.len()).collect();
            for (round, &ci) in interleaved(w.repeat, &numbered) {
                let c = &self.cells[ci];
                let what = format!(
                    "containers {}/{} {workload:>5} {} {}",
                    round + 1,
                    w.repeat,
                    c.place,
                    c.scenario
                );
                self.progress.step(expected, what)?;
                match self.measure_cell(ci, is_small) {
                    Ok(p) => runs[ci].push(p),
                    Err(e) => {
                        let c = &self.cells[ci];
                        self.rep.failures.push(format!(
                            "{} {} {workload}: {}",
                            c.place,
                            c.scenario,
                            error_text(&e)
                        ))
                    }
                }
                self.host_peak = self.host_peak.max(host_rss(&self.host_a, &self.host_b));
            }
            for (c, runs) in self.cells.iter().zip(&runs) {
                if let Some(m) = Point::median(runs) {
                    self.rep.rows.push(Row {
                        workload: workload.into(),
                        scenario: c.scenario.to_string(),
                        place: c.place.clone(),
                        runs: runs.len(),
                        median: m,
                        points: runs.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// One run of one cell under the probe: its figures, whether the machine was busy
    /// (by the other work when the stack's CPU is known, else by the load average), and
    /// the whole stack's CPU per request.
    fn measure_cell(&self, ci: usize, is_small: bool) -> anyhow::Result<Point> {
        let c = &self.cells[ci];
        let w = self.w;
        let probe = Probe::start(&c.stack.parts, None);
        let r = if is_small {
            self.small(&c.stack.url(""), w.small_concurrency, w.small_seconds)
        } else {
            self.large(c)
        };
        let seen = probe.finish();
        let mut p = r?;
        p.busy = seen.noise.busy;
        p.other_work = seen.noise.other_work;
        p.cpu_ms_per_request = seen
            .cpu_s()
            .and_then(|s| crate::stats::service_demand_ms(&[s], p.requests));
        Ok(p)
    }

    /// Memory per column after the runs.
    pub(super) fn memory(&mut self) {
        self.rep.memory.push(MemoryRow {
            place: "host".into(),
            what: "httpd A + B processes (RSS)".into(),
            current: host_rss(&self.host_a, &self.host_b),
            peak: Some(self.host_peak),
            source: "/proc/PID/status VmRSS".into(),
        });
        if let Some(i) = &self.instance
            && let Ok((cur, peak)) = i.memory()
        {
            self.rep.memory.push(MemoryRow {
                place: "LXD".into(),
                what: format!("instance {} (init + httpd A + B)", i.name),
                current: cur,
                peak: Some(peak),
                source: "lxc info / instance state".into(),
            });
        }
        if let Some(d) = &self.deployment {
            let mut names: Vec<(&str, &str)> = Vec::new();
            if let Some(c) = &d.httpd_a {
                names.push((&c.name, "httpd A container"));
            }
            if let Some(c) = &d.httpd_b {
                names.push((&c.name, "httpd B container"));
            }
            if let Some(n) = &d.rustnfs {
                names.push((n, "rustnfs container (scenario A's server)"));
            }
            for (n, what) in names {
                if let Some(cur) = docker::stats_memory(n) {
                    self.rep.memory.push(MemoryRow {
                        place: "Docker".into(),
                        what: what.into(),
                        current: cur,
                        peak: docker::cgroup_peak(n),
                        source: "docker stats; cgroup peak".into(),
                    });
                }
            }
        }
    }

    /// sysbench on the host and in each container.
    pub(super) fn sysbench(&mut self) -> Result<(), Interrupted> {
        if lab::find_program("sysbench").is_none() {
            self.rep.skipped.push("sysbench: not installed".into());
            return Ok(());
        }
        let with_docker = self.docker_column();
        sysbench::measure(
            self.args,
            self.w,
            &self.instance,
            with_docker,
            &mut self.rep,
            &mut self.progress,
        )
    }
}

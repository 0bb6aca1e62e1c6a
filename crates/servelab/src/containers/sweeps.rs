//! The sweeps: every cell's small-file throughput and p99 against a CPU limit and a
//! client count, httpd's `--workers` on the host, and the file-system table. Each point
//! is a step of the run's plan; a point that fails is listed under the failures.

use std::time::Duration;

use super::host::HostHttpd;
use super::options::Engine;
use super::{Point, Run, ScaleRow, WorkersRow, b_args, cgroup, docker, fs};
use crate::experiment::interrupt::Interrupted;
use crate::experiment::load::error_text;

impl Run<'_> {
    /// Every column's CPU limit set to `cpu` (`None` lifts it).
    fn set_cpus(&self, limit: Option<&cgroup::CpuLimit>, cpu: Option<u32>) -> anyhow::Result<()> {
        if let Some(l) = limit {
            l.set(cpu)?;
        }
        if let Some(i) = &self.instance {
            i.set_cpus(cpu)?;
        }
        if let Some(d) = &self.deployment
            && self.plan.engines.contains(&Engine::Docker)
        {
            d.set_cpus(cpu)?;
        }
        Ok(())
    }

    /// The host's CPU limit with both host httpds in it, when CPU limits are swept (a
    /// limit that cannot be made is skipped, with its reason).
    fn host_cpu_limit(&mut self) -> anyhow::Result<Option<cgroup::CpuLimit>> {
        if self.plan.cpus.is_empty() {
            return Ok(None);
        }
        match cgroup::CpuLimit::create() {
            Ok(l) => {
                for h in [Some(&self.host_b), self.host_a.as_ref()]
                    .into_iter()
                    .flatten()
                {
                    l.add(h.proc.pid())?;
                }
                self.rep.notes.push(format!(
                    "CPU limits: host {}, LXD limits.cpu (pinned CPUs), Docker --cpus \
                     (CFS quota)",
                    l.kind
                ));
                Ok(Some(l))
            }
            Err(e) => {
                self.rep.skipped.push(format!("host CPU limit: {e:#}"));
                Ok(None)
            }
        }
    }

    /// The median of `rounds` small-file points at `url` with `clients`, each a step
    /// named `what`; failures go to the report as `failure` says.
    fn sweep_point(
        &mut self,
        url: &str,
        clients: usize,
        what: &str,
        failure: &str,
    ) -> Result<Option<Point>, Interrupted> {
        let secs = self.args.scale_seconds;
        let mut pts = Vec::new();
        for round in 0..self.sweep_rounds() {
            let step = format!("{what}, round {}/{}", round + 1, self.sweep_rounds());
            self.progress.step(Duration::from_secs_f64(secs), step)?;
            match self.small(url, clients, secs) {
                Ok(p) => pts.push(p),
                Err(e) => self
                    .rep
                    .failures
                    .push(format!("{failure}: {}", error_text(&e))),
            }
        }
        Ok(Point::median(&pts))
    }

    /// Scaling: CPU limit × client count (small-file workload).
    pub(super) fn scaling(&mut self) -> anyhow::Result<()> {
        let limit = self.host_cpu_limit()?;
        let cpus: Vec<Option<u32>> = if self.plan.cpus.is_empty() {
            vec![None]
        } else {
            self.plan.cpus.iter().map(|c| Some(*c)).collect()
        };
        let clients = if self.plan.clients.is_empty() {
            vec![self.w.small_concurrency]
        } else {
            self.plan.clients.clone()
        };
        for cpu in &cpus {
            self.set_cpus(limit.as_ref(), *cpu)?;
            for &c in &clients {
                for ci in 0..self.cells.len() {
                    let (place, scenario) = (self.cells[ci].place.clone(), self.cells[ci].scenario);
                    let url = self.cells[ci].stack.url("");
                    let cpus_text = cpu.map_or("no CPU limit".into(), |n| format!("{n} CPUs"));
                    let what = format!("scaling {place} {scenario}, {cpus_text}, {c} clients");
                    let failure = format!("scaling {place} {scenario} cpus={cpu:?} c={c}");
                    if let Some(m) = self.sweep_point(&url, c, &what, &failure)? {
                        self.rep.scaling.push(ScaleRow {
                            scenario: scenario.to_string(),
                            place,
                            cpus: *cpu,
                            clients: c,
                            median: m,
                        });
                    }
                }
            }
        }
        self.set_cpus(limit.as_ref(), None)
    }

    /// httpd --workers on the host, a fresh process per value and scenario.
    pub(super) fn workers(&mut self) -> anyhow::Result<()> {
        for workers in self.plan.workers.clone() {
            let extra = vec!["--workers".to_string(), workers.to_string()];
            let mut scenarios = vec![("B", b_args(&self.data, &extra))];
            if let Some(u) = &self.nfs_url {
                let mut a = self.args.httpd_a_args(u);
                a.extend(extra.iter().cloned());
                scenarios.push(("A", a));
            }
            for (sc, a) in scenarios {
                let h = HostHttpd::start(&self.httpd_bin, &a)?;
                let what = format!("httpd --workers {workers}, {sc}");
                let failure = format!("workers={workers} {sc}");
                let clients = self.w.small_concurrency;
                if let Some(m) = self.sweep_point(&h.url, clients, &what, &failure)? {
                    self.rep.workers.push(WorkersRow {
                        scenario: sc.into(),
                        workers,
                        clients,
                        median: m,
                    });
                }
            }
        }
        Ok(())
    }

    /// File-system workloads: host, Docker bind mount, NFS.
    pub(super) fn fs(&mut self) -> anyhow::Result<()> {
        let image = format!("servelab:{}", self.args.image_tag);
        let image = match docker::unavailable(&[&image]) {
            None => Some(image),
            Some(why) => {
                self.rep
                    .skipped
                    .push(format!("file-system table, Docker column: {why}"));
                None
            }
        };
        fs::run(
            &self.data.join(&self.large_file),
            image.as_deref(),
            self.args.fs,
            self.w.repeat,
            &mut self.rep,
            &mut self.progress,
        )
    }
}

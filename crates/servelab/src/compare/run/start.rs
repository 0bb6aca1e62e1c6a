//! Starting what a run measures: rustnfs and Ganesha for the NFS side, the chosen peers,
//! and every HTTP scenario of [`scenarios::specs`] as a serving stack; then the plan of
//! every step that follows. A baseline that is not installed, or that was not named and
//! does not start, is skipped with its reason; one that was named and does not start is
//! a failure. The run goes on either way.

use std::time::Duration;

use lab::peers::Baseline;

use super::RunContext;
use crate::compare::model::Skipped;
use crate::compare::scenarios::{self, ScenarioSpec};
use crate::experiment::nfs::NfsServer;
use crate::experiment::peers::{self, Started};
use crate::experiment::stack::{self, Launch, Stack, StartEnv};

impl RunContext<'_> {
    pub(super) fn start_nfs_servers(&mut self) {
        match NfsServer::start_rustnfs(&self.data.info.root, &self.log_dir) {
            Ok(n) => {
                self.pin_server("rustnfs", n.pid);
                self.rustnfs = Some(n);
            }
            Err(e) => self.fail("rustnfs", "start", e),
        }
        if self.opts.baselines.wants(Baseline::Ganesha) {
            // Ganesha serves v3 and v4 (the export its pseudo-root): the NFS-level rows
            // run over both.
            let label = "A (NFS: ganesha) and NFS-level ganesha";
            match peers::start(Baseline::Ganesha, &self.data.info.root) {
                Started::Running(g) => {
                    self.pin_server("ganesha.nfsd", g.pid());
                    self.ganesha = Some(NfsServer::ganesha(*g));
                }
                Started::Failed(e) if self.opts.baselines.explicit(Baseline::Ganesha) => {
                    self.fail(label, "start", e)
                }
                other => self.skip(label, other.why_not().unwrap_or_default()),
            }
        }
    }

    fn skip(&mut self, scenario: &str, reason: String) {
        self.report.skipped.push(Skipped {
            scenario: scenario.into(),
            reason,
        });
    }

    /// The scenario list of this run.
    fn specs(&mut self) -> Vec<ScenarioSpec> {
        let mut peers = Vec::new();
        for &b in Baseline::HTTP_PEERS {
            if !self.opts.baselines.wants(b) {
                continue;
            }
            match b.detect() {
                Ok(_) => peers.push(b),
                Err(why) => self.skip(b.name(), why.to_string()),
            }
        }
        if self.opts.baselines.wants(Baseline::KernelNfs) {
            // Always reported: on machines with a kernel client this is where it would run.
            let reason = match Baseline::KernelNfs.detect() {
                Err(why) => why.to_string(),
                Ok(_) => "a kernel NFS mount needs a mount point and root; run httpd --root on the mounted path (see crates/servelab/README.md) — compare does not mount file systems itself".into(),
            };
            self.skip("A (kernel NFS mount)", reason);
        }
        let mut specs = scenarios::specs(self.opts.link, self.ganesha.is_some(), &peers);
        if self.rustnfs.is_none() {
            specs.retain(|s| {
                !matches!(
                    s.launch,
                    Launch::HttpdRustnfs { .. } | Launch::HttpdRustnfsVeth
                )
            });
        }
        specs
    }

    pub(super) fn start_scenarios(&mut self) -> Vec<Stack> {
        let specs = self.specs();
        self.specs = specs.clone();
        let mut started = Vec::new();
        for spec in &specs {
            let env = StartEnv {
                root: &self.data.info.root,
                log_dir: &self.log_dir,
                rustnfs: self.rustnfs.as_ref(),
                ganesha: self.ganesha.as_ref(),
                nfs_cache_ms: Some(self.opts.nfs_cache_ms),
                data_cache_dir: self.data_cache_dir.as_deref(),
            };
            match stack::start(&spec.name, &spec.description, &spec.launch, &env) {
                Ok(s) => {
                    for p in &s.parts {
                        if let Some(pid) = p.pid() {
                            self.pin_server(&s.name, pid);
                        }
                    }
                    started.push(s);
                }
                Err(e) if matches!(spec.launch, Launch::Peer(b) if !self.opts.baselines.explicit(b)) => {
                    self.skip(&spec.name, format!("installed but did not start: {e:#}"))
                }
                Err(e) => self.fail(&spec.name, "start", e),
            }
        }
        started
    }

    /// Every step that follows, planned before the first: the display shows the true
    /// total from the start. The rounds that may narrow the headline are planned too and
    /// taken out again when it is narrow enough.
    pub(super) fn plan(&mut self, scenarios: &[Stack]) {
        let o = self.opts;
        self.progress.plan(1, secs(2.0 * scenarios.len() as f64));
        let workloads = self.workloads();
        for w in &workloads {
            self.progress.plan(o.repeat * scenarios.len(), w.expected);
        }
        let large = workloads.first().map_or(Duration::ZERO, |w| w.expected);
        let headline = super::http::headline_scenarios(scenarios).len();
        self.progress
            .plan((o.max_repeat - o.repeat) * headline, large);
        if o.equal_load_seconds > 0.0 {
            let points = o.repeat * super::equal::FRACTIONS.len() * 2;
            self.progress.plan(points, secs(o.equal_load_seconds));
        }
        let distance = self.distance_steps();
        self.progress.plan(distance, secs(o.distance_seconds));
        let nfs_targets =
            2 * (usize::from(self.rustnfs.is_some()) + usize::from(self.ganesha.is_some()));
        self.progress
            .plan(o.repeat * 2 * nfs_targets, secs(o.nfs_seconds));
        let tcp_paths = 1 + o.link.map_or(0, |_| 2);
        self.progress
            .plan(o.repeat * tcp_paths, secs(o.tcp_seconds));
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

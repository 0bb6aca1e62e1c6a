//! Starting what a run measures: rustnfs and Ganesha for the NFS side, the chosen peers,
//! and every HTTP scenario of [`scenarios::specs`]. A baseline that is not installed, or
//! that was not named and does not start, is skipped with its reason; one that was named
//! and does not start is a failure. The run goes on either way.

use lab::peers::{Baseline, ExternalServer};

use super::RunContext;
use crate::compare::model::Skipped;
use crate::compare::scenarios::{self, HttpScenario, ScenarioSpec, StartEnv};
use crate::ours::ServerProcess;

impl RunContext<'_> {
    pub(super) fn start_nfs_servers(&mut self) {
        let root = self.info.root.display().to_string();
        match ServerProcess::start(
            "rustnfs",
            "rustnfs",
            // As the Ganesha peer (No_Root_Squash): the load runs as root.
            &["--export".into(), root, "--no-root-squash".into()],
            &self.log_dir,
        ) {
            Ok(p) => {
                self.pin_server("rustnfs", p.pid());
                self.rustnfs = Some(p);
            }
            Err(e) => self.fail("rustnfs", "start", e),
        }
        if let Some(g) = self.start_baseline(Baseline::Ganesha) {
            self.pin_server("ganesha.nfsd", g.pid());
            self.ganesha = Some(g);
        }
    }

    /// Starts a peer when chosen and installed; records why not otherwise.
    fn start_baseline(&mut self, b: Baseline) -> Option<ExternalServer> {
        if !self.opts.baselines.wants(b) {
            return None;
        }
        let label = match b {
            Baseline::Ganesha => "A (NFS: ganesha) and NFS-level ganesha".to_string(),
            other => other.name().to_string(),
        };
        if let Err(why) = b.detect() {
            self.report.skipped.push(Skipped {
                scenario: label,
                reason: why.to_string(),
            });
            return None;
        }
        if b == Baseline::KernelNfs {
            return None;
        }
        // Ganesha serves v3 and v4 (the export its pseudo-root): the NFS-level rows run
        // over both.
        let started = match b {
            Baseline::Ganesha => lab::peers::start_ganesha_v4(&self.info.root),
            _ => b.start(&self.info.root),
        };
        match started {
            Ok(s) => Some(s),
            Err(e) if self.opts.baselines.explicit(b) => {
                self.fail(&label, "start", e);
                None
            }
            Err(e) => {
                self.report.skipped.push(Skipped {
                    scenario: label,
                    reason: format!("installed but did not start: {e}"),
                });
                None
            }
        }
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
                Err(why) => self.report.skipped.push(Skipped {
                    scenario: b.name().into(),
                    reason: why.to_string(),
                }),
            }
        }
        if self.opts.baselines.wants(Baseline::KernelNfs) {
            // Always reported: on machines with a kernel client this is where it would run.
            let reason = match Baseline::KernelNfs.detect() {
                Err(why) => why.to_string(),
                Ok(_) => "a kernel NFS mount needs a mount point and root; run httpd --root on the mounted path (see crates/servelab/README.md) — compare does not mount file systems itself".into(),
            };
            self.report.skipped.push(Skipped {
                scenario: "A (kernel NFS mount)".into(),
                reason,
            });
        }
        let mut specs = scenarios::specs(self.opts.link, self.ganesha.is_some(), &peers);
        if self.rustnfs.is_none() {
            specs.retain(|s| {
                !matches!(
                    s.launch,
                    scenarios::Launch::HttpdRustnfs { .. } | scenarios::Launch::HttpdRustnfsVeth
                )
            });
        }
        specs
    }

    pub(super) fn start_scenarios(&mut self) -> Vec<HttpScenario> {
        let specs = self.specs();
        let mut started = Vec::new();
        for spec in &specs {
            let env = StartEnv {
                root: &self.info.root,
                log_dir: &self.log_dir,
                rustnfs: self.rustnfs.as_ref(),
                ganesha: self.ganesha.as_ref(),
                nfs_cache_ms: self.opts.nfs_cache_ms,
                data_cache_dir: self.data_cache_dir.as_deref(),
            };
            let result = scenarios::start(spec, &env);
            match result {
                Ok(s) => {
                    for (_, pid) in &s.serving {
                        self.pin_server(&s.name, *pid);
                    }
                    started.push(s);
                }
                Err(e) if matches!(spec.launch, scenarios::Launch::Peer(b) if !self.opts.baselines.explicit(b)) => {
                    self.report.skipped.push(Skipped {
                        scenario: spec.name.clone(),
                        reason: format!("installed but did not start: {e:#}"),
                    })
                }
                Err(e) => self.fail(&spec.name, "start", e),
            }
        }
        started
    }
}

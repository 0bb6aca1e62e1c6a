//! Fresh servers for every round of the headline: before each repeat after the first,
//! rustnfs and every httpd of B and the A rows that read it (over every NFS version) are
//! started anew (the new ones first, then swapped in, then the old ones stopped) and
//! warmed up, so the spread over the repeats — and the interval drawn from it — includes
//! what a new invocation changes: fresh processes, their placement and memory, their
//! warm-up. `--no-restart` keeps the first servers for the whole run. A restart that
//! fails keeps the old servers and is reported as a failure; the run goes on.

use std::path::Path;

use loadgen::Schedule;

use super::RunContext;
use crate::experiment::load::Load;
use crate::experiment::nfs::NfsServer;
use crate::experiment::ours::file_name;
use crate::experiment::stack::{self, Launch, Stack, StartEnv};

impl RunContext<'_> {
    /// Restarts the stacks of `scenarios` that are ours (httpd on local disk or on the
    /// run's rustnfs) and the rustnfs behind them.
    pub(super) fn restart_ours(&mut self, scenarios: &mut [Stack]) {
        if !self.opts.restart {
            return;
        }
        let ours: Vec<(usize, Launch, String)> = scenarios
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let spec = self.specs.iter().find(|p| p.name == s.name)?;
                spec.launch
                    .restarts_with_the_run()
                    .then(|| (i, spec.launch.clone(), spec.description.clone()))
            })
            .collect();
        self.restarts += 1;
        let names = ours.iter().map(|(i, _, _)| scenarios[*i].name.as_str());
        keep_logs(&self.log_dir, names.chain(["rustnfs"]), self.restarts);
        let nfs = match self.rustnfs.is_some() {
            true => match NfsServer::start_rustnfs(&self.data.info.root, &self.log_dir) {
                Ok(n) => Some(n),
                Err(e) => return self.fail("rustnfs", "restart", e),
            },
            false => None,
        };
        let env = StartEnv {
            root: &self.data.info.root,
            log_dir: &self.log_dir,
            rustnfs: nfs.as_ref().or(self.rustnfs.as_ref()),
            ganesha: self.ganesha.as_ref(),
            nfs_cache_ms: Some(self.opts.nfs_cache_ms),
            data_cache_dir: self.data_cache_dir.as_deref(),
        };
        let mut fresh = Vec::new();
        for (i, launch, description) in &ours {
            match stack::start(&scenarios[*i].name, description, launch, &env) {
                Ok(s) => fresh.push((*i, s)),
                Err(e) => {
                    let name = scenarios[*i].name.clone();
                    return self.fail(&name, "restart", e);
                }
            }
        }
        if let Some(n) = &nfs {
            self.pin_server("rustnfs", n.pid);
        }
        for (i, s) in fresh {
            for pid in s.parts.iter().filter_map(|p| p.pid()) {
                self.pin_server(&s.name, pid);
            }
            warm(&s, &self.data.info.large_file, &self.data.info.small_file);
            // The old stack stops here, before the old rustnfs below.
            scenarios[i] = s;
        }
        if nfs.is_some() {
            self.rustnfs = nfs;
        }
    }
}

/// Renames the logs of the servers about to be restarted (`rustnfs.log` →
/// `rustnfs.round-1.log`): the old processes keep writing to them until they stop,
/// and the fresh ones get logs of their own.
fn keep_logs<'a>(dir: &Path, names: impl Iterator<Item = &'a str>, round: usize) {
    for name in names {
        let stem = file_name(name);
        let _ = std::fs::rename(
            dir.join(format!("{stem}.log")),
            dir.join(format!("{stem}.round-{round}.log")),
        );
    }
}

/// The warm-up every stack gets before its first measured run.
pub(super) fn warm(s: &Stack, large: &str, small: &str) {
    let _ = Load::new(s.url(&format!("/{large}")), Schedule::Count(4), 2)
        .keepalive(false)
        .run();
    let _ = Load::new(s.url(&format!("/{small}")), Schedule::Count(200), 4).run();
}

//! The NFS-level phase: sequential READ and the metadata mix straight against rustnfs
//! and Ganesha with our load generator, over NFSv3 and over NFSv4.0, and rustnfs's
//! per-procedure latencies for every workload that went through it (HTTP via A
//! included).

use std::collections::BTreeMap;
use std::time::Duration;

use loadgen::NfsWorkload;

use super::RunContext;
use crate::compare::rows;
use crate::experiment::interrupt::Interrupted;
use crate::experiment::load::{Load, interleaved, rotation};
use crate::experiment::ours::Metrics;

/// One NFS-level target.
struct NfsTarget {
    /// The row's name: `rustnfs`, `ganesha (NFSv4.0)`, …
    server: String,
    read_url: String,
    meta_url: String,
    /// rustnfs's metrics, for its procedure latencies.
    metrics: Option<Metrics>,
}

impl RunContext<'_> {
    /// Each NFS server over NFSv3 and, as its pseudo-root, over NFSv4.0 (as root, as the
    /// v3 runs: both export without root squash).
    fn nfs_targets(&self) -> Vec<NfsTarget> {
        let (large, scratch) = (&self.data.info.large_file, &self.scratch.name);
        let mut v = Vec::new();
        for n in [&self.rustnfs, &self.ganesha].into_iter().flatten() {
            v.push(NfsTarget {
                server: n.name.to_string(),
                read_url: n.export.url(large),
                meta_url: n.export.url(scratch),
                metrics: n.metrics.clone(),
            });
            if let (Some(read_url), Some(meta_url)) =
                (n.export.v4_url(large), n.export.v4_url(scratch))
            {
                v.push(NfsTarget {
                    server: format!("{} (NFSv4.0)", n.name),
                    read_url,
                    meta_url,
                    metrics: n.metrics.clone(),
                });
            }
        }
        v
    }

    /// Sequential READ and the metadata mix straight against each NFS server.
    pub(super) fn measure_nfs(&mut self) -> Result<(), Interrupted> {
        let targets = self.nfs_targets();
        let workloads = [
            ("read", NfsWorkload::Read),
            ("metadata", NfsWorkload::Metadata),
        ];
        let expected = Duration::from_secs_f64(self.opts.nfs_seconds);
        // Keyed by the server's name: the rows come out by workload, then by name.
        let mut acc: BTreeMap<(usize, String), Vec<loadgen::Report>> = BTreeMap::new();
        let numbered: Vec<(usize, &(&str, NfsWorkload))> = workloads.iter().enumerate().collect();
        for (rep, &(wi, &(wname, wl))) in interleaved(self.opts.repeat, &numbered) {
            for ti in rotation(rep, targets.len()) {
                let t = &targets[ti];
                let what = format!(
                    "run {}/{} nfs {wname:>8} {}",
                    rep + 1,
                    self.opts.repeat,
                    t.server
                );
                self.progress.step(expected, what)?;
                let url = if wl == NfsWorkload::Read {
                    &t.read_url
                } else {
                    &t.meta_url
                };
                let before = t.metrics.as_ref().and_then(|m| m.scrape().ok());
                let result = Load::for_seconds(url, self.opts.nfs_seconds, self.opts.nfs_clients)
                    .nfs(wl)
                    .run();
                match result {
                    Ok(r) => acc.entry((wi, t.server.clone())).or_default().push(r),
                    Err(e) => self.fail(&t.server, &format!("nfs {wname}"), e),
                }
                if let (Some(before), Some(m)) = (before, &t.metrics) {
                    let key = if t.server.ends_with("(NFSv4.0)") {
                        format!("NFS {wname} over NFSv4.0")
                    } else {
                        format!("NFS {wname}")
                    };
                    Self::add_nfs_phases(&mut self.nfs_phases, key, m, &before);
                }
            }
        }
        for ((wi, server), runs) in acc {
            self.report.nfs.push(rows::nfs_row(
                workloads[wi].0,
                &server,
                self.opts.nfs_clients,
                &runs,
            ));
        }
        let procedures = rows::procedure_rows(&self.nfs_phases);
        self.report.nfs_procedures.extend(procedures);
        Ok(())
    }
}

//! The NFS-level phase: sequential READ and the metadata mix straight against rustnfs
//! and Ganesha with our load generator, over NFSv3 and over NFSv4.0, and rustnfs's per-procedure latencies for every
//! workload that went through it (HTTP via A included).

use std::collections::BTreeMap;

use loadgen::NfsWorkload;

use super::RunContext;
use crate::compare::rows;
use crate::measure::{Load, interleave, rotation};

/// One NFS-level target.
struct NfsTarget {
    server: &'static str,
    read_url: String,
    meta_url: String,
}

impl RunContext<'_> {
    fn nfs_targets(&self) -> Vec<NfsTarget> {
        let mut v = Vec::new();
        let (large, scratch) = (&self.info.large_file, &self.scratch.name);
        // Over NFSv4.0 the export is the pseudo-root of both servers (Ganesha is started
        // serving v3 and v4); as root, as the v3 runs (both export without root squash).
        let v4 = |port: u16, path: &str| {
            format!("nfs://127.0.0.1/{path}?version=4&nfsport={port}&uid=0&gid=0")
        };
        if let Some(n) = &self.rustnfs {
            v.push(NfsTarget {
                server: "rustnfs",
                read_url: format!("nfs://{}//{large}", n.addr),
                meta_url: format!("nfs://{}//{scratch}", n.addr),
            });
            v.push(NfsTarget {
                server: "rustnfs (NFSv4.0)",
                read_url: v4(n.addr.port(), large),
                meta_url: v4(n.addr.port(), scratch),
            });
        }
        if let Some(g) = &self.ganesha {
            let root = self.info.root.display();
            let q = format!("?mountport={}", g.extra_port.unwrap_or(0));
            v.push(NfsTarget {
                server: "ganesha",
                read_url: format!("nfs://{}{root}//{large}{q}", g.addr),
                meta_url: format!("nfs://{}{root}//{scratch}{q}", g.addr),
            });
            v.push(NfsTarget {
                server: "ganesha (NFSv4.0)",
                read_url: v4(g.addr.port(), large),
                meta_url: v4(g.addr.port(), scratch),
            });
        }
        v
    }

    /// Sequential READ and the metadata mix straight against each NFS server.
    pub(super) fn measure_nfs(&mut self) {
        let targets = self.nfs_targets();
        let workloads = [
            ("read", NfsWorkload::Read),
            ("metadata", NfsWorkload::Metadata),
        ];
        let mut acc: BTreeMap<(usize, &'static str), Vec<loadgen::Report>> = BTreeMap::new();
        let numbered: Vec<(usize, &(&str, NfsWorkload))> = workloads.iter().enumerate().collect();
        interleave(self.opts.repeat, &numbered, |rep, &(wi, &(wname, wl))| {
            for ti in rotation(rep, targets.len()) {
                let t = &targets[ti];
                eprintln!(
                    "servelab compare: run {}/{} nfs {wname:>8} {}",
                    rep + 1,
                    self.opts.repeat,
                    t.server
                );
                let url = if wl == NfsWorkload::Read {
                    &t.read_url
                } else {
                    &t.meta_url
                };
                let before = self
                    .rustnfs
                    .as_ref()
                    .filter(|_| t.server.starts_with("rustnfs"))
                    .and_then(|p| p.scrape().ok());
                let result = Load::for_seconds(url, self.opts.nfs_seconds, self.opts.nfs_clients)
                    .nfs(wl)
                    .run();
                match result {
                    Ok(r) => acc.entry((wi, t.server)).or_default().push(r),
                    Err(e) => self.fail(t.server, &format!("nfs {wname}"), e),
                }
                if let (Some(before), Some(nfs)) = (before, &self.rustnfs) {
                    Self::add_nfs_phases(
                        &mut self.nfs_phases,
                        if t.server.ends_with("(NFSv4.0)") {
                            format!("NFS {wname} over NFSv4.0")
                        } else {
                            format!("NFS {wname}")
                        },
                        nfs,
                        &before,
                    );
                }
            }
        });
        for ((wi, server), runs) in acc {
            self.report.nfs.push(rows::nfs_row(
                workloads[wi].0,
                server,
                self.opts.nfs_clients,
                &runs,
            ));
        }
        let procedures = rows::procedure_rows(&self.nfs_phases);
        self.report.nfs_procedures.extend(procedures);
    }
}

//! What the suite measures with: our servers and the peers as serving stacks (started by
//! the experiment layer; a missing peer is a [`Skip`]), the tools when installed, and
//! how the measuring loop reaches each.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use lab::find_program;
use lab::peers::Baseline;
use lab::sampler;

use super::names::*;
use super::options::{BenchOptions, Group};
use super::record::Skip;
use crate::experiment::nfs::{NfsExport, NfsServer};
use crate::experiment::peers::{self, Started};
use crate::experiment::probe::Part;
use crate::experiment::stack::{self, Launch, Stack, StartEnv};

/// One HTTP server under test, as the measuring loop reaches it.
#[derive(Debug, Clone)]
pub struct HttpServer {
    pub name: &'static str,
    pub addr: SocketAddr,
    /// The HTTP server's process tree: what the sampler watches.
    pub part: Part,
}

/// One NFS server under test: its name, its process and its export's URLs.
#[derive(Debug, Clone)]
pub struct NfsTarget {
    pub name: &'static str,
    pub pid: u32,
    pub export: NfsExport,
}

/// Resident memory of one of our servers when idle at the start of the run.
#[derive(Debug, Clone, Copy)]
pub struct IdleRss {
    pub name: &'static str,
    pub pid: u32,
    pub bytes: u64,
}

/// Every server the suite started. Dropping it stops them: the HTTP stacks first (httpd
/// on NFS before its rustnfs goes), the NFS servers last — the fields' order.
pub struct Servers {
    pub http: Vec<HttpServer>,
    pub nfs: Vec<NfsTarget>,
    /// nginx also serves the load-generator comparison.
    pub nginx: Option<SocketAddr>,
    pub idle: Vec<IdleRss>,
    _stacks: Vec<Stack>,
    _nfs_servers: Vec<NfsServer>,
}

impl Servers {
    /// rustnfs, httpd on local files and on rustnfs; nginx always (the load-generator
    /// group measures on it), Apache and h2o for `http`, Ganesha for `nfs`.
    pub fn start(
        root: &Path,
        log_dir: &Path,
        opts: &BenchOptions,
        skipped: &mut Vec<Skip>,
    ) -> anyhow::Result<Servers> {
        let rustnfs = NfsServer::start_rustnfs(root, log_dir)?;
        let idle_rustnfs = settle_rss(rustnfs.pid);
        let env = StartEnv {
            root,
            log_dir,
            rustnfs: Some(&rustnfs),
            ganesha: None,
            nfs_cache_ms: None,
            data_cache_dir: None,
        };
        let no_cache = Launch::HttpdRustnfs {
            link: None,
            data_cache: None,
        };
        let mut stacks = vec![
            stack::start(HTTPD_LOCAL, "", &Launch::HttpdLocal, &env)?,
            stack::start(HTTPD_NFS, "", &no_cache, &env)?,
        ];
        let mut idle = vec![IdleRss {
            name: RUSTNFS,
            pid: rustnfs.pid,
            bytes: idle_rustnfs,
        }];
        for (name, s) in [HTTPD_LOCAL, HTTPD_NFS].into_iter().zip(&stacks) {
            let pid = s.parts[0].pid().unwrap_or(0);
            idle.push(IdleRss {
                name,
                pid,
                bytes: settle_rss(pid),
            });
        }
        let mut peers: Vec<(&'static str, Baseline)> = vec![(NGINX, Baseline::Nginx)];
        if opts.wants(Group::Http) {
            peers.extend([(APACHE, Baseline::Apache), (H2O, Baseline::H2o)]);
        }
        let mut nginx = None;
        for (name, b) in peers {
            if let Some(server) = start_peer(b, root, skipped) {
                nginx = nginx.or((b == Baseline::Nginx).then_some(server.addr));
                let mut s = Stack::new(name, server.addr, vec![Part::process(name, server.pid())]);
                s.hold(server);
                stacks.push(s);
            }
        }
        // Ganesha serves v3 and v4 (its pseudo-root the export), so the NFSv4.0 rows
        // have their control.
        let ganesha = opts
            .wants(Group::Nfs)
            .then(|| start_peer(Baseline::Ganesha, root, skipped))
            .flatten()
            .map(NfsServer::ganesha);
        let nfs_servers: Vec<NfsServer> = std::iter::once(rustnfs).chain(ganesha).collect();
        Ok(Servers {
            http: stacks.iter().map(http_server).collect(),
            nfs: nfs_servers
                .iter()
                .map(|n| NfsTarget {
                    name: n.name,
                    pid: n.pid,
                    export: n.export.clone(),
                })
                .collect(),
            nginx,
            idle,
            _stacks: stacks,
            _nfs_servers: nfs_servers,
        })
    }
}

/// How the loop reaches a stack: its address and its front server's process tree.
fn http_server(s: &Stack) -> HttpServer {
    let name = [HTTPD_LOCAL, HTTPD_NFS, NGINX, APACHE, H2O]
        .into_iter()
        .find(|n| *n == s.name)
        .unwrap_or("?");
    HttpServer {
        name,
        addr: s.addr,
        part: s.parts[0].clone(),
    }
}

/// A peer when installed and it starts; a [`Skip`] saying why not otherwise.
fn start_peer(
    b: Baseline,
    root: &Path,
    skipped: &mut Vec<Skip>,
) -> Option<lab::peers::ExternalServer> {
    match peers::start(b, root) {
        Started::Running(s) => Some(*s),
        other => {
            skipped.push(Skip::new(b.name(), other.why_not().unwrap_or_default()));
            None
        }
    }
}

/// The client tools found on this machine.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The HTTP load generators side by side: ours, and wrk when installed.
    pub http: Vec<&'static str>,
    pub ab: bool,
    pub iperf3: bool,
    pub nfs_cat: bool,
}

impl Tools {
    /// Looks for wrk, ab, iperf3 and nfs-cat; a missing one the chosen groups need is a
    /// [`Skip`].
    pub fn detect(opts: &BenchOptions, skipped: &mut Vec<Skip>) -> Tools {
        let has = |t: &str| find_program(t).is_some();
        let mut http = vec![LOAD];
        if has("wrk") {
            http.push(WRK);
        } else {
            skipped.push(Skip::new(WRK, "wrk is not installed (apt-get install wrk)"));
        }
        let ab = has("ab");
        if !ab && opts.wants(Group::Loadgen) {
            skipped.push(Skip::new(
                AB,
                "ab is not installed (apt-get install apache2-utils)",
            ));
        }
        let iperf3 = has("iperf3");
        if !iperf3 && opts.wants(Group::Loadgen) {
            skipped.push(Skip::new(IPERF3, "iperf3 is not installed"));
        }
        let nfs_cat = has("nfs-cat");
        if !nfs_cat && opts.wants(Group::Nfs) {
            skipped.push(Skip::new(
                NFS_CAT,
                "nfs-cat is not installed (libnfs-utils)",
            ));
        }
        Tools {
            http,
            ab,
            iperf3,
            nfs_cat,
        }
    }

    /// The load generators compared on nginx: ours, wrk, ab — those installed.
    pub fn loadgen(&self) -> Vec<&'static str> {
        let mut v = vec![LOAD];
        if self.http.contains(&WRK) {
            v.push(WRK);
        }
        if self.ab {
            v.push(AB);
        }
        v
    }

    /// The single-stream TCP tools: ours, and iperf3 when installed.
    pub fn tcp(&self) -> Vec<&'static str> {
        let mut v = vec![LOAD];
        if self.iperf3 {
            v.push(IPERF3);
        }
        v
    }
}

/// Resident memory after a short quiet moment (so a burst just before does not count).
pub fn settle_rss(pid: u32) -> u64 {
    std::thread::sleep(Duration::from_millis(300));
    sampler::tree_rss_bytes(pid)
}

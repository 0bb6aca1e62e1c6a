//! What the suite measures with: our servers as child processes, the peers and tools
//! when installed (a missing one is a [`Skip`]), and how the measuring loop reaches each.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use lab::find_program;
use lab::peers::{Baseline, ExternalServer};
use lab::sampler;

use super::names::*;
use super::options::{BenchOptions, Group};
use super::record::Skip;
use crate::ours::ServerProcess;

/// One HTTP server under test.
#[derive(Debug, Clone, Copy)]
pub struct HttpServer {
    pub name: &'static str,
    pub addr: SocketAddr,
    /// Whose process tree the sampler watches.
    pub pid: u32,
}

/// One NFS server under test: how loadgen and nfs-cat reach its files.
#[derive(Debug, Clone)]
pub struct NfsServer {
    pub name: &'static str,
    pub pid: u32,
    /// `nfs://host:port<export>//` — append a path inside the export.
    url_prefix: String,
    /// `?mountport=N` (Ganesha) or empty.
    query: String,
    /// nfs-cat's URL for a path inside the export.
    libnfs_prefix: String,
    libnfs_query: String,
    /// The NFSv4.0 port when the server speaks v4 with the export as its pseudo-root.
    v4_port: Option<u16>,
}

impl NfsServer {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}{}", self.url_prefix, self.query)
    }
    pub fn libnfs_url(&self, path: &str) -> String {
        format!("{}{path}{}", self.libnfs_prefix, self.libnfs_query)
    }
    /// loadgen's NFSv4.0 URL for a path inside the export (as root, like the v3 runs).
    pub fn v4_url(&self, path: &str) -> Option<String> {
        self.v4_port
            .map(|p| format!("nfs://127.0.0.1/{path}?version=4&nfsport={p}&uid=0&gid=0"))
    }
}

/// Resident memory of one of our servers when idle at the start of the run.
#[derive(Debug, Clone, Copy)]
pub struct IdleRss {
    pub name: &'static str,
    pub pid: u32,
    pub bytes: u64,
}

/// Every server the suite started. Dropping it stops them: the peers first, then httpd
/// (its NFS client before rustnfs goes), rustnfs last — the fields' order.
pub struct Servers {
    pub http: Vec<HttpServer>,
    pub nfs: Vec<NfsServer>,
    /// nginx also serves the load-generator comparison.
    pub nginx: Option<SocketAddr>,
    pub idle: Vec<IdleRss>,
    _nginx: Option<ExternalServer>,
    _apache: Option<ExternalServer>,
    _h2o: Option<ExternalServer>,
    _ganesha: Option<ExternalServer>,
    _httpd_nfs: ServerProcess,
    _httpd_local: ServerProcess,
    _rustnfs: ServerProcess,
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
        let root_s = root.display().to_string();
        let rustnfs = ServerProcess::start(
            RUSTNFS,
            "rustnfs",
            // As the Ganesha peer (No_Root_Squash): the load runs as root.
            &["--export".into(), root_s.clone(), "--no-root-squash".into()],
            log_dir,
        )?;
        let idle_rustnfs = settle_rss(rustnfs.pid());
        let httpd_local = ServerProcess::start(
            HTTPD_LOCAL,
            "httpd",
            &["--root".into(), root_s.clone()],
            log_dir,
        )?;
        let httpd_nfs = ServerProcess::start(
            HTTPD_NFS,
            "httpd",
            &["--nfs".into(), format!("nfs://{}/", rustnfs.addr)],
            log_dir,
        )?;
        let idle = vec![
            IdleRss {
                name: RUSTNFS,
                pid: rustnfs.pid(),
                bytes: idle_rustnfs,
            },
            IdleRss {
                name: HTTPD_LOCAL,
                pid: httpd_local.pid(),
                bytes: settle_rss(httpd_local.pid()),
            },
            IdleRss {
                name: HTTPD_NFS,
                pid: httpd_nfs.pid(),
                bytes: settle_rss(httpd_nfs.pid()),
            },
        ];
        let nginx = start_peer(Baseline::Nginx, root, skipped);
        let apache = opts
            .wants(Group::Http)
            .then(|| start_peer(Baseline::Apache, root, skipped))
            .flatten();
        let h2o = opts
            .wants(Group::Http)
            .then(|| start_peer(Baseline::H2o, root, skipped))
            .flatten();
        // Ganesha serves v3 and v4 (its pseudo-root the export), so the NFSv4.0 rows
        // have their control.
        let ganesha = opts
            .wants(Group::Nfs)
            .then(|| start_peer(Baseline::Ganesha, root, skipped))
            .flatten();

        let mut http = vec![
            HttpServer {
                name: HTTPD_LOCAL,
                addr: httpd_local.addr,
                pid: httpd_local.pid(),
            },
            HttpServer {
                name: HTTPD_NFS,
                addr: httpd_nfs.addr,
                pid: httpd_nfs.pid(),
            },
        ];
        for (name, peer) in [(NGINX, &nginx), (APACHE, &apache), (H2O, &h2o)] {
            if let Some(p) = peer {
                http.push(HttpServer {
                    name,
                    addr: p.addr,
                    pid: p.pid(),
                });
            }
        }
        let mut nfs = vec![NfsServer {
            name: RUSTNFS,
            pid: rustnfs.pid(),
            url_prefix: format!("nfs://{}//", rustnfs.addr),
            query: String::new(),
            libnfs_prefix: "nfs://127.0.0.1//".to_string(),
            libnfs_query: format!(
                "?version=3&nfsport={p}&mountport={p}",
                p = rustnfs.addr.port()
            ),
            v4_port: Some(rustnfs.addr.port()),
        }];
        if let Some(g) = &ganesha {
            let mnt = g.extra_port.unwrap_or(0);
            nfs.push(NfsServer {
                name: GANESHA,
                pid: g.pid(),
                url_prefix: format!("nfs://{}{root_s}//", g.addr),
                query: format!("?mountport={mnt}"),
                libnfs_prefix: format!("nfs://127.0.0.1{root_s}/"),
                libnfs_query: format!("?version=3&nfsport={}&mountport={mnt}", g.addr.port()),
                v4_port: Some(g.addr.port()),
            });
        }
        Ok(Servers {
            http,
            nfs,
            nginx: nginx.as_ref().map(|n| n.addr),
            idle,
            _nginx: nginx,
            _apache: apache,
            _h2o: h2o,
            _ganesha: ganesha,
            _httpd_nfs: httpd_nfs,
            _httpd_local: httpd_local,
            _rustnfs: rustnfs,
        })
    }
}

/// A peer when installed and it starts; a [`Skip`] saying why not otherwise.
fn start_peer(b: Baseline, root: &Path, skipped: &mut Vec<Skip>) -> Option<ExternalServer> {
    if let Err(why) = b.detect() {
        skipped.push(Skip::new(b.name(), why));
        return None;
    }
    if b == Baseline::KernelNfs {
        return None;
    }
    let started = match b {
        Baseline::Ganesha => lab::peers::start_ganesha_v4(root),
        _ => b.start(root),
    };
    match started {
        Ok(s) => Some(s),
        Err(e) => {
            skipped.push(Skip::new(
                b.name(),
                format!("installed but did not start: {e}"),
            ));
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

//! NFS servers of a run and every URL that reaches them: one [`NfsExport`] per export
//! builds the load generator's NFSv3 and NFSv4.0 URLs, libnfs's (`nfs-cat`) and httpd's
//! `--nfs`, so a new server or a new client form is one place; [`NfsServer`] is a
//! started rustnfs or NFS-Ganesha with its export.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use lab::peers::ExternalServer;

use super::ours::{Metrics, ServerProcess};

/// How to reach one NFS export.
#[derive(Debug, Clone, PartialEq)]
pub struct NfsExport {
    pub ip: IpAddr,
    /// The NFS port; `None`: the default (2049), as a container on its own IP serves.
    pub port: Option<u16>,
    /// The MOUNT path; empty for a server with a single export at its root (rustnfs),
    /// which clients name with `//` (`nfs://host//file`).
    pub export: String,
    /// The MOUNT port when it is not the NFS port (Ganesha).
    pub mount_port: Option<u16>,
    /// Whether it serves NFSv4.0 with the export as its pseudo-root.
    pub v4: bool,
}

impl NfsExport {
    /// rustnfs on `addr`: NFS and MOUNT on one port, v3 and v4.
    pub fn rustnfs(addr: SocketAddr) -> NfsExport {
        NfsExport {
            ip: addr.ip(),
            port: Some(addr.port()),
            export: String::new(),
            mount_port: None,
            v4: true,
        }
    }

    /// NFS-Ganesha as `lab` starts it: `root` exported under its own path, MOUNT on the
    /// second port, v4 with the export as its pseudo-root.
    pub fn ganesha(g: &ExternalServer) -> NfsExport {
        NfsExport {
            ip: g.addr.ip(),
            port: Some(g.addr.port()),
            export: g.root().display().to_string(),
            mount_port: Some(g.extra_port.unwrap_or(0)),
            v4: true,
        }
    }

    /// An export `export` on the default port of `ip` (rustnfs in a container).
    pub fn at(ip: IpAddr, export: &str) -> NfsExport {
        NfsExport {
            ip,
            port: None,
            export: export.to_string(),
            mount_port: None,
            v4: false,
        }
    }

    fn host(&self) -> String {
        match self.port {
            Some(p) => SocketAddr::new(self.ip, p).to_string(),
            None => self.ip.to_string(),
        }
    }

    fn mount_query(&self) -> String {
        self.mount_port
            .map(|m| format!("?mountport={m}"))
            .unwrap_or_default()
    }

    /// `servelab load`'s NFSv3 URL of `path` inside the export (`EXPORT//PATH`).
    pub fn url(&self, path: &str) -> String {
        format!(
            "nfs://{}{}//{path}{}",
            self.host(),
            self.export,
            self.mount_query()
        )
    }

    /// `servelab load`'s NFSv4.0 URL of `path` from the pseudo-root, as root (uid 0, like
    /// the v3 runs: the exports do not squash root); `None` without v4.
    pub fn v4_url(&self, path: &str) -> Option<String> {
        let port = self.port.filter(|_| self.v4)?;
        Some(format!(
            "nfs://{}/{path}?version=4&nfsport={port}&uid=0&gid=0",
            self.ip
        ))
    }

    /// libnfs's URL (`nfs-cat`) of `path`: ports given, NFSv3.
    pub fn libnfs_url(&self, path: &str) -> String {
        let port = self.port.unwrap_or(2049);
        // A single export at the root is `//file` for libnfs too (an empty MOUNT path
        // would be refused).
        let sep = if self.export.is_empty() { "/" } else { "" };
        format!(
            "nfs://{}{}/{sep}{path}?version=3&nfsport={port}&mountport={}",
            self.ip,
            self.export,
            self.mount_port.unwrap_or(port)
        )
    }

    /// What `httpd --nfs` takes: the export itself.
    pub fn httpd_url(&self) -> String {
        let export = if self.export.is_empty() {
            "/"
        } else {
            &self.export
        };
        format!("nfs://{}{export}{}", self.host(), self.mount_query())
    }
}

/// A started NFS server of a run: rustnfs as a child of ours, or NFS-Ganesha.
pub struct NfsServer {
    /// `rustnfs` or `ganesha` (as the reports name it).
    pub name: &'static str,
    /// The process that serves it: `rustnfs` or `ganesha.nfsd`.
    pub process: &'static str,
    pub export: NfsExport,
    pub pid: u32,
    /// rustnfs's metrics endpoint (per-procedure latencies); Ganesha's are not read.
    pub metrics: Option<Metrics>,
    /// The process, held so it runs as long as this value.
    _server: Box<dyn std::any::Any>,
}

impl NfsServer {
    /// rustnfs exporting `root` read-write without root squash, as the Ganesha peer
    /// exports it (the load runs as root).
    pub fn start_rustnfs(root: &Path, log_dir: &Path) -> anyhow::Result<NfsServer> {
        let p = ServerProcess::start("rustnfs", "rustnfs", &rustnfs_args(root), log_dir)?;
        Ok(Self::rustnfs(p))
    }

    /// A started rustnfs (one placed in a namespace, say).
    pub fn rustnfs(p: ServerProcess) -> NfsServer {
        NfsServer {
            name: "rustnfs",
            process: "rustnfs",
            export: NfsExport::rustnfs(p.addr),
            pid: p.pid(),
            metrics: Some(p.metrics()),
            _server: Box::new(p),
        }
    }

    /// A started NFS-Ganesha.
    pub fn ganesha(g: ExternalServer) -> NfsServer {
        NfsServer {
            name: "ganesha",
            process: "ganesha.nfsd",
            export: NfsExport::ganesha(&g),
            pid: g.pid(),
            metrics: None,
            _server: Box::new(g),
        }
    }
}

/// rustnfs's arguments for exporting `root` as the runs use it.
pub fn rustnfs_args(root: &Path) -> Vec<String> {
    vec![
        "--export".into(),
        root.display().to_string(),
        "--no-root-squash".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_url_form() {
        let r = NfsExport::rustnfs("127.0.0.1:2050".parse().unwrap());
        assert_eq!(r.url("big.bin"), "nfs://127.0.0.1:2050//big.bin");
        assert_eq!(
            r.v4_url("big.bin").unwrap(),
            "nfs://127.0.0.1/big.bin?version=4&nfsport=2050&uid=0&gid=0"
        );
        assert_eq!(
            r.libnfs_url("big.bin"),
            "nfs://127.0.0.1//big.bin?version=3&nfsport=2050&mountport=2050"
        );
        assert_eq!(r.httpd_url(), "nfs://127.0.0.1:2050/");
        let g = NfsExport {
            ip: "127.0.0.1".parse().unwrap(),
            port: Some(2051),
            export: "/tmp/www".into(),
            mount_port: Some(2052),
            v4: true,
        };
        assert_eq!(
            g.url("big.bin"),
            "nfs://127.0.0.1:2051/tmp/www//big.bin?mountport=2052"
        );
        assert_eq!(
            g.libnfs_url("big.bin"),
            "nfs://127.0.0.1/tmp/www/big.bin?version=3&nfsport=2051&mountport=2052"
        );
        assert_eq!(g.httpd_url(), "nfs://127.0.0.1:2051/tmp/www?mountport=2052");
        let c = NfsExport::at("10.205.148.2".parse().unwrap(), "/nfs-share");
        assert_eq!(c.httpd_url(), "nfs://10.205.148.2/nfs-share");
        assert_eq!(c.v4_url("x"), None);
    }
}

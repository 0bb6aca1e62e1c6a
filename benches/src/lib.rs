//! Shared fixtures for the criterion benches, on the harness crate (`lab`): one dataset
//! served in-process on loopback, so each bench measures one hot path and not setup.
//!
//! # Layout
//! - [`Lab`]: the harness's seeded dataset (a 4 KiB and a 10 MiB file) served by rustnfs,
//!   httpd from local disk and httpd through rustnfs, on one multi-threaded tokio runtime
//!   (`lab::inproc`).
//! - The HTTP client is the harness's keep-alive [`lab::http::Connection`]: `get_len`
//!   reads a whole response and returns the body length (no allocation per request
//!   beyond the reused buffer).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lab::http::Connection;
use lab::inproc::{Httpd, Nfsd};

/// The small file: one page, the latency-bound case.
pub const SMALL: &str = lab::dataset::SMALL_FILE;
/// The large file: 10 MiB, the throughput-bound case (the original experiment's size).
pub const LARGE: &str = lab::dataset::LARGE_FILE;
/// Size of [`LARGE`].
pub const LARGE_BYTES: usize = 10 << 20;
/// Size of [`SMALL`].
pub const SMALL_BYTES: usize = 4096;
/// Read timeout of a bench's HTTP connection.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// In-process servers over one dataset; everything stops when it is dropped.
pub struct Lab {
    // Field order matters: the servers are asked to stop before their runtime goes.
    _nfsd: Nfsd,
    _local: Httpd,
    _through_nfs: Httpd,
    pub rt: tokio::runtime::Runtime,
    pub root: PathBuf,
    /// rustnfs (NFSv3 + MOUNT on one port).
    pub nfs: SocketAddr,
    /// httpd serving `root` from local disk.
    pub http_local: SocketAddr,
    /// httpd serving the same files through its NFS client from rustnfs.
    pub http_nfs: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Lab {
    /// Writes the dataset and starts the three servers (2 runtime threads, like the
    /// 2-core machine the suite targets).
    pub fn start() -> lab::Result<Lab> {
        let dir = tempfile::tempdir().map_err(|e| lab::LabError::io("no temp dir", e))?;
        let root = dir.path().join("www");
        let spec = lab::dataset::DatasetSpec {
            large_bytes: LARGE_BYTES as u64,
            small_bytes: SMALL_BYTES as u64,
            small_set_files: 16,
            ..Default::default()
        };
        lab::dataset::generate(&root, spec)
            .map_err(|e| lab::LabError::io("cannot write the dataset", e))?;
        let rt = lab::inproc::runtime()?;
        let on = Some(rt.handle());
        let nfsd = Nfsd::start_on(on, rustnfs::Config::new(&root))?;
        let local = Httpd::start_on(on, "127.0.0.1:0", httpd::Config::local(&root))?;
        let through_nfs =
            Httpd::start_on(on, "127.0.0.1:0", httpd::Config::nfs(nfsd.export_url()))?;
        for h in [&local, &through_nfs] {
            let n = Connection::connect(h.addr, HTTP_TIMEOUT)?.get_len(&format!("/{SMALL}"))?;
            if n != SMALL_BYTES {
                return Err(lab::LabError::Failed(format!(
                    "{}: {n} bytes, not {SMALL_BYTES}",
                    h.addr
                )));
            }
        }
        Ok(Lab {
            nfs: nfsd.addr,
            http_local: local.addr,
            http_nfs: through_nfs.addr,
            _nfsd: nfsd,
            _local: local,
            _through_nfs: through_nfs,
            rt,
            root,
            _dir: dir,
        })
    }

    /// `nfs://ADDR//name`: a file in rustnfs's export, as nfsclient and loadgen take it.
    pub fn nfs_url(&self, name: &str) -> String {
        format!("nfs://{}//{name}", self.nfs)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_serves_the_same_bytes_everywhere() {
        let lab = Lab::start().unwrap();
        for addr in [lab.http_local, lab.http_nfs] {
            let mut c = Connection::connect(addr, HTTP_TIMEOUT).unwrap();
            assert_eq!(c.get_len(&format!("/{LARGE}")).unwrap(), LARGE_BYTES);
            assert_eq!(c.get_len(&format!("/{SMALL}")).unwrap(), SMALL_BYTES);
            assert!(c.get_len("/missing").is_err());
        }
    }
}

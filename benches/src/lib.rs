//! Shared fixtures for the criterion benches: in-process servers on loopback and a
//! minimal blocking HTTP/1.1 client, so each bench measures one hot path and not setup.
//!
//! # Layout
//! - [`Lab`]: a dataset (a 4 KiB and a 10 MiB file) served in-process by rustnfs, httpd
//!   from local disk and httpd through rustnfs, on one multi-threaded tokio runtime.
//! - [`HttpClient`]: one keep-alive connection; `get` reads a whole response and returns
//!   the body length (no allocation per request beyond the reused buffer).

use std::io::{self, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::oneshot;

/// The small file: one page, the latency-bound case.
pub const SMALL: &str = "small.bin";
/// The large file: 10 MiB, the throughput-bound case (the original experiment's size).
pub const LARGE: &str = "large.bin";
/// Size of [`LARGE`].
pub const LARGE_BYTES: usize = 10 << 20;
/// Size of [`SMALL`].
pub const SMALL_BYTES: usize = 4096;

/// In-process servers over one dataset; everything stops when it is dropped.
pub struct Lab {
    pub rt: tokio::runtime::Runtime,
    pub root: PathBuf,
    /// rustnfs (NFSv3 + MOUNT on one port).
    pub nfs: SocketAddr,
    /// httpd serving `root` from local disk.
    pub http_local: SocketAddr,
    /// httpd serving the same files through its NFS client from rustnfs.
    pub http_nfs: SocketAddr,
    stops: Vec<oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Lab {
    /// Writes the dataset and starts the three servers (2 runtime threads, like the
    /// 2-core machine the suite targets).
    pub fn start() -> io::Result<Lab> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().join("www");
        std::fs::create_dir_all(root.join("dir"))?;
        std::fs::write(root.join(SMALL), pattern(SMALL_BYTES))?;
        std::fs::write(root.join(LARGE), pattern(LARGE_BYTES))?;
        for i in 0..16 {
            std::fs::write(root.join("dir").join(format!("f{i:02}")), pattern(100))?;
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let mut stops = Vec::new();
        let nfs = rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            let (tx, rx) = oneshot::channel::<()>();
            stops.push(tx);
            let config = rustnfs::Config::new(&root);
            let registry = latency::Registry::new("rustnfs_nfs");
            tokio::spawn(async move {
                if let Err(e) = rustnfs::serve(listener, config, registry, async {
                    let _ = rx.await;
                })
                .await
                {
                    eprintln!("rustnfs stopped: {e}");
                }
            });
            io::Result::Ok(addr)
        })?;
        let http_local = start_httpd(&rt, httpd::Config::local(&root), &mut stops)?;
        let http_nfs = start_httpd(&rt, httpd::Config::nfs(format!("nfs://{nfs}/")), &mut stops)?;
        Ok(Lab {
            rt,
            root,
            nfs,
            http_local,
            http_nfs,
            stops,
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

impl Drop for Lab {
    fn drop(&mut self) {
        for s in self.stops.drain(..) {
            let _ = s.send(());
        }
    }
}

fn start_httpd(
    rt: &tokio::runtime::Runtime,
    config: httpd::Config,
    stops: &mut Vec<oneshot::Sender<()>>,
) -> io::Result<SocketAddr> {
    let (tx, rx) = oneshot::channel::<()>();
    stops.push(tx);
    let addr = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let registry: Arc<latency::Registry> = latency::Registry::new("httpd_request");
        tokio::spawn(async move {
            if let Err(e) = httpd::serve(listener, config, registry, async {
                let _ = rx.await;
            })
            .await
            {
                eprintln!("httpd stopped: {e}");
            }
        });
        io::Result::Ok(addr)
    })?;
    // The NFS backend mounts inside `serve`: wait until a request succeeds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match HttpClient::connect(addr).and_then(|mut c| c.get(&format!("/{SMALL}"))) {
            Ok(n) if n == SMALL_BYTES => return Ok(addr),
            Ok(n) => {
                return Err(io::Error::other(format!(
                    "{addr}: {n} bytes, not {SMALL_BYTES}"
                )));
            }
            Err(e) if std::time::Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

/// Deterministic file contents (not compressible into nothing, not random-cost).
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i.wrapping_mul(31) >> 3) as u8).collect()
}

/// One keep-alive HTTP/1.1 connection with a reusable buffer.
pub struct HttpClient {
    stream: TcpStream,
    buf: Vec<u8>,
    addr: SocketAddr,
}

impl HttpClient {
    pub fn connect(addr: SocketAddr) -> io::Result<HttpClient> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
        Ok(HttpClient {
            stream,
            buf: vec![0; 256 * 1024],
            addr,
        })
    }

    /// GETs `path` and reads the whole body; returns its length. Fails on a non-200
    /// status, a missing Content-Length or a closed connection.
    pub fn get(&mut self, path: &str) -> io::Result<usize> {
        write!(
            self.stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: servelab-bench\r\n\r\n",
            self.addr
        )?;
        // Read until the end of the head.
        let mut filled = 0;
        let head_end = loop {
            let n = self.stream.read(&mut self.buf[filled..])?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
            }
            filled += n;
            if let Some(p) = find(&self.buf[..filled], b"\r\n\r\n") {
                break p + 4;
            }
            if filled == self.buf.len() {
                return Err(io::Error::other("response head too large"));
            }
        };
        let head = std::str::from_utf8(&self.buf[..head_end])
            .map_err(|_| io::Error::other("head is not UTF-8"))?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(io::Error::other(format!(
                "unexpected status: {}",
                head.lines().next().unwrap_or("")
            )));
        }
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .ok_or_else(|| io::Error::other("no Content-Length"))?;
        let mut got = filled - head_end;
        while got < len {
            let want = (len - got).min(self.buf.len());
            let n = self.stream.read(&mut self.buf[..want])?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "body cut"));
            }
            got += n;
        }
        if got != len {
            return Err(io::Error::other("more bytes than Content-Length"));
        }
        Ok(len)
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_serves_the_same_bytes_everywhere() {
        let lab = Lab::start().unwrap();
        for addr in [lab.http_local, lab.http_nfs] {
            let mut c = HttpClient::connect(addr).unwrap();
            assert_eq!(c.get(&format!("/{LARGE}")).unwrap(), LARGE_BYTES);
            assert_eq!(c.get(&format!("/{SMALL}")).unwrap(), SMALL_BYTES);
            assert!(c.get("/missing").is_err());
        }
    }
}

//! Our own servers (rustnfs, httpd, loadgen's TCP server) running in-process on loopback, for tests and
//! benches that need a server but not its binary: bound to a port the kernel picks
//! (or the address given), served until [`InProcess::stop`] or drop.
//!
//! Each runs either on a tokio runtime of its own (2 worker threads, the machine the
//! suite targets) or on a runtime the caller shares between several servers (a bench's
//! servers should not bring six threads to two cores).

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, Runtime};
use tokio::sync::oneshot;

use crate::{LabError, Result};

/// rustnfs in-process.
pub type Nfsd = InProcess<rustnfs::Error>;
/// httpd in-process.
pub type Httpd = InProcess<httpd::Error>;
/// `loadgen::tcp::serve` (the `tcp://` target's server) in-process.
pub type TcpServer = InProcess<std::io::Error>;

/// A server future running in-process; asked to stop gracefully on drop.
pub struct InProcess<E> {
    pub addr: SocketAddr,
    /// Where the server records every call or request.
    pub registry: Arc<latency::Registry>,
    stop: Option<oneshot::Sender<()>>,
    /// What `serve` returned, once it has.
    done: Option<mpsc::Receiver<Result<(), E>>>,
    /// How long drop waits for `serve` to return: rustnfs's tests restart a server on
    /// the same export right after dropping one, httpd's drop must not wait for a client
    /// a test left stalled.
    drop_wait: Duration,
    /// The runtime it owns, if it does not share the caller's.
    rt: Option<Runtime>,
}

/// How a server's listener is made.
enum Bind<'a> {
    /// A plain tokio listener on this address.
    Addr(&'a str),
    /// `loadgen::tcp::bind` (its socket options) on this address.
    Tcp(SocketAddr),
}

/// A new 2-thread runtime for in-process servers.
pub fn runtime() -> Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| LabError::io("cannot build a tokio runtime", e))
}

impl<E: Send + 'static> InProcess<E> {
    /// Binds `bind`, then runs `serve(listener, registry, shutdown)` on `on` (a runtime
    /// of its own when `None`).
    fn spawn<F, S>(
        on: Option<&Handle>,
        bind: Bind<'_>,
        registry: Arc<latency::Registry>,
        drop_wait: Duration,
        serve: S,
    ) -> Result<Self>
    where
        S: FnOnce(
            tokio::net::TcpListener,
            Arc<latency::Registry>,
            std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
        ) -> F,
        F: Future<Output = Result<(), E>> + Send + 'static,
    {
        let (rt, handle) = match on {
            Some(h) => (None, h.clone()),
            None => {
                let rt = runtime()?;
                let h = rt.handle().clone();
                (Some(rt), h)
            }
        };
        let listener = match bind {
            Bind::Addr(a) => handle
                .block_on(tokio::net::TcpListener::bind(a))
                .map_err(|e| LabError::io(format!("cannot bind {a}"), e))?,
            Bind::Tcp(a) => handle
                .block_on(async { loadgen::tcp::bind(a) })
                .map_err(|e| LabError::io(format!("cannot bind {a}"), e))?,
        };
        let addr = listener
            .local_addr()
            .map_err(|e| LabError::io("no local address", e))?;
        let (stop, stopped) = oneshot::channel::<()>();
        let (done_tx, done) = mpsc::channel();
        let shutdown = Box::pin(async {
            let _ = stopped.await;
        });
        let fut = serve(listener, registry.clone(), shutdown);
        handle.spawn(async move {
            let _ = done_tx.send(fut.await);
        });
        Ok(InProcess {
            addr,
            registry,
            stop: Some(stop),
            done: Some(done),
            drop_wait,
            rt,
        })
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// How many samples the registry holds for one (op, phase, status) series.
    pub fn count(&self, op: &str, phase: &str, status: &str) -> u64 {
        self.registry
            .snapshot()
            .get(&latency::Key::new(op, phase, status))
            .map_or(0, |s| s.count())
    }

    /// What `serve` returned if it already has (a start-up error), without waiting.
    pub fn exited(&mut self) -> Option<Result<(), E>> {
        let r = self.done.as_ref()?.try_recv().ok()?;
        self.done = None;
        Some(r)
    }

    /// Asks the server to stop gracefully and waits for `serve` to return: an error when
    /// it returned one, had already returned, or does not return within 40 s.
    pub fn stop(mut self) -> Result<()>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let done = self
            .done
            .take()
            .ok_or_else(|| LabError::Failed("the server had already returned".into()))?;
        match done.recv_timeout(Duration::from_secs(40)) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(LabError::Server {
                what: "serve returned an error".into(),
                source: Box::new(e),
            }),
            Err(_) => Err(LabError::Failed(
                "serve did not return within 40 s of shutdown".into(),
            )),
        }
    }
}

impl<E> Drop for InProcess<E> {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(d) = self.done.take()
            && !self.drop_wait.is_zero()
        {
            let _ = d.recv_timeout(self.drop_wait);
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

impl InProcess<rustnfs::Error> {
    /// rustnfs with `config` on 127.0.0.1:0, on its own runtime.
    pub fn start(config: rustnfs::Config) -> Result<Nfsd> {
        Nfsd::start_on(None, config)
    }

    /// rustnfs with default settings exporting `export`.
    pub fn exporting(export: &Path) -> Result<Nfsd> {
        Nfsd::start(rustnfs::Config::new(export))
    }

    /// rustnfs on `on` (its own runtime when `None`). Ready when this returns: the
    /// listener is bound and the export is opened on the first poll.
    pub fn start_on(on: Option<&Handle>, config: rustnfs::Config) -> Result<Nfsd> {
        let registry = latency::Registry::new("rustnfs_nfs");
        InProcess::spawn(
            on,
            Bind::Addr("127.0.0.1:0"),
            registry,
            Duration::from_secs(20),
            |listener, reg, shutdown| rustnfs::serve(listener, config, reg, shutdown),
        )
    }

    /// A libnfs URL; `path` is taken as is (`/` for the export, `//file` for a file in it).
    pub fn url(&self, path: &str) -> String {
        format!(
            "nfs://127.0.0.1{path}?version=3&nfsport={p}&mountport={p}",
            p = self.port()
        )
    }

    /// rustnfs's metrics endpoint (`/metrics`, `/metrics.json`) over this server's
    /// registry, on 127.0.0.1:0 and a runtime of its own.
    pub fn metrics(&self) -> Result<Nfsd> {
        InProcess::spawn(
            None,
            Bind::Addr("127.0.0.1:0"),
            self.registry.clone(),
            Duration::ZERO,
            rustnfs::serve_metrics,
        )
    }

    /// The export root as `httpd --nfs` and `nfsclient` take it.
    pub fn export_url(&self) -> String {
        format!("nfs://{}/", self.addr)
    }
}

impl InProcess<httpd::Error> {
    /// `http://ADDR{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// httpd's metrics endpoint (`/metrics`, `/metrics.json`, with `cache`'s values) over
    /// this server's registry, on 127.0.0.1:0 and a runtime of its own.
    pub fn metrics(&self, cache: Option<Arc<httpd::storage::CacheStats>>) -> Result<Httpd> {
        InProcess::spawn(
            None,
            Bind::Addr("127.0.0.1:0"),
            self.registry.clone(),
            Duration::ZERO,
            move |listener, reg, shutdown| httpd::serve_metrics(listener, reg, cache, shutdown),
        )
    }

    /// httpd's metrics endpoint as `httpd --metrics` serves it for `config`: its data
    /// cache's values when it has one, and the NFS backend's protocol version
    /// (`httpd_nfs_protocol_info`) when it serves NFS.
    pub fn metrics_for(&self, config: &httpd::Config) -> Result<Httpd> {
        let cache = (config.nfs_data_cache > 0).then(|| config.nfs_data_cache_stats.clone());
        let protocol = matches!(config.backend, httpd::Backend::Nfs { .. })
            .then(|| config.nfs_protocol.clone());
        InProcess::spawn(
            None,
            Bind::Addr("127.0.0.1:0"),
            self.registry.clone(),
            Duration::ZERO,
            move |listener, reg, shutdown| {
                httpd::serve_metrics_nfs(listener, reg, cache, protocol, shutdown)
            },
        )
    }

    /// httpd with `config` on 127.0.0.1:0, on its own runtime; see [`Httpd::start_on`].
    pub fn start(config: httpd::Config) -> Result<Httpd> {
        Httpd::start_on(None, "127.0.0.1:0", config)
    }

    /// httpd listening on `bind` on `on` (its own runtime when `None`). Returns once it
    /// answers a `HEAD /` (the NFS backend mounts first), or with the error `serve`
    /// returned at start, or after 20 s.
    pub fn start_on(on: Option<&Handle>, bind: &str, config: httpd::Config) -> Result<Httpd> {
        let registry = latency::Registry::new("httpd_request");
        let mut h = InProcess::spawn(
            on,
            Bind::Addr(bind),
            registry,
            Duration::ZERO,
            |listener, reg, shutdown| httpd::serve(listener, config, reg, shutdown),
        )?;
        let deadline = Instant::now() + Duration::from_secs(20);
        let probe = b"HEAD / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        loop {
            if let Some(r) = h.exited() {
                return Err(LabError::Failed(format!("httpd stopped at start: {r:?}")));
            }
            let answer = crate::http::request(
                h.addr,
                probe,
                Duration::from_secs(2),
                Duration::from_secs(15),
            );
            if answer.is_ok() {
                return Ok(h);
            }
            if Instant::now() > deadline {
                return Err(LabError::Failed(format!(
                    "httpd on {} did not answer within 20 s",
                    h.addr
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl InProcess<std::io::Error> {
    /// `loadgen::tcp::serve` on 127.0.0.1:0 with `block`-byte writes, on its own runtime.
    /// It records nothing: its registry stays empty.
    pub fn tcp(block: usize) -> Result<TcpServer> {
        TcpServer::tcp_on(None, block)
    }

    /// [`TcpServer::tcp`] on `on` (its own runtime when `None`).
    pub fn tcp_on(on: Option<&Handle>, block: usize) -> Result<TcpServer> {
        InProcess::spawn(
            on,
            Bind::Tcp(SocketAddr::from(([127, 0, 0, 1], 0))),
            latency::Registry::new("tcp"),
            Duration::ZERO,
            move |listener, _, shutdown| loadgen::tcp::serve(listener, block, shutdown),
        )
    }
}

//! Accept loop, connection limits and timeouts, graceful shutdown; what the metrics
//! endpoint serves; [`run`], what the binary calls.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use latency::Registry;
use nfsclient::NfsVersion;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::Error;
use crate::body::{InRequest, SendQueue};
use crate::config::{AccessLog, Backend, Config};
use crate::conn_io::ConnIo;
use crate::fast::{self, Fast};
use crate::respond::{self, Shared};
use crate::storage::nfs::ConnectError;
use crate::storage::{CacheStats, LocalStorage, NfsStorage, Storage};
use crate::timing::{Recorder, spawn_log_writer};

/// A writer shared with the caller (tests capture the access log this way).
struct SharedWriter(Arc<std::sync::Mutex<Box<dyn std::io::Write + Send>>>);

impl std::io::Write for SharedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).flush()
    }
}

/// The server's storage, and the local one again by its type (for the fast path).
async fn open_storage(
    config: &Config,
) -> Result<(Arc<dyn Storage>, Option<Arc<LocalStorage>>), Error> {
    Ok(match &config.backend {
        Backend::Local { root } => {
            let local = Arc::new(
                LocalStorage::new(root, config.follow_symlinks, config.chunk_size)
                    .map_err(|source| Error::Root {
                        path: root.clone(),
                        source,
                    })?
                    .with_open_cache((!config.open_file_cache.is_zero()).then(|| {
                        crate::storage::open_cache::OpenCacheConfig {
                            valid_for: config.open_file_cache,
                            ..Default::default()
                        }
                    })),
            );
            (local.clone(), Some(local))
        }
        Backend::Nfs { url } => (
            Arc::new(
                NfsStorage::connect(
                    (url, config.nfs_version),
                    config.nfs_connections,
                    config.nfs_timeout,
                    config.nfs_attr_ttl,
                    config.chunk_size,
                    config.nfs_read_ahead,
                    (
                        config.nfs_data_cache,
                        config.nfs_data_cache_dir.as_deref(),
                        config.nfs_data_cache_stats.clone(),
                    ),
                )
                .await
                .map_err(|e| connect_error(url, e))
                .inspect(|s| {
                    let _ = config.nfs_protocol.set(s.version());
                    tracing::info!(version = %s.version(), "NFS backend speaks NFSv{}", s.version());
                })?
                .with_splice(config.nfs_splice),
            ),
            None,
        ),
    })
}

/// The start-up error of an NFS backend that could not start, naming the flag it is about.
fn connect_error(url: &str, e: ConnectError) -> Error {
    match e {
        ConnectError::Url(e) => Error::Url(e),
        ConnectError::DataCacheDir { path, source } => Error::DataCacheDir { path, source },
        source => Error::Nfs {
            url: url.to_string(),
            source,
        },
    }
}

/// hyper's HTTP/1 connection settings for `config`.
///
/// The sendfile markers (body.rs) depend on this builder: HTTP/1 only, and the queued
/// ("writev") write strategy, which hands each body `Bytes` to ConnIo as the very slice
/// the body built, never copied into a flat buffer — a copied marker would lose its
/// address and go out as zeros (ConnIo then fails the connection instead). hyper's
/// features are trimmed to `http1` + `server` so no other path exists; the pipelined
/// keep-alive test in tests/httpd.rs pins the behaviour.
fn http1_builder(config: &Config) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout)
        .keep_alive(true)
        .writev(true)
        .max_buf_size(config.max_header_bytes.max(8192));
    // No `.max_headers(..)`: hyper's default is the same 100, parsed into arrays on the
    // stack; setting any value makes it fill heap vectors element by element for every
    // request (5 % of httpd's instructions per 4 KiB keep-alive request).
    builder
}

/// Where the access log's lines go; a file is opened for appending (created if missing).
fn open_access_log(target: &AccessLog) -> Result<Box<dyn std::io::Write + Send>, Error> {
    Ok(match target {
        AccessLog::Stdout => Box::new(std::io::stdout()),
        AccessLog::File(path) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| Error::AccessLog {
                    path: path.clone(),
                    source,
                })?,
        ),
        AccessLog::Writer(w) => Box::new(SharedWriter(w.clone())),
    })
}

/// Serves files on `listener` until `shutdown` completes, then stops accepting, lets
/// in-flight responses finish (up to `config.shutdown_grace`) and returns. Every request
/// is recorded into `registry` (op = route class, phases `total`/`meta`/`read`/`send`,
/// status = HTTP status, 499 for bodies the client abandoned).
pub async fn serve(
    listener: TcpListener,
    config: Config,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    config.validate()?;
    let (storage, local) = open_storage(&config).await?;
    let (log_tx, log_thread) = match &config.access_log {
        None => (None, None),
        Some(target) => {
            let (tx, thread) = spawn_log_writer(open_access_log(target)?);
            (Some(tx), Some(thread))
        }
    };
    let shared = Arc::new(Shared {
        chunk: config.chunk_size.min(storage.max_read()),
        storage,
        recorder: Arc::new(Recorder::new(registry, log_tx).with_format(config.access_log_format)),
        list_dirs: config.list_dirs,
        shaping: crate::config::Shaping::new(&config.http)?,
        // Local files, and NFS files held in the data cache (memfds).
        sendfile: config.sendfile,
        inline_limit: config.inline_limit,
    });
    let fast = Fast::new(
        shared.clone(),
        local,
        config.header_timeout,
        config.fast_path,
    );
    let builder = http1_builder(&config);
    let permits = Arc::new(Semaphore::new(config.max_connections));
    let open = Arc::new(OpenConns::default());
    let housekeeping = tokio::spawn(return_memory(open.clone()));
    let graceful = GracefulShutdown::new();
    tracing::info!(
        addr = %listener.local_addr()?,
        backend = shared.storage.name(),
        "httpd listening"
    );
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        // At the cap, the oldest idle connection makes room (kernel nfsd closes its
        // oldest idle socket the same way): 10,000 silent connections held every slot
        // until the 30 s header timeout. With none idle, the newcomer waits.
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if open.evict_one() {
                    tracing::debug!(%peer, "connection cap reached: closed the oldest idle one");
                }
                tokio::select! {
                    _ = &mut shutdown => break,
                    p = permits.clone().acquire_owned() => p.expect("semaphore never closed"),
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let queue = SendQueue::default();
        queue.set_socket(std::os::fd::AsRawFd::as_raw_fd(&stream));
        queue.set_peer(peer.ip());
        let id = open.insert(peer.ip(), queue.clone());
        let mut conn_io = ConnIo::new(stream, queue.clone(), config.idle_timeout);
        let shared = shared.clone();
        let svc_queue = queue.clone();
        let svc = service_fn(move |req| {
            let shared = shared.clone();
            let queue = svc_queue.clone();
            async move {
                let busy = InRequest::new(&queue);
                let res = respond::handle(shared, req, peer, queue).await;
                Ok::<_, Infallible>(res.map(|body| body.in_request(busy)))
            }
        });
        // Held from here, so shutdown also waits for connections still on the fast path.
        let watcher = graceful.watcher();
        let builder = builder.clone();
        let fast = fast.clone();
        let open = open.clone();
        tokio::spawn(async move {
            // What hyper starts with: the bytes the fast path read and left, if it did not
            // finish the connection.
            let prefix = match &fast {
                Some(f) => match fast::serve(f, &mut conn_io, &queue).await {
                    fast::End::Closed => None,
                    fast::End::Handoff(rest) => Some(rest),
                },
                None => Some(Bytes::new()),
            };
            if let Some(prefix) = prefix {
                let io = TokioIo::new(fast::Rewind::new(prefix, conn_io));
                let conn = watcher.watch(builder.serve_connection(io, svc));
                if let Err(e) = conn.await {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            }
            open.remove(id);
            drop(permit);
        });
    }
    drop(listener);
    housekeeping.abort();
    if let Some(f) = &fast {
        f.stop();
        open.wake_all();
    }
    tracing::info!("shutting down: finishing in-flight responses");
    let finished = tokio::time::timeout(config.shutdown_grace, graceful.shutdown())
        .await
        .is_ok();
    if !finished {
        tracing::warn!("shutdown grace period expired; remaining connections dropped");
    }
    // Bounded: a server that went away must not hold the shutdown up.
    let _ = tokio::time::timeout(Duration::from_secs(2), shared.storage.close()).await;
    drop(shared);
    if let Some(thread) = log_thread
        && finished
    {
        // Every request has been recorded, so the last log sender is gone and the
        // writer thread flushes and ends.
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
    Ok(())
}

/// The open connections, for the cap to close the oldest idle one.
#[derive(Default)]
struct OpenConns {
    next: std::sync::atomic::AtomicU64,
    conns: parking_lot::Mutex<std::collections::HashMap<u64, (IpAddr, SendQueue)>>,
    /// Connections closed so far: the allocator is trimmed after some close.
    closed: std::sync::atomic::AtomicU64,
}

/// Once a second, when connections closed since the last tick, gives the heap's free
/// pages back to the system (`malloc_trim`): glibc keeps them in its arenas otherwise,
/// and after 10,000 idle connections closed httpd stayed at 177-209 MB for minutes
/// (7.6 MB before they came).
async fn return_memory(open: Arc<OpenConns>) {
    let mut seen = 0;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let closed = open.closed.load(std::sync::atomic::Ordering::Relaxed);
        if closed != seen {
            seen = closed;
            #[cfg(target_env = "gnu")]
            // SAFETY: malloc_trim only releases free memory of the allocator's arenas.
            unsafe {
                libc::malloc_trim(0);
            }
        }
    }
}

/// A connection idle for less than this is not closed to make room: it may be a client
/// whose request is on its way.
const EVICT_MIN_IDLE: Duration = Duration::from_millis(100);

impl OpenConns {
    fn insert(&self, ip: IpAddr, conn: SendQueue) -> u64 {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.conns.lock().insert(id, (ip.to_canonical(), conn));
        id
    }

    /// Wakes every connection waiting for I/O (the fast path's look at its shutdown flag).
    fn wake_all(&self) {
        for (_, q) in self.conns.lock().values() {
            q.wake();
        }
    }

    fn remove(&self, id: u64) {
        self.conns.lock().remove(&id);
        self.closed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Closes, of the address holding the most connections, the one idle longest (so
    /// one address cannot keep everyone else's slots). `false` if none is idle.
    fn evict_one(&self) -> bool {
        let conns = self.conns.lock();
        let mut per_ip: std::collections::HashMap<IpAddr, usize> = Default::default();
        for (ip, _) in conns.values() {
            *per_ip.entry(*ip).or_default() += 1;
        }
        let chosen = conns
            .values()
            .filter_map(|(ip, c)| {
                let idle = c.idle().filter(|d| *d >= EVICT_MIN_IDLE)?;
                Some(((per_ip[ip], idle), c))
            })
            .max_by_key(|(key, _)| *key)
            .map(|(_, c)| c.clone());
        drop(conns);
        chosen.map(|c| c.abort()).is_some()
    }
}

/// What httpd's metrics endpoint serves: the request registry and, with a data cache,
/// its values (`httpd_nfs_data_cache_*` lines, and `nfs_data_cache` in the JSON).
struct Metrics {
    registry: Arc<Registry>,
    cache: Option<Arc<CacheStats>>,
    /// The NFS backend's protocol version, once connected.
    protocol: Option<Arc<OnceLock<NfsVersion>>>,
}

impl service::Source for Metrics {
    fn prometheus(&self) -> String {
        let mut text = service::Source::prometheus(&*self.registry);
        if let Some(c) = &self.cache {
            text += &c.to_prometheus();
        }
        if let Some(v) = self.protocol.as_ref().and_then(|p| p.get()) {
            text += "# HELP httpd_nfs_protocol_info The NFS version the backend speaks.\n";
            text += "# TYPE httpd_nfs_protocol_info gauge\n";
            text += &format!("httpd_nfs_protocol_info{{version=\"{v}\"}} 1\n");
        }
        text
    }
    fn json(&self) -> serde_json::Value {
        let mut json = service::Source::json(&*self.registry);
        if let (Some(c), Some(obj)) = (&self.cache, json.as_object_mut()) {
            obj.insert("nfs_data_cache".into(), c.to_json());
        }
        let version = self.protocol.as_ref().and_then(|p| p.get());
        if let (Some(v), Some(obj)) = (version, json.as_object_mut()) {
            obj.insert("nfs_protocol".into(), v.to_string().into());
        }
        json
    }
}

/// Serves `GET /metrics` (Prometheus text) and `GET /metrics.json` (a `latency`
/// snapshot) from `registry` until `shutdown` completes; with `cache`, its values too
/// (`httpd_nfs_data_cache_*` lines, and `nfs_data_cache` in the JSON). The endpoint is
/// the one rustnfs serves too (the `service` crate's: capped, one request per connection).
pub async fn serve_metrics(
    listener: TcpListener,
    registry: Arc<Registry>,
    cache: Option<Arc<CacheStats>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    serve_metrics_nfs(listener, registry, cache, None, shutdown).await
}

/// [`serve_metrics`] with the NFS backend's protocol version once it is set
/// (`httpd_nfs_protocol_info{version="4.2"} 1`, and `nfs_protocol` in the JSON).
pub async fn serve_metrics_nfs(
    listener: TcpListener,
    registry: Arc<Registry>,
    cache: Option<Arc<CacheStats>>,
    protocol: Option<Arc<OnceLock<NfsVersion>>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let source = Arc::new(Metrics {
        registry,
        cache,
        protocol,
    });
    let limits = service::metrics::Limits::default();
    Ok(service::metrics::serve(listener, source, limits, shutdown).await?)
}

/// What the binary runs: binds `listen` (and `metrics`), serves until SIGINT/SIGTERM,
/// then prints the summary table to stderr.
pub async fn run(rc: service::RunConfig<Config>) -> Result<(), Error> {
    let service::RunConfig {
        listen,
        metrics,
        server: config,
    } = rc;
    let registry = Registry::new("httpd_request");
    let listener = bind("--listen", listen).await?;
    let stop = service::Stop::new();
    let metrics_task = match metrics {
        Some(addr) => {
            let l = bind("--metrics", addr).await?;
            tracing::info!(addr = %l.local_addr()?, "metrics listening");
            let cache = (config.nfs_data_cache > 0).then(|| config.nfs_data_cache_stats.clone());
            let protocol =
                matches!(config.backend, Backend::Nfs { .. }).then(|| config.nfs_protocol.clone());
            Some(tokio::spawn(serve_metrics_nfs(
                l,
                registry.clone(),
                cache,
                protocol,
                stop.stopped(),
            )))
        }
        None => None,
    };
    stop.on_signal();
    let result = serve(listener, config, registry.clone(), stop.stopped()).await;
    // Also when serve failed at start (e.g. the NFS server is down): no signal will come
    // to stop the metrics listener, and waiting for one hung the process.
    stop.stop();
    if let Some(t) = metrics_task {
        let _ = t.await;
    }
    if result.is_ok() {
        eprint!("{}", latency::table::render(&registry.snapshot()));
    }
    result
}

/// Binds a listening address; the error names the flag it came from.
async fn bind(flag: &'static str, addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { flag, addr, source })
}

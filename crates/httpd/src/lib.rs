//! httpd: a static file server on hyper 1.x + tokio, serving a local directory or an
//! NFSv3 export through its own client, timing every request to its last body byte.
//!
//! # Layout
//! - [`config`]: [`Config`], [`Backend`], [`AccessLog`] — what to serve and the limits;
//!   the response shaping (`--header`, `--cache-control`, ...) checked into header values.
//! - [`server`]: [`serve`] — accept loop, connection cap, timeouts, graceful shutdown;
//!   [`serve_metrics`] (the `service` crate's endpoint, shared with rustnfs, with the data
//!   cache's values added); [`run`] is what the binary calls.
//! - `path`: request path → safe components (`..`, `%2f`, `\`, NUL refused).
//! - [`storage`]: the [`storage::Storage`] trait with the local (`openat2`
//!   `RESOLVE_BENEATH`) and NFS (pooled `nfsclient`, attribute cache) backends.
//! - `respond`: GET/HEAD, conditional requests, ranges, index.html, listings; the
//!   fields of a file's 200, built once for both paths.
//! - `body`: the response body — inline bytes, zero-copy `sendfile` markers, or chunked
//!   reads (pipelined over NFS) — and the per-request timer recorded when the last
//!   frame has been written.
//! - `stream_budget`: the bytes streamed bodies may hold between storage and socket,
//!   one set per server whose storage streams.
//! - `cache_stats`: the NFS data cache's counters, for the metrics endpoint.
//! - `fast`: plain keep-alive GET/HEAD of small cached files answered before hyper, byte
//!   for byte as the normal path would (its response head comes from `respond`'s field
//!   builder, kept with the cached file); anything else hands the connection to hyper.
//! - `conn_io`: the socket wrapper doing `sendfile` for marker frames and the idle
//!   timeout.
//! - `timing`: phases (`meta`, `read`, `send`, `total`) into `latency`, access log lines.
//! - `listing`, `mime`: directory listing HTML, Content-Type by extension.
//! - [`cli`]: the command line, shared by the `httpd` binary and `servelab httpd`.
//! - [`health`]: `--healthcheck`, a `HEAD /` to the running server.
//! - `fuzzing` (hidden): what the fuzz targets drive — the parsers, and the whole server
//!   on a loopback socket with the fast path on or off.
//! - [`Error`]: why the server cannot start or run; each names its flag and keeps its
//!   cause, and [`Chain`] prints both as one line.

mod body;
mod cache_stats;
pub mod cli;
pub mod config;
mod conn_io;
mod fast;
/// Entry points for the fuzz targets under `fuzz/` (not a stable API).
#[doc(hidden)]
pub mod fuzzing;
pub mod health;
mod listing;
mod mime;
mod path;
mod respond;
pub mod server;
pub mod storage;
mod stream_budget;
mod timing;

pub use body::MARKER_LEN as SENDFILE_FRAME_MAX;
pub use config::{AccessLog, AccessLogFormat, Backend, Config, HttpOptions, NfsVersionChoice};
pub use server::{run, serve, serve_metrics, serve_metrics_nfs};
pub use service::Chain;

/// Errors that stop the server from starting or running. Each `Display` names the flag
/// and the thing it is about, and no more; the cause is the error's source, and
/// [`Chain`] prints both as one line (`--listen 127.0.0.1:80: address already in use`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line lacks a flag another needs, or gives two that exclude each other.
    #[error("invalid configuration: {0}")]
    Usage(&'static str),
    /// `--root` names no directory.
    #[error("invalid configuration: --root {}: {reason}", path.display())]
    NotADirectory {
        path: std::path::PathBuf,
        reason: &'static str,
    },
    /// A configuration value httpd cannot serve with.
    #[error("invalid configuration")]
    Config(#[from] config::ConfigError),
    /// The local root cannot be opened as a directory.
    #[error("--root {}", path.display())]
    Root {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An invalid `nfs://` URL.
    #[error("--nfs")]
    Url(#[source] nfsclient::Error),
    /// The NFS export cannot be mounted, the server cannot be reached, or the served path
    /// is missing or not a directory.
    #[error("--nfs {url}")]
    Nfs {
        url: String,
        #[source]
        source: storage::nfs::ConnectError,
    },
    /// `--nfs-data-cache-dir` cannot hold the data cache's copies.
    #[error("--nfs-data-cache-dir {}", path.display())]
    DataCacheDir {
        path: std::path::PathBuf,
        #[source]
        source: storage::cache_file::CacheDirError,
    },
    /// A listening address cannot be bound (`flag` is `--listen` or `--metrics`).
    #[error("{flag} {addr}")]
    Bind {
        flag: &'static str,
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The access log file cannot be opened.
    #[error("--access-log {}", path.display())]
    AccessLog {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The async runtime cannot be started (threads, the event loop).
    #[error("cannot start the runtime")]
    Runtime(#[source] std::io::Error),
    /// Accepting connections failed for good.
    #[error("listener failed")]
    Io(#[from] std::io::Error),
    /// `--healthcheck` found the server not answering.
    #[error("unhealthy")]
    Unhealthy(#[source] health::ProbeError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// The top layer names its flag and thing and keeps the cause as its source, which
    /// its own text does not repeat; [`Chain`] then says each once.
    fn own_layer(e: &Error) -> String {
        let source = e.source().unwrap_or_else(|| panic!("{e:?}: no source"));
        let (text, cause) = (e.to_string(), source.to_string());
        assert!(
            !text.contains(&cause),
            "{text:?} repeats its cause {cause:?}"
        );
        Chain(e).to_string()
    }

    #[test]
    fn errors_keep_their_source_and_say_only_their_own_layer() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let busy = taken.local_addr().unwrap();
        let run = |config: Config| {
            rt.block_on(crate::run(cli::RunConfig {
                listen: busy,
                metrics: None,
                server: config,
            }))
            .unwrap_err()
        };
        let line = own_layer(&run(Config::local("/")));
        assert_eq!(line, format!("--listen {busy}: address already in use"));

        let serve = |config: Config| {
            rt.block_on(async {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let registry = latency::Registry::new("t");
                crate::serve(l, config, registry, async {})
                    .await
                    .unwrap_err()
            })
        };
        let line = own_layer(&serve(Config::nfs("nfs://127.0.0.1:9/x")));
        assert!(
            line.starts_with("--nfs nfs://127.0.0.1:9/x: NFS server 127.0.0.1:9"),
            "{line}"
        );
        let mut cached = Config::nfs("nfs://127.0.0.1:9/x");
        cached.nfs_data_cache = 1 << 20;
        cached.nfs_data_cache_dir = Some("/no/such/dir".into());
        let line = own_layer(&serve(cached));
        assert_eq!(line, "--nfs-data-cache-dir /no/such/dir: no such directory");

        let mut bad = Config::local("/");
        bad.http.max_ranges = 0;
        let line = own_layer(&Error::from(bad.validate().unwrap_err()));
        assert_eq!(line, "invalid configuration: max_ranges must be at least 1");

        let args = <cli::Args as clap::Parser>::try_parse_from([
            "httpd",
            "--healthcheck",
            "--listen",
            &busy.to_string(),
        ])
        .unwrap();
        drop(taken);
        let line = own_layer(&args.healthcheck().unwrap_err());
        assert!(
            line.starts_with(&format!("unhealthy: http://{busy}/: connect failed")),
            "{line}"
        );
    }
}

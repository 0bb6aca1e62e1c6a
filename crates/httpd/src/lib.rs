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

mod body;
mod cache_stats;
pub mod cli;
pub mod config;
mod conn_io;
mod error_chain;
mod fast;
pub mod health;
mod listing;
mod mime;
mod path;
mod respond;
pub mod server;
pub mod storage;
mod stream_budget;
mod timing;

/// Entry points for the fuzz targets under `fuzz/` (not a stable API).
#[doc(hidden)]
pub use respond::fuzzing;

pub use body::MARKER_LEN as SENDFILE_FRAME_MAX;
pub use config::{AccessLog, AccessLogFormat, Backend, Config, HttpOptions};
pub use error_chain::{Chain, io_reason};
pub use server::{run, serve, serve_metrics};

/// Errors that stop the server from starting or running. Each `Display` is one line
/// that already includes its cause, naming the flag and the thing it is about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The local root cannot be opened as a directory.
    #[error("--root {}: {}", path.display(), io_reason(err))]
    Root {
        path: std::path::PathBuf,
        err: std::io::Error,
    },
    /// The NFS export cannot be mounted, the server cannot be reached, or the served path
    /// is missing or not a directory.
    #[error("--nfs {url}")]
    Nfs {
        url: String,
        #[source]
        source: storage::nfs::ConnectError,
    },
    /// A listening address cannot be bound (`flag` is `--listen` or `--metrics`).
    #[error("{flag} {addr}: {}", io_reason(err))]
    Bind {
        flag: &'static str,
        addr: std::net::SocketAddr,
        err: std::io::Error,
    },
    /// The access log file cannot be opened.
    #[error("--access-log {}: {}", path.display(), io_reason(err))]
    AccessLog {
        path: std::path::PathBuf,
        err: std::io::Error,
    },
    /// `--nfs-data-cache-dir` cannot hold the data cache's copies.
    #[error("--nfs-data-cache-dir {}", path.display())]
    DataCacheDir {
        path: std::path::PathBuf,
        #[source]
        source: storage::cache_file::CacheDirError,
    },
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// An invalid `nfs://` URL.
    #[error("--nfs: {0}")]
    Url(nfsclient::Error),
    /// Accepting connections failed for good.
    #[error("listener failed: {}", io_reason(.0))]
    Io(#[from] std::io::Error),
    /// `--healthcheck` found the server not answering.
    #[error("unhealthy: {0}")]
    Unhealthy(String),
}

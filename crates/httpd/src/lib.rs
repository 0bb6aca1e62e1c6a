//! httpd: a static file server on hyper 1.x + tokio, serving a local directory or an
//! NFSv3 export through its own client, timing every request to its last body byte.
//!
//! # Layout
//! - [`config`]: [`Config`], [`Backend`], [`AccessLog`] — what to serve and the limits.
//! - [`server`]: [`serve`] and [`serve_metrics`] — accept loop, connection cap, timeouts,
//!   graceful shutdown; [`run`] is what the binary calls.
//! - `path`: request path → safe components (`..`, `%2f`, `\`, NUL refused).
//! - [`storage`]: the [`storage::Storage`] trait with the local (`openat2`
//!   `RESOLVE_BENEATH`) and NFS (pooled `nfsclient`, attribute cache) backends.
//! - `respond`: GET/HEAD, conditional requests, single ranges, index.html, listings.
//! - `body`: the response body — inline bytes, zero-copy `sendfile` markers, or chunked
//!   reads (pipelined over NFS) — and the per-request timer recorded when the last
//!   frame has been written.
//! - `conn_io`: the socket wrapper doing `sendfile` for marker frames and the idle
//!   timeout.
//! - `timing`: phases (`meta`, `read`, `send`, `total`) into `latency`, access log lines.
//! - `listing`, `mime`: directory listing HTML, Content-Type by extension.
//! - [`cli`]: the command line, shared by the `httpd` binary and `servelab httpd`.
//! - [`health`]: `--healthcheck`, a `HEAD /` to the running server.

mod body;
pub mod cli;
pub mod config;
mod conn_io;
pub mod health;
mod listing;
mod mime;
mod path;
mod respond;
pub mod server;
pub mod storage;
mod timing;

/// Entry points for the fuzz targets under `fuzz/` (not a stable API).
#[doc(hidden)]
pub use respond::fuzzing;

pub use config::{AccessLog, Backend, Config};
pub use server::{run, serve, serve_metrics};

/// Errors that stop the server from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The local root cannot be opened as a directory.
    #[error("cannot serve {path}: {source}")]
    Root {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The NFS export cannot be mounted or is not a directory.
    #[error("NFS backend: {0}")]
    Nfs(#[from] nfsclient::Error),
    /// The access log file cannot be opened.
    #[error("cannot open access log {path}: {source}")]
    AccessLog {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Accepting connections failed for good.
    #[error("listener failed: {0}")]
    Io(#[from] std::io::Error),
    /// `--healthcheck` found the server not answering.
    #[error("unhealthy: {0}")]
    Unhealthy(String),
}

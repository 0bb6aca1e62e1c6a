//! Entry points for the fuzz targets (`fuzz/`): path decoding, Range and entity-tag
//! parsing, and whole requests through hyper into [`super::handle`]. Not a stable API.

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use latency::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Shared;
use super::range::RangeReq;
use crate::body::SendQueue;
use crate::storage::LocalStorage;
use crate::timing::Recorder;

/// [`crate::path`]'s decoding of a request path; the error is the 400's reason.
pub fn path_components(raw: &str) -> Result<Vec<String>, &'static str> {
    crate::path::components(raw).map_err(|e| e.0)
}

/// What a `Range` header asks of a file of a given size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Range {
    Full,
    /// `start..=end`.
    Part(u64, u64),
    /// Several `start..=end` ranges, as sent (`multipart/byteranges`).
    Parts(Vec<(u64, u64)>),
    Unsatisfiable,
}

/// The server's `Range` parsing, with its default bound on the number of parts.
pub fn range(value: &str, size: u64) -> Range {
    let max = crate::config::HttpOptions::default().max_ranges;
    match super::range::parse_range(value, size, max) {
        RangeReq::Full => Range::Full,
        RangeReq::Part(s, e) => Range::Part(s, e),
        RangeReq::Parts(p) => Range::Parts(p),
        RangeReq::Unsatisfiable => Range::Unsatisfiable,
    }
}

/// The server's `If-Match` / `If-None-Match` list matching.
pub fn etag_matches(list: &str, tag: &str, weak: bool) -> bool {
    super::conditional::etag_matches(list, tag, weak)
}

/// The nginx-format entity tag the server gives a file.
pub fn etag(mtime_secs: u64, size: u64) -> String {
    super::conditional::etag(mtime_secs, size)
}

/// httpd over a local directory, answering whole connections held in memory.
pub struct Server {
    rt: tokio::runtime::Runtime,
    shared: Arc<Shared>,
}

impl Server {
    /// Serves `root` with listings on, small inline and chunk sizes (so the inline and
    /// streamed body paths are both reached by small files), and no sendfile (which needs
    /// a socket).
    pub fn new(root: &Path) -> std::io::Result<Server> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let storage = Arc::new(LocalStorage::new(root, false, 4096)?);
        let shared = Arc::new(Shared {
            storage,
            recorder: Arc::new(Recorder::new(Registry::new("httpd_fuzz"), None)),
            list_dirs: true,
            shaping: crate::config::Shaping::default(),
            sendfile: false,
            inline_limit: 1024,
            chunk: 4096,
        });
        Ok(Server { rt, shared })
    }

    /// Sends `request` (any bytes: one or several pipelined requests, or garbage) on a
    /// fresh connection, half-closes it, and returns every byte the server wrote before
    /// closing. `None` means the server neither finished nor closed within 10 s (a hang).
    pub fn exchange(&self, request: &[u8]) -> Option<Vec<u8>> {
        self.rt.block_on(async {
            let (client, server) = tokio::io::duplex(64 * 1024);
            // The same HTTP/1 settings as `server::serve` with its default `Config`, but
            // for half_close: the request ends with the client's EOF, and without it
            // hyper would drop the answers of a client that half-closes.
            let mut builder = http1::Builder::new();
            builder
                .half_close(true)
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .keep_alive(true)
                .writev(true)
                .max_buf_size(16 * 1024);
            let shared = self.shared.clone();
            let peer = std::net::SocketAddr::from(([127, 0, 0, 1], 1));
            let svc = service_fn(move |req| {
                let shared = shared.clone();
                async move {
                    Ok::<_, Infallible>(
                        super::handle(shared, req, peer, SendQueue::default()).await,
                    )
                }
            });
            let conn = tokio::spawn(builder.serve_connection(TokioIo::new(server), svc));
            // Written and read concurrently: pipelined responses larger than the duplex
            // buffer must not deadlock against a request still being written.
            let (mut rd, mut wr) = tokio::io::split(client);
            let talk = async {
                let write = async {
                    let _ = wr.write_all(request).await;
                    let _ = wr.shutdown().await;
                };
                let mut out = Vec::new();
                let read = rd.read_to_end(&mut out);
                let _ = tokio::join!(write, read);
                out
            };
            let out = tokio::time::timeout(Duration::from_secs(10), talk)
                .await
                .ok();
            conn.abort();
            out
        })
    }
}

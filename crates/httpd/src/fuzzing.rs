//! Entry points for the fuzz targets (`fuzz/`): path decoding, Range and entity-tag
//! parsing, and whole connections to a server on a loopback socket — the accept loop,
//! the fast path and hyper, as the binary runs them. Not a stable API.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::respond::{RangeReq, parse_range};

/// The server's decoding of a request path (its `path` module); the error is the 400's reason.
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
    match parse_range(value, size, max) {
        RangeReq::Full => Range::Full,
        RangeReq::Part(s, e) => Range::Part(s, e),
        RangeReq::Parts(p) => Range::Parts(p),
        RangeReq::Unsatisfiable => Range::Unsatisfiable,
    }
}

/// The server's `If-Match` / `If-None-Match` list matching.
pub fn etag_matches(list: &str, tag: &str, weak: bool) -> bool {
    crate::respond::etag_matches(list, tag, weak)
}

/// The nginx-format entity tag the server gives a file.
pub fn etag(mtime_secs: u64, size: u64) -> String {
    crate::respond::etag(mtime_secs, size)
}

/// The request every exchange ends with: whatever the bytes before it were, the
/// connection then ends with the server's close (or its timeouts), not with the client's
/// EOF — hyper without half-close may drop the answer of a request in flight when the
/// client half-closes, which would make two runs of one input differ.
pub const LAST_REQUEST: &[u8] = b"GET /a.txt HTTP/1.1\r\nHost: end\r\nConnection: close\r\n\r\n";

/// httpd over a local directory on 127.0.0.1, run by [`crate::serve`] with the settings
/// of the binary but small sizes and short timeouts, answering whole connections.
pub struct Server {
    addr: SocketAddr,
    /// Stops the server when dropped.
    _stop: tokio::sync::oneshot::Sender<()>,
    _rt: tokio::runtime::Runtime,
}

impl Server {
    /// Serves `root` with listings on, the fast path on or off, small inline and chunk
    /// sizes (so inline, sendfile and streamed bodies are all reached by small files),
    /// and 1 s header and idle timeouts (a client that stops sending costs a second).
    pub fn new(root: &Path, fast_path: bool) -> std::io::Result<Server> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        let mut config = crate::Config::local(root);
        config.list_dirs = true;
        config.fast_path = fast_path;
        config.inline_limit = 1024;
        config.chunk_size = 4096;
        config.header_timeout = Duration::from_secs(1);
        config.idle_timeout = Duration::from_secs(1);
        config.shutdown_grace = Duration::from_secs(1);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let registry = latency::Registry::new("httpd_fuzz");
        rt.spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(e) = crate::serve(listener, config, registry, shutdown).await {
                panic!("the fuzzed server stopped: {}", crate::Chain(&e));
            }
        });
        Ok(Server {
            addr,
            _stop: stop,
            _rt: rt,
        })
    }

    /// Sends `request` (any bytes: one or several pipelined requests, or garbage) and
    /// then [`LAST_REQUEST`] on a fresh connection, and returns every byte the server
    /// wrote before closing. `None` means it neither finished nor closed within 10 s
    /// (a hang).
    pub fn exchange(&self, request: &[u8]) -> Option<Vec<u8>> {
        let mut s = TcpStream::connect(self.addr).ok()?;
        let _ = s.set_nodelay(true);
        // The server may answer and close before reading it all (a 400): the bytes it
        // wrote before are still read below.
        let _ = s
            .write_all(request)
            .and_then(|()| s.write_all(LAST_REQUEST));
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut out = Vec::new();
        let mut buf = [0u8; 64 << 10];
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .ok()?;
            match s.read(&mut buf) {
                Ok(0) => return Some(out),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                // A close with bytes unread in the server's socket resets the connection.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(out),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }
}

/// Where the answers of the server with the fast path (`fast`) and without it (`hyper`)
/// differ once [`masked`], shown around the first differing byte; `None` when they agree.
pub fn difference(fast: &[u8], hyper: &[u8]) -> Option<String> {
    let (a, b) = (masked(fast), masked(hyper));
    if a == b {
        return None;
    }
    let at = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let show = |v: &[u8]| {
        let from = at.saturating_sub(300);
        String::from_utf8_lossy(&v[from.min(v.len())..(at + 200).min(v.len())]).into_owned()
    };
    Some(format!(
        "fast path ({} bytes) and hyper ({} bytes) differ at byte {at}:\nfast:  {:?}\nhyper: {:?}",
        a.len(),
        b.len(),
        show(&a),
        show(&b)
    ))
}

/// `text` with what differs between two runs of one exchange blanked: the Date value,
/// Server-Timing's durations and multipart boundaries.
pub fn masked(text: &[u8]) -> Vec<u8> {
    const DATE: &[u8] = b"\r\ndate: ";
    const BOUNDARY: &[u8] = b"servelab-";
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if rest.starts_with(DATE) && rest.len() >= DATE.len() + 29 {
            out.extend_from_slice(b"\r\ndate: <date>");
            i += DATE.len() + 29;
        } else if rest.starts_with(b"dur=") {
            out.extend_from_slice(b"dur=<ms>");
            i += 4;
            while i < text.len() && (text[i].is_ascii_digit() || text[i] == b'.') {
                i += 1;
            }
        } else if rest.starts_with(BOUNDARY)
            && rest.len() >= BOUNDARY.len() + 16
            && rest[BOUNDARY.len()..BOUNDARY.len() + 16]
                .iter()
                .all(u8::is_ascii_hexdigit)
        {
            out.extend_from_slice(b"servelab-<boundary>");
            i += BOUNDARY.len() + 16;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

//! The fast path: plain keep-alive `GET`/`HEAD` requests for small files held in the
//! open-file cache, answered on the raw connection before hyper sees it, byte for byte
//! as the normal path answers them; the first request it does not take hands the
//! connection, with every byte read so far, to hyper for good.
//!
//! Why: per 4 KiB keep-alive request hyper's parser, encoder and dispatcher, the service
//! future, the response's header map and the body's frames cost about two thirds of
//! httpd's user-space instructions. Here a request costs one `httparse` pass, one
//! open-file cache lookup, a copy of the file's response head (made once per file
//! version: everything but Server-Timing and Date) and one `writev` of head and bytes.
//!
//! What it takes (anything else falls back, so the normal path answers it):
//! - `GET` or `HEAD`, `HTTP/1.1` (a head split across reads is read on until complete,
//!   then taken or handed over whole);
//! - an origin-form path of `/`-separated components of `A-Z a-z 0-9 - . _ ~`, none
//!   empty or starting with `.` (so no dot segments, hidden files, percent escapes,
//!   query, trailing `/`), each at most 255 bytes;
//! - exactly one `Host`, and otherwise only fields whose content changes nothing in the
//!   response when no access log is written ([`IGNORED`]), `Connection: keep-alive`
//!   included; no body, no preconditions, no `Range`;
//! - a non-empty regular file whose whole contents the open-file cache holds (≤ 64 KiB,
//!   not changed in the last second), at most `--inline-limit` bytes. The lookup is the
//!   normal path's own ([`LocalStorage::open_joined`]): same cache, same revalidation.
//!
//! It is on for the local backend with the open-file cache on, no access log and no
//! `--precompressed` (`Config::fast_path` turns it off). The metrics are the normal
//! path's: the same op (`GET file`, `HEAD file`), status and phases per request.
//!
//! Between requests the connection waits at most the header timeout (hyper's rule),
//! moves no byte for at most the idle timeout, closes when idle at shutdown, and can be
//! closed at the connection cap like any idle connection.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::HeaderMap;
use http::header;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

use crate::body::{InRequest, SendQueue};
use crate::conn_io::ConnIo;
use crate::respond::{Shared, TIMING_PLACEHOLDER, plain_file_fields, push_server_timing};
use crate::storage::{Handle, Kind, LocalStorage};
use crate::timing::HandleSet;

/// Request fields that do not change the response when no access log is written (the
/// access log is what would show User-Agent and Referer).
const IGNORED: [&str; 10] = [
    "user-agent",
    "accept",
    "accept-language",
    "accept-encoding",
    "cache-control",
    "pragma",
    "referer",
    "dnt",
    "upgrade-insecure-requests",
    "priority",
];

/// Bytes read at once; a request head that does not fit goes to hyper.
const READ_BUF: usize = 8 << 10;

/// Most responses written with one `writev` (two slices each, under `IOV_MAX`).
const MAX_BATCH: usize = 32;

/// Most header lines a fast request may have (more: hyper's, which allows 100).
const MAX_FIELDS: usize = 32;

/// Longest path component (`NAME_MAX`, as `path::components` refuses longer).
const NAME_MAX: usize = 255;

/// The fast path's view of a server.
pub(crate) struct Fast {
    shared: Arc<Shared>,
    local: Arc<LocalStorage>,
    header_timeout: Duration,
    /// Set at shutdown: idle fast connections close (hyper's graceful shutdown does the
    /// same with its idle keep-alive connections).
    stopping: AtomicBool,
}

/// How a connection left the fast path.
pub(crate) enum End {
    /// It is finished (closed by the client, an error, a timeout, shutdown).
    Closed,
    /// hyper takes it from here, starting with these bytes already read.
    Handoff(Bytes),
}

/// A file version's response head, made once and kept with the cached file
/// (`OpenFile::derived`): the status line and fields up to Server-Timing's value, the
/// rest, and whether a Date field follows (hyper adds one last unless the response has
/// its own).
#[derive(Debug)]
struct Head {
    before: Box<[u8]>,
    /// Empty when there is no Server-Timing to fill in.
    after: Box<[u8]>,
    timing: bool,
    date: bool,
}

impl Head {
    /// `fields` written as hyper writes them: `name: value` lines in the map's order.
    fn of(fields: &HeaderMap) -> Head {
        let mut before = b"HTTP/1.1 200 OK\r\n".to_vec();
        let mut after = Vec::new();
        let mut timing = false;
        for (name, value) in fields {
            if name.as_str() == "server-timing" && value.as_bytes() == TIMING_PLACEHOLDER.as_bytes()
            {
                before.extend_from_slice(b"server-timing: ");
                timing = true;
                after.extend_from_slice(b"\r\n");
                continue;
            }
            let out = if timing { &mut after } else { &mut before };
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Head {
            before: before.into(),
            after: after.into(),
            timing,
            date: !fields.contains_key(header::DATE),
        }
    }
}

impl Fast {
    /// The fast path of a server, when its configuration allows one (see the module docs).
    pub(crate) fn new(
        shared: Arc<Shared>,
        local: Option<Arc<LocalStorage>>,
        header_timeout: Duration,
        enabled: bool,
    ) -> Option<Arc<Fast>> {
        let local = local?;
        let usable = enabled
            && local.has_open_cache()
            && !shared.recorder.logs()
            && !shared.shaping.precompressed;
        usable.then(|| {
            Arc::new(Fast {
                shared,
                local,
                header_timeout,
                stopping: AtomicBool::new(false),
            })
        })
    }

    /// Shutdown has begun: idle connections close; `wake` the ones waiting.
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }
}

/// One answered request, recorded once its response has been written.
struct Done {
    head: bool,
    start: Instant,
    meta: Duration,
    read: Duration,
    bytes: u64,
}

/// The responses of one `writev`: heads copied into one buffer, bodies by reference.
#[derive(Default)]
struct Batch {
    heads: Vec<u8>,
    /// Per response: the end of its head in `heads`, and its body.
    parts: Vec<(usize, Option<Bytes>)>,
    done: Vec<Done>,
    timing: String,
}

impl Batch {
    fn clear(&mut self) {
        self.heads.clear();
        self.parts.clear();
        self.done.clear();
    }
}

/// The date of hyper's `date:` field, formatted once a second per thread.
fn push_date(out: &mut Vec<u8>) {
    thread_local! {
        static DATE: std::cell::RefCell<(u64, [u8; 29])> =
            const { std::cell::RefCell::new((u64::MAX, [0; 29])) };
    }
    let now = SystemTime::now();
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs {
            let text = httpdate::fmt_http_date(now);
            let n = text.len().min(29);
            d.1[..n].copy_from_slice(&text.as_bytes()[..n]);
            d.0 = secs;
        }
        out.extend_from_slice(&d.1);
    });
}

/// Whether `path` is one the fast path takes (see the module docs).
fn plain_path(path: &str) -> bool {
    let b = path.as_bytes();
    if b.len() < 2 || b[0] != b'/' {
        return false;
    }
    b[1..].split(|&c| c == b'/').all(|seg| {
        !seg.is_empty()
            && seg.len() <= NAME_MAX
            && seg[0] != b'.'
            && seg
                .iter()
                .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~'))
    })
}

/// Whether a request's fields are ones the fast path takes: one Host, the rest ignored.
fn plain_fields(fields: &[httparse::Header<'_>]) -> bool {
    let mut hosts = 0;
    for f in fields {
        // Values hyper would keep as they are, and that no field here interprets.
        if !f
            .value
            .iter()
            .all(|&c| c == b'\t' || (b' '..=b'~').contains(&c))
        {
            return false;
        }
        if f.name.eq_ignore_ascii_case("host") {
            hosts += 1;
        } else if f.name.eq_ignore_ascii_case("connection") {
            if !f.value.trim_ascii().eq_ignore_ascii_case(b"keep-alive") {
                return false;
            }
        } else if !IGNORED.iter().any(|n| f.name.eq_ignore_ascii_case(n)) {
            return false;
        }
    }
    hosts == 1
}

/// Answers the request at the start of `buf` into `batch` if the fast path takes it:
/// the bytes it used, or `None` (the rest goes to hyper).
fn answer(fast: &Fast, buf: &[u8], batch: &mut Batch) -> Option<usize> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut req = httparse::Request::new(&mut fields);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        _ => return None,
    };
    // From the parsed head, as the normal path's `total` counts from hyper's.
    let start = Instant::now();
    let head = match req.method? {
        "GET" => false,
        "HEAD" => true,
        _ => return None,
    };
    if req.version != Some(1) {
        return None;
    }
    let path = req.path?;
    if !plain_path(path) || !plain_fields(req.headers) {
        return None;
    }
    let entry = fast.local.open_joined(&path[1..]).ok()?;
    if entry.meta.kind != Kind::File || entry.meta.size > fast.shared.inline_limit {
        return None;
    }
    let Handle::Local(file) = &entry.handle else {
        return None;
    };
    let data = file.data()?;
    // hyper moves the Content-Length of an empty body to the end of the head: such a
    // response is left to it.
    if data.is_empty() || data.len() as u64 != entry.meta.size {
        return None;
    }
    let fields = file.derived(|| {
        let name = path.rsplit('/').next().unwrap_or("");
        Head::of(&plain_file_fields(&fast.shared.shaping, &entry.meta, name))
    })?;
    // As the normal path: the lookup is `meta`, then the bytes are "read" (sliced from
    // the cache); no read at all for HEAD. One clock read ends the one and starts the
    // other.
    let looked_up = Instant::now();
    let meta = looked_up.saturating_duration_since(start);
    let (body, read) = if head {
        (None, None)
    } else {
        let body = data.clone();
        (Some(body), Some(looked_up.elapsed()))
    };
    let out = &mut batch.heads;
    out.extend_from_slice(&fields.before);
    if fields.timing {
        let t = &mut batch.timing;
        t.clear();
        push_server_timing(t, meta, read);
        out.extend_from_slice(t.as_bytes());
        out.extend_from_slice(&fields.after);
    }
    if fields.date {
        out.extend_from_slice(b"date: ");
        push_date(out);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    let bytes = body.as_ref().map_or(0, |b| b.len() as u64);
    batch.parts.push((out.len(), body));
    batch.done.push(Done {
        head,
        start,
        meta,
        read: read.unwrap_or_default(),
        bytes,
    });
    Some(len)
}

/// Writes every response of `batch`, in order.
async fn write_batch(io: &mut ConnIo, batch: &Batch) -> io::Result<()> {
    let mut written = 0usize;
    let total = batch.heads.len()
        + batch
            .parts
            .iter()
            .map(|(_, b)| b.as_ref().map_or(0, Bytes::len))
            .sum::<usize>();
    std::future::poll_fn(|cx| {
        while written < total {
            let mut slices = [IoSlice::new(&[]); 2 * MAX_BATCH];
            let mut n = 0;
            let mut skip = written;
            let mut head_start = 0;
            for (head_end, body) in &batch.parts {
                let pieces = [
                    &batch.heads[head_start..*head_end],
                    body.as_deref().unwrap_or(&[]),
                ];
                head_start = *head_end;
                for p in pieces {
                    if skip >= p.len() {
                        skip -= p.len();
                        continue;
                    }
                    slices[n] = IoSlice::new(&p[skip..]);
                    skip = 0;
                    n += 1;
                }
            }
            match Pin::new(&mut *io).poll_write_vectored(cx, &slices[..n]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(k)) => written += k,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    })
    .await
}

/// Records the batch's requests as the normal path's timers do when they drop. An
/// inline body counts as complete once handed to the socket layer, sent or not (the
/// normal path marks it when its one frame is taken), so every one records its status.
fn record(fast: &Fast, batch: &Batch, sets: &mut [Option<HandleSet>; 2]) {
    #[cfg(test)]
    tests::ANSWERED.fetch_add(batch.done.len() as u64, Ordering::Relaxed);
    let now = Instant::now();
    let rec = &fast.shared.recorder;
    for d in &batch.done {
        let op = if d.head { "HEAD file" } else { "GET file" };
        let set = sets[usize::from(d.head)].get_or_insert_with(|| rec.handles(op, 200));
        let total = now.saturating_duration_since(d.start);
        rec.record_phases(set, op, 200, total, d.meta, d.read, d.bytes);
    }
}

/// Reads into `buf`; `Ok(None)` when shutdown has begun while waiting.
async fn read(fast: &Fast, io: &mut ConnIo, buf: &mut [u8]) -> io::Result<Option<usize>> {
    std::future::poll_fn(|cx: &mut Context<'_>| {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *io).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(Some(rb.filled().len()))),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            // The waker is parked with the queue by now, so `stop` + a wake that comes
            // after this check polls again.
            Poll::Pending if fast.stopping() => Poll::Ready(Ok(None)),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Serves `io` while its requests are ones the fast path takes.
///
/// A request head split across reads is kept and read on, so hyper gets it whole: its
/// header timeout starts when it first reads, and handing it the first piece gave a
/// client that trickles its head the fast path's wait plus hyper's whole timeout. The
/// head must be complete within the header timeout of the previous response's end (or
/// of the connection's start), hyper's own rule; a head the buffer cannot hold goes to
/// hyper as it is.
pub(crate) async fn serve(fast: &Fast, io: &mut ConnIo, queue: &SendQueue) -> End {
    let mut buf = vec![0u8; READ_BUF];
    let mut batch = Batch::default();
    let mut sets: [Option<HandleSet>; 2] = [None, None];
    io.set_read_limit(Some(fast.header_timeout));
    // An unfinished head kept at `buf[..kept]`, and when its wait began.
    let mut kept = 0;
    let mut waiting_since = Instant::now();
    loop {
        if fast.stopping() {
            let _ = io.shutdown().await;
            return End::Closed;
        }
        let got = if kept == 0 {
            read(fast, io, &mut buf).await
        } else {
            let deadline = waiting_since + fast.header_timeout;
            match tokio::time::timeout_at(deadline.into(), read(fast, io, &mut buf[kept..])).await {
                Ok(got) => got,
                // hyper closes such a connection without an answer.
                Err(_) => return End::Closed,
            }
        };
        let filled = match got {
            Ok(Some(0)) => {
                // The client closed while idle: hyper shuts the socket down too.
                let _ = io.shutdown().await;
                return End::Closed;
            }
            Ok(Some(n)) => kept + n,
            Ok(None) => {
                let _ = io.shutdown().await;
                return End::Closed;
            }
            Err(_) => return End::Closed,
        };
        let mut pos = 0;
        loop {
            batch.clear();
            while batch.done.len() < MAX_BATCH
                && pos < filled
                && let Some(used) = answer(fast, &buf[pos..filled], &mut batch)
            {
                pos += used;
            }
            if batch.done.is_empty() {
                break;
            }
            let busy = InRequest::new(queue);
            let wrote = write_batch(io, &batch).await;
            record(fast, &batch, &mut sets);
            drop(busy);
            if wrote.is_err() {
                return End::Closed;
            }
            waiting_since = Instant::now();
        }
        kept = 0;
        if pos < filled {
            if filled - pos < buf.len() && head_unfinished(&buf[pos..filled]) {
                buf.copy_within(pos..filled, 0);
                kept = filled - pos;
                continue;
            }
            io.set_read_limit(None);
            return End::Handoff(Bytes::copy_from_slice(&buf[pos..filled]));
        }
    }
}

/// Whether `bytes` are the start of a request head that is well formed so far (more
/// bytes may complete it); a malformed one goes to hyper, which answers 400.
fn head_unfinished(bytes: &[u8]) -> bool {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    matches!(
        httparse::Request::new(&mut fields).parse(bytes),
        Ok(httparse::Status::Partial)
    )
}

/// The connection as hyper gets it after the fast path: the bytes the fast path read
/// and did not answer, then the socket.
pub(crate) struct Rewind {
    prefix: Bytes,
    io: ConnIo,
}

impl Rewind {
    pub(crate) fn new(prefix: Bytes, io: ConnIo) -> Rewind {
        Rewind { prefix, io }
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix.split_to(n));
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, HttpOptions};
    use std::sync::atomic::AtomicU64;
    use tokio::io::AsyncReadExt;

    /// Requests the fast path answered (all tests of this binary together).
    pub(super) static ANSWERED: AtomicU64 = AtomicU64::new(0);

    /// Held by the tests that count [`ANSWERED`], so each counts only its own answers.
    static COUNTING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    #[test]
    fn plain_paths() {
        for ok in ["/a", "/small.bin", "/d/e-f_g~h.txt", "/a.b.c"] {
            assert!(plain_path(ok), "{ok}");
        }
        for no in [
            "", "/", "a", "/a/", "//a", "/a//b", "/.env", "/a/../b", "/a/./b", "/%61", "/a?x",
            "/a b", "/a\\b", "/a+b",
        ] {
            assert!(!plain_path(no), "{no}");
        }
        assert!(!plain_path(&format!("/{}", "x".repeat(256))));
        assert!(plain_path(&format!("/{}", "x".repeat(255))));
    }

    /// A server on `127.0.0.1:0` serving `root` with `http`, the fast path on or off; it
    /// stops when the returned sender is dropped.
    async fn start(
        root: &std::path::Path,
        http: &HttpOptions,
        fast: bool,
    ) -> (
        std::net::SocketAddr,
        Arc<latency::Registry>,
        tokio::sync::oneshot::Sender<()>,
    ) {
        let mut config = Config::local(root);
        config.http = http.clone();
        config.fast_path = fast;
        config.list_dirs = true;
        start_with(config).await
    }

    /// A server on `127.0.0.1:0` with `config`; it stops when the sender is dropped.
    async fn start_with(
        config: Config,
    ) -> (
        std::net::SocketAddr,
        Arc<latency::Registry>,
        tokio::sync::oneshot::Sender<()>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let registry = latency::Registry::new("httpd_request");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let reg = registry.clone();
        tokio::spawn(async move {
            crate::serve(listener, config, reg, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        (addr, registry, tx)
    }

    /// Sends `parts` (pausing between them, so they arrive in separate reads), then reads
    /// until the server closes.
    async fn exchange(addr: std::net::SocketAddr, parts: &[Vec<u8>]) -> Vec<u8> {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.set_nodelay(true).unwrap();
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
            s.write_all(p).await.unwrap();
        }
        let mut out = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out));
        read.await
            .expect("the server closes after the last request")
            .unwrap();
        out
    }

    fn get(path: &str, extra: &str) -> String {
        format!("GET {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n")
    }

    /// The last request of every exchange: the server answers it and closes.
    fn last() -> String {
        get("/small.bin", "Connection: close\r\n")
    }

    /// Exchanges to run against both servers: pieces sent in separate writes.
    fn scenarios(etag: &str) -> Vec<(&'static str, Vec<Vec<u8>>)> {
        let one = |name, reqs: Vec<String>| {
            let mut all: String = reqs.concat();
            all.push_str(&last());
            (name, vec![all.into_bytes()])
        };
        let split = |name, pieces: Vec<String>| {
            let mut pieces: Vec<Vec<u8>> = pieces.into_iter().map(String::into_bytes).collect();
            pieces.push(last().into_bytes());
            (name, pieces)
        };
        let many: Vec<String> = (0..300)
            .map(|i| {
                if i % 3 == 0 {
                    "HEAD /small.bin HTTP/1.1\r\nHost: t\r\n\r\n".to_string()
                } else {
                    get("/small.bin", "User-Agent: x\r\n")
                }
            })
            .collect();
        vec![
            one("one GET", vec![get("/small.bin", "")]),
            one(
                "HEAD",
                vec!["HEAD /small.bin HTTP/1.1\r\nHost: t\r\n\r\n".to_string()],
            ),
            one(
                "ignored fields",
                vec![get(
                    "/small.bin",
                    "user-agent: wrk\r\nAccept: */*\r\nConnection: Keep-Alive\r\nAccept-Encoding: gzip\r\n",
                )],
            ),
            one(
                "pipelined GET/HEAD, several files",
                vec![
                    get("/small.bin", ""),
                    format!("HEAD /d/x.html HTTP/1.1\r\nHost: t\r\n\r\n"),
                    get("/d/x.html", ""),
                    get("/empty.txt", ""),
                    get("/small.bin", ""),
                ],
            ),
            one("many pipelined (over one read and one writev)", many),
            one(
                "fallback in the middle",
                vec![
                    get("/small.bin", ""),
                    get("/small.bin", "Range: bytes=1-10\r\n"),
                    get("/small.bin", ""),
                ],
            ),
            split(
                "split inside the request line",
                vec![
                    "GET /small.bin HT".into(),
                    "TP/1.1\r\nHost: t\r\n\r\n".into(),
                ],
            ),
            split(
                "split after a whole request",
                vec![
                    get("/small.bin", "") + "GET /sma",
                    "ll.bin HTTP/1.1\r\nHost: t\r\n\r\n".into(),
                ],
            ),
            split(
                "keep-alive across writes",
                vec![
                    get("/small.bin", ""),
                    get("/d/x.html", ""),
                    get("/small.bin", ""),
                ],
            ),
            one(
                "If-None-Match",
                vec![get("/small.bin", &format!("If-None-Match: {etag}\r\n"))],
            ),
            one(
                "If-Match fails",
                vec![get("/small.bin", "If-Match: \"nope\"\r\n")],
            ),
            one(
                "If-Modified-Since",
                vec![get(
                    "/small.bin",
                    "If-Modified-Since: Wed, 01 Jan 2098 00:00:00 GMT\r\n",
                )],
            ),
            one(
                "paths",
                vec![
                    get("/missing", ""),
                    get("/d", ""),
                    get("/d/", ""),
                    get("/small.bin/", ""),
                    get("/small.bin?x=1", ""),
                    get("/sm%61ll.bin", ""),
                    get("//small.bin", ""),
                    get("/.hidden", ""),
                    get("/d/../small.bin", ""),
                    get("/big.bin", ""),
                ],
            ),
            one(
                "Host rules",
                vec![
                    "GET /small.bin HTTP/1.1\r\n\r\n".into(),
                    "GET /small.bin HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".into(),
                ],
            ),
            one(
                "HTTP/1.0 and methods",
                vec![
                    "POST /small.bin HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc".into(),
                    "get /small.bin HTTP/1.1\r\nHost: t\r\n\r\n".into(),
                    "OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n".into(),
                    "GET /small.bin HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".into(),
                ],
            ),
            one(
                "unknown field",
                vec![
                    get("/small.bin", "X-Whatever: 1\r\n"),
                    get("/small.bin", ""),
                ],
            ),
        ]
    }

    /// Every exchange gets the same bytes (but Date and Server-Timing's times) from the
    /// fast path as from hyper, under several response-shaping options, and the metrics
    /// count the same requests; the fast path answered some of them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fast_path_answers_byte_for_byte_as_hyper() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("small.bin"), b"0123456789abcdef".repeat(256)).unwrap();
        std::fs::write(root.join("empty.txt"), b"").unwrap();
        std::fs::write(root.join(".hidden"), b"secret").unwrap();
        std::fs::write(root.join("big.bin"), vec![1u8; 200_000]).unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/x.html"), b"<p>hi</p>").unwrap();
        // The open-file cache keeps bytes of files unchanged for a second.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let md = std::fs::metadata(root.join("small.bin")).unwrap();
        let mtime = md
            .modified()
            .unwrap()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let etag = format!("\"{mtime:x}-1000\"");
        let shapings = [
            HttpOptions::default(),
            HttpOptions {
                cache_control: Some("max-age=60".into()),
                cache_control_by_ext: vec![("html".into(), "no-cache".into())],
                headers: vec![
                    ("X-Content-Type-Options".into(), "nosniff".into()),
                    ("Server".into(), "other".into()),
                ],
                hide_dotfiles: true,
                ..Default::default()
            },
            HttpOptions {
                server_timing: false,
                headers: vec![("Date".into(), "fixed".into())],
                ..Default::default()
            },
            HttpOptions {
                headers: vec![("Server-Timing".into(), "mine".into())],
                ..Default::default()
            },
        ];
        let _counting = COUNTING.lock().await;
        let before = ANSWERED.load(Ordering::Relaxed);
        for (k, http) in shapings.iter().enumerate() {
            let (fast_addr, fast_reg, stop_fast) = start(root, http, true).await;
            let (slow_addr, slow_reg, stop_slow) = start(root, http, false).await;
            for (name, parts) in scenarios(&etag) {
                let a = exchange(fast_addr, &parts).await;
                let b = exchange(slow_addr, &parts).await;
                assert!(!b.is_empty(), "{name}");
                if let Some(d) = crate::fuzzing::difference(&a, &b) {
                    panic!("shaping {k}, {name}: {d}");
                }
            }
            // Timers record just after the last byte is written.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let counts = |r: &latency::Registry| {
                let mut v: Vec<_> = r
                    .snapshot()
                    .to_series_snapshots()
                    .into_iter()
                    .map(|s| (s.op, s.phase, s.status, s.count, s.bytes))
                    .collect();
                v.sort();
                v
            };
            assert_eq!(counts(&fast_reg), counts(&slow_reg), "metrics, shaping {k}");
            drop((stop_fast, stop_slow));
        }
        let answered = ANSWERED.load(Ordering::Relaxed) - before;
        assert!(answered > 4 * 100, "the fast path answered {answered}");
    }

    /// The server the fuzz targets drive (`crate::fuzzing::Server`) is the binary's:
    /// the fast path answers its plain requests, byte for byte as hyper does. (The
    /// fuzz target used to build its own hyper connection, so the fast path was never
    /// fuzzed.)
    #[test]
    fn the_fuzzed_server_is_answered_by_the_fast_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, b"hello, world\n").unwrap();
        // The open-file cache keeps the bytes of files unchanged for a second.
        std::thread::sleep(Duration::from_millis(1100));
        let fast = crate::fuzzing::Server::new(dir.path(), true).unwrap();
        let hyper = crate::fuzzing::Server::new(dir.path(), false).unwrap();
        let request =
            b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\nHEAD /a.txt HTTP/1.1\r\nHost: x\r\n\r\n";
        let _counting = COUNTING.blocking_lock();
        let before = ANSWERED.load(Ordering::Relaxed);
        let a = fast.exchange(request).unwrap();
        assert_eq!(
            ANSWERED.load(Ordering::Relaxed) - before,
            2,
            "fast-path answers"
        );
        let b = hyper.exchange(request).unwrap();
        assert_eq!(
            ANSWERED.load(Ordering::Relaxed) - before,
            2,
            "hyper's server"
        );
        let (a, b) = (crate::fuzzing::masked(&a), crate::fuzzing::masked(&b));
        assert_eq!(String::from_utf8_lossy(&a), String::from_utf8_lossy(&b));
        assert!(a.starts_with(b"HTTP/1.1 200 OK\r\n"));
        // Two answers from the fast path, the last request's from hyper.
        let answers = String::from_utf8_lossy(&a)
            .matches("HTTP/1.1 200 OK")
            .count();
        assert_eq!(answers, 3);
    }

    /// A client that sends part of a head late and then nothing is closed at the header
    /// timeout counted from the connection's start, as hyper counts it, unanswered; a
    /// head finished in time is answered. Before, the fast path handed the first piece
    /// to hyper, whose timeout then started afresh: closed at 1.2 + 2 s here.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_trickled_head_gets_one_header_timeout_not_two() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("small.bin"), b"x".repeat(100)).unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let mut config = Config::local(dir.path());
        config.header_timeout = Duration::from_secs(2);
        let (addr, _registry, _stop) = start_with(config).await;

        let t = Instant::now();
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1200)).await;
        s.write_all(b"GET /small.bin HTTP/1.1\r\nHo").await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
            .await
            .expect("closed within 10 s")
            .unwrap();
        let took = t.elapsed();
        assert!(
            out.is_empty(),
            "answered: {:?}",
            String::from_utf8_lossy(&out)
        );
        assert!(
            took >= Duration::from_millis(1900) && took < Duration::from_millis(2800),
            "closed after {took:?}, not at the 2 s header timeout"
        );

        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.set_nodelay(true).unwrap();
        s.write_all(b"GET /small.bin HTTP/1.1\r\nHo").await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        s.write_all(b"st: t\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
            .await
            .expect("answered within 10 s")
            .unwrap();
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.ends_with(&"x".repeat(100)), "{text}");
    }
}

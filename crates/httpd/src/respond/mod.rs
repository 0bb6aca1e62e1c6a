//! One request → one response: the pipeline of GET/HEAD (request checks, path, storage
//! lookup, index.html, listing, precompressed variant, preconditions, ranges, body
//! mode), errors; every response carries its [`Timing`].
//!
//! - `request`: what a request must carry (one Host) and what its body means for the
//!   connection.
//! - `conditional`: validators and preconditions (RFC 9110 §13).
//! - `range`: the `Range` header (one range, several, or the whole file).
//! - `encoding`: `Accept-Encoding` and the precompressed variants (`--precompressed`).
//! - `file_fields`: the fields of a file's responses, for this path and the fast path.
//! - `headers`: the one response builder every kind of response goes through.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};

use crate::body::{FileBody, SendQueue};
use crate::config::Shaping;
use crate::storage::{Entry, Handle, Kind, Storage, StorageError};
use crate::timing::{Recorder, RequestInfo, Timing};
use crate::{listing, mime, path};
use conditional::{Verdict, header_list, secs};
pub(crate) use conditional::{etag, etag_matches};
use file_fields::FileFields;
pub(crate) use file_fields::plain_file_fields;
use headers::{Content, response, server_timing};
pub(crate) use headers::{TIMING_PLACEHOLDER, push_server_timing};
pub(crate) use range::{RangeReq, parse_range};

mod conditional;
mod encoding;
mod file_fields;
mod headers;
mod range;
mod request;

/// What every request handler shares.
pub(crate) struct Shared {
    pub storage: Arc<dyn Storage>,
    pub recorder: Arc<Recorder>,
    pub list_dirs: bool,
    /// The user's response shaping (`--precompressed`, `--cache-control`, ...).
    pub shaping: Shaping,
    /// Send local bodies above `inline_limit` with sendfile.
    pub sendfile: bool,
    pub inline_limit: u64,
    pub chunk: usize,
}

/// The request-independent context of one request.
struct Ctx {
    shared: Arc<Shared>,
    start: Instant,
    info: RequestInfo,
    head: bool,
}

/// NFS bodies larger than this are streamed after a first READ of this many bytes, made
/// before the status line: a server that died within the attribute cache's window then
/// answers 5xx instead of `200` and a cut body.
const FIRST_READ: u64 = 64 << 10;

impl Ctx {
    fn op(&self, class: Class) -> &'static str {
        match (self.head, class) {
            (false, Class::File) => "GET file",
            (false, Class::Range) => "GET range",
            (false, Class::Dir) => "GET dir",
            (false, Class::Error) => "GET error",
            (true, Class::File | Class::Range) => "HEAD file",
            (true, Class::Dir) => "HEAD dir",
            (true, Class::Error) => "HEAD error",
        }
    }

    fn timing(
        &self,
        class: Class,
        status: u16,
        meta: Duration,
        read: Duration,
        len: u64,
        mode: &'static str,
    ) -> Arc<Timing> {
        Timing::new(
            self.shared.recorder.clone(),
            self.start,
            RequestInfo {
                method: self.info.method,
                path: self.info.path.clone(),
                peer: self.info.peer,
                log: self.info.log.clone(),
            },
            self.op(class),
            status,
            meta,
            read,
            len,
            mode,
        )
    }

    /// A small text response (errors, redirects).
    fn text(
        &self,
        class: Class,
        status: StatusCode,
        meta: Duration,
        extra: &[(header::HeaderName, HeaderValue)],
    ) -> Response<FileBody> {
        let text = format!(
            "{} {}\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        let ctype = HeaderValue::from_static("text/plain; charset=utf-8");
        self.in_memory(class, status, ctype, text, meta, extra)
    }

    /// A response whose body was made here (text, a listing): no body for HEAD.
    fn in_memory(
        &self,
        class: Class,
        status: StatusCode,
        ctype: HeaderValue,
        text: String,
        meta: Duration,
        extra: &[(header::HeaderName, HeaderValue)],
    ) -> Response<FileBody> {
        let len = text.len() as u64;
        let body_len = if self.head { 0 } else { len };
        let timing = self.timing(
            class,
            status.as_u16(),
            meta,
            Duration::ZERO,
            body_len,
            "memory",
        );
        let body = if self.head {
            FileBody::empty()
        } else {
            FileBody::bytes(Bytes::from(text))
        };
        let content = Content { ctype, len };
        let extra = extra.iter().cloned();
        let body = body.with_timing(timing);
        self.respond(status, body, Some(content), extra, meta, None)
    }

    /// [`response`] with this server's Server-Timing switch.
    fn respond(
        &self,
        status: StatusCode,
        body: FileBody,
        content: Option<Content>,
        extra: impl IntoIterator<Item = (header::HeaderName, HeaderValue)>,
        meta: Duration,
        read: Option<Duration>,
    ) -> Response<FileBody> {
        let shaping = &self.shared.shaping;
        let timing = shaping.server_timing.then(|| server_timing(meta, read));
        response(status, body, content, extra, timing)
    }

    fn error(&self, e: &StorageError, meta: Duration) -> Response<FileBody> {
        if e.status() >= 500 {
            let error = service::Chain(e);
            tracing::warn!(path = %self.info.path, %error, "storage error");
        }
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        self.text(Class::Error, status, meta, &[])
    }
}

#[derive(Clone, Copy)]
enum Class {
    File,
    Range,
    Dir,
    Error,
}

/// Handles one request: checks what it must carry, answers it, and adds what every
/// response gets (the user's `--header`s, `Connection: close` when the request's body
/// was left unread).
pub(crate) async fn handle<B>(
    shared: Arc<Shared>,
    req: Request<B>,
    peer: SocketAddr,
    queue: SendQueue,
) -> Response<FileBody>
where
    B: http_body::Body + Unpin,
{
    let start = Instant::now();
    let (parts, body) = req.into_parts();
    let req = Request::from_parts(parts, ());
    let drained = request::drain_body(&req, body).await;
    let mut resp = match request::check(&req) {
        Ok(()) => answer(&shared, &req, start, peer, queue).await,
        Err(why) => {
            tracing::debug!(%peer, reason = why, "bad request");
            let ctx = Ctx {
                shared: shared.clone(),
                start,
                info: request_info(&shared, &req, "OTHER", peer),
                head: req.method() == Method::HEAD,
            };
            ctx.text(Class::Error, StatusCode::BAD_REQUEST, Duration::ZERO, &[])
        }
    };
    let h = resp.headers_mut();
    shared.shaping.add_headers(h);
    if !drained {
        // hyper cannot find the next request behind an unread body: say so and close,
        // instead of dropping the connection after the response (and never answering
        // `Expect: 100-continue` with a 100 for a body that is not read).
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// The access log's view of `req` (only built when a log is written).
fn request_info(
    shared: &Shared,
    req: &Request<()>,
    method: &'static str,
    peer: SocketAddr,
) -> RequestInfo {
    let log = shared.recorder.logs().then(|| {
        let text = |name| {
            conditional::header_str(req.headers(), name).map(|v: &str| truncate::<String>(v))
        };
        Arc::new(crate::timing::LogFields {
            method: truncate(req.method().as_str()),
            target: truncate(
                req.uri()
                    .path_and_query()
                    .map_or(req.uri().path(), |pq| pq.as_str()),
            ),
            protocol: match req.version() {
                http::Version::HTTP_10 => "HTTP/1.0",
                http::Version::HTTP_09 => "HTTP/0.9",
                _ => "HTTP/1.1",
            },
            host: text(header::HOST),
            user_agent: text(header::USER_AGENT),
            referer: text(header::REFERER),
        })
    });
    RequestInfo {
        method,
        path: truncate(req.uri().path()),
        peer,
        log,
    }
}

/// Answers a request that passed [`request::check`].
async fn answer(
    shared: &Arc<Shared>,
    req: &Request<()>,
    start: Instant,
    peer: SocketAddr,
    queue: SendQueue,
) -> Response<FileBody> {
    let shared = shared.clone();
    let (method, head) = match *req.method() {
        Method::GET => ("GET", false),
        Method::HEAD => ("HEAD", true),
        _ => {
            let ctx = Ctx {
                info: request_info(&shared, req, "OTHER", peer),
                shared,
                start,
                head: false,
            };
            return ctx.text(
                Class::Error,
                StatusCode::METHOD_NOT_ALLOWED,
                Duration::ZERO,
                &[(header::ALLOW, HeaderValue::from_static("GET, HEAD"))],
            );
        }
    };
    let raw_path = req.uri().path();
    let ctx = Ctx {
        shared: shared.clone(),
        start,
        info: request_info(&shared, req, method, peer),
        head,
    };
    let comps = match path::components(raw_path) {
        Ok(c) => c,
        Err(why) => {
            tracing::debug!(path = raw_path, reason = why.0, "bad request path");
            return ctx.text(Class::Error, StatusCode::BAD_REQUEST, Duration::ZERO, &[]);
        }
    };
    if shared.shaping.hide_dotfiles && comps.iter().any(|c| c.starts_with('.')) {
        return ctx.error(&StorageError::NotFound, Duration::ZERO);
    }
    let storage = &shared.storage;
    let meta_start = Instant::now();
    let opened = match storage.open_now(&comps) {
        Some(r) => r,
        None => storage.open(&comps).await,
    };
    let entry = match opened {
        Ok(e) => e,
        Err(e) => return ctx.error(&e, meta_start.elapsed()),
    };
    let (entry, name) = if entry.meta.kind == Kind::Dir {
        if !raw_path.ends_with('/') {
            let mut loc = format!("{raw_path}/");
            if let Some(q) = req.uri().query() {
                loc.push('?');
                loc.push_str(q);
            }
            let loc = HeaderValue::from_str(&loc).unwrap_or(HeaderValue::from_static("/"));
            return ctx.text(
                Class::Dir,
                StatusCode::MOVED_PERMANENTLY,
                meta_start.elapsed(),
                &[(header::LOCATION, loc)],
            );
        }
        let mut idx = comps.clone();
        idx.push("index.html".to_string());
        match storage.open(&idx).await {
            Ok(e) if e.meta.kind == Kind::File => (e, "index.html"),
            Ok(_) | Err(StorageError::NotFound) => {
                if !shared.list_dirs {
                    return ctx.error(&StorageError::Forbidden("no index"), meta_start.elapsed());
                }
                let json = req
                    .uri()
                    .query()
                    .is_some_and(|q| q.split('&').any(|kv| kv == "format=json"));
                return listing_response(&ctx, raw_path, &entry, meta_start, json).await;
            }
            Err(e) => return ctx.error(&e, meta_start.elapsed()),
        }
    } else {
        if raw_path.ends_with('/') {
            // `/file/` names a directory that does not exist (RFC 3986 path semantics;
            // nginx and Apache answer 404 too).
            return ctx.error(&StorageError::NotFound, meta_start.elapsed());
        }
        let name = comps.last().map_or("", String::as_str);
        (entry, name)
    };
    let (entry, coding) = if shared.shaping.precompressed {
        let dir = &comps[..comps.len().saturating_sub(1)];
        let dir: Vec<String> = if name == "index.html" && raw_path.ends_with('/') {
            comps.clone()
        } else {
            dir.to_vec()
        };
        match encoding::variant(storage.as_ref(), req.headers(), &dir, name).await {
            Some((variant, coding)) => (variant, Some(coding)),
            None => (entry, None),
        }
    } else {
        (entry, None)
    };
    let meta = meta_start.elapsed();
    serve_file(&ctx, req.headers(), entry, name, coding, meta, queue).await
}

async fn listing_response(
    ctx: &Ctx,
    raw_path: &str,
    dir: &Entry,
    meta_start: Instant,
    json: bool,
) -> Response<FileBody> {
    let mut entries = match ctx.shared.storage.list(dir).await {
        Ok(e) => e,
        Err(e) => return ctx.error(&e, meta_start.elapsed()),
    };
    if ctx.shared.shaping.hide_dotfiles {
        entries.retain(|e| !e.name.starts_with('.'));
    }
    let meta = meta_start.elapsed();
    let (text, ctype) = if json {
        (listing::render_json(entries), "application/json")
    } else {
        (
            listing::render(raw_path, entries),
            "text/html; charset=utf-8",
        )
    };
    // The same URL answers HTML or JSON by its query, not by a request header, so no Vary.
    let ctype = HeaderValue::from_static(ctype);
    ctx.in_memory(Class::Dir, StatusCode::OK, ctype, text, meta, &[])
}

/// Answers a GET or HEAD of the file `entry` (or its precompressed variant in `coding`):
/// preconditions, then the range asked for, then the body.
#[allow(clippy::too_many_arguments)]
async fn serve_file(
    ctx: &Ctx,
    headers: &HeaderMap,
    entry: Entry,
    name: &str,
    coding: Option<&'static str>,
    meta: Duration,
    queue: SendQueue,
) -> Response<FileBody> {
    let shaping = &ctx.shared.shaping;
    let size = entry.meta.size;
    let mtime = secs(entry.meta.mtime);
    let v = conditional::validators(mtime, size, coding);
    let tag = v.etag.to_str().expect("ASCII");
    let fields = FileFields::new(shaping, &v, name);

    // Most requests carry no precondition and no Range: one pass over their few fields
    // then replaces the six map lookups below (without these fields, the verdict is
    // Proceed and the range the whole file).
    let plain = !headers.keys().any(|k| {
        [
            header::IF_MATCH,
            header::IF_NONE_MATCH,
            header::IF_MODIFIED_SINCE,
            header::IF_UNMODIFIED_SINCE,
            header::RANGE,
        ]
        .contains(k)
    });
    let verdict = if plain {
        Verdict::Proceed
    } else {
        conditional::evaluate(headers, tag, mtime)
    };
    match verdict {
        Verdict::Proceed => {}
        Verdict::PreconditionFailed => {
            let status = StatusCode::PRECONDITION_FAILED;
            return ctx.text(Class::File, status, meta, fields.tags());
        }
        Verdict::NotModified => {
            let timing = ctx.timing(Class::File, 304, meta, Duration::ZERO, 0, "none");
            let body = FileBody::empty().with_timing(timing);
            let status = StatusCode::NOT_MODIFIED;
            return ctx.respond(status, body, None, fields.validators, meta, None);
        }
    }
    let range = if plain {
        RangeReq::Full
    } else {
        requested_range(headers, tag, mtime, size, shaping.max_ranges)
    };
    let ctype = HeaderValue::from_static(mime::content_type(name));
    let (status, class, parts) = match range {
        RangeReq::Full => (StatusCode::OK, Class::File, vec![(0, size)]),
        RangeReq::Part(s, e) => (
            StatusCode::PARTIAL_CONTENT,
            Class::Range,
            vec![(s, e - s + 1)],
        ),
        RangeReq::Parts(ranges) => {
            let parts = ranges.iter().map(|&(s, e)| (s, e - s + 1)).collect();
            (StatusCode::PARTIAL_CONTENT, Class::Range, parts)
        }
        RangeReq::Unsatisfiable => {
            let cr = HeaderValue::from_str(&format!("bytes */{size}")).expect("ASCII");
            let mut extra = fields.tags().to_vec();
            extra.push((header::CONTENT_RANGE, cr));
            extra.push((header::ACCEPT_RANGES, HeaderValue::from_static("bytes")));
            let status = StatusCode::RANGE_NOT_SATISFIABLE;
            return ctx.text(Class::Range, status, meta, &extra);
        }
    };

    let prepared = if parts.len() > 1 {
        multipart_body(ctx, &entry, &parts, size, &ctype, queue).await
    } else {
        let (offset, len) = parts[0];
        let content_range = (status == StatusCode::PARTIAL_CONTENT).then(|| {
            let cr = format!("bytes {}-{}/{}", offset, offset + len - 1, size);
            HeaderValue::from_str(&cr).expect("ASCII")
        });
        let body = if ctx.head || len == 0 {
            Ok((FileBody::empty(), "none", None))
        } else {
            file_body(ctx, &entry, offset, len, true, queue).await
        };
        body.map(|(body, mode, read)| Prepared {
            body,
            mode,
            read,
            content: Content { ctype, len },
            content_range,
        })
    };
    let p = match prepared {
        Ok(p) => p,
        Err(e) => return ctx.error(&e, meta),
    };
    let body_len = if ctx.head { 0 } else { p.content.len };
    let read = p.read.unwrap_or_default();
    let timing = ctx.timing(class, status.as_u16(), meta, read, body_len, p.mode);
    let body = p.body.with_timing(timing);
    let extra = fields.served(coding, p.content_range);
    ctx.respond(status, body, Some(p.content), extra, meta, p.read)
}

/// The range a request with preconditions or `Range` asks for, once its `If-Range` is
/// checked against the file's validators (`tag`, `mtime`).
fn requested_range(
    headers: &HeaderMap,
    tag: &str,
    mtime: u64,
    size: u64,
    max_ranges: usize,
) -> RangeReq {
    let range = match header_list(headers, header::RANGE) {
        // Several Range lines cannot be combined into one valid value: ignored.
        Some(r) if headers.get_all(header::RANGE).iter().count() == 1 => {
            parse_range(&r, size, max_ranges)
        }
        _ => RangeReq::Full,
    };
    if range != RangeReq::Full && !conditional::if_range_fresh(headers, tag, mtime) {
        return RangeReq::Full;
    }
    range
}

/// A 200's or 206's body, ready to send, and what the response says about it.
struct Prepared {
    body: FileBody,
    /// How the body is sent, for the log.
    mode: &'static str,
    /// Time spent reading before the status line.
    read: Option<Duration>,
    content: Content,
    /// A single range's `Content-Range`.
    content_range: Option<HeaderValue>,
}

/// The `multipart/byteranges` body of `parts` ((offset, length) pairs) of `entry`, a file
/// of `size` bytes and type `ctype`; no body for HEAD, with the length a GET would get.
async fn multipart_body(
    ctx: &Ctx,
    entry: &Entry,
    parts: &[(u64, u64)],
    size: u64,
    ctype: &HeaderValue,
    queue: SendQueue,
) -> Result<Prepared, StorageError> {
    let boundary = multipart_boundary();
    let mut pieces = Vec::new();
    let mut read_time = Duration::ZERO;
    let mut mode = "memory";
    let mut total = 0u64;
    for (i, &(offset, len)) in parts.iter().enumerate() {
        let head = format!(
            "--{boundary}\r\nContent-Type: {}\r\nContent-Range: bytes {}-{}/{size}\r\n\r\n",
            ctype.to_str().unwrap_or("application/octet-stream"),
            offset,
            offset + len - 1
        );
        total += head.len() as u64 + len + 2;
        if ctx.head {
            continue;
        }
        pieces.push(FileBody::bytes(Bytes::from(head)));
        let (b, m, r) = file_body(ctx, entry, offset, len, i == 0, queue.clone()).await?;
        pieces.push(b);
        (mode, read_time) = (m, read_time + r.unwrap_or_default());
        pieces.push(FileBody::bytes(Bytes::from_static(b"\r\n")));
    }
    let end = format!("--{boundary}--\r\n");
    total += end.len() as u64;
    pieces.push(FileBody::bytes(Bytes::from(end)));
    let body = if ctx.head {
        FileBody::empty()
    } else {
        FileBody::parts(pieces)
    };
    let ctype = format!("multipart/byteranges; boundary={boundary}");
    Ok(Prepared {
        body,
        mode,
        read: (!read_time.is_zero()).then_some(read_time),
        content: Content {
            ctype: HeaderValue::from_str(&ctype).expect("ASCII"),
            len: total,
        },
        content_range: None,
    })
}

/// The body of `len > 0` bytes of `entry` at `offset`, its mode for the log, and the time
/// spent reading before the status line. With `first`, an NFS body makes its first READ
/// now, so a server that is gone answers with an error status, not a cut body.
async fn file_body(
    ctx: &Ctx,
    entry: &Entry,
    offset: u64,
    len: u64,
    first: bool,
    queue: SendQueue,
) -> Result<(FileBody, &'static str, Option<Duration>), StorageError> {
    let shared = &ctx.shared;
    let storage = &shared.storage;
    let read = |off: u64, n: u64| async move {
        let t = Instant::now();
        // Bytes the handle holds (the open-file cache's copy, an NFS file's first bytes
        // read with its LOOKUP) are sliced here, as the storage's `read` would, without
        // the boxed future of an async call.
        let data = match entry.handle.cached_range(off, n as usize) {
            Some(data) => data,
            None => storage.read(&entry.handle, off, n as usize).await?,
        };
        Ok::<_, StorageError>((FileBody::bytes(data), t.elapsed()))
    };
    if len <= shared.inline_limit {
        let (body, took) = read(offset, len).await?;
        return Ok((body, "memory", Some(took)));
    }
    let mode = if storage.splices() {
        "splice"
    } else {
        "stream"
    };
    let stream = |off: u64, n: u64| {
        FileBody::stream(
            storage.clone(),
            entry.handle.clone(),
            off,
            n,
            shared.chunk,
            queue.clone(),
        )
    };
    Ok(match &entry.handle {
        Handle::Local(file) if shared.sendfile => (
            FileBody::sendfile(file.clone(), offset, len, queue.clone()),
            "sendfile",
            None,
        ),
        Handle::Nfs(_) if first => {
            let n = FIRST_READ.min(len);
            let (head, took) = read(offset, n).await?;
            let body = FileBody::parts(vec![head, stream(offset + n, len - n)]);
            (body, mode, Some(took))
        }
        _ => (stream(offset, len), mode, None),
    })
}

/// A boundary no file byte sequence is likely to contain: unique per response.
fn multipart_boundary() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // A 64-bit mix (splitmix64) of time and count, so boundaries do not look sequential.
    let mut z = t ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    format!("servelab-{:016x}", z ^ (z >> 31))
}

/// Paths in logs are capped so a huge URL cannot bloat the log.
fn truncate<T: for<'a> From<&'a str>>(p: &str) -> T {
    let mut end = p.len().min(1024);
    while !p.is_char_boundary(end) {
        end -= 1;
    }
    T::from(&p[..end])
}

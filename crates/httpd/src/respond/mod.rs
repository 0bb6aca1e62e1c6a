//! One request → one response: the pipeline of GET/HEAD (path, storage lookup,
//! index.html, listing, preconditions, range, body mode), errors; every response carries
//! its [`Timing`].
//!
//! - `conditional`: validators and preconditions (RFC 9110 §13).
//! - `range`: the `Range` header (one range, or the whole file).
//! - `headers`: the one response builder every kind of response goes through.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};

use crate::body::{FileBody, SendQueue};
use crate::storage::{Entry, Handle, Kind, Storage, StorageError};
use crate::timing::{Recorder, RequestInfo, Timing};
use crate::{listing, mime, path};
use conditional::{Verdict, etag, header_str, secs};
use headers::{Content, response};
use range::{RangeReq, parse_range};

mod conditional;
#[doc(hidden)]
pub mod fuzzing;
mod headers;
mod range;

/// What every request handler shares.
pub(crate) struct Shared {
    pub storage: Arc<dyn Storage>,
    pub recorder: Arc<Recorder>,
    pub list_dirs: bool,
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
        response(status, body, Some(content), extra, meta, None)
    }

    fn error(&self, e: &StorageError, meta: Duration) -> Response<FileBody> {
        if e.status() >= 500 {
            tracing::warn!(path = %self.info.path, error = %e, "storage error");
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

/// Handles one request.
pub(crate) async fn handle<B>(
    shared: Arc<Shared>,
    req: Request<B>,
    peer: SocketAddr,
    queue: SendQueue,
) -> Response<FileBody> {
    let start = Instant::now();
    let (method, head) = match *req.method() {
        Method::GET => ("GET", false),
        Method::HEAD => ("HEAD", true),
        _ => {
            let ctx = Ctx {
                shared,
                start,
                info: RequestInfo {
                    method: "OTHER",
                    path: truncate(req.uri().path()),
                    peer,
                },
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
        info: RequestInfo {
            method,
            path: truncate(raw_path),
            peer,
        },
        head,
    };
    let comps = match path::components(raw_path) {
        Ok(c) => c,
        Err(why) => {
            tracing::debug!(path = raw_path, reason = why.0, "bad request path");
            return ctx.text(Class::Error, StatusCode::BAD_REQUEST, Duration::ZERO, &[]);
        }
    };
    let storage = &shared.storage;
    let meta_start = Instant::now();
    let entry = match storage.open(&comps).await {
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
                return listing_response(&ctx, raw_path, &entry, meta_start).await;
            }
            Err(e) => return ctx.error(&e, meta_start.elapsed()),
        }
    } else {
        let name = comps.last().map_or("", String::as_str);
        (entry, name)
    };
    let meta = meta_start.elapsed();
    serve_file(&ctx, req.headers(), entry, name, meta, queue).await
}

async fn listing_response(
    ctx: &Ctx,
    raw_path: &str,
    dir: &Entry,
    meta_start: Instant,
) -> Response<FileBody> {
    let entries = match ctx.shared.storage.list(dir).await {
        Ok(e) => e,
        Err(e) => return ctx.error(&e, meta_start.elapsed()),
    };
    let meta = meta_start.elapsed();
    let html = listing::render(raw_path, entries);
    let ctype = HeaderValue::from_static("text/html; charset=utf-8");
    ctx.in_memory(Class::Dir, StatusCode::OK, ctype, html, meta, &[])
}

async fn serve_file(
    ctx: &Ctx,
    headers: &HeaderMap,
    entry: Entry,
    name: &str,
    meta: Duration,
    queue: SendQueue,
) -> Response<FileBody> {
    let size = entry.meta.size;
    let mtime = secs(entry.meta.mtime);
    let tag = etag(mtime, size);
    let last_modified = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(mtime));
    let validators = [
        (header::ETAG, HeaderValue::from_str(&tag).expect("ASCII")),
        (
            header::LAST_MODIFIED,
            HeaderValue::from_str(&last_modified).expect("ASCII"),
        ),
    ];

    match conditional::evaluate(headers, &tag, mtime) {
        Verdict::Proceed => {}
        Verdict::PreconditionFailed => {
            return ctx.text(
                Class::File,
                StatusCode::PRECONDITION_FAILED,
                meta,
                &validators,
            );
        }
        Verdict::NotModified => {
            let timing = ctx.timing(Class::File, 304, meta, Duration::ZERO, 0, "none");
            let body = FileBody::empty().with_timing(timing);
            return response(StatusCode::NOT_MODIFIED, body, None, validators, meta, None);
        }
    }
    let mut range = match header_str(headers, header::RANGE) {
        Some(r) => parse_range(r, size),
        None => RangeReq::Full,
    };
    if range != RangeReq::Full && !conditional::if_range_fresh(headers, &tag, mtime) {
        range = RangeReq::Full;
    }
    let (status, class, offset, len) = match range {
        RangeReq::Full => (StatusCode::OK, Class::File, 0, size),
        RangeReq::Part(s, e) => (StatusCode::PARTIAL_CONTENT, Class::Range, s, e - s + 1),
        RangeReq::Unsatisfiable => {
            let cr = HeaderValue::from_str(&format!("bytes */{size}")).expect("ASCII");
            let mut extra = validators.to_vec();
            extra.push((header::CONTENT_RANGE, cr));
            extra.push((header::ACCEPT_RANGES, HeaderValue::from_static("bytes")));
            return ctx.text(
                Class::Range,
                StatusCode::RANGE_NOT_SATISFIABLE,
                meta,
                &extra,
            );
        }
    };

    let shared = &ctx.shared;
    let mut read_time = None;
    let (body, mode) = if ctx.head || len == 0 {
        (FileBody::empty(), "none")
    } else if len <= shared.inline_limit {
        let t = Instant::now();
        match shared
            .storage
            .read(&entry.handle, offset, len as usize)
            .await
        {
            Ok(data) => {
                read_time = Some(t.elapsed());
                (FileBody::bytes(data), "memory")
            }
            Err(e) => return ctx.error(&e, meta),
        }
    } else {
        match &entry.handle {
            Handle::Local(file) if shared.sendfile => (
                FileBody::sendfile(file.clone(), offset, len, queue),
                "sendfile",
            ),
            handle => (
                FileBody::stream(
                    shared.storage.clone(),
                    handle.clone(),
                    offset,
                    len,
                    shared.chunk,
                    queue,
                ),
                if shared.storage.splices() {
                    "splice"
                } else {
                    "stream"
                },
            ),
        }
    };
    let body_len = if ctx.head { 0 } else { len };
    let timing = ctx.timing(
        class,
        status.as_u16(),
        meta,
        read_time.unwrap_or_default(),
        body_len,
        mode,
    );
    let content = Content {
        ctype: HeaderValue::from_static(mime::content_type(name)),
        len,
    };
    let mut extra = vec![(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"))];
    extra.extend(validators);
    if status == StatusCode::PARTIAL_CONTENT {
        let cr = format!("bytes {}-{}/{}", offset, offset + len - 1, size);
        extra.push((
            header::CONTENT_RANGE,
            HeaderValue::from_str(&cr).expect("ASCII"),
        ));
    }
    let body = body.with_timing(timing);
    response(status, body, Some(content), extra, meta, read_time)
}

/// Paths in logs are capped so a huge URL cannot bloat the log.
fn truncate(p: &str) -> String {
    let mut end = p.len().min(1024);
    while !p.is_char_boundary(end) {
        end -= 1;
    }
    p[..end].to_string()
}

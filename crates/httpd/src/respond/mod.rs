//! One request → one response: GET/HEAD, conditionals, single ranges, index.html,
//! listings, errors; every response carries its [`Timing`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};

use crate::body::{FileBody, SendQueue};
use crate::storage::{Entry, Handle, Kind, Storage, StorageError};
use crate::timing::{Recorder, RequestInfo, Timing};
use crate::{listing, mime, path};

#[doc(hidden)]
pub mod fuzzing;

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

const SERVER: HeaderValue = HeaderValue::from_static("servelab-httpd");

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
        let mut resp = Response::new(body.with_timing(timing));
        *resp.status_mut() = status;
        let h = resp.headers_mut();
        h.insert(header::SERVER, SERVER);
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        h.insert(server_timing_name(), server_timing(meta, None));
        for (k, v) in extra {
            h.insert(k.clone(), v.clone());
        }
        resp
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

fn server_timing_name() -> header::HeaderName {
    header::HeaderName::from_static("server-timing")
}

fn server_timing(meta: Duration, read: Option<Duration>) -> HeaderValue {
    let text = match read {
        Some(r) => latency::server_timing::format(&[("meta", meta), ("read", r)]),
        None => latency::server_timing::format(&[("meta", meta)]),
    };
    HeaderValue::from_str(&text).expect("Server-Timing text is ASCII")
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
    let len = html.len() as u64;
    let timing = ctx.timing(
        Class::Dir,
        200,
        meta,
        Duration::ZERO,
        if ctx.head { 0 } else { len },
        "memory",
    );
    let body = if ctx.head {
        FileBody::empty()
    } else {
        FileBody::bytes(Bytes::from(html))
    };
    let mut resp = Response::new(body.with_timing(timing));
    let h = resp.headers_mut();
    h.insert(header::SERVER, SERVER);
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(server_timing_name(), server_timing(meta, None));
    resp
}

/// The ETag: nginx's format, `"<mtime secs hex>-<size hex>"`, identical for a file
/// whichever backend serves it.
fn etag(mtime_secs: u64, size: u64) -> String {
    format!("\"{mtime_secs:x}-{size:x}\"")
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// RFC 9110 entity-tag list match; `weak` allows weak comparison (If-None-Match).
fn etag_matches(list: &str, tag: &str, weak: bool) -> bool {
    list.split(',').map(str::trim).any(|t| {
        if t == "*" {
            return true;
        }
        match t.strip_prefix("W/") {
            Some(w) => weak && w == tag,
            None => t == tag,
        }
    })
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// A parsed `Range` header against a file of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
enum RangeReq {
    /// No usable range: send the whole file (absent, invalid, or multi-range).
    Full,
    /// `start..=end`.
    Part(u64, u64),
    /// 416.
    Unsatisfiable,
}

fn parse_range(value: &str, size: u64) -> RangeReq {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return RangeReq::Full;
    };
    if spec.contains(',') {
        // Multi-range: answered with the whole file (allowed by RFC 9110).
        return RangeReq::Full;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeReq::Full;
    };
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        // Suffix range: the last N bytes.
        let Ok(n) = b.parse::<u64>() else {
            return RangeReq::Full;
        };
        if n == 0 || size == 0 {
            return RangeReq::Unsatisfiable;
        }
        let n = n.min(size);
        return RangeReq::Part(size - n, size - 1);
    }
    let Ok(start) = a.parse::<u64>() else {
        return RangeReq::Full;
    };
    let end = if b.is_empty() {
        u64::MAX
    } else {
        match b.parse::<u64>() {
            Ok(e) if e >= start => e,
            _ => return RangeReq::Full,
        }
    };
    if start >= size {
        return RangeReq::Unsatisfiable;
    }
    RangeReq::Part(start, end.min(size - 1))
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

    // Preconditions, in RFC 9110 §13.2.2 order.
    if let Some(im) = header_str(headers, header::IF_MATCH) {
        if !etag_matches(im, &tag, false) {
            return ctx.text(
                Class::File,
                StatusCode::PRECONDITION_FAILED,
                meta,
                &validators,
            );
        }
    } else if let Some(ius) = header_str(headers, header::IF_UNMODIFIED_SINCE)
        && let Ok(t) = httpdate::parse_http_date(ius)
        && mtime > secs(t)
    {
        return ctx.text(
            Class::File,
            StatusCode::PRECONDITION_FAILED,
            meta,
            &validators,
        );
    }
    let not_modified = if let Some(inm) = header_str(headers, header::IF_NONE_MATCH) {
        etag_matches(inm, &tag, true)
    } else if let Some(ims) = header_str(headers, header::IF_MODIFIED_SINCE) {
        httpdate::parse_http_date(ims).is_ok_and(|t| mtime <= secs(t))
    } else {
        false
    };
    if not_modified {
        let timing = ctx.timing(Class::File, 304, meta, Duration::ZERO, 0, "none");
        let mut resp = Response::new(FileBody::empty().with_timing(timing));
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
        let h = resp.headers_mut();
        h.insert(header::SERVER, SERVER);
        for (k, v) in validators {
            h.insert(k, v);
        }
        h.insert(server_timing_name(), server_timing(meta, None));
        return resp;
    }

    let mut range = match header_str(headers, header::RANGE) {
        Some(r) => parse_range(r, size),
        None => RangeReq::Full,
    };
    if range != RangeReq::Full
        && let Some(ir) = header_str(headers, header::IF_RANGE)
    {
        let fresh = if ir.starts_with('"') || ir.starts_with("W/") {
            etag_matches(ir, &tag, false)
        } else {
            httpdate::parse_http_date(ir).is_ok_and(|t| secs(t) == mtime)
        };
        if !fresh {
            range = RangeReq::Full;
        }
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
                "stream",
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
    let mut resp = Response::new(body.with_timing(timing));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::SERVER, SERVER);
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(mime::content_type(name)),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    for (k, v) in validators {
        h.insert(k, v);
    }
    if status == StatusCode::PARTIAL_CONTENT {
        let cr = format!("bytes {}-{}/{}", offset, offset + len - 1, size);
        h.insert(
            header::CONTENT_RANGE,
            HeaderValue::from_str(&cr).expect("ASCII"),
        );
    }
    h.insert(server_timing_name(), server_timing(meta, read_time));
    resp
}

/// Paths in logs are capped so a huge URL cannot bloat the log.
fn truncate(p: &str) -> String {
    let mut end = p.len().min(1024);
    while !p.is_char_boundary(end) {
        end -= 1;
    }
    p[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-99", 1000), RangeReq::Part(0, 99));
        assert_eq!(parse_range("bytes=900-", 1000), RangeReq::Part(900, 999));
        assert_eq!(
            parse_range("bytes=900-5000", 1000),
            RangeReq::Part(900, 999)
        );
        assert_eq!(parse_range("bytes=-100", 1000), RangeReq::Part(900, 999));
        assert_eq!(parse_range("bytes=-5000", 1000), RangeReq::Part(0, 999));
        assert_eq!(parse_range("bytes=1000-", 1000), RangeReq::Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 1000), RangeReq::Unsatisfiable);
        assert_eq!(parse_range("bytes=5-1", 1000), RangeReq::Full);
        assert_eq!(parse_range("bytes=0-1,5-6", 1000), RangeReq::Full);
        assert_eq!(parse_range("items=0-1", 1000), RangeReq::Full);
        assert_eq!(parse_range("bytes=x-1", 1000), RangeReq::Full);
    }

    #[test]
    fn etags() {
        let t = etag(0x5f00_0000, 4096);
        assert_eq!(t, "\"5f000000-1000\"");
        assert!(etag_matches(&format!("\"x\", {t}"), &t, false));
        assert!(etag_matches(&format!("W/{t}"), &t, true));
        assert!(!etag_matches(&format!("W/{t}"), &t, false));
        assert!(etag_matches("*", &t, false));
        assert!(!etag_matches("\"other\"", &t, true));
    }
}

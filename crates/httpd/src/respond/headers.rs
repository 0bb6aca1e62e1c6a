//! The one place a response is assembled: status, body and the headers every response
//! carries (`Server`, `Server-Timing`), plus the ones its kind adds.

use std::time::Duration;

use http::header::{self, HeaderName, HeaderValue};
use http::{Response, StatusCode};

use crate::body::FileBody;

const SERVER: HeaderValue = HeaderValue::from_static("servelab-httpd");

/// What a response says about its body: its type and length (a 304 says neither).
pub(super) struct Content {
    pub ctype: HeaderValue,
    pub len: u64,
}

/// A response of `status` with `body`: `Server`, then `content`'s Content-Type and
/// Content-Length, then `extra` in order, then `Server-Timing` with the `meta` time (and
/// the `read` time when the body was read before the headers).
pub(super) fn response(
    status: StatusCode,
    body: FileBody,
    content: Option<Content>,
    extra: impl IntoIterator<Item = (HeaderName, HeaderValue)>,
    meta: Duration,
    read: Option<Duration>,
) -> Response<FileBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::SERVER, SERVER);
    if let Some(c) = content {
        h.insert(header::CONTENT_TYPE, c.ctype);
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(c.len));
    }
    for (k, v) in extra {
        h.insert(k, v);
    }
    h.insert(
        HeaderName::from_static("server-timing"),
        server_timing(meta, read),
    );
    resp
}

fn server_timing(meta: Duration, read: Option<Duration>) -> HeaderValue {
    let text = match read {
        Some(r) => latency::server_timing::format(&[("meta", meta), ("read", r)]),
        None => latency::server_timing::format(&[("meta", meta)]),
    };
    HeaderValue::from_str(&text).expect("Server-Timing text is ASCII")
}

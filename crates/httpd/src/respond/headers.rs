//! The one place a response is assembled: status, body and the headers every response
//! carries (`Server`, `Server-Timing`), plus the ones its kind adds; and Server-Timing's
//! text, which the fast path writes too.

use std::time::Duration;

use http::header::{self, HeaderName, HeaderValue};
use http::{Response, StatusCode};

use crate::body::FileBody;

const SERVER: HeaderValue = HeaderValue::from_static("servelab-httpd");

/// The Server-Timing value of the fields [`super::plain_file_fields`] makes for the fast
/// path, which writes the request's own times in its place (a `--header Server-Timing:`
/// of the user's replaces it, and then stays).
pub(crate) const TIMING_PLACEHOLDER: &str = "servelab-fast-path-timing";

/// Fields a response's map is made with room for (the user's `--header`s may add more).
const RESERVED_FIELDS: usize = 12;

/// What a response says about its body: its type and length (a 304 says neither).
pub(super) struct Content {
    pub ctype: HeaderValue,
    pub len: u64,
}

/// A response of `status` with `body`: `Server`, then `content`'s Content-Type and
/// Content-Length, then `extra` in order, then (with `timing`) `Server-Timing` with that
/// value ([`server_timing`]'s, or the fast path's [`TIMING_PLACEHOLDER`]).
pub(super) fn response(
    status: StatusCode,
    body: FileBody,
    content: Option<Content>,
    extra: impl IntoIterator<Item = (HeaderName, HeaderValue)>,
    timing: Option<HeaderValue>,
) -> Response<FileBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    // A file response carries 8-10 fields: room for them at once, instead of growing
    // (and rehashing) the map at its 7th.
    h.reserve(RESERVED_FIELDS);
    h.insert(header::SERVER, SERVER);
    if let Some(c) = content {
        h.insert(header::CONTENT_TYPE, c.ctype);
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(c.len));
    }
    for (k, v) in extra {
        h.insert(k, v);
    }
    if let Some(value) = timing {
        h.insert(HeaderName::from_static("server-timing"), value);
    }
    resp
}

/// The Server-Timing value of a request whose lookup took `meta` (and whose body was
/// read before the headers in `read`), built in one buffer that becomes the value
/// without a copy.
pub(super) fn server_timing(meta: Duration, read: Option<Duration>) -> HeaderValue {
    let mut text = String::with_capacity(96);
    push_server_timing(&mut text, meta, read);
    HeaderValue::from_maybe_shared(bytes::Bytes::from(text)).expect("Server-Timing text is ASCII")
}

/// Appends `meta;dur=0.012;desc="path lookup", read;dur=…;desc="storage read"` to `text`:
/// the `desc` parameters name the phases for people reading a browser's timing panel.
pub(crate) fn push_server_timing(text: &mut String, meta: Duration, read: Option<Duration>) {
    latency::server_timing::push(text, "meta", meta);
    text.push_str(";desc=\"path lookup\"");
    if let Some(r) = read {
        text.push_str(", ");
        latency::server_timing::push(text, "read", r);
        text.push_str(";desc=\"storage read\"");
    }
}

//! The fields of a file's responses, built in one place for the normal path
//! (`serve_file`) and the fast path (through [`plain_file_fields`]): the validators and
//! what a 304 repeats of the 200, and the fields of a 200 or 206 around them.

use http::StatusCode;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::conditional::{self, Validators};
use super::headers::{Content, TIMING_PLACEHOLDER, response};
use crate::body::FileBody;
use crate::config::Shaping;
use crate::mime;
use crate::storage::Meta;

/// The fields every response about one version of a file repeats.
pub(super) struct FileFields {
    /// ETag and Last-Modified, then Vary (with `--precompressed`) and Cache-Control (when
    /// one is set for the file's name): what a 304 must repeat of the 200 besides the
    /// validators (RFC 9110 §15.4.5).
    pub validators: Vec<(HeaderName, HeaderValue)>,
}

impl FileFields {
    /// The fields of the file `name` whose version has the validators `v`.
    pub(super) fn new(shaping: &Shaping, v: &Validators, name: &str) -> FileFields {
        let mut validators = Vec::with_capacity(4);
        validators.push((header::ETAG, v.etag.clone()));
        validators.push((header::LAST_MODIFIED, v.last_modified.clone()));
        if shaping.precompressed {
            validators.push((header::VARY, HeaderValue::from_static("Accept-Encoding")));
        }
        if let Some(cc) = shaping.cache_control(name) {
            validators.push((header::CACHE_CONTROL, cc));
        }
        FileFields { validators }
    }

    /// ETag and Last-Modified alone: what a 412 and a 416 carry.
    pub(super) fn tags(&self) -> &[(HeaderName, HeaderValue)] {
        &self.validators[..2]
    }

    /// The fields of a 200 or 206 after Content-Type and Content-Length: Accept-Ranges,
    /// the Content-Encoding of a precompressed variant (`coding`), the validators, then a
    /// single range's Content-Range.
    pub(super) fn served(
        self,
        coding: Option<&'static str>,
        content_range: Option<HeaderValue>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let mut fields = Vec::with_capacity(3 + self.validators.len());
        fields.push((header::ACCEPT_RANGES, HeaderValue::from_static("bytes")));
        if let Some(c) = coding {
            fields.push((header::CONTENT_ENCODING, HeaderValue::from_static(c)));
        }
        fields.extend(self.validators);
        fields.extend(content_range.map(|cr| (header::CONTENT_RANGE, cr)));
        fields
    }
}

/// The response fields of a 200 to a GET or HEAD of the file with metadata `meta` (found
/// under the request path whose last component is `name`), served whole, in the order the
/// normal path gives them: `serve_file`'s for a request without preconditions, Range or a
/// precompressed variant, then the user's `--header`s. A Server-Timing field, when the
/// switch is on, holds [`TIMING_PLACEHOLDER`]; the fast path writes the request's own
/// times there.
pub(crate) fn plain_file_fields(shaping: &Shaping, meta: &Meta, name: &str) -> HeaderMap {
    let v = conditional::validators(conditional::secs(meta.mtime), meta.size, None);
    let fields = FileFields::new(shaping, &v, name).served(None, None);
    let content = Content {
        ctype: HeaderValue::from_static(mime::content_type(name)),
        len: meta.size,
    };
    let timing = shaping
        .server_timing
        .then(|| HeaderValue::from_static(TIMING_PLACEHOLDER));
    let mut resp = response(
        StatusCode::OK,
        FileBody::empty(),
        Some(content),
        fields,
        timing,
    );
    shaping.add_headers(resp.headers_mut());
    std::mem::take(resp.headers_mut())
}

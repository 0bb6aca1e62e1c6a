//! Conditional requests (RFC 9110 §13): validators (ETag, Last-Modified) and the
//! preconditions evaluated against them, in the RFC's order.
//!
//! A list header sent on several lines (`If-Match`, `If-None-Match`) is one list, its
//! lines joined with commas (RFC 9110 §5.3); a date header (`If-Modified-Since`,
//! `If-Unmodified-Since`, `If-Range`) sent twice is not a valid date, so it is ignored
//! as the RFC says of invalid dates (and an `If-Range` that cannot be evaluated serves
//! the whole file).

use std::time::{SystemTime, UNIX_EPOCH};

use http::header::{self, HeaderMap, HeaderValue};

/// What the preconditions of a request say about a file with these validators.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Serve it (maybe a range of it).
    Proceed,
    /// 412: If-Match or If-Unmodified-Since failed.
    PreconditionFailed,
    /// 304: If-None-Match or If-Modified-Since says the client's copy is current.
    NotModified,
}

/// The preconditions of `headers` against entity tag `tag` and modification time
/// `mtime` (whole seconds), in RFC 9110 §13.2.2 order.
pub(super) fn evaluate(headers: &HeaderMap, tag: &str, mtime: u64) -> Verdict {
    if let Some(im) = header_list(headers, header::IF_MATCH) {
        if !etag_matches(&im, tag, false) {
            return Verdict::PreconditionFailed;
        }
    } else if let Some(ius) = single(headers, header::IF_UNMODIFIED_SINCE)
        && let Ok(t) = httpdate::parse_http_date(ius)
        && mtime > secs(t)
    {
        return Verdict::PreconditionFailed;
    }
    let not_modified = if let Some(inm) = header_list(headers, header::IF_NONE_MATCH) {
        etag_matches(&inm, tag, true)
    } else if let Some(ims) = single(headers, header::IF_MODIFIED_SINCE) {
        httpdate::parse_http_date(ims).is_ok_and(|t| mtime <= secs(t))
    } else {
        false
    };
    if not_modified {
        Verdict::NotModified
    } else {
        Verdict::Proceed
    }
}

/// Whether a range may be served: no If-Range, or one naming the current validator.
pub(super) fn if_range_fresh(headers: &HeaderMap, tag: &str, mtime: u64) -> bool {
    if headers.get_all(header::IF_RANGE).iter().count() > 1 {
        return false;
    }
    match header_str(headers, header::IF_RANGE) {
        None => true,
        Some(ir) if ir.starts_with('"') || ir.starts_with("W/") => etag_matches(ir, tag, false),
        Some(ir) => httpdate::parse_http_date(ir).is_ok_and(|t| secs(t) == mtime),
    }
}

/// The ETag: nginx's format, `"<mtime secs hex>-<size hex>"`, identical for a file
/// whichever backend serves it.
pub(crate) fn etag(mtime_secs: u64, size: u64) -> String {
    format!("\"{mtime_secs:x}-{size:x}\"")
}

/// The entity tag of the `coding` variant (a precompressed `F.br`, ...) of the file whose
/// own tag is `tag` (`"…"`): the coding appended inside the quotes.
fn variant_tag(tag: &str, coding: &str) -> String {
    format!("{}-{coding}\"", tag.trim_end_matches('"'))
}

/// A file version's `ETag` and `Last-Modified` values, ready to send.
#[derive(Clone)]
pub(super) struct Validators {
    pub etag: HeaderValue,
    pub last_modified: HeaderValue,
}

/// Versions remembered per thread: direct-mapped slots, so a hit costs one comparison.
const MEMO_SLOTS: usize = 64;

type MemoSlot = Option<(u64, u64, Option<&'static str>, Validators)>;

thread_local! {
    static MEMO: std::cell::RefCell<[MemoSlot; MEMO_SLOTS]> =
        const { std::cell::RefCell::new([const { None }; MEMO_SLOTS]) };
}

/// The validators of the version (`mtime_secs`, `size`) of a file, in `coding` (a
/// precompressed variant) or as it is. Both values are functions of those three inputs
/// alone, so they are formatted once per thread and version and then cloned (a reference
/// count): formatting the ETag and the HTTP date, and copying both into header values,
/// was about 2,000 instructions per request. A changed file has a new (mtime, size) and
/// gets new values; a clash in the table only costs a new formatting.
pub(super) fn validators(mtime_secs: u64, size: u64, coding: Option<&'static str>) -> Validators {
    let slot = (mtime_secs ^ size.rotate_left(21) ^ coding.map_or(0, |c| c.len() as u64 + 1))
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        >> 58;
    let slot = slot as usize % MEMO_SLOTS;
    MEMO.with(|memo| {
        let mut memo = memo.borrow_mut();
        if let Some((m, s, c, v)) = &memo[slot]
            && (*m, *s, *c) == (mtime_secs, size, coding)
        {
            return v.clone();
        }
        let tag = match coding {
            Some(c) => variant_tag(&etag(mtime_secs, size), c),
            None => etag(mtime_secs, size),
        };
        let date = httpdate::fmt_http_date(UNIX_EPOCH + std::time::Duration::from_secs(mtime_secs));
        let v = Validators {
            etag: HeaderValue::from_maybe_shared(bytes::Bytes::from(tag)).expect("ASCII"),
            last_modified: HeaderValue::from_maybe_shared(bytes::Bytes::from(date)).expect("ASCII"),
        };
        memo[slot] = Some((mtime_secs, size, coding, v.clone()));
        v
    })
}

pub(super) fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// RFC 9110 entity-tag list match; `weak` allows weak comparison (If-None-Match).
pub(crate) fn etag_matches(list: &str, tag: &str, weak: bool) -> bool {
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

pub(super) fn header_str(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// All lines of a list header joined with `, ` (RFC 9110 §5.3); `None` when absent.
/// A line that is not text is skipped.
pub(super) fn header_list(h: &HeaderMap, name: header::HeaderName) -> Option<String> {
    let mut lines = h.get_all(name).iter().filter_map(|v| v.to_str().ok());
    let first = lines.next()?;
    Some(lines.fold(first.to_string(), |mut all, l| {
        all.push_str(", ");
        all.push_str(l);
        all
    }))
}

/// A header that must appear once (a date): `None` when absent or sent several times.
fn single(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    let mut all = h.get_all(name).iter();
    match (all.next(), all.next()) {
        (Some(v), None) => v.to_str().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags() {
        assert_eq!(variant_tag("\"5f-10\"", "br"), "\"5f-10-br\"");
        let t = etag(0x5f00_0000, 4096);
        assert_eq!(t, "\"5f000000-1000\"");
        assert!(etag_matches(&format!("\"x\", {t}"), &t, false));
        assert!(etag_matches(&format!("W/{t}"), &t, true));
        assert!(!etag_matches(&format!("W/{t}"), &t, false));
        assert!(etag_matches("*", &t, false));
        assert!(!etag_matches("\"other\"", &t, true));
    }

    #[test]
    fn validators_follow_the_version_and_the_coding() {
        let a = validators(0x5f00_0000, 4096, None);
        assert_eq!(a.etag, "\"5f000000-1000\"");
        assert_eq!(a.last_modified, "Sat, 04 Jul 2020 04:05:20 GMT");
        assert_eq!(validators(0x5f00_0000, 4096, None).etag, a.etag);
        assert_eq!(
            validators(0x5f00_0000, 4097, None).etag,
            "\"5f000000-1001\""
        );
        assert_eq!(
            validators(0x5f00_0001, 4096, None).etag,
            "\"5f000001-1000\""
        );
        assert_eq!(
            validators(0x5f00_0000, 4096, Some("br")).etag,
            "\"5f000000-1000-br\""
        );
        assert_eq!(
            validators(0x5f00_0000, 4096, Some("gzip")).etag,
            "\"5f000000-1000-gzip\""
        );
        // Many versions through the few slots: each still gets its own values.
        for size in 0..1000u64 {
            let v = validators(7, size, None);
            assert_eq!(v.etag.to_str().unwrap(), etag(7, size));
        }
    }

    #[test]
    fn list_headers_on_several_lines_are_one_list() {
        let tag = etag(100, 5);
        let mut m = HeaderMap::new();
        m.append(header::IF_NONE_MATCH, "\"a\"".parse().unwrap());
        m.append(header::IF_NONE_MATCH, tag.parse().unwrap());
        assert_eq!(evaluate(&m, &tag, 100), Verdict::NotModified);
        let mut m = HeaderMap::new();
        m.append(header::IF_MATCH, "\"a\"".parse().unwrap());
        m.append(header::IF_MATCH, tag.parse().unwrap());
        assert_eq!(evaluate(&m, &tag, 100), Verdict::Proceed);
        let date = httpdate::fmt_http_date(UNIX_EPOCH + std::time::Duration::from_secs(200));
        let mut m = HeaderMap::new();
        m.append(header::IF_MODIFIED_SINCE, date.parse().unwrap());
        m.append(header::IF_MODIFIED_SINCE, date.parse().unwrap());
        assert_eq!(evaluate(&m, &tag, 100), Verdict::Proceed);
        let mut m = HeaderMap::new();
        m.append(header::IF_RANGE, tag.parse().unwrap());
        m.append(header::IF_RANGE, tag.parse().unwrap());
        assert!(!if_range_fresh(&m, &tag, 100));
    }

    #[test]
    fn preconditions_in_rfc_order() {
        let tag = etag(100, 5);
        let h = |pairs: &[(header::HeaderName, &str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.insert(k.clone(), v.parse().unwrap());
            }
            m
        };
        let date = |s: u64| httpdate::fmt_http_date(UNIX_EPOCH + std::time::Duration::from_secs(s));
        assert_eq!(evaluate(&h(&[]), &tag, 100), Verdict::Proceed);
        assert_eq!(
            evaluate(&h(&[(header::IF_MATCH, "\"other\"")]), &tag, 100),
            Verdict::PreconditionFailed
        );
        // If-Match wins over If-Unmodified-Since.
        let both = h(&[
            (header::IF_MATCH, &tag),
            (header::IF_UNMODIFIED_SINCE, &date(50)),
        ]);
        assert_eq!(evaluate(&both, &tag, 100), Verdict::Proceed);
        let ius = h(&[(header::IF_UNMODIFIED_SINCE, &date(50))]);
        assert_eq!(evaluate(&ius, &tag, 100), Verdict::PreconditionFailed);
        assert_eq!(
            evaluate(
                &h(&[(header::IF_NONE_MATCH, &format!("W/{tag}"))]),
                &tag,
                100
            ),
            Verdict::NotModified
        );
        // If-None-Match wins over If-Modified-Since.
        let inm = h(&[
            (header::IF_NONE_MATCH, "\"x\""),
            (header::IF_MODIFIED_SINCE, &date(200)),
        ]);
        assert_eq!(evaluate(&inm, &tag, 100), Verdict::Proceed);
        let ims = h(&[(header::IF_MODIFIED_SINCE, &date(200))]);
        assert_eq!(evaluate(&ims, &tag, 100), Verdict::NotModified);
        assert!(if_range_fresh(&h(&[]), &tag, 100));
        assert!(if_range_fresh(&h(&[(header::IF_RANGE, &tag)]), &tag, 100));
        assert!(!if_range_fresh(
            &h(&[(header::IF_RANGE, "\"x\"")]),
            &tag,
            100
        ));
        assert!(if_range_fresh(
            &h(&[(header::IF_RANGE, &date(100))]),
            &tag,
            100
        ));
        assert!(!if_range_fresh(
            &h(&[(header::IF_RANGE, &date(99))]),
            &tag,
            100
        ));
    }
}

//! The `Range` header (RFC 9110 §14): one byte range, several (answered as
//! `multipart/byteranges`), or the whole file.
//!
//! Several ranges are bounded: ranges that overlap or come out of order are sorted and
//! coalesced (RFC 9110 §14.2 allows it, and it stops `0-,0-,0-...` from multiplying the
//! file), and a request still asking for more than `max_parts` parts gets the whole file,
//! as nginx's `max_ranges` does.

/// A parsed `Range` header against a file of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RangeReq {
    /// No usable range: send the whole file (absent, invalid, or too many parts).
    Full,
    /// `start..=end`.
    Part(u64, u64),
    /// Several `start..=end` ranges, in the order they are sent (`multipart/byteranges`).
    Parts(Vec<(u64, u64)>),
    /// 416.
    Unsatisfiable,
}

/// One range spec, resolved against the size: `Some(None)` = valid but unsatisfiable.
fn parse_spec(spec: &str, size: u64) -> Option<Option<(u64, u64)>> {
    let (a, b) = spec.trim().split_once('-')?;
    let (a, b) = (a.trim(), b.trim());
    if a.is_empty() {
        // Suffix range: the last N bytes.
        let n = b.parse::<u64>().ok()?;
        if n == 0 || size == 0 {
            return Some(None);
        }
        let n = n.min(size);
        return Some(Some((size - n, size - 1)));
    }
    let start = a.parse::<u64>().ok()?;
    let end = if b.is_empty() {
        u64::MAX
    } else {
        match b.parse::<u64>() {
            Ok(e) if e >= start => e,
            _ => return None,
        }
    };
    if start >= size {
        return Some(None);
    }
    Some(Some((start, end.min(size - 1))))
}

/// `value` against a file of `size` bytes, answering at most `max_parts` parts.
pub(crate) fn parse_range(value: &str, size: u64, max_parts: usize) -> RangeReq {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return RangeReq::Full;
    };
    let mut ranges = Vec::new();
    for s in spec.split(',') {
        if s.trim().is_empty() {
            // Empty list elements are allowed (RFC 9110 §5.6.1).
            continue;
        }
        match parse_spec(s, size) {
            // Any invalid spec makes the whole header invalid: ignored.
            None => return RangeReq::Full,
            Some(None) => {}
            Some(Some(r)) => ranges.push(r),
        }
    }
    if ranges.is_empty() {
        return if spec.split(',').any(|s| !s.trim().is_empty()) {
            RangeReq::Unsatisfiable
        } else {
            RangeReq::Full
        };
    }
    let ascending = ranges.windows(2).all(|w| w[0].1 < w[1].0);
    if !ascending {
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (s, e) in ranges {
            match merged.last_mut() {
                Some(last) if s <= last.1.saturating_add(1) => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        ranges = merged;
    }
    match ranges.len() {
        1 => RangeReq::Part(ranges[0].0, ranges[0].1),
        n if n > max_parts => RangeReq::Full,
        _ => RangeReq::Parts(ranges),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(v: &str, size: u64) -> RangeReq {
        parse_range(v, size, 16)
    }

    #[test]
    fn single_ranges() {
        assert_eq!(one("bytes=0-99", 1000), RangeReq::Part(0, 99));
        assert_eq!(one("bytes=900-", 1000), RangeReq::Part(900, 999));
        assert_eq!(one("bytes=900-5000", 1000), RangeReq::Part(900, 999));
        assert_eq!(one("bytes=-100", 1000), RangeReq::Part(900, 999));
        assert_eq!(one("bytes=-5000", 1000), RangeReq::Part(0, 999));
        assert_eq!(one("bytes=1000-", 1000), RangeReq::Unsatisfiable);
        assert_eq!(one("bytes=-0", 1000), RangeReq::Unsatisfiable);
        assert_eq!(one("bytes=5-1", 1000), RangeReq::Full);
        assert_eq!(one("items=0-1", 1000), RangeReq::Full);
        assert_eq!(one("bytes=x-1", 1000), RangeReq::Full);
        assert_eq!(one("bytes=,", 1000), RangeReq::Full);
    }

    #[test]
    fn several_ranges_in_order_stay_as_asked() {
        assert_eq!(
            one("bytes=0-9,20-29,-5", 1000),
            RangeReq::Parts(vec![(0, 9), (20, 29), (995, 999)])
        );
        // An unsatisfiable one among satisfiable ones is dropped.
        assert_eq!(
            one("bytes=0-1, 5000-6000, 5-6", 1000),
            RangeReq::Parts(vec![(0, 1), (5, 6)])
        );
        assert_eq!(one("bytes=5000-,6000-", 1000), RangeReq::Unsatisfiable);
        // Any invalid spec: the header is ignored.
        assert_eq!(one("bytes=0-1,x", 1000), RangeReq::Full);
    }

    #[test]
    fn overlapping_or_unsorted_ranges_are_coalesced() {
        assert_eq!(one("bytes=0-,0-,0-", 1000), RangeReq::Part(0, 999));
        assert_eq!(
            one("bytes=20-29,0-9", 1000),
            RangeReq::Parts(vec![(0, 9), (20, 29)])
        );
        assert_eq!(one("bytes=0-10,5-20,21-30", 1000), RangeReq::Part(0, 30));
        // Adjacent ranges in order are sent as asked (no overlap).
        assert_eq!(
            one("bytes=0-9,10-19", 1000),
            RangeReq::Parts(vec![(0, 9), (10, 19)])
        );
    }

    #[test]
    fn too_many_parts_get_the_whole_file() {
        let many: Vec<String> = (0..17)
            .map(|i| format!("{}-{}", i * 10, i * 10 + 1))
            .collect();
        let v = format!("bytes={}", many.join(","));
        assert_eq!(parse_range(&v, 1000, 16), RangeReq::Full);
        assert!(matches!(parse_range(&v, 1000, 17), RangeReq::Parts(p) if p.len() == 17));
    }
}

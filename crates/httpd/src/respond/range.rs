//! The `Range` header (RFC 9110 §14): one byte range of a file, or the whole file.

/// A parsed `Range` header against a file of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum RangeReq {
    /// No usable range: send the whole file (absent, invalid, or multi-range).
    Full,
    /// `start..=end`.
    Part(u64, u64),
    /// 416.
    Unsatisfiable,
}

pub(super) fn parse_range(value: &str, size: u64) -> RangeReq {
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
}

//! The `Server-Timing` response header (W3C Server Timing): `name;dur=<ms>` entries.

use std::time::Duration;

/// Formats phases as `meta;dur=0.012, read;dur=1.204` (milliseconds, 3 decimals: µs).
pub fn format(phases: &[(&str, Duration)]) -> String {
    let mut out = String::with_capacity(phases.len() * 24);
    for (i, (name, d)) in phases.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        push(&mut out, name, *d);
    }
    out
}

/// Appends one `name;dur=<ms>` entry to `out`: milliseconds with 3 decimals, the
/// microseconds rounded half up. Integer arithmetic only: formatting the milliseconds as
/// an `f64` (`{:.3}`) was 15 % of a web server's instructions per 4 KiB response.
pub fn push(out: &mut String, name: &str, d: Duration) {
    // In u64: u128 arithmetic is a library call per division. Exact, since whole seconds
    // are whole thousands of microseconds.
    let micros = d
        .as_secs()
        .saturating_mul(1_000_000)
        .saturating_add(u64::from((d.subsec_nanos() + 500) / 1000));
    out.push_str(name);
    out.push_str(";dur=");
    // Digits of the whole milliseconds, most significant first (at most 20 of a u64).
    let mut ms = micros / 1000;
    let mut digits = [0u8; 20];
    let mut n = digits.len();
    loop {
        n -= 1;
        digits[n] = b'0' + (ms % 10) as u8;
        ms /= 10;
        if ms == 0 {
            break;
        }
    }
    out.extend(digits[n..].iter().map(|&b| char::from(b)));
    out.push('.');
    let frac = (micros % 1000) as u32;
    for digit in [frac / 100, frac / 10 % 10, frac % 10] {
        out.push(char::from(b'0' + digit as u8));
    }
}

/// Parses a header value into `(name, duration)` pairs; entries without a valid `dur` are
/// skipped, as the specification asks of a user agent.
pub fn parse(value: &str) -> Vec<(String, Duration)> {
    let mut out = Vec::new();
    for_each(value, |name, d| out.push((name.to_string(), d)));
    out
}

/// [`parse`] without allocating: calls `f` with each valid entry's name and duration, in
/// order (a load generator does this for every response it receives).
pub fn for_each(value: &str, mut f: impl FnMut(&str, Duration)) {
    for entry in value.split(',') {
        let mut parts = entry.split(';').map(str::trim);
        let Some(name) = parts.next().filter(|n| !n.is_empty()) else {
            continue;
        };
        let dur_ms = parts.find_map(|p| {
            let (k, v) = p.split_once('=')?;
            if k.trim().eq_ignore_ascii_case("dur") {
                v.trim().trim_matches('"').parse::<f64>().ok()
            } else {
                None
            }
        });
        if let Some(ms) = dur_ms
            && ms.is_finite()
            && ms >= 0.0
        {
            f(name, Duration::from_secs_f64(ms / 1e3));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let text = format(&[
            ("meta", Duration::from_micros(12)),
            ("read", Duration::from_micros(1204)),
        ]);
        assert_eq!(text, "meta;dur=0.012, read;dur=1.204");
        let parsed = parse(&text);
        assert_eq!(parsed[0].0, "meta");
        assert_eq!(parsed[1].1, Duration::from_micros(1204));
    }

    #[test]
    fn milliseconds_have_three_decimals_rounded_half_up() {
        let f = |nanos| format(&[("x", Duration::from_nanos(nanos))]);
        assert_eq!(f(0), "x;dur=0.000");
        assert_eq!(f(499), "x;dur=0.000");
        assert_eq!(f(500), "x;dur=0.001");
        assert_eq!(f(24_400), "x;dur=0.024");
        assert_eq!(f(1_000_000), "x;dur=1.000");
        assert_eq!(f(12_345_678_901), "x;dur=12345.679");
        assert_eq!(f(999_999_600), "x;dur=1000.000");
    }

    #[test]
    fn skips_malformed_entries() {
        let parsed = parse("cache;desc=hit, db;dur=abc, ;dur=1, app;dur=\"2.5\", x;dur=-1");
        assert_eq!(
            parsed,
            vec![("app".to_string(), Duration::from_micros(2500))]
        );
    }
}

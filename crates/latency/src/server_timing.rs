//! The `Server-Timing` response header (W3C Server Timing): `name;dur=<ms>` entries.

use std::fmt::Write as _;
use std::time::Duration;

/// Formats phases as `meta;dur=0.012, read;dur=1.204` (milliseconds, 3 decimals: µs).
pub fn format(phases: &[(&str, Duration)]) -> String {
    let mut out = String::new();
    for (i, (name, d)) in phases.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{name};dur={:.3}", d.as_secs_f64() * 1e3);
    }
    out
}

/// Parses a header value into `(name, duration)` pairs; entries without a valid `dur` are
/// skipped, as the specification asks of a user agent.
pub fn parse(value: &str) -> Vec<(String, Duration)> {
    value
        .split(',')
        .filter_map(|entry| {
            let mut parts = entry.split(';').map(str::trim);
            let name = parts.next().filter(|n| !n.is_empty())?;
            let dur_ms = parts.find_map(|p| {
                let (k, v) = p.split_once('=')?;
                if k.trim().eq_ignore_ascii_case("dur") {
                    v.trim().trim_matches('"').parse::<f64>().ok()
                } else {
                    None
                }
            })?;
            if !(dur_ms.is_finite() && dur_ms >= 0.0) {
                return None;
            }
            Some((name.to_string(), Duration::from_secs_f64(dur_ms / 1e3)))
        })
        .collect()
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
    fn skips_malformed_entries() {
        let parsed = parse("cache;desc=hit, db;dur=abc, ;dur=1, app;dur=\"2.5\", x;dur=-1");
        assert_eq!(
            parsed,
            vec![("app".to_string(), Duration::from_micros(2500))]
        );
    }
}

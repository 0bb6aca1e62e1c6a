//! The answer's sentences about distance: one per point measured, saying what a request
//! through NFS cost there against local disk at the same offered load ("at 0.5 ms RTT —
//! a typical LAN — a 10 MiB request through NFS took … ms longer at the median").

use super::model::{Distance, DistancePoint, PointSpec};
use crate::stats::Comparison;

/// What a round trip of this length is, in the words of a network a reader knows.
fn setting(rtt_us: u64) -> &'static str {
    match rtt_us {
        0 => "the same machine",
        1..=200 => "one rack, one switch",
        201..=1000 => "a typical LAN",
        _ => "a campus or metro network",
    }
}

/// `10 MiB`, `512 KiB`, `1234 bytes`.
pub fn size_text(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// `+1.23 ms (95 % CI +1.00 to +1.50)`: the interval labelled with the confidence its
/// repeat count gives, and "no measurable difference" only at 95 % (else "not
/// resolved"), as every interval of the reports ([`crate::stats::difference_words`]).
fn difference_text(d: &Comparison) -> String {
    crate::stats::difference_words(d)
}

/// Where the point is: `at 0.5 ms RTT — a typical LAN — over 1 Gbit/s`.
fn place(spec: &PointSpec) -> String {
    match spec.rate_bits_per_sec {
        None if spec.rtt_us == 0 => "on loopback without a link".into(),
        rate => format!(
            "at {} ms RTT — {} — over {}",
            spec.rtt_us as f64 / 1000.0,
            setting(spec.rtt_us),
            rate.map_or("an unlimited link".into(), super::model::rate_text)
        ),
    }
}

/// One point's sentence.
fn point_sentence(d: &Distance, p: &DistancePoint) -> String {
    let size = size_text(d.file_bytes);
    let latency = match (&p.p50_minus_b_ms, p.runs.p50(), d.b.p50()) {
        (Some(c), _, _) => format!(
            "a {size} request through NFS took {} at the median against local disk",
            difference_text(c)
        ),
        (None, Some(a), Some(b)) => format!(
            "a {size} request through NFS took {:+.2} ms at the median against local disk \
             (too few runs for an interval)",
            a - b
        ),
        _ if p.runs.busy_runs + d.b.busy_runs > 0 => format!(
            "the latency of a {size} request is withheld: {} of its runs and {} of B's were \
             taken on a busy machine",
            p.runs.busy_runs, d.b.busy_runs
        ),
        _ => format!("no {size} request through NFS completed"),
    };
    let p99 = p
        .p99_minus_b_ms
        .map(|c| format!(", {:+.2} ms at the 99th percentile", c.estimate))
        .unwrap_or_default();
    let cpu = p
        .cpu_over_b
        .map(|c| {
            format!(
                "; its serving processes used {:.2} × B's CPU per request ({} {:.2}–{:.2})",
                c.estimate,
                c.ci_label(),
                c.ci.low,
                c.ci.high
            )
        })
        .unwrap_or_default();
    let wire = p
        .spec
        .ceiling_per_sec(d.file_bytes)
        .map(|per_sec| {
            format!(
                " (the file alone takes {:.0} ms on this wire)",
                1e3 / per_sec
            )
        })
        .unwrap_or_default();
    let mut s = format!(
        "{} {latency}{p99}{wire}, both offered {:.1} req/s{cpu}.",
        place(&p.spec),
        d.offered_per_sec
    );
    if let Some(first) = s.get(..1) {
        s = first.to_uppercase() + &s[1..];
    }
    s
}

/// One sentence per point measured, in the order run; none without the phase.
pub fn sentences(d: &Distance) -> Vec<String> {
    d.points.iter().map(|p| point_sentence(d, p)).collect()
}

#[cfg(test)]
mod tests {
    use super::super::model::{DEFAULT_POINT, Runs};
    use super::*;

    #[test]
    fn one_sentence_per_point_with_its_figures() {
        let b = Runs {
            p50_ms: vec![40.0, 41.0, 42.0],
            p99_ms: vec![50.0, 51.0, 52.0],
            cpu_ms_per_request: vec![2.0, 2.0, 2.0],
            ..Runs::default()
        };
        let a = Runs {
            p50_ms: vec![52.0, 53.0, 54.0],
            p99_ms: vec![70.0, 71.0, 72.0],
            cpu_ms_per_request: vec![6.0, 6.0, 6.0],
            ..Runs::default()
        };
        let d = Distance {
            file_bytes: 10 << 20,
            offered_per_sec: 5.96,
            points: vec![DistancePoint::new(DEFAULT_POINT, "netns+tbf".into(), a, &b)],
            b,
            ..Distance::default()
        };
        let s = sentences(&d);
        assert_eq!(s.len(), 1);
        assert!(
            s[0].starts_with(
                "At 0.5 ms RTT — a typical LAN — over 1 Gbit/s a 10 MiB request through NFS took +12.00 ms"
            ),
            "{}",
            s[0]
        );
        assert!(
            s[0].contains("+20.00 ms at the 99th percentile"),
            "{}",
            s[0]
        );
        assert!(s[0].contains("3.00 × B's CPU per request"), "{}", s[0]);
        assert!(s[0].contains("6.0 req/s"), "{}", s[0]);
        // 10 MiB = 83.9 Mbit: 84 ms on a 1 Gbit/s wire.
        assert!(
            s[0].contains("the file alone takes 84 ms on this wire"),
            "{}",
            s[0]
        );
        assert_eq!(sentences(&Distance::default()), Vec::<String>::new());
    }
}

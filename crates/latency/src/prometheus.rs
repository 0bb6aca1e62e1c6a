//! Prometheus text exposition (format 0.0.4) of a snapshot, in base units.
//!
//! Durations become a `<prefix>_duration_seconds` histogram whose buckets start at one
//! microsecond, because loopback operations take microseconds and the usual 5 ms first
//! bucket would put every sample in one bin. Bytes become `<prefix>_bytes_total`.

use std::fmt::Write as _;

use crate::snapshot::Snapshot;

/// Bucket upper bounds in seconds: 1-2.5-5 steps from 1 µs to 10 s.
pub const BUCKETS_SECONDS: [f64; 22] = [
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
    5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The content type to serve the exposition with.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders every series of `snapshot`.
pub fn render(snapshot: &Snapshot) -> String {
    let name = format!("{}_duration_seconds", sanitize(&snapshot.prefix));
    let bytes_name = format!("{}_bytes_total", sanitize(&snapshot.prefix));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP {name} Time taken, by operation, phase and outcome."
    );
    let _ = writeln!(out, "# TYPE {name} histogram");
    for (key, series) in &snapshot.series {
        let labels = format!(
            "op=\"{}\",phase=\"{}\",status=\"{}\"",
            escape(&key.op),
            escape(&key.phase),
            escape(&key.status)
        );
        let h = &series.histogram;
        for le in BUCKETS_SECONDS {
            let le_nanos = (le * 1e9).round() as u64;
            let cumulative = if h.is_empty() {
                0
            } else {
                h.count_between(0, le_nanos)
            };
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.len());
        let _ = writeln!(
            out,
            "{name}_sum{{{labels}}} {}",
            series.sum_nanos as f64 / 1e9
        );
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.len());
    }
    let _ = writeln!(
        out,
        "# HELP {bytes_name} Payload bytes moved, by operation."
    );
    let _ = writeln!(out, "# TYPE {bytes_name} counter");
    for (key, series) in &snapshot.series {
        if key.phase == "total" {
            let _ = writeln!(
                out,
                "{bytes_name}{{op=\"{}\",status=\"{}\"}} {}",
                escape(&key.op),
                escape(&key.status),
                series.bytes
            );
        }
    }
    out
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;
    use std::time::Duration;

    #[test]
    fn buckets_are_cumulative_and_fine_grained() {
        let reg = Registry::new("rustnfs_nfs");
        reg.record_op("READ", "total", "ok", Duration::from_nanos(1_800), 4096);
        reg.record_op("READ", "total", "ok", Duration::from_micros(40), 4096);
        reg.record_op("READ", "total", "ok", Duration::from_millis(3), 4096);
        let text = render(&reg.snapshot());
        let bucket = |le: &str| -> u64 {
            let needle = format!("op=\"READ\",phase=\"total\",status=\"ok\",le=\"{le}\"}} ");
            let line = text.lines().find(|l| l.contains(&needle)).unwrap();
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert_eq!(bucket("0.000001"), 0);
        assert_eq!(bucket("0.0000025"), 1);
        assert_eq!(bucket("0.00005"), 2);
        assert_eq!(bucket("0.005"), 3);
        assert_eq!(bucket("+Inf"), 3);
        assert!(text.contains("rustnfs_nfs_bytes_total{op=\"READ\",status=\"ok\"} 12288"));
        assert!(text.contains("# TYPE rustnfs_nfs_duration_seconds histogram"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}

//! A plain-text table of a snapshot for people: one row per series, times in ms.

use std::fmt::Write as _;

use crate::snapshot::Snapshot;

/// Renders `count, mean, p50, p99, max, bytes` per series, widest op first column.
pub fn render(snapshot: &Snapshot) -> String {
    let rows: Vec<[String; 9]> = snapshot
        .series
        .iter()
        .map(|(k, s)| {
            let ms = |secs: f64| format!("{:.3}", secs * 1e3);
            [
                k.op.clone(),
                k.phase.clone(),
                k.status.clone(),
                s.count().to_string(),
                ms(s.mean_seconds()),
                ms(s.quantile_seconds(0.5)),
                ms(s.quantile_seconds(0.99)),
                ms(s.quantile_seconds(1.0)),
                s.bytes.to_string(),
            ]
        })
        .collect();
    let header = [
        "op", "phase", "status", "count", "mean ms", "p50 ms", "p99 ms", "max ms", "bytes",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[&str]| {
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i < 3 {
                let _ = write!(out, "{cell:<w$}  ");
            } else {
                let _ = write!(out, "{cell:>w$}  ");
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(&mut out, &header);
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        line(&mut out, &cells);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Registry;
    use std::time::Duration;

    #[test]
    fn one_row_per_series() {
        let reg = Registry::new("t");
        reg.record_op("LOOKUP", "total", "ok", Duration::from_micros(20), 0);
        reg.record_op("READ", "total", "ok", Duration::from_millis(2), 1 << 20);
        let text = render(&reg.snapshot());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("op"));
        assert!(lines[2].starts_with("READ") && lines[2].ends_with("1048576"));
        assert!(lines[2].contains("2.000"));
    }
}

//! The suite's raw record: one [`Row`] per measurement (a line of `results.csv`), the
//! [`Skip`]s of what was not measured, and the CSV itself.

use std::fmt::Write as _;

use lab::tools::Measured;

/// Something the suite did not measure, and why.
#[derive(Debug, Clone)]
pub struct Skip {
    pub what: String,
    pub why: String,
}

impl Skip {
    pub fn new(what: impl Into<String>, why: impl std::fmt::Display) -> Skip {
        Skip {
            what: what.into(),
            why: why.to_string(),
        }
    }
}

/// One measurement (one CSV line).
#[derive(Debug, Clone)]
pub struct Row {
    /// 1-based repeat; 0 for rows outside the repeats (idle memory).
    pub repeat: usize,
    pub group: String,
    pub case: String,
    pub server: String,
    pub tool: String,
    pub concurrency: usize,
    pub m: Measured,
    pub peak_rss: Option<u64>,
    pub error: Option<String>,
}

impl Row {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        repeat: usize,
        group: &str,
        case: &str,
        server: &str,
        tool: &str,
        concurrency: usize,
        result: anyhow::Result<Measured>,
        peak_rss: Option<u64>,
    ) -> Row {
        let (m, error) = match result {
            Ok(m) => (m, None),
            Err(e) => (
                Measured::default(),
                Some(crate::experiment::load::error_text(&e)),
            ),
        };
        if let Some(e) = &error {
            crate::experiment::terminal::note(format!("servelab bench:   failed: {e}"));
        }
        Row {
            repeat,
            group: group.into(),
            case: case.into(),
            server: server.into(),
            tool: tool.into(),
            concurrency,
            m,
            peak_rss,
            error,
        }
    }

    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// The figure a case is judged by: bytes/s for large files and streams, operations
    /// per second otherwise.
    pub fn metric(&self) -> f64 {
        if is_bytes_case(&self.group, &self.case) {
            self.m.bytes_per_sec
        } else {
            self.m.per_sec
        }
    }
}

pub fn is_bytes_case(group: &str, case: &str) -> bool {
    group == "tcp"
        || case.starts_with("10MiB")
        || case.starts_with("seq read")
        || case.starts_with("boot set")
}

pub const CSV_HEADER: &str = "repeat,group,case,server,tool,concurrency,seconds,requests,errors,per_sec,bytes_per_sec,p50_ms,p99_ms,peak_rss_bytes,error";

/// All rows as CSV (RFC 4180 quoting where needed).
pub fn csv(rows: &[Row]) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_default();
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{:.3},{},{},{:.2},{:.0},{},{},{},{}",
            r.repeat,
            quote(&r.group),
            quote(&r.case),
            quote(&r.server),
            quote(&r.tool),
            r.concurrency,
            r.m.seconds,
            r.m.requests,
            r.m.errors,
            r.m.per_sec,
            r.m.bytes_per_sec,
            opt(r.m.p50_ms),
            opt(r.m.p99_ms),
            r.peak_rss.map(|v| v.to_string()).unwrap_or_default(),
            quote(r.error.as_deref().unwrap_or("")),
        );
    }
    out
}

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"").replace(['\n', '\r'], " "))
    } else {
        s.to_string()
    }
}

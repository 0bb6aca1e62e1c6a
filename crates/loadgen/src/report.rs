//! The result of a run: counters and exact histograms, the ab-compatible summary, the
//! percentile table, the JSON form (see `schema.json`) and exact merging of several runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use latency::{Series, Snapshot};
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::sample::ErrorKind;

/// The `schema` value of the JSON form; bumped on incompatible changes.
pub const SCHEMA_ID: &str = "servelab-loadgen/1";

/// Everything measured by one run (or by several runs merged).
#[derive(Debug, Clone)]
pub struct Report {
    /// The target URL as given.
    pub target: String,
    /// `http`, `nfs` or `tcp`.
    pub kind: String,
    /// The first `Server:` header seen (ab's "Server Software").
    pub server_software: Option<String>,
    pub host: String,
    pub port: u16,
    /// HTTP: path and query; NFS: the path inside the export; TCP: empty.
    pub path: String,
    /// The first 2xx response's body length; every other 2xx length counted as failed. None
    /// when no response completed or `--variable-length` was given.
    pub document_length: Option<u64>,
    /// Concurrent workers (connections, streams, NFS clients), summed over merged runs.
    pub concurrency: u64,
    /// The schedule, for people: `count 100`, `duration 10s`, `rate 500/s for 10s`.
    pub schedule: String,
    /// The fixed arrival rate, if any (latencies are then timed from intended starts).
    pub rate_per_second: Option<f64>,
    pub keepalive: bool,
    /// Wall time from the first operation's start to the last one's end; the longest of
    /// merged runs (they are assumed to have run at the same time).
    pub duration: Duration,
    /// Operations that ended, failed ones included (ab's "Complete requests").
    pub requests: u64,
    /// Failed operations by kind; their sum is ab's "Failed requests".
    pub failures: BTreeMap<ErrorKind, u64>,
    /// HTTP responses outside 2xx (not failures, as in ab).
    pub non_2xx: u64,
    /// HTTP requests answered on a reused connection.
    pub keepalive_requests: u64,
    /// Payload bytes (HTTP bodies, NFS data, TCP stream bytes).
    pub body_bytes: u64,
    /// Everything received, headers included (ab's "Total transferred").
    pub wire_bytes: u64,
    /// Client-side histograms keyed (op, phase, status); phases: `total`, `connect`,
    /// `processing`, `waiting`, `ttfb`, `queue`.
    pub latency: Snapshot,
    /// Server-side phases from `Server-Timing`, keyed (`server`, phase, `ok`).
    pub server_timing: Snapshot,
    /// The first failure's message, so a run that failed entirely says why.
    pub first_error: Option<String>,
    /// How many runs were merged into this one (1 for a single run).
    pub merged_runs: u64,
    /// NFS and file reads: the CRC-32 of the first complete pass over the file.
    pub checksum_crc32: Option<u32>,
    /// Why the run stopped before its schedule ended (consecutive identical failures);
    /// None when it ran to the end.
    pub stopped: Option<String>,
    /// Operations that failed before any succeeded: the target was not ready when the
    /// run began (summed over merged runs). `servelab load` exits 5 when this is not 0.
    pub failed_before_first_success: u64,
}

/// The generator's own schedule lag under a fixed rate, in seconds: how late it started
/// operations whose connection was free. Not part of any latency figure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LagSummary {
    pub count: u64,
    pub mean_seconds: f64,
    pub p50_seconds: f64,
    pub p90_seconds: f64,
    pub p99_seconds: f64,
    pub max_seconds: f64,
}

#[derive(Serialize, Deserialize)]
struct ReportJson {
    schema: String,
    target: String,
    kind: String,
    server_software: Option<String>,
    host: String,
    port: u16,
    path: String,
    document_length: Option<u64>,
    concurrency: u64,
    schedule: String,
    rate_per_second: Option<f64>,
    keepalive: bool,
    duration_seconds: f64,
    requests: u64,
    failed: u64,
    failures: BTreeMap<ErrorKind, u64>,
    non_2xx: u64,
    keepalive_requests: u64,
    body_bytes: u64,
    wire_bytes: u64,
    requests_per_second: f64,
    bytes_per_second: f64,
    latency: serde_json::Value,
    server_timing: serde_json::Value,
    first_error: Option<String>,
    merged_runs: u64,
    checksum_crc32: Option<u32>,
    // Added after the first files were written: older reports read without them.
    #[serde(default)]
    schedule_lag: Option<LagSummary>,
    #[serde(default)]
    integrity_failures: u64,
    #[serde(default)]
    stopped: Option<String>,
    #[serde(default)]
    failed_before_first_success: u64,
}

impl Report {
    /// ab's "Failed requests": every failure kind summed.
    pub fn failed(&self) -> u64 {
        self.failures.values().sum()
    }

    pub fn requests_per_sec(&self) -> f64 {
        per_second(self.requests, self.duration)
    }

    /// Payload bytes per second.
    pub fn bytes_per_sec(&self) -> f64 {
        per_second(self.body_bytes, self.duration)
    }

    /// Every operation's `phase` histogram, all ops and statuses combined.
    pub fn phase(&self, phase: &str) -> Option<Series> {
        let mut out: Option<Series> = None;
        for (k, s) in &self.latency.series {
            if k.phase == phase {
                match &mut out {
                    None => out = Some(s.clone()),
                    Some(acc) => acc.merge(s).expect("same layout merges"),
                }
            }
        }
        out
    }

    /// The end-to-end latency of every operation (failed ones included, as ab does).
    pub fn total(&self) -> Option<Series> {
        self.phase("total")
    }

    /// Under a fixed rate: how late the generator started operations whose connection
    /// was free (its own lateness, kept out of `total`).
    pub fn schedule_lag(&self) -> Option<Series> {
        self.phase("schedule_lag").filter(|s| s.count() > 0)
    }

    /// The schedule lag's summary (the JSON's `schedule_lag`).
    pub fn schedule_lag_summary(&self) -> Option<LagSummary> {
        self.schedule_lag().map(|s| LagSummary {
            count: s.count(),
            mean_seconds: s.mean_seconds(),
            p50_seconds: s.quantile_seconds(0.5),
            p90_seconds: s.quantile_seconds(0.9),
            p99_seconds: s.quantile_seconds(0.99),
            max_seconds: s.quantile_seconds(1.0),
        })
    }

    /// Operations that got wrong data: a CRC-32 or byte-count mismatch, or a body whose
    /// length differs from the first one (ab's Length rule). Any makes the CLI fail.
    pub fn integrity_failures(&self) -> u64 {
        [ErrorKind::Checksum, ErrorKind::Length]
            .iter()
            .filter_map(|k| self.failures.get(k))
            .sum()
    }

    /// The JSON form described by `crates/loadgen/schema.json`, histograms included.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(ReportJson {
            schema: SCHEMA_ID.into(),
            target: self.target.clone(),
            kind: self.kind.clone(),
            server_software: self.server_software.clone(),
            host: self.host.clone(),
            port: self.port,
            path: self.path.clone(),
            document_length: self.document_length,
            concurrency: self.concurrency,
            schedule: self.schedule.clone(),
            rate_per_second: self.rate_per_second,
            keepalive: self.keepalive,
            duration_seconds: self.duration.as_secs_f64(),
            requests: self.requests,
            failed: self.failed(),
            failures: self.failures.clone(),
            non_2xx: self.non_2xx,
            keepalive_requests: self.keepalive_requests,
            body_bytes: self.body_bytes,
            wire_bytes: self.wire_bytes,
            requests_per_second: self.requests_per_sec(),
            bytes_per_second: self.bytes_per_sec(),
            latency: self.latency.to_json(),
            server_timing: self.server_timing.to_json(),
            first_error: self.first_error.clone(),
            merged_runs: self.merged_runs,
            checksum_crc32: self.checksum_crc32,
            schedule_lag: self.schedule_lag_summary(),
            integrity_failures: self.integrity_failures(),
            stopped: self.stopped.clone(),
            failed_before_first_success: self.failed_before_first_success,
        })
        .expect("report serializes")
    }

    /// Reads what [`Report::to_json`] wrote; derived figures are recomputed.
    pub fn from_json(value: &serde_json::Value) -> Result<Report, Error> {
        let j: ReportJson =
            serde_json::from_value(value.clone()).map_err(|e| Error::Json(e.to_string()))?;
        if j.schema != SCHEMA_ID {
            return Err(Error::Json(format!(
                "schema {:?} is not {SCHEMA_ID:?}",
                j.schema
            )));
        }
        let duration = Duration::try_from_secs_f64(j.duration_seconds)
            .map_err(|e| Error::Json(format!("duration_seconds: {e}")))?;
        Ok(Report {
            target: j.target,
            kind: j.kind,
            server_software: j.server_software,
            host: j.host,
            port: j.port,
            path: j.path,
            document_length: j.document_length,
            concurrency: j.concurrency,
            schedule: j.schedule,
            rate_per_second: j.rate_per_second,
            keepalive: j.keepalive,
            duration,
            requests: j.requests,
            failures: j.failures,
            non_2xx: j.non_2xx,
            keepalive_requests: j.keepalive_requests,
            body_bytes: j.body_bytes,
            wire_bytes: j.wire_bytes,
            latency: Snapshot::from_json(&j.latency).map_err(|e| Error::Json(e.to_string()))?,
            server_timing: Snapshot::from_json(&j.server_timing)
                .map_err(|e| Error::Json(e.to_string()))?,
            first_error: j.first_error,
            merged_runs: j.merged_runs,
            checksum_crc32: j.checksum_crc32,
            stopped: j.stopped,
            failed_before_first_success: j.failed_before_first_success,
        })
    }

    /// Adds `other` into `self` exactly: counts, bytes and histograms add; concurrency
    /// adds; the duration is the longer one, because merged runs are taken to have run at
    /// the same time (several load machines against one server).
    pub fn merge(&mut self, other: &Report) -> Result<(), Error> {
        self.latency
            .merge(&other.latency)
            .map_err(|e| Error::Json(e.to_string()))?;
        self.server_timing
            .merge(&other.server_timing)
            .map_err(|e| Error::Json(e.to_string()))?;
        if self.target != other.target {
            self.target = format!("{} + {}", self.target, other.target);
        }
        if self.server_software.is_none() {
            self.server_software.clone_from(&other.server_software);
        }
        if self.document_length != other.document_length {
            self.document_length = None;
        }
        if self.schedule != other.schedule {
            self.schedule = format!("{} + {}", self.schedule, other.schedule);
        }
        self.rate_per_second = match (self.rate_per_second, other.rate_per_second) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.concurrency += other.concurrency;
        self.duration = self.duration.max(other.duration);
        self.requests += other.requests;
        for (k, n) in &other.failures {
            *self.failures.entry(*k).or_default() += n;
        }
        self.non_2xx += other.non_2xx;
        self.keepalive_requests += other.keepalive_requests;
        self.body_bytes += other.body_bytes;
        self.wire_bytes += other.wire_bytes;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
        if self.checksum_crc32 != other.checksum_crc32 {
            self.checksum_crc32 = None;
        }
        self.stopped = match (self.stopped.take(), &other.stopped) {
            (Some(a), Some(b)) if a != *b => Some(format!("{a}; {b}")),
            (a, b) => a.or_else(|| b.clone()),
        };
        self.failed_before_first_success += other.failed_before_first_success;
        self.merged_runs += other.merged_runs;
        Ok(())
    }

    /// What people read: the ab block (HTTP) or the throughput block (TCP, NFS), then
    /// the percentile table, then the server's own phases when it sent Server-Timing.
    pub fn render_text(&self) -> String {
        let mut out = if self.kind == "http" {
            self.ab_summary()
        } else {
            self.throughput_summary()
        };
        out.push('\n');
        out.push_str(&self.percentile_table());
        if let Some(lag) = self.schedule_lag() {
            out.push('\n');
            out.push_str(&stats_table(
                "Generator schedule lag (ms): how late this client started operations whose \
                 connection was free; not counted in any latency above",
                &[("schedule lag".to_string(), lag)],
            ));
        }
        if !self.server_timing.series.is_empty() {
            out.push('\n');
            out.push_str(&self.server_timing_table());
        }
        if let Some(why) = &self.stopped {
            let _ = writeln!(out, "\nRun stopped early: {why}");
        }
        if self.failed_before_first_success > 0 && self.failed() < self.requests {
            let _ = writeln!(
                out,
                "\nNot ready: the first {} operations failed before any succeeded; the \
                 figures include them (wait for the target before loading it)",
                self.failed_before_first_success
            );
        }
        if let (Some(e), true) = (&self.first_error, self.failed() > 0) {
            let _ = writeln!(out, "\nFirst failure: {e}");
        }
        out
    }

    /// The block `ab` prints, with ab's field names and formulas (support/ab.c).
    pub fn ab_summary(&self) -> String {
        let mut o = String::new();
        let t = self.duration.as_secs_f64();
        let done = self.requests;
        let _ = writeln!(
            o,
            "Server Software:        {}",
            self.server_software.as_deref().unwrap_or("")
        );
        let _ = writeln!(o, "Server Hostname:        {}", self.host);
        let _ = writeln!(o, "Server Port:            {}", self.port);
        let _ = writeln!(o);
        let _ = writeln!(o, "Document Path:          {}", self.path);
        match self.document_length {
            Some(n) => {
                let _ = writeln!(o, "Document Length:        {n} bytes");
            }
            None => {
                let _ = writeln!(o, "Document Length:        Variable");
            }
        }
        let _ = writeln!(o);
        let _ = writeln!(o, "Concurrency Level:      {}", self.concurrency);
        let _ = writeln!(o, "Time taken for tests:   {t:.3} seconds");
        let _ = writeln!(o, "Complete requests:      {done}");
        let _ = writeln!(o, "Failed requests:        {}", self.failed());
        if self.failed() > 0 {
            let mut cols = [0u64; 4];
            for (k, n) in &self.failures {
                cols[k.ab_column()] += n;
            }
            let _ = writeln!(
                o,
                "   (Connect: {}, Receive: {}, Length: {}, Exceptions: {})",
                cols[0], cols[1], cols[2], cols[3]
            );
        }
        if self.non_2xx > 0 {
            let _ = writeln!(o, "Non-2xx responses:      {}", self.non_2xx);
        }
        if self.keepalive {
            let _ = writeln!(o, "Keep-Alive requests:    {}", self.keepalive_requests);
        }
        let _ = writeln!(o, "Total transferred:      {} bytes", self.wire_bytes);
        let _ = writeln!(o, "HTML transferred:       {} bytes", self.body_bytes);
        if t > 0.0 && done > 0 {
            let _ = writeln!(
                o,
                "Requests per second:    {:.2} [#/sec] (mean)",
                done as f64 / t
            );
            let ab_time = self.concurrency as f64 * t * 1000.0 / done as f64;
            match (self.rate_per_second, self.total()) {
                (Some(rate), Some(total)) => {
                    // ab's concurrency × time ÷ requests assumes a closed loop; at a fixed
                    // rate it is the schedule's interval × concurrency, not a latency.
                    let _ = writeln!(
                        o,
                        "Time per request:       {:.3} [ms] (mean latency; open loop at {rate}/s: \
                         ab's concurrency x time / requests would say {ab_time:.3}, a property \
                         of the schedule)",
                        total.mean_seconds() * 1000.0
                    );
                    let _ = writeln!(
                        o,
                        "Time per request:       {:.3} [ms] (mean, across all concurrent requests: \
                         the interval between intended starts)",
                        t * 1000.0 / done as f64
                    );
                }
                _ => {
                    let _ = writeln!(o, "Time per request:       {ab_time:.3} [ms] (mean)");
                    let _ = writeln!(
                        o,
                        "Time per request:       {:.3} [ms] (mean, across all concurrent requests)",
                        t * 1000.0 / done as f64
                    );
                }
            }
            let _ = writeln!(
                o,
                "Transfer rate:          {:.2} [Kbytes/sec] received",
                self.wire_bytes as f64 / 1024.0 / t
            );
        }
        if done > 0 {
            let _ = writeln!(o);
            let _ = writeln!(o, "Connection Times (ms)");
            let _ = writeln!(o, "              min  mean[+/-sd] median   max");
            for (label, phase) in [
                ("Connect:    ", "connect"),
                ("Processing: ", "processing"),
                ("Waiting:    ", "waiting"),
                ("Total:      ", "total"),
            ] {
                let row = self.phase(phase).map(|s| AbRow::of(&s)).unwrap_or_default();
                let _ = writeln!(
                    o,
                    "{label}{:5} {:4} {:5.1} {:6} {:7}",
                    row.min, row.mean, row.sd, row.median, row.max
                );
            }
        }
        if let Some(total) = self.total().filter(|s| s.count() > 1) {
            let n = total.count();
            let _ = writeln!(o);
            let _ = writeln!(
                o,
                "Percentage of the requests served within a certain time (ms)"
            );
            for p in [50u64, 66, 75, 80, 90, 95, 98, 99] {
                // ab: sorted[done * p / 100], a 0-based index.
                let v = round_ms(value_at_rank(&total, n * p / 100 + 1));
                let _ = writeln!(o, "  {p}%  {v:5}");
            }
            let _ = writeln!(
                o,
                " 100%  {:5} (longest request)",
                round_ms(total.histogram.max())
            );
            let _ = writeln!(
                o,
                "  (ab's rule: the request at rank n*p/100, rounded to whole ms; the table below \
                 gives HDR-histogram quantiles to 0.001 ms)"
            );
        }
        o
    }

    /// For TCP and NFS: streams, bytes and throughput, like iperf3's summary line.
    pub fn throughput_summary(&self) -> String {
        let mut o = String::new();
        let t = self.duration.as_secs_f64();
        let _ = writeln!(o, "Target:                 {}", self.target);
        let _ = writeln!(o, "Concurrency Level:      {}", self.concurrency);
        let _ = writeln!(o, "Time taken for tests:   {t:.3} seconds");
        let _ = writeln!(o, "Complete operations:    {}", self.requests);
        let _ = writeln!(o, "Failed operations:      {}", self.failed());
        for (k, n) in &self.failures {
            let _ = writeln!(o, "   {}: {n}", k.name());
        }
        let _ = writeln!(o, "Bytes transferred:      {} bytes", self.body_bytes);
        if let Some(c) = self.latency.combined("COMMIT", "total") {
            let n = c.histogram.len();
            let _ = writeln!(o, "Bytes committed:        {} bytes ({n} COMMITs)", c.bytes);
        }
        let _ = writeln!(
            o,
            "Operations per second:  {:.2} [#/sec] (mean)",
            self.requests_per_sec()
        );
        let bps = self.bytes_per_sec();
        let _ = writeln!(
            o,
            "Throughput:             {:.2} MB/s ({:.2} Gbit/s)",
            bps / 1e6,
            bps * 8.0 / 1e9
        );
        if let Some(crc) = self.checksum_crc32 {
            let _ = writeln!(o, "Data CRC-32:            {crc:08x}");
        }
        o
    }

    /// Per operation: count, min/mean/stddev/max and p50 … p99.99 of the end-to-end time
    /// (and time to first byte / connect where measured), in milliseconds.
    pub fn percentile_table(&self) -> String {
        let mut rows = Vec::new();
        let mut ops: Vec<&str> = self.latency.series.keys().map(|k| k.op.as_str()).collect();
        ops.dedup();
        for op in ops {
            for phase in ["total", "ttfb", "connect", "queue"] {
                if let Some(s) = self.latency.combined(op, phase) {
                    if phase == "connect" && s.histogram.max() <= 1 {
                        continue;
                    }
                    rows.push((format!("{op} {phase}"), s));
                }
            }
        }
        stats_table(
            "Latency (ms; HDR-histogram quantiles, 3 significant digits)",
            &rows,
        )
    }

    /// The server's own phases (from Server-Timing) next to the client's total time.
    pub fn server_timing_table(&self) -> String {
        let mut rows = Vec::new();
        if let Some(t) = self.total() {
            rows.push(("client total".to_string(), t));
        }
        for (k, s) in &self.server_timing.series {
            rows.push((format!("server {}", k.phase), s.clone()));
        }
        stats_table("Server-Timing phases vs client time (ms)", &rows)
    }

    /// Writes the JSON form to `path`.
    pub fn write_json(&self, path: &Path) -> Result<(), Error> {
        let text = serde_json::to_string_pretty(&self.to_json()).expect("report serializes");
        std::fs::write(path, text + "\n").map_err(|e| Error::File {
            path: path.display().to_string(),
            source: e,
        })
    }

    /// Reads one JSON report file.
    pub fn read_json(path: &Path) -> Result<Report, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::File {
            path: path.display().to_string(),
            source: e,
        })?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::Json(format!("{}: {e}", path.display())))?;
        Report::from_json(&value).map_err(|e| Error::Json(format!("{}: {e}", path.display())))
    }
}

/// Reads and merges several `--json` files exactly (for `servelab report --merge`).
pub fn merge_files<P: AsRef<Path>>(paths: &[P]) -> Result<Report, Error> {
    let mut iter = paths.iter();
    let first = iter
        .next()
        .ok_or_else(|| Error::Plan("no report files to merge".into()))?;
    let mut merged = Report::read_json(first.as_ref())?;
    for p in iter {
        merged.merge(&Report::read_json(p.as_ref())?)?;
    }
    Ok(merged)
}

fn per_second(n: u64, d: Duration) -> f64 {
    let t = d.as_secs_f64();
    if t > 0.0 { n as f64 / t } else { 0.0 }
}

/// ab's `ap_round_ms`: whole microseconds, then `(us + 500) / 1000`.
fn round_ms(nanos: u64) -> u64 {
    (nanos / 1000 + 500) / 1000
}

/// The value of the `rank`-th smallest sample (1-based), within histogram precision.
fn value_at_rank(s: &Series, rank: u64) -> u64 {
    let n = s.count().max(1);
    let rank = rank.clamp(1, n);
    s.histogram
        .value_at_quantile((rank as f64 - 0.5) / n as f64)
}

/// One row of ab's "Connection Times (ms)" table.
#[derive(Default)]
struct AbRow {
    min: u64,
    mean: u64,
    sd: f64,
    median: u64,
    max: u64,
}

impl AbRow {
    fn of(s: &Series) -> AbRow {
        let n = s.count();
        if n == 0 {
            return AbRow::default();
        }
        let mean_us = (s.sum_nanos / u128::from(n) / 1000) as u64;
        // ab's sample standard deviation (n - 1); the histogram's is the population one.
        let sd = if n > 1 {
            s.histogram.stdev() * (n as f64 / (n - 1) as f64).sqrt() / 1e6
        } else {
            0.0
        };
        // ab's median: sorted[n/2] when n is even, the mean of sorted[n/2] and
        // sorted[n/2 + 1] when odd (0-based), kept as ab computes it.
        let median = if n > 1 && n % 2 == 1 {
            (value_at_rank(s, n / 2 + 1) + value_at_rank(s, n / 2 + 2)) / 2
        } else {
            value_at_rank(s, n / 2 + 1)
        };
        AbRow {
            min: round_ms(s.histogram.min()),
            mean: (mean_us + 500) / 1000,
            sd,
            median: round_ms(median),
            max: round_ms(s.histogram.max()),
        }
    }
}

fn stats_table(title: &str, rows: &[(String, Series)]) -> String {
    let header = [
        "", "count", "min", "mean", "stddev", "max", "p50", "p75", "p90", "p95", "p99", "p99.9",
        "p99.99",
    ];
    let ms = |nanos: f64| format!("{:.3}", nanos / 1e6);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|(name, s)| {
            let h = &s.histogram;
            let mut row = vec![
                name.clone(),
                s.count().to_string(),
                ms(h.min() as f64),
                ms(s.mean_seconds() * 1e9),
                ms(h.stdev()),
                ms(h.max() as f64),
            ];
            for q in [0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999] {
                row.push(ms(h.value_at_quantile(q) as f64));
            }
            row
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = format!("{title}\n");
    let mut line = |cells: &[&str]| {
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 {
                let _ = write!(out, "  {c:<w$}");
            } else {
                let _ = write!(out, "  {c:>w$}");
            }
        }
        out.push('\n');
    };
    line(&header);
    for row in &cells {
        let r: Vec<&str> = row.iter().map(String::as_str).collect();
        line(&r);
    }
    out
}

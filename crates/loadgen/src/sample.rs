//! One operation's raw instants and outcome, and the per-worker collector that turns them
//! into latency histograms (durations are derived here, never inside a target).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use latency::{Key, Series, Snapshot};
use serde::{Deserialize, Serialize};

/// Why an operation failed. The ab summary folds these into its four columns (see
/// [`ErrorKind::ab_column`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The connection could not be made (refused, unreachable, …).
    Connect,
    /// The peer reset or closed the connection before the response was complete.
    Reset,
    /// The operation exceeded `--timeout`.
    Timeout,
    /// The response could not be parsed (bad status line, headers, chunking).
    Malformed,
    /// The body length differed from the first 2xx response's (ab's "Length" failure).
    Length,
    /// Data read back did not have the expected checksum (NFS `--verify-crc32`), or a
    /// TCP server acknowledged a different byte count than was sent.
    Checksum,
    /// The server answered with a protocol-level error (an NFS status other than OK).
    Server,
    /// Any other I/O error.
    Io,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 8] = [
        ErrorKind::Connect,
        ErrorKind::Reset,
        ErrorKind::Timeout,
        ErrorKind::Malformed,
        ErrorKind::Length,
        ErrorKind::Checksum,
        ErrorKind::Server,
        ErrorKind::Io,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Length => "length",
            ErrorKind::Checksum => "checksum",
            ErrorKind::Server => "server",
            ErrorKind::Io => "io",
        }
    }

    /// ab's failure breakdown: `(Connect, Receive, Length, Exceptions)` = 0..=3.
    pub fn ab_column(self) -> usize {
        match self {
            ErrorKind::Connect => 0,
            ErrorKind::Reset | ErrorKind::Malformed | ErrorKind::Io => 1,
            ErrorKind::Length | ErrorKind::Checksum => 2,
            ErrorKind::Timeout | ErrorKind::Server => 3,
        }
    }

    /// Classifies an I/O error from connecting (`connecting`) or from the exchange.
    pub fn from_io(e: &std::io::Error, connecting: bool) -> ErrorKind {
        use std::io::ErrorKind as K;
        match e.kind() {
            _ if connecting => ErrorKind::Connect,
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof => {
                ErrorKind::Reset
            }
            K::TimedOut => ErrorKind::Timeout,
            K::InvalidData => ErrorKind::Malformed,
            _ => ErrorKind::Io,
        }
    }
}

/// The raw instants of one operation; every duration in a report is derived from these.
#[derive(Debug, Clone, Copy)]
pub struct Instants {
    /// When a fixed-rate schedule meant the operation to start (None in a closed loop).
    pub intended: Option<Instant>,
    /// When the worker's connection became free for it (the previous operation's end):
    /// waiting past `intended` until then was waiting behind an earlier request.
    pub ready: Instant,
    /// When the worker actually started it.
    pub start: Instant,
    /// When a new connection was established for it (None when one was reused).
    pub connected: Option<Instant>,
    /// When the request was fully written.
    pub written: Option<Instant>,
    /// When the first byte of the response arrived.
    pub first_byte: Option<Instant>,
    /// When it ended (last byte read, or the error).
    pub end: Instant,
}

impl Instants {
    pub fn new(intended: Option<Instant>, start: Instant) -> Self {
        Instants {
            intended,
            ready: start,
            start,
            connected: None,
            written: None,
            first_byte: None,
            end: start,
        }
    }
}

/// What a target reports for an operation that got an answer.
#[derive(Debug, Clone, Default)]
pub struct OpOk {
    /// The operation's name in the report: `GET`, an NFS procedure, `tcp_write`.
    pub op: &'static str,
    /// The HTTP status, when there is one.
    pub status: Option<u16>,
    /// Payload bytes (HTTP body, NFS data, TCP stream bytes).
    pub body_bytes: u64,
    /// Everything received, headers included (ab's "Total transferred").
    pub wire_bytes: u64,
    /// The raw `Server-Timing` header, if the server sent one.
    pub server_timing: Option<String>,
    /// Answered, but counted as failed anyway (length mismatch, bad checksum).
    pub failure: Option<ErrorKind>,
    /// Bytes an NFS COMMIT made stable: recorded in its op's byte count (the report's
    /// "Bytes committed"), not in the payload total, which counts them once as WRITEs.
    pub committed_bytes: u64,
    /// `Server:` header (ab's "Server Software").
    pub server_software: Option<String>,
}

/// A failed operation: the kind and whatever was received before it failed.
#[derive(Debug, Clone)]
pub struct OpError {
    pub op: &'static str,
    pub kind: ErrorKind,
    pub message: String,
    pub wire_bytes: u64,
}

impl OpError {
    pub fn new(op: &'static str, kind: ErrorKind, message: impl Into<String>) -> Self {
        OpError {
            op,
            kind,
            message: message.into(),
            wire_bytes: 0,
        }
    }
}

/// The phases recorded per operation, in the report's order. Under a fixed rate,
/// `queue` is the time an operation waited behind an earlier one on its connection (it
/// is part of `total`); `schedule_lag` is how late the generator itself started it when
/// its connection was free (not part of any other phase).
pub const PHASES: [&str; 7] = [
    "total",
    "connect",
    "processing",
    "waiting",
    "ttfb",
    "queue",
    "schedule_lag",
];

/// Histograms of one (op, status) pair, one per phase; kept in an array so the hot path
/// does no map look-ups and no allocation.
#[derive(Debug, Clone, Default)]
struct PhaseSet([Series; 7]);

/// Splits a fixed-rate operation's delay (intended → actual start) into the part spent
/// behind an earlier operation on its connection (the server's doing: coordinated
/// omission, charged) and the generator's own lateness (not charged).
pub fn split_delay(inst: &Instants) -> Option<(Duration, Duration)> {
    let intended = inst.intended?;
    let delay = inst.start.saturating_duration_since(intended);
    let behind = inst.ready.saturating_duration_since(intended).min(delay);
    Some((behind, delay - behind))
}

/// Counters and histograms of one worker; merged exactly into a [`crate::Report`].
#[derive(Debug, Clone, Default)]
pub struct Collector {
    sets: Vec<(&'static str, String, PhaseSet)>,
    server_timing: Vec<(String, Series)>,
    pub completed: u64,
    pub failures: BTreeMap<ErrorKind, u64>,
    pub non_2xx: u64,
    pub keepalive_reused: u64,
    pub body_bytes: u64,
    pub wire_bytes: u64,
    pub server_software: Option<String>,
    pub first_error: Option<String>,
}

impl Collector {
    /// Derives the phases from `inst` and records them under the outcome's status.
    pub fn add(&mut self, inst: &Instants, outcome: &Result<OpOk, OpError>) {
        self.completed += 1;
        let (op, status) = match outcome {
            Ok(ok) => {
                self.body_bytes += ok.body_bytes;
                self.wire_bytes += ok.wire_bytes;
                if let Some(kind) = ok.failure {
                    *self.failures.entry(kind).or_default() += 1;
                }
                if ok.status.is_some_and(|code| !(200..300).contains(&code)) {
                    self.non_2xx += 1;
                }
                if self.server_software.is_none() {
                    self.server_software.clone_from(&ok.server_software);
                }
                if let Some(st) = &ok.server_timing {
                    // Without allocating per response: this runs for every response of
                    // a server that sends Server-Timing, on the client's CPU.
                    let phases = &mut self.server_timing;
                    latency::server_timing::for_each(st, |name, d| {
                        match phases.iter_mut().find(|(n, _)| n == name) {
                            Some((_, s)) => s.record(d, 0),
                            None => {
                                let mut s = Series::new();
                                s.record(d, 0);
                                phases.push((name.to_string(), s));
                            }
                        }
                    });
                }
                (ok.op, status_name(ok.status))
            }
            Err(e) => {
                self.wire_bytes += e.wire_bytes;
                *self.failures.entry(e.kind).or_default() += 1;
                if self.first_error.is_none() {
                    self.first_error = Some(format!("{}: {}", e.kind.name(), e.message));
                }
                (e.op, StatusName::Error(e.kind))
            }
        };
        if inst.connected.is_none() && outcome.is_ok() {
            self.keepalive_reused += 1;
        }
        let bytes = outcome
            .as_ref()
            .map_or(0, |o| o.body_bytes + o.committed_bytes);
        let set = self.set(op, status);
        let split = split_delay(inst);
        let behind = split.map_or(Duration::ZERO, |(b, _)| b);
        let total = inst.end.saturating_duration_since(inst.start) + behind;
        let connect = inst
            .connected
            .map_or(Duration::ZERO, |c| c.saturating_duration_since(inst.start));
        set.0[0].record(total, bytes);
        set.0[1].record(connect, 0);
        set.0[2].record(total.saturating_sub(connect), 0);
        if let (Some(w), Some(f)) = (inst.written, inst.first_byte) {
            set.0[3].record(f.saturating_duration_since(w), 0);
        }
        if let Some(f) = inst.first_byte {
            set.0[4].record(f.saturating_duration_since(inst.start), 0);
        }
        if let Some((behind, lag)) = split {
            set.0[5].record(behind, 0);
            set.0[6].record(lag, 0);
        }
    }

    fn set(&mut self, op: &'static str, status: StatusName) -> &mut PhaseSet {
        let idx = match self
            .sets
            .iter()
            .position(|(o, s, _)| *o == op && status.matches(s))
        {
            Some(i) => i,
            None => {
                self.sets
                    .push((op, status.to_string(), PhaseSet::default()));
                self.sets.len() - 1
            }
        };
        &mut self.sets[idx].2
    }

    /// Adds another worker's collector into this one.
    pub fn merge(&mut self, other: Collector) {
        self.completed += other.completed;
        for (k, n) in other.failures {
            *self.failures.entry(k).or_default() += n;
        }
        self.non_2xx += other.non_2xx;
        self.keepalive_reused += other.keepalive_reused;
        self.body_bytes += other.body_bytes;
        self.wire_bytes += other.wire_bytes;
        if self.server_software.is_none() {
            self.server_software = other.server_software;
        }
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        for (op, status, set) in other.sets {
            match self
                .sets
                .iter_mut()
                .find(|(o, s, _)| *o == op && *s == status)
            {
                Some((_, _, mine)) => {
                    for (a, b) in mine.0.iter_mut().zip(&set.0) {
                        a.merge(b).expect("same histogram layout merges");
                    }
                }
                None => self.sets.push((op, status, set)),
            }
        }
        for (name, s) in other.server_timing {
            match self.server_timing.iter_mut().find(|(n, _)| *n == name) {
                Some((_, mine)) => mine.merge(&s).expect("same histogram layout merges"),
                None => self.server_timing.push((name, s)),
            }
        }
    }

    /// Client-side series keyed (op, phase, status); empty phases are left out.
    pub fn latency_snapshot(&self) -> Snapshot {
        let mut series = BTreeMap::new();
        for (op, status, set) in &self.sets {
            for (phase, s) in PHASES.iter().zip(&set.0) {
                if s.count() > 0 {
                    series.insert(Key::new(*op, *phase, status.clone()), s.clone());
                }
            }
        }
        Snapshot::from_series("loadgen".into(), series)
    }

    /// Server-Timing phases keyed (`server`, phase name, `ok`).
    pub fn server_timing_snapshot(&self) -> Snapshot {
        let series = self
            .server_timing
            .iter()
            .map(|(n, s)| (Key::new("server", n.clone(), "ok"), s.clone()))
            .collect();
        Snapshot::from_series("server_timing".into(), series)
    }
}

/// A status label without allocating on the hot path.
#[derive(Clone, Copy)]
enum StatusName {
    Ok,
    Http(u16),
    Error(ErrorKind),
}

fn status_name(code: Option<u16>) -> StatusName {
    code.map_or(StatusName::Ok, StatusName::Http)
}

impl StatusName {
    fn matches(self, s: &str) -> bool {
        match self {
            StatusName::Ok => s == "ok",
            StatusName::Http(c) => {
                let b = s.as_bytes();
                b.len() == 3 && b.iter().all(u8::is_ascii_digit) && s.parse::<u16>().ok() == Some(c)
            }
            StatusName::Error(k) => s.strip_prefix("error_") == Some(k.name()),
        }
    }
}

impl std::fmt::Display for StatusName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatusName::Ok => f.write_str("ok"),
            StatusName::Http(c) => write!(f, "{c}"),
            StatusName::Error(k) => write!(f, "error_{}", k.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(ms_connect: Option<u64>, ms_total: u64, intended_early: u64) -> Instants {
        let t0 = Instant::now();
        let start = t0 + Duration::from_millis(intended_early);
        let mut i = Instants::new((intended_early > 0).then_some(t0), start);
        // Busy with an earlier operation until 1 ms before the start: of the delay,
        // everything but that last millisecond was spent behind it.
        i.ready = start.checked_sub(Duration::from_millis(1)).unwrap_or(start);
        i.connected = ms_connect.map(|c| start + Duration::from_millis(c));
        i.written = Some(start + Duration::from_millis(ms_connect.unwrap_or(0)));
        i.first_byte = Some(start + Duration::from_millis(ms_total / 2));
        i.end = start + Duration::from_millis(ms_total);
        i
    }

    #[test]
    fn derives_phases_from_instants() {
        let mut c = Collector::default();
        let ok = OpOk {
            op: "GET",
            status: Some(200),
            body_bytes: 100,
            wire_bytes: 150,
            server_timing: Some("read;dur=1.5".into()),
            ..OpOk::default()
        };
        c.add(&inst(Some(2), 10, 0), &Ok(ok.clone()));
        c.add(
            &inst(None, 20, 5),
            &Ok(OpOk {
                status: Some(404),
                ..ok
            }),
        );
        c.add(
            &inst(None, 1, 0),
            &Err(OpError::new("GET", ErrorKind::Reset, "x")),
        );
        assert_eq!(c.completed, 3);
        assert_eq!(c.non_2xx, 1);
        assert_eq!(c.body_bytes, 200);
        assert_eq!(c.failures[&ErrorKind::Reset], 1);
        let snap = c.latency_snapshot();
        let get = |p: &str, s: &str| snap.get(&Key::new("GET", p, s)).unwrap().clone();
        assert_eq!(get("total", "200").count(), 1);
        assert!((get("connect", "200").quantile_seconds(1.0) - 0.002).abs() < 1e-5);
        assert!((get("processing", "200").quantile_seconds(1.0) - 0.008).abs() < 1e-5);
        // 4 ms behind an earlier request (charged) plus 20 ms of service; the last
        // millisecond of the 5 ms delay was the generator's lag (not charged).
        assert!((get("total", "404").quantile_seconds(1.0) - 0.024).abs() < 1e-4);
        assert!((get("queue", "404").quantile_seconds(1.0) - 0.004).abs() < 1e-5);
        assert!((get("schedule_lag", "404").quantile_seconds(1.0) - 0.001).abs() < 1e-5);
        assert_eq!(get("total", "error_reset").count(), 1);
        let st = c.server_timing_snapshot();
        assert_eq!(
            st.get(&Key::new("server", "read", "ok")).unwrap().count(),
            2
        );

        let mut merged = Collector::default();
        merged.merge(c.clone());
        merged.merge(c);
        assert_eq!(merged.completed, 6);
        let snap = merged.latency_snapshot();
        assert_eq!(
            snap.get(&Key::new("GET", "total", "200")).unwrap().count(),
            2
        );
    }
}

//! Per-request phase timing: recorded into `latency` and the access log when the last
//! body byte has been handed to the socket (or the body was abandoned).
//!
//! A [`Timing`] lives in an `Arc` shared by the response body, every data frame
//! (`Bytes::from_owner`) and every pending `sendfile` job, so it drops — and records —
//! only after hyper has written (or dropped) the last frame. Phases:
//! - `meta`: resolving the path (open + fstat, or NFS LOOKUP/GETATTR or a cache hit);
//! - `read`: waiting for file bytes (pread / NFS READ). Large bodies keep several READs
//!   in flight while earlier chunks are sent, so only the time the response actually
//!   stood waiting for data counts — a READ hidden behind sending costs nothing — and
//!   `meta + read + send = total` holds;
//! - `send`: the rest of the time to the last byte (socket writes, `sendfile`, waiting on
//!   a slow client);
//! - `total`: from the request's arrival in the handler to the last byte.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use latency::{Key, Registry, SeriesHandle};

use crate::config::AccessLogFormat;
use parking_lot::RwLock;

/// Series handles per (op, status), so the hot path skips the registry's map scan.
/// Created on first use, so a phase never measured (no `read` for a HEAD) has no row.
pub(crate) type HandleSet = Arc<[OnceLock<SeriesHandle>; 4]>;

const PHASES: [&str; 4] = ["total", "meta", "read", "send"];

/// Where finished requests go: the registry and the access log.
pub(crate) struct Recorder {
    registry: Arc<Registry>,
    /// A short list (a few ops × a few statuses), scanned comparing the status and the
    /// op's address first: cheaper per request than hashing the op's text.
    handles: RwLock<Vec<(&'static str, u16, HandleSet)>>,
    log: Option<std::sync::mpsc::Sender<String>>,
    format: AccessLogFormat,
}

impl Recorder {
    pub(crate) fn new(
        registry: Arc<Registry>,
        log: Option<std::sync::mpsc::Sender<String>>,
    ) -> Self {
        Recorder {
            registry,
            handles: RwLock::new(Vec::new()),
            log,
            format: AccessLogFormat::Json,
        }
    }

    /// Writes access log lines in `format`.
    pub(crate) fn with_format(mut self, format: AccessLogFormat) -> Self {
        self.format = format;
        self
    }

    /// Whether an access log is written (so requests collect its fields).
    pub(crate) fn logs(&self) -> bool {
        self.log.is_some()
    }

    /// The series of (`op`, `status`), made on first use.
    pub(crate) fn handles(&self, op: &'static str, status: u16) -> HandleSet {
        let find = |list: &[(&'static str, u16, HandleSet)]| {
            list.iter()
                .find(|(o, s, _)| *s == status && (std::ptr::eq(*o, op) || *o == op))
                .map(|(_, _, h)| h.clone())
        };
        if let Some(h) = find(&self.handles.read()) {
            return h;
        }
        let mut list = self.handles.write();
        if let Some(h) = find(&list) {
            return h;
        }
        let h: HandleSet = Arc::new(std::array::from_fn(|_| OnceLock::new()));
        list.push((op, status, h.clone()));
        h
    }

    /// Records one finished request's phases (`read` only when it is not zero), as
    /// [`Timing`] does when it drops; `bytes` is the body length sent.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_phases(
        &self,
        set: &HandleSet,
        op: &'static str,
        status: u16,
        total: Duration,
        meta: Duration,
        read: Duration,
        bytes: u64,
    ) {
        let send = total.saturating_sub(meta).saturating_sub(read);
        self.record(set, op, status, 0, total, bytes);
        self.record(set, op, status, 1, meta, 0);
        if !read.is_zero() {
            self.record(set, op, status, 2, read, bytes);
        }
        self.record(set, op, status, 3, send, bytes);
    }

    fn record(
        &self,
        set: &HandleSet,
        op: &'static str,
        status: u16,
        phase: usize,
        d: Duration,
        bytes: u64,
    ) {
        set[phase]
            .get_or_init(|| {
                self.registry
                    .handle(&Key::new(op, PHASES[phase], status.to_string()))
            })
            .record(d, bytes);
    }
}

/// The request facts the access log needs.
pub(crate) struct RequestInfo {
    pub method: &'static str,
    /// Shared by the request's context and its timer (a reference count, not a copy).
    pub path: Arc<str>,
    pub peer: SocketAddr,
    /// What only the access log needs; `None` when no log is written.
    pub log: Option<Arc<LogFields>>,
}

/// Request headers and the request line as the access log shows them (each capped).
#[derive(Debug, Default)]
pub(crate) struct LogFields {
    /// The method as sent (`method` above folds all but GET and HEAD into `OTHER`).
    pub method: String,
    /// Path and query as sent.
    pub target: String,
    /// `HTTP/1.1`, `HTTP/1.0`.
    pub protocol: &'static str,
    pub host: Option<String>,
    pub user_agent: Option<String>,
    pub referer: Option<String>,
}

/// One request's clock; records itself on drop.
pub(crate) struct Timing {
    recorder: Arc<Recorder>,
    start: Instant,
    /// When the request was answered, for the access log (the epoch when none is kept).
    wall: SystemTime,
    info: RequestInfo,
    op: &'static str,
    status: u16,
    meta: Duration,
    read_nanos: AtomicU64,
    /// Body bytes planned (Content-Length of what is sent, 0 for HEAD/304).
    body_len: u64,
    /// Set when the body produced its last frame; unset on drop = client went away.
    complete: AtomicBool,
    mode: &'static str,
}

impl Timing {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        recorder: Arc<Recorder>,
        start: Instant,
        info: RequestInfo,
        op: &'static str,
        status: u16,
        meta: Duration,
        read: Duration,
        body_len: u64,
        mode: &'static str,
    ) -> Arc<Timing> {
        // Only the access log shows the wall-clock time: no clock read without one.
        let wall = if recorder.logs() {
            SystemTime::now()
        } else {
            SystemTime::UNIX_EPOCH
        };
        Arc::new(Timing {
            recorder,
            start,
            wall,
            info,
            op,
            status,
            meta,
            read_nanos: AtomicU64::new(read.as_nanos() as u64),
            body_len,
            complete: AtomicBool::new(body_len == 0),
            mode,
        })
    }

    pub(crate) fn add_read(&self, d: Duration) {
        self.read_nanos
            .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    pub(crate) fn set_complete(&self) {
        self.complete.store(true, Ordering::Relaxed);
    }
}

impl Drop for Timing {
    fn drop(&mut self) {
        let total = self.start.elapsed();
        let read = Duration::from_nanos(self.read_nanos.load(Ordering::Relaxed));
        let send = total.saturating_sub(self.meta).saturating_sub(read);
        let complete = self.complete.load(Ordering::Relaxed);
        // A body the client abandoned is recorded as 499 (nginx's "client closed").
        let status = if complete { self.status } else { 499 };
        let bytes = if complete { self.body_len } else { 0 };
        let r = &self.recorder;
        let h = r.handles(self.op, status);
        r.record_phases(&h, self.op, status, total, self.meta, read, bytes);
        if let Some(log) = &self.recorder.log {
            let none = LogFields::default();
            let f = self.info.log.as_deref().unwrap_or(&none);
            let line = match self.recorder.format {
                AccessLogFormat::Json => serde_json::json!({
                    "time": httpdate::fmt_http_date(self.wall),
                    "peer": self.info.peer.to_string(),
                    "method": self.info.method,
                    "path": &*self.info.path,
                    "protocol": f.protocol,
                    "host": f.host,
                    "user_agent": f.user_agent,
                    "referer": f.referer,
                    "op": self.op,
                    "status": self.status,
                    "complete": complete,
                    "bytes": self.body_len,
                    "mode": self.mode,
                    "total_ms": ms(total),
                    "meta_ms": ms(self.meta),
                    "read_ms": ms(read),
                    "send_ms": ms(send),
                })
                .to_string(),
                AccessLogFormat::Combined => combined_line(
                    self.info.peer,
                    self.wall,
                    f,
                    self.status,
                    if complete { self.body_len } else { 0 },
                ),
            };
            let _ = log.send(line);
        }
    }
}

/// One line of the Combined Log Format:
/// `HOST - - [10/Oct/2000:13:55:36 +0000] "GET /a HTTP/1.1" 200 2326 "REFERER" "UA"`.
/// Quoted fields escape `"`, `\\` and bytes outside printable ASCII as `\xHH` (nginx's
/// escaping), so a crafted header cannot forge a line or a field.
fn combined_line(
    peer: SocketAddr,
    wall: SystemTime,
    f: &LogFields,
    status: u16,
    bytes: u64,
) -> String {
    let bytes = if bytes == 0 {
        "-".to_string()
    } else {
        bytes.to_string()
    };
    let opt = |v: &Option<String>| v.as_deref().map_or_else(|| "-".to_string(), escape_log);
    format!(
        "{} - - [{}] \"{} {} {}\" {status} {bytes} \"{}\" \"{}\"",
        peer.ip(),
        clf_time(wall),
        escape_log(&f.method),
        escape_log(&f.target),
        f.protocol,
        opt(&f.referer),
        opt(&f.user_agent),
    )
}

fn escape_log(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02X}")),
        }
    }
    out
}

/// `10/Oct/2000:13:55:36 +0000` (UTC).
fn clf_time(t: SystemTime) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{day:02}/{}/{year}:{:02}:{:02}:{:02} +0000",
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// Starts the thread that writes access-log lines; it flushes whenever it runs out of
/// lines and ends when every sender is gone.
pub(crate) fn spawn_log_writer(
    mut out: Box<dyn Write + Send>,
) -> (std::sync::mpsc::Sender<String>, std::thread::JoinHandle<()>) {
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let handle = std::thread::Builder::new()
        .name("httpd-access-log".into())
        .spawn(move || {
            let mut buf = std::io::BufWriter::new(&mut out);
            while let Ok(line) = rx.recv() {
                let _ = writeln!(buf, "{line}");
                while let Ok(line) = rx.try_recv() {
                    let _ = writeln!(buf, "{line}");
                }
                let _ = buf.flush();
            }
            let _ = buf.flush();
        })
        .expect("spawning the access-log thread");
    (tx, handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_lines_quote_and_escape() {
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(971_186_136);
        assert_eq!(clf_time(wall), "10/Oct/2000:13:55:36 +0000");
        assert_eq!(
            clf_time(SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "29/Feb/2000:00:00:00 +0000"
        );
        let f = LogFields {
            method: "GET".into(),
            target: "/a b?x=1".into(),
            protocol: "HTTP/1.1",
            host: Some("h".into()),
            user_agent: Some("curl \"x\"\n".into()),
            referer: None,
        };
        let peer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        assert_eq!(
            combined_line(peer, wall, &f, 200, 2326),
            "127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a b?x=1 HTTP/1.1\" 200 2326 \"-\" \"curl \\\"x\\\"\\x0A\""
        );
        assert!(combined_line(peer, wall, &f, 304, 0).contains("\" 304 - \""));
    }
}

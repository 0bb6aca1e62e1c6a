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

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use latency::{Key, Registry, SeriesHandle};
use parking_lot::RwLock;

/// Series handles per (op, status), so the hot path skips the registry's map scan.
/// Created on first use, so a phase never measured (no `read` for a HEAD) has no row.
type HandleSet = Arc<[OnceLock<SeriesHandle>; 4]>;

const PHASES: [&str; 4] = ["total", "meta", "read", "send"];

/// Where finished requests go: the registry and the access log.
pub(crate) struct Recorder {
    registry: Arc<Registry>,
    handles: RwLock<HashMap<(&'static str, u16), HandleSet>>,
    log: Option<std::sync::mpsc::Sender<String>>,
}

impl Recorder {
    pub(crate) fn new(
        registry: Arc<Registry>,
        log: Option<std::sync::mpsc::Sender<String>>,
    ) -> Self {
        Recorder {
            registry,
            handles: RwLock::new(HashMap::new()),
            log,
        }
    }

    fn handles(&self, op: &'static str, status: u16) -> HandleSet {
        if let Some(h) = self.handles.read().get(&(op, status)) {
            return h.clone();
        }
        let h: HandleSet = Arc::new(std::array::from_fn(|_| OnceLock::new()));
        self.handles
            .write()
            .entry((op, status))
            .or_insert(h)
            .clone()
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
    pub path: String,
    pub peer: SocketAddr,
}

/// One request's clock; records itself on drop.
pub(crate) struct Timing {
    recorder: Arc<Recorder>,
    start: Instant,
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
        Arc::new(Timing {
            recorder,
            start,
            wall: SystemTime::now(),
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
        r.record(&h, self.op, status, 0, total, bytes);
        r.record(&h, self.op, status, 1, self.meta, 0);
        if !read.is_zero() {
            r.record(&h, self.op, status, 2, read, bytes);
        }
        r.record(&h, self.op, status, 3, send, bytes);
        if let Some(log) = &self.recorder.log {
            let ts = httpdate::fmt_http_date(self.wall);
            let line = serde_json::json!({
                "time": ts,
                "peer": self.info.peer.to_string(),
                "method": self.info.method,
                "path": self.info.path,
                "op": self.op,
                "status": self.status,
                "complete": complete,
                "bytes": self.body_len,
                "mode": self.mode,
                "total_ms": ms(total),
                "meta_ms": ms(self.meta),
                "read_ms": ms(read),
                "send_ms": ms(send),
            });
            let _ = log.send(line.to_string());
        }
    }
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

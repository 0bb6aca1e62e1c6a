//! The response body: bytes in memory, zero-copy `sendfile` markers, or streamed chunks.
//!
//! hyper writes bodies from `Bytes`, so `sendfile(2)` cannot go through it directly. The
//! sendfile body instead yields *marker* frames: slices of one static zero-filled
//! buffer, each paired with a [`SendJob`] (file, offset, length) pushed on the
//! connection's queue in the same order. With hyper's queued (writev) write strategy the
//! frames reach [`crate::conn_io::ConnIo`] as the very `IoSlice`s we built, and it
//! recognises a marker by its address and sends the file range with `sendfile` instead.
//! hyper still does all of HTTP (headers, Content-Length accounting, keep-alive); a
//! marker without a queued job fails the connection instead of sending zeros.

use std::collections::VecDeque;
use std::fs::File;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use parking_lot::Mutex;
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::storage::{Handle, Storage, StorageError};
use crate::timing::Timing;

/// Size of the marker buffer = the largest single sendfile frame.
pub(crate) const MARKER_LEN: usize = 1 << 20;

/// Never read or written: only its address range matters (and it stays in .bss).
static MARKER: [u8; MARKER_LEN] = [0; MARKER_LEN];

/// True when `buf` lies inside the marker buffer.
pub(crate) fn is_marker(buf: &[u8]) -> bool {
    let start = MARKER.as_ptr() as usize;
    let p = buf.as_ptr() as usize;
    !buf.is_empty() && p >= start && p + buf.len() <= start + MARKER_LEN
}

/// A file range the connection sends with `sendfile` when it meets the matching marker.
pub(crate) struct SendJob {
    pub file: Arc<File>,
    pub offset: u64,
    pub remaining: u64,
    /// The body's last range: when it is fully sent the response is complete.
    pub last: bool,
    /// Keeps the request's timer alive until the bytes are on the socket.
    pub timing: Arc<Timing>,
}

/// Per-connection FIFO of pending sendfile jobs.
pub(crate) type SendQueue = Arc<Mutex<VecDeque<SendJob>>>;

type ReadTask = JoinHandle<Result<Bytes, StorageError>>;

/// Bytes all streamed bodies of this process may hold at once, read but not yet written
/// to a socket (NFS READ buffers in flight and frames queued in hyper). Without a shared
/// budget, 100 clients of a 10 MiB file held 4 × 1 MiB of read-ahead each (325 MB peak
/// RSS); with it, memory stays bounded and the same bandwidth is shared by fewer
/// responses at a time. A body that holds nothing may always wait for its next chunk,
/// so every response makes progress.
pub const STREAM_BUDGET_BYTES: usize = 16 << 20;

/// The budget counts in units of this size (a READ of `n` bytes takes ⌈n / unit⌉).
const BUDGET_UNIT: usize = 64 << 10;

fn stream_budget() -> &'static Arc<Semaphore> {
    static BUDGET: OnceLock<Arc<Semaphore>> = OnceLock::new();
    BUDGET.get_or_init(|| Arc::new(Semaphore::new(STREAM_BUDGET_BYTES / BUDGET_UNIT)))
}

fn budget_units(len: usize) -> u32 {
    len.div_ceil(BUDGET_UNIT)
        .min(STREAM_BUDGET_BYTES / BUDGET_UNIT) as u32
}

type PermitWait =
    Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send + Sync>>;

enum Kind {
    Empty,
    Once(Option<Bytes>),
    Sendfile {
        file: Arc<File>,
        offset: u64,
        end: u64,
        queue: SendQueue,
    },
    Stream {
        storage: Arc<dyn Storage>,
        handle: Handle,
        next: u64,
        end: u64,
        remaining: u64,
        chunk: usize,
        depth: usize,
        /// READs in flight, each with its share of [`STREAM_BUDGET_BYTES`].
        inflight: VecDeque<(ReadTask, OwnedSemaphorePermit)>,
        /// Waiting for budget for the next READ (only when nothing is in flight).
        permit_wait: Option<PermitWait>,
        /// When the body started waiting for the front READ; the wait (not the READ's
        /// own duration, which overlaps with sending) is what the `read` phase counts.
        waiting_since: Option<Instant>,
    },
}

/// The body of every response httpd sends.
pub struct FileBody {
    kind: Kind,
    timing: Option<Arc<Timing>>,
}

/// A frame that keeps the request timer alive — and its share of the stream budget
/// taken — until hyper has written it.
struct Owned {
    data: Bytes,
    _timing: Option<Arc<Timing>>,
    _budget: Option<OwnedSemaphorePermit>,
}

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl FileBody {
    pub(crate) fn empty() -> FileBody {
        FileBody {
            kind: Kind::Empty,
            timing: None,
        }
    }

    pub(crate) fn bytes(data: Bytes) -> FileBody {
        FileBody {
            kind: if data.is_empty() {
                Kind::Empty
            } else {
                Kind::Once(Some(data))
            },
            timing: None,
        }
    }

    pub(crate) fn sendfile(file: Arc<File>, offset: u64, len: u64, queue: SendQueue) -> FileBody {
        FileBody {
            kind: Kind::Sendfile {
                file,
                offset,
                end: offset + len,
                queue,
            },
            timing: None,
        }
    }

    pub(crate) fn stream(
        storage: Arc<dyn Storage>,
        handle: Handle,
        offset: u64,
        len: u64,
        chunk: usize,
    ) -> FileBody {
        let depth = storage.read_ahead().max(1);
        FileBody {
            kind: Kind::Stream {
                storage,
                handle,
                next: offset,
                end: offset + len,
                remaining: len,
                chunk,
                depth,
                inflight: VecDeque::new(),
                permit_wait: None,
                waiting_since: None,
            },
            timing: None,
        }
    }

    pub(crate) fn with_timing(mut self, timing: Arc<Timing>) -> FileBody {
        self.timing = Some(timing);
        self
    }

    fn frame(&self, data: Bytes, budget: Option<OwnedSemaphorePermit>) -> Frame<Bytes> {
        Frame::data(Bytes::from_owner(Owned {
            data,
            _timing: self.timing.clone(),
            _budget: budget,
        }))
    }

    fn complete(&self) {
        if let Some(t) = &self.timing {
            t.set_complete();
        }
    }
}

impl http_body::Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        match &mut this.kind {
            Kind::Empty => Poll::Ready(None),
            Kind::Once(data) => match data.take() {
                Some(d) => {
                    this.complete();
                    Poll::Ready(Some(Ok(this.frame(d, None))))
                }
                None => Poll::Ready(None),
            },
            Kind::Sendfile {
                file,
                offset,
                end,
                queue,
            } => {
                if *offset >= *end {
                    return Poll::Ready(None);
                }
                let n = (*end - *offset).min(MARKER_LEN as u64);
                let timing = this
                    .timing
                    .clone()
                    .expect("a sendfile body always carries its timer");
                *offset += n;
                // Completion is marked by the connection when this last range has
                // actually been sent, not here.
                queue.lock().push_back(SendJob {
                    file: file.clone(),
                    offset: *offset - n,
                    remaining: n,
                    last: *offset >= *end,
                    timing,
                });
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                    &MARKER[..n as usize],
                )))))
            }
            Kind::Stream {
                storage,
                handle,
                next,
                end,
                remaining,
                chunk,
                depth,
                inflight,
                permit_wait,
                waiting_since,
            } => {
                // Keep up to `depth` reads in flight so the next chunk is read while this
                // one is being sent, as far as the process-wide stream budget allows.
                while inflight.len() < *depth && *next < *end {
                    let len = (*end - *next).min(*chunk as u64) as usize;
                    let units = budget_units(len);
                    let permit = if inflight.is_empty() {
                        // Nothing in flight: wait for budget (FIFO, so no body starves).
                        let wait = permit_wait.get_or_insert_with(|| {
                            Box::pin(stream_budget().clone().acquire_many_owned(units))
                        });
                        match wait.as_mut().poll(cx) {
                            Poll::Pending => {
                                waiting_since.get_or_insert_with(Instant::now);
                                return Poll::Pending;
                            }
                            Poll::Ready(p) => {
                                *permit_wait = None;
                                p.map_err(std::io::Error::other)?
                            }
                        }
                    } else {
                        // Read-ahead only from budget that is free right now.
                        match stream_budget().clone().try_acquire_many_owned(units) {
                            Ok(p) => p,
                            Err(_) => break,
                        }
                    };
                    let (st, h, off) = (storage.clone(), handle.clone(), *next);
                    let task = tokio::spawn(async move { st.read(&h, off, len).await });
                    inflight.push_back((task, permit));
                    *next += len as u64;
                }
                let Some(front) = inflight.front_mut() else {
                    return Poll::Ready(None);
                };
                let res = match Pin::new(&mut front.0).poll(cx) {
                    Poll::Pending => {
                        waiting_since.get_or_insert_with(Instant::now);
                        return Poll::Pending;
                    }
                    Poll::Ready(r) => r,
                };
                let (_, permit) = inflight.pop_front().expect("front exists");
                let waited = waiting_since.take().map(|since| since.elapsed());
                match res {
                    Ok(Ok(data)) => {
                        if let (Some(t), Some(waited)) = (&this.timing, waited) {
                            t.add_read(waited);
                        }
                        *remaining -= data.len() as u64;
                        if *remaining == 0 {
                            this.complete();
                        }
                        Poll::Ready(Some(Ok(this.frame(data, Some(permit)))))
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "read failed mid-body; closing the connection");
                        Poll::Ready(Some(Err(std::io::Error::other(e))))
                    }
                    Err(e) => Poll::Ready(Some(Err(std::io::Error::other(e)))),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Empty => true,
            Kind::Once(d) => d.is_none(),
            Kind::Sendfile { offset, end, .. } => offset >= end,
            Kind::Stream { remaining, .. } => *remaining == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        let n = match &self.kind {
            Kind::Empty => 0,
            Kind::Once(d) => d.as_ref().map_or(0, |d| d.len() as u64),
            Kind::Sendfile { offset, end, .. } => end - offset,
            Kind::Stream { remaining, .. } => *remaining,
        };
        SizeHint::with_exact(n)
    }
}

impl Drop for FileBody {
    fn drop(&mut self) {
        if let Kind::Stream { inflight, .. } = &mut self.kind {
            for (t, _permit) in inflight.drain(..) {
                t.abort();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_detection_is_by_address() {
        assert!(is_marker(&MARKER[..10]));
        assert!(is_marker(&MARKER[MARKER_LEN - 1..]));
        assert!(!is_marker(&MARKER[..0]));
        let zeros = vec![0u8; 10];
        assert!(!is_marker(&zeros));
    }
}

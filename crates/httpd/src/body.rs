//! The response body: bytes in memory, zero-copy `sendfile` markers, or streamed chunks.
//!
//! hyper writes bodies from `Bytes`, so `sendfile(2)` cannot go through it directly. The
//! sendfile body instead yields *marker* frames: slices of one static zero-filled
//! buffer, each paired with a [`SendJob`] (file, offset, length) pushed on the
//! connection's queue in the same order. A streamed (NFS) body whose READ left its data
//! in pipes (`nfsclient`'s splice path) does the same with a job that names the pipes. With hyper's queued (writev) write strategy the
//! frames reach [`crate::conn_io::ConnIo`] as the very `IoSlice`s we built, and it
//! recognises a marker by its address and sends the file range with `sendfile` instead.
//! hyper still does all of HTTP (headers, Content-Length accounting, keep-alive); a
//! marker without a queued job fails the connection instead of sending zeros.

use std::collections::VecDeque;

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http_body::{Frame, SizeHint};
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use nfsclient::PipePart;

use crate::storage::{Chunk, Handle, OpenFile, Storage, StorageError};
use crate::stream_budget::{BUDGET_UNIT, PermitWait, StreamBudgets, budget_units, wait_for_budget};
use crate::timing::Timing;

/// Size of the marker buffer = the largest single sendfile frame.
pub const MARKER_LEN: usize = 1 << 20;

/// Never read or written: only its address range matters (and it stays in .bss).
static MARKER: [u8; MARKER_LEN] = [0; MARKER_LEN];

/// True when `buf` lies inside the marker buffer.
pub(crate) fn is_marker(buf: &[u8]) -> bool {
    let start = MARKER.as_ptr() as usize;
    let p = buf.as_ptr() as usize;
    !buf.is_empty() && p >= start && p + buf.len() <= start + MARKER_LEN
}

/// Where a [`SendJob`]'s bytes are.
pub(crate) enum Source {
    /// A file range from `offset`: `sendfile(2)`.
    File { file: Arc<OpenFile>, offset: u64 },
    /// Bytes waiting in pipes, in order: `splice(2)`.
    Pipes(VecDeque<PipePart>),
}

/// Bytes the connection sends from the kernel when it meets the matching marker.
pub(crate) struct SendJob {
    pub source: Source,
    pub remaining: u64,
    /// The body's last range: when it is fully sent the response is complete.
    pub last: bool,
    /// Keeps the request's timer alive until the bytes are on the socket.
    pub timing: Arc<Timing>,
}

/// What one connection's bodies share with its socket: the FIFO of pending sendfile jobs,
/// and a way for a stalled body to have the connection closed.
#[derive(Default)]
pub(crate) struct ConnShared {
    jobs: Mutex<VecDeque<SendJob>>,
    abort: std::sync::atomic::AtomicBool,
    /// The connection task's waker, parked by [`crate::conn_io::ConnIo`] while its I/O is
    /// pending, so an abort takes effect without waiting for the socket.
    waker: Mutex<Option<std::task::Waker>>,
    /// When the socket last moved a byte, in ms since [`epoch`].
    progress_ms: std::sync::atomic::AtomicU64,
    /// Requests being answered on the connection, their bodies not yet dropped.
    requests: std::sync::atomic::AtomicUsize,
    /// The connection's socket, to ask how much its send buffer can take (see
    /// [`ConnShared::send_room`]); unset in tests without a socket.
    socket: OnceLock<std::os::fd::RawFd>,
    /// The client's address: bodies wait for stream budget in turn per address (see
    /// [`StreamBudgets::turn`]); unset in tests without a socket.
    peer: OnceLock<std::net::IpAddr>,
    /// The socket's unsent bytes are capped ([`ConnShared::cap_unsent`]).
    unsent_capped: std::sync::atomic::AtomicBool,
}

/// A request in progress on a connection: held from the service call until hyper drops
/// the response's body (after its last byte, or with the connection). While one is held
/// the connection is not idle, and is not closed to make room at the connection cap.
pub(crate) struct InRequest(SendQueue);

impl InRequest {
    pub(crate) fn new(conn: &SendQueue) -> InRequest {
        conn.requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        InRequest(conn.clone())
    }
}

impl Drop for InRequest {
    fn drop(&mut self) {
        self.0
            .requests
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The process's clock origin for [`ConnShared`]'s progress time.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl ConnShared {
    /// The pending sendfile jobs.
    pub(crate) fn lock(&self) -> parking_lot::MutexGuard<'_, VecDeque<SendJob>> {
        self.jobs.lock()
    }

    /// Asks the connection to close now (its next I/O fails).
    pub(crate) fn abort(&self) {
        self.abort.store(true, std::sync::atomic::Ordering::Release);
        if let Some(w) = self.waker.lock().take() {
            w.wake();
        }
    }

    /// Records the connection's socket; it outlives every body of the connection.
    pub(crate) fn set_socket(&self, fd: std::os::fd::RawFd) {
        let _ = self.socket.set(fd);
    }

    /// Records the client's address.
    pub(crate) fn set_peer(&self, ip: std::net::IpAddr) {
        let _ = self.peer.set(ip);
    }

    /// Caps what the socket holds unsent at [`UNSENT_CAP`] (`TCP_NOTSENT_LOWAT`), once per
    /// connection; see [`MANY_STREAMS`] for when.
    fn cap_unsent(&self) {
        if self
            .unsent_capped
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        let Some(&fd) = self.socket.get() else {
            return;
        };
        let cap = UNSENT_CAP as libc::c_int;
        // SAFETY: `fd` is this connection's open socket; the option is an int.
        let failed = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                (&cap as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            ) != 0
        };
        if failed {
            tracing::debug!(error = %std::io::Error::last_os_error(), "TCP_NOTSENT_LOWAT");
        }
    }

    /// Whether [`ConnShared::cap_unsent`] has capped the socket (tests).
    #[cfg(test)]
    fn unsent_capped(&self) -> bool {
        self.unsent_capped
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes the socket's send buffer can take now without blocking, or 0 when unknown:
    /// half of what `SO_SNDBUF` leaves beside the memory already queued (`SO_MEMINFO`,
    /// which counts the kernel's per-packet overhead; the payload queued alone, as
    /// `TIOCOUTQ` says it, showed 590 KB free on a socket that took nothing more).
    fn send_room(&self) -> usize {
        /// `SO_MEMINFO` (Linux 4.6+, asm-generic and x86 alike); not exported by libc
        /// for every target.
        const SO_MEMINFO: libc::c_int = 55;
        let Some(&fd) = self.socket.get() else {
            return 0;
        };
        let mut info = [0u32; 9];
        let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
        // SAFETY: `fd` is this connection's open socket; the kernel writes at most `len`
        // bytes into `info`.
        let ok = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                SO_MEMINFO,
                info.as_mut_ptr().cast(),
                &mut len,
            ) == 0
        };
        if !ok {
            return 0;
        }
        let sndbuf = info[libc::SK_MEMINFO_SNDBUF as usize] as usize;
        let queued = info[libc::SK_MEMINFO_WMEM_QUEUED as usize] as usize;
        sndbuf.saturating_sub(queued) / 2
    }

    /// Records that the socket moved bytes now.
    pub(crate) fn progressed(&self) {
        self.progressed_at(Instant::now());
    }

    /// Records that the socket moved bytes at `now` (a clock read the caller made anyway).
    pub(crate) fn progressed_at(&self, now: Instant) {
        let ms = now.saturating_duration_since(epoch()).as_millis() as u64;
        self.progress_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// How long the socket has moved no byte.
    fn idle_for(&self) -> Duration {
        let last = self.progress_ms.load(std::sync::atomic::Ordering::Relaxed);
        epoch()
            .elapsed()
            .saturating_sub(Duration::from_millis(last))
    }

    /// How long the connection has been idle: no request in progress, nothing queued for
    /// `sendfile`, no byte moved (waiting for a request's headers, before the first or
    /// between keep-alive requests). `None` while it is busy.
    pub(crate) fn idle(&self) -> Option<Duration> {
        let busy = self.requests.load(std::sync::atomic::Ordering::Relaxed) > 0
            || !self.jobs.lock().is_empty();
        (!busy && !self.aborted()).then(|| self.idle_for())
    }

    pub(crate) fn aborted(&self) -> bool {
        self.abort.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Wakes the connection's task if its I/O is pending (it then looks at what changed,
    /// e.g. the fast path's shutdown flag).
    pub(crate) fn wake(&self) {
        if let Some(w) = self.waker.lock().take() {
            w.wake();
        }
    }

    pub(crate) fn park(&self, waker: &std::task::Waker) {
        let mut slot = self.waker.lock();
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }
}

/// Per-connection state shared by its bodies and [`crate::conn_io::ConnIo`].
pub(crate) type SendQueue = Arc<ConnShared>;

type ReadTask = JoinHandle<Result<Chunk, StorageError>>;

/// With more streamed bodies than this alive at once, each new one caps its socket's
/// unsent bytes at [`UNSENT_CAP`]. A socket whose client stops reading otherwise takes
/// 2.8 MB from httpd before it pushes back (loopback's autotuned send buffer): 1,000
/// such clients from four addresses had httpd copying 2.8 GB of NFS data into their
/// sockets in the attack's first seconds, and a download beside them took 0.35–1.5 s,
/// waiting for CPU and budget. Capped always, the same option cost `--nfs` 20 % of its
/// 10 MiB requests/s and 25 % more CPU per request (smaller writes, more wakeups), so
/// it applies only past the concurrency a benchmark sweep or a busy site streams at.
const MANY_STREAMS: usize = 256;

/// The unsent bytes a socket may hold once [`MANY_STREAMS`] bodies are streaming.
const UNSENT_CAP: usize = 256 << 10;

/// A frame handed to hyper and still not written after this long means the client's
/// socket is not draining. The body then gives back its share of the budget: read-ahead
/// in flight or ready is dropped (and read again when the client drains), and the
/// frames stuck in hyper move from the shared budget to the smaller
/// [`crate::stream_budget::STALLED_BUDGET_BYTES`] (where it has room), so no number of stalled clients can
/// hold what draining ones need. Until its socket drains again the body reads one small
/// chunk at a time, then grows its reads again as at the start.
/// Without this, four clients that stop reading a 10 MiB download held the whole
/// budget, and every other streamed body got `200` and no bytes until the idle timeout.
/// A client draining 1 MiB in 200 ms (5 MiB/s) is never taken for stalled.
const STALL_AFTER: Duration = Duration::from_millis(200);

/// A stalled frame that still holds shared budget (the stalled budget was full) on a
/// socket that has moved no byte for this long gets its connection closed: the shared
/// budget is what draining clients need. A slow client that still reads is never cut.
const STALL_CLOSE: Duration = Duration::from_secs(3);

/// The same, while another streamed body waits for shared budget: then the stalled
/// connection is what keeps that body from starting. With 256 clients that stop reading
/// at once, closing 16 of them per [`STALL_CLOSE`] round kept a legitimate download
/// waiting 45 s. A waiting body waits for one round of these closes (the budget's
/// holders were granted together): at 1 s, a download beside 1,000 stalled clients took
/// 0.88–0.94 s. A client whose socket moved no byte for half a second while the server
/// is out of budget is not reading; it is closed, not one that still reads.
const STALL_CLOSE_CONTENDED: Duration = Duration::from_millis(500);

/// A READ larger than this is handed to hyper in pieces sized to what the socket's send
/// buffer can take now (at least this much): a draining socket gets the whole READ in
/// one frame, and what a stalled socket cannot take stays here, where it can be dropped
/// (and read again), instead of in hyper, where it cannot. A stalled client then holds
/// at most this much budget, so 64 of them fit in [`crate::stream_budget::STALLED_BUDGET_BYTES`] instead of 8
/// (READs from NFS are 1 MiB once a body drains).
const FRAME_MAX: usize = START_CHUNK;

/// How often a streamed body's watchdog looks for a stall.
const STALL_CHECK: Duration = Duration::from_millis(50);

/// Read-ahead a body starts with; it doubles (up to the backend's `read_ahead`) each time
/// the body is polled with all its earlier frames written, i.e. once its socket has shown
/// that it drains.
const START_DEPTH: usize = 2;

/// The first READ of a body, doubling with the read-ahead up to the configured chunk
/// (1 MiB): a client that stops reading at once holds two of these, not two chunks.
/// Costs three extra READs per large response (128 + 256 + 512 KiB before 1 MiB ones).
const START_CHUNK: usize = 128 << 10;

enum Kind {
    Empty,
    Once(Option<Bytes>),
    /// Bodies sent one after the other (`multipart/byteranges`, or an NFS body whose
    /// first READ was made before the status line).
    Parts(VecDeque<FileBody>),
    Sendfile {
        file: Arc<OpenFile>,
        offset: u64,
        end: u64,
        queue: SendQueue,
    },
    Stream {
        storage: Arc<dyn Storage>,
        handle: Handle,
        end: u64,
        remaining: u64,
        chunk: usize,
        depth: usize,
        /// READs in flight and frames in hyper, shared with the stall watchdog.
        state: Arc<Mutex<StreamState>>,
        /// Waiting for budget for the next READ (only when nothing is in flight).
        permit_wait: Option<PermitWait>,
        /// When the body started waiting for the front READ; the wait (not the READ's
        /// own duration, which overlaps with sending) is what the `read` phase counts.
        waiting_since: Option<Instant>,
    },
}

/// One READ in flight, with its share of [`crate::stream_budget::STREAM_BUDGET_BYTES`].
struct Read {
    offset: u64,
    task: ReadTask,
    permit: OwnedSemaphorePermit,
}

/// The part of a finished READ not yet handed to hyper (see [`FRAME_MAX`]), with what is
/// left of its budget.
struct Unsent {
    offset: u64,
    data: Bytes,
    permit: OwnedSemaphorePermit,
    /// Nothing of `data` has been handed yet (then it may go as it is, uncopied).
    whole: bool,
}

/// A frame handed to hyper: its budget share, which the watchdog can take back.
struct Ticket {
    handed: Instant,
    permit: Mutex<Option<OwnedSemaphorePermit>>,
    /// Where the share goes once hyper has written the frame (see [`Recycled`]).
    recycle: Arc<Mutex<Recycled>>,
}

impl Drop for Ticket {
    /// The frame was written (or dropped with its connection): its shared budget goes to
    /// its own body's next READ while that body keeps its share, else back to the budget.
    fn drop(&mut self) {
        let Some(permit) = self.permit.get_mut().take() else {
            return;
        };
        let mut slot = self.recycle.lock();
        if !slot.wanted || !Arc::ptr_eq(permit.semaphore(), &slot.shared) {
            return;
        }
        match &mut slot.permit {
            Some(kept) => kept.merge(permit),
            None => slot.permit = Some(permit),
        }
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
}

/// Shared budget that a streamed body's written frames gave back, kept for the body's
/// next READs instead of going back to the budget's queue — for bodies started while
/// [`MANY_STREAMS`] were alive. Such a body, while its client drains, keeps the share it
/// was granted until its last READ, so it waits for budget once, not once per READ:
/// with 1,000 stalled clients from four addresses queued for the budget, a download
/// that queued again for each of its ~14 READs waited for a round of stalled closes
/// ([`STALL_CLOSE_CONTENDED`]) more than once, 0.5–0.6 s in all (0.04–0.17 s keeping
/// its share). A READ then reads what the share covers (growing only from free budget),
/// which at a benchmark's concurrency, where bodies always queue for budget, meant
/// smaller READs and 10 % fewer 10 MiB requests/s: below [`MANY_STREAMS`] every READ
/// queues as before. A stalled body gives its share back ([`StreamState::release`]), as
/// does one with nothing left to read.
struct Recycled {
    permit: Option<OwnedSemaphorePermit>,
    /// The body was started past [`MANY_STREAMS`]: it keeps what its frames give back.
    keeps: bool,
    /// It may read again; when false a written frame's share goes straight back.
    wanted: bool,
    /// The body, woken while it waits in the budget's queue when a share comes back.
    waker: Option<std::task::Waker>,
    /// Only shares of this budget are kept (the stalled budget's go back).
    shared: Arc<Semaphore>,
}

impl Recycled {
    fn new(shared: Arc<Semaphore>, keeps: bool) -> Arc<Mutex<Recycled>> {
        Arc::new(Mutex::new(Recycled {
            permit: None,
            keeps,
            wanted: keeps,
            waker: None,
            shared,
        }))
    }
}

/// What a streamed body and its stall watchdog share.
struct StreamState {
    /// Bytes read and not yet handed to hyper; they come before every READ in flight.
    unsent: Option<Unsent>,
    /// READs in flight, in file order.
    inflight: VecDeque<Read>,
    /// Offset of the next READ to issue (rewound when read-ahead is dropped).
    next: u64,
    /// Frames handed to hyper that may not be written yet.
    frames: VecDeque<Weak<Ticket>>,
    /// Read-ahead allowed now (see [`START_DEPTH`]).
    depth: usize,
    /// Size of the next READ (see [`START_CHUNK`]).
    chunk: usize,
    /// The socket stopped draining: one chunk at a time until it drains.
    stalled: bool,
    /// The body is gone; the watchdog only waits for its last frames.
    closed: bool,
    /// The watchdog has been started.
    watched: bool,
    /// The connection, to close it when a stall holds shared budget too long.
    conn: SendQueue,
    /// The server's budgets (its storage's).
    budgets: Arc<StreamBudgets>,
    /// Budget the body's written frames gave back, for its next READs.
    recycled: Arc<Mutex<Recycled>>,
}

impl StreamState {
    /// Registers a frame about to be handed to hyper, holding `permit`.
    fn ticket(&mut self, permit: OwnedSemaphorePermit) -> Arc<Ticket> {
        let ticket = Arc::new(Ticket {
            handed: Instant::now(),
            permit: Mutex::new(Some(permit)),
            recycle: self.recycled.clone(),
        });
        self.frames.push_back(Arc::downgrade(&ticket));
        ticket
    }

    /// Up to `units` of the budget the body's written frames gave back, topped up from
    /// the shared budget if it is free now; `None` when nothing was given back.
    fn take_recycled(&mut self, units: u32) -> Option<OwnedSemaphorePermit> {
        let mut slot = self.recycled.lock();
        let kept = slot.permit.as_mut()?;
        let have = kept.num_permits();
        let want = units as usize;
        let mut permit = if have > want {
            kept.split(want).expect("fewer than held")
        } else {
            slot.permit.take().expect("checked above")
        };
        if have < want
            && let Ok(more) = self
                .budgets
                .shared
                .clone()
                .try_acquire_many_owned((want - have) as u32)
        {
            permit.merge(more);
        }
        Some(permit)
    }

    /// Frames still held by hyper.
    fn live_frames(&mut self) -> impl Iterator<Item = Arc<Ticket>> + '_ {
        self.frames.retain(|w| w.strong_count() > 0);
        self.frames.iter().filter_map(Weak::upgrade)
    }

    /// The next frame of [`StreamState::unsent`], registered as handed: what the socket
    /// can take now, at least [`FRAME_MAX`]. All of it (the READ's buffer as it is, on the
    /// READ's budget) when it fits; else a copy, so that a piece stuck in hyper pins only
    /// itself: on budget of its own, the READ's buffer staying here on the READ's budget
    /// (a stall drops it); or, with no budget free, on the READ's budget, and the rest
    /// is dropped and read again later (the buffer is freed, so every byte held stays
    /// counted).
    fn next_piece(&mut self) -> Option<(Bytes, Arc<Ticket>)> {
        let mut unsent = self.unsent.take()?;
        let len = unsent.data.len();
        let n = len.min(self.conn.send_room().max(FRAME_MAX));
        let (data, permit) = if n == len && unsent.whole {
            (unsent.data, unsent.permit)
        } else {
            let piece = Bytes::copy_from_slice(&unsent.data[..n]);
            let units = budget_units(n);
            match self.budgets.shared.clone().try_acquire_many_owned(units) {
                Ok(own) => {
                    unsent.data.advance(n);
                    if !unsent.data.is_empty() {
                        unsent.whole = false;
                        unsent.offset += n as u64;
                        self.unsent = Some(unsent);
                    }
                    (piece, own)
                }
                Err(_) => {
                    let mut permit = unsent.permit;
                    let keep = (units as usize).min(permit.num_permits());
                    let own = permit.split(keep).unwrap_or(permit);
                    if n < len {
                        // Nothing in flight comes before the dropped rest: read again
                        // from there (READs in flight after it are dropped too).
                        self.next = unsent.offset + n as u64;
                        for r in self.inflight.drain(..) {
                            r.task.abort();
                        }
                    }
                    (piece, own)
                }
            }
        };
        Some((data, self.ticket(permit)))
    }

    /// Gives back the budget of a body whose socket is not draining.
    fn release(&mut self) {
        self.stalled = true;
        self.recycled.lock().permit = None;
        for t in self.live_frames().collect::<Vec<_>>() {
            let mut permit = t.permit.lock();
            let Some(held) = permit.as_ref() else {
                continue;
            };
            let units = held.num_permits() as u32;
            let from_shared = Arc::ptr_eq(held.semaphore(), &self.budgets.shared);
            if from_shared && let Ok(p) = self.budgets.stalled.clone().try_acquire_many_owned(units)
            {
                *permit = Some(p);
            }
        }
        self.chunk = self.chunk.min(START_CHUNK);
        self.depth = self.depth.min(START_DEPTH);
        if let Some(first) = self.inflight.front() {
            self.next = first.offset;
        }
        if let Some(unsent) = self.unsent.take() {
            self.next = unsent.offset;
        }
        for r in self.inflight.drain(..) {
            r.task.abort();
        }
    }
}

/// Watches one streamed body: releases its budget when a frame sits unwritten in hyper
/// for [`STALL_AFTER`]; ends when the body is gone and hyper holds none of its budget.
async fn watchdog(state: Arc<Mutex<StreamState>>) {
    loop {
        tokio::time::sleep(STALL_CHECK).await;
        let mut st = state.lock();
        let mut stuck = false;
        let mut holding = false;
        let mut close = false;
        let budgets = st.budgets.clone();
        for t in st.live_frames() {
            let shared = t
                .permit
                .lock()
                .as_ref()
                .is_some_and(|p| Arc::ptr_eq(p.semaphore(), &budgets.shared));
            holding |= shared;
            stuck |= shared && t.handed.elapsed() >= STALL_AFTER;
            close |= shared && t.handed.elapsed() >= STALL_CLOSE_CONTENDED;
        }
        let idle = st.conn.idle_for();
        close &= idle >= STALL_CLOSE
            || (idle >= STALL_CLOSE_CONTENDED && budgets.waiters.load(Ordering::Relaxed) > 0);
        if close {
            tracing::debug!("stalled response holds shared budget: closing its connection");
            st.conn.abort();
        }
        let readahead = !st.inflight.is_empty();
        if stuck {
            tracing::debug!("client socket not draining: stream budget released");
            st.release();
        } else if st.closed && !holding && !readahead {
            return;
        }
    }
}

/// The body of every response httpd sends.
pub struct FileBody {
    kind: Kind,
    timing: Option<Arc<Timing>>,
    /// This body's end is the response's end (false for a part followed by others): only
    /// then does reaching it mark the request's timer complete.
    ends: bool,
    /// Marks the connection busy until the body is dropped.
    request: Option<InRequest>,
}

/// A frame that keeps the request timer alive — and its share of the stream budget
/// taken — until hyper has written it.
struct Owned {
    data: Bytes,
    _timing: Option<Arc<Timing>>,
    _budget: Option<Arc<Ticket>>,
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
            ends: true,
            request: None,
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
            ends: true,
            request: None,
        }
    }

    pub(crate) fn sendfile(
        file: Arc<OpenFile>,
        offset: u64,
        len: u64,
        queue: SendQueue,
    ) -> FileBody {
        FileBody {
            kind: Kind::Sendfile {
                file,
                offset,
                end: offset + len,
                queue,
            },
            timing: None,
            ends: true,
            request: None,
        }
    }

    pub(crate) fn stream(
        storage: Arc<dyn Storage>,
        handle: Handle,
        offset: u64,
        len: u64,
        chunk: usize,
        conn: SendQueue,
    ) -> FileBody {
        let depth = storage.read_ahead().max(1);
        let budgets = storage.stream_budgets();
        let many = budgets.streaming.fetch_add(1, Ordering::Relaxed) >= MANY_STREAMS;
        if many {
            conn.cap_unsent();
        }
        // Spliced READ data sits in pipes that a stalled socket's frame holds whole (they
        // cannot be split and taken back like bytes), so with splice a READ is at most
        // one frame: a stalled client holds 128 KiB, not 1 MiB.
        let chunk = if storage.splices() {
            chunk.min(FRAME_MAX)
        } else {
            chunk
        };
        FileBody {
            kind: Kind::Stream {
                storage,
                handle,
                end: offset + len,
                remaining: len,
                chunk,
                depth,
                state: Arc::new(Mutex::new(StreamState {
                    unsent: None,
                    inflight: VecDeque::new(),
                    next: offset,
                    frames: VecDeque::new(),
                    depth: START_DEPTH.min(depth),
                    chunk: START_CHUNK.min(chunk),
                    stalled: false,
                    closed: false,
                    watched: false,
                    conn,
                    recycled: Recycled::new(budgets.shared.clone(), many),
                    budgets,
                })),
                permit_wait: None,
                waiting_since: None,
            },
            timing: None,
            ends: true,
            request: None,
        }
    }

    /// `parts` sent in order as one body.
    pub(crate) fn parts(parts: Vec<FileBody>) -> FileBody {
        FileBody {
            kind: Kind::Parts(parts.into()),
            timing: None,
            ends: true,
            request: None,
        }
    }

    /// Holds `request` (the connection counts as busy) until the body is dropped.
    pub(crate) fn in_request(mut self, request: InRequest) -> FileBody {
        self.request = Some(request);
        self
    }

    pub(crate) fn with_timing(mut self, timing: Arc<Timing>) -> FileBody {
        self.share_timing(&timing);
        self
    }

    /// Gives this body the request's timer, and its sendfile, streamed and nested parts
    /// too (they hand it to their jobs and frames; bytes parts get it when their frame
    /// passes through, see `poll_parts`). Only the last part ends the response.
    fn share_timing(&mut self, timing: &Arc<Timing>) {
        if let Kind::Parts(parts) = &mut self.kind {
            let last = parts.len().saturating_sub(1);
            for (i, p) in parts.iter_mut().enumerate() {
                p.ends = self.ends && i == last;
                if matches!(
                    p.kind,
                    Kind::Sendfile { .. } | Kind::Stream { .. } | Kind::Parts(_)
                ) {
                    p.share_timing(timing);
                }
            }
        }
        self.timing = Some(timing.clone());
    }
}

impl FileBody {
    /// [`FileBody::poll_frame`] of a body made of parts: each part's frames in turn.
    fn poll_parts(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let Kind::Parts(parts) = &mut self.kind else {
            unreachable!("poll_parts on parts")
        };
        loop {
            let Some(front) = parts.front_mut() else {
                // A part may have marked the timer complete already (sendfile and
                // streamed parts do at their own end); this covers the rest.
                mark_complete(&self.timing, self.ends);
                return Poll::Ready(None);
            };
            match http_body::Body::poll_frame(Pin::new(&mut *front), cx) {
                Poll::Ready(None) => {
                    parts.pop_front();
                }
                Poll::Ready(Some(Ok(frame))) if front.timing.is_none() => {
                    // A bytes part: its frame keeps the request's timer alive too.
                    let frame = match frame.into_data() {
                        Ok(data) => Frame::data(Bytes::from_owner(Owned {
                            data,
                            _timing: self.timing.clone(),
                            _budget: None,
                        })),
                        Err(frame) => frame,
                    };
                    // hyper polls a body no more once it is at its end, so the None
                    // above never comes: its last bytes are handed over now.
                    if parts.iter().all(http_body::Body::is_end_stream) {
                        mark_complete(&self.timing, self.ends);
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                other => return other,
            }
        }
    }

    /// [`FileBody::poll_frame`] of a sendfile body: one marker frame per range, its job
    /// queued for the connection.
    fn poll_sendfile(&mut self) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let Kind::Sendfile {
            file,
            offset,
            end,
            queue,
        } = &mut self.kind
        else {
            unreachable!("poll_sendfile on a sendfile body")
        };
        if *offset >= *end {
            return Poll::Ready(None);
        }
        let n = (*end - *offset).min(MARKER_LEN as u64);
        let timing = self
            .timing
            .clone()
            .expect("a sendfile body always carries its timer");
        *offset += n;
        // Completion is marked by the connection when this last range has actually
        // been sent, not here.
        queue.lock().push_back(SendJob {
            source: Source::File {
                file: file.clone(),
                offset: *offset - n,
            },
            remaining: n,
            last: *offset >= *end && self.ends,
            timing,
        });
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
            &MARKER[..n as usize],
        )))))
    }

    /// [`FileBody::poll_frame`] of a streamed body: keeps its READs in flight and hands
    /// their bytes (or pipe markers) on in order.
    fn poll_stream(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let (timing, ends) = (&self.timing, self.ends);
        let Kind::Stream {
            storage,
            handle,
            end,
            remaining,
            chunk,
            depth,
            state,
            permit_wait,
            waiting_since,
        } = &mut self.kind
        else {
            unreachable!("poll_stream on a stream")
        };
        let mut st = state.lock();
        // Every frame handed to hyper so far has been written: the socket drains.
        if !st.frames.is_empty() && st.live_frames().next().is_none() {
            if st.stalled {
                st.stalled = false;
            } else {
                st.depth = (st.depth * 2).min(*depth);
                st.chunk = (st.chunk * 2).min(*chunk);
            }
        }
        let reads = start_reads(&mut st, cx, storage, handle, *end, permit_wait);
        match reads {
            Poll::Pending => {
                waiting_since.get_or_insert_with(Instant::now);
                return Poll::Pending;
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(())) => {}
        }
        {
            // Nothing left to read (until a stall rewinds): shares go back.
            let mut slot = st.recycled.lock();
            slot.wanted = slot.keeps && st.next < *end;
            if !slot.wanted {
                slot.permit = None;
            }
        }
        if !st.watched && !st.inflight.is_empty() {
            st.watched = true;
            tokio::spawn(watchdog(state.clone()));
        }
        if let Some((data, ticket)) = st.next_piece() {
            drop(st);
            *remaining -= data.len() as u64;
            if *remaining == 0 {
                mark_complete(timing, ends);
            }
            return Poll::Ready(Some(Ok(frame(timing, data, Some(ticket)))));
        }
        let Some(front) = st.inflight.front_mut() else {
            return Poll::Ready(None);
        };
        let res = match Pin::new(&mut front.task).poll(cx) {
            Poll::Pending => {
                waiting_since.get_or_insert_with(Instant::now);
                return Poll::Pending;
            }
            Poll::Ready(r) => r,
        };
        let read = st.inflight.pop_front().expect("front exists");
        let waited = waiting_since.take().map(|since| since.elapsed());
        let chunk = match res {
            Ok(Ok(chunk)) => chunk,
            Ok(Err(e)) => {
                let error = service::Chain(&e);
                tracing::warn!(%error, "read failed mid-body; closing the connection");
                return Poll::Ready(Some(Err(io::Error::other(e))));
            }
            Err(e) => return Poll::Ready(Some(Err(io::Error::other(e)))),
        };
        if let (Some(t), Some(waited)) = (timing, waited) {
            t.add_read(waited);
        }
        let chunk = match chunk {
            Chunk::Bytes(data) if data.len() > FRAME_MAX => {
                // Handed in pieces: the first now, the rest as hyper asks.
                st.unsent = Some(Unsent {
                    offset: read.offset,
                    data,
                    permit: read.permit,
                    whole: true,
                });
                let (data, ticket) = st.next_piece().expect("just stored");
                drop(st);
                *remaining -= data.len() as u64;
                if *remaining == 0 {
                    // The socket took the whole READ as one piece: the body's last.
                    mark_complete(timing, ends);
                }
                return Poll::Ready(Some(Ok(frame(timing, data, Some(ticket)))));
            }
            chunk => chunk,
        };
        let ticket = st.ticket(read.permit);
        let conn = st.conn.clone();
        drop(st);
        *remaining -= chunk.len() as u64;
        let data = match chunk {
            Chunk::Bytes(data) => {
                if *remaining == 0 {
                    mark_complete(timing, ends);
                }
                data
            }
            Chunk::Piped(piped) => {
                // The connection marks completion when it has spliced the last bytes,
                // as for sendfile.
                let n = piped.len();
                let timing = timing
                    .clone()
                    .expect("a streamed body always carries its timer");
                conn.lock().push_back(SendJob {
                    source: Source::Pipes(piped.parts.into()),
                    remaining: n as u64,
                    last: *remaining == 0 && ends,
                    timing,
                });
                Bytes::from_static(&MARKER[..n])
            }
        };
        Poll::Ready(Some(Ok(frame(timing, data, Some(ticket)))))
    }
}

/// Starts READs of a streamed body until `depth` are in flight, as far as the server's
/// stream budget allows; `Pending` while the body waits in the budget's queue.
fn start_reads(
    st: &mut StreamState,
    cx: &mut Context<'_>,
    storage: &Arc<dyn Storage>,
    handle: &Handle,
    end: u64,
    permit_wait: &mut Option<PermitWait>,
) -> Poll<io::Result<()>> {
    let depth = if st.stalled { 1 } else { st.depth };
    // Keep up to `depth` reads in flight so the next chunk is read while this one is
    // being sent, as far as the server's stream budget allows.
    while st.inflight.len() < depth && st.next < end {
        let mut len = (end - st.next).min(st.chunk as u64) as usize;
        let units = budget_units(len);
        let permit = if let Some(p) = st.take_recycled(units) {
            // Leave the budget's queue if the body was in it: it reads on the share it
            // already had (less than asked, a smaller READ).
            *permit_wait = None;
            len = len.min(p.num_permits() * BUDGET_UNIT);
            p
        } else if st.inflight.is_empty() && st.unsent.is_none() {
            // Nothing in flight: wait for budget (FIFO, so no body starves).
            let budgets = st.budgets.clone();
            let peer = st.conn.peer.get().copied();
            let wait = permit_wait.get_or_insert_with(|| wait_for_budget(budgets, units, peer));
            match wait.as_mut().poll(cx) {
                Poll::Pending => {
                    // A frame written meanwhile gives its share back to this body,
                    // which then stops waiting in the queue.
                    let mut slot = st.recycled.lock();
                    if slot.keeps {
                        slot.waker = Some(cx.waker().clone());
                        if slot.permit.is_some() {
                            // Given back since this poll looked.
                            cx.waker().wake_by_ref();
                        }
                    }
                    return Poll::Pending;
                }
                Poll::Ready(p) => {
                    *permit_wait = None;
                    match p {
                        Ok(p) => p,
                        Err(e) => return Poll::Ready(Err(io::Error::other(e))),
                    }
                }
            }
        } else {
            // Read-ahead only from budget that is free right now.
            match st.budgets.shared.clone().try_acquire_many_owned(units) {
                Ok(p) => p,
                Err(_) => break,
            }
        };
        let (storage, h, off) = (storage.clone(), handle.clone(), st.next);
        let task = tokio::spawn(async move { storage.read_chunk(&h, off, len, MARKER_LEN).await });
        st.inflight.push_back(Read {
            offset: off,
            task,
            permit,
        });
        st.next += len as u64;
    }
    Poll::Ready(Ok(()))
}

/// Marks the request's timer complete when this body's end is the response's end.
fn mark_complete(timing: &Option<Arc<Timing>>, ends: bool) {
    if let (Some(t), true) = (timing, ends) {
        t.set_complete();
    }
}

/// A data frame that keeps the request's timer (and `budget`) alive until written.
fn frame(timing: &Option<Arc<Timing>>, data: Bytes, budget: Option<Arc<Ticket>>) -> Frame<Bytes> {
    Frame::data(Bytes::from_owner(Owned {
        data,
        _timing: timing.clone(),
        _budget: budget,
    }))
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
            Kind::Parts(_) => this.poll_parts(cx),
            Kind::Once(data) => match data.take() {
                Some(d) => {
                    mark_complete(&this.timing, this.ends);
                    Poll::Ready(Some(Ok(frame(&this.timing, d, None))))
                }
                None => Poll::Ready(None),
            },
            Kind::Sendfile { .. } => this.poll_sendfile(),
            Kind::Stream { .. } => this.poll_stream(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Empty => true,
            Kind::Once(d) => d.is_none(),
            Kind::Parts(parts) => parts.iter().all(|p| p.is_end_stream()),
            Kind::Sendfile { offset, end, .. } => offset >= end,
            Kind::Stream { remaining, .. } => *remaining == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        let n = match &self.kind {
            Kind::Empty => 0,
            Kind::Once(d) => d.as_ref().map_or(0, |d| d.len() as u64),
            Kind::Parts(parts) => parts.iter().map(|p| p.size_hint().lower()).sum(),
            Kind::Sendfile { offset, end, .. } => end - offset,
            Kind::Stream { remaining, .. } => *remaining,
        };
        SizeHint::with_exact(n)
    }
}

impl Drop for FileBody {
    fn drop(&mut self) {
        if let Kind::Stream { state, .. } = &mut self.kind {
            let mut st = state.lock();
            st.closed = true;
            st.budgets.streaming.fetch_sub(1, Ordering::Relaxed);
            st.unsent = None;
            {
                let mut slot = st.recycled.lock();
                slot.wanted = false;
                slot.permit = None;
            }
            for r in st.inflight.drain(..) {
                r.task.abort();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream_budget::{STALLED_BUDGET_BYTES, STREAM_BUDGET_BYTES};
    use std::fs::File;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn marker_detection_is_by_address() {
        assert!(is_marker(&MARKER[..10]));
        assert!(is_marker(&MARKER[MARKER_LEN - 1..]));
        assert!(!is_marker(&MARKER[..0]));
        let zeros = vec![0u8; 10];
        assert!(!is_marker(&zeros));
    }

    /// Answers every READ at once; each byte names the [`START_CHUNK`] of the file it is in.
    struct Numbered;

    /// The largest READ [`Numbered`] was asked for.
    static LARGEST_READ: AtomicUsize = AtomicUsize::new(0);

    /// Checks that `frame`, at body offset `at`, holds the bytes [`Numbered`] gives there.
    fn assert_numbered(frame: &[u8], at: usize) {
        for (i, &b) in frame.iter().enumerate() {
            assert_eq!(b, ((at + i) / START_CHUNK) as u8, "frame at {at}, byte {i}");
        }
    }

    #[async_trait::async_trait]
    impl Storage for Numbered {
        async fn open(&self, _: &[String]) -> Result<crate::storage::Entry, StorageError> {
            Err(StorageError::NotFound)
        }
        async fn read(&self, _: &Handle, offset: u64, len: usize) -> Result<Bytes, StorageError> {
            LARGEST_READ.fetch_max(len, Ordering::Relaxed);
            let at = offset as usize;
            Ok((at..at + len).map(|p| (p / START_CHUNK) as u8).collect())
        }
        async fn list(
            &self,
            _: &crate::storage::Entry,
        ) -> Result<Vec<crate::storage::ListEntry>, StorageError> {
            Ok(Vec::new())
        }
        fn read_ahead(&self) -> usize {
            4
        }
        fn max_read(&self) -> usize {
            1 << 20
        }
        fn name(&self) -> &'static str {
            "numbered"
        }
    }

    /// [`Numbered`]'s bytes, with budgets of its own instead of the process-wide ones.
    struct OwnBudgets(Arc<StreamBudgets>);

    #[async_trait::async_trait]
    impl Storage for OwnBudgets {
        async fn open(&self, path: &[String]) -> Result<crate::storage::Entry, StorageError> {
            Numbered.open(path).await
        }
        async fn read(&self, h: &Handle, offset: u64, len: usize) -> Result<Bytes, StorageError> {
            Numbered.read(h, offset, len).await
        }
        async fn list(
            &self,
            e: &crate::storage::Entry,
        ) -> Result<Vec<crate::storage::ListEntry>, StorageError> {
            Numbered.list(e).await
        }
        fn read_ahead(&self) -> usize {
            Numbered.read_ahead()
        }
        fn max_read(&self) -> usize {
            Numbered.max_read()
        }
        fn name(&self) -> &'static str {
            "own-budgets"
        }
        fn stream_budgets(&self) -> Arc<StreamBudgets> {
            self.0.clone()
        }
    }

    /// Past [`MANY_STREAMS`] bodies alive at once, a new body caps its socket's unsent
    /// bytes; below it (a benchmark's concurrency) nothing is capped, and a body that
    /// ends makes room again.
    #[test]
    fn sockets_are_capped_only_past_many_streams() {
        let storage: Arc<dyn Storage> = Arc::new(OwnBudgets(StreamBudgets::new()));
        let handle = Handle::Local(Arc::new(OpenFile::new(File::open("/dev/null").unwrap())));
        let start = |conn: &SendQueue| {
            FileBody::stream(
                storage.clone(),
                handle.clone(),
                0,
                8 << 20,
                1 << 20,
                conn.clone(),
            )
        };
        let conns: Vec<SendQueue> = (0..MANY_STREAMS).map(|_| SendQueue::default()).collect();
        let mut bodies: Vec<FileBody> = conns.iter().map(start).collect();
        assert!(conns.iter().all(|c| !c.unsent_capped()));
        let past = SendQueue::default();
        bodies.push(start(&past));
        assert!(past.unsent_capped(), "body {} capped", MANY_STREAMS + 1);
        drop(bodies.drain(..2));
        let after = SendQueue::default();
        bodies.push(start(&after));
        assert!(!after.unsent_capped(), "room again once bodies ended");
        drop(bodies);
        assert_eq!(
            storage.stream_budgets().streaming.load(Ordering::Relaxed),
            0
        );
    }

    async fn next_frame(body: &mut FileBody) -> Bytes {
        let frame =
            std::future::poll_fn(|cx| http_body::Body::poll_frame(Pin::new(&mut *body), cx)).await;
        frame
            .expect("a frame")
            .expect("no error")
            .into_data()
            .expect("data")
    }

    /// The only test in this crate that streams from a storage without budgets of its own,
    /// so it owns the process-wide ones.
    #[tokio::test]
    async fn a_frame_left_unwritten_gives_its_budget_back() {
        const C: usize = START_CHUNK;
        let budgets = StreamBudgets::process_wide();
        let stalled_in_use =
            || STALLED_BUDGET_BYTES - budgets.stalled.available_permits() * BUDGET_UNIT;
        let stream_budget_in_use = || budgets.shared_in_use();
        let handle = Handle::Local(Arc::new(OpenFile::new(File::open("/dev/null").unwrap())));
        let conn = SendQueue::default();
        let mut body = FileBody::stream(Arc::new(Numbered), handle, 0, 8 << 20, 1 << 20, conn);
        let first = next_frame(&mut body).await;
        assert_eq!((first.len(), first[0]), (C, 0));
        // The frame (not yet written, as hyper would hold it) and one read-ahead.
        assert_eq!(stream_budget_in_use(), 2 * C);
        // The socket does not drain: the watchdog drops the read-ahead and moves the
        // frame to the stalled budget.
        tokio::time::sleep(STALL_AFTER + 3 * STALL_CHECK).await;
        assert_eq!((stream_budget_in_use(), stalled_in_use()), (0, C));
        drop(first);
        assert_eq!(stalled_in_use(), 0);
        // The socket drained: the dropped read-ahead is read again, and the body starts
        // over with small reads and little read-ahead.
        let second = next_frame(&mut body).await;
        assert_eq!((second.len(), second[0]), (C, 1));
        tokio::task::yield_now().await;
        assert_eq!(stream_budget_in_use(), 2 * C);
        drop(second);
        let third = next_frame(&mut body).await;
        assert_eq!((third.len(), third[0]), (C, 2));
        drop(third);
        // A draining socket: READs grow to 1 MiB, handed to hyper FRAME_MAX at a time
        // (this body has no socket to say it could take more).
        let mut at = 3 * C;
        while LARGEST_READ.load(Ordering::Relaxed) < 1 << 20 {
            let frame = next_frame(&mut body).await;
            assert!(frame.len() <= FRAME_MAX, "a {} byte frame", frame.len());
            assert_numbered(&frame, at);
            at += frame.len();
        }
        // No budget free for a copy in the middle of a READ: the piece goes on the READ's
        // own budget and the rest of the READ is dropped (read again, in order, later).
        let unsent_now = |body: &FileBody| match &body.kind {
            Kind::Stream { state, .. } => state.lock().unsent.is_some(),
            _ => false,
        };
        while !unsent_now(&body) {
            let frame = next_frame(&mut body).await;
            assert_numbered(&frame, at);
            at += frame.len();
        }
        let free = budgets.shared.available_permits() as u32;
        let taken = budgets.shared.clone().try_acquire_many_owned(free).unwrap();
        let piece = next_frame(&mut body).await;
        assert!(piece.len() <= FRAME_MAX, "a {} byte frame", piece.len());
        assert_numbered(&piece, at);
        at += piece.len();
        assert!(
            !unsent_now(&body),
            "the READ's rest was kept without budget"
        );
        // What is held now: the budget taken here and the piece, nothing for the rest.
        assert_eq!(
            stream_budget_in_use(),
            (taken.num_permits() + budget_units(piece.len()) as usize) * BUDGET_UNIT
        );
        drop((taken, piece));
        // A stall in the middle of a 1 MiB READ: what hyper holds (one frame) moves to
        // the stalled budget; the READ's unsent rest and the read-ahead are dropped.
        let held = next_frame(&mut body).await;
        assert_numbered(&held, at);
        at += held.len();
        tokio::time::sleep(STALL_AFTER + 3 * STALL_CHECK).await;
        assert_eq!((stream_budget_in_use(), stalled_in_use()), (0, held.len()));
        drop(held);
        // Drained again: the dropped bytes are read again, in order, to the end.
        while at < 8 << 20 {
            let frame = next_frame(&mut body).await;
            assert!(frame.len() <= FRAME_MAX, "a {} byte frame", frame.len());
            assert_numbered(&frame, at);
            at += frame.len();
        }
        assert_eq!(at, 8 << 20);
        drop(body);
        assert_eq!(stream_budget_in_use(), 0);
    }

    /// With the budget taken, a body of a second address waits behind the first waiting
    /// body of the first address, not behind all of them.
    #[tokio::test]
    async fn budget_waiters_take_turns_by_address() {
        let budgets = StreamBudgets::new();
        let all = (STREAM_BUDGET_BYTES / BUDGET_UNIT) as u32;
        let held = budgets
            .shared
            .clone()
            .acquire_many_owned(all)
            .await
            .unwrap();
        let (many, one): (std::net::IpAddr, std::net::IpAddr) =
            ([127, 0, 0, 2].into(), [127, 0, 0, 1].into());
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, ip) in [many, many, many, many, one].into_iter().enumerate() {
            let (budgets, order) = (budgets.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let permit = wait_for_budget(budgets, 1, Some(ip)).await.unwrap();
                order.lock().push(i);
                // Held a moment, then given back, as a READ would.
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(permit);
            }));
            // Queued in this order.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(budgets.waiters.load(Ordering::Relaxed), 5);
        // One unit free at a time.
        let mut held = held;
        for _ in 0..5 {
            drop(held.split(1));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for t in tasks {
            t.await.unwrap();
        }
        let order = order.lock().clone();
        assert_eq!(
            order[..2],
            [0, 4],
            "the other address's body went second: {order:?}"
        );
        assert_eq!(
            order[2..],
            [1, 2, 3],
            "in order within an address: {order:?}"
        );
        // The entries of addresses nobody waits for are dead, and pruned as the map grows.
        assert!(budgets.turns.lock().values().all(|t| t.strong_count() == 0));
    }
}

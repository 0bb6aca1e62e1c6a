//! The front door: allowlist at accept, connection cap, idle and request timeouts,
//! bounded record marking with one byte budget for every connection's buffers, and the
//! RPC header checks (RPC version, credential, program, version), made here once
//! ([`admit`]) for every call.
//!
//! Each accepted connection is read here, record by record, and each record goes
//! through [`step`], which decides in one place what it asks for: closing the connection
//! (not an RPC call), a refusal (the RFC 5531 error reply), READ — answered here, its
//! data sent from the file or copied into a budgeted reply buffer (`crate::nfs::read3`
//! builds both replies) — or any other call, answered by the in-process dispatcher
//! (`crate::nfs`) on the connection's own task. The fuzzing entry (`crate::fuzzing`)
//! takes the same [`step`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use latency::Registry;
use nfs3_types::nfs3::{fattr3, nfsstat3};
use oncrpc::Budget;
use oncrpc::msg::{self as rpcmsg, CallHeader};
use oncrpc::record::{RecordError, RecordReader};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tracing::{debug, warn};

use crate::buffers::{ReplyBuffers, trim_allocator, tune_allocator};
use crate::config::Config;
use crate::exports::{CallFrom, CallScope, Exports};
use crate::nfs::procs;
use crate::nfs::read3::{self, ReadArgs};
use crate::rpc::{NFS_PROG, PROGRAMS};

/// Shared state of the guard.
pub(crate) struct Guard {
    pub config: Arc<Config>,
    /// The exports (reloaded in place on SIGHUP): who is admitted, what READ reaches.
    pub fs: Exports,
    pub registry: Arc<Registry>,
    /// Answers every call the guard does not answer itself.
    pub nfs: crate::nfs::Dispatcher,
    /// One permit per open client connection (`max_connections`).
    pub permits: Arc<Semaphore>,
    /// Flips to `true` on shutdown; connections finish their in-flight calls and close.
    pub stopping: watch::Receiver<bool>,
    /// The one budget for every buffered byte of every connection (`--max-buffer-bytes`):
    /// records being received and READ replies being sent.
    pub budget: Budget,
    /// READ reply buffers, drawn from `budget`.
    pub buffers: ReplyBuffers,
    /// Connections closed so far; the allocator is trimmed after some close.
    pub closed: std::sync::atomic::AtomicU64,
    /// Every open connection, for closing the oldest idle one at the cap.
    pub slots: Slots,
    /// Slow calls in progress at once ([`SLOW_CALLS_AT_ONCE`]); the rest wait their turn
    /// in arrival order, on no thread.
    pub slow_calls: Semaphore,
    /// Where connections that send large records (1 MiB WRITEs) are served.
    pub bulk: BulkLane,
}

/// A runtime of its own for connections that send large records (see [`starts_bulk`]):
/// such a connection moves there as soon as the first one's record mark arrives, so its
/// records are read and its calls answered by other workers than everyone else's. Issue 31 §5: beside 1,000
/// clients writing 1 MiB FILE_SYNC blocks, another client's 10 MiB read spent its time
/// waiting for its connection's turn on the two workers (each READ took under 1 ms
/// once read; the victim's calls waited 1–140 ms each for it to be read), behind the
/// writers' tasks reading their records.
pub(crate) struct BulkLane(Option<tokio::runtime::Runtime>);

impl BulkLane {
    /// Starts the lane with as many workers as the main runtime's default (one per
    /// core). Without one (the runtime cannot be built) large calls stay where they are.
    pub(crate) fn start() -> BulkLane {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .thread_name("rustnfs-bulk")
            .enable_all()
            .build();
        match rt {
            Ok(rt) => BulkLane(Some(rt)),
            Err(e) => {
                warn!("no bulk lane (large WRITEs share the workers with every call): {e}");
                BulkLane(None)
            }
        }
    }

    /// No lane: every connection stays on the runtime that accepted it (the fuzzing
    /// entry, which serves one record at a time).
    pub(crate) fn none() -> BulkLane {
        BulkLane(None)
    }

    fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.0.as_ref().map(|rt| rt.handle())
    }
}

impl Drop for BulkLane {
    fn drop(&mut self) {
        // Dropped from async code (the last connection's task): never block there.
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// A record whose first fragment is at least this large moves its connection to the
/// [`BulkLane`]: only data carries that much (a WRITE of 64 KiB or more, in v3 or in a
/// COMPOUND), or a client that claims it does.
const BULK_RECORD: usize = 64 * 1024;

/// Whether the record `mark` (all of it read) starts moves its connection to the bulk
/// lane.
fn starts_bulk(mark: &[u8]) -> bool {
    let Ok(mark) = <[u8; oncrpc::record::MARK_LEN]>::try_from(mark) else {
        return false;
    };
    (u32::from_be_bytes(mark) & !oncrpc::record::LAST_FRAGMENT) as usize >= BULK_RECORD
}

/// Slow calls (see [`slow_call`]) run at most this many at once, as kernel nfsd serves
/// every call from 8 threads by default. Each runs on a thread of its own
/// (`block_in_place`), so without a bound 256 writers of 1 MiB FILE_SYNC blocks were 256
/// runnable threads, and the scheduler gave a reader's calls on 2 cores about 1/128 of
/// the CPU each: its 10 MiB read took just over the 1 s bar, and 3 of 4 runs failed it
/// on a loaded machine. A waiting call holds only the record it has read (budgeted).
pub(crate) const SLOW_CALLS_AT_ONCE: usize = 8;

/// One open connection as the connection cap sees it.
pub(crate) struct Slot {
    ip: std::net::IpAddr,
    /// When it began waiting for its next call (ms since [`Slots::epoch`]), or
    /// [`BUSY`] while a call is being read or answered.
    idle_since_ms: std::sync::atomic::AtomicU64,
    /// Told to close (it is the one that has waited longest for a call, and the cap is
    /// reached).
    evict: tokio::sync::Notify,
}

const BUSY: u64 = u64::MAX;

/// Removes a connection's [`Slot`] when dropped.
struct SlotClosed<'a>(&'a Slots, u64);

impl Drop for SlotClosed<'_> {
    fn drop(&mut self) {
        self.0.close(self.1);
    }
}

/// The open connections: at the cap, the oldest idle one is closed to make room (as
/// kernel nfsd's `svc_check_conn_limits` does) instead of refusing the newcomer, taken
/// from the address that holds the most connections, so one address cannot keep the
/// slots of everyone else.
#[derive(Default)]
pub(crate) struct Slots {
    epoch: std::sync::OnceLock<Instant>,
    next: std::sync::atomic::AtomicU64,
    open: parking_lot::Mutex<std::collections::HashMap<u64, Arc<Slot>>>,
}

impl Slots {
    fn now_ms(&self) -> u64 {
        self.epoch.get_or_init(Instant::now).elapsed().as_millis() as u64
    }

    /// Registers a connection from `ip` (busy until it first waits for a call).
    fn open(&self, ip: std::net::IpAddr) -> (u64, Arc<Slot>) {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let slot = Arc::new(Slot {
            ip: ip.to_canonical(),
            idle_since_ms: BUSY.into(),
            evict: tokio::sync::Notify::new(),
        });
        self.open.lock().insert(id, slot.clone());
        (id, slot)
    }

    fn close(&self, id: u64) {
        self.open.lock().remove(&id);
    }

    fn set_idle(&self, slot: &Slot, idle: bool) {
        let v = if idle { self.now_ms() } else { BUSY };
        slot.idle_since_ms
            .store(v, std::sync::atomic::Ordering::Relaxed);
    }

    /// Tells the idle connection to close that the cap should take back first: of the
    /// address holding the most connections, the one idle longest. `false` if none is
    /// idle.
    fn evict_one(&self) -> bool {
        use std::sync::atomic::Ordering;
        let open = self.open.lock();
        let mut per_ip: std::collections::HashMap<std::net::IpAddr, usize> =
            std::collections::HashMap::new();
        for s in open.values() {
            *per_ip.entry(s.ip).or_default() += 1;
        }
        let chosen = open
            .values()
            .filter_map(|s| {
                let since = s.idle_since_ms.load(Ordering::Relaxed);
                (since != BUSY).then(|| (per_ip[&s.ip], std::cmp::Reverse(since), s))
            })
            .max_by_key(|(n, since, _)| (*n, *since))
            .map(|(_, _, s)| s.clone());
        drop(open);
        match chosen {
            Some(s) => {
                // Marked busy so the next newcomer picks another one.
                s.idle_since_ms.store(BUSY, Ordering::Relaxed);
                s.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Why a connection was closed by the guard.
#[derive(Debug, thiserror::Error)]
enum Close {
    #[error("{0}")]
    Record(#[from] RecordError),
    #[error("request not completed within {0:?}")]
    Slow(Duration),
    #[error("no buffer budget within {0:?}")]
    NoBudget(Duration),
    #[error("not an ONC RPC call")]
    Garbage,
    #[error("idle longest when --max-connections was reached")]
    Evicted,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Accepts until `shutdown` resolves, then waits (bounded) for connections to drain.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    guard: Arc<Guard>,
    shutdown: impl Future<Output = ()>,
) {
    tune_allocator();
    let housekeeping = tokio::spawn(release_idle_memory(guard.clone()));
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok((sock, peer)) => {
                    if !guard.fs.admits(peer.ip()) {
                        warn!(%peer, "connection refused: not a client of any export (--allow or the exports file)");
                        drop(sock);
                        continue;
                    }
                    let permit = match guard.permits.clone().try_acquire_owned() {
                        Ok(p) => p,
                        Err(_) => match make_room(&guard).await {
                            Some(p) => p,
                            None => {
                                warn!(%peer, limit = guard.config.max_connections,
                                      "connection refused: --max-connections reached, none idle");
                                drop(sock);
                                continue;
                            }
                        },
                    };
                    tokio::spawn(main_lane(guard.clone(), sock, peer, permit));
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    housekeeping.abort();
}

/// At the connection cap: closes the oldest idle connection (see [`Slots`]) and waits,
/// briefly, for its permit. `None` when no connection is idle (all are in a call).
async fn make_room(guard: &Guard) -> Option<OwnedSemaphorePermit> {
    if !guard.slots.evict_one() {
        return None;
    }
    debug!("--max-connections reached: closing the oldest idle connection");
    tokio::time::timeout(
        Duration::from_secs(2),
        guard.permits.clone().acquire_owned(),
    )
    .await
    .ok()?
    .ok()
}

/// Once a second: frees warm READ buffers nobody used lately and, when memory was given
/// back (buffers freed, connections closed), trims the allocator so RSS follows.
async fn release_idle_memory(guard: Arc<Guard>) {
    use std::sync::atomic::Ordering;
    let mut closed_seen = 0;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let freed = guard.buffers.release_idle(crate::buffers::IDLE_RELEASE);
        let closed = guard.closed.load(Ordering::Relaxed);
        if freed > 0 || closed != closed_seen {
            closed_seen = closed;
            trim_allocator();
        }
    }
}

/// Each connection's own share, outside the budget: a call record of up to this many
/// bytes, and its reply up to [`crate::nfs::SMALL_REPLY`] (+ RPC header). Every call but
/// a large WRITE fits, so records claiming the whole budget (64 marks of 1 MiB, 256
/// bytes in all, stopped every client for 29 s) no longer stop anyone's small calls.
/// The fixed cost: at most 16 + 9 KiB per connection while it is in a call, nothing
/// while idle.
pub(crate) const CONNECTION_SHARE: usize = 16 * 1024;
/// The reply part of the connection's share.
const REPLY_SHARE: usize =
    crate::nfs::SMALL_REPLY + oncrpc::record::MARK_LEN + rpcmsg::ACCEPTED_HEADER_LEN;

/// How this server reads client records: bounded by `--max-record`, the idle and request
/// timeouts; a record larger than the connection's share has its claim granted from the
/// shared budget before its first byte.
pub(crate) fn record_reader(guard: &Guard) -> RecordReader {
    let cfg = &guard.config;
    RecordReader {
        max_record: cfg.max_record,
        idle_timeout: Some(cfg.idle_timeout),
        record_timeout: Some(cfg.request_timeout),
        budget: Some(guard.budget.clone()),
        share: CONNECTION_SHARE,
        trust_lengths: false,
    }
}

/// A connection accepted on the main runtime: served there until it sends a large
/// record, then, if there is a bulk lane, moved to it for the rest of its life.
async fn main_lane(
    guard: Arc<Guard>,
    sock: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
) {
    let Some((sock, permit, mark)) = connection(guard.clone(), sock, peer, permit, None).await
    else {
        return;
    };
    let Some(bulk) = guard.bulk.handle().cloned() else {
        return;
    };
    bulk.spawn(async move {
        // Registered again with the lane's own reactor, so its readiness wakes the
        // lane's workers.
        match TcpStream::from_std(sock) {
            Ok(sock) => {
                connection(guard, sock, peer, permit, Some(mark)).await;
            }
            Err(e) => debug!(%peer, "cannot move the connection to the bulk lane: {e}"),
        }
    });
}

/// Serves one connection until it closes. On the main runtime (`pending` is `None`),
/// when there is a bulk lane, only until a large record's mark arrives: then it returns
/// the socket, its permit and that mark for [`main_lane`] to move; on the lane, that
/// mark is `pending`, the first record's.
async fn connection(
    guard: Arc<Guard>,
    sock: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    mut pending: Option<[u8; oncrpc::record::MARK_LEN]>,
) -> Option<Moved> {
    let movable = pending.is_none() && guard.bulk.handle().is_some();
    debug!(%peer, "connection accepted");
    let (slot_id, slot) = guard.slots.open(peer.ip());
    // Leaves the cap's view however the task ends (an unwinding panic included).
    let _slot_closed = SlotClosed(&guard.slots, slot_id);
    tune_socket(&sock, peer);
    // No read buffer of its own: an idle connection holds a socket and a task, nothing
    // more; each record's buffer is drawn from the shared budget and freed after its call
    // (a large one kept for the next call while calls come back to back: `SPARE_KEEP`).
    let (mut rd, wr) = sock.into_split();
    // A record waiting for budget is not reading its socket; this tells it that the peer
    // reset the connection, so its half-read record's budget goes back at once.
    let peer_gone = peer_gone(&rd);
    // Replies are written one whole record at a time, by this task: no task hop.
    let out: ClientWriter = Arc::new(tokio::sync::Mutex::new(wr));
    let reader = record_reader(&guard);
    let mut stopping = guard.stopping.clone();
    let cfg = guard.config.clone();
    // The last large call's record, kept for the next one (see `keep_spare`).
    let mut spare: Option<oncrpc::record::Record> = None;
    let result: Result<Ended, Close> = async {
        loop {
            // Waiting for a call: idle, the first to be closed at the cap.
            guard.slots.set_idle(&slot, true);
            let mut mark = [0u8; oncrpc::record::MARK_LEN];
            let idle_until = tokio::time::Instant::now() + cfg.idle_timeout;
            let have = if let Some(m) = pending.take() {
                mark = m;
                mark.len()
            } else { loop {
                let kept = spare.is_some();
                tokio::select! {
                    // The wait reads the next call's mark itself (a `read` is cancel-safe:
                    // a branch that wins first consumed nothing), so a call costs one
                    // `recv` for the wait and the mark, not a peek and a read. Not
                    // `readable()`: readiness can outlive the bytes of the last call, and
                    // a connection that looks busy is never taken back.
                    r = tokio::time::timeout_at(idle_until, rd.read(&mut mark)) => match r {
                        Err(_) => return Err(Close::Record(RecordError::Idle(cfg.idle_timeout))),
                        // A clean end between calls.
                        Ok(Ok(0)) => return Ok(Ended::Closed),
                        Ok(r) => break r?,
                    },
                    // The spare goes back as soon as anyone waits for budget, and after
                    // a short wait for a next call: an idle connection holds no buffer.
                    _ = guard.budget.wanted(), if kept => spare = None,
                    _ = tokio::time::sleep(SPARE_KEEP), if kept => spare = None,
                    _ = slot.evict.notified() => return Err(Close::Evicted),
                    _ = stopping.wait_for(|s| *s) => return Ok(Ended::Closed),
                }
            }};
            if movable && starts_bulk(&mark[..have]) {
                return Ok(Ended::ToBulk(mark));
            }
            guard.slots.set_idle(&slot, false);
            let record = tokio::select! {
                r = reader.read_after(&mut rd, (mark, have), peer_gone, spare.take()) => r?,
                _ = stopping.wait_for(|s| *s) => return Ok(Ended::Closed),
            };
            let start = Instant::now();
            // RFC 5531: every call gets an answer, a refused one included.
            let header = match step(&record, cfg.allow_auth_none) {
                Step::Close => return Err(Close::Garbage),
                Step::Refuse { xid, op, rejection } => {
                    debug!(%peer, op, "call refused: {}", rejection.label());
                    send(&out, &rejection.record(xid), cfg.request_timeout).await?;
                    guard
                        .registry
                        .record_op(op, "total", rejection.label(), start.elapsed(), 0);
                    continue;
                }
                Step::Read { header, args } => {
                    let caller = guard.nfs.caller(&header);
                    read(&guard, header.xid, (&caller, peer), &args, start, &out).await?;
                    continue;
                }
                Step::Dispatch(header) => header,
            };
            // Every other call: answered in process, on this task. A client that stops
            // reading is closed when a reply cannot be sent within the request timeout,
            // so it never holds more than one reply. A reply larger than the
            // connection's share (READDIR, READDIRPLUS) has its budget granted before it
            // is built, at its bound: built first, 200 unread READDIRPLUS replies held
            // 166 MB against a 4 MiB budget.
            // An NFSv4 READ that ends its COMPOUND leaves its data for `send_reply`.
            let tails = sendfile_enabled();
            let bound = crate::nfs::Dispatcher::reply_bound(&header, &record, tails);
            // A large reply's buffer comes from the warm set READ replies use (with its
            // budget): NFSv4 READs are COMPOUND replies, and a fresh 1 MiB buffer per
            // call (mapped, faulted in, unmapped) held v4 READ at 0.6 × Ganesha.
            let mut large = large_reply_buffer(&guard, bound).await?;
            // A small reply starts with room for the common ones (a CREATE's is ~300
            // bytes), so building it does not reallocate at every few XDR words.
            let mut small = Vec::new();
            let reply = match large.as_mut() {
                Some(b) => &mut b.buf,
                None => {
                    small.reserve(512);
                    &mut small
                }
            };
            let slow = slow_call(&header, &record);
            let turn = if slow {
                tokio::select! {
                    p = guard.slow_calls.acquire() => p.ok(),
                    _ = stopping.wait_for(|s| *s) => return Ok(Ended::Closed),
                }
            } else {
                None
            };
            let tail = off_the_workers(slow, || {
                guard
                    .nfs
                    .dispatch_tailed(&header, &record, reply, (peer, slot_id), tails)
            });
            drop(turn);
            spare = keep_spare(record);
            if let Some(b) = large.as_mut() {
                b.settle();
            }
            let reply: &[u8] = large.as_ref().map_or(&small, |b| &b.buf);
            if reply.len() > bound {
                warn!(%peer, "reply of {} bytes over its bound of {bound}", reply.len());
            }
            send_reply(&guard, &out, reply, tail).await?;
            if let Some(b) = large {
                guard.buffers.put(b);
            }
        }
    }
    .await;
    if let Ok(Ended::ToBulk(mark)) = result {
        return detach(rd, out, peer).map(|sock| (sock, permit, mark));
    }
    close_connection(&out, peer, &result).await;
    guard
        .closed
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    drop(permit);
    None
}

/// Logs how a connection ended (a client's own leaving at debug level, the guard's
/// closing at warn) and shuts its socket down, waiting at most a second.
async fn close_connection(out: &ClientWriter, peer: SocketAddr, result: &Result<Ended, Close>) {
    match result {
        Ok(_) => debug!(%peer, "connection closed"),
        Err(e @ (Close::Record(RecordError::Idle(_) | RecordError::Truncated) | Close::Io(_))) => {
            debug!(%peer, "connection closed: {e}")
        }
        Err(Close::Record(RecordError::Io(e))) => debug!(%peer, "connection closed: {e}"),
        Err(e @ Close::Evicted) => debug!(%peer, "connection closed: {e}"),
        Err(e) => warn!(%peer, "connection closed by the guard: {e}"),
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        out.lock().await.shutdown().await
    })
    .await;
}

/// The socket of a connection leaving for the bulk lane, its halves joined again and
/// out of this runtime's reactor; `None` (the connection is closed) if that fails.
fn detach(
    rd: tokio::net::tcp::OwnedReadHalf,
    out: ClientWriter,
    peer: SocketAddr,
) -> Option<std::net::TcpStream> {
    // Nothing else holds the writer: replies are written by the connection's task alone.
    let moved = Arc::try_unwrap(out)
        .ok()
        .map(tokio::sync::Mutex::into_inner)
        .and_then(|wr| rd.reunite(wr).ok())
        .and_then(|sock| sock.into_std().ok());
    match moved {
        Some(_) => debug!(%peer, "connection moved to the bulk lane"),
        None => warn!(%peer, "connection closed: it could not be moved to the bulk lane"),
    }
    moved
}

/// How a connection's loop ended without an error.
enum Ended {
    /// The client closed it, or the server is stopping.
    Closed,
    /// A large record's mark came (read, the record not): to the bulk lane.
    ToBulk([u8; oncrpc::record::MARK_LEN]),
}

/// A connection leaving for the bulk lane: its socket, its permit, the mark read.
type Moved = (
    std::net::TcpStream,
    OwnedSemaphorePermit,
    [u8; oncrpc::record::MARK_LEN],
);

/// Disables Nagle (a reply goes out whole at once) and enlarges the send buffer, so a
/// 1 MiB READ reply is handed to the kernel in one call.
fn tune_socket(sock: &TcpStream, peer: SocketAddr) {
    use std::os::fd::AsFd;
    let _ = sock.set_nodelay(true);
    if let Err(e) = crate::sys::set_send_buffer(sock.as_fd(), 4 << 20) {
        debug!(%peer, "cannot enlarge the send buffer: {e}");
    }
}

/// Whether the peer of `rd`'s socket reset the connection, asked without reading it.
fn peer_gone(rd: &tokio::net::tcp::OwnedReadHalf) -> impl Fn() -> bool + Copy + use<> {
    let sock_fd = {
        use std::os::fd::{AsFd, AsRawFd};
        rd.as_ref().as_fd().as_raw_fd()
    };
    move || {
        // SAFETY: `rd` owns the descriptor and outlives every call (they happen inside
        // `reader.read_reusing(&mut rd, ..)`).
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(sock_fd) };
        crate::sys::tcp_closed(fd)
    }
}

/// The buffer of a reply whose `bound` is larger than the connection's share, from the
/// warm set with its budget; `None` for a reply that fits the share.
async fn large_reply_buffer(
    guard: &Guard,
    bound: usize,
) -> Result<Option<crate::buffers::ReplyBuf>, Close> {
    if bound <= REPLY_SHARE {
        return Ok(None);
    }
    let limit = guard.config.request_timeout;
    match tokio::time::timeout(limit, guard.buffers.get(bound)).await {
        Ok(Ok(b)) => Ok(Some(b)),
        Ok(Err(e)) => Err(Close::Record(e.into())),
        Err(_) => Err(Close::NoBudget(limit)),
    }
}

/// How long a connection keeps its last large record's buffer while it waits for the
/// next call. A client writing 1 MiB blocks sends its next WRITE within a round trip of
/// the reply; one that pauses longer, or anyone waiting for budget meanwhile, costs the
/// spare (and a fresh buffer for the next large call).
const SPARE_KEEP: Duration = Duration::from_millis(200);

/// The record to keep as the connection's spare: one read into budgeted bytes beyond the
/// connection's share (a large WRITE), whose buffer the next one reuses instead of
/// mapping, faulting in and unmapping a fresh 1 MiB (strace showed mmap, mremap and
/// munmap per WRITE). Small records are not kept: they cost a small heap allocation.
fn keep_spare(record: oncrpc::record::Record) -> Option<oncrpc::record::Record> {
    let budgeted = record.grant.as_ref().is_some_and(|g| g.bytes() > 0);
    (budgeted && record.data.capacity() > CONNECTION_SHARE).then_some(record)
}

/// Calls whose file-system work can take long (a directory listed and every entry
/// stat'ed, data written and synced): run where they do not hold up a runtime worker.
/// On the workers, 64 READDIRPLUS of 1 MiB (each ~3,000 entries stat'ed) or a few
/// hundred 1 MiB FILE_SYNC WRITEs kept both workers busy, and every other client's calls
/// waited behind them for seconds.
///
/// Which calls are slow is each procedure's row's slow-call class (`crate::nfs::procs`).
fn slow_call(h: &CallHeader<'_>, record: &[u8]) -> bool {
    procs::of(h).is_some_and(|p| p.is_slow(record.get(h.args..).unwrap_or_default()))
}

/// Runs `f` with the worker handing its other tasks to another thread while it runs
/// (`block_in_place`), when `slow` and the runtime has several workers; else inline.
fn off_the_workers<R>(slow: bool, f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let multi =
        Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
    if slow && multi {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// Why [`admit`] refused a record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not an ONC RPC call at all: nothing to answer, the connection is closed.
    Garbage,
    /// A call refused before any procedure runs; `op` names it for the metrics.
    Reply {
        xid: u32,
        op: &'static str,
        rejection: rpcmsg::Rejection,
    },
}

/// The front door's checks, made here and only here for every call: a header `oncrpc`
/// can read, RPC version 2, a credential and verifier this server accepts, a program
/// and version it speaks, and — unless `allow_auth_none` (`--allow-auth-none`) — no NFS
/// procedure but NULL under AUTH_NONE (`AUTH_TOOWEAK`, as NFS-Ganesha with `SecType =
/// sys`; MOUNT and the portmapper, which clients probe with AUTH_NONE, take it). A
/// header that passes is one the procedures may run.
pub(crate) fn admit(
    record: &[u8],
    allow_auth_none: bool,
) -> Result<rpcmsg::CallHeader<'_>, Refusal> {
    let header = rpcmsg::decode_call(record).map_err(|e| match e.rejection() {
        Some((xid, rejection)) => Refusal::Reply {
            xid,
            op: "OTHER",
            rejection,
        },
        None => Refusal::Garbage,
    })?;
    header
        .check(&PROGRAMS)
        .map_err(|rejection| Refusal::Reply {
            xid: header.xid,
            op: procs::call_name(header.prog, header.vers, header.proc_),
            rejection,
        })?;
    if !allow_auth_none
        && header.cred.flavor == rpcmsg::flavor::AUTH_NONE
        && header.prog == NFS_PROG
        && header.proc_ != 0
    {
        return Err(Refusal::Reply {
            xid: header.xid,
            op: procs::call_name(header.prog, header.vers, header.proc_),
            rejection: rpcmsg::Rejection::Auth(rpcmsg::AuthStat::TooWeak),
        });
    }
    Ok(header)
}

/// What one record asks of its connection, decided by [`step`].
pub(crate) enum Step<'r> {
    /// Not an ONC RPC call: nothing to answer, the connection is closed.
    Close,
    /// Refused before any procedure runs: the reply is `rejection`'s record; `op` names
    /// the call for the metrics.
    Refuse {
        xid: u32,
        op: &'static str,
        rejection: rpcmsg::Rejection,
    },
    /// READ with its arguments decoded: answered by a data path (see [`read3`]).
    Read {
        header: CallHeader<'r>,
        args: ReadArgs<'r>,
    },
    /// Any other admitted call: answered by the dispatcher.
    Dispatch(CallHeader<'r>),
}

/// The per-record path, in order: [`admit`]'s header checks, then READ (its arguments
/// decoded here, GARBAGE_ARGS when they do not), then every other call. The guard and
/// the fuzzing entry both take it, so the order exists once.
pub(crate) fn step(record: &[u8], allow_auth_none: bool) -> Step<'_> {
    let header = match admit(record, allow_auth_none) {
        Ok(h) => h,
        Err(Refusal::Garbage) => return Step::Close,
        Err(Refusal::Reply { xid, op, rejection }) => return Step::Refuse { xid, op, rejection },
    };
    let Some(read) = procs::of(&header).filter(|p| p.data_path) else {
        return Step::Dispatch(header);
    };
    match ReadArgs::parse(&record[header.args..]) {
        Ok(args) => Step::Read { header, args },
        Err(_) => Step::Refuse {
            xid: header.xid,
            op: read.name,
            rejection: rpcmsg::Rejection::GarbageArgs,
        },
    }
}

/// The client's write half.
type ClientWriter = Arc<tokio::sync::Mutex<OwnedWriteHalf>>;

/// Writes one whole record to the client; a client that does not read it within
/// `limit` is closed (it would otherwise hold its task and replies forever).
async fn send(out: &ClientWriter, record: &[u8], limit: Duration) -> Result<(), Close> {
    let mut w = out.lock().await;
    match tokio::time::timeout(limit, w.write_all(record)).await {
        Err(_) => Err(Close::Slow(limit)),
        Ok(r) => Ok(r?),
    }
}

/// Sends a dispatcher's reply record, and then the data of the NFSv4 READ that ends
/// it (`tail`, counted by the record's mark) from the file with `sendfile`, as v3 READ
/// data leaves ([`read_sendfile`]).
async fn send_reply(
    guard: &Guard,
    out: &ClientWriter,
    reply: &[u8],
    tail: Option<crate::nfs4::ReadTail>,
) -> Result<(), Close> {
    let limit = guard.config.request_timeout;
    let Some(t) = tail else {
        return send(out, reply, limit).await;
    };
    let sent = send_file(out, reply, &t.file, t.offset, t.len, t.pad(), limit).await;
    // As `read_sendfile` records it: a client gone is not the file's failure.
    let vfs = match &sent {
        Err(Close::Io(e)) if !client_gone(e) => Err(nfsstat3::NFS3ERR_IO),
        _ => Ok(t.len as u64),
    };
    guard.fs.record_read(&t.fh, t.vfs_start, vfs);
    sent
}

/// READ, answered here rather than by the dispatcher: the data is sent from the file
/// (`sendfile`) or read straight into a reply buffer from the shared budget (one copy),
/// which goes back to the warm set once sent; the dispatcher would build the reply in a
/// `Vec` of its own first. See the README's design notes for the measurement.
///
/// The caller's read permission is checked as knfsd checks it (`DirFs::may_read`):
/// the file-system calls that decide it run synchronously inside the caller's
/// [`crate::identity::Scope`], which never spans an `.await`.
async fn read(
    guard: &Guard,
    xid: u32,
    (caller, peer): (&crate::identity::Caller, SocketAddr),
    a: &ReadArgs<'_>,
    start: Instant,
    out: &ClientWriter,
) -> Result<(), Close> {
    let limit = guard.config.request_timeout;
    // Who is calling, for the calls below (never across an `.await`).
    let calling = || {
        (
            CallScope::enter(CallFrom {
                peer: Some(peer),
                v4: false,
            }),
            crate::identity::Scope::enter(caller.clone()),
        )
    };
    let opened = sendfile_enabled()
        .then(|| {
            let _call = calling();
            let fh = guard.fs.decode(a.fh).ok()?;
            let (attr, file) = guard.fs.open_read(&fh).ok()?;
            Some((fh, attr, file))
        })
        .flatten();
    if let Some((fh, attr, file)) = opened {
        // Errors fall through to the copy path below, which builds their replies.
        return read_sendfile(guard, xid, a, (&fh, attr), &file, start, out).await;
    }
    let mut reply =
        match tokio::time::timeout(limit, guard.buffers.get(read3::reply_capacity(a))).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => return Err(Close::Record(e.into())),
            Err(_) => return Err(Close::NoBudget(limit)),
        };
    let status = {
        let _call = calling();
        read3::reply(&guard.fs, xid, a, &mut reply.buf)
    };
    let bytes = reply.buf.len() as u64;
    send(out, &reply.buf, limit).await?;
    guard.buffers.put(reply);
    guard
        .registry
        .record_op(procs::READ.name, "total", status, start.elapsed(), bytes);
    Ok(())
}

/// Whether READ data leaves with `sendfile` (the default) or is copied into a reply
/// buffer first (`RUSTNFS_READ_SENDFILE=0`, kept to measure one against the other).
fn sendfile_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("RUSTNFS_READ_SENDFILE")
            .map_or(true, |v| crate::config::parse_bool(&v).unwrap_or(true))
    })
}

/// READ with the data sent by `sendfile` from the file, after the RPC header and the
/// READ3res head (as knfsd's splice read does): no copy through this process, and no
/// reply buffer at all, so a READ holds ~150 bytes of memory instead of 1 MiB.
async fn read_sendfile(
    guard: &Guard,
    xid: u32,
    a: &ReadArgs<'_>,
    (fh, attr): (&crate::fs::Fh, fattr3),
    file: &std::fs::File,
    start: Instant,
    out: &ClientWriter,
) -> Result<(), Close> {
    let vfs_start = Instant::now();
    let count = u64::from(a.max_data());
    let n = count.min(attr.size.saturating_sub(a.offset));
    let eof = a.offset + n >= attr.size;
    let pad = read3::pad(n as usize);
    let Ok(head) = read3::data_follows_head(xid, attr, n as u32, eof) else {
        return Err(Close::Io(std::io::Error::other("cannot pack a READ reply")));
    };
    let limit = guard.config.request_timeout;
    let sent = send_file(out, &head, file, a.offset, n as usize, pad, limit).await;
    // A client that left or stopped reading ends the connection; the file was read as
    // far as it took, so the vfs phase is not an I/O error for it (the copy path records
    // the read before its send the same way). Only the file's own failures are.
    let vfs = match &sent {
        Err(Close::Io(e)) if !client_gone(e) => Err(nfsstat3::NFS3ERR_IO),
        _ => Ok(n),
    };
    guard.fs.record_read(fh, vfs_start, vfs);
    sent?;
    let bytes = (head.len() + n as usize + pad) as u64;
    guard
        .registry
        .record_op(procs::READ.name, "total", "ok", start.elapsed(), bytes);
    Ok(())
}

/// Whether a send failed because the client closed or reset its end of the connection.
fn client_gone(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        e.kind(),
        K::BrokenPipe | K::ConnectionReset | K::ConnectionAborted | K::NotConnected
    )
}

/// Writes `head`, then `n` bytes of `file` from `offset` with `sendfile`, then `pad` zero
/// bytes, as one record, within `limit`. A file that shrank meanwhile (fewer bytes than
/// announced) leaves the record unfinishable: the connection is closed and the client
/// retransmits.
async fn send_file(
    out: &ClientWriter,
    head: &[u8],
    file: &std::fs::File,
    offset: u64,
    n: usize,
    pad: usize,
    limit: Duration,
) -> Result<(), Close> {
    use std::os::fd::AsRawFd;
    use tokio::io::Interest;
    let w = out.lock().await;
    let sock: &TcpStream = (*w).as_ref();
    let fd = sock.as_raw_fd();
    let file_fd = file.as_raw_fd();
    let cvt = |r: isize| {
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    };
    // `more`: the header waits for the data (MSG_MORE), so both leave in one segment.
    let send_all = async |bytes: &[u8], more: bool| -> std::io::Result<()> {
        let flags = libc::MSG_NOSIGNAL | if more { libc::MSG_MORE } else { 0 };
        let mut done = 0;
        while done < bytes.len() {
            sock.writable().await?;
            let rest = &bytes[done..];
            // SAFETY: a valid socket and a live slice.
            match sock.try_io(Interest::WRITABLE, || {
                cvt(unsafe { libc::send(fd, rest.as_ptr().cast(), rest.len(), flags) })
            }) {
                Ok(k) => done += k,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    };
    let all = async {
        send_all(head, n > 0 || pad > 0).await?;
        let mut off = offset as libc::off_t;
        let mut left = n;
        while left > 0 {
            sock.writable().await?;
            // SAFETY: valid descriptors and a live offset.
            match sock.try_io(Interest::WRITABLE, || {
                cvt(unsafe { libc::sendfile(fd, file_fd, &mut off, left) })
            }) {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the file shrank during a READ",
                    ));
                }
                Ok(k) => left -= k,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        send_all(&[0; 3][..pad], false).await
    };
    match tokio::time::timeout(limit, all).await {
        Err(_) => Err(Close::Slow(limit)),
        Ok(r) => Ok(r?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc;

    /// A call record: header (RPC version `rpcvers`), credential `cred` (flavour + body),
    /// verifier `verf`, no arguments.
    fn call(rpcvers: u32, prog: u32, vers: u32, cred: &[u32], verf: &[u32]) -> Vec<u8> {
        [9, 0, rpcvers, prog, vers, 0]
            .iter()
            .chain(cred)
            .chain(verf)
            .flat_map(|w| w.to_be_bytes())
            .collect()
    }

    /// The refusal of `rec` and its reply record's words after the mark.
    fn refused(rec: &[u8]) -> (rpcmsg::Rejection, &'static str, Vec<u32>) {
        refused_with(rec, true)
    }

    /// [`refused`], AUTH_NONE allowed or not.
    fn refused_with(
        rec: &[u8],
        allow_auth_none: bool,
    ) -> (rpcmsg::Rejection, &'static str, Vec<u32>) {
        let Err(Refusal::Reply { xid, op, rejection }) = admit(rec, allow_auth_none) else {
            panic!("admitted")
        };
        assert_eq!(xid, 9);
        let wire = rejection.record(xid);
        let mut rd = &wire[..];
        let body = oncrpc::record::read_blocking(&mut rd, wire.len()).unwrap();
        assert!(rd.is_empty(), "one whole record");
        assert_eq!(rpcmsg::decode_reply(&body).unwrap().status, Err(rejection));
        let words = body
            .chunks(4)
            .map(|b| u32::from_be_bytes(b.try_into().unwrap()))
            .collect();
        (rejection, op, words)
    }

    #[test]
    fn admit_follows_rfc_5531() {
        use oncrpc::msg::AuthStat;
        use rpcmsg::Rejection;
        let none = [0, 0];
        let root = [1, 20, 0, 0, 0, 0, 0]; // AUTH_SYS: stamp, no name, uid 0, gid 0, no gids
        // AUTH_NONE and AUTH_SYS, to every program and version offered (NULL: `call`
        // makes procedure 0, which AUTH_NONE may always call).
        for (prog, vers) in [(NFS_PROG, 3), (rpc::MOUNT_PROG, 3), (rpc::PMAP_PROG, 2)] {
            for cred in [&none[..], &root[..]] {
                let rec = call(2, prog, vers, cred, &none);
                let h = admit(&rec, false).unwrap();
                assert_eq!((h.xid, h.prog, h.vers, h.args), (9, prog, vers, rec.len()));
            }
        }
        // RPC version 3: MSG_DENIED / RPC_MISMATCH (2..2).
        let (r, op, w) = refused(&call(3, NFS_PROG, 3, &root, &none));
        assert_eq!(
            (r, op, &w[1..]),
            (Rejection::RpcMismatch, "NULL", &[1, 1, 0, 2, 2][..])
        );
        // An unknown flavour (RPCSEC_GSS), a truncated AUTH_SYS, a non-empty AUTH_NONE,
        // a verifier that is not AUTH_NONE: MSG_DENIED / AUTH_ERROR.
        for (cred, verf, why) in [
            (&[6, 0][..], &none[..], AuthStat::RejectedCred),
            (&[1, 4, 0][..], &none[..], AuthStat::BadCred),
            (&[0, 4, 0][..], &none[..], AuthStat::BadCred),
            (&root[..], &[1, 0][..], AuthStat::BadVerf),
        ] {
            let (r, _, w) = refused(&call(2, NFS_PROG, 3, cred, verf));
            assert_eq!(r, Rejection::Auth(why));
            assert_eq!(&w[1..], &[1, 1, 1, why as u32][..]);
        }
        // A program not offered: PROG_UNAVAIL; NFS v5: PROG_MISMATCH (3..4).
        let (r, op, w) = refused(&call(2, 100_227, 3, &root, &none));
        assert_eq!(
            (r, op, &w[5..]),
            (Rejection::ProgUnavail, "OTHER", &[1][..])
        );
        let (r, _, w) = refused(&call(2, NFS_PROG, 5, &root, &none));
        assert_eq!(r, Rejection::ProgMismatch { low: 3, high: 4 });
        assert_eq!(&w[5..], &[2, 3, 4][..]);
        // NFS v4 is admitted.
        assert!(admit(&call(2, NFS_PROG, 4, &root, &none), false).is_ok());
        // An authenticator over 400 bytes: AUTH_BADCRED, its procedure unread.
        let (r, op, _) = refused(&call(2, NFS_PROG, 3, &[1, 404], &none));
        assert_eq!((r, op), (Rejection::Auth(AuthStat::BadCred), "OTHER"));
        // Not a call at all: nothing to answer.
        assert_eq!(admit(b"garbage!", false).unwrap_err(), Refusal::Garbage);
        assert_eq!(
            admit(&call(2, NFS_PROG, 3, &root, &none)[..30], false).unwrap_err(),
            Refusal::Garbage
        );
    }

    /// Issue 31 §2: AUTH_NONE gets AUTH_TOOWEAK for every NFS procedure but NULL, v3
    /// and v4, unless the operator allows it; MOUNT and the portmapper take it.
    #[test]
    fn auth_none_is_too_weak_for_nfs_unless_allowed() {
        use oncrpc::msg::AuthStat;
        let with_proc = |prog: u32, vers: u32, proc_: u32| {
            let mut rec = call(2, prog, vers, &[0, 0], &[0, 0]);
            rec[20..24].copy_from_slice(&proc_.to_be_bytes());
            rec
        };
        for (vers, proc_) in [(3, 1), (3, 3), (3, 6), (3, 8), (4, 1)] {
            let rec = with_proc(NFS_PROG, vers, proc_);
            let (r, op, w) = refused_with(&rec, false);
            assert_eq!(
                r,
                rpcmsg::Rejection::Auth(AuthStat::TooWeak),
                "v{vers} {op}"
            );
            assert_eq!(
                &w[1..],
                &[1, 1, 1, 5][..],
                "MSG_DENIED AUTH_ERROR AUTH_TOOWEAK"
            );
            assert!(admit(&rec, true).is_ok(), "--allow-auth-none");
            assert!(matches!(step(&rec, false), Step::Refuse { .. }));
        }
        for rec in [
            with_proc(NFS_PROG, 3, 0),
            with_proc(NFS_PROG, 4, 0),
            with_proc(rpc::MOUNT_PROG, 3, 1),
            with_proc(rpc::MOUNT_PROG, 3, 5),
            with_proc(rpc::PMAP_PROG, 2, 3),
        ] {
            assert!(admit(&rec, false).is_ok());
        }
    }
}

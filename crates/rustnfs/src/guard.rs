//! The front door: allowlist at accept, connection cap, idle and request timeouts,
//! bounded record marking with one byte budget for every connection's buffers, and the
//! RPC header checks (RPC version, credential, program, version), made here once
//! ([`admit`]) for every call.
//!
//! Each accepted connection is read here, record by record; only whole, bounded,
//! well-formed calls are answered, a refused one with the RFC 5531 error reply. READ is
//! answered here (its data sent from the file, or copied into a budgeted reply buffer);
//! every other call goes to the in-process dispatcher (`crate::nfs`), on the
//! connection's own task.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use latency::Registry;
use nfs3_types::nfs3::{
    READ3args, READ3res, READ3resfail, READ3resok, fattr3, nfsstat3, post_op_attr,
};
use nfs3_types::xdr_codec::{Opaque, Pack};
use oncrpc::Budget;
use oncrpc::msg::{self as rpcmsg, AcceptStat};
use oncrpc::record::{self, RecordError, RecordReader};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tracing::{debug, warn};

use crate::buffers::{ReplyBuffers, trim_allocator, tune_allocator};
use crate::config::Config;
use crate::fs::DirFs;
use crate::rpc::{self, Call, NFS_PROG, PROGRAMS};

/// Shared state of the guard.
pub(crate) struct Guard {
    pub config: Arc<Config>,
    pub fs: DirFs,
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
                    if !guard.config.allows(peer.ip()) {
                        warn!(%peer, "connection refused: address not in --allow");
                        drop(sock);
                        continue;
                    }
                    let Ok(permit) = guard.permits.clone().try_acquire_owned() else {
                        warn!(%peer, limit = guard.config.max_connections,
                              "connection refused: --max-connections reached");
                        drop(sock);
                        continue;
                    };
                    tokio::spawn(connection(guard.clone(), sock, peer, permit));
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

/// How this server reads client records: bounded by `--max-record`, the idle and request
/// timeouts, and every byte drawn from the shared budget as it arrives.
pub(crate) fn record_reader(guard: &Guard) -> RecordReader {
    let cfg = &guard.config;
    RecordReader {
        max_record: cfg.max_record,
        idle_timeout: Some(cfg.idle_timeout),
        record_timeout: Some(cfg.request_timeout),
        budget: Some(guard.budget.clone()),
        trust_lengths: false,
    }
}

async fn connection(
    guard: Arc<Guard>,
    sock: TcpStream,
    peer: SocketAddr,
    _permit: OwnedSemaphorePermit,
) {
    debug!(%peer, "connection accepted");
    let _ = sock.set_nodelay(true);
    {
        use std::os::fd::AsFd;
        if let Err(e) = crate::sys::set_send_buffer(sock.as_fd(), 4 << 20) {
            debug!(%peer, "cannot enlarge the send buffer: {e}");
        }
    }
    // No read buffer of its own: an idle connection holds a socket and a task, nothing
    // more; each record's buffer is drawn from the shared budget and freed after its call.
    let (mut rd, wr) = sock.into_split();
    // Replies are written one whole record at a time, by this task: no task hop.
    let out: ClientWriter = Arc::new(tokio::sync::Mutex::new(wr));
    let reader = record_reader(&guard);
    let mut stopping = guard.stopping.clone();
    let cfg = guard.config.clone();
    let result: Result<(), Close> = async {
        loop {
            let record = tokio::select! {
                r = reader.read(&mut rd) => r?,
                _ = stopping.wait_for(|s| *s) => return Ok(()),
            };
            let Some(record) = record else { return Ok(()) };
            let start = Instant::now();
            // RFC 5531: every call gets an answer, a refused one included.
            let header = match admit(&record) {
                Ok(h) => h,
                Err(Refusal::Garbage) => return Err(Close::Garbage),
                Err(Refusal::Reply { xid, op, rejection }) => {
                    debug!(%peer, op, "call refused: {}", rejection.label());
                    send(&out, &rejection.record(xid), cfg.request_timeout).await?;
                    guard
                        .registry
                        .record_op(op, "total", rejection.label(), start.elapsed(), 0);
                    continue;
                }
            };
            let call = Call::from(&header);
            if call.prog == NFS_PROG && call.proc_ == 6 {
                read(&guard, &call, &record[call.args..], start, &out).await?;
                continue;
            }
            // Every other call: answered in process, on this task. A client that stops
            // reading is closed when a reply cannot be sent within the request timeout,
            // so it never holds more than one reply.
            let mut reply = Vec::new();
            guard.nfs.dispatch(&header, &record, &mut reply);
            drop(record);
            // The reply's bytes count against the budget while it waits to be sent.
            let _grant = match tokio::time::timeout(
                cfg.request_timeout,
                guard.budget.acquire(reply.capacity()),
            )
            .await
            {
                Ok(Ok(g)) => g,
                Ok(Err(e)) => return Err(Close::Record(e.into())),
                Err(_) => return Err(Close::NoBudget(cfg.request_timeout)),
            };
            send(&out, &reply, cfg.request_timeout).await?;
        }
    }
    .await;
    match &result {
        Ok(()) => debug!(%peer, "connection closed"),
        Err(e @ (Close::Record(RecordError::Idle(_) | RecordError::Truncated) | Close::Io(_))) => {
            debug!(%peer, "connection closed: {e}")
        }
        Err(Close::Record(RecordError::Io(e))) => debug!(%peer, "connection closed: {e}"),
        Err(e) => warn!(%peer, "connection closed by the guard: {e}"),
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        out.lock().await.shutdown().await
    })
    .await;
    guard
        .closed
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
/// and version it speaks. A header that passes is one the procedures may run.
pub(crate) fn admit(record: &[u8]) -> Result<rpcmsg::CallHeader<'_>, Refusal> {
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
            op: rpc::proc_name(header.prog, header.proc_),
            rejection,
        })?;
    Ok(header)
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

/// Bytes of a successful READ3res before its data: status, post_op_attr with attributes,
/// count, eof and the data opaque's length word (the size of a `READ3res::Ok` with empty
/// data, so it follows the XDR definitions rather than a hand count).
fn read_ok_head_len() -> usize {
    READ3res::Ok(READ3resok {
        file_attributes: post_op_attr::Some(zero_fattr()),
        count: 0,
        eof: false,
        data: Opaque::borrowed(&[]),
    })
    .packed_size()
}

fn zero_fattr() -> fattr3 {
    use nfs3_types::nfs3::{ftype3, nfstime3, specdata3};
    let t = nfstime3 {
        seconds: 0,
        nseconds: 0,
    };
    fattr3 {
        type_: ftype3::NF3REG,
        mode: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        size: 0,
        used: 0,
        rdev: specdata3 {
            specdata1: 0,
            specdata2: 0,
        },
        fsid: 0,
        fileid: 0,
        atime: t,
        mtime: t,
        ctime: t,
    }
}

/// Room a READ reply of `count` bytes needs: mark, RPC header, READ3res head, data, pad.
fn read_reply_capacity(count: u32) -> usize {
    record::MARK_LEN
        + rpcmsg::ACCEPTED_HEADER_LEN
        + read_ok_head_len()
        + count.min(crate::fs::MAX_IO) as usize
        + 3
}

/// READ, answered here rather than by the dispatcher: the data is sent from the file
/// (`sendfile`) or read straight into a reply buffer from the shared budget (one copy),
/// which goes back to the warm set once sent; the dispatcher would build the reply in a
/// `Vec` of its own first. See the README's design notes for the measurement.
async fn read(
    guard: &Guard,
    call: &Call,
    args: &[u8],
    start: Instant,
    out: &ClientWriter,
) -> Result<(), Close> {
    let limit = guard.config.request_timeout;
    let a = match read_args(args) {
        Some(a) => a,
        None => {
            let r = rpcmsg::Rejection::GarbageArgs;
            send(out, &r.record(call.xid), limit).await?;
            guard
                .registry
                .record_op("READ", "total", r.label(), start.elapsed(), 0);
            return Ok(());
        }
    };
    if sendfile_enabled()
        && let Ok(fh) = guard.fs.decode(&a.file.data)
        && let Ok((attr, file)) = guard.fs.open_read(&fh)
    {
        // Errors fall through to the copy path below, which builds their replies.
        return read_sendfile(guard, call, &a, attr, &file, start, out).await;
    }
    let mut reply =
        match tokio::time::timeout(limit, guard.buffers.get(read_reply_capacity(a.count))).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => return Err(Close::Record(e.into())),
            Err(_) => return Err(Close::NoBudget(limit)),
        };
    read_reply(&guard.fs, call.xid, &a, &mut reply.buf);
    let status = rpc::reply_status(&reply.buf[record::MARK_LEN..], NFS_PROG, 6);
    let bytes = reply.buf.len() as u64;
    send(out, &reply.buf, limit).await?;
    guard.buffers.put(reply);
    guard
        .registry
        .record_op("READ", "total", status, start.elapsed(), bytes);
    Ok(())
}

/// READ's arguments, which must fill the record exactly; `None`: GARBAGE_ARGS. Decoded
/// bounded (`nfs::xdr`): `READ3args::unpack` allocates the handle's claimed length (up to
/// 4 GiB) before reading it — found by the `rustnfs_request` fuzz target.
fn read_args(args: &[u8]) -> Option<READ3args> {
    let mut a = crate::nfs::xdr::Args::new(args);
    let fh = a.fh().ok()?;
    let offset = a.u64().ok()?;
    let count = a.u32().ok()?;
    a.end().ok()?;
    Some(READ3args {
        file: nfs3_types::nfs3::nfs_fh3 {
            data: Opaque::owned(fh.to_vec()),
        },
        offset,
        count,
    })
}

/// READ's reply record as the copy path builds it, without a socket or the budget (for
/// the fuzzing entry, `crate::fuzzing`).
pub(crate) fn read_copy(guard: &Guard, call: &Call, args: &[u8]) -> Vec<u8> {
    match read_args(args) {
        Some(a) => {
            let mut rec = Vec::with_capacity(read_reply_capacity(a.count));
            read_reply(&guard.fs, call.xid, &a, &mut rec);
            rec
        }
        None => rpcmsg::Rejection::GarbageArgs.record(call.xid),
    }
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
    call: &Call,
    a: &READ3args,
    attr: fattr3,
    file: &std::fs::File,
    start: Instant,
    out: &ClientWriter,
) -> Result<(), Close> {
    let vfs_start = Instant::now();
    let count = u64::from(a.count.min(crate::fs::MAX_IO));
    let n = count.min(attr.size.saturating_sub(a.offset));
    let eof = a.offset + n >= attr.size;
    let n32 = n as u32;
    let pad = (4 - n as usize % 4) % 4;
    let mut head = Vec::with_capacity(record::MARK_LEN + rpcmsg::ACCEPTED_HEADER_LEN + 128);
    let at = record::begin(&mut head);
    rpcmsg::accepted(&mut head, call.xid, AcceptStat::Success);
    let packed = (|| {
        Ok::<_, nfs3_types::xdr_codec::Error>(
            nfsstat3::NFS3_OK.pack(&mut head)?
                + post_op_attr::Some(attr).pack(&mut head)?
                + n32.pack(&mut head)?
                + eof.pack(&mut head)?
                // The data opaque's length word; the data follows from the file.
                + n32.pack(&mut head)?,
        )
    })();
    if packed.is_err() {
        return Err(Close::Io(std::io::Error::other("cannot pack a READ reply")));
    }
    let len = head.len() - at - record::MARK_LEN + n as usize + pad;
    head[at..at + record::MARK_LEN].copy_from_slice(&record::mark(len));
    let limit = guard.config.request_timeout;
    let sent = send_file(out, &head, file, a.offset, n as usize, pad, limit).await;
    guard.fs.record_read(
        vfs_start,
        sent.as_ref().map(|()| n).map_err(|_| nfsstat3::NFS3ERR_IO),
    );
    sent?;
    let bytes = (head.len() + n as usize + pad) as u64;
    guard
        .registry
        .record_op("READ", "total", "ok", start.elapsed(), bytes);
    Ok(())
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

/// Builds the whole READ reply record for `a` into `rec` (cleared first): the data is read
/// in place after a head of known size, and the head is packed over it afterwards.
fn read_reply(fs: &DirFs, xid: u32, a: &READ3args, rec: &mut Vec<u8>) {
    rec.clear();
    let at = record::begin(rec);
    rpcmsg::accepted(rec, xid, AcceptStat::Success);
    let res_at = rec.len();
    let fail = |rec: &mut Vec<u8>, s: nfsstat3, attr: Option<fattr3>| {
        rec.truncate(res_at);
        let res: READ3res<'_> = READ3res::Err((
            s,
            READ3resfail {
                file_attributes: attr.map_or(post_op_attr::None, post_op_attr::Some),
            },
        ));
        // Packing into a Vec cannot fail.
        let _ = res.pack(rec);
    };
    let fh = match fs.decode(&a.file.data) {
        Ok(fh) => fh,
        Err(s) => {
            fail(rec, s, None);
            record::finish(rec, at);
            return;
        }
    };
    let data_at = res_at + read_ok_head_len();
    rec.resize(data_at, 0);
    match fs.read_into(&fh, a.offset, a.count, rec) {
        Ok((attr, n, eof)) => {
            // XDR pads the opaque to a multiple of four.
            let pad = (4 - n as usize % 4) % 4;
            rec.extend_from_slice(&[0; 3][..pad]);
            let mut head = &mut rec[res_at..data_at];
            let packed = (|| {
                Ok::<_, nfs3_types::xdr_codec::Error>(
                    nfsstat3::NFS3_OK.pack(&mut head)?
                        + post_op_attr::Some(attr).pack(&mut head)?
                        + n.pack(&mut head)?
                        + eof.pack(&mut head)?
                        // The data opaque's length word; its bytes are already in place.
                        + n.pack(&mut head)?,
                )
            })();
            debug_assert_eq!(packed.ok(), Some(data_at - res_at));
        }
        Err((s, attr)) => fail(rec, s, attr),
    }
    record::finish(rec, at);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::Fh;
    use nfs3_types::xdr_codec::Unpack;
    use std::io::Cursor;

    fn wire_handle(fs: &DirFs, fh: &Fh) -> Vec<u8> {
        fs.wire(fh).data.as_ref().to_vec()
    }

    /// Decodes a READ reply record the way a client does.
    fn decode(rec: &[u8], xid: u32) -> READ3res<'static> {
        let mut rd = rec;
        let reply = record::read_blocking(&mut rd, rec.len()).unwrap();
        assert!(rd.is_empty(), "record mark");
        let h = rpcmsg::decode_reply(&reply).unwrap();
        assert_eq!((h.xid, h.status), (xid, Ok(())));
        let body = &reply[h.body..];
        let mut cur = Cursor::new(body);
        let (res, n) = READ3res::unpack(&mut cur).unwrap();
        assert_eq!(n, body.len(), "nothing after the READ3res");
        match res {
            READ3res::Ok(ok) => READ3res::Ok(READ3resok {
                file_attributes: ok.file_attributes,
                count: ok.count,
                eof: ok.eof,
                data: Opaque::owned(ok.data.as_ref().to_vec()),
            }),
            READ3res::Err(e) => READ3res::Err(e),
        }
    }

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
        let Err(Refusal::Reply { xid, op, rejection }) = admit(rec) else {
            panic!("admitted")
        };
        assert_eq!(xid, 9);
        let wire = rejection.record(xid);
        let mut rd = &wire[..];
        let body = record::read_blocking(&mut rd, wire.len()).unwrap();
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
        // AUTH_NONE and AUTH_SYS, to every program and version offered.
        for (prog, vers) in [(NFS_PROG, 3), (rpc::MOUNT_PROG, 3), (rpc::PMAP_PROG, 2)] {
            for cred in [&none[..], &root[..]] {
                let rec = call(2, prog, vers, cred, &none);
                let h = admit(&rec).unwrap();
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
        // A program not offered: PROG_UNAVAIL; NFS v4: PROG_MISMATCH (3..3).
        let (r, op, w) = refused(&call(2, 100_227, 3, &root, &none));
        assert_eq!(
            (r, op, &w[5..]),
            (Rejection::ProgUnavail, "OTHER", &[1][..])
        );
        let (r, _, w) = refused(&call(2, NFS_PROG, 4, &root, &none));
        assert_eq!(r, Rejection::ProgMismatch { low: 3, high: 3 });
        assert_eq!(&w[5..], &[2, 3, 3][..]);
        // An authenticator over 400 bytes: AUTH_BADCRED, its procedure unread.
        let (r, op, _) = refused(&call(2, NFS_PROG, 3, &[1, 404], &none));
        assert_eq!((r, op), (Rejection::Auth(AuthStat::BadCred), "OTHER"));
        // Not a call at all: nothing to answer.
        assert_eq!(admit(b"garbage!").unwrap_err(), Refusal::Garbage);
        assert_eq!(
            admit(&call(2, NFS_PROG, 3, &root, &none)[..30]).unwrap_err(),
            Refusal::Garbage
        );
    }

    #[test]
    fn read_reply_decodes_with_read3res_unpack() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..10_001u32).map(|i| (i * 7) as u8).collect();
        std::fs::write(dir.path().join("f"), &data).unwrap();
        let fs = DirFs::open(&Config::new(dir.path()), Registry::new("t")).unwrap();
        let fh = fs.lookup(&fs.root_fh(), b"f").0.unwrap().0;
        let args = |offset, count, handle: Vec<u8>| READ3args {
            file: nfs3_types::nfs3::nfs_fh3 {
                data: Opaque::owned(handle),
            },
            offset,
            count,
        };
        let mut rec = Vec::new();
        // Every padding length, a short read at EOF, and a read past the end.
        for (offset, count) in [(0, 4096), (1, 4095), (2, 4094), (3, 4093), (9_000, 4096)] {
            read_reply(
                &fs,
                9,
                &args(offset, count, wire_handle(&fs, &fh)),
                &mut rec,
            );
            assert!(rec.capacity() <= read_reply_capacity(count).max(rec.capacity()));
            let READ3res::Ok(ok) = decode(&rec, 9) else {
                panic!("READ at {offset} failed")
            };
            let end = (offset as usize + count as usize).min(data.len());
            assert_eq!(ok.data.as_ref(), &data[offset as usize..end]);
            assert_eq!(ok.count as usize, end - offset as usize);
            assert_eq!(ok.eof, end == data.len());
            let post_op_attr::Some(attr) = ok.file_attributes else {
                panic!("no attributes")
            };
            assert_eq!(attr.size, data.len() as u64);
            assert!(rec.len() <= read_reply_capacity(count));
        }
        // A forged handle: an error result with no attributes, still well formed.
        let mut bad = wire_handle(&fs, &fh);
        bad[9] ^= 0xff;
        read_reply(&fs, 10, &args(0, 10, bad), &mut rec);
        let READ3res::Err((status, fail)) = decode(&rec, 10) else {
            panic!("a forged handle read")
        };
        assert_eq!(status, nfsstat3::NFS3ERR_STALE);
        assert!(matches!(fail.file_attributes, post_op_attr::None));
        read_reply(&fs, 11, &args(0, 10, vec![1, 2, 3]), &mut rec);
        assert!(matches!(
            decode(&rec, 11),
            READ3res::Err((nfsstat3::NFS3ERR_BADHANDLE, _))
        ));
    }
}

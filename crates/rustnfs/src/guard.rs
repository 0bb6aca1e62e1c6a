//! The connection guard in front of the NFS engine: allowlist at accept, connection cap,
//! idle and request timeouts, bounded record marking, a cap on requests in flight, and
//! per-procedure timing of every RPC.
//!
//! nfs3_server's socket loop is private and trusts the client's record-marking length, so
//! clients never talk to it directly: each accepted connection is read here, record by
//! record, and only whole, bounded, well-formed calls are forwarded to the engine over a
//! loopback connection opened on the first call (idle connections cost the engine nothing).
//! The guard answers three calls itself: PMAP GETPORT (so clients learn the public port,
//! not the engine's), FSSTAT (with statvfs figures; the engine's are constants), and it
//! rewrites an empty MOUNT path (libnfs 4.0's `nfs://host/file`) to `/`.

use std::collections::HashMap;
use std::io::Cursor;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use latency::Registry;
use nfs3_types::nfs3::{
    FSSTAT3args, FSSTAT3res, FSSTAT3resfail, READ3args, nfsstat3, post_op_attr,
};
use nfs3_types::xdr_codec::{Pack, Unpack};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tracing::{debug, info, warn};

use crate::config::Config;
use crate::fs::{DirFs, Fh};
use crate::rpc::{self, Call, MOUNT_PROG, NFS_PROG, PMAP_PROG};
use nfs3_server::vfs::FileHandle;

/// Calls forwarded and not yet answered, per connection. Bounds what one client can make
/// the engine buffer (replies of up to 1 MiB each) when it stops reading.
const MAX_IN_FLIGHT: usize = 64;

/// Shared state of the guard.
pub(crate) struct Guard {
    pub config: Arc<Config>,
    pub fs: DirFs,
    pub registry: Arc<Registry>,
    /// Where the engine listens (loopback, ephemeral port).
    pub backend: SocketAddr,
    /// The public port, answered to PMAP GETPORT for NFS and MOUNT.
    pub front_port: u16,
    /// One permit per open client connection (`max_connections`).
    pub permits: Arc<Semaphore>,
    /// Flips to `true` on shutdown; connections finish their in-flight calls and close.
    pub stopping: watch::Receiver<bool>,
}

/// Why a connection was closed by the guard.
#[derive(Debug, thiserror::Error)]
enum Close {
    #[error("record of {0} bytes exceeds the {1}-byte limit")]
    TooLarge(usize, usize),
    #[error("idle for {0:?}")]
    Idle(Duration),
    #[error("request not completed within {0:?}")]
    Slow(Duration),
    #[error("not an ONC RPC call")]
    Garbage,
    #[error("engine: {0}")]
    Engine(std::io::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Accepts until `shutdown` resolves, then waits (bounded) for connections to drain.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    guard: Arc<Guard>,
    shutdown: impl Future<Output = ()>,
) {
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
}

/// Reads one whole record (all fragments), growing the buffer only as bytes arrive.
/// `Ok(None)` is a clean end of stream between records.
async fn read_record(
    rd: &mut (impl tokio::io::AsyncRead + Unpin),
    cfg: &Config,
) -> Result<Option<Vec<u8>>, Close> {
    let mut record = Vec::new();
    let mut first = true;
    loop {
        let mut hdr = [0u8; 4];
        if first {
            // Waiting for a new call: the idle timeout applies to its first byte.
            match tokio::time::timeout(cfg.idle_timeout, rd.read(&mut hdr[..1])).await {
                Err(_) => return Err(Close::Idle(cfg.idle_timeout)),
                Ok(Ok(0)) => return Ok(None),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e.into()),
            }
            timed(cfg, rd.read_exact(&mut hdr[1..])).await?;
        } else {
            timed(cfg, rd.read_exact(&mut hdr)).await?;
        }
        let mark = u32::from_be_bytes(hdr);
        let last = mark & 0x8000_0000 != 0;
        let len = (mark & 0x7fff_ffff) as usize;
        if record.len() + len > cfg.max_record {
            return Err(Close::TooLarge(record.len() + len, cfg.max_record));
        }
        let before = record.len();
        let got = timed(cfg, (&mut *rd).take(len as u64).read_to_end(&mut record)).await?;
        if got != len || record.len() != before + len {
            return Err(Close::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        if last {
            return Ok(Some(record));
        }
        first = false;
    }
}

async fn timed<T>(cfg: &Config, f: impl Future<Output = std::io::Result<T>>) -> Result<T, Close> {
    match tokio::time::timeout(cfg.request_timeout, f).await {
        Err(_) => Err(Close::Slow(cfg.request_timeout)),
        Ok(r) => Ok(r?),
    }
}

/// Calls forwarded to the engine and not yet answered: xid → (program, procedure, start).
#[derive(Default)]
struct InFlight {
    calls: Mutex<HashMap<u32, (u32, u32, Instant)>>,
    drained: Notify,
}

/// The engine side of one client connection.
struct Backend {
    wr: OwnedWriteHalf,
    pump: tokio::task::JoinHandle<()>,
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
    let (rd, wr) = sock.into_split();
    // Buffered: a call's header, credential and arguments arrive in one read, not five.
    let mut rd = tokio::io::BufReader::with_capacity(64 * 1024, rd);
    // Replies are written by whoever has them (this task for the guard's own answers,
    // the pump for the engine's), one whole record under the lock: no task hop on READ.
    let out: ClientWriter = Arc::new(tokio::sync::Mutex::new(wr));
    let inflight = Arc::new(InFlight::default());
    let mut spare = Vec::new();
    let mut backend: Option<Backend> = None;
    let mut stopping = guard.stopping.clone();
    let cfg = guard.config.clone();
    let result: Result<(), Close> = async {
        loop {
            let record = tokio::select! {
                r = read_record(&mut rd, &cfg) => r?,
                _ = stopping.wait_for(|s| *s) => return Ok(()),
            };
            let Some(record) = record else { return Ok(()) };
            let call = rpc::parse_call(&record).ok_or(Close::Garbage)?;
            if let Some(reply) = answer_locally(&guard, &call, &record, &mut spare) {
                send(&out, &reply, cfg.request_timeout).await?;
                // Reuse the READ reply buffer: no 1 MiB allocation (and page faults) per
                // READ.
                if reply.capacity() <= 2 << 20 {
                    spare = reply;
                }
                continue;
            }
            let record = rewrite_mount_path(&call, record);
            // Bound the calls in flight (a retransmitted xid does not count twice).
            loop {
                let notified = inflight.drained.notified();
                {
                    let mut calls = inflight.calls.lock();
                    if calls.len() < MAX_IN_FLIGHT || calls.contains_key(&call.xid) {
                        calls.insert(call.xid, (call.prog, call.proc_, Instant::now()));
                        break;
                    }
                }
                notified.await;
            }
            if backend.is_none() {
                backend = Some(connect_backend(&guard, out.clone(), inflight.clone()).await?);
            }
            let Some(b) = backend.as_mut() else {
                unreachable!()
            };
            b.wr.write_all(&rpc::record_mark(record.len()))
                .await
                .map_err(Close::Engine)?;
            b.wr.write_all(&record).await.map_err(Close::Engine)?;
        }
    }
    .await;
    match &result {
        Ok(()) => debug!(%peer, "connection closed"),
        Err(e @ (Close::Idle(_) | Close::Io(_))) => debug!(%peer, "connection closed: {e}"),
        Err(e) => warn!(%peer, "connection closed by the guard: {e}"),
    }
    // Let answers to calls already forwarded reach the client (bounded), then tear down.
    if let Some(b) = backend {
        let wait = async {
            loop {
                let notified = inflight.drained.notified();
                if inflight.calls.lock().is_empty() {
                    break;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), wait).await;
        b.pump.abort();
        drop(b.wr);
    }
    let _ = out.lock().await.shutdown().await;
}

/// The client's write half, shared by the connection task and the engine-reply pump.
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

async fn connect_backend(
    guard: &Guard,
    out: ClientWriter,
    inflight: Arc<InFlight>,
) -> Result<Backend, Close> {
    let sock = TcpStream::connect(guard.backend)
        .await
        .map_err(Close::Engine)?;
    let _ = sock.set_nodelay(true);
    let (brd, wr) = sock.into_split();
    let registry = guard.registry.clone();
    let limit = guard.config.request_timeout;
    let pump = tokio::spawn(pump_replies(brd, out, inflight, registry, limit));
    Ok(Backend { wr, pump })
}

/// Moves the engine's replies to the client, whole records at a time, timing each call.
async fn pump_replies(
    mut brd: OwnedReadHalf,
    out: ClientWriter,
    inflight: Arc<InFlight>,
    registry: Arc<Registry>,
    limit: Duration,
) {
    loop {
        let mut hdr = [0u8; 4];
        if brd.read_exact(&mut hdr).await.is_err() {
            break;
        }
        let len = (u32::from_be_bytes(hdr) & 0x7fff_ffff) as usize;
        let mut buf = Vec::with_capacity(4 + len);
        buf.extend_from_slice(&hdr);
        buf.resize(4 + len, 0);
        if brd.read_exact(&mut buf[4..]).await.is_err() {
            break;
        }
        if buf.len() >= 8 {
            let xid = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
            let started = inflight.calls.lock().remove(&xid);
            inflight.drained.notify_waiters();
            if let Some((prog, proc_, start)) = started {
                let status = rpc::reply_status(&buf[4..], prog, proc_);
                let bytes = if prog == NFS_PROG && proc_ == 6 {
                    len as u64
                } else {
                    0
                };
                registry.record_op(
                    rpc::proc_name(prog, proc_),
                    "total",
                    status,
                    start.elapsed(),
                    bytes,
                );
            }
        }
        if send(&out, &buf, limit).await.is_err() {
            break;
        }
    }
}

/// Calls the guard answers itself (see the module docs); `None` means forward.
fn answer_locally(
    guard: &Guard,
    call: &Call,
    record: &[u8],
    spare: &mut Vec<u8>,
) -> Option<Vec<u8>> {
    let start = Instant::now();
    let args = &record[call.args..];
    let (reply, status) = match (call.prog, call.proc_) {
        (PMAP_PROG, 3) => {
            let word = |i: usize| {
                args.get(i * 4..i * 4 + 4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            };
            match (word(0), word(1), word(2)) {
                (Some(prog), Some(vers), Some(prot)) => {
                    let ours = (prog == NFS_PROG || prog == MOUNT_PROG) && vers == 3 && prot == 6;
                    let port = if ours { u32::from(guard.front_port) } else { 0 };
                    (rpc::accepted_reply(call.xid, 0, &port.to_be_bytes()), "ok")
                }
                _ => (rpc::accepted_reply(call.xid, 4, &[]), "GARBAGE_ARGS"),
            }
        }
        (NFS_PROG, 6) if call.vers == 3 => {
            let mut cur = Cursor::new(args);
            match READ3args::unpack(&mut cur) {
                Ok((a, _)) if cur.position() as usize == args.len() => {
                    let reply = read_reply(guard, call.xid, &a, std::mem::take(spare));
                    let status = rpc::reply_status(&reply[4..], NFS_PROG, 6);
                    let bytes = reply.len() as u64;
                    guard
                        .registry
                        .record_op("READ", "total", status, start.elapsed(), bytes);
                    return Some(reply);
                }
                _ => (rpc::accepted_reply(call.xid, 4, &[]), "GARBAGE_ARGS"),
            }
        }
        (NFS_PROG, 18) if call.vers == 3 => match FSSTAT3args::unpack(&mut Cursor::new(args)) {
            Ok((a, _)) => {
                let res = match decode_fh(&guard.fs, &a.fsroot.data) {
                    Ok(fh) => match guard.fs.fsstat(&fh) {
                        Ok(ok) => FSSTAT3res::Ok(ok),
                        Err(s) => FSSTAT3res::Err((s, FSSTAT3resfail::default())),
                    },
                    Err(s) => FSSTAT3res::Err((s, FSSTAT3resfail::default())),
                };
                let status = match &res {
                    FSSTAT3res::Ok(_) => "ok",
                    FSSTAT3res::Err((s, _)) => crate::error::status_label(*s),
                };
                let mut body = Vec::with_capacity(128);
                if res.pack(&mut body).is_err() {
                    return Some(rpc::accepted_reply(call.xid, 5, &[]));
                }
                (rpc::accepted_reply(call.xid, 0, &body), status)
            }
            Err(_) => (rpc::accepted_reply(call.xid, 4, &[]), "GARBAGE_ARGS"),
        },
        _ => return None,
    };
    guard.registry.record_op(
        rpc::proc_name(call.prog, call.proc_),
        "total",
        status,
        start.elapsed(),
        0,
    );
    Some(reply)
}

/// READ answered here rather than by the engine: the payload is read straight into the
/// reply record (one copy) instead of crossing the engine's tasks and a second socket
/// (four more copies); see the README's design notes for the measurement.
fn read_reply(guard: &Guard, xid: u32, a: &READ3args, mut rec: Vec<u8>) -> Vec<u8> {
    let count = a.count.min(crate::fs::MAX_IO) as usize;
    rec.clear();
    rec.reserve(4 + 24 + 4 + 84 + 12 + count + 4);
    rec.extend_from_slice(&rpc::accepted_reply(xid, 0, &[]));
    let status_at = rec.len();
    rec.extend_from_slice(&[0; 4]);
    let fh = match decode_fh(&guard.fs, &a.file.data) {
        Ok(fh) => fh,
        Err(s) => {
            rec[status_at..].copy_from_slice(&(s as u32).to_be_bytes());
            rec.extend_from_slice(&0u32.to_be_bytes()); // no attributes
            return finish(rec);
        }
    };
    // Attributes, then count, eof and the opaque's length, then the data in place.
    let mut head = Vec::with_capacity(100);
    let data_at = rec.len() + 4 + 84 + 12;
    rec.resize(data_at, 0);
    match guard.fs.read_into(&fh, a.offset, a.count, &mut rec) {
        Ok((attr, n, eof)) => {
            let _ = post_op_attr::Some(attr).pack(&mut head);
            debug_assert_eq!(head.len(), 88);
            head.extend_from_slice(&n.to_be_bytes());
            head.extend_from_slice(&u32::from(eof).to_be_bytes());
            head.extend_from_slice(&n.to_be_bytes());
            rec[status_at + 4..data_at].copy_from_slice(&head);
            let pad = (4 - (n as usize % 4)) % 4;
            rec.extend_from_slice(&[0; 3][..pad]);
            finish(rec)
        }
        Err((s, attr)) => {
            rec.truncate(status_at + 4);
            rec[status_at..].copy_from_slice(&(s as u32).to_be_bytes());
            let _ = attr
                .map_or(post_op_attr::None, post_op_attr::Some)
                .pack(&mut rec);
            finish(rec)
        }
    }
}

/// Sets the record mark of a record built in place.
fn finish(mut rec: Vec<u8>) -> Vec<u8> {
    let mark = rpc::record_mark(rec.len() - 4);
    rec[..4].copy_from_slice(&mark);
    rec
}

/// Checks the engine's 8-byte generation prefix the way the engine does, then decodes ours.
fn decode_fh(fs: &DirFs, data: &[u8]) -> Result<Fh, nfsstat3> {
    if data.len() < 8 {
        return Err(nfsstat3::NFS3ERR_BADHANDLE);
    }
    let generation = u64::from_le_bytes(
        data[..8]
            .try_into()
            .map_err(|_| nfsstat3::NFS3ERR_BADHANDLE)?,
    );
    if generation != fs.generation() {
        return Err(if generation < fs.generation() {
            nfsstat3::NFS3ERR_STALE
        } else {
            nfsstat3::NFS3ERR_BADHANDLE
        });
    }
    Fh::from_bytes(&data[8..]).ok_or(nfsstat3::NFS3ERR_BADHANDLE)
}

/// libnfs 4.0 mounts `nfs://host/file` with an empty path, which the engine refuses; it
/// means the export root, so it becomes `/`.
fn rewrite_mount_path(call: &Call, mut record: Vec<u8>) -> Vec<u8> {
    if call.prog == MOUNT_PROG
        && call.proc_ == 1
        && record.len() == call.args + 4
        && record[call.args..] == [0, 0, 0, 0]
    {
        record.truncate(call.args);
        record.extend_from_slice(&[0, 0, 0, 1, b'/', 0, 0, 0]);
        info!("empty MOUNT path taken as /");
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_mount_path_becomes_root() {
        let mut rec = Vec::new();
        for w in [1u32, 0, 2, MOUNT_PROG, 3, 1, 0, 0, 0, 0, 0] {
            rec.extend_from_slice(&w.to_be_bytes());
        }
        let call = rpc::parse_call(&rec).unwrap();
        let out = rewrite_mount_path(&call, rec.clone());
        assert_eq!(&out[call.args..], &[0, 0, 0, 1, b'/', 0, 0, 0]);
        // A non-empty path is left alone.
        let mut other = rec[..call.args].to_vec();
        other.extend_from_slice(&[0, 0, 0, 1, b'/', 0, 0, 0]);
        assert_eq!(rewrite_mount_path(&call, other.clone()), other);
    }
}

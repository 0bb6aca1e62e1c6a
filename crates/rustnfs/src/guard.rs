//! The connection guard: allowlist at accept, connection cap, idle and request timeouts,
//! bounded record marking, and per-procedure timing of every RPC.
//!
//! Each accepted connection is read here, record by record; only whole, bounded,
//! well-formed calls are answered. READ (zero-copy into the reply), PMAP GETPORT and
//! FSSTAT are answered here; every other call goes to the in-process dispatcher
//! (`crate::nfs`), on the connection's own task, and its reply is written back the same
//! way.

use std::io::Cursor;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use latency::Registry;
use nfs3_types::nfs3::{
    FSSTAT3args, FSSTAT3res, FSSTAT3resfail, READ3args, nfsstat3, post_op_attr,
};
use nfs3_types::xdr_codec::{Pack, Unpack};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tracing::{debug, warn};

use crate::config::Config;
use crate::fs::{DirFs, Fh};
use crate::rpc::{self, Call, MOUNT_PROG, NFS_PROG, PMAP_PROG};

/// Shared state of the guard.
pub(crate) struct Guard {
    pub config: Arc<Config>,
    pub fs: DirFs,
    pub registry: Arc<Registry>,
    /// Answers every call the guard does not answer itself.
    pub nfs: crate::nfs::Dispatcher,
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
    // Replies are written one whole record at a time, by this task: no task hop.
    let out: ClientWriter = Arc::new(tokio::sync::Mutex::new(wr));
    let mut spare = Vec::new();
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
            // Every other call: answered in process, on this task (one record in, one
            // out; the reply buffer is reused like READ's).
            let mut reply = std::mem::take(&mut spare);
            guard.nfs.dispatch(&call, &record, &mut reply);
            send(&out, &reply, cfg.request_timeout).await?;
            if reply.capacity() <= 2 << 20 {
                spare = reply;
            }
        }
    }
    .await;
    match &result {
        Ok(()) => debug!(%peer, "connection closed"),
        Err(e @ (Close::Idle(_) | Close::Io(_))) => debug!(%peer, "connection closed: {e}"),
        Err(e) => warn!(%peer, "connection closed by the guard: {e}"),
    }
    let _ = out.lock().await.shutdown().await;
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

/// Calls the guard answers itself (see the module docs); `None`: the dispatcher answers.
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

/// Decodes a client's handle (generation prefix, inode, birth time).
fn decode_fh(fs: &DirFs, data: &[u8]) -> Result<Fh, nfsstat3> {
    fs.decode(data)
}

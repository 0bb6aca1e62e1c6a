//! Raw TCP throughput (like iperf3): the `tcp://` target and the `tcp-server` it talks to.
//!
//! Protocol, one stream per connection: the client sends a 16-byte hello (`SLTCP1\0` +
//! mode byte + its block size as a big-endian u64, 0 for "unspecified"; the server reads
//! with that size, as iperf3's server reads with the client's `-l`). Mode 0 ("send"): the client writes blocks until its
//! schedule ends, then shuts its write side; the server discards everything and answers
//! the byte count it received as a big-endian u64, which the client checks. Mode 1
//! ("reverse"): the server writes blocks until the client closes the connection.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::sample::{ErrorKind, Instants, OpError, OpOk};
use crate::worker::{Target, Worker};

const MAGIC: &[u8; 7] = b"SLTCP1\0";
const HELLO_LEN: usize = 16;
/// The server's read size when the client did not name its block size: 128 KiB, like
/// iperf3's default (a destination that stays in cache copies fast on loopback).
const DEFAULT_READ: usize = 128 << 10;
/// The largest read buffer a client's block size can ask the server for.
const MAX_READ: usize = 4 << 20;
/// Socket buffer sizes, when `SERVELAB_TCP_SOCKBUF` asks for fixed ones. By default the
/// kernel autotunes them, which measured faster on loopback than a fixed 4 MiB (smaller
/// buffers stay in cache), and is what iperf3 does.
fn socket_buffer() -> Option<u32> {
    std::env::var("SERVELAB_TCP_SOCKBUF")
        .ok()
        .and_then(|v| crate::plan::parse_size(&v).ok())
        .and_then(|v| u32::try_from(v).ok())
}

pub(crate) struct TcpTarget {
    pub addr: SocketAddr,
    pub block: usize,
    pub reverse: bool,
}

pub(crate) struct TcpWorker {
    stream: Option<TcpStream>,
    buf: Vec<u8>,
    reverse: bool,
    sent: u64,
}

fn op_name(reverse: bool) -> &'static str {
    if reverse { "tcp_read" } else { "tcp_write" }
}

fn io_err(reverse: bool, e: &std::io::Error) -> OpError {
    OpError::new(
        op_name(reverse),
        ErrorKind::from_io(e, false),
        e.to_string(),
    )
}

impl Target for Arc<TcpTarget> {
    type Worker = TcpWorker;

    fn default_op(&self) -> &'static str {
        op_name(self.reverse)
    }

    async fn worker(&self, _id: usize, inst: &mut Instants) -> Result<TcpWorker, OpError> {
        let socket = if self.addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        }
        .map_err(|e| io_err(self.reverse, &e))?;
        if let Some(size) = socket_buffer() {
            let _ = socket.set_send_buffer_size(size);
            let _ = socket.set_recv_buffer_size(size);
        }
        let mut stream = socket.connect(self.addr).await.map_err(|e| {
            OpError::new(
                op_name(self.reverse),
                ErrorKind::Connect,
                format!("{}: {e}", self.addr),
            )
        })?;
        inst.connected = Some(Instant::now());
        let mut hello = [0u8; HELLO_LEN];
        hello[..7].copy_from_slice(MAGIC);
        hello[7] = u8::from(self.reverse);
        hello[8..].copy_from_slice(&(self.block as u64).to_be_bytes());
        stream
            .write_all(&hello)
            .await
            .map_err(|e| io_err(self.reverse, &e))?;
        // Not all-zero, so a compressing path could not flatter the figure.
        let buf = (0..self.block).map(|i| (i * 31 % 251) as u8).collect();
        Ok(TcpWorker {
            stream: Some(stream),
            buf,
            reverse: self.reverse,
            sent: 0,
        })
    }
}

impl Worker for TcpWorker {
    async fn op(&mut self, inst: &mut Instants) -> Result<OpOk, OpError> {
        let op = op_name(self.reverse);
        let stream = self
            .stream
            .as_mut()
            .ok_or_else(|| OpError::new(op, ErrorKind::Io, "stream already finished"))?;
        let n = if self.reverse {
            match stream.read(&mut self.buf).await {
                Ok(0) => {
                    self.stream = None;
                    return Err(OpError::new(
                        op,
                        ErrorKind::Reset,
                        "server closed the stream",
                    ));
                }
                Ok(n) => n,
                Err(e) => {
                    self.stream = None;
                    return Err(io_err(true, &e));
                }
            }
        } else {
            // Counted write by write: a timed run may abandon this operation half-way,
            // and the server's acknowledgement must still match what was sent.
            let mut done = 0;
            while done < self.buf.len() {
                match stream.write(&self.buf[done..]).await {
                    Ok(0) => {
                        self.stream = None;
                        return Err(OpError::new(op, ErrorKind::Reset, "stream closed"));
                    }
                    Ok(n) => {
                        done += n;
                        self.sent += n as u64;
                    }
                    Err(e) => {
                        self.stream = None;
                        return Err(io_err(false, &e));
                    }
                }
            }
            done
        };
        inst.first_byte = Some(Instant::now());
        Ok(OpOk {
            op,
            body_bytes: n as u64,
            wire_bytes: n as u64,
            ..OpOk::default()
        })
    }

    async fn finish(&mut self) -> Option<Result<OpOk, OpError>> {
        let mut stream = self.stream.take()?;
        if self.reverse {
            return None;
        }
        let result = async {
            stream.shutdown().await?;
            let mut count = [0u8; 8];
            stream.read_exact(&mut count).await?;
            Ok::<u64, std::io::Error>(u64::from_be_bytes(count))
        }
        .await;
        Some(match result {
            Ok(n) if n == self.sent => Ok(OpOk {
                op: "tcp_ack",
                ..OpOk::default()
            }),
            Ok(n) => Err(OpError::new(
                "tcp_ack",
                ErrorKind::Checksum,
                format!("server received {n} bytes, client sent {}", self.sent),
            )),
            Err(e) => Err(OpError::new(
                "tcp_ack",
                ErrorKind::from_io(&e, false),
                e.to_string(),
            )),
        })
    }
}

/// Serves the throughput protocol on `listener` until `shutdown` resolves; one OS thread
/// per stream (after the hello), errors on one stream never stop the accept loop; streams
/// already running end with their clients. `block` is the server's write
/// size in reverse mode.
pub async fn serve(
    listener: TcpListener,
    block: usize,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let block = block.max(1);
    tokio::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            r = listener.accept() => match r {
                Ok(s) => s,
                // Out of descriptors and the like: back off instead of spinning.
                Err(_) => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        tokio::spawn(async move {
            let _ = serve_stream(stream, block).await;
        });
    }
}

async fn serve_stream(mut stream: TcpStream, block: usize) -> std::io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut hello = [0u8; HELLO_LEN];
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_exact(&mut hello),
    )
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no hello"))??;
    if &hello[..7] != MAGIC {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a servelab tcp client",
        ));
    }
    // The byte stream itself runs on a plain thread with a blocking socket: one
    // syscall per block, where the readiness loop measured ~0.6 extra `epoll_wait` per
    // 128 KiB read plus a wake-up handed between the runtime's worker threads (iperf3's
    // server also sits on one thread). A stream thread ends with its client.
    let stream = stream.into_std()?;
    stream.set_nonblocking(false)?;
    let reverse = hello[7] == 1;
    let mut size = [0u8; 8];
    size.copy_from_slice(&hello[8..]);
    let read_size = match u64::from_be_bytes(size) {
        0 => DEFAULT_READ,
        n => usize::try_from(n).unwrap_or(MAX_READ).clamp(4096, MAX_READ),
    };
    std::thread::Builder::new()
        .name("tcp-stream".into())
        .spawn(move || {
            let _ = if reverse {
                send_blocking(stream, block)
            } else {
                sink_blocking(stream, read_size)
            };
        })?;
    Ok(())
}

/// Reverse mode: writes `block`-sized writes until the client goes away.
fn send_blocking(mut stream: std::net::TcpStream, block: usize) -> std::io::Result<()> {
    use std::io::Write as _;
    let buf: Vec<u8> = (0..block).map(|i| (i * 31 % 251) as u8).collect();
    loop {
        stream.write_all(&buf)?;
    }
}

/// Send mode: discards everything in `read_size` reads (the client's block size, as
/// iperf3's server reads with the client's `-l`: measured 1,339 reads of exactly 1 MiB
/// for `-l 1M`), then answers the byte count.
fn sink_blocking(mut stream: std::net::TcpStream, read_size: usize) -> std::io::Result<()> {
    use std::io::{Read as _, Write as _};
    let mut buf = vec![0u8; read_size];
    let mut total = 0u64;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    stream.write_all(&total.to_be_bytes())?;
    stream.shutdown(std::net::Shutdown::Write)
}

/// Binds `addr` (socket buffers, if fixed, are inherited by accepted streams), for
/// `servelab tcp-server`. Must be called inside a tokio runtime.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()
    } else {
        tokio::net::TcpSocket::new_v6()
    }?;
    socket.set_reuseaddr(true)?;
    if let Some(size) = socket_buffer() {
        let _ = socket.set_recv_buffer_size(size);
        let _ = socket.set_send_buffer_size(size);
    }
    socket.bind(addr)?;
    socket.listen(1024)
}

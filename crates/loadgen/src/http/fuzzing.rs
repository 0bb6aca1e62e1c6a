//! Entry points for the fuzz targets (`fuzz/`): the HTTP worker's response reader fed by
//! an in-memory "server", and the chunked decoder. Not a stable API.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, ReadBuf};

use super::{ChunkedDecoder as Chunked, HttpTarget, HttpWorker, READ_BUF, ReadError};
use crate::sample::{ErrorKind, Instants};

/// One response as the worker read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: Option<u16>,
    pub body_bytes: u64,
    pub wire_bytes: u64,
    /// Whether the worker would reuse the connection for the next request.
    pub reusable: bool,
}

/// How reading the connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The server closed before any byte of a further response.
    Closed,
    /// The worker stopped keeping the connection (close, or bytes beyond a response).
    NotReusable,
    /// The worker counted a failure.
    Failed {
        kind: ErrorKind,
        message: String,
        wire_bytes: u64,
    },
}

/// A connection whose peer sends `wire` in reads of the given sizes (cycled; 0 = 1),
/// then closes.
struct Scripted<'a> {
    wire: &'a [u8],
    reads: VecDeque<usize>,
}

impl AsyncRead for Scripted<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let step = self.reads.pop_front().unwrap_or(usize::MAX);
        self.reads.push_back(step);
        let n = step.max(1).min(self.wire.len()).min(buf.remaining());
        let (now, rest) = self.wire.split_at(n);
        buf.put_slice(now);
        self.wire = rest;
        Poll::Ready(Ok(()))
    }
}

/// Reads responses from `wire` the way a keep-alive worker does (one per request, for as
/// long as the connection stays reusable), the peer's bytes arriving in reads of
/// `reads` sizes.
pub fn responses(wire: &[u8], reads: &[usize]) -> (Vec<Response>, End) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime without drivers");
    let mut worker = HttpWorker {
        target: Arc::new(HttpTarget {
            addr: ([127, 0, 0, 1], 80).into(),
            request: Vec::new(),
            keepalive: true,
            variable_length: true,
            doc_len: AtomicU64::new(u64::MAX),
        }),
        conn: None,
        buf: vec![0; READ_BUF],
        want_server: true,
    };
    let mut stream = Scripted {
        wire,
        reads: reads.iter().copied().collect(),
    };
    let mut out = Vec::new();
    rt.block_on(async {
        loop {
            let mut inst = Instants::new(None, Instant::now());
            inst.connected = Some(inst.start);
            match worker.read_response(&mut stream, &mut inst).await {
                Ok((ok, reusable)) => {
                    out.push(Response {
                        status: ok.status,
                        body_bytes: ok.body_bytes,
                        wire_bytes: ok.wire_bytes,
                        reusable,
                    });
                    if !reusable {
                        return (out, End::NotReusable);
                    }
                }
                Err(ReadError::ClosedBeforeResponse) => return (out, End::Closed),
                Err(ReadError::Op(e)) => {
                    return (
                        out,
                        End::Failed {
                            kind: e.kind,
                            message: e.message,
                            wire_bytes: e.wire_bytes,
                        },
                    );
                }
            }
        }
    })
}

/// What [`chunked`] answers if the decoder left bytes of a piece unread mid-body.
pub const STALLED: &str = "decoder stopped before the end of a piece";

/// The chunked decoder over `data` fed in pieces of the given sizes (cycled; 0 = 1):
/// (data bytes, bytes consumed) up to the end of the body, or the error.
pub fn chunked(data: &[u8], pieces: &[usize]) -> Result<(u64, usize), &'static str> {
    let mut dec = Chunked::default();
    let (mut body, mut used) = (0u64, 0usize);
    let mut sizes = pieces.iter().copied().cycle();
    while used < data.len() && !dec.done() {
        let step = sizes.next().unwrap_or(usize::MAX).max(1);
        let end = used.saturating_add(step).min(data.len());
        let piece = &data[used..end];
        let (b, c) = dec.feed(piece)?;
        body += b;
        used += c;
        if c < piece.len() && !dec.done() {
            // The decoder must take every byte until the body ends.
            return Err(STALLED);
        }
    }
    Ok((body, used))
}

/// True once [`chunked`] has seen the whole body.
pub fn chunked_complete(data: &[u8]) -> bool {
    let mut dec = Chunked::default();
    dec.feed(data).is_ok() && dec.done()
}

//! The HTTP/1.1 target: a minimal client over tokio's TcpStream (keep-alive or ab's
//! connection-per-request HTTP/1.0), Content-Length and chunked bodies, length checks
//! against the first 2xx response, `Server-Timing` collection. Public: the response-head
//! parser and the chunked decoder, the two places untrusted bytes are interpreted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::sample::{ErrorKind, Instants, OpError, OpOk};
use crate::worker::{Target, Worker};

/// Largest response head accepted before the response counts as malformed.
const MAX_HEAD: usize = 64 * 1024;
/// Read buffer per connection: large enough that a 10 MiB body takes few reads.
const READ_BUF: usize = 256 * 1024;
const OP: &str = "GET";

#[doc(hidden)]
pub mod fuzzing;

/// Settings shared by every HTTP worker.
#[derive(Debug)]
pub(crate) struct HttpTarget {
    addr: SocketAddr,
    request: Vec<u8>,
    keepalive: bool,
    variable_length: bool,
    /// The first 2xx response's body length (ab's "Document Length"); `u64::MAX` until set.
    pub doc_len: AtomicU64,
}

impl HttpTarget {
    pub fn new(
        addr: SocketAddr,
        host: &str,
        port: u16,
        path: &str,
        options: &crate::plan::Options,
    ) -> Self {
        let host_header = match (host.contains(':'), port) {
            (true, 80) => format!("[{host}]"),
            (true, p) => format!("[{host}]:{p}"),
            (false, 80) => host.to_string(),
            (false, p) => format!("{host}:{p}"),
        };
        let version = if options.keepalive { "1.1" } else { "1.0" };
        let mut request = format!(
            "GET {path} HTTP/{version}\r\nHost: {host_header}\r\nUser-Agent: servelab-load/{}\r\nAccept: */*\r\n",
            env!("CARGO_PKG_VERSION")
        );
        for h in &options.headers {
            let (name, value) = h.split_once(':').expect("validated in LoadPlan");
            request.push_str(&format!("{}: {}\r\n", name.trim(), value.trim()));
        }
        request.push_str("\r\n");
        HttpTarget {
            addr,
            request: request.into_bytes(),
            keepalive: options.keepalive,
            variable_length: options.variable_length,
            doc_len: AtomicU64::new(u64::MAX),
        }
    }

    /// The document length seen first, if any response completed.
    pub fn document_length(&self) -> Option<u64> {
        Some(self.doc_len.load(Ordering::Relaxed)).filter(|&n| n != u64::MAX)
    }
}

pub(crate) struct HttpWorker {
    target: Arc<HttpTarget>,
    conn: Option<TcpStream>,
    buf: Vec<u8>,
    /// Only the first response's `Server:` header is kept (no allocation per request).
    want_server: bool,
}

impl Target for Arc<HttpTarget> {
    type Worker = HttpWorker;

    fn default_op(&self) -> &'static str {
        OP
    }

    async fn worker(&self, _id: usize, _inst: &mut Instants) -> Result<HttpWorker, OpError> {
        Ok(HttpWorker {
            target: self.clone(),
            conn: None,
            buf: vec![0; READ_BUF],
            want_server: true,
        })
    }
}

impl Worker for HttpWorker {
    async fn op(&mut self, inst: &mut Instants) -> Result<OpOk, OpError> {
        // Taken out for the duration of the exchange: if this future is cancelled, the
        // half-used connection is dropped rather than reused.
        let mut conn = self.conn.take();
        let mut reused = conn.is_some();
        loop {
            let mut stream = match conn.take() {
                Some(s) => s,
                None => {
                    let s = TcpStream::connect(self.target.addr).await.map_err(|e| {
                        OpError::new(OP, ErrorKind::Connect, format!("{}: {e}", self.target.addr))
                    })?;
                    let _ = s.set_nodelay(true);
                    inst.connected = Some(Instant::now());
                    s
                }
            };
            if let Err(e) = stream.write_all(&self.target.request).await {
                if reused {
                    // The server closed an idle keep-alive connection: not a failure.
                    reused = false;
                    continue;
                }
                return Err(OpError::new(
                    OP,
                    ErrorKind::from_io(&e, false),
                    e.to_string(),
                ));
            }
            inst.written = Some(Instant::now());
            match self.read_response(&mut stream, inst).await {
                Ok((mut ok, reusable)) => {
                    if reusable && self.target.keepalive {
                        self.conn = Some(stream);
                    }
                    // Only 2xx bodies are the document: a 404/503 error page among them
                    // is a Non-2xx response (counted apart, as ab does), not a wrong
                    // length, and a run that starts with one still learns the document's.
                    if ok.status.is_some_and(|code| (200..300).contains(&code)) {
                        let len = ok.body_bytes;
                        let first = self.target.doc_len.compare_exchange(
                            u64::MAX,
                            len,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        );
                        if first.is_err_and(|first| first != len) && !self.target.variable_length {
                            ok.failure = Some(ErrorKind::Length);
                        }
                    }
                    return Ok(ok);
                }
                Err(ReadError::ClosedBeforeResponse) if reused => {
                    reused = false;
                    inst.first_byte = None;
                    continue;
                }
                Err(ReadError::ClosedBeforeResponse) => {
                    return Err(OpError::new(
                        OP,
                        ErrorKind::Reset,
                        "connection closed before any response byte",
                    ));
                }
                Err(ReadError::Op(e)) => return Err(e),
            }
        }
    }
}

enum ReadError {
    /// EOF before the first byte: on a reused connection the server merely timed it out.
    ClosedBeforeResponse,
    Op(OpError),
}

fn fail(kind: ErrorKind, msg: impl Into<String>, wire: u64) -> ReadError {
    let mut e = OpError::new(OP, kind, msg);
    e.wire_bytes = wire;
    ReadError::Op(e)
}

/// How the body's end is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (204, 304).
    None,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked` (decode with [`ChunkedDecoder`]).
    Chunked,
    /// Until the server closes the connection.
    UntilClose,
}

/// A parsed response head; header values borrow from the parsed bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead<'a> {
    /// Bytes of the head, the final CRLF included; the body starts here.
    pub len: usize,
    pub status: u16,
    /// A 1xx response other than 101: skip it, another head follows.
    pub interim: bool,
    pub framing: Framing,
    /// The connection may carry another request after this response's body.
    pub keep_alive: bool,
    /// The `Server:` header's value.
    pub server: Option<&'a [u8]>,
    /// Every `Server-Timing` header's value, joined by `, `.
    pub server_timing: Option<String>,
}

/// Why a response head was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("bad response head: {0}")]
    Syntax(String),
    #[error("invalid Content-Length")]
    ContentLength,
    #[error("unsupported Transfer-Encoding")]
    TransferEncoding,
}

/// Parses the head of an HTTP/1.x response from the start of `buf`: `Ok(None)` when
/// more bytes are needed, the head when it is complete, an error when it can never be
/// valid. Up to 64 headers. This is the load generator's own parser (what every
/// response goes through), public so a fuzzer can drive it.
pub fn parse_response_head(buf: &[u8]) -> Result<Option<ResponseHead<'_>>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(buf) {
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HeadError::Syntax(e.to_string())),
        Ok(httparse::Status::Complete(n)) => n,
    };
    let code = resp.code.unwrap_or(0);
    let http11 = resp.version == Some(1);
    let mut length = None;
    let mut chunked = false;
    let mut close = !http11;
    let mut server = None;
    let mut server_timing: Option<String> = None;
    for h in resp.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok());
            match (v, length) {
                (Some(v), None) => length = Some(v),
                (Some(v), Some(l)) if v == l => {}
                _ => return Err(HeadError::ContentLength),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            if !chunked {
                return Err(HeadError::TransferEncoding);
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let t = token.trim_ascii();
                if t.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if t.eq_ignore_ascii_case(b"keep-alive") {
                    close = false;
                }
            }
        } else if name.eq_ignore_ascii_case("server") {
            server = Some(h.value);
        } else if name.eq_ignore_ascii_case("server-timing") {
            let v = String::from_utf8_lossy(h.value);
            match &mut server_timing {
                Some(prev) => {
                    prev.push_str(", ");
                    prev.push_str(&v);
                }
                None => server_timing = Some(v.into_owned()),
            }
        }
    }
    let framing = if code == 204 || code == 304 {
        Framing::None
    } else if chunked {
        Framing::Chunked
    } else if length.is_some() {
        Framing::Length(length.unwrap_or(0))
    } else {
        close = true;
        Framing::UntilClose
    };
    Ok(Some(ResponseHead {
        len: head_len,
        status: code,
        interim: (100..200).contains(&code) && code != 101,
        framing,
        keep_alive: !close,
        server,
        server_timing,
    }))
}

impl HttpWorker {
    /// Reads one response; returns it and whether the connection may be reused.
    async fn read_response<S: tokio::io::AsyncRead + Unpin>(
        &mut self,
        stream: &mut S,
        inst: &mut Instants,
    ) -> Result<(OpOk, bool), ReadError> {
        let buf = &mut self.buf;
        let mut filled = 0usize;
        let mut wire = 0u64;
        let (head_len, status, framing, reusable, server, server_timing) = loop {
            if filled == buf.len() || filled >= MAX_HEAD {
                return Err(fail(
                    ErrorKind::Malformed,
                    "response head larger than 64 KiB",
                    wire,
                ));
            }
            let n = match stream.read(&mut buf[filled..]).await {
                Ok(0) if filled == 0 => return Err(ReadError::ClosedBeforeResponse),
                Ok(0) => {
                    return Err(fail(
                        ErrorKind::Reset,
                        "connection closed inside the response head",
                        wire,
                    ));
                }
                Ok(n) => n,
                Err(e) if filled == 0 && e.kind() == std::io::ErrorKind::ConnectionReset => {
                    if inst.connected.is_none() {
                        return Err(ReadError::ClosedBeforeResponse);
                    }
                    return Err(fail(ErrorKind::Reset, e.to_string(), wire));
                }
                Err(e) => return Err(fail(ErrorKind::from_io(&e, false), e.to_string(), wire)),
            };
            if filled == 0 {
                inst.first_byte = Some(Instant::now());
            }
            filled += n;
            wire += n as u64;
            let head = match parse_response_head(&buf[..filled]) {
                Ok(None) => continue,
                Err(e) => return Err(fail(ErrorKind::Malformed, e.to_string(), wire)),
                Ok(Some(head)) => head,
            };
            if head.interim {
                // An interim response (100 Continue): drop it and read on.
                let n = head.len;
                buf.copy_within(n..filled, 0);
                filled -= n;
                continue;
            }
            let server = head
                .server
                .filter(|_| self.want_server)
                .map(|v| String::from_utf8_lossy(v).into_owned());
            break (
                head.len,
                head.status,
                head.framing,
                head.keep_alive,
                server,
                head.server_timing,
            );
        };
        if server.is_some() {
            self.want_server = false;
        }
        let mut body = 0u64;
        let mut reusable = reusable;
        let leftover = head_len..filled;
        match framing {
            Framing::None => {
                if !leftover.is_empty() {
                    reusable = false;
                }
            }
            Framing::Length(total) => {
                let have = (leftover.len() as u64).min(total);
                if leftover.len() as u64 > total {
                    reusable = false;
                }
                body = have;
                while body < total {
                    let want = ((total - body) as usize).min(buf.len());
                    let n = match stream.read(&mut buf[..want]).await {
                        Ok(0) => {
                            return Err(fail(
                                ErrorKind::Reset,
                                format!("connection closed after {body} of {total} body bytes"),
                                wire,
                            ));
                        }
                        Ok(n) => n,
                        Err(e) => {
                            return Err(fail(ErrorKind::from_io(&e, false), e.to_string(), wire));
                        }
                    };
                    body += n as u64;
                    wire += n as u64;
                }
            }
            Framing::Chunked => {
                let (got, clean) = read_chunked(stream, &mut buf[..], leftover, &mut wire).await?;
                body = got;
                reusable &= clean;
            }
            Framing::UntilClose => {
                body = leftover.len() as u64;
                loop {
                    match stream.read(&mut buf[..]).await {
                        Ok(0) => break,
                        Ok(n) => {
                            body += n as u64;
                            wire += n as u64;
                        }
                        Err(e) => {
                            return Err(fail(ErrorKind::from_io(&e, false), e.to_string(), wire));
                        }
                    }
                }
            }
        }
        Ok((
            OpOk {
                op: OP,
                status: Some(status),
                body_bytes: body,
                wire_bytes: wire,
                server_timing,
                failure: None,
                server_software: server,
                committed_bytes: 0,
            },
            reusable,
        ))
    }
}

/// Reads a chunked body to its end, `buf[first]` being what the head's read already
/// holds of it: its data bytes, and whether nothing followed it (the connection may be
/// reused). `wire` counts every byte read.
async fn read_chunked<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut [u8],
    first: std::ops::Range<usize>,
    wire: &mut u64,
) -> Result<(u64, bool), ReadError> {
    let mut dec = ChunkedDecoder::default();
    let (mut start, mut end) = (first.start, first.end);
    let mut body = 0u64;
    loop {
        let (got, consumed) = dec
            .feed(&buf[start..end])
            .map_err(|m| fail(ErrorKind::Malformed, m, *wire))?;
        body += got;
        if dec.done() {
            return Ok((body, start + consumed >= end));
        }
        let n = match stream.read(&mut buf[..]).await {
            Ok(0) => {
                return Err(fail(
                    ErrorKind::Reset,
                    "connection closed inside a chunked body",
                    *wire,
                ));
            }
            Ok(n) => n,
            Err(e) => {
                return Err(fail(ErrorKind::from_io(&e, false), e.to_string(), *wire));
            }
        };
        *wire += n as u64;
        start = 0;
        end = n;
    }
}

/// An incremental decoder of `Transfer-Encoding: chunked` that counts data bytes
/// (public, like [`parse_response_head`], for fuzzing).
#[derive(Debug, Default)]
pub struct ChunkedDecoder {
    state: ChunkState,
    size: u64,
    digits: usize,
}

#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
enum ChunkState {
    #[default]
    Size,
    Extension,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    TrailerStart,
    TrailerLine,
    EndLf,
    Done,
}

impl ChunkedDecoder {
    /// The terminating chunk and trailers have been read.
    pub fn done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Consumes `data`; returns (body bytes in it, bytes consumed). Stops at the end.
    pub fn feed(&mut self, data: &[u8]) -> Result<(u64, usize), &'static str> {
        use ChunkState::*;
        let mut i = 0;
        let mut body = 0u64;
        while i < data.len() && self.state != Done {
            let b = data[i];
            match self.state {
                Size => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        let v = (b as char).to_digit(16).unwrap_or(0) as u64;
                        self.digits += 1;
                        if self.digits > 15 {
                            return Err("chunk size too large");
                        }
                        self.size = self.size * 16 + v;
                    }
                    b';' | b' ' | b'\t' if self.digits > 0 => self.state = Extension,
                    b'\r' if self.digits > 0 => self.state = SizeLf,
                    _ => return Err("bad chunk size line"),
                },
                Extension => match b {
                    b'\r' => self.state = SizeLf,
                    b'\n' => return Err("bare LF in chunk size line"),
                    _ => {}
                },
                SizeLf => {
                    if b != b'\n' {
                        return Err("chunk size line not ended by CRLF");
                    }
                    self.digits = 0;
                    self.state = if self.size == 0 { TrailerStart } else { Data };
                }
                Data => {
                    let take = ((data.len() - i) as u64).min(self.size);
                    body += take;
                    self.size -= take;
                    i += take as usize;
                    if self.size == 0 {
                        self.state = DataCr;
                    }
                    continue;
                }
                DataCr => {
                    if b != b'\r' {
                        return Err("chunk data longer than its size");
                    }
                    self.state = DataLf;
                }
                DataLf => {
                    if b != b'\n' {
                        return Err("chunk data not ended by CRLF");
                    }
                    self.state = Size;
                }
                TrailerStart => match b {
                    b'\r' => self.state = EndLf,
                    _ => self.state = TrailerLine,
                },
                TrailerLine => {
                    if b == b'\n' {
                        self.state = TrailerStart;
                    }
                }
                EndLf => {
                    if b != b'\n' {
                        return Err("chunked body not ended by CRLF");
                    }
                    self.state = Done;
                }
                Done => unreachable!("loop stops at Done"),
            }
            i += 1;
        }
        Ok((body, i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_chunked_bodies_in_any_split() {
        let body =
            b"4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for split in 1..body.len() {
            let mut d = ChunkedDecoder::default();
            let end = body.len() - 4;
            let (a, ca) = d.feed(&body[..split]).unwrap();
            assert_eq!(ca, split.min(end));
            let (b, cb) = d.feed(&body[ca..]).unwrap();
            assert!(d.done(), "split {split}");
            assert_eq!(a + b, 23);
            assert_eq!(ca + cb, end, "stops before NEXT");
        }
    }

    #[test]
    fn parses_response_heads_for_every_framing() {
        let head = b"HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 5\r\nServer-Timing: a;dur=1\r\nServer-Timing: b;dur=2\r\n\r\nhello";
        let h = parse_response_head(head).unwrap().unwrap();
        assert_eq!(h.len, head.len() - 5);
        assert_eq!(
            (h.status, h.framing, h.keep_alive),
            (200, Framing::Length(5), true)
        );
        assert_eq!(h.server, Some(&b"x"[..]));
        assert_eq!(h.server_timing.as_deref(), Some("a;dur=1, b;dur=2"));
        for split in 0..head.len() - 5 {
            assert_eq!(parse_response_head(&head[..split]), Ok(None), "{split}");
        }
        let h = parse_response_head(b"HTTP/1.0 200 OK\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::UntilClose, false));
        let h = parse_response_head(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!((h.framing, h.keep_alive), (Framing::Chunked, false));
        let h = parse_response_head(b"HTTP/1.1 100 Continue\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.interim);
        let h = parse_response_head(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::None);
        for bad in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"HTTX/1.1 200 OK\r\n\r\n",
        ] {
            assert!(parse_response_head(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rejects_malformed_chunking() {
        for bad in [
            &b"x\r\n"[..],
            b"4\r\nWikiXX",
            b"4\nWiki",
            b"ffffffffffffffffff\r\n",
        ] {
            assert!(ChunkedDecoder::default().feed(bad).is_err(), "{bad:?}");
        }
    }
}

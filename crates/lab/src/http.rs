//! The one small blocking HTTP/1 client of the harness, for scraping metrics, checking
//! served bytes and driving a bench: [`get`] and [`request`] send one request per
//! connection and read to the server's close; a [`Connection`] keeps one connection
//! alive and reads responses framed by `Content-Length`, in order (pipelining works).

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::{LabError, Result};

/// One response: status code, the head as text (status line and headers, without the
/// blank line) and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Response {
    /// The value of header `name` (case-insensitive), trimmed.
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.head, name)
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Returns the status code and the body of `GET path` (HTTP/1.0, `Connection: close`).
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> Result<(u16, Vec<u8>)> {
    let r = request(
        addr,
        format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
        timeout,
        timeout,
    )?;
    Ok((r.status, r.body))
}

/// Sends `raw` (a whole request, as bytes, so a test can send what no client would) on a
/// new connection and reads the response until the server closes. `connect` bounds the
/// connection, `io` every read and write.
pub fn request(addr: SocketAddr, raw: &[u8], connect: Duration, io: Duration) -> Result<Response> {
    let mut s = TcpStream::connect_timeout(&addr, connect)
        .map_err(|e| LabError::io(format!("cannot connect to {addr}"), e))?;
    s.set_read_timeout(Some(io))
        .and_then(|()| s.set_write_timeout(Some(io)))
        .map_err(|e| LabError::io("cannot set socket timeouts", e))?;
    s.write_all(raw)
        .map_err(|e| LabError::io(format!("cannot send to {addr}"), e))?;
    let mut all = Vec::new();
    s.read_to_end(&mut all)
        .map_err(|e| LabError::io(format!("reading from {addr}"), e))?;
    let end = head_end(&all)
        .ok_or_else(|| LabError::Failed(format!("{addr} sent no complete HTTP header")))?;
    let (status, head) = parse_head(addr, &all[..end])?;
    Ok(Response {
        status,
        head,
        body: all[end..].to_vec(),
    })
}

/// Where the body starts (just after the blank line), if the head is complete.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn parse_head(addr: SocketAddr, raw: &[u8]) -> Result<(u16, String)> {
    let head = String::from_utf8_lossy(&raw[..raw.len() - 4]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| {
            LabError::Failed(format!(
                "{addr} sent a malformed status line: {:?}",
                head.lines().next()
            ))
        })?;
    Ok((status, head))
}

/// One keep-alive connection. Responses must carry `Content-Length`; bytes after one
/// response are kept for the next, so pipelined requests read back in order.
pub struct Connection {
    stream: TcpStream,
    addr: SocketAddr,
    /// Read buffer, reused for every response.
    buf: Vec<u8>,
    /// Bytes received but not yet consumed: the start of the next response.
    pending: Vec<u8>,
}

impl Connection {
    /// Connects with `TCP_NODELAY`; `timeout` bounds every read.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Connection> {
        let stream = TcpStream::connect(addr)
            .map_err(|e| LabError::io(format!("cannot connect to {addr}"), e))?;
        stream
            .set_nodelay(true)
            .and_then(|()| stream.set_read_timeout(Some(timeout)))
            .map_err(|e| LabError::io("cannot set socket options", e))?;
        Ok(Connection {
            stream,
            addr,
            buf: vec![0; 256 * 1024],
            pending: Vec::new(),
        })
    }

    /// The socket, for writing raw (e.g. pipelined) requests and reading what follows.
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Sends raw request bytes.
    pub fn send(&mut self, raw: &[u8]) -> Result<()> {
        self.stream
            .write_all(raw)
            .map_err(|e| LabError::io(format!("cannot send to {}", self.addr), e))
    }

    /// Bytes read past the last response (nothing, when the server sent only what was
    /// asked for).
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// Reads one response and returns it whole.
    pub fn read_response(&mut self) -> Result<Response> {
        let mut body = Vec::new();
        let (status, head, _) = self.read_one(Some(&mut body))?;
        Ok(Response { status, head, body })
    }

    /// `GET path` (HTTP/1.1, keep-alive); reads the whole body without keeping it and
    /// returns its length. A status other than 200 is an error.
    pub fn get_len(&mut self, path: &str) -> Result<usize> {
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: servelab-bench\r\n\r\n",
            self.addr
        );
        self.send(req.as_bytes())?;
        let (status, head, len) = self.read_one(None)?;
        if status != 200 {
            return Err(LabError::Failed(format!(
                "unexpected status: {}",
                head.lines().next().unwrap_or("")
            )));
        }
        Ok(len)
    }

    /// Reads one head and its `Content-Length` body, appending the body to `keep` when
    /// given; returns status, head and body length.
    fn read_one(&mut self, mut keep: Option<&mut Vec<u8>>) -> Result<(u16, String, usize)> {
        let end = loop {
            if let Some(end) = head_end(&self.pending) {
                break end;
            }
            if self.pending.len() > self.buf.len() {
                return Err(LabError::Failed("response head too large".into()));
            }
            let n = self.fill()?;
            self.pending.extend_from_slice(&self.buf[..n]);
        };
        let (status, head) = parse_head(self.addr, &self.pending[..end])?;
        let len: usize = header(&head, "content-length")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| LabError::Failed("no Content-Length".into()))?;
        self.pending.drain(..end);
        // The part of the body already received, then the rest straight from the socket.
        let have = self.pending.len().min(len);
        if let Some(k) = keep.as_deref_mut() {
            k.extend_from_slice(&self.pending[..have]);
        }
        self.pending.drain(..have);
        let mut left = len - have;
        while left > 0 {
            let want = left.min(self.buf.len());
            let n = self.fill_at_most(want)?;
            if let Some(k) = keep.as_deref_mut() {
                k.extend_from_slice(&self.buf[..n]);
            }
            left -= n;
        }
        Ok((status, head, len))
    }

    fn fill(&mut self) -> Result<usize> {
        let len = self.buf.len();
        self.fill_at_most(len)
    }

    fn fill_at_most(&mut self, want: usize) -> Result<usize> {
        let n = self
            .stream
            .read(&mut self.buf[..want])
            .map_err(|e| LabError::io(format!("reading from {}", self.addr), e))?;
        if n == 0 {
            return Err(LabError::io(
                format!("reading from {}", self.addr),
                std::io::ErrorKind::UnexpectedEof.into(),
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server that answers whatever it is sent with `replies`, then closes.
    fn serve_once(replies: &'static [u8]) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 1024];
            let _ = s.read(&mut b);
            s.write_all(replies).unwrap();
        });
        addr
    }

    #[test]
    fn pipelined_responses_read_back_in_order() {
        let addr = serve_once(
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 404 Not Found\r\ncontent-length:  2\r\nX-A: b\r\n\r\nno",
        );
        let mut c = Connection::connect(addr, Duration::from_secs(5)).unwrap();
        c.send(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let a = c.read_response().unwrap();
        assert_eq!((a.status, &a.body[..]), (200, &b"abc"[..]));
        let b = c.read_response().unwrap();
        assert_eq!((b.status, &b.body[..]), (404, &b"no"[..]));
        assert_eq!(b.header("x-a"), Some("b"));
        assert!(c.pending().is_empty());
        assert!(c.read_response().is_err(), "closed after the last one");
    }

    #[test]
    fn get_reads_to_close_and_checks_the_status_line() {
        let addr = serve_once(b"HTTP/1.0 200 OK\r\nServer: t\r\n\r\nbody");
        let (status, body) = get(addr, "/", Duration::from_secs(5)).unwrap();
        assert_eq!((status, &body[..]), (200, &b"body"[..]));
        let addr = serve_once(b"nonsense\r\n\r\n");
        assert!(get(addr, "/", Duration::from_secs(5)).is_err());
    }
}

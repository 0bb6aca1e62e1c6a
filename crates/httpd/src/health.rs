//! `httpd --healthcheck`: one `HEAD /` to the running server, for container probes.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long the whole probe (connect, request, status line) may take.
pub const TIMEOUT: Duration = Duration::from_secs(3);

pub use service::probe_addr;

/// Why the probe found the server unhealthy: the URL it asked, and what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("http://{addr}/")]
pub struct ProbeError {
    pub addr: SocketAddr,
    #[source]
    pub failure: ProbeFailure,
}

/// What went wrong with the probe's one `HEAD /`.
#[derive(Debug, thiserror::Error)]
pub enum ProbeFailure {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("connect failed")]
    Connect(#[source] std::io::Error),
    #[error("send failed")]
    Send(#[source] std::io::Error),
    #[error("read failed")]
    Read(#[source] std::io::Error),
    #[error("connection closed without an answer")]
    Closed,
    #[error("not an HTTP answer: {0:?}")]
    NotHttp(String),
}

/// Sends `HEAD /` to `addr` and expects an HTTP status line within `timeout`. Any status
/// counts (a 503 from an unreachable NFS backend still means the server runs). `Ok`
/// carries a one-line description.
pub async fn probe(addr: SocketAddr, timeout: Duration) -> Result<String, ProbeError> {
    let started = std::time::Instant::now();
    let status = tokio::time::timeout(timeout, head(addr))
        .await
        .unwrap_or(Err(ProbeFailure::Timeout(timeout)))
        .map_err(|failure| ProbeError { addr, failure })?;
    Ok(format!(
        "http://{addr}/: HTTP {status} in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    ))
}

async fn head(addr: SocketAddr) -> Result<u16, ProbeFailure> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(ProbeFailure::Connect)?;
    let req = format!(
        "HEAD / HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: httpd-healthcheck\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(req.as_bytes())
        .await
        .map_err(ProbeFailure::Send)?;
    let mut buf = Vec::with_capacity(64);
    while !buf.contains(&b'\n') && buf.len() < 1024 {
        let mut chunk = [0u8; 256];
        let n = stream.read(&mut chunk).await.map_err(ProbeFailure::Read)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    parse_status(&buf)
}

/// The status code of an HTTP/1.x status line at the start of `buf`.
fn parse_status(buf: &[u8]) -> Result<u16, ProbeFailure> {
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end().splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    match code.parse::<u16>() {
        Ok(c) if version.starts_with("HTTP/1.") && (100..=599).contains(&c) => Ok(c),
        _ if buf.is_empty() => Err(ProbeFailure::Closed),
        _ => Err(ProbeFailure::NotHttp(line.trim_end().to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        assert_eq!(parse_status(b"HTTP/1.1 200 OK\r\n").unwrap(), 200);
        assert_eq!(
            parse_status(b"HTTP/1.0 503 Service Unavailable\r\nx").unwrap(),
            503
        );
        assert!(parse_status(b"").is_err());
        assert!(parse_status(b"SSH-2.0-OpenSSH\r\n").is_err());
        assert!(parse_status(b"HTTP/1.1 abc\r\n").is_err());
    }

    #[tokio::test]
    async fn non_http_and_silent_servers_are_unhealthy() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let _srv = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            s.write_all(b"SSH-2.0-nope\r\n").await.unwrap();
            let (s2, _) = l.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
            drop((s, s2));
        });
        let err = probe(addr, TIMEOUT).await.unwrap_err();
        let err = crate::Chain(&err).to_string();
        assert!(err.contains("not an HTTP answer"), "{err}");
        let err = probe(addr, Duration::from_millis(300)).await.unwrap_err();
        let err = crate::Chain(&err).to_string();
        assert!(err.contains("no answer within"), "{err}");
    }
}

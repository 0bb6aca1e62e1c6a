//! The metrics endpoint of both servers: `GET /metrics` (Prometheus text) and
//! `GET /metrics.json` from a [`Source`], on a small HTTP/1 responder of its own — one
//! request per connection (`Connection: close`), GET and HEAD only, the request head
//! bounded in size and time, and at most [`Limits::max_connections`] connections served
//! at once (more wait in the listen backlog, so a flood cannot exhaust descriptors).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// What a metrics endpoint serves. A `latency` registry is one; a server with more to
/// say (httpd's data cache) wraps its registry in a type of its own.
pub trait Source: Send + Sync + 'static {
    /// The Prometheus text exposition served at `/metrics`.
    fn prometheus(&self) -> String;
    /// The JSON document served at `/metrics.json`.
    fn json(&self) -> serde_json::Value;
}

impl Source for latency::Registry {
    fn prometheus(&self) -> String {
        latency::prometheus::render(&self.snapshot())
    }
    fn json(&self) -> serde_json::Value {
        self.snapshot().to_json()
    }
}

/// The endpoint's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections answered at once; a scraper needs one, so a few dozen is plenty.
    pub max_connections: usize,
    /// Time a client has to send its request head (else 400 and close).
    pub head_timeout: Duration,
    /// Largest request head read (else 400 and close).
    pub max_head: usize,
    /// Time a client has to take the whole response.
    pub send_timeout: Duration,
    /// On shutdown, how long answers in flight may take to finish.
    pub grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            head_timeout: Duration::from_secs(5),
            max_head: 8192,
            send_timeout: Duration::from_secs(10),
            grace: Duration::from_secs(5),
        }
    }
}

/// Prometheus' text format version 0.0.4.
pub const PROMETHEUS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves `source` on `listener` until `shutdown` resolves, then stops accepting and
/// lets answers in flight finish (up to `limits.grace`).
pub async fn serve(
    listener: TcpListener,
    source: Arc<dyn Source>,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let max = limits.max_connections.max(1);
    let permits = Arc::new(Semaphore::new(max));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
        };
        let (sock, peer) = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!("metrics accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let source = source.clone();
        tokio::spawn(async move {
            if let Err(e) = answer(sock, &*source, &limits).await {
                tracing::debug!(%peer, "metrics request failed: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(limits.grace, permits.acquire_many(all)).await;
    Ok(())
}

/// Reads one request head and answers it.
async fn answer(mut sock: TcpStream, source: &dyn Source, limits: &Limits) -> std::io::Result<()> {
    let head = match tokio::time::timeout(
        limits.head_timeout,
        read_head(&mut sock, limits.max_head),
    )
    .await
    {
        Ok(r) => r?,
        Err(_) => None,
    };
    let (status, ctype, body, head_only) = match head.as_deref().map(request_line) {
        None => (
            "400 Bad Request",
            "text/plain; charset=utf-8",
            b"bad request\n".to_vec(),
            false,
        ),
        Some((method, path)) => {
            let head_only = method == "HEAD";
            let (status, ctype, body) = route(method, path, source);
            (status, ctype, body, head_only)
        }
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
        body.len(),
        if status.starts_with("405") { "Allow: GET, HEAD\r\n" } else { "" },
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(&body);
    }
    let send = async {
        sock.write_all(&out).await?;
        sock.shutdown().await?;
        // Closing with unread request bytes (an oversized head) would send a reset that
        // can destroy the answer before the client reads it: take what is left, bounded.
        let mut rest = [0u8; 4096];
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match tokio::time::timeout(Duration::from_millis(200), sock.read(&mut rest)).await {
                Ok(Ok(n)) if n > 0 => left = left.saturating_sub(n),
                _ => break,
            }
        }
        Ok(())
    };
    tokio::time::timeout(limits.send_timeout, send)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// The request head up to its blank line; `None` when the client closed first or sent
/// more than `max` bytes without one.
async fn read_head(sock: &mut TcpStream, max: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > max {
            return Ok(None);
        }
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(Some(buf));
        }
    }
}

/// The method and path (query dropped) of a request head's first line.
fn request_line(head: &[u8]) -> (&str, &str) {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = std::str::from_utf8(line).unwrap_or("");
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    (method, target.split('?').next().unwrap_or(""))
}

/// Status line, Content-Type and body for `method path`.
fn route(method: &str, path: &str, source: &dyn Source) -> (&'static str, &'static str, Vec<u8>) {
    const TEXT: &str = "text/plain; charset=utf-8";
    if method != "GET" && method != "HEAD" {
        return (
            "405 Method Not Allowed",
            TEXT,
            b"GET or HEAD only\n".to_vec(),
        );
    }
    match path {
        "/metrics" => ("200 OK", PROMETHEUS_TYPE, source.prometheus().into_bytes()),
        "/metrics.json" => (
            "200 OK",
            "application/json",
            source.json().to_string().into_bytes(),
        ),
        _ => (
            "404 Not Found",
            TEXT,
            b"404 Not Found: try /metrics or /metrics.json\n".to_vec(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl Source for Fixed {
        fn prometheus(&self) -> String {
            "up 1\n".into()
        }
        fn json(&self) -> serde_json::Value {
            serde_json::json!({"up": 1})
        }
    }

    /// An endpoint over [`Fixed`] with `limits`; the stop sender ends it.
    async fn start(
        limits: Limits,
    ) -> (
        std::net::SocketAddr,
        crate::Stop,
        tokio::task::JoinHandle<std::io::Result<()>>,
    ) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let stop = crate::Stop::new();
        let task = tokio::spawn(serve(l, Arc::new(Fixed), limits, stop.stopped()));
        (addr, stop, task)
    }

    async fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(request).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn paths_methods_and_formats() {
        let (addr, stop, task) = start(Limits::default()).await;
        let text = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(
            text.contains(&format!("Content-Type: {PROMETHEUS_TYPE}\r\n")),
            "{text}"
        );
        assert!(text.contains("Connection: close\r\n") && text.ends_with("\r\n\r\nup 1\n"));
        let json = exchange(addr, b"GET /metrics.json?x=1 HTTP/1.0\r\n\r\n").await;
        assert!(
            json.contains("application/json") && json.ends_with("{\"up\":1}"),
            "{json}"
        );
        let head = exchange(addr, b"HEAD /metrics HTTP/1.1\r\n\r\n").await;
        assert!(head.starts_with("HTTP/1.1 200") && head.contains("Content-Length: 5\r\n"));
        assert!(head.ends_with("\r\n\r\n"), "HEAD has no body: {head}");
        let missing = exchange(addr, b"GET /nope HTTP/1.1\r\n\r\n").await;
        assert!(missing.starts_with("HTTP/1.1 404") && missing.contains("try /metrics"));
        let post = exchange(addr, b"POST /metrics HTTP/1.1\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405") && post.contains("Allow: GET, HEAD\r\n"));
        let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(9000));
        let out = exchange(addr, huge.as_bytes()).await;
        assert!(out.starts_with("HTTP/1.1 400"), "{out:?}");
        stop.stop();
        task.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_slow_client_gets_400_after_the_head_timeout() {
        let limits = Limits {
            head_timeout: Duration::from_millis(100),
            ..Limits::default()
        };
        let (addr, stop, task) = start(limits).await;
        let t = std::time::Instant::now();
        let out = exchange(addr, b"GET /metrics HTTP/1.1\r\n").await;
        assert!(out.starts_with("HTTP/1.1 400"), "{out}");
        assert!(t.elapsed() < Duration::from_secs(3));
        stop.stop();
        task.await.unwrap().unwrap();
    }

    /// With a cap of one, a second client is answered only once the first is done.
    #[tokio::test]
    async fn connections_beyond_the_cap_wait() {
        let limits = Limits {
            max_connections: 1,
            ..Limits::default()
        };
        let (addr, stop, task) = start(limits).await;
        let mut first = TcpStream::connect(addr).await.unwrap();
        first.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let second = tokio::spawn(exchange(addr, b"GET /metrics HTTP/1.1\r\n\r\n"));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !second.is_finished(),
            "the second connection was served beside the first"
        );
        first.write_all(b"\r\n").await.unwrap();
        let mut out = String::new();
        first.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        let out = tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("served once the first is done")
            .unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        stop.stop();
        task.await.unwrap().unwrap();
    }
}

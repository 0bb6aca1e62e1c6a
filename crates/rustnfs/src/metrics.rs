//! A tiny HTTP/1.1 endpoint for `/metrics` (Prometheus text) and `/metrics.json`.

use std::sync::Arc;
use std::time::Duration;

use latency::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, warn};

use crate::Error;

/// Serves `/metrics` and `/metrics.json` on `listener` until `shutdown` resolves.
pub async fn serve_metrics(
    listener: TcpListener,
    registry: Arc<Registry>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            r = listener.accept() => match r {
                Ok((sock, peer)) => {
                    let registry = registry.clone();
                    tokio::spawn(async move {
                        if let Err(e) = answer(sock, &registry).await {
                            debug!(%peer, "metrics request failed: {e}");
                        }
                    });
                }
                Err(e) => {
                    warn!("metrics accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

async fn answer(mut sock: TcpStream, registry: &Registry) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let read_head = async {
        let mut chunk = [0u8; 1024];
        loop {
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                return Ok(false);
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.windows(4).any(|w| w == b"\r\n\r\n") {
                return Ok(true);
            }
            if buf.len() > 8192 {
                return Ok(false);
            }
        }
    };
    let complete: std::io::Result<bool> =
        match tokio::time::timeout(Duration::from_secs(5), read_head).await {
            Ok(r) => r,
            Err(_) => Ok(false),
        };
    if !complete? {
        return respond(&mut sock, "400 Bad Request", "text/plain", b"bad request\n").await;
    }
    let line = buf.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if method != "GET" && method != "HEAD" {
        return respond(
            &mut sock,
            "405 Method Not Allowed",
            "text/plain",
            b"GET only\n",
        )
        .await;
    }
    let (ctype, body) = match path {
        "/metrics" => (
            "text/plain; version=0.0.4; charset=utf-8",
            latency::prometheus::render(&registry.snapshot()).into_bytes(),
        ),
        "/metrics.json" => (
            "application/json",
            registry.snapshot().to_json().to_string().into_bytes(),
        ),
        _ => {
            return respond(&mut sock, "404 Not Found", "text/plain", b"try /metrics\n").await;
        }
    };
    let body = if method == "HEAD" { &[][..] } else { &body[..] };
    respond(&mut sock, "200 OK", ctype, body).await
}

async fn respond(
    sock: &mut TcpStream,
    status: &str,
    ctype: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(body).await?;
    sock.shutdown().await
}

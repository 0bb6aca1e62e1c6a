//! A minimal blocking HTTP/1.0 GET for scraping metrics and checking served bytes: one
//! request per connection, the body read to the server's close.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::{LabError, Result};

/// Returns the status code and the body of `GET path`.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| LabError::io(format!("cannot connect to {addr}"), e))?;
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .map_err(|e| LabError::io("cannot set socket timeouts", e))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| LabError::io(format!("cannot send to {addr}"), e))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| LabError::io(format!("reading from {addr}"), e))?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| LabError::Failed(format!("{addr} sent no complete HTTP header")))?;
    let head = String::from_utf8_lossy(&raw[..split]);
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
    Ok((status, raw[split + 4..].to_vec()))
}

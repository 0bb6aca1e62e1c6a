//! The HTTP clients the httpd tests drive: `curl` and `ab` as real clients, raw
//! requests on the harness's client (`lab::http`) for what curl would normalise away, a
//! reader that stalls, and the dataset the tests serve.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common;

/// Sends raw request bytes on a new connection and reads the response until the server
/// closes: (status, head, body).
pub fn try_raw(addr: SocketAddr, request: &str) -> lab::Result<(u16, String, Vec<u8>)> {
    let r = lab::http::request(
        addr,
        request.as_bytes(),
        Duration::from_secs(2),
        Duration::from_secs(15),
    )?;
    Ok((r.status, r.head, r.body))
}

/// `GET target` (HTTP/1.1, `Connection: close`) on a new connection.
pub fn raw_get(addr: SocketAddr, target: &str) -> (u16, String, Vec<u8>) {
    try_raw(
        addr,
        &format!("GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"),
    )
    .unwrap()
}

pub fn curl(args: &[&str]) -> Output {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "60"])
        .args(args)
        .output()
        .expect("running curl");
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// curl's `-D -` output headers → (status, lowercase name → value).
pub fn curl_head(args: &[&str]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    let mut all = vec!["-D", "-", "-o", body.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = curl(&all);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut lines = text.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers, std::fs::read(&body).unwrap_or_default())
}

pub fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
    h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The dataset plus `sub/note.txt` and a 200 kB `mid.bin`.
pub fn dataset() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let www = common::write_dataset(&dir.path().join("www"));
    std::fs::create_dir(www.join("sub")).unwrap();
    std::fs::write(www.join("sub/note.txt"), "a note\n").unwrap();
    std::fs::write(
        www.join("mid.bin"),
        lab::dataset::pseudo_random_bytes(200_000, 3),
    )
    .unwrap();
    (dir, www)
}

/// Runs `ab -n 100 -c 10` and checks every request succeeded with the full length.
pub fn ab_100(url: &str, expect_len: usize) {
    let out = common::run_ok(Command::new("ab").args(["-n", "100", "-c", "10", "-s", "30", url]));
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split(':').nth(1))
            .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
            .unwrap_or_else(|| panic!("no {name} in ab output:\n{text}"))
    };
    assert_eq!(field("Complete requests"), "100", "{text}");
    assert_eq!(field("Failed requests"), "0", "{text}");
    assert!(!text.contains("Non-2xx"), "{text}");
    assert_eq!(field("Document Length"), expect_len.to_string(), "{text}");
}

/// A client that sends `GET target` and never reads: a socket with a tiny receive buffer
/// (set before connect, so the advertised window stays small).
pub fn stalled_client(addr: SocketAddr, target: &str) -> TcpStream {
    stalled_client_from(addr, target, std::net::Ipv4Addr::UNSPECIFIED)
}

/// [`stalled_client`] from the loopback address `from` (`0.0.0.0`: the kernel's choice),
/// so an attack can come from several client addresses (127.0.0.2, 127.0.0.3, …).
pub fn stalled_client_from(addr: SocketAddr, target: &str, from: std::net::Ipv4Addr) -> TcpStream {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(v4) = addr else {
        panic!("IPv4 test address expected")
    };
    // SAFETY: a fresh socket we own; setsockopt/connect with correctly sized arguments;
    // the descriptor is handed to TcpStream, which closes it.
    let stream = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let small: libc::c_int = 4096;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&small as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        let sockaddr = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(ip).to_be(),
            },
            sin_zero: [0; 8],
        };
        if !from.is_unspecified() {
            let local = sockaddr(from, 0);
            let rc = libc::bind(
                fd,
                (&local as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            );
            assert_eq!(rc, 0, "bind {from}: {}", std::io::Error::last_os_error());
        }
        let sa = sockaddr(*v4.ip(), v4.port());
        let rc = libc::connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(rc, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    };
    let mut s = stream;
    s.write_all(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .unwrap();
    s
}

/// Downloads `target` over a new connection; returns (status, body, time taken).
pub fn timed_get(addr: SocketAddr, target: &str) -> (u16, Vec<u8>, Duration) {
    let t = Instant::now();
    let (status, _, body) = raw_get(addr, target);
    (status, body, t.elapsed())
}

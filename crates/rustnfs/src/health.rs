//! `rustnfs --healthcheck`: one RPC NULL call to the NFS program, for container probes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::rpc::{NFS_PROG, record_mark};

/// How long the whole probe (connect, call, reply) may take.
pub const TIMEOUT: Duration = Duration::from_secs(3);

/// The address to probe for a server listening on `listen`: a wildcard address
/// (`0.0.0.0`, `[::]`) becomes the loopback address of the same family.
pub fn probe_addr(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

/// Sends an RPC NULL call to NFS v3 at `addr` and expects an accepted, successful reply
/// within `timeout`. `Ok` carries a one-line description, `Err` the reason.
pub async fn probe(addr: SocketAddr, timeout: Duration) -> Result<String, String> {
    let started = std::time::Instant::now();
    tokio::time::timeout(timeout, null_call(addr))
        .await
        .map_err(|_| format!("nfs://{addr}: no answer within {timeout:?}"))?
        .map_err(|e| format!("nfs://{addr}: {e}"))?;
    Ok(format!(
        "nfs://{addr}: NFSv3 NULL accepted in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    ))
}

const XID: u32 = 0x6865_616c; // "heal"

async fn null_call(addr: SocketAddr) -> Result<(), String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect failed: {e}"))?;
    // CALL: xid, msg_type 0, rpcvers 2, prog, vers 3, proc 0 (NULL), AUTH_NULL cred + verf.
    let words = [XID, 0, 2, NFS_PROG, 3, 0, 0, 0, 0, 0];
    let body: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    let mut msg = record_mark(body.len()).to_vec();
    msg.extend_from_slice(&body);
    stream
        .write_all(&msg)
        .await
        .map_err(|e| format!("send failed: {e}"))?;
    let mut mark = [0u8; 4];
    stream
        .read_exact(&mut mark)
        .await
        .map_err(|e| format!("no reply ({e}; is 127.0.0.1 outside --allow / PERMITTED?)"))?;
    let len = (u32::from_be_bytes(mark) & 0x7fff_ffff) as usize;
    if !(24..=4096).contains(&len) {
        return Err(format!("reply record of {len} bytes is not an RPC reply"));
    }
    let mut reply = vec![0u8; len];
    stream
        .read_exact(&mut reply)
        .await
        .map_err(|e| format!("reply cut short: {e}"))?;
    check_reply(&reply)
}

/// Checks an RPC reply to [`XID`] is MSG_ACCEPTED with accept_stat SUCCESS.
fn check_reply(reply: &[u8]) -> Result<(), String> {
    let word = |i: usize| -> Option<u32> {
        reply
            .get(i * 4..i * 4 + 4)
            .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")))
    };
    let short = || "reply too short".to_string();
    if word(0).ok_or_else(short)? != XID || word(1).ok_or_else(short)? != 1 {
        return Err("not a reply to the NULL call".into());
    }
    if word(2).ok_or_else(short)? != 0 {
        return Err("RPC call denied (MSG_DENIED)".into());
    }
    // Verifier: flavor, length, body padded to 4 bytes; then accept_stat.
    let verf_len = word(4).ok_or_else(short)? as usize;
    let at = 5 + verf_len.div_ceil(4);
    match word(at).ok_or_else(short)? {
        0 => Ok(()),
        1 => Err("NFS program unavailable (PROG_UNAVAIL)".into()),
        2 => Err("NFS version 3 not supported (PROG_MISMATCH)".into()),
        n => Err(format!("call not accepted (accept_stat {n})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_listen_becomes_loopback() {
        let p = |s: &str| probe_addr(s.parse().unwrap()).to_string();
        assert_eq!(p("0.0.0.0:2049"), "127.0.0.1:2049");
        assert_eq!(p("[::]:2049"), "[::1]:2049");
        assert_eq!(p("10.1.2.3:12049"), "10.1.2.3:12049");
    }

    #[test]
    fn reply_checks() {
        let words = |w: &[u32]| -> Vec<u8> { w.iter().flat_map(|x| x.to_be_bytes()).collect() };
        assert!(check_reply(&words(&[XID, 1, 0, 0, 0, 0])).is_ok());
        assert!(check_reply(&words(&[XID, 1, 0, 1, 4, 7, 0])).is_ok());
        let err = check_reply(&words(&[XID, 1, 0, 0, 0, 1])).unwrap_err();
        assert!(err.contains("PROG_UNAVAIL"), "{err}");
        assert!(check_reply(&words(&[XID, 1, 0, 0, 0, 2])).is_err());
        assert!(check_reply(&words(&[XID, 1, 1, 0, 0, 0])).is_err());
        assert!(check_reply(&words(&[XID + 1, 1, 0, 0, 0, 0])).is_err());
        assert!(check_reply(&words(&[XID, 1, 0])).is_err());
    }

    #[tokio::test]
    async fn nothing_listening_is_unhealthy_fast() {
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let err = probe(addr, TIMEOUT).await.unwrap_err();
        assert!(err.contains("connect failed"), "{err}");
    }

    #[tokio::test]
    async fn silent_server_times_out() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let _held = tokio::spawn(async move {
            let (s, _) = l.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(10)).await;
            drop(s);
        });
        let t = std::time::Instant::now();
        let err = probe(addr, Duration::from_millis(300)).await.unwrap_err();
        assert!(err.contains("no answer within"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}

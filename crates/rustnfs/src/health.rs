//! `rustnfs --healthcheck`: one RPC NULL call to the NFS program, for container probes.

use std::net::SocketAddr;
use std::time::Duration;

use oncrpc::msg::{self, OpaqueAuth, Rejection, flavor};
use oncrpc::record::{self, RecordError, RecordReader};
use tokio::net::TcpStream;

use crate::rpc::NFS_PROG;

/// How long the whole probe (connect, call, reply) may take.
pub const TIMEOUT: Duration = Duration::from_secs(3);

pub use service::probe_addr;

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
    // NULL (procedure 0) of NFS v3, AUTH_NONE.
    let mut call = Vec::new();
    let none = OpaqueAuth {
        flavor: flavor::AUTH_NONE,
        body: &[],
    };
    msg::encode_call(&mut call, XID, NFS_PROG, 3, 0, none);
    record::write(&mut stream, &call)
        .await
        .map_err(|e| format!("send failed: {e}"))?;
    let reply = RecordReader::new(4096)
        .read(&mut stream)
        .await
        .map_err(|e| match e {
            RecordError::TooLarge { len, .. } => {
                format!("reply record of {len} bytes is not an RPC reply")
            }
            e => format!("no reply ({e}; is 127.0.0.1 outside --allow / PERMITTED?)"),
        })?
        .ok_or("no reply (connection closed; is 127.0.0.1 outside --allow / PERMITTED?)")?;
    check_reply(&reply)
}

/// Checks an RPC reply to [`XID`] is MSG_ACCEPTED with accept_stat SUCCESS.
fn check_reply(reply: &[u8]) -> Result<(), String> {
    let h = msg::decode_reply(reply).map_err(|e| format!("{e}"))?;
    if h.xid != XID {
        return Err("not a reply to the NULL call".into());
    }
    match h.status {
        Ok(()) => Ok(()),
        Err(Rejection::ProgUnavail) => Err("NFS program unavailable (PROG_UNAVAIL)".into()),
        Err(Rejection::ProgMismatch { .. }) => {
            Err("NFS version 3 not supported (PROG_MISMATCH)".into())
        }
        Err(r @ (Rejection::RpcMismatch | Rejection::Auth(_))) => {
            Err(format!("RPC call denied (MSG_DENIED, {})", r.label()))
        }
        Err(r) => Err(format!("call not accepted ({})", r.label())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let denied = check_reply(&words(&[XID, 1, 1, 1, 5])).unwrap_err();
        assert!(
            denied.contains("AUTH_TOOWEAK") || denied.contains("AUTH_ERROR"),
            "{denied}"
        );
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

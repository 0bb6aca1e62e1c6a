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

/// Why the probe found the server unhealthy: the URL it asked, and what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("nfs://{addr}")]
pub struct ProbeError {
    pub addr: SocketAddr,
    #[source]
    pub failure: ProbeFailure,
}

/// What went wrong with the probe's one NULL call.
#[derive(Debug, thiserror::Error)]
pub enum ProbeFailure {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("connect failed")]
    Connect(#[source] std::io::Error),
    #[error("send failed")]
    Send(#[source] std::io::Error),
    #[error("reply record of {0} bytes is not an RPC reply")]
    TooLarge(usize),
    #[error("no reply (is 127.0.0.1 outside --allow / PERMITTED?)")]
    NoReply(#[source] RecordError),
    #[error("no reply (connection closed; is 127.0.0.1 outside --allow / PERMITTED?)")]
    Closed,
    #[error("not an RPC reply")]
    NotAReply(#[source] msg::DecodeError),
    #[error("not a reply to the NULL call")]
    OtherXid,
    #[error("NFS program unavailable (PROG_UNAVAIL)")]
    ProgUnavail,
    #[error("NFS version 3 not supported (PROG_MISMATCH)")]
    ProgMismatch,
    /// MSG_DENIED, with the rejection's label.
    #[error("RPC call denied (MSG_DENIED, {0})")]
    Denied(&'static str),
    /// Accepted with another accept_stat, with its label.
    #[error("call not accepted ({0})")]
    NotAccepted(&'static str),
}

/// Sends an RPC NULL call to NFS v3 at `addr` and expects an accepted, successful reply
/// within `timeout`. `Ok` carries a one-line description.
pub async fn probe(addr: SocketAddr, timeout: Duration) -> Result<String, ProbeError> {
    let started = std::time::Instant::now();
    tokio::time::timeout(timeout, null_call(addr))
        .await
        .unwrap_or(Err(ProbeFailure::Timeout(timeout)))
        .map_err(|failure| ProbeError { addr, failure })?;
    Ok(format!(
        "nfs://{addr}: NFSv3 NULL accepted in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    ))
}

const XID: u32 = 0x6865_616c; // "heal"

async fn null_call(addr: SocketAddr) -> Result<(), ProbeFailure> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(ProbeFailure::Connect)?;
    // NULL (procedure 0) of NFS v3, AUTH_NONE.
    let mut call = Vec::new();
    let none = OpaqueAuth {
        flavor: flavor::AUTH_NONE,
        body: &[],
    };
    msg::encode_call(&mut call, XID, NFS_PROG, 3, 0, none);
    record::write(&mut stream, &call)
        .await
        .map_err(ProbeFailure::Send)?;
    let reply = RecordReader::new(4096)
        .read(&mut stream)
        .await
        .map_err(|e| match e {
            RecordError::TooLarge { len, .. } => ProbeFailure::TooLarge(len),
            e => ProbeFailure::NoReply(e),
        })?
        .ok_or(ProbeFailure::Closed)?;
    check_reply(&reply)
}

/// Checks an RPC reply to [`XID`] is MSG_ACCEPTED with accept_stat SUCCESS.
fn check_reply(reply: &[u8]) -> Result<(), ProbeFailure> {
    let h = msg::decode_reply(reply).map_err(ProbeFailure::NotAReply)?;
    if h.xid != XID {
        return Err(ProbeFailure::OtherXid);
    }
    match h.status {
        Ok(()) => Ok(()),
        Err(Rejection::ProgUnavail) => Err(ProbeFailure::ProgUnavail),
        Err(Rejection::ProgMismatch { .. }) => Err(ProbeFailure::ProgMismatch),
        Err(r @ (Rejection::RpcMismatch | Rejection::Auth(_))) => {
            Err(ProbeFailure::Denied(r.label()))
        }
        Err(r) => Err(ProbeFailure::NotAccepted(r.label())),
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
        assert!(err.to_string().contains("PROG_UNAVAIL"), "{err}");
        assert!(check_reply(&words(&[XID, 1, 0, 0, 0, 2])).is_err());
        assert!(check_reply(&words(&[XID, 1, 1, 0, 0, 0])).is_err());
        assert!(check_reply(&words(&[XID + 1, 1, 0, 0, 0, 0])).is_err());
        assert!(check_reply(&words(&[XID, 1, 0])).is_err());
        let denied = check_reply(&words(&[XID, 1, 1, 1, 5])).unwrap_err();
        let denied = denied.to_string();
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
        let err = service::Chain(&probe(addr, TIMEOUT).await.unwrap_err()).to_string();
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
        let err = service::Chain(&err).to_string();
        assert!(err.contains("no answer within"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}

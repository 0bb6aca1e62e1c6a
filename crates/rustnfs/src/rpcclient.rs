//! A blocking ONC RPC client for the server's own small errands, one call at a time:
//! registering with the host's rpcbind (`rpcbind`), and listing a server's exports
//! (`showmount`). Not used on any path that answers clients.

use std::io::{Read, Write};
use std::time::Duration;

use oncrpc::msg::{self, OpaqueAuth};
use oncrpc::record;

/// The longest an errand waits for one reply.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// Why a call got no results.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the call was not accepted ({0})")]
    Rejected(&'static str),
    #[error("the answer is not an RPC reply to the call")]
    NotAReply,
}

/// One connection (TCP or a local stream socket), calls in turn.
pub struct Client<S> {
    stream: S,
    xid: u32,
}

impl<S: Read + Write> Client<S> {
    pub fn new(stream: S) -> Client<S> {
        // Not all zeros: a reply to another client's call is not taken for ours.
        let xid = std::process::id().rotate_left(16) ^ 0x7275_7374;
        Client { stream, xid }
    }

    /// Calls `prog`/`vers`/`proc_` with XDR `args`; the results' bytes on success.
    pub fn call(
        &mut self,
        (prog, vers, proc_): (u32, u32, u32),
        cred: OpaqueAuth<'_>,
        args: &[u8],
    ) -> Result<Vec<u8>, CallError> {
        self.xid = self.xid.wrapping_add(1);
        let mut call = Vec::with_capacity(64 + args.len());
        msg::encode_call(&mut call, self.xid, prog, vers, proc_, cred);
        call.extend_from_slice(args);
        record::write_blocking(&mut self.stream, &call)?;
        self.stream.flush()?;
        let reply = record::read_blocking(&mut self.stream, 1 << 20)?;
        let h = msg::decode_reply(&reply).map_err(|_| CallError::NotAReply)?;
        if h.xid != self.xid {
            return Err(CallError::NotAReply);
        }
        h.status.map_err(|r| CallError::Rejected(r.label()))?;
        Ok(reply[h.body..].to_vec())
    }
}

/// An AUTH_SYS credential for this process's uid and gid, machine name `rustnfs`.
pub fn auth_sys_body() -> Vec<u8> {
    // SAFETY: plain queries of this process's identity.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut b = Vec::with_capacity(32);
    for w in [0u32, 7] {
        b.extend_from_slice(&w.to_be_bytes());
    }
    b.extend_from_slice(b"rustnfs\0");
    for w in [uid, gid, 0] {
        b.extend_from_slice(&w.to_be_bytes());
    }
    b
}

/// XDR helpers for the errands' arguments.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// An XDR string (length, bytes, padding).
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s.as_bytes());
    out.resize(out.len() + (4 - s.len() % 4) % 4, 0);
}

//! The MOUNT v3 MNT call with a reply decoder that allocates nothing a server claims.
//!
//! `nfs3_types` 0.5 decodes `mountres3` by reserving the element count of its
//! `auth_flavors` array before reading it (`Vec<u32>::with_capacity(len)`): a 76-byte
//! reply claiming 2^32 − 1 flavours made a 16 GiB allocation, which aborts the process
//! where the kernel refuses such a mapping (found by the `nfsclient_reply` fuzz target).
//! So the reply is read with the shared bounded record reader and decoded here: the
//! RPC header by `oncrpc`, the file handle bounded by `FHSIZE3` (64 bytes), and the
//! flavour count checked against the bytes the record really holds. The call itself is
//! still encoded by `nfs3_types` (encoding allocates only what we give it).

use std::io::Cursor;

use nfs3_client::nfs3_types::mount::{PROGRAM, VERSION, dirpath, mountstat3};
use nfs3_client::nfs3_types::rpc::{
    RPC_VERSION_2, auth_stat, call_body, msg_body, opaque_auth, rpc_msg,
};
use nfs3_client::nfs3_types::xdr_codec::{Opaque, Pack, Unpack};
use nfs3_client::{MountError, RpcError};
use oncrpc::Rejection;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// `MOUNTPROC3_MNT`.
const MNT: u32 = 1;
/// RFC 1813's `FHSIZE3`: the longest file handle a MOUNT reply may carry.
const FHSIZE3: usize = 64;

/// Sends MNT for `export` on `stream` and returns the export's root file handle.
pub(crate) async fn mnt<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    xid: u32,
    cred: &opaque_auth<'static>,
    export: &str,
) -> Result<Vec<u8>, MountError> {
    let call = encode_mnt(xid, cred, export).map_err(|e| MountError::Rpc(RpcError::Xdr(e)))?;
    stream
        .write_all(&call)
        .await
        .map_err(|e| MountError::Rpc(RpcError::Io(e)))?;
    let record = crate::fastread::read_record(stream)
        .await
        .map_err(|e| MountError::Rpc(RpcError::Io(e)))?;
    decode_mnt(&record, xid)
}

/// One MNT call record (record mark included), AUTH_NONE verifier.
pub(crate) fn encode_mnt(
    xid: u32,
    cred: &opaque_auth<'static>,
    export: &str,
) -> Result<Vec<u8>, nfs3_client::nfs3_types::xdr_codec::Error> {
    let verf = opaque_auth::default();
    let msg = rpc_msg {
        xid,
        body: msg_body::CALL(call_body {
            rpcvers: RPC_VERSION_2,
            prog: PROGRAM,
            vers: VERSION,
            proc: MNT,
            cred: cred.borrow(),
            verf: verf.borrow(),
        }),
    };
    let args = dirpath(Opaque::borrowed(export.as_bytes()));
    let mut out = Vec::with_capacity(msg.packed_size() + args.packed_size() + 4);
    let at = oncrpc::record::begin(&mut out);
    msg.pack(&mut out)?;
    args.pack(&mut out)?;
    oncrpc::record::finish(&mut out, at);
    Ok(out)
}

/// Decodes the MNT reply record to call `xid`: the root handle, or why not.
pub(crate) fn decode_mnt(record: &[u8], xid: u32) -> Result<Vec<u8>, MountError> {
    let malformed = |what: &str| {
        MountError::Rpc(RpcError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("malformed MOUNT reply: {what}"),
        )))
    };
    let head = oncrpc::msg::decode_reply(record).map_err(|_| malformed("RPC header"))?;
    if head.xid != xid {
        return Err(MountError::Rpc(RpcError::UnexpectedXid));
    }
    if let Err(rejection) = head.status {
        return Err(MountError::Rpc(rpc_error(rejection)));
    }
    let mut words = Words {
        buf: record,
        pos: head.body,
    };
    let status = words.u32().ok_or_else(|| malformed("no status"))?;
    if status != 0 {
        let stat = mountstat3::unpack(&mut Cursor::new(&status.to_be_bytes()[..]))
            .map_err(|_| malformed("unknown status"))?
            .0;
        return Err(MountError::Denied(stat));
    }
    let len = words.u32().ok_or_else(|| malformed("no file handle"))? as usize;
    if len > FHSIZE3 {
        return Err(malformed("file handle longer than 64 bytes"));
    }
    let handle = words
        .bytes(len)
        .ok_or_else(|| malformed("file handle cut short"))?;
    let flavours = words.u32().ok_or_else(|| malformed("no auth flavours"))? as usize;
    // Each flavour is one 4-byte word: the count cannot exceed what is left.
    if flavours > (record.len() - words.pos) / 4 {
        return Err(malformed("more auth flavours than bytes"));
    }
    Ok(handle.to_vec())
}

/// A bounded cursor over XDR words.
struct Words<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Words<'a> {
    fn u32(&mut self) -> Option<u32> {
        let b = self.buf.get(self.pos..self.pos + 4)?;
        self.pos += 4;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// `len` bytes and their padding to a 4-byte boundary.
    fn bytes(&mut self, len: usize) -> Option<&'a [u8]> {
        let padded = len.div_ceil(4) * 4;
        self.buf.get(self.pos..self.pos + padded)?;
        let b = &self.buf[self.pos..self.pos + len];
        self.pos += padded;
        Some(b)
    }
}

/// `nfs3_client`'s name for a rejected call, so callers see one error type for every
/// procedure.
fn rpc_error(r: Rejection) -> RpcError {
    match r {
        // The bounded decoder keeps no version range for RPC_MISMATCH; we speak only 2.
        Rejection::RpcMismatch => RpcError::RpcMismatch { low: 2, high: 2 },
        Rejection::Auth(stat) => {
            let word = (stat as u32).to_be_bytes();
            match auth_stat::unpack(&mut Cursor::new(&word[..])) {
                Ok((s, _)) => RpcError::Auth(s),
                Err(_) => RpcError::SystemErr,
            }
        }
        Rejection::ProgUnavail => RpcError::ProgUnavail,
        Rejection::ProgMismatch { low, high } => RpcError::ProgMismatch { low, high },
        Rejection::ProcUnavail => RpcError::ProcUnavail,
        Rejection::GarbageArgs => RpcError::GarbageArgs,
        Rejection::SystemErr => RpcError::SystemErr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An accepted reply header for `xid` (AUTH_NONE verifier, SUCCESS) plus `body`.
    fn reply(xid: u32, body: &[u32]) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [xid, 1, 0, 0, 0, 0].iter().chain(body) {
            v.extend_from_slice(&w.to_be_bytes());
        }
        v
    }

    #[test]
    fn a_handle_is_returned() {
        let rec = reply(7, &[0, 8, 0x0102_0304, 0x0506_0708, 1, 1]);
        assert_eq!(decode_mnt(&rec, 7).unwrap(), [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn a_huge_flavour_count_allocates_nothing_and_is_refused() {
        // The fuzz finding: 2^32 - 1 flavours claimed in a few bytes.
        let rec = reply(7, &[0, 4, 0xdead_beef, u32::MAX]);
        let err = decode_mnt(&rec, 7).unwrap_err();
        assert!(err.to_string().contains("auth flavours"), "{err}");
    }

    #[test]
    fn long_or_short_handles_and_wrong_xids_are_refused() {
        assert!(decode_mnt(&reply(7, &[0, 65]), 7).is_err());
        assert!(decode_mnt(&reply(7, &[0, 8, 1]), 7).is_err());
        assert!(matches!(
            decode_mnt(&reply(8, &[0, 0, 0]), 7),
            Err(MountError::Rpc(RpcError::UnexpectedXid))
        ));
    }

    #[test]
    fn a_denial_names_its_status() {
        // MNT3ERR_NOENT = 2.
        assert!(matches!(
            decode_mnt(&reply(7, &[2]), 7),
            Err(MountError::Denied(mountstat3::MNT3ERR_NOENT))
        ));
    }

    #[test]
    fn the_call_encodes_as_mnt() {
        let call = encode_mnt(9, &opaque_auth::default(), "/export").unwrap();
        let head = oncrpc::msg::decode_call(&call[4..]).unwrap();
        assert_eq!(
            (head.xid, head.prog, head.vers, head.proc_),
            (9, PROGRAM, VERSION, MNT)
        );
    }
}

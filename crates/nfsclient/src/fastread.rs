//! READ without the extra copies: our own ONC RPC framing for the one hot procedure.
//!
//! `nfs3_client` receives every reply into a freshly zeroed `Vec` and then copies the READ
//! data into another one (memset + memmove were a fifth of httpd's CPU on NFS downloads).
//! Here the record is read straight into one buffer without zeroing (the shared `oncrpc`
//! reader), the RPC and READ headers are decoded with `nfs3_types`, and the data is
//! returned as a zero-copy slice of that buffer. Everything else still goes through `nfs3_client`.

use std::io::Cursor;

use bytes::Bytes;
use nfs3_client::RpcError;
use nfs3_client::nfs3_types::nfs3::{self, NFS_PROGRAM, READ3args, count3, nfsstat3, post_op_attr};
use nfs3_client::nfs3_types::rpc::{
    RPC_VERSION_2, accept_stat_data, call_body, msg_body, opaque_auth, reply_body, rpc_msg,
};
use nfs3_client::nfs3_types::xdr_codec::{Pack, Unpack};
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::Attr;

/// Largest reply record accepted (a 1 MiB READ plus headers, with room).
pub(crate) const MAX_RECORD: usize = 4 << 20;

/// A connection used only for READ.
pub(crate) struct RawConn {
    pub stream: TcpStream,
    xid: u32,
}

/// What a READ answered.
pub(crate) enum ReadOutcome {
    Data {
        data: Bytes,
        eof: bool,
        attr: Option<Attr>,
    },
    Status(nfsstat3),
}

impl RawConn {
    pub(crate) fn new(stream: TcpStream) -> RawConn {
        RawConn {
            stream,
            xid: std::process::id().wrapping_mul(0x9e37_79b9) ^ 0x5eed,
        }
    }

    /// One READ call. `RpcError::Io` means the connection is unusable.
    pub(crate) async fn read(
        &mut self,
        cred: &opaque_auth<'static>,
        args: &READ3args,
    ) -> Result<ReadOutcome, RpcError> {
        let (xid, call) = self.encode_read(cred, args)?;
        self.stream.write_all(&call).await?;
        let record = read_record(&mut self.stream).await?;
        decode_read(record, xid)
    }

    /// The next xid and the READ call's record (with its record mark).
    pub(crate) fn encode_read(
        &mut self,
        cred: &opaque_auth<'static>,
        args: &READ3args,
    ) -> Result<(u32, Vec<u8>), RpcError> {
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        let verf = opaque_auth::default();
        let msg = rpc_msg {
            xid,
            body: msg_body::CALL(call_body {
                rpcvers: RPC_VERSION_2,
                prog: nfs3::PROGRAM,
                vers: nfs3::VERSION,
                proc: NFS_PROGRAM::NFSPROC3_READ as u32,
                cred: cred.borrow(),
                verf: verf.borrow(),
            }),
        };
        let len = msg.packed_size() + args.packed_size();
        let mut out = Vec::with_capacity(len + 4);
        let at = oncrpc::record::begin(&mut out);
        msg.pack(&mut out)?;
        args.pack(&mut out)?;
        oncrpc::record::finish(&mut out, at);
        Ok((xid, out))
    }
}

/// Reads one RPC record (all its fragments) into one buffer allocated at its checked
/// length, without zeroing it first (the shared bounded reader).
pub(crate) async fn read_record<S: AsyncRead + Unpin>(stream: &mut S) -> std::io::Result<Vec<u8>> {
    match oncrpc::RecordReader::trusting(MAX_RECORD)
        .read(stream)
        .await?
    {
        Some(r) => Ok(r.data),
        None => Err(std::io::ErrorKind::UnexpectedEof.into()),
    }
}

/// A READ reply's headers, decoded.
pub(crate) enum Head {
    /// A successful READ: its data is the `len` bytes from `start`.
    Data {
        attr: Option<Attr>,
        eof: bool,
        len: usize,
        start: usize,
    },
    Status(nfsstat3),
}

/// Decodes one READ reply record to the call `xid`.
pub(crate) fn decode_read(record: Vec<u8>, xid: u32) -> Result<ReadOutcome, RpcError> {
    match decode_read_head(&record, xid)? {
        Head::Status(s) => Ok(ReadOutcome::Status(s)),
        Head::Data {
            attr,
            eof,
            len,
            start,
        } => {
            let end = start
                .checked_add(len)
                .filter(|&e| e <= record.len())
                .ok_or(RpcError::WrongLength)?;
            Ok(ReadOutcome::Data {
                data: Bytes::from(record).slice(start..end),
                eof,
                attr,
            })
        }
    }
}

/// Decodes a READ reply up to the start of its data (`head` may end there).
pub(crate) fn decode_read_head(head: &[u8], xid: u32) -> Result<Head, RpcError> {
    let mut cur = Cursor::new(head);
    let (reply, _) = rpc_msg::unpack(&mut cur)?;
    if reply.xid != xid {
        // Replies come in order on this connection; a mismatch means it is confused.
        return Err(RpcError::Io(std::io::Error::other("unexpected RPC xid")));
    }
    match reply.body {
        msg_body::REPLY(reply_body::MSG_ACCEPTED(acc)) => match acc.reply_data {
            accept_stat_data::SUCCESS => {}
            other => {
                return Err(RpcError::try_from(other).unwrap_or(RpcError::SystemErr));
            }
        },
        msg_body::REPLY(reply_body::MSG_DENIED(r)) => return Err(RpcError::from(r)),
        msg_body::CALL(_) => return Err(RpcError::UnexpectedCall),
    }
    let (status, _) = nfsstat3::unpack(&mut cur)?;
    let (attr, _) = post_op_attr::unpack(&mut cur)?;
    let attr = match attr {
        nfs3::Nfs3Option::Some(a) => Some(Attr::from(&a)),
        nfs3::Nfs3Option::None => None,
    };
    if status != nfsstat3::NFS3_OK {
        return Ok(Head::Status(status));
    }
    let (_count, _) = count3::unpack(&mut cur)?;
    let (eof, _) = bool::unpack(&mut cur)?;
    let (n, _) = u32::unpack(&mut cur)?;
    Ok(Head::Data {
        attr,
        eof,
        len: n as usize,
        start: cur.position() as usize,
    })
}

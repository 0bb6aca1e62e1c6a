//! One pooled NFSv4 connection: a COMPOUND call framed as one ONC RPC record (NFS
//! program 100003, version 4, procedure 1, AUTH_SYS), its reply read whole with the
//! shared bounded record reader and its RPC header checked; the COMPOUND itself is
//! the caller's (`super::compound`).

use nfs3_client::RpcError;
use nfs3_client::nfs3_types::rpc::auth_stat;
use oncrpc::msg::{OpaqueAuth, Rejection, flavor};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::PipedData;
use crate::fastread::read_record;
use crate::splice::read_v4_piped;

/// The NFS program and version 4's COMPOUND procedure.
const NFS_PROGRAM: u32 = 100_003;
const NFS_V4: u32 = 4;
const PROC_COMPOUND: u32 = 1;

/// A READ whose data should stay in pipes: the COMPOUND is [SEQUENCE,] PUTFH, READ of
/// at most `max` bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Piped {
    pub sequence: bool,
    pub max: u32,
}

/// A reply: the record (for a piped READ, up to its data) and where the COMPOUND's
/// results start; the READ's data when it went into pipes.
pub(crate) struct Received {
    pub record: Vec<u8>,
    pub start: usize,
    pub data: Option<PipedData>,
}

/// A connection that carries COMPOUNDs, one at a time.
pub(crate) struct V4Conn {
    pub stream: TcpStream,
    xid: u32,
}

impl V4Conn {
    pub(crate) fn new(stream: TcpStream) -> V4Conn {
        V4Conn {
            stream,
            xid: std::process::id().wrapping_mul(0x2545_f491) ^ 0x4e46_5334,
        }
    }

    /// Sends one COMPOUND (`args`: tag, minor version, operations) with the AUTH_SYS
    /// body `cred`; returns the reply record and where the COMPOUND's results start.
    /// `RpcError::Io` means the connection is unusable.
    pub(crate) async fn call(
        &mut self,
        cred: &[u8],
        args: &[u8],
        piped: Option<Piped>,
    ) -> Result<Received, RpcError> {
        self.xid = self.xid.wrapping_add(1);
        let xid = self.xid;
        let mut out = Vec::with_capacity(args.len() + cred.len() + 48);
        let at = oncrpc::record::begin(&mut out);
        oncrpc::msg::encode_call(
            &mut out,
            xid,
            NFS_PROGRAM,
            NFS_V4,
            PROC_COMPOUND,
            OpaqueAuth {
                flavor: flavor::AUTH_SYS,
                body: cred,
            },
        );
        out.extend_from_slice(args);
        oncrpc::record::finish(&mut out, at);
        self.stream.write_all(&out).await?;
        let (record, data) = match piped {
            None => (read_record(&mut self.stream).await?, None),
            Some(p) => read_v4_piped(&mut self.stream, p.sequence, p.max).await?,
        };
        let start = check_reply(&record, xid)?;
        Ok(Received {
            record,
            start,
            data,
        })
    }
}

/// Checks a reply's RPC header: it answers `xid` (else the connection is confused: an
/// I/O error) and was accepted with SUCCESS; returns where the results start.
pub(crate) fn check_reply(record: &[u8], xid: u32) -> Result<usize, RpcError> {
    let h = oncrpc::msg::decode_reply(record)
        .map_err(|e| RpcError::Io(std::io::Error::other(e.to_string())))?;
    if h.xid != xid {
        return Err(RpcError::Io(std::io::Error::other("unexpected RPC xid")));
    }
    match h.status {
        Ok(()) => Ok(h.body),
        Err(r) => Err(rejection(r)),
    }
}

/// The `nfs3_client` error for a refused call (the pool and callers know that type).
fn rejection(r: Rejection) -> RpcError {
    match r {
        Rejection::RpcMismatch => RpcError::RpcMismatch { low: 2, high: 2 },
        Rejection::Auth(s) => RpcError::Auth(match s as u32 {
            1 => auth_stat::AUTH_BADCRED,
            2 => auth_stat::AUTH_REJECTEDCRED,
            3 => auth_stat::AUTH_BADVERF,
            4 => auth_stat::AUTH_REJECTEDVERF,
            5 => auth_stat::AUTH_TOOWEAK,
            _ => auth_stat::AUTH_FAILED,
        }),
        Rejection::ProgUnavail => RpcError::ProgUnavail,
        Rejection::ProgMismatch { low, high } => RpcError::ProgMismatch { low, high },
        Rejection::ProcUnavail => RpcError::ProcUnavail,
        Rejection::GarbageArgs => RpcError::GarbageArgs,
        Rejection::SystemErr => RpcError::SystemErr,
    }
}

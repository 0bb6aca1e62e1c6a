//! READ data that leaves after its COMPOUND reply, as NFSv3 READ's does: when READ is
//! a COMPOUND's last operation, its result is the reply's last bytes, so the reply can
//! be built up to the data (status, `eof`, the count) and the front door (`crate::guard`)
//! sends that head and then the data from the file with `sendfile` — no copy through
//! this process, and no 1 MiB reply buffer per READ. For every minor version.
//!
//! A session slot keeps whole replies only. A COMPOUND whose SEQUENCE asks its reply
//! kept (`sa_cachethis`) is therefore answered on the copy path (its READ shortened to
//! what the slot keeps, as before) and kept; one that does not ask gets the tail, and
//! its slot keeps no reply: a retransmission of it is `NFS4ERR_RETRY_UNCACHED_REP`
//! (RFC 8881 §2.10.6.1.3, §18.46.3), as it already was for any reply larger than the
//! slot's cache. READs of at most [`TAIL_MIN`] bytes are copied and kept as before.

use std::sync::Arc;
use std::time::Instant;

use super::args::{Compound, Op};
use crate::fs::Fh;

/// READs of at most this many bytes are copied into the reply (and kept by a session
/// slot that keeps replies this large): a separate `sendfile` costs more than the copy.
/// (`Nfs4::read_tailed`, in `ops`, decides.)
pub const TAIL_MIN: usize = 4096;

/// A READ's data, to be sent after its reply's head: `len` bytes of `file` from
/// `offset`, then the XDR pad ([`ReadTail::pad`]). The reply's record mark counts them.
pub struct ReadTail {
    /// The file read, for the file-system phase's record (`Exports::record_read`).
    pub fh: Fh,
    pub file: Arc<std::fs::File>,
    pub offset: u64,
    pub len: usize,
    /// When the file-system phase began; it ends once the data is out.
    pub vfs_start: Instant,
}

impl ReadTail {
    /// The zero bytes after the data that make it a multiple of 4.
    pub fn pad(&self) -> usize {
        (4 - self.len % 4) % 4
    }
}

/// Whether the READ that ends `c` may send its data as a [`ReadTail`]: everything
/// decoded, READ last, and no SEQUENCE asking the reply kept whole. The reply bound
/// and the COMPOUND take this same answer, so the reply buffer fits what is built.
pub(super) fn eligible(c: &Compound<'_>) -> bool {
    c.bad.is_none()
        && matches!(c.ops.last(), Some(Op::Read { .. }))
        && !matches!(c.ops.first(), Some(Op::Sequence { cache: true, .. }))
}

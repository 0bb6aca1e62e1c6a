//! The answers of READ, WRITE and a LOOKUP with the file's first bytes, as
//! [`crate::Client`] returns them over any version.

use bytes::Bytes;
use nfs3_client::nfs3_types::nfs3::stable_how;

use nfs3_client::nfs3_types::nfs3::nfs_fh3;

use crate::Attr;
use crate::splice::PipedData;

/// A WRITE's answer: bytes written, how stable they are, the server's write verifier.
#[derive(Debug, Clone, Copy)]
pub struct Written {
    pub count: u32,
    pub committed: stable_how,
    pub verf: [u8; 8],
}

/// The answer to [`crate::Client::read_piped`]: the data waits in pipes.
#[derive(Debug)]
pub struct PipedReply {
    pub data: PipedData,
    /// The server says the read reached the end of the file.
    pub eof: bool,
    /// Post-operation attributes when the server sent them.
    pub attr: Option<Attr>,
}

/// The reply to a READ.
#[derive(Debug)]
pub struct ReadReply {
    pub data: Bytes,
    /// The server says the read reached the end of the file.
    pub eof: bool,
    /// Post-operation attributes when the server sent them.
    pub attr: Option<Attr>,
}

/// The answer to [`crate::Client::lookup_head`]: the object's handle and attributes and,
/// when the same round trip read them, its first bytes.
#[derive(Debug)]
pub struct LookedUp {
    pub fh: nfs_fh3,
    pub attr: Attr,
    /// A READ at offset 0 sent after the LOOKUP in the same COMPOUND (NFSv4); `None`
    /// over NFSv3, or when the server refused it (a directory, a symlink).
    pub head: Option<ReadReply>,
}

//! The answers of READ and WRITE, as [`crate::Client`] returns them over any version.

use bytes::Bytes;
use nfs3_client::nfs3_types::nfs3::stable_how;

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

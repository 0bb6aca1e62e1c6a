//! A pooled, reconnecting NFS client for servelab: NFSv3 on top of the `nfs3_client`
//! crate, NFSv4.0, 4.1 and 4.2 of its own.
//!
//! # Layout
//! - [`url`]: `nfs://HOST[:PORT]/EXPORT[//PATH]?nfsport=&mountport=` parsing ([`NfsUrl`]).
//! - [`client`]: [`Client`] — MOUNT once, then the NFS procedures, re-MOUNT when the
//!   root handle goes stale.
//! - `pool`: the connections under a client (one call at a time each, as `nfs3_client`
//!   does no pipelining): permits, idle lists, one checkout/settle path with per-call
//!   deadlines, reconnect after a server restart; `connect_tcp` and name resolution.
//! - `fastread`: the zero-copy READ framing on its own pooled connections.
//! - `splice`: READ whose data goes from the socket into pipes ([`PipedData`]), for
//!   callers that splice it on (httpd).
//! - [`attr`]: [`Attr`] and [`DirEntry`], plain Rust views of NFS attributes.
//! - `v4`: NFSv4.0, 4.1 and 4.2 ([`NfsVersion`]): COMPOUND encoding, the lease and
//!   session, the procedures; [`Client`] uses it when the URL's `version=` asks for v4
//!   (or `auto` negotiates it).
//!
//! Every call sends an AUTH_UNIX credential (NFS-Ganesha refuses AUTH_NULL) from an
//! unprivileged source port. Errors are typed ([`Error`]) so callers can tell an
//! unreachable server, a timeout and an NFS status (NOENT, ACCES, STALE…) apart.

pub mod attr;
pub mod client;
mod fastread;
mod finish;
/// Entry points for the fuzz targets under `fuzz/` (not a stable API).
#[doc(hidden)]
pub mod fuzzing;
mod mount;
mod pool;
mod reply;
mod rpc_io;
mod splice;
pub mod url;
pub mod v4;
mod version;

pub use attr::{Attr, DirEntry, FileKind};
pub use client::{Client, ClientConfig};
pub use nfs3_client::nfs3_types;
pub use nfs3_client::nfs3_types::nfs3::{nfs_fh3 as FileHandle, nfsstat3};
pub use reply::{LookedUp, PipedReply, ReadReply, Written};
pub use splice::{PipePart, PipedData};
pub use url::{Host, NfsUrl};
pub use v4::{ReplyError, Status4};
pub use version::NfsVersion;

use std::time::Duration;

/// Everything that can go wrong talking to an NFS server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The `nfs://` URL could not be parsed.
    #[error("invalid NFS URL {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    /// A path given to [`Client::lookup_path`] has `.`/`..` or empty components.
    #[error("invalid path {path:?}: {reason}")]
    BadPath { path: String, reason: String },
    /// No TCP connection could be made: the host name did not resolve, or every address
    /// refused, had no route or timed out. `addr` is `host:port` as the URL gives it.
    #[error("NFS server {addr} is unreachable: {cause}: {source}")]
    Unreachable {
        addr: String,
        cause: Unreachable,
        #[source]
        source: std::io::Error,
    },
    /// The server did not answer in time; the connection was dropped.
    #[error("NFS {op} to {addr} timed out after {after:?}")]
    Timeout {
        op: &'static str,
        addr: String,
        after: Duration,
    },
    /// The connection broke during a call (server restarted or died).
    #[error("NFS {op}: connection to {addr} lost: {source}")]
    ConnectionLost {
        op: &'static str,
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// MOUNT refused every candidate export.
    #[error("MOUNT of {export:?} on {addr} refused: {status}")]
    MountDenied {
        export: String,
        addr: String,
        status: String,
    },
    /// The server answered the call with an NFS error status.
    #[error("NFS {op} failed: {status}")]
    Status { op: &'static str, status: nfsstat3 },
    /// An NFSv4 server answered with a status NFSv3 has no equivalent of (those it has,
    /// NOENT, ACCES, STALE…, are [`Error::Status`]).
    #[error("NFS {op} failed: {status}")]
    Status4 { op: &'static str, status: Status4 },
    /// An NFSv4 reply that does not decode (the connection stays usable: the whole
    /// record was read).
    #[error("NFS {op}: undecodable reply")]
    Decode {
        op: &'static str,
        #[source]
        source: ReplyError,
    },
    /// An RPC-level failure (authentication, garbage reply, program unavailable…).
    #[error("NFS {op}: RPC error: {source}")]
    Rpc {
        op: &'static str,
        #[source]
        source: nfs3_client::RpcError,
    },
    /// The server answered without data the call needs (e.g. no attributes).
    #[error("NFS {op}: server reply lacks {what}")]
    Protocol {
        op: &'static str,
        what: &'static str,
    },
}

/// Why [`Error::Unreachable`]: the name lookup or the TCP connect failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreachable {
    /// The host name did not resolve (unknown name, resolver timeout, no addresses).
    Resolve,
    /// The TCP connect failed on every resolved address (refused, no route, timeout).
    Connect,
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unreachable::Resolve => "host name resolution failed",
            Unreachable::Connect => "connect failed",
        })
    }
}

impl Error {
    /// The NFS status, when the server answered with one.
    pub fn status(&self) -> Option<nfsstat3> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True for "no such file" answers (NOENT, NOTDIR on a path component).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self.status(),
            Some(nfsstat3::NFS3ERR_NOENT | nfsstat3::NFS3ERR_NOTDIR)
        )
    }

    /// True when a handle is no longer valid (server restarted, file replaced).
    pub fn is_stale(&self) -> bool {
        matches!(
            self.status(),
            Some(nfsstat3::NFS3ERR_STALE | nfsstat3::NFS3ERR_BADHANDLE)
        )
    }

    /// True when the server refused the protocol version asked for (an NFSv4 minor
    /// version it does not serve, or NFSv4 itself): negotiation tries the next one.
    pub fn is_version_refused(&self) -> bool {
        use nfs3_client::RpcError;
        match self {
            Error::Status4 { status, .. } => status.0 == v4::xdr::MINOR_VERS_MISMATCH,
            Error::Rpc { source, .. } => {
                matches!(
                    source,
                    RpcError::ProgMismatch { .. } | RpcError::ProgUnavail
                )
            }
            _ => false,
        }
    }

    /// True when the server's host name did not resolve.
    pub fn is_resolve_failure(&self) -> bool {
        matches!(
            self,
            Error::Unreachable {
                cause: Unreachable::Resolve,
                ..
            }
        )
    }

    /// True when the server could not be reached or did not answer: the caller should
    /// answer "bad gateway / unavailable / timeout", not "not found".
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Unreachable { .. } | Error::Timeout { .. } | Error::ConnectionLost { .. }
        )
    }
}

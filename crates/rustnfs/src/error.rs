//! The crate's error type: what can stop rustnfs from starting or serving.

use std::io;

/// What can stop rustnfs from starting or serving. Each `Display` says only its own
/// part; the cause is the source (`service::Chain` prints both).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid configuration: {0}")]
    Config(String),
    /// `--squash` to another identity by a process that cannot act as its callers.
    #[error(
        "--squash {uid}:{gid} needs acting as the caller, which this process cannot (run \
         as root with the default capabilities, or squash to {own_uid}:{own_gid})"
    )]
    SquashNeedsIdentity {
        uid: u32,
        gid: u32,
        own_uid: u32,
        own_gid: u32,
        source: &'static crate::identity::Unable,
    },
    /// An exports file that cannot be served (its own message names file and line).
    #[error(transparent)]
    Exports(#[from] crate::exports::ExportsError),
    #[error(transparent)]
    Rpcbind(#[from] crate::rpcbind::RpcbindError),
    #[error(transparent)]
    Showmount(#[from] crate::showmount::ShowmountError),
    /// A listening address cannot be bound (`flag` is `--listen` or `--metrics`).
    #[error("{flag} {addr}")]
    Bind {
        flag: &'static str,
        addr: std::net::SocketAddr,
        source: io::Error,
    },
    #[error("I/O error")]
    Io(#[from] io::Error),
    /// `--healthcheck` found the server not answering.
    #[error("unhealthy")]
    Unhealthy(#[source] crate::health::ProbeError),
}

/// `err` and each of its causes, joined with `: ` (each error's `Display` says only its
/// own layer, so the whole story is the chain).
pub fn with_causes(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

//! ONC RPC (RFC 5531) over TCP, the parts every servelab peer shares.
//!
//! # Layout
//! - [`record`]: record marking (RFC 5531 §11): a reader that checks the 31-bit length
//!   against a limit *before* allocating, sums fragments, and grows its buffer only as
//!   bytes arrive, optionally drawing every byte from a shared [`Budget`]; the writer.
//! - [`budget`]: one byte budget shared by all connections of a server.
//! - [`msg`]: call and reply headers: decoding a call (with the credential checks a
//!   server must make), encoding accepted replies and every error reply (RPC_MISMATCH,
//!   AUTH_ERROR, PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, GARBAGE_ARGS, SYSTEM_ERR), and
//!   decoding replies for clients.
//!
//! Used by rustnfs (its front door and health check), nfsclient's fast READ, and the
//! end-to-end tests' raw RPC clients, so a framing fix reaches all of them.

pub mod budget;
pub mod msg;
pub mod record;

pub use budget::{Budget, Grant};
pub use msg::{AcceptStat, AuthStat, CallHeader, DecodeError, Rejection, ReplyHeader};
pub use record::{RecordError, RecordReader};

//! The NFSv3, MOUNT v3 and portmapper procedures, answered in process: one call in (a
//! whole record the guard has read and bounded), one reply record out.
//!
//! Each call is decoded with the bounded reader in [`xdr`], answered by calling
//! [`DirFs`] directly, and its reply built with `nfs3_types`; every call is timed into
//! the registry (`total` for the call, `vfs` for the file-system work inside it). RPC
//! errors follow RFC 5531: arguments that do not decode → `GARBAGE_ARGS`, an unknown
//! procedure → `PROC_UNAVAIL`. The header checks (RPC version, credential, program,
//! version) are not repeated here: the front door (`crate::guard`) makes them once, with
//! `oncrpc`, and hands over only the calls that pass.
//!
//! - `read`: procedures that only look (GETATTR, LOOKUP, ACCESS, READLINK, READ,
//!   READDIR, READDIRPLUS, FSSTAT, FSINFO, PATHCONF).
//! - [`read3`]: READ's arguments and replies, shared with the guard's data paths.
//! - `write`: procedures that change (SETATTR, WRITE, CREATE, MKDIR, SYMLINK, MKNOD,
//!   REMOVE, RMDIR, RENAME, LINK, COMMIT).
//! - `mount`: MOUNT v3 and the portmapper (v2) on the same port.
//! - [`procs`]: the procedure tables, one row per procedure: name, reply bound, handler,
//!   slow-call class; the dispatcher, the guard and the metrics read them.

mod mount;
pub(crate) mod procs;
pub(crate) mod read;
pub(crate) mod read3;
mod write;
pub mod xdr;

use std::sync::Arc;
use std::time::Instant;

use latency::Registry;
use nfs3_types::nfs3::{Nfs3Result, nfsstat3, writeverf3};

use crate::exports::{CallFrom, CallScope, Exports};
use crate::fs::{Fh, NfsResult};
use crate::rpc::NFS_PROG;
use crate::status::status_label;
use oncrpc::msg::{self as rpcmsg, AcceptStat, CallHeader, Rejection};
use oncrpc::record;
use xdr::{Args, Garbage};

/// Why a call got no procedure result (the accept status, RFC 5531 §9).
pub(crate) enum Refused {
    Garbage,
    ProcUnavail,
}

impl From<Garbage> for Refused {
    fn from(_: Garbage) -> Self {
        Refused::Garbage
    }
}

/// A procedure's outcome: the status label for the metrics, or no result.
pub(crate) type Answer = Result<&'static str, Refused>;

pub use crate::identity::Caller;
use crate::identity::Scope;

/// What every reply but READ, READDIR and READDIRPLUS fits in, RPC header aside: the
/// largest, READLINK, carries attributes and a path of at most 4 KiB; a refusal or
/// failure of any procedure is smaller still.
pub const SMALL_REPLY: usize = 8 * 1024;

/// Answers every call that reaches it. Cheap to clone.
#[derive(Clone)]
pub struct Dispatcher {
    /// The exports; every handle is routed to its own (`crate::exports`).
    fs: Exports,
    registry: Arc<Registry>,
    /// The public port, for the portmapper's GETPORT and DUMP.
    port: u16,
    /// The WRITE/COMMIT verifier: this server instance's start time. It changes on every
    /// restart, which tells a client holding UNSTABLE data that was not committed to
    /// send it again (RFC 1813 §3.3.7).
    verf: writeverf3,
    /// NFSv4.0 (program 100003 version 4), on the same file system and verifier.
    nfs4: crate::nfs4::Nfs4,
}

impl Dispatcher {
    pub fn new(fs: impl Into<Exports>, registry: Arc<Registry>, port: u16) -> Self {
        let fs = fs.into();
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let verf = started.to_be_bytes();
        Dispatcher {
            nfs4: crate::nfs4::Nfs4::new(fs.clone(), registry.clone(), verf, Default::default()),
            fs,
            registry,
            port,
            verf: writeverf3(verf),
        }
    }

    /// The same dispatcher with its NFSv4 state kept as `settings` say (lease, caps).
    pub fn with_nfs4(mut self, settings: crate::nfs4::Settings) -> Self {
        self.nfs4 = crate::nfs4::Nfs4::new(
            self.fs.clone(),
            self.registry.clone(),
            self.verf.0,
            settings,
        );
        self
    }

    /// The most bytes [`dispatch`](Self::dispatch) puts in its reply record to `call`
    /// (mark and RPC header included), known before anything is built, so the guard can
    /// take the reply's budget first: READDIR and READDIRPLUS within their capped count,
    /// READ within its capped count, every other reply within [`SMALL_REPLY`].
    /// With `tails` (see [`dispatch_tailed`](Self::dispatch_tailed)): what the record
    /// holds before a READ tail.
    pub fn reply_bound(call: &CallHeader<'_>, record: &[u8], tails: bool) -> usize {
        const HEAD: usize = record::MARK_LEN + rpcmsg::ACCEPTED_HEADER_LEN;
        if call.prog == NFS_PROG && call.vers == 4 {
            let args = record.get(call.args..).unwrap_or_default();
            return HEAD + crate::nfs4::Nfs4::reply_bound(args, tails).max(SMALL_REPLY);
        }
        let args = record.get(call.args..).unwrap_or_default();
        let body = procs::of(call).and_then(|p| p.reply_bound(args));
        HEAD + body.unwrap_or(SMALL_REPLY).max(SMALL_REPLY)
    }

    /// [`dispatch_tailed`](Self::dispatch_tailed) without tails, on connection 0 (the
    /// tests' entry).
    #[cfg(test)]
    pub fn dispatch(
        &self,
        call: &CallHeader<'_>,
        record: &[u8],
        out: &mut Vec<u8>,
        peer: std::net::SocketAddr,
    ) {
        let tail = self.dispatch_tailed(call, record, out, (peer, 0), false);
        debug_assert!(tail.is_none(), "a tail nobody asked for");
    }

    /// Answers one call the front door admitted (its header decoded and checked by
    /// `oncrpc`: RPC version, credential, program, version): `record` is the whole call
    /// (header at 0, arguments at `call.args`); `out` receives the whole reply record,
    /// record mark included; `peer` is the client's address (its exports and options
    /// follow from it) and `conn_id` the front door's connection (NFSv4 state is counted
    /// per client address; sessions bind connections). The call is recorded as
    /// `op`/`total`/`status`. With `tails` (a caller that can send READ data after the
    /// reply, see [`crate::nfs4::ReadTail`]), an NFSv4 COMPOUND ending in a large READ
    /// has `out` hold the reply up to the data, its record mark counting the data and
    /// pad of the returned tail, to be sent right after it.
    pub fn dispatch_tailed(
        &self,
        call: &CallHeader<'_>,
        record: &[u8],
        out: &mut Vec<u8>,
        (peer, conn_id): (std::net::SocketAddr, u64),
        tails: bool,
    ) -> Option<crate::nfs4::ReadTail> {
        let start = Instant::now();
        out.clear();
        let at = record::begin(out);
        let _from = CallScope::enter(CallFrom {
            peer: Some(peer),
            v4: call.prog == NFS_PROG && call.vers == 4,
        });
        let conn = crate::nfs4::Conn::new(peer.ip(), conn_id);
        let (status, tail) = self.answer(call, record, out, (conn, tails));
        let follows = tail.as_ref().map_or(0, |t| t.len + t.pad());
        let len = out.len() - at - record::MARK_LEN + follows;
        out[at..at + record::MARK_LEN].copy_from_slice(&record::mark(len));
        self.registry.record_op(
            procs::call_name(call.prog, call.vers, call.proc_),
            "total",
            status,
            start.elapsed(),
            0,
        );
        tail
    }

    /// Who `call` is from: its AUTH_SYS credential (AUTH_NONE and anything else:
    /// nobody) as sent; each export it reaches squashes it by that export's options
    /// (`crate::exports`).
    pub fn caller(&self, call: &CallHeader<'_>) -> Caller {
        credential(call.cred.flavor, call.cred.body)
    }

    fn answer(
        &self,
        call: &CallHeader<'_>,
        record: &[u8],
        out: &mut Vec<u8>,
        (conn, tails): (crate::nfs4::Conn, bool),
    ) -> (&'static str, Option<crate::nfs4::ReadTail>) {
        let caller = self.caller(call);
        // The caller this thread acts as for this call's changes (`identity::act`). The
        // call is answered synchronously on this thread, so the scope cannot leak to
        // another call: it ends with this function.
        let _scope = Scope::enter(caller.clone());
        let accept_at = out.len();
        rpcmsg::accepted(out, call.xid, AcceptStat::Success);
        let mut args = Args::new(&record[call.args..]);
        let mut tail = None;
        let r = match call.prog {
            NFS_PROG if call.vers == 4 => {
                let args = &record[call.args..];
                self.nfs4
                    .call_tailed(call.proc_, &caller, conn, args, out, tails)
                    .map(|(status, t)| {
                        tail = t;
                        status
                    })
                    .map_err(|r| match r {
                        crate::nfs4::Reject::ProcUnavail => Refused::ProcUnavail,
                        crate::nfs4::Reject::Garbage => Refused::Garbage,
                    })
            }
            _ => match procs::of(call).and_then(|p| p.handler) {
                Some(handler) => handler(self, &caller, &mut args, out),
                None => Err(Refused::ProcUnavail),
            },
        };
        match r {
            Ok(status) => (status, tail),
            Err(refused) => {
                out.truncate(accept_at);
                let r = match refused {
                    Refused::ProcUnavail => Rejection::ProcUnavail,
                    Refused::Garbage => Rejection::GarbageArgs,
                };
                r.encode(out, call.xid);
                (r.label(), None)
            }
        }
    }

    /// Decodes a client's handle.
    fn handle(&self, data: &[u8]) -> NfsResult<Fh> {
        self.fs.decode(data)
    }

    /// Records the file-system part of a call.
    fn vfs<T>(&self, op: &str, start: Instant, r: &NfsResult<T>) {
        let status = match r {
            Ok(_) => "ok",
            Err(s) => status_label(*s),
        };
        self.registry
            .record_op(op, "vfs", status, start.elapsed(), 0);
    }
}

/// The status label of a procedure result.
fn label<T, E>(r: &Nfs3Result<T, E>) -> &'static str {
    match r {
        Nfs3Result::Ok(_) => "ok",
        Nfs3Result::Err((s, _)) => status_label(*s),
    }
}

/// The `(status, fail body)` of an error.
fn fail<T, E: Default>(s: nfsstat3) -> Nfs3Result<T, E> {
    Nfs3Result::Err((s, E::default()))
}

/// The caller of a call whose credential the front door accepted: AUTH_SYS gives uid,
/// gid and groups; AUTH_NONE (or anything unreadable) is nobody.
fn credential(flavor: u32, body: &[u8]) -> Caller {
    if flavor != rpcmsg::flavor::AUTH_SYS {
        return Caller::nobody();
    }
    let parse = || -> Option<Caller> {
        let mut b = Args::new(body);
        let _stamp = b.u32().ok()?;
        let _machine = b.opaque(255).ok()?;
        let uid = b.u32().ok()?;
        let gid = b.u32().ok()?;
        let n = b.u32().ok()?;
        if n > 16 {
            return None;
        }
        let gids = (0..n).map(|_| b.u32().ok()).collect::<Option<Vec<_>>>()?;
        Some(Caller { uid, gid, gids })
    };
    parse().unwrap_or_else(Caller::nobody)
}

#[cfg(test)]
mod tests;

//! NFSv4.0 (RFC 7530) beside NFSv3, on the same port: program 100003 version 4, NULL and
//! COMPOUND. The root is the `--export` directory (so `mount -t nfs4 host:/ /mnt`
//! mounts it), or an exports file's `fsid=0` export or pseudo-filesystem, served through
//! the same [`Exports`] as v3 — the same jails, handles, identity switching and
//! squashing — and reached through the same front door (`crate::guard`: allowlist,
//! byte budget, bounded records), which hands version-4 calls to the dispatcher
//! (`crate::nfs`), which enters the caller's `identity::Scope` and calls [`Nfs4::call`].
//!
//! - `xdr`: the bounded XDR cursor (why our own: see there).
//! - `proto`: operation and status numbers, the v3 → v4 status mapping.
//! - `args`: COMPOUND arguments decoded into operations.
//! - `attr`: `fattr4` out, settable attributes in; owners as numeric strings.
//! - `state`: client ids, leases, owners, stateids, the byte-range lock table (the lease,
//!   expiry and the graceless restart are documented there).
//! - `ops`: the operations on files and handles; `open`: the operations on state
//!   (SETCLIENTID, OPEN, CLOSE, LOCK, ...).
//!
//! A COMPOUND with a minor version other than 0 is `NFS4ERR_MINOR_VERS_MISMATCH`, so a
//! Linux client asking 4.2 and then 4.1 settles on 4.0. Every operation is timed into
//! the server's registry as `NFS4_<OP>` (phase `total`), the COMPOUND as
//! `NFS4_COMPOUND`; the file-system work inside is recorded by `DirFs` as for v3.

mod args;
mod attr;
mod open;
mod ops;
pub mod proto;
mod state;
pub mod xdr;

use std::sync::Arc;
use std::time::Instant;

use latency::Registry;
use parking_lot::Mutex;

use crate::exports::Exports;
use crate::fs::{Fh, MAX_IO};
use crate::identity::Caller;
use args::{Op, Refused};
use proto::{Status, op};
use state::{OwnerKey, State};

/// Why a version-4 call got no procedure result.
pub enum Reject {
    /// A procedure other than NULL and COMPOUND.
    ProcUnavail,
    /// NULL with arguments.
    Garbage,
}

/// Largest READDIR reply this server builds, whatever `maxcount` asks.
pub const READDIR_MAX: u32 = 1 << 20;
/// What any one operation's result fits in but READ's, READDIR's and READLINK's: the
/// largest is a LOCK denied with a 1 KiB owner, or a GETATTR with every attribute.
const OP_REPLY: usize = 1536;
/// The most bytes one COMPOUND's result holds: two whole READs and room for the rest.
/// A COMPOUND that could say more (128 READs of 1 MiB would ask 128 MiB of the shared
/// budget for one reply) is answered in part: READ and READDIR are shortened to the
/// room left (a short READ is a READ), and an operation that no longer fits is
/// `NFS4ERR_RESOURCE`, NFSv4.0's answer to a request too large to process.
pub const REPLY_MAX: usize = 2 * MAX_IO as usize + 64 * 1024;

/// The NFSv4.0 server. Cheap to clone.
#[derive(Clone)]
pub struct Nfs4 {
    /// The exports, and the pseudo-filesystem joining them (`crate::exports`).
    fs: Exports,
    registry: Arc<Registry>,
    state: Arc<Mutex<State>>,
    /// The WRITE/COMMIT verifier (the v3 dispatcher's: this instance's start).
    verf: [u8; 8],
}

/// One COMPOUND's evaluation context.
struct Ctx<'c> {
    cur: Option<Fh>,
    saved: Option<Fh>,
    caller: &'c Caller,
    now: Instant,
    /// Set by an operation that consumes an owner's seqid: the reply is remembered for
    /// that owner once it is complete (for a retransmission), if the status consumes it.
    seq: Option<(OwnerKey, u32)>,
    /// Set by an operation answering a retransmission: its remembered reply, sent as is.
    replay: Option<Vec<u8>>,
    /// Bytes the current operation's result may take ([`REPLY_MAX`] minus what the
    /// results before it took).
    room: usize,
}

impl Nfs4 {
    pub fn new(fs: impl Into<Exports>, registry: Arc<Registry>, verf: [u8; 8]) -> Self {
        let fs = fs.into();
        // The instance's start in microseconds (wrapping every 71 minutes): two starts
        // within one second still tell their client ids and stateids apart.
        let epoch = (u64::from_be_bytes(verf) / 1_000) as u32;
        Nfs4 {
            fs,
            registry,
            state: Arc::new(Mutex::new(State::new(epoch))),
            verf,
        }
    }

    /// Answers one version-4 call: `args` are its arguments, `out` gets the procedure's
    /// result (after the RPC header the caller wrote). Returns the status label.
    pub fn call(
        &self,
        proc_: u32,
        caller: &Caller,
        args: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<&'static str, Reject> {
        match proc_ {
            0 if args.is_empty() => Ok("ok"),
            0 => Err(Reject::Garbage),
            1 => Ok(proto::label(self.compound(caller, args, out))),
            _ => Err(Reject::ProcUnavail),
        }
    }

    /// The most bytes [`call`](Self::call) appends for these arguments, known before
    /// anything runs (the guard takes the reply's budget first): READ within its
    /// capped count, READDIR within its capped `maxcount`, READLINK within a path,
    /// every other operation within [`OP_REPLY`].
    /// Whether a COMPOUND's file-system work can take long (data written or synced, a
    /// directory listed), so the guard runs it off the runtime's workers; one that does
    /// not decode is answered BADXDR at once.
    pub fn is_slow(args: &[u8]) -> bool {
        args::decode(args).is_ok_and(|c| {
            c.ops.iter().any(|o| {
                matches!(
                    o,
                    Op::Write { .. } | Op::Commit | Op::Readdir { .. } | Op::Setattr { .. }
                )
            })
        })
    }

    pub fn reply_bound(args: &[u8]) -> usize {
        let Ok(c) = args::decode(args) else {
            return 16 + args::TAG_MAX;
        };
        let ops: usize = c
            .ops
            .iter()
            .map(|o| match o {
                Op::Read { count, .. } => 32 + (*count).min(MAX_IO) as usize,
                Op::Readdir { maxcount, .. } => 32 + (*maxcount).min(READDIR_MAX) as usize,
                Op::Readlink => 32 + 4096,
                _ => OP_REPLY,
            })
            .sum();
        (16 + xdr::opaque_size(c.tag.len()) + ops + 8).min(REPLY_MAX)
    }

    fn compound(&self, caller: &Caller, args: &[u8], out: &mut Vec<u8>) -> Status {
        let now = Instant::now();
        self.state.lock().sweep(now);
        let c = match args::decode(args) {
            Ok(c) => c,
            Err(r) => {
                let (status, tag) = match r {
                    Refused::BadXdr => (proto::BADXDR, &[][..]),
                    Refused::MinorVersion(tag) => (proto::MINOR_VERS_MISMATCH, tag),
                    Refused::TooMany(tag) => (proto::RESOURCE, tag),
                };
                xdr::u32(out, status);
                xdr::opaque(out, tag);
                xdr::u32(out, 0);
                return status;
            }
        };
        let status_at = out.len();
        xdr::u32(out, 0);
        xdr::opaque(out, c.tag);
        let count_at = out.len();
        xdr::u32(out, 0);
        let mut cx = Ctx {
            cur: None,
            saved: None,
            caller,
            now,
            seq: None,
            replay: None,
            room: 0,
        };
        let mut n = 0u32;
        let mut status = proto::OK;
        for o in &c.ops {
            let start = Instant::now();
            xdr::u32(out, o.code());
            // What is left once this result's number, the BADXDR result that may follow
            // and the status word are counted.
            cx.room = REPLY_MAX.saturating_sub(out.len() - status_at + 16);
            let s = self.run(o, &mut cx, out);
            n += 1;
            self.registry.record_op(
                op::name(o.code()),
                "total",
                proto::label(s),
                start.elapsed(),
                0,
            );
            if s != proto::OK {
                status = s;
                break;
            }
        }
        if status == proto::OK
            && let Some(code) = c.bad
        {
            xdr::u32(out, code);
            xdr::u32(out, proto::BADXDR);
            n += 1;
            status = proto::BADXDR;
        }
        out[status_at..status_at + 4].copy_from_slice(&status.to_be_bytes());
        out[count_at..count_at + 4].copy_from_slice(&n.to_be_bytes());
        status
    }

    /// Runs one operation: its status word and result are appended to `out`.
    fn run(&self, o: &Op<'_>, cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> Status {
        let at = out.len();
        xdr::u32(out, proto::OK);
        cx.seq = None;
        cx.replay = None;
        let need = match o {
            Op::Read { .. } => 64,
            Op::Readdir { .. } => 128,
            Op::Readlink => 32 + 4096,
            _ => OP_REPLY,
        };
        let r = if cx.room < need {
            Err(proto::RESOURCE)
        } else {
            self.exec(o, cx, out)
        };
        if let Some(reply) = cx.replay.take() {
            out.truncate(at);
            out.extend_from_slice(&reply);
            return reply.get(..4).map_or(proto::SERVERFAULT, |w| {
                u32::from_be_bytes([w[0], w[1], w[2], w[3]])
            });
        }
        let status = match r {
            Ok(()) => proto::OK,
            Err(s) => {
                // A LOCK or LOCKT denied carries the holder; every other failure is the
                // status alone (SETATTR's with an empty `attrsset`).
                if s != proto::DENIED {
                    out.truncate(at + 4);
                }
                if matches!(o, Op::Setattr { .. }) {
                    xdr::bitmap(out, 0);
                }
                out[at..at + 4].copy_from_slice(&s.to_be_bytes());
                s
            }
        };
        if let Some((key, seqid)) = cx.seq.take()
            && proto::advances_seqid(status)
        {
            let reply = out[at..].to_vec();
            let _ = self.state.lock().seq_done(&key, seqid, reply, cx.cur);
        }
        status
    }

    fn exec(&self, o: &Op<'_>, cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> Result<(), Status> {
        match *o {
            Op::Putrootfh | Op::Putpubfh => {
                cx.cur = Some(self.fs.root_fh());
                Ok(())
            }
            Op::Putfh(data) => {
                cx.cur = Some(self.fs.decode(data).map_err(proto::from_v3)?);
                Ok(())
            }
            Op::Getfh => {
                let fh = cur(cx)?;
                xdr::opaque(out, &fh.to_wire());
                Ok(())
            }
            Op::Savefh => {
                cx.saved = Some(cur(cx)?);
                Ok(())
            }
            Op::Restorefh => {
                cx.cur = Some(cx.saved.ok_or(proto::RESTOREFH)?);
                Ok(())
            }
            Op::Getattr(mask) => self.getattr(cx, mask, out),
            Op::Verify(f) => self.verify(cx, f, true),
            Op::Nverify(f) => self.verify(cx, f, false),
            Op::Access(want) => self.access(cx, want, out),
            Op::Lookup(name) => self.lookup(cx, name),
            Op::Lookupp => self.lookupp(cx),
            Op::Readlink => self.readlink(cx, out),
            Op::Read {
                stateid,
                offset,
                count,
            } => self.read(cx, &stateid, offset, count, out),
            Op::Write {
                stateid,
                offset,
                stable,
                data,
            } => self.write(cx, &stateid, offset, stable, data, out),
            Op::Commit => self.commit(cx, out),
            Op::Readdir {
                cookie,
                maxcount,
                attrs,
            } => self.readdir(cx, cookie, maxcount, attrs, out),
            Op::Create { kind, name, attrs } => self.create(cx, kind, name, attrs, out),
            Op::Remove(name) => self.remove(cx, name, out),
            Op::Rename { old, new } => self.rename(cx, old, new, out),
            Op::Link(name) => self.link(cx, name, out),
            Op::Setattr { stateid, attrs } => self.setattr(cx, &stateid, attrs, out),
            Op::Secinfo(name) => self.secinfo(cx, name, out),
            Op::Setclientid { verf, id } => self.setclientid(cx, verf, id, out),
            Op::SetclientidConfirm { clientid, verf } => {
                self.state.lock().confirm(clientid, verf, cx.now)
            }
            Op::Renew(clientid) => self.state.lock().renew(clientid, cx.now),
            Op::Open(a) => self.open(cx, &a, out),
            Op::OpenConfirm { stateid, seqid } => self.open_confirm(cx, &stateid, seqid, out),
            Op::OpenDowngrade {
                stateid,
                seqid,
                access,
                deny,
            } => self.open_downgrade(cx, &stateid, seqid, access, deny, out),
            Op::Close { seqid, stateid } => self.close(cx, &stateid, seqid, out),
            Op::Lock {
                write,
                reclaim,
                offset,
                length,
                locker,
            } => self.lock(cx, write, reclaim, offset, length, &locker, out),
            Op::Lockt {
                write,
                offset,
                length,
                owner,
            } => self.lockt(cx, write, offset, length, &owner, out),
            Op::Locku {
                seqid,
                stateid,
                offset,
                length,
            } => self.locku(cx, &stateid, seqid, offset, length, out),
            Op::ReleaseLockowner(owner) => self.release_lockowner(cx, &owner),
            // No delegation is ever given, so none can be returned; CLAIM_DELEGATE_PREV
            // and named attributes are not supported.
            Op::DelegReturn => Err(proto::BAD_STATEID),
            Op::DelegPurge | Op::Openattr => Err(proto::NOTSUPP),
            Op::Illegal => Err(proto::OP_ILLEGAL),
        }
    }
}

/// The current filehandle, or `NOFILEHANDLE`.
fn cur(cx: &Ctx<'_>) -> Result<Fh, Status> {
    cx.cur.ok_or(proto::NOFILEHANDLE)
}

#[cfg(test)]
mod tests;

//! NFSv4 — 4.0 (RFC 7530), 4.1 (RFC 8881) and 4.2 (RFC 7862) — beside NFSv3, on the
//! same port: program 100003 version 4, NULL and COMPOUND. The root is the `--export`
//! directory (so `mount -t nfs host:/ /mnt` mounts it, at 4.2), or an exports file's
//! `fsid=0` export or pseudo-filesystem, served through the same [`Exports`] as v3 —
//! the same jails, handles, identity switching and squashing — and reached through the
//! same front door (`crate::guard`: allowlist, byte budget, bounded records), which
//! hands version-4 calls to the dispatcher (`crate::nfs`), which enters the caller's
//! `identity::Scope` and the calling client's `exports::CallScope` and calls
//! [`Nfs4::call`].
//!
//! - `xdr`: the bounded XDR cursor (why our own: see there).
//! - `proto`: operation and status numbers, the v3 → v4 status mapping.
//! - `args`: COMPOUND arguments decoded into operations, per minor version.
//! - `attr`: `fattr4` out, settable attributes in; owners as numeric strings.
//! - `state`: client records, leases, owners, stateids, sessions, the byte-range lock
//!   table, and the caps on all of them (the lease, expiry and the graceless restart
//!   are documented there).
//! - `ops`: the operations on files and handles; `open`: the operations on state
//!   (SETCLIENTID, OPEN, CLOSE, LOCK, ...); `session`: NFSv4.1's (EXCHANGE_ID,
//!   CREATE_SESSION, SEQUENCE, ...); `space`: NFSv4.2's SEEK, ALLOCATE, DEALLOCATE and
//!   COPY; `tail`: a READ that ends its COMPOUND has its data sent after the reply
//!   (`sendfile`), as v3 READ's is.
//!
//! A minor version above 2 is `NFS4ERR_MINOR_VERS_MISMATCH`. In 4.1 and 4.2 every
//! COMPOUND but the few that make or end a session starts with SEQUENCE, whose slot
//! keeps the reply for a retransmission; the operations 4.1 retired (SETCLIENTID,
//! SETCLIENTID_CONFIRM, RENEW, OPEN_CONFIRM, RELEASE_LOCKOWNER) are `NFS4ERR_NOTSUPP`
//! there, and seqids of owners are not checked (the slot orders requests). Every
//! operation is timed into the server's registry as `NFS4_<OP>` (phase `total`), the
//! COMPOUND as `NFS4_COMPOUND`; the file-system work inside is recorded by `DirFs` as
//! for v3.

mod args;
mod attr;
mod open;
mod ops;
pub mod proto;
mod session;
mod space;
mod state;
mod tail;
pub mod xdr;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use latency::Registry;
use parking_lot::Mutex;

use crate::exports::Exports;
use crate::fs::{Fh, MAX_IO};
use crate::identity::Caller;
use args::{Op, Refused};
use proto::{Status, op};
use state::limits::Limits;
use state::sessions::SlotRef;
use state::{OwnerKey, State, Stateid};
pub use tail::{ReadTail, TAIL_MIN};

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

/// What a stateid is checked for (READ, WRITE, SETATTR of the size, and 4.2's
/// operations on contents).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Io {
    Read,
    Write,
    /// SETATTR of the size.
    Truncate,
}

/// Where a call came from: the client's address (state is capped per address) and its
/// connection (sessions bind connections).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conn {
    pub addr: IpAddr,
    pub id: u64,
}

impl Conn {
    pub fn new(addr: IpAddr, id: u64) -> Conn {
        Conn { addr, id }
    }

    /// A call made in process (tests): loopback, connection 0.
    #[cfg(test)]
    pub const LOCAL: Conn = Conn {
        addr: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        id: 0,
    };
}

/// How the NFSv4 state is kept: the lease clients get and the caps on what they hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub lease: Duration,
    pub limits: Limits,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            lease: state::DEFAULT_LEASE,
            limits: Limits::default(),
        }
    }
}

/// The caps on NFSv4 state as `rustnfs --help` prints them.
pub fn limits_help() -> String {
    format!(
        "NFSv4 state is capped per client id, per client address and for all clients \
         together; a request over a cap is refused (NFS4ERR_RESOURCE in v4.0, \
         NFS4ERR_DELAY in v4.1 and 4.2) and changes nothing, and other clients are not \
         affected. Owner names are at most 1 KiB, \
         COMPOUND tags 1 KiB; past its share of unconfirmed client ids an address's \
         oldest is dropped.\n\n{}",
        Limits::default()
    )
}

/// The NFSv4 server. Cheap to clone.
#[derive(Clone)]
pub struct Nfs4 {
    /// The exports, and the pseudo-filesystem joining them (`crate::exports`).
    fs: Exports,
    registry: Arc<Registry>,
    state: Arc<Mutex<State>>,
    /// The WRITE/COMMIT verifier (the v3 dispatcher's: this instance's start).
    verf: [u8; 8],
    /// The lease clients get, in seconds (the `lease_time` attribute).
    lease_secs: u32,
    /// This instance's `server_owner4` and `server_scope` (EXCHANGE_ID): its start, so
    /// no client takes two servers for one (session trunking).
    owner: [u8; 16],
}

/// One COMPOUND's evaluation context.
struct Ctx<'c> {
    cur: Option<Fh>,
    saved: Option<Fh>,
    caller: &'c Caller,
    /// The client's address and connection.
    addr: IpAddr,
    conn: u64,
    now: Instant,
    /// The COMPOUND's minor version.
    minor: u32,
    /// v4.1+: the slot the COMPOUND runs on (set by its SEQUENCE).
    slot: Option<SlotRef>,
    /// v4.1+: the current and saved stateids (RFC 8881 §16.2.3.1.2).
    current_sid: Option<Stateid>,
    saved_sid: Option<Stateid>,
    /// v4.1+: set by a SEQUENCE that found a retransmission: the whole COMPOUND reply
    /// its slot kept.
    replay_all: Option<Vec<u8>>,
    /// What an operation that does not fit the reply's room is: `RESOURCE` in v4.0,
    /// `REP_TOO_BIG` (or `REP_TOO_BIG_TO_CACHE` when the reply is to be kept) in v4.1+.
    too_big: Status,
    /// The COMPOUND's operation count, argument bytes and their fingerprint (SEQUENCE
    /// checks them against the session's channel and the slot's last request).
    ops: usize,
    args_len: usize,
    print: u64,
    /// Set by an operation that consumes an owner's seqid: the reply is remembered for
    /// that owner once it is complete (for a retransmission), if the status consumes it.
    seq: Option<(OwnerKey, u32)>,
    /// Set by an operation answering a retransmission: its remembered reply, sent as is.
    replay: Option<Vec<u8>>,
    /// Bytes the current operation's result may take ([`REPLY_MAX`] minus what the
    /// results before it took).
    room: usize,
    /// Whether the operation running may leave its data to the front door (the READ
    /// that ends a [`tail::eligible`] COMPOUND, when the caller takes tails).
    tail_ok: bool,
    /// Set by that READ: the data to send after the reply.
    tail: Option<ReadTail>,
}

impl Nfs4 {
    pub fn new(
        fs: impl Into<Exports>,
        registry: Arc<Registry>,
        verf: [u8; 8],
        settings: Settings,
    ) -> Self {
        let fs = fs.into();
        // The instance's start in microseconds (wrapping every 71 minutes): two starts
        // within one second still tell their client ids and stateids apart.
        let epoch = (u64::from_be_bytes(verf) / 1_000) as u32;
        let lease = settings.lease;
        let mut owner = *b"rustnfs-\0\0\0\0\0\0\0\0";
        owner[8..].copy_from_slice(&verf);
        Nfs4 {
            fs,
            registry,
            state: Arc::new(Mutex::new(State::new(epoch, lease, settings.limits))),
            verf,
            lease_secs: lease.as_secs().clamp(1, u64::from(u32::MAX)) as u32,
            owner,
        }
    }

    /// [`call_tailed`](Self::call_tailed) without tails (the tests' entry).
    #[cfg(test)]
    pub fn call(
        &self,
        proc_: u32,
        caller: &Caller,
        conn: Conn,
        args: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<&'static str, Reject> {
        self.call_tailed(proc_, caller, conn, args, out, false)
            .map(|(label, _)| label)
    }

    /// Answers one version-4 call: `args` are its arguments, `out` gets the procedure's
    /// result (after the RPC header the caller wrote). Returns the status label. With
    /// `tails` (a caller that can send READ data after the reply), a COMPOUND ending in
    /// a large READ leaves its data out of `out` and returns it as a [`ReadTail`], to be
    /// sent right after `out` (whose record mark must count it).
    pub fn call_tailed(
        &self,
        proc_: u32,
        caller: &Caller,
        conn: Conn,
        args: &[u8],
        out: &mut Vec<u8>,
        tails: bool,
    ) -> Result<(&'static str, Option<ReadTail>), Reject> {
        match proc_ {
            0 if args.is_empty() => Ok(("ok", None)),
            0 => Err(Reject::Garbage),
            1 => {
                let (status, tail) = self.compound(caller, conn, args, out, tails);
                Ok((proto::label(status), tail))
            }
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
                    Op::Write { .. }
                        | Op::Commit
                        | Op::Readdir { .. }
                        | Op::Setattr { .. }
                        | Op::Copy(_)
                        | Op::Allocate { .. }
                        | Op::Deallocate { .. }
                )
            })
        })
    }

    /// With `tails` (see [`call_tailed`](Self::call_tailed)), a READ whose data leaves
    /// as a tail takes at most [`TAIL_MIN`] of it.
    pub fn reply_bound(args: &[u8], tails: bool) -> usize {
        let Ok(c) = args::decode(args) else {
            return 16 + args::TAG_MAX;
        };
        let tailed = tails && tail::eligible(&c);
        let last = c.ops.len().saturating_sub(1);
        let ops: usize = c
            .ops
            .iter()
            .enumerate()
            .map(|(i, o)| match o {
                Op::Read { .. } if tailed && i == last => 32 + TAIL_MIN,
                Op::Read { count, .. } => 32 + (*count).min(MAX_IO) as usize,
                Op::Readdir { maxcount, .. } => 32 + (*maxcount).min(READDIR_MAX) as usize,
                Op::Readlink => 32 + 4096,
                Op::TestStateid(_, n) => 16 + 4 * *n as usize,
                _ => OP_REPLY,
            })
            .sum();
        // A session's retransmission is answered with the reply its slot kept, whatever
        // the operations it names now.
        let replayed = if c.minor > 0 {
            state::limits::SLOT_CACHE_MAX as usize
        } else {
            0
        };
        (16 + xdr::opaque_size(c.tag.len()) + ops + 8)
            .max(replayed)
            .min(REPLY_MAX)
    }

    fn compound(
        &self,
        caller: &Caller,
        conn: Conn,
        args: &[u8],
        out: &mut Vec<u8>,
        tails: bool,
    ) -> (Status, Option<ReadTail>) {
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
                return (status, None);
            }
        };
        let tail_at = (tails && tail::eligible(&c)).then(|| c.ops.len() - 1);
        let status_at = out.len();
        xdr::u32(out, 0);
        xdr::opaque(out, c.tag);
        let count_at = out.len();
        xdr::u32(out, 0);
        let mut cx = Ctx {
            cur: None,
            saved: None,
            caller,
            addr: conn.addr,
            conn: conn.id,
            now,
            minor: c.minor,
            slot: None,
            current_sid: None,
            saved_sid: None,
            replay_all: None,
            too_big: proto::RESOURCE,
            ops: c.ops.len() + usize::from(c.bad.is_some()),
            args_len: args.len(),
            print: if c.minor > 0 {
                state::sessions::request_print(args)
            } else {
                0
            },
            seq: None,
            replay: None,
            room: 0,
            tail_ok: false,
            tail: None,
        };
        let mut n = 0u32;
        let mut status = proto::OK;
        for (i, o) in c.ops.iter().enumerate() {
            let start = Instant::now();
            xdr::u32(out, o.code());
            // What is left once this result's number, the BADXDR result that may follow
            // and the status word are counted.
            cx.room = self.room(&cx).saturating_sub(out.len() - status_at + 16);
            cx.tail_ok = tail_at == Some(i);
            let s = match args::order(c.minor, i, o, cx.ops) {
                Ok(()) => self.run(o, &mut cx, out),
                Err(s) => {
                    xdr::u32(out, s);
                    s
                }
            };
            n += 1;
            self.registry.record_op(
                op::name(o.code()),
                "total",
                proto::label(s),
                start.elapsed(),
                0,
            );
            if let Some(reply) = cx.replay_all.take() {
                // A retransmission on its session slot: the reply it had, whole.
                out.truncate(status_at);
                out.extend_from_slice(&reply);
                let status = reply.get(..4).map_or(proto::SERVERFAULT, |w| {
                    u32::from_be_bytes([w[0], w[1], w[2], w[3]])
                });
                return (status, None);
            }
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
        // A reply whose data leaves after it is not whole here: its slot keeps none.
        if let Some(slot) = cx.slot {
            let whole = cx.tail.is_none().then(|| &out[status_at..]);
            self.state.lock().finish_slot(&slot, whole);
        }
        (status, cx.tail)
    }

    /// The most bytes the COMPOUND's result may take: [`REPLY_MAX`], or in a session
    /// what its channel allows (what the slot may keep, when the client asked it kept).
    fn room(&self, cx: &Ctx<'_>) -> usize {
        let Some(s) = &cx.slot else {
            return REPLY_MAX;
        };
        let limit = if cx.too_big == proto::REP_TOO_BIG_TO_CACHE {
            s.max_cached
        } else {
            s.max_response
        };
        (limit as usize)
            .saturating_sub(oncrpc::msg::ACCEPTED_HEADER_LEN)
            .min(REPLY_MAX)
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
            Err(cx.too_big)
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
        // A state cap in v4.1+ is DELAY, as knfsd answers a failed state allocation
        // (RESOURCE is v4.0's).
        let r = r.map_err(|s| match s {
            proto::RESOURCE if cx.minor > 0 => proto::DELAY,
            s => s,
        });
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

    /// The operations on handles and files; the rest in [`exec_state`](Self::exec_state).
    fn exec(&self, o: &Op<'_>, cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> Result<(), Status> {
        match *o {
            Op::Putrootfh | Op::Putpubfh => {
                cx.cur = Some(self.fs.root_fh());
                cx.current_sid = None;
                Ok(())
            }
            Op::Putfh(data) => {
                cx.cur = Some(self.fs.decode(data).map_err(proto::from_v3)?);
                cx.current_sid = None;
                Ok(())
            }
            Op::Getfh => {
                let fh = cur(cx)?;
                xdr::opaque(out, &fh.to_wire());
                Ok(())
            }
            Op::Savefh => {
                cx.saved = Some(cur(cx)?);
                cx.saved_sid = cx.current_sid;
                Ok(())
            }
            Op::Restorefh => {
                cx.cur = Some(cx.saved.ok_or(proto::RESTOREFH)?);
                cx.current_sid = cx.saved_sid;
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
            Op::Seek {
                stateid,
                offset,
                hole,
            } => self.seek(cx, &stateid, offset, hole, out),
            Op::Allocate {
                stateid,
                offset,
                length,
            } => self.allocate(cx, &stateid, offset, length, false),
            Op::Deallocate {
                stateid,
                offset,
                length,
            } => self.allocate(cx, &stateid, offset, length, true),
            Op::Copy(ref c) => self.copy(cx, c, out),
            // No delegation is ever given, so none can be returned; named attributes
            // are not supported.
            Op::DelegReturn => Err(proto::BAD_STATEID),
            Op::DelegPurge | Op::Openattr => Err(proto::NOTSUPP),
            Op::NotSupp(_) => Err(proto::NOTSUPP),
            Op::Illegal => Err(proto::OP_ILLEGAL),
            _ => self.exec_state(o, cx, out),
        }
    }

    /// The operations on client, open, lock and session state.
    fn exec_state(&self, o: &Op<'_>, cx: &mut Ctx<'_>, out: &mut Vec<u8>) -> Result<(), Status> {
        let v40 = cx.minor == 0;
        match *o {
            // Retired in v4.1 (RFC 8881 §18.33, §18.34, §18.20, §18.21, §18.48...).
            Op::Setclientid { .. }
            | Op::SetclientidConfirm { .. }
            | Op::Renew(_)
            | Op::OpenConfirm { .. }
            | Op::ReleaseLockowner(_)
                if !v40 =>
            {
                Err(proto::NOTSUPP)
            }
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
            _ => self.exec_session(o, cx, out),
        }
    }
}

/// The current filehandle, or `NOFILEHANDLE`.
fn cur(cx: &Ctx<'_>) -> Result<Fh, Status> {
    cx.cur.ok_or(proto::NOFILEHANDLE)
}

/// The stateid an operation names, with v4.1's current stateid (seqid 1, `other` all
/// zeros) replaced by the one the COMPOUND's last stateid-returning operation left
/// (`BAD_STATEID` when there is none).
fn resolve(cx: &Ctx<'_>, sid: &Stateid) -> Result<Stateid, Status> {
    if cx.minor > 0 && sid.other == [0; 12] && sid.seqid == 1 {
        return cx.current_sid.ok_or(proto::BAD_STATEID);
    }
    Ok(*sid)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests41;
#[cfg(test)]
mod tests_exports;
#[cfg(test)]
mod tests_tail;

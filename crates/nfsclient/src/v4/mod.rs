//! NFSv4.0, 4.1 and 4.2 under [`crate::Client`]: no MOUNT, the export reached from the
//! server's root (PUTROOTFH, LOOKUP…), every call one COMPOUND on a pooled connection.
//!
//! # Layout
//! - `xdr`: COMPOUND encoding ([`xdr::Ops`]), the bounded reply reader, numbers.
//! - `attr`: `fattr4` into [`crate::Attr`].
//! - `conn`: one connection's RPC framing.
//! - `session`: the client's lease: SETCLIENTID (4.0) or EXCHANGE_ID, CREATE_SESSION and
//!   RECLAIM_COMPLETE (4.1, 4.2), the slot table and SEQUENCE; set up again when the
//!   server forgot it (restart).
//! - `ops`: the procedures the crate's callers use, one COMPOUND each where the protocol
//!   allows (a path walk, a small file's create, open and close).
//!
//! READ and WRITE use the anonymous stateid (RFC 7530 §9.1.4.3; RFC 8881 §8.2.3): what
//! httpd and the load generator do needs no share reservation, and it saves an OPEN
//! and CLOSE per file. A file is created with OPEN (and closed in the same COMPOUND
//! from 4.1 on, through the current stateid) as `touch` does.

pub(crate) mod attr;
pub(crate) mod conn;
pub(crate) mod ops;
pub(crate) mod session;
pub mod xdr;

use std::time::Duration;

use nfs3_client::nfs3_types::nfs3::{nfs_fh3, nfsstat3};
use nfs3_client::nfs3_types::xdr_codec::Unpack;

use crate::Error;
use crate::pool::{Pool, pool_call};
pub use crate::version::NfsVersion;
use xdr::{Ops, Reply, op, status};
pub use xdr::{ReplyError, Status4};

pub(crate) use conn::V4Conn;
pub(crate) use session::Session;

/// The error for an operation's status: as [`Error::Status`] when NFSv3 has the same
/// status (NOENT, ACCES, STALE… share their numbers), else [`Error::Status4`].
pub(crate) fn status_error(op: &'static str, st: u32) -> Error {
    let bytes = st.to_be_bytes();
    match nfsstat3::unpack(&mut std::io::Cursor::new(&bytes[..])) {
        Ok((status, _)) if st != 0 => Error::Status { op, status },
        _ => Error::Status4 {
            op,
            status: Status4(st),
        },
    }
}

fn decode_error(op: &'static str) -> impl Fn(ReplyError) -> Error {
    move |source| Error::Decode { op, source }
}

/// A COMPOUND's reply, read up to the first result after SEQUENCE's; a piped READ's
/// record ends at its data's length, and the data is in `piped`.
pub(crate) struct Answer {
    pub record: Vec<u8>,
    pub pos: usize,
    pub piped: Option<crate::PipedData>,
}

impl Answer {
    pub fn reply(&self) -> Reply<'_> {
        Reply::new(&self.record, self.pos)
    }
}

/// The NFSv4 side of a client.
pub(crate) struct V4 {
    pub minor: u32,
    pub pool: Pool,
    /// The AUTH_SYS credential's body.
    pub cred: Vec<u8>,
    pub session: Session,
}

impl V4 {
    pub fn new(minor: u32, pool: Pool, cred: Vec<u8>) -> V4 {
        let slots = pool.cfg.connections.max(1) as u32;
        V4 {
            minor,
            pool,
            cred,
            session: Session::new(slots),
        }
    }

    /// The COMPOUND's head: empty tag, minor version, operation count.
    fn head(&self, n: u32, extra: usize) -> Vec<u8> {
        let mut args = Vec::with_capacity(12 + extra);
        args.extend_from_slice(&0u32.to_be_bytes());
        args.extend_from_slice(&self.minor.to_be_bytes());
        args.extend_from_slice(&n.to_be_bytes());
        args
    }

    /// Sends `ops` as they are (no SEQUENCE: the 4.0 calls and 4.1's session set-up);
    /// returns the reply from its first result on. A COMPOUND that failed before any
    /// operation (MINOR_VERS_MISMATCH) is that status under `name`.
    pub async fn raw(
        &self,
        name: &'static str,
        idempotent: bool,
        ops: &Ops,
    ) -> Result<Answer, Error> {
        self.raw_via(name, idempotent, ops, None).await
    }

    async fn raw_via(
        &self,
        name: &'static str,
        idempotent: bool,
        ops: &Ops,
        piped: Option<conn::Piped>,
    ) -> Result<Answer, Error> {
        let mut args = self.head(ops.n, ops.buf.len());
        args.extend_from_slice(&ops.buf);
        let got = pool_call!(&self.pool, V4Conn, name, idempotent, |c| c
            .call(&self.cred, &args, piped))?;
        let (record, pos, data) = (got.record, got.start, got.data);
        let mut r = Reply::new(&record, pos);
        let st = r.u32("COMPOUND status").map_err(decode_error(name))?;
        r.opaque(1024, "tag").map_err(decode_error(name))?;
        let n = r.u32("result count").map_err(decode_error(name))?;
        if n == 0 && st != status::OK {
            return Err(status_error(name, st));
        }
        let pos = r.pos;
        Ok(Answer {
            record,
            pos,
            piped: data,
        })
    }

    /// Sends `ops` as one COMPOUND: from 4.1 on behind a SEQUENCE on a free slot, with
    /// the session set up again when the server lost it and a slot whose last call's
    /// fate is unknown set right. Returns the reply at `ops`' first result.
    pub async fn compound(
        &self,
        name: &'static str,
        idempotent: bool,
        ops: &Ops,
    ) -> Result<Answer, Error> {
        self.compound_via(name, idempotent, ops, None).await
    }

    /// [`V4::compound`] of PUTFH and READ of at most `max` bytes, the data left in pipes.
    pub async fn compound_piped(&self, ops: &Ops, max: u32) -> Result<Answer, Error> {
        let piped = conn::Piped {
            sequence: self.minor > 0,
            max,
        };
        self.compound_via("READ", true, ops, Some(piped)).await
    }

    async fn compound_via(
        &self,
        name: &'static str,
        idempotent: bool,
        ops: &Ops,
        piped: Option<conn::Piped>,
    ) -> Result<Answer, Error> {
        if self.minor == 0 {
            return self.raw_via(name, idempotent, ops, piped).await;
        }
        self.session.ensure(self).await?;
        let mut recovered = false;
        let mut realigned = false;
        let deadline = tokio::time::Instant::now() + self.pool.cfg.call_timeout;
        loop {
            let mut slot = self
                .session
                .take_slot(name, deadline, self.pool.cfg.call_timeout)
                .await?;
            let mut seq = Ops::default();
            let was_uncertain = slot.begin(&mut seq);
            let mut with = Ops {
                buf: seq.buf,
                n: seq.n + ops.n,
            };
            with.buf.extend_from_slice(&ops.buf);
            let answer = self.raw_via(name, idempotent, &with, piped).await?;
            let mut r = answer.reply();
            let st = r.op(op::SEQUENCE).map_err(decode_error(name))?;
            match st {
                status::OK => {
                    slot.done();
                    r.take(16 + 20, "SEQUENCE result")
                        .map_err(decode_error(name))?;
                    return Ok(Answer {
                        pos: r.pos,
                        record: answer.record,
                        piped: answer.piped,
                    });
                }
                status::SEQ_MISORDERED if was_uncertain && !realigned => {
                    // The call before on this slot never reached the server.
                    slot.step_back();
                    realigned = true;
                }
                status::BADSESSION
                | status::DEADSESSION
                | status::STALE_CLIENTID
                | status::SEQ_MISORDERED
                | status::SEQ_FALSE_RETRY
                | status::RETRY_UNCACHED_REP
                    if !recovered =>
                {
                    // The session is gone, or this slot's sequence cannot be known any
                    // more: a new session (once for every caller of this epoch).
                    let lost = slot.epoch();
                    drop(slot);
                    self.session.recover(self, lost).await?;
                    recovered = true;
                }
                status::DELAY if tokio::time::Instant::now() < deadline => {
                    // Not done: the server did not take this sequence id.
                    drop(slot);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                other => {
                    // The SEQUENCE failed before the slot moved on; it stays uncertain,
                    // so the next call on it probes where the server is.
                    return Err(status_error(name, other));
                }
            }
        }
    }

    /// The handle of `path` (components under the server's root).
    pub async fn root_of(&self, path: &str) -> Result<nfs_fh3, Error> {
        let mut o = Ops::default();
        o.op(op::PUTROOTFH);
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        for c in &comps {
            o.op(op::LOOKUP).opaque(c.as_bytes());
        }
        o.op(op::GETFH);
        let a = self.compound("LOOKUP", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTROOTFH, "PUTROOTFH")?;
        for _ in &comps {
            expect(&mut r, op::LOOKUP, "LOOKUP")?;
        }
        expect(&mut r, op::GETFH, "GETFH")?;
        let fh = r
            .opaque(attr::FH_MAX, "filehandle")
            .map_err(decode_error("GETFH"))?;
        Ok(nfs_fh3 {
            data: nfs3_client::nfs3_types::xdr_codec::Opaque::owned(fh.to_vec()),
        })
    }
}

/// The next result must be operation `code` with status OK.
pub(crate) fn expect(r: &mut Reply<'_>, code: u32, name: &'static str) -> Result<(), Error> {
    match r.op(code).map_err(decode_error(name))? {
        status::OK => Ok(()),
        st => Err(status_error(name, st)),
    }
}

/// The fuzz entry points (`crate::fuzzing::v4_reply`): decoder `which` over `bytes`.
pub(crate) fn fuzz_entry(which: usize, bytes: &[u8]) -> bool {
    let mut r = Reply::new(bytes, 0);
    let ok = match which {
        0 => attr::fattr4(&mut r).is_ok(),
        1 => ops::fuzz_open_result(&mut r),
        2 => ops::fuzz_readdir_page(&mut r),
        3 => ops::fuzz_getattr_result(&mut r),
        _ => {
            let xid = bytes
                .get(..4)
                .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            return conn::check_reply(bytes, xid).is_ok_and(|at| at == bytes.len());
        }
    };
    ok && r.at_end()
}

/// One well-formed input per decoder of [`fuzz_entry`].
pub(crate) fn fuzz_seeds() -> Vec<(usize, Vec<u8>)> {
    let attrs = |o: &mut Ops| {
        let mut l = Ops::default();
        l.u32(1).u64(10).u64(3).u32(0o644).opaque(b"0").opaque(b"0");
        l.u64(1).u32(2).u64(3).u32(4);
        o.bitmap(&attr::ASKED).opaque(&l.buf);
    };
    let mut fattr = Ops::default();
    attrs(&mut fattr);
    let mut open = Ops::default();
    open.u32(op::OPEN)
        .u32(0)
        .u32(1)
        .fixed(&[7; 12])
        .u32(1)
        .u64(1)
        .u64(2);
    open.u32(0).u32(0).u32(0);
    let mut page = Ops::default();
    page.fixed(&[9; 8]).u32(1).u64(5).opaque(b"name");
    attrs(&mut page);
    page.u32(0).u32(1);
    let mut getattr = Ops::default();
    getattr.u32(op::GETATTR).u32(0);
    attrs(&mut getattr);
    let mut rpc = Ops::default();
    rpc.u32(77).u32(1).u32(0).u32(0).u32(0).u32(0);
    vec![
        (0, fattr.buf),
        (1, open.buf),
        (2, page.buf),
        (3, getattr.buf),
        (4, rpc.buf),
    ]
}

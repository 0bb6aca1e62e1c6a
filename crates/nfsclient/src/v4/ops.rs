//! The procedures [`crate::Client`] offers, over NFSv4: one COMPOUND each (a path walk
//! is one COMPOUND of LOOKUPs; a file's create is OPEN, GETFH, GETATTR and, from 4.1
//! on, CLOSE in one), decoded into the crate's types.

use bytes::Bytes;
use nfs3_client::nfs3_types::nfs3::{nfs_fh3, stable_how};
use nfs3_client::nfs3_types::xdr_codec::Opaque;

use super::attr::{ASKED, FH_MAX, FILEHANDLE, fattr4};
use super::xdr::{Ops, Reply, ReplyError, Stateid, attr, op, status};
use super::{V4, decode_error, expect};
use crate::reply::{LookedUp, PipedReply, ReadReply, Written};
use crate::{Attr, DirEntry, Error};

/// OPEN4_SHARE_ACCESS_BOTH, OPEN4_CREATE, UNCHECKED4, CLAIM_NULL.
const SHARE_BOTH: u32 = 3;
const OPEN_CREATE: u32 = 1;
const UNCHECKED: u32 = 0;
const CLAIM_NULL: u32 = 0;
/// OPEN4_RESULT_CONFIRM: a 4.0 open owner's first OPEN must be confirmed.
const RESULT_CONFIRM: u32 = 2;
/// `nfs_ftype4` NF4DIR, for CREATE.
const NF4DIR: u32 = 2;
/// v4.1's current stateid: "the stateid the previous operation returned".
const CURRENT: Stateid = Stateid {
    seqid: 1,
    other: [0; 12],
};

fn fh(b: &[u8]) -> nfs_fh3 {
    nfs_fh3 {
        data: Opaque::owned(b.to_vec()),
    }
}

fn getfh(r: &mut Reply<'_>) -> Result<nfs_fh3, Error> {
    expect(r, op::GETFH, "GETFH")?;
    let b = r
        .opaque(FH_MAX, "filehandle")
        .map_err(decode_error("GETFH"))?;
    Ok(fh(b))
}

fn getattr_result(r: &mut Reply<'_>) -> Result<Attr, Error> {
    expect(r, op::GETATTR, "GETATTR")?;
    fattr4(r)
        .map_err(decode_error("GETATTR"))?
        .attr
        .ok_or(Error::Protocol {
            op: "GETATTR",
            what: "the file type",
        })
}

/// Skips an OPEN result's delegation (`open_delegation4`); none is asked for, but a
/// server may grant one.
fn skip_delegation(r: &mut Reply<'_>) -> Result<(), ReplyError> {
    let ace = |r: &mut Reply<'_>| -> Result<(), ReplyError> {
        r.take(12, "nfsace4")?;
        r.opaque(1024, "nfsace4 who").map(drop)
    };
    match r.u32("delegation type")? {
        0 => Ok(()),
        1 => {
            r.stateid()?;
            r.bool("recall")?;
            ace(r)
        }
        2 => {
            r.stateid()?;
            r.bool("recall")?;
            r.take(12, "space limit")?;
            ace(r)
        }
        3 => match r.u32("why no delegation")? {
            1 | 2 => r.bool("will signal").map(drop),
            _ => Ok(()),
        },
        _ => Err(ReplyError::Bad("delegation type")),
    }
}

/// `change_info4` (atomic, before, after).
fn skip_change_info(r: &mut Reply<'_>) -> Result<(), ReplyError> {
    r.take(20, "change_info4").map(drop)
}

impl V4 {
    /// PUTFH, GETATTR.
    pub async fn getattr(&self, f: &nfs_fh3) -> Result<Attr, Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(f.data.as_ref());
        o.op(op::GETATTR).bitmap(&ASKED);
        let a = self.compound("GETATTR", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        getattr_result(&mut r)
    }

    /// PUTFH `dir`, a LOOKUP per component, GETFH, GETATTR: a whole path in one
    /// COMPOUND (no components: `dir` itself).
    pub async fn walk(&self, dir: &nfs_fh3, comps: &[&str]) -> Result<(nfs_fh3, Attr), Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(dir.data.as_ref());
        for c in comps {
            o.op(op::LOOKUP).opaque(c.as_bytes());
        }
        o.op(op::GETFH);
        o.op(op::GETATTR).bitmap(&ASKED);
        let a = self.compound("LOOKUP", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        for _ in comps {
            expect(&mut r, op::LOOKUP, "LOOKUP")?;
        }
        let f = getfh(&mut r)?;
        let attr = getattr_result(&mut r)?;
        Ok((f, attr))
    }

    /// PUTFH `dir`, LOOKUP `name`, GETFH, GETATTR, READ of the first `max` bytes: a
    /// small file opened and read in one COMPOUND (one round trip). A READ the server
    /// refuses (a directory, a symlink) leaves the head out; the results before it stand.
    pub async fn lookup_head(
        &self,
        dir: &nfs_fh3,
        name: &str,
        max: u32,
    ) -> Result<LookedUp, Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(dir.data.as_ref());
        o.op(op::LOOKUP).opaque(name.as_bytes());
        o.op(op::GETFH);
        o.op(op::GETATTR).bitmap(&ASKED);
        o.op(op::READ).stateid(&Stateid::ANONYMOUS).u64(0).u32(max);
        let a = self.compound("LOOKUP", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        expect(&mut r, op::LOOKUP, "LOOKUP")?;
        let f = getfh(&mut r)?;
        let attr = getattr_result(&mut r)?;
        let e = decode_error("READ");
        if r.op(op::READ).map_err(&e)? != status::OK {
            return Ok(LookedUp {
                fh: f,
                attr,
                head: None,
            });
        }
        let eof = r.bool("eof").map_err(&e)?;
        let data = r.opaque(max as usize, "data").map_err(&e)?;
        let start = data.as_ptr() as usize - a.record.as_ptr() as usize;
        let len = data.len();
        Ok(LookedUp {
            fh: f,
            attr,
            head: Some(ReadReply {
                data: Bytes::from(a.record).slice(start..start + len),
                eof,
                attr: None,
            }),
        })
    }

    /// The largest READ and WRITE the server takes (`maxread`, `maxwrite` of `root`).
    pub async fn limits(&self, root: &nfs_fh3) -> Result<(u64, u64), Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(root.data.as_ref());
        o.op(op::GETATTR).bitmap(&[attr::MAXREAD, attr::MAXWRITE]);
        let a = self.compound("GETATTR", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        expect(&mut r, op::GETATTR, "GETATTR")?;
        let e = decode_error("GETATTR");
        let bits = r.bitmap().map_err(&e)?;
        let list = r.opaque(64, "attribute list").map_err(&e)?;
        let mut l = Reply::new(list, 0);
        let want = (1u128 << attr::MAXREAD) | (1u128 << attr::MAXWRITE);
        if bits != want {
            return Err(Error::Protocol {
                op: "GETATTR",
                what: "maxread and maxwrite",
            });
        }
        Ok((
            l.u64("maxread").map_err(&e)?,
            l.u64("maxwrite").map_err(&e)?,
        ))
    }

    /// PUTFH, READ with the anonymous stateid; the data is a slice of the reply record.
    pub async fn read(&self, f: &nfs_fh3, offset: u64, count: u32) -> Result<ReadReply, Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(f.data.as_ref());
        o.op(op::READ)
            .stateid(&Stateid::ANONYMOUS)
            .u64(offset)
            .u32(count);
        let a = self.compound("READ", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        expect(&mut r, op::READ, "READ")?;
        let e = decode_error("READ");
        let eof = r.bool("eof").map_err(&e)?;
        let data = r.opaque(count as usize, "data").map_err(&e)?;
        let start = data.as_ptr() as usize - a.record.as_ptr() as usize;
        let len = data.len();
        Ok(ReadReply {
            data: Bytes::from(a.record).slice(start..start + len),
            eof,
            attr: None,
        })
    }

    /// PUTFH, READ with the anonymous stateid, the data left in pipes (see
    /// `crate::splice`).
    pub async fn read_piped(
        &self,
        f: &nfs_fh3,
        offset: u64,
        count: u32,
    ) -> Result<PipedReply, Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(f.data.as_ref());
        o.op(op::READ)
            .stateid(&Stateid::ANONYMOUS)
            .u64(offset)
            .u32(count);
        let a = self.compound_piped(&o, count).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        expect(&mut r, op::READ, "READ")?;
        let e = decode_error("READ");
        let eof = r.bool("eof").map_err(&e)?;
        let Some(data) = a.piped else {
            // A successful READ read whole (the server sent a tag): not expected, but
            // its data is in the record.
            return Err(Error::Protocol {
                op: "READ",
                what: "its data where the piped reader expects it",
            });
        };
        Ok(PipedReply {
            data,
            eof,
            attr: None,
        })
    }

    /// PUTFH, WRITE with the anonymous stateid.
    pub async fn write(
        &self,
        f: &nfs_fh3,
        offset: u64,
        data: &[u8],
        stable: stable_how,
    ) -> Result<Written, Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(f.data.as_ref());
        o.op(op::WRITE)
            .stateid(&Stateid::ANONYMOUS)
            .u64(offset)
            .u32(stable as u32)
            .opaque(data);
        let a = self.compound("WRITE", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        expect(&mut r, op::WRITE, "WRITE")?;
        let e = decode_error("WRITE");
        let count = r.u32("count").map_err(&e)?;
        let committed = match r.u32("committed").map_err(&e)? {
            0 => stable_how::UNSTABLE,
            1 => stable_how::DATA_SYNC,
            2 => stable_how::FILE_SYNC,
            _ => {
                return Err(Error::Decode {
                    op: "WRITE",
                    source: ReplyError::Bad("stable_how"),
                });
            }
        };
        let verf = r.fixed("write verifier").map_err(&e)?;
        Ok(Written {
            count,
            committed,
            verf,
        })
    }

    /// PUTFH, COMMIT of the whole file; the write verifier.
    pub async fn commit(&self, f: &nfs_fh3) -> Result<[u8; 8], Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(f.data.as_ref());
        o.op(op::COMMIT).u64(0).u32(0);
        let a = self.compound("COMMIT", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        expect(&mut r, op::COMMIT, "COMMIT")?;
        r.fixed("write verifier").map_err(decode_error("COMMIT"))
    }

    /// OPEN `name` in `dir` with create (UNCHECKED, `mode`) for reading and writing, its
    /// handle and attributes, then CLOSE: as `touch` does.
    pub async fn create(
        &self,
        dir: &nfs_fh3,
        name: &str,
        mode: u32,
    ) -> Result<(nfs_fh3, Attr), Error> {
        self.session.ensure(self).await?;
        if self.minor == 0 {
            return self.create40(dir, name, mode).await;
        }
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(dir.data.as_ref());
        self.open_args(&mut o, 0, self.session.owner(), name, mode);
        o.op(op::GETFH);
        o.op(op::GETATTR).bitmap(&ASKED);
        o.op(op::CLOSE).u32(0).stateid(&CURRENT);
        let a = self.compound("OPEN", false, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        open_result(&mut r)?;
        let f = getfh(&mut r)?;
        let attr = getattr_result(&mut r)?;
        expect(&mut r, op::CLOSE, "CLOSE")?;
        Ok((f, attr))
    }

    fn open_args(&self, o: &mut Ops, seqid: u32, owner: &[u8], name: &str, mode: u32) {
        o.op(op::OPEN)
            .u32(seqid)
            .u32(SHARE_BOTH)
            .u32(0)
            .u64(self.session.clientid())
            .opaque(owner)
            .u32(OPEN_CREATE)
            .u32(UNCHECKED)
            .bitmap(&[attr::MODE]);
        o.u32(4).u32(mode).u32(CLAIM_NULL).opaque(name.as_bytes());
    }

    /// 4.0's create: OPEN (+ OPEN_CONFIRM for a new owner) and CLOSE, each advancing
    /// the owner's seqid; after any failure the owner is replaced, so its seqids never
    /// go out of step with the server's.
    async fn create40(
        &self,
        dir: &nfs_fh3,
        name: &str,
        mode: u32,
    ) -> Result<(nfs_fh3, Attr), Error> {
        let mut owner = self.session.open_owner.lock().await;
        let res = self.create40_as(&mut owner, dir, name, mode).await;
        if res.is_err() {
            owner.name = format!("{}+", String::from_utf8_lossy(&owner.name)).into_bytes();
            owner.seqid = 0;
        }
        res
    }

    async fn create40_as(
        &self,
        owner: &mut super::session::OpenOwner,
        dir: &nfs_fh3,
        name: &str,
        mode: u32,
    ) -> Result<(nfs_fh3, Attr), Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(dir.data.as_ref());
        self.open_args(&mut o, owner.seqid, &owner.name, name, mode);
        o.op(op::GETFH);
        o.op(op::GETATTR).bitmap(&ASKED);
        let a = self.compound("OPEN", false, &o).await?;
        owner.seqid += 1;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        let (mut sid, rflags) = open_result(&mut r)?;
        let f = getfh(&mut r)?;
        let attr = getattr_result(&mut r)?;
        if rflags & RESULT_CONFIRM != 0 {
            let mut o = Ops::default();
            o.op(op::PUTFH).opaque(f.data.as_ref());
            o.op(op::OPEN_CONFIRM).stateid(&sid).u32(owner.seqid);
            let a = self.compound("OPEN_CONFIRM", false, &o).await?;
            owner.seqid += 1;
            let mut r = a.reply();
            expect(&mut r, op::PUTFH, "PUTFH")?;
            expect(&mut r, op::OPEN_CONFIRM, "OPEN_CONFIRM")?;
            sid = r.stateid().map_err(decode_error("OPEN_CONFIRM"))?;
        }
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(f.data.as_ref());
        o.op(op::CLOSE).u32(owner.seqid).stateid(&sid);
        let a = self.compound("CLOSE", false, &o).await?;
        owner.seqid += 1;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        expect(&mut r, op::CLOSE, "CLOSE")?;
        Ok((f, attr))
    }

    /// CREATE of a directory with `mode`.
    pub async fn mkdir(
        &self,
        dir: &nfs_fh3,
        name: &str,
        mode: u32,
    ) -> Result<(nfs_fh3, Attr), Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(dir.data.as_ref());
        o.op(op::CREATE).u32(NF4DIR).opaque(name.as_bytes());
        o.bitmap(&[attr::MODE]).u32(4).u32(mode);
        o.op(op::GETFH);
        o.op(op::GETATTR).bitmap(&ASKED);
        let a = self.compound("MKDIR", false, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        expect(&mut r, op::CREATE, "MKDIR")?;
        let e = decode_error("MKDIR");
        skip_change_info(&mut r).map_err(&e)?;
        r.bitmap().map_err(&e)?;
        let f = getfh(&mut r)?;
        let attr = getattr_result(&mut r)?;
        Ok((f, attr))
    }

    /// REMOVE (a file, or an empty directory).
    pub async fn remove(&self, dir: &nfs_fh3, name: &str, what: &'static str) -> Result<(), Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(dir.data.as_ref());
        o.op(op::REMOVE).opaque(name.as_bytes());
        let a = self.compound(what, false, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        expect(&mut r, op::REMOVE, what)
    }

    /// READLINK.
    pub async fn readlink(&self, f: &nfs_fh3) -> Result<String, Error> {
        let mut o = Ops::default();
        o.op(op::PUTFH).opaque(f.data.as_ref());
        o.op(op::READLINK);
        let a = self.compound("READLINK", true, &o).await?;
        let mut r = a.reply();
        expect(&mut r, op::PUTFH, "PUTFH")?;
        expect(&mut r, op::READLINK, "READLINK")?;
        let t = r
            .opaque(4096, "link text")
            .map_err(decode_error("READLINK"))?;
        Ok(String::from_utf8_lossy(t).into_owned())
    }

    /// Every entry of a directory, with attributes and handles (READDIR pages).
    pub async fn readdir(&self, dir: &nfs_fh3) -> Result<Vec<DirEntry>, Error> {
        let mut out = Vec::new();
        let mut cookie = 0u64;
        let mut verf = [0u8; 8];
        let mut asked = ASKED.to_vec();
        asked.push(FILEHANDLE);
        loop {
            let mut o = Ops::default();
            o.op(op::PUTFH).opaque(dir.data.as_ref());
            o.op(op::READDIR)
                .u64(cookie)
                .fixed(&verf)
                .u32(64 << 10)
                .u32(256 << 10)
                .bitmap(&asked);
            let a = self.compound("READDIR", true, &o).await?;
            let mut r = a.reply();
            expect(&mut r, op::PUTFH, "PUTFH")?;
            expect(&mut r, op::READDIR, "READDIR")?;
            let (eof, n) = readdir_page(&mut r, &mut out, &mut cookie, &mut verf)
                .map_err(decode_error("READDIR"))?;
            if eof {
                return Ok(out);
            }
            if n == 0 {
                return Err(Error::Protocol {
                    op: "READDIR",
                    what: "entries (empty page without eof)",
                });
            }
        }
    }
}

/// An OPEN result: its stateid and result flags (change info, attributes set and any
/// delegation read past).
fn open_result(r: &mut Reply<'_>) -> Result<(Stateid, u32), Error> {
    expect(r, op::OPEN, "OPEN")?;
    let e = decode_error("OPEN");
    let sid = r.stateid().map_err(&e)?;
    skip_change_info(r).map_err(&e)?;
    let rflags = r.u32("rflags").map_err(&e)?;
    r.bitmap().map_err(&e)?;
    skip_delegation(r).map_err(&e)?;
    Ok((sid, rflags))
}

/// One READDIR page into `out`: whether it was the last, and how many entries it had.
fn readdir_page(
    r: &mut Reply<'_>,
    out: &mut Vec<DirEntry>,
    cookie: &mut u64,
    verf: &mut [u8; 8],
) -> Result<(bool, usize), ReplyError> {
    *verf = r.fixed("cookie verifier")?;
    let mut n = 0;
    while r.bool("entry follows")? {
        n += 1;
        *cookie = r.u64("cookie")?;
        let name = String::from_utf8_lossy(r.opaque(1024, "entry name")?).into_owned();
        let d = fattr4(r)?;
        if name == "." || name == ".." {
            continue;
        }
        out.push(DirEntry {
            fileid: d.attr.as_ref().map_or(0, |a| a.fileid),
            name,
            attr: d.attr,
            handle: d.handle,
        });
    }
    Ok((r.bool("eof")?, n))
}

/// Fuzz entry: an OPEN result.
pub(crate) fn fuzz_open_result(r: &mut Reply<'_>) -> bool {
    open_result(r).is_ok()
}

/// Fuzz entry: a READDIR page (bounded by the input: an entry takes at least 16 bytes).
pub(crate) fn fuzz_readdir_page(r: &mut Reply<'_>) -> bool {
    let mut out = Vec::new();
    let ok = readdir_page(r, &mut out, &mut 0, &mut [0; 8]).is_ok();
    assert!(out.len() <= r.buf.len() / 16 + 1);
    ok
}

/// Fuzz entry: a GETATTR result.
pub(crate) fn fuzz_getattr_result(r: &mut Reply<'_>) -> bool {
    getattr_result(r).is_ok()
}

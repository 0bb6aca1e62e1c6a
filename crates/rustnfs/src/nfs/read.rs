//! The procedures that only look: GETATTR, LOOKUP, ACCESS, READLINK, READ, READDIR,
//! READDIRPLUS, FSSTAT, FSINFO, PATHCONF.

use std::time::Instant;

use nfs3_types::nfs3::{
    ACCESS3res, ACCESS3resfail, ACCESS3resok, FSINFO3res, FSINFO3resfail, FSSTAT3res,
    FSSTAT3resfail, GETATTR3res, GETATTR3resok, LOOKUP3res, LOOKUP3resfail, LOOKUP3resok,
    Nfs3Result, PATHCONF3res, PATHCONF3resfail, READDIR3res, READDIR3resfail, READDIR3resok,
    READDIRPLUS3res, READDIRPLUS3resfail, READDIRPLUS3resok, READLINK3res, READLINK3resfail,
    READLINK3resok, cookieverf3, dirlist3, dirlistplus3, entry3, entryplus3, filename3, nfspath3,
    nfsstat3, post_op_attr, post_op_fh3,
};
use nfs3_types::xdr_codec::{List, Opaque, Void};

use super::xdr::{Args, Decoded, opaque_size, put};
use super::{Answer, Caller, Dispatcher, fail, label};
use crate::fs::{DirIter, Entry};

/// XDR sizes used to fill READDIR/READDIRPLUS replies up to the client's limits.
const POST_OP_ATTR: usize = 4 + 84;
/// status + dir attributes + cookie verifier + end-of-list + eof.
const DIR_REPLY_BASE: usize = 4 + POST_OP_ATTR + 8 + 4 + 4;
/// The largest READDIR/READDIRPLUS result built, whatever count the client asks: kernel
/// nfsd caps it at its largest payload (1 MiB) too. One call with maxcount 2^32-1 on a
/// 100k-entry directory built a reply the size of the whole buffer budget.
pub(super) const MAX_DIR_REPLY: usize = 1 << 20;

/// The result size a READDIR/READDIRPLUS asking `count` bytes is built within.
fn dir_reply_limit(count: u32) -> usize {
    (count as usize).min(MAX_DIR_REPLY)
}

/// READDIR3args and READDIRPLUS3args (`plus`), the handle borrowed from the record.
pub(super) struct DirArgs<'a> {
    pub dir: &'a [u8],
    pub cookie: u64,
    /// The size the result is built within: the client's `count` (READDIR) or
    /// `maxcount` (READDIRPLUS, whose `dircount` is advisory), capped.
    pub count: usize,
}

impl<'a> DirArgs<'a> {
    /// The arguments, which must fill `a` exactly (else GARBAGE_ARGS).
    pub fn decode(a: &mut Args<'a>, plus: bool) -> Decoded<Self> {
        let dir = a.fh()?;
        let cookie = a.u64()?;
        let _verf: cookieverf3 = a.xdr()?;
        if plus {
            let _dircount = a.u32()?;
        }
        let count = dir_reply_limit(a.u32()?);
        a.end()?;
        Ok(DirArgs { dir, cookie, count })
    }
}

impl Dispatcher {
    pub(super) fn getattr(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let fh = a.fh()?;
        a.end()?;
        let t = Instant::now();
        let r = self.handle(fh).and_then(|fh| self.fs.attr(&fh));
        self.vfs("GETATTR", t, &r);
        let res: GETATTR3res = match r {
            Ok(obj_attributes) => Nfs3Result::Ok(GETATTR3resok { obj_attributes }),
            Err(s) => Nfs3Result::Err((s, Void)),
        };
        put(out, &res);
        Ok(label(&res))
    }

    pub(super) fn lookup(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let dir = a.fh()?;
        let name = a.string()?;
        a.end()?;
        let t = Instant::now();
        let (r, dir_attributes) = match self.handle(dir) {
            Ok(dir) => self.fs.lookup(&dir, name),
            Err(s) => (Err(s), post_op_attr::None),
        };
        self.vfs("LOOKUP", t, &r);
        let res: LOOKUP3res = match r {
            Ok((fh, attr)) => Nfs3Result::Ok(LOOKUP3resok {
                object: self.fs.wire(&fh),
                obj_attributes: post_op_attr::Some(attr),
                dir_attributes,
            }),
            Err(s) => Nfs3Result::Err((s, LOOKUP3resfail { dir_attributes })),
        };
        put(out, &res);
        Ok(label(&res))
    }

    /// ACCESS: what the caller's uid and groups may do by the object's mode bits (root
    /// may read and write anything, and execute what has an execute bit), minus every
    /// change on a read-only export. The kernel client enforces this answer; the server
    /// itself acts with its own identity (see the README's security notes).
    pub(super) fn access(&self, caller: &Caller, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let fh = a.fh()?;
        let want = a.u32()?;
        a.end()?;
        let t = Instant::now();
        let r = self.handle(fh).and_then(|fh| Ok((self.fs.attr(&fh)?, fh)));
        self.vfs("ACCESS", t, &r);
        let res: ACCESS3res = match r {
            Ok((attr, fh)) => {
                // After the export's squashing for this client, and its read-only.
                let access = want & self.fs.allowed(&fh, &attr, caller);
                Nfs3Result::Ok(ACCESS3resok {
                    obj_attributes: post_op_attr::Some(attr),
                    access,
                })
            }
            Err(s) => Nfs3Result::Err((s, ACCESS3resfail::default())),
        };
        put(out, &res);
        Ok(label(&res))
    }

    pub(super) fn readlink(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let fh = a.fh()?;
        a.end()?;
        let t = Instant::now();
        let (r, symlink_attributes) = match self.handle(fh) {
            Ok(fh) => self.fs.readlink(&fh),
            Err(s) => (Err(s), post_op_attr::None),
        };
        self.vfs("READLINK", t, &r);
        let res: READLINK3res<'_> = match r {
            Ok(data) => Nfs3Result::Ok(READLINK3resok {
                symlink_attributes,
                data: nfspath3(Opaque::owned(data)),
            }),
            Err(s) => Nfs3Result::Err((s, READLINK3resfail { symlink_attributes })),
        };
        put(out, &res);
        Ok(label(&res))
    }

    /// READ through [`super::read3`], the implementation the guard's data paths use
    /// (the guard answers READ itself; this serves a call handed to the dispatcher).
    pub(super) fn read(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let args = super::read3::ReadArgs::decode(a)?;
        Ok(super::read3::put_result(&self.fs, &args, out))
    }

    /// READDIR: entries from the cookie on until the reply would exceed `count` bytes.
    /// The cookie verifier is always zero: cookies are directory offsets, valid across
    /// changes (RFC 1813 allows zero for servers whose cookies stay valid).
    pub(super) fn readdir(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let DirArgs { dir, cookie, count } = DirArgs::decode(a, false)?;
        let t = Instant::now();
        let res: READDIR3res<'_> = match self
            .handle(dir)
            .and_then(|d| self.fs.dir_iter(&d, cookie, false))
        {
            Err(s) => fail::<READDIR3resok<'_>, READDIR3resfail>(s),
            Ok(mut it) => {
                let dir_attributes = post_op_attr::Some(it.attr());
                let listed = fill(&mut it, count, |e| {
                    let size = 4 + 8 + opaque_size(e.name.len()) + 8;
                    let entry = entry3 {
                        fileid: e.fileid,
                        name: filename3(Opaque::owned(e.name)),
                        cookie: e.cookie,
                    };
                    Some((size, entry))
                });
                match listed {
                    Err(s) => Nfs3Result::Err((s, READDIR3resfail { dir_attributes })),
                    Ok((entries, eof)) => Nfs3Result::Ok(READDIR3resok {
                        dir_attributes,
                        cookieverf: cookieverf3::default(),
                        reply: dirlist3 {
                            entries: List(entries),
                            eof,
                        },
                    }),
                }
            }
        };
        self.vfs_res("READDIR", t, &res);
        put(out, &res);
        Ok(label(&res))
    }

    /// READDIRPLUS: as READDIR with each entry's attributes and handle, bounded by
    /// `maxcount` (the whole reply). `dircount` is advisory, as with kernel nfsd: the
    /// reply size is what a client must be able to receive.
    pub(super) fn readdirplus(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let DirArgs {
            dir,
            cookie,
            count: maxcount,
        } = DirArgs::decode(a, true)?;
        let t = Instant::now();
        let res: READDIRPLUS3res<'_> = match self
            .handle(dir)
            .and_then(|d| self.fs.dir_iter(&d, cookie, true))
        {
            Err(s) => fail::<READDIRPLUS3resok<'_>, READDIRPLUS3resfail>(s),
            Ok(mut it) => {
                let dir_attributes = post_op_attr::Some(it.attr());
                let listed = fill(&mut it, maxcount, |e| {
                    // A READDIRPLUS listing stats every entry it yields, unless the caller
                    // may not search the directory: then names only, as kernel nfsd.
                    let (name_attributes, fh) = match e.plus {
                        Some((attr, fh)) => (post_op_attr::Some(attr), fh),
                        None => (post_op_attr::None, None),
                    };
                    let name_handle = match fh {
                        Some(fh) => post_op_fh3::Some(self.fs.wire(&fh)),
                        None => post_op_fh3::None,
                    };
                    let fh_size = match &name_handle {
                        post_op_fh3::Some(h) => 4 + opaque_size(h.data.len()),
                        post_op_fh3::None => 4,
                    };
                    let attr_size = match &name_attributes {
                        post_op_attr::Some(_) => POST_OP_ATTR,
                        post_op_attr::None => 4,
                    };
                    let size = 4 + 8 + opaque_size(e.name.len()) + 8 + attr_size + fh_size;
                    let entry = entryplus3 {
                        fileid: e.fileid,
                        name: filename3(Opaque::owned(e.name)),
                        cookie: e.cookie,
                        name_attributes,
                        name_handle,
                    };
                    Some((size, entry))
                });
                match listed {
                    Err(s) => Nfs3Result::Err((s, READDIRPLUS3resfail { dir_attributes })),
                    Ok((entries, eof)) => Nfs3Result::Ok(READDIRPLUS3resok {
                        dir_attributes,
                        cookieverf: cookieverf3::default(),
                        reply: dirlistplus3 {
                            entries: List(entries),
                            eof,
                        },
                    }),
                }
            }
        };
        self.vfs_res("READDIRPLUS", t, &res);
        put(out, &res);
        Ok(label(&res))
    }

    pub(super) fn fsstat(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let fh = a.fh()?;
        a.end()?;
        // DirFs::fsstat records its own `vfs` time.
        let res: FSSTAT3res = match self.handle(fh).and_then(|fh| self.fs.fsstat(&fh)) {
            Ok(ok) => Nfs3Result::Ok(ok),
            Err(s) => fail::<_, FSSTAT3resfail>(s),
        };
        put(out, &res);
        Ok(label(&res))
    }

    pub(super) fn fsinfo(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let fh = a.fh()?;
        a.end()?;
        let t = Instant::now();
        let r = self.handle(fh).and_then(|fh| self.fs.fsinfo(&fh));
        self.vfs("FSINFO", t, &r);
        let res: FSINFO3res = match r {
            Ok(ok) => Nfs3Result::Ok(ok),
            Err(s) => fail::<_, FSINFO3resfail>(s),
        };
        put(out, &res);
        Ok(label(&res))
    }

    pub(super) fn pathconf(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let fh = a.fh()?;
        a.end()?;
        let t = Instant::now();
        let r = self.handle(fh).and_then(|fh| self.fs.pathconf(&fh));
        self.vfs("PATHCONF", t, &r);
        let res: PATHCONF3res = match r {
            Ok(ok) => Nfs3Result::Ok(ok),
            Err(s) => fail::<_, PATHCONF3resfail>(s),
        };
        put(out, &res);
        Ok(label(&res))
    }

    /// Records the `vfs` time of a procedure whose result is already built.
    fn vfs_res<T, E>(&self, op: &str, t: Instant, res: &Nfs3Result<T, E>) {
        let r: Result<(), nfsstat3> = match res {
            Nfs3Result::Ok(_) => Ok(()),
            Nfs3Result::Err((s, _)) => Err(*s),
        };
        self.vfs(op, t, &r);
    }
}

/// A READDIR/READDIRPLUS listing from `it`: the entries `make` builds (with their XDR
/// size; `None` skips one) while the whole reply stays within `limit` bytes, and whether
/// the directory's end was reached. NFS3ERR_TOOSMALL when not even one entry fits.
fn fill<E>(
    it: &mut DirIter,
    limit: usize,
    mut make: impl FnMut(Entry) -> Option<(usize, E)>,
) -> Result<(Vec<E>, bool), nfsstat3> {
    let mut size = DIR_REPLY_BASE;
    let mut entries = Vec::new();
    loop {
        let entry = match it.next_entry() {
            None => return Ok((entries, true)),
            Some(e) => e?,
        };
        let Some((add, entry)) = make(entry) else {
            continue;
        };
        if size + add > limit {
            if entries.is_empty() {
                return Err(nfsstat3::NFS3ERR_TOOSMALL);
            }
            return Ok((entries, false));
        }
        size += add;
        entries.push(entry);
    }
}

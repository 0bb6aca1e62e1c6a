//! The procedures that change the tree: SETATTR, WRITE, CREATE, MKDIR, SYMLINK, MKNOD,
//! REMOVE, RMDIR, RENAME, LINK, COMMIT. Every reply carries the weak cache consistency
//! data (`wcc_data`) of what changed.

use std::time::Instant;

use nfs3_types::nfs3::{
    COMMIT3res, COMMIT3resfail, COMMIT3resok, CREATE3res, CREATE3resfail, CREATE3resok, LINK3res,
    LINK3resfail, LINK3resok, MKDIR3res, MKDIR3resfail, MKDIR3resok, MKNOD3res, MKNOD3resfail,
    MKNOD3resok, Nfs3Option, Nfs3Result, REMOVE3res, REMOVE3resfail, REMOVE3resok, RENAME3res,
    RENAME3resfail, RENAME3resok, RMDIR3res, RMDIR3resfail, RMDIR3resok, SETATTR3res,
    SETATTR3resfail, SETATTR3resok, SYMLINK3res, SYMLINK3resfail, SYMLINK3resok, WRITE3res,
    WRITE3resfail, WRITE3resok, createhow3, fattr3, mknoddata3, nfsstat3, nfstime3, post_op_attr,
    post_op_fh3, sattr3, stable_how, wcc_data,
};

use super::xdr::{Args, put};
use super::{Answer, Dispatcher, label};
use crate::fs::{Fh, MAX_IO, NfsResult};

impl Dispatcher {
    pub(super) fn setattr(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let fh = a.fh()?;
        let attr: sattr3 = a.xdr()?;
        let guard: Nfs3Option<nfstime3> = a.xdr()?;
        a.end()?;
        let guard = match guard {
            Nfs3Option::Some(t) => Some(t),
            Nfs3Option::None => None,
        };
        let t = Instant::now();
        let (r, obj_wcc) = match self.handle(fh) {
            Ok(fh) => self.fs.setattr(&fh, &attr, guard),
            Err(s) => (Err(s), wcc_data::default()),
        };
        self.vfs("SETATTR", t, &r);
        let res: SETATTR3res = match r {
            Ok(()) => Nfs3Result::Ok(SETATTR3resok { obj_wcc }),
            Err(s) => Nfs3Result::Err((s, SETATTR3resfail { obj_wcc })),
        };
        put(out, &res);
        Ok(label(&res))
    }

    /// WRITE: as stable as the client asked (UNSTABLE, DATA_SYNC, FILE_SYNC; all
    /// FILE_SYNC with `--sync`); the reply says how stable it is, with this instance's
    /// verifier.
    pub(super) fn write(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let fh = a.fh()?;
        let offset = a.u64()?;
        let count = a.u32()?;
        let stable: stable_how = a.xdr()?;
        let data = a.opaque(MAX_IO as usize)?;
        a.end()?;
        let t = Instant::now();
        let (r, file_wcc) = if data.len() != count as usize {
            (Err(nfsstat3::NFS3ERR_INVAL), wcc_data::default())
        } else {
            match self.handle(fh) {
                Ok(fh) => self.fs.write(&fh, offset, data, stable),
                Err(s) => (Err(s), wcc_data::default()),
            }
        };
        let status = match &r {
            Ok(_) => "ok",
            Err(s) => crate::status::status_label(*s),
        };
        let bytes = if r.is_ok() { data.len() as u64 } else { 0 };
        self.registry
            .record_op("WRITE", "vfs", status, t.elapsed(), bytes);
        let res: WRITE3res = match r {
            Ok(committed) => Nfs3Result::Ok(WRITE3resok {
                file_wcc,
                count,
                committed,
                verf: self.verf,
            }),
            Err(s) => Nfs3Result::Err((s, WRITE3resfail { file_wcc })),
        };
        put(out, &res);
        Ok(label(&res))
    }

    pub(super) fn create(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let dir = a.fh()?;
        let name = a.string()?;
        let how: createhow3 = a.xdr()?;
        a.end()?;
        let t = Instant::now();
        let (r, dir_wcc) = self.in_dir(dir, |d| self.fs.create(d, name, &how));
        self.vfs("CREATE", t, &r);
        let res: CREATE3res = match r {
            Ok((fh, attr)) => {
                let (obj, obj_attributes) = self.new_object(&fh, attr);
                Nfs3Result::Ok(CREATE3resok {
                    obj,
                    obj_attributes,
                    dir_wcc,
                })
            }
            Err(s) => Nfs3Result::Err((s, CREATE3resfail { dir_wcc })),
        };
        put(out, &res);
        Ok(label(&res))
    }

    pub(super) fn mkdir(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let dir = a.fh()?;
        let name = a.string()?;
        let attr: sattr3 = a.xdr()?;
        a.end()?;
        let t = Instant::now();
        let (r, dir_wcc) = self.in_dir(dir, |d| self.fs.mkdir(d, name, &attr));
        self.vfs("MKDIR", t, &r);
        let res: MKDIR3res = match r {
            Ok((fh, attr)) => {
                let (obj, obj_attributes) = self.new_object(&fh, attr);
                Nfs3Result::Ok(MKDIR3resok {
                    obj,
                    obj_attributes,
                    dir_wcc,
                })
            }
            Err(s) => Nfs3Result::Err((s, MKDIR3resfail { dir_wcc })),
        };
        put(out, &res);
        Ok(label(&res))
    }

    pub(super) fn symlink(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let dir = a.fh()?;
        let name = a.string()?;
        // The link's own attributes (mode) mean nothing on Linux; the target follows.
        let _attr: sattr3 = a.xdr()?;
        let target = a.string()?;
        a.end()?;
        let t = Instant::now();
        let (r, dir_wcc) = self.in_dir(dir, |d| self.fs.symlink(d, name, target));
        self.vfs("SYMLINK", t, &r);
        let res: SYMLINK3res = match r {
            Ok((fh, attr)) => {
                let (obj, obj_attributes) = self.new_object(&fh, attr);
                Nfs3Result::Ok(SYMLINK3resok {
                    obj,
                    obj_attributes,
                    dir_wcc,
                })
            }
            Err(s) => Nfs3Result::Err((s, SYMLINK3resfail { dir_wcc })),
        };
        put(out, &res);
        Ok(label(&res))
    }

    pub(super) fn mknod(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let dir = a.fh()?;
        let name = a.string()?;
        // The type is read first: REG, DIR, LNK and unknown types carry nothing more and
        // are BADTYPE (RFC 1813 §3.3.11), not undecodable arguments.
        let ty = a.u32()?;
        let what = match ty {
            3 => mknoddata3::NF3BLK(a.xdr()?),
            4 => mknoddata3::NF3CHR(a.xdr()?),
            6 => mknoddata3::NF3SOCK(a.xdr()?),
            7 => mknoddata3::NF3FIFO(a.xdr()?),
            _ => mknoddata3::default,
        };
        if !matches!(what, mknoddata3::default) {
            a.end()?;
        }
        let t = Instant::now();
        let (r, dir_wcc) = self.in_dir(dir, |d| self.fs.mknod(d, name, &what));
        self.vfs("MKNOD", t, &r);
        let res: MKNOD3res = match r {
            Ok((fh, attr)) => {
                let (obj, obj_attributes) = self.new_object(&fh, attr);
                Nfs3Result::Ok(MKNOD3resok {
                    obj,
                    obj_attributes,
                    dir_wcc,
                })
            }
            Err(s) => Nfs3Result::Err((s, MKNOD3resfail { dir_wcc })),
        };
        put(out, &res);
        Ok(label(&res))
    }

    /// REMOVE (`rmdir` false) and RMDIR (true): same arguments, same reply shape.
    pub(super) fn remove(&self, a: &mut Args<'_>, out: &mut Vec<u8>, rmdir: bool) -> Answer {
        let dir = a.fh()?;
        let name = a.string()?;
        a.end()?;
        let t = Instant::now();
        let (r, dir_wcc) = self.in_dir(dir, |d| self.fs.remove(d, name, rmdir));
        if rmdir {
            self.vfs("RMDIR", t, &r);
            let res: RMDIR3res = match r {
                Ok(()) => Nfs3Result::Ok(RMDIR3resok { dir_wcc }),
                Err(s) => Nfs3Result::Err((s, RMDIR3resfail { dir_wcc })),
            };
            put(out, &res);
            Ok(label(&res))
        } else {
            self.vfs("REMOVE", t, &r);
            let res: REMOVE3res = match r {
                Ok(()) => Nfs3Result::Ok(REMOVE3resok { dir_wcc }),
                Err(s) => Nfs3Result::Err((s, REMOVE3resfail { dir_wcc })),
            };
            put(out, &res);
            Ok(label(&res))
        }
    }

    pub(super) fn rename(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let from = a.fh()?;
        let from_name = a.string()?;
        let to = a.fh()?;
        let to_name = a.string()?;
        a.end()?;
        let t = Instant::now();
        let (r, fromdir_wcc, todir_wcc) = match (self.handle(from), self.handle(to)) {
            (Ok(from), Ok(to)) => self.fs.rename(&from, from_name, &to, to_name),
            (Err(s), _) | (_, Err(s)) => (Err(s), wcc_data::default(), wcc_data::default()),
        };
        self.vfs("RENAME", t, &r);
        let res: RENAME3res = match r {
            Ok(()) => Nfs3Result::Ok(RENAME3resok {
                fromdir_wcc,
                todir_wcc,
            }),
            Err(s) => Nfs3Result::Err((
                s,
                RENAME3resfail {
                    fromdir_wcc,
                    todir_wcc,
                },
            )),
        };
        put(out, &res);
        Ok(label(&res))
    }

    pub(super) fn link(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let file = a.fh()?;
        let dir = a.fh()?;
        let name = a.string()?;
        a.end()?;
        let t = Instant::now();
        let (r, file_attributes, linkdir_wcc) = match (self.handle(file), self.handle(dir)) {
            (Ok(file), Ok(dir)) => self.fs.link(&file, &dir, name),
            (Err(s), _) | (_, Err(s)) => (Err(s), post_op_attr::None, wcc_data::default()),
        };
        self.vfs("LINK", t, &r);
        let res: LINK3res = match r {
            Ok(()) => Nfs3Result::Ok(LINK3resok {
                file_attributes,
                linkdir_wcc,
            }),
            Err(s) => Nfs3Result::Err((
                s,
                LINK3resfail {
                    file_attributes,
                    linkdir_wcc,
                },
            )),
        };
        put(out, &res);
        Ok(label(&res))
    }

    pub(super) fn commit(&self, a: &mut Args<'_>, out: &mut Vec<u8>) -> Answer {
        let fh = a.fh()?;
        let _offset = a.u64()?;
        let _count = a.u32()?;
        a.end()?;
        let t = Instant::now();
        let (r, file_wcc) = match self.handle(fh) {
            Ok(fh) => self.fs.commit(&fh),
            Err(s) => (Err(s), wcc_data::default()),
        };
        self.vfs("COMMIT", t, &r);
        let res: COMMIT3res = match r {
            Ok(()) => Nfs3Result::Ok(COMMIT3resok {
                file_wcc,
                verf: self.verf,
            }),
            Err(s) => Nfs3Result::Err((s, COMMIT3resfail { file_wcc })),
        };
        put(out, &res);
        Ok(label(&res))
    }

    /// Decodes the directory handle of a change and runs it; a bad handle gets its
    /// status with empty wcc data.
    fn in_dir<T>(
        &self,
        dir: &[u8],
        f: impl FnOnce(&Fh) -> (NfsResult<T>, wcc_data),
    ) -> (NfsResult<T>, wcc_data) {
        match self.handle(dir) {
            Ok(d) => f(&d),
            Err(s) => (Err(s), wcc_data::default()),
        }
    }

    /// A new object's handle and attributes, as CREATE/MKDIR/SYMLINK/MKNOD return them.
    fn new_object(&self, fh: &Fh, attr: fattr3) -> (post_op_fh3, post_op_attr) {
        (
            post_op_fh3::Some(self.fs.wire(fh)),
            post_op_attr::Some(attr),
        )
    }
}

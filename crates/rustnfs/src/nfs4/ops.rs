//! The operations on handles and files: GETATTR, VERIFY/NVERIFY, ACCESS, LOOKUP(P),
//! READLINK, READ, WRITE, COMMIT, READDIR, CREATE, REMOVE, RENAME, LINK, SETATTR,
//! SECINFO — each a call into `DirFs` (which runs changes as the caller), its v3
//! status mapped once (`proto::from_v3`). A READ that ends its COMPOUND leaves its data
//! to be sent after the reply (`tail`).

use std::time::Instant;

use nfs3_types::nfs3::{
    Nfs3Option, devicedata3, fattr3, ftype3, mknoddata3, post_op_attr, pre_op_attr, sattr3,
    specdata3, stable_how, wcc_data,
};

use super::args::{CreateKind, Fattr};
use super::attr::{self, Obj};
use super::proto::{self, Status};
use super::state::Stateid;
use super::tail::{ReadTail, TAIL_MIN};
use super::xdr::{self, Bitmap};
use super::{Ctx, Io, Nfs4, READDIR_MAX, cur};
use crate::fs::{Fh, MAX_IO};

/// Checks a name for LOOKUP or a new entry (RFC 7530 §12.7): not empty, at most 255
/// bytes, one component and neither `.` nor `..`.
pub(super) fn check_name(name: &[u8]) -> Result<(), Status> {
    if name.is_empty() {
        return Err(proto::INVAL);
    }
    if name.len() > 255 {
        return Err(proto::NAMETOOLONG);
    }
    if name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0) {
        return Err(proto::BADNAME);
    }
    Ok(())
}

fn v3<T>(r: crate::fs::NfsResult<T>) -> Result<T, Status> {
    r.map_err(proto::from_v3)
}

/// A `change_info4` from a change's weak cache consistency data.
pub(super) fn cinfo(out: &mut Vec<u8>, wcc: &wcc_data) {
    let before = match &wcc.before {
        pre_op_attr::Some(a) => attr::change(a.ctime),
        pre_op_attr::None => 0,
    };
    let after = match &wcc.after {
        post_op_attr::Some(a) => attr::change(a.ctime),
        post_op_attr::None => 0,
    };
    xdr::bool(out, false);
    xdr::u64(out, before);
    xdr::u64(out, after);
}

impl Nfs4 {
    /// The attributes of a directory, or `NOTDIR` (`SYMLINK` for a symbolic link).
    pub(super) fn dir(&self, fh: &Fh) -> Result<fattr3, Status> {
        let a = v3(self.fs.attr(fh))?;
        match a.type_ {
            ftype3::NF3DIR => Ok(a),
            ftype3::NF3LNK => Err(proto::SYMLINK),
            _ => Err(proto::NOTDIR),
        }
    }

    fn obj<'a>(&self, cx: &Ctx<'_>, attr: &'a fattr3, fh: &Fh) -> Obj<'a> {
        Obj {
            attr,
            fh: Some(fh.to_wire()),
            lease: self.lease_secs,
            minor: cx.minor,
            times: self.whole_times(attr, fh),
        }
    }

    /// The object's times whole, when `attr`'s may have been cut to NFSv3's range (one
    /// more stat, only then).
    fn whole_times(&self, attr: &fattr3, fh: &Fh) -> Option<[(i64, u32); 3]> {
        if !Obj::times_cut(attr) {
            return None;
        }
        let st = self.fs.stat(fh).ok()?;
        Some([st.atime, st.mtime, st.ctime])
    }

    pub(super) fn getattr(
        &self,
        cx: &Ctx<'_>,
        mask: Bitmap,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        if mask.bits & attr::WRITE_ONLY != 0 {
            return Err(proto::INVAL);
        }
        let a = v3(self.fs.attr(&fh))?;
        attr::encode(out, mask, &self.obj(cx, &a, &fh), || {
            self.fs.fsstat(&fh).ok()
        });
        Ok(())
    }

    pub(super) fn verify(&self, cx: &Ctx<'_>, f: Fattr<'_>, want_same: bool) -> Result<(), Status> {
        let fh = cur(cx)?;
        let a = v3(self.fs.attr(&fh))?;
        let same = attr::same(f.mask, f.vals, &self.obj(cx, &a, &fh), || {
            self.fs.fsstat(&fh).ok()
        })?;
        match (want_same, same) {
            (true, false) => Err(proto::NOT_SAME),
            (false, true) => Err(proto::SAME),
            _ => Ok(()),
        }
    }

    /// ACCESS: the v3 rules (the bits have the same values), for the caller after
    /// squashing; every bit NFSv4.0 defines is supported.
    pub(super) fn access(&self, cx: &Ctx<'_>, want: u32, out: &mut Vec<u8>) -> Result<(), Status> {
        let fh = cur(cx)?;
        let a = v3(self.fs.attr(&fh))?;
        let supported = want & 0x3f;
        let ok = self.fs.allowed(&fh, &a, cx.caller);
        xdr::u32(out, supported);
        xdr::u32(out, supported & ok);
        Ok(())
    }

    pub(super) fn lookup(&self, cx: &mut Ctx<'_>, name: &[u8]) -> Result<(), Status> {
        let fh = cur(cx)?;
        self.dir(&fh)?;
        check_name(name)?;
        let (r, _) = self.fs.lookup(&fh, name);
        cx.cur = Some(v3(r)?.0);
        Ok(())
    }

    /// LOOKUPP: the parent; the root (the pseudo-root is the export) has none.
    pub(super) fn lookupp(&self, cx: &mut Ctx<'_>) -> Result<(), Status> {
        let fh = cur(cx)?;
        self.dir(&fh)?;
        if fh == self.fs.root_fh() {
            return Err(proto::NOENT);
        }
        let (r, _) = self.fs.lookup(&fh, b"..");
        cx.cur = Some(v3(r)?.0);
        Ok(())
    }

    pub(super) fn readlink(&self, cx: &Ctx<'_>, out: &mut Vec<u8>) -> Result<(), Status> {
        let fh = cur(cx)?;
        let (r, _) = self.fs.readlink(&fh);
        let target = v3(r)?;
        xdr::opaque(out, &target);
        Ok(())
    }

    /// READ: the stateid checked (`open`), the data read straight into the reply, or
    /// left to be sent after it (`tail`).
    pub(super) fn read(
        &self,
        cx: &mut Ctx<'_>,
        sid: &Stateid,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        // Not a regular file: ISDIR or INVAL, from `read_into` (no extra stat here: the
        // stateid names an open file anyway).
        self.check_io(cx, sid, &fh, Io::Read)?;
        // Within the reply's room (the status and the two words below are counted).
        let room = u32::try_from(cx.room.saturating_sub(16)).unwrap_or(u32::MAX);
        if cx.tail_ok {
            return self.read_tailed(cx, fh, offset, count.min(MAX_IO).min(room), out);
        }
        let eof_at = out.len();
        xdr::bool(out, false);
        let len_at = out.len();
        xdr::u32(out, 0);
        let (_, n, eof) = self
            .fs
            .read_into(&fh, offset, count.min(MAX_IO).min(room), out)
            .map_err(|(s, _)| proto::from_v3(s))?;
        out[eof_at..eof_at + 4].copy_from_slice(&u32::from(eof).to_be_bytes());
        out[len_at..len_at + 4].copy_from_slice(&n.to_be_bytes());
        out.resize(out.len() + (4 - n as usize % 4) % 4, 0);
        Ok(())
    }

    pub(super) fn write(
        &self,
        cx: &Ctx<'_>,
        sid: &Stateid,
        offset: u64,
        stable: u32,
        data: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        if data.len() > MAX_IO as usize {
            return Err(proto::INVAL);
        }
        // Not a regular file: ISDIR or INVAL, from `DirFs::write`.
        self.check_io(cx, sid, &fh, Io::Write)?;
        let how = match stable {
            0 => stable_how::UNSTABLE,
            1 => stable_how::DATA_SYNC,
            _ => stable_how::FILE_SYNC,
        };
        let (r, _) = self.fs.write(&fh, offset, data, how);
        let committed = v3(r)?;
        xdr::u32(out, data.len() as u32);
        xdr::u32(out, committed as u32);
        xdr::fixed(out, &self.verf);
        Ok(())
    }

    pub(super) fn commit(&self, cx: &Ctx<'_>, out: &mut Vec<u8>) -> Result<(), Status> {
        let fh = cur(cx)?;
        let (r, _) = self.fs.commit(&fh);
        v3(r)?;
        xdr::fixed(out, &self.verf);
        Ok(())
    }

    /// READDIR: entries from the cookie on (the kernel's directory offsets, as in v3;
    /// `.` and `..` are never listed, so the reserved cookies 1 and 2 are never given
    /// out) while the reply stays within `maxcount`; the verifier is always zero.
    pub(super) fn readdir(
        &self,
        cx: &Ctx<'_>,
        cookie: u64,
        maxcount: u32,
        want: Bitmap,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        self.dir(&fh)?;
        if want.bits & attr::WRITE_ONLY != 0 {
            return Err(proto::INVAL);
        }
        if cookie == 1 || cookie == 2 {
            return Err(proto::BAD_COOKIE);
        }
        let limit = (maxcount.min(READDIR_MAX) as usize).min(cx.room.saturating_sub(8));
        let mut it = v3(self.fs.dir_iter(&fh, cookie, true))?;
        let base = out.len();
        xdr::fixed(out, &[0u8; 8]);
        let mut entries = 0usize;
        let mut eof = true;
        let mut ent = Vec::with_capacity(512);
        while let Some(e) = it.next_entry() {
            let e = match e {
                Ok(e) => e,
                Err(s) if entries == 0 => return Err(proto::from_v3(s)),
                Err(_) => {
                    eof = false;
                    break;
                }
            };
            if e.name == b"." || e.name == b".." {
                continue;
            }
            // No attributes: the caller may read the directory but not search it, and
            // knfsd fails the whole READDIR then (RFC 7530 §16.24.4 without rdattr_error).
            let Some((a, efh)) = e.plus else {
                return Err(proto::ACCESS);
            };
            ent.clear();
            xdr::bool(&mut ent, true);
            xdr::u64(&mut ent, e.cookie);
            xdr::opaque(&mut ent, &e.name);
            let obj = Obj {
                attr: &a,
                fh: efh.map(|f| f.to_wire()),
                lease: self.lease_secs,
                minor: cx.minor,
                times: efh.and_then(|f| self.whole_times(&a, &f)),
            };
            attr::encode(&mut ent, want, &obj, || self.fs.fsstat(&fh).ok());
            // The reply's size as maxcount counts it: verifier, entries, the list's end
            // and eof.
            if out.len() - base + ent.len() + 8 > limit {
                if entries == 0 {
                    return Err(proto::TOOSMALL);
                }
                eof = false;
                break;
            }
            out.extend_from_slice(&ent);
            entries += 1;
        }
        xdr::bool(out, false);
        xdr::bool(out, eof);
        Ok(())
    }

    /// CREATE of everything but regular files (OPEN makes those): directories,
    /// symbolic links, fifos, sockets, and devices where the export allows them. The
    /// mode is applied at creation; an owner, group or times asked for are set after,
    /// and `attrsset` says what was.
    pub(super) fn create(
        &self,
        cx: &mut Ctx<'_>,
        kind: CreateKind<'_>,
        name: &[u8],
        attrs: Fattr<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let dir = cur(cx)?;
        self.dir(&dir)?;
        check_name(name)?;
        let set = attr::decode_settable(attrs.mask, attrs.vals)?;
        if set.mask & (1 << attr::SIZE) != 0 {
            return Err(proto::INVAL);
        }
        let mode_only = sattr3 {
            mode: set.sattr.mode,
            ..Default::default()
        };
        let (r, wcc) = match kind {
            CreateKind::Dir => self.fs.mkdir(&dir, name, &mode_only),
            CreateKind::Link(target) => self.fs.symlink(&dir, name, target),
            CreateKind::Fifo => self.fs.mknod(&dir, name, &mknoddata3::NF3FIFO(mode_only)),
            CreateKind::Socket => self.fs.mknod(&dir, name, &mknoddata3::NF3SOCK(mode_only)),
            CreateKind::Device {
                block,
                major,
                minor,
            } => {
                let d = devicedata3 {
                    dev_attributes: mode_only,
                    spec: specdata3 {
                        specdata1: major,
                        specdata2: minor,
                    },
                };
                let what = if block {
                    mknoddata3::NF3BLK(d)
                } else {
                    mknoddata3::NF3CHR(d)
                };
                self.fs.mknod(&dir, name, &what)
            }
            CreateKind::Other => return Err(proto::BADTYPE),
        };
        let (new, _) = v3(r)?;
        let mut attrset = 0;
        if matches!(set.sattr.mode, Nfs3Option::Some(_)) && !matches!(kind, CreateKind::Link(_)) {
            attrset |= 1 << attr::MODE;
        }
        let rest_mask = set.mask & !(1 << attr::MODE);
        if rest_mask != 0 {
            let rest = sattr3 {
                mode: Nfs3Option::None,
                ..set.sattr
            };
            if self.fs.setattr(&new, &rest, None).0.is_ok() {
                attrset |= rest_mask;
            }
        }
        cinfo(out, &wcc);
        xdr::bitmap(out, attrset);
        cx.cur = Some(new);
        Ok(())
    }

    /// REMOVE of any kind of entry (a directory only when empty).
    pub(super) fn remove(
        &self,
        cx: &Ctx<'_>,
        name: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let dir = cur(cx)?;
        self.dir(&dir)?;
        check_name(name)?;
        let (found, _) = self.fs.lookup(&dir, name);
        let (_, a) = v3(found)?;
        let (r, wcc) = self.fs.remove(&dir, name, a.type_ == ftype3::NF3DIR);
        v3(r)?;
        cinfo(out, &wcc);
        Ok(())
    }

    /// RENAME from the saved directory to the current one.
    pub(super) fn rename(
        &self,
        cx: &Ctx<'_>,
        old: &[u8],
        new: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let to = cur(cx)?;
        let from = cx.saved.ok_or(proto::NOFILEHANDLE)?;
        self.dir(&from)?;
        self.dir(&to)?;
        check_name(old)?;
        check_name(new)?;
        let (r, fw, tw) = self.fs.rename(&from, old, &to, new);
        v3(r)?;
        cinfo(out, &fw);
        cinfo(out, &tw);
        Ok(())
    }

    /// LINK: a new name in the current directory for the saved object.
    pub(super) fn link(&self, cx: &Ctx<'_>, name: &[u8], out: &mut Vec<u8>) -> Result<(), Status> {
        let dir = cur(cx)?;
        let file = cx.saved.ok_or(proto::NOFILEHANDLE)?;
        self.dir(&dir)?;
        check_name(name)?;
        let (r, _, wcc) = self.fs.link(&file, &dir, name);
        v3(r)?;
        cinfo(out, &wcc);
        Ok(())
    }

    /// SETATTR; a size change needs a stateid that may write (or a special one, checked
    /// against share reservations).
    pub(super) fn setattr(
        &self,
        cx: &Ctx<'_>,
        sid: &Stateid,
        f: Fattr<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let fh = cur(cx)?;
        let set = attr::decode_settable(f.mask, f.vals)?;
        if matches!(set.sattr.size, Nfs3Option::Some(_)) {
            self.check_io(cx, sid, &fh, Io::Truncate)?;
        }
        let (r, _) = self.fs.setattr(&fh, &set.sattr, None);
        v3(r)?;
        if set.wide != (None, None) {
            v3(self.fs.set_times(&fh, set.wide.0, set.wide.1))?;
        }
        xdr::bitmap(out, set.mask);
        Ok(())
    }

    /// SECINFO: AUTH_SYS is the flavour every object is served with (AUTH_NONE calls
    /// only with `--allow-auth-none`, as nobody).
    pub(super) fn secinfo(
        &self,
        cx: &Ctx<'_>,
        name: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let dir = cur(cx)?;
        self.dir(&dir)?;
        check_name(name)?;
        let (r, _) = self.fs.lookup(&dir, name);
        v3(r)?;
        xdr::u32(out, 1);
        xdr::u32(out, oncrpc::msg::flavor::AUTH_SYS);
        Ok(())
    }
}

impl Nfs4 {
    /// READ on the tail path: the stateid was checked; `count` is within the reply's
    /// room. Appends `eof` and the count, and leaves the data to `cx.tail`; a READ of
    /// at most [`TAIL_MIN`] bytes is copied into `out` instead.
    pub(super) fn read_tailed(
        &self,
        cx: &mut Ctx<'_>,
        fh: Fh,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        let vfs_start = Instant::now();
        let (attr, file) = match self.fs.open_read(&fh) {
            Ok(opened) => opened,
            Err((s, _)) => {
                self.fs.record_read(&fh, vfs_start, Err(s));
                return Err(proto::from_v3(s));
            }
        };
        let n = u64::from(count).min(attr.size.saturating_sub(offset)) as usize;
        if n <= TAIL_MIN {
            return self.read_copied(fh, (&file, attr.size), offset, n, vfs_start, out);
        }
        xdr::bool(out, offset + n as u64 >= attr.size);
        xdr::u32(out, n as u32);
        cx.tail = Some(ReadTail {
            fh,
            file,
            offset,
            len: n,
            vfs_start,
        });
        Ok(())
    }

    /// A short tail-path READ copied into the reply: up to `n` bytes of the open file.
    fn read_copied(
        &self,
        fh: Fh,
        (file, size): (&std::fs::File, u64),
        offset: u64,
        n: usize,
        vfs_start: Instant,
        out: &mut Vec<u8>,
    ) -> Result<(), Status> {
        use std::os::unix::fs::FileExt;
        let eof_at = out.len();
        xdr::bool(out, false);
        xdr::u32(out, 0);
        let base = out.len();
        out.resize(base + n, 0);
        let mut got = 0;
        while got < n {
            match file.read_at(&mut out[base + got..], offset + got as u64) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    out.truncate(eof_at);
                    let s = crate::status::nfsstat_from_io(&e);
                    self.fs.record_read(&fh, vfs_start, Err(s));
                    return Err(proto::from_v3(s));
                }
            }
        }
        out.truncate(base + got);
        let eof = got < n || offset + got as u64 >= size;
        out[eof_at..eof_at + 4].copy_from_slice(&u32::from(eof).to_be_bytes());
        out[eof_at + 4..eof_at + 8].copy_from_slice(&(got as u32).to_be_bytes());
        out.resize(out.len() + (4 - got % 4) % 4, 0);
        self.fs.record_read(&fh, vfs_start, Ok(got as u64));
        Ok(())
    }
}

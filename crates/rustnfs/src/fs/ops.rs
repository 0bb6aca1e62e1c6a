//! The procedures that change the tree (and the small read-only ones that need no
//! listing): each resolves beneath the jail, does one change, and returns the weak cache
//! consistency data (RFC 1813 §2.6) the reply carries.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};

use nfs3_types::mount::mountstat3;
use nfs3_types::nfs3::{
    FSF3_CANSETTIME, FSF3_HOMOGENEOUS, FSF3_LINK, FSF3_SYMLINK, FSINFO3resok, Nfs3Option,
    PATHCONF3resok, createhow3, createverf3, fattr3, mknoddata3, nfsstat3, nfstime3, post_op_attr,
    pre_op_attr, sattr3, stable_how, wcc_data,
};

use super::attr::{set_time, set_time_m, wcc_of};
use super::{DirFs, Fh, Loc, MAX_IO, NfsResult, blocking, check_name, io_err};
use crate::identity::{Access, Squash};
use crate::sys::{self, Stat};

/// A change's result with the directory's (or file's) before/after attributes.
pub type Changed<T> = (NfsResult<T>, wcc_data);

/// The longest name a client may create (one path component, as `check_name` allows).
pub const NAME_MAX: u32 = 255;

impl DirFs {
    fn check_writable(&self) -> NfsResult<()> {
        if self.policy.read_only {
            Err(nfsstat3::NFS3ERR_ROFS)
        } else {
            Ok(())
        }
    }

    /// Runs `f` on an open directory the caller may change (write and search, as knfsd's
    /// `NFSD_MAY_CREATE`/`NFSD_MAY_REMOVE`: checked before anything is looked up in it,
    /// so a refused caller learns nothing of its names) and returns its result with the
    /// directory's attributes before and after — one resolution of the directory, two
    /// `fstat`s.
    fn in_dir<T>(&self, dirfh: &Fh, f: impl FnOnce(&OwnedFd, &Stat) -> NfsResult<T>) -> Changed<T> {
        if let Err(s) = self.check_writable() {
            return (Err(s), wcc_data::default());
        }
        let (dir, st) = match self.dir_fd(dirfh) {
            Ok(d) => d,
            Err(s) => return (Err(s), wcc_data::default()),
        };
        let before = pre_op_attr::Some(wcc_of(&self.fattr(&st)));
        let r = self
            .may_in_dir(&dir, &st, Access::CHANGE)
            .and_then(|()| f(&dir, &st));
        let after = sys::fstat(dir.as_fd())
            .map_or(post_op_attr::None, |s| post_op_attr::Some(self.fattr(&s)));
        (r, wcc_data { before, after })
    }

    /// Gives a new object the squash owner, when squashing without acting as the caller
    /// (acting as the caller, the kernel already made the squash identity its owner).
    /// An object that cannot be given its owner is removed again: nothing half-created.
    fn squash_new(&self, dir: &OwnedFd, name: &CString) -> NfsResult<()> {
        if self.inner.switching {
            return Ok(());
        }
        if let Squash::All(uid, gid) = self.policy.squash
            && let Err(e) = sys::lchownat(dir.as_fd(), name, uid, gid)
        {
            if sys::unlinkat(dir.as_fd(), name, false).is_err() {
                let _ = sys::unlinkat(dir.as_fd(), name, true);
            }
            return Err(io_err(e));
        }
        Ok(())
    }

    /// Records a new entry and returns its handle and attributes.
    fn new_entry(&self, dir: &OwnedFd, dir_ino: u64, name: &CString) -> NfsResult<(Fh, fattr3)> {
        let st = sys::statx(dir.as_fd(), name).map_err(io_err)?;
        self.inner.nodes.insert(st.ino, dir_ino, name.as_bytes());
        Ok((self.fh_of(&st), self.fattr(&st)))
    }

    /// SETATTR. `guard` is the client's expected ctime (`NFS3ERR_NOT_SYNC` if it differs).
    pub fn setattr(&self, fh: &Fh, attr: &sattr3, guard: Option<nfstime3>) -> Changed<()> {
        if let Err(s) = self.check_writable() {
            return (Err(s), wcc_data::default());
        }
        let before = match self.getattr_sync(fh) {
            Ok(a) => a,
            Err(s) => return (Err(s), wcc_data::default()),
        };
        let r = match guard {
            Some(t) if t != before.ctime => Err(nfsstat3::NFS3ERR_NOT_SYNC),
            _ => self.setattr_sync(fh, attr),
        };
        let after = self
            .getattr_sync(fh)
            .map_or(post_op_attr::None, post_op_attr::Some);
        let before = pre_op_attr::Some(wcc_of(&before));
        (r, wcc_data { before, after })
    }

    fn setattr_sync(&self, fh: &Fh, attr: &sattr3) -> NfsResult<()> {
        let loc = self.locate(fh)?;
        let st = *loc.stat();
        if !st.is_dir() && !st.is_reg() {
            // Symlinks, fifos, sockets, devices: changed by name, never opened (opening a
            // fifo or a device may have side effects), never followed. A symlink has no
            // mode of its own on Linux; none of them has a size to set.
            let Loc::Child { dir, name, .. } = &loc else {
                return Err(nfsstat3::NFS3ERR_INVAL);
            };
            if matches!(attr.size, Nfs3Option::Some(_)) {
                return Err(nfsstat3::NFS3ERR_INVAL);
            }
            let (uid, gid) = self.owner_change(attr);
            let (a, m) = (set_time(attr.atime), set_time_m(attr.mtime));
            return self.act(|| {
                if let Nfs3Option::Some(mode) = attr.mode
                    && !st.is_symlink()
                {
                    sys::lchmodat(dir.as_fd(), name, mode & 0o7777).map_err(io_err)?;
                }
                if uid != u32::MAX || gid != u32::MAX {
                    sys::lchownat(dir.as_fd(), name, uid, gid).map_err(io_err)?;
                }
                if a.is_some() || m.is_some() {
                    sys::lutimensat(dir.as_fd(), name, a, m).map_err(io_err)?;
                }
                Ok(())
            });
        }
        let sized = matches!(attr.size, Nfs3Option::Some(_));
        let flags = if st.is_dir() {
            libc::O_RDONLY | libc::O_DIRECTORY
        } else if sized {
            libc::O_WRONLY | libc::O_NONBLOCK
        } else {
            libc::O_RDONLY | libc::O_NONBLOCK
        };
        // Opened as the server (the owner may change the attributes of a file it cannot
        // read); the change itself runs as the caller, so the kernel checks ownership,
        // clears SUID/SGID as it would locally. ftruncate on a writable descriptor checks
        // nothing more, so the caller's right to truncate is checked here.
        let (fd, st) = self.open_obj(fh, flags)?;
        if sized && !self.may_write(&st) {
            return Err(nfsstat3::NFS3ERR_ACCES);
        }
        self.act(|| self.apply_sattr(&fd, &st, attr))
    }

    /// The `(uid, gid)` a SETATTR asks for (`u32::MAX` = keep), mapped by `--squash`.
    pub(super) fn owner_change(&self, attr: &sattr3) -> (u32, u32) {
        let mut uid = match attr.uid {
            Nfs3Option::Some(u) => u,
            Nfs3Option::None => u32::MAX,
        };
        let mut gid = match attr.gid {
            Nfs3Option::Some(g) => g,
            Nfs3Option::None => u32::MAX,
        };
        // Acting as the caller, the kernel decides (a squashed caller may not give a file
        // away, as with knfsd); otherwise the requested owner is mapped to the squash one.
        if let (Squash::All(su, sg), false) = (self.policy.squash, self.inner.switching) {
            if uid != u32::MAX {
                uid = su;
            }
            if gid != u32::MAX {
                gid = sg;
            }
        }
        (uid, gid)
    }

    /// WRITE as the client asked (RFC 1813 §3.3.7): UNSTABLE is answered once the data
    /// is in the page cache (COMMIT makes it stable), DATA_SYNC after `fdatasync`,
    /// FILE_SYNC after `fsync`; with `--sync` every WRITE is FILE_SYNC. Returns how stable
    /// the data is. The caller's right to write is checked by the mode bits with the
    /// owner override (knfsd's rule), and the write runs as the caller, so a write by
    /// anyone but a privileged caller clears SUID/SGID as it would locally.
    pub fn write(
        &self,
        fh: &Fh,
        offset: u64,
        data: &[u8],
        stable: stable_how,
    ) -> Changed<stable_how> {
        use std::os::unix::fs::FileExt;
        if let Err(s) = self.check_writable() {
            return (Err(s), wcc_data::default());
        }
        if data.len() > MAX_IO as usize {
            return (Err(nfsstat3::NFS3ERR_INVAL), wcc_data::default());
        }
        if offset
            .checked_add(data.len() as u64)
            .is_none_or(|end| end > i64::MAX as u64)
        {
            return (Err(nfsstat3::NFS3ERR_FBIG), wcc_data::default());
        }
        let file = match self.file(fh, true) {
            Ok(f) => f,
            Err(s) => return (Err(s), wcc_data::default()),
        };
        let st = match sys::fstat(file.as_fd()) {
            Ok(s) => s,
            Err(e) => return (Err(io_err(e)), wcc_data::default()),
        };
        let before = pre_op_attr::Some(wcc_of(&self.fattr(&st)));
        if !self.may_write(&st) {
            return (
                Err(nfsstat3::NFS3ERR_ACCES),
                wcc_data {
                    before,
                    after: post_op_attr::Some(self.fattr(&st)),
                },
            );
        }
        let stable = if self.inner.sync_writes {
            stable_how::FILE_SYNC
        } else {
            stable
        };
        // Only the write itself runs as the caller; the flush runs as the server, outside
        // `act`, because `block_in_place` may start a runtime thread, and a thread started
        // while this one is switched would inherit the caller's identity for good.
        let r = self
            .act(|| file.write_all_at(data, offset).map_err(io_err))
            .and_then(|()| match stable {
                stable_how::UNSTABLE => Ok(stable),
                stable_how::DATA_SYNC => blocking(|| file.sync_data())
                    .map_err(io_err)
                    .map(|()| stable),
                _ => blocking(|| file.sync_all())
                    .map_err(io_err)
                    .map(|()| stable_how::FILE_SYNC),
            });
        let after = sys::fstat(file.as_fd())
            .map_or(post_op_attr::None, |s| post_op_attr::Some(self.fattr(&s)));
        (r, wcc_data { before, after })
    }

    /// COMMIT: makes every WRITE of the file stable — `fdatasync`, which also writes the
    /// metadata needed to read the data back (the size), as RFC 1813 asks. Cheap when
    /// nothing is dirty (every WRITE was FILE_SYNC). The whole file is flushed whatever
    /// range the client names, which is what the range means at most.
    pub fn commit(&self, fh: &Fh) -> Changed<()> {
        let file = match self.file(fh, false) {
            Ok(f) => f,
            Err(s) => return (Err(s), wcc_data::default()),
        };
        let before = sys::fstat(file.as_fd()).map_or(pre_op_attr::None, |s| {
            pre_op_attr::Some(wcc_of(&self.fattr(&s)))
        });
        let r = blocking(|| file.sync_data()).map_err(io_err);
        let after = sys::fstat(file.as_fd())
            .map_or(post_op_attr::None, |s| post_op_attr::Some(self.fattr(&s)));
        (r, wcc_data { before, after })
    }

    /// CREATE in its three modes (RFC 1813 §3.3.8).
    pub fn create(&self, dirfh: &Fh, name: &[u8], how: &createhow3) -> Changed<(Fh, fattr3)> {
        let cname = match check_name(name) {
            Ok(c) => c,
            Err(s) => return (Err(s), wcc_data::default()),
        };
        self.in_dir(dirfh, |dir, dst| match how {
            createhow3::UNCHECKED(attr) => self.create_file(dir, dst, &cname, attr, false),
            createhow3::GUARDED(attr) => self.create_file(dir, dst, &cname, attr, true),
            createhow3::EXCLUSIVE(verf) => self.create_exclusive(dir, dst, &cname, verf),
        })
    }

    /// UNCHECKED (an existing file gets the attributes, e.g. size 0) or GUARDED (an
    /// existing name is `EXIST`).
    fn create_file(
        &self,
        dir: &OwnedFd,
        dst: &Stat,
        cname: &CString,
        attr: &sattr3,
        guarded: bool,
    ) -> NfsResult<(Fh, fattr3)> {
        let mode = match attr.mode {
            Nfs3Option::Some(m) => m & 0o7777,
            Nfs3Option::None => 0o644,
        };
        // As the caller: the new file is theirs, and an existing one (UNCHECKED) is only
        // opened, and its attributes set, when they may write it.
        self.act(|| {
            let (fd, created) = open_or_create(dir, cname, mode, guarded)?;
            let st = sys::fstat(fd.as_fd()).map_err(io_err)?;
            if !st.is_reg() {
                return Err(nfsstat3::NFS3ERR_EXIST);
            }
            let mut rest = attr.clone();
            rest.mode = Nfs3Option::None;
            if let Nfs3Option::Some(m) = attr.mode
                && st.mode & 0o7777 != m & 0o7777
            {
                // The process umask trimmed it; the client already applied its own.
                rest.mode = Nfs3Option::Some(m & 0o7777);
            }
            if let Err(refused) = self.apply_sattr(&fd, &st, &rest) {
                // A refused call changes nothing: the file this call made goes again
                // (`sattr uid=0` as uid 1000 left an empty file owned by 1000).
                if created {
                    remove_new(dir, cname, &st, false);
                }
                return Err(refused);
            }
            Ok(st)
        })
        .map(|st| self.inner.fds.remove(st.ino))?;
        self.squash_new(dir, cname)?;
        self.new_entry(dir, dst.ino, cname)
    }

    /// EXCLUSIVE: the verifier is kept in the new file's atime and mtime seconds (as kernel
    /// nfsd does), so a retransmission with the same verifier finds it and succeeds, and
    /// another client's create of the same name gets `EXIST`. The client then sets the
    /// real attributes with SETATTR.
    fn create_exclusive(
        &self,
        dir: &OwnedFd,
        dst: &Stat,
        cname: &CString,
        verf: &createverf3,
    ) -> NfsResult<(Fh, fattr3)> {
        let (v0, v1) = verifier_times(verf);
        let made = self.act(|| {
            let fd = sys::openat(
                dir.as_fd(),
                cname,
                libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NONBLOCK,
                0o644,
            );
            Ok(fd.and_then(|fd| {
                sys::lutimensat(fd.as_fd(), c"", Some(Some((v0, 0))), Some(Some((v1, 0))))
            }))
        })?;
        match made {
            Ok(()) => {
                self.squash_new(dir, cname)?;
                self.new_entry(dir, dst.ino, cname)
            }
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                let st = sys::statx(dir.as_fd(), cname).map_err(io_err)?;
                if st.is_reg() && st.atime == (v0, 0) && st.mtime == (v1, 0) {
                    self.new_entry(dir, dst.ino, cname)
                } else {
                    Err(nfsstat3::NFS3ERR_EXIST)
                }
            }
            Err(e) => Err(io_err(e)),
        }
    }

    /// MKDIR with the client's mode (default 0755).
    pub fn mkdir(&self, dirfh: &Fh, name: &[u8], attr: &sattr3) -> Changed<(Fh, fattr3)> {
        let cname = match check_name(name) {
            Ok(c) => c,
            Err(s) => return (Err(s), wcc_data::default()),
        };
        self.in_dir(dirfh, |dir, dst| {
            let mode = match attr.mode {
                Nfs3Option::Some(m) => m & 0o7777,
                Nfs3Option::None => 0o755,
            };
            self.act(|| {
                sys::mkdirat(dir.as_fd(), &cname, mode).map_err(io_err)?;
                self.fix_mode(dir, &cname, mode)?;
                self.set_new_attrs(dir, &cname, attr, true)
            })?;
            self.squash_new(dir, &cname)?;
            self.new_entry(dir, dst.ino, &cname)
        })
    }

    /// Sets a new entry's mode when the process umask trimmed it (never via a symlink).
    /// A directory keeps the SGID bit it inherited from an SGID parent (as mkdir(2)
    /// gives it: new entries below keep the group), which the client never asks for.
    fn fix_mode(&self, dir: &OwnedFd, cname: &CString, mode: u32) -> NfsResult<()> {
        let st = sys::statx(dir.as_fd(), cname).map_err(io_err)?;
        let inherited = if st.is_dir() {
            st.mode & libc::S_ISGID
        } else {
            0
        };
        let want = mode | inherited;
        if st.mode & 0o7777 != want {
            sys::lchmodat(dir.as_fd(), cname, want).map_err(io_err)?;
        }
        Ok(())
    }

    /// The attributes a MKDIR or MKNOD asks for beyond the mode (owner, group, times),
    /// set on the new entry by name, as the caller (so the kernel decides who may give
    /// a file away, as for SETATTR). One refused removes the entry again: a refused call
    /// leaves nothing, as with Ganesha (knfsd leaves it). A size is not an attribute of
    /// a directory or a special file (`ISDIR`, `INVAL`).
    fn set_new_attrs(
        &self,
        dir: &OwnedFd,
        cname: &CString,
        attr: &sattr3,
        is_dir: bool,
    ) -> NfsResult<()> {
        let r = (|| {
            if let Nfs3Option::Some(_) = attr.size {
                return Err(if is_dir {
                    nfsstat3::NFS3ERR_ISDIR
                } else {
                    nfsstat3::NFS3ERR_INVAL
                });
            }
            let (uid, gid) = self.owner_change(attr);
            if uid != u32::MAX || gid != u32::MAX {
                sys::lchownat(dir.as_fd(), cname, uid, gid).map_err(io_err)?;
            }
            let (a, m) = (set_time(attr.atime), set_time_m(attr.mtime));
            if a.is_some() || m.is_some() {
                sys::lutimensat(dir.as_fd(), cname, a, m).map_err(io_err)?;
            }
            Ok(())
        })();
        if r.is_err()
            && let Ok(st) = sys::statx(dir.as_fd(), cname)
        {
            remove_new(dir, cname, &st, is_dir);
        }
        r
    }

    /// SYMLINK: the target is stored verbatim; only clients ever resolve it.
    pub fn symlink(&self, dirfh: &Fh, name: &[u8], target: &[u8]) -> Changed<(Fh, fattr3)> {
        let cname = match check_name(name) {
            Ok(c) => c,
            Err(s) => return (Err(s), wcc_data::default()),
        };
        self.in_dir(dirfh, |dir, dst| {
            if target.is_empty() {
                return Err(nfsstat3::NFS3ERR_INVAL);
            }
            let ctarget = CString::new(target).map_err(|_| nfsstat3::NFS3ERR_INVAL)?;
            self.act(|| sys::symlinkat(&ctarget, dir.as_fd(), &cname).map_err(io_err))?;
            self.squash_new(dir, &cname)?;
            self.new_entry(dir, dst.ino, &cname)
        })
    }

    /// MKNOD: fifos and sockets (the server never opens them). Device nodes are refused
    /// with `PERM` unless `--allow-device-nodes`: a device node in an export is a way
    /// into the host for anyone who can also reach the export directory there. Allowed,
    /// they are made as the caller (so only an unsquashed root gets one, CAP_MKNOD).
    /// Other types are `BADTYPE` (decided by the dispatcher, which reads the type).
    pub fn mknod(&self, dirfh: &Fh, name: &[u8], what: &mknoddata3) -> Changed<(Fh, fattr3)> {
        let cname = match check_name(name) {
            Ok(c) => c,
            Err(s) => return (Err(s), wcc_data::default()),
        };
        self.in_dir(dirfh, |dir, dst| {
            let (kind, attr, dev) = match what {
                mknoddata3::NF3FIFO(a) => (libc::S_IFIFO, a, 0),
                mknoddata3::NF3SOCK(a) => (libc::S_IFSOCK, a, 0),
                mknoddata3::NF3CHR(_) | mknoddata3::NF3BLK(_) if !self.inner.allow_device_nodes => {
                    return Err(nfsstat3::NFS3ERR_PERM);
                }
                mknoddata3::NF3CHR(d) => (libc::S_IFCHR, &d.dev_attributes, device(d)),
                mknoddata3::NF3BLK(d) => (libc::S_IFBLK, &d.dev_attributes, device(d)),
                mknoddata3::default => return Err(nfsstat3::NFS3ERR_BADTYPE),
            };
            let mode = match attr.mode {
                Nfs3Option::Some(m) => m & 0o7777,
                Nfs3Option::None => 0o644,
            };
            self.act(|| {
                sys::mknodat(dir.as_fd(), &cname, kind | mode, dev).map_err(io_err)?;
                self.fix_mode(dir, &cname, mode)?;
                self.set_new_attrs(dir, &cname, attr, false)
            })?;
            self.squash_new(dir, &cname)?;
            self.new_entry(dir, dst.ino, &cname)
        })
    }

    /// REMOVE (`rmdir` false) or RMDIR (true). The kernel refuses the wrong kind
    /// (EISDIR / ENOTDIR) and a non-empty directory (ENOTEMPTY).
    pub fn remove(&self, dirfh: &Fh, name: &[u8], rmdir: bool) -> Changed<()> {
        let cname = match check_name(name) {
            Ok(c) => c,
            Err(s) => return (Err(s), wcc_data::default()),
        };
        self.in_dir(dirfh, |dir, _| {
            let st = sys::statx(dir.as_fd(), &cname).map_err(io_err)?;
            self.act(|| sys::unlinkat(dir.as_fd(), &cname, rmdir).map_err(io_err))?;
            self.inner.fds.remove(st.ino);
            if st.nlink <= 1 || st.is_dir() {
                self.inner.nodes.remove(st.ino);
            }
            Ok(())
        })
    }

    /// RENAME, over an existing file or empty directory as rename(2) allows.
    pub fn rename(
        &self,
        from: &Fh,
        from_name: &[u8],
        to: &Fh,
        to_name: &[u8],
    ) -> (NfsResult<()>, wcc_data, wcc_data) {
        let none = || (wcc_data::default(), wcc_data::default());
        let names = self
            .check_writable()
            .and_then(|()| Ok((check_name(from_name)?, check_name(to_name)?)));
        let (cfrom, cto) = match names {
            Ok(n) => n,
            Err(s) => {
                let (a, b) = none();
                return (Err(s), a, b);
            }
        };
        let dirs = self.dir_fd(from).and_then(|f| Ok((f, self.dir_fd(to)?)));
        let ((fdir, fst), (tdir, tst)) = match dirs {
            Ok(d) => d,
            Err(s) => {
                let (a, b) = none();
                return (Err(s), a, b);
            }
        };
        let fbefore = pre_op_attr::Some(wcc_of(&self.fattr(&fst)));
        let tbefore = pre_op_attr::Some(wcc_of(&self.fattr(&tst)));
        let r = (|| {
            // Both directories change: write and search on each, as knfsd asks.
            self.may_in_dir(&fdir, &fst, Access::CHANGE)?;
            self.may_in_dir(&tdir, &tst, Access::CHANGE)?;
            let st = sys::statx(fdir.as_fd(), &cfrom).map_err(io_err)?;
            let replaced = sys::statx(tdir.as_fd(), &cto).ok();
            self.act(|| sys::renameat(fdir.as_fd(), &cfrom, tdir.as_fd(), &cto).map_err(io_err))?;
            if let Some(old) = replaced
                && old.ino != st.ino
            {
                self.inner.fds.remove(old.ino);
                self.inner.nodes.remove(old.ino);
            }
            self.inner.nodes.insert(st.ino, tst.ino, to_name);
            Ok(())
        })();
        let after = |d: &OwnedFd| {
            sys::fstat(d.as_fd()).map_or(post_op_attr::None, |s| post_op_attr::Some(self.fattr(&s)))
        };
        let fw = wcc_data {
            before: fbefore,
            after: after(&fdir),
        };
        let tw = wcc_data {
            before: tbefore,
            after: after(&tdir),
        };
        (r, fw, tw)
    }

    /// LINK: a new name in `dirfh` for the object `file` is. Both ends are resolved
    /// beneath the export (the source by its handle's remembered place, the target as
    /// one checked name), and the new name is verified to be the handle's inode.
    pub fn link(
        &self,
        file: &Fh,
        dirfh: &Fh,
        name: &[u8],
    ) -> (NfsResult<()>, post_op_attr, wcc_data) {
        let cname = match check_name(name) {
            Ok(c) => c,
            Err(s) => return (Err(s), post_op_attr::None, wcc_data::default()),
        };
        let src = match self.check_writable().and_then(|()| self.locate(file)) {
            Ok(Loc::Child { dir, name, stat }) if !stat.is_dir() => (dir, name),
            Ok(_) => {
                return (
                    Err(nfsstat3::NFS3ERR_ISDIR),
                    post_op_attr::None,
                    wcc_data::default(),
                );
            }
            Err(s) => return (Err(s), post_op_attr::None, wcc_data::default()),
        };
        let (r, wcc) = self.in_dir(dirfh, |tdir, _| {
            self.act(|| sys::linkat(src.0.as_fd(), &src.1, tdir.as_fd(), &cname).map_err(io_err))?;
            let st = sys::statx(tdir.as_fd(), &cname).map_err(io_err)?;
            if !Self::matches(file, &st) {
                // The source name was replaced between resolution and link: undo.
                let _ = sys::unlinkat(tdir.as_fd(), &cname, false);
                return Err(nfsstat3::NFS3ERR_STALE);
            }
            Ok(())
        });
        let attr = self
            .getattr_sync(file)
            .map_or(post_op_attr::None, post_op_attr::Some);
        (r, attr, wcc)
    }

    /// READLINK: the target as stored.
    pub fn readlink(&self, fh: &Fh) -> (NfsResult<Vec<u8>>, post_op_attr) {
        match self.locate(fh) {
            Ok(Loc::Child { dir, name, stat }) if stat.is_symlink() => (
                sys::readlinkat(dir.as_fd(), &name).map_err(io_err),
                post_op_attr::Some(self.fattr(&stat)),
            ),
            Ok(loc) => (
                Err(nfsstat3::NFS3ERR_INVAL),
                post_op_attr::Some(self.fattr(loc.stat())),
            ),
            Err(s) => (Err(s), post_op_attr::None),
        }
    }

    /// MOUNT: `""` and `/` are the root; so is the export's own absolute path
    /// (`host:/srv/share`, as with kernel nfsd); anything else is a directory beneath it.
    /// The result must be a directory (a symlink or file is `NOTDIR`).
    pub fn mount(&self, path: &[u8]) -> Result<Fh, mountstat3> {
        let trim = |p: &[u8]| -> Vec<u8> {
            let s = p.iter().position(|&b| b != b'/').unwrap_or(p.len());
            let e = p.iter().rposition(|&b| b != b'/').map_or(s, |i| i + 1);
            p[s..e.max(s)].to_vec()
        };
        let path = trim(path);
        let export = trim(self.inner.export.as_os_str().as_encoded_bytes());
        let rest: &[u8] = if path == export {
            b""
        } else if path.len() > export.len()
            && path.starts_with(&export)
            && path[export.len()] == b'/'
        {
            &path[export.len() + 1..]
        } else {
            &path
        };
        let mut fh = self.root_fh();
        for comp in rest.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
            fh = self.lookup_sync(&fh, comp).map_err(mount_status)?;
        }
        match self.getattr_sync(&fh) {
            Ok(a) if a.type_ == nfs3_types::nfs3::ftype3::NF3DIR => Ok(fh),
            Ok(_) => Err(mountstat3::MNT3ERR_NOTDIR),
            Err(s) => Err(mount_status(s)),
        }
    }

    /// FSINFO: 1 MiB reads and writes (also the preferred size: Linux uses it as the
    /// default rsize/wsize), nanosecond times, links and symlinks.
    pub fn fsinfo(&self, fh: &Fh) -> NfsResult<FSINFO3resok> {
        let attr = self.getattr_sync(fh)?;
        let s = sys::fstatvfs(self.inner.root.as_fd()).map_err(io_err)?;
        let block = u32::try_from(s.bsize).unwrap_or(4096).clamp(512, MAX_IO);
        Ok(FSINFO3resok {
            obj_attributes: post_op_attr::Some(attr),
            rtmax: MAX_IO,
            rtpref: MAX_IO,
            rtmult: block,
            wtmax: MAX_IO,
            wtpref: MAX_IO,
            wtmult: block,
            dtpref: 64 * 1024,
            maxfilesize: i64::MAX as u64,
            time_delta: nfstime3 {
                seconds: 0,
                nseconds: 1,
            },
            properties: FSF3_LINK | FSF3_SYMLINK | FSF3_HOMOGENEOUS | FSF3_CANSETTIME,
        })
    }

    /// PATHCONF: names up to 255 bytes, longer ones refused (not truncated).
    pub fn pathconf(&self, fh: &Fh) -> NfsResult<PATHCONF3resok> {
        let attr = self.getattr_sync(fh)?;
        Ok(PATHCONF3resok {
            obj_attributes: post_op_attr::Some(attr),
            // ext4's limit; file systems with a lower one answer EMLINK → NFS3ERR_MLINK.
            linkmax: 65_000,
            name_max: NAME_MAX,
            no_trunc: true,
            chown_restricted: true,
            case_insensitive: false,
            case_preserving: true,
        })
    }
}

/// Opens `cname` in `dir` for writing: made new with `mode` when absent (`true`), or,
/// unless `guarded`, the existing file (`false`) — so the caller knows whether it made
/// it. An existing directory or symlink under that name is `EXIST`.
fn open_or_create(
    dir: &OwnedFd,
    cname: &CString,
    mode: u32,
    guarded: bool,
) -> NfsResult<(OwnedFd, bool)> {
    let flags = libc::O_WRONLY | libc::O_NONBLOCK;
    let exist = |e: std::io::Error| match e.raw_os_error() {
        Some(libc::EISDIR) | Some(libc::ELOOP) => nfsstat3::NFS3ERR_EXIST,
        _ => io_err(e),
    };
    // Twice at most: a name removed between the two opens is made on the second try.
    for _ in 0..2 {
        match sys::openat(
            dir.as_fd(),
            cname,
            flags | libc::O_CREAT | libc::O_EXCL,
            mode,
        ) {
            Ok(fd) => return Ok((fd, true)),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && !guarded => {}
            Err(e) => return Err(exist(e)),
        }
        match sys::openat(dir.as_fd(), cname, flags, 0) {
            Ok(fd) => return Ok((fd, false)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(exist(e)),
        }
    }
    Err(nfsstat3::NFS3ERR_JUKEBOX)
}

/// Removes the entry a refused call made, if `cname` still names it (`made`).
fn remove_new(dir: &OwnedFd, cname: &CString, made: &Stat, is_dir: bool) {
    if sys::statx(dir.as_fd(), cname).is_ok_and(|st| st.ino == made.ino) {
        let _ = sys::unlinkat(dir.as_fd(), cname, is_dir);
    }
}

/// The exclusive-create verifier as two times in seconds (atime, mtime).
fn verifier_times(verf: &createverf3) -> (i64, i64) {
    let half = |b: &[u8]| {
        let mut w = [0u8; 4];
        w.copy_from_slice(b);
        i64::from(u32::from_be_bytes(w))
    };
    (half(&verf.0[..4]), half(&verf.0[4..]))
}

/// The device number a MKNOD of a device asks for.
fn device(d: &nfs3_types::nfs3::devicedata3) -> libc::dev_t {
    libc::makedev(d.spec.specdata1, d.spec.specdata2)
}

/// MOUNT's status for a failed lookup on the way.
fn mount_status(s: nfsstat3) -> mountstat3 {
    match s {
        nfsstat3::NFS3ERR_NOENT | nfsstat3::NFS3ERR_STALE => mountstat3::MNT3ERR_NOENT,
        nfsstat3::NFS3ERR_NOTDIR | nfsstat3::NFS3ERR_INVAL => mountstat3::MNT3ERR_NOTDIR,
        nfsstat3::NFS3ERR_ACCES | nfsstat3::NFS3ERR_PERM => mountstat3::MNT3ERR_ACCES,
        nfsstat3::NFS3ERR_NAMETOOLONG => mountstat3::MNT3ERR_NAMETOOLONG,
        _ => mountstat3::MNT3ERR_IO,
    }
}

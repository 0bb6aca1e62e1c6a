//! The procedures that only look, on the jail's resolution (`mod.rs`): GETATTR,
//! LOOKUP (and `..`, never above the export), READ — the copy path's read into a reply
//! and the sendfile path's open file — and FSSTAT.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::time::Instant;

use nfs3_types::nfs3::{FSSTAT3resok, fattr3, nfsstat3, post_op_attr};

use super::{DirFs, Fh, MAX_IO, NfsResult, check_name, io_err};
use crate::identity::Access;
use crate::sys::{self, Stat};

impl DirFs {
    /// GETATTR (also the attributes every other reply carries).
    pub fn attr(&self, fh: &Fh) -> NfsResult<fattr3> {
        self.getattr_sync(fh)
    }

    pub(super) fn getattr_sync(&self, fh: &Fh) -> NfsResult<fattr3> {
        Ok(self.fattr(&self.stat(fh)?))
    }

    /// The object's stat, times with all their bits (NFSv4's `nfstime4` carries 64-bit
    /// seconds where `fattr3` has 32 unsigned).
    pub fn stat(&self, fh: &Fh) -> NfsResult<Stat> {
        // Hot path (every READ starts with a GETATTR): a file already open answers with
        // one fstat. An unlinked file (nlink 0) falls through to the full check.
        let cached = self.inner.fds.get(fh.ino(), false);
        if let Some(file) = cached.or_else(|| self.inner.fds.get(fh.ino(), true)) {
            match sys::fstat(file.as_fd()) {
                Ok(st) if Self::matches(fh, &st) && st.nlink > 0 => return Ok(st),
                _ => self.inner.fds.remove(fh.ino()),
            }
        }
        Ok(*self.locate(fh)?.stat())
    }

    /// LOOKUP (and NFSv4's LOOKUPP, OPEN by name, SECINFO): the object's handle and
    /// attributes, and the directory's attributes (`None` when the directory itself
    /// cannot be reached). The caller must be able to search the directory (`ACCES`
    /// otherwise, `..` and `.` included), as with kernel nfsd.
    pub fn lookup(&self, dirfh: &Fh, name: &[u8]) -> (NfsResult<(Fh, fattr3)>, post_op_attr) {
        let (dir, dst) = match self.dir_fd(dirfh) {
            Ok(d) => d,
            Err(s) => return (Err(s), post_op_attr::None),
        };
        let r = self
            .may_in_dir(&dir, &dst, Access::SEARCH)
            .and_then(|()| self.lookup_in(&dir, &dst, dirfh, name))
            .and_then(|(fh, st)| {
                let attr = match st {
                    Some(st) => self.fattr(&st),
                    None => self.getattr_sync(&fh)?,
                };
                Ok((fh, attr))
            });
        (r, post_op_attr::Some(self.fattr(&dst)))
    }

    /// The `(inode, birth time)` of `name` in `dirfh` as the server sees it (a file
    /// system mounted there included, which `lookup` refuses), after the caller's
    /// search check: NFSv4 compares it with other exports' roots to cross into them.
    pub fn child_id(&self, dirfh: &Fh, name: &[u8]) -> NfsResult<(u64, u64)> {
        let (dir, dst) = self.dir_fd(dirfh)?;
        self.may_in_dir(&dir, &dst, Access::SEARCH)?;
        let cname = check_name(name)?;
        let st = sys::statx(dir.as_fd(), &cname).map_err(io_err)?;
        Ok((st.ino, st.btime))
    }

    /// A lookup as the server, checking nothing of the caller: MOUNT's walk to the
    /// directory it mounts (kernel nfsd's `rpc.mountd` resolves the path as root too;
    /// every call on the handle it gives is checked).
    pub(super) fn lookup_sync(&self, dirfh: &Fh, name: &[u8]) -> NfsResult<Fh> {
        let (dir, dst) = self.dir_fd(dirfh)?;
        self.lookup_in(&dir, &dst, dirfh, name).map(|(fh, _)| fh)
    }

    /// Resolves one name in an open directory; the stat comes along when it was taken.
    pub(super) fn lookup_in(
        &self,
        dir: &OwnedFd,
        dst: &Stat,
        dirfh: &Fh,
        name: &[u8],
    ) -> NfsResult<(Fh, Option<Stat>)> {
        if name == b"." {
            return Ok((*dirfh, Some(*dst)));
        }
        if name == b".." {
            // Never above the export: `..` of the root is the root.
            if dst.ino == self.inner.root_ino {
                return Ok((self.root_fh(), None));
            }
            let parent = self
                .inner
                .nodes
                .get(dst.ino)
                .ok_or(nfsstat3::NFS3ERR_STALE)?;
            let path = self
                .inner
                .nodes
                .path(parent.parent, self.inner.root_ino)
                .ok_or(nfsstat3::NFS3ERR_STALE)?;
            let fd = self
                .open_rel(&path, libc::O_PATH | libc::O_DIRECTORY)
                .map_err(io_err)?;
            let st = sys::fstat(fd.as_fd()).map_err(io_err)?;
            return Ok((self.fh_of(&st), Some(st)));
        }
        let cname = check_name(name)?;
        let st = sys::statx(dir.as_fd(), &cname).map_err(io_err)?;
        if st.dev != self.inner.root_dev {
            // A mount point inside the export: not part of it (no crossmnt).
            return Err(nfsstat3::NFS3ERR_ACCES);
        }
        self.inner.nodes.insert(st.ino, dst.ino, name);
        Ok((self.fh_of(&st), Some(st)))
    }

    /// READ's copy path: appends the payload straight into the reply being built
    /// (`out`), so the data is copied once, from the page cache. Returns the attributes
    /// (taken before the read, as [`DirFs::open_read`] does for the sendfile path), the
    /// byte count and EOF.
    pub fn read_into(
        &self,
        fh: &Fh,
        offset: u64,
        count: u32,
        out: &mut Vec<u8>,
    ) -> Result<(fattr3, u32, bool), (nfsstat3, Option<fattr3>)> {
        let start = Instant::now();
        let r = (|| {
            let attr = self.getattr_sync(fh).map_err(|s| (s, None))?;
            if !self.may_read(&attr) {
                return Err((nfsstat3::NFS3ERR_ACCES, Some(attr)));
            }
            let count = count.min(MAX_IO) as usize;
            let file = self.file(fh, false).map_err(|s| (s, Some(attr.clone())))?;
            let base = out.len();
            out.resize(base + count, 0);
            let mut n = 0;
            while n < count {
                match file.read_at(&mut out[base + n..], offset + n as u64) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        out.truncate(base);
                        return Err((io_err(e), Some(attr.clone())));
                    }
                }
            }
            out.truncate(base + n);
            let eof = n < count || offset + n as u64 >= attr.size;
            Ok((attr, n as u32, eof))
        })();
        let bytes = r.as_ref().map_or(0, |(_, n, _)| u64::from(*n));
        let rec: NfsResult<()> = r.as_ref().map(drop).map_err(|(s, _)| *s);
        self.record("READ", start, &rec, bytes);
        r
    }

    /// FSSTAT from the real file system (statvfs).
    pub fn fsstat(&self, fh: &Fh) -> NfsResult<FSSTAT3resok> {
        let start = Instant::now();
        let r = (|| {
            let attr = self.getattr_sync(fh)?;
            let s = sys::fstatvfs(self.inner.root.as_fd()).map_err(io_err)?;
            Ok(FSSTAT3resok {
                obj_attributes: post_op_attr::Some(attr),
                tbytes: s.blocks.saturating_mul(s.frsize),
                fbytes: s.bfree.saturating_mul(s.frsize),
                abytes: s.bavail.saturating_mul(s.frsize),
                tfiles: s.files,
                ffiles: s.ffree,
                afiles: s.favail,
                invarsec: 0,
            })
        })();
        self.record("FSSTAT", start, &r, 0);
        r
    }

    /// READ without the copy: the attributes (taken before the data is sent) and the open
    /// file, from which the guard sends the data with `sendfile`. The vfs phase is
    /// recorded by the caller once the data is out ([`DirFs::record_read`]).
    pub fn open_read(
        &self,
        fh: &Fh,
    ) -> Result<
        (nfs3_types::nfs3::fattr3, std::sync::Arc<std::fs::File>),
        (nfsstat3, Option<nfs3_types::nfs3::fattr3>),
    > {
        let attr = self.getattr_sync(fh).map_err(|s| (s, None))?;
        if !self.may_read(&attr) {
            return Err((nfsstat3::NFS3ERR_ACCES, Some(attr)));
        }
        let file = self.file(fh, false).map_err(|s| (s, Some(attr.clone())))?;
        Ok((attr, file))
    }

    /// Records a READ's file-system phase (`vfs`), as `read_into` does.
    pub fn record_read(&self, start: Instant, r: Result<u64, nfsstat3>) {
        let bytes = *r.as_ref().unwrap_or(&0);
        self.record("READ", start, &r, bytes);
    }
}

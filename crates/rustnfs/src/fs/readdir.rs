//! READDIR/READDIRPLUS pages: getdents64 from the cookie, which is the kernel's own
//! directory offset (`d_off`), so paging is exact for any directory size.

use std::collections::VecDeque;
use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};

use nfs3_types::nfs3::{fattr3, nfsstat3};

use super::{DirFs, Fh, NfsResult, io_err};
use crate::identity::Access;
use crate::sys::{self, Stat};

/// One listed entry: name, inode, the cookie that resumes after it, and (for
/// READDIRPLUS) its attributes and handle (`None` for a mount point inside the export).
/// `plus` is `None` in a READDIRPLUS listing when the caller may read the directory but
/// not search it: kernel nfsd then lists the names without attributes or handles (its
/// per-entry lookup needs search permission), and so does this server.
pub struct Entry {
    pub name: Vec<u8>,
    pub fileid: u64,
    pub cookie: u64,
    pub plus: Option<(fattr3, Option<Fh>)>,
}

/// Reads a directory from a cookie on; entries come one at a time, so a reply takes
/// only what fits and the next call resumes from the last cookie sent.
pub struct DirIter {
    fs: DirFs,
    fd: OwnedFd,
    /// The directory's attributes when it was opened (the reply's `dir_attributes`).
    pub stat: Stat,
    buf: Vec<u8>,
    pending: VecDeque<sys::Dirent>,
    done: bool,
    /// READDIRPLUS, and the caller may search the directory: each entry is stat'ed.
    plus: bool,
}

impl DirFs {
    /// Opens `dirfh` for listing from `cookie` (0 = the start); `plus` also stats each
    /// entry (and remembers where it lives, for later handle resolution). The caller must
    /// be able to read the directory (`ACCES` otherwise), and to search it for `plus`
    /// to give attributes (see [`Entry`]), as with kernel nfsd.
    pub fn dir_iter(&self, dirfh: &Fh, cookie: u64, plus: bool) -> NfsResult<DirIter> {
        let (fd, st) = self.open_obj(dirfh, libc::O_RDONLY | libc::O_DIRECTORY)?;
        self.may_in_dir(&fd, &st, Access::LIST)?;
        let plus = plus && self.may_in_dir(&fd, &st, Access::SEARCH).is_ok();
        sys::seek_dir(fd.as_fd(), cookie).map_err(|_| nfsstat3::NFS3ERR_BAD_COOKIE)?;
        Ok(DirIter {
            fs: self.clone(),
            fd,
            stat: st,
            buf: vec![0u8; 32 * 1024],
            pending: VecDeque::new(),
            done: false,
            plus,
        })
    }
}

impl DirIter {
    /// The next entry, `None` at the end of the directory.
    pub fn next_entry(&mut self) -> Option<NfsResult<Entry>> {
        loop {
            let Some(e) = self.pending.pop_front() else {
                if self.done {
                    return None;
                }
                let mut v = Vec::new();
                match sys::getdents(self.fd.as_fd(), &mut self.buf, &mut v) {
                    Ok(more) => {
                        self.done = !more;
                        self.pending.extend(v);
                    }
                    Err(e) => return Some(Err(io_err(e))),
                }
                continue;
            };
            if !self.plus {
                return Some(Ok(Entry {
                    name: e.name,
                    fileid: e.ino,
                    cookie: e.off,
                    plus: None,
                }));
            }
            let Ok(name) = CString::new(e.name.as_slice()) else {
                continue;
            };
            match sys::statx(self.fd.as_fd(), &name) {
                Ok(st) => {
                    self.fs.inner.nodes.insert(st.ino, self.stat.ino, &e.name);
                    let plus = Some((self.fs.fattr(&st), self.fs.handle_of(&st)));
                    return Some(Ok(Entry {
                        name: e.name,
                        fileid: e.ino,
                        cookie: e.off,
                        plus,
                    }));
                }
                // Removed since getdents saw it: skip, as a later listing would.
                Err(_) => continue,
            }
        }
    }
}

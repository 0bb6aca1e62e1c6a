//! READDIR/READDIRPLUS pages: getdents64 from the cookie, which is the kernel's own
//! directory offset (`d_off`), so paging is exact for any directory size. A listing can
//! also be given whole (the NFSv4 pseudo-filesystem's directories, see `exports`), and
//! can show another export's root where one is mounted in the directory (NFSv4 crosses
//! into nested exports).

use std::collections::HashMap;
use std::sync::Arc;

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

/// Other exports' roots by `(inode, birth time)`: a listed entry that is one shows that
/// export's root attributes and handle instead of its own (NFSv4's view of nested
/// exports).
pub type Crossings = Arc<HashMap<(u64, u64), (fattr3, Fh)>>;

/// Reads a directory from a cookie on; entries come one at a time, so a reply takes
/// only what fits and the next call resumes from the last cookie sent.
pub struct DirIter {
    /// The directory's attributes when it was opened (the reply's `dir_attributes`).
    attr: fattr3,
    source: Source,
}

enum Source {
    /// A real directory of an export.
    Dir(Box<Reading>),
    /// A listing given whole, in cookie order.
    Listed(VecDeque<Entry>),
}

struct Reading {
    fs: DirFs,
    fd: OwnedFd,
    stat: Stat,
    buf: Vec<u8>,
    pending: VecDeque<sys::Dirent>,
    done: bool,
    /// READDIRPLUS, and the caller may search the directory: each entry is stat'ed.
    plus: bool,
    crossings: Option<Crossings>,
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
            attr: self.fattr(&st),
            source: Source::Dir(Box::new(Reading {
                fs: self.clone(),
                fd,
                stat: st,
                buf: vec![0u8; 32 * 1024],
                pending: VecDeque::new(),
                done: false,
                plus,
                crossings: None,
            })),
        })
    }
}

impl DirIter {
    /// A listing given whole: `entries` in cookie order, those after `cookie` listed.
    pub fn listed(attr: fattr3, entries: Vec<Entry>, cookie: u64) -> DirIter {
        DirIter {
            attr,
            source: Source::Listed(entries.into_iter().filter(|e| e.cookie > cookie).collect()),
        }
    }

    /// Shows these exports' roots where they are entries of this directory.
    pub fn crossing(mut self, crossings: Crossings) -> DirIter {
        if let Source::Dir(r) = &mut self.source {
            r.crossings = Some(crossings);
        }
        self
    }

    /// The directory's attributes when it was opened.
    pub fn attr(&self) -> fattr3 {
        self.attr.clone()
    }

    /// The next entry, `None` at the end of the directory.
    pub fn next_entry(&mut self) -> Option<NfsResult<Entry>> {
        match &mut self.source {
            Source::Dir(r) => r.next_entry(),
            Source::Listed(entries) => entries.pop_front().map(Ok),
        }
    }
}

impl Reading {
    fn next_entry(&mut self) -> Option<NfsResult<Entry>> {
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
                    let crossed = self
                        .crossings
                        .as_ref()
                        .and_then(|c| c.get(&(st.ino, st.btime)));
                    let plus = match crossed {
                        Some((attr, fh)) => Some((attr.clone(), Some(*fh))),
                        None => Some((self.fs.fattr(&st), self.fs.handle_of(&st))),
                    };
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
